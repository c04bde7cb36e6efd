//! `aiac run --backend mpi` under real `mpirun` and `aiac run --backend shmem` under real
//! `oshrun`, against the threads backend and a serial run: the same solver over a different
//! transport must give the same answers. Every test runs once per launched backend, and every
//! job under `timeout`, so a hang fails the test instead of stalling the suite.

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{
    catches, descendants, env_of, outliving, running, scratch, shm_segments, stop_all, AIAC,
};

/// A backend whose ranks are processes started by a launcher.
struct Launcher {
    /// `mpirun`, `oshrun`.
    cmd: &'static str,
    /// `--backend` value.
    backend: &'static str,
}

const LAUNCHERS: [Launcher; 2] = [
    Launcher {
        cmd: "mpirun",
        backend: "mpi",
    },
    Launcher {
        cmd: "oshrun",
        backend: "shmem",
    },
];

/// `LAUNCHER -np N aiac run --backend B ARGS --json FILE`, killed after two minutes.
fn launch(l: &Launcher, np: usize, args: &[&str], json: &Path) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "120", l.cmd, "-np", &np.to_string(), AIAC, "run"])
        .args(["--backend", l.backend])
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("timeout and the launcher start (scripts/setup.sh installs Open MPI)")
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

/// (iteration, residual) of each point of the report's history ([iteration, residual, time_s]).
fn history(j: &Value) -> Vec<(u64, f64)> {
    let h: Vec<(u64, f64, f64)> = serde_json::from_value(j["history"].clone())
        .expect("history is [[iteration, residual, time_s]]");
    h.into_iter().map(|(i, r, _)| (i, r)).collect()
}

/// Every rank's `breakdown` (where its solve time went) as the solvers time it over a
/// launched backend: non-negative parts, those measured adding up to no more than the solve
/// time and `other_s` the rest, the sweep `compute_s` and the communication parts `comm_s`.
/// With neighbours a rank waits for halos and reduces; alone, it has no halo to pack, send,
/// wait for or unpack.
fn breakdown_adds_up(j: &Value, what: &str) {
    let typed: jacobi::Report =
        serde_json::from_value(j.clone()).expect("the report reads back as a jacobi::Report");
    let np = typed.ranks.len();
    for r in &typed.ranks {
        let b = r
            .breakdown
            .unwrap_or_else(|| panic!("{what}: rank {} has no breakdown", r.rank));
        let what = format!("{what}, rank {}: {b:?}", r.rank);
        assert!(b.parts().iter().all(|&v| v >= 0.0), "{what}");
        let measured: f64 = b.parts()[..6].iter().sum();
        assert!(measured <= r.time_s + 1e-9, "{what}: time {}", r.time_s);
        assert!((measured + b.other_s - r.time_s).abs() < 1e-9, "{what}");
        assert_eq!(b.sweep_s, r.compute_s, "{what}");
        assert!((b.comm_s() - r.comm_s).abs() < 1e-9, "{what}");
        assert!(b.sweep_s > 0.0, "{what}");
        if np > 1 {
            assert!(b.wait_s > 0.0 && b.reduce_s > 0.0, "{what}");
            assert!(b.pack_s > 0.0 && b.send_s > 0.0, "{what}");
        } else {
            assert_eq!(
                [b.pack_s, b.unpack_s, b.send_s, b.wait_s],
                [0.0; 4],
                "{what}"
            );
        }
    }
    assert!(typed.breakdown_per_iteration.is_some(), "{what}");
}

/// Sync over MPI on 1, 2 and 4 ranks (2 and 4 decompose the grid differently) equals the
/// threads backend on 1 rank (a serial run): the same iteration count and a residual history
/// equal to 1e-12 relative (the blocks' sums are added in a different order, nothing else
/// differs: every block performs the same floating-point operations on the same values).
#[test]
fn sync_over_a_launcher_matches_a_serial_run() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("sync-{}", l.backend));
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
            let json = dir.join(format!("{np}.json"));
            let what = format!("{} np={np}", l.backend);
            let j = report(&launch(l, np, &args, &json), &json, &what);
            assert_eq!(j["config"]["backend"], l.backend);
            assert_eq!(j["config"]["ranks"], np);
            breakdown_adds_up(&j, &what);
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
}

/// Async and racy over MPI, oversubscribed (3 ranks on this 2-core machine) and not: every
/// converged run has a true residual below tol, every time.
#[test]
fn async_and_racy_over_a_launcher_converge_only_below_tol() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("async-{}", l.backend));
        for variant in ["async", "racy"] {
            for np in [2, 3] {
                for rep in 0..3 {
                    let json = dir.join(format!("{variant}{np}-{rep}.json"));
                    let args = ["--variant", variant, "--local", "8", "--quiet"];
                    let j = report(
                        &launch(l, np, &args, &json),
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
                        assert_eq!(r["backend"], l.backend);
                    }
                    typed_channel_stats(&j, np, variant);
                    breakdown_adds_up(&j, &format!("{} {variant} np={np}", l.backend));
                }
            }
        }
    }
}

