//! The send side of a [`Core`] (module docs, "Data", "Credits", "Staged sends"): the
//! acknowledgements and credits that bound what it sends, and the sends themselves.

use super::{Core, Ctrl, RecvMem, HDR, SEND_NOW_BYTES};
use crate::raw::{self, Requests};
use chan_core::backend::Header;
use chan_core::CommError;

impl Core {
    /// This end's acknowledgement of the peer's messages, which the peer may send R + 1
    /// beyond. Racy: every receive that completed (each is re-posted at once). Mailbox: the
    /// messages a poll reported (taken delivery of), but at most one more than the channel
    /// gave back: a peer R + 1 ahead then still finds a posted receive among the R + 2 slots
    /// when the channel holds the message it lent last, and a poll finds at most R + 1 new.
    pub(super) fn ack(&self) -> u64 {
        match self.recv {
            RecvMem::Racy(..) => self.received,
            RecvMem::Slots(_) => self.reported.min(self.released + 1),
        }
    }

    /// Take note of an acknowledgement from the peer (they only grow; a racy header read may
    /// be a newer message's, which is as true).
    pub(super) fn note_ack(&mut self, ack: u64) {
        self.peer_ack = self.peer_ack.max(ack);
    }

    /// True while a message beside the staged one (if any) stays within the peer's window:
    /// the peer has a receive posted for it.
    pub(super) fn has_credit(&self) -> bool {
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
    pub(super) fn maybe_credit(&mut self) -> Result<(), CommError> {
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
    pub(super) fn test_sends(&mut self, reqs: &Requests) -> Result<usize, CommError> {
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

    /// Take a free send slot. Only after `can_send` returned true.
    pub(super) fn take_free(&mut self, call: &'static str) -> Result<usize, CommError> {
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
    pub(super) fn start(
        &mut self,
        slot: usize,
        header: Header,
        reqs: &Requests,
    ) -> Result<(), CommError> {
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
}

/// How far this end's acknowledgement runs ahead of the last one it sent before it sends an
/// explicit credit, for a peer window of `window` = R + 1 messages: half the window (a
/// streaming peer keeps sending from the other half while the credit travels), and at least 2
/// (in a halo swap each message acknowledges the peer's previous one, one behind: that must
/// not cost a credit per message), but never more than the window. A credit is then certain
/// to go when the peer waits for one: the peer has the whole window unacknowledged, and once
/// the channel took all of it ([`Core::ack`] counts the message it lends last as
/// acknowledged) this end's acknowledgement is `window` ahead of the last it sent.
pub(super) fn credit_every(window: u64) -> u64 {
    window.div_ceil(2).max(2).min(window)
}
