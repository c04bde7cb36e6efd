//! The 7-point Jacobi stencil: a fused sweep (update and residual in one pass), a plain
//! reference sweep beside it (HPCG's `_ref` habit), the residual alone, and the paper's
//! structure (sweep, then copy back) for the benchmark.
//!
//! Arrays have the [`Shape`] of a block with a one-cell halo, x fastest. At an interior point
//! with neighbour sum `s = u[x−1] + u[x+1] + u[y−1] + u[y+1] + u[z−1] + u[z+1]` (summed in that
//! order by every kernel, so they all produce the same bits), the sweep writes `s · (1/6)` and
//! the residual of the *input* is `r = s − 6u` (b − A u: the boundary terms of b sit in the
//! halo). Kernels return Σ r² over the points they swept.
//!
//! ## How the fused sweep is fast
//! * One pass: the neighbour sum serves both the update and the residual; no copy (callers
//!   swap arrays), no allocation.
//! * Vectorised: on x86-64 with AVX2 (detected at run time) each row is swept four points at
//!   a time with explicit 256-bit instructions; elsewhere a portable loop that does the same
//!   operations in the same order, which the compiler vectorises as it can.
//! * Aligned: rows are padded to a multiple of four values and [`Grid`] places the first
//!   owned point of every row on a 32-byte boundary, so the centre, y and z neighbour loads
//!   and the stores never split a cache line (about 20% on the 50³ block of the benchmark).
//!
//! Both paths accumulate r² in four lanes (point index mod 4 within a row's full chunks of
//! four) plus four tail lanes (the last `n.x mod 4` points of each row), summed in a fixed
//! order, and neither contracts into fused multiply-adds: update and residual are
//! bit-identical on every path and every machine.

use crate::geometry::{Dims, LocalIdx};
use std::ops::Range;

/// 1/6, the Jacobi weight of the 7-point stencil.
pub const SIXTH: f64 = 1.0 / 6.0;

/// Rows are padded to a multiple of this many values (one 256-bit vector).
pub const ROW_ALIGN: usize = 4;

/// The layout of one block: `n` owned points per axis plus a one-cell halo, x fastest, each
/// row padded to a multiple of [`ROW_ALIGN`] values (the padding is never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Owned (interior) points per axis.
    pub n: Dims,
    /// Stride of y: `n.x + 2` rounded up to a multiple of [`ROW_ALIGN`].
    pub sx: usize,
    /// Stride of z: `sx · (n.y + 2)`.
    pub plane: usize,
    /// Array length: `plane · (n.z + 2)`.
    pub len: usize,
}

impl Shape {
    /// The shape of a block of `n` owned points.
    pub fn new(n: Dims) -> Self {
        let sx = (n.x + 2).div_ceil(ROW_ALIGN) * ROW_ALIGN;
        let plane = sx * (n.y + 2);
        Shape {
            n,
            sx,
            plane,
            len: plane * (n.z + 2),
        }
    }

    /// Linear index of local point (x, y, z).
    #[inline(always)]
    pub fn index(&self, x: usize, y: usize, z: usize) -> usize {
        x + self.sx * y + self.plane * z
    }

    /// Linear index of a local point.
    #[inline(always)]
    pub fn at(&self, l: LocalIdx) -> usize {
        self.index(l.x, l.y, l.z)
    }

    /// The planes `zs` of an array: `zs.start * plane .. zs.end * plane`.
    pub fn planes(&self, zs: Range<usize>) -> Range<usize> {
        zs.start * self.plane..zs.end * self.plane
    }

    /// Every owned plane, `1..n.z + 1`.
    pub fn owned_planes(&self) -> Range<usize> {
        1..self.n.z + 1
    }

    /// The preconditions every kernel relies on (its SAFETY arguments start here).
    fn check(&self, src: &[f64], dst_len: Option<usize>, zs: &Range<usize>) {
        assert_eq!(
            src.len(),
            self.len,
            "source array does not have the block's shape"
        );
        assert!(
            zs.start >= 1 && zs.start <= zs.end && zs.end <= self.n.z + 1,
            "planes {zs:?} are not owned planes of a block with {} of them",
            self.n.z
        );
        if let Some(d) = dst_len {
            assert_eq!(
                d,
                (zs.end - zs.start) * self.plane,
                "destination does not hold exactly the planes swept"
            );
        }
    }
}

/// An array of a block's [`Shape`] whose rows start on 32-byte boundaries: the first owned
/// point of each row (x = 1) is aligned, since row and plane strides are multiples of 4.
#[derive(Debug)]
pub struct Grid {
    buf: Vec<f64>,
    off: usize,
    len: usize,
}

