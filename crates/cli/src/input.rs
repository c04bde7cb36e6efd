//! Input files: every file a subcommand reads is opened here (crates/cli/clippy.toml refuses
//! the same calls elsewhere), and only a regular file is opened.
//!
//! * A path must name a regular file, through its symlinks: checked before it is opened (a
//!   FIFO's open waits for a writer, and both ranks of a job waited for ever; a device such
//!   as `/dev/zero` never ends), and again on the descriptor, opened without waiting, so
//!   that a FIFO put in its place between the two is refused too. No input is read from
//!   standard input.
//! * What is read is bounded. A Matrix Market file is streamed a line at a time (jacobi's
//!   reader, through [`MatrixFile`]), each line at most [`jacobi::sparse::MAX_LINE`] bytes,
//!   its size costing time but no memory beyond what its size line announces (which the
//!   reader checks against the memory available). A JSON file (a report, a hash table's
//!   rows) is parsed whole: at most [`MAX_JSON`] bytes, and only if the memory available
//!   holds it parsed.
//! * An input is never an output of the same command: [`crate::output::check_distinct`]
//!   compares every output with every input, as files (device and inode), not as names.

// The one module that opens files for reading (crates/cli/clippy.toml refuses the same
// calls elsewhere).
#![allow(clippy::disallowed_methods)]

use crate::error::Error;
use std::io::Read;
use std::path::Path;

/// The largest JSON file read, in bytes: 4 GiB. A run's report holds per rank at most
/// about 350 KB of pretty-printed JSON (a history thinned to 4097 points of about 80 bytes,
/// and its channels' histograms), so this is the report of a run of some 12 000 ranks; a
/// sweep's records and the hash table's rows are far smaller. A larger file is refused
/// without being read (see also [`JSON_MEMORY`]).
pub(crate) const MAX_JSON: u64 = 4 << 30;

/// The memory a JSON file takes once read and parsed, per byte of the file: its text, the
/// tree parsed from it (`serde_json::Value`) and the typed report built from the tree.
/// Measured with `aiac report` on reports of 1.9 MB and 4.7 MB: 3.8 and 2.7 times the file
/// (the process's peak resident set less its 16 MB without a report). A file is read only if
/// this many times its size is available.
pub(crate) const JSON_MEMORY: u64 = 4;

/// The most read of a file of the kernel's (/proc, /sys): 1 MiB (`/proc/meminfo` is 1.5 KB,
/// `/proc/PID/stat` under 1 KB).
const MAX_KERNEL_FILE: u64 = 1 << 20;

/// What kind of thing a file that is neither regular nor a directory is, for messages.
pub(crate) fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Why `path` cannot be read as an input, without opening it: it must name (through its
/// symlinks) a regular file.
fn why_not(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => None,
        Ok(m) => Some(format!("is {}, not a regular file", kind_of(&m))),
        Err(_) if path.is_symlink() => Some(match std::fs::read_link(path) {
            Ok(to) => format!("a symlink to {}, which cannot be followed", to.display()),
            Err(_) => "a symlink to nothing".to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("no such file or directory".to_string())
        }
        Err(e) => Some(e.to_string()),
    }
}

/// Fail, naming `flag`, unless `path` names a regular file (checked without opening it: a
/// FIFO or a device is refused before anything waits on it).
pub(crate) fn check(flag: &'static str, path: &Path) -> Result<(), Error> {
    match why_not(path) {
        None => Ok(()),
        Some(why) => Err(Error::Input {
            flag,
            path: path.to_path_buf(),
            why,
        }),
    }
}

/// Open the regular file `path` for reading: refused before opening when it is not one, and
/// after, on the descriptor opened without waiting (`O_NONBLOCK`: a FIFO put there in between
/// opens at once, and is refused), so that no open or read waits on a writer.
pub(crate) fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(why) = why_not(path) {
        return Err(std::io::Error::other(why));
    }
    // O_NONBLOCK changes nothing for a regular file's reads (they never wait on a writer);
    // O_NOCTTY: a terminal put there does not become this process's.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!(
            "is {}, not a regular file",
            kind_of(&m)
        )));
    }
    Ok(file)
}

/// A Matrix Market file named on the command line, for jacobi's reader: opened through
/// [`open`] (a regular file only), every time the reader opens it.
pub(crate) struct MatrixFile<'a>(pub(crate) &'a Path);

