//! `aiac run --matrix`: the user's own system under threads, `mpirun` and `oshrun`, against
//! serial Jacobi and CG written out here on the same matrix, and every bad file refused with
//! one error naming the file and the line, on every backend, before anything is written.

// Tests write their fixtures directly, not through aiac's output module.
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::{scratch, text, AIAC};

/// A test matrix as (n, triplets), 0-based.
struct Matrix {
    n: usize,
    t: Vec<(usize, usize, f64)>,
}

impl Matrix {
    /// The 5-point Laplacian of an m × m grid plus a coefficient that varies by row (SPD).
    fn spd(m: usize) -> Matrix {
        Matrix {
            n: m * m,
            t: common::spd_triplets(m),
        }
    }

    /// An upwinded convection–diffusion operator (not symmetric, diagonally dominant).
    fn convection(m: usize) -> Matrix {
        let mut t = Vec::new();
        for y in 0..m {
            for x in 0..m {
                let i = y * m + x;
                t.push((i, i, 4.5));
                for (ok, j, v) in [
                    (x > 0, i.wrapping_sub(1), -1.5),
                    (x + 1 < m, i + 1, -0.5),
                    (y > 0, i.wrapping_sub(m), -1.0),
                    (y + 1 < m, i + m, -1.0),
                ] {
                    if ok {
                        t.push((i, j, v));
                    }
                }
            }
        }
        Matrix { n: m * m, t }
    }

    fn mul(&self, x: &[f64]) -> Vec<f64> {
        let mut y = vec![0.0; self.n];
        for &(i, j, v) in &self.t {
            y[i] += v * x[j];
        }
        y
    }

    fn diagonal(&self) -> Vec<f64> {
        let mut d = vec![0.0; self.n];
        for &(i, j, v) in &self.t {
            if i == j {
                d[i] += v;
            }
        }
        d
    }

    /// As a `general` file, or (`symmetric`) its lower triangle as a `symmetric` one.
    fn write(&self, path: &Path, symmetric: bool) {
        let kept: Vec<_> = self.t.iter().filter(|e| !symmetric || e.1 <= e.0).collect();
        let mut s = format!(
            "%%MatrixMarket matrix coordinate real {}\n% a test system\n{} {} {}\n",
            if symmetric { "symmetric" } else { "general" },
            self.n,
            self.n,
            kept.len()
        );
        for (i, j, v) in kept {
            writeln!(s, "{} {} {v:e}", i + 1, j + 1).unwrap();
        }
        std::fs::write(path, s).unwrap();
    }
}

/// b = A·1.
fn ones_rhs(a: &Matrix) -> Vec<f64> {
    a.mul(&vec![1.0; a.n])
}

/// `k` serial Jacobi sweeps from 0: `x ← x + D⁻¹(b − A x)`.
fn serial_jacobi(a: &Matrix, b: &[f64], k: usize) -> Vec<f64> {
    let d = a.diagonal();
    let mut x = vec![0.0; a.n];
    for _ in 0..k {
        let ax = a.mul(&x);
        for i in 0..a.n {
            x[i] += (b[i] - ax[i]) / d[i];
        }
    }
    x
}

/// Serial CG from 0 to ‖r‖/‖b‖ ≤ tol, or `max` iterations: iterations and x.
fn serial_cg(a: &Matrix, b: &[f64], tol: f64, max: u64) -> (u64, Vec<f64>) {
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let bn = dot(b, b).sqrt();
    let (mut x, mut r, mut p) = (vec![0.0; a.n], b.to_vec(), b.to_vec());
    let mut rr = dot(&r, &r);
    for it in 1..=max {
        let q = a.mul(&p);
        let alpha = rr / dot(&p, &q);
        for i in 0..a.n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let rr_new = dot(&r, &r);
        if rr_new.sqrt() / bn <= tol || it == max {
            return (it, x);
        }
        for i in 0..a.n {
            p[i] = r[i] + rr_new / rr * p[i];
        }
        rr = rr_new;
    }
    panic!("serial CG did not converge")
}

