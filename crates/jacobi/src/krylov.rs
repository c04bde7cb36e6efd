//! The Krylov solvers, written once against chan-core's [`Context`] like the Jacobi solver:
//! conjugate gradients on `A = 6I − adjacency` (the operator the Jacobi iteration splits),
//! with `b` the boundary terms (Laplace) or `h² f` (Poisson).
//!
//! * **cg** ([`KrylovSolver::Cg`]): textbook preconditioned CG. The halo of the direction `p` goes
//!   through Sync channels ([`crate::halo`], the exchange the Jacobi solver uses), the
//!   matrix-vector product is fused with `p·Ap`, the update with `r·z` and `r·r`; the two
//!   reductions of an iteration are the backend's blocking all-reduce.
//! * **cg-overlap** ([`KrylovSolver::CgOverlap`]): the same iteration, with the product over the
//!   interior of the block computed while the halo messages travel, then over the boundary
//!   layer (Hoefler, Gottschling, Lumsdaine, Rehm, *Optimizing a conjugate gradient solver
//!   with non-blocking collective operations*, Parallel Computing 33(9), 2007).
//! * **pipecg** ([`KrylovSolver::PipeCg`]): pipelined CG (Ghysels and Vanroose, Parallel Computing
//!   40(7), 2014, Algorithm 4; PETSc's KSPPIPECG). The three dot products of an iteration,
//!   `(r,u)`, `(w,u)` and `(r,r)`, form ONE non-blocking reduction ([`Reduction`]:
//!   `MPI_Iallreduce` over MPI, chan-core's tree elsewhere), started as soon as the fused
//!   update has them and tested between planes of the next matrix-vector product (and its
//!   overlapped halo exchange), then waited for. With the (diagonal) Jacobi preconditioner,
//!   `u = M r` and `q = M s` are formed pointwise inside the fused update rather than carried
//!   by recurrences of their own (the same values in exact arithmetic, and 5 of the 20 memory
//!   streams of an iteration fewer on a 50³ block); `m = M w` is stored for the product.
//!
//! **Stopping**: on the recurrence residual, `‖r_k‖₂/‖b‖₂ < tol` (PETSc's default test with
//! `x₀ = 0`). With [`Config::confirm`] (the default) a claim is certified with the true
//! residual `b − A x` (a halo swap, a stencil pass, a blocking reduction); the true final
//! residual is always recomputed and reported.
//!
//! **Drift and residual replacement**: the recurrences `r ← r − α s` (and, in pipecg, those of
//! `w`, `s`, `z`) accumulate rounding errors, so the recurrence residual drifts
//! from `b − A x`; pipecg's longer chain of recurrences drifts faster (Cools et al., SIAM
//! J. Matrix Anal. Appl. 39(1), 2018). Every `check_every` iterations, and at every
//! convergence claim, the solver computes the true residual and the gap
//! `‖(b − A x) − r‖₂`. It **replaces** the residual (`r ← b − A x`; pipecg also recomputes
//! `w = A M r`, `m = M w`, `s = A p`, `z = A M s`, keeping `x`, `p` and the scalars)
//! when the gap exceeds a tenth of the tolerance, `gap > 0.1 · tol · ‖b‖`, i.e. once the
//! recurrence residual can no longer decide convergence to within 10%; and after a claim the
//! true residual refutes.
//!
//! **Breakdown**: a curvature `p·Ap ≤ 0` (pipecg: `δ − βγ/α ≤ 0`), a `r·z ≤ 0` or any NaN
//! stops the run with [`StopReason::Breakdown`] and says which quantity failed; the iterate
//! is the last finite one, so no NaN reaches the report.

