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

use crate::args::{is_laplace, parse_timeout, BackendArg, Fixed, SweepSettings, SystemFiles};
use crate::error::Error;
use crate::launch::{log_gist, run_logged, Ended};
use crate::matrix::System;
use crate::output::{check_dir, lock_dir, write_atomically};
use crate::progress::SweepProgress;
use crate::saved::{self, FailedRun, Outcome};
use crate::{report, summary};
use clap::Args;
use jacobi::{RunConfig, Setting};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

/// `aiac sweep`'s flags: `aiac run`'s, each a list, and the sweep's own.
#[derive(Debug, Args)]
#[command(
    after_help = "Every list is comma-separated (or give the flag again). Write a \
    non-cubic size as NXxNYxNZ. Examples:\n  \
    aiac sweep --variant sync,async,racy -t 2 --max-in-flight 1,2,4 --repeats 3 --out fig10\n  \
    aiac sweep --problem poisson --global 64 --decomp z --exchange blocking,overlap \\\n    \
    -t 1,2,4,8 --max-iters 200 --backend mpi --out scaling\n  \
    aiac sweep --matrix A.mtx --solver jacobi,cg -t 1,2,4 --out system"
)]
pub(crate) struct SweepArgs {
    /// `aiac run`'s settings, each a list (read through `Deref`).
    #[command(flatten)]
    settings: SweepSettings,
    #[command(flatten)]
    system: SystemFiles,
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

/// A run the sweep will start: its point, file stem, report path, `aiac run` arguments and the
/// `config` its report will have (recorded for a run that fails).
struct Planned<'a> {
    point: &'a Point,
    stem: String,
    json: PathBuf,
    argv: Vec<String>,
    config: RunConfig,
}

/// `aiac sweep`.
pub(crate) fn sweep(args: &SweepArgs) -> Result<ExitCode, Error> {
    tracing::debug!(?args, "aiac sweep");
    // Every check first: nothing runs and nothing is written unless all of it is right.
    args.check_flags()?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::Launch(format!("cannot find the aiac binary to run: {e}")))?;
    for b in &args.backend {
        if let Some(l) = b.info().launcher {
            l.check_installed()?;
        }
    }
    // The system, read once: every run's configuration and rank count is checked against it.
    let system = args.system()?;
    let all = args.points();
    let (planned, skipped) = args.plan(&all, system.as_ref())?;
    drop(system); // each run reads it again: not held while they run
    let _lock = args.prepare_out()?;
    if !args.quiet {
        for (p, why) in skipped.iter().filter(|(p, _)| p.repeat == 0) {
            eprintln!("aiac sweep: skipping {}: {why}", p.label);
        }
    }
    // From here a SIGINT or SIGTERM stops the running child and then the sweep.
    crate::signals::defer();
    let n = planned.len();
    let progress = SweepProgress::new(n, args.quiet);
    let mut names = Vec::with_capacity(n);
    let mut runs = Vec::with_capacity(n);
    for (i, run) in planned.into_iter().enumerate() {
        let what = if args.repeats > 1 {
            format!("{} (repeat {})", run.point.label, run.point.repeat + 1)
        } else {
            run.point.label.clone()
        };
        progress.starting(i, &what);
        let (outcome, result) = match args.launch(&exe, &run, &progress, (i, n), &what) {
            Ok(done) => done,
            Err(sig) => {
                drop(progress);
                return Ok(interrupted(sig));
            }
        };
        progress.finished(i, &what, &result);
        names.push(run.stem);
        runs.push(outcome);
    }
    drop(progress);
    args.finish(&names, &runs)
}

