//! The grid, the process grid and one rank's block of it.
//!
//! Two index spaces, kept apart by type (HPCG's `Geometry.hpp` habit):
//!
//! * [`GlobalIdx`]: a point of the global grid. Along an axis with `G` interior points, `1..=G`
//!   are interior points, `0` and `G + 1` the Dirichlet planes; point `g` sits at `g · h` with
//!   `h = 1 / (G + 1)`.
//! * [`LocalIdx`]: a point of one rank's array. Along an axis with `n` owned points, `1..=n` are
//!   owned, `0` and `n + 1` the one-cell halo (a neighbour's face, or the Dirichlet plane at
//!   the edge of the domain). The array is stored x fastest, then y, then z.
//!
//! [`Geometry`] converts between them.

use crate::config::ConfigError;
use serde::{Deserialize, Serialize};

/// An extent along x, y and z (points, or processes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dims {
    /// Along x (the fastest-varying axis of every array).
    pub x: usize,
    /// Along y.
    pub y: usize,
    /// Along z.
    pub z: usize,
}

impl Dims {
    /// `n × n × n`.
    pub const fn cube(n: usize) -> Self {
        Dims { x: n, y: n, z: n }
    }

    /// `x × y × z`.
    pub const fn new(x: usize, y: usize, z: usize) -> Self {
        Dims { x, y, z }
    }

    /// The extent along `axis` (0 = x, 1 = y, 2 = z).
    pub(crate) fn get(&self, axis: Axis) -> usize {
        match axis {
            Axis::X => self.x,
            Axis::Y => self.y,
            Axis::Z => self.z,
        }
    }

    /// `[x, y, z]`.
    pub fn to_array(self) -> [usize; 3] {
        [self.x, self.y, self.z]
    }

    /// `x · y · z`, or `None` on overflow.
    pub(crate) fn checked_volume(&self) -> Option<usize> {
        self.x.checked_mul(self.y)?.checked_mul(self.z)
    }

    /// `x · y · z` (the caller knows it fits: every validated geometry does).
    pub fn volume(&self) -> usize {
        self.x * self.y * self.z
    }
}

impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.x, self.y, self.z)
    }
}

/// An axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// x, the fastest-varying.
    X,
    /// y.
    Y,
    /// z, the slowest-varying (the shared-memory backend splits along it).
    Z,
}

impl Axis {
    /// x, y, z.
    pub const ALL: [Axis; 3] = [Axis::X, Axis::Y, Axis::Z];

    /// 0, 1, 2.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A face of a block: the axis and the side (low = towards index 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Face {
    /// Normal axis.
    pub axis: Axis,
    /// True for the face at the high end of the axis.
    pub high: bool,
}

impl Face {
    /// The six faces: x low, x high, y low, y high, z low, z high.
    pub const ALL: [Face; 6] = [
        Face::new(Axis::X, false),
        Face::new(Axis::X, true),
        Face::new(Axis::Y, false),
        Face::new(Axis::Y, true),
        Face::new(Axis::Z, false),
        Face::new(Axis::Z, true),
    ];

    /// The face of `axis` at the low or high end.
    pub const fn new(axis: Axis, high: bool) -> Self {
        Face { axis, high }
    }

    /// Position in [`Face::ALL`].
    pub fn index(self) -> usize {
        2 * self.axis.index() + usize::from(self.high)
    }

    /// The neighbour's matching face.
    pub fn opposite(self) -> Face {
        Face::new(self.axis, !self.high)
    }
}

impl std::fmt::Display for Face {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = ["x", "y", "z"][self.axis.index()];
        write!(f, "{a}{}", if self.high { "+" } else { "-" })
    }
}

/// A point of the global grid: `1..=G` interior, `0` and `G + 1` Dirichlet planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GlobalIdx {
    /// Along x.
    pub x: usize,
    /// Along y.
    pub y: usize,
    /// Along z.
    pub z: usize,
}

