//! Restarted GMRES(m) (Saad and Schultz, SIAM J. Sci. Stat. Comput. 7(3), 1986; PETSc's
//! KSPGMRES), right-preconditioned: the Arnoldi basis is of `A M⁻¹`, so the least-squares
//! residual it minimises is that of `b − A x` itself, the quantity the run stops on.
//!
//! **Orthogonalisation**: classical Gram–Schmidt, as PETSc's default
//! (`KSPGMRESClassicalGramSchmidtOrthogonalization`, no refinement): step j's j + 1
//! projections `(v_i, w)` and `‖w‖²` are ONE all-reduce of j + 2 values, where modified
//! Gram–Schmidt needs j + 2 reductions one after the other, each waiting for the last. The
//! new norm follows by Pythagoras, `h²_{j+1,j} = ‖w‖² − Σ h²_ij`; where that difference
//! cancels (below 10⁻⁶ ‖w‖², so that fewer than ten digits of it would be left) it is measured
//! again on the orthogonalised w, a second reduction. Classical Gram–Schmidt loses
//! orthogonality faster than the modified form on ill-conditioned bases; the restart bounds
//! the basis at m vectors, and every restart recomputes the true residual, which decides.
//!
//! **Stopping**: each Arnoldi step is an iteration and gives the residual norm of the
//! minimiser, `|g_{j+1}|`, without forming it. A step whose value meets the tolerance ends
//! the cycle: x is updated and its true residual `b − A x` computed (the restart's residual
//! anyway), which certifies the claim or refutes it (the cycle then restarts from it).
//!
//! **Breakdown**: `h_{j+1,j} = 0` with the rotated diagonal non-zero is the lucky breakdown
//! (the Krylov space holds the solution: the estimate is 0, the true residual decides). A
//! zero rotated diagonal (`A M⁻¹` singular on the Krylov space: the least-squares problem has
//! no unique minimiser) or any NaN stops the run with [`StopReason::Breakdown`], x updated
//! with the steps before it.
//!
//! No reduction here can be non-blocking: each step's projections are needed before the next
//! basis vector exists (the pipelined p(l)-GMRES of Ghrysels et al. would be needed).

use super::vecs::{axpy, dot, scale, scale_into};
use super::{Krylov, Operator};
use crate::precond::Precond;
use crate::record::{Certification, StopReason};
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, Sync};

/// Apply the cycle's `j` Givens rotations to Hessenberg column `col` (step j's), then make
/// and apply the one that zeroes `col[j + 1]`, rotating `g` too. `false`: the rotated diagonal
/// is 0 (no rotation exists).
fn rotate(col: &mut [f64], j: usize, cs: &mut [f64], sn: &mut [f64], g: &mut [f64]) -> bool {
    for i in 0..j {
        let t = cs[i] * col[i] + sn[i] * col[i + 1];
        col[i + 1] = -sn[i] * col[i] + cs[i] * col[i + 1];
        col[i] = t;
    }
    let d = col[j].hypot(col[j + 1]);
    if d == 0.0 {
        return false;
    }
    cs[j] = col[j] / d;
    sn[j] = col[j + 1] / d;
    col[j] = d;
    col[j + 1] = 0.0;
    g[j + 1] = -sn[j] * g[j];
    g[j] *= cs[j];
    true
}

/// `y` of `R_k y = g_k`: R the rotated Hessenberg matrix's upper triangle (column by column,
/// `m + 1` rows), solved backwards.
fn back_substitute(h: &[f64], m: usize, k: usize, g: &[f64], y: &mut [f64]) {
    for i in (0..k).rev() {
        let mut s = g[i];
        for (l, yl) in y.iter().enumerate().take(k).skip(i + 1) {
            s -= h[l * (m + 1) + i] * yl;
        }
        y[i] = s / h[i * (m + 1) + i];
    }
}

