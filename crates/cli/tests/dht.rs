//! `aiac dht`: the hash table benchmark's verdict, files and input checks, over threads and
//! under real `mpirun` and `oshrun` (2 ranks; each job under a deadline).

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::process::{Command, Output};

mod common;

use common::{aiac, descendants, finish, outliving, scratch, text, within, AIAC};

fn rows(path: &std::path::Path) -> Vec<Value> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_array().unwrap().clone()
}

/// Every row says the table is right, and the counts it is judged on add up.
fn assert_correct(rows: &[Value], ranks: &[u64], lvs: &[u64]) {
    assert_eq!(rows.len(), ranks.len() * lvs.len(), "{rows:?}");
    for r in rows {
        let (n, lv) = (
            r["ranks"].as_u64().unwrap(),
            r["local_volume"].as_u64().unwrap(),
        );
        assert!(ranks.contains(&n) && lvs.contains(&lv), "{r}");
        assert_eq!(r["correct"], Value::Bool(true), "{r}");
        assert_eq!(r["table_objects"].as_u64(), Some(n * lv), "{r}");
        assert_eq!(r["found"].as_u64(), Some(n * lv), "{r}");
        // Load factor 1/2: some collisions, far fewer than inserts times the table.
        let c = r["collisions"].as_u64().unwrap();
        assert!(c > 0 && c < 4 * n * lv, "{r}");
    }
}

/// A row's lookups: every hit found, every miss reported absent, as many lookups as objects
/// and about `ratio` of them hits.
fn assert_lookups(r: &Value, ratio: f64) {
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    assert_eq!(r["hit_ratio"].as_f64(), Some(ratio), "{r}");
    let objects = n("table_objects");
    assert_eq!(n("lookups"), objects, "{r}");
    assert_eq!(n("hits_found"), n("hits"), "{r}");
    assert_eq!(n("misses_absent"), n("lookups") - n("hits"), "{r}");
    let want = objects as f64 * ratio;
    assert!((n("hits") as f64 - want).abs() <= 8.0, "{r}");
    assert!(r["lookup_s"].as_f64().unwrap() > 0.0, "{r}");
}

