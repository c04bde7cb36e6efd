//! What a run reports: one [`RankRecord`] per rank, gathered to rank 0 over any backend, and
//! the run's [`Report`] (the paper's table, and the JSON document of `aiac run --json`).

use crate::config::{Config, ReductionKind};
use crate::geometry::{Dims, Plan};
use crate::progress::History;
use crate::Error;
use chan_core::{ChannelStats, Context};
use serde::{Deserialize, Serialize};

/// Why a rank stopped iterating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The solver's own test said converged (certified when `confirm` is on).
    Criterion,
    /// `max_iters` reached (by this rank, or by another in async/racy runs).
    MaxIters,
    /// A Krylov solver broke down (a curvature `p·Ap ≤ 0`, `r·z ≤ 0`, or NaN): the problem
    /// is not symmetric positive definite. [`KrylovRecord::breakdown`] says what failed.
    Breakdown,
    /// The residual grew past 1e20 times its start, or became infinite or NaN: Jacobi or
    /// multisplitting diverges on this system (a matrix they do not converge for). Every
    /// rank stops at the check or reduction round that saw it, not at `max_iters`.
    Diverged,
}

impl StopReason {
    /// `criterion`, `max_iters`, `breakdown` or `diverged`, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Criterion => "criterion",
            StopReason::MaxIters => "max_iters",
            StopReason::Breakdown => "breakdown",
            StopReason::Diverged => "diverged",
        }
    }
}

/// Read a number that a run may have left not finite: JSON has no NaN or infinity, so
/// serde_json writes them as `null`, read back here as NaN (a diverged run's residual, a
/// norm that overflowed). Every such field is read through it: a record or report that holds
/// one is read back, typed, instead of failing as "invalid type: null, expected f64".
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Residuals of a run, relative as the criterion measures them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    /// The last value the solver's own test saw: a sync check, or a round of the
    /// non-blocking reduction (computed from halos that may be stale). None before any.
    pub reported: Option<f64>,
    /// The true residual of the final global iterate, after a synchronous halo swap (NaN,
    /// `null` in JSON, when it is not finite: a diverged run).
    #[serde(rename = "true", deserialize_with = "nan_if_null")]
    pub true_residual: f64,
    /// The denominator of the relative residual: ‖b − A u_0‖₂ (Jacobi), ‖b‖₂ (Krylov
    /// solvers, PETSc's default test with x₀ = 0).
    #[serde(deserialize_with = "nan_if_null")]
    pub initial_norm: f64,
}

/// One certification of a convergence claim (`--confirm`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    /// The rank's iteration when it certified.
    pub iteration: u64,
    /// The value that claimed convergence.
    pub reported: Option<f64>,
    /// The true residual found (NaN when not finite).
    #[serde(deserialize_with = "nan_if_null")]
    pub true_residual: f64,
    /// True when it met the criterion (the run stopped).
    pub accepted: bool,
}

/// Message counts summed over a rank's channels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageTotals {
    /// Messages sent.
    pub sent: u64,
    /// `try_send`s skipped because all R slots were busy.
    pub skipped: u64,
    /// Messages received.
    pub received: u64,
    /// Messages discarded unread because a newer one arrived.
    pub superseded: u64,
}

impl MessageTotals {
    /// Add one channel's counts.
    pub(crate) fn add(&mut self, s: &ChannelStats) {
        self.sent += s.sent;
        self.skipped += s.skipped;
        self.received += s.received;
        self.superseded += s.superseded;
    }
}

