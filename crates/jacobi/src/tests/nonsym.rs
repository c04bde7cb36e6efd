//! gmres and bicgstab over row blocks against serial ones written here plainly (dense vectors,
//! the CSR product, GMRES's least-squares problem by its normal equations, modified
//! Gram–Schmidt), without a preconditioner, with Jacobi's and with block Jacobi's ILU(0)
//! (written densely over each block's pattern); on the grid as on its matrix; their
//! breakdowns; and block Jacobi's failures, named on every rank.

use super::matrix::{config, ones_rhs, rel_residual, run, stencil_system};
use crate::dispatch::{solve_system_rank, SystemBlock};
use crate::record::StopReason;
use crate::sparse::{generate, row_blocks, Csr, RowBlock};
use crate::{Dims, Krylov, KrylovSolver, Pc, PcSub, SizeSpec};
use chan_core::traits::*;
use chan_threads::World;

/// The test's non-symmetric system: upwinded convection–diffusion, cell Péclet number 2.
fn convdiff() -> Csr {
    generate::convection_diffusion_2d(12, 2.0)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn mul(a: &Csr, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; a.n()];
    a.mul(x, &mut y);
    y
}

/// M⁻¹ of the serial solvers.
enum SerialPc {
    None,
    Jacobi(Vec<f64>),
    /// Per row block `first..end`: its ILU(0) factors, dense (L unit lower below the
    /// diagonal, U on and above).
    Ilu(Vec<(usize, Vec<Vec<f64>>)>),
}

impl SerialPc {
    fn new(a: &Csr, pc: Pc, bounds: &[usize]) -> SerialPc {
        match pc {
            Pc::None => SerialPc::None,
            Pc::Jacobi => SerialPc::Jacobi(a.diagonal().iter().map(|d| 1.0 / d).collect()),
            Pc::BJacobi => SerialPc::Ilu(
                bounds
                    .windows(2)
                    .map(|w| {
                        let (f, n) = (w[0], w[1] - w[0]);
                        let mut lu: Vec<Vec<f64>> = (0..n)
                            .map(|i| (0..n).map(|j| a.get(f + i, f + j)).collect())
                            .collect();
                        let nz: Vec<Vec<bool>> = lu
                            .iter()
                            .map(|r| r.iter().map(|v| *v != 0.0).collect())
                            .collect();
                        // ILU(0): Gaussian elimination, updates kept to A's pattern.
                        for i in 1..n {
                            for k in 0..i {
                                if !nz[i][k] {
                                    continue;
                                }
                                lu[i][k] /= lu[k][k];
                                for j in k + 1..n {
                                    if nz[i][j] {
                                        lu[i][j] -= lu[i][k] * lu[k][j];
                                    }
                                }
                            }
                        }
                        (f, lu)
                    })
                    .collect(),
            ),
        }
    }

    fn apply(&self, r: &[f64]) -> Vec<f64> {
        match self {
            SerialPc::None => r.to_vec(),
            SerialPc::Jacobi(d) => r.iter().zip(d).map(|(r, d)| r * d).collect(),
            SerialPc::Ilu(blocks) => {
                let mut z = r.to_vec();
                for (f, lu) in blocks {
                    let n = lu.len();
                    let y = &mut z[*f..f + n];
                    for i in 0..n {
                        for k in 0..i {
                            y[i] -= lu[i][k] * y[k];
                        }
                    }
                    for i in (0..n).rev() {
                        for j in i + 1..n {
                            y[i] -= lu[i][j] * y[j];
                        }
                        y[i] /= lu[i][i];
                    }
                }
                z
            }
        }
    }
}

