//! Property tests (proptest) of the channel semantics over random interleavings between two
//! threads: each rank runs a random script of sends, receives and work of random length, so
//! the two sides meet in a different interleaving every case.
//!
//! What the sender has published is mirrored in shared atomics (stored SeqCst *after* the
//! channel call returns, loaded SeqCst *before* the receiving call), so a receive can check
//! that it saw at least everything published before it began: the "newest arrived" property
//! is checked exactly, not just "some message".

use chan_core::traits::*;
use chan_core::{
    close_all, Async, AtomicF64, AtomicF64Slice, ChannelConfig, ChannelSpec, Racy, Sync,
    TrySendError,
};
use chan_testkit::{decode, encode};
use chan_threads::World;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

#[derive(Debug, Clone, Copy)]
enum Op {
    Send,
    Recv,
    CanRecv,
    Work(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Send),
        3 => Just(Op::Recv),
        1 => Just(Op::CanRecv),
        2 => (0u16..400).prop_map(Op::Work),
    ]
}

fn script() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..300)
}

fn work(n: u16) {
    for i in 0..n {
        std::hint::black_box(i);
    }
}

fn fill(buf: &mut [f64], seq: u64) {
    for (j, v) in buf.iter_mut().enumerate() {
        *v = encode(seq, j);
    }
}

fn whole(data: &[f64], seq: u64) -> Result<(), String> {
    match data
        .iter()
        .enumerate()
        .find(|&(j, &v)| decode(v, j) != Some(seq))
    {
        None => Ok(()),
        Some((j, v)) => Err(format!("torn: element {j} = {v} in message {seq}")),
    }
}

fn spec(peer: usize, len: usize, r: usize) -> ChannelSpec {
    ChannelSpec::new(peer, 0, ChannelConfig::new(len, r).unwrap()).unwrap()
}

