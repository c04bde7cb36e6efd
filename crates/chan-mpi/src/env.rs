//! The MPI environment: initialisation, the rank's [`MpiCtx`] (chan-core's collectives and
//! channel hooks: wiring an agreed set), and a finalize that leaves no request behind.

use crate::comm::MpiComm;
use crate::neighbor::NeighborAlltoallv;
use crate::node::{layout, MpiPeer, Node, NodeEnd, TWO_SIDED};
use crate::pair::LivePairs;
use crate::raw::{self, check, Requests};
use crate::reduce::{Iallreduce, Ibarrier, MpiReduction, ReductionKind};
use crate::transport::MpiEnd;
use crate::twosided::{Core, MpiDelivery, RecvKind, Wire, HDR};
use crate::vars::{remote_from_env, wait_policy};
use crate::Mpi;
use chan_core::backend::CloseReport;
use chan_core::backend::{
    vote, Agreed, ChannelHooks, Collective, Delivery, EnvVarError, Lists, PairAgreed, PairOffer,
    ReservedTags, Shared, Slots, WaitPolicy,
};
use chan_core::{
    ChannelSpec, CommError, CreateError, NeighborExchange, NeighborSpec, ReduceOp, TreeReduction,
};
use mpi::ffi;
use mpi::traits::AsRaw;
use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_void};
use std::rc::Rc;
use std::time::Instant;

/// The tag of `all_to_all_v`'s lists on the world's communicator, where no other
/// point-to-point message travels.
const LISTS_TAG: c_int = 1;