/// What one rank did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankRecord {
    /// The rank (or shared-memory thread).
    pub rank: usize,
    /// `threads`, `shared`, `mpi`, `shmem`.
    pub backend: String,
    /// Position in the process grid.
    pub coords: [usize; 3],
    /// Points owned.
    pub local: Dims,
    /// Sweeps done.
    pub iterations: u64,
    /// Wall time of the solve (initial residual to final residual), seconds.
    pub time_s: f64,
    /// Time in sweeps (and the slow rank's extra passes), seconds.
    pub compute_s: f64,
    /// Time in halo exchange, reductions and certification, seconds.
    pub comm_s: f64,
    /// Where the solve's time went, part by part ([`Breakdown`]): `sweep_s` is
    /// [`RankRecord::compute_s`], the communication parts sum to [`RankRecord::comm_s`].
    /// `None` for the shared-memory backend (no messages to time) and in reports written
    /// before it was measured.
    #[serde(default)]
    pub breakdown: Option<Breakdown>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The true final residual meets the criterion.
    pub converged: bool,
    /// Reported and true residuals.
    pub residual: Residuals,
    /// Rounds of the non-blocking reduction completed (async, racy); Krylov solvers: the
    /// iterations' global reductions (cg: two per iteration, pipecg: one per iteration and
    /// the one that saw convergence).
    pub reductions: u64,
    /// Async and racy runs over channels: the rounds of the convergence detection
    /// (`config.detect`) completed: reduction rounds, snapshots reduced, or non-blocking
    /// barriers completed. `None` for the other runs and in reports written before it was
    /// recorded.
    #[serde(default)]
    pub detect_rounds: Option<u64>,
    /// Every certification, in order.
    pub certifications: Vec<Certification>,
    /// The convergence profile: `(iteration, residual, time_s)` at every check (sync), every
    /// completed reduction round (async, racy), every `check_every` iterations (shared-memory
    /// async, racy); thinned evenly beyond [`History::CAP`] points.
    pub history: History,
    /// Message counts over all channels.
    pub messages: MessageTotals,
    /// chan-core's statistics of each channel (halo channels, then certification channels).
    pub channels: Vec<ChannelStats>,
    /// The largest |u − exact| over this rank's points at the end, where the problem has an
    /// exact solution.
    #[serde(default)]
    pub error_max: Option<f64>,
    /// What a Krylov solver adds (`None` for Jacobi).
    #[serde(default)]
    pub krylov: Option<KrylovRecord>,
    /// What multisplitting adds (`None` for the other solvers); its outer iterations are
    /// [`RankRecord::iterations`].
    #[serde(default)]
    pub multisplit: Option<MultisplitRecord>,
    /// What `--halo-depth auto` measured and chose (`None` for a fixed depth).
    #[serde(default)]
    pub halo_auto: Option<HaloAuto>,
    /// The steps of the first overlapped halo exchange, in the order they happened (sync
    /// `--exchange overlap`): this rank's own diagnostic, not gathered.
    #[serde(skip)]
    pub(crate) exchange_trace: Vec<ExchangeStep>,
}

/// Where a rank's solve time went, part by part, as Bethune, Bull, Dingle and Higham profile
/// the iterations of their Jacobi implementations (*Performance analysis of asynchronous
/// Jacobi's method implemented in MPI, SHMEM and OpenMP*, IJHPCA 28(1), 2014): seconds over
/// the solve, or (in [`Report::breakdown_per_iteration`]) per iteration. `T` is `f64` for one
/// rank, [`Spread`] over ranks in [`Report::breakdown`].
///
/// The parts are disjoint stretches of the solve, each timed where it happens with the
/// solvers' clock; `other_s` is the rest of the solve time (bookkeeping, the convergence
/// test, timer reads). Multisplitting's sends and polls made during its inner solve count in
/// its sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown<T = f64> {
    /// Computation: sweeps (multisplit: inner solves; Krylov: the matrix-vector products,
    /// vector updates and dot products), residuals, the slow rank's extra passes.
    pub sweep_s: T,
    /// Copying faces into outgoing messages.
    pub pack_s: T,
    /// Copying received faces into the halo.
    pub unpack_s: T,
    /// Posting or offering messages (`send_with`, `try_send_with`), pack excluded (and a
    /// sync send's wait for a free slot, which is wait).
    pub send_s: T,
    /// Waiting for the neighbours: blocking receives of their halos (sync), polling for new
    /// messages (async, racy), a sync send's wait for a free slot (the neighbour has not
    /// taken an earlier message yet), a blocking exchange's wait for its send to be taken.
    pub wait_s: T,
    /// Global reductions: the blocking all-reduce of the residual, and starting and testing
    /// non-blocking reductions (async, racy, pipecg: its test between planes and its wait).
    pub reduce_s: T,
    /// The solve time not in any part above.
    pub other_s: T,
}

