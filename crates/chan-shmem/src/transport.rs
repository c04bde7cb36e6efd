//! The SHMEM transport: [`ShmemEnd`], generic over its delivery (flagged slots for Sync and
//! Async, one buffer for Racy), over one [`Core`] per channel end.
//!
//! ## Memory of a channel end
//! Each end owns an *inbound region* in its channel set's symmetric allocation, written only by
//! the peer's puts (and read only by this PE):
//!
//! ```text
//! ctrl   8 words   [CLOSE] peer's total sent + 1 (0 while open)
//!                  [ACK]   how many of THIS end's messages the peer released, in order
//!                  [COUNT] racy: sends of the peer that landed in the view
//! flags  S words   mailbox: flag[k] = sequence number of the message in slot k
//! slots  S × W     mailbox: S = R + 1 slots of [stamp, payload…], W = 1 + len rounded up to 8
//!   or   W         racy: one buffer [stamp, payload…]
//! ```
//!
//! The peer knows this region's offset from the creation handshake; since the heap is
//! symmetric, `base + offset` on this PE is the put target on the peer.
//!
//! ## Protocol (the paper's put / fence / flag idiom)
//! * **Mailbox send** of message `s` (1, 2, …) goes to slot `(s − 1) mod S`: put
//!   `[stamp, payload]` into the peer's slot, `shmem_fence`, put `s` into the peer's
//!   `flag[slot]`. The fence orders the data before the flag (OpenSHMEM 1.4, 9.8.1).
//! * **Mailbox receive**: `poll` reads `flag[(r) mod S]` for the next expected `r + 1`; a match
//!   means the whole message landed (the fence), and it is reported. Flags carry sequence
//!   numbers, so they never need clearing: a slot's flag only changes when the sender refills
//!   it, which it does only after the receiver released it.
//! * **Mailbox on one node**: when `shmem_ptr` maps the peer's region into this process
//!   ([`Mapped`]), `send_with` gives its closure the peer's slot itself and stores the flag
//!   with `Release`: the payload is copied once (the caller's pack) instead of into the
//!   staging buffer and again by the put. The slot is the sender's alone from its release to
//!   the flag, as on the put path. The acknowledgement below is then a store too.
//! * **Acknowledgement**: when the channel releases a slot, the receiver puts into the sender's
//!   `ACK` how many slots, in sequence order, it released. The sender refills slot
//!   `(s − 1) mod S` only once message `s − S` was released, so a slot is never written while
//!   the channel lends it or before a poll reported it. S = R + 1, one more than R, so R can be
//!   outstanding while the channel holds the message it lent last (chan-core's contract).
//! * **In flight**: a send is a blocking put into a slot the receiver released, so the message
//!   is "received into the channel" on arrival, as an MPI `Issend` matched by a posted receive
//!   is (chan-core allows acknowledgement on arrival): nothing stays in flight, and the flow
//!   control is the R + 1 slots. A poll therefore finds at most R + 1 new messages. No
//!   acknowledgement is put when a poll reports a message: the only ack is the release's, and
//!   Sync's release happens at the start of the next receive, off the critical path.
//! * **Staged send**: `stage_with` fills a buffer of this end's own (not the one `send_with`
//!   fills), and `start_staged` sends it as above (copied into the mapped slot on one node).
//!   A staged message counts as one more unreleased message for `can_send`, so the slot it
//!   goes to is released when it starts.
//! * **Racy**: write `[stamp, payload]` into the peer's one buffer with no flag to wait for,
//!   then the running send count into the peer's `COUNT`. The view reads the buffer through
//!   atomics. A send lands straight in the view, so nothing is ever in flight. When the peer's
//!   memory is mapped into this process (`shmem_ptr`: a PE on the same node), the sender
//!   writes every word through atomics (`AtomicF64Slice::store_from`) and `COUNT` with a
//!   release store; otherwise (a peer on another node, or every peer with
//!   `AIAC_SHMEM_REMOTE=1`) it puts the buffer, `shmem_fence`s and puts `COUNT`. See
//!   "Whole words" below for why.
//! * **Close**: `begin_close` puts a fence and then `sent + 1` into the peer's `CLOSE`: every
//!   earlier put of this end (data, flags, acks) is delivered before the peer sees it.
//!   `finish_close` waits for the peer's `CLOSE`; by the fence, everything the peer sent has
//!   then landed, so the messages no poll reported are counted (and their flags checked) as
//!   drained; then `shmem_quiet` completes this end's own puts. Neither half calls a
//!   collective. `Drop` without a close runs `begin_close` and never waits.
//!
//! ## Memory ordering
//! Words the peer writes (`ctrl`, `flags`, the racy buffer) are read only through atomics.
//! A flag is loaded with `Acquire`, so the reads of the slot that follow are not hoisted above
//! it; the sender's `shmem_fence` is the other half (the data is delivered before the flag), or
//! on one node its `Release` store of the flag after the plain stores into the slot.
//! The same holds for `COUNT` and `CLOSE`; a racy `COUNT` written through the peer's mapping
//! is a `Release` store instead of fence and put, and pairs with the same `Acquire` loads.
//! `ACK` is put (on one node, stored through the mapping) after a `Release` fence and loaded
//! with `Acquire`: the receiver's reads of the slots it released come before the sender's
//! writes that refill them. On the put path, and for `CLOSE` on both, this rests on a put of
//! one aligned word being one 8-byte store (on one node, UCX's copy into the mapped heap)
//! made by this thread after the fence; the mapped path's stores are Rust atomics.
//!
//! ## Whole words
//! A racy view is read while the peer writes it, so each element must change from one whole
//! value to another (chan-core's `AtomicF64Slice::from_raw` condition). A bulk put does not
//! promise that: OpenSHMEM 1.4 makes no atomicity promise for `shmem_putmem`, and with Open MPI
//! 4.1 + UCX on one node (the put is a `memcpy` into the peer's mapped heap) readers caught
//! 20 KB racy puts half done: elements whose low 4 or 5 bytes came from send s + 1 and the
//! rest from send s, in 5 of about 130 runs of `racy_semantics` at 4 PEs on 2 cores, and in
//! a C program of the same ring pattern. Hence the racy sender writes the peer's buffer
//! itself through atomics (`AtomicF64Slice::store_from`) whenever `shmem_ptr` maps it, which
//! it does for every PE of the node (0 torn elements in 210 runs since). Between nodes the
//! buffer is put, and whole words then rest on the network writing aligned 8-byte words
//! whole, as RDMA NICs do.
//!
//! Control words are written with `shmem_uint64_p`, not SHMEM atomics, which UCX may emulate
//! with messages that need the target's progress. A put of one aligned word is one 8-byte
//! store on a node (UCX copies 8 bytes into the mapped heap) and one aligned write over RDMA;
//! unlike a bulk copy it has no middle to be caught in.
//!
//! A peer's puts can target this region until the peer has closed its end, so the region is
//! freed only collectively, once every PE has closed every end of the set (see
//! [`crate::ShmemCtx::reclaim`]).

