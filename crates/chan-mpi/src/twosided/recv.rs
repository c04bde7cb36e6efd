//! The receive side of a [`Core`] (module docs, "Receives", "Progress"): posting the
//! receives, taking in what completed, and lending it to the channel.

use super::{Core, RecvKind, RecvMem, HDR, TEST_GROUP};
use crate::raw::{self, Requests};
use chan_core::backend::{Arrival, Header, RacyPoll};
use chan_core::{AtomicF64Slice, CommError};
use std::os::raw::c_void;

impl Core {
    /// Where slot `slot`'s receive lands.
    pub(super) fn recv_ptr(&mut self, slot: usize) -> *mut c_void {
        match &mut self.recv {
            RecvMem::Slots(s) => s[slot].as_mut_ptr().cast(),
            // Interior mutability: the atomics' UnsafeCells make writes through this pointer,
            // derived from a shared reference, legitimate.
            RecvMem::Racy(b, _) => b.as_ptr().cast_mut().cast(),
        }
    }

    /// Make slot `slot`'s persistent receive (inactive).
    pub(super) fn init_recv(&mut self, slot: usize) -> Result<(), CommError> {
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
    pub(super) fn post(&mut self, slot: usize, reqs: &Requests) -> Result<(), CommError> {
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
    pub(super) fn test_recvs(&mut self, reqs: &Requests) -> Result<(), CommError> {
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
    pub(super) fn took_in(&mut self, slot: usize, reqs: &Requests) -> Result<(), CommError> {
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
    pub(super) fn header(&self, slot: usize) -> Header {
        let (seq, stamp) = match &self.recv {
            RecvMem::Slots(s) => (s[slot][0].to_bits(), s[slot][1].to_bits()),
            RecvMem::Racy(b, _) => (b[0].load().to_bits(), b[1].load().to_bits()),
        };
        Header { seq, stamp }
    }

    /// The acknowledgement a received message carries.
    pub(super) fn header_ack(&self, slot: usize) -> u64 {
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
}
