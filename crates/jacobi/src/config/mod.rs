//! What a run is asked to do: the method's choices as named types, and [`Config`], one run
//! of a solver. It is checked before anything starts (`settings/check.rs`).

#[cfg(test)]
mod test;

use crate::geometry::{Dims, Plan, ProcGrid};
use crate::method::Method;
use crate::problem::{Problem, StopCriterion};
pub use crate::settings::ConfigError;
use serde::{Deserialize, Serialize};

/// The three forms of the solver (Bethune, Bull, Dingle, Higham, *Performance analysis of
/// asynchronous Jacobi's method implemented in MPI, SHMEM and OpenMP*, IJHPCA 28(1), 2014).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// Halo exchange every `halo_every` iterations over Sync channels, global residual every
    /// `check_every` iterations (the paper's Figure 1).
    #[default]
    Sync,
    /// Newest whole halo message each iteration, `try_send` the faces, non-blocking reduction.
    Async,
    /// Halo read through the racy atomic view, `try_send` the faces, non-blocking reduction.
    Racy,
}

impl Variant {
    /// `sync`, `async`, `racy`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Sync => "sync",
            Variant::Async => "async",
            Variant::Racy => "racy",
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The iterative method (`--solver`). Every one is written once over chan-core's
/// [`chan_core::Context`] and runs over every channel backend.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Solver {
    /// The paper's Jacobi iteration, in any [`Variant`].
    #[default]
    #[serde(rename = "jacobi")]
    #[cfg_attr(
        feature = "clap",
        value(help = "The paper's Jacobi iteration (sync, async or racy)")
    )]
    Jacobi,
    /// Conjugate gradients on A = 6I − adjacency: halos through Sync channels, the two dot
    /// products of each iteration through the backend's blocking all-reduce.
    #[serde(rename = "cg")]
    Cg,
    /// CG with the halo exchange overlapped: the interior of the matrix-vector product is
    /// computed while the halo messages travel, then the boundary layer (Hoefler et al.).
    #[serde(rename = "cg-overlap")]
    #[cfg_attr(feature = "clap", value(name = "cg-overlap"))]
    CgOverlap,
    /// Pipelined CG (Ghysels and Vanroose; PETSc's KSPPIPECG): one non-blocking reduction per
    /// iteration, progressed while the preconditioner and the matrix-vector product run.
    #[serde(rename = "pipecg")]
    #[cfg_attr(feature = "clap", value(name = "pipecg"))]
    PipeCg,
    /// Restarted GMRES(m) (Saad and Schultz; PETSc's KSPGMRES), right-preconditioned,
    /// classical Gram–Schmidt: one blocking all-reduce per Arnoldi step. Non-symmetric
    /// systems.
    #[serde(rename = "gmres")]
    #[cfg_attr(feature = "clap", value(name = "gmres"))]
    Gmres,
    /// BiCGStab (van der Vorst; PETSc's KSPBCGS), right-preconditioned, two blocking
    /// all-reduces per iteration. Non-symmetric systems.
    #[serde(rename = "bicgstab")]
    #[cfg_attr(feature = "clap", value(name = "bicgstab"))]
    BiCgStab,
    /// Asynchronous multisplitting (Bethune et al., §6.4): each rank solves its block's own
    /// problem with an inner solver ([`Inner`]), the newest halo held fixed as Dirichlet data,
    /// and exchanges its boundary planes as Jacobi does, in any [`Variant`].
    #[serde(rename = "multisplit")]
    #[cfg_attr(
        feature = "clap",
        value(
            help = "Asynchronous multisplitting (Bethune et al., §6.4): each rank solves its \
                      block (with an inner cg, cg32 or jacobi) with the newest halo as Dirichlet \
                      data, in \
                      the sync, async or racy form"
        )
    )]
    Multisplit,
}

