//! Helpers shared by the integration tests.
#![allow(dead_code)]

use chan_threads::World;
use jacobi::field::assemble;
use jacobi::{Config, Dims, Plan, RankRecord, SizeSpec, StopCriterion, Variant};

/// A small configuration: global grid `g`, the given variant.
pub fn cfg(global: Dims, variant: Variant) -> Config {
    Config {
        variant,
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
pub fn run_threads(c: &Config, n: usize) -> (Vec<RankRecord>, Vec<f64>, Plan) {
    let plan = c.plan(n).expect("valid configuration");
    let outs = World::new(n)
        .unwrap()
        .run(|ctx| jacobi::solve_rank(ctx, c).expect("run failed"));
    let blocks: Vec<_> = outs
        .iter()
        .map(|o| (o.field.geometry().clone(), o.field.owned_values()))
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
