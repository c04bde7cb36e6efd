//! Pipelined CG (Ghysels and Vanroose, Algorithm 4) with its residual replacement.

use super::{breaks, Krylov, Operator, Pending};
use crate::clock::Instant;
use crate::config::Pc;
use crate::record::StopReason;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, Sync};
use std::time::Duration;

impl<O: Operator> Krylov<'_, O> {
    /// Pipelined CG with one non-blocking reduction per iteration. Returns why it stopped and
    /// the relative true residual of the final iterate.
    pub(super) fn pipecg<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        red: &mut C::Reduction,
    ) -> Result<(StopReason, f64), Error> {
        let pc = self.pc == Pc::Jacobi;
        let op = &self.op;
        let mut v = Pipe {
            r: op.zeros(),
            w: op.zeros(),
            n: op.zeros(),
            z: op.zeros(),
            s: op.zeros(),
            p: op.zeros(),
            pc: pc.then(|| PipeM {
                d: op.inv_diag(),
                m: op.zeros(),
            }),
        };
        let mut scratch = op.zeros();
        self.initial(ctx, chans, &mut v.r, &mut scratch)?;
        // u = M r, w = A u, m = M w; the first reduction's values.
        let mut local = self.refresh(chans, &mut v, false)?;
        let mut known = None;
        let mut refuted_at: Option<u64> = None; // the iteration whose claim was refuted last
        let (mut gamma_old, mut alpha_old) = (0.0f64, 0.0f64);
        let mut first = true; // β = 0: no previous direction
        let stop = loop {
            // The reduction of (r,u), (w,u), (r,r) flies while n = A m is computed.
            let t = Instant::now();
            red.start(&local)?;
            self.parts.reduced(t);
            let mut pending = Pending {
                red: &mut *red,
                started: t,
                result: None,
                seen: None,
                waited: Duration::ZERO,
            };
            {
                let Pipe { w, n, pc, .. } = &mut v;
                let src = match pc {
                    Some(pm) => &mut pm.m,
                    None => w,
                };
                self.spmv(chans, src, n, true, &mut || pending.poll())?;
            }
            let t = Instant::now();
            let g = match pending.result {
                Some(g) => g,
                None => {
                    let g = pending.red.wait()?;
                    [g[0], g[1], g[2]]
                }
            };
            let seen = pending.seen.unwrap_or_else(Instant::now);
            let waited = pending.waited + t.elapsed();
            self.flight += seen.duration_since(pending.started);
            self.waiting += waited;
            self.parts.reduced(t);
            self.reductions += 1;
            let [gamma, delta, rr] = g;
            let value = self.measure(rr);
            self.observe(value);
            // A claim at the iteration whose claim was just refuted is the replaced residual
            // summed in another order (the non-blocking reduction's, not the certificate's):
            // within rounding of tol, it would be refuted again, forever. Iterate on.
            if self.met(value) && refuted_at != Some(self.it) {
                if !self.cfg.confirm {
                    break StopReason::Criterion;
                }
                let (t, ok) = self.certify(ctx, chans, &mut scratch, &v.r)?;
                known = Some((self.it, t));
                if ok {
                    break StopReason::Criterion;
                }
                if self.it >= self.cfg.max_iters {
                    break StopReason::MaxIters;
                }
                // The claim was wrong: replace and start this iteration again.
                refuted_at = Some(self.it);
                local = self.replace(chans, &mut v, &mut scratch)?;
                continue;
            }
            if self.it >= self.cfg.max_iters {
                break StopReason::MaxIters;
            }
            if breaks(gamma) {
                break self.broke(format!(
                    "γ = (r, M r) = {gamma:.3e} ≤ 0 (M is not positive definite)"
                ));
            }
            let (alpha, beta) = if first {
                (gamma / delta, 0.0)
            } else {
                let beta = gamma / gamma_old;
                (gamma / (delta - beta * gamma / alpha_old), beta)
            };
            let curvature = gamma / alpha;
            if breaks(curvature) || !alpha.is_finite() {
                break self.broke(format!(
                    "p·Ap = δ − βγ/α = {curvature:.3e} ≤ 0 (the operator is not positive definite)"
                ));
            }
            first = false;
            let t = Instant::now();
            local = self.op.pipe_update(alpha, beta, &mut self.x, &mut v);
            self.computed(t);
            self.it += 1;
            (gamma_old, alpha_old) = (gamma, alpha);
            if self.it.is_multiple_of(self.cfg.check_every) {
                let (t, drifted) = self.check(ctx, chans, &mut scratch, &v.r)?;
                known = Some((self.it, t));
                if drifted {
                    local = self.replace(chans, &mut v, &mut scratch)?;
                }
            }
        };
        let t = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, t))
    }

    /// Residual replacement in pipelined CG: `r` ← the true residual held in `scratch`, then
    /// `u`, `w`, `m` from it and `s`, `q`, `z` from `p` ([`Krylov::refresh`]); returns the
    /// next reduction's values.
    fn replace<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        v: &mut Pipe<O::Vector>,
        scratch: &mut O::Vector,
    ) -> Result<[f64; 3], Error> {
        std::mem::swap(&mut v.r, scratch);
        self.replacements += 1;
        self.refresh(chans, v, true)
    }

    /// Recompute from `r` (and, with `directions`, from `p`) every vector pipelined CG keeps
    /// by recurrence: `w = A M r`, `m = M w`; `s = A p`, `z = A M s`.
    /// Returns this block's `[(r,u), (w,u), (r,r)]`.
    fn refresh<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        v: &mut Pipe<O::Vector>,
        directions: bool,
    ) -> Result<[f64; 3], Error> {
        let Pipe {
            r, w, z, s, p, pc, ..
        } = v;
        let mut none = || -> Result<(), Error> { Ok(()) };
        match pc {
            Some(pm) => {
                // m holds u = M r, then q = M s, each for one product; last m = M w.
                let t = Instant::now();
                self.op.scale(&pm.d, r, &mut pm.m);
                self.computed(t);
                self.spmv(chans, &mut pm.m, w, false, &mut none)?;
                if directions {
                    self.spmv(chans, p, s, false, &mut none)?;
                    let t = Instant::now();
                    self.op.scale(&pm.d, s, &mut pm.m);
                    self.computed(t);
                    self.spmv(chans, &mut pm.m, z, false, &mut none)?;
                }
                let t = Instant::now();
                self.op.scale(&pm.d, w, &mut pm.m);
                self.computed(t);
                // (r, u) = Σ d r², (w, u) = Σ w d r.
                let t = Instant::now();
                let g = [self.op.dot3(r, &pm.d, r), self.op.dot3(w, &pm.d, r)];
                self.computed(t);
                let t = Instant::now();
                let rr = self.op.dot(r, r);
                self.computed(t);
                Ok([g[0], g[1], rr])
            }
            None => {
                self.spmv(chans, r, w, false, &mut none)?;
                if directions {
                    self.spmv(chans, p, s, false, &mut none)?;
                    self.spmv(chans, s, z, false, &mut none)?;
                }
                let t = Instant::now();
                let rr = self.op.dot(r, r);
                let wr = self.op.dot(w, r);
                self.computed(t);
                Ok([rr, wr, rr])
            }
        }
    }
}

/// Pipelined CG's vectors. With the (diagonal) preconditioner, `u = M r` and `q = M s` are
/// formed pointwise where they are needed and `m = M w` is stored for the product; without
/// one, `u`, `q`, `m` are `r`, `s`, `w`.
pub(crate) struct Pipe<V> {
    pub(crate) r: V,
    pub(crate) w: V,
    pub(crate) n: V,
    pub(crate) z: V,
    pub(crate) s: V,
    pub(crate) p: V,
    pub(crate) pc: Option<PipeM<V>>,
}

/// The preconditioner's vectors of [`Pipe`]: the inverse diagonal and m = M w.
pub(crate) struct PipeM<V> {
    pub(crate) d: V,
    pub(crate) m: V,
}
