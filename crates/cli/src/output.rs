//! Output files: checked before any work, written whole or not at all.

// The one module that writes files (crates/cli/clippy.toml refuses the same calls elsewhere).
#![allow(clippy::disallowed_methods)]

use crate::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory a file goes in (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The temporary file [`write_atomically`] writes `path` through: `.NAME.tmp-PID` beside it.
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

/// The process id in a temporary file's name `.NAME.tmp-PID`, if it is one.
fn temp_pid(name: &str) -> Option<i32> {
    let (head, pid) = name.rsplit_once(".tmp-")?;
    if !head.starts_with('.') || head.len() < 2 || pid.is_empty() {
        return None;
    }
    if !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

/// Whether process `pid` exists (on this machine): `kill(pid, 0)` fails with ESRCH only when
/// it does not.
fn alive(pid: i32) -> bool {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    !matches!(
        kill(Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Remove the temporary files that writers which no longer exist left in `dir` (killed by
/// SIGKILL, or a crash, in the middle of a write): `.NAME.tmp-PID` regular files whose PID is
/// not a running process. A writer on another machine sharing the directory is not seen by
/// `kill`: its temporary file lives for the milliseconds of one write.
pub(crate) fn clean_stale_temps(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id() as i32;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = temp_pid(&name.to_string_lossy()) else {
            continue;
        };
        let regular = e.file_type().is_ok_and(|t| t.is_file());
        if regular && pid != me && !alive(pid) {
            tracing::debug!(file = %e.path().display(), pid, "removing a dead writer's temporary file");
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A fresh working directory `PREFIX-PID` in the temporary directory for this process's child
/// jobs (their logs and reports), after removing those that processes which no longer run
/// left there (killed outright: no handler ran to remove them).
pub(crate) fn job_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let tmp = std::env::temp_dir();
    if let Ok(rd) = std::fs::read_dir(&tmp) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('-'))
                .filter(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|r| r.parse::<i32>().ok())
            else {
                continue;
            };
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            if dir && pid > 0 && !alive(pid) {
                tracing::debug!(dir = %e.path().display(), pid, "removing a dead job's directory");
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = tmp.join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Where the bytes of an output path go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// `-`, `/dev/stdout` or `/dev/fd/1`: this process's standard output.
    Stdout,
    /// `/dev/stderr`, `/dev/fd/2`.
    Stderr,
    /// Not a regular file (a device such as `/dev/null` or `/dev/full`, a FIFO, a socket;
    /// any other descriptor alias under `/dev/fd` or `/proc`): written in place, never
    /// replaced.
    InPlace(PathBuf),
    /// A regular file, or nothing yet, at this path (the end of any symlinks): written
    /// through a temporary file renamed over it.
    Regular(PathBuf),
}

/// Symlinks followed before giving up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Follow `path` to what is written: through symlinks to their final target, so that a link
/// stays a link and the file it names is replaced; special files and descriptor aliases
/// are written in place.
fn resolve(path: &Path) -> std::io::Result<Target> {
    use std::io::{Error, ErrorKind};
    if path.as_os_str() == "-" {
        return Ok(Target::Stdout);
    }
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        for (alias, target) in [
            ("/dev/stdout", Target::Stdout),
            ("/dev/fd/1", Target::Stdout),
            ("/proc/self/fd/1", Target::Stdout),
            ("/dev/stderr", Target::Stderr),
            ("/dev/fd/2", Target::Stderr),
            ("/proc/self/fd/2", Target::Stderr),
        ] {
            if p == Path::new(alias) {
                return Ok(target);
            }
        }
        // Other descriptors, and anything under /proc, are what they are: no temporary
        // file beside them, no rename.
        if p.starts_with("/proc") || p.starts_with("/dev/fd") {
            return Ok(Target::InPlace(path.to_path_buf()));
        }
        match std::fs::symlink_metadata(&p) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Target::Regular(p)),
            Err(e) => return Err(e),
            Ok(m) if m.file_type().is_symlink() => {
                let t = std::fs::read_link(&p)?;
                p = if t.is_absolute() {
                    t
                } else {
                    parent_dir(&p).join(t)
                };
            }
            Ok(m) if m.is_file() => return Ok(Target::Regular(p)),
            Ok(m) if m.is_dir() => return Err(Error::from(ErrorKind::IsADirectory)),
            Ok(_) => return Ok(Target::InPlace(p)),
        }
    }
    Err(Error::other("too many levels of symbolic links"))
}

/// How long a write waits for a process to open a FIFO for reading.
const FIFO_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Write `data` to a special file in place: a device, a FIFO (waiting at most [`FIFO_WAIT`]
/// for a reader, never forever), a descriptor alias. A write error (ENOSPC on `/dev/full`,
/// EPIPE) is returned.
fn write_in_place(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = std::time::Instant::now() + FIFO_WAIT;
    let mut f = loop {
        // O_NONBLOCK: opening a FIFO nobody reads fails (ENXIO) instead of blocking.
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if std::time::Instant::now() >= deadline {
                    return Err(std::io::Error::other(format!(
                        "no process opened it for reading within {} s",
                        FIFO_WAIT.as_secs()
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    };
    // Blocking writes from here on: a reader that is slow gets everything.
    {
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        // SAFETY: fcntl on a descriptor this function owns (open above), with valid
        // commands; errors are checked.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    f.write_all(data)?;
    f.flush()
}

/// Write `data` to `path`:
///
/// * a regular file (or a new one) is written to a temporary file beside it, flushed to disk
///   and renamed over it: readers see the old file or the whole new one, never a half-written
///   one. Through a symlink, the link's final target is the file replaced (the link stays).
///   A SIGINT or SIGTERM during the write removes the temporary file (see
///   [`crate::signals`]); temporary files of writers that died are removed afterwards.
/// * `-` and `/dev/stdout` are standard output; a device, FIFO or descriptor alias is
///   written in place: never renamed over, never replaced by a regular file.
///
/// A write error (`/dev/full`: no space left on device) is an error.
pub(crate) fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let result = match resolve(path)? {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(data).and_then(|()| out.flush())
        }
        Target::Stderr => {
            let mut out = std::io::stderr().lock();
            out.write_all(data).and_then(|()| out.flush())
        }
        Target::InPlace(p) => write_in_place(&p, data),
        Target::Regular(p) => replace_file(&p, data),
    };
    tracing::debug!(path = %path.display(), bytes = data.len(), ok = result.is_ok(), "wrote");
    result
}

/// Test hook: milliseconds to pause between writing the temporary file and renaming it, so
/// the tests can signal a write in progress (`AIAC_TEST_PAUSE_IN_WRITE_MS`).
fn test_pause() {
    if let Some(ms) = std::env::var("AIAC_TEST_PAUSE_IN_WRITE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

/// The atomic replacement of the regular file (or nothing) at `path`.
fn replace_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path)?;
    let guard = crate::signals::TempGuard::new(&tmp);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        // A replaced file keeps its permissions.
        if let Ok(m) = std::fs::metadata(path) {
            f.set_permissions(m.permissions())?;
        }
        f.write_all(data)?;
        f.sync_all()?;
        test_pause();
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drop(guard);
    clean_stale_temps(parent_dir(path));
    result
}

/// Fail before any work if a file could not be written at `path`: through its symlinks, it
/// must not be a directory; a special file must exist and be writable; for a regular file
/// its directory must exist and a file must be creatable there (tried with the temporary
/// file the write will use, removed at once).
pub(crate) fn check_file(flag: &'static str, path: &Path) -> Result<(), Error> {
    let bad = |why: String| Error::Output {
        flag,
        path: path.to_path_buf(),
        why,
    };
    let target = match resolve(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            return Err(bad("is a directory".into()))
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    let file = match target {
        Target::Stdout | Target::Stderr => return Ok(()),
        Target::InPlace(p) => {
            let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
                .map_err(|e| bad(e.to_string()))?;
            // SAFETY: access reads a NUL-terminated path that lives across the call.
            return match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
                0 => Ok(()),
                _ => Err(bad(format!(
                    "cannot be written: {}",
                    std::io::Error::last_os_error()
                ))),
            };
        }
        Target::Regular(p) => p,
    };
    if file.file_name().is_none() {
        return Err(bad("names no file".into()));
    }
    let dir = parent_dir(&file);
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
    }
    // A probe of its own name (not the write's temporary file), removed at once.
    let probe = parent_dir(&file).join(format!(
        ".{}.probe-{}",
        file.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let guard = crate::signals::TempGuard::new(&probe);
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    if created.is_ok() {
        let _ = std::fs::remove_file(&probe);
    }
    drop(guard);
    match created {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(bad(format!("cannot write in {}: {e}", dir.display()))),
    }
}

/// Fail before any work if `dir` cannot hold output: created when missing, must be a
/// directory where files can be created.
pub(crate) fn check_dir(flag: &'static str, dir: &Path) -> Result<(), Error> {
    let bad = |why: String| Error::Output {
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

/// What a regular output file is, however it is spelled: its device and inode when it exists,
/// else its directory's canonical path and its name (`same.json`, `./same.json` and
/// `/abs/dir/same.json` are one file).
#[derive(Debug, PartialEq)]
enum Identity {
    Inode(u64, u64),
    Path(PathBuf),
    Other(Target),
}

fn identity(t: Target) -> Identity {
    use std::os::unix::fs::MetadataExt;
    match t {
        Target::Regular(p) => match std::fs::metadata(&p) {
            Ok(m) => Identity::Inode(m.dev(), m.ino()),
            Err(_) => {
                let dir = parent_dir(&p);
                let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                Identity::Path(match p.file_name() {
                    Some(name) => dir.join(name),
                    None => p,
                })
            }
        },
        other => Identity::Other(other),
    }
}

/// What an input file is: its device and inode (through its symlinks), or, when it cannot be
/// found, its canonical directory and name. A name is a file's name here: `-` is a file
/// named `-`, not standard input.
fn input_identity(path: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Identity::Inode(m.dev(), m.ino()),
        Err(_) => identity(Target::Regular(path.to_path_buf())),
    }
}

/// The output files of one command must be different files, and none may be one of the
/// files it reads (`inputs`): after following symlinks, compared by device and inode, or by
/// canonical directory and name for a file that does not exist yet (`-` and `/dev/stdout`
/// are the same output). A device named twice (`/dev/null`) is allowed. Inputs may name one
/// file twice: reading it twice harms nothing.
pub(crate) fn check_distinct(
    outputs: &[(&'static str, &Path)],
    inputs: &[(&'static str, &Path)],
) -> Result<(), Error> {
    let target =
        |p: &Path| identity(resolve(p).unwrap_or_else(|_| Target::Regular(p.to_path_buf())));
    let outs: Vec<Identity> = outputs.iter().map(|(_, p)| target(p)).collect();
    for (i, (fa, a)) in outputs.iter().enumerate() {
        let ta = &outs[i];
        if matches!(ta, Identity::Other(Target::InPlace(_))) {
            continue;
        }
        for ((fb, b), tb) in outputs[i + 1..].iter().zip(&outs[i + 1..]) {
            if ta == tb {
                return Err(Error::Invalid(format!(
                    "{fa} and {fb} name the same file {}",
                    b.display()
                )));
            }
        }
        for (fi, p) in inputs {
            if *ta == input_identity(p) {
                return Err(Error::Invalid(format!(
                    "{fa} {} would overwrite the input {fi} {} (the same file): give the \
                     output another name",
                    a.display(),
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

/// A CSV table built in memory (written atomically as a whole).
#[derive(Debug, Default)]
pub(crate) struct Csv {
    text: String,
}

impl Csv {
    /// A table with these column names.
    pub(crate) fn new(columns: &[&str]) -> Self {
        let mut c = Csv::default();
        c.row(columns.iter().map(|s| s.to_string()));
        c
    }

    /// Append one row (fields quoted when they hold a comma, quote or newline).
    pub(crate) fn row<I: IntoIterator<Item = String>>(&mut self, fields: I) {
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
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// A number for a CSV cell: empty when absent.
pub(crate) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// Create (or truncate) `path` for a child job's log: the file `aiac sweep` and `aiac dht -t`
/// give a job's standard output and error. Its directory is the command's own (checked, or
/// made by it), so none of an output's checks apply.
pub(crate) fn create_log(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

/// The lock file in a directory that one command at a time writes into.
const DIR_LOCK: &str = ".aiac-lock";

/// Hold `dir` for this command alone: an exclusive POSIX record lock (`fcntl(F_SETLK)`) on
/// `dir/.aiac-lock`, kept while the returned file is open and released by the kernel when the
/// process ends however it ends (so a killed sweep never leaves the directory locked). Another
/// command that holds it (a second `aiac sweep --out DIR`, or `aiac report --out DIR` while a
/// sweep writes there): refused, with its process id (`F_GETLK`).
pub(crate) fn lock_dir(flag: &'static str, dir: &Path) -> Result<std::fs::File, Error> {
    use std::os::fd::AsRawFd;
    let path = dir.join(DIR_LOCK);
    let bad = |why: String| Error::Output {
        flag,
        path: dir.to_path_buf(),
        why,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| bad(format!("cannot create its lock {DIR_LOCK}: {e}")))?;
    // A write lock on the whole file (a length of 0 reaches to its end, whatever it grows to).
    let mut lock = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    // SAFETY: `file` is open for the whole call, so its descriptor is valid; `lock` is a
    // fully initialised `struct flock` that lives across the call, and F_SETLK only reads it.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) } == 0 {
        return Ok(file);
    }
    let err = std::io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
        return Err(bad(format!("cannot lock {DIR_LOCK}: {err}")));
    }
    // SAFETY: as above; F_GETLK writes the holder's description into `lock`, which is ours
    // and large enough (a `struct flock`).
    let holder = match unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) } {
        0 if lock.l_type != libc::F_UNLCK as libc::c_short => {
            format!(" (process {})", lock.l_pid)
        }
        _ => String::new(),
    };
    Err(bad(format!(
        "is in use by another aiac command{holder} writing there: wait for it to end, or \
         choose another directory"
    )))
}
