//! BiCGStab (van der Vorst, SIAM J. Sci. Stat. Comput. 13(2), 1992; PETSc's KSPBCGS),
//! right-preconditioned: `p̂ = M⁻¹ p`, `ŝ = M⁻¹ s`, and the residual it carries is `b − A x`'s
//! recurrence, the quantity the run stops on.
//!
//! **Two reductions an iteration**, both blocking: `[(r̂, v), ‖r‖²]` after `v = A p̂`, and
//! `[(t, s), (t, t), (r̂, s), (r̂, t), ‖s‖²]` after `t = A ŝ`. The textbook's third,
//! `[(r̂, r), ‖r‖²]` after the update, is folded away: `(r̂, r) = (r̂, s) − ω (r̂, t)` from
//! the second, and `‖r‖²` travels with the next iteration's first, so the claim of
//! iteration k is seen one product later, with x still x_k (PETSc's KSPIBCGS, Yang and Brent,
//! folds them further into one with more recurrences). Neither can be non-blocking: each
//! result is needed by the very next vector update.
//!
//! **Stopping** as CG: on the recurrence residual, a claim certified with the true
//! residual; `‖s‖` meeting the tolerance ends the iteration half-way (`x += α p̂`, PETSc's
//! test), certified the same way. A refuted claim, or a recurrence residual that has drifted
//! from the true one at a check every K iterations, replaces r by the true residual and
//! restarts the recurrences from it (`r̂ = r`, `p = r`).
//!
//! **Breakdown**: `ρ = (r̂, r) = 0`, `(r̂, v) = 0`, `(t, t) = 0` with `s ≠ 0`, `ω = 0`, or any
//! NaN stops the run with [`StopReason::Breakdown`], naming the quantity; the iterate is the
//! last finite one.

use super::vecs::{axpy, copy, dot};
use super::{Krylov, Operator};
use crate::clock::Instant;
use crate::precond::Precond;
use crate::record::StopReason;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, Sync};

/// A value BiCGStab divides by that breaks it down: zero or NaN.
fn breaks(v: f64) -> bool {
    v == 0.0 || !v.is_finite()
}

/// The new direction over the owned `runs`: `p = r + β (p − ω v)`.
fn direction(runs: &[(usize, usize)], beta: f64, omega: f64, r: &[f64], v: &[f64], p: &mut [f64]) {
    for &(s, m) in runs {
        for i in s..s + m {
            p[i] = r[i] + beta * (p[i] - omega * v[i]);
        }
    }
}

/// The iterate's step over the owned `runs`: `x += α p̂ + ω ŝ`.
fn step(runs: &[(usize, usize)], alpha: f64, p: &[f64], omega: f64, s: &[f64], x: &mut [f64]) {
    for &(first, m) in runs {
        for i in first..first + m {
            x[i] += alpha * p[i] + omega * s[i];
        }
    }
}

/// The local parts of `(t, s)`, `(t, t)`, `(r̂, s)`, `(r̂, t)` and `(s, s)`: one reduction.
fn dots(runs: &[(usize, usize)], s: &[f64], t: &[f64], rh: &[f64]) -> [f64; 5] {
    [
        dot(runs, t, s),
        dot(runs, t, t),
        dot(runs, rh, s),
        dot(runs, rh, t),
        dot(runs, s, s),
    ]
}

/// What follows a residual observed at the top of an iteration.
enum Next {
    /// The run ends.
    Stop(StopReason),
    /// The recurrence residual is replaced by the true one and the recurrences restart.
    Replace,
    /// The iteration goes on.
    Go,
}

