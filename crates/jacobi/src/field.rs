//! One rank's unknowns: two arrays of the block's [`Shape`] (the current iterate and the next),
//! swapped after each sweep, and the halo faces packed into and out of messages.
//!
//! The halo is written into **both** arrays whenever it changes, so after a swap the current
//! array still holds the newest halo received: that is what "exchange every N iterations" and
//! "take whatever halo data is there" mean when the arrays are double-buffered.

use crate::geometry::{Axis, Dims, Face, Geometry, LocalIdx};
use crate::kernel::{self, Grid, Region, Shape};
use crate::problem::Problem;
use chan_core::AtomicF64Slice;

/// A block's current iterate, the buffer for the next one, the right-hand side of a problem
/// with a source term, and its geometry.
#[derive(Debug, Clone)]
pub struct Field {
    geom: Geometry,
    shape: Shape,
    u: Grid,
    next: Grid,
    /// `h² f` at the owned points (0 in the halo), for a problem with a source term.
    rhs: Option<Grid>,
    /// Messages are unpacked into the current iterate's halo only, not the next array's
    /// too: [`Field::set_halo_current_only`].
    halo_current_only: bool,
}

impl Field {
    /// The starting iterate of `problem` on `geom`'s block: owned points at the initial
    /// value, halo points on the domain boundary at the Dirichlet values, halo points facing
    /// a neighbour at the neighbour's initial value (as if exchanged); and `h² f` at the owned
    /// points when the problem has a source term (a cubic grid: one h).
    pub fn new(geom: &Geometry, problem: &Problem) -> Self {
        let shape = geom.shape();
        let mut u = Grid::new(shape.len, 0.0);
        let n = geom.local;
        let mut rhs: Option<Grid> = None;
        for z in 1..=n.z {
            for y in 1..=n.y {
                for x in 1..=n.x {
                    let l = LocalIdx { x, y, z };
                    let pos = geom.position(geom.to_global(l));
                    if let Some(f) = problem.source(pos, geom.h[0]) {
                        rhs.get_or_insert_with(|| Grid::new(shape.len, 0.0))[shape.at(l)] = f;
                    }
                }
            }
        }
        for z in 0..=n.z + 1 {
            for y in 0..=n.y + 1 {
                for x in 0..=n.x + 1 {
                    let l = LocalIdx { x, y, z };
                    let g = geom.to_global(l);
                    let pos = geom.position(g);
                    u[shape.at(l)] = if geom.on_boundary(g) {
                        problem.boundary(g, pos)
                    } else {
                        problem.initial(g, pos)
                    };
                }
            }
        }
        Field {
            geom: geom.clone(),
            shape,
            next: u.clone(),
            u,
            rhs,
            halo_current_only: false,
        }
    }

    /// Unpack messages into the current iterate's halo only (`true`), or into both arrays
    /// (`false`, the default). A sweep reads the current iterate's halo and writes the other
    /// array's owned points, so the other array's halo is read only by a sweep that no
    /// exchange precedes: the sync variant with a swap before every sweep
    /// (`--halo-every 1`, no inner solves) never does one, and halves the unpacking.
    pub fn set_halo_current_only(&mut self, on: bool) {
        self.halo_current_only = on;
    }

