//! The SHMEM environment: initialisation, the PE's [`ShmemCtx`] (chan-core's `Context`), the
//! collective creation of channel sets, their collective reclamation, and finalize.

use crate::sym::{barrier_all, quiet, shmem_err, Sym};
use crate::transport::{Core, Shape, ShmemMailbox, ShmemRacy};
use crate::Shmem;
use chan_core::{ChannelSpec, CommError, Context, CreateError, ModeKind, ReduceOp, TreeReduction};
use openshmem_sys as ffi;
use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_long, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};

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
}

/// `finalize` found something wrong. SHMEM is finalized anyway, or, with channels still open,
/// when the last of them is dropped.
#[derive(Debug, thiserror::Error)]
pub enum FinalizeError {
    /// Channels or reductions of this PE are still alive; SHMEM is finalized when the last
    /// one is dropped.
    #[error("{0} channel end(s) or reduction(s) still open at finalize; close them first")]
    StillOpen(usize),
}

/// 0: never initialised; 1: running; 2: finalized. Only `init`'s exchange from 0 reads it:
/// SHMEM starts at most once per process, and never again after its finalize. Accessed
/// `Relaxed`: only the exchange's atomicity matters, it publishes no other memory.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Values reduced per call of a `shmem_double_*_to_all` (longer all-reduces go in chunks).
const CHUNK: usize = 512;

/// A channel end's inbound region offset on this PE and its peer's (words into the set).
type RegionPair = (usize, usize);

/// Words each channel end declares in the creation handshake.
const DECL: usize = 6;

/// One set's symmetric memory. Shared by the set's channel ends (which count themselves open
/// here) and the PE's list of sets, which frees it collectively.
pub(crate) struct SetMem {
    mem: RefCell<Option<Sym<u64>>>,
    base: *mut u64,
    words: usize,
    open: Cell<usize>,
}

