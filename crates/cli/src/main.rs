//! `aiac`: run aiac's solvers from the command line.
//!
//! `aiac run --backend threads -t 8 --variant racy` runs the paper's Jacobi on 8 threads;
//! rank 0 prints the paper's table and, with `--json FILE`, writes the report atomically.
//! Exit code: 0 converged, 2 not converged (within `--max-iters`, or an unconfirmed claim that
//! the true residual refutes), 1 error (bad input included: one message naming the flag).

mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "aiac",
    version,
    about = "Asynchronous iterations, asynchronous communications: safe typed channels for HPC and the solvers built on them"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a solver (the paper's 3-D Jacobi) on one backend and report.
    Run(Box<run::RunArgs>),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout with success; every usage error exits 1 (exit
            // code 2 means "not converged").
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(1),
            };
        }
    };
    match cli.cmd {
        Cmd::Run(args) => match run::run(&args) {
            Ok(code) => code,
            Err(run::RunError::ReportedByRank0) => ExitCode::from(1),
            Err(e) => {
                eprintln!("aiac: error: {e}");
                ExitCode::from(1)
            }
        },
    }
}
