//! Output files: checked before any work, written whole or not at all.

use crate::run::RunError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory a file goes in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The temporary file [`write_atomically`] writes `path` through.
fn temp_path(path: &Path) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    Ok(parent_dir(path).join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Write to a temporary file beside `path`, flush it to disk, rename it over `path`: readers
/// see the old file or the whole new one, never a half-written one.
pub fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path)?;
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    tracing::debug!(path = %path.display(), bytes = data.len(), ok = result.is_ok(), "wrote");
    result
}

/// Fail before any work if a file could not be written at `path`: it must not be a directory,
/// its directory must exist, and a file must be creatable there (tried with the temporary
/// file the write will use, removed at once).
pub fn check_file(flag: &'static str, path: &Path) -> Result<(), RunError> {
    let bad = |why: String| RunError::Output {
        flag,
        path: path.to_path_buf(),
        why,
    };
    if path.is_dir() {
        return Err(bad("is a directory".into()));
    }
    if path.file_name().is_none() {
        return Err(bad("names no file".into()));
    }
    let dir = parent_dir(path);
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
    }
    let tmp = temp_path(path).map_err(|e| bad(e.to_string()))?;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(bad(format!("cannot write in {}: {e}", dir.display()))),
    }
}

/// Fail before any work if `dir` cannot hold output: created when missing, must be a
/// directory where files can be created.
pub fn check_dir(flag: &'static str, dir: &Path) -> Result<(), RunError> {
    let bad = |why: String| RunError::Output {
        flag,
        path: dir.to_path_buf(),
        why,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(bad("exists and is not a directory".into()));
    }
    std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create it: {e}")))?;
    check_file(flag, &dir.join(".aiac-probe")).map_err(|_| bad("cannot write in it".into()))
}

/// Several output files of one command must be different files.
pub fn check_distinct(files: &[(&'static str, &Path)]) -> Result<(), RunError> {
    for (i, (fa, a)) in files.iter().enumerate() {
        for (fb, b) in &files[i + 1..] {
            if a == b {
                return Err(RunError::Invalid(format!(
                    "{fa} and {fb} name the same file {}",
                    a.display()
                )));
            }
        }
    }
    Ok(())
}

/// A CSV table built in memory (written atomically as a whole).
#[derive(Debug, Default)]
pub struct Csv {
    text: String,
}

impl Csv {
    /// A table with these column names.
    pub fn new(columns: &[&str]) -> Self {
        let mut c = Csv::default();
        c.row(columns.iter().map(|s| s.to_string()));
        c
    }

    /// Append one row (fields quoted when they hold a comma, quote or newline).
    pub fn row<I: IntoIterator<Item = String>>(&mut self, fields: I) {
        let mut first = true;
        for f in fields {
            if !first {
                self.text.push(',');
            }
            first = false;
            if f.contains([',', '"', '\n']) {
                self.text.push('"');
                self.text.push_str(&f.replace('"', "\"\""));
                self.text.push('"');
            } else {
                self.text.push_str(&f);
            }
        }
        self.text.push('\n');
    }

    /// The whole table.
    pub fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// A number for a CSV cell: empty when absent.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}
