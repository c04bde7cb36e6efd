//! One problem, every backend: the synchronous iterates of the paper's Jacobi (Laplace) and of
//! Wang & Gobbert's Poisson problem are the same on threads at 1 to 4 ranks, on shared memory,
//! over MPI (`mpirun`) and over OpenSHMEM (`oshrun`), and the async and racy variants certify
//! their convergence claim on every backend. The launched cases run as real jobs, each under a
//! time limit (chan-testkit's harness); each compares its backend's run with a one-rank run of
//! the same configuration on the threads backend, in the same process.
//!
//! `cargo test --test cross_backend --all-features`; add a word to run only the cases whose
//! name contains it.

use aiac::jacobi::{self, Config, Dims, Jacobi, Problem, RankRecord, SizeSpec, Variant};
use aiac::threads::World;
use aiac::traits::*;
use chan_testkit::jobs;
#[cfg(any(feature = "mpi", feature = "shmem"))]
use chan_testkit::jobs::Launcher;
use chan_testkit::Check;
use std::process::ExitCode;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)*));
        }
    };
}

/// The configurations compared: Laplace on a box and Poisson on a cube, each splitting evenly
/// over the process grids of 1 to 4 ranks.
fn configs() -> Vec<(&'static str, Config)> {
    let laplace = Config {
        size: SizeSpec::Global(Dims::new(12, 12, 6)),
        check_every: 7,
        ..Config::default()
    };
    let poisson = Config {
        problem: Problem::Poisson,
        criterion: Problem::Poisson.default_criterion(),
        size: SizeSpec::Global(Dims::cube(12)),
        check_every: 5,
        ..laplace.clone()
    };
    vec![("laplace", laplace), ("poisson", poisson)]
}

/// The async and racy forms of a configuration, with room to converge.
fn unsynced(cfg: &Config) -> [Config; 2] {
    [Variant::Async, Variant::Racy].map(|variant| Config {
        method: Jacobi::new(variant).into(),
        max_iters: 200_000,
        ..cfg.clone()
    })
}

/// The same configuration on one thread: no halo at all, the serial iterates.
fn serial(cfg: &Config) -> Result<RankRecord, String> {
    World::new(1)
        .map_err(|e| e.to_string())?
        .run(|ctx| jacobi::Solve::new(cfg).run(ctx))
        .remove(0)
        .map_err(|e| e.to_string())
}

/// Relative difference; sums over different decompositions differ in their last bits only.
fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

/// A synchronous run's record against the serial one: the same iteration count, the same
/// residual at every check (to 1e-12: only the order of the residual's sum differs), the
/// same true residual and, where there is an exact solution, the same error.
fn same_iterates(what: &str, got: &RankRecord, want: &RankRecord) -> Check {
    ensure!(
        want.converged && want.iterations > 10,
        "{what}: the serial run did not converge: {want:?}"
    );
    ensure!(
        got.iterations == want.iterations,
        "{what}: {} iterations, serial {}",
        got.iterations,
        want.iterations
    );
    let (g, w) = (got.history.points(), want.history.points());
    ensure!(
        g.len() == w.len(),
        "{what}: {} checks, serial {}",
        g.len(),
        w.len()
    );
    for (a, b) in g.iter().zip(w) {
        ensure!(
            a.iteration() == b.iteration() && rel(a.residual(), b.residual()) <= 1e-12,
            "{what}: check {a:?}, serial {b:?}"
        );
    }
    ensure!(
        rel(got.residual.true_residual, want.residual.true_residual) <= 1e-12,
        "{what}: true residual {}, serial {}",
        got.residual.true_residual,
        want.residual.true_residual
    );
    if let (Some(a), Some(b)) = (got.error_max, want.error_max) {
        ensure!(rel(a, b) <= 1e-10, "{what}: error {a}, serial {b}");
    }
    Ok(())
}

/// An async or racy run's claim, certified: converged means the true residual of the final
/// global iterate meets the tolerance (never the reported value alone).
fn certified(what: &str, r: &RankRecord, cfg: &Config) -> Check {
    ensure!(r.converged, "{what}: did not converge: {r:?}");
    let tol = cfg.criterion.tol();
    ensure!(
        r.residual.true_residual <= tol,
        "{what}: converged with the true residual {} above {tol}",
        r.residual.true_residual
    );
    Ok(())
}

