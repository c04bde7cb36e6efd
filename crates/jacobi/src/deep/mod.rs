//! Deep halos and temporal blocking (`--halo-depth k`): the iterate with a ghost zone k planes
//! deep, for Jacobi's sync, async and racy loops (`solver/`, which run over it as over the
//! one-plane [`Field`] through the [`Iterate`] trait). What is specific to deep halos is here:
//! the grown block, its wavefront of k sweeps, the async sweep of a ghost zone that ages, and
//! the packing of k-plane messages.
//!
//! ## Sync
//! Every k iterations each rank receives a ghost zone k planes deep from each neighbour (one
//! message per face, k times larger than a one-plane halo, so k times fewer messages), then
//! does k sweeps on its block grown by the ghost zone. Sweep j (1 ≤ j ≤ k) of a block
//! updates the owned points and the ghost planes less than k − j away from them: what it
//! computes there is what the neighbour computes for its own points, with the same
//! operations in the same order, so after the k-th sweep the owned points hold bit for bit
//! the iterate the one-plane exchange gives after k iterations (`deep_equals_shallow` tests
//! it). The redundant work is the ghost zone's, (k − 1)/2 planes per face on average.
//!
//! ## Temporal blocking
//! The k sweeps run as one wavefront over the planes along z: at step s, sweep j updates
//! plane s − (j − 1), which reads planes s − j .. s − j + 2 of the iterate before it, all
//! computed moments ago and still in cache. So a block of k sweeps streams each array through
//! memory about once, not k times. Two arrays suffice: sweep j writes plane p of the array
//! that held sweep j − 2's plane p, whose last readers (sweep j − 1's planes p − 1 .. p + 1)
//! are done by then, since sweep j − 1 is one plane ahead.
//!
//! ## Rows
//! Rows begin on aligned points. The kernel's four-value loads and stores are aligned when a
//! row segment begins at x = 1 or a multiple of four values after it ([`kernel::Grid`]).
//! Beyond a low face in x, sweep j's rows would begin at the ghost plane k − j away from
//! the block, one value further in each sweep: at k = 4, three sweeps in four would run
//! with unaligned loads and stores, one store in two split across two cache lines. Each
//! sweep's rows therefore begin at the aligned point at or before that plane ([`aligned`]).
//! The up to three points more per row lie farther out than the sweep's valid ghost planes.
//! They read stale values and are read only by points of later sweeps that are stale too,
//! never by an owned point, and the next exchange overwrites them. A 50³ block with a low x
//! neighbour took 0.118 s for 600 blocks of k = 4 sweeps before, 0.106 s after; 0.104 s with
//! a high x neighbour only, whose rows already began at x = 1. A check's last sweep covers
//! the owned points exactly ("The residual").
//!
//! ## Tiles
//! The wavefront keeps about k + 2 planes of each array busy. When those do not fit half of
//! the L2 cache (as Linux reports CPU 0's; 100³ blocks: 2 × 6 planes of 85 KB at k = 4,
//! against 1 MiB), a block's
//! sweeps go in tiles of rows along y, each tile a whole wavefront over z, the tiles in
//! order of y. Tile t's rows at sweep j begin j − 1 rows below its rows at sweep 1 (a skewed
//! tile), so everything sweep j of tile t reads from outside it, rows below, tile t − 1 has
//! computed, and nothing it overwrites in the array of sweep j − 2 is still to be read:
//! those rows of sweep j − 2 are read by sweeps j − 1 of tiles t and earlier only, which
//! are done. Every point of every sweep is computed once, from the same values, as without
//! tiles (`tiles_along_y_change_no_bit`). A block whose residual is summed (a check's) goes
//! untiled, its rows in a plain sweep's order.
//!
//! ## The ghost zone's corners
//! Sweeps after the first read ghost points that lie beyond two faces at once (an edge or a
//! corner of the grown block). The exchange fills them with six messages, in three rounds:
//! along x (the owned y, z range), then along y with the x ghost planes included, then along
//! z with both: each round forwards what the previous one brought.
//! One round of up to 26 messages (faces, edges, corners), none forwarding another, was
//! built and measured slower on an oversubscribed node (more, smaller messages; the
//! extra rounds cost waiting ranks little): docs/performance.md, "Deep halos".
//!
//! ## Async and racy
//! With `--variant async` or `racy` the faces sent every N iterations (`--halo-every`) are k
//! planes deep, and each iteration is one sweep. Beyond each face, the ghost zone a message
//! brought is swept along with the block, one plane less each sweep (the planes ≥ k − a
//! away from the block are stale after a sweeps), until only the halo plane next to the
//! block is left; it then stays as it is until the next message, which is what every halo
//! does at k = 1 ([`DeepField::sweep_async`]). So a halo k planes deep carries the
//! neighbour's iterate of the send, and the sweeps after it use the local continuation of
//! that iterate for up to k − 1 sweeps (the neighbour's own next iterates, where its
//! neighbours' data was not older than its own) in place of a halo frozen at the send:
//! the staleness is that of the message, and for k − 1 sweeps it does not grow. The
//! iterates are not those of k = 1 (no asynchronous run repeats), the termination is the
//! same certified one.
//!
//! Every ghost point such a sweep computes reads the iterate the sweep started from, as the
//! neighbour's own sweep would; only then do the computed ghost points go to both arrays.
//! The owned rows and the x ghost planes at their ends are one pass per row
//! ([`kernel::sweep_region_ext_x_into`]): swept as regions of their own, a few points wide
//! and one row segment per row of the block, they cost as much as the owned points of a 50³
//! block. And the owned rows begin on aligned points: an async or racy block with a low x
//! neighbour is padded below its ghost zone until they do (the sync blocks align their
//! sweeps instead, "Rows"), since the owned sweep there runs every iteration and a sweep
//! that ends at a frozen halo plane may not round its rows outwards. Measured in
//! docs/performance.md, "Deep halos for async and racy".
//!
//! ## Choosing k (`--halo-depth auto`)
//! What a depth costs per iteration is one k-th of an exchange (six messages in three rounds,
//! waiting for the neighbours included) plus a sweep of the grown block (the ghost zone's
//! redundant work, (k − 1)/2 planes per face with a neighbour on average), less what the
//! wavefront saves by streaming each array once per k sweeps. Each term depends on the
//! machine, the load, the block's shape and the process grid, so `auto` measures rather than
//! models them: before the solve, for each candidate k ([`Config::auto_depth_candidates`]:
//! the depths a fixed k would run with, thinned to a roughly geometric series such as 1, 2,
//! 4, 10 for K = 100), every rank opens channels for k-plane messages, builds a scratch
//! block of the run's shape (ones, every page written: the sweeps cost the same on any normal values, and the
//! run's iterate is untouched), does one warm-up exchange and sweep, then times exchanges
//! and blocks of k sweeps, [`PROBE_SWEEPS`] sweeps at least. The time per iteration of each
//! candidate is reduced to its largest over ranks (the slowest rank sets a sync run's pace;
//! a maximum is exact, so every rank holds the same values and makes the same decisions),
//! the probe stops after two candidates in a row [`PROBE_GIVE_UP`] times slower than the
//! best so far, and the fastest is chosen; a last all-reduce of the choice makes every rank run
//! with the same k whatever happened. One rank still measures: it has no exchange, but the
//! wavefront's cache reuse grows with k. k = 1 is measured on a copy of the run's one-plane
//! iterate, with the one-plane exchange, as the run would do it.
//!
//! Async and racy runs take k = 1: their iterates, so their iteration counts, depend on k
//! (a deep halo's staleness, "Async and racy"), which a probe of the cost per iteration
//! cannot see. Sync runs whose exchange or halo period rules deep halos out take k = 1 too.
//! The report's `halo_auto` holds the candidates' costs, the choice and the probe's time.
//!
//! ## The residual
//! The check period K is a multiple of k, so a check falls at the end of a block; the k-th
//! sweep covers the owned points exactly, with rows of the same length in the same order as
//! a one-plane sweep, and totals each plane's [`Lanes`] on their own, adding the totals in z
//! order (`kernel.rs`, "Plane-ordered sums"): the residual it returns has the bits of the
//! one-plane sweep's.

