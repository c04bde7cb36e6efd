//! Hybrid ranks (`hybrid.rs`) over the threads backend: a team of workers per rank gives the
//! run of one thread per rank, bit for bit in sync (iterates, residual history, iteration
//! count, certifications), and converges and certifies in async and racy.

use super::common::*;
use crate::{Config, Dims, Exchange, Jacobi, Method, Problem, StopReason, Variant};

/// Everything a sync run reports that must not depend on the workers per rank, bit for bit.
fn fingerprint(records: &[crate::RankRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let hist: Vec<(u64, u64)> = r
                .history
                .points()
                .iter()
                .map(|p| (p.0, p.1.to_bits()))
                .collect();
            let certs: Vec<(u64, u64, bool)> = r
                .certifications
                .iter()
                .map(|c| (c.iteration, c.true_residual.to_bits(), c.accepted))
                .collect();
            format!(
                "rank {} it {} stop {:?} reported {:?} true {} initial {} history {hist:?} \
                 certifications {certs:?}",
                r.rank,
                r.iterations,
                r.stop,
                r.residual.reported.map(f64::to_bits),
                r.residual.true_residual.to_bits(),
                r.residual.initial_norm.to_bits(),
            )
        })
        .collect()
}

/// `c` on `ranks` ranks with each of `teams` workers per rank against one per rank.
fn same_run(c: &Config, ranks: usize, teams: &[usize]) {
    let (want, want_sol, _) = run_hybrid(c, ranks, 1);
    assert!(want[0].iterations > 10, "the problem takes some iterations");
    for &t in teams {
        let (got, sol, plan) = run_hybrid(c, ranks, t);
        let what = format!("{ranks} ranks x {t} workers, {} per rank", plan.local);
        assert_eq!(fingerprint(&got), fingerprint(&want), "{what}");
        assert_eq!(sol.len(), want_sol.len());
        for (k, (a, b)) in sol.iter().zip(&want_sol).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what}: point {k}");
        }
    }
}

/// Sync with checks at every sweep (every residual summed by the team) and every 7, with and
/// without a source term, on one and two ranks, with 2, 3 and as many workers as planes
/// (more workers than this machine's cores: the barrier must yield), uneven plane counts.
#[test]
fn sync_teams_give_the_single_thread_run_bit_for_bit() {
    let mut c = with_tol(cfg(Dims::new(8, 9, 10), Variant::Sync), 1e-5);
    c.check_every = 1;
    same_run(&c, 1, &[2, 3, 10]);
    same_run(&c, 2, &[2, 3]);
    c.check_every = 7;
    c.problem = Problem::Poisson;
    c.size = crate::SizeSpec::Global(Dims::cube(10));
    c.criterion = crate::StopCriterion::UpdateNorm { tol: 1e-7 };
    same_run(&c, 2, &[2, 4]);
}

/// The blocking exchange and a halo swapped every third sweep (the team sweeps with a halo
/// it did not just receive): the same run as one thread per rank.
#[test]
fn sync_teams_with_other_exchanges() {
    let mut c = with_tol(cfg(Dims::new(8, 8, 12), Variant::Sync), 1e-4);
    c.check_every = 3;
    for (exchange, halo_every) in [(Exchange::Blocking, 1), (Exchange::Waitall, 3)] {
        let mut j = Jacobi::new(Variant::Sync);
        j.exchange = exchange;
        j.iteration.halo_every = halo_every;
        c.method = Method::Jacobi(j);
        same_run(&c, 2, &[2]);
    }
}

/// Async and racy teams converge, and the certified true residual meets the tolerance.
#[test]
fn async_and_racy_teams_converge_and_certify() {
    for variant in [Variant::Async, Variant::Racy] {
        let c = with_tol(cfg(Dims::new(10, 10, 12), variant), 1e-5);
        let (recs, _, _) = run_hybrid(&c, 2, 3);
        for r in &recs {
            assert_eq!(r.stop, StopReason::Criterion, "{variant:?}");
            assert!(r.converged, "{variant:?}");
            assert!(r.residual.true_residual <= 1e-5, "{variant:?}");
            let last = r.certifications.last().expect("a certified claim");
            assert!(last.accepted && last.true_residual <= 1e-5, "{variant:?}");
        }
    }
}

/// What the hybrid ranks refuse, each with the setting named.
#[test]
fn unsupported_settings_are_refused() {
    let c = cfg(Dims::new(8, 8, 4), Variant::Sync);
    let plan = c.plan(2).unwrap();
    let refused = |c: &Config, t: usize| match c.check_threads_per_rank(t, &plan) {
        Err(e) => e.to_string(),
        other => panic!("T = {t}: {other:?}"),
    };
    assert!(refused(&c, 0).contains("the threads per rank T must be at least 1"));
    assert!(refused(&c, 100_000).contains("at most"));
    // 8 x 8 x 4 over 2 ranks: 2 planes per rank, or 4 (the split is the plan's).
    assert!(refused(&c, plan.local.z + 1).contains("z-plane"));
    assert!(c.check_threads_per_rank(plan.local.z, &plan).is_ok());
    let mut k = c.clone();
    k.method = Method::Krylov(crate::Krylov::new(crate::KrylovSolver::Cg));
    let e = refused(&k, 2);
    assert!(
        e.contains("the threads per rank T 2") && e.contains("Krylov"),
        "{e}"
    );
    assert!(k.check_threads_per_rank(1, &plan).is_ok());
    let mut o = c.clone();
    let mut j = Jacobi::new(Variant::Sync);
    j.exchange = Exchange::Overlap;
    o.method = Method::Jacobi(j);
    assert!(refused(&o, 2).contains("the halo exchange overlap"));
    let mut d = c.clone();
    let mut j = Jacobi::new(Variant::Sync);
    j.halo_depth = crate::HaloDepth::Fixed(2);
    d.method = Method::Jacobi(j);
    assert!(refused(&d, 2).contains("the halo depth k 2 applies to one thread per rank"));
}
