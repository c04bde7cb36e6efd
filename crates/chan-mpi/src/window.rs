//! One-sided windows over MPI-3 RMA (MPI 3.1 §11): `MPI_Win_allocate` on aiac's
//! communicator, one passive-target epoch to every rank for the window's whole life
//! (`MPI_Win_lock_all` with `MPI_MODE_NOCHECK`, §11.5.3), `MPI_Put`, `MPI_Get`,
//! `MPI_Compare_and_swap` and `MPI_Fetch_and_op` (`MPI_SUM`) on `MPI_UINT64_T`, completed by
//! `MPI_Win_flush`/`MPI_Win_flush_all` (§11.5.4). rsmpi has no RMA, so this goes through
//! `mpi::ffi`, every return code checked; the window has `MPI_ERRORS_RETURN`.
//!
//! The displacement unit is 8 bytes, so a target displacement is a word offset. Local reads
//! (`read_local`) follow `MPI_Win_sync` (§11.7: it synchronises the private and public copies
//! of the window under the separate model; a no-op under the unified model Open MPI gives on
//! one node) and load each word atomically, since another rank may be writing it.
//!
//! ## Locked windows
//! A [`WindowMode::Locked`] window has no `MPI_Win_lock_all` epoch: an exclusive
//! `MPI_Win_lock` cannot be taken by a rank inside its own lock-all epoch, and a shared
//! lock-all held by the other ranks for the window's life would keep the exclusive lock from
//! ever being granted (and `MPI_MODE_NOCHECK` promises no conflicting lock at all). So every
//! access goes inside `MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target)` … `MPI_Win_unlock(target)`
//! (§11.5.3), `read_local` inside a shared lock of the rank's own window, and the fence is a
//! barrier (every operation completed at its unlock). The creation zeroes the memory inside
//! an exclusive lock of the rank's own window and `MPI_Win_sync`s it, so the zeros are in the
//! public copy under the separate model too.
//!
//! ## Waiting on an oversubscribed node
//! MPICH 4.0 (ch4:ucx) carries `MPI_Compare_and_swap` and `MPI_Fetch_and_op` as active
//! messages that the target's progress engine answers, and `MPI_Win_flush` polls for the
//! answer without ever giving the core away. With more ranks than cores, a flush then spins
//! out its time slice while the target it waits for sits in the run queue: 4 ranks on 2
//! cores took about 8 ms per compare-and-swap, and `window_colliding_inserts` ran past its
//! limit. So under [`WaitPolicy::Yield`] a flush after compare-and-swaps or fetch-and-adds
//! first waits on a request of its own to each such target: an `MPI_Rget_accumulate`
//! (`MPI_SUM` of 0) on a word past the user's words that nothing else touches (the window
//! has one more word, and one of padding when that makes an odd count), tested with
//! `MPI_Testall` between the rank's back-off (spins, `sched_yield`, naps), every test a
//! call into MPI's progress engine. The target answers it after the operations before it,
//! so the flush that follows finds them complete and returns at once (the same in C, 4
//! ranks on 2 loaded cores: 0.3 to 1.3 ms per compare-and-swap and flush instead of 6.6 to
//! 8.4 ms; `sched_yield` is what matters: the probe waited for with `MPI_Wait` took 9.6 ms).
//! Puts and gets go without it: a library may complete them with no help from the target
//! (UCX over shared memory), and a request would add that need. With a core per rank
//! ([`WaitPolicy::Spin`]) the flush is MPI's alone.

use crate::env::World;
use crate::raw::{check, misuse, u64_type};
use crate::MpiCtx;
use chan_core::backend::{vote, RawWindow, Span, WaitPolicy, WindowHooks, WindowMode, WordOp};
use chan_core::{CommError, CreateError};
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One rank's handle on an MPI window: the `MPI_Win`, its local memory, and the rank's
/// MPI world (`env::World`, so MPI outlives the window).
pub struct MpiWindow {
    win: ffi::MPI_Win,
    base: *mut u64,
    /// The user's words; the window holds one more, the probe word (module docs).
    len: usize,
    /// Set once the window was freed or abandoned.
    gone: bool,
    /// Atomic: one lock-all epoch for the window's life; Locked: per-target locks only.
    mode: WindowMode,
    world: Rc<World>,
    /// Targets with a compare-and-swap or fetch-and-add that no flush completed yet.
    atomics: Vec<bool>,
    /// The probes' requests, operand (0) and result words, one per target. On the heap and
    /// never moved: MPI uses them until the request completes.
    probes: Box<[ffi::MPI_Request]>,
    probe_words: Box<[[u64; 2]]>,
}

