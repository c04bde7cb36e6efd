//! The node-local path: a channel end between two ranks of one node writes its peer's memory
//! in place, through an MPI-3 shared-memory window (`MPI_Win_allocate_shared` on the node's
//! communicator, MPI 3.1 §11.2.3), with chan-core's one-sided transport
//! ([`chan_core::backend::OneSidedEnd`]): the same mailbox and racy protocol OpenSHMEM's ends take on one
//! node. Ends to ranks of other nodes, and every end under `AIAC_MPI_REMOTE=1`, keep the
//! two-sided path (`crate::transport`).
//!
//! ## Why
//! A two-sided message is packed into a send buffer and copied by MPI into the receive buffer
//! (one copy on each side besides MPI's). On one node a peer's memory can instead be
//! written directly: the pack goes straight into the peer's slot, and the flag that publishes
//! it is one store. docs/performance.md measures both.
//!
//! ## Memory
//! Each channel set whose ends include a node-local one gets one window: each rank's segment
//! holds its inbound regions (laid out by [`layout`], offsets carried to the peer by the
//! creation handshake), padded to whole pages so that no two ranks' regions share a cache
//! line. `MPI_Win_shared_query` gives the peer's segment in this process, so the peer's
//! region is `its base + its offset`. The window stays in one passive-target epoch
//! (`MPI_Win_lock_all`, `MPI_MODE_NOCHECK`) for its life; every access is a load or store of
//! this process, ordered with Rust atomics as chan-core's transport says (Open MPI and MPICH
//! give shared windows the unified memory model, MPI 3.1 §11.4, in which those are the
//! window's public copy).
//!
//! A peer writes a region until it closed its end, and `MPI_Win_free` is collective over the
//! node, so a set's window is freed after a vote of the node that every end of the set is
//! closed ([`Node::reclaim`], run by every channel creation), or at finalize.
//!
//! ## Progress
//! Waiting on a node-local end makes no MPI call of its own. A rank that waits there while
//! one of its two-sided sends needs its progress (a rendezvous to another node) would stall
//! that send, so the wait runs MPI's progress engine (`MPI_Iprobe`) between its polls while
//! the rank has requests outstanding, and steps the rank's closing channels as every wait
//! does. A non-blocking call on a node-local end (a poll, `can_send`) steps the closing
//! channels but runs no progress of its own: a rank's two-sided ends progress MPI when they
//! are called, as a computing rank's requests always did.

use crate::env::World;
use crate::raw::{check, misuse};
use chan_core::backend::{Delivery, WaitPolicy};
use chan_core::backend::{OneSidedEnd, PeerMem};
use chan_core::{ChannelSpec, CommError, ReduceOp};
use mpi::ffi;
use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The word a rank declares for an end that takes the two-sided path.
pub(crate) const TWO_SIDED: u64 = u64::MAX;

/// `MPI_WIN_SEPARATE`, the value of a window's `MPI_WIN_MODEL` attribute that is not
/// `MPI_WIN_UNIFIED`: 1 in Open MPI's `mpi.h` (a macro) and in MPICH's (an enum, which bindgen
/// names `MPIR_Win_model_MPI_WIN_SEPARATE`), so it is spelled here once for both.
const WIN_SEPARATE: c_int = 1;

/// Bytes a rank's segment is padded to.
const PAGE: usize = 4096;

/// An end of one node-local channel set: its `OneSidedEnd`.
pub(crate) type NodeEnd<D> = OneSidedEnd<D, MpiPeer>;

/// The ranks of this node: their communicator, and each world rank's place in it.
pub(crate) struct Node {
    comm: ffi::MPI_Comm,
    /// `of[world rank]`: its rank in `comm`, for the ranks of this node.
    of: Vec<Option<c_int>>,
    /// Windows of live sets, in creation order (the same list on every rank of the node).
    sets: RefCell<Vec<Rc<NodeSet>>>,
    /// False once the node agreed that a shared window could not be made (the same on every
    /// rank of it): ends to its ranks take the two-sided path from then on.
    windows: Cell<bool>,
    /// This rank's rank on the node (0 reports for the node).
    me: c_int,
}