/// MPI could not be started.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// MPI was initialised already in this process (by aiac or by other code).
    #[error("MPI is already initialised in this process")]
    AlreadyInitialized,
    /// Setting up aiac's communicator failed.
    #[error("setting up the MPI communicator: {0}")]
    Comm(#[from] CommError),
    /// An environment variable aiac reads (`AIAC_WAIT`, `AIAC_MPI_REMOTE`) holds a value it
    /// does not accept.
    #[error(transparent)]
    Env(#[from] EnvVarError),
}

/// `finalize` found something wrong. MPI is finalized anyway (or, with channels still open,
/// will be when the last of them is dropped).
#[derive(Debug, thiserror::Error)]
pub enum FinalizeError {
    /// Channels, reductions, windows or communicators ([`MpiComm`](crate::MpiComm)) of this
    /// rank are still alive; MPI is finalized when the last one is dropped.
    #[error("{0} channel end(s), reduction(s), window(s) or communicator(s) still open at finalize; close or free them first")]
    StillOpen(usize),
    /// Requests were still active after every channel closed: a bug in aiac.
    #[error("{0} MPI request(s) still outstanding at finalize")]
    Outstanding(i64),
    /// A dropped channel's background close failed.
    #[error("closing dropped channels: {0}")]
    Comm(#[from] CommError),
}

/// A channel end whose close has begun: its core, whether its channel still waits for the
/// outcome (`finish_close`) or was dropped, and the outcome once the close completed.
struct Closing {
    id: u64,
    core: Core,
    owned: bool,
    outcome: Option<Result<CloseReport, CommError>>,
}

/// One rank's MPI world, which its context, channel ends, reductions and windows share (each
/// holds an `Rc`, so MPI stays initialised while any of them lives): aiac's communicator, the
/// count of active requests, the node's ranks, the wait policy, and the channel ends whose
/// close has begun. Dropping the last holder finalizes MPI.
///
/// ## Why one registry of closing channels
/// A close completes only when the peer's receives match this end's outstanding sends, and a
/// receive slot that completed without being tested is not posted again until its channel is
/// stepped. A rank that waited on one channel's close while another of its closing channels
/// sat untested could wait for a peer that waits for it. So every wait for a close steps every
/// closing channel of the rank, and channels dropped without a close are simply closing
/// channels nobody waits for.
pub(crate) struct World {
    pub(crate) comm: ffi::MPI_Comm,
    pub(crate) requests: Requests,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    tag_ub: c_int,
    closing: RefCell<Vec<Closing>>,
    /// Entries in `closing` whose close has not completed (cheap test on every call).
    unfinished: Cell<usize>,
    next_id: Cell<u64>,
    universe: RefCell<Option<mpi::environment::Universe>>,
    shut: Cell<bool>,
    /// How waiting loops wait between polls (oversubscribed node: back off and yield).
    pub(crate) wait: WaitPolicy,
    /// The ranks of this node.
    pub(crate) node: Node,
    /// `AIAC_MPI_REMOTE=1` on some rank, or a simulated run: every end takes the two-sided
    /// path.
    pub(crate) remote: bool,
    /// The MPI library is SimGrid's SMPI ([`MpiCtx::simulated`]).
    pub(crate) simulated: bool,
    /// Channel ends opened so far; those whose peer runs on this node; those of them on the
    /// node-local path; those alive on it (each holds the Rc of this twice).
    pub(crate) ends_opened: Cell<u64>,
    pub(crate) ends_to_node: Cell<u64>,
    pub(crate) node_ends: Cell<u64>,
    pub(crate) node_live: Cell<usize>,
    /// The communicator of every pairwise channel (`pair.rs`), and the numbers of this
    /// rank's pairwise offers; freed at shutdown, after the cores that hold it.
    pair_comm: RefCell<Option<Rc<SetComm>>>,
    pair_nonce: Cell<u64>,
    /// The (peer, tag) of this rank's pairwise channels whose core still exists.
    pair_live: LivePairs,
}

impl World {
    /// `MPI_TAG_UB` of aiac's communicators.
    pub(crate) fn tag_ub(&self) -> c_int {
        self.tag_ub
    }

    /// The communicator of every pairwise channel.
    pub(crate) fn pair_comm(&self) -> Rc<SetComm> {
        Rc::clone(
            self.pair_comm
                .borrow()
                .as_ref()
                .expect("the pairwise communicator lives until shutdown"),
        )
    }

    /// The (peer, tag) of this rank's pairwise channels whose core still exists.
    pub(crate) fn pair_live(&self) -> LivePairs {
        Rc::clone(&self.pair_live)
    }

    /// A number no earlier pairwise offer of this rank had.
    pub(crate) fn next_pair_nonce(&self) -> u64 {
        let n = self.pair_nonce.get() + 1;
        self.pair_nonce.set(n);
        n
    }

    /// Take over a core whose `begin_close` ran: it is stepped by every wait of this rank from
    /// now on. `owned`: a channel will collect the outcome with [`World::take_closed`];
    /// otherwise (dropped) the entry goes once its close completes.
    pub(crate) fn start_closing(&self, core: Core, owned: bool) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.closing.borrow_mut().push(Closing {
            id,
            core,
            owned,
            outcome: None,
        });
        self.unfinished.set(self.unfinished.get() + 1);
        id
    }

    /// The node, when ends to its ranks take the node-local path (not `AIAC_MPI_REMOTE=1`, and
    /// shared windows can be made there).
    pub(crate) fn local(&self) -> Option<&Node> {
        (!self.remote && self.node.has_windows()).then_some(&self.node)
    }

    /// Run MPI's progress engine once (`MPI_Iprobe`, which matches nothing): for waits that
    /// make no MPI call of their own (node-local ends).
    pub(crate) fn progress(&self) {
        let mut flag: c_int = 0;
        let mut status = raw::empty_status();
        // SAFETY: aiac's communicator, valid until shutdown; flag and status are locals.
        let rc = unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.comm,
                &mut flag,
                &mut status,
            )
        };
        // A failing probe changes nothing: the wait goes on, and the calls it waits for
        // report the error.
        let _ = rc;
    }

    /// Wait once between the polls of a loop: the rank's [`WaitPolicy`]; under SimGrid's SMPI
    /// an `MPI_Iprobe` instead, whose cost SMPI injects as simulated time (`smpi/iprobe`): a
    /// poll loop there moves the simulated clock only through MPI calls that cost time, and
    /// aiac's runs set the cost of a test to zero (scripts/scale: each injected cost runs
    /// the simulation's engine, and SMPI 3.32 slows down with every one).
    pub(crate) fn relax(&self, spins: u32) {
        if self.simulated {
            chan_core::backend::IdleStreak::note_relax();
            self.progress();
        } else {
            self.wait.relax(spins);
        }
    }

    /// Advance every close in progress (cheap when there is none: inlined into every channel
    /// call, it is one load and a branch).
    #[inline]
    pub(crate) fn progress_closing(&self) {
        if self.unfinished.get() != 0 {
            self.step_closing();
        }
    }

    #[cold]
    fn step_closing(&self) {
        let Ok(mut all) = self.closing.try_borrow_mut() else {
            return;
        };
        for c in all.iter_mut().filter(|c| c.outcome.is_none()) {
            let outcome = match c.core.step_close(&self.requests) {
                Ok(false) => continue,
                Ok(true) => Ok(c.core.report()),
                Err(e) => Err(e),
            };
            if let (false, Err(e)) = (c.owned, &outcome) {
                eprintln!("aiac (mpi): closing a dropped channel: {e}");
            }
            c.outcome = Some(outcome);
            self.unfinished.set(self.unfinished.get() - 1);
        }
        // Dropped channels whose close completed are freed now (nothing of theirs is active;
        // after an error, Core's Drop leaks what might still be).
        all.retain(|c| c.owned || c.outcome.is_none());
    }

    /// The outcome of an owned close once it completed; the entry is removed.
    pub(crate) fn take_closed(&self, id: u64) -> Option<Result<CloseReport, CommError>> {
        let mut all = self.closing.borrow_mut();
        let i = all.iter().position(|c| c.id == id && c.outcome.is_some())?;
        all.swap_remove(i).outcome
    }

    /// The owner of a close went away before collecting it (dropped mid-`close_all`).
    pub(crate) fn disown(&self, id: u64) {
        let mut all = self.closing.borrow_mut();
        if let Some(c) = all.iter_mut().find(|c| c.id == id) {
            c.owned = false;
        }
        all.retain(|c| c.owned || c.outcome.is_none());
    }

    /// Finish the closes still in progress, free the communicator and finalize MPI. Runs once.
    fn shutdown(&self) -> Result<(), FinalizeError> {
        if self.shut.replace(true) {
            return Ok(());
        }
        let mut first_err: Option<FinalizeError> = None;
        let mut spins = 0u32;
        while self.unfinished.get() > 0 {
            self.progress_closing();
            self.relax(spins);
            spins = spins.saturating_add(1);
        }
        for c in std::mem::take(&mut *self.closing.borrow_mut()) {
            if let Some(Err(e)) = c.outcome {
                first_err.get_or_insert(e.into());
            }
        }
        // The closes are finished and their cores gone: nothing else holds it.
        drop(self.pair_comm.borrow_mut().take());
        if let Err(e) = self.node.shutdown() {
            first_err.get_or_insert(e.into());
        }
        let outstanding = self.requests.outstanding();
        if outstanding != 0 && first_err.is_none() {
            first_err = Some(FinalizeError::Outstanding(outstanding));
        }
        let mut comm = self.comm;
        // SAFETY: comm is aiac's own duplicate of MPI_COMM_WORLD, freed exactly once (shut flag).
        if let Err(e) = check(unsafe { ffi::MPI_Comm_free(&mut comm) }, "MPI_Comm_free") {
            first_err.get_or_insert(e.into());
        }
        // Dropping rsmpi's Universe calls MPI_Finalize.
        drop(self.universe.borrow_mut().take());
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("aiac (mpi): at finalize: {e}");
        }
    }
}