    /// The block's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geom
    }

    /// One fused Jacobi sweep, then swap: returns Σ r² of the iterate it started from.
    pub fn sweep(&mut self) -> f64 {
        let r = kernel::sweep(&self.shape, &self.u, self.rhs.as_deref(), &mut self.next);
        std::mem::swap(&mut self.u, &mut self.next);
        r
    }

    /// One Jacobi sweep without the residual, then swap: [`Field::sweep`]'s iterate, for the
    /// sweeps whose residual nobody reads.
    pub fn step(&mut self) {
        kernel::step(&self.shape, &self.u, self.rhs.as_deref(), &mut self.next);
        std::mem::swap(&mut self.u, &mut self.next);
    }

    /// [`Field::sweep_region`] without the residual.
    pub fn step_region(&mut self, region: &Region) {
        kernel::step_region(
            &self.shape,
            &self.u,
            self.rhs.as_deref(),
            &mut self.next,
            region,
        );
    }

    /// Sweep one region of the block into the next iterate, without swapping: the overlapped
    /// exchange sweeps the interior while the halos travel, then the boundary shell, then
    /// calls [`Field::finish_sweep`]. Σ r² of the current iterate over the region.
    pub fn sweep_region(&mut self, region: &Region) -> f64 {
        kernel::sweep_region(
            &self.shape,
            &self.u,
            self.rhs.as_deref(),
            &mut self.next,
            region,
        )
    }

    /// The current iterate (to read), the next array (to write) and the source term: what a
    /// team of workers sweeping the block together shares (`hybrid.rs`), who then calls
    /// [`Field::finish_sweep`].
    pub(crate) fn sweep_arrays(&mut self) -> (&[f64], &mut [f64], Option<&[f64]>) {
        (&self.u, &mut self.next, self.rhs.as_deref())
    }

    /// Copy `src`'s current iterate, owned points and halo, into this one's current array
    /// (a block of the same shape: snapshots, `solver/`). The next array is left as it
    /// was: its owned points are overwritten by the next sweep, and its halo by the next
    /// unpack (a restored snapshot is followed by a certification swap).
    pub(crate) fn copy_current_from(&mut self, src: &Field) {
        self.u.copy_from_slice(&src.u);
    }

    /// End a sweep done region by region: the next iterate becomes the current one.
    pub fn finish_sweep(&mut self) {
        std::mem::swap(&mut self.u, &mut self.next);
    }

    /// The interior of the block and the shell around it, for the overlapped exchange: the
    /// interior is every owned point that reads no halo value from a neighbour (the owned
    /// layer next to each face with a neighbour is left out), the shell the rest, as disjoint
    /// boxes. Together they cover every owned point once.
    pub fn interior_and_shell(&self) -> (Region, Vec<Region>) {
        let n = self.geom.local;
        let has =
            |axis: Axis, high: bool| self.geom.neighbours[Face::new(axis, high).index()].is_some();
        let range = |axis: Axis| {
            let len = n.get(axis);
            let lo = 1 + usize::from(has(axis, false));
            let hi = (len + 1 - usize::from(has(axis, true))).max(lo);
            lo..hi
        };
        let (ix, iy, iz) = (range(Axis::X), range(Axis::Y), range(Axis::Z));
        let inner = Region {
            x: ix.clone(),
            y: iy.clone(),
            z: iz.clone(),
        };
        let mut shell = Vec::with_capacity(6);
        let mut push = |r: Region| {
            if !r.is_empty() {
                shell.push(r);
            }
        };
        // Whole z-slabs below and above the interior's z range, then y-slabs of the middle
        // z range, then x-slabs of the middle y and z ranges.
        push(Region::planes(n, 1..iz.start));
        push(Region::planes(n, iz.end..n.z + 1));
        push(Region {
            x: 1..n.x + 1,
            y: 1..iy.start,
            z: iz.clone(),
        });
        push(Region {
            x: 1..n.x + 1,
            y: iy.end..n.y + 1,
            z: iz.clone(),
        });
        push(Region {
            x: 1..ix.start,
            y: iy.clone(),
            z: iz.clone(),
        });
        push(Region {
            x: ix.end..n.x + 1,
            y: iy,
            z: iz,
        });
        (inner, shell)
    }

    /// Σ r² of the current iterate with the current halo (no update).
    pub fn residual_sq(&self) -> f64 {
        kernel::residual_sq(&self.shape, &self.u, self.rhs.as_deref())
    }

    /// The largest |u − exact| over the owned points, for a problem with a known solution (NaN
    /// when a value is not a number: a diverged run has no error of 0).
    pub fn error_max(&self, problem: &Problem) -> Option<f64> {
        let n = self.geom.local;
        let mut worst = 0.0f64;
        for z in 1..=n.z {
            for y in 1..=n.y {
                for x in 1..=n.x {
                    let l = LocalIdx { x, y, z };
                    let exact = problem.exact(self.geom.position(self.geom.to_global(l)))?;
                    worst = worse(worst, (self.u[self.shape.at(l)] - exact).abs());
                }
            }
        }
        Some(worst)
    }

    /// Number of values on `face`.
    pub fn face_len(&self, face: Face) -> usize {
        let n = self.geom.local;
        match face.axis {
            Axis::X => n.y * n.z,
            Axis::Y => n.x * n.z,
            Axis::Z => n.x * n.y,
        }
    }

    /// The owned layer next to `face` (what the neighbour needs) and the halo layer beyond it.
    fn layers(&self, face: Face) -> (usize, usize) {
        layers(self.geom.local, face)
    }

    /// The block's array shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The current iterate (with its halo).
    pub fn iterate(&self) -> &[f64] {
        &self.u
    }

    /// The current iterate, to update in place (the Krylov solvers' x). Its halo holds the
    /// Dirichlet values and the neighbours' last exchanged values: write owned points only.
    pub fn iterate_mut(&mut self) -> &mut [f64] {
        &mut self.u
    }

    /// `h² f` at the owned points, for a problem with a source term.
    pub fn rhs(&self) -> Option<&[f64]> {
        self.rhs.as_deref()
    }

    /// Copy the owned layer next to `face` into `buf` (the message to the neighbour there).
    /// Order: the two other axes, lower axis fastest; the neighbour unpacks in the same order.
    pub fn pack(&self, face: Face, buf: &mut [f64]) {
        pack_layer(&self.shape, face, &self.u, buf);
    }

    /// Write a neighbour's message into the halo beyond `face`, in both arrays (only the
    /// current iterate's with [`Field::set_halo_current_only`]).
    pub fn unpack(&mut self, face: Face, data: &[f64]) {
        assert_eq!(
            data.len(),
            self.face_len(face),
            "unpack: wrong message length"
        );
        unpack_layer(&self.shape, face, &mut self.u, data);
        if !self.halo_current_only {
            unpack_layer(&self.shape, face, &mut self.next, data);
        }
    }

    /// Write a racy view into the halo beyond `face`, in both arrays (relaxed atomic loads:
    /// elements may come from different sends, each is some send's value).
    pub fn unpack_atomic(&mut self, face: Face, view: &AtomicF64Slice) {
        assert_eq!(view.len(), self.face_len(face), "unpack: wrong view length");
        self.unpack_with(face, |k| view.load(k));
    }

    fn unpack_with(&mut self, face: Face, value: impl Fn(usize) -> f64) {
        let (_, halo) = self.layers(face);
        let (u, next) = (&mut self.u, &mut self.next);
        let mut k = 0;
        on_layer(&self.shape, self.geom.local, face, halo, |i| {
            let v = value(k);
            u[i] = v;
            next[i] = v;
            k += 1;
        });
    }

    /// Store the owned layer next to `face` into a racy plane (relaxed atomic stores), in the
    /// order of [`Field::pack`].
    pub fn pack_atomic(&self, face: Face, out: &AtomicF64Slice) {
        assert_eq!(out.len(), self.face_len(face), "pack: wrong view length");
        let (own, _) = self.layers(face);
        let mut k = 0;
        on_layer(&self.shape, self.geom.local, face, own, |i| {
            out.store(k, self.u[i]);
            k += 1;
        });
    }

    /// Overwrite the owned points of the current iterate with `vals` (x fastest, as
    /// [`Field::owned_values`] gives them).
    pub(crate) fn set_owned(&mut self, vals: &[f64]) {
        let n = self.geom.local;
        assert_eq!(vals.len(), n.volume(), "set_owned: wrong number of values");
        for ((z, y), row) in (1..=n.z)
            .flat_map(|z| (1..=n.y).map(move |y| (z, y)))
            .zip(vals.chunks_exact(n.x))
        {
            let b = self.shape.index(1, y, z);
            self.u[b..b + n.x].copy_from_slice(row);
        }
    }

    /// Overwrite the owned points of the current iterate with this block's part of `global`,
    /// the grid's interior points x fastest (the order of [`assemble`]).
    pub(crate) fn set_from_global(&mut self, global: &[f64]) {
        let g = self.geom.clone();
        let n = g.local;
        for z in 1..=n.z {
            for y in 1..=n.y {
                let first = g.to_global(LocalIdx { x: 1, y, z });
                let at = (first.x - 1) + g.global.x * ((first.y - 1) + g.global.y * (first.z - 1));
                let b = self.shape.index(1, y, z);
                self.u[b..b + n.x].copy_from_slice(&global[at..at + n.x]);
            }
        }
    }

    /// The owned values of the current iterate as bits, x fastest, into `out` (cleared; no
    /// allocation once it has the room).
    pub(crate) fn owned_bits_into(&self, out: &mut Vec<u64>) {
        let n = self.geom.local;
        out.clear();
        for z in 1..=n.z {
            for y in 1..=n.y {
                let b = self.shape.index(1, y, z);
                out.extend(self.u[b..b + n.x].iter().map(|v| v.to_bits()));
            }
        }
    }

    /// The owned values of the current iterate, x fastest.
    pub fn owned_values(&self) -> Vec<f64> {
        let n = self.geom.local;
        let mut out = Vec::with_capacity(n.volume());
        for z in 1..=n.z {
            for y in 1..=n.y {
                let b = self.shape.index(1, y, z);
                out.extend_from_slice(&self.u[b..b + n.x]);
            }
        }
        out
    }
}