#[cfg(test)]
mod test;

use crate::clock::{Instant, Work};
use crate::config::Config;
use crate::field::{copy_row, Field};
use crate::geometry::{Axis, Face, Geometry, GlobalIdx, LocalIdx, Plan};
use crate::halo::{self, Halo};
use crate::iterate::{Iterate, Lacks};
use crate::kernel::{self, Grid, Lanes, Region, Shape, ROW_ALIGN};
use crate::parts::Parts;
use crate::problem::Problem;
use crate::record::{DepthProbe, HaloAuto};
use crate::Error;
use chan_core::traits::*;
use chan_core::{close_all, AtomicF64Slice, Channel, ReduceOp, Sync};
use std::ops::Range;
use std::time::Duration;

/// Sweeps the probe of `--halo-depth auto` times per candidate, at least: whole blocks of
/// k, so `max(k, 8)` (module docs, "Choosing k"). About 50 sweeps in all for the four
/// candidates of K = 100, 2% of a 50³ run to 1e-4 on one rank.
pub(crate) const PROBE_SWEEPS: u64 = 8;

/// The probe stops after two candidates in a row this many times slower per iteration than
/// the best so far: the deeper ones only add ghost work. (Stopping at the first let one
/// noisy measurement end the probe: 8 ranks on 2 loaded cores chose k = 1 once, where k = 8
/// was the fastest fixed depth in every round.)
pub(crate) const PROBE_GIVE_UP: f64 = 1.25;