/// `iters` steps of GMRES(m) from x = 0, right-preconditioned, serially: the iterate.
fn serial_gmres(a: &Csr, b: &[f64], m: usize, iters: usize, pc: &SerialPc) -> Vec<f64> {
    let n = a.n();
    let mut x = vec![0.0; n];
    let mut done = 0;
    while done < iters {
        let ax = mul(a, &x);
        let r: Vec<f64> = b.iter().zip(&ax).map(|(b, y)| b - y).collect();
        let beta = dot(&r, &r).sqrt();
        let mut v = vec![r.iter().map(|r| r / beta).collect::<Vec<f64>>()];
        let mut h = vec![vec![0.0; m]; m + 1];
        let mut k = 0;
        while k < m && done < iters {
            let mut w = mul(a, &pc.apply(&v[k]));
            for i in 0..=k {
                h[i][k] = dot(&w, &v[i]);
                for (w, vi) in w.iter_mut().zip(&v[i]) {
                    *w -= h[i][k] * vi;
                }
            }
            h[k + 1][k] = dot(&w, &w).sqrt();
            v.push(w.iter().map(|w| w / h[k + 1][k]).collect());
            k += 1;
            done += 1;
        }
        // min ‖β e₁ − H y‖: (Hᵀ H) y = Hᵀ β e₁, by Gaussian elimination with pivoting.
        let mut g: Vec<Vec<f64>> = (0..k)
            .map(|i| {
                let mut row: Vec<f64> = (0..k)
                    .map(|j| (0..=k).map(|l| h[l][i] * h[l][j]).sum())
                    .collect();
                row.push(h[0][i] * beta);
                row
            })
            .collect();
        for c in 0..k {
            let p = (c..k)
                .max_by(|&i, &j| g[i][c].abs().total_cmp(&g[j][c].abs()))
                .unwrap();
            g.swap(c, p);
            let pivot = g[c].clone();
            for row in g.iter_mut().skip(c + 1) {
                let f = row[c] / pivot[c];
                for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
            }
        }
        let mut y = vec![0.0; k];
        for i in (0..k).rev() {
            y[i] = (g[i][k] - (i + 1..k).map(|j| g[i][j] * y[j]).sum::<f64>()) / g[i][i];
        }
        let mut u = vec![0.0; n];
        for (vi, yi) in v.iter().zip(&y) {
            for (u, vi) in u.iter_mut().zip(vi) {
                *u += yi * vi;
            }
        }
        for (x, z) in x.iter_mut().zip(pc.apply(&u)) {
            *x += z;
        }
    }
    x
}

/// `iters` iterations of BiCGStab from x = 0, right-preconditioned, serially: the iterate.
fn serial_bicgstab(a: &Csr, b: &[f64], iters: usize, pc: &SerialPc) -> Vec<f64> {
    let n = a.n();
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let rh = r.clone();
    let (mut rho_old, mut alpha, mut omega) = (1.0, 1.0, 1.0);
    let (mut v, mut p) = (vec![0.0; n], vec![0.0; n]);
    for _ in 0..iters {
        let rho = dot(&rh, &r);
        let beta = (rho / rho_old) * (alpha / omega);
        for i in 0..n {
            p[i] = r[i] + beta * (p[i] - omega * v[i]);
        }
        let ph = pc.apply(&p);
        v = mul(a, &ph);
        alpha = rho / dot(&rh, &v);
        let s: Vec<f64> = r.iter().zip(&v).map(|(r, v)| r - alpha * v).collect();
        let sh = pc.apply(&s);
        let t = mul(a, &sh);
        omega = dot(&t, &s) / dot(&t, &t);
        for i in 0..n {
            x[i] += alpha * ph[i] + omega * sh[i];
            r[i] = s[i] - omega * t[i];
        }
        rho_old = rho;
    }
    x
}

fn method(solver: KrylovSolver, pc: Pc, restart: usize) -> crate::Method {
    let mut k = Krylov::new(solver);
    k.pc = pc;
    if solver == KrylovSolver::Gmres {
        k.restart = restart;
    }
    k.into()
}

