//! A slowed rank's async inner solves are cut short by its neighbour's fresher faces.
//!
//! Whether a cut shows depends on the fast rank solving while the slow one does. It once
//! failed in CI (`inner_cut_short: 0`, every solve of the slow rank full): when the slow rank
//! began its first solve after the fast rank's first faces had arrived, the two solved one at
//! a time for the rest of the run, each waiting for the other's faces. The solver now starts
//! every multisplitting rank's first solve from the initial halo (`solver/asynchronous.rs`), which makes
//! the first solves overlap, and a rank sends its faces once mid-solve to a neighbour that
//! has answered its newest faces (the echo, `solver/asynchronous.rs`), which undoes turns that start
//! later.
//!
//! The slowdown was a busy-wait for 19 times each inner iteration's wall-clock duration.
//! A slow rank descheduled in its wait came out of it early, so beside a busy loop the slow
//! solves could end before the fast rank's answer (4 of 165 release runs failed). It is now a
//! count of passes over the block (`--slowdown 20`: 19 residual passes per inner iteration),
//! so a slow solve is 20 inner iterations' work however the cores are shared, and the fast
//! rank, pinned to a CPU of its own (`run_pinned`) and always runnable, answers within it. A
//! binary of its own besides, so that no 8-rank run of the library's tests competes with the
//! two ranks for the 2 cores.

mod common;
use common::*;
use jacobi::{Dims, Inner, Multisplit, MultisplitRecord, RankRecord, SlowRank, Variant};

/// Multisplitting with inner CG on 2 ranks of 16³ points, one check per outer iteration, rank
/// 0 slowed 20×.
fn slowed(variant: Variant) -> jacobi::Config {
    let mut c = cfg(Dims::new(32, 16, 16), variant);
    c.method = Multisplit::new(variant, Inner::Cg).into();
    c.check_every = 1;
    c.slow = Some(SlowRank {
        rank: 0,
        factor: 20.0,
    });
    c
}

fn inner(r: &RankRecord) -> MultisplitRecord {
    r.multisplit.clone().expect("a multisplit record")
}

/// With rank 0 slowed per inner iteration (`--slow-rank 0 --slowdown 20`, counted work),
/// async and racy multisplitting converge, certified, and the slow rank's inner solves are cut
/// short: it counts cut solves and does fewer inner iterations per outer iteration than the
/// same rank of a sync run, which always solves to the inner tolerance (the inner count of a
/// full solve depends on the tolerance, not on the slowdown). A sync run never cuts a solve.
/// 20× rather than the benchmark's 2×: a solve of a 16³ block takes about a millisecond,
/// less than a scheduler's time slice, and the fast rank must finish well within the slow
/// rank's solve for the cut to show. The solutions of the same runs are checked against the
/// serial oracle by the library's `a_slowed_rank_still_solves_the_system`.
#[test]
fn a_slowed_rank_cuts_its_async_inner_solves_short() {
    let c = slowed(Variant::Sync);
    let sync = run_pinned(&c, 2);
    assert_converged(&sync, "sync, rank 0 slowed", c.criterion.tol());
    let full = inner(&sync[0]);
    assert_eq!(full.inner_cut_short, 0, "sync cut a solve: {full:?}");
    for variant in [Variant::Async, Variant::Racy] {
        let c = slowed(variant);
        let what = format!("{variant}, rank 0 slowed 20×");
        let recs = run_pinned(&c, 2);
        assert_converged(&recs, &what, c.criterion.tol());
        assert!(
            recs[0].certifications.last().is_some_and(|c| c.accepted),
            "{what}: no accepted certification"
        );
        let slow = inner(&recs[0]);
        assert!(slow.inner_cut_short > 0, "{what}: {slow:?}");
        assert!(
            slow.inner_cut_short <= recs[0].iterations,
            "{what}: {slow:?}"
        );
        assert!(
            slow.inner_per_outer < full.inner_per_outer,
            "{what}: {slow:?}, sync {full:?}"
        );
        // The counts stay consistent: a cut solve did at least one inner iteration.
        assert!(slow.inner_fewest >= 1 && slow.inner_iterations >= recs[0].iterations);
    }
}