/// A point of one rank's array: `1..=n` owned, `0` and `n + 1` the halo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocalIdx {
    /// Along x.
    pub x: usize,
    /// Along y.
    pub y: usize,
    /// Along z.
    pub z: usize,
}

/// The process grid: `x · y · z` ranks; rank `r` sits at
/// `(r mod x, (r / x) mod y, r / (x · y))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcGrid(pub Dims);

impl ProcGrid {
    /// The paper's process grid for `size` ranks: the grid grows x first, then y, then z at
    /// each doubling (2 = 2×1×1, 4 = 2×2×1, 8 = 2×2×2, 32 = 4×4×2). For a size that is not a
    /// power of two, the k-th prime factor in ascending order multiplies axis k mod 3 (so 6 =
    /// 2×3×1, 12 = 2×2×3), which is the same rule.
    pub fn paper(size: usize) -> Self {
        let mut d = [1usize; 3];
        let mut n = size.max(1);
        let mut p = 2;
        let mut k = 0;
        while n > 1 {
            if p * p > n {
                p = n;
            }
            while n.is_multiple_of(p) {
                d[k % 3] *= p;
                k += 1;
                n /= p;
            }
            p += 1;
        }
        ProcGrid(Dims::new(d[0], d[1], d[2]))
    }

    /// Parse `PXxPYxPZ` (e.g. `4x2x1`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(['x', 'X']).collect();
        if parts.len() != 3 {
            return Err(format!("expected PXxPYxPZ (e.g. 2x2x1), got '{s}'"));
        }
        let mut d = [0usize; 3];
        for (v, p) in d.iter_mut().zip(&parts) {
            *v = p
                .trim()
                .parse()
                .map_err(|_| format!("expected PXxPYxPZ (e.g. 2x2x1), got '{s}'"))?;
            if *v == 0 {
                return Err(format!("every process count must be at least 1, got '{s}'"));
            }
        }
        Ok(ProcGrid(Dims::new(d[0], d[1], d[2])))
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.0.volume()
    }

    /// The coordinates of `rank`.
    pub(crate) fn coords(&self, rank: usize) -> [usize; 3] {
        let Dims { x, y, .. } = self.0;
        [rank % x, (rank / x) % y, rank / (x * y)]
    }

    /// The rank at `coords`.
    pub(crate) fn rank_at(&self, c: [usize; 3]) -> usize {
        c[0] + self.0.x * (c[1] + self.0.y * c[2])
    }
}

impl std::fmt::Display for ProcGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The resolved decomposition of a run: global grid, process grid and block size. Every rank
/// computes the same plan from the same configuration and world size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Interior points of the whole grid, per axis (G).
    pub global: Dims,
    /// The process grid.
    pub procs: ProcGrid,
    /// Interior points each rank owns, per axis (`global / procs`, exactly).
    pub local: Dims,
}

impl Plan {
    /// Split `global` over `procs`; every axis must divide exactly.
    pub(crate) fn split(global: Dims, procs: ProcGrid) -> Result<Self, ConfigError> {
        let mut local = [0usize; 3];
        for a in Axis::ALL {
            let (g, p) = (global.get(a), procs.0.get(a));
            if g % p != 0 || g < p {
                return Err(ConfigError::GridDoesNotDivide {
                    axis: ["x", "y", "z"][a.index()],
                    points: g,
                    procs: p,
                    global,
                    grid: procs,
                });
            }
            local[a.index()] = g / p;
        }
        let plan = Plan {
            global,
            procs,
            local: Dims::new(local[0], local[1], local[2]),
        };
        plan.check_size()?;
        Ok(plan)
    }

    /// Blocks of `local` points on each of the `procs` ranks.
    pub(crate) fn from_local(local: Dims, procs: ProcGrid) -> Result<Self, ConfigError> {
        let g = |a: Axis| local.get(a).checked_mul(procs.0.get(a));
        match (g(Axis::X), g(Axis::Y), g(Axis::Z)) {
            (Some(x), Some(y), Some(z)) => {
                let plan = Plan {
                    global: Dims::new(x, y, z),
                    procs,
                    local,
                };
                plan.check_size()?;
                Ok(plan)
            }
            _ => Err(ConfigError::TooLarge(local)),
        }
    }