/// The communicator of one collectively opened set of channels: a duplicate of aiac's
/// communicator, freed when the last channel of the set has closed.
///
/// A set of its own keeps MPI's matching cheap: a channel re-posts a receive after every
/// message, and an incoming message is matched by scanning the receives posted for its source
/// on its communicator. On one shared communicator a channel's receive queues behind those of
/// every other channel to the same peer (measured: a 20 KB ping-pong 1.3× slower with 18
/// channels open to the peer than on a set of its own, where it is 1.04× raw MPI).
pub(crate) struct SetComm(ffi::MPI_Comm);

impl SetComm {
    /// The communicator's handle, valid while this value lives.
    pub(crate) fn raw(&self) -> ffi::MPI_Comm {
        self.0
    }
}

impl Drop for SetComm {
    fn drop(&mut self) {
        // SAFETY: this handle was made by MPI_Comm_dup for this SetComm alone and is freed
        // once, here. MPI is still initialised: cores (the only holders besides the opening
        // call) are dropped by their transports or by the world's shutdown before it
        // finalizes, and an `MpiComm` holds the world until after its SetComm dropped.
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.0) };
        if let Err(e) = check(rc, "MPI_Comm_free") {
            eprintln!("aiac (mpi): freeing a channel set's communicator: {e}");
        }
    }
}

/// Collective over `comm`: a duplicate of it whose errors come back as values.
fn dup_comm(comm: ffi::MPI_Comm) -> Result<Rc<SetComm>, CommError> {
    // SAFETY: null handle constant, overwritten by MPI_Comm_dup below.
    let mut set = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: comm is aiac's valid communicator, and every rank of it makes this call (the
    // callers are collective); `set` receives the new handle.
    let rc = unsafe { ffi::MPI_Comm_dup(comm, &mut set) };
    check(rc, "MPI_Comm_dup")?;
    let set = Rc::new(SetComm(set));
    // SAFETY: a valid communicator just made; the constant is an immutable handle.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(set.raw(), ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler")?;
    Ok(set)
}

/// One MPI rank: chan-core's [`Context`](chan_core::Context) over MPI. Created once per process with
/// [`MpiCtx::init`]; MPI is finalized by [`MpiCtx::finalize`], or when the context and every
/// channel and reduction created from it have been dropped.
///
/// Not `Send`: MPI is initialised for calls from one thread (`MPI_THREAD_FUNNELED`), and every
/// channel end is bound to the thread that created it.
pub struct MpiCtx {
    world: Rc<World>,
    reserved_tags: ReservedTags,
    reduction_kind: ReductionKind,
    scratch: Vec<f64>,
}

impl std::fmt::Debug for MpiCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCtx")
            .field("rank", &self.world.rank)
            .field("size", &self.world.size)
            .finish()
    }
}

impl MpiCtx {
    /// Initialise MPI (`MPI_Init_thread`, funneled), aiac's own communicator (a duplicate of
    /// `MPI_COMM_WORLD` with `MPI_ERRORS_RETURN`, so that every error comes back as a value),
    /// and the node's communicator for the node-local path.
    ///
    /// Two variables of aiac's are read first (a value outside their range is
    /// [`InitError::Env`]): `AIAC_WAIT` (`spin` or `yield`; unset: yield when the launcher
    /// placed more ranks on the node than it has cores, see [`WaitPolicy`]) and
    /// `AIAC_MPI_REMOTE` (`1`: the two-sided path to every peer, see
    /// [`MpiCtx::remote_only`]).
    pub fn init() -> Result<Self, InitError> {
        Self::init_with_threads(1)
    }

