//! `aiac sweep`: the paper's parameter studies as one command.
//!
//! Every `aiac run` flag takes a comma-separated list; the sweep runs every combination
//! (variants × backends × process counts × R × N × exchanges × … × repeats), one after the
//! other, each as a child process of this same binary (`aiac run … --json FILE --quiet`), MPI
//! runs under `mpirun -np P`. A child that fails or outlives `--timeout` is recorded as
//! failed and the sweep goes on. Then it writes one CSV, the plots, and prints the summary
//! table (and speedup and efficiency when p varies).
//!
//! A combination is run once, not once per value, where a flag changes nothing: which setting
//! applies where is jacobi's one rule (`Setting::applies`), which `aiac run` refuses by and the
//! tables blank their columns by. So `--exchange` varies sync Jacobi and CG over channels, R
//! (`--max-in-flight`) async runs over channels and racy runs over MPI only (a racy send over
//! threads or SHMEM has completed when it returns, so R never binds it), `--reduction` async,
//! racy and pipecg runs over MPI, `--detect` async and racy Jacobi over channels,
//! `--threads-per-rank` Jacobi over mpi and shmem, `--pc` the Krylov solvers, `--inner`,
//! `--inner-tol` and `--inner-max` multisplit (`--solver jacobi,cg,pipecg,multisplit`
//! compares them). A combination `aiac run` refuses (CG with `--exchange blocking`, T = 4
//! workers on a block of 2 planes) is skipped, with its reason, while its values run in the
//! combinations they fit; a value that no run of the sweep can take (every combination with it
//! refused, or dropped the flag and `aiac run` refuses each of them given it) is refused before
//! anything runs, with `aiac run`'s message.

use crate::args::{is_laplace, parse_timeout, BackendArg, Fixed, RunArgs, SweepSettings};
use crate::error::Error;
use crate::launch::{log_gist, run_logged, Ended};
use crate::output::{check_dir, lock_dir, write_atomically};
use crate::progress::SweepProgress;
use crate::saved::{self, FailedRun, Outcome};
use crate::{report, summary};
use clap::{Args, ValueEnum};
use jacobi::{Applies, Config, Context, Operator, Plan, Problem, Setting, Solver, Variant};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// `aiac sweep`'s flags: `aiac run`'s, each a list, and the sweep's own.
#[derive(Debug, Args)]
#[command(
    after_help = "Every list is comma-separated (or give the flag again). Write a \
    non-cubic size as NXxNYxNZ. Examples:\n  \
    aiac sweep --variant sync,async,racy -t 2 --max-in-flight 1,2,4 --repeats 3 --out fig10\n  \
    aiac sweep --problem poisson --global 64 --decomp z --exchange blocking,overlap \\\n    \
    -t 1,2,4,8 --max-iters 200 --backend mpi --out scaling"
)]
pub(crate) struct SweepArgs {
    /// `aiac run`'s settings, each a list (read through `Deref`).
    #[command(flatten)]
    settings: SweepSettings,
    #[command(flatten)]
    fixed: Fixed,
    /// Runs of each configuration; the tables show medians.
    #[arg(long, default_value_t = 1, help_heading = "Sweep")]
    repeats: u32,
    /// Directory for everything: runs/*.json (one report per run; runs/ and logs/ are
    /// replaced), logs/, sweep.csv, plots/*.png|svg. Created if missing.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "aiac-sweep",
        help_heading = "Sweep"
    )]
    out: PathBuf,
    /// Seconds a run may take before it is stopped and recorded as failed: from 0.001 to
    /// 86400 (a day).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 600.0,
        help_heading = "Sweep",
        allow_hyphen_values = true,
        value_parser = parse_timeout
    )]
    timeout: f64,
    /// No progress, no table (the files only).
    #[arg(short, long, help_heading = "Sweep")]
    quiet: bool,
}

impl std::ops::Deref for SweepArgs {
    type Target = SweepSettings;
    fn deref(&self) -> &SweepSettings {
        &self.settings
    }
}

/// One axis of the grid: a setting of `aiac run` and its values (empty: the flag is not given,
/// the run's default holds).
pub(crate) struct Axis {
    /// The argument's id, as `aiac run` names it (`max_in_flight`).
    pub(crate) id: &'static str,
    /// The setting it sets.
    pub(crate) setting: Setting,
    /// Short name in labels (`R`), empty for values that name themselves (`sync`).
    pub(crate) short: &'static str,
    /// The values, as the flag takes them.
    pub(crate) values: Vec<String>,
}