impl Breakdown {
    /// The communication parts: pack, unpack, send, wait and reduce (what `comm_s` is).
    pub fn comm_s(&self) -> f64 {
        self.pack_s + self.unpack_s + self.send_s + self.wait_s + self.reduce_s
    }

    /// Every part, `other_s` included, in field order.
    pub fn parts(&self) -> [f64; 7] {
        [
            self.sweep_s,
            self.pack_s,
            self.unpack_s,
            self.send_s,
            self.wait_s,
            self.reduce_s,
            self.other_s,
        ]
    }

    /// The breakdown of these parts, in field order.
    fn from_parts(
        [sweep_s, pack_s, unpack_s, send_s, wait_s, reduce_s, other_s]: [f64; 7],
    ) -> Self {
        Breakdown {
            sweep_s,
            pack_s,
            unpack_s,
            send_s,
            wait_s,
            reduce_s,
            other_s,
        }
    }

    /// The breakdown whose parts are `f` of this one's and `other`'s.
    fn zip(&self, other: &Self, f: impl Fn(f64, f64) -> f64) -> Self {
        let (a, b) = (self.parts(), other.parts());
        Self::from_parts(std::array::from_fn(|k| f(a[k], b[k])))
    }

    /// The part names, in field order, without `_s`.
    pub const NAMES: [&'static str; 7] =
        ["sweep", "pack", "unpack", "send", "wait", "reduce", "other"];
}

impl Breakdown<Spread> {
    /// Each part over `parts` (at least one).
    fn over(parts: &[Breakdown]) -> Self {
        let of = |k: usize| Spread::of(parts.iter().map(|b| b.parts()[k]));
        Breakdown {
            sweep_s: of(0),
            pack_s: of(1),
            unpack_s: of(2),
            send_s: of(3),
            wait_s: of(4),
            reduce_s: of(5),
            other_s: of(6),
        }
    }
}

/// What one rank of a Krylov solve did beyond the common record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KrylovRecord {
    /// Σ over the run's global reductions of the time each was in flight: from its start to
    /// the moment this rank saw its result (blocking all-reduces: the time in the call).
    pub reduce_flight_s: f64,
    /// Σ of the time this rank spent inside the reductions' calls (`test`, `wait`, the
    /// blocking all-reduce). `1 − wait/flight` is the share hidden behind computation.
    pub reduce_wait_s: f64,
    /// True residuals computed during the solve (every `check_every` iterations and at
    /// every convergence claim).
    pub true_residual_checks: u64,
    /// Residual replacements (r ← b − A x) done.
    pub replacements: u64,
    /// What broke down, and at which iteration, when the run stopped on a breakdown.
    pub breakdown: Option<String>,
}

impl KrylovRecord {
    /// The share of the reductions' flight time this rank did not spend waiting (0 for
    /// blocking reductions; `None` without reductions).
    pub fn hidden(&self) -> Option<f64> {
        (self.reduce_flight_s > 0.0)
            .then(|| (1.0 - self.reduce_wait_s / self.reduce_flight_s).clamp(0.0, 1.0))
    }
}

/// What one rank of a multisplit solve did beyond the common record: its inner iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultisplitRecord {
    /// Inner iterations (CG iterations or Jacobi sweeps of the block) over the whole run.
    pub inner_iterations: u64,
    /// Inner iterations per outer iteration, on average (0 without outer iterations).
    pub inner_per_outer: f64,
    /// The fewest inner iterations of one outer iteration (0 without outer iterations).
    pub inner_fewest: u64,
    /// The most inner iterations of one outer iteration.
    pub inner_most: u64,
    /// Inner solves cut short because every neighbour had sent new faces since the solve
    /// began (async and racy only; 0 in reports written before it was counted).
    #[serde(default)]
    pub inner_cut_short: u64,
    /// Times this rank sent its faces mid-solve to a neighbour that waited for them (async
    /// and racy only: the two had been taking turns; 0 in reports written before it was
    /// counted).
    #[serde(default)]
    pub faces_sent_mid_solve: u64,
}

