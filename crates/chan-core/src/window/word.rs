//! The words a window holds: `u64`, `i64` and `f64`, each 8 bytes whatever its bits.

mod sealed {
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for i64 {}
    impl Sealed for f64 {}
}

/// An 8-byte word a window holds: `u64`, `i64` or `f64` (as its bits). Sealed.
///
/// # Safety
/// Implementors are 8 bytes, aligned to 8, and every bit pattern is a valid value, so a slice
/// of them may be viewed as a slice of `u64` and back (the backends move `u64`).
pub unsafe trait Word: Copy + sealed::Sealed + std::fmt::Debug + 'static {
    /// The type's name, in creation errors.
    const NAME: &'static str;
    /// The type's code in the creation agreement.
    const CODE: u64;
    /// The word's bits.
    fn to_bits(self) -> u64;
    /// The word with these bits.
    fn from_bits(bits: u64) -> Self;
}

/// A word [`Window::fetch_add`] can add to: two's-complement wrapping addition, the same bits
/// for `u64` and `i64`.
pub trait IntWord: Word {}

const _: () = {
    assert!(std::mem::size_of::<i64>() == 8 && std::mem::align_of::<i64>() == 8);
    assert!(std::mem::size_of::<f64>() == 8 && std::mem::align_of::<f64>() == 8);
    assert!(std::mem::align_of::<u64>() == 8);
};

// SAFETY: u64 is the backends' own word.
unsafe impl Word for u64 {
    const NAME: &'static str = "u64";
    const CODE: u64 = 1;
    fn to_bits(self) -> u64 {
        self
    }
    fn from_bits(bits: u64) -> Self {
        bits
    }
}
// SAFETY: 8 bytes, align 8 (asserted above), every bit pattern is an i64.
unsafe impl Word for i64 {
    const NAME: &'static str = "i64";
    const CODE: u64 = 2;
    fn to_bits(self) -> u64 {
        self as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits as i64
    }
}
// SAFETY: 8 bytes, align 8 (asserted above), every bit pattern is an f64 (NaNs included).
unsafe impl Word for f64 {
    const NAME: &'static str = "f64";
    const CODE: u64 = 3;
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
    fn from_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }
}
impl IntWord for u64 {}
impl IntWord for i64 {}

pub(super) fn as_words<T: Word>(s: &[T]) -> &[u64] {
    // SAFETY: Word's contract: T is 8 bytes, align 8, any bits valid, so the same memory is a
    // valid [u64] of the same length, borrowed for the same lifetime.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u64>(), s.len()) }
}
