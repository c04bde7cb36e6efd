//! The SHMEM environment: initialisation, the PE's [`ShmemCtx`] (chan-core's `Context`), the
//! collective creation of channel sets, their collective reclamation, and finalize.

use crate::pair::{PairPiece, Pool};
use crate::sym::{barrier_all, quiet, shmem_err, Sym};
use crate::transport::{ShmemEnd, ShmemPeer};
use crate::vars::{default_osc, pool_bytes_from_env, remote_from_env, wait_policy};
use crate::Shmem;
use chan_core::backend::{
    vote, Agreed, AgreedEnd, ChannelHooks, Collective, Delivery, EnvVarError, Lists, PairAgreed,
    PairOffer, ReservedTags, Shared as SharedBuf, Slots, WaitPolicy,
};
use chan_core::{ChannelSpec, CommError, CreateError, ReduceOp, TreeReduction};
use openshmem_sys as ffi;
use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_long, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// SIGTERM held back while `shmem_init` runs, and its action put back after: Open MPI's
/// OSHMEM replaces it there with a handler that does nothing (to replace "other unpredictable
/// handlers"), which would make the PE ignore SIGTERM for the rest of its life.
///
/// The signal is blocked in the initialising thread, and so in every thread the library
/// starts meanwhile (they inherit the mask): a SIGTERM that arrives during init waits, and is
/// acted on as before once the action is back and the signal unblocked.
struct SigtermHeld {
    /// The action before init (none if it could not be read: then none is put back).
    action: Option<libc::sigaction>,
    /// This thread's signal mask before.
    mask: libc::sigset_t,
}

impl SigtermHeld {
    /// Block SIGTERM in this thread and save its action.
    fn hold() -> Self {
        // SAFETY: zeroed sigaction and sigset_t are valid values for the calls to fill in;
        // sigemptyset/sigaddset initialise `term` before it is used; a null new action only
        // reads the current one; pthread_sigmask changes this thread's mask alone.
        unsafe {
            let mut term: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut term);
            libc::sigaddset(&mut term, libc::SIGTERM);
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &term, &mut mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            let action = match libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) {
                0 => Some(old),
                _ => None,
            };
            SigtermHeld { action, mask }
        }
    }

    /// Put the action back, then the mask (a SIGTERM held meanwhile is acted on now).
    fn release(self) {
        // SAFETY: `action` is what sigaction(2) returned for this signal, so its handler (or
        // SIG_DFL, SIG_IGN), flags and mask are valid to install again; `mask` is the mask
        // pthread_sigmask returned for this thread.
        unsafe {
            if let Some(old) = self.action {
                libc::sigaction(libc::SIGTERM, &old, std::ptr::null_mut());
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut());
        }
    }
}

