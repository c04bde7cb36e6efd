//! The two-sided path: [`Core`], every buffer and request of one channel end whose messages
//! are MPI sends and receives. An end takes it to a rank of another node, to every peer under
//! `AIAC_MPI_REMOTE=1`, and on a node where no shared window could be made (`MpiCtx::wire`
//! chooses each end's path, and `crate::transport`'s `Path` holds it). The same code serves
//! every delivery: [`RecvMem`] says where its receives land (a buffer per slot for Sync and
//! Async, one shared buffer for Racy).
//!
//! ## Protocol
//! * **Data.** A message is `[seq, stamp, ack, payload…]` (the header as u64 bit patterns),
//!   sent as bytes from one of R send slots the channel owns, with a standard-mode send: a
//!   blocking `MPI_Send` up to `SEND_NOW_BYTES` (1 KiB; it leaves eagerly and leaves no
//!   request), `MPI_Isend` above. `ack` is this end's acknowledgement of the messages flowing
//!   the other way ([`Core::ack`]), so a channel that carries traffic both ways (a halo swap, a
//!   ping-pong) returns its credits for free.
//! * **Credits: end-to-end flow control.** An end sends only while its messages beyond the
//!   peer's latest acknowledgement number at most R + 1, the peer's window, and the peer keeps
//!   a receive posted for each of them (R + 2 mailbox slots: the window beside the message the
//!   channel holds; R + 1 racy receives), so a send is meant to find a posted receive
//!   (nothing relies on it: a message that came first matches the next receive posted) and
//!   no queue grows behind
//!   a slow receiver: `try_send` reports `Full` once the window is used. A mailbox acknowledges the messages a poll reported (taken delivery of), at
//!   most one more than the channel gave back; a racy end, every receive that completed (it is
//!   re-posted at once). When the acknowledgement runs `credit_every` (half the window, at
//!   least 2) ahead of the last one sent, and no message went back meanwhile, the end sends it
//!   alone, a 16-byte credit on the control tag (a one-way stream; messages above 1 KiB also
//!   once the peer's whole window has arrived). A blocked sender also
//!   looks for an acknowledgement in the headers of messages that arrived unpolled.
//!   In flight are the sends MPI has not completed (`MPI_Isend` requests, at most R): a send
//!   lands in a posted receive, which is delivery.
//! * **Staged sends.** `stage_with` takes a free send slot and a place in the window and fills
//!   the slot; `start_staged` sends it later. Meanwhile the slot is neither free nor in flight.
//! * **Receives.** Mailbox: R + 2 slots, each with its own buffer, pre-posted; a completed
//!   receive is reported once by `poll`, lent to the channel until `release` re-posts it.
//!   Racy: R + 1 receives posted into ONE buffer (the paper's racy MPI), read through atomics
//!   and re-posted as soon as they complete. Every receive is a persistent request
//!   (`MPI_Recv_init` once, `MPI_Start` to post): no request is allocated and freed per
//!   message, as `MPI_Irecv` and its completion do (about 15 ns of an 80 ns message on one
//!   node); the core frees them when it goes.
//! * **Control.** Each end keeps a receive posted for the peer's control messages `[ack,
//!   close]`: credits (`close` = 0), then once the close announcement (`close` = the peer's
//!   total send count + 1), the last message on the tag. `begin_close` sends this end's and
//!   re-posts every receive slot; `finish_close` receives until the peer's count arrived,
//!   cancels the receives left over, and completes every send. Every outstanding send of the
//!   peer is within its window, so it has a posted receive to match, and closing completes on
//!   MPI's progress alone: no end waits for the other to make a call.
//! * **Progress.** Every call tests the outstanding requests (`MPI_Testsome`): MPI only moves
//!   data inside MPI calls, and a send past the eager limit waits for the receiver to test
//!   (Saif & Parashar). A poll tests the oldest posted receives (MPI matches the peer's
//!   messages to the receives in the order they were posted) together with the control
//!   receive, in one call: at most one progress call per poll, whatever R
//!   ([`Core::test_recvs`]). A Sync receive of at most 1 KiB whose message an earlier poll
//!   took in makes no test or progress call (giving back the slot it held restarts that slot's receive, and
//!   may send a credit).
//!
//! Buffers are boxed and owned by the core, and placed to span the fewest pages
//! ([`PageBuf`]): on one node Open MPI copies a large message with `process_vm_readv`, which
//! pins it page by page, and an allocator-placed 20 KB buffer that spans a sixth page made the
//! 20 KB benchmarks vary from run to run (docs/performance.md). A request's buffer is never
//! moved, read as plain memory, written or freed while the request is active. A core dropped
//! with requests still active (only after an MPI error) leaks its buffers rather than free
//! memory MPI may write.
//!
//! The phases are files of this module: the send side with its acknowledgements and credits
//! (`send.rs`), the receive side with its progress (`recv.rs`), the control receive and the
//! close (`close.rs`).