impl Solver {
    /// `jacobi`, `cg`, `cg-overlap`, `pipecg`, `multisplit`.
    pub fn name(self) -> &'static str {
        match self {
            Solver::Jacobi => "jacobi",
            Solver::Cg => "cg",
            Solver::CgOverlap => "cg-overlap",
            Solver::PipeCg => "pipecg",
            Solver::Gmres => "gmres",
            Solver::BiCgStab => "bicgstab",
            Solver::Multisplit => "multisplit",
        }
    }

    /// A Krylov solver (cg, cg-overlap, pipecg, gmres, bicgstab): synchronous, stops on
    /// ‖b − A x‖₂/‖b‖₂.
    pub fn is_krylov(self) -> bool {
        matches!(
            self,
            Solver::Cg | Solver::CgOverlap | Solver::PipeCg | Solver::Gmres | Solver::BiCgStab
        )
    }

    /// A Krylov solver for non-symmetric systems (gmres, bicgstab).
    pub fn is_nonsymmetric(self) -> bool {
        matches!(self, Solver::Gmres | Solver::BiCgStab)
    }
}

impl std::fmt::Display for Solver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The inner solver of multisplitting (`--inner`): what each rank runs on its block, the
/// halo held fixed, in every outer iteration.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inner {
    /// Conjugate gradients on the block alone (A restricted to the owned points, the halo
    /// folded into the right-hand side): no global reduction, its dot products are local.
    #[default]
    Cg,
    /// Jacobi sweeps of the block, the halo held fixed.
    Jacobi,
    /// CG on the block in single precision for a correction (mixed precision: the residual
    /// and the iterate stay double): half the bytes per inner iteration.
    Cg32,
}

impl Inner {
    /// `cg`, `jacobi`.
    pub fn name(self) -> &'static str {
        match self {
            Inner::Cg => "cg",
            Inner::Jacobi => "jacobi",
            Inner::Cg32 => "cg32",
        }
    }
}

/// The default `--inner-tol`: an inner solve stops once it has reduced its block's residual
/// (the halo held fixed) by this factor. Solving the block more exactly buys few outer
/// iterations: on 16³ blocks at 8 ranks, sync needs 92, 93 and 97 outer iterations at inner
/// tolerances 0.01, 0.1 and 0.3, for 24.8, 12.0 and 6.8 inner CG iterations each.
pub const DEFAULT_INNER_TOL: f64 = 0.1;

/// The default `--inner-max`: inner iterations per outer iteration at most. Two-stage
/// multisplitting converges with any fixed number of inner iterations (Frommer and Szyld,
/// *H-splittings and two-stage iterative methods*, Numer. Math. 63, 1992; synchronous and
/// asynchronous: Bru, Migallón, Penadés and Szyld, ETNA 3, 1995), so the count is a matter of
/// cost: more inner iterations buy fewer outer ones, with diminishing returns. Sync runs to
/// 1e-6 on the Laplace problem, inner CG (inner iterations in all = outer × inner per outer):
/// on 2 × 50³ at most 5, 10, 15, 20 and 50 inner iterations took 382 × 5, 164 × 10, 126 × 15,
/// 116 × 20 and 116 × 24.5 (1910, 1640, 1890, 2314, 2846); on 2 × 32³ at most 5, 7, 10 and 15
/// took 915, 812, 830 and 1183; on 8 × 32³ 3372, 3371, 3820 and 4744 (7 and 10: 484 × 7,
/// 384 × 10). Ten is at or within 13% of the fewest everywhere; the former default, 50, did
/// 1.7× the inner work of 10 on 2 × 50³ (docs/performance.md, "Multisplitting against
/// Jacobi and CG").
pub const DEFAULT_INNER_MAX: u64 = 10;

