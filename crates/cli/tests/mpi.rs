//! `aiac run --backend mpi` under real `mpirun`, against the threads backend and a serial run:
//! the same solver over a different transport must give the same answers. Every job runs
//! under `timeout`, so a hang fails the test instead of stalling the suite.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AIAC: &str = env!("CARGO_BIN_EXE_aiac");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aiac-mpi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `mpirun -np N aiac run ARGS --json FILE`, killed after two minutes.
fn mpirun(np: usize, args: &[&str], json: &Path) -> Output {
    Command::new("timeout")
        .args([
            "-k",
            "5",
            "120",
            "mpirun",
            "-np",
            &np.to_string(),
            AIAC,
            "run",
            "--backend",
            "mpi",
        ])
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("timeout and mpirun start (scripts/setup.sh installs Open MPI)")
}

fn threads(t: usize, args: &[&str], json: &Path) -> Output {
    Command::new(AIAC)
        .args(["run", "--backend", "threads", "-t", &t.to_string()])
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("aiac runs")
}

fn report(out: &Output, json: &Path, what: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(json).expect("report written")).expect("valid JSON")
}

fn history(j: &Value) -> Vec<(u64, f64)> {
    serde_json::from_value(j["history"].clone()).expect("history is [(iteration, value)]")
}

/// Sync over MPI on 1, 2 and 4 ranks (2 and 4 decompose the grid differently) equals the
/// threads backend on 1 rank (a serial run): the same iteration count and a residual history
/// equal to 1e-12 relative (the blocks' sums are added in a different order, nothing else
/// differs: every block performs the same floating-point operations on the same values).
#[test]
fn sync_over_mpi_matches_a_serial_run() {
    let dir = scratch("sync");
    let args = [
        "--variant",
        "sync",
        "--global",
        "16",
        "--check-every",
        "10",
        "--quiet",
    ];
    let serial_json = dir.join("serial.json");
    let serial = report(&threads(1, &args, &serial_json), &serial_json, "serial");
    let want = history(&serial);
    assert!(want.len() > 5, "a history to compare: {want:?}");
    for np in [1, 2, 4] {
        let json = dir.join(format!("mpi{np}.json"));
        let j = report(&mpirun(np, &args, &json), &json, &format!("mpi np={np}"));
        assert_eq!(j["config"]["backend"], "mpi");
        assert_eq!(j["config"]["ranks"], np);
        assert_eq!(
            j["iterations"]["min"], serial["iterations"]["min"],
            "np={np}"
        );
        assert_eq!(
            j["iterations"]["max"], serial["iterations"]["max"],
            "np={np}"
        );
        let got = history(&j);
        assert_eq!(got.len(), want.len(), "np={np}");
        for ((i, a), (k, b)) in got.iter().zip(&want) {
            assert_eq!(i, k);
            assert!(
                (a - b).abs() <= 1e-12 * b.abs(),
                "np={np} iteration {i}: {a} vs {b}"
            );
        }
    }
}

/// Async and racy over MPI, oversubscribed (3 ranks on this 2-core machine) and not: every
/// converged run has a true residual below tol, every time.
#[test]
fn async_and_racy_over_mpi_converge_only_below_tol() {
    let dir = scratch("async");
    for variant in ["async", "racy"] {
        for np in [2, 3] {
            for rep in 0..3 {
                let json = dir.join(format!("{variant}{np}-{rep}.json"));
                let args = ["--variant", variant, "--local", "8", "--quiet"];
                let j = report(
                    &mpirun(np, &args, &json),
                    &json,
                    &format!("{variant} np={np}"),
                );
                let t = j["residual"]["true"].as_f64().unwrap();
                assert_eq!(j["converged"], true, "{variant} np={np}");
                assert!(
                    t < 1e-4,
                    "{variant} np={np} rep {rep}: true residual {t} ≥ tol"
                );
                for r in j["ranks"].as_array().unwrap() {
                    assert_eq!(r["backend"], "mpi");
                }
            }
        }
    }
}

