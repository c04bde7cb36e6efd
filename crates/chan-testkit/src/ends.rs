//! How channel ends end: closed with messages unread or in flight, dropped without a
//! close, mismatched at creation, and the memory a closed set gives back.

use crate::{close_ring, fill, ring, ring_specs, sum_over_ranks, Check};
use chan_core::traits::*;
use chan_core::{
    close_all, Async, ChannelConfig, ChannelSpec, CommError, CreateError, Racy, ReduceOp,
    SpecField, Sync, TrySendError,
};

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
