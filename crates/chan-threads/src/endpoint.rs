//! Channel ends of the threads backend: a mailbox end (two lock-free lanes, one per
//! direction) and a racy end (the peer stores straight into our atomic receive buffer).

use crate::lane::{Lane, LaneReceiver, LaneSender};
use crate::world::Shared;
use chan_core::backend::{
    Arrival, AtomicF64Buf, CloseReport, Header, IdleStreak, MailboxTransport, RacyPoll,
    RacyTransport, Transport,
};
use chan_core::{AtomicF64Slice, CommError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Close flags of both ends: 0 while open, `sent + 1` once an end closed or was dropped after
/// sending `sent` messages.
///
/// ## Memory ordering
/// An end stores its flag with Release after its last send; the peer's Acquire load of it then
/// sees every message of that end published.
#[derive(Default)]
pub(crate) struct CloseFlags([AtomicU64; 2]);

impl CloseFlags {
    fn mark(&self, side: usize, sent: u64) {
        // Release: pairs with `peer_total`'s Acquire, after all of this side's publications.
        self.0[side].store(sent + 1, Ordering::Release);
    }
    fn total(&self, side: usize) -> Option<u64> {
        // Acquire: pairs with `mark`'s Release.
        match self.0[side].load(Ordering::Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }
}

/// What both ends of a mailbox channel share.
pub(crate) struct MailboxPair {
    /// `lanes[s]` carries messages sent by side `s`.
    lanes: [Lane; 2],
    closed: CloseFlags,
}

impl MailboxPair {
    pub(crate) fn new(len: usize, r: usize) -> Self {
        MailboxPair {
            lanes: [Lane::new(len, r), Lane::new(len, r)],
            closed: CloseFlags::default(),
        }
    }
}

/// Wait until the peer closed, failing if the world failed.
fn wait_peer_close(world: &Shared, flags: &CloseFlags, peer_side: usize) -> Result<u64, CommError> {
    let mut spins = 0u32;
    loop {
        if let Some(n) = flags.total(peer_side) {
            return Ok(n);
        }
        world.check()?;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        spins = spins.saturating_add(1);
    }
}

/// One end of a Sync or Async channel between two threads.
pub struct MailboxEnd {
    pair: Arc<MailboxPair>,
    world: Arc<Shared>,
    side: usize,
    tx: LaneSender,
    rx: LaneReceiver,
    sent: u64,
    closed: bool,
    /// Polls in a row that found nothing (`WaitPolicy::idle`).
    idle: IdleStreak,
}

impl MailboxEnd {
    pub(crate) fn new(pair: Arc<MailboxPair>, world: Arc<Shared>, side: usize, r: usize) -> Self {
        MailboxEnd {
            pair,
            world,
            side,
            tx: LaneSender::new(r),
            rx: LaneReceiver::new(),
            sent: 0,
            closed: false,
            idle: IdleStreak::default(),
        }
    }
    fn in_lane(&self) -> &Lane {
        &self.pair.lanes[1 - self.side]
    }
}

impl Transport for MailboxEnd {
    fn in_flight(&mut self) -> Result<usize, CommError> {
        Ok(self.tx.refresh(&self.pair.lanes[self.side]))
    }
    fn can_send(&mut self) -> Result<bool, CommError> {
        Ok(self.tx.can_send(&self.pair.lanes[self.side]))
    }
    fn peer_closed(&mut self) -> bool {
        self.pair.closed.total(1 - self.side).is_some()
    }
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        self.tx.send_with(&self.pair.lanes[self.side], header, fill);
        self.sent += 1;
        Ok(())
    }
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        self.tx.send_from(&self.pair.lanes[self.side], header, data);
        self.sent += 1;
        Ok(())
    }
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        self.tx.stage_with(&self.pair.lanes[self.side], fill);
        Ok(())
    }
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        self.tx.start_staged(&self.pair.lanes[self.side], header);
        self.sent += 1;
        Ok(())
    }
    fn check_world(&self) -> Result<(), CommError> {
        self.world.check()
    }
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError> {
        debug_assert_eq!(sent, self.sent);
        self.tx.discard_staged();
        self.closed = true;
        self.pair.closed.mark(self.side, self.sent);
        Ok(())
    }
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        let peer_sent = wait_peer_close(&self.world, &self.pair.closed, 1 - self.side)?;
        // The peer published everything before its close flag (Release/Acquire): the READY
        // slots now are exactly the messages never polled.
        let drained = self.in_lane().count_ready();
        Ok(CloseReport { peer_sent, drained })
    }
}

