//! Multisplitting's inner solve (Bethune et al., §6.4; Frommer and Szyld, *On asynchronous
//! iterations*, J. Comput. Appl. Math. 123, 2000): one outer iteration of `--solver
//! multisplit` solves the rank's block of `A u = b`, the halo held fixed as Dirichlet data,
//! in place of the one sweep a Jacobi iteration does. Everything else (halo channels, the
//! sync, async and racy loops, the reductions, the certification of a convergence claim) is
//! the Jacobi solver's, in `solver/`: "converged" means the same for both.
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
//! **A slow rank** (`--slow-rank K --slowdown F`) is slowed per unit of work (`slow.rs`): the
//! initial residual and every inner iteration are followed by `F − 1` residual passes over
//! the block (each about a Jacobi sweep's work; an inner CG iteration is a few), so a solve
//! cut short costs only the iterations it did.
//!
//! **Cut short by fresher halos** (async and racy runs): between inner iterations the solve
//! asks the outer loop whether fresher boundary data has arrived (`fresher`: a non-blocking
//! `can_recv` on the halo channels). Once every neighbour has sent new faces since the solve
//! began, and at least one inner iteration was done, the block problem being solved is
//! already out of date: the solve stops, the outer loop sends this rank's faces and solves
//! again with the new halo. A rank that is behind all its neighbours (a slow one) so cuts its
//! solves short and keeps pace with them instead of holding each outer iteration back by a
//! full solve of its own. "Every neighbour" rather than "any": a rank that is not behind all
//! of its neighbours finishes its solve, so in a balanced run solves are rarely cut. Sync runs
//! never cut a solve (they have no new data mid-solve by construction). A rank whose
//! neighbour waits for it (the two took turns) sends that neighbour its faces after the
//! solve's first inner iteration, from `fresher`, which is given the current iterate for it
//! (`solver/`, `Outbox`).
//!
//! The work vectors (inner CG: r, p, A p) are allocated once, when the run starts.

use crate::config::{Inner, InnerSpec};
use crate::field::Field;
use crate::iterate::Iterate;
use crate::linalg::{self, CgVectors, Vector, SEVEN_POINT};
use crate::single::{self, Vector32};
use crate::slow::Slowdown;
use crate::Error;

/// Asked between inner iterations: has fresher boundary data arrived (every neighbour sent
/// since the solve began)? Never blocks. `Ok(false)` always: a full solve.
/// It is given the current iterate `F` (multisplitting may send faces of it mid-solve).
pub(crate) type Fresher<'a, F = Field> = dyn FnMut(&F) -> Result<bool, Error> + 'a;

/// One rank's inner solver and its counts.
#[derive(Debug)]
pub(crate) struct InnerSolve {
    spec: InnerSpec,
    /// Inner CG's residual, direction and `A p` (`None` for the other inner solvers).
    cg: Option<[Vector; 3]>,
    /// Inner single-precision CG's residual, direction, `A p` and correction.
    cg32: Option<[Vector32; 4]>,
    /// Inner iterations done, over all outer iterations.
    pub(crate) total: u64,
    /// Fewest and most inner iterations of one outer iteration (none yet: `u64::MAX`, 0).
    pub(crate) fewest: u64,
    pub(crate) most: u64,
    /// Solves ended before their tolerance or iteration limit because fresher halos had
    /// arrived.
    pub(crate) cut_short: u64,
    /// Faces sent mid-solve to a neighbour that waited for them (`solver/`, `Outbox`).
    pub(crate) sent_mid_solve: u64,
}

impl InnerSolve {
    /// The inner solver `spec` asks for, its vectors shaped as `field`.
    pub(crate) fn new(spec: InnerSpec, field: &Field) -> Self {
        let sh = field.shape();
        InnerSolve {
            spec,
            cg: (spec.solver == Inner::Cg)
                .then(|| [Vector::zeros(sh), Vector::zeros(sh), Vector::zeros(sh)]),
            cg32: (spec.solver == Inner::Cg32).then(|| {
                [
                    Vector32::zeros(sh),
                    Vector32::zeros(sh),
                    Vector32::zeros(sh),
                    Vector32::zeros(sh),
                ]
            }),
            total: 0,
            fewest: u64::MAX,
            most: 0,
            cut_short: 0,
            sent_mid_solve: 0,
        }
    }

