//! One-sided windows over OpenSHMEM 1.4: the window's words are a symmetric allocation
//! (`shmem_align`, §9.3), puts and gets are the non-blocking `shmem_putmem_nbi` /
//! `shmem_getmem_nbi` (§9.5.4, §9.5.5) completed by `shmem_quiet` (§9.8.2), and the atomics
//! are `shmem_ulong_atomic_compare_swap` / `shmem_ulong_atomic_fetch_add` (§9.7), which return
//! the old value, so they are complete when they return. SHMEM has no per-target completion:
//! a flush to one target is a `shmem_quiet` of everything.
//!
//! A locked window has beside its words a symmetric array of one `long` lock per PE:
//! `shmem_set_lock` (§9.11.1) takes a symmetric address and is one lock for the whole job, so
//! lock `t` of the array guards PE `t`'s words. `shmem_clear_lock` completes the holder's puts
//! before it releases the lock (a `shmem_quiet` first, made explicit here).

use crate::env::Shared;
use crate::sym::{atomic_at, barrier_all, quiet, Sym};
use crate::ShmemCtx;
use chan_core::backend::{vote, RawWindow, Span, WindowHooks, WindowMode, WordOp};
use chan_core::{CommError, CreateError};
use openshmem_sys as sys;
use std::os::raw::{c_int, c_long, c_ulong, c_void};
use std::rc::Rc;
use std::sync::atomic::Ordering;

const _: () = assert!(
    std::mem::size_of::<c_ulong>() == 8,
    "SHMEM's ulong atomics are u64"
);

/// One PE's handle on a SHMEM window: its symmetric words and the PE's shared state (so
/// SHMEM outlives the window).
pub struct ShmemWindow {
    mem: Option<Sym<u64>>,
    /// A locked window's locks, one per PE (module docs).
    locks: Option<Sym<c_long>>,
    base: *mut u64,
    len: usize,
    /// A put or get was started and no quiet has completed it yet (the atomics complete
    /// when they return, so a flush after them alone has nothing to wait for).
    pending: bool,
    sh: Rc<Shared>,
}

impl std::fmt::Debug for ShmemWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmemWindow")
            .field("pe", &self.sh.rank)
            .field("len", &self.len)
            .finish()
    }
}

impl WindowHooks for ShmemCtx {
    type Window = ShmemWindow;

    fn make_window(&mut self, len: usize, mode: WindowMode) -> Result<ShmemWindow, CreateError> {
        // Collective and symmetric: chan-core agreed that every PE asks for the same len and
        // mode, in the same order of collective calls. Zeroed locally, then a barrier: no PE
        // accesses another's words (or takes a lock) before they are zero.
        let mem = Sym::<u64>::alloc_zeroed(len);
        let mem = vote(self, mem.map_err(CreateError::from))?;
        let locks = match mode {
            WindowMode::Atomic => None,
            WindowMode::Locked => {
                let locks = Sym::<c_long>::alloc_zeroed(self.shared().size);
                match vote(self, locks.map_err(CreateError::from)) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        // Every PE got the same verdict: the words go back collectively.
                        barrier_all();
                        mem.free();
                        return Err(e);
                    }
                }
            }
        };
        barrier_all();
        Ok(ShmemWindow {
            base: mem.ptr(),
            mem: Some(mem),
            locks,
            len,
            pending: false,
            sh: Rc::clone(self.shared()),
        })
    }
}

impl ShmemWindow {
    /// The symmetric address of word `offset` (valid on every PE for offset ≤ len, as a
    /// span's and a local word's are; a SHMEM call's contract is what makes it so).
    #[inline(always)]
    fn at(&self, offset: usize) -> *mut u64 {
        debug_assert!(offset <= self.len);
        self.base.wrapping_add(offset)
    }

    /// PE `target`'s lock (a locked window's; module docs).
    #[inline(always)]
    fn lock_word(&self, target: usize) -> Result<*mut c_long, CommError> {
        let locks = self.locks.as_ref().ok_or_else(|| {
            crate::sym::shmem_err("shmem_set_lock", "the window was not created locked")
        })?;
        debug_assert!(target < locks.len());
        // SAFETY: target < size (chan-core checked it), the array's length.
        Ok(unsafe { locks.ptr().add(target) })
    }
}

/// A PE number as SHMEM's int (chan-core checked target < size, and size came from an int).
#[inline(always)]
fn pe(target: usize) -> c_int {
    target as c_int
}

