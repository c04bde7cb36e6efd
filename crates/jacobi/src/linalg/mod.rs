//! The Krylov solvers' kernels on one block: the 7-point operator applied to a vector (fused
//! with the dot product the algorithm needs next), the residual b − A x, and the fused vector
//! updates of CG and pipelined CG (fused with the dot products of the next reduction).
//!
//! Vectors have the block's [`Shape`] with a one-cell halo, as the Jacobi iterate does. The
//! operator is `A = diag·I − adjacency` on the owned points, `diag = 6` for the Laplacian
//! ([`SEVEN_POINT`]); what lies beyond the owned points is read from the halo: neighbours'
//! values at faces with a neighbour, zero (direction vectors) or the Dirichlet values (the
//! iterate, for b − A x) at the edge of the domain.
//!
//! The operator, the residual, the direction update and CG's unpreconditioned update
//! ([`apply`], [`residual`], [`direction`], [`direction_apply`], [`update`]) are written once
//! over the vectors' value type ([`Lane`]: `f64` here, `f32` for multisplitting's inner CG in
//! single precision, `single.rs`). Every kernel works row by row over the owned points, `N`
//! points at a time (4 `f64`s, 8 `f32`s: a 256-bit register) then the row's tail, with `N`
//! double-precision accumulator lanes summed in a fixed order. Each has a portable body (the
//! reference) and an AVX2 kernel over the same lanes, chosen at run time (module `avx2`, which
//! says why); so has pipelined CG's unpreconditioned update ([`pipe_update`]). Nothing
//! contracts into fused multiply-adds, so both forms give the same bits. The preconditioned
//! updates and the dot products ([`scale`], [`dot`], [`dot3`], [`cg_update`] with a
//! preconditioner) are portable bodies only, compiled also inside an AVX2 function.

// The lane loops index a dozen arrays and the lane accumulators by the same counter.
#![allow(clippy::needless_range_loop)]

use crate::field::{pack_layer, unpack_layer};
use crate::geometry::Face;
use crate::halo::Halo;
use crate::kernel::{Grid, Region, Shape};
use crate::lane::{chunk_mut, sum4, Lane};

/// The diagonal of the 7-point Laplacian, `A = 6I − adjacency`.
pub(crate) const SEVEN_POINT: f64 = 6.0;

/// One vector of a block: an array of the block's shape, halo included, zero where not set.
#[derive(Debug)]
pub(crate) struct Vector {
    shape: Shape,
    pub(crate) v: Grid,
}

impl Vector {
    /// A vector of zeros (halo included). Successive vectors start on different cache-line
    /// offsets ([`Grid::staggered`]), so the fused updates' streams do not evict each other.
    pub(crate) fn zeros(shape: &Shape) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        // Relaxed: only spreads offsets; any interleaving of threads is as good.
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let lines = NEXT.fetch_add(1, Relaxed) % 16;
        Vector {
            shape: *shape,
            v: Grid::staggered(shape.len, 0.0, lines),
        }
    }

    /// A vector of `value` at every owned point, zero in the halo.
    pub(crate) fn filled(shape: &Shape, value: f64) -> Self {
        let mut v = Vector::zeros(shape);
        for (b, m) in rows(shape) {
            v.v[b..b + m].fill(value);
        }
        v
    }
}

impl Halo for Vector {
    type Link = Face;
    fn pack(&self, face: Face, buf: &mut [f64]) {
        pack_layer(&self.shape, face, &self.v, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        unpack_layer(&self.shape, face, &mut self.v, data);
    }
}

/// `(first index, length)` of every row of owned points.
#[inline(always)]
pub(crate) fn rows(sh: &Shape) -> impl Iterator<Item = (usize, usize)> + '_ {
    rows_in(sh, 1..sh.n.z + 1)
}

/// `(first index, length)` of every row of owned points in the planes `zs`.
#[inline(always)]
pub(crate) fn rows_in(
    sh: &Shape,
    zs: std::ops::Range<usize>,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    let n = sh.n;
    zs.flat_map(move |z| (1..=n.y).map(move |y| (sh.index(1, y, z), n.x)))
}

