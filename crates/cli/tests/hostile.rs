//! What a hostile user tried (issue 15), each kept fixed: special files and symlinks as
//! outputs, signals during a write and to a sweep, sizes that do not fit in memory, flags
//! outside their ranges, offsets and tolerances f64 cannot honour, conflicting flags, a
//! threads run under a launcher, and reports of broken or repeated files. Every bad input:
//! one message naming the flag and its range, a non-zero exit, nothing overwritten, no hang
//! (every command runs under a deadline).

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{
    aiac, catches, descendants, finish, names_in, outliving, running, scratch, stop_all, text,
    within, AIAC,
};

fn temps_in(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// One message naming every one of `words`, exit code 1, nothing on stdout.
fn refused(args: &[&str], words: &[&str]) {
    let r = aiac(args);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: does not say '{w}': {err}");
    }
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{args:?}: one message: {err}"
    );
    assert!(r.stdout.is_empty(), "{args:?}: printed {}", text(&r.stdout));
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo runs");
    assert!(st.success());
}

/// A small run that converges at once, for the output tests.
const SMALL: [&str; 4] = ["run", "--local", "4", "--quiet"];

fn small_with(extra: &[&str]) -> Output {
    let mut a = SMALL.to_vec();
    a.extend_from_slice(extra);
    aiac(&a)
}