mod close;
mod recv;
mod send;

use crate::env::SetComm;
use crate::pair::PairTag;
use crate::raw::{self, Requests, Route};
use chan_core::backend::{Delivery, Shared, Slots};
use chan_core::{AtomicF64, CommError};
use mpi::ffi;
use send::credit_every;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::rc::Rc;

/// Header elements in front of every message: sequence number, stamp, and the sender's
/// acknowledgement of the messages flowing the other way ([`Core::ack`]).
pub(crate) const HDR: usize = 3;

/// Bytes of a memory page, the unit in which MPI's single-copy shared-memory transfers
/// (`process_vm_readv`) and network registration pin a buffer.
const PAGE: usize = 4096;

/// `n` 8-byte elements that span the fewest pages wherever the allocator put them: aligned to
/// their size rounded up to a power of two, at most a page, inside an allocation that much
/// larger. A 20 016-byte message (a 20 KB face and the header) then spans 5 pages instead of
/// 5 or 6, and a small one never straddles two.
#[doc(hidden)]
pub struct PageBuf<T> {
    mem: Box<[T]>,
    off: usize,
    n: usize,
}

impl<T> PageBuf<T> {
    fn new(n: usize, init: impl FnMut() -> T) -> Self {
        const { assert!(std::mem::size_of::<T>() == 8 && std::mem::align_of::<T>() == 8) };
        let align = n.saturating_mul(8).next_power_of_two().min(PAGE);
        let mem: Box<[T]> = std::iter::repeat_with(init)
            .take(n + align / 8 - 1)
            .collect();
        // Elements to skip to reach the next multiple of `align`: T is 8-byte aligned and
        // `align` a multiple of 8, so the distance is a whole number of elements, below
        // align / 8, and `off + n` stays inside `mem`.
        let addr = mem.as_ptr() as usize;
        let off = (addr.next_multiple_of(align) - addr) / 8;
        PageBuf { mem, off, n }
    }
}

impl<T> std::ops::Deref for PageBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.mem[self.off..self.off + self.n]
    }
}

impl<T> std::ops::DerefMut for PageBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.mem[self.off..self.off + self.n]
    }
}

/// Where receives land.
#[doc(hidden)]
pub enum RecvMem {
    /// One buffer per slot (mailbox).
    Slots(Box<[PageBuf<f64>]>),
    /// One buffer for R receives (racy), only ever read through atomics.
    Racy(PageBuf<AtomicF64>, usize),
}

impl RecvMem {
    /// Receives posted at once.
    fn posted(&self) -> usize {
        match self {
            RecvMem::Slots(s) => s.len(),
            RecvMem::Racy(_, r) => *r,
        }
    }
}

/// Identity of a channel end on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wire {
    pub(crate) comm: ffi::MPI_Comm,
    pub(crate) peer: usize,
    pub(crate) data_tag: c_int,
    pub(crate) ctrl_tag: c_int,
}