/// The row segment `[b, b + m)` of `u` and the six it reads in the 7-point stencil, in the
/// kernels' order: centre, x − 1, x + 1, y − 1, y + 1, z − 1, z + 1 (`sx`, `pl`: the strides of
/// a row and a plane).
#[inline(always)]
pub(crate) fn stencil_rows<T>(u: &[T], b: usize, m: usize, sx: usize, pl: usize) -> [&[T]; 7] {
    [
        &u[b..b + m],
        &u[b - 1..b - 1 + m],
        &u[b + 1..b + 1 + m],
        &u[b - sx..b - sx + m],
        &u[b + sx..b + sx + m],
        &u[b - pl..b - pl + m],
        &u[b + pl..b + pl + m],
    ]
}

/// Runs `$body` (a call of an `#[inline(always)]` kernel body) compiled with AVX2 when the
/// CPU has it, as written otherwise.
macro_rules! multiversion {
    (avx2: $fast:expr, portable: $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the only precondition of a `#[target_feature(enable = "avx2")]`
            // function is that the CPU supports AVX2, detected on the line above.
            return unsafe { $fast };
        }
        $body
    }};
    (fn $avx2:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty { $body:expr }) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            #[allow(clippy::unused_unit)]
            fn $avx2($($arg: $ty),*) -> $ret {
                $body
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the only precondition of a `#[target_feature(enable = "avx2")]`
                // function is that the CPU supports AVX2, detected on the line above.
                return unsafe { $avx2($($arg),*) };
            }
        }
        $body
    }};
}

pub(crate) fn check<T>(sh: &Shape, arrays: &[&[T]]) {
    for a in arrays {
        assert_eq!(a.len(), sh.len, "a vector does not have the block's shape");
    }
}

fn check_region(sh: &Shape, r: &Region) {
    let n = sh.n;
    for (range, len) in [(&r.x, n.x), (&r.y, n.y), (&r.z, n.z)] {
        assert!(
            range.start >= 1 && range.start <= range.end && range.end <= len + 1,
            "region {r:?} is not inside the owned points of {n:?}"
        );
    }
}

/// `y = A p` on the points of `region` (`A = diag·I − adjacency`, neighbours beyond the
/// owned points read from p's halo); returns Σ p·(A p) over them: the SpMV of CG fused with
/// its dot product.
pub(crate) fn apply<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    p: &[L],
    y: &mut [L],
    region: &Region,
) -> f64 {
    check(sh, &[p, y]);
    check_region(sh, region);
    multiversion!(
        avx2: avx2::apply(sh, diag, p, y, region),
        portable: apply_body(sh, diag, p, y, region)
    )
}

#[inline(always)]
fn apply_body<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    p: &[L],
    y: &mut [L],
    region: &Region,
) -> f64 {
    let mut acc = [0.0f64; N];
    apply_lanes(sh, diag, p, y, region, &mut acc);
    L::total(acc)
}

/// [`apply_body`] adding Σ p·(A p) into the lanes `acc`.
#[inline(always)]
fn apply_lanes<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    p: &[L],
    y: &mut [L],
    region: &Region,
    acc: &mut [f64; N],
) {
    let (sx, pl) = (sh.sx, sh.plane);
    let m = region.x.len();
    for z in region.z.clone() {
        for yy in region.y.clone() {
            let b = sh.index(region.x.start, yy, z);
            let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(p, b, m, sx, pl);
            let out = &mut y[b..b + m];
            let mut k = 0;
            while k + N <= m {
                let (c, xm, xp) = (L::chunk(c, k), L::chunk(xm, k), L::chunk(xp, k));
                let (ym, yp, zm, zp) = (
                    L::chunk(ym, k),
                    L::chunk(yp, k),
                    L::chunk(zm, k),
                    L::chunk(zp, k),
                );
                let out = L::chunk_mut(out, k);
                for l in 0..N {
                    let s = xm[l] + xp[l] + ym[l] + yp[l] + zm[l] + zp[l];
                    let v = diag * c[l] - s;
                    out[l] = v;
                    acc[l] += (c[l] * v).wide();
                }
                k += N;
            }
            for i in k..m {
                let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                let v = diag * c[i] - s;
                out[i] = v;
                acc[i - k] += (c[i] * v).wide();
            }
        }
    }
}

