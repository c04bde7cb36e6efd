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

use crate::clock::{Instant, Work};
use crate::config::{Config, Exchange, Pc};
use crate::field::Field;
use crate::geometry::{Dims, Face, Plan};
use crate::halo::{self, Halo};
use crate::kernel::{Region, Shape};
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
use chan_core::{close_all, Channel, ChannelSpec, ReduceOp, Sync};
use std::time::Duration;

/// What the Krylov solvers need of the operator A on one rank's block: the vectors (owned
/// values and the halo or ghosts the product reads), the halo's links, and the kernels over
/// the owned points, each fused as the solvers use it. The solvers are written once over
/// it ([`Krylov`]); the grid's 7-point operator ([`GridOp`]) and a matrix's row block
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
    let op = GridOp {
        shape: *block.field.shape(),
        diag,
        interior: block.interior,
        shell: block.shell,
        faces: block.faces,
        field: block.field,
    };
    // The record's error_max left the final iterate in the field.
    let (record, _, op) = solve_op(ctx, cfg, settings, op, progress)?;
    Ok((record, op.field))
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

/// The grid's operator `A = diag·I − adjacency` (the 7-point stencil) on a block: its
/// vectors are arrays of the block's shape with a one-cell halo, `b` is the problem's `h² f`
/// plus the Dirichlet values the starting iterate's halo holds.
pub(crate) struct GridOp {
    shape: Shape,
    diag: f64,
    /// The points of the block whose product reads no neighbour's halo, and the rest.
    interior: Region,
    shell: Vec<Region>,
    /// Faces with a neighbour; channel k serves `faces[k]`.
    faces: Vec<Face>,
    /// The starting iterate (its halo holds the Dirichlet values) and the problem's `h² f`.
    field: Field,
}

