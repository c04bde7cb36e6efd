//! The Krylov kernels of one block (CG's in double precision, multisplitting's inner CG in
//! single), timed interleaved (each kernel once a round, every round) so that a neighbour's
//! load slows them all alike; each kernel's best round counts. Prints nanoseconds per owned
//! point for a 24³ block (its vectors in cache) and a 64³ block (in memory).
//!
//! `cargo bench -p jacobi --bench linalg_ab`; `-- ROUNDS` sets the rounds (default 20).

use jacobi::bench_api::KrylovBlock;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    for n in [24, 64] {
        let mut block = KrylovBlock::new(n);
        let points = block.points();
        let reps = (2_000_000 / points).max(1);
        let mut best = [f64::INFINITY; KrylovBlock::KERNELS.len()];
        for _ in 0..rounds {
            for (kernel, b) in best.iter_mut().enumerate() {
                let t = Instant::now();
                for _ in 0..reps {
                    black_box(block.run(kernel));
                }
                let per_point = t.elapsed().as_secs_f64() / (reps * points) as f64;
                *b = b.min(per_point * 1e9);
            }
        }
        for (name, t) in KrylovBlock::KERNELS.iter().zip(best) {
            println!("{n:3}^3 {name:20} {t:8.4} ns/point");
        }
    }
}
