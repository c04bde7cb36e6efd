//! What a channel carries: any plain-old-data element ([`Element`]), and the scalars whose
//! racy receive stays an atomic view ([`RacyElement`]).
//!
//! ## Why `bytemuck::Pod`
//! A message crosses processes as bytes: a transport copies them, or puts them into another
//! process's memory, and the receiver reads them back as its element type. That is sound for a
//! type with no padding (every byte is initialised, so nothing uninitialised is sent), no
//! pointers or references (an address means nothing in another process), and no invalid bit
//! patterns (whatever bytes land are a value). `bytemuck::Pod` is exactly that promise, and its
//! derive checks it at compile time (`#[repr(C)]`, no padding, every field `Pod`), so a user's
//! struct becomes an element with `#[derive(Clone, Copy, Pod, Zeroable)]` and no `unsafe`. A
//! marker trait of aiac's own would have to be an `unsafe impl` the user writes by hand, with
//! nothing checking it.
//!
//! ## Words
//! Every transport moves 8-byte words. A message of `len` elements of `T` takes
//! `ceil(len · size_of::<T>() / 8)` words, its elements packed from the first byte in the
//! machine's byte order; the last word's unused bytes carry nothing. Elements are therefore
//! aligned to at most 8 bytes: a type of larger alignment is refused when the program is
//! built.
//!
//! ## Racy elements
//! A racy receive buffer is written by the transport in whole 8-byte words while it is read
//! ([`crate::AtomicF64Slice`]). A racy channel carries a scalar with a native atomic of its
//! width, 8 or 4 bytes ([`RacyElement`]: `f64`, `i64`, `u64`, `f32`, `i32`, `u32`), so each
//! element read is some send's value. A struct is refused: its fields could be read from
//! different sends whenever it spans words, and a guarantee that held only for the structs
//! that happen to fit one word would be no guarantee. Sealed.

use crate::atomic::AtomicF64Slice;
use crate::config::{ChannelConfig, ChannelSpec};
use crate::error::{ConfigError, CreateError, SpecField};
use std::marker::PhantomData;

/// A type a channel can carry: plain old data ([`bytemuck::Pod`], derived or one of its
/// impls), shared between threads, aligned to at most 8 bytes and not zero-sized (checked
/// where a channel of it is opened, when the program is built).
///
/// Implemented for every such type; a user's struct derives `Pod`:
///
/// ```
/// use bytemuck::{Pod, Zeroable};
/// #[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
/// #[repr(C)]
/// struct Particle {
///     position: [f32; 3],
///     id: u32,
/// }
/// fn carries<T: chan_core::Element>() {}
/// carries::<Particle>();
/// carries::<f32>();
/// carries::<[i64; 2]>();
/// ```
///
/// A type with a pointer, padding or invalid bit patterns is no element:
///
/// ```compile_fail
/// fn carries<T: chan_core::Element>() {}
/// carries::<&'static str>(); // an address means nothing in another process
/// ```
/// ```compile_fail
/// fn carries<T: chan_core::Element>() {}
/// carries::<bool>(); // a byte other than 0 or 1 is no bool
/// ```
pub trait Element: bytemuck::Pod + Send + Sync {}

impl<T: bytemuck::Pod + Send + Sync> Element for T {}

/// What the creation handshake compares between the two ends of a channel: the element's size
/// and its type name (`std::any::type_name`), as a hash and as text for the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementType {
    /// `size_of` the element.
    pub size: usize,
    /// FNV-1a of the type's name and size: equal at both ends of a channel of one type.
    pub id: u64,
    /// The type's name, as `std::any::type_name` gives it.
    pub name: &'static str,
}

/// Words of the handshake that carry an element's name (the first 32 bytes of it).
pub(crate) const NAME_WORDS: usize = 4;

/// The compile-time checks on an element: not zero-sized, aligned to at most one word.
struct Layout<T>(PhantomData<T>);

