//! Backend-generic semantic checks, written once and run by the tests of every backend
//! (threads in chan-threads, MPI under `mpirun`, SHMEM under `oshrun`). Each function is
//! collective: every rank of the context calls it with the same arguments. A failed property
//! is an `Err` naming it; the caller turns it into a test failure (a panic, or an abort of the
//! MPI job).

#![warn(missing_docs)]

pub mod jobs;

use chan_core::traits::*;
use chan_core::{
    close_all, Async, Channel, ChannelConfig, ChannelSpec, CommError, CreateError, Racy, ReduceOp,
    SendError, SpecField, Sync, TrySendError,
};

/// A failed property.
pub type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)*));
        }
    };
}

pub mod elements;
pub mod pairwise;
pub mod window;

/// The value element `j` of message `seq` carries: exact in f64 for seq, j < 10⁶.
pub fn encode(seq: u64, j: usize) -> f64 {
    (seq * 1_000_003 + j as u64) as f64
}

/// The sequence number element `j` of a message encodes, if it is a well-formed value.
pub fn decode(v: f64, j: usize) -> Option<u64> {
    if v < 0.0 || v.fract() != 0.0 || v >= 9.0e15 {
        return None;
    }
    let x = v as u64;
    (x % 1_000_003 == j as u64).then_some(x / 1_000_003)
}

/// Fill a message with `encode(seq, j)` at each element `j`.
pub fn fill(buf: &mut [f64], seq: u64) {
    for (j, v) in buf.iter_mut().enumerate() {
        *v = encode(seq, j);
    }
}

/// Every element of a whole message must encode that message's sequence number.
pub fn check_whole(data: &[f64], seq: u64, what: &str) -> Check {
    for (j, &v) in data.iter().enumerate() {
        ensure!(
            decode(v, j) == Some(seq),
            "{what}: torn message: element {j} is {v}, message seq is {seq}"
        );
    }
    Ok(())
}

/// The ring's channels: rank r opens edge r (to r+1, tag r) and edge r−1 (to r−1, tag r−1),
/// so with 2 ranks the pair has two channels. Returns (to next, to previous); none with 1 rank.
type Ring<B, M> = (Channel<B, M>, Channel<B, M>);

