//! The leading rank's side of a two-rank channel bench (MPI, SHMEM): criterion's measurements,
//! then the table of ratios to the baseline from interleaved batches. The other rank runs each
//! case as the leader's partner, told which by a broadcast that each bench does in its own
//! library. Included with `#[path]`, next to `interleaved.rs`.

use crate::interleaved;
use criterion::{BenchmarkId, Criterion, Throughput};
use std::time::Duration;

/// The cases of a two-rank bench: every pattern × message length × implementation, numbered
/// `(pattern · lens + length) · impls + implementation`; implementation 0 is the baseline.
pub struct Cases {
    /// Criterion's group names are `{prefix}-{pattern}`.
    pub prefix: &'static str,
    /// Pattern names, in case order.
    pub patterns: &'static [&'static str],
    /// Message lengths in f64, in case order.
    pub lens: &'static [usize],
    /// Implementation names, baseline first.
    pub impls: &'static [&'static str],
    /// Patterns whose iteration moves one message; the others move two (there and back).
    pub one_way: &'static [&'static str],
    /// The ratio table's title.
    pub title: &'static str,
    /// The length of one interleaved batch.
    pub batch: Duration,
    /// Interleaved batches per row, unless `AIAC_BENCH_ROUNDS` says otherwise.
    pub rounds: usize,
}

impl Cases {
    /// (pattern, length index, implementation) of case `id`.
    pub fn split(&self, id: usize) -> (usize, usize, usize) {
        let (nl, ni) = (self.lens.len(), self.impls.len());
        (id / (nl * ni), (id / ni) % nl, id % ni)
    }

    fn id(&self, pattern: usize, len: usize, imp: usize) -> usize {
        (pattern * self.lens.len() + len) * self.impls.len() + imp
    }

    /// The leading rank: criterion's measurements (unless `AIAC_BENCH_RATIOS_ONLY` is set),
    /// then the ratio table. `drive(id, iters)` runs case `id` for `iters` iterations on both
    /// ranks (telling the other rank first) and returns this rank's time.
    pub fn lead(&self, mut drive: impl FnMut(usize, u64) -> Duration) {
        if std::env::var_os("AIAC_BENCH_RATIOS_ONLY").is_none() {
            let mut c = Criterion::default()
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2))
                .sample_size(20)
                .configure_from_args();
            for (s, pattern) in self.patterns.iter().enumerate() {
                let mut g = c.benchmark_group(format!("{}-{pattern}", self.prefix));
                let messages = if self.one_way.contains(pattern) { 1 } else { 2 };
                for (li, &len) in self.lens.iter().enumerate() {
                    g.throughput(Throughput::Bytes((messages * len * 8) as u64));
                    for (w, name) in self.impls.iter().enumerate() {
                        let id = self.id(s, li, w);
                        g.bench_function(BenchmarkId::new(*name, len * 8), |b| {
                            b.iter_custom(|iters| drive(id, iters))
                        });
                    }
                }
                g.finish();
            }
            c.final_summary();
        }
        interleaved::print_header(self.title, self.impls[0]);
        for (s, pattern) in self.patterns.iter().enumerate() {
            for (li, &len) in self.lens.iter().enumerate() {
                let m = interleaved::medians(
                    self.impls.len(),
                    |w, iters| drive(self.id(s, li, w), iters),
                    self.batch,
                    interleaved::rounds(self.rounds),
                );
                interleaved::print_row(pattern, len * 8, self.impls, &m);
            }
        }
    }
}
