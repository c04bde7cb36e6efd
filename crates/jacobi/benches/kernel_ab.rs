//! The kernel comparison of `benches/kernel.rs` made robust to a shared, busy machine: the
//! kernels run interleaved (A, B, C, A, B, C, …) and each one's best round counts, so a
//! neighbour's load slows them all alike instead of whichever criterion happened to be
//! measuring. Prints updates per second for 50³ blocks.
//!
//! `cargo bench -p jacobi --bench kernel_ab`

use jacobi::bench_api::{self as kernel, Grid, Shape};
use jacobi::Dims;
use std::time::Instant;

#[cfg(jacobi_c_baseline)]
unsafe extern "C" {
    fn aiac_c_sweep_mul(nx: usize, ny: usize, nz: usize, u: *const f64, unew: *mut f64);
}

fn main() {
    let n = 50;
    let sh = Shape::new(Dims::cube(n));
    let fill = |len: usize| {
        let v: Vec<f64> = (0..len).map(|i| 1.0 + (i % 97) as f64 * 1e-3).collect();
        Grid::from_slice(&v)
    };
    let (mut u, mut v) = (fill(sh.len), fill(sh.len));
    let plain = (n + 2) * (n + 2) * (n + 2);
    let (mut cu, mut cv) = (fill(plain), fill(plain));
    let (mut pu, mut pv) = (fill(plain + 1), fill(plain + 1));
    let reps = 200;
    let mut names = vec![
        "fused (aiac, update + residual)",
        "step (aiac, update only)",
    ];
    if cfg!(jacobi_c_baseline) {
        names.push("C -O3 -march=native, *(1/6)");
        names.push("C -O3 -march=native, *(1/6), unaligned");
    }
    let mut best = vec![f64::INFINITY; names.len()];
    for _round in 0..30 {
        for (k, b) in best.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..reps {
                match k {
                    0 => {
                        std::hint::black_box(kernel::sweep(&sh, &u, None, &mut v));
                        std::mem::swap(&mut u, &mut v);
                    }
                    1 => {
                        kernel::step(&sh, &u, None, &mut v);
                        std::mem::swap(&mut u, &mut v);
                    }
                    #[cfg(jacobi_c_baseline)]
                    2 => {
                        // SAFETY: two distinct live arrays of (n+2)³ f64, what the C sweep
                        // reads and writes for an n³ block.
                        unsafe { aiac_c_sweep_mul(n, n, n, cu.as_ptr(), cv.as_mut_ptr()) };
                        std::mem::swap(&mut cu, &mut cv);
                    }
                    #[cfg(jacobi_c_baseline)]
                    _ => {
                        let (a, o) = (&pu[1..], &mut pv[1..]);
                        // SAFETY: as above (the tails of two arrays of (n+2)³ + 1 f64).
                        unsafe { aiac_c_sweep_mul(n, n, n, a.as_ptr(), o.as_mut_ptr()) };
                        std::mem::swap(&mut pu, &mut pv);
                    }
                    #[cfg(not(jacobi_c_baseline))]
                    _ => unreachable!("no C baseline"),
                }
            }
            *b = b.min(t.elapsed().as_secs_f64() / reps as f64);
        }
    }
    let _ = (&mut cu, &mut cv, &mut pu, &mut pv);
    let points = (n * n * n) as f64;
    for (name, t) in names.iter().zip(&best) {
        println!("{name:45} {:6.3} G updates/s", points / t / 1e9);
    }
    if best.len() > 2 {
        println!("{:45} {:6.3}", "fused / C (aligned)", best[2] / best[0]);
        println!("{:45} {:6.3}", "step / C (aligned)", best[2] / best[1]);
        println!("{:45} {:6.3}", "fused / C (unaligned)", best[3] / best[0]);
    }
}
