//! `aiac run`'s flags ([`RunArgs`]), the configuration they describe ([`RunArgs::config`]:
//! jacobi's [`Config`]) and every check of them that needs no launcher and no world. `aiac
//! sweep` checks each run it will start with the same functions.

use crate::error::Error;
use crate::launch::{not_built, Launcher};
use crate::output::{check_distinct, check_file};
use clap::{Args, ValueEnum};
use jacobi::{
    BlockIteration, Config, ConfigError, Decomp, Detect, Dims, Exchange, HaloDepth, Inner, Method,
    MethodFlags, Pc, Plan, Problem, ProcGrid, RacyRead, ReductionKind, RunConfig, SizeSpec,
    SlowRank, Solver, Variant, MAX_SLOWDOWN,
};
use std::path::{Path, PathBuf};

/// `--backend`: where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub(crate) enum BackendArg {
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

/// What the checks and reports know of a backend, read from [`BackendArg::info`]. A new
/// backend is a variant and its arm there, and its run in `run.rs` (a launched one: its
/// [`Launcher`], and an impl of `launch::Launched` for its context).
pub(crate) struct BackendInfo {
    /// The name, as `--backend` spells it and reports record it.
    pub(crate) name: &'static str,
    /// `--backend NAME`, for messages.
    pub(crate) flag: &'static str,
    /// The launcher that starts its processes, if it needs one.
    pub(crate) launcher: Option<Launcher>,
    /// Has a native non-blocking all-reduce (`--reduction iallreduce`); others use the tree.
    pub(crate) iallreduce: bool,
    /// Has neighbourhood collectives (`--exchange neighbor`).
    pub(crate) neighbor_collectives: bool,
    /// Decomposes for shared memory (planes per thread) rather than over ranks.
    pub(crate) shared_memory: bool,
}

impl BackendArg {
    /// Everything the checks and reports need to know of this backend.
    pub(crate) fn info(self) -> BackendInfo {
        let (name, flag, launcher) = match self {
            BackendArg::Threads => ("threads", "--backend threads", None),
            BackendArg::Shared => ("shared", "--backend shared", None),
            BackendArg::Mpi => ("mpi", "--backend mpi", Some(Launcher::Mpirun)),
            BackendArg::Shmem => ("shmem", "--backend shmem", Some(Launcher::Oshrun)),
        };
        BackendInfo {
            name,
            flag,
            launcher,
            iallreduce: self == BackendArg::Mpi,
            neighbor_collectives: self == BackendArg::Mpi,
            shared_memory: self == BackendArg::Shared,
        }
    }
}

/// `--problem`'s values: jacobi's [`Problem`] carries the Laplace problem's offset (set from
/// `--offset` in [`RunArgs::config`]), so it has no `clap::ValueEnum` of its own.
pub(crate) fn problem_parser() -> impl clap::builder::TypedValueParser<Value = Problem> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("laplace")
            .help("The paper's Laplace problem on the unit cube (stops on the relative residual)"),
        PossibleValue::new("poisson").help(
            "−Δu = f with the exact solution sin²(πx)sin²(πy)sin²(πz) (Wang & Gobbert; stops \
             on ‖u_k − u_{k−1}‖₂, reports the max error against the exact solution)",
        ),
    ])
    .map(|name| match name.as_str() {
        "poisson" => Problem::Poisson,
        _ => Problem::Laplace { offset: 0.0 },
    })
}

/// Whether `problem` is the Laplace problem (whatever its offset).
pub(crate) fn is_laplace(problem: &Problem) -> bool {
    matches!(problem, Problem::Laplace { .. })
}

pub(crate) fn parse_dims(s: &str) -> Result<Dims, String> {
    SizeSpec::parse_dims(s)
}

/// `--halo-depth`: k from 1 to 16, or `auto`.
pub(crate) fn parse_halo_depth(s: &str) -> Result<HaloDepth, String> {
    s.parse::<HaloDepth>().map_err(|e| e.to_string())
}

pub(crate) fn parse_grid(s: &str) -> Result<ProcGrid, String> {
    ProcGrid::parse(s)
}

/// The longest `--timeout` (sweep, dht): a day.
pub(crate) const MAX_TIMEOUT_S: f64 = 86_400.0;
/// The shortest `--timeout` (sweep, dht): a millisecond, below which no job can even start
/// (and `1e-320` would be a timeout nobody meant).
pub(crate) const MIN_TIMEOUT_S: f64 = 1e-3;

