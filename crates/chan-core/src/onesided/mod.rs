//! The one-sided transport: a channel end over memory its peer writes, generic over how the
//! peer's memory is reached ([`PeerMem`]: OpenSHMEM's symmetric heap, an MPI shared-memory
//! window). [`OneSidedEnd`] carries Sync and Async channels (flagged slots) and Racy ones (one
//! buffer); the backend allocates the regions, tells each end where its peer's is, and frees
//! them collectively.
//!
//! ## Memory of a channel end
//! Each end owns an *inbound region*, written only by the peer (and read only by this rank):
//!
//! ```text
//! ctrl   8 words   [CLOSE] peer's total sent + 1 (0 while open)
//!                  [ACK]   how many of THIS end's messages the peer released, in order
//!                  [COUNT] racy: sends of the peer that landed in the view
//!                  [BEGUN] racy, landing buffers: the send the peer began putting last
//! flags  S words   mailbox: flag[k] = sequence number of the message in slot k
//! slots  S × W     mailbox: S = R + 1 slots of [stamp, payload…], W = 1 + len rounded up to 8
//!   or   W         racy: one buffer [stamp, payload…]
//!   or   2 × W     racy, over a backend whose puts may tear words: two landing buffers
//! ```
//!
//! ## Two paths to the peer
//! * **Mapped** (a peer on this node whose region [`PeerMem::map`] maps into this process):
//!   a send writes the peer's memory with loads and stores. A mailbox send fills the peer's
//!   released slot in place (the caller's pack is the only copy) and stores the flag with
//!   `Release`; acknowledgements are stores too; a racy send writes every word of the
//!   peer's buffer through atomics and its `COUNT` with `Release`.
//! * **Put** (a peer on another node, or every peer when the backend asks for it): the
//!   paper's put / fence / flag idiom. A send fills a staging buffer of its own, puts it into
//!   the peer's slot, fences ([`PeerMem::fence`]: the data is delivered before what follows)
//!   and puts the flag. A racy send over a backend whose puts may tear words puts into a
//!   landing buffer that the receiver copies into its view ("Whole words" below).
//!
//! `CLOSE` is a put on both paths, after a fence.
//!
//! ## Protocol
//! * **Mailbox send** of message `s` (1, 2, …) goes to slot `(s − 1) mod S`, `[stamp,
//!   payload]`, then flag `s`.
//! * **Mailbox receive**: `poll` reads `flag[(r) mod S]` for the next expected `r + 1`; a match
//!   means the whole message landed, and it is reported. Flags carry sequence numbers, so they
//!   never need clearing: a slot's flag only changes when the sender refills it, which it does
//!   only after the receiver released it.
//! * **Acknowledgement**: when the channel releases a slot, the receiver writes into the
//!   sender's `ACK` how many slots, in sequence order, it released. The sender refills slot
//!   `(s − 1) mod S` only once message `s − S` was released, so a slot is never written while
//!   the channel lends it or before a poll reported it. S = R + 1, one more than R, so R can be
//!   outstanding while the channel holds the message it lent last (chan-core's contract).
//! * **In flight**: a send is a blocking write into a slot the receiver released, so the
//!   message is "received into the channel" on arrival, as an MPI `Issend` matched by a posted
//!   receive is (acknowledgement on arrival): nothing stays in flight, and the flow control is
//!   the R + 1 slots. A poll therefore finds at most R + 1 new messages. No acknowledgement is
//!   written when a poll reports a message: the only ack is the release's, and Sync's release
//!   happens at the start of the next receive, off the critical path.
//! * **Staged send**: `stage_with` fills a buffer of this end's own, and `start_staged` sends
//!   it as above (copied into the mapped slot). A staged message counts as one more unreleased
//!   message for `can_send`, so the slot it goes to is released when it starts.
//! * **Racy**: write `[stamp, payload]` into the peer's one buffer with no flag to wait for,
//!   then the running send count into the peer's `COUNT`. The view reads the buffer through
//!   atomics. A send lands straight in the view, so nothing is ever in flight.
//! * **Close**: `begin_close` fences and then puts `sent + 1` into the peer's `CLOSE`: every
//!   earlier write of this end (data, flags, acks) is delivered before the peer sees it.
//!   `finish_close` waits for the peer's `CLOSE`; by the fence, everything the peer sent has
//!   then landed, so the messages no poll reported are counted (and their flags checked) as
//!   drained; then [`PeerMem::quiet`] completes this end's own puts. Neither half calls a
//!   collective. `Drop` without a close runs `begin_close` and never waits.
//!
//! ## Memory ordering
//! Words the peer writes (`ctrl`, `flags`, the racy buffer) are read only through atomics.
//! A flag is loaded with `Acquire`, so the reads of the slot that follow are not hoisted above
//! it; the sender's fence is the other half (the data is delivered before the flag), or on the
//! mapped path its `Release` store of the flag after the plain stores into the slot. The same
//! holds for `COUNT` and `CLOSE`. `ACK` is written after a `Release` fence and loaded with
//! `Acquire`: the receiver's reads of the slots it released come before the sender's writes
//! that refill them. On the put path, and for `CLOSE` on both, this rests on
//! [`PeerMem::put_word`] being one 8-byte store of an aligned word made by this thread after
//! the fence (or its network equivalent); the mapped path's stores are Rust atomics.
//!
//! ## Whole words
//! A racy view is read while the peer writes it, so each element must change from one whole
//! value to another (`AtomicF64Slice::from_raw`'s condition). A bulk copy (`memcpy`, `rep
//! movsb`) into a buffer another process reads can tear 8-byte words, so the mapped racy
//! sender writes every word through atomics. On the put path, a backend whose
//! [`PeerMem::put`] writes whole words ([`PeerMem::PUT_WHOLE_WORDS`]) puts into the view
//! itself. Any other (OpenSHMEM's bulk put) never puts into a buffer that is read as it
//! lands: a sequence lock over two landing buffers.
//! * Send `s` puts `s` into the receiver's `BEGUN`, fences, puts `[stamp, payload]` into
//!   landing buffer `(s − 1) mod 2`, fences and puts `s` into `COUNT`.
//! * A poll that finds `COUNT = c` new copies landing buffer `(c − 1) mod 2` out (atomic
//!   loads), then loads `BEGUN` after an `Acquire` fence. Send `c + 2`, the next to write
//!   that buffer, puts `BEGUN = c + 2` and fences before its data, so if any word copied
//!   came from it (or a later send), `BEGUN > c + 1` is seen, and the copy is dropped: the
//!   poll reports nothing and the next one copies the newest send again. Otherwise the copy
//!   is send `c`, whole. It goes into the spare one of two buffers of the receiver's own,
//!   which then becomes the view (a poll takes `&mut`, so no view is borrowed then).
//!
//! The sender pays one more word put and fence per send, the receiver one copy of each send
//! it reports (atomic loads, a word at a time), and a racy end holds the message four times
//! (two landing buffers, two views) where it held it once. With two landing buffers a copy
//! fails only when the peer begins two sends while it runs, and the peer's sends never wait
//! for the receiver. Both ends of a channel take the same path (the backends map a peer
//! either both ways or neither); a poll that finds the other path's marks (`BEGUN` written
//! or not) fails. Backends' docs give the measured costs.
//!
//! A peer can write this region until it has closed its end, so the region is freed only by
//! the backend, collectively, once every rank closed every end that shares its allocation.
//!
//! The phases are files of this module: the mapped paths (`paths.rs`), the send side and
//! acknowledgements (`send.rs`), the receive side (`recv.rs`), the close (`close.rs`); the
//! tests of the racy put path are in `test.rs`.