impl Grid {
    /// `len` values, all `v`.
    pub fn new(len: usize, v: f64) -> Self {
        let buf = vec![v; len + ROW_ALIGN];
        // Element `off + 1` on a 32-byte boundary; f64 alignment makes one of 0..4 work.
        let addr = buf.as_ptr() as usize;
        let off = (0..ROW_ALIGN)
            .find(|k| (addr + (k + 1) * 8) % 32 == 0)
            .unwrap_or(0);
        Grid { buf, off, len }
    }

    /// A grid holding a copy of `data`.
    pub fn from_slice(data: &[f64]) -> Self {
        let mut g = Grid::new(data.len(), 0.0);
        g.copy_from_slice(data);
        g
    }
}

impl Clone for Grid {
    fn clone(&self) -> Self {
        // A new allocation has its own alignment: place the data afresh.
        Grid::from_slice(self)
    }
}

impl std::ops::Deref for Grid {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl std::ops::DerefMut for Grid {
    fn deref_mut(&mut self) -> &mut [f64] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Fused sweep of a whole block: `dst` ← one Jacobi step of `src` on every owned point;
/// returns Σ r² of `src`. Halo and padding of `dst` are not written.
pub fn sweep(shape: &Shape, src: &[f64], dst: &mut [f64]) -> f64 {
    let zs = shape.owned_planes();
    sweep_planes(shape, src, &mut dst[shape.planes(zs.clone())], zs)
}

/// Fused sweep of the owned planes `zs` of a block: `dst` holds exactly those planes
/// (`dst = &mut whole[shape.planes(zs)]`), so threads can sweep disjoint planes of one array.
pub fn sweep_planes(shape: &Shape, src: &[f64], dst: &mut [f64], zs: Range<usize>) -> f64 {
    shape.check(src, Some(dst.len()), &zs);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the only precondition of a `#[target_feature(enable = "avx2")]` function is
        // that the CPU supports AVX2, detected on the line above.
        return unsafe { x86::planes::<true>(shape, src, dst, zs) };
    }
    portable::<true>(shape, src, dst, zs)
}

/// Σ r² of `u` over every owned point (b − A u, the halo holding the boundary terms), without
/// updating: the *true* residual of a block whose halo is current.
pub fn residual_sq(shape: &Shape, u: &[f64]) -> f64 {
    residual_sq_planes(shape, u, shape.owned_planes())
}

/// Σ r² of `u` over the owned planes `zs`.
pub fn residual_sq_planes(shape: &Shape, u: &[f64], zs: Range<usize>) -> f64 {
    shape.check(u, None, &zs);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, detected on the line above (the function's only
        // precondition).
        return unsafe { x86::planes::<false>(shape, u, &mut [], zs) };
    }
    portable::<false>(shape, u, &mut [], zs)
}

/// Sum the four lanes and the four tail lanes, in the fixed order of every path.
#[inline(always)]
fn total(acc: [f64; 4], tail: [f64; 4]) -> f64 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((tail[0] + tail[1]) + (tail[2] + tail[3]))
}