/// What `--halo-depth auto` measured before the solve and the depth it chose
/// (`deep/mod.rs`, "Choosing k"). Every rank chose the same k from the same values: each
/// candidate's costs are the largest over ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HaloAuto {
    /// The halo depth k the run used.
    pub chosen: u64,
    /// Why k = 1 was taken without measuring (async and racy, another exchange, …); `None`
    /// when the candidates were measured.
    pub reason: Option<String>,
    /// Each candidate measured, in the order tried (ascending k; the deeper ones are left
    /// out once two in a row are 25% slower than the best so far).
    pub candidates: Vec<DepthProbe>,
    /// Wall time of the whole probe on this rank (channels, scratch blocks, timed sweeps),
    /// seconds: spent before the solve, so not in `time_s`.
    pub probe_s: f64,
}

impl HaloAuto {
    /// One line for people: the choice, and what it was chosen from (or why nothing was
    /// measured).
    pub fn summary(&self) -> String {
        match &self.reason {
            Some(why) => format!("k = {} ({why})", self.chosen),
            None => {
                let each: Vec<String> = self
                    .candidates
                    .iter()
                    .map(|p| format!("k={} {:.1}", p.k, p.iteration_s * 1e6))
                    .collect();
                format!(
                    "k = {} (µs per iteration, slowest rank: {}; probe {:.3} s, before the solve)",
                    self.chosen,
                    each.join(", "),
                    self.probe_s
                )
            }
        }
    }
}

/// One candidate depth as `--halo-depth auto` measured it: exchanges and blocks of k sweeps
/// on a scratch block of this run's shape, over channels of this run's messages, after
/// one warm-up exchange and sweep. Times are per iteration (per sweep), the slowest rank's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DepthProbe {
    /// The depth.
    pub k: u64,
    /// Sweeps timed.
    pub sweeps: u64,
    /// Seconds per iteration, exchange and sweeps: what the choice minimises.
    pub iteration_s: f64,
    /// Of which sweeping (the largest over ranks).
    pub sweep_s: f64,
    /// Of which exchanging, waiting for the neighbours included (the largest over ranks).
    pub exchange_s: f64,
    /// Points swept per owned point and iteration, the ghost zone's redundant sweeps
    /// included: 1 without neighbours (the largest over ranks).
    pub work: f64,
}

/// A step of an overlapped halo exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExchangeStep {
    /// Every face's send started.
    Posted,
    /// The interior swept (no halo value read).
    InteriorSwept,
    /// Every face's message received and unpacked.
    HalosArrived,
    /// The boundary shell swept.
    ShellSwept,
}

/// Gather every rank's record to rank 0 (collective): `Some(records in rank order)` on rank 0,
/// `None` elsewhere. Each record travels as its JSON with [`Context::gather_bytes`] and is
/// decoded, typed, at rank 0 (its channel statistics included).
pub fn gather_records<C: Context>(
    ctx: &mut C,
    record: &RankRecord,
) -> Result<Option<Vec<RankRecord>>, Error> {
    let bytes = serde_json::to_vec(record).map_err(|e| Error::Gather(e.to_string()))?;
    let Some(all) = ctx.gather_bytes(&bytes)? else {
        return Ok(None);
    };
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|e| Error::Gather(format!("record of rank {r}: {e}")))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// min / mean / max over ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(v: impl Iterator<Item = f64> + Clone) -> Self {
        let n = v.clone().count().max(1) as f64;
        Spread {
            min: v.clone().fold(f64::INFINITY, f64::min),
            mean: v.clone().sum::<f64>() / n,
            max: v.fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// The resolved configuration of a run, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// `threads`, `shared`, `mpi`, `shmem`.
    pub backend: String,
    /// Number of ranks (threads).
    pub ranks: usize,
    /// Workers sweeping each rank's block (`--threads-per-rank`, hybrid ranks); 1 in
    /// reports written before it existed, and on the threads and shared backends.
    #[serde(default = "one_thread")]
    pub threads_per_rank: usize,
    /// Global interior points per axis.
    pub global: Dims,
    /// Points per rank.
    pub local: Dims,
    /// Process grid actually used.
    pub process_grid: Dims,
    /// The algorithm of the non-blocking reduction (what async and racy runs test).
    pub reduction: ReductionKind,
    /// The configuration as given.
    #[serde(flatten)]
    pub config: Config,
    /// A `--matrix` run's system (`None` for the grid's problems, and in reports written
    /// before it existed; then `global`, `local` and `process_grid` are the grid's, else n
    /// × 1 × 1, the most rows of a rank, ranks × 1 × 1).
    #[serde(default)]
    pub matrix: Option<MatrixInfo>,
}