/// A number as a message quotes it: plainly when it reads well so, in scientific notation
/// when it is very small or very large (`1e-320` as a plain float is 320 digits).
pub(crate) fn shown(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e6).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// `--timeout` of `aiac sweep` and `aiac dht`: seconds, from a millisecond to a day, checked
/// as it is parsed (one rule for both, and no duration that overflows a deadline).
pub(crate) fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(&v) => Ok(v),
        _ => Err(format!(
            "must be a number of seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S} (a day), got \
             '{s}'"
        )),
    }
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

/// The memory this machine has available for a new run (`MemAvailable` of /proc/meminfo), if
/// it says.
pub(crate) fn mem_available() -> Option<u64> {
    let info = crate::input::read_kernel_file(Path::new("/proc/meminfo")).ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The flags `aiac run` and `aiac sweep` take alike: one value each (a sweep does not vary
/// them).
#[derive(Debug, Args)]
pub(crate) struct Fixed {
    /// Certify a convergence claim with a synchronous swap and reduction (default).
    #[arg(long, conflicts_with = "no_confirm")]
    confirm: bool,
    /// Stop at the first convergence claim, as the paper does.
    #[arg(long)]
    pub(crate) no_confirm: bool,
    /// Make this rank's sweeps slower (multisplit: each inner iteration).
    #[arg(long)]
    pub(crate) slow_rank: Option<usize>,
}

/// `aiac run`'s flags.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Where the ranks run.
    #[arg(long, value_enum, default_value_t = BackendArg::Threads)]
    pub(crate) backend: BackendArg,
    /// The iterative method. The Krylov solvers (cg, cg-overlap, pipecg) are synchronous,
    /// stop on ‖b − A x‖₂/‖b‖₂ < TOL (default 1e-8) and run over channels (not --backend
    /// shared).
    #[arg(long, value_enum, default_value_t = Solver::Jacobi)]
    solver: Solver,
    /// The Krylov solvers' preconditioner.
    #[arg(long, value_enum, default_value_t = Pc::None)]
    pc: Pc,
    /// Multisplit: the inner solver of each rank's block (default cg).
    #[arg(long, value_enum)]
    inner: Option<Inner>,
    /// Multisplit: an inner solve stops when it has reduced its block's residual by this
    /// factor, above 0 and below 1 (default 0.1).
    #[arg(long, allow_hyphen_values = true)]
    inner_tol: Option<f64>,
    /// Multisplit: inner iterations per outer iteration at most, at least 1 (default 10).
    #[arg(long)]
    inner_max: Option<u64>,
    /// sync: halo swap and reduction in lock-step; async: newest whole message; racy: atomic
    /// view of a buffer written at any time.
    #[arg(long, value_enum, default_value_t = Variant::Sync)]
    variant: Variant,
    /// Number of ranks (threads backend) or threads (shared backend): from 1 (the default) to
    /// 2048. With `--backend mpi` the ranks are mpirun's processes; a value given here must
    /// match them.
    #[arg(short = 't', long = "threads")]
    pub(crate) threads: Option<usize>,
    /// --backend mpi and shmem: sweep each rank's block with T threads (hybrid ranks), each
    /// owning a fixed range of its z-planes, pinned to the CPUs the rank may use (start the
    /// job with `mpirun --bind-to none` or `--map-by slot:PE=T`: by default Open MPI binds a
    /// rank to one core, and the threads then run unpinned). Jacobi on the grid, --halo-depth
    /// 1, --exchange waitall or blocking; from 1 (the default) to 256, at most the z-planes
    /// of a rank's block. Sync runs give the iterates of one thread per rank, bit for bit.
    #[arg(long, value_name = "T")]
    pub(crate) threads_per_rank: Option<usize>,
    /// The problem.
    #[arg(long, value_parser = problem_parser(), default_value = "laplace")]
    problem: Problem,
    /// Solve the sparse system in this Matrix Market file instead of the grid's problem
    /// (`coordinate real|integer general|symmetric|skew-symmetric`), from x = 0, until
    /// ‖b − A x‖₂/‖b‖₂ < TOL. Every rank reads it and keeps a contiguous block of rows,
    /// balanced by nonzeros. --solver jacobi (any variant) and multisplit (--inner cg or
    /// jacobi); CG and multisplitting's inner CG need a symmetric matrix, Jacobi a nonzero
    /// diagonal.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["local", "global", "grid", "decomp", "offset", "problem"])]
    pub(crate) matrix: Option<PathBuf>,
    /// With --matrix: the right-hand side b, a Matrix Market `array real` vector or n × 1
    /// `coordinate` matrix (default: b = A·1, whose solution is 1).
    #[arg(long, value_name = "FILE", requires = "matrix")]
    pub(crate) rhs: Option<PathBuf>,
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
    #[arg(long, value_enum, default_value_t = Decomp::Paper)]
    decomp: Decomp,
    /// How the sync variant swaps its halos (CG: waitall or neighbor; neighbor: --backend mpi
    /// only).
    #[arg(long, value_enum, default_value_t = Exchange::Waitall)]
    exchange: Exchange,
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
    /// zone with the block. From 1 to 16, or auto: sync Jacobi measures the candidate depths
    /// on this run's blocks and channels before the solve and takes the fastest (the report's
    /// halo_auto); async and racy take 1.
    #[arg(long, default_value = "1", value_parser = parse_halo_depth)]
    halo_depth: HaloDepth,
    /// R: messages in flight per channel direction (async, racy) [default: 2].
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// The non-blocking reduction async and racy runs test: iallreduce (--backend mpi only,
    /// its default) or tree (the only one of the other backends).
    #[arg(long, value_enum)]
    reduction: Option<ReductionKind>,
    /// Racy: read the halo view once a newer send has landed (landed), or every iteration as
    /// the paper's racy receive does (always).
    #[arg(long, value_enum)]
    racy_read: Option<RacyRead>,
    /// Async and racy Jacobi over channels: how convergence is detected before it is
    /// certified. reduction: rounds of the non-blocking reduction of the residuals the sweeps
    /// saw (the default, and the only value the other runs take); snapshot: rounds of a
    /// consistent snapshot of the iterate, its faces sent over their own channels, its
    /// residual reduced, the run stopped on the snapshot; ibarrier: a non-blocking barrier
    /// (MPI_Ibarrier; the tree reduction on the other backends) each rank enters once its
    /// residual is below its share of the tolerance.
    #[arg(long, value_enum)]
    detect: Option<Detect>,
    /// No rank iterates more than this.
    #[arg(long, default_value_t = 1_000_000)]
    max_iters: u64,
    /// Laplace only: add C to the boundary values and start the interior at C (default 0).
    /// |C| is bounded by what f64 resolves at --tol on the grid (about 2.7e10 at 50³, tol 1e-4):
    /// a larger offset swamps the solution's digits.
    #[arg(long, allow_hyphen_values = true)]
    offset: Option<f64>,
    #[command(flatten)]
    fixed: Fixed,
    /// How many times slower: from 1 to 1000 (default 2).
    #[arg(long, requires = "slow_rank", allow_hyphen_values = true, value_parser = parse_slowdown)]
    slowdown: Option<f64>,
    /// With --matrix: write the solution x to FILE as a Matrix Market `array real general`
    /// vector (17 significant digits: the values read back to the same bits).
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Output",
        requires = "matrix"
    )]
    pub(crate) solution: Option<PathBuf>,
    /// Write the whole report as JSON to FILE (schema aiac.run/3, docs/json-schema.md).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) json: Option<PathBuf>,
    /// Write one CSV row per rank to FILE (iterations, times, messages, residuals).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) csv: Option<PathBuf>,
    /// Write the convergence profile to FILE as CSV: rank, iteration, residual, time_s at
    /// every check (sync) or reduction round (async, racy), per rank.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) history: Option<PathBuf>,
    /// No table, no progress line.
    #[arg(short, long, help_heading = "Output")]
    pub(crate) quiet: bool,
}

