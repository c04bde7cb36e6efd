//! # chan-core: aiac's channel model
//!
//! A *channel* joins two processes (MPI ranks, SHMEM PEs or threads) and carries fixed-length
//! messages of `f64` in both directions. Its **mode** is a type, chosen at creation:
//!
//! | mode | what a receive gives | flow control |
//! |---|---|---|
//! | [`Sync`] | every message once, in order ([`Channel::recv`] blocks) | at most R unreceived; [`Channel::send`] blocks |
//! | [`Async`] | the **newest whole message** that arrived, with its sender's stamp; older ones are discarded | at most R in flight; [`Channel::try_send`] says when all R are busy |
//! | [`Racy`] | an [`AtomicF64Slice`] the transport may write while it is read | as Async |
//!
//! Operations that only make sense in one mode exist only on that mode's channel. Each of
//! these compiles in its own mode:
//!
//! ```no_run
//! # use chan_core::{Channel, Async, Racy, Sync, threads::Threads};
//! fn right_modes(a: &mut Channel<Threads, Async>, r: &mut Channel<Threads, Racy>,
//!                s: &mut Channel<Threads, Sync>) {
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
//! # use chan_core::{Channel, Async, threads::Threads};
//! fn racy_view_on_async(ch: &Channel<Threads, Async>) {
//!     let _ = ch.view(); // only Channel<_, Racy> has a racy view
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Racy, threads::Threads};
//! fn plain_slice_from_racy(ch: &mut Channel<Threads, Racy>) {
//!     let v: &[f64] = ch.recv().unwrap(); // a racy receive is an atomic view, never &[f64]
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Racy, threads::Threads};
//! fn whole_message_from_racy(ch: &Channel<Threads, Racy>) {
//!     let _ = ch.latest(); // a racy channel never lends a whole message
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Async, threads::Threads};
//! fn in_order_recv_on_async(ch: &mut Channel<Threads, Async>) {
//!     let _ = ch.try_recv(); // only Sync delivers every message, in order
//! }
//! ```
//! ```compile_fail
//! # use chan_core::{Channel, Async, threads::Threads};
//! fn recv_into_on_async(ch: &mut Channel<Threads, Async>, out: &mut [f64]) {
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
//! Backends implement the transport traits in [`transport`] and the [`Context`] trait; the
//! channel logic (newest-wins, ordering, statistics) lives here, once. The threads backend
//! ([`threads`]) needs no system library.

#![warn(missing_docs)]

mod atomic;
mod channel;
mod config;
mod context;
mod error;
mod mode;
mod reduce;
mod stats;
mod sync;
pub mod threads;
pub mod transport;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use atomic::{AtomicF64, AtomicF64Slice};
pub use channel::{close_all, Channel, Message};
pub use config::{ChannelConfig, ChannelSpec, RESERVED_TAG_BIT};
pub use context::Context;
pub use error::{
    CommError, ConfigError, CreateError, Field, RecvError, ReduceError, SendError, TrySendError,
};
pub use mode::{Async, Mode, ModeKind, Racy, Sync};
pub use reduce::{ReduceOp, Reduction, TreeReduction};
pub use stats::{ChannelStats, Histogram};

/// Every trait a user of aiac needs in scope: `use chan_core::traits::*;`.
pub mod traits {
    pub use crate::context::Context;
    pub use crate::mode::Mode;
    pub use crate::reduce::Reduction;
    pub use crate::transport::{Backend, MailboxTransport, RacyTransport};
}