/// The fused sweep (`UPDATE`) or the residual alone (`!UPDATE`, `dst` empty), portable build.
fn portable<const UPDATE: bool>(
    shape: &Shape,
    src: &[f64],
    dst: &mut [f64],
    zs: Range<usize>,
) -> f64 {
    let Shape { n, sx, plane, .. } = *shape;
    let nx = n.x;
    let base = zs.start * plane;
    let full = nx - nx % 4;
    let (mut acc, mut tail) = ([0.0f64; 4], [0.0f64; 4]);
    for z in zs {
        for y in 1..=n.y {
            let b = shape.index(1, y, z);
            let xm = &src[b - 1..b - 1 + nx];
            let xc = &src[b..b + nx];
            let xp = &src[b + 1..b + 1 + nx];
            let ym = &src[b - sx..b - sx + nx];
            let yp = &src[b + sx..b + sx + nx];
            let zm = &src[b - plane..b - plane + nx];
            let zp = &src[b + plane..b + plane + nx];
            let out: &mut [f64] = if UPDATE {
                &mut dst[b - base..b - base + nx]
            } else {
                &mut []
            };
            for i in 0..nx {
                let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                if UPDATE {
                    out[i] = s * SIXTH;
                }
                let r = s - 6.0 * xc[i];
                if i < full {
                    acc[i % 4] += r * r;
                } else {
                    tail[i - full] += r * r;
                }
            }
        }
    }
    total(acc, tail)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The fused sweep with AVX2 intrinsics: the portable build's operations, in its order.
    //!
    //! Tried and not kept (no gain on the Zen 3 of the benchmark machine, where this loop and
    //! a plain C update-only sweep both run at about 4.5 cycles per four points): 2×2
    //! register blocking of rows (20 loads per 16 points instead of 28), moving additions to
    //! the FMA pipes as `fma(a, 1, b)`, y-slab cache blocking, in-place sweeps with a plane
    //! buffer.

    use super::{total, Shape, SIXTH};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// The fused sweep (`UPDATE`) or the residual alone (`!UPDATE`, `dst` empty) over the
    /// owned planes `zs`: each row four points at a time, its last partial chunk masked.
    #[target_feature(enable = "avx2")]
    pub(super) fn planes<const UPDATE: bool>(
        shape: &Shape,
        src: &[f64],
        dst: &mut [f64],
        zs: Range<usize>,
    ) -> f64 {
        let Shape { n, sx, plane, len } = *shape;
        // The preconditions the SAFETY arguments below rest on (checked by the callers too).
        assert!(src.len() == len && zs.start >= 1 && zs.end <= n.z + 1 && zs.start <= zs.end);
        assert!(!UPDATE || dst.len() == (zs.end - zs.start) * plane);
        let base = zs.start * plane;
        let (u, o) = (src.as_ptr(), dst.as_mut_ptr());
        let full = n.x - n.x % 4;
        let rem = n.x - full;
        // Lanes 0..rem of the row's last, partial chunk.
        let mask = _mm256_setr_epi64x(
            if rem > 0 { -1 } else { 0 },
            if rem > 1 { -1 } else { 0 },
            if rem > 2 { -1 } else { 0 },
            0,
        );
        let (sixth, six) = (_mm256_set1_pd(SIXTH), _mm256_set1_pd(6.0));
        let (mut acc, mut tail) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        for z in zs {
            for y in 1..=n.y {
                // Index of the row's first owned point (x = 1).
                let b = 1 + sx * y + plane * z;
                let mut j = 0;
                while j < full {
                    let i = b + j;
                    // SAFETY: (1) loads: z ∈ [1, n.z] and y ∈ [1, n.y], so z ± 1 and y ± 1 are
                    // planes and rows of the array; x runs over [1 + j, 4 + j] ⊆ [1, n.x] and
                    // x ± 1 ⊆ [0, n.x + 1] < sx: every index i − 1 .. i + 4 ± sx, ± plane
                    // lies in [0, len) = src (asserted above). (2) store, when UPDATE:
                    // z ∈ zs, so i − base + 3 < (zs.end − zs.start)·plane = dst.len(); `dst`
                    // is a unique borrow, no source value aliases it. (3) unaligned loads and
                    // stores have no alignment requirement.
                    unsafe {
                        let s = sum6(
                            _mm256_loadu_pd(u.add(i - 1)),
                            _mm256_loadu_pd(u.add(i + 1)),
                            _mm256_loadu_pd(u.add(i - sx)),
                            _mm256_loadu_pd(u.add(i + sx)),
                            _mm256_loadu_pd(u.add(i - plane)),
                            _mm256_loadu_pd(u.add(i + plane)),
                        );
                        if UPDATE {
                            _mm256_storeu_pd(o.add(i - base), _mm256_mul_pd(s, sixth));
                        }
                        let r = _mm256_sub_pd(s, _mm256_mul_pd(six, _mm256_loadu_pd(u.add(i))));
                        acc = _mm256_add_pd(acc, _mm256_mul_pd(r, r));
                    }
                    j += 4;
                }
                if rem > 0 {
                    let i = b + full;
                    // SAFETY: as above for the lanes k < rem, whose points x = 1 + full + k
                    // ≤ n.x are owned; masked loads and stores touch no memory of the other
                    // lanes and read zeros there, so those lanes add 0 to `tail`.
                    unsafe {
                        let s = sum6(
                            _mm256_maskload_pd(u.add(i - 1), mask),
                            _mm256_maskload_pd(u.add(i + 1), mask),
                            _mm256_maskload_pd(u.add(i - sx), mask),
                            _mm256_maskload_pd(u.add(i + sx), mask),
                            _mm256_maskload_pd(u.add(i - plane), mask),
                            _mm256_maskload_pd(u.add(i + plane), mask),
                        );
                        if UPDATE {
                            _mm256_maskstore_pd(o.add(i - base), mask, _mm256_mul_pd(s, sixth));
                        }
                        let c = _mm256_maskload_pd(u.add(i), mask);
                        let r = _mm256_sub_pd(s, _mm256_mul_pd(six, c));
                        tail = _mm256_add_pd(tail, _mm256_mul_pd(r, r));
                    }
                }
            }
        }
        let (mut a, mut t) = ([0.0f64; 4], [0.0f64; 4]);
        // SAFETY: `a` and `t` hold exactly the 4 f64 an unaligned store writes.
        unsafe {
            _mm256_storeu_pd(a.as_mut_ptr(), acc);
            _mm256_storeu_pd(t.as_mut_ptr(), tail);
        }
        total(a, t)
    }

    /// `((((x− + x+) + y−) + y+) + z−) + z+`: the canonical order.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn sum6(
        xm: __m256d,
        xp: __m256d,
        ym: __m256d,
        yp: __m256d,
        zm: __m256d,
        zp: __m256d,
    ) -> __m256d {
        _mm256_add_pd(
            _mm256_add_pd(
                _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(xm, xp), ym), yp),
                zm,
            ),
            zp,
        )
    }
}

