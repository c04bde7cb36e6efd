use super::*;
use clap::Parser;

#[derive(Parser)]
struct T {
    #[command(flatten)]
    s: SweepArgs,
}

fn points(argv: &[&str]) -> Vec<Point> {
    T::try_parse_from(std::iter::once("x").chain(argv.iter().copied()))
        .unwrap()
        .s
        .points()
}

#[test]
fn the_grid_is_the_product_of_the_lists() {
    let p = points(&[
        "--variant",
        "async,racy",
        "--max-in-flight",
        "1,2,8",
        "-t",
        "2",
        "--backend",
        "mpi",
    ]);
    assert_eq!(p.len(), 6);
    assert_eq!(p[0].label, "async R=1");
    assert!(p[5].argv.windows(2).any(|w| w == ["--max-in-flight", "8"]));
}

#[test]
fn flags_that_do_not_apply_collapse() {
    // R does not apply to sync, the exchange not to racy: 2 + 3 runs over MPI, not
    // 2 × 2 × 3.
    let p = points(&[
        "--variant",
        "sync,racy",
        "--exchange",
        "blocking,overlap",
        "--max-in-flight",
        "1,2,8",
        "--backend",
        "mpi",
    ]);
    let labels: Vec<&str> = p.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "sync blocking",
            "sync overlap",
            "racy R=1",
            "racy R=2",
            "racy R=8"
        ]
    );
    assert!(!p[0].argv.contains(&"--max-in-flight".to_string()));
    assert!(!p[2].argv.contains(&"--exchange".to_string()));
}

#[test]
fn cg_sweeps_its_two_exchanges_and_skips_jacobis() {
    let s = T::try_parse_from([
        "x",
        "--solver",
        "jacobi,cg",
        "--exchange",
        "blocking,waitall,neighbor",
        "--backend",
        "mpi",
    ])
    .unwrap()
    .s;
    let all = s.points();
    let (ok, skipped) = s.accepted(&all, None).unwrap();
    let labels: Vec<&str> = ok.iter().map(|r| r.0.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "jacobi blocking",
            "jacobi waitall",
            "jacobi neighbor",
            "cg waitall",
            "cg neighbor"
        ]
    );
    assert!(ok[4]
        .0
        .argv
        .windows(2)
        .any(|w| w == ["--exchange", "neighbor"]));
    // CG's blocking exchange is Jacobi's: skipped, with `aiac run`'s reason.
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0.label, "cg blocking");
    assert!(
        skipped[0]
            .1
            .contains("--exchange blocking applies to --solver jacobi"),
        "{}",
        skipped[0].1
    );
    // Shared memory swaps no halos: CG runs once, without the flag.
    let p = points(&[
        "--solver",
        "cg",
        "--exchange",
        "waitall,neighbor",
        "--backend",
        "shared",
    ]);
    assert_eq!(p.len(), 1);
    assert!(!p[0].argv.contains(&"--exchange".to_string()));
}

#[test]
fn r_binds_racy_channels_over_mpi_only() {
    let args = |backend| {
        points(&[
            "--variant",
            "sync,async,racy",
            "--max-in-flight",
            "1,4",
            "--backend",
            backend,
        ])
    };
    let labels = |p: Vec<Point>| p.into_iter().map(|p| p.label).collect::<Vec<_>>();
    assert_eq!(
        labels(args("mpi")),
        ["sync", "async R=1", "async R=4", "racy R=1", "racy R=4"]
    );
    for backend in ["threads", "shmem"] {
        let p = args(backend);
        assert_eq!(
            labels(p.clone()),
            ["sync", "async R=1", "async R=4", "racy"]
        );
        assert!(!p[3].argv.contains(&"--max-in-flight".to_string()));
    }
    // Shared memory has no channels: every variant once.
    assert_eq!(labels(args("shared")), ["sync", "async", "racy"]);
}

