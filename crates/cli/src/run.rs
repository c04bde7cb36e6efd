//! `aiac run`'s flow: check the flags, run on the chosen backend, report from rank 0.
//!
//! Every backend goes through one generic function, [`run_on`], over chan-core's
//! [`Context`]: the threads backend calls it on each of its rank threads; the MPI and SHMEM
//! backends call it once per process, as a [`Rank`] of the job their launcher started. The
//! shared-memory backend has no channels and calls jacobi's shared solver instead.

#[cfg(any(feature = "mpi", feature = "shmem"))]
use crate::args::check_output;
use crate::args::{BackendArg, RunArgs};
use crate::error::Error;
use crate::launch::{on_launched_rank, Placement, RankWork};
#[cfg(any(feature = "mpi", feature = "shmem"))]
use crate::launch::{Launched, Rank};
use crate::matrix::{self, Loaded};
use crate::output::{write_atomically, Csv};
use crate::progress::RunProgress;
use crate::resume::Restart;
use crate::saved::{self, ConfigExt};
use chan_core::Context;
use chan_threads::World;
use jacobi::{Config, ConfigError, Plan, Report};
use std::path::Path;
use std::process::ExitCode;

/// Exit code 0 converged, 2 not.
fn exit_code(converged: bool) -> ExitCode {
    if converged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// Run on one rank of any backend (collective) over the decomposition `plan` (computed once,
/// before the run) and report from rank 0. Rank 0 shows the progress line (unless
/// `--quiet`); the library itself prints nothing.
///
/// With `--matrix`, `matrix` holds this rank's block of the system (the plan is not read).
fn run_on<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    args: &RunArgs,
    matrix: Option<&Loaded>,
    restart: &Restart,
) -> Result<ExitCode, Error> {
    // The matrix's flags over every block, and the report's config (collective).
    let matrix = match matrix {
        Some(l) => Some((l.block(ctx.rank()), l.settle(ctx, args, cfg)?)),
        None => None,
    };
    let here = Placement::here();
    let team = jacobi::RankTeam {
        threads: args.threads_per_rank(),
        local_rank: here.local_rank.unwrap_or(0),
        local_size: here.local_size.unwrap_or(1),
    };
    warn_unpinned(ctx, &team, args.quiet)?;
    let progress = (ctx.rank() == 0 && !args.quiet).then(|| RunProgress::start(cfg));
    let hook = progress.as_ref().map(RunProgress::hook);
    let mut solve = jacobi::Solve::new(cfg);
    if let Some(hook) = hook {
        solve = solve.hook(hook);
    }
    let rec = match &matrix {
        None => {
            let solve = restart.apply(solve).plan(plan).team(team);
            match args.solution {
                Some(_) => solve.run_with_iterate(ctx),
                None => solve.run(ctx).map(|r| (r, Vec::new())),
            }
        }
        Some((sys, _)) => restart.apply(solve).system(sys).run(ctx),
    };
    drop(progress); // the line is cleared before anything else is printed
    let (rec, x) = rec?;
    let converged = rec.converged;
    // --solution: every rank's rows (the row blocks' order) or block of the grid to rank 0,
    // in rank order, the grid's blocks assembled into its interior points, x fastest.
    let solution = match args.solution {
        Some(_) => {
            let bits: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
            ctx.gather_v(&bits, 0)
                .map_err(jacobi::Error::from)?
                .map(|all| {
                    let values = |r: usize| -> Vec<f64> {
                        all.list(r).iter().map(|&b| f64::from_bits(b)).collect()
                    };
                    match matrix {
                        Some(_) => (0..all.len()).flat_map(values).collect::<Vec<f64>>(),
                        None => {
                            let blocks: Vec<Vec<f64>> = (0..all.len()).map(values).collect();
                            let refs: Vec<&[f64]> = blocks.iter().map(Vec::as_slice).collect();
                            jacobi::assemble(plan, &refs)
                        }
                    }
                })
        }
        None => None,
    };
    match jacobi::gather_records(ctx, &rec)? {
        Some(records) => {
            let config = match matrix {
                Some((_, rc)) => rc,
                None => args.run_config(cfg, ctx.size(), plan),
            };
            finish(Report::new(config, records), args, solution.as_deref())
        }
        None => Ok(exit_code(converged)),
    }
}

