//! # chan-mpi: aiac's channel model over MPI
//!
//! chan-core's channels, reductions and [`Context`](chan_core::Context) over MPI through
//! rsmpi (the `mpi` crate), with raw `mpi::ffi` where rsmpi's safe API cannot express a
//! request that outlives a stack frame. Tested against Open MPI 4.1 under `mpirun`, and against
//! MPICH 4.0 under `mpiexec.mpich` (scripts/test-mpich).
//!
//! ```no_run
//! use chan_core::traits::*;
//! use chan_core::{close_all, Async, ChannelConfig, ChannelSpec};
//! use chan_mpi::MpiCtx;
//!
//! let mut ctx = MpiCtx::init().expect("MPI starts");
//! let (rank, size) = (ctx.rank(), ctx.size());
//! let spec = |peer| ChannelSpec::new(peer, 0, ChannelConfig::new(2500, 2).unwrap()).unwrap();
//! let specs: Vec<_> = [rank.checked_sub(1), Some(rank + 1).filter(|&r| r < size)]
//!     .into_iter().flatten().map(spec).collect();
//! let mut chans = ctx.open::<Async>(&specs).expect("both ends agree");
//! for ch in &mut chans {
//!     let _ = ch.try_send(&vec![rank as f64; 2500]); // Full: all R in flight; carry on
//! }
//! close_all(chans).expect("closed with the peers");
//! ctx.finalize().expect("nothing left outstanding");
//! ```
//!
//! Between ranks of one node a channel end takes the node-local path (`src/node.rs`):
//! chan-core's one-sided transport over an MPI-3 shared-memory window, where a send fills the
//! peer's slot in place and publishes it with one store, as OpenSHMEM's ends do on one node.
//! `AIAC_MPI_REMOTE=1` sends every end the two-sided way instead, as between nodes
//! ([`MpiCtx::remote_only`], [`MpiCtx::node_ends`]).
//!
//! How each mode maps onto two-sided MPI (the protocol is in `src/transport.rs` and
//! docs/architecture.md): standard-mode sends from R owned send slots, each with a credit
//! that guarantees a posted receive (credits return in the headers of the messages flowing
//! back, or batched), R + 2 pre-posted receive slots, newest-wins on receive; racy posts its
//! R + 1 receives into one buffer read through atomics; `close` exchanges send counts, drains and
//! cancels, and [`MpiCtx::finalize`] checks that no request is left.

#![warn(missing_docs)]

mod env;
mod node;
mod raw;
mod reduce;
mod transport;
mod twosided;
mod window;

pub use env::{FinalizeError, InitError, MpiCtx};
pub use node::MpiPeer;
pub use reduce::{Iallreduce, MpiReduction, ReductionKind};
pub use transport::MpiEnd;
pub use twosided::MpiDelivery;
pub use window::MpiWindow;

/// The MPI backend's marker type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mpi;

impl chan_core::transport::Backend for Mpi {
    const NAME: &'static str = "mpi";
    type Mailbox = MpiEnd<chan_core::backend::Slots>;
    type Racy = MpiEnd<chan_core::backend::Shared>;
}
