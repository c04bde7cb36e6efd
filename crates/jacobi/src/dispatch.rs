//! The distributed entry points and the one place that picks a rank's path from the
//! configuration: the solver (Krylov in `krylov.rs`; Jacobi and multisplitting in the loops of
//! `solver.rs`), the iterate (one-plane [`Field`], or deep halos: `deep.rs`) and the variant
//! (sync loop, or the async loop over Async or Racy channels). The shared-memory variants
//! have their own entry point, [`crate::solve_shared`] (`shared.rs`). A new solver adds its
//! file and one arm here.

use crate::config::{Config, Exchange, HaloDepth, Variant};
use crate::deep::{choose_depth, DeepField};
use crate::field::Field;
use crate::geometry::Plan;
use crate::hybrid::{with_team, RankTeam};
use crate::iterate::Iterate;
use crate::method::Method;
use crate::multisplit::InnerSolve;
use crate::progress::Progress;
use crate::record::RankRecord;
use crate::solver::{Block, Ending, Run};
use crate::sparse::iterate::{BlockSystem, SparseIterate};
use crate::sparse::operator::RowOp;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Async, Racy};

/// Run the configured solver on this rank: the distributed entry point (collective: every
/// rank of `ctx` calls it with the same configuration). Returns this rank's record; gather them
/// with [`crate::gather_records`].
pub fn solve<C: Context>(ctx: &mut C, cfg: &Config) -> Result<RankRecord, Error> {
    let plan = cfg.plan(ctx.size())?;
    solve_with(ctx, cfg, &plan, None)
}

/// As [`solve`], over the decomposition `plan` that [`Config::plan`] gave for this world
/// (computed once by the caller, who also reports it), calling `progress` (when given) as the
/// run goes: at checks (sync) or completed reduction rounds (async, racy), at most 10 times a
/// second. Give the hook to one rank.
pub fn solve_with<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
) -> Result<RankRecord, Error> {
    solve_with_threads(ctx, cfg, plan, progress, RankTeam::alone(1))
}

/// As [`solve_with`], each rank sweeping its block with `team.threads` workers (hybrid
/// ranks, `hybrid.rs`; 1: the rank's thread alone), placed as `team` says, which
/// [`Config::check_threads_per_rank`] accepts for this configuration. A sync run's iterates,
/// residual history and iteration count are those of one thread per rank, bit for bit.
pub fn solve_with_threads<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    team: RankTeam,
) -> Result<RankRecord, Error> {
    solve_rank(ctx, cfg, plan, progress, false, team).map(|o| o.record)
}

/// What one rank ends with: its record, and its final iterate when asked for.
#[derive(Debug)]
pub(crate) struct RankOutcome {
    /// Iterations, times, residuals, channel statistics.
    pub(crate) record: RankRecord,
    /// The block's final iterate (halo as last exchanged; a deep halo's owned points in the
    /// one-plane layout), when `solve_rank` was asked to keep it: the crate's tests assemble
    /// and compare solutions from it. `None` in production runs, which give it no copy.
    #[cfg_attr(not(test), allow(dead_code))] // read by the crate's tests
    pub(crate) field: Option<Field>,
}

/// As [`solve_with`], also returning the final iterate when `keep` (the crate's tests).
pub(crate) fn solve_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    keep: bool,
    team: RankTeam,
) -> Result<RankOutcome, Error> {
    cfg.check_threads_per_rank(team.threads, plan)?;
    let (scheme, exchange, depth, inner) = match cfg.method {
        Method::Krylov(k) => {
            let diag = crate::linalg::SEVEN_POINT;
            let (record, field) = crate::krylov::solve_rank(ctx, cfg, &k, plan, progress, diag)?;
            return Ok(RankOutcome {
                record,
                field: keep.then_some(field),
            });
        }
        Method::Jacobi(j) => (j.iteration, j.exchange, j.halo_depth, None),
        Method::Multisplit(m) => (
            m.iteration,
            Exchange::Waitall,
            HaloDepth::Fixed(1),
            Some(m.inner),
        ),
    };
    let block = Block::of_rank(ctx, cfg, plan)?;
    if team.threads > 1 {
        // Jacobi on one-plane halos (checked above): the rank's team sweeps its block.
        let regions = (block.interior, block.shell);
        let rank = ctx.rank();
        let (record, field) = with_team(block.field, team, |field| {
            let mut run = Run::new(cfg, scheme, rank, field, block.faces, regions, progress);
            run.exchange = exchange;
            run_loop(ctx, run).map(|(record, field)| (record, field.into_field()))
        })?;
        return Ok(RankOutcome {
            record,
            field: keep.then_some(field),
        });
    }
    // `auto`: measured here, before the run's channels open (`deep.rs`, "Choosing k").
    let auto = match depth {
        HaloDepth::Fixed(_) => None,
        HaloDepth::Auto => Some(choose_depth(ctx, cfg, plan, &block.field, &block.faces)?),
    };
    let depth = auto
        .as_ref()
        .map_or(depth.fixed().unwrap_or(1), |a| a.chosen);
    let regions = (block.interior, block.shell);
    if depth > 1 {
        let depth = usize::try_from(depth).expect("validated: at most 16");
        // Async and racy rows of owned points begin aligned (`deep.rs`, "Async and racy").
        let align = scheme.variant != Variant::Sync;
        let deep = DeepField::new(&block.geom, &cfg.problem, depth, align);
        let run = Run::new(
            cfg,
            scheme,
            ctx.rank(),
            deep,
            block.faces,
            regions,
            progress,
        );
        let (mut record, deep) = run_loop(ctx, run)?;
        record.halo_auto = auto;
        return Ok(RankOutcome {
            record,
            field: keep.then(|| deep.into_field(block.field)),
        });
    }
    let mut run = Run::new(
        cfg,
        scheme,
        ctx.rank(),
        block.field,
        block.faces,
        regions,
        progress,
    );
    run.exchange = exchange;
    // Multisplitting: its work vectors allocated here, once.
    run.inner = inner.map(|s| InnerSolve::new(s, &run.field));
    let (mut record, field) = run_loop(ctx, run)?;
    record.halo_auto = auto;
    Ok(RankOutcome {
        record,
        field: keep.then_some(field),
    })
}

