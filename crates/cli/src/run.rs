//! `aiac run`: parse, validate, run on the chosen backend, report from rank 0.
//!
//! Every backend goes through one generic function, [`run_on`], over chan-core's
//! [`Context`]: the threads backend calls it on each of its rank threads; the MPI and SHMEM
//! backends call it once per process.

use chan_core::threads::World;
use chan_core::Context;
use clap::{Args, ValueEnum};
use jacobi::{
    Config, ConfigError, Decomp, Dims, Exchange, Problem, ProcGrid, Report, SizeSpec, SlowRank,
    Variant,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A failed `aiac run`.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The run failed.
    #[error(transparent)]
    Solver(#[from] jacobi::Error),
    /// The MPI job cannot run as asked (launcher, size).
    #[error("{0}")]
    Launch(String),
    /// The same error, already reported by rank 0: this rank only exits non-zero.
    #[error("(reported by rank 0)")]
    ReportedByRank0,
    /// The report could not be written.
    #[error("--json {path}: {why}")]
    Output {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// Ranks are threads of this process, talking over chan-core's channels.
    Threads,
    /// Shared memory (rayon): threads read their neighbours' planes directly.
    Shared,
    /// MPI processes started by mpirun, one rank each (needs the `mpi` feature).
    Mpi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum VariantArg {
    Sync,
    Async,
    Racy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProblemArg {
    /// The paper's Laplace problem on the unit cube (stops on the relative residual).
    Laplace,
    /// −Δu = f with the exact solution sin²(πx)sin²(πy)sin²(πz) (Wang & Gobbert; stops on
    /// ‖u_k − u_{k−1}‖₂, reports the max error against the exact solution).
    Poisson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DecompArg {
    /// The paper's 3-D process grid (x, then y, then z at each doubling).
    Paper,
    /// A 1-D split in z: 1 × 1 × ranks.
    Z,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExchangeArg {
    /// Start every send, wait for every receive, then sweep.
    Waitall,
    /// Synchronous sends and receives one at a time, even/odd ordered.
    Blocking,
    /// Sweep the interior while the halos travel, then the boundary layer.
    Overlap,
}

fn parse_dims(s: &str) -> Result<Dims, String> {
    SizeSpec::parse_dims(s)
}

fn parse_grid(s: &str) -> Result<ProcGrid, String> {
    ProcGrid::parse(s)
}

/// `aiac run`'s flags.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the ranks run.
    #[arg(long, value_enum, default_value_t = BackendArg::Threads)]
    backend: BackendArg,
    /// sync: halo swap and reduction in lock-step; async: newest whole message; racy: atomic
    /// view of a buffer written at any time.
    #[arg(long, value_enum, default_value_t = VariantArg::Sync)]
    variant: VariantArg,
    /// Number of ranks (threads backend) or threads (shared backend), default 1. With
    /// `--backend mpi` the ranks are mpirun's processes; a value given here must match them.
    #[arg(short = 't', long = "threads")]
    threads: Option<usize>,
    /// The problem.
    #[arg(long, value_enum, default_value_t = ProblemArg::Laplace)]
    problem: ProblemArg,
    /// Interior points per rank: N or NX,NY,NZ (default 50, weak scaling).
    #[arg(long, value_parser = parse_dims, conflicts_with = "global")]
    local: Option<Dims>,
    /// Interior points of the whole grid, N or NX,NY,NZ, split over the process grid.
    #[arg(long, value_parser = parse_dims)]
    global: Option<Dims>,
    /// Process grid PXxPYxPZ (default: as --decomp says).
    #[arg(long, value_parser = parse_grid)]
    grid: Option<ProcGrid>,
    /// The shape of the process grid when --grid is not given.
    #[arg(long, value_enum, default_value_t = DecompArg::Paper)]
    decomp: DecompArg,
    /// How the sync variant swaps its halos.
    #[arg(long, value_enum, default_value_t = ExchangeArg::Waitall)]
    exchange: ExchangeArg,
    /// Laplace: stop when ‖b − A u_k‖₂ / ‖b − A u_0‖₂ < TOL (default 1e-4). Poisson: stop when
    /// ‖u_k − u_{k−1}‖₂ ≤ TOL (default 1e-6).
    #[arg(long, allow_hyphen_values = true)]
    tol: Option<f64>,
    /// Sync: test the criterion (a global reduction) every K iterations (default: 100 for
    /// Laplace, as the paper; 1 for Poisson, as Wang & Gobbert).
    #[arg(long)]
    check_every: Option<u64>,
    /// Exchange halos every N iterations.
    #[arg(long, default_value_t = 1)]
    halo_every: u64,
    /// R: messages in flight per channel direction (async, racy).
    #[arg(long, default_value_t = 2)]
    max_in_flight: usize,
    /// No rank iterates more than this.
    #[arg(long, default_value_t = 1_000_000)]
    max_iters: u64,
    /// Add C to the boundary values and start the interior at C.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    offset: f64,
    /// Certify a convergence claim with a synchronous swap and reduction (default).
    #[arg(long, overrides_with = "no_confirm")]
    confirm: bool,
    /// Stop at the first convergence claim, as the paper does.
    #[arg(long, overrides_with = "confirm")]
    no_confirm: bool,
    /// Make this rank's sweeps slower.
    #[arg(long)]
    slow_rank: Option<usize>,
    /// How many times slower (default 2).
    #[arg(long, requires = "slow_rank", allow_hyphen_values = true)]
    slowdown: Option<f64>,
    /// Write the report as JSON to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// No table, no progress line.
    #[arg(short, long)]
    quiet: bool,
}

impl RunArgs {
    /// The solver configuration the flags describe.
    fn config(&self) -> Config {
        let size = match (self.local, self.global) {
            (_, Some(g)) => SizeSpec::Global(g),
            (Some(l), None) => SizeSpec::Local(l),
            (None, None) => SizeSpec::Local(Dims::cube(50)),
        };
        let problem = match self.problem {
            ProblemArg::Laplace => Problem::Laplace {
                offset: self.offset,
            },
            ProblemArg::Poisson => Problem::Poisson,
        };
        let criterion = problem.default_criterion();
        Config {
            problem,
            variant: match self.variant {
                VariantArg::Sync => Variant::Sync,
                VariantArg::Async => Variant::Async,
                VariantArg::Racy => Variant::Racy,
            },
            size,
            grid: self.grid,
            decomp: match self.decomp {
                DecompArg::Paper => Decomp::Paper,
                DecompArg::Z => Decomp::Z,
            },
            exchange: match self.exchange {
                ExchangeArg::Waitall => Exchange::Waitall,
                ExchangeArg::Blocking => Exchange::Blocking,
                ExchangeArg::Overlap => Exchange::Overlap,
            },
            criterion: self.tol.map_or(criterion, |t| criterion.with_tol(t)),
            check_every: self.check_every.unwrap_or(problem.default_check_every()),
            halo_every: self.halo_every,
            max_in_flight: self.max_in_flight,
            max_iters: self.max_iters,
            confirm: !self.no_confirm,
            slow: self.slow_rank.map(|rank| SlowRank {
                rank,
                factor: self.slowdown.unwrap_or(2.0),
            }),
            progress: !self.quiet,
        }
    }
}

/// Exit code 0 converged, 2 not.
fn exit_code(converged: bool) -> ExitCode {
    if converged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// Run on one rank of any backend (collective) and report from rank 0. The MPI and SHMEM
/// backends call this once per process with their context.
pub fn run_on<C: Context>(
    ctx: &mut C,
    backend: &str,
    cfg: &Config,
    args: &RunArgs,
) -> Result<ExitCode, RunError> {
    let plan = cfg.plan(ctx.size())?;
    let rec = jacobi::run_rank(ctx, cfg)?;
    let converged = rec.converged;
    match jacobi::gather_records(ctx, &rec)? {
        Some(records) => finish(Report::new(backend, cfg, &plan, records), args),
        None => Ok(exit_code(converged)),
    }
}

/// `aiac run`.
pub fn run(args: &RunArgs) -> Result<ExitCode, RunError> {
    let cfg = args.config();
    let threads = args.threads.unwrap_or(1);
    if threads == 0 {
        return Err(ConfigError::NoRanks.into());
    }
    if args.backend == BackendArg::Mpi {
        return run_mpi(args, &cfg);
    }
    check_output(args)?;
    match args.backend {
        BackendArg::Threads => {
            // Validate once before starting threads, so bad input gives one message.
            cfg.plan(threads)?;
            // One rank per CPU when they fit (unpinned busy-polling ranks can share a core).
            let world = World::new(threads)
                .map_err(|_| ConfigError::NoRanks)?
                .pinned();
            let outcomes = world.run(|ctx| run_on(ctx, "threads", &cfg, args));
            let mut first = None;
            for o in outcomes {
                match o {
                    Ok(code) => {
                        first.get_or_insert(Ok(code));
                    }
                    Err(e) => return Err(e),
                }
            }
            first.unwrap_or(Err(ConfigError::NoRanks.into()))
        }
        BackendArg::Shared => {
            let plan = jacobi::shared::plan(&cfg, threads)?;
            let records = jacobi::shared::run(&cfg, threads)?;
            finish(Report::new("shared", &cfg, &plan, records), args)
        }
        BackendArg::Mpi => unreachable!("handled above"),
    }
}

/// `--backend mpi`: one rank per process of the MPI job.
///
/// Input is checked on every rank before any collective call, identically, so a bad flag
/// makes every rank stop; only rank 0 prints it, and MPI is finalized cleanly. An error during
/// the run may leave other ranks waiting in a collective call for this one: that rank prints
/// it and aborts the job (`MPI_Abort`), so nothing hangs.
#[cfg(feature = "mpi")]
fn run_mpi(args: &RunArgs, cfg: &Config) -> Result<ExitCode, RunError> {
    let mut ctx = chan_mpi::MpiCtx::init().map_err(|e| RunError::Launch(e.to_string()))?;
    let (rank, size) = (ctx.rank(), ctx.size());
    let checked = mpi_job_matches(args, size)
        .and_then(|()| cfg.plan(size).map(drop).map_err(RunError::from))
        .and_then(|()| check_output(args));
    if let Err(e) = checked {
        let finalized = ctx.finalize();
        if rank != 0 {
            return Err(RunError::ReportedByRank0);
        }
        if let Err(f) = finalized {
            eprintln!("aiac: while stopping MPI: {f}");
        }
        return Err(e);
    }
    match run_on(&mut ctx, "mpi", cfg, args) {
        Ok(code) => {
            ctx.finalize()
                .map_err(|e| RunError::Launch(format!("MPI finalize: {e}")))?;
            Ok(code)
        }
        Err(e) => {
            eprintln!("aiac: error on rank {rank}: {e}");
            ctx.abort(1)
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &RunArgs, _: &Config) -> Result<ExitCode, RunError> {
    Err(RunError::Launch(
        "--backend mpi: this aiac was built without MPI (cargo feature `mpi`)".into(),
    ))
}

/// An MPI job's size must be what `-t` asks for; a job of one process that should be several
/// was started without its launcher.
#[cfg(feature = "mpi")]
fn mpi_job_matches(args: &RunArgs, size: usize) -> Result<(), RunError> {
    match args.threads {
        Some(n) if n != size => Err(RunError::Launch(format!(
            "-t/--threads {n} asks for {n} ranks but this MPI job has {size}{}: start it with \
             `mpirun -np {n} aiac run --backend mpi …` (and without -t, mpirun's -np decides)",
            if size == 1 && std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() {
                " (it was not started by mpirun)"
            } else {
                ""
            }
        ))),
        _ => Ok(()),
    }
}

/// Fail before running if the report could not be written where asked.
fn check_output(args: &RunArgs) -> Result<(), RunError> {
    let Some(path) = &args.json else {
        return Ok(());
    };
    let bad = |why: &str| RunError::Output {
        path: path.clone(),
        why: why.to_string(),
    };
    if path.is_dir() {
        return Err(bad("is a directory"));
    }
    let dir = parent_dir(path);
    if !dir.is_dir() {
        return Err(bad(&format!("directory {} does not exist", dir.display())));
    }
    Ok(())
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Rank 0: the table, the JSON, the exit code.
fn finish(report: Report, args: &RunArgs) -> Result<ExitCode, RunError> {
    if let Some(path) = &args.json {
        let text = serde_json::to_vec_pretty(&report).map_err(|e| RunError::Output {
            path: path.clone(),
            why: e.to_string(),
        })?;
        write_atomically(path, &text).map_err(|e| RunError::Output {
            path: path.clone(),
            why: e.to_string(),
        })?;
    }
    if !args.quiet {
        print!("{}", report.table());
    }
    Ok(exit_code(report.converged))
}

/// Write to a temporary file beside `path`, flush it to disk, rename it over `path`: readers
/// see the old file or the whole new one, never a half-written one.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = parent_dir(path).join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