impl jacobi::sparse::Source for MatrixFile<'_> {
    fn path(&self) -> &Path {
        self.0
    }

    fn open(&self) -> std::io::Result<Box<dyn Read>> {
        Ok(Box::new(open(self.0)?))
    }
}

/// The whole of the JSON file `path`: a regular file of at most `limit` bytes (normally
/// [`MAX_JSON`]) whose parse fits in the memory available ([`JSON_MEMORY`] times its size).
/// The error says why not, without the path (the caller names it).
pub(crate) fn read_json(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use jacobi::human_bytes;
    let file = open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len > limit {
        return Err(format!(
            "is {}, more than the {} a JSON file is read up to",
            human_bytes(len),
            human_bytes(limit)
        ));
    }
    if let Some(available) = crate::args::mem_available() {
        let need = len.saturating_mul(JSON_MEMORY);
        if need > available {
            return Err(format!(
                "reading it needs about {} ({}, parsed), more than the {} available",
                human_bytes(need),
                human_bytes(len),
                human_bytes(available)
            ));
        }
    }
    // A file that grows while it is read stops at the bound, and is refused.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "grew past {} while it was read",
            human_bytes(limit)
        ));
    }
    Ok(bytes)
}

/// The last `limit` bytes (at most) of this command's own file `path` (a child job's log,
/// which it created), as text; empty when it cannot be read.
pub(crate) fn read_tail(path: &Path, limit: u64) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut file) = open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > limit && file.seek(SeekFrom::Start(len - limit)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(limit).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A file of the kernel's (`/proc/meminfo`, `/proc/PID/stat`, under /proc or /sys), at most
/// 1 MiB of it. They are regular files whose size reads as 0: read up to the bound.
pub(crate) fn read_kernel_file(path: &Path) -> std::io::Result<String> {
    debug_assert!(path.starts_with("/proc") || path.starts_with("/sys"));
    let mut text = String::new();
    open(path)?
        .take(MAX_KERNEL_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("aiac-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// FIFOs, devices, directories, sockets and dangling symlinks are refused without being
    /// opened (a FIFO nobody writes would block the open); a symlink to a regular file is
    /// read through.
    #[test]
    fn only_regular_files_are_opened() {
        let d = scratch("regular");
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = d.join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
        let sock = d.join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for (p, says) in [
            (fifo.as_path(), "a FIFO"),
            (link.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (d.as_path(), "a directory"),
            (sock.as_path(), "a socket"),
            (dangling.as_path(), "a symlink to nowhere"),
            (&d.join("absent"), "no such file"),
        ] {
            let e = open(p).unwrap_err().to_string();
            assert!(e.contains(says), "{p:?}: {e}");
            let e = check("--matrix", p).unwrap_err().to_string();
            assert!(e.starts_with("--matrix ") && e.contains(says), "{p:?}: {e}");
        }
        let file = d.join("file");
        std::fs::write(&file, "text").unwrap();
        let to_file = d.join("to-file");
        std::os::unix::fs::symlink("file", &to_file).unwrap();
        assert!(check("--rhs", &to_file).is_ok());
        assert_eq!(read_json(&to_file, MAX_JSON).unwrap(), b"text");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A JSON file past the bound is refused from its size, without being read (a sparse
    /// file: no bytes on disk); one at the bound is read whole.
    #[test]
    fn json_files_are_bounded() {
        let d = scratch("json");
        let f = d.join("big.json");
        std::fs::write(&f, "[1, 2]").unwrap();
        assert_eq!(read_json(&f, 6).unwrap(), b"[1, 2]");
        let e = read_json(&f, 5).unwrap_err();
        assert!(e.contains("more than the 5 B"), "{e}");
        let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        file.set_len(MAX_JSON + 1).unwrap();
        let e = read_json(&f, MAX_JSON).unwrap_err();
        assert!(e.contains("more than the 4.0 GiB"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_log_is_read_from_its_tail() {
        let d = scratch("tail");
        let f = d.join("log");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read_tail(&f, 4), "6789");
        assert_eq!(read_tail(&f, 100), "0123456789");
        assert_eq!(read_tail(&d.join("absent"), 4), "");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
