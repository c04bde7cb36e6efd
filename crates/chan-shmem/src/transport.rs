//! The SHMEM transport: chan-core's one-sided transport ([`chan_core::backend::OneSidedEnd`]) over the
//! symmetric heap. [`ShmemEnd`] is a [`OneSidedEnd`] whose [`ShmemPeer`] puts with
//! `shmem_putmem` / `shmem_uint64_p`, orders with `shmem_fence`, completes with `shmem_quiet`,
//! and maps a PE of the same node with `shmem_ptr`.
//!
//! Each end's inbound region lies in its channel set's symmetric allocation. The peer knows
//! its offset from the creation handshake; since the heap is symmetric, `base + offset` on
//! this PE is the put target on the peer, and `shmem_ptr` of it the peer's word mapped here.
//! `AIAC_SHMEM_REMOTE=1` maps nothing: every send is then a put, as between nodes.
//!
//! ## Whole words
//! A racy view is read while the peer writes it, so each element must change from one whole
//! value to another (chan-core's `AtomicF64Slice::from_raw` condition). A bulk put does not
//! promise that: OpenSHMEM 1.4 makes no atomicity promise for `shmem_putmem`, and with Open MPI
//! 4.1 + UCX on one node (the put is UCX's `uct_sm_ep_put_short`, a `memcpy` into the peer's
//! mapped heap, `rep movsb` at these sizes) readers caught 20 KB racy puts half done:
//! elements whose low 4 or 5 bytes came from send s + 1 and the rest from send s, in 5 of
//! about 130 runs of `racy_semantics` at 4 PEs on 2 cores, and in a C program of the same
//! ring pattern. Hence the racy sender writes the peer's buffer itself through atomics
//! (`AtomicF64Slice::store_from`) whenever `shmem_ptr` maps it, which it does for every PE of
//! the node (0 torn elements in 210 runs since). Between nodes, and for every peer under
//! `AIAC_SHMEM_REMOTE=1`, the buffer is put, so [`PeerMem::PUT_WHOLE_WORDS`] is false here:
//! the put lands in one of two landing buffers that no view shows, and the receiver copies a
//! send into its own view only once it knows the copy whole (chan-core's sequence lock,
//! `chan_core::backend::OneSidedEnd`'s module docs, "Whole words"). Before, with the put
//! straight into the view, 2 of 40 runs of `racy_whole_words` under `AIAC_SHMEM_REMOTE=1`
//! showed a torn element; with the landing buffers none did in 30 runs of every racy case.
//! The cost is a word put and a `shmem_fence` more per send and a copy of each reported send
//! at the receiver. `cargo bench -p chan-shmem --bench shmem_channel` under
//! `AIAC_SHMEM_REMOTE=1`, racy over raw put + fence + flag in the stream pattern, one run
//! before and one after on 2 cores that other jobs loaded (load 8 to 10): 8 B 1.10× → 1.12×,
//! 20 KB 0.91× → 0.77×, 1 MB 1.05× → 1.02×, no cost above the noise (the ping-pong rows
//! swung by 4× between runs there). One `shmem_uint64_p` per element would write whole words
//! too, at about 100 ns a word here: 250 µs for 20 KB, against 0.6 µs for one
//! `shmem_putmem`.
//!
//! Control words are written with `shmem_uint64_p`, not SHMEM atomics, which UCX may emulate
//! with messages that need the target's progress. A put of one aligned word is one 8-byte
//! store on a node (UCX copies 8 bytes into the mapped heap) and one aligned write over RDMA;
//! unlike a bulk copy it has no middle to be caught in.
//!
//! A peer's puts can target this region until the peer has closed its end, so the region is
//! freed only collectively, once every PE has closed every end of the set (see
//! [`crate::ShmemCtx::reclaim`]).

use crate::env::{SetMem, Shared};
use crate::pair::PairPiece;
use crate::sym::{fence, peer_ptr, put, put_word, quiet};
use chan_core::backend::WaitPolicy;
use chan_core::backend::{OneSidedEnd, PeerMem};
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::rc::Rc;

