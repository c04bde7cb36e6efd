//! Start and resume (`--x0`, `--checkpoint --checkpoint-every`, `--resume`): a sync run
//! resumed from its checkpoint ends as the run that was not interrupted, bit for bit, on
//! threads and under real `mpirun`; an async or racy run resumed converges and certifies;
//! a bad start or checkpoint is refused with one message naming the file, exit 1, nothing
//! written.

// Tests write their fixtures and hostile files directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{scratch, text, within, AIAC};

/// `aiac run ARGS --json JSON -q`: on the threads backend (`-t 2` unless ARGS give -t), or
/// under `mpirun -np 2 … --backend mpi`.
fn run(mpi: bool, args: &[&str], json: &Path) -> Output {
    let mut c = if mpi {
        let mut c = Command::new("timeout");
        c.args([
            "-k",
            "5",
            "120",
            "mpirun",
            "-np",
            "2",
            AIAC,
            "run",
            "--backend",
            "mpi",
        ]);
        c
    } else {
        let mut c = Command::new(AIAC);
        c.arg("run");
        if !args.contains(&"-t") {
            c.args(["-t", "2"]);
        }
        c
    };
    c.args(args).args(["--json", json.to_str().unwrap(), "-q"]);
    within(c, 150)
}

fn report(out: &Output, json: &Path, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(json).expect("report written")).expect("valid JSON")
}

/// The iterations (max over ranks) and the bits of the reported and true final residuals
/// (the true one always there).
fn ending(j: &Value) -> (u64, u64, u64) {
    // None reported (no check ran): all ones, which no residual has.
    let bits = |v: &Value| v.as_f64().map_or(u64::MAX, f64::to_bits);
    assert!(j["residual"]["true"].is_f64(), "{j}");
    (
        j["iterations"]["max"].as_f64().unwrap() as u64,
        bits(&j["residual"]["reported"]),
        bits(&j["residual"]["true"]),
    )
}

/// A run checkpointed every K/2 iterations, stopped at K by --max-iters (as a killed run
/// would be, its last checkpoint at K), and
/// resumed reaches the uninterrupted run's iteration count and final residuals bit for bit.
fn resumed_bit_for_bit(mpi: bool, problem: &[&str], (k, every): (&str, &str)) {
    let every = ["--checkpoint-every", every];
    let d = scratch(if mpi { "bits-mpi" } else { "bits-threads" });
    let p = |n: &str| d.join(n);
    let ck = p("ck.mtx");
    let full = report(&run(mpi, problem, &p("full.json")), &p("full.json"), 0);
    let stopped = run(
        mpi,
        &[
            problem,
            &every,
            &["--max-iters", k, "--checkpoint", ck.to_str().unwrap()],
        ]
        .concat(),
        &p("part.json"),
    );
    let part = report(&stopped, &p("part.json"), 2);
    assert_eq!(ending(&part).0, k.parse::<u64>().unwrap());
    let head = std::fs::read_to_string(&ck).expect("a checkpoint written");
    assert!(head.contains(&format!("% iteration: {k}\n")), "{head}");
    let resumed = report(
        &run(
            mpi,
            &[problem, &["--resume", ck.to_str().unwrap()]].concat(),
            &p("resumed.json"),
        ),
        &p("resumed.json"),
        0,
    );
    let k: u64 = k.parse().unwrap();
    assert!(ending(&full).0 > k);
    // It went on from K: its first check is past K (a run from the start checks first
    // before K).
    let first = resumed["history"][0][0].as_f64().expect("a history") as u64;
    assert!(first >= k, "first check at {first}, resumed at {k}");
    assert_eq!(
        ending(&resumed),
        ending(&full),
        "resumed against uninterrupted"
    );
}

const LAPLACE: &[&str] = &["--global", "12"];
const POISSON: &[&str] = &["--problem", "poisson", "--global", "10"];

