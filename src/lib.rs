//! # aiac: Asynchronous Iterations, Asynchronous Communications
//!
//! Safe, typed asynchronous communication channels for HPC, and the iterative solvers built on
//! them. This umbrella crate re-exports the workspace's crates: the channel model (chan-core)
//! at its root, the threads backend as [`threads`], the solvers as [`jacobi`], and with the
//! `mpi` and `shmem` features the backends over Open MPI and OpenSHMEM as `mpi` and `shmem`.
//! `use aiac::traits::*;` brings every trait into scope.

#![warn(missing_docs)]

/// Derive `bytemuck::Pod` and `Zeroable` on a `#[repr(C)]` struct to send it ([`Element`]).
pub use chan_core::bytemuck;
pub use chan_core::{
    close_all, Async, AtomicF64, AtomicF64Slice, Backend, Channel, ChannelConfig, ChannelSpec,
    ChannelStats, CommError, Context, CreateError, Element, ElementType, Message, Mode, ModeKind,
    Racy, RacyElement, RacyView, RecvError, ReduceOp, Reduction, SpecField, Sync, TreeReduction,
    TrySendError,
};
/// One-sided communication: symmetric windows of 8-byte words.
pub use chan_core::{
    Epoch, Flushed, IntWord, PendingGet, PendingWord, Window, WindowError, Windows, Word,
};

/// The hooks a backend implements (chan-core's `backend`), the agreed sets of the creation
/// handshake every backend shares, and the one-sided transport.
pub use chan_core::backend;
/// The MPI backend (chan-mpi), with the `mpi` feature.
#[cfg(feature = "mpi")]
pub use chan_mpi as mpi;
/// The OpenSHMEM backend (chan-shmem), with the `shmem` feature.
#[cfg(feature = "shmem")]
pub use chan_shmem as shmem;
/// The threads backend (chan-threads): the embedded default, no system library.
pub use chan_threads as threads;
/// The solvers (jacobi): the paper's Jacobi over any backend, and the shared-memory variants.
pub use jacobi;

/// Every trait of aiac: `use aiac::traits::*;`.
pub mod traits {
    pub use chan_core::traits::*;
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
