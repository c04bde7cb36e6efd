//! Convergence detection (`--detect`): the snapshot and barrier schemes of async and racy
//! Jacobi stop only on a residual below tolerance, recomputed serially from the assembled
//! final iterate (an independent truth), on 1 to 4 ranks; a snapshot's reduced residual is
//! that of one global vector, the one the run stops on; and what has no such scheme is
//! refused.

use super::common::*;
use crate::serial::relative_residual;
use crate::sparse::Csr;
use crate::{ConfigError, Detect, Dims, HaloDepth, StopReason, Variant};
use chan_threads::World;

/// The grid and tolerance of these tests: small, so a run takes some hundred sweeps.
const GRID: Dims = Dims { x: 12, y: 10, z: 8 };
const TOL: f64 = 1e-4;

/// The relative margin between two computations of one vector's residual: a sum of the
/// same n squared residuals in any order lies within about n·ε of the exact sum (n = 960
/// points, ε = 2.2e-16: 2e-13), and the criterion's square root halves that.
const ROUNDING: f64 = 1e-12;

/// Jacobi in `variant`, detecting by `detect`, certifying when `confirm`.
fn detecting(variant: Variant, detect: Detect, confirm: bool) -> crate::Config {
    let mut c = with_tol(cfg(GRID, variant), TOL);
    c.method.iteration_mut().unwrap().detect = detect;
    c.confirm = confirm;
    c
}

/// Every rank stopped on the criterion, each rank's certified residual is below tolerance,
/// and so is the serial residual of the assembled final iterate, which agrees with it.
fn stops_below_tol(recs: &[crate::RankRecord], sol: &[f64], what: &str) -> f64 {
    let serial = relative_residual(&crate::Problem::Laplace { offset: 0.0 }, GRID, sol);
    assert!(serial < TOL, "{what}: serial residual {serial} ≥ tol");
    for r in recs {
        assert_eq!(r.stop, StopReason::Criterion, "{what}: rank {}", r.rank);
        assert!(r.converged, "{what}: rank {}", r.rank);
        let t = r.residual.true_residual;
        assert!(t < TOL, "{what}: rank {}: certified {t} ≥ tol", r.rank);
        assert!(
            rel(t, serial) < ROUNDING,
            "{what}: rank {}: certified {t}, serial {serial}",
            r.rank
        );
        assert!(
            r.detect_rounds.is_some_and(|k| k > 0),
            "{what}: rank {}: rounds {:?}",
            r.rank,
            r.detect_rounds
        );
    }
    serial
}

/// Snapshot and barrier detection, async and racy, on 1 to 4 ranks (4 oversubscribe the
/// cores of a small machine): certified runs stop converged, on a residual below tolerance
/// that a serial recomputation confirms.
#[test]
fn snapshot_and_barrier_runs_stop_below_tol() {
    for detect in [Detect::Snapshot, Detect::Ibarrier] {
        for variant in [Variant::Async, Variant::Racy] {
            for n in 1..=4 {
                let c = detecting(variant, detect, true);
                let (recs, sol, _) = run_threads(&c, n);
                let what = format!("{} {variant:?} {n} ranks", detect.name());
                stops_below_tol(&recs, &sol, &what);
                // Every rank saw the same rounds.
                assert!(
                    recs.iter()
                        .all(|r| r.detect_rounds == recs[0].detect_rounds),
                    "{what}: rounds differ"
                );
            }
        }
    }
}

/// The consistency of a snapshot: the residual a snapshot round reduced (the report's
/// `reported`) is the serial residual of the gathered final iterate, which is the snapshot,
/// to [`ROUNDING`]; so without the certification (`--no-confirm`) the run still never stops
/// above tolerance, and with it a claim is rejected only by a rounding: the certification
/// recomputes the residual of the same vector, the sums in another order, so a rejected
/// claim lay below tolerance and its true residual at or above it, the two within
/// [`ROUNDING`] of each other. (The reduction scheme's claim is a sum of residuals seen at
/// different moments, which differs from any one vector's.)
#[test]
fn a_snapshot_residual_is_that_of_the_gathered_snapshot() {
    for confirm in [false, true] {
        for variant in [Variant::Async, Variant::Racy] {
            for n in 1..=4 {
                let c = detecting(variant, Detect::Snapshot, confirm);
                let (recs, sol, _) = run_threads(&c, n);
                let what = format!("snapshot {variant:?} {n} ranks, confirm {confirm}");
                let serial = stops_below_tol(&recs, &sol, &what);
                for r in &recs {
                    let reported = r.residual.reported.expect("a round returned");
                    assert!(
                        rel(reported, serial) < ROUNDING,
                        "{what}: rank {}: snapshot residual {reported}, serial {serial}",
                        r.rank
                    );
                    let by_rounding = |k: &crate::Certification| {
                        k.reported.is_some_and(|c| {
                            c < TOL && k.true_residual >= TOL && rel(c, k.true_residual) < ROUNDING
                        })
                    };
                    assert!(
                        r.certifications
                            .iter()
                            .all(|k| k.accepted || by_rounding(k)),
                        "{what}: rank {}: a snapshot claim was rejected: {:?}",
                        r.rank,
                        r.certifications
                    );
                    let accepted = r.certifications.iter().filter(|k| k.accepted).count();
                    assert_eq!(accepted, usize::from(confirm), "{what}");
                }
            }
        }
    }
}

