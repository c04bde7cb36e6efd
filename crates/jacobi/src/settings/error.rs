//! [`ConfigError`]: a configuration that cannot run, and its message with the settings named
//! by a [`Names`].

use super::{Names, NotApplicable, Operator, Part, Scope, Setting, Words};
use crate::config::{Exchange, HaloDepth, Solver, MAX_HALO_DEPTH, MAX_SLOWDOWN, MIN_TOL};
use crate::geometry::{Dims, ProcGrid};
use std::fmt;

/// What a fixed halo depth k > 1 conflicts with ([`ConfigError::HaloDepthWith`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthConflict {
    /// The sync variant with another exchange than the default: the deep one is its own.
    Exchange(Exchange),
    /// The sync variant with a halo period N above 1: it exchanges every k by itself.
    HaloEvery(u64),
    /// The sync variant with a check period K that k does not divide.
    CheckEvery(u64),
    /// A ghost zone deeper than the neighbour's block.
    Thin {
        /// The axis.
        axis: &'static str,
        /// Points per rank along it.
        points: usize,
    },
}

/// What a backend cannot do ([`ConfigError::Unsupported`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Shared memory runs Jacobi only.
    SharedSolver(Solver),
    /// Shared memory splits z over its threads.
    SharedGrid,
    /// The native non-blocking all-reduce is MPI's.
    Iallreduce,
    /// Neighbourhood collectives are MPI-3's.
    Neighbor,
}

/// A configuration that cannot run. Each message names the settings to fix: in words by
/// [`fmt::Display`], or through any [`Names`] by [`ConfigError::named`] (`aiac` names flags).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// tol below [`MIN_TOL`], above the criterion's largest, NaN or infinite.
    Tolerance {
        /// Given.
        tol: f64,
        /// The largest: 1 for the relative residual (it starts at 1), else f64's largest.
        max: f64,
    },
    /// K larger than the iteration limit: the criterion would never be tested.
    CheckEveryTooLarge {
        /// Given.
        check_every: u64,
        /// The iteration limit.
        max_iters: u64,
    },
    /// A count that must be at least 1 given 0 (K, N, the iteration limits).
    Zero(Setting),
    /// A halo depth neither a number from 1 to [`MAX_HALO_DEPTH`] nor `auto`.
    HaloDepthValue(String),
    /// A fixed k > 1 with something the deep exchange does not do.
    HaloDepthWith {
        /// k.
        depth: HaloDepth,
        /// What conflicts.
        conflict: DepthConflict,
    },
    /// R = 0 or beyond what the channel layer accepts.
    MaxInFlight(chan_core::ConfigError),
    /// offset NaN or infinite.
    Offset(f64),
    /// An offset so large that f64 rounding alone keeps the relative residual above `tol`.
    OffsetSwamps {
        /// Given.
        offset: f64,
        /// The tolerance.
        tol: f64,
        /// The spacing of f64 values near the offset (ε |offset|).
        ulp: f64,
        /// The relative residual rounding alone leaves.
        floor: f64,
        /// The largest |offset| this tolerance and grid allow.
        max: f64,
    },
    /// A zero extent.
    ZeroExtent {
        /// [`Setting::Local`] or [`Setting::Global`].
        size: Setting,
        /// Given.
        dims: Dims,
    },
    /// The arrays would not fit in memory.
    TooLarge(Dims),
    /// The process grid does not have as many ranks as the world.
    GridSize {
        /// The grid given.
        grid: ProcGrid,
        /// The world size.
        size: usize,
    },
    /// The grid does not divide the global size.
    GridDoesNotDivide {
        /// Which axis.
        axis: &'static str,
        /// Points along it.
        points: usize,
        /// Processes along it.
        procs: usize,
        /// The global size.
        global: Dims,
        /// The process grid.
        grid: ProcGrid,
    },
    /// The slow rank is not a rank of the run.
    SlowRank {
        /// Given.
        rank: usize,
        /// World size.
        size: usize,
    },
    /// The slowdown outside 1 ..= [`MAX_SLOWDOWN`].
    Slowdown(f64),
    /// The run would need more memory than the machine has available.
    OutOfMemory {
        /// Bytes this machine would hold.
        need: u64,
        /// Bytes per rank.
        per_rank: u64,
        /// Bytes available.
        available: u64,
    },
    /// A world of no ranks.
    NoRanks,
    /// T beyond what hybrid ranks take: more than
    /// [`crate::MAX_THREADS_PER_RANK`], or more workers than a block has z-planes.
    ThreadsPerRank {
        /// Given.
        threads: usize,
        /// The block per rank, when it has fewer z-planes than T (else T is above the limit).
        planes_of: Option<Dims>,
    },
    /// A problem whose discretisation needs the same spacing along every axis.
    NotCubic {
        /// The problem.
        problem: &'static str,
        /// The global grid asked for.
        global: Dims,
    },
    /// A setting where it does not apply ([`Setting::applies`]).
    NotApplicable(NotApplicable),
    /// CG with an exchange of Jacobi's sweeps (blocking, overlap).
    CgExchange(Exchange),
    /// Hybrid ranks with an exchange that sweeps its block in regions (overlap, neighbor).
    TeamExchange(Exchange),
    /// The snapshot detection where the iterate has no snapshot: the setting whose value
    /// rules it out (a deep halo, hybrid ranks, a matrix).
    SnapshotOf(Setting),
    /// A sparse matrix's run with the single-precision inner CG (the grid's kernel).
    MatrixInner,
    /// A solver that stops on the relative residual asked to stop on the update norm; `None`:
    /// a sparse matrix's run.
    UpdateNorm(Option<Solver>),
    /// The inner tolerance outside (0, 1).
    InnerTol(f64),
    /// Block Jacobi's block solve given with another preconditioner.
    PcSubWithout(crate::Pc),
    /// GMRES's restart above [`crate::MAX_RESTART`].
    RestartTooLarge(usize),
    /// A value the backend cannot honour.
    Unsupported {
        /// The setting.
        setting: Setting,
        /// Its value.
        value: String,
        /// The backend.
        backend: &'static str,
        /// Why.
        why: Limit,
    },
}

