//! Pipelined CG with a preconditioner that is not pointwise (block Jacobi): Ghysels and
//! Vanroose's Algorithm 4 as written, `u = M⁻¹ r` and `q = M⁻¹ s` carried by recurrences of
//! their own and `m = M⁻¹ w` applied once an iteration, while the iteration's one
//! non-blocking reduction of `(r, u)`, `(w, u)`, `(r, r)` is in flight, then `n = A m` with
//! the halo exchange overlapped and the reduction tested between pieces of the product.
//! Stopping, certification, residual replacement and breakdown are pipecg's
//! (`krylov/pipecg.rs`); a replacement recomputes `u, w, m` from the true residual and `s, q, z`
//! from `p`.

use super::vecs::dot;
use super::{breaks, Krylov, Operator, Pending};
use crate::clock::Instant;
use crate::precond::Precond;
use crate::record::StopReason;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, Sync};
use std::time::Duration;

/// The vectors of preconditioned pipelined CG.
struct Vecs<V> {
    r: V,
    u: V,
    w: V,
    m: V,
    n: V,
    z: V,
    q: V,
    s: V,
    p: V,
}

impl<O: Operator> Krylov<'_, O> {
    /// Pipelined CG preconditioned by `pc`. Returns why it stopped and the relative true
    /// residual of the final iterate.
    pub(super) fn pipecg_block<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        red: &mut C::Reduction,
        pc: &mut Precond,
    ) -> Result<(StopReason, f64), Error> {
        let runs = self.op.runs();
        let op = &self.op;
        let mut v = Vecs {
            r: op.zeros(),
            u: op.zeros(),
            w: op.zeros(),
            m: op.zeros(),
            n: op.zeros(),
            z: op.zeros(),
            q: op.zeros(),
            s: op.zeros(),
            p: op.zeros(),
        };
        let mut scratch = op.zeros();
        self.initial(ctx, chans, &mut v.r, &mut scratch)?;
        let mut local = self.refresh_block(chans, pc, &runs, &mut v, false)?;
        let mut known = None;
        let mut refuted_at: Option<u64> = None;
        let (mut gamma_old, mut alpha_old) = (0.0f64, 0.0f64);
        let mut first = true;
        let stop = loop {
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
            // m = M⁻¹ w was formed with the update; n = A m while the reduction flies.
            self.spmv(chans, &mut v.m, &mut v.n, true, &mut || pending.poll())?;
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
                refuted_at = Some(self.it);
                std::mem::swap(&mut v.r, &mut scratch);
                self.replacements += 1;
                local = self.refresh_block(chans, pc, &runs, &mut v, true)?;
                continue;
            }
            if self.it >= self.cfg.max_iters {
                break StopReason::MaxIters;
            }
            if breaks(gamma) {
                break self.broke(format!(
                    "γ = (r, M⁻¹ r) = {gamma:.3e} ≤ 0 (M is not positive definite)"
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
            {
                let o = &self.op;
                let x = o.data_mut(&mut self.x);
                let Vecs {
                    r,
                    u,
                    w,
                    m,
                    n,
                    z,
                    q,
                    s,
                    p,
                } = &mut v;
                let (r, u, w) = (o.data_mut(r), o.data_mut(u), o.data_mut(w));
                let (m, n) = (o.data(m), o.data(n));
                let (z, q, s, p) = (o.data_mut(z), o.data_mut(q), o.data_mut(s), o.data_mut(p));
                for &(b, len) in runs.iter() {
                    for i in b..b + len {
                        z[i] = n[i] + beta * z[i];
                        q[i] = m[i] + beta * q[i];
                        s[i] = w[i] + beta * s[i];
                        p[i] = u[i] + beta * p[i];
                        x[i] += alpha * p[i];
                        r[i] -= alpha * s[i];
                        u[i] -= alpha * q[i];
                        w[i] -= alpha * z[i];
                    }
                }
            }
            pc.apply(self.op.data(&v.w), self.op.data_mut(&mut v.m));
            local = self.block_values(&runs, &v);
            self.computed(t);
            self.it += 1;
            (gamma_old, alpha_old) = (gamma, alpha);
            if self.it.is_multiple_of(self.cfg.check_every) {
                let (t, drifted) = self.check(ctx, chans, &mut scratch, &v.r)?;
                known = Some((self.it, t));
                if drifted {
                    std::mem::swap(&mut v.r, &mut scratch);
                    self.replacements += 1;
                    local = self.refresh_block(chans, pc, &runs, &mut v, true)?;
                }
            }
        };
        let t = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, t))
    }

    /// `[(r, u), (w, u), (r, r)]` over the block.
    fn block_values(&self, runs: &[(usize, usize)], v: &Vecs<O::Vector>) -> [f64; 3] {
        let o = &self.op;
        let (r, u, w) = (o.data(&v.r), o.data(&v.u), o.data(&v.w));
        [dot(runs, r, u), dot(runs, w, u), dot(runs, r, r)]
    }

    /// Recompute from `r` (and, with `directions`, from `p`) what the recurrences carry:
    /// `u = M⁻¹ r`, `w = A u`, `m = M⁻¹ w`; `s = A p`, `q = M⁻¹ s`, `z = A q`. Returns the
    /// block's next reduction values.
    fn refresh_block<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        pc: &mut Precond,
        runs: &[(usize, usize)],
        v: &mut Vecs<O::Vector>,
        directions: bool,
    ) -> Result<[f64; 3], Error> {
        let mut none = || -> Result<(), Error> { Ok(()) };
        let t = Instant::now();
        pc.apply(self.op.data(&v.r), self.op.data_mut(&mut v.u));
        self.computed(t);
        self.spmv(chans, &mut v.u, &mut v.w, false, &mut none)?;
        if directions {
            self.spmv(chans, &mut v.p, &mut v.s, false, &mut none)?;
            let t = Instant::now();
            pc.apply(self.op.data(&v.s), self.op.data_mut(&mut v.q));
            self.computed(t);
            self.spmv(chans, &mut v.q, &mut v.z, false, &mut none)?;
        }
        let t = Instant::now();
        pc.apply(self.op.data(&v.w), self.op.data_mut(&mut v.m));
        let local = self.block_values(runs, v);
        self.computed(t);
        Ok(local)
    }
}