impl<T> Layout<T> {
    const OK: () = {
        assert!(
            std::mem::size_of::<T>() > 0,
            "a channel's element type must not be zero-sized"
        );
        assert!(
            std::mem::align_of::<T>() <= 8,
            "a channel's element type must be aligned to at most 8 bytes (transports move \
             8-byte words)"
        );
    };
}

impl ElementType {
    /// The element type `T`. Fails to build for a zero-sized type or one aligned to more than
    /// 8 bytes.
    pub fn of<T: Element>() -> Self {
        #[allow(clippy::let_unit_value)] // evaluating the constant is the check
        let () = Layout::<T>::OK;
        let name = std::any::type_name::<T>();
        let size = std::mem::size_of::<T>();
        let id = fnv1a(name.as_bytes().iter().chain(&size.to_le_bytes()));
        ElementType { size, id, name }
    }

    /// Words a message of `len` elements takes; `None` when its byte count overflows.
    pub fn words(&self, len: usize) -> Option<usize> {
        len.checked_mul(self.size).map(|b| b.div_ceil(8))
    }

    /// `spec` (its length in elements of this type) as the backend wires it: its length in
    /// words. A length whose words overflow, or do not fit with R, is `TooLarge`.
    pub(crate) fn wired(&self, spec: &ChannelSpec) -> Result<ChannelSpec, ConfigError> {
        let (len, r) = (spec.config.len(), spec.config.max_in_flight());
        let words = self.words(len).ok_or(ConfigError::TooLarge {
            len,
            max_in_flight: r,
        })?;
        Ok(ChannelSpec {
            config: ChannelConfig::new(words, r)?,
            ..*spec
        })
    }

    /// The handshake's words for this type: size, id, then the name's first 32 bytes.
    pub(crate) fn wire(&self) -> [u64; 2 + NAME_WORDS] {
        let mut w = [0u64; 2 + NAME_WORDS];
        w[0] = self.size as u64;
        w[1] = self.id;
        let bytes = self.name.as_bytes();
        for (i, word) in w[2..].iter_mut().enumerate() {
            let mut b = [0u8; 8];
            let start = (8 * i).min(bytes.len());
            let end = (start + 8).min(bytes.len());
            b[..end - start].copy_from_slice(&bytes[start..end]);
            *word = u64::from_le_bytes(b);
        }
        w
    }

    /// How a peer's type reads in an error, from its handshake words ([`ElementType::wire`]).
    pub(crate) fn describe_wire(words: &[u64]) -> String {
        let bytes: Vec<u8> = words[2..2 + NAME_WORDS]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take_while(|&b| b != 0)
            .collect();
        let name = String::from_utf8_lossy(&bytes);
        let cut = if bytes.len() == 8 * NAME_WORDS {
            "…"
        } else {
            ""
        };
        format!("{name}{cut} ({} bytes)", words[0])
    }

    /// How this type reads in an error: its name and size.
    pub(crate) fn describe(&self) -> String {
        Self::describe_wire(&self.wire())
    }

    /// Compare with the type a peer declared ([`ElementType::wire`]'s words): a different one
    /// is [`CreateError::Mismatch`] on [`SpecField::Element`], naming both.
    pub(crate) fn check_match(
        &self,
        rank: usize,
        peer: usize,
        tag: u32,
        theirs: &[u64],
    ) -> Result<(), CreateError> {
        if theirs[0] == self.size as u64 && theirs[1] == self.id {
            return Ok(());
        }
        Err(CreateError::mismatch(
            rank,
            peer,
            tag,
            SpecField::Element,
            self.describe(),
            Self::describe_wire(theirs),
        ))
    }
}

fn fnv1a<'a>(bytes: impl IntoIterator<Item = &'a u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

mod sealed {
    pub trait Sealed {}
}