#[test]
fn devices_are_written_in_place_and_never_replaced() {
    let r = small_with(&["--json", "/dev/null", "--csv", "/dev/null"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let t = std::fs::symlink_metadata("/dev/null").unwrap().file_type();
    assert!(t.is_char_device(), "/dev/null is still a device");

    // A write error is an error: /dev/full has no space.
    let r = small_with(&["--json", "/dev/full"]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--json /dev/full") && err.contains("No space left"),
        "{err}"
    );
    assert!(std::fs::symlink_metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());

    // `-` is standard output.
    let r = small_with(&["--json", "-"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let j: Value = serde_json::from_slice(&r.stdout).expect("the report on stdout");
    assert_eq!(j["schema"], jacobi::REPORT_SCHEMA);
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    mkfifo(&fifo);
    let f = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read(f).unwrap());
    let r = small_with(&["--json", fifo.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let got: Value = serde_json::from_slice(&reader.join().unwrap()).expect("JSON through it");
    assert_eq!(got["schema"], jacobi::REPORT_SCHEMA);
    let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(t.is_fifo(), "still a FIFO");
    assert_eq!(names_in(&dir), BTreeSet::from(["pipe".to_string()]));
}

#[test]
fn symlinks_are_written_through() {
    let dir = scratch("links");
    let real = dir.join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let dangling = dir.join("dangling.csv");
    std::os::unix::fs::symlink("new.csv", &dangling).unwrap();
    let r = small_with(&[
        "--json",
        link.to_str().unwrap(),
        "--csv",
        dangling.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    for l in [&link, &dangling] {
        assert!(std::fs::symlink_metadata(l).unwrap().is_symlink(), "{l:?}");
    }
    let j: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
    assert_eq!(
        j["schema"],
        jacobi::REPORT_SCHEMA,
        "the target was replaced"
    );
    assert!(std::fs::read_to_string(dir.join("new.csv"))
        .unwrap()
        .starts_with("rank,"));
    assert!(temps_in(&dir).is_empty());
    // Two names of one file are refused before any work.
    let r = small_with(&[
        "--json",
        link.to_str().unwrap(),
        "--csv",
        real.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    assert!(text(&r.stderr).contains("name the same file"));
    // The same file spelled two ways, existing or not yet: relative and with `./`, absolute
    // and relative (the command runs in `dir`), through a directory's `..`.
    let abs = dir.join("new.csv");
    let up = format!(
        "../{}/fresh.json",
        dir.file_name().unwrap().to_str().unwrap()
    );
    for (json, other, flag) in [
        ("same.json", "./same.json", "--history"),
        (abs.to_str().unwrap(), "new.csv", "--csv"),
        ("fresh.json", up.as_str(), "--csv"),
    ] {
        let mut c = Command::new(AIAC);
        c.current_dir(&dir)
            .args(SMALL)
            .args(["--json", json, flag, other]);
        let r = within(c, 120);
        assert_eq!(
            r.status.code(),
            Some(1),
            "{json} {other}: {}",
            text(&r.stderr)
        );
        assert!(
            text(&r.stderr).contains("name the same file"),
            "{}",
            text(&r.stderr)
        );
    }
    assert!(!dir.join("same.json").exists() && !dir.join("fresh.json").exists());
}

#[test]
fn report_refuses_special_files_without_waiting_on_them() {
    let dir = scratch("report-special");
    let fifo = dir.join("pipe.json");
    mkfifo(&fifo);
    for (f, what) in [
        ("/dev/null", "a character device"),
        (fifo.to_str().unwrap(), "a FIFO"),
    ] {
        let r = aiac(&["report", f]);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{f}: {err}");
        assert!(err.contains(f) && err.contains(what), "{f}: {err}");
        assert!(!err.contains("no such file"), "{f}: {err}");
    }
}

/// A run's report, written by a real run, to build reports from.
fn a_report(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let r = small_with(&["--json", p.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    p
}

/// Rows of `aiac report FILES --out DIR`'s runs.csv (one per run counted).
fn counted(files: &[&str], out: &Path) -> usize {
    let mut a = vec!["report"];
    a.extend_from_slice(files);
    a.extend(["--out", out.to_str().unwrap()]);
    let r = aiac(&a);
    assert_eq!(r.status.code(), Some(0), "{files:?}: {}", text(&r.stderr));
    std::fs::read_to_string(out.join("runs.csv"))
        .unwrap()
        .lines()
        .count()
        - 1
}

#[test]
fn report_skips_broken_files_in_a_directory_and_counts_a_file_once() {
    let dir = scratch("report-broken");
    let runs = dir.join("runs");
    std::fs::create_dir(&runs).unwrap();
    let good = a_report(&runs, "a.json");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(runs.join("b.json"), &bytes[..bytes.len() / 2]).unwrap();
    let r = aiac(&["report", runs.to_str().unwrap()]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(err.contains("skipping") && err.contains("b.json"), "{err}");
    assert!(text(&r.stdout).contains("sync"), "the good run is reported");
    // Named like reports but not files: each skipped with a note saying what it is (a
    // dangling symlink was skipped without a word), a FIFO without waiting on it.
    std::os::unix::fs::symlink(dir.join("gone.json"), runs.join("c.json")).unwrap();
    std::fs::create_dir(runs.join("d.json")).unwrap();
    mkfifo(&runs.join("e.json"));
    // Two links naming each other: a loop, not a link "to a file which does not exist".
    std::os::unix::fs::symlink("f2.json", runs.join("f1.json")).unwrap();
    std::os::unix::fs::symlink("f1.json", runs.join("f2.json")).unwrap();
    let r = aiac(&["report", runs.to_str().unwrap()]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    for (name, what) in [
        ("c.json", "which does not exist"),
        ("d.json", "a directory"),
        ("e.json", "a FIFO"),
        ("f1.json", "a symlink loop"),
        ("f2.json", "a symlink loop"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains("skipping") && l.contains(name) && l.contains(what)),
            "{name}: {err}"
        );
    }
    for name in ["c.json", "d.json", "e.json", "f1.json", "f2.json"] {
        let p = runs.join(name);
        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir(&p));
    }
    // Named on the command line, the broken file is an error.
    let r = aiac(&["report", runs.join("b.json").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));

    // A report of no rank is refused.
    let mut j: Value = serde_json::from_slice(&bytes).unwrap();
    j["ranks"] = Value::Array(vec![]);
    let empty = dir.join("empty.json");
    std::fs::write(&empty, serde_json::to_vec(&j).unwrap()).unwrap();
    let r = aiac(&["report", empty.to_str().unwrap()]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("\"ranks\" is empty"), "{err}");

    // The same file twice (as given, through another path, and inside a directory given)
    // is one run.
    std::fs::remove_file(runs.join("b.json")).unwrap();
    let g = good.to_str().unwrap();
    let other = format!("{}/../runs/a.json", runs.display());
    let n = counted(&[g, &other, runs.to_str().unwrap()], &dir.join("out"));
    assert_eq!(n, 1, "counted once");
}

/// The temporary file of `name` in `dir`, once it exists (at most 60 s).
fn wait_for_temp(dir: &Path, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if !temps_in(dir).is_empty() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn pid_of(c: &Child) -> Pid {
    Pid::from_raw(c.id() as i32)
}

#[test]
fn a_signal_during_a_write_removes_the_temporary_file() {
    let dir = scratch("signal-write");
    let json = dir.join("r.json");
    std::fs::write(&json, "old").unwrap();
    // Held in the middle of the write (the test hook), then signalled: 130 and 143.
    for (sig, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let mut child = Command::new(AIAC)
            .args(SMALL)
            .args(["--json", json.to_str().unwrap()])
            .env("AIAC_TEST_PAUSE_IN_WRITE_MS", "20000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_for_temp(&dir, &mut child), "the write started");
        kill(pid_of(&child), sig).unwrap();
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(code), "{sig:?}");
        assert!(temps_in(&dir).is_empty(), "{sig:?}: {:?}", names_in(&dir));
        assert_eq!(std::fs::read_to_string(&json).unwrap(), "old", "untouched");
    }
    // At a few moments of a run with a large history (every rank's rounds): whatever the
    // moment, no temporary file is left.
    for delay_ms in [0, 30, 80, 150, 300, 600] {
        let mut child = Command::new(AIAC)
            .args(["run", "-t", "16", "--variant", "async", "--local", "6"])
            .args(["--max-iters", "3000", "--check-every", "1", "--quiet"])
            .args(["--json", json.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = kill(pid_of(&child), Signal::SIGINT);
        let _ = child.wait().unwrap();
        assert!(
            temps_in(&dir).is_empty(),
            "{delay_ms} ms: {:?}",
            names_in(&dir)
        );
    }
}

#[test]
fn temporary_files_of_dead_writers_are_removed_at_the_next_write() {
    let dir = scratch("stale");
    // A PID that no longer runs: a child that has exited and been waited for.
    let dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let _ = { dead }.wait();
    let stale = format!(".x.json.tmp-{dead_pid}");
    let live = format!(".y.json.tmp-{}", std::process::id());
    let other = "notes.tmp-1".to_string(); // not a temporary file of aiac's
    for n in [&stale, &live, &other] {
        std::fs::write(dir.join(n), "partial").unwrap();
    }
    let r = small_with(&["--json", dir.join("r.json").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let left = names_in(&dir);
    assert!(!left.contains(&stale), "{left:?}");
    assert!(
        left.contains(&live) && left.contains(&other),
        "only dead writers' files go: {left:?}"
    );
}

#[test]
fn sizes_that_do_not_fit_are_refused_with_the_figure() {
    for local in ["100000", "4294967297,1,1", "65536,65536,1"] {
        refused(
            &["run", "--local", local],
            &["--local/--global", "needs about", "MemAvailable"],
        );
    }
    // So is an R that makes the channel buffers too large.
    refused(
        &[
            "run",
            "--variant",
            "async",
            "--local",
            "2000,2000,1",
            "--max-in-flight",
            "65536",
        ],
        &["needs about", "--max-in-flight"],
    );
}

#[test]
fn flags_outside_their_ranges_are_refused_when_parsed() {
    for v in ["1e308", "1e6", "0.5", "NaN"] {
        refused(
            &["run", "--slow-rank", "0", "--slowdown", v],
            &["--slowdown", "from 1 to 1000"],
        );
    }
    let dir = scratch("ranges");
    let out = dir.join("sw");
    for v in ["1e300", "0", "-1", "inf"] {
        refused(
            &["sweep", "--timeout", v, "--out", out.to_str().unwrap()],
            &["--timeout", "86400"],
        );
    }
    // dht's --timeout had its own rule (whole seconds from 1): 2^64 − 1 overflowed the
    // deadline and panicked, 1e300 was "invalid digit" without the range.
    for v in ["18446744073709551615", "1e300", "0", "-1"] {
        refused(
            &[
                "dht",
                "--backend",
                "mpi",
                "--ranks",
                "1",
                "--local-volume",
                "10",
                "--timeout",
                v,
            ],
            &["--timeout", "86400"],
        );
    }
    refused(
        &["sweep", "--slow-rank", "0", "--slowdown", "2,1e6"],
        &["--slowdown", "from 1 to 1000"],
    );
    assert!(!out.exists(), "nothing created");
    refused(&["run", "-t", "2049"], &["-t/--threads", "from 1 to 2048"]);
    refused(
        &["run", "--backend", "shared", "-t", "100000"],
        &["-t/--threads", "2048"],
    );
}

#[test]
fn offsets_and_tolerances_f64_cannot_honour_are_refused() {
    for offset in ["1e12", "-1e15", "1e300"] {
        refused(
            &["run", "--offset", offset],
            &["--offset", "swamps the solution", "--tol"],
        );
    }
    // Within the bound the run converges as without the offset.
    let r = aiac(&["run", "--local", "8", "--offset", "1e6", "--quiet"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    refused(
        &["run", "--tol", "1e-300"],
        &["--tol", "2.220446049250313e-16"],
    );
    refused(&["run", "--tol", "5"], &["--tol", "to 1"]);
    refused(
        &["run", "--check-every", "1000000000000"],
        &["--check-every", "--max-iters (1000000)"],
    );
    refused(
        &["run", "--check-every", "200", "--max-iters", "100"],
        &["--check-every", "from 1 to --max-iters (100)"],
    );
}

#[test]
fn conflicting_and_meaningless_flags_are_refused() {
    refused(
        &["run", "--confirm", "--no-confirm"],
        &["--confirm", "--no-confirm", "cannot be used with"],
    );
    refused(
        &["sweep", "--no-confirm", "--confirm"],
        &["--confirm", "cannot be used with"],
    );
    refused(
        &["run", "--problem", "poisson", "--offset", "5"],
        &["--offset", "--problem laplace"],
    );
    refused(
        &["sweep", "--problem", "poisson", "--offset", "5"],
        &["--offset", "--problem laplace"],
    );
    // Flags of a loop the run does not have (each was accepted and ignored).
    refused(
        &["run", "--variant", "sync", "--max-in-flight", "3"],
        &["--max-in-flight applies to", "--variant sync"],
    );
    refused(
        &["run", "--solver", "cg", "--max-in-flight", "3"],
        &["--max-in-flight applies to", "--solver cg"],
    );
    refused(
        &["run", "--variant", "sync", "--no-confirm"],
        &["--no-confirm applies to", "--variant sync"],
    );
    refused(
        &["run", "--solver", "pipecg", "--confirm"],
        &["--confirm applies to", "--solver pipecg"],
    );
    refused(
        &["sweep", "--variant", "sync", "--no-confirm"],
        &["--no-confirm applies to", "no run of this sweep"],
    );
    // Where they apply they are taken; a sweep passes --no-confirm to its async runs only.
    let r = aiac(
        &["run", "--variant", "async", "-t", "2", "--local", "8"]
            .iter()
            .chain(&["--max-in-flight", "3", "--no-confirm", "--quiet"])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(
        matches!(r.status.code(), Some(0 | 2)),
        "{}",
        text(&r.stderr)
    );
}

/// As a launcher's rank `rank` of `size` would see it (the environment Open MPI gives).
fn as_rank(rank: usize, size: usize, args: &[&str]) -> Output {
    let mut c = Command::new(AIAC);
    c.args(args)
        .env("OMPI_COMM_WORLD_RANK", rank.to_string())
        .env("OMPI_COMM_WORLD_SIZE", size.to_string());
    within(c, 60)
}

#[test]
fn a_threads_run_under_a_launcher_is_refused_once() {
    for backend in ["threads", "shared"] {
        let args = ["run", "--backend", backend, "--local", "4"];
        let r = as_rank(0, 2, &args);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("--backend {backend}")) && err.contains("one of 2"),
            "{err}"
        );
        // The other ranks leave the message and the exit code to rank 0.
        let r = as_rank(1, 2, &args);
        assert_eq!(r.status.code(), Some(0));
        assert!(r.stderr.is_empty() && r.stdout.is_empty());
    }
    // A job of one is a plain run.
    let r = as_rank(0, 1, &SMALL);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
}

#[test]
fn parse_errors_under_a_launcher_are_printed_by_rank_0_alone() {
    let r = as_rank(0, 4, &["run", "--no-such-flag"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r.stderr).contains("--no-such-flag"));
    for rank in 1..4 {
        let r = as_rank(rank, 4, &["run", "--no-such-flag"]);
        assert!(r.stderr.is_empty(), "rank {rank}: {}", text(&r.stderr));
        assert_eq!(r.status.code(), Some(0), "rank {rank}");
    }
}

/// A sweep whose one run outlasts the test: a slowed rank, a tolerance it takes thousands
/// of slowed sweeps to reach.
pub fn long_sweep(out: &Path, extra: &[&str]) -> Child {
    Command::new(AIAC)
        .args([
            "sweep",
            "--local",
            "24",
            "--tol",
            "1e-12",
            "--slow-rank",
            "0",
        ])
        .args([
            "--slowdown",
            "1000",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_signalled_sweep_stops_its_run_and_waits_for_it() {
    for (sig, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        let dir = scratch(&format!("sweep-signal-{sig:?}"));
        let sweep = long_sweep(&dir.join("sw"), &[]);
        // Its run has started: the sweep has a child.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut kids = Vec::new();
        while kids.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            kids = descendants(sweep.id());
        }
        assert!(!kids.is_empty(), "the sweep started its run");
        kill(pid_of(&sweep), sig).unwrap();
        let out = finish(sweep, 30, "the signalled sweep");
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
        for k in kids {
            assert!(!running(k), "{sig:?}: run process {k} outlived the sweep");
        }
        assert!(text(&out.stderr).contains("stopped by signal"));
    }
}

/// SIGINT ends `aiac run` and `aiac dht` (130) also when they were started with SIGINT
/// ignored, as a script's background job is: they take it from the start, not only once an
/// output file has been checked.
#[test]
fn sigint_ends_run_and_dht_started_with_it_ignored() {
    let cases = [
        "run -t 2 --local 24 --tol 1e-12 --slow-rank 0 --slowdown 1000 -q",
        "dht --ranks 2,3 --local-volume 3000000",
    ];
    for args in cases {
        let mut cmd = Command::new(AIAC);
        cmd.args(args.split(' '))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: runs in the child between fork and exec; signal is async-signal-safe and
        // sets the child's own action for SIGINT.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                nix::libc::signal(nix::libc::SIGINT, nix::libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        // Its handler is in place (without one, a moment to start).
        let deadline = Instant::now() + Duration::from_secs(2);
        while !catches(child.id(), Signal::SIGINT as i32) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        kill(pid_of(&child), Signal::SIGINT).unwrap();
        let left = outliving(&[child.id()], 10);
        stop_all(&left);
        let st = child.wait().unwrap();
        assert!(left.is_empty(), "{args}: SIGINT ignored");
        assert!(
            st.signal() == Some(Signal::SIGINT as i32) || st.code() == Some(130),
            "{args}: {st:?}"
        );
    }
}

/// `aiac sweep` killed by SIGKILL, which it cannot catch to stop its run: the run dies with it
/// (sent SIGTERM as the sweep dies), instead of running on for nobody, past `--timeout`.
#[test]
fn a_killed_sweep_takes_its_run_with_it() {
    let dir = scratch("sweep-killed");
    let mut sweep = long_sweep(&dir.join("sw"), &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut kids = Vec::new();
    while kids.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        kids = descendants(sweep.id());
    }
    assert!(!kids.is_empty(), "the sweep started its run");
    kill(pid_of(&sweep), Signal::SIGKILL).unwrap();
    let _ = sweep.wait();
    let left = outliving(&kids, 10);
    stop_all(&left);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        left.is_empty(),
        "run processes {left:?} outlived the killed sweep"
    );
}

#[test]
fn multisplit_flags_outside_their_solver_or_range_are_refused() {
    let ms = |extra: &[&'static str]| {
        let mut a = vec!["run", "--solver", "multisplit", "--local", "4"];
        a.extend_from_slice(extra);
        a
    };
    refused(
        &["run", "--inner", "cg"],
        &["--inner", "--solver multisplit", "--solver jacobi"],
    );
    refused(
        &["run", "--solver", "cg", "--inner-tol", "0.1"],
        &["--inner-tol", "--solver multisplit", "--solver cg"],
    );
    refused(
        &["run", "--variant", "async", "--inner-max", "5"],
        &["--inner-max", "--solver multisplit"],
    );
    for t in ["0", "-1", "1", "2", "nan"] {
        refused(
            &ms(&["--inner-tol", t]),
            &["--inner-tol", "above 0 and below 1"],
        );
    }
    refused(&ms(&["--inner-max", "0"]), &["--inner-max", "at least 1"]);
    refused(
        &ms(&["--backend", "shared", "-t", "2"]),
        &["--solver multisplit", "--backend shared"],
    );
    refused(
        &ms(&["--exchange", "overlap"]),
        &["--exchange", "--solver multisplit"],
    );
}

// Issue 46: inputs are never destroyed, readers never hang or balloon, and values that
// overflow are refused or reported.

/// `aiac run --backend mpi ARGS` on two ranks of `mpirun`, stopped (ranks too) after `secs`
/// by `timeout`, which the test then sees as exit 124.
fn mpirun2(args: &[&str], secs: u64) -> Output {
    let mut c = Command::new("timeout");
    c.args(["-k", "5", &secs.to_string(), "mpirun", "-np", "2", AIAC]);
    c.args(["run", "--backend", "mpi", "--quiet"]).args(args);
    within(c, secs + 30)
}

/// One `aiac: error` line (however many ranks), naming every one of `words`; exit 1.
fn one_error(what: &str, r: &Output, words: &[&str]) {
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{what}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("aiac: error")).collect();
    assert_eq!(lines.len(), 1, "{what}: one message: {err}");
    for w in words {
        assert!(
            lines[0].contains(w),
            "{what}: does not say '{w}': {}",
            lines[0]
        );
    }
}

/// A symmetric, diagonally dominant 3 × 3 matrix and a right-hand side for it.
fn small_system(dir: &Path) -> (PathBuf, PathBuf) {
    let a = dir.join("A.mtx");
    std::fs::write(
        &a,
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 5\n1 1 4\n2 1 -1\n2 2 4\n\
         3 2 -1\n3 3 4\n",
    )
    .unwrap();
    let b = dir.join("b.mtx");
    std::fs::write(
        &b,
        "%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n",
    )
    .unwrap();
    (a, b)
}

/// An output naming an input file (as given, `./` or absolute, through a symlink, a hard
/// link) is refused before any work, on the threads backend and under mpirun, by `dht
/// --from` and by `report`: one message, exit 1, the input intact.
#[test]
fn an_output_never_overwrites_an_input() {
    let dir = scratch("in-out");
    let (a, b) = small_system(&dir);
    let (a_text, b_text) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let link = dir.join("link.mtx");
    std::os::unix::fs::symlink("A.mtx", &link).unwrap();
    let hard = dir.join("hard.mtx");
    std::fs::hard_link(&a, &hard).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let dotted = format!("{}/./A.mtx", dir.display());
    let cases: Vec<(Vec<String>, [&str; 2])> = vec![
        (
            vec!["--matrix".into(), s(&a), "--solution".into(), s(&a)],
            ["--solution", "--matrix"],
        ),
        (
            vec!["--matrix".into(), s(&a), "--json".into(), dotted.clone()],
            ["--json", "--matrix"],
        ),
        (
            vec![
                "--matrix".into(),
                s(&a),
                "--rhs".into(),
                s(&b),
                "--csv".into(),
                format!(
                    "{}/../{}/b.mtx",
                    dir.display(),
                    dir.file_name().unwrap().to_str().unwrap()
                ),
            ],
            ["--csv", "--rhs"],
        ),
        (
            vec!["--matrix".into(), s(&link), "--history".into(), s(&a)],
            ["--history", "--matrix"],
        ),
        (
            vec!["--matrix".into(), s(&a), "--solution".into(), s(&hard)],
            ["--solution", "--matrix"],
        ),
    ];
    for (args, flags) in &cases {
        let mut v = vec!["run", "-t", "2", "--quiet"];
        v.extend(args.iter().map(String::as_str));
        one_error(
            &format!("{args:?}"),
            &aiac(&v),
            &[flags[0], flags[1], "input"],
        );
        assert_eq!(std::fs::read(&a).unwrap(), a_text, "{args:?}: A.mtx intact");
        assert_eq!(std::fs::read(&b).unwrap(), b_text, "{args:?}: b.mtx intact");
    }
    // Under mpirun: rank 0 checks the outputs, every rank exits 1 at once.
    let r = mpirun2(&["--matrix", &s(&a), "--solution", &dotted], 60);
    one_error("mpirun", &r, &["--solution", "--matrix"]);
    assert_eq!(std::fs::read(&a).unwrap(), a_text, "mpirun: A.mtx intact");

    // dht --from: its --json would replace a file it reads.
    let rows = dir.join("rows.json");
    let r = aiac(&["dht", "--local-volume", "100", "--json", &s(&rows)]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let rows_text = std::fs::read(&rows).unwrap();
    let r = aiac(&[
        "dht",
        "--from",
        &s(&rows),
        "--json",
        &format!("{}/./rows.json", dir.display()),
    ]);
    one_error("dht", &r, &["--json", "--from"]);
    assert_eq!(std::fs::read(&rows).unwrap(), rows_text, "dht: rows intact");

    // report: a report saved as runs.csv in the --out directory.
    let out = dir.join("plots");
    std::fs::create_dir(&out).unwrap();
    let saved = out.join("runs.csv");
    let r = small_with(&["--json", &s(&saved)]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let saved_text = std::fs::read(&saved).unwrap();
    let r = aiac(&["report", &s(&saved), "--out", &s(&out)]);
    one_error("report", &r, &["--out", "runs.csv"]);
    assert_eq!(std::fs::read(&saved).unwrap(), saved_text, "report: intact");
}

/// A FIFO or a device given as an input is refused without being opened (a FIFO nobody
/// writes blocked the open for ever, on both ranks of an mpirun job): one message naming the
/// flag, exit 1, within seconds.
#[test]
fn a_fifo_or_device_as_input_is_refused_without_waiting() {
    let dir = scratch("in-fifo");
    let (a, _) = small_system(&dir);
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let (a, fifo) = (a.to_str().unwrap(), fifo.to_str().unwrap());
    let quick = |args: &[&str]| {
        let mut c = Command::new(AIAC);
        c.args(args);
        within(c, 20)
    };
    for (args, flag, what) in [
        (vec!["run", "--matrix", fifo], "--matrix", "a FIFO"),
        (vec!["run", "--matrix", a, "--rhs", fifo], "--rhs", "a FIFO"),
        (
            vec!["run", "--matrix", "/dev/zero"],
            "--matrix",
            "a character device",
        ),
        (
            vec!["run", "--matrix", a, "--rhs", "/dev/zero"],
            "--rhs",
            "a character device",
        ),
        (vec!["dht", "--from", fifo], "--from", "a FIFO"),
        (
            vec!["dht", "--from", "/dev/zero"],
            "--from",
            "a character device",
        ),
    ] {
        one_error(&format!("{args:?}"), &quick(&args), &[flag, what]);
    }
    let r = mpirun2(&["--matrix", fifo], 30);
    assert_ne!(r.status.code(), Some(124), "mpirun --matrix FIFO hung");
    one_error("mpirun", &r, &["--matrix", "a FIFO"]);
}

/// A file with no newline is read a bounded line at a time, never whole: a header then NUL
/// bytes (a sparse file: no disk used), or 2 MiB of digits, is refused at its line after 1 MiB;
/// a JSON file past 4 GiB is refused from its size without being read.
#[test]
fn a_line_or_file_past_its_bound_is_refused_not_read_whole() {
    let dir = scratch("in-bound");
    let (a, _) = small_system(&dir);
    let nul = dir.join("nul.mtx");
    std::fs::write(&nul, "%%MatrixMarket matrix coordinate real general\n").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&nul).unwrap();
    f.set_len(64 << 20).unwrap();
    let digits = dir.join("digits.mtx");
    std::fs::write(&digits, "7".repeat(2 << 20)).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    for (args, at) in [
        (
            vec!["--matrix".to_string(), s(&nul)],
            format!("{}:2:", s(&nul)),
        ),
        (
            vec!["--matrix".into(), s(&a), "--rhs".into(), s(&nul)],
            format!("{}:2:", s(&nul)),
        ),
        (
            vec!["--matrix".into(), s(&digits)],
            format!("{}:1:", s(&digits)),
        ),
    ] {
        let mut v = vec!["run", "-t", "2", "--quiet"];
        v.extend(args.iter().map(String::as_str));
        let r = aiac(&v);
        one_error(
            &format!("{args:?}"),
            &r,
            &[&at, "longer than 1048576 bytes"],
        );
        assert!(r.stderr.len() < 4096, "{args:?}: the line is not echoed");
    }
    let huge = dir.join("huge.json");
    std::fs::write(&huge, "[]").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&huge).unwrap();
    f.set_len(5 << 30).unwrap();
    for args in [
        vec!["dht", "--from", huge.to_str().unwrap()],
        vec!["report", huge.to_str().unwrap()],
    ] {
        one_error(
            &format!("{args:?}"),
            &aiac(&args),
            &["huge.json", "5.0 GiB", "more than"],
        );
    }
}

/// Values that parse and then overflow: a subnormal diagonal (Jacobi divides by it), `b =
/// A·1` past f64, or a `b` whose norm overflows are refused by name before the run, exit 1
/// (under mpirun too); a run that diverges to values that are not finite reports
/// "diverged", exit 2, its residual `null` in JSON.
#[test]
fn values_that_overflow_are_refused_or_reported_diverged() {
    let dir = scratch("in-overflow");
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    let general = "%%MatrixMarket matrix coordinate real general\n";
    let sub = write("sub.mtx", &format!("{general}2 2 2\n1 1 1e-320\n2 2 4\n"));
    let big = write(
        "big.mtx",
        &format!("{general}2 2 4\n1 1 1e308\n1 2 1e308\n2 1 1e308\n2 2 1e308\n"),
    );
    let sym = write(
        "sym.mtx",
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 1.5e308\n2 1 1e307\n\
         2 2 1.5e308\n",
    );
    for (args, words) in [
        (
            vec!["--matrix", &sub, "--solver", "jacobi"],
            vec!["sub.mtx: row 1", "subnormal"],
        ),
        (
            vec!["--matrix", &sub, "--solver", "cg", "--pc", "jacobi"],
            vec!["subnormal", "--pc none"],
        ),
        (
            vec!["--matrix", &big, "--solver", "jacobi"],
            vec!["big.mtx", "b = A·1 overflows", "row 1"],
        ),
        (
            vec!["--matrix", &sym, "--solver", "cg"],
            vec!["sym.mtx", "‖b‖₂", "overflow"],
        ),
    ] {
        let mut v = vec!["run", "-t", "2", "--quiet"];
        v.extend(&args);
        one_error(&format!("{args:?}"), &aiac(&v), &words);
    }
    let r = mpirun2(&["--matrix", &sub], 60);
    one_error("mpirun", &r, &["subnormal"]);

    // Not dominant, entries of 1e300: the first sweep's residual overflows.
    let wild = write(
        "wild.mtx",
        &format!("{general}2 2 4\n1 1 1\n1 2 1e300\n2 1 1e300\n2 2 1\n"),
    );
    let ones = write(
        "ones.mtx",
        "%%MatrixMarket matrix array real general\n2 1\n1\n1\n",
    );
    let json = dir.join("wild.json");
    let json = json.to_str().unwrap();
    let args = [
        "--matrix",
        &wild,
        "--rhs",
        &ones,
        "--check-every",
        "1",
        "--json",
        json,
    ];
    for what in ["threads", "mpirun"] {
        let r = match what {
            "threads" => {
                let mut v = vec!["run", "-t", "2", "--quiet"];
                v.extend(&args);
                aiac(&v)
            }
            _ => mpirun2(&args, 60),
        };
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{what}: {err}");
        assert!(!err.contains("aiac: error"), "{what}: {err}");
        let report: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
        assert_eq!(report["stop"], "diverged", "{what}");
        assert_eq!(report["converged"], false, "{what}");
        assert!(
            report["residual"]["true"].is_null(),
            "{what}: {}",
            report["residual"]
        );
        std::fs::remove_file(json).unwrap();
    }
}