    fn check_size(&self) -> Result<(), ConfigError> {
        let halo = Dims::new(self.local.x + 2, self.local.y + 2, self.local.z + 2);
        match halo.checked_volume().and_then(|v| v.checked_mul(16)) {
            Some(b) if b <= isize::MAX as usize && self.global.checked_volume().is_some() => Ok(()),
            _ => Err(ConfigError::TooLarge(self.local)),
        }
    }

    /// Rank `rank`'s block.
    pub(crate) fn geometry(&self, rank: usize) -> Geometry {
        Geometry::new(self, rank)
    }
}

/// One rank's block of the global grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Geometry {
    /// Interior points of the whole grid per axis (G); the Dirichlet planes are at global
    /// index 0 and G + 1.
    pub global: Dims,
    /// The process grid.
    pub procs: ProcGrid,
    /// This rank.
    pub rank: usize,
    /// This rank's position in the process grid.
    pub coords: [usize; 3],
    /// Points this rank owns per axis (n); its array is (n+2) along each axis, the outer
    /// layer being the halo.
    pub local: Dims,
    /// Global index of the owned point at local index (1, 1, 1), per axis.
    pub origin: [usize; 3],
    /// Grid spacing per axis, `1 / (G + 1)`.
    pub h: [f64; 3],
    /// The neighbouring rank across each face (indexed by [`Face::index`]), `None` at the edge
    /// of the domain, where the halo holds Dirichlet values.
    pub neighbours: [Option<usize>; 6],
}

impl Geometry {
    /// Rank `rank`'s block of `plan`.
    pub fn new(plan: &Plan, rank: usize) -> Self {
        let coords = plan.procs.coords(rank);
        let local = plan.local.to_array();
        let procs = plan.procs.0.to_array();
        let global = plan.global.to_array();
        let mut neighbours = [None; 6];
        for f in Face::ALL {
            let a = f.axis.index();
            let mut c = coords;
            let exists = if f.high {
                c[a] + 1 < procs[a]
            } else {
                c[a] > 0
            };
            if exists {
                c[a] = if f.high { c[a] + 1 } else { c[a] - 1 };
                neighbours[f.index()] = Some(plan.procs.rank_at(c));
            }
        }
        Geometry {
            global: plan.global,
            procs: plan.procs,
            rank,
            coords,
            local: plan.local,
            origin: [
                coords[0] * local[0] + 1,
                coords[1] * local[1] + 1,
                coords[2] * local[2] + 1,
            ],
            h: [
                1.0 / (global[0] + 1) as f64,
                1.0 / (global[1] + 1) as f64,
                1.0 / (global[2] + 1) as f64,
            ],
            neighbours,
        }
    }

    /// The global index of a local one (halo points map to the neighbour's points or the
    /// Dirichlet planes).
    pub fn to_global(&self, l: LocalIdx) -> GlobalIdx {
        GlobalIdx {
            x: self.origin[0] + l.x - 1,
            y: self.origin[1] + l.y - 1,
            z: self.origin[2] + l.z - 1,
        }
    }

    /// The local index of an owned global point, `None` if this rank does not own it.
    #[cfg(test)]
    pub fn to_local(&self, g: GlobalIdx) -> Option<LocalIdx> {
        let owned = |v: usize, a: usize, n: usize| {
            (v >= self.origin[a] && v < self.origin[a] + n).then(|| v - self.origin[a] + 1)
        };
        Some(LocalIdx {
            x: owned(g.x, 0, self.local.x)?,
            y: owned(g.y, 1, self.local.y)?,
            z: owned(g.z, 2, self.local.z)?,
        })
    }

    /// Coordinates in the unit cube of a global index: `g · h` per axis.
    pub fn position(&self, g: GlobalIdx) -> [f64; 3] {
        [
            g.x as f64 * self.h[0],
            g.y as f64 * self.h[1],
            g.z as f64 * self.h[2],
        ]
    }

