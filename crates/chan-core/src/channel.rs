//! `Channel<B, M, T>`: the one public channel type. The logic of each mode is here, once, over
//! a backend's transport, which moves 8-byte words whatever the element type (crate::element).

use crate::config::ChannelSpec;
use crate::element::{self, Element, RacyElement};
use crate::error::{CommError, RecvError, SendError, TrySendError};
use crate::mode::{Async, Mode, Racy, Sync};
use crate::stats::ChannelStats;
use crate::transport::{Arrival, Backend, Header, MailboxTransport, RacyTransport, Transport};
use std::marker::PhantomData;

/// A message lent by a Sync or Async receive: the data and its sender's stamp. It borrows the
/// channel, so the slot cannot be given back (by the next receive) while it is read:
///
/// ```compile_fail
/// # use chan_core::{Channel, Async, Backend};
/// fn keep_across_recv<B: Backend>(ch: &mut Channel<B, Async>) {
///     let first = ch.recv().unwrap();
///     let second = ch.recv().unwrap(); // the first message's slot would be released here
///     drop((first, second));
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Message<'a, T = f64> {
    data: &'a [T],
    header: Header,
}

impl<'a, T> Message<'a, T> {
    /// The message's elements.
    pub fn data(&self) -> &'a [T] {
        self.data
    }
    /// The sender's iteration stamp.
    pub fn stamp(&self) -> u64 {
        self.header.stamp
    }
    /// Sequence number in this direction (1 for the first message).
    pub fn seq(&self) -> u64 {
        self.header.seq
    }
}

impl<T> std::ops::Deref for Message<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

/// One end of a channel of mode `M` over backend `B`, carrying messages of elements `T`
/// (`f64` unless named; any [`Element`], and for [`Racy`] a [`RacyElement`]). Created
/// collectively with [`crate::Context::open`] (`f64`) or [`crate::Context::open_typed`];
/// closed with [`Channel::close`], which returns its statistics.
///
/// Sending is the same in every mode ([`Channel::try_send`], [`Channel::send`],
/// [`Channel::try_send_with`], [`Channel::send_with`], and the two-step [`Channel::stage`] then
/// [`Channel::send_staged`]); receiving depends on the mode.
/// Every call progresses the transport's outstanding operations, except a Sync receive whose
/// message an earlier call already took in (it returns at once).
pub struct Channel<B: Backend, M: Mode, T: Element = f64> {
    t: M::Transport<B>,
    stats: ChannelStats,
    /// The caller's current iteration: stamp of outgoing messages, reference for staleness.
    iteration: u64,
    /// Sequence number of the next outgoing message.
    next_seq: u64,
    /// A message is staged (filled, not started).
    staged: bool,
    /// Mailbox: arrivals reported by the transport and not yet delivered or discarded.
    pending: Vec<Arrival>,
    /// Mailbox: the slot lent to the caller by the last receive.
    held: Option<Arrival>,
    /// Sync: sequence number of the next message to deliver. Async: one past the newest
    /// delivered (older arrivals are stale).
    next_expected: u64,
    /// Racy: sends that landed since the last receive, and the newest stamp.
    racy_new: u64,
    racy_stamp: u64,
    _mode: PhantomData<(M, T)>,
}

impl<B: Backend, M: Mode, T: Element> std::fmt::Debug for Channel<B, M, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("backend", &B::NAME)
            .field("mode", &M::KIND)
            .field("element", &std::any::type_name::<T>())
            .field("peer", &self.stats.peer)
            .field("tag", &self.stats.tag)
            .field("len", &self.stats.len)
            .field("max_in_flight", &self.stats.max_in_flight)
            .finish()
    }
}

impl<B: Backend, M: Mode, T: Element> Channel<B, M, T> {
    /// Wrap a transport the backend wired after the handshake agreed on `spec` (its length in
    /// elements of `T`; the transport's in words).
    pub(crate) fn from_transport(t: M::Transport<B>, spec: &ChannelSpec) -> Self {
        let r = spec.config.max_in_flight();
        Channel {
            t,
            stats: ChannelStats::new(M::KIND, spec.peer, spec.tag, spec.config.len(), r),
            iteration: 0,
            next_seq: 1,
            staged: false,
            pending: Vec::with_capacity(r + 1),
            held: None,
            next_expected: 1,
            racy_new: 0,
            racy_stamp: 0,
            _mode: PhantomData,
        }
    }

