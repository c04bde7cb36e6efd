//! The value types of the Krylov kernels' vectors: `f64` (CG, `linalg/`) and `f32`
//! (multisplitting's inner CG in single precision, `single.rs`). Each kernel is written once
//! over [`Lane`]: a portable body that works on chunks of `N` points (`N` values fill a
//! 256-bit register: 4 `f64`s, 8 `f32`s), and an AVX2 kernel over the same `N` lanes with
//! the operations of [`avx2::Simd`]. Dot products are summed in double precision, in `N`
//! lane sums added up in a fixed order ([`Lane::total`]), so the two forms give the same
//! bits.

use std::ops::{Add, Mul, Sub};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// A value type of the kernels' vectors with `N` lanes in a 256-bit register: `f64` (4) or
/// `f32` (8). Sealed.
pub(crate) trait Lane<const N: usize>:
    Arch<N>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + std::fmt::Debug
    + sealed::Sealed
    + 'static
{
    /// The value in double precision (exact), for the dot products' sums.
    fn wide(self) -> f64;
    /// `v` rounded to this type (the residual, computed in double precision).
    fn narrow(v: f64) -> Self;
    /// Σ of the `N` lane sums in a fixed order: each four as [`sum4`], then the two fours.
    fn total(a: [f64; N]) -> f64;
    /// The `N` values of `s` from `k` on ([`chunk`]).
    #[inline(always)]
    fn chunk(s: &[Self], k: usize) -> &[Self; N] {
        chunk(s, k)
    }
    /// [`Lane::chunk`], writable.
    #[inline(always)]
    fn chunk_mut(s: &mut [Self], k: usize) -> &mut [Self; N] {
        chunk_mut(s, k)
    }
}

/// The lane types' fast form on this architecture: on x86-64 the AVX2 operations, elsewhere
/// nothing (the portable bodies serve).
#[cfg(target_arch = "x86_64")]
use avx2::Simd as Arch;

/// See above: no fast form off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) trait Arch<const N: usize>: Copy {}
#[cfg(not(target_arch = "x86_64"))]
impl Arch<4> for f64 {}
#[cfg(not(target_arch = "x86_64"))]
impl Arch<8> for f32 {}