use crate::atomic::{AtomicF64Buf, AtomicF64Slice};
use crate::error::CommError;
use crate::mode::{Delivery, Shared as SharedBuf, Slots};
use crate::transport::{
    Arrival, CloseReport, Header, IdleStreak, MailboxTransport, RacyPoll, RacyTransport, Transport,
    WaitPolicy,
};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Acquire;

mod close;
mod paths;
mod recv;
mod send;
#[cfg(test)]
mod test;

use paths::{Direct, LandingCopy, Mapped};

/// How a [`OneSidedEnd`] reaches its peer's memory, and what keeps both ends' memory
/// allocated: a backend's part of the one-sided transport. Addresses of the peer's memory are
/// the backend's to define (OpenSHMEM: symmetric addresses; a shared window: this process's).
///
/// # Safety
/// An implementation promises, for addresses inside the peer's live region:
/// * [`put`](PeerMem::put) copies the bytes into the peer's memory, each aligned 8-byte word
///   whole when [`PUT_WHOLE_WORDS`](PeerMem::PUT_WHOLE_WORDS) is true;
///   [`put_word`](PeerMem::put_word) writes one aligned 8-byte word whole;
/// * [`fence`](PeerMem::fence) orders every put and store of this thread to the peer before
///   it ahead of the puts and atomic stores after it, as the peer sees them (it starts with a
///   `Release` fence; the transport writes nothing but `put_word`s and atomic stores after
///   one);
/// * [`quiet`](PeerMem::quiet) completes every put of this thread;
/// * [`map`](PeerMem::map) returns an address at which this process's loads and stores reach
///   the peer's word `p` (the end checks that a region maps in one piece);
/// * both ends' regions stay allocated while the value lives.
pub unsafe trait PeerMem {
    /// The backend's name in errors.
    const BACKEND: &'static str;