/// The owned layer next to `face` of a block of `n` points (what the neighbour needs) and the
/// halo layer beyond it, along the face's axis.
fn layers(n: Dims, face: Face) -> (usize, usize) {
    let n = n.get(face.axis);
    if face.high {
        (n, n + 1)
    } else {
        (1, 0)
    }
}

/// Copy the owned layer of `arr` (an array of shape `sh`) next to `face` into `buf`, in
/// message order: what [`Field::pack`] does for the iterate, for any array.
pub(crate) fn pack_layer(sh: &Shape, face: Face, arr: &[f64], buf: &mut [f64]) {
    let n = sh.n;
    let len = match face.axis {
        Axis::X => n.y * n.z,
        Axis::Y => n.x * n.z,
        Axis::Z => n.x * n.y,
    };
    assert_eq!(buf.len(), len, "pack: wrong message length");
    let (own, _) = layers(n, face);
    match face.axis {
        // One value per row, a row apart.
        Axis::X => {
            for (z, vals) in (1..=n.z).zip(buf.chunks_exact_mut(n.y)) {
                let b = sh.index(own, 1, z);
                for (v, a) in vals.iter_mut().zip(arr[b..].iter().step_by(sh.sx)) {
                    *v = *a;
                }
            }
        }
        Axis::Y => {
            for (z, row) in (1..=n.z).zip(buf.chunks_exact_mut(n.x)) {
                let b = sh.index(1, own, z);
                row.copy_from_slice(&arr[b..b + n.x]);
            }
        }
        Axis::Z => {
            for (y, row) in (1..=n.y).zip(buf.chunks_exact_mut(n.x)) {
                let b = sh.index(1, y, own);
                row.copy_from_slice(&arr[b..b + n.x]);
            }
        }
    }
}