/// The preconditioner of the Krylov solvers (`--pc`).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pc {
    /// None: M = I.
    #[default]
    None,
    /// Jacobi (diagonal) scaling, M = D⁻¹, applied as a pointwise product with a stored
    /// inverse diagonal. For the 7-point operator D = 6I is constant, so it changes neither
    /// the iterates nor the iteration count (M = I/6 only rescales the recurrences), and costs
    /// one more vector stream per iteration; it is here so that the code is general.
    Jacobi,
    /// Block Jacobi: each rank solves with its own diagonal block of A ([`PcSub`]), the
    /// couplings to the other ranks dropped (PETSc's PCBJACOBI, one block a rank).
    #[serde(rename = "bjacobi")]
    #[cfg_attr(feature = "clap", value(name = "bjacobi"))]
    BJacobi,
}

impl Pc {
    /// `none`, `jacobi`, `bjacobi`.
    pub fn name(self) -> &'static str {
        match self {
            Pc::None => "none",
            Pc::Jacobi => "jacobi",
            Pc::BJacobi => "bjacobi",
        }
    }
}

/// Block Jacobi's solve of a rank's diagonal block (`--pc-sub`).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PcSub {
    /// Incomplete LU with no fill, ILU(0) (PETSc's default sub-preconditioner).
    #[default]
    Ilu0,
    /// Incomplete Cholesky with no fill, IC(0), for a symmetric positive definite block.
    Ic0,
}

impl PcSub {
    /// `ilu0`, `ic0`.
    pub fn name(self) -> &'static str {
        match self {
            PcSub::Ilu0 => "ilu0",
            PcSub::Ic0 => "ic0",
        }
    }
}

/// How the process grid is shaped.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decomp {
    /// The paper's 3-D grid: x first, then y, then z at each doubling ([`ProcGrid::paper`]).
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "The paper's 3-D grid: x first, then y, then z at each doubling")
    )]
    Paper,
    /// A 1-D split in z, P = 1 × 1 × p (Wang & Gobbert: each process N × N × N/p).
    Z,
}

impl Decomp {
    /// `paper`, `z`.
    pub fn name(self) -> &'static str {
        match self {
            Decomp::Paper => "paper",
            Decomp::Z => "z",
        }
    }
}

/// How the sync variant swaps its halos (Wang & Gobbert compare the last two).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exchange {
    /// Start every send, then wait for every receive, then sweep (the paper's
    /// `MPI_Issend` + `MPI_Irecv` + `MPI_Waitall`).
    #[default]
    Waitall,
    /// Blocking sends and receives one at a time, ordered so that no cycle can deadlock:
    /// along each axis and direction, ranks at even coordinates send while those at odd ones
    /// receive, then the other way round (the pattern of Wang & Gobbert's
    /// `MPI_Ssend`/`MPI_Recv`).
    Blocking,
    /// Start every send, sweep the interior while the halos travel, wait for the halos,
    /// then sweep the boundary layer (`MPI_Isend`/`MPI_Irecv` with computation overlapped).
    Overlap,
    /// Every face in one MPI-3 neighbourhood collective (`MPI_Ineighbor_alltoallv` on a
    /// distributed-graph communicator of the rank's neighbours): pack every face, start,
    /// wait, unpack, sweep. The iterates are those of `waitall`, bit for bit. MPI only;
    /// Jacobi's sync variant with one-plane halos, and CG.
    Neighbor,
}

impl Exchange {
    /// `waitall`, `blocking`, `overlap`, `neighbor`.
    pub fn name(self) -> &'static str {
        match self {
            Exchange::Waitall => "waitall",
            Exchange::Blocking => "blocking",
            Exchange::Overlap => "overlap",
            Exchange::Neighbor => "neighbor",
        }
    }
}

/// The algorithm of the non-blocking reduction that async and racy runs test (`--reduction`).
/// The backend's context builds it; the report records which one ran.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReductionKind {
    /// chan-core's binary-tree reduce-then-broadcast over point-to-point channels (the
    /// paper's hand-written tree): every backend has it, and it is the only one of threads,
    /// SHMEM and shared memory.
    #[default]
    Tree,
    /// `MPI_Iallreduce`, the MPI library's own non-blocking collective: MPI only, its default.
    Iallreduce,
}

