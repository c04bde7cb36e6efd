//! `heat2d [RANKS]`: the 2-D heat equation to its steady state with asynchronous halos, on a
//! world of RANKS threads (default 2), or on the MPI job that started it
//! (`mpirun -np 4 heat2d`, built with `--features mpi`). Exit 1 when it did not converge to
//! the exact steady state.

use aiac_starter::{heat2d, Heat, HeatResult};

const HEAT: Heat = Heat {
    cols: 16,
    rows: 8,
    tol: 1e-9,
    max_steps: 2_000_000,
};

fn report(results: &[HeatResult]) -> std::process::ExitCode {
    let error = results.iter().map(|r| r.error).fold(0.0, f64::max);
    let converged = results.iter().all(|r| r.converged);
    let steps: Vec<u64> = results.iter().map(|r| r.steps).collect();
    println!("heat2d: {} ranks, steps per rank {steps:?}, converged {converged}, max |u - y| {error:.2e}", results.len());
    if converged && error < 1e-5 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

fn main() -> std::process::ExitCode {
    #[cfg(feature = "mpi")]
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return on_mpi();
    }
    let ranks = std::env::args()
        .nth(1)
        .map_or(Ok(2), |a| a.parse::<usize>());
    let Ok(ranks) = ranks else {
        eprintln!("heat2d: RANKS must be a whole number");
        return std::process::ExitCode::FAILURE;
    };
    let world = match chan_threads::World::new(ranks) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("heat2d: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let results = world.run(|ctx| heat2d(ctx, &HEAT));
    match results.into_iter().collect::<Result<Vec<_>, _>>() {
        Ok(r) => report(&r),
        Err(e) => {
            eprintln!("heat2d: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// One rank per MPI process; rank 0 reports every rank's result, gathered.
#[cfg(feature = "mpi")]
fn on_mpi() -> std::process::ExitCode {
    use chan_core::traits::*;
    let mut ctx = match chan_mpi::MpiCtx::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("heat2d: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mine = match heat2d(&mut ctx, &HEAT) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("heat2d: rank {}: {e}", ctx.rank());
            ctx.abort(1)
        }
    };
    let bytes = [
        mine.steps.to_le_bytes(),
        u64::from(mine.converged).to_le_bytes(),
        mine.error.to_le_bytes(),
        mine.received.to_le_bytes(),
    ]
    .concat();
    let gathered = ctx.gather_bytes(&bytes);
    let code = match gathered {
        Ok(Some(all)) => {
            let word = |b: &[u8], i: usize| {
                u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"))
            };
            let results: Vec<HeatResult> = all
                .iter()
                .map(|b| HeatResult {
                    steps: word(b, 0),
                    converged: word(b, 1) == 1,
                    error: f64::from_bits(word(b, 2)),
                    received: word(b, 3),
                })
                .collect();
            report(&results)
        }
        Ok(None) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heat2d: gathering: {e}");
            std::process::ExitCode::FAILURE
        }
    };
    if let Err(e) = ctx.finalize() {
        eprintln!("heat2d: finalize: {e}");
        return std::process::ExitCode::FAILURE;
    }
    code
}
