//! Watching a run: the [`Progress`] hook the caller supplies, and the convergence
//! [`History`] every rank records.
//!
//! The library prints nothing by itself. A caller that wants a progress line (the `aiac`
//! binary draws one on rank 0) passes a [`Progress`] to [`crate::Solve::hook`]; the solver calls it at a check (sync) or a completed round of
//! the non-blocking reduction (async, racy), at most once every [`PROGRESS_INTERVAL`]. Between
//! calls the solver only compares two durations: nothing is allocated, formatted or locked in
//! the iteration loop.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The solver calls a [`Progress`] hook at most once per this interval (10 times a second).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// What the solver tells a [`Progress`] hook.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressSample {
    /// Sweeps this rank has done.
    pub iteration: u64,
    /// The last value of the stopping criterion the solver saw (a sync check, or a round of the
    /// non-blocking reduction: computed from halos that may be stale).
    pub residual: f64,
    /// The tolerance it must fall below.
    pub tol: f64,
    /// Time since the solve started (after channel set-up).
    pub elapsed: Duration,
    /// `--max-iters`.
    pub max_iters: u64,
}

/// A hook that watches a run. Called from the solving thread of the rank (or shared-memory
/// thread 0) it was given to, at most once per 100 ms (`PROGRESS_INTERVAL`); it should return
/// quickly. `Sync` so that one hook can serve any thread.
pub trait Progress: Sync {
    /// A new sample.
    fn update(&self, sample: &ProgressSample);
}

/// Rate-limits calls to an optional [`Progress`] hook: the solver's side of it.
#[derive(Clone, Copy)]
pub(crate) struct ProgressGate<'a> {
    hook: Option<&'a dyn Progress>,
    next: Duration,
    tol: f64,
    max_iters: u64,
}

impl<'a> ProgressGate<'a> {
    pub(crate) fn new(hook: Option<&'a dyn Progress>, tol: f64, max_iters: u64) -> Self {
        ProgressGate {
            hook,
            next: Duration::ZERO,
            tol,
            max_iters,
        }
    }

    /// Offer a sample taken `elapsed` after the start; passed on when the interval has gone by.
    #[inline]
    pub(crate) fn offer(&mut self, iteration: u64, residual: f64, elapsed: Duration) {
        if let Some(h) = self.hook {
            if elapsed >= self.next {
                self.next = elapsed + PROGRESS_INTERVAL;
                h.update(&ProgressSample {
                    iteration,
                    residual,
                    tol: self.tol,
                    elapsed,
                    max_iters: self.max_iters,
                });
            }
        }
    }
}

/// One point of a convergence profile: `(iteration, residual, time_s)`.
///
/// * `.0`: the iteration k the value belongs to (sync: the residual of u_k, measured by the
///   sweep that computed u_{k+1}; async/racy: this rank's iteration count when the reduction
///   round completed);
/// * `.1`: the value of the stopping criterion (the relative residual, or the update norm);
/// * `.2`: seconds since the solve started on this rank.
///
/// In JSON: `[iteration, residual, time_s]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint(
    pub u64,
    #[serde(deserialize_with = "crate::record::nan_if_null")] pub f64,
    pub f64,
);

impl HistoryPoint {
    /// The iteration.
    pub fn iteration(&self) -> u64 {
        self.0
    }
    /// The value of the stopping criterion.
    pub fn residual(&self) -> f64 {
        self.1
    }
    /// Seconds since the solve started.
    pub fn time_s(&self) -> f64 {
        self.2
    }
}

/// A rank's convergence profile (the paper's Figures 8 and 9): a [`HistoryPoint`] at every
/// check (sync), every completed reduction round (async, racy) or every `check_every`
/// iterations (shared-memory async, racy), in order.
///
/// Bounded: it keeps at most [`History::CAP`] points (plus the last one), allocated once when
/// the solve starts. When full it drops every second point and from then on keeps every
/// second check, so a long run keeps an evenly thinned profile and recording never allocates.
/// Runs of up to `CAP` checks keep every one. Derefs to the slice of points.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    points: Vec<HistoryPoint>,
    /// Keep every `stride`-th check.
    stride: u64,
    /// Checks offered so far.
    checks: u64,
    /// The last check offered (kept at [`History::finish`] when thinning skipped it).
    last: Option<HistoryPoint>,
}