impl Node {
    /// Collective over `world`: split it by node (`MPI_COMM_TYPE_SHARED`) and learn which
    /// world rank is which node rank.
    pub(crate) fn new(world: ffi::MPI_Comm, rank: usize) -> Result<Node, CommError> {
        // SAFETY: null handle constant, overwritten by MPI_Comm_split_type.
        let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
        let (mut size, mut me): (c_int, c_int) = (0, 0);
        // SAFETY: every rank of `world` makes this call (init is collective); the results go
        // to the locals; the constants are immutable handles.
        unsafe {
            check(
                ffi::MPI_Comm_split_type(
                    world,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut comm,
                ),
                "MPI_Comm_split_type",
            )?;
            check(
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
                "MPI_Comm_set_errhandler",
            )?;
            check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size")?;
            check(ffi::MPI_Comm_rank(comm, &mut me), "MPI_Comm_rank")?;
        }
        let mut worlds = vec![0 as c_int; size as usize];
        let mine = rank as c_int;
        // SAFETY: collective over the node's communicator; one int in, `size` ints out.
        let rc = unsafe {
            ffi::MPI_Allgather(
                (&mine as *const c_int).cast::<c_void>(),
                1,
                crate::raw::int_type(),
                worlds.as_mut_ptr().cast::<c_void>(),
                1,
                crate::raw::int_type(),
                comm,
            )
        };
        check(rc, "MPI_Allgather")?;
        let world_size = worlds.iter().map(|&w| w as usize + 1).max().unwrap_or(0);
        let mut of = vec![None; world_size.max(rank + 1)];
        for (node_rank, &w) in worlds.iter().enumerate() {
            of[w as usize] = Some(node_rank as c_int);
        }
        Ok(Node {
            comm,
            of,
            sets: RefCell::new(Vec::new()),
            windows: Cell::new(true),
            me,
        })
    }

    /// Whether ends to the ranks of this node can take the node-local path: false after a
    /// shared window could not be made on it (see [`Node::alloc`]).
    pub(crate) fn has_windows(&self) -> bool {
        self.windows.get()
    }

    /// The node rank of world rank `peer`, when it shares this node.
    pub(crate) fn rank_of(&self, peer: usize) -> Option<c_int> {
        self.of.get(peer).copied().flatten()
    }

    /// How many ranks run on this node (this one included).
    pub(crate) fn ranks(&self) -> usize {
        self.of.iter().flatten().count()
    }

    /// Channel sets whose window is still allocated.
    pub(crate) fn live_sets(&self) -> usize {
        self.sets.borrow().len()
    }

    /// Collective over the node: free the window of every set whose ends every rank of the
    /// node has closed; how many were freed.
    pub(crate) fn reclaim(&self) -> Result<usize, CommError> {
        let n = self.sets.borrow().len();
        if n == 0 {
            return Ok(0);
        }
        let mine: Vec<c_int> = self
            .sets
            .borrow()
            .iter()
            .map(|s| c_int::from(s.open.get() == 0))
            .collect();
        let mut votes = vec![0 as c_int; n];
        // SAFETY: collective over the node (every rank of it reaches a creation, and has the
        // same list of sets); n ints each way, in buffers that do not overlap.
        let rc = unsafe {
            ffi::MPI_Allreduce(
                mine.as_ptr().cast::<c_void>(),
                votes.as_mut_ptr().cast::<c_void>(),
                n as c_int,
                crate::raw::int_type(),
                ffi::RSMPI_MIN,
                self.comm,
            )
        };
        check(rc, "MPI_Allreduce")?;
        // Every rank of the node voted after its ends of these sets closed: none of them
        // writes into these windows any more (a close's last write, CLOSE, came before).
        let mut first_err = None;
        let mut freed = 0;
        let mut i = 0;
        self.sets.borrow_mut().retain(|s| {
            let gone = votes[i] == 1;
            i += 1;
            if gone {
                if let Err(e) = s.free() {
                    first_err.get_or_insert(e);
                }
                freed += 1;
            }
            !gone
        });
        first_err.map_or(Ok(freed), Err)
    }

    /// Collective over the node, at finalize: free every window, after a barrier (a peer's
    /// last store, the CLOSE of a dropped end, comes before it), then the communicator.
    pub(crate) fn shutdown(&self) -> Result<(), CommError> {
        // SAFETY: the node's communicator; every rank of the node finalizes.
        let mut out = check(unsafe { ffi::MPI_Barrier(self.comm) }, "MPI_Barrier");
        for s in self.sets.borrow_mut().drain(..) {
            out = out.and(s.free());
        }
        let mut comm = self.comm;
        // SAFETY: made by MPI_Comm_split_type for this Node alone, freed once (the world's
        // shutdown, which alone calls this, runs once).
        out.and(check(
            unsafe { ffi::MPI_Comm_free(&mut comm) },
            "MPI_Comm_free",
        ))
    }

