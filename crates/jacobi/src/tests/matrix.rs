//! A sparse matrix through the grid's loops (`Solve::system`): sync Jacobi over row blocks is
//! serial Jacobi on the whole matrix, the stencil written as a matrix takes the stencil's
//! iterations, and async, racy and multisplitting runs stop only on a true residual below
//! tolerance, recomputed here from the gathered solution.

use crate::dispatch::{solve_system_rank, SystemBlock};
use crate::geometry::Dims;
use crate::sparse::{generate, row_blocks, Csr, MatrixStorage, RowBlock};
use crate::{
    Config, Inner, Jacobi, Method, Multisplit, Problem, RankRecord, SizeSpec, StopCriterion,
    Variant,
};
use chan_core::traits::*;
use chan_threads::World;

/// The test systems: two SPD (a 3-D coefficient jump, an anisotropic 2-D Laplacian) and one
/// not symmetric (upwinded convection–diffusion), small enough for a debug build.
fn systems() -> Vec<(&'static str, Csr, bool)> {
    vec![
        ("jump3d", generate::jump_3d(6, 10.0), true),
        ("aniso2d", generate::anisotropic_2d(12, 0.3), true),
        (
            "convdiff2d",
            generate::convection_diffusion_2d(12, 1.0),
            false,
        ),
    ]
}

/// b = A·1 (the solution is 1 everywhere).
pub(super) fn ones_rhs(a: &Csr) -> Vec<f64> {
    let mut b = vec![0.0; a.n()];
    a.mul(&vec![1.0; a.n()], &mut b);
    b
}

/// Run `cfg` on `p` thread ranks over `a`'s row blocks: the records and the assembled x.
pub(super) fn run(cfg: &Config, a: &Csr, b: &[f64], p: usize) -> (Vec<RankRecord>, Vec<f64>) {
    run_stored(cfg, a, b, p, MatrixStorage::Auto)
}

/// [`run`], the rows stored as `storage` says.
fn run_stored(
    cfg: &Config,
    a: &Csr,
    b: &[f64],
    p: usize,
    storage: MatrixStorage,
) -> (Vec<RankRecord>, Vec<f64>) {
    let bounds = row_blocks(a.row_ptr(), p);
    let outs = World::new(p).unwrap().run(|ctx| {
        let r = ctx.rank();
        let block = RowBlock::from_global(a, &bounds, r);
        let sys = SystemBlock {
            b: b[bounds[r]..bounds[r + 1]].to_vec(),
            block,
            exact: None,
            storage,
        };
        solve_system_rank(ctx, cfg, &sys, None, Default::default()).expect("run failed")
    });
    let mut x = Vec::with_capacity(a.n());
    let mut records = Vec::new();
    for (rec, part) in outs {
        x.extend_from_slice(&part);
        records.push(rec);
    }
    (records, x)
}

/// ‖b − A x‖₂ / ‖b‖₂, serially.
pub(super) fn rel_residual(a: &Csr, b: &[f64], x: &[f64]) -> f64 {
    let mut ax = vec![0.0; a.n()];
    a.mul(x, &mut ax);
    let r: f64 = ax.iter().zip(b).map(|(p, q)| (q - p) * (q - p)).sum();
    let bb: f64 = b.iter().map(|v| v * v).sum();
    (r / bb).sqrt()
}

pub(super) fn config(method: Method, tol: f64, check_every: u64, max_iters: u64) -> Config {
    let mut c = Config::new(Problem::Laplace { offset: 0.0 }, method);
    c.criterion = StopCriterion::RelativeResidual { tol };
    c.check_every = check_every;
    c.max_iters = max_iters;
    c
}