/// Hybrid ranks (`--threads-per-rank T`, T > 1): a rank whose allowed CPU set has fewer
/// than T CPUs runs its workers unpinned; rank 0 says so once, for the whole job
/// (collective: every rank calls it alike).
fn warn_unpinned<C: Context>(
    ctx: &mut C,
    team: &jacobi::RankTeam,
    quiet: bool,
) -> Result<(), Error> {
    let threads = team.threads;
    if threads <= 1 {
        return Ok(());
    }
    let short = team.cpus_short();
    // Ranks short of CPUs, and the fewest CPUs of such a rank.
    let mut count = [f64::from(u8::from(short.is_some()))];
    let mut fewest = [short.map_or(f64::MAX, |n| n as f64)];
    ctx.all_reduce(&mut count, chan_core::ReduceOp::Sum)
        .map_err(jacobi::Error::from)?;
    ctx.all_reduce(&mut fewest, chan_core::ReduceOp::Min)
        .map_err(jacobi::Error::from)?;
    let v = [count[0], fewest[0]];
    if ctx.rank() == 0 && !quiet && v[0] > 0.0 {
        crate::error::say(&format!(
            "aiac: warning: --threads-per-rank {threads}: {} rank(s) may run on only {} CPU(s), \
             so their threads run unpinned (start the job with `mpirun --bind-to none` or \
             `mpirun --map-by slot:PE={threads}`, or `oshrun --bind-to none`)",
            v[0] as u64, v[1] as u64
        ));
    }
    Ok(())
}

/// `aiac run`.
pub(crate) fn run(args: &RunArgs) -> Result<ExitCode, Error> {
    tracing::debug!(?args, "aiac run");
    let info = args.backend.info();
    let here = Placement::here();
    one_process_job(&here, "run", args.backend).map_err(|e| here.before_start(e))?;
    match (info.launcher, info.shared_memory) {
        (Some(launcher), _) => on_launched_rank(launcher, Launch(args)),
        (None, true) => run_shared(args),
        (None, false) => run_threads(args),
    }
}

/// Refuse a backend that runs every rank inside this process (threads, shared) when a
/// launcher started this process as one of several: every process of the job would make the
/// whole run on its own and write the same files.
pub(crate) fn one_process_job(
    here: &Placement,
    command: &str,
    backend: BackendArg,
) -> Result<(), Error> {
    let info = backend.info();
    match (info.launcher, here.size) {
        (None, Some(size)) if size > 1 => Err(Error::Launch(format!(
            "{}: this process is one of {size} that a launcher (mpirun, oshrun) started, \
             and {} runs every rank inside one process: the job would make {size} \
             independent runs writing the same files. Run `aiac {command} {} -t {size}` \
             without the launcher, or `mpirun -np {size} aiac {command} --backend mpi`",
            info.flag, info.flag, info.flag
        ))),
        _ => Ok(()),
    }
}

/// `--backend threads`: one rank per thread of this process.
fn run_threads(args: &RunArgs) -> Result<ExitCode, Error> {
    // Validate once before starting threads, so bad input gives one message.
    let (cfg, plan) = args.check()?;
    let n = args.threads.unwrap_or(1);
    // A matrix is read once here (one process: one copy), each rank's block cut from it.
    let system = match args.system.matrix {
        Some(_) => Some(matrix::load_all(args, &cfg, n)?),
        None => None,
    };
    let restart = Restart::load(args, &cfg, &plan, n, system.as_ref())?;
    // One rank per CPU when they fit (unpinned busy-polling ranks can share a core).
    let world = World::new(n).map_err(|_| ConfigError::NoRanks)?.pinned();
    let outcomes = world.run(|ctx| run_on(ctx, &cfg, &plan, args, system.as_ref(), &restart));
    // Every rank's result; the first error, else rank 0's exit code.
    let codes = outcomes.into_iter().collect::<Result<Vec<_>, _>>()?;
    codes.into_iter().next().ok_or(ConfigError::NoRanks.into())
}

/// `--backend shared`: the shared-memory variants.
fn run_shared(args: &RunArgs) -> Result<ExitCode, Error> {
    let (cfg, plan) = args.check()?;
    if args.x0.is_some() || args.resume.is_some() || args.checkpoint.is_some() {
        return Err(Error::Invalid(
            "--x0, --resume and --checkpoint run over channels (--backend threads, mpi or \
             shmem), not --backend shared"
                .into(),
        ));
    }
    if args.solution.is_some() {
        return Err(Error::Invalid(
            "--solution: --backend shared keeps no iterate to write (--backend threads, mpi \
             or shmem write it)"
                .into(),
        ));
    }
    let progress = (!args.quiet).then(|| RunProgress::start(&cfg));
    let threads = args.threads.unwrap_or(1);
    let mut solve = jacobi::Solve::new(&cfg).plan(&plan);
    if let Some(p) = &progress {
        solve = solve.hook(p.hook());
    }
    let records = solve.run_shared(threads);
    drop(progress);
    finish(
        Report::new(args.run_config(&cfg, threads, &plan), records?),
        args,
        None,
    )
}

/// `--backend mpi|shmem`: this process is one rank of the job the launcher started.
#[cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]
struct Launch<'a>(&'a RunArgs);