impl Axis {
    /// The flag (`--max-in-flight`).
    fn flag(&self) -> String {
        format!("--{}", self.id.replace('_', "-"))
    }
}

/// One run of the sweep.
#[derive(Debug, Clone)]
struct Point {
    /// `aiac run` arguments, without `--json` and `--quiet`.
    argv: Vec<String>,
    /// What differs from the other runs, for people.
    label: String,
    backend: BackendArg,
    ranks: usize,
    repeat: u32,
}

impl SweepArgs {
    /// The digits of combination `n` of the grid of `axes` (the first axis varies slowest).
    fn odometer(axes: &[Axis], mut n: usize) -> Vec<usize> {
        let mut idx = vec![0; axes.len()];
        for (i, a) in axes.iter().enumerate().rev() {
            let d = a.values.len().max(1);
            idx[i] = n % d;
            n /= d;
        }
        idx
    }

    /// The `aiac run` arguments of combination `idx` (every flag given, or with `collapse`
    /// only those that apply to it), its label, backend and process count.
    fn combination(
        &self,
        axes: &[Axis],
        idx: &[usize],
        collapse: bool,
    ) -> (Vec<String>, String, BackendArg, usize) {
        let val = |id: &str| -> Option<&str> {
            let i = axes.iter().position(|a| a.id == id)?;
            axes[i].values.get(idx[i]).map(String::as_str)
        };
        let variant = val("variant").unwrap_or(Variant::default().name());
        let backend = val("backend").unwrap_or("threads");
        let solver = val("solver").unwrap_or(Solver::default().name());
        let backend_arg = BackendArg::from_str(backend, false).unwrap_or(BackendArg::Threads);
        let ctx = Context {
            solver: Solver::from_str(solver, false).unwrap_or_default(),
            variant: Variant::from_str(variant, false).unwrap_or(Variant::Sync),
            backend: backend_arg.info().backend,
            threads_per_rank: val("threads_per_rank")
                .and_then(|t| t.parse().ok())
                .unwrap_or(1),
            operator: Operator::Grid(match val("problem") {
                Some("poisson") => Problem::Poisson,
                _ => Problem::Laplace { offset: 0.0 },
            }),
        };
        // The settings' rule: a flag that changes nothing here is not passed.
        let applies = |s: Setting| s.applies(&ctx) == Applies::Yes;
        let mut argv = Vec::new();
        let mut label = Vec::new();
        for (a, &i) in axes.iter().zip(idx) {
            let Some(v) = a.values.get(i) else { continue };
            if collapse && !applies(a.setting) {
                continue;
            }
            if a.id == "slowdown" {
                if let Some(k) = self.fixed.slow_rank {
                    argv.extend(["--slow-rank".to_string(), k.to_string()]);
                }
            }
            argv.extend([a.flag(), v.clone()]);
            if a.values.len() > 1 {
                label.push(if a.short.is_empty() {
                    v.clone()
                } else {
                    format!("{}={v}", a.short)
                });
            }
        }
        if self.slowdown.is_empty() {
            if let Some(k) = self.fixed.slow_rank {
                argv.extend(["--slow-rank".to_string(), k.to_string()]);
            }
        }
        if self.fixed.no_confirm && applies(Setting::Confirm) {
            argv.push("--no-confirm".into());
        }
        let label = if label.is_empty() {
            if solver == "jacobi" {
                variant.to_string()
            } else {
                solver.to_string()
            }
        } else {
            label.join(" ")
        };
        let ranks = val("threads").and_then(|v| v.parse().ok()).unwrap_or(1);
        (argv, label, backend_arg, ranks)
    }

    /// The number of combinations of the grid of `axes`.
    fn combinations(axes: &[Axis]) -> usize {
        axes.iter().map(|a| a.values.len().max(1)).product()
    }