impl MailboxTransport for MailboxEnd {
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
        let before = out.len();
        self.rx.poll(&self.pair.lanes[1 - self.side], out);
        if out.len() == before {
            // Nothing new: let a sender that shares this core run (`World::wait_policy`).
            self.idle.empty(self.world.wait);
        } else {
            self.idle.found();
        }
        Ok(())
    }
    fn data(&self, slot: usize) -> &[f64] {
        self.rx.data(self.in_lane(), slot)
    }
    fn release(&mut self, slot: usize) -> Result<(), CommError> {
        self.rx.release(&self.pair.lanes[1 - self.side], slot);
        Ok(())
    }
    fn peer_sent_total(&mut self) -> Option<u64> {
        self.pair.closed.total(1 - self.side)
    }
}

impl Drop for MailboxEnd {
    fn drop(&mut self) {
        // Tell the peer this end is gone so it never waits for it; nothing else is pending
        // (all memory is shared and freed with the last Arc).
        if !self.closed {
            self.pair.closed.mark(self.side, self.sent);
        }
    }
}

/// One direction of a racy channel: the receiver's buffer, written by the sender with relaxed
/// atomic stores, and a completion counter.
///
/// ## Memory ordering
/// The sender stores the elements (Relaxed), the stamp (Relaxed), then increments `completed`
/// with Release; the receiver's Acquire load of `completed` makes a count of n mean "n sends
/// have finished storing", though later sends may already be overwriting elements.
pub(crate) struct RacyLane {
    buf: AtomicF64Buf,
    completed: AtomicU64,
    stamp: AtomicU64,
}

/// What both ends of a racy channel share.
pub(crate) struct RacyPair {
    lanes: [RacyLane; 2],
    closed: CloseFlags,
}

impl RacyPair {
    pub(crate) fn new(len: usize) -> Self {
        let lane = || RacyLane {
            buf: AtomicF64Buf::zeroed(len),
            completed: AtomicU64::new(0),
            stamp: AtomicU64::new(0),
        };
        RacyPair {
            lanes: [lane(), lane()],
            closed: CloseFlags::default(),
        }
    }
}

/// One end of a Racy channel between two threads. A send is a direct store into the peer's
/// receive buffer, complete when the call returns, so nothing is ever in flight.
pub struct RacyEnd {
    pair: Arc<RacyPair>,
    world: Arc<Shared>,
    side: usize,
    /// For `send_with`: the caller fills this, then it is stored into the peer's buffer.
    staging: Box<[f64]>,
    /// The staged message (`stage_with`); allocated at the first stage.
    staged: Vec<f64>,
    seen: u64,
    sent: u64,
    closed: bool,
    /// Polls in a row that found nothing (`WaitPolicy::idle`).
    idle: IdleStreak,
}

impl RacyEnd {
    pub(crate) fn new(pair: Arc<RacyPair>, world: Arc<Shared>, side: usize) -> Self {
        let len = pair.lanes[0].buf.len();
        RacyEnd {
            pair,
            world,
            side,
            staging: vec![0.0; len].into_boxed_slice(),
            staged: Vec::new(),
            seen: 0,
            sent: 0,
            closed: false,
            idle: IdleStreak::default(),
        }
    }

    fn publish(&mut self, stamp: u64) {
        let lane = &self.pair.lanes[1 - self.side];
        lane.stamp.store(stamp, Ordering::Relaxed);
        // Release: pairs with the receiver's Acquire load in `poll`.
        lane.completed.fetch_add(1, Ordering::Release);
        self.sent += 1;
    }
}