    /// [`MpiCtx::init`] for a rank that keeps `threads` threads busy (its own included: a
    /// hybrid rank's team of workers): the wait policy counts the node's ranks × `threads`
    /// against its cores, so that a rank whose workers share cores with the other ranks'
    /// waits by yielding ([`WaitPolicy::Yield`]) rather than spinning beside a worker that
    /// needs the core.
    pub fn init_with_threads(threads: usize) -> Result<Self, InitError> {
        // Read before MPI starts: a bad value fails init without touching the library.
        let (wait, remote) = (wait_policy(threads)?, remote_from_env()?);
        // Under SimGrid's SMPI every rank is a simulated process inside one real one: ranks
        // on one simulated host share no memory a window could map for a peer that runs
        // between this rank's MPI calls, and simulated time moves only inside MPI calls. So
        // every end takes the two-sided path, and waits poll MPI without napping (a real
        // sleep only stalls the whole simulation; each poll is an MPI call that lets the
        // other ranks run). Can be asked before MPI starts.
        let simulated = is_smpi();
        let wait = if simulated { WaitPolicy::Spin } else { wait };
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or(InitError::AlreadyInitialized)?;
        let comm_world = universe.world();
        // SAFETY: MPI was just initialised; comm_world is its world communicator.
        let comm = unsafe { crate::raw::dup_returning_errors(comm_world.as_raw())? };
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        let mut attr: *mut c_int = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: comm is the valid duplicate of the world just made; each call writes only to
        // the local it is given; MPI_TAG_UB's attribute value is a pointer to an int that MPI
        // owns for the communicator's lifetime.
        unsafe {
            check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank")?;
            check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size")?;
            check(
                ffi::MPI_Comm_get_attr(
                    comm,
                    ffi::MPI_TAG_UB as c_int,
                    (&mut attr as *mut *mut c_int).cast::<c_void>(),
                    &mut flag,
                ),
                "MPI_Comm_get_attr",
            )?;
        }
        // The standard guarantees at least 32767.
        let tag_ub = if flag != 0 && !attr.is_null() {
            // SAFETY: MPI returned a valid pointer to the attribute's int (flag set).
            unsafe { *attr }
        } else {
            32767
        };
        let node = Node::new(comm, rank as usize)?;
        // The path is agreed: a rank that asked for two-sided ends (the variable may not reach
        // every node) gets them from all its peers.
        let mut any_remote = 0 as c_int;
        let asked = c_int::from(remote);
        // SAFETY: every rank of comm makes this call (init is collective); one int each way.
        let rc = unsafe {
            ffi::MPI_Allreduce(
                (&asked as *const c_int).cast::<c_void>(),
                (&mut any_remote as *mut c_int).cast::<c_void>(),
                1,
                raw::int_type(),
                raw::op(ReduceOp::Max),
                comm,
            )
        };
        check(rc, "MPI_Allreduce")?;
        let pair_comm = dup_comm(comm)?;
        Ok(MpiCtx {
            world: Rc::new(World {
                comm,
                requests: Requests::default(),
                rank: rank as usize,
                size: size as usize,
                tag_ub,
                closing: RefCell::new(Vec::new()),
                unfinished: Cell::new(0),
                next_id: Cell::new(0),
                universe: RefCell::new(Some(universe)),
                shut: Cell::new(false),
                wait,
                node,
                remote: any_remote != 0 || simulated,
                simulated,
                ends_opened: Cell::new(0),
                ends_to_node: Cell::new(0),
                node_ends: Cell::new(0),
                node_live: Cell::new(0),
                pair_comm: RefCell::new(Some(pair_comm)),
                pair_nonce: Cell::new(0),
                pair_live: LivePairs::default(),
            }),
            reserved_tags: ReservedTags::new(),
            reduction_kind: ReductionKind::default(),
            scratch: Vec::new(),
        })
    }

    /// Which algorithm [`Context::reduction`](chan_core::Context::reduction) builds from now on: `MPI_Iallreduce` (the
    /// default) or chan-core's binary tree over point-to-point channels. Every rank must choose
    /// the same (a reduction's creation is collective).
    pub fn set_reduction_kind(&mut self, kind: ReductionKind) {
        self.reduction_kind = kind;
    }