impl<O: Operator> Krylov<'_, O> {
    /// BiCGStab. Returns why it stopped and the relative true residual of the final iterate.
    pub(super) fn bicgstab<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        pc: &mut Precond,
    ) -> Result<(StopReason, f64), Error> {
        let runs = self.op.runs();
        let mut r = self.op.zeros();
        let mut rh = self.op.zeros();
        let mut p = self.op.zeros();
        let mut ph = self.op.zeros();
        let mut v = self.op.zeros();
        let mut sh = self.op.zeros();
        let mut t = self.op.zeros();
        let mut scratch = self.op.zeros();
        let plain = pc.is_none();
        let rr0 = self.initial(ctx, chans, &mut r, &mut scratch)?;
        let value = self.measure(rr0);
        let mut known = Some((0, value));
        self.observe(value);
        copy(&runs, self.op.data(&r), self.op.data_mut(&mut rh));
        let mut rho = rr0;
        let (mut rho_old, mut alpha, mut omega) = (1.0f64, 1.0f64, 1.0f64);
        let mut restart = true; // p = r: no previous direction
        let mut seen = true; // ‖r‖ of the current r observed
        let stop = 'run: {
            if self.met(value) {
                break 'run StopReason::Criterion;
            }
            loop {
                if breaks(rho) {
                    break 'run self.broke(format!("ρ = (r̂, r) = {rho:.3e}"));
                }
                // p = r + β (p − ω v).
                let c = Instant::now();
                let (pd, rd, vd) = (self.op.data_mut(&mut p), self.op.data(&r), self.op.data(&v));
                if restart {
                    copy(&runs, rd, pd);
                } else {
                    direction(&runs, (rho / rho_old) * (alpha / omega), omega, rd, vd, pd);
                }
                restart = false;
                // v = A M⁻¹ p.
                if !plain {
                    pc.apply(self.op.data(&p), self.op.data_mut(&mut ph));
                }
                self.computed(c);
                let src = if plain { &mut p } else { &mut ph };
                self.spmv(chans, src, &mut v, false, &mut || Ok(()))?;
                let c = Instant::now();
                let local = [
                    dot(&runs, self.op.data(&rh), self.op.data(&v)),
                    if seen {
                        0.0
                    } else {
                        dot(&runs, self.op.data(&r), self.op.data(&r))
                    },
                ];
                self.computed(c);
                let [rv, rr] = self.all_reduce(ctx, local)?;
                if !seen {
                    seen = true;
                    match self.observe_residual(ctx, chans, rr, &mut r, &mut scratch, &mut known)? {
                        Next::Stop(stop) => break 'run stop,
                        Next::Replace => {
                            rho = self.restart_from(ctx, &runs, &mut r, &mut scratch, &mut rh)?;
                            restart = true;
                            continue;
                        }
                        Next::Go => {}
                    }
                }
                if breaks(rv) {
                    break 'run self.broke(format!("(r̂, A M⁻¹ p) = {rv:.3e}"));
                }
                alpha = rho / rv;
                // s = r − α v (in r); t = A M⁻¹ s.
                let c = Instant::now();
                axpy(&runs, -alpha, self.op.data(&v), self.op.data_mut(&mut r));
                if !plain {
                    pc.apply(self.op.data(&r), self.op.data_mut(&mut sh));
                }
                self.computed(c);
                let src = if plain { &mut r } else { &mut sh };
                self.spmv(chans, src, &mut t, false, &mut || Ok(()))?;
                let c = Instant::now();
                let local = dots(&runs, self.op.data(&r), self.op.data(&t), self.op.data(&rh));
                self.computed(c);
                let [ts, tt, rs, rt, ss] = self.all_reduce(ctx, local)?;
                if !ss.is_finite() {
                    break 'run self.broke(format!("‖s‖² = {ss:.3e}"));
                }
                let half = self.measure(ss);
                if self.met(half) {
                    // x += α p̂; r = s: a claim half-way.
                    let c = Instant::now();
                    let pd = if plain {
                        self.op.data(&p)
                    } else {
                        self.op.data(&ph)
                    };
                    axpy(&runs, alpha, pd, self.op.data_mut(&mut self.x));
                    self.computed(c);
                    self.it += 1;
                    self.observe(half);
                    if !self.cfg.confirm {
                        break 'run StopReason::Criterion;
                    }
                    let (tr, ok) = self.certify(ctx, chans, &mut scratch, &r)?;
                    known = Some((self.it, tr));
                    if ok {
                        break 'run StopReason::Criterion;
                    }
                    if self.it >= self.cfg.max_iters {
                        break 'run StopReason::MaxIters;
                    }
                    rho = self.restart_from(ctx, &runs, &mut r, &mut scratch, &mut rh)?;
                    restart = true;
                    continue;
                }
                if breaks(tt) {
                    break 'run self.broke(format!("(t, t) = {tt:.3e} with s ≠ 0"));
                }
                omega = ts / tt;
                if breaks(omega) {
                    break 'run self.broke(format!("ω = (t, s)/(t, t) = {omega:.3e}"));
                }
                // x += α p̂ + ω ŝ; r = s − ω t.
                let c = Instant::now();
                let (pd, sd) = match plain {
                    true => (self.op.data(&p), self.op.data(&r)),
                    false => (self.op.data(&ph), self.op.data(&sh)),
                };
                step(&runs, alpha, pd, omega, sd, self.op.data_mut(&mut self.x));
                axpy(&runs, -omega, self.op.data(&t), self.op.data_mut(&mut r));
                self.computed(c);
                self.it += 1;
                seen = false;
                rho_old = rho;
                rho = rs - omega * rt;
            }
        };
        let tr = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, tr))
    }

    /// The recurrence residual's squared norm `rr` of the iteration's top, observed: a claim is
    /// certified (or, without confirmation, taken), and every `check_every` iterations the
    /// true residual is computed and may replace it ([`Krylov::check`]).
    fn observe_residual<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        rr: f64,
        r: &mut O::Vector,
        scratch: &mut O::Vector,
        known: &mut Option<(u64, f64)>,
    ) -> Result<Next, Error> {
        let value = self.measure(rr);
        self.observe(value);
        let claim = self.met(value);
        if claim && !self.cfg.confirm {
            return Ok(Next::Stop(StopReason::Criterion));
        }
        if claim || self.it.is_multiple_of(self.cfg.check_every) {
            let (tr, replace) = if claim {
                let (tr, ok) = self.certify(ctx, chans, scratch, r)?;
                if ok {
                    *known = Some((self.it, tr));
                    return Ok(Next::Stop(StopReason::Criterion));
                }
                (tr, true)
            } else {
                self.check(ctx, chans, scratch, r)?
            };
            *known = Some((self.it, tr));
            if replace {
                if self.it >= self.cfg.max_iters {
                    return Ok(Next::Stop(StopReason::MaxIters));
                }
                return Ok(Next::Replace);
            }
        }
        if self.it >= self.cfg.max_iters {
            return Ok(Next::Stop(StopReason::MaxIters));
        }
        Ok(Next::Go)
    }

    /// Replace `r` by the true residual in `scratch` and restart the recurrences from it:
    /// `r̂ = r`; returns `ρ = (r̂, r)`.
    fn restart_from<C: Context>(
        &mut self,
        ctx: &mut C,
        runs: &[(usize, usize)],
        r: &mut O::Vector,
        scratch: &mut O::Vector,
        rh: &mut O::Vector,
    ) -> Result<f64, Error> {
        std::mem::swap(r, scratch);
        self.replacements += 1;
        let c = Instant::now();
        copy(runs, self.op.data(r), self.op.data_mut(rh));
        let local = dot(runs, self.op.data(r), self.op.data(r));
        self.computed(c);
        let [rho] = self.reduce_aside(ctx, [local])?;
        Ok(rho)
    }
}