/// `check_unused` on the sweep `argv` describes.
fn unused(argv: &[&str]) -> Result<(), String> {
    let s = T::try_parse_from(std::iter::once("x").chain(argv.iter().copied()))
        .unwrap()
        .s;
    let points = s.points();
    let (ok, skipped) = s.accepted(&points, None).map_err(|e| e.to_string())?;
    let runs: Vec<&Point> = ok.iter().map(|r| r.0).collect();
    s.check_unused(&runs, &skipped).map_err(|e| e.to_string())
}

/// A value no run can take is refused with `run`'s message (each of these ran another
/// configuration, rc 0); one that only collapses equal runs, or that some run takes,
/// is not.
#[test]
fn values_no_run_can_take_are_refused_as_run_refuses_them() {
    for (argv, says) in [
        (
            &["--solver", "cg", "--variant", "racy"][..],
            "--variant racy",
        ),
        (
            &["--solver", "multisplit", "--halo-depth", "2"][..],
            "--halo-depth 2",
        ),
        (
            &[
                "--variant",
                "async",
                "--backend",
                "threads",
                "--reduction",
                "iallreduce",
            ][..],
            "--reduction iallreduce",
        ),
        (
            &["--variant", "sync", "--reduction", "tree"][..],
            "--reduction applies to",
        ),
        (
            &["--solver", "cg", "--exchange", "blocking"][..],
            "--exchange blocking applies to --solver jacobi",
        ),
    ] {
        let e = unused(argv).expect_err(&format!("{argv:?} refused"));
        assert!(
            e.contains(says) && e.contains("no run of this sweep can take"),
            "{argv:?}: {e}"
        );
    }
    for argv in [
        // R does not bind racy over threads: the runs are the same, run once.
        &["--variant", "racy", "--max-in-flight", "1,4"][..],
        // cg takes no variant, jacobi takes racy.
        &["--solver", "jacobi,cg", "--variant", "racy"][..],
        &["--variant", "sync,racy", "--exchange", "overlap"][..],
        &["--variant", "sync,async", "--reduction", "tree"][..],
    ] {
        assert_eq!(unused(argv), Ok(()), "{argv:?}");
    }
}

/// A combination `aiac run` refuses is skipped while its values run where they fit:
/// T = 4 workers need 4 planes, so T = 4 runs at 8³ and not on a 4x4x2 block (this sweep
/// was refused whole). A value that fits no run is still refused.
#[test]
fn combinations_run_refuses_are_skipped_and_their_values_run_elsewhere() {
    let s = T::try_parse_from([
        "x",
        "--backend",
        "mpi",
        "--threads-per-rank",
        "1,4",
        "--local",
        "8,4x4x2",
    ])
    .unwrap()
    .s;
    let points = s.points();
    let (ok, skipped) = s.accepted(&points, None).unwrap();
    let labels: Vec<&str> = ok.iter().map(|r| r.0.label.as_str()).collect();
    assert_eq!(
        labels,
        ["T=1 local=8x8x8", "T=1 local=4x4x2", "T=4 local=8x8x8"]
    );
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0.label, "T=4 local=4x4x2");
    assert!(skipped[0].1.contains("z-plane"), "{}", skipped[0].1);
    let runs: Vec<&Point> = ok.iter().map(|r| r.0).collect();
    assert!(s.check_unused(&runs, &skipped).is_ok());
    let e = unused(&[
        "--backend",
        "mpi",
        "--threads-per-rank",
        "4,8",
        "--local",
        "4x4x2,8",
    ])
    .unwrap_err();
    assert!(e.contains("can take --local 4x4x2"), "{e}");
}

#[test]
fn repeats_follow_each_other() {
    let p = points(&["--variant", "sync,async", "--repeats", "2"]);
    let r: Vec<(String, u32)> = p.iter().map(|p| (p.label.clone(), p.repeat)).collect();
    assert_eq!(r[0], ("sync".to_string(), 0));
    assert_eq!(r[1], ("sync".to_string(), 1));
    assert_eq!(r[2], ("async".to_string(), 0));
    assert_eq!(file_stem(3, 4, &p[2], 2), "003_async_r1");
}