/// 40 sync sweeps over 1 to 4 row blocks give the 40th serial Jacobi iterate, written out
/// here (`x ← x + D⁻¹(b − A x)`), to 1e-12 relative, on every test system.
#[test]
fn sync_jacobi_over_row_blocks_is_serial_jacobi() {
    for (name, a, _) in systems() {
        let b = ones_rhs(&a);
        let n = a.n();
        let d = a.diagonal();
        let mut want = vec![0.0; n];
        let mut ax = vec![0.0; n];
        for _ in 0..40 {
            a.mul(&want, &mut ax);
            for i in 0..n {
                want[i] += (b[i] - ax[i]) / d[i];
            }
        }
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let cfg = config(Jacobi::new(Variant::Sync).into(), 1e-15, 40, 40);
        for p in 1..=4 {
            let (recs, x) = run(&cfg, &a, &b, p);
            assert!(recs.iter().all(|r| r.iterations == 40), "{name} p={p}");
            for i in 0..n {
                assert!(
                    (x[i] - want[i]).abs() <= 1e-12 * scale,
                    "{name} p={p} x[{i}] = {} vs {}",
                    x[i],
                    want[i]
                );
            }
        }
    }
}

/// The grid's Laplace problem on `g` as a matrix: the 7-point operator, and b_i the sum of
/// point i's six neighbours with the interior at 0 (the boundary's values).
pub(super) fn stencil_system(g: Dims) -> (Csr, Vec<f64>) {
    let (sh, _, u, _) = crate::serial::start(&Problem::Laplace { offset: 0.0 }, g);
    let mut b = Vec::with_capacity(g.x * g.y * g.z);
    for z in 1..=g.z {
        for y in 1..=g.y {
            for x in 1..=g.x {
                b.push(
                    u[sh.index(x - 1, y, z)]
                        + u[sh.index(x + 1, y, z)]
                        + u[sh.index(x, y - 1, z)]
                        + u[sh.index(x, y + 1, z)]
                        + u[sh.index(x, y, z - 1)]
                        + u[sh.index(x, y, z + 1)],
                );
            }
        }
    }
    (generate::laplace_3d(g.x, g.y, g.z), b)
}

/// The stencil's Laplace problem written as a matrix (the 7-point operator, b the boundary
/// values of each point's boundary neighbours) takes exactly the stencil path's sync
/// iterations, with the same relative residual at every check to 1e-14 absolute: the two
/// sum a row's terms in another order, and b − A u cancels, so they differ by the rounding
/// of the terms, a few ulps of ‖b‖ (1e-16 to 2e-16 measured), whatever the residual.
#[test]
fn the_stencil_as_a_matrix_takes_the_stencils_iterations() {
    let g = Dims::new(12, 6, 6);
    let (a, b) = stencil_system(g);
    for p in [1, 2, 3] {
        let mut grid = config(Jacobi::new(Variant::Sync).into(), 1e-6, 10, 100_000);
        grid.size = SizeSpec::Global(g);
        let (stencil, _, _) = super::common::run_threads(&grid, p);
        let (matrix, _) = run(&grid, &a, &b, p);
        let (s, m) = (&stencil[0], &matrix[0]);
        assert!(s.converged && m.converged, "p={p}");
        assert_eq!(s.iterations, m.iterations, "p={p}");
        let (hs, hm) = (s.history.points(), m.history.points());
        assert_eq!(hs.len(), hm.len());
        for (a, b) in hs.iter().zip(hm) {
            assert_eq!(a.0, b.0);
            assert!((a.1 - b.1).abs() <= 1e-14, "p={p}: {a:?} vs {b:?}");
        }
    }
}

