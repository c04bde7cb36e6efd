//! The equations and the stopping criteria, as named choices; the solvers only ask these
//! types. Two problems: the paper's Laplace problem and the Poisson problem of Wang & Gobbert
//! with its exact solution; two criteria: the paper's relative residual and the absolute
//! update norm Wang & Gobbert stop on.

use std::f64::consts::PI;

use crate::config::ConfigError;
use crate::geometry::GlobalIdx;
use serde::{Deserialize, Serialize};

/// The discrete equation solved: `A u = b` on the interior points, A = 6I − adjacency of the
/// 7-point stencil, b the Dirichlet values of the boundary neighbours. One Jacobi sweep is
/// `u_new = (sum of the 6 neighbours) / 6`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum Problem {
    /// The paper's problem (Bethune, Bull, Dingle, Higham, IJHPCA 2014): Laplace's equation on
    /// the unit cube; boundary 0 except the bottom face z = 0, where
    /// `u = exp(-((0.5-x)² + (0.5-y)²))`; the interior starts at 0. `offset` adds C to every
    /// boundary value and starts the interior at C, the paper's way out of the slow
    /// exact-zeros regime: since A·(C·1) is C times the count of boundary neighbours, b − A u_0
    /// and every later residual are unchanged, and so are the iteration counts.
    Laplace {
        /// C.
        offset: f64,
    },
    /// Wang & Gobbert ("Performance comparison between blocking and non-blocking
    /// communications for a three-dimensional Poisson problem"): −Δu = f on the unit cube,
    /// u = 0 on the boundary, with
    /// `f = −2π²[cos(2πx)sin²(πy)sin²(πz) + sin²(πx)cos(2πy)sin²(πz) + sin²(πx)sin²(πy)cos(2πz)]`
    /// so that the exact solution is `u = sin²(πx)sin²(πy)sin²(πz)` (∂²/∂x² sin²(πx) =
    /// 2π² cos(2πx), so −Δu is exactly f). The 7-point discretisation with h = 1/(N+1) is
    /// `6u − Σ neighbours = h² f`; one Jacobi sweep is `u_new = (h² f + Σ neighbours)/6`.
    Poisson,
}

impl Default for Problem {
    /// The paper's: Laplace, no offset.
    fn default() -> Self {
        Problem::Laplace { offset: 0.0 }
    }
}

impl Problem {
    /// `laplace` or `poisson`.
    pub fn name(&self) -> &'static str {
        match self {
            Problem::Laplace { .. } => "laplace",
            Problem::Poisson => "poisson",
        }
    }

    /// The stopping criterion the problem's literature uses, with its default tolerance:
    /// relative residual < 1e-4 (Bethune et al.), update norm ≤ 1e-6 (Wang & Gobbert).
    pub fn default_criterion(&self) -> StopCriterion {
        match self {
            Problem::Laplace { .. } => StopCriterion::RelativeResidual { tol: 1e-4 },
            Problem::Poisson => StopCriterion::UpdateNorm { tol: 1e-6 },
        }
    }

    /// How often the sync variant tests the criterion by default: every 100 iterations (the
    /// paper's setting), every iteration for Wang & Gobbert's update norm.
    pub fn default_check_every(&self) -> u64 {
        match self {
            Problem::Laplace { .. } => 100,
            Problem::Poisson => 1,
        }
    }

    /// `h² f` at a point (the right-hand side the sweep adds), or `None` for a problem whose
    /// interior equations have no source term (the kernels then skip it altogether).
    pub(crate) fn source(&self, pos: [f64; 3], h: f64) -> Option<f64> {
        match self {
            Problem::Laplace { .. } => None,
            Problem::Poisson => {
                let [x, y, z] = pos;
                let s2 = |t: f64| (PI * t).sin().powi(2);
                let c2 = |t: f64| (2.0 * PI * t).cos();
                let f = -2.0
                    * PI
                    * PI
                    * (c2(x) * s2(y) * s2(z) + s2(x) * c2(y) * s2(z) + s2(x) * s2(y) * c2(z));
                Some(h * h * f)
            }
        }
    }

    /// The exact solution of the continuous problem at a point, where one is known.
    pub(crate) fn exact(&self, pos: [f64; 3]) -> Option<f64> {
        match self {
            Problem::Laplace { .. } => None,
            Problem::Poisson => {
                let [x, y, z] = pos;
                Some((PI * x).sin().powi(2) * (PI * y).sin().powi(2) * (PI * z).sin().powi(2))
            }
        }
    }

    /// Check the problem's parameters.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            Problem::Laplace { offset } if !offset.is_finite() => Err(ConfigError::Offset(offset)),
            Problem::Laplace { .. } | Problem::Poisson => Ok(()),
        }
    }

    /// The Dirichlet value at boundary point `g`, whose position in the unit cube is `pos`.
    pub(crate) fn boundary(&self, g: GlobalIdx, pos: [f64; 3]) -> f64 {
        match *self {
            Problem::Laplace { offset } => {
                if g.z == 0 {
                    let (dx, dy) = (0.5 - pos[0], 0.5 - pos[1]);
                    (-(dx * dx + dy * dy)).exp() + offset
                } else {
                    offset
                }
            }
            Problem::Poisson => 0.0,
        }
    }

    /// The starting value at interior point `g` (position `pos`).
    pub(crate) fn initial(&self, _g: GlobalIdx, _pos: [f64; 3]) -> f64 {
        match *self {
            Problem::Laplace { offset } => offset,
            Problem::Poisson => 0.0,
        }
    }
}

