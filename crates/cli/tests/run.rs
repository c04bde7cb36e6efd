//! `aiac run` end to end, on the built binary: bad input, exit codes, the JSON report.

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{aiac, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn read_json(p: &PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("the report exists")).expect("valid JSON")
}

/// `aiac ARGS`, which must exit 0; its standard output.
fn aiac_ok(args: &[&str]) -> String {
    let o = aiac(args);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "aiac {}: {stdout}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// A report as the aiac of schema `aiac.run/3` wrote it (`tests/fixtures/run3/NAME.json`,
/// written by `aiac run … --json` of that version).
fn run3(name: &str) -> Value {
    read_json(&run3_path(name))
}

fn run3_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/run3")
        .join(format!("{name}.json"))
}

/// Write `old` (a report as an older aiac wrote it) next to `new`, and check `aiac report`
/// reads both. Returns the old report's path.
fn report_reads_old_and_new(dir: &Path, old: &Value, new: &Path) -> PathBuf {
    let old_path = dir.join("old.json");
    std::fs::write(&old_path, serde_json::to_vec(old).unwrap()).unwrap();
    let stdout = aiac_ok(&["report", old_path.to_str().unwrap(), new.to_str().unwrap()]);
    assert!(stdout.contains("2 run(s)"), "{stdout}");
    old_path
}

#[test]
fn bad_input_names_the_flag_exits_1_and_writes_nothing() {
    let dir = scratch("bad");
    let out = dir.join("r.json");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--tol", "0"], "--tol"),
        (&["--tol", "-1e-3"], "--tol"),
        (&["--tol", "NaN"], "--tol"),
        (&["--max-in-flight", "0"], "--max-in-flight"),
        (&["--halo-every", "0"], "--halo-every"),
        (&["--check-every", "0"], "--check-every"),
        (&["--max-iters", "0"], "--max-iters"),
        (&["--global", "9", "-t", "2"], "--global"),
        (&["--global", "8", "-t", "2", "--grid", "2x2x1"], "--grid"),
        (&["--global", "8", "-t", "2", "--grid", "2x0x1"], "--grid"),
        (&["--slow-rank", "2", "-t", "2"], "--slow-rank"),
        (&["--slow-rank", "0", "--slowdown", "0.5"], "--slowdown"),
        (&["--slowdown", "3"], "--slow-rank"),
        (&["--local", "0"], "--local"),
        (&["--local", "4,4"], "--local"),
        (&["--offset", "inf"], "--offset"),
        (&["-t", "0"], "--threads"),
        // Hybrid ranks are MPI and SHMEM ranks: threads and shared memory refuse them.
        (
            &["-t", "2", "--threads-per-rank", "2"],
            "--threads-per-rank",
        ),
        (
            &["--backend", "shared", "-t", "2", "--threads-per-rank", "2"],
            "--threads-per-rank",
        ),
        (&["--threads-per-rank", "0"], "--threads-per-rank"),
        (
            &["--backend", "shared", "-t", "2", "--grid", "2x1x1"],
            "--grid",
        ),
        (
            &["--backend", "shared", "--halo-every", "2"],
            "--halo-every",
        ),
        (
            &["--backend", "shared", "--exchange", "overlap"],
            "--exchange",
        ),
        (
            &["--variant", "async", "--reduction", "iallreduce"],
            "--reduction iallreduce",
        ),
        (
            &[
                "--backend",
                "shared",
                "--variant",
                "async",
                "--reduction",
                "iallreduce",
            ],
            "--reduction iallreduce",
        ),
        // A flag of a loop the run does not have: refused, not ignored.
        (&["--reduction", "tree"], "--reduction applies to"),
        (
            &["--solver", "cg", "--reduction", "tree"],
            "not to --solver cg --variant sync",
        ),
        (&["--racy-read", "always"], "--racy-read applies to"),
        (
            &["--variant", "async", "--racy-read", "always"],
            "not to --solver jacobi --variant async",
        ),
        (&["--reduction", "ring"], "--reduction"),
        (&["--racy-read", "sometimes"], "--racy-read"),
        (&["--variant", "sometimes"], "--variant"),
        (
            &["--variant", "async", "--exchange", "overlap"],
            "--exchange",
        ),
        (&["--problem", "poisson", "--global", "8,8,16"], "--problem"),
        (&["--exchange", "sideways"], "--exchange"),
        (&["--decomp", "w"], "--decomp"),
        (&["--backend", "carrier-pigeon"], "--backend"),
        (&["--solver", "cg", "--variant", "racy"], "--variant racy"),
        (
            &["--solver", "pipecg", "--variant", "async"],
            "--solver pipecg",
        ),
        (&["--backend", "shared", "--solver", "cg"], "--solver"),
        (&["--solver", "cg", "--exchange", "overlap"], "--exchange"),
        (&["--solver", "cg", "--halo-every", "2"], "--halo-every"),
        (&["--pc", "jacobi"], "--pc"),
        (&["--solver", "minres"], "--solver"),
    ];
    for (args, flag) in cases {
        let mut all = vec!["run", "--quiet", "--json", o];
        all.extend_from_slice(args);
        let r = aiac(&all);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(flag),
            "{args:?}: message does not name {flag}: {err}"
        );
        assert_eq!(
            err.trim().lines().filter(|l| l.contains("error")).count(),
            1,
            "{args:?}: one message: {err}"
        );
        assert!(!out.exists(), "{args:?}: no report on bad input");
    }
    let r = aiac(&["run", "--local", "4", "--json", "/nonexistent-dir/r.json"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--json"));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing left behind"
    );
}