/// The loop of the variant over `run`'s iterate: the rank's record and the final iterate.
pub(crate) fn run_loop<C: Context, F: Iterate>(
    ctx: &mut C,
    mut run: Run<'_, F>,
) -> Result<(RankRecord, F), Error> {
    let (stop, true_value, time, channels): Ending = match run.scheme.variant {
        Variant::Sync => run.sync(ctx)?,
        Variant::Async => run.asynchronous::<C, Async>(ctx)?,
        Variant::Racy => run.asynchronous::<C, Racy>(ctx)?,
    };
    let error_max = run.field.error_max(&run.cfg.problem);
    let record = run.record(
        C::Backend::NAME,
        (stop, true_value, time),
        &channels,
        error_max,
    );
    Ok((record, run.field))
}

/// One rank's part of a sparse system `A x = b` (`--matrix`): its row block of `A`, its part
/// of `b`, and the exact solution's value at every row when it is known to be one value (b
/// = A·1: 1), which the record's `error_max` then measures against.
#[derive(Debug, Clone)]
pub struct SystemBlock {
    /// The rank's rows of `A`, their ghost columns and exchange.
    pub block: crate::sparse::RowBlock,
    /// The rank's part of `b` (`block.rows()` values).
    pub b: Vec<f64>,
    /// The solution's value at every row, when known.
    pub exact: Option<f64>,
    /// How the rows are stored for the kernels (CSR, or the most compact the block allows).
    pub storage: crate::sparse::MatrixStorage,
}

/// Solve a sparse system from x = 0 with the configured method, this rank holding `sys`
/// (collective: every rank calls it with the same configuration and its own block). The
/// loops, certification and record are those of the grid's solvers ([`solve_with`]):
/// Jacobi's sync, async and racy loops over the row block's ghost channels,
/// multisplitting with inner CG or Jacobi on the block, and the Krylov solvers (cg,
/// cg-overlap, pipecg, with or without the Jacobi preconditioner) over the block as their
/// operator. [`Config::validate_matrix`] says
/// which settings apply to a matrix.
///
/// Returns this rank's record and its part of the final iterate x (its rows).
pub fn solve_system<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    sys: &SystemBlock,
    progress: Option<&dyn Progress>,
) -> Result<(RankRecord, Vec<f64>), Error> {
    solve_system_rank(ctx, cfg, sys, progress)
}

/// [`solve_system`].
pub(crate) fn solve_system_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    sys: &SystemBlock,
    progress: Option<&dyn Progress>,
) -> Result<(RankRecord, Vec<f64>), Error> {
    cfg.validate_matrix()?;
    let (scheme, inner) = match cfg.method {
        Method::Jacobi(j) => (j.iteration, None),
        Method::Multisplit(m) => (m.iteration, Some(m.inner)),
        Method::Krylov(k) => {
            let op = RowOp::new(BlockSystem::new(
                ctx.rank(),
                &sys.block,
                sys.b.clone(),
                sys.exact,
                sys.storage,
            ));
            let (record, x, op) = crate::krylov::solve_op(ctx, cfg, &k, op, progress)?;
            return Ok((record, op.own(&x).to_vec()));
        }
    };
    let block = BlockSystem::new(
        ctx.rank(),
        &sys.block,
        sys.b.clone(),
        sys.exact,
        sys.storage,
    );
    let it = SparseIterate::new(block, inner.map(|s| s.solver));
    let links = it.links();
    let none = crate::kernel::Region {
        x: 0..0,
        y: 0..0,
        z: 0..0,
    };
    let mut run = Run::new(
        cfg,
        scheme,
        ctx.rank(),
        it,
        links,
        (none, Vec::new()),
        progress,
    );
    run.inner = inner.map(InnerSolve::counts_only);
    let (record, it) = run_loop(ctx, run)?;
    Ok((record, it.own().to_vec()))
}
