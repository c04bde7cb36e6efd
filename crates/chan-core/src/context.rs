//! A rank's view of its world: the trait every backend's context implements, and that solvers
//! are written against.

use crate::channel::Channel;
use crate::config::ChannelSpec;
use crate::error::{CommError, CreateError};
use crate::mode::{Mode, ModeKind};
use crate::reduce::{ReduceOp, Reduction};
use crate::transport::Backend;

/// One rank of a world of `size()` ranks, over some backend. Solvers are written once against
/// this trait and run over threads, MPI or SHMEM.
///
/// Creation calls ([`Context::open`], [`Context::reduction`]) are **collective**: every rank
/// calls them, in the same order, and each fails on every rank if it fails anywhere.
pub trait Context {
    /// The backend.
    type Backend: Backend;
    /// The non-blocking reduction this backend provides.
    type Reduction: Reduction;

    /// This rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;

    /// Collectively create this rank's channels of mode `M`, one per spec; the peer must
    /// create the matching end (same tag) in the same collective call. Two ends that disagree
    /// on length, R or mode both get [`CreateError::Mismatch`] naming both values; every other
    /// rank gets [`CreateError::FailedElsewhere`].
    fn open<M: Mode>(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<Channel<Self::Backend, M>>, CreateError> {
        let transports = M::open_transports(self, specs)?;
        Ok(transports
            .into_iter()
            .zip(specs)
            .map(|(t, s)| Channel::from_transport(t, s))
            .collect())
    }

    /// Backend primitive behind [`Context::open`] for Sync and Async channels.
    fn open_mailboxes(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<<Self::Backend as Backend>::Mailbox>, CreateError>;

    /// Backend primitive behind [`Context::open`] for Racy channels.
    fn open_racy(
        &mut self,
        specs: &[ChannelSpec],
    ) -> Result<Vec<<Self::Backend as Backend>::Racy>, CreateError>;

    /// Collectively create a non-blocking reduction of `len` values with `op`.
    fn reduction(&mut self, len: usize, op: ReduceOp) -> Result<Self::Reduction, CreateError>;

    /// A fresh tag for aiac's own channels; every rank gets the same sequence of tags from
    /// the same sequence of collective calls.
    fn next_reserved_tag(&mut self) -> u32;

    /// Blocking barrier.
    fn barrier(&mut self) -> Result<(), CommError>;

    /// Blocking all-reduce in place: every rank gets the same result.
    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError>;
}