use crate::env::{SetMem, Shared};
use crate::sym::{atomic_at, fence, peer_ptr, put, put_word, quiet, shmem_err};
use chan_core::backend::{
    Arrival, CloseReport, Delivery, Header, IdleStreak, MailboxTransport, RacyPoll, RacyTransport,
    Shared as SharedBuf, Slots, Transport,
};
use chan_core::{AtomicF64Slice, CommError};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::rc::Rc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Words of the control block.
pub(crate) const CTRL_WORDS: usize = 8;
const CLOSE: usize = 0;
const ACK: usize = 1;
const COUNT: usize = 2;

/// Put path: messages up to this many elements are copied into the staging slot and put at
/// once; longer ones are put straight from the caller's slice, and the stamp by a second small
/// put. (A peer mapped into this process gets every message copied straight into its slot.)
const STAGE_MAX: usize = 256;

fn round8(w: usize) -> usize {
    w.div_ceil(8) * 8
}

/// The shape of one end's inbound region, in 8-byte words.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) len: usize,
    pub(crate) r: usize,
    pub(crate) racy: bool,
}

impl Shape {
    /// Receive slots: R + 1 (mailbox) or one buffer (racy).
    pub(crate) fn slots(&self) -> usize {
        if self.racy {
            1
        } else {
            self.r + 1
        }
    }
    /// Words per slot: stamp and payload, rounded up to a cache line.
    pub(crate) fn stride(&self) -> usize {
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
    pub(crate) fn words(&self) -> Option<usize> {
        self.slots()
            .checked_mul(self.stride())?
            .checked_add(CTRL_WORDS + self.flags_words())
    }
}

/// Addresses of one inbound region: local on this PE, or (same numbers) the put targets on the
/// peer for the peer's region.
#[derive(Debug, Clone, Copy)]
struct Region {
    ctrl: *mut u64,
    flags: *mut u64,
    slots: *mut u64,
}

impl Region {
    /// # Safety
    /// `base + offset` starts a region of `shape` inside a live symmetric allocation.
    unsafe fn at(base: *mut u64, offset: usize, shape: &Shape) -> Self {
        // SAFETY: (caller) every offset below stays inside the region.
        unsafe {
            let ctrl = base.add(offset);
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
/// (`shmem_ptr`), written with atomic stores.
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
    /// `remote` is the peer's region of a racy `shape` inside a live symmetric allocation.
    unsafe fn map(remote: &Region, len: usize, pe: c_int) -> Option<Self> {
        // SAFETY: (caller) the buffer's first and last words and COUNT lie inside the region.
        let (buf, last, count) = unsafe {
            (
                peer_ptr(remote.slots, pe)?,
                peer_ptr(remote.slots.add(len), pe)?,
                peer_ptr(remote.ctrl.add(COUNT), pe)?,
            )
        };
        // shmem_ptr maps whole segments; check that the buffer is one piece anyway.
        (buf.as_ptr().wrapping_add(len) == last.as_ptr()).then_some(Direct {
            buf: buf.as_ptr(),
            len,
            count: count.as_ptr(),
        })
    }

    /// Write `[stamp, data…]` into the peer's buffer, then publish send `seq`.
    fn write(&self, stamp: u64, data: &[f64], seq: u64) {
        // SAFETY: Direct::map found the peer's buffer of 1 + len words and its COUNT word
        // mapped into this process, 8-byte aligned; they stay mapped while the set is
        // allocated (the Core holding self keeps it), and every writer (this end) and reader
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

/// A mailbox peer's region as this process's addresses (`shmem_ptr`: a PE on this node). A
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
    /// `remote` is the peer's region of a mailbox `shape` inside a live symmetric allocation.
    unsafe fn map(remote: &Region, shape: &Shape, pe: c_int) -> Option<Self> {
        let words = shape.words()?;
        // SAFETY: (caller) the first control word and the last slot word lie inside the region.
        let (first, last) = unsafe {
            (
                peer_ptr(remote.ctrl, pe)?,
                peer_ptr(remote.ctrl.add(words - 1), pe)?,
            )
        };
        // shmem_ptr maps whole segments; check that the region is one piece anyway.
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
pub(crate) struct Core {
    /// Keeps SHMEM initialised, and the set's memory allocated, while this end exists; its
    /// wait policy and remote switch.
    sh: Rc<Shared>,
    /// Keeps this end counted as open in its set until dropped.
    set: Rc<SetMem>,
    peer: usize,
    pe: c_int,
    shape: Shape,
    slots: usize,
    stride: usize,
    local: Region,
    remote: Region,
    /// Racy: the peer's buffer and `COUNT` mapped into this process, when they are.
    direct: Option<Direct>,
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

impl Core {
    /// An end over `set`: this PE's inbound region at `mine`, the peer's at `theirs` (word
    /// offsets from the handshake).
    pub(crate) fn new(
        sh: Rc<Shared>,
        set: Rc<SetMem>,
        peer: usize,
        shape: Shape,
        mine: usize,
        theirs: usize,
    ) -> Self {
        let base = set.base();
        debug_assert!(mine + shape.words().unwrap_or(0) <= set.words());
        debug_assert!(theirs + shape.words().unwrap_or(0) <= set.words());
        // SAFETY: the handshake placed both regions of `shape` inside the set's allocation,
        // whose size is the largest any PE needs (the same on every PE).
        let (local, remote) = unsafe {
            (
                Region::at(base, mine, &shape),
                Region::at(base, theirs, &shape),
            )
        };
        // SAFETY: `remote` is the peer's region of `shape` in the live set (above).
        // AIAC_SHMEM_REMOTE=1 (sh.remote) maps nothing: every peer is as if on another node.
        let direct = (shape.racy && !sh.remote)
            .then(|| unsafe { Direct::map(&remote, shape.len, peer as c_int) })
            .flatten();
        // SAFETY: as for `direct`.
        let mapped = (!shape.racy && !sh.remote)
            .then(|| unsafe { Mapped::map(&remote, &shape, peer as c_int) })
            .flatten();
        sh.ends_opened.set(sh.ends_opened.get() + 1);
        if direct.is_some() || mapped.is_some() {
            sh.mapped_ends.set(sh.mapped_ends.get() + 1);
        }
        // A mapped mailbox end never uses the staging buffer.
        let staging_len = if mapped.is_some() { 0 } else { 1 + shape.len };
        set.opened();
        Core {
            sh,
            set,
            peer,
            pe: peer as c_int,
            slots: shape.slots(),
            stride: shape.stride(),
            shape,
            local,
            remote,
            direct,
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
        // SAFETY: ctrl words lie in this end's region of a live set (the Rc keeps it); Rust
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
            Err(shmem_err(call, "the channel end is closing"))
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
    pub(crate) fn in_flight(&mut self) -> usize {
        0
    }

    /// True when the slot of the next message is released (mailbox), and that of a staged
    /// message after it; always (racy).
    pub(crate) fn can_send(&mut self) -> bool {
        self.shape.racy || self.unreleased() + u64::from(self.has_staged) < self.slots as u64
    }

    /// The peer's address of the slot message `seq` goes to.
    fn remote_slot(&self, seq: u64) -> *mut u64 {
        let k = if self.shape.racy {
            0
        } else {
            ((seq - 1) % self.slots as u64) as usize
        };
        // SAFETY: slot k of the peer's region, inside the set (see Core::new).
        unsafe { self.remote.slots.add(self.slot_off(k)) }
    }

    /// After the message's words are put: order them before its flag or count, and publish.
    fn publish(&mut self, seq: u64) {
        fence();
        let target = if self.shape.racy {
            // SAFETY: the peer's COUNT word, read there through atomics only.
            unsafe { self.remote.ctrl.add(COUNT) }
        } else {
            let k = ((seq - 1) % self.slots as u64) as usize;
            // SAFETY: flag k of the peer's region, read there through atomics only.
            unsafe { self.remote.flags.add(k) }
        };
        // SAFETY: see the two cases above.
        unsafe { put_word(target, seq, self.pe) };
        self.sent = seq;
    }

    pub(crate) fn send_with<F: FnOnce(&mut [f64])>(
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
            return Err(shmem_err("send", "no released slot (call can_send first)"));
        }
        let k = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY: slot k of the peer's region, 1 + len words inside its stride, mapped into
        // this process (Mapped::map). The peer's copy of the set stays allocated, and mapped,
        // while this end is open: sets are freed only by a collective vote that an open end
        // blocks (`ShmemCtx::reclaim`) or at finalize, after a barrier. The peer released the
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
    pub(crate) fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
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
    pub(crate) fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
        self.check_open("send")?;
        if !std::mem::take(&mut self.has_staged) {
            return Err(shmem_err("send_staged", "no message is staged"));
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
        let (dst, direct, pe) = (self.remote_slot(seq), self.direct, self.pe);
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
        // SAFETY: the slot on the peer is free (its previous message was released: can_send,
        // which kept a place for a staged message; or racy, where the view is read through
        // atomics only) and holds 1 + len words; both buffers hold 1 + len f64.
        unsafe { put(dst.cast(), buf.as_ptr().cast(), buf.len() * 8, pe) };
        self.publish(seq);
        Ok(())
    }

    pub(crate) fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
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
        // SAFETY: as in send_with: a free slot of 1 + len words on the peer; the payload goes
        // to words 1.., the stamp to word 0; `data` holds len f64.
        unsafe {
            put(
                dst.add(1).cast(),
                data.as_ptr().cast(),
                data.len() * 8,
                self.pe,
            );
            put_word(dst, header.stamp, self.pe);
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
                unsafe { put_word(self.remote.ctrl.add(ACK), self.released, self.pe) };
            }
            self.last_ack = self.released;
        }
    }

    /// Mailbox: report every message that landed since the last poll.
    pub(crate) fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
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
            self.idle.empty(self.sh.wait);
        } else {
            self.idle.found();
        }
        Ok(())
    }

    /// Mailbox: the payload of a reported, unreleased slot.
    pub(crate) fn data(&self, slot: usize) -> &[f64] {
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
    pub(crate) fn release(&mut self, slot: usize) -> Result<(), CommError> {
        if self.state != State::Open {
            // After begin_close the sender puts no more; nothing to acknowledge.
            return Ok(());
        }
        if slot >= self.slots || self.release_mark[slot] {
            return Err(shmem_err("release", format!("slot {slot} is not held")));
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
    pub(crate) fn poll_racy(&mut self) -> RacyPoll {
        // Acquire: pairs with the sender's fence before its COUNT put.
        let count = self.ctrl(COUNT).load(Acquire);
        let arrived = count.saturating_sub(self.racy_seen);
        if arrived == 0 {
            // Nothing new: let a sender that shares this core run.
            self.idle.empty(self.sh.wait);
            return RacyPoll::default();
        }
        self.idle.found();
        self.racy_seen = count;
        // SAFETY: the racy buffer's stamp word, written by the peer's puts; atomics only.
        let stamp = unsafe { atomic_at(self.local.slots) }.load(Relaxed);
        RacyPoll { arrived, stamp }
    }

    /// Racy: the buffer's payload through atomics.
    pub(crate) fn view(&self) -> &AtomicF64Slice {
        // SAFETY: (1) len f64 after the stamp word, aligned, inside this end's region for as
        // long as self (the Rc keeps the set alive); (2) Rust reads and writes this memory
        // only through atomics (this view, the stamp load, and the peer's Direct::write); a
        // peer on another node puts whole aligned words (module docs, "Whole words").
        unsafe { AtomicF64Slice::from_raw(self.local.slots.add(1).cast::<f64>(), self.shape.len) }
    }

    /// The peer's announced total, once its close arrived.
    pub(crate) fn peer_total(&self) -> Option<u64> {
        // Acquire: pairs with the peer's fence before its CLOSE put, so every message it sent
        // is visible once this is.
        let v = self.ctrl(CLOSE).load(Acquire);
        v.checked_sub(1)
    }

    /// Announce this end's total and put nothing more. Never waits.
    pub(crate) fn begin_close(&mut self) {
        if self.state != State::Open {
            return;
        }
        self.state = State::Closing;
        // A staged message is discarded: never started, it is not one of the `sent`.
        self.has_staged = false;
        fence();
        // SAFETY: the peer's CLOSE word, read there through atomics only.
        unsafe { put_word(self.remote.ctrl.add(CLOSE), self.sent + 1, self.pe) };
    }

    /// Wait for the peer's announcement, count what it sent that no poll reported, complete
    /// this end's puts.
    pub(crate) fn finish_close(&mut self) -> Result<CloseReport, CommError> {
        if self.state != State::Closing {
            return Err(shmem_err("close", "finish_close without begin_close"));
        }
        let mut spins = 0u32;
        let total = loop {
            if let Some(t) = self.peer_total() {
                break t;
            }
            self.sh.wait.relax(spins);
            spins = spins.saturating_add(1);
        };
        self.state = State::Closed;
        let seen = if self.shape.racy {
            self.racy_seen
        } else {
            self.reported
        };
        let drained = total.checked_sub(seen).ok_or_else(|| {
            shmem_err(
                "close",
                format!(
                    "peer PE {} announced {total} messages but {seen} arrived",
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
            return Err(shmem_err(
                "close",
                format!(
                    "peer PE {} announced {total} messages, not all of them landed",
                    self.peer
                ),
            ));
        }
        quiet();
        Ok(CloseReport {
            peer_sent: total,
            drained,
        })
    }

    pub(crate) fn peer(&self) -> usize {
        self.peer
    }
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // Dropped without a close: announce it so the peer's close completes. The region stays
        // allocated (the peer may still put into it) until a collective reclaim or finalize.
        self.begin_close();
        self.set.closed();
    }
}

/// One end of a channel over OpenSHMEM: [`ShmemEnd<Slots>`] carries Sync and Async
/// channels (R + 1 flagged slots), and Racy ones (`ShmemEnd<Shared>`: one buffer, no flags). The
/// send side and the close are the same code; the region's layout follows from `D`.
pub struct ShmemEnd<D: Delivery> {
    core: Core,
    _delivery: PhantomData<D>,
}

impl<D: Delivery> ShmemEnd<D> {
    /// The layout of an end of this delivery.
    pub(crate) fn shape(len: usize, r: usize) -> Shape {
        Shape {
            len,
            r,
            racy: D::SHARED,
        }
    }

    pub(crate) fn new(core: Core) -> Self {
        ShmemEnd {
            core,
            _delivery: PhantomData,
        }
    }
}

impl<D: Delivery> Transport for ShmemEnd<D> {
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
    /// The PE's [`WaitPolicy`](chan_core::backend::WaitPolicy). With a core per PE it
    /// busy-polls: the wait is for a word a peer's put changes in local memory, and a
    /// `sched_yield` between loads only delays seeing it. On an oversubscribed node the peer
    /// that will write the word may be waiting for this core: back off and yield.
    fn relax(&mut self, spins: u32) {
        self.core.sh.wait.relax(spins);
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

impl<D: Delivery> std::fmt::Debug for ShmemEnd<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmemEnd")
            .field("delivery", &std::any::type_name::<D>())
            .field("peer", &self.core.peer())
            .field("len", &self.core.shape().len)
            .field("max_in_flight", &self.core.shape().r)
            .finish()
    }
}

impl MailboxTransport for ShmemEnd<Slots> {
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

impl RacyTransport for ShmemEnd<SharedBuf> {
    fn poll(&mut self) -> Result<RacyPoll, CommError> {
        Ok(self.core.poll_racy())
    }
    fn view(&self) -> &AtomicF64Slice {
        self.core.view()
    }
}