use crate::clock::Instant;
use crate::config::{Config, Pc};
use crate::field::Field;
use crate::geometry::{Face, Plan};
use crate::halo::{self, Halo};
use crate::kernel::Region;
use crate::linalg::{self, CgVectors, PipeVectors, Vector};
use crate::method::{Krylov as Settings, KrylovSolver};
use crate::parts::Parts;
use crate::progress::{History, HistoryPoint, Progress, ProgressGate};
use crate::record::{
    Certification, KrylovRecord, MessageTotals, RankRecord, Residuals, StopReason,
};
use crate::slow::Slowdown;
use crate::solver::Block;
use crate::Error;
use chan_core::traits::*;
use chan_core::{close_all, Channel, ReduceOp, Sync};
use std::time::Duration;

/// Run the configured Krylov solver on this rank (collective): its record and final iterate,
/// on the operator with diagonal `diag` (6 for the Laplacian; the crate's tests shift it to make the problem
/// indefinite).
pub(crate) fn solve_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    settings: &Settings,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    diag: f64,
) -> Result<(RankRecord, Field), Error> {
    let block = Block::of_rank(ctx, cfg, plan)?;
    let mut k = Krylov {
        cfg,
        pc: settings.pc,
        diag,
        interior: block.interior,
        shell: block.shell,
        faces: block.faces,
        field: block.field,
        bnorm_sq: 0.0,
        it: 0,
        parts: Parts::default(),
        flight: Duration::ZERO,
        waiting: Duration::ZERO,
        reductions: 0,
        reported: None,
        history: History::new(),
        certifications: Vec::new(),
        checks: 0,
        replacements: 0,
        breakdown: None,
        slow: Slowdown::new(cfg.slowdown_of(ctx.rank())),
        start: Instant::now(),
        progress: ProgressGate::new(progress, cfg.criterion.tol(), cfg.max_iters),
    };
    let specs = halo::specs(&k.field, &k.faces, 0, 1, 0)?;
    let mut chans = ctx.open::<Sync>(&specs)?;
    let (stop, true_value) = match settings.solver {
        KrylovSolver::PipeCg => {
            let mut red = ctx.reduction(3, ReduceOp::Sum)?;
            ctx.barrier()?;
            k.start = Instant::now();
            k.pipecg(ctx, &mut chans, &mut red)?
        }
        KrylovSolver::Cg | KrylovSolver::CgOverlap => {
            ctx.barrier()?;
            k.start = Instant::now();
            k.cg(ctx, &mut chans, settings.solver == KrylovSolver::CgOverlap)?
        }
    };
    let time = k.start.elapsed();
    let channels = close_all(chans)?;
    let mut messages = MessageTotals::default();
    for s in &channels {
        messages.add(s);
    }
    k.history.finish();
    let record = RankRecord {
        rank: ctx.rank(),
        backend: C::Backend::NAME.to_string(),
        coords: block.geom.coords,
        local: block.geom.local,
        iterations: k.it,
        time_s: time.as_secs_f64(),
        compute_s: k.parts.sweep.as_secs_f64(),
        comm_s: k.parts.comm().as_secs_f64(),
        breakdown: Some(k.parts.breakdown(time)),
        stop,
        converged: stop != StopReason::Breakdown && cfg.criterion.met(true_value),
        residual: Residuals {
            reported: k.reported,
            true_residual: true_value,
            initial_norm: k.bnorm_sq.sqrt(),
        },
        reductions: k.reductions,
        certifications: std::mem::take(&mut k.certifications),
        history: std::mem::take(&mut k.history),
        error_max: k.field.error_max(&cfg.problem),
        exchange_trace: Vec::new(),
        messages,
        channels,
        multisplit: None,
        halo_auto: None,
        krylov: Some(KrylovRecord {
            reduce_flight_s: k.flight.as_secs_f64(),
            reduce_wait_s: k.waiting.as_secs_f64(),
            true_residual_checks: k.checks,
            replacements: k.replacements,
            breakdown: k.breakdown.take(),
        }),
    };
    Ok((record, k.field))
}

/// A reduction in flight, and what it cost: time from its start to the moment its result was
/// seen (in flight) and time spent inside `test` and `wait` (waiting).
struct Pending<'r, R: Reduction> {
    red: &'r mut R,
    started: Instant,
    result: Option<[f64; 3]>,
    /// When the result was seen.
    seen: Option<Instant>,
    waited: Duration,
}

