//! # chan-core: aiac's channel model
//!
//! A *channel* joins two processes (MPI ranks, SHMEM PEs or threads) and carries fixed-length
//! messages in both directions, of `f64` ([`Context::open`]) or of any [`Element`], a
//! plain-old-data type such as `f32`, `u64` or a `#[repr(C)]` struct deriving `bytemuck::Pod`
//! ([`Context::open_typed`]). Its **mode** is a type, chosen at creation:
//!
//! | mode | what a receive gives | flow control |
//! |---|---|---|
//! | [`Sync`] | every message once, in order ([`Channel::recv`] blocks) | at most R in flight, and as many unreceived as the receiver has slots (R + 1); [`Channel::send`] blocks |
//! | [`Async`] | the **newest whole message** that arrived, with its sender's stamp; older ones are discarded | at most R in flight; [`Channel::try_send`] says when all R are busy |
//! | [`Racy`] | an atomic view the transport may write while it is read ([`AtomicF64Slice`] for `f64`, a [`RacyView`] for the other [`RacyElement`] scalars) | at most R sends in flight; it binds only where a send is still in flight when it returns (MPI between nodes) |
//!
//! Operations that only make sense in one mode exist only on that mode's channel. Each of
//! these compiles in its own mode:
//!
//! ```no_run
//! # use chan_core::{Channel, Async, Racy, Sync, Backend};
//! fn right_modes<B: Backend>(a: &mut Channel<B, Async>, r: &mut Channel<B, Racy>,
//!                            s: &mut Channel<B, Sync>) {
//!     let _newest = a.recv().unwrap().map(|m| m.stamp());  // Async: newest whole message
//!     let _ = a.latest();
//!     let _view = r.view().load(0);                       // Racy: atomic view
//!     let _in_order = s.try_recv().unwrap().map(|m| m.seq()); // Sync: next message in order
//!     let mut out = vec![0.0; s.len()];
//!     let _ = s.recv_into(&mut out);
//! }
//! ```
//!
//! and none of these does:
//!
//! ```compile_fail
//! # use chan_core::{Channel, Async, Backend};
//! fn racy_view_on_async<B: Backend>(ch: &Channel<B, Async>) {
//!     let _ = ch.view(); // only Channel<_, Racy> has a racy view
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Racy, Backend};
//! fn plain_slice_from_racy<B: Backend>(ch: &mut Channel<B, Racy>) {
//!     let v: &[f64] = ch.recv().unwrap(); // a racy receive is an atomic view, never &[f64]
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Racy, Backend};
//! fn whole_message_from_racy<B: Backend>(ch: &Channel<B, Racy>) {
//!     let _ = ch.latest(); // a racy channel never lends a whole message
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Async, Backend};
//! fn in_order_recv_on_async<B: Backend>(ch: &mut Channel<B, Async>) {
//!     let _ = ch.try_recv(); // only Sync delivers every message, in order
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Async, Backend};
//! fn recv_into_on_async<B: Backend>(ch: &mut Channel<B, Async>, out: &mut [f64]) {
//!     let _ = ch.recv_into(out); // Sync only
//! }
//! ```
//!
//! Sending is the same in every mode: [`Channel::try_send`] (never waits), [`Channel::send`]
//! (waits for a slot), their zero-copy forms that fill the slot in place
//! ([`Channel::send_with`]), and a send in two steps: [`Channel::stage`] copies the message
//! into its slot ahead of time and [`Channel::send_staged`] starts it later, so the copy can
//! overlap a wait (a ping-pong's answer packed before the request arrives, as a C halo swap
//! packs its buffer before `MPI_Wait`).
//!
//! The channel logic (newest-wins, ordering, statistics), the creation handshake, the tree
//! reduction and record gathering live here, once. A backend implements the hooks of
//! [`backend`] (collectives, transports, wiring) on its world type, which makes that type a
//! [`Context`]: chan-threads (no system library, the embedded default), chan-mpi and
//! chan-shmem. docs/architecture.md in the repository describes the layers, each backend's
//! protocol and how to add one.
//!
//! ## Collective and pairwise creation
//! [`Context::open`] is collective: every rank calls it, and a creation fails everywhere if it
//! fails anywhere. [`Context::open_pair`] creates one channel with its two ends alone (the
//! paper's `create_channel`): it blocks until the peer makes the matching call, the other ranks
//! take no part, both ends check that they agree ([`CreateError::Mismatch`] at both), and a
//! peer that does not come within the timeout gives [`CreateError::PairTimeout`] and leaves
//! nothing behind. The end is the same [`Channel`]. docs/architecture.md, "Pairwise creation".
//!
//! ## Two faces
//! A user of channels and windows needs this crate's root and [`traits`]: [`Context`],
//! [`Channel`], the modes, [`Reduction`], [`Window`] and [`Windows`], the errors. A backend
//! author needs [`backend`] besides: the hooks to implement, the transport traits, the agreed
//! sets of the handshake, and the one-sided transport ([`backend::OneSidedEnd`] over a
//! [`backend::PeerMem`]) that OpenSHMEM and MPI on one node run.
//!
//! ## One-sided windows
//! A [`Window`] gives every rank `len` 8-byte words that every other rank can put, get,
//! compare-and-swap and fetch-add without the owner taking part (MPI-3 RMA §11, OpenSHMEM 1.4
//! §9.5–9.8); a collective [`Windows::window`] creates one on every rank. A get's value is
//! readable only once it completes: [`PendingGet`] and [`Flushed`] make that a type.
//!
//! ## R and the racy mode
//! R bounds the messages of an end in flight in every mode. A racy send is in flight from its
//! start until the transport has written it into the peer's buffer: over MPI between nodes
//! that is after the send returns, so R binds there (the paper's R receives posted into one
//! buffer); between threads, over OpenSHMEM and over MPI on one node a racy send has written
//! the peer's buffer when it returns, so it is never in flight and R never binds.
//!
//! ## Racy receive
//! [`Channel::recv`] on a racy channel is always ready, as the paper's racy receive is: it
//! returns the view at once, whatever has landed. [`Channel::can_recv`] says whether a send
//! landed since the last receive; a solver may read the view every iteration (the paper) or
//! only after a landed send.