    /// `MPI_Allreduce` of one `u64` over the node.
    fn all_u64(&self, mine: u64, op: ffi::MPI_Op) -> Result<u64, CommError> {
        let mut all = 0u64;
        // SAFETY: collective over the node (callers are reached by every rank of it); one u64
        // each way, in locals.
        let rc = unsafe {
            ffi::MPI_Allreduce(
                (&mine as *const u64).cast::<c_void>(),
                (&mut all as *mut u64).cast::<c_void>(),
                1,
                crate::raw::u64_type(),
                op,
                self.comm,
            )
        };
        check(rc, "MPI_Allreduce")?;
        Ok(all)
    }

    /// Collective over the node: the window of one set, this rank's segment `words` long
    /// (its inbound regions); `None` when no rank of the node needs one. The segment is
    /// zeroed on every rank before any rank returns.
    ///
    /// Every rank of the node makes the same collective calls whatever fails where: a size
    /// one rank cannot allocate is known to all before the allocation, and whether every
    /// rank allocated, zeroed and locked its window is agreed after it. A window that failed
    /// anywhere is left to `MPI_Finalize` on every rank (freeing it is collective, and a rank
    /// whose allocation failed has none), so the node's lists of sets stay the same.
    ///
    /// A window that failed is not an error: the node's ranks agree on it, so every end
    /// between two of them falls back to the two-sided path, for this set (`None`) and every
    /// later one ([`Node::has_windows`]). Open MPI without its `sm` one-sided component
    /// (`OMPI_MCA_osc=ucx`, as OpenSHMEM once needed) allocates no shared window; node rank 0
    /// says so once on standard error.
    pub(crate) fn alloc(&self, words: usize) -> Result<Option<(Rc<NodeSet>, *mut u64)>, CommError> {
        let bytes = words
            .checked_mul(8)
            .and_then(|b| b.checked_next_multiple_of(PAGE))
            .filter(|&b| b < ffi::MPI_Aint::MAX as usize);
        // u64::MAX: this rank's segment cannot be sized.
        let need = self.all_u64(
            bytes.map_or(u64::MAX, |b| b as u64),
            crate::raw::op(ReduceOp::Max),
        )?;
        if need == 0 {
            return Ok(None);
        }
        let Some(bytes) = bytes.filter(|_| need != u64::MAX) else {
            return Err(misuse(
                "MPI_Win_allocate_shared",
                "a channel set too large for a rank of this node",
            ));
        };
        let mut base: *mut u64 = std::ptr::null_mut();
        // SAFETY: null handle constant, overwritten by MPI_Win_allocate_shared.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: collective over the node (every rank of it reached `need` above); MPI
        // writes the base address and the handle into the locals.
        let rc = unsafe {
            ffi::MPI_Win_allocate_shared(
                bytes as ffi::MPI_Aint,
                8,
                ffi::RSMPI_INFO_NULL,
                self.comm,
                (&mut base as *mut *mut u64).cast::<c_void>(),
                &mut win,
            )
        };
        let ready = check(rc, "MPI_Win_allocate_shared").and_then(|()| start(win, base, words));
        // Every rank of the node, whatever happened: this is also the barrier after which
        // every segment is zeroed and may be written.
        let all_ready = self.all_u64(u64::from(ready.is_ok()), crate::raw::op(ReduceOp::Min))?;
        if all_ready != 1 {
            self.windows.set(false);
            if self.me == 0 {
                let why = ready
                    .err()
                    .map_or("failed on another rank".into(), |e| e.to_string());
                eprintln!(
                    "aiac (mpi): no shared-memory window on this node ({why}); channels between \
                     its ranks take the two-sided path (with Open MPI, include sm in \
                     OMPI_MCA_osc)"
                );
            }
            return Ok(None);
        }
        let set = Rc::new(NodeSet {
            win: Cell::new(Some(win)),
            open: Cell::new(0),
        });
        self.sets.borrow_mut().push(Rc::clone(&set));
        Ok(Some((set, base)))
    }
}

