//! The settings of a run, the one rule of where each applies, and the errors that name them.
//!
//! The library speaks settings, a command line speaks flags. A [`Setting`] names one thing a
//! run can be told (the messages in flight R, the halo depth k). [`Setting::applies`] is the
//! one rule of where it means something, over a [`Context`] (method × variant × backend ×
//! team × operator): `aiac run` refuses a setting given where it does not apply, `aiac sweep`
//! runs once what only such a setting would vary, the tables blank its column, and
//! [`crate::Config::check_in`] refuses a configuration that holds one away from its default.
//! A [`ConfigError`] names its settings through a [`Names`]: [`Words`] in the library's own
//! messages ("the messages in flight R must be at least 1"), the flags in `aiac`'s.

mod check;
mod error;

pub(crate) use check::check_team;
pub use error::{ConfigError, DepthConflict, Limit, Named};

use crate::config::{Solver, Variant};
use crate::problem::Problem;
use std::borrow::Cow;

/// One setting of a run: what a flag of `aiac run` sets, or a field of [`crate::Config`] and
/// its [`crate::Method`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Setting {
    /// The iterative method ([`Solver`]).
    Solver,
    /// The Krylov solvers' preconditioner ([`crate::Pc`]).
    Pc,
    /// Block Jacobi's solve of a rank's block ([`crate::PcSub`]).
    PcSub,
    /// GMRES's restart m.
    Restart,
    /// Multisplitting's inner solver ([`crate::Inner`]).
    Inner,
    /// Multisplitting's inner tolerance.
    InnerTol,
    /// Multisplitting's inner iteration limit.
    InnerMax,
    /// sync, async or racy ([`Variant`]).
    Variant,
    /// Where the ranks run ([`Backend`]).
    Backend,
    /// The number of ranks (threads of shared memory).
    Ranks,
    /// T, the workers of a hybrid rank.
    ThreadsPerRank,
    /// The equation on the grid ([`Problem`]).
    Problem,
    /// A sparse system instead of the grid's problem.
    Matrix,
    /// Interior points per rank.
    Local,
    /// Interior points of the whole grid.
    Global,
    /// The process grid.
    Grid,
    /// The shape of the process grid when none is given ([`crate::Decomp`]).
    Decomp,
    /// How the sync variant swaps its halos ([`crate::Exchange`]).
    Exchange,
    /// The stopping tolerance.
    Tol,
    /// The stopping criterion ([`crate::StopCriterion`]), which the problem chooses.
    Criterion,
    /// K, the check period.
    CheckEvery,
    /// N, the halo period.
    HaloEvery,
    /// k, the halo depth ([`crate::HaloDepth`]).
    HaloDepth,
    /// R, messages in flight per channel direction.
    MaxInFlight,
    /// The non-blocking reduction's algorithm ([`crate::ReductionKind`]).
    Reduction,
    /// When a racy run reads its halo view ([`crate::RacyRead`]).
    RacyRead,
    /// How async and racy runs detect convergence ([`crate::Detect`]).
    Detect,
    /// The iteration limit.
    MaxIters,
    /// The Laplace problem's offset C.
    Offset,
    /// Certify convergence claims (on by default).
    Confirm,
    /// The rank made slower.
    SlowRank,
    /// How many times slower.
    Slowdown,
}

impl Setting {
    /// Every setting.
    pub const ALL: [Setting; 32] = [
        Setting::Solver,
        Setting::Pc,
        Setting::PcSub,
        Setting::Restart,
        Setting::Inner,
        Setting::InnerTol,
        Setting::InnerMax,
        Setting::Variant,
        Setting::Backend,
        Setting::Ranks,
        Setting::ThreadsPerRank,
        Setting::Problem,
        Setting::Matrix,
        Setting::Local,
        Setting::Global,
        Setting::Grid,
        Setting::Decomp,
        Setting::Exchange,
        Setting::Tol,
        Setting::Criterion,
        Setting::CheckEvery,
        Setting::HaloEvery,
        Setting::HaloDepth,
        Setting::MaxInFlight,
        Setting::Reduction,
        Setting::RacyRead,
        Setting::Detect,
        Setting::MaxIters,
        Setting::Offset,
        Setting::Confirm,
        Setting::SlowRank,
        Setting::Slowdown,
    ];

