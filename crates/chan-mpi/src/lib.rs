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
//! ## Two paths, and the layer the node-local one makes
//! Each channel end ([`MpiEnd`], `src/transport.rs`) takes one of two paths, fixed when it is
//! created and matched once in each call ([`MpiEnd::is_node_local`]):
//!
//! * **Node-local**, between ranks of one node (`src/node.rs`): chan-core's one-sided
//!   protocol over an MPI-3 shared-memory window, where a send fills the peer's slot in place
//!   and publishes it with one store, as OpenSHMEM's ends do on one node.
//! * **Two-sided** (`src/twosided/`): MPI sends and receives with credits, to ranks of other
//!   nodes, to every peer under `AIAC_MPI_REMOTE=1` ([`MpiCtx::remote_only`],
//!   [`MpiCtx::node_ends`]), and on a node where no shared window can be made.
//!
//! The node-local path is a layer of its own: chan-core → chan-mpi → chan-core. chan-mpi is a
//! chan-core backend ([`Mpi`]: chan-core's channels run over [`MpiEnd`]), and the node-local
//! end it gives them is chan-core's one-sided protocol again
//! ([`OneSidedEnd<D, MpiPeer>`](chan_core::backend::OneSidedEnd)): the slots, flags,
//! acknowledgements and close are chan-core's code, generic over
//! [`PeerMem`](chan_core::backend::PeerMem), and chan-mpi supplies
//! [`MpiPeer`] (the peer's window segment at this process's addresses, and a wait that runs
//! MPI's progress), the window and its reclaim.
//!
//! ```text
//! chan-core       Channel<Mpi, M>: the modes, statistics, the handshake
//!  └ chan-mpi     MpiEnd<D>: one path per end                    src/transport.rs
//!     ├ node-local   chan-core again: OneSidedEnd<D, MpiPeer>,   src/node.rs
//!     │              loads and stores into an MPI shared window
//!     └ two-sided    Core: MPI sends and receives with credits   src/twosided/
//! under both: the rank's MPI world (communicators, requests,     src/env.rs
//!             the node, the closing registry)
//! ```
//!
//! How each mode maps onto two-sided MPI (the protocol is in `src/twosided/` and
//! docs/architecture.md): standard-mode sends from R owned send slots, each with a credit
//! that guarantees a posted receive (credits return in the headers of the messages flowing
//! back, or batched), R + 2 pre-posted receive slots, newest-wins on receive; racy posts its
//! R + 1 receives into one buffer read through atomics; `close` exchanges send counts, drains and
//! cancels, and [`MpiCtx::finalize`] checks that no request is left.

#![warn(missing_docs)]

mod comm;
mod env;
mod neighbor;
mod node;
mod pair;
mod pending;
mod raw;
mod reduce;
mod transport;
mod twosided;
mod vars;
mod window;

pub use comm::MpiComm;
pub use env::{is_smpi, FinalizeError, InitError, MpiCtx};
pub use neighbor::NeighborAlltoallv;
pub use node::MpiPeer;
/// Helpers for code that calls MPI's C interface beside aiac's channels (the `mpi-probe`
/// crate, on an [`MpiComm`]).
pub use raw::{error_string, int_count};
pub use reduce::{Iallreduce, Ibarrier, MpiReduction, ReductionKind};
pub use transport::MpiEnd;
pub use twosided::MpiDelivery;
pub use window::MpiWindow;

/// The MPI backend's marker type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mpi;

impl chan_core::Backend for Mpi {
    const NAME: &'static str = "mpi";
    type Mailbox = MpiEnd<chan_core::backend::Slots>;
    type Racy = MpiEnd<chan_core::backend::Shared>;
}
