//! The Krylov solvers against a serial CG written here, independently of the crate's kernels
//! and halo code: the same iteration count and the same residual history on every rank
//! count; pipelined CG within a few iterations of CG; Poisson's error falling like h²; a
//! breakdown reported as one.

use super::common::rel;
use crate::legacy::FlatMethod;
use crate::problem::Problem;
use crate::{
    Config, Dims, Method, Pc, RankRecord, SizeSpec, Solver, StopCriterion, StopReason, Variant,
};
use chan_threads::World;
use std::f64::consts::PI;

/// A Krylov configuration on the global grid `g`.
fn krylov(solver: Solver, pc: Pc, problem: Problem, g: Dims, tol: f64) -> Config {
    let mut method = Method::new(solver, Variant::Sync).expect("a Krylov solver");
    method.krylov_mut().expect("a Krylov solver").pc = pc;
    Config {
        problem,
        method,
        size: SizeSpec::Global(g),
        criterion: StopCriterion::RelativeResidual { tol },
        check_every: 100,
        ..Config::default()
    }
}

/// Run on `ranks` threads with the operator's diagonal `diag`: every rank's record.
fn run_diag(cfg: &Config, ranks: usize, diag: f64) -> Vec<RankRecord> {
    let plan = cfg.plan(ranks).expect("a valid configuration");
    World::new(ranks)
        .unwrap()
        .run(|ctx| {
            let Method::Krylov(k) = &cfg.method else {
                panic!("a Krylov configuration")
            };
            crate::krylov::solve_rank(ctx, cfg, k, &plan, None, diag, None).map(|(r, _)| r)
        })
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("the run succeeds")
}

fn run(cfg: &Config, ranks: usize) -> Vec<RankRecord> {
    run_diag(cfg, ranks, 6.0)
}

