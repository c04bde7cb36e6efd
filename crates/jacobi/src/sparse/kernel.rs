//! The row block's kernels: the matrix-vector product, the fused Jacobi sweep and the
//! residual, over the block's rows with columns into the extended vector (own values, then
//! ghosts). One pass over the rows each; the columns are checked once, when the block is
//! made, so the inner loops read the vector without a bounds check per entry.
//!
//! ## Storage
//! The rows are stored as the matrix allows, chosen once at set-up ([`MatrixStorage`]):
//!
//! * **CSR** (PETSc's AIJ): `usize` row pointers, a `u32` column and an `f64` value an entry,
//!   12 bytes an entry and 8 a row.
//! * **Offsets**: `u32` row pointers and, for each entry, its column's offset from its row,
//!   `j − i` as an `i16` (taken when every entry's offset fits), its value either an `f64`, or
//!   an index into a table of the block's distinct values: a `u8` when there are at most 256
//!   (bit patterns), a `u16` when at most 65 536. A 7-point operator takes 3 bytes an entry
//!   and 4 a row instead of 12 and 8.
//!
//! A sweep or product over the rows reads the matrix once and the vectors once or twice: on
//! a block larger than the caches the bytes of the matrix are most of the traffic, and the
//! offsets cut them by three.
//!
//! Every storage computes every row with the same products in the same order (two partial
//! sums, below), so the results are the same to the bit whichever is taken. The kernels are
//! generic over the storage ([`View`]), dispatched once per call, not per entry.

use super::dist::RowBlock;
use std::collections::HashMap;

/// How a block's rows are stored (module docs, "Storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatrixStorage {
    /// CSR always (AIJ: 12 bytes an entry).
    Csr,
    /// The most compact storage the block fits: column offsets and a value table when it
    /// can, else CSR.
    Compact,
    /// [`MatrixStorage::Compact`] for a block whose CSR takes at least [`COMPACT_FROM`]
    /// bytes, CSR below: a matrix that stays in cache costs its kernels' instructions more
    /// than its bytes, and the compact storage's take more instructions an entry (an index,
    /// a table and an offset to read instead of a value and a column).
    #[default]
    Auto,
}

/// The CSR bytes of a block from which [`MatrixStorage::Auto`] stores it compactly: 8 MiB,
/// between the two points measured (docs/performance.md, "A Matrix Market system against
/// PETSc": CSR faster on a 2.4 MB block, the compact storage on a 19.6 MB one).
pub const COMPACT_FROM: u64 = 8 << 20;

impl MatrixStorage {
    /// The setting's names.
    pub const NAMES: [&'static str; 3] = ["csr", "compact", "auto"];

    /// The storage of a name in [`MatrixStorage::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "csr" => Some(MatrixStorage::Csr),
            "compact" => Some(MatrixStorage::Compact),
            "auto" => Some(MatrixStorage::Auto),
            _ => None,
        }
    }
}

/// The storage a block took, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageInfo {
    /// One of [`StorageInfo::NAMES`].
    pub name: &'static str,
    /// The matrix's bytes: row pointers, columns, values and table.
    pub bytes: u64,
    /// Its entries.
    pub entries: u64,
}

impl StorageInfo {
    /// The storages: CSR, then column offsets with `f64` values, with a table of at most 256
    /// values (`u8` indices), with a table of at most 65 536 (`u16` indices).
    pub const NAMES: [&'static str; 4] =
        ["csr", "offsets16", "offsets16+table8", "offsets16+table16"];

    /// Bytes per entry.
    pub fn bytes_per_entry(&self) -> f64 {
        self.bytes as f64 / self.entries.max(1) as f64
    }
}

/// A row's entries at `ptr(i)..ptr(i + 1)`.
trait Ptrs: Copy {
    /// # Safety
    /// `i` is at most the rows.
    unsafe fn at(self, i: usize) -> usize;
}

impl Ptrs for &[usize] {
    #[inline(always)]
    unsafe fn at(self, i: usize) -> usize {
        // SAFETY: the caller's `i ≤ rows`, and the array holds rows + 1 pointers.
        unsafe { *self.get_unchecked(i) }
    }
}

impl Ptrs for &[u32] {
    #[inline(always)]
    unsafe fn at(self, i: usize) -> usize {
        // SAFETY: as for `&[usize]`.
        unsafe { *self.get_unchecked(i) as usize }
    }
}

/// Entry `k`'s column (of row `i`).
trait Cols: Copy {
    /// # Safety
    /// `k` is one of row `i`'s entries.
    unsafe fn col(self, i: usize, k: usize) -> usize;