/// SHMEM could not be started.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `init` ran before in this process. OpenSHMEM starts once per process and cannot start
    /// again after `shmem_finalize`.
    #[error("OpenSHMEM was already initialised in this process (it starts once per process)")]
    AlreadyInitialized,
    /// The library refused to start.
    #[error("shmem error in {call}: {message}")]
    Library {
        /// The call that failed.
        call: &'static str,
        /// What it returned.
        message: String,
    },
    /// Setting up aiac's collective work arrays failed.
    #[error("setting up SHMEM collectives: {0}")]
    Comm(#[from] CommError),
    /// An environment variable aiac reads (`AIAC_WAIT`, `AIAC_SHMEM_REMOTE`) holds a value
    /// it does not accept.
    #[error(transparent)]
    Env(#[from] EnvVarError),
}

/// `finalize` found something wrong. SHMEM is finalized anyway, or, with channels still open,
/// when the last of them is dropped.
#[derive(Debug, thiserror::Error)]
pub enum FinalizeError {
    /// Channels, reductions or windows of this PE are still alive; SHMEM is finalized when the last
    /// one is dropped.
    #[error("{0} channel end(s), reduction(s) or window(s) still open at finalize; close or free them first")]
    StillOpen(usize),
}

/// 0: never initialised; 1: running; 2: finalized. Only `init`'s exchange from 0 reads it:
/// SHMEM starts at most once per process, and never again after its finalize. Accessed
/// `Relaxed`: only the exchange's atomicity matters, it publishes no other memory.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Values reduced per call of a `shmem_double_*_to_all` (longer all-reduces go in chunks).
const CHUNK: usize = 512;

/// One set's symmetric memory. Shared by the set's channel ends (which count themselves open
/// here) and the PE's list of sets, which frees it collectively.
pub(crate) struct SetMem {
    mem: RefCell<Option<Sym<u64>>>,
    open: Cell<usize>,
}

impl SetMem {
    pub(crate) fn opened(&self) {
        self.open.set(self.open.get() + 1);
    }
    pub(crate) fn closed(&self) {
        self.open.set(self.open.get() - 1);
    }
    /// Collective (see [`Sym::free`]).
    fn free(&self) {
        if let Some(m) = self.mem.borrow_mut().take() {
            m.free();
        }
    }
}

/// Symmetric work arrays of one collective call: pSync, pWrk, and symmetric source and target.
struct CollBufs {
    psync: Sym<c_long>,
    pwrk: Sym<f64>,
    src: Sym<f64>,
    dst: Sym<f64>,
}

/// aiac's collective machinery, used in turn.
///
/// ## Reuse of pSync
/// A pSync array may be used again once every PE has finished the collective that used it
/// last (OpenSHMEM 1.4, 9.9). Two sets of work arrays are used alternately, and every
/// collective aiac calls (`fcollect64`, `collect64`, the `*_to_all` reductions) completes at a
/// PE only after every PE entered it: when a PE starts collective k + 2 on set A, every PE has
/// entered k + 1, so every PE has returned from k, the last use of set A.
struct Coll {
    turn: usize,
    bufs: [CollBufs; 2],
    /// fcollect64 of two words per PE.
    gsrc: Sym<u64>,
    gdst: Sym<u64>,
}

impl Coll {
    fn new(size: usize) -> Result<Self, CommError> {
        let sync_len = [
            ffi::reduce_sync_size(),
            ffi::collect_sync_size(),
            ffi::bcast_sync_size(),
            ffi::barrier_sync_size(),
        ]
        .into_iter()
        .max()
        .unwrap_or(1)
        .max(1) as usize;
        let wrk_len = (CHUNK / 2 + 1).max(ffi::reduce_min_wrkdata_size().max(1) as usize);
        let mk = || -> Result<CollBufs, CommError> {
            Ok(CollBufs {
                psync: Sym::alloc_zeroed(sync_len)?,
                pwrk: Sym::alloc_zeroed(wrk_len)?,
                src: Sym::alloc_zeroed(CHUNK)?,
                dst: Sym::alloc_zeroed(CHUNK)?,
            })
        };
        let bufs = [mk()?, mk()?];
        let coll = Coll {
            turn: 0,
            bufs,
            gsrc: Sym::alloc_zeroed(2)?,
            gdst: Sym::alloc_zeroed(2 * size)?,
        };
        for b in &coll.bufs {
            // SAFETY: psync holds sync_len c_long, allocated above, read by nobody yet.
            let ps = unsafe { std::slice::from_raw_parts_mut(b.psync.ptr(), b.psync.len()) };
            ps.fill(ffi::sync_value());
        }
        // Every PE's pSync holds SHMEM_SYNC_VALUE before any PE uses it (9.9).
        barrier_all();
        Ok(coll)
    }

    fn next(&mut self) -> &CollBufs {
        self.turn ^= 1;
        &self.bufs[self.turn]
    }

    /// All-reduce `data` in place over every PE, CHUNK values per library call.
    fn all_reduce(&mut self, size: usize, data: &mut [f64], op: ReduceOp) {
        for chunk in data.chunks_mut(CHUNK) {
            let b = self.next();
            let n = chunk.len();
            // SAFETY: src holds CHUNK ≥ n f64, not in use by any collective (see Coll).
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), b.src.ptr(), n) };
            let f = match op {
                ReduceOp::Sum => ffi::shmem_double_sum_to_all,
                ReduceOp::Max => ffi::shmem_double_max_to_all,
                ReduceOp::Min => ffi::shmem_double_min_to_all,
            };
            // SAFETY: every PE calls this in the same order (all_reduce is collective) with the
            // same n; target, source, pWrk (≥ max(n/2 + 1, SHMEM_REDUCE_MIN_WRKDATA_SIZE)) and
            // pSync (≥ SHMEM_REDUCE_SYNC_SIZE, holding SHMEM_SYNC_VALUE) are symmetric and not
            // in use by another collective (alternation, see Coll).
            unsafe {
                f(
                    b.dst.ptr(),
                    b.src.ptr(),
                    n as c_int,
                    0,
                    0,
                    size as c_int,
                    b.pwrk.ptr(),
                    b.psync.ptr(),
                )
            };
            // SAFETY: dst holds the n results; the collective completed at this PE.
            unsafe { std::ptr::copy_nonoverlapping(b.dst.ptr(), chunk.as_mut_ptr(), n) };
        }
    }

    /// Every PE's two words, PE by PE.
    fn fcollect2(&mut self, size: usize, mine: [u64; 2]) -> Vec<u64> {
        // SAFETY: gsrc holds 2 words, used only here and not in use by a collective.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), self.gsrc.ptr(), 2) };
        let (gsrc, gdst) = (self.gsrc.ptr(), self.gdst.ptr());
        let b = self.next();
        // SAFETY: collective in the same order on every PE, 2 words each; target holds
        // 2 · size words; all arrays symmetric; pSync ≥ SHMEM_COLLECT_SYNC_SIZE at
        // SHMEM_SYNC_VALUE and not in use (see Coll). gsrc/gdst are reused only by the next
        // fcollect2, after at least one more collective (the handshake's collect64).
        unsafe {
            ffi::shmem_fcollect64(
                gdst.cast::<c_void>(),
                gsrc.cast::<c_void>(),
                2,
                0,
                0,
                size as c_int,
                b.psync.ptr(),
            )
        };
        let mut out = vec![0u64; 2 * size];
        // SAFETY: gdst holds 2 · size words, complete at this PE.
        unsafe { std::ptr::copy_nonoverlapping(gdst, out.as_mut_ptr(), 2 * size) };
        out
    }

    /// Every PE's variable-length list of words, concatenated in PE order (`counts[p]` words
    /// from PE p, `mine` from this one).
    fn collect(
        &mut self,
        size: usize,
        mine: &[u64],
        counts: &[usize],
    ) -> Result<Vec<u64>, CommError> {
        let max = counts.iter().copied().max().unwrap_or(0);
        let total: usize = counts.iter().sum();
        // Same sizes on every PE (the counts are everyone's): a symmetric allocation.
        let exch = Sym::<u64>::alloc_zeroed(max + total)?;
        barrier_all();
        // SAFETY: exch holds max ≥ mine.len() words of source, then `total` of target.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), exch.ptr(), mine.len()) };
        let b = self.next();
        // SAFETY: collective in the same order on every PE; source and target symmetric and
        // disjoint; target holds the sum of every PE's count; pSync as in fcollect2.
        unsafe {
            ffi::shmem_collect64(
                exch.ptr().add(max).cast::<c_void>(),
                exch.ptr().cast::<c_void>(),
                mine.len(),
                0,
                0,
                size as c_int,
                b.psync.ptr(),
            )
        };
        let mut out = vec![0u64; total];
        // SAFETY: the target part holds `total` words, complete at this PE.
        unsafe { std::ptr::copy_nonoverlapping(exch.ptr().add(max), out.as_mut_ptr(), total) };
        exch.free();
        Ok(out)
    }

    fn free(self) {
        let Coll {
            bufs, gsrc, gdst, ..
        } = self;
        for b in bufs {
            b.psync.free();
            b.pwrk.free();
            b.src.free();
            b.dst.free();
        }
        gsrc.free();
        gdst.free();
    }
}