/// One end of a channel over OpenSHMEM: `ShmemEnd<Slots>` carries Sync and Async channels
/// (R + 1 flagged slots), `ShmemEnd<Shared>` Racy ones (one buffer, no flags).
pub type ShmemEnd<D> = OneSidedEnd<D, ShmemPeer>;

/// A SHMEM channel end's way to its peer PE: keeps SHMEM initialised and the set's symmetric
/// memory allocated (and this end counted open in it) while the end exists.
pub struct ShmemPeer {
    sh: Rc<Shared>,
    mem: Region,
    pe: c_int,
}

/// Where an end's region lies: in a collectively opened set's allocation, or in the PE's
/// pool of pairwise channels.
enum Region {
    Set(Rc<SetMem>),
    /// Held for its `Drop`, which gives the region back.
    Pair {
        _piece: PairPiece,
    },
}

impl ShmemPeer {
    pub(crate) fn new(sh: Rc<Shared>, set: Rc<SetMem>, pe: usize) -> Self {
        set.opened();
        ShmemPeer {
            sh,
            mem: Region::Set(set),
            pe: pe as c_int,
        }
    }

    /// The way to `pe` of a pairwise end whose region is `piece`.
    pub(crate) fn pairwise(sh: Rc<Shared>, piece: PairPiece, pe: usize) -> Self {
        ShmemPeer {
            sh,
            mem: Region::Pair { _piece: piece },
            pe: pe as c_int,
        }
    }
}

impl Drop for ShmemPeer {
    fn drop(&mut self) {
        // The end announced its close before (its own Drop runs first); a set's memory stays
        // allocated until a collective reclaim or finalize, a pairwise region goes back to the
        // pool (PairPiece's Drop) once the peer's close landed in it.
        if let Region::Set(set) = &self.mem {
            set.closed();
        }
    }
}

impl std::fmt::Debug for ShmemPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmemPeer").field("pe", &self.pe).finish()
    }
}

// SAFETY: addresses are symmetric addresses inside the set's allocation, which `set` keeps
// allocated (on every PE: it is freed only collectively, after a vote that this end's open
// count blocks, or at finalize), or inside the PE's pairwise pool, allocated from init to
// finalize on every PE (a pairwise region is reused only after the peer's close landed in it); `shmem_putmem` copies the bytes, `shmem_uint64_p` writes one
// aligned word (module docs); `shmem_fence` orders puts to a PE (OpenSHMEM 1.4, 9.8.1) and
// `sym::fence` issues a Release fence first; `shmem_quiet` completes them (9.8.2); `shmem_ptr`
// returns the peer's word mapped into this process or null (9.2.3).
unsafe impl PeerMem for ShmemPeer {
    const BACKEND: &'static str = "shmem";
    /// `shmem_putmem` is a bulk copy that may tear words (module docs, "Whole words").
    const PUT_WHOLE_WORDS: bool = false;

    /// The PE's [`WaitPolicy`]. With a core per PE it busy-polls: the wait is for a word a
    /// peer's put changes in local memory, and a `sched_yield` between loads only delays
    /// seeing it. On an oversubscribed node the peer that will write the word may be waiting
    /// for this core: back off and yield.
    fn wait(&self) -> WaitPolicy {
        self.sh.wait
    }

    unsafe fn map(&self, p: *mut u64) -> Option<NonNull<u64>> {
        // SAFETY: (caller) p lies inside the live set.
        unsafe { peer_ptr(p, self.pe) }
    }

    unsafe fn put(&self, dst: *mut u8, src: *const u8, bytes: usize) {
        // SAFETY: the caller's conditions are put's.
        unsafe { put(dst, src, bytes, self.pe) }
    }

    unsafe fn put_word(&self, dst: *mut u64, v: u64) {
        // SAFETY: the caller's conditions are put_word's.
        unsafe { put_word(dst, v, self.pe) }
    }

    fn fence(&self) {
        fence();
    }

    fn quiet(&self) {
        quiet();
    }
}