#![warn(missing_docs)]

mod atomic;
pub mod backend;
mod channel;
mod config;
mod context;
mod element;
mod error;
mod handshake;
mod mode;
mod neighbor;
mod onesided;
mod pair;
mod reduce;
mod stats;
mod transport;
pub mod vars;
mod window;

pub use atomic::{AtomicF64, AtomicF64Slice};
/// The crate behind [`Element`]: derive `bytemuck::Pod` and `Zeroable` on a `#[repr(C)]`
/// struct to send it (re-exported so a user can name the version aiac builds with).
pub use bytemuck;
pub use channel::{close_all, Channel, Message};
pub use config::{ChannelConfig, ChannelSpec, RESERVED_TAG_BIT};
pub use context::Context;
pub use element::{Element, ElementType, RacyElement, RacyView};
pub use error::{
    CommError, ConfigError, CreateError, RecvError, ReduceError, SendError, SpecField, TrySendError,
};
pub use mode::{Async, Carries, Mode, ModeKind, Racy, Sync};
pub use neighbor::{NeighborExchange, NeighborSpec};
pub use reduce::{ReduceOp, Reduction, TreeReduction};
pub use stats::{ChannelStats, Histogram};
pub use transport::Backend;
pub use window::{
    Epoch, Flushed, IntWord, LockedWindow, PendingGet, PendingWord, TargetLock, Window,
    WindowError, WindowMode, Windows, Word,
};

/// Every trait a user of aiac needs in scope: `use chan_core::traits::*;`.
pub mod traits {
    pub use crate::backend::Collective;
    pub use crate::context::Context;
    pub use crate::mode::Mode;
    pub use crate::neighbor::NeighborExchange;
    pub use crate::reduce::Reduction;
    pub use crate::transport::Backend;
    pub use crate::window::{IntWord, Windows, Word};
}