impl ConfigError {
    /// The setting to fix (the first one a message names).
    pub fn setting(&self) -> Setting {
        match self {
            ConfigError::Tolerance { .. } => Setting::Tol,
            ConfigError::CheckEveryTooLarge { .. } => Setting::CheckEvery,
            ConfigError::Zero(s) => *s,
            ConfigError::HaloDepthValue(_) | ConfigError::HaloDepthWith { .. } => {
                Setting::HaloDepth
            }
            ConfigError::MaxInFlight(_) => Setting::MaxInFlight,
            ConfigError::Offset(_) | ConfigError::OffsetSwamps { .. } => Setting::Offset,
            ConfigError::ZeroExtent { size, .. } => *size,
            ConfigError::TooLarge(_) | ConfigError::OutOfMemory { .. } => Setting::Local,
            ConfigError::GridSize { .. } => Setting::Grid,
            ConfigError::GridDoesNotDivide { .. } => Setting::Global,
            ConfigError::SlowRank { .. } => Setting::SlowRank,
            ConfigError::Slowdown(_) => Setting::Slowdown,
            ConfigError::NoRanks => Setting::Ranks,
            ConfigError::ThreadsPerRank { .. } => Setting::ThreadsPerRank,
            ConfigError::NotCubic { .. } => Setting::Problem,
            ConfigError::NotApplicable(n) => n.setting,
            ConfigError::CgExchange(_) | ConfigError::TeamExchange(_) => Setting::Exchange,
            ConfigError::SnapshotOf(_) => Setting::Detect,
            ConfigError::MatrixInner => Setting::Inner,
            ConfigError::UpdateNorm(_) => Setting::Criterion,
            ConfigError::InnerTol(_) => Setting::InnerTol,
            ConfigError::PcSubWithout(_) => Setting::PcSub,
            ConfigError::RestartTooLarge(_) => Setting::Restart,
            ConfigError::Unsupported { setting, .. } => *setting,
        }
    }

