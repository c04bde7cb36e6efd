//! The send side of a [`Core`] (module docs, "Mailbox send", "Staged send", "Racy",
//! "Acknowledgement"): put or store the message and publish its flag or count.

use super::{atomic_at, err, Core, Mapped, PeerMem, State, ACK, BEGUN, COUNT, STAGE_MAX};
use crate::error::CommError;
use crate::transport::Header;
use std::sync::atomic::Ordering::{Relaxed, Release};

impl<P: PeerMem> Core<P> {
    /// The peer's address of the slot message `seq` goes to.
    pub(super) fn remote_slot(&self, seq: u64) -> *mut u64 {
        // Racy: the one buffer, or landing buffer (seq - 1) mod 2.
        let k = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY: slot k of the peer's region, inside the set (see Core::new).
        unsafe { self.remote.slots.add(self.slot_off(k)) }
    }

    /// Racy into landing buffers: announce send `seq` in the peer's `BEGUN`, ordered before
    /// any of its data (module docs, "Whole words").
    pub(super) fn begin_landing(&self, seq: u64) {
        if self.copy.is_some() {
            // SAFETY: the peer's BEGUN word, read there through atomics only.
            unsafe { self.mem.put_word(self.remote.ctrl.add(BEGUN), seq) };
            self.mem.fence();
        }
    }

    /// After the message's words are put: order them before its flag or count, and publish.
    pub(super) fn publish(&mut self, seq: u64) {
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

    pub(super) fn send_with<F: FnOnce(&mut [f64])>(
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
    pub(super) fn send_mapped<F: FnOnce(&mut [f64])>(
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
    pub(super) fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError> {
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
    pub(super) fn start_staged(&mut self, header: Header) -> Result<(), CommError> {
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
    pub(super) fn send_buffered(&mut self, header: Header, staged: bool) -> Result<(), CommError> {
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

    pub(super) fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
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
    pub(super) fn send_ack(&mut self) {
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
}