    /// The rank at the other end.
    pub fn peer(&self) -> usize {
        self.stats.peer
    }
    /// The tag both ends named.
    pub fn tag(&self) -> u32 {
        self.stats.tag
    }
    /// Message length in elements.
    pub fn len(&self) -> usize {
        self.stats.len
    }
    /// Always false (a zero length is refused at creation).
    pub fn is_empty(&self) -> bool {
        self.stats.len == 0
    }
    /// R.
    pub fn max_in_flight(&self) -> usize {
        self.stats.max_in_flight
    }
    /// Statistics so far.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }

    /// Set the caller's current iteration: the stamp of the next messages sent, and the
    /// reference for the staleness of the next ones received.
    pub fn set_iteration(&mut self, iteration: u64) {
        self.iteration = iteration;
    }
    /// The iteration set last.
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// An error when waiting on this channel is pointless: the world failed (a rank died).
    pub fn check_world(&self) -> Result<(), CommError> {
        self.t.check_world()
    }

    /// Wait a little between polls, as this channel's transport does (spin, yield, or
    /// progress the library): for loops that wait on the channel from outside it.
    pub fn relax(&mut self, spins: u32) {
        self.t.relax(spins);
    }

    /// Wait between polls of a loop that only this channel's own progress can end (its sends
    /// completing, [`Channel::in_flight`]): as [`Channel::relax`], or blocked in the library
    /// until one of this end's operations completes where the transport can (MPI under
    /// SimGrid's SMPI).
    pub fn await_own(&mut self, spins: u32) -> Result<(), CommError> {
        self.t.await_own(spins)
    }

    /// Progress, then the number of this end's messages in flight (at most R).
    pub fn in_flight(&mut self) -> Result<usize, CommError> {
        self.t.in_flight()
    }

    /// Progress, then true when a send would start now. With R = 1 and a message staged it
    /// stays false until [`Channel::send_staged`].
    pub fn can_send(&mut self) -> Result<bool, CommError> {
        self.room()
    }

    /// Progress; true when a new message has a slot. A staged message holds one of the R
    /// slots, so with R = 1 there is none beside it, whatever the transport's flow control
    /// would allow.
    fn room(&mut self) -> Result<bool, CommError> {
        let free = self.t.can_send()?;
        Ok(free && !(self.staged && self.stats.max_in_flight == 1))
    }

    /// The header of the next message; [`Channel::count_sent`] once the transport took it, so
    /// a send the transport refused leaves no gap in the sequence numbers.
    fn header(&self) -> Header {
        Header {
            seq: self.next_seq,
            stamp: self.iteration,
        }
    }

    fn count_sent(&mut self) {
        self.next_seq += 1;
        self.stats.sent += 1;
    }

    fn check_len(&self, got: usize) -> Result<(), CommError> {
        if got == self.stats.len {
            Ok(())
        } else {
            Err(CommError::LengthMismatch {
                expected: self.stats.len,
                got,
            })
        }
    }

    /// Start `data` with the next header: from the caller's memory where its bytes are whole
    /// words (always for `f64`), else packed into the send slot.
    fn start(&mut self, data: &[T]) -> Result<(), CommError> {
        let h = self.header();
        match element::as_words(data) {
            Some(words) => self.t.send_from(h, words)?,
            None => self.t.send_with(h, |buf| {
                element::elements_mut(buf, data.len()).copy_from_slice(data)
            })?,
        }
        self.count_sent();
        Ok(())
    }

    /// Start the message `fill` writes in place, with the next header.
    fn start_with<F: FnOnce(&mut [T])>(&mut self, fill: F) -> Result<(), CommError> {
        let (h, len) = (self.header(), self.stats.len);
        self.t
            .send_with(h, |buf| fill(element::elements_mut(buf, len)))?;
        self.count_sent();
        Ok(())
    }

