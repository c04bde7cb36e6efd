//! Helpers shared by the tests of the public API.
#![allow(dead_code)]

use chan_threads::World;
use jacobi::{Config, Dims, Jacobi, RankRecord, SizeSpec, StopCriterion, StopReason, Variant};

/// A small configuration: global grid `g`, the given variant.
pub fn cfg(global: Dims, variant: Variant) -> Config {
    Config {
        method: Jacobi::new(variant).into(),
        size: SizeSpec::Global(global),
        ..Config::default()
    }
}

/// With tolerance `tol`.
pub fn with_tol(mut c: Config, tol: f64) -> Config {
    c.criterion = StopCriterion::RelativeResidual { tol };
    c
}

/// Run on the threads backend with `n` ranks: every rank's record.
pub fn run_threads(c: &Config, n: usize) -> Vec<RankRecord> {
    World::new(n)
        .unwrap()
        .run(|ctx| jacobi::Solve::new(c).run(ctx).expect("run failed"))
}

/// As [`run_threads`], each rank pinned to a CPU of its own (`World::pinned`) where the
/// machine has one per rank: for tests that compare ranks' progress. Two unpinned ranks may
/// share one core; the threads backend's channels then yield after 64 polls that found
/// nothing, and two async ranks on one core take turns of about 64 iterations each, as if
/// each waited for the other.
pub fn run_pinned(c: &Config, n: usize) -> Vec<RankRecord> {
    World::new(n)
        .unwrap()
        .pinned()
        .run(|ctx| jacobi::Solve::new(c).run(ctx).expect("run failed"))
}

/// Every rank stopped on the criterion, converged, with its certified true residual below
/// `tol`.
pub fn assert_converged(recs: &[RankRecord], what: &str, tol: f64) {
    for r in recs {
        assert_eq!(r.stop, StopReason::Criterion, "{what}: rank {}", r.rank);
        assert!(r.converged, "{what}: rank {}", r.rank);
        assert!(
            r.residual.true_residual < tol,
            "{what}: rank {}: true residual {:e}",
            r.rank,
            r.residual.true_residual
        );
    }
}