/// `aiac run` of `args` on `np` ranks of `backend` (threads, mpi, shmem), killed after two
/// minutes.
fn aiac_run(backend: &str, np: usize, args: &[&str]) -> Output {
    let np = np.to_string();
    let mut c = Command::new("timeout");
    c.args(["-k", "5", "120"]);
    match backend {
        "threads" => c.args([AIAC, "run", "-t", &np]),
        "mpi" => c.args(["mpirun", "-np", &np, AIAC, "run", "--backend", "mpi"]),
        _ => c.args(["oshrun", "-np", &np, AIAC, "run", "--backend", "shmem"]),
    };
    c.args(args)
        .output()
        .expect("timeout and the launcher start")
}

/// A `--solution` file's values.
fn read_solution(path: &Path, n: usize) -> Vec<f64> {
    let s = std::fs::read_to_string(path).expect("solution written");
    let mut lines = s.lines().filter(|l| !l.starts_with('%'));
    assert_eq!(lines.next(), Some(format!("{n} 1").as_str()));
    let x: Vec<f64> = lines.map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(x.len(), n);
    x
}

const BACKENDS: [&str; 3] = ["threads", "mpi", "shmem"];

/// On 1 to 4 ranks of every backend, 40 sync Jacobi sweeps give the serial 40th iterate to
/// 1e-12 of its scale (the same formula row by row), on a symmetric file and a general
/// non-symmetric one; CG on the symmetric one gives the serial CG's 12th iterate to 1e-12 of
/// its scale (dot products split across ranks round differently, by ulps), and converges
/// in the serial CG's iterations (±2) to the serial solution within 1e-8.
#[test]
fn every_backend_solves_as_the_serial_solver_does() {
    let dir = scratch("matrix-solve");
    let spd = Matrix::spd(9);
    let conv = Matrix::convection(9);
    let (fs, fc) = (dir.join("spd.mtx"), dir.join("conv.mtx"));
    spd.write(&fs, true);
    conv.write(&fc, false);
    let x_out = dir.join("x.mtx");
    let xs = x_out.to_str().unwrap();
    let (cg_its, cg_x) = serial_cg(&spd, &ones_rhs(&spd), 1e-10, 10_000);
    // 12 CG iterations, well before convergence: the iterate to 1e-12.
    let (_, cg12) = serial_cg(&spd, &ones_rhs(&spd), 1e-300, 12);
    let scale12 = cg12.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for backend in BACKENDS {
        for np in 1..=4 {
            for (a, f) in [(&spd, &fs), (&conv, &fc)] {
                let want = serial_jacobi(a, &ones_rhs(a), 40);
                let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let out = aiac_run(
                    backend,
                    np,
                    &[
                        "--matrix",
                        f.to_str().unwrap(),
                        "--max-iters",
                        "40",
                        "--check-every",
                        "40",
                        "--tol",
                        "1e-15",
                        "--quiet",
                        "--solution",
                        xs,
                    ],
                );
                let what = format!("{backend} -np {np} {}", f.display());
                assert_eq!(out.status.code(), Some(2), "{what}: {}", text(&out.stderr));
                let x = read_solution(&x_out, a.n);
                for i in 0..a.n {
                    assert!((x[i] - want[i]).abs() <= 1e-12 * scale, "{what}: x[{i}]");
                }
            }
            let json = dir.join("cg.json");
            let out = aiac_run(
                backend,
                np,
                &[
                    "--matrix",
                    fs.to_str().unwrap(),
                    "--solver",
                    "cg",
                    "--tol",
                    "1e-10",
                    "--quiet",
                    "--solution",
                    xs,
                    "--json",
                    json.to_str().unwrap(),
                ],
            );
            let what = format!("{backend} -np {np} cg");
            assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
            let its = report["iterations"]["max"].as_f64().unwrap() as u64;
            assert!(its.abs_diff(cg_its) <= 2, "{what}: {its} vs {cg_its}");
            assert_eq!(report["config"]["matrix"]["n"], spd.n, "{what}");
            assert_eq!(report["config"]["matrix"]["symmetric"], true, "{what}");
            let x = read_solution(&x_out, spd.n);
            for i in 0..spd.n {
                assert!((x[i] - cg_x[i]).abs() <= 1e-8, "{what}: x[{i}]");
            }
            let out = aiac_run(
                backend,
                np,
                &[
                    "--matrix",
                    fs.to_str().unwrap(),
                    "--solver",
                    "cg",
                    "--tol",
                    "1e-15",
                    "--max-iters",
                    "12",
                    "--quiet",
                    "--solution",
                    xs,
                ],
            );
            assert_eq!(
                out.status.code(),
                Some(2),
                "{what} 12: {}",
                text(&out.stderr)
            );
            let x = read_solution(&x_out, spd.n);
            for i in 0..spd.n {
                assert!(
                    (x[i] - cg12[i]).abs() <= 1e-12 * scale12,
                    "{what}: 12th iterate, x[{i}] = {} vs {}",
                    x[i],
                    cg12[i]
                );
            }
        }
    }
}