    /// True when [`put`](PeerMem::put) writes every aligned 8-byte word of its range whole,
    /// as one store the peer never sees half done: a racy send to an unmapped peer then puts
    /// straight into the peer's view. False when a put may tear words (a bulk copy): such
    /// racy ends get two landing buffers and the receiver copies (module docs, "Whole
    /// words").
    const PUT_WHOLE_WORDS: bool;

    /// How waiting loops wait.
    fn wait(&self) -> WaitPolicy;

    /// Between polls of a waiting loop (by default the wait policy's back-off).
    fn relax(&self, spins: u32) {
        self.wait().relax(spins);
    }

    /// The address in this process of the peer's word `p`, if it is mapped here.
    ///
    /// # Safety
    /// `p` lies inside the peer's live region.
    unsafe fn map(&self, p: *mut u64) -> Option<NonNull<u64>>;

    /// Copy `bytes` bytes from `src` to the peer's `dst`.
    ///
    /// # Safety
    /// `dst..dst + bytes` lies inside the peer's live region, in a part the peer reads only
    /// after the protocol says it landed, or through atomics; `src..src + bytes` is readable.
    unsafe fn put(&self, dst: *mut u8, src: *const u8, bytes: usize);

    /// Write the aligned word `v` at the peer's `dst`.
    ///
    /// # Safety
    /// `dst` is an aligned word of the peer's live region that the peer reads through atomics.
    unsafe fn put_word(&self, dst: *mut u64, v: u64);

    /// Order this thread's puts and stores to the peer before the ones after.
    fn fence(&self);

    /// Complete every put of this thread.
    fn quiet(&self);
}

/// An error of the backend `P`.
fn err<P: PeerMem>(call: &'static str, message: impl Into<String>) -> CommError {
    CommError::Backend {
        backend: P::BACKEND,
        call,
        message: message.into(),
    }
}

/// A `u64` of an inbound region, read (and on the mapped path written) through an atomic.
///
/// # Safety
/// `p` is aligned, stays allocated for `'a`, and Rust touches it only through atomics for `'a`
/// (the peer's puts write whole aligned words).
#[inline(always)]
unsafe fn atomic_at<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: the caller's conditions are those of AtomicU64::from_ptr.
    unsafe { AtomicU64::from_ptr(p) }
}

/// Words of the control block.
pub const CTRL_WORDS: usize = 8;
/// The word of a region (in its control block) where the peer's close announcement lands:
/// nonzero once the peer's end began its close, after which the peer writes the region no
/// more.
pub const CLOSE_WORD: usize = CLOSE;
const CLOSE: usize = 0;
const ACK: usize = 1;
const COUNT: usize = 2;
const BEGUN: usize = 3;

/// A landing copy that a send overtook is tried again at once this many times (each time
/// with the newest send) before the poll gives up for this call.
const COPY_TRIES: usize = 3;

