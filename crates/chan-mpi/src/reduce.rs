//! Non-blocking reductions over MPI: `MPI_Iallreduce` on buffers the reduction owns (rsmpi's
//! scoped requests cannot outlive the stack frame that starts them, and a solver restarts its
//! reduction across iterations), or chan-core's binary tree over point-to-point channels.

use crate::env::World;
use crate::pending::Pending;
use crate::raw;
use crate::Mpi;
use chan_core::{CreateError, ReduceError, ReduceOp, Reduction, TreeReduction};
use mpi::ffi;
use std::os::raw::c_int;
use std::rc::Rc;

/// Which algorithm an MPI context's reductions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReductionKind {
    /// `MPI_Iallreduce`: the library's own non-blocking collective.
    #[default]
    Iallreduce,
    /// chan-core's binary-tree reduce-then-broadcast over Sync channels (the paper's
    /// hand-written tree), for comparison.
    Tree,
}

/// A non-blocking all-reduce with `MPI_Iallreduce` (MPI 3.0, §5.12.8).
pub struct Iallreduce {
    op: ReduceOp,
    count: c_int,
    /// Both buffers are boxed and owned here: they stay put while the collective runs.
    send: Box<[f64]>,
    recv: Box<[f64]>,
    req: Pending,
}

impl std::fmt::Debug for Iallreduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iallreduce")
            .field("op", &self.op)
            .field("len", &self.send.len())
            .field("active", &self.in_progress())
            .finish()
    }
}

impl Iallreduce {
    pub(crate) fn new(world: Rc<World>, len: usize, op: ReduceOp) -> Result<Self, CreateError> {
        let count = c_int::try_from(len).map_err(|_| {
            CreateError::Comm(raw::misuse(
                "reduction",
                format!("{len} values exceed MPI's int count"),
            ))
        })?;
        Ok(Iallreduce {
            op,
            count,
            send: vec![0.0; len].into_boxed_slice(),
            recv: vec![0.0; len].into_boxed_slice(),
            req: Pending::new(world),
        })
    }
}

impl Reduction for Iallreduce {
    fn len(&self) -> usize {
        self.send.len()
    }

    fn start(&mut self, local: &[f64]) -> Result<(), ReduceError> {
        if self.in_progress() {
            return Err(ReduceError::InProgress);
        }
        if local.len() != self.send.len() {
            return Err(ReduceError::Length {
                expected: self.send.len(),
                got: local.len(),
            });
        }
        self.send.copy_from_slice(local);
        let (send, recv, count, op) = (&self.send, &mut self.recv, self.count, self.op);
        let comm = self.req.world.comm;
        // SAFETY: send and recv are boxed, owned by self, hold `count` f64 each and do not
        // overlap; neither is touched until the request completes (test/wait), and Drop waits
        // for an active request before they are freed. comm is the world's, live while the
        // request holds the world.
        self.req.start("MPI_Iallreduce", |req| unsafe {
            ffi::MPI_Iallreduce(
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                count,
                raw::double_type(),
                raw::op(op),
                comm,
                req,
            )
        })?;
        Ok(())
    }

    fn test(&mut self) -> Result<Option<&[f64]>, ReduceError> {
        Ok(self.req.test_started()?.then_some(&self.recv[..]))
    }

    fn wait(&mut self) -> Result<&[f64], ReduceError> {
        self.req.wait_started()?;
        Ok(&self.recv)
    }

    fn in_progress(&self) -> bool {
        self.req.active()
    }
}

impl Drop for Iallreduce {
    fn drop(&mut self) {
        // A started collective cannot be cancelled; every rank started it, so it completes.
        // The buffers must outlive it.
        if let Err(e) = self.req.wait() {
            eprintln!("aiac (mpi): completing a dropped reduction: {e}");
            std::mem::forget(std::mem::take(&mut self.send));
            std::mem::forget(std::mem::take(&mut self.recv));
        }
    }
}

/// A non-blocking barrier with `MPI_Ibarrier` (MPI 3.0, §5.12.1), as a [`Reduction`] of no
/// values: `start(&[])` enters the barrier, `test` returns once every rank has entered.
pub struct Ibarrier {
    req: Pending,
}

impl std::fmt::Debug for Ibarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ibarrier")
            .field("active", &self.in_progress())
            .finish()
    }
}

