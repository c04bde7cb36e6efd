//! aiac as a tool: help, version, bad input for every subcommand, the files of `aiac run`
//! against their documentation (docs/json-schema.md), the progress line, and a small sweep with
//! its CSV, plots and `aiac report` of it. Every command runs under a deadline, so a hang fails.

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

mod common;

use common::{aiac, names_in, scratch, text, within, AIAC};

#[test]
fn help_and_version() {
    let r = aiac(&["--help"]);
    assert_eq!(r.status.code(), Some(0));
    let s = text(&r.stdout);
    for w in ["run", "sweep", "report", "RUST_LOG", "Exit code"] {
        assert!(s.contains(w), "aiac --help lacks {w}: {s}");
    }
    let r = aiac(&["--version"]);
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(
        text(&r.stdout).trim(),
        format!("aiac {}", env!("CARGO_PKG_VERSION"))
    );
    let r = aiac(&["sweep", "--help"]);
    assert_eq!(r.status.code(), Some(0));
    let s = text(&r.stdout);
    for w in [
        "--ranks",
        "--repeats",
        "--out",
        "--timeout",
        "--max-in-flight",
        "--exchange",
        "comma-separated",
    ] {
        assert!(s.contains(w), "aiac sweep --help lacks {w}");
    }
    let r = aiac(&["report", "--help"]);
    assert_eq!(r.status.code(), Some(0));
    assert!(text(&r.stdout).contains("--out"));
    let r = aiac(&["run", "--help"]);
    for w in ["--csv", "--history", "--json", "--quiet"] {
        assert!(text(&r.stdout).contains(w), "aiac run --help lacks {w}");
    }
}

/// One message naming `flag`, exit code 1, and nothing left in `dir`.
fn refused(args: &[&str], flag: &str, dir: &Path) {
    let r = aiac(args);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(flag), "{args:?}: does not name {flag}: {err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{args:?}: one message: {err}"
    );
    assert!(r.stdout.is_empty(), "{args:?}: printed {}", text(&r.stdout));
    assert!(
        names_in(dir).is_empty(),
        "{args:?}: left {:?}",
        names_in(dir)
    );
}

#[test]
fn bad_run_outputs_are_refused_before_any_work() {
    let dir = scratch("run-bad");
    let d = dir.to_str().unwrap();
    let f = |n: &str| format!("{d}/{n}");
    let (j, c) = (f("r.json"), f("r.csv"));
    refused(
        &["run", "--local", "4", "--csv", "/nonexistent-dir/r.csv"],
        "--csv",
        &dir,
    );
    refused(&["run", "--local", "4", "--history", d], "--history", &dir);
    refused(
        &["run", "--local", "4", "--json", &j, "--csv", &j],
        "--csv",
        &dir,
    );
    refused(
        &["run", "--local", "4", "--csv", &c, "--tol", "0"],
        "--tol",
        &dir,
    );
}

