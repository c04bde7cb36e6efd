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
use chan_core::{Channel, Sync};

/// An array with a one-cell halo whose faces travel between neighbours.
pub(crate) trait Halo {
    /// Copy the owned layer next to `face` into `buf` (the message to the neighbour there).
    fn pack(&self, face: Face, buf: &mut [f64]);
    /// Write the neighbour's message into the halo beyond `face`.
    fn unpack(&mut self, face: Face, data: &[f64]);
}

impl Halo for crate::field::Field {
    fn pack(&self, face: Face, buf: &mut [f64]) {
        crate::field::Field::pack(self, face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        crate::field::Field::unpack(self, face, data);
    }
}

/// Start the send of every face of `h` (channel k serves `faces[k]`), stamped `it`; timed
/// into `parts` as pack and send.
pub(crate) fn post<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    faces: &[Face],
    it: u64,
    h: &H,
    parts: &mut Parts,
) -> Result<(), Error> {
    for (ch, &face) in chans.iter_mut().zip(faces) {
        ch.set_iteration(it);
        parts.send(|fill| ch.send_with(fill), |buf| h.pack(face, buf))?;
    }
    Ok(())
}

/// Receive every face's message into the halo of `h`; timed into `parts` as wait (the
/// receive) and unpack.
pub(crate) fn complete<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    faces: &[Face],
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    for (ch, &face) in chans.iter_mut().zip(faces) {
        let t = Instant::now();
        let m = ch.recv()?;
        parts.wait += t.elapsed();
        parts.unpack(|| h.unpack(face, m.data()));
    }
    Ok(())
}

/// A whole exchange: [`post`], then [`complete`].
pub(crate) fn swap<B: Backend, H: Halo + ?Sized>(
    chans: &mut [Channel<B, Sync>],
    faces: &[Face],
    it: u64,
    h: &mut H,
    parts: &mut Parts,
) -> Result<(), Error> {
    post(chans, faces, it, h, parts)?;
    complete(chans, faces, h, parts)
}

/// The channels of a block's halo, one-plane or deep: one per face with a neighbour
/// (`faces`, in [`Face::ALL`] order), tagged `tag_base` plus the face's axis, `r` messages in
/// flight, each message the face's values and `extra` words after them.
pub(crate) fn specs<F: Iterate>(
    field: &F,
    faces: &[Face],
    tag_base: u32,
    r: usize,
    extra: usize,
) -> Result<Vec<chan_core::ChannelSpec>, Error> {
    use chan_core::{ChannelConfig, ChannelSpec, CreateError};
    let geom = field.geometry();
    faces
        .iter()
        .map(|&f| {
            let peer = geom.neighbours[f.index()].expect("faces have neighbours");
            let cfg =
                ChannelConfig::new(field.face_len(f) + extra, r).map_err(CreateError::from)?;
            ChannelSpec::new(peer, tag_base + f.axis.index() as u32, cfg)
                .map_err(|e| Error::Create(e.into()))
        })
        .collect()
}
