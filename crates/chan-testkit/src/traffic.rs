//! Traffic that stresses a transport: sends before receives past the eager limit, racy
//! views under a flood of sends, and a fast sender beside a slow receiver.

use crate::{
    check_whole, close_ring, decode, fill, offer_next, pair_specs, racy_semantics, ring, Check,
};
use chan_core::traits::*;
use chan_core::{Async, Channel, ChannelConfig, Racy, Sync};

/// Both ends send a message before either receives, for each length in `lens`: no deadlock
/// (sends past a transport's eager limit must not wait for a receive that comes after them).
pub fn send_before_recv<C: Context>(ctx: &mut C, lens: &[usize]) -> Check {
    for &len in lens {
        let cfg = ChannelConfig::new(len, 1).map_err(|e| e.to_string())?;
        let Some((mut next, mut prev)) = ring::<C, Sync>(ctx, cfg)? else {
            return Ok(());
        };
        for ch in [&mut next, &mut prev] {
            ch.send_with(|b| fill(b, 1)).map_err(|e| e.to_string())?;
        }
        for ch in [&mut next, &mut prev] {
            let m = ch.recv().map_err(|e| e.to_string())?;
            check_whole(m.data(), 1, "send_before_recv")?;
        }
        close_ring(next, prev)?;
    }
    Ok(())
}

/// The racy ring of [`racy_semantics`] `repeats` times over, with messages of `len` (past the
/// eager limit, so the library's single-copy path writes the view): no element ever read is
/// torn (a mix of two sends' bytes decodes to no value any send wrote).
pub fn racy_whole_words<C: Context>(ctx: &mut C, repeats: usize, rounds: u64, len: usize) -> Check {
    for k in 0..repeats {
        racy_semantics(ctx, rounds, len).map_err(|e| format!("repeat {k}: {e}"))?;
    }
    Ok(())
}

/// One mode's run of [`fast_sender_slow_receiver`]: the channel's two ends, as sender (even
/// rank) or receiver (odd rank).
fn flood<B: chan_core::Backend, M: Mode>(
    mut ch: Channel<B, M>,
    sender: bool,
    n: u64,
    bound: Option<u64>,
    barrier: impl FnOnce() -> Check,
    mut receive: impl FnMut(&mut Channel<B, M>) -> Result<Option<u64>, String>,
) -> Check {
    use std::time::{Duration, Instant};
    let r = ch.max_in_flight();
    // Phase 1: the receiver sleeps SLEEP; the sender offers messages for a shorter GREEDY,
    // well inside the sleep even if the two leave the barrier apart, and may place no more
    // than the receiver has slots for.
    const SLEEP: Duration = Duration::from_millis(400);
    const GREEDY: Duration = Duration::from_millis(150);
    barrier()?;
    if sender {
        let t = Instant::now();
        while t.elapsed() < GREEDY && ch.stats().sent < n {
            offer_next(&mut ch, r)?;
        }
        let ahead = ch.stats().sent;
        ensure!(
            ahead >= 1,
            "no message accepted in {GREEDY:?} to an empty channel"
        );
        if let Some(b) = bound {
            ensure!(
                ahead <= b,
                "{ahead} messages accepted for a receiver asleep, more than its {b} slots (R = {r})"
            );
        }
        // Phase 2: all of the n, blocking, R in flight at most after each.
        while ch.stats().sent < n {
            let seq = ch.stats().sent + 1;
            ch.send_with(|b| fill(b, seq)).map_err(|e| e.to_string())?;
            let inf = ch.in_flight().map_err(|e| e.to_string())?;
            ensure!(inf <= r, "in flight {inf} exceeds R = {r}");
        }
    } else {
        std::thread::sleep(SLEEP);
        // Receive until the last message, napping 1 ms every n/20 so the sender keeps
        // catching up with a stopped receiver.
        let nap_every = (n / 20).max(1);
        let mut next_nap = nap_every;
        loop {
            let last = receive(&mut ch)?;
            if ch.stats().received >= next_nap {
                std::thread::sleep(Duration::from_millis(1));
                next_nap += nap_every;
            }
            if last == Some(n) {
                break;
            }
        }
    }
    let s = ch.close().map_err(|e| format!("close: {e}"))?;
    if sender {
        ensure!(s.sent == n, "sent {} of {n}", s.sent);
    } else {
        ensure!(
            s.peer_sent == n && s.received == n,
            "the sender sent {} of {n}, {} arrived: messages lost",
            s.peer_sent,
            s.received
        );
    }
    Ok(())
}

/// A sender far faster than its receiver, pairs (0, 1), (2, 3), … (even ranks send `n`
/// one-element messages, odd ranks receive and sleep), in every mode with R = `r`: while the
/// receiver sleeps the sender gets no more than R + 1 messages placed (the receiver's slots:
/// no queue grows without bound; `racy_bound` for Racy where a racy send is in flight after it
/// returns, None where it writes the peer's buffer and nothing queues), never more than R in
/// flight; and nothing is lost (Sync: every message in order; Async: every message received,
/// superseded or unread, the last one received; Racy: every send landed).
pub fn fast_sender_slow_receiver<C: Context>(
    ctx: &mut C,
    n: u64,
    r: usize,
    racy_bound: Option<u64>,
) -> Check {
    let sender = ctx.rank().is_multiple_of(2);
    let bound = Some(r as u64 + 1);
    let specs = pair_specs(ctx, 1, r, 900)?;
    let mut s = ctx.open::<Sync>(&specs).map_err(|e| e.to_string())?;
    let mut a = ctx.open::<Async>(&specs).map_err(|e| e.to_string())?;
    let mut y = ctx.open::<Racy>(&specs).map_err(|e| e.to_string())?;
    let (Some(s), Some(a), Some(y)) = (s.pop(), a.pop(), y.pop()) else {
        // The last rank of an odd world: no partner, but the barriers are collective (one per
        // mode).
        for _ in 0..3 {
            ctx.barrier().map_err(|e| e.to_string())?;
        }
        return Ok(());
    };
    let mut expected = 1u64;
    flood(
        s,
        sender,
        n,
        bound,
        || ctx.barrier().map_err(|e| e.to_string()),
        |ch| {
            let m = ch.recv().map_err(|e| e.to_string())?;
            ensure!(
                m.seq() == expected,
                "sync: got {}, want {expected}",
                m.seq()
            );
            check_whole(m.data(), m.seq(), "sync flood")?;
            expected += 1;
            Ok(Some(m.seq()))
        },
    )?;
    let mut newest = 0u64;
    flood(
        a,
        sender,
        n,
        bound,
        || ctx.barrier().map_err(|e| e.to_string()),
        |ch| match ch.recv().map_err(|e| e.to_string())? {
            Some(m) => {
                ensure!(m.seq() > newest, "async: {} after {newest}", m.seq());
                check_whole(m.data(), m.seq(), "async flood")?;
                newest = m.seq();
                Ok(Some(newest))
            }
            None => Ok(None),
        },
    )?;
    flood(
        y,
        sender,
        n,
        racy_bound,
        || ctx.barrier().map_err(|e| e.to_string()),
        |ch| {
            let v = ch.recv().map_err(|e| e.to_string())?.load(0);
            ensure!(
                v == 0.0 || decode(v, 0).is_some_and(|seq| (1..=n).contains(&seq)),
                "racy: {v} is no message's value"
            );
            Ok((ch.stats().received == n).then_some(n))
        },
    )?;
    Ok(())
}