/// Put path: messages up to this many elements are copied into the staging slot and put at
/// once; longer ones are put straight from the caller's slice, and the stamp by a second small
/// put. (A peer mapped into this process gets every message copied straight into its slot.)
const STAGE_MAX: usize = 256;

fn round8(w: usize) -> usize {
    w.div_ceil(8) * 8
}

/// The shape of one end's inbound region, in 8-byte words.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Values per message.
    pub len: usize,
    /// R: messages in flight.
    pub r: usize,
    /// One racy buffer instead of mailbox slots.
    pub racy: bool,
    /// Racy: two landing buffers, for a peer that puts with a backend whose puts may tear
    /// words ([`PeerMem::PUT_WHOLE_WORDS`] false); the first is the view of a mapped peer.
    pub landing: bool,
}

impl Shape {
    /// Receive slots: R + 1 (mailbox), one buffer or two landing buffers (racy).
    fn slots(&self) -> usize {
        match (self.racy, self.landing) {
            (true, true) => 2,
            (true, false) => 1,
            (false, _) => self.r + 1,
        }
    }
    /// Words per slot: stamp and payload, rounded up to a cache line.
    fn stride(&self) -> usize {
        round8(1 + self.len)
    }
    fn flags_words(&self) -> usize {
        if self.racy {
            0
        } else {
            round8(self.slots())
        }
    }
    /// Words of the whole region (a multiple of 8, so regions stay cache-line aligned).
    pub fn words(&self) -> Option<usize> {
        self.slots()
            .checked_mul(self.stride())?
            .checked_add(CTRL_WORDS + self.flags_words())
    }
}

/// Addresses of one inbound region: this end's own, or the peer's as its [`PeerMem`] addresses
/// it (the put targets).
#[derive(Debug, Clone, Copy)]
struct Region {
    ctrl: *mut u64,
    flags: *mut u64,
    slots: *mut u64,
}

impl Region {
    /// # Safety
    /// `ctrl` starts a region of `shape`.
    unsafe fn at(ctrl: *mut u64, shape: &Shape) -> Self {
        // SAFETY: (caller) every offset below stays inside the region.
        unsafe {
            let flags = ctrl.add(CTRL_WORDS);
            Region {
                ctrl,
                flags,
                slots: flags.add(shape.flags_words()),
            }
        }
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// `begin_close` ran: this end puts nothing more.
    Closing,
    /// `finish_close` ran.
    Closed,
}

/// One channel end: its inbound region, the peer's, and the counts of both protocols.
struct Core<P: PeerMem> {
    /// How the peer's memory is reached; it keeps that memory (and this end's) allocated.
    mem: P,
    peer: usize,
    shape: Shape,
    slots: usize,
    stride: usize,
    local: Region,
    remote: Region,
    /// Racy: the peer's buffer and `COUNT` mapped into this process, when they are.
    direct: Option<Direct>,
    /// Racy with landing buffers, the peer not mapped: the view the landing copies go into.
    copy: Option<LandingCopy>,
    /// Mailbox: the peer's region mapped into this process, when it is.
    mapped: Option<Mapped>,
    /// `[stamp, payload]` of the next send; allocated once.
    staging: Box<[f64]>,
    /// `[stamp, payload]` of a staged message (`stage_with`); allocated at the first stage.
    staged: Vec<f64>,
    /// A message is staged: it holds one of the R places (`can_send`).
    has_staged: bool,
    // Sending side.
    sent: u64,
    // Receiving side.
    reported: u64,
    released: u64,
    /// Slots released out of sequence order, waiting for the ones before them.
    release_mark: Box<[bool]>,
    last_ack: u64,
    /// Racy: sends counted by polls so far.
    racy_seen: u64,
    /// Polls in a row that found nothing (`WaitPolicy::idle`).
    idle: IdleStreak,
    state: State,
}

impl<P: PeerMem> Core<P> {
    /// An end to rank `peer` with this rank's inbound region of `shape` at `local` and the
    /// peer's at `remote` (an address `mem` puts to and maps). With `map`, the peer's region
    /// is written in place where `mem` maps it into this process; without, every send is a
    /// put (the between-nodes path).
    ///
    /// # Safety
    /// `local` starts a region of `shape.words()` words, 8-byte aligned and zeroed before
    /// the peer could write it, that stays allocated while `mem` lives and that nothing but
    /// this end and the peer's (through `mem`'s puts or mapped stores) touches; `remote` is
    /// the same of the peer's end, as `mem` addresses it.
    unsafe fn new(
        mem: P,
        peer: usize,
        shape: Shape,
        local: *mut u64,
        remote: *mut u64,
        map: bool,
    ) -> Self {
        // SAFETY: (caller) both are regions of `shape`.
        let (local, remote) = unsafe { (Region::at(local, &shape), Region::at(remote, &shape)) };
        // SAFETY: `remote` is the peer's region of `shape`, allocated while mem lives.
        let direct = (shape.racy && map)
            .then(|| unsafe { Direct::map(&mem, &remote, shape.len) })
            .flatten();
        // SAFETY: as for `direct`.
        let mapped = (!shape.racy && map)
            .then(|| unsafe { Mapped::map(&mem, &remote, &shape) })
            .flatten();
        // A peer that is not mapped puts into the landing buffers: the view is this end's own.
        let copy = (shape.racy && shape.landing && direct.is_none()).then(|| LandingCopy {
            views: [
                AtomicF64Buf::zeroed(shape.len),
                AtomicF64Buf::zeroed(shape.len),
            ],
            shown: 0,
        });
        // A mapped mailbox end never uses the staging buffer.
        let staging_len = if mapped.is_some() { 0 } else { 1 + shape.len };
        Core {
            mem,
            peer,
            slots: shape.slots(),
            stride: shape.stride(),
            shape,
            local,
            remote,
            direct,
            copy,
            mapped,
            staging: vec![0.0; staging_len].into_boxed_slice(),
            staged: Vec::new(),
            has_staged: false,
            sent: 0,
            reported: 0,
            released: 0,
            release_mark: vec![false; shape.slots()].into_boxed_slice(),
            last_ack: 0,
            racy_seen: 0,
            idle: IdleStreak::default(),
            state: State::Open,
        }
    }