#[test]
fn a_resumed_sync_run_is_the_uninterrupted_one_bit_for_bit_on_threads() {
    resumed_bit_for_bit(false, LAPLACE, ("200", "100"));
    resumed_bit_for_bit(false, POISSON, ("80", "40"));
    let ms = ["--solver", "multisplit", "--global", "12"];
    resumed_bit_for_bit(false, &ms, ("10", "5"));
    let halo = ["--global", "12", "--halo-every", "2", "--check-every", "10"];
    resumed_bit_for_bit(false, &halo, ("120", "60"));
}

#[test]
fn a_resumed_sync_run_is_the_uninterrupted_one_bit_for_bit_under_mpirun() {
    resumed_bit_for_bit(true, LAPLACE, ("200", "100"));
    resumed_bit_for_bit(true, POISSON, ("80", "40"));
}

/// `--x0` from a checkpoint's vector (the format --solution writes): the run starts from it
/// at iteration 0, stops in fewer iterations than from the problem's start, and reaches the
/// same answer (the same sweeps from the same iterate); CG, PIPECG and multisplitting start
/// from it too.
#[test]
fn x0_from_an_earlier_iterate_stops_sooner_at_the_same_answer() {
    let d = scratch("x0");
    let p = |n: &str| d.join(n);
    let ck = p("ck.mtx");
    let full = report(&run(false, LAPLACE, &p("full.json")), &p("full.json"), 0);
    let args = [
        LAPLACE,
        &["--max-iters", "200", "--checkpoint-every", "200"],
        &["--checkpoint", ck.to_str().unwrap()],
    ]
    .concat();
    report(&run(false, &args, &p("part.json")), &p("part.json"), 2);
    let from = report(
        &run(
            false,
            &[LAPLACE, &["--x0", ck.to_str().unwrap()]].concat(),
            &p("x0.json"),
        ),
        &p("x0.json"),
        0,
    );
    let (n_full, _, true_full) = ending(&full);
    let (n_x0, _, true_x0) = ending(&from);
    assert_eq!(n_x0, n_full - 200, "{n_x0} against {n_full}");
    assert_eq!(true_x0, true_full);
    // The other solvers start from it too (CG and PIPECG: r₀ = b − A x₀): fewer iterations.
    for solver in ["cg", "pipecg", "multisplit"] {
        let with = ["--solver", solver, "--global", "12"];
        let zero = report(&run(false, &with, &p("0.json")), &p("0.json"), 0);
        let given = [&with[..], &["--x0", ck.to_str().unwrap()]].concat();
        let from = report(&run(false, &given, &p("1.json")), &p("1.json"), 0);
        let (n0, n1) = (ending(&zero).0, ending(&from).0);
        assert!(n1 < n0, "{solver}: {n1} from x0, {n0} from the start");
        assert_eq!(from["converged"], true, "{solver}");
    }
}

/// Async and racy runs checkpointed at a detection round and resumed converge, their claim
/// certified.
#[test]
fn async_and_racy_runs_resume_and_certify() {
    let d = scratch("async");
    let p = |n: &str| d.join(n);
    for variant in ["async", "racy"] {
        let ck = p(&format!("{variant}.mtx"));
        let args = [
            "--global",
            "12",
            "--variant",
            variant,
            "--checkpoint",
            ck.to_str().unwrap(),
            "--checkpoint-every",
            "2",
        ];
        let part = run(
            false,
            &[&args[..], &["--max-iters", "150"]].concat(),
            &p("a.json"),
        );
        let part = report(&part, &p("a.json"), 2);
        let head = std::fs::read_to_string(&ck).expect("a checkpoint written");
        let at: u64 = head
            .lines()
            .find_map(|l| l.strip_prefix("% iteration: "))
            .expect("an iteration line")
            .parse()
            .unwrap();
        assert!(at > 0 && at <= 150, "{variant}: {at}");
        let j = report(
            &run(
                false,
                &[&args[..2], &args[2..4], &["--resume", ck.to_str().unwrap()]].concat(),
                &p("b.json"),
            ),
            &p("b.json"),
            0,
        );
        assert_eq!(j["converged"], true, "{variant}");
        let certs = j["certifications"].as_array().expect("certifications");
        assert!(
            certs.last().is_some_and(|c| c["accepted"] == true),
            "{variant}: {certs:?}"
        );
        assert!(
            j["iterations"]["min"].as_f64().unwrap() as u64 > at,
            "{variant}"
        );
        // It went on from there: rank 0's first round is past the checkpoint's iteration.
        let first = j["history"][0][0].as_f64().expect("a history") as u64;
        assert!(
            first >= at,
            "{variant}: first round at {first}, resumed at {at}"
        );
        // From the checkpoint's iterate: below the residual of the interrupted run's first
        // round, which its checkpoint came after.
        let value = |j: &Value| j["history"][0][1].as_f64().expect("a residual");
        assert!(
            value(&j) < value(&part),
            "{variant}: {} against {}",
            value(&j),
            value(&part)
        );
    }
}

