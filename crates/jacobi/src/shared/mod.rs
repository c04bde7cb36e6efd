//! The shared-memory variants (`--backend shared`): the paper's OpenMP section. The grid is
//! split in z over T threads (1-D decomposition); threads read their neighbours' boundary
//! planes directly, with no messages. Both run on Jacobi's loops (`solver/`), the loops every
//! other backend runs, with the certification there:
//!
//! * **sync**: one rank of a threads world whose team of T workers sweeps the whole grid
//!   (the hybrid rank's [`TeamField`](crate::hybrid::TeamField), `hybrid.rs`): worker t owns a
//!   fixed range of planes of one pair of global arrays for the whole solve (its thread
//!   pinned with `AIAC_SHARED_PIN=1`), sweeps it from the old array (neighbours' planes
//!   included) into the new one, and meets the others at one spinning, then yielding,
//!   barrier per sweep. The residual is summed plane by plane in z order, so the iterates,
//!   the residual history and the iteration count are those of a serial run, bit for bit.
//! * **async**: T ranks of a threads world, each iterating on its own slab, its halo read
//!   from its neighbours' boundary planes ([`planes::SlabField`]). Each inter-thread boundary
//!   plane has a lock, taken while the plane is written (by its owner, after each sweep) or
//!   read (by the neighbour, before each sweep).
//! * **racy**: the same with atomic boundary planes ([`AtomicF64`](chan_core::AtomicF64),
//!   relaxed) and no locks; the slabs' interior stays plain `f64`, so the sweep vectorises.
//!
//! A thread that finds nothing new in a neighbour's plane gives its core away as the run's
//! wait policy says (chan-core's `WaitPolicy`, as a threads-backend receive does).
//!
//! ## Rounds
//! Async and racy estimate the global residual by the async loop's rounds of the
//! non-blocking reduction, with fresh shares ([`Run::fresh_rounds`]): a thread starts its
//! share of a round only after a sweep that read its halos once the previous round had
//! returned, and a claim needs two rounds in a row below tolerance. A thread may be
//! descheduled between reading its halos and sweeping for a whole round: at the start, a
//! middle thread's share read while its neighbours' planes were still the initial ones is 0
//! beside a true residual of 2e-2 once they have swept. The next round's shares are all read
//! after it came back, hence the two rounds in a row. (A running sum that each thread updated
//! with the change of its share failed in two ways: a share computed against a neighbour's
//! plane many sweeps old stayed in the sum, and the deltas' rounding errors made a floor
//! under the estimate near a relative residual of 1e-8.) A claim is certified as on every
//! backend: the threads meet at a barrier, read current planes, sum the true residual, and
//! stop or carry on alike (`confirm`; without it they stop at once).

mod planes;
#[cfg(test)]
mod test;

use crate::config::{Config, ConfigError, Variant};
use crate::dispatch::run_loop;
use crate::field::{assemble, Field};
use crate::geometry::{Dims, Plan, ProcGrid};
use crate::hybrid::{with_team, RankTeam, TeamSetup};
use crate::progress::Progress;
use crate::record::{MessageTotals, RankRecord};
use crate::slow::Slowdown;
use crate::solver::{Block, Run, Sweep};
use crate::Error;
use chan_core::backend::{EnvVarError, WaitPolicy};
use chan_core::traits::*;
use chan_threads::World;
use planes::{AtomicPlanes, BoundaryPlanes, LockedPlanes, SharedPlanes, SlabField};

/// What a shared-memory run ends with.
#[derive(Debug)]
pub(crate) struct SharedOutcome {
    /// One record per thread.
    pub(crate) records: Vec<RankRecord>,
    /// The decomposition used (1 × 1 × T).
    #[cfg_attr(not(test), allow(dead_code))] // read by the crate's tests
    pub(crate) plan: Plan,
    /// The final global interior, x fastest.
    #[cfg_attr(not(test), allow(dead_code))] // read by the crate's tests
    pub(crate) solution: Vec<f64>,
}

