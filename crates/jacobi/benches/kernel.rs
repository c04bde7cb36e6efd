//! Kernel rate on one 50³ block (the paper's default per rank), in updates per second
//! (criterion's "elements/s"), all on the same 32-byte-aligned arrays of aiac's layout
//! ([`jacobi::bench_api::Grid`]): aiac's fused sweep (update + residual), the reference sweep,
//! the paper's structure (sweep, then copy back), and the baseline, a plain C sweep (update
//! only) with pointer swap compiled `-O3 -march=native` by build.rs, in `* (1/6)` and `/ 6`
//! forms; and the C sweep once more on plain, unaligned `Vec`s, as C code would get them
//! from `malloc`.
//!
//! `cargo bench -p jacobi --bench kernel`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use jacobi::bench_api::{self as kernel, Grid, Shape};
use jacobi::Dims;

#[cfg(jacobi_c_baseline)]
mod c {
    unsafe extern "C" {
        pub fn aiac_c_sweep_div(nx: usize, ny: usize, nz: usize, u: *const f64, unew: *mut f64);
        pub fn aiac_c_sweep_mul(nx: usize, ny: usize, nz: usize, u: *const f64, unew: *mut f64);
    }
}

/// A block with a smooth start, so no value is denormal or zero.
fn block(sh: &Shape) -> Grid {
    let v: Vec<f64> = (0..sh.len).map(|i| 1.0 + (i % 97) as f64 * 1e-3).collect();
    Grid::from_slice(&v)
}

fn kernels(cr: &mut Criterion) {
    let n = 50;
    let sh = Shape::new(Dims::cube(n));
    let mut g = cr.benchmark_group("kernel 50^3");
    g.throughput(Throughput::Elements((n * n * n) as u64));

    let (mut u, mut v) = (block(&sh), block(&sh));
    g.bench_function("fused (aiac, update + residual)", |b| {
        b.iter(|| {
            let r = kernel::sweep(&sh, &u, None, &mut v);
            std::mem::swap(&mut u, &mut v);
            black_box(r)
        })
    });
    g.bench_function("reference sweep", |b| {
        b.iter(|| {
            let r = kernel::sweep_reference(&sh, &u, None, &mut v);
            std::mem::swap(&mut u, &mut v);
            black_box(r)
        })
    });
    g.bench_function("paper: sweep then copy", |b| {
        b.iter(|| black_box(kernel::sweep_then_copy(&sh, &mut u, None, &mut v)))
    });
    // Rows begun at x = 1 (aligned) and at x = 2, 3 (not), all n − 2 points long: why a deep
    // halo's sweeps begin their rows on aligned points (deep.rs, "Rows").
    for start in 1..=3 {
        let r = kernel::Region {
            x: start..start + n - 2,
            y: 1..n + 1,
            z: 1..n + 1,
        };
        let name = format!("step, rows of {} from x = {start}", n - 2);
        g.bench_function(name, |b| {
            b.iter(|| {
                kernel::step_region(&sh, &u, None, &mut v, &r);
                std::mem::swap(&mut u, &mut v);
            })
        });
    }
    #[cfg(jacobi_c_baseline)]
    {
        // The C code indexes with the unpadded row length n + 2: give it arrays of that
        // layout, aligned like aiac's (x = 1 of row 0 on 32 bytes; n + 2 = 52 keeps every row
        // aligned), and unaligned ones.
        let plain = (n + 2) * (n + 2) * (n + 2);
        let fill = |a: &mut [f64]| {
            for (i, x) in a.iter_mut().enumerate() {
                *x = 1.0 + (i % 97) as f64 * 1e-3;
            }
        };
        let (mut cu, mut cv) = (Grid::new(plain, 0.0), Grid::new(plain, 0.0));
        fill(&mut cu);
        fill(&mut cv);
        type Sweep = unsafe extern "C" fn(usize, usize, usize, *const f64, *mut f64);
        let forms: [(&str, Sweep); 2] = [
            ("C -O3 -march=native, *(1/6)", c::aiac_c_sweep_mul),
            ("C -O3 -march=native, /6", c::aiac_c_sweep_div),
        ];
        for (name, f) in forms {
            g.bench_function(name, |b| {
                b.iter(|| {
                    // SAFETY: cu and cv are distinct live arrays of (n+2)³ f64, which is what
                    // the C sweep reads (u) and writes (unew) for an n³ block; they do not
                    // overlap, as its `restrict` qualifiers require.
                    unsafe { f(n, n, n, cu.as_ptr(), cv.as_mut_ptr()) };
                    std::mem::swap(&mut cu, &mut cv);
                })
            });
        }
        // Unaligned: shift the arrays by one element from the aligned position.
        let (mut pu, mut pv) = (Grid::new(plain + 1, 0.0), Grid::new(plain + 1, 0.0));
        fill(&mut pu);
        fill(&mut pv);
        g.bench_function("C -O3 -march=native, *(1/6), unaligned", |b| {
            b.iter(|| {
                let (a, bb) = (&pu[1..], &mut pv[1..]);
                // SAFETY: as above: two distinct arrays of (n+2)³ f64 (the tails after the
                // first element of arrays of (n+2)³ + 1).
                unsafe { c::aiac_c_sweep_mul(n, n, n, a.as_ptr(), bb.as_mut_ptr()) };
                std::mem::swap(&mut pu, &mut pv);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
