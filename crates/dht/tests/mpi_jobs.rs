//! The table used directly from Rust under real `mpirun` (1 to 3 ranks): the checks of
//! tests/shared over chan-mpi's windows (`MPI_Win_allocate`, `MPI_Compare_and_swap`,
//! `MPI_Win_lock`).
//!
//! `cargo test` runs this binary without a launcher; it then starts itself again under
//! `timeout … mpirun --oversubscribe -np N` once per case (chan-testkit's harness) and judges
//! each job by its exit status. A rank whose check fails prints why and calls `MPI_Abort`.
//!
//! `cargo test -p dht --test mpi_jobs [-- FILTER]`

mod shared;

use chan_core::traits::*;
use chan_mpi::MpiCtx;
use chan_testkit::jobs::{self, Launcher};
use dht::Insert;
use std::process::ExitCode;

/// Each case, the rank counts it runs with, and its time limit.
const CASES: &[(&str, &[usize], u64)] = &[
    ("map_round_trip", &[1, 2, 3], 60),
    ("bench_is_correct", &[2, 3], 60),
];

fn run_case(ctx: &mut MpiCtx, case: &str) -> Result<(), String> {
    for insert in [Insert::Cas, Insert::Lock] {
        match case {
            "map_round_trip" => shared::map_round_trip(ctx, 300, insert)?,
            "bench_is_correct" => shared::bench_is_correct(ctx, insert)?,
            _ => return Err(format!("no case {case}")),
        }
    }
    Ok(())
}

/// One rank of a launched case: a failed check aborts the job (nothing waits for a dead peer).
fn child(case: &str) -> ExitCode {
    let Ok(mut ctx) = MpiCtx::init().map_err(|e| eprintln!("MPI init failed: {e}")) else {
        return ExitCode::FAILURE;
    };
    if let Err(e) = run_case(&mut ctx, case) {
        eprintln!("rank {}: {case}: {e}", ctx.rank());
        ctx.abort(1);
    }
    match ctx.finalize() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{case}: finalize: {e}");
            ExitCode::FAILURE
        }
    }
}

const MPIRUN: Launcher = Launcher {
    program: "mpirun",
    what: "dht",
    unit: "ranks",
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match jobs::child_case(&args) {
        Some(case) => child(case),
        None => jobs::run_all(&MPIRUN, &args, jobs::per_count(CASES)),
    }
}