/// State every channel end, reduction and the context of one PE share.
pub(crate) struct Shared {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    coll: RefCell<Option<Coll>>,
    /// Live channel sets, in creation order (the same list on every PE).
    sets: RefCell<Vec<Rc<SetMem>>>,
    shut: Cell<bool>,
    /// How waiting loops wait, and whether an empty poll yields (oversubscribed node).
    pub(crate) wait: WaitPolicy,
    /// `AIAC_SHMEM_REMOTE=1`: no peer is mapped with `shmem_ptr`; every send is a put.
    pub(crate) remote: bool,
    /// Channel ends opened so far, and those of them that write their peer's memory through
    /// `shmem_ptr`.
    pub(crate) ends_opened: Cell<u64>,
    pub(crate) mapped_ends: Cell<u64>,
    /// The pool of pairwise channels' regions and rendezvous slots (`pair.rs`).
    pub(crate) pool: Rc<Pool>,
}

impl Shared {
    fn with_coll<T>(&self, f: impl FnOnce(&mut Coll) -> T) -> T {
        let mut c = self.coll.borrow_mut();
        f(c.as_mut().expect("collectives exist until shutdown"))
    }

    /// Complete every put, free every set and work array (collectively, in creation order:
    /// every PE has the same list), and finalize. Runs once.
    fn shutdown(&self) {
        if self.shut.replace(true) {
            return;
        }
        quiet();
        // shmem_free's own barrier may come after the local free: make sure every PE's puts
        // into these sets have completed first.
        barrier_all();
        for s in self.sets.borrow_mut().drain(..) {
            s.free();
        }
        self.pool.free();
        if let Some(c) = self.coll.borrow_mut().take() {
            c.free();
        }
        // SAFETY: called once (the shut flag), by every PE at its finalize; nothing of aiac
        // uses SHMEM afterwards (every channel and reduction held an Rc to this).
        unsafe { ffi::shmem_finalize() };
        STATE.store(2, Ordering::Relaxed);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One processing element: chan-core's [`Context`](chan_core::Context) over OpenSHMEM. Created once per process
/// with [`ShmemCtx::init`]; SHMEM is finalized by [`ShmemCtx::finalize`] (collective), or when
/// the context and every channel and reduction created from it have been dropped.
///
/// Not `Send`: SHMEM is initialised with `SHMEM_THREAD_FUNNELED`, and every channel end is
/// bound to the thread that created it.
pub struct ShmemCtx {
    sh: Rc<Shared>,
    reserved_tags: ReservedTags,
    /// The pool piece (offset, words) of the pairwise end being created.
    pending_pair: Option<(usize, usize)>,
}

impl std::fmt::Debug for ShmemCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmemCtx")
            .field("pe", &self.sh.rank)
            .field("n_pes", &self.sh.size)
            .finish()
    }
}