impl SweepArgs {
    /// The sweep's own flags, and the lists checked whole (a bad value is a mistake whatever
    /// the runs).
    fn check_flags(&self) -> Result<(), Error> {
        if self.repeats == 0 {
            return Err(Error::Invalid("--repeats must be at least 1, got 0".into()));
        }
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            return Err(Error::Invalid(format!(
                "--timeout must be a positive number of seconds, got {}",
                self.timeout
            )));
        }
        // The Laplace problem is the default: no --problem list, or one that has it.
        let laplace = self.problem.is_empty() || self.problem.iter().any(is_laplace);
        if !self.offset.is_empty() && !laplace {
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
        for &r in &self.max_in_flight {
            let run =
                crate::parse_run_args(["--variant", "async", "--max-in-flight", &r.to_string()])
                    .expect("any usize is a --max-in-flight value");
            run.config()?.validate()?;
        }
        Ok(())
    }

    /// `--matrix` (and `--rhs`), read as `aiac run` reads them: a file that is missing, not a
    /// Matrix Market matrix or not square is refused before anything runs.
    fn system(&self) -> Result<Option<System>, Error> {
        let Some(m) = &self.system.matrix else {
            return Ok(None);
        };
        let mut argv = vec!["--matrix".into(), m.clone().into_os_string()];
        if let Some(r) = &self.system.rhs {
            argv.extend(["--rhs".into(), r.clone().into_os_string()]);
        }
        let run = crate::parse_run_args(argv).map_err(|e| Error::Invalid(e.to_string()))?;
        System::read(&run).map(Some)
    }