/// After a fixed number of iterations (mid-way to convergence, across two GMRES restarts),
/// gmres and bicgstab over 1 to 3 row blocks hold the serial iterate, to 1e-11 of its
/// scale: the two differ only in the order their dot products sum (and GMRES in how it
/// orthogonalises and solves its least-squares problem), rounding errors of 1e-16 that these
/// few iterations amplify to 1.1e-13 at most (measured), a hundredth of the bound; a wrong
/// coefficient, a missed or extra preconditioner application or a restart at the wrong step
/// moves the iterate by far more than the residual still left (above 1e-6, asserted).
#[test]
fn gmres_and_bicgstab_iterates_are_the_serial_ones() {
    let a = convdiff();
    let b = ones_rhs(&a);
    for pc in [Pc::None, Pc::Jacobi, Pc::BJacobi] {
        for p in 1..=3 {
            let bounds = row_blocks(a.row_ptr(), p);
            let spc = SerialPc::new(&a, pc, &bounds);
            // Block Jacobi's ILU(0) converges in a few iterations: fewer, and a shorter
            // restart to cross two.
            let (m, g_iters, b_iters) = match pc {
                Pc::BJacobi => (3, 7, 3),
                _ => (8, 20, 8),
            };
            for (solver, iters) in [
                (KrylovSolver::Gmres, g_iters),
                (KrylovSolver::BiCgStab, b_iters),
            ] {
                let want = match solver {
                    KrylovSolver::Gmres => serial_gmres(&a, &b, m, iters, &spc),
                    _ => serial_bicgstab(&a, &b, iters, &spc),
                };
                let cfg = config(method(solver, pc, m), 1e-14, 1000, iters as u64);
                let (recs, x) = run(&cfg, &a, &b, p);
                let what = format!("{solver:?} {pc:?} p={p}");
                assert_eq!(recs[0].stop, StopReason::MaxIters, "{what}");
                assert_eq!(recs[0].iterations, iters as u64, "{what}");
                let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let err = x
                    .iter()
                    .zip(&want)
                    .fold(0.0f64, |m, (x, w)| m.max((x - w).abs()));
                assert!(err <= 1e-11 * scale, "{what}: {err:e} of {scale}");
                // Mid-way: the iterate is not yet the solution, so the comparison means
                // something.
                assert!(rel_residual(&a, &b, &x) > 1e-6, "{what}");
            }
        }
    }
}

/// gmres and bicgstab solve the non-symmetric system to the tolerance, as the residual
/// recomputed here from the gathered iterate says, with every preconditioner and over 1 to
/// 3 row blocks; the record's true residual is that one.
#[test]
fn gmres_and_bicgstab_converge_on_a_nonsymmetric_system() {
    let a = generate::convection_diffusion_2d(16, 1.0);
    let b = ones_rhs(&a);
    let tol = 1e-8;
    for solver in [KrylovSolver::Gmres, KrylovSolver::BiCgStab] {
        for pc in [Pc::None, Pc::Jacobi, Pc::BJacobi] {
            for p in 1..=3 {
                let cfg = config(method(solver, pc, 30), tol, 1000, 10_000);
                let (recs, x) = run(&cfg, &a, &b, p);
                let what = format!("{solver:?} {pc:?} p={p}");
                assert!(recs.iter().all(|r| r.converged), "{what}: {:?}", recs[0]);
                assert_eq!(recs[0].stop, StopReason::Criterion, "{what}");
                let t = rel_residual(&a, &b, &x);
                assert!(t < tol, "{what}: {t:e}");
                let rec = recs[0].residual.true_residual;
                assert!((rec - t).abs() <= 1e-12, "{what}: {rec:e} vs {t:e}");
            }
        }
    }
}