impl ShmemCtx {
    /// Start OpenSHMEM (`shmem_init_thread`, funneled) and aiac's collective work arrays.
    ///
    /// With Open MPI 4.1's OSHMEM, `shmem_finalize` crashes unless Open MPI's one-sided
    /// components are limited to `sm,ucx`: when `OMPI_MCA_osc` is not set, this sets it so in the
    /// process's environment before initialising. Call `init` before starting threads that
    /// read the environment.
    ///
    /// Two variables of aiac's are read first (a value outside their range is
    /// [`InitError::Env`]): `AIAC_WAIT` (`spin` or `yield`; unset: yield when the launcher
    /// placed more PEs on the node than it has cores, see [`WaitPolicy`]) and
    /// `AIAC_SHMEM_REMOTE` (`1`: take the between-nodes path to every peer, see
    /// [`ShmemCtx::remote_only`]).
    ///
    /// SIGTERM keeps the action it had before: Open MPI's OSHMEM replaces it, in
    /// `shmem_init`, with a handler that does nothing, and a PE would ignore SIGTERM (`kill`,
    /// a batch system's stop) and run on to the end of its work. One that arrives during
    /// init is acted on after it.
    pub fn init() -> Result<Self, InitError> {
        Self::init_with_threads(1)
    }

    /// [`ShmemCtx::init`] for a PE that keeps `threads` threads busy (its own included: a
    /// hybrid rank's team of workers): the wait policy counts the node's PEs × `threads`
    /// against its cores, so that a PE whose workers share cores with the other PEs' waits by
    /// yielding ([`WaitPolicy::Yield`]) rather than spinning beside a worker that needs the
    /// core.
    pub fn init_with_threads(threads: usize) -> Result<Self, InitError> {
        // Read before SHMEM starts: a bad value fails init without touching the library.
        let (wait, remote) = (wait_policy(threads)?, remote_from_env()?);
        let pool_bytes = pool_bytes_from_env()?;
        if STATE
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Err(InitError::AlreadyInitialized);
        }
        default_osc();
        let mut provided: c_int = -1;
        let sigterm = SigtermHeld::hold();
        // SAFETY: first and only initialisation of this process (STATE); provided is a local.
        let rc = unsafe { ffi::shmem_init_thread(ffi::thread_funneled(), &mut provided) };
        sigterm.release();
        if rc != 0 {
            return Err(InitError::Library {
                call: "shmem_init_thread",
                message: format!("returned {rc}"),
            });
        }
        // SAFETY: no arguments; SHMEM is initialised.
        let (rank, size) = unsafe { (ffi::shmem_my_pe(), ffi::shmem_n_pes()) };
        if rank < 0 || size <= 0 || rank >= size {
            return Err(InitError::Library {
                call: "shmem_my_pe/shmem_n_pes",
                message: format!("PE {rank} of {size}"),
            });
        }
        let mut coll = Coll::new(size as usize)?;
        // The pool must be the same size on every PE (symmetric): the largest asked for.
        let mut asked = [pool_bytes as f64];
        coll.all_reduce(size as usize, &mut asked, ReduceOp::Max);
        let pool = Pool::new(size as usize, asked[0] as usize)?;
        // Every PE zeroed its pool before any PE puts into it.
        barrier_all();
        Ok(ShmemCtx {
            sh: Rc::new(Shared {
                rank: rank as usize,
                size: size as usize,
                coll: RefCell::new(Some(coll)),
                sets: RefCell::new(Vec::new()),
                shut: Cell::new(false),
                wait,
                remote,
                ends_opened: Cell::new(0),
                mapped_ends: Cell::new(0),
                pool: Rc::new(pool),
            }),
            reserved_tags: ReservedTags::new(),
            pending_pair: None,
        })
    }

    /// Collective: free and finalize. Fails (and leaves SHMEM to be finalized when the last
    /// of them drops) if channels or reductions created from this context are still alive.
    /// Every channel set's memory is freed here, collectively, before `shmem_finalize`.
    pub fn finalize(self) -> Result<(), FinalizeError> {
        match Rc::try_unwrap(self.sh) {
            Ok(sh) => {
                sh.shutdown();
                Ok(())
            }
            Err(sh) => Err(FinalizeError::StillOpen(Rc::strong_count(&sh) - 1)),
        }
    }

    /// End the program on every PE with `status` (`shmem_global_exit`): for a PE that cannot
    /// go on while the others wait for it in a collective call.
    pub fn abort(&self, status: i32) -> ! {
        // SAFETY: SHMEM is initialised while self exists.
        unsafe { ffi::shmem_global_exit(status) };
        std::process::exit(status)
    }

    /// The PE's shared state (windows hold it, so SHMEM outlives them).
    pub(crate) fn shared(&self) -> &Rc<Shared> {
        &self.sh
    }

    /// How this PE's waiting loops wait: [`WaitPolicy::Yield`] on an oversubscribed node
    /// (more PEs than cores), from `AIAC_WAIT` or the launcher's environment at init.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.sh.wait
    }

    /// True when `AIAC_SHMEM_REMOTE=1` forced the between-nodes path at init: no peer's
    /// memory is mapped with `shmem_ptr`, so a racy send is a bulk put into a landing buffer
    /// that the receiver copies into its view, as between PEs on different nodes.
    pub fn remote_only(&self) -> bool {
        self.sh.remote
    }

    /// Channel ends opened so far on this PE whose sends write the peer's memory in place,
    /// mapped with `shmem_ptr` (a peer on this node): a mailbox end fills the peer's slot and
    /// stores its acknowledgements, a racy end writes the peer's buffer. Ends to other nodes,
    /// and every end under `AIAC_SHMEM_REMOTE=1`, put instead. Out of
    /// [`ShmemCtx::ends_opened`].
    pub fn mapped_ends(&self) -> u64 {
        self.sh.mapped_ends.get()
    }

    /// Channel ends opened so far on this PE (tree reductions' included).
    pub fn ends_opened(&self) -> u64 {
        self.sh.ends_opened.get()
    }

    /// Channel sets whose memory is still allocated (closed ones included until reclaimed).
    pub fn live_sets(&self) -> usize {
        self.sh.sets.borrow().len()
    }

    /// Collective: free the symmetric memory of every channel set whose ends are all closed
    /// (or dropped) on every PE; the number of sets freed.
    ///
    /// A closed channel's memory cannot be freed by its close: the peer may still put into it
    /// until it closes its own end, and `shmem_free` is collective. So it is freed here, after
    /// a vote, or at [`ShmemCtx::finalize`]; [`chan_core::Context::open`] calls this first, so a program
    /// that opens and closes channels repeatedly reuses the heap.
    pub fn reclaim(&mut self) -> Result<usize, CommError> {
        let n = self.sh.sets.borrow().len();
        if n == 0 {
            return Ok(0);
        }
        // Every put this PE made (into any set) completes before it votes.
        quiet();
        let mut votes: Vec<f64> = self
            .sh
            .sets
            .borrow()
            .iter()
            .map(|s| if s.open.get() == 0 { 1.0 } else { 0.0 })
            .collect();
        let size = self.sh.size;
        self.sh
            .with_coll(|c| c.all_reduce(size, &mut votes, ReduceOp::Min));
        if votes.iter().all(|&v| v == 0.0) {
            return Ok(0);
        }
        // Every PE entered the vote after its quiet: no put into these sets is outstanding,
        // and none will come (every end is closed). shmem_free's barrier may follow the local
        // free, which is harmless now.
        let mut sets = self.sh.sets.borrow_mut();
        let mut freed = 0;
        let mut i = 0;
        sets.retain(|s| {
            let gone = votes[i] == 1.0;
            i += 1;
            if gone {
                s.free();
                freed += 1;
            }
            !gone
        });
        Ok(freed)
    }

    /// Lay out this PE's inbound regions, one per spec, in one set: their word offsets (the
    /// handshake carries each to the peer, which puts there).
    fn layout<D: Delivery>(specs: &[ChannelSpec]) -> Result<Vec<u64>, CreateError> {
        let mut cursor = 0usize;
        specs
            .iter()
            .map(|s| {
                let shape = ShmemEnd::<D>::shape(s.config.len(), s.config.max_in_flight());
                let at = cursor;
                cursor = shape
                    .words()
                    .and_then(|w| cursor.checked_add(w))
                    .ok_or_else(|| {
                        shmem_err(
                            "channel creation",
                            "channel set too large for the address space",
                        )
                    })?;
                Ok(at as u64)
            })
            .collect()
    }

    /// Wire an agreed set: one symmetric allocation of the largest size any PE needs (the
    /// heap stays symmetric only if every PE allocates the same), zeroed, and a barrier before
    /// any put; then each end over its region (offset `word`) and the peer's (`peer_word`).
    fn wire<D: Delivery>(&mut self, agreed: Agreed<D>) -> Result<Vec<ShmemEnd<D>>, CreateError> {
        let shape = |e: &AgreedEnd| {
            ShmemEnd::<D>::shape(e.spec.config.len(), e.spec.config.max_in_flight())
        };
        let need = agreed
            .ends()
            .iter()
            .map(|e| e.word as usize + shape(e).words().unwrap_or(0))
            .max()
            .unwrap_or(0);
        // Exact in f64: a set's words fit in 2^53 long before they fit in memory.
        let mut words = [need as f64];
        self.all_reduce(&mut words, ReduceOp::Max)?;
        let words = words[0] as usize;
        let mem = if words > 0 {
            Sym::<u64>::alloc_zeroed(words).map(Some)
        } else {
            Ok(None)
        };
        // An allocation can fail on one PE only: every PE learns of it before the barrier.
        let mem = vote(self, mem.map_err(CreateError::from))?;
        // Every PE zeroed its copy before any PE puts into it.
        barrier_all();
        let base = mem.as_ref().map_or(std::ptr::null_mut(), Sym::ptr);
        let set = Rc::new(SetMem {
            mem: RefCell::new(mem),
            open: Cell::new(0),
        });
        self.sh.sets.borrow_mut().push(Rc::clone(&set));
        Ok(agreed
            .ends()
            .iter()
            .map(|e| {
                let (len, r) = (e.spec.config.len(), e.spec.config.max_in_flight());
                debug_assert!(e.word as usize + shape(e).words().unwrap_or(0) <= words);
                debug_assert!(e.peer_word as usize + shape(e).words().unwrap_or(0) <= words);
                let peer = ShmemPeer::new(Rc::clone(&self.sh), Rc::clone(&set), e.spec.peer);
                // SAFETY: the handshake placed both regions of this shape inside the set's
                // allocation (its size is the largest any PE needs, the same on every PE),
                // zeroed on every PE before the barrier above; regions of one set never
                // overlap (layout); `peer` keeps the set allocated. AIAC_SHMEM_REMOTE=1
                // (sh.remote) maps nothing: every peer is as if on another node.
                let end = unsafe {
                    ShmemEnd::new(
                        peer,
                        e.spec.peer,
                        len,
                        r,
                        base.add(e.word as usize),
                        base.add(e.peer_word as usize),
                        !self.sh.remote,
                    )
                };
                self.sh.ends_opened.set(self.sh.ends_opened.get() + 1);
                if end.is_mapped() {
                    self.sh.mapped_ends.set(self.sh.mapped_ends.get() + 1);
                }
                end
            })
            .collect())
    }

    /// A pairwise end over its region (carved by `pair_declare`) and the peer's.
    fn wire_pair<D: Delivery>(
        &mut self,
        agreed: PairAgreed<D>,
    ) -> Result<ShmemEnd<D>, CreateError> {
        let s = agreed.spec;
        let (len, r) = (s.config.len(), s.config.max_in_flight());
        let (off, words) = self
            .pending_pair
            .take()
            .ok_or_else(|| shmem_err("open_pair", "wiring an end whose region was not carved"))?;
        let pool = Rc::clone(&self.sh.pool);
        let peer_off = agreed.peer_word as usize;
        if off as u64 != agreed.word || !pool.holds(peer_off, words) {
            pool.give_back(off, words);
            return Err(shmem_err(
                "open_pair",
                format!(
                    "PE {}'s region at word {peer_off} lies outside the pairwise pool",
                    s.peer
                ),
            )
            .into());
        }
        let (local, remote) = (pool.at(off), pool.at(peer_off));
        let peer = ShmemPeer::pairwise(Rc::clone(&self.sh), PairPiece { pool, off, words }, s.peer);
        // SAFETY: both regions of this shape lie in the PEs' pools (this one carved by
        // pair_declare, the peer's checked above), at the same symmetric address on every PE;
        // each was zeroed by its PE before its offer was put, and is carved for this end
        // alone; `peer` holds this PE's piece (given back only once the peer's close landed)
        // and the Rc of Shared keeps the pool allocated. AIAC_SHMEM_REMOTE=1 maps nothing.
        let end = unsafe { ShmemEnd::new(peer, s.peer, len, r, local, remote, !self.sh.remote) };
        self.sh.ends_opened.set(self.sh.ends_opened.get() + 1);
        if end.is_mapped() {
            self.sh.mapped_ends.set(self.sh.mapped_ends.get() + 1);
        }
        Ok(end)
    }

    /// Every PE's list, at every PE (`shmem_fcollect64` of the lengths, then
    /// `shmem_collect64`).
    fn collect_all(&mut self, mine: &[u64]) -> Result<Lists, CommError> {
        let size = self.sh.size;
        let (counts, all) = self.sh.with_coll(|c| {
            let g = c.fcollect2(size, [mine.len() as u64, 0]);
            let counts: Vec<usize> = g.chunks_exact(2).map(|p| p[0] as usize).collect();
            let all = c.collect(size, mine, &counts);
            (counts, all)
        });
        Ok(Lists::from_flat(all?, counts))
    }
}