/// The report read back as the typed `jacobi::Report` `aiac report` uses: every rank's
/// channel statistics arrived at rank 0 whole (gathered from every process) and agree with its
/// message totals, every channel's peer is another rank of the job, and after the clean close
/// every message a rank sent was received (or drained) at the other end.
fn typed_channel_stats(j: &Value, np: usize, variant: &str) {
    let typed: jacobi::Report =
        serde_json::from_value(j.clone()).expect("the report reads back as a jacobi::Report");
    assert_eq!(typed.ranks.len(), np);
    let (mut sent, mut received) = (0, 0);
    for (k, r) in typed.ranks.iter().enumerate() {
        assert_eq!(r.rank, k);
        assert!(!r.channels.is_empty(), "rank {k} has channels");
        assert!(
            r.channels.iter().any(|c| c.mode.name() == variant),
            "rank {k}: halo channels in mode {variant}"
        );
        let s: u64 = r.channels.iter().map(|c| c.sent).sum();
        let v: u64 = r.channels.iter().map(|c| c.received).sum();
        assert_eq!((s, v), (r.messages.sent, r.messages.received), "rank {k}");
        for c in &r.channels {
            assert!(c.peer < np && c.peer != k, "rank {k}: peer {}", c.peer);
            assert_eq!(c.received, c.peer_sent, "rank {k}, channel {c:?}");
        }
        assert!(r.messages.received > 0, "rank {k} received halos");
        sent += s;
        received += v;
    }
    assert_eq!(sent, received, "every message sent was received");
}

/// Rank 0 alone prints the table and writes the report, atomically; a bad flag stops every
/// rank with one message.
#[test]
fn rank_0_reports_alone() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("rank0-{}", l.backend));
        let json = dir.join("r.json");
        std::fs::write(&json, "old").unwrap();
        let out = launch(l, 2, &["--variant", "racy", "--global", "12"], &json);
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
        let out = launch(l, 2, &["--tol", "0"], &bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0));
        assert_eq!(
            err.matches("--tol must be").count(),
            1,
            "one message: {err}"
        );
        assert!(!bad.exists(), "no report on bad input");
    }
}

/// `--reduction`: over MPI both algorithms run and the report says which; over SHMEM only the
/// tree exists, and asking for MPI_Iallreduce is one message naming the flag on every rank.
#[test]
fn the_reduction_is_chosen_and_recorded() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("reduction-{}", l.backend));
        let kinds: &[Option<&str>] = if l.backend == "mpi" {
            &[None, Some("tree"), Some("iallreduce")]
        } else {
            &[None, Some("tree")]
        };
        for kind in kinds {
            let json = dir.join(format!("{kind:?}.json"));
            let mut args = vec!["--variant", "async", "--local", "6", "--quiet"];
            if let Some(k) = kind {
                args.extend(["--reduction", k]);
            }
            let j = report(&launch(l, 2, &args, &json), &json, &format!("{kind:?}"));
            let default = if l.backend == "mpi" {
                "iallreduce"
            } else {
                "tree"
            };
            assert_eq!(
                j["config"]["reduction"],
                kind.unwrap_or(default),
                "{kind:?}"
            );
            assert!(j["ranks"][0]["reductions"].as_u64().unwrap() > 0);
        }
        if l.backend == "shmem" {
            let bad = dir.join("bad.json");
            let out = launch(
                l,
                2,
                &["--variant", "async", "--reduction", "iallreduce"],
                &bad,
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert_eq!(err.matches("--reduction iallreduce").count(), 1, "{err}");
            assert!(!bad.exists());
        }
    }
}

/// `-t N` without the launcher: one clear message naming it, exit 1.
#[test]
fn missing_launcher_is_named() {
    for l in &LAUNCHERS {
        let out = Command::new(AIAC)
            .args(["run", "--backend", l.backend, "-t", "4", "--local", "4"])
            .env_remove("OMPI_COMM_WORLD_SIZE")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("{} -np 4", l.cmd)), "{err}");
    }
}

/// A rank whose sweeps are slowed, in async over each launcher: the run converges with its
/// true residual below tol; and stopped by `--max-iters` instead (a tolerance no run of 60
/// iterations reaches), it ends when the first rank reaches the limit, whichever that is:
/// the largest count is the limit exactly, none is above it, and the run exits 2 (not
/// converged). That the slowed rank does fewer iterations than the others is a claim about
/// speed, which a loaded machine can reverse: `scripts/bench-async-claims` measures it.
#[test]
fn async_with_a_slow_rank_converges_and_stops_at_the_first_rank_at_the_limit() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("slow-{}", l.backend));
        let json = dir.join("r.json");
        let slow = [
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
        let j = report(&launch(l, 2, &slow, &json), &json, "slow rank");
        assert_eq!(j["converged"], true, "{}", l.backend);
        let tol = j["tol"].as_f64().unwrap();
        let t = j["residual"]["true"].as_f64().unwrap();
        assert!(t < tol, "{}: true residual {t:e}", l.backend);
        let limited = dir.join("limited.json");
        let mut args = slow.to_vec();
        args.extend(["--max-iters", "60", "--tol", "1e-15"]);
        let out = launch(l, 2, &args, &limited);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&std::fs::read(&limited).unwrap()).unwrap();
        let it: Vec<u64> = j["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["iterations"].as_u64().unwrap())
            .collect();
        assert_eq!(it.iter().max(), Some(&60), "{}: {it:?}", l.backend);
        assert_eq!(j["converged"], false, "{}", l.backend);
    }
}

/// The Poisson problem over MPI, split in z over 1, 2 and 4 ranks, with the blocking and the
/// overlapped exchange: the iteration count and the max error against the exact solution are
/// those of a one-rank threads run, bit for bit (every point's update is the same operation
/// on the same values).
#[test]
fn poisson_over_a_launcher_is_the_same_for_every_split_and_exchange() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("poisson-{}", l.backend));
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
                    &launch(l, np, &args, &json),
                    &json,
                    &format!("{exchange} np={np}"),
                );
                assert_eq!(j["config"]["process_grid"]["z"], np);
                assert_eq!(j["config"]["method"]["exchange"], exchange);
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
}