/// An element a racy channel can carry: a scalar with a native atomic of its width (8 or 4
/// bytes). Its receive is an atomic view: `&AtomicF64Slice` for `f64`, as before element
/// types existed, and a [`RacyView`] for the others. Sealed (see the module's docs for why a
/// struct is refused):
///
/// ```compile_fail
/// # use chan_core::{Context, ChannelSpec, Racy};
/// fn racy_struct<C: Context>(ctx: &mut C, specs: &[ChannelSpec]) {
///     let _ = ctx.open_typed::<Racy, [f32; 2]>(specs); // [f32; 2] is no RacyElement
/// }
/// ```
pub trait RacyElement: Element + sealed::Sealed {
    /// What a racy receive returns.
    type View<'a>;
    /// The view of a racy buffer of `len` elements over `words`.
    #[doc(hidden)]
    fn view(words: &AtomicF64Slice, len: usize) -> Self::View<'_>;
}

impl sealed::Sealed for f64 {}
impl RacyElement for f64 {
    type View<'a> = &'a AtomicF64Slice;
    fn view(words: &AtomicF64Slice, len: usize) -> &AtomicF64Slice {
        debug_assert_eq!(words.len(), len);
        words
    }
}

macro_rules! racy_scalar {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl RacyElement for $t {
            type View<'a> = RacyView<'a, $t>;
            fn view(words: &AtomicF64Slice, len: usize) -> RacyView<'_, $t> {
                RacyView::new(words, len)
            }
        }
    )*};
}
racy_scalar!(i64, u64, f32, i32, u32);

