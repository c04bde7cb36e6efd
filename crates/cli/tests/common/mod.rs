//! Helpers shared by the cli integration tests: running the built binary under a deadline,
//! scratch directories, and looking at processes through /proc. Each test binary uses a
//! subset, hence the `dead_code` allowance.
#![allow(dead_code)]
// Tests read /proc and the files aiac wrote directly, not through aiac's input module.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const AIAC: &str = env!("CARGO_BIN_EXE_aiac");

/// Run `cmd`, killed (and the test failed) after `secs`.
pub fn within(mut cmd: Command, secs: u64) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aiac starts");
    finish(child, secs, &format!("{cmd:?}"))
}

/// Collect a piped child's output, killing it (and failing) after `secs`.
pub fn finish(mut child: Child, secs: u64, what: &str) -> Output {
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// `aiac ARGS`, killed (and the test failed) after two minutes.
pub fn aiac(args: &[&str]) -> Output {
    let mut c = Command::new(AIAC);
    c.args(args);
    within(c, 120)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh, empty directory for one test, named after the test binary and this process;
/// removed when the test that made it passes (kept for a look when it fails).
pub fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!(
        "aiac-{}-{}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// A test's scratch directory ([`scratch`]): a path while it lives.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The names of the entries of `dir` (none if it cannot be read).
pub fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The processes whose parent is `pid`, and theirs.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        let Ok(rd) = std::fs::read_dir("/proc") else {
            break;
        };
        for e in rd.flatten() {
            let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the fields after the last ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if ppid == Some(p) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Running (not gone, not a zombie: a zombie has been reaped by nobody yet; it runs nothing).
pub fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string));
    !matches!(state.as_deref(), None | Some("Z") | Some("X"))
}

/// The value of `var` in the environment `pid` started with.
pub fn env_of(pid: u32, var: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        let (k, v) = kv.split_once('=')?;
        (k == var).then(|| v.to_string())
    })
}

/// Whether `pid` has a handler installed for signal number `sig` (/proc's SigCgt).
pub fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// Those of `pids` still running after `secs` seconds (waiting less when all have ended).
pub fn outliving(pids: &[u32], secs: u64) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop what a failed test left running: SIGTERM (a launcher cleans up on it), SIGKILL to
/// those still running two seconds later.
pub fn stop_all(pids: &[u32]) {
    use nix::sys::signal::{kill, Signal};
    let pid = |p: u32| nix::unistd::Pid::from_raw(p as i32);
    for &p in pids {
        let _ = kill(pid(p), Signal::SIGTERM);
    }
    for p in outliving(pids, 2) {
        let _ = kill(pid(p), Signal::SIGKILL);
    }
}

/// The files in /dev/shm that `pids` have mapped (shared-memory segments).
pub fn shm_segments(pids: &[u32]) -> BTreeSet<PathBuf> {
    pids.iter()
        .flat_map(|p| {
            let maps = std::fs::read_to_string(format!("/proc/{p}/maps")).unwrap_or_default();
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5).map(PathBuf::from))
                .filter(|f| f.starts_with("/dev/shm/"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The 5-point Laplacian of an m × m grid plus a coefficient that varies by row (SPD), as
/// `(row, column, value)` triplets from 0, each row's diagonal first.
pub fn spd_triplets(m: usize) -> Vec<(usize, usize, f64)> {
    let mut t = Vec::new();
    for y in 0..m {
        for x in 0..m {
            let i = y * m + x;
            t.push((i, i, 4.0 + (i % 5) as f64 * 0.25));
            for (ok, j) in [
                (x > 0, i.wrapping_sub(1)),
                (x + 1 < m, i + 1),
                (y > 0, i.wrapping_sub(m)),
                (y + 1 < m, i + m),
            ] {
                if ok {
                    t.push((i, j, -1.0));
                }
            }
        }
    }
    t
}