impl<R: Reduction> Pending<'_, R> {
    /// Progress the reduction without waiting (once its result is in, nothing).
    fn poll(&mut self) -> Result<(), Error> {
        if self.result.is_none() {
            let t = Instant::now();
            if let Some(g) = self.red.test()? {
                self.result = Some([g[0], g[1], g[2]]);
                self.seen = Some(Instant::now());
            }
            self.waited += t.elapsed();
        }
        Ok(())
    }
}

/// One rank's Krylov solve.
struct Krylov<'a> {
    cfg: &'a Config,
    /// The preconditioner.
    pc: Pc,
    /// The operator's diagonal.
    diag: f64,
    /// The points of the block whose product reads no neighbour's halo, and the rest.
    interior: Region,
    shell: Vec<Region>,
    /// Faces with a neighbour; channel k serves `faces[k]`.
    faces: Vec<Face>,
    /// The iterate x (its halo holds the Dirichlet values) and the problem's `h² f`.
    field: Field,
    /// ‖b‖², the criterion's denominator.
    bnorm_sq: f64,
    /// Iterations (updates of x) done.
    it: u64,
    /// Where the time went: the kernels (`compute_s`), halo exchanges and reductions.
    parts: Parts,
    /// Reductions: time in flight, time spent waiting for them.
    flight: Duration,
    waiting: Duration,
    reductions: u64,
    reported: Option<f64>,
    history: History,
    certifications: Vec<Certification>,
    /// True residuals computed (periodic checks and certifications), residual replacements.
    checks: u64,
    replacements: u64,
    breakdown: Option<String>,
    /// The slow rank's extra passes (`slow.rs`): a dot product over the block after each
    /// kernel (a streaming read of one vector; a product or a fused update reads several).
    slow: Slowdown,
    start: Instant,
    progress: ProgressGate<'a>,
}

/// A value of `p·Ap`, `r·z` or `δ − βγ/α` that breaks CG down: not positive, or NaN.
fn breaks(v: f64) -> bool {
    v.is_nan() || v <= 0.0
}

