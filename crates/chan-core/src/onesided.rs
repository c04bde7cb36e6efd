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
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

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

/// A racy peer's buffer (`[stamp, payload…]`) and `COUNT` word as this process's addresses
/// ([`PeerMem::map`]), written with atomic stores.
#[derive(Debug, Clone, Copy)]
struct Direct {
    buf: *mut u64,
    /// Payload words after the stamp.
    len: usize,
    count: *mut u64,
}

impl Direct {
    /// The peer's racy buffer of `1 + len` words at `remote.slots` and its `COUNT`, if every
    /// word of both is mapped here contiguously.
    ///
    /// # Safety
    /// `remote` is the peer's region of a racy shape of `len`, allocated while `mem` lives.
    unsafe fn map<P: PeerMem>(mem: &P, remote: &Region, len: usize) -> Option<Self> {
        // SAFETY: (caller) the buffer's first and last words and COUNT lie inside the region.
        let (buf, last, count) = unsafe {
            (
                mem.map(remote.slots)?,
                mem.map(remote.slots.add(len))?,
                mem.map(remote.ctrl.add(COUNT))?,
            )
        };
        // Mappings are of whole segments; check that the buffer is one aligned piece anyway.
        let one_piece = buf.as_ptr().wrapping_add(len) == last.as_ptr();
        (one_piece && buf.as_ptr().is_aligned() && count.as_ptr().is_aligned()).then_some(Direct {
            buf: buf.as_ptr(),
            len,
            count: count.as_ptr(),
        })
    }

    /// Write `[stamp, data…]` into the peer's buffer, then publish send `seq`.
    fn write(&self, stamp: u64, data: &[f64], seq: u64) {
        // SAFETY: Direct::map found the peer's buffer of 1 + len words and its COUNT word
        // mapped into this process, 8-byte aligned; they stay mapped while the core holding
        // self lives (its PeerMem keeps them allocated), and every writer (this end) and reader
        // (the peer's view and poll) of them uses atomics.
        let (stamp_word, payload, count) = unsafe {
            (
                atomic_at(self.buf),
                AtomicF64Slice::from_raw(self.buf.add(1).cast::<f64>(), self.len),
                atomic_at(self.count),
            )
        };
        stamp_word.store(stamp, Relaxed);
        // Whole words (see the module docs); panics unless data has the channel's length.
        payload.store_from(data);
        // Release: the peer's Acquire load of COUNT sees every word above.
        count.store(seq, Release);
    }
}

/// A racy receiver's own views, when sends land in landing buffers (module docs, "Whole
/// words"): `views[shown]` is what the channel reads; a poll copies the newest send into the
/// other and shows it once the copy is known whole. Polls take `&mut self`, so no view is
/// borrowed while one is filled.
struct LandingCopy {
    views: [AtomicF64Buf; 2],
    shown: usize,
}

/// A mailbox peer's region as this process's addresses ([`PeerMem::map`]: a rank on this
/// node). A
/// send then fills the peer's released slot in place, one copy, where the put path fills the
/// staging buffer and the put copies it again; the flag is a release store, and so is the
/// acknowledgement of the peer's messages this end released.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    /// The peer's `ACK` word.
    ack: *mut u64,
    flags: *mut u64,
    slots: *mut u64,
}