/// [`RunConfig::threads_per_rank`] of a report that does not have it.
fn one_thread() -> usize {
    1
}

/// The sparse system of a `--matrix` run, as the report records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixInfo {
    /// The Matrix Market file.
    pub file: String,
    /// The right-hand side's file; `None`: b = A·1, whose solution is 1 (the record's
    /// `error_max` measures against it).
    pub rhs: Option<String>,
    /// The order n.
    pub n: usize,
    /// Nonzeros stored (a symmetric file's triangle expanded, duplicates summed).
    pub nnz: u64,
    /// The file's symmetry: `general`, `symmetric` or `skew-symmetric`.
    pub kind: String,
    /// A = Aᵀ, as checked.
    pub symmetric: bool,
    /// Every row weakly diagonally dominant (|a_ii| ≥ Σ_{j≠i} |a_ij|) and one strictly
    /// ([`crate::sparse::Csr::diagonally_dominant`]): with an irreducible pattern, Jacobi
    /// converges in every variant. Without it, convergence is not guaranteed.
    pub diagonally_dominant: bool,
    /// Each rank's first row, then n: the contiguous row blocks, balanced by nonzeros.
    pub row_bounds: Vec<usize>,
    /// How the ranks stored their rows for the kernels ([`crate::sparse::StorageInfo::NAMES`],
    /// `mixed` when the ranks took different ones); `None` in a report from before.
    #[serde(default)]
    pub storage: Option<String>,
    /// The stored matrix's bytes (row pointers, columns, values, tables) per entry, over
    /// every rank: 12 and a bit for CSR.
    #[serde(default)]
    pub bytes_per_entry: Option<f64>,
}

impl RunConfig {
    /// The configuration of a run of `cfg` on `backend` over `ranks` ranks, decomposed as
    /// `plan` says, its non-blocking reductions built as `reduction`.
    pub fn new(
        backend: &str,
        ranks: usize,
        plan: &Plan,
        cfg: &Config,
        reduction: ReductionKind,
    ) -> Self {
        RunConfig {
            backend: backend.to_string(),
            ranks,
            threads_per_rank: 1,
            global: plan.global,
            local: plan.local,
            process_grid: plan.procs.0,
            reduction,
            config: cfg.clone(),
            matrix: None,
        }
    }

    /// The configuration of a run of `cfg` over the sparse system `matrix` (its row blocks
    /// one per rank).
    pub fn of_matrix(
        backend: &str,
        cfg: &Config,
        reduction: ReductionKind,
        matrix: MatrixInfo,
    ) -> Self {
        let ranks = matrix.row_bounds.len() - 1;
        let most = matrix
            .row_bounds
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0);
        RunConfig {
            backend: backend.to_string(),
            ranks,
            threads_per_rank: 1,
            global: Dims::new(matrix.n, 1, 1),
            local: Dims::new(most, 1, 1),
            process_grid: Dims::new(ranks, 1, 1),
            reduction,
            config: cfg.clone(),
            matrix: Some(matrix),
        }
    }
}

/// The `schema` of [`Report`]'s JSON document (`aiac run --json`): bumped whenever a field
/// changes meaning or goes away (adding fields keeps it). `aiac.run/4` stores the method
/// itself, tagged (`config.method`, `config.method.kind`), where the earlier schemas stored its
/// settings flat beside `config.solver`.
pub const REPORT_SCHEMA: &str = "aiac.run/4";

/// Multisplitting's schema, which `aiac report` still reads: `iterations` are its outer
/// iterations, `inner_iterations`, `inner_per_outer`, `ranks[].multisplit`, and the method's
/// settings flat beside `config.solver` (`config.inner`, `config.inner_tol`, …).
pub const REPORT_SCHEMA_V3: &str = "aiac.run/3";