impl ReductionKind {
    /// `tree`, `iallreduce`.
    pub fn name(self) -> &'static str {
        match self {
            ReductionKind::Tree => "tree",
            ReductionKind::Iallreduce => "iallreduce",
        }
    }
}

/// How async and racy runs detect convergence before certifying it (`--detect`).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detect {
    /// The paper's: rounds of the non-blocking reduction of the residuals each rank's sweeps
    /// saw, restarted as soon as one returns.
    #[default]
    Reduction,
    /// Rounds of a consistent snapshot: each rank copies its block and sends the copy's faces
    /// over dedicated Sync channels while it iterates on; once it holds every neighbour's
    /// snapshot faces it reduces the residual of the snapshot (one global vector), and a round
    /// below tolerance stops the run on the snapshot itself (`solver/`, "Snapshot
    /// detection").
    Snapshot,
    /// A non-blocking barrier (`MPI_Ibarrier` over MPI, the tree reduction elsewhere) that a
    /// rank enters once its own residual is below its share of the tolerance; its completion
    /// is certified (`solver/`, "Barrier detection").
    Ibarrier,
}

impl Detect {
    /// `reduction`, `snapshot`, `ibarrier`.
    pub fn name(self) -> &'static str {
        match self {
            Detect::Reduction => "reduction",
            Detect::Snapshot => "snapshot",
            Detect::Ibarrier => "ibarrier",
        }
    }
}

/// When the racy variant reads its halo view (`--racy-read`).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RacyRead {
    /// Only once a send newer than the halo's data has landed in the view (before any send
    /// the view holds zeros, not the neighbour's iterate).
    #[default]
    Landed,
    /// Every iteration, whatever has landed: the paper's racy receive, "always ready".
    Always,
}

impl RacyRead {
    /// `landed`, `always`.
    pub fn name(self) -> &'static str {
        match self {
            RacyRead::Landed => "landed",
            RacyRead::Always => "always",
        }
    }
}

/// How the problem size is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSpec {
    /// Interior points each rank owns (`--local`, weak scaling; the paper's default 50³).
    Local(Dims),
    /// Interior points of the whole grid, split over the process grid (`--global`).
    Global(Dims),
}

impl SizeSpec {
    /// Parse `N`, `NX,NY,NZ` or `NXxNYxNZ`.
    pub fn parse_dims(s: &str) -> Result<Dims, String> {
        let parts: Vec<&str> = if s.contains(',') {
            s.split(',').collect()
        } else {
            s.split(['x', 'X']).collect()
        };
        let bad =
            || format!("expected N, NX,NY,NZ or NXxNYxNZ with every value at least 1, got '{s}'");
        let nums: Vec<usize> = parts
            .iter()
            .map(|p| p.trim().parse::<usize>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        if nums.contains(&0) {
            return Err(bad());
        }
        match nums[..] {
            [n] => Ok(Dims::cube(n)),
            [x, y, z] => Ok(Dims::new(x, y, z)),
            _ => Err(bad()),
        }
    }
}

/// The largest slowdown: a rank 1000 times slower already does a thousand sweeps' work per
/// sweep; beyond it a run does not finish in any useful time.
pub const MAX_SLOWDOWN: f64 = 1000.0;

/// The default slowdown of the slow rank: twice the work per sweep.
pub const DEFAULT_SLOWDOWN: f64 = 2.0;

/// The default block per rank, N³ interior points: the paper's 50³ (weak scaling).
pub const DEFAULT_LOCAL: usize = 50;

/// The smallest tolerance: f64's machine epsilon. A stopping criterion below it cannot be told
/// from rounding (a relative residual below ε would need every residual below one ulp of
/// the first one's scale).
pub const MIN_TOL: f64 = f64::EPSILON;

/// The deepest halo `--halo-depth` accepts: deeper ghost zones cost more redundant sweeps
/// than the messages they save.
pub const MAX_HALO_DEPTH: u64 = 16;

/// Jacobi's `--halo-depth`: a fixed k, or `auto`, which measures the candidate depths on
/// this run's blocks and channels before the solve and takes the fastest (`deep/`,
/// "Choosing k"). A report stores a fixed k as the number and `auto` as the string `"auto"`
/// (reports written before `auto` hold a number, and read as before); the k `auto` chose is
/// in the report's `halo_auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HaloDepth {
    /// k, from 1 to [`MAX_HALO_DEPTH`].
    Fixed(u64),
    /// Chosen at the start from measured costs.
    Auto,
}

