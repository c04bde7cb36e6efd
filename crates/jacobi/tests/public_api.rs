//! The public API end to end: what the `aiac` binary does with it, on the threads backend.

mod common;
use chan_threads::World;
use common::*;
use jacobi::{Dims, RacyRead, StopReason, Variant};

/// A record round-trips through the gather: every field (channel statistics included, typed)
/// arrives at rank 0 as the rank had it.
#[test]
fn records_gather_to_rank_zero() {
    let c = cfg(Dims::new(9, 8, 6), Variant::Racy);
    let out = World::new(3).unwrap().run(|ctx| {
        let rec = jacobi::Solve::new(&c).run(ctx).unwrap();
        let all = jacobi::gather_records(ctx, &rec).unwrap();
        (rec, all)
    });
    assert!(out[1].1.is_none() && out[2].1.is_none());
    let all = out[0].1.as_ref().expect("rank 0 gets every record");
    assert_eq!(all.len(), 3);
    for (k, (rec, _)) in out.iter().enumerate() {
        assert_eq!(&all[k], rec, "rank {k}'s record came through intact");
    }
    // The channel statistics arrive typed: the halo channels in the run's mode, then the
    // certification channels (Sync), their counts adding up to the rank's totals, and their
    // histograms whole (the comparison above covers every bucket).
    for r in all {
        assert!(!r.channels.is_empty(), "rank {} has channels", r.rank);
        let halves = r.channels.len() / 2;
        assert!(r.channels[..halves]
            .iter()
            .all(|ch| ch.mode == chan_core::ModeKind::Racy));
        assert!(r.channels[halves..]
            .iter()
            .all(|ch| ch.mode == chan_core::ModeKind::Sync));
        let sent: u64 = r.channels.iter().map(|ch| ch.sent).sum();
        let received: u64 = r.channels.iter().map(|ch| ch.received).sum();
        assert_eq!((sent, received), (r.messages.sent, r.messages.received));
        assert!(r.channels.iter().any(|ch| ch.staleness.count() > 0));
    }
}

/// `pace_reductions` (`--check-every K` given to async or racy): a rank starts a round of the
/// non-blocking reduction no sooner than K iterations after its previous start, so it
/// completes at most iterations/K + 1 rounds (+1 for a round started at the very end).
/// Without it a round restarts as soon as the previous one returns, whatever K: with K as
/// large as `--max-iters` the run still converges long before, which takes at least two
/// rounds (the first starts from the initial residual, above tolerance), and paced it could
/// not have started the second before `--max-iters`. (Counting rounds per iteration instead
/// depends on how fast rounds come back: on 2 cores shared with other tests, release builds
/// saw 35 rounds in 100 000 iterations, one per 3 ms of scheduling.)
#[test]
fn check_every_paces_the_reduction_of_async_and_racy() {
    for v in [Variant::Async, Variant::Racy] {
        let mut c = cfg(Dims::new(16, 16, 16), v);
        c.check_every = 50;
        c.method.iteration_mut().unwrap().pace_reductions = true;
        let paced = run_threads(&c, 2);
        for r in &paced {
            assert!(r.converged, "{v} paced: rank {}", r.rank);
            assert!(
                r.reductions <= r.iterations / 50 + 2,
                "{v} paced: {} rounds in {} iterations",
                r.reductions,
                r.iterations
            );
        }
        c.max_iters = 1_000_000;
        c.check_every = c.max_iters;
        c.method.iteration_mut().unwrap().pace_reductions = false;
        let eager = run_threads(&c, 2);
        for r in &eager {
            assert_eq!(
                r.stop,
                StopReason::Criterion,
                "{v} unpaced: rank {}",
                r.rank
            );
            assert!(
                r.converged && r.reductions >= 2 && r.iterations < c.check_every,
                "{v} unpaced: {} rounds in {} iterations",
                r.reductions,
                r.iterations
            );
        }
    }
}

/// `RacyRead::Always` (the paper's racy receive, `--racy-read always`) and `Landed` (the
/// default): both converge and certify on threads, every time.
#[test]
fn racy_read_always_and_landed_converge_and_certify() {
    for read in [RacyRead::Landed, RacyRead::Always] {
        for (n, r) in [(2, 1), (3, 2), (4, 4)] {
            let mut c = cfg(Dims::new(12, 12, 12), Variant::Racy);
            let it = c.method.iteration_mut().unwrap();
            it.racy_read = read;
            it.max_in_flight = r;
            let what = format!("racy read {} on {n} ranks, R = {r}", read.name());
            for rec in run_threads(&c, n) {
                assert_eq!(rec.stop, StopReason::Criterion, "{what}: rank {}", rec.rank);
                assert!(rec.converged, "{what}");
                assert!(rec.residual.true_residual < c.criterion.tol(), "{what}");
                let last = rec.certifications.last().expect("a certified claim");
                assert!(last.accepted, "{what}");
                assert!(rec.messages.received > 0, "{what}");
            }
        }
    }
}
