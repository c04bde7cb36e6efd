use super::*;
use crate::{Context, Setting};

fn with(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    f(&mut c);
    c
}

#[test]
fn every_bad_parameter_names_its_setting() {
    let cases: Vec<(Config, Setting, &str)> = vec![
        (
            with(|c| c.criterion = StopCriterion::RelativeResidual { tol: 0.0 }),
            Setting::Tol,
            "the tolerance",
        ),
        (
            with(|c| c.criterion = StopCriterion::RelativeResidual { tol: f64::NAN }),
            Setting::Tol,
            "the tolerance",
        ),
        (
            with(|c| c.criterion = StopCriterion::RelativeResidual { tol: -1.0 }),
            Setting::Tol,
            "the tolerance",
        ),
        (
            with(|c| c.check_every = 0),
            Setting::CheckEvery,
            "the check period K",
        ),
        (
            with(|c| c.method.iteration_mut().unwrap().halo_every = 0),
            Setting::HaloEvery,
            "the halo period N",
        ),
        (
            with(|c| c.method.iteration_mut().unwrap().max_in_flight = 0),
            Setting::MaxInFlight,
            "the messages in flight R",
        ),
        (
            with(|c| c.max_iters = 0),
            Setting::MaxIters,
            "the iteration limit",
        ),
        (
            with(|c| c.problem = Problem::Laplace { offset: f64::NAN }),
            Setting::Offset,
            "the Laplace offset",
        ),
        (
            with(|c| {
                c.slow = Some(SlowRank {
                    rank: 0,
                    factor: 0.5,
                })
            }),
            Setting::Slowdown,
            "the slowdown",
        ),
        (
            with(|c| c.size = SizeSpec::Global(Dims::new(10, 0, 10))),
            Setting::Global,
            "the global grid",
        ),
        // Below what f64 can tell from rounding; above the relative residual's start.
        (
            with(|c| c.criterion = StopCriterion::RelativeResidual { tol: 1e-300 }),
            Setting::Tol,
            "the tolerance must be a number from 2.220446049250313e-16",
        ),
        (
            with(|c| c.criterion = StopCriterion::RelativeResidual { tol: 2.0 }),
            Setting::Tol,
            "to 1, got 2",
        ),
        (
            with(|c| c.criterion = StopCriterion::UpdateNorm { tol: 1e-17 }),
            Setting::Tol,
            "the tolerance",
        ),
        (
            with(|c| {
                c.slow = Some(SlowRank {
                    rank: 0,
                    factor: 1e6,
                })
            }),
            Setting::Slowdown,
            "the slowdown must be a number from 1 to 1000",
        ),
        (
            with(|c| {
                c.slow = Some(SlowRank {
                    rank: 0,
                    factor: 1e308,
                })
            }),
            Setting::Slowdown,
            "the slowdown",
        ),
        (
            with(|c| c.problem = Problem::Laplace { offset: 1e12 }),
            Setting::Offset,
            "the Laplace offset 1e12 swamps the solution",
        ),
        (
            with(|c| c.problem = Problem::Laplace { offset: -1e20 }),
            Setting::Offset,
            "the Laplace offset",
        ),
    ];
    for (c, setting, words) in cases {
        let e = c.plan(1).unwrap_err();
        assert_eq!(e.setting(), setting, "{e}");
        assert!(e.to_string().contains(words), "'{e}' does not say {words}");
    }
}

#[test]
fn size_dependent_checks() {
    let c = with(|c| {
        c.slow = Some(SlowRank {
            rank: 4,
            factor: 2.0,
        })
    });
    assert_eq!(c.plan(4).unwrap_err().setting(), Setting::SlowRank);
    assert!(c.plan(5).is_ok());
    let c = with(|c| c.grid = Some(ProcGrid(Dims::new(2, 2, 1))));
    assert_eq!(c.plan(2).unwrap_err().setting(), Setting::Grid);
    let c = with(|c| c.size = SizeSpec::Global(Dims::cube(9)));
    assert!(c
        .plan(2)
        .unwrap_err()
        .to_string()
        .contains("does not split"));
    assert_eq!(c.plan(3).unwrap().local, Dims::new(3, 9, 9));
    assert_eq!(
        Config::default().plan(8).unwrap().global,
        Dims::cube(100),
        "weak scaling: 50³ per rank on 2×2×2"
    );
    assert!(matches!(
        with(|c| c.size = SizeSpec::Local(Dims::cube(usize::MAX / 4))).plan(1),
        Err(ConfigError::TooLarge(_))
    ));
}