#[test]
fn bad_sweep_input_is_refused_before_any_work() {
    let dir = scratch("sweep-bad");
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let file = dir.join("a-file");
    let cases: &[(&[&str], &str)] = &[
        (&["--repeats", "0"], "--repeats"),
        (&["--timeout", "0"], "--timeout"),
        (&["--timeout", "NaN"], "--timeout"),
        (&["--variant", ""], "--variant"),
        (&["--variant", "sync,,racy"], "--variant"),
        (&["--ranks", ","], "--threads"),
        (&["--backend", "carrier-pigeon"], "--backend"),
        (
            &["--max-in-flight", "0", "--variant", "racy"],
            "--max-in-flight",
        ),
        (&["--global", "9", "-t", "1,2"], "--global"),
        (&["--tol", "1e-3,-1"], "--tol"),
        (&["--halo-every", "0"], "--halo-every"),
        (&["--slowdown", "3"], "--slow-rank"),
        (&["--slow-rank", "2", "-t", "2"], "--slow-rank"),
        (
            &["--backend", "shared", "--halo-every", "1,2"],
            "--halo-every",
        ),
        // Hybrid ranks are MPI and SHMEM ranks: no threads run can take T = 2.
        (&["--threads-per-rank", "1,2"], "--threads-per-rank"),
    ];
    for (args, flag) in cases {
        let mut all = vec!["sweep", "--out", o, "--quiet"];
        all.extend_from_slice(args);
        refused(&all, flag, &dir);
    }
    // The output directory: a file, under a file, not creatable.
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    let under = format!("{f}/sub");
    for bad in [f, under.as_str(), "/proc/aiac-cannot-be-here"] {
        let r = aiac(&["sweep", "--out", bad, "--quiet"]);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains("--out"), "{bad}: {err}");
    }
    assert_eq!(names_in(&dir), BTreeSet::from(["a-file".to_string()]));
    // MPI without its launcher on PATH.
    let mut c = Command::new(AIAC);
    c.args(["sweep", "--backend", "mpi", "--out", o, "--quiet"])
        .env("PATH", "/nonexistent");
    let r = within(c, 60);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--backend mpi") && err.contains("mpirun"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn bad_report_input_is_refused() {
    let dir = scratch("report-bad");
    let write = |name: &str, s: &str| {
        let p = dir.join(name);
        std::fs::write(&p, s).unwrap();
        p.to_str().unwrap().to_string()
    };
    let not_json = write("a.json", "not json");
    let no_schema = write("b.json", "{\"converged\": true}");
    let future = write("c.json", "{\"schema\": \"aiac.run/99\"}");
    let r = aiac(&["report"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r.stderr).contains("FILES"));
    for (f, what) in [
        (not_json.as_str(), "not JSON"),
        (no_schema.as_str(), "schema"),
        (future.as_str(), "aiac.run/99"),
        ("/nonexistent/r.json", "no such file"),
    ] {
        let r = aiac(&["report", f]);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{f}: {err}");
        assert!(err.contains(what) && err.contains(f), "{f}: {err}");
        assert!(r.stdout.is_empty());
    }
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let r = aiac(&["report", empty.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r.stderr).contains("no .json file"));
}

/// The field names a table of docs/json-schema.md documents, under the heading `heading`:
/// the backticked names of the first column (`a`, `b.c`, `d[]`).
fn documented(heading: &str) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/json-schema.md"),
    )
    .expect("docs/json-schema.md");
    let start = doc
        .lines()
        .position(|l| l.starts_with('#') && l.contains(heading))
        .unwrap_or_else(|| panic!("no heading {heading}"));
    let mut names = BTreeSet::new();
    for line in doc.lines().skip(start + 1) {
        if line.starts_with('#') {
            break;
        }
        let Some(first) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = first.split(" |").next().unwrap();
        for part in cell.split(", ") {
            let name = part.trim_matches('`').trim_end_matches("[]");
            names.insert(name.split('.').next().unwrap().to_string());
        }
    }
    assert!(!names.is_empty(), "no fields under {heading}");
    names
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn files_of_a_run_match_their_documentation() {
    let dir = scratch("files");
    let (json, csv, hist) = (dir.join("r.json"), dir.join("r.csv"), dir.join("h.csv"));
    let r = aiac(&[
        "run",
        "--variant",
        "async",
        "-t",
        "3",
        "--global",
        "12",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--history",
        hist.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert!(r.stdout.is_empty(), "--quiet prints nothing");
    assert!(r.stderr.is_empty(), "--quiet: no progress line");

    // JSON: parses, says its schema, and has exactly the documented fields.
    let j: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["schema"], "aiac.run/4");
    assert_eq!(keys(&j), documented("The report"), "top-level fields");
    assert_eq!(keys(&j["config"]), documented("`config`"), "config fields");
    let ranks = j["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    for (k, rk) in ranks.iter().enumerate() {
        assert_eq!(keys(rk), documented("`ranks[]`"), "ranks[{k}] fields");
        assert_eq!(rk["rank"], k);
        let h = rk["history"].as_array().unwrap();
        assert!(!h.is_empty(), "async ranks record their reduction rounds");
        for p in h {
            let p = p.as_array().unwrap();
            assert_eq!(p.len(), 3, "[iteration, residual, time_s]");
            assert!(p[0].is_u64() && p[1].is_f64() && p[2].is_f64());
        }
        for ch in rk["channels"].as_array().unwrap() {
            assert!(ch["batches"]["buckets"].is_array());
        }
    }
    assert_eq!(j["history"], ranks[0]["history"]);

    // CSV: the documented columns, one row per rank, the JSON's values.
    let c = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = c.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0].join(","),
        "rank,backend,variant,ranks,coord_x,coord_y,coord_z,local_x,local_y,local_z,\
         iterations,time_s,compute_s,comm_s,stop,converged,residual_reported,residual_true,\
         reductions,certifications,sent,skipped,received,superseded,batch_mean,error_max,\
         solver,reduce_flight_s,reduce_wait_s,replacements,inner_iterations,inner_per_outer,\
         sweep_s,pack_s,unpack_s,send_s,wait_s,reduce_s,other_s"
    );
    assert_eq!(rows.len(), 4, "a header and one row per rank: {c}");
    for (k, row) in rows[1..].iter().enumerate() {
        assert_eq!(row.len(), rows[0].len());
        assert_eq!(row[0], k.to_string());
        assert_eq!(row[2], "async");
        assert_eq!(row[10], ranks[k]["iterations"].to_string());
        assert_eq!(row[15], "true");
        assert_eq!(row[25], "", "no exact solution: empty error_max");
        assert_eq!(
            row[32].parse::<f64>().ok(),
            ranks[k]["breakdown"]["sweep_s"].as_f64()
        );
        assert_eq!(row[12], row[32], "compute_s is the sweep");
    }

    // History: every rank's points, in order, as in the JSON.
    let h = std::fs::read_to_string(&hist).unwrap();
    let mut lines = h.lines();
    assert_eq!(lines.next(), Some("rank,iteration,residual,time_s"));
    let pts: Vec<(usize, u64, f64, f64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect();
    for (k, rk) in ranks.iter().enumerate() {
        let mine: Vec<_> = pts.iter().filter(|p| p.0 == k).collect();
        assert_eq!(mine.len(), rk["history"].as_array().unwrap().len());
        for w in mine.windows(2) {
            assert!(w[0].1 <= w[1].1 && w[0].3 <= w[1].3, "in order: {w:?}");
        }
        assert!(mine.iter().all(|p| p.2 > 0.0 && p.2.is_finite()));
    }
    assert_eq!(names_in(&dir).len(), 3, "no temporary file left");
}