    /// The setting in words, as the library's messages name it.
    pub fn words(self) -> &'static str {
        match self {
            Setting::Solver => "the solver",
            Setting::Pc => "the preconditioner",
            Setting::PcSub => "block Jacobi's block solve",
            Setting::Restart => "GMRES's restart m",
            Setting::Inner => "the inner solver",
            Setting::InnerTol => "the inner tolerance",
            Setting::InnerMax => "the inner iteration limit",
            Setting::Variant => "the variant",
            Setting::Backend => "the backend",
            Setting::Ranks => "the number of ranks",
            Setting::ThreadsPerRank => "the threads per rank T",
            Setting::Problem => "the problem",
            Setting::Matrix => "a sparse matrix",
            Setting::Local => "the block per rank",
            Setting::Global => "the global grid",
            Setting::Grid => "the process grid",
            Setting::Decomp => "the decomposition",
            Setting::Exchange => "the halo exchange",
            Setting::Tol => "the tolerance",
            Setting::Criterion => "the stopping criterion",
            Setting::CheckEvery => "the check period K",
            Setting::HaloEvery => "the halo period N",
            Setting::HaloDepth => "the halo depth k",
            Setting::MaxInFlight => "the messages in flight R",
            Setting::Reduction => "the non-blocking reduction",
            Setting::RacyRead => "the racy read",
            Setting::Detect => "the convergence detection",
            Setting::MaxIters => "the iteration limit",
            Setting::Offset => "the Laplace offset",
            Setting::Confirm => "the certification of claims",
            Setting::SlowRank => "the slow rank",
            Setting::Slowdown => "the slowdown",
        }
    }

    /// Whether a refusal of this setting quotes its value: those whose values name what they
    /// are (an exchange, a depth), not a count, an on/off choice or a scheme of a loop the
    /// run does not have.
    pub fn shows_value(self) -> bool {
        matches!(
            self,
            Setting::Solver
                | Setting::Pc
                | Setting::PcSub
                | Setting::Inner
                | Setting::Variant
                | Setting::Backend
                | Setting::ThreadsPerRank
                | Setting::Problem
                | Setting::Exchange
                | Setting::HaloDepth
        )
    }

    /// Where this setting means something: the one rule every caller asks.
    ///
    /// [`Applies::Yes`]: the run reads it, and its values make different runs.
    /// [`Applies::Inert`]: the run takes it, but no value it takes changes the run here
    /// (R of a racy channel whose sends complete on return, the reduction where the backend
    /// has one kind). [`Applies::Only`]: the run has it at its default only (a Krylov solver
    /// is sync, Jacobi's preconditioner is none): given at the default it is taken, at
    /// another value refused. [`Applies::No`]: the run has no such thing; given at any value,
    /// it is refused. A refusal says where the setting applies ([`Scope`]); a sweep runs once
    /// what only a setting that is not [`Applies::Yes`] would vary.
    pub fn applies(self, ctx: &Context) -> Applies {
        use Applies::{Inert, No, Only, Yes};
        let solver = ctx.solver;
        let krylov = solver.is_krylov();
        let blockwise = !krylov; // Jacobi and multisplit: the sync, async and racy loops
        let sync = ctx.variant == Variant::Sync || krylov;
        let shared = ctx.backend.shared_memory;
        let matrix = ctx.operator == Operator::Matrix;
        let hybrid = ctx.threads_per_rank > 1;
        match self {
            Setting::Pc if krylov => Yes,
            Setting::Pc => Only(Scope::Krylov),
            Setting::PcSub if krylov => Yes,
            Setting::PcSub => Only(Scope::Krylov),
            Setting::Restart if solver == Solver::Gmres => Yes,
            Setting::Restart => Only(Scope::Gmres),
            Setting::Inner | Setting::InnerTol | Setting::InnerMax => match solver {
                Solver::Multisplit => Yes,
                _ => No(Scope::Multisplit),
            },
            Setting::Variant if krylov => Only(Scope::Synchronous),
            Setting::Exchange if shared => Only(Scope::Channels),
            Setting::Exchange => match solver {
                // A row block swaps its ghosts with every neighbour at once; CG's halo of its
                // product may go through the neighbourhood collective.
                Solver::Jacobi if matrix => Only(Scope::Grid),
                Solver::Jacobi if sync => Yes,
                Solver::Jacobi => Only(Scope::SyncExchange),
                Solver::Cg => Yes,
                Solver::CgOverlap
                | Solver::PipeCg
                | Solver::Gmres
                | Solver::BiCgStab
                | Solver::Multisplit => Only(Scope::ExchangeSolvers),
            },
            Setting::HaloEvery if krylov => Only(Scope::BlockIteration),
            Setting::HaloEvery if shared => Only(Scope::Channels),
            Setting::HaloDepth if solver != Solver::Jacobi => Only(Scope::Jacobi),
            Setting::HaloDepth if shared => Only(Scope::Channels),
            Setting::HaloDepth if matrix => Only(Scope::Grid),
            Setting::HaloDepth if hybrid => Only(Scope::OneThread),
            // R bounds the channels of the async and racy loops.
            Setting::MaxInFlight if sync => No(Scope::AsyncChannels),
            Setting::MaxInFlight if shared => Inert,
            Setting::MaxInFlight if ctx.variant == Variant::Racy && !ctx.backend.racy_in_flight => {
                Inert
            }
            Setting::RacyRead if !(blockwise && ctx.variant == Variant::Racy) => {
                No(Scope::RacyReceive)
            }
            Setting::RacyRead if shared => Inert,
            // Only async and racy block iterations make convergence claims to certify.
            Setting::Confirm if sync => No(Scope::Claims),
            Setting::Reduction if sync && solver != Solver::PipeCg => No(Scope::NonBlocking),
            Setting::Reduction if shared || !ctx.backend.native_iallreduce => Inert,
            // Every run detects by reduction; async and racy Jacobi over channels by rounds
            // of their choice.
            Setting::Detect if solver != Solver::Jacobi => Only(Scope::Jacobi),
            Setting::Detect if sync => Only(Scope::AsyncDetect),
            Setting::Detect if shared => Only(Scope::Channels),
            // Shared memory's async and racy threads only sample their history every K.
            Setting::CheckEvery if shared && !sync => Inert,
            Setting::Offset if matrix => No(Scope::Grid),
            Setting::Offset => match ctx.operator {
                Operator::Grid(Problem::Laplace { .. }) => Yes,
                _ => No(Scope::Laplace),
            },
            Setting::ThreadsPerRank if !ctx.backend.process_ranks => Only(Scope::ProcessRanks),
            Setting::ThreadsPerRank if solver != Solver::Jacobi => Only(Scope::HybridJacobi),
            Setting::ThreadsPerRank if matrix => Only(Scope::Grid),
            Setting::Problem
            | Setting::Local
            | Setting::Global
            | Setting::Grid
            | Setting::Decomp
                if matrix =>
            {
                No(Scope::Grid)
            }
            // Shared memory splits z over its threads whatever the grid says.
            Setting::Grid | Setting::Decomp if shared => Inert,
            _ => Yes,
        }
    }

    /// The setting's default, as a value is written (`2`, `waitall`), where the library has
    /// one for every run; `None` where it depends on the run (the tolerance and the check
    /// period on the problem and the method, the reduction on the backend) or the library
    /// has none (the backend, the number of ranks, the grid).
    pub fn default_value(self) -> Option<String> {
        Some(match self {
            Setting::Solver => Solver::default().name().into(),
            Setting::Pc => crate::Pc::default().name().into(),
            Setting::PcSub => crate::PcSub::default().name().into(),
            Setting::Restart => crate::DEFAULT_RESTART.to_string(),
            Setting::Inner => crate::Inner::default().name().into(),
            Setting::InnerTol => crate::DEFAULT_INNER_TOL.to_string(),
            Setting::InnerMax => crate::DEFAULT_INNER_MAX.to_string(),
            Setting::Variant => Variant::default().name().into(),
            Setting::ThreadsPerRank => "1".into(),
            Setting::Problem => Problem::default().name().into(),
            Setting::Local => crate::DEFAULT_LOCAL.to_string(),
            Setting::Decomp => crate::Decomp::default().name().into(),
            Setting::Exchange => crate::Exchange::default().name().into(),
            Setting::HaloEvery => crate::DEFAULT_HALO_EVERY.to_string(),
            Setting::HaloDepth => crate::HaloDepth::default().to_string(),
            Setting::MaxInFlight => crate::DEFAULT_MAX_IN_FLIGHT.to_string(),
            Setting::RacyRead => crate::RacyRead::default().name().into(),
            Setting::Detect => crate::Detect::default().name().into(),
            Setting::MaxIters => crate::DEFAULT_MAX_ITERS.to_string(),
            Setting::Offset => "0".into(),
            Setting::Confirm => "true".into(),
            Setting::Slowdown => crate::DEFAULT_SLOWDOWN.to_string(),
            Setting::Backend
            | Setting::Ranks
            | Setting::Matrix
            | Setting::Global
            | Setting::Grid
            | Setting::Tol
            | Setting::Criterion
            | Setting::CheckEvery
            | Setting::Reduction
            | Setting::SlowRank => return None,
        })
    }
}

