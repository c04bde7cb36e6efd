//! # aiac: Asynchronous Iterations, Asynchronous Communications
//!
//! Safe, typed asynchronous communication channels for HPC, and the iterative solvers built on
//! them. This umbrella crate re-exports the workspace's crates; `use aiac::traits::*;` brings
//! every trait into scope.

pub use chan_core as core;
pub use chan_core::{
    close_all, threads, Async, AtomicF64, AtomicF64Slice, Channel, ChannelConfig, ChannelSpec,
    ChannelStats, CommError, Context, CreateError, Message, Mode, ModeKind, Racy, RecvError,
    ReduceOp, Reduction, Sync, TreeReduction, TrySendError,
};

/// Every trait of aiac.
pub mod traits {
    pub use chan_core::traits::*;
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
