//! The vector operations of gmres and bicgstab over a block's owned values: the runs
//! ([`super::Operator::runs`]) of a vector's storage, each a contiguous slice (a grid row, a
//! matrix's row block whole). Sums go in four lanes, as the grid's kernels sum.

/// The owned values' runs, `(first, length)`.
pub(crate) type Runs = [(usize, usize)];

use crate::sparse::operator::lanes;

/// Σ a·b over the runs.
pub(crate) fn dot(runs: &Runs, a: &[f64], b: &[f64]) -> f64 {
    runs.iter()
        .map(|&(s, m)| {
            let (a, b) = (&a[s..s + m], &b[s..s + m]);
            lanes(m, |i| a[i] * b[i])
        })
        .sum()
}

/// `y += alpha x` over the runs.
pub(crate) fn axpy(runs: &Runs, alpha: f64, x: &[f64], y: &mut [f64]) {
    for &(s, m) in runs {
        for (y, x) in y[s..s + m].iter_mut().zip(&x[s..s + m]) {
            *y += alpha * x;
        }
    }
}

/// `y = alpha x` over the runs.
pub(crate) fn scale_into(runs: &Runs, alpha: f64, x: &[f64], y: &mut [f64]) {
    for &(s, m) in runs {
        for (y, x) in y[s..s + m].iter_mut().zip(&x[s..s + m]) {
            *y = alpha * x;
        }
    }
}

/// `y = x` over the runs.
pub(crate) fn copy(runs: &Runs, x: &[f64], y: &mut [f64]) {
    for &(s, m) in runs {
        y[s..s + m].copy_from_slice(&x[s..s + m]);
    }
}

/// `x *= alpha` over the runs.
pub(crate) fn scale(runs: &Runs, alpha: f64, x: &mut [f64]) {
    for &(s, m) in runs {
        for x in &mut x[s..s + m] {
            *x *= alpha;
        }
    }
}
