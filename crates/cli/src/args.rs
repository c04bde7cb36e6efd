//! `aiac run`'s flags ([`RunArgs`]), the configuration they describe ([`RunArgs::config`]:
//! jacobi's [`Config`]) and every check of them that needs no launcher and no world. `aiac
//! sweep` checks each run it will start with the same functions.

use crate::error::Error;
use crate::launch::{not_built, Launcher};
use crate::output::{check_distinct, check_file};
use clap::{Args, ValueEnum};
use jacobi::{
    Applies, Config, ConfigError, Context, Decomp, Detect, Dims, Exchange, HaloDepth, Inner,
    Method, Operator, Pc, PcSub, Plan, Problem, ProcGrid, RacyRead, ReductionKind, RunConfig,
    Setting, SizeSpec, SlowRank, Solver, Variant, MAX_SLOWDOWN,
};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// `--backend`: where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub(crate) enum BackendArg {
    /// Ranks are threads of this process, talking over chan-core's channels.
    Threads,
    /// Shared memory: threads read their neighbours' planes directly.
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
    /// Decomposes for shared memory (planes per thread) rather than over ranks.
    pub(crate) shared_memory: bool,
    /// What the settings' rule knows of it ([`jacobi::Setting::applies`]).
    pub(crate) backend: jacobi::Backend,
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
        let mpi = self == BackendArg::Mpi;
        BackendInfo {
            name,
            flag,
            launcher,
            shared_memory: self == BackendArg::Shared,
            backend: jacobi::Backend {
                name,
                shared_memory: self == BackendArg::Shared,
                // Hybrid ranks: a team of threads in each of the launcher's processes.
                process_ranks: launcher.is_some(),
                native_iallreduce: mpi,
                neighbor_collectives: mpi,
                // A racy send over threads or SHMEM has completed when it returns.
                racy_in_flight: mpi,
            },
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

/// Declares once the flags of `aiac run` that set a run's settings, and makes of them both
/// [`RunSettings`] (one value of each, `None` when not given: the library's default) and
/// [`SweepSettings`] (a comma-separated list of each: `aiac sweep` runs every combination),
/// with the same names, help, parsers and relations. Each flag names its [`Setting`] and its
/// label in a sweep's run names (`R=2`; empty: the value names itself, `async`). A flag whose
/// default is the CLI's own (the backend) gives it after `=`; the help of every flag the
/// library has a default for shows it ([`Setting::default_value`], added by [`with_default`]).
macro_rules! settings {
    // `aiac run`'s settings, one value each: `Option` (clap reads the field's type as it is
    // written, so the struct is built field by field).
    (@run [$($done:tt)*]) => {
        /// `aiac run`'s settings, one value each.
        #[derive(Debug, Args)]
        #[command(mut_args(with_default))]
        pub(crate) struct RunSettings {
            $($done)*
        }
    };
    (@run [$($done:tt)*] $(#[$attr:meta])* $name:ident: $ty:ty = $default:expr => $setting:ident,
        $label:literal; $($rest:tt)*) => {
        settings!(@run [$($done)* $(#[$attr])* #[arg(default_value_t = $default)]
            pub(crate) $name: $ty,] $($rest)*);
    };
    (@run [$($done:tt)*] $(#[$attr:meta])* $name:ident: $ty:ty => $setting:ident,
        $label:literal; $($rest:tt)*) => {
        settings!(@run [$($done)* $(#[$attr])* pub(crate) $name: Option<$ty>,] $($rest)*);
    };
    // A setting given: one whose default is the CLI's is always there, and always applies.
    (@given $self:ident, $out:ident, $name:ident, $setting:ident) => {
        if let Some(v) = &$self.$name {
            $out.push((Setting::$setting, v.shown()));
        }
    };
    (@given $self:ident, $out:ident, $name:ident, $setting:ident, $default:expr) => {};
    ($(
        $(#[$attr:meta])*
        $name:ident: $ty:ty $(= $default:expr)? => $setting:ident, $label:literal;
    )*) => {
        settings!(@run [] $($(#[$attr])* $name: $ty $(= $default)? => $setting, $label;)*);

        /// `aiac sweep`'s lists of `aiac run`'s settings.
        #[derive(Debug, Args)]
        #[command(mut_args(with_default))]
        pub(crate) struct SweepSettings {
            $(
                $(#[$attr])*
                #[arg(value_delimiter = ',')]
                pub(crate) $name: Vec<$ty>,
            )*
        }

        /// The setting an argument id sets.
        fn setting_of(id: &str) -> Option<Setting> {
            match id {
                $(stringify!($name) => Some(Setting::$setting),)*
                _ => None,
            }
        }

        impl RunSettings {
            /// The settings given, with their values as [`Setting::default_value`] writes
            /// them (the backend, which always applies, aside).
            fn given(&self) -> Vec<(Setting, String)> {
                let mut out = Vec::new();
                $(settings!(@given self, out, $name, $setting $(, $default)?);)*
                out
            }
        }

        impl SweepSettings {
            /// One axis per setting, in declaration order (the first varies slowest).
            pub(crate) fn axes(&self) -> Vec<crate::sweep::Axis> {
                vec![$(
                    crate::sweep::Axis {
                        id: stringify!($name),
                        setting: Setting::$setting,
                        short: $label,
                        values: self.$name.iter().map(Shown::shown).collect(),
                    },
                )*]
            }
        }
    };
}

settings! {
    /// The iterative method. The Krylov solvers (cg, cg-overlap, pipecg; gmres and bicgstab
    /// for non-symmetric systems) are synchronous,
    /// stop on ‖b − A x‖₂/‖b‖₂ < TOL (default 1e-8) and run over channels (not --backend
    /// shared).
    #[arg(long, value_enum)]
    solver: Solver => Solver, "";
    /// The Krylov solvers' preconditioner (bjacobi: each rank's diagonal block, solved as
    /// --pc-sub says).
    #[arg(long, value_enum)]
    pc: Pc => Pc, "pc";
    /// --pc bjacobi: the solve of each rank's block: its ILU(0) or IC(0) (a symmetric
    /// positive definite block).
    #[arg(long, value_enum)]
    pc_sub: PcSub => PcSub, "sub";
    /// --solver gmres: Arnoldi steps between restarts, m (from 1 to 1000).
    #[arg(long, value_name = "M")]
    restart: usize => Restart, "m";
    /// Multisplit: the inner solver of each rank's block.
    #[arg(long, value_enum)]
    inner: Inner => Inner, "inner";
    /// Multisplit: an inner solve stops when it has reduced its block's residual by this
    /// factor, above 0 and below 1.
    #[arg(long, allow_hyphen_values = true)]
    inner_tol: f64 => InnerTol, "itol";
    /// Multisplit: inner iterations per outer iteration at most, at least 1.
    #[arg(long)]
    inner_max: u64 => InnerMax, "imax";
    /// sync: halo swap and reduction in lock-step; async: newest whole message; racy: atomic
    /// view of a buffer written at any time.
    #[arg(long, value_enum)]
    variant: Variant => Variant, "";
    /// Where the ranks run (mpi runs are started with `mpirun -np P`, shmem runs with
    /// `oshrun -np P`).
    #[arg(long, value_enum)]
    backend: BackendArg = BackendArg::Threads => Backend, "";
    /// Number of ranks (threads backend) or threads (shared backend): from 1 (the default) to
    /// 2048. With `--backend mpi` the ranks are mpirun's processes; a value given here must
    /// match them.
    #[arg(short = 't', long = "threads", visible_alias = "ranks")]
    threads: usize => Ranks, "p";
    /// --backend mpi and shmem: sweep each rank's block with T threads (hybrid ranks), each
    /// owning a fixed range of its z-planes, pinned to the CPUs the rank may use (start the
    /// job with `mpirun --bind-to none` or `--map-by slot:PE=T`: by default Open MPI binds a
    /// rank to one core, and the threads then run unpinned; a sweep starts such runs so).
    /// Jacobi on the grid, --halo-depth 1, --exchange waitall or blocking; from 1 to 256, at
    /// most the z-planes of a rank's block. Sync runs give the iterates of one thread per
    /// rank, bit for bit.
    #[arg(long, value_name = "T")]
    threads_per_rank: usize => ThreadsPerRank, "T";
    /// The problem.
    #[arg(long, value_parser = problem_parser())]
    problem: Problem => Problem, "";
    /// Interior points per rank: N or NXxNYxNZ (weak scaling).
    #[arg(long, value_parser = parse_dims, conflicts_with = "global")]
    local: Dims => Local, "local";
    /// Interior points of the whole grid, N or NXxNYxNZ, split over the process grid (strong
    /// scaling).
    #[arg(long, value_parser = parse_dims)]
    global: Dims => Global, "global";
    /// Process grid PXxPYxPZ (default: as --decomp says; it must have as many ranks as the
    /// run).
    #[arg(long, value_parser = parse_grid)]
    grid: ProcGrid => Grid, "grid";
    /// The shape of the process grid when --grid is not given.
    #[arg(long, value_enum)]
    decomp: Decomp => Decomp, "decomp";
    /// How the sync variant swaps its halos (CG: waitall or neighbor; neighbor: --backend mpi
    /// only).
    #[arg(long, value_enum)]
    exchange: Exchange => Exchange, "";
    /// Jacobi on Laplace: stop when ‖b − A u_k‖₂ / ‖b − A u_0‖₂ < TOL (default 1e-4); on
    /// Poisson: when ‖u_k − u_{k−1}‖₂ ≤ TOL (default 1e-6). Krylov solvers: when
    /// ‖b − A x‖₂ / ‖b‖₂ < TOL (default 1e-8, both problems). From 2.2e-16, f64's machine
    /// epsilon (a relative residual at most 1).
    #[arg(long, allow_hyphen_values = true)]
    tol: f64 => Tol, "tol";
    /// Krylov solvers: compute the true residual every K iterations (default 100) and
    /// replace the recurrence residual when it has drifted. Sync: test the criterion (a global
    /// reduction) every K iterations (default: 100 for Laplace, as the paper; 1 for Poisson,
    /// as Wang & Gobbert). Async and racy: start a
    /// round of the non-blocking reduction no sooner than K iterations after the previous one
    /// started (without the flag, the paper's scheme: as soon as the previous one returns).
    /// From 1 to --max-iters.
    #[arg(long, value_name = "K")]
    check_every: u64 => CheckEvery, "K";
    /// Exchange halos every N iterations.
    #[arg(long, value_name = "N")]
    halo_every: u64 => HaloEvery, "N";
    /// Jacobi: halos k planes deep. Sync: exchange every k iterations and do the k sweeps on
    /// the block grown by the ghost zone, as one wavefront (temporal blocking); the iterates
    /// are bit for bit those of k = 1, and --check-every must be a multiple of k. Async and
    /// racy: send k-deep faces every N iterations (--halo-every) and advance a fresh ghost
    /// zone with the block. From 1 to 16, or auto: sync Jacobi measures the candidate depths
    /// on this run's blocks and channels before the solve and takes the fastest (the report's
    /// halo_auto); async and racy take 1.
    #[arg(long, value_name = "k", value_parser = parse_halo_depth)]
    halo_depth: HaloDepth => HaloDepth, "k";
    /// R: messages in flight per channel direction (async, racy).
    #[arg(long, value_name = "R")]
    max_in_flight: usize => MaxInFlight, "R";
    /// The non-blocking reduction async and racy runs test: iallreduce (--backend mpi only,
    /// its default) or tree (the only one of the other backends).
    #[arg(long, value_enum)]
    reduction: ReductionKind => Reduction, "";
    /// Racy: read the halo view once a newer send has landed (landed), or every iteration as
    /// the paper's racy receive does (always).
    #[arg(long, value_enum)]
    racy_read: RacyRead => RacyRead, "racy-read";
    /// Async and racy Jacobi over channels: how convergence is detected before it is
    /// certified. reduction: rounds of the non-blocking reduction of the residuals the sweeps
    /// saw (the only value the other runs take); snapshot: rounds of a consistent snapshot of
    /// the iterate, its faces sent over their own channels, its residual reduced, the run
    /// stopped on the snapshot; ibarrier: a non-blocking barrier (MPI_Ibarrier; the tree
    /// reduction on the other backends) each rank enters once its residual is below its share
    /// of the tolerance.
    #[arg(long, value_enum)]
    detect: Detect => Detect, "detect";
    /// No rank iterates more than this (fix one for scaling sweeps: a run that stops
    /// unconverged at the limit still times its iterations).
    #[arg(long)]
    max_iters: u64 => MaxIters, "max-iters";
    /// Laplace only: add C to the boundary values and start the interior at C.
    /// |C| is bounded by what f64 resolves at --tol on the grid (about 2.7e10 at 50³, tol 1e-4):
    /// a larger offset swamps the solution's digits.
    #[arg(long, allow_hyphen_values = true)]
    offset: f64 => Offset, "offset";
    /// How many times slower the --slow-rank sweeps: from 1 to 1000.
    #[arg(long, requires = "slow_rank", allow_hyphen_values = true, value_parser = parse_slowdown)]
    slowdown: f64 => Slowdown, "slowdown";
}

/// A setting's value as a flag takes it and a report names it (`async`, `8x8x8`, `0.1`).
pub(crate) trait Shown {
    fn shown(&self) -> String;
}

macro_rules! shown_by_name {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                self.to_possible_value()
                    .map(|p| p.get_name().to_string())
                    .unwrap_or_default()
            }
        }
    )*};
}
shown_by_name!(
    BackendArg,
    Solver,
    Pc,
    PcSub,
    Inner,
    Variant,
    Decomp,
    Exchange,
    ReductionKind,
    RacyRead,
    Detect
);

macro_rules! shown_as_written {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
shown_as_written!(f64, u64, usize, Dims, ProcGrid, HaloDepth);

impl Shown for Problem {
    fn shown(&self) -> String {
        self.name().into()
    }
}

/// `arg`'s help, with the library's default for its setting when it has one for every run.
fn with_default(arg: clap::Arg) -> clap::Arg {
    let Some(default) = setting_of(arg.get_id().as_str()).and_then(Setting::default_value) else {
        return arg;
    };
    let mut arg = arg;
    if let Some(help) = arg.get_help().map(ToString::to_string) {
        arg = arg.help(format!("{help} [default: {default}]"));
    }
    if let Some(help) = arg.get_long_help().map(ToString::to_string) {
        arg = arg.long_help(format!("{help}\n\n[default: {default}]"));
    }
    arg
}

/// `--matrix-storage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StorageArg {
    Auto,
    Compact,
    Csr,
}

impl From<StorageArg> for jacobi::sparse::MatrixStorage {
    fn from(s: StorageArg) -> Self {
        match s {
            StorageArg::Auto => jacobi::sparse::MatrixStorage::Auto,
            StorageArg::Compact => jacobi::sparse::MatrixStorage::Compact,
            StorageArg::Csr => jacobi::sparse::MatrixStorage::Csr,
        }
    }
}

/// `--matrix` and `--rhs`: the user's own sparse system, for `aiac run` and `aiac sweep` alike
/// (a sweep runs each of its runs over it).
#[derive(Debug, Args)]
pub(crate) struct SystemFiles {
    /// Solve the sparse system in this Matrix Market file instead of the grid's problem
    /// (`coordinate real|integer general|symmetric|skew-symmetric`), from x = 0 (or --x0), until
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
    /// With --matrix: how each rank stores its rows for the kernels. `compact` takes the most
    /// compact storage the block allows (column offsets from the row in 16 bits, and a table
    /// of the distinct values indexed in 8 or 16 bits: 3.6 bytes an entry for a 7-point
    /// operator), else CSR; `csr` always CSR (PETSc's AIJ: 12 bytes an entry and 8 a row);
    /// `auto` compact for a block whose CSR takes 8 MiB or more (the matrix streamed from
    /// memory), CSR below (in cache, CSR's kernels take fewer instructions). The results are
    /// the same to the bit.
    #[arg(long, value_name = "STORAGE", value_enum, default_value_t = StorageArg::Auto, requires = "matrix")]
    pub(crate) matrix_storage: StorageArg,
}

/// `aiac run`'s flags: its settings ([`RunSettings`], read through `Deref`), the flags it
/// shares with `aiac sweep`, and its own inputs and outputs.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) settings: RunSettings,
    // `--matrix` and `--rhs`, which `aiac sweep` takes too.
    #[command(flatten)]
    pub(crate) system: SystemFiles,
    #[command(flatten)]
    pub(crate) fixed: Fixed,
    /// Write the solution to FILE as a Matrix Market `array real general` vector (17
    /// significant digits: the values read back to the same bits): --matrix's x, or the
    /// grid's interior points, x fastest (what --x0 reads).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) solution: Option<PathBuf>,
    /// Start from the iterate in FILE instead of the problem's: a Matrix Market `array real
    /// general` vector of the grid's interior points, x fastest, or of --matrix's rows (what
    /// --solution writes; a checkpoint is one too).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "resume",
        help_heading = "Start and resume"
    )]
    pub(crate) x0: Option<PathBuf>,
    /// Every --checkpoint-every K iterations (async, racy: rounds), write the iterate to FILE with
    /// what --resume needs (written whole: a kill leaves the previous checkpoint).
    #[arg(
        long,
        value_name = "FILE",
        requires = "checkpoint_every",
        help_heading = "Start and resume"
    )]
    pub(crate) checkpoint: Option<PathBuf>,
    /// K: a checkpoint every K iterations (sync; a multiple of --halo-every), every K
    /// completed rounds of the convergence detection (async, racy).
    #[arg(
        long,
        value_name = "K",
        requires = "checkpoint",
        help_heading = "Start and resume"
    )]
    pub(crate) checkpoint_every: Option<u64>,
    /// Go on from the checkpoint in FILE (the same problem, size, ranks and method): a sync
    /// run reaches the iterate and iteration count of the run it continues, bit for bit.
    #[arg(long, value_name = "FILE", help_heading = "Start and resume")]
    pub(crate) resume: Option<PathBuf>,
    /// Write the whole report as JSON to FILE (schema aiac.run/4, docs/json-schema.md).
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

impl std::ops::Deref for RunArgs {
    type Target = RunSettings;
    fn deref(&self) -> &RunSettings {
        &self.settings
    }
}

impl RunArgs {
    /// The solver configuration the flags describe, here and nowhere else: the method from
    /// `--solver` and `--variant` and the flags that set it (one given where it means nothing
    /// is refused: the library's rule, [`Setting::applies`]), and the library's defaults
    /// (its constants, and [`Config::new`]'s for the method) for what was not given.
    pub(crate) fn config(&self) -> Result<Config, ConfigError> {
        let size = match (self.local, self.global) {
            (_, Some(g)) => SizeSpec::Global(g),
            (Some(l), None) => SizeSpec::Local(l),
            (None, None) => SizeSpec::Local(Dims::cube(jacobi::DEFAULT_LOCAL)),
        };
        let problem = match self.problem.unwrap_or_default() {
            Problem::Laplace { .. } => Problem::Laplace {
                offset: self.offset.unwrap_or(0.0),
            },
            p => p,
        };
        let ctx = self.context();
        jacobi::check_given(
            &ctx,
            self.given()
                .iter()
                .map(|(s, v)| (*s, Cow::Borrowed(v.as_str()))),
        )?;
        let mut method = Method::new(
            self.solver.unwrap_or_default(),
            self.variant.unwrap_or_default(),
        )?;
        if let Some(it) = method.iteration_mut() {
            it.halo_every = self.halo_every.unwrap_or(it.halo_every);
            it.max_in_flight = self.max_in_flight.unwrap_or(it.max_in_flight);
            it.racy_read = self.racy_read.unwrap_or(it.racy_read);
            it.detect = self.detect.unwrap_or(it.detect);
            // K paces the reductions of async and racy runs over channels (shared memory
            // has no rounds: K only samples its history there).
            it.pace_reductions = self.check_every.is_some()
                && it.variant != Variant::Sync
                && Setting::CheckEvery.applies(&ctx) == Applies::Yes;
        }
        if let Some(j) = method.jacobi_mut() {
            j.exchange = self.exchange.unwrap_or(j.exchange);
            j.halo_depth = self.halo_depth.unwrap_or(j.halo_depth);
        }
        if let Some(k) = method.krylov_mut() {
            k.pc = self.pc.unwrap_or(k.pc);
            k.pc_sub = self.pc_sub.unwrap_or(k.pc_sub);
            k.restart = self.restart.unwrap_or(k.restart);
            k.exchange = self.exchange.unwrap_or(k.exchange);
        }
        if let Some(i) = method.inner_mut() {
            i.solver = self.inner.unwrap_or(i.solver);
            i.tol = self.inner_tol.unwrap_or(i.tol);
            i.max = self.inner_max.unwrap_or(i.max);
        }
        let defaults = Config::new(problem, method);
        Ok(Config {
            size,
            grid: self.grid,
            decomp: self.decomp.unwrap_or(defaults.decomp),
            criterion: self
                .tol
                .map_or(defaults.criterion, |t| defaults.criterion.with_tol(t)),
            check_every: self.check_every.unwrap_or(defaults.check_every),
            max_iters: self.max_iters.unwrap_or(defaults.max_iters),
            confirm: !self.fixed.no_confirm,
            slow: self.fixed.slow_rank.map(|rank| SlowRank {
                rank,
                factor: self.slowdown.unwrap_or(jacobi::DEFAULT_SLOWDOWN),
            }),
            ..defaults
        })
    }

    /// Where this run runs, for the settings' rule: the method, the backend, the team of each
    /// rank and the operator.
    pub(crate) fn context(&self) -> Context {
        Context {
            solver: self.solver.unwrap_or_default(),
            variant: self.variant.unwrap_or_default(),
            backend: self.backend.info().backend,
            threads_per_rank: self.threads_per_rank(),
            operator: match self.system.matrix {
                Some(_) => Operator::Matrix,
                None => Operator::Grid(self.problem.unwrap_or_default()),
            },
        }
    }

    /// Every setting given: [`RunSettings`]' and `--confirm`/`--no-confirm`.
    fn given(&self) -> Vec<(Setting, String)> {
        let mut given = self.settings.given();
        if self.fixed.confirm || self.fixed.no_confirm {
            given.push((Setting::Confirm, (!self.fixed.no_confirm).to_string()));
        }
        given
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
        self.backend.info().backend.reduction(self.reduction)
    }

    /// [`RunArgs::check`] without the output files: what `aiac sweep` checks for every run
    /// before it starts any (it checks its own output directory).
    pub(crate) fn check_config(&self) -> Result<(Config, Plan), Error> {
        let info = self.backend.info();
        if let (Some(_), true) = (&self.system.matrix, info.shared_memory) {
            return Err(Error::Invalid(format!(
                "--matrix runs over channels: {} runs the grid's problem only (use --backend \
                 threads, mpi or shmem)",
                info.flag
            )));
        }
        let cfg = self.config()?;
        let n = self.threads.unwrap_or(1);
        if n == 0 {
            return Err(ConfigError::NoRanks.into());
        }
        if info.launcher.is_none() && n > MAX_THREADS {
            return Err(Error::Invalid(format!(
                "-t/--threads must be from 1 to {MAX_THREADS} with {}: every rank is a thread \
                 of this one process; got {n} (for more ranks, --backend mpi over several \
                 machines)",
                info.flag
            )));
        }
        self.reduction()?;
        let plan = cfg.plan_in(&self.context(), n)?;
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
        // What the world size and the backend decide (`plan` may be any channel
        // backend's: a launched rank plans before it knows more).
        cfg.check_in(&self.context())?;
        if let Some(t) = self.threads_per_rank {
            cfg.check_threads_per_rank(t, plan)?;
        }
        if self.exchange == Some(Exchange::Neighbor) && crate::launch::simulated() {
            return Err(Error::Invalid(
                "--exchange neighbor is not supported with SimGrid's SMPI: SMPI declares \
                 MPI_Dist_graph_create_adjacent and MPI_Ineighbor_alltoallv without running \
                 them: use --exchange waitall"
                    .into(),
            ));
        }
        if let Some(k) = self.check_every {
            if k > cfg.max_iters {
                return Err(ConfigError::CheckEveryTooLarge {
                    check_every: k,
                    max_iters: cfg.max_iters,
                }
                .into());
            }
        }
        if self.system.matrix.is_some() {
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
    [
        ("--matrix", &args.system.matrix),
        ("--rhs", &args.system.rhs),
        ("--x0", &args.x0),
        ("--resume", &args.resume),
    ]
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
    check_distinct(&files, &inputs(args))?;
    // The checkpoint may replace the one resumed from (read whole before the run, and
    // replaced atomically), no other input or output.
    if let Some(path) = &args.checkpoint {
        check_file("--checkpoint", path)?;
        let others: Vec<_> = inputs(args)
            .into_iter()
            .filter(|(f, _)| *f != "--resume")
            .collect();
        check_distinct(&[("--checkpoint", path.as_path())], &others)?;
        let mut all = files.clone();
        all.push(("--checkpoint", path.as_path()));
        check_distinct(&all, &[])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn subcommand(name: &str) -> clap::Command {
        let mut cmd = crate::Cli::command();
        cmd.build();
        cmd.find_subcommand(name).expect("a subcommand").clone()
    }

    /// The defaults of a run's settings are the library's: no flag of a setting has a default
    /// of clap's (but the backend, which is the CLI's own), and the help of each shows the
    /// library's, from its constants.
    #[test]
    fn defaults_live_in_the_library() {
        let run = subcommand("run");
        for a in run.get_arguments() {
            let Some(setting) = setting_of(a.get_id().as_str()) else {
                continue;
            };
            if setting == Setting::Backend {
                continue;
            }
            assert!(
                a.get_default_values().is_empty(),
                "--{} restates a default",
                a.get_id()
            );
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            match setting.default_value() {
                Some(d) => assert!(help.ends_with(&format!("[default: {d}]")), "{help}"),
                None => assert!(!help.contains("[default:"), "{help}"),
            }
        }
        let help = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help().map(|h| h.to_string()))
                .unwrap()
        };
        let r = format!("[default: {}]", jacobi::DEFAULT_MAX_IN_FLIGHT);
        assert!(help("max_in_flight").ends_with(&r));
        let n = format!("[default: {}]", jacobi::DEFAULT_MAX_ITERS);
        assert!(help("max_iters").ends_with(&n));
        // Not given, a setting takes the library's default.
        let args = crate::parse_run_args(["--variant", "async"]).unwrap();
        let c = args.config().unwrap();
        let it = c.method.iteration().unwrap();
        assert_eq!(it.max_in_flight, jacobi::DEFAULT_MAX_IN_FLIGHT);
        assert_eq!(it.halo_every, jacobi::DEFAULT_HALO_EVERY);
        assert_eq!(c.max_iters, jacobi::DEFAULT_MAX_ITERS);
    }

    /// `aiac sweep` takes every setting `aiac run` takes, by the same flag, with the same help
    /// and relations, as a comma-separated list.
    #[test]
    fn a_sweep_takes_the_settings_of_a_run() {
        let (run, sweep) = (subcommand("run"), subcommand("sweep"));
        let mut settings = 0;
        for a in run.get_arguments() {
            if setting_of(a.get_id().as_str()).is_none() {
                continue;
            }
            settings += 1;
            let s = sweep
                .get_arguments()
                .find(|s| s.get_id() == a.get_id())
                .unwrap_or_else(|| panic!("sweep has no --{}", a.get_id()));
            assert_eq!(s.get_long(), a.get_long());
            assert_eq!(s.get_short(), a.get_short());
            assert_eq!(
                s.get_help().map(|h| h.to_string()),
                a.get_help().map(|h| h.to_string())
            );
            assert_eq!(s.get_value_delimiter(), Some(','), "--{}", a.get_id());
        }
        assert_eq!(
            settings,
            RunSettings::augment_args(clap::Command::new("x"))
                .get_arguments()
                .count()
        );
        assert!(settings >= 25, "{settings}");
    }
}