/// The residual of the iterate `u` (halo holding the Dirichlet values and the neighbours'
/// values): `r = b − A u = (h²f + Σ neighbours) − diag·u` at every owned point, computed in
/// double precision and written into `r` (rounded to single precision for an `f32` r), and
/// `rec`, when given, compared with it: returns `[Σ r², Σ (r − rec)²]` of the double-precision
/// values, in four lanes.
pub(crate) fn residual<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [L],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    check(sh, &[u, rhs.unwrap_or(u), rec.unwrap_or(u)]);
    check(sh, &[r]);
    multiversion!(
        avx2: avx2::residual(sh, diag, u, rhs, r, rec),
        portable: residual_body(sh, diag, u, rhs, r, rec)
    )
}

#[inline(always)]
fn residual_body<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [L],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    let (sx, pl) = (sh.sx, sh.plane);
    let (mut rr, mut gap) = ([0.0f64; 4], [0.0f64; 4]);
    for (b, m) in rows(sh) {
        let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(u, b, m, sx, pl);
        let f = rhs.map(|f| &f[b..b + m]);
        let old = rec.map(|o| &o[b..b + m]);
        let out = &mut r[b..b + m];
        let mut k = 0;
        while k + 4 <= m {
            let (cc, xm, xp) = (f64::chunk(c, k), f64::chunk(xm, k), f64::chunk(xp, k));
            let (ym, yp, zm, zp) = (
                f64::chunk(ym, k),
                f64::chunk(yp, k),
                f64::chunk(zm, k),
                f64::chunk(zp, k),
            );
            let mut s = [0.0f64; 4];
            for l in 0..4 {
                s[l] = xm[l] + xp[l] + ym[l] + yp[l] + zm[l] + zp[l];
            }
            if let Some(f) = f {
                let f = f64::chunk(f, k);
                for l in 0..4 {
                    s[l] += f[l];
                }
            }
            let o = chunk_mut::<L, 4>(out, k);
            for l in 0..4 {
                let v = s[l] - diag * cc[l];
                o[l] = L::narrow(v);
                rr[l] += v * v;
                s[l] = v;
            }
            if let Some(old) = old {
                let old = f64::chunk(old, k);
                for l in 0..4 {
                    let d = s[l] - old[l];
                    gap[l] += d * d;
                }
            }
            k += 4;
        }
        for i in k..m {
            let mut s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
            if let Some(f) = f {
                s += f[i];
            }
            let v = s - diag * c[i];
            out[i] = L::narrow(v);
            rr[i - k] += v * v;
            if let Some(o) = old {
                let d = v - o[i];
                gap[i - k] += d * d;
            }
        }
    }
    [sum4(rr), sum4(gap)]
}

/// `dst = d ⊙ src` at every owned point (the Jacobi preconditioner, `d` the inverse
/// diagonal); returns Σ src·dst.
pub(crate) fn scale(sh: &Shape, d: &[f64], src: &[f64], dst: &mut [f64]) -> f64 {
    check(sh, &[d, src, dst]);
    multiversion!(
        fn scale_avx2(sh: &Shape, d: &[f64], src: &[f64], dst: &mut [f64]) -> f64 {
            scale_body(sh, d, src, dst)
        }
    )
}

