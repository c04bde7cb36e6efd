//! Two-step sends (`stage_with`, `start_staged`) in every mode.

use crate::modes::{exchange_counts, recv_next};
use crate::{check_whole, close_ring, decode, fill, ring, Check};
use chan_core::traits::*;
use chan_core::{Async, Channel, ChannelConfig, Racy, SendError, Sync, TrySendError};

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