    /// Send `data` if a slot is free; otherwise count a skipped send and return
    /// [`TrySendError::Full`]. Never waits for the peer.
    pub fn try_send(&mut self, data: &[T]) -> Result<(), TrySendError> {
        self.check_len(data.len())?;
        if !self.room()? {
            self.stats.skipped += 1;
            return Err(TrySendError::Full(self.stats.max_in_flight));
        }
        Ok(self.start(data)?)
    }

    /// Zero-copy send: if a slot is free, `fill` writes the message straight into it.
    /// Otherwise a skipped send, [`TrySendError::Full`], and `fill` is not called.
    pub fn try_send_with<F: FnOnce(&mut [T])>(&mut self, fill: F) -> Result<(), TrySendError> {
        if !self.room()? {
            self.stats.skipped += 1;
            return Err(TrySendError::Full(self.stats.max_in_flight));
        }
        Ok(self.start_with(fill)?)
    }

    fn wait_for_slot(&mut self) -> Result<(), CommError> {
        let mut spins = 0u32;
        while !self.t.can_send()? {
            if self.t.peer_closed() {
                // It may have freed a slot just before closing; otherwise none will free.
                return match self.t.can_send()? {
                    true => Ok(()),
                    false => Err(CommError::Disconnected {
                        peer: self.stats.peer,
                    }),
                };
            }
            self.t.check_world()?;
            self.t.await_own(spins)?;
            spins = spins.saturating_add(1);
        }
        Ok(())
    }

    /// Wait for a slot for a new message. With R = 1 and a message staged, none will free.
    fn wait_to_send(&mut self) -> Result<(), SendError> {
        if self.staged && self.stats.max_in_flight == 1 {
            return Err(SendError::SlotStaged);
        }
        Ok(self.wait_for_slot()?)
    }

    /// Send `data`, waiting (and progressing) until a slot is free. Fails with
    /// [`CommError::Disconnected`] when every slot is busy and the peer has begun closing (no
    /// slot will free), and with [`SendError::SlotStaged`] when R = 1 and a message is staged.
    pub fn send(&mut self, data: &[T]) -> Result<(), SendError> {
        self.check_len(data.len())?;
        self.wait_to_send()?;
        Ok(self.start(data)?)
    }

    /// Zero-copy send, waiting until a slot is free.
    pub fn send_with<F: FnOnce(&mut [T])>(&mut self, fill: F) -> Result<(), SendError> {
        self.wait_to_send()?;
        Ok(self.start_with(fill)?)
    }

    /// First step of a two-step send: copy `data` into the next message now, and start it
    /// later with [`Channel::send_staged`]. A ping-pong's answer or a halo face can so be
    /// packed while the caller waits for something else, as a C halo swap packs its buffer
    /// before `MPI_Wait`. Waits for a slot as [`Channel::send`] does. Where the transport
    /// sends from its own slot (MPI; Sync and Async between threads) the start copies
    /// nothing; where a send is a copy into the peer's memory (OpenSHMEM, Racy between
    /// threads) the start makes that copy, and staging adds one.
    ///
    /// Staging again before the start replaces the staged message. Until it starts, a staged
    /// message holds one of the R slots: other sends go on in the others (with R = 1 a
    /// blocking send fails with [`SendError::SlotStaged`], and `try_send` reports `Full`).
    /// It is not sent, and not counted, until [`Channel::send_staged`]; a close discards it.
    /// The stamp is the iteration set when it starts.
    pub fn stage(&mut self, data: &[T]) -> Result<(), SendError> {
        self.check_len(data.len())?;
        self.stage_with(|buf| buf.copy_from_slice(data))
    }

    /// As [`Channel::stage`], with `fill` writing the message in place (zero copy).
    pub fn stage_with<F: FnOnce(&mut [T])>(&mut self, fill: F) -> Result<(), SendError> {
        if !self.staged {
            self.wait_for_slot()?;
        }
        let len = self.stats.len;
        self.t
            .stage_with(|buf| fill(element::elements_mut(buf, len)))?;
        self.staged = true;
        Ok(())
    }

