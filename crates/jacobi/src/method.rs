//! The iterative method of a run, as a sum type: each method holds only the settings it reads,
//! so a Krylov run has no halo period and a Jacobi run no preconditioner.
//!
//! A report stores the method as it is, tagged by its `kind` (docs/json-schema.md; reports of
//! the earlier, flat schemas read through `legacy.rs`).

use crate::config::{
    ConfigError, Detect, Exchange, HaloDepth, Inner, InnerSpec, Pc, PcSub, RacyRead, Solver,
    Variant, DEFAULT_INNER_MAX, DEFAULT_INNER_TOL,
};
use crate::problem::Problem;
use crate::settings::{check_given, Backend, Context, Operator, Setting};
use serde::{Deserialize, Serialize};

/// What the solve iterates: Jacobi, a Krylov solver or multisplitting. A report stores it
/// tagged: `{"kind": "jacobi", "variant": "async", …}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Method {
    /// The paper's Jacobi iteration, in any [`Variant`].
    Jacobi(Jacobi),
    /// Conjugate gradients and its overlapped and pipelined forms: synchronous, halos every
    /// iteration, the default exchange.
    Krylov(Krylov),
    /// Asynchronous multisplitting (Bethune et al., §6.4): an inner solve of each block per
    /// outer iteration, the outer iteration in any [`Variant`].
    Multisplit(Multisplit),
}

/// How a block iteration runs over channels: Jacobi's, and multisplitting's outer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockIteration {
    /// sync, async or racy.
    pub variant: Variant,
    /// Exchange halos every N iterations (sync: blocking swap; async/racy: offer the faces).
    pub halo_every: u64,
    /// R: messages in flight per channel direction (async, racy).
    pub max_in_flight: usize,
    /// Racy over channels: when the halo view is read.
    pub racy_read: RacyRead,
    /// Async and racy over channels: pace the non-blocking reduction by
    /// [`crate::Config::check_every`] (`--check-every` given). Off (the default, the paper's
    /// scheme): a round restarts as soon as the previous one returns.
    pub pace_reductions: bool,
    /// Async and racy over channels: how convergence is detected before it is certified.
    pub detect: Detect,
}

/// The default halo period N: a halo every iteration, the paper's.
pub const DEFAULT_HALO_EVERY: u64 = 1;

/// The default R, messages in flight per channel direction: 2, so that a new message can be
/// sent while the last one is read.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 2;

/// The default iteration limit.
pub const DEFAULT_MAX_ITERS: u64 = 1_000_000;

impl Default for BlockIteration {
    /// Sync, a halo every iteration, R = 2, racy views read once landed, unpaced reductions.
    fn default() -> Self {
        BlockIteration {
            variant: Variant::Sync,
            halo_every: DEFAULT_HALO_EVERY,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            racy_read: RacyRead::Landed,
            pace_reductions: false,
            detect: Detect::Reduction,
        }
    }
}

impl BlockIteration {
    /// The defaults in `variant`.
    pub fn new(variant: Variant) -> Self {
        BlockIteration {
            variant,
            ..Self::default()
        }
    }

    /// N at least 1, R in the channel layer's range.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.halo_every == 0 {
            return Err(ConfigError::Zero(Setting::HaloEvery));
        }
        // The channel layer's own check (R ≥ 1 and its upper limit), as one message.
        chan_core::ChannelConfig::new(1, self.max_in_flight).map_err(ConfigError::MaxInFlight)?;
        Ok(())
    }
}

/// Jacobi's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jacobi {
    /// The iteration over channels.
    #[serde(flatten)]
    pub iteration: BlockIteration,
    /// `--exchange`: how the sync variant swaps halos.
    pub exchange: Exchange,
    /// `--halo-depth k`: the sync variant exchanges halos k planes deep every k iterations and
    /// does the k sweeps on its block grown by the ghost zone, as one wavefront (temporal
    /// blocking); the iterates are bit for bit those of k = 1. Async and racy send k-deep
    /// faces every `halo_every` iterations and advance a fresh ghost zone with the block.
    /// `auto`: k chosen at the start from measured costs (`deep/`, "Choosing k").
    pub halo_depth: HaloDepth,
}

