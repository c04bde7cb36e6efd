//! The slow rank of the performance-defect experiments (`--slow-rank K --slowdown F`), for
//! every solver and backend: after each unit of its work (a sweep, a block of sweeps, an inner
//! iteration, a Krylov kernel) the slow rank does `F − 1` more units' worth of passes over its
//! block, counted, not timed. Each pass reads the block as a sweep does (a residual
//! computation, or the kernel's own read) and its result is thrown away.
//!
//! A count of passes rather than a busy-wait for `(F − 1)` times the unit's wall-clock
//! duration: a rank descheduled in a sweep or in the wait came out of the wait early, or
//! counted the time slice as work, so on a shared machine the slow rank was slowed by
//! anything from 1 to many times F, and tests that compare ranks' iterations failed by chance.
//! Passes are work: the slow rank does F times its neighbours' work per iteration, however the
//! cores are shared. A fractional F spreads its extra passes evenly (F = 2.5: 1, 2, 1, 2, …).

/// One rank's slowdown: `F − 1` extra passes per unit of work (none for F = 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slowdown {
    /// `F − 1`.
    extra: f64,
    /// Units of work done so far.
    done: u64,
}

impl Slowdown {
    /// A rank `factor` times slower (1: not slowed).
    pub(crate) fn new(factor: f64) -> Self {
        Slowdown {
            extra: (factor - 1.0).max(0.0),
            done: 0,
        }
    }

    /// The extra passes owed after units `done .. done + units`: ⌊e·(done + units)⌋ − ⌊e·done⌋,
    /// so that over n units there are ⌊e·n⌋ of them, however the units are grouped.
    fn owed(&self, units: u64) -> u64 {
        let at = |n: u64| (self.extra * n as f64).floor() as u64;
        at(self.done + units) - at(self.done)
    }

    /// `units` units of work are done: run `pass` as many times as they owe; how many.
    #[inline]
    pub(crate) fn after(&mut self, units: u64, mut pass: impl FnMut() -> f64) -> u64 {
        if self.extra == 0.0 {
            return 0;
        }
        let owed = self.owed(units);
        for _ in 0..owed {
            std::hint::black_box(pass());
        }
        self.done += units;
        owed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count of passes: F − 1 per unit, fractions spread, none unslowed; grouping units
    /// changes nothing.
    #[test]
    fn passes_are_counted() {
        let count = |factor: f64, groups: &[u64]| {
            let mut s = Slowdown::new(factor);
            let mut n = 0u64;
            for &u in groups {
                s.after(u, || {
                    n += 1;
                    0.0
                });
            }
            n
        };
        assert_eq!(count(1.0, &[1; 10]), 0);
        assert_eq!(count(4.0, &[1; 10]), 30);
        assert_eq!(count(2.5, &[1; 10]), 15);
        assert_eq!(count(2.5, &[4, 3, 3]), 15);
        assert_eq!(count(20.0, &[1, 1]), 38);
    }
}