    /// Entry `k`'s value of `x` (the extended vector's start).
    ///
    /// # Safety
    /// `k` is one of row `i`'s entries; `x` points to at least `ext` values.
    #[inline(always)]
    unsafe fn read(self, x: *const f64, i: usize, k: usize) -> f64 {
        // SAFETY: the column is below `ext` (the caller's conditions).
        unsafe { *x.add(self.col(i, k)) }
    }
}

impl Cols for &[u32] {
    #[inline(always)]
    unsafe fn col(self, _: usize, k: usize) -> usize {
        // SAFETY: the caller's `k` is an entry, below the columns' length.
        unsafe { *self.get_unchecked(k) as usize }
    }
}

/// Columns as offsets from their row; with `WRAP`, a negative column `c` is the extended
/// vector's `c + ext` (the ghosts a block's first rows read, from the rank before it, come
/// after its own values: wrapped, they sit just before row 0).
#[derive(Clone, Copy)]
struct Offsets<'a, const WRAP: bool>(&'a [i16], usize);

impl<const WRAP: bool> Cols for Offsets<'_, WRAP> {
    #[inline(always)]
    unsafe fn col(self, i: usize, k: usize) -> usize {
        // SAFETY: the caller's `k` is an entry of row `i`; `i + offset`, wrapped when
        // negative, is that entry's column, in `0..ext` (checked when the block was made).
        let c = i as isize + unsafe { *self.0.get_unchecked(k) } as isize;
        match WRAP {
            false => c as usize,
            true => (c + ((c >> (isize::BITS - 1)) & self.1 as isize)) as usize,
        }
    }

    #[inline(always)]
    unsafe fn read(self, x: *const f64, i: usize, k: usize) -> f64 {
        // SAFETY: as in `col`; without wrapping, `x + i + offset` is the entry's column, in
        // `0..ext` (the row's place plus the offset, each within the vector), so the address
        // can be formed as row's place then offset (one addressing mode, the row's place
        // computed once a row).
        unsafe {
            match WRAP {
                false => *x.add(i).offset(*self.0.get_unchecked(k) as isize),
                true => *x.add(self.col(i, k)),
            }
        }
    }
}

/// Entry `k`'s value.
trait Vals: Copy {
    /// # Safety
    /// `k` is an entry.
    unsafe fn val(self, k: usize) -> f64;
}

impl Vals for &[f64] {
    #[inline(always)]
    unsafe fn val(self, k: usize) -> f64 {
        // SAFETY: the caller's `k` is an entry, below the values' length.
        unsafe { *self.get_unchecked(k) }
    }
}

/// Values as indices into a table of the distinct values.
#[derive(Clone, Copy)]
struct Table<'a, T>(&'a [f64], &'a [T]);

impl<T: Copy + Into<usize>> Vals for Table<'_, T> {
    #[inline(always)]
    unsafe fn val(self, k: usize) -> f64 {
        // SAFETY: the caller's `k` is an entry, below the indices' length; every index is
        // below the table's length (checked when the block was made).
        unsafe { *self.0.get_unchecked((*self.1.get_unchecked(k)).into()) }
    }
}

/// Entry values of a block stored with offsets.
#[derive(Debug, Clone)]
enum Values {
    Full(Vec<f64>),
    Byte(Vec<f64>, Vec<u8>),
    Short(Vec<f64>, Vec<u16>),
}

/// A block's rows, in one of the storages.
#[derive(Debug, Clone)]
enum Layout {
    Csr {
        ptr: Vec<usize>,
        cols: Vec<u32>,
        vals: Vec<f64>,
    },
    Offsets {
        ptr: Vec<u32>,
        offs: Vec<i16>,
        /// Whether negative columns wrap to the end ([`Offsets`]).
        wrap: bool,
        ext: usize,
        vals: Values,
    },
}

