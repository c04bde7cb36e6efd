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

use crate::env::SetComm;
use crate::pair::PairTag;
use crate::raw::{self, Requests, Route};
use chan_core::backend::{Arrival, CloseReport, Delivery, Header, RacyPoll, Shared, Slots};
use chan_core::{AtomicF64, AtomicF64Slice, CommError};
use mpi::ffi;
use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
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

    /// Post the receive for the peer's next control message (credit or close).
    fn post_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
        debug_assert!(self.ctrl_in_req == raw::request_null());
        let ctrl: *mut Ctrl = &mut *self.ctrl_in;
        // SAFETY: ctrl_in is a boxed [u64; 2] owned by the core: it does not move with the
        // core, is not read until the request completes (test_ctrl), and is freed only when
        // no request is active (Drop leaks the buffers otherwise).
        unsafe {
            raw::start(
                raw::Start::Recv,
                ctrl.cast(),
                16,
                self.wire.ctrl(),
                &mut self.ctrl_in_req,
                reqs,
            )
        }
    }

    /// Where slot `slot`'s receive lands.
    fn recv_ptr(&mut self, slot: usize) -> *mut c_void {
        match &mut self.recv {
            RecvMem::Slots(s) => s[slot].as_mut_ptr().cast(),
            // Interior mutability: the atomics' UnsafeCells make writes through this pointer,
            // derived from a shared reference, legitimate.
            RecvMem::Racy(b, _) => b.as_ptr().cast_mut().cast(),
        }
    }

    /// Make slot `slot`'s persistent receive (inactive).
    fn init_recv(&mut self, slot: usize) -> Result<(), CommError> {
        let ptr = self.recv_ptr(slot);
        let w = self.wire;
        // SAFETY: (1) the buffer is boxed and owned by the core, so it neither moves nor is
        // freed while the request exists: Drop frees the request first, and leaks the buffers
        // if a request is still active; (2) a mailbox slot is started only when the channel
        // does not hold it (new, or given back by `release`), so nothing reads it as plain
        // memory while its receive is active; (3) the racy buffer is only ever read through
        // atomics.
        unsafe { raw::init_recv(ptr, self.bytes, w.data(), &mut self.recv_reqs[slot]) }
    }

    /// Post receive `slot` (inactive before): start its persistent request, or an
    /// `MPI_Irecv` ([`RecvKind`]). Callers post a mailbox slot only when the channel does not
    /// hold it (new, or given back by `release`), and a racy slot at any time (its buffer is
    /// only read through atomics).
    fn post(&mut self, slot: usize, reqs: &Requests) -> Result<(), CommError> {
        assert!(!self.recv_active[slot], "posting an active receive");
        match self.recv_kind {
            // SAFETY: (1) recv_reqs[slot] was made by init_recv, whose contract holds for the
            // core's boxed buffers (see init_recv above), and it is inactive (asserted: the
            // flag is set here and cleared only when a test completes the request or a cancel
            // leaves it inactive); (2) while it is active nothing reads the buffer as plain
            // memory: a mailbox slot is posted only when the channel does not hold it (the
            // callers' rule above) and is read again only after a test reports it complete,
            // and a racy buffer is read through atomics only.
            RecvKind::Persistent => unsafe {
                raw::start_persistent(&mut self.recv_reqs[slot], reqs)?
            },
            RecvKind::PostedEachTime => {
                let (ptr, w) = (self.recv_ptr(slot), self.wire);
                // SAFETY: the same buffer rules as init_recv's (boxed, owned by the core,
                // neither moved nor freed while a request is active: Drop leaks the buffers
                // otherwise; not read as plain memory until a test completes the receive; the
                // racy buffer only through atomics); recv_reqs[slot] is null (the flag is
                // clear, and a completed or cancelled MPI_Irecv is nulled).
                unsafe {
                    raw::start(
                        raw::Start::Recv,
                        ptr,
                        self.bytes,
                        w.data(),
                        &mut self.recv_reqs[slot],
                        reqs,
                    )?
                }
            }
        }
        self.recv_active[slot] = true;
        if !self.closing {
            self.posted.push_back(slot);
        }
        Ok(())
    }

    /// This end's acknowledgement of the peer's messages, which the peer may send R + 1
    /// beyond. Racy: every receive that completed (each is re-posted at once). Mailbox: the
    /// messages a poll reported (taken delivery of), but at most one more than the channel
    /// gave back: a peer R + 1 ahead then still finds a posted receive among the R + 2 slots
    /// when the channel holds the message it lent last, and a poll finds at most R + 1 new.
    fn ack(&self) -> u64 {
        match self.recv {
            RecvMem::Racy(..) => self.received,
            RecvMem::Slots(_) => self.reported.min(self.released + 1),
        }
    }

    /// Take note of an acknowledgement from the peer (they only grow; a racy header read may
    /// be a newer message's, which is as true).
    fn note_ack(&mut self, ack: u64) {
        self.peer_ack = self.peer_ack.max(ack);
    }

    /// True while a message beside the staged one (if any) stays within the peer's window:
    /// the peer has a receive posted for it.
    fn has_credit(&self) -> bool {
        let staged = u64::from(self.staged.is_some());
        self.sent + staged < self.peer_ack + self.window
    }

    /// Send an explicit credit when this end's acknowledgement ran `credit_every` ahead of the
    /// last it sent. Messages flowing back carry it for free; this is for a one-way stream,
    /// or a receiver that sends nothing for a while. Never after the close began.
    ///
    /// A message larger than `SEND_NOW_BYTES` takes long enough that a credit is cheap beside
    /// it: then one goes as soon as the peer has used its whole window (every message of it has
    /// arrived), rather than idle the peer until `credit_every` are taken.
    fn maybe_credit(&mut self) -> Result<(), CommError> {
        let ack = self.ack();
        let due = ack >= self.told + self.credit_every
            || (self.bytes > SEND_NOW_BYTES
                && ack > self.told
                && self.received >= self.told + self.window);
        if self.closing || !due {
            return Ok(());
        }
        let credit: Ctrl = [ack, 0];
        // SAFETY: 16 bytes on the stack, read before MPI_Send returns; a message this small
        // leaves eagerly (SEND_NOW_BYTES), so no call of the peer's is waited for.
        unsafe { raw::send_now(credit.as_ptr().cast(), 16, self.wire.ctrl())? };
        self.told = ack;
        Ok(())
    }

    /// Collect completed sends into the free list; the number in flight (a staged slot is
    /// not).
    fn test_sends(&mut self, reqs: &Requests) -> Result<usize, CommError> {
        let staged = usize::from(self.staged.is_some());
        if self.send_free.len() + staged < self.r {
            raw::test_some(&mut self.send_reqs, &mut self.done, &mut self.indices, reqs)?;
            self.send_free.extend_from_slice(&self.done);
        }
        Ok(self.r - self.send_free.len() - staged)
    }

    pub(crate) fn in_flight(&mut self, reqs: &Requests) -> Result<usize, CommError> {
        self.maybe_credit()?;
        self.test_sends(reqs)
    }

    /// True when a message may start now. When not, the control receive has been tested
    /// (`MpiEnd::peer_closed` relies on it).
    pub(crate) fn can_send(&mut self, reqs: &Requests) -> Result<bool, CommError> {
        self.test_sends(reqs)?;
        if !self.send_free.is_empty() && self.has_credit() {
            return Ok(true);
        }
        // Look for the peer's acknowledgement (a credit, or the header of a message that
        // arrived and was not polled yet) and its close, in one MPI call.
        self.test_recvs(reqs)?;
        self.maybe_credit()?;
        Ok(!self.send_free.is_empty() && self.has_credit())
    }

    /// Take in what arrived: data messages, with the acknowledgements riding on their
    /// headers, and a control message (a credit or the close announcement). Mailbox: the
    /// completed slots wait in `arrived` for the next poll. Racy: re-posted at once.
    ///
    /// MPI matches the peer's messages to the receives in the order they were posted, so the
    /// oldest posted receives are the ones to test: each step tests up to `TEST_GROUP` of them
    /// and the control receive in one `MPI_Testsome`, and goes on to the next ones only when
    /// all of them had completed. `MPI_Testsome` calls MPI's progress only when it finds
    /// nothing complete, so a poll that takes in messages (a halo swap's one, a stream's batch
    /// short of a whole group) calls it not at all, and one that finds nothing calls it once,
    /// whatever R; testing every posted receive scanned R + 2 requests twice, and a separate
    /// control test made a second progress call. A receive that completes before older ones
    /// (MPI may complete matched receives in any order) is taken in when its group is tested.
    fn test_recvs(&mut self, reqs: &Requests) -> Result<(), CommError> {
        let null = raw::request_null();
        // Bounded: a racy receive is re-posted at the back, behind those still to test.
        for _ in 0..=self.recv_reqs.len() {
            let n = self.posted.len().min(TEST_GROUP);
            let mut group = [null; TEST_GROUP + 1];
            let mut slots = [0usize; TEST_GROUP];
            for i in 0..n {
                slots[i] = self.posted[i];
                group[i] = self.recv_reqs[slots[i]];
            }
            group[n] = self.ctrl_in_req;
            raw::test_some(&mut group[..=n], &mut self.done, &mut self.indices, reqs)?;
            // The control receive came back null if it completed; a persistent data receive
            // keeps its handle (inactive once complete), an MPI_Irecv comes back null.
            self.ctrl_in_req = group[n];
            for i in 0..n {
                self.recv_reqs[slots[i]] = group[i];
            }
            if self.done.contains(&n) && self.peer_total.is_none() {
                self.take_ctrl(reqs)?;
            }
            let mut completed = [0usize; TEST_GROUP];
            let mut taken = 0;
            for (i, &slot) in slots[..n].iter().enumerate() {
                if self.done.contains(&i) {
                    completed[taken] = slot;
                    taken += 1;
                }
            }
            // Out of the order, the completed ones (among the first n), before any is re-posted:
            // the oldest as a rule, else the others go back in front, in their order.
            if taken == 0 {
                // Nothing to take out.
            } else if (0..taken).all(|i| self.done.contains(&i)) {
                for _ in 0..taken {
                    self.posted.pop_front();
                }
            } else {
                for _ in 0..n {
                    self.posted.pop_front();
                }
                for i in (0..n).rev() {
                    if !self.done.contains(&i) {
                        self.posted.push_front(slots[i]);
                    }
                }
            }
            for &slot in &completed[..taken] {
                self.took_in(slot, reqs)?;
            }
            if n == 0 || taken < n {
                break;
            }
        }
        Ok(())
    }

    /// Receive `slot` completed: count it, take the acknowledgement its header carries, and
    /// keep it for the next poll (mailbox) or post it again at once (racy).
    fn took_in(&mut self, slot: usize, reqs: &Requests) -> Result<(), CommError> {
        self.recv_active[slot] = false;
        self.received += 1;
        let ack = self.header_ack(slot);
        self.note_ack(ack);
        match self.recv {
            RecvMem::Slots(_) => self.arrived.push(slot),
            RecvMem::Racy(..) => self.post(slot, reqs)?,
        }
        Ok(())
    }

    /// Block until at least one of this end's requests completes (`MPI_Waitsome`: a data
    /// receive, the control receive or a send), and take in what completed as the tests do.
    /// For waits that only this end's progress can end, where a poll has a cost of its own:
    /// under SimGrid's SMPI each test advances the simulated clock by a fixed cost and a poll
    /// loop runs the simulation's engine once per poll, so a wait that polled cost simulated
    /// time and wall time in proportion to its length. Returns at once when no request is
    /// active.
    pub(crate) fn block(&mut self, reqs: &Requests) -> Result<(), CommError> {
        let null = raw::request_null();
        let (n_recv, r) = (self.recv_reqs.len(), self.send_reqs.len());
        self.group.clear();
        self.group.extend_from_slice(&self.recv_reqs);
        self.group.extend_from_slice(&self.send_reqs);
        self.group.push(self.ctrl_in_req);
        // Inactive persistent receives must not be waited for (MPI ignores them, but the
        // bookkeeping below would count them): only the active ones go in.
        for slot in 0..n_recv {
            if !self.recv_active[slot] {
                self.group[slot] = null;
            }
        }
        let mut group = std::mem::take(&mut self.group);
        let waited = raw::wait_some(&mut group, &mut self.done, &mut self.indices, reqs);
        self.group = group;
        waited?;
        self.ctrl_in_req = self.group[n_recv + r];
        for s in 0..r {
            self.send_reqs[s] = self.group[n_recv + s];
        }
        let mut ctrl = false;
        for i in 0..self.done.len() {
            let k = self.done[i];
            if k < n_recv {
                // The receive came back null (MPI_Irecv) or inactive (persistent).
                self.recv_reqs[k] = self.group[k];
                self.posted.retain(|&p| p != k);
                self.took_in(k, reqs)?;
            } else if k < n_recv + r {
                self.send_free.push(k - n_recv);
            } else {
                ctrl = true;
            }
        }
        if ctrl && self.peer_total.is_none() {
            self.take_ctrl(reqs)?;
        }
        Ok(())
    }

    /// Take a free send slot. Only after `can_send` returned true.
    fn take_free(&mut self, call: &'static str) -> Result<usize, CommError> {
        if !self.has_credit() {
            return Err(raw::misuse(call, "no credit (call can_send first)"));
        }
        self.send_free
            .pop()
            .ok_or_else(|| raw::misuse(call, "no free send slot (call can_send first)"))
    }

    /// Fill a free send slot and start it. Only after `can_send` returned true.
    pub(crate) fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
        reqs: &Requests,
    ) -> Result<(), CommError> {
        let slot = self.take_free("send")?;
        fill(&mut self.send_bufs[slot][HDR..]);
        self.start(slot, header, reqs)
            .inspect_err(|_| self.send_free.push(slot))
    }

    /// Fill a free send slot (or refill the staged one) to start later. Only after `can_send`
    /// returned true, or while a slot is staged.
    pub(crate) fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        let slot = match self.staged {
            Some(s) => s,
            None => self.take_free("stage")?,
        };
        self.staged = Some(slot);
        // The slot is not free and not started: no request uses its buffer.
        fill(&mut self.send_bufs[slot][HDR..]);
        Ok(())
    }

    /// Start the staged slot.
    pub(crate) fn start_staged(
        &mut self,
        header: Header,
        reqs: &Requests,
    ) -> Result<(), CommError> {
        let slot = self
            .staged
            .take()
            .ok_or_else(|| raw::misuse("send_staged", "no message is staged"))?;
        // Refused, the message stays staged (the channel keeps it staged too).
        self.start(slot, header, reqs)
            .inspect_err(|_| self.staged = Some(slot))
    }

    /// Write the header into filled send slot `slot` (taken off the free list or staged) and
    /// start it. If MPI refuses the send, the slot is the caller's to give back.
    fn start(&mut self, slot: usize, header: Header, reqs: &Requests) -> Result<(), CommError> {
        // The staged slot's place was counted by `has_credit` when it was taken.
        debug_assert!(self.sent < self.peer_ack + self.window);
        let ack = self.ack();
        let buf = &mut self.send_bufs[slot];
        buf[0] = f64::from_bits(header.seq);
        buf[1] = f64::from_bits(header.stamp);
        buf[2] = f64::from_bits(ack);
        let w = self.wire;
        if self.bytes <= SEND_NOW_BYTES {
            // SAFETY: the slot's buffer holds `bytes` bytes and is read before MPI_Send
            // returns. The peer has a receive posted for this message (it is within the
            // peer's window, `has_credit`) and it leaves eagerly, so no call of the peer's is
            // waited for.
            unsafe { raw::send_now(buf.as_ptr().cast(), self.bytes, w.data())? };
            self.send_free.push(slot);
            self.sent += 1;
            self.told = ack;
            return Ok(());
        }
        // SAFETY: the slot was free (its previous send completed), the buffer is boxed and
        // owned by the core and is not written again until this send completes and
        // `test_sends` returns it to the free list. A standard-mode send: the peer has a
        // receive posted for it (it is within the peer's window, `has_credit`).
        let started = unsafe {
            raw::start(
                raw::Start::Send,
                buf.as_mut_ptr().cast(),
                self.bytes,
                w.data(),
                &mut self.send_reqs[slot],
                reqs,
            )
        };
        started?;
        self.sent += 1;
        self.told = ack;
        Ok(())
    }

    fn header(&self, slot: usize) -> Header {
        let (seq, stamp) = match &self.recv {
            RecvMem::Slots(s) => (s[slot][0].to_bits(), s[slot][1].to_bits()),
            RecvMem::Racy(b, _) => (b[0].load().to_bits(), b[1].load().to_bits()),
        };
        Header { seq, stamp }
    }

    /// The acknowledgement a received message carries.
    fn header_ack(&self, slot: usize) -> u64 {
        match &self.recv {
            RecvMem::Slots(s) => s[slot][2].to_bits(),
            RecvMem::Racy(b, _) => b[2].load().to_bits(),
        }
    }

    /// Mailbox: report every receive that completed since the last call.
    pub(crate) fn poll(
        &mut self,
        out: &mut Vec<Arrival>,
        reqs: &Requests,
    ) -> Result<(), CommError> {
        self.test_recvs(reqs)?;
        for i in 0..self.arrived.len() {
            let slot = self.arrived[i];
            out.push(Arrival {
                slot,
                header: self.header(slot),
            });
        }
        self.reported += self.arrived.len() as u64;
        self.arrived.clear();
        self.maybe_credit()
    }

    /// Mailbox: the payload of a completed, reported, not yet released slot.
    pub(crate) fn data(&self, slot: usize) -> &[f64] {
        match &self.recv {
            RecvMem::Slots(s) => &s[slot][HDR..],
            RecvMem::Racy(..) => &[],
        }
    }

    /// Mailbox: the channel gives a slot back; post it again.
    pub(crate) fn release(&mut self, slot: usize, reqs: &Requests) -> Result<(), CommError> {
        if self.closing {
            // begin_close already re-posted every slot the channel held.
            return Ok(());
        }
        self.post(slot, reqs)?;
        self.released += 1;
        self.maybe_credit()
    }

    /// Racy: receives that completed since the last call (re-posted at once), and the stamp in
    /// the buffer's header now.
    pub(crate) fn poll_racy(&mut self, reqs: &Requests) -> Result<RacyPoll, CommError> {
        self.test_recvs(reqs)?;
        let n = self.received - self.reported;
        self.reported = self.received;
        self.maybe_credit()?;
        Ok(RacyPoll {
            arrived: n,
            stamp: if n > 0 { self.header(0).stamp } else { 0 },
        })
    }

    /// Racy: the receive buffer's payload, read through atomics.
    pub(crate) fn view(&self) -> &AtomicF64Slice {
        match &self.recv {
            RecvMem::Racy(b, _) => AtomicF64Slice::from_atomics(&b[HDR..]),
            RecvMem::Slots(_) => AtomicF64Slice::from_atomics(&[]),
        }
    }

    /// Take in every control message that arrived: credits, then at most one close
    /// announcement (the last message on the control tag).
    fn test_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
        while self.peer_total.is_none() && raw::test_one(&mut self.ctrl_in_req, reqs)? {
            self.take_ctrl(reqs)?;
        }
        Ok(())
    }

    /// The control receive completed: take in its message, and post the next receive unless
    /// it was the close announcement.
    fn take_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
        let [ack, close] = *self.ctrl_in;
        self.note_ack(ack);
        if close > 0 {
            self.peer_total = Some(close - 1);
            Ok(())
        } else {
            self.post_ctrl(reqs)
        }
    }

    /// The peer's announced total if a test of the control receive found its close message.
    pub(crate) fn peer_total_seen(&self) -> Option<u64> {
        self.peer_total
    }

    /// First half of the close: announce this end's count and take every receive slot back from
    /// the channel (posted again, so every send the peer has outstanding can match).
    pub(crate) fn begin_close(&mut self, reqs: &Requests) -> Result<(), CommError> {
        if self.closing {
            return Ok(());
        }
        self.closing = true;
        // A staged message is discarded: never started, it is not one of the `sent`.
        if let Some(slot) = self.staged.take() {
            self.send_free.push(slot);
        }
        *self.ctrl_out = [self.ack(), self.sent + 1];
        let w = self.wire;
        let ctrl: *mut Ctrl = &mut *self.ctrl_out;
        // SAFETY: ctrl_out is a boxed [u64; 2] owned by the core, written above and never
        // again; it lives until the request completes (Drop leaks the buffers otherwise).
        unsafe {
            raw::start(
                raw::Start::Send,
                ctrl.cast(),
                16,
                w.ctrl(),
                &mut self.ctrl_out_req,
                reqs,
            )?;
        }
        // Receives that completed and were never reported count as arrived (drained: no poll
        // reported them); then every slot is posted again, so each send the peer has
        // outstanding can match.
        self.test_recvs(reqs)?;
        self.arrived.clear();
        // From here on `step_close` tests every receive: the order is no longer kept.
        self.posted.clear();
        for slot in 0..self.recv_reqs.len() {
            if !self.recv_active[slot] {
                self.post(slot, reqs)?;
            }
        }
        Ok(())
    }

    /// One non-blocking step of the second half of the close; true once nothing is left.
    pub(crate) fn step_close(&mut self, reqs: &Requests) -> Result<bool, CommError> {
        debug_assert!(self.closing);
        if self.closed {
            return Ok(true);
        }
        self.test_sends(reqs)?;
        self.test_ctrl(reqs)?;
        raw::test_some(&mut self.recv_reqs, &mut self.done, &mut self.indices, reqs)?;
        self.received += self.done.len() as u64;
        for i in 0..self.done.len() {
            let slot = self.done[i];
            self.recv_active[slot] = false;
            if self.peer_total.is_none_or(|t| self.received < t) {
                self.post(slot, reqs)?;
            }
        }
        if let Some(total) = self.peer_total {
            if self.received > total {
                return Err(raw::misuse(
                    "close",
                    format!(
                        "peer rank {} announced {total} messages but {} arrived",
                        self.wire.peer, self.received
                    ),
                ));
            }
            if self.received == total {
                for slot in 0..self.recv_reqs.len() {
                    if !self.recv_active[slot] {
                        continue;
                    }
                    let cancelled = raw::cancel_recv(&mut self.recv_reqs[slot], reqs)?;
                    self.recv_active[slot] = false;
                    if !cancelled {
                        return Err(raw::misuse(
                            "close",
                            format!(
                                "a message from rank {} arrived after all {total} it announced",
                                self.wire.peer
                            ),
                        ));
                    }
                }
            }
        }
        raw::test_one(&mut self.ctrl_out_req, reqs)?;
        let null = raw::request_null();
        self.closed = self.peer_total == Some(self.received)
            && self.send_free.len() == self.r
            && self.ctrl_out_req == null
            && !self.recv_active.contains(&true);
        Ok(self.closed)
    }

    /// What the close found: the peer's total and how many arrived that no poll reported.
    pub(crate) fn report(&self) -> CloseReport {
        CloseReport {
            peer_sent: self.peer_total.unwrap_or(0),
            drained: self.received - self.reported,
        }
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

/// How far this end's acknowledgement runs ahead of the last one it sent before it sends an
/// explicit credit, for a peer window of `window` = R + 1 messages: half the window (a
/// streaming peer keeps sending from the other half while the credit travels), and at least 2
/// (in a halo swap each message acknowledges the peer's previous one, one behind: that must
/// not cost a credit per message), but never more than the window. A credit is then certain
/// to go when the peer waits for one: the peer has the whole window unacknowledged, and once
/// the channel took all of it ([`Core::ack`] counts the message it lends last as
/// acknowledged) this end's acknowledgement is `window` ahead of the last it sent.
fn credit_every(window: u64) -> u64 {
    window.div_ceil(2).max(2).min(window)
}

impl Drop for Core {
    fn drop(&mut self) {
        if self.quiescent() {
            // Every persistent receive is inactive: free it before its buffer goes. MPI is
            // still initialised (cores go before the world's shutdown finalizes, as SetComm
            // notes), and the communicator lives until the fields drop after this.
            for req in &mut self.recv_reqs {
                // SAFETY: quiescent() checked that no receive is active; the buffers are
                // fields of self and drop after this loop.
                if let Err(e) = unsafe { raw::free_request(req) } {
                    eprintln!(
                        "aiac (mpi): freeing a receive of rank {}: {e}",
                        self.wire.peer
                    );
                }
            }
        } else {
            // Only after an MPI error: a request may still write into these buffers, so they
            // must outlive it. Leaking is the only safe choice left.
            eprintln!(
                "aiac (mpi): channel to rank {} dropped with MPI requests active after an error; \
                 leaking its buffers",
                self.wire.peer
            );
            std::mem::forget(std::mem::take(&mut self.send_bufs));
            std::mem::forget(std::mem::replace(
                &mut self.recv,
                RecvMem::Slots(Box::default()),
            ));
            std::mem::forget(std::mem::take(&mut self.ctrl_in));
            std::mem::forget(std::mem::take(&mut self.ctrl_out));
        }
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
