//! `f64` read and written through atomics: racy buffers in Rust without undefined behaviour.
//!
//! ## Memory ordering
//! Every load and store here is `Relaxed`. A racy receive buffer promises nothing across
//! elements: each element read is a value some send wrote (8-byte accesses are never torn), but
//! neighbouring elements may come from different sends. Whatever must be ordered (a message
//! counter, a stamp) is published separately by the transport with Release/Acquire.

// Always std atomics: the view is cast from plain f64 memory, so its layout must be the real one.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// An `f64` stored as its bits in an [`AtomicU64`]; loads and stores are `Relaxed`.
#[repr(transparent)]
#[derive(Debug, Default)]
pub struct AtomicF64(AtomicU64);

// An f64 buffer viewed as AtomicF64 relies on identical size and alignment.
const _: () = assert!(std::mem::size_of::<AtomicF64>() == std::mem::size_of::<f64>());
const _: () = assert!(std::mem::align_of::<AtomicF64>() == std::mem::align_of::<f64>());

impl AtomicF64 {
    /// A new atomic holding `v`.
    pub fn new(v: f64) -> Self {
        AtomicF64(AtomicU64::new(v.to_bits()))
    }

    /// Relaxed load.
    #[inline(always)]
    pub fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }

    /// Relaxed load of the bits, for a view of another element type packed in the word.
    #[inline(always)]
    pub(crate) fn load_bits(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Relaxed store.
    #[inline(always)]
    pub fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed)
    }
}

/// A slice of [`AtomicF64`]: the view of a racy receive buffer. It cannot be read as `&[f64]`;
/// copy it out with [`AtomicF64Slice::load_into`] or read elements with [`AtomicF64Slice::load`].
#[repr(transparent)]
#[derive(Debug)]
pub struct AtomicF64Slice([AtomicF64]);

impl AtomicF64Slice {
    /// View a slice of atomics as an `AtomicF64Slice`.
    pub fn from_atomics(s: &[AtomicF64]) -> &Self {
        let ptr = std::ptr::from_ref(s) as *const AtomicF64Slice;
        // SAFETY: AtomicF64Slice is repr(transparent) over [AtomicF64], so the pointer cast keeps
        // the slice metadata (its length) and the layout; the lifetime is carried over unchanged.
        unsafe { &*ptr }
    }

    /// View `len` f64 at `ptr` as atomics.
    ///
    /// # Safety
    /// 1. `ptr` is non-null, aligned for f64 and valid for reads and writes of `len` f64 for `'a`;
    /// 2. for `'a`, every access to that memory from Rust goes through atomics (this view or
    ///    another `AtomicF64Slice`); writes by a transport outside Rust's model (RDMA, a
    ///    one-sided put, an MPI receive into the buffer) are 8-byte aligned stores.
    pub unsafe fn from_raw<'a>(ptr: *const f64, len: usize) -> &'a Self {
        debug_assert!(!ptr.is_null() && ptr.align_offset(std::mem::align_of::<f64>()) == 0);
        // SAFETY: (caller 1) the memory is valid and aligned for 'a; AtomicF64 has the size and
        // alignment of f64 (asserted above), so it is a valid [AtomicF64] of length len;
        // (caller 2) no plain reference aliases it.
        let atomics = unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicF64>(), len) };
        Self::from_atomics(atomics)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for an empty slice.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Relaxed load of element `i`. Panics when `i` is out of bounds.
    #[inline(always)]
    pub fn load(&self, i: usize) -> f64 {
        self.0[i].load()
    }

    /// Relaxed load of element `i`'s bits. Panics when `i` is out of bounds.
    #[inline(always)]
    pub(crate) fn load_bits(&self, i: usize) -> u64 {
        self.0[i].load_bits()
    }

    /// Relaxed store into element `i`. Panics when `i` is out of bounds.
    #[inline(always)]
    pub fn store(&self, i: usize, v: f64) {
        self.0[i].store(v)
    }

    /// Copy every element into `out` (relaxed loads). Panics when the lengths differ.
    #[inline]
    pub fn load_into(&self, out: &mut [f64]) {
        assert_eq!(out.len(), self.len(), "load_into: length mismatch");
        for (o, a) in out.iter_mut().zip(&self.0) {
            *o = a.load();
        }
    }

    /// Store every element of `src` (relaxed stores). Panics when the lengths differ.
    #[inline]
    pub fn store_from(&self, src: &[f64]) {
        assert_eq!(src.len(), self.len(), "store_from: length mismatch");
        for (a, &v) in self.0.iter().zip(src) {
            a.store(v);
        }
    }

    /// The first `mid` elements and the rest, as two views. Panics when `mid > len`.
    pub fn split_at(&self, mid: usize) -> (&Self, &Self) {
        let (a, b) = self.0.split_at(mid);
        (Self::from_atomics(a), Self::from_atomics(b))
    }

    /// Iterate over relaxed loads of the elements.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.0.iter().map(AtomicF64::load)
    }

    /// The underlying atomics.
    pub fn as_atomics(&self) -> &[AtomicF64] {
        &self.0
    }
}

/// An owned, heap-allocated racy buffer (for backends: a racy receive buffer in the
/// process's own memory).
#[derive(Debug)]
pub struct AtomicF64Buf(Box<[AtomicF64]>);

impl AtomicF64Buf {
    /// `len` elements, all 0.0.
    pub fn zeroed(len: usize) -> Self {
        AtomicF64Buf((0..len).map(|_| AtomicF64::new(0.0)).collect())
    }

    /// The elements as plain `f64`, for a writer that holds the buffer alone.
    pub(crate) fn as_mut_f64(&mut self) -> &mut [f64] {
        // SAFETY: AtomicF64 has the size and alignment of f64 (asserted above) and any bits
        // are a valid f64; `&mut self` excludes every other access for the borrow's life.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<f64>(), self.0.len()) }
    }
}

impl std::ops::Deref for AtomicF64Buf {
    type Target = AtomicF64Slice;
    fn deref(&self) -> &AtomicF64Slice {
        AtomicF64Slice::from_atomics(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_bit_pattern_class() {
        let vals = [
            0.0,
            -0.0,
            1.5,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NAN,
            -1e300,
        ];
        let buf = AtomicF64Buf::zeroed(vals.len());
        buf.store_from(&vals);
        let mut out = [0.0; 7];
        buf.load_into(&mut out);
        for (a, b) in vals.iter().zip(out) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        assert_eq!(buf.iter().count(), 7);
        assert_eq!(buf.load(4), f64::INFINITY);
    }

    #[test]
    fn raw_view_of_f64_memory() {
        let mut mem = vec![1.0f64, 2.0, 3.0];
        // SAFETY: mem lives for the whole block and is only accessed through the view while
        // the view exists; it is a Vec<f64>, so aligned and valid.
        let view = unsafe { AtomicF64Slice::from_raw(mem.as_mut_ptr(), mem.len()) };
        view.store(1, 5.0);
        assert_eq!(view.iter().collect::<Vec<_>>(), vec![1.0, 5.0, 3.0]);
        assert_eq!(mem[1], 5.0);
    }

    #[test]
    #[should_panic(expected = "length mismatch")]
    fn length_mismatch_panics() {
        AtomicF64Buf::zeroed(2).store_from(&[1.0]);
    }
}
