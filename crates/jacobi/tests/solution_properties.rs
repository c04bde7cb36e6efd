//! Independent checks of the problem: the converged solution's symmetry, the offset, and the
//! bounds every run respects.

mod common;
use chan_core::threads::World;
use common::*;
use jacobi::{Dims, Problem, ProcGrid, StopReason, Variant};

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
    let o = jacobi::shared::solve(&c, 2).unwrap();
    assert_symmetric(&o.solution, g, "shared sync, 2 threads");
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
                jacobi::shared::run(&d, 2).unwrap(),
                jacobi::shared::solve(&d, 2).unwrap().solution,
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
        let shared = jacobi::shared::run(&c, 3).unwrap();
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
        let shared = jacobi::shared::run(&cfg(g, v), 1).unwrap();
        assert!(shared[0].converged, "{v} shared");
    }
}

#[test]
fn bad_configuration_fails_on_every_rank() {
    let mut c = cfg(Dims::new(9, 9, 9), Variant::Async);
    c.grid = Some(ProcGrid(Dims::new(2, 1, 1)));
    let out = World::new(2)
        .unwrap()
        .run(|ctx| jacobi::run_rank(ctx, &c).map(|_| ()));
    for r in out {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("--global") && e.contains("does not split"),
            "{e}"
        );
    }
    assert!(jacobi::shared::run(&c, 2).is_err());
}

#[test]
fn records_gather_to_rank_zero() {
    let c = cfg(Dims::new(9, 8, 6), Variant::Racy);
    let out = World::new(3).unwrap().run(|ctx| {
        let rec = jacobi::run_rank(ctx, &c).unwrap();
        let all = jacobi::gather_records(ctx, &rec).unwrap();
        (rec, all)
    });
    assert!(out[1].1.is_none() && out[2].1.is_none());
    let all = out[0].1.as_ref().expect("rank 0 gets every record");
    assert_eq!(all.len(), 3);
    for (k, (rec, _)) in out.iter().enumerate() {
        assert_eq!(&all[k], rec, "rank {k}'s record came through intact");
    }
    // The channel statistics arrive typed: the halo channels in the run's mode, then the
    // certification channels (Sync), their counts adding up to the rank's totals, and their
    // histograms whole (the comparison above covers every bucket).
    for r in all {
        assert!(!r.channels.is_empty(), "rank {} has channels", r.rank);
        let halves = r.channels.len() / 2;
        assert!(r.channels[..halves]
            .iter()
            .all(|ch| ch.mode == chan_core::ModeKind::Racy));
        assert!(r.channels[halves..]
            .iter()
            .all(|ch| ch.mode == chan_core::ModeKind::Sync));
        let sent: u64 = r.channels.iter().map(|ch| ch.sent).sum();
        let received: u64 = r.channels.iter().map(|ch| ch.received).sum();
        assert_eq!((sent, received), (r.messages.sent, r.messages.received));
        assert!(r.channels.iter().any(|ch| ch.staleness.count() > 0));
    }
}