/// Whether a setting means something in a [`Context`] ([`Setting::applies`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Read, and its values make different runs.
    Yes,
    /// Taken, but no value changes the run here.
    Inert,
    /// Only the default runs here: where the setting applies.
    Only(Scope),
    /// The run has no such thing: where the setting applies.
    No(Scope),
}

/// Where a run runs, as far as which settings mean something there: the method and its
/// variant, the backend, the team of each rank and the operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Context {
    /// The method.
    pub solver: Solver,
    /// Its variant (sync for the Krylov solvers).
    pub variant: Variant,
    /// What the backend has.
    pub backend: Backend,
    /// T, the workers of each rank: above 1, hybrid ranks.
    pub threads_per_rank: usize,
    /// The grid's problem, or a sparse matrix.
    pub operator: Operator,
}

/// What a run iterates on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operator {
    /// The 7-point stencil on the grid, with this problem.
    Grid(Problem),
    /// A sparse matrix's rows ([`crate::Solve::system`]).
    Matrix,
}

/// What a backend has, as far as settings go: the caller that knows the backend says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    /// Its name, for messages (`threads`, `shared`, `mpi`, …).
    pub name: &'static str,
    /// Threads of one process reading each other's planes, no channels
    /// ([`crate::Solve::run_shared`]).
    pub shared_memory: bool,
    /// Its ranks are processes, each of which may sweep with a team of threads (hybrid ranks).
    pub process_ranks: bool,
    /// A native non-blocking all-reduce beside chan-core's tree (`MPI_Iallreduce`).
    pub native_iallreduce: bool,
    /// Neighbourhood collectives ([`crate::Exchange::Neighbor`]).
    pub neighbor_collectives: bool,
    /// A racy send can still be in flight when it returns, so R bounds racy channels too
    /// (elsewhere a racy send has completed when it returns, and R never binds).
    pub racy_in_flight: bool,
}