    /// The runs to start, each with its file stem, report path and arguments, and those
    /// `aiac run` refuses with the reason; refused whole when a value of a list no run takes.
    #[allow(clippy::type_complexity)]
    fn plan<'a>(
        &self,
        all: &'a [Point],
        system: Option<&System>,
    ) -> Result<(Vec<Planned<'a>>, Vec<(&'a Point, String)>), Error> {
        let (accepted, skipped) = self.accepted(all, system)?;
        let taken: Vec<&Point> = accepted.iter().map(|r| r.0).collect();
        self.check_unused(&taken, &skipped)?;
        if self.fixed.no_confirm
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
        let runs_dir = self.out.join("runs");
        let mut planned = Vec::with_capacity(n);
        for (i, (point, run_args, cfg, plan)) in accepted.into_iter().enumerate() {
            let stem = file_stem(i + 1, n, point, self.repeats);
            let json = runs_dir.join(format!("{stem}.json"));
            let mut argv = point.argv.clone();
            argv.extend([
                "--json".into(),
                json.display().to_string(),
                "--quiet".into(),
            ]);
            let config = run_args.report_config(&cfg, &plan);
            planned.push(Planned {
                point,
                stem,
                json,
                argv,
                config,
            });
        }
        Ok((planned, skipped))
    }

    /// The output directory, created when missing, locked for this sweep (held until it ends),
    /// and the previous sweep's runs and logs removed: last of the checks, so that nothing
    /// exists before all is right.
    fn prepare_out(&self) -> Result<std::fs::File, Error> {
        let (runs_dir, logs_dir) = (self.out.join("runs"), self.out.join("logs"));
        for d in [&self.out, &runs_dir, &logs_dir, &self.out.join("plots")] {
            check_dir("--out", d)?;
        }
        // The sweep writes and removes files under --out: an input there could be lost.
        let out = std::fs::canonicalize(&self.out).ok();
        for (flag, input) in [
            ("--matrix", &self.system.matrix),
            ("--rhs", &self.system.rhs),
        ] {
            let inside = match (input, &out) {
                (Some(f), Some(out)) => std::fs::canonicalize(f).is_ok_and(|f| f.starts_with(out)),
                _ => false,
            };
            if inside {
                return Err(Error::Invalid(format!(
                    "{flag} {} lies under --out {}, where the sweep writes and removes its \
                     files: keep the input elsewhere",
                    input
                        .as_ref()
                        .map_or(String::new(), |f| f.display().to_string()),
                    self.out.display()
                )));
            }
        }
        // One sweep (or report) at a time writes into the directory.
        let lock = lock_dir("--out", &self.out)?;
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
        Ok(lock)
    }

    /// Start run `i` of `n` as a child of `exe`, wait for it (within `--timeout`) and read its
    /// report: the outcome and the line the progress shows. `Err`: the sweep was signalled.
    fn launch(
        &self,
        exe: &Path,
        run: &Planned<'_>,
        progress: &SweepProgress,
        (i, n): (usize, usize),
        what: &str,
    ) -> Result<(Outcome, String), i32> {
        let p = run.point;
        let log_path = self.out.join("logs").join(format!("{}.log", run.stem));
        let mut cmd = match p.backend.info().launcher {
            Some(l) => {
                // Hybrid ranks: unbound, each rank pins its workers within the whole node.
                let hybrid = p
                    .argv
                    .windows(2)
                    .any(|w| w[0] == "--threads-per-rank" && w[1] != "1");
                let opts: &[&str] = if hybrid { &["--bind-to", "none"] } else { &[] };
                l.command_with(opts, p.ranks, exe)
            }
            None => Command::new(exe),
        };
        cmd.arg("run").args(&run.argv);
        let command: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        tracing::debug!(?command, "starting");
        if let Some(sig) = crate::signals::pending() {
            return Err(sig);
        }
        let ended = run_logged(&mut cmd, &log_path, Duration::from_secs_f64(self.timeout));
        if let Ok(Ended::Signalled(sig)) = ended {
            return Err(sig);
        }
        let (status, code) = match &ended {
            Ok(Ended::Exited(st)) => (None, st.code()),
            Ok(Ended::TimedOut) => (Some("timeout"), None),
            Ok(Ended::Signalled(_)) => unreachable!("returned above"),
            Err(_) => (Some("failed"), None),
        };
        let report = match (status, code) {
            (None, Some(0 | 2)) => saved::load(&run.json).ok(),
            _ => None,
        };
        if let Some(o @ Outcome::Ok(_)) = report {
            let r = o.run().expect("a report");
            let result = format!(
                "{:.4} s, {:.0} iterations (mean over ranks), {}",
                r.time_s,
                r.iterations.mean,
                r.status().replace('_', " ")
            );
            return Ok((o, result));
        }
        let why = match (&ended, code) {
            (Err(e), _) => format!("could not start: {e}"),
            (Ok(Ended::TimedOut), _) => format!("timed out after {} s", self.timeout),
            (Ok(Ended::Signalled(_)), _) => unreachable!("returned above"),
            (_, Some(c)) if c != 0 && c != 2 => format!("exit code {c}"),
            (_, Some(_)) => "no readable report".into(),
            (_, None) => "killed by a signal".into(),
        };
        let failed = FailedRun {
            schema: saved::FAILED_SCHEMA.into(),
            status: status.unwrap_or("failed").into(),
            exit_code: code,
            command,
            log: format!("../logs/{}.log", run.stem),
            repeat: p.repeat,
            config: run.config.clone(),
        };
        let path = self
            .out
            .join("runs")
            .join(format!("{}.failed.json", run.stem));
        let _ = std::fs::remove_file(&run.json);
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
        Ok((Outcome::Failed(Box::new(failed)), format!("FAILED: {why}")))
    }

    /// The table (CSV), the plots and the summary; exit 1 if a run failed.
    fn finish(&self, names: &[String], runs: &[Outcome]) -> Result<ExitCode, Error> {
        let (runs_dir, logs_dir) = (self.out.join("runs"), self.out.join("logs"));
        let plots_dir = self.out.join("plots");
        let csv_path = self.out.join("sweep.csv");
        let files = report::write_table_and_plots(names, runs, &csv_path, &plots_dir)?;
        if let Some(sig) = crate::signals::pending() {
            return Ok(interrupted(sig));
        }
        let failed = runs.iter().filter(|o| o.run().is_none()).count();
        if !self.quiet {
            print!("{}", summary::summary(runs));
            println!();
            println!("reports  {}", runs_dir.display());
            println!("table    {}", csv_path.display());
            report::print_plots(&plots_dir, &files, runs);
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
}

mod grid;

#[cfg(test)]
mod test;
