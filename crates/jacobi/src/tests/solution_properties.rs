//! Independent checks of the problem: the converged solution's symmetry, the offset, and the
//! bounds every run respects.

use super::common::*;
use crate::{Dims, Problem, ProcGrid, StopReason, Variant};
use chan_threads::World;

/// Value at (x, y, z) of a global interior array, 1-based.
fn at(sol: &[f64], g: Dims, x: usize, y: usize, z: usize) -> f64 {
    sol[(x - 1) + g.x * ((y - 1) + g.y * (z - 1))]
}

/// The boundary data is symmetric under x ↦ 1−x and y ↦ 1−y (up to the rounding of the
/// positions g·h), and so is the stencil; so every Jacobi iterate is, up to rounding: each
/// sweep adds at most a few ε·max|u| of asymmetry (the neighbour sum is associated in a fixed
/// order), damped by the iteration (ρ < 1), so 1e-12·max|u| is a generous bound for these
/// grids, and far below any error of the boundary or the stencil.
fn assert_symmetric(sol: &[f64], g: Dims, what: &str) {
    let max = sol.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(max > 0.1, "{what}: the solution should not be trivial");
    let mut asym_z = 0.0f64;
    for z in 1..=g.z {
        for y in 1..=g.y {
            for x in 1..=g.x {
                let u = at(sol, g, x, y, z);
                let mx = at(sol, g, g.x + 1 - x, y, z);
                let my = at(sol, g, x, g.y + 1 - y, z);
                assert!(
                    (u - mx).abs() <= 1e-12 * max,
                    "{what}: x-mirror at ({x},{y},{z}): {u} vs {mx}"
                );
                assert!(
                    (u - my).abs() <= 1e-12 * max,
                    "{what}: y-mirror at ({x},{y},{z}): {u} vs {my}"
                );
                asym_z = asym_z.max((u - at(sol, g, x, y, g.z + 1 - z)).abs());
            }
        }
    }
    // The bump is on the bottom face only: z is not a symmetry (this check can fail).
    assert!(asym_z > 0.01 * max, "{what}: z-mirror should differ");
}

#[test]
fn converged_solution_is_symmetric_in_x_and_y() {
    let g = Dims::new(12, 10, 8);
    let c = with_tol(cfg(g, Variant::Sync), 1e-6);
    for (n, grid) in [
        (1, None),
        (4, None),
        (2, Some(ProcGrid(Dims::new(1, 2, 1)))),
    ] {
        let mut c = c.clone();
        c.grid = grid;
        let (recs, sol, _) = run_threads(&c, n);
        assert!(recs[0].converged);
        assert_symmetric(&sol, g, &format!("threads sync, {n} ranks"));
    }
    let (_, solution, _) = run_shared(&c, 2);
    assert_symmetric(&solution, g, "shared sync, 2 threads");
    let a = with_tol(cfg(g, Variant::Async), 1e-9);
    let (recs, sol, _) = run_threads(&a, 2);
    assert!(recs.iter().all(|r| r.converged));
    // An asynchronous iterate is only near the symmetric solution: its error is below
    // tol·‖r0‖ in the residual, so compare with a looser bound.
    let max = sol.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for z in 1..=g.z {
        for y in 1..=g.y {
            for x in 1..=g.x {
                let u = at(&sol, g, x, y, z);
                assert!((u - at(&sol, g, g.x + 1 - x, y, z)).abs() < 1e-6 * max);
                assert!((u - at(&sol, g, x, g.y + 1 - y, z)).abs() < 1e-6 * max);
            }
        }
    }
}

#[test]
fn offset_shifts_the_solution_and_keeps_the_iterations() {
    let g = Dims::new(10, 10, 10);
    let mut c = cfg(g, Variant::Sync);
    c.check_every = 1; // the strictest comparison of iteration counts
    let (base, plain, _) = run_threads(&c, 2);
    for offset in [1.0, 10.0] {
        let mut d = c.clone();
        d.problem = Problem::Laplace { offset };
        for (name, recs, sol) in [
            ("threads", run_threads(&d, 2).0, run_threads(&d, 2).1),
            (
                "shared",
                crate::Solve::new(&d).run_shared(2).unwrap(),
                run_shared(&d, 2).1,
            ),
        ] {
            assert_eq!(
                recs[0].iterations, base[0].iterations,
                "{name} offset {offset}"
            );
            // Values near C carry rounding errors of a few ε·C per sweep, damped by the
            // iteration: 1e-12·C bounds them with a wide margin.
            for (k, (a, b)) in sol.iter().zip(&plain).enumerate() {
                assert!(
                    (a - offset - b).abs() <= 1e-12 * offset,
                    "{name} offset {offset}, point {k}: {a} vs {b}"
                );
            }
            assert!(
                rel(
                    recs[0].residual.true_residual,
                    base[0].residual.true_residual
                ) < 1e-6
            );
        }
    }
}

#[test]
fn max_iters_bounds_every_variant() {
    let g = Dims::new(12, 12, 12);
    for v in [Variant::Sync, Variant::Async, Variant::Racy] {
        let mut c = cfg(g, v);
        c.max_iters = 40;
        let (recs, _, _) = run_threads(&c, 4);
        for r in &recs {
            assert!(
                r.iterations <= 40,
                "{v}: rank {} did {}",
                r.rank,
                r.iterations
            );
            assert_eq!(r.stop, StopReason::MaxIters, "{v}");
            assert!(!r.converged, "{v}");
            assert!(r.residual.true_residual > c.criterion.tol());
        }
        assert!(
            recs.iter().any(|r| r.iterations == 40),
            "{v}: someone reached the bound"
        );
        let shared = crate::Solve::new(&c).run_shared(3).unwrap();
        assert!(
            shared.iter().all(|r| r.iterations <= 40 && !r.converged),
            "{v} shared"
        );
    }
}

#[test]
fn single_rank_runs_every_variant() {
    let g = Dims::new(8, 8, 8);
    for v in [Variant::Sync, Variant::Async, Variant::Racy] {
        let (recs, _, _) = run_threads(&cfg(g, v), 1);
        assert!(recs[0].converged, "{v}");
        assert!(recs[0].channels.is_empty());
        let shared = crate::Solve::new(&cfg(g, v)).run_shared(1).unwrap();
        assert!(shared[0].converged, "{v} shared");
    }
}

#[test]
fn bad_configuration_fails_on_every_rank() {
    let mut c = cfg(Dims::new(9, 9, 9), Variant::Async);
    c.grid = Some(ProcGrid(Dims::new(2, 1, 1)));
    let out = World::new(2)
        .unwrap()
        .run(|ctx| crate::Solve::new(&c).run(ctx).map(|_| ()));
    for r in out {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("the global grid") && e.contains("does not split"),
            "{e}"
        );
    }
    assert!(crate::Solve::new(&c).run_shared(2).is_err());
}