/// The schema before multisplitting, which `aiac report` still reads (its runs are Jacobi
/// or Krylov runs, so the new fields are absent).
pub const REPORT_SCHEMA_V2: &str = "aiac.run/2";

/// The earlier schema `aiac report` still reads: `aiac.run/1`, written before the Krylov
/// solvers (no `config.solver`, `config.pc`, `ranks[].krylov`; `stop` never `breakdown`).
pub const REPORT_SCHEMA_V1: &str = "aiac.run/1";

/// The report of one run: what rank 0 prints and writes. Its JSON form is documented field
/// by field in `docs/json-schema.md`. `aiac run` writes every file from this value and
/// `aiac report` reads it back as the same type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_SCHEMA`].
    pub schema: String,
    /// The true final residual meets the criterion (on every rank: it is one global value).
    pub converged: bool,
    /// Why the run stopped.
    pub stop: StopReason,
    /// Iterations over ranks (multisplit: outer iterations).
    pub iterations: Spread,
    /// Multisplit: inner iterations over the run, over ranks (`None` for other solvers).
    #[serde(default)]
    pub inner_iterations: Option<Spread>,
    /// Multisplit: inner iterations per outer iteration, over ranks.
    #[serde(default)]
    pub inner_per_outer: Option<Spread>,
    /// Wall time of the solve: the slowest rank's, seconds.
    pub time_s: f64,
    /// Point updates per second: Σ over ranks of iterations × points owned, over `time_s`.
    pub updates_per_s: f64,
    /// Reported (rank 0's last test) and true final residual.
    pub residual: ReportResiduals,
    /// Tolerance.
    pub tol: f64,
    /// Compute and communication time over ranks, seconds.
    pub compute_s: Spread,
    /// Communication time over ranks, seconds.
    pub comm_s: Spread,
    /// Where the solve time went ([`Breakdown`]), each part over ranks, seconds; `None`
    /// when a rank has no breakdown (`ranks[].breakdown`).
    #[serde(default)]
    pub breakdown: Option<Breakdown<Spread>>,
    /// Each part per iteration: a rank's part over its iterations (at least one), the
    /// mean over ranks, seconds.
    #[serde(default)]
    pub breakdown_per_iteration: Option<Breakdown>,
    /// Messages summed over ranks.
    pub messages: MessageTotals,
    /// Certifications done (rank 0's list; every rank certifies together).
    pub certifications: Vec<Certification>,
    /// Rank 0's convergence profile (see [`RankRecord::history`]).
    pub history: History,
    /// The largest |u − exact| over the whole grid at the end, where the problem has an exact
    /// solution (Poisson).
    pub error_max: Option<f64>,
    /// What `--halo-depth auto` measured and chose (rank 0's record; every rank chose the
    /// same k from the same values). `None` for a fixed depth.
    #[serde(default)]
    pub halo_auto: Option<HaloAuto>,
    /// The run's configuration.
    pub config: RunConfig,
    /// One record per rank.
    pub ranks: Vec<RankRecord>,
}

/// Residuals of the report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReportResiduals {
    /// Rank 0's last reported value.
    pub reported: Option<f64>,
    /// The true final residual (NaN, `null` in JSON, when not finite: a diverged run).
    #[serde(rename = "true", deserialize_with = "nan_if_null")]
    pub true_residual: f64,
}