#[inline(always)]
fn scale_body(sh: &Shape, d: &[f64], src: &[f64], dst: &mut [f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    for (b, m) in rows(sh) {
        let (d, src, dst) = (&d[b..b + m], &src[b..b + m], &mut dst[b..b + m]);
        let mut k = 0;
        while k + 4 <= m {
            let (d, src, dst) = (f64::chunk(d, k), f64::chunk(src, k), f64::chunk_mut(dst, k));
            for l in 0..4 {
                dst[l] = d[l] * src[l];
                acc[l] += src[l] * dst[l];
            }
            k += 4;
        }
        for i in k..m {
            dst[i] = d[i] * src[i];
            acc[i - k] += src[i] * dst[i];
        }
    }
    sum4(acc)
}

/// Σ a·b over the owned points.
pub(crate) fn dot(sh: &Shape, a: &[f64], b: &[f64]) -> f64 {
    check(sh, &[a, b]);
    multiversion!(
        fn dot_avx2(sh: &Shape, a: &[f64], b: &[f64]) -> f64 {
            dot_body(sh, a, b)
        }
    )
}

#[inline(always)]
fn dot_body(sh: &Shape, a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    for (s, m) in rows(sh) {
        let (a, b) = (&a[s..s + m], &b[s..s + m]);
        let mut k = 0;
        while k + 4 <= m {
            let (a, b) = (f64::chunk(a, k), f64::chunk(b, k));
            for l in 0..4 {
                acc[l] += a[l] * b[l];
            }
            k += 4;
        }
        for i in k..m {
            acc[i - k] += a[i] * b[i];
        }
    }
    sum4(acc)
}

/// Σ a·d·b over the owned points (a dot product in the metric of a diagonal).
pub(crate) fn dot3(sh: &Shape, a: &[f64], d: &[f64], b: &[f64]) -> f64 {
    check(sh, &[a, d, b]);
    multiversion!(
        fn dot3_avx2(sh: &Shape, a: &[f64], d: &[f64], b: &[f64]) -> f64 {
            dot3_body(sh, a, d, b)
        }
    )
}

#[inline(always)]
fn dot3_body(sh: &Shape, a: &[f64], d: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    for (s, m) in rows(sh) {
        let (a, d, b) = (&a[s..s + m], &d[s..s + m], &b[s..s + m]);
        let mut k = 0;
        while k + 4 <= m {
            let (a, d, b) = (f64::chunk(a, k), f64::chunk(d, k), f64::chunk(b, k));
            for l in 0..4 {
                acc[l] += a[l] * (d[l] * b[l]);
            }
            k += 4;
        }
        for i in k..m {
            acc[i - k] += a[i] * (d[i] * b[i]);
        }
    }
    sum4(acc)
}

/// `p = z + β p` at every owned point (CG's new direction; `z` the preconditioned residual).
pub(crate) fn direction<L: Lane<N>, const N: usize>(sh: &Shape, z: &[L], beta: L, p: &mut [L]) {
    check(sh, &[z, p]);
    multiversion!(
        avx2: avx2::direction_planes(sh, 1..sh.n.z + 1, z, beta, p),
        portable: direction_planes(sh, 1..sh.n.z + 1, z, beta, p)
    )
}

/// [`direction`] on the planes `zs`.
#[inline(always)]
fn direction_planes<L: Lane<N>, const N: usize>(
    sh: &Shape,
    zs: std::ops::Range<usize>,
    z: &[L],
    beta: L,
    p: &mut [L],
) {
    for (b, m) in rows_in(sh, zs) {
        for (pi, zi) in p[b..b + m].iter_mut().zip(&z[b..b + m]) {
            *pi = *zi + beta * *pi;
        }
    }
}

/// `p ← z + β p`, then `y = A p` and Σ p·(A p), in one pass over the block: plane k + 1 of
/// p is updated just before the operator's plane k, which reads p's planes k − 1 .. k + 1, so
/// the operator reads p from cache rather than memory. The same bits as [`direction`] then
/// [`apply`] on every owned point. Only for a p whose halo nobody writes in between
/// (multisplitting's inner CG, where it is zero).
pub(crate) fn direction_apply<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    z: &[L],
    beta: L,
    p: &mut [L],
    y: &mut [L],
) -> f64 {
    check(sh, &[z, p, y]);
    multiversion!(
        avx2: avx2::direction_apply(sh, diag, z, beta, p, y),
        portable: direction_apply_body(sh, diag, z, beta, p, y)
    )
}

#[inline(always)]
fn direction_apply_body<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    z: &[L],
    beta: L,
    p: &mut [L],
    y: &mut [L],
) -> f64 {
    let nz = sh.n.z;
    let mut acc = [0.0f64; N];
    for k in 1..=nz {
        direction_planes(sh, ahead(k, nz), z, beta, p);
        apply_lanes(sh, diag, p, y, &Region::planes(sh.n, k..k + 1), &mut acc);
    }
    L::total(acc)
}

