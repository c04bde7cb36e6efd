//! The one error type of every subcommand, and its one way to the exit code: `main` prints it
//! once (unless a rank already did, or leaves it to rank 0) and exits 1.

use jacobi::ConfigError;
use std::path::PathBuf;
use std::process::ExitCode;

/// A failed subcommand.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Bad input to the solver (its settings named by their flags).
    #[error("{}", crate::flags::config_error(.0))]
    Config(#[from] ConfigError),
    /// The solver failed.
    #[error("{}", crate::flags::solver_error(.0))]
    Solver(#[from] jacobi::Error),
    /// The job cannot run as asked (launcher, size, library).
    #[error("{0}")]
    Launch(String),
    /// The work ran and its result is wrong (a hash table that lost an object), or a child
    /// job failed.
    #[error("{0}")]
    Failed(String),
    /// The error was already printed (by this rank or the one that prints for the job):
    /// this rank only exits non-zero.
    #[error("(reported)")]
    // Only launched backends (MPI, SHMEM) report for the whole job.
    #[cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]
    AlreadyReported,
    /// Under a launcher, before any library is initialised: rank 0 reports this error and
    /// exits 1; this rank exits 0 at once, so the launcher does not stop rank 0 before it
    /// has printed.
    #[error("(left to rank 0)")]
    LeftToRank0,
    /// An output file or directory cannot be written.
    #[error("{flag} {}: {why}", path.display())]
    Output {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// An input file cannot be read (not a regular file, absent, too large).
    #[error("{flag} {}: {why}", path.display())]
    Input {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Other bad input (the message names the flag).
    #[error("{0}")]
    Invalid(String),
}

/// A subcommand's outcome as the process's exit code: its own code (0 converged or done, 2
/// not converged), or 1 for an error, printed here once.
pub(crate) fn exit_code(result: Result<ExitCode, Error>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(Error::AlreadyReported) => ExitCode::from(1),
        Err(Error::LeftToRank0) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("aiac: error: {e}"));
            ExitCode::from(1)
        }
    }
}

/// Print `line` on standard error in one write: the ranks of a job share one log (a
/// launcher's, or the file `aiac sweep` and `aiac dht -t` give a job), and `eprintln!`'s
/// pieces from two ranks interleaved there ("aiac: error on aiac: error on PE 1: ...").
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
