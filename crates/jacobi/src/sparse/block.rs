//! Reading a Matrix Market system by row blocks: each rank reads the file itself and keeps
//! its own rows, without holding the whole matrix and without communicating.
//!
//! [`read_block`] passes over the file twice:
//!
//! 1. It counts the entries of each row (of the matrix expanded from a symmetric file; an
//!    entry listed twice counts twice) and, for a `general` file, of each column, checking
//!    every line as [`super::read_matrix`] does: every rank sees the whole file, so every
//!    rank refuses a bad one with the same error. The row counts give the row blocks
//!    ([`row_blocks`]) and every block's size, so every rank checks the largest block against
//!    the memory given, and refuses alike, before keeping anything.
//! 2. It keeps the entries of the rank's rows (global columns) and the other ranks' entries in
//!    the rank's columns: the latter say which of its values each neighbour needs (the send
//!    lists) and, for a file that is not `symmetric`, whether the rows equal the columns.
//!
//! Memory: 8 bytes per row of the whole matrix (16 for a `general` file), then
//! [`BYTES_PER_ENTRY`] per entry of the rank's rows and per entry of its columns (for a
//! symmetric kind the columns' entries are the rows' mirror, counted alike). For a matrix from
//! a mesh the off-block entries of a block's columns are few (its surface), so keeping its
//! columns always costs little; for a matrix with a few dense columns it costs up to the whole
//! of those columns on the rank owning them.
//!
//! Duplicates: the blocks are balanced on the entries as listed, so a row listed with
//! duplicates weighs its listed entries, not its distinct ones. For a file without duplicates
//! (the usual case) the bounds are exactly [`row_blocks`] of the whole matrix; with duplicates
//! a block may be off the ideal by the duplicates it holds.

use super::csr::{compress, row_blocks};
use super::dist::RowBlock;
use super::mtx::{Entries, MatrixError, MatrixKind, Source, BYTES_PER_ENTRY};

/// What one rank read of a Matrix Market system.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockRead {
    /// The rank's rows: what [`RowBlock::from_global`] gives from the whole matrix and
    /// `bounds`.
    pub block: RowBlock,
    /// The row blocks, `parts + 1` boundaries, the same on every rank: [`row_blocks`] of the
    /// whole matrix's row pointers for a file without duplicate entries (with duplicates, of
    /// the entries as listed).
    pub bounds: Vec<usize>,
    /// The order of the matrix.
    pub n: usize,
    /// The entries of the whole matrix, a symmetric kind expanded: its nonzeros for a file
    /// without duplicate entries (a duplicate counts once more each time it is listed).
    pub nnz: u64,
    /// What the file stores.
    pub kind: MatrixKind,
    /// The first global row of this block whose diagonal entry is zero or absent.
    pub zero_diagonal: Option<usize>,
    /// [`RowBlock::dominance`]: every row of this block weakly diagonally dominant, and one
    /// strictly ([`super::Csr::diagonally_dominant`] when combined over the blocks).
    pub dominance: (bool, bool),
    /// Whether this block's rows equal its columns, `A[first..end, :] == A[:, first..end]ᵀ`
    /// (true without a check for a `symmetric` file): the matrix is symmetric when every
    /// block's are.
    pub symmetric: bool,
}

