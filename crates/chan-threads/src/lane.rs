//! The lock-free slot protocol of one direction of a threads mailbox: a single sender and a
//! single receiver share R + 1 slots. No lock, and neither side ever waits for the other.
//!
//! Each slot has a state, moved only as follows:
//!
//! ```text
//!  FREE --(sender: wrote header+data, Release)--> READY --(receiver: poll)--> HELD
//!   ^                                                                            |
//!   +----------------------(receiver: release, Release)--------------------------+
//! ```
//!
//! * The sender writes a slot's cells only while the slot is FREE and it has seen it FREE.
//! * The receiver reads a slot's cells only while it is READY or HELD.
//! * READY counts as *in flight*; HELD means the receiving channel took delivery (the message
//!   is acknowledged) and is not in flight. The receiver holds at most R + 1 − (in flight) slots,
//!   and a sender sends only with fewer than R in flight **and** a slot it has seen FREE.
//! * A *staged* slot is one the sender took off its free list and filled without publishing:
//!   it stays FREE (the receiver never looks at it) and counts as in flight for `can_send`, so
//!   publishing it later keeps in flight at most R.
//!
//! ## Memory ordering
//! * Sender `state.store(READY, Release)` after writing the cells; synchronizes with the
//!   receiver's `state.load(Acquire)` in [`LaneReceiver::poll`], so the cells are visible.
//! * Sender `published.store(n, Release)` after that (it is the only writer, so a plain store
//!   of its own count, not a locked read-modify-write); synchronizes with the receiver's
//!   `published.load(Acquire)` fast path, so a poll that sees the new count sees READY.
//! * Receiver `state.store(FREE, Release)` in [`LaneReceiver::release`] after its last read of the
//!   cells; synchronizes with the sender's `state.load(Acquire)` in [`LaneSender::refresh`], so
//!   the receiver's reads happen before the sender's next writes.
//! * Receiver `state.store(HELD, Relaxed)`: the sender only counts HELD slots, it reads no data
//!   that depends on it, and it never writes a slot that is not FREE.

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::Cell;
use chan_core::backend::{Arrival, Header};

const FREE: u64 = 0;
const READY: u64 = 1;
const HELD: u64 = 2;

struct Slot {
    state: AtomicU64,
    header: Cell<Header>,
    data: Cell<Box<[f64]>>,
}

/// One direction: R + 1 slots and a publication counter.
pub(crate) struct Lane {
    slots: Box<[Slot]>,
    published: AtomicU64,
}

// SAFETY: Lane is shared between exactly one sender and one receiver thread. Its cells are
// accessed only under the slot protocol above: (1) the sender writes a slot's cells only while
// the state is FREE and only it moves FREE -> READY; (2) the receiver reads cells only while the
// state is READY or HELD, which the sender never writes; (3) every hand-over is a Release store
// read by an Acquire load (see "Memory ordering"). So no cell is accessed concurrently with a write.
unsafe impl Sync for Lane {}
// SAFETY: the cells hold plain data (Header, Box<[f64]>), which is Send.
unsafe impl Send for Lane {}

impl Lane {
    /// A lane for messages of `len` f64 with at most `r` in flight.
    pub(crate) fn new(len: usize, r: usize) -> Self {
        let slots = (0..r + 1)
            .map(|_| Slot {
                state: AtomicU64::new(FREE),
                header: Cell::new(Header::default()),
                data: Cell::new(vec![0.0; len].into_boxed_slice()),
            })
            .collect();
        Lane {
            slots,
            published: AtomicU64::new(0),
        }
    }

    /// Messages published so far.
    pub(crate) fn published(&self) -> u64 {
        // Acquire: pairs with the sender's Release store in `publish`.
        self.published.load(Ordering::Acquire)
    }

    /// Number of slots currently READY (published, not yet polled). For close-time draining.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn count_ready(&self) -> u64 {
        self.slots
            .iter()
            // Acquire: pairs with the sender's Release store of READY.
            .filter(|s| s.state.load(Ordering::Acquire) == READY)
            .count() as u64
    }
}

/// The sender's private bookkeeping.
pub(crate) struct LaneSender {
    r: usize,
    /// Slots this sender has seen FREE: it may write them.
    free: Vec<usize>,
    /// Slots published and not yet seen FREE again (READY or HELD).
    outstanding: Vec<usize>,
    /// Messages published so far (this sender is the only writer of `Lane::published`).
    published: u64,
    /// A slot taken off `free` and filled, not yet published (it stays FREE meanwhile).
    staged: Option<usize>,
}

