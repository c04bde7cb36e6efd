//! Where a rank's solve time goes ([`Breakdown`]): the solvers add each stretch of an
//! iteration to one part of a [`Parts`] as it ends, with the solvers' clock
//! ([`Instant`]). Two or four clock readings per face and exchange, none of them allocating.

use crate::clock::{Instant, Work};
use crate::record::Breakdown;
use std::time::Duration;

/// Time spent in each part of the solve so far (see [`Breakdown`] for what each holds).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Parts {
    /// Computation, timed with [`Instant::computed`]: a rank's `compute_s`.
    pub(crate) sweep: Duration,
    pub(crate) pack: Duration,
    pub(crate) unpack: Duration,
    pub(crate) send: Duration,
    pub(crate) wait: Duration,
    pub(crate) reduce: Duration,
}

impl Parts {
    /// Pack, unpack, send, wait and reduce: a rank's `comm_s`.
    pub(crate) fn comm(&self) -> Duration {
        self.pack + self.unpack + self.send + self.wait + self.reduce
    }

    /// The breakdown of a solve of `time` (`other_s`: the rest, never below 0).
    pub(crate) fn breakdown(&self, time: Duration) -> Breakdown {
        let s = |d: Duration| d.as_secs_f64();
        Breakdown {
            sweep_s: s(self.sweep),
            pack_s: s(self.pack),
            unpack_s: s(self.unpack),
            send_s: s(self.send),
            wait_s: s(self.wait),
            reduce_s: s(self.reduce),
            other_s: s(time.saturating_sub(self.sweep + self.comm())),
        }
    }

    /// Time since `t` as a reduction.
    #[inline]
    pub(crate) fn reduced(&mut self, t: Instant) {
        self.reduce += t.elapsed();
    }

    /// A blocking send (`send_with`) whose message `send` fills with `pack` (called at most
    /// once): the packing timed as pack, the time before it (waiting for a free slot, which
    /// the neighbour frees by taking an earlier message) as wait, the rest as send.
    #[inline]
    pub(crate) fn send<T>(
        &mut self,
        send: impl FnOnce(&mut dyn FnMut(&mut [f64])) -> T,
        pack: impl FnMut(&mut [f64]),
    ) -> T {
        self.timed_send(true, send, pack)
    }

    /// An offer (`try_send_with`): as [`Parts::send`], but the check for a free slot, which
    /// does not wait, is part of the send.
    #[inline]
    pub(crate) fn offer<T>(
        &mut self,
        send: impl FnOnce(&mut dyn FnMut(&mut [f64])) -> T,
        pack: impl FnMut(&mut [f64]),
    ) -> T {
        self.timed_send(false, send, pack)
    }

    #[inline]
    fn timed_send<T>(
        &mut self,
        blocking: bool,
        send: impl FnOnce(&mut dyn FnMut(&mut [f64])) -> T,
        mut pack: impl FnMut(&mut [f64]),
    ) -> T {
        let t = Instant::now();
        let mut began = None;
        let mut packed = Duration::ZERO;
        let out = send(&mut |buf| {
            let p = Instant::now();
            began = Some(p);
            pack(buf);
            packed += p.computed(Work::bytes(std::mem::size_of_val(buf) as u64));
        });
        let total = t.elapsed();
        let waited = match began {
            Some(p) if blocking => p.duration_since(t),
            _ => Duration::ZERO,
        };
        self.pack += packed;
        self.wait += waited;
        self.send += total.saturating_sub(packed + waited);
        out
    }

    /// Unpack a message of `len` values into the halo, timed as unpack.
    #[inline]
    pub(crate) fn unpack<T>(&mut self, len: usize, unpack: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = unpack();
        self.unpack += t.computed(Work::bytes(8 * len as u64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing inside a send is pack, a blocking send's time before it wait (an offer's:
    /// send), the rest send; the breakdown's parts add up to the time given.
    #[test]
    fn a_send_splits_into_wait_pack_and_send() {
        let ms = Duration::from_millis;
        // A transport's send: 20 ms before it fills the message, 3 ms after.
        fn send(fill: &mut dyn FnMut(&mut [f64])) -> [f64; 4] {
            let mut buf = [0.0; 4];
            std::thread::sleep(Duration::from_millis(20));
            fill(&mut buf);
            std::thread::sleep(Duration::from_millis(3));
            buf
        }
        let pack = |b: &mut [f64]| {
            std::thread::sleep(ms(2));
            b.fill(1.0);
        };
        let mut p = Parts::default();
        assert_eq!(p.send(send, pack), [1.0; 4]);
        assert!(
            p.wait >= ms(20) && p.pack >= ms(2) && p.send >= ms(3),
            "{p:?}"
        );
        assert!(p.send < ms(20) && p.pack < ms(20), "counted once: {p:?}");
        let mut q = Parts::default();
        q.offer(send, pack);
        assert_eq!(q.wait, Duration::ZERO);
        assert!(q.pack >= ms(2) && q.send >= ms(23), "{q:?}");
        let b = p.breakdown(p.comm() + ms(1));
        let sum: f64 = b.parts().iter().sum();
        assert!((sum - (p.comm().as_secs_f64() + 1e-3)).abs() < 1e-9);
        assert!((b.comm_s() - p.comm().as_secs_f64()).abs() < 1e-9);
        assert_eq!(p.breakdown(Duration::ZERO).other_s, 0.0);
    }
}