impl Wire {
    /// Where the channel's messages travel.
    fn data(&self) -> Route {
        Route {
            comm: self.comm,
            peer: self.peer as c_int,
            tag: self.data_tag,
        }
    }

    /// Where the close announcements travel.
    fn ctrl(&self) -> Route {
        Route {
            tag: self.ctrl_tag,
            ..self.data()
        }
    }
}

/// A control message: `[ack, close]`. `ack` is the sender's acknowledgement count (see
/// [`Core::ack`]); `close` is 0 for a credit, `sent + 1` for the close announcement.
type Ctrl = [u64; 2];

/// Posted receives tested together, oldest first, in one `MPI_Testsome` ([`Core::test_recvs`]).
const TEST_GROUP: usize = 4;

/// Messages of at most this many bytes (header included) go with a blocking `MPI_Send`: far
/// below the eager limit of every Open MPI transport (4 KiB shared memory, 64 KiB TCP), they
/// leave at once into the receive the credit guarantees, and no request is left to test.
const SEND_NOW_BYTES: c_int = 1024;

/// Every buffer and request of one channel end, the credits and the close protocol. Methods
/// take the [`Requests`] counter from the world they belong to.
pub(crate) struct Core {
    wire: Wire,
    /// Keeps the set's communicator (`wire.comm`) alive while any request on it may be.
    _set: Rc<SetComm>,
    r: usize,
    /// Bytes per message, header included.
    bytes: c_int,
    send_bufs: Box<[PageBuf<f64>]>,
    send_reqs: Vec<ffi::MPI_Request>,
    send_free: Vec<usize>,
    /// A send slot taken off `send_free` and filled, not yet started.
    staged: Option<usize>,
    recv: RecvMem,
    /// How a slot's receive is posted.
    recv_kind: RecvKind,
    /// One receive per slot: persistent (`MPI_Recv_init`), started by `post`, freed by
    /// Drop; or an `MPI_Irecv` per post ([`RecvKind`]).
    recv_reqs: Vec<ffi::MPI_Request>,
    /// Receives started and not yet found complete (or cancelled).
    recv_active: Vec<bool>,
    /// The receive slots posted, oldest first: MPI matches the peer's messages to them in
    /// this order (messages from one sender on one tag do not overtake each other), so the
    /// front is the one the next message lands in.
    posted: VecDeque<usize>,
    /// Mailbox: receives that completed and that no poll has reported yet (a blocked send
    /// tests the receives for piggy-backed credits).
    arrived: Vec<usize>,
    /// Scratch for `MPI_Testsome` and `MPI_Waitsome`, and the requests [`Core::block`] waits
    /// for.
    group: Vec<ffi::MPI_Request>,
    done: Vec<usize>,
    indices: Vec<c_int>,
    /// Sends this end may have beyond the peer's acknowledgement: R + 1.
    window: u64,
    /// The highest acknowledgement of this end's messages the peer sent (in a message's header
    /// or a credit).
    peer_ack: u64,
    /// Mailbox: the peer's messages whose slot the channel gave back (re-posted).
    released: u64,
    /// The acknowledgement this end last sent, and how far ahead of it an explicit credit is
    /// due.
    told: u64,
    credit_every: u64,
    ctrl_in: Box<Ctrl>,
    ctrl_in_req: ffi::MPI_Request,
    peer_total: Option<u64>,
    ctrl_out: Box<Ctrl>,
    ctrl_out_req: ffi::MPI_Request,
    /// Messages sent by this end.
    sent: u64,
    /// Receives completed, and how many of them a poll reported to the channel.
    received: u64,
    reported: u64,
    closing: bool,
    closed: bool,
    /// A pairwise channel's (peer, tag), held live until the core goes (`pair.rs`).
    _pair: Option<PairTag>,
}