impl<O: Operator> Krylov<'_, O> {
    /// GMRES(m). Returns why it stopped and the relative true residual of the final iterate.
    pub(super) fn gmres<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        m: usize,
        pc: &mut Precond,
    ) -> Result<(StopReason, f64), Error> {
        let runs = self.op.runs();
        let mut r = self.op.zeros();
        let mut scratch = self.op.zeros();
        let mut z = self.op.zeros();
        let mut v: Vec<O::Vector> = (0..=m).map(|_| self.op.zeros()).collect();
        // H column by column, m + 1 rows; the Givens rotations; the rotated right-hand side.
        let mut h = vec![0.0f64; (m + 1) * m];
        let (mut cs, mut sn) = (vec![0.0f64; m], vec![0.0f64; m]);
        let mut g = vec![0.0f64; m + 1];
        let mut y = vec![0.0f64; m];
        let mut buf = vec![0.0f64; m + 2];
        let rr = self.initial(ctx, chans, &mut r, &mut scratch)?;
        let value = self.measure(rr);
        let mut known = Some((0, value));
        self.observe(value);
        let mut beta = rr.sqrt();
        let stop = 'run: {
            if self.met(value) {
                break 'run StopReason::Criterion;
            }
            loop {
                if !beta.is_finite() {
                    break 'run self.broke(format!("‖r‖ = {beta:.3e}"));
                }
                scale_into(
                    &runs,
                    1.0 / beta,
                    self.op.data(&r),
                    self.op.data_mut(&mut v[0]),
                );
                g.fill(0.0);
                g[0] = beta;
                let mut k = 0; // steps of this cycle kept
                let mut claim = false;
                let mut broke: Option<String> = None;
                while k < m {
                    let j = k;
                    let (basis, rest) = v.split_at_mut(j + 1);
                    let w = &mut rest[0];
                    self.arnoldi(
                        ctx,
                        chans,
                        (basis, w),
                        (&mut z, &mut buf[..j + 2]),
                        pc,
                        &runs,
                    )?;
                    let ww = buf[j + 1];
                    let mut hn2 = ww - buf[..=j].iter().map(|h| h * h).sum::<f64>();
                    if hn2.is_nan() || hn2 <= 1e-6 * ww {
                        let t = crate::clock::Instant::now();
                        let local = dot(&runs, self.op.data(w), self.op.data(w));
                        self.computed(t);
                        [hn2] = self.all_reduce(ctx, [local])?;
                    }
                    let hn = hn2.max(0.0).sqrt();
                    let col = &mut h[j * (m + 1)..(j + 1) * (m + 1)];
                    col[..=j].copy_from_slice(&buf[..=j]);
                    col[j + 1] = hn;
                    self.it += 1;
                    if col[..=j + 1].iter().any(|c| !c.is_finite()) {
                        broke = Some("a NaN in the Arnoldi step".into());
                        break;
                    }
                    if !rotate(col, j, &mut cs, &mut sn, &mut g) {
                        broke = Some(
                            "the rotated Hessenberg diagonal = 0 (A M⁻¹ is singular on the \
                             Krylov space)"
                                .into(),
                        );
                        break;
                    }
                    k += 1;
                    let value = self.measure(g[j + 1] * g[j + 1]);
                    self.observe(value);
                    if self.met(value) || hn == 0.0 {
                        claim = true;
                        break;
                    }
                    let t = crate::clock::Instant::now();
                    scale(&runs, 1.0 / hn, self.op.data_mut(w));
                    self.computed(t);
                    if self.it >= self.cfg.max_iters {
                        break;
                    }
                }
                // x += M⁻¹ V_k y, R_k y = g_k.
                if k > 0 {
                    let t = crate::clock::Instant::now();
                    back_substitute(&h, m, k, &g, &mut y);
                    self.add_combination(&v[..k], &y[..k], (&mut scratch, &mut z), pc, &runs);
                    self.computed(t);
                }
                // The restart's residual: the true one, which certifies a claim.
                self.checks += 1;
                let [t, _] = self.true_residual(ctx, chans, &mut r, None)?;
                let rel = self.measure(t);
                known = Some((self.it, rel));
                if claim {
                    let accepted = self.met(rel);
                    self.certifications.push(Certification {
                        iteration: self.it,
                        reported: self.reported,
                        true_residual: rel,
                        accepted,
                    });
                    if accepted || !self.cfg.confirm {
                        break 'run StopReason::Criterion;
                    }
                }
                if let Some(what) = broke {
                    break 'run self.broke(what);
                }
                if self.met(rel) {
                    break 'run StopReason::Criterion;
                }
                if self.it >= self.cfg.max_iters {
                    break 'run StopReason::MaxIters;
                }
                beta = t.sqrt();
            }
        };
        let t = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, t))
    }

    /// Arnoldi step j (`basis` holds v_0..v_j): `w = A M⁻¹ v_j`, the projections `(v_i, w)`
    /// and `‖w‖²` into `buf` (j + 2 values, one reduction), then w orthogonalised against the
    /// basis (classical Gram–Schmidt); `z` is scratch for `M⁻¹ v_j`.
    fn arnoldi<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        (basis, w): (&mut [O::Vector], &mut O::Vector),
        (z, buf): (&mut O::Vector, &mut [f64]),
        pc: &mut Precond,
        runs: &[(usize, usize)],
    ) -> Result<(), Error> {
        let j = basis.len() - 1;
        if pc.is_none() {
            self.spmv(chans, &mut basis[j], w, false, &mut || Ok(()))?;
        } else {
            let t = crate::clock::Instant::now();
            pc.apply(self.op.data(&basis[j]), self.op.data_mut(z));
            self.computed(t);
            self.spmv(chans, z, w, false, &mut || Ok(()))?;
        }
        let t = crate::clock::Instant::now();
        for (i, b) in basis.iter().enumerate() {
            buf[i] = dot(runs, self.op.data(b), self.op.data(w));
        }
        buf[j + 1] = dot(runs, self.op.data(w), self.op.data(w));
        self.computed(t);
        self.reduce_slice(ctx, buf)?;
        let t = crate::clock::Instant::now();
        for (i, b) in basis.iter().enumerate() {
            axpy(runs, -buf[i], self.op.data(b), self.op.data_mut(w));
        }
        self.computed(t);
        Ok(())
    }

    /// `x += M⁻¹ Σ_i y_i v_i`, the combination formed in `u` (and `M⁻¹` of it in `z`).
    fn add_combination(
        &mut self,
        v: &[O::Vector],
        y: &[f64],
        (u, z): (&mut O::Vector, &mut O::Vector),
        pc: &mut Precond,
        runs: &[(usize, usize)],
    ) {
        scale_into(runs, y[0], self.op.data(&v[0]), self.op.data_mut(u));
        for (vi, yi) in v.iter().zip(y).skip(1) {
            axpy(runs, *yi, self.op.data(vi), self.op.data_mut(u));
        }
        let step = if pc.is_none() {
            &*u
        } else {
            pc.apply(self.op.data(u), self.op.data_mut(z));
            &*z
        };
        axpy(runs, 1.0, self.op.data(step), self.op.data_mut(&mut self.x));
    }

    /// One of the iteration's blocking all-reduces (sum) of `v.len()` values, counted in
    /// `reductions`, its whole flight waited.
    fn reduce_slice<C: Context>(&mut self, ctx: &mut C, v: &mut [f64]) -> Result<(), Error> {
        let t = crate::clock::Instant::now();
        ctx.all_reduce(v, chan_core::ReduceOp::Sum)?;
        let took = t.elapsed();
        self.parts.reduced(t);
        self.flight += took;
        self.waiting += took;
        self.reductions += 1;
        Ok(())
    }
}