/// Rank `rank`'s block of rows (of `parts`) of the square matrix in the Matrix Market file
/// `path`, read within `memory` bytes (the memory every rank may use: the largest block must
/// fit). Every rank passes over the whole file twice; every rank refuses a bad file with the
/// same error (the file and the line), a file with fewer rows than `parts` or whose largest
/// block would not fit on the size line.
pub fn read_block<S: Source + ?Sized>(
    src: &S,
    memory: u64,
    parts: usize,
    rank: usize,
) -> Result<BlockRead, MatrixError> {
    assert!(rank < parts, "rank {rank} of {parts}");
    let file = Entries::open(src)?;
    let (n, kind) = (file.n as usize, file.kind);
    let general = kind == MatrixKind::General;
    if n < parts {
        return Err(file.fail_at_size(format!(
            "the order {n} is less than the {parts} ranks: every rank needs a row"
        )));
    }
    // Pass 1's counts, and the least the largest block can need (its rows and columns hold at
    // least their share of the entries the size line announces).
    let counts = (n as u64 + 1) * 8 * if general { 2 } else { 1 };
    file.fits(
        "reading it by row blocks",
        (2 * file.nnz)
            .div_ceil(parts as u64)
            .saturating_mul(BYTES_PER_ENTRY)
            .saturating_add(counts),
        memory,
    )?;
    let size_line = file.size_line;
    let mut ptr = vec![0usize; n + 1];
    let mut per_col = if general { vec![0usize; n] } else { Vec::new() };
    file.for_each(|r, c, _| {
        ptr[r as usize + 1] += 1;
        if general {
            per_col[c as usize] += 1;
        }
    })?;
    for i in 0..n {
        ptr[i + 1] += ptr[i];
    }
    let bounds = row_blocks(&ptr, parts);
    let nnz = ptr[n] as u64;
    // The largest block: every rank checks the same one.
    let need = |q: usize| -> u64 {
        let rows = (ptr[bounds[q + 1]] - ptr[bounds[q]]) as u64;
        let cols = match general {
            true => per_col[bounds[q]..bounds[q + 1]].iter().sum::<usize>() as u64,
            false => rows,
        };
        (rows + cols)
            .saturating_mul(BYTES_PER_ENTRY)
            .saturating_add(counts)
    };
    let worst = (0..parts).max_by_key(|&q| need(q)).expect("parts ≥ 1");
    let file = Entries::open(src)?;
    debug_assert_eq!(file.size_line, size_line);
    file.fits(
        &format!(
            "the largest row block (rank {worst} of {parts}, rows {}..{})",
            bounds[worst] + 1,
            bounds[worst + 1]
        ),
        need(worst),
        memory,
    )?;
    drop(per_col);

    let (first, end) = (bounds[rank], bounds[rank + 1]);
    let rows = end - first;
    let own = |x: u32| (first..end).contains(&(x as usize));
    // This block's rows (local row, global column) and the other ranks' entries in its
    // columns (global row, global column).
    let mut mine: Vec<(u32, u32, f64)> = Vec::with_capacity(ptr[end] - ptr[first]);
    let mut theirs: Vec<(u32, u32, f64)> = Vec::new();
    drop(ptr);
    file.for_each(|r, c, v| {
        if own(r) {
            mine.push((r - first as u32, c, v));
        } else if own(c) {
            theirs.push((r, c, v));
        }
    })?;
    let (ptr, cols, vals) = compress(rows, mine);
    let symmetric =
        kind == MatrixKind::Symmetric || rows_equal_columns(first, &ptr, &cols, &vals, &theirs);
    let needed: Vec<(usize, usize)> = theirs
        .into_iter()
        .map(|(r, c, _)| (r as usize, c as usize))
        .collect();
    let block = RowBlock::from_rows(&bounds, rank, ptr, cols, vals, needed);
    Ok(BlockRead {
        zero_diagonal: block.zero_diagonal(),
        dominance: block.dominance(),
        block,
        bounds,
        n,
        nnz,
        kind,
        symmetric,
    })
}