/// `--halo-depth k` over a launcher gives bit for bit the run of k = 1: the same iteration
/// count, the same residual history, true residual and (Poisson, whose exact solution is
/// known) largest error, compared as f64 bits. On 2, 4 and 8 ranks (4 = a 2x2x1 process
/// grid, whose ghost zones have edges; 8 = 2x2x2, with corners too), odd block sizes, k from
/// 1 to 4.
#[test]
fn deep_halos_over_a_launcher_equal_one_plane_halos() {
    let cases: [(&[&str], &[u64]); 2] = [
        (&["--local", "9,7,11", "--check-every", "12"], &[2, 3, 4]),
        (
            &[
                "--problem",
                "poisson",
                "--global",
                "12",
                "--check-every",
                "6",
            ],
            &[3],
        ),
    ];
    let bits = |v: &Value| v.as_f64().map(f64::to_bits);
    for l in &LAUNCHERS {
        let dir = scratch(&format!("deep-{}", l.backend));
        for (c, (base, depths)) in cases.iter().enumerate() {
            // 8 = 2x2x2: blocks with corner neighbours.
            let nps: &[usize] = if c == 0 { &[2, 4, 8] } else { &[2, 4] };
            for &np in nps {
                let mut args = base.to_vec();
                args.push("--quiet");
                let json = dir.join(format!("{c}-{np}-1.json"));
                let what = format!("{} np={np} {base:?}", l.backend);
                let want = report(&launch(l, np, &args, &json), &json, &what);
                assert!(want["iterations"]["max"].as_f64().unwrap() > 12.0, "{what}");
                for &k in *depths {
                    let json = dir.join(format!("{c}-{np}-{k}.json"));
                    let ks = k.to_string();
                    let mut a = args.clone();
                    a.extend(["--halo-depth", &ks]);
                    let what = format!("{what} k={k}");
                    let j = report(&launch(l, np, &a, &json), &json, &what);
                    assert_eq!(j["config"]["method"]["halo_depth"], k, "{what}");
                    assert_eq!(j["iterations"], want["iterations"], "{what}");
                    let h = |j: &Value| -> Vec<(u64, u64)> {
                        history(j).iter().map(|&(i, r)| (i, r.to_bits())).collect()
                    };
                    assert_eq!(h(&j), h(&want), "{what}: residual history");
                    assert_eq!(
                        bits(&j["residual"]["true"]),
                        bits(&want["residual"]["true"]),
                        "{what}"
                    );
                    assert_eq!(bits(&j["error_max"]), bits(&want["error_max"]), "{what}");
                    // k times fewer halo messages (plus the exchanges before the initial and
                    // the certified residual).
                    let sent = |j: &Value| j["messages"]["sent"].as_u64().unwrap();
                    assert!(
                        sent(&j) * k <= sent(&want) + 4 * k * np as u64 * 2,
                        "{what}"
                    );
                }
                // `auto` over the launcher's collectives: one k on every rank, the same run.
                let json = dir.join(format!("{c}-{np}-auto.json"));
                let mut a = args.clone();
                a.extend(["--halo-depth", "auto"]);
                let what = format!("{what} auto");
                let j = report(&launch(l, np, &a, &json), &json, &what);
                assert_eq!(j["config"]["method"]["halo_depth"], "auto", "{what}");
                assert_eq!(j["iterations"], want["iterations"], "{what}");
                let chosen = &j["halo_auto"]["chosen"];
                let tried: Vec<&Value> = j["halo_auto"]["candidates"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| &p["k"])
                    .collect();
                assert!(tried.len() >= 2 && tried.contains(&chosen), "{what}: {j}");
                for r in j["ranks"].as_array().unwrap() {
                    assert_eq!(&r["halo_auto"]["chosen"], chosen, "{what}");
                }
            }
        }
    }
}

/// Async and racy with deep halos over a launcher on 8 ranks (a 2x2x2 process grid,
/// oversubscribed): every run converges with a certified true residual below tol (the
/// certification's synchronous exchange fills the ghost zone, edges and corners included, and
/// the true residual is computed from it, an independent check of the claim), and every
/// message sent, on the faces' channels and the certification's, was received at the other
/// end.
#[test]
fn async_and_racy_with_deep_halos_over_a_launcher_certify_below_tol() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("deep-async-{}", l.backend));
        for variant in ["async", "racy"] {
            let json = dir.join(format!("{variant}.json"));
            let args = [
                "--variant",
                variant,
                "--local",
                "7,6,5",
                "--halo-depth",
                "3",
                "--quiet",
            ];
            let what = format!("{} {variant} np=8 k=3", l.backend);
            let j = report(&launch(l, 8, &args, &json), &json, &what);
            assert_eq!(j["config"]["method"]["halo_depth"], 3, "{what}");
            assert_eq!(j["converged"], true, "{what}");
            let t = j["residual"]["true"].as_f64().unwrap();
            assert!(t < 1e-4, "{what}: true residual {t} ≥ tol");
            typed_channel_stats(&j, 8, variant);
        }
    }
}

/// `LAUNCHER -np 2` with every output file: rank 0 alone prints the progress line and the
/// table and writes the files, each atomically.
#[test]
fn rank_0_writes_csv_and_history_alone() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("files-{}", l.backend));
        let (json, csv, hist) = (dir.join("r.json"), dir.join("r.csv"), dir.join("h.csv"));
        let out = Command::new("timeout")
            .args([
                "-k",
                "5",
                "120",
                l.cmd,
                "-np",
                "2",
                AIAC,
                "run",
                "--backend",
                l.backend,
            ])
            .args(["--variant", "racy", "--global", "12"])
            .args(["--json", json.to_str().unwrap()])
            .args(["--csv", csv.to_str().unwrap()])
            .args(["--history", hist.to_str().unwrap()])
            .output()
            .unwrap();
        let j = report(&out, &json, "racy np=2 with files");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("aiac run:").count(), 1, "{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let progress = stderr.lines().filter(|l| l.starts_with("[aiac]")).count();
        assert!(progress >= 1, "a progress line: {stderr}");
        if j["time_s"].as_f64().unwrap() < 0.5 {
            assert_eq!(progress, 1, "rank 0 alone shows progress: {stderr}");
        }
        let c = std::fs::read_to_string(&csv).unwrap();
        let ranks: Vec<&str> = c
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap())
            .collect();
        assert_eq!(ranks, ["0", "1"], "{c}");
        assert!(c
            .lines()
            .skip(1)
            .all(|line| line.split(',').nth(1) == Some(l.backend)));
        let h = std::fs::read_to_string(&hist).unwrap();
        for r in ["0", "1"] {
            assert!(
                h.lines().skip(1).any(|l| l.split(',').next() == Some(r)),
                "history of rank {r}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");
    }
}

