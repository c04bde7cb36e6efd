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
//!
//! ## Plane-ordered sums
//! A kernel's Σ r² over several z-planes is the sum, in z order from 0, of each plane's
//! lanes totalled on their own: `((0 + R_1) + R_2) + …`. So a block swept by several workers,
//! each over its own planes, sums to the bits of one whole sweep when the workers keep each
//! plane's total apart and one of them adds them up in z order (the hybrid ranks of
//! `team.rs`); a block's residual does not depend on how many threads swept it.

use crate::geometry::{Dims, LocalIdx};
use std::ops::Range;

/// 1/6, the Jacobi weight of the 7-point stencil.
pub const SIXTH: f64 = 1.0 / 6.0;

/// Rows are padded to a multiple of this many values (one 256-bit vector).
pub const ROW_ALIGN: usize = 4;

/// The layout of one block: `n` owned points per axis plus a one-cell halo, x fastest, each
/// row padded to a multiple of `ROW_ALIGN` values (the padding is never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Owned (interior) points per axis.
    pub n: Dims,
    /// Stride of y: `n.x + 2` rounded up to a multiple of `ROW_ALIGN`.
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
        Grid::staggered(len, v, 0)
    }

    /// `len` values, all `v`, starting `lines` cache lines (of 64 bytes) past the 32-byte
    /// boundary [`Grid::new`] would use. Large allocations start at the same offset within a
    /// page, so a kernel streaming through many arrays at once (pipelined CG's update reads
    /// and writes eleven) maps them all to the same L1 set and evicts its own lines; giving
    /// each array its own `lines` spreads them over the sets.
    pub fn staggered(len: usize, v: f64, lines: usize) -> Self {
        let shift = 8 * lines;
        let buf = vec![v; len + ROW_ALIGN + shift];
        // Element `off + 1` on a 32-byte boundary; f64 alignment makes one of 0..4 work.
        let addr = buf.as_ptr() as usize;
        let off = (0..ROW_ALIGN)
            .find(|k| (addr + (k + 1) * 8).is_multiple_of(32))
            .unwrap_or(0)
            + shift;
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

/// A box of owned points to sweep: half-open ranges of local indices, each inside
/// `1..n + 1` along its axis. The overlapped exchange sweeps the interior and the boundary
/// shell of a block as separate regions; every point is computed as in a whole-block sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// x range.
    pub x: Range<usize>,
    /// y range.
    pub y: Range<usize>,
    /// z range.
    pub z: Range<usize>,
}

impl Region {
    /// Every owned point of a block of `n` points.
    pub fn all(n: Dims) -> Self {
        Region {
            x: 1..n.x + 1,
            y: 1..n.y + 1,
            z: 1..n.z + 1,
        }
    }

    /// The owned planes `zs`, whole.
    pub fn planes(n: Dims, zs: Range<usize>) -> Self {
        Region {
            z: zs,
            ..Region::all(n)
        }
    }

    /// Number of points.
    pub fn volume(&self) -> usize {
        self.x.len() * self.y.len() * self.z.len()
    }

    /// True for a box of no points.
    pub fn is_empty(&self) -> bool {
        self.volume() == 0
    }
}

/// Fused sweep of a whole block: `dst` ← one Jacobi step of `src` on every owned point;
/// returns Σ r² of `src`. `rhs`, when the problem has a source term, holds `h² f` at every
/// owned point (an array of the block's shape). Halo and padding of `dst` are not written.
pub fn sweep(shape: &Shape, src: &[f64], rhs: Option<&[f64]>, dst: &mut [f64]) -> f64 {
    fused::<true, true>(shape, src, rhs, dst, 0, &Region::all(shape.n))
}

/// Fused sweep of the owned planes `zs` of a block: `dst` holds exactly those planes
/// (`dst = &mut whole[shape.planes(zs)]`), so threads can sweep disjoint planes of one array.
pub fn sweep_planes(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    zs: Range<usize>,
) -> f64 {
    assert_eq!(
        dst.len(),
        zs.len() * shape.plane,
        "destination does not hold exactly the planes swept"
    );
    let base = zs.start * shape.plane;
    fused::<true, true>(shape, src, rhs, dst, base, &Region::planes(shape.n, zs))
}