/// A racy receive buffer of `T` (4 or 8 bytes), read through atomics: each read loads the whole
/// 8-byte word the element lies in, as the transport writes whole words, so an element is never
/// torn and no access mixes sizes.
#[derive(Debug, Clone, Copy)]
pub struct RacyView<'a, T> {
    words: &'a AtomicF64Slice,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: RacyElement> RacyView<'a, T> {
    /// Elements per word.
    const PER_WORD: usize = 8 / std::mem::size_of::<T>();

    fn new(words: &'a AtomicF64Slice, len: usize) -> Self {
        assert!(
            len.div_ceil(Self::PER_WORD) <= words.len(),
            "a racy view of {len} elements over {} words",
            words.len()
        );
        RacyView {
            words,
            len,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty view.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i` (a relaxed load of its word). Panics when `i` is out of bounds.
    #[inline]
    pub fn load(&self, i: usize) -> T {
        assert!(i < self.len, "racy view: index {i} of {}", self.len);
        let word = self.words.load_bits(i / Self::PER_WORD).to_ne_bytes();
        let at = (i % Self::PER_WORD) * std::mem::size_of::<T>();
        bytemuck::pod_read_unaligned(&word[at..at + std::mem::size_of::<T>()])
    }

    /// Copy every element into `out` (one relaxed load per word). Panics when the lengths
    /// differ.
    pub fn load_into(&self, out: &mut [T]) {
        assert_eq!(out.len(), self.len, "load_into: length mismatch");
        let size = std::mem::size_of::<T>();
        for (w, chunk) in out.chunks_mut(Self::PER_WORD).enumerate() {
            let word = self.words.load_bits(w).to_ne_bytes();
            for (k, o) in chunk.iter_mut().enumerate() {
                *o = bytemuck::pod_read_unaligned(&word[k * size..(k + 1) * size]);
            }
        }
    }

    /// Iterate over the elements (a relaxed load each).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + '_ {
        (0..self.len).map(|i| self.load(i))
    }
}

/// The first `len` elements of `T` in `words`: a message's elements in its slot. An 8-byte
/// element (every `f64` message) is cast word for word, with no check left at run time; any
/// other through the bytes, with `bytemuck`'s alignment and length checks.
#[inline]
pub(crate) fn elements<T: Element>(words: &[f64], len: usize) -> &[T] {
    if std::mem::size_of::<T>() == 8 {
        return &bytemuck::cast_slice(words)[..len];
    }
    let bytes: &[u8] = bytemuck::cast_slice(words);
    bytemuck::cast_slice(&bytes[..len * std::mem::size_of::<T>()])
}

/// As [`elements`], to fill a message in place.
#[inline]
pub(crate) fn elements_mut<T: Element>(words: &mut [f64], len: usize) -> &mut [T] {
    if std::mem::size_of::<T>() == 8 {
        return &mut bytemuck::cast_slice_mut(words)[..len];
    }
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(words);
    bytemuck::cast_slice_mut(&mut bytes[..len * std::mem::size_of::<T>()])
}

/// `data` as whole words, when its bytes are: a multiple of 8 long and 8-byte aligned.
#[inline]
pub(crate) fn as_words<T: Element>(data: &[T]) -> Option<&[f64]> {
    bytemuck::try_cast_slice(data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::atomic::AtomicF64Buf;

    #[test]
    fn element_types_differ_by_name_and_size() {
        let f = ElementType::of::<f32>();
        let i = ElementType::of::<i32>();
        assert_eq!((f.size, i.size), (4, 4));
        assert_ne!(f.id, i.id);
        assert_eq!(f, ElementType::of::<f32>());
        assert_eq!(f.describe(), "f32 (4 bytes)");
        assert_eq!(ElementType::of::<[u64; 5]>().words(3), Some(15));
        assert_eq!(ElementType::of::<f32>().words(3), Some(2));
        assert_eq!(ElementType::of::<u64>().words(usize::MAX), None);
        // What the backend wires counts words; a length whose words do not fit is refused.
        let spec = |len| ChannelSpec::new(1, 0, ChannelConfig::new(len, 2).unwrap()).unwrap();
        assert_eq!(f.wired(&spec(5)).unwrap().config.len(), 3);
        assert_eq!(ElementType::of::<f64>().wired(&spec(5)).unwrap(), spec(5));
        let huge = ElementType::of::<[u64; 64]>().wired(&spec(1 << 56));
        assert!(
            matches!(huge, Err(ConfigError::TooLarge { .. })),
            "{huge:?}"
        );
        // A name longer than the handshake carries is cut, and says so.
        let long = ElementType::of::<[[std::num::Wrapping<u16>; 3]; 2]>();
        assert!(long.name.len() > 32);
        let d = long.describe();
        assert!(d.ends_with("… (12 bytes)"), "{d}");
        assert!(long.name.starts_with(d.trim_end_matches("… (12 bytes)")));
    }

    #[test]
    fn a_racy_view_of_f32_reads_each_half_word() {
        let buf = AtomicF64Buf::zeroed(2);
        let vals = [1.5f32, -2.25, f32::NAN];
        let mut words = [0.0f64; 2];
        elements_mut::<f32>(&mut words, 3).copy_from_slice(&vals);
        buf.store_from(&words);
        let v = f32::view(&buf, 3);
        assert_eq!(v.len(), 3);
        let mut out = [0.0f32; 3];
        v.load_into(&mut out);
        for (k, (&a, b)) in vals.iter().zip(out).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "element {k}");
            assert_eq!(a.to_bits(), v.load(k).to_bits(), "element {k}");
        }
        assert_eq!(v.iter().count(), 3);
    }

    #[test]
    #[should_panic(expected = "index 3 of 3")]
    fn a_racy_view_checks_its_bound() {
        let buf = AtomicF64Buf::zeroed(2);
        i32::view(&buf, 3).load(3);
    }

    #[test]
    fn words_and_elements() {
        let mut w = [0.0f64; 3];
        elements_mut::<u16>(&mut w, 9).copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(elements::<u16>(&w, 9), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let aligned = [0u64; 2];
        let four: &[u32] = bytemuck::cast_slice(&aligned);
        assert!(as_words(four).is_some());
        assert!(
            as_words(&four[..3]).is_none(),
            "12 bytes are no whole words"
        );
        assert!(
            as_words(&four[1..3]).is_none(),
            "nor are bytes off a word's start"
        );
        assert!(as_words(&[1.0f64]).is_some());
    }
}
