//! `aiac run`: parse, validate, run on the chosen backend, report from rank 0.
//!
//! Every backend goes through one generic function, [`run_on`], over chan-core's
//! [`Context`]: the threads backend calls it on each of its rank threads; the MPI and SHMEM
//! backends call it once per process.

use crate::output::{check_distinct, check_file, write_atomically, Csv};
use crate::progress::RunProgress;
use crate::saved::{self, ConfigExt};
use chan_core::Context;
use chan_threads::World;
use clap::{Args, ValueEnum};
use jacobi::{
    Config, ConfigError, Decomp, Dims, Exchange, Inner, Method, MethodFlags, Pc, Plan, Problem,
    ProcGrid, RacyRead, ReductionKind, Report, RunConfig, SizeSpec, SlowRank, Solver, Variant,
    MAX_SLOWDOWN,
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
    /// Other bad input (the message names the flag).
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum BackendArg {
    /// Ranks are threads of this process, talking over chan-core's channels.
    Threads,
    /// Shared memory (rayon): threads read their neighbours' planes directly.
    Shared,
    /// MPI processes started by mpirun, one rank each (needs the `mpi` feature).
    Mpi,
    /// OpenSHMEM processing elements started by oshrun, one rank each (needs the `shmem`
    /// feature).
    Shmem,
}

/// What the tool knows of a backend. Adding a backend to the tool is one arm of
/// [`BackendArg::info`] (and its variant): everything else reads this.
pub(crate) struct BackendInfo {
    /// The name, as `--backend` spells it and reports record it.
    pub(crate) name: &'static str,
    /// `--backend NAME`, for messages.
    pub(crate) flag: &'static str,
    /// The program that starts its processes, if it needs one.
    pub(crate) launcher: Option<&'static str>,
    /// Has a native non-blocking all-reduce (`--reduction iallreduce`); others use the tree.
    pub(crate) iallreduce: bool,
    /// Decomposes for shared memory (planes per thread) rather than over ranks.
    pub(crate) shared_memory: bool,
    /// Run `aiac run` on it: validate, solve, report.
    pub(crate) run: fn(&RunArgs) -> Result<ExitCode, RunError>,
}

impl BackendArg {
    /// Everything the tool needs to know of this backend.
    pub(crate) fn info(self) -> BackendInfo {
        match self {
            BackendArg::Threads => BackendInfo {
                name: "threads",
                flag: "--backend threads",
                launcher: None,
                iallreduce: false,
                shared_memory: false,
                run: run_threads,
            },
            BackendArg::Shared => BackendInfo {
                name: "shared",
                flag: "--backend shared",
                launcher: None,
                iallreduce: false,
                shared_memory: true,
                run: run_shared,
            },
            BackendArg::Mpi => BackendInfo {
                name: "mpi",
                flag: "--backend mpi",
                launcher: Some("mpirun"),
                iallreduce: true,
                shared_memory: false,
                run: run_mpi,
            },
            BackendArg::Shmem => BackendInfo {
                name: "shmem",
                flag: "--backend shmem",
                launcher: Some("oshrun"),
                iallreduce: false,
                shared_memory: false,
                run: run_shmem,
            },
        }
    }

    /// The program that starts this backend's processes, if it needs one.
    pub fn launcher(self) -> Option<&'static str> {
        self.info().launcher
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum VariantArg {
    /// Halo swap and global residual in lock-step.
    Sync,
    /// The newest whole halo message, non-blocking reduction.
    Async,
    /// An atomic view of a halo buffer written at any time.
    Racy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum SolverArg {
    /// The paper's Jacobi iteration (sync, async or racy).
    Jacobi,
    /// Conjugate gradients: halos over sync channels, blocking all-reduces.
    Cg,
    /// CG with the interior's matrix-vector product computed while the halos travel.
    #[value(name = "cg-overlap")]
    CgOverlap,
    /// Pipelined CG (Ghysels–Vanroose): one non-blocking reduction per iteration, hidden
    /// behind the matrix-vector product.
    #[value(name = "pipecg")]
    PipeCg,
    /// Multisplitting: each rank solves its block (--inner cg or jacobi) with the newest halo
    /// as Dirichlet data, in the sync, async or racy form.
    Multisplit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum InnerArg {
    /// Conjugate gradients on the block alone (local dot products, no global reduction).
    Cg,
    /// Jacobi sweeps of the block.
    Jacobi,
}

impl SolverArg {
    pub(crate) fn solver(self) -> Solver {
        match self {
            SolverArg::Jacobi => Solver::Jacobi,
            SolverArg::Cg => Solver::Cg,
            SolverArg::CgOverlap => Solver::CgOverlap,
            SolverArg::PipeCg => Solver::PipeCg,
            SolverArg::Multisplit => Solver::Multisplit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum PcArg {
    /// No preconditioner.
    None,
    /// Jacobi (diagonal) scaling; the 7-point operator's diagonal is constant (6), so the
    /// iterations do not change.
    Jacobi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ProblemArg {
    /// The paper's Laplace problem on the unit cube (stops on the relative residual).
    Laplace,
    /// −Δu = f with the exact solution sin²(πx)sin²(πy)sin²(πz) (Wang & Gobbert; stops on
    /// ‖u_k − u_{k−1}‖₂, reports the max error against the exact solution).
    Poisson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum DecompArg {
    /// The paper's 3-D process grid (x, then y, then z at each doubling).
    Paper,
    /// A 1-D split in z: 1 × 1 × ranks.
    Z,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ExchangeArg {
    /// Start every send, wait for every receive, then sweep.
    Waitall,
    /// Synchronous sends and receives one at a time, even/odd ordered.
    Blocking,
    /// Sweep the interior while the halos travel, then the boundary layer.
    Overlap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum ReductionArg {
    /// MPI_Iallreduce, the MPI library's non-blocking collective (--backend mpi only; its
    /// default).
    Iallreduce,
    /// chan-core's binary tree over point-to-point channels (every backend; the only one of
    /// threads, shmem and shared).
    Tree,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum RacyReadArg {
    /// Read the halo view once a newer send has landed in it (default).
    Landed,
    /// Read the view every iteration, whatever has landed: the paper's "always ready" racy
    /// receive.
    Always,
}

pub(crate) fn parse_dims(s: &str) -> Result<Dims, String> {
    SizeSpec::parse_dims(s)
}

pub(crate) fn parse_grid(s: &str) -> Result<ProcGrid, String> {
    ProcGrid::parse(s)
}

/// `--slowdown`: checked as it is parsed, so no run (nor sweep) starts with a factor that
/// would never finish or overflow a duration.
pub(crate) fn parse_slowdown(s: &str) -> Result<f64, String> {
    let range = format!("a number from 1 to {MAX_SLOWDOWN} (times slower)");
    match s.trim().parse::<f64>() {
        Ok(v) if (1.0..=MAX_SLOWDOWN).contains(&v) => Ok(v),
        _ => Err(format!("must be {range}, got '{s}'")),
    }
}

/// The most ranks (threads backend) or threads (shared backend) one `aiac run` starts: a
/// thread each, all in this process. Measured on 2 cores with a 4³ block per rank: 2048
/// ranks start in 2.1 s (sync) and 2.7 s (async) and hold 196 MB and 319 MB, twice what 1024
/// hold; 4096 take 11 s and 57 s to start (every rank a busy thread, and a step of a
/// collective waits for the scheduler to come round to each), beyond what a run can use.
pub(crate) const MAX_THREADS: usize = 2048;

/// This process's rank in a job a launcher started, from the environment the launcher gives
/// it (Open MPI's mpirun and oshrun, PMIx, MPICH's Hydra and Slurm's PMI), known before any
/// library is initialised.
pub(crate) fn launched_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The size of the job a launcher started this process in, from its environment.
pub(crate) fn launched_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// This process's rank among those of its job on this machine (Open MPI's and MPICH's local
/// rank), if the launcher says.
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn launched_local_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// How many ranks of a launched job run on this machine (Open MPI's and MPICH's local size),
/// if the launcher says.
#[cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]
fn launched_local_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The memory this machine has available for a new run (`MemAvailable` of /proc/meminfo), if
/// it says.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// `aiac run`'s flags.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the ranks run.
    #[arg(long, value_enum, default_value_t = BackendArg::Threads)]
    pub(crate) backend: BackendArg,
    /// The iterative method. The Krylov solvers (cg, cg-overlap, pipecg) are synchronous,
    /// stop on ‖b − A x‖₂/‖b‖₂ < TOL (default 1e-8) and run over channels (not --backend
    /// shared).
    #[arg(long, value_enum, default_value_t = SolverArg::Jacobi)]
    solver: SolverArg,
    /// The Krylov solvers' preconditioner.
    #[arg(long, value_enum, default_value_t = PcArg::None)]
    pc: PcArg,
    /// Multisplit: the inner solver of each rank's block (default cg).
    #[arg(long, value_enum)]
    inner: Option<InnerArg>,
    /// Multisplit: an inner solve stops when it has reduced its block's residual by this
    /// factor, above 0 and below 1 (default 0.1).
    #[arg(long, allow_hyphen_values = true)]
    inner_tol: Option<f64>,
    /// Multisplit: inner iterations per outer iteration at most, at least 1 (default 50).
    #[arg(long)]
    inner_max: Option<u64>,
    /// sync: halo swap and reduction in lock-step; async: newest whole message; racy: atomic
    /// view of a buffer written at any time.
    #[arg(long, value_enum, default_value_t = VariantArg::Sync)]
    variant: VariantArg,
    /// Number of ranks (threads backend) or threads (shared backend): from 1 (the default) to
    /// 2048. With `--backend mpi` the ranks are mpirun's processes; a value given here must
    /// match them.
    #[arg(short = 't', long = "threads")]
    pub(crate) threads: Option<usize>,
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
    /// Jacobi on Laplace: stop when ‖b − A u_k‖₂ / ‖b − A u_0‖₂ < TOL (default 1e-4); on
    /// Poisson: when ‖u_k − u_{k−1}‖₂ ≤ TOL (default 1e-6). Krylov solvers: when
    /// ‖b − A x‖₂ / ‖b‖₂ < TOL (default 1e-8, both problems). From 2.2e-16, f64's machine
    /// epsilon (a relative residual at most 1).
    #[arg(long, allow_hyphen_values = true)]
    tol: Option<f64>,
    /// Krylov solvers: compute the true residual every K iterations (default 100) and
    /// replace the recurrence residual when it has drifted. Sync: test the criterion (a global
    /// reduction) every K iterations (default: 100 for Laplace, as the paper; 1 for Poisson,
    /// as Wang & Gobbert). Async and racy: start a
    /// round of the non-blocking reduction no sooner than K iterations after the previous one
    /// started (without the flag, the paper's scheme: as soon as the previous one returns).
    /// From 1 to --max-iters.
    #[arg(long)]
    check_every: Option<u64>,
    /// Exchange halos every N iterations.
    #[arg(long, default_value_t = 1)]
    halo_every: u64,
    /// Jacobi: halos k planes deep. Sync: exchange every k iterations and do the k sweeps on
    /// the block grown by the ghost zone, as one wavefront (temporal blocking); the iterates
    /// are bit for bit those of k = 1, and --check-every must be a multiple of k. Async and
    /// racy: send k-deep faces every N iterations (--halo-every) and advance a fresh ghost
    /// zone with the block. From 1 to 16.
    #[arg(long, default_value_t = 1)]
    halo_depth: u64,
    /// R: messages in flight per channel direction (async, racy).
    #[arg(long, default_value_t = 2)]
    max_in_flight: usize,
    /// The non-blocking reduction async and racy runs test: iallreduce (--backend mpi only,
    /// its default) or tree (the only one of the other backends).
    #[arg(long, value_enum)]
    reduction: Option<ReductionArg>,
    /// Racy: read the halo view once a newer send has landed (landed), or every iteration as
    /// the paper's racy receive does (always).
    #[arg(long, value_enum, default_value_t = RacyReadArg::Landed)]
    racy_read: RacyReadArg,
    /// No rank iterates more than this.
    #[arg(long, default_value_t = 1_000_000)]
    max_iters: u64,
    /// Laplace only: add C to the boundary values and start the interior at C (default 0).
    /// |C| is bounded by what f64 resolves at --tol on the grid (about 2.7e10 at 50³, tol 1e-4):
    /// a larger offset swamps the solution's digits.
    #[arg(long, allow_hyphen_values = true)]
    offset: Option<f64>,
    /// Certify a convergence claim with a synchronous swap and reduction (default).
    #[arg(long, conflicts_with = "no_confirm")]
    confirm: bool,
    /// Stop at the first convergence claim, as the paper does.
    #[arg(long)]
    no_confirm: bool,
    /// Make this rank's sweeps slower (multisplit: each inner iteration).
    #[arg(long)]
    slow_rank: Option<usize>,
    /// How many times slower: from 1 to 1000 (default 2).
    #[arg(long, requires = "slow_rank", allow_hyphen_values = true, value_parser = parse_slowdown)]
    slowdown: Option<f64>,
    /// Write the whole report as JSON to FILE (schema aiac.run/3, docs/json-schema.md).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    json: Option<PathBuf>,
    /// Write one CSV row per rank to FILE (iterations, times, messages, residuals).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    csv: Option<PathBuf>,
    /// Write the convergence profile to FILE as CSV: rank, iteration, residual, time_s at
    /// every check (sync) or reduction round (async, racy), per rank.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    history: Option<PathBuf>,
    /// No table, no progress line.
    #[arg(short, long, help_heading = "Output")]
    quiet: bool,
}

impl RunArgs {
    /// The solver configuration the flags describe: the method from `--solver` and the flags
    /// that set it (one given to a method that does not read it is refused), with that
    /// method's defaults (jacobi's [`Config::new`]) for what was not given.
    pub(crate) fn config(&self) -> Result<Config, ConfigError> {
        let size = match (self.local, self.global) {
            (_, Some(g)) => SizeSpec::Global(g),
            (Some(l), None) => SizeSpec::Local(l),
            (None, None) => SizeSpec::Local(Dims::cube(50)),
        };
        let problem = match self.problem {
            ProblemArg::Laplace => Problem::Laplace {
                offset: self.offset.unwrap_or(0.0),
            },
            ProblemArg::Poisson => Problem::Poisson,
        };
        let solver = self.solver.solver();
        let flags = MethodFlags {
            pc: match self.pc {
                PcArg::None => Pc::None,
                PcArg::Jacobi => Pc::Jacobi,
            },
            variant: match self.variant {
                VariantArg::Sync => Variant::Sync,
                VariantArg::Async => Variant::Async,
                VariantArg::Racy => Variant::Racy,
            },
            exchange: match self.exchange {
                ExchangeArg::Waitall => Exchange::Waitall,
                ExchangeArg::Blocking => Exchange::Blocking,
                ExchangeArg::Overlap => Exchange::Overlap,
            },
            halo_every: self.halo_every,
            halo_depth: self.halo_depth,
            max_in_flight: self.max_in_flight,
            racy_read: match self.racy_read {
                RacyReadArg::Landed => RacyRead::Landed,
                RacyReadArg::Always => RacyRead::Always,
            },
            // Shared memory has no reduction rounds: K only samples its history there.
            pace_reductions: self.check_every.is_some()
                && self.variant != VariantArg::Sync
                && self.backend != BackendArg::Shared,
            inner: self.inner.map(|i| match i {
                InnerArg::Cg => Inner::Cg,
                InnerArg::Jacobi => Inner::Jacobi,
            }),
            inner_tol: self.inner_tol,
            inner_max: self.inner_max,
        };
        let defaults = Config::new(problem, Method::from_flags(solver, &flags)?);
        Ok(Config {
            size,
            grid: self.grid,
            decomp: match self.decomp {
                DecompArg::Paper => Decomp::Paper,
                DecompArg::Z => Decomp::Z,
            },
            criterion: self
                .tol
                .map_or(defaults.criterion, |t| defaults.criterion.with_tol(t)),
            check_every: self.check_every.unwrap_or(defaults.check_every),
            max_iters: self.max_iters,
            confirm: !self.no_confirm,
            slow: self.slow_rank.map(|rank| SlowRank {
                rank,
                factor: self.slowdown.unwrap_or(2.0),
            }),
            ..defaults
        })
    }
}

impl RunArgs {
    /// The backend's name in reports.
    pub(crate) fn backend_name(&self) -> &'static str {
        self.backend.info().name
    }

    /// Every check that needs no launcher and no world: the configuration against `-t` ranks
    /// (the process count an MPI job will have), the backend's own limits and the output
    /// files. Returns the configuration and its decomposition. `aiac run` calls it for the
    /// threads and shared backends.
    pub(crate) fn check(&self) -> Result<(Config, Plan), RunError> {
        let checked = self.check_config()?;
        check_output(self)?;
        Ok(checked)
    }

    /// The reduction this run's backend builds: `--reduction`, or the backend's default
    /// (MPI_Iallreduce for MPI, the tree elsewhere). Only MPI has an MPI_Iallreduce.
    pub(crate) fn reduction(&self) -> Result<ReductionKind, ConfigError> {
        let info = self.backend.info();
        match (info.iallreduce, self.reduction) {
            (true, None | Some(ReductionArg::Iallreduce)) => Ok(ReductionKind::Iallreduce),
            (_, None | Some(ReductionArg::Tree)) => Ok(ReductionKind::Tree),
            (false, Some(ReductionArg::Iallreduce)) => Err(ConfigError::Unsupported {
                flag: "--reduction iallreduce",
                backend: info.flag,
                why: "MPI_Iallreduce is MPI's: this backend reduces over chan-core's tree \
                      (--reduction tree)",
            }),
        }
    }

    /// [`RunArgs::check`] without the output files: what `aiac sweep` checks for every run
    /// before it starts any (it checks its own output directory).
    pub(crate) fn check_config(&self) -> Result<(Config, Plan), RunError> {
        let cfg = self.config()?;
        let n = self.threads.unwrap_or(1);
        if n == 0 {
            return Err(ConfigError::NoRanks.into());
        }
        let info = self.backend.info();
        if info.launcher.is_none() && n > MAX_THREADS {
            return Err(RunError::Invalid(format!(
                "-t/--threads must be from 1 to {MAX_THREADS} with {}: every rank is a thread \
                 of this one process; got {n} (for more ranks, --backend mpi over several \
                 machines)",
                info.flag
            )));
        }
        self.reduction()?;
        let plan = match info.shared_memory {
            false => cfg.plan(n)?,
            true => cfg.shared_plan(n)?,
        };
        if self.backend == BackendArg::Mpi && !cfg!(feature = "mpi") {
            return Err(not_built("mpi"));
        }
        if self.backend == BackendArg::Shmem && !cfg!(feature = "shmem") {
            return Err(not_built("shmem"));
        }
        // Every rank on this machine: threads and shared memory are one process, and a
        // sweep (or a user) starts launched runs here.
        self.check_plan(&cfg, &plan, n)?;
        Ok((cfg, plan))
    }

    /// The checks that need the decomposition: the flags that depend on each other, and the
    /// memory `ranks_here` ranks of `plan` need on this machine against what it has.
    pub(crate) fn check_plan(
        &self,
        cfg: &Config,
        plan: &Plan,
        ranks_here: usize,
    ) -> Result<(), RunError> {
        if let (Some(_), ProblemArg::Poisson) = (self.offset, self.problem) {
            return Err(RunError::Invalid(
                "--offset applies to --problem laplace only: the Poisson problem's boundary \
                 values are 0 and its exact solution is fixed"
                    .into(),
            ));
        }
        if let Some(k) = self.check_every {
            if k > self.max_iters {
                return Err(ConfigError::CheckEveryTooLarge {
                    check_every: k,
                    max_iters: self.max_iters,
                }
                .into());
            }
        }
        let need = match self.backend.info().shared_memory {
            false => cfg.memory_need(plan),
            true => cfg.shared_memory_need(plan),
        };
        if let Some(available) = mem_available() {
            need.check(need.of_ranks(ranks_here as u64), available)?;
        }
        Ok(())
    }

    /// The `config` object this run's report will have (what `aiac sweep` records for a run
    /// that fails).
    pub(crate) fn report_config(&self, cfg: &Config, plan: &Plan) -> RunConfig {
        self.run_config(cfg, self.threads.unwrap_or(1), plan)
    }

    /// The `config` of the report of this run of `cfg` over `ranks` ranks (its flags checked).
    fn run_config(&self, cfg: &Config, ranks: usize, plan: &Plan) -> RunConfig {
        let reduction = self.reduction().unwrap_or_default();
        RunConfig::new(self.backend_name(), ranks, plan, cfg, reduction)
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

/// Run on one rank of any backend (collective) over the decomposition `plan` (computed once,
/// before the run) and report from rank 0. The MPI and SHMEM backends call this once per
/// process with their context. Rank 0 shows the progress line (unless `--quiet`); the library
/// itself prints nothing.
pub fn run_on<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    args: &RunArgs,
) -> Result<ExitCode, RunError> {
    let progress = (ctx.rank() == 0 && !args.quiet).then(|| RunProgress::start(cfg));
    let rec = jacobi::solve_with(ctx, cfg, plan, progress.as_ref().map(RunProgress::hook));
    drop(progress); // the line is cleared before anything else is printed
    let rec = rec?;
    let converged = rec.converged;
    match jacobi::gather_records(ctx, &rec)? {
        Some(records) => finish(
            Report::new(args.run_config(cfg, ctx.size(), plan), records),
            args,
        ),
        None => Ok(exit_code(converged)),
    }
}

/// `aiac run`.
pub fn run(args: &RunArgs) -> Result<ExitCode, RunError> {
    tracing::debug!(?args, "aiac run");
    let info = args.backend.info();
    if let (None, Some(size)) = (info.launcher, launched_size()) {
        if size > 1 {
            // Every process of the job would solve the whole problem on its own and write
            // the same files.
            if launched_rank().is_some_and(|r| r != 0) {
                return Err(RunError::LeftToRank0);
            }
            return Err(RunError::Launch(format!(
                "{}: this process is one of {size} that a launcher (mpirun, oshrun) started, \
                 and {} runs every rank inside one process: the job would make {size} \
                 independent runs writing the same files. Run `aiac run {} -t {size}` without \
                 the launcher, or `mpirun -np {size} aiac run --backend mpi`",
                info.flag, info.flag, info.flag
            )));
        }
    }
    (info.run)(args)
}

/// `--backend threads`: one rank per thread of this process.
fn run_threads(args: &RunArgs) -> Result<ExitCode, RunError> {
    // Validate once before starting threads, so bad input gives one message.
    let (cfg, plan) = args.check()?;
    // One rank per CPU when they fit (unpinned busy-polling ranks can share a core).
    let world = World::new(args.threads.unwrap_or(1))
        .map_err(|_| ConfigError::NoRanks)?
        .pinned();
    let outcomes = world.run(|ctx| run_on(ctx, &cfg, &plan, args));
    // Every rank's result; the first error, else rank 0's exit code.
    let codes = outcomes.into_iter().collect::<Result<Vec<_>, _>>()?;
    codes.into_iter().next().ok_or(ConfigError::NoRanks.into())
}

/// `--backend shared`: the shared-memory (rayon) variants.
fn run_shared(args: &RunArgs) -> Result<ExitCode, RunError> {
    let (cfg, plan) = args.check()?;
    let progress = (!args.quiet).then(|| RunProgress::start(&cfg));
    let records = jacobi::solve_shared_with(&cfg, &plan, progress.as_ref().map(RunProgress::hook));
    drop(progress);
    let threads = args.threads.unwrap_or(1);
    finish(
        Report::new(args.run_config(&cfg, threads, &plan), records?),
        args,
    )
}

fn not_built(backend: &str) -> RunError {
    RunError::Launch(format!(
        "--backend {backend}: this aiac was built without it (cargo feature `{backend}`)"
    ))
}

/// A backend of one rank per process, started by a launcher (`mpirun`, `oshrun`).
#[cfg(any(feature = "mpi", feature = "shmem"))]
pub(crate) trait Launched: Context + Sized {
    /// The backend's name, as `--backend` spells it.
    const NAME: &'static str;
    /// Its launcher.
    const LAUNCHER: &'static str;
    /// The library's name in messages.
    const LIBRARY: &'static str;
    /// What the library calls a process ("rank", "PE").
    const PROCESS: &'static str;
    /// Finalize the library (every rank).
    fn finalize(self) -> Result<(), String>;
    /// Stop every rank of the job, now.
    fn abort(&self, code: i32) -> !;
}

#[cfg(feature = "mpi")]
impl Launched for chan_mpi::MpiCtx {
    const NAME: &'static str = "mpi";
    const LAUNCHER: &'static str = "mpirun";
    const LIBRARY: &'static str = "MPI";
    const PROCESS: &'static str = "rank";
    fn finalize(self) -> Result<(), String> {
        chan_mpi::MpiCtx::finalize(self).map_err(|e| e.to_string())
    }
    fn abort(&self, code: i32) -> ! {
        chan_mpi::MpiCtx::abort(self, code)
    }
}

#[cfg(feature = "shmem")]
impl Launched for chan_shmem::ShmemCtx {
    const NAME: &'static str = "shmem";
    const LAUNCHER: &'static str = "oshrun";
    const LIBRARY: &'static str = "SHMEM";
    const PROCESS: &'static str = "PE";
    fn finalize(self) -> Result<(), String> {
        chan_shmem::ShmemCtx::finalize(self).map_err(|e| e.to_string())
    }
    fn abort(&self, code: i32) -> ! {
        chan_shmem::ShmemCtx::abort(self, code)
    }
}

/// `--backend mpi|shmem`: one rank per process of the job the launcher started.
///
/// Input is checked on every rank before any collective call (the output files on rank 0,
/// which writes them), then the ranks vote: if any rank refused, the lowest that did prints
/// its message once, flushed, before a barrier that no rank leaves until it has, and every
/// rank finalizes the library and exits 1. So the launcher cannot stop the printing rank
/// before the message is out, and the message appears once. An error during the run may
/// leave other ranks waiting in a collective call for this one: that rank prints it and
/// aborts the job (`MPI_Abort`, `shmem_global_exit`), so nothing hangs.
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn run_launched<C: Launched>(mut ctx: C, args: &RunArgs) -> Result<ExitCode, RunError> {
    use std::io::Write;
    let (rank, size) = (ctx.rank(), ctx.size());
    let here = launched_local_size().unwrap_or(1);
    let checked = job_matches::<C>(args, size)
        .and_then(|()| args.reduction().map_err(RunError::from))
        .and_then(|_| args.config().map_err(RunError::from))
        .and_then(|cfg| {
            cfg.plan(size)
                .map(|plan| (cfg, plan))
                .map_err(RunError::from)
        })
        .and_then(|(cfg, plan)| args.check_plan(&cfg, &plan, here).map(|()| (cfg, plan)))
        .and_then(|checked| match rank {
            0 => check_output(args).map(|()| checked),
            _ => Ok(checked),
        });
    // The lowest rank that refused, or none (infinity).
    let mut vote = [match &checked {
        Ok(_) => f64::INFINITY,
        Err(_) => rank as f64,
    }];
    let voted = ctx.all_reduce(&mut vote, chan_core::ReduceOp::Min);
    let (cfg, plan) = match (checked, voted) {
        (Ok(checked), Ok(())) if vote[0].is_infinite() => checked,
        (checked, voted) => {
            let printer = voted.is_err() || vote[0] == rank as f64;
            if let (Err(e), true) = (&checked, printer) {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "aiac: error: {e}");
                let _ = err.flush();
            }
            if voted.is_ok() {
                // Nobody leaves before the message is out.
                let _ = ctx.barrier();
            }
            if let Err(f) = ctx.finalize() {
                eprintln!("aiac: while stopping {}: {f}", C::NAME);
            }
            return Err(RunError::AlreadyReported);
        }
    };
    match run_on(&mut ctx, &cfg, &plan, args) {
        Ok(code) => {
            ctx.finalize()
                .map_err(|e| RunError::Launch(format!("{} finalize: {e}", C::NAME)))?;
            Ok(code)
        }
        Err(e) => {
            eprintln!("aiac: error on rank {rank}: {e}");
            ctx.abort(1)
        }
    }
}

/// A launched backend did not start. A bad value of one of aiac's variables (`env`) is found
/// before the library starts, and is the same on every rank of a node (the launcher gives
/// them one environment; another node may not have it): the first rank of each node alone
/// says so, as rank 0 does for a usage error.
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn init_failed(message: String, env: bool) -> RunError {
    let first_of_node = launched_local_rank().or_else(launched_rank) == Some(0);
    if env && launched_rank().is_some() && !first_of_node {
        RunError::LeftToRank0
    } else {
        RunError::Launch(message)
    }
}

#[cfg(feature = "mpi")]
fn run_mpi(args: &RunArgs) -> Result<ExitCode, RunError> {
    let mut ctx = chan_mpi::MpiCtx::init().map_err(|e| {
        let env = matches!(e, chan_mpi::InitError::Env(_));
        init_failed(e.to_string(), env)
    })?;
    // On every rank alike (creating a reduction is collective); always Ok for MPI.
    if let Ok(kind) = args.reduction() {
        ctx.set_reduction_kind(match kind {
            ReductionKind::Iallreduce => chan_mpi::ReductionKind::Iallreduce,
            ReductionKind::Tree => chan_mpi::ReductionKind::Tree,
        });
    }
    run_launched(ctx, args)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &RunArgs) -> Result<ExitCode, RunError> {
    Err(not_built("mpi"))
}

#[cfg(feature = "shmem")]
fn run_shmem(args: &RunArgs) -> Result<ExitCode, RunError> {
    let ctx = chan_shmem::ShmemCtx::init().map_err(|e| {
        let env = matches!(e, chan_shmem::InitError::Env(_));
        init_failed(e.to_string(), env)
    })?;
    run_launched(ctx, args)
}

#[cfg(not(feature = "shmem"))]
fn run_shmem(_: &RunArgs) -> Result<ExitCode, RunError> {
    Err(not_built("shmem"))
}

/// A launched job's size must be what `-t` asks for; a job of one process that should be
/// several was started without its launcher (Open MPI's `mpirun` and `oshrun` both set
/// `OMPI_COMM_WORLD_SIZE` in the processes they start).
#[cfg(any(feature = "mpi", feature = "shmem"))]
fn job_matches<C: Launched>(args: &RunArgs, size: usize) -> Result<(), RunError> {
    let (launcher, name) = (C::LAUNCHER, C::NAME);
    match args.threads {
        Some(n) if n != size => Err(RunError::Launch(format!(
            "-t/--threads {n} asks for {n} ranks but this {name} job has {size}{}: start it with \
             `{launcher} -np {n} aiac run --backend {name} …` (and without -t, {launcher}'s -np \
             decides)",
            if size == 1 && std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() {
                format!(" (it was not started by {launcher})")
            } else {
                String::new()
            }
        ))),
        _ => Ok(()),
    }
}

/// The output files, named by their flags.
fn outputs(args: &RunArgs) -> Vec<(&'static str, &Path)> {
    [
        ("--json", &args.json),
        ("--csv", &args.csv),
        ("--history", &args.history),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
    .collect()
}

/// Fail before running if an output file could not be written where asked.
fn check_output(args: &RunArgs) -> Result<(), RunError> {
    let files = outputs(args);
    for (flag, path) in &files {
        check_file(flag, path)?;
    }
    check_distinct(&files)
}

/// Rank 0: the files, the table, the exit code. Every file is made from the one typed report
/// (the value `aiac report` reads back), each written atomically; the table is printed last.
fn finish(report: Report, args: &RunArgs) -> Result<ExitCode, RunError> {
    let out_err = |flag: &'static str, path: &Path, e: &dyn std::fmt::Display| RunError::Output {
        flag,
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    if args.json.is_some() || args.csv.is_some() || args.history.is_some() {
        let mut text = serde_json::to_vec_pretty(&report)
            .map_err(|e| RunError::Invalid(format!("encoding the report: {e}")))?;
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
    ]);
    let variant = run.config.variant();
    for r in &run.ranks {
        let batches = saved::channel_buckets(r, variant, |ch| &ch.batches);
        let (n, sum) = batches
            .iter()
            .fold((0u64, 0u64), |(n, s), &(v, c)| (n + c, s + v * c));
        csv.row([
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
        ]);
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
                .run(|ctx| jacobi::solve_with(ctx, &cfg, &plan, None).unwrap());
            let report = Report::new(args.run_config(&cfg, n, &plan), records);
            let v = serde_json::to_value(&report).unwrap();
            let failed = serde_json::to_value(args.report_config(&cfg, &plan)).unwrap();
            assert_eq!(v["config"], failed, "{argv:?}");
            assert_eq!(v["config"]["reduction"], "tree", "{argv:?}");
        }
    }
}