impl std::fmt::Debug for MpiWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiWindow")
            .field("rank", &self.world.rank)
            .field("len", &self.len)
            .finish()
    }
}

/// Words of a window of `len` user words: those and the probe word after them, rounded up to
/// an even count. With one word more and no rounding, MPICH 4.0.2 lost a compare-and-swap in
/// every run of `window_colliding_inserts` at 4 ranks (350 words used of 351; so did the same
/// pattern in C with 351, 353 or 355 words allocated, and none with 350, 352 or 356); with the
/// count rounded up to even, none was lost.
fn words(len: usize) -> usize {
    (len + 2) & !1
}

/// A rank or count as the `int` MPI takes (chan-core checked it against the window, whose
/// length the creation checked against `int`).
#[inline(always)]
fn int(v: usize) -> c_int {
    debug_assert!(v <= c_int::MAX as usize);
    v as c_int
}

/// The target displacement of a span's first word (the displacement unit is a word).
#[inline(always)]
fn disp(at: Span) -> ffi::MPI_Aint {
    at.offset() as ffi::MPI_Aint
}

impl WindowHooks for MpiCtx {
    type Window = MpiWindow;

    fn make_window(&mut self, len: usize, mode: WindowMode) -> Result<MpiWindow, CreateError> {
        // Counts and displacements travel as int: a window longer than that cannot be
        // addressed in one call. Every rank asked for the same len, so every rank fails here.
        if len > c_int::MAX as usize {
            return Err(misuse(
                "MPI_Win_allocate",
                format!("{len} words per rank exceed MPI's int count"),
            )
            .into());
        }
        let world = Rc::clone(self.world());
        let bytes = (words(len) * 8) as ffi::MPI_Aint;
        let mut base: *mut u64 = std::ptr::null_mut();
        // SAFETY: null handle constant, overwritten by MPI_Win_allocate.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: collective over aiac's communicator (every rank reaches this call: chan-core
        // agreed on len first); MPI writes the base address and the window handle into the
        // two locals; INFO_NULL is an immutable constant.
        let rc = unsafe {
            ffi::MPI_Win_allocate(
                bytes,
                8,
                ffi::RSMPI_INFO_NULL,
                world.comm,
                (&mut base as *mut *mut u64).cast::<c_void>(),
                &mut win,
            )
        };
        check(rc, "MPI_Win_allocate")?;
        let size = world.size;
        let mut w = MpiWindow {
            win,
            base,
            len,
            gone: false,
            mode,
            world,
            atomics: vec![false; size],
            probes: vec![crate::raw::request_null(); size].into_boxed_slice(),
            probe_words: vec![[0; 2]; size].into_boxed_slice(),
        };
        let ready = w.start();
        // If anything failed on any rank, every rank learns it here; the window is then
        // abandoned (MPI_Win_free is collective and the ranks no longer agree on reaching it).
        match vote(self, ready) {
            Ok(()) => Ok(w),
            Err(e) => {
                w.abandon();
                Err(e)
            }
        }
    }
}