impl Default for HaloDepth {
    /// One-plane halos, the paper's.
    fn default() -> Self {
        HaloDepth::Fixed(1)
    }
}

impl HaloDepth {
    /// The fixed k (`None` for `auto`).
    pub fn fixed(self) -> Option<u64> {
        match self {
            HaloDepth::Fixed(k) => Some(k),
            HaloDepth::Auto => None,
        }
    }

    /// Anything but one-plane halos (a fixed k > 1, or `auto`, which may choose one).
    pub fn is_deep(self) -> bool {
        self != HaloDepth::Fixed(1)
    }
}

impl std::fmt::Display for HaloDepth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HaloDepth::Fixed(k) => write!(f, "{k}"),
            HaloDepth::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for HaloDepth {
    type Err = ConfigError;
    /// `auto`, or k from 1 to [`MAX_HALO_DEPTH`]; anything else is
    /// [`ConfigError::HaloDepthValue`].
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(HaloDepth::Auto);
        }
        match t.parse::<u64>() {
            Ok(k) if (1..=MAX_HALO_DEPTH).contains(&k) => Ok(HaloDepth::Fixed(k)),
            _ => Err(ConfigError::HaloDepthValue(s.to_string())),
        }
    }
}

impl Serialize for HaloDepth {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HaloDepth::Fixed(k) => s.serialize_u64(*k),
            HaloDepth::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for HaloDepth {
    /// A number (any: its range is checked with the rest of the flags) or `"auto"`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Number(u64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Number(k) => Ok(HaloDepth::Fixed(k)),
            Repr::Text(t) if t == "auto" => Ok(HaloDepth::Auto),
            Repr::Text(t) => Err(serde::de::Error::custom(ConfigError::HaloDepthValue(t))),
        }
    }
}

/// Rounding floor of the relative residual, per unit of `|offset|`, on a grid of `nz` planes
/// (see [`Config::max_offset`]).
pub(crate) fn offset_floor_per_unit(nz: usize) -> f64 {
    // ‖rounding‖ ≈ K ε |C| √N over N = Gx Gy Gz points, against ‖b − A u₀‖ ≈ 0.85 √(Gx Gy)
    // (the bottom face's bump, whose mean square over the unit square is 0.73).
    OFFSET_ROUNDING * f64::EPSILON * (nz as f64).sqrt() / 0.85
}

/// K above: rounding per point of a residual whose values are about C, in units of ε |C|.
/// Measured: the relative residual at which the paper's problem stops improving with offset
/// C = 5e10 is 1.01e-4, 1.47e-4 and 2.10e-4 at 16³, 32³ and 64³ (1.10e-4 at 64³, C = 3e10);
/// K = 2 gives 1.04e-4, 1.48e-4, 2.09e-4 and 1.25e-4.
const OFFSET_ROUNDING: f64 = 2.0;

/// Make one rank's sweeps slower: a performance-defect experiment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlowRank {
    /// The rank (or shared-memory thread) to slow down.
    pub rank: usize,
    /// Its sweeps take this many times the work (1 to [`MAX_SLOWDOWN`]): after each sweep it
    /// does `factor − 1` more passes over its block, counted, as a slower core would take
    /// longer (multisplit: after each inner iteration, so a solve cut short costs only the
    /// iterations it did).
    pub factor: f64,
}

