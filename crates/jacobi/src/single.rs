//! Multisplitting's inner CG in single precision (`--inner cg32`): mixed-precision iterative
//! refinement of the block's problem (Moler, *Iterative refinement in floating point*, J. ACM
//! 14, 1967; Buttari et al., *Mixed precision iterative refinement techniques for the solution
//! of dense linear systems*, IJHPCA 21, 2007). The residual of the current iterate,
//! `r₀ = b − A x`, is computed in double precision; CG then solves `A_loc d = r₀` for a
//! correction `d` in single precision, and `x += d` in double. An inner solve only has to
//! reduce the block's residual by `--inner-tol` (0.1), five orders of magnitude above single
//! precision's rounding, and the next outer iteration recomputes `r₀` in double from the
//! updated iterate, so the outer iteration converges to the double-precision tolerance as with
//! inner CG in double. Each inner iteration moves half the bytes: the four vectors it streams
//! (r, p, A p, d) are `f32`.
//!
//! The dot products are summed in double precision, four lanes for the first four points of
//! each chunk of eight and four for the last, from single-precision products. The AVX2 kernels
//! and the portable bodies do the same operations in the same order, so they give the same
//! bits (`avx2_kernels_match_the_portable_ones`).
//!
//! Vectors have the block's [`Shape`] with a one-cell halo, which stays zero (`A_loc`).

// The lane loops index several arrays and the lane accumulators by the same counter.
#![allow(clippy::needless_range_loop)]

use crate::kernel::{Region, Shape};
use crate::linalg::{lanes, rows, rows_in, stencil_rows};

/// A single-precision vector of a block (halo included, zero).
#[derive(Debug)]
pub(crate) struct Vector32 {
    pub(crate) v: Vec<f32>,
}

impl Vector32 {
    /// Zeros, the block's shape.
    pub(crate) fn zeros(shape: &Shape) -> Self {
        Vector32 {
            v: vec![0.0; shape.len],
        }
    }
}

fn check<T>(sh: &Shape, arrays: &[&[T]]) {
    for a in arrays {
        assert_eq!(a.len(), sh.len, "a vector does not have the block's shape");
    }
}

/// The eight values of `s` from `k` on.
#[inline(always)]
fn w8(s: &[f32], k: usize) -> &[f32; 8] {
    (&s[k..k + 8]).try_into().expect("eight values")
}

/// [`w8`], writable.
#[inline(always)]
fn w8m(s: &mut [f32], k: usize) -> &mut [f32; 8] {
    (&mut s[k..k + 8]).try_into().expect("eight values")
}

/// Σ of eight lanes: the first four, the last four, then the two.
#[inline(always)]
fn lanes8(a: [f64; 8]) -> f64 {
    lanes([a[0], a[1], a[2], a[3]]) + lanes([a[4], a[5], a[6], a[7]])
}

/// Runs the AVX2 kernel when the CPU has AVX2, the portable body otherwise.
macro_rules! dispatch {
    (avx2: $fast:expr, portable: $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the only precondition of a `#[target_feature(enable = "avx2")]`
            // function is that the CPU supports AVX2, detected on the line above.
            return unsafe { $fast };
        }
        $body
    }};
}

/// `r = b − A u` on the owned points, in double precision, stored in single; returns Σ r²
/// of the double-precision values. `A = diag·I − adjacency`, `u`'s halo read as it is.
pub(crate) fn residual(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [f32],
) -> f64 {
    check(sh, &[u, rhs.unwrap_or(u)]);
    check(sh, &[r]);
    dispatch!(
        avx2: avx2::residual(sh, diag, u, rhs, r),
        portable: residual_body(sh, diag, u, rhs, r)
    )
}

#[inline(always)]
fn residual_body(sh: &Shape, diag: f64, u: &[f64], rhs: Option<&[f64]>, r: &mut [f32]) -> f64 {
    let (sx, pl) = (sh.sx, sh.plane);
    let mut acc = [0.0f64; 4];
    for (b, m) in rows(sh) {
        for i in 0..m {
            let c = b + i;
            let mut s = u[c - 1] + u[c + 1] + u[c - sx] + u[c + sx] + u[c - pl] + u[c + pl];
            if let Some(f) = rhs {
                s += f[c];
            }
            let v = s - diag * u[c];
            r[c] = v as f32;
            acc[i % 4] += v * v;
        }
    }
    lanes(acc)
}

