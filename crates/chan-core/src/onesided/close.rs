//! The close of a [`Core`] (module docs, "Close"): announce this end's total, wait for the
//! peer's, count what no poll reported.

use super::{err, Core, PeerMem, State, CLOSE, COUNT};
use crate::error::CommError;
use crate::transport::CloseReport;
use std::sync::atomic::Ordering::Acquire;

impl<P: PeerMem> Core<P> {
    /// The peer's announced total, once its close arrived.
    pub(super) fn peer_total(&self) -> Option<u64> {
        // Acquire: pairs with the peer's fence before its CLOSE put, so every message it sent
        // is visible once this is.
        let v = self.ctrl(CLOSE).load(Acquire);
        v.checked_sub(1)
    }

    /// Announce this end's total and put nothing more. Never waits.
    pub(super) fn begin_close(&mut self) {
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
    pub(super) fn finish_close(&mut self) -> Result<CloseReport, CommError> {
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
}

impl<P: PeerMem> Drop for Core<P> {
    fn drop(&mut self) {
        // Dropped without a close: announce it so the peer's close completes. The region stays
        // allocated (the peer may still put into it) until the backend frees it collectively.
        self.begin_close();
    }
}