impl RunArgs {
    /// The solver configuration the flags describe, here and nowhere else: the method from
    /// `--solver` and the flags that set it (one given to a method that does not read it is
    /// refused), with that method's defaults (jacobi's [`Config::new`]) for what was not
    /// given.
    pub(crate) fn config(&self) -> Result<Config, ConfigError> {
        let size = match (self.local, self.global) {
            (_, Some(g)) => SizeSpec::Global(g),
            (Some(l), None) => SizeSpec::Local(l),
            (None, None) => SizeSpec::Local(Dims::cube(50)),
        };
        let problem = match self.problem {
            Problem::Laplace { .. } => Problem::Laplace {
                offset: self.offset.unwrap_or(0.0),
            },
            p => p,
        };
        // Flags of a loop this run does not have are refused, not ignored.
        let blockwise = matches!(self.solver, Solver::Jacobi | Solver::Multisplit);
        let variant_flag = |flag, applies| ConfigError::VariantFlag {
            flag,
            applies,
            solver: self.solver,
            variant: self.variant,
        };
        if self.racy_read.is_some() && !(blockwise && self.variant == Variant::Racy) {
            return Err(variant_flag(
                "--racy-read",
                "the racy receive (--variant racy of --solver jacobi or multisplit)",
            ));
        }
        // R bounds the async and racy channels, and only their convergence claims are
        // certified: sync loops and Krylov solvers test the true residual.
        let claims = blockwise && self.variant != Variant::Sync;
        if self.max_in_flight.is_some() && !claims {
            return Err(variant_flag(
                "--max-in-flight",
                "the channels of --variant async and racy (of --solver jacobi or multisplit)",
            ));
        }
        if (self.fixed.confirm || self.fixed.no_confirm) && !claims {
            return Err(variant_flag(
                if self.fixed.no_confirm {
                    "--no-confirm"
                } else {
                    "--confirm"
                },
                "the convergence claims of --variant async and racy (of --solver jacobi or \
                 multisplit): sync runs and Krylov solvers stop on the true residual",
            ));
        }
        let nonblocking = claims || self.solver == Solver::PipeCg;
        if self.reduction.is_some() && !nonblocking {
            return Err(variant_flag(
                "--reduction",
                "the non-blocking reduction of --variant async and racy and of --solver \
                 pipecg (the others reduce with blocking all-reduces)",
            ));
        }
        // Which solvers and variants take `--detect` is the method's rule (Method::from_flags,
        // below); the backend's is here.
        if self.detect.is_some_and(|d| d != Detect::Reduction) && self.backend == BackendArg::Shared
        {
            return Err(ConfigError::Unsupported {
                flag: "--detect",
                backend: "--backend shared",
                why: "its async and racy threads keep a running shared residual, with no \
                      rounds to detect by (--detect reduction)",
            });
        }
        let flags = MethodFlags {
            pc: self.pc,
            variant: self.variant,
            exchange: self.exchange,
            halo_every: self.halo_every,
            halo_depth: self.halo_depth,
            max_in_flight: self
                .max_in_flight
                .unwrap_or(BlockIteration::default().max_in_flight),
            racy_read: self.racy_read.unwrap_or_default(),
            detect: self.detect.unwrap_or_default(),
            // Shared memory has no reduction rounds: K only samples its history there.
            pace_reductions: self.check_every.is_some()
                && self.variant != Variant::Sync
                && self.backend != BackendArg::Shared,
            inner: self.inner,
            inner_tol: self.inner_tol,
            inner_max: self.inner_max,
        };
        let defaults = Config::new(problem, Method::from_flags(self.solver, &flags)?);
        Ok(Config {
            size,
            grid: self.grid,
            decomp: self.decomp,
            criterion: self
                .tol
                .map_or(defaults.criterion, |t| defaults.criterion.with_tol(t)),
            check_every: self.check_every.unwrap_or(defaults.check_every),
            max_iters: self.max_iters,
            confirm: !self.fixed.no_confirm,
            slow: self.fixed.slow_rank.map(|rank| SlowRank {
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
    pub(crate) fn check(&self) -> Result<(Config, Plan), Error> {
        let checked = self.check_config()?;
        check_output(self)?;
        Ok(checked)
    }

    /// The reduction this run's backend builds: `--reduction`, or the backend's default
    /// (MPI_Iallreduce for MPI, the tree elsewhere). Only MPI has an MPI_Iallreduce.
    pub(crate) fn reduction(&self) -> Result<ReductionKind, ConfigError> {
        let info = self.backend.info();
        match (info.iallreduce, self.reduction) {
            (true, None | Some(ReductionKind::Iallreduce)) => Ok(ReductionKind::Iallreduce),
            (_, None | Some(ReductionKind::Tree)) => Ok(ReductionKind::Tree),
            (false, Some(ReductionKind::Iallreduce)) => Err(ConfigError::Unsupported {
                flag: "--reduction iallreduce",
                backend: info.flag,
                why: "MPI_Iallreduce is MPI's: this backend reduces over chan-core's tree \
                      (--reduction tree)",
            }),
        }
    }

    /// [`RunArgs::check`] without the output files: what `aiac sweep` checks for every run
    /// before it starts any (it checks its own output directory).
    pub(crate) fn check_config(&self) -> Result<(Config, Plan), Error> {
        let cfg = self.config()?;
        let n = self.threads.unwrap_or(1);
        if n == 0 {
            return Err(ConfigError::NoRanks.into());
        }
        let info = self.backend.info();
        if info.launcher.is_none() && n > MAX_THREADS {
            return Err(Error::Invalid(format!(
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
        match info.launcher {
            Some(l @ Launcher::Mpirun) if !cfg!(feature = "mpi") => return Err(not_built(l)),
            Some(l @ Launcher::Oshrun) if !cfg!(feature = "shmem") => return Err(not_built(l)),
            _ => {}
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
    ) -> Result<(), Error> {
        self.check_threads_per_rank(cfg, plan)?;
        let info = self.backend.info();
        if self.exchange == Exchange::Neighbor && crate::launch::simulated() {
            return Err(ConfigError::Unsupported {
                flag: "--exchange neighbor",
                backend: "SimGrid's SMPI",
                why: "SMPI declares MPI_Dist_graph_create_adjacent and MPI_Ineighbor_alltoallv \
                      without running them: use --exchange waitall",
            }
            .into());
        }
        if self.exchange == Exchange::Neighbor && !info.neighbor_collectives {
            return Err(ConfigError::Unsupported {
                flag: "--exchange neighbor",
                backend: info.flag,
                why: "it is MPI-3's MPI_Ineighbor_alltoallv: this backend swaps halos over \
                      its channels (--exchange waitall)",
            }
            .into());
        }
        if let (Some(_), Problem::Poisson) = (self.offset, self.problem) {
            return Err(Error::Invalid(
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
        if self.matrix.is_some() {
            return Ok(()); // the grid is not made; the matrix's reader checks its memory
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

    /// `--threads-per-rank`, 1 when not given.
    pub(crate) fn threads_per_rank(&self) -> usize {
        self.threads_per_rank.unwrap_or(1)
    }

    /// `--threads-per-rank T`: hybrid ranks are MPI and SHMEM ranks on the grid, and the
    /// configuration must suit them ([`Config::check_threads_per_rank`]).
    fn check_threads_per_rank(&self, cfg: &Config, plan: &Plan) -> Result<(), Error> {
        let Some(t) = self.threads_per_rank else {
            return Ok(());
        };
        let info = self.backend.info();
        let refuse = |why: String| Err(ConfigError::ThreadsPerRank { threads: t, why }.into());
        if info.launcher.is_none() && t != 1 {
            return refuse(format!(
                "applies to --backend mpi and shmem (hybrid ranks): {} already runs every \
             rank as a thread of this process (-t/--threads sets how many)",
                info.flag
            ));
        }
        if self.matrix.is_some() && t != 1 {
            return refuse(
                "--matrix runs one thread per rank: hybrid ranks sweep the grid's problem".into(),
            );
        }
        Ok(cfg.check_threads_per_rank(t, plan)?)
    }

    /// The `config` object this run's report will have (what `aiac sweep` records for a run
    /// that fails).
    pub(crate) fn report_config(&self, cfg: &Config, plan: &Plan) -> RunConfig {
        self.run_config(cfg, self.threads.unwrap_or(1), plan)
    }

    /// The `config` of the report of this run of `cfg` over `ranks` ranks (its flags checked).
    pub(crate) fn run_config(&self, cfg: &Config, ranks: usize, plan: &Plan) -> RunConfig {
        let reduction = self.reduction().unwrap_or_default();
        let mut rc = RunConfig::new(self.backend_name(), ranks, plan, cfg, reduction);
        rc.threads_per_rank = self.threads_per_rank();
        rc
    }
}

/// The output files, named by their flags.
fn outputs(args: &RunArgs) -> Vec<(&'static str, &Path)> {
    [
        ("--json", &args.json),
        ("--csv", &args.csv),
        ("--history", &args.history),
        ("--solution", &args.solution),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
    .collect()
}

/// The input files, named by their flags.
fn inputs(args: &RunArgs) -> Vec<(&'static str, &Path)> {
    [("--matrix", &args.matrix), ("--rhs", &args.rhs)]
        .into_iter()
        .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
        .collect()
}

/// Fail before running if an output file could not be written where asked, or would be
/// written over an input file.
pub(crate) fn check_output(args: &RunArgs) -> Result<(), Error> {
    let files = outputs(args);
    for (flag, path) in &files {
        check_file(flag, path)?;
    }
    check_distinct(&files, &inputs(args))
}
