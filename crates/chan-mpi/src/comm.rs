//! A communicator of the caller's own, for raw MPI calls beside aiac's channels.

use crate::env::{SetComm, World};
use mpi::ffi;
use std::rc::Rc;

/// A communicator for the caller's own raw MPI calls beside aiac's channels (the kernels of
/// the `mpi-probe` crate): a duplicate of aiac's communicator, so every rank of the job, with
/// `MPI_ERRORS_RETURN` (a failing call returns its error code), freed when dropped. Made by
/// [`MpiCtx::communicator`](crate::MpiCtx::communicator).
///
/// It holds the rank's MPI world, as channels do: MPI stays initialised while it lives
/// ([`MpiCtx::finalize`](crate::MpiCtx::finalize) counts it among what is still open), so the
/// handle [`MpiComm::as_raw`] gives is valid for as long as the `MpiComm` is.
pub struct MpiComm {
    // Declared (so dropped) before `_world`: freed while MPI is still initialised.
    comm: Rc<SetComm>,
    _world: Rc<World>,
}

impl MpiComm {
    pub(crate) fn new(comm: Rc<SetComm>, world: Rc<World>) -> Self {
        MpiComm {
            comm,
            _world: world,
        }
    }

    /// The communicator's handle, for `mpi::ffi` calls: valid while `self` lives. The caller
    /// neither frees it nor changes its error handler.
    pub fn as_raw(&self) -> ffi::MPI_Comm {
        self.comm.raw()
    }
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm").finish_non_exhaustive()
    }
}
