//! Checking a [`Config`] for a run: each value in its range, every setting it holds away from
//! its default applying where it runs ([`Setting::applies`]), and the values that depend on
//! each other and on where it runs going together. Every rank checks the same configuration
//! against the same world size, so bad input fails everywhere, at once, with one message.

use super::{check_given, Backend, ConfigError, Context, DepthConflict, Limit, Operator, Setting};
use crate::config::{Config, Decomp, Detect, Exchange, HaloDepth, Inner, Pc, RacyRead};
use crate::config::{Variant, MAX_HALO_DEPTH, MAX_SLOWDOWN, MIN_TOL};
use crate::geometry::{Dims, Plan, ProcGrid};
use crate::method::{BlockIteration, Jacobi, KrylovSolver, Method};
use crate::problem::{Problem, StopCriterion};
use crate::settings::error::short;
use crate::MAX_THREADS_PER_RANK;

impl Config {
    /// The context of a run of this configuration on `backend`: one thread per rank, on the
    /// grid's problem.
    pub fn context(&self, backend: Backend) -> Context {
        Context {
            solver: self.solver(),
            variant: self.variant(),
            backend,
            threads_per_rank: 1,
            operator: Operator::Grid(self.problem),
        }
    }

    /// The settings this configuration holds away from their defaults, with their values:
    /// what a run of it was told beyond the method and the problem.
    pub fn set_settings(&self) -> Vec<(Setting, String)> {
        let mut out: Vec<(Setting, String)> = Vec::new();
        if let Some(it) = self.method.iteration() {
            let d = BlockIteration::new(it.variant);
            if it.halo_every != d.halo_every {
                out.push((Setting::HaloEvery, it.halo_every.to_string()));
            }
            if it.max_in_flight != d.max_in_flight {
                out.push((Setting::MaxInFlight, it.max_in_flight.to_string()));
            }
            if it.racy_read != RacyRead::default() {
                out.push((Setting::RacyRead, it.racy_read.name().into()));
            }
            if it.detect != Detect::default() {
                out.push((Setting::Detect, it.detect.name().into()));
            }
        }
        let exchange = match &self.method {
            Method::Jacobi(j) => {
                if j.halo_depth != HaloDepth::default() {
                    out.push((Setting::HaloDepth, j.halo_depth.to_string()));
                }
                j.exchange
            }
            Method::Krylov(k) => {
                if k.pc != Pc::default() {
                    out.push((Setting::Pc, k.pc.name().into()));
                }
                if k.pc_sub != crate::PcSub::default() {
                    out.push((Setting::PcSub, k.pc_sub.name().into()));
                }
                if k.restart != crate::DEFAULT_RESTART {
                    out.push((Setting::Restart, k.restart.to_string()));
                }
                k.exchange
            }
            Method::Multisplit(_) => Exchange::default(),
        };
        if exchange != Exchange::default() {
            out.push((Setting::Exchange, exchange.name().into()));
        }
        if !self.confirm {
            out.push((Setting::Confirm, "false".into()));
        }
        if let Problem::Laplace { offset } = self.problem {
            if offset != 0.0 {
                out.push((Setting::Offset, short(offset)));
            }
        }
        if let Some(g) = self.grid {
            out.push((Setting::Grid, g.to_string()));
        }
        if self.decomp != Decomp::default() {
            out.push((Setting::Decomp, "z".into()));
        }
        out
    }