impl Ibarrier {
    pub(crate) fn new(world: Rc<World>) -> Self {
        Ibarrier {
            req: Pending::new(world),
        }
    }
}

impl Reduction for Ibarrier {
    fn len(&self) -> usize {
        0
    }

    fn start(&mut self, local: &[f64]) -> Result<(), ReduceError> {
        if self.in_progress() {
            return Err(ReduceError::InProgress);
        }
        if !local.is_empty() {
            return Err(ReduceError::Length {
                expected: 0,
                got: local.len(),
            });
        }
        let comm = self.req.world.comm;
        // SAFETY: MPI_Ibarrier reads no buffer; comm is the world's, live while the request
        // holds the world; the request is written once here and completed (test/wait) or
        // progressed in Drop.
        self.req.start("MPI_Ibarrier", |req| unsafe {
            ffi::MPI_Ibarrier(comm, req)
        })?;
        Ok(())
    }

    fn test(&mut self) -> Result<Option<&[f64]>, ReduceError> {
        Ok(self.req.test_started()?.then_some(&[][..]))
    }

    fn wait(&mut self) -> Result<&[f64], ReduceError> {
        self.req.wait_started()?;
        Ok(&[])
    }

    fn in_progress(&self) -> bool {
        self.req.active()
    }
}

/// How long a barrier dropped in flight is progressed before it is left to the end of the job.
const DROP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for Ibarrier {
    fn drop(&mut self) {
        // A nonblocking collective's request can be neither cancelled nor freed (MPI 3.0,
        // §5.12): only completed. A caller that ends a run normally has completed every round
        // it entered (every rank enters each round before the run can stop), so a request in
        // flight here means an error path, where another rank may never enter: waiting for it
        // would hang the rank instead of letting it report and abort. So progress it for
        // DROP_WAIT, then leave it: `MpiCtx::finalize` counts it as outstanding.
        if !self.in_progress() {
            return;
        }
        let deadline = std::time::Instant::now() + DROP_WAIT;
        loop {
            match self.req.test() {
                Ok(true) => return,
                Ok(false) if std::time::Instant::now() < deadline => std::thread::yield_now(),
                Ok(false) => {
                    eprintln!(
                        "aiac (mpi): a non-blocking barrier was dropped before every rank \
                         entered it; left outstanding"
                    );
                    return;
                }
                Err(e) => {
                    eprintln!("aiac (mpi): completing a dropped barrier: {e}");
                    return;
                }
            }
        }
    }
}

/// The reduction an [`crate::MpiCtx`] builds: see [`ReductionKind`].
#[derive(Debug)]
pub enum MpiReduction {
    /// `MPI_Iallreduce`.
    Native(Iallreduce),
    /// chan-core's tree over MPI channels.
    Tree(Box<TreeReduction<Mpi>>),
    /// `MPI_Ibarrier`: the context's non-blocking barrier.
    Barrier(Ibarrier),
}

impl Reduction for MpiReduction {
    fn len(&self) -> usize {
        match self {
            MpiReduction::Native(r) => r.len(),
            MpiReduction::Tree(r) => r.len(),
            MpiReduction::Barrier(r) => r.len(),
        }
    }
    fn start(&mut self, local: &[f64]) -> Result<(), ReduceError> {
        match self {
            MpiReduction::Native(r) => r.start(local),
            MpiReduction::Tree(r) => r.start(local),
            MpiReduction::Barrier(r) => r.start(local),
        }
    }
    fn test(&mut self) -> Result<Option<&[f64]>, ReduceError> {
        match self {
            MpiReduction::Native(r) => r.test(),
            MpiReduction::Tree(r) => r.test(),
            MpiReduction::Barrier(r) => r.test(),
        }
    }
    fn wait(&mut self) -> Result<&[f64], ReduceError> {
        match self {
            MpiReduction::Native(r) => r.wait(),
            MpiReduction::Tree(r) => r.wait(),
            MpiReduction::Barrier(r) => r.wait(),
        }
    }
    fn in_progress(&self) -> bool {
        match self {
            MpiReduction::Native(r) => r.in_progress(),
            MpiReduction::Tree(r) => r.in_progress(),
            MpiReduction::Barrier(r) => r.in_progress(),
        }
    }
}