/// Bind `$v` to the [`View`] of `$layout` and evaluate `$body`, once per storage (the
/// kernels are compiled for each).
macro_rules! with_view {
    ($layout:expr, $v:ident => $body:expr) => {
        match $layout {
            Layout::Csr { ptr, cols, vals } => {
                let $v = View {
                    ptr: &ptr[..],
                    cols: &cols[..],
                    vals: &vals[..],
                };
                $body
            }
            Layout::Offsets {
                ptr,
                offs,
                wrap,
                ext,
                vals,
            } => {
                let ptr = &ptr[..];
                match wrap {
                    false => with_view!(@vals vals, ptr, Offsets::<false>(&offs[..], *ext), $v => $body),
                    true => with_view!(@vals vals, ptr, Offsets::<true>(&offs[..], *ext), $v => $body),
                }
            }
        }
    };
    (@vals $vals:expr, $ptr:expr, $cols:expr, $v:ident => $body:expr) => {
        match $vals {
            Values::Full(v) => {
                let $v = View {
                    ptr: $ptr,
                    cols: $cols,
                    vals: &v[..],
                };
                $body
            }
            Values::Byte(t, ix) => {
                let $v = View {
                    ptr: $ptr,
                    cols: $cols,
                    vals: Table(&t[..], &ix[..]),
                };
                $body
            }
            Values::Short(t, ix) => {
                let $v = View {
                    ptr: $ptr,
                    cols: $cols,
                    vals: Table(&t[..], &ix[..]),
                };
                $body
            }
        }
    };
}

/// A storage's arrays, borrowed: what the kernels are generic over. Its invariants (checked
/// in [`Rows::new`], the only constructor, the arrays never changed after): `ptr` has rows +
/// 1 pointers, increasing from 0 to the entries; every entry's column is below `ext`; every
/// entry has a value.
struct View<P, C, V> {
    ptr: P,
    cols: C,
    vals: V,
}