/// Every check of one rank of a world: sync iterates equal the serial ones, async and racy
/// certify. Collective.
fn every_check<C: Context>(ctx: &mut C, backend: &str) -> Check {
    let p = ctx.size();
    for (name, cfg) in configs() {
        let what = format!("{name} on {backend} at {p} ranks");
        let mut got = jacobi::Solve::new(&cfg)
            .run(ctx)
            .map_err(|e| format!("{what}: {e}"))?;
        // A rank's error is over its own points: the run's is the largest.
        if let Some(e) = got.error_max {
            let mut all = [e];
            ctx.all_reduce(&mut all, aiac::ReduceOp::Max)
                .map_err(|e| e.to_string())?;
            got.error_max = Some(all[0]);
        }
        // Every rank holds the global history; rank 0 compares it with a serial run.
        if ctx.rank() == 0 {
            same_iterates(&what, &got, &serial(&cfg)?)?;
        }
        for cfg in unsynced(&cfg) {
            let what = format!("{what}, {:?}", cfg.variant());
            let r = jacobi::Solve::new(&cfg)
                .run(ctx)
                .map_err(|e| format!("{what}: {e}"))?;
            certified(&what, &r, &cfg)?;
        }
    }
    Ok(())
}

/// The in-process backends: threads at 1 to 4 ranks and shared memory at 1 to 3 threads.
fn in_process() -> Check {
    for p in 1..=4 {
        let outcomes = World::new(p)
            .map_err(|e| e.to_string())?
            .run(|ctx| every_check(ctx, "threads"));
        outcomes.into_iter().collect::<Result<Vec<()>, String>>()?;
        println!("test threads np={p} ... ok");
    }
    for (name, cfg) in configs() {
        let want = serial(&cfg)?;
        for t in 1..=3 {
            let what = format!("{name} on shared memory with {t} threads");
            let mut got = jacobi::Solve::new(&cfg)
                .run_shared(t)
                .map_err(|e| format!("{what}: {e}"))?;
            // A thread's error is over its own planes: the run's is the largest.
            let error = got.iter().filter_map(|r| r.error_max).reduce(f64::max);
            for r in &mut got {
                r.error_max = error;
                same_iterates(&what, r, &want)?;
            }
            for cfg in unsynced(&cfg) {
                let what = format!("{what}, {:?}", cfg.variant());
                for r in jacobi::Solve::new(&cfg)
                    .run_shared(t)
                    .map_err(|e| format!("{what}: {e}"))?
                {
                    certified(&what, &r, &cfg)?;
                }
            }
            println!("test shared {name} t={t} ... ok");
        }
    }
    Ok(())
}

/// One rank of a launched job: every check, then the library's finalize; a failing rank
/// aborts the job (the others may wait for it in a collective call).
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn child_on<C: Context, E: std::fmt::Display>(
    init: Result<C, E>,
    backend: &str,
    finalize: fn(C) -> Result<(), String>,
    abort: fn(&C) -> !,
) -> Check {
    let mut ctx = init.map_err(|e| e.to_string())?;
    match every_check(&mut ctx, backend) {
        Ok(()) => finalize(ctx),
        Err(e) => {
            eprintln!("{backend} rank {}: {e}", ctx.rank());
            abort(&ctx)
        }
    }
}

fn child(case: &str) -> ExitCode {
    let outcome = match case {
        #[cfg(feature = "mpi")]
        "mpi_matches_threads" => child_on(
            aiac::mpi::MpiCtx::init(),
            "mpi",
            |c| c.finalize().map_err(|e| e.to_string()),
            |c| c.abort(1),
        ),
        #[cfg(feature = "shmem")]
        "shmem_matches_threads" => child_on(
            aiac::shmem::ShmemCtx::init(),
            "shmem",
            |c| c.finalize().map_err(|e| e.to_string()),
            |c| c.abort(1),
        ),
        other => Err(format!("unknown case {other}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{case}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(case) = jobs::child_case(&args) {
        return child(case);
    }
    let words: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let wanted = |name: &str| words.is_empty() || words.iter().any(|w| name.contains(w.as_str()));
    let mut ok = true;
    if wanted("threads") || wanted("shared") {
        println!("\nrunning the in-process backends");
        if let Err(e) = in_process() {
            eprintln!("{e}");
            println!("test in-process backends ... FAILED");
            ok = false;
        }
    }
    #[cfg(any(feature = "mpi", feature = "shmem"))]
    for (enabled, program, what, unit, case) in [
        (
            cfg!(feature = "mpi"),
            "mpirun",
            "MPI",
            "ranks",
            "mpi_matches_threads",
        ),
        (
            cfg!(feature = "shmem"),
            "oshrun",
            "SHMEM",
            "PEs",
            "shmem_matches_threads",
        ),
    ] {
        if enabled {
            let launcher = Launcher {
                program,
                what,
                unit,
            };
            let all = jobs::per_count(&[(case, &[1, 2, 3, 4], 300)]);
            ok &= jobs::run_all(&launcher, &args, all) == ExitCode::SUCCESS;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