/// When an iteration has converged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum StopCriterion {
    /// The paper's: the relative residual ‖b − A u_k‖₂ / ‖b − A u_0‖₂ is below `tol`.
    RelativeResidual {
        /// The tolerance (default 1e-4).
        tol: f64,
    },
    /// Wang & Gobbert's: the update of the last sweep, ‖u_k − u_{k−1}‖₂ over every interior
    /// point (absolute, not scaled by h), is at most `tol`. A Jacobi sweep changes each point
    /// by exactly its residual / 6 (`u_new − u = (b − A u)/6`), so the norm is the sweep's
    /// residual norm over 6: the fused kernel already has it, no second pass is needed.
    UpdateNorm {
        /// The tolerance (default 1e-6).
        tol: f64,
    },
}

impl StopCriterion {
    /// The tolerance.
    pub fn tol(&self) -> f64 {
        match *self {
            StopCriterion::RelativeResidual { tol } | StopCriterion::UpdateNorm { tol } => tol,
        }
    }

    /// The same criterion with another tolerance.
    pub fn with_tol(self, tol: f64) -> Self {
        match self {
            StopCriterion::RelativeResidual { .. } => StopCriterion::RelativeResidual { tol },
            StopCriterion::UpdateNorm { .. } => StopCriterion::UpdateNorm { tol },
        }
    }

