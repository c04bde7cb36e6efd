//! Matrix Market files (NIST's exchange format, Boisvert, Pozo and Remington 1996): the
//! header line, `%` comments, a size line, then one entry per line with 1-based indices.
//!
//! A file is read line by line into one reused buffer, each line split in place: nothing is
//! allocated per line. A line is at most [`MAX_LINE`] bytes: a longer one (a file with no
//! newline, a binary file) is refused, never read whole into memory.
//!
//! Where the bytes come from is a [`Source`]: a path opened as it is, or the caller's own
//! (aiac's command line opens every file it is given through one module that refuses what is
//! not a regular file before opening it).

use super::csr::Csr;
use crate::memory::human_bytes;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// The longest line read, in bytes (its end included): 1 MiB. The Matrix Market format
/// limits a line to 1024 characters (NIST's `mmio.h`: `MM_MAX_LINE_LENGTH 1025`, with the
/// terminating NUL); an entry needs under 80. A thousand times that leaves room for files
/// that stretch the letter with long comments, and the buffer holding a line costs at most
/// 1 MiB. A longer line is refused, naming the line: a file with no newline (a binary file,
/// NUL bytes, a zero device) was read whole into memory before, and past it.
pub const MAX_LINE: usize = 1 << 20;

/// A Matrix Market file: its name in messages, and its bytes from the start. The readers open
/// it once ([`read_matrix`], [`read_vector`]) or twice ([`read_block`](super::read_block): a
/// pass each), and read it a line at a time, each line at most [`MAX_LINE`] bytes.
pub trait Source {
    /// The file's name in messages (its path).
    fn path(&self) -> &Path;
    /// Open it at its start.
    fn open(&self) -> std::io::Result<Box<dyn Read>>;
}

/// A path, opened as it is: whatever the process can open, a FIFO (whose open waits for a
/// writer) or a device included. A caller given paths by others checks them first, or opens
/// them through a [`Source`] of its own that does.
impl Source for Path {
    fn path(&self) -> &Path {
        self
    }

    fn open(&self) -> std::io::Result<Box<dyn Read>> {
        let file = std::fs::File::open(self)?;
        if file.metadata()?.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(Box::new(file))
    }
}

impl Source for PathBuf {
    fn path(&self) -> &Path {
        self
    }

    fn open(&self) -> std::io::Result<Box<dyn Read>> {
        self.as_path().open()
    }
}

/// What a matrix file stores of its matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixKind {
    /// Every entry.
    General,
    /// The lower triangle and diagonal of a symmetric matrix.
    Symmetric,
    /// The strict lower triangle of a skew-symmetric matrix (`a_ji = −a_ij`, zero diagonal).
    SkewSymmetric,
}

/// A file that is not a matrix (or vector) aiac can solve with, or cannot be read: its path,
/// the line, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {why}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct MatrixError {
    /// The file.
    pub path: PathBuf,
    /// The line (1-based), when the fault is on one.
    pub line: Option<usize>,
    /// What is wrong.
    pub why: String,
}

/// Bytes held per stored entry while reading: the triplet (two u32 indices and the value),
/// then its place in the CSR arrays (a u32 column and the value). Sorting the triplets takes
/// half a triplet more per entry, before the CSR arrays exist.
pub(super) const BYTES_PER_ENTRY: u64 = 16 + 12;

/// The lines of a file, numbered, comments and blank lines skipped, each read into the same
/// buffer, each at most [`MAX_LINE`] bytes.
struct Lines<R> {
    reader: R,
    path: PathBuf,
    number: usize,
    buf: String,
}

/// The reader of a [`Source`]'s lines.
type Reader = std::io::BufReader<Box<dyn Read>>;

impl<R: BufRead> Lines<R> {
    fn fail(&self, why: impl Into<String>) -> MatrixError {
        self.fail_at(self.number, why)
    }

    fn fail_at(&self, line: usize, why: impl Into<String>) -> MatrixError {
        MatrixError {
            path: self.path.clone(),
            line: Some(line),
            why: why.into(),
        }
    }