    fn ctrl(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
        debug_assert!(i < CTRL_WORDS);
        // SAFETY: ctrl words lie in this end's region, allocated while self.mem lives; Rust
        // reads them only through atomics; the peer writes whole aligned words.
        unsafe { atomic_at(self.local.ctrl.add(i)) }
    }

    fn flag(&self, slot: usize) -> &std::sync::atomic::AtomicU64 {
        debug_assert!(slot < self.slots && !self.shape.racy);
        // SAFETY: as ctrl: flags of this end's region, atomics only.
        unsafe { atomic_at(self.local.flags.add(slot)) }
    }

    /// The word offset of slot `k` from the start of the slots.
    fn slot_off(&self, k: usize) -> usize {
        debug_assert!(k < self.slots);
        k * self.stride
    }

    fn check_open(&self, call: &'static str) -> Result<(), CommError> {
        if self.state == State::Open {
            Ok(())
        } else {
            Err(err::<P>(call, "the channel end is closing"))
        }
    }

    /// Messages this end sent whose slots the peer has not released: at most S.
    fn unreleased(&self) -> u64 {
        // Acquire: pairs with the receiver's Release fence before its ack, so the puts that
        // refill a released slot come after the receiver's reads of it.
        let released = self.ctrl(ACK).load(Acquire);
        self.sent.saturating_sub(released)
    }

    /// Always 0: a send lands in a released slot of the peer as it returns (see the module
    /// docs), so nothing is ever in flight.
    fn in_flight(&mut self) -> usize {
        0
    }

    /// True when the slot of the next message is released (mailbox), and that of a staged
    /// message after it; always (racy).
    fn can_send(&mut self) -> bool {
        self.shape.racy || self.unreleased() + u64::from(self.has_staged) < self.slots as u64
    }

