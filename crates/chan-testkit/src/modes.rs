//! The semantics of each mode over a ring of channels: Async, Sync and Racy, and the cases
//! every launched backend runs.

use crate::staged::staged_sends;
use crate::{check_whole, close_ring, decode, fill, offer_next, ring, sum_over_ranks, Check};
use chan_core::traits::*;
use chan_core::{Async, Channel, ChannelConfig, Racy, ReduceOp, Sync, TrySendError};

/// Async over a ring: messages are never torn, sequence numbers and stamps never go back,
/// a receive never finds more than R + 1 new messages (R in flight, one in the spare slot), a
/// sender never has more than R in flight, and after the last send the receiver gets exactly
/// the last message. Every rank sends `rounds` times (skipping when full) with a random
/// amount of work between operations.
pub fn async_semantics<C: Context>(ctx: &mut C, rounds: u64, len: usize, r: usize) -> Check {
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Async>(ctx, cfg)? else {
        return Ok(());
    };
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (ctx.rank() as u64);
    let mut last = [(0u64, 0u64); 2];
    for round in 0..rounds {
        for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
            ch.set_iteration(round);
            offer_next(ch, r)?;
            let batch_before = ch.stats().received;
            if let Some(m) = ch.recv().map_err(|e| e.to_string())? {
                check_whole(m.data(), m.seq(), "async recv")?;
                let (ls, lt) = last[k];
                ensure!(
                    m.seq() > ls,
                    "seq went back or repeated: {} after {ls}",
                    m.seq()
                );
                ensure!(m.stamp() >= lt, "stamp went back: {} after {lt}", m.stamp());
                last[k] = (m.seq(), m.stamp());
            }
            // At most R in flight, plus at most one that arrived into the receiver's spare slot
            // (a transport may acknowledge on arrival, before the channel polls).
            let batch = ch.stats().received - batch_before;
            ensure!(
                batch as usize <= r + 1,
                "one receive found {batch} new messages, R = {r}"
            );
            // The lent message stays whole and unchanged while the channel keeps polling and
            // the peer keeps sending: a transport must not refill a held slot.
            if last[k].0 > 0 {
                for _ in 0..3 {
                    ch.can_recv().map_err(|e| e.to_string())?;
                }
                let held = ch.latest().ok_or("latest() lost the lent message")?;
                ensure!(
                    held.seq() == last[k].0,
                    "the lent message changed to {}",
                    held.seq()
                );
                check_whole(held.data(), held.seq(), "lent message after more polls")?;
            }
            // Random work so the interleavings vary.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            for _ in 0..(rng % 64) {
                std::hint::black_box(rng);
            }
        }
    }
    // A final message each way, stamped `rounds`; the receiver must end on exactly it. A slot
    // frees only when the peer receives, so every rank keeps receiving until its own final
    // message is under way and the peer's has arrived; no blocking call until then.
    let mut to_send = [true, true];
    // A fast peer's final message may already have been received in the main loop.
    let mut got_final = last.map(|(_, stamp)| stamp == rounds);
    let mut spins = 0u64;
    while to_send != [false, false] || got_final != [true, true] {
        for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
            ch.set_iteration(rounds);
            if to_send[k] {
                let seq = ch.stats().sent + 1;
                match ch.try_send_with(|b| fill(b, seq)) {
                    Ok(()) => to_send[k] = false,
                    Err(TrySendError::Full(_)) => {}
                    Err(e) => return Err(format!("final try_send: {e}")),
                }
            }
            if let Some(m) = ch.recv().map_err(|e| e.to_string())? {
                check_whole(m.data(), m.seq(), "async final recv")?;
                ensure!(m.seq() > last[k].0, "seq went back at the end");
                last[k] = (m.seq(), m.stamp());
                got_final[k] |= m.stamp() == rounds;
            }
        }
        spins += 1;
        ensure!(spins < 2_000_000_000, "final messages never went through");
        if spins > 64 {
            std::thread::yield_now();
        }
    }
    // Now a blocking exchange is safe: each rank learns how many messages its peers sent.
    let totals = [next.stats().sent, prev.stats().sent];
    let peer_totals = exchange_counts::<C>(ctx, totals)?;
    for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
        let want = peer_totals[k];
        ensure!(
            last[k].0 == want,
            "newest message {} is not the last sent {want}",
            last[k].0
        );
        let latest = ch.latest().map(|m| m.seq());
        ensure!(latest == Some(want), "latest() is {latest:?}, want {want}");
    }
    for s in close_ring(next, prev)? {
        ensure!(
            s.received == s.superseded + s.batches.count() + s.unread_at_close,
            "stats do not add up: {s:?}"
        );
    }
    Ok(())
}