impl Collective for ShmemCtx {
    fn rank(&self) -> usize {
        self.sh.rank
    }

    fn size(&self) -> usize {
        self.sh.size
    }

    /// `shmem_barrier_all`: every PE arrives, and every put issued before it has completed.
    fn barrier(&mut self) -> Result<(), CommError> {
        barrier_all();
        Ok(())
    }

    /// `shmem_double_{sum,max,min}_to_all` over every PE, in chunks of symmetric scratch.
    /// NaN handling of max/min is the library's.
    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError> {
        let size = self.sh.size;
        self.sh.with_coll(|c| c.all_reduce(size, data, op));
        Ok(())
    }

    /// Through a collect of every PE's lists (OpenSHMEM 1.4's `alltoalls` needs equal
    /// sizes): each PE sends `[count for each PE, then every list]` and keeps its own part
    /// of each. O(total) per PE; channel creation is not on a hot path.
    fn all_to_all_v(&mut self, send: &Lists) -> Result<Lists, CommError> {
        let (size, rank) = (self.sh.size, self.sh.rank);
        if send.len() != size {
            return Err(shmem_err(
                "all_to_all_v",
                format!("{} lists for {size} PEs", send.len()),
            ));
        }
        let mut mine: Vec<u64> = send.counts().map(|c| c as u64).collect();
        mine.extend_from_slice(send.flat());
        let all = self.collect_all(&mine)?;
        let mut out = Lists::with_capacity(size, 0);
        for pe in 0..size {
            let (counts, words) = all.list(pe).split_at(size);
            let start: u64 = counts[..rank].iter().sum();
            out.push(&words[start as usize..(start + counts[rank]) as usize]);
        }
        Ok(out)
    }

