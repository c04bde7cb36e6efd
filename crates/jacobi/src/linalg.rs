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
//! Every kernel works row by row over the owned points, with four accumulator lanes summed
//! in a fixed order. The operator, the residual and the vector updates ([`apply`],
//! [`residual`], [`direction`], [`cg_update`], [`pipe_update`]) go four points at a time (then
//! the row's tail), each with one portable body compiled twice: as is, and inside a
//! `#[target_feature(enable = "avx2")]` function chosen at run time, where the compiler
//! vectorises the four lanes into 256-bit operations. Neither contracts into fused
//! multiply-adds, so both give the same bits. The preconditioner's scaling and the dot
//! products ([`scale`], [`dot`], [`dot3`]) are compiled once, for the build's target, their
//! lanes indexed point by point.

// The four-lane loops index a dozen arrays and the lane accumulators by the same counter.
#![allow(clippy::needless_range_loop)]

use crate::field::{pack_layer, unpack_layer};
use crate::geometry::Face;
use crate::halo::Halo;
use crate::kernel::{Grid, Region, Shape};

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
    fn pack(&self, face: Face, buf: &mut [f64]) {
        pack_layer(&self.shape, face, &self.v, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        unpack_layer(&self.shape, face, &mut self.v, data);
    }
}

/// `(first index, length)` of every row of owned points.
#[inline(always)]
fn rows(sh: &Shape) -> impl Iterator<Item = (usize, usize)> + '_ {
    let n = sh.n;
    (1..=n.z).flat_map(move |z| (1..=n.y).map(move |y| (sh.index(1, y, z), n.x)))
}

/// Σ of four lanes in a fixed order.
#[inline(always)]
fn lanes(a: [f64; 4]) -> f64 {
    (a[0] + a[1]) + (a[2] + a[3])
}