/// One run of the solver: the problem, the method, the grid, when to stop. What only one
/// method reads lives in its [`Method`].
///
/// A report stores it with its [`Method`] tagged (`method.kind`); reports of the earlier
/// schemas, which stored the method's settings flat beside `solver`, read as before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "crate::legacy::ConfigRecord")]
pub struct Config {
    /// The equation, its boundary values and starting guess.
    pub problem: Problem,
    /// The iterative method and its settings.
    pub method: Method,
    /// The grid size.
    pub size: SizeSpec,
    /// `--grid`: the process grid, instead of the one `decomp` gives.
    pub grid: Option<ProcGrid>,
    /// `--decomp`: the shape of the process grid when `--grid` is not given.
    pub decomp: Decomp,
    /// When to stop.
    pub criterion: StopCriterion,
    /// K. Krylov solvers: compute the true residual b − A x every K iterations and replace
    /// the recurrence residual when the two have drifted apart. Sync: reduce the global
    /// residual every K iterations. Async and racy over channels:
    /// with [`crate::BlockIteration::pace_reductions`], start a round of the non-blocking reduction
    /// no sooner than K iterations after the previous one started. Shared-memory async and
    /// racy: record the running residual in the history every K iterations.
    pub check_every: u64,
    /// No rank iterates more than this.
    pub max_iters: u64,
    /// Certify a convergence claim with a synchronous exchange and reduction of the true
    /// residual, and carry on when it is above tolerance (`--confirm`, the default).
    pub confirm: bool,
    /// `--slow-rank K --slowdown F`.
    pub slow: Option<SlowRank>,
}

/// Multisplitting's inner solve, resolved: the solver, its relative tolerance, its iteration
/// limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InnerSpec {
    /// The inner solver.
    pub solver: Inner,
    /// Stop when the block's residual has fallen by this factor.
    pub tol: f64,
    /// At most this many inner iterations.
    pub max: u64,
}

impl Default for Config {
    /// The paper's: Laplace, Jacobi's sync variant, 50³ per rank, relative residual below
    /// 1e-4, checked every 100 iterations, halo every iteration, R = 2.
    fn default() -> Self {
        Config::new(Problem::Laplace { offset: 0.0 }, Method::default())
    }
}

impl Config {
    /// `method` on `problem` with each method's defaults, 50³ per rank, the paper's process
    /// grid: Jacobi stops as the problem's literature does ([`Problem::default_criterion`],
    /// [`Problem::default_check_every`]); the Krylov solvers on the relative residual ‖b −
    /// A x‖₂/‖b‖₂ below 1e-8, recomputing the true residual every 100 iterations;
    /// multisplitting on the relative residual below 1e-4 on every problem (the update norm
    /// of an inner solve is not the Jacobi update the Poisson criterion measures), checked
    /// every outer iteration (each is a whole inner solve).
    pub fn new(problem: Problem, method: Method) -> Self {
        let (criterion, check_every) = match method {
            Method::Jacobi(_) => (problem.default_criterion(), problem.default_check_every()),
            Method::Krylov(_) => (StopCriterion::RelativeResidual { tol: 1e-8 }, 100),
            Method::Multisplit(_) => (StopCriterion::RelativeResidual { tol: 1e-4 }, 1),
        };
        Config {
            problem,
            method,
            size: SizeSpec::Local(Dims::cube(DEFAULT_LOCAL)),
            grid: None,
            decomp: Decomp::Paper,
            criterion,
            check_every,
            max_iters: crate::DEFAULT_MAX_ITERS,
            confirm: true,
            slow: None,
        }
    }

    /// The `--solver` value.
    pub fn solver(&self) -> Solver {
        self.method.solver()
    }

    /// The variant (the Krylov solvers are sync).
    pub fn variant(&self) -> Variant {
        self.method.variant()
    }

    /// The halo depth: k, or `auto` (k = 1 but for Jacobi with `--halo-depth`).
    pub fn halo_depth(&self) -> HaloDepth {
        match self.method {
            Method::Jacobi(j) => j.halo_depth,
            _ => HaloDepth::Fixed(1),
        }
    }

