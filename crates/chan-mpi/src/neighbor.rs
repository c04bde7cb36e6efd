//! A halo exchange as one MPI-3 neighbourhood collective: `MPI_Ineighbor_alltoallv` on a
//! distributed-graph communicator whose edges are the rank's neighbours (MPI 3.1 §7.6,
//! §7.7.2). The graph is made once per solve with `MPI_Dist_graph_create_adjacent` (reorder
//! off, so every rank keeps its number and its block), and the packed send and receive
//! buffers are owned here, allocated once: an exchange is a copy in, one start, one wait and
//! a copy out, with no allocation.
//!
//! Why a distributed graph and not a Cartesian communicator: a Cartesian one orders its
//! neighbours as −x, +x, −y, … and exchanges with every one of them, the missing ones as
//! `MPI_PROC_NULL`; the graph lists exactly the links the solver has, in its own order (the
//! grid's faces, or a sparse matrix's row blocks), so one object serves the grid and the
//! sparse operators alike.

use crate::env::World;
use crate::pending::Pending;
use crate::raw::{self, check};
use chan_core::{CommError, CreateError, NeighborExchange, NeighborSpec};
use mpi::ffi;
use std::os::raw::c_int;
use std::rc::Rc;

/// `MPI_Ineighbor_alltoallv` over the rank's neighbours (see the module's documentation).
pub struct NeighborAlltoallv {
    /// The distributed-graph communicator: its sources and destinations are the neighbours,
    /// in the order given. Freed on drop.
    comm: ffi::MPI_Comm,
    /// Per neighbour: counts and displacements (in f64) into the packed buffers.
    send_counts: Box<[c_int]>,
    send_displs: Box<[c_int]>,
    recv_counts: Box<[c_int]>,
    recv_displs: Box<[c_int]>,
    /// Both buffers are boxed and owned here: they stay put while the collective runs.
    send: Box<[f64]>,
    recv: Box<[f64]>,
    /// The exchange in flight; it holds the world, so MPI outlives the communicator.
    req: Pending,
}

impl std::fmt::Debug for NeighborAlltoallv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NeighborAlltoallv")
            .field("neighbors", &self.send_counts.len())
            .field("send", &self.send.len())
            .field("recv", &self.recv.len())
            .field("active", &self.in_progress())
            .finish()
    }
}

/// Counts and displacements (in f64) of one direction's messages in its packed buffer.
pub(crate) struct Layout {
    counts: Box<[c_int]>,
    displs: Box<[c_int]>,
    total: usize,
}

/// The layout of messages of lengths `lens`, packed in order, in MPI's int.
fn layout(lens: impl Iterator<Item = usize>) -> Result<Layout, String> {
    let (mut counts, mut displs, mut total) = (Vec::new(), Vec::new(), 0usize);
    for len in lens {
        let too_big = || format!("{} values exceed MPI's int count", total + len);
        displs.push(raw::int_count(total).ok_or_else(too_big)?);
        counts.push(raw::int_count(len).ok_or_else(too_big)?);
        total += len;
    }
    raw::int_count(total).ok_or_else(|| format!("{total} values exceed MPI's int count"))?;
    Ok(Layout {
        counts: counts.into(),
        displs: displs.into(),
        total,
    })
}

/// What [`NeighborAlltoallv::new`] makes the graph from, checked on this rank.
pub(crate) struct Plan {
    ranks: Vec<c_int>,
    send: Layout,
    recv: Layout,
}

impl NeighborAlltoallv {
    /// This rank's part of the graph, or why it cannot be made here (every rank votes on
    /// the outcome before any makes the graph, which is collective).
    pub(crate) fn plan(world: &World, peers: &[NeighborSpec]) -> Result<Plan, CreateError> {
        let misuse = |m: String| CreateError::Comm(raw::misuse("neighbor_exchange", m));
        if world.simulated {
            // SimGrid's SMPI declares the neighbourhood collectives without running them.
            return Err(misuse(
                "SimGrid's SMPI does not implement MPI_Dist_graph_create_adjacent and \
                 MPI_Ineighbor_alltoallv: --exchange neighbor needs a real MPI library"
                    .into(),
            ));
        }
        let mut ranks = Vec::with_capacity(peers.len());
        for p in peers {
            if p.peer >= world.size || p.peer == world.rank {
                return Err(CreateError::BadPeer {
                    rank: world.rank,
                    peer: p.peer,
                    size: world.size,
                });
            }
            ranks.push(p.peer as c_int); // < size, which is an int
        }
        let send = layout(peers.iter().map(|p| p.send)).map_err(misuse)?;
        let recv = layout(peers.iter().map(|p| p.recv)).map_err(misuse)?;
        Ok(Plan { ranks, send, recv })
    }