    /// How this rank's waiting loops wait: [`WaitPolicy::Yield`] on an oversubscribed node
    /// (more ranks × threads than cores, [`MpiCtx::init_with_threads`]), from `AIAC_WAIT` or
    /// the launcher's environment at init.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.world.wait
    }

    /// Non-blocking MPI operations started by aiac and not yet completed or cancelled.
    pub fn outstanding_requests(&self) -> i64 {
        self.world.requests.outstanding()
    }

    /// Finish the closes of channels dropped without `close()`, check that no request is left,
    /// and finalize MPI. Fails (and leaves MPI to be finalized when the last of them drops) if
    /// channels or reductions created from this context are still alive.
    pub fn finalize(self) -> Result<(), FinalizeError> {
        let world = self.world;
        match Rc::try_unwrap(world) {
            Ok(world) => world.shutdown(),
            // A node-local end holds the Rc twice (its MpiEnd and its MpiPeer).
            Err(world) => Err(FinalizeError::StillOpen(
                Rc::strong_count(&world) - 1 - world.node_live.get(),
            )),
        }
    }

    /// Abort every rank of the job with `code` (`MPI_Abort`): for a rank that cannot go on when
    /// the others are in a collective call and would wait for it forever.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: comm is valid until shutdown, which cannot have run while self exists.
        unsafe {
            ffi::MPI_Abort(self.world.comm, code);
        }
        std::process::exit(code)
    }

    /// The rank's MPI world (windows hold it, so MPI outlives them).
    pub(crate) fn world(&self) -> &Rc<World> {
        &self.world
    }

    /// True when `AIAC_MPI_REMOTE=1` (on any rank: the ranks agree at init) forced the
    /// two-sided path: no channel end writes its peer's memory through a shared window, as
    /// between ranks on different nodes.
    pub fn remote_only(&self) -> bool {
        self.world.remote
    }

    /// True when the MPI library is SimGrid's SMPI (`smpirun`): the ranks are simulated
    /// processes of one real one, on a simulated platform. Every end then takes the
    /// two-sided path ([`MpiCtx::remote_only`]) and every wait polls MPI without napping
    /// ([`WaitPolicy::Spin`]): simulated time moves only inside MPI calls.
    pub fn simulated(&self) -> bool {
        self.world.simulated
    }

    /// How many ranks of the job run on this rank's node, this one included.
    pub fn ranks_on_node(&self) -> usize {
        self.world.node.ranks()
    }

    /// Channel ends opened so far on this rank whose peer runs on this node, whichever path
    /// they took: all of them take the node-local path unless [`MpiCtx::remote_only`], or
    /// unless the node could make no shared window (then they fall back to the two-sided
    /// path, and [`MpiCtx::node_ends`] counts fewer).
    pub fn ends_to_node(&self) -> u64 {
        self.world.ends_to_node.get()
    }

    /// Channel ends opened so far on this rank that took the node-local path (a shared
    /// window to a rank of this node), out of [`MpiCtx::ends_opened`].
    pub fn node_ends(&self) -> u64 {
        self.world.node_ends.get()
    }

    /// Channel ends opened so far on this rank (tree reductions' included).
    pub fn ends_opened(&self) -> u64 {
        self.world.ends_opened.get()
    }

    /// Channel sets whose shared window is still allocated (closed ones included until
    /// reclaimed; sets without a node-local end have none).
    pub fn live_windows(&self) -> usize {
        self.world.node.live_sets()
    }

    /// Collective: free the shared window of every channel set whose ends every rank of the
    /// node has closed (or dropped); how many were freed. A closed channel's window cannot
    /// be freed by its close (the peer may still write into it until it closes its own end,
    /// and `MPI_Win_free` is collective), so it is freed here, after a vote, or at finalize;
    /// every channel creation calls this first, so a program that opens and closes channels
    /// repeatedly reuses the memory.
    pub fn reclaim(&mut self) -> Result<usize, CommError> {
        self.world.node.reclaim()
    }

    /// Collective: a communicator of the caller's own for raw MPI calls beside aiac's
    /// channels (a duplicate of aiac's, errors returned), freed when dropped; MPI stays
    /// initialised while it lives.
    pub fn communicator(&self) -> Result<MpiComm, CommError> {
        let comm = dup_comm(self.world.comm)?;
        Ok(MpiComm::new(comm, Rc::clone(&self.world)))
    }

    /// `MPI_Wtime`.
    pub fn wtime(&self) -> f64 {
        // SAFETY: no arguments; MPI is initialised while self exists.
        unsafe { ffi::MPI_Wtime() }
    }

    /// Wire the ends of an agreed set: a communicator of its own ([`SetComm`]), on which
    /// the k-th channel between two ranks (its ordinal, the same at both ends) uses MPI tags
    /// 2k (data) and 2k+1 (control); then each end's buffers and pre-posted receives.
    fn wire<D: MpiDelivery>(&mut self, agreed: Agreed<D>) -> Result<Vec<MpiEnd<D>>, CreateError> {
        // An error here is carried through the node's collectives below to the vote, so that
        // a rank that failed makes the same collective calls as the others.
        let set = self.dup_set();
        // The node-local ends' regions: this rank's segment of one shared window.
        let world = Rc::clone(&self.world);
        let node = world.local();
        let local_words = agreed
            .ends()
            .iter()
            .filter(|e| e.word != TWO_SIDED)
            .map(|e| {
                let shape = NodeEnd::<D>::shape(e.spec.config.len(), e.spec.config.max_in_flight());
                e.word as usize + shape.words().unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        let window = match node {
            Some(n) => n.alloc(local_words),
            None => Ok(None),
        };
        // Allocation can fail on one rank only: every rank learns of it.
        let window = set.and_then(|set| Ok((set, window?)));
        let (set, window) = vote(self, window.map_err(CreateError::from))?;
        let ends = agreed
            .ends()
            .iter()
            .map(|e| {
                let (len, r) = (e.spec.config.len(), e.spec.config.max_in_flight());
                self.world.ends_opened.set(self.world.ends_opened.get() + 1);
                if world.node.rank_of(e.spec.peer).is_some() {
                    self.world
                        .ends_to_node
                        .set(self.world.ends_to_node.get() + 1);
                }
                let peer_node = node.and_then(|n| n.rank_of(e.spec.peer));
                if let (Some((set, base)), Some(peer_node), false) = (
                    &window,
                    peer_node,
                    e.word == TWO_SIDED || e.peer_word == TWO_SIDED,
                ) {
                    let (remote, remote_words) = set.segment(peer_node)?;
                    let words = NodeEnd::<D>::shape(len, r).words();
                    let end = words.and_then(|w| w.checked_add(e.peer_word as usize));
                    if end.is_none_or(|end| end > remote_words) {
                        return Err(raw::misuse(
                            "channel creation",
                            format!("rank {}'s region lies outside its window", e.spec.peer),
                        )
                        .into());
                    }
                    let peer = MpiPeer::new(Rc::clone(&self.world), Rc::clone(set));
                    // SAFETY: both ranks laid out their regions of this shape in their own
                    // segments of this set's window (layout; offsets from the handshake; this
                    // rank's segment covers each of its regions, the peer's was checked
                    // above), zeroed before alloc's agreement; regions of a set never
                    // overlap; `peer` keeps the window allocated; the peer's segment is
                    // mapped here (shared query).
                    let end = unsafe {
                        NodeEnd::new(
                            peer,
                            e.spec.peer,
                            len,
                            r,
                            base.add(e.word as usize),
                            remote.add(e.peer_word as usize),
                            true,
                        )
                    };
                    debug_assert!(end.is_mapped());
                    self.world.node_ends.set(self.world.node_ends.get() + 1);
                    return Ok(MpiEnd::node_local(Rc::clone(&self.world), end));
                }
                let data_tag = 2 * e.ordinal as c_int;
                let wire = Wire {
                    comm: set.raw(),
                    peer: e.spec.peer,
                    data_tag,
                    ctrl_tag: data_tag + 1,
                };
                let recv = D::recv_mem(len + HDR, r);
                let kind = if self.world.simulated {
                    RecvKind::PostedEachTime
                } else {
                    RecvKind::Persistent
                };
                let core = Core::new(
                    wire,
                    Rc::clone(&set),
                    len,
                    r,
                    recv,
                    kind,
                    &self.world.requests,
                )?;
                Ok(MpiEnd::two_sided(Rc::clone(&self.world), core))
            })
            .collect();
        // Posting a receive can fail on one rank only: every rank learns of it.
        vote(self, ends)
    }

    /// Collective: the communicator of a new channel set, a duplicate of the world's whose
    /// errors come back as values.
    fn dup_set(&self) -> Result<Rc<SetComm>, CommError> {
        // Every rank of comm makes this call: creation is collective and the handshake's vote
        // passed everywhere.
        dup_comm(self.world.comm)
    }

    /// The counts of `lists` as MPI ints, and their displacements.
    fn counts_of(
        lists: impl Iterator<Item = usize>,
    ) -> Result<(Vec<c_int>, Vec<c_int>), CommError> {
        let counts = lists
            .map(|c| {
                c_int::try_from(c)
                    .map_err(|_| raw::misuse("collective", "a list exceeds MPI's int count"))
            })
            .collect::<Result<Vec<c_int>, _>>()?;
        let mut displs = Vec::with_capacity(counts.len());
        let mut acc: c_int = 0;
        for &c in &counts {
            displs.push(acc);
            acc = acc
                .checked_add(c)
                .ok_or_else(|| raw::misuse("collective", "lists exceed MPI's int count"))?;
        }
        Ok((counts, displs))
    }

    /// The second step of `all_to_all_v`: the non-empty lists, point to point on the world's
    /// communicator (which carries no other point-to-point message: channels have their own)
    /// under [`LISTS_TAG`]. Receives are posted first, then sends, then one `MPI_Waitall`:
    /// each rank waits for its own few requests only. A handshake's messages from one rank
    /// match in the order they were sent, and each rank's exchange ends before its next.
    fn exchange_lists(
        &self,
        mine: &[u64],
        (send_counts, sdispls): (&[c_int], &[c_int]),
        theirs: &mut [u64],
        (recv_counts, rdispls): (&[c_int], &[c_int]),
    ) -> Result<(), CommError> {
        let comm = self.world.comm;
        let mut reqs: Vec<ffi::MPI_Request> = Vec::new();
        let mut failed = None;
        for (peer, (&n, &at)) in recv_counts.iter().zip(rdispls).enumerate() {
            if n == 0 {
                continue;
            }
            let mut req = raw::request_null();
            // SAFETY: theirs holds sum(recv_counts) u64, so [at, at + n) is in it; the
            // ranges of different peers do not overlap; theirs is neither read nor moved
            // until the wait below (or the cancel and wait on failure) completes this
            // request. peer is a rank of comm.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    theirs.as_mut_ptr().add(at as usize).cast(),
                    n,
                    raw::u64_type(),
                    peer as c_int,
                    LISTS_TAG,
                    comm,
                    &mut req,
                )
            };
            if let Err(e) = check(rc, "MPI_Irecv") {
                failed = Some(e);
                break;
            }
            reqs.push(req);
        }
        let receives = reqs.len();
        if failed.is_none() {
            for (peer, (&n, &at)) in send_counts.iter().zip(sdispls).enumerate() {
                if n == 0 {
                    continue;
                }
                let mut req = raw::request_null();
                // SAFETY: mine holds sum(send_counts) u64, so [at, at + n) is in it, and it
                // is borrowed unchanged until the wait below completes this request.
                let rc = unsafe {
                    ffi::MPI_Isend(
                        mine.as_ptr().add(at as usize).cast(),
                        n,
                        raw::u64_type(),
                        peer as c_int,
                        LISTS_TAG,
                        comm,
                        &mut req,
                    )
                };
                if let Err(e) = check(rc, "MPI_Isend") {
                    failed = Some(e);
                    break;
                }
                reqs.push(req);
            }
        }
        if failed.is_some() {
            // A peer may never send what these receives wait for: they are cancelled (a
            // cancelled receive completes), so the wait below returns and no request is left.
            for req in &mut reqs[..receives] {
                // SAFETY: an active receive request posted above.
                let _ = unsafe { ffi::MPI_Cancel(req) };
            }
        }
        // SAFETY: reqs holds reqs.len() requests posted above, each active; the buffers they
        // use outlive this call.
        let rc = unsafe {
            ffi::MPI_Waitall(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        match failed {
            Some(e) => Err(e),
            None => check(rc, "MPI_Waitall"),
        }
    }
}

impl Collective for MpiCtx {
    fn rank(&self) -> usize {
        self.world.rank
    }

    fn size(&self) -> usize {
        self.world.size
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        // SAFETY: aiac's communicator is valid while self exists.
        check(unsafe { ffi::MPI_Barrier(self.world.comm) }, "MPI_Barrier")
    }

    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError> {
        let count = c_int::try_from(data.len()).map_err(|_| {
            raw::misuse(
                "all_reduce",
                format!("{} values exceed MPI's int count", data.len()),
            )
        })?;
        self.scratch.clear();
        self.scratch.extend_from_slice(data);
        // SAFETY: scratch and data hold data.len() f64 each and do not overlap.
        let rc = unsafe {
            ffi::MPI_Allreduce(
                self.scratch.as_ptr().cast(),
                data.as_mut_ptr().cast(),
                count,
                raw::double_type(),
                raw::op(op),
                self.world.comm,
            )
        };
        check(rc, "MPI_Allreduce")
    }

    /// `MPI_Alltoall` of the counts, then the lists themselves point to point, sparsely: a
    /// receive from each rank whose list here is not empty, a send to each rank whose list
    /// from here is not, then one wait for them all ([`MpiCtx::exchange_lists`]).
    ///
    /// `MPI_Alltoallv` would do the second step, but an implementation may post a receive and
    /// a send for every rank, empty lists included: SimGrid's SMPI does, which made the
    /// channels' creation handshake (each rank's lists empty but towards a few neighbours)
    /// grow as p² and kept 1,024 simulated ranks from starting (docs/scale.md).
    fn all_to_all_v(&mut self, send: &Lists) -> Result<Lists, CommError> {
        let size = self.world.size;
        if send.len() != size {
            return Err(raw::misuse(
                "all_to_all_v",
                format!("{} lists for {size} ranks", send.len()),
            ));
        }
        let (send_counts, sdispls) = Self::counts_of(send.counts())?;
        let mut recv_counts = vec![0 as c_int; size];
        // SAFETY: send_counts and recv_counts hold `size` ints each, one per rank of comm.
        let rc = unsafe {
            ffi::MPI_Alltoall(
                send_counts.as_ptr().cast(),
                1,
                raw::int_type(),
                recv_counts.as_mut_ptr().cast(),
                1,
                raw::int_type(),
                self.world.comm,
            )
        };
        check(rc, "MPI_Alltoall")?;
        let (recv_counts, rdispls) = Self::counts_of(recv_counts.iter().map(|&c| c as usize))?;
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let mut theirs = vec![0u64; total];
        self.exchange_lists(
            send.flat(),
            (&send_counts, &sdispls),
            &mut theirs,
            (&recv_counts, &rdispls),
        )?;
        Ok(Lists::from_flat(
            theirs,
            recv_counts.iter().map(|&c| c as usize),
        ))
    }

    /// `MPI_Gather` of the counts, then `MPI_Gatherv` of the words.
    fn gather_v(&mut self, mine: &[u64], root: usize) -> Result<Option<Lists>, CommError> {
        let (size, rank) = (self.world.size, self.world.rank);
        if root >= size {
            return Err(raw::misuse(
                "gather_v",
                format!("root {root} of {size} ranks"),
            ));
        }
        let (n, _) = Self::counts_of(std::iter::once(mine.len()))?;
        let at_root = rank == root;
        let mut counts = vec![0 as c_int; if at_root { size } else { 0 }];
        // SAFETY: one int sent from every rank; `counts` holds `size` ints at the root (the
        // receive buffer is not read elsewhere).
        let rc = unsafe {
            ffi::MPI_Gather(
                n.as_ptr().cast(),
                1,
                raw::int_type(),
                counts.as_mut_ptr().cast(),
                1,
                raw::int_type(),
                root as c_int,
                self.world.comm,
            )
        };
        check(rc, "MPI_Gather")?;
        let (counts, displs) = Self::counts_of(counts.iter().map(|&c| c as usize))?;
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0u64; total];
        // SAFETY: `mine` holds n[0] u64; at the root `all` has room for sum(counts) u64 at
        // displs, and the count arrays hold `size` entries (ignored elsewhere).
        let rc = unsafe {
            ffi::MPI_Gatherv(
                mine.as_ptr().cast(),
                n[0],
                raw::u64_type(),
                all.as_mut_ptr().cast(),
                counts.as_ptr(),
                displs.as_ptr(),
                raw::u64_type(),
                root as c_int,
                self.world.comm,
            )
        };
        check(rc, "MPI_Gatherv")?;
        Ok(at_root.then(|| Lists::from_flat(all, counts.iter().map(|&c| c as usize))))
    }
}