impl Config {
    /// The decomposition of a shared-memory run over `threads` threads: always 1 × 1 × T.
    /// The block per rank is each thread's slab; the global grid must split evenly in z.
    /// Validates the configuration as [`Config::plan_in`] does for shared memory.
    pub fn shared_plan(&self, threads: usize) -> Result<Plan, ConfigError> {
        self.plan_in(&self.context(crate::Backend::SHARED), threads)
    }
}

/// Run on the threads of `plan` (1 × 1 × T) with shared memory ([`crate::Solve::run_shared`]),
/// calling `progress` from thread 0: one record per thread, and the final solution.
pub(crate) fn solve(
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
) -> Result<SharedOutcome, Error> {
    let pin = EnvVarError::switch(
        PIN_ENV,
        "1 (pin the sync workers, one per CPU), 0 or unset (unpinned)",
    )
    .map_err(|e| Error::Pool(e.to_string()))?;
    solve_pinned(cfg, plan, progress, pin)
}

/// The variable that pins the sync variant's workers, one per CPU: `1` (unset, empty or `0`:
/// unpinned). Off by default: on a machine where another program keeps one core busy, a
/// worker pinned to that core gets half of it and every sweep waits for that worker (the
/// 50³-per-thread run took 1.8× as long pinned as unpinned, docs/performance.md), where the
/// scheduler moves unpinned workers to the free core.
const PIN_ENV: &str = "AIAC_SHARED_PIN";

/// As [`solve`], the sync variant's workers pinned or not as `pin` says.
fn solve_pinned(
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    pin: bool,
) -> Result<SharedOutcome, Error> {
    let threads = plan.procs.size();
    if plan.procs != ProcGrid(Dims::new(1, 1, threads)) {
        return Err(ConfigError::Unsupported {
            setting: crate::Setting::Grid,
            value: plan.procs.to_string(),
            backend: crate::Backend::SHARED.name,
            why: crate::Limit::SharedGrid,
        }
        .into());
    }
    let scheme = scheme(cfg)?;
    let pool = |e: chan_threads::WorldError| Error::Pool(e.to_string());
    let (records, solution) = match cfg.variant() {
        Variant::Sync => sync(cfg, scheme, plan, progress, pin)?,
        variant => {
            // As a threads-backend world of as many ranks waits (`chan_threads::World::new`).
            let world = World::new(threads).map_err(pool)?;
            let policy = world.wait_policy();
            if variant == Variant::Async {
                asynchronous::<LockedPlanes>(cfg, scheme, plan, &world, policy, progress)?
            } else {
                asynchronous::<AtomicPlanes>(cfg, scheme, plan, &world, policy, progress)?
            }
        }
    };
    Ok(SharedOutcome {
        records,
        plan: *plan,
        solution,
    })
}

/// The scheme of a shared-memory run: Jacobi's, the only method it takes.
fn scheme(cfg: &Config) -> Result<crate::BlockIteration, ConfigError> {
    let refused = || ConfigError::Unsupported {
        setting: crate::Setting::Solver,
        value: cfg.solver().name().into(),
        backend: crate::Backend::SHARED.name,
        why: crate::Limit::SharedSolver(cfg.solver()),
    };
    let jacobi = cfg.solver() == crate::Solver::Jacobi;
    cfg.method
        .iteration()
        .filter(|_| jacobi)
        .copied()
        .ok_or_else(refused)
}

/// The record of thread `t` from a loop's record: the shared backend's name and place, and no
/// messages (threads read their neighbours' planes: no parts to time apart).
fn thread_record(mut r: RankRecord, plan: &Plan, t: usize) -> RankRecord {
    r.rank = t;
    r.backend = crate::Backend::SHARED.name.into();
    r.coords = [0, 0, t];
    r.local = plan.local;
    r.comm_s = (r.time_s - r.compute_s).max(0.0);
    r.breakdown = None;
    r.messages = MessageTotals::default();
    r.channels = Vec::new();
    r
}

