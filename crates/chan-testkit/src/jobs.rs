//! The parent side of a test binary whose cases run as launched jobs: the binary starts itself
//! under a launcher (`mpirun`, `oshrun`) with `--child CASE`, once per case and process count,
//! each under `timeout`, so a hang is a failure with the job's output rather than a stuck test
//! run. A backend's checks supply the cases and the child side; this module launches, filters
//! and reports, the same way for every backend.
//!
//! `AIAC_LAUNCHER_ARGS` adds arguments to every launch, before `-np`: another transport
//! (`--mca pml ob1 --mca btl self,tcp` runs the MPI checks over TCP, as between nodes), or a
//! host file on a cluster (`--hostfile hosts --map-by node`). Split on whitespace.
//!
//! `AIAC_MPIRUN` replaces `mpirun` with another MPI's launcher (`mpiexec.mpich` for a build
//! against MPICH, scripts/test-mpich). Open MPI's own flag `--oversubscribe` is then left out:
//! the job gets `-np N`, the words of `AIAC_LAUNCHER_ARGS` and nothing else.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// How jobs start, and what the report calls them.
pub struct Launcher {
    /// The launcher program (`mpirun`, `oshrun`).
    pub program: &'static str,
    /// The backend, in the summary line ("MPI").
    pub what: &'static str,
    /// The processes, in failure messages ("ranks", "PEs").
    pub unit: &'static str,
}

/// One launched job.
pub struct Job {
    /// What the report and the filter see.
    pub name: String,
    /// The case the child runs.
    pub case: &'static str,
    /// How many processes.
    pub procs: usize,
    /// Seconds before the job counts as hung and is killed.
    pub limit_s: u64,
    /// Words for Open MPI's launcher, for this job alone (after those of [`LAUNCHER_ARGS`]);
    /// a job with some is left out under another launcher ([`MPIRUN`]), which would not
    /// know them.
    pub open_mpi_args: &'static [&'static str],
}

impl Job {
    /// A job named after its case and process count.
    pub fn new(case: &'static str, procs: usize, limit_s: u64) -> Self {
        Job {
            name: format!("{case} np={procs}"),
            case,
            procs,
            limit_s,
            open_mpi_args: &[],
        }
    }
}

/// One job per case and process count: `(case, process counts, time limit in seconds)`.
pub fn per_count(cases: &[(&'static str, &[usize], u64)]) -> Vec<Job> {
    cases
        .iter()
        .flat_map(|&(case, procs, limit)| procs.iter().map(move |&n| Job::new(case, n, limit)))
        .collect()
}

/// The case to run when this process is a launched child (`--child CASE` among the
/// arguments), or None in the parent.
pub fn child_case(args: &[String]) -> Option<&str> {
    let i = args.iter().position(|a| a == "--child")?;
    Some(args.get(i + 1).map_or("", String::as_str))
}

/// Environment variable: words (comma-separated) naming jobs to leave out of [`run_all`].
pub const SKIP_CASES: &str = "AIAC_SKIP_CASES";

/// Run every job whose name contains one of the plain words among `args` (all when there is
/// none; cargo's harness flags start with `-` and are ignored) and none of the words in
/// [`SKIP_CASES`] (comma-separated), one after the other, and report each as a test line.
/// Failure when any job failed or hung, with its output.
pub fn run_all(launcher: &Launcher, args: &[String], mut jobs: Vec<Job>) -> ExitCode {
    let extra = launcher_args();
    let filter: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let skip_var = std::env::var(SKIP_CASES).unwrap_or_default();
    let skip: Vec<&str> = skip_var.split(',').filter(|w| !w.is_empty()).collect();
    jobs.retain(|j| filter.is_empty() || filter.iter().any(|f| j.name.contains(f)));
    let before = jobs.len();
    jobs.retain(|j| !skip.iter().any(|w| j.name.contains(w)));
    if jobs.len() < before {
        println!(
            "
{SKIP_CASES}={skip_var}: {} job(s) left out",
            before - jobs.len()
        );
    }
    let (prog, open_mpi) = program(launcher);
    if !open_mpi {
        let before = jobs.len();
        jobs.retain(|j| j.open_mpi_args.is_empty());
        if jobs.len() < before {
            println!(
                "\n{prog}: {} job(s) for Open MPI's launcher left out",
                before - jobs.len()
            );
        }
    }
    if extra.is_empty() {
        println!(
            "\nrunning {} {} jobs with {prog}",
            jobs.len(),
            launcher.what
        );
    } else {
        println!(
            "\nrunning {} {} jobs with {LAUNCHER_ARGS}: {} {}",
            jobs.len(),
            launcher.what,
            prog,
            extra.join(" ")
        );
    }
    let t = Instant::now();
    let mut failures = Vec::new();
    for job in &jobs {
        match launch(launcher, &extra, job) {
            Ok(t) => println!("test {} ... ok ({:.1} s)", job.name, t.as_secs_f64()),
            Err(e) => {
                println!("test {} ... FAILED", job.name);
                failures.push(e);
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    if failures.is_empty() {
        println!(
            "\n{} checks: {} passed in {secs:.0} s",
            launcher.what,
            jobs.len()
        );
        return ExitCode::SUCCESS;
    }
    for f in &failures {
        eprintln!("\n{f}");
    }
    println!(
        "\n{} checks: {} of {} FAILED",
        launcher.what,
        failures.len(),
        jobs.len()
    );
    ExitCode::FAILURE
}

/// The variable whose words go to the launcher before `-np` (see the module docs).
pub const LAUNCHER_ARGS: &str = "AIAC_LAUNCHER_ARGS";

/// The words of [`LAUNCHER_ARGS`], none when it is unset.
fn launcher_args() -> Vec<String> {
    std::env::var(LAUNCHER_ARGS)
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The variable naming another launcher for `mpirun` jobs (see the module docs).
pub const MPIRUN: &str = "AIAC_MPIRUN";

/// The program that starts `l`'s jobs, and whether it is Open MPI's own (which takes
/// `--oversubscribe`).
fn program(l: &Launcher) -> (String, bool) {
    match std::env::var(MPIRUN) {
        Ok(p) if l.program == "mpirun" && !p.trim().is_empty() => (p.trim().to_owned(), false),
        _ => (l.program.to_owned(), true),
    }
}

/// Launch one job; Err with its output when it fails or hangs.
fn launch(l: &Launcher, extra: &[String], job: &Job) -> Result<Duration, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let (prog, open_mpi) = program(l);
    let t = Instant::now();
    let out = Command::new("timeout")
        .args(["-k", "5", &job.limit_s.to_string(), &prog])
        .args(extra)
        .args(job.open_mpi_args)
        .args(open_mpi.then_some("--oversubscribe"))
        .args(["-np", &job.procs.to_string()])
        .arg(&exe)
        .args(["--child", job.case])
        .output()
        .map_err(|e| format!("cannot start timeout/{prog}: {e}"))?;
    let elapsed = t.elapsed();
    if out.status.success() {
        return Ok(elapsed);
    }
    let why = match out.status.code() {
        Some(124) | Some(137) => format!("HUNG: killed after {} s", job.limit_s),
        Some(c) => format!("exit status {c}"),
        None => "killed by a signal".into(),
    };
    let over = if extra.is_empty() {
        String::new()
    } else {
        format!(" ({prog} {})", extra.join(" "))
    };
    Err(format!(
        "{} with {} {}{over}: {why}\n--- stdout\n{}--- stderr\n{}",
        job.case,
        job.procs,
        l.unit,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