impl Mapped {
    /// The peer's region (from its first control word to the last word of its last slot), if
    /// every word is mapped here contiguously and 8-byte aligned.
    ///
    /// # Safety
    /// `remote` is the peer's region of a mailbox `shape`, allocated while `mem` lives.
    unsafe fn map<P: PeerMem>(mem: &P, remote: &Region, shape: &Shape) -> Option<Self> {
        let words = shape.words()?;
        // SAFETY: (caller) the first control word and the last slot word lie inside the region.
        let (first, last) =
            unsafe { (mem.map(remote.ctrl)?, mem.map(remote.ctrl.add(words - 1))?) };
        // Mappings are of whole segments; check that the region is one piece anyway.
        let ctrl = first.as_ptr();
        (ctrl.is_aligned() && ctrl.wrapping_add(words - 1) == last.as_ptr()).then(|| Mapped {
            ack: ctrl.wrapping_add(ACK),
            flags: ctrl.wrapping_add(CTRL_WORDS),
            slots: ctrl.wrapping_add(CTRL_WORDS + shape.flags_words()),
        })
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

    /// The peer's address of the slot message `seq` goes to.
    fn remote_slot(&self, seq: u64) -> *mut u64 {
        // Racy: the one buffer, or landing buffer (seq - 1) mod 2.
        let k = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY: slot k of the peer's region, inside the set (see Core::new).
        unsafe { self.remote.slots.add(self.slot_off(k)) }
    }

    /// Racy into landing buffers: announce send `seq` in the peer's `BEGUN`, ordered before
    /// any of its data (module docs, "Whole words").
    fn begin_landing(&self, seq: u64) {
        if self.copy.is_some() {
            // SAFETY: the peer's BEGUN word, read there through atomics only.
            unsafe { self.mem.put_word(self.remote.ctrl.add(BEGUN), seq) };
            self.mem.fence();
        }
    }

    /// After the message's words are put: order them before its flag or count, and publish.
    fn publish(&mut self, seq: u64) {
        self.mem.fence();
        let target = if self.shape.racy {
            // SAFETY: the peer's COUNT word, read there through atomics only.
            unsafe { self.remote.ctrl.add(COUNT) }
        } else {
            let k = ((seq - 1) % self.slots as u64) as usize;
            // SAFETY: flag k of the peer's region, read there through atomics only.
            unsafe { self.remote.flags.add(k) }
        };
        // SAFETY: see the two cases above.
        unsafe { self.mem.put_word(target, seq) };
        self.sent = seq;
    }

    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        self.check_open("send")?;
        debug_assert!(self.can_send(), "send only after can_send");
        if let Some(m) = self.mapped {
            return self.send_mapped(m, header, fill);
        }
        fill(&mut self.staging[1..]);
        self.send_buffered(header, false)
    }

    /// Mailbox with the peer mapped: fill the slot of the next message on the peer in place,
    /// stamp it, and publish its flag. Refused unless the peer released that slot (the
    /// channel calls `can_send` first, so only a misuse is refused).
    fn send_mapped<F: FnOnce(&mut [f64])>(
        &mut self,
        m: Mapped,
        header: Header,
        fill: F,
    ) -> Result<(), CommError> {
        let seq = self.sent + 1;
        debug_assert_eq!(header.seq, seq, "the channel and its transport count alike");
        // Checked in every build: the slot below is written as plain memory.
        if self.unreleased() >= self.slots as u64 {
            return Err(err::<P>("send", "no released slot (call can_send first)"));
        }
        let k = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY: slot k of the peer's region, 1 + len words inside its stride, mapped into
        // this process (Mapped::map). The peer's region stays allocated, and mapped, while
        // this end's PeerMem lives (its contract: backends free regions only collectively,
        // once every end that shares them is closed). The peer released the
        // slot (checked above; the Acquire load of ACK in `unreleased` orders the peer's
        // reads of it before these writes) and reads it again only after the flag below
        // says `seq`: nothing else touches it during this borrow.
        let slot = unsafe {
            std::slice::from_raw_parts_mut(
                m.slots.add(self.slot_off(k)).cast::<f64>(),
                1 + self.shape.len,
            )
        };
        fill(&mut slot[1..]);
        slot[0] = f64::from_bits(header.stamp);
        // SAFETY: flag k of the peer's region, mapped (above) and aligned; the peer reads it
        // only through atomics.
        let flag = unsafe { atomic_at(m.flags.add(k)) };
        // Release: the slot's words above are seen before the flag (pairs with the Acquire
        // load in the peer's `poll`).
        flag.store(seq, Release);
        self.sent = seq;
        Ok(())
    }