    fn peer(&self) -> usize {
        self.peer
    }
    fn shape(&self) -> Shape {
        self.shape
    }
    fn sent(&self) -> u64 {
        self.sent
    }
}

/// One channel end over one-sided memory: [`OneSidedEnd<Slots, P>`] carries Sync and Async
/// channels (R + 1 flagged slots), `OneSidedEnd<Shared, P>` Racy ones (one buffer, no flags).
/// The send side and the close are the same code; the region's layout follows from `D`.
pub struct OneSidedEnd<D: Delivery, P: PeerMem> {
    core: Core<P>,
    _delivery: PhantomData<D>,
}

impl<D: Delivery, P: PeerMem> OneSidedEnd<D, P> {
    /// The layout of an end of this delivery, `len` values and R = `r`.
    pub fn shape(len: usize, r: usize) -> Shape {
        Shape {
            len,
            r,
            racy: D::SHARED,
            landing: D::SHARED && !P::PUT_WHOLE_WORDS,
        }
    }

    /// An end to rank `peer`, this rank's inbound region at `local`, the peer's at `remote`
    /// (as `mem` addresses it), both of [`OneSidedEnd::shape`]. With `map`, the peer's region
    /// is written in place where [`PeerMem::map`] maps it; without, every send is a put.
    ///
    /// # Safety
    /// `local` starts a region of the shape's [`Shape::words`] words, 8-byte aligned and
    /// zeroed before the peer could write it, that stays allocated while `mem` lives and that
    /// nothing but this end and the peer's end (through its `PeerMem`) touches; `remote`
    /// starts the same region of the peer's end, as `mem` addresses it.
    pub unsafe fn new(
        mem: P,
        peer: usize,
        len: usize,
        r: usize,
        local: *mut u64,
        remote: *mut u64,
        map: bool,
    ) -> Self {
        OneSidedEnd {
            // SAFETY: the caller's conditions, for this shape.
            core: unsafe { Core::new(mem, peer, Self::shape(len, r), local, remote, map) },
            _delivery: PhantomData,
        }
    }

    /// True when this end writes its peer's memory in place (the peer's region is mapped
    /// into this process), false when it puts.
    pub fn is_mapped(&self) -> bool {
        self.core.direct.is_some() || self.core.mapped.is_some()
    }

    /// How this end reaches its peer.
    pub fn mem(&self) -> &P {
        &self.core.mem
    }
}

impl<D: Delivery, P: PeerMem> Transport for OneSidedEnd<D, P> {
    fn in_flight(&mut self) -> Result<usize, CommError> {
        Ok(self.core.in_flight())
    }
    fn can_send(&mut self) -> Result<bool, CommError> {
        Ok(self.core.can_send())
    }
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        self.core.send_with(header, fill)
    }
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        self.core.send_from(header, data)
    }
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        self.core.stage_with(fill)
    }
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        self.core.start_staged(header)
    }
    fn peer_closed(&mut self) -> bool {
        self.core.peer_total().is_some()
    }
    /// [`PeerMem::relax`]: the wait is for a word the peer changes in local memory.
    fn relax(&mut self, spins: u32) {
        self.core.mem.relax(spins);
    }
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError> {
        debug_assert_eq!(
            sent,
            self.core.sent(),
            "the channel and its transport count alike"
        );
        self.core.begin_close();
        Ok(())
    }
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        self.core.finish_close()
    }
}

impl<D: Delivery, P: PeerMem> std::fmt::Debug for OneSidedEnd<D, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneSidedEnd")
            .field("backend", &P::BACKEND)
            .field("delivery", &std::any::type_name::<D>())
            .field("peer", &self.core.peer())
            .field("len", &self.core.shape().len)
            .field("max_in_flight", &self.core.shape().r)
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

impl<P: PeerMem> MailboxTransport for OneSidedEnd<Slots, P> {
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
        self.core.poll(out)
    }
    fn data(&self, slot: usize) -> &[f64] {
        self.core.data(slot)
    }
    fn release(&mut self, slot: usize) -> Result<(), CommError> {
        self.core.release(slot)
    }
    fn peer_sent_total(&mut self) -> Option<u64> {
        self.core.peer_total()
    }
}

impl<P: PeerMem> RacyTransport for OneSidedEnd<SharedBuf, P> {
    fn poll(&mut self) -> Result<RacyPoll, CommError> {
        self.core.poll_racy()
    }
    fn view(&self) -> &AtomicF64Slice {
        self.core.view()
    }
}