    /// A collect of every PE's list, kept at the root.
    fn gather_v(&mut self, mine: &[u64], root: usize) -> Result<Option<Lists>, CommError> {
        if root >= self.sh.size {
            return Err(shmem_err(
                "gather_v",
                format!("root {root} of {} PEs", self.sh.size),
            ));
        }
        let all = self.collect_all(mine)?;
        Ok((self.sh.rank == root).then_some(all))
    }
}

impl ChannelHooks for ShmemCtx {
    type Backend = Shmem;
    type Reduction = TreeReduction<Shmem>;

    /// Frees the sets whose channels every PE has closed (collective), then lays out this
    /// PE's regions; each offset travels to the peer with the handshake.
    fn declare<D: Delivery>(&mut self, specs: &[ChannelSpec]) -> Result<Vec<u64>, CreateError> {
        self.reclaim()?;
        Self::layout::<D>(specs)
    }

    fn wire_slots(&mut self, agreed: Agreed<Slots>) -> Result<Vec<ShmemEnd<Slots>>, CreateError> {
        self.wire(agreed)
    }

    fn wire_shared(
        &mut self,
        agreed: Agreed<SharedBuf>,
    ) -> Result<Vec<ShmemEnd<SharedBuf>>, CreateError> {
        self.wire(agreed)
    }

