//! The iterative method of a run, as a sum type: each method holds only the settings it reads,
//! so a Krylov run has no halo period and a Jacobi run no preconditioner.
//!
//! Reports store them flat (docs/json-schema.md). [`MethodFlags`] is that flat form:
//! [`Method::from_flags`] resolves it for a [`Solver`], refusing a setting the method does not
//! hold, and [`Method::flags`] gives it back with every setting the method does not read at its
//! default.

use crate::config::{
    ConfigError, Detect, Exchange, HaloDepth, Inner, InnerSpec, Pc, RacyRead, Solver, Variant,
    DEFAULT_INNER_MAX, DEFAULT_INNER_TOL,
};
use crate::problem::Problem;
use crate::settings::{check_given, Backend, Context, Operator, Setting};
use serde::{Deserialize, Serialize};

/// What the solve iterates: Jacobi, a Krylov solver or multisplitting.
#[derive(Debug, Clone, Copy, PartialEq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jacobi {
    /// The iteration over channels.
    pub iteration: BlockIteration,
    /// `--exchange`: how the sync variant swaps halos.
    pub exchange: Exchange,
    /// `--halo-depth k`: the sync variant exchanges halos k planes deep every k iterations and
    /// does the k sweeps on its block grown by the ghost zone, as one wavefront (temporal
    /// blocking); the iterates are bit for bit those of k = 1. Async and racy send k-deep
    /// faces every `halo_every` iterations and advance a fresh ghost zone with the block.
    /// `auto`: k chosen at the start from measured costs (`deep.rs`, "Choosing k").
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KrylovSolver {
    /// Conjugate gradients: halos through Sync channels, two blocking all-reduces an
    /// iteration.
    Cg,
    /// CG with the interior of the matrix-vector product computed while the halos travel
    /// (Hoefler et al.).
    CgOverlap,
    /// Pipelined CG (Ghysels and Vanroose): one non-blocking reduction an iteration.
    PipeCg,
}

impl KrylovSolver {
    /// The `--solver` value.
    pub fn solver(self) -> Solver {
        match self {
            KrylovSolver::Cg => Solver::Cg,
            KrylovSolver::CgOverlap => Solver::CgOverlap,
            KrylovSolver::PipeCg => Solver::PipeCg,
        }
    }
}

/// A Krylov solver's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Krylov {
    /// Which one.
    pub solver: KrylovSolver,
    /// The preconditioner.
    pub pc: Pc,
    /// How CG swaps the halo of its matrix-vector product: over Sync channels (`waitall`,
    /// the default) or in one neighbourhood collective (`neighbor`, CG over MPI only).
    pub exchange: Exchange,
}

impl Krylov {
    /// `solver` without a preconditioner, its halos over channels.
    pub fn new(solver: KrylovSolver) -> Self {
        Krylov {
            solver,
            pc: Pc::None,
            exchange: Exchange::Waitall,
        }
    }
}

/// Multisplitting's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Multisplit {
    /// The outer iteration over channels.
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

/// Every method's settings flat, each at its default unless given: the flags of `aiac run`
/// and the `config` object of a report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MethodFlags {
    /// The Krylov solvers' preconditioner.
    #[serde(default)]
    pub pc: Pc,
    /// sync, async or racy (Jacobi, multisplit; the Krylov solvers are sync only).
    pub variant: Variant,
    /// `--exchange` (Jacobi).
    pub exchange: Exchange,
    /// `--halo-every` (Jacobi, multisplit).
    pub halo_every: u64,
    /// `--halo-depth` (Jacobi): k, or `"auto"`. Absent in reports written before the flag
    /// existed: 1.
    #[serde(default)]
    pub halo_depth: HaloDepth,
    /// `--max-in-flight` (Jacobi, multisplit).
    pub max_in_flight: usize,
    /// `--racy-read` (Jacobi, multisplit).
    #[serde(default)]
    pub racy_read: RacyRead,
    /// `--check-every` given, with async or racy (Jacobi, multisplit).
    #[serde(default)]
    pub pace_reductions: bool,
    /// `--detect` (Jacobi async and racy). Absent in reports written before the flag existed:
    /// the reduction.
    #[serde(default)]
    pub detect: Detect,
    /// `--inner` (multisplit; [`Inner::Cg`] when not given).
    #[serde(default)]
    pub inner: Option<Inner>,
    /// `--inner-tol` (multisplit; [`DEFAULT_INNER_TOL`] when not given).
    #[serde(default)]
    pub inner_tol: Option<f64>,
    /// `--inner-max` (multisplit; [`DEFAULT_INNER_MAX`] when not given).
    #[serde(default)]
    pub inner_max: Option<u64>,
}