/// [`sweep_planes`] without the residual, with [`step`]'s bits: the planes of a sweep whose
/// residual nobody reads.
pub fn step_planes(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    zs: Range<usize>,
) {
    assert_eq!(
        dst.len(),
        zs.len() * shape.plane,
        "destination does not hold exactly the planes swept"
    );
    let base = zs.start * shape.plane;
    fused::<true, false>(shape, src, rhs, dst, base, &Region::planes(shape.n, zs));
}

/// Fused sweep of one region of a block into the whole array `dst`; Σ r² of `src` there.
pub fn sweep_region(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    region: &Region,
) -> f64 {
    fused::<true, true>(shape, src, rhs, dst, 0, region)
}

/// Σ r² of `u` over every owned point (b − A u, the halo holding the boundary terms), without
/// updating: the *true* residual of a block whose halo is current.
pub fn residual_sq(shape: &Shape, u: &[f64], rhs: Option<&[f64]>) -> f64 {
    fused::<false, true>(shape, u, rhs, &mut [], 0, &Region::all(shape.n))
}

/// Σ r² of `u` over `region`.
pub fn residual_sq_region(shape: &Shape, u: &[f64], rhs: Option<&[f64]>, region: &Region) -> f64 {
    fused::<false, true>(shape, u, rhs, &mut [], 0, region)
}

/// Σ r² of `u` over the owned planes `zs`.
pub fn residual_sq_planes(shape: &Shape, u: &[f64], rhs: Option<&[f64]>, zs: Range<usize>) -> f64 {
    fused::<false, true>(shape, u, rhs, &mut [], 0, &Region::planes(shape.n, zs))
}

/// Check what every kernel relies on (its SAFETY arguments start here), then dispatch: the
/// AVX2 build when the CPU has it, the portable one otherwise; with or without a source term.
/// `dst[i − base]` receives point i (UPDATE only).
fn fused<const UPDATE: bool, const RESID: bool>(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    base: usize,
    r: &Region,
) -> f64 {
    if !RESID {
        let sweep = Sweep::new(shape, src, rhs, r);
        fused_into::<UPDATE, RESID>(Sweep { base, ..sweep }, dst, &mut Lanes::default());
        return 0.0;
    }
    // Plane by plane, each plane's lanes totalled, the totals summed in z order (module
    // docs, "Plane-ordered sums").
    let mut sum = 0.0;
    for z in r.z.clone() {
        let plane = Region {
            z: z..z + 1,
            ..r.clone()
        };
        let mut lanes = Lanes::default();
        let sweep = Sweep::new(shape, src, rhs, &plane);
        fused_into::<UPDATE, RESID>(Sweep { base, ..sweep }, dst, &mut lanes);
        sum += lanes.total();
    }
    sum
}

/// One kernel call's input: the block's shape, the array read, the source term (`h² f`, an
/// array of the block's shape, where the problem has one), the region whose points are
/// updated and (RESID) summed, how far its rows reach beyond it along x (points updated only),
/// and `base`, the index of the destination's first value (one that holds some planes only).
#[derive(Clone, Copy)]
struct Sweep<'a> {
    shape: &'a Shape,
    src: &'a [f64],
    rhs: Option<&'a [f64]>,
    r: &'a Region,
    ext: [usize; 2],
    base: usize,
}

impl<'a> Sweep<'a> {
    /// Region `r` of `src`, no extension, the whole array as the destination.
    fn new(shape: &'a Shape, src: &'a [f64], rhs: Option<&'a [f64]>, r: &'a Region) -> Self {
        Sweep {
            shape,
            src,
            rhs,
            r,
            ext: [0, 0],
            base: 0,
        }
    }
}

