use super::*;
use crate::config::{SizeSpec, Variant};
use chan_core::backend::Collective;
use chan_threads::World;

fn report(variant: Variant) -> Report {
    let cfg = Config {
        method: crate::method::Jacobi::new(variant).into(),
        size: SizeSpec::Global(Dims::new(8, 6, 6)),
        ..Config::default()
    };
    let plan = cfg.plan(2).unwrap();
    let records = World::new(2)
        .unwrap()
        .run(|ctx| crate::Solve::new(&cfg).run(ctx).unwrap());
    Report::new(
        RunConfig::new("threads", 2, &plan, &cfg, ReductionKind::Tree),
        records,
    )
}

/// What `aiac run --json` writes, `aiac report` reads back as the same value: channel
/// statistics (histograms included), histories and the configuration.
#[test]
fn a_report_round_trips_through_json() {
    for v in [Variant::Sync, Variant::Async, Variant::Racy] {
        let r = report(v);
        assert!(r.ranks.iter().all(|k| !k.channels.is_empty()));
        let text = serde_json::to_string_pretty(&r).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r, "{v}");
    }
}

/// A record whose residuals are not finite (a diverged run) is gathered, typed, and its
/// report is written and read back: the values read back are NaN.
#[test]
fn records_with_values_that_are_not_finite_are_gathered_and_read_back() {
    let r = report(Variant::Sync);
    let records = World::new(2).unwrap().run(|ctx| {
        let mut rec = r.ranks[ctx.rank()].clone();
        rec.residual.true_residual = f64::INFINITY;
        rec.residual.initial_norm = f64::NAN;
        rec.residual.reported = Some(f64::NAN);
        rec.history = vec![crate::progress::HistoryPoint(0, f64::NEG_INFINITY, 0.0)].into();
        rec.certifications = vec![Certification {
            iteration: 1,
            reported: None,
            true_residual: f64::NAN,
            accepted: false,
        }];
        gather_records(ctx, &rec).unwrap()
    });
    let ranks = records[0].clone().expect("rank 0 gathers");
    assert_eq!(ranks.len(), 2);
    let rec = &ranks[1];
    assert!(rec.residual.true_residual.is_nan());
    assert!(rec.residual.initial_norm.is_nan());
    assert_eq!(rec.residual.reported, None);
    assert!(rec.history[0].residual().is_nan());
    assert!(rec.certifications[0].true_residual.is_nan());
    let report = Report::new(r.config.clone(), ranks);
    let text = serde_json::to_string_pretty(&report).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    assert!(back.residual.true_residual.is_nan());
    assert!(back.table().contains("NaN"), "{}", back.table());
}

#[test]
fn status_tells_an_unconfirmed_claim_from_the_iteration_limit() {
    let mut r = report(Variant::Sync);
    assert_eq!(r.status(), "converged");
    r.converged = false;
    r.stop = StopReason::MaxIters;
    assert_eq!(r.status(), "max_iters");
    r.stop = StopReason::Criterion;
    assert_eq!(r.status(), "not_converged");
}