impl LaneSender {
    pub(crate) fn new(r: usize) -> Self {
        LaneSender {
            r,
            free: (0..r + 1).rev().collect(),
            outstanding: Vec::with_capacity(r + 1),
            published: 0,
            staged: None,
        }
    }

    /// Look at the outstanding slots: collect the freed ones; return how many are in flight.
    pub(crate) fn refresh(&mut self, lane: &Lane) -> usize {
        let mut in_flight = 0;
        let mut i = 0;
        while i < self.outstanding.len() {
            let s = self.outstanding[i];
            debug_assert!(s < lane.slots.len());
            // Acquire: pairs with the receiver's Release store of FREE in `release`, so its
            // reads of the slot happen before our next writes to it.
            match lane.slots[s].state.load(Ordering::Acquire) {
                FREE => {
                    self.outstanding.swap_remove(i);
                    self.free.push(s);
                }
                READY => {
                    in_flight += 1;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        in_flight
    }

    /// True when a send may start now: fewer than R in flight, counting a staged message, and
    /// a slot seen FREE.
    pub(crate) fn can_send(&mut self, lane: &Lane) -> bool {
        let in_flight = self.refresh(lane) + usize::from(self.staged.is_some());
        in_flight < self.r && !self.free.is_empty()
    }

    /// Take a slot seen FREE off the free list.
    fn take_free(&mut self) -> usize {
        self.free
            .pop()
            .expect("a send or stage is called only after can_send returned true")
    }

    /// Write `fill` into slot `s`'s data.
    fn fill<F: FnOnce(&mut [f64])>(lane: &Lane, s: usize, fill: F) {
        // SAFETY: slot s is FREE and this sender's: taken off the free list (where it went
        // new, or when `refresh` saw it FREE with Acquire, after the receiver's last read) or
        // kept staged since; only this sender moves it out of FREE, so nobody else accesses
        // its cells now.
        unsafe { lane.slots[s].data.with_mut(|d| fill(&mut *d)) };
    }

    /// Write one message into a FREE slot and publish it. Call only after `can_send` was true.
    pub(crate) fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        lane: &Lane,
        header: Header,
        fill: F,
    ) {
        let s = self.take_free();
        Self::fill(lane, s, fill);
        self.publish(lane, s, header);
    }

    /// Fill a FREE slot without publishing it, or refill the one staged. Call only after
    /// `can_send` was true or while a message is staged.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn stage_with<F: FnOnce(&mut [f64])>(&mut self, lane: &Lane, fill: F) {
        let s = match self.staged {
            Some(s) => s,
            None => self.take_free(),
        };
        self.staged = Some(s);
        Self::fill(lane, s, fill);
    }

    /// Publish the staged slot. Never waits: `can_send` kept a place in flight for it.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn start_staged(&mut self, lane: &Lane, header: Header) {
        let s = self.staged.take().expect("start_staged only while staged");
        self.publish(lane, s, header);
    }

    /// Give a staged slot back to the free list unpublished (close).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn discard_staged(&mut self) {
        if let Some(s) = self.staged.take() {
            self.free.push(s);
        }
    }

    /// Write slot `s`'s header and publish it; its data is written.
    fn publish(&mut self, lane: &Lane, s: usize, header: Header) {
        let slot = &lane.slots[s];
        // SAFETY: as in `fill`: slot s is FREE and this sender's alone until the store below.
        unsafe { slot.header.with_mut(|h| *h = header) };
        // Release: publishes the cells written above to the receiver's Acquire load in `poll`.
        slot.state.store(READY, Ordering::Release);
        // Release: pairs with the receiver's Acquire load of `published` (its fast path).
        self.published += 1;
        lane.published.store(self.published, Ordering::Release);
        self.outstanding.push(s);
    }

    /// Copy `data` straight into a FREE slot and publish it (see `send_with`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn send_from(&mut self, lane: &Lane, header: Header, data: &[f64]) {
        self.send_with(lane, header, |buf| buf.copy_from_slice(data))
    }
}

/// The receiver's private bookkeeping.
pub(crate) struct LaneReceiver {
    /// Value of `published` at the last scan.
    seen: u64,
}

impl LaneReceiver {
    pub(crate) fn new() -> Self {
        LaneReceiver { seen: 0 }
    }