/// `aiac sweep --backend mpi|shmem` starts `mpirun` or `oshrun` itself (with the environment Open MPI needs here,
/// even when the caller's lacks it) over 1 and 2 processes and prints the speedup and
/// efficiency table of both exchanges; `aiac report` prints the same from the saved runs.
#[test]
fn sweep_over_a_launcher_prints_speedup_for_both_exchanges() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("sweep-{}", l.backend));
        let out = dir.join("sw");
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "300", AIAC, "sweep", "--backend", l.backend])
            .args(["--problem", "poisson", "--global", "8", "--decomp", "z"])
            .args(["--variant", "sync", "--exchange", "blocking,overlap"])
            .args(["--ranks", "1,2", "--max-iters", "20", "--timeout", "120"])
            .args(["--out", out.to_str().unwrap()]);
        for k in [
            "OMPI_ALLOW_RUN_AS_ROOT",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
            "OMPI_MCA_rmaps_base_oversubscribe",
            "OMPI_MCA_osc",
        ] {
            cmd.env_remove(k);
        }
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        for exchange in ["blocking", "overlap"] {
            let head = format!("speedup S_p = T_1/T_p and efficiency E_p = S_p/p: sync {exchange}");
            let at = stdout
                .find(&head)
                .unwrap_or_else(|| panic!("no speedup table for {exchange}: {stdout}"));
            let rows: Vec<Vec<&str>> = stdout[at..]
                .lines()
                .skip(2)
                .take(2)
                .map(|l| l.split_whitespace().collect())
                .collect();
            assert_eq!(rows[0][0], "1");
            assert_eq!((rows[0][2], rows[0][3]), ("1.00", "1.00"), "{stdout}");
            assert_eq!(rows[1][0], "2");
            let (s, e): (f64, f64) = (rows[1][2].parse().unwrap(), rows[1][3].parse().unwrap());
            // S_p prints with two decimals: a 2-rank run of 20 iterations descheduled on a
            // loaded machine (0.42 s against 1.6 ms once) prints 0.00, which is right.
            assert!(
                s >= 0.0 && (e - s / 2.0).abs() < 0.01,
                "E_p = S_p/p: {stdout}"
            );
            assert_eq!(rows[1][5], "max-iters", "fixed --max-iters: {stdout}");
        }
        let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
        assert_eq!(csv.lines().count(), 5, "{csv}");
        assert!(
            csv.lines()
                .skip(1)
                .all(|line| line.contains(&format!(",max_iters,2,{},", l.backend))),
            "{csv}"
        );
        assert!(out.join("plots/vs_p.png").exists());
        let rep = Command::new(AIAC)
            .args(["report", out.to_str().unwrap()])
            .output()
            .unwrap();
        let rep = String::from_utf8_lossy(&rep.stdout);
        let table = |s: &str| s.split("\nreports ").next().unwrap().trim_end().to_string();
        assert_eq!(table(&rep), table(&stdout));
    }
}

/// `mpirun -np 4 aiac ARGS` with the variables `env` set, killed after two minutes.
fn mpirun4(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "120", "mpirun", "-np", "4", AIAC])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("timeout and mpirun start")
}

/// Under mpirun every rank finds the same bad input: the message reaches the user exactly
/// once, whichever rank runs first (a usage error before MPI starts, a refused size after
/// it, a threads run started by mpirun, a bad value of one of aiac's variables), and the job
/// exits non-zero.
#[test]
fn input_errors_under_mpirun_are_printed_once() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &["run", "--backend", "mpi", "--no-such-flag"],
            &[],
            "error: unexpected argument",
        ),
        (
            &["run", "--backend", "mpi", "--local", "100000"],
            &[],
            "needs about",
        ),
        (
            &["run", "--backend", "threads", "--local", "4"],
            &[],
            "one of 4",
        ),
        (
            &["run", "--backend", "mpi", "--local", "8"],
            &[("AIAC_MPI_REMOTE", "yes")],
            "AIAC_MPI_REMOTE=\"yes\"",
        ),
        (
            &["run", "--backend", "mpi", "--local", "8"],
            &[("AIAC_WAIT", "fast")],
            "AIAC_WAIT=\"fast\"",
        ),
    ];
    for round in 0..3 {
        for (args, env, needle) in cases {
            let out = mpirun4(args, env);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
            assert_eq!(
                err.matches(needle).count(),
                1,
                "round {round}, {args:?}: once: {err}"
            );
        }
    }
}

