//! Ratios that survive a noisy machine: the cases of one comparison are timed in short batches
//! taken round-robin (A, B, C, A, B, C, …), and each case's median time per iteration is kept.
//! Drift in the machine's speed (other tenants, frequency changes) then hits every case alike,
//! where timing each case in a window of its own (as criterion does) lets the drift land in
//! the ratio. Included by several benches with `#[path]`.

use std::time::Duration;

/// Batches of every case per table row: `AIAC_BENCH_ROUNDS` if set (more batches steady the
/// medians on a busy machine), else `default`.
pub fn rounds(default: usize) -> usize {
    match std::env::var("AIAC_BENCH_ROUNDS") {
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("AIAC_BENCH_ROUNDS must be a positive integer, got {v:?}"),
        },
        Err(_) => default,
    }
}

/// Median nanoseconds per iteration of each of `cases` cases. `run(case, iters)` runs `iters`
/// iterations of one case and returns their time. Batches are sized from a first run of the
/// case 0 to last about `batch`; `rounds` batches of every case are taken in turn.
pub fn medians(
    cases: usize,
    mut run: impl FnMut(usize, u64) -> Duration,
    batch: Duration,
    rounds: usize,
) -> Vec<f64> {
    let probe = 16;
    let per_iter = run(0, probe).as_secs_f64() / probe as f64;
    let iters = ((batch.as_secs_f64() / per_iter.max(1e-9)) as u64).clamp(1, 1_000_000);
    let mut samples = vec![Vec::with_capacity(rounds); cases];
    for _ in 0..rounds {
        for (case, s) in samples.iter_mut().enumerate() {
            s.push(run(case, iters).as_secs_f64() * 1e9 / iters as f64);
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
        .collect()
}

/// One line of a ratio table: each candidate's median against the baseline's (case 0).
pub fn print_row(group: &str, bytes: usize, names: &[&str], medians: &[f64]) {
    let base = medians[0];
    for (name, m) in names.iter().zip(medians).skip(1) {
        println!(
            "{group:<10} {bytes:>9} {:>12.1} ns {:>12.1} ns {:>7.2}×  {name}",
            m,
            base,
            m / base
        );
    }
}

/// The table's header.
pub fn print_header(title: &str, baseline: &str) {
    println!("\n{title}: median of interleaved batches, time per iteration (lower is better)");
    println!(
        "{:<10} {:>9} {:>15} {:>15} {:>8}  candidate",
        "pattern", "bytes", "candidate", baseline, "ratio"
    );
}