    /// Every run, in order: each configuration's repeats one after the other.
    fn points(&self) -> Vec<Point> {
        let axes = self.axes();
        let mut seen: Vec<Vec<String>> = Vec::new();
        let mut out = Vec::new();
        for n in 0..Self::combinations(&axes) {
            let idx = Self::odometer(&axes, n);
            let (argv, label, backend, ranks) = self.combination(&axes, &idx, true);
            if seen.contains(&argv) {
                continue;
            }
            seen.push(argv.clone());
            for repeat in 0..self.repeats {
                out.push(Point {
                    argv: argv.clone(),
                    label: label.clone(),
                    backend,
                    ranks,
                    repeat,
                });
            }
        }
        out
    }

    /// The runs `aiac run` takes, each with its parsed arguments, configuration and
    /// decomposition, and those it refuses with the reason: a combination of values that
    /// do not go together (T = 4 workers on a block of 2 planes) is skipped, while each value
    /// stays in the runs it fits. A flag value `aiac run` cannot parse is refused whole.
    #[allow(clippy::type_complexity)]
    fn accepted<'a>(
        &self,
        points: &'a [Point],
    ) -> Result<
        (
            Vec<(&'a Point, RunArgs, Config, Plan)>,
            Vec<(&'a Point, String)>,
        ),
        Error,
    > {
        let mut ok = Vec::with_capacity(points.len());
        let mut refused = Vec::new();
        for p in points {
            let run_args = crate::parse_run_args(&p.argv).map_err(|e| {
                let msg = e.to_string();
                let first = msg
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                Error::Invalid(format!("{first} (in the run {})", p.label))
            })?;
            match run_args.check_config() {
                Ok((cfg, plan)) => ok.push((p, run_args, cfg, plan)),
                Err(e) => refused.push((p, e.to_string())),
            }
        }
        Ok((ok, refused))
    }

    /// A value of a list that no run of the sweep takes is refused with `aiac run`'s own
    /// message: every run with it was refused by `aiac run` (`skipped`), or every
    /// combination with it dropped the flag, as one it does not apply to, where `aiac run`
    /// refuses every such combination given the flag (`--solver cg --variant racy` would
    /// otherwise run cg sync, `--solver multisplit --halo-depth 2` depth 1). A value `run`
    /// accepts and ignores (R of racy over threads) only collapses runs that are the same.
    fn check_unused(&self, runs: &[&Point], skipped: &[(&Point, String)]) -> Result<(), Error> {
        let axes = self.axes();
        let has =
            |p: &Point, flag: &str, v: &str| p.argv.windows(2).any(|w| w[0] == flag && w[1] == v);
        let refuse = |e: &str, flag: &str, v: &str, label: &str| {
            let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
            Error::Invalid(format!(
                "{first} (no run of this sweep can take {flag} {v}: `aiac run` refuses it in \
                 every combination, the first being {label})"
            ))
        };
        for (ai, a) in axes.iter().enumerate() {
            for (vi, v) in a.values.iter().enumerate() {
                let flag = a.flag();
                if runs.iter().any(|p| has(p, &flag, v)) {
                    continue;
                }
                if let Some((p, e)) = skipped.iter().find(|(p, _)| has(p, &flag, v)) {
                    return Err(refuse(e, &flag, v, &p.label));
                }
                let mut refusal = None;
                for n in 0..Self::combinations(&axes) {
                    let idx = Self::odometer(&axes, n);
                    if idx[ai] != vi {
                        continue;
                    }
                    let (argv, label, ..) = self.combination(&axes, &idx, false);
                    let verdict = crate::parse_run_args(&argv)
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.check_config().map_err(|e| e.to_string()));
                    match verdict {
                        Ok(_) => {
                            refusal = None;
                            break;
                        }
                        Err(e) => {
                            refusal.get_or_insert((e, label));
                        }
                    }
                }
                if let Some((e, label)) = refusal {
                    return Err(refuse(&e, &flag, v, &label));
                }
            }
        }
        // Every run refused, each value taken by some other refused run.
        if let ([], [(p, e), ..]) = (runs, skipped) {
            let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
            return Err(Error::Invalid(format!("{first} (in the run {})", p.label)));
        }
        Ok(())
    }
}

/// The file name of run `i` of `n`: `007_sync_p=2_r1`.
fn file_stem(i: usize, n: usize, p: &Point, repeats: u32) -> String {
    let width = n.to_string().len().max(3);
    let mut s = format!("{i:0width$}_");
    for c in p.label.chars() {
        s.push(match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '=' => c,
            _ => '_',
        });
    }
    if repeats > 1 {
        s.push_str(&format!("_r{}", p.repeat + 1));
    }
    s
}