    /// Fill the staged message (replacing one staged before). Only after `can_send` returned
    /// true, or while a message is staged.
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
        self.check_open("stage")?;
        debug_assert!(
            self.has_staged || self.can_send(),
            "stage only after can_send"
        );
        self.staged.resize(1 + self.shape.len, 0.0);
        fill(&mut self.staged[1..]);
        self.has_staged = true;
        Ok(())
    }

    /// Send the staged message.
    fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        self.check_open("send")?;
        if !std::mem::take(&mut self.has_staged) {
            return Err(err::<P>("send_staged", "no message is staged"));
        }
        // Refused (a mapped slot not released), the message stays staged.
        self.send_buffered(header, true)
            .inspect_err(|_| self.has_staged = true)
    }

    /// Send the message whose payload is in the staging buffer, or in the staged one: the stamp
    /// goes into word 0 and the whole buffer to the peer.
    fn send_buffered(&mut self, header: Header, staged: bool) -> Result<(), CommError> {
        let seq = self.sent + 1;
        debug_assert_eq!(header.seq, seq, "the channel and its transport count alike");
        debug_assert!(self.shape.racy || self.unreleased() < self.slots as u64);
        if let Some(m) = self.mapped {
            debug_assert!(staged, "send_with fills a mapped peer's slot itself");
            // Taken out and put back: no allocation.
            let buf = std::mem::take(&mut self.staged);
            let sent = self.send_mapped(m, header, |dst| dst.copy_from_slice(&buf[1..]));
            self.staged = buf;
            return sent;
        }
        let (dst, direct) = (self.remote_slot(seq), self.direct);
        let buf = if staged {
            &mut self.staged[..]
        } else {
            &mut self.staging[..]
        };
        buf[0] = f64::from_bits(header.stamp);
        if let Some(d) = direct {
            d.write(header.stamp, &buf[1..], seq);
            self.sent = seq;
            return Ok(());
        }
        self.begin_landing(seq);
        let buf = if staged {
            &self.staged[..]
        } else {
            &self.staging[..]
        };
        // SAFETY: the slot on the peer is free (its previous message was released: can_send,
        // which kept a place for a staged message; or racy, where the view is read through
        // atomics only, or a landing buffer read through atomics and copied only when whole)
        // and holds 1 + len words; both buffers hold 1 + len f64.
        unsafe { self.mem.put(dst.cast(), buf.as_ptr().cast(), buf.len() * 8) };
        self.publish(seq);
        Ok(())
    }

    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        if data.len() <= STAGE_MAX && self.direct.is_none() {
            return self.send_with(header, |b| b.copy_from_slice(data));
        }
        self.check_open("send")?;
        let seq = self.sent + 1;
        debug_assert_eq!(header.seq, seq, "the channel and its transport count alike");
        debug_assert_eq!(data.len(), self.shape.len);
        debug_assert!(self.can_send(), "send only after can_send");
        if let Some(d) = self.direct {
            d.write(header.stamp, data, seq);
            self.sent = seq;
            return Ok(());
        }
        if let Some(m) = self.mapped {
            return self.send_mapped(m, header, |dst| dst.copy_from_slice(data));
        }
        let dst = self.remote_slot(seq);
        self.begin_landing(seq);
        // SAFETY: as in send_with: a free slot of 1 + len words on the peer; the payload goes
        // to words 1.., the stamp to word 0; `data` holds len f64.
        unsafe {
            self.mem
                .put(dst.add(1).cast(), data.as_ptr().cast(), data.len() * 8);
            self.mem.put_word(dst, header.stamp);
        }
        self.publish(seq);
        Ok(())
    }

    /// Tell the sender how many of its messages' slots this end released, if that changed.
    fn send_ack(&mut self) {
        if self.released != self.last_ack && self.state == State::Open {
            // Release: this end's reads of the released slots come before the ack, so the
            // sender's next writes to them cannot overtake those reads (on a weakly ordered
            // CPU the put on one node is a plain store). Pairs with the Acquire load of ACK in
            // `unreleased`.
            std::sync::atomic::fence(Release);
            if let Some(m) = self.mapped {
                // SAFETY: the peer's ACK word, mapped here and aligned (Mapped::map) while
                // this end is open (see send_mapped), read there through atomics only.
                // Relaxed after the Release fence above.
                unsafe { atomic_at(m.ack) }.store(self.released, Relaxed);
            } else {
                // SAFETY: the peer's ACK word, read there through atomics only.
                unsafe { self.mem.put_word(self.remote.ctrl.add(ACK), self.released) };
            }
            self.last_ack = self.released;
        }
    }

    /// Mailbox: report every message that landed since the last poll.
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
        self.check_open("poll")?;
        let before = self.reported;
        loop {
            let seq = self.reported + 1;
            let k = ((seq - 1) % self.slots as u64) as usize;
            // Acquire: pairs with the sender's fence between its data put and this flag put;
            // the slot reads below happen after the flag was seen.
            if self.flag(k).load(Acquire) != seq {
                break;
            }
            // SAFETY: slot k's stamp word; the message is complete (flag seen) and the sender
            // writes the slot again only after this end releases it.
            let stamp = unsafe { *self.local.slots.add(self.slot_off(k)) };
            out.push(Arrival {
                slot: k,
                header: Header { seq, stamp },
            });
            self.reported = seq;
            if self.reported - before == self.slots as u64 {
                break;
            }
        }
        if self.reported == before {
            // Nothing new: let a sender that shares this core run.
            self.idle.empty(self.mem.wait());
        } else {
            self.idle.found();
        }
        Ok(())
    }

    /// Mailbox: the payload of a reported, unreleased slot.
    fn data(&self, slot: usize) -> &[f64] {
        debug_assert!(slot < self.slots);
        // SAFETY: the slot's payload, len f64 inside this end's region; it was reported by
        // poll and is not released while the returned borrow of self lives (release takes
        // &mut self), so the sender does not write it meanwhile.
        unsafe {
            std::slice::from_raw_parts(
                self.local.slots.add(self.slot_off(slot) + 1).cast::<f64>(),
                self.shape.len,
            )
        }
    }

    /// Mailbox: the channel gives a slot back.
    fn release(&mut self, slot: usize) -> Result<(), CommError> {
        if self.state != State::Open {
            // After begin_close the sender puts no more; nothing to acknowledge.
            return Ok(());
        }
        if slot >= self.slots || self.release_mark[slot] {
            return Err(err::<P>("release", format!("slot {slot} is not held")));
        }
        self.release_mark[slot] = true;
        // Advance over every slot released, in sequence order.
        while self.released < self.reported {
            let k = (self.released % self.slots as u64) as usize;
            if !self.release_mark[k] {
                break;
            }
            self.release_mark[k] = false;
            self.released += 1;
        }
        self.send_ack();
        Ok(())
    }

    /// Racy: sends that landed since the last poll, and the stamp in the buffer now.
    fn poll_racy(&mut self) -> Result<RacyPoll, CommError> {
        // Acquire: pairs with the sender's fence before its COUNT put.
        let mut count = self.ctrl(COUNT).load(Acquire);
        if count == self.racy_seen {
            // Nothing new: let a sender that shares this core run.
            self.idle.empty(self.mem.wait());
            return Ok(RacyPoll::default());
        }
        self.idle.found();
        let stamp = if self.copy.is_some() {
            let mut tries = 0;
            loop {
                match self.copy_landed(count)? {
                    Some(stamp) => break stamp,
                    None if tries + 1 < COPY_TRIES => {
                        tries += 1;
                        count = self.ctrl(COUNT).load(Acquire);
                    }
                    // The peer keeps overtaking the copy: the next poll tries again.
                    None => return Ok(RacyPoll::default()),
                }
            }
        } else {
            if self.shape.landing && self.ctrl(BEGUN).load(Relaxed) != 0 {
                return Err(self.paths_differ());
            }
            // SAFETY: the racy buffer's stamp word, written by the peer's puts; atomics only.
            unsafe { atomic_at(self.local.slots) }.load(Relaxed)
        };
        let arrived = count.saturating_sub(self.racy_seen);
        self.racy_seen = count;
        Ok(RacyPoll { arrived, stamp })
    }

    /// Racy with landing buffers: copy send `count` (whose `COUNT` was loaded with Acquire)
    /// out of its landing buffer, and into the view if no later send began writing that
    /// buffer meanwhile; its stamp, or None when one did.
    fn copy_landed(&mut self, count: u64) -> Result<Option<u64>, CommError> {
        debug_assert!(count > 0 && self.shape.landing);
        let k = ((count - 1) % self.slots as u64) as usize;
        // SAFETY: landing buffer k, 1 + len words inside this end's region, allocated while
        // self.mem lives; the peer's puts write it at any time, and Rust reads it only through
        // atomics (here).
        let landed = unsafe {
            AtomicF64Slice::from_raw(
                self.local.slots.add(self.slot_off(k)).cast::<f64>(),
                1 + self.shape.len,
            )
        };
        let (stamp, payload) = landed.split_at(1);
        let Some(c) = self.copy.as_mut() else {
            return Ok(None);
        };
        payload.load_into(c.views[1 - c.shown].as_mut_f64());
        let stamp = stamp.load(0).to_bits();
        // Acquire: the loads above come before the BEGUN load below. A word of send c + 2 or
        // later among them means its BEGUN put, fenced before its data, is seen below.
        std::sync::atomic::fence(Acquire);
        let begun = self.ctrl(BEGUN).load(Relaxed);
        if begun == 0 {
            // COUNT says a send landed, yet none began: the peer writes in place.
            return Err(self.paths_differ());
        }
        if begun > count + 1 {
            return Ok(None);
        }
        if let Some(c) = self.copy.as_mut() {
            c.shown = 1 - c.shown;
        }
        Ok(Some(stamp))
    }

    /// The error of a racy end whose peer writes its region the other way (in place where
    /// this end expects puts into landing buffers, or the reverse).
    fn paths_differ(&self) -> CommError {
        err::<P>(
            "recv",
            format!(
                "peer rank {} and this rank disagree on whether they share memory: it writes \
                 the racy view {}",
                self.peer,
                if self.copy.is_some() {
                    "in place, where this end expects puts"
                } else {
                    "with puts, where this end expects it to write in place"
                }
            ),
        )
    }

    /// Racy: the buffer's payload through atomics (this end's own copy with landing buffers).
    fn view(&self) -> &AtomicF64Slice {
        if let Some(c) = &self.copy {
            return &c.views[c.shown];
        }
        // SAFETY: (1) len f64 after the stamp word, aligned, inside this end's region for as
        // long as self (its PeerMem keeps the region allocated); (2) Rust reads and writes this memory
        // only through atomics (this view, the stamp load, and the peer's Direct::write); a
        // peer on another node puts whole aligned words (module docs, "Whole words").
        unsafe { AtomicF64Slice::from_raw(self.local.slots.add(1).cast::<f64>(), self.shape.len) }
    }

    /// The peer's announced total, once its close arrived.
    fn peer_total(&self) -> Option<u64> {
        // Acquire: pairs with the peer's fence before its CLOSE put, so every message it sent
        // is visible once this is.
        let v = self.ctrl(CLOSE).load(Acquire);
        v.checked_sub(1)
    }

    /// Announce this end's total and put nothing more. Never waits.
    fn begin_close(&mut self) {
        if self.state != State::Open {
            return;
        }
        self.state = State::Closing;
        // A staged message is discarded: never started, it is not one of the `sent`.
        self.has_staged = false;
        self.mem.fence();
        // SAFETY: the peer's CLOSE word, read there through atomics only.
        unsafe {
            self.mem
                .put_word(self.remote.ctrl.add(CLOSE), self.sent + 1)
        };
    }

    /// Wait for the peer's announcement, count what it sent that no poll reported, complete
    /// this end's puts.
    fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        if self.state != State::Closing {
            return Err(err::<P>("close", "finish_close without begin_close"));
        }
        let mut spins = 0u32;
        let total = loop {
            if let Some(t) = self.peer_total() {
                break t;
            }
            self.mem.relax(spins);
            spins = spins.saturating_add(1);
        };
        self.state = State::Closed;
        let seen = if self.shape.racy {
            self.racy_seen
        } else {
            self.reported
        };
        let drained = total.checked_sub(seen).ok_or_else(|| {
            err::<P>(
                "close",
                format!(
                    "peer rank {} announced {total} messages but {seen} arrived",
                    self.peer
                ),
            )
        })?;
        // Every message the peer sent landed before its CLOSE (its fence): check it. Acquire:
        // pairs with the peer's fence before each flag / COUNT put, as in poll.
        let landed = if self.shape.racy {
            self.ctrl(COUNT).load(Acquire) == total
        } else {
            drained <= self.slots as u64
                && (seen + 1..=total).all(|s| {
                    self.flag(((s - 1) % self.slots as u64) as usize)
                        .load(Acquire)
                        == s
                })
        };
        if !landed {
            return Err(err::<P>(
                "close",
                format!(
                    "peer rank {} announced {total} messages, not all of them landed",
                    self.peer
                ),
            ));
        }
        self.mem.quiet();
        Ok(CloseReport {
            peer_sent: total,
            drained,
        })
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