/// The two ring channels of this rank, in that order: edge r (to r + 1, tag r) and edge r − 1
/// (to r − 1, tag r − 1), for messages of `len` and `r` in flight. Needs at least 2 ranks.
pub fn ring_specs<C: Context>(ctx: &C, len: usize, r: usize) -> Result<Vec<ChannelSpec>, String> {
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    let (rank, size) = (ctx.rank(), ctx.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    Ok(vec![
        ChannelSpec::new(next, rank as u32, cfg).map_err(|e| e.to_string())?,
        ChannelSpec::new(prev, prev as u32, cfg).map_err(|e| e.to_string())?,
    ])
}

/// The channel of this rank to its partner in pairs (0, 1), (2, 3), …: one spec, or none for
/// the last rank of an odd world (creation is collective, so it opens an empty set).
pub fn pair_specs<C: Context>(
    ctx: &C,
    len: usize,
    r: usize,
    tag: u32,
) -> Result<Vec<ChannelSpec>, String> {
    let peer = ctx.rank() ^ 1;
    if peer >= ctx.size() {
        return Ok(Vec::new());
    }
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    Ok(vec![
        ChannelSpec::new(peer, tag, cfg).map_err(|e| e.to_string())?
    ])
}

fn ring<C: Context, M: Mode>(
    ctx: &mut C,
    cfg: ChannelConfig,
) -> Result<Option<Ring<C::Backend, M>>, String> {
    if ctx.size() < 2 {
        return Ok(None);
    }
    let specs = ring_specs(ctx, cfg.len(), cfg.max_in_flight())?;
    let mut chans = ctx.open::<M>(&specs).map_err(|e| format!("open: {e}"))?;
    let to_prev = chans.pop().expect("two channels");
    let to_next = chans.pop().expect("two channels");
    Ok(Some((to_next, to_prev)))
}

/// Close both ring channels together (any order at any rank); check that every message the
/// peer sent was received or drained.
fn close_ring<B: chan_core::Backend, M: Mode>(
    next: Channel<B, M>,
    prev: Channel<B, M>,
) -> Result<Vec<chan_core::ChannelStats>, String> {
    let stats = close_all([next, prev]).map_err(|e| format!("close: {e}"))?;
    for s in &stats {
        ensure!(
            s.received == s.peer_sent,
            "peer sent {} messages but {} were received or drained: {s:?}",
            s.peer_sent,
            s.received
        );
    }
    Ok(stats)
}

/// Offer the next message (sequence `sent + 1`) with `try_send`, which a full channel may
/// decline, and check that no more than `r` are in flight.
fn offer_next<B: chan_core::Backend, M: Mode>(ch: &mut Channel<B, M>, r: usize) -> Check {
    let seq = ch.stats().sent + 1;
    match ch.try_send_with(|b| fill(b, seq)) {
        Ok(()) | Err(TrySendError::Full(_)) => {}
        Err(e) => return Err(format!("try_send: {e}")),
    }
    let inf = ch.in_flight().map_err(|e| e.to_string())?;
    ensure!(inf <= r, "in flight {inf} exceeds R = {r}");
    Ok(())
}

fn sum_over_ranks<C: Context>(ctx: &mut C, v: f64) -> Result<f64, String> {
    let mut x = [v];
    ctx.all_reduce(&mut x, ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    Ok(x[0])
}

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
fn exchange_counts<C: Context>(ctx: &mut C, mine: [u64; 2]) -> Result<[u64; 2], String> {
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
fn recv_next<'a, B: chan_core::Backend>(
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

/// Two-step sends over a ring, in each mode: a staged message is sent whole, after the
/// messages sent beside it, with the sequence number and stamp of its start; restaging
/// replaces it; it is not in flight, but it holds one of the R slots, so the sends beside it
/// fit in the others and its start never overwrites an unread message (with R = 1 a blocking
/// send fails and `try_send` reports `Full`, with no hang); `send_staged` with nothing staged
/// fails; a close discards a message still staged. `rounds` is at most 100 000.
pub fn staged_sends<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    ensure!(rounds <= 100_000, "staged_sends: at most 100 000 rounds");
    for r in [1, 3] {
        staged_sync(ctx, rounds, len, r)?;
    }
    staged_async(ctx, rounds, len)?;
    staged_racy(ctx, rounds, len)
}

/// What the staged message of round `k` carries: `encode(STAGED_ID + k, j)`, apart from every
/// sequence number the checks reach and from the bogus message `stage_twice` replaces.
const STAGED_ID: u64 = 500_000;
/// The stamp of the staged message of round `k`: `STAGED_STAMP + k`. It is set after the
/// stage and before the start, so a stamp taken at the stage would show.
const STAGED_STAMP: u64 = 1 << 40;

/// Check `send_staged` with nothing staged, stage a bogus message, then restage it with what
/// round `round` stages.
fn stage_twice<B: chan_core::Backend, M: Mode>(ch: &mut Channel<B, M>, round: u64) -> Check {
    let e = ch.send_staged().err();
    ensure!(
        e == Some(SendError::NothingStaged),
        "send_staged with nothing staged gave {e:?}"
    );
    ch.set_iteration(u64::MAX);
    ch.stage_with(|b| fill(b, 777_777))
        .map_err(|e| format!("stage: {e}"))?;
    ch.stage_with(|b| fill(b, STAGED_ID + round))
        .map_err(|e| format!("restage: {e}"))?;
    ensure!(ch.is_staged(), "is_staged() false after a stage");
    Ok(())
}

/// Wait until `done`, relaxing between polls as the channel's transport does, failing when
/// the world fails.
fn spin_until<B: chan_core::Backend, M: Mode>(
    ch: &mut Channel<B, M>,
    mut done: impl FnMut(&mut Channel<B, M>) -> Result<bool, String>,
) -> Check {
    let mut spins = 0u32;
    while !done(ch)? {
        ch.check_world().map_err(|e| e.to_string())?;
        ch.relax(spins);
        spins = spins.saturating_add(1);
    }
    Ok(())
}

/// Close a ring with a message staged on both channels: the peers must be told of exactly the
/// messages started, and receive or drain them all.
fn close_staged<C: Context, M: Mode>(
    ctx: &mut C,
    mut next: Channel<C::Backend, M>,
    mut prev: Channel<C::Backend, M>,
) -> Check {
    let started = [next.stats().sent, prev.stats().sent];
    let peer_started = exchange_counts::<C>(ctx, started)?;
    for ch in [&mut next, &mut prev] {
        ch.stage_with(|b| fill(b, 777_777))
            .map_err(|e| format!("stage before close: {e}"))?;
    }
    for (k, s) in close_ring(next, prev)?.into_iter().enumerate() {
        ensure!(
            s.sent == started[k] && s.peer_sent == peer_started[k],
            "a staged message counted or announced at close: {:?} started here, {:?} by the \
             peers, {s:?}",
            started,
            peer_started
        );
    }
    Ok(())
}

fn staged_sync<C: Context>(ctx: &mut C, rounds: u64, len: usize, r: usize) -> Check {
    let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Sync>(ctx, cfg)? else {
        return Ok(());
    };
    let mut expected = [1u64; 2];
    for round in 0..rounds {
        // Odd rounds send beside the staged message: as many as fit (R > 1), or check that it
        // holds the only slot (R = 1).
        let beside = round % 2 == 1;
        for ch in [&mut next, &mut prev] {
            // The peer receives earlier rounds' messages without waiting for this rank.
            spin_until(ch, |c| Ok(c.in_flight().map_err(|e| e.to_string())? == 0))?;
            stage_twice(ch, round)?;
            let inf = ch.in_flight().map_err(|e| e.to_string())?;
            ensure!(inf == 0, "a staged message counts as in flight ({inf})");
            ch.set_iteration(round);
            if beside && r > 1 {
                // Until Full (the peer may be slow to receive) or 2R + 2 sends (it is not).
                for _ in 0..2 * r + 2 {
                    let seq = ch.stats().sent + 1;
                    match ch.try_send_with(|b| fill(b, seq)) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => break,
                        Err(e) => return Err(format!("try_send beside a staged message: {e}")),
                    }
                    let inf = ch.in_flight().map_err(|e| e.to_string())?;
                    ensure!(inf < r, "{inf} in flight beside a staged message, R = {r}");
                }
            } else if beside {
                let e = ch.send(&vec![0.0; len]).err();
                ensure!(
                    e == Some(SendError::SlotStaged),
                    "send with R = 1 and a message staged gave {e:?}"
                );
                let skipped = ch.stats().skipped;
                let e = ch.try_send(&vec![0.0; len]).err();
                ensure!(
                    matches!(e, Some(TrySendError::Full(1))) && ch.stats().skipped == skipped + 1,
                    "try_send with R = 1 and a message staged gave {e:?}"
                );
            }
            ch.set_iteration(STAGED_STAMP + round);
            ch.send_staged().map_err(|e| format!("send_staged: {e}"))?;
            ensure!(!ch.is_staged(), "still staged after send_staged");
        }
        // Every message in order, the staged one last.
        for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
            loop {
                let m = recv_next(ch, &mut expected[k])?;
                if m.stamp() == STAGED_STAMP + round {
                    check_whole(
                        m.data(),
                        STAGED_ID + round,
                        "staged sync: the staged message",
                    )?;
                    break;
                }
                ensure!(m.stamp() == round, "stamp {} in round {round}", m.stamp());
                check_whole(m.data(), m.seq(), "staged sync: a message sent beside")?;
            }
        }
    }
    close_staged(ctx, next, prev)
}