#[test]
fn parse_dims() {
    assert_eq!(SizeSpec::parse_dims("7").unwrap(), Dims::cube(7));
    assert_eq!(SizeSpec::parse_dims("4,5,6").unwrap(), Dims::new(4, 5, 6));
    assert_eq!(SizeSpec::parse_dims("4x5x6").unwrap(), Dims::new(4, 5, 6));
    for bad in [
        "", "0", "1,2", "a", "1,2,3,4", "-3", "2,0,2", "4x5", "4x5,6", "x", "4x0x4",
    ] {
        assert!(SizeSpec::parse_dims(bad).is_err(), "{bad}");
    }
}

/// The offset bound scales with the tolerance and the grid's depth, and what it lets
/// through converges (the solver's own tests run offsets 1 and 10).
#[test]
fn the_offset_bound() {
    let c = Config::default();
    let max = c.max_offset(Dims::cube(50)).unwrap();
    assert!(max > 1e9 && max < 1e12, "{max:e}");
    let finer = with(|c| c.criterion = StopCriterion::RelativeResidual { tol: 1e-6 });
    assert!((finer.max_offset(Dims::cube(50)).unwrap() - max / 100.0).abs() < max * 1e-9);
    assert!(c.max_offset(Dims::cube(200)).unwrap() < max);
    let poisson = with(|c| {
        c.problem = Problem::Poisson;
        c.criterion = Problem::Poisson.default_criterion();
    });
    assert_eq!(poisson.max_offset(Dims::cube(50)), None);
    assert!(with(|c| c.problem = Problem::Laplace { offset: max / 2.0 })
        .plan(1)
        .is_ok());
    assert!(
        with(|c| c.problem = Problem::Laplace { offset: -max * 2.0 })
            .plan(1)
            .is_err()
    );
}

/// A report's `config` holds the method tagged by its kind: every method goes to JSON and
/// back unchanged. A `config` of the earlier schemas, the method's settings flat beside
/// `solver`, reads as the same method; a multisplit one that left its inner solver `null`
/// reads with the defaults; one with a setting its method does not hold is refused.
#[test]
fn reports_store_the_method_tagged_and_read_it_flat() {
    let mut ms = crate::Multisplit::new(Variant::Racy, Inner::Jacobi);
    ms.inner.max = 7;
    let mut deep = crate::Jacobi::new(Variant::Async);
    deep.halo_depth = HaloDepth::Auto;
    deep.iteration.max_in_flight = 5;
    for (method, kind) in [
        (Method::default(), "jacobi"),
        (deep.into(), "jacobi"),
        (crate::KrylovSolver::PipeCg.into(), "krylov"),
        (ms.into(), "multisplit"),
    ] {
        let c = Config::new(Problem::Poisson, method);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["method"]["kind"], kind, "{v}");
        for flat in ["solver", "variant", "pc", "inner"] {
            assert!(v.get(flat).is_none(), "{v}");
        }
        assert_eq!(serde_json::from_value::<Config>(v.clone()).unwrap(), c);
        // As schema 3 wrote it.
        let mut old = v.clone();
        let o = old.as_object_mut().unwrap();
        o.remove("method");
        let flat = crate::legacy::FlatMethod::of(&method);
        o.insert("solver".into(), c.solver().name().into());
        o.insert("variant".into(), flat.variant.name().into());
        o.insert("pc".into(), flat.pc.name().into());
        o.insert("exchange".into(), flat.exchange.name().into());
        o.insert("halo_every".into(), flat.halo_every.into());
        o.insert(
            "halo_depth".into(),
            serde_json::to_value(flat.halo_depth).unwrap(),
        );
        o.insert("max_in_flight".into(), flat.max_in_flight.into());
        o.insert("inner".into(), serde_json::to_value(flat.inner).unwrap());
        o.insert(
            "inner_tol".into(),
            serde_json::to_value(flat.inner_tol).unwrap(),
        );
        o.insert(
            "inner_max".into(),
            serde_json::to_value(flat.inner_max).unwrap(),
        );
        assert_eq!(serde_json::from_value::<Config>(old).unwrap(), c, "{kind}");
    }
    assert_eq!(
        serde_json::to_value(Config::new(Problem::Poisson, ms.into())).unwrap()["method"]["inner"]
            ["max"],
        7
    );
    let mut v = serde_json::to_value(Config::default()).unwrap();
    v.as_object_mut().unwrap().remove("method");
    for (k, val) in [
        ("solver", "multisplit".into()),
        ("variant", "sync".into()),
        ("exchange", "waitall".into()),
        ("halo_every", 1.into()),
        ("max_in_flight", 2.into()),
        ("inner", serde_json::Value::Null),
        ("inner_max", serde_json::Value::Null),
    ] {
        v[k] = val;
    }
    let back: Config = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back.inner_spec().unwrap().max, DEFAULT_INNER_MAX);
    assert_eq!(back.inner_spec().unwrap().solver, Inner::Cg);
    // A setting the method does not hold is refused on reading too.
    v["solver"] = "jacobi".into();
    v["pc"] = "jacobi".into();
    let e = serde_json::from_value::<Config>(v).unwrap_err().to_string();
    assert!(e.contains("the preconditioner jacobi applies to"), "{e}");
}