/// `aiac sweep --backend mpi` signalled by its PID stops mpirun and its ranks, and waits for
/// them, before it exits: nothing keeps running, nothing writes into its directory after.
#[test]
fn a_signalled_sweep_stops_mpirun_and_its_ranks() {
    let dir = scratch("sweep-signal");
    let out = dir.join("sw");
    let mut sweep = Command::new(AIAC)
        .args(["sweep", "--backend", "mpi", "-t", "2", "--local", "24"])
        .args(["--tol", "1e-12", "--slow-rank", "0", "--slowdown", "1000"])
        .args(["--quiet", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // mpirun and both ranks have started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut procs = Vec::new();
    while std::time::Instant::now() < deadline {
        procs = descendants(sweep.id());
        let ranks = procs
            .iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.starts_with(AIAC))
            })
            .count();
        if ranks >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(procs.len() >= 3, "mpirun and 2 ranks: {procs:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sweep.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = sweep.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed().as_secs() < 30, "the sweep did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(143));
    for p in procs {
        assert!(!running(p), "process {p} outlived the sweep");
    }
}

/// `aiac sweep` over a launcher killed by SIGKILL, which it cannot catch to stop its run: the
/// launcher is sent SIGTERM as the sweep dies, and stops its ranks and removes their
/// shared-memory segments, instead of running on for nobody.
#[test]
fn a_killed_sweep_takes_the_launcher_and_its_ranks_with_it() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("sweep-killed-{}", l.backend));
        let mut sweep = Command::new(AIAC)
            .args(["sweep", "--backend", l.backend, "-t", "2", "--local", "24"])
            .args([
                "--tol",
                "1e-12",
                "--slow-rank",
                "0",
                "--slowdown",
                "1000",
                "--quiet",
            ])
            .arg("--out")
            .arg(dir.join("sw"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The launcher and both ranks run, their segments mapped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let (procs, segments) = loop {
            let procs = descendants(sweep.id());
            let ranks: Vec<u32> = procs
                .iter()
                .copied()
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.starts_with(AIAC))
                })
                .collect();
            let segments = shm_segments(&ranks);
            if ranks.len() >= 2 && !segments.is_empty() {
                break (procs, segments);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{}: the launcher and 2 ranks: {procs:?}",
                l.cmd
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(sweep.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let _ = sweep.wait();
        let left = outliving(&procs, 10);
        stop_all(&left);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            left.is_empty(),
            "{}: {left:?} outlived the killed sweep",
            l.cmd
        );
        let kept: Vec<_> = segments.iter().filter(|f| f.exists()).collect();
        assert!(kept.is_empty(), "{}: segments left: {kept:?}", l.cmd);
    }
}

/// SIGTERM to an OpenSHMEM PE other than PE 0 stops it, and oshrun stops the job, as SIGTERM
/// to an MPI rank does: OSHMEM's init installs a SIGTERM handler that does nothing, which
/// `ShmemCtx::init` undoes. The signal is sent once the PE's OSHMEM has installed its
/// handlers (SIGUSR1's, in the same step as SIGTERM's).
#[test]
fn sigterm_to_a_pe_other_than_0_stops_the_oshrun_job() {
    let dir = scratch("pe-sigterm");
    let json = dir.join("r.json");
    let mut job = Command::new("oshrun")
        .args(["-np", "3", AIAC, "run", "--backend", "shmem"])
        .args(["--variant", "async", "--local", "12", "--tol", "1e-12"])
        .args(["--slow-rank", "0", "--slowdown", "1000"])
        .args(["--max-iters", "100000000", "-q", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("oshrun starts (scripts/setup.sh installs Open MPI)");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pe1 = loop {
        let pe1 = descendants(job.id())
            .into_iter()
            .find(|&p| env_of(p, "OMPI_COMM_WORLD_RANK").as_deref() == Some("1"));
        if let Some(p) = pe1.filter(|&p| catches(p, nix::sys::signal::Signal::SIGUSR1 as i32)) {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "PE 1 started SHMEM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let procs = descendants(job.id());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pe1 as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let ran_on = outliving(&[job.id()], 20);
    stop_all(&ran_on);
    let status = job.wait().unwrap();
    let left = outliving(&procs, 5);
    stop_all(&left);
    let reported = json.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ran_on.is_empty(),
        "PE 1 ignored SIGTERM: the job ran on for 20 s"
    );
    assert!(!status.success(), "{status:?}");
    assert!(!reported, "no report of a stopped run");
    assert!(left.is_empty(), "PE processes {left:?} outlived oshrun");
}

/// CG and pipelined CG over MPI and SHMEM on 1, 2, 3 and 4 ranks take the iteration count of
/// the threads backend on one rank, and converge to the same tolerance, certified.
#[test]
fn krylov_over_a_launcher_matches_a_serial_run() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("krylov-{}", l.backend));
        for solver in ["cg", "cg-overlap", "pipecg"] {
            let args = ["--solver", solver, "--global", "12,8,8", "--quiet"];
            let serial_json = dir.join(format!("{solver}-serial.json"));
            let serial = report(&threads(1, &args, &serial_json), &serial_json, "serial");
            let want = serial["iterations"]["max"].as_f64().unwrap();
            assert!(want > 10.0, "{solver}: {want} iterations");
            for np in 1..=4 {
                let json = dir.join(format!("{solver}-{np}.json"));
                let what = format!("{solver} over {} np={np}", l.backend);
                let j = report(&launch(l, np, &args, &json), &json, &what);
                assert_eq!(j["config"]["ranks"], np);
                assert_eq!(j["config"]["method"]["solver"], solver);
                breakdown_adds_up(&j, &what);
                assert_eq!(j["iterations"]["min"].as_f64(), Some(want), "{what}");
                assert_eq!(j["iterations"]["max"].as_f64(), Some(want), "{what}");
                assert!(j["residual"]["true"].as_f64().unwrap() < 1e-8, "{what}");
            }
        }
    }
}

