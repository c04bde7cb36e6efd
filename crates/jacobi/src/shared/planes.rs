//! The shared-planes iterate of the async and racy shared-memory variants: each thread's slab
//! ([`Field`]) with the halo it reads straight from its neighbours' boundary planes, stamped
//! by the sweep that wrote them, instead of from channels. Jacobi's async loop runs it with no
//! channel to take a halo from: the iterate reads its neighbours' newest planes before each
//! sweep and publishes its own after it ([`Iterate::sweep_async`]), and the certification's
//! synchronous exchange is a barrier between publishing and reading every plane
//! ([`Iterate::exchange`]).

use crate::field::Field;
use crate::geometry::{Axis, Dims, Face};
use crate::halo::Halo;
use crate::iterate::{Iterate, Lacks};
use crate::parts::Parts;
use crate::problem::Problem;
use crate::Error;
use chan_core::backend::{IdleStreak, WaitPolicy};
use chan_core::traits::Backend;
use chan_core::{AtomicF64, AtomicF64Slice, Channel, Sync};
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Release},
};
use std::sync::{Barrier, Mutex, MutexGuard};

/// The boundary planes threads share in the async and racy variants: for each thread, its
/// lowest and highest owned plane, written by it and read by its neighbours, each with the
/// stamp of the sweep that wrote it (the owner's iteration count), so that a reader knows
/// whether there is anything new to read.
pub(crate) trait BoundaryPlanes: std::marker::Sync + Sized {
    /// Planes for `threads` threads of `len` values each.
    fn new(threads: usize, len: usize) -> Self;
    /// Thread `t` publishes its owned layer next to `face` (z− or z+), stamped `stamp`.
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64);
    /// Copy thread `owner`'s plane next to `owner_face` into `field`'s halo beyond `face` if
    /// its stamp differs from `seen` (always with `force`), and set `seen` to the stamp
    /// read. True when the halo was written.
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool;
}

/// Async: a lock per boundary plane, held while the plane (and its stamp) is written or read.
pub(crate) struct LockedPlanes(Vec<[LockedPlane; 2]>);

/// A boundary plane under its lock: the stamp of the sweep that wrote it, and its values.
type LockedPlane = Mutex<(u64, Vec<f64>)>;

fn lock(m: &LockedPlane) -> MutexGuard<'_, (u64, Vec<f64>)> {
    // A thread that panicked while holding the plane left whole values in it (the writes are
    // plain stores of f64); the run is failing anyway, keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BoundaryPlanes for LockedPlanes {
    fn new(threads: usize, len: usize) -> Self {
        let plane = || Mutex::new((0, vec![0.0; len]));
        LockedPlanes((0..threads).map(|_| [plane(), plane()]).collect())
    }
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64) {
        let mut p = lock(&self.0[t][usize::from(face.high)]);
        field.pack(face, &mut p.1);
        p.0 = stamp;
    }
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool {
        let p = lock(&self.0[owner][usize::from(owner_face.high)]);
        if !force && p.0 == *seen {
            return false;
        }
        field.unpack(face, &p.1);
        *seen = p.0;
        true
    }
}

/// Racy: atomic boundary planes, no locks; relaxed loads and stores, so a reader may see a
/// plane half old, half new (each value whole). The stamp is stored after the values
/// (Release) and loaded before them (Acquire): a reader that sees stamp s reads values of
/// sweep s or newer, and any newer sweep changes the stamp, so none is missed for good.
pub(crate) struct AtomicPlanes(Vec<[AtomicPlane; 2]>);

/// A racy boundary plane: the stamp of the newest sweep that wrote it, and its values.
type AtomicPlane = (AtomicU64, Box<[AtomicF64]>);

impl BoundaryPlanes for AtomicPlanes {
    fn new(threads: usize, len: usize) -> Self {
        let plane = || {
            let vals = (0..len).map(|_| AtomicF64::new(0.0)).collect::<Box<[_]>>();
            (AtomicU64::new(0), vals)
        };
        AtomicPlanes((0..threads).map(|_| [plane(), plane()]).collect())
    }
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64) {
        let (s, vals) = &self.0[t][usize::from(face.high)];
        field.pack_atomic(face, AtomicF64Slice::from_atomics(vals));
        s.store(stamp, Release);
    }
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool {
        let (s, vals) = &self.0[owner][usize::from(owner_face.high)];
        let stamp = s.load(Acquire);
        if !force && stamp == *seen {
            return false;
        }
        field.unpack_atomic(face, AtomicF64Slice::from_atomics(vals));
        *seen = stamp;
        true
    }
}

/// What the threads of an async or racy run share: the boundary planes, the barrier of the
/// synchronous exchange (certification, initial and final residual), and how a thread that
/// finds nothing new in a neighbour's plane waits.
pub(crate) struct SharedPlanes<P> {
    planes: P,
    threads: usize,
    barrier: Barrier,
    policy: WaitPolicy,
}

impl<P: BoundaryPlanes> SharedPlanes<P> {
    /// Planes for `threads` slabs of `plane_len` values per plane.
    pub(crate) fn new(threads: usize, plane_len: usize, policy: WaitPolicy) -> Self {
        SharedPlanes {
            planes: P::new(threads, plane_len),
            threads,
            barrier: Barrier::new(threads),
            policy,
        }
    }
}