/// Errors come back as values, the window has the unified memory model, this rank's segment
/// (`words` at `base`) is zeroed, and the window's passive-target epoch is open.
fn start(win: ffi::MPI_Win, base: *mut u64, words: usize) -> Result<(), CommError> {
    // SAFETY: a valid window just allocated; the constant is an immutable handle.
    let rc = unsafe { ffi::MPI_Win_set_errhandler(win, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Win_set_errhandler")?;
    // Loads and stores of this process are the window's public copy only in the unified
    // model (MPI 3.1 §11.4); in the separate one they would need MPI_Win_sync around every
    // access, which the protocol does not make.
    let (mut model, mut found): (*mut c_int, c_int) = (std::ptr::null_mut(), 0);
    // SAFETY: a valid window; for MPI_WIN_MODEL, MPI stores a pointer to an int it owns
    // into `model` (MPI 3.1 §11.2.6) and sets `found`.
    let rc = unsafe {
        ffi::MPI_Win_get_attr(
            win,
            ffi::MPI_WIN_MODEL as c_int,
            (&mut model as *mut *mut c_int).cast::<c_void>(),
            &mut found,
        )
    };
    check(rc, "MPI_Win_get_attr")?;
    // SAFETY: when found, `model` points at the attribute's int, valid while the window is.
    let unified = found != 0 && !model.is_null() && unsafe { *model } != WIN_SEPARATE;
    if !unified {
        return Err(misuse(
            "MPI_Win_allocate_shared",
            "the window's memory model is not unified",
        ));
    }
    if words > 0 {
        if base.is_null() || !base.is_aligned() {
            return Err(misuse("MPI_Win_allocate_shared", "no aligned memory"));
        }
        // SAFETY: base..base + words lies in this rank's segment (its size is 8 × words
        // rounded up), aligned (checked); no rank touches it before the caller's agreement.
        unsafe { std::ptr::write_bytes(base, 0, words) };
    }
    // SAFETY: a valid window, no lock held. NOCHECK: nobody takes exclusive locks on it.
    let rc = unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win) };
    check(rc, "MPI_Win_lock_all")?;
    // SAFETY: the window is locked; the zeroing becomes part of its public copy.
    check(unsafe { ffi::MPI_Win_sync(win) }, "MPI_Win_sync")
}

/// One channel set's shared window, and how many of this rank's ends use it.
pub(crate) struct NodeSet {
    win: Cell<Option<ffi::MPI_Win>>,
    open: Cell<usize>,
}

impl NodeSet {
    /// The base of node rank `r`'s segment in this process, and its length in words.
    pub(crate) fn segment(&self, r: c_int) -> Result<(*mut u64, usize), CommError> {
        let win = self
            .win
            .get()
            .ok_or_else(|| misuse("MPI_Win_shared_query", "the window was freed"))?;
        let (mut size, mut unit): (ffi::MPI_Aint, c_int) = (0, 0);
        let mut base: *mut u64 = std::ptr::null_mut();
        // SAFETY: a live window of this node; r is a rank of its group; MPI writes the
        // locals.
        let rc = unsafe {
            ffi::MPI_Win_shared_query(
                win,
                r,
                &mut size,
                &mut unit,
                (&mut base as *mut *mut u64).cast::<c_void>(),
            )
        };
        check(rc, "MPI_Win_shared_query")?;
        if size > 0 && (base.is_null() || !base.is_aligned()) {
            return Err(misuse("MPI_Win_shared_query", "no aligned memory"));
        }
        Ok((base, usize::try_from(size).unwrap_or(0) / 8))
    }

    /// Collective over the node: close the epoch and free the window.
    fn free(&self) -> Result<(), CommError> {
        let Some(mut win) = self.win.take() else {
            return Ok(());
        };
        // SAFETY: a valid, locked window, freed once (taken above); MPI_Win_free is
        // collective over the node, and every caller is (reclaim, shutdown).
        let unlocked = check(
            unsafe { ffi::MPI_Win_unlock_all(win) },
            "MPI_Win_unlock_all",
        );
        // SAFETY: as above.
        let freed = check(unsafe { ffi::MPI_Win_free(&mut win) }, "MPI_Win_free");
        unlocked.and(freed)
    }
}

