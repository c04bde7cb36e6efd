//! The rule of where settings apply, as every caller sees it.

use super::*;
use crate::{Config, Detect, Exchange, HaloDepth, Jacobi, Method, Multisplit, Pc, Setting};

fn ctx(solver: Solver, variant: Variant, backend: Backend) -> Context {
    Context {
        solver,
        variant,
        backend,
        threads_per_rank: 1,
        operator: Operator::Grid(Problem::default()),
    }
}

/// A setting the run does not have is refused at any value; one it has at its default only
/// is taken at the default and refused at another value; the message says where it applies
/// and where it was given.
#[test]
fn given_settings_are_refused_where_they_do_not_apply() {
    let sync = ctx(Solver::Jacobi, Variant::Sync, Backend::CHANNELS);
    let given = |s: Setting, v: &str| check_given(&sync, [(s, Cow::Borrowed(v))]);
    // No R, no claims, no racy receive, no non-blocking reduction in a sync loop.
    for (s, v) in [
        (Setting::MaxInFlight, "2"),
        (Setting::Confirm, "true"),
        (Setting::RacyRead, "landed"),
        (Setting::Reduction, "tree"),
        (Setting::Inner, "cg"),
    ] {
        let e = given(s, v).unwrap_err();
        assert_eq!(e.setting(), s, "{e}");
        assert!(
            e.to_string()
                .ends_with("not to the solver jacobi the variant sync")
                || e.to_string().ends_with("not to the solver jacobi"),
            "{e}"
        );
    }
    // At their defaults only: taken at the default, refused at another value.
    for (s, default, other) in [
        (Setting::Detect, "reduction", "snapshot"),
        (Setting::Pc, "none", "jacobi"),
    ] {
        assert_eq!(given(s, default), Ok(()), "{s:?}");
        assert_eq!(given(s, other).unwrap_err().setting(), s);
    }
    // Ranks that are threads of one process run one thread per rank.
    let threads = Backend {
        process_ranks: false,
        ..Backend::CHANNELS
    };
    let one = ctx(Solver::Jacobi, Variant::Sync, threads);
    let t = |v: &str| check_given(&one, [(Setting::ThreadsPerRank, Cow::Borrowed(v))]);
    assert_eq!(t("1"), Ok(()));
    assert_eq!(t("2").unwrap_err().setting(), Setting::ThreadsPerRank);
    assert_eq!(given(Setting::ThreadsPerRank, "2"), Ok(()));
    let e = given(Setting::Confirm, "false").unwrap_err().to_string();
    assert_eq!(
        e,
        "no certification of claims applies to the convergence claims of the variant async \
         and racy (of the solver jacobi or multisplit; sync runs and Krylov solvers stop on \
         the true residual), not to the solver jacobi the variant sync"
    );
    // The Krylov solvers are sync: the variant is taken at sync only.
    let cg = ctx(Solver::Cg, Variant::Sync, Backend::CHANNELS);
    assert_eq!(
        Setting::Variant.applies(&cg),
        Applies::Only(Scope::Synchronous)
    );
    assert_eq!(
        Method::new(Solver::Cg, Variant::Racy)
            .unwrap_err()
            .setting(),
        Setting::Variant
    );
    assert!(Method::new(Solver::Cg, Variant::Sync).is_ok());
}

/// What a backend has decides what varies a run: R binds racy channels only where a racy
/// send can still be in flight, and the reduction varies only where there is a choice.
#[test]
fn the_backend_decides_what_varies() {
    let mut threads = Backend::CHANNELS;
    threads.racy_in_flight = false;
    threads.native_iallreduce = false;
    let racy = |b| ctx(Solver::Jacobi, Variant::Racy, b);
    assert_eq!(
        Setting::MaxInFlight.applies(&racy(Backend::CHANNELS)),
        Applies::Yes
    );
    assert_eq!(Setting::MaxInFlight.applies(&racy(threads)), Applies::Inert);
    assert_eq!(Setting::Reduction.applies(&racy(threads)), Applies::Inert);
    assert_eq!(
        Setting::Reduction.applies(&racy(Backend::CHANNELS)),
        Applies::Yes
    );
    let shared = racy(Backend::SHARED);
    assert_eq!(Setting::MaxInFlight.applies(&shared), Applies::Inert);
    assert_eq!(
        Setting::Detect.applies(&shared),
        Applies::Only(Scope::Channels)
    );
    assert_eq!(Setting::Confirm.applies(&shared), Applies::Yes);
    assert!(threads
        .reduction(Some(crate::ReductionKind::Iallreduce))
        .is_err());
    assert_eq!(threads.reduction(None), Ok(crate::ReductionKind::Tree));
}

