//! The checks run both over threads (tests/threads.rs) and under mpirun (tests/mpi_jobs.rs):
//! the table used from Rust as any user would, on any backend.

use chan_core::traits::*;
use dht::bench::{self, Spec, Volume};
use dht::{Insert, Table};

/// Every rank inserts keys `k ≡ rank (mod size)` of `1..=keys` with value `-k`, from a table
/// of twice as many slots as keys; after the fence every rank reads every key's value, keys
/// past `keys` are absent, and the ranks' slots hold each key once.
pub fn map_round_trip<C: Windows>(ctx: &mut C, keys: u64, insert: Insert) -> Result<(), String> {
    let (rank, size) = (ctx.rank() as u64, ctx.size() as u64);
    let per_rank = (2 * keys).div_ceil(size) as usize;
    let mut t = Table::<_, u64, i64>::new(ctx, per_rank, insert).map_err(|e| e.to_string())?;
    for k in (1..=keys).filter(|k| k % size == rank) {
        let p = t.insert(k, -(k as i64)).map_err(|e| e.to_string())?;
        if p.present {
            return Err(format!("key {k} present before its insert"));
        }
    }
    t.fence().map_err(|e| e.to_string())?;
    for k in 1..=keys + 10 {
        let got = t.get(k).map_err(|e| e.to_string())?;
        let want = (k <= keys).then_some(-(k as i64));
        if got != want {
            return Err(format!("{insert:?}: key {k}: got {got:?}, want {want:?}"));
        }
    }
    let mut held = [t.local_len().map_err(|e| e.to_string())? as f64];
    t.free().map_err(|e| e.to_string())?;
    ctx.all_reduce(&mut held, chan_core::ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    if held[0] != keys as f64 {
        return Err(format!(
            "{insert:?}: the slots hold {} keys, want {keys}",
            held[0]
        ));
    }
    Ok(())
}

/// The benchmark's run judges its table correct, with every object held once.
pub fn bench_is_correct<C: Windows>(ctx: &mut C, insert: Insert) -> Result<(), String> {
    let spec = Spec {
        volume: Volume::PerRank(500),
        seed: 11,
        insert,
        hit_ratio: 0.5,
    };
    let r = bench::run(ctx, &spec).map_err(|e| e.to_string())?;
    let want = (500 * ctx.size()) as u64;
    if !r.correct || r.table_objects != want || r.found != want {
        return Err(format!("{insert:?}: {r:?}"));
    }
    Ok(())
}