/// Each bad input is refused on every backend with one error that names the file (and the
/// line, where the fault is on one), exit 1, and no report written.
#[test]
fn bad_files_are_one_error_naming_the_file_and_line() {
    let dir = scratch("matrix-bad");
    let good = dir.join("good.mtx");
    Matrix::spd(4).write(&good, true);
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let head = "%%MatrixMarket matrix coordinate real general\n";
    let cases = [
        (
            write(
                "header.mtx",
                "%%MatrixMarket matrix foo real general\n2 2 1\n1 1 1\n",
            ),
            ":1:",
        ),
        (
            write("truncated.mtx", &format!("{head}3 3 3\n1 1 1\n2 2 1\n")),
            ":",
        ),
        (write("square.mtx", &format!("{head}3 4 1\n1 1 1\n")), ":2:"),
        (
            write(
                "pattern.mtx",
                "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n",
            ),
            ":1:",
        ),
        (
            write(
                "complex.mtx",
                "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n",
            ),
            ":1:",
        ),
        (
            write("nan.mtx", &format!("{head}2 2 2\n1 1 1\n2 2 nan\n")),
            ":4:",
        ),
        (
            write("inf.mtx", &format!("{head}2 2 2\n1 1 inf\n2 2 1\n")),
            ":3:",
        ),
        (
            write("range.mtx", &format!("{head}2 2 2\n1 1 1\n3 2 1\n")),
            ":4:",
        ),
        (
            write(
                "huge.mtx",
                &format!("{head}2000000000 2000000000 9000000000000\n1 1 1\n"),
            ),
            ":2:",
        ),
    ];
    let json = dir.join("r.json");
    for backend in BACKENDS {
        for (file, at) in &cases {
            let out = aiac_run(
                backend,
                2,
                &[
                    "--matrix",
                    file.to_str().unwrap(),
                    "--json",
                    json.to_str().unwrap(),
                ],
            );
            let err = text(&out.stderr);
            let what = format!("{backend} {}", file.display());
            assert_eq!(out.status.code(), Some(1), "{what}: {err}");
            let name = file.to_str().unwrap();
            let lines: Vec<_> = err.lines().filter(|l| l.contains("aiac: error")).collect();
            assert_eq!(lines.len(), 1, "{what}: once\n{err}");
            assert!(
                lines[0].contains(&format!("{name}{at}"))
                    || (*at == ":" && lines[0].contains(name)),
                "{what}: {}",
                lines[0]
            );
            assert!(!json.exists(), "{what}: nothing written");
        }
        // A right-hand side of the wrong length names the vector's file.
        let rhs = write(
            "rhs.mtx",
            "%%MatrixMarket matrix array real general\n5 1\n1\n2\n3\n4\n5\n",
        );
        let out = aiac_run(
            backend,
            2,
            &[
                "--matrix",
                good.to_str().unwrap(),
                "--rhs",
                rhs.to_str().unwrap(),
            ],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend} rhs: {err}");
        assert!(
            err.contains(rhs.to_str().unwrap()) && err.contains("16"),
            "{backend}: {err}"
        );
    }
}