/// Lay out this rank's inbound regions of one set: each node-local spec's word offset in
/// this rank's segment, [`TWO_SIDED`] for the others.
pub(crate) fn layout<D: Delivery>(
    specs: &[ChannelSpec],
    node: Option<&Node>,
) -> Result<Vec<u64>, CommError> {
    let mut cursor = 0usize;
    specs
        .iter()
        .map(|s| {
            if node.and_then(|n| n.rank_of(s.peer)).is_none() {
                return Ok(TWO_SIDED);
            }
            let shape = NodeEnd::<D>::shape(s.config.len(), s.config.max_in_flight());
            let at = cursor;
            cursor = shape
                .words()
                .and_then(|w| cursor.checked_add(w))
                .filter(|&c| c < TWO_SIDED as usize)
                .ok_or_else(|| misuse("channel creation", "channel set too large"))?;
            Ok(at as u64)
        })
        .collect()
}

/// A node-local end's way to its peer: loads and stores into the set's shared window. Keeps
/// MPI initialised and the window allocated (this end counted open in its set) while the end
/// exists.
pub struct MpiPeer {
    world: Rc<World>,
    set: Rc<NodeSet>,
}

impl MpiPeer {
    pub(crate) fn new(world: Rc<World>, set: Rc<NodeSet>) -> Self {
        set.open.set(set.open.get() + 1);
        world.node_live.set(world.node_live.get() + 1);
        MpiPeer { world, set }
    }
}

impl Drop for MpiPeer {
    fn drop(&mut self) {
        // The end announced its close before (its own Drop runs first); the window stays
        // until a reclaim of the node or finalize.
        self.set.open.set(self.set.open.get() - 1);
        self.world.node_live.set(self.world.node_live.get() - 1);
    }
}

impl std::fmt::Debug for MpiPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiPeer").finish_non_exhaustive()
    }
}

// SAFETY: the peer's addresses are this process's (MPI_Win_shared_query), inside the set's
// window, which `set` keeps allocated (on every rank of the node: it is freed only
// collectively, after a vote that this end's open count blocks, or at finalize); `map` is
// the identity; `put` stores each word with one atomic 8-byte store (so it writes whole words,
// PUT_WHOLE_WORDS), as does `put_word`;
// `fence` is a Release fence, which orders this thread's earlier stores before its later
// atomic stores as the peer's Acquire loads see them; nothing is left to complete (`quiet`).
unsafe impl PeerMem for MpiPeer {
    const BACKEND: &'static str = "mpi";
    /// `put` stores word by word through atomics (below).
    const PUT_WHOLE_WORDS: bool = true;

    fn wait(&self) -> WaitPolicy {
        self.world.wait
    }

    /// Steps the rank's closing channels, runs MPI's progress engine while the rank has
    /// requests outstanding (module docs, "Progress"), then the wait policy's back-off.
    fn relax(&self, spins: u32) {
        self.world.progress_closing();
        if self.world.requests.outstanding() > 0 {
            self.world.progress();
        }
        self.world.wait.relax(spins);
    }

    unsafe fn map(&self, p: *mut u64) -> Option<NonNull<u64>> {
        NonNull::new(p)
    }

    /// Never called while `map` maps every peer (the transport then stores into the peer's
    /// slots itself); written whole words all the same, as a racy buffer needs.
    unsafe fn put(&self, dst: *mut u8, src: *const u8, bytes: usize) {
        debug_assert!(bytes.is_multiple_of(8) && dst.cast::<u64>().is_aligned());
        for i in 0..bytes / 8 {
            // SAFETY: (caller) dst..dst + bytes is an aligned part of the peer's region that
            // it reads through atomics or only after the protocol says it landed; src..src
            // + bytes is readable (read unaligned, as its alignment is not promised).
            unsafe {
                let v = src.cast::<u64>().add(i).read_unaligned();
                AtomicU64::from_ptr(dst.cast::<u64>().add(i)).store(v, Ordering::Relaxed);
            }
        }
    }

    unsafe fn put_word(&self, dst: *mut u64, v: u64) {
        // SAFETY: (caller) an aligned word of the peer's region, read there through atomics.
        unsafe { AtomicU64::from_ptr(dst) }.store(v, Ordering::Relaxed);
    }

    fn fence(&self) {
        fence(Ordering::Release);
    }

    fn quiet(&self) {}
}
