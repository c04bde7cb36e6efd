//! Compressed sparse rows, and the row blocks of a distributed matrix.

/// A square sparse matrix in compressed sparse rows: row `i`'s entries are
/// `cols[ptr[i]..ptr[i + 1]]` (strictly increasing) with values `vals[..]` at the same
/// places.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    n: usize,
    ptr: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
}

impl Csr {
    /// Build from `(row, col, value)` triplets (0-based, every index below `n`, which the
    /// caller has checked): sorted by row then column, duplicates summed in the order given.
    /// Entries that sum to zero stay (they are part of the pattern).
    pub fn from_triplets(n: usize, t: Vec<(u32, u32, f64)>) -> Csr {
        let (ptr, cols, vals) = compress(n, t);
        Csr { n, ptr, cols, vals }
    }

    /// The order of the matrix (rows = columns).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Row `i`: its columns and values.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.ptr[i], self.ptr[i + 1]);
        (&self.cols[a..b], &self.vals[a..b])
    }

    /// The row pointers (`n + 1`, from 0 to [`Csr::nnz`]).
    pub fn row_ptr(&self) -> &[usize] {
        &self.ptr
    }

    /// Entry `(i, j)`, 0 when it is not stored.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let (cols, vals) = self.row(i);
        match cols.binary_search(&(j as u32)) {
            Ok(k) => vals[k],
            Err(_) => 0.0,
        }
    }

    /// The diagonal (0 where no entry is stored).
    pub fn diagonal(&self) -> Vec<f64> {
        (0..self.n).map(|i| self.get(i, i)).collect()
    }

    /// The first row whose diagonal entry is zero or missing, if any (Jacobi divides by it).
    pub fn zero_diagonal(&self) -> Option<usize> {
        (0..self.n).find(|&i| self.get(i, i) == 0.0)
    }

    /// Whether the matrix is diagonally dominant as Jacobi's convergence theorems ask: every
    /// row weakly (`|a_ii| ≥ Σ_{j≠i} |a_ij|`) and one at least strictly. Strict dominance in
    /// every row makes Jacobi converge in any order of updates, synchronous or asynchronous
    /// (Chazan and Miranker 1969); weak dominance with one strict row needs the matrix to be
    /// irreducible as well (a connected pattern: every grid operator here), which is not
    /// checked. The 7-point operator is weakly dominant, strictly on the boundary's rows.
    pub fn diagonally_dominant(&self) -> bool {
        let (weak, strict) = self.dominance();
        weak && strict
    }

    /// Whether every row is weakly diagonally dominant, and whether one is strictly (the two
    /// halves of [`Csr::diagonally_dominant`], as [`super::RowBlock::dominance`] gives them
    /// for a block).
    pub fn dominance(&self) -> (bool, bool) {
        dominance((0..self.n).map(|i| (i, self.row(i))))
    }

    /// Whether the matrix equals its transpose exactly (pattern and values).
    pub fn is_symmetric(&self) -> bool {
        (0..self.n).all(|i| {
            let (cols, vals) = self.row(i);
            cols.iter()
                .zip(vals)
                .all(|(&c, &v)| self.get(c as usize, i) == v)
        })
    }

    /// `y = A x`.
    pub fn mul(&self, x: &[f64], y: &mut [f64]) {
        assert!(x.len() == self.n && y.len() == self.n, "A x: sizes");
        for (i, yi) in y.iter_mut().enumerate() {
            let (cols, vals) = self.row(i);
            *yi = cols
                .iter()
                .zip(vals)
                .map(|(&c, &v)| v * x[c as usize])
                .sum();
        }
    }
}

/// Rows `0..rows` in compressed form from `(row, col, value)` triplets (every row below
/// `rows`): the row pointers, then the columns and values of each row sorted by column,
/// duplicates summed in the order they come (the sort is stable: a subset of the triplets in
/// the same order sums to the same bits), entries that sum to zero kept (they are part of the
/// pattern).
pub(super) fn compress(
    rows: usize,
    mut t: Vec<(u32, u32, f64)>,
) -> (Vec<usize>, Vec<u32>, Vec<f64>) {
    t.sort_by_key(|&(r, c, _)| (r, c));
    let mut ptr = vec![0usize; rows + 1];
    let mut cols = Vec::with_capacity(t.len());
    let mut vals: Vec<f64> = Vec::with_capacity(t.len());
    let mut last: Option<(u32, u32)> = None;
    for (r, c, v) in t {
        if last == Some((r, c)) {
            *vals.last_mut().expect("an entry before its duplicate") += v;
            continue;
        }
        last = Some((r, c));
        ptr[r as usize + 1] += 1;
        cols.push(c);
        vals.push(v);
    }
    for i in 0..rows {
        ptr[i + 1] += ptr[i];
    }
    (ptr, cols, vals)
}

/// Over rows `(i, (columns, values))` with the diagonal at column `i`: whether every row is
/// weakly diagonally dominant (`|a_ii| ≥ Σ_{j≠i} |a_ij|`), and whether one is strictly.
pub(crate) fn dominance<'a>(
    rows: impl Iterator<Item = (usize, (&'a [u32], &'a [f64]))>,
) -> (bool, bool) {
    let (mut weak, mut strict) = (true, false);
    for (i, (cols, vals)) in rows {
        let (mut diag, mut off) = (0.0f64, 0.0f64);
        for (&c, &v) in cols.iter().zip(vals) {
            if c as usize == i {
                diag += v.abs();
            } else {
                off += v.abs();
            }
        }
        strict |= diag > off;
        weak &= diag >= off;
    }
    (weak, strict)
}