#[test]
fn sync_history_has_one_point_per_check() {
    let dir = scratch("sync-hist");
    let hist = dir.join("h.csv");
    let r = aiac(&[
        "run",
        "-t",
        "2",
        "--global",
        "10",
        "--check-every",
        "10",
        "--max-iters",
        "50",
        "--history",
        hist.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(r.status.code(), Some(2), "not converged in 50");
    let h = std::fs::read_to_string(&hist).unwrap();
    let iters: Vec<(String, String)> = h
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].to_string())
        })
        .collect();
    let want: Vec<(String, String)> = ["0", "1"]
        .iter()
        .flat_map(|r| {
            [9, 19, 29, 39, 49]
                .iter()
                .map(move |i| (r.to_string(), i.to_string()))
        })
        .collect();
    assert_eq!(iters, want, "checks every 10 iterations, per rank");
}

#[test]
fn progress_lines_when_not_a_terminal() {
    // However short the run, one line at least.
    let r = aiac(&["run", "-t", "2", "--local", "8", "--check-every", "20"]);
    assert_eq!(r.status.code(), Some(0));
    let err = text(&r.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(!lines.is_empty(), "a progress line on stderr");
    for l in &lines {
        assert!(
            l.starts_with("[aiac] iteration") && l.contains("residual") && l.contains("it/s"),
            "{l}"
        );
    }
    assert!(text(&r.stdout).contains("aiac run:"), "the table on stdout");
}

#[test]
fn a_timed_out_run_is_recorded_and_the_sweep_goes_on() {
    let dir = scratch("timeout");
    let out = dir.join("sw");
    let r = aiac(&[
        "sweep",
        "--max-iters",
        "20,1000000000",
        // A tolerance just above f64's epsilon, which rounding keeps the relative residual
        // above: the second run would do all its 1e9 iterations.
        "--local",
        "16",
        "--tol",
        "3e-16",
        "--timeout",
        "1.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{stdout}\n{}", text(&r.stderr));
    assert!(text(&r.stderr).contains("timed out"));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let status: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    assert_eq!(status, ["max_iters", "timeout"], "{csv}");
    let runs = names_in(&out.join("runs"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    let failed = runs.iter().find(|n| n.ends_with(".failed.json")).unwrap();
    let f: Value =
        serde_json::from_slice(&std::fs::read(out.join("runs").join(failed)).unwrap()).unwrap();
    assert_eq!(f["schema"], "aiac.failed-run/2");
    assert_eq!(f["status"], "timeout");
    assert_eq!(f["config"]["max_iters"], 1_000_000_000u64);
    assert!(stdout.contains("FAILED"), "{stdout}");
    // The report of the directory says the same.
    let rep = aiac(&["report", out.to_str().unwrap()]);
    assert_eq!(rep.status.code(), Some(0));
    assert_eq!(summary_of(&stdout), summary_of(&text(&rep.stdout)));
}

/// Two sweeps into one directory at once: the second is refused before it writes anything,
/// naming the first's process, and the first ends with all of its files (before, both exited
/// 0 and each overwrote the other's runs, plots and table).
#[test]
fn a_second_sweep_into_the_same_directory_is_refused() {
    let dir = scratch("sweep-twice");
    let out = dir.join("sw");
    let o = out.to_str().unwrap();
    let done = dir.join("done");
    let done_sweep = aiac(&[
        "sweep",
        "--local",
        "8",
        "--quiet",
        "--out",
        done.to_str().unwrap(),
    ]);
    assert_eq!(
        done_sweep.status.code(),
        Some(0),
        "{}",
        text(&done_sweep.stderr)
    );
    // One run that lasts its whole --timeout: a tolerance rounding keeps the residual above.
    let mut first = Command::new(AIAC);
    first
        .args(["sweep", "--local", "16", "--tol", "3e-16", "--max-iters"])
        .args(["1000000000", "--timeout", "4", "--quiet", "--out", o])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let first = first.spawn().unwrap();
    let pid = first.id();
    // Its run has started once its log exists: it holds the directory then.
    let started = std::time::Instant::now();
    while names_in(&out.join("logs")).is_empty() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the first sweep never started its run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = aiac(&["sweep", "--local", "8", "--quiet", "--out", o]);
    let err = text(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another aiac command"), "{err}");
    assert!(err.contains(&format!("process {pid}")), "{err}");
    // So is a report that would write its table and plots there.
    let rep = aiac(&["report", done.to_str().unwrap(), "--out", o]);
    let err = text(&rep.stderr);
    assert_eq!(rep.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another aiac command"), "{err}");
    let first = common::finish(first, 120, "the first sweep");
    // The first ran to its end undisturbed: its one (timed-out) run, its log, its table.
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let runs = names_in(&out.join("runs"));
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs.iter().all(|r| r.ends_with(".failed.json")), "{runs:?}");
    assert_eq!(names_in(&out.join("logs")).len(), 1);
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    // Once it has ended the directory is free again.
    let again = aiac(&["sweep", "--local", "8", "--quiet", "--out", o]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
}

/// A sweep whose one run has a report but nothing to plot (one iteration: no history point,
/// one rank, sync) says so, not that no run has a report (which it said after "1 with a
/// report").
#[test]
fn a_sweep_with_nothing_to_plot_says_why() {
    let dir = scratch("sweep-noplot");
    let out = dir.join("sw");
    let r = aiac(&[
        "sweep",
        "--local",
        "8",
        "--max-iters",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}{}", text(&r.stderr));
    assert!(stdout.contains("1 with a report"), "{stdout}");
    assert!(!stdout.contains("no run has a report"), "{stdout}");
    assert!(
        stdout.contains("plots    none (nothing to draw"),
        "{stdout}"
    );
}

/// The summary tables of a sweep's or report's output (up to the list of files).
fn summary_of(stdout: &str) -> String {
    stdout
        .split("\nreports ")
        .next()
        .unwrap()
        .split("\ntable ")
        .next()
        .unwrap()
        .trim_end()
        .to_string()
}

/// A PNG's size, after decoding it whole; and whether it has anything but white.
fn decode_png(p: &Path) -> (u32, u32, bool) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let data = &buf[..info.buffer_size()];
    (info.width, info.height, data.iter().any(|&b| b != 255))
}

#[test]
fn a_small_sweep_writes_its_table_csv_and_plots_and_report_redraws_them() {
    let dir = scratch("sweep");
    let out = dir.join("sw");
    let r = aiac(&[
        "sweep",
        "--variant",
        "async,racy",
        "--max-in-flight",
        "1,2",
        "-t",
        "2",
        "--global",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}\n{}", text(&r.stderr));
    // The table: one row per configuration. R binds async channels; racy channels over
    // threads complete every send at once, so the sweep runs racy once.
    let table = summary_of(&stdout);
    for (row, n) in [("async", 2), ("racy", 1)] {
        assert_eq!(
            table
                .lines()
                .filter(|l| l.trim_start().starts_with(row))
                .count(),
            n,
            "{table}"
        );
    }
    assert!(
        table.contains("it mean") && table.contains("time (s)"),
        "{table}"
    );
    // The CSV: one row per run.
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("run,status,exit_code,backend,variant,ranks"));
    assert_eq!(rows.len(), 4, "{csv}");
    let r_col = rows[0]
        .split(',')
        .position(|c| c == "max_in_flight")
        .unwrap();
    let rs: Vec<&str> = rows[1..]
        .iter()
        .map(|l| l.split(',').nth(r_col).unwrap())
        .collect();
    assert_eq!(rs, ["1", "2", "-"]);
    assert_eq!(names_in(&out.join("runs")).len(), 3);
    // The plots: PNG of the stated size with something drawn, SVG with axes and lines.
    let plots = out.join("plots");
    for (name, w, h) in [
        ("convergence", 1500, 620),
        ("iterations", 1100, 620),
        ("batches", 1100, 620),
        ("vs_R", 1500, 620),
    ] {
        let png = plots.join(format!("{name}.png"));
        let (pw, ph, drawn) = decode_png(&png);
        assert_eq!((pw, ph), (w, h), "{name}.png");
        assert!(drawn, "{name}.png is blank");
        assert!(stdout.contains(&format!("{name}.png")), "{stdout}");
        let svg = std::fs::read_to_string(plots.join(format!("{name}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the SVG is XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let count = |tag: &str| {
            doc.descendants()
                .filter(|n| n.tag_name().name() == tag)
                .count()
        };
        assert!(count("text") > 5, "{name}.svg: labels");
        assert!(
            count("polyline") + count("path") + count("rect") > 3,
            "{name}.svg: plotted elements"
        );
    }
    let svg = std::fs::read_to_string(plots.join("convergence.svg")).unwrap();
    for label in [
        "time since the solve started (s)",
        "relative residual",
        "async R=2",
        ">\nracy\n<",
    ] {
        assert!(svg.contains(label), "convergence.svg lacks '{label}'");
    }
    assert!(
        !plots.join("vs_p.png").exists(),
        "one process count: no plot against p"
    );

    // `aiac report` on the saved JSON: the same table, and the plots again.
    let again = dir.join("again");
    let rep = aiac(&[
        "report",
        out.join("runs").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert_eq!(rep.status.code(), Some(0), "{}", text(&rep.stderr));
    assert_eq!(summary_of(&text(&rep.stdout)), table);
    assert_eq!(
        std::fs::read_to_string(again.join("runs.csv")).unwrap(),
        csv,
        "the same CSV"
    );
    assert_eq!(decode_png(&again.join("vs_R.png")).0, 1500);
}

/// `aiac sweep --halo-depth 1,2,4,auto`: one run per k, the k column in the table and the
/// CSV (with the k `auto` chose), and every run the same iteration count (deep halos change
/// the cost, not the iterates).
#[test]
fn a_halo_depth_sweep_runs_each_k_to_the_same_iteration() {
    let dir = scratch("sweep-depth");
    let out = dir.join("sw");
    let r = aiac(&[
        "sweep",
        "--halo-depth",
        "1,2,4,auto",
        "-t",
        "2",
        "--local",
        "9x7x8",
        "--check-every",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}\n{}", text(&r.stderr));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let col = |name: &str| rows[0].iter().position(|c| *c == name).unwrap();
    let (k, it, status) = (col("halo_depth"), col("iterations_max"), col("status"));
    assert_eq!(rows.len(), 5, "{csv}");
    let ks: Vec<&str> = rows[1..].iter().map(|r| r[k]).collect();
    assert_eq!(ks, ["1", "2", "4", "auto"], "{csv}");
    // K = 8 on 9×7×8 blocks split in x: auto tries 1, 2, 4 and 8.
    let chosen = col("halo_depth_chosen");
    assert!(["1", "2", "4", "8"].contains(&rows[4][chosen]), "{csv}");
    assert!(rows[1..4].iter().all(|r| r[chosen].is_empty()), "{csv}");
    assert!(rows[1..].iter().all(|r| r[status] == "converged"), "{csv}");
    assert!(rows[1..].iter().all(|r| r[it] == rows[1][it]), "{csv}");
    // A k whose check period does not fit is refused before any run, naming the flag.
    let r = aiac(&[
        "sweep",
        "--halo-depth",
        "3",
        "--check-every",
        "8",
        "--local",
        "8",
        "--out",
        dir.join("bad").to_str().unwrap(),
    ]);
    assert_ne!(r.status.code(), Some(0));
    assert!(
        text(&r.stderr).contains("--halo-depth"),
        "{}",
        text(&r.stderr)
    );
}