/// `p ← r + β p`, then `q = A p` and Σ p·q, in one pass (plane k + 1 of p just before the
/// operator's plane k), as `linalg::direction_apply` does in double.
pub(crate) fn direction_apply(
    sh: &Shape,
    diag: f32,
    r: &[f32],
    beta: f32,
    p: &mut [f32],
    q: &mut [f32],
) -> f64 {
    check(sh, &[r, p, q]);
    dispatch!(
        avx2: avx2::direction_apply(sh, diag, r, beta, p, q),
        portable: direction_apply_body(sh, diag, r, beta, p, q)
    )
}

#[inline(always)]
fn direction_apply_body(
    sh: &Shape,
    diag: f32,
    r: &[f32],
    beta: f32,
    p: &mut [f32],
    q: &mut [f32],
) -> f64 {
    let nz = sh.n.z;
    let mut acc = [0.0f64; 8];
    for k in 1..=nz {
        let first = if k == 1 { 1 } else { k + 1 };
        for (b, m) in rows_in(sh, first..(k + 2).min(nz + 1)) {
            for i in b..b + m {
                p[i] = r[i] + beta * p[i];
            }
        }
        apply_lanes(sh, diag, p, q, &Region::planes(sh.n, k..k + 1), &mut acc);
    }
    lanes8(acc)
}

#[inline(always)]
fn apply_lanes(
    sh: &Shape,
    diag: f32,
    p: &[f32],
    q: &mut [f32],
    region: &Region,
    acc: &mut [f64; 8],
) {
    let (sx, pl) = (sh.sx, sh.plane);
    let m = region.x.len();
    for z in region.z.clone() {
        for yy in region.y.clone() {
            let b = sh.index(region.x.start, yy, z);
            let mut k = 0;
            while k + 8 <= m {
                for l in 0..8 {
                    let c = b + k + l;
                    let s = p[c - 1] + p[c + 1] + p[c - sx] + p[c + sx] + p[c - pl] + p[c + pl];
                    let v = diag * p[c] - s;
                    q[c] = v;
                    acc[l] += f64::from(p[c] * v);
                }
                k += 8;
            }
            for i in k..m {
                let c = b + i;
                let s = p[c - 1] + p[c + 1] + p[c - sx] + p[c + sx] + p[c - pl] + p[c + pl];
                let v = diag * p[c] - s;
                q[c] = v;
                acc[i - k] += f64::from(p[c] * v);
            }
        }
    }
}

/// CG's update of the correction and the residual, `d += α p` (`d = α p` when `first`),
/// `r −= α q`; returns Σ r² of the new residual.
pub(crate) fn update(
    sh: &Shape,
    alpha: f32,
    first: bool,
    d: &mut [f32],
    r: &mut [f32],
    p: &[f32],
    q: &[f32],
) -> f64 {
    check(sh, &[&*d, &*r, p, q]);
    dispatch!(
        avx2: avx2::update(sh, alpha, first, d, r, p, q),
        portable: update_body(sh, alpha, first, d, r, p, q)
    )
}

#[inline(always)]
fn update_body(
    sh: &Shape,
    alpha: f32,
    first: bool,
    d: &mut [f32],
    r: &mut [f32],
    p: &[f32],
    q: &[f32],
) -> f64 {
    let keep = if first { 0.0 } else { 1.0 };
    let mut acc = [0.0f64; 8];
    for (b, m) in rows(sh) {
        let mut k = 0;
        while k + 8 <= m {
            for l in 0..8 {
                let i = b + k + l;
                d[i] = keep * d[i] + alpha * p[i];
                r[i] -= alpha * q[i];
                acc[l] += f64::from(r[i] * r[i]);
            }
            k += 8;
        }
        for j in k..m {
            let i = b + j;
            d[i] = keep * d[i] + alpha * p[i];
            r[i] -= alpha * q[i];
            acc[j - k] += f64::from(r[i] * r[i]);
        }
    }
    lanes8(acc)
}

