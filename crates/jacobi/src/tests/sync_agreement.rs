//! The sync variant is deterministic: every decomposition of the same global grid, on the
//! threads backend and on the shared-memory backend, does the same iterations with the same
//! residual history as a serial run, and finds the same solution.

use super::common::*;
use crate::{serial, Dims, ProcGrid, Variant};

/// Histories agree to 1e-12 relative: the updates are bit-identical on every decomposition
/// (each point sums its neighbours in the same order), only the global residual sum is
/// associated differently, an error of a few ε·(number of points).
const HISTORY_TOL: f64 = 1e-12;

fn check_against_serial(global: Dims, check_every: u64, runs: &[(&str, usize, Option<ProcGrid>)]) {
    let mut c = cfg(global, Variant::Sync);
    c.check_every = check_every;
    let s = serial::solve(&c.problem, global, c.criterion, check_every, c.max_iters);
    assert!(s.iterations > 10, "the problem should take some iterations");
    assert!(s.true_residual < c.criterion.tol());
    for &(name, n, grid) in runs {
        let mut c = c.clone();
        c.grid = grid;
        let (recs, sol, plan) = if name == "shared" {
            run_shared(&c, n)
        } else {
            run_threads(&c, n)
        };
        let what = format!("{name} {n} ranks, grid {}", plan.procs);
        for r in &recs {
            assert_eq!(
                r.iterations, s.iterations,
                "{what}: rank {} iterations",
                r.rank
            );
            assert!(r.converged, "{what}");
            assert_eq!(r.history.len(), s.history.len(), "{what}");
            for (a, b) in r.history.iter().zip(&s.history) {
                assert_eq!(a.0, b.0, "{what}");
                assert!(
                    rel(a.1, b.1) <= HISTORY_TOL,
                    "{what}: {a:?} vs serial {b:?}"
                );
            }
            assert!(
                rel(r.residual.true_residual, s.true_residual) <= HISTORY_TOL,
                "{what}"
            );
        }
        assert_eq!(sol.len(), s.solution.len());
        for (k, (a, b)) in sol.iter().zip(&s.solution).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{what}: point {k}: {a} vs serial {b}"
            );
        }
    }
}

#[test]
fn every_decomposition_equals_the_serial_run() {
    let g = |x, y, z| Some(ProcGrid(Dims::new(x, y, z)));
    check_against_serial(
        Dims::new(12, 12, 12),
        10,
        &[
            ("threads", 1, None),
            ("threads", 2, None),
            ("threads", 4, None),
            ("threads", 4, g(1, 1, 4)),
            ("threads", 4, g(4, 1, 1)),
            ("threads", 3, g(1, 3, 1)),
            ("shared", 1, None),
            ("shared", 2, None),
            ("shared", 4, None),
        ],
    );
}

#[test]
fn non_cubic_grid_and_paper_check_period() {
    check_against_serial(
        Dims::new(16, 8, 12),
        100,
        &[
            ("threads", 2, None),
            ("threads", 4, None),
            ("shared", 3, None),
        ],
    );
}

#[test]
fn local_size_gives_the_same_run_as_the_global_one() {
    // --local 6 on 2×2×1 ranks is --global 12,12,6.
    let mut c = cfg(Dims::new(12, 12, 6), Variant::Sync);
    c.check_every = 5;
    let (a, sa, _) = run_threads(&c, 4);
    c.size = crate::SizeSpec::Local(Dims::cube(6));
    let (b, sb, plan) = run_threads(&c, 4);
    assert_eq!(plan.global, Dims::new(12, 12, 6));
    assert_eq!(a[0].iterations, b[0].iterations);
    assert_eq!(sa, sb);
}
