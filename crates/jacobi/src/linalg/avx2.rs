//! The hottest kernels in AVX2, over [`Lane`]'s 256-bit form (`crate::lane::avx2`): the
//! compiler, given the portable bodies inside an AVX2 function, vectorised none of them to
//! 256 bits (the operator's loop came out scalar, then as 128-bit pairs with shuffles, 3×
//! slower per point than the Jacobi sweep that does the same loads). Each full chunk of `N`
//! points is one 256-bit operation per step of the portable body, in its order and without
//! fused multiply-adds; a row's last partial chunk goes point by point into the same lanes.
//! So both give the same bits (`avx2_kernels_match_the_portable_ones`).

use super::{ahead, rows, rows_in, stencil_rows, PipeVectors, Region, Shape};
use crate::lane::avx2::{Acc, Avx2};
use crate::lane::Lane;

/// [`super::apply`].
#[target_feature(enable = "avx2")]
pub(super) fn apply<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    p: &[L],
    y: &mut [L],
    region: &Region,
) -> f64 {
    let mut acc = Avx2::here().sums();
    apply_into(sh, diag, p, y, region, &mut acc);
    acc.total()
}

/// [`apply`] adding Σ p·(A p) into the lanes `acc`.
#[target_feature(enable = "avx2")]
#[inline]
fn apply_into<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    p: &[L],
    y: &mut [L],
    region: &Region,
    acc: &mut Acc<L, N>,
) {
    let t = Avx2::here();
    let (sx, pl) = (sh.sx, sh.plane);
    let m = region.x.len();
    let dg = t.splat(diag);
    for z in region.z.clone() {
        for yy in region.y.clone() {
            let b = sh.index(region.x.start, yy, z);
            let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(p, b, m, sx, pl);
            let out = &mut y[b..b + m];
            let mut k = 0;
            while k + N <= m {
                let s = t.ld(xm, k)
                    + t.ld(xp, k)
                    + t.ld(ym, k)
                    + t.ld(yp, k)
                    + t.ld(zm, k)
                    + t.ld(zp, k);
                let cv = t.ld(c, k);
                let v = dg * cv - s;
                t.st(out, k, v);
                acc.add(cv * v);
                k += N;
            }
            if k < m {
                let mut a = acc.lanes();
                for i in k..m {
                    let s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                    let v = diag * c[i] - s;
                    out[i] = v;
                    a[i - k] += (c[i] * v).wide();
                }
                *acc = t.sums_of(a);
            }
        }
    }
}

/// [`super::direction_apply`].
#[target_feature(enable = "avx2")]
pub(super) fn direction_apply<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: L,
    z: &[L],
    beta: L,
    p: &mut [L],
    y: &mut [L],
) -> f64 {
    let nz = sh.n.z;
    let mut acc = Avx2::here().sums();
    for k in 1..=nz {
        direction_planes(sh, ahead(k, nz), z, beta, p);
        apply_into(sh, diag, p, y, &Region::planes(sh.n, k..k + 1), &mut acc);
    }
    acc.total()
}

/// [`super::direction`] on the planes `zs`. Out of line: inlined into
/// [`direction_apply`], it made that kernel 2–3% slower on a 24³ block, in double and in
/// single precision (`benches/linalg_ab.rs`).
#[target_feature(enable = "avx2")]
#[inline(never)]
pub(super) fn direction_planes<L: Lane<N>, const N: usize>(
    sh: &Shape,
    zs: std::ops::Range<usize>,
    z: &[L],
    beta: L,
    p: &mut [L],
) {
    let t = Avx2::here();
    let bv = t.splat(beta);
    for (b, m) in rows_in(sh, zs) {
        let (z, p) = (&z[b..b + m], &mut p[b..b + m]);
        let mut k = 0;
        while k + N <= m {
            t.st(p, k, t.ld(z, k) + bv * t.ld(p, k));
            k += N;
        }
        for i in k..m {
            p[i] = z[i] + beta * p[i];
        }
    }
}

/// [`super::update`].
#[target_feature(enable = "avx2")]
pub(super) fn update<L: Lane<N>, const N: usize>(
    sh: &Shape,
    alpha: L,
    keep: L,
    x: &mut [L],
    r: &mut [L],
    p: &[L],
    q: &[L],
) -> f64 {
    let t = Avx2::here();
    let (av, kv) = (t.splat(alpha), t.splat(keep));
    let mut acc = t.sums();
    for (b, m) in rows(sh) {
        let (x, r) = (&mut x[b..b + m], &mut r[b..b + m]);
        let (p, q) = (&p[b..b + m], &q[b..b + m]);
        let mut k = 0;
        while k + N <= m {
            t.st(x, k, kv * t.ld(x, k) + av * t.ld(p, k));
            let rv = t.ld(r, k) - av * t.ld(q, k);
            t.st(r, k, rv);
            acc.add(rv * rv);
            k += N;
        }
        if k < m {
            let mut a = acc.lanes();
            for i in k..m {
                x[i] = keep * x[i] + alpha * p[i];
                r[i] = r[i] - alpha * q[i];
                a[i - k] += (r[i] * r[i]).wide();
            }
            acc = t.sums_of(a);
        }
    }
    acc.total()
}