impl Transport for RacyEnd {
    fn in_flight(&mut self) -> Result<usize, CommError> {
        Ok(0)
    }
    fn can_send(&mut self) -> Result<bool, CommError> {
        Ok(true)
    }
    fn peer_closed(&mut self) -> bool {
        self.pair.closed.total(1 - self.side).is_some()
    }
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        fill(&mut self.staging);
        self.pair.lanes[1 - self.side].buf.store_from(&self.staging);
        self.publish(header.stamp);
        Ok(())
    }
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        self.pair.lanes[1 - self.side].buf.store_from(data);
        self.publish(header.stamp);
        Ok(())
    }
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        self.staged.resize(self.staging.len(), 0.0);
        fill(&mut self.staged);
        Ok(())
    }
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        self.pair.lanes[1 - self.side].buf.store_from(&self.staged);
        self.publish(header.stamp);
        Ok(())
    }
    fn check_world(&self) -> Result<(), CommError> {
        self.world.check()
    }
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError> {
        debug_assert_eq!(sent, self.sent);
        self.closed = true;
        self.pair.closed.mark(self.side, self.sent);
        Ok(())
    }
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        let peer_sent = wait_peer_close(&self.world, &self.pair.closed, 1 - self.side)?;
        // Acquire: pairs with the peer's Release increments in `publish`, all before its close.
        let drained = self.pair.lanes[self.side].completed.load(Ordering::Acquire) - self.seen;
        Ok(CloseReport { peer_sent, drained })
    }
}

impl RacyTransport for RacyEnd {
    fn poll(&mut self) -> Result<RacyPoll, CommError> {
        let lane = &self.pair.lanes[self.side];
        // Acquire: pairs with the sender's Release increment in `publish`.
        let c = lane.completed.load(Ordering::Acquire);
        let arrived = c - self.seen;
        self.seen = c;
        if arrived == 0 {
            // Nothing new: let a sender that shares this core run (`World::wait_policy`).
            self.idle.empty(self.world.wait);
        } else {
            self.idle.found();
        }
        Ok(RacyPoll {
            arrived,
            stamp: lane.stamp.load(Ordering::Relaxed),
        })
    }
    fn view(&self) -> &AtomicF64Slice {
        &self.pair.lanes[self.side].buf
    }
}

impl Drop for RacyEnd {
    fn drop(&mut self) {
        if !self.closed {
            self.pair.closed.mark(self.side, self.sent);
        }
    }
}

/// Small enough for miri, whose data-race detector and aliasing checks then cover the lane's
/// unsafe slot accesses and the racy view: `cargo +nightly miri test -p chan-core -p chan-threads --lib`.
#[cfg(test)]
mod tests {
    use crate::World;
    use chan_core::traits::*;
    use chan_core::{close_all, Async, ChannelConfig, ChannelSpec, Racy, Sync};

    const MSGS: u64 = if cfg!(miri) { 12 } else { 2000 };

    fn spec(peer: usize, len: usize, r: usize) -> ChannelSpec {
        ChannelSpec::new(peer, 1, ChannelConfig::new(len, r).unwrap()).unwrap()
    }

    #[test]
    fn every_mode_carries_whole_messages_between_two_threads() {
        let out = World::new(2).unwrap().run(|ctx| {
            let peer = 1 - ctx.rank();
            let mut a = ctx.open::<Async>(&[spec(peer, 5, 2)]).unwrap();
            let mut s = ctx.open::<Sync>(&[spec(peer, 5, 1)]).unwrap();
            let mut r = ctx.open::<Racy>(&[spec(peer, 5, 1)]).unwrap();
            let mut newest = 0.0;
            for k in 1..=MSGS {
                let _ = a[0].try_send_with(|b| b.fill(k as f64));
                if let Some(m) = a[0].recv().unwrap() {
                    assert!(m.iter().all(|&v| v == m[0]), "torn async message");
                    assert!(m[0] > newest);
                    newest = m[0];
                }
                s[0].send(&[k as f64; 5]).unwrap();
                assert_eq!(s[0].recv().unwrap().data(), [k as f64; 5]);
                r[0].try_send(&[k as f64; 5]).unwrap();
                let v = r[0].recv().unwrap();
                assert!(v.iter().all(|x| x >= 0.0 && x <= MSGS as f64));
            }
            let sa = close_all(a).unwrap();
            let ss = close_all(s).unwrap();
            let sr = close_all(r).unwrap();
            (sa[0].received == sa[0].peer_sent)
                && (ss[0].received == MSGS)
                && (sr[0].received == MSGS)
        });
        assert_eq!(out, vec![true, true]);
    }
}
