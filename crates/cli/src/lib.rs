//! `aiac`: run aiac's solvers from the command line, and the paper's experiments.
//!
//! * `aiac run` runs the paper's Jacobi once on one backend: rank 0 shows a progress line,
//!   prints the paper's table and writes `--json`, `--csv` and `--history` files atomically.
//! * `aiac sweep` runs a grid of configurations (every `run` flag takes a comma-separated
//!   list), each as a child process under a timeout (`mpirun` for MPI), and writes every
//!   run's JSON, one CSV, the summary tables (strong or weak scaling efficiency when the
//!   process count varies) and the plots.
//! * `aiac dht` runs Maynard's distributed hash table benchmark over one-sided windows
//!   (threads, or under `mpirun`/`oshrun`) and checks the table.
//! * `aiac report` prints the tables and draws the plots again from saved JSON.
//! * `aiac probe` (under `mpirun -np 2`) runs Saif and Parashar's non-blocking test kernel:
//!   the eager/rendezvous threshold, overlap, and the effect of an intermediate `MPI_Test`.
//!
//! Exit code: 0 converged, 2 not converged (within `--max-iters`, or an unconfirmed claim that
//! the true residual refutes), 1 error (bad input included: one message naming the flag).
//! `RUST_LOG=debug aiac …` logs what the tool does (off by default).

mod args;
mod dht;
mod error;
mod flags;
mod input;
mod launch;
mod matrix;
mod output;
mod plots;
#[cfg(feature = "mpi")]
mod probe;
mod progress;
mod report;
mod resume;
mod run;
mod saved;
mod signals;
mod summary;
mod sweep;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "aiac",
    version,
    about = "Asynchronous iterations, asynchronous communications: the paper's Jacobi solver \
             over threads, shared memory and MPI, and its experiments",
    long_about = "Asynchronous iterations, asynchronous communications: the paper's Jacobi \
                  solver over threads, shared memory and MPI, and its experiments.\n\n\
                  Exit code: 0 converged, 2 not converged, 1 error. Set RUST_LOG=debug to \
                  see what aiac does.",
    after_help = "Examples:\n  \
        aiac run --backend threads -t 4 --variant racy --global 64\n  \
        mpirun -np 4 aiac run --backend mpi --variant async --json run.json\n  \
        aiac sweep --variant sync,async,racy --max-in-flight 1,2,8 -t 2 --out sweep\n  \
        aiac report sweep --out plots"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the paper's 3-D Jacobi once on one backend: progress line, table, files.
    Run(Box<args::RunArgs>),
    /// Run a grid of configurations (every run flag takes a list) and tabulate and plot them.
    Sweep(Box<sweep::SweepArgs>),
    /// Print the tables and draw the plots again from saved JSON reports.
    Report(report::ReportArgs),
    /// Saif & Parashar's Isend/compute/Wait kernel under `mpirun -np 2`: the eager limit,
    /// overlap, and what an intermediate MPI_Test or an aiac channel changes.
    #[cfg(feature = "mpi")]
    Probe(probe::ProbeArgs),
    /// Maynard's distributed hash table over one-sided windows: insert by compare-and-swap,
    /// probe, time both, check every object is there once.
    Dht(dht::DhtArgs),
}

/// `RUST_LOG`-style logging to stderr, off unless `RUST_LOG` is set.
fn init_logging() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            .try_init();
    }
}

/// The command line `argv` (its first item the program's name), run: what `aiac`'s `main`
/// does with its own arguments.
pub fn main_with<I, S>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            // Under a launcher every rank parses the same arguments: rank 0 alone prints,
            // and the others exit 0 at once, so that the launcher does not stop rank 0
            // before it has printed (the job's exit code is rank 0's).
            let other_rank = !launch::Placement::here().reports_for_job();
            if !other_rank {
                let _ = e.print();
                let _ = std::io::Write::flush(&mut std::io::stderr());
            }
            // Help and version go to stdout with success; every usage error exits 1 (exit
            // code 2 means "not converged").
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    ExitCode::SUCCESS
                }
                _ if other_rank => ExitCode::SUCCESS,
                _ => ExitCode::from(1),
            };
        }
    };
    init_logging();
    // A simulated rank is a thread of SimGrid's process: the process's signals are not its.
    if matches!(cli.cmd, Cmd::Run(_) | Cmd::Dht(_)) && !launch::simulated() {
        signals::take();
    }
    if launch::simulated() {
        if let Err(e) = simulated_command(&cli.cmd) {
            return error::exit_code(Err(launch::Placement::here().before_start(e)));
        }
    }
    error::exit_code(match cli.cmd {
        Cmd::Run(args) => run::run(&args),
        Cmd::Sweep(args) => sweep::sweep(&args),
        Cmd::Report(args) => report::report(&args),
        #[cfg(feature = "mpi")]
        Cmd::Probe(args) => probe::probe(&args),
        Cmd::Dht(args) => dht::dht(&args),
    })
}

/// `main` of aiac's SMPI build (`crates/smpi`, loaded by SimGrid's `smpirun`): `argv` run as
/// simulated rank `rank` of the job, whose time is the simulation's (`MPI_Wtime`). Only
/// `aiac run --backend mpi` runs there. Returns the exit code: 0 converged, 2 not
/// converged, 1 error.
#[cfg(feature = "mpi")]
pub fn main_simulated<I, S>(argv: I, rank: usize) -> i32
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    launch::set_simulated(rank);
    jacobi::set_clock(mpi::time);
    let code = main_with(argv);
    if code == ExitCode::SUCCESS {
        0
    } else if code == ExitCode::from(2) {
        2
    } else {
        1
    }
}

/// What runs under SMPI: a run of the MPI backend. Everything else either starts processes
/// (`sweep`), runs every rank in one process (the other backends) or belongs to a real
/// machine (`probe` measures this machine's MPI; `report` and `dht` run fine without a
/// simulator).
fn simulated_command(cmd: &Cmd) -> Result<(), error::Error> {
    let refuse = |what: &str| {
        Err(error::Error::Launch(format!(
            "{what} does not run under smpirun: aiac's SMPI build runs `aiac run --backend \
             mpi` (scripts/scale runs the experiments); run other commands with the aiac \
             binary"
        )))
    };
    match cmd {
        Cmd::Run(args) if args.backend.info().launcher == Some(launch::Launcher::Mpirun) => Ok(()),
        Cmd::Run(args) => refuse(&format!("`aiac run {}`", args.backend.info().flag)),
        Cmd::Sweep(_) => refuse("`aiac sweep`"),
        Cmd::Report(_) => refuse("`aiac report`"),
        #[cfg(feature = "mpi")]
        Cmd::Probe(_) => refuse("`aiac probe`"),
        Cmd::Dht(_) => refuse("`aiac dht`"),
    }
}

/// Parse `aiac run …` arguments (the sweep checks every run it will start with this).
fn parse_run_args<I, S>(argv: I) -> Result<args::RunArgs, clap::Error>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(
        std::iter::once(std::ffi::OsString::from("aiac"))
            .chain(std::iter::once(std::ffi::OsString::from("run")))
            .chain(argv.into_iter().map(Into::into)),
    )?;
    match cli.cmd {
        Cmd::Run(a) => Ok(*a),
        _ => unreachable!("parsed as `aiac run`"),
    }
}