/// The halo depth: a number or `auto`, as a setting and in a report (a number as before,
/// `auto` as the string); anything else is one message naming the setting.
#[test]
fn halo_depth_is_a_number_or_auto() {
    assert_eq!("auto".parse::<HaloDepth>().unwrap(), HaloDepth::Auto);
    assert_eq!(" 4".parse::<HaloDepth>().unwrap(), HaloDepth::Fixed(4));
    for bad in ["0", "17", "-1", "", "deep", "2.5"] {
        let e = bad.parse::<HaloDepth>().unwrap_err().to_string();
        assert!(
            e.starts_with("the halo depth k must be a number from 1 to 16 or auto"),
            "{e}"
        );
    }
    for d in [HaloDepth::Auto, HaloDepth::Fixed(1), HaloDepth::Fixed(6)] {
        let c = with(|c| c.method.jacobi_mut().unwrap().halo_depth = d);
        let v = serde_json::to_value(&c).unwrap();
        let want = match d {
            HaloDepth::Auto => serde_json::json!("auto"),
            HaloDepth::Fixed(k) => serde_json::json!(k),
        };
        assert_eq!(v["method"]["halo_depth"], want);
        assert_eq!(serde_json::from_value::<Config>(v).unwrap(), c);
        assert_eq!(d.to_string().parse::<HaloDepth>().unwrap(), d);
    }
    let mut v = serde_json::to_value(Config::default()).unwrap();
    v["method"]["halo_depth"] = 3.into();
    v["check_every"] = 9.into();
    let c: Config = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(c.halo_depth(), HaloDepth::Fixed(3));
    v["method"]["halo_depth"] = "deeper".into();
    let e = serde_json::from_value::<Config>(v.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("the halo depth k"), "{e}");
    // auto applies to Jacobi only.
    let cg = Context {
        solver: Solver::Cg,
        ..Config::default().context(crate::Backend::CHANNELS)
    };
    let e = crate::check_given(&cg, [(Setting::HaloDepth, "auto".into())])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("the halo depth k auto applies to the solver jacobi, not to the solver cg"),
        "{e}"
    );
    assert!(crate::check_given(&cg, [(Setting::HaloDepth, "1".into())]).is_ok());
}

/// The depths `auto` tries: those a fixed k would run with, about 1.5 times apart.
#[test]
fn auto_candidates() {
    let auto = |f: fn(&mut Config)| {
        with(|c| {
            c.method.jacobi_mut().unwrap().halo_depth = HaloDepth::Auto;
            f(c);
        })
    };
    let c = auto(|_| {});
    assert!(c.validate().is_ok());
    assert_eq!(c.auto_depth_candidates(&c.plan(8).unwrap()), [1, 2, 4, 10]);
    let c = auto(|c| c.check_every = 120);
    assert_eq!(
        c.auto_depth_candidates(&c.plan(2).unwrap()),
        [1, 2, 3, 5, 8, 12]
    );
    // k points per rank along every split axis (none on one rank).
    let c = auto(|c| {
        c.check_every = 120;
        c.size = SizeSpec::Local(Dims::new(6, 50, 50));
    });
    assert_eq!(c.auto_depth_candidates(&c.plan(2).unwrap()), [1, 2, 3, 5]);
    assert_eq!(
        c.auto_depth_candidates(&c.plan(1).unwrap()),
        [1, 2, 3, 5, 8, 12]
    );
    let c = auto(|c| c.max_iters = 1);
    assert_eq!(c.auto_depth_candidates(&c.plan(1).unwrap()), [1]);
    // Validated as a fixed k would not be: auto chooses among what runs.
    let c = auto(|c| {
        c.check_every = 7;
        c.method.iteration_mut().unwrap().halo_every = 3;
    });
    assert!(c.plan(2).is_ok());
    assert_eq!(c.auto_depth_candidates(&c.plan(2).unwrap()), [1]);
    assert!(c
        .auto_depth_reason()
        .unwrap()
        .contains("a halo every iteration"));
}

#[test]
fn r_beyond_the_channel_limit() {
    let e = with(|c| c.method.iteration_mut().unwrap().max_in_flight = usize::MAX)
        .plan(1)
        .unwrap_err();
    assert_eq!(e.setting(), Setting::MaxInFlight);
    assert!(
        e.to_string().starts_with("the messages in flight R: "),
        "{e}"
    );
}
