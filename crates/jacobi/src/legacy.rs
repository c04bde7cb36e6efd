//! Reading a report's configuration as every schema wrote it. Schema 4 (`aiac.run/4`) stores
//! the [`Method`] itself, tagged by its `kind`; schemas 1 to 3 stored the method's settings
//! flat beside `solver` ([`FlatMethod`]), every setting the method did not read at its
//! default, and those still read.

use crate::config::{
    Config, ConfigError, Decomp, Detect, Exchange, HaloDepth, Inner, InnerSpec, Pc, RacyRead,
    SlowRank, Solver, Variant, DEFAULT_INNER_MAX, DEFAULT_INNER_TOL,
};
use crate::geometry::ProcGrid;
use crate::method::{
    BlockIteration, Jacobi, KrylovSolver, Method, DEFAULT_HALO_EVERY, DEFAULT_MAX_IN_FLIGHT,
};
use crate::problem::{Problem, StopCriterion};
use crate::settings::{check_given, Backend, Context, Operator, Setting};
use crate::SizeSpec;
use serde::Deserialize;

/// A [`Config`] as any schema stores it: `method`, or (schemas 1 to 3) `solver` and the
/// method's settings flat.
#[derive(Deserialize)]
pub(crate) struct ConfigRecord {
    problem: Problem,
    /// Schema 4.
    #[serde(default)]
    method: Option<Method>,
    /// Schemas 2 and 3 (absent in schema 1: Jacobi).
    #[serde(default)]
    solver: Option<Solver>,
    /// Schemas 1 to 3.
    #[serde(flatten)]
    flat: FlatMethod,
    size: SizeSpec,
    grid: Option<ProcGrid>,
    decomp: Decomp,
    criterion: StopCriterion,
    check_every: u64,
    max_iters: u64,
    confirm: bool,
    slow: Option<SlowRank>,
}

impl TryFrom<ConfigRecord> for Config {
    type Error = ConfigError;
    fn try_from(r: ConfigRecord) -> Result<Self, ConfigError> {
        let method = match r.method {
            Some(m) => m,
            None => r.flat.method(r.solver.unwrap_or_default())?,
        };
        Ok(Config {
            problem: r.problem,
            method,
            size: r.size,
            grid: r.grid,
            decomp: r.decomp,
            criterion: r.criterion,
            check_every: r.check_every,
            max_iters: r.max_iters,
            confirm: r.confirm,
            slow: r.slow,
        })
    }
}

/// Every method's settings flat, each at its default unless the run set it: the `config` of
/// a report of schemas 1 to 3. A setting a schema did not have yet is absent: its default.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default)]
pub(crate) struct FlatMethod {
    /// The Krylov solvers' preconditioner.
    pub(crate) pc: Pc,
    /// sync, async or racy.
    pub(crate) variant: Variant,
    /// Jacobi's and CG's exchange.
    pub(crate) exchange: Exchange,
    /// N (Jacobi, multisplit).
    pub(crate) halo_every: u64,
    /// k (Jacobi).
    pub(crate) halo_depth: HaloDepth,
    /// R (Jacobi, multisplit).
    pub(crate) max_in_flight: usize,
    /// The racy read (Jacobi, multisplit).
    pub(crate) racy_read: RacyRead,
    /// K given with async or racy (Jacobi, multisplit).
    pub(crate) pace_reductions: bool,
    /// The detection (async and racy Jacobi).
    pub(crate) detect: Detect,
    /// The inner solver (multisplit; [`Inner::Cg`] when `null`).
    pub(crate) inner: Option<Inner>,
    /// The inner tolerance (multisplit; [`DEFAULT_INNER_TOL`] when `null`).
    pub(crate) inner_tol: Option<f64>,
    /// The inner iteration limit (multisplit; [`DEFAULT_INNER_MAX`] when `null`).
    pub(crate) inner_max: Option<u64>,
}

impl Default for FlatMethod {
    /// Nothing set.
    fn default() -> Self {
        FlatMethod {
            pc: Pc::default(),
            variant: Variant::default(),
            exchange: Exchange::default(),
            halo_every: DEFAULT_HALO_EVERY,
            halo_depth: HaloDepth::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            racy_read: RacyRead::default(),
            pace_reductions: false,
            detect: Detect::default(),
            inner: None,
            inner_tol: None,
            inner_max: None,
        }
    }
}

impl FlatMethod {
    /// `solver` with these settings. One the method does not hold, away from its default, is
    /// refused as a run refuses it ([`Setting::applies`]); what a Krylov solver never read
    /// (R, the racy read, the pacing of reductions), at any value in an earlier report, is
    /// dropped.
    pub(crate) fn method(&self, solver: Solver) -> Result<Method, ConfigError> {
        let f = self;
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
            operator: Operator::Grid(Problem::default()),
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
                if k.solver == KrylovSolver::Cg
                    && matches!(f.exchange, Exchange::Blocking | Exchange::Overlap)
                {
                    return Err(ConfigError::CgExchange(f.exchange));
                }
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
        Ok(method)
    }

    /// The flat form of `m`, as schema 3 wrote it: every setting `m` does not read at its
    /// default.
    #[cfg(test)]
    pub(crate) fn of(m: &Method) -> FlatMethod {
        let it = m.iteration().copied().unwrap_or_default();
        let (exchange, halo_depth, pc) = match m {
            Method::Jacobi(j) => (j.exchange, j.halo_depth, Pc::None),
            Method::Krylov(k) => (k.exchange, HaloDepth::default(), k.pc),
            Method::Multisplit(_) => (Exchange::default(), HaloDepth::default(), Pc::None),
        };
        let inner = match m {
            Method::Multisplit(ms) => Some(ms.inner),
            _ => None,
        };
        FlatMethod {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Krylov, Multisplit};

    /// Every method goes to its flat form and back unchanged.
    #[test]
    fn flat_round_trip() {
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
                ..Krylov::new(KrylovSolver::PipeCg)
            }
            .into(),
            Krylov {
                solver: KrylovSolver::Cg,
                pc: Pc::None,
                exchange: Exchange::Neighbor,
                ..Krylov::new(KrylovSolver::Cg)
            }
            .into(),
            ms.into(),
        ];
        for m in methods {
            assert_eq!(FlatMethod::of(&m).method(m.solver()).unwrap(), m);
        }
        assert_eq!(FlatMethod::default(), FlatMethod::of(&Method::default()));
    }

    /// A setting away from its default for a method that does not hold it is refused, named.
    #[test]
    fn settings_of_another_method_are_refused() {
        let with = |f: fn(&mut FlatMethod)| {
            let mut flags = FlatMethod::default();
            f(&mut flags);
            flags
        };
        let cases: [(Solver, FlatMethod, Setting); 10] = [
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
            let e = flags.method(solver).unwrap_err();
            assert_eq!(e.setting(), setting, "{solver}: '{e}'");
        }
        // What a Krylov solver does not read, at any value in an earlier report, is dropped.
        let k = with(|f| f.max_in_flight = 9).method(Solver::Cg).unwrap();
        assert_eq!(k, Method::from(KrylovSolver::Cg));
    }
}