    /// This error's message with its settings named by `names`.
    pub fn named<'a>(&'a self, names: &'a dyn Names) -> Named<'a> {
        Named { error: self, names }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.named(&Words).fmt(f)
    }
}

impl std::error::Error for ConfigError {}

/// A [`ConfigError`]'s message, its settings named by a [`Names`] ([`ConfigError::named`]).
pub struct Named<'a> {
    error: &'a ConfigError,
    names: &'a dyn Names,
}

/// A number for a message: in scientific notation when plain notation would be long.
pub(crate) fn short(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error {
            ConfigError::Tolerance { .. }
            | ConfigError::CheckEveryTooLarge { .. }
            | ConfigError::Zero(_)
            | ConfigError::HaloDepthValue(_)
            | ConfigError::MaxInFlight(_)
            | ConfigError::Offset(_)
            | ConfigError::OffsetSwamps { .. }
            | ConfigError::Slowdown(_)
            | ConfigError::InnerTol(_)
            | ConfigError::RestartTooLarge(_)
            | ConfigError::PcSubWithout(_)
            | ConfigError::NoRanks
            | ConfigError::SlowRank { .. } => self.values(f),
            ConfigError::ZeroExtent { .. }
            | ConfigError::TooLarge(_)
            | ConfigError::GridSize { .. }
            | ConfigError::GridDoesNotDivide { .. }
            | ConfigError::OutOfMemory { .. }
            | ConfigError::ThreadsPerRank { .. }
            | ConfigError::NotCubic { .. } => self.layout(f),
            ConfigError::HaloDepthWith { .. }
            | ConfigError::NotApplicable(_)
            | ConfigError::CgExchange(_)
            | ConfigError::TeamExchange(_)
            | ConfigError::SnapshotOf(_)
            | ConfigError::MatrixInner
            | ConfigError::UpdateNorm(_)
            | ConfigError::Unsupported { .. } => self.combination(f),
        }
    }
}

