//! What Jacobi's loops (`solver.rs`) need of an iterate, so that one sync loop and one async
//! loop serve the one-plane [`Field`] and the deep halo's iterate (`deep.rs`) alike. The loops
//! are generic over [`Iterate`] and monomorphised for each: no dynamic dispatch in a sweep.

use crate::field::Field;
use crate::geometry::{Dims, Face};
use crate::halo::{self, Halo};
use crate::kernel::Region;
use crate::multisplit::{Fresher, InnerSolve};
use crate::parts::Parts;
use crate::problem::Problem;
use crate::slow::Slowdown;
use crate::Error;
use chan_core::traits::*;
use chan_core::{AtomicF64Slice, Channel, Sync};

/// A block's iterate with a halo that travels between neighbours ([`Halo`]), swept by the
/// Jacobi loops.
///
/// The last three methods are the one-plane iterate's alone (and the row block's, for
/// multisplitting's inner solve): multisplitting's inner solve and the overlapped exchange's
/// sweep by regions. [`Config::validate`](crate::Config::validate) refuses them with a deep
/// halo (`--solver multisplit`, `--exchange overlap`) and `validate_matrix` the overlapped
/// exchange with a matrix, so no run calls them on one; their default panics saying so.
pub(crate) trait Iterate: Halo {
    /// The rank across `link`.
    fn link_peer(&self, link: Self::Link) -> usize;

    /// The tag of `link`'s channel, above a base (0..3: channels of different links to one
    /// peer differ).
    fn link_tag(&self, link: Self::Link) -> u32;

    /// Values in a message across `link`, both ways (a channel's length is the same at both
    /// ends).
    fn message_len(&self, link: Self::Link) -> usize;

    /// Write a racy view into the halo of `link` (relaxed atomic loads, in the order of
    /// [`Halo::unpack`]).
    fn unpack_atomic(&mut self, link: Self::Link, view: &AtomicF64Slice);

    /// A blocking exchange of the halo over Sync channels (channel k serves `links[k]`),
    /// stamped `it`: every link sent, then every link received ([`halo::swap`]), timed into
    /// `parts`.
    fn exchange<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        links: &[Self::Link],
        it: u64,
        parts: &mut Parts,
    ) -> Result<(), Error> {
        halo::swap(chans, links, it, self, parts)
    }

    /// The block's coordinates in the process grid and its owned extent, for the record (a
    /// matrix's row block: `[rank, 0, 0]` and rows × 1 × 1).
    fn place(&self) -> ([usize; 3], Dims);

    /// `--exchange blocking`'s pairing of sends and receives by grid axis: the link across
    /// `face`, for an iterate on the grid. `None` elsewhere (the configuration refuses the
    /// blocking exchange for a matrix).
    fn face_link(&self, _face: Face) -> Option<Self::Link> {
        None
    }

    /// Σ r² over the owned points, with the halo as last exchanged.
    fn residual_sq(&self) -> f64;

    /// The snapshot detection: a second iterate to take snapshots into, allocated once; or,
    /// for an iterate with no snapshot, the setting that rules it out (the run refuses the
    /// detection naming it).
    fn snapshot_buffer(&self) -> Result<Self, crate::Setting>
    where
        Self: Sized;

    /// Copy `src`'s current iterate, owned points and halo, into this one's: taking a
    /// snapshot (`src` the iterate, `self` the buffer) and restoring it (the other way round).
    /// Only for iterates whose [`Iterate::snapshot_buffer`] gives one.
    fn copy_current_from(&mut self, _src: &Self) {
        unreachable!(
            "only iterates with a snapshot buffer take snapshots (Iterate::snapshot_buffer)"
        )
    }

    /// Unpack messages into the current iterate's halo only: the sync loop with an exchange
    /// before every sweep ([`Field::set_halo_current_only`]). Nothing by default.
    fn set_halo_current_only(&mut self, _on: bool) {}

    /// The sweeps of the sync loop's next block, `left` iterations before `--max-iters`: one
    /// by default (an exchange per sweep, at most).
    fn block_len(&self, _left: u64) -> u64 {
        1
    }

    /// The sync loop's block of `m` sweeps ([`Iterate::block_len`]): Σ r² of the iterate the
    /// last one started from when `resid` (a check follows), else 0.
    fn sweep_block(&mut self, m: u64, resid: bool) -> f64;

    /// One sweep of the async and racy loops, with whatever halo is there: Σ r² of the
    /// iterate it started from.
    fn sweep_async(&mut self) -> f64;

    /// The largest |u − exact| over the owned points, for a problem with a known solution.
    fn error_max(&self, problem: &Problem) -> Option<f64>;

    /// Multisplitting's inner solve of the block in place of a sweep (`multisplit.rs`):
    /// Σ r² of the iterate it started from.
    fn solve_inner(
        &mut self,
        _inner: &mut InnerSolve,
        _slow: &mut Slowdown,
        _fresher: &mut Fresher<'_, Self>,
    ) -> Result<f64, Error> {
        unreachable!("multisplitting has no deep halo: Method::Multisplit holds no depth, so dispatch.rs runs it over Field and SparseIterate only")
    }

    /// Sweep `region` into the next iterate without swapping (the overlapped exchange): Σ r²
    /// of the current iterate over it when `resid`, else 0.
    fn sweep_region(&mut self, _region: &Region, _resid: bool) -> f64 {
        unreachable!("the overlapped exchange has no deep-halo form (Config::validate refuses it with k > 1)")
    }

    /// End a sweep done region by region.
    fn finish_sweep(&mut self) {
        unreachable!("the overlapped exchange has no deep-halo form (Config::validate refuses it with k > 1)")
    }
}

