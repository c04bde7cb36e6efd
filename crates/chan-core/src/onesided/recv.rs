//! The receive side of a [`Core`] (module docs, "Mailbox receive", "Racy", "Whole
//! words"): poll the flags or the count, lend and release slots, copy landed racy sends.

use super::{atomic_at, err, Core, PeerMem, State, BEGUN, COPY_TRIES, COUNT};
use crate::atomic::AtomicF64Slice;
use crate::error::CommError;
use crate::transport::{Arrival, Header, RacyPoll};
use std::sync::atomic::Ordering::{Acquire, Relaxed};

impl<P: PeerMem> Core<P> {
    /// Mailbox: report every message that landed since the last poll.
    pub(super) fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError> {
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
    pub(super) fn data(&self, slot: usize) -> &[f64] {
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
    pub(super) fn release(&mut self, slot: usize) -> Result<(), CommError> {
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
    pub(super) fn poll_racy(&mut self) -> Result<RacyPoll, CommError> {
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
    pub(super) fn copy_landed(&mut self, count: u64) -> Result<Option<u64>, CommError> {
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
    pub(super) fn paths_differ(&self) -> CommError {
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
    pub(super) fn view(&self) -> &AtomicF64Slice {
        if let Some(c) = &self.copy {
            return &c.views[c.shown];
        }
        // SAFETY: (1) len f64 after the stamp word, aligned, inside this end's region for as
        // long as self (its PeerMem keeps the region allocated); (2) Rust reads and writes this memory
        // only through atomics (this view, the stamp load, and the peer's Direct::write); a
        // peer on another node puts whole aligned words (module docs, "Whole words").
        unsafe { AtomicF64Slice::from_raw(self.local.slots.add(1).cast::<f64>(), self.shape.len) }
    }
}
