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

mod cg;
mod grid;
mod pipecg;

use crate::clock::{Instant, Work};
use crate::config::{Config, Exchange, Pc};
use crate::geometry::Dims;
use crate::halo::{self, Halo};
use crate::method::{Krylov as Settings, KrylovSolver};
use crate::parts::Parts;
use crate::precond::{LocalCsr, Precond};
use crate::progress::{History, HistoryPoint, Progress, ProgressGate};
use crate::record::{
    Certification, KrylovRecord, MessageTotals, RankRecord, Residuals, StopReason,
};
use crate::slow::Slowdown;
use crate::Error;
use chan_core::traits::*;
use chan_core::{close_all, Channel, ChannelSpec, ReduceOp, Sync};
use std::time::Duration;

mod bicgstab;
mod gmres;
mod pipecg_block;
pub(crate) mod vecs;
pub(crate) use grid::solve_rank;
pub(crate) use pipecg::Pipe;

/// What the Krylov solvers need of the operator A on one rank's block: the vectors (owned
/// values and the halo or ghosts the product reads), the halo's links, and the kernels over
/// the owned points, each fused as the solvers use it. The solvers are written once over
/// it ([`Krylov`]); the grid's 7-point operator ([`GridOp`](grid::GridOp)) and a matrix's row block
/// (`sparse/operator.rs`) implement it.
pub(crate) trait Operator {
    /// What names one neighbour's exchange.
    type Link: Copy + PartialEq + std::fmt::Debug;
    /// One vector of the block.
    type Vector: Halo<Link = Self::Link>;
    /// The links of a vector's halo exchange; channel k serves `links()[k]`.
    fn links(&self) -> &[Self::Link];
    /// The Sync channels of that exchange.
    fn specs(&self) -> Result<Vec<ChannelSpec>, Error>;
    /// A vector of zeros.
    fn zeros(&self) -> Self::Vector;
    /// `1 / a_ii` at the owned points: the Jacobi preconditioner M = D⁻¹.
    fn inv_diag(&self) -> Self::Vector;
    /// The starting iterate, its halo holding what the product reads beyond the system
    /// (the grid's Dirichlet values).
    fn x0(&self) -> Self::Vector;
    /// Σ b² over the owned points.
    /// Σ b² over the owned points, with two vectors of the solver's as scratch (written;
    /// at set-up, before they hold anything).
    fn b_sq(&self, scratch: (&mut Self::Vector, &mut Self::Vector)) -> f64;
    /// Pieces of the block's interior (the owned points whose product reads no halo),
    /// computed one by one by the overlapped product, which polls between them.
    fn interior_parts(&self) -> usize;
    /// `dst = A src` over `part` of the owned points (`src`'s halo as it is): Σ src·dst
    /// over them.
    fn apply(&self, src: &Self::Vector, dst: &mut Self::Vector, part: Part) -> f64;
    /// `r = b − A x` (x's halo as it is), compared with `rec` when given: `[Σ r², Σ (r −
    /// rec)²]`.
    fn residual(
        &self,
        x: &Self::Vector,
        r: &mut Self::Vector,
        rec: Option<&Self::Vector>,
    ) -> [f64; 2];
    /// Σ a·b.
    fn dot(&self, a: &Self::Vector, b: &Self::Vector) -> f64;
    /// Σ a·d·b.
    fn dot3(&self, a: &Self::Vector, d: &Self::Vector, b: &Self::Vector) -> f64;
    /// `dst = d ∘ src`: Σ src·dst.
    fn scale(&self, d: &Self::Vector, src: &Self::Vector, dst: &mut Self::Vector) -> f64;
    /// `p = z + β p`.
    fn direction(&self, z: &Self::Vector, beta: f64, p: &mut Self::Vector);
    /// CG's update `x += α p`, `r −= α q` (and `z = d ∘ r` with the preconditioner `pc =
    /// (d, z)`): `[Σ r·z, Σ r²]` (`Σ r²` twice without one).
    fn cg_update(
        &self,
        alpha: f64,
        x: &mut Self::Vector,
        r: &mut Self::Vector,
        pq: (&Self::Vector, &Self::Vector),
        pc: Option<(&Self::Vector, &mut Self::Vector)>,
    ) -> [f64; 2];
    /// Pipelined CG's fused update ([`linalg::pipe_update`]): the next reduction's three
    /// values.
    fn pipe_update(
        &self,
        alpha: f64,
        beta: f64,
        x: &mut Self::Vector,
        v: &mut Pipe<Self::Vector>,
    ) -> [f64; 3];
    /// The block's place in the record (grid coordinates and extent).
    fn place(&self) -> ([usize; 3], Dims);
    /// The largest error of `x` against the exact solution, where one is known.
    fn error_max(&mut self, x: &Self::Vector, cfg: &Config) -> Option<f64>;
    /// The owned values' runs in a vector's storage, `(first, length)`: gmres's and
    /// bicgstab's vector operations ([`vecs`]) and the preconditioners loop over them.
    fn runs(&self) -> Vec<(usize, usize)>;
    /// A vector's storage (its owned values at [`Operator::runs`]).
    fn data<'v>(&self, v: &'v Self::Vector) -> &'v [f64];
    /// A vector's storage, to write.
    fn data_mut<'v>(&self, v: &'v mut Self::Vector) -> &'v mut [f64];
    /// The rank's diagonal block of A (the couplings among its owned values), numbered in
    /// [`Operator::runs`]' order: block Jacobi's block.
    fn local_block(&self) -> LocalCsr;
}

