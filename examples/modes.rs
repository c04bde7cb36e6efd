//! The three channel modes side by side on the threads backend: each rank of a ring swaps a
//! 50×50 face (20 KB) with both neighbours between slices of computation, as a halo exchange
//! does, and rank 1 computes 3× slower than the others (default: 2 ranks, one per core). The table shows what each mode does
//! with that imbalance:
//!
//! - sync waits: every rank runs at the pace of the slowest, nothing is lost or skipped;
//! - async never waits: fast ranks skip sends when all R slots are busy and receivers
//!   discard superseded messages, so they see data several iterations old (staleness);
//! - racy never waits either and has no slots: sends land straight in the neighbour's buffer.
//!
//! `cargo run --release --example modes -- [ranks] [iterations]`

use aiac::threads::World;
use aiac::traits::*;
use aiac::{close_all, Async, Channel, ChannelConfig, ChannelSpec, ChannelStats, Racy, Sync};
use std::time::Instant;

const FACE: usize = 50 * 50;
const R: usize = 2;
const SLOW_RANK: usize = 1;

/// A slice of floating-point work standing in for a sweep; rank 1 does three times as much.
fn compute(rank: usize, acc: &mut [f64]) {
    let reps = if rank == SLOW_RANK { 3 } else { 1 };
    for _ in 0..reps * 40 {
        for v in acc.iter_mut() {
            *v = (*v * 0.999 + 1e-3).sqrt();
        }
    }
}

fn specs(rank: usize, size: usize) -> Vec<ChannelSpec> {
    let cfg = ChannelConfig::new(FACE, R).expect("valid channel parameters");
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    vec![
        ChannelSpec::new(next, rank as u32, cfg).expect("tag below the reserved bit"),
        ChannelSpec::new(prev, prev as u32, cfg).expect("tag below the reserved bit"),
    ]
}

/// What one rank reports: its iteration count, time and the statistics of both channels.
struct RankRun {
    iterations: u64,
    seconds: f64,
    stats: Vec<ChannelStats>,
}

fn run_sync<C: Context>(ctx: &mut C, iters: u64) -> Result<RankRun, String> {
    let specs = specs(ctx.rank(), ctx.size());
    let mut chans: Vec<Channel<C::Backend, Sync>> = ctx.open(&specs).map_err(|e| e.to_string())?;
    let (mut work, mut halo) = (vec![1.0; FACE], vec![0.0; FACE]);
    let t = Instant::now();
    for it in 0..iters {
        compute(ctx.rank(), &mut work);
        for ch in &mut chans {
            ch.set_iteration(it);
            ch.send(&work).map_err(|e| e.to_string())?;
        }
        for ch in &mut chans {
            ch.recv_into(&mut halo).map_err(|e| e.to_string())?;
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let stats = close_all(chans).map_err(|e| e.to_string())?;
    Ok(RankRun {
        iterations: iters,
        seconds,
        stats,
    })
}

fn run_async<C: Context>(ctx: &mut C, iters: u64) -> Result<RankRun, String> {
    let specs = specs(ctx.rank(), ctx.size());
    let mut chans: Vec<Channel<C::Backend, Async>> = ctx.open(&specs).map_err(|e| e.to_string())?;
    let (mut work, mut halo) = (vec![1.0; FACE], vec![0.0; FACE]);
    let t = Instant::now();
    for it in 0..iters {
        compute(ctx.rank(), &mut work);
        for ch in &mut chans {
            ch.set_iteration(it);
            // Full: all R slots in flight; skip this send and keep computing.
            let _ = ch.try_send(&work);
            if let Some(m) = ch.recv().map_err(|e| e.to_string())? {
                halo.copy_from_slice(&m);
            }
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let stats = close_all(chans).map_err(|e| e.to_string())?;
    Ok(RankRun {
        iterations: iters,
        seconds,
        stats,
    })
}

fn run_racy<C: Context>(ctx: &mut C, iters: u64) -> Result<RankRun, String> {
    let specs = specs(ctx.rank(), ctx.size());
    let mut chans: Vec<Channel<C::Backend, Racy>> = ctx.open(&specs).map_err(|e| e.to_string())?;
    let (mut work, mut halo) = (vec![1.0; FACE], vec![0.0; FACE]);
    let t = Instant::now();
    for it in 0..iters {
        compute(ctx.rank(), &mut work);
        for ch in &mut chans {
            ch.set_iteration(it);
            ch.try_send(&work).map_err(|e| e.to_string())?;
            ch.recv().map_err(|e| e.to_string())?.load_into(&mut halo);
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let stats = close_all(chans).map_err(|e| e.to_string())?;
    Ok(RankRun {
        iterations: iters,
        seconds,
        stats,
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ranks: usize = args
        .next()
        .map_or(2, |a| a.parse().expect("ranks: a whole number"));
    let iters: u64 = args
        .next()
        .map_or(2000, |a| a.parse().expect("iterations: a whole number"));
    let world = match World::new(ranks) {
        Ok(w) if ranks >= 2 => w,
        _ => {
            eprintln!("error: the demonstration needs at least 2 ranks, got {ranks}");
            std::process::exit(1);
        }
    };
    println!(
        "aiac channel modes: {ranks} threads in a ring, {iters} iterations, 20 KB faces, R = {R}, rank {SLOW_RANK} computes 3× slower\n"
    );
    println!(
        "{:<6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>6} {:>10}",
        "mode",
        "fastest",
        "slowest",
        "sent",
        "skipped",
        "received",
        "superseded",
        "batch",
        "staleness"
    );
    type Runner = fn(&mut aiac::threads::ThreadCtx, u64) -> Result<RankRun, String>;
    let modes: [(&str, Runner); 3] = [("sync", run_sync), ("async", run_async), ("racy", run_racy)];
    for (name, run) in modes {
        let runs = world.run(|ctx| run(ctx, iters));
        let runs: Vec<RankRun> = match runs.into_iter().collect() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {name}: {e}");
                std::process::exit(1);
            }
        };
        let all = || runs.iter().flat_map(|r| r.stats.iter());
        let sum = |f: fn(&ChannelStats) -> u64| all().map(f).sum::<u64>();
        let batches: u64 = all().map(|s| s.batches.count()).sum();
        let batch_sum: i128 = all().map(|s| s.batches.sum()).sum();
        let stale_n: u64 = all().map(|s| s.staleness.count()).sum();
        let stale_sum: i128 = all().map(|s| s.staleness.sum()).sum();
        let slowest = runs.iter().map(|r| r.seconds).fold(0.0, f64::max);
        let fastest = runs.iter().map(|r| r.seconds).fold(f64::INFINITY, f64::min);
        assert!(runs.iter().all(|r| r.iterations == iters));
        assert_eq!(
            sum(|s| s.received),
            sum(|s| s.peer_sent),
            "every message accounted for"
        );
        println!(
            "{:<6} {:>8.3}s {:>8.3}s {:>9} {:>9} {:>10} {:>10} {:>6.2} {:>10.2}",
            name,
            fastest,
            slowest,
            sum(|s| s.sent),
            sum(|s| s.skipped),
            sum(|s| s.received),
            sum(|s| s.superseded),
            batch_sum as f64 / batches.max(1) as f64,
            stale_sum as f64 / stale_n.max(1) as f64,
        );
    }
    println!(
        "\nfastest/slowest: wall time of the quickest and slowest rank to finish its iterations"
    );
    println!("batch: new messages found per receive that found any (mean)");
    println!(
        "staleness: receiver's iteration minus the sender's stamp, mean over receives \
         (negative: data from a sender that is ahead)"
    );
}