impl RankWork for Launch<'_> {
    type Output = ExitCode;

    /// `--threads-per-rank`: the rank's team (a bad value is refused once the ranks run).
    fn threads_per_rank(&self) -> usize {
        self.0.threads_per_rank()
    }

    /// Input is checked on every rank (the output files on rank 0, which writes them) and
    /// the ranks agree on it before the run ([`Rank::agree`]: one message, exit 1 on every
    /// rank). An error during the run stops the job ([`Rank::or_abort`]).
    #[cfg(any(feature = "mpi", feature = "shmem"))]
    fn on<C: Launched>(self, mut rank: Rank<C>) -> Result<ExitCode, Error> {
        let args = self.0;
        // On every rank alike (creating a reduction is collective); a refused kind is
        // refused by the checks below.
        if let Ok(kind) = args.reduction() {
            rank.ctx().use_reduction(kind);
        }
        let (size, me) = (rank.size(), rank.rank());
        let here = Placement::here().local_size.unwrap_or(1);
        let checked = job_matches::<C>(args, size)
            .and_then(|()| args.reduction().map_err(Error::from))
            .and_then(|_| args.config().map_err(Error::from))
            .and_then(|cfg| cfg.plan(size).map(|plan| (cfg, plan)).map_err(Error::from))
            .and_then(|(cfg, plan)| args.check_plan(&cfg, &plan, here).map(|()| (cfg, plan)))
            .and_then(|checked| match rank.rank() {
                0 => check_output(args).map(|()| checked),
                _ => Ok(checked),
            })
            // Every rank reads the matrix and checks it alike: a bad file is refused on
            // every rank, with the same message, before the run.
            .and_then(|(cfg, plan)| match args.system.matrix {
                Some(_) => {
                    matrix::load_rank(args, &cfg, size, me, here).map(|l| (cfg, plan, Some(l)))
                }
                None => Ok((cfg, plan, None)),
            })
            // Every rank reads --x0 or --resume alike: a bad file is refused on every rank.
            .and_then(|(cfg, plan, loaded)| {
                Restart::load(args, &cfg, &plan, size, loaded.as_ref())
                    .map(|r| (cfg, plan, loaded, r))
            });
        let (mut rank, (cfg, plan, loaded, restart)) = rank.agree(checked)?;
        let code = run_on(rank.ctx(), &cfg, &plan, args, loaded.as_ref(), &restart);
        let code = rank.or_abort(code);
        rank.stop()?;
        Ok(code)
    }
}

/// A launched job's size must be what `-t` asks for; a job of one process that should be
/// several, with no job size in its environment ([`Placement`]), was started without its
/// launcher.
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn job_matches<C: Launched>(args: &RunArgs, size: usize) -> Result<(), Error> {
    let (launcher, name) = (C::LAUNCHER.program(), C::LAUNCHER.backend());
    match args.threads {
        Some(n) if n != size => Err(Error::Launch(format!(
            "-t/--threads {n} asks for {n} ranks but this {name} job has {size}{}: start it with \
             `{launcher} -np {n} aiac run --backend {name} …` (and without -t, {launcher}'s -np \
             decides)",
            if size == 1 && Placement::here().size.is_none() {
                format!(" (it was not started by {launcher})")
            } else {
                String::new()
            }
        ))),
        _ => Ok(()),
    }
}

/// Rank 0: the files, the table, the exit code. Every file is made from the one typed report
/// (the value `aiac report` reads back), each written atomically; the table is printed last.
fn finish(report: Report, args: &RunArgs, solution: Option<&[f64]>) -> Result<ExitCode, Error> {
    let out_err = |flag: &'static str, path: &Path, e: &dyn std::fmt::Display| Error::Output {
        flag,
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    if args.json.is_some() || args.csv.is_some() || args.history.is_some() {
        let mut text = serde_json::to_vec_pretty(&report)
            .map_err(|e| Error::Invalid(format!("encoding the report: {e}")))?;
        text.push(b'\n');
        if let Some(path) = &args.json {
            write_atomically(path, &text).map_err(|e| out_err("--json", path, &e))?;
        }
        if let Some(path) = &args.csv {
            write_atomically(path, rank_csv(&report).as_bytes())
                .map_err(|e| out_err("--csv", path, &e))?;
        }
        if let Some(path) = &args.history {
            write_atomically(path, history_csv(&report).as_bytes())
                .map_err(|e| out_err("--history", path, &e))?;
        }
    }
    if let (Some(path), Some(x)) = (&args.solution, solution) {
        write_atomically(path, matrix::solution_text(x).as_bytes())
            .map_err(|e| out_err("--solution", path, &e))?;
    }
    if !args.quiet {
        print!("{}", report.table());
    }
    Ok(exit_code(report.converged))
}

