//! The one way in: [`Solve`], a builder over a [`Config`] that runs it on a rank of any
//! chan-core [`Context`] ([`Solve::run`]), on a sparse system's row block
//! ([`Solve::system`], then [`Solve::run`]), or on threads of this process with shared
//! memory ([`Solve::run_shared`]).

use crate::config::{Config, ConfigError};
use crate::dispatch::{solve_rank_from, solve_system_rank, RankOutcome, Restart, SystemBlock};
use crate::geometry::Plan;
use crate::hybrid::RankTeam;
use crate::progress::Progress;
use crate::record::RankRecord;
use crate::start::{Checkpoint, Start};
use crate::Error;
use chan_core::Context;

/// A run of the configured solver, built up from its configuration and run once.
///
/// `Solve::new(&cfg)` alone runs the configuration as it is, computing the decomposition
/// itself; each optional piece is one call:
///
/// * [`plan`](Solve::plan): the decomposition [`Config::plan`] (or, for shared memory,
///   [`Config::shared_plan`]) gave, computed once by a caller who also reports it;
/// * [`hook`](Solve::hook): a [`Progress`] called as the run goes, at checks (sync) or
///   completed reduction rounds (async, racy), at most 10 times a second (give it to one
///   rank; shared memory calls it from thread 0);
/// * [`team`](Solve::team): hybrid ranks, each sweeping its block with a team of threads
///   ([`RankTeam`]; a sync run's iterates, residual history and iteration count are those of
///   one thread per rank, bit for bit);
/// * [`start`](Solve::start), [`checkpoint`](Solve::checkpoint): the iterate the run starts
///   from (and the iterations it had done: a resumed run), and where its checkpoints go
///   ([`Start`], [`Checkpoint`]);
/// * [`system`](Solve::system): a sparse system's row block instead of the grid
///   ([`SystemBlock`]); its run also returns the rank's part of the solution.
///
/// [`run`](Solve::run) is collective: every rank of the context calls it with the same
/// configuration, and gets its own [`RankRecord`] (gather them with
/// [`crate::gather_records`]). [`run_shared`](Solve::run_shared) runs every thread itself
/// and returns one record per thread.
///
/// ```
/// use chan_threads::World;
/// use jacobi::{Config, Dims, Jacobi, SizeSpec, Solve, Variant};
///
/// let cfg = Config {
///     method: Jacobi::new(Variant::Sync).into(),
///     size: SizeSpec::Global(Dims::cube(8)),
///     ..Config::default()
/// };
/// // Two ranks of the threads backend, the decomposition computed once.
/// let plan = cfg.plan(2).unwrap();
/// let records = World::new(2)
///     .unwrap()
///     .run(|ctx| Solve::new(&cfg).plan(&plan).run(ctx).unwrap());
/// // The same run with shared memory: one record per thread, the same iterations.
/// let shared = Solve::new(&cfg).run_shared(2).unwrap();
/// assert_eq!(records[0].iterations, shared[0].iterations);
/// assert!(records.iter().chain(&shared).all(|r| r.converged));
/// ```
#[derive(Clone, Copy)]
#[must_use = "a Solve does nothing until it is run"]
pub struct Solve<'a, On = Grid> {
    cfg: &'a Config,
    plan: Option<&'a Plan>,
    hook: Option<&'a dyn Progress>,
    team: RankTeam,
    restart: Restart<'a>,
    on: On,
}

/// What a [`Solve`] runs on: the configuration's grid (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Grid;

/// What a [`Solve`] runs on: a sparse system's row block ([`Solve::system`]).
#[derive(Debug, Clone, Copy)]
pub struct System<'a>(&'a SystemBlock);

impl std::fmt::Debug for Solve<'_, Grid> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Solve")
            .field("plan", &self.plan)
            .field("hook", &self.hook.is_some())
            .field("team", &self.team)
            .finish_non_exhaustive()
    }
}

impl<'a> Solve<'a> {
    /// A run of `cfg` on the grid, one thread per rank, with no progress hook.
    pub fn new(cfg: &'a Config) -> Self {
        Solve {
            cfg,
            plan: None,
            hook: None,
            team: RankTeam::alone(1),
            restart: Restart::default(),
            on: Grid,
        }
    }

    /// Run over `plan`, the decomposition [`Config::plan`] gave for this world (for
    /// [`Solve::run_shared`]: [`Config::shared_plan`], whose 1 × 1 × T process grid names the
    /// thread count), instead of computing it again.
    pub fn plan(self, plan: &'a Plan) -> Self {
        Solve {
            plan: Some(plan),
            ..self
        }
    }

    /// Each rank sweeps its block with `team.threads` workers placed as `team` says
    /// ([`Config::check_threads_per_rank`] says which configurations take them).
    pub fn team(self, team: RankTeam) -> Self {
        Solve { team, ..self }
    }