    /// Collective over the world: every rank calls it with the plan every rank voted for,
    /// then votes on its outcome (creation can fail on some ranks only), dropping, and so
    /// freeing, a graph made here when it failed elsewhere.
    pub(crate) fn new(world: Rc<World>, plan: Plan) -> Result<Self, CreateError> {
        let Plan { ranks, send, recv } = plan;
        let degree = ranks.len() as c_int;
        // Weights of 1 (the same as MPI_UNWEIGHTED for a graph nothing reorders).
        let weights = vec![1 as c_int; ranks.len().max(1)];
        // SAFETY: null handle constant, overwritten by MPI_Dist_graph_create_adjacent.
        let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: MPI is live (world holds it) and world.comm is its valid communicator;
        // sources and destinations are the same `degree` valid ranks of it, weights holds at
        // least `degree` ints (one when degree is 0, never read), info is the null
        // constant; MPI writes only `comm`. Every rank makes this call (the caller's vote).
        let rc = unsafe {
            ffi::MPI_Dist_graph_create_adjacent(
                world.comm,
                degree,
                ranks.as_ptr(),
                weights.as_ptr(),
                degree,
                ranks.as_ptr(),
                weights.as_ptr(),
                ffi::RSMPI_INFO_NULL,
                0,
                &mut comm,
            )
        };
        check(rc, "MPI_Dist_graph_create_adjacent")?;
        // SAFETY: comm is the valid communicator MPI just made; ERRORS_RETURN is a predefined
        // handler.
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
        let made = NeighborAlltoallv {
            comm,
            send: vec![0.0; send.total].into_boxed_slice(),
            recv: vec![0.0; recv.total].into_boxed_slice(),
            send_counts: send.counts,
            send_displs: send.displs,
            recv_counts: recv.counts,
            recv_displs: recv.displs,
            req: Pending::new(world),
        };
        check(rc, "MPI_Comm_set_errhandler")?; // dropping `made` frees the communicator
        Ok(made)
    }

    fn range(counts: &[c_int], displs: &[c_int], k: usize) -> std::ops::Range<usize> {
        let start = displs[k] as usize;
        start..start + counts[k] as usize
    }
}

impl NeighborExchange for NeighborAlltoallv {
    fn neighbors(&self) -> usize {
        self.send_counts.len()
    }

    fn send_buf(&mut self, k: usize) -> &mut [f64] {
        assert!(
            !self.in_progress(),
            "the send buffer is MPI's until the exchange completes"
        );
        let r = Self::range(&self.send_counts, &self.send_displs, k);
        &mut self.send[r]
    }

    fn start(&mut self) -> Result<(), CommError> {
        if self.in_progress() {
            return Err(raw::misuse(
                "MPI_Ineighbor_alltoallv",
                "an exchange is in progress",
            ));
        }
        let (send, recv, comm) = (&self.send, &mut self.recv, self.comm);
        let (sc, sd) = (&self.send_counts, &self.send_displs);
        let (rc, rd) = (&self.recv_counts, &self.recv_displs);
        // SAFETY: send and recv are boxed, owned by self, do not overlap, and hold the sums
        // of their counts (the displacements are the running sums, all within int); the
        // count and displacement arrays hold one int per neighbour of `comm`, which lists
        // the neighbours in their order. Nothing touches the buffers until the request
        // completes (send_buf/recv_buf panic while it is active), and Drop completes an
        // active request before they and `comm` are freed.
        self.req.start("MPI_Ineighbor_alltoallv", |req| unsafe {
            ffi::MPI_Ineighbor_alltoallv(
                send.as_ptr().cast(),
                sc.as_ptr(),
                sd.as_ptr(),
                raw::double_type(),
                recv.as_mut_ptr().cast(),
                rc.as_ptr(),
                rd.as_ptr(),
                raw::double_type(),
                comm,
                req,
            )
        })
    }

    fn test(&mut self) -> Result<bool, CommError> {
        if !self.in_progress() {
            return Err(raw::misuse("MPI_Test", "no exchange in progress"));
        }
        self.req.test()
    }

    fn wait(&mut self) -> Result<(), CommError> {
        if !self.in_progress() {
            return Err(raw::misuse("MPI_Wait", "no exchange in progress"));
        }
        self.req.wait()
    }

    fn recv_buf(&self, k: usize) -> &[f64] {
        assert!(
            !self.in_progress(),
            "the receive buffer is MPI's until the exchange completes"
        );
        &self.recv[Self::range(&self.recv_counts, &self.recv_displs, k)]
    }

    fn in_progress(&self) -> bool {
        self.req.active()
    }
}

impl Drop for NeighborAlltoallv {
    fn drop(&mut self) {
        // A started collective cannot be cancelled; every neighbour started it, so it
        // completes. The buffers and the communicator must outlive it.
        if let Err(e) = self.req.wait() {
            eprintln!("aiac (mpi): completing a dropped neighbour exchange: {e}");
            // MPI may still read the counts and displacements of a started vector collective
            // as well as its buffers (MPI 3.1 §5.12), so none of them is freed; nor is comm.
            for b in [
                &mut self.send_counts,
                &mut self.send_displs,
                &mut self.recv_counts,
                &mut self.recv_displs,
            ] {
                std::mem::forget(std::mem::take(b));
            }
            std::mem::forget(std::mem::take(&mut self.send));
            std::mem::forget(std::mem::take(&mut self.recv));
            return;
        }
        // SAFETY: comm is the communicator `new` made, no request on it is active (waited
        // above), and MPI is live: self holds the world, whose shutdown alone finalizes MPI
        // and runs only once no one holds it. MPI_Comm_free sets the handle to null.
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        if let Err(e) = check(rc, "MPI_Comm_free") {
            eprintln!("aiac (mpi): freeing a neighbour exchange's communicator: {e}");
        }
    }
}