    /// Start the message [`Channel::stage`] filled. Never waits: the stage took its slot.
    /// Fails with [`SendError::NothingStaged`] when no message is staged.
    pub fn send_staged(&mut self) -> Result<(), SendError> {
        if !self.staged {
            return Err(SendError::NothingStaged);
        }
        let h = self.header();
        // A start the transport refuses leaves the message staged.
        self.t.start_staged(h)?;
        self.staged = false;
        self.count_sent();
        Ok(())
    }

    /// True while a staged message waits for [`Channel::send_staged`].
    pub fn is_staged(&self) -> bool {
        self.staged
    }

    fn record_staleness(&mut self, stamp: u64) {
        self.stats
            .staleness
            .record(self.iteration as i64 - stamp as i64);
    }

    /// Close, matched with the peer: tell it how many messages this end sent, wait until it
    /// closes its end too, complete every send and drain or cancel every receive. Messages
    /// that arrived and were never received are counted in `unread_at_close`. Returns the
    /// statistics.
    ///
    /// This waits for the peer's close, like a blocking receive: ranks that close several
    /// channels one by one in different orders (each rank of a ring closing "next" first)
    /// would wait for each other in a cycle. Close a rank's channels together with
    /// [`close_all`], which cannot deadlock that way.
    pub fn close(mut self) -> Result<ChannelStats, CommError> {
        self.t.begin_close(self.stats.sent)?;
        self.finish_close()
    }

    fn finish_close(mut self) -> Result<ChannelStats, CommError> {
        let report = self.t.finish_close()?;
        // Arrived but never delivered: polled and still pending (Sync, Async), landed since
        // the last receive (Racy), and what the transport found that no poll had reported.
        self.stats.unread_at_close = self.pending.len() as u64 + self.racy_new + report.drained;
        self.stats.received += report.drained;
        self.stats.peer_sent = report.peer_sent;
        Ok(self.stats)
    }
}