fn staged_async<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    let cfg = ChannelConfig::new(len, 2).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Async>(ctx, cfg)? else {
        return Ok(());
    };
    // Per direction: the last sequence number received, and the latest round whose staged
    // message is known to have been sent (it, or a later round's message, arrived).
    let mut last = [0u64; 2];
    let mut seen = [-1i64; 2];
    for round in 0..rounds {
        for ch in [&mut next, &mut prev] {
            stage_twice(ch, round)?;
            ch.set_iteration(round);
            if round % 2 == 1 {
                let seq = ch.stats().sent + 1;
                match ch.try_send_with(|b| fill(b, seq)) {
                    Ok(()) | Err(TrySendError::Full(_)) => {}
                    Err(e) => return Err(format!("try_send beside a staged message: {e}")),
                }
            }
            ch.set_iteration(STAGED_STAMP + round);
            ch.send_staged().map_err(|e| format!("send_staged: {e}"))?;
        }
        // Wait for this round's staged message (every rank sent before waiting). Newest wins,
        // and a peer one round ahead may have superseded it.
        for (k, ch) in [&mut next, &mut prev].into_iter().enumerate() {
            while seen[k] < round as i64 {
                spin_until(ch, |c| c.can_recv().map_err(|e| e.to_string()))?;
                let Some(m) = ch.recv().map_err(|e| e.to_string())? else {
                    return Err("staged async: can_recv, then nothing to receive".into());
                };
                ensure!(
                    m.seq() > last[k],
                    "staged async: seq {} after {}",
                    m.seq(),
                    last[k]
                );
                last[k] = m.seq();
                let stamp = m.stamp();
                let of_round = if stamp >= STAGED_STAMP {
                    check_whole(m.data(), STAGED_ID + stamp - STAGED_STAMP, "staged async")?;
                    (stamp - STAGED_STAMP) as i64
                } else {
                    check_whole(m.data(), m.seq(), "staged async: a message sent beside")?;
                    stamp as i64 - 1
                };
                ensure!(
                    of_round <= round as i64 + 1,
                    "staged async: stamp {stamp} in round {round}"
                );
                seen[k] = seen[k].max(of_round);
            }
        }
    }
    close_staged(ctx, next, prev)
}

