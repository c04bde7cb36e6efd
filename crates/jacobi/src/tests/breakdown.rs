//! Where an iteration's time goes (`RankRecord::breakdown`), over the threads backend: for
//! every loop (Jacobi sync with each exchange and a deep halo, async, racy, multisplitting,
//! the Krylov solvers) the parts are disjoint stretches of the solve, so they add up to no
//! more than its time; the sweep is `compute_s` and the communication parts are `comm_s`;
//! at two ranks the parts a loop has are measured, and at one rank (no neighbour) there is
//! nothing to pack, send, wait for or unpack.

use super::common::*;
use crate::config::{Exchange, Inner};
use crate::method::Krylov;
use crate::{
    Breakdown, Config, Dims, Jacobi, KrylovSolver, Multisplit, RankRecord, ReductionKind, Report,
    RunConfig, Variant,
};

/// Sync Jacobi exchanging as `exchange`, `depth` planes deep, on 16×8×8.
fn jacobi(variant: Variant, exchange: Exchange, depth: u64) -> Config {
    let mut c = with_tol(cfg(Dims::new(16, 8, 8), variant), 1e-3);
    let mut j = Jacobi::new(variant);
    j.exchange = exchange;
    j.halo_depth = crate::config::HaloDepth::Fixed(depth);
    c.method = j.into();
    c.check_every = 10;
    c
}

/// The breakdown of `r`, checked against the record's other times (`what` names the run).
fn checked(r: &RankRecord, what: &str) -> Breakdown {
    let b = r
        .breakdown
        .unwrap_or_else(|| panic!("{what}: no breakdown"));
    let what = format!("{what}, rank {}: {b:?}", r.rank);
    assert!(b.parts().iter().all(|&v| v >= 0.0), "{what}");
    let measured: f64 = b.parts()[..6].iter().sum();
    assert!(
        measured <= r.time_s + 1e-9,
        "{what}: parts over {}",
        r.time_s
    );
    assert!(
        (measured + b.other_s - r.time_s).abs() < 1e-9,
        "{what}: other is the rest of {}",
        r.time_s
    );
    assert_eq!(b.sweep_s, r.compute_s, "{what}");
    assert!(
        (b.comm_s() - r.comm_s).abs() < 1e-9,
        "{what}: comm {}",
        r.comm_s
    );
    b
}

/// At two ranks each loop measures the parts it has; at one, none of the halo's.
#[test]
fn the_parts_add_up_to_the_solve_time() {
    let krylov = |solver| {
        let mut c = with_tol(cfg(Dims::new(16, 8, 8), Variant::Sync), 1e-6);
        c.method = Krylov::new(solver).into();
        c
    };
    let mut multisplit = cfg(Dims::new(16, 8, 8), Variant::Async);
    multisplit.method = Multisplit::new(Variant::Async, Inner::Jacobi).into();
    let runs = [
        ("sync", jacobi(Variant::Sync, Exchange::Waitall, 1)),
        (
            "sync blocking",
            jacobi(Variant::Sync, Exchange::Blocking, 1),
        ),
        ("sync overlap", jacobi(Variant::Sync, Exchange::Overlap, 1)),
        ("sync depth 2", jacobi(Variant::Sync, Exchange::Waitall, 2)),
        ("async", jacobi(Variant::Async, Exchange::Waitall, 1)),
        ("racy", jacobi(Variant::Racy, Exchange::Waitall, 1)),
        ("multisplit async", multisplit),
        ("cg", krylov(KrylovSolver::Cg)),
        ("pipecg", krylov(KrylovSolver::PipeCg)),
    ];
    for (what, c) in &runs {
        let (records, _, plan) = run_threads(c, 2);
        for r in &records {
            let b = checked(r, what);
            assert!(b.sweep_s > 0.0 && b.wait_s > 0.0, "{what}: {b:?}");
            // Every loop reduces over its ranks: the sync checks and certification, the
            // async rounds, the Krylov solvers' dot products.
            assert!(b.reduce_s > 0.0, "{what}: {b:?}");
            // Every loop sends faces; multisplit's mid-solve sends count in its sweep, and
            // its first offers after a solve are timed like the async loop's.
            assert!(b.pack_s > 0.0 && b.send_s > 0.0, "{what}: {b:?}");
            assert!(b.unpack_s > 0.0, "{what}: {b:?}");
        }
        // The report: each part over ranks, and per iteration the mean of the ranks'.
        let report = Report::new(
            RunConfig::new("threads", 2, &plan, c, ReductionKind::Tree),
            records.clone(),
        );
        let spread = report.breakdown.expect("every rank has a breakdown");
        let per = report.breakdown_per_iteration.expect("per iteration");
        let mean = |k: usize| {
            records
                .iter()
                .map(|r| r.breakdown.unwrap().parts()[k] / r.iterations.max(1) as f64)
                .sum::<f64>()
                / 2.0
        };
        for k in 0..7 {
            assert!(rel(per.parts()[k], mean(k)) < 1e-12, "{what}: part {k}");
        }
        assert_eq!(spread.sweep_s.mean, report.compute_s.mean, "{what}");
        assert!(report.table().contains("per iteration    sweep "), "{what}");
    }
    for (what, c) in &runs[..3] {
        let (records, _, _) = run_threads(c, 1);
        let b = checked(&records[0], &format!("{what} on one rank"));
        assert_eq!(
            [b.pack_s, b.unpack_s, b.send_s, b.wait_s],
            [0.0; 4],
            "{what}: one rank has no neighbour"
        );
        assert!(b.sweep_s > 0.0, "{what}");
    }
}

/// A report written before the breakdown was measured reads back without one.
#[test]
fn a_report_without_a_breakdown_reads_back() {
    let c = jacobi(Variant::Sync, Exchange::Waitall, 1);
    let (records, _, plan) = run_threads(&c, 2);
    let report = Report::new(
        RunConfig::new("threads", 2, &plan, &c, ReductionKind::Tree),
        records,
    );
    let mut j = serde_json::to_value(&report).unwrap();
    j.as_object_mut().unwrap().remove("breakdown");
    j.as_object_mut().unwrap().remove("breakdown_per_iteration");
    for r in j["ranks"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("breakdown");
    }
    let old: Report = serde_json::from_value(j).unwrap();
    assert_eq!(old.breakdown, None);
    assert!(old.ranks.iter().all(|r| r.breakdown.is_none()));
    assert!(!old.table().contains("per iteration"));
}