impl<P: Ptrs, C: Cols, V: Vals> View<P, C, V> {
    /// `Σ_j a_ij x_j` of row `i`, without bounds checks.
    ///
    /// # Safety
    /// `i` is below the rows and `x.len() ≥ ext` (the view's invariants give the rest).
    #[inline(always)]
    unsafe fn row_at(&self, i: usize, x: &[f64]) -> f64 {
        // SAFETY: the function's conditions: `i + 1 ≤ rows`; every `k` in `ptr(i)..ptr(i +
        // 1)` is an entry of row `i`, and its column is below `ext ≤ x.len()`.
        unsafe {
            let (a, z) = (self.ptr.at(i), self.ptr.at(i + 1));
            let xp = x.as_ptr();
            let at = |k: usize| self.vals.val(k) * self.cols.read(xp, i, k);
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

    /// Row `i`'s entries, `(column, value)`, to `f`.
    ///
    /// # Safety
    /// `i` is below the rows.
    unsafe fn each(&self, i: usize, mut f: impl FnMut(usize, f64)) {
        // SAFETY: as in `row_at`.
        unsafe {
            for k in self.ptr.at(i)..self.ptr.at(i + 1) {
                f(self.cols.col(i, k), self.vals.val(k));
            }
        }
    }

    /// [`Rows::sweep`], its sizes checked.
    fn sweep(&self, n: usize, b: &[f64], d: &[f64], x: &[f64], y: &mut [f64]) -> f64 {
        let mut acc = 0.0;
        for i in 0..n {
            // SAFETY: `i < n`, and `b`, `d`, `y` have at least n values and `x` at least
            // `ext ≥ n` (checked by the caller); `row_at`'s conditions hold for `i < n`.
            unsafe {
                let r = *b.get_unchecked(i) - self.row_at(i, x);
                acc += r * r;
                *y.get_unchecked_mut(i) = *x.get_unchecked(i) + r * *d.get_unchecked(i);
            }
        }
        acc
    }

    /// [`Rows::apply`], its sizes checked.
    fn apply(&self, n: usize, rows: Option<&[u32]>, x: &[f64], y: &mut [f64]) -> f64 {
        let mut acc = 0.0;
        let mut one = |i: usize| {
            // SAFETY: `i < n` (below), `y` has n values and `x` `ext ≥ n` (checked by the
            // caller); `row_at`'s conditions hold for `i < n`.
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

    /// [`Rows::residual`], its sizes checked.
    fn residual(
        &self,
        n: usize,
        b: &[f64],
        x: &[f64],
        r: &mut [f64],
        rec: Option<&[f64]>,
    ) -> [f64; 2] {
        let (mut rr, mut gap) = (0.0, 0.0);
        for i in 0..n {
            // SAFETY: `i < n`, `x.len() ≥ ext` (checked by the caller).
            let v = b[i] - unsafe { self.row_at(i, x) };
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

/// A row block's rows (module docs), columns into a vector of `ext` values.
#[derive(Debug, Clone)]
pub(crate) struct Rows {
    layout: Layout,
    /// Rows.
    n: usize,
    /// The extended vector's length: every column is below it.
    ext: usize,
    info: StorageInfo,
}

/// The values' table and each entry's index in it, when there are at most `max` distinct
/// values (by bit pattern: 0 and −0 are two).
fn table(vals: &[f64], max: usize) -> Option<(Vec<f64>, Vec<u32>)> {
    let mut at: HashMap<u64, u32> = HashMap::new();
    let mut table = Vec::new();
    let mut idx = Vec::with_capacity(vals.len());
    for &v in vals {
        let k = *at.entry(v.to_bits()).or_insert_with(|| {
            table.push(v);
            (table.len() - 1) as u32
        });
        if table.len() > max {
            return None;
        }
        idx.push(k);
    }
    Some((table, idx))
}

impl Rows {
    /// `blk`'s rows, stored as `storage` says and the block allows, their columns checked
    /// against its extended length.
    pub(crate) fn new(blk: &RowBlock, storage: MatrixStorage) -> Self {
        let (ptr, cols, vals) = blk.csr();
        let ext = blk.extended_len();
        let n = ptr.len() - 1;
        assert!(
            cols.iter().all(|&c| (c as usize) < ext),
            "a column outside the extended vector"
        );
        assert_eq!(ptr.first(), Some(&0));
        assert!(ptr.windows(2).all(|w| w[0] <= w[1]) && ptr[n] == cols.len());
        assert_eq!(cols.len(), vals.len());
        let entries = cols.len() as u64;
        // Each entry's offset from its row, wrapped (a negative column counting back from
        // `ext`) only where the plain one does not fit.
        let offsets = || -> Option<(Vec<i16>, bool)> {
            if cols.len() > u32::MAX as usize || ext > i32::MAX as usize {
                return None;
            }
            let (mut offs, mut wrap) = (Vec::with_capacity(cols.len()), false);
            for i in 0..n {
                for &c in &cols[ptr[i]..ptr[i + 1]] {
                    let plain = c as i64 - i as i64;
                    let o = match i16::try_from(plain) {
                        Ok(o) => o,
                        Err(_) => {
                            wrap = true;
                            i16::try_from(plain - ext as i64).ok()?
                        }
                    };
                    offs.push(o);
                }
            }
            Some((offs, wrap))
        };
        let offs = match storage {
            MatrixStorage::Csr => None,
            MatrixStorage::Compact => offsets(),
            MatrixStorage::Auto if ((8 * (n + 1) + 12 * cols.len()) as u64) < COMPACT_FROM => None,
            MatrixStorage::Auto => offsets(),
        };
        let (layout, info) = match offs {
            None => (
                Layout::Csr {
                    ptr: ptr.to_vec(),
                    cols: cols.to_vec(),
                    vals: vals.to_vec(),
                },
                StorageInfo {
                    name: "csr",
                    bytes: (8 * (n + 1) + 12 * cols.len()) as u64,
                    entries,
                },
            ),
            Some((offs, wrap)) => {
                // A table only where it saves more than it costs.
                let saves =
                    |t: &[f64], each: usize| 8 * t.len() + each * vals.len() < 8 * vals.len();
                let (values, name, each, table_len) = match table(vals, 1 << 16) {
                    Some((t, ix)) if t.len() <= 1 << 8 && saves(&t, 1) => {
                        let l = t.len();
                        let ix = ix.into_iter().map(|k| k as u8).collect();
                        (Values::Byte(t, ix), "offsets16+table8", 1, l)
                    }
                    Some((t, ix)) if saves(&t, 2) => {
                        let l = t.len();
                        let ix = ix.into_iter().map(|k| k as u16).collect();
                        (Values::Short(t, ix), "offsets16+table16", 2, l)
                    }
                    _ => (Values::Full(vals.to_vec()), "offsets16", 8, 0),
                };
                let bytes = 4 * (n + 1) + (2 + each) * cols.len() + 8 * table_len;
                (
                    Layout::Offsets {
                        ptr: ptr.iter().map(|&p| p as u32).collect(),
                        offs,
                        wrap,
                        ext,
                        vals: values,
                    },
                    StorageInfo {
                        name,
                        bytes: bytes as u64,
                        entries,
                    },
                )
            }
        };
        Rows {
            layout,
            n,
            ext,
            info,
        }
    }

    /// The storage taken.
    pub(crate) fn storage(&self) -> StorageInfo {
        self.info
    }

    /// Rows.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The extended vector's length.
    pub(crate) fn ext(&self) -> usize {
        self.ext
    }

    /// Row `i`'s entries, `(column, value)`, to `f`.
    pub(crate) fn each(&self, i: usize, f: impl FnMut(usize, f64)) {
        assert!(i < self.n);
        // SAFETY: `i` is below the rows.
        with_view!(&self.layout, v => unsafe { v.each(i, f) })
    }

    /// The diagonal entry of every row (0 where none is stored).
    pub(crate) fn diagonal(&self) -> Vec<f64> {
        (0..self.n)
            .map(|i| {
                let mut d = 0.0;
                self.each(i, |c, v| {
                    if c == i {
                        d += v;
                    }
                });
                d
            })
            .collect()
    }

    /// Whether row `i` reads a ghost.
    pub(crate) fn reads_ghost(&self, i: usize) -> bool {
        let mut ghost = false;
        self.each(i, |c, _| ghost |= c >= self.n);
        ghost
    }

    /// `Σ_j a_ij x_j` of row `i`.
    pub(crate) fn row(&self, i: usize, x: &[f64]) -> f64 {
        assert!(i < self.n && x.len() >= self.ext);
        // SAFETY: `i` below the rows and `x` at least `ext` long, asserted above.
        with_view!(&self.layout, v => unsafe { v.row_at(i, x) })
    }

    /// One Jacobi sweep fused with the residual: for every row `r_i = b_i − Σ_j a_ij x_j`,
    /// `y_i = x_i + r_i d_i` (`d` the inverse diagonal); returns Σ r² (of `x`).
    pub(crate) fn sweep(&self, b: &[f64], d: &[f64], x: &[f64], y: &mut [f64]) -> f64 {
        let n = self.n;
        assert!(b.len() >= n && d.len() >= n && y.len() >= n && x.len() >= self.ext);
        with_view!(&self.layout, v => v.sweep(n, b, d, x, y))
    }

    /// `y_i = Σ_j a_ij x_j` for the rows `rows` (every row when `None`): Σ x_i y_i.
    pub(crate) fn apply(&self, rows: Option<&[u32]>, x: &[f64], y: &mut [f64]) -> f64 {
        let n = self.n;
        assert!(x.len() >= self.ext && y.len() >= n);
        with_view!(&self.layout, v => v.apply(n, rows, x, y))
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
        let n = self.n;
        assert!(x.len() >= self.ext && b.len() >= n && r.len() >= n);
        with_view!(&self.layout, v => v.residual(n, b, x, r, rec))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{generate, row_blocks, Csr};
    use super::*;

    /// Row `i` of `blk` summed as the kernels sum it, written out here from the block's CSR:
    /// entries alternately into two sums, the odd one last into the first.
    fn reference_row(blk: &RowBlock, i: usize, x: &[f64]) -> f64 {
        let (ptr, cols, vals) = blk.csr();
        let (mut s, mut k) = ([0.0, 0.0], 0);
        for e in ptr[i]..ptr[i + 1] {
            s[k % 2] += vals[e] * x[cols[e] as usize];
            k += 1;
        }
        s[0] + s[1]
    }

    /// Values whose products round differently in every place (no two alike).
    fn scattered(n: usize, seed: u64) -> Vec<f64> {
        let mut z = seed;
        (0..n)
            .map(|_| {
                z = z
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (z >> 11) as f64 / (1u64 << 53) as f64 - 0.3
            })
            .collect()
    }

    /// Every kernel of `rows` equals the reference to the bit on every row of `blk`.
    fn same_bits(what: &str, blk: &RowBlock, rows: &Rows) {
        let (n, ext) = (blk.rows(), blk.extended_len());
        let x = scattered(ext, 7);
        let b = scattered(n, 8);
        let d = scattered(n, 9);
        let want: Vec<f64> = (0..n).map(|i| reference_row(blk, i, &x)).collect();
        let bits = |v: &[f64]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for (i, w) in want.iter().enumerate() {
            assert_eq!(rows.row(i, &x).to_bits(), w.to_bits(), "{what} row {i}");
        }
        let mut y = vec![0.0; ext];
        let acc = rows.apply(None, &x, &mut y);
        assert_eq!(bits(&y[..n]), bits(&want), "{what}: apply");
        let dot = (0..n).fold(0.0, |s, i| s + x[i] * want[i]);
        assert_eq!(acc.to_bits(), dot.to_bits(), "{what}: apply's Σ x y");
        // Some rows, out of order.
        let some: Vec<u32> = (0..n as u32).rev().step_by(3).collect();
        let mut z = vec![0.0; ext];
        rows.apply(Some(&some), &x, &mut z);
        for &i in &some {
            assert_eq!(
                z[i as usize].to_bits(),
                want[i as usize].to_bits(),
                "{what}"
            );
        }
        let mut y = vec![0.0; ext];
        let acc = rows.sweep(&b, &d, &x, &mut y);
        let r: Vec<f64> = (0..n).map(|i| b[i] - want[i]).collect();
        let swept: Vec<f64> = (0..n).map(|i| x[i] + r[i] * d[i]).collect();
        assert_eq!(bits(&y[..n]), bits(&swept), "{what}: sweep");
        let rr = r.iter().fold(0.0, |s, v| s + v * v);
        assert_eq!(acc.to_bits(), rr.to_bits(), "{what}: sweep's Σ r²");
        let mut res = vec![0.0; n];
        let [got, gap] = rows.residual(&b, &x, &mut res, Some(&d));
        assert_eq!(bits(&res), bits(&r), "{what}: residual");
        assert_eq!(got.to_bits(), rr.to_bits(), "{what}");
        let g = (0..n).fold(0.0, |s, i| s + (r[i] - d[i]) * (r[i] - d[i]));
        assert_eq!(gap.to_bits(), g.to_bits(), "{what}");
        let diag: Vec<f64> = (0..n)
            .map(|i| {
                let (ptr, cols, vals) = blk.csr();
                (ptr[i]..ptr[i + 1])
                    .filter(|&e| cols[e] as usize == i)
                    .fold(0.0, |d, e| d + vals[e])
            })
            .collect();
        assert_eq!(bits(&rows.diagonal()), bits(&diag), "{what}: diagonal");
        for i in 0..n {
            let (ptr, cols, _) = blk.csr();
            let ghost = cols[ptr[i]..ptr[i + 1]].iter().any(|&c| c as usize >= n);
            assert_eq!(rows.reads_ghost(i), ghost, "{what} row {i}");
        }
    }

    /// For each block of 1 to `most` blocks of `a`: the storage `auto` takes (the one `want` names on
    /// every block), CSR's, and both kernels against the reference to the bit.
    fn check(name: &str, a: &Csr, want: &str, blocks: usize) -> f64 {
        let mut most = 0.0f64;
        for p in 1..=blocks {
            let bounds = row_blocks(a.row_ptr(), p);
            for r in 0..p {
                let blk = RowBlock::from_global(a, &bounds, r);
                let what = format!("{name} block {r} of {p}");
                let csr = Rows::new(&blk, MatrixStorage::Csr);
                assert_eq!(csr.storage().name, "csr", "{what}");
                same_bits(&format!("{what} csr"), &blk, &csr);
                // `auto` takes CSR on a block this small.
                let small = Rows::new(&blk, MatrixStorage::Auto);
                assert_eq!(small.storage().name, "csr", "{what}");
                let auto = Rows::new(&blk, MatrixStorage::Compact);
                assert_eq!(auto.storage().name, want, "{what}");
                assert!(StorageInfo::NAMES.contains(&want));
                same_bits(&format!("{what} compact"), &blk, &auto);
                most = most.max(auto.storage().bytes_per_entry());
            }
        }
        most
    }

    #[test]
    fn every_storage_computes_the_bits_of_csr() {
        // The generated systems: offsets and a table of a few values.
        let l = check(
            "laplace3d",
            &generate::laplace_3d(9, 8, 7),
            "offsets16+table8",
            3,
        );
        // 7 entries a row: 3 bytes each and 4 a row, plus the table over few entries.
        assert!(l < 4.0, "{l}");
        check(
            "aniso2d",
            &generate::anisotropic_2d(20, 0.01),
            "offsets16+table8",
            3,
        );
        check(
            "jump3d",
            &generate::jump_3d(8, 1000.0),
            "offsets16+table8",
            3,
        );
        check(
            "convdiff2d",
            &generate::convection_diffusion_2d(20, 1.5),
            "offsets16+table8",
            3,
        );
        // `distinct` values (more than 256, then more than 65 536) over a banded matrix.
        let banded = |n: usize, distinct: usize| {
            let v = scattered(distinct, 1);
            let at = |k: usize| v[k * 7919 % distinct];
            let mut t = Vec::new();
            for i in 0..n as u32 {
                let k = 3 * i as usize;
                t.push((i, i, 4.0 + at(k)));
                if i > 0 {
                    t.push((i, i - 1, at(k + 1)));
                }
                if i as usize + 40 < n {
                    t.push((i, i + 40, at(k + 2)));
                }
            }
            Csr::from_triplets(n, t)
        };
        let s = check(
            "banded 1000 values",
            &banded(6_000, 1000),
            "offsets16+table16",
            3,
        );
        assert!(s < 9.0, "{s}");
        let s = check(
            "banded, all values",
            &banded(23_000, 69_000),
            "offsets16",
            1,
        );
        assert!(s < 12.0, "{s}");
        // A table costing more than it saves: f64 values.
        check("small, all values", &banded(300, 900), "offsets16", 3);
        // An entry 50 000 columns from its row (and 50 000 back, wrapped): no offset fits
        // in 16 bits, CSR.
        let n = 100_000u32;
        let mut t: Vec<(u32, u32, f64)> = (0..n).map(|i| (i, i, 2.0)).collect();
        t.push((0, n / 2, -1.0));
        t.push((n / 2, 0, -1.0));
        let far = Csr::from_triplets(n as usize, t);
        let blk = RowBlock::from_global(&far, &[0, n as usize], 0);
        let rows = Rows::new(&blk, MatrixStorage::Compact);
        assert_eq!(rows.storage().name, "csr");
        same_bits("far", &blk, &rows);
        // Blocks of more than 32 767 rows: the ghosts of the block before are read by the
        // first rows, from past the last: offsets wrapped.
        let t = (0..66_000u32)
            .flat_map(|i| {
                [
                    (i, i, 2.0),
                    (i, i.saturating_sub(1), -1.0),
                    (i, (i + 1).min(65_999), -1.0),
                ]
            })
            .collect();
        let long = Csr::from_triplets(66_000, t);
        check("tridiagonal 66 000", &long, "offsets16+table8", 2);
        let wraps = |p: usize, r: usize| {
            let blk = RowBlock::from_global(&long, &row_blocks(long.row_ptr(), p), r);
            match Rows::new(&blk, MatrixStorage::Compact).layout {
                Layout::Offsets { wrap, .. } => wrap,
                Layout::Csr { .. } => panic!("offsets"),
            }
        };
        assert!(!wraps(1, 0) && !wraps(2, 0) && wraps(2, 1));
        // −0 and 0 are two values of the table (by bits), and a table of two values.
        let t = (0..200u32)
            .flat_map(|i| {
                let d = [0.0, -0.0, 1.0][i as usize % 3];
                [(i, i, d), (i, (i + 1) % 200, -0.0)]
            })
            .collect();
        let z = Csr::from_triplets(200, t);
        check("zeros", &z, "offsets16+table8", 3);
        let blk = RowBlock::from_global(&z, &[0, 200], 0);
        let Layout::Offsets {
            vals: Values::Byte(table, _),
            ..
        } = &Rows::new(&blk, MatrixStorage::Compact).layout
        else {
            panic!("a table")
        };
        assert_eq!(table.len(), 3, "{table:?}");
    }
}
