//! What a run will allocate, estimated before anything is: a size that cannot fit is refused
//! with the figure, instead of the allocator aborting the process half-way through set-up.
//!
//! The estimate counts what grows with the problem: the iterate arrays (two, three with a
//! source term, each with its one-cell halo), the channel buffers (R + 1 slots per direction
//! on each of the six faces, plus the certification channels of async and racy runs), the
//! convergence history, and for shared memory the whole grid and the gathered solution. It
//! is an upper bound of those (every rank is counted with six neighbours) and leaves out what
//! does not grow with the problem (code, thread stacks, the MPI library).

use crate::config::{Config, ConfigError, Variant};
use crate::geometry::{Dims, Plan};
use crate::kernel::ROW_ALIGN;
use crate::method::{KrylovSolver, Method};
use crate::progress::History;

/// The memory a run needs, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryNeed {
    /// One rank (or shared-memory thread): its arrays, channel buffers and history.
    pub per_rank: u64,
    /// The ranks of the run.
    pub ranks: u64,
    /// Besides the ranks: what the run holds once (shared memory: the whole grid and the
    /// gathered solution).
    pub shared: u64,
}

/// Bytes of one f64.
const F64: u64 = 8;
/// Bytes of one history point (iteration, residual, time).
const POINT: u64 = 24;

/// `(nx + 2)(ny + 2)(nz + 2)` values with the row padding of the kernels, saturating.
fn cells(n: Dims) -> u64 {
    let sx = (n.x as u64).saturating_add(2).div_ceil(ROW_ALIGN as u64) * ROW_ALIGN as u64;
    sx.saturating_mul((n.y as u64).saturating_add(2))
        .saturating_mul((n.z as u64).saturating_add(2))
}

/// Values on the faces of a block: `2 (ny nz + nx nz + nx ny)`, saturating.
fn face_values(n: Dims) -> u64 {
    let (x, y, z) = (n.x as u64, n.y as u64, n.z as u64);
    y.saturating_mul(z)
        .saturating_add(x.saturating_mul(z))
        .saturating_add(x.saturating_mul(y))
        .saturating_mul(2)
}

impl MemoryNeed {
    /// Everything: `per_rank × ranks + shared`, saturating.
    pub fn total(&self) -> u64 {
        self.per_rank
            .saturating_mul(self.ranks)
            .saturating_add(self.shared)
    }

    /// What `ranks_here` of the ranks need in one process or on one machine: the MPI and
    /// SHMEM backends hold one rank per process; threads and shared memory every rank in one.
    pub fn of_ranks(&self, ranks_here: u64) -> u64 {
        self.per_rank
            .saturating_mul(ranks_here.min(self.ranks))
            .saturating_add(self.shared)
    }

    /// Refuse when `need` bytes (what this machine will hold, from [`MemoryNeed::of_ranks`])
    /// exceed `available`.
    pub fn check(&self, need: u64, available: u64) -> Result<(), ConfigError> {
        if need > available {
            return Err(ConfigError::OutOfMemory {
                need,
                per_rank: self.per_rank,
                available,
            });
        }
        Ok(())
    }
}