impl Default for Jacobi {
    /// The paper's: sync, the `Waitall` swap, one-plane halos.
    fn default() -> Self {
        Jacobi::new(Variant::Sync)
    }
}

impl Jacobi {
    /// The defaults in `variant`.
    pub fn new(variant: Variant) -> Self {
        Jacobi {
            iteration: BlockIteration::new(variant),
            exchange: Exchange::Waitall,
            halo_depth: HaloDepth::Fixed(1),
        }
    }
}

/// Which Krylov solver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KrylovSolver {
    /// Conjugate gradients: halos through Sync channels, two blocking all-reduces an
    /// iteration.
    Cg,
    /// CG with the interior of the matrix-vector product computed while the halos travel
    /// (Hoefler et al.).
    CgOverlap,
    /// Pipelined CG (Ghysels and Vanroose): one non-blocking reduction an iteration.
    #[serde(rename = "pipecg")]
    PipeCg,
    /// Restarted GMRES(m), right-preconditioned, classical Gram–Schmidt.
    Gmres,
    /// BiCGStab, right-preconditioned.
    #[serde(rename = "bicgstab")]
    BiCgStab,
}

impl KrylovSolver {
    /// The `--solver` value.
    pub fn solver(self) -> Solver {
        match self {
            KrylovSolver::Cg => Solver::Cg,
            KrylovSolver::CgOverlap => Solver::CgOverlap,
            KrylovSolver::PipeCg => Solver::PipeCg,
            KrylovSolver::Gmres => Solver::Gmres,
            KrylovSolver::BiCgStab => Solver::BiCgStab,
        }
    }
}

/// A Krylov solver's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Krylov {
    /// Which one.
    pub solver: KrylovSolver,
    /// The preconditioner.
    pub pc: Pc,
    /// How CG swaps the halo of its matrix-vector product: over Sync channels (`waitall`,
    /// the default) or in one neighbourhood collective (`neighbor`, CG over MPI only).
    pub exchange: Exchange,
    /// GMRES: Arnoldi steps between restarts, m (at least 1).
    #[serde(default = "default_restart")]
    pub restart: usize,
    /// Block Jacobi: the solve of each rank's diagonal block.
    #[serde(default)]
    pub pc_sub: PcSub,
}

/// GMRES's default restart m: 30, PETSc's.
pub const DEFAULT_RESTART: usize = 30;

/// GMRES's largest restart m: its m + 1 basis vectors of the block and its (m + 1) × m
/// Hessenberg matrix (8 MB at 1000) are held at once.
pub const MAX_RESTART: usize = 1000;

fn default_restart() -> usize {
    DEFAULT_RESTART
}

impl Krylov {
    /// `solver` without a preconditioner, its halos over channels.
    pub fn new(solver: KrylovSolver) -> Self {
        Krylov {
            solver,
            pc: Pc::None,
            exchange: Exchange::Waitall,
            restart: DEFAULT_RESTART,
            pc_sub: PcSub::default(),
        }
    }
}

/// Multisplitting's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Multisplit {
    /// The outer iteration over channels.
    #[serde(flatten)]
    pub iteration: BlockIteration,
    /// The inner solve of each block.
    pub inner: InnerSpec,
}

impl Multisplit {
    /// The defaults in `variant` with `inner` as the inner solver.
    pub fn new(variant: Variant, inner: Inner) -> Self {
        Multisplit {
            iteration: BlockIteration::new(variant),
            inner: InnerSpec {
                solver: inner,
                tol: DEFAULT_INNER_TOL,
                max: DEFAULT_INNER_MAX,
            },
        }
    }
}

impl Default for Method {
    /// Jacobi, the paper's.
    fn default() -> Self {
        Method::Jacobi(Jacobi::default())
    }
}

impl From<Jacobi> for Method {
    fn from(m: Jacobi) -> Self {
        Method::Jacobi(m)
    }
}