/// How a core posts its data receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvKind {
    /// One persistent request per slot, made once (`MPI_Recv_init`) and started per message:
    /// no request is allocated and freed per message.
    Persistent,
    /// An `MPI_Irecv` per post. For SimGrid's SMPI (3.32), where a cancelled persistent
    /// receive that had completed before reports the status of its earlier message, not
    /// "cancelled" (the cancel itself works), so a close could not tell a cancelled receive
    /// from a message that arrived; cancelled `MPI_Irecv`s report it as the standard says.
    PostedEachTime,
}

impl Core {
    /// Allocate the buffers and post every receive (data and control).
    pub(crate) fn new(
        wire: Wire,
        set: Rc<SetComm>,
        len: usize,
        r: usize,
        recv: RecvMem,
        recv_kind: RecvKind,
        reqs: &Requests,
    ) -> Result<Self, CommError> {
        let bytes = raw::byte_count(len + HDR)?;
        let slot = || PageBuf::new(len + HDR, || 0.0f64);
        let n_recv = recv.posted();
        let window = r as u64 + 1;
        let mut core = Core {
            wire,
            _set: set,
            r,
            bytes,
            send_bufs: (0..r).map(|_| slot()).collect(),
            send_reqs: vec![raw::request_null(); r],
            send_free: (0..r).rev().collect(),
            staged: None,
            recv,
            recv_kind,
            recv_reqs: vec![raw::request_null(); n_recv],
            recv_active: vec![false; n_recv],
            posted: VecDeque::with_capacity(n_recv),
            arrived: Vec::with_capacity(n_recv),
            group: Vec::with_capacity(n_recv + r + 1),
            done: Vec::with_capacity(n_recv + r + 1),
            indices: Vec::with_capacity(n_recv + r + 1),
            window,
            peer_ack: 0,
            released: 0,
            told: 0,
            credit_every: credit_every(window),
            ctrl_in: Box::new([0; 2]),
            ctrl_in_req: raw::request_null(),
            peer_total: None,
            ctrl_out: Box::new([0; 2]),
            ctrl_out_req: raw::request_null(),
            sent: 0,
            received: 0,
            reported: 0,
            closing: false,
            closed: false,
            _pair: None,
        };
        core.post_ctrl(reqs)?;
        for slot in 0..n_recv {
            if recv_kind == RecvKind::Persistent {
                core.init_recv(slot)?;
            }
            core.post(slot, reqs)?;
        }
        Ok(core)
    }

    pub(crate) fn peer(&self) -> usize {
        self.wire.peer
    }

    /// Keep a pairwise channel's (peer, tag) live until this core goes.
    pub(crate) fn hold(&mut self, tag: PairTag) {
        self._pair = Some(tag);
    }

    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// No request is active (the persistent receives may exist, inactive).
    fn quiescent(&self) -> bool {
        let null = raw::request_null();
        self.send_reqs.iter().all(|&q| q == null)
            && !self.recv_active.contains(&true)
            && self.ctrl_in_req == null
            && self.ctrl_out_req == null
    }
}

/// What a delivery means for an MPI end: where its two-sided receives land (the node-local
/// path lays its region out from [`Delivery`] alone).
pub trait MpiDelivery: Delivery {
    /// The receive memory of an end with messages of `len` elements (header included) and R.
    #[doc(hidden)]
    fn recv_mem(len_with_header: usize, r: usize) -> RecvMem;
}

impl MpiDelivery for Slots {
    /// R + 2 slots, each with its own buffer, pre-posted: the peer's window of R + 1 beside
    /// the message the channel holds ([`Core::ack`]).
    fn recv_mem(n: usize, r: usize) -> RecvMem {
        RecvMem::Slots((0..r + 2).map(|_| PageBuf::new(n, || 0.0f64)).collect())
    }
}

impl MpiDelivery for Shared {
    /// R + 1 receives posted into ONE buffer (the paper's racy MPI; the peer's window),
    /// read through atomics.
    fn recv_mem(n: usize, r: usize) -> RecvMem {
        RecvMem::Racy(PageBuf::new(n, || AtomicF64::new(0.0)), r + 1)
    }
}
