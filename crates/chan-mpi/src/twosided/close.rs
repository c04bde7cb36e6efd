//! The close of a [`Core`] (module docs, "Control"): the control receive that brings
//! credits and the peer's close announcement, this end's announcement, and the steps that
//! complete or cancel every request.

use super::{Core, Ctrl, RecvMem};
use crate::raw::{self, Requests};
use chan_core::backend::CloseReport;
use chan_core::CommError;

impl Core {
    /// Post the receive for the peer's next control message (credit or close).
    pub(super) fn post_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
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

    /// Take in every control message that arrived: credits, then at most one close
    /// announcement (the last message on the control tag).
    pub(super) fn test_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
        while self.peer_total.is_none() && raw::test_one(&mut self.ctrl_in_req, reqs)? {
            self.take_ctrl(reqs)?;
        }
        Ok(())
    }

    /// The control receive completed: take in its message, and post the next receive unless
    /// it was the close announcement.
    pub(super) fn take_ctrl(&mut self, reqs: &Requests) -> Result<(), CommError> {
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
