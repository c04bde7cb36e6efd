//! The clock the distributed solvers time themselves with: the machine's monotonic clock, or
//! one the program installs once ([`set_clock`]), such as `MPI_Wtime` under SimGrid's SMPI,
//! where a rank's time is simulated and the machine's clock measures the whole simulation.

use std::sync::OnceLock;
use std::time::Duration;

/// The installed clock, seconds from any fixed origin; unset: the machine's monotonic clock.
static CLOCK: OnceLock<fn() -> f64> = OnceLock::new();
/// The machine clock's origin, taken at its first reading.
static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();

/// Time the solvers with `clock` (seconds from a fixed origin, never decreasing) instead of
/// the machine's monotonic clock, from now on in this process; false if a clock was set
/// before (it stays). Under SimGrid's SMPI every simulated rank runs in one process and its
/// time is the simulation's (`MPI_Wtime`); SMPI gives each rank its own copy of this crate's
/// statics.
pub fn set_clock(clock: fn() -> f64) -> bool {
    CLOCK.set(clock).is_ok()
}

/// A reading of the solvers' clock, like [`std::time::Instant`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct Instant(f64);

impl Instant {
    pub(crate) fn now() -> Self {
        Instant(match CLOCK.get() {
            Some(clock) => clock(),
            None => ORIGIN
                .get_or_init(std::time::Instant::now)
                .elapsed()
                .as_secs_f64(),
        })
    }

    /// Time since this reading (zero if the clock read less since).
    pub(crate) fn elapsed(&self) -> Duration {
        Self::now().duration_since(*self)
    }

    /// Time from `earlier` to this reading (zero if `earlier` is later).
    pub(crate) fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_secs_f64((self.0 - earlier.0).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_clock_moves_forward() {
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let e = t.elapsed();
        assert!(e >= Duration::from_millis(2), "{e:?}");
        assert_eq!(t.duration_since(Instant::now()), Duration::ZERO);
    }
}