    /// Read the next line (header and comments included) into the buffer; `false` at the end
    /// of the file.
    ///
    /// At most [`MAX_LINE`] bytes are read: a longer line is an error. The buffer's bytes are
    /// read in place and checked as UTF-8 where they lie (no copy, no allocation once the
    /// buffer has grown to the longest line).
    fn raw(&mut self) -> Result<bool, MatrixError> {
        let mut bytes = std::mem::take(&mut self.buf).into_bytes();
        bytes.clear();
        // One byte past the bound tells a line of exactly MAX_LINE bytes from a longer one.
        let read = (&mut self.reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut bytes);
        let long = bytes.len() > MAX_LINE;
        // An invalid line ends the reading: its buffer is not kept.
        let (text, ok) = match String::from_utf8(bytes) {
            Ok(t) => (t, true),
            Err(_) => (String::new(), false),
        };
        self.buf = text;
        match read {
            Ok(0) => Ok(false),
            Ok(_) => {
                self.number += 1;
                if long {
                    return Err(self.fail(format!(
                        "a line longer than {} bytes (a Matrix Market line holds at most 1024 \
                         characters): not a Matrix Market file, or a line without its end",
                        MAX_LINE
                    )));
                }
                if !ok {
                    return Err(self.fail("not text (invalid UTF-8)"));
                }
                Ok(true)
            }
            Err(e) => {
                self.number += 1;
                Err(self.fail(e.to_string()))
            }
        }
    }

    /// The line last read, without its end.
    fn line(&self) -> &str {
        self.buf.trim_end_matches(['\n', '\r'])
    }