/// [`super::residual`]: computed in double precision, four points a step, stored as `L`.
#[target_feature(enable = "avx2")]
pub(super) fn residual<L: Lane<N>, const N: usize>(
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [L],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    let t = Avx2::here();
    // A copy of the loop without the comparison with `rec` (the one single precision
    // runs), and one with it.
    match rec {
        None => residual_rows(t, sh, diag, u, rhs, r, None),
        Some(rec) => residual_rows(t, sh, diag, u, rhs, r, Some(rec)),
    }
}

/// [`residual`]'s loop.
#[inline(always)]
fn residual_rows<L: Lane<N>, const N: usize>(
    t: Avx2,
    sh: &Shape,
    diag: f64,
    u: &[f64],
    rhs: Option<&[f64]>,
    r: &mut [L],
    rec: Option<&[f64]>,
) -> [f64; 2] {
    let (sx, pl) = (sh.sx, sh.plane);
    let dg = t.splat(diag);
    let (mut rr, mut gap) = (t.sums::<f64, 4>(), t.sums::<f64, 4>());
    for (b, m) in rows(sh) {
        let [c, xm, xp, ym, yp, zm, zp] = stencil_rows(u, b, m, sx, pl);
        let f = rhs.map(|f| &f[b..b + m]);
        let old = rec.map(|o| &o[b..b + m]);
        let out = &mut r[b..b + m];
        let mut k = 0;
        while k + 4 <= m {
            let mut s =
                t.ld(xm, k) + t.ld(xp, k) + t.ld(ym, k) + t.ld(yp, k) + t.ld(zm, k) + t.ld(zp, k);
            if let Some(f) = f {
                s = s + t.ld(f, k);
            }
            let v = s - dg * t.ld(c, k);
            t.st_narrow(out, k, v);
            rr.add(v * v);
            if let Some(o) = old {
                let d = v - t.ld(o, k);
                gap.add(d * d);
            }
            k += 4;
        }
        if k < m {
            let (mut a, mut g) = (rr.lanes(), gap.lanes());
            for i in k..m {
                let mut s = xm[i] + xp[i] + ym[i] + yp[i] + zm[i] + zp[i];
                if let Some(f) = f {
                    s += f[i];
                }
                let v = s - diag * c[i];
                out[i] = L::narrow(v);
                a[i - k] += v * v;
                if let Some(o) = old {
                    let d = v - o[i];
                    g[i - k] += d * d;
                }
            }
            (rr, gap) = (t.sums_of(a), t.sums_of(g));
        }
    }
    [rr.total(), gap.total()]
}

/// [`super::pipe_update`] without a preconditioner.
#[target_feature(enable = "avx2")]
pub(super) fn pipe_update(sh: &Shape, alpha: f64, beta: f64, v: PipeVectors<'_>) -> [f64; 3] {
    let PipeVectors {
        x,
        r,
        w,
        n,
        z,
        s,
        p,
        pc,
    } = v;
    debug_assert!(pc.is_none());
    let t = Avx2::here();
    let (av, bv) = (t.splat(alpha), t.splat(beta));
    let (mut rr, mut d) = (t.sums::<f64, 4>(), t.sums::<f64, 4>());
    for (b, m) in rows(sh) {
        let rg = b..b + m;
        let (x, r, w) = (&mut x[rg.clone()], &mut r[rg.clone()], &mut w[rg.clone()]);
        let (n, z, s, p) = (
            &n[rg.clone()],
            &mut z[rg.clone()],
            &mut s[rg.clone()],
            &mut p[rg.clone()],
        );
        let mut k = 0;
        while k + 4 <= m {
            let zv = t.ld(n, k) + bv * t.ld(z, k);
            let sv = t.ld(w, k) + bv * t.ld(s, k);
            let rv = t.ld(r, k);
            let pv = rv + bv * t.ld(p, k);
            t.st(z, k, zv);
            t.st(s, k, sv);
            t.st(p, k, pv);
            t.st(x, k, t.ld(x, k) + av * pv);
            let rv = rv - av * sv;
            let wv = t.ld(w, k) - av * zv;
            t.st(r, k, rv);
            t.st(w, k, wv);
            rr.add(rv * rv);
            d.add(wv * rv);
            k += 4;
        }
        if k < m {
            let (mut a, mut e) = (rr.lanes(), d.lanes());
            for i in k..m {
                z[i] = n[i] + beta * z[i];
                s[i] = w[i] + beta * s[i];
                p[i] = r[i] + beta * p[i];
                x[i] += alpha * p[i];
                r[i] -= alpha * s[i];
                w[i] -= alpha * z[i];
                a[i - k] += r[i] * r[i];
                e[i - k] += w[i] * r[i];
            }
            (rr, d) = (t.sums_of(a), t.sums_of(e));
        }
    }
    let rr = rr.total();
    [rr, d.total(), rr]
}