/// `--csv`: one row per rank.
pub(crate) fn rank_csv(run: &Report) -> Csv {
    let mut csv = Csv::new(&[
        "rank",
        "backend",
        "variant",
        "ranks",
        "coord_x",
        "coord_y",
        "coord_z",
        "local_x",
        "local_y",
        "local_z",
        "iterations",
        "time_s",
        "compute_s",
        "comm_s",
        "stop",
        "converged",
        "residual_reported",
        "residual_true",
        "reductions",
        "certifications",
        "sent",
        "skipped",
        "received",
        "superseded",
        "batch_mean",
        "error_max",
        "solver",
        "reduce_flight_s",
        "reduce_wait_s",
        "replacements",
        "inner_iterations",
        "inner_per_outer",
        "sweep_s",
        "pack_s",
        "unpack_s",
        "send_s",
        "wait_s",
        "reduce_s",
        "other_s",
    ]);
    let variant = run.config.variant();
    for r in &run.ranks {
        let batches = saved::channel_buckets(r, variant, |ch| &ch.batches);
        let (n, sum) = batches
            .iter()
            .fold((0u64, 0u64), |(n, s), &(v, c)| (n + c, s + v * c));
        csv.row(
            [
                r.rank.to_string(),
                r.backend.clone(),
                variant.name().to_string(),
                run.config.ranks.to_string(),
                r.coords[0].to_string(),
                r.coords[1].to_string(),
                r.coords[2].to_string(),
                r.local.x.to_string(),
                r.local.y.to_string(),
                r.local.z.to_string(),
                r.iterations.to_string(),
                r.time_s.to_string(),
                r.compute_s.to_string(),
                r.comm_s.to_string(),
                r.stop.name().to_string(),
                r.converged.to_string(),
                crate::output::opt(r.residual.reported),
                r.residual.true_residual.to_string(),
                r.reductions.to_string(),
                r.certifications.len().to_string(),
                r.messages.sent.to_string(),
                r.messages.skipped.to_string(),
                r.messages.received.to_string(),
                r.messages.superseded.to_string(),
                crate::output::opt((n > 0).then(|| sum as f64 / n as f64)),
                crate::output::opt(r.error_max),
                run.config.config.solver().name().to_string(),
                crate::output::opt(r.krylov.as_ref().map(|k| k.reduce_flight_s)),
                crate::output::opt(r.krylov.as_ref().map(|k| k.reduce_wait_s)),
                r.krylov
                    .as_ref()
                    .map_or(String::new(), |k| k.replacements.to_string()),
                r.multisplit
                    .as_ref()
                    .map_or(String::new(), |m| m.inner_iterations.to_string()),
                crate::output::opt(r.multisplit.as_ref().map(|m| m.inner_per_outer)),
            ]
            .into_iter()
            .chain((0..7).map(|k| crate::output::opt(r.breakdown.map(|b| b.parts()[k])))),
        );
    }
    csv
}

/// `--history`: the convergence profile, one row per rank and check.
pub(crate) fn history_csv(run: &Report) -> Csv {
    let mut csv = Csv::new(&["rank", "iteration", "residual", "time_s"]);
    for r in &run.ranks {
        for p in r.history.iter() {
            csv.row([
                r.rank.to_string(),
                p.iteration().to_string(),
                p.residual().to_string(),
                p.time_s().to_string(),
            ]);
        }
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `aiac sweep` records for a failed run is the `config` object the run's report
    /// would have had, exactly (so a failed repeat groups with its configuration).
    #[test]
    fn report_config_is_what_the_report_says() {
        for argv in [
            &[
                "--variant",
                "async",
                "-t",
                "2",
                "--global",
                "8",
                "--max-in-flight",
                "3",
            ][..],
            &[
                "--problem",
                "poisson",
                "--global",
                "8",
                "-t",
                "2",
                "--decomp",
                "z",
            ],
            &[
                "--local",
                "4",
                "--tol",
                "1e-3",
                "--slow-rank",
                "0",
                "--offset",
                "2.5",
            ],
        ] {
            let args = crate::parse_run_args(argv).unwrap();
            let (cfg, plan) = args.check_config().unwrap();
            let n = args.threads.unwrap_or(1);
            let records = World::new(n)
                .unwrap()
                .run(|ctx| jacobi::Solve::new(&cfg).plan(&plan).run(ctx).unwrap());
            let report = Report::new(args.run_config(&cfg, n, &plan), records);
            let v = serde_json::to_value(&report).unwrap();
            let failed = serde_json::to_value(args.report_config(&cfg, &plan)).unwrap();
            assert_eq!(v["config"], failed, "{argv:?}");
            assert_eq!(v["config"]["reduction"], "tree", "{argv:?}");
        }
    }
}