impl ChannelHooks for MpiCtx {
    type Backend = Mpi;
    type Reduction = MpiReduction;

    /// Frees the shared windows of sets every rank of the node closed (collective), then lays
    /// out this rank's node-local regions; each offset travels to the peer with the
    /// handshake (`u64::MAX` for an end to another node).
    fn declare<D: Delivery>(&mut self, specs: &[ChannelSpec]) -> Result<Vec<u64>, CreateError> {
        self.reclaim()?;
        Ok(layout::<D>(specs, self.world.local())?)
    }

    /// Tags 2k and 2k+1 for the k-th channel of a pair must fit under `MPI_TAG_UB`.
    fn max_channels_per_pair(&self) -> usize {
        (self.world.tag_ub as usize).div_ceil(2)
    }

    fn wire_slots(&mut self, agreed: Agreed<Slots>) -> Result<Vec<MpiEnd<Slots>>, CreateError> {
        self.wire(agreed)
    }

    fn wire_shared(&mut self, agreed: Agreed<Shared>) -> Result<Vec<MpiEnd<Shared>>, CreateError> {
        self.wire(agreed)
    }

    /// A (peer, tag) whose previous pairwise channel still exists is refused (`pair.rs`).
    fn pair_declare<D: Delivery>(&mut self, spec: &ChannelSpec) -> Result<u64, CreateError> {
        self.check_pair_free(spec)
    }