impl SetMem {
    pub(crate) fn base(&self) -> *mut u64 {
        self.base
    }
    pub(crate) fn words(&self) -> usize {
        self.words
    }
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

/// One processing element: chan-core's [`Context`] over OpenSHMEM. Created once per process
/// with [`ShmemCtx::init`]; SHMEM is finalized by [`ShmemCtx::finalize`] (collective), or when
/// the context and every channel and reduction created from it have been dropped.
///
/// Not `Send`: SHMEM is initialised with `SHMEM_THREAD_FUNNELED`, and every channel end is
/// bound to the thread that created it.
pub struct ShmemCtx {
    sh: Rc<Shared>,
    reserved_tags: u32,
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
    /// component is UCX's: when `OMPI_MCA_osc` is not set, this sets it to `ucx` in the
    /// process's environment before initialising. Call `init` before starting threads that
    /// read the environment.
    pub fn init() -> Result<Self, InitError> {
        if STATE
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Err(InitError::AlreadyInitialized);
        }
        if std::env::var_os("OMPI_MCA_osc").is_none() {
            std::env::set_var("OMPI_MCA_osc", "ucx");
        }
        let mut provided: c_int = -1;
        // SAFETY: first and only initialisation of this process (STATE); provided is a local.
        let rc = unsafe { ffi::shmem_init_thread(ffi::thread_funneled(), &mut provided) };
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
        let coll = Coll::new(size as usize)?;
        Ok(ShmemCtx {
            sh: Rc::new(Shared {
                rank: rank as usize,
                size: size as usize,
                coll: RefCell::new(Some(coll)),
                sets: RefCell::new(Vec::new()),
                shut: Cell::new(false),
            }),
            reserved_tags: 0,
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

    /// Channel sets whose memory is still allocated (closed ones included until reclaimed).
    pub fn live_sets(&self) -> usize {
        self.sh.sets.borrow().len()
    }

    /// Collective: free the symmetric memory of every channel set whose ends are all closed
    /// (or dropped) on every PE; the number of sets freed.
    ///
    /// A closed channel's memory cannot be freed by its close: the peer may still put into it
    /// until it closes its own end, and `shmem_free` is collective. So it is freed here, after
    /// a vote, or at [`ShmemCtx::finalize`]; [`Context::open`] calls this first, so a program
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

    /// The collective creation of one set of channel ends (DESIGN §2).
    ///
    /// 1. Each PE lays out an inbound region for each of its ends and declares them:
    ///    `[peer, tag, mode, len, R, offset]` per end.
    /// 2. `shmem_fcollect64` of (declared words, bytes needed) from every PE, then
    ///    `shmem_collect64` of every declaration: every PE sees every PE's ends.
    /// 3. Every PE checks every PE's ends against their peers' (bad peer, duplicate, no
    ///    matching end, mode / length / R mismatch) with the same function, so all agree on
    ///    who failed without another vote: a failing PE returns its own error, naming both
    ///    values of a mismatch; every other PE returns `FailedElsewhere` with the lowest
    ///    failing PE.
    /// 4. Otherwise one symmetric allocation of the largest size any PE needs (the heap stays
    ///    symmetric only if every PE allocates the same), zeroed, and a barrier before any put.
    ///
    /// Returns the set and, for each spec, (this PE's region offset, the peer's).
    fn create_set(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<(Rc<SetMem>, Vec<RegionPair>), CreateError> {
        self.reclaim()?;
        let (rank, size) = (self.sh.rank, self.sh.size);
        let racy = mode == ModeKind::Racy;
        let mut decls: Vec<u64> = Vec::with_capacity(specs.len() * DECL);
        let mut offsets = Vec::with_capacity(specs.len());
        let mut cursor = 0usize;
        for s in specs {
            let shape = Shape {
                len: s.config.len(),
                r: s.config.max_in_flight(),
                racy,
            };
            let words = shape.words().ok_or_else(|| {
                shmem_err(
                    "channel creation",
                    "channel too large for the address space",
                )
            })?;
            offsets.push(cursor);
            decls.extend([
                s.peer as u64,
                u64::from(s.tag),
                mode.code(),
                s.config.len() as u64,
                s.config.max_in_flight() as u64,
                cursor as u64,
            ]);
            cursor = cursor.checked_add(words).ok_or_else(|| {
                shmem_err(
                    "channel creation",
                    "channel set too large for the address space",
                )
            })?;
        }
        let (counts, needs, all) = self.sh.with_coll(|c| {
            let g = c.fcollect2(size, [decls.len() as u64, cursor as u64]);
            let counts: Vec<usize> = g.chunks_exact(2).map(|p| p[0] as usize).collect();
            let needs: Vec<usize> = g.chunks_exact(2).map(|p| p[1] as usize).collect();
            let all = c.collect(size, &decls, &counts);
            (counts, needs, all)
        });
        let all = all?;
        let mut start = 0;
        let by_pe: Vec<&[u64]> = counts
            .iter()
            .map(|&n| {
                let s = &all[start..start + n];
                start += n;
                s
            })
            .collect();
        let failed: Vec<Option<CreateError>> =
            (0..size).map(|pe| evaluate(pe, size, &by_pe)).collect();
        if let Some(e) = failed[rank].clone() {
            return Err(e);
        }
        if let Some(lowest) = failed.iter().position(Option::is_some) {
            return Err(CreateError::FailedElsewhere {
                failed_rank: lowest,
            });
        }
        let words = needs.iter().copied().max().unwrap_or(0);
        let mem = if words > 0 {
            Some(Sym::<u64>::alloc_zeroed(words)?)
        } else {
            None
        };
        // Every PE zeroed its copy before any PE puts into it.
        barrier_all();
        let base = mem.as_ref().map_or(std::ptr::null_mut(), Sym::ptr);
        let set = Rc::new(SetMem {
            mem: RefCell::new(mem),
            base,
            words,
            open: Cell::new(0),
        });
        self.sh.sets.borrow_mut().push(Rc::clone(&set));
        let pairs = specs
            .iter()
            .zip(&offsets)
            .map(|(s, &mine)| {
                let theirs = by_pe[s.peer]
                    .chunks_exact(DECL)
                    .find(|d| d[0] == rank as u64 && d[1] == u64::from(s.tag))
                    .map(|d| d[5] as usize)
                    .expect("evaluate found the matching end");
                (mine, theirs)
            })
            .collect();
        Ok((set, pairs))
    }

    fn open_cores(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Core>, CreateError> {
        let (set, pairs) = self.create_set(mode, specs)?;
        Ok(specs
            .iter()
            .zip(pairs)
            .map(|(s, (mine, theirs))| {
                let shape = Shape {
                    len: s.config.len(),
                    r: s.config.max_in_flight(),
                    racy: mode == ModeKind::Racy,
                };
                Core::new(
                    Rc::clone(&self.sh),
                    Rc::clone(&set),
                    s.peer,
                    shape,
                    mine,
                    theirs,
                )
            })
            .collect())
    }
}

/// The error PE `pe` gets from the declarations of every PE, or `None` if all its ends match.
/// Every PE runs this for every PE on the same data, so all agree.
fn evaluate(pe: usize, size: usize, by_pe: &[&[u64]]) -> Option<CreateError> {
    let mine: Vec<&[u64]> = by_pe[pe].chunks_exact(DECL).collect();
    let mut seen = std::collections::HashSet::new();
    for d in &mine {
        let (peer, tag) = (d[0] as usize, d[1] as u32);
        if peer >= size || peer == pe {
            return Some(CreateError::BadPeer {
                rank: pe,
                peer,
                size,
            });
        }
        if !seen.insert((peer, tag)) {
            return Some(CreateError::Duplicate {
                rank: pe,
                peer,
                tag,
            });
        }
    }
    let mut order = mine.clone();
    order.sort_by_key(|d| (d[0], d[1]));
    for d in order {
        let (peer, tag) = (d[0] as usize, d[1] as u32);
        let Some(t) = by_pe[peer]
            .chunks_exact(DECL)
            .find(|e| e[0] == pe as u64 && e[1] == u64::from(tag))
        else {
            return Some(CreateError::Unmatched {
                rank: pe,
                peer,
                tag,
            });
        };
        let mode = |c| ModeKind::from_code(c);
        let (Some(m), Some(their_m)) = (mode(d[2]), mode(t[2])) else {
            return Some(CreateError::Comm(shmem_err(
                "channel creation",
                format!("PE {peer} declared an unknown mode code {}", t[2]),
            )));
        };
        if let Err(e) = CreateError::check_match(
            pe,
            peer,
            tag,
            (m, d[3] as usize, d[4] as usize),
            (their_m, t[3] as usize, t[4] as usize),
        ) {
            return Some(e);
        }
    }
    None
}

impl Context for ShmemCtx {
    type Backend = Shmem;
    type Reduction = TreeReduction<Shmem>;

    fn rank(&self) -> usize {
        self.sh.rank
    }

    fn size(&self) -> usize {
        self.sh.size
    }

    fn open_mailboxes(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<ShmemMailbox>, CreateError> {
        Ok(self
            .open_cores(mode, specs)?
            .into_iter()
            .map(ShmemMailbox::new)
            .collect())
    }

    fn open_racy(&mut self, specs: &[ChannelSpec]) -> Result<Vec<ShmemRacy>, CreateError> {
        Ok(self
            .open_cores(ModeKind::Racy, specs)?
            .into_iter()
            .map(ShmemRacy::new)
            .collect())
    }

    /// OpenSHMEM 1.4 has no non-blocking reduction: chan-core's binary tree over Sync
    /// channels (the paper's hand-written tree).
    fn reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError> {
        TreeReduction::new(self, len, op)
    }

    fn next_reserved_tag(&mut self) -> u32 {
        self.reserved_tags += 1;
        self.reserved_tags | chan_core::RESERVED_TAG_BIT
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
}