    /// The counts alone, for an iterate that holds its inner solver's work vectors itself
    /// (a matrix's row block, `sparse/iterate.rs`).
    pub(crate) fn counts_only(spec: InnerSpec) -> Self {
        InnerSolve {
            spec,
            cg: None,
            cg32: None,
            total: 0,
            fewest: u64::MAX,
            most: 0,
            cut_short: 0,
            sent_mid_solve: 0,
        }
    }

    /// The inner solver, its tolerance and iteration limit.
    pub(crate) fn spec(&self) -> InnerSpec {
        self.spec
    }

    /// Solve the block's problem, the halo fixed, starting from the current iterate; the
    /// result becomes the current iterate. Each unit of work is slowed by `slow`; between
    /// inner iterations `fresher` says whether to stop early (module docs). Returns Σ r² of
    /// the iterate it started from.
    pub(crate) fn solve(
        &mut self,
        field: &mut Field,
        slow: &mut Slowdown,
        fresher: &mut Fresher<'_>,
    ) -> Result<f64, Error> {
        let mut work = Work { slow, fresher };
        let out = match (&mut self.cg, &mut self.cg32) {
            (Some(v), _) => cg(self.spec, &mut GridCg { field, v }, &mut work)?,
            (_, Some(v)) => cg32(self.spec, v, field, &mut work)?,
            (None, None) => jacobi(self.spec, field, &mut work)?,
        };
        Ok(self.count(out))
    }

    /// Count a solve that returned `(Σ r₀², iterations, cut short)`; returns Σ r₀².
    pub(crate) fn count(&mut self, (r0, k, cut): (f64, u64, bool)) -> f64 {
        self.total += k;
        self.fewest = self.fewest.min(k);
        self.most = self.most.max(k);
        self.cut_short += u64::from(cut);
        r0
    }
}

/// What an inner solve does between its units of work: the slow rank's extra passes, and the
/// question whether fresher halos have come.
pub(crate) struct Work<'f, 'a, F: Iterate = Field> {
    pub(crate) slow: &'f mut Slowdown,
    pub(crate) fresher: &'f mut Fresher<'a, F>,
}

impl<F: Iterate> Work<'_, '_, F> {
    /// A unit of work on `field` is done: the slow rank's extra passes over it.
    fn done(&mut self, field: &F) {
        self.slow.after(1, || field.residual_sq());
    }

    /// After an inner iteration that did not end the solve, `field` holding its iterate: stop
    /// for fresher halos?
    fn stop(&mut self, field: &F) -> Result<bool, Error> {
        (self.fresher)(field)
    }
}

/// What inner CG needs of a block: its iterate, and three fused kernels over work vectors
/// r, p and q = A p allocated once. Inner CG ([`cg`]) is written once over it, for the grid
/// (the 7-point operator) and for a matrix's row block.
pub(crate) trait CgBlock {
    /// The block's iterate.
    type It: Iterate;
    /// The iterate (what the slow rank's passes and the fresher-halo question read).
    fn iterate(&self) -> &Self::It;
    /// `r = b − A x` over the owned points, the halo as it is: Σ r².
    fn residual(&mut self) -> f64;
    /// `p = r + β p` over the owned points (p's halo stays zero: the product is `A_loc p`),
    /// then `q = A p`: Σ p·q.
    fn direction_apply(&mut self, beta: f64) -> f64;
    /// `x += α p`, `r −= α q`: Σ r².
    fn update(&mut self, alpha: f64) -> f64;
}

/// The grid block's inner CG: the field and its vectors in [`InnerSolve`].
struct GridCg<'a> {
    field: &'a mut Field,
    v: &'a mut [Vector; 3],
}

impl CgBlock for GridCg<'_> {
    type It = Field;
    fn iterate(&self) -> &Field {
        self.field
    }
    fn residual(&mut self) -> f64 {
        let sh = *self.field.shape();
        let [r, _, _] = self.v;
        linalg::residual(
            &sh,
            SEVEN_POINT,
            self.field.iterate(),
            self.field.rhs(),
            &mut r.v,
            None,
        )[0]
    }
    fn direction_apply(&mut self, beta: f64) -> f64 {
        let sh = *self.field.shape();
        let [r, p, q] = self.v;
        linalg::direction_apply(&sh, SEVEN_POINT, &r.v, beta, &mut p.v, &mut q.v)
    }
    fn update(&mut self, alpha: f64) -> f64 {
        let sh = *self.field.shape();
        let [r, p, q] = self.v;
        linalg::cg_update(
            &sh,
            alpha,
            CgVectors {
                x: self.field.iterate_mut(),
                r: &mut r.v,
                p: &p.v,
                q: &q.v,
                pc: None,
            },
        )[1]
    }
}