    /// Check every setting that does not depend on the world size, for a run on any channel
    /// backend ([`Config::check_in`] with [`Backend::CHANNELS`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_in(&self.context(Backend::CHANNELS))
    }

    /// [`Config::validate`] for a sparse matrix's run ([`crate::Solve::system`]): the
    /// relative-residual criterion; Jacobi with one-plane ghosts exchanged all at once;
    /// multisplitting with inner CG or Jacobi; every Krylov solver. (The grid's size and
    /// problem are not read.)
    pub fn validate_matrix(&self) -> Result<(), ConfigError> {
        self.check_in(&Context {
            operator: Operator::Matrix,
            ..self.context(Backend::CHANNELS)
        })
    }

    /// Check this configuration for a run in `ctx`, before the world size is known: every
    /// value in its range, every setting held away from its default applying in `ctx`
    /// ([`Setting::applies`]), and the values that depend on each other and on `ctx` going
    /// together.
    pub fn check_in(&self, ctx: &Context) -> Result<(), ConfigError> {
        self.check_ranges(ctx)?;
        let update_norm = matches!(self.criterion, StopCriterion::UpdateNorm { .. });
        match &self.method {
            Method::Krylov(k) if update_norm => {
                return Err(ConfigError::UpdateNorm(Some(k.solver.solver())))
            }
            Method::Multisplit(_) if update_norm => {
                return Err(ConfigError::UpdateNorm(Some(crate::Solver::Multisplit)))
            }
            _ if update_norm && ctx.operator == Operator::Matrix => {
                return Err(ConfigError::UpdateNorm(None))
            }
            _ => {}
        }
        // Hybrid ranks are a setting of the run too.
        let team = (ctx.threads_per_rank != 1)
            .then(|| (Setting::ThreadsPerRank, ctx.threads_per_rank.to_string()));
        check_given(
            ctx,
            team.into_iter()
                .chain(self.set_settings())
                .map(|(s, v)| (s, std::borrow::Cow::Owned(v))),
        )?;
        if ctx.backend.shared_memory && !matches!(self.method, Method::Jacobi(_)) {
            return Err(ConfigError::Unsupported {
                setting: Setting::Solver,
                value: self.solver().name().into(),
                backend: ctx.backend.name,
                why: Limit::SharedSolver(self.solver()),
            });
        }
        match &self.method {
            Method::Jacobi(j) => self.check_jacobi(j, ctx),
            Method::Krylov(k) => match (k.solver, k.exchange) {
                (KrylovSolver::Cg, x @ (Exchange::Blocking | Exchange::Overlap)) => {
                    Err(ConfigError::CgExchange(x))
                }
                (_, Exchange::Neighbor) => neighbor_on(ctx),
                _ => Ok(()),
            },
            Method::Multisplit(m) if ctx.operator == Operator::Matrix => match m.inner.solver {
                Inner::Cg32 => Err(ConfigError::MatrixInner),
                _ => Ok(()),
            },
            Method::Multisplit(_) => Ok(()),
        }
    }

    /// Each value in its range, whatever the others.
    fn check_ranges(&self, ctx: &Context) -> Result<(), ConfigError> {
        let tol = self.criterion.tol();
        let max = match self.criterion {
            StopCriterion::RelativeResidual { .. } => 1.0,
            StopCriterion::UpdateNorm { .. } => f64::MAX,
        };
        if !(MIN_TOL..=max).contains(&tol) {
            return Err(ConfigError::Tolerance { tol, max });
        }
        if self.check_every == 0 {
            return Err(ConfigError::Zero(Setting::CheckEvery));
        }
        if let Some(it) = self.method.iteration() {
            it.validate()?;
        }
        if let Method::Krylov(k) = &self.method {
            if k.restart == 0 {
                return Err(ConfigError::Zero(Setting::Restart));
            }
            if k.restart > crate::MAX_RESTART {
                return Err(ConfigError::RestartTooLarge(k.restart));
            }
            if k.pc_sub != crate::PcSub::default() && k.pc != Pc::BJacobi {
                return Err(ConfigError::PcSubWithout(k.pc));
            }
        }
        if let Method::Jacobi(Jacobi {
            halo_depth: HaloDepth::Fixed(k),
            ..
        }) = self.method
        {
            if !(1..=MAX_HALO_DEPTH).contains(&k) {
                return Err(ConfigError::HaloDepthValue(k.to_string()));
            }
        }
        if let Some(inner) = self.inner_spec() {
            if !(inner.tol > 0.0 && inner.tol < 1.0) {
                return Err(ConfigError::InnerTol(inner.tol));
            }
            if inner.max == 0 {
                return Err(ConfigError::Zero(Setting::InnerMax));
            }
        }
        if self.max_iters == 0 {
            return Err(ConfigError::Zero(Setting::MaxIters));
        }
        self.problem.validate()?;
        let (size, dims) = match self.size {
            crate::SizeSpec::Local(d) => (Setting::Local, d),
            crate::SizeSpec::Global(d) => (Setting::Global, d),
        };
        if dims.to_array().contains(&0) {
            return Err(ConfigError::ZeroExtent { size, dims });
        }
        if let Some(s) = self.slow {
            if !(1.0..=MAX_SLOWDOWN).contains(&s.factor) {
                return Err(ConfigError::Slowdown(s.factor));
            }
        }
        match ctx.threads_per_rank {
            0 => Err(ConfigError::Zero(Setting::ThreadsPerRank)),
            t if t > MAX_THREADS_PER_RANK => Err(ConfigError::ThreadsPerRank {
                threads: t,
                planes_of: None,
            }),
            _ => Ok(()),
        }
    }

    /// What Jacobi's values need of each other and of `ctx`: the deep exchange its own
    /// (in the sync variant the default exchange, a halo every iteration, and a check period
    /// K that is a multiple of k, so that the fused residual of the k-th sweep is the one
    /// k = 1 computes at the same iteration and the run stops at the same iteration); the
    /// snapshot a one-plane block of one thread on the grid; hybrid ranks sweeping whole
    /// planes; the neighbourhood exchange a backend that has it. `auto` always runs: it
    /// chooses among the depths that would (k = 1 where none does).
    fn check_jacobi(&self, j: &Jacobi, ctx: &Context) -> Result<(), ConfigError> {
        if let HaloDepth::Fixed(depth @ 2..) = j.halo_depth {
            let sync = j.iteration.variant == Variant::Sync;
            let conflict = if !sync {
                None // async and racy: any N, any K (docs/architecture.md)
            } else if j.exchange != Exchange::Waitall {
                Some(DepthConflict::Exchange(j.exchange))
            } else if j.iteration.halo_every != 1 {
                Some(DepthConflict::HaloEvery(j.iteration.halo_every))
            } else if !self.check_every.is_multiple_of(depth) {
                Some(DepthConflict::CheckEvery(self.check_every))
            } else {
                None
            };
            if let Some(conflict) = conflict {
                return Err(ConfigError::HaloDepthWith {
                    depth: j.halo_depth,
                    conflict,
                });
            }
        }
        if j.iteration.detect == Detect::Snapshot {
            let without = if ctx.operator == Operator::Matrix {
                Some(Setting::Matrix)
            } else if ctx.threads_per_rank > 1 {
                Some(Setting::ThreadsPerRank)
            } else if matches!(j.halo_depth, HaloDepth::Fixed(2..)) {
                Some(Setting::HaloDepth)
            } else {
                None
            };
            if let Some(s) = without {
                return Err(ConfigError::SnapshotOf(s));
            }
        }
        if ctx.threads_per_rank > 1 && matches!(j.exchange, Exchange::Overlap | Exchange::Neighbor)
        {
            return Err(ConfigError::TeamExchange(j.exchange));
        }
        match j.exchange {
            Exchange::Neighbor => neighbor_on(ctx),
            _ => Ok(()),
        }
    }

    /// Validate against a world of `size` ranks on any channel backend and resolve the
    /// decomposition ([`Config::plan_in`] with [`Backend::CHANNELS`]).
    pub fn plan(&self, size: usize) -> Result<Plan, ConfigError> {
        self.plan_in(&self.context(Backend::CHANNELS), size)
    }

    /// Check this configuration for a run in `ctx` ([`Config::check_in`]) over `size` ranks
    /// (threads of shared memory), and resolve the decomposition: the process grid given, or
    /// the one the decomposition shapes (shared memory splits z over its threads, 1 × 1 × T);
    /// the blocks of `--local` or the split of `--global`.
    pub fn plan_in(&self, ctx: &Context, size: usize) -> Result<Plan, ConfigError> {
        self.check_in(ctx)?;
        if size == 0 {
            return Err(ConfigError::NoRanks);
        }
        let procs = match (self.grid, ctx.backend.shared_memory) {
            (g, true) => {
                let z = ProcGrid(Dims::new(1, 1, size));
                if g.is_some_and(|g| g != z) {
                    return Err(ConfigError::Unsupported {
                        setting: Setting::Grid,
                        value: g.map(|g| g.to_string()).unwrap_or_default(),
                        backend: ctx.backend.name,
                        why: Limit::SharedGrid,
                    });
                }
                z
            }
            (Some(g), false) if g.size() != size => {
                return Err(ConfigError::GridSize { grid: g, size })
            }
            (Some(g), false) => g,
            (None, false) => match self.decomp {
                Decomp::Paper => ProcGrid::paper(size),
                Decomp::Z => ProcGrid(Dims::new(1, 1, size)),
            },
        };
        if let Some(s) = self.slow {
            if s.rank >= size {
                return Err(ConfigError::SlowRank { rank: s.rank, size });
            }
        }
        let plan = match self.size {
            crate::SizeSpec::Local(d) => Plan::from_local(d, procs),
            crate::SizeSpec::Global(d) => Plan::split(d, procs),
        }?;
        // `auto` chooses among the depths the blocks allow.
        let depth = self.halo_depth().fixed().unwrap_or(1);
        if let Some(a) = (0..3)
            .find(|&a| plan.procs.0.to_array()[a] > 1 && (plan.local.to_array()[a] as u64) < depth)
        {
            return Err(ConfigError::HaloDepthWith {
                depth: HaloDepth::Fixed(depth),
                conflict: DepthConflict::Thin {
                    axis: ["x", "y", "z"][a],
                    points: plan.local.to_array()[a],
                },
            });
        }
        let g = plan.global;
        if self.problem.source([0.5; 3], 1.0).is_some() && !(g.x == g.y && g.y == g.z) {
            return Err(ConfigError::NotCubic {
                problem: self.problem.name(),
                global: g,
            });
        }
        if let (Problem::Laplace { offset }, Some(max)) = (self.problem, self.max_offset(g)) {
            if offset.abs() > max {
                let tol = self.criterion.tol();
                return Err(ConfigError::OffsetSwamps {
                    offset,
                    tol,
                    ulp: f64::EPSILON * offset.abs(),
                    floor: offset.abs() * crate::config::offset_floor_per_unit(g.z),
                    max,
                });
            }
        }
        check_team(ctx.threads_per_rank, &plan)?;
        Ok(plan)
    }
}

/// T workers need a z-plane each of a rank's block.
pub(crate) fn check_team(threads: usize, plan: &Plan) -> Result<(), ConfigError> {
    if threads > 1 && threads > plan.local.z {
        return Err(ConfigError::ThreadsPerRank {
            threads,
            planes_of: Some(plan.local),
        });
    }
    Ok(())
}

/// The neighbourhood exchange needs a backend with neighbourhood collectives.
fn neighbor_on(ctx: &Context) -> Result<(), ConfigError> {
    if ctx.backend.neighbor_collectives {
        return Ok(());
    }
    Err(ConfigError::Unsupported {
        setting: Setting::Exchange,
        value: Exchange::Neighbor.name().into(),
        backend: ctx.backend.name,
        why: Limit::Neighbor,
    })
}