impl Iterate for Field {
    fn link_peer(&self, face: Face) -> usize {
        self.geometry().neighbours[face.index()].expect("links are faces with a neighbour")
    }
    fn link_tag(&self, face: Face) -> u32 {
        face.axis.index() as u32
    }
    fn message_len(&self, face: Face) -> usize {
        Field::face_len(self, face)
    }
    fn place(&self) -> ([usize; 3], Dims) {
        let g = self.geometry();
        (g.coords, g.local)
    }
    fn face_link(&self, face: Face) -> Option<Face> {
        Some(face)
    }
    fn unpack_atomic(&mut self, face: Face, view: &AtomicF64Slice) {
        Field::unpack_atomic(self, face, view);
    }
    fn residual_sq(&self) -> f64 {
        Field::residual_sq(self)
    }
    /// A clone whose messages unpack into the current array only: its residual reads no
    /// other.
    fn snapshot_buffer(&self) -> Result<Self, crate::Setting> {
        let mut snap = self.clone();
        snap.set_halo_current_only(true);
        Ok(snap)
    }
    fn copy_current_from(&mut self, src: &Self) {
        Field::copy_current_from(self, src);
    }
    fn set_halo_current_only(&mut self, on: bool) {
        Field::set_halo_current_only(self, on);
    }
    /// One sweep; without `resid` the step that skips the residual, as the C programs do.
    fn sweep_block(&mut self, m: u64, resid: bool) -> f64 {
        debug_assert_eq!(m, 1);
        if resid {
            self.sweep()
        } else {
            self.step();
            0.0
        }
    }
    fn sweep_async(&mut self) -> f64 {
        self.sweep()
    }
    fn error_max(&self, problem: &Problem) -> Option<f64> {
        Field::error_max(self, problem)
    }
    fn solve_inner(
        &mut self,
        inner: &mut InnerSolve,
        slow: &mut Slowdown,
        fresher: &mut Fresher<'_, Self>,
    ) -> Result<f64, Error> {
        inner.solve(self, slow, fresher)
    }
    fn sweep_region(&mut self, region: &Region, resid: bool) -> f64 {
        if resid {
            Field::sweep_region(self, region)
        } else {
            self.step_region(region);
            0.0
        }
    }
    fn finish_sweep(&mut self) {
        Field::finish_sweep(self);
    }
}