/// Async and racy Jacobi and async multisplitting (inner CG on the SPD systems, inner Jacobi
/// on every one) on 2 and 3 ranks: every rank says converged, and the solution they return
/// has its relative residual below tolerance, recomputed here serially; the certified value
/// they report is that residual.
#[test]
fn async_racy_and_multisplit_stop_on_a_true_residual() {
    let tol = 1e-8;
    for (name, a, spd) in systems() {
        let b = ones_rhs(&a);
        let mut methods: Vec<(String, Method)> = vec![
            ("async".into(), Jacobi::new(Variant::Async).into()),
            ("racy".into(), Jacobi::new(Variant::Racy).into()),
            (
                "multisplit jacobi".into(),
                Multisplit::new(Variant::Async, Inner::Jacobi).into(),
            ),
        ];
        if spd {
            methods.push((
                "multisplit cg".into(),
                Multisplit::new(Variant::Async, Inner::Cg).into(),
            ));
        }
        for (what, method) in methods {
            for p in [2, 3] {
                let cfg = config(method, tol, 1, 1_000_000);
                let (recs, x) = run(&cfg, &a, &b, p);
                let res = rel_residual(&a, &b, &x);
                for r in &recs {
                    assert!(r.converged, "{name} {what} p={p}: {r:?}");
                    assert!(
                        super::common::rel(r.residual.true_residual, res) <= 1e-6,
                        "{name} {what} p={p}: {} vs {res}",
                        r.residual.true_residual
                    );
                }
                assert!(res <= tol, "{name} {what} p={p}: {res}");
            }
        }
    }
}

/// The grid-only settings are refused by name for a matrix, before anything runs.
#[test]
fn grid_only_settings_are_refused_for_a_matrix() {
    let a = generate::laplace_3d(3, 3, 3);
    let b = ones_rhs(&a);
    let mut overlap = Jacobi::new(Variant::Sync);
    overlap.exchange = crate::Exchange::Overlap;
    let mut deep = Jacobi::new(Variant::Sync);
    deep.halo_depth = crate::HaloDepth::Fixed(2);
    for (method, want) in [
        (Method::from(overlap), "the halo exchange overlap"),
        (Method::from(deep), "the halo depth k 2"),
        (
            Multisplit::new(Variant::Sync, Inner::Cg32).into(),
            "the inner solver cg32",
        ),
    ] {
        let cfg = config(method, 1e-6, 2, 100);
        let err = World::new(1).unwrap().run(|ctx| {
            let block = RowBlock::from_global(&a, &[0, a.n()], 0);
            let sys = SystemBlock {
                block,
                b: b.clone(),
                exact: None,
                storage: MatrixStorage::Auto,
            };
            solve_system_rank(ctx, &cfg, &sys, None, Default::default())
                .unwrap_err()
                .to_string()
        });
        assert!(
            err[0].contains(want) && err[0].contains("a sparse matrix"),
            "{want}: {}",
            err[0]
        );
    }
}

/// Serial CG on the whole matrix, written out here (optionally with the Jacobi
/// preconditioner): the iterations to ‖r‖/‖b‖ ≤ tol on the recurrence residual, and x.
fn serial_cg(a: &Csr, b: &[f64], tol: f64, pc: bool) -> (u64, Vec<f64>) {
    let n = a.n();
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let d: Vec<f64> = a
        .diagonal()
        .iter()
        .map(|v| if pc { 1.0 / v } else { 1.0 })
        .collect();
    let bnorm = dot(b, b).sqrt();
    let (mut x, mut r, mut q) = (vec![0.0; n], b.to_vec(), vec![0.0; n]);
    let mut z: Vec<f64> = r.iter().zip(&d).map(|(r, d)| r * d).collect();
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    for it in 1..=10 * n as u64 {
        a.mul(&p, &mut q);
        let alpha = rz / dot(&p, &q);
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        if dot(&r, &r).sqrt() / bnorm <= tol {
            return (it, x);
        }
        z = r.iter().zip(&d).map(|(r, d)| r * d).collect();
        let rz_new = dot(&r, &z);
        for i in 0..n {
            p[i] = z[i] + rz_new / rz * p[i];
        }
        rz = rz_new;
    }
    panic!("serial CG did not converge");
}

