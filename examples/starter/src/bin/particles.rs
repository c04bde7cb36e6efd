//! `particles [RANKS] [PER_RANK] [STEPS]`: particles bouncing in boxes shared by pairs of ranks
//! (default 2 ranks, 50 particles each, 400 steps), the crossings sent as structs over channels
//! each pair opens pairwise; on a world of threads, or on the MPI job that started it
//! (`mpirun -np 4 particles`, built with `--features mpi`). Exit 1 when a particle was lost or
//! doubled.

use aiac_starter::{particles, ParticlesResult};

/// Every pair ends with each of its particles once.
fn check(results: &[ParticlesResult], per_rank: usize) -> std::process::ExitCode {
    let arrived: Vec<u64> = results.iter().map(|r| r.arrived).collect();
    for (k, pair) in results.chunks(2).enumerate() {
        let mut ids: Vec<u32> = pair.iter().flat_map(|r| r.ids.iter().copied()).collect();
        ids.sort_unstable();
        if ids != (0..2 * per_rank as u32).collect::<Vec<_>>() {
            eprintln!("particles: pair {k} ends with ids {ids:?}");
            return std::process::ExitCode::FAILURE;
        }
    }
    println!(
        "particles: {} ranks, every pair kept its {} particles; crossings received per rank {arrived:?}",
        results.len(),
        2 * per_rank
    );
    std::process::ExitCode::SUCCESS
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let (Ok(ranks), Ok(per_rank), Ok(steps)) = (
        args.next().unwrap_or(Ok(2)),
        args.next().unwrap_or(Ok(50)),
        args.next().unwrap_or(Ok(400)),
    ) else {
        eprintln!("particles: RANKS, PER_RANK and STEPS must be whole numbers");
        return std::process::ExitCode::FAILURE;
    };
    #[cfg(feature = "mpi")]
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return on_mpi(per_rank, steps as u64);
    }
    let world = match chan_threads::World::new(ranks) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("particles: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let results = world.run(|ctx| particles(ctx, per_rank, steps as u64));
    match results.into_iter().collect::<Result<Vec<_>, _>>() {
        Ok(r) => check(&r, per_rank),
        Err(e) => {
            eprintln!("particles: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// One rank per MPI process; rank 0 checks every rank's particles, gathered.
#[cfg(feature = "mpi")]
fn on_mpi(per_rank: usize, steps: u64) -> std::process::ExitCode {
    use chan_core::traits::*;
    let mut ctx = match chan_mpi::MpiCtx::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("particles: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mine = match particles(&mut ctx, per_rank, steps) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("particles: rank {}: {e}", ctx.rank());
            ctx.abort(1)
        }
    };
    let bytes: Vec<u8> = std::iter::once(mine.arrived)
        .chain(mine.ids.iter().map(|&i| u64::from(i)))
        .flat_map(u64::to_le_bytes)
        .collect();
    let gathered = match ctx.gather_bytes(&bytes) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("particles: {e}");
            ctx.abort(1)
        }
    };
    let code = match gathered {
        None => std::process::ExitCode::SUCCESS,
        Some(all) => {
            let results: Vec<ParticlesResult> = all
                .iter()
                .map(|b| {
                    let w: Vec<u64> = b
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect();
                    ParticlesResult {
                        arrived: w[0],
                        ids: w[1..].iter().map(|&i| i as u32).collect(),
                    }
                })
                .collect();
            check(&results, per_rank)
        }
    };
    if let Err(e) = ctx.finalize() {
        eprintln!("particles: {e}");
        return std::process::ExitCode::FAILURE;
    }
    code
}
