//! Symmetric memory owned by Rust values, and the few checked calls the rest of the crate
//! makes into OpenSHMEM.
//!
//! ## Why nothing here frees in `Drop`
//! `shmem_free` is collective (OpenSHMEM 1.4, 9.3.1: it ends in a barrier of all PEs), so a
//! `Drop` that called it would hang whenever the PEs do not drop the same allocation at the
//! same point. A [`Sym`] is freed by [`Sym::free`], which the environment calls at collective
//! points only (channel-set reclamation, finalize); a `Sym` dropped without it is left to
//! `shmem_finalize`, which releases the whole symmetric heap.

use chan_core::CommError;
use openshmem_sys as sys;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// An error of the SHMEM backend.
pub(crate) fn shmem_err(call: &'static str, message: impl Into<String>) -> CommError {
    CommError::Backend {
        backend: "shmem",
        call,
        message: message.into(),
    }
}

/// Alignment of every symmetric allocation: a cache line.
pub(crate) const ALIGN: usize = 64;

/// `n` values of `T` on the symmetric heap: the same (symmetric) address on every PE, so a
/// local address inside it is a valid put target on any PE (OpenSHMEM 1.4, 3.1).
pub(crate) struct Sym<T> {
    ptr: NonNull<T>,
    len: usize,
}

impl<T: Copy> Sym<T> {
    /// Collective: every PE calls it with the same `len` (the heap stays symmetric only if
    /// every PE makes the same sequence of allocations). The memory is zeroed locally; the
    /// caller synchronises (a barrier) before any PE puts into it.
    pub(crate) fn alloc_zeroed(len: usize) -> Result<Self, CommError> {
        let bytes = len
            .max(1)
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| {
                shmem_err(
                    "shmem_align",
                    format!("{len} elements overflow a byte count"),
                )
            })?;
        debug_assert!(std::mem::align_of::<T>() <= ALIGN);
        // SAFETY: a collective allocation made by every PE in the same order (callers are
        // collective operations of the environment); it returns memory or null.
        let p = unsafe { sys::shmem_align(ALIGN, bytes) };
        let ptr = NonNull::new(p.cast::<T>()).ok_or_else(|| {
            shmem_err(
                "shmem_align",
                format!("the symmetric heap has no room for {bytes} bytes (raise SHMEM_SYMMETRIC_HEAP_SIZE)"),
            )
        })?;
        // SAFETY: ptr is a fresh allocation of `bytes` bytes that nothing else references yet;
        // no PE puts into it before the caller's barrier.
        unsafe { std::ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, bytes) };
        Ok(Sym { ptr, len })
    }
}

impl<T> Sym<T> {
    /// The local address of element 0 (symmetric: valid as a put target on every PE).
    pub(crate) fn ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Collective: every PE frees the same allocation at the same point (`shmem_free` ends in
    /// a barrier). No PE may put into it afterwards; the callers make sure no put is pending
    /// (`shmem_quiet` and a collective vote before).
    pub(crate) fn free(self) {
        // SAFETY: the pointer came from shmem_align and is freed once (self is consumed); the
        // caller guarantees the call is collective and that no put targets it any more.
        unsafe { sys::shmem_free(self.ptr.as_ptr().cast::<c_void>()) };
    }
}

/// A symmetric `u64` read through an atomic: memory that a peer's puts write while this PE
/// reads it.
///
/// # Safety
/// `p` is aligned, lies inside a live symmetric allocation for `'a`, and Rust touches it only
/// through atomics for `'a` (the peer's puts are 8-byte aligned stores of whole words).
#[inline(always)]
pub(crate) unsafe fn atomic_at<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: the caller's conditions are those of AtomicU64::from_ptr.
    unsafe { AtomicU64::from_ptr(p) }
}

/// `shmem_ptr`: the address in this process of symmetric `p` on `pe`, when `pe`'s memory is
/// mapped here for plain loads and stores (a PE on the same node, OpenSHMEM 1.4, 9.2.3), else
/// None.
///
/// # Safety
/// `p` lies inside a live symmetric allocation.
pub(crate) unsafe fn peer_ptr(p: *mut u64, pe: c_int) -> Option<NonNull<u64>> {
    // SAFETY: the caller's condition; shmem_ptr only translates the address.
    NonNull::new(unsafe { sys::shmem_ptr(p.cast::<c_void>().cast_const(), pe) }.cast::<u64>())
}

/// `shmem_putmem`: `bytes` bytes from local `src` to symmetric `dst` on `pe`. Returns once
/// `src` may be reused (OpenSHMEM 1.4, 9.5.1); ordering with later puts needs a fence.
///
/// # Safety
/// `dst..dst+bytes` lies inside a live symmetric allocation (on `pe`, the same range at the
/// same symmetric address) that `pe` reads only after the ordering protocol says the data
/// landed, or only through atomics; `src..src+bytes` is readable.
#[inline(always)]
pub(crate) unsafe fn put(dst: *mut u8, src: *const u8, bytes: usize, pe: c_int) {
    // SAFETY: the caller's conditions.
    unsafe { sys::shmem_putmem(dst.cast::<c_void>(), src.cast::<c_void>(), bytes, pe) }
}

/// `shmem_uint64_p`: one aligned 8-byte word to symmetric `dst` on `pe`.
///
/// # Safety
/// `dst` is an aligned word inside a live symmetric allocation that `pe` reads only through
/// atomics.
#[inline(always)]
pub(crate) unsafe fn put_word(dst: *mut u64, v: u64, pe: c_int) {
    // SAFETY: the caller's conditions.
    unsafe { sys::shmem_uint64_p(dst, v, pe) }
}

/// `shmem_fence`: every put to a PE issued before it is delivered before any issued after it
/// to the same PE (OpenSHMEM 1.4, 9.8.1). It starts with a release fence, so this thread's
/// atomic stores into a peer's mapped memory (racy sends) are ordered before later puts too.
#[inline(always)]
pub(crate) fn fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    // SAFETY: no arguments; SHMEM is initialised while any channel or context exists.
    unsafe { sys::shmem_fence() }
}

/// `shmem_quiet`: every put this PE issued so far has completed at its target (9.8.2).
#[inline(always)]
pub(crate) fn quiet() {
    // SAFETY: no arguments; SHMEM is initialised while any channel or context exists.
    unsafe { sys::shmem_quiet() }
}

/// `shmem_barrier_all` (9.9.2): every PE arrives, and every put issued before completes.
pub(crate) fn barrier_all() {
    // SAFETY: collective with no arguments; callers are collective operations.
    unsafe { sys::shmem_barrier_all() }
}