/// The probe's channel tags: above the run's own (0 ..= 5), three per candidate.
const PROBE_TAG: u32 = 64;

/// `--halo-depth auto` (module docs, "Choosing k"): measure the candidate depths on this
/// rank's block (`field`, the run's one-plane iterate, is copied for k = 1 and not changed)
/// and choose one, the same on every rank. Collective.
pub(crate) fn choose_depth<C: Context>(
    ctx: &mut C,
    cfg: &Config,
    plan: &Plan,
    field: &Field,
    faces: &[Face],
) -> Result<HaloAuto, Error> {
    let start = Instant::now();
    let unmeasured = |reason: &str| HaloAuto {
        chosen: 1,
        reason: Some(reason.to_string()),
        candidates: Vec::new(),
        probe_s: 0.0,
    };
    if let Some(why) = cfg.auto_depth_reason() {
        return Ok(unmeasured(why));
    }
    let candidates = cfg.auto_depth_candidates(plan);
    if candidates.len() < 2 {
        return Ok(unmeasured(
            "no depth above 1 runs here (k must divide the check period K and fit in every \
             split block): k = 1",
        ));
    }
    let source = cfg.problem.source([0.5; 3], 1.0).is_some();
    let mut probes: Vec<DepthProbe> = Vec::with_capacity(candidates.len());
    for (i, &k) in candidates.iter().enumerate() {
        let tag = PROBE_TAG + 3 * i as u32;
        let (mut times, work) = if k == 1 {
            let mut one = field.clone();
            one.set_halo_current_only(true);
            (probe(ctx, &mut one, faces, tag)?, 1.0)
        } else {
            let depth = usize::try_from(k).expect("at most MAX_HALO_DEPTH");
            let mut deep = DeepField::scratch(field.geometry(), depth, source);
            let work = deep.work_per_point();
            (probe(ctx, &mut deep, faces, tag)?, work)
        };
        let sweeps = times[3];
        times[3] = work;
        // The slowest rank's: a maximum is exact, so every rank holds the same values.
        ctx.all_reduce(&mut times, ReduceOp::Max)?;
        let p = DepthProbe {
            k,
            sweeps: sweeps as u64,
            iteration_s: times[0],
            sweep_s: times[1],
            exchange_s: times[2],
            work: times[3],
        };
        probes.push(p);
        let best = probes
            .iter()
            .map(|p| p.iteration_s)
            .fold(f64::INFINITY, f64::min);
        let slower = |p: &DepthProbe| p.iteration_s > PROBE_GIVE_UP * best;
        if probes.len() >= 3 && probes.iter().rev().take(2).all(slower) {
            break;
        }
    }
    let fastest = probes
        .iter()
        .min_by(|a, b| a.iteration_s.total_cmp(&b.iteration_s))
        .map_or(1, |p| p.k);
    // Equal values give equal choices; the all-reduce makes sure.
    let mut k = [fastest as f64];
    ctx.all_reduce(&mut k, ReduceOp::Max)?;
    Ok(HaloAuto {
        chosen: k[0] as u64,
        reason: None,
        candidates: probes,
        probe_s: start.elapsed().as_secs_f64(),
    })
}

/// Time exchanges and blocks of sweeps of `field` over fresh Sync channels tagged from
/// `tag`: one warm-up exchange and sweep, then at least [`PROBE_SWEEPS`] sweeps in whole
/// blocks. Returns `[iteration, sweep, exchange]` seconds per sweep and the sweeps timed.
/// Collective (every rank probes the same depth).
fn probe<C: Context, F: Iterate<Link = Face>>(
    ctx: &mut C,
    field: &mut F,
    faces: &[Face],
    tag: u32,
) -> Result<[f64; 4], Error> {
    let specs = halo::specs(field, faces, tag, 1, 0)?;
    let mut chans = ctx.open::<Sync>(&specs)?;
    let k = field.block_len(u64::MAX);
    let blocks = PROBE_SWEEPS.div_ceil(k);
    // The probe's own exchanges are timed here, not in the run's breakdown.
    let mut parts = Parts::default();
    field.exchange(&mut chans, faces, 0, &mut parts)?;
    field.sweep_block(1, false);
    ctx.barrier()?;
    let (mut exchange, mut sweep) = (Duration::ZERO, Duration::ZERO);
    let all = Instant::now();
    for b in 0..blocks {
        let t = Instant::now();
        field.exchange(&mut chans, faces, 1 + b * k, &mut parts)?;
        exchange += t.elapsed();
        let t = Instant::now();
        field.sweep_block(k, false);
        sweep += t.computed(Work::unmodelled());
    }
    let total = all.elapsed();
    close_all(chans)?;
    let n = (blocks * k) as f64;
    Ok([
        total.as_secs_f64() / n,
        sweep.as_secs_f64() / n,
        exchange.as_secs_f64() / n,
        n,
    ])
}

