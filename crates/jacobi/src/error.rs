//! Why a run failed: one error type for every entry point.

use crate::config::ConfigError;
use chan_core::{CommError, CreateError, RecvError, ReduceError, SendError};

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: the message names the setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Channels or a reduction could not be created.
    #[error("creating channels: {0}")]
    Create(#[from] CreateError),
    /// The transport failed.
    #[error("communication failed: {0}")]
    Comm(#[from] CommError),
    /// A receive failed.
    #[error("receive failed: {0}")]
    Recv(#[from] RecvError),
    /// A blocking send failed.
    #[error("send failed: {0}")]
    Send(#[from] SendError),
    /// A reduction failed.
    #[error("reduction failed: {0}")]
    Reduce(#[from] ReduceError),
    /// Gathering the per-rank records failed.
    #[error("gathering per-rank records: {0}")]
    Gather(String),
    /// The preconditioner could not be set up (a factorisation failed): the message names
    /// the rank and the row.
    #[error("{0}")]
    Precond(String),
    /// The start iterate does not fit the run (the message says how).
    #[error("the start iterate: {0}")]
    Start(String),
    /// A checkpoint could not be kept (rank 0's message).
    #[error("the checkpoint: {0}")]
    Checkpoint(String),
    /// The shared-memory backend's thread pool could not be built.
    #[error("shared-memory backend: {0}")]
    Pool(String),
}
