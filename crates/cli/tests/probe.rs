//! `aiac probe` under real `mpirun -np 2` (Open MPI): the eager/rendezvous threshold it finds
//! for the shared-memory transport (pml ob1, btl vader) must be within a factor of 2 of the
//! eager limit the job is configured with, for two limits 16× apart, so a probe that found
//! the same number whatever the limit would fail one of them; the same for the TCP transport
//! with its limit set below its default. And bad input fails cleanly.

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

mod common;

use common::{scratch, text, within, AIAC};

/// One probe job at a time: two would share the cores and each other's timings.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// `mpirun --mca pml ob1 --mca btl self,BTL --mca btl_BTL_eager_limit LIMIT -np 2 aiac probe
/// --sizes SIZES --out DIR` (plus `--transport tcp` for tcp), killed after three minutes; the
/// report's JSON.
fn probe_on(btl: &str, limit: u64, sizes: &str, name: &str) -> Value {
    let v = run_probe(btl, limit, sizes, name, &[], "probe");
    assert!(v["schema"] == "aiac.probe/1", "{v}");
    v
}

/// The same with `extra` arguments; `FILE.json` read back (FILE.csv beside it).
fn run_probe(btl: &str, limit: u64, sizes: &str, name: &str, extra: &[&str], file: &str) -> Value {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch(name);
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        &format!("self,{btl}"),
    ])
    .args([
        "--mca",
        &format!("btl_{btl}_eager_limit"),
        &limit.to_string(),
    ])
    .args(["-np", "2", AIAC, "probe", "--sizes", sizes]);
    if btl == "tcp" {
        cmd.args(["--transport", "tcp"]);
    }
    cmd
        // A short computation keeps the test quick; the protocol verdict does not depend on
        // it (a rendezvous send can never complete before its receive is posted).
        .args(["--reps", "5"])
        .args(if extra.contains(&"--compute-ms") {
            &[][..]
        } else {
            &["--compute-ms", "3"][..]
        })
        .args(extra)
        .arg("--out")
        .arg(&dir);
    let out = within(cmd, 180);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let json = std::fs::read_to_string(dir.join(format!("{file}.json"))).expect("the JSON written");
    assert!(
        dir.join(format!("{file}.csv")).is_file(),
        "{file}.csv written"
    );
    if file != "cumulative" {
        for f in ["png", "svg"] {
            assert!(
                dir.join(format!("{file}.{f}")).is_file(),
                "{file}.{f} written"
            );
        }
    }
    let v: Value = serde_json::from_str(&json).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    v
}

fn check_threshold(btl: &str, limit: u64, sizes: &str, name: &str) {
    let v = probe_on(btl, limit, sizes, name);
    assert_eq!(v["path"], format!("pml ob1, btl self,{btl}"), "{v}");
    // The channel column runs on chan-mpi's MPI messages, not the node's shared window.
    assert_eq!(v["channel_path"], "two-sided", "{v}");
    // The probe reads the configured limit back from ompi_info (the same environment).
    assert_eq!(v["configured_eager_limit"]["bytes"], limit, "{v}");
    let last = v["threshold"]["last_eager"].as_u64();
    let first = v["threshold"]["first_rendezvous"].as_u64();
    let (Some(last), Some(first)) = (last, first) else {
        panic!("no threshold found with btl_{btl}_eager_limit={limit}: {v:#}");
    };
    assert!(last < first, "{v}");
    // The limit counts ob1's and vader's headers, so the largest eager payload is a little
    // below it; a factor of 2 either way is the bound.
    assert!(
        (limit / 2..=limit * 2).contains(&last),
        "threshold {last} B not within a factor 2 of btl_{btl}_eager_limit={limit}: {v:#}"
    );
}

#[test]
fn threshold_follows_a_4k_eager_limit() {
    check_threshold("vader", 4096, "512..64K", "eager4k");
}

#[test]
fn threshold_follows_a_64k_eager_limit() {
    check_threshold("vader", 65536, "4K..1M", "eager64k");
}

/// The TCP BTL's limit, set below its 64 KB default.
#[test]
fn threshold_follows_a_16k_tcp_eager_limit() {
    check_threshold("tcp", 16384, "2K..128K", "tcp16k");
}

/// `--channel-path node-local`: the report names the path the channel took, measured (the
/// node's shared window), not the one asked for by default.
#[test]
fn channel_column_names_its_path() {
    let v = run_probe(
        "vader",
        4096,
        "1K",
        "nodelocal",
        &["--channel-path", "node-local"],
        "probe",
    );
    assert_eq!(v["channel_path"], "node-local window", "{v}");
}

/// Both ranks Isend at once, eager limit 4 KB: 1 KB goes eagerly both ways and a blocking
/// exchange would complete; 16 KB goes by rendezvous, and blocking sends on both sides would
/// deadlock, which the probe reports rather than hangs in (the job's deadline).
#[test]
fn two_way_verdicts() {
    let v = run_probe(
        "vader",
        4096,
        "1K,16K",
        "twoway",
        // A longer computation leaves an eager send more time to complete before the
        // receive is posted on a loaded machine; a rendezvous one never can.
        &["--experiment", "two-way", "--compute-ms", "10"],
        "two-way",
    );
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v:#}");
    assert_eq!(rows[0]["size"], 1024, "{v:#}");
    assert_eq!(
        rows[0]["protocol"],
        serde_json::json!(["eager", "eager"]),
        "{v:#}"
    );
    assert_eq!(rows[0]["blocking_exchange"], "completes", "{v:#}");
    assert_eq!(
        rows[1]["protocol"],
        serde_json::json!(["rendezvous", "rendezvous"]),
        "{v:#}"
    );
    assert_eq!(rows[1]["early"], serde_json::json!([0, 0]), "{v:#}");
    assert_eq!(rows[1]["blocking_exchange"], "would deadlock", "{v:#}");
}