/// Runs `$body` (a call of an `#[inline(always)]` kernel body) compiled with AVX2 when the
/// CPU has it, as written otherwise.
macro_rules! multiversion {
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

fn check(sh: &Shape, arrays: &[&[f64]]) {
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
pub(crate) fn apply(sh: &Shape, diag: f64, p: &[f64], y: &mut [f64], region: &Region) -> f64 {
    check(sh, &[p, y]);
    check_region(sh, region);
    multiversion!(
        fn apply_avx2(sh: &Shape, diag: f64, p: &[f64], y: &mut [f64], region: &Region) -> f64 {
            apply_body(sh, diag, p, y, region)
        }
    )
}

#[inline(always)]
fn apply_body(sh: &Shape, diag: f64, p: &[f64], y: &mut [f64], region: &Region) -> f64 {
    let (sx, pl) = (sh.sx, sh.plane);
    let m = region.x.len();
    let mut acc = [0.0f64; 4];
    for z in region.z.clone() {
        for yy in region.y.clone() {
            let b = sh.index(region.x.start, yy, z);
            let c = &p[b..b + m];
            let xm = &p[b - 1..b - 1 + m];
            let xp = &p[b + 1..b + 1 + m];
            let ym = &p[b - sx..b - sx + m];
            let yp = &p[b + sx..b + sx + m];
            let zm = &p[b - pl..b - pl + m];
            let zp = &p[b + pl..b + pl + m];
            let out = &mut y[b..b + m];
            let mut k = 0;
            while k + 4 <= m {
                for l in 0..4 {
                    let i = k + l;
                    let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                    let v = diag * c[i] - s;
                    out[i] = v;
                    acc[l] += c[i] * v;
                }
                k += 4;
            }
            for i in k..m {
                let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                let v = diag * c[i] - s;
                out[i] = v;
                acc[i - k] += c[i] * v;
            }
        }
    }
    lanes(acc)
}

/// The residual of the iterate `u` (halo holding the Dirichlet values and the neighbours'
/// values): `r = b − A u = (h²f + Σ neighbours) − diag·u` at every owned point, written into
/// `r`, and `rec`, when given, compared with it: returns `[Σ r², Σ (r − rec)²]`.
pub(crate) fn residual(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [f64],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    check(sh, &[u, r]);
    check(sh, &[rhs.unwrap_or(u), rec.unwrap_or(u)]);
    multiversion!(
        fn residual_avx2(
            sh: &Shape,
            diag: f64,
            u: &[f64],
            rhs: Option<&[f64]>,
            r: &mut [f64],
            rec: Option<&[f64]>,
        ) -> [f64; 2] {
            residual_body(sh, diag, u, rhs, r, rec)
        }
    )
}

#[inline(always)]
fn residual_body(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [f64],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    let (sx, pl) = (sh.sx, sh.plane);
    let (mut rr, mut gap) = ([0.0f64; 4], [0.0f64; 4]);
    for (b, m) in rows(sh) {
        let c = &u[b..b + m];
        let xm = &u[b - 1..b - 1 + m];
        let xp = &u[b + 1..b + 1 + m];
        let ym = &u[b - sx..b - sx + m];
        let yp = &u[b + sx..b + sx + m];
        let zm = &u[b - pl..b - pl + m];
        let zp = &u[b + pl..b + pl + m];
        let f = rhs.map(|f| &f[b..b + m]);
        let old = rec.map(|o| &o[b..b + m]);
        let out = &mut r[b..b + m];
        for i in 0..m {
            let mut s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
            if let Some(f) = f {
                s += f[i];
            }
            let v = s - diag * c[i];
            out[i] = v;
            rr[i % 4] += v * v;
            if let Some(o) = old {
                let d = v - o[i];
                gap[i % 4] += d * d;
            }
        }
    }
    [lanes(rr), lanes(gap)]
}

/// `dst = d ⊙ src` at every owned point (the Jacobi preconditioner, `d` the inverse
/// diagonal); returns Σ src·dst.
pub(crate) fn scale(sh: &Shape, d: &[f64], src: &[f64], dst: &mut [f64]) -> f64 {
    check(sh, &[d, src, dst]);
    let mut acc = [0.0f64; 4];
    for (b, m) in rows(sh) {
        for i in b..b + m {
            dst[i] = d[i] * src[i];
            acc[(i - b) % 4] += src[i] * dst[i];
        }
    }
    lanes(acc)
}

/// Σ a·b over the owned points.
pub(crate) fn dot(sh: &Shape, a: &[f64], b: &[f64]) -> f64 {
    check(sh, &[a, b]);
    let mut acc = [0.0f64; 4];
    for (s, m) in rows(sh) {
        for i in s..s + m {
            acc[(i - s) % 4] += a[i] * b[i];
        }
    }
    lanes(acc)
}

/// Σ a·d·b over the owned points (a dot product in the metric of a diagonal).
pub(crate) fn dot3(sh: &Shape, a: &[f64], d: &[f64], b: &[f64]) -> f64 {
    check(sh, &[a, d, b]);
    let mut acc = [0.0f64; 4];
    for (s, m) in rows(sh) {
        for i in s..s + m {
            acc[(i - s) % 4] += a[i] * (d[i] * b[i]);
        }
    }
    lanes(acc)
}

/// `p = z + β p` at every owned point (CG's new direction; `z` the preconditioned residual).
pub(crate) fn direction(sh: &Shape, z: &[f64], beta: f64, p: &mut [f64]) {
    check(sh, &[z, p]);
    multiversion!(
        fn direction_avx2(sh: &Shape, z: &[f64], beta: f64, p: &mut [f64]) -> () {
            for (b, m) in rows(sh) {
                for (pi, zi) in p[b..b + m].iter_mut().zip(&z[b..b + m]) {
                    *pi = zi + beta * *pi;
                }
            }
        }
    )
}

/// CG's update, fused with the next reduction's dot products: `x += α p`, `r −= α q`
/// (q = A p), and with a preconditioner (`d`, the inverse diagonal) `z = d ⊙ r`. Returns
/// `[Σ r·z, Σ r·r]` of the new residual (`z = r` without a preconditioner).
pub(crate) fn cg_update(sh: &Shape, alpha: f64, v: CgVectors<'_>) -> [f64; 2] {
    check(sh, &[v.x, v.r, v.p, v.q]);
    if let Some((d, z)) = &v.pc {
        check(sh, &[d, z]);
    }
    multiversion!(
        fn cg_update_avx2(sh: &Shape, alpha: f64, v: CgVectors<'_>) -> [f64; 2] {
            cg_update_body(sh, alpha, v)
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

#[inline(always)]
fn cg_update_body(sh: &Shape, alpha: f64, v: CgVectors<'_>) -> [f64; 2] {
    let CgVectors { x, r, p, q, mut pc } = v;
    let (mut rz, mut rr) = ([0.0f64; 4], [0.0f64; 4]);
    for (b, m) in rows(sh) {
        let (x, r) = (&mut x[b..b + m], &mut r[b..b + m]);
        let (p, q) = (&p[b..b + m], &q[b..b + m]);
        match &mut pc {
            None => {
                let mut k = 0;
                while k + 4 <= m {
                    for l in 0..4 {
                        let i = k + l;
                        x[i] += alpha * p[i];
                        r[i] -= alpha * q[i];
                        rr[l] += r[i] * r[i];
                    }
                    k += 4;
                }
                for i in k..m {
                    x[i] += alpha * p[i];
                    r[i] -= alpha * q[i];
                    rr[i - k] += r[i] * r[i];
                }
            }
            Some((d, z)) => {
                let (d, z) = (&d[b..b + m], &mut z[b..b + m]);
                let mut k = 0;
                while k + 4 <= m {
                    for l in 0..4 {
                        let i = k + l;
                        x[i] += alpha * p[i];
                        r[i] -= alpha * q[i];
                        z[i] = d[i] * r[i];
                        rz[l] += r[i] * z[i];
                        rr[l] += r[i] * r[i];
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
        }
    }
    let rr = lanes(rr);
    [if pc.is_some() { lanes(rz) } else { rr }, rr]
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
                    for l in 0..4 {
                        let i = k + l;
                        z[i] = n[i] + beta * z[i];
                        s[i] = w[i] + beta * s[i];
                        p[i] = r[i] + beta * p[i];
                        x[i] += alpha * p[i];
                        r[i] -= alpha * s[i];
                        w[i] -= alpha * z[i];
                        rr[l] += r[i] * r[i];
                        d[l] += w[i] * r[i];
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
                    for l in 0..4 {
                        let i = k + l;
                        z[i] = n[i] + beta * z[i];
                        s[i] = w[i] + beta * s[i];
                        p[i] = dg[i] * r[i] + beta * p[i];
                        x[i] += alpha * p[i];
                        r[i] -= alpha * s[i];
                        w[i] -= alpha * z[i];
                        mm[i] = dg[i] * w[i];
                        let u = dg[i] * r[i];
                        g[l] += r[i] * u;
                        d[l] += w[i] * u;
                        rr[l] += r[i] * r[i];
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
    let rr = lanes(rr);
    let gamma = if pc.is_some() { lanes(g) } else { rr };
    [gamma, lanes(d), rr]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Dims;
    use crate::tests::common::noise;

    /// The operator against the obvious loop, on blocks whose rows have tails.
    #[test]
    fn apply_is_diag_minus_adjacency() {
        for n in [Dims::new(1, 1, 1), Dims::new(7, 3, 2), Dims::new(9, 5, 6)] {
            let sh = Shape::new(n);
            let p = noise(sh.len, 3);
            let mut y = vec![0.0; sh.len];
            let pap = apply(&sh, 6.0, &p, &mut y, &Region::all(n));
            let mut want = 0.0;
            for z in 1..=n.z {
                for yy in 1..=n.y {
                    for x in 1..=n.x {
                        let i = sh.index(x, yy, z);
                        let s = p[i - 1]
                            + p[i + 1]
                            + p[i - sh.sx]
                            + p[i + sh.sx]
                            + p[i - sh.plane]
                            + p[i + sh.plane];
                        assert_eq!(y[i], 6.0 * p[i] - s);
                        want += p[i] * y[i];
                    }
                }
            }
            assert!((pap - want).abs() <= 1e-12 * want.abs().max(1.0));
            // b − A u with no source: the negated operator.
            let mut r = vec![0.0; sh.len];
            let [rr, gap] = residual(&sh, 6.0, &p, None, &mut r, Some(&y));
            for (a, b) in r.iter().zip(&y) {
                assert!(*a == -*b || (*a == 0.0 && *b == 0.0));
            }
            assert!((gap - 4.0 * rr).abs() <= 1e-12 * rr.max(1.0));
        }
    }
}