/// Which owned points a product covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Every one.
    All,
    /// Interior piece k of [`Operator::interior_parts`].
    Interior(usize),
    /// Those whose product reads the halo.
    Shell,
}

/// Run the configured Krylov solver over the operator `op` on this rank (collective): its
/// record, its final iterate, and the operator back.
pub(crate) fn solve_op<C: Context, O: Operator>(
    ctx: &mut C,
    cfg: &Config,
    settings: &Settings,
    op: O,
    progress: Option<&dyn Progress>,
) -> Result<(RankRecord, O::Vector, O), Error> {
    let mut k = Krylov {
        cfg,
        pc: settings.pc,
        x: op.x0(),
        op,
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
        nb: None,
    };
    let specs = k.op.specs()?;
    let mut chans = ctx.open::<Sync>(&specs)?;
    if settings.exchange == Exchange::Neighbor {
        k.nb = Some(ctx.neighbor_exchange(&halo::neighbor_specs(&specs))?);
    }
    let (stop, true_value) = match settings.solver {
        KrylovSolver::PipeCg if settings.pc == Pc::BJacobi => {
            let mut red = ctx.reduction(3, ReduceOp::Sum)?;
            ctx.barrier()?;
            k.start = Instant::now();
            let mut pc = Precond::new(ctx, &k.op, settings)?;
            k.pipecg_block(ctx, &mut chans, &mut red, &mut pc)?
        }
        KrylovSolver::PipeCg => {
            let mut red = ctx.reduction(3, ReduceOp::Sum)?;
            ctx.barrier()?;
            k.start = Instant::now();
            k.pipecg(ctx, &mut chans, &mut red)?
        }
        KrylovSolver::Cg | KrylovSolver::CgOverlap => {
            ctx.barrier()?;
            k.start = Instant::now();
            let block = match settings.pc {
                Pc::BJacobi => Some(Precond::new(ctx, &k.op, settings)?),
                _ => None,
            };
            let overlap = settings.solver == KrylovSolver::CgOverlap;
            k.cg(ctx, &mut chans, overlap, block)?
        }
        KrylovSolver::Gmres => {
            ctx.barrier()?;
            k.start = Instant::now();
            let mut pc = Precond::new(ctx, &k.op, settings)?;
            k.gmres(ctx, &mut chans, settings.restart, &mut pc)?
        }
        KrylovSolver::BiCgStab => {
            ctx.barrier()?;
            k.start = Instant::now();
            let mut pc = Precond::new(ctx, &k.op, settings)?;
            k.bicgstab(ctx, &mut chans, &mut pc)?
        }
    };
    let time = k.start.elapsed();
    k.nb = None;
    let channels = close_all(chans)?;
    let mut messages = MessageTotals::default();
    for s in &channels {
        messages.add(s);
    }
    k.history.finish();
    let (coords, local) = k.op.place();
    let record = RankRecord {
        rank: ctx.rank(),
        backend: C::Backend::NAME.to_string(),
        coords,
        local,
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
        detect_rounds: None,
        certifications: std::mem::take(&mut k.certifications),
        history: std::mem::take(&mut k.history),
        error_max: k.op.error_max(&k.x, cfg),
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
    Ok((record, k.x, k.op))
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

/// One rank's Krylov solve over the operator `O`.
struct Krylov<'a, O: Operator> {
    cfg: &'a Config,
    /// The preconditioner.
    pc: Pc,
    /// The operator on this block.
    op: O,
    /// The iterate (its halo holds what the product reads beyond the system).
    x: O::Vector,
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
    /// `--exchange neighbor`: every halo swap (the product's and the true residual's) in
    /// this neighbourhood collective instead of over the channels; the same values.
    nb: Option<Box<dyn NeighborExchange>>,
}

/// A value of `p·Ap`, `r·z` or `δ − βγ/α` that breaks CG down: not positive, or NaN.
fn breaks(v: f64) -> bool {
    v.is_nan() || v <= 0.0
}

impl<O: Operator> Krylov<'_, O> {
    fn measure(&self, rr: f64) -> f64 {
        self.cfg.criterion.measure(rr, self.bnorm_sq)
    }

    fn met(&self, value: f64) -> bool {
        self.cfg.criterion.met(value)
    }

    /// Computation since `t` (with the slow rank's extra passes): for kernels that need the
    /// field.
    #[inline]
    fn computed(&mut self, t: Instant) {
        let (op, x) = (&self.op, &self.x);
        self.slow.after(1, || op.dot(x, x));
        self.parts.sweep += t.computed(Work::unmodelled());
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
    fn swap<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        h: &mut O::Vector,
    ) -> Result<(), Error> {
        let nb = self.nb.as_deref_mut();
        halo::swap_by(nb, chans, self.op.links(), self.it, h, &mut self.parts)
    }

    /// `dst = A src`, the halo of `src` exchanged first; returns Σ src·dst over the block.
    /// `overlap`: the interior is computed while the halo messages travel, piece by piece
    /// (the grid's planes), calling `poll` between pieces (pipecg progresses its reduction
    /// there), then the shell.
    fn spmv<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        src: &mut O::Vector,
        dst: &mut O::Vector,
        overlap: bool,
        poll: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<f64, Error> {
        if !overlap {
            self.swap(chans, src)?;
            let t = Instant::now();
            let sum = self.op.apply(src, dst, Part::All);
            self.computed(t);
            return Ok(sum);
        }
        halo::post(chans, self.op.links(), self.it, src, &mut self.parts)?;
        let mut sum = 0.0;
        for k in 0..self.op.interior_parts() {
            let t = Instant::now();
            sum += self.op.apply(src, dst, Part::Interior(k));
            self.computed(t);
            let t = Instant::now();
            poll()?;
            self.parts.reduced(t);
        }
        halo::complete(chans, self.op.links(), src, &mut self.parts)?;
        let t = Instant::now();
        sum += self.op.apply(src, dst, Part::Shell);
        self.computed(t);
        Ok(sum)
    }

    /// Setup: ‖b‖² (global) into `bnorm_sq`, and `r = b − A x₀` (x's halo swapped); returns
    /// the global `‖r₀‖²`. `scratch` is written.
    fn initial<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        r: &mut O::Vector,
        scratch: &mut O::Vector,
    ) -> Result<f64, Error> {
        let t = Instant::now();
        let b_local = self.op.b_sq((scratch, r));
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
        r: &mut O::Vector,
        rec: Option<&O::Vector>,
    ) -> Result<[f64; 2], Error> {
        halo::swap_by(
            self.nb.as_deref_mut(),
            chans,
            self.op.links(),
            self.it,
            &mut self.x,
            &mut self.parts,
        )?;
        let t = Instant::now();
        let local = self.op.residual(&self.x, r, rec);
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
        scratch: &mut O::Vector,
        rec: &O::Vector,
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
        scratch: &mut O::Vector,
        rec: &O::Vector,
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
        scratch: &mut O::Vector,
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
}