/// Three messages at once, eager limit 4 KB: three of 2 KB (6 KB in flight) still go eagerly
/// each (Open MPI's limit is per message), three of 16 KB by rendezvous each.
#[test]
fn cumulative_verdicts() {
    let v = run_probe(
        "vader",
        4096,
        "2K,16K",
        "cumulative",
        &[
            "--experiment",
            "cumulative",
            "--count",
            "3",
            "--compute-ms",
            "10",
        ],
        "cumulative",
    );
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v:#}");
    let eager = serde_json::json!(["eager", "eager", "eager"]);
    assert_eq!(rows[0]["alone"], "eager", "{v:#}");
    assert_eq!(rows[0]["together"], eager, "{v:#}");
    assert_eq!(rows[1]["alone"], "rendezvous", "{v:#}");
    let rdv = serde_json::json!(["rendezvous", "rendezvous", "rendezvous"]);
    assert_eq!(rows[1]["together"], rdv, "{v:#}");
    assert_eq!(rows[1]["early"], serde_json::json!([0, 0, 0]), "{v:#}");
}

/// The waiting experiment measures every combination of sender and receiver strategies, and
/// its figures hold together: a side's time inside MPI includes its post, the overlap is the
/// one its times give, in [0, 1]. (Timing comparisons between strategies are left out: on a
/// loaded machine any of them can flip.)
#[test]
fn waiting_measures_every_case() {
    let v = run_probe(
        "vader",
        4096,
        "1K,64K",
        "waiting",
        &["--experiment", "waiting"],
        "waiting",
    );
    assert_eq!(v["schema"], "aiac.probe.waiting/1", "{v:#}");
    assert_eq!(v["compute_s"].as_f64(), Some(0.003), "{v:#}");
    let rows = v["rows"].as_array().expect("rows");
    let sizes: Vec<_> = rows.iter().map(|r| r["size"].as_u64()).collect();
    assert_eq!(sizes, [Some(1024), Some(65536)], "{v:#}");
    let f = |x: &Value| {
        x.as_f64()
            .unwrap_or_else(|| panic!("a number: {x} in {v:#}"))
    };
    for r in rows {
        let transfer = f(&r["transfer_s"]);
        assert!(transfer > 0.0, "{v:#}");
        let cases = r["cases"].as_array().expect("cases");
        let names: Vec<String> = cases
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c["sender"].as_str().unwrap(),
                    c["receiver"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "after/after",
                "early/after",
                "tests/after",
                "after/early",
                "after/tests",
                "tests/tests"
            ],
            "{v:#}"
        );
        for c in cases {
            let overlap = c["overlap"].as_array().expect("overlap per side");
            assert_eq!(overlap.len(), 2, "{v:#}");
            for (i, side) in ["sender", "receiver"].into_iter().enumerate() {
                let post = f(&c[format!("{side}_post_s")]);
                let mpi = f(&c[format!("{side}_mpi_s")]);
                // Each repetition's time inside MPI includes its post, so the medians keep
                // that order.
                assert!(post > 0.0 && mpi >= post, "{side}: {c}\n{v:#}");
                let o = f(&overlap[i]);
                assert!((0.0..=1.0).contains(&o), "{side}: {c}\n{v:#}");
                let want = (1.0 - mpi / transfer).clamp(0.0, 1.0);
                assert!((o - want).abs() < 1e-9, "{side}: {o} != {want}: {c}\n{v:#}");
            }
        }
    }
}

/// One message naming the flag, exit 1, no output directory left half-written.
#[test]
fn bad_input_fails_cleanly() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    for (args, flag) in [
        (vec!["--sizes", "4M..1K"], "--sizes"),
        (vec!["--sizes", "12Q"], "--sizes"),
        (vec!["--compute-ms", "0"], "--compute-ms"),
        (vec!["--reps", "0"], "--reps"),
        (vec!["--transport", "tcp"], "--transport tcp"),
        (
            vec!["--experiment", "cumulative", "--count", "1"],
            "--count",
        ),
        // Flags of another experiment (each was accepted and ignored).
        (
            vec!["--count", "5"],
            "--count applies to --experiment cumulative",
        ),
        (
            vec!["--experiment", "two-way", "--count", "5"],
            "not to --experiment two-way",
        ),
        (
            vec!["--experiment", "waiting", "--channel-path", "node-local"],
            "--channel-path applies to --experiment kernel",
        ),
    ] {
        let mut cmd = Command::new("mpirun");
        cmd.args(["-np", "2", AIAC, "probe"]).args(&args);
        let out = within(cmd, 60);
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err.matches("aiac: error:").count(), 1, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // Three ranks: the probe is a two-rank kernel.
    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", "3", AIAC, "probe", "--sizes", "1K"]);
    let out = within(cmd, 60);
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("exactly 2 ranks"), "{err}");
}