impl Backend {
    /// A channel backend of which nothing more is known ([`crate::Solve::run`]): every
    /// capability is assumed, and the run itself reports what it lacks.
    pub const CHANNELS: Backend = Backend {
        name: "channels",
        shared_memory: false,
        process_ranks: true,
        native_iallreduce: true,
        neighbor_collectives: true,
        racy_in_flight: true,
    };

    /// Shared memory ([`crate::Solve::run_shared`]).
    pub const SHARED: Backend = Backend {
        name: "shared",
        shared_memory: true,
        process_ranks: false,
        native_iallreduce: false,
        neighbor_collectives: false,
        racy_in_flight: false,
    };

    /// The reduction this backend builds for the non-blocking reductions: `asked`, or its
    /// default (the native one where it has one, the tree elsewhere).
    pub fn reduction(
        &self,
        asked: Option<crate::ReductionKind>,
    ) -> Result<crate::ReductionKind, ConfigError> {
        use crate::ReductionKind::{Iallreduce, Tree};
        match (self.native_iallreduce, asked) {
            (true, None | Some(Iallreduce)) => Ok(Iallreduce),
            (_, None | Some(Tree)) => Ok(Tree),
            (false, Some(Iallreduce)) => Err(ConfigError::Unsupported {
                setting: Setting::Reduction,
                value: Iallreduce.name().into(),
                backend: self.name,
                why: Limit::Iallreduce,
            }),
        }
    }
}

