//! What a backend implements. The channel logic (newest-wins, in-order delivery, statistics)
//! is written once in [`crate::Channel`] on top of these primitives.
//!
//! A backend provides two transports: a **mailbox** (R slots per direction with end-to-end
//! acknowledgement; carries Sync and Async channels) and a **racy** transport (one receive
//! buffer written by the transport at any moment). Each handles one channel end; both
//! directions of a channel go through it.

use crate::atomic::AtomicF64Slice;
use crate::error::CommError;

/// A message's header, carried with its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Per-direction sequence number: 1 for the first message, then 2, 3, …
    pub seq: u64,
    /// The sender's iteration stamp.
    pub stamp: u64,
}

/// A message that arrived in a mailbox slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Slot index, valid for [`MailboxTransport::data`] and [`MailboxTransport::release`].
    pub slot: usize,
    /// Its header.
    pub header: Header,
}

/// What a transport's close found, matched with the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseReport {
    /// Messages the peer sent in total (it told us when it closed).
    pub peer_sent: u64,
    /// Messages that had arrived (or arrived during close) but were never reported by a poll;
    /// the transport released or cancelled them.
    pub drained: u64,
}

/// What both transports do: the sending side, and the close.
///
/// Not `Send` by requirement: a transport whose library must be called from one thread (MPI
/// initialised for a single thread) is `!Send`, and so is every channel over it.
pub trait Transport {
    /// Progress outstanding sends; the number of this end's messages in flight: sent, and not
    /// yet taken delivery of by the peer's channel. Never more than R.
    fn in_flight(&mut self) -> Result<usize, CommError>;

    /// Progress outstanding sends; true when [`Transport::send_with`] may be called now (fewer
    /// than R in flight and a free send slot; always, where a send completes when it returns).
    fn can_send(&mut self) -> Result<bool, CommError>;

    /// Start one message: `fill` writes its `len()` elements into the send slot. Only called
    /// after [`Transport::can_send`] returned true; the caller's data is free on return.
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError>;

    /// As [`Transport::send_with`], copying `data` (a transport may write it straight to the
    /// peer without a staging copy).
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        self.send_with(header, |buf| buf.copy_from_slice(data))
    }

    /// Fill a message now and start it later with [`Transport::start_staged`]: `fill` writes
    /// its `len()` elements where the send will go from (a send slot, or a staging buffer).
    /// Called only after [`Transport::can_send`] returned true, or while a message is staged,
    /// which it then replaces. Until it starts, a staged message holds one of the R places:
    /// `can_send` is true only when another message fits beside it, so starting it never
    /// waits. It is not in flight. `begin_close` discards a message still staged.
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError>;

    /// Start the staged message with `header`. Only while a message is staged; never waits.
    fn start_staged(&mut self, header: Header) -> Result<(), CommError>;

    /// True once the peer has begun closing (or dropped) its end: it receives nothing more.
    /// Messages this end sent before its own close are still accounted for by the peer's close
    /// (received or drained), so sending stays legal; only waiting for a slot becomes futile.
    fn peer_closed(&mut self) -> bool;

    /// Called between polls by blocking operations: yield, back off, or progress the library.
    fn relax(&mut self, spins: u32) {
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// A failure elsewhere that makes waiting pointless (the world failed), if any.
    fn check_world(&self) -> Result<(), CommError> {
        Ok(())
    }

    /// First half of a close: tell the peer this end sent `sent` messages in all and will send
    /// no more. Never waits for the peer, so a rank can begin closing all its channels before
    /// it waits for any (see [`crate::close_all`]). Called at most once.
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError>;

    /// Second half of a close, after [`Transport::begin_close`]: wait for the peer's
    /// announcement, complete every send, drain or cancel every receive. After it returns
    /// nothing is outstanding and `Drop` is harmless. Called at most once.
    fn finish_close(&mut self) -> Result<CloseReport, CommError>;
}

/// R slots per direction with acknowledgement: the transport of Sync and Async channels.
///
/// A message arrives into a receive slot; [`MailboxTransport::poll`] reports it once. It stops
/// counting as in flight for the sender once it is acknowledged, "received into the channel":
/// on arrival (MPI: a synchronous send matched a posted receive) or at the latest when a poll
/// reports it (threads). The slot's data stays valid and unchanged until
/// [`MailboxTransport::release`]. A transport keeps R + 1 receive slots, one more than R, so a
/// sender can have R in flight while the channel holds the message it lent last; a poll
/// therefore reports at most R + 1 new messages.
pub trait MailboxTransport: Transport {
    /// Progress receives; push every message that arrived since the last call onto `out`, in
    /// any order. Never allocates when `out` has capacity R + 1.
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError>;

    /// The data of a slot reported by `poll` and not yet released.
    fn data(&self, slot: usize) -> &[f64];

    /// Give back a slot reported by `poll`: it may receive again.
    fn release(&mut self, slot: usize) -> Result<(), CommError>;

    /// `Some(n)` once the peer has begun closing (or dropped) its end after sending `n`
    /// messages.
    fn peer_sent_total(&mut self) -> Option<u64>;
}

/// What a racy poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RacyPoll {
    /// Sends that completed into the view since the last poll.
    pub arrived: u64,
    /// The stamp of the newest of them (meaningful when `arrived > 0`).
    pub stamp: u64,
}

/// One receive buffer per direction that the transport writes whenever a send lands.
pub trait RacyTransport: Transport {
    /// Progress receives; what completed into the view since the last call.
    fn poll(&mut self) -> Result<RacyPoll, CommError>;

    /// The receive buffer, read through atomics.
    fn view(&self) -> &AtomicF64Slice;
}

/// A backend's channel transports, one per delivery. Implemented by a marker type (chan-threads'
/// `Threads`, chan-mpi's `Mpi`, chan-shmem's `Shmem`).
pub trait Backend: Sized + Send + 'static {
    /// Short name: `threads`, `mpi`, `shmem`.
    const NAME: &'static str;
    /// Carries Sync and Async channels.
    type Mailbox: MailboxTransport;
    /// Carries Racy channels.
    type Racy: RacyTransport;
}