fn staged_racy<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    let cfg = ChannelConfig::new(len, 2).map_err(|e| e.to_string())?;
    let Some((mut next, mut prev)) = ring::<C, Racy>(ctx, cfg)? else {
        return Ok(());
    };
    // Every round sends one message beside the staged one, then the staged one.
    let mut view_copy = vec![0.0; len];
    for round in 0..rounds {
        for ch in [&mut next, &mut prev] {
            stage_twice(ch, round)?;
            ch.set_iteration(round);
            let seq = ch.stats().sent + 1;
            ch.send_with(|b| fill(b, seq))
                .map_err(|e| format!("send beside a staged message: {e}"))?;
            ch.set_iteration(STAGED_STAMP + round);
            ch.send_staged().map_err(|e| format!("send_staged: {e}"))?;
        }
        // Wait until this round's sends landed; the view then holds elements of sends of this
        // round or the next (a fast peer), or, should the transport complete receives out of
        // order, of the round before; never of the bogus message.
        for ch in [&mut next, &mut prev] {
            let target = 2 * (round + 1);
            spin_until(ch, |c| {
                c.can_recv().map_err(|e| e.to_string())?;
                Ok(c.stats().received >= target)
            })?;
            let view = ch.recv().map_err(|e| e.to_string())?;
            for j in 0..view.len() {
                let v = view.load(j);
                let ok = decode(v, j).is_some_and(|s| match s.checked_sub(STAGED_ID) {
                    Some(staged_round) => staged_round + 1 >= round && staged_round <= round + 1,
                    None => s + 2 >= target && s <= target + 2,
                });
                ensure!(ok, "staged racy: element {j} holds {v} in round {round}");
            }
        }
    }
    // Once every send landed and none is under way, the view holds exactly the last one: the
    // last staged message, whole (no send beside it wrote its buffer).
    for ch in [&mut next, &mut prev] {
        spin_until(ch, |c| {
            c.can_recv().map_err(|e| e.to_string())?;
            Ok(c.stats().received >= 2 * rounds)
        })?;
        ch.recv()
            .map_err(|e| e.to_string())?
            .load_into(&mut view_copy);
        if rounds > 0 {
            check_whole(
                &view_copy,
                STAGED_ID + rounds - 1,
                "staged racy: the last view",
            )?;
            ensure!(
                ch.last_stamp() == STAGED_STAMP + rounds - 1,
                "staged racy: last stamp {}",
                ch.last_stamp()
            );
        }
    }
    close_staged(ctx, next, prev)
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