/// Where a setting applies, for a refusal: each names the settings that bound it, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The sync, async and racy block iterations (the Krylov solvers are synchronous).
    Synchronous,
    /// The channels of the async and racy block iterations (R).
    AsyncChannels,
    /// The convergence claims of the async and racy block iterations (certification).
    Claims,
    /// The racy receive.
    RacyReceive,
    /// The non-blocking reductions of async, racy and pipelined CG.
    NonBlocking,
    /// Async and racy detection.
    AsyncDetect,
    /// The Krylov solvers.
    Krylov,
    /// GMRES.
    Gmres,
    /// Multisplitting.
    Multisplit,
    /// Jacobi.
    Jacobi,
    /// Jacobi and multisplitting, the block iterations.
    BlockIteration,
    /// The sync variant's exchange.
    SyncExchange,
    /// The solvers with a choice of exchange: Jacobi and CG.
    ExchangeSolvers,
    /// The channel backends, not shared memory.
    Channels,
    /// The grid, not a sparse matrix.
    Grid,
    /// The Laplace problem.
    Laplace,
    /// Backends whose ranks are processes (hybrid ranks).
    ProcessRanks,
    /// Jacobi's hybrid ranks.
    HybridJacobi,
    /// One thread per rank.
    OneThread,
}

/// Which part of the context a refusal names ("not to …").
pub(crate) enum Part {
    Solver,
    SolverVariant,
    Backend,
    Problem,
    Matrix,
    Team,
}

impl Scope {
    pub(crate) fn part(self) -> Part {
        match self {
            Scope::AsyncChannels
            | Scope::Claims
            | Scope::RacyReceive
            | Scope::NonBlocking
            | Scope::AsyncDetect
            | Scope::SyncExchange => Part::SolverVariant,
            Scope::Krylov
            | Scope::Gmres
            | Scope::Multisplit
            | Scope::Jacobi
            | Scope::BlockIteration
            | Scope::Synchronous
            | Scope::ExchangeSolvers
            | Scope::HybridJacobi => Part::Solver,
            Scope::Channels | Scope::ProcessRanks => Part::Backend,
            Scope::Grid => Part::Matrix,
            Scope::Laplace => Part::Problem,
            Scope::OneThread => Part::Team,
        }
    }
}

/// A setting given (or held away from its default) where it does not apply.
#[derive(Debug, Clone, PartialEq)]
pub struct NotApplicable {
    /// The setting.
    pub setting: Setting,
    /// Its value, as given.
    pub value: String,
    /// Where it applies.
    pub scope: Scope,
    /// Where it was given.
    pub context: Context,
}

/// Refuse each of the settings `given` (with their values, written as
/// [`Setting::default_value`] writes them) that does not apply in `ctx`: one the run does not
/// have ([`Applies::No`]), or has at its default only ([`Applies::Only`]) given another value.
pub fn check_given<'a>(
    ctx: &Context,
    given: impl IntoIterator<Item = (Setting, Cow<'a, str>)>,
) -> Result<(), ConfigError> {
    for (setting, value) in given {
        let scope = match setting.applies(ctx) {
            Applies::Yes | Applies::Inert => continue,
            Applies::Only(_) if setting.default_value().as_deref() == Some(&*value) => continue,
            Applies::Only(scope) | Applies::No(scope) => scope,
        };
        return Err(ConfigError::NotApplicable(NotApplicable {
            setting,
            value: value.into_owned(),
            scope,
            context: *ctx,
        }));
    }
    Ok(())
}

/// How messages name settings: [`Words`] in the library, flags on a command line.
pub trait Names {
    /// The setting's name.
    fn name(&self, setting: Setting) -> Cow<'static, str>;
    /// The setting with a value (`--exchange blocking`; the halo exchange blocking).
    fn given(&self, setting: Setting, value: &str) -> String {
        format!("{} {value}", self.name(setting))
    }
}

/// Settings in words ([`Setting::words`]): the library's own messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct Words;

impl Names for Words {
    fn name(&self, setting: Setting) -> Cow<'static, str> {
        Cow::Borrowed(setting.words())
    }
    fn given(&self, setting: Setting, value: &str) -> String {
        match (setting, value) {
            (Setting::Confirm, "false") => "no certification of claims".into(),
            _ => format!("{} {value}", setting.words()),
        }
    }
}

#[cfg(test)]
mod tests;