/// What the method needs of the matrix is refused by name: a zero diagonal for Jacobi, a
/// non-symmetric matrix for CG and for multisplitting's default inner CG; a run that
/// diverges stops as soon as its residual is not finite, not at --max-iters.
#[test]
fn what_a_method_needs_of_the_matrix_is_checked() {
    let dir = scratch("matrix-needs");
    let conv = dir.join("conv.mtx");
    Matrix::convection(5).write(&conv, false);
    let zero = dir.join("zero.mtx");
    std::fs::write(
        &zero,
        "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 2\n1 2 1\n2 1 1\n",
    )
    .unwrap();
    // Not dominant: Jacobi's iteration matrix has spectral radius 3.
    let wild = dir.join("wild.mtx");
    std::fs::write(
        &wild,
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 1\n2 1 3\n2 2 1\n",
    )
    .unwrap();
    for backend in BACKENDS {
        let out = aiac_run(backend, 2, &["--matrix", zero.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend}: {err}");
        assert!(
            err.contains("row 2 has a zero diagonal"),
            "{backend}: {err}"
        );
        for solver in ["cg", "multisplit"] {
            let out = aiac_run(
                backend,
                2,
                &["--matrix", conv.to_str().unwrap(), "--solver", solver],
            );
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{backend} {solver}: {err}");
            assert!(
                err.contains("is not symmetric"),
                "{backend} {solver}: {err}"
            );
        }
        let json = dir.join("wild.json");
        let out = aiac_run(
            backend,
            2,
            &[
                "--matrix",
                wild.to_str().unwrap(),
                "--check-every",
                "1",
                "--json",
                json.to_str().unwrap(),
            ],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{backend}: {err}");
        assert!(err.contains("not diagonally dominant"), "{backend}: {err}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["stop"], "diverged", "{backend}");
        let its = report["iterations"]["max"].as_f64().unwrap();
        assert!(its < 2000.0, "{backend}: stopped after {its} iterations");
    }
}

/// The grid's flags are refused with `--matrix`, by name, exit 1, and so is the
/// shared-memory backend (it has no channels to carry ghosts).
#[test]
fn the_grids_flags_are_refused_with_a_matrix() {
    let dir = scratch("matrix-flags");
    let f = dir.join("a.mtx");
    Matrix::spd(4).write(&f, true);
    let f = f.to_str().unwrap();
    for (extra, names) in [
        (&["--problem", "poisson"][..], "--problem"),
        (&["--decomp", "z"][..], "--decomp"),
        (&["--global", "10"][..], "--global"),
        (&["--local", "10"][..], "--local"),
        (&["--offset", "1"][..], "--offset"),
        (&["--exchange", "overlap"][..], "--exchange"),
        (
            &["--halo-depth", "2", "--check-every", "2"][..],
            "--halo-depth",
        ),
        (
            &["--solver", "multisplit", "--inner", "cg32"][..],
            "--inner cg32",
        ),
        (&["--backend", "shared"][..], "--backend shared"),
    ] {
        let out = Command::new(AIAC)
            .args(["run", "--matrix", f])
            .args(extra)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(names), "{extra:?}: {err}");
    }
}

/// `--exchange neighbor` on a sparse matrix: CG over mpirun on 3 ranks (row blocks whose
/// neighbours are the blocks their rows reach) swaps its halos through one
/// `MPI_Ineighbor_alltoallv` on the graph of those blocks, and gives the run of
/// `--exchange waitall` over channels bit for bit: the same iterations, residual and solution.
#[test]
fn cg_on_a_matrix_with_the_neighbor_exchange_equals_waitall_bit_for_bit() {
    let dir = scratch("matrix-neighbor");
    let a = Matrix::spd(9);
    let f = dir.join("spd.mtx");
    a.write(&f, true);
    let mut runs = Vec::new();
    for exchange in ["waitall", "neighbor"] {
        let (json, x) = (
            dir.join(format!("{exchange}.json")),
            dir.join(format!("{exchange}.mtx")),
        );
        let out = aiac_run(
            "mpi",
            3,
            &[
                "--matrix",
                f.to_str().unwrap(),
                "--solver",
                "cg",
                "--exchange",
                exchange,
                "--tol",
                "1e-10",
                "--quiet",
                "--solution",
                x.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{exchange}: {}",
            text(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(r["config"]["method"]["exchange"], exchange);
        assert_eq!(r["config"]["ranks"], 3);
        assert_eq!(r["converged"], true, "{exchange}");
        let its = r["iterations"]["max"].as_f64().unwrap();
        assert!(its > 5.0, "{exchange}: {its} iterations");
        runs.push((
            its,
            r["residual"].to_string(),
            std::fs::read_to_string(&x).unwrap(),
        ));
    }
    assert_eq!(runs[0], runs[1], "neighbor against waitall");
}

/// `aiac sweep --matrix FILE --rhs FILE` over solvers, variants, ranks and R: every run
/// converges on the system; a sync Jacobi run's true residual (checked every iteration) is the
/// serial Jacobi iterate's after as many sweeps (to 1e-9 of it), a CG run takes the serial CG's iterations (±2), and
/// the sweep writes its table (one row per run) and the plot against p.
#[test]
fn a_sweep_over_a_matrix_converges_as_the_serial_solvers_do() {
    let dir = scratch("matrix-sweep");
    let a = Matrix::spd(6);
    let (f, rhs) = (dir.join("a.mtx"), dir.join("b.mtx"));
    a.write(&f, true);
    let x: Vec<f64> = (0..a.n).map(|i| 1.0 + (i % 5) as f64 * 0.5).collect();
    let b = a.mul(&x);
    let mut s = format!("%%MatrixMarket matrix array real general\n{} 1\n", a.n);
    for v in &b {
        writeln!(s, "{v:e}").unwrap();
    }
    std::fs::write(&rhs, s).unwrap();
    let out_dir = dir.join("sweep");
    let out = common::aiac(&[
        "sweep",
        "--matrix",
        f.to_str().unwrap(),
        "--rhs",
        rhs.to_str().unwrap(),
        "--solver",
        "jacobi,cg",
        "--variant",
        "sync,async",
        "-t",
        "1,3",
        "--max-in-flight",
        "1,2",
        "--check-every",
        "1",
        "--out",
        out_dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let (mut runs, mut compared) = (0, 0);
    for e in std::fs::read_dir(out_dir.join("runs")).unwrap() {
        let path = e.unwrap().path();
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let c = &r["config"];
        assert_eq!(r["converged"], true, "{path:?}");
        assert_eq!(c["matrix"]["n"], a.n, "{path:?}");
        assert!(c["matrix"]["rhs"].is_string(), "{path:?}");
        let tol = r["tol"].as_f64().unwrap();
        let true_res = r["residual"]["true"].as_f64().unwrap();
        assert!(true_res < tol, "{path:?}: {true_res:e} ≥ {tol:e}");
        let its = r["iterations"]["max"].as_f64().unwrap() as u64;
        let method = &c["method"];
        match (method["kind"].as_str(), method["variant"].as_str()) {
            (Some("jacobi"), Some("sync")) => {
                let xk = serial_jacobi(&a, &b, its as usize);
                let ax = a.mul(&xk);
                let res: Vec<f64> = b.iter().zip(&ax).map(|(b, ax)| b - ax).collect();
                let serial = norm(&res) / norm(&b);
                assert!(
                    (true_res - serial).abs() <= 1e-9 * serial + 1e-15,
                    "{path:?}: {true_res:e} against the serial {serial:e} after {its}"
                );
                compared += 1;
            }
            (Some("krylov"), _) => {
                let (serial_its, _) = serial_cg(&a, &b, tol, 1000);
                assert!(
                    its.abs_diff(serial_its) <= 2,
                    "{path:?}: {its} against {serial_its}"
                );
                compared += 1;
            }
            _ => {}
        }
        runs += 1;
    }
    // jacobi sync, jacobi async R = 1, 2, cg: each on 1 and 3 ranks.
    assert_eq!((runs, compared), (8, 4));
    let csv = std::fs::read_to_string(out_dir.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + runs, "{csv}");
    assert!(out_dir.join("plots/vs_p.png").is_file());
}

/// A sweep over a matrix refuses a missing file, a matrix that is not square, a grid's flag
/// and `--rhs` without `--matrix`: one error naming what is wrong, exit 1, nothing written.
#[test]
fn a_sweep_over_a_bad_matrix_is_refused_before_any_work() {
    let dir = scratch("matrix-sweep-bad");
    let rect = dir.join("rect.mtx");
    std::fs::write(
        &rect,
        "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1.0\n2 2 1.0\n",
    )
    .unwrap();
    let good = dir.join("a.mtx");
    Matrix::spd(3).write(&good, true);
    let missing = dir.join("missing.mtx");
    let out_dir = dir.join("out");
    let (rect, good, missing) = (
        rect.to_str().unwrap(),
        good.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    for (args, names) in [
        (&["--matrix", missing][..], "missing.mtx"),
        (&["--matrix", rect][..], "not square"),
        (&["--matrix", good, "--global", "8"][..], "--global"),
        (&["--rhs", good][..], "--matrix"),
        (
            &["--matrix", good, "-t", "20"][..],
            "every rank needs a row",
        ),
    ] {
        let out = Command::new(AIAC)
            .arg("sweep")
            .args(args)
            .args(["--out", out_dir.to_str().unwrap()])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert_eq!(err.matches("error").count(), 1, "{args:?}: {err}");
        assert!(!out_dir.exists(), "{args:?} created {out_dir:?}");
    }
    // An input under --out, where the sweep writes and removes files: refused, left whole.
    std::fs::create_dir_all(out_dir.join("runs")).unwrap();
    let inside = out_dir.join("runs").join("a.json");
    std::fs::copy(good, &inside).unwrap();
    let before = std::fs::read(&inside).unwrap();
    let out = Command::new(AIAC)
        .args(["sweep", "--matrix", inside.to_str().unwrap()])
        .args(["--out", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("lies under --out"), "{err}");
    assert_eq!(std::fs::read(&inside).unwrap(), before);
}

/// `k` steps of GMRES(m) from 0 (modified Gram–Schmidt; the least-squares problem by its
/// normal equations), serially: the iterate.
fn serial_gmres(a: &Matrix, b: &[f64], m: usize, k: usize) -> Vec<f64> {
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let mut x = vec![0.0; a.n];
    let mut done = 0;
    while done < k {
        let ax = a.mul(&x);
        let r: Vec<f64> = b.iter().zip(&ax).map(|(b, y)| b - y).collect();
        let beta = dot(&r, &r).sqrt();
        let mut v = vec![r.iter().map(|r| r / beta).collect::<Vec<f64>>()];
        let mut h = vec![vec![0.0; m]; m + 1];
        let mut j = 0;
        while j < m && done < k {
            let mut w = a.mul(&v[j]);
            for i in 0..=j {
                h[i][j] = dot(&w, &v[i]);
                for (w, vi) in w.iter_mut().zip(&v[i]) {
                    *w -= h[i][j] * vi;
                }
            }
            h[j + 1][j] = dot(&w, &w).sqrt();
            v.push(w.iter().map(|w| w / h[j + 1][j]).collect());
            j += 1;
            done += 1;
        }
        let mut g: Vec<Vec<f64>> = (0..j)
            .map(|i| {
                let mut row: Vec<f64> = (0..j)
                    .map(|c| (0..=j).map(|l| h[l][i] * h[l][c]).sum())
                    .collect();
                row.push(h[0][i] * beta);
                row
            })
            .collect();
        for c in 0..j {
            let pivot = g[c].clone();
            for row in g.iter_mut().skip(c + 1) {
                let f = row[c] / pivot[c];
                for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
            }
        }
        let mut y = vec![0.0; j];
        for i in (0..j).rev() {
            y[i] = (g[i][j] - (i + 1..j).map(|l| g[i][l] * y[l]).sum::<f64>()) / g[i][i];
        }
        for (vi, yi) in v.iter().zip(&y) {
            for (x, vi) in x.iter_mut().zip(vi) {
                *x += yi * vi;
            }
        }
    }
    x
}

/// `k` iterations of BiCGStab from 0, serially: the iterate.
fn serial_bicgstab(a: &Matrix, b: &[f64], k: usize) -> Vec<f64> {
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let n = a.n;
    let (mut x, mut r) = (vec![0.0; n], b.to_vec());
    let rh = r.clone();
    let (mut rho_old, mut alpha, mut omega) = (1.0, 1.0, 1.0);
    let (mut v, mut p) = (vec![0.0; n], vec![0.0; n]);
    for _ in 0..k {
        let rho = dot(&rh, &r);
        let beta = (rho / rho_old) * (alpha / omega);
        for i in 0..n {
            p[i] = r[i] + beta * (p[i] - omega * v[i]);
        }
        v = a.mul(&p);
        alpha = rho / dot(&rh, &v);
        let s: Vec<f64> = r.iter().zip(&v).map(|(r, v)| r - alpha * v).collect();
        let t = a.mul(&s);
        omega = dot(&t, &s) / dot(&t, &t);
        for i in 0..n {
            x[i] += alpha * p[i] + omega * s[i];
            r[i] = s[i] - omega * t[i];
        }
        rho_old = rho;
    }
    x
}

/// gmres and bicgstab on a general non-symmetric file, on 1 and 2 ranks of every backend:
/// the serial iterate after a fixed number of iterations (GMRES(5) across two restarts,
/// mid-way to convergence) to 1e-11 of its scale (the two sum their dot products in another
/// order: rounding of 1e-16 these few iterations amplify to 1e-13 at most), and convergence
/// to 1e-10 with every preconditioner, block Jacobi's ILU(0) included, the residual of the
/// written solution recomputed here.
#[test]
fn gmres_and_bicgstab_solve_a_nonsymmetric_file_on_every_backend() {
    let dir = scratch("matrix-nonsym");
    let conv = Matrix::convection(9);
    let fc = dir.join("conv.mtx");
    conv.write(&fc, false);
    let f = fc.to_str().unwrap();
    let b = ones_rhs(&conv);
    let x_out = dir.join("x.mtx");
    let xs = x_out.to_str().unwrap();
    let iterates = [
        ("gmres", 12, serial_gmres(&conv, &b, 5, 12)),
        ("bicgstab", 5, serial_bicgstab(&conv, &b, 5)),
    ];
    let residual = |x: &[f64]| {
        let ax = conv.mul(x);
        let r: f64 = ax.iter().zip(&b).map(|(p, q)| (q - p) * (q - p)).sum();
        (r / b.iter().map(|v| v * v).sum::<f64>()).sqrt()
    };
    for backend in BACKENDS {
        for np in [1, 2] {
            for (solver, k, want) in &iterates {
                let what = format!("{backend} -np {np} {solver} {k} iterations");
                let k = k.to_string();
                let mut args = vec![
                    "--matrix",
                    f,
                    "--solver",
                    solver,
                    "--tol",
                    "1e-15",
                    "--max-iters",
                    &k,
                    "--quiet",
                    "--solution",
                    xs,
                ];
                if *solver == "gmres" {
                    args.extend(["--restart", "5"]);
                }
                let out = aiac_run(backend, np, &args);
                assert_eq!(out.status.code(), Some(2), "{what}: {}", text(&out.stderr));
                let x = read_solution(&x_out, conv.n);
                let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                for i in 0..conv.n {
                    assert!(
                        (x[i] - want[i]).abs() <= 1e-11 * scale,
                        "{what}: x[{i}] = {} vs {}",
                        x[i],
                        want[i]
                    );
                }
                assert!(residual(&x) > 1e-6, "{what}: mid-way");
                for pc in ["none", "jacobi", "bjacobi"] {
                    let what = format!("{backend} -np {np} {solver} --pc {pc}");
                    let out = aiac_run(
                        backend,
                        np,
                        &[
                            "--matrix",
                            f,
                            "--solver",
                            solver,
                            "--pc",
                            pc,
                            "--tol",
                            "1e-10",
                            "--quiet",
                            "--solution",
                            xs,
                        ],
                    );
                    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
                    let t = residual(&read_solution(&x_out, conv.n));
                    assert!(t < 1e-10, "{what}: {t:e}");
                }
            }
        }
    }
}

/// Block Jacobi's ILU(0) and IC(0) with a zero pivot in rank 1's block only: exit 1 with one
/// message naming rank 1 and the block's row, on every backend, no report written; and
/// `--restart 0` refused.
#[test]
fn a_zero_pivot_in_one_ranks_block_stops_every_rank() {
    let dir = scratch("matrix-pivot");
    let m = dir.join("pivot.mtx");
    // Rows 1–2: [[4, −1], [−1, 4]]; rows 3–4: [[1, 1], [1, 1]], whose second pivot is 0.
    std::fs::write(
        &m,
        "%%MatrixMarket matrix coordinate real general\n4 4 8\n1 1 4\n1 2 -1\n2 1 -1\n\
         2 2 4\n3 3 1\n3 4 1\n4 3 1\n4 4 1\n",
    )
    .unwrap();
    let json = dir.join("pivot.json");
    for backend in BACKENDS {
        for (solver, sub) in [("gmres", "ilu0"), ("bicgstab", "ilu0"), ("cg", "ic0")] {
            let out = aiac_run(
                backend,
                2,
                &[
                    "--matrix",
                    m.to_str().unwrap(),
                    "--solver",
                    solver,
                    "--pc",
                    "bjacobi",
                    "--pc-sub",
                    sub,
                    "--json",
                    json.to_str().unwrap(),
                ],
            );
            let err = text(&out.stderr);
            let what = format!("{backend} {solver} {sub}");
            assert_eq!(out.status.code(), Some(1), "{what}: {err}");
            assert!(
                err.contains("rank 1's block") && err.contains("row 2"),
                "{what}: {err}"
            );
            assert!(!json.exists(), "{what}: a report written");
        }
        let out = aiac_run(
            backend,
            2,
            &[
                "--matrix",
                m.to_str().unwrap(),
                "--solver",
                "gmres",
                "--restart",
                "0",
            ],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend}: {err}");
        assert!(
            err.contains("--restart must be at least 1"),
            "{backend}: {err}"
        );
    }
}

/// `--matrix-storage`: on 2 ranks of threads and of mpirun, Jacobi and CG (mpirun and Jacobi
/// only on the large matrix below) give the same
/// iterations, residual and solution to the bit whether the rows are stored as CSR or as the
/// compact storage `compact` takes, and the report says which was taken and its bytes an entry:
/// 16-bit column offsets and a table of the few values on a grid's matrix (the second block's
/// offsets to the first's ghosts wrapped); on a matrix with an entry 35 000 columns from its
/// row in the first block, CSR on that block, whose offset does not fit in 16 bits either
/// way, and offsets on the other: `mixed`. The default, `auto`, keeps a small block in CSR.
#[test]
fn compact_matrix_storage_runs_to_the_bits_of_csr() {
    let dir = scratch("matrix-storage");
    let n = 140_000;
    let mut far = Matrix { n, t: Vec::new() };
    for i in 0..n {
        far.t.push((i, i, 4.0));
        if i > 0 {
            far.t.push((i, i - 1, -1.0));
            far.t.push((i - 1, i, -1.0));
        }
    }
    far.t.push((0, 35_000, -1.0));
    far.t.push((35_000, 0, -1.0));
    let systems = [
        (
            "spd",
            Matrix::spd(12),
            "offsets16+table8",
            2.0..4.5,
            &["jacobi", "cg"][..],
            &["threads", "mpi"][..],
        ),
        (
            "far",
            far,
            "mixed",
            4.5..12.0,
            &["jacobi"][..],
            &["mpi"][..],
        ),
    ];
    for (name, a, want, bytes_auto, solvers, backends) in systems {
        let f = dir.join(format!("{name}.mtx"));
        a.write(&f, true);
        for &backend in backends {
            for &solver in solvers {
                let mut runs = Vec::new();
                for storage in ["csr", "compact"] {
                    let at = format!("{name} {backend} {solver} {storage}");
                    let (json, x) = (
                        dir.join(format!("{at}.json").replace(' ', "-")),
                        dir.join(format!("{at}.mtx").replace(' ', "-")),
                    );
                    let out = aiac_run(
                        backend,
                        2,
                        &[
                            "--matrix",
                            f.to_str().unwrap(),
                            "--matrix-storage",
                            storage,
                            "--solver",
                            solver,
                            "--tol",
                            "1e-8",
                            "--solution",
                            x.to_str().unwrap(),
                            "--json",
                            json.to_str().unwrap(),
                        ],
                    );
                    assert_eq!(out.status.code(), Some(0), "{at}: {}", text(&out.stderr));
                    let r: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
                    assert_eq!(r["converged"], true, "{at}");
                    let m = &r["config"]["matrix"];
                    let bytes = m["bytes_per_entry"].as_f64().unwrap();
                    if storage == "csr" {
                        assert_eq!(m["storage"], "csr", "{at}");
                        assert!(bytes > 12.0, "{at}: {bytes}");
                    } else {
                        assert_eq!(m["storage"], want, "{at}");
                        assert!(bytes_auto.contains(&bytes), "{at}: {bytes}");
                    }
                    let said = format!(
                        "stored {} ({bytes:.2} bytes an entry)",
                        m["storage"].as_str().unwrap()
                    );
                    assert!(
                        text(&out.stdout).contains(&said),
                        "{at}: {}",
                        text(&out.stdout)
                    );
                    runs.push((
                        r["iterations"].to_string(),
                        r["residual"].to_string(),
                        std::fs::read_to_string(&x).unwrap(),
                    ));
                }
                assert_eq!(
                    runs[0], runs[1],
                    "{name} {backend} {solver}: compact against csr"
                );
            }
        }
    }
    // The default, `auto`, keeps a block this small (in cache) in CSR.
    let json = dir.join("default.json");
    let f = dir.join("spd.mtx");
    let out = aiac_run(
        "threads",
        2,
        &[
            "--matrix",
            f.to_str().unwrap(),
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["config"]["matrix"]["storage"], "csr");
}
