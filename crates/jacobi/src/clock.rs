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

/// What a computation of the solvers did, in the units a cost model charges
/// ([`set_compute_hook`]): under SimGrid's SMPI with modelled computation, aiac's SMPI build
/// injects `sweep_points × a + pass_points × b + bytes × c` seconds of simulated time for it,
/// with coefficients calibrated on a real machine (docs/scale.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Points updated by a Jacobi sweep (the 7-point stencil, the residual accumulated with it).
    pub sweep_points: u64,
    /// Points read or copied by another pass over a block: a residual, a copy of the iterate,
    /// the slow rank's extra passes.
    pub pass_points: u64,
    /// Bytes packed into a message or unpacked from one.
    pub bytes: u64,
    /// A computation the model has no units for (the Krylov kernels, multisplitting's inner
    /// solves, the deep halo's probe): the hook is given its time on the machine's clock.
    pub unmodelled: bool,
}

impl Work {
    /// `n` points of a sweep.
    pub fn sweep(n: u64) -> Self {
        Work {
            sweep_points: n,
            ..Work::default()
        }
    }

    /// `n` points of another pass over a block.
    pub fn pass(n: u64) -> Self {
        Work {
            pass_points: n,
            ..Work::default()
        }
    }

    /// `n` bytes packed or unpacked.
    pub fn bytes(n: u64) -> Self {
        Work {
            bytes: n,
            ..Work::default()
        }
    }

    /// A computation without units in the model.
    pub fn unmodelled() -> Self {
        Work {
            unmodelled: true,
            ..Work::default()
        }
    }
}

/// A cost model of the solvers' computations: seconds per unit of [`Work`] (aiac's SMPI build
/// injects its times under modelled computation, docs/scale.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Seconds per point of a sweep.
    pub sweep: f64,
    /// Seconds per point of another pass over a block.
    pub pass: f64,
    /// Seconds per byte packed or unpacked.
    pub byte: f64,
}

impl CostModel {
    /// `sweep=S,pass=P,byte=B`, each a finite number of seconds, not below 0.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (mut sweep, mut pass, mut byte) = (None, None, None);
        for item in s.split(',') {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not key=value"))?;
            let v: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{key}={value:?} is not a number of seconds"))?;
            let slot = match key.trim() {
                "sweep" => &mut sweep,
                "pass" => &mut pass,
                "byte" => &mut byte,
                other => return Err(format!("unknown coefficient {other:?}")),
            };
            *slot = Some(v);
        }
        match (sweep, pass, byte) {
            (Some(sweep), Some(pass), Some(byte)) => Ok(CostModel { sweep, pass, byte }),
            _ => Err("expected sweep=S,pass=P,byte=B".into()),
        }
    }

    /// The simulated seconds of `work` that took `took` here.
    pub fn cost(&self, took: Duration, work: Work) -> f64 {
        if work.unmodelled {
            return took.as_secs_f64();
        }
        work.sweep_points as f64 * self.sweep
            + work.pass_points as f64 * self.pass
            + work.bytes as f64 * self.byte
    }
}

/// Told, after each of the solvers' computations (a sweep, a residual, a pack or unpack of a
/// message, a Krylov kernel), how long it took on the machine's clock and what it did
/// ([`set_compute_hook`]).
static COMPUTE_HOOK: OnceLock<fn(Duration, Work)> = OnceLock::new();

/// Call `hook` after each computation of the solvers with the time it took on the machine's
/// monotonic clock and the [`Work`] it did, from now on in this process; false if a hook was
/// set before (it stays). No MPI call happens inside a computation so told. aiac's SMPI build
/// uses it to inject the computation into the simulation from a cost model
/// (`AIAC_SMPI_COMPUTE=modelled`, docs/scale.md), where SMPI would otherwise measure every
/// instruction between two MPI calls.
pub fn set_compute_hook(hook: fn(Duration, Work)) -> bool {
    COMPUTE_HOOK.set(hook).is_ok()
}

/// Tell the compute hook, if any, of a computation that took `took` on the machine's clock.
#[inline]
pub(crate) fn computed(took: Duration, work: Work) {
    if let Some(hook) = COMPUTE_HOOK.get() {
        hook(took, work);
    }
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

    /// The end of a computation that began at this reading and did `work`: the compute hook
    /// learns how long it took on the machine's clock and what it did, then the time since
    /// this reading on the solvers' clock (which includes what the hook injected).
    pub(crate) fn computed(&self, work: Work) -> Duration {
        computed(self.machine.elapsed(), work);
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
    #[test]
    fn the_model_charges_its_units_and_refuses_bad_coefficients() {
        let m = CostModel::parse("sweep=2e-9, pass=1e-9,byte=0.5e-9").unwrap();
        let w = Work {
            sweep_points: 1000,
            pass_points: 100,
            bytes: 4000,
            unmodelled: false,
        };
        let c = m.cost(Duration::from_secs(1), w);
        assert!((c - (2e-6 + 1e-7 + 2e-6)).abs() < 1e-15, "{c}");
        // Without units: the time measured here.
        assert_eq!(m.cost(Duration::from_millis(3), Work::unmodelled()), 0.003);
        for bad in [
            "sweep=1e-9,pass=1e-9",
            "sweep=x,pass=1,byte=1",
            "sweep=-1,pass=1,byte=1",
            "sweep=1,pass=1,byte=1,flop=2",
            "sweep=inf,pass=1,byte=1",
            "",
        ] {
            assert!(CostModel::parse(bad).is_err(), "{bad}");
        }
    }
}
