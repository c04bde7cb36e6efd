//! What Jacobi's loops (`solver/`) need of an iterate, so that one sync loop and one async
//! loop serve every iterate alike: the one-plane [`Field`], the deep halo's (`deep/`), a
//! matrix's row block (`sparse/iterate.rs`), a hybrid rank's team (`hybrid.rs`) and the
//! shared-memory threads' slabs (`shared/planes.rs`). The loops are generic over
//! [`Iterate`] and monomorphised for each: no dynamic dispatch in a sweep.

use crate::field::Field;
use crate::geometry::{Dims, Face};
use crate::halo::{self, Halo};
use crate::kernel::Region;
use crate::multisplit::{Fresher, InnerSolve};
use crate::parts::Parts;
use crate::problem::Problem;
use crate::slow::Slowdown;
use crate::Error;
use chan_core::backend::Lists;
use chan_core::traits::*;
use chan_core::{AtomicF64Slice, Channel, Sync};

/// A block's iterate with a halo that travels between neighbours ([`Halo`]), swept by the
/// Jacobi loops: what every loop needs of every iterate. What only some iterates can do is a
/// capability trait of its own, required where it is used:
///
/// * [`SolveInner`]: multisplitting's inner solve in place of a sweep (the one-plane
///   [`Field`] and a matrix's row block), required by the loops' step
///   ([`InnerSolve`](crate::multisplit::InnerSolve) as [`Step`](crate::solver::Step));
/// * [`SweepRegions`]: the overlapped exchange's sweep by regions ([`Field`] alone), required
///   by `dispatch.rs` where it runs `--exchange overlap`;
/// * [`SnapshotOf`]: the snapshot detection's copies, through [`Iterate::Snapshot`]: `Self`
///   for an iterate that has them ([`Field`]), the uninhabited [`Lacks`] for one that has
///   none, whose [`Iterate::snapshot_buffer`] names the setting that rules the detection
///   out.
pub(crate) trait Iterate: Halo + Sized {
    /// The snapshot detection's buffer ([`SnapshotOf`]), or [`Lacks`].
    type Snapshot: SnapshotOf<Self>;

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

    /// The snapshot detection: a buffer to take snapshots into, allocated once; or, for an
    /// iterate with no snapshot, the setting that rules it out (the run refuses the
    /// detection naming it).
    fn snapshot_buffer(&self) -> Result<Self::Snapshot, crate::Setting>;

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

    /// Start from the global iterate `x` ([`crate::Start`], the grid's interior points x
    /// fastest): this block's part of it into the owned points. An iterate that cannot
    /// start from one (or be checkpointed) says which setting rules it out.
    fn start_from(&mut self, _x: &[f64]) -> Result<(), Error> {
        self.restartable()
    }

    /// Whether this iterate can start from a given one and be checkpointed: an error naming
    /// the settings that rule it out, for one that cannot (deep halos, hybrid ranks).
    fn restartable(&self) -> Result<(), Error> {
        Err(Error::Start(format!(
            "{} above 1 and {} above 1 start from the problem's iterate and take no \
             checkpoint",
            crate::Setting::HaloDepth.words(),
            crate::Setting::ThreadsPerRank.words()
        )))
    }

    /// The owned values as bits into `out`, in the order [`Iterate::assemble_into`] reads
    /// them (no allocation once `out` has the room).
    fn owned_bits_into(&self, _out: &mut Vec<u64>) {}

    /// The global iterate (the order of [`Iterate::start_from`]) from every rank's
    /// [`Iterate::owned_bits_into`], gathered in rank order, into `out`.
    fn assemble_into(&self, _blocks: &Lists, _out: &mut Vec<f64>) {}
}

/// Capability: multisplitting's inner solve of the block in place of a sweep
/// (`multisplit.rs`).
pub(crate) trait SolveInner: Iterate {
    /// Solve the block with `inner`, the halo fixed, `fresher` asked between inner iterations
    /// whether to stop early: Σ r² of the iterate it started from.
    fn solve_inner(
        &mut self,
        inner: &mut InnerSolve,
        slow: &mut Slowdown,
        fresher: &mut Fresher<'_, Self>,
    ) -> Result<f64, Error>;
}