    /// Read the next line that is neither a comment nor blank; `false` at the end of the file.
    fn data(&mut self) -> Result<bool, MatrixError> {
        while self.raw()? {
            let l = self.line().trim_start();
            if !l.is_empty() && !l.starts_with('%') {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The `K` words of `line` separated by ASCII whitespace (the format's: splitting on every
/// Unicode space took 30 % of reading a file), or `None` when it has more or fewer.
fn words<const K: usize>(line: &str) -> Option<[&str; K]> {
    let mut it = line.split_ascii_whitespace();
    let mut w = [""; K];
    for x in &mut w {
        *x = it.next()?;
    }
    it.next().is_none().then_some(w)
}

/// The header's words: object, format, field, symmetry (lower case).
struct Header {
    format: String,
    field: String,
    symmetry: String,
}

fn open<S: Source + ?Sized>(src: &S) -> Result<Lines<Reader>, MatrixError> {
    let path = src.path();
    let file = src.open().map_err(|e| MatrixError {
        path: path.to_path_buf(),
        line: None,
        why: e.to_string(),
    })?;
    Ok(Lines {
        reader: std::io::BufReader::with_capacity(1 << 16, file),
        path: path.to_path_buf(),
        number: 0,
        buf: String::new(),
    })
}

fn header<R: BufRead>(lines: &mut Lines<R>) -> Result<Header, MatrixError> {
    if !lines.raw()? {
        return Err(lines.fail("empty file: no %%MatrixMarket header"));
    }
    let first = lines.line();
    let words: Vec<String> = first.split_whitespace().map(str::to_lowercase).collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(
            lines.fail("not a Matrix Market file: the first line must start with %%MatrixMarket")
        );
    }
    if words.len() != 5 || words[1] != "matrix" {
        return Err(lines.fail(format!(
            "the header must be `%%MatrixMarket matrix FORMAT FIELD SYMMETRY`, got `{first}`"
        )));
    }
    Ok(Header {
        format: words[2].clone(),
        field: words[3].clone(),
        symmetry: words[4].clone(),
    })
}

/// A size-line or entry field as an index or count.
fn count<R: BufRead>(lines: &Lines<R>, word: &str, what: &str) -> Result<u64, MatrixError> {
    word.parse::<u64>()
        .map_err(|_| lines.fail(format!("{what} `{word}` is not a whole number")))
}

/// An entry's value: a finite number.
fn value<R: BufRead>(lines: &Lines<R>, word: &str) -> Result<f64, MatrixError> {
    match word.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(lines.fail(format!("the value `{word}` is not finite"))),
        Err(_) => Err(lines.fail(format!("the value `{word}` is not a number"))),
    }
}

/// A matrix file read up to its entries: the header and the size line checked, the entries
/// still to come. [`read_matrix`] reads them once into a [`Csr`]; [`super::read_block`]
/// reads them twice, counting then keeping one rank's share. Both check the same things, so
/// they refuse the same files with the same error.
pub(super) struct Entries {
    lines: Lines<Reader>,
    /// What the file stores.
    pub kind: MatrixKind,
    /// The symmetry word as the header gives it (for messages).
    symmetry: String,
    /// The order (rows = columns), from 1 to `u32::MAX`.
    pub n: u64,
    /// The entries the size line announces (stored, before expanding a symmetric kind).
    pub nnz: u64,
    /// The size line's number.
    pub size_line: usize,
}

impl Entries {
    /// Open a `coordinate real|integer general|symmetric|skew-symmetric` square matrix file
    /// and read it up to its first entry.
    pub fn open<S: Source + ?Sized>(src: &S) -> Result<Entries, MatrixError> {
        let mut lines = open(src)?;
        let h = header(&mut lines)?;
        match h.format.as_str() {
            "coordinate" => {}
            "array" => {
                return Err(
                    lines.fail("an `array` (dense) matrix: give the matrix in `coordinate` format")
                )
            }
            f => return Err(lines.fail(format!("unknown format `{f}` (coordinate or array)"))),
        }
        match h.field.as_str() {
            "real" | "integer" | "double" => {}
            "pattern" => {
                return Err(lines
                    .fail("a `pattern` matrix has no values: a real or integer matrix is needed"))
            }
            "complex" => return Err(lines.fail("a `complex` matrix: aiac solves real systems")),
            f => return Err(lines.fail(format!("unknown field `{f}` (real or integer)"))),
        }
        let kind = match h.symmetry.as_str() {
            "general" => MatrixKind::General,
            "symmetric" => MatrixKind::Symmetric,
            "skew-symmetric" => MatrixKind::SkewSymmetric,
            "hermitian" => return Err(lines.fail("a `hermitian` matrix: aiac solves real systems")),
            s => {
                return Err(lines.fail(format!(
                    "unknown symmetry `{s}` (general, symmetric or skew-symmetric)"
                )))
            }
        };
        if !lines.data()? {
            return Err(lines.fail("truncated: no size line after the header"));
        }
        let size = lines.line();
        let Some([m, n, nnz]) = words::<3>(size) else {
            return Err(lines.fail(format!(
                "the size line must be `ROWS COLUMNS ENTRIES`, got `{size}`"
            )));
        };
        let (m, n, nnz) = (
            count(&lines, m, "the row count")?,
            count(&lines, n, "the column count")?,
            count(&lines, nnz, "the entry count")?,
        );
        if m != n {
            return Err(lines.fail(format!("the matrix is {m} × {n}: not square")));
        }
        if n == 0 || n > u64::from(u32::MAX) {
            return Err(lines.fail(format!(
                "the order {n} is outside 1 to {} (columns are 32-bit)",
                u32::MAX
            )));
        }
        Ok(Entries {
            size_line: lines.number,
            lines,
            kind,
            symmetry: h.symmetry,
            n,
            nnz,
        })
    }

    /// The most entries the whole matrix can have once expanded: a symmetric file stores one
    /// triangle, up to twice its entries.
    pub fn expanded_bound(&self) -> u64 {
        match self.kind {
            MatrixKind::General => self.nnz,
            _ => self.nnz.saturating_mul(2),
        }
    }

    /// An error on the size line.
    pub fn fail_at_size(&self, why: impl Into<String>) -> MatrixError {
        self.lines.fail_at(self.size_line, why)
    }

    /// Refuse `need` bytes past `memory`, naming the size line and the figures (`what` says
    /// what needs them).
    pub fn fits(&self, what: &str, need: u64, memory: u64) -> Result<(), MatrixError> {
        if need > memory {
            return Err(self.fail_at_size(format!(
                "{what} needs about {}, more than the {} available",
                human_bytes(need),
                human_bytes(memory)
            )));
        }
        Ok(())
    }

    /// Read every entry, checking each, and give each entry of the expanded matrix to `f` as
    /// `(row, column, value)`, 0-based, in the file's order (a symmetric kind's mirror image
    /// right after its entry); then check that nothing follows the last entry.
    pub fn for_each(mut self, mut f: impl FnMut(u32, u32, f64)) -> Result<(), MatrixError> {
        let (n, nnz, size_line, kind) = (self.n, self.nnz, self.size_line, self.kind);
        let skew = kind == MatrixKind::SkewSymmetric;
        for k in 0..nnz {
            if !self.lines.data()? {
                return Err(self.lines.fail(format!(
                    "truncated: line {size_line} announces {nnz} entries, the file ends after {k}"
                )));
            }
            let lines = &self.lines;
            let entry = lines.line();
            let Some([wi, wj, wv]) = words::<3>(entry) else {
                return Err(lines.fail(format!(
                    "an entry must be `ROW COLUMN VALUE`, got `{entry}`"
                )));
            };
            let (i, j) = (
                count(lines, wi, "the row")?,
                count(lines, wj, "the column")?,
            );
            for (what, x) in [("row", i), ("column", j)] {
                if x == 0 || x > n {
                    return Err(lines.fail(format!("the {what} {x} is outside 1 to {n}")));
                }
            }
            let v = value(lines, wv)?;
            let (r, c) = ((i - 1) as u32, (j - 1) as u32);
            match kind {
                MatrixKind::General => f(r, c, v),
                MatrixKind::Symmetric | MatrixKind::SkewSymmetric => {
                    if i < j || (skew && i == j) {
                        return Err(lines.fail(format!(
                            "entry ({i}, {j}) is not in the {}lower triangle a {} file stores",
                            if skew { "strict " } else { "" },
                            self.symmetry
                        )));
                    }
                    f(r, c, v);
                    if r != c {
                        f(c, r, if skew { -v } else { v });
                    }
                }
            }
        }
        if self.lines.data()? {
            return Err(self.lines.fail(format!(
                "more entries than the {nnz} line {size_line} announces"
            )));
        }
        Ok(())
    }
}

/// Read a square sparse matrix from a Matrix Market `coordinate` file of `real` or `integer`
/// values, `general`, `symmetric` or `skew-symmetric` (expanded to the whole matrix), within
/// `memory` bytes.
pub fn read_matrix<S: Source + ?Sized>(
    src: &S,
    memory: u64,
) -> Result<(Csr, MatrixKind), MatrixError> {
    let file = Entries::open(src)?;
    let (n, kind, stored) = (file.n, file.kind, file.expanded_bound());
    file.fits(
        "holding it",
        stored
            .saturating_mul(BYTES_PER_ENTRY)
            .saturating_add((n + 1) * 8),
        memory,
    )?;
    let mut t: Vec<(u32, u32, f64)> = Vec::with_capacity(stored as usize);
    file.for_each(|r, c, v| t.push((r, c, v)))?;
    Ok((Csr::from_triplets(n as usize, t), kind))
}

/// Read a vector of `n` values (a right-hand side) from a Matrix Market file: `array` (one
/// value per line, `n` rows and 1 column) or `coordinate` (an n × 1 `general` matrix, entries
/// not listed are 0), real or integer.
pub fn read_vector<S: Source + ?Sized>(src: &S, n: usize) -> Result<Vec<f64>, MatrixError> {
    let mut b = vec![0.0; n];
    vector_entries(src, n, |i, v| b[i] += v)?;
    Ok(b)
}

/// Entries `first..first + rows` of the vector [`read_vector`] reads: the whole file is
/// checked (every rank refuses a bad file alike), only those entries are kept.
pub fn read_vector_block<S: Source + ?Sized>(
    src: &S,
    n: usize,
    first: usize,
    rows: usize,
) -> Result<Vec<f64>, MatrixError> {
    assert!(first + rows <= n, "rows {first}..{} of {n}", first + rows);
    let mut b = vec![0.0; rows];
    vector_entries(src, n, |i, v| {
        if let Some(x) = i.checked_sub(first).and_then(|k| b.get_mut(k)) {
            *x += v;
        }
    })?;
    Ok(b)
}

/// Read a vector file of `n` values, checking every line, and give each entry to `add` as
/// `(index, value)`, 0-based (an `array` file's entries once each, a `coordinate` file's as
/// listed: repeats are summed by the caller).
fn vector_entries<S: Source + ?Sized>(
    src: &S,
    n: usize,
    mut add: impl FnMut(usize, f64),
) -> Result<(), MatrixError> {
    let mut lines = open(src)?;
    let h = header(&mut lines)?;
    if !matches!(h.field.as_str(), "real" | "integer" | "double") {
        return Err(lines.fail(format!(
            "a `{}` vector: a real or integer one is needed",
            h.field
        )));
    }
    if h.symmetry != "general" {
        return Err(lines.fail(format!("a vector is `general`, not `{}`", h.symmetry)));
    }
    if !lines.data()? {
        return Err(lines.fail("truncated: no size line after the header"));
    }
    let size = lines.line();
    let w: Vec<&str> = size.split_whitespace().collect();
    let coordinate = match h.format.as_str() {
        "array" if w.len() == 2 => false,
        "coordinate" if w.len() == 3 => true,
        "array" | "coordinate" => {
            return Err(lines.fail(format!(
                "the size line of an `{}` file must be `ROWS COLUMNS{}`, got `{size}`",
                h.format,
                if h.format == "array" { "" } else { " ENTRIES" }
            )))
        }
        f => return Err(lines.fail(format!("unknown format `{f}` (coordinate or array)"))),
    };
    let (m, cols) = (
        count(&lines, w[0], "the row count")?,
        count(&lines, w[1], "the column count")?,
    );
    if cols != 1 {
        return Err(lines.fail(format!("{m} × {cols}: a vector has one column")));
    }
    if m != n as u64 {
        return Err(lines.fail(format!("the vector has {m} rows, the matrix {n}")));
    }
    let entries = match coordinate {
        true => count(&lines, w[2], "the entry count")?,
        false => m,
    };
    let size_line = lines.number;
    for k in 0..entries {
        if !lines.data()? {
            return Err(lines.fail(format!(
                "truncated: line {size_line} announces {entries} entries, the file ends after {k}"
            )));
        }
        let entry = lines.line();
        if coordinate {
            let Some([wi, wj, wv]) = words::<3>(entry) else {
                return Err(lines.fail(format!("an entry must be `ROW 1 VALUE`, got `{entry}`")));
            };
            let (i, j) = (
                count(&lines, wi, "the row")?,
                count(&lines, wj, "the column")?,
            );
            if i == 0 || i > m || j != 1 {
                return Err(lines.fail(format!("entry ({i}, {j}) is outside {m} × 1")));
            }
            add((i - 1) as usize, value(&lines, wv)?);
        } else {
            let Some([wv]) = words::<1>(entry) else {
                return Err(lines.fail(format!("an `array` line holds one value, got `{entry}`")));
            };
            add(k as usize, value(&lines, wv)?);
        }
    }
    if lines.data()? {
        return Err(lines.fail(format!(
            "more entries than the {entries} line {size_line} announces"
        )));
    }
    Ok(())
}

/// Write `a` to `w` as a Matrix Market `coordinate real` file: `general` (every entry), or
/// `symmetric` (the lower triangle and diagonal; `a` must equal its transpose, or nothing is
/// written: an [`std::io::ErrorKind::InvalidInput`] error). Values carry 17 significant digits,
/// so [`read_matrix`] gives `a` back exactly. The caller opens the file (aiac's CLI through its
/// output module, which writes a file whole or not at all); `w` is buffered here.
pub fn write_matrix<W: std::io::Write>(w: W, a: &Csr, symmetric: bool) -> std::io::Result<()> {
    use std::io::Write;
    if symmetric && !a.is_symmetric() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the matrix is not symmetric: write it `general`",
        ));
    }
    let keep = |i: usize, c: u32| !symmetric || c as usize <= i;
    let entries: usize = (0..a.n())
        .map(|i| a.row(i).0.iter().filter(|&&c| keep(i, c)).count())
        .sum();
    let mut w = std::io::BufWriter::new(w);
    let kind = if symmetric { "symmetric" } else { "general" };
    writeln!(w, "%%MatrixMarket matrix coordinate real {kind}")?;
    writeln!(w, "{} {} {entries}", a.n(), a.n())?;
    for i in 0..a.n() {
        let (cols, vals) = a.row(i);
        for (&c, &v) in cols.iter().zip(vals).filter(|(&c, _)| keep(i, c)) {
            writeln!(w, "{} {} {v:.16e}", i + 1, c + 1)?;
        }
    }
    w.flush()
}