/// The first error of a world's ranks, or their values.
fn all_ok<T>(outs: Vec<Result<T, Error>>) -> Result<Vec<T>, Error> {
    outs.into_iter().collect()
}

/// The sync variant: Jacobi's sync loop on one rank whose team of T workers sweeps the whole
/// grid, worker t owning planes of thread t's slab (the plan splits z evenly), slowed as
/// thread t would be. One record per thread, with thread t's largest error over its planes.
fn sync(
    cfg: &Config,
    scheme: crate::BlockIteration,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    pin: bool,
) -> Result<(Vec<RankRecord>, Vec<f64>), Error> {
    let threads = plan.procs.size();
    let whole = Plan {
        global: plan.global,
        procs: ProcGrid(Dims::new(1, 1, 1)),
        local: plan.global,
    };
    let world = World::new(1).map_err(|e| Error::Pool(e.to_string()))?;
    let setup = || TeamSetup {
        pin,
        slow: (0..threads).map(|t| cfg.slowdown_of(t)).collect(),
    };
    let mut outs = all_ok(world.run(|ctx| {
        let block = Block::of_rank(ctx, cfg, &whole)?;
        let regions = (block.interior, block.shell);
        with_team(block.field, RankTeam::alone(threads), setup(), |field| {
            let mut run = Run::new(cfg, scheme, 0, field, block.faces, regions, progress, Sweep);
            // The team slows its workers, not the loop its rank.
            run.slow = Slowdown::new(1.0);
            run_loop(ctx, run).map(|(record, field)| (record, field.into_field()))
        })
    }))?;
    let (record, field) = outs.pop().expect("a world of one rank");
    let solution = field.owned_values();
    let slab = plan.local.volume();
    let records = (0..threads)
        .map(|t| {
            let mut r = thread_record(record.clone(), plan, t);
            let mut mine = Field::new(&plan.geometry(t), &cfg.problem);
            mine.set_owned(&solution[t * slab..(t + 1) * slab]);
            r.error_max = mine.error_max(&cfg.problem);
            r
        })
        .collect();
    Ok((records, solution))
}

/// The async (locks) and racy (atomics) variants: Jacobi's async loop on the T ranks of
/// `world`, rank t over its slab with the halo read from the shared planes `P`, in rounds of
/// fresh shares. Thread 0 alone reports progress.
fn asynchronous<P: BoundaryPlanes>(
    cfg: &Config,
    scheme: crate::BlockIteration,
    plan: &Plan,
    world: &World,
    policy: WaitPolicy,
    progress: Option<&dyn Progress>,
) -> Result<(Vec<RankRecord>, Vec<f64>), Error> {
    let threads = plan.procs.size();
    let shared = SharedPlanes::<P>::new(threads, plan.local.x * plan.local.y, policy);
    let outs = all_ok(world.run(|ctx| {
        let t = ctx.rank();
        let geom = plan.geometry(t);
        let field = Field::new(&geom, &cfg.problem);
        let regions = field.interior_and_shell();
        let slab = SlabField::new(field, &shared, t);
        let hook = if t == 0 { progress } else { None };
        // No channels: the halo comes from the planes.
        let mut run = Run::new(cfg, scheme, t, slab, Vec::new(), regions, hook, Sweep);
        run.fresh_rounds = true;
        let (record, slab) = run_loop(ctx, run)?;
        Ok((
            thread_record(record, plan, t),
            geom,
            slab.into_field().owned_values(),
        ))
    }))?;
    let mut records = Vec::with_capacity(threads);
    let mut blocks = Vec::with_capacity(threads);
    for (rec, geom, vals) in outs {
        records.push(rec);
        blocks.push((geom, vals));
    }
    Ok((records, assemble(plan.global, &blocks)))
}