    /// Solve the sparse system `A x = b` of which this rank holds `sys` instead of the grid,
    /// from x = 0 (or [`Solve::start`]): the same loops, certification and record as the
    /// grid's (Jacobi's sync, async and racy loops over the row block's ghost channels,
    /// multisplitting with inner CG or Jacobi, the Krylov solvers with the block as their
    /// operator);
    /// [`Config::validate_matrix`] says which settings apply.
    pub fn system(self, sys: &'a SystemBlock) -> Solve<'a, System<'a>> {
        Solve {
            cfg: self.cfg,
            plan: None,
            hook: self.hook,
            team: self.team,
            restart: self.restart,
            on: System(sys),
        }
    }

    /// Run on this rank of `ctx` (collective): this rank's record.
    pub fn run<C: Context>(self, ctx: &mut C) -> Result<RankRecord, Error> {
        self.rank_run(ctx, false).map(|o| o.record)
    }

    /// This rank's run on the plan given, or on the configuration's own for `ctx`'s ranks;
    /// `keep`: the final iterate kept.
    fn rank_run<C: Context>(self, ctx: &mut C, keep: bool) -> Result<RankOutcome, Error> {
        let computed;
        let plan = match self.plan {
            Some(p) => p,
            None => {
                computed = self.cfg.plan(ctx.size())?;
                &computed
            }
        };
        solve_rank_from(
            ctx,
            self.cfg,
            plan,
            self.hook,
            keep,
            self.team,
            self.restart,
        )
    }

    /// As [`Solve::run`], also returning this rank's block of the final iterate (its owned
    /// points, x fastest); [`assemble`] puts the ranks' blocks together.
    pub fn run_with_iterate<C: Context>(
        self,
        ctx: &mut C,
    ) -> Result<(RankRecord, Vec<f64>), Error> {
        let o = self.rank_run(ctx, true)?;
        let x = o.field.map(|f| f.owned_values()).unwrap_or_default();
        Ok((o.record, x))
    }

    /// Run on `threads` threads of this process with shared memory (`--backend shared`, the
    /// paper's OpenMP section): one record per thread. Hybrid ranks do not apply.
    pub fn run_shared(self, threads: usize) -> Result<Vec<RankRecord>, Error> {
        if self.restart.given() {
            return Err(Error::Start(format!(
                "{} shared starts from the problem's iterate and takes no checkpoint",
                crate::Setting::Backend.words()
            )));
        }
        if self.team.threads != 1 {
            self.cfg.check_in(&crate::Context {
                threads_per_rank: self.team.threads,
                ..self.cfg.context(crate::Backend::SHARED)
            })?;
        }
        let plan = match self.plan {
            Some(&p) if p.procs.size() == threads => p,
            Some(p) => {
                return Err(ConfigError::GridSize {
                    grid: p.procs,
                    size: threads,
                }
                .into())
            }
            None => self.cfg.shared_plan(threads)?,
        };
        crate::shared::solve(self.cfg, &plan, self.hook).map(|o| o.records)
    }
}

impl<'a, On> Solve<'a, On> {
    /// Call `progress` as the run goes.
    pub fn hook(self, progress: &'a dyn Progress) -> Self {
        Solve {
            hook: Some(progress),
            ..self
        }
    }

    /// Start from `start` instead of the problem's iterate (the grid's interior points x
    /// fastest; a checkpoint's iterate and iteration count to resume from it).
    pub fn start(self, start: &'a Start) -> Self {
        let restart = Restart {
            begin: Some(start),
            ..self.restart
        };
        Solve { restart, ..self }
    }

    /// Hand a checkpoint to `checkpoint` every [`Checkpoint::every`] iterations (the sync
    /// variant).
    pub fn checkpoint(self, checkpoint: &'a dyn Checkpoint) -> Self {
        let restart = Restart {
            checkpoint: Some(checkpoint),
            ..self.restart
        };
        Solve { restart, ..self }
    }
}

impl Solve<'_, System<'_>> {
    /// Run on this rank of `ctx` (collective, every rank with its own block): this rank's
    /// record and its part of the final iterate x (its rows).
    pub fn run<C: Context>(self, ctx: &mut C) -> Result<(RankRecord, Vec<f64>), Error> {
        solve_system_rank(ctx, self.cfg, self.on.0, self.hook, self.restart)
    }
}

/// The global iterate, the grid's interior points x fastest, from every rank's block of
/// `plan` in rank order (each as [`Solve::run_with_iterate`] gives it).
pub fn assemble(plan: &Plan, blocks: &[&[f64]]) -> Vec<f64> {
    let blocks: Vec<(crate::geometry::Geometry, Vec<f64>)> = blocks
        .iter()
        .enumerate()
        .map(|(r, b)| (crate::geometry::Geometry::new(plan, r), b.to_vec()))
        .collect();
    crate::field::assemble(plan.global, &blocks)
}
