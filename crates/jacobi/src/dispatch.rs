//! The one place that picks a rank's path from the configuration, behind the entry point
//! [`crate::Solve`]: the solver (Krylov in `krylov/`; Jacobi and multisplitting in the loops
//! of `solver/`, the step a type parameter: [`Sweep`] or [`InnerSolve`]), the iterate
//! (one-plane [`Field`], a hybrid rank's team, deep halos: `deep/`, a matrix's row block)
//! with the capabilities its path requires ([`Overlapped`] needs an iterate that sweeps by
//! regions, [`InnerSolve`] one that solves its block), and the variant (sync loop, or the
//! async loop over Async or Racy channels). The shared-memory variants run on the same
//! loops (`shared/`). A new solver adds its file and one arm here.

use crate::config::{Config, Exchange, HaloDepth, Variant};
use crate::deep::{choose_depth, DeepField};
use crate::field::Field;
use crate::geometry::Plan;
use crate::hybrid::{with_team, RankTeam, TeamSetup};
use crate::iterate::Iterate;
use crate::method::Method;
use crate::multisplit::InnerSolve;
use crate::progress::Progress;
use crate::record::RankRecord;
use crate::solver::{Block, Ending, Overlapped, Run, Step, Swap, Sweep, Whole};
use crate::sparse::iterate::{BlockSystem, SparseIterate};
use crate::sparse::operator::RowOp;
use crate::start::{Checkpoint, Start};
use crate::Error;
use chan_core::traits::*;
use chan_core::{Async, Racy};

/// What one rank ends with: its record, and its final iterate when asked for.
#[derive(Debug)]
pub(crate) struct RankOutcome {
    /// Iterations, times, residuals, channel statistics.
    pub(crate) record: RankRecord,
    /// The block's final iterate (halo as last exchanged; a deep halo's owned points in the
    /// one-plane layout), when `solve_rank` was asked to keep it: the crate's tests assemble
    /// and compare solutions from it, and [`crate::Solve::run_with_iterate`] returns it
    /// (`--solution`). `None` otherwise.
    pub(crate) field: Option<Field>,
}

/// Run the configured solver on this rank over `plan` ([`crate::Solve::run`]), with a team
/// of `team.threads` per rank, also returning the final iterate when `keep` (the crate's
/// tests).
#[cfg_attr(not(test), allow(dead_code))] // the crate's tests
pub(crate) fn solve_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    keep: bool,
    team: RankTeam,
) -> Result<RankOutcome, Error> {
    solve_rank_from(ctx, cfg, plan, progress, keep, team, Restart::default())
}

/// Where a run starts and where its checkpoints go ([`crate::Solve::start`],
/// [`crate::Solve::checkpoint`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct Restart<'a> {
    pub(crate) begin: Option<&'a Start>,
    pub(crate) checkpoint: Option<&'a dyn Checkpoint>,
}

impl Restart<'_> {
    pub(crate) fn given(&self) -> bool {
        self.begin.is_some() || self.checkpoint.is_some()
    }
}