/// The r² lanes of a fused sweep: four lanes (point index mod 4 within a row segment's full
/// chunks of four) and four tail lanes (the last `m mod 4` points of each row segment of
/// length m). A sweep done in several calls that carry the same `Lanes` through, over the same
/// row segments in the same order, sums the same bits as one call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Lanes {
    acc: [f64; 4],
    tail: [f64; 4],
}

impl Lanes {
    /// Σ r² so far, summed in the fixed order of every path.
    pub fn total(&self) -> f64 {
        total(self.acc, self.tail)
    }
}

/// Fused sweep of `region` of a block into the whole array `dst`, adding the region's r² to
/// `lanes` (in the lanes' order: [`Lanes`]).
pub fn sweep_region_into(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    region: &Region,
    lanes: &mut Lanes,
) {
    fused_into::<true, true>(Sweep::new(shape, src, rhs, region), dst, lanes);
}

/// [`sweep_region_into`] whose rows reach `ext[0]` points below and `ext[1]` points above
/// `region` along x, updated without the residual: one pass over each row, where separate
/// regions of a few points along x would run a short, masked row segment for every row.
/// The region's own points are computed, and its r² summed, with the bits of
/// [`sweep_region_into`]'s.
pub fn sweep_region_ext_x_into(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    region: &Region,
    ext: [usize; 2],
    lanes: &mut Lanes,
) {
    let sweep = Sweep::new(shape, src, rhs, region);
    fused_into::<true, true>(Sweep { ext, ..sweep }, dst, lanes);
}

/// One Jacobi step of `src` into `dst` on every owned point, without the residual: the
/// sweeps whose residual nobody reads (every sweep but a check's) skip the centre load and
/// the r² accumulation. The update's bits are [`sweep`]'s.
pub fn step(shape: &Shape, src: &[f64], rhs: Option<&[f64]>, dst: &mut [f64]) {
    step_region(shape, src, rhs, dst, &Region::all(shape.n));
}

/// [`step`] on one region of the block, into the whole array `dst`.
pub fn step_region(
    shape: &Shape,
    src: &[f64],
    rhs: Option<&[f64]>,
    dst: &mut [f64],
    region: &Region,
) {
    let mut lanes = Lanes::default();
    fused_into::<true, false>(Sweep::new(shape, src, rhs, region), dst, &mut lanes);
}

/// [`fused`], adding to `lanes` (unless `!RESID`: the update alone, `lanes` untouched), each
/// row segment extended by `ext[0]` points below and `ext[1]` above along x, updated only
/// (UPDATE; no extension without it).
fn fused_into<const UPDATE: bool, const RESID: bool>(
    sweep: Sweep<'_>,
    dst: &mut [f64],
    lanes: &mut Lanes,
) {
    let (shape, src, rhs, r, ext) = (sweep.shape, sweep.src, sweep.rhs, sweep.r, sweep.ext);
    let n = shape.n;
    assert_eq!(
        src.len(),
        shape.len,
        "source array does not have the block's shape"
    );
    if let Some(b) = rhs {
        assert_eq!(
            b.len(),
            shape.len,
            "right-hand side does not have the block's shape"
        );
    }
    for (range, len, axis) in [(&r.x, n.x, "x"), (&r.y, n.y, "y"), (&r.z, n.z, "z")] {
        assert!(
            range.start >= 1 && range.start <= range.end && range.end <= len + 1,
            "{axis} range {range:?} is not inside the owned points 1..={len}"
        );
    }
    assert!(
        r.x.start > ext[0] && r.x.end + ext[1] <= n.x + 1 && (UPDATE || ext == [0, 0]),
        "x range {:?} extended by {ext:?} is not inside the owned points 1..={}",
        r.x,
        n.x
    );
    if r.is_empty() {
        return;
    }
    if UPDATE {
        let first = shape.index(r.x.start - ext[0], r.y.start, r.z.start);
        let last = shape.index(r.x.end + ext[1] - 1, r.y.end - 1, r.z.end - 1);
        assert!(
            first >= sweep.base && last - sweep.base < dst.len(),
            "destination does not hold the region swept"
        );
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the only precondition of a `#[target_feature(enable = "avx2")]` function is
        // that the CPU supports AVX2, detected on the line above; `region`'s own preconditions
        // are the asserts above.
        unsafe { x86::region::<UPDATE, RESID>(sweep, dst, lanes) };
        return;
    }
    portable_build::<UPDATE, RESID>(sweep, dst, lanes);
}

