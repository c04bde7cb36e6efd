//! A channel end over MPI, [`MpiEnd`]: the two-sided path's core (`crate::twosided`) or the
//! node-local path's end (`crate::node`).

use crate::env::World;
use crate::node::NodeEnd;
use crate::raw;
use crate::twosided::{Core, MpiDelivery};
use chan_core::backend::{
    Arrival, CloseReport, Header, MailboxTransport, RacyPoll, RacyTransport, Shared, Slots,
    Transport,
};
use chan_core::{AtomicF64Slice, CommError};
use std::marker::PhantomData;
use std::rc::Rc;

/// One end of a channel over MPI: [`MpiEnd<Slots>`] carries Sync and Async channels,
/// [`MpiEnd<Shared>`] Racy ones. The send side, the close and the drop are the same code.
/// An end to a rank of the same node takes the node-local path instead (`crate::node`:
/// chan-core's one-sided transport over a shared window); every call goes to it.
pub struct MpiEnd<D: MpiDelivery> {
    world: Rc<World>,
    /// The core while the channel is open; in the rank's closing registry after `begin_close`.
    core: Option<Core>,
    closing: Option<u64>,
    /// The node-local end, for an end that takes that path (then `core` is `None`).
    node: Option<NodeEnd<D>>,
    _delivery: PhantomData<D>,
}

impl<D: MpiDelivery> MpiEnd<D> {
    pub(crate) fn new(world: Rc<World>, core: Core) -> Self {
        MpiEnd {
            world,
            core: Some(core),
            closing: None,
            node: None,
            _delivery: PhantomData,
        }
    }

    /// An end on the node-local path.
    pub(crate) fn node(world: Rc<World>, end: NodeEnd<D>) -> Self {
        MpiEnd {
            world,
            core: None,
            closing: None,
            node: Some(end),
            _delivery: PhantomData,
        }
    }

    /// True when this end writes its peer's memory through a shared window (a rank of this
    /// node), false when it sends two-sided messages.
    pub fn is_node_local(&self) -> bool {
        self.node.is_some()
    }

    /// The world's shared state and this end's core, borrowed apart. Only before
    /// `begin_close`, after which the channel calls nothing but `finish_close`.
    fn parts(&mut self) -> (&World, &mut Core) {
        let core = self
            .core
            .as_mut()
            .expect("a channel end is not used after its close began");
        (&self.world, core)
    }

    fn live_core(&self) -> &Core {
        self.core.as_ref().expect("a live transport has its core")
    }
}

impl<D: MpiDelivery> Transport for MpiEnd<D> {
    fn in_flight(&mut self) -> Result<usize, CommError> {
        self.world.progress_closing();
        if let Some(n) = &mut self.node {
            return n.in_flight();
        }
        let (world, core) = self.parts();
        core.in_flight(&world.requests)
    }
    fn can_send(&mut self) -> Result<bool, CommError> {
        self.world.progress_closing();
        if let Some(n) = &mut self.node {
            return n.can_send();
        }
        let (world, core) = self.parts();
        core.can_send(&world.requests)
    }
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.send_with(header, fill);
        }
        let (world, core) = self.parts();
        core.send_with(header, fill, &world.requests)
    }
    /// The node-local path copies `data` straight into the peer's memory; the two-sided one
    /// into a send slot.
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.send_from(header, data);
        }
        self.send_with(header, |buf| buf.copy_from_slice(data))
    }
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.stage_with(fill);
        }
        self.parts().1.stage_with(fill)
    }
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.start_staged(header);
        }
        let (world, core) = self.parts();
        core.start_staged(header, &world.requests)
    }
    /// The rank's [`WaitPolicy`](chan_core::backend::WaitPolicy). With a core per rank it
    /// busy-polls, as `MPI_Wait` does: every step of MPI's rendezvous protocol waits for the
    /// other rank's progress, and a `sched_yield` between polls delays each step. On an
    /// oversubscribed node it backs off and yields (Open MPI's progress engine, which every
    /// poll runs, then yields too when it finds nothing to do).
    fn relax(&mut self, spins: u32) {
        if let Some(n) = &mut self.node {
            return n.relax(spins);
        }
        self.world.wait.relax(spins);
    }
    /// What `can_send` found: the channel asks this after `can_send` returned false, which
    /// tested the control receive (one progress call for both).
    fn peer_closed(&mut self) -> bool {
        if let Some(n) = &mut self.node {
            return n.peer_closed();
        }
        self.parts().1.peer_total_seen().is_some()
    }
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.begin_close(sent);
        }
        let (world, core) = self.parts();
        debug_assert_eq!(
            sent,
            core.sent(),
            "the channel and its transport count alike"
        );
        core.begin_close(&world.requests)?;
        let core = self.core.take().expect("checked by parts()");
        self.closing = Some(self.world.start_closing(core, true));
        Ok(())
    }
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        if let Some(n) = &mut self.node {
            return n.finish_close();
        }
        let id = self
            .closing
            .take()
            .ok_or_else(|| raw::misuse("close", "finish_close without begin_close"))?;
        let mut spins = 0u32;
        loop {
            // Every closing channel of this rank, not only this one (see env::World).
            self.world.progress_closing();
            if let Some(outcome) = self.world.take_closed(id) {
                return outcome;
            }
            self.relax(spins);
            spins = spins.saturating_add(1);
        }
    }
}

impl<D: MpiDelivery> Drop for MpiEnd<D> {
    fn drop(&mut self) {
        if let Some(mut core) = self.core.take() {
            // Dropped without a close: announce it, and let the rank finish the close in
            // the background (the channel calls that test requests, and finalize, progress it).
            if let Err(e) = core.begin_close(&self.world.requests) {
                eprintln!("aiac (mpi): closing a dropped channel: {e}");
            }
            self.world.start_closing(core, false);
        }
        if let Some(id) = self.closing.take() {
            self.world.disown(id);
        }
    }
}

impl<D: MpiDelivery> std::fmt::Debug for MpiEnd<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiEnd")
            .field("delivery", &std::any::type_name::<D>())
            .field("peer", &self.core.as_ref().map(Core::peer))
            .field("node", &self.node)
            .finish()
    }
}

impl MailboxTransport for MpiEnd<Slots> {
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
        self.world.progress_closing();
        if let Some(n) = &mut self.node {
            return n.poll(out);
        }
        let (world, core) = self.parts();
        core.poll(out, &world.requests)
    }
    fn data(&self, slot: usize) -> &[f64] {
        if let Some(n) = &self.node {
            return n.data(slot);
        }
        self.live_core().data(slot)
    }
    fn release(&mut self, slot: usize) -> Result<(), CommError> {
        if let Some(n) = &mut self.node {
            return n.release(slot);
        }
        let (world, core) = self.parts();
        core.release(slot, &world.requests)
    }
    /// What the polls found: each `poll` tests the control receive beside the data (one
    /// progress call for both), and the channel asks this after a poll.
    fn peer_sent_total(&mut self) -> Option<u64> {
        if let Some(n) = &mut self.node {
            return n.peer_sent_total();
        }
        self.parts().1.peer_total_seen()
    }
}

impl RacyTransport for MpiEnd<Shared> {
    fn poll(&mut self) -> Result<RacyPoll, CommError> {
        self.world.progress_closing();
        if let Some(n) = &mut self.node {
            return n.poll();
        }
        let (world, core) = self.parts();
        core.poll_racy(&world.requests)
    }
    fn view(&self) -> &AtomicF64Slice {
        if let Some(n) = &self.node {
            return n.view();
        }
        self.live_core().view()
    }
}
