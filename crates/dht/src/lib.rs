//! # dht: a distributed hash table over one-sided windows
//!
//! A [`Table`] maps nonzero `u64` or `i64` keys to values (`u64`, `i64`, `f64`, or `()` for a
//! [`Set`]) in a window of chan-core spread over every rank of a world: open addressing with
//! linear probing, a key's probe sequence starting at its hash and stepping across rank
//! boundaries. Any rank inserts and looks up any key with one-sided operations alone; the
//! owner of a slot takes no part. A slot is claimed by compare-and-swap or under the owner's
//! exclusive lock ([`Insert`]). The table is written once against
//! [`Windows`](chan_core::Windows), so it runs on every backend: threads (chan-threads), MPI
//! (chan-mpi, `MPI_Win_allocate`) and OpenSHMEM (chan-shmem, the symmetric heap).
//!
//! ```
//! use chan_core::traits::*;
//! use dht::{Insert, Table};
//!
//! let world = chan_threads::World::new(3).unwrap();
//! let found = world.run(|ctx| {
//!     let rank = ctx.rank() as u64;
//!     // 16 slots per rank, each a key and its value; collective.
//!     let mut squares = Table::<_, u64, u64>::new(ctx, 16, Insert::Cas)?;
//!     for k in (1..=12).filter(|k| k % 3 == rank) {
//!         squares.insert(k, k * k)?;
//!     }
//!     squares.fence()?; // every rank's inserts are in
//!     let got = (squares.get(7)?, squares.get(13)?);
//!     squares.free()?;
//!     Ok::<_, dht::TableError>(got)
//! });
//! assert!(found.into_iter().all(|r| r == Ok((Some(49), None))));
//! ```
//!
//! [`bench`](mod@bench) is Maynard's benchmark of the table (insert, probe and look up, timed and
//! judged), which `aiac dht` runs, prints and plots.

pub mod bench;
mod hash;
mod table;

pub use hash::{fmix64, splitmix64};
pub use table::{Found, Insert, Placed, Set, Table, TableError, Value};