/// The reference sweep: the obvious triple loop, one point at a time, residual summed in
/// point order. Same update bits as [`sweep`]; the residual sum differs only in the order of
/// the additions.
pub fn sweep_reference(shape: &Shape, src: &[f64], dst: &mut [f64]) -> f64 {
    assert_eq!(src.len(), shape.len);
    assert_eq!(dst.len(), shape.len);
    let Shape { n, sx, plane, .. } = *shape;
    let mut res = 0.0;
    for z in 1..=n.z {
        for y in 1..=n.y {
            for x in 1..=n.x {
                let i = shape.index(x, y, z);
                let s = src[i - 1]
                    + src[i + 1]
                    + src[i - sx]
                    + src[i + sx]
                    + src[i - plane]
                    + src[i + plane];
                dst[i] = s * SIXTH;
                let r = s - 6.0 * src[i];
                res += r * r;
            }
        }
    }
    res
}

/// The reference residual: Σ r² of `u` in point order.
pub fn residual_sq_reference(shape: &Shape, u: &[f64]) -> f64 {
    assert_eq!(u.len(), shape.len);
    let Shape { n, sx, plane, .. } = *shape;
    let mut res = 0.0;
    for z in 1..=n.z {
        for y in 1..=n.y {
            for x in 1..=n.x {
                let i = shape.index(x, y, z);
                let s = u[i - 1] + u[i + 1] + u[i - sx] + u[i + sx] + u[i - plane] + u[i + plane];
                let r = s - 6.0 * u[i];
                res += r * r;
            }
        }
    }
    res
}