/// Copy one row of a message, `src` into `dst` (equal lengths). Long rows go through
/// `copy_from_slice` (`memcpy`); short ones (a deep halo's x faces have rows `depth` values
/// long) are copied four values at a time, inline: a library call per row of four values
/// took 9% of a deep-halo run.
#[inline]
pub(crate) fn copy_row(dst: &mut [f64], src: &[f64]) {
    assert_eq!(dst.len(), src.len(), "rows of different lengths");
    if src.len() >= 16 {
        dst.copy_from_slice(src);
        return;
    }
    let mut d4 = dst.chunks_exact_mut(4);
    let mut s4 = src.chunks_exact(4);
    for (d, s) in (&mut d4).zip(&mut s4) {
        d.copy_from_slice(s);
    }
    match (d4.into_remainder(), s4.remainder()) {
        ([d0], [s0]) => *d0 = *s0,
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (*s0, *s1),
        ([d0, d1, d2], [s0, s1, s2]) => (*d0, *d1, *d2) = (*s0, *s1, *s2),
        _ => {}
    }
}

/// Write a neighbour's message into the halo of `arr` beyond `face` (the inverse of
/// [`pack_layer`] on the neighbour's side).
pub(crate) fn unpack_layer(sh: &Shape, face: Face, arr: &mut [f64], data: &[f64]) {
    let n = sh.n;
    let (_, halo) = layers(n, face);
    match face.axis {
        // One value per row, a row apart.
        Axis::X => {
            assert_eq!(data.len(), n.y * n.z, "unpack: wrong message length");
            for (z, vals) in (1..=n.z).zip(data.chunks_exact(n.y)) {
                let b = sh.index(halo, 1, z);
                let dst = arr[b..].iter_mut().step_by(sh.sx);
                for (d, v) in dst.zip(vals) {
                    *d = *v;
                }
            }
        }
        Axis::Y => {
            assert_eq!(data.len(), n.x * n.z, "unpack: wrong message length");
            for (z, row) in (1..=n.z).zip(data.chunks_exact(n.x)) {
                let b = sh.index(1, halo, z);
                arr[b..b + n.x].copy_from_slice(row);
            }
        }
        Axis::Z => {
            assert_eq!(data.len(), n.x * n.y, "unpack: wrong message length");
            for (y, row) in (1..=n.y).zip(data.chunks_exact(n.x)) {
                let b = sh.index(1, y, halo);
                arr[b..b + n.x].copy_from_slice(row);
            }
        }
    }
}