#[cfg(test)]
// Tests write their fixtures directly, not through a caller's output module.
#[allow(clippy::disallowed_methods)]
pub(super) mod tests {
    use super::*;

    /// [`write_matrix`] into a new file at `path`.
    pub(in crate::sparse) fn write_file(
        path: &Path,
        a: &Csr,
        symmetric: bool,
    ) -> std::io::Result<()> {
        write_matrix(std::fs::File::create(path)?, a, symmetric)
    }

    /// A file holding `text`, removed when dropped.
    struct File(PathBuf);

    impl File {
        fn new(name: &str, text: &str) -> File {
            // Tests run in parallel: a number of its own for every file.
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p =
                std::env::temp_dir().join(format!("aiac-mtx-{}-{k}-{name}", std::process::id()));
            std::fs::write(&p, text).unwrap();
            File(p)
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    const GIB: u64 = 1 << 30;

    fn matrix(text: &str) -> Result<(Csr, MatrixKind), MatrixError> {
        let f = File::new("m.mtx", text);
        read_matrix(&f.0, GIB)
    }

    #[test]
    fn a_general_matrix_reads_as_written() {
        let (a, kind) = matrix(
            "%%MatrixMarket matrix coordinate real general\n\
             % a comment\n\
             \n\
             3 3 5\n\
             1 1 4.0\n\
             1 3 -1e0\n\
             2 2 3\n\
             3 1 -2.5\n\
             3 3 5.0\n",
        )
        .unwrap();
        assert_eq!(kind, MatrixKind::General);
        assert_eq!((a.n(), a.nnz()), (3, 5));
        assert_eq!(a.get(0, 2), -1.0);
        assert_eq!(a.get(2, 0), -2.5);
        assert_eq!(a.get(1, 0), 0.0);
        assert!(!a.is_symmetric());
    }

    #[test]
    fn symmetric_files_are_expanded() {
        let (a, kind) = matrix(
            "%%MatrixMarket matrix coordinate integer symmetric\n\
             3 3 4\n1 1 2\n2 1 -1\n2 2 2\n3 3 2\n",
        )
        .unwrap();
        assert_eq!(kind, MatrixKind::Symmetric);
        assert_eq!(a.nnz(), 5);
        assert_eq!((a.get(0, 1), a.get(1, 0)), (-1.0, -1.0));
        assert!(a.is_symmetric());
        let (s, _) =
            matrix("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3.5\n")
                .unwrap();
        assert_eq!((s.get(1, 0), s.get(0, 1)), (3.5, -3.5));
    }

    /// Every kind of malformed matrix file: its text, the line of the fault, and a phrase of
    /// the error.
    pub(in super::super) fn bad_matrix_files() -> Vec<(String, Option<usize>, &'static str)> {
        let h = "%%MatrixMarket matrix coordinate real general\n";
        vec![
            ("".to_string(), Some(0), "empty file"),
            ("hello\n".to_string(), Some(1), "not a Matrix Market file"),
            (
                "%%MatrixMarket matrix coordinate\n".to_string(),
                Some(1),
                "the header must be",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern general\n".to_string(),
                Some(1),
                "pattern",
            ),
            (
                "%%MatrixMarket matrix coordinate complex general\n".to_string(),
                Some(1),
                "complex",
            ),
            (
                "%%MatrixMarket matrix coordinate real hermitian\n".to_string(),
                Some(1),
                "hermitian",
            ),
            (
                "%%MatrixMarket matrix array real general\n".to_string(),
                Some(1),
                "dense",
            ),
            (h.to_string(), Some(1), "no size line"),
            (format!("{h}2 3 1\n1 1 1\n"), Some(2), "not square"),
            (format!("{h}2 x 1\n"), Some(2), "not a whole number"),
            (format!("{h}2 2\n"), Some(2), "ROWS COLUMNS ENTRIES"),
            (format!("{h}2 2 3\n1 1 1\n2 2 1\n"), Some(4), "truncated"),
            (format!("{h}2 2 1\n1 1 1\n2 2 1\n"), Some(4), "more entries"),
            (
                format!("{h}2 2 1\n3 1 1\n"),
                Some(3),
                "the row 3 is outside 1 to 2",
            ),
            (format!("{h}2 2 1\n1 0 1\n"), Some(3), "the column 0"),
            (format!("{h}2 2 1\n1 1 nan\n"), Some(3), "not finite"),
            (format!("{h}2 2 1\n1 1 inf\n"), Some(3), "not finite"),
            (format!("{h}2 2 1\n1 1 1e999\n"), Some(3), "not finite"),
            (format!("{h}2 2 1\n1 1 one\n"), Some(3), "not a number"),
            (format!("{h}2 2 1\n1 1\n"), Some(3), "ROW COLUMN VALUE"),
            (
                "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n".to_string(),
                Some(3),
                "lower triangle",
            ),
            (
                "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n".to_string(),
                Some(3),
                "strict lower triangle",
            ),
            (format!("{h}0 0 0\n"), Some(2), "outside 1 to"),
        ]
    }

    /// Every malformed file: an error naming the file, the line, and what is wrong.
    #[test]
    fn bad_files_name_the_line_and_the_fault() {
        for (text, line, says) in bad_matrix_files() {
            let text = text.as_str();
            let e = matrix(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.why.contains(says), "{text:?}: {e}");
            assert!(e.to_string().contains("aiac-mtx-"), "names the file: {e}");
        }
        let e = read_matrix(Path::new("/nonexistent.mtx"), GIB).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent.mtx: "), "{e}");
        let e = read_matrix(Path::new("/"), GIB).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let bin = File::new("bin.mtx", "");
        std::fs::write(
            &bin.0,
            b"%%MatrixMarket matrix coordinate real general\n\xff\xfe\n",
        )
        .unwrap();
        let e = read_matrix(&bin.0, GIB).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.why.contains("invalid UTF-8"), "{e}");
    }