impl Krylov<'_> {
    fn measure(&self, rr: f64) -> f64 {
        self.cfg.criterion.measure(rr, self.bnorm_sq)
    }

    fn met(&self, value: f64) -> bool {
        self.cfg.criterion.met(value)
    }

    /// Time `f` as computation (with the slow rank's extra passes).
    #[inline]
    fn compute<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let v = f();
        self.computed(t);
        v
    }

    /// Computation since `t` (with the slow rank's extra passes): for kernels that need the
    /// field.
    #[inline]
    fn computed(&mut self, t: Instant) {
        let x = &self.field;
        self.slow
            .after(1, || linalg::dot(x.shape(), x.iterate(), x.iterate()));
        self.parts.sweep += t.computed();
    }

    /// One of the iteration's blocking all-reduces (sum) of `N` values: counted in
    /// `reductions`, its whole flight waited.
    fn all_reduce<C: Context, const N: usize>(
        &mut self,
        ctx: &mut C,
        v: [f64; N],
    ) -> Result<[f64; N], Error> {
        let t = Instant::now();
        let v = self.reduce_aside(ctx, v)?;
        let took = t.elapsed();
        self.flight += took;
        self.waiting += took;
        self.reductions += 1;
        Ok(v)
    }

    /// A blocking all-reduce (sum) outside the iteration (set-up, true residuals, residual
    /// replacement): communication time, not counted among the iteration's reductions.
    fn reduce_aside<C: Context, const N: usize>(
        &mut self,
        ctx: &mut C,
        mut v: [f64; N],
    ) -> Result<[f64; N], Error> {
        let t = Instant::now();
        ctx.all_reduce(&mut v, ReduceOp::Sum)?;
        self.parts.reduced(t);
        Ok(v)
    }

    /// A value of the criterion at iteration `it`, into the history and to the hook.
    #[inline]
    fn observe(&mut self, value: f64) {
        self.reported = Some(value);
        let elapsed = self.start.elapsed();
        self.history
            .record(HistoryPoint(self.it, value, elapsed.as_secs_f64()));
        self.progress.offer(self.it, value, elapsed);
    }

    /// A breakdown: recorded, and the reason to stop.
    fn broke(&mut self, what: String) -> StopReason {
        self.breakdown = Some(format!("{what} at iteration {}", self.it));
        StopReason::Breakdown
    }

    /// Swap the halo of `h`, timed as communication.
    fn swap<B: Backend, H: Halo<Link = Face> + ?Sized>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        h: &mut H,
    ) -> Result<(), Error> {
        halo::swap(chans, &self.faces, self.it, h, &mut self.parts)
    }

    /// `dst = A src`, the halo of `src` exchanged first; returns Σ src·dst over the block.
    /// `overlap`: the interior is computed while the halo messages travel, plane by plane,
    /// calling `poll` between planes (pipecg progresses its reduction there), then the shell.
    fn spmv<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        src: &mut Vector,
        dst: &mut Vector,
        overlap: bool,
        poll: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<f64, Error> {
        let shape = *self.field.shape();
        let diag = self.diag;
        if !overlap {
            self.swap(chans, src)?;
            let all = Region::all(shape.n);
            return Ok(self.compute(|| linalg::apply(&shape, diag, &src.v, &mut dst.v, &all)));
        }
        halo::post(chans, &self.faces, self.it, src, &mut self.parts)?;
        let mut sum = 0.0;
        let inner = self.interior.clone();
        for z in inner.z.clone() {
            let plane = Region {
                z: z..z + 1,
                ..inner.clone()
            };
            sum += self.compute(|| linalg::apply(&shape, diag, &src.v, &mut dst.v, &plane));
            let t = Instant::now();
            poll()?;
            self.parts.reduced(t);
        }
        halo::complete(chans, &self.faces, src, &mut self.parts)?;
        let shell = std::mem::take(&mut self.shell);
        for reg in &shell {
            sum += self.compute(|| linalg::apply(&shape, diag, &src.v, &mut dst.v, reg));
        }
        self.shell = shell;
        Ok(sum)
    }

    /// Setup: ‖b‖² (global) into `bnorm_sq`, and `r = b − A x₀` (x's halo swapped); returns
    /// the global `‖r₀‖²`.
    fn initial<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        r: &mut Vector,
    ) -> Result<f64, Error> {
        let shape = *self.field.shape();
        // b: the residual of x = 0 with the Dirichlet values in the halo (and nothing from the
        // neighbours: their faces are interior points, zero too).
        let mut zero = Vector::zeros(&shape);
        zero.v.copy_from_slice(self.field.iterate());
        for (z, y) in (1..=shape.n.z).flat_map(|z| (1..=shape.n.y).map(move |y| (z, y))) {
            let b = shape.index(1, y, z);
            zero.v[b..b + shape.n.x].fill(0.0);
        }
        for &f in &self.faces {
            let nothing = vec![0.0; self.field.face_len(f)];
            zero.unpack(f, &nothing);
        }
        let t = Instant::now();
        let [b_local, _] =
            linalg::residual(&shape, self.diag, &zero.v, self.field.rhs(), &mut r.v, None);
        self.computed(t);
        let x0 = self.true_residual(ctx, chans, r, None)?;
        let [bb] = self.reduce_aside(ctx, [b_local])?;
        self.bnorm_sq = bb;
        Ok(x0[0])
    }

    /// `r = b − A x` (x's halo swapped first), compared with `rec` when given: the global
    /// `[‖b − A x‖², ‖(b − A x) − rec‖²]`.
    fn true_residual<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        r: &mut Vector,
        rec: Option<&Vector>,
    ) -> Result<[f64; 2], Error> {
        halo::swap(
            chans,
            &self.faces,
            self.it,
            &mut self.field,
            &mut self.parts,
        )?;
        let t = Instant::now();
        let f = &self.field;
        let rec = rec.map(|v| &v.v[..]);
        let local = linalg::residual(f.shape(), self.diag, f.iterate(), f.rhs(), &mut r.v, rec);
        self.computed(t);
        self.reduce_aside(ctx, local)
    }

    /// The true residual of x against the recurrence residual `rec`, written into
    /// `scratch`: the relative true residual, and whether the recurrence has drifted beyond
    /// a tenth of the tolerance (so that it must be replaced).
    fn check<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        scratch: &mut Vector,
        rec: &Vector,
    ) -> Result<(f64, bool), Error> {
        self.checks += 1;
        let [t, gap] = self.true_residual(ctx, chans, scratch, Some(rec))?;
        let drifted = self.measure(gap) > 0.1 * self.cfg.criterion.tol();
        Ok((self.measure(t), drifted))
    }

    /// Certify a convergence claim with the true residual (in `scratch`): recorded; true
    /// when it holds.
    fn certify<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        scratch: &mut Vector,
        rec: &Vector,
    ) -> Result<(f64, bool), Error> {
        let (t, _) = self.check(ctx, chans, scratch, rec)?;
        let accepted = self.met(t);
        self.certifications.push(Certification {
            iteration: self.it,
            reported: self.reported,
            true_residual: t,
            accepted,
        });
        Ok((t, accepted))
    }

    /// The relative true residual at the end (when the last check was not of this iterate).
    fn final_residual<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        scratch: &mut Vector,
        known: Option<(u64, f64)>,
    ) -> Result<f64, Error> {
        match known {
            Some((it, t)) if it == self.it => Ok(t),
            _ => {
                let [t, _] = self.true_residual(ctx, chans, scratch, None)?;
                Ok(self.measure(t))
            }
        }
    }

    /// Preconditioned CG (`overlap`: cg-overlap). Returns why it stopped and the relative true
    /// residual of the final iterate.
    fn cg<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        overlap: bool,
    ) -> Result<(StopReason, f64), Error> {
        let shape = *self.field.shape();
        let pc = self.pc == Pc::Jacobi;
        let mut r = Vector::zeros(&shape);
        let mut p = Vector::zeros(&shape);
        let mut q = Vector::zeros(&shape);
        let mut scratch = Vector::zeros(&shape);
        // M = D⁻¹: the inverse diagonal, stored (constant 1/6 here), and z = M r.
        let (d, mut z) = if pc {
            (
                Vector::filled(&shape, 1.0 / self.diag),
                Vector::zeros(&shape),
            )
        } else {
            (Vector::zeros(&shape), Vector::zeros(&shape))
        };
        let rr = self.initial(ctx, chans, &mut r)?;
        let precondition = |r: &Vector, z: &mut Vector| -> f64 {
            if pc {
                linalg::scale(&shape, &d.v, &r.v, &mut z.v)
            } else {
                linalg::dot(&shape, &r.v, &r.v)
            }
        };
        let mut rz = rr;
        if pc {
            let rz_local = self.compute(|| precondition(&r, &mut z));
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
                linalg::direction(&shape, &zs.v, 0.0, &mut p.v);
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
                let local = linalg::cg_update(
                    &shape,
                    alpha,
                    CgVectors {
                        x: self.field.iterate_mut(),
                        r: &mut r.v,
                        p: &p.v,
                        q: &q.v,
                        pc: pc.then_some((&d.v[..], &mut z.v[..])),
                    },
                );
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
                if claim || self.it % self.cfg.check_every == 0 {
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
                        let rz_local = self.compute(|| precondition(&r, &mut z));
                        let rr_local = self.compute(|| linalg::dot(&shape, &r.v, &r.v));
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
                self.compute(|| linalg::direction(&shape, &zs.v, beta, &mut p.v));
            }
        };
        let t = self.final_residual(ctx, chans, &mut scratch, known)?;
        Ok((stop, t))
    }

    /// Pipelined CG with one non-blocking reduction per iteration. Returns why it stopped and
    /// the relative true residual of the final iterate.
    fn pipecg<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        red: &mut C::Reduction,
    ) -> Result<(StopReason, f64), Error> {
        let shape = *self.field.shape();
        let pc = self.pc == Pc::Jacobi;
        let mut v = Pipe {
            r: Vector::zeros(&shape),
            w: Vector::zeros(&shape),
            n: Vector::zeros(&shape),
            z: Vector::zeros(&shape),
            s: Vector::zeros(&shape),
            p: Vector::zeros(&shape),
            pc: pc.then(|| PipeM {
                d: Vector::filled(&shape, 1.0 / self.diag),
                m: Vector::zeros(&shape),
            }),
        };
        let mut scratch = Vector::zeros(&shape);
        self.initial(ctx, chans, &mut v.r)?;
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
            local = linalg::pipe_update(&shape, alpha, beta, v.vectors(&mut self.field));
            self.computed(t);
            self.it += 1;
            (gamma_old, alpha_old) = (gamma, alpha);
            if self.it % self.cfg.check_every == 0 {
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
        v: &mut Pipe,
        scratch: &mut Vector,
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
        v: &mut Pipe,
        directions: bool,
    ) -> Result<[f64; 3], Error> {
        let shape = *self.field.shape();
        let Pipe {
            r, w, z, s, p, pc, ..
        } = v;
        let mut none = || -> Result<(), Error> { Ok(()) };
        match pc {
            Some(pm) => {
                // m holds u = M r, then q = M s, each for one product; last m = M w.
                self.compute(|| linalg::scale(&shape, &pm.d.v, &r.v, &mut pm.m.v));
                self.spmv(chans, &mut pm.m, w, false, &mut none)?;
                if directions {
                    self.spmv(chans, p, s, false, &mut none)?;
                    self.compute(|| linalg::scale(&shape, &pm.d.v, &s.v, &mut pm.m.v));
                    self.spmv(chans, &mut pm.m, z, false, &mut none)?;
                }
                self.compute(|| linalg::scale(&shape, &pm.d.v, &w.v, &mut pm.m.v));
                // (r, u) = Σ d r², (w, u) = Σ w d r.
                let [g, dl] = self.compute(|| {
                    [
                        linalg::dot3(&shape, &r.v, &pm.d.v, &r.v),
                        linalg::dot3(&shape, &w.v, &pm.d.v, &r.v),
                    ]
                });
                Ok([g, dl, self.compute(|| linalg::dot(&shape, &r.v, &r.v))])
            }
            None => {
                self.spmv(chans, r, w, false, &mut none)?;
                if directions {
                    self.spmv(chans, p, s, false, &mut none)?;
                    self.spmv(chans, s, z, false, &mut none)?;
                }
                Ok(self.compute(|| {
                    let rr = linalg::dot(&shape, &r.v, &r.v);
                    [rr, linalg::dot(&shape, &w.v, &r.v), rr]
                }))
            }
        }
    }
}

/// Pipelined CG's vectors. With the (diagonal) preconditioner, `u = M r` and `q = M s` are
/// formed pointwise where they are needed and `m = M w` is stored for the product; without
/// one, `u`, `q`, `m` are `r`, `s`, `w`.
struct Pipe {
    r: Vector,
    w: Vector,
    n: Vector,
    z: Vector,
    s: Vector,
    p: Vector,
    pc: Option<PipeM>,
}

/// The preconditioner's vectors of [`Pipe`]: the inverse diagonal and m = M w.
struct PipeM {
    d: Vector,
    m: Vector,
}

impl Pipe {
    /// The slices the fused update works on, `x` from the field.
    fn vectors<'a>(&'a mut self, field: &'a mut Field) -> PipeVectors<'a> {
        PipeVectors {
            x: field.iterate_mut(),
            r: &mut self.r.v,
            w: &mut self.w.v,
            n: &self.n.v,
            z: &mut self.z.v,
            s: &mut self.s.v,
            p: &mut self.p.v,
            pc: self.pc.as_mut().map(|pm| (&pm.d.v[..], &mut pm.m.v[..])),
        }
    }
}