    /// Report every READY slot of a message published by the count read first (moving it to
    /// HELD). Cheap when nothing was published.
    ///
    /// A slot that turned READY after the count was read is left for the next poll: the scan
    /// goes by slot index, not by sequence, so it can miss message s in a low slot and then
    /// find s + 1 in a higher one, and an Async receive would deliver s + 1 before s.
    pub(crate) fn poll(&mut self, lane: &Lane, out: &mut Vec<Arrival>) {
        let p = lane.published();
        if p == self.seen {
            return;
        }
        self.seen = p;
        for (i, slot) in lane.slots.iter().enumerate() {
            // Acquire: pairs with the sender's Release store of READY: the cells are visible.
            if slot.state.load(Ordering::Acquire) == READY {
                // SAFETY: the slot is READY, so the sender does not write it (it writes only
                // FREE slots) until we store FREE; we read it after the Acquire above.
                let header = unsafe { slot.header.with(|h| *h) };
                if header.seq > p {
                    // Published after the count: the next poll sees a newer count.
                    continue;
                }
                // Relaxed: only this receiver leaves READY; the sender merely counts HELD.
                slot.state.store(HELD, Ordering::Relaxed);
                out.push(Arrival { slot: i, header });
            }
        }
    }

    /// The data of a slot this receiver holds.
    #[cfg(not(loom))]
    pub(crate) fn data<'a>(&self, lane: &'a Lane, slot: usize) -> &'a [f64] {
        let s = &lane.slots[slot];
        debug_assert_eq!(s.state.load(Ordering::Relaxed), HELD);
        // SAFETY: the slot is HELD by this receiver (reported by `poll`, not released), so the
        // sender does not write it until `release` stores FREE; the caller's borrow of the
        // receiving channel ends before it can call `release`.
        unsafe { &*s.data.get() }
    }

    /// Read a held slot's data inside `f` (the form loom can track).
    #[cfg(loom)]
    pub(crate) fn with_data<R>(&self, lane: &Lane, slot: usize, f: impl FnOnce(&[f64]) -> R) -> R {
        // SAFETY: as in `data`: the slot is HELD, the sender does not write it.
        unsafe { lane.slots[slot].data.with(|d| f(&*d)) }
    }

    /// Give a held slot back to the sender.
    pub(crate) fn release(&mut self, lane: &Lane, slot: usize) {
        // Release: our reads of the slot happen before the sender's Acquire load that sees FREE.
        lane.slots[slot].state.store(FREE, Ordering::Release);
    }
}

/// loom explores every interleaving (and every weak-memory outcome loom models) of one sender
/// and one receiver on a lane. Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p chan-threads --lib --release loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// R = 1 (two slots), three send attempts, two polls: every message read is whole (both
    /// elements from the same send, matching its header), sequence numbers only grow, the
    /// sender never has more than R in flight, and a slot is never written while it is read
    /// (loom's UnsafeCell tracking reports the race: weakening the sender's two Release
    /// publications to Relaxed fails this test). loom does not fully model Relaxed, so it
    /// checks the Release/Acquire pairs it models, not every weak-memory outcome.
    #[test]
    fn loom_slot_protocol() {
        loom::model(|| {
            let lane = Arc::new(Lane::new(2, 1));
            let sender_lane = Arc::clone(&lane);
            let sender = loom::thread::spawn(move || {
                let mut tx = LaneSender::new(1);
                for seq in 1..=3u64 {
                    if tx.can_send(&sender_lane) {
                        let header = Header { seq, stamp: seq };
                        tx.send_with(&sender_lane, header, |b| b.fill(seq as f64));
                    }
                    assert!(tx.refresh(&sender_lane) <= 1, "more than R in flight");
                }
            });
            let mut rx = LaneReceiver::new();
            let mut out = Vec::with_capacity(2);
            let mut last = 0;
            for _ in 0..2 {
                out.clear();
                rx.poll(&lane, &mut out);
                assert!(out.len() <= 1, "a poll found more than R messages");
                for a in &out {
                    assert!(a.header.seq > last, "sequence went back");
                    rx.with_data(&lane, a.slot, |d| {
                        assert!(d.iter().all(|&v| v == a.header.seq as f64), "torn message");
                    });
                    last = a.header.seq;
                    rx.release(&lane, a.slot);
                }
            }
            sender.join().unwrap();
        });
    }
}