/// Run `body` on both ranks; every rank's error becomes one test failure.
fn both<F>(f: F) -> Result<(), TestCaseError>
where
    F: Fn(&mut chan_threads::ThreadCtx) -> Result<(), String> + std::marker::Sync,
{
    let errs: Vec<String> = World::new(2)
        .unwrap()
        .run(f)
        .into_iter()
        .enumerate()
        .filter_map(|(r, e)| e.err().map(|e| format!("rank {r}: {e}")))
        .collect();
    prop_assert!(errs.is_empty(), "{}", errs.join("; "));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Async: never torn; a receive yields the newest message published before it began (and
    /// nothing when nothing new was); sequence numbers and stamps never go back; never more
    /// than R in flight; after close every message the peer sent is accounted for.
    #[test]
    fn async_newest_whole_bounded(
        r in 1usize..5, len in 1usize..40, scripts in [script(), script()],
    ) {
        let published = [AtomicU64::new(0), AtomicU64::new(0)];
        both(|ctx| {
            let (me, peer) = (ctx.rank(), 1 - ctx.rank());
            let mut ch = ctx.open::<Async>(&[spec(peer, len, r)]).map_err(|e| e.to_string())?.remove(0);
            let (mut last_seq, mut last_stamp) = (0u64, 0u64);
            for (step, op) in scripts[me].iter().enumerate() {
                ch.set_iteration(step as u64);
                match *op {
                    Op::Send => {
                        let seq = ch.stats().sent + 1;
                        match ch.try_send_with(|b| fill(b, seq)) {
                            Ok(()) => published[me].store(seq, SeqCst),
                            Err(TrySendError::Full(_)) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                        let inf = ch.in_flight().map_err(|e| e.to_string())?;
                        if inf > r {
                            return Err(format!("{inf} in flight, R = {r}"));
                        }
                    }
                    Op::Recv => {
                        let before = published[peer].load(SeqCst);
                        match ch.recv().map_err(|e| e.to_string())? {
                            Some(m) => {
                                whole(m.data(), m.seq())?;
                                if m.seq() <= last_seq || m.stamp() < last_stamp {
                                    return Err(format!(
                                        "went back: seq {} stamp {} after {last_seq}/{last_stamp}",
                                        m.seq(), m.stamp()));
                                }
                                if m.seq() < before {
                                    return Err(format!(
                                        "not the newest: got {} but {before} was published", m.seq()));
                                }
                                (last_seq, last_stamp) = (m.seq(), m.stamp());
                            }
                            None if before > last_seq => {
                                return Err(format!("missed message {before} (last {last_seq})"));
                            }
                            None => {}
                        }
                    }
                    Op::CanRecv => {
                        let before = published[peer].load(SeqCst);
                        let can = ch.can_recv().map_err(|e| e.to_string())?;
                        if before > last_seq && !can {
                            return Err(format!("can_recv false with {before} published"));
                        }
                    }
                    Op::Work(n) => work(n),
                }
            }
            let s = ch.close().map_err(|e| e.to_string())?;
            if s.received != s.peer_sent
                || s.received != s.superseded + s.batches.count() + s.unread_at_close
            {
                return Err(format!("accounting: {s:?}"));
            }
            Ok(())
        })?;
    }

    /// Sync: every message delivered exactly once, in order, whole, with its stamp.
    #[test]
    fn sync_every_message_once_in_order(
        r in 1usize..5, len in 1usize..40, scripts in [script(), script()],
    ) {
        let totals = [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)];
        both(|ctx| {
            let (me, peer) = (ctx.rank(), 1 - ctx.rank());
            let mut ch = ctx.open::<Sync>(&[spec(peer, len, r)]).map_err(|e| e.to_string())?.remove(0);
            let mut expected = 1u64;
            let mut stamps = Vec::new();
            let mut check = |seq: u64, stamp: u64, data: &[f64], expected: &mut u64| {
                if seq != *expected {
                    return Err(format!("got seq {seq}, want {expected}"));
                }
                whole(data, seq)?;
                if stamps.last().is_some_and(|&s| stamp < s) {
                    return Err(format!("stamp {stamp} went back"));
                }
                stamps.push(stamp);
                *expected += 1;
                Ok(())
            };
            for (step, op) in scripts[me].iter().enumerate() {
                ch.set_iteration(step as u64);
                match *op {
                    Op::Send => {
                        let seq = ch.stats().sent + 1;
                        match ch.try_send_with(|b| fill(b, seq)) {
                            Ok(()) | Err(TrySendError::Full(_)) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Op::Recv | Op::CanRecv => {
                        if let Some(m) = ch.try_recv().map_err(|e| e.to_string())? {
                            check(m.seq(), m.stamp(), m.data(), &mut expected)?;
                        }
                    }
                    Op::Work(n) => work(n),
                }
            }
            // Publish how many this end sent, then receive everything the peer sent.
            totals[me].store(ch.stats().sent, SeqCst);
            loop {
                let want = totals[peer].load(SeqCst);
                if want != u64::MAX && expected > want {
                    break;
                }
                if let Some(m) = ch.try_recv().map_err(|e| e.to_string())? {
                    check(m.seq(), m.stamp(), m.data(), &mut expected)?;
                } else {
                    std::thread::yield_now();
                }
            }
            let s = ch.close().map_err(|e| e.to_string())?;
            if s.unread_at_close != 0 || s.received != s.peer_sent || s.superseded != 0 {
                return Err(format!("sync left messages behind: {s:?}"));
            }
            Ok(())
        })?;
    }

    /// Racy: every element read is a value some send that had begun wrote to that element
    /// (or the initial zero), never a torn or foreign value.
    #[test]
    fn racy_reads_values_some_send_wrote(len in 1usize..300, scripts in [script(), script()]) {
        let started = [AtomicU64::new(0), AtomicU64::new(0)];
        both(|ctx| {
            let (me, peer) = (ctx.rank(), 1 - ctx.rank());
            let mut ch = ctx.open::<Racy>(&[spec(peer, len, 1)]).map_err(|e| e.to_string())?.remove(0);
            let mut out = vec![0.0; len];
            for op in &scripts[me] {
                match *op {
                    Op::Send => {
                        let seq = ch.stats().sent + 1;
                        started[me].store(seq, SeqCst);
                        ch.try_send_with(|b| fill(b, seq)).map_err(|e| e.to_string())?;
                    }
                    Op::Recv | Op::CanRecv => {
                        ch.recv().map_err(|e| e.to_string())?.load_into(&mut out);
                        let hi = started[peer].load(SeqCst);
                        for (j, &v) in out.iter().enumerate() {
                            let ok = v == 0.0 || decode(v, j).is_some_and(|s| (1..=hi).contains(&s));
                            if !ok {
                                return Err(format!("element {j} = {v}: no send up to {hi} wrote it"));
                            }
                        }
                    }
                    Op::Work(n) => work(n),
                }
            }
            let s = ch.close().map_err(|e| e.to_string())?;
            if s.received != s.peer_sent {
                return Err(format!("racy accounting: {s:?}"));
            }
            Ok(())
        })?;
    }

    /// An atomic f64 slice under several concurrent writers: a reader only ever sees, at each
    /// index, a value one of the writers stored there (8-byte accesses are never torn).
    #[test]
    fn atomic_slice_concurrent_writers(writers in 2usize..5, len in 1usize..200, rounds in 1u64..200) {
        let cells: Vec<AtomicF64> = (0..len).map(|_| AtomicF64::new(0.0)).collect();
        let view = AtomicF64Slice::from_atomics(&cells);
        // Writer w stores encode(w·rounds + k, j) at index j in round k: each value names its
        // writer, round and index, so any mix of bytes from two stores would not decode.
        let value = |w: usize, k: u64, j: usize| encode(w as u64 * 1000 + k + 1, j);
        let bad = std::thread::scope(|s| {
            for w in 0..writers {
                s.spawn(move || {
                    for k in 0..rounds {
                        for j in 0..len {
                            view.store(j, value(w, k, j));
                        }
                    }
                });
            }
            let reader = s.spawn(|| {
                for _ in 0..rounds {
                    for j in 0..len {
                        let v = view.load(j);
                        let ok = v == 0.0
                            || decode(v, j).is_some_and(|s| {
                                let (w, k) = ((s - 1) / 1000, (s - 1) % 1000);
                                (w as usize) < writers && k < rounds
                            });
                        if !ok {
                            return Some((j, v));
                        }
                    }
                }
                None
            });
            reader.join().unwrap()
        });
        prop_assert!(bad.is_none(), "element {:?} was never written", bad);
    }
}

/// Closing several channels together works in any order at each rank (a ring closing "next"
/// first at every rank would wait in a cycle with one-by-one closes).
#[test]
fn close_all_in_opposite_orders() {
    let out = World::new(3).unwrap().run(|ctx| {
        let (rank, size) = (ctx.rank(), ctx.size());
        let cfg = ChannelConfig::new(4, 2).unwrap();
        let next = (rank + 1) % size;
        let prev = (rank + size - 1) % size;
        let specs = [
            ChannelSpec::new(next, rank as u32, cfg).unwrap(),
            ChannelSpec::new(prev, prev as u32, cfg).unwrap(),
        ];
        let mut chans = ctx.open::<Async>(&specs).unwrap();
        for ch in &mut chans {
            ch.send(&[rank as f64; 4]).unwrap();
        }
        if rank % 2 == 1 {
            chans.reverse();
        }
        close_all(chans).map(|s| s.iter().map(|s| s.received).sum::<u64>())
    });
    assert_eq!(out, vec![Ok(2), Ok(2), Ok(2)]);
}