/// On the grid, gmres and bicgstab take the iterations they take on the grid's operator
/// written as a matrix (±1: the two sum a product's terms in another order), at 1 and 2
/// ranks, and converge.
#[test]
fn gmres_and_bicgstab_on_the_grid_are_those_on_its_matrix() {
    let g = Dims::new(8, 6, 6);
    let (a, b) = stencil_system(g);
    for solver in [KrylovSolver::Gmres, KrylovSolver::BiCgStab] {
        for p in [1, 2] {
            let mut grid = config(method(solver, Pc::None, 10), 1e-8, 1000, 10_000);
            grid.size = SizeSpec::Global(g);
            let (stencil, _, _) = super::common::run_threads(&grid, p);
            let (matrix, _) = run(&grid, &a, &b, p);
            let what = format!("{solver:?} p={p}");
            assert!(stencil[0].converged && matrix[0].converged, "{what}");
            assert!(
                stencil[0].iterations.abs_diff(matrix[0].iterations) <= 1,
                "{what}: {} vs {}",
                stencil[0].iterations,
                matrix[0].iterations
            );
        }
    }
}

/// A 2 × 2 system (`entries`, b) over `p` ranks: each rank's result.
fn tiny(
    entries: Vec<(u32, u32, f64)>,
    n: usize,
    b: &[f64],
    method: crate::Method,
    p: usize,
) -> Vec<Result<crate::RankRecord, String>> {
    let a = Csr::from_triplets(n, entries);
    let cfg = config(method, 1e-10, 1000, 100);
    let bounds = row_blocks(a.row_ptr(), p);
    World::new(p).unwrap().run(|ctx| {
        let r = ctx.rank();
        let sys = SystemBlock {
            b: b[bounds[r]..bounds[r + 1]].to_vec(),
            block: RowBlock::from_global(&a, &bounds, r),
            exact: None,
            storage: crate::sparse::MatrixStorage::Auto,
        };
        solve_system_rank(ctx, &cfg, &sys, None, Default::default())
            .map(|(rec, _)| rec)
            .map_err(|e| e.to_string())
    })
}

/// BiCGStab on `[[0, 1], [1, 0]]` from b = (1, 0): `(r̂, A p) = 0` at once. GMRES on the
/// singular `[[1, 1], [1, 1]]` from b = (1, −1), orthogonal to its range: `A v₀ = 0`, the
/// rotated Hessenberg diagonal is 0. Each stops with `breakdown`, naming the quantity, on 1
/// and 2 ranks, not converged and without a NaN in its record.
#[test]
fn a_breakdown_stops_gmres_and_bicgstab() {
    for p in [1, 2] {
        let swap = vec![(0, 1, 1.0), (1, 0, 1.0)];
        let recs = tiny(
            swap,
            2,
            &[1.0, 0.0],
            method(KrylovSolver::BiCgStab, Pc::None, 30),
            p,
        );
        let ones = vec![(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0)];
        let grecs = tiny(
            ones,
            2,
            &[1.0, -1.0],
            method(KrylovSolver::Gmres, Pc::None, 30),
            p,
        );
        for (recs, what) in [(recs, "(r̂, A M⁻¹ p)"), (grecs, "Hessenberg")] {
            for r in recs {
                let r = r.expect("a breakdown is a stop, not an error");
                assert_eq!(r.stop, StopReason::Breakdown, "{what} p={p}");
                assert!(!r.converged, "{what}");
                let why = r.krylov.as_ref().unwrap().breakdown.clone().unwrap();
                assert!(why.contains(what), "{why}");
                assert!(r.residual.true_residual.is_finite(), "{what}");
            }
        }
    }
}