impl Lane<4> for f64 {
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
    #[inline(always)]
    fn narrow(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn total(a: [f64; 4]) -> f64 {
        sum4(a)
    }
}

impl Lane<8> for f32 {
    #[inline(always)]
    fn wide(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn narrow(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn total(a: [f64; 8]) -> f64 {
        sum4([a[0], a[1], a[2], a[3]]) + sum4([a[4], a[5], a[6], a[7]])
    }
}

/// Σ of four lanes in a fixed order.
#[inline(always)]
pub(crate) fn sum4(a: [f64; 4]) -> f64 {
    (a[0] + a[1]) + (a[2] + a[3])
}

/// The `M` values of `s` from `k` on, as an array: one bounds check per chunk, and a loop
/// over the lanes of such arrays is one the compiler turns into vector instructions
/// (indexing the row slices lane by lane kept a bounds check per value, and scalar code).
#[inline(always)]
pub(crate) fn chunk<T, const M: usize>(s: &[T], k: usize) -> &[T; M] {
    (&s[k..k + M]).try_into().expect("a whole chunk")
}

/// [`chunk`], writable.
#[inline(always)]
pub(crate) fn chunk_mut<T, const M: usize>(s: &mut [T], k: usize) -> &mut [T; M] {
    (&mut s[k..k + M]).try_into().expect("a whole chunk")
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    //! The AVX2 form of the lane types: 256-bit vectors of `N` lanes ([`V`]) and
    //! double-precision lane sums ([`Acc`]), made only through an [`Avx2`] token, the proof
    //! that the CPU runs AVX2. Each operation is one intrinsic (two for the single-precision
    //! sums, which widen each half), in the order the kernel writes it: nothing contracts
    //! into fused multiply-adds.

    use super::{chunk, chunk_mut, Lane};
    use std::arch::x86_64::*;

    /// Proof that the CPU runs AVX2: made inside a function compiled with it.
    #[derive(Clone, Copy)]
    pub(crate) struct Avx2(());

    impl Avx2 {
        /// The token, inside an AVX2 function (which runs only where the CPU has AVX2).
        #[target_feature(enable = "avx2")]
        #[inline]
        pub(crate) fn here() -> Self {
            Avx2(())
        }

        /// The `N` values of `s` from `k` on.
        #[inline(always)]
        pub(crate) fn ld<L: Simd<N>, const N: usize>(self, s: &[L], k: usize) -> V<L, N> {
            // SAFETY: the token proves the CPU runs AVX2.
            V(unsafe { L::load(chunk(s, k)) })
        }

        /// Stores `v` into the `N` values of `s` from `k` on.
        #[inline(always)]
        pub(crate) fn st<L: Simd<N>, const N: usize>(self, s: &mut [L], k: usize, v: V<L, N>) {
            // SAFETY: the token proves the CPU runs AVX2.
            unsafe { L::store(chunk_mut(s, k), v.0) }
        }

        /// Stores the four doubles of `v`, rounded to `L`, into the four values of `s` from
        /// `k` on.
        #[inline(always)]
        pub(crate) fn st_narrow<L: Simd<N>, const N: usize>(
            self,
            s: &mut [L],
            k: usize,
            v: V<f64, 4>,
        ) {
            // SAFETY: the token proves the CPU runs AVX2.
            unsafe { L::store_narrow(chunk_mut(s, k), v.0) }
        }

        /// `x` in every lane.
        #[inline(always)]
        pub(crate) fn splat<L: Simd<N>, const N: usize>(self, x: L) -> V<L, N> {
            // SAFETY: the token proves the CPU runs AVX2.
            V(unsafe { L::splat(x) })
        }

        /// Lane sums, all zero.
        #[inline(always)]
        pub(crate) fn sums<L: Simd<N>, const N: usize>(self) -> Acc<L, N> {
            self.sums_of([0.0; N])
        }

        /// Lane sums holding `a`.
        #[inline(always)]
        pub(crate) fn sums_of<L: Simd<N>, const N: usize>(self, a: [f64; N]) -> Acc<L, N> {
            // SAFETY: the token proves the CPU runs AVX2.
            Acc(unsafe { L::sums_of(a) })
        }
    }

    /// `N` lanes of `L` in a register. Only an [`Avx2`] token makes one, so holding one
    /// proves the CPU runs AVX2.
    #[derive(Clone, Copy)]
    pub(crate) struct V<L: Simd<N>, const N: usize>(L::V);

    /// `N` lane sums in double precision. Only an [`Avx2`] token makes them.
    #[derive(Clone, Copy)]
    pub(crate) struct Acc<L: Simd<N>, const N: usize>(L::Acc);

    macro_rules! op {
        ($tr:ident, $f:ident) => {
            impl<L: Simd<N>, const N: usize> std::ops::$tr for V<L, N> {
                type Output = Self;
                #[inline(always)]
                fn $f(self, o: Self) -> Self {
                    // SAFETY: a V exists only where the CPU runs AVX2 (made through a token).
                    V(unsafe { L::$f(self.0, o.0) })
                }
            }
        };
    }
    op!(Add, add);
    op!(Sub, sub);
    op!(Mul, mul);

    impl<L: Lane<N>, const N: usize> Acc<L, N> {
        /// Adds `v`'s lanes, widened to double precision, to the sums.
        #[inline(always)]
        pub(crate) fn add(&mut self, v: V<L, N>) {
            // SAFETY: an Acc exists only where the CPU runs AVX2 (made through a token).
            self.0 = unsafe { L::accumulate(self.0, v.0) };
        }

        /// The sums, lane by lane (for a row's scalar tail).
        #[inline(always)]
        pub(crate) fn lanes(self) -> [f64; N] {
            // SAFETY: as in `add`.
            unsafe { L::sums_lanes(self.0) }
        }

        /// Σ of the lanes, in [`Lane::total`]'s order.
        #[inline(always)]
        pub(crate) fn total(self) -> f64 {
            L::total(self.lanes())
        }
    }

    /// The AVX2 intrinsics the kernels use on `N` lanes of a lane type (a supertrait of
    /// [`Lane`] on x86-64).
    ///
    /// Every method's safety condition is the same: the CPU runs AVX2 (the safe wrappers
    /// [`Avx2`], [`V`] and [`Acc`] hold that proof).
    pub(crate) trait Simd<const N: usize>: Copy + super::sealed::Sealed {
        /// `N` values in a register.
        type V: Copy;
        /// `N` lane sums in double precision.
        type Acc: Copy;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn load(a: &[Self; N]) -> Self::V;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn store(a: &mut [Self; N], v: Self::V);
        /// Four doubles rounded to this type.
        ///
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn store_narrow(a: &mut [Self; 4], v: __m256d);
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn splat(x: Self) -> Self::V;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
        /// `acc + v`, lane by lane, `v` widened to double precision.
        ///
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn accumulate(acc: Self::Acc, v: Self::V) -> Self::Acc;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn sums_of(a: [f64; N]) -> Self::Acc;
        /// # Safety
        /// The CPU runs AVX2.
        unsafe fn sums_lanes(acc: Self::Acc) -> [f64; N];
    }

    /// The methods of [`Simd`] that are one intrinsic of the type's own: load, store,
    /// splat and the three operations.
    macro_rules! one_intrinsic {
        ($t:ty, $n:literal, $v:ty, $load:ident, $store:ident, $splat:ident,
         $add:ident, $sub:ident, $mul:ident) => {
            type V = $v;
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn load(a: &[$t; $n]) -> $v {
                // SAFETY: `a` is N contiguous values, what an unaligned load reads.
                unsafe { $load(a.as_ptr()) }
            }
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn store(a: &mut [$t; $n], v: $v) {
                // SAFETY: `a` is N contiguous values, borrowed mutably: what an unaligned
                // store writes.
                unsafe { $store(a.as_mut_ptr(), v) }
            }
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn splat(x: $t) -> $v {
                $splat(x)
            }
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn add(a: $v, b: $v) -> $v {
                $add(a, b)
            }
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn sub(a: $v, b: $v) -> $v {
                $sub(a, b)
            }
            #[target_feature(enable = "avx2")]
            #[inline]
            unsafe fn mul(a: $v, b: $v) -> $v {
                $mul(a, b)
            }
        };
    }

    impl Simd<4> for f64 {
        one_intrinsic!(
            f64,
            4,
            __m256d,
            _mm256_loadu_pd,
            _mm256_storeu_pd,
            _mm256_set1_pd,
            _mm256_add_pd,
            _mm256_sub_pd,
            _mm256_mul_pd
        );
        type Acc = __m256d;
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn store_narrow(a: &mut [f64; 4], v: __m256d) {
            // SAFETY: the caller's (AVX2).
            unsafe { Self::store(a, v) }
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn accumulate(acc: __m256d, v: __m256d) -> __m256d {
            _mm256_add_pd(acc, v)
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn sums_of(a: [f64; 4]) -> __m256d {
            // SAFETY: the caller's (AVX2).
            unsafe { Self::load(&a) }
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn sums_lanes(acc: __m256d) -> [f64; 4] {
            let mut a = [0.0; 4];
            // SAFETY: the caller's (AVX2).
            unsafe { Self::store(&mut a, acc) };
            a
        }
    }

    impl Simd<8> for f32 {
        one_intrinsic!(
            f32,
            8,
            __m256,
            _mm256_loadu_ps,
            _mm256_storeu_ps,
            _mm256_set1_ps,
            _mm256_add_ps,
            _mm256_sub_ps,
            _mm256_mul_ps
        );
        /// The sums of lanes 0–3 and 4–7.
        type Acc = [__m256d; 2];
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn store_narrow(a: &mut [f32; 4], v: __m256d) {
            // SAFETY: `a` is four contiguous f32s, borrowed mutably: what the store writes.
            unsafe { _mm_storeu_ps(a.as_mut_ptr(), _mm256_cvtpd_ps(v)) }
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn accumulate(acc: [__m256d; 2], v: __m256) -> [__m256d; 2] {
            let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v));
            [_mm256_add_pd(acc[0], lo), _mm256_add_pd(acc[1], hi)]
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn sums_of(a: [f64; 8]) -> [__m256d; 2] {
            // SAFETY: the caller's (AVX2).
            unsafe { [f64::load(chunk(&a, 0)), f64::load(chunk(&a, 4))] }
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn sums_lanes(acc: [__m256d; 2]) -> [f64; 8] {
            let mut a = [0.0; 8];
            // SAFETY: the caller's (AVX2).
            unsafe {
                f64::store(chunk_mut(&mut a, 0), acc[0]);
                f64::store(chunk_mut(&mut a, 4), acc[1]);
            }
            a
        }
    }
}
