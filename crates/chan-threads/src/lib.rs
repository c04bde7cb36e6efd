//! # chan-threads: aiac's in-process backend
//!
//! A world of N threads, each a rank, with channels in all three modes and the tree
//! reduction. No system library: the embedded default, the test bed of the channel model,
//! and the hybrid story (threads inside a rank).
//!
//! ```
//! use chan_threads::World;
//! use chan_core::{traits::*, Async, ChannelConfig, ChannelSpec};
//!
//! let sums = World::new(2).unwrap().run(|ctx| {
//!     let peer = 1 - ctx.rank();
//!     let spec = ChannelSpec::new(peer, 0, ChannelConfig::new(4, 2).unwrap()).unwrap();
//!     let mut ch = ctx.open::<Async>(&[spec]).unwrap().remove(0);
//!     ch.send(&[ctx.rank() as f64; 4]).unwrap();
//!     let got = loop {
//!         if let Some(m) = ch.recv().unwrap() {
//!             break m.iter().sum::<f64>();
//!         }
//!     };
//!     ch.close().unwrap();
//!     got
//! });
//! assert_eq!(sums, vec![4.0, 0.0]);
//! ```

#![warn(missing_docs)]

mod lane;
mod sync;

#[cfg(not(loom))]
mod endpoint;
#[cfg(not(loom))]
mod window;
#[cfg(not(loom))]
mod world;

#[cfg(not(loom))]
pub use endpoint::{MailboxEnd, RacyEnd};
#[cfg(not(loom))]
pub use window::ThreadWindow;
#[cfg(not(loom))]
pub use world::{ThreadCtx, World, WorldError};

/// The threads backend's marker type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Threads;

#[cfg(not(loom))]
impl chan_core::Backend for Threads {
    const NAME: &'static str = "threads";
    type Mailbox = MailboxEnd;
    type Racy = RacyEnd;
}