    /// Pairwise channels take the two-sided path (`pair.rs`): a node's shared window is
    /// collective.
    fn pair_meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        self.meet(spec, mine, deadline)
    }

    fn pair_wire_slots(&mut self, agreed: PairAgreed<Slots>) -> Result<MpiEnd<Slots>, CreateError> {
        self.wire_pair(agreed)
    }

    fn pair_wire_shared(
        &mut self,
        agreed: PairAgreed<Shared>,
    ) -> Result<MpiEnd<Shared>, CreateError> {
        self.wire_pair(agreed)
    }

    fn make_reduction(&mut self, len: usize, op: ReduceOp) -> Result<MpiReduction, CreateError> {
        Ok(match self.reduction_kind {
            ReductionKind::Iallreduce => {
                MpiReduction::Native(Iallreduce::new(Rc::clone(&self.world), len, op)?)
            }
            ReductionKind::Tree => MpiReduction::Tree(Box::new(TreeReduction::new(self, len, op)?)),
        })
    }

    fn make_barrier(&mut self) -> Result<MpiReduction, CreateError> {
        Ok(MpiReduction::Barrier(Ibarrier::new(Rc::clone(&self.world))))
    }

    fn make_neighbor_exchange(
        &mut self,
        peers: &[NeighborSpec],
    ) -> Result<Box<dyn NeighborExchange>, CreateError> {
        let local = NeighborAlltoallv::plan(&self.world, peers);
        // Every rank makes the graph or none does: its creation is collective.
        let plan = chan_core::backend::vote(self, local)?;
        // Making the graph or setting its error handler can fail on some ranks only: every
        // rank learns of it here, before any waits in an exchange the others never start. A
        // graph made here is then dropped, which frees its communicator.
        let made = NeighborAlltoallv::new(Rc::clone(&self.world), plan);
        Ok(Box::new(chan_core::backend::vote(self, made)?))
    }

    fn reserved_tags(&mut self) -> &mut ReservedTags {
        &mut self.reserved_tags
    }
}

/// True when the MPI library aiac runs on is SimGrid's SMPI, whose version string starts with
/// "SMPI" (`MPI_Get_library_version`, which may be called before MPI is initialised).
pub fn is_smpi() -> bool {
    mpi::environment::library_version().is_ok_and(|v| v.trim_start().starts_with("SMPI"))
}