/// Call `f` with the array index of every point of the plane `layer` across `face`'s axis,
/// within the owned range of the two other axes, in message order (those two axes, lower
/// axis fastest): what [`Field::pack`] sends and the neighbour unpacks.
fn on_layer(sh: &Shape, n: Dims, face: Face, layer: usize, mut f: impl FnMut(usize)) {
    match face.axis {
        Axis::X => {
            for z in 1..=n.z {
                for y in 1..=n.y {
                    f(sh.index(layer, y, z));
                }
            }
        }
        Axis::Y => {
            for z in 1..=n.z {
                for x in 1..=n.x {
                    f(sh.index(x, layer, z));
                }
            }
        }
        Axis::Z => {
            for y in 1..=n.y {
                for x in 1..=n.x {
                    f(sh.index(x, y, layer));
                }
            }
        }
    }
}

/// The global interior (x fastest) assembled from each block's owned values
/// ([`Field::owned_values`]) and geometry.
pub fn assemble(global: Dims, blocks: &[(Geometry, Vec<f64>)]) -> Vec<f64> {
    let mut out = vec![f64::NAN; global.volume()];
    for (g, vals) in blocks {
        let n = g.local;
        let mut k = 0;
        for z in 1..=n.z {
            for y in 1..=n.y {
                for x in 1..=n.x {
                    let gi = g.to_global(LocalIdx { x, y, z });
                    out[(gi.x - 1) + global.x * ((gi.y - 1) + global.y * (gi.z - 1))] = vals[k];
                    k += 1;
                }
            }
        }
    }
    out
}

/// The worse of an error so far `m` and a new one `d`: the larger, and NaN once either is
/// (`f64::max` drops a NaN, and a diverged run would report the error of its finite points).
pub(crate) fn worse(m: f64, d: f64) -> f64 {
    if d > m || d.is_nan() {
        d
    } else {
        m
    }
}

#[cfg(test)]
mod tests {

    /// A NaN difference makes the error NaN wherever it comes (`f64::max` dropped it).
    #[test]
    fn a_nan_error_is_kept() {
        assert_eq!(super::worse(1.0, 2.0), 2.0);
        assert_eq!(super::worse(2.0, 1.0), 2.0);
        assert!(super::worse(1.0, f64::NAN).is_nan());
        assert!(super::worse(f64::NAN, 2.0).is_nan());
        let e = [0.5, f64::NAN, 0.25]
            .iter()
            .fold(0.0, |m, &d| super::worse(m, d));
        assert!(e.is_nan());
    }

    use super::*;
    use crate::geometry::{Plan, ProcGrid};

    #[test]
    fn faces_round_trip_between_neighbours() {
        for current_only in [false, true] {
            faces_round_trip(current_only);
        }
    }