/// The planes of p that [`direction_apply`] updates before the operator's plane `k` of `nz`:
/// all three it reads at the first, the one ahead after that.
#[inline(always)]
fn ahead(k: usize, nz: usize) -> std::ops::Range<usize> {
    let first = if k == 1 { 1 } else { k + 1 };
    first..(k + 2).min(nz + 1)
}

/// CG's update of the iterate and the residual, `x = κ x + α p`, `r −= α q` (q = A p), with
/// `keep` κ = 1 (CG's update) or 0 (the first step of a correction that starts at zero,
/// `single.rs`); returns Σ r² of the new residual.
pub(crate) fn update<L: Lane<N>, const N: usize>(
    sh: &Shape,
    alpha: L,
    keep: L,
    x: &mut [L],
    r: &mut [L],
    p: &[L],
    q: &[L],
) -> f64 {
    check(sh, &[&*x, &*r, p, q]);
    multiversion!(
        avx2: avx2::update(sh, alpha, keep, x, r, p, q),
        portable: update_body(sh, alpha, keep, x, r, p, q)
    )
}

#[inline(always)]
fn update_body<L: Lane<N>, const N: usize>(
    sh: &Shape,
    alpha: L,
    keep: L,
    x: &mut [L],
    r: &mut [L],
    p: &[L],
    q: &[L],
) -> f64 {
    let mut acc = [0.0f64; N];
    for (b, m) in rows(sh) {
        let (x, r) = (&mut x[b..b + m], &mut r[b..b + m]);
        let (p, q) = (&p[b..b + m], &q[b..b + m]);
        let mut k = 0;
        while k + N <= m {
            let (x, r) = (L::chunk_mut(x, k), L::chunk_mut(r, k));
            let (p, q) = (L::chunk(p, k), L::chunk(q, k));
            for l in 0..N {
                x[l] = keep * x[l] + alpha * p[l];
                r[l] = r[l] - alpha * q[l];
                acc[l] += (r[l] * r[l]).wide();
            }
            k += N;
        }
        for i in k..m {
            x[i] = keep * x[i] + alpha * p[i];
            r[i] = r[i] - alpha * q[i];
            acc[i - k] += (r[i] * r[i]).wide();
        }
    }
    L::total(acc)
}

/// CG's update, fused with the next reduction's dot products: `x += α p`, `r −= α q`
/// (q = A p), and with a preconditioner (`d`, the inverse diagonal) `z = d ⊙ r`. Returns
/// `[Σ r·z, Σ r·r]` of the new residual (`z = r` without a preconditioner: [`update`]).
pub(crate) fn cg_update(sh: &Shape, alpha: f64, v: CgVectors<'_>) -> [f64; 2] {
    let CgVectors { x, r, p, q, pc } = v;
    let Some(pc) = pc else {
        let rr = update(sh, alpha, 1.0, x, r, p, q);
        return [rr, rr];
    };
    check(sh, &[&*x, &*r, p, q, pc.0, &*pc.1]);
    multiversion!(
        fn cg_update_avx2(
            sh: &Shape,
            alpha: f64,
            x: &mut [f64],
            r: &mut [f64],
            p: &[f64],
            q: &[f64],
            pc: (&[f64], &mut [f64]),
        ) -> [f64; 2] {
            cg_update_body(sh, alpha, x, r, p, q, pc)
        }
    )
}

/// The arrays [`cg_update`] reads and writes.
pub(crate) struct CgVectors<'a> {
    /// The iterate.
    pub(crate) x: &'a mut [f64],
    /// The residual.
    pub(crate) r: &'a mut [f64],
    /// The direction.
    pub(crate) p: &'a [f64],
    /// A p.
    pub(crate) q: &'a [f64],
    /// The inverse diagonal and the preconditioned residual, with a preconditioner.
    pub(crate) pc: Option<(&'a [f64], &'a mut [f64])>,
}

