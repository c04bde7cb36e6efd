//! Channel modes as sealed marker types.

use crate::config::ChannelSpec;
use crate::context::Context;
use crate::error::CreateError;
use crate::transport::Backend;
use serde::{Deserialize, Serialize};

mod sealed {
    pub trait Sealed {}
}

/// A channel mode: [`Sync`], [`Async`] or [`Racy`]. Sealed: no other modes exist.
pub trait Mode: sealed::Sealed + Send + 'static {
    /// The value form of the mode, for handshakes, errors and reports.
    const KIND: ModeKind;
    /// The backend's transport that carries a channel of this mode.
    type Transport<B: Backend>: crate::transport::Transport;

    /// Create this mode's transports through the context (dispatch for [`Context::open`]).
    #[doc(hidden)]
    fn open_transports<C: Context + ?Sized>(
        ctx: &mut C,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Self::Transport<C::Backend>>, CreateError>;
}

/// Every send matched by exactly one receive, pairwise, in order (the paper's synchronous
/// halo swap: `MPI_Issend` + `MPI_Irecv` + `MPI_Waitall`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sync;

/// Up to R messages in flight with end-to-end flow control; a receive yields the newest whole
/// message and discards older ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct Async;

/// One receive buffer per direction that the transport may write at any moment; it is read
/// through atomics ([`crate::AtomicF64Slice`]) and elements from different sends may mix.
#[derive(Debug, Clone, Copy, Default)]
pub struct Racy;

impl sealed::Sealed for Sync {}
impl sealed::Sealed for Async {}
impl sealed::Sealed for Racy {}

impl Mode for Sync {
    const KIND: ModeKind = ModeKind::Sync;
    type Transport<B: Backend> = B::Mailbox;
    fn open_transports<C: Context + ?Sized>(
        ctx: &mut C,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Self::Transport<C::Backend>>, CreateError> {
        ctx.open_mailboxes(ModeKind::Sync, specs)
    }
}
impl Mode for Async {
    const KIND: ModeKind = ModeKind::Async;
    type Transport<B: Backend> = B::Mailbox;
    fn open_transports<C: Context + ?Sized>(
        ctx: &mut C,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Self::Transport<C::Backend>>, CreateError> {
        ctx.open_mailboxes(ModeKind::Async, specs)
    }
}
impl Mode for Racy {
    const KIND: ModeKind = ModeKind::Racy;
    type Transport<B: Backend> = B::Racy;
    fn open_transports<C: Context + ?Sized>(
        ctx: &mut C,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Self::Transport<C::Backend>>, CreateError> {
        ctx.open_racy(specs)
    }
}

/// The mode of a channel as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeKind {
    /// See [`Sync`].
    Sync,
    /// See [`Async`].
    Async,
    /// See [`Racy`].
    Racy,
}

impl ModeKind {
    /// Lower-case name: `sync`, `async` or `racy`.
    pub fn name(self) -> &'static str {
        match self {
            ModeKind::Sync => "sync",
            ModeKind::Async => "async",
            ModeKind::Racy => "racy",
        }
    }

    /// A small integer code, for wire handshakes.
    pub fn code(self) -> u64 {
        match self {
            ModeKind::Sync => 1,
            ModeKind::Async => 2,
            ModeKind::Racy => 3,
        }
    }

    /// Inverse of [`ModeKind::code`].
    pub fn from_code(code: u64) -> Option<Self> {
        match code {
            1 => Some(ModeKind::Sync),
            2 => Some(ModeKind::Async),
            3 => Some(ModeKind::Racy),
            _ => None,
        }
    }
}

impl std::fmt::Display for ModeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