/// Rank 0 alone prints the table and writes the report, atomically; a bad flag stops every
/// rank with one message.
#[test]
fn rank_0_reports_alone() {
    let dir = scratch("rank0");
    let json = dir.join("r.json");
    std::fs::write(&json, "old").unwrap();
    let out = mpirun(2, &["--variant", "racy", "--global", "12"], &json);
    let stdout = String::from_utf8_lossy(&out.stdout);
    report(&out, &json, "racy np=2");
    assert_eq!(
        stdout.matches("aiac run:").count(),
        1,
        "one table: {stdout}"
    );
    assert_eq!(stdout.matches("result").count(), 1, "one table: {stdout}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "no temporary file left: {left:?}");

    let bad = dir.join("bad.json");
    let out = mpirun(2, &["--tol", "0"], &bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        err.matches("--tol must be").count(),
        1,
        "one message: {err}"
    );
    assert!(!bad.exists(), "no report on bad input");
}

/// `-t N` without mpirun: one clear message naming the launcher, exit 1.
#[test]
fn missing_launcher_is_named() {
    let out = Command::new(AIAC)
        .args(["run", "--backend", "mpi", "-t", "4", "--local", "4"])
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("mpirun -np 4"), "{err}");
}

/// A rank whose sweeps are slowed does fewer iterations than the others in async (they do
/// not wait for it), over MPI as over threads.
#[test]
fn slow_rank_iterates_less_in_async() {
    let dir = scratch("slow");
    let json = dir.join("r.json");
    let args = [
        "--variant",
        "async",
        "--global",
        "16",
        "--slow-rank",
        "1",
        "--slowdown",
        "4",
        "--quiet",
    ];
    let j = report(&mpirun(2, &args, &json), &json, "slow rank");
    let it: Vec<f64> = j["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["iterations"].as_f64().unwrap())
        .collect();
    assert!(
        it[1] < 0.75 * it[0],
        "slow rank 1 did {} iterations, rank 0 {}",
        it[1],
        it[0]
    );
}

/// The Poisson problem over MPI, split in z over 1, 2 and 4 ranks, with the blocking and the
/// overlapped exchange: the iteration count and the max error against the exact solution are
/// those of a one-rank threads run, bit for bit (every point's update is the same operation
/// on the same values).
#[test]
fn poisson_over_mpi_is_the_same_for_every_split_and_exchange() {
    let dir = scratch("poisson");
    let base = [
        "--problem",
        "poisson",
        "--global",
        "16",
        "--decomp",
        "z",
        "--quiet",
    ];
    let one = dir.join("one.json");
    let want = report(&threads(1, &base, &one), &one, "threads 1");
    let err = want["error_max"]
        .as_f64()
        .expect("Poisson reports error_max");
    assert!(err > 0.0 && err < 0.02, "error {err}");
    for exchange in ["blocking", "overlap"] {
        for np in [1, 2, 4] {
            let json = dir.join(format!("{exchange}{np}.json"));
            let mut args = base.to_vec();
            args.extend(["--exchange", exchange]);
            let j = report(
                &mpirun(np, &args, &json),
                &json,
                &format!("{exchange} np={np}"),
            );
            assert_eq!(j["config"]["process_grid"]["z"], np);
            assert_eq!(j["config"]["exchange"], exchange);
            assert_eq!(
                j["iterations"]["max"], want["iterations"]["max"],
                "{exchange} np={np}"
            );
            assert_eq!(
                j["iterations"]["min"], want["iterations"]["min"],
                "{exchange} np={np}"
            );
            let e = j["error_max"].as_f64().unwrap();
            assert_eq!(
                e.to_bits(),
                err.to_bits(),
                "{exchange} np={np}: error {e} vs {err}"
            );
        }
    }
}
