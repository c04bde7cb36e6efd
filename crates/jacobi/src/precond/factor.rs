//! The block's incomplete factorisations with no fill: ILU(0), `A ≈ L U` with L unit lower
//! and U upper on A's own pattern (Saad, *Iterative Methods for Sparse Linear Systems*, 2nd
//! ed., Algorithm 10.4), and IC(0), `A ≈ L Lᵀ` on the pattern of A's lower triangle, for a
//! symmetric positive definite block.

use super::{sub_name, LocalCsr};
use crate::config::PcSub;

/// What stopped a factorisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A zero (or NaN) pivot.
    ZeroPivot = 1,
    /// IC(0): a pivot not positive (the block is not positive definite, or IC(0) of it
    /// breaks down).
    NotPositive = 2,
    /// The block has no diagonal entry in this row.
    NoDiagonal = 3,
}

impl Failure {
    pub(crate) fn from_code(c: u8) -> Failure {
        match c {
            2 => Failure::NotPositive,
            3 => Failure::NoDiagonal,
            _ => Failure::ZeroPivot,
        }
    }
}

/// A factorisation's failure at a row of the block (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FactorError {
    pub(crate) row: usize,
    pub(crate) kind: Failure,
}

impl FactorError {
    /// The message every rank prints.
    pub(crate) fn describe(self, sub: PcSub, rank: usize) -> String {
        let what = sub_name(sub);
        let row = self.row + 1;
        match self.kind {
            Failure::ZeroPivot => format!(
                "block Jacobi's {what} of rank {rank}'s block: zero pivot at row {row} of the \
                 block (the factorisation without fill divides by it); use another \
                 preconditioner, or reorder the system"
            ),
            Failure::NotPositive => format!(
                "block Jacobi's {what} of rank {rank}'s block: pivot not positive at row {row} \
                 of the block (the block is not symmetric positive definite, or IC(0) breaks \
                 down on it); use ilu0"
            ),
            Failure::NoDiagonal => format!(
                "block Jacobi's {what} of rank {rank}'s block: row {row} of the block has no \
                 diagonal entry (a zero pivot)"
            ),
        }
    }
}

/// A factored block, solved in place.
#[derive(Debug)]
pub(crate) enum Factor {
    /// L (unit lower, strict part) and U together on A's pattern; `diag[i]` indexes u_ii.
    Ilu0 { a: LocalCsr, diag: Vec<usize> },
    /// L on the pattern of A's lower triangle (diagonal last in each row).
    Ic0 { l: LocalCsr },
}

impl Factor {
    /// Factor `a` as `sub` says.
    pub(crate) fn new(a: &LocalCsr, sub: PcSub) -> Result<Factor, FactorError> {
        match sub {
            PcSub::Ilu0 => ilu0(a.clone()),
            PcSub::Ic0 => ic0(a),
        }
    }

    /// `x ← M⁻¹ x`.
    pub(crate) fn solve(&self, x: &mut [f64]) {
        match self {
            Factor::Ilu0 { a, diag } => {
                let n = a.rows();
                // L y = x (unit lower), then U x = y.
                for i in 0..n {
                    let mut s = x[i];
                    for k in a.ptr[i]..diag[i] {
                        s -= a.vals[k] * x[a.cols[k]];
                    }
                    x[i] = s;
                }
                for i in (0..n).rev() {
                    let mut s = x[i];
                    for k in diag[i] + 1..a.ptr[i + 1] {
                        s -= a.vals[k] * x[a.cols[k]];
                    }
                    x[i] = s / a.vals[diag[i]];
                }
            }
            Factor::Ic0 { l } => {
                let n = l.rows();
                // L y = x, then Lᵀ x = y (column-wise from L's rows).
                for i in 0..n {
                    let last = l.ptr[i + 1] - 1;
                    let mut s = x[i];
                    for k in l.ptr[i]..last {
                        s -= l.vals[k] * x[l.cols[k]];
                    }
                    x[i] = s / l.vals[last];
                }
                for i in (0..n).rev() {
                    let last = l.ptr[i + 1] - 1;
                    x[i] /= l.vals[last];
                    let xi = x[i];
                    for k in l.ptr[i]..last {
                        x[l.cols[k]] -= l.vals[k] * xi;
                    }
                }
            }
        }
    }
}

/// A pivot that stops the factorisation.
fn bad(p: f64) -> bool {
    p == 0.0 || !p.is_finite()
}

/// ILU(0) in place (IKJ order).
fn ilu0(mut a: LocalCsr) -> Result<Factor, FactorError> {
    let n = a.rows();
    let mut diag = vec![0; n];
    for (i, d) in diag.iter_mut().enumerate() {
        *d = (a.ptr[i]..a.ptr[i + 1])
            .find(|&k| a.cols[k] == i)
            .ok_or(FactorError {
                row: i,
                kind: Failure::NoDiagonal,
            })?;
    }
    // at[j]: the index of column j in row i, or usize::MAX.
    let mut at = vec![usize::MAX; n];
    for i in 0..n {
        for k in a.ptr[i]..a.ptr[i + 1] {
            at[a.cols[k]] = k;
        }
        for kk in a.ptr[i]..diag[i] {
            let k = a.cols[kk];
            let l = a.vals[kk] / a.vals[diag[k]];
            a.vals[kk] = l;
            for kj in diag[k] + 1..a.ptr[k + 1] {
                let j = a.cols[kj];
                if at[j] != usize::MAX {
                    a.vals[at[j]] -= l * a.vals[kj];
                }
            }
        }
        for k in a.ptr[i]..a.ptr[i + 1] {
            at[a.cols[k]] = usize::MAX;
        }
        if bad(a.vals[diag[i]]) {
            return Err(FactorError {
                row: i,
                kind: Failure::ZeroPivot,
            });
        }
    }
    Ok(Factor::Ilu0 { a, diag })
}