/// What a thread knows of its neighbours' planes (z−, z+): the stamp of the plane it last
/// read, and its reads in a row that found nothing new.
#[derive(Default)]
struct Seen {
    stamps: [u64; 2],
    idle: [IdleStreak; 2],
}

/// Thread `t`'s slab, its halo read from the shared planes.
pub(crate) struct SlabField<'p, P> {
    field: Field,
    shared: &'p SharedPlanes<P>,
    t: usize,
    seen: Seen,
    /// Sweeps done: the stamp of the planes published last.
    stamp: u64,
}

impl<'p, P: BoundaryPlanes> SlabField<'p, P> {
    /// Thread `t`'s slab `field` over `shared`.
    pub(crate) fn new(field: Field, shared: &'p SharedPlanes<P>, t: usize) -> Self {
        SlabField {
            field,
            shared,
            t,
            seen: Seen::default(),
            stamp: 0,
        }
    }

    /// The slab's field.
    pub(crate) fn into_field(self) -> Field {
        self.field
    }

    /// Read the neighbours' planes into the halo: those with a stamp not seen yet (all of
    /// them with `force`). A neighbour with nothing new counts as an empty poll: the thread
    /// gives its core away as the run's [`WaitPolicy`] says, as a threads-backend receive
    /// does. Without it, on a machine with fewer free cores than threads, the two outer
    /// threads of three swept thousands of times a time slice on the plane of a middle
    /// thread that was not running (docs/performance.md, "Shared-memory async and racy").
    fn read_halos(&mut self, force: bool) {
        let (t, threads) = (self.t, self.shared.threads);
        let (lo, hi) = (Face::new(Axis::Z, false), Face::new(Axis::Z, true));
        let sides = [
            (t.checked_sub(1), hi, lo),
            (Some(t + 1).filter(|&n| n < threads), lo, hi),
        ];
        for (k, (owner, owner_face, face)) in sides.into_iter().enumerate() {
            let Some(owner) = owner else { continue };
            let new = self.shared.planes.read(
                owner,
                owner_face,
                &mut self.field,
                face,
                &mut self.seen.stamps[k],
                force,
            );
            if force {
                continue;
            }
            if new {
                self.seen.idle[k].found();
            } else {
                self.seen.idle[k].empty(self.shared.policy);
            }
        }
    }

    /// Publish the owned planes next to neighbours, stamped with the sweeps done.
    fn publish(&self) {
        let (t, threads) = (self.t, self.shared.threads);
        if t > 0 {
            let face = Face::new(Axis::Z, false);
            self.shared.planes.publish(t, face, &self.field, self.stamp);
        }
        if t + 1 < threads {
            let face = Face::new(Axis::Z, true);
            self.shared.planes.publish(t, face, &self.field, self.stamp);
        }
    }
}

impl<P: BoundaryPlanes> Halo for SlabField<'_, P> {
    type Link = Face;
    fn pack(&self, face: Face, buf: &mut [f64]) {
        self.field.pack(face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        self.field.unpack(face, data);
    }
}

impl<P: BoundaryPlanes> Iterate for SlabField<'_, P> {
    type Snapshot = Lacks;
    fn link_peer(&self, face: Face) -> usize {
        self.field.link_peer(face)
    }
    fn link_tag(&self, face: Face) -> u32 {
        self.field.link_tag(face)
    }
    fn message_len(&self, face: Face) -> usize {
        self.field.face_len(face)
    }
    fn unpack_atomic(&mut self, face: Face, view: &AtomicF64Slice) {
        self.field.unpack_atomic(face, view);
    }
    /// The synchronous exchange, collective over the run's threads (it has no channels):
    /// publish the current planes, wait for every thread to have published, read every
    /// neighbour's. No thread publishes newer planes before every thread has read these:
    /// the blocking sum that follows each exchange in the loop waits for them all.
    fn exchange<B: Backend>(
        &mut self,
        _chans: &mut [Channel<B, Sync>],
        _links: &[Face],
        _it: u64,
        _parts: &mut Parts,
    ) -> Result<(), Error> {
        self.publish();
        self.shared.barrier.wait();
        self.read_halos(true);
        Ok(())
    }
    fn place(&self) -> ([usize; 3], Dims) {
        Iterate::place(&self.field)
    }
    fn residual_sq(&self) -> f64 {
        self.field.residual_sq()
    }
    fn snapshot_buffer(&self) -> Result<Lacks, crate::Setting> {
        Err(crate::Setting::Backend)
    }
    /// Read whatever is new, sweep, publish.
    fn sweep_block(&mut self, m: u64, _resid: bool) -> f64 {
        debug_assert_eq!(m, 1);
        self.sweep_async()
    }
    fn sweep_async(&mut self) -> f64 {
        self.read_halos(false);
        let r = self.field.sweep();
        self.stamp += 1;
        self.publish();
        r
    }
    fn error_max(&self, problem: &Problem) -> Option<f64> {
        self.field.error_max(problem)
    }
}