/// Lock-based insertion beside compare-and-swap, weak and strong scaling, over threads: every
/// object held once, every hit found, every miss absent; the strong runs hold exactly the
/// total at every rank count.
#[test]
fn lock_insertion_and_lookups_over_threads() {
    let dir = scratch("dht-lock");
    let weak = dir.join("w.json");
    let out = aiac(&[
        "dht",
        "--ranks",
        "1,3",
        "--local-volume",
        "2000",
        "--insert",
        "cas,lock",
        "--hit-ratio",
        "0.25",
        "--json",
        weak.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r = rows(&weak);
    assert_correct(&r, &[1, 3], &[2000, 2000]);
    for insert in ["cas", "lock"] {
        assert_eq!(
            r.iter().filter(|x| x["insert"] == insert).count(),
            2,
            "{r:?}"
        );
    }
    for x in &r {
        assert_lookups(x, 0.25);
    }
    let strong = dir.join("s.json");
    let out = aiac(&[
        "dht",
        "--ranks",
        "1,2,4",
        "--total",
        "7001",
        "--insert",
        "lock",
        "--json",
        strong.to_str().unwrap(),
        "--plot",
        dir.join("strong").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.join("strong.png").is_file() && dir.join("strong.svg").is_file());
    let r = rows(&strong);
    assert_eq!(r.len(), 3, "{r:?}");
    for x in &r {
        assert_eq!(x["insert"], "lock", "{x}");
        assert_eq!(x["total"].as_u64(), Some(7001), "{x}");
        assert_eq!(x["table_objects"].as_u64(), Some(7001), "{x}");
        assert_eq!(x["found"].as_u64(), Some(7001), "{x}");
        assert_eq!(x["correct"], Value::Bool(true), "{x}");
        let n = x["ranks"].as_u64().unwrap();
        assert_eq!(x["local_volume"].as_u64(), Some(7001u64.div_ceil(n)), "{x}");
        assert_lookups(x, 0.5);
    }
    // Weak and strong rows in one plot would share an axis that means two things.
    let out = aiac(&[
        "dht",
        "--from",
        weak.to_str().unwrap(),
        strong.to_str().unwrap(),
        "--plot",
        dir.join("mixed").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("plot them apart"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn threads_table_is_correct_and_files_round_trip() {
    let dir = scratch("dht-threads");
    let json = dir.join("t.json");
    let out = aiac(&[
        "dht",
        "--ranks",
        "1,3",
        "--local-volume",
        "2000,5000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("correct: every object found exactly once"));
    let r = rows(&json);
    assert_correct(&r, &[1, 3], &[2000, 5000]);
    // --from reads the rows back into one table and draws the plot.
    let stem = dir.join("weak");
    let out = aiac(&[
        "dht",
        "--from",
        json.to_str().unwrap(),
        "--plot",
        stem.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.join("weak.png").is_file() && dir.join("weak.svg").is_file());
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("threads"))
            .count(),
        4
    );
}

/// A saved run whose table was wrong makes `--from` exit 1, naming the run.
#[test]
fn a_wrong_table_is_exit_1() {
    let dir = scratch("dht-wrong");
    let json = dir.join("t.json");
    let out = aiac(&[
        "dht",
        "--ranks",
        "2",
        "--local-volume",
        "1000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut r = rows(&json);
    r[0]["found"] = Value::from(1999);
    r[0]["correct"] = Value::Bool(false);
    std::fs::write(&json, serde_json::to_string(&r).unwrap()).unwrap();
    let out = aiac(&["dht", "--from", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("ranks=2 LV=1000") && err.contains("1999 were found, want 2000"),
        "{err}"
    );
}

#[test]
fn bad_input_names_the_flag() {
    let dir = std::env::temp_dir().join(format!("aiac-dht-{}-same", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let same_svg = dir.join("pl.svg").to_str().unwrap().to_string();
    let same_stem = dir.join("pl").to_str().unwrap().to_string();
    for (args, flag) in [
        (&["dht", "--local-volume", "0"][..], "--local-volume"),
        (&["dht", "--total", "0"][..], "--total"),
        (
            &["dht", "--total", "1000", "--local-volume", "10"][..],
            "--total and --local-volume",
        ),
        (&["dht", "--hit-ratio", "1.5"][..], "--hit-ratio"),
        (&["dht", "--hit-ratio", "-0.1"][..], "--hit-ratio"),
        (&["dht", "--hit-ratio", "NaN"][..], "--hit-ratio"),
        (&["dht", "--hit-ratio", "-1e-300"][..], "got -1e-300"),
        (&["dht", "--insert", "mutex"][..], "--insert"),
        // A method named twice was run twice, as two rows of one configuration.
        (
            &["dht", "--insert", "lock,lock"][..],
            "--insert names lock twice",
        ),
        // A timeout no job can meet was taken, and echoed as 320 digits.
        (&["dht", "--timeout", "1e-320"][..], "from 0.001"),
        (&["dht", "--ranks", "0"][..], "--ranks"),
        (&["dht", "--json", "/nonexistent/dir/x.json"][..], "--json"),
        (&["dht", "--from", "/nonexistent.json"][..], "--from"),
        (
            &["dht", "--backend", "mpi", "--ranks", "2", "--timeout", "0"][..],
            "--timeout",
        ),
        // Past what MPI's int counts of a window (it was MPI_ABORT's text alone).
        (
            &[
                "dht",
                "--backend",
                "mpi",
                "--ranks",
                "2",
                "--local-volume",
                "3000000000",
            ][..],
            "must count its words in an MPI int",
        ),
        // Past the threads a process starts (it reached 8.8 GB in 20 s).
        (
            &["dht", "--ranks", "100000", "--local-volume", "10"][..],
            "from 1 to 2048",
        ),
        // Past this machine's memory: refused with the figure (it aborted, rc 134, or
        // needed one allocation of 16 GB).
        (
            &["dht", "--ranks", "1", "--local-volume", "99999999999999"][..],
            "MemAvailable",
        ),
        (
            &[
                "dht",
                "--backend",
                "shmem",
                "--ranks",
                "4",
                "--local-volume",
                "1000000000",
            ][..],
            "4 rank(s) on this machine",
        ),
        // The plot's SVG is the JSON: refused before any work (it was overwritten, rc 0).
        (
            &[
                "dht",
                "--local-volume",
                "100",
                "--json",
                same_svg.as_str(),
                "--plot",
                same_stem.as_str(),
            ][..],
            "name the same file",
        ),
    ] {
        let out = aiac(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(flag),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
    std::fs::remove_dir(&dir).unwrap();
}

/// A threads table started by a launcher would be one independent table per process, each
/// writing the same files: rank 0 refuses it once, the others leave it to rank 0.
#[test]
fn a_threads_table_under_a_launcher_is_refused_once() {
    let as_rank = |rank: usize| {
        let mut c = Command::new(AIAC);
        c.args(["dht", "--ranks", "2", "--local-volume", "10"])
            .env("OMPI_COMM_WORLD_RANK", rank.to_string())
            .env("OMPI_COMM_WORLD_SIZE", "2");
        within(c, 60)
    };
    let r = as_rank(0);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--backend threads") && err.contains("one of 2"),
        "{err}"
    );
    assert!(text(&r.stdout).is_empty(), "no table: {}", text(&r.stdout));
    let r = as_rank(1);
    assert_eq!(r.status.code(), Some(0));
    assert!(r.stderr.is_empty() && r.stdout.is_empty());
}

/// `LAUNCHER -np 2 aiac dht --backend B`, killed after two minutes.
fn launch(launcher: &str, backend: &str, json: &std::path::Path) -> Output {
    let mut c = Command::new(launcher);
    c.args([
        "--oversubscribe",
        "-np",
        "2",
        AIAC,
        "dht",
        "--backend",
        backend,
    ])
    .args([
        "--local-volume",
        "3000,6000",
        "--json",
        json.to_str().unwrap(),
    ]);
    within(c, 120)
}

/// `--insert lock` under real mpirun and oshrun, 2 and 3 ranks, strong scaling: the table
/// holds exactly the total, each object once, every hit found, every miss absent.
#[test]
fn lock_insertion_under_mpirun_and_oshrun() {
    for (launcher, backend) in [("mpirun", "mpi"), ("oshrun", "shmem")] {
        for np in ["2", "3"] {
            let dir = scratch(&format!("dht-lock-{backend}-{np}"));
            let json = dir.join("r.json");
            let mut c = Command::new(launcher);
            c.args([
                "--oversubscribe",
                "-np",
                np,
                AIAC,
                "dht",
                "--backend",
                backend,
            ])
            .args([
                "--total",
                "4000",
                "--insert",
                "lock,cas",
                "--hit-ratio",
                "0.3",
            ])
            .arg("--json")
            .arg(&json);
            let out = within(c, 120);
            assert!(
                out.status.success(),
                "{backend} np={np}: {}",
                text(&out.stderr)
            );
            let r = rows(&json);
            assert_eq!(r.len(), 2, "{r:?}");
            for x in &r {
                assert_eq!(x["backend"], backend, "{x}");
                assert_eq!(x["ranks"].as_u64(), np.parse().ok(), "{x}");
                assert_eq!(x["table_objects"].as_u64(), Some(4000), "{x}");
                assert_eq!(x["found"].as_u64(), Some(4000), "{x}");
                assert_eq!(x["correct"], Value::Bool(true), "{x}");
                assert_lookups(x, 0.3);
            }
            assert!(r.iter().any(|x| x["insert"] == "lock"), "{r:?}");
        }
    }
}

/// A bad hit ratio under a launcher: one message, exit 1 on every rank, nothing run.
#[test]
fn a_bad_hit_ratio_under_a_launcher_is_one_error() {
    for (launcher, backend) in [("mpirun", "mpi"), ("oshrun", "shmem")] {
        let mut c = Command::new(launcher);
        c.args([
            "--oversubscribe",
            "-np",
            "2",
            AIAC,
            "dht",
            "--backend",
            backend,
        ])
        .args(["--total", "100", "--insert", "lock", "--hit-ratio", "2"]);
        let out = within(c, 60);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend}: {err}");
        assert_eq!(
            err.matches("--hit-ratio must be from 0 to 1").count(),
            1,
            "{err}"
        );
        assert!(
            !text(&out.stdout).contains("correct"),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn mpi_and_shmem_tables_are_correct() {
    for (launcher, backend) in [("mpirun", "mpi"), ("oshrun", "shmem")] {
        let dir = scratch(&format!("dht-{backend}"));
        let json = dir.join("r.json");
        let out = launch(launcher, backend, &json);
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        let r = rows(&json);
        assert_correct(&r, &[2], &[3000, 6000]);
        assert!(r.iter().all(|x| x["backend"] == backend));
    }
}

/// `--ranks` on a launched backend starts one job per count itself and reports them in one
/// table; a job past `--timeout` is stopped and the command fails.
#[test]
fn ranks_start_one_job_per_count() {
    let dir = scratch("dht-jobs");
    let json = dir.join("all.json");
    let out = aiac(&[
        "dht",
        "--backend",
        "mpi",
        "--ranks",
        "1,2",
        "--local-volume",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_correct(&rows(&json), &[1, 2], &[2000]);
    let out = aiac(&[
        "dht",
        "--backend",
        "mpi",
        "--ranks",
        "2",
        "--local-volume",
        "5000000",
        "--timeout",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("stopped after --timeout 2 s"),
        "{}",
        text(&out.stderr)
    );
    // A table larger than the symmetric heap: every PE says so, nothing hangs, exit 1.
    let out = aiac(&[
        "dht",
        "--backend",
        "shmem",
        "--ranks",
        "2",
        "--local-volume",
        "50000000",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("PE 0") && err.contains("PE 1"), "{err}");
    assert!(err.contains("SHMEM_SYMMETRIC_HEAP_SIZE"), "{err}");
}

/// `aiac dht --ranks` signalled while its launcher job runs: the job is stopped (the launcher
/// and its ranks end), its scratch directory removed, and dht exits 128 + the signal, as
/// `aiac sweep` does.
#[test]
fn a_signalled_dht_stops_its_job_and_exits_128_plus_the_signal() {
    use nix::sys::signal::{kill, Signal};
    for (sig, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        let child = Command::new(AIAC)
            .args(["dht", "--backend", "mpi", "--ranks", "2"])
            .args(["--local-volume", "5000000"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // mpirun and both ranks run.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut procs = Vec::new();
        while procs.len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            procs = descendants(child.id());
        }
        assert!(procs.len() >= 3, "mpirun and 2 ranks: {procs:?}");
        let scratch = std::env::temp_dir().join(format!("aiac-dht-{}", child.id()));
        kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let out = finish(child, 30, "the signalled dht");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{sig:?}: {err}");
        assert!(err.contains("stopped by signal"), "{err}");
        let left = outliving(&procs, 5);
        assert!(left.is_empty(), "{sig:?}: {left:?} outlived dht");
        assert!(!scratch.exists(), "{} left", scratch.display());
    }
}

/// A `dht --ranks` killed outright (SIGKILL: no handler runs) leaves its working directory;
/// the next one removes it, and leaves alone a directory whose process still runs.
#[test]
fn the_next_dht_removes_a_killed_ones_directory() {
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = std::env::temp_dir().join(format!("aiac-dht-{dead}"));
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("mpi-2.log"), "a killed job's log").unwrap();
    // This test's own process runs: its directory stays.
    let live = std::env::temp_dir().join(format!("aiac-dht-{}", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let out = aiac(&[
        "dht",
        "--backend",
        "mpi",
        "--ranks",
        "1",
        "--local-volume",
        "100",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stale_left = stale.exists();
    let live_left = live.exists();
    let _ = std::fs::remove_dir_all(&stale);
    std::fs::remove_dir_all(&live).unwrap();
    assert!(!stale_left, "{} was left", stale.display());
    assert!(live_left, "the directory of a running process was removed");
}