impl MpiWindow {
    /// Errors come back as values, the memory is zeroed, every rank has zeroed its memory
    /// before any rank's access (a barrier), and the passive-target epoch is open (an atomic
    /// window's; a locked window has none: module docs).
    fn start(&mut self) -> Result<(), CreateError> {
        // SAFETY: a valid window just allocated; the constant is an immutable handle.
        let rc = unsafe { ffi::MPI_Win_set_errhandler(self.win, ffi::RSMPI_ERRORS_RETURN) };
        check(rc, "MPI_Win_set_errhandler")?;
        if self.base.is_null() || !(self.base as usize).is_multiple_of(8) {
            return Err(misuse("MPI_Win_allocate", "no aligned memory for the window").into());
        }
        match self.mode {
            WindowMode::Atomic => {
                // SAFETY: a valid window; no lock held yet. NOCHECK: no rank holds a
                // conflicting lock (exclusive locks are taken only on locked windows, which
                // have no lock-all).
                let rc = unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, self.win) };
                check(rc, "MPI_Win_lock_all")?;
                self.zero()?;
            }
            WindowMode::Locked => {
                // The zeroing goes inside an exclusive lock of the rank's own window: local
                // stores to window memory are protected by a lock (§11.5.3), and the sync and
                // the unlock make them part of the public copy that other ranks' MPI_Get read
                // under the separate model (§11.7), with no assumption about the model.
                let me = int(self.world.rank);
                // SAFETY: a valid window with no epoch open (it has no lock-all, and no
                // TargetLock exists yet); me < size.
                let rc =
                    unsafe { ffi::MPI_Win_lock(ffi::MPI_LOCK_EXCLUSIVE as c_int, me, 0, self.win) };
                check(rc, "MPI_Win_lock")?;
                let zeroed = self.zero();
                // SAFETY: the exclusive lock of our own window taken above.
                let unlocked = check(
                    unsafe { ffi::MPI_Win_unlock(me, self.win) },
                    "MPI_Win_unlock",
                );
                zeroed.and(unlocked)?;
            }
        }
        // SAFETY: aiac's communicator, collective over every rank.
        check(unsafe { ffi::MPI_Barrier(self.world.comm) }, "MPI_Barrier")?;
        Ok(())
    }

    /// Zero this rank's memory and synchronise the window's copies (§11.7). Called inside a
    /// passive-target epoch (the lock-all of an atomic window, the exclusive self-lock of a
    /// locked one), before the barrier after which other ranks access the memory.
    fn zero(&mut self) -> Result<(), CommError> {
        // SAFETY: base..base+words(len) is the window's local memory (MPI_Win_allocate: the
        // user's words, the probe word and padding), aligned (checked in start), and no rank
        // accesses it before start's barrier.
        unsafe { std::ptr::write_bytes(self.base, 0, words(self.len)) };
        // SAFETY: a valid window inside a passive-target epoch of this rank (the caller's);
        // MPI_Win_sync makes the zeroing part of its public copy.
        check(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")
    }

    /// Before a flush of `targets` on an oversubscribed node: wait, giving the core away
    /// between tests, until each of them with a compare-and-swap or fetch-and-add outstanding
    /// answered a probe issued after them (module docs). Nothing to do with a core per rank.
    fn await_atomics(&mut self, targets: std::ops::Range<usize>) -> Result<(), CommError> {
        if self.world.wait != WaitPolicy::Yield || !self.atomics[targets.clone()].contains(&true) {
            return Ok(());
        }
        let probe_at = self.len as ffi::MPI_Aint;
        for t in targets.clone().filter(|&t| self.atomics[t]) {
            let [operand, result] = &mut self.probe_words[t];
            *operand = 0;
            // SAFETY: a valid window, and an epoch to t open: a compare-and-swap or
            // fetch-and-add to t is outstanding, so t is inside the atomic window's lock-all
            // (start) or, on a locked window, the exclusive lock of t that chan-core's
            // TargetLock holds around the operation and its flush; t < size; the probe word
            // lies inside every rank's window (words(len) > len) and only probes touch it, all
            // with MPI_SUM on MPI_UINT64_T; operand, result and request live in boxes of self
            // that are never reallocated, and a failed wait below leaks them rather than
            // free them under MPI.
            let rc = unsafe {
                ffi::MPI_Rget_accumulate(
                    (operand as *const u64).cast::<c_void>(),
                    1,
                    u64_type(),
                    (result as *mut u64).cast::<c_void>(),
                    1,
                    u64_type(),
                    int(t),
                    probe_at,
                    1,
                    u64_type(),
                    ffi::RSMPI_SUM,
                    self.win,
                    &mut self.probes[t],
                )
            };
            if let Err(e) = check(rc, "MPI_Rget_accumulate") {
                self.leak_probes();
                return Err(e);
            }
        }
        let mut spins = 0u32;
        loop {
            let mut done: c_int = 0;
            let (n, reqs) = (targets.len(), self.probes[targets.clone()].as_mut_ptr());
            // SAFETY: reqs..reqs+n are requests of self (active probes or MPI_REQUEST_NULL),
            // updated in place; statuses are ignored.
            let rc =
                unsafe { ffi::MPI_Testall(int(n), reqs, &mut done, ffi::RSMPI_STATUSES_IGNORE) };
            if let Err(e) = check(rc, "MPI_Testall") {
                self.leak_probes();
                return Err(e);
            }
            if done != 0 {
                return Ok(());
            }
            self.world.relax(spins);
            spins = spins.saturating_add(1);
        }
    }

    /// This rank's words into `out`, each with an atomic load (the caller synchronised the
    /// window's copies first).
    fn load_local(&self, out: &mut [u64]) {
        for (i, d) in out.iter_mut().enumerate().take(self.len) {
            // SAFETY: base + i is an aligned word of the window's local memory, alive until
            // MPI_Win_free; other ranks write it through MPI (whole aligned 8-byte words), so
            // Rust reads it only through an atomic. Acquire pairs with nothing in Rust; the
            // ordering with remote writes comes from the fence's barrier and MPI_Win_sync (or
            // the shared lock of a locked window).
            *d = unsafe { AtomicU64::from_ptr(self.base.add(i)) }.load(Ordering::Acquire);
        }
    }

    /// After a failed probe or test: MPI may still write the probes' words and requests, so
    /// they are left allocated for good and the window goes on with fresh ones.
    fn leak_probes(&mut self) {
        let size = self.probes.len();
        Box::leak(std::mem::replace(
            &mut self.probes,
            vec![crate::raw::request_null(); size].into_boxed_slice(),
        ));
        Box::leak(std::mem::replace(
            &mut self.probe_words,
            vec![[0; 2]; size].into_boxed_slice(),
        ));
    }
}