/// Tell ring neighbours how many messages were sent on (to next, to prev): returns what the
/// neighbours sent to this rank on (channel to next, channel to prev).
pub(crate) fn exchange_counts<C: Context>(ctx: &mut C, mine: [u64; 2]) -> Result<[u64; 2], String> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut all = vec![0.0; 2 * size];
    all[2 * rank] = mine[0] as f64;
    all[2 * rank + 1] = mine[1] as f64;
    ctx.all_reduce(&mut all, ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    // What next sent to me went on next's "to prev" channel; what prev sent, on its "to next".
    Ok([all[2 * next + 1] as u64, all[2 * prev] as u64])
}

/// The next Sync message, which must carry sequence number `*expected`; advances it.
pub(crate) fn recv_next<'a, B: chan_core::Backend>(
    ch: &'a mut Channel<B, Sync>,
    expected: &mut u64,
) -> Result<chan_core::Message<'a>, String> {
    let m = ch.recv().map_err(|e| format!("sync recv: {e}"))?;
    ensure!(
        m.seq() == *expected,
        "out of order: got seq {}, want {expected}",
        m.seq()
    );
    *expected += 1;
    Ok(m)
}

/// Sync over a ring: every message delivered once, in order, unchanged, with its stamp; bursts
/// of R sends before any receive; both ends' counts agree at close.
pub fn sync_semantics<C: Context>(ctx: &mut C, rounds: u64, len: usize, r: usize) -> Check {
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Sync>(ctx, cfg)? else {
        return Ok(());
    };
    let mut expected = [1u64; 2];
    for round in 0..rounds {
        // A burst of up to R messages each way, then receive them all.
        let burst = 1 + (round as usize % r);
        for ch in [&mut next, &mut prev] {
            ch.set_iteration(round);
            for _ in 0..burst {
                let seq = ch.stats().sent + 1;
                ch.send_with(|b| fill(b, seq)).map_err(|e| e.to_string())?;
            }
        }
        for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
            for _ in 0..burst {
                let m = recv_next(ch, &mut expected[k])?;
                ensure!(m.stamp() == round, "stamp {} in round {round}", m.stamp());
                check_whole(m.data(), m.seq(), "sync recv")?;
            }
        }
    }
    let sent_here = next.stats().sent + prev.stats().sent;
    let [s1, s2]: [chan_core::ChannelStats; 2] = close_ring(next, prev)?
        .try_into()
        .map_err(|_| "two channels closed".to_string())?;
    ensure!(
        s1.unread_at_close == 0 && s2.unread_at_close == 0 && s1.superseded == 0,
        "sync left messages unread: {s1:?} {s2:?}"
    );
    let received_here = s1.received + s2.received;
    let sent = sum_over_ranks(ctx, sent_here as f64)?;
    let received = sum_over_ranks(ctx, received_here as f64)?;
    ensure!(
        sent == received,
        "sent {sent} messages, received {received}"
    );
    Ok(())
}