    /// True when a global index lies on a Dirichlet plane.
    pub fn on_boundary(&self, g: GlobalIdx) -> bool {
        let b = |v: usize, n: usize| v == 0 || v == n + 1;
        b(g.x, self.global.x) || b(g.y, self.global.y) || b(g.z, self.global.z)
    }

    /// The array shape of this block (owned points plus a one-cell halo).
    pub fn shape(&self) -> crate::kernel::Shape {
        crate::kernel::Shape::new(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_grid_grows_x_then_y_then_z() {
        let g = |n| ProcGrid::paper(n).0.to_array();
        assert_eq!(g(1), [1, 1, 1]);
        assert_eq!(g(2), [2, 1, 1]);
        assert_eq!(g(4), [2, 2, 1]);
        assert_eq!(g(8), [2, 2, 2]);
        assert_eq!(g(16), [4, 2, 2]);
        assert_eq!(g(32), [4, 4, 2]);
        assert_eq!(g(64), [4, 4, 4]);
        assert_eq!(g(6), [2, 3, 1]);
        assert_eq!(g(12), [2, 2, 3]);
        assert_eq!(g(7), [7, 1, 1]);
        for n in 1..200 {
            assert_eq!(ProcGrid::paper(n).size(), n);
        }
    }

    #[test]
    fn coords_round_trip_and_follow_the_paper_order() {
        let p = ProcGrid(Dims::new(4, 4, 2));
        for r in 0..32 {
            assert_eq!(p.rank_at(p.coords(r)), r);
        }
        assert_eq!(p.coords(5), [1, 1, 0]);
        assert_eq!(p.coords(17), [1, 0, 1]);
    }

    #[test]
    fn parse_grid() {
        assert_eq!(
            ProcGrid::parse("2x3x1").unwrap(),
            ProcGrid(Dims::new(2, 3, 1))
        );
        assert!(ProcGrid::parse("2x3").is_err());
        assert!(ProcGrid::parse("2x0x1").is_err());
        assert!(ProcGrid::parse("axbxc").is_err());
    }

    #[test]
    fn split_must_divide() {
        let p = ProcGrid(Dims::new(2, 2, 1));
        assert!(Plan::split(Dims::new(10, 10, 10), p).is_ok());
        let e = Plan::split(Dims::new(10, 9, 10), p).unwrap_err();
        assert!(e.to_string().contains("y"), "{e}");
        assert!(Plan::split(Dims::new(1, 1, 1), p).is_err());
    }

    #[test]
    fn global_local_mapping_and_neighbours() {
        let plan = Plan::split(Dims::new(8, 6, 4), ProcGrid(Dims::new(2, 3, 1))).unwrap();
        assert_eq!(plan.local, Dims::new(4, 2, 4));
        let g = plan.geometry(3); // coords (1, 1, 0)
        assert_eq!(g.coords, [1, 1, 0]);
        assert_eq!(g.origin, [5, 3, 1]);
        let l = LocalIdx { x: 1, y: 2, z: 3 };
        let gi = g.to_global(l);
        assert_eq!(gi, GlobalIdx { x: 5, y: 4, z: 3 });
        assert_eq!(g.to_local(gi), Some(l));
        assert_eq!(g.to_local(GlobalIdx { x: 4, y: 4, z: 3 }), None);
        assert_eq!(g.neighbours[Face::new(Axis::X, false).index()], Some(2));
        assert_eq!(g.neighbours[Face::new(Axis::X, true).index()], None);
        assert_eq!(g.neighbours[Face::new(Axis::Y, false).index()], Some(1));
        assert_eq!(g.neighbours[Face::new(Axis::Y, true).index()], Some(5));
        assert_eq!(g.neighbours[Face::new(Axis::Z, false).index()], None);
        // The halo below z = 1 is the Dirichlet plane z = 0.
        assert!(g.on_boundary(g.to_global(LocalIdx { x: 1, y: 1, z: 0 })));
        assert_eq!(g.h[0], 1.0 / 9.0);
    }
}