/// The paper's structure: sweep `u` into `unew` (reference loop), then copy `unew` back into
/// `u` point by point. Returns Σ r² of the old `u`; afterwards both hold the new iterate.
pub fn sweep_then_copy(shape: &Shape, u: &mut [f64], unew: &mut [f64]) -> f64 {
    let res = sweep_reference(shape, u, unew);
    let n = shape.n;
    for z in 1..=n.z {
        for y in 1..=n.y {
            for x in 1..=n.x {
                let i = shape.index(x, y, z);
                u[i] = unew[i];
            }
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random array (xorshift), values in [0, 1).
    fn noise(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect()
    }

    /// Recursive summation of n non-negative terms has relative error at most (n−1)·ε
    /// (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2), so two orders differ
    /// by at most 2(n−1)ε relative. The terms r² themselves are computed identically.
    fn sum_bound(n: usize) -> f64 {
        2.0 * n as f64 * f64::EPSILON
    }

    fn shapes() -> Vec<Shape> {
        [
            Dims::new(1, 1, 1),
            Dims::new(7, 3, 2),
            Dims::new(8, 8, 8),
            Dims::new(17, 11, 9),
            Dims::new(50, 50, 5),
            Dims::new(3, 20, 4),
        ]
        .into_iter()
        .map(Shape::new)
        .collect()
    }

    #[test]
    fn fused_equals_reference() {
        for (k, sh) in shapes().into_iter().enumerate() {
            let src = noise(sh.len, k as u64 + 1);
            let mut a = noise(sh.len, 99);
            let mut b = a.clone();
            let ra = sweep(&sh, &src, &mut a);
            let rb = sweep_reference(&sh, &src, &mut b);
            // Same operations in the same order per point: the updates are bit-identical,
            // and points the sweep does not own are untouched.
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
            let n = sh.n.volume();
            assert!(
                (ra - rb).abs() <= sum_bound(n) * rb,
                "{sh:?}: fused {ra} vs reference {rb}"
            );
            let rr = residual_sq(&sh, &src);
            assert!((rr - ra).abs() <= sum_bound(n) * rb, "residual alone {rr}");
            let rref = residual_sq_reference(&sh, &src);
            assert_eq!(rref.to_bits(), rb.to_bits());
        }
    }

    #[test]
    fn the_generic_path_matches_the_dispatched_one() {
        // On an AVX2 machine `sweep` runs the AVX2 build; the portable build must give the
        // same bits (same operations, same accumulation order).
        for (k, sh) in shapes().into_iter().enumerate() {
            let src = noise(sh.len, k as u64 + 7);
            let mut a = vec![0.0; sh.len];
            let mut b = vec![0.0; sh.len];
            let zs = sh.owned_planes();
            let ra = sweep(&sh, &src, &mut a);
            let rb = portable::<true>(&sh, &src, &mut b[sh.planes(zs.clone())], zs.clone());
            assert_eq!(a, b);
            assert_eq!(ra.to_bits(), rb.to_bits());
            let rc = portable::<false>(&sh, &src, &mut [], zs);
            assert_eq!(rb.to_bits(), rc.to_bits());
            assert_eq!(residual_sq(&sh, &src).to_bits(), rc.to_bits());
        }
    }

    #[test]
    fn planes_split_the_sweep() {
        let sh = Shape::new(Dims::new(9, 6, 7));
        let src = noise(sh.len, 3);
        let mut whole = vec![0.0; sh.len];
        let r = sweep(&sh, &src, &mut whole);
        let mut parts = vec![0.0; sh.len];
        let mut sum = 0.0;
        for zs in [1..3, 3..4, 4..8] {
            let range = sh.planes(zs.clone());
            sum += sweep_planes(&sh, &src, &mut parts[range], zs);
        }
        assert_eq!(whole, parts);
        assert!((sum - r).abs() <= sum_bound(sh.n.volume()) * r);
        assert_eq!(sweep_planes(&sh, &src, &mut [], 3..3), 0.0);
    }

    #[test]
    fn paper_structure_matches() {
        let sh = Shape::new(Dims::new(6, 5, 4));
        let mut u = noise(sh.len, 5);
        let mut unew = u.clone();
        let mut fused = vec![0.0; sh.len];
        let rf = sweep(&sh, &u, &mut fused);
        let rp = sweep_then_copy(&sh, &mut u, &mut unew);
        assert!((rf - rp).abs() <= sum_bound(sh.n.volume()) * rp);
        for z in 1..=4 {
            for y in 1..=5 {
                for x in 1..=6 {
                    let i = sh.index(x, y, z);
                    assert_eq!(u[i], fused[i]);
                }
            }
        }
    }

    #[test]
    fn residual_is_b_minus_a_u() {
        // One interior point: r = (sum of the six halo values) − 6u.
        let sh = Shape::new(Dims::cube(1));
        let mut u = vec![0.0; sh.len];
        let c = sh.index(1, 1, 1);
        u[c] = 2.0;
        for (k, d) in [1, sh.sx, sh.plane].into_iter().enumerate() {
            u[c - d] = k as f64;
            u[c + d] = 1.0;
        }
        let s = 0.0 + 1.0 + 1.0 + 1.0 + 2.0 + 1.0;
        assert_eq!(residual_sq(&sh, &u), (s - 12.0) * (s - 12.0));
        let mut out = vec![0.0; sh.len];
        sweep(&sh, &u, &mut out);
        assert_eq!(out[c], s * SIXTH);
    }

    #[test]
    fn grids_align_every_row() {
        for n in [Dims::cube(50), Dims::new(7, 3, 2), Dims::new(1, 1, 1)] {
            let sh = Shape::new(n);
            assert_eq!(sh.sx % ROW_ALIGN, 0);
            assert!(sh.sx >= n.x + 2);
            for _ in 0..4 {
                let g = Grid::new(sh.len, 1.5);
                assert_eq!(g.len(), sh.len);
                assert!(g.iter().all(|&v| v == 1.5));
                for (y, z) in [(0, 0), (1, 1), (n.y, n.z + 1)] {
                    let p = &g[sh.index(1, y, z)] as *const f64 as usize;
                    assert_eq!(p % 32, 0, "row ({y}, {z}) of {n:?}");
                }
                let c = g.clone();
                assert_eq!(&c[..], &g[..]);
                assert_eq!(&c[1] as *const f64 as usize % 32, 0);
            }
        }
    }

    #[test]
    #[should_panic(expected = "destination")]
    fn wrong_destination_is_refused() {
        let sh = Shape::new(Dims::cube(3));
        let src = vec![0.0; sh.len];
        sweep_planes(&sh, &src, &mut [0.0; 4], 1..2);
    }
}