/// One rank's iterate with a ghost zone `depth` planes deep on every face with a neighbour
/// (one plane, the Dirichlet values, on the others), stored as a [`Shape`] grown by the ghost
/// zone: grown index = local index + `off` along each axis.
#[derive(Debug)]
pub(crate) struct DeepField {
    geom: Geometry,
    depth: usize,
    shape: Shape,
    /// `depth − 1` along an axis with a neighbour below, else 0.
    off: [usize; 3],
    /// A neighbour below / above, per axis.
    lo: [bool; 3],
    hi: [bool; 3],
    /// The current iterate and the other array of the wavefront.
    u: Grid,
    next: Grid,
    /// `h² f` at every point of the grown block that is a point of the global grid's
    /// interior (the neighbours' too), for a problem with a source term.
    rhs: Option<Grid>,
    /// Async and racy: sweeps since the ghost zone beyond each face (by [`Face::index`])
    /// was last written by a message (or the start).
    age: [u64; 6],
    /// The region sweep j of a block updates, at index j − 1 (j = 1 ..= depth), computed
    /// once so that a block of sweeps allocates nothing.
    block_regions: Vec<Region>,
    /// Rows per tile of a block's wavefront along y (module docs, "Tiles"), or `None` when
    /// the wavefront's planes fit the cache whole.
    tile_rows: Option<usize>,
}

/// The L2 cache assumed where the machine does not say (1 MiB per core, as on the Zen 4
/// cores the benchmarks ran on).
const DEFAULT_L2_BYTES: usize = 1 << 20;

/// What the wavefront's working set (2 arrays × (k + 2) planes) may take of the cache before
/// a block's sweeps go in tiles along y: half of CPU 0's L2 as Linux reports it
/// (`/sys/devices/system/cpu/cpu0/cache/index2/size`, e.g. `1024K`), else half of
/// [`DEFAULT_L2_BYTES`]. Read once.
fn wavefront_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let l2 = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .ok()
            .and_then(|s| parse_cache_size(s.trim()))
            .unwrap_or(DEFAULT_L2_BYTES);
        l2 / 2
    })
}