/// Close a set of channels: announce the close on every one of them first, then wait for
/// each peer (see [`Channel::close`]). Ranks may list their channels in any order. Every
/// channel is closed even when one fails; the first error is returned.
pub fn close_all<B: Backend, M: Mode, T: Element>(
    channels: impl IntoIterator<Item = Channel<B, M, T>>,
) -> Result<Vec<ChannelStats>, CommError> {
    let mut first_err = None;
    let begun: Vec<Channel<B, M, T>> = channels
        .into_iter()
        .filter_map(|mut c| match c.t.begin_close(c.stats.sent) {
            Ok(()) => Some(c),
            Err(e) => {
                // Dropped here: the transport's Drop cleans up what begin_close could not.
                first_err.get_or_insert(e);
                None
            }
        })
        .collect();
    let mut stats = Vec::with_capacity(begun.len());
    for c in begun {
        match c.finish_close() {
            Ok(s) => stats.push(s),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

/// Receiving on a mailbox (Sync and Async).
impl<B: Backend, M: Mode<Transport<B> = B::Mailbox>, T: Element> Channel<B, M, T> {
    fn poll_mailbox(&mut self) -> Result<usize, CommError> {
        let before = self.pending.len();
        self.t.poll(&mut self.pending)?;
        let n = self.pending.len() - before;
        self.stats.received += n as u64;
        Ok(n)
    }

    fn release_held(&mut self) -> Result<(), CommError> {
        if let Some(a) = self.held.take() {
            self.t.release(a.slot)?;
        }
        Ok(())
    }

    fn lend(&self, a: Arrival) -> Message<'_, T> {
        Message {
            data: element::elements(self.t.data(a.slot), self.stats.len),
            header: a.header,
        }
    }

    /// The message the last receive delivered, still lent to the caller, if any.
    pub fn latest(&self) -> Option<Message<'_, T>> {
        self.held.map(|a| self.lend(a))
    }
}

impl<B: Backend, T: Element> Channel<B, Async, T> {
    /// Discard the arrivals no newer than the last delivered message: a transport may report
    /// messages out of order (MPI completes receives in any order once they matched: MPICH
    /// over UCX was seen to complete message 7 after message 8), and a newer message must
    /// never be followed by an older one. Counted as superseded.
    fn drop_stale(&mut self) -> Result<(), CommError> {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].header.seq < self.next_expected {
                let a = self.pending.swap_remove(i);
                self.t.release(a.slot)?;
                self.stats.superseded += 1;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Progress; true when a message newer than the last [`Channel::recv`]'s arrived.
    pub fn can_recv(&mut self) -> Result<bool, CommError> {
        self.poll_mailbox()?;
        self.drop_stale()?;
        Ok(!self.pending.is_empty())
    }

    /// The newest whole message that arrived since the last receive, with its stamp; every
    /// older one is discarded (counted as superseded), also one that arrives after a newer
    /// one was delivered. `None` when nothing new arrived; the
    /// previous message stays available through [`Channel::latest`]. Never waits. It polls
    /// even after a [`Channel::can_recv`] that found messages, so that it yields the newest
    /// message published before it began.
    pub fn recv(&mut self) -> Result<Option<Message<'_, T>>, RecvError> {
        self.poll_mailbox()?;
        self.drop_stale()?;
        let batch = self.pending.len();
        if batch == 0 {
            return Ok(None);
        }
        self.stats.batches.record(batch as i64);
        self.stats.superseded += batch as u64 - 1;
        self.release_held()?;
        let newest = (0..batch)
            .max_by_key(|&i| self.pending[i].header.seq)
            .unwrap_or(0);
        let keep = self.pending.swap_remove(newest);
        for i in 0..self.pending.len() {
            let slot = self.pending[i].slot;
            self.t.release(slot)?;
        }
        self.pending.clear();
        self.next_expected = keep.header.seq + 1;
        self.held = Some(keep);
        self.record_staleness(keep.header.stamp);
        Ok(Some(self.lend(keep)))
    }
}

/// Messages of at most this many 8-byte words (1 KiB) leave eagerly on every transport aiac
/// launches on (MPI's eager limits start at 4 KiB): a Sync receive of one that an earlier
/// poll took in needs no poll of its own.
const SMALL_MESSAGE: usize = 128;

impl<B: Backend, T: Element> Channel<B, Sync, T> {
    /// Progress; true when the next message in order has arrived.
    pub fn can_recv(&mut self) -> Result<bool, CommError> {
        self.poll_in_order()?;
        Ok(self.position_of_next().is_some())
    }

    /// Poll, with the new arrivals put newest first: a transport reports them oldest first as
    /// a rule, so the next in order is then the last, found at once by `position_of_next` and
    /// taken out without moving the others (a stream's batch of R + 1 otherwise costs a search
    /// through half the batch per message).
    fn poll_in_order(&mut self) -> Result<(), CommError> {
        let before = self.pending.len();
        self.poll_mailbox()?;
        self.pending[before..].reverse();
        Ok(())
    }

    fn position_of_next(&self) -> Option<usize> {
        self.pending
            .iter()
            .rposition(|a| a.header.seq == self.next_expected)
    }

    fn deliver(&mut self, i: usize) -> Message<'_, T> {
        let a = self.pending.swap_remove(i);
        self.next_expected += 1;
        self.held = Some(a);
        self.stats.batches.record(1);
        self.record_staleness(a.header.stamp);
        self.lend(a)
    }

    /// The next message in order if it has arrived, without waiting.
    pub fn try_recv(&mut self) -> Result<Option<Message<'_, T>>, RecvError> {
        self.release_held()?;
        if let Some(i) = self.position_of_next() {
            return Ok(Some(self.deliver(i)));
        }
        self.poll_in_order()?;
        match self.position_of_next() {
            Some(i) => Ok(Some(self.deliver(i))),
            None => Ok(None),
        }
    }

    /// The next message in order, waiting (and progressing) until it arrives. Fails with
    /// [`RecvError::Closed`] when the peer closed without sending it.
    pub fn recv(&mut self) -> Result<Message<'_, T>, RecvError> {
        self.release_held()?;
        // A poll took in every message that had arrived: while the next one is among them it
        // is delivered without another (an MPI poll with nothing new costs a progress call,
        // once per message of a stream the receiver trails). Only for small messages
        // (SMALL_MESSAGE): a larger one may go by rendezvous, whose transfers of the messages
        // behind it move only inside the transport's calls, and there a poll per message
        // costs nothing against the transfer.
        if self.stats.len * std::mem::size_of::<T>() <= SMALL_MESSAGE * 8 {
            if let Some(i) = self.position_of_next() {
                return Ok(self.deliver(i));
            }
        }
        let mut spins = 0u32;
        loop {
            self.poll_in_order()?;
            if let Some(i) = self.position_of_next() {
                return Ok(self.deliver(i));
            }
            if let Some(total) = self.t.peer_sent_total() {
                if total < self.next_expected {
                    // Everything the peer sent before closing was published before its close,
                    // so one more poll sees it all.
                    self.poll_in_order()?;
                    if let Some(i) = self.position_of_next() {
                        return Ok(self.deliver(i));
                    }
                    return Err(RecvError::Closed {
                        peer: self.stats.peer,
                    });
                }
            }
            self.t.check_world()?;
            self.t.await_own(spins)?;
            spins = spins.saturating_add(1);
        }
    }

    /// Receive the next message in order into `out`, waiting for it.
    pub fn recv_into(&mut self, out: &mut [T]) -> Result<u64, RecvError> {
        self.check_len(out.len())?;
        let m = self.recv()?;
        out.copy_from_slice(m.data());
        Ok(m.stamp())
    }
}

