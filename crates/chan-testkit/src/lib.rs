//! Backend-generic semantic checks, written once and run by the tests of every backend
//! (threads in chan-threads, MPI under `mpirun`, SHMEM under `oshrun`). Each function is
//! collective: every rank of the context calls it with the same arguments. A failed property
//! is an `Err` naming it; the caller turns it into a test failure (a panic, or an abort of the
//! MPI job).
//!
//! By concept: the modes' semantics over a ring (`modes.rs`), two-step sends (`staged.rs`),
//! how ends end (`ends.rs`), reductions and collectives (`collectives.rs`), traffic that
//! stresses a transport (`traffic.rs`), element types (`elements.rs`), pairwise creation
//! (`pairwise.rs`), windows (`window.rs`), and the launcher harness (`jobs.rs`).

#![warn(missing_docs)]

pub mod jobs;

use chan_core::traits::*;
use chan_core::{close_all, Channel, ChannelConfig, ChannelSpec, ReduceOp, TrySendError};

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
pub(crate) type Ring<B, M> = (Channel<B, M>, Channel<B, M>);

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

pub(crate) fn ring<C: Context, M: Mode>(
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
pub(crate) fn close_ring<B: chan_core::Backend, M: Mode>(
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
pub(crate) fn offer_next<B: chan_core::Backend, M: Mode>(
    ch: &mut Channel<B, M>,
    r: usize,
) -> Check {
    let seq = ch.stats().sent + 1;
    match ch.try_send_with(|b| fill(b, seq)) {
        Ok(()) | Err(TrySendError::Full(_)) => {}
        Err(e) => return Err(format!("try_send: {e}")),
    }
    let inf = ch.in_flight().map_err(|e| e.to_string())?;
    ensure!(inf <= r, "in flight {inf} exceeds R = {r}");
    Ok(())
}

pub(crate) fn sum_over_ranks<C: Context>(ctx: &mut C, v: f64) -> Result<f64, String> {
    let mut x = [v];
    ctx.all_reduce(&mut x, ReduceOp::Sum)
        .map_err(|e| e.to_string())?;
    Ok(x[0])
}

mod collectives;
mod ends;
mod modes;
mod sparse;
mod staged;
mod traffic;

pub use collectives::{collectives_match, contribution, reductions_match_serial};
pub use ends::{
    close_unread, close_with_traffic, drop_without_close, mismatched_ends, reclaim_after_close,
};
pub use modes::{async_semantics, mode_case, path_as_asked, racy_semantics, sync_semantics};
pub use sparse::sparse_channels;
pub use staged::staged_sends;
pub use traffic::{fast_sender_slow_receiver, racy_whole_words, send_before_recv};