/// `1024K`, `2M` or a plain byte count, as sysfs gives a cache's size.
fn parse_cache_size(s: &str) -> Option<usize> {
    let (num, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()?
        .checked_mul(unit)
        .filter(|&b| b > 0)
}

/// The rows per tile of a wavefront of `depth` sweeps over planes of `rows` rows of
/// `row_len` values (halo included), or `None` if the whole planes fit [`wavefront_bytes`].
fn tile_rows(depth: usize, rows: usize, row_len: usize) -> Option<usize> {
    tile_rows_within(wavefront_bytes(), depth, rows, row_len)
}

/// [`tile_rows`] for a working-set budget of `bytes`.
fn tile_rows_within(bytes: usize, depth: usize, rows: usize, row_len: usize) -> Option<usize> {
    let slab = bytes / (2 * (depth + 2));
    let row = row_len * std::mem::size_of::<f64>();
    (rows * row > slab).then(|| (slab / row).max(8))
}

/// `x` begun at the aligned point at or before its start (module docs, "Rows"): grown x = 1
/// lies on a 32-byte boundary ([`kernel::Grid`]), and every row stride is a multiple of
/// [`ROW_ALIGN`] values.
fn aligned(x: Range<usize>) -> Range<usize> {
    assert!(x.start >= 1);
    1 + (x.start - 1) / ROW_ALIGN * ROW_ALIGN..x.end
}

impl DeepField {
    /// The starting iterate of `problem` on `geom`'s block grown by `depth`-deep ghost zones:
    /// every point at the value the problem gives it (as if exchanged), in both arrays.
    /// `align_owned` (async and racy): rows of owned points begin on an aligned point, padded
    /// below the ghost zone where needed (module docs, "Async and racy").
    pub(crate) fn new(geom: &Geometry, problem: &Problem, depth: usize, align_owned: bool) -> Self {
        let mut field = DeepField::layout(geom, depth, align_owned);
        // The first grown x the block holds (the ghost zone's outer plane); the padding
        // below it is never read.
        let (off, lo, shape) = (field.off, field.lo, field.shape);
        let x0 = if lo[0] { off[0] + 1 - depth } else { 0 };
        let g = shape.n.to_array();
        for z in 0..=g[2] + 1 {
            for y in 0..=g[1] + 1 {
                for x in x0..=g[0] + 1 {
                    // The global index of grown point (x, y, z): origin + local − 1, where
                    // local = grown − off (the ghost zone lies inside the neighbours' blocks,
                    // validated by `Config::plan`: depth ≤ their extent).
                    let gi = [x, y, z];
                    let glob = [0, 1, 2].map(|a| geom.origin[a] + gi[a] - off[a] - 1);
                    let gidx = GlobalIdx {
                        x: glob[0],
                        y: glob[1],
                        z: glob[2],
                    };
                    let pos = geom.position(gidx);
                    let i = shape.index(x, y, z);
                    if geom.on_boundary(gidx) {
                        field.u[i] = problem.boundary(gidx, pos);
                    } else {
                        field.u[i] = problem.initial(gidx, pos);
                        if let Some(f) = problem.source(pos, geom.h[0]) {
                            field.rhs.get_or_insert_with(|| Grid::new(shape.len, 0.0))[i] = f;
                        }
                    }
                }
            }
        }
        field.next.copy_from_slice(&field.u);
        field
    }

    /// A block of the shape [`DeepField::new`] gives, every value 1 (a source term of ones
    /// when `source`): what the probe of `--halo-depth auto` sweeps, at the cost of the
    /// real block without setting up its values. Every page is written here: fresh zeroed
    /// memory faults in on its first write, and the probe's k = 2 took 2 to 60 times k = 1's
    /// time per sweep on one rank when its timed sweeps paid for that.
    fn scratch(geom: &Geometry, depth: usize, source: bool) -> Self {
        let mut field = DeepField::layout(geom, depth, false);
        field.u.fill(1.0);
        field.next.fill(1.0);
        if source {
            field.rhs = Some(Grid::new(field.shape.len, 1.0));
        }
        field
    }

    /// The grown block of `geom` with `depth`-deep ghost zones, its arrays all zeros, no
    /// source term.
    fn layout(geom: &Geometry, depth: usize, align_owned: bool) -> Self {
        assert!(depth >= 1);
        let n = geom.local.to_array();
        let has = |f: Face| geom.neighbours[f.index()].is_some();
        let lo = Axis::ALL.map(|a| has(Face::new(a, false)));
        let hi = Axis::ALL.map(|a| has(Face::new(a, true)));
        let grow = |a: usize| (depth - 1) * (usize::from(lo[a]) + usize::from(hi[a]));
        let mut off = [0, 1, 2].map(|a| if lo[a] { depth - 1 } else { 0 });
        // Owned x begins at off + 1, aligned when off is a multiple of ROW_ALIGN.
        let pad = if align_owned {
            (ROW_ALIGN - off[0] % ROW_ALIGN) % ROW_ALIGN
        } else {
            0
        };
        off[0] += pad;
        let shape = Shape::new(crate::geometry::Dims::new(
            n[0] + grow(0) + pad,
            n[1] + grow(1),
            n[2] + grow(2),
        ));
        let mut field = DeepField {
            geom: geom.clone(),
            depth,
            shape,
            off,
            lo,
            hi,
            u: Grid::new(shape.len, 0.0),
            next: Grid::new(shape.len, 0.0),
            rhs: None,
            age: [0; 6],
            block_regions: Vec::with_capacity(depth),
            tile_rows: tile_rows(depth, shape.n.y + 2, shape.sx),
        };
        field.block_regions = (1..=depth)
            .map(|j| Region {
                x: aligned(field.range(0, j)),
                y: field.range(1, j),
                z: field.range(2, j),
            })
            .collect();
        field
    }

    /// Points a block of `depth` sweeps updates per owned point per sweep: 1 on a block
    /// without neighbours, more with the ghost zone's redundant sweeps (and the rows begun
    /// on aligned points, "Rows").
    pub(crate) fn work_per_point(&self) -> f64 {
        let swept: usize = self.block_regions.iter().map(Region::volume).sum();
        swept as f64 / (self.depth * self.geom.local.volume()) as f64
    }

    /// The grown range along `a` that sweep `j` of a block updates (j = depth: the owned
    /// points).
    fn range(&self, a: usize, j: usize) -> Range<usize> {
        let (k, n) = (self.depth, self.geom.local.to_array()[a]);
        let start = self.off[a] + 1 - if self.lo[a] { k - j } else { 0 };
        let end = self.off[a] + n + 1 + if self.hi[a] { k - j } else { 0 };
        start..end
    }

    /// The owned points, in grown coordinates.
    fn owned(&self) -> Region {
        let k = self.depth;
        Region {
            x: self.range(0, k),
            y: self.range(1, k),
            z: self.range(2, k),
        }
    }

    /// Sweeps 1 ..= `m` (m ≤ depth) of a block as one wavefront over z (module docs); Σ r² of
    /// the iterate sweep `depth` started from over the owned points when `m = depth` and
    /// `resid` (a check falls at the end of the block), else 0: the other sweeps skip the
    /// residual. The current iterate is the result afterwards.
    pub(crate) fn sweep_block(&mut self, m: usize, resid: bool) -> f64 {
        assert!(m >= 1 && m <= self.depth);
        let mut sum = 0.0;
        let regions = &self.block_regions[..m];
        let owned_x = self.range(0, self.depth);
        let z1 = regions[0].z.clone();
        // A residual is summed row by row in a plain sweep's order: that block goes untiled.
        let rows = self.tile_rows.filter(|_| !resid);
        let base = regions[0].y.start;
        let tiles = rows.map_or(1, |r| regions[0].y.len().div_ceil(r));
        for t in 0..tiles {
            for s in z1.start..z1.end + m - 1 {
                for (j, reg) in (1..=m).zip(regions) {
                    let Some(p) = s.checked_sub(j - 1).filter(|p| reg.z.contains(p)) else {
                        continue;
                    };
                    // Tile t's rows at sweep j: (j − 1) rows below tile t's rows at sweep 1,
                    // the first and last tiles reaching the region's ends (module docs,
                    // "Tiles").
                    let y = match rows {
                        None => reg.y.clone(),
                        Some(r) => {
                            let edge = |t: usize| (base + t * r).saturating_sub(j - 1);
                            let lo = if t == 0 {
                                reg.y.start
                            } else {
                                edge(t).max(reg.y.start)
                            };
                            let hi = if t + 1 == tiles {
                                reg.y.end
                            } else {
                                edge(t + 1).min(reg.y.end)
                            };
                            lo..hi
                        }
                    };
                    if y.is_empty() {
                        continue;
                    }
                    let check = resid && j == self.depth;
                    let plane = Region {
                        x: if check {
                            owned_x.clone()
                        } else {
                            reg.x.clone()
                        },
                        y,
                        z: p..p + 1,
                    };
                    // Sweep j reads the array sweep j − 1 wrote (the iterate for j = 1).
                    let (src, dst) = if j % 2 == 1 {
                        (&self.u, &mut self.next)
                    } else {
                        (&self.next, &mut self.u)
                    };
                    let rhs = self.rhs.as_deref();
                    if check {
                        // One plane: its lanes totalled on their own, the totals added in
                        // z order (kernel.rs, "Plane-ordered sums").
                        let mut lanes = Lanes::default();
                        kernel::sweep_region_into(&self.shape, src, rhs, dst, &plane, &mut lanes);
                        sum += lanes.total();
                    } else {
                        kernel::step_region(&self.shape, src, rhs, dst, &plane);
                    }
                }
            }
        }
        if m % 2 == 1 {
            std::mem::swap(&mut self.u, &mut self.next);
        }
        sum
    }

    /// One sweep of the async and racy variants: the owned points, and beyond each face with
    /// a neighbour the ghost planes less than `depth − 1 − age` away, `age` being the sweeps
    /// since that ghost zone came in a message: a fresh ghost zone is advanced as the
    /// neighbour would advance it, one plane less each sweep, until only the halo plane
    /// next to the block is left, frozen until the next message (what k = 1 does with every
    /// halo). The ghost planes swept are written to both arrays, so the halo read after the
    /// swap is the newest. Σ r² of the current iterate over the owned points.
    pub(crate) fn sweep_async(&mut self) -> f64 {
        let k = self.depth as u64;
        let n = self.geom.local.to_array();
        let ext = |f: Face| -> usize {
            let has = if f.high {
                self.hi[f.axis.index()]
            } else {
                self.lo[f.axis.index()]
            };
            if has {
                (k - 1).saturating_sub(self.age[f.index()]) as usize
            } else {
                0
            }
        };
        // Per axis: [ghost below, owned, ghost above], in grown coordinates.
        let parts: [[Range<usize>; 3]; 3] = [0, 1, 2].map(|a| {
            let axis = Axis::ALL[a];
            let (own0, own1) = (self.off[a] + 1, self.off[a] + n[a] + 1);
            [
                own0 - ext(Face::new(axis, false))..own0,
                own0..own1,
                own1..own1 + ext(Face::new(axis, true)),
            ]
        });
        let whole = |a: usize| parts[a][0].start..parts[a][2].end;
        let owned = |a: usize| parts[a][1].clone();
        let (rhs, sh) = (self.rhs.as_deref(), &self.shape);
        let own = Region {
            x: owned(0),
            y: owned(1),
            z: owned(2),
        };
        // The owned rows with the x ghost planes at their ends, in one pass per row (as
        // separate regions, a few points wide, they cost as much as the owned points at 50³);
        // plane by plane, the planes' totals added in z order (kernel.rs, "Plane-ordered
        // sums").
        let x_ext = [parts[0][0].len(), parts[0][2].len()];
        let mut sum = 0.0;
        for z in own.z.clone() {
            let plane = Region {
                z: z..z + 1,
                ..own.clone()
            };
            let mut lanes = Lanes::default();
            kernel::sweep_region_ext_x_into(
                sh,
                &self.u,
                rhs,
                &mut self.next,
                &plane,
                x_ext,
                &mut lanes,
            );
            sum += lanes.total();
        }
        // The rest of the ghost shell as disjoint boxes: z slabs over the whole x, y extent,
        // y slabs over the whole x extent and the owned z range.
        let shell = [0, 2].map(|side| {
            [
                Region {
                    x: whole(0),
                    y: whole(1),
                    z: parts[2][side].clone(),
                },
                Region {
                    x: whole(0),
                    y: parts[1][side].clone(),
                    z: owned(2),
                },
            ]
        });
        for reg in shell.iter().flatten().filter(|r| !r.is_empty()) {
            kernel::step_region(sh, &self.u, rhs, &mut self.next, reg);
        }
        // Every sweep read the current iterate; now the swept ghost points go to both arrays.
        for reg in shell.iter().flatten() {
            copy_box(sh, &mut self.u, &self.next, reg);
        }
        for x in [parts[0][0].clone(), parts[0][2].clone()] {
            copy_box(sh, &mut self.u, &self.next, &Region { x, ..own.clone() });
        }
        std::mem::swap(&mut self.u, &mut self.next);
        for a in &mut self.age {
            *a = a.saturating_add(1);
        }
        sum
    }

    /// Write a racy view into the ghost planes beyond `face` (relaxed atomic loads, in the
    /// order of [`DeepField::unpack`]).
    pub(crate) fn unpack_atomic(&mut self, face: Face, view: &chan_core::AtomicF64Slice) {
        assert_eq!(view.len(), self.face_len(face), "unpack: wrong view length");
        let [bx, by, bz] = self.face_box(face, true);
        let mut k = 0;
        for z in bz {
            for y in by.clone() {
                let i = self.shape.index(bx.start, y, z);
                for v in &mut self.u[i..i + bx.len()] {
                    *v = view.load(k);
                    k += 1;
                }
            }
        }
        self.age[face.index()] = 0;
    }

    /// Σ r² of the current iterate over the owned points (the halo must be current).
    pub(crate) fn residual_sq(&self) -> f64 {
        kernel::residual_sq_region(&self.shape, &self.u, self.rhs.as_deref(), &self.owned())
    }

    /// The box a message across `face` carries (`ghost`: the ghost planes it fills on the
    /// receiving side; else the owned planes it is packed from), in grown coordinates: the
    /// face's `depth` planes, and along the other axes the owned range, grown by the ghost
    /// planes of the axes exchanged before this one (x before y before z).
    fn face_box(&self, face: Face, ghost: bool) -> [Range<usize>; 3] {
        let a = face.axis.index();
        let (k, n) = (self.depth, self.geom.local.to_array());
        [0, 1, 2].map(|b| {
            if b == a {
                let first = match (face.high, ghost) {
                    (false, false) => self.off[a] + 1,
                    (false, true) => self.off[a] + 1 - k,
                    (true, false) => self.off[a] + n[a] + 1 - k,
                    (true, true) => self.off[a] + n[a] + 1,
                };
                first..first + k
            } else if b < a {
                let g = self.shape.n.to_array()[b];
                let first = if self.lo[b] { self.off[b] + 1 - k } else { 1 };
                first..g + 1 + usize::from(self.hi[b])
            } else {
                self.off[b] + 1..self.off[b] + n[b] + 1
            }
        })
    }

    /// Values in a message across `face`.
    pub(crate) fn face_len(&self, face: Face) -> usize {
        self.face_box(face, false).iter().map(Range::len).product()
    }

    /// Copy the owned planes next to `face` into `buf`, x fastest.
    pub(crate) fn pack(&self, face: Face, buf: &mut [f64]) {
        assert_eq!(buf.len(), self.face_len(face), "pack: wrong message length");
        let [bx, by, bz] = self.face_box(face, false);
        let mut rows = buf.chunks_exact_mut(bx.len());
        for z in bz {
            for y in by.clone() {
                let i = self.shape.index(bx.start, y, z);
                let row = rows.next().expect("the message holds every row");
                copy_row(row, &self.u[i..i + bx.len()]);
            }
        }
    }

    /// Write a neighbour's message into the ghost planes beyond `face` (the inverse of its
    /// [`DeepField::pack`] across the opposite face).
    pub(crate) fn unpack(&mut self, face: Face, data: &[f64]) {
        assert_eq!(
            data.len(),
            self.face_len(face),
            "unpack: wrong message length"
        );
        let [bx, by, bz] = self.face_box(face, true);
        let mut rows = data.chunks_exact(bx.len());
        for z in bz {
            for y in by.clone() {
                let i = self.shape.index(bx.start, y, z);
                let row = rows.next().expect("the message holds every row");
                copy_row(&mut self.u[i..i + bx.len()], row);
            }
        }
        self.age[face.index()] = 0;
    }

    /// The largest |u − exact| over the owned points, for a problem with a known solution
    /// ([`Field::error_max`]'s value: the same points, the same differences).
    pub(crate) fn error_max(&self, problem: &Problem) -> Option<f64> {
        let o = self.owned();
        let mut worst = 0.0f64;
        for z in o.z.clone() {
            for y in o.y.clone() {
                for x in o.x.clone() {
                    let l = LocalIdx {
                        x: x - self.off[0],
                        y: y - self.off[1],
                        z: z - self.off[2],
                    };
                    let exact = problem.exact(self.geom.position(self.geom.to_global(l)))?;
                    worst = crate::field::worse(
                        worst,
                        (self.u[self.shape.index(x, y, z)] - exact).abs(),
                    );
                }
            }
        }
        Some(worst)
    }

    /// The one-plane iterate `field` (this block's, as set up at the start) with the owned
    /// points of this one: the tests compare it with k = 1's.
    pub(crate) fn into_field(self, mut field: Field) -> Field {
        field.set_owned(&self.owned_values());
        field
    }

    /// The owned values of the current iterate, x fastest.
    pub(crate) fn owned_values(&self) -> Vec<f64> {
        let o = self.owned();
        let mut out = Vec::with_capacity(o.volume());
        for z in o.z.clone() {
            for y in o.y.clone() {
                let i = self.shape.index(o.x.start, y, z);
                out.extend_from_slice(&self.u[i..i + o.x.len()]);
            }
        }
        out
    }
}

/// Copy the points of `reg` from `src` into `dst`, arrays of shape `sh`, row by row.
fn copy_box(sh: &Shape, dst: &mut [f64], src: &[f64], reg: &Region) {
    if reg.is_empty() {
        return;
    }
    let m = reg.x.len();
    for z in reg.z.clone() {
        for y in reg.y.clone() {
            let i = sh.index(reg.x.start, y, z);
            copy_row(&mut dst[i..i + m], &src[i..i + m]);
        }
    }
}

/// The deep halo's iterate in the loops of `solver/`: k-plane messages, a block of up to
/// k sweeps per exchange in the sync loop, [`DeepField::sweep_async`] in the async one.
impl Halo for DeepField {
    type Link = Face;
    fn pack(&self, face: Face, buf: &mut [f64]) {
        DeepField::pack(self, face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        DeepField::unpack(self, face, data);
    }
}

impl Iterate for DeepField {
    type Snapshot = Lacks;
    fn link_peer(&self, face: Face) -> usize {
        self.geom.neighbours[face.index()].expect("links are faces with a neighbour")
    }
    fn link_tag(&self, face: Face) -> u32 {
        face.axis.index() as u32
    }
    fn message_len(&self, face: Face) -> usize {
        DeepField::face_len(self, face)
    }
    fn place(&self) -> ([usize; 3], crate::geometry::Dims) {
        (self.geom.coords, self.geom.local)
    }
    fn face_link(&self, face: Face) -> Option<Face> {
        Some(face)
    }
    fn unpack_atomic(&mut self, face: Face, view: &AtomicF64Slice) {
        DeepField::unpack_atomic(self, face, view);
    }
    /// The deep exchange: along x, then y, then z, each round a whole exchange of that axis's
    /// faces ([`halo::swap`]: sends posted before receives), complete before the next packs
    /// (module docs, "corners"). `faces` are in [`Face::ALL`] order, an axis's together.
    fn exchange<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        faces: &[Face],
        it: u64,
        parts: &mut Parts,
    ) -> Result<(), Error> {
        let mut first = 0;
        for axis in Axis::ALL {
            let n = faces[first..].iter().take_while(|f| f.axis == axis).count();
            let round = first..first + n;
            halo::swap(&mut chans[round.clone()], &faces[round], it, self, parts)?;
            first += n;
        }
        debug_assert_eq!(first, faces.len(), "faces in Face::ALL order");
        Ok(())
    }
    fn residual_sq(&self) -> f64 {
        DeepField::residual_sq(self)
    }
    fn snapshot_buffer(&self) -> Result<Lacks, crate::Setting> {
        Err(crate::Setting::HaloDepth)
    }
    /// Blocks start at multiples of k; only the last one, cut by --max-iters, is shorter
    /// (and holds no check: checks fall on multiples of K, so of k).
    fn block_len(&self, left: u64) -> u64 {
        (self.depth as u64).min(left).max(1)
    }
    fn sweep_block(&mut self, m: u64, resid: bool) -> f64 {
        DeepField::sweep_block(self, usize::try_from(m).expect("at most depth"), resid)
    }
    fn sweep_async(&mut self) -> f64 {
        DeepField::sweep_async(self)
    }
    fn error_max(&self, problem: &Problem) -> Option<f64> {
        DeepField::error_max(self, problem)
    }
}