impl Named<'_> {
    /// A value outside its range: tolerances, periods, limits, R, the offset, the slow rank.
    fn values(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |s: Setting| self.names.name(s);
        let given = |s: Setting, v: &str| self.names.given(s, v);
        match self.error {
            ConfigError::Tolerance { tol, max } => {
                let upto = if *max < f64::MAX {
                    format!(" to {}", short(*max))
                } else {
                    String::new()
                };
                write!(
                    f,
                    "{} must be a number from {MIN_TOL:e} (f64's machine epsilon: a criterion \
                     below it cannot be told from rounding){upto}, got {}",
                    n(Setting::Tol),
                    short(*tol)
                )
            }
            ConfigError::CheckEveryTooLarge {
                check_every,
                max_iters,
            } => {
                let (k, limit) = (n(Setting::CheckEvery), n(Setting::MaxIters));
                write!(
                    f,
                    "{k} must be from 1 to {limit} ({max_iters}), got {check_every}: a larger K \
                     never tests the criterion before {limit} stops the run (K = {limit} tests \
                     it once, at the end)"
                )
            }
            ConfigError::Zero(s) => write!(f, "{} must be at least 1, got 0", n(*s)),
            ConfigError::HaloDepthValue(v) => write!(
                f,
                "{} must be a number from 1 to {MAX_HALO_DEPTH} or auto, got '{v}'",
                n(Setting::HaloDepth)
            ),
            ConfigError::MaxInFlight(e) => write!(f, "{}: {e}", n(Setting::MaxInFlight)),
            ConfigError::Offset(v) => write!(
                f,
                "{} must be a finite number, got {}",
                n(Setting::Offset),
                short(*v)
            ),
            ConfigError::OffsetSwamps {
                offset,
                tol,
                ulp,
                floor,
                max,
            } => {
                let (c, t) = (n(Setting::Offset), n(Setting::Tol));
                write!(
                    f,
                    "{} swamps the solution in f64 for {} on this grid: f64 keeps about 16 \
                     significant digits, so values near {offset:e} are rounded by about \
                     {ulp:.1e}, which leaves a relative residual of about {floor:.1e} (the \
                     solution itself varies by less than 1); use |{c}| up to {max:.1e} (or a \
                     larger {t})",
                    given(Setting::Offset, &format!("{offset:e}")),
                    given(Setting::Tol, &format!("{tol:e}")),
                )
            }
            ConfigError::SlowRank { rank, size } => write!(
                f,
                "{} is not a rank of this run (ranks 0..{size})",
                given(Setting::SlowRank, &rank.to_string())
            ),
            ConfigError::Slowdown(v) => write!(
                f,
                "{} must be a number from 1 to {MAX_SLOWDOWN}, got {}",
                n(Setting::Slowdown),
                short(*v)
            ),
            ConfigError::NoRanks => write!(f, "{} must be at least 1, got 0", n(Setting::Ranks)),
            ConfigError::InnerTol(t) => write!(
                f,
                "{} must be a number above 0 and below 1 (the factor by which an inner solve \
                 reduces its block's residual), got {}",
                n(Setting::InnerTol),
                short(*t)
            ),
            ConfigError::RestartTooLarge(m) => write!(
                f,
                "{} must be at most {} (GMRES keeps m + 1 vectors of the block and an (m + 1) \
                 × m matrix), got {m}",
                n(Setting::Restart),
                crate::MAX_RESTART
            ),
            ConfigError::PcSubWithout(pc) => write!(
                f,
                "{} is block Jacobi's block solve: it applies with {}, not with {}",
                n(Setting::PcSub),
                given(Setting::Pc, "bjacobi"),
                given(Setting::Pc, pc.name())
            ),
            _ => unreachable!("Named::fmt routes only this family here"),
        }
    }

    /// A grid, a rank count or a memory size the run cannot have.
    fn layout(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |s: Setting| self.names.name(s);
        let given = |s: Setting, v: &str| self.names.given(s, v);
        let human = crate::memory::human_bytes;
        match self.error {
            ConfigError::ZeroExtent { size, dims } => write!(
                f,
                "{}: every extent must be at least 1, got {dims}",
                n(*size)
            ),
            ConfigError::TooLarge(d) => write!(
                f,
                "{}/{}: a block of {d} points does not fit in memory",
                n(Setting::Local),
                n(Setting::Global)
            ),
            ConfigError::GridSize { grid, size } => write!(
                f,
                "{} has {} ranks but the run has {size}",
                given(Setting::Grid, &grid.to_string()),
                grid.size()
            ),
            ConfigError::GridDoesNotDivide {
                axis,
                points,
                procs,
                global,
                grid,
            } => write!(
                f,
                "{} does not split over the process grid {grid}: {points} points along {axis} \
                 do not divide into {procs} equal blocks",
                given(Setting::Global, &global.to_string())
            ),
            ConfigError::OutOfMemory {
                need,
                per_rank,
                available,
            } => write!(
                f,
                "{}/{}: this run needs about {} ({} per rank: arrays, halos, channel buffers, \
                 history), but this machine has {} available (MemAvailable): use a smaller \
                 grid, a smaller {} or fewer ranks",
                n(Setting::Local),
                n(Setting::Global),
                human(*need),
                human(*per_rank),
                human(*available),
                n(Setting::MaxInFlight)
            ),
            ConfigError::ThreadsPerRank { threads, planes_of } => {
                let t = given(Setting::ThreadsPerRank, &threads.to_string());
                match planes_of {
                    None => write!(
                        f,
                        "{t}: must be at most {} (workers per rank, each pinned to a core of \
                         its own)",
                        crate::MAX_THREADS_PER_RANK
                    ),
                    Some(local) => write!(
                        f,
                        "{t}: each worker owns at least one z-plane of its rank's block, which \
                         has {} ({local} per rank)",
                        local.z
                    ),
                }
            }
            ConfigError::NotCubic { problem, global } => write!(
                f,
                "{} needs a cubic grid (N³ points, one spacing h), got {global}",
                given(Setting::Problem, problem)
            ),
            _ => unreachable!("Named::fmt routes only this family here"),
        }
    }

    /// Settings that do not go together, or a value the backend cannot honour.
    fn combination(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |s: Setting| self.names.name(s);
        let given = |s: Setting, v: &str| self.names.given(s, v);
        match self.error {
            ConfigError::HaloDepthWith { depth, conflict } => conflict.write(f, self.names, depth),
            ConfigError::NotApplicable(na) => na.write(f, self.names),
            ConfigError::CgExchange(x) => write!(
                f,
                "{} applies to {} (CG takes {} or neighbor; cg-overlap overlaps the halo \
                 exchange of CG), not to {}",
                given(Setting::Exchange, x.name()),
                given(Setting::Solver, "jacobi"),
                given(Setting::Exchange, "waitall"),
                given(Setting::Solver, "cg")
            ),
            ConfigError::TeamExchange(x) => write!(
                f,
                "{} runs one thread per rank: the team of {} sweeps whole planes (use {} or \
                 blocking)",
                given(Setting::Exchange, x.name()),
                n(Setting::ThreadsPerRank),
                given(Setting::Exchange, "waitall")
            ),
            ConfigError::SnapshotOf(s) => {
                let what = match s {
                    Setting::HaloDepth => format!("a deep halo ({} above 1)", n(*s)),
                    Setting::ThreadsPerRank => format!("hybrid ranks ({} above 1)", n(*s)),
                    _ => n(*s).into_owned(),
                };
                write!(
                    f,
                    "{} has no form for {what}: its snapshot is the one-plane block of {} on \
                     the grid (use {} or ibarrier)",
                    given(Setting::Detect, "snapshot"),
                    given(Setting::Solver, "jacobi"),
                    given(Setting::Detect, "reduction")
                )
            }
            ConfigError::MatrixInner => write!(
                f,
                "{} does not apply to {}: the single-precision inner CG is the grid's kernel; \
                 use {} or jacobi",
                given(Setting::Inner, "cg32"),
                n(Setting::Matrix),
                given(Setting::Inner, "cg")
            ),
            ConfigError::UpdateNorm(None) => write!(
                f,
                "the update-norm criterion does not apply to {}: the update norm is the \
                 stencil's residual over its diagonal 6; a matrix's run stops on the relative \
                 residual ‖b − A x‖/‖b‖",
                n(Setting::Matrix)
            ),
            ConfigError::UpdateNorm(Some(solver)) => {
                let of = match solver {
                    Solver::Multisplit => "‖b − A u‖₂/‖b − A u₀‖₂",
                    _ => "‖b − A x‖₂/‖b‖₂",
                };
                write!(
                    f,
                    "{} stops on the relative residual {of} (give {} for it), not on the \
                     update norm",
                    given(Setting::Solver, solver.name()),
                    n(Setting::Tol)
                )
            }
            ConfigError::Unsupported {
                setting,
                value,
                backend,
                why,
            } => {
                write!(
                    f,
                    "{} is not supported with {}: ",
                    given(*setting, value),
                    given(Setting::Backend, backend)
                )?;
                why.write(f, self.names)
            }
            _ => unreachable!("Named::fmt routes only this family here"),
        }
    }
}