/// gmres and bicgstab on the grid over MPI and SHMEM on 1 and 2 ranks, without a
/// preconditioner and with block Jacobi (ILU(0) of each rank's block, so the blocks are the
/// decomposition's: compared at the same number of ranks), take the threads backend's
/// iterations (±1: the reductions sum in another order) and converge, certified.
#[test]
fn gmres_and_bicgstab_over_a_launcher_match_threads() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("nonsym-{}", l.backend));
        for solver in ["gmres", "bicgstab"] {
            for pc in ["none", "bjacobi"] {
                for np in 1..=2 {
                    let args = [
                        "--solver", solver, "--pc", pc, "--global", "12,8,8", "--quiet",
                    ];
                    let tj = dir.join(format!("{solver}-{pc}-{np}-threads.json"));
                    let t = report(&threads(np, &args, &tj), &tj, "threads");
                    let want = t["iterations"]["max"].as_f64().unwrap();
                    assert!(want > 5.0, "{solver} {pc}: {want} iterations");
                    let json = dir.join(format!("{solver}-{pc}-{np}.json"));
                    let what = format!("{solver} --pc {pc} over {} np={np}", l.backend);
                    let j = report(&launch(l, np, &args, &json), &json, &what);
                    assert_eq!(j["config"]["method"]["solver"], solver);
                    breakdown_adds_up(&j, &what);
                    let its = j["iterations"]["max"].as_f64().unwrap();
                    assert!((its - want).abs() <= 1.0, "{what}: {its} vs {want}");
                    assert_eq!(j["converged"], true, "{what}");
                    assert!(j["residual"]["true"].as_f64().unwrap() < 1e-8, "{what}");
                }
            }
        }
    }
}

/// Async multisplitting over mpirun and oshrun with rank 0 slowed per inner iteration
/// (`--slow-rank 0 --slowdown 20`): it converges, its true residual below tol, and the slowed
/// rank's inner solves were cut short by its neighbour's fresher faces (counted in its
/// record), so it did fewer inner iterations per outer iteration than its neighbour, which
/// is not behind anyone and so solves to the inner tolerance. 20×, not the benchmark's 2×:
/// a 16³ block's solve is shorter than a scheduler's time slice, and on a loaded machine the
/// neighbour must still finish well within the slow rank's solve.
#[test]
fn async_multisplit_with_a_slowed_rank_cuts_its_solves_short_over_a_launcher() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("multisplit-slow-{}", l.backend));
        let json = dir.join("ms-async-slow.json");
        let what = format!("async multisplit, rank 0 slowed, over {}", l.cmd);
        let args = [
            "--local",
            "16",
            "--solver",
            "multisplit",
            "--variant",
            "async",
            "--slow-rank",
            "0",
            "--slowdown",
            "20",
        ];
        let m = report(&launch(l, 2, &args, &json), &json, &what);
        assert_eq!(m["converged"], true, "{what}");
        let tol = m["tol"].as_f64().unwrap();
        let t = m["residual"]["true"].as_f64().unwrap();
        assert!(t < tol, "{what}: true residual {t:e}");
        let rank = |k: usize| &m["ranks"][k]["multisplit"];
        let cut = rank(0)["inner_cut_short"].as_u64().unwrap();
        assert!(cut > 0, "{what}: {}", rank(0));
        let per_outer = |k: usize| rank(k)["inner_per_outer"].as_f64().unwrap();
        assert!(
            per_outer(0) < per_outer(1),
            "{what}: {} against {}",
            rank(0),
            rank(1)
        );
    }
}

/// Multisplitting over mpirun and oshrun at 2 and 4 ranks, sync and async: it converges
/// with its true residual below tol, and every outer iteration is at least one inner one.
/// Sync multisplitting, whose ranks step together, needs at least 10× fewer outer iterations
/// than Jacobi (sync, checked every iteration, so its count is exact) needs iterations on
/// the same problem, run here: both counts are the same in every run. Blocks of 16³: the
/// advantage grows with the block (docs/performance.md). An async run's outer count depends
/// on how its ranks are scheduled (52-60 in quiet runs, 75 once in CI with another test's
/// ranks on the same cores, against Jacobi's 725), so its bound is a claim about speed:
/// `scripts/bench-async-claims` measures it.
#[test]
fn multisplit_over_a_launcher_needs_10x_fewer_outer_iterations() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("multisplit-{}", l.backend));
        for np in [2, 4] {
            let json = dir.join(format!("jacobi-{np}.json"));
            let base = ["--local", "16", "--check-every", "1"];
            let what = format!("jacobi over {} -np {np}", l.cmd);
            let j = report(&launch(l, np, &base, &json), &json, &what);
            assert_eq!(j["converged"], true, "{what}");
            let jacobi = j["iterations"]["max"].as_f64().unwrap();
            for variant in ["sync", "async"] {
                let json = dir.join(format!("ms-{variant}-{np}.json"));
                let what = format!("multisplit {variant} over {} -np {np}", l.cmd);
                let args = [
                    "--local",
                    "16",
                    "--solver",
                    "multisplit",
                    "--variant",
                    variant,
                ];
                let m = report(&launch(l, np, &args, &json), &json, &what);
                assert_eq!(m["converged"], true, "{what}");
                let tol = m["tol"].as_f64().unwrap();
                let t = m["residual"]["true"].as_f64().unwrap();
                assert!(t < tol, "{what}: true residual {t:e}");
                let outer = m["iterations"]["max"].as_f64().unwrap();
                assert!(m["inner_iterations"]["min"].as_f64().unwrap() >= outer);
                if variant == "sync" {
                    assert!(
                        outer * 10.0 <= jacobi,
                        "{what}: {outer} outer iterations, Jacobi {jacobi}"
                    );
                }
            }
        }
    }
}