impl History {
    /// Points kept before thinning.
    pub const CAP: usize = 4096;

    /// An empty history with room for [`History::CAP`] points.
    pub fn new() -> Self {
        History {
            points: Vec::with_capacity(Self::CAP + 1),
            stride: 1,
            checks: 0,
            last: None,
        }
    }

    /// Offer one check. No allocation once created with [`History::new`].
    #[inline]
    pub(crate) fn record(&mut self, p: HistoryPoint) {
        let k = self.checks;
        self.checks += 1;
        self.last = Some(p);
        if !k.is_multiple_of(self.stride) {
            return;
        }
        if self.points.len() >= Self::CAP {
            self.thin();
            if !k.is_multiple_of(self.stride) {
                return;
            }
        }
        self.points.push(p);
    }

    /// Keep every second point, double the stride.
    #[cold]
    fn thin(&mut self) {
        let n = self.points.len();
        for i in 0..n.div_ceil(2) {
            self.points[i] = self.points[2 * i];
        }
        self.points.truncate(n.div_ceil(2));
        self.stride *= 2;
    }

    /// End of the run: keep the last check if thinning skipped it.
    pub(crate) fn finish(&mut self) {
        if let Some(l) = self.last {
            if self.points.last() != Some(&l) {
                self.points.push(l);
            }
        }
    }

    /// Checks offered in all (at least the number of points kept).
    pub fn checks(&self) -> u64 {
        self.checks
    }

    /// The points kept.
    pub fn points(&self) -> &[HistoryPoint] {
        &self.points
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

impl std::ops::Deref for History {
    type Target = [HistoryPoint];
    fn deref(&self) -> &[HistoryPoint] {
        &self.points
    }
}

impl From<Vec<HistoryPoint>> for History {
    fn from(points: Vec<HistoryPoint>) -> Self {
        History {
            checks: points.len() as u64,
            last: points.last().copied(),
            points,
            stride: 1,
        }
    }
}

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.points.serialize(s)
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<HistoryPoint>::deserialize(d).map(History::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    fn p(k: u64) -> HistoryPoint {
        HistoryPoint(k, 1.0 / (k + 1) as f64, k as f64 * 1e-3)
    }

    #[test]
    fn short_runs_keep_every_check() {
        let mut h = History::new();
        for k in 0..100 {
            h.record(p(k));
        }
        h.finish();
        assert_eq!(h.len(), 100);
        assert!(h.iter().enumerate().all(|(i, q)| q.0 == i as u64));
    }

    #[test]
    fn long_runs_thin_evenly_without_allocating() {
        let mut h = History::new();
        let cap = h.points.capacity();
        let n = 3 * History::CAP as u64 + 7;
        for k in 0..n {
            h.record(p(k));
            assert!(h.len() <= History::CAP);
        }
        h.finish();
        assert_eq!(h.points.capacity(), cap, "no reallocation");
        assert_eq!(h.checks(), n);
        assert_eq!(h[0].0, 0);
        assert_eq!(h.last().unwrap().0, n - 1, "the last check is kept");
        // Evenly spaced except the final point.
        let step = h[1].0 - h[0].0;
        assert_eq!(step, 4);
        for w in h[..h.len() - 1].windows(2) {
            assert_eq!(w[1].0 - w[0].0, step);
        }
        assert!(h.len() > History::CAP / 2);
    }

    #[test]
    fn json_is_an_array_of_triples() {
        let h = History::from(vec![HistoryPoint(3, 0.5, 0.25)]);
        let s = serde_json::to_string(&h).unwrap();
        assert_eq!(s, "[[3,0.5,0.25]]");
        let back: History = serde_json::from_str(&s).unwrap();
        assert_eq!(back, h);
    }

    struct Count(AtomicU64);
    impl Progress for Count {
        fn update(&self, _: &ProgressSample) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn the_gate_rate_limits() {
        let c = Count(AtomicU64::new(0));
        let mut g = ProgressGate::new(Some(&c), 1e-4, 10);
        for ms in 0..1000u64 {
            g.offer(ms, 1.0, Duration::from_millis(ms));
        }
        assert_eq!(c.0.load(Relaxed), 10, "once per 100 ms over one second");
        let mut none = ProgressGate::new(None, 1e-4, 10);
        none.offer(1, 1.0, Duration::ZERO);
    }
}
