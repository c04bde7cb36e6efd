//! `aiac run --detect snapshot|ibarrier`: under real `mpirun` and `oshrun` the async and
//! racy runs stop converged on a certified residual below tolerance, the report records the
//! scheme and its rounds, and a snapshot's reduced residual is the certified one; a flag
//! without its loop is one error and exit 1.

// Tests read the reports aiac wrote directly, not through aiac's input module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::process::Command;

mod common;

use common::{aiac, scratch, text, within, AIAC};

/// `LAUNCHER -np 2 aiac run --backend B ARGS --json FILE` (launcher, backend).
const LAUNCHERS: [(&str, &str); 2] = [("mpirun", "mpi"), ("oshrun", "shmem")];

/// Relative difference, 0 for two zeros.
fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

/// Snapshot and barrier detection, async and racy, over each launcher at 2 ranks: converged,
/// the true residual (the certification's swap and blocking sum, independent of the scheme's
/// rounds) below tolerance, `config.detect` and every rank's `detect_rounds` recorded and
/// equal; a snapshot's reported residual is the true one to 1e-12 and a snapshot claim was
/// rejected only by a rounding (the run stops on the snapshot it reduced, whose residual the
/// certification sums again in another order: a rejected claim lay below tolerance, its true
/// residual at or above it, the two within 1e-12).
#[test]
fn snapshot_and_barrier_detection_over_a_launcher_stop_below_tol() {
    for (launcher, backend) in LAUNCHERS {
        let dir = scratch(&format!("detect-{backend}"));
        for detect in ["snapshot", "ibarrier"] {
            for variant in ["async", "racy"] {
                let what = format!("{backend} {detect} {variant}");
                let json = dir.join(format!("{detect}-{variant}.json"));
                let mut cmd = Command::new(launcher);
                cmd.args(["-np", "2", AIAC, "run", "--backend", backend])
                    .args(["--variant", variant, "--detect", detect])
                    .args(["--local", "8", "--quiet", "--json"])
                    .arg(&json);
                let out = within(cmd, 120);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{what}: {}{}",
                    text(&out.stdout),
                    text(&out.stderr)
                );
                let j: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
                assert_eq!(j["converged"], true, "{what}");
                assert_eq!(j["config"]["method"]["detect"], detect, "{what}");
                let t = j["residual"]["true"].as_f64().unwrap();
                assert!(t < 1e-4, "{what}: true residual {t} ≥ tol");
                let ranks = j["ranks"].as_array().unwrap();
                let rounds = &ranks[0]["detect_rounds"];
                assert!(rounds.as_u64().is_some_and(|k| k > 0), "{what}: {rounds}");
                for r in ranks {
                    assert_eq!(&r["detect_rounds"], rounds, "{what}: rounds differ");
                    assert_eq!(r["stop"], "criterion", "{what}");
                }
                if detect == "snapshot" {
                    let reported = j["residual"]["reported"].as_f64().unwrap();
                    assert!(rel(reported, t) < 1e-12, "{what}: {reported} vs {t}");
                    for c in j["certifications"].as_array().unwrap() {
                        let (claim, truth) = (&c["reported"], &c["true_residual"]);
                        let (claim, truth) = (claim.as_f64().unwrap(), truth.as_f64().unwrap());
                        let by_rounding =
                            claim < 1e-4 && truth >= 1e-4 && rel(claim, truth) < 1e-12;
                        assert!(c["accepted"] == true || by_rounding, "{what}: {c}");
                    }
                }
            }
        }
    }
}

/// `--detect` where no loop detects that way: the sync variant, another solver, the
/// shared-memory backend, a snapshot of a deep halo; and under `mpirun -np 2` the sync
/// variant. One message naming the flag, exit 1. `--detect reduction`, the default, is what
/// every run takes: given to the sync variant or another solver it runs.
#[test]
fn detection_without_its_loop_is_one_error() {
    let threads = ["run", "--backend", "threads", "-t", "2", "--local", "6"];
    let cases: [&[&str]; 4] = [
        &["--variant", "sync", "--detect", "snapshot"],
        &[
            "--solver",
            "multisplit",
            "--variant",
            "async",
            "--detect",
            "ibarrier",
        ],
        &[
            "--variant",
            "async",
            "--detect",
            "snapshot",
            "--halo-depth",
            "2",
        ],
        &["--solver", "cg", "--detect", "ibarrier"],
    ];
    for case in cases {
        let args: Vec<&str> = threads.iter().chain(case).copied().collect();
        let out = aiac(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{case:?}: {err}");
        assert!(err.contains("--detect"), "{case:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {case:?}: {err}");
    }
    for case in [["--variant", "sync"], ["--solver", "cg"]] {
        let args: Vec<&str> = threads
            .iter()
            .chain(&case)
            .chain(&["--detect", "reduction", "--quiet"])
            .copied()
            .collect();
        let out = aiac(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{case:?}: {}",
            text(&out.stderr)
        );
    }
    let out = aiac(&[
        "run",
        "--backend",
        "shared",
        "-t",
        "2",
        "--local",
        "6",
        "--variant",
        "async",
        "--detect",
        "snapshot",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--detect"),
        "{}",
        text(&out.stderr)
    );

    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", "2", AIAC, "run", "--backend", "mpi", "--local", "6"])
        .args(["--variant", "sync", "--detect", "snapshot"]);
    let out = within(cmd, 120);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("--detect applies").count(), 1, "once: {err}");
}

/// `aiac sweep --detect` runs each scheme as its own configuration (once for sync, which has
/// no detection), and the summary names the scheme of each row.
#[test]
fn a_sweep_compares_the_schemes() {
    let dir = scratch("detect-sweep");
    let out = aiac(&[
        "sweep",
        "--variant",
        "sync,async",
        "--detect",
        "reduction,snapshot,ibarrier",
        "-t",
        "2",
        "--local",
        "6",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}{}", text(&out.stderr));
    assert!(table.contains("4 configuration(s)"), "{table}");
    let header = table.lines().find(|l| l.contains("variant")).unwrap();
    let col = header.find("detect").expect("a detect column");
    for scheme in ["reduction", "snapshot", "ibarrier"] {
        let row = table
            .lines()
            .find(|l| l.get(col..).is_some_and(|r| r.starts_with(scheme)))
            .unwrap_or_else(|| panic!("no row detecting by {scheme}: {table}"));
        assert!(row.contains("converged"), "{row}");
    }
}