impl Operator for GridOp {
    type Link = Face;
    type Vector = Vector;
    fn links(&self) -> &[Face] {
        &self.faces
    }
    fn specs(&self) -> Result<Vec<ChannelSpec>, Error> {
        halo::specs(&self.field, &self.faces, 0, 1, 0)
    }
    fn zeros(&self) -> Vector {
        Vector::zeros(&self.shape)
    }
    fn inv_diag(&self) -> Vector {
        Vector::filled(&self.shape, 1.0 / self.diag)
    }
    fn x0(&self) -> Vector {
        let mut x = Vector::zeros(&self.shape);
        x.v.copy_from_slice(self.field.iterate());
        x
    }
    /// b: the residual of x = 0 with the Dirichlet values in the halo (and nothing from the
    /// neighbours: their faces are interior points, zero too).
    fn b_sq(&self, (zero, r): (&mut Vector, &mut Vector)) -> f64 {
        let shape = self.shape;
        zero.v.copy_from_slice(self.field.iterate());
        for (z, y) in (1..=shape.n.z).flat_map(|z| (1..=shape.n.y).map(move |y| (z, y))) {
            let b = shape.index(1, y, z);
            zero.v[b..b + shape.n.x].fill(0.0);
        }
        for &f in &self.faces {
            let nothing = vec![0.0; self.field.face_len(f)];
            zero.unpack(f, &nothing);
        }
        linalg::residual(&shape, self.diag, &zero.v, self.field.rhs(), &mut r.v, None)[0]
    }
    /// The interior's planes.
    fn interior_parts(&self) -> usize {
        self.interior.z.len()
    }
    fn apply(&self, src: &Vector, dst: &mut Vector, part: Part) -> f64 {
        let (shape, diag) = (&self.shape, self.diag);
        match part {
            Part::All => linalg::apply(shape, diag, &src.v, &mut dst.v, &Region::all(shape.n)),
            Part::Interior(k) => {
                let z = self.interior.z.start + k;
                let plane = Region {
                    z: z..z + 1,
                    ..self.interior.clone()
                };
                linalg::apply(shape, diag, &src.v, &mut dst.v, &plane)
            }
            Part::Shell => self
                .shell
                .iter()
                .map(|reg| linalg::apply(shape, diag, &src.v, &mut dst.v, reg))
                .sum(),
        }
    }
    fn residual(&self, x: &Vector, r: &mut Vector, rec: Option<&Vector>) -> [f64; 2] {
        let rec = rec.map(|v| &v.v[..]);
        linalg::residual(
            &self.shape,
            self.diag,
            &x.v,
            self.field.rhs(),
            &mut r.v,
            rec,
        )
    }
    fn dot(&self, a: &Vector, b: &Vector) -> f64 {
        linalg::dot(&self.shape, &a.v, &b.v)
    }
    fn dot3(&self, a: &Vector, d: &Vector, b: &Vector) -> f64 {
        linalg::dot3(&self.shape, &a.v, &d.v, &b.v)
    }
    fn scale(&self, d: &Vector, src: &Vector, dst: &mut Vector) -> f64 {
        linalg::scale(&self.shape, &d.v, &src.v, &mut dst.v)
    }
    fn direction(&self, z: &Vector, beta: f64, p: &mut Vector) {
        linalg::direction(&self.shape, &z.v, beta, &mut p.v);
    }
    fn cg_update(
        &self,
        alpha: f64,
        x: &mut Vector,
        r: &mut Vector,
        (p, q): (&Vector, &Vector),
        pc: Option<(&Vector, &mut Vector)>,
    ) -> [f64; 2] {
        linalg::cg_update(
            &self.shape,
            alpha,
            CgVectors {
                x: &mut x.v,
                r: &mut r.v,
                p: &p.v,
                q: &q.v,
                pc: pc.map(|(d, z)| (&d.v[..], &mut z.v[..])),
            },
        )
    }
    fn pipe_update(&self, alpha: f64, beta: f64, x: &mut Vector, v: &mut Pipe<Vector>) -> [f64; 3] {
        let vectors = PipeVectors {
            x: &mut x.v,
            r: &mut v.r.v,
            w: &mut v.w.v,
            n: &v.n.v,
            z: &mut v.z.v,
            s: &mut v.s.v,
            p: &mut v.p.v,
            pc: v.pc.as_mut().map(|pm| (&pm.d.v[..], &mut pm.m.v[..])),
        };
        linalg::pipe_update(&self.shape, alpha, beta, vectors)
    }
    fn place(&self) -> ([usize; 3], Dims) {
        let g = self.field.geometry();
        (g.coords, g.local)
    }
    /// (Leaves `x` in the field: the final iterate.)
    fn error_max(&mut self, x: &Vector, cfg: &Config) -> Option<f64> {
        self.field.iterate_mut().copy_from_slice(&x.v);
        self.field.error_max(&cfg.problem)
    }
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

    /// Preconditioned CG (`overlap`: cg-overlap). Returns why it stopped and the relative true
    /// residual of the final iterate.
    fn cg<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        overlap: bool,
    ) -> Result<(StopReason, f64), Error> {
        let pc = self.pc == Pc::Jacobi;
        let mut r = self.op.zeros();
        let mut p = self.op.zeros();
        let mut q = self.op.zeros();
        let mut scratch = self.op.zeros();
        // M = D⁻¹: the inverse diagonal, stored, and z = M r.
        let (d, mut z) = if pc {
            (self.op.inv_diag(), self.op.zeros())
        } else {
            (self.op.zeros(), self.op.zeros())
        };
        let rr = self.initial(ctx, chans, &mut r, &mut scratch)?;
        let precondition = |op: &O, r: &O::Vector, z: &mut O::Vector| -> f64 {
            if pc {
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
                let local = self.op.cg_update(
                    alpha,
                    &mut self.x,
                    &mut r,
                    (&p, &q),
                    pc.then_some((&d, &mut z)),
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

    /// Pipelined CG with one non-blocking reduction per iteration. Returns why it stopped and
    /// the relative true residual of the final iterate.
    fn pipecg<C: Context>(
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
