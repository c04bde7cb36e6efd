//! The shared-memory sync variant (one parallel region, fixed planes per worker, one barrier
//! per sweep) against the threads backend on one rank: the same run, whatever the number of
//! workers, including more workers than cores (their barrier must yield) and one plane each.

use super::common::*;
use crate::{Config, Dims, Problem, SlowRank, StopReason, Variant};

/// The solution must be bit-identical: every point's update sums its neighbours in the same
/// order whatever the split, and the workers read exactly u_k (the barrier orders the
/// sweeps). Only the global Σ r² is associated differently (per worker, then across workers),
/// an error of a few ε·(number of points) relative: 1e-12 bounds it for these grids.
const SUM_TOL: f64 = 1e-12;

/// Run `c` on the threads backend with one rank and on the shared backend with each of
/// `workers`; the runs must agree in everything the records report.
fn agree(c: &Config, workers: &[usize]) {
    let (reference, want, _) = run_threads(c, 1);
    let r0 = &reference[0];
    assert!(
        r0.iterations > 10,
        "the problem should take some iterations"
    );
    for &n in workers {
        let (recs, sol, plan) = run_shared(c, n);
        let what = format!("shared sync on {n} workers, {}", plan.local);
        assert_eq!(recs.len(), n, "{what}: one record per worker");
        for r in &recs {
            assert_eq!(r.iterations, r0.iterations, "{what}: worker {}", r.rank);
            assert_eq!(r.stop, r0.stop, "{what}");
            assert_eq!(r.converged, r0.converged, "{what}");
            assert_eq!(r.certifications.len(), r0.certifications.len(), "{what}");
            for (a, b) in r.certifications.iter().zip(&r0.certifications) {
                assert_eq!(a.iteration, b.iteration, "{what}");
                assert_eq!(a.accepted, b.accepted, "{what}");
                assert!(rel(a.true_residual, b.true_residual) <= SUM_TOL, "{what}");
            }
            assert_eq!(r.history.len(), r0.history.len(), "{what}");
            for (a, b) in r.history.iter().zip(r0.history.iter()) {
                assert_eq!(a.0, b.0, "{what}");
                assert!(rel(a.1, b.1) <= SUM_TOL, "{what}: {a:?} vs {b:?}");
            }
            let (a, b) = (r.residual, r0.residual);
            assert_eq!(a.reported.is_some(), b.reported.is_some(), "{what}");
            if let (Some(x), Some(y)) = (a.reported, b.reported) {
                assert!(rel(x, y) <= SUM_TOL, "{what}: reported {x} vs {y}");
            }
            assert!(rel(a.true_residual, b.true_residual) <= SUM_TOL, "{what}");
            assert!(rel(a.initial_norm, b.initial_norm) <= SUM_TOL, "{what}");
        }
        assert_eq!(sol.len(), want.len(), "{what}");
        for (k, (a, b)) in sol.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what}: point {k}: {a} vs {b}");
        }
    }
}

#[test]
fn one_two_and_three_workers_equal_the_threads_backend() {
    // 3 workers on this 2-core machine: one waits at the barrier while the worker it waits
    // for needs its core, which only yielding gives back.
    let mut c = cfg(Dims::new(10, 11, 12), Variant::Sync);
    c.check_every = 7;
    agree(&c, &[1, 2, 3]);
}

#[test]
fn one_plane_per_worker() {
    // Every plane a worker owns is a boundary plane its neighbours read; 6 workers is three
    // per core here. (A shared plan splits z evenly, so there is no uneven split, and no more
    // workers than planes, to test: `shared_plan` refuses them.)
    let mut c = cfg(Dims::new(9, 8, 6), Variant::Sync);
    c.check_every = 3;
    agree(&c, &[6]);
    assert!(c.shared_plan(4).is_err(), "6 planes do not split over 4");
    assert!(
        c.shared_plan(7).is_err(),
        "nor over more workers than planes"
    );
}

#[test]
fn max_iters_no_confirm_poisson_and_a_slow_worker() {
    let g = Dims::new(8, 8, 12);
    // Stopped by the bound between two checks: the true residual is computed after the loop.
    let mut c = cfg(g, Variant::Sync);
    c.max_iters = 23;
    c.check_every = 10;
    agree(&c, &[2, 3]);
    let (recs, _, _) = run_shared(&c, 3);
    assert!(recs.iter().all(|r| r.stop == StopReason::MaxIters));
    // A sync run makes no claim to certify: turning certification off is refused.
    let mut c = cfg(g, Variant::Sync);
    c.confirm = false;
    c.check_every = 5;
    assert_eq!(
        c.shared_plan(3).unwrap_err().setting(),
        crate::Setting::Confirm
    );
    // A source term and the update-norm criterion.
    let mut c = cfg(Dims::cube(12), Variant::Sync);
    c.problem = Problem::Poisson;
    c.criterion = Problem::Poisson.default_criterion();
    c.check_every = 4;
    agree(&c, &[2, 3]);
    // Extra passes on one worker change its timing, never the iterates.
    let mut c = cfg(g, Variant::Sync);
    c.check_every = 10;
    c.slow = Some(SlowRank {
        rank: 0,
        factor: 2.0,
    });
    agree(&c, &[3]);
}