/// `LAUNCHER LAUNCHER_ARGS -np N aiac run --backend B ARGS --json FILE`, killed after two
/// minutes.
fn launch_with(
    l: &Launcher,
    launcher_args: &[&str],
    np: usize,
    args: &[&str],
    json: &Path,
) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "120", l.cmd])
        .args(launcher_args)
        .args(["-np", &np.to_string(), AIAC, "run"])
        .args(["--backend", l.backend])
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("timeout and the launcher start (scripts/setup.sh installs Open MPI)")
}

/// What a sync run must reproduce bit for bit whatever its threads per rank: the iteration
/// counts, the residual history, the reported and true residuals, every rank's error and
/// certifications.
fn sync_fingerprint(j: &Value) -> Vec<String> {
    let bits = |v: &Value| v.as_f64().map(f64::to_bits);
    let mut out = vec![
        format!("iterations {}", j["iterations"]),
        format!(
            "history {:?}",
            history(j)
                .iter()
                .map(|&(i, r)| (i, r.to_bits()))
                .collect::<Vec<_>>()
        ),
        format!(
            "residual {:?} {:?}",
            bits(&j["residual"]["reported"]),
            bits(&j["residual"]["true"])
        ),
    ];
    for r in j["ranks"].as_array().expect("ranks") {
        out.push(format!(
            "rank {} iterations {} error {:?} true {:?} certifications {}",
            r["rank"],
            r["iterations"],
            bits(&r["error_max"]),
            bits(&r["residual"]["true_residual"]),
            r["certifications"]
        ));
    }
    out
}

/// Hybrid ranks (`--threads-per-rank 2`) in sync over mpirun and oshrun: the run of one
/// thread per rank, bit for bit, on 1 and 2 ranks, with a residual summed by the team at every
/// sweep (Laplace, --check-every 1) and with a source term (Poisson), the ranks bound to one
/// core each (`--bind-to core`, Open MPI's default: the workers run unpinned, rank 0 warns
/// once) and unbound (`--bind-to none`: the workers are pinned).
#[test]
fn hybrid_sync_over_a_launcher_equals_one_thread_per_rank() {
    let cases: [&[&str]; 2] = [
        &["--global", "8,10,12", "--check-every", "1"],
        &[
            "--problem",
            "poisson",
            "--global",
            "12",
            "--check-every",
            "5",
        ],
    ];
    for l in &LAUNCHERS {
        let dir = scratch(&format!("hybrid-sync-{}", l.backend));
        for (c, base) in cases.iter().enumerate() {
            for np in [1, 2] {
                let mut args = base.to_vec();
                args.push("--quiet");
                let json = dir.join(format!("{c}-{np}-1.json"));
                let what = format!("{} np={np} {base:?}", l.backend);
                let want = report(&launch(l, np, &args, &json), &json, &what);
                assert_eq!(want["config"]["threads_per_rank"], 1, "{what}");
                assert!(want["iterations"]["max"].as_f64().unwrap() > 20.0, "{what}");
                // Bound to a core each, a rank cannot pin its 2 threads: rank 0 says so,
                // once; unbound, each rank has both CPUs and pins them silently.
                for (bind, warns) in [("core", 1), ("none", 0)] {
                    let bind = ["--bind-to", bind];
                    let json = dir.join(format!("{c}-{np}-2.json"));
                    let mut a = args.clone();
                    a.retain(|&s| s != "--quiet");
                    a.extend(["--threads-per-rank", "2"]);
                    let what = format!("{what} {bind:?} x 2 threads");
                    let out = launch_with(l, &bind, np, &a, &json);
                    let j = report(&out, &json, &what);
                    assert_eq!(j["config"]["threads_per_rank"], 2, "{what}");
                    assert_eq!(sync_fingerprint(&j), sync_fingerprint(&want), "{what}");
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    assert!(stdout.contains("x 2 threads"), "{what}: {stdout}");
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    let warned = stderr.matches("run unpinned").count();
                    assert_eq!(warned, warns, "{what}: {stderr}");
                }
            }
        }
    }
}

/// Async and racy hybrid ranks (2 ranks x 2 threads, oversubscribed on this 2-core machine)
/// converge, and the certified true residual meets the tolerance.
#[test]
fn hybrid_async_and_racy_over_a_launcher_certify_below_tol() {
    for l in &LAUNCHERS {
        let dir = scratch(&format!("hybrid-async-{}", l.backend));
        for variant in ["async", "racy"] {
            let json = dir.join(format!("{variant}.json"));
            let args = [
                "--variant",
                variant,
                "--global",
                "12",
                "--threads-per-rank",
                "2",
                "--quiet",
            ];
            let what = format!("{} {variant} np=2 x 2 threads", l.backend);
            let j = report(&launch(l, 2, &args, &json), &json, &what);
            assert_eq!(j["config"]["threads_per_rank"], 2, "{what}");
            assert_eq!(j["converged"], true, "{what}");
            let t = j["residual"]["true"].as_f64().unwrap();
            assert!(t <= 1e-4, "{what}: true residual {t} > tol");
            for r in j["ranks"].as_array().unwrap() {
                let certs = r["certifications"].as_array().unwrap();
                let last = certs.last().unwrap_or_else(|| panic!("{what}: certified"));
                assert_eq!(last["accepted"], true, "{what}");
                assert!(last["true_residual"].as_f64().unwrap() <= 1e-4, "{what}");
            }
        }
    }
}