/// As [`solve_rank`], from `restart`'s start and with its checkpoints.
pub(crate) fn solve_rank_from<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    keep: bool,
    team: RankTeam,
    restart: Restart<'_>,
) -> Result<RankOutcome, Error> {
    cfg.check_threads_per_rank(team.threads, plan)?;
    let (scheme, exchange, depth, inner) = match cfg.method {
        Method::Krylov(_) if restart.checkpoint.is_some() => {
            return Err(Error::Checkpoint(format!(
                "{} (Krylov) takes no checkpoint",
                crate::Setting::Solver.words()
            )))
        }
        Method::Krylov(k) => {
            let diag = crate::linalg::SEVEN_POINT;
            let x0 = restart.begin.map(|s| s.x.as_slice());
            let (record, field) =
                crate::krylov::solve_rank(ctx, cfg, &k, plan, progress, diag, x0)?;
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
    let regions = (block.interior, block.shell);
    if team.threads > 1 {
        // Jacobi on one-plane halos (checked above): the rank's team sweeps its block.
        let rank = ctx.rank();
        let (record, field) = with_team(block.field, team, TeamSetup::rank(), |field| {
            let mut run = Run::new(
                cfg,
                scheme,
                rank,
                field,
                block.faces,
                regions,
                progress,
                Sweep,
            );
            run.exchange = exchange;
            restart.apply(&mut run);
            run_loop(ctx, run).map(|(record, field)| (record, field.into_field()))
        })?;
        return Ok(RankOutcome {
            record,
            field: keep.then_some(field),
        });
    }
    // `auto`: measured here, before the run's channels open (`deep/`, "Choosing k").
    let auto = match depth {
        HaloDepth::Fixed(_) => None,
        HaloDepth::Auto => Some(choose_depth(ctx, cfg, plan, &block.field, &block.faces)?),
    };
    let depth = auto
        .as_ref()
        .map_or(depth.fixed().unwrap_or(1), |a| a.chosen);
    let rank = ctx.rank();
    let (mut record, field) = if depth > 1 {
        let depth = usize::try_from(depth).expect("validated: at most 16");
        // Async and racy rows of owned points begin aligned (`deep/`, "Async and racy").
        let align = scheme.variant != Variant::Sync;
        let deep = DeepField::new(&block.geom, &cfg.problem, depth, align);
        let mut run = Run::new(
            cfg,
            scheme,
            rank,
            deep,
            block.faces,
            regions,
            progress,
            Sweep,
        );
        restart.apply(&mut run);
        let (record, deep) = run_loop(ctx, run)?;
        (record, deep.into_field(block.field))
    } else if let Some(spec) = inner {
        // Multisplitting: its work vectors allocated here, once.
        let step = InnerSolve::new(spec, &block.field);
        let mut run = Run::new(
            cfg,
            scheme,
            rank,
            block.field,
            block.faces,
            regions,
            progress,
            step,
        );
        restart.apply(&mut run);
        run_loop(ctx, run)?
    } else {
        let mut run = Run::new(
            cfg,
            scheme,
            rank,
            block.field,
            block.faces,
            regions,
            progress,
            Sweep,
        );
        run.exchange = exchange;
        restart.apply(&mut run);
        match exchange {
            Exchange::Overlap => run_loop_with::<_, _, _, Overlapped>(ctx, run)?,
            _ => run_loop(ctx, run)?,
        }
    };
    record.halo_auto = auto;
    Ok(RankOutcome {
        record,
        field: keep.then_some(field),
    })
}

impl<'a> Restart<'a> {
    /// Give `run` this start and these checkpoints.
    fn apply<F: Iterate, S: Step<F>>(&self, run: &mut Run<'a, F, S>) {
        run.begin = self.begin;
        run.checkpoint = self.checkpoint;
    }
}

/// The loop of the variant over `run`'s iterate, a due swap of the sync loop swapping the
/// whole halo before the sweep ([`Whole`]): the rank's record and the final iterate.
pub(crate) fn run_loop<C: Context, F: Iterate, S: Step<F>>(
    ctx: &mut C,
    run: Run<'_, F, S>,
) -> Result<(RankRecord, F), Error> {
    run_loop_with::<C, F, S, Whole>(ctx, run)
}

/// As [`run_loop`], the sync loop's swaps going as `X` says.
pub(crate) fn run_loop_with<C: Context, F: Iterate, S: Step<F>, X: Swap<F>>(
    ctx: &mut C,
    mut run: Run<'_, F, S>,
) -> Result<(RankRecord, F), Error> {
    let (stop, true_value, time, channels): Ending = match run.scheme.variant {
        Variant::Sync => run.sync::<C, X>(ctx)?,
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
/// ([`crate::Solve::system`]): its record and its rows of the final iterate.
pub(crate) fn solve_system_rank<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    sys: &SystemBlock,
    progress: Option<&dyn Progress>,
    restart: Restart<'_>,
) -> Result<(RankRecord, Vec<f64>), Error> {
    cfg.validate_matrix()?;
    let (scheme, inner) = match cfg.method {
        Method::Jacobi(j) => (j.iteration, None),
        Method::Multisplit(m) => (m.iteration, Some(m.inner)),
        Method::Krylov(_) if restart.checkpoint.is_some() => {
            return Err(Error::Checkpoint(format!(
                "{} (Krylov) takes no checkpoint",
                crate::Setting::Solver.words()
            )))
        }
        Method::Krylov(k) => {
            let mut block = BlockSystem::new(
                ctx.rank(),
                &sys.block,
                sys.b.clone(),
                sys.exact,
                sys.storage,
            );
            // A given start: x₀ (r₀ = b − A x₀; the iteration count starts at 0).
            if let Some(start) = restart.begin {
                block.x0 = Some(block.own_part(&start.x)?.to_vec());
            }
            let op = RowOp::new(block);
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
    let rank = ctx.rank();
    let (record, it) = match inner {
        Some(spec) => {
            let step = InnerSolve::counts_only(spec);
            let mut run = Run::new(
                cfg,
                scheme,
                rank,
                it,
                links,
                (none, Vec::new()),
                progress,
                step,
            );
            restart.apply(&mut run);
            run_loop(ctx, run)?
        }
        None => {
            let mut run = Run::new(
                cfg,
                scheme,
                rank,
                it,
                links,
                (none, Vec::new()),
                progress,
                Sweep,
            );
            restart.apply(&mut run);
            run_loop(ctx, run)?
        }
    };
    Ok((record, it.own().to_vec()))
}