impl DepthConflict {
    /// "a fixed halo depth `depth` … does not combine with `self`".
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        names: &dyn Names,
        depth: &HaloDepth,
    ) -> fmt::Result {
        let n = |s: Setting| names.name(s);
        let given = |s: Setting, v: &str| names.given(s, v);
        let k = given(Setting::HaloDepth, &depth.to_string());
        match self {
            DepthConflict::Exchange(x) => write!(
                f,
                "{k} uses its own exchange: it does not combine with {}",
                given(Setting::Exchange, x.name())
            ),
            DepthConflict::HaloEvery(every) => write!(
                f,
                "{k} exchanges every {depth} iterations by itself in the sync variant: \
                 it needs {} 1, got {every}",
                n(Setting::HaloEvery)
            ),
            DepthConflict::CheckEvery(check) => write!(
                f,
                "{k} needs {} to be a multiple of {depth} (the residual is taken at the \
                 end of a block of {depth} sweeps), got {check}",
                n(Setting::CheckEvery)
            ),
            DepthConflict::Thin { axis, points } => write!(
                f,
                "{k} needs at least {depth} points per rank along {axis} (a ghost zone \
                 comes from the neighbour's own points), got {points}"
            ),
        }
    }
}

impl Limit {
    /// Why a backend cannot honour a value, after "`value` is not supported with `backend`: ".
    fn write(&self, f: &mut fmt::Formatter<'_>, names: &dyn Names) -> fmt::Result {
        let given = |s: Setting, v: &str| names.given(s, v);
        let threads = given(Setting::Backend, "threads");
        match self {
            Limit::SharedSolver(s) if s.is_krylov() => write!(
                f,
                "the Krylov solvers (cg, cg-overlap, pipecg, gmres, bicgstab) run over \
                 channels: use {threads} for one process"
            ),
            Limit::SharedSolver(_) => write!(
                f,
                "multisplitting exchanges its blocks' boundaries over channels: use \
                 {threads} for one process"
            ),
            Limit::SharedGrid => {
                write!(f, "it splits the grid in z only: the grid is 1x1xT")
            }
            Limit::Iallreduce => write!(
                f,
                "MPI_Iallreduce is MPI's: this backend reduces over chan-core's tree \
                 ({})",
                given(Setting::Reduction, "tree")
            ),
            Limit::Neighbor => write!(
                f,
                "it is MPI-3's MPI_Ineighbor_alltoallv: this backend swaps halos over \
                 its channels ({})",
                given(Setting::Exchange, "waitall")
            ),
        }
    }
}