/// cg, cg-overlap and pipecg, without and with the Jacobi preconditioner, over 1 to 4 row
/// blocks of the SPD systems: the serial CG's iterations (±2: the distributed dot products
/// sum in another order, and pipelined CG's recurrences round differently) and its solution
/// to 1e-8 of the solution's scale.
#[test]
fn krylov_over_row_blocks_is_serial_cg() {
    use crate::{Krylov, KrylovSolver, Pc};
    let tol = 1e-10;
    for (name, a, spd) in systems() {
        if !spd {
            continue;
        }
        let b = ones_rhs(&a);
        for pc in [Pc::None, Pc::Jacobi] {
            let (want_it, want) = serial_cg(&a, &b, tol, pc == Pc::Jacobi);
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for solver in [
                KrylovSolver::Cg,
                KrylovSolver::CgOverlap,
                KrylovSolver::PipeCg,
            ] {
                let mut k = Krylov::new(solver);
                k.pc = pc;
                for p in 1..=4 {
                    let cfg = config(k.into(), tol, 1000, 100_000);
                    let (recs, x) = run(&cfg, &a, &b, p);
                    let what = format!("{name} {solver:?} {pc:?} p={p}");
                    assert!(recs.iter().all(|r| r.converged), "{what}: {:?}", recs[0]);
                    assert!(
                        recs[0].iterations.abs_diff(want_it) <= 2,
                        "{what}: {} vs {want_it}",
                        recs[0].iterations
                    );
                    assert!(rel_residual(&a, &b, &x) <= tol, "{what}");
                    for i in 0..a.n() {
                        assert!((x[i] - want[i]).abs() <= 1e-8 * scale, "{what}: x[{i}]");
                    }
                }
            }
        }
    }
}

/// CG on the stencil written as a matrix takes the grid's CG iterations exactly.
#[test]
fn cg_on_the_stencil_as_a_matrix_takes_the_grids_iterations() {
    use crate::{Krylov, KrylovSolver};
    let g = Dims::new(12, 6, 6);
    let (a, b) = stencil_system(g);
    for solver in [KrylovSolver::Cg, KrylovSolver::PipeCg] {
        for p in [1, 2, 3] {
            let mut grid = config(Krylov::new(solver).into(), 1e-8, 100, 10_000);
            grid.size = SizeSpec::Global(g);
            let (stencil, _, _) = super::common::run_threads(&grid, p);
            let (matrix, _) = run(&grid, &a, &b, p);
            assert!(
                stencil[0].converged && matrix[0].converged,
                "{solver:?} p={p}"
            );
            assert_eq!(
                stencil[0].iterations, matrix[0].iterations,
                "{solver:?} p={p}"
            );
        }
    }
}

/// Sync Jacobi and the three CGs, on 1 to 3 thread ranks, give the same iterations, residual
/// and iterate to the bit whether the rows are stored as CSR or as the compact storage the
/// blocks take when asked (column offsets and a value table: `kernel.rs`, "Storage").
#[test]
fn compact_storage_solves_to_the_bits_of_csr() {
    use crate::{Krylov, KrylovSolver};
    let mut systems = systems();
    systems.push(("laplace3d", generate::laplace_3d(7, 6, 5), true));
    for (name, a, spd) in systems {
        let b = ones_rhs(&a);
        let mut methods: Vec<Method> = vec![Jacobi::new(Variant::Sync).into()];
        if spd {
            for s in [
                KrylovSolver::Cg,
                KrylovSolver::CgOverlap,
                KrylovSolver::PipeCg,
            ] {
                methods.push(Krylov::new(s).into());
            }
        }
        for method in methods {
            let cfg = config(method, 1e-8, 10, 300);
            for p in 1..=3 {
                let what = format!("{name} {method:?} p={p}");
                let (rc, xc) = run_stored(&cfg, &a, &b, p, MatrixStorage::Csr);
                let (ra, xa) = run_stored(&cfg, &a, &b, p, MatrixStorage::Compact);
                for (c, o) in rc.iter().zip(&ra) {
                    assert_eq!(c.iterations, o.iterations, "{what}");
                    assert_eq!(
                        c.residual.true_residual.to_bits(),
                        o.residual.true_residual.to_bits(),
                        "{what}"
                    );
                }
                let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&xc), bits(&xa), "{what}");
            }
        }
    }
}
