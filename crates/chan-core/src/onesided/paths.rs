//! The two paths to the peer (module docs, "Two paths to the peer"): the peer's region
//! mapped into this process, for a racy end ([`Direct`]) or a mailbox ([`Mapped`]); and the
//! racy receiver's own views when sends land in landing buffers ([`LandingCopy`]).

use super::{atomic_at, PeerMem, Region, Shape, ACK, COUNT, CTRL_WORDS};
use crate::atomic::{AtomicF64Buf, AtomicF64Slice};
use std::sync::atomic::Ordering::{Relaxed, Release};

/// A racy peer's buffer (`[stamp, payload…]`) and `COUNT` word as this process's addresses
/// ([`PeerMem::map`]), written with atomic stores.
#[derive(Debug, Clone, Copy)]
pub(super) struct Direct {
    pub(super) buf: *mut u64,
    /// Payload words after the stamp.
    pub(super) len: usize,
    pub(super) count: *mut u64,
}

impl Direct {
    /// The peer's racy buffer of `1 + len` words at `remote.slots` and its `COUNT`, if every
    /// word of both is mapped here contiguously.
    ///
    /// # Safety
    /// `remote` is the peer's region of a racy shape of `len`, allocated while `mem` lives.
    pub(super) unsafe fn map<P: PeerMem>(mem: &P, remote: &Region, len: usize) -> Option<Self> {
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
    pub(super) fn write(&self, stamp: u64, data: &[f64], seq: u64) {
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
pub(super) struct LandingCopy {
    pub(super) views: [AtomicF64Buf; 2],
    pub(super) shown: usize,
}

/// A mailbox peer's region as this process's addresses ([`PeerMem::map`]: a rank on this
/// node). A
/// send then fills the peer's released slot in place, one copy, where the put path fills the
/// staging buffer and the put copies it again; the flag is a release store, and so is the
/// acknowledgement of the peer's messages this end released.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mapped {
    /// The peer's `ACK` word.
    pub(super) ack: *mut u64,
    pub(super) flags: *mut u64,
    pub(super) slots: *mut u64,
}

impl Mapped {
    /// The peer's region (from its first control word to the last word of its last slot), if
    /// every word is mapped here contiguously and 8-byte aligned.
    ///
    /// # Safety
    /// `remote` is the peer's region of a mailbox `shape`, allocated while `mem` lives.
    pub(super) unsafe fn map<P: PeerMem>(mem: &P, remote: &Region, shape: &Shape) -> Option<Self> {
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