/// [`cg_update`] with a preconditioner `(d, z)`.
#[inline(always)]
fn cg_update_body(
    sh: &Shape,
    alpha: f64,
    x: &mut [f64],
    r: &mut [f64],
    p: &[f64],
    q: &[f64],
    (d, z): (&[f64], &mut [f64]),
) -> [f64; 2] {
    let (mut rz, mut rr) = ([0.0f64; 4], [0.0f64; 4]);
    for (b, m) in rows(sh) {
        let (x, r) = (&mut x[b..b + m], &mut r[b..b + m]);
        let (p, q) = (&p[b..b + m], &q[b..b + m]);
        let (d, z) = (&d[b..b + m], &mut z[b..b + m]);
        let mut k = 0;
        while k + 4 <= m {
            let (x, r) = (f64::chunk_mut(x, k), f64::chunk_mut(r, k));
            let (p, q, d, z) = (
                f64::chunk(p, k),
                f64::chunk(q, k),
                f64::chunk(d, k),
                f64::chunk_mut(z, k),
            );
            for l in 0..4 {
                x[l] += alpha * p[l];
                r[l] -= alpha * q[l];
                z[l] = d[l] * r[l];
                rz[l] += r[l] * z[l];
                rr[l] += r[l] * r[l];
            }
            k += 4;
        }
        for i in k..m {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
            z[i] = d[i] * r[i];
            rz[i - k] += r[i] * z[i];
            rr[i - k] += r[i] * r[i];
        }
    }
    [sum4(rz), sum4(rr)]
}

/// The vectors of pipelined CG (Ghysels and Vanroose, *Hiding global synchronization
/// latency in the preconditioned Conjugate Gradient algorithm*, Parallel Computing 40(7),
/// 2014, Algorithm 4) that its fused update touches. Its preconditioned vectors `u = M r`,
/// `q = M s` and `m = M w` are, for a diagonal M, formed pointwise from `r`, `s` and `w`
/// (the values their recurrences give in exact arithmetic) instead of being stored and
/// carried: only `m` is written, for the next matrix-vector product. Without a
/// preconditioner `u ≡ r`, `q ≡ s`, `m ≡ w` (`pc` is `None`).
pub(crate) struct PipeVectors<'a> {
    /// The iterate.
    pub(crate) x: &'a mut [f64],
    /// The residual r = b − A x (by recurrence).
    pub(crate) r: &'a mut [f64],
    /// w = A u.
    pub(crate) w: &'a mut [f64],
    /// n = A m, computed this iteration.
    pub(crate) n: &'a [f64],
    /// z = A q.
    pub(crate) z: &'a mut [f64],
    /// s = A p.
    pub(crate) s: &'a mut [f64],
    /// The direction.
    pub(crate) p: &'a mut [f64],
    /// With a preconditioner: the inverse diagonal, and m = M w written for the next SpMV.
    pub(crate) pc: Option<(&'a [f64], &'a mut [f64])>,
}

/// One iteration of pipelined CG after its reduction, fused into one pass with the next
/// reduction's dot products:
///
/// ```text
/// z = n + β z   s = w + β s   p = u + β p   (q = M s)
/// x += α p      r −= α s      w −= α z      (u = M r)   m = M w (for the next SpMV)
/// ```
///
/// Returns `[γ, δ, ρ] = [(r, u), (w, u), (r, r)]` of the new vectors.
pub(crate) fn pipe_update(sh: &Shape, alpha: f64, beta: f64, v: PipeVectors<'_>) -> [f64; 3] {
    check(sh, &[v.x, v.r, v.w, v.n, v.z, v.s, v.p]);
    if let Some((d, m)) = &v.pc {
        check(sh, &[d, m]);
    }
    if v.pc.is_none() {
        multiversion!(
            avx2: avx2::pipe_update(sh, alpha, beta, v),
            portable: return pipe_update_body(sh, alpha, beta, v)
        )
    }
    multiversion!(
        fn pipe_update_avx2(sh: &Shape, alpha: f64, beta: f64, v: PipeVectors<'_>) -> [f64; 3] {
            pipe_update_body(sh, alpha, beta, v)
        }
    )
}