// SAFETY: each operation is one MPI RMA call on the window with exactly the caller's buffer
// and count (MPI reads or writes nothing else of ours), and MPI_Win_flush(target) /
// MPI_Win_flush_all complete them at the origin and the target (MPI 3.1 §11.5.4).
unsafe impl RawWindow for MpiWindow {
    const NAME: &'static str = "mpi";

    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    unsafe fn put(&mut self, at: Span, src: *const u64) -> Result<(), CommError> {
        let (t, n, off) = (int(at.target()), int(at.count()), disp(at));
        // SAFETY: the caller's contract: span checked, src readable and unchanged until the
        // flush. An access epoch to target is open: an atomic window's lock-all (start) lasts
        // its life; a locked window is reached only through chan-core's TargetLock, which
        // holds target's exclusive lock (lock()) until after the flush.
        let rc =
            unsafe { ffi::MPI_Put(src.cast(), n, u64_type(), t, off, n, u64_type(), self.win) };
        check(rc, "MPI_Put")
    }

    #[inline]
    unsafe fn get(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError> {
        let (t, n, off) = (int(at.target()), int(at.count()), disp(at));
        // SAFETY: the caller's contract: span checked, dst ours until the flush; an access
        // epoch to target is open, as for put.
        let rc =
            unsafe { ffi::MPI_Get(dst.cast(), n, u64_type(), t, off, n, u64_type(), self.win) };
        check(rc, "MPI_Get")
    }

    #[inline]
    unsafe fn compare_and_swap(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        // SAFETY: the caller's contract: *op is ours until the flush, which is when MPI reads
        // the operand and compare words and writes the result; an access epoch to target is
        // open, as for put.
        let rc = unsafe {
            ffi::MPI_Compare_and_swap(
                std::ptr::addr_of!((*op).operand).cast::<c_void>(),
                std::ptr::addr_of!((*op).compare).cast::<c_void>(),
                std::ptr::addr_of_mut!((*op).result).cast::<c_void>(),
                u64_type(),
                int(at.target()),
                disp(at),
                self.win,
            )
        };
        check(rc, "MPI_Compare_and_swap")?;
        self.atomics[at.target()] = true;
        Ok(())
    }

    #[inline]
    unsafe fn fetch_add(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        // SAFETY: as compare_and_swap; MPI_SUM on MPI_UINT64_T wraps (unsigned arithmetic).
        let rc = unsafe {
            ffi::MPI_Fetch_and_op(
                std::ptr::addr_of!((*op).operand).cast::<c_void>(),
                std::ptr::addr_of_mut!((*op).result).cast::<c_void>(),
                u64_type(),
                int(at.target()),
                disp(at),
                ffi::RSMPI_SUM,
                self.win,
            )
        };
        check(rc, "MPI_Fetch_and_op")?;
        self.atomics[at.target()] = true;
        Ok(())
    }

    #[inline]
    fn flush(&mut self, target: usize) -> Result<(), CommError> {
        self.await_atomics(target..target + 1)?;
        // SAFETY: a valid window with an access epoch to target open, as for put (the atomic
        // window's lock-all, or the exclusive lock of target that TargetLock holds while it
        // flushes); target < size (chan-core checked it).
        let rc = unsafe { ffi::MPI_Win_flush(int(target), self.win) };
        check(rc, "MPI_Win_flush")?;
        self.atomics[target] = false;
        Ok(())
    }

    fn flush_all(&mut self) -> Result<(), CommError> {
        if self.mode == WindowMode::Locked {
            // No epoch to every rank to flush: each operation of a locked window was completed
            // by the flush after it, and TargetLock's unlock ends the only epoch there is.
            return Ok(());
        }
        self.await_atomics(0..self.atomics.len())?;
        // SAFETY: an atomic window (the locked case returned above), inside its lock-all
        // epoch (start), which MPI_Win_flush_all needs.
        let rc = unsafe { ffi::MPI_Win_flush_all(self.win) };
        check(rc, "MPI_Win_flush_all")?;
        self.atomics.fill(false);
        Ok(())
    }

    fn fence(&mut self) -> Result<(), CommError> {
        if self.mode == WindowMode::Locked {
            // Every operation completed at its unlock; no epoch is open to flush or sync.
            // SAFETY: aiac's communicator, collective over every rank.
            return check(unsafe { ffi::MPI_Barrier(self.world.comm) }, "MPI_Barrier");
        }
        self.flush_all()?;
        // SAFETY: an atomic window (the locked case returned above), inside its lock-all epoch
        // (start), as MPI_Win_sync needs; aiac's communicator, collective over every rank.
        // The syncs order this rank's view of its memory around the barrier (§11.7, Example
        // 11.21's pattern for passive target).
        unsafe {
            check(ffi::MPI_Win_sync(self.win), "MPI_Win_sync")?;
            check(ffi::MPI_Barrier(self.world.comm), "MPI_Barrier")?;
            check(ffi::MPI_Win_sync(self.win), "MPI_Win_sync")
        }
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), CommError> {
        if self.mode == WindowMode::Locked {
            let me = int(self.world.rank);
            // SAFETY: a valid window with no epoch of this rank open (chan-core's TargetLock
            // borrows the window, so none is held during read_local); a shared lock of our
            // own memory makes the local loads below an access epoch (§11.5.3).
            let rc = unsafe { ffi::MPI_Win_lock(ffi::MPI_LOCK_SHARED as c_int, me, 0, self.win) };
            check(rc, "MPI_Win_lock")?;
            self.load_local(out);
            // SAFETY: the shared lock taken above.
            return check(
                unsafe { ffi::MPI_Win_unlock(me, self.win) },
                "MPI_Win_unlock",
            );
        }
        // SAFETY: an atomic window (the locked case returned above), inside its lock-all epoch
        // (start), as MPI_Win_sync needs.
        check(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")?;
        self.load_local(out);
        Ok(())
    }

    fn lock(&mut self, target: usize) -> Result<(), CommError> {
        debug_assert_eq!(self.mode, WindowMode::Locked);
        // SAFETY: a valid locked window (no lock-all epoch); chan-core holds one lock at a
        // time, so this rank has no epoch open to target; target < size (checked).
        let rc = unsafe {
            ffi::MPI_Win_lock(ffi::MPI_LOCK_EXCLUSIVE as c_int, int(target), 0, self.win)
        };
        check(rc, "MPI_Win_lock")
    }

    fn unlock(&mut self, target: usize) -> Result<(), CommError> {
        // SAFETY: the exclusive lock on target taken by lock(); unlocking completes every
        // operation of the epoch at the origin and the target (§11.5.3).
        check(
            unsafe { ffi::MPI_Win_unlock(int(target), self.win) },
            "MPI_Win_unlock",
        )
    }

    fn free(&mut self) -> Result<(), CommError> {
        if std::mem::replace(&mut self.gone, true) {
            return Ok(());
        }
        // A locked window has no epoch open here (chan-core's TargetLock borrows the window,
        // so none is held when it is freed).
        let unlocked = match self.mode {
            // SAFETY: an atomic window, inside its lock-all epoch (start); closing it
            // completes every operation of this rank, then MPI_Win_free (collective) waits
            // for every rank's to complete at it.
            WindowMode::Atomic => check(
                unsafe { ffi::MPI_Win_unlock_all(self.win) },
                "MPI_Win_unlock_all",
            ),
            WindowMode::Locked => Ok(()),
        };
        // SAFETY: freed once (gone); MPI is initialised (self.world keeps it).
        let freed = check(unsafe { ffi::MPI_Win_free(&mut self.win) }, "MPI_Win_free");
        unlocked.and(freed)
    }

    fn abandon(&mut self) {
        // MPI_Win_free is collective: a rank that cannot count on the others reaching it
        // leaves the window to MPI_Finalize.
        self.gone = true;
    }
}

impl Drop for MpiWindow {
    fn drop(&mut self) {
        // chan-core's Window frees or abandons before this drops; a raw window dropped on its
        // own is left to MPI_Finalize rather than risk a collective call here.
        self.gone = true;
    }
}