    /// Every face packed by a neighbour and unpacked lands in the halo point it belongs to,
    /// in both arrays, or in the current iterate's only (`current_only`).
    fn faces_round_trip(current_only: bool) {
        let plan = Plan::split(Dims::new(6, 4, 6), ProcGrid(Dims::new(2, 2, 2))).unwrap();
        let p = Problem::Laplace { offset: 0.0 };
        let mut fields: Vec<Field> = (0..8).map(|r| Field::new(&plan.geometry(r), &p)).collect();
        for f in &mut fields {
            f.set_halo_current_only(current_only);
        }
        // Give every owned point its global linear index as value.
        for f in &mut fields {
            let g = f.geom.clone();
            let n = g.local;
            for z in 1..=n.z {
                for y in 1..=n.y {
                    for x in 1..=n.x {
                        let l = LocalIdx { x, y, z };
                        let gi = g.to_global(l);
                        let i = f.shape.at(l);
                        f.u[i] = (gi.x + 100 * gi.y + 10_000 * gi.z) as f64;
                    }
                }
            }
        }
        for r in 0..8 {
            for face in Face::ALL {
                let Some(peer) = fields[r].geom.neighbours[face.index()] else {
                    continue;
                };
                let mut msg = vec![0.0; fields[peer].face_len(face.opposite())];
                fields[peer].pack(face.opposite(), &mut msg);
                fields[r].unpack(face, &msg);
            }
        }
        // Every halo point facing a neighbour now holds the neighbour's value there.
        for f in &fields {
            let g = &f.geom;
            let n = g.local;
            for face in Face::ALL {
                if g.neighbours[face.index()].is_none() {
                    continue;
                }
                let (_, halo) = f.layers(face);
                for a in 1..=n.get(if face.axis == Axis::X {
                    Axis::Y
                } else {
                    Axis::X
                }) {
                    for b in 1..=n.get(if face.axis == Axis::Z {
                        Axis::Y
                    } else {
                        Axis::Z
                    }) {
                        let l = match face.axis {
                            Axis::X => LocalIdx {
                                x: halo,
                                y: a,
                                z: b,
                            },
                            Axis::Y => LocalIdx {
                                x: a,
                                y: halo,
                                z: b,
                            },
                            Axis::Z => LocalIdx {
                                x: a,
                                y: b,
                                z: halo,
                            },
                        };
                        let gi = g.to_global(l);
                        let want = (gi.x + 100 * gi.y + 10_000 * gi.z) as f64;
                        assert_eq!(f.u[f.shape.at(l)], want, "rank {} {face}", g.rank);
                        // The next array keeps its start value (0) when only the current
                        // iterate's halo is written.
                        let next = if current_only { 0.0 } else { want };
                        assert_eq!(f.next[f.shape.at(l)], next);
                    }
                }
            }
        }
    }

    #[test]
    fn copy_row_copies_rows_of_every_length() {
        for len in 0..40 {
            let src: Vec<f64> = (0..len).map(|i| i as f64 + 0.5).collect();
            let mut dst = vec![-1.0; len + 3];
            copy_row(&mut dst[1..len + 1], &src);
            assert_eq!(dst[1..len + 1], src[..], "length {len}");
            assert_eq!((dst[0], dst[len + 1], dst[len + 2]), (-1.0, -1.0, -1.0));
        }
    }

    #[test]
    fn boundary_halo_holds_dirichlet_values() {
        let plan = Plan::split(Dims::cube(4), ProcGrid(Dims::new(1, 1, 2))).unwrap();
        let p = Problem::Laplace { offset: 0.5 };
        let bottom = Field::new(&plan.geometry(0), &p);
        let sh = bottom.shape;
        // z = 0 plane at (x, y) = (2, 2): position (0.4, 0.4).
        let want = (-(0.1f64 * 0.1 + 0.1 * 0.1)).exp() + 0.5;
        assert!((bottom.u[sh.index(2, 2, 0)] - want).abs() < 1e-15);
        assert_eq!(bottom.u[sh.index(0, 2, 1)], 0.5);
        assert_eq!(bottom.u[sh.index(2, 2, 1)], 0.5);
        // The z+ halo faces rank 1: its initial value.
        assert_eq!(bottom.u[sh.index(2, 2, 3)], 0.5);
        let top = Field::new(&plan.geometry(1), &p);
        assert_eq!(top.u[sh.index(2, 2, 3)], 0.5);
    }
}
