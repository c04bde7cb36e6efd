//! The request of a non-blocking collective that its owner restarts (`MPI_Iallreduce`,
//! `MPI_Ibarrier`, `MPI_Ineighbor_alltoallv`): started, tested with the world's closes
//! progressed, waited for, and counted among the world's outstanding requests.

use crate::env::World;
use crate::raw::{self, check};
use chan_core::{CommError, ReduceError};
use mpi::ffi;
use std::os::raw::c_int;
use std::rc::Rc;

/// One collective's request on the world (null when none is in flight). It has no `Drop`:
/// its owner decides how a request in flight ends, since only the owner knows which of its
/// buffers MPI may still use.
pub(crate) struct Pending {
    pub(crate) world: Rc<World>,
    req: ffi::MPI_Request,
}

impl Pending {
    pub(crate) fn new(world: Rc<World>) -> Self {
        Pending {
            world,
            req: raw::request_null(),
        }
    }

    /// A collective is in flight.
    pub(crate) fn active(&self) -> bool {
        self.req != raw::request_null()
    }

    /// Start a collective: `call` is the `MPI_I…` call given the request to write (`what`
    /// names it in an error). The owner checked that none is active.
    pub(crate) fn start(
        &mut self,
        what: &'static str,
        call: impl FnOnce(&mut ffi::MPI_Request) -> c_int,
    ) -> Result<(), CommError> {
        debug_assert!(!self.active());
        check(call(&mut self.req), what)?;
        self.world.requests.started();
        Ok(())
    }

    /// `MPI_Test` after progressing the world's closes: true once the collective completed
    /// (the request is then null).
    pub(crate) fn test(&mut self) -> Result<bool, CommError> {
        self.world.progress_closing();
        raw::test_one(&mut self.req, &self.world.requests)
    }

    /// `MPI_Wait` (nothing when none is active).
    pub(crate) fn wait(&mut self) -> Result<(), CommError> {
        raw::wait_one(&mut self.req, &self.world.requests)
    }

    /// A reduction's test: [`Pending::test`], or [`ReduceError::NotStarted`] when none is in
    /// flight.
    pub(crate) fn test_started(&mut self) -> Result<bool, ReduceError> {
        if !self.active() {
            return Err(ReduceError::NotStarted);
        }
        Ok(self.test()?)
    }

    /// A reduction's wait: [`Pending::wait`], or [`ReduceError::NotStarted`] when none is in
    /// flight.
    pub(crate) fn wait_started(&mut self) -> Result<(), ReduceError> {
        if !self.active() {
            return Err(ReduceError::NotStarted);
        }
        Ok(self.wait()?)
    }
}
