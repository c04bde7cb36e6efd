//! Pairwise creation ([`Context::open_pair`]): only the two ends of a channel take part.
//! Every function here is still called by every rank (so that the checks can end with a
//! collective), but the ranks that are not an end do something else meanwhile.

use crate::{check_whole, fill, Check};
use chan_core::traits::*;
use chan_core::{Async, Channel, ChannelConfig, ChannelSpec, CreateError, Racy, SpecField, Sync};
use std::time::{Duration, Instant};

/// The timeout of the pairwise opens that are meant to meet (generous: ranks may share cores).
const MEET: Duration = Duration::from_secs(30);

fn spec(peer: usize, tag: u32, len: usize, r: usize) -> Result<ChannelSpec, String> {
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    ChannelSpec::new(peer, tag, cfg).map_err(|e| e.to_string())
}

/// `rounds` rounds of a ping-pong over a pairwise channel: in round k the lower rank sends
/// message k, then each side takes the peer's (`take(ch, k)`, which checks it), and the
/// higher rank sends its own.
fn ping_pong<B: Backend, M: Mode>(
    ch: &mut Channel<B, M>,
    low: bool,
    rounds: u64,
    mut take: impl FnMut(&mut Channel<B, M>, u64) -> Check,
) -> Check {
    let mut out = vec![0.0; ch.len()];
    for k in 1..=rounds {
        if low {
            fill(&mut out, k);
            ch.send(&out).map_err(|e| e.to_string())?;
        }
        take(ch, k)?;
        if !low {
            fill(&mut out, k);
            ch.send(&out).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// `rounds` messages each way over a Sync pairwise channel, every one checked whole and in
/// order. The lower rank sends first in each round.
fn sync_exchange<B: Backend>(ch: &mut Channel<B, Sync>, low: bool, rounds: u64) -> Check {
    ping_pong(ch, low, rounds, |ch, k| {
        let m = ch.recv().map_err(|e| e.to_string())?;
        if m.seq() != k {
            return Err(format!(
                "sync pairwise: message {} where {k} was due",
                m.seq()
            ));
        }
        check_whole(m.data(), k, "sync pairwise")
    })
}

/// A ping-pong of `rounds` over an Async pairwise channel: one message in flight at a time,
/// so each receive must give exactly the message just sent, whole.
fn async_exchange<B: Backend>(ch: &mut Channel<B, Async>, low: bool, rounds: u64) -> Check {
    ping_pong(ch, low, rounds, |ch, k| {
        let mut spins = 0;
        let got = loop {
            if let Some(m) = ch.recv().map_err(|e| e.to_string())? {
                check_whole(m.data(), k, "async pairwise")?;
                break m.seq();
            }
            ch.check_world().map_err(|e| e.to_string())?;
            ch.relax(spins);
            spins += 1;
        };
        if got != k {
            return Err(format!("async pairwise: message {got} where {k} was due"));
        }
        Ok(())
    })
}

/// A ping-pong of `rounds` over a Racy pairwise channel: each side waits until a send landed,
/// and its view must then hold the peer's message k whole (one send in flight at a time, so
/// nothing mixes).
fn racy_exchange<B: Backend>(ch: &mut Channel<B, Racy>, low: bool, rounds: u64) -> Check {
    let mut seen = vec![0.0; ch.len()];
    ping_pong(ch, low, rounds, |ch, k| {
        let mut spins = 0;
        loop {
            let landed = ch.can_recv().map_err(|e| e.to_string())?;
            if landed {
                let view = ch.recv().map_err(|e| e.to_string())?;
                view.load_into(&mut seen);
                break;
            }
            ch.check_world().map_err(|e| e.to_string())?;
            ch.relax(spins);
            spins += 1;
        }
        check_whole(&seen, k, "racy pairwise")
    })
}

/// One pairwise channel of each mode between this rank and `peer` (tags `base`, `base + 1`,
/// `base + 2`), each carrying `rounds` messages each way with exact content checks, then
/// closed.
fn pair_every_mode<C: Context>(ctx: &mut C, peer: usize, base: u32, rounds: u64) -> Check {
    let (rank, low) = (ctx.rank(), ctx.rank() < peer);
    let what = |m: &str, e: CreateError| format!("rank {rank}: {m} open_pair: {e}");
    let mut s = ctx
        .open_pair::<Sync>(spec(peer, base, 37, 2)?, MEET)
        .map_err(|e| what("sync", e))?;
    sync_exchange(&mut s, low, rounds)?;
    s.close().map_err(|e| e.to_string())?;
    let mut a = ctx
        .open_pair::<Async>(spec(peer, base + 1, 2500, 3)?, MEET)
        .map_err(|e| what("async", e))?;
    async_exchange(&mut a, low, rounds)?;
    a.close().map_err(|e| e.to_string())?;
    let mut r = ctx
        .open_pair::<Racy>(spec(peer, base + 2, 64, 1)?, MEET)
        .map_err(|e| what("racy", e))?;
    racy_exchange(&mut r, low, rounds)?;
    r.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// Needs 4 ranks (more stay out): ranks 0 and 2 open a pairwise channel of every mode and
/// exchange messages while rank 1 computes for a while and then opens its own pairwise
/// channels with rank 3, with the same tags (tags are the pair's own). Then a collective open
/// and a barrier: the world is as usable as before.
pub fn pairwise_two_pairs<C: Context>(ctx: &mut C, rounds: u64) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    if size < 4 {
        return Err(format!("pairwise_two_pairs needs 4 ranks, got {size}"));
    }
    match rank {
        0 => pair_every_mode(ctx, 2, 5, rounds)?,
        2 => pair_every_mode(ctx, 0, 5, rounds)?,
        1 | 3 => {
            if rank == 1 {
                // Busy elsewhere: a computation the other pair does not wait for.
                let mut x = 0.0f64;
                for i in 0..2_000_000u64 {
                    x += (i as f64).sqrt();
                }
                std::hint::black_box(x);
            }
            pair_every_mode(ctx, 4 - rank, 5, rounds)?;
        }
        _ => {}
    }
    collective_still_works(ctx)
}

/// A collective open of a ring and a barrier, as the last step of a check.
fn collective_still_works<C: Context>(ctx: &mut C) -> Check {
    let specs = crate::ring_specs(ctx, 3, 1)?;
    let mut chans = ctx
        .open::<Sync>(&specs)
        .map_err(|e| format!("collective open after pairwise opens: {e}"))?;
    let rank = ctx.rank() as f64;
    for ch in &mut chans {
        ch.send(&[rank, rank, rank]).map_err(|e| e.to_string())?;
    }
    for ch in &mut chans {
        let peer = ch.peer() as f64;
        let m = ch.recv().map_err(|e| e.to_string())?;
        if m.data() != [peer, peer, peer] {
            return Err(format!("ring after pairwise opens: got {:?}", m.data()));
        }
    }
    chan_core::close_all(chans).map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())
}

/// Each Sync channel of `chans` carries its tag both ways (every send before any receive),
/// then they close together.
fn tags_round_trip<B: Backend>(mut chans: Vec<Channel<B, Sync>>) -> Check {
    for ch in &mut chans {
        ch.send(&[f64::from(ch.tag())]).map_err(|e| e.to_string())?;
    }
    for ch in &mut chans {
        let tag = ch.tag();
        let m = ch.recv().map_err(|e| e.to_string())?;
        if m.data() != [f64::from(tag)] {
            return Err(format!("tag {tag}: got {:?}", m.data()));
        }
    }
    chan_core::close_all(chans).map_err(|e| e.to_string())?;
    Ok(())
}

/// Needs 2 ranks (more stay out): two pairwise ends that disagree on length, R, then mode
/// both get [`CreateError::Mismatch`] naming the field and both values; then a matching
/// pairwise open carries a message and a collective open works.
pub fn pairwise_mismatch<C: Context>(ctx: &mut C) -> Check {
    let rank = ctx.rank();
    if rank < 2 {
        let peer = 1 - rank;
        let e = ctx
            .open_pair::<Async>(spec(peer, 9, if rank == 0 { 10 } else { 12 }, 2)?, MEET)
            .err();
        expect_mismatch(rank, e, SpecField::Length, ["10", "12"])?;
        let e = ctx
            .open_pair::<Sync>(spec(peer, 9, 10, 2 + rank)?, MEET)
            .err();
        expect_mismatch(rank, e, SpecField::MaxInFlight, ["2", "3"])?;
        let s = spec(peer, 9, 10, 2)?;
        let e = if rank == 0 {
            ctx.open_pair::<Async>(s, MEET).err()
        } else {
            ctx.open_pair::<Racy>(s, MEET).err()
        };
        expect_mismatch(rank, e, SpecField::Mode, ["async", "racy"])?;
        let mut ch = ctx
            .open_pair::<Sync>(spec(peer, 9, 3, 1)?, MEET)
            .map_err(|e| format!("matching pairwise open after mismatches: {e}"))?;
        ch.send(&[1.0, 2.0, rank as f64])
            .map_err(|e| e.to_string())?;
        let m = ch.recv().map_err(|e| e.to_string())?;
        if m.data() != [1.0, 2.0, peer as f64] {
            return Err(format!("after pairwise mismatches: got {:?}", m.data()));
        }
        ch.close().map_err(|e| e.to_string())?;
    }
    collective_still_works(ctx)
}

fn expect_mismatch(
    rank: usize,
    e: Option<CreateError>,
    field: SpecField,
    values: [&str; 2],
) -> Check {
    match e {
        Some(CreateError::Mismatch {
            field: f,
            here,
            there,
            ..
        }) => {
            let (h, t) = (values[rank], values[1 - rank]);
            if f == field && here == h && there == t {
                Ok(())
            } else {
                Err(format!(
                    "rank {rank}: pairwise mismatch reported as {f}: {here} vs {there}; want {field}: {h} vs {t}"
                ))
            }
        }
        other => Err(format!(
            "rank {rank}: want a pairwise {field} mismatch, got {other:?}"
        )),
    }
}

/// Needs 2 ranks (more stay out), `timeout` small (200 ms). For each of ranks 0 and 1 as the
/// one that waits: it opens a pairwise channel (tag 40) to the other, which does not come, and
/// gets [`CreateError::PairTimeout`] naming rank, peer, tag and timeout, after at least
/// `timeout` and well within `timeout` + 5 s. After a barrier the other one comes late, and
/// gets the timeout error too (it neither hangs nor meets the withdrawn end). Then both open
/// tag 40 for real and exchange a message, and a collective open works: nothing of the failed
/// opens is left to disturb them.
pub fn pairwise_timeout<C: Context>(ctx: &mut C, timeout: Duration) -> Check {
    let rank = ctx.rank();
    let bound = timeout + Duration::from_secs(5);
    for waiter in [0, 1] {
        if rank < 2 {
            let peer = 1 - rank;
            if rank == waiter {
                expect_timeout(ctx, peer, timeout, bound, "the peer never came")?;
            }
            ctx.barrier().map_err(|e| e.to_string())?;
            if rank != waiter {
                expect_timeout(ctx, peer, timeout, bound, "the peer had given up")?;
            }
            ctx.barrier().map_err(|e| e.to_string())?;
            let mut ch = ctx
                .open_pair::<Sync>(spec(peer, 40, 2, 1)?, MEET)
                .map_err(|e| format!("rank {rank}: pairwise open after timeouts: {e}"))?;
            ch.send(&[waiter as f64, rank as f64])
                .map_err(|e| e.to_string())?;
            let m = ch.recv().map_err(|e| e.to_string())?;
            if m.data() != [waiter as f64, peer as f64] {
                return Err(format!("after pairwise timeouts: got {:?}", m.data()));
            }
            ch.close().map_err(|e| e.to_string())?;
        } else {
            ctx.barrier().map_err(|e| e.to_string())?;
            ctx.barrier().map_err(|e| e.to_string())?;
        }
    }
    collective_still_works(ctx)
}

fn expect_timeout<C: Context>(
    ctx: &mut C,
    peer: usize,
    timeout: Duration,
    bound: Duration,
    why: &str,
) -> Check {
    let rank = ctx.rank();
    let t0 = Instant::now();
    let e = ctx.open_pair::<Async>(spec(peer, 40, 4, 2)?, timeout).err();
    let took = t0.elapsed();
    let want = CreateError::PairTimeout {
        rank,
        peer,
        tag: 40,
        timeout,
    };
    if e.as_ref() != Some(&want) {
        return Err(format!("rank {rank} ({why}): want {want:?}, got {e:?}"));
    }
    if took < timeout || took > bound {
        return Err(format!(
            "rank {rank} ({why}): the timeout of {timeout:?} came after {took:?}"
        ));
    }
    Ok(())
}

/// Needs 2 ranks (more stay out), `timeout` small (200 ms): ranks 0 and 1 open two pairwise
/// channels to each other in opposite orders (rank 0 tag 50 then 51, rank 1 tag 51 then 50).
/// Neither hangs: each open returns within `timeout` + 5 s, either a channel or
/// [`CreateError::PairTimeout`]; which ones meet depends on timing, but at least one open times
/// out and a tag met at one end met at the other (the documented rule: open them in the same
/// order at both ends). Then, in the same order, both open and the world is usable.
pub fn pairwise_opposite_orders<C: Context>(ctx: &mut C, timeout: Duration) -> Check {
    let rank = ctx.rank();
    let mut met = [0.0f64; 2];
    if rank < 2 {
        let peer = 1 - rank;
        let order: [u32; 2] = if rank == 0 { [50, 51] } else { [51, 50] };
        let mut chans = Vec::new();
        for tag in order {
            let t0 = Instant::now();
            let outcome = ctx.open_pair::<Sync>(spec(peer, tag, 1, 1)?, timeout);
            let took = t0.elapsed();
            if took > timeout + Duration::from_secs(5) {
                return Err(format!(
                    "rank {rank}: opposite orders, tag {tag}: took {took:?}"
                ));
            }
            let want = CreateError::PairTimeout {
                rank,
                peer,
                tag,
                timeout,
            };
            match outcome {
                Ok(ch) => {
                    met[(tag - 50) as usize] = 1.0;
                    chans.push(ch);
                }
                Err(e) if e == want => {}
                Err(e) => {
                    return Err(format!(
                        "rank {rank}: opposite orders, tag {tag}: want a channel or {want:?}, got {e:?}"
                    ))
                }
            }
        }
        tags_round_trip(chans)?;
    }
    // Per tag, how many of the two ends met: 0 or 2; not both tags.
    ctx.all_reduce(&mut met, chan_core::ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    if met.contains(&1.0) || met == [2.0, 2.0] {
        return Err(format!("opposite orders: ends that met per tag {met:?}"));
    }
    if rank < 2 {
        let peer = 1 - rank;
        let mut chans = Vec::new();
        for tag in [50, 51] {
            chans.push(
                ctx.open_pair::<Sync>(spec(peer, tag, 1, 1)?, MEET)
                    .map_err(|e| format!("rank {rank}: same order, tag {tag}: {e}"))?,
            );
        }
        tags_round_trip(chans)?;
    }
    collective_still_works(ctx)
}