impl NotApplicable {
    /// "`setting` applies to `scope`, not to `context`".
    fn write(&self, f: &mut fmt::Formatter<'_>, names: &dyn Names) -> fmt::Result {
        let n = |s: Setting| names.name(s);
        let given = |s: Setting, v: &str| names.given(s, v);
        let c = &self.context;
        let what = if self.setting.shows_value() {
            given(self.setting, &self.value)
        } else if self.setting == Setting::Confirm {
            // The value says which of the two ways it was given.
            given(self.setting, &self.value)
        } else {
            n(self.setting).into_owned()
        };
        write!(f, "{what} applies to ")?;
        self.scope_clause(f, names)?;
        let this = match self.scope.part() {
            Part::Solver => given(Setting::Solver, c.solver.name()),
            Part::SolverVariant => format!(
                "{} {}",
                given(Setting::Solver, c.solver.name()),
                given(Setting::Variant, c.variant.name())
            ),
            Part::Backend => given(Setting::Backend, c.backend.name),
            Part::Problem => match c.operator {
                Operator::Grid(p) => given(Setting::Problem, p.name()),
                Operator::Matrix => n(Setting::Matrix).into_owned(),
            },
            Part::Matrix => n(Setting::Matrix).into_owned(),
            Part::Team => given(Setting::ThreadsPerRank, &c.threads_per_rank.to_string()),
        };
        write!(f, ", not to {this}")
    }