/// IC(0) of the lower triangle of `a` (assumed symmetric: its upper triangle is not read).
fn ic0(a: &LocalCsr) -> Result<Factor, FactorError> {
    let n = a.rows();
    let mut l = LocalCsr::with_rows(n);
    for i in 0..n {
        let mut has_diag = false;
        for k in a.ptr[i]..a.ptr[i + 1] {
            if a.cols[k] <= i {
                has_diag |= a.cols[k] == i;
                l.push(a.cols[k], a.vals[k]);
            }
        }
        if !has_diag {
            return Err(FactorError {
                row: i,
                kind: Failure::NoDiagonal,
            });
        }
        l.end_row();
    }
    let mut at = vec![usize::MAX; n];
    for i in 0..n {
        let (start, last) = (l.ptr[i], l.ptr[i + 1] - 1);
        for k in start..=last {
            at[l.cols[k]] = k;
        }
        // l_ik = (a_ik − Σ_{j<k} l_ij l_kj) / l_kk, k ascending; then the pivot.
        for kk in start..last {
            let k = l.cols[kk];
            let (ks, kl) = (l.ptr[k], l.ptr[k + 1] - 1);
            let mut s = l.vals[kk];
            for kj in ks..kl {
                let j = l.cols[kj];
                if at[j] != usize::MAX && at[j] < kk {
                    s -= l.vals[at[j]] * l.vals[kj];
                }
            }
            l.vals[kk] = s / l.vals[kl];
        }
        let mut d = l.vals[last];
        for kk in start..last {
            d -= l.vals[kk] * l.vals[kk];
        }
        for k in start..=last {
            at[l.cols[k]] = usize::MAX;
        }
        if d.is_nan() || d == 0.0 {
            return Err(FactorError {
                row: i,
                kind: Failure::ZeroPivot,
            });
        }
        if d < 0.0 {
            return Err(FactorError {
                row: i,
                kind: Failure::NotPositive,
            });
        }
        l.vals[last] = d.sqrt();
    }
    Ok(Factor::Ic0 { l })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dense matrix as a [`LocalCsr`] (its zeros dropped).
    fn csr(rows: &[&[f64]]) -> LocalCsr {
        let mut a = LocalCsr::with_rows(rows.len());
        for r in rows {
            for (j, &v) in r.iter().enumerate() {
                if v != 0.0 {
                    a.push(j, v);
                }
            }
            a.end_row();
        }
        a
    }

    fn mul(rows: &[&[f64]], x: &[f64]) -> Vec<f64> {
        rows.iter()
            .map(|r| r.iter().zip(x).map(|(a, x)| a * x).sum())
            .collect()
    }

    /// On a tridiagonal matrix ILU(0) and IC(0) have no fill to drop: they are the exact
    /// factorisations, so M⁻¹ A x = x to rounding.
    #[test]
    fn exact_on_a_tridiagonal_matrix() {
        let t: &[&[f64]] = &[
            &[4.0, -1.0, 0.0, 0.0],
            &[-1.0, 4.0, -1.0, 0.0],
            &[0.0, -1.0, 4.0, -1.0],
            &[0.0, 0.0, -1.0, 4.0],
        ];
        let x = [1.0, -2.0, 3.0, 0.5];
        for sub in [PcSub::Ilu0, PcSub::Ic0] {
            let f = Factor::new(&csr(t), sub).unwrap();
            let mut y = mul(t, &x);
            f.solve(&mut y);
            for (a, b) in y.iter().zip(&x) {
                assert!((a - b).abs() < 1e-14, "{sub:?}: {y:?}");
            }
        }
        // Non-symmetric: ILU(0).
        let n: &[&[f64]] = &[&[3.0, -2.0, 0.0], &[-0.5, 3.0, -2.0], &[0.0, -0.5, 3.0]];
        let f = Factor::new(&csr(n), PcSub::Ilu0).unwrap();
        let mut y = mul(n, &x[..3]);
        f.solve(&mut y);
        for (a, b) in y.iter().zip(&x[..3]) {
            assert!((a - b).abs() < 1e-14, "{y:?}");
        }
    }

    /// The pivots that stop a factorisation are named by their row.
    #[test]
    fn a_zero_pivot_is_named_by_its_row() {
        // Row 2's pivot: 1 − 1·1 = 0.
        let a: &[&[f64]] = &[&[1.0, 1.0, 0.0], &[1.0, 1.0, 1.0], &[0.0, 1.0, 1.0]];
        let e = Factor::new(&csr(a), PcSub::Ilu0).unwrap_err();
        assert_eq!((e.row, e.kind), (1, Failure::ZeroPivot));
        let e = Factor::new(&csr(a), PcSub::Ic0).unwrap_err();
        assert_eq!((e.row, e.kind), (1, Failure::ZeroPivot));
        // Indefinite: IC(0)'s second pivot 1 − 4 < 0.
        let b: &[&[f64]] = &[&[1.0, 2.0], &[2.0, 1.0]];
        let e = Factor::new(&csr(b), PcSub::Ic0).unwrap_err();
        assert_eq!((e.row, e.kind), (1, Failure::NotPositive));
        // No diagonal entry.
        let c: &[&[f64]] = &[&[0.0, 1.0], &[1.0, 1.0]];
        let e = Factor::new(&csr(c), PcSub::Ilu0).unwrap_err();
        assert_eq!((e.row, e.kind), (0, Failure::NoDiagonal));
    }
}
