//! The clocks and the computation: the kernels' busy wait, the node's monotonic clock, medians.

use nix::time::{clock_gettime, ClockId};
use std::time::Instant;

/// Spin until `deadline`: the kernel's computation (no MPI call inside).
pub(crate) fn compute_until(deadline: Instant) {
    let mut x = 1.0f64;
    while Instant::now() < deadline {
        for _ in 0..64 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
    }
    std::hint::black_box(x);
}

/// The median of `v` (sorted in place); 0 for none.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// `CLOCK_MONOTONIC` in seconds: one clock for every process of a node (across nodes, the
/// probe estimates the offset). It cannot fail on Linux; a failure reads as 0, which would
/// only make every size "rendezvous".
pub(crate) fn mono() -> f64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn mono_moves_forward() {
        let a = mono();
        compute_until(Instant::now() + std::time::Duration::from_millis(2));
        let b = mono();
        assert!(a > 0.0 && b - a >= 0.002, "{a} {b}");
    }
}