/// Whether rows `first..first + rows` (`ptr`, `cols` global, `vals`: compressed, duplicates
/// summed) equal the same columns, whose entries outside these rows are `theirs` (global row,
/// global column, value; duplicates not yet summed). An absent entry is 0, as in
/// [`super::Csr::is_symmetric`].
fn rows_equal_columns(
    first: usize,
    ptr: &[usize],
    cols: &[u32],
    vals: &[f64],
    theirs: &[(u32, u32, f64)],
) -> bool {
    let rows = ptr.len() - 1;
    let end = first + rows;
    // The columns, compressed as rows of the transpose (local column, global row).
    let mut t: Vec<(u32, u32, f64)> = theirs
        .iter()
        .map(|&(r, c, v)| (c - first as u32, r, v))
        .collect();
    for i in 0..rows {
        for k in ptr[i]..ptr[i + 1] {
            let c = cols[k] as usize;
            if (first..end).contains(&c) {
                t.push(((c - first) as u32, (first + i) as u32, vals[k]));
            }
        }
    }
    let (tptr, trows, tvals) = compress(rows, t);
    (0..rows).all(|i| {
        let row = cols[ptr[i]..ptr[i + 1]]
            .iter()
            .zip(&vals[ptr[i]..ptr[i + 1]]);
        let col = trows[tptr[i]..tptr[i + 1]]
            .iter()
            .zip(&tvals[tptr[i]..tptr[i + 1]]);
        same_sparse(row, col)
    })
}

/// Whether two sparse vectors, each as `(index, value)` in increasing index order, are equal,
/// an absent entry counting as 0.
fn same_sparse<'a>(
    a: impl Iterator<Item = (&'a u32, &'a f64)>,
    b: impl Iterator<Item = (&'a u32, &'a f64)>,
) -> bool {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let value = |e: Option<(&u32, &f64)>| e.map_or(0.0, |(_, &v)| v);
    loop {
        let (i, j) = (a.peek().map(|&(&i, _)| i), b.peek().map(|&(&j, _)| j));
        let (x, y) = match (i, j) {
            (None, None) => return true,
            (Some(i), Some(j)) if i == j => (a.next(), b.next()),
            (Some(i), j) if j.is_none_or(|j| i < j) => (a.next(), None),
            _ => (None, b.next()),
        };
        if value(x) != value(y) {
            return false;
        }
    }
}