impl Default for MethodFlags {
    /// No flag given.
    fn default() -> Self {
        Method::default().flags()
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

    /// The flat form: every setting this method does not read at its default.
    pub fn flags(&self) -> MethodFlags {
        let it = self.iteration().copied().unwrap_or_default();
        let (exchange, halo_depth) = match self {
            Method::Jacobi(j) => (j.exchange, j.halo_depth),
            Method::Krylov(k) => (k.exchange, HaloDepth::Fixed(1)),
            _ => (Exchange::Waitall, HaloDepth::Fixed(1)),
        };
        let pc = match self {
            Method::Krylov(k) => k.pc,
            _ => Pc::None,
        };
        let inner = match self {
            Method::Multisplit(m) => Some(m.inner),
            _ => None,
        };
        MethodFlags {
            pc,
            variant: it.variant,
            exchange,
            halo_every: it.halo_every,
            halo_depth,
            max_in_flight: it.max_in_flight,
            racy_read: it.racy_read,
            pace_reductions: it.pace_reductions,
            detect: it.detect,
            inner: inner.map(|i| i.solver),
            inner_tol: inner.map(|i| i.tol),
            inner_max: inner.map(|i| i.max),
        }
    }

    /// `solver` with the settings `f` gives, as a report of schema 3 or earlier stores them.
    /// A setting the method does not hold, away from its default, is refused as a run
    /// refuses it ([`Setting::applies`]); what a Krylov solver never read (R, the racy read,
    /// the pacing of reductions), at any value in an earlier report, is dropped.
    pub fn from_flags(solver: Solver, f: &MethodFlags) -> Result<Method, ConfigError> {
        let iteration = BlockIteration {
            variant: f.variant,
            halo_every: f.halo_every,
            max_in_flight: f.max_in_flight,
            racy_read: f.racy_read,
            pace_reductions: f.pace_reductions,
            detect: f.detect,
        };
        // Every setting in its range, read or not: a bad value is a typo to report.
        iteration.validate()?;
        if let HaloDepth::Fixed(k) = f.halo_depth {
            if !(1..=crate::MAX_HALO_DEPTH).contains(&k) {
                return Err(ConfigError::HaloDepthValue(k.to_string()));
            }
        }
        let ctx = Context {
            solver,
            variant: f.variant,
            backend: Backend::CHANNELS,
            threads_per_rank: 1,
            operator: Operator::Grid(Problem::Laplace { offset: 0.0 }),
        };
        let held = [
            (Setting::Pc, f.pc != Pc::None, f.pc.name().to_string()),
            (Setting::Inner, f.inner.is_some(), String::new()),
            (Setting::InnerTol, f.inner_tol.is_some(), String::new()),
            (Setting::InnerMax, f.inner_max.is_some(), String::new()),
            (
                Setting::HaloEvery,
                f.halo_every != DEFAULT_HALO_EVERY,
                f.halo_every.to_string(),
            ),
            (
                Setting::HaloDepth,
                f.halo_depth.is_deep(),
                f.halo_depth.to_string(),
            ),
            (
                Setting::Exchange,
                f.exchange != Exchange::Waitall,
                f.exchange.name().to_string(),
            ),
            (
                Setting::Detect,
                f.detect != Detect::Reduction,
                f.detect.name().to_string(),
            ),
        ];
        check_given(
            &ctx,
            held.into_iter()
                .filter(|h| h.1)
                .map(|(s, _, v)| (s, std::borrow::Cow::Owned(v))),
        )?;
        let mut method = Method::new(solver, f.variant)?;
        match &mut method {
            Method::Jacobi(j) => {
                *j = Jacobi {
                    iteration,
                    exchange: f.exchange,
                    halo_depth: f.halo_depth,
                }
            }
            Method::Krylov(k) => {
                k.pc = f.pc;
                k.exchange = f.exchange;
            }
            Method::Multisplit(m) => {
                m.iteration = iteration;
                m.inner = InnerSpec {
                    solver: f.inner.unwrap_or_default(),
                    tol: f.inner_tol.unwrap_or(DEFAULT_INNER_TOL),
                    max: f.inner_max.unwrap_or(DEFAULT_INNER_MAX),
                };
            }
        }
        if let Method::Krylov(k) = &method {
            if k.solver == KrylovSolver::Cg
                && matches!(k.exchange, Exchange::Blocking | Exchange::Overlap)
            {
                return Err(ConfigError::CgExchange(k.exchange));
            }
        }
        Ok(method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every method goes to its flat form and back unchanged.
    #[test]
    fn flags_round_trip() {
        let mut deep = Jacobi::new(Variant::Racy);
        deep.halo_depth = HaloDepth::Fixed(4);
        deep.iteration.max_in_flight = 7;
        let mut ms = Multisplit::new(Variant::Async, Inner::Jacobi);
        ms.inner.tol = 0.3;
        ms.iteration.halo_every = 3;
        let methods: [Method; 5] = [
            Method::default(),
            deep.into(),
            Krylov {
                solver: KrylovSolver::PipeCg,
                pc: Pc::Jacobi,
                exchange: Exchange::Waitall,
            }
            .into(),
            Krylov {
                solver: KrylovSolver::Cg,
                pc: Pc::None,
                exchange: Exchange::Neighbor,
            }
            .into(),
            ms.into(),
        ];
        for m in methods {
            assert_eq!(Method::from_flags(m.solver(), &m.flags()).unwrap(), m);
        }
        assert_eq!(MethodFlags::default(), Method::default().flags());
    }

    /// A setting away from its default for a method that does not hold it is refused, named.
    #[test]
    fn flags_of_another_method_are_refused() {
        let with = |f: fn(&mut MethodFlags)| {
            let mut flags = MethodFlags::default();
            f(&mut flags);
            flags
        };
        let cases: [(Solver, MethodFlags, Setting); 10] = [
            (Solver::Jacobi, with(|f| f.pc = Pc::Jacobi), Setting::Pc),
            (
                Solver::Jacobi,
                with(|f| f.inner = Some(Inner::Cg)),
                Setting::Inner,
            ),
            (
                Solver::Cg,
                with(|f| f.inner_max = Some(3)),
                Setting::InnerMax,
            ),
            (
                Solver::Cg,
                with(|f| f.variant = Variant::Async),
                Setting::Variant,
            ),
            (
                Solver::PipeCg,
                with(|f| f.halo_every = 2),
                Setting::HaloEvery,
            ),
            (
                Solver::CgOverlap,
                with(|f| f.exchange = Exchange::Overlap),
                Setting::Exchange,
            ),
            (
                Solver::Multisplit,
                with(|f| f.exchange = Exchange::Blocking),
                Setting::Exchange,
            ),
            (
                Solver::PipeCg,
                with(|f| f.exchange = Exchange::Neighbor),
                Setting::Exchange,
            ),
            (
                Solver::Cg,
                with(|f| f.exchange = Exchange::Blocking),
                Setting::Exchange,
            ),
            (
                Solver::Multisplit,
                with(|f| f.halo_depth = HaloDepth::Auto),
                Setting::HaloDepth,
            ),
        ];
        for (solver, flags, setting) in cases {
            let e = Method::from_flags(solver, &flags).unwrap_err();
            assert_eq!(e.setting(), setting, "{solver}: '{e}'");
        }
        // What a Krylov solver does not read, at any value in an earlier report, is dropped.
        let k = Method::from_flags(Solver::Cg, &with(|f| f.max_in_flight = 9)).unwrap();
        assert_eq!(k, Method::from(KrylovSolver::Cg));
    }
}