/// The sweep was signalled: its running child has been stopped; exit 128 + the signal.
fn interrupted(sig: i32) -> ExitCode {
    eprintln!("aiac sweep: stopped by signal {sig}; the running run was stopped too");
    crate::signals::exit_code(sig)
}

/// `aiac sweep`.
pub(crate) fn sweep(args: &SweepArgs) -> Result<ExitCode, Error> {
    tracing::debug!(?args, "aiac sweep");
    // Every check first: nothing runs and nothing is written unless all of it is right.
    if args.repeats == 0 {
        return Err(Error::Invalid("--repeats must be at least 1, got 0".into()));
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Error::Invalid(format!(
            "--timeout must be a positive number of seconds, got {}",
            args.timeout
        )));
    }
    // The Laplace problem is the default: no --problem list, or one that has it.
    let laplace = args.problem.is_empty() || args.problem.iter().any(is_laplace);
    if !args.offset.is_empty() && !laplace {
        return Err(Error::Invalid(
            "--offset applies to --problem laplace only: the Poisson problem's boundary \
             values are 0 and its exact solution is fixed"
                .into(),
        ));
    }
    // Every R, also those no run of this sweep will use (racy off MPI): a bad value is a
    // mistake whatever the runs.
    // Checked as `aiac run --max-in-flight R` would check it (its configuration is built in
    // one place, `RunArgs::config`).
    for &r in &args.max_in_flight {
        let run = crate::parse_run_args(["--variant", "async", "--max-in-flight", &r.to_string()])
            .expect("any usize is a --max-in-flight value");
        run.config()?.validate()?;
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::Launch(format!("cannot find the aiac binary to run: {e}")))?;
    for b in &args.backend {
        if let Some(l) = b.info().launcher {
            l.check_installed()?;
        }
    }
    let runs_dir = args.out.join("runs");
    let logs_dir = args.out.join("logs");
    let plots_dir = args.out.join("plots");
    let all = args.points();
    let (accepted, skipped) = args.accepted(&all)?;
    let taken: Vec<&Point> = accepted.iter().map(|r| r.0).collect();
    args.check_unused(&taken, &skipped)?;
    if args.fixed.no_confirm
        && !taken
            .iter()
            .any(|p| p.argv.iter().any(|a| a == "--no-confirm"))
    {
        return Err(Error::Invalid(
            "--no-confirm applies to the convergence claims of --variant async and racy (of \
             --solver jacobi or multisplit), and no run of this sweep is one"
                .into(),
        ));
    }
    let n = accepted.len();
    let mut planned = Vec::with_capacity(n);
    for (i, (p, run_args, cfg, plan)) in accepted.into_iter().enumerate() {
        let stem = file_stem(i + 1, n, p, args.repeats);
        let json = runs_dir.join(format!("{stem}.json"));
        let mut argv = p.argv.clone();
        argv.extend([
            "--json".into(),
            json.display().to_string(),
            "--quiet".into(),
        ]);
        let config = run_args.report_config(&cfg, &plan);
        planned.push((p, stem, json, argv, config));
    }
    // Last, the output directory (created when missing): nothing exists before all is right.
    for d in [&args.out, &runs_dir, &logs_dir, &plots_dir] {
        check_dir("--out", d)?;
    }
    // One sweep (or report) at a time writes into the directory; held until the sweep ends.
    let _lock = lock_dir("--out", &args.out)?;
    // Replace the previous sweep's runs and logs (only the files a sweep writes).
    for d in [&runs_dir, &logs_dir] {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".json") || name.ends_with(".log") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    if !args.quiet {
        for (p, why) in skipped.iter().filter(|(p, _)| p.repeat == 0) {
            eprintln!("aiac sweep: skipping {}: {why}", p.label);
        }
    }
    // From here a SIGINT or SIGTERM stops the running child and then the sweep.
    crate::signals::defer();
    let progress = SweepProgress::new(n, args.quiet);
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut names = Vec::with_capacity(n);
    let mut runs = Vec::with_capacity(n);
    for (i, (p, stem, json, argv, config)) in planned.into_iter().enumerate() {
        let what = if args.repeats > 1 {
            format!("{} (repeat {})", p.label, p.repeat + 1)
        } else {
            p.label.clone()
        };
        progress.starting(i, &what);
        let log_path = logs_dir.join(format!("{stem}.log"));
        let mut cmd = match p.backend.info().launcher {
            Some(l) => {
                // Hybrid ranks: unbound, each rank pins its workers within the whole node.
                let hybrid = p
                    .argv
                    .windows(2)
                    .any(|w| w[0] == "--threads-per-rank" && w[1] != "1");
                let opts: &[&str] = if hybrid { &["--bind-to", "none"] } else { &[] };
                l.command_with(opts, p.ranks, &exe)
            }
            None => Command::new(&exe),
        };
        cmd.arg("run").args(&argv);
        let command: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        tracing::debug!(?command, "starting");
        if let Some(sig) = crate::signals::pending() {
            drop(progress);
            return Ok(interrupted(sig));
        }
        let ended = run_logged(&mut cmd, &log_path, timeout);
        if let Ok(Ended::Signalled(sig)) = ended {
            drop(progress);
            return Ok(interrupted(sig));
        }
        let (status, code) = match &ended {
            Ok(Ended::Exited(st)) => (None, st.code()),
            Ok(Ended::TimedOut) => (Some("timeout"), None),
            Ok(Ended::Signalled(_)) => unreachable!("returned above"),
            Err(_) => (Some("failed"), None),
        };
        let report = match (status, code) {
            (None, Some(0 | 2)) => saved::load(&json).ok(),
            _ => None,
        };
        let (outcome, result) = match report {
            Some(o @ Outcome::Ok(_)) => {
                let r = o.run().expect("a report");
                let result = format!(
                    "{:.4} s, {:.0} iterations (mean over ranks), {}",
                    r.time_s,
                    r.iterations.mean,
                    r.status().replace('_', " ")
                );
                (o, result)
            }
            _ => {
                let status = status.unwrap_or("failed");
                let why = match (&ended, code) {
                    (Err(e), _) => format!("could not start: {e}"),
                    (Ok(Ended::TimedOut), _) => format!("timed out after {} s", args.timeout),
                    (Ok(Ended::Signalled(_)), _) => unreachable!("returned above"),
                    (_, Some(c)) if c != 0 && c != 2 => format!("exit code {c}"),
                    (_, Some(_)) => "no readable report".into(),
                    (_, None) => "killed by a signal".into(),
                };
                let failed = FailedRun {
                    schema: saved::FAILED_SCHEMA.into(),
                    status: status.into(),
                    exit_code: code,
                    command,
                    log: format!("../logs/{stem}.log"),
                    repeat: p.repeat,
                    config,
                };
                let path = runs_dir.join(format!("{stem}.failed.json"));
                let _ = std::fs::remove_file(&json);
                let text = serde_json::to_vec_pretty(&failed).unwrap_or_default();
                if let Err(e) = write_atomically(&path, &text) {
                    progress.warn(&format!("aiac sweep: {}: {e}", path.display()));
                }
                let last = log_gist(&log_path, 3);
                progress.warn(&format!(
                    "aiac sweep: run {}/{n} ({what}) FAILED: {why}; log {}{}",
                    i + 1,
                    log_path.display(),
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(":\n{last}")
                    }
                ));
                (Outcome::Failed(Box::new(failed)), format!("FAILED: {why}"))
            }
        };
        progress.finished(i, &what, &result);
        names.push(stem);
        runs.push(outcome);
    }
    drop(progress);

    let csv_path = args.out.join("sweep.csv");
    let files = report::write_table_and_plots(&names, &runs, &csv_path, &plots_dir)?;
    if let Some(sig) = crate::signals::pending() {
        return Ok(interrupted(sig));
    }
    let failed = runs.iter().filter(|o| o.run().is_none()).count();
    if !args.quiet {
        print!("{}", summary::summary(&runs));
        println!();
        println!("reports  {}", runs_dir.display());
        println!("table    {}", csv_path.display());
        report::print_plots(&plots_dir, &files, &runs);
        if failed > 0 {
            println!(
                "{failed} run(s) FAILED: see their logs in {}",
                logs_dir.display()
            );
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
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
        let (ok, skipped) = s.accepted(&all).unwrap();
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
        let (ok, skipped) = s.accepted(&points).map_err(|e| e.to_string())?;
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
        let (ok, skipped) = s.accepted(&points).unwrap();
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
}