impl Report {
    /// Summarise the records of every rank (in rank order; at least one) of the run `config`
    /// describes.
    pub fn new(config: RunConfig, ranks: Vec<RankRecord>) -> Self {
        assert!(!ranks.is_empty(), "a report needs at least one rank");
        assert_eq!(config.ranks, ranks.len(), "one record per rank");
        let cfg = &config.config;
        let r0 = &ranks[0];
        let time_s = ranks.iter().map(|r| r.time_s).fold(0.0, f64::max);
        let updates: f64 = ranks
            .iter()
            .map(|r| r.iterations as f64 * r.local.volume() as f64)
            .sum();
        let mut messages = MessageTotals::default();
        for r in &ranks {
            messages.sent += r.messages.sent;
            messages.skipped += r.messages.skipped;
            messages.received += r.messages.received;
            messages.superseded += r.messages.superseded;
        }
        let breakdowns: Option<Vec<Breakdown>> = ranks.iter().map(|r| r.breakdown).collect();
        let stop = if ranks.iter().any(|r| r.stop == StopReason::Breakdown) {
            StopReason::Breakdown
        } else if ranks.iter().any(|r| r.stop == StopReason::Diverged) {
            StopReason::Diverged
        } else if ranks.iter().all(|r| r.stop == StopReason::Criterion) {
            StopReason::Criterion
        } else {
            StopReason::MaxIters
        };
        Report {
            schema: REPORT_SCHEMA.to_string(),
            converged: ranks.iter().all(|r| r.converged),
            stop,
            iterations: Spread::of(ranks.iter().map(|r| r.iterations as f64)),
            inner_iterations: ranks.iter().all(|r| r.multisplit.is_some()).then(|| {
                Spread::of(
                    ranks
                        .iter()
                        .filter_map(|r| r.multisplit.as_ref())
                        .map(|m| m.inner_iterations as f64),
                )
            }),
            inner_per_outer: ranks.iter().all(|r| r.multisplit.is_some()).then(|| {
                Spread::of(
                    ranks
                        .iter()
                        .filter_map(|r| r.multisplit.as_ref())
                        .map(|m| m.inner_per_outer),
                )
            }),
            time_s,
            updates_per_s: if time_s > 0.0 { updates / time_s } else { 0.0 },
            residual: ReportResiduals {
                reported: r0.residual.reported,
                true_residual: r0.residual.true_residual,
            },
            tol: cfg.criterion.tol(),
            compute_s: Spread::of(ranks.iter().map(|r| r.compute_s)),
            comm_s: Spread::of(ranks.iter().map(|r| r.comm_s)),
            breakdown: breakdowns.as_deref().map(Breakdown::over),
            breakdown_per_iteration: breakdowns.map(|bs| {
                let n = bs.len() as f64;
                let mut mean = Breakdown::default();
                for (b, r) in bs.iter().zip(&ranks) {
                    let per = r.iterations.max(1) as f64;
                    mean = mean.zip(b, |m, v| m + v / per / n);
                }
                mean
            }),
            messages,
            certifications: r0.certifications.clone(),
            history: r0.history.clone(),
            error_max: ranks
                .iter()
                .map(|r| r.error_max)
                .try_fold(0.0f64, |m, e| e.map(|e| m.max(e))),
            halo_auto: r0.halo_auto.clone(),
            config,
            ranks,
        }
    }

    /// `converged`; `max_iters` (stopped at `--max-iters`); `not_converged` (a convergence
    /// claim the true residual did not confirm, possible with `--no-confirm`); or
    /// `breakdown` (a Krylov solver broke down); `diverged` (the residual grew past 1e20 of
    /// its start).
    pub fn status(&self) -> &'static str {
        match (self.converged, self.stop) {
            (true, _) => "converged",
            (false, StopReason::MaxIters) => "max_iters",
            (false, StopReason::Criterion) => "not_converged",
            (false, StopReason::Breakdown) => "breakdown",
            (false, StopReason::Diverged) => "diverged",
        }
    }

    /// The share of the global reductions' flight time hidden behind computation, over every
    /// rank (`1 − Σ wait / Σ flight`): `None` for a solver that reports none (Jacobi).
    pub fn reductions_hidden(&self) -> Option<f64> {
        let (mut flight, mut wait) = (0.0, 0.0);
        for k in self.ranks.iter().filter_map(|r| r.krylov.as_ref()) {
            flight += k.reduce_flight_s;
            wait += k.reduce_wait_s;
        }
        (flight > 0.0).then(|| (1.0 - wait / flight).clamp(0.0, 1.0))
    }

    /// Iterations per second: the mean iterations over ranks over the solve time.
    pub fn iteration_rate(&self) -> f64 {
        if self.time_s > 0.0 {
            self.iterations.mean / self.time_s
        } else {
            0.0
        }
    }
}

mod table;

#[cfg(test)]
mod test;