/// `x += d` on the owned points: the correction, in double precision.
pub(crate) fn correct(sh: &Shape, x: &mut [f64], d: &[f32]) {
    check(sh, &[&*x]);
    check(sh, &[d]);
    for (b, m) in rows(sh) {
        for (xi, di) in x[b..b + m].iter_mut().zip(&d[b..b + m]) {
            *xi += f64::from(*di);
        }
    }
}

/// The kernels with AVX2 intrinsics, eight single-precision values a step.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{lanes8, rows, rows_in, stencil_rows, w8, w8m, Region, Shape};
    use crate::linalg::avx2::{lanes_of as lanes_of4, ld as ld4, st as st4};
    use crate::linalg::lanes;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    #[inline]
    fn ld(s: &[f32], k: usize) -> __m256 {
        let a = w8(s, k);
        // SAFETY: `a` is eight contiguous f32s, what an unaligned load reads.
        unsafe { _mm256_loadu_ps(a.as_ptr()) }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    fn st(s: &mut [f32], k: usize, v: __m256) {
        let a = w8m(s, k);
        // SAFETY: `a` is eight contiguous f32s, borrowed mutably: what an unaligned store
        // writes.
        unsafe { _mm256_storeu_ps(a.as_mut_ptr(), v) }
    }

    /// The eight lanes of the two double accumulators.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lanes_of(acc: &[__m256d; 2]) -> [f64; 8] {
        let mut a = [0.0; 8];
        st4(&mut a, 0, acc[0]);
        st4(&mut a, 4, acc[1]);
        a
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    fn from_lanes(a: &[f64; 8]) -> [__m256d; 2] {
        [ld4(a, 0), ld4(a, 4)]
    }

    /// `acc += v` lane by lane, the eight single-precision values widened to double.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn accumulate(acc: &mut [__m256d; 2], v: __m256) {
        let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v));
        acc[0] = _mm256_add_pd(acc[0], lo);
        acc[1] = _mm256_add_pd(acc[1], hi);
    }

    /// [`super::residual`].
    #[target_feature(enable = "avx2")]
    pub(super) fn residual(
        sh: &Shape,
        diag: f64,
        u: &[f64],
        rhs: Option<&[f64]>,
        r: &mut [f32],
    ) -> f64 {
        let (sx, pl) = (sh.sx, sh.plane);
        let dg = _mm256_set1_pd(diag);
        let mut acc = _mm256_setzero_pd();
        for (b, m) in rows(sh) {
            let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(u, b, m, sx, pl);
            let f = rhs.map(|f| &f[b..b + m]);
            let out = &mut r[b..b + m];
            let mut k = 0;
            while k + 4 <= m {
                let mut s = _mm256_add_pd(ld4(xm, k), ld4(xp, k));
                s = _mm256_add_pd(s, ld4(ym, k));
                s = _mm256_add_pd(s, ld4(yp, k));
                s = _mm256_add_pd(s, ld4(zm, k));
                s = _mm256_add_pd(s, ld4(zp, k));
                if let Some(f) = f {
                    s = _mm256_add_pd(s, ld4(f, k));
                }
                let v = _mm256_sub_pd(s, _mm256_mul_pd(dg, ld4(c, k)));
                let o: &mut [f32; 4] = (&mut out[k..k + 4]).try_into().expect("four values");
                // SAFETY: `o` is four contiguous f32s, borrowed mutably: what the store writes.
                unsafe { _mm_storeu_ps(o.as_mut_ptr(), _mm256_cvtpd_ps(v)) };
                acc = _mm256_add_pd(acc, _mm256_mul_pd(v, v));
                k += 4;
            }
            if k < m {
                let mut a = lanes_of4(acc);
                for i in k..m {
                    let mut s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                    if let Some(f) = f {
                        s += f[i];
                    }
                    let v = s - diag * c[i];
                    out[i] = v as f32;
                    a[i - k] += v * v;
                }
                acc = ld4(&a, 0);
            }
        }
        lanes(lanes_of4(acc))
    }

    /// [`super::direction_apply`].
    #[target_feature(enable = "avx2")]
    pub(super) fn direction_apply(
        sh: &Shape,
        diag: f32,
        r: &[f32],
        beta: f32,
        p: &mut [f32],
        q: &mut [f32],
    ) -> f64 {
        let nz = sh.n.z;
        let mut acc = [_mm256_setzero_pd(); 2];
        let bv = _mm256_set1_ps(beta);
        for k in 1..=nz {
            let first = if k == 1 { 1 } else { k + 1 };
            for (b, m) in rows_in(sh, first..(k + 2).min(nz + 1)) {
                let (r, p) = (&r[b..b + m], &mut p[b..b + m]);
                let mut j = 0;
                while j + 8 <= m {
                    st(p, j, _mm256_add_ps(ld(r, j), _mm256_mul_ps(bv, ld(p, j))));
                    j += 8;
                }
                for i in j..m {
                    p[i] = r[i] + beta * p[i];
                }
            }
            apply_into(sh, diag, p, q, &Region::planes(sh.n, k..k + 1), &mut acc);
        }
        lanes8(lanes_of(&acc))
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    fn apply_into(
        sh: &Shape,
        diag: f32,
        p: &[f32],
        q: &mut [f32],
        region: &Region,
        acc: &mut [__m256d; 2],
    ) {
        let (sx, pl) = (sh.sx, sh.plane);
        let m = region.x.len();
        let dg = _mm256_set1_ps(diag);
        for z in region.z.clone() {
            for yy in region.y.clone() {
                let b = sh.index(region.x.start, yy, z);
                let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(p, b, m, sx, pl);
                let out = &mut q[b..b + m];
                let mut k = 0;
                while k + 8 <= m {
                    let mut s = _mm256_add_ps(ld(xm, k), ld(xp, k));
                    s = _mm256_add_ps(s, ld(ym, k));
                    s = _mm256_add_ps(s, ld(yp, k));
                    s = _mm256_add_ps(s, ld(zm, k));
                    s = _mm256_add_ps(s, ld(zp, k));
                    let cv = ld(c, k);
                    let v = _mm256_sub_ps(_mm256_mul_ps(dg, cv), s);
                    st(out, k, v);
                    accumulate(acc, _mm256_mul_ps(cv, v));
                    k += 8;
                }
                if k < m {
                    let mut a = lanes_of(acc);
                    for i in k..m {
                        let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                        let v = diag * c[i] - s;
                        out[i] = v;
                        a[i - k] += f64::from(c[i] * v);
                    }
                    *acc = from_lanes(&a);
                }
            }
        }
    }

    /// [`super::update`].
    #[target_feature(enable = "avx2")]
    pub(super) fn update(
        sh: &Shape,
        alpha: f32,
        first: bool,
        d: &mut [f32],
        r: &mut [f32],
        p: &[f32],
        q: &[f32],
    ) -> f64 {
        let keep = if first { 0.0 } else { 1.0 };
        let (av, kv) = (_mm256_set1_ps(alpha), _mm256_set1_ps(keep));
        let mut acc = [_mm256_setzero_pd(); 2];
        for (b, m) in rows(sh) {
            let (d, r) = (&mut d[b..b + m], &mut r[b..b + m]);
            let (p, q) = (&p[b..b + m], &q[b..b + m]);
            let mut k = 0;
            while k + 8 <= m {
                let dv = _mm256_add_ps(_mm256_mul_ps(kv, ld(d, k)), _mm256_mul_ps(av, ld(p, k)));
                st(d, k, dv);
                let rv = _mm256_sub_ps(ld(r, k), _mm256_mul_ps(av, ld(q, k)));
                st(r, k, rv);
                accumulate(&mut acc, _mm256_mul_ps(rv, rv));
                k += 8;
            }
            if k < m {
                let mut a = lanes_of(&acc);
                for i in k..m {
                    d[i] = keep * d[i] + alpha * p[i];
                    r[i] -= alpha * q[i];
                    a[i - k] += f64::from(r[i] * r[i]);
                }
                acc = from_lanes(&a);
            }
        }
        lanes8(lanes_of(&acc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Dims;
    use crate::tests::common::noise;

    fn noise32(len: usize, seed: u64) -> Vec<f32> {
        noise(len, seed).into_iter().map(|v| v as f32).collect()
    }

    /// The block's shape with its halo zero in `v`.
    fn zero_halo(sh: &Shape, v: &mut [f32]) {
        let mut owned = vec![false; sh.len];
        for (b, m) in rows(sh) {
            owned[b..b + m].fill(true);
        }
        for (x, o) in v.iter_mut().zip(owned) {
            if !o {
                *x = 0.0;
            }
        }
    }

    /// The AVX2 kernels give the portable bodies' bits, on rows with no tail, a tail, and only
    /// a tail. (Where the CPU lacks AVX2 there is nothing to compare.)
    #[test]
    fn avx2_kernels_match_the_portable_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        for n in [Dims::new(16, 3, 2), Dims::new(19, 5, 6), Dims::new(5, 4, 3)] {
            let sh = Shape::new(n);
            let u = noise(sh.len, 1);
            let f = noise(sh.len, 2);
            for rhs in [None, Some(&f[..])] {
                let (mut r1, mut r2) = (vec![0.0f32; sh.len], vec![0.0f32; sh.len]);
                // SAFETY: AVX2 was detected above.
                let fast = unsafe { avx2::residual(&sh, 6.0, &u, rhs, &mut r1) };
                let slow = residual_body(&sh, 6.0, &u, rhs, &mut r2);
                assert_eq!(
                    (fast.to_bits(), &r1),
                    (slow.to_bits(), &r2),
                    "residual {n:?}"
                );
            }
            let r = noise32(sh.len, 3);
            let mut p0 = noise32(sh.len, 4);
            zero_halo(&sh, &mut p0);
            let (mut p1, mut q1) = (p0.clone(), vec![0.0f32; sh.len]);
            let (mut p2, mut q2) = (p0.clone(), vec![0.0f32; sh.len]);
            // SAFETY: AVX2 was detected above.
            let fast = unsafe { avx2::direction_apply(&sh, 6.0, &r, 0.3, &mut p1, &mut q1) };
            let slow = direction_apply_body(&sh, 6.0, &r, 0.3, &mut p2, &mut q2);
            assert_eq!(
                (fast.to_bits(), &p1, &q1),
                (slow.to_bits(), &p2, &q2),
                "{n:?}"
            );
            for first in [true, false] {
                let (mut d1, mut r1) = (noise32(sh.len, 5), noise32(sh.len, 6));
                let (mut d2, mut r2) = (d1.clone(), r1.clone());
                // SAFETY: AVX2 was detected above.
                let fast = unsafe { avx2::update(&sh, 0.7, first, &mut d1, &mut r1, &p1, &q1) };
                let slow = update_body(&sh, 0.7, first, &mut d2, &mut r2, &p1, &q1);
                assert_eq!(
                    (fast.to_bits(), &d1, &r1),
                    (slow.to_bits(), &d2, &r2),
                    "{n:?}"
                );
            }
        }
    }

    /// Against double precision: the residual is b − A u rounded to single, its Σ r² the
    /// double one; the operator is A p to single precision's rounding.
    #[test]
    fn single_precision_kernels_agree_with_double_ones() {
        let n = Dims::new(9, 5, 6);
        let sh = Shape::new(n);
        let u = noise(sh.len, 7);
        let mut r64 = vec![0.0; sh.len];
        let [want, _] = crate::linalg::residual(&sh, 6.0, &u, None, &mut r64, None);
        let mut r32 = vec![0.0f32; sh.len];
        let got = residual(&sh, 6.0, &u, None, &mut r32);
        assert!((got - want).abs() <= 1e-12 * want);
        for (a, b) in r32.iter().zip(&r64) {
            assert_eq!(*a, *b as f32);
        }
        let mut p = noise32(sh.len, 8);
        zero_halo(&sh, &mut p);
        let mut q = vec![0.0f32; sh.len];
        // β = 0: p = r.
        let pap = direction_apply(&sh, 6.0, &r32, 0.0, &mut p, &mut q);
        let p64: Vec<f64> = p.iter().map(|&v| f64::from(v)).collect();
        let mut q64 = vec![0.0; sh.len];
        let want = crate::linalg::apply(&sh, 6.0, &p64, &mut q64, &Region::all(n));
        assert!((pap - want).abs() <= 1e-5 * want.abs(), "{pap} {want}");
        for (a, b) in q.iter().zip(&q64) {
            assert!((f64::from(*a) - b).abs() <= 1e-5 * (1.0 + b.abs()));
        }
        assert_eq!(p, r32);
    }
}