/// Racy over a ring, both directions busy at once: every element read from the view is a
/// value some send wrote to that element (or the initial 0), never a torn or foreign value, and
/// never from a send that has not started.
pub fn racy_semantics<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    let cfg = ChannelConfig::new(len, 2).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Racy>(ctx, cfg)? else {
        return Ok(());
    };
    // Every element read is a value some send wrote to it (or 0); the count of nonzero ones.
    let read = |view: &chan_core::AtomicF64Slice| -> Result<u64, String> {
        let mut n = 0;
        for j in 0..view.len() {
            let v = view.load(j);
            if v == 0.0 {
                continue;
            }
            let seq = decode(v, j);
            ensure!(
                seq.is_some_and(|s| s >= 1 && s <= rounds + 1),
                "racy element {j} holds {v}: no send wrote that"
            );
            n += 1;
        }
        Ok(n)
    };
    let mut reads = 0u64;
    for round in 0..rounds {
        for ch in [&mut next, &mut prev] {
            ch.set_iteration(round);
            let seq = ch.stats().sent + 1;
            match ch.try_send_with(|b| fill(b, seq)) {
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(e) => return Err(format!("racy send: {e}")),
            }
            reads += read(ch.recv().map_err(|e| e.to_string())?)?;
        }
    }
    // A slow transport may not have delivered anything yet: MPICH 4.0 over UCX completes
    // receives posted into one buffer (the racy protocol) only after milliseconds each. The
    // sends in flight land in the end; give them 10 s before judging that none ever will.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut spins = 0u32;
    while reads == 0 && std::time::Instant::now() < deadline {
        for ch in [&mut next, &mut prev] {
            reads += read(ch.recv().map_err(|e| e.to_string())?)?;
            ch.relax(spins);
        }
        spins = spins.saturating_add(1);
    }
    let (s1, s2) = (next.stats().clone(), prev.stats().clone());
    close_ring(next, prev)?;
    ensure!(
        s1.sent > 0 && s2.sent > 0,
        "racy: nothing was sent ({s1:?}, {s2:?})"
    );
    let total_reads = sum_over_ranks(ctx, reads as f64)?;
    ensure!(total_reads > 0.0, "racy: no rank ever saw data");
    Ok(())
}

/// The semantic case named `case` ("async_semantics", "sync_semantics", "racy_semantics",
/// "staged_sends") over the message lengths and R every launched backend checks: Async and
/// Racy over `rounds` messages, Sync and two-step sends over `sync_rounds` (each waits for its
/// match, so fewer make as strong a test). None when `case` is not one of these.
pub fn mode_case<C: Context>(
    ctx: &mut C,
    case: &str,
    rounds: u64,
    sync_rounds: u64,
) -> Option<Check> {
    let check = match case {
        "async_semantics" => (|| -> Check {
            for (len, r) in [(1, 1), (7, 2), (2500, 3), (64, 8)] {
                async_semantics(ctx, rounds, len, r)?;
            }
            Ok(())
        })(),
        "sync_semantics" => (|| -> Check {
            for (len, r) in [(1, 1), (13, 3), (2500, 2)] {
                sync_semantics(ctx, sync_rounds, len, r)?;
            }
            Ok(())
        })(),
        "racy_semantics" => (|| -> Check {
            for len in [1, 33, 2500] {
                racy_semantics(ctx, rounds, len)?;
            }
            Ok(())
        })(),
        "staged_sends" => (|| -> Check {
            for len in [1, 2500] {
                staged_sends(ctx, sync_rounds, len)?;
            }
            Ok(())
        })(),
        _ => return None,
    };
    Some(check)
}

/// After `case` ran with `size` ranks: if it is a case whose ranks all opened channels (the
/// mode cases: mailbox ends for async, sync and staged, racy ends for racy), check which path
/// their ends took. Of the `opened` ends, the `to_node` whose peer shares this node write its
/// peer's memory in place (`in_place` of them did); when the backend was asked for the
/// between-nodes path (`remote_asked`), none does.
pub fn path_as_asked(
    case: &str,
    size: usize,
    (opened, to_node): (u64, u64),
    in_place: u64,
    remote_asked: bool,
) -> Check {
    let opens_ends = case.ends_with("_semantics") || case == "staged_sends";
    if !opens_ends || size < 2 {
        return Ok(());
    }
    let expected = if remote_asked { 0 } else { to_node };
    ensure!(
        opened > 0 && in_place == expected,
        "{in_place} of {opened} ends write their peer's memory in place ({to_node} to this \
         node; between-nodes path asked: {remote_asked}), expected {expected}"
    );
    Ok(())
}
