//! Reductions and collectives against their serial results.

use crate::Check;
use chan_core::traits::*;
use chan_core::ReduceOp;

/// A deterministic pseudo-random contribution of `rank` to reduction `round`, element `i`.
pub fn contribution(rank: usize, round: u64, i: usize) -> f64 {
    let mut x = (rank as u64 + 1)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(round.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add((i as u64).wrapping_mul(0x94d0_49bb_1331_11eb));
    x ^= x >> 31;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    // In [-1, 1), with a spread of magnitudes so rounding matters.
    let unit = (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    unit * 10f64.powi((x % 7) as i32 - 3)
}

/// A non-blocking reduction equals the serial sum to rounding, and the max exactly, for
/// `rounds` back-to-back reductions (each restarted as soon as the last returned, with the
/// next round's values, so a mix-up of rounds shows). The sum's bound: any order of summing n
/// values has |error| ≤ (n−1)·ε·Σ|xᵢ| (first order, Higham §4.2), ε = 2⁻⁵³.
pub fn reductions_match_serial<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut sum = ctx
        .reduction(len, ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    let mut max = ctx
        .reduction(len, ReduceOp::Max)
        .map_err(|e| e.to_string())?;
    let local = |round| {
        (0..len)
            .map(|i| contribution(rank, round, i))
            .collect::<Vec<_>>()
    };
    let eps = f64::EPSILON / 2.0;
    for round in 0..rounds {
        sum.start(&local(round)).map_err(|e| e.to_string())?;
        max.start(&local(round)).map_err(|e| e.to_string())?;
        let mut got_sum = None;
        let mut got_max = None;
        let mut spins = 0u64;
        while got_sum.is_none() || got_max.is_none() {
            if got_sum.is_none() {
                got_sum = sum.test().map_err(|e| e.to_string())?.map(<[f64]>::to_vec);
            }
            if got_max.is_none() {
                got_max = max.test().map_err(|e| e.to_string())?.map(<[f64]>::to_vec);
            }
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            }
        }
        let (got_sum, got_max) = (got_sum.unwrap_or_default(), got_max.unwrap_or_default());
        for i in 0..len {
            let vals: Vec<f64> = (0..size).map(|r| contribution(r, round, i)).collect();
            let serial: f64 = vals.iter().sum();
            let abs: f64 = vals.iter().map(|v| v.abs()).sum();
            let bound = (size.saturating_sub(1)) as f64 * eps * abs * 1.01;
            ensure!(
                (got_sum[i] - serial).abs() <= bound,
                "round {round} element {i}: sum {} vs serial {serial} (bound {bound:e})",
                got_sum[i]
            );
            let serial_max = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            ensure!(
                got_max[i] == serial_max,
                "round {round} element {i}: max {} vs {serial_max}",
                got_max[i]
            );
        }
        // The blocking all-reduce agrees too.
        let mut blocking = local(round);
        ctx.all_reduce(&mut blocking, ReduceOp::Sum)
            .map_err(|e| e.to_string())?;
        for i in 0..len {
            let abs: f64 = (0..size).map(|r| contribution(r, round, i).abs()).sum();
            let bound = 2.0 * (size.saturating_sub(1)) as f64 * eps * abs * 1.01;
            ensure!(
                (blocking[i] - got_sum[i]).abs() <= bound,
                "round {round}: all_reduce {} vs reduction {}",
                blocking[i],
                got_sum[i]
            );
        }
    }
    Ok(())
}

/// The word rank `from` sends rank `to` at position `i` of an all-to-all or gather check.
fn word(from: usize, to: usize, i: usize) -> u64 {
    ((from as u64) << 40) | ((to as u64) << 20) | i as u64
}

/// The collectives chan-core builds on: `all_to_all_v` delivers list p of every rank to rank p
/// whole and in rank order (lists of different lengths, some empty); `gather_v` and
/// `gather_bytes` bring every rank's list (or bytes, a length that is no multiple of 8, one
/// rank with none) to the root only, in rank order. Any number of ranks.
pub fn collectives_match<C: Context>(ctx: &mut C) -> Check {
    use chan_core::backend::Lists;
    let (rank, size) = (ctx.rank(), ctx.size());
    let len = |from: usize, to: usize| (from + 2 * to) % 4;
    let mut send = Lists::with_capacity(size, 0);
    for to in 0..size {
        send.extend((0..len(rank, to)).map(|i| word(rank, to, i)));
        send.end_list();
    }
    let got = ctx.all_to_all_v(&send).map_err(|e| e.to_string())?;
    ensure!(
        got.len() == size,
        "all_to_all_v: {} lists for {size} ranks",
        got.len()
    );
    for from in 0..size {
        let want: Vec<u64> = (0..len(from, rank)).map(|i| word(from, rank, i)).collect();
        ensure!(
            got.list(from) == want,
            "all_to_all_v: from rank {from} got {:?}, sent {want:?}",
            got.list(from)
        );
    }
    for root in [0, size - 1] {
        let mine: Vec<u64> = (0..rank % 3).map(|i| word(rank, root, i)).collect();
        let got = ctx.gather_v(&mine, root).map_err(|e| e.to_string())?;
        match got {
            None => {
                ensure!(rank != root, "gather_v: the root {root} got nothing");
            }
            Some(lists) => {
                ensure!(
                    rank == root,
                    "gather_v: rank {rank} is not the root {root} but got lists"
                );
                ensure!(lists.len() == size, "gather_v: {} lists", lists.len());
                for from in 0..size {
                    let want: Vec<u64> = (0..from % 3).map(|i| word(from, root, i)).collect();
                    ensure!(
                        lists.list(from) == want,
                        "gather_v: rank {from}'s list differs"
                    );
                }
            }
        }
    }
    let bytes = |r: usize| -> Vec<u8> { (0..(r * 13) % 29).map(|i| (r * 31 + i) as u8).collect() };
    let got = ctx.gather_bytes(&bytes(rank)).map_err(|e| e.to_string())?;
    match got {
        None => {
            ensure!(rank != 0, "gather_bytes: rank 0 got nothing");
        }
        Some(all) => {
            ensure!(rank == 0, "gather_bytes: rank {rank} got the root's result");
            ensure!(all.len() == size, "gather_bytes: {} entries", all.len());
            for (r, b) in all.iter().enumerate() {
                ensure!(
                    *b == bytes(r),
                    "gather_bytes: rank {r}'s bytes differ: {b:?}"
                );
            }
        }
    }
    Ok(())
}
