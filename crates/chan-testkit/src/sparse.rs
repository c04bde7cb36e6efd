//! Channels opened on a sparse pattern: the creation handshake's lists empty towards most
//! ranks.

use crate::{check_whole, fill, sum_over_ranks, Check};
use chan_core::traits::*;
use chan_core::{close_all, ChannelConfig, ChannelSpec, Sync};

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
