//! What the window benches (MPI, SHMEM) share: the cases, aiac's side of each, interleaved
//! timing (raw, aiac, raw, aiac, … in short batches) and the table. Rank 0 drives every
//! operation at rank 1, which takes no part (one-sided) and waits in the final collective.
//! Included with `#[path]`.

use chan_core::backend::RawWindow;
use chan_core::Window;
use std::time::{Duration, Instant};

/// Words moved by the put/get cases: 8 B and 64 KB.
pub const WORDS: [usize; 2] = [1, 8192];
/// Operations per flush in the throughput cases, by size.
pub fn burst(words: usize) -> usize {
    if words == 1 {
        64
    } else {
        16
    }
}

/// The operations a raw baseline provides (each completes at rank 1 before it returns, or,
/// for the bursts, `k` operations then one completion).
pub trait RawOps {
    fn put(&mut self, src: &[u64]);
    fn get(&mut self, dst: &mut [u64]);
    fn cas(&mut self, expected: u64, new: u64) -> u64;
    fn fadd(&mut self, delta: u64) -> u64;
    fn put_burst(&mut self, src: &[u64], k: usize);
    fn get_burst(&mut self, dst: &mut [Vec<u64>], words: usize);
    fn fadd_burst(&mut self, k: usize) -> u64;
}

/// One case: its name, the bytes per operation, operations per iteration.
pub struct Case {
    pub name: &'static str,
    pub bytes: usize,
    pub ops: usize,
}

/// Every case, in order.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for &w in &WORDS {
        v.push(Case {
            name: "put latency",
            bytes: 8 * w,
            ops: 1,
        });
        v.push(Case {
            name: "get latency",
            bytes: 8 * w,
            ops: 1,
        });
    }
    v.push(Case {
        name: "cas latency",
        bytes: 8,
        ops: 1,
    });
    v.push(Case {
        name: "fadd latency",
        bytes: 8,
        ops: 1,
    });
    for &w in &WORDS {
        v.push(Case {
            name: "put burst",
            bytes: 8 * w,
            ops: burst(w),
        });
        v.push(Case {
            name: "get burst",
            bytes: 8 * w,
            ops: burst(w),
        });
    }
    v.push(Case {
        name: "fadd burst",
        bytes: 8,
        ops: burst(1),
    });
    v
}

/// Buffers both sides use, made once.
pub struct Bufs {
    src: Vec<u64>,
    dst: Vec<u64>,
    many: Vec<Vec<u64>>,
}

impl Default for Bufs {
    fn default() -> Self {
        let max = *WORDS.iter().max().unwrap();
        Bufs {
            src: (0..max as u64).collect(),
            dst: vec![0; max],
            many: vec![vec![0; max]; burst(max).max(burst(1))],
        }
    }
}

/// Run `iters` iterations of case `c` with the raw baseline (`aiac == false`) or aiac.
pub fn run_case<R: RawWindow>(
    c: &Case,
    aiac: bool,
    raw: &mut impl RawOps,
    win: &mut Window<R, u64>,
    b: &mut Bufs,
    iters: u64,
) -> Duration {
    let w = c.bytes / 8;
    let t = Instant::now();
    let mut sink = 0u64;
    for _ in 0..iters {
        match (c.name, aiac) {
            ("put latency", false) => raw.put(&b.src[..w]),
            ("put latency", true) => win.put(1, 0, &b.src[..w]).unwrap(),
            ("get latency", false) => raw.get(&mut b.dst[..w]),
            ("get latency", true) => win.get(1, 0, &mut b.dst[..w]).unwrap(),
            // A compare that never matches (word 2 stays 0 on both sides): the same path every
            // time on both sides, and the common case of a probe that finds a slot taken.
            ("cas latency", false) => sink ^= raw.cas(u64::MAX, 1),
            ("cas latency", true) => sink ^= win.compare_and_swap(1, 2, u64::MAX, 1).unwrap(),
            ("fadd latency", false) => sink ^= raw.fadd(1),
            ("fadd latency", true) => sink ^= win.fetch_add(1, 0, 1).unwrap(),
            ("put burst", false) => raw.put_burst(&b.src[..w], c.ops),
            ("put burst", true) => {
                let src = &b.src[..w];
                win.epoch(|ep| {
                    for _ in 0..c.ops {
                        ep.put(1, 0, src)?;
                    }
                    Ok(())
                })
                .unwrap()
            }
            ("get burst", false) => raw.get_burst(&mut b.many[..c.ops], w),
            ("get burst", true) => {
                let many = &mut b.many[..c.ops];
                win.epoch(|ep| {
                    for d in many.iter_mut() {
                        let _ = ep.get_into(1, 0, &mut d[..w])?;
                    }
                    Ok(())
                })
                .unwrap()
            }
            ("fadd burst", false) => sink ^= raw.fadd_burst(c.ops),
            ("fadd burst", true) => {
                sink ^= win
                    .epoch(|ep| {
                        let first = ep.fetch_add(1, 1, 1)?;
                        for _ in 1..c.ops {
                            let _ = ep.fetch_add(1, 1, 1)?;
                        }
                        let done = ep.flush()?;
                        Ok(first.value(&done))
                    })
                    .unwrap()
            }
            _ => unreachable!(),
        }
    }
    std::hint::black_box(sink);
    t.elapsed()
}

/// Batches of each side per case: `AIAC_BENCH_ROUNDS` or 21.
pub fn rounds() -> usize {
    std::env::var("AIAC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(21)
}

/// Time every case, raw and aiac interleaved in batches of about 10 ms, and print the table:
/// median and minimum ns per operation of each side, and aiac over raw for both.
pub fn table<R: RawWindow>(title: &str, raw: &mut impl RawOps, win: &mut Window<R, u64>) {
    let mut b = Bufs::default();
    let rounds = rounds();
    println!("\n{title} ({rounds} interleaved batches per side; ns per operation)");
    println!(
        "{:<13} {:>7} {:>12} {:>12} {:>12} {:>12} {:>8} {:>8} {:>12}",
        "case",
        "bytes",
        "raw median",
        "aiac median",
        "raw min",
        "aiac min",
        "median×",
        "min×",
        "aiac Mop/s"
    );
    for c in cases() {
        // Warm up both sides, then size the batches from the raw side.
        run_case(&c, false, raw, win, &mut b, 8);
        run_case(&c, true, raw, win, &mut b, 8);
        let probe = run_case(&c, false, raw, win, &mut b, 32).as_secs_f64() / 32.0;
        let iters = ((0.01 / probe.max(1e-9)) as u64).clamp(4, 200_000);
        let mut s = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (side, v) in s.iter_mut().enumerate() {
                let d = run_case(&c, side == 1, raw, win, &mut b, iters);
                v.push(d.as_secs_f64() * 1e9 / (iters as f64 * c.ops as f64));
            }
        }
        let stat = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0])
        };
        let (rm, rn) = stat(&mut s[0]);
        let (am, an) = stat(&mut s[1]);
        println!(
            "{:<13} {:>7} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>7.3}× {:>7.3}× {:>12.3}",
            c.name,
            c.bytes,
            rm,
            am,
            rn,
            an,
            am / rm,
            an / rn,
            1e3 / am
        );
    }
}