/// Block Jacobi's ILU(0) with a zero pivot on rank 1's block only (its rows `[[1, 1], [1,
/// 1]]`): every rank fails, with the one message naming rank 1 and the block's row 2, IC(0)
/// alike; a restart of 0 and a block solve without block Jacobi are refused.
#[test]
fn block_jacobi_failures_are_named_on_every_rank() {
    let entries = vec![
        (0, 0, 4.0),
        (0, 1, -1.0),
        (1, 0, -1.0),
        (1, 1, 4.0),
        (2, 2, 1.0),
        (2, 3, 1.0),
        (3, 2, 1.0),
        (3, 3, 1.0),
    ];
    let b = [1.0; 4];
    for sub in [PcSub::Ilu0, PcSub::Ic0] {
        let mut k = Krylov::new(KrylovSolver::Gmres);
        k.pc = Pc::BJacobi;
        k.pc_sub = sub;
        let outs = tiny(entries.clone(), 4, &b, k.into(), 2);
        for o in outs {
            let e = o.expect_err("a zero pivot is an error");
            assert!(e.contains("rank 1's block") && e.contains("row 2"), "{e}");
        }
    }
    let mut k = Krylov::new(KrylovSolver::Gmres);
    k.restart = 0;
    let mut c = config(k.into(), 1e-8, 10, 100);
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::Zero(crate::Setting::Restart))
    );
    let mut k = Krylov::new(KrylovSolver::Gmres);
    k.restart = crate::MAX_RESTART + 1;
    c.method = k.into();
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::RestartTooLarge(crate::MAX_RESTART + 1))
    );
    let mut k = Krylov::new(KrylovSolver::Cg);
    k.pc = Pc::Jacobi;
    k.pc_sub = PcSub::Ic0;
    c.method = k.into();
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::PcSubWithout(Pc::Jacobi))
    );
}

/// `iters` iterations of preconditioned CG from x = 0, serially: the iterate.
fn serial_pcg(a: &Csr, b: &[f64], iters: usize, pc: &SerialPc) -> Vec<f64> {
    let n = a.n();
    let (mut x, mut r) = (vec![0.0; n], b.to_vec());
    let mut z = pc.apply(&r);
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    for _ in 0..iters {
        let q = mul(a, &p);
        let alpha = rz / dot(&p, &q);
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        z = pc.apply(&r);
        let rz_new = dot(&r, &z);
        for i in 0..n {
            p[i] = z[i] + rz_new / rz * p[i];
        }
        rz = rz_new;
    }
    x
}

/// cg, cg-overlap and pipecg with block Jacobi, its blocks solved by IC(0) and by ILU(0)
/// (the same M on a symmetric matrix, up to rounding), over 1 to 3 row blocks of an SPD
/// system: the serial preconditioned CG's 6th iterate (block ILU(0) written densely here),
/// to 1e-11 of its scale (dot products summed in another order, pipecg's longer
/// recurrences: 1e-14 measured), mid-way to convergence; and convergence to 1e-10.
#[test]
fn cg_and_pipecg_with_block_jacobi_are_serial_pcg() {
    let a = generate::anisotropic_2d(12, 0.3);
    let b = ones_rhs(&a);
    for p in 1..=3 {
        let bounds = row_blocks(a.row_ptr(), p);
        let want = serial_pcg(&a, &b, 6, &SerialPc::new(&a, Pc::BJacobi, &bounds));
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for solver in [
            KrylovSolver::Cg,
            KrylovSolver::CgOverlap,
            KrylovSolver::PipeCg,
        ] {
            for sub in [PcSub::Ic0, PcSub::Ilu0] {
                let mut k = Krylov::new(solver);
                k.pc = Pc::BJacobi;
                k.pc_sub = sub;
                let what = format!("{solver:?} {sub:?} p={p}");
                let (recs, x) = run(&config(k.into(), 1e-15, 1000, 6), &a, &b, p);
                assert_eq!(recs[0].iterations, 6, "{what}");
                let err = x
                    .iter()
                    .zip(&want)
                    .fold(0.0f64, |m, (x, w)| m.max((x - w).abs()));
                assert!(err <= 1e-11 * scale, "{what}: {err:e} of {scale}");
                assert!(rel_residual(&a, &b, &x) > 1e-6, "{what}");
                let (recs, x) = run(&config(k.into(), 1e-10, 1000, 10_000), &a, &b, p);
                assert!(recs[0].converged, "{what}");
                assert!(rel_residual(&a, &b, &x) < 1e-10, "{what}");
            }
        }
    }
}