/// The portable build, with the source term as a constant.
fn portable_build<const UPDATE: bool, const RESID: bool>(
    sweep: Sweep<'_>,
    dst: &mut [f64],
    lanes: &mut Lanes,
) {
    match sweep.rhs {
        Some(_) => portable::<UPDATE, RESID, true>(sweep, dst, lanes),
        None => portable::<UPDATE, RESID, false>(sweep, dst, lanes),
    }
}

/// Sum the four lanes and the four tail lanes, in the fixed order of every path.
#[inline(always)]
fn total(acc: [f64; 4], tail: [f64; 4]) -> f64 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((tail[0] + tail[1]) + (tail[2] + tail[3]))
}

/// The fused sweep (`UPDATE`, `RESID`), the update alone (`!RESID`) or the residual alone
/// (`!UPDATE`, `dst` empty), with a source term (`RHS`, `rhs` of the block's shape) or
/// without, over region `r`, each row's `ext` points beyond it along x updated only:
/// portable build.
fn portable<const UPDATE: bool, const RESID: bool, const RHS: bool>(
    sweep: Sweep<'_>,
    dst: &mut [f64],
    lanes: &mut Lanes,
) {
    let Sweep { shape, r, ext, .. } = sweep;
    let m = r.x.len();
    for z in r.z.clone() {
        for y in r.y.clone() {
            let b = shape.index(r.x.start, y, z);
            if UPDATE && ext[0] > 0 {
                portable_row::<true, false, RHS>(&sweep, dst, b - ext[0], ext[0], lanes);
            }
            portable_row::<UPDATE, RESID, RHS>(&sweep, dst, b, m, lanes);
            if UPDATE && ext[1] > 0 {
                portable_row::<true, false, RHS>(&sweep, dst, b + m, ext[1], lanes);
            }
        }
    }
}