// SAFETY: each operation is one SHMEM call with exactly the caller's buffer and byte count;
// the nbi transfers complete at shmem_quiet (§9.8.2: every put, get and AMO issued before it),
// which flush and flush_all call whenever one was started since the last; the atomics fetch
// their old value, so they have completed at the target when they return.
unsafe impl RawWindow for ShmemWindow {
    const NAME: &'static str = "shmem";

    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    unsafe fn put(&mut self, at: Span, src: *const u64) -> Result<(), CommError> {
        self.pending = true;
        let dst = self.at(at.offset()).cast::<c_void>();
        // SAFETY: the caller's contract (range checked, src unchanged until the quiet); the
        // destination is the same symmetric range on `target`.
        unsafe { sys::shmem_putmem_nbi(dst, src.cast(), at.bytes(), pe(at.target())) };
        Ok(())
    }

    #[inline]
    unsafe fn get(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError> {
        self.pending = true;
        let src = self.at(at.offset()).cast_const().cast::<c_void>();
        // SAFETY: the caller's contract (range checked, dst ours until the quiet).
        unsafe { sys::shmem_getmem_nbi(dst.cast(), src, at.bytes(), pe(at.target())) };
        Ok(())
    }

    /// `shmem_getmem`: blocking, returns with the data (cheaper than nbi + quiet).
    #[inline]
    unsafe fn get_now(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError> {
        let src = self.at(at.offset()).cast_const().cast::<c_void>();
        // SAFETY: the caller's contract (range checked, dst ours until this returns).
        unsafe { sys::shmem_getmem(dst.cast(), src, at.bytes(), pe(at.target())) };
        Ok(())
    }

    #[inline]
    unsafe fn compare_and_swap(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        let word = self.at(at.offset()).cast::<c_ulong>();
        // SAFETY: the caller's contract: *op is ours; the word is an aligned symmetric word.
        unsafe {
            let o = &mut *op;
            o.result = sys::shmem_ulong_atomic_compare_swap(
                word,
                o.compare as c_ulong,
                o.operand as c_ulong,
                pe(at.target()),
            ) as u64;
        }
        Ok(())
    }

    #[inline]
    unsafe fn fetch_add(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        let word = self.at(at.offset()).cast::<c_ulong>();
        // SAFETY: as compare_and_swap; unsigned long addition wraps.
        unsafe {
            let o = &mut *op;
            o.result =
                sys::shmem_ulong_atomic_fetch_add(word, o.operand as c_ulong, pe(at.target()))
                    as u64;
        }
        Ok(())
    }

    #[inline]
    fn flush(&mut self, _target: usize) -> Result<(), CommError> {
        self.flush_all()
    }

    #[inline]
    fn flush_all(&mut self) -> Result<(), CommError> {
        if std::mem::replace(&mut self.pending, false) {
            quiet();
        }
        Ok(())
    }

    fn fence(&mut self) -> Result<(), CommError> {
        // shmem_barrier_all completes every PE's outstanding operations and synchronises
        // (§9.9.2); the quiet first makes that explicit.
        self.pending = false;
        quiet();
        barrier_all();
        Ok(())
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), CommError> {
        for (i, d) in out.iter_mut().enumerate().take(self.len) {
            // SAFETY: an aligned word of the live symmetric allocation; other PEs write it
            // through SHMEM, so Rust reads it only through an atomic. Acquire: ordering with
            // remote writes comes from the fence's barrier.
            *d = unsafe { atomic_at(self.at(i)) }.load(Ordering::Acquire);
        }
        Ok(())
    }

    fn free(&mut self) -> Result<(), CommError> {
        let Some(mem) = self.mem.take() else {
            return Ok(());
        };
        // Every PE's operations on the window complete before any PE frees it (shmem_free's
        // own barrier may come after the local free).
        quiet();
        barrier_all();
        mem.free();
        if let Some(locks) = self.locks.take() {
            locks.free();
        }
        Ok(())
    }

    fn abandon(&mut self) {
        // shmem_free is collective: left to shmem_finalize, which releases the whole heap.
        self.mem = None;
        self.locks = None;
    }

    fn lock(&mut self, target: usize) -> Result<(), CommError> {
        let word = self.lock_word(target)?;
        // SAFETY: a symmetric long of the live lock array, zeroed and synchronised by the
        // creation's barrier, and touched only by shmem_set_lock/shmem_clear_lock.
        unsafe { sys::shmem_set_lock(word) };
        Ok(())
    }

    fn unlock(&mut self, target: usize) -> Result<(), CommError> {
        let word = self.lock_word(target)?;
        // The puts made under the lock are complete at the target before the next holder
        // reads (shmem_clear_lock quiets too, §9.11.1).
        self.flush_all()?;
        // SAFETY: the lock this PE set in lock() (same symmetric address).
        unsafe { sys::shmem_clear_lock(word) };
        Ok(())
    }
}