/// Inner Jacobi, over any iterate (a sweep of the async loop: Σ r² of the iterate it
/// started from): returns `(Σ r₀², sweeps, cut short)`.
pub(crate) fn jacobi<F: Iterate>(
    spec: InnerSpec,
    field: &mut F,
    work: &mut Work<'_, '_, F>,
) -> Result<(f64, u64, bool), Error> {
    let r0 = field.sweep_async();
    work.done(field);
    let stop = spec.tol * spec.tol * r0;
    let mut k = 1;
    while k < spec.max {
        if work.stop(field)? {
            return Ok((r0, k, true));
        }
        // The sweep returns the residual of the iterate it started from: one sweep past the
        // one that met the test, as the outer Jacobi loop does.
        let r = field.sweep_async();
        work.done(field);
        k += 1;
        if r <= stop {
            break;
        }
    }
    Ok((r0, k, false))
}

/// Inner CG in single precision for a correction (`single.rs`): `r₀ = b − A x` in double,
/// rounded to single; CG on `A_loc d = r₀` with single-precision vectors and double-precision
/// sums; then `x += d`. Stops as inner CG does. A solve cut short for fresher halos first adds
/// the correction it has. Mid-solve questions (`work.stop`) see the iterate the solve started
/// from: the correction is added once, at the end. Returns `(Σ r₀², iterations, cut short)`.
fn cg32(
    spec: InnerSpec,
    v: &mut [Vector32; 4],
    field: &mut Field,
    work: &mut Work,
) -> Result<(f64, u64, bool), Error> {
    let sh = *field.shape();
    let [r, p, q, d] = v;
    let r0 = linalg::residual(
        &sh,
        SEVEN_POINT,
        field.iterate(),
        field.rhs(),
        &mut r.v,
        None,
    )[0];
    let stop = spec.tol * spec.tol * r0;
    work.done(field);
    if r0 == 0.0 {
        return Ok((r0, 0, false));
    }
    let mut rr = r0;
    let mut beta = 0.0f32;
    let mut k = 0;
    let mut cut = false;
    while k < spec.max {
        if k > 0 && work.stop(field)? {
            cut = true;
            break;
        }
        let pap = linalg::direction_apply(&sh, SEVEN_POINT as f32, &r.v, beta, &mut p.v, &mut q.v);
        if pap.is_nan() || pap <= 0.0 {
            work.done(field);
            break;
        }
        let alpha = (rr / pap) as f32;
        // d = 0·d + α p on the first step: the correction starts at zero.
        let keep = if k == 0 { 0.0 } else { 1.0 };
        let rr_new = linalg::update(&sh, alpha, keep, &mut d.v, &mut r.v, &p.v, &q.v);
        k += 1;
        if rr_new <= stop || !rr_new.is_finite() {
            work.done(field);
            break;
        }
        beta = (rr_new / rr) as f32;
        work.done(field);
        rr = rr_new;
    }
    if k > 0 {
        single::correct(&sh, field.iterate_mut(), &d.v);
    }
    Ok((r0, k, cut))
}

