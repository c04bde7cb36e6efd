//! A channel end over MPI, [`MpiEnd`]: one [`Path`] per end, chosen when the set is wired
//! (`MpiCtx::wire` in `crate::env`) and matched once in every call, as crossbeam-channel
//! dispatches its flavors.
//!
//! * **Node-local** (`crate::node`): to a rank of this node, chan-core's one-sided protocol
//!   ([`chan_core::backend::OneSidedEnd`]) over the set's MPI shared window. The `OneSidedEnd` keeps its
//!   own close state.
//! * **Two-sided** (`crate::twosided`): MPI sends and receives with credits, to a rank of
//!   another node, to every peer under `AIAC_MPI_REMOTE=1`, and on a node where no shared
//!   window could be made. Its close moves the core into the rank's closing registry
//!   ([`World`]), which steps every closing channel of the rank on each wait; the path says so
//!   ([`Path::Closing`]), and no call can reach a core the end gave away.

use crate::env::World;
use crate::node::NodeEnd;
use crate::raw;
use crate::twosided::{Core, MpiDelivery};
use chan_core::backend::{
    Arrival, CloseReport, Header, MailboxTransport, RacyPoll, RacyTransport, Shared, Slots,
    Transport,
};
use chan_core::{AtomicF64Slice, CommError};
use std::rc::Rc;

/// The path of one end, and how far a two-sided end's close has come.
enum Path<D: MpiDelivery> {
    /// To a rank of this node, through the set's shared window.
    NodeLocal(NodeEnd<D>),
    /// Two-sided and open: the end owns its core.
    TwoSided(Core),
    /// Two-sided, after `begin_close`: the core is in the rank's closing registry under this
    /// id until `finish_close` takes the outcome (or, if the end is dropped first, until the
    /// close completes).
    Closing(u64),
    /// Two-sided, after `finish_close`: nothing of the end is left.
    Closed,
}

impl<D: MpiDelivery> std::fmt::Debug for Path<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::NodeLocal(end) => f.debug_tuple("NodeLocal").field(end).finish(),
            Path::TwoSided(core) => f
                .debug_struct("TwoSided")
                .field("peer", &core.peer())
                .finish(),
            Path::Closing(id) => f.debug_tuple("Closing").field(id).finish(),
            Path::Closed => f.write_str("Closed"),
        }
    }
}

/// A call on a two-sided end after its close began. chan-core's channel makes none (its close
/// consumes it); the transport is public, so it is an error rather than a panic.
#[cold]
fn after_close(call: &'static str) -> CommError {
    raw::misuse(call, "the channel end's close has begun")
}

/// One end of a channel over MPI: [`MpiEnd<Slots>`] carries Sync and Async channels,
/// [`MpiEnd<Shared>`] Racy ones. An end to a rank of this node takes the node-local path
/// (chan-core's one-sided transport over a shared window), any other the two-sided path
/// ([`MpiEnd::is_node_local`]); on each, the send side, the close and the drop are the same
/// code for every delivery.
///
/// After `begin_close` a two-sided end's core belongs to the rank's closing registry: until
/// `finish_close`, its other calls fail (or, for those that cannot, `data` and `view` are
/// empty, `peer_closed` is true and `peer_sent_total` is `None`).
pub struct MpiEnd<D: MpiDelivery> {
    world: Rc<World>,
    path: Path<D>,
}

impl<D: MpiDelivery> MpiEnd<D> {
    /// An end on the two-sided path.
    pub(crate) fn two_sided(world: Rc<World>, core: Core) -> Self {
        MpiEnd {
            world,
            path: Path::TwoSided(core),
        }
    }

    /// An end on the node-local path.
    pub(crate) fn node_local(world: Rc<World>, end: NodeEnd<D>) -> Self {
        MpiEnd {
            world,
            path: Path::NodeLocal(end),
        }
    }

    /// True when this end writes its peer's memory through a shared window (a rank of this
    /// node), false when it sends two-sided messages.
    pub fn is_node_local(&self) -> bool {
        matches!(self.path, Path::NodeLocal(_))
    }
}