/// One message naming the file, exit 1, nothing written.
fn refused(mpi: bool, args: &[&str], d: &Path, file: &Path, says: &str) {
    let json = d.join("out.json");
    let out = run(mpi, args, &json);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.contains(file.to_str().unwrap()) && err.contains(says),
        "{args:?}: {err}"
    );
    assert_eq!(
        err.matches("aiac: error").count(),
        1,
        "{args:?}: one message: {err}"
    );
    assert!(!json.exists(), "{args:?}: nothing written");
    assert!(
        !d.join("new.mtx").exists(),
        "{args:?}: no checkpoint written"
    );
}

#[test]
fn bad_starts_and_checkpoints_are_refused() {
    let d = scratch("bad");
    let p = |n: &str| d.join(n);
    let ck = p("ck.mtx");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let ck_s = s(&ck);
    let args = [
        LAPLACE,
        &["--max-iters", "100", "--checkpoint-every", "100"],
        &["--checkpoint", &ck_s],
    ]
    .concat();
    report(&run(false, &args, &p("part.json")), &p("part.json"), 2);
    let good = std::fs::read_to_string(&ck).unwrap();
    let new = s(&p("new.mtx"));
    let with = |flag: &str, f: &Path, more: &[&str]| -> Vec<String> {
        let global: &[&str] = if more.contains(&"--global") {
            &[]
        } else {
            &["--global", "12"]
        };
        [
            &["--checkpoint-every", "100"],
            global,
            &[flag, &s(f), "--checkpoint", &new],
            more,
        ]
        .concat()
        .into_iter()
        .map(str::to_string)
        .collect()
    };
    let check = |mpi: bool, v: Vec<String>, f: &Path, says: &str| {
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        refused(mpi, &v, &d, f, says);
    };
    // --x0: wrong length, NaN, inf, a directory, a FIFO.
    let short = p("short.mtx");
    std::fs::write(
        &short,
        "%%MatrixMarket matrix array real general\n2 1\n1.0\n2.0\n",
    )
    .unwrap();
    check(false, with("--x0", &short, &[]), &short, "has 2 entries");
    let nan = p("nan.mtx");
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    let last = lines.len() - 1;
    lines[last] = "NaN".into();
    std::fs::write(&nan, lines.join("\n")).unwrap();
    check(false, with("--x0", &nan, &[]), &nan, "not a finite number");
    lines[last] = "-inf".into();
    let inf = p("inf.mtx");
    std::fs::write(&inf, lines.join("\n")).unwrap();
    check(false, with("--x0", &inf, &[]), &inf, "not a finite number");
    let dir = p("dir");
    std::fs::create_dir(&dir).unwrap();
    check(false, with("--x0", &dir, &[]), &dir, "a directory");
    let fifo = p("fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    check(false, with("--x0", &fifo, &[]), &fifo, "a FIFO");
    // --resume: truncated (within the last value, leaving a number; halfway), another format,
    // not a checkpoint, another configuration.
    for (name, cut) in [
        ("cut1.mtx", good.rfind('e').unwrap()),
        ("cut2.mtx", good.len() / 2),
    ] {
        let f = p(name);
        std::fs::write(&f, &good[..cut]).unwrap();
        check(false, with("--resume", &f, &[]), &f, "truncated");
    }
    let v2 = p("v2.mtx");
    std::fs::write(&v2, good.replace("format 1", "format 2")).unwrap();
    check(false, with("--resume", &v2, &[]), &v2, "format 2");
    let plain = p("plain.mtx");
    std::fs::write(&plain, good.replace("% aiac checkpoint: format 1\n", "")).unwrap();
    check(
        false,
        with("--resume", &plain, &[]),
        &plain,
        "not a checkpoint",
    );
    check(
        false,
        with("--resume", &ck, &["--global", "16"]),
        &ck,
        "size 12x12x12 there, 16x16x16 here",
    );
    check(
        false,
        with("--resume", &ck, &["--variant", "async"]),
        &ck,
        "method",
    );
    check(
        false,
        with("--resume", &ck, &["--problem", "poisson"]),
        &ck,
        "problem",
    );
    check(
        false,
        with("--resume", &ck, &["-t", "1"]),
        &ck,
        "ranks 2 there, 1 here",
    );
    check(
        true,
        with("--resume", &ck, &["-t", "2", "--global", "16"]),
        &ck,
        "size",
    );
    check(
        true,
        with("--x0", &short, &["-t", "2"]),
        &short,
        "has 2 entries",
    );
    // The checkpoint refused is left as it was.
    assert_eq!(std::fs::read_to_string(&ck).unwrap(), good);
}

/// A run killed while it writes a checkpoint leaves the previous one whole: it resumes.
#[test]
fn a_kill_during_a_checkpoint_leaves_the_previous_one() {
    let d = scratch("kill");
    let ck = d.join("ck.mtx");
    let mut child = Command::new(AIAC)
        .args([
            "run",
            "-t",
            "2",
            "--global",
            "12",
            "-q",
            "--max-iters",
            "100000",
        ])
        .args(["--checkpoint-every", "50", "--checkpoint"])
        .arg(&ck)
        .env("AIAC_TEST_PAUSE_IN_WRITE_MS", "1500")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("aiac starts");
    let t = std::time::Instant::now();
    while !ck.exists() {
        assert!(t.elapsed().as_secs() < 60, "no checkpoint written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The next checkpoint's write is under way (its pause before the rename).
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&ck).unwrap();
    assert!(text.contains("% iteration: 50\n"), "{}", &text[..300]);
    let json = d.join("r.json");
    let out = run(
        false,
        &["--global", "12", "--resume", ck.to_str().unwrap()],
        &json,
    );
    let j = report(&out, &json, 0);
    assert_eq!(j["converged"], true);
}

/// An SPD test system (a 2-D Laplacian plus a varying diagonal), m² rows, written as a
/// `general` Matrix Market file.
fn write_system(path: &Path, m: usize) {
    use std::fmt::Write;
    let t = common::spd_triplets(m);
    let mut s = format!(
        "%%MatrixMarket matrix coordinate real general\n{} {} {}\n",
        m * m,
        m * m,
        t.len()
    );
    for (i, j, v) in t {
        writeln!(s, "{} {} {v:e}", i + 1, j + 1).unwrap();
    }
    std::fs::write(path, s).unwrap();
}

/// `--matrix` with `--x0` from a previous run's `--solution`, for every solver: the run
/// starts at that x (r₀ = b − A x₀ for CG and PIPECG), converged at once with the same
/// answer, where from x = 0 it iterates.
#[test]
fn a_matrix_run_starts_from_a_previous_solution() {
    let d = scratch("matrix-x0");
    let a = d.join("a.mtx");
    write_system(&a, 12);
    let (x, j1, j2) = (d.join("x.mtx"), d.join("1.json"), d.join("2.json"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (a_s, x_s) = (s(&a), s(&x));
    for solver in [
        &["--solver", "jacobi"][..],
        &["--solver", "jacobi", "--variant", "async"],
        &["--solver", "multisplit"],
        &["--solver", "cg"],
        &["--solver", "pipecg"],
    ] {
        let base = [solver, &["--matrix", &a_s, "--tol", "1e-6"]].concat();
        let first = report(
            &run(false, &[&base[..], &["--solution", &x_s]].concat(), &j1),
            &j1,
            0,
        );
        let again = report(
            &run(false, &[&base[..], &["--x0", &x_s]].concat(), &j2),
            &j2,
            0,
        );
        let (n1, _, t1) = ending(&first);
        let (n2, _, t2) = ending(&again);
        assert!(n1 > 0 && n2 == 0, "{solver:?}: {n1} then {n2}");
        assert_eq!(t1, t2, "{solver:?}: the same answer");
    }
}

/// A matrix's Jacobi run checkpointed and resumed is the uninterrupted one, bit for bit, on
/// threads and under mpirun.
#[test]
fn a_resumed_matrix_run_is_the_uninterrupted_one_bit_for_bit() {
    let d = scratch("matrix-resume");
    let a = d.join("a.mtx");
    write_system(&a, 12);
    let ck = d.join("ck.mtx");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (a_s, ck_s) = (s(&a), s(&ck));
    let base = ["--matrix", &a_s, "--tol", "1e-6"];
    for mpi in [false, true] {
        let j = |n: &str| d.join(format!("{n}-{mpi}.json"));
        let full = report(&run(mpi, &base, &j("full")), &j("full"), 0);
        let stop = [
            &base[..],
            &["--max-iters", "40", "--checkpoint-every", "20"],
            &["--checkpoint", &ck_s],
        ]
        .concat();
        report(&run(mpi, &stop, &j("part")), &j("part"), 2);
        let resumed = [&base[..], &["--resume", &ck_s]].concat();
        let resumed = report(&run(mpi, &resumed, &j("resumed")), &j("resumed"), 0);
        assert_eq!(ending(&resumed), ending(&full), "mpi {mpi}");
        let first = resumed["history"][0][0].as_f64().expect("a history") as u64;
        assert!(first >= 40, "mpi {mpi}: first check at {first}");
    }
}

/// The grid's `--solution` (its interior points, x fastest) is the same file from threads
/// and from mpirun, and read back by `--x0` on another rank count it is converged at once.
#[test]
fn a_grid_solution_is_an_x0() {
    let d = scratch("grid-solution");
    let (s1, s2, j) = (d.join("t.mtx"), d.join("m.mtx"), d.join("r.json"));
    let full = report(
        &run(
            false,
            &["--global", "12", "--solution", s1.to_str().unwrap()],
            &j,
        ),
        &j,
        0,
    );
    report(
        &run(
            true,
            &["--global", "12", "--solution", s2.to_str().unwrap()],
            &j,
        ),
        &j,
        0,
    );
    let (a, b) = (std::fs::read(&s1).unwrap(), std::fs::read(&s2).unwrap());
    assert!(a == b, "threads and mpirun wrote different solutions");
    let again = report(
        &run(
            false,
            &["-t", "4", "--global", "12", "--x0", s1.to_str().unwrap()],
            &j,
        ),
        &j,
        0,
    );
    assert_eq!(ending(&again).0, 0);
    let t = |j: &Value| j["residual"]["true"].as_f64().unwrap();
    assert!(
        (t(&again) - t(&full)).abs() <= 1e-12 * t(&full),
        "{} {}",
        t(&again),
        t(&full)
    );
}

/// A run resumed at or past its --max-iters stops there at once, sync or async (no sweep,
/// and no wait for a convergence that no sweep will bring).
#[test]
fn a_run_resumed_at_its_limit_stops_at_once() {
    let d = scratch("limit");
    let (ck, j) = (d.join("ck.mtx"), d.join("r.json"));
    let c = ck.to_str().unwrap();
    for variant in ["sync", "async"] {
        let base = ["--global", "12", "--variant", variant];
        let part = [&base[..], &["--max-iters", "60"]].concat();
        let part = [&part[..], &["--checkpoint-every", "2", "--checkpoint", c]].concat();
        report(&run(false, &part, &j), &j, 2);
        let resumed = [&base[..], &["--max-iters", "10", "--resume", c]].concat();
        let at: u64 = std::fs::read_to_string(&ck)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("% iteration: ").map(|v| v.parse().unwrap()))
            .expect("an iteration line");
        let r = report(&run(false, &resumed, &j), &j, 2);
        assert_eq!(r["stop"], "max_iters", "{variant}");
        assert_eq!(ending(&r).0, at, "{variant}: no sweep past the checkpoint");
    }
}