/// Bad `--threads-per-rank` under mpirun and oshrun (0, too many for the limit or for a
/// rank's planes, with a solver or backend that runs one thread per rank): one message
/// naming the flag, exit 1.
#[test]
fn hybrid_input_errors_under_a_launcher_are_printed_once() {
    let cases: [(&[&str], &str); 5] = [
        (&["--threads-per-rank", "0"], "at least 1"),
        (&["--threads-per-rank", "100000"], "at most 256"),
        (&["--local", "8,8,4", "--threads-per-rank", "5"], "z-plane"),
        (&["--solver", "cg", "--threads-per-rank", "2"], "Krylov"),
        (
            &["--solver", "multisplit", "--threads-per-rank", "2"],
            "multisplitting",
        ),
    ];
    for l in &LAUNCHERS {
        for (args, needle) in cases {
            let out = Command::new("timeout")
                .args(["-k", "5", "120", l.cmd, "-np", "2", AIAC, "run"])
                .args(["--backend", l.backend])
                .args(args)
                .output()
                .expect("the launcher starts");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{} {args:?}: {err}", l.backend);
            assert_eq!(
                err.matches("--threads-per-rank").count(),
                1,
                "{} {args:?}: once: {err}",
                l.backend
            );
            assert_eq!(
                err.matches(needle).count(),
                1,
                "{} {args:?}: {err}",
                l.backend
            );
        }
    }
}

/// `--exchange neighbor` (one `MPI_Ineighbor_alltoallv` per swap on a distributed-graph
/// communicator) over mpirun on 2 and 4 ranks (4: a 2x2x1 process grid) is the run of
/// `--exchange waitall` over channels, bit for bit: sync Jacobi on Laplace with a residual
/// every sweep, on Poisson with a halo every second sweep, and CG (its product's halo and its
/// true residuals' through the collective) with the Jacobi preconditioner.
#[test]
fn neighbor_exchange_over_mpi_equals_waitall_bit_for_bit() {
    let l = &LAUNCHERS[0];
    let dir = scratch("neighbor-mpi");
    let cases: [&[&str]; 3] = [
        &["--global", "8,10,12", "--check-every", "1"],
        &[
            "--problem",
            "poisson",
            "--global",
            "12",
            "--check-every",
            "4",
            "--halo-every",
            "2",
        ],
        &["--solver", "cg", "--pc", "jacobi", "--global", "12,8,8"],
    ];
    for (c, base) in cases.iter().enumerate() {
        for np in [2, 4] {
            let mut fingerprints = Vec::new();
            for exchange in ["waitall", "neighbor"] {
                let mut args = base.to_vec();
                args.extend(["--exchange", exchange, "--quiet"]);
                let json = dir.join(format!("{c}-{np}-{exchange}.json"));
                let what = format!("np={np} {base:?} --exchange {exchange}");
                let j = report(&launch(l, np, &args, &json), &json, &what);
                assert_eq!(j["config"]["method"]["exchange"], exchange, "{what}");
                assert_eq!(j["config"]["ranks"], np, "{what}");
                assert!(j["iterations"]["max"].as_f64().unwrap() > 10.0, "{what}");
                assert_eq!(j["converged"], true, "{what}");
                breakdown_adds_up(&j, &what);
                fingerprints.push(sync_fingerprint(&j));
            }
            assert_eq!(fingerprints[0], fingerprints[1], "np={np} {base:?}");
        }
    }
}

/// `aiac sweep --solver cg --exchange waitall,neighbor --backend mpi` runs CG once per
/// exchange, and the CSV and the summary name each run's exchange.
#[test]
fn a_cg_sweep_runs_each_exchange() {
    let dir = scratch("sweep-cg-exchange");
    let out = dir.join("sw");
    let o = Command::new("timeout")
        .args([
            "-k",
            "5",
            "300",
            AIAC,
            "sweep",
            "--backend",
            "mpi",
            "-t",
            "2",
        ])
        .args(["--solver", "cg", "--global", "8"])
        .args(["--exchange", "waitall,neighbor", "--timeout", "120"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "exchange").unwrap();
    let exchanges: Vec<String> = lines
        .map(|l| l.split(',').nth(col).unwrap().to_string())
        .collect();
    assert_eq!(exchanges, ["waitall", "neighbor"], "{csv}");
    for exchange in ["waitall", "neighbor"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().any(|w| w == exchange)),
            "the summary names {exchange}: {stdout}"
        );
    }
}

/// `--exchange neighbor` where it cannot run gets one clear error, printed once, and a
/// non-zero exit: over threads and SHMEM (no neighbourhood collectives: the message names
/// the backend), and over MPI with async, with a deep halo, and with pipelined CG.
#[test]
fn neighbor_exchange_is_refused_where_it_cannot_run() {
    let dir = scratch("neighbor-refused");
    let json = dir.join("never.json");
    let neighbor = ["--exchange", "neighbor", "--global", "8"];
    let with = |more: &[&'static str]| -> Vec<&str> {
        let mut a = neighbor.to_vec();
        a.extend(more);
        a
    };
    let mut outs = vec![(
        threads(2, &neighbor, &json),
        "--exchange neighbor is not supported with --backend threads",
    )];
    outs.push((
        launch(&LAUNCHERS[1], 2, &neighbor, &json),
        "--exchange neighbor is not supported with --backend shmem",
    ));
    let mpi = &LAUNCHERS[0];
    outs.push((
        launch(mpi, 2, &with(&["--variant", "async"]), &json),
        "--exchange neighbor applies to --variant sync only",
    ));
    outs.push((
        launch(mpi, 2, &with(&["--halo-depth", "2"]), &json),
        "does not combine with --exchange neighbor",
    ));
    outs.push((
        launch(mpi, 2, &with(&["--solver", "pipecg"]), &json),
        "--exchange neighbor applies to --solver jacobi and cg",
    ));
    for (out, needle) in outs {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{needle}: {err}");
        assert_eq!(err.matches(needle).count(), 1, "once: {needle}: {err}");
    }
    assert!(!json.exists(), "no report of a refused run");
}