impl<D: MpiDelivery> Transport for MpiEnd<D> {
    fn in_flight(&mut self) -> Result<usize, CommError> {
        self.world.progress_closing();
        match &mut self.path {
            Path::NodeLocal(end) => end.in_flight(),
            Path::TwoSided(core) => core.in_flight(&self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("in_flight")),
        }
    }
    fn can_send(&mut self) -> Result<bool, CommError> {
        self.world.progress_closing();
        match &mut self.path {
            Path::NodeLocal(end) => end.can_send(),
            Path::TwoSided(core) => core.can_send(&self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("can_send")),
        }
    }
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        match &mut self.path {
            Path::NodeLocal(end) => end.send_with(header, fill),
            Path::TwoSided(core) => core.send_with(header, fill, &self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("send")),
        }
    }
    /// The node-local path copies `data` straight into the peer's memory; the two-sided one
    /// into a send slot.
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        match &mut self.path {
            Path::NodeLocal(end) => end.send_from(header, data),
            Path::TwoSided(core) => core.send_with(
                header,
                |buf| buf.copy_from_slice(data),
                &self.world.requests,
            ),
            Path::Closing(_) | Path::Closed => Err(after_close("send")),
        }
    }
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        match &mut self.path {
            Path::NodeLocal(end) => end.stage_with(fill),
            Path::TwoSided(core) => core.stage_with(fill),
            Path::Closing(_) | Path::Closed => Err(after_close("stage")),
        }
    }
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        match &mut self.path {
            Path::NodeLocal(end) => end.start_staged(header),
            Path::TwoSided(core) => core.start_staged(header, &self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("send_staged")),
        }
    }
    /// The node-local path's wait ([`MpiPeer`](crate::MpiPeer)'s `relax`: it steps the
    /// closing channels and progresses MPI while requests are outstanding). Otherwise the
    /// rank's [`WaitPolicy`](chan_core::backend::WaitPolicy): with a core per rank it
    /// busy-polls, as `MPI_Wait` does: every step of MPI's rendezvous protocol waits for the
    /// other rank's progress, and a `sched_yield` between polls delays each step. On an
    /// oversubscribed node it backs off and yields (Open MPI's progress engine, which every
    /// poll runs, then yields too when it finds nothing to do).
    fn relax(&mut self, spins: u32) {
        match &mut self.path {
            Path::NodeLocal(end) => end.relax(spins),
            Path::TwoSided(_) | Path::Closing(_) | Path::Closed => self.world.relax(spins),
        }
    }
    /// Under SimGrid's SMPI a two-sided end blocks in `MPI_Waitsome` on its own requests
    /// ([`Core::block`](crate::twosided::Core::block)): simulated time then jumps to the
    /// completion, where a poll loop paid SMPI's cost of a test per poll and one engine run
    /// each. Elsewhere a poll is cheap and blocking in MPI would only add its own latency:
    /// [`Transport::relax`].
    fn await_own(&mut self, spins: u32) -> Result<(), CommError> {
        match &mut self.path {
            Path::TwoSided(core) if self.world.simulated => {
                self.world.progress_closing();
                core.block(&self.world.requests)
            }
            _ => {
                self.relax(spins);
                Ok(())
            }
        }
    }
    /// Two-sided: what `can_send` found. The channel asks this after `can_send` returned
    /// false, which tested the control receive (one progress call for both).
    fn peer_closed(&mut self) -> bool {
        match &mut self.path {
            Path::NodeLocal(end) => end.peer_closed(),
            Path::TwoSided(core) => core.peer_total_seen().is_some(),
            // Nothing more goes to the peer: waiting for a slot is futile.
            Path::Closing(_) | Path::Closed => true,
        }
    }
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError> {
        // By value: a two-sided core whose close began moves to the rank's closing registry.
        let (path, begun) = match std::mem::replace(&mut self.path, Path::Closed) {
            Path::NodeLocal(mut end) => {
                let begun = end.begin_close(sent);
                (Path::NodeLocal(end), begun)
            }
            Path::TwoSided(mut core) => {
                debug_assert_eq!(
                    sent,
                    core.sent(),
                    "the channel and its transport count alike"
                );
                match core.begin_close(&self.world.requests) {
                    Ok(()) => (Path::Closing(self.world.start_closing(core, true)), Ok(())),
                    // Not begun: the end keeps its core (its Drop closes it).
                    Err(e) => (Path::TwoSided(core), Err(e)),
                }
            }
            path @ (Path::Closing(_) | Path::Closed) => (path, Err(after_close("begin_close"))),
        };
        self.path = path;
        begun
    }
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        let id = match &mut self.path {
            Path::NodeLocal(end) => return end.finish_close(),
            Path::Closing(id) => *id,
            Path::TwoSided(_) | Path::Closed => {
                return Err(raw::misuse("close", "finish_close without begin_close"))
            }
        };
        self.path = Path::Closed;
        let mut spins = 0u32;
        loop {
            // Every closing channel of this rank, not only this one (see env::World).
            self.world.progress_closing();
            if let Some(outcome) = self.world.take_closed(id) {
                return outcome;
            }
            self.world.relax(spins);
            spins = spins.saturating_add(1);
        }
    }
}