/// One row segment of [`portable`]: the `m` points from index `b`.
#[inline(always)]
fn portable_row<const UPDATE: bool, const RESID: bool, const RHS: bool>(
    sweep: &Sweep<'_>,
    dst: &mut [f64],
    b: usize,
    m: usize,
    lanes: &mut Lanes,
) {
    let Sweep {
        shape, src, base, ..
    } = *sweep;
    let rhs = sweep.rhs.unwrap_or(&[]);
    let Shape { sx, plane, .. } = *shape;
    let full = m - m % 4;
    let xm = &src[b - 1..b - 1 + m];
    let xc = &src[b..b + m];
    let xp = &src[b + 1..b + 1 + m];
    let ym = &src[b - sx..b - sx + m];
    let yp = &src[b + sx..b + sx + m];
    let zm = &src[b - plane..b - plane + m];
    let zp = &src[b + plane..b + plane + m];
    let f: &[f64] = if RHS { &rhs[b..b + m] } else { &[] };
    let out: &mut [f64] = if UPDATE {
        &mut dst[b - base..b - base + m]
    } else {
        &mut []
    };
    for i in 0..m {
        let mut s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
        if RHS {
            s += f[i];
        }
        if UPDATE {
            out[i] = s * SIXTH;
        }
        if !RESID {
            continue;
        }
        let r = s - 6.0 * xc[i];
        if i < full {
            lanes.acc[i % 4] += r * r;
        } else {
            lanes.tail[i - full] += r * r;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The fused sweep with AVX2 intrinsics: the portable build's operations, in its order.
    //!
    //! Tried and not kept (no gain on the Zen 3 of the benchmark machine, where this loop and
    //! a plain C update-only sweep both run at about 6 cycles per four points, whether the
    //! arrays sit in L1, L2 or L3): 2×2 register blocking of rows (20 loads per 16 points
    //! instead of 28), moving additions to the FMA pipes as `fma(a, 1, b)`, y-slab cache
    //! blocking, in-place sweeps with a plane buffer, rotating separately allocated planes
    //! (no write-allocate traffic), forming the x ± 1 neighbours by shuffles of the centre
    //! vectors (five aligned loads instead of seven), two accumulators, a tree-shaped sum.

    use super::{Lanes, Shape, Sweep, SIXTH};
    use std::arch::x86_64::*;

    /// The fused sweep (`UPDATE`, `RESID`), the update alone (`!RESID`: no centre load, no
    /// r²) or the residual alone (`!UPDATE`, `dst` empty), with a source term or without,
    /// over region `r`, each row's `ext` points beyond it along x updated only: [`rows`] with
    /// the source term and the extension as constants, so that the sweeps without them test
    /// nothing per row (a test of `ext` in every row slowed the 50³ sweep by 4–12%).
    #[target_feature(enable = "avx2")]
    pub(super) fn region<const UPDATE: bool, const RESID: bool>(
        sweep: Sweep<'_>,
        dst: &mut [f64],
        lanes: &mut Lanes,
    ) {
        match (sweep.rhs.is_some(), sweep.ext == [0, 0]) {
            (true, true) => rows::<UPDATE, RESID, true, false>(sweep, dst, lanes),
            (true, false) => rows::<UPDATE, RESID, true, true>(sweep, dst, lanes),
            (false, true) => rows::<UPDATE, RESID, false, false>(sweep, dst, lanes),
            (false, false) => rows::<UPDATE, RESID, false, true>(sweep, dst, lanes),
        }
    }

    /// [`region`] with a source term (`RHS`) or without, and (`EXT`) with the extension
    /// along x or without: each row segment four points at a time, its last partial chunk
    /// masked.
    #[target_feature(enable = "avx2")]
    fn rows<const UPDATE: bool, const RESID: bool, const RHS: bool, const EXT: bool>(
        sweep: Sweep<'_>,
        dst: &mut [f64],
        lanes: &mut Lanes,
    ) {
        let (shape, src, r, ext, base) = (sweep.shape, sweep.src, sweep.r, sweep.ext, sweep.base);
        let rhs = sweep.rhs.unwrap_or(&[]);
        let Shape { n, sx, plane, len } = *shape;
        // The preconditions the SAFETY arguments below rest on (checked by the caller too).
        assert!(src.len() == len && (!RHS || rhs.len() == len));
        assert!(r.x.start > ext[0] && r.x.end + ext[1] <= n.x + 1 && r.x.start < r.x.end);
        assert!(r.y.start >= 1 && r.y.end <= n.y + 1 && r.y.start < r.y.end);
        assert!(r.z.start >= 1 && r.z.end <= n.z + 1 && r.z.start < r.z.end);
        assert!(UPDATE || ext == [0, 0]);
        if UPDATE {
            let first = shape.index(r.x.start - ext[0], r.y.start, r.z.start);
            let last = shape.index(r.x.end + ext[1] - 1, r.y.end - 1, r.z.end - 1);
            assert!(first >= base && last - base < dst.len());
        }
        let k = Kernel {
            u: src.as_ptr(),
            f: rhs.as_ptr(),
            o: dst.as_mut_ptr(),
            base,
            sx,
            plane,
            sixth: _mm256_set1_pd(SIXTH),
            six: _mm256_set1_pd(6.0),
        };
        let own = Seg::new(r.x.len());
        // Without the extension, constants (nothing computed per call).
        let (lo, hi) = (
            Seg::new(ext[0] * usize::from(EXT)),
            Seg::new(ext[1] * usize::from(EXT)),
        );
        // SAFETY: each array holds exactly the 4 f64 an unaligned load reads.
        let (mut acc, mut tail) = unsafe {
            (
                _mm256_loadu_pd(lanes.acc.as_ptr()),
                _mm256_loadu_pd(lanes.tail.as_ptr()),
            )
        };
        for z in r.z.clone() {
            for y in r.y.clone() {
                // Index of the row segment's first point.
                let b = r.x.start + sx * y + plane * z;
                // SAFETY: `row`'s contract: z ∈ [1, n.z] and y ∈ [1, n.y] (asserted ranges);
                // the three segments [b − ext[0], b), [b, b + m), [b + m, b + m + ext[1])
                // lie at x ∈ [r.x.start − ext[0], r.x.end + ext[1]) ⊆ [1, n.x] (asserted), and
                // their stores, when UPDATE, between the first and last point asserted to be
                // inside dst; src and rhs have the block's length (asserted).
                unsafe {
                    if UPDATE && EXT && ext[0] > 0 {
                        k.row::<true, false, RHS>(b - ext[0], &lo, &mut acc, &mut tail);
                    }
                    k.row::<UPDATE, RESID, RHS>(b, &own, &mut acc, &mut tail);
                    if UPDATE && EXT && ext[1] > 0 {
                        k.row::<true, false, RHS>(b + own.m, &hi, &mut acc, &mut tail);
                    }
                }
            }
        }
        // SAFETY: each array holds exactly the 4 f64 an unaligned store writes.
        unsafe {
            _mm256_storeu_pd(lanes.acc.as_mut_ptr(), acc);
            _mm256_storeu_pd(lanes.tail.as_mut_ptr(), tail);
        }
    }

    /// A row segment's length, its full chunks of four and the mask of its last, partial one.
    struct Seg {
        m: usize,
        full: usize,
        rem: usize,
        mask: __m256i,
    }

    impl Seg {
        #[target_feature(enable = "avx2")]
        fn new(m: usize) -> Self {
            let rem = m % 4;
            // Lanes 0..rem of the segment's last, partial chunk.
            let mask = _mm256_setr_epi64x(
                if rem > 0 { -1 } else { 0 },
                if rem > 1 { -1 } else { 0 },
                if rem > 2 { -1 } else { 0 },
                0,
            );
            Seg {
                m,
                full: m - rem,
                rem,
                mask,
            }
        }
    }

    /// The arrays and constants of one [`region`] call.
    struct Kernel {
        u: *const f64,
        f: *const f64,
        o: *mut f64,
        base: usize,
        sx: usize,
        plane: usize,
        sixth: __m256d,
        six: __m256d,
    }

    impl Kernel {
        /// The `seg.m` points of one row from index `b`: stores into `o` (UPDATE), r² into
        /// `acc` (full chunks) and `tail` (the partial chunk) (RESID).
        ///
        /// # Safety
        /// The points b .. b + seg.m lie in one row of the block's interior (x ∈ [1, n.x],
        /// y ∈ [1, n.y], z ∈ [1, n.z]) of arrays `u` (and `f` when RHS) of the block's length;
        /// when UPDATE, `o` is valid for writes at i − base for each of those points and no
        /// value of `u` or `f` aliases them; the CPU has AVX2.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn row<const UPDATE: bool, const RESID: bool, const RHS: bool>(
            &self,
            b: usize,
            seg: &Seg,
            acc: &mut __m256d,
            tail: &mut __m256d,
        ) {
            let Kernel {
                u,
                f,
                o,
                base,
                sx,
                plane,
                sixth,
                six,
            } = *self;
            let mut j = 0;
            while j < seg.full {
                let i = b + j;
                // SAFETY: (1) loads: the point is interior (the contract), so z ± 1 and y ± 1
                // are planes and rows of the array and x ± 1 ∈ [0, n.x + 1] < sx: every index
                // i − 1 .. i + 4 ± sx, ± plane lies in the array, and i .. i + 3 in rhs (same
                // length). (2) store, when UPDATE: i − base .. i − base + 3 are writable and
                // alias no source (the contract). (3) unaligned loads and stores have no
                // alignment requirement.
                unsafe {
                    let mut s = sum6(
                        _mm256_loadu_pd(u.add(i - 1)),
                        _mm256_loadu_pd(u.add(i + 1)),
                        _mm256_loadu_pd(u.add(i - sx)),
                        _mm256_loadu_pd(u.add(i + sx)),
                        _mm256_loadu_pd(u.add(i - plane)),
                        _mm256_loadu_pd(u.add(i + plane)),
                    );
                    if RHS {
                        s = _mm256_add_pd(s, _mm256_loadu_pd(f.add(i)));
                    }
                    if UPDATE {
                        _mm256_storeu_pd(o.add(i - base), _mm256_mul_pd(s, sixth));
                    }
                    if RESID {
                        let c = _mm256_loadu_pd(u.add(i));
                        let r = _mm256_sub_pd(s, _mm256_mul_pd(six, c));
                        *acc = _mm256_add_pd(*acc, _mm256_mul_pd(r, r));
                    }
                }
                j += 4;
            }
            if seg.rem > 0 {
                let (i, mask) = (b + seg.full, seg.mask);
                // SAFETY: as above for the lanes k < rem, whose points are in the segment;
                // masked loads and stores touch no memory of the other lanes and read zeros
                // there, so those lanes add 0 to `tail`.
                unsafe {
                    let mut s = sum6(
                        _mm256_maskload_pd(u.add(i - 1), mask),
                        _mm256_maskload_pd(u.add(i + 1), mask),
                        _mm256_maskload_pd(u.add(i - sx), mask),
                        _mm256_maskload_pd(u.add(i + sx), mask),
                        _mm256_maskload_pd(u.add(i - plane), mask),
                        _mm256_maskload_pd(u.add(i + plane), mask),
                    );
                    if RHS {
                        s = _mm256_add_pd(s, _mm256_maskload_pd(f.add(i), mask));
                    }
                    if UPDATE {
                        _mm256_maskstore_pd(o.add(i - base), mask, _mm256_mul_pd(s, sixth));
                    }
                    if RESID {
                        let c = _mm256_maskload_pd(u.add(i), mask);
                        let r = _mm256_sub_pd(s, _mm256_mul_pd(six, c));
                        *tail = _mm256_add_pd(*tail, _mm256_mul_pd(r, r));
                    }
                }
            }
        }
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
pub fn sweep_reference(shape: &Shape, src: &[f64], rhs: Option<&[f64]>, dst: &mut [f64]) -> f64 {
    assert_eq!(src.len(), shape.len);
    assert_eq!(dst.len(), shape.len);
    let Shape { n, sx, plane, .. } = *shape;
    let mut res = 0.0;
    for z in 1..=n.z {
        for y in 1..=n.y {
            for x in 1..=n.x {
                let i = shape.index(x, y, z);
                let mut s = src[i - 1]
                    + src[i + 1]
                    + src[i - sx]
                    + src[i + sx]
                    + src[i - plane]
                    + src[i + plane];
                if let Some(f) = rhs {
                    s += f[i];
                }
                dst[i] = s * SIXTH;
                let r = s - 6.0 * src[i];
                res += r * r;
            }
        }
    }
    res
}

/// The reference residual: Σ r² of `u` in point order (the serial oracle's).
#[cfg(test)]
pub fn residual_sq_reference(shape: &Shape, u: &[f64], rhs: Option<&[f64]>) -> f64 {
    assert_eq!(u.len(), shape.len);
    let Shape { n, sx, plane, .. } = *shape;
    let mut res = 0.0;
    for z in 1..=n.z {
        for y in 1..=n.y {
            for x in 1..=n.x {
                let i = shape.index(x, y, z);
                let mut s =
                    u[i - 1] + u[i + 1] + u[i - sx] + u[i + sx] + u[i - plane] + u[i + plane];
                if let Some(f) = rhs {
                    s += f[i];
                }
                let r = s - 6.0 * u[i];
                res += r * r;
            }
        }
    }
    res
}

/// The paper's structure: sweep `u` into `unew` (reference loop), then copy `unew` back into
/// `u` point by point. Returns Σ r² of the old `u`; afterwards both hold the new iterate.
pub fn sweep_then_copy(shape: &Shape, u: &mut [f64], rhs: Option<&[f64]>, unew: &mut [f64]) -> f64 {
    let res = sweep_reference(shape, u, rhs, unew);
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
mod test;
