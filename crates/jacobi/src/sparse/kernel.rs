//! The row block's kernels: the matrix-vector product, the fused Jacobi sweep and the
//! residual, over the block's rows in CSR with columns into the extended vector (own values,
//! then ghosts). One pass over the rows each; the column indices are checked once, when the
//! block is made, so the inner loops read the vector without a bounds check per entry.

use super::dist::RowBlock;

/// A row block's rows: row pointers, columns (into a vector of `ext` values), values.
#[derive(Debug, Clone)]
pub(crate) struct Rows {
    ptr: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
    /// The extended vector's length: every column is below it.
    ext: usize,
}

impl Rows {
    /// `blk`'s rows, their columns checked against its extended length.
    pub(crate) fn new(blk: &RowBlock) -> Self {
        let (ptr, cols, vals) = blk.csr();
        let ext = blk.extended_len();
        assert!(
            cols.iter().all(|&c| (c as usize) < ext),
            "a column outside the extended vector"
        );
        assert_eq!(ptr.first(), Some(&0));
        assert!(ptr.windows(2).all(|w| w[0] <= w[1]) && ptr[ptr.len() - 1] == cols.len());
        assert_eq!(cols.len(), vals.len());
        Rows {
            ptr: ptr.to_vec(),
            cols: cols.to_vec(),
            vals: vals.to_vec(),
            ext,
        }
    }

    /// Rows.
    pub(crate) fn len(&self) -> usize {
        self.ptr.len() - 1
    }

    /// The extended vector's length.
    pub(crate) fn ext(&self) -> usize {
        self.ext
    }

    /// The diagonal entry of every row (0 where none is stored).
    pub(crate) fn diagonal(&self) -> Vec<f64> {
        (0..self.len())
            .map(|i| {
                let (a, z) = (self.ptr[i], self.ptr[i + 1]);
                (a..z)
                    .filter(|&k| self.cols[k] as usize == i)
                    .map(|k| self.vals[k])
                    .sum()
            })
            .collect()
    }

    /// `f(column, value)` of each entry of row `i`, in the order stored.
    pub(crate) fn each(&self, i: usize, mut f: impl FnMut(usize, f64)) {
        for k in self.ptr[i]..self.ptr[i + 1] {
            f(self.cols[k] as usize, self.vals[k]);
        }
    }

    /// Whether row `i` reads a ghost.
    pub(crate) fn reads_ghost(&self, i: usize) -> bool {
        let rows = self.len();
        self.cols[self.ptr[i]..self.ptr[i + 1]]
            .iter()
            .any(|&c| c as usize >= rows)
    }

    /// `Σ_j a_ij x_j` of row `i`.
    pub(crate) fn row(&self, i: usize, x: &[f64]) -> f64 {
        assert!(i < self.len() && x.len() >= self.ext);
        // SAFETY: the conditions of `row_at`, asserted above.
        unsafe { self.row_at(i, x) }
    }

    /// `Σ_j a_ij x_j` of row `i`, without bounds checks.
    ///
    /// # Safety
    /// `i < self.len()` and `x.len() ≥ self.ext`. Then `ptr[i] ≤ ptr[i + 1] ≤ cols.len()` (checked in [`Rows::new`], the only
    /// constructor; the arrays are never changed after) and every column is below `ext`.
    #[inline(always)]
    unsafe fn row_at(&self, i: usize, x: &[f64]) -> f64 {
        let (ptr, cols, vals) = (&self.ptr, &self.cols, &self.vals);
        // SAFETY: the function's conditions: `i + 1 ≤ len = ptr.len() − 1`; every `k` in
        // `ptr[i]..ptr[i + 1]` is below `cols.len() = vals.len()`; `cols[k] < ext ≤ x.len()`.
        unsafe {
            let (a, z) = (*ptr.get_unchecked(i), *ptr.get_unchecked(i + 1));
            let at = |k: usize| {
                *vals.get_unchecked(k) * *x.get_unchecked(*cols.get_unchecked(k) as usize)
            };
            // Two sums, so that a row's products do not wait on one chain of additions.
            let (mut s0, mut s1) = (0.0, 0.0);
            let mut k = a;
            while k + 2 <= z {
                s0 += at(k);
                s1 += at(k + 1);
                k += 2;
            }
            if k < z {
                s0 += at(k);
            }
            s0 + s1
        }
    }

    /// One Jacobi sweep fused with the residual: for every row `r_i = b_i − Σ_j a_ij x_j`,
    /// `y_i = x_i + r_i d_i` (`d` the inverse diagonal); returns Σ r² (of `x`).
    pub(crate) fn sweep(&self, b: &[f64], d: &[f64], x: &[f64], y: &mut [f64]) -> f64 {
        let n = self.len();
        assert!(b.len() >= n && d.len() >= n && y.len() >= n && x.len() >= self.ext);
        let mut acc = 0.0;
        for i in 0..n {
            // SAFETY: `i < n`, and `b`, `d`, `y` have at least n values and `x` at least
            // `ext ≥ n` (asserted above); `row_at`'s conditions hold for `i < n`.
            unsafe {
                let r = *b.get_unchecked(i) - self.row_at(i, x);
                acc += r * r;
                *y.get_unchecked_mut(i) = *x.get_unchecked(i) + r * *d.get_unchecked(i);
            }
        }
        acc
    }

    /// `y_i = Σ_j a_ij x_j` for the rows `rows` (every row when `None`): Σ x_i y_i.
    pub(crate) fn apply(&self, rows: Option<&[u32]>, x: &[f64], y: &mut [f64]) -> f64 {
        let n = self.len();
        assert!(x.len() >= self.ext && y.len() >= n);
        let mut acc = 0.0;
        let mut one = |i: usize| {
            // SAFETY: `i < n` (below), `y` has n values and `x` `ext ≥ n` (asserted above);
            // `row_at`'s conditions hold for `i < n`.
            unsafe {
                let v = self.row_at(i, x);
                *y.get_unchecked_mut(i) = v;
                acc += *x.get_unchecked(i) * v;
            }
        };
        match rows {
            None => (0..n).for_each(&mut one),
            Some(rows) => {
                for &i in rows {
                    assert!((i as usize) < n, "row {i} of {n}");
                    one(i as usize);
                }
            }
        }
        acc
    }

    /// `r_i = b_i − Σ_j a_ij x_j` for every row, compared with `rec` when given: `[Σ r²,
    /// Σ (r − rec)²]`.
    pub(crate) fn residual(
        &self,
        b: &[f64],
        x: &[f64],
        r: &mut [f64],
        rec: Option<&[f64]>,
    ) -> [f64; 2] {
        let n = self.len();
        assert!(x.len() >= self.ext && b.len() >= n && r.len() >= n);
        let (mut rr, mut gap) = (0.0, 0.0);
        for i in 0..n {
            let v = b[i] - self.row(i, x);
            r[i] = v;
            rr += v * v;
            if let Some(o) = rec {
                let g = v - o[i];
                gap += g * g;
            }
        }
        [rr, gap]
    }
}