/// A byte count for people: `1.5 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl Config {
    /// The memory a run over channels (threads, MPI, SHMEM) of this configuration over `plan`
    /// needs.
    pub fn memory_need(&self, plan: &Plan) -> MemoryNeed {
        // The iterate and its copy, the source term, and the Krylov solvers' vectors (cg and
        // cg-overlap: x, r, p, q, a scratch, the diagonal and z; pipecg: x, r, w, n, z, s, p,
        // d, m and a scratch; gmres: x, r, the m + 1 Arnoldi vectors, z, w, d and a scratch;
        // bicgstab: x, r, r̂, p, p̂, v, s, t, d and a scratch; ‖b‖ is computed in r and the
        // scratch), each a grid with halos.
        let krylov = match self.method {
            Method::Jacobi(_) => 0,
            Method::Krylov(k) => {
                (match k.solver {
                    KrylovSolver::Cg | KrylovSolver::CgOverlap => 7,
                    KrylovSolver::PipeCg => 10,
                    KrylovSolver::Gmres => k.restart as u64 + 7,
                    KrylovSolver::BiCgStab => 10,
                }) + match k.pc {
                    // Block Jacobi's block, then its factors: 7 entries a point, each a value
                    // and a column (8 bytes each), twice (the block, then the factor made from a
                    // copy of it), and a gathered vector.
                    crate::Pc::BJacobi => 29,
                    _ => 0,
                }
            }
            // Inner CG's r, p and A p; inner single-precision CG's r, p, A p and d, half the
            // size each; inner Jacobi sweeps the iterate's own two arrays.
            Method::Multisplit(m) => match m.inner.solver {
                crate::config::Inner::Cg => 3,
                crate::config::Inner::Cg32 => 2,
                crate::config::Inner::Jacobi => 0,
            },
        };
        let grids = 2 + u64::from(self.problem.source([0.5; 3], 1.0).is_some()) + krylov;
        // --halo-depth k: the block grows by up to k − 1 ghost planes on each side, and each
        // message carries k planes of the grown faces (an upper bound: a face without a
        // neighbour does not grow). `auto`: the deepest it may choose (its probe holds one
        // candidate's block at a time, before the run's own).
        let depth = match self.halo_depth() {
            crate::config::HaloDepth::Fixed(k) => k,
            crate::config::HaloDepth::Auto => self
                .auto_depth_candidates(plan)
                .last()
                .copied()
                .unwrap_or(1),
        };
        let grow = usize::try_from(depth.saturating_sub(1).saturating_mul(2)).unwrap_or(usize::MAX);
        let n = plan.local;
        let block = Dims::new(
            n.x.saturating_add(grow),
            n.y.saturating_add(grow),
            n.z.saturating_add(grow),
        );
        let fields = cells(block).saturating_mul(F64 * grids);
        // Each channel: R + 1 slots each way (send slots and the receiver's), for the halo
        // channels (R = 1 for sync) and, async and racy, the certification channels (R = 1).
        let r = match self.method.iteration() {
            Some(i) if i.variant != Variant::Sync => i.max_in_flight as u64,
            _ => 1,
        };
        let slots = r
            .saturating_add(1)
            .saturating_mul(2)
            .saturating_add(match self.variant() {
                Variant::Sync => 0,
                Variant::Async | Variant::Racy => 4,
            });
        let channels = face_values(block)
            .saturating_mul(depth)
            .saturating_mul(F64)
            .saturating_mul(slots);
        let history = (History::CAP as u64 + 1) * POINT;
        MemoryNeed {
            per_rank: fields.saturating_add(channels).saturating_add(history),
            ranks: plan.procs.size() as u64,
            shared: 0,
        }
    }

    /// The memory a shared-memory run (1 × 1 × T slabs of `plan`) needs: sync sweeps one
    /// array of the whole grid; async and racy one array per slab and the boundary planes;
    /// every variant gathers the solution.
    pub fn shared_memory_need(&self, plan: &Plan) -> MemoryNeed {
        let grids = 2 + u64::from(self.problem.source([0.5; 3], 1.0).is_some());
        let g = plan.global;
        let solution = (g.x as u64)
            .saturating_mul(g.y as u64)
            .saturating_mul(g.z as u64)
            .saturating_mul(F64);
        let history = (History::CAP as u64 + 1) * POINT;
        let per_rank = match self.variant() {
            Variant::Sync => history,
            Variant::Async | Variant::Racy => cells(plan.local)
                .saturating_mul(F64 * grids)
                .saturating_add(face_values(plan.local).saturating_mul(F64))
                .saturating_add(history),
        };
        let whole = match self.variant() {
            Variant::Sync => cells(g).saturating_mul(F64 * grids),
            Variant::Async | Variant::Racy => 0,
        };
        MemoryNeed {
            per_rank,
            ranks: plan.procs.size() as u64,
            shared: whole.saturating_add(solution),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SizeSpec;

    #[test]
    fn the_paper_default_is_a_few_megabytes_per_rank() {
        let c = Config::default();
        let plan = c.plan(8).unwrap();
        let m = c.memory_need(&plan);
        // 52 × 52 (x padded to 52) × 52 × 8 bytes × 2 arrays ≈ 2.2 MB, plus channels.
        assert!(m.per_rank > 2_200_000 && m.per_rank < 3_000_000, "{m:?}");
        assert_eq!(m.ranks, 8);
        assert_eq!(m.total(), 8 * m.per_rank);
        assert_eq!(m.of_ranks(1), m.per_rank);
    }

    #[test]
    fn krylov_solvers_count_their_vectors() {
        let need = |method| {
            let c = Config {
                method,
                ..Config::default()
            };
            c.memory_need(&c.plan(1).unwrap()).per_rank
        };
        let grid = 52 * 52 * 52 * 8; // one 50³ block with halos (x padded to 52)
        let jacobi = need(Method::default());
        let cg = need(KrylovSolver::Cg.into());
        assert!(cg >= jacobi + 7 * grid, "{cg} vs {jacobi}");
        assert!(need(KrylovSolver::PipeCg.into()) >= jacobi + 10 * grid);
    }

    #[test]
    fn huge_blocks_saturate_instead_of_overflowing() {
        for local in [
            Dims::cube(100_000),
            Dims::new(4_294_967_297, 1, 1),
            Dims::new(65_536, 65_536, 1),
        ] {
            let c = Config {
                size: SizeSpec::Local(local),
                ..Config::default()
            };
            let plan = c.plan(1).unwrap();
            let m = c.memory_need(&plan);
            assert!(m.total() > 100 << 30, "{local}: {}", human_bytes(m.total()));
            let e = m.check(m.total(), 8 << 30).unwrap_err().to_string();
            assert!(
                e.contains("the block per rank/the global grid") && e.contains("8.0 GiB"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_block_past_u64_saturates() {
        // (2²² + 2)³ cells overflow u64 (2⁶⁶): the estimate is the largest value, not a wrap.
        // (The plan itself refuses such a block; the estimate must not rely on that.)
        let c = Config::default();
        let mut plan = c.plan(1).unwrap();
        plan.local = Dims::cube(1 << 22);
        assert_eq!(c.memory_need(&plan).total(), u64::MAX);
    }

    #[test]
    fn r_counts() {
        let c = |r| {
            let mut j = crate::method::Jacobi::new(Variant::Async);
            j.iteration.max_in_flight = r;
            Config {
                method: j.into(),
                ..Config::default()
            }
        };
        let plan = c(1).plan(1).unwrap();
        let (a, b) = (c(1).memory_need(&plan), c(1000).memory_need(&plan));
        // 999 more slots each way on 6 faces of 2500 values.
        assert_eq!(b.per_rank - a.per_rank, 999 * 2 * 6 * 2500 * 8);
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