    /// Bytes from memory, as a [`Source`]: a header, then `fill` repeated `times` over.
    struct Endless {
        head: &'static [u8],
        fill: u8,
        times: u64,
    }

    impl Source for Endless {
        fn path(&self) -> &Path {
            Path::new("endless.mtx")
        }
        fn open(&self) -> std::io::Result<Box<dyn Read>> {
            let fill = std::io::repeat(self.fill).take(self.times);
            Ok(Box::new(self.head.chain(fill)))
        }
    }

    /// A line is read up to [`MAX_LINE`] bytes and no further: NUL bytes or digits without a
    /// newline (a binary file, a zero device: endless here) are refused on their line after
    /// 1 MiB, not read whole; a line of exactly [`MAX_LINE`] bytes is read.
    #[test]
    fn a_line_past_the_bound_is_refused_not_read_whole() {
        let head = b"%%MatrixMarket matrix coordinate real general\n";
        for (fill, line) in [(0u8, 2), (b'7', 2)] {
            let src = Endless {
                head,
                fill,
                times: u64::MAX,
            };
            let e = read_matrix(&src, GIB).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.why.contains("longer than 1048576 bytes"), "{e}");
            let e = read_vector(&src, 3).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.why.contains("longer than"), "{e}");
            let e = crate::sparse::read_block(&src, GIB, 2, 1).unwrap_err();
            assert!(e.why.contains("longer than"), "{e}");
        }
        // Not even the header's line is read whole.
        let src = Endless {
            head: b"",
            fill: b'%',
            times: u64::MAX,
        };
        assert_eq!(read_matrix(&src, GIB).unwrap_err().line, Some(1));
        // A comment line of exactly MAX_LINE bytes (its newline included) is a line.
        let mut text = String::from("%%MatrixMarket matrix coordinate real general\n%");
        text.push_str(&" ".repeat(MAX_LINE - 2));
        text.push_str("\n1 1 1\n1 1 2\n");
        let (a, _) = matrix(&text).unwrap();
        assert_eq!(a.get(0, 0), 2.0);
        // One byte more is refused.
        let text = text.replacen("% ", "%  ", 1);
        assert_eq!(matrix(&text).unwrap_err().line, Some(2));
    }

    /// A size line announcing more than fits is refused before anything is allocated (a
    /// file of several GB, or one that only claims to be).
    #[test]
    fn a_matrix_past_memory_is_refused_from_its_size_line() {
        let e = matrix(
            "%%MatrixMarket matrix coordinate real general\n100000000 100000000 9000000000\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.why.contains("more than the 1.0 GiB available"), "{e}");
    }

    #[test]
    fn vectors_array_and_coordinate() {
        let f = File::new(
            "b.mtx",
            "%%MatrixMarket matrix array real general\n3 1\n1\n-2.5\n3e1\n",
        );
        assert_eq!(read_vector(&f.0, 3).unwrap(), [1.0, -2.5, 30.0]);
        let e = read_vector(&f.0, 4).unwrap_err();
        assert!(e.why.contains("3 rows, the matrix 4"), "{e}");
        let f = File::new(
            "c.mtx",
            "%%MatrixMarket matrix coordinate real general\n3 1 2\n3 1 7\n1 1 1\n",
        );
        assert_eq!(read_vector(&f.0, 3).unwrap(), [1.0, 0.0, 7.0]);
        let f = File::new(
            "d.mtx",
            "%%MatrixMarket matrix array real general\n3 1\n1\n2\n",
        );
        assert!(read_vector(&f.0, 3).unwrap_err().why.contains("truncated"));
        let f = File::new(
            "e.mtx",
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n",
        );
        assert!(read_vector(&f.0, 2).unwrap_err().why.contains("one column"));
    }

    /// Every generated operator, written and read back, is the same matrix, bit for bit;
    /// symmetric ones also through a `symmetric` file, which holds one triangle.
    #[test]
    fn written_matrices_read_back_exactly() {
        use super::super::generate::*;
        for (name, a) in [
            ("laplace", laplace_3d(4, 3, 5)),
            ("aniso", anisotropic_2d(7, 0.01)),
            ("jump", jump_3d(6, 1000.0)),
            ("convdiff", convection_diffusion_2d(7, 2.3)),
        ] {
            let f = File::new(&format!("{name}.mtx"), "");
            write_file(&f.0, &a, false).unwrap();
            assert_eq!(
                read_matrix(&f.0, GIB).unwrap(),
                (a.clone(), MatrixKind::General),
                "{name}"
            );
            if a.is_symmetric() {
                write_file(&f.0, &a, true).unwrap();
                let text = std::fs::read_to_string(&f.0).unwrap();
                let stored = text.lines().nth(1).unwrap().split(' ').nth(2).unwrap();
                assert_eq!(
                    stored.parse::<usize>().unwrap(),
                    (a.nnz() + a.n()) / 2,
                    "{name}"
                );
                assert_eq!(
                    read_matrix(&f.0, GIB).unwrap(),
                    (a, MatrixKind::Symmetric),
                    "{name}"
                );
            } else {
                let e = write_file(&f.0, &a, true).unwrap_err();
                assert!(e.to_string().contains("not symmetric"), "{e}");
            }
        }
    }
}
