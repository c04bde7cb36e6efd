//! The Krylov kernels of one block with their vectors, for `benches/linalg_ab.rs` only (through
//! `bench_api`): CG's in double precision and multisplitting's inner CG in single, on the
//! 7-point Laplacian with no preconditioner.

use crate::geometry::Dims;
use crate::kernel::{Region, Shape};
use crate::linalg::{self, CgVectors, PipeVectors, SEVEN_POINT};

/// One `n`³ block's vectors, and a run of each kernel on them.
#[derive(Debug)]
pub struct KrylovBlock {
    sh: Shape,
    fixed: [Vec<f64>; 5],
    y: Vec<f64>,
    r: Vec<f64>,
    p: Vec<f64>,
    six: [Vec<f64>; 6],
    fixed32: [Vec<f32>; 2],
    p32: Vec<f32>,
    y32: Vec<f32>,
    d32: Vec<f32>,
    s32: Vec<f32>,
}

/// Smooth values away from zero, so none is denormal.
fn block(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| 1.0 + ((i * 7 + seed * 13) % 97) as f64 * 1e-3)
        .collect()
}

fn single(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

impl KrylovBlock {
    /// The kernels [`KrylovBlock::run`] runs, by number.
    pub const KERNELS: [&'static str; 9] = [
        "apply",
        "residual",
        "direction",
        "direction_apply",
        "cg_update",
        "pipe_update",
        "residual32",
        "direction_apply32",
        "update32",
    ];

    /// The vectors of an `n`³ block.
    pub fn new(n: usize) -> Self {
        let sh = Shape::new(Dims::cube(n));
        let len = sh.len;
        let fixed = [0, 1, 2, 3, 4].map(|s| block(len, s));
        let (y, r) = (block(len, 5), block(len, 6));
        KrylovBlock {
            sh,
            fixed32: [single(&block(len, 14)), single(&fixed[3])],
            p32: single(&block(len, 15)),
            y32: single(&y),
            d32: single(&block(len, 16)),
            s32: single(&r),
            fixed,
            y,
            r,
            p: block(len, 7),
            six: [8, 9, 10, 11, 12, 13].map(|s| block(len, s)),
        }
    }

    /// Owned points of the block.
    pub fn points(&self) -> usize {
        self.sh.n.x * self.sh.n.y * self.sh.n.z
    }

    /// One run of kernel `kernel` ([`KrylovBlock::KERNELS`]); what it sums.
    pub fn run(&mut self, kernel: usize) -> f64 {
        let sh = &self.sh;
        let [u, f, z, q, n] = &self.fixed;
        let [r32, q32] = &self.fixed32;
        match kernel {
            0 => linalg::apply(sh, SEVEN_POINT, &self.p, &mut self.y, &Region::all(sh.n)),
            1 => linalg::residual(sh, SEVEN_POINT, u, Some(f), &mut self.r, None)[0],
            2 => {
                linalg::direction(sh, z, 0.5, &mut self.p);
                0.0
            }
            3 => linalg::direction_apply(sh, SEVEN_POINT, z, 0.5, &mut self.p, &mut self.y),
            4 => {
                let (x, r) = (&mut self.six[0], &mut self.r);
                let v = CgVectors {
                    x,
                    r,
                    p: z,
                    q,
                    pc: None,
                };
                linalg::cg_update(sh, 1e-4, v)[1]
            }
            5 => {
                let [x, r, w, z, s, p] = &mut self.six;
                let v = PipeVectors {
                    x,
                    r,
                    w,
                    n,
                    z,
                    s,
                    p,
                    pc: None,
                };
                linalg::pipe_update(sh, 1e-4, 0.5, v)[0]
            }
            6 => linalg::residual(sh, SEVEN_POINT, u, Some(f), &mut self.s32, None)[0],
            7 => {
                let (p, y) = (&mut self.p32, &mut self.y32);
                linalg::direction_apply(sh, SEVEN_POINT as f32, r32, 0.5, p, y)
            }
            _ => {
                let (d, s) = (&mut self.d32, &mut self.s32);
                linalg::update(sh, 1e-4, 1.0, d, s, r32, q32)
            }
        }
    }
}
