//! Multisplitting's inner solve (Bethune et al., §6.4; Frommer and Szyld, *On asynchronous
//! iterations*, J. Comput. Appl. Math. 123, 2000): one outer iteration of `--solver
//! multisplit` solves the rank's block of `A u = b`, the halo held fixed as Dirichlet data,
//! in place of the one sweep a Jacobi iteration does. Everything else (halo channels, the
//! sync, async and racy loops, the reductions, the certification of a convergence claim) is
//! the Jacobi solver's, in `solver.rs`: "converged" means the same for both.
//!
//! * **Inner CG** ([`Inner::Cg`]): conjugate gradients on the owned points alone. With the
//!   halo fixed, the block's equations are `A_loc u = b_loc + (halo terms)`; starting from
//!   the current iterate, the residual `r₀ = b − A u` (halo included) is that of the global
//!   system restricted to the block, and every later product `A p` reads a zero halo (the
//!   direction vectors never write theirs), which is `A_loc p`. Its dot products are over the
//!   block only: no global reduction, no message. Stops when `‖r‖ ≤ tol · ‖r₀‖` or after
//!   `max` iterations.
//! * **Inner Jacobi** ([`Inner::Jacobi`]): up to `max` fused sweeps of the block, the halo
//!   fixed, stopping when the residual of the iterate a sweep starts from is at most
//!   `tol · ‖r₀‖`.
//!
//! Both return `Σ r₀²`, the residual of the iterate the outer iteration started from, with
//! the halo it had: what a Jacobi sweep returns, and what the outer loop reduces.
//!
//! The work vectors (inner CG: r, p, A p) are allocated once, when the run starts.

use crate::config::{Inner, InnerSpec};
use crate::field::Field;
use crate::kernel::Region;
use crate::linalg::{self, CgVectors, Vector, SEVEN_POINT};

/// One rank's inner solver and its counts.
#[derive(Debug)]
pub(crate) struct InnerSolve {
    spec: InnerSpec,
    /// Inner CG's residual, direction and `A p` (`None` for inner Jacobi).
    cg: Option<[Vector; 3]>,
    /// Every owned point of the block.
    all: Region,
    /// Inner iterations done, over all outer iterations.
    pub(crate) total: u64,
    /// Fewest and most inner iterations of one outer iteration (none yet: `u64::MAX`, 0).
    pub(crate) fewest: u64,
    pub(crate) most: u64,
}

impl InnerSolve {
    /// The inner solver `spec` asks for, its vectors shaped as `field`.
    pub(crate) fn new(spec: InnerSpec, field: &Field) -> Self {
        let sh = field.shape();
        InnerSolve {
            spec,
            cg: (spec.solver == Inner::Cg)
                .then(|| [Vector::zeros(sh), Vector::zeros(sh), Vector::zeros(sh)]),
            all: Region::all(sh.n),
            total: 0,
            fewest: u64::MAX,
            most: 0,
        }
    }

    /// Solve the block's problem, the halo fixed, starting from the current iterate; the
    /// result becomes the current iterate. Returns Σ r² of the iterate it started from.
    pub(crate) fn solve(&mut self, field: &mut Field) -> f64 {
        let (r0, k) = match &mut self.cg {
            Some(v) => cg(self.spec, v, &self.all, field),
            None => jacobi(self.spec, field),
        };
        self.total += k;
        self.fewest = self.fewest.min(k);
        self.most = self.most.max(k);
        r0
    }
}

/// Inner Jacobi: returns `(Σ r₀², sweeps)`.
fn jacobi(spec: InnerSpec, field: &mut Field) -> (f64, u64) {
    let r0 = field.sweep();
    let stop = spec.tol * spec.tol * r0;
    let mut k = 1;
    while k < spec.max {
        // The sweep returns the residual of the iterate it started from: one sweep past the
        // one that met the test, as the outer Jacobi loop does.
        let r = field.sweep();
        k += 1;
        if r <= stop {
            break;
        }
    }
    (r0, k)
}

