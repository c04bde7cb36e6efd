//! A serial solver of the whole grid with the reference kernels: the oracle the parallel
//! variants are tested against ("serial and parallel results must agree"). It shares no code
//! with the parallel solvers beyond [`Problem`] and the reference kernels: its own array, its
//! own boundary set-up, its own loop.

use crate::geometry::{Dims, GlobalIdx};
use crate::kernel::{residual_sq_reference, sweep_reference, Shape};
use crate::problem::{Problem, StopCriterion};

/// The outcome of a serial run.
#[derive(Debug, Clone)]
pub struct SerialRun {
    /// Sweeps done.
    pub iterations: u64,
    /// (iteration k, relative residual of u_k) at every check, as the sync variant records.
    pub history: Vec<(u64, f64)>,
    /// The final iterate's interior, x fastest.
    pub solution: Vec<f64>,
    /// Its value of the stopping criterion.
    pub true_residual: f64,
    /// Its largest error against the exact solution, where the problem has one.
    pub error_max: Option<f64>,
}

/// Jacobi on the whole grid with the sync variant's schedule: check every `check_every`
/// sweeps, stop at the first check whose residual meets `criterion` and whose final iterate
/// does too, or after `max_iters` sweeps.
pub fn solve(
    problem: &Problem,
    global: Dims,
    criterion: StopCriterion,
    check_every: u64,
    max_iters: u64,
) -> SerialRun {
    let (sh, h, mut u, rhs) = start(problem, global);
    let mut next = u.clone();
    let res0 = residual_sq_reference(&sh, &u, rhs.as_deref());
    let mut it = 0;
    let mut history = Vec::new();
    let mut true_residual = criterion.measure(res0, res0);
    if !criterion.met(true_residual) {
        loop {
            let r = sweep_reference(&sh, &u, rhs.as_deref(), &mut next);
            std::mem::swap(&mut u, &mut next);
            it += 1;
            if it % check_every == 0 {
                let v = criterion.measure(r, res0);
                history.push((it - 1, v));
                if criterion.met(v) {
                    let t = criterion.measure(residual_sq_reference(&sh, &u, rhs.as_deref()), res0);
                    if criterion.met(t) {
                        break;
                    }
                }
            }
            if it >= max_iters {
                break;
            }
        }
        true_residual = criterion.measure(residual_sq_reference(&sh, &u, rhs.as_deref()), res0);
    }
    let mut solution = Vec::with_capacity(global.volume());
    let mut error_max = Some(0.0f64);
    for z in 1..=global.z {
        for y in 1..=global.y {
            let b = sh.index(1, y, z);
            solution.extend_from_slice(&u[b..b + global.x]);
            for x in 1..=global.x {
                let pos = [x as f64 * h[0], y as f64 * h[1], z as f64 * h[2]];
                error_max = match (error_max, problem.exact(pos)) {
                    (Some(e), Some(v)) => Some(e.max((u[sh.index(x, y, z)] - v).abs())),
                    _ => None,
                };
            }
        }
    }
    SerialRun {
        iterations: it,
        history,
        solution,
        true_residual,
        error_max,
    }
}

/// The whole grid's start: its shape, spacing, the starting iterate (Dirichlet values on the
/// edge) and `h² f` where the problem has a source.
#[allow(clippy::type_complexity)]
pub(crate) fn start(
    problem: &Problem,
    global: Dims,
) -> (Shape, [f64; 3], Vec<f64>, Option<Vec<f64>>) {
    let sh = Shape::new(global);
    let h = [
        1.0 / (global.x + 1) as f64,
        1.0 / (global.y + 1) as f64,
        1.0 / (global.z + 1) as f64,
    ];
    let mut u = vec![0.0; sh.len];
    let mut rhs: Option<Vec<f64>> = None;
    for z in 0..=global.z + 1 {
        for y in 0..=global.y + 1 {
            for x in 0..=global.x + 1 {
                let g = GlobalIdx { x, y, z };
                let pos = [x as f64 * h[0], y as f64 * h[1], z as f64 * h[2]];
                let edge = x == 0
                    || y == 0
                    || z == 0
                    || x == global.x + 1
                    || y == global.y + 1
                    || z == global.z + 1;
                u[sh.index(x, y, z)] = if edge {
                    problem.boundary(g, pos)
                } else {
                    problem.initial(g, pos)
                };
                if let (false, Some(f)) = (edge, problem.source(pos, h[0])) {
                    rhs.get_or_insert_with(|| vec![0.0; sh.len])[sh.index(x, y, z)] = f;
                }
            }
        }
    }
    (sh, h, u, rhs)
}

/// The relative residual ‖b − A u‖/‖b − A u₀‖ of a whole-grid interior `solution` (x fastest),
/// computed with the reference kernel on the whole grid: an oracle for an assembled
/// parallel solution.
pub fn relative_residual(problem: &Problem, global: Dims, solution: &[f64]) -> f64 {
    let (sh, _, mut u, rhs) = start(problem, global);
    let res0 = residual_sq_reference(&sh, &u, rhs.as_deref());
    let mut k = 0;
    for z in 1..=global.z {
        for y in 1..=global.y {
            let b = sh.index(1, y, z);
            u[b..b + global.x].copy_from_slice(&solution[k..k + global.x]);
            k += global.x;
        }
    }
    (residual_sq_reference(&sh, &u, rhs.as_deref()) / res0).sqrt()
}