    /// Carves the end's region from the PE's pairwise pool (`pair.rs`).
    fn pair_declare<D: Delivery>(&mut self, spec: &ChannelSpec) -> Result<u64, CreateError> {
        let words = ShmemEnd::<D>::shape(spec.config.len(), spec.config.max_in_flight())
            .words()
            .ok_or_else(|| shmem_err("open_pair", "channel too large for the address space"))?;
        let off = self.pair_region(spec, words)?;
        self.pending_pair = Some((off as usize, words));
        Ok(off)
    }

    fn pair_forget(&mut self, _spec: &ChannelSpec, _word: u64) {
        if let Some((off, words)) = self.pending_pair.take() {
            self.forget_region(words, off as u64);
        }
    }

    fn pair_meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        self.meet(spec, mine, deadline)
    }

    fn pair_wire_slots(
        &mut self,
        agreed: PairAgreed<Slots>,
    ) -> Result<ShmemEnd<Slots>, CreateError> {
        self.wire_pair(agreed)
    }

    fn pair_wire_shared(
        &mut self,
        agreed: PairAgreed<SharedBuf>,
    ) -> Result<ShmemEnd<SharedBuf>, CreateError> {
        self.wire_pair(agreed)
    }

    /// OpenSHMEM 1.4 has no non-blocking reduction: chan-core's binary tree over Sync
    /// channels (the paper's hand-written tree).
    fn make_reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError> {
        TreeReduction::new(self, len, op)
    }

    fn reserved_tags(&mut self) -> &mut ReservedTags {
        &mut self.reserved_tags
    }
}