#[inline(always)]
fn pipe_update_body(sh: &Shape, alpha: f64, beta: f64, v: PipeVectors<'_>) -> [f64; 3] {
    let PipeVectors {
        x,
        r,
        w,
        n,
        z,
        s,
        p,
        mut pc,
    } = v;
    let (mut g, mut d, mut rr) = ([0.0f64; 4], [0.0f64; 4], [0.0f64; 4]);
    for (b, m) in rows(sh) {
        let rg = b..b + m;
        let (x, r, w) = (&mut x[rg.clone()], &mut r[rg.clone()], &mut w[rg.clone()]);
        let (n, z, s, p) = (
            &n[rg.clone()],
            &mut z[rg.clone()],
            &mut s[rg.clone()],
            &mut p[rg.clone()],
        );
        match &mut pc {
            None => {
                let mut k = 0;
                while k + 4 <= m {
                    let (x, r) = (f64::chunk_mut(x, k), f64::chunk_mut(r, k));
                    let (w, n) = (f64::chunk_mut(w, k), f64::chunk(n, k));
                    let (z, s, p) = (
                        f64::chunk_mut(z, k),
                        f64::chunk_mut(s, k),
                        f64::chunk_mut(p, k),
                    );
                    for l in 0..4 {
                        z[l] = n[l] + beta * z[l];
                        s[l] = w[l] + beta * s[l];
                        p[l] = r[l] + beta * p[l];
                        x[l] += alpha * p[l];
                        r[l] -= alpha * s[l];
                        w[l] -= alpha * z[l];
                        rr[l] += r[l] * r[l];
                        d[l] += w[l] * r[l];
                    }
                    k += 4;
                }
                for i in k..m {
                    z[i] = n[i] + beta * z[i];
                    s[i] = w[i] + beta * s[i];
                    p[i] = r[i] + beta * p[i];
                    x[i] += alpha * p[i];
                    r[i] -= alpha * s[i];
                    w[i] -= alpha * z[i];
                    rr[i - k] += r[i] * r[i];
                    d[i - k] += w[i] * r[i];
                }
            }
            Some((dg, mm)) => {
                let (dg, mm) = (&dg[rg.clone()], &mut mm[rg.clone()]);
                let mut k = 0;
                while k + 4 <= m {
                    let (x, r) = (f64::chunk_mut(x, k), f64::chunk_mut(r, k));
                    let (w, n) = (f64::chunk_mut(w, k), f64::chunk(n, k));
                    let (z, s, p) = (
                        f64::chunk_mut(z, k),
                        f64::chunk_mut(s, k),
                        f64::chunk_mut(p, k),
                    );
                    let (dg, mm) = (f64::chunk(dg, k), f64::chunk_mut(mm, k));
                    for l in 0..4 {
                        z[l] = n[l] + beta * z[l];
                        s[l] = w[l] + beta * s[l];
                        p[l] = dg[l] * r[l] + beta * p[l];
                        x[l] += alpha * p[l];
                        r[l] -= alpha * s[l];
                        w[l] -= alpha * z[l];
                        mm[l] = dg[l] * w[l];
                        let u = dg[l] * r[l];
                        g[l] += r[l] * u;
                        d[l] += w[l] * u;
                        rr[l] += r[l] * r[l];
                    }
                    k += 4;
                }
                for i in k..m {
                    z[i] = n[i] + beta * z[i];
                    s[i] = w[i] + beta * s[i];
                    p[i] = dg[i] * r[i] + beta * p[i];
                    x[i] += alpha * p[i];
                    r[i] -= alpha * s[i];
                    w[i] -= alpha * z[i];
                    mm[i] = dg[i] * w[i];
                    let u = dg[i] * r[i];
                    g[i - k] += r[i] * u;
                    d[i - k] += w[i] * u;
                    rr[i - k] += r[i] * r[i];
                }
            }
        }
    }
    let rr = sum4(rr);
    let gamma = if pc.is_some() { sum4(g) } else { rr };
    [gamma, sum4(d), rr]
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(test)]
mod test;