    /// The depths `--halo-depth auto` chooses from on `plan` (the sync variant; ascending,
    /// 1 first): every k up to [`MAX_HALO_DEPTH`] that a fixed `--halo-depth k` would run
    /// with (K a multiple of k, k points per rank along every split axis), thinned so that
    /// each is at least 1.5 times the one before (1, 2, 3, 5, 8, 12 of K = 120's divisors;
    /// 1, 2, 4, 10 of K = 100's): neighbouring depths cost nearly the same, and each
    /// candidate costs probe sweeps. Just `[1]` when deep halos do not apply
    /// ([`Config::auto_depth_reason`]).
    pub fn auto_depth_candidates(&self, plan: &Plan) -> Vec<u64> {
        if self.auto_depth_reason().is_some() {
            return vec![1];
        }
        let local = plan.local.to_array();
        let split = plan.procs.0.to_array();
        let fits = |k: u64| (0..3).all(|a| split[a] == 1 || local[a] as u64 >= k);
        let mut out: Vec<u64> = vec![1];
        for k in 2..=MAX_HALO_DEPTH.min(self.max_iters) {
            let last = *out.last().expect("1 is first");
            if self.check_every.is_multiple_of(k) && fits(k) && 2 * k >= 3 * last {
                out.push(k);
            }
        }
        out
    }

    /// Why `--halo-depth auto` takes k = 1 without measuring, or `None` when it measures
    /// (Jacobi's sync variant with the default exchange and a halo every iteration).
    pub fn auto_depth_reason(&self) -> Option<&'static str> {
        let Method::Jacobi(j) = self.method else {
            return Some("only Jacobi has deep halos");
        };
        if j.iteration.variant != Variant::Sync {
            Some(
                "async and racy iterates depend on k (the staleness of a deep halo), so a cost \
                 probe cannot tell which k converges sooner: k = 1",
            )
        } else if j.exchange != Exchange::Waitall {
            Some(
                "deep halos have their own exchange, not the blocking, overlapped or \
                 neighbourhood one: k = 1",
            )
        } else if j.iteration.halo_every != 1 {
            Some("deep halos need a halo every iteration (N = 1) in the sync variant: k = 1")
        } else {
            None
        }
    }
}

impl Config {
    /// Multisplitting's inner solve; `None` for every other method.
    pub fn inner_spec(&self) -> Option<InnerSpec> {
        match self.method {
            Method::Multisplit(m) => Some(m.inner),
            _ => None,
        }
    }

    /// The largest |offset| of the Laplace problem that f64 can solve to the relative
    /// tolerance on a global grid `global`, or `None` for a criterion the offset does not
    /// touch.
    ///
    /// The iterate's values are about C, so f64 rounds each of them, and each residual
    /// computed from them, by about ε|C|: over the N = Gx·Gy·Gz points the rounding leaves
    /// ‖b − A u‖ ≈ K ε|C|√N whatever the iterate (K = 2, measured), while ‖b − A u₀‖ ≈
    /// 0.85 √(Gx·Gy) (the bump on the bottom face, the same for every C). The relative
    /// residual cannot fall below their ratio, 2 ε|C|√Gz / 0.85, so C must keep it below
    /// `tol`. Beyond about 2⁵³ even the
    /// bump is lost (C + bump = C): the first residual is 0 and the run would "converge"
    /// without an iteration.
    pub fn max_offset(&self, global: Dims) -> Option<f64> {
        match (self.problem, self.criterion) {
            (Problem::Laplace { .. }, StopCriterion::RelativeResidual { tol }) => {
                Some(tol / offset_floor_per_unit(global.z))
            }
            _ => None,
        }
    }

    /// The slowdown factor of `rank` (1 when it is not the slow rank).
    pub(crate) fn slowdown_of(&self, rank: usize) -> f64 {
        match self.slow {
            Some(s) if s.rank == rank => s.factor,
            _ => 1.0,
        }
    }
}
