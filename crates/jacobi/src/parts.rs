//! Where a rank's solve time goes ([`Breakdown`]): the solvers add each stretch of an
//! iteration to one part of a [`Parts`] as it ends, with the solvers' clock
//! ([`Instant`]). Two or four clock readings per face and exchange, none of them allocating.

use crate::clock::Instant;
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

    /// Send something whose message `send` fills with `pack` (which it calls at most once),
    /// timing the packing as pack and the rest as send.
    #[inline]
    pub(crate) fn send<T>(
        &mut self,
        send: impl FnOnce(&mut dyn FnMut(&mut [f64])) -> T,
        mut pack: impl FnMut(&mut [f64]),
    ) -> T {
        let t = Instant::now();
        let mut packed = Duration::ZERO;
        let out = send(&mut |buf| {
            let p = Instant::now();
            pack(buf);
            packed += p.elapsed();
        });
        self.pack += packed;
        self.send += t.elapsed().saturating_sub(packed);
        out
    }

    /// Unpack a message into the halo, timed as unpack.
    #[inline]
    pub(crate) fn unpack<T>(&mut self, unpack: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = unpack();
        self.unpack += t.elapsed();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing inside a send is pack, the rest of the send is send, and the breakdown's parts
    /// add up to the time given.
    #[test]
    fn a_send_splits_into_pack_and_send() {
        let mut p = Parts::default();
        let mut buf = [0.0; 4];
        p.send(
            |fill| {
                std::thread::sleep(Duration::from_millis(3));
                fill(&mut buf);
            },
            |b| {
                std::thread::sleep(Duration::from_millis(2));
                b.fill(1.0);
            },
        );
        assert_eq!(buf, [1.0; 4]);
        assert!(p.pack >= Duration::from_millis(2), "{p:?}");
        assert!(p.send >= Duration::from_millis(3), "{p:?}");
        assert!(p.send < Duration::from_millis(3) + p.pack, "{p:?}");
        let b = p.breakdown(p.comm() + Duration::from_millis(1));
        assert!((b.parts().iter().sum::<f64>() - (p.comm().as_secs_f64() + 1e-3)).abs() < 1e-9);
        assert!((b.comm_s() - p.comm().as_secs_f64()).abs() < 1e-9);
        assert_eq!(p.breakdown(Duration::ZERO).other_s, 0.0);
    }
}