/// The flags refused where their loop is missing run where it is: the racy read of a racy
/// run, the tree reduction of an async run and of pipecg.
#[test]
fn loop_flags_run_where_their_loop_is() {
    for args in [
        &["--variant", "racy", "-t", "2", "--racy-read", "always"][..],
        &["--variant", "async", "-t", "2", "--reduction", "tree"][..],
        &["--solver", "pipecg", "-t", "2", "--reduction", "tree"][..],
    ] {
        let mut all = vec!["run", "--local", "6", "--quiet"];
        all.extend_from_slice(args);
        aiac_ok(&all);
    }
}

#[test]
fn converged_run_writes_the_report() {
    let dir = scratch("ok");
    let out = dir.join("report.json");
    std::fs::write(&out, "old contents").unwrap();
    for (backend, variant) in [
        ("threads", "racy"),
        ("threads", "sync"),
        ("shared", "async"),
    ] {
        let stdout = aiac_ok(&[
            "run",
            "--backend",
            backend,
            "--variant",
            variant,
            "-t",
            "2",
            "--global",
            "10",
            "--check-every",
            "10",
            "--json",
            out.to_str().unwrap(),
        ]);
        for row in ["iterations", "updates/s", "true", "converged"] {
            assert!(
                stdout.contains(row),
                "{backend} {variant}: table lacks {row}: {stdout}"
            );
        }
        let j = read_json(&out);
        assert_eq!(j["converged"], true);
        let it = &j["iterations"];
        let (min, mean, max) = (
            it["min"].as_f64().unwrap(),
            it["mean"].as_f64().unwrap(),
            it["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= mean && mean <= max, "{it}");
        assert!(j["time_s"].as_f64().unwrap() > 0.0);
        let t = j["residual"]["true"].as_f64().unwrap();
        assert!(t < 1e-4, "true residual {t}");
        assert!(j["residual"]["reported"].as_f64().unwrap() < 1e-4);
        let c = &j["config"];
        assert_eq!(c["backend"], backend);
        assert_eq!(c["method"]["variant"], variant);
        assert_eq!(c["ranks"], 2);
        assert_eq!(c["global"]["x"], 10);
        assert_eq!(c["criterion"]["tol"], 1e-4);
        let ranks = j["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 2);
        for (k, r) in ranks.iter().enumerate() {
            assert_eq!(r["rank"], k);
            assert_eq!(r["residual"]["true"].as_f64().unwrap(), t);
            assert!(r["iterations"].as_f64().unwrap() >= min);
        }
        assert_eq!(c["method"]["racy_read"], "landed");
        // --check-every paces the reduction rounds of async and racy over channels.
        let paced = backend == "threads" && variant != "sync";
        assert_eq!(c["check_every"], 10);
        assert_eq!(c["method"]["pace_reductions"], paced, "{backend} {variant}");
        if paced {
            for r in ranks {
                let (rounds, it) = (
                    r["reductions"].as_u64().unwrap(),
                    r["iterations"].as_u64().unwrap(),
                );
                assert!(
                    rounds > 0 && rounds <= it / 10 + 2,
                    "{rounds} rounds in {it} iterations"
                );
            }
        }
        if backend == "threads" && variant == "racy" {
            assert!(ranks[0]["channels"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["mode"] == "racy"));
            assert!(j["messages"]["sent"].as_u64().unwrap() > 0);
        }
    }
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
}

#[test]
fn not_converged_within_max_iters_exits_2() {
    let dir = scratch("max");
    let out = dir.join("r.json");
    for variant in ["sync", "async"] {
        let r = aiac(&[
            "run",
            "--variant",
            variant,
            "-t",
            "2",
            "--global",
            "12",
            "--max-iters",
            "20",
            "--json",
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.status.code(), Some(2), "{variant}");
        assert!(String::from_utf8_lossy(&r.stdout).contains("NOT converged"));
        let j = read_json(&out);
        assert_eq!(j["converged"], false);
        assert_eq!(j["stop"], "max_iters");
        assert!(j["iterations"]["max"].as_f64().unwrap() <= 20.0);
        assert!(j["residual"]["true"].as_f64().unwrap() > 1e-4);
    }
}

#[test]
fn unconfirmed_false_claim_is_not_reported_converged() {
    // The paper's scheme with faces swapped only at the start: every block converges against
    // a stale halo, the reduction claims convergence, and without --confirm the run stops.
    // aiac still reports the true residual, says "not converged" and exits 2.
    let dir = scratch("claim");
    let out = dir.join("r.json");
    let base = [
        "run",
        "--variant",
        "async",
        "-t",
        "2",
        "--global",
        "12",
        "--halo-every",
        "1000000000",
        "--json",
        out.to_str().unwrap(),
    ];
    let mut args = base.to_vec();
    args.push("--no-confirm");
    let r = aiac(&args);
    assert_eq!(r.status.code(), Some(2));
    let j = read_json(&out);
    assert_eq!(j["converged"], false);
    assert_eq!(j["stop"], "criterion");
    assert!(j["residual"]["reported"].as_f64().unwrap() < 1e-4);
    assert!(j["residual"]["true"].as_f64().unwrap() > 1e-3);
    let r = aiac(&base);
    assert_eq!(
        r.status.code(),
        Some(0),
        "--confirm (the default) carries on to a certified result"
    );
    assert_eq!(read_json(&out)["converged"], true);
}

#[test]
fn help_succeeds() {
    let r = aiac(&["run", "--help"]);
    assert_eq!(r.status.code(), Some(0));
    let s = String::from_utf8_lossy(&r.stdout);
    for flag in [
        "--backend",
        "--variant",
        "--max-in-flight",
        "--no-confirm",
        "--slow-rank",
        "--json",
    ] {
        assert!(s.contains(flag), "help lacks {flag}");
    }
}

/// A Krylov run writes its solver, preconditioner and per-rank Krylov record, prints how much
/// of its reductions it hid, and `aiac report` still reads an aiac.run/1 report (written
/// before the Krylov solvers: schema 3's report without what schemas 2 and 3 added).
#[test]
fn a_krylov_report_and_an_old_report() {
    let dir = scratch("krylov");
    let json = dir.join("p.json");
    let stdout = aiac_ok(&[
        "run",
        "--solver",
        "pipecg",
        "--pc",
        "jacobi",
        "-t",
        "2",
        "--global",
        "12",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("pipecg (pc jacobi)"), "{stdout}");
    assert!(stdout.contains("hidden behind computation"), "{stdout}");
    assert!(stdout.contains("per iteration    sweep "), "{stdout}");
    let j = read_json(&json);
    let per = &j["breakdown_per_iteration"];
    assert!(per["reduce_s"].as_f64().unwrap() > 0.0, "{per}");
    assert!(j["breakdown"]["wait_s"]["max"].as_f64().unwrap() > 0.0);
    assert_eq!(j["schema"], "aiac.run/4");
    assert_eq!(j["config"]["method"]["kind"], "krylov");
    assert_eq!(j["config"]["method"]["solver"], "pipecg");
    assert_eq!(j["config"]["method"]["pc"], "jacobi");
    assert_eq!(j["config"]["criterion"]["tol"], 1e-8);
    assert!(j["residual"]["true"].as_f64().unwrap() < 1e-8);
    for r in j["ranks"].as_array().unwrap() {
        let k = &r["krylov"];
        assert!(k["reduce_flight_s"].as_f64().unwrap() >= k["reduce_wait_s"].as_f64().unwrap());
        assert!(k["breakdown"].is_null());
    }
    // A report as schema 1 wrote it: no solver, no pc, no krylov records.
    let mut old = run3("pipecg");
    old["schema"] = "aiac.run/1".into();
    old["config"].as_object_mut().unwrap().remove("solver");
    old["config"].as_object_mut().unwrap().remove("pc");
    // Nor the halo depth (added later within schema 2; read as 1).
    old["config"].as_object_mut().unwrap().remove("halo_depth");
    // Nor the breakdown (added later within schema 3).
    old.as_object_mut().unwrap().remove("breakdown");
    old.as_object_mut()
        .unwrap()
        .remove("breakdown_per_iteration");
    for r in old["ranks"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("krylov");
        r.as_object_mut().unwrap().remove("breakdown");
    }
    let old_path = report_reads_old_and_new(&dir, &old, &json);
    // Its halo depth reads as 1 (the runs.csv of `aiac report --out`).
    let rep = dir.join("rep");
    aiac_ok(&[
        "report",
        old_path.to_str().unwrap(),
        "--out",
        rep.to_str().unwrap(),
    ]);
    let csv = std::fs::read_to_string(rep.join("runs.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let k = rows[0].iter().position(|c| *c == "halo_depth").unwrap();
    assert_eq!(rows[1][k], "1", "{csv}"); // read as schema 1: Jacobi, depth 1
}

/// A multisplit run writes its outer and inner iterations and prints them, and `aiac report`
/// still reads a report as aiac.run/2 wrote it (schema 3's without the inner fields).
#[test]
fn a_multisplit_report_and_a_schema_2_report() {
    let dir = scratch("multisplit");
    let json = dir.join("m.json");
    let stdout = aiac_ok(&[
        "run",
        "--solver",
        "multisplit",
        "--inner",
        "jacobi",
        "--inner-max",
        "7",
        "-t",
        "2",
        "--local",
        "8",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("outer iterations"), "{stdout}");
    assert!(stdout.contains("per outer iteration"), "{stdout}");
    let j = read_json(&json);
    assert_eq!(j["schema"], "aiac.run/4");
    assert_eq!(j["config"]["method"]["kind"], "multisplit");
    assert_eq!(j["config"]["method"]["inner"]["solver"], "jacobi");
    assert_eq!(j["config"]["method"]["inner"]["max"], 7);
    assert!(j["residual"]["true"].as_f64().unwrap() < 1e-4);
    for r in j["ranks"].as_array().unwrap() {
        let m = &r["multisplit"];
        let (outer, inner) = (
            r["iterations"].as_u64().unwrap(),
            m["inner_iterations"].as_u64().unwrap(),
        );
        // At most 7 sweeps per outer iteration, at least one.
        assert!(outer <= inner && inner <= 7 * outer, "{m}");
        assert!(m["inner_most"].as_u64().unwrap() <= 7);
    }
    assert!(j["inner_per_outer"]["mean"].as_f64().unwrap() <= 7.0);
    let mut old = run3("multisplit");
    old["schema"] = "aiac.run/2".into();
    for k in ["inner", "inner_tol", "inner_max"] {
        old["config"].as_object_mut().unwrap().remove(k);
    }
    old["config"]["solver"] = "jacobi".into();
    for k in ["inner_iterations", "inner_per_outer"] {
        old.as_object_mut().unwrap().remove(k);
    }
    for r in old["ranks"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("multisplit");
    }
    report_reads_old_and_new(&dir, &old, &json);
}

/// Reports written by the aiac of schema `aiac.run/3` (its method's settings flat beside
/// `solver`: async Jacobi with R = 3, preconditioned pipelined CG, multisplitting with an inner
/// Jacobi, sync Jacobi with k = 2) read as the same runs: `aiac report` prints the table and
/// writes the runs.csv that aiac printed and wrote from them, byte for byte
/// (`tests/fixtures/run3/report.txt`, `runs.csv`).
#[test]
fn schema_3_reports_show_the_tables_they_showed() {
    let names = ["jacobi-async", "pipecg", "multisplit", "jacobi-deep"];
    let paths: Vec<String> = names
        .iter()
        .map(|n| run3_path(n).display().to_string())
        .collect();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run3");
    let want = |f: &str| std::fs::read_to_string(fixtures.join(f)).unwrap();
    let mut args = vec!["report"];
    args.extend(paths.iter().map(String::as_str));
    assert_eq!(aiac_ok(&args), want("report.txt"));
    let rep = scratch("run3").join("rep");
    args.extend(["--out", rep.to_str().unwrap()]);
    aiac_ok(&args);
    assert_eq!(
        std::fs::read_to_string(rep.join("runs.csv")).unwrap(),
        want("runs.csv")
    );
    // Each is the method it was: the flat settings made the tagged method.
    for n in names {
        assert_eq!(run3(n)["schema"], "aiac.run/3", "{n}");
    }
}
