//! The equations and the stopping criteria, as named choices. Adding a problem (the Poisson
//! problem of Wang & Gobbert, issue 7) or a criterion (‖u_k − u_{k−1}‖₂ ≤ tol) is a new variant
//! here; the solvers only ask these types.

use crate::config::ConfigError;
use crate::geometry::GlobalIdx;
use serde::Serialize;

/// The discrete equation solved: `A u = b` on the interior points, A = 6I − adjacency of the
/// 7-point stencil, b the Dirichlet values of the boundary neighbours. One Jacobi sweep is
/// `u_new = (sum of the 6 neighbours) / 6`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
}

impl Problem {
    /// `laplace`.
    pub fn name(&self) -> &'static str {
        match self {
            Problem::Laplace { .. } => "laplace",
        }
    }

    /// Check the problem's parameters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            Problem::Laplace { offset } if !offset.is_finite() => Err(ConfigError::Offset(offset)),
            Problem::Laplace { .. } => Ok(()),
        }
    }

    /// The Dirichlet value at boundary point `g`, whose position in the unit cube is `pos`.
    pub fn boundary(&self, g: GlobalIdx, pos: [f64; 3]) -> f64 {
        match *self {
            Problem::Laplace { offset } => {
                if g.z == 0 {
                    let (dx, dy) = (0.5 - pos[0], 0.5 - pos[1]);
                    (-(dx * dx + dy * dy)).exp() + offset
                } else {
                    offset
                }
            }
        }
    }

    /// The starting value at interior point `g` (position `pos`).
    pub fn initial(&self, _g: GlobalIdx, _pos: [f64; 3]) -> f64 {
        match *self {
            Problem::Laplace { offset } => offset,
        }
    }
}

/// When an iteration has converged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum StopCriterion {
    /// The paper's: the relative residual ‖b − A u_k‖₂ / ‖b − A u_0‖₂ is below `tol`.
    RelativeResidual {
        /// The tolerance (default 1e-4).
        tol: f64,
    },
}

impl StopCriterion {
    /// The tolerance.
    pub fn tol(&self) -> f64 {
        match *self {
            StopCriterion::RelativeResidual { tol } => tol,
        }
    }

    /// The value compared with the tolerance, from the squared global residual norm and the
    /// squared initial one. A zero initial residual means `u_0` solves the system: 0.
    pub fn measure(&self, res_sq: f64, res0_sq: f64) -> f64 {
        match self {
            StopCriterion::RelativeResidual { .. } => {
                if res0_sq == 0.0 {
                    if res_sq == 0.0 {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else {
                    res_sq.max(0.0).sqrt() / res0_sq.sqrt()
                }
            }
        }
    }

    /// True when `value` (from [`StopCriterion::measure`]) meets the criterion. NaN never does.
    pub fn met(&self, value: f64) -> bool {
        match *self {
            StopCriterion::RelativeResidual { tol } => value < tol,
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
    }
}