/// A barrier run that diverges stops as diverged on every rank, with or without the
/// certification: a rank whose share has diverged enters the barrier (so it completes), and
/// its entry claims no convergence. The system: b = A·1 with A tridiagonal, 1 on the diagonal
/// and 3 beside it, whose Jacobi iteration matrix has spectral radius 6·cos(π/13) ≈ 5.8, so the
/// residual passes 1e20 of its start within some thirty sweeps.
#[test]
fn a_diverging_barrier_run_stops_diverged() {
    const N: usize = 12;
    let mut t = Vec::new();
    for i in 0..N as u32 {
        t.push((i, i, 1.0));
        if i > 0 {
            t.push((i, i - 1, 3.0));
            t.push((i - 1, i, 3.0));
        }
    }
    let a = Csr::from_triplets(N, t);
    let mut b = vec![0.0; N];
    a.mul(&[1.0; N], &mut b);
    for confirm in [false, true] {
        for variant in [Variant::Async, Variant::Racy] {
            for p in [2, 3] {
                let mut c = detecting(variant, Detect::Ibarrier, confirm);
                c.max_iters = 1_000_000;
                let (recs, _) = super::matrix::run(&c, &a, &b, p);
                let what = format!("{variant:?} {p} ranks, confirm {confirm}");
                for r in &recs {
                    assert_eq!(r.stop, StopReason::Diverged, "{what}: rank {}", r.rank);
                    assert!(!r.converged, "{what}: rank {}", r.rank);
                    assert!(
                        r.iterations < 100_000,
                        "{what}: rank {}: {} iterations",
                        r.rank,
                        r.iterations
                    );
                }
            }
        }
    }
}

/// A detection away from the reduction is refused for the sync variant and for the other
/// solvers (one error naming the setting), and snapshot detection for an iterate that has no
/// snapshot: as a report's settings, by validation, and (a configuration built in code) on
/// every rank before any channel opens. The reduction, the default, is what every run takes.
#[test]
fn detection_without_its_loop_is_refused() {
    for solver in [crate::Solver::Jacobi, crate::Solver::Cg] {
        let flags = crate::legacy::FlatMethod {
            detect: Detect::Reduction,
            ..Default::default()
        };
        assert!(flags.method(solver).is_ok(), "{solver}");
    }
    let mut flags = crate::legacy::FlatMethod {
        detect: Detect::Snapshot,
        ..Default::default()
    };
    let e = flags.method(crate::Solver::Jacobi).unwrap_err();
    assert_eq!(e.setting(), crate::Setting::Detect, "{e}");
    assert!(e.to_string().contains("the async and racy variants"), "{e}");
    flags.variant = Variant::Async;
    for solver in [crate::Solver::Multisplit, crate::Solver::Cg] {
        let e = flags.method(solver).unwrap_err();
        assert_eq!(e.setting(), crate::Setting::Detect, "{solver}: {e}");
    }
    assert!(flags.method(crate::Solver::Jacobi).is_ok());
    flags.halo_depth = HaloDepth::Fixed(2);
    let deep = crate::Config {
        method: flags.method(crate::Solver::Jacobi).unwrap(),
        ..crate::Config::default()
    };
    let e = deep.validate().unwrap_err();
    assert_eq!(e, ConfigError::SnapshotOf(crate::Setting::HaloDepth), "{e}");
    flags.detect = Detect::Ibarrier;
    assert!(flags.method(crate::Solver::Jacobi).is_ok());

    let mut c = detecting(Variant::Async, Detect::Snapshot, true);
    c.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Fixed(2);
    // Validation refuses it; the run refuses it too, should a caller skip the validation.
    assert!(c.plan(2).is_err());
    let mut by_reduction = c.clone();
    by_reduction.method.iteration_mut().unwrap().detect = Detect::Reduction;
    let plan = by_reduction.plan(2).unwrap();
    let errs = World::new(2).unwrap().run(|ctx| {
        crate::dispatch::solve_rank(
            ctx,
            &c,
            &plan,
            None,
            false,
            crate::hybrid::RankTeam::alone(1),
        )
        .map(|_| ())
        .unwrap_err()
    });
    for e in errs {
        assert!(
            matches!(e, crate::Error::Config(ConfigError::SnapshotOf(_))),
            "{e}"
        );
    }
}

/// Paced snapshot rounds (`--check-every K` with async or racy): a rank takes a snapshot no
/// sooner than K of its iterations after the previous one, so no rank completes more than
/// iterations / K + 1 rounds; the run still stops on a snapshot below tolerance.
#[test]
fn paced_snapshots_are_k_iterations_apart() {
    const K: u64 = 25;
    for variant in [Variant::Async, Variant::Racy] {
        let mut c = detecting(variant, Detect::Snapshot, true);
        c.method.iteration_mut().unwrap().pace_reductions = true;
        c.check_every = K;
        let (recs, sol, _) = run_threads(&c, 2);
        let what = format!("paced snapshot {variant:?}");
        stops_below_tol(&recs, &sol, &what);
        for r in &recs {
            let rounds = r.detect_rounds.unwrap();
            assert!(
                rounds <= r.iterations / K + 1,
                "{what}: rank {}: {rounds} rounds in {} iterations",
                r.rank,
                r.iterations
            );
        }
    }
}
