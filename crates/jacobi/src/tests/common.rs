//! Helpers shared by the crate's tests.

use crate::field::assemble;
use crate::{Config, Dims, Jacobi, Plan, RankRecord, SizeSpec, StopCriterion, Variant};
use chan_threads::World;

/// A small configuration: global grid `g`, the given variant.
pub fn cfg(global: Dims, variant: Variant) -> Config {
    Config {
        method: Jacobi::new(variant).into(),
        size: SizeSpec::Global(global),
        ..Config::default()
    }
}

/// With tolerance `tol`.
pub fn with_tol(mut c: Config, tol: f64) -> Config {
    c.criterion = StopCriterion::RelativeResidual { tol };
    c
}

/// Run on the threads backend with `n` ranks: the records and the assembled global solution.
///
/// One run at a time. How many outer iterations an async run takes depends on how evenly its
/// ranks get the cores, and the tests assert about it. With two runs of up to 8 ranks each at
/// once on 2 cores, the async multisplitting at 8 ranks took 71, 110, 92 and 148 outer
/// iterations in four runs of the crate's tests (the test allows 117); one run at a time, 69,
/// 79, 69, 83 and 72.
pub fn run_threads(c: &Config, n: usize) -> (Vec<RankRecord>, Vec<f64>, Plan) {
    run_hybrid(c, n, 1)
}

/// As [`run_threads`], each rank sweeping its block with `tpr` workers (hybrid ranks).
pub fn run_hybrid(c: &Config, n: usize, tpr: usize) -> (Vec<RankRecord>, Vec<f64>, Plan) {
    static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let plan = c.plan(n).expect("valid configuration");
    let outs = World::new(n).unwrap().run(|ctx| {
        crate::dispatch::solve_rank(
            ctx,
            c,
            &plan,
            None,
            true,
            crate::hybrid::RankTeam::alone(tpr),
        )
        .expect("run failed")
    });
    let blocks: Vec<_> = outs
        .iter()
        .map(|o| {
            let field = o.field.as_ref().expect("kept on request");
            (field.geometry().clone(), field.owned_values())
        })
        .collect();
    let records = outs.into_iter().map(|o| o.record).collect();
    (records, assemble(plan.global, &blocks), plan)
}

/// Relative difference, 0 for two zeros.
pub fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

/// Run on the shared-memory backend with `n` threads: the records, the global solution and
/// the decomposition.
pub fn run_shared(c: &Config, n: usize) -> (Vec<RankRecord>, Vec<f64>, Plan) {
    let plan = c.shared_plan(n).expect("valid configuration");
    let o = crate::shared::solve(c, &plan, None).expect("run failed");
    (o.records, o.solution, o.plan)
}

/// A deterministic pseudo-random array (xorshift), values in [0, 1): kernel inputs for tests.
pub fn noise(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}
