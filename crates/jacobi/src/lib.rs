//! # jacobi: the paper's solver, written once over every backend
//!
//! The 3-D Jacobi iteration of Bethune, Bull, Dingle and Higham, *Performance analysis of
//! asynchronous Jacobi's method implemented in MPI, SHMEM and OpenMP* (IJHPCA 28(1), 2014):
//! Laplace's equation on the unit cube with the 7-point stencil, in three forms
//! ([`Variant`]):
//!
//! * **sync**: halo swap every N iterations over Sync channels, global residual every K (the
//!   paper's Figure 1);
//! * **async**: each iteration takes the newest whole halo message, sweeps, offers its faces
//!   with `try_send` (at most R in flight) and tests a non-blocking reduction;
//! * **racy**: the same, reading the halo through the racy channel's atomic view.
//!
//! Beside Jacobi, the same entry points run the Krylov solvers ([`Method::Krylov`]): CG, CG
//! with the halo exchange overlapped, and pipelined CG with one non-blocking reduction per
//! iteration (Hoefler et al.; Ghysels and Vanroose), with an optional Jacobi preconditioner
//! ([`Krylov::pc`]), over the same channels; and multisplitting (Bethune et al. §6.4:
//! [`Method::Multisplit`]), where each rank solves its block with an inner solver
//! ([`Multisplit::inner`]) in the sync, async and racy loops of Jacobi, certified the same way.
//! A [`Method`] holds only the settings its method reads; [`Config::new`] gives each
//! method's defaults (its stopping criterion and check period).
//!
//! The API is small: a [`Config`] (with its [`Problem`], [`Method`] and [`StopCriterion`]), one
//! entry point, the builder [`Solve`], and what it returns: a [`RankRecord`] per rank,
//! gathered to rank 0 with [`gather_records`] and summarised in a [`Report`].
//! [`Solve::run`] is generic over chan-core's [`chan_core::Context`], so the same code runs
//! over threads, MPI and SHMEM; [`Solve::run_shared`] runs the shared-memory variants of the
//! paper's OpenMP section on threads of this process, on the same loops. Optional pieces are
//! one call each: a decomposition computed once ([`Solve::plan`], from [`Config::plan`] or
//! [`Config::shared_plan`]), a [`Progress`] hook ([`Solve::hook`]), hybrid ranks
//! ([`Solve::team`]) and a sparse system instead of the grid ([`Solve::system`]). Async and
//! racy runs **certify** a convergence claim with a synchronous halo swap and reduction of
//! the true residual before they stop ([`Config::confirm`]); aiac never reports converged
//! with the true residual above tolerance.
//!
//! ```
//! use chan_threads::World;
//! use jacobi::{Config, Dims, Jacobi, SizeSpec, Solve, Variant};
//!
//! let cfg = Config {
//!     method: Jacobi::new(Variant::Async).into(),
//!     size: SizeSpec::Global(Dims::cube(8)),
//!     ..Config::default()
//! };
//! let records = World::new(2)
//!     .unwrap()
//!     .run(|ctx| Solve::new(&cfg).run(ctx).unwrap());
//! assert!(records.iter().all(|r| r.converged && r.residual.true_residual < 1e-4));
//! ```

#![warn(missing_docs)]

mod clock;
mod config;
mod deep;
mod dispatch;
mod error;
mod field;
mod geometry;
mod halo;
mod hybrid;
mod iterate;
mod kernel;
mod krylov;
mod krylov_bench;
mod lane;
mod legacy;
mod linalg;
mod memory;
mod method;
mod multisplit;
mod parts;
mod precond;
mod problem;
mod progress;
mod record;
/// The serial oracle (reference kernels on the whole grid) of the crate's own tests.
#[cfg(test)]
mod serial;
mod settings;
mod shared;
mod single;
mod slow;
mod solve;
mod solver;
pub mod sparse;
mod start;
mod team;
#[cfg(test)]
mod tests;

pub use clock::{set_clock, set_compute_hook, CostModel, Work};
pub use config::{
    Config, ConfigError, Decomp, Detect, Exchange, HaloDepth, Inner, InnerSpec, Pc, PcSub,
    RacyRead, ReductionKind, SizeSpec, SlowRank, Solver, Variant, DEFAULT_INNER_MAX,
    DEFAULT_INNER_TOL, DEFAULT_LOCAL, DEFAULT_SLOWDOWN, MAX_HALO_DEPTH, MAX_SLOWDOWN, MIN_TOL,
};
pub use dispatch::SystemBlock;
pub use error::Error;
pub use geometry::{Dims, Plan, ProcGrid};
pub use hybrid::{RankTeam, MAX_THREADS_PER_RANK};
pub use memory::{human_bytes, MemoryNeed};
pub use method::{
    BlockIteration, Jacobi, Krylov, KrylovSolver, Method, Multisplit, DEFAULT_HALO_EVERY,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_ITERS, DEFAULT_RESTART, MAX_RESTART,
};
pub use problem::{Problem, StopCriterion};
pub use progress::{History, HistoryPoint, Progress, ProgressSample};
pub use record::{
    gather_records, Breakdown, Certification, DepthProbe, HaloAuto, KrylovRecord, MatrixInfo,
    MessageTotals, MultisplitRecord, RankRecord, Report, ReportResiduals, Residuals, RunConfig,
    Spread, StopReason, REPORT_SCHEMA, REPORT_SCHEMA_V1, REPORT_SCHEMA_V2, REPORT_SCHEMA_V3,
};
pub use settings::{
    check_given, Applies, Backend, Context, DepthConflict, Limit, Named, Names, NotApplicable,
    Operator, Scope, Setting, Words,
};
pub use solve::{assemble, Grid, Solve, System};
pub use start::{Checkpoint, Saved, Start};

/// The stencil kernels, for the criterion benchmarks in `benches/` only: not part of the API.
#[doc(hidden)]
pub mod bench_api {
    pub use crate::kernel::{
        step, step_region, sweep, sweep_reference, sweep_then_copy, Grid, Region, Shape,
    };
    pub use crate::krylov_bench::KrylovBlock;
}