    /// Where the setting applies, after "`setting` applies to ".
    fn scope_clause(&self, f: &mut fmt::Formatter<'_>, names: &dyn Names) -> fmt::Result {
        let n = |s: Setting| names.name(s);
        let given = |s: Setting, v: &str| names.given(s, v);
        let c = &self.context;
        let (solver, variant) = (n(Setting::Solver), n(Setting::Variant));
        match self.scope {
            Scope::Synchronous => write!(
                f,
                "{solver} jacobi and multisplit (the Krylov solvers are synchronous: every \
                 iteration needs exact global dot products)"
            ),
            Scope::AsyncChannels => write!(
                f,
                "the channels of {variant} async and racy (of {solver} jacobi or multisplit)"
            ),
            Scope::Claims => write!(
                f,
                "the convergence claims of {variant} async and racy (of {solver} jacobi or \
                 multisplit; sync runs and Krylov solvers stop on the true residual)"
            ),
            Scope::RacyReceive => write!(
                f,
                "the racy receive ({variant} racy of {solver} jacobi or multisplit)"
            ),
            Scope::NonBlocking => write!(
                f,
                "the non-blocking reduction of {variant} async and racy and of {solver} \
                 pipecg (the others reduce with blocking all-reduces)"
            ),
            Scope::AsyncDetect => write!(
                f,
                "the async and racy variants (a sync run checks its residual with blocking \
                 all-reduces)"
            ),
            Scope::Krylov => write!(
                f,
                "the Krylov solvers ({solver} cg, cg-overlap, pipecg, gmres, bicgstab)"
            ),
            Scope::Gmres => write!(f, "{solver} gmres"),
            Scope::Multisplit => write!(f, "{solver} multisplit"),
            Scope::Jacobi => write!(f, "{solver} jacobi"),
            Scope::BlockIteration => write!(
                f,
                "{solver} jacobi and multisplit (the Krylov solvers swap halos every iteration)"
            ),
            Scope::SyncExchange => write!(
                f,
                "{variant} sync only (async and racy never wait for a halo)"
            ),
            Scope::ExchangeSolvers if c.solver == Solver::Multisplit => write!(
                f,
                "{solver} jacobi and cg (an outer iteration of multisplit swaps every halo, \
                 then solves its block)"
            ),
            Scope::ExchangeSolvers => write!(
                f,
                "{solver} jacobi and cg (cg-overlap and pipecg overlap their halo exchange \
                 with computation over channels)"
            ),
            Scope::Channels => {
                let why = match self.setting {
                    Setting::Exchange => {
                        "threads read their neighbours' planes directly: there is no message \
                         to exchange"
                    }
                    Setting::HaloDepth => {
                        "threads read their neighbours' planes directly at every sweep: there \
                         is no halo to deepen"
                    }
                    Setting::Detect => {
                        "shared memory's async and racy threads keep a running shared \
                         residual, with no rounds to detect by"
                    }
                    _ => "threads read their neighbours' planes directly at every sweep",
                };
                write!(f, "the channel backends ({why})")
            }
            Scope::Grid => {
                let why = match self.setting {
                    Setting::Exchange => {
                        "a row block exchanges its ghosts over channels, with every neighbour \
                         at once"
                    }
                    Setting::HaloDepth => {
                        "deep halos are the grid's temporal blocking; a row block's ghosts are \
                         one exchange deep"
                    }
                    Setting::ThreadsPerRank => {
                        "hybrid ranks sweep the grid's problem; a matrix runs one thread per \
                         rank"
                    }
                    _ => "a matrix's run reads its rows, not a grid",
                };
                write!(f, "the grid ({why})")
            }
            Scope::Laplace => write!(
                f,
                "{} only (the Poisson problem's boundary values are 0 and its exact solution \
                 is fixed)",
                given(Setting::Problem, "laplace")
            ),
            Scope::ProcessRanks => write!(
                f,
                "backends whose ranks are processes, as MPI's and SHMEM's (hybrid ranks; the \
                 ranks of the others are threads of one process already, as many as {} says)",
                n(Setting::Ranks)
            ),
            Scope::HybridJacobi => write!(
                f,
                "{solver} jacobi (hybrid ranks sweep Jacobi's grid; {} one thread per rank)",
                if c.solver.is_krylov() {
                    "the Krylov solvers run"
                } else {
                    "multisplitting runs"
                }
            ),
            Scope::OneThread => write!(
                f,
                "one thread per rank (a team of hybrid ranks sweeps one-plane halos)"
            ),
        }
    }
}