/// Inner CG, over any block ([`CgBlock`]; no preconditioner: the 7-point operator's
/// diagonal is constant, and a matrix's block is solved as it is): returns `(Σ r₀²,
/// iterations, cut short)`.
pub(crate) fn cg<B: CgBlock>(
    spec: InnerSpec,
    blk: &mut B,
    work: &mut Work<'_, '_, B::It>,
) -> Result<(f64, u64, bool), Error> {
    let r0 = blk.residual();
    let stop = spec.tol * spec.tol * r0;
    work.done(blk.iterate());
    if r0 == 0.0 {
        return Ok((r0, 0, false));
    }
    let mut rr = r0;
    // p = r + β p with β = 0 first (p = r), on the owned points: its halo stays zero (A_loc).
    let mut beta = 0.0;
    let mut k = 0;
    while k < spec.max {
        if k > 0 && work.stop(blk.iterate())? {
            return Ok((r0, k, true));
        }
        // The direction update fused with the operator (one pass over p, not two).
        let pap = blk.direction_apply(beta);
        // A_loc is symmetric positive definite: p·Ap > 0 unless p = 0 (or rounding has
        // lost it); stop rather than divide by it.
        if pap.is_nan() || pap <= 0.0 {
            work.done(blk.iterate());
            break;
        }
        let alpha = rr / pap;
        let rr_new = blk.update(alpha);
        k += 1;
        if rr_new <= stop || !rr_new.is_finite() {
            work.done(blk.iterate());
            break;
        }
        beta = rr_new / rr;
        work.done(blk.iterate());
        rr = rr_new;
    }
    Ok((r0, k, false))
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
        assert_eq!(
            cg.solve(&mut a, &mut Slowdown::new(1.0), &mut full)
                .unwrap(),
            r0,
            "returns the residual it started from"
        );
        assert_eq!(
            jac.solve(&mut b, &mut Slowdown::new(1.0), &mut full)
                .unwrap(),
            r0
        );
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
        for solver in [Inner::Cg, Inner::Jacobi, Inner::Cg32] {
            let mut f = block();
            let spec = InnerSpec {
                solver,
                tol: 1e-12,
                max: 3,
            };
            let mut s = InnerSolve::new(spec, &f);
            s.solve(&mut f, &mut Slowdown::new(1.0), &mut full).unwrap();
            s.solve(&mut f, &mut Slowdown::new(1.0), &mut full).unwrap();
            assert_eq!(
                (s.total, s.fewest, s.most, s.cut_short),
                (6, 3, 3, 0),
                "{solver:?}"
            );
        }
    }

    /// Inner CG in single precision solves the block as inner CG in double does, to single
    /// precision: after the same number of iterations from the same start, the two iterates
    /// differ by less than 1e-5 of the correction, and the block's residual fell by the same
    /// factor to within 1%.
    #[test]
    fn single_precision_cg_follows_double_cg() {
        let spec = |solver| InnerSpec {
            solver,
            tol: 1e-12,
            max: 8,
        };
        let (mut a, mut b) = (block(), block());
        let start = a.owned_values();
        let r0 = a.residual_sq();
        let mut cg = InnerSolve::new(spec(Inner::Cg), &a);
        let mut cg32 = InnerSolve::new(spec(Inner::Cg32), &b);
        let one = cg
            .solve(&mut a, &mut Slowdown::new(1.0), &mut full)
            .unwrap();
        let two = cg32
            .solve(&mut b, &mut Slowdown::new(1.0), &mut full)
            .unwrap();
        assert_eq!((one, two, cg.total, cg32.total), (r0, r0, 8, 8));
        let (ua, ub) = (a.owned_values(), b.owned_values());
        let step = ua
            .iter()
            .zip(&start)
            .map(|(x, s)| (x - s).abs())
            .fold(0.0, f64::max);
        let gap = ua
            .iter()
            .zip(&ub)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(
            step > 0.1 && gap < 1e-5 * step,
            "gap {gap}, correction {step}"
        );
        let (fa, fb) = (a.residual_sq() / r0, b.residual_sq() / r0);
        assert!(fa < 0.1 && (fb / fa - 1.0).abs() < 0.01, "{fa} {fb}");
    }

    /// Never fresher data: a full solve.
    fn full(_: &Field) -> Result<bool, Error> {
        Ok(false)
    }

    /// A solve stops at the first question after fresher halos have come, having done at
    /// least one inner iteration; a full solve follows it; the counts add up, the cut counted.
    #[test]
    fn fresher_halos_cut_a_solve_short() {
        for solver in [Inner::Cg, Inner::Jacobi, Inner::Cg32] {
            let mut f = block();
            let spec = InnerSpec {
                solver,
                tol: 1e-12,
                max: 20,
            };
            let mut s = InnerSolve::new(spec, &f);
            // Fresher data from the start: one inner iteration, then the stop.
            s.solve(&mut f, &mut Slowdown::new(1.0), &mut |_: &Field| Ok(true))
                .unwrap();
            assert_eq!((s.total, s.cut_short), (1, 1), "{solver:?}");
            // Fresher data after the 4th question: 5 iterations.
            let mut asked = 0;
            s.solve(&mut f, &mut Slowdown::new(1.0), &mut |_: &Field| {
                asked += 1;
                Ok(asked > 4)
            })
            .unwrap();
            assert_eq!((s.total, s.cut_short), (6, 2), "{solver:?}");
            // None: the limit.
            s.solve(&mut f, &mut Slowdown::new(1.0), &mut full).unwrap();
            assert_eq!(
                (s.total, s.fewest, s.most, s.cut_short),
                (26, 1, 20, 2),
                "{solver:?}"
            );
        }
    }
}