impl From<Krylov> for Method {
    fn from(m: Krylov) -> Self {
        Method::Krylov(m)
    }
}

impl From<KrylovSolver> for Method {
    fn from(s: KrylovSolver) -> Self {
        Method::Krylov(Krylov::new(s))
    }
}

impl From<Multisplit> for Method {
    fn from(m: Multisplit) -> Self {
        Method::Multisplit(m)
    }
}

impl Method {
    /// `solver` in `variant` with its defaults; the Krylov solvers are sync only.
    pub fn new(solver: Solver, variant: Variant) -> Result<Method, ConfigError> {
        let ctx = Context {
            solver,
            variant,
            backend: Backend::CHANNELS,
            threads_per_rank: 1,
            operator: Operator::Grid(Problem::default()),
        };
        check_given(&ctx, [(Setting::Variant, variant.name().into())])?;
        let krylov = |k: KrylovSolver| Ok(Method::from(k));
        match solver {
            Solver::Jacobi => Ok(Jacobi::new(variant).into()),
            Solver::Cg => krylov(KrylovSolver::Cg),
            Solver::CgOverlap => krylov(KrylovSolver::CgOverlap),
            Solver::PipeCg => krylov(KrylovSolver::PipeCg),
            Solver::Gmres => krylov(KrylovSolver::Gmres),
            Solver::BiCgStab => krylov(KrylovSolver::BiCgStab),
            Solver::Multisplit => Ok(Multisplit::new(variant, Inner::default()).into()),
        }
    }

    /// The solver.
    pub fn solver(&self) -> Solver {
        match self {
            Method::Jacobi(_) => Solver::Jacobi,
            Method::Krylov(k) => k.solver.solver(),
            Method::Multisplit(_) => Solver::Multisplit,
        }
    }

    /// The variant: the Krylov solvers are sync.
    pub fn variant(&self) -> Variant {
        self.iteration().map_or(Variant::Sync, |i| i.variant)
    }

    /// The block iteration over channels (Jacobi, multisplit).
    pub fn iteration(&self) -> Option<&BlockIteration> {
        match self {
            Method::Jacobi(j) => Some(&j.iteration),
            Method::Multisplit(m) => Some(&m.iteration),
            Method::Krylov(_) => None,
        }
    }

    /// The block iteration over channels, to change it (Jacobi, multisplit).
    pub fn iteration_mut(&mut self) -> Option<&mut BlockIteration> {
        match self {
            Method::Jacobi(j) => Some(&mut j.iteration),
            Method::Multisplit(m) => Some(&mut m.iteration),
            Method::Krylov(_) => None,
        }
    }

    /// How halos are swapped: Jacobi's and the Krylov solvers' exchange (multisplitting's
    /// outer iteration swaps every halo at once, as `waitall`).
    pub fn exchange(&self) -> Exchange {
        match self {
            Method::Jacobi(j) => j.exchange,
            Method::Krylov(k) => k.exchange,
            Method::Multisplit(_) => Exchange::Waitall,
        }
    }

    /// The Krylov solvers' preconditioner (none for the other methods).
    pub fn pc(&self) -> Pc {
        match self {
            Method::Krylov(k) => k.pc,
            _ => Pc::None,
        }
    }

    /// Jacobi's settings, to change them (`None` for the other methods).
    pub fn jacobi_mut(&mut self) -> Option<&mut Jacobi> {
        match self {
            Method::Jacobi(j) => Some(j),
            _ => None,
        }
    }

    /// A Krylov solver's settings, to change them (`None` for the other methods).
    pub fn krylov_mut(&mut self) -> Option<&mut Krylov> {
        match self {
            Method::Krylov(k) => Some(k),
            _ => None,
        }
    }

    /// Multisplitting's inner solve, to change it (`None` for the other methods).
    pub fn inner_mut(&mut self) -> Option<&mut InnerSpec> {
        match self {
            Method::Multisplit(m) => Some(&mut m.inner),
            _ => None,
        }
    }
}
