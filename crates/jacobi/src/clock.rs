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

/// Told, after each of the solvers' computations (a sweep, a residual, a Krylov kernel), how
/// long it took on the machine's clock ([`set_compute_hook`]).
static COMPUTE_HOOK: OnceLock<fn(Duration)> = OnceLock::new();

/// Call `hook` after each computation of the solvers with the time it took on the machine's
/// monotonic clock, from now on in this process; false if a hook was set before (it stays).
/// aiac's SMPI build uses it to inject the time of the solvers' kernels alone into the
/// simulation (`AIAC_SMPI_COMPUTE=kernels`, docs/scale.md), where SMPI would otherwise
/// measure every instruction between two MPI calls.
pub fn set_compute_hook(hook: fn(Duration)) -> bool {
    COMPUTE_HOOK.set(hook).is_ok()
}

/// A reading of the solvers' clock, like [`std::time::Instant`], and of the machine's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Instant {
    at: f64,
    machine: std::time::Instant,
}

impl Instant {
    pub(crate) fn now() -> Self {
        let machine = std::time::Instant::now();
        let at = match CLOCK.get() {
            Some(clock) => clock(),
            None => machine
                .duration_since(*ORIGIN.get_or_init(|| machine))
                .as_secs_f64(),
        };
        Instant { at, machine }
    }

    /// The end of a computation that began at this reading: the compute hook learns how long
    /// it took on the machine's clock, then the time since this reading on the solvers' clock
    /// (which includes what the hook injected).
    pub(crate) fn computed(&self) -> Duration {
        if let Some(hook) = COMPUTE_HOOK.get() {
            hook(self.machine.elapsed());
        }
        self.elapsed()
    }

    /// Time since this reading (zero if the clock read less since).
    pub(crate) fn elapsed(&self) -> Duration {
        Self::now().duration_since(*self)
    }

    /// Time from `earlier` to this reading (zero if `earlier` is later).
    pub(crate) fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_secs_f64((self.at - earlier.at).max(0.0))
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