impl<P: PeerMem> Drop for Core<P> {
    fn drop(&mut self) {
        // Dropped without a close: announce it so the peer's close completes. The region stays
        // allocated (the peer may still put into it) until the backend frees it collectively.
        self.begin_close();
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

#[cfg(test)]
mod tests {
    //! The racy put path against a [`PeerMem`] whose puts tear every word on purpose: both
    //! ends in this process, on two threads, over one buffer of atomics.
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    /// Puts every word in two stores: first its new low half over its old high half (a torn
    /// word, left for a while), then the whole new word: the tear a bulk copy can show a
    /// reader. `WHOLE` claims whole-word puts all the same, for the control that shows the
    /// tear is seen through a view that is put into. Maps the peer (identity) when `map`.
    struct Tearing<const WHOLE: bool> {
        map: bool,
    }

    // SAFETY: both ends' regions are one live buffer of this test, addressed directly; every
    // access is an atomic one (put's two stores per word, put_word's store), so a torn word
    // is a value, not undefined behaviour; `fence` is a SeqCst fence, which orders this
    // thread's stores as the other thread's Acquire loads see them; nothing is left to
    // complete (`quiet`). With WHOLE = true put does not write whole words, on purpose: the
    // control below expects the view to show it.
    unsafe impl<const WHOLE: bool> PeerMem for Tearing<WHOLE> {
        const BACKEND: &'static str = "tearing";
        const PUT_WHOLE_WORDS: bool = WHOLE;

        fn wait(&self) -> WaitPolicy {
            WaitPolicy::Yield
        }

        unsafe fn map(&self, p: *mut u64) -> Option<NonNull<u64>> {
            self.map.then(|| NonNull::new(p)).flatten()
        }

        unsafe fn put(&self, dst: *mut u8, src: *const u8, bytes: usize) {
            for i in 0..bytes / 8 {
                // SAFETY: (caller) an aligned word of the peer's region, read there through
                // atomics; src + i readable (read unaligned, as its alignment is not promised).
                let (w, new) = unsafe {
                    (
                        atomic_at(dst.cast::<u64>().add(i)),
                        src.cast::<u64>().add(i).read_unaligned(),
                    )
                };
                let old = w.load(Relaxed);
                w.store((old & !0xffff_ffff) | (new & 0xffff_ffff), Relaxed);
                for _ in 0..20 {
                    std::hint::spin_loop();
                }
                w.store(new, Relaxed);
            }
        }

        unsafe fn put_word(&self, dst: *mut u64, v: u64) {
            // SAFETY: (caller) an aligned word of the peer's region, read through atomics.
            unsafe { atomic_at(dst) }.store(v, Relaxed);
        }

        fn fence(&self) {
            std::sync::atomic::fence(SeqCst);
        }

        fn quiet(&self) {}
    }

    /// Element `j` of send `s`: its high half `s`, its low half a function of `s` and `j`, so
    /// a word mixing two sends' halves is nobody's.
    fn word(s: u64, j: usize) -> u64 {
        (s << 32) | ((s ^ j as u64 ^ 0x5a5a_5a5a) & 0xffff_ffff)
    }

    /// The send that wrote element `j`'s bits `v`: Some(0) for the initial 0, None for a torn
    /// word.
    fn sender(v: u64, j: usize) -> Option<u64> {
        (v == 0 || word(v >> 32, j) == v).then_some(v >> 32)
    }

    const LEN: usize = 512;

    /// A racy end over `Tearing`, as rank `rank` of two, both regions in `mem`.
    ///
    /// # Safety
    /// `mem` holds two regions of the shape, zeroed, and outlives the end.
    unsafe fn end<const WHOLE: bool>(
        mem: &[AtomicU64],
        rank: usize,
        map: bool,
    ) -> OneSidedEnd<SharedBuf, Tearing<WHOLE>> {
        let words = OneSidedEnd::<SharedBuf, Tearing<WHOLE>>::shape(LEN, 1)
            .words()
            .unwrap();
        assert_eq!(mem.len(), 2 * words);
        let base = mem.as_ptr().cast_mut().cast::<u64>();
        // SAFETY: (caller) two zeroed regions of this shape that outlive the end; every access
        // to them is atomic.
        unsafe {
            OneSidedEnd::new(
                Tearing { map },
                1 - rank,
                LEN,
                1,
                base.add(rank * words),
                base.add((1 - rank) * words),
                map,
            )
        }
    }

    fn region_pair<const WHOLE: bool>() -> Vec<AtomicU64> {
        let words = OneSidedEnd::<SharedBuf, Tearing<WHOLE>>::shape(LEN, 1)
            .words()
            .unwrap();
        (0..2 * words).map(|_| AtomicU64::new(0)).collect()
    }

    fn send(end: &mut OneSidedEnd<SharedBuf, impl PeerMem>, s: u64) {
        end.send_with(Header { seq: s, stamp: s }, |b| {
            for (j, x) in b.iter_mut().enumerate() {
                *x = f64::from_bits(word(s, j));
            }
        })
        .unwrap();
    }

    /// What the reader of a racy channel over `Tearing<WHOLE>` saw while rank 0 sent as fast
    /// as it could: torn elements, elements that went back to an older send, polls that
    /// reported sends, and whether the view was the last send, whole, at the end. Runs `sends`
    /// sends, or until the first torn element when `until_torn`.
    fn race<const WHOLE: bool>(sends: u64, until_torn: bool) -> (u64, u64, u64, bool) {
        let mem = region_pair::<WHOLE>();
        let done = AtomicBool::new(false);
        let torn_seen = AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                // SAFETY: mem holds two zeroed regions and outlives the scope.
                let mut w = unsafe { end::<WHOLE>(&mem, 0, false) };
                for s in 1..=sends {
                    if until_torn && torn_seen.load(Relaxed) {
                        break;
                    }
                    send(&mut w, s);
                }
                done.store(true, SeqCst);
            });
            // SAFETY: as the sender's.
            let mut r = unsafe { end::<WHOLE>(&mem, 1, false) };
            let (mut torn, mut back, mut reports) = (0u64, 0u64, 0u64);
            let mut last = vec![0u64; LEN];
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let finished = done.load(SeqCst);
                if r.poll().unwrap().arrived > 0 {
                    reports += 1;
                }
                for (j, l) in last.iter_mut().enumerate() {
                    match sender(r.view().load(j).to_bits(), j) {
                        None => torn += 1,
                        Some(s) if s < *l => back += 1,
                        Some(s) => *l = s,
                    }
                }
                if torn > 0 {
                    torn_seen.store(true, Relaxed);
                }
                if finished || Instant::now() > deadline {
                    break;
                }
            }
            // The sender is done: a last poll copies its last send, whole.
            r.poll().unwrap();
            let whole = (0..LEN).all(|j| r.view().load(j).to_bits() == word(sends, j));
            (torn, back, reports, whole)
        })
    }

    #[test]
    fn racy_puts_that_tear_words_reach_the_view_whole() {
        let (torn, back, reports, whole) = race::<false>(600, false);
        assert_eq!((torn, back), (0, 0), "torn and backward elements");
        assert!(reports > 0, "no poll ever reported a send");
        assert!(
            whole,
            "the view is not the last send once the sender stopped"
        );
    }

    /// The control: the same puts straight into the view (as when a backend's puts write
    /// whole words) show torn elements, so the check above can see them.
    #[test]
    fn the_same_puts_into_the_view_show_torn_words() {
        let mut torn = 0;
        for _ in 0..20 {
            torn += race::<true>(20_000, true).0;
            if torn > 0 {
                break;
            }
        }
        assert!(torn > 0, "no torn element seen: the check could not tell");
    }

    /// A racy end expecting landing puts whose peer writes in place, and the reverse, fail
    /// their first poll after a send.
    #[test]
    fn ends_that_disagree_on_the_path_fail_the_poll() {
        for writer_maps in [true, false] {
            let mem = region_pair::<false>();
            // SAFETY: mem holds two zeroed regions and outlives both ends.
            let (mut w, mut r) = unsafe {
                (
                    end::<false>(&mem, 0, writer_maps),
                    end::<false>(&mem, 1, !writer_maps),
                )
            };
            assert_eq!(w.is_mapped(), writer_maps);
            send(&mut w, 1);
            let e = r
                .poll()
                .expect_err("the poll after a send on the other path");
            assert!(e.to_string().contains("disagree"), "{e}");
        }
    }
}