/// Inner CG (no preconditioner: the 7-point operator's diagonal is constant): returns
/// `(Σ r₀², iterations)`.
fn cg(spec: InnerSpec, v: &mut [Vector; 3], all: &Region, field: &mut Field) -> (f64, u64) {
    let sh = *field.shape();
    let [r, p, q] = v;
    let [r0, _] = linalg::residual(
        &sh,
        SEVEN_POINT,
        field.iterate(),
        field.rhs(),
        &mut r.v,
        None,
    );
    let stop = spec.tol * spec.tol * r0;
    if r0 == 0.0 {
        return (r0, 0);
    }
    // p = r on the owned points; its halo stays zero (A_loc).
    linalg::direction(&sh, &r.v, 0.0, &mut p.v);
    let mut rr = r0;
    let mut k = 0;
    while k < spec.max {
        let pap = linalg::apply(&sh, SEVEN_POINT, &p.v, &mut q.v, all);
        // A_loc is symmetric positive definite: p·Ap > 0 unless p = 0 (or rounding has
        // lost it); stop rather than divide by it.
        if pap.is_nan() || pap <= 0.0 {
            break;
        }
        let alpha = rr / pap;
        let [_, rr_new] = linalg::cg_update(
            &sh,
            alpha,
            CgVectors {
                x: field.iterate_mut(),
                r: &mut r.v,
                p: &p.v,
                q: &q.v,
                pc: None,
            },
        );
        k += 1;
        if rr_new <= stop || !rr_new.is_finite() {
            break;
        }
        linalg::direction(&sh, &r.v, rr_new / rr, &mut p.v);
        rr = rr_new;
    }
    (r0, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Inner;
    use crate::geometry::{Dims, Plan, ProcGrid};
    use crate::problem::Problem;

    /// A block with a non-trivial halo: rank 0 of a 2-rank split of the Laplace problem,
    /// its halo facing rank 1 set to 1.
    fn block() -> Field {
        let plan = Plan::split(Dims::new(12, 6, 6), ProcGrid(Dims::new(2, 1, 1))).unwrap();
        let g = plan.geometry(0);
        let mut f = Field::new(&g, &Problem::Laplace { offset: 0.0 });
        let face = crate::geometry::Face::ALL
            .into_iter()
            .find(|fc| g.neighbours[fc.index()].is_some())
            .unwrap();
        let data = vec![1.0; f.face_len(face)];
        f.unpack(face, &data);
        f
    }

    /// Both inner solvers solve the block's Dirichlet problem: driven to a tight inner
    /// tolerance, the block's residual (the halo fixed) falls by that factor, and the two
    /// agree on the solution (up to that tolerance times the solution's scale, 1).
    #[test]
    fn inner_solvers_solve_the_block() {
        let tight = |solver, max| InnerSpec {
            solver,
            tol: 1e-10,
            max,
        };
        let mut a = block();
        let mut b = block();
        let r0 = a.residual_sq();
        let mut cg = InnerSolve::new(tight(Inner::Cg, 1000), &a);
        let mut jac = InnerSolve::new(tight(Inner::Jacobi, 100_000), &b);
        assert_eq!(cg.solve(&mut a), r0, "returns the residual it started from");
        assert_eq!(jac.solve(&mut b), r0);
        // CG needs at most as many iterations as the block has points, and far fewer
        // than Jacobi's sweeps.
        assert!(
            cg.total <= 6 * 6 * 6 && cg.total * 5 < jac.total,
            "{cg:?} {jac:?}"
        );
        for f in [&a, &b] {
            assert!(
                f.residual_sq() <= 1e-20 * r0 * 1.0001,
                "{}",
                f.residual_sq()
            );
        }
        let (ua, ub) = (a.owned_values(), b.owned_values());
        let gap = ua
            .iter()
            .zip(&ub)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(gap < 1e-8, "cg and jacobi differ by {gap}");
    }

    /// The inner iteration limit is honoured and counted.
    #[test]
    fn inner_max_caps_each_solve() {
        for solver in [Inner::Cg, Inner::Jacobi] {
            let mut f = block();
            let spec = InnerSpec {
                solver,
                tol: 1e-12,
                max: 3,
            };
            let mut s = InnerSolve::new(spec, &f);
            s.solve(&mut f);
            s.solve(&mut f);
            assert_eq!((s.total, s.fewest, s.most), (6, 3, 3), "{solver:?}");
        }
    }
}