/// Capability: the overlapped exchange's sweep by regions (`--exchange overlap`).
pub(crate) trait SweepRegions: Iterate {
    /// Sweep `region` into the next iterate without swapping: Σ r² of the current iterate
    /// over it when `resid`, else 0.
    fn sweep_region(&mut self, region: &Region, resid: bool) -> f64;

    /// End a sweep done region by region.
    fn finish_sweep(&mut self);
}

/// Capability: the snapshot detection's buffer for iterate `F` (`--detect snapshot`): a copy
/// of its current iterate, owned points and halo, whose faces travel and whose residual is
/// reduced.
pub(crate) trait SnapshotOf<F: Halo> {
    /// Take a snapshot: copy `src`'s current iterate into this buffer.
    fn take_from(&mut self, src: &F);
    /// Restore it: copy this buffer into `dst`'s current iterate.
    fn restore_into(&self, dst: &mut F);
    /// The snapshot's face across `link`, as [`Halo::pack`].
    fn pack(&self, link: F::Link, buf: &mut [f64]);
    /// A neighbour's snapshot face into the snapshot's halo, as [`Halo::unpack`].
    fn unpack(&mut self, link: F::Link, data: &[f64]);
    /// Σ r² of the snapshot.
    fn residual_sq(&self) -> f64;
}

/// The capability an iterate lacks: a type with no value, so that none of its methods can
/// be called (an iterate whose [`Iterate::snapshot_buffer`] refuses gives none).
#[derive(Debug)]
pub(crate) enum Lacks {}

impl<F: Halo> SnapshotOf<F> for Lacks {
    fn take_from(&mut self, _: &F) {
        match *self {}
    }
    fn restore_into(&self, _: &mut F) {
        match *self {}
    }
    fn pack(&self, _: F::Link, _: &mut [f64]) {
        match *self {}
    }
    fn unpack(&mut self, _: F::Link, _: &[f64]) {
        match *self {}
    }
    fn residual_sq(&self) -> f64 {
        match *self {}
    }
}

impl Iterate for Field {
    type Snapshot = Field;
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
    fn restartable(&self) -> Result<(), Error> {
        Ok(())
    }
    fn start_from(&mut self, x: &[f64]) -> Result<(), Error> {
        let points = self.geometry().global.volume();
        if x.len() != points {
            return Err(Error::Start(format!(
                "{} values for a grid of {points} interior points",
                x.len()
            )));
        }
        self.set_from_global(x);
        Ok(())
    }
    fn owned_bits_into(&self, out: &mut Vec<u64>) {
        Field::owned_bits_into(self, out);
    }
    fn assemble_into(&self, blocks: &Lists, out: &mut Vec<f64>) {
        let g = self.geometry();
        let plan = crate::geometry::Plan {
            global: g.global,
            procs: g.procs,
            local: g.local,
        };
        let (gx, gy) = (g.global.x, g.global.y);
        out.clear();
        out.resize(g.global.volume(), 0.0);
        for r in 0..blocks.len() {
            let geo = crate::geometry::Geometry::new(&plan, r);
            let n = geo.local;
            let mut rows = blocks.list(r).chunks_exact(n.x);
            for z in 0..n.z {
                for y in 0..n.y {
                    let (ox, oy, oz) = (geo.origin[0], geo.origin[1] + y, geo.origin[2] + z);
                    let at = (ox - 1) + gx * ((oy - 1) + gy * (oz - 1));
                    let row = rows.next().expect("a block's rows");
                    for (o, &b) in out[at..at + n.x].iter_mut().zip(row) {
                        *o = f64::from_bits(b);
                    }
                }
            }
        }
    }
}

impl SolveInner for Field {
    fn solve_inner(
        &mut self,
        inner: &mut InnerSolve,
        slow: &mut Slowdown,
        fresher: &mut Fresher<'_, Self>,
    ) -> Result<f64, Error> {
        inner.solve(self, slow, fresher)
    }
}

impl SweepRegions for Field {
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

impl SnapshotOf<Field> for Field {
    fn take_from(&mut self, src: &Field) {
        self.copy_current_from(src);
    }
    fn restore_into(&self, dst: &mut Field) {
        dst.copy_current_from(self);
    }
    fn pack(&self, face: Face, buf: &mut [f64]) {
        Field::pack(self, face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        Field::unpack(self, face, data);
    }
    fn residual_sq(&self) -> f64 {
        Field::residual_sq(self)
    }
}