impl<D: MpiDelivery> Drop for MpiEnd<D> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.path, Path::Closed) {
            Path::TwoSided(mut core) => {
                // Dropped without a close: announce it, and let the rank finish the close in
                // the background (the channel calls that test requests, and finalize,
                // progress it).
                if let Err(e) = core.begin_close(&self.world.requests) {
                    eprintln!("aiac (mpi): closing a dropped channel: {e}");
                }
                self.world.start_closing(core, false);
            }
            // Dropped between the halves of a close (mid-`close_all`): nobody collects it.
            Path::Closing(id) => self.world.disown(id),
            // A node-local end announces its close in its own Drop (chan-core's
            // `OneSidedEnd`), which runs here.
            Path::NodeLocal(_) | Path::Closed => {}
        }
    }
}

impl<D: MpiDelivery> std::fmt::Debug for MpiEnd<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiEnd")
            .field("delivery", &std::any::type_name::<D>())
            .field("path", &self.path)
            .finish()
    }
}

impl MailboxTransport for MpiEnd<Slots> {
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
        self.world.progress_closing();
        match &mut self.path {
            Path::NodeLocal(end) => end.poll(out),
            Path::TwoSided(core) => core.poll(out, &self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("poll")),
        }
    }
    fn data(&self, slot: usize) -> &[f64] {
        match &self.path {
            Path::NodeLocal(end) => end.data(slot),
            Path::TwoSided(core) => core.data(slot),
            Path::Closing(_) | Path::Closed => &[],
        }
    }
    fn release(&mut self, slot: usize) -> Result<(), CommError> {
        match &mut self.path {
            Path::NodeLocal(end) => end.release(slot),
            Path::TwoSided(core) => core.release(slot, &self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("release")),
        }
    }
    /// Two-sided: what the polls found. Each `poll` tests the control receive beside the
    /// data (one progress call for both), and the channel asks this after a poll.
    fn peer_sent_total(&mut self) -> Option<u64> {
        match &mut self.path {
            Path::NodeLocal(end) => end.peer_sent_total(),
            Path::TwoSided(core) => core.peer_total_seen(),
            // The close's report carries it.
            Path::Closing(_) | Path::Closed => None,
        }
    }
}

impl RacyTransport for MpiEnd<Shared> {
    fn poll(&mut self) -> Result<RacyPoll, CommError> {
        self.world.progress_closing();
        match &mut self.path {
            Path::NodeLocal(end) => end.poll(),
            Path::TwoSided(core) => core.poll_racy(&self.world.requests),
            Path::Closing(_) | Path::Closed => Err(after_close("poll")),
        }
    }
    fn view(&self) -> &AtomicF64Slice {
        match &self.path {
            Path::NodeLocal(end) => end.view(),
            Path::TwoSided(core) => core.view(),
            Path::Closing(_) | Path::Closed => AtomicF64Slice::from_atomics(&[]),
        }
    }
}