impl<B: Backend, T: RacyElement> Channel<B, Racy, T> {
    fn poll_racy(&mut self) -> Result<(), CommError> {
        let p = self.t.poll()?;
        if p.arrived > 0 {
            self.racy_new += p.arrived;
            self.racy_stamp = p.stamp;
            self.stats.received += p.arrived;
        }
        Ok(())
    }

    /// Progress; true when a send landed in the view since the last [`Channel::recv`].
    pub fn can_recv(&mut self) -> Result<bool, CommError> {
        self.poll_racy()?;
        Ok(self.racy_new > 0)
    }

    /// Progress and return the receive buffer at once, whatever has landed. Elements may come
    /// from different sends and may change while read; each element is some send's value.
    /// An `&AtomicF64Slice` for `f64`, a [`crate::RacyView`] for the other scalars.
    pub fn recv(&mut self) -> Result<T::View<'_>, RecvError> {
        self.poll_racy()?;
        if self.racy_new > 0 {
            self.stats.batches.record(self.racy_new as i64);
            self.record_staleness(self.racy_stamp);
            self.racy_new = 0;
        }
        Ok(self.view())
    }

    /// The receive buffer, without progressing.
    pub fn view(&self) -> T::View<'_> {
        T::view(self.t.view(), self.stats.len)
    }

    /// Stamp of the newest send that landed so far (0 before any).
    pub fn last_stamp(&self) -> u64 {
        self.racy_stamp
    }
}

#[cfg(test)]
mod tests {
    //! The channel logic against a receive end whose arrivals the test scripts: the order a
    //! transport reports messages in is its own ("in any order", [`MailboxTransport::poll`]),
    //! and no backend here reorders on demand (the threads mailbox never does; MPICH over UCX
    //! was seen to).
    use super::*;
    use crate::atomic::{AtomicF64Buf, AtomicF64Slice};
    use crate::config::ChannelConfig;
    use std::collections::VecDeque;

    /// A receiving end: each poll reports the next scripted batch of arrivals. It never
    /// sends (the tests only receive).
    struct Scripted {
        slots: Vec<Vec<f64>>,
        batches: VecDeque<Vec<Arrival>>,
        released: Vec<usize>,
        view: AtomicF64Buf,
        /// Racy polls: sends landed per poll, in order (then none).
        landed: VecDeque<u64>,
        /// Polls made, of either kind.
        polls: usize,
    }