/// Async messages in flight in both directions on every ring channel (20 KB and 8 B), nothing
/// received, then close: every message is accounted for at its receiver. Launched tests run
/// this just before finalize, which must then find nothing outstanding. Needs at least 2 ranks.
pub fn close_unread<C: Context>(ctx: &mut C) -> Check {
    for len in [2500, 1] {
        let mut chans = ctx
            .open::<Async>(&ring_specs(ctx, len, 3)?)
            .map_err(|e| e.to_string())?;
        for ch in &mut chans {
            for k in 0..3 {
                match ch.try_send(&vec![k as f64; len]) {
                    Ok(()) | Err(TrySendError::Full(_)) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        for s in close_all(chans).map_err(|e| e.to_string())? {
            ensure!(
                s.received == s.peer_sent && s.unread_at_close == s.received && s.peer_sent == 3,
                "close lost track of messages: {s:?}"
            );
        }
    }
    Ok(())
}

/// Channels of every mode (Sync and Racy with a message staged) and a reduction in progress,
/// dropped without a close while messages are in flight (rank 0 first, the others after a barrier, in another order): nothing hangs.
/// Launched tests finalize right after, which must complete with nothing outstanding. Needs at
/// least 2 ranks.
pub fn drop_without_close<C: Context>(ctx: &mut C) -> Check {
    let specs = ring_specs(ctx, 2500, 2)?;
    let mut a = ctx.open::<Async>(&specs).map_err(|e| e.to_string())?;
    let mut s = ctx.open::<Sync>(&specs).map_err(|e| e.to_string())?;
    let mut r = ctx.open::<Racy>(&specs).map_err(|e| e.to_string())?;
    let data = vec![1.0; 2500];
    for ch in &mut a {
        let _ = ch.try_send(&data);
        let _ = ch.try_send(&data);
    }
    for ch in &mut s {
        let _ = ch.try_send(&data);
        // A message staged at the drop is discarded with the channel.
        ch.stage(&data).map_err(|e| e.to_string())?;
    }
    for ch in &mut r {
        let _ = ch.try_send(&data);
        ch.stage(&data).map_err(|e| e.to_string())?;
    }
    let mut red = ctx.reduction(3, ReduceOp::Sum).map_err(|e| e.to_string())?;
    red.start(&[1.0, 2.0, 3.0]).map_err(|e| e.to_string())?;
    if ctx.rank() == 0 {
        drop((a, s, r, red));
        ctx.barrier().map_err(|e| e.to_string())?;
    } else {
        ctx.barrier().map_err(|e| e.to_string())?;
        drop((r, red, s, a));
    }
    Ok(())
}

/// Two ends that disagree on length, R, or mode: ranks 0 and 1 both get
/// [`CreateError::Mismatch`] naming the field and both values; every other rank gets
/// [`CreateError::FailedElsewhere`]. Needs at least 2 ranks.
pub fn mismatched_ends<C: Context>(ctx: &mut C) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    if size < 2 {
        return Ok(());
    }
    let peer = usize::from(rank == 0);
    let cfg = |len, r| ChannelConfig::new(len, r).expect("valid");
    let specs = |c| -> Vec<ChannelSpec> {
        if rank < 2 {
            vec![ChannelSpec::new(peer, 7, c).expect("valid")]
        } else {
            Vec::new()
        }
    };
    // Length: 10 at rank 0, 12 at rank 1.
    let mine = if rank == 0 { cfg(10, 2) } else { cfg(12, 2) };
    let e = ctx.open::<Async>(&specs(mine)).err();
    expect_mismatch(rank, e, SpecField::Length, ["10", "12"])?;
    // R: 2 at rank 0, 3 at rank 1.
    let mine = if rank == 0 { cfg(10, 2) } else { cfg(10, 3) };
    let e = ctx.open::<Sync>(&specs(mine)).err();
    expect_mismatch(rank, e, SpecField::MaxInFlight, ["2", "3"])?;
    // Mode: async at rank 0, racy at rank 1.
    let c = cfg(10, 2);
    let e = if rank == 0 {
        ctx.open::<Async>(&specs(c)).err()
    } else {
        ctx.open::<Racy>(&specs(c)).err()
    };
    expect_mismatch(rank, e, SpecField::Mode, ["async", "racy"])?;
    // And the world is still usable: a matching channel opens and carries a message.
    let mut ch = ctx
        .open::<Sync>(&specs(cfg(3, 1)))
        .map_err(|e| format!("matching open after mismatches failed: {e}"))?;
    if let Some(ch) = ch.first_mut() {
        ch.send(&[1.0, 2.0, 3.0]).map_err(|e| e.to_string())?;
        let m = ch.recv().map_err(|e| e.to_string())?;
        ensure!(
            m.data() == [1.0, 2.0, 3.0],
            "after mismatch: got {:?}",
            m.data()
        );
    }
    close_all(ch).map_err(|e| e.to_string())?;
    Ok(())
}

pub(crate) fn expect_mismatch(
    rank: usize,
    e: Option<CreateError>,
    field: SpecField,
    values: [&str; 2],
) -> Check {
    match (rank, e) {
        (
            0 | 1,
            Some(CreateError::Mismatch {
                field: f,
                here,
                there,
                ..
            }),
        ) => {
            let (h, t) = (values[rank], values[1 - rank]);
            ensure!(
                f == field && here == h && there == t,
                "rank {rank}: mismatch reported as {f}: {here} vs {there}; want {field}: {h} vs {t}"
            );
            Ok(())
        }
        (0 | 1, other) => Err(format!(
            "rank {rank}: want a {field} mismatch, got {other:?}"
        )),
        (_, Some(CreateError::FailedElsewhere { failed_rank: 0 })) => Ok(()),
        (_, other) => Err(format!(
            "rank {rank}: want FailedElsewhere from rank 0, got {other:?}"
        )),
    }
}

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

/// Close with messages in flight both ways, `repeats` times: nothing hangs, and what was sent
/// is accounted for at the peer (received or counted unread at close).
pub fn close_with_traffic<C: Context>(ctx: &mut C, repeats: usize, len: usize) -> Check {
    for rep in 0..repeats {
        let r = 1 + rep % 4;
        let cfg = ChannelConfig::new(len, r).map_err(|e| e.to_string())?;
        let Some((mut next, mut prev)) = ring::<C, Async>(ctx, cfg)? else {
            return Ok(());
        };
        for k in 0..(rep % 5) {
            for ch in [&mut next, &mut prev] {
                match ch.try_send_with(|b| fill(b, k as u64 + 1)) {
                    Ok(()) | Err(TrySendError::Full(_)) => {}
                    Err(e) => return Err(format!("try_send: {e}")),
                }
            }
        }
        if rep % 2 == 0 {
            let _ = next.recv().map_err(|e| e.to_string())?;
        }
        let sent = (next.stats().sent + prev.stats().sent) as f64;
        let got: u64 = close_ring(next, prev)?.iter().map(|s| s.received).sum();
        let got = got as f64;
        let total_sent = sum_over_ranks(ctx, sent)?;
        let total_got = sum_over_ranks(ctx, got)?;
        ensure!(
            total_sent == total_got,
            "repeat {rep}: {total_sent} sent but {total_got} accounted for at close"
        );
    }
    Ok(())
}

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

/// The channels of a sparse pattern: between ranks a < b, one channel when they are
/// neighbours on the ring (b = a + 1, or a = 0 and b the last), two (tags 0 and 1) when
/// b = a + 3 and `b` is odd, none otherwise; so each rank has channels to some ranks and none
/// to others, and differently many. Sorted by peer, then tag.
fn sparse_pairs(rank: usize, size: usize) -> Vec<(usize, u32)> {
    let count = |a: usize, b: usize| {
        let (a, b) = (a.min(b), a.max(b));
        let ring = b == a + 1 || (a == 0 && b == size - 1 && size > 2);
        let far = b == a + 3 && b % 2 == 1;
        usize::from(ring) + 2 * usize::from(far)
    };
    let mut pairs = Vec::new();
    for peer in (0..size).filter(|&p| p != rank) {
        pairs.extend((0..count(rank, peer) as u32).map(|tag| (peer, tag)));
    }
    pairs
}

/// Channels opened on a sparse pattern ([`sparse_pairs`]: each rank's handshake lists are
/// empty towards most ranks): every channel carries `rounds` messages each way whose
/// contents name the sender, the channel and the round, received whole and in order, and
/// closes with nothing unread. Best at 5 ranks or more (fewer: the pattern is denser).
pub fn sparse_channels<C: Context>(ctx: &mut C, rounds: u64, len: usize) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let pairs = sparse_pairs(rank, size);
    let cfg = ChannelConfig::new(len, 2).map_err(|e| e.to_string())?;
    let specs = pairs
        .iter()
        .map(|&(peer, tag)| ChannelSpec::new(peer, tag, cfg).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut chans = ctx.open::<Sync>(&specs).map_err(|e| format!("open: {e}"))?;
    ensure!(
        chans.len() == pairs.len(),
        "open: {} channels for {} specs",
        chans.len(),
        pairs.len()
    );
    // A message's sequence number names its sender, channel and round.
    let seq =
        |from: usize, tag: u32, round: u64| 1 + round + 100 * (u64::from(tag) + 2 * from as u64);
    for round in 0..rounds {
        for (ch, &(_, tag)) in chans.iter_mut().zip(&pairs) {
            ch.send_with(|b| fill(b, seq(rank, tag, round)))
                .map_err(|e| format!("send: {e}"))?;
        }
        for (ch, &(peer, tag)) in chans.iter_mut().zip(&pairs) {
            let m = ch.recv().map_err(|e| format!("recv from {peer}: {e}"))?;
            check_whole(m.data(), seq(peer, tag, round), "sparse recv")?;
        }
    }
    let stats = close_all(chans).map_err(|e| format!("close: {e}"))?;
    for (s, (peer, tag)) in stats.iter().zip(&pairs) {
        ensure!(
            s.received == rounds && s.peer_sent == rounds && s.unread_at_close == 0,
            "channel to {peer} tag {tag}: {s:?} after {rounds} rounds"
        );
    }
    // Every rank opened as many ends as its peers opened towards it (the pattern is
    // symmetric): the totals over ranks are even.
    let ends = sum_over_ranks(ctx, pairs.len() as f64)?;
    ensure!(ends % 2.0 == 0.0, "{ends} channel ends over all ranks");
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

/// A channel set's memory is freed by a collective `reclaim` (the backend's: it returns how
/// many sets it freed; `live` counts the sets still allocated) once every end on every rank
/// is closed or dropped, and not before; opening reclaims too. Rank 0 drops its ends while the
/// others keep theirs open. At least 2 ranks.
pub fn reclaim_after_close<C: Context>(
    ctx: &mut C,
    reclaim: impl Fn(&mut C) -> Result<usize, CommError>,
    live: impl Fn(&C) -> usize,
) -> Check {
    let rank = ctx.rank();
    reclaim(ctx).map_err(|e| e.to_string())?;
    ensure!(live(ctx) == 0, "sets left before the test");
    let mut chans = ctx
        .open::<Async>(&ring_specs(ctx, 100, 2)?)
        .map_err(|e| e.to_string())?;
    for ch in &mut chans {
        let _ = ch.try_send(&[1.0; 100]);
    }
    // Rank 0 drops its ends; the others keep theirs open: nothing may be freed.
    let kept = if rank == 0 {
        drop(chans);
        None
    } else {
        Some(chans)
    };
    let freed = reclaim(ctx).map_err(|e| e.to_string())?;
    ensure!(
        freed == 0 && live(ctx) == 1,
        "freed {freed} sets with ends open"
    );
    if let Some(chans) = kept {
        close_all(chans).map_err(|e| e.to_string())?;
    }
    let freed = reclaim(ctx).map_err(|e| e.to_string())?;
    ensure!(
        freed == 1 && live(ctx) == 0,
        "freed {freed} sets after every end closed"
    );
    // Opening reclaims too: many open/close rounds do not pile up sets.
    for _ in 0..20 {
        let chans = ctx
            .open::<Sync>(&ring_specs(ctx, 1000, 1)?)
            .map_err(|e| e.to_string())?;
        close_all(chans).map_err(|e| e.to_string())?;
    }
    ensure!(live(ctx) <= 1, "{} sets alive after 20 rounds", live(ctx));
    Ok(())
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
