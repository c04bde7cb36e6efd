//! Multisplitting's inner CG in single precision (`--inner cg32`): mixed-precision iterative
//! refinement of the block's problem (Moler, *Iterative refinement in floating point*, J. ACM
//! 14, 1967; Buttari et al., *Mixed precision iterative refinement techniques for the solution
//! of dense linear systems*, IJHPCA 21, 2007). The residual of the current iterate,
//! `r₀ = b − A x`, is computed in double precision; CG then solves `A_loc d = r₀` for a
//! correction `d` in single precision, and `x += d` in double. An inner solve only has to
//! reduce the block's residual by `--inner-tol` (0.1), five orders of magnitude above single
//! precision's rounding, and the next outer iteration recomputes `r₀` in double from the
//! updated iterate, so the outer iteration converges to the double-precision tolerance as with
//! inner CG in double. Each inner iteration moves half the bytes: the four vectors it streams
//! (r, p, A p, d) are `f32`.
//!
//! The kernels are `linalg/`'s, written once over the vectors' value type
//! ([`crate::lane::Lane`]), here with `f32` lanes: eight points a step, their dot products summed
//! in double precision, four lanes for the first four points of each chunk of eight and four
//! for the last, from single-precision products. Their AVX2 kernels and portable bodies do the
//! same operations in the same order, so they give the same bits
//! (`linalg`'s `avx2_kernels_match_the_portable_ones_in_single_precision`).
//!
//! Vectors have the block's [`Shape`] with a one-cell halo, which stays zero (`A_loc`).

use crate::kernel::Shape;
use crate::linalg::{check, rows};

/// A single-precision vector of a block (halo included, zero).
#[derive(Debug)]
pub(crate) struct Vector32 {
    pub(crate) v: Vec<f32>,
}

impl Vector32 {
    /// Zeros, the block's shape.
    pub(crate) fn zeros(shape: &Shape) -> Self {
        Vector32 {
            v: vec![0.0; shape.len],
        }
    }
}

/// `x += d` on the owned points: the correction, in double precision.
pub(crate) fn correct(sh: &Shape, x: &mut [f64], d: &[f32]) {
    check(sh, &[&*x]);
    check(sh, &[d]);
    for (b, m) in rows(sh) {
        for (xi, di) in x[b..b + m].iter_mut().zip(&d[b..b + m]) {
            *xi += f64::from(*di);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Dims;
    use crate::kernel::Region;
    use crate::tests::common::noise;

    fn noise32(len: usize, seed: u64) -> Vec<f32> {
        noise(len, seed).into_iter().map(|v| v as f32).collect()
    }

    /// The block's shape with its halo zero in `v`.
    fn zero_halo(sh: &Shape, v: &mut [f32]) {
        let mut owned = vec![false; sh.len];
        for (b, m) in rows(sh) {
            owned[b..b + m].fill(true);
        }
        for (x, o) in v.iter_mut().zip(owned) {
            if !o {
                *x = 0.0;
            }
        }
    }

    /// Against double precision: the residual is b − A u rounded to single, its Σ r² the
    /// double one; the operator is A p to single precision's rounding.
    #[test]
    fn single_precision_kernels_agree_with_double_ones() {
        let n = Dims::new(9, 5, 6);
        let sh = Shape::new(n);
        let u = noise(sh.len, 7);
        let mut r64 = vec![0.0; sh.len];
        let [want, _] = crate::linalg::residual(&sh, 6.0, &u, None, &mut r64, None);
        let mut r32 = vec![0.0f32; sh.len];
        let [got, _] = crate::linalg::residual(&sh, 6.0, &u, None, &mut r32, None);
        assert!((got - want).abs() <= 1e-12 * want);
        for (a, b) in r32.iter().zip(&r64) {
            assert_eq!(*a, *b as f32);
        }
        let mut p = noise32(sh.len, 8);
        zero_halo(&sh, &mut p);
        let mut q = vec![0.0f32; sh.len];
        // β = 0: p = r.
        let pap = crate::linalg::direction_apply(&sh, 6.0, &r32, 0.0, &mut p, &mut q);
        let p64: Vec<f64> = p.iter().map(|&v| f64::from(v)).collect();
        let mut q64 = vec![0.0; sh.len];
        let want = crate::linalg::apply(&sh, 6.0, &p64, &mut q64, &Region::all(n));
        assert!((pap - want).abs() <= 1e-5 * want.abs(), "{pap} {want}");
        for (a, b) in q.iter().zip(&q64) {
            assert!((f64::from(*a) - b).abs() <= 1e-5 * (1.0 + b.abs()));
        }
        assert_eq!(p, r32);
    }
}