/// The library refuses what the command line refuses, for a caller who builds the
/// configuration by hand: a shared-memory run with the snapshot detection, a sync run without
/// certification, R of a sync run, a deep halo on shared memory, the exchange of an async run.
#[test]
fn the_library_checks_a_configuration_as_the_command_line_does() {
    let with = |f: fn(&mut Jacobi)| {
        let mut j = Jacobi::new(Variant::Async);
        f(&mut j);
        Config {
            method: j.into(),
            ..Config::default()
        }
    };
    let snapshot = with(|j| j.iteration.detect = Detect::Snapshot);
    assert!(snapshot.plan(2).is_ok());
    let e = snapshot.shared_plan(2).unwrap_err();
    assert_eq!(e.setting(), Setting::Detect, "{e}");
    assert!(e.to_string().contains("not to the backend shared"), "{e}");
    let sync = Config {
        confirm: false,
        ..Config::default()
    };
    assert_eq!(sync.validate().unwrap_err().setting(), Setting::Confirm);
    let mut sync = Config::default();
    sync.method.iteration_mut().unwrap().max_in_flight = 4;
    assert_eq!(sync.validate().unwrap_err().setting(), Setting::MaxInFlight);
    let deep = Config {
        method: Jacobi {
            halo_depth: HaloDepth::Fixed(2),
            ..Jacobi::default()
        }
        .into(),
        ..Config::default()
    };
    assert!(deep.plan(2).is_ok());
    assert_eq!(
        deep.shared_plan(2).unwrap_err().setting(),
        Setting::HaloDepth
    );
    let exchange = with(|j| j.exchange = Exchange::Blocking);
    assert_eq!(
        exchange.validate().unwrap_err().setting(),
        Setting::Exchange
    );
    // What applies runs: a multisplit with its inner settings, a preconditioned CG.
    let ms = Config::new(
        Problem::default(),
        Multisplit::new(Variant::Racy, crate::Inner::Jacobi).into(),
    );
    assert!(ms.plan(2).is_ok());
    let mut cg = Config::new(Problem::default(), crate::KrylovSolver::Cg.into());
    if let Method::Krylov(k) = &mut cg.method {
        k.pc = Pc::Jacobi;
    }
    assert!(cg.plan(2).is_ok());
    assert_eq!(cg.shared_plan(2).unwrap_err().setting(), Setting::Solver);
}

/// Every setting has words of its own, and every default the library states is the value a
/// default configuration holds.
#[test]
fn words_and_defaults() {
    let mut words: Vec<&str> = Setting::ALL.iter().map(|s| s.words()).collect();
    words.sort();
    words.dedup();
    assert_eq!(words.len(), Setting::ALL.len());
    let c = Config::default();
    let it = c.method.iteration().unwrap();
    let d = |s: Setting| s.default_value().unwrap();
    assert_eq!(d(Setting::MaxInFlight), it.max_in_flight.to_string());
    assert_eq!(d(Setting::HaloEvery), it.halo_every.to_string());
    assert_eq!(d(Setting::MaxIters), c.max_iters.to_string());
    assert_eq!(d(Setting::HaloDepth), c.halo_depth().to_string());
    assert_eq!(d(Setting::Variant), c.variant().name());
    assert_eq!(d(Setting::Solver), c.solver().name());
    assert!(c.set_settings().is_empty(), "{:?}", c.set_settings());
}
