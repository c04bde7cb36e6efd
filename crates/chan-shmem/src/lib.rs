//! # chan-shmem: aiac's channel model over OpenSHMEM
//!
//! chan-core's channels, reductions and [`Context`](chan_core::Context) over OpenSHMEM 1.4
//! (bindings: `openshmem-sys`). Tested against Open MPI 4.1's OSHMEM under `oshrun`.
//!
//! ```no_run
//! use chan_core::traits::*;
//! use chan_core::{close_all, Async, ChannelConfig, ChannelSpec};
//! use chan_shmem::ShmemCtx;
//!
//! let mut ctx = ShmemCtx::init().expect("SHMEM starts");
//! let (pe, n) = (ctx.rank(), ctx.size());
//! let spec = |peer| ChannelSpec::new(peer, 0, ChannelConfig::new(2500, 2).unwrap()).unwrap();
//! let specs: Vec<_> = [pe.checked_sub(1), Some(pe + 1).filter(|&p| p < n)]
//!     .into_iter().flatten().map(spec).collect();
//! // Collective: symmetric memory for the whole set is allocated here, on every PE.
//! let mut chans = ctx.open::<Async>(&specs).expect("both ends agree");
//! for ch in &mut chans {
//!     let _ = ch.try_send(&vec![pe as f64; 2500]); // Full: no free slot at the peer; carry on
//! }
//! close_all(chans).expect("closed with the peers");
//! ctx.finalize().expect("every channel closed");
//! ```
//!
//! ## How the model maps onto OpenSHMEM
//! Everything remote lives on the **symmetric heap** (puts into static variables were seen
//! not to arrive until the target called SHMEM; heap puts arrive at once). Symmetric
//! allocation is collective, so channels are created **as a set**:
//! [`Context::open`](chan_core::Context::open) runs chan-core's handshake (each PE's region
//! offsets travel with it), then allocates one region for the set, of the largest size any PE
//! needs.
//!
//! | | SHMEM |
//! |---|---|
//! | Sync / Async | R + 1 slots with flags per direction in the receiver's memory: put `[stamp, data]`, `shmem_fence`, put the sequence number as the slot's flag (on one node, where `shmem_ptr` maps the peer's region, the sender fills the slot in place and stores the flag with release); the receiver polls the next flag and acknowledges each released slot with one put (on one node, a release store); the sender refills only released slots, so a send never waits once started (nothing is in flight: flow control is the R + 1 slots) |
//! | Racy | `[stamp, data]` into the peer's buffer, then the send count; no flag to wait for; the view reads through atomics. On one node the sender writes the peer's one buffer, which is the view (mapped by `shmem_ptr`), with 8-byte atomic stores and the count with a release store, since a bulk put was seen to land half done; between nodes the put lands in one of two landing buffers (put the send's number, `shmem_fence`, put the data, `shmem_fence`, put the count) and the receiver's poll copies it into a view of its own unless a later send began overwriting it (chan-core's sequence lock) |
//! | close | `begin_close`: fence, put the send total; `finish_close`: wait for the peer's total, count what landed unreported, `shmem_quiet` |
//! | reduction | chan-core's [`TreeReduction`](chan_core::TreeReduction) over Sync channels (OpenSHMEM 1.4 has no non-blocking reduction) |
//! | all_reduce / barrier | `shmem_double_{sum,max,min}_to_all` / `shmem_barrier_all` |
//!
//! The protocol and its memory ordering are in `src/transport.rs` and docs/architecture.md.
//!
//! ## When memory is freed
//! A close never calls a collective, so a closed set's memory stays allocated (the peer may
//! still put into it until it closes too) until [`ShmemCtx::reclaim`], which every
//! [`Context::open`](chan_core::Context::open) calls first, or [`ShmemCtx::finalize`]. Both
//! are collective.
//!
//! ## Waiting on an oversubscribed node
//! Blocking operations (a Sync receive, a send waiting for a slot, a close waiting for the
//! peer's total, a tree reduction's `wait`) poll words in local memory that a peer's put
//! changes. With a core per PE they spin, and only a receive outside a blocking wait yields,
//! once per 64 in a row that found nothing (another program may hold a core: `IdleStreak`
//! in chan-core). With more PEs on the node than cores the peer may be
//! descheduled, so they back off and yield, and a poll that finds nothing yields too, as Open
//! MPI does under `mpi_yield_when_idle` ([`chan_core::backend::WaitPolicy`]; detected at
//! [`ShmemCtx::init`] from the launcher's environment, or forced with `AIAC_WAIT=spin|yield`).
//!
//! ## The between-nodes path, on one node
//! `AIAC_SHMEM_REMOTE=1` (read at [`ShmemCtx::init`]) makes every PE treat every peer as on
//! another node: no peer is mapped with `shmem_ptr`, so a racy send is a bulk put into a
//! landing buffer between puts of its number and of the count, and a mailbox send a put,
//! `shmem_fence` and a flag put, and a released slot's acknowledgement a put, which is what
//! differs between nodes (the close announcement is a put on both paths). `scripts/test` runs
//! the SHMEM checks once this way. On one node the bulk put is a copy into the peer's mapped
//! heap that can tear 8-byte words, so the racy checks on this path also test that a view
//! never shows a torn one (see `src/transport.rs`, "Whole words").
//!
//! ## Open MPI 4.1
//! OSHMEM crashes in `shmem_finalize` unless `OMPI_MCA_osc` is limited to `ucx` or `sm,ucx`;
//! [`ShmemCtx::init`] sets `sm,ucx` when
//! it is unset. As root, `oshrun` needs `OMPI_ALLOW_RUN_AS_ROOT=1
//! OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`; more PEs than cores need `--oversubscribe`.

#![warn(missing_docs)]

mod env;
mod pair;
mod sym;
mod transport;
mod vars;
mod window;

pub use env::{FinalizeError, InitError, ShmemCtx};
pub use transport::{ShmemEnd, ShmemPeer};
pub use window::ShmemWindow;

/// The OpenSHMEM backend's marker type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shmem;

impl chan_core::Backend for Shmem {
    const NAME: &'static str = "shmem";
    type Mailbox = ShmemEnd<chan_core::backend::Slots>;
    type Racy = ShmemEnd<chan_core::backend::Shared>;
}