/// Textbook CG (Saad, *Iterative Methods for Sparse Linear Systems*, Algorithm 6.18) on the
/// whole grid, with its own b: the Dirichlet values of the neighbours on the boundary planes
/// (Laplace: exp(−((0.5−x)² + (0.5−y)²)) on z = 0, 0 elsewhere) or h²f (Poisson), and its
/// own operator loop. Returns ‖r_k‖/‖b‖ for k = 0, 1, … until it is below `tol`.
fn serial_cg(problem: Problem, g: Dims, tol: f64) -> Vec<f64> {
    let (nx, ny, nz) = (g.x, g.y, g.z);
    let h = [
        1.0 / (nx + 1) as f64,
        1.0 / (ny + 1) as f64,
        1.0 / (nz + 1) as f64,
    ];
    let idx = |x: usize, y: usize, z: usize| x + nx * (y + ny * z);
    let len = nx * ny * nz;
    let mut b = vec![0.0; len];
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                // Grid point (x+1, y+1, z+1) at (x+1)·h.
                let (px, py, pz) = (
                    (x + 1) as f64 * h[0],
                    (y + 1) as f64 * h[1],
                    (z + 1) as f64 * h[2],
                );
                b[idx(x, y, z)] = match problem {
                    Problem::Laplace { .. } => {
                        if z == 0 {
                            (-((0.5 - px).powi(2) + (0.5 - py).powi(2))).exp()
                        } else {
                            0.0
                        }
                    }
                    Problem::Poisson => {
                        let s2 = |t: f64| (PI * t).sin().powi(2);
                        let c2 = |t: f64| (2.0 * PI * t).cos();
                        let f = -2.0
                            * PI
                            * PI
                            * (c2(px) * s2(py) * s2(pz)
                                + s2(px) * c2(py) * s2(pz)
                                + s2(px) * s2(py) * c2(pz));
                        h[0] * h[0] * f
                    }
                };
            }
        }
    }
    let apply = |p: &[f64], q: &mut [f64]| {
        for z in 0..nz {
            for y in 0..ny {
                for x in 0..nx {
                    let mut s = 0.0;
                    if x > 0 {
                        s += p[idx(x - 1, y, z)];
                    }
                    if x + 1 < nx {
                        s += p[idx(x + 1, y, z)];
                    }
                    if y > 0 {
                        s += p[idx(x, y - 1, z)];
                    }
                    if y + 1 < ny {
                        s += p[idx(x, y + 1, z)];
                    }
                    if z > 0 {
                        s += p[idx(x, y, z - 1)];
                    }
                    if z + 1 < nz {
                        s += p[idx(x, y, z + 1)];
                    }
                    q[idx(x, y, z)] = 6.0 * p[idx(x, y, z)] - s;
                }
            }
        }
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let bnorm = dot(&b, &b).sqrt();
    let mut x = vec![0.0; len];
    let mut r = b.clone();
    let mut p = r.clone();
    let mut q = vec![0.0; len];
    let mut rr = dot(&r, &r);
    let mut out = vec![rr.sqrt() / bnorm];
    while rr.sqrt() / bnorm >= tol {
        apply(&p, &mut q);
        let alpha = rr / dot(&p, &q);
        for i in 0..len {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let rr_new = dot(&r, &r);
        out.push(rr_new.sqrt() / bnorm);
        for i in 0..len {
            p[i] = r[i] + rr_new / rr * p[i];
        }
        rr = rr_new;
        assert!(out.len() < 10_000, "the serial CG converges");
    }
    out
}

/// CG and cg-overlap, with and without the Jacobi preconditioner, on 1, 2, 3 and 4 ranks:
/// the iteration count of the serial CG, and its residual at every iteration to 1e-12
/// relative (the blocks' sums are added in another order, and M = I/6 rescales the
/// recurrences; nothing else differs).
#[test]
fn cg_matches_an_independent_serial_cg() {
    let g = Dims::new(12, 8, 8);
    let tol = 1e-8;
    let problem = Problem::Laplace { offset: 0.0 };
    let want = serial_cg(problem, g, tol);
    assert!(want.len() > 10, "{want:?}");
    for solver in [Solver::Cg, Solver::CgOverlap] {
        for pc in [Pc::None, Pc::Jacobi] {
            for ranks in 1..=4 {
                let what = format!("{solver} pc {} on {ranks} rank(s)", pc.name());
                let recs = run(&krylov(solver, pc, problem, g, tol), ranks);
                for r in &recs {
                    assert_eq!(r.stop, StopReason::Criterion, "{what}");
                    assert!(r.converged && r.residual.true_residual < tol, "{what}");
                    assert_eq!(r.iterations as usize, want.len() - 1, "{what}");
                }
                let h = &recs[0].history;
                assert_eq!(h.len(), want.len(), "{what}");
                for (p, w) in h.iter().zip(&want) {
                    assert!(
                        rel(p.residual(), *w) <= 1e-12,
                        "{what}, iteration {}: {} vs serial {w}",
                        p.iteration(),
                        p.residual()
                    );
                }
            }
        }
    }
}

/// Pipelined CG reaches the same tolerance (certified by the true residual) within two
/// iterations of CG, on every rank count, with one reduction per iteration (plus the last).
#[test]
fn pipecg_converges_within_a_few_iterations_of_cg() {
    let g = Dims::new(12, 8, 8);
    let tol = 1e-8;
    let problem = Problem::Laplace { offset: 0.0 };
    let cg = serial_cg(problem, g, tol).len() as i64 - 1;
    for pc in [Pc::None, Pc::Jacobi] {
        for ranks in 1..=4 {
            let what = format!("pipecg pc {} on {ranks} rank(s)", pc.name());
            let recs = run(&krylov(Solver::PipeCg, pc, problem, g, tol), ranks);
            let it = recs[0].iterations;
            for r in &recs {
                assert_eq!(r.iterations, it, "{what}: ranks iterate together");
                assert!(r.converged && r.residual.true_residual < tol, "{what}");
                let k = r.krylov.as_ref().expect("a Krylov record");
                assert!(k.breakdown.is_none());
                assert!(k.reduce_flight_s >= k.reduce_wait_s && k.reduce_wait_s >= 0.0);
                assert_eq!(r.reductions, it + 1, "{what}: one reduction per iteration");
            }
            assert!((it as i64 - cg).abs() <= 2, "{what}: {it} vs cg {cg}");
        }
    }
}

/// With the true residual checked every other iteration and a tolerance near the attainable
/// accuracy, pipelined CG still stops only with its true residual below tolerance.
#[test]
fn pipecg_checks_its_true_residual() {
    let mut cfg = krylov(
        Solver::PipeCg,
        Pc::Jacobi,
        Problem::Laplace { offset: 0.0 },
        Dims::cube(8),
        1e-13,
    );
    cfg.check_every = 2;
    let recs = run(&cfg, 2);
    let r = &recs[0];
    assert!(r.converged && r.residual.true_residual < 1e-13, "{r:?}");
    let k = r.krylov.as_ref().unwrap();
    assert!(k.true_residual_checks >= r.iterations / 2, "{k:?}");
}

/// CG on the Poisson problem: the max-norm error against the exact solution falls as h²,
/// ((2N+1)/(N+1))² from N to 2N (3.57 from 8 to 16), within 10%, and it is the same on 1 and
/// 2 ranks.
#[test]
fn cg_on_poisson_is_second_order() {
    let err = |n: usize, solver, ranks| {
        let cfg = krylov(solver, Pc::None, Problem::Poisson, Dims::cube(n), 1e-10);
        let recs = run(&cfg, ranks);
        assert!(recs.iter().all(|r| r.converged));
        recs.iter()
            .map(|r| r.error_max.expect("an exact solution"))
            .fold(0.0, f64::max)
    };
    for solver in [Solver::Cg, Solver::PipeCg] {
        let (e8, e16) = (err(8, solver, 2), err(16, solver, 2));
        let want = (17.0f64 / 9.0).powi(2);
        assert!(
            (e8 / e16 / want - 1.0).abs() < 0.1,
            "{solver}: {e8:.3e} / {e16:.3e} = {} (h² says {want})",
            e8 / e16
        );
        assert!(rel(err(8, solver, 1), e8) < 1e-6);
    }
}

/// An indefinite operator (diagonal 1 instead of 6) breaks CG and pipelined CG down: the
/// run stops with a breakdown that names the quantity, reports finite residuals, and its
/// record survives JSON.
#[test]
fn an_indefinite_operator_is_a_breakdown_not_a_nan() {
    for solver in [Solver::Cg, Solver::CgOverlap, Solver::PipeCg] {
        let cfg = krylov(
            solver,
            Pc::None,
            Problem::Laplace { offset: 0.0 },
            Dims::cube(6),
            1e-8,
        );
        for r in run_diag(&cfg, 2, 1.0) {
            assert_eq!(r.stop, StopReason::Breakdown, "{solver}");
            assert!(!r.converged);
            let why = r.krylov.as_ref().unwrap().breakdown.clone().unwrap();
            assert!(why.contains("p·Ap"), "{solver}: {why}");
            assert!(r.residual.true_residual.is_finite(), "{solver}");
            assert!(r.history.iter().all(|p| p.residual().is_finite()));
            let text = serde_json::to_string(&r).unwrap();
            let back: RankRecord = serde_json::from_str(&text).unwrap();
            assert_eq!(back.stop, StopReason::Breakdown);
        }
    }
}

/// Krylov solvers are synchronous; the flags of the Jacobi solver and the shared-memory
/// backend are refused with a message naming the setting.
#[test]
fn bad_combinations_name_their_flags() {
    let base = krylov(
        Solver::Cg,
        Pc::None,
        Problem::Laplace { offset: 0.0 },
        Dims::cube(8),
        1e-8,
    );
    let refused = |solver, f: fn(&mut FlatMethod)| {
        let mut flags = FlatMethod::default();
        f(&mut flags);
        flags.method(solver).unwrap_err().to_string()
    };
    for variant in [Variant::Async, Variant::Racy] {
        let flags = FlatMethod {
            variant,
            ..FlatMethod::default()
        };
        let e = flags.method(Solver::Cg).unwrap_err().to_string();
        assert!(
            e.contains(&format!("the variant {variant} applies to"))
                && e.contains("the Krylov solvers are synchronous")
                && e.contains("not to the solver cg"),
            "{e}"
        );
    }
    assert!(refused(Solver::Cg, |f| f.halo_every = 2).contains("the halo period N applies to"));
    let c = Config {
        criterion: StopCriterion::UpdateNorm { tol: 1e-6 },
        ..base.clone()
    };
    assert!(c
        .plan(1)
        .unwrap_err()
        .to_string()
        .contains("relative residual"));
    assert!(refused(Solver::Jacobi, |f| f.pc = Pc::Jacobi).contains("the preconditioner jacobi"));
    let e = base.shared_plan(2).unwrap_err().to_string();
    assert!(
        e.contains("the solver cg is not supported with the backend shared"),
        "{e}"
    );
}