#[cfg(test)]
// Tests write their fixtures directly, not through a caller's output module.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::super::mtx::tests::{bad_matrix_files, write_file};
    use super::super::{generate, read_matrix, read_vector, read_vector_block, write_matrix, Csr};
    use super::*;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    const GIB: u64 = 1 << 30;

    /// A scratch directory, removed with what it holds when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            // Tests run in parallel: a number of its own for every directory.
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("aiac-block-{}-{k}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }

        fn file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Whether rows `first..end` of `a` equal its columns `first..end` (absent = 0).
    fn block_symmetric(a: &Csr, first: usize, end: usize) -> bool {
        (first..end).all(|i| (0..a.n()).all(|j| a.get(i, j) == a.get(j, i)))
    }

    /// `read_block` on every rank of 1 to 4 gives the blocks of the whole matrix `read_matrix`
    /// reads, split by the bounds `want_bounds` gives for `parts`, with the flags of the whole
    /// matrix's rows; `nnz` entries in all.
    fn check_blocks(path: &Path, want_bounds: impl Fn(usize) -> Vec<usize>, nnz: u64) {
        let (whole, kind) = read_matrix(path, GIB).unwrap();
        for parts in 1..=4.min(whole.n()) {
            let mut all_symmetric = true;
            for rank in 0..parts {
                let r = read_block(path, GIB, parts, rank).unwrap();
                let at = format!("{}: rank {rank} of {parts}", path.display());
                assert_eq!(r.bounds, want_bounds(parts), "{at}");
                assert_eq!(
                    r.block,
                    RowBlock::from_global(&whole, &r.bounds, rank),
                    "{at}"
                );
                assert_eq!((r.n, r.nnz, r.kind), (whole.n(), nnz, kind), "{at}");
                let (first, end) = (r.bounds[rank], r.bounds[rank + 1]);
                assert_eq!(
                    r.zero_diagonal,
                    (first..end).find(|&i| whole.get(i, i) == 0.0),
                    "{at}"
                );
                let (mut weak, mut strict) = (true, false);
                for i in first..end {
                    let (cols, vals) = whole.row(i);
                    let off: f64 = cols
                        .iter()
                        .zip(vals)
                        .filter(|(&c, _)| c as usize != i)
                        .map(|(_, v)| v.abs())
                        .sum();
                    weak &= whole.get(i, i).abs() >= off;
                    strict |= whole.get(i, i).abs() > off;
                }
                assert_eq!(r.dominance, (weak, strict), "{at}");
                assert_eq!(r.symmetric, block_symmetric(&whole, first, end), "{at}");
                all_symmetric &= r.symmetric;
            }
            assert_eq!(all_symmetric, whole.is_symmetric(), "{}", path.display());
        }
    }

    /// A general matrix with a bit of everything: strictly dominant rows in its first half, a
    /// missing and a zero diagonal entry, rows that equal their columns and rows that do not.
    fn odd_matrix() -> Csr {
        let mut t = Vec::new();
        for i in 0..12u32 {
            match i {
                7 => {}
                8 => t.push((i, i, 0.0)),
                _ => t.push((i, i, if i < 6 { 3.0 } else { 2.0 })),
            }
            if i > 0 {
                t.push((i, i - 1, -1.0));
            }
            if i < 11 {
                t.push((i, i + 1, if i == 9 { -0.5 } else { -1.0 }));
            }
        }
        t.push((0, 11, 0.25));
        Csr::from_triplets(12, t)
    }

    #[test]
    fn generated_systems_read_by_blocks_are_the_blocks_of_the_whole() {
        let dir = Scratch::new();
        let systems = [
            ("laplace", generate::laplace_3d(4, 3, 5), true),
            ("anisotropic", generate::anisotropic_2d(7, 0.01), true),
            ("jump", generate::jump_3d(5, 1000.0), true),
            (
                "convection",
                generate::convection_diffusion_2d(8, 1.5),
                false,
            ),
            ("odd", odd_matrix(), false),
        ];
        for (name, a, symmetric) in systems {
            let kinds: &[bool] = if symmetric { &[true, false] } else { &[false] };
            for &sym in kinds {
                let path = dir.0.join(format!("{name}-{sym}.mtx"));
                write_file(&path, &a, sym).unwrap();
                let (back, _) = read_matrix(&path, GIB).unwrap();
                assert_eq!(back, a, "{name}: written and read back");
                check_blocks(&path, |p| row_blocks(a.row_ptr(), p), a.nnz() as u64);
            }
        }
    }

    /// The row pointers of the entries as `text` lists them (a symmetric kind expanded,
    /// duplicates counted each time), parsed here on their own.
    fn listed_ptr(text: &str) -> Vec<usize> {
        let mut lines = text.lines().filter(|l| !l.starts_with('%'));
        let n: usize = lines
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let expand = !text.lines().next().unwrap().ends_with("general");
        let mut ptr = vec![0usize; n + 1];
        for l in lines {
            let w: Vec<usize> = l
                .split_whitespace()
                .take(2)
                .map(|x| x.parse().unwrap())
                .collect();
            ptr[w[0]] += 1;
            if expand && w[0] != w[1] {
                ptr[w[1]] += 1;
            }
        }
        for i in 0..n {
            ptr[i + 1] += ptr[i];
        }
        ptr
    }

    /// Files listing entries more than once: blocks balanced on the entries as listed, each
    /// the block of the whole matrix (duplicates summed in the file's order, to the bit).
    #[test]
    fn files_with_duplicates_read_by_blocks() {
        let dir = Scratch::new();
        let general = "%%MatrixMarket matrix coordinate real general\n\
                       6 6 17\n\
                       1 1 4\n2 1 0.1\n1 2 0.1\n2 2 4\n2 1 0.2\n2 1 0.3\n1 2 0.5\n\
                       3 3 1\n3 3 -1\n4 4 5\n4 6 1\n5 5 5\n5 5 1e-17\n6 6 3\n6 4 1\n\
                       3 4 2\n4 3 2\n";
        let symmetric = "%%MatrixMarket matrix coordinate real symmetric\n\
                         5 5 10\n\
                         1 1 2\n2 1 -1\n2 1 -0.5\n2 2 2\n3 3 2\n3 3 0.1\n\
                         5 1 0.7\n4 4 2\n5 5 -3\n5 5 3\n";
        // Many rows, each diagonal listed five times in scattered places with values whose
        // sum depends on their order ((1e16 + 1) − 1e16 is 0, 1 + (1e16 − 1e16) is 1).
        let n = 300;
        let mut big = format!(
            "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
            n * 6
        );
        for round in 0..5 {
            for i in 1..=n {
                let v = [1e16, 1.0, -1e16, 3.0, 0.5][(round + i) % 5];
                big.push_str(&format!("{i} {i} {v:e}\n"));
                if round == 0 {
                    big.push_str(&format!("{i} {} -1\n", i % n + 1));
                }
            }
        }
        for (name, text) in [
            ("general.mtx", general),
            ("symmetric.mtx", symmetric),
            ("big.mtx", &big),
        ] {
            let path = dir.file(name, text);
            let ptr = listed_ptr(text);
            let (whole, _) = read_matrix(&path, GIB).unwrap();
            assert!(whole.nnz() < ptr[whole.n()], "{name} has duplicates");
            check_blocks(&path, |p| row_blocks(&ptr, p), ptr[whole.n()] as u64);
        }
    }

    /// Every rank of 1 to 4 refuses `text` with the error `read_matrix` gives.
    fn refused_alike(path: &Path, parts: std::ops::RangeInclusive<usize>) {
        let want = read_matrix(path, GIB).expect_err("a bad file");
        for parts in parts {
            for rank in 0..parts {
                let e = read_block(path, GIB, parts, rank).expect_err("a bad file");
                assert_eq!(e, want, "rank {rank} of {parts}");
            }
        }
    }

    /// Every kind of fault `read_matrix` refuses, wherever it is (in the rows of the first,
    /// a middle or the last rank): the same error on every rank.
    #[test]
    fn a_bad_file_is_refused_alike_on_every_rank() {
        let dir = Scratch::new();
        for (k, (text, _, _)) in bad_matrix_files().into_iter().enumerate() {
            let path = dir.file(&format!("bad-{k}.mtx"), &text);
            refused_alike(&path, 1..=2);
        }
        // A tridiagonal 8 × 8 matrix, its entries row by row: the first, a middle and the
        // last row's entry made bad in each way.
        let n = 8;
        let entries = |lower: bool| -> Vec<String> {
            (1..=n)
                .flat_map(|i| {
                    [(i, i - 1), (i, i), (i, i + 1)]
                        .into_iter()
                        .filter(move |&(_, j)| j >= 1 && j <= n && (!lower || j <= i))
                })
                .map(|(i, j)| format!("{i} {j} {}", if i == j { 4.0 } else { -1.0 }))
                .collect()
        };
        let file = |kind: &str, lines: &[String], count: usize| {
            format!(
                "%%MatrixMarket matrix coordinate real {kind}\n% a comment\n{n} {n} {count}\n{}\n",
                lines.join("\n")
            )
        };
        for (kind, lower) in [("general", false), ("symmetric", true)] {
            let good = entries(lower);
            let count = good.len();
            assert!(read_matrix(&dir.file("good.mtx", &file(kind, &good, count)), GIB).is_ok());
            for at in [0, count / 2, count - 1] {
                let (i, j) = (good[at].split(' ').next().unwrap(), n.to_string());
                let faults = [
                    format!("{i} 1 nan"),
                    format!("{i} 1 -inf"),
                    format!("{i} 1 one"),
                    format!("{} 1 1", n + 1),
                    format!("{i} 0 1"),
                    format!("{i} 1"),
                    format!("{i} 1 1 1"),
                    format!("{i} x 1"),
                    format!("1 {j} 1"),
                ];
                for (f, bad) in faults.iter().enumerate() {
                    let mut lines = good.clone();
                    lines[at] = bad.clone();
                    let text = file(kind, &lines, count);
                    let path = dir.file(&format!("{kind}-{at}-{f}.mtx"), &text);
                    if *bad == format!("1 {j} 1") && kind == "general" {
                        // In the upper triangle: only a symmetric file refuses it.
                        assert!(read_matrix(&path, GIB).is_ok());
                        continue;
                    }
                    refused_alike(&path, 1..=4);
                }
                // Cut short after this entry, or one entry too many.
                let text = file(kind, &good[..at], count);
                refused_alike(&dir.file("short.mtx", &text), 1..=4);
                let mut more = good.clone();
                more.insert(at, good[at].clone());
                refused_alike(&dir.file("long.mtx", &file(kind, &more, count)), 1..=4);
            }
        }
    }

    /// More ranks than rows, and a largest block past the memory: refused on the size line,
    /// alike on every rank, with the figures.
    #[test]
    fn too_many_ranks_or_too_little_memory_are_refused_alike() {
        let dir = Scratch::new();
        // A dense first column: the first block's columns hold far more than its rows.
        let mut t: Vec<(u32, u32, f64)> = (0..30).map(|i| (i, i, 4.0)).collect();
        t.extend((1..30).map(|i| (i, 0, -1.0)));
        t.extend((1..30).map(|i| (i - 1, i, -1.0)));
        let a = Csr::from_triplets(30, t);
        let path = dir.0.join("a.mtx");
        write_file(&path, &a, false).unwrap();
        let small = dir.file(
            "small.mtx",
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n",
        );
        for rank in 0..3 {
            let e = read_block(&small, GIB, 3, rank).unwrap_err();
            assert_eq!(e.line, Some(2), "{e}");
            assert!(e.why.contains("order 2 is less than the 3 ranks"), "{e}");
        }
        // The largest block needs 28 bytes per entry of its rows and of its columns, and 16
        // per row of the whole matrix for the counts.
        let parts = 3;
        let bounds = row_blocks(a.row_ptr(), parts);
        let need = |q: usize| {
            let (f, e) = (bounds[q], bounds[q + 1]);
            let rows = a.row_ptr()[e] - a.row_ptr()[f];
            let cols = (0..a.n())
                .map(|i| {
                    a.row(i)
                        .0
                        .iter()
                        .filter(|&&c| (f..e).contains(&(c as usize)))
                        .count()
                })
                .sum::<usize>();
            (28 * (rows + cols) + 16 * (a.n() + 1)) as u64
        };
        let most = (0..parts).map(need).max().unwrap();
        for rank in 0..parts {
            assert!(read_block(&path, most, parts, rank).is_ok());
            let e = read_block(&path, most - 1, parts, rank).unwrap_err();
            assert_eq!(e.line, Some(2), "{e}");
            assert!(e.why.contains("the largest row block (rank"), "{e}");
            assert!(e.why.contains("more than the"), "{e}");
            let first = read_block(&path, most - 1, parts, 0).unwrap_err();
            assert_eq!(e, first);
        }
        // A size line announcing more than can fit is refused before the entries are read.
        let huge = dir.file(
            "huge.mtx",
            "%%MatrixMarket matrix coordinate real general\n1000 1000 900000000\n1 1 1\n",
        );
        for rank in 0..2 {
            let e = read_block(&huge, GIB, 2, rank).unwrap_err();
            assert_eq!(e.line, Some(2), "{e}");
            assert!(e.why.contains("more than the 1.0 GiB available"), "{e}");
        }
    }

    #[test]
    fn vector_blocks_are_slices_of_the_whole() {
        let dir = Scratch::new();
        let array = dir.file(
            "b.mtx",
            "%%MatrixMarket matrix array real general\n% rhs\n5 1\n1\n-2.5\n3e1\n4\n5\n",
        );
        let coord = dir.file(
            "c.mtx",
            "%%MatrixMarket matrix coordinate real general\n5 1 4\n3 1 7\n1 1 1\n3 1 0.5\n5 1 2\n",
        );
        for path in [&array, &coord] {
            let whole = read_vector(path, 5).unwrap();
            for first in 0..5 {
                for rows in 0..=5 - first {
                    let b = read_vector_block(path, 5, first, rows).unwrap();
                    assert_eq!(b, whole[first..first + rows], "{}", path.display());
                }
            }
        }
        let bad = dir.file(
            "d.mtx",
            "%%MatrixMarket matrix array real general\n3 1\n1\n2\nnan\n",
        );
        let want = read_vector(&bad, 3).unwrap_err();
        assert_eq!(want.line, Some(5));
        for first in 0..3 {
            assert_eq!(read_vector_block(&bad, 3, first, 1).unwrap_err(), want);
        }
    }

    /// Values that need every digit, and the extremes, read back to the same bits.
    #[test]
    fn written_values_read_back_to_the_bit() {
        let dir = Scratch::new();
        let vals = [
            1.0 / 3.0,
            -2.0f64.sqrt(),
            1e-300,
            f64::MAX,
            5e-324,
            -0.0,
            0.1 + 0.2,
        ];
        let t = vals
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as u32, i as u32, v))
            .collect();
        let a = Csr::from_triplets(vals.len(), t);
        let path = dir.0.join("v.mtx");
        write_file(&path, &a, false).unwrap();
        let (b, _) = read_matrix(&path, GIB).unwrap();
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(b.get(i, i).to_bits(), v.to_bits(), "{v:e}");
        }
        // Not symmetric, asked to be written `symmetric`: refused, and nothing written.
        let mut out = Vec::new();
        let e = write_matrix(&mut out, &generate::convection_diffusion_2d(3, 1.0), true);
        assert!(e.unwrap_err().to_string().contains("not symmetric"));
        assert!(out.is_empty());
    }

    /// The Matrix Market files PETSc ships (Debian's libpetsc3.18-dev-examples, which
    /// scripts/setup.sh installs): read whole and by blocks, every value checked against the
    /// file's text parsed here on its own.
    #[test]
    fn petsc_datafiles() {
        let dirs: Vec<PathBuf> = std::fs::read_dir("/usr/share/petsc")
            .into_iter()
            .flatten()
            .flatten()
            .map(|v| v.path().join("share/petsc/datafiles/matrices"))
            .filter(|d| d.is_dir())
            .collect();
        let files: Vec<PathBuf> = dirs
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
            .collect();
        assert!(
            !files.is_empty(),
            "no PETSc .mtx files under /usr/share/petsc/*/share/petsc/datafiles/matrices: \
             install libpetsc3.18-dev-examples (scripts/setup.sh does)"
        );
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let header = text.lines().next().unwrap().to_lowercase();
            let sign = match header.split_whitespace().last().unwrap() {
                "general" => None,
                "symmetric" => Some(1.0),
                "skew-symmetric" => Some(-1.0),
                s => panic!("{}: {s}", path.display()),
            };
            let mut lines = text.lines().filter(|l| !l.starts_with('%'));
            let size: Vec<usize> = lines
                .next()
                .unwrap()
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
            let mut want: BTreeMap<(usize, usize), f64> = BTreeMap::new();
            for l in lines {
                let w: Vec<&str> = l.split_whitespace().collect();
                let (i, j): (usize, usize) = (w[0].parse().unwrap(), w[1].parse().unwrap());
                let v: f64 = w[2].parse().unwrap();
                *want.entry((i - 1, j - 1)).or_default() += v;
                if let Some(s) = sign.filter(|_| i != j) {
                    *want.entry((j - 1, i - 1)).or_default() += s * v;
                }
            }
            let (a, _) = read_matrix(path, GIB).unwrap();
            assert_eq!((a.n(), a.n()), (size[0], size[1]), "{}", path.display());
            assert_eq!(a.nnz(), want.len(), "{}", path.display());
            for (&(i, j), &v) in &want {
                assert_eq!(a.get(i, j), v, "{}: ({i}, {j})", path.display());
            }
            check_blocks(path, |p| row_blocks(a.row_ptr(), p), a.nnz() as u64);
        }
    }
}
