//! Preconditioned conjugate gradients, with and without the overlapped product.

use super::{breaks, Krylov, Operator};
use crate::clock::Instant;
use crate::config::Pc;
use crate::precond::Precond;
use crate::record::StopReason;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, Sync};

impl<O: Operator> Krylov<'_, O> {
    /// Preconditioned CG (`overlap`: cg-overlap). Returns why it stopped and the relative true
    /// residual of the final iterate.
    pub(super) fn cg<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        overlap: bool,
        mut block: Option<Precond>,
    ) -> Result<(StopReason, f64), Error> {
        let diag = self.pc == Pc::Jacobi;
        // z = M⁻¹ r held apart from r: Jacobi's, fused into the update, or block Jacobi's.
        let pc = diag || block.is_some();
        let mut r = self.op.zeros();
        let mut p = self.op.zeros();
        let mut q = self.op.zeros();
        let mut scratch = self.op.zeros();
        // M = D⁻¹: the inverse diagonal, stored, and z = M r.
        let (d, mut z) = if diag {
            (self.op.inv_diag(), self.op.zeros())
        } else {
            (self.op.zeros(), self.op.zeros())
        };
        let rr = self.initial(ctx, chans, &mut r, &mut scratch)?;
        let mut precondition = |op: &O, r: &O::Vector, z: &mut O::Vector| -> f64 {
            if let Some(b) = block.as_mut() {
                b.apply(op.data(r), op.data_mut(z));
                op.dot(r, z)
            } else if diag {
                op.scale(&d, r, z)
            } else {
                op.dot(r, r)
            }
        };
        let mut rz = rr;
        if pc {
            let t = Instant::now();
            let rz_local = precondition(&self.op, &r, &mut z);
            self.computed(t);
            [rz] = self.reduce_aside(ctx, [rz_local])?;
        }
        let mut known = None; // (iteration, relative true residual) of the last check
        let value = self.measure(rr);
        self.observe(value);
        let stop = 'run: {
            if self.met(value) {
                break 'run StopReason::Criterion; // x₀ solves the system
            }
            if breaks(rz) {
                break 'run self.broke(format!("r·z = {rz:.3e} ≤ 0 (M is not positive definite)"));
            }
            {
                let zs = if pc { &z } else { &r };
                self.op.direction(zs, 0.0, &mut p);
            }
            loop {
                let pq_local = self.spmv(chans, &mut p, &mut q, overlap, &mut || Ok(()))?;
                let [pq] = self.all_reduce(ctx, [pq_local])?;
                if breaks(pq) {
                    break 'run self.broke(format!(
                        "p·Ap = {pq:.3e} ≤ 0 (the operator is not positive definite)"
                    ));
                }
                let alpha = rz / pq;
                let t = Instant::now();
                let mut local = self.op.cg_update(
                    alpha,
                    &mut self.x,
                    &mut r,
                    (&p, &q),
                    diag.then_some((&d, &mut z)),
                );
                if pc && !diag {
                    local[0] = precondition(&self.op, &r, &mut z);
                }
                self.computed(t);
                self.it += 1;
                let [rz_local, rr] = self.all_reduce(ctx, local)?;
                let mut rz_new = if pc { rz_local } else { rr };
                let value = self.measure(rr);
                self.observe(value);
                let claim = self.met(value);
                if claim && !self.cfg.confirm {
                    break 'run StopReason::Criterion;
                }
                if claim || self.it.is_multiple_of(self.cfg.check_every) {
                    let (t, replace) = if claim {
                        let (t, ok) = self.certify(ctx, chans, &mut scratch, &r)?;
                        if ok {
                            known = Some((self.it, t));
                            break 'run StopReason::Criterion;
                        }
                        (t, true)
                    } else {
                        self.check(ctx, chans, &mut scratch, &r)?
                    };
                    known = Some((self.it, t));
                    if replace {
                        // r ← b − A x (in scratch); z ← M r.
                        std::mem::swap(&mut r, &mut scratch);
                        self.replacements += 1;
                        let t = Instant::now();
                        let rz_local = precondition(&self.op, &r, &mut z);
                        self.computed(t);
                        let t = Instant::now();
                        let rr_local = self.op.dot(&r, &r);
                        self.computed(t);
                        let [a, b] = self.reduce_aside(ctx, [rz_local, rr_local])?;
                        rz_new = if pc { a } else { b };
                        self.reported = Some(self.measure(b));
                    }
                }
                if self.it >= self.cfg.max_iters {
                    break 'run StopReason::MaxIters;
                }
                if breaks(rz_new) {
                    break 'run self.broke(format!(
                        "r·z = {rz_new:.3e} ≤ 0 (M is not positive definite)"
                    ));
                }
                let beta = rz_new / rz;
                rz = rz_new;
                let zs = if pc { &z } else { &r };
                let t = Instant::now();
                self.op.direction(zs, beta, &mut p);
                self.computed(t);
            }
        };
        let t = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, t))
    }
}
