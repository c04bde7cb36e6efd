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

use crate::env::World;
use crate::raw::{check, misuse, u64_type};
use crate::MpiCtx;
use chan_core::backend::{vote, RawWindow, WindowHooks, WordOp};
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
    len: usize,
    /// Set once the window was freed or abandoned.
    gone: bool,
    world: Rc<World>,
}

impl std::fmt::Debug for MpiWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiWindow")
            .field("rank", &self.world.rank)
            .field("len", &self.len)
            .finish()
    }
}

/// A rank or count as the `int` MPI takes (chan-core checked it against the window, whose
/// length the creation checked against `int`).
#[inline(always)]
fn int(v: usize) -> c_int {
    debug_assert!(v <= c_int::MAX as usize);
    v as c_int
}

impl WindowHooks for MpiCtx {
    type Window = MpiWindow;

    fn make_window(&mut self, len: usize) -> Result<MpiWindow, CreateError> {
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
        let bytes = (len * 8) as ffi::MPI_Aint;
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
        let mut w = MpiWindow {
            win,
            base,
            len,
            gone: false,
            world,
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
    /// before any rank's access (a barrier), and the passive-target epoch is open.
    fn start(&mut self) -> Result<(), CreateError> {
        // SAFETY: a valid window just allocated; the constant is an immutable handle.
        let rc = unsafe { ffi::MPI_Win_set_errhandler(self.win, ffi::RSMPI_ERRORS_RETURN) };
        check(rc, "MPI_Win_set_errhandler")?;
        if self.base.is_null() || (self.base as usize) % 8 != 0 {
            return Err(misuse("MPI_Win_allocate", "no aligned memory for the window").into());
        }
        // SAFETY: base..base+len is the window's local memory (MPI_Win_allocate), aligned
        // (checked), and no rank accesses it before the barrier below.
        unsafe { std::ptr::write_bytes(self.base, 0, self.len) };
        // SAFETY: a valid window; no lock held yet. NOCHECK: no rank holds a conflicting lock
        // (nobody uses exclusive locks on aiac's windows).
        let rc = unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, self.win) };
        check(rc, "MPI_Win_lock_all")?;
        // SAFETY: the window is locked; MPI_Win_sync makes the zeroing part of its public copy.
        check(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")?;
        // SAFETY: aiac's communicator, collective over every rank.
        check(unsafe { ffi::MPI_Barrier(self.world.comm) }, "MPI_Barrier")?;
        Ok(())
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
    unsafe fn put(
        &mut self,
        target: usize,
        offset: usize,
        src: *const u64,
        count: usize,
    ) -> Result<(), CommError> {
        // SAFETY: the caller's contract: target and range checked, src readable and unchanged
        // until the flush; the window is locked (lock_all) for the window's life.
        let rc = unsafe {
            ffi::MPI_Put(
                src.cast::<c_void>(),
                int(count),
                u64_type(),
                int(target),
                offset as ffi::MPI_Aint,
                int(count),
                u64_type(),
                self.win,
            )
        };
        check(rc, "MPI_Put")
    }

    #[inline]
    unsafe fn get(
        &mut self,
        target: usize,
        offset: usize,
        dst: *mut u64,
        count: usize,
    ) -> Result<(), CommError> {
        // SAFETY: the caller's contract: target and range checked, dst ours until the flush.
        let rc = unsafe {
            ffi::MPI_Get(
                dst.cast::<c_void>(),
                int(count),
                u64_type(),
                int(target),
                offset as ffi::MPI_Aint,
                int(count),
                u64_type(),
                self.win,
            )
        };
        check(rc, "MPI_Get")
    }

    #[inline]
    unsafe fn compare_and_swap(
        &mut self,
        target: usize,
        offset: usize,
        op: *mut WordOp,
    ) -> Result<(), CommError> {
        // SAFETY: the caller's contract: *op is ours until the flush, which is when MPI reads
        // the operand and compare words and writes the result.
        let rc = unsafe {
            ffi::MPI_Compare_and_swap(
                std::ptr::addr_of!((*op).operand).cast::<c_void>(),
                std::ptr::addr_of!((*op).compare).cast::<c_void>(),
                std::ptr::addr_of_mut!((*op).result).cast::<c_void>(),
                u64_type(),
                int(target),
                offset as ffi::MPI_Aint,
                self.win,
            )
        };
        check(rc, "MPI_Compare_and_swap")
    }

    #[inline]
    unsafe fn fetch_add(
        &mut self,
        target: usize,
        offset: usize,
        op: *mut WordOp,
    ) -> Result<(), CommError> {
        // SAFETY: as compare_and_swap; MPI_SUM on MPI_UINT64_T wraps (unsigned arithmetic).
        let rc = unsafe {
            ffi::MPI_Fetch_and_op(
                std::ptr::addr_of!((*op).operand).cast::<c_void>(),
                std::ptr::addr_of_mut!((*op).result).cast::<c_void>(),
                u64_type(),
                int(target),
                offset as ffi::MPI_Aint,
                ffi::RSMPI_SUM,
                self.win,
            )
        };
        check(rc, "MPI_Fetch_and_op")
    }

    #[inline]
    fn flush(&mut self, target: usize) -> Result<(), CommError> {
        // SAFETY: a valid, locked window; target < size (chan-core checked it).
        check(
            unsafe { ffi::MPI_Win_flush(int(target), self.win) },
            "MPI_Win_flush",
        )
    }

    fn flush_all(&mut self) -> Result<(), CommError> {
        // SAFETY: a valid, locked window.
        check(
            unsafe { ffi::MPI_Win_flush_all(self.win) },
            "MPI_Win_flush_all",
        )
    }

    fn fence(&mut self) -> Result<(), CommError> {
        self.flush_all()?;
        // SAFETY: a valid, locked window; aiac's communicator, collective over every rank.
        // The syncs order this rank's view of its memory around the barrier (§11.7, Example
        // 11.21's pattern for passive target).
        unsafe {
            check(ffi::MPI_Win_sync(self.win), "MPI_Win_sync")?;
            check(ffi::MPI_Barrier(self.world.comm), "MPI_Barrier")?;
            check(ffi::MPI_Win_sync(self.win), "MPI_Win_sync")
        }
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), CommError> {
        // SAFETY: a valid, locked window.
        check(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")?;
        for (i, d) in out.iter_mut().enumerate().take(self.len) {
            // SAFETY: base + i is an aligned word of the window's local memory, alive until
            // MPI_Win_free; other ranks write it through MPI (whole aligned 8-byte words), so
            // Rust reads it only through an atomic. Acquire pairs with nothing in Rust; the
            // ordering with remote writes comes from the fence's barrier and MPI_Win_sync.
            *d = unsafe { AtomicU64::from_ptr(self.base.add(i)) }.load(Ordering::Acquire);
        }
        Ok(())
    }

    fn free(&mut self) -> Result<(), CommError> {
        if std::mem::replace(&mut self.gone, true) {
            return Ok(());
        }
        // SAFETY: a valid, locked window; closing the epoch completes every operation of this
        // rank, then MPI_Win_free (collective) waits for every rank's to complete at it.
        let unlocked = check(
            unsafe { ffi::MPI_Win_unlock_all(self.win) },
            "MPI_Win_unlock_all",
        );
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