/// Split `ptr` (a CSR matrix's row pointers) into `p` contiguous row blocks of about equal
/// nonzeros: block `k` is rows `bounds[k]..bounds[k + 1]`. Each boundary is the row whose
/// start is nearest the ideal `k·nnz/p` nonzeros, kept strictly increasing, so that every
/// block has at least one row (`p` must be at most the number of rows). A block's nonzeros
/// exceed the ideal by at most the longest row.
pub fn row_blocks(ptr: &[usize], p: usize) -> Vec<usize> {
    let n = ptr.len() - 1;
    assert!(p >= 1 && p <= n, "{p} blocks of {n} rows");
    let nnz = ptr[n];
    let mut bounds = vec![0usize; p + 1];
    bounds[p] = n;
    for k in 1..p {
        let ideal = (nnz as u128 * k as u128 / p as u128) as usize;
        // The first row starting at or past the ideal, or the one before when nearer.
        let mut b = ptr.partition_point(|&s| s < ideal);
        if b > 0 && ideal - ptr[b - 1] < ptr[b.min(n)].saturating_sub(ideal) {
            b -= 1;
        }
        // Room for the blocks before and after: at least one row each.
        bounds[k] = b.clamp(bounds[k - 1] + 1, n - (p - k));
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tridiag(n: usize) -> Csr {
        let mut t = Vec::new();
        for i in 0..n as u32 {
            t.push((i, i, 2.0));
            if i > 0 {
                t.push((i, i - 1, -1.0));
            }
            if (i as usize) + 1 < n {
                t.push((i, i + 1, -1.0));
            }
        }
        Csr::from_triplets(n, t)
    }

    #[test]
    fn triplets_are_sorted_and_duplicates_summed() {
        let a = Csr::from_triplets(
            3,
            vec![
                (2, 0, 1.0),
                (0, 2, 5.0),
                (0, 0, 1.0),
                (0, 2, -2.0),
                (1, 1, 4.0),
            ],
        );
        assert_eq!(a.nnz(), 4);
        assert_eq!(a.row(0), (&[0u32, 2][..], &[1.0, 3.0][..]));
        assert_eq!(a.row(1), (&[1u32][..], &[4.0][..]));
        assert_eq!(a.row(2), (&[0u32][..], &[1.0][..]));
        assert_eq!(a.row_ptr(), &[0, 2, 3, 4]);
        assert_eq!(a.zero_diagonal(), Some(2));
        assert!(!a.is_symmetric());
    }

    #[test]
    fn products_and_properties_of_a_tridiagonal_matrix() {
        let a = tridiag(5);
        assert!(a.is_symmetric());
        assert_eq!(a.zero_diagonal(), None);
        // Weakly dominant in its inner rows, strictly in the first and last.
        assert!(a.diagonally_dominant());
        let mut y = vec![0.0; 5];
        a.mul(&[1.0; 5], &mut y);
        assert_eq!(y, [1.0, 0.0, 0.0, 0.0, 1.0]);
        let b = Csr::from_triplets(2, vec![(0, 0, 3.0), (0, 1, 1.0), (1, 1, 2.0)]);
        assert!(b.diagonally_dominant());
        // A row whose diagonal is below the rest of the row's is not dominant.
        let c = Csr::from_triplets(2, vec![(0, 0, 3.0), (0, 1, 1.0), (1, 0, 2.5), (1, 1, 2.0)]);
        assert!(!c.diagonally_dominant());
        // Weak in every row and strict in none (a singular Laplacian) is not.
        let d = Csr::from_triplets(
            2,
            vec![(0, 0, 1.0), (0, 1, -1.0), (1, 0, -1.0), (1, 1, 1.0)],
        );
        assert!(!d.diagonally_dominant());
    }

    #[test]
    fn row_blocks_balance_nonzeros_and_cover_every_row() {
        // Row i has i + 1 entries: blocks by rows would be unbalanced.
        let ptr: Vec<usize> = (0..=100).map(|i| i * (i + 1) / 2).collect();
        for p in [1, 2, 3, 7, 100] {
            let b = row_blocks(&ptr, p);
            assert_eq!((b[0], b[p]), (0, 100), "{p}");
            assert!(b.windows(2).all(|w| w[0] < w[1]), "{p}: {b:?}");
            let ideal = ptr[100] as f64 / p as f64;
            for w in b.windows(2) {
                let nnz = (ptr[w[1]] - ptr[w[0]]) as f64;
                // Off the ideal by at most about one row (100 entries) at each end.
                assert!((nnz - ideal).abs() <= 2.0 * 100.0, "{p}: {b:?}");
            }
        }
        // Equal rows: equal blocks.
        let ptr: Vec<usize> = (0..=12).map(|i| 3 * i).collect();
        assert_eq!(row_blocks(&ptr, 4), [0, 3, 6, 9, 12]);
        // Empty rows at the start still leave one row to every block.
        let ptr = [0, 0, 0, 0, 5];
        assert_eq!(row_blocks(&ptr, 4), [0, 1, 2, 3, 4]);
    }
}
