//! A halo exchange as one collective over a rank's neighbours (MPI-3's
//! `MPI_Ineighbor_alltoallv`): the backend makes it once from the list of neighbours and each
//! one's message lengths ([`crate::Context::neighbor_exchange`]); the solver then packs every
//! outgoing message into [`NeighborExchange::send_buf`], starts the exchange, waits for it and
//! reads every incoming message from [`NeighborExchange::recv_buf`]. The buffers are the
//! exchange's own, allocated once.

use crate::error::CommError;

/// One neighbour of a [`NeighborExchange`]: its rank and the lengths (in `f64`) of the message
/// to it and of the one from it. Both ends list each other, with the lengths swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborSpec {
    /// The neighbour's rank.
    pub peer: usize,
    /// Values this rank sends it per exchange.
    pub send: usize,
    /// Values this rank receives from it per exchange.
    pub recv: usize,
}

/// A started-then-completed exchange with every neighbour at once. Neighbour k is the k-th
/// [`NeighborSpec`] it was made from.
pub trait NeighborExchange {
    /// The neighbours, in the order they were given.
    fn neighbors(&self) -> usize;
    /// The message to neighbour k, to fill before [`NeighborExchange::start`]. Panics while
    /// an exchange is in progress (MPI reads the buffer until it completes).
    fn send_buf(&mut self, k: usize) -> &mut [f64];
    /// Start sending every message and receiving every neighbour's. Collective over the
    /// neighbours: each of them starts its own.
    fn start(&mut self) -> Result<(), CommError>;
    /// Progress the exchange: `true` once it has completed (and it no longer is in
    /// progress).
    fn test(&mut self) -> Result<bool, CommError>;
    /// Block until the exchange completes.
    fn wait(&mut self) -> Result<(), CommError>;
    /// Neighbour k's message of the last completed exchange. Panics while an exchange is in
    /// progress.
    fn recv_buf(&self, k: usize) -> &[f64];
    /// Started and not yet completed.
    fn in_progress(&self) -> bool;
}
