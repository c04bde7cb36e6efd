//! The halo exchange over Sync channels, written once for every solver: Jacobi swaps its
//! iterate's halo, the Krylov solvers the halo of the vector the next matrix-vector product
//! reads. An exchange is two steps, so a solver can compute between them (the overlapped
//! exchange): [`post`] starts every face's send, [`complete`] receives every face's message
//! into the halo. Sends only wait for a slot, which the peer freed when it received the
//! previous exchange; receives are taken in face order.

use crate::clock::Instant;
use crate::geometry::Face;
use crate::iterate::Iterate;
use crate::parts::Parts;
use crate::Error;
use chan_core::traits::*;
use chan_core::{Channel, NeighborSpec, Sync};

/// An iterate with a halo that travels between neighbours over links: the faces of a grid
/// block ([`Face`]), or the neighbouring row blocks of a sparse matrix (an index).
pub(crate) trait Halo {
    /// What names one neighbour's exchange.
    type Link: Copy + PartialEq + std::fmt::Debug;
    /// Copy the values the neighbour across `link` reads into `buf` (the message to it).
    fn pack(&self, link: Self::Link, buf: &mut [f64]);
    /// Write the neighbour's message into the halo of `link`.
    fn unpack(&mut self, link: Self::Link, data: &[f64]);
}

impl Halo for crate::field::Field {
    type Link = Face;
    fn pack(&self, face: Face, buf: &mut [f64]) {
        crate::field::Field::pack(self, face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        crate::field::Field::unpack(self, face, data);
    }
}

/// Start the send of every link of `h` (channel k serves `links[k]`), stamped `it`; timed
/// into `parts` as pack and send.
pub(crate) fn post<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    links: &[H::Link],
    it: u64,
    h: &H,
    parts: &mut Parts,
) -> Result<(), Error> {
    for (ch, &link) in chans.iter_mut().zip(links) {
        ch.set_iteration(it);
        parts.send(|fill| ch.send_with(fill), |buf| h.pack(link, buf))?;
    }
    Ok(())
}

/// Receive every face's message into the halo of `h`; timed into `parts` as wait (the
/// receive) and unpack.
pub(crate) fn complete<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    links: &[H::Link],
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    for (ch, &link) in chans.iter_mut().zip(links) {
        let t = Instant::now();
        let m = ch.recv()?;
        parts.wait += t.elapsed();
        parts.unpack(m.data().len(), || h.unpack(link, m.data()));
    }
    Ok(())
}

/// A whole exchange: [`post`], then [`complete`].
pub(crate) fn swap<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    links: &[H::Link],
    it: u64,
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    post(chans, links, it, h, parts)?;
    complete(chans, links, h, parts)
}

/// A whole exchange as one neighbourhood collective (`--exchange neighbor`): every link
/// packed into the exchange's send buffer (neighbour k serves `links[k]`), started, waited
/// for, every link unpacked from its receive buffer. The halo gets the values [`swap`] gives
/// it. Timed into `parts` as pack, send (the start), wait and unpack.
pub(crate) fn swap_neighbor<N: NeighborExchange + ?Sized, H: Halo + ?Sized>(
    nb: &mut N,
    links: &[H::Link],
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    let t = Instant::now();
    for (k, &link) in links.iter().enumerate() {
        h.pack(link, nb.send_buf(k));
    }
    parts.pack += t.elapsed();
    let t = Instant::now();
    nb.start()?;
    parts.send += t.elapsed();
    let t = Instant::now();
    nb.wait()?;
    parts.wait += t.elapsed();
    let t = Instant::now();
    for (k, &link) in links.iter().enumerate() {
        h.unpack(link, nb.recv_buf(k));
    }
    parts.unpack += t.elapsed();
    Ok(())
}

/// A whole exchange: through the neighbourhood collective `nb` when there is one
/// ([`swap_neighbor`]), over the Sync channels otherwise ([`swap`]).
pub(crate) fn swap_by<B: Backend, N: NeighborExchange + ?Sized, H: Halo + ?Sized>(
    nb: Option<&mut N>,
    chans: &mut [Channel<B, Sync>],
    links: &[H::Link],
    it: u64,
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    match nb {
        Some(nb) => swap_neighbor(nb, links, h, parts),
        None => swap(chans, links, it, h, parts),
    }
}

/// The neighbours of a neighbourhood exchange that moves what the Sync channels of `specs`
/// move: one per channel, in their order, each message of the channel's length both ways
/// (the two ends of a channel agree on its length).
pub(crate) fn neighbor_specs(specs: &[chan_core::ChannelSpec]) -> Vec<NeighborSpec> {
    specs
        .iter()
        .map(|s| NeighborSpec {
            peer: s.peer,
            send: s.config.len(),
            recv: s.config.len(),
        })
        .collect()
}

/// The channels of a block's halo: one per link (`links`, in the iterate's order), tagged
/// `tag_base` plus the link's own tag ([`Iterate::link_tag`]), `r` messages in flight, each
/// message the link's values ([`Iterate::message_len`]) and `extra` words after them.
pub(crate) fn specs<F: Iterate>(
    field: &F,
    links: &[F::Link],
    tag_base: u32,
    r: usize,
    extra: usize,
) -> Result<Vec<chan_core::ChannelSpec>, Error> {
    use chan_core::{ChannelConfig, ChannelSpec, CreateError};
    links
        .iter()
        .map(|&l| {
            let cfg =
                ChannelConfig::new(field.message_len(l) + extra, r).map_err(CreateError::from)?;
            ChannelSpec::new(field.link_peer(l), tag_base + field.link_tag(l), cfg)
                .map_err(|e| Error::Create(e.into()))
        })
        .collect()
}