    /// Short name: `relative_residual` or `update_norm`.
    pub fn name(&self) -> &'static str {
        match self {
            StopCriterion::RelativeResidual { .. } => "relative_residual",
            StopCriterion::UpdateNorm { .. } => "update_norm",
        }
    }

    /// The value compared with the tolerance, from the squared global residual norm of an
    /// iterate and the squared initial one. Relative residual: a zero initial residual means
    /// `u_0` solves the system (0). Update norm: the norm of the sweep from that iterate.
    pub fn measure(&self, res_sq: f64, res0_sq: f64) -> f64 {
        // A running sum can round a little below zero; NaN stays NaN (f64::max would turn it
        // into 0, a convergence).
        let norm = |sq: f64| if sq < 0.0 { 0.0 } else { sq.sqrt() };
        match self {
            StopCriterion::UpdateNorm { .. } => norm(res_sq) / 6.0,
            StopCriterion::RelativeResidual { .. } => {
                if res0_sq == 0.0 {
                    if res_sq == 0.0 {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else {
                    norm(res_sq) / res0_sq.sqrt()
                }
            }
        }
    }

    /// True when `value` (from [`StopCriterion::measure`]) meets the criterion. NaN never does.
    pub fn met(&self, value: f64) -> bool {
        match *self {
            StopCriterion::RelativeResidual { tol } => value < tol,
            StopCriterion::UpdateNorm { tol } => value <= tol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bottom_face_bump_and_offset() {
        let p = Problem::Laplace { offset: 0.0 };
        let g = GlobalIdx { x: 3, y: 3, z: 0 };
        assert_eq!(p.boundary(g, [0.5, 0.5, 0.0]), 1.0);
        let v = p.boundary(g, [0.0, 0.5, 0.0]);
        assert!((v - (-0.25f64).exp()).abs() < 1e-15);
        assert_eq!(p.boundary(GlobalIdx { x: 0, y: 3, z: 3 }, [0.0; 3]), 0.0);
        let q = Problem::Laplace { offset: 2.0 };
        assert_eq!(q.boundary(g, [0.5, 0.5, 0.0]), 3.0);
        assert_eq!(q.initial(GlobalIdx { x: 1, y: 1, z: 1 }, [0.1; 3]), 2.0);
    }

    #[test]
    fn criterion() {
        let c = StopCriterion::RelativeResidual { tol: 1e-4 };
        assert_eq!(c.measure(4.0, 16.0), 0.5);
        assert_eq!(c.measure(0.0, 0.0), 0.0);
        assert!(c.met(0.5e-4));
        assert!(!c.met(1e-4));
        assert!(!c.met(f64::NAN));
        let u = StopCriterion::UpdateNorm { tol: 1e-6 };
        assert_eq!(u.measure(36e-12, 99.0), 1e-6);
        assert!(u.met(1e-6) && !u.met(1.1e-6) && !u.met(f64::NAN));
        // A NaN residual never converges; a sum rounded just below zero is zero.
        assert!(!c.met(c.measure(f64::NAN, 16.0)) && !u.met(u.measure(f64::NAN, 1.0)));
        assert_eq!(c.measure(-1e-30, 16.0), 0.0);
    }

    /// −Δu = f for the Poisson problem's exact solution, checked with a fourth-order central
    /// difference of the exact solution at a few points (truncation δ⁴(2π)⁴/90 ≈ 1.7e-7
    /// relative at these points, rounding ≈ ε/δ² ≈ 1e-10: the bound 1e-6 leaves a factor of
    /// about 6).
    #[test]
    fn poisson_source_is_minus_laplacian_of_its_exact_solution() {
        let p = Problem::Poisson;
        let u = |q: [f64; 3]| p.exact(q).unwrap();
        let d = 1e-2;
        for q in [
            [0.3, 0.6, 0.45],
            [0.1, 0.2, 0.9],
            [0.5, 0.5, 0.5],
            [0.77, 0.13, 0.31],
        ] {
            let mut lap = 0.0;
            for a in 0..3 {
                let at = |k: f64| {
                    let mut r = q;
                    r[a] += k * d;
                    u(r)
                };
                lap += (-at(2.0) + 16.0 * at(1.0) - 30.0 * at(0.0) + 16.0 * at(-1.0) - at(-2.0))
                    / (12.0 * d * d);
            }
            let f = p.source(q, 1.0).unwrap();
            assert!(
                (-lap - f).abs() <= 1e-6 * f.abs().max(1.0),
                "at {q:?}: −Δu = {} vs f = {f}",
                -lap
            );
        }
        assert_eq!(
            p.boundary(GlobalIdx { x: 0, y: 1, z: 1 }, [0.0, 0.3, 0.3]),
            0.0
        );
        assert!(p.exact([0.0, 0.4, 0.4]).unwrap().abs() < 1e-30);
        assert!(Problem::Laplace { offset: 0.0 }
            .source([0.5; 3], 0.1)
            .is_none());
    }
}