    struct ScriptedBackend;

    impl Backend for ScriptedBackend {
        const NAME: &'static str = "scripted";
        type Mailbox = Scripted;
        type Racy = Scripted;
    }

    impl Transport for Scripted {
        fn in_flight(&mut self) -> Result<usize, CommError> {
            Ok(0)
        }
        fn can_send(&mut self) -> Result<bool, CommError> {
            Ok(false)
        }
        fn send_with<F: FnOnce(&mut [f64])>(&mut self, _: Header, _: F) -> Result<(), CommError> {
            unreachable!("the scripted end only receives")
        }
        fn stage_with<F: FnOnce(&mut [f64])>(&mut self, _: F) -> Result<(), CommError> {
            unreachable!("the scripted end only receives")
        }
        fn start_staged(&mut self, _: Header) -> Result<(), CommError> {
            unreachable!("the scripted end only receives")
        }
        fn peer_closed(&mut self) -> bool {
            false
        }
        fn begin_close(&mut self, _: u64) -> Result<(), CommError> {
            Ok(())
        }
        fn finish_close(&mut self) -> Result<crate::transport::CloseReport, CommError> {
            Ok(Default::default())
        }
    }

    impl MailboxTransport for Scripted {
        fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
            self.polls += 1;
            out.extend(self.batches.pop_front().unwrap_or_default());
            Ok(())
        }
        fn data(&self, slot: usize) -> &[f64] {
            &self.slots[slot]
        }
        fn release(&mut self, slot: usize) -> Result<(), CommError> {
            self.released.push(slot);
            Ok(())
        }
        fn peer_sent_total(&mut self) -> Option<u64> {
            None
        }
    }

    impl RacyTransport for Scripted {
        fn poll(&mut self) -> Result<crate::transport::RacyPoll, CommError> {
            self.polls += 1;
            let arrived = self.landed.pop_front().unwrap_or(0);
            Ok(crate::transport::RacyPoll {
                arrived,
                stamp: self.polls as u64,
            })
        }
        fn view(&self) -> &AtomicF64Slice {
            &self.view
        }
    }

    /// A receive end of messages of `len` values (R = 2, so 3 slots) whose mailbox polls
    /// report `batches` of (slot, seq) and whose racy polls report `landed` sends; slot s
    /// holds the value 10·s, and a message's stamp is its seq.
    fn scripted(len: usize, batches: &[&[(usize, u64)]], landed: &[u64]) -> Scripted {
        let arrival = |&(slot, seq): &(usize, u64)| Arrival {
            slot,
            header: Header { seq, stamp: seq },
        };
        Scripted {
            slots: (0..3).map(|s| vec![10.0 * s as f64; len]).collect(),
            batches: batches
                .iter()
                .map(|b| b.iter().map(arrival).collect())
                .collect(),
            released: Vec::new(),
            view: AtomicF64Buf::zeroed(len),
            landed: landed.iter().copied().collect(),
            polls: 0,
        }
    }

    fn channel<M: Mode>(
        t: M::Transport<ScriptedBackend>,
        len: usize,
    ) -> Channel<ScriptedBackend, M> {
        let spec = ChannelSpec::new(len, 0, ChannelConfig::new(len, 2).unwrap()).unwrap();
        Channel::from_transport(t, &spec)
    }

    /// An async channel of one-value messages over [`scripted`] arrivals.
    fn async_channel(batches: &[&[(usize, u64)]]) -> Channel<ScriptedBackend, Async> {
        channel::<Async>(scripted(1, batches, &[]), 1)
    }

    /// After a `can_recv` that found a small message, a Sync receive delivers it with no
    /// poll of its own (the transport's next arrivals stay unreported); a message larger than
    /// `SMALL_MESSAGE` words gets a poll, whose transfers a rendezvous may need. Async and
    /// racy receives always poll: they yield the newest message published before they
    /// began, which a poll of the earlier `can_recv` may not have seen.
    #[test]
    fn a_sync_receive_after_can_recv_polls_only_for_large_messages() {
        for (len, polls) in [(1, 1), (SMALL_MESSAGE, 1), (SMALL_MESSAGE + 1, 2)] {
            let batches: &[&[(usize, u64)]] = &[&[(0, 1)], &[(1, 2)]];
            let mut ch = channel::<Sync>(scripted(len, batches, &[]), len);
            assert!(ch.can_recv().unwrap());
            assert_eq!(ch.recv().unwrap().seq(), 1, "sync, {len} values");
            assert_eq!(ch.t.polls, polls, "sync, {len} values");

            let batches: &[&[(usize, u64)]] = &[&[(0, 1)], &[(1, 2)]];
            let mut ch = channel::<Async>(scripted(len, batches, &[]), len);
            assert!(ch.can_recv().unwrap());
            let m = ch.recv().unwrap().expect("messages 1 and 2 arrived");
            assert_eq!((m.seq(), ch.t.polls), (2, 2), "async, {len} values");

            let mut ch = channel::<Racy>(scripted(len, &[], &[1, 1]), len);
            assert!(ch.can_recv().unwrap());
            ch.recv().unwrap();
            assert_eq!(ch.t.polls, 2, "racy, {len} values");
            assert_eq!(ch.stats().received, 2, "racy, {len} values");
        }
        // The bound is in bytes: 16-byte elements are small up to half as many.
        for (len, polls) in [(SMALL_MESSAGE / 2, 1), (SMALL_MESSAGE / 2 + 1, 2)] {
            let batches: &[&[(usize, u64)]] = &[&[(0, 1)], &[(1, 2)]];
            let spec = ChannelSpec::new(len, 0, ChannelConfig::new(len, 2).unwrap()).unwrap();
            let mut ch: Channel<ScriptedBackend, Sync, [f64; 2]> =
                Channel::from_transport(scripted(2 * len, batches, &[]), &spec);
            assert!(ch.can_recv().unwrap());
            assert_eq!(ch.recv().unwrap().seq(), 1, "sync, {len} pairs");
            assert_eq!(ch.t.polls, polls, "sync, {len} pairs");
        }
    }

    #[test]
    fn async_never_delivers_a_message_older_than_one_delivered() {
        // Message 2 completes first, message 1 in the next poll (MPI may complete matched
        // receives in any order).
        let mut ch = async_channel(&[&[(1, 2)], &[(0, 1)], &[(2, 3)]]);
        let m = ch.recv().unwrap().expect("message 2 arrived");
        assert_eq!((m.seq(), m.data()[0]), (2, 10.0));
        // Message 1 arrives now: stale, released at once, never delivered.
        assert!(ch.recv().unwrap().is_none());
        assert_eq!(ch.t.released, [0]);
        assert_eq!(ch.stats().superseded, 1);
        assert_eq!(ch.latest().map(|m| m.seq()), Some(2));
        // A newer one is delivered, and the slot lent before goes back.
        let m = ch.recv().unwrap().expect("message 3 arrived");
        assert_eq!((m.seq(), m.data()[0]), (3, 20.0));
        assert_eq!(ch.t.released, [0, 1]);
        assert_eq!(ch.stats().received, 3);
    }

    #[test]
    fn async_can_recv_ignores_a_stale_arrival() {
        let mut ch = async_channel(&[&[(1, 2)], &[(0, 1)]]);
        assert_eq!(ch.recv().unwrap().map(|m| m.seq()), Some(2));
        assert!(
            !ch.can_recv().unwrap(),
            "message 1 is older than the one delivered"
        );
        assert_eq!(ch.t.released, [0]);
    }

    #[test]
    fn async_delivers_the_newest_of_a_batch_reported_out_of_order() {
        let mut ch = async_channel(&[&[(2, 3), (0, 1), (1, 2)]]);
        assert_eq!(ch.recv().unwrap().map(|m| m.seq()), Some(3));
        let mut released = ch.t.released.clone();
        released.sort_unstable();
        assert_eq!(released, [0, 1]);
        assert_eq!(ch.stats().superseded, 2);
    }
}
