//! Maynard's benchmark of the table.
//!
//! Each rank creates its objects (distinct nonzero 8-byte integers from a seeded stream:
//! [`Volume::PerRank`] objects per rank, weak scaling, or a share of a [`Volume::Total`],
//! strong scaling), and inserts them into a [`Set`] of [`SLOTS_PER_OBJECT`] slots per object
//! of the largest share (load factor 1/2), by compare-and-swap or under the owner's lock
//! ([`Insert`]). Then it probes for every object it inserted, and looks up as many objects
//! again, a [`Spec::hit_ratio`] share of them objects of other ranks (hits) and the rest
//! objects nobody inserted (misses). Correctness is part of the run ([`Row::correct`]): every
//! object must be found, the table must hold exactly the objects inserted (they are
//! distinct, so that means each exactly once), every hit must be found and every miss
//! reported absent.

use crate::hash::splitmix64;
use crate::table::{Insert, Set, TableError};
use chan_core::backend::RawWindow;
use chan_core::traits::*;
use chan_core::ReduceOp;
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[cfg(test)]
mod test;

/// Table slots per object a rank inserts: a load factor of 1/2.
pub const SLOTS_PER_OBJECT: usize = 2;

/// Bytes a rank allocates per object: the object itself, its lookup and that lookup's hit
/// flag, its [`SLOTS_PER_OBJECT`] table slots, and the copy of the slots read back for the
/// count ([`Table::local_len`](crate::Table::local_len)).
pub const BYTES_PER_OBJECT: u64 = (size_of::<u64>()
    + size_of::<u64>()
    + size_of::<bool>()
    + 2 * SLOTS_PER_OBJECT * size_of::<u64>()) as u64;

/// The objects per rank of a run given none ([`Volume::PerRank`], one run each).
pub const DEFAULT_LOCAL_VOLUMES: [usize; 5] = [10000, 20000, 40000, 80000, 160000];

/// The share of lookups that are hits, when none is given.
pub const DEFAULT_HIT_RATIO: f64 = 0.5;

/// Object `g` of the run (rank r's objects are `g = first(r)..first(r) + count(r)`; those from
/// the run's total on are the lookups' misses): splitmix64 of a counter unique to `g`, offset
/// by the seed. Distinct for distinct `g`, since splitmix64 is a bijection of distinct
/// counters. 0 marks an empty slot, so the one counter that maps to 0 gives `u64::MAX`
/// instead; a run would then hold `u64::MAX` twice only if another of its counters also
/// mapped there (odds about 2^-64 per object), and the run's own check would report it.
pub fn object(seed: u64, g: u64) -> u64 {
    let counter = seed.wrapping_mul(1 << 40).wrapping_add(g);
    match splitmix64(counter) {
        0 => u64::MAX,
        v => v,
    }
}

/// How many objects a run inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volume {
    /// This many per rank (weak scaling).
    PerRank(usize),
    /// This many in all, shared out as evenly as possible (strong scaling).
    Total(usize),
}

impl Volume {
    /// Rank `rank`'s objects of a world of `size`: (first, count).
    pub fn share(self, rank: usize, size: usize) -> (usize, usize) {
        match self {
            Volume::PerRank(lv) => (rank * lv, lv),
            Volume::Total(n) => {
                let (q, r) = (n / size, n % size);
                (rank * q + rank.min(r), q + usize::from(rank < r))
            }
        }
    }

    /// Objects of every rank.
    pub fn total(self, size: usize) -> usize {
        match self {
            Volume::PerRank(lv) => lv * size,
            Volume::Total(n) => n,
        }
    }

    /// The largest share of a rank.
    pub fn most(self, size: usize) -> usize {
        match self {
            Volume::PerRank(lv) => lv,
            Volume::Total(n) => n.div_ceil(size),
        }
    }

    /// At least one object.
    pub fn check(self) -> Result<(), SettingError> {
        match self {
            Volume::PerRank(0) => Err(SettingError::LocalVolume(0)),
            Volume::Total(0) => Err(SettingError::Total(0)),
            _ => Ok(()),
        }
    }
}

/// A setting the benchmark cannot run with; each variant names the setting and holds the
/// value given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// Objects per rank ([`Volume::PerRank`]): at least 1.
    #[error("local volume {0}: every rank inserts at least 1 object")]
    LocalVolume(usize),
    /// Objects of all ranks ([`Volume::Total`]): at least 1.
    #[error("total {0}: the ranks insert at least 1 object")]
    Total(usize),
    /// The share of lookups that are hits ([`Spec::hit_ratio`]): from 0 to 1.
    #[error("hit ratio {0}: must be from 0 to 1 (the share of lookups that are hits)")]
    HitRatio(f64),
}

/// What can fail in a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A setting the benchmark cannot run with (checked before the table is made).
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// The table (its window, a one-sided operation, a collective).
    #[error(transparent)]
    Table(#[from] TableError),
}

impl From<chan_core::CommError> for BenchError {
    fn from(e: chan_core::CommError) -> Self {
        BenchError::Table(e.into())
    }
}

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The objects inserted.
    pub volume: Volume,
    /// Seed of the object stream.
    pub seed: u64,
    /// How the objects are inserted.
    pub insert: Insert,
    /// The share of lookups that look for an object in the table.
    pub hit_ratio: f64,
}

impl Spec {
    /// The volume and the hit ratio, in that order.
    pub fn check(&self) -> Result<(), SettingError> {
        self.volume.check()?;
        check_hit_ratio(self.hit_ratio)
    }
}

/// A hit ratio from 0 to 1 (not NaN).
pub fn check_hit_ratio(r: f64) -> Result<(), SettingError> {
    if (0.0..=1.0).contains(&r) {
        Ok(())
    } else {
        Err(SettingError::HitRatio(r))
    }
}

/// Lookup `j` is a hit when the running count of hits steps up there: `hit_ratio` of any
/// stretch of lookups, spread evenly.
fn is_hit(j: usize, hit_ratio: f64) -> bool {
    ((j + 1) as f64 * hit_ratio).floor() > (j as f64 * hit_ratio).floor()
}

/// One run's measurements, as saved (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// The backend's name (`threads`, `mpi`, `shmem`).
    pub backend: String,
    /// Open MPI's one-sided component for MPI runs, else empty: [`run`] leaves it empty, a
    /// caller that knows it fills it in.
    #[serde(default)]
    pub osc: String,
    /// World size.
    pub ranks: usize,
    /// Objects per rank (the largest share with [`Volume::Total`]).
    pub local_volume: usize,
    /// How the objects were inserted (rows saved before the setting are compare-and-swap).
    #[serde(default)]
    pub insert: Insert,
    /// [`Volume::Total`]'s objects (strong scaling), or 0: ranks × LV (weak scaling).
    #[serde(default)]
    pub total: usize,
    /// Slowest rank's insert phase, seconds (inserts, then a fence).
    pub insert_s: f64,
    /// Slowest rank's probe phase, seconds.
    pub probe_s: f64,
    /// LV / insert_s.
    pub insert_ops_per_s_per_rank: f64,
    /// LV / probe_s.
    pub probe_ops_per_s_per_rank: f64,
    /// Taken slots met while inserting, every rank.
    pub collisions: u64,
    /// Slots read while probing, every rank.
    pub probe_reads: u64,
    /// Objects the table holds after the insert phase, every rank.
    pub table_objects: u64,
    /// Objects found by the probe phase, every rank.
    pub found: u64,
    /// Slowest rank's lookup phase, seconds (0 in rows saved before the lookups).
    #[serde(default)]
    pub lookup_s: f64,
    /// Lookups per rank (the largest share) / lookup_s.
    #[serde(default)]
    pub lookup_ops_per_s_per_rank: f64,
    /// The share of lookups that are hits.
    #[serde(default)]
    pub hit_ratio: f64,
    /// Lookups, every rank.
    #[serde(default)]
    pub lookups: u64,
    /// Of those, the hits (objects in the table).
    #[serde(default)]
    pub hits: u64,
    /// Hits the lookups found.
    #[serde(default)]
    pub hits_found: u64,
    /// Misses the lookups reported absent.
    #[serde(default)]
    pub misses_absent: u64,
    /// Every object found, the table holds exactly the objects inserted, every hit found and
    /// every miss absent.
    pub correct: bool,
}

impl Row {
    /// Objects inserted, every rank.
    pub fn objects(&self) -> usize {
        if self.total > 0 {
            self.total
        } else {
            self.ranks * self.local_volume
        }
    }
}

/// Run the benchmark once (collective): check the settings, make the table, insert, probe,
/// look up, judge the table and free it. Every rank returns the same row.
pub fn run<C: Windows>(ctx: &mut C, spec: &Spec) -> Result<Row, BenchError> {
    spec.check()?;
    let slots = SLOTS_PER_OBJECT * spec.volume.most(ctx.size()).max(1);
    let mut table = Set::<C::Raw, u64>::new(ctx, slots, spec.insert)?;
    let row = phases(ctx, &mut table, spec)?;
    table.free()?;
    Ok(row)
}

/// Rank `first..first + count`'s lookups: the objects it looks for, and apart (a byte each,
/// not the 8 a flag beside each key would take) whether each is a hit. Hits are objects of
/// the other ranks (of this one only when it alone has any), picked by a seeded stream;
/// misses are objects past the run's `objects`, inserted by nobody.
fn lookups(spec: &Spec, first: usize, count: usize, objects: usize) -> (Vec<u64>, Vec<bool>) {
    let others = objects - count;
    let hit: Vec<bool> = (0..count).map(|j| is_hit(j, spec.hit_ratio)).collect();
    let keys = (0..count)
        .map(|j| {
            let n = (first + j) as u64;
            if !hit[j] {
                return object(spec.seed, (objects + first + j) as u64);
            }
            let pick = splitmix64(spec.seed ^ splitmix64(n ^ 0x6c6f_6f6b_7570));
            let g = if others == 0 {
                first as u64 + pick % count as u64
            } else {
                let x = pick % others as u64;
                if x < first as u64 {
                    x
                } else {
                    x + count as u64
                }
            };
            object(spec.seed, g)
        })
        .collect();
    (keys, hit)
}

/// This rank's counts of the three phases, before the sums over ranks.
#[derive(Default)]
struct Counts {
    collisions: u64,
    /// Objects already there, or that found the table full: neither may happen.
    misplaced: u64,
    found: u64,
    reads: u64,
    hits: u64,
    hits_found: u64,
    misses_absent: u64,
}

/// Insert, probe and look up on `table`, and judge the table.
fn phases<C: Windows>(
    ctx: &mut C,
    table: &mut Set<C::Raw, u64>,
    spec: &Spec,
) -> Result<Row, BenchError> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let objects = spec.volume.total(size);
    let (first, count) = spec.volume.share(rank, size);
    let objs: Vec<u64> = (first..first + count)
        .map(|g| object(spec.seed, g as u64))
        .collect();
    let (keys, hit) = lookups(spec, first, count, objects);
    let mut n = Counts::default();

    ctx.barrier()?;
    let t0 = Instant::now();
    for &obj in &objs {
        match table.insert(obj, ()) {
            Ok(p) => {
                n.collisions += p.collisions;
                n.misplaced += u64::from(p.present);
            }
            Err(TableError::Full { .. }) => n.misplaced += 1,
            Err(e) => return Err(e.into()),
        }
    }
    table.fence()?;
    let insert_s = t0.elapsed().as_secs_f64();

    ctx.barrier()?;
    let t1 = Instant::now();
    for &obj in &objs {
        let f = table.find(obj)?;
        n.found += u64::from(f.value.is_some());
        n.reads += f.reads;
    }
    table.fence()?;
    let probe_s = t1.elapsed().as_secs_f64();

    ctx.barrier()?;
    let t2 = Instant::now();
    for (&obj, &hit) in keys.iter().zip(&hit) {
        let f = table.contains(obj)?;
        n.hits += u64::from(hit);
        n.hits_found += u64::from(hit && f);
        n.misses_absent += u64::from(!hit && !f);
    }
    table.fence()?;
    let lookup_s = t2.elapsed().as_secs_f64();

    let held = table.local_len()? as u64;
    let lookups = keys.len() as u64;
    row(ctx, spec, &n, held, lookups, [insert_s, probe_s, lookup_s])
}

/// The row of every rank's counts and slowest times.
fn row<C: Windows>(
    ctx: &mut C,
    spec: &Spec,
    n: &Counts,
    held: u64,
    lookups: u64,
    mut times: [f64; 3],
) -> Result<Row, BenchError> {
    let size = ctx.size();
    let mut sums = [
        n.collisions as f64,
        n.reads as f64,
        held as f64,
        n.found as f64,
        n.misplaced as f64,
        lookups as f64,
        n.hits as f64,
        n.hits_found as f64,
        n.misses_absent as f64,
    ];
    ctx.all_reduce(&mut sums, ReduceOp::Sum)?;
    ctx.all_reduce(&mut times, ReduceOp::Max)?;
    let want = spec.volume.total(size) as u64;
    let (table_objects, found) = (sums[2] as u64, sums[3] as u64);
    let (lookups, hits) = (sums[5] as u64, sums[6] as u64);
    let (hits_found, misses_absent) = (sums[7] as u64, sums[8] as u64);
    let most = spec.volume.most(size) as f64;
    Ok(Row {
        backend: <C::Raw as RawWindow>::NAME.to_string(),
        osc: String::new(),
        ranks: size,
        local_volume: spec.volume.most(size),
        insert: spec.insert,
        total: match spec.volume {
            Volume::PerRank(_) => 0,
            Volume::Total(n) => n,
        },
        insert_s: times[0],
        probe_s: times[1],
        insert_ops_per_s_per_rank: most / times[0],
        probe_ops_per_s_per_rank: most / times[1],
        collisions: sums[0] as u64,
        probe_reads: sums[1] as u64,
        table_objects,
        found,
        lookup_s: times[2],
        lookup_ops_per_s_per_rank: most / times[2],
        hit_ratio: spec.hit_ratio,
        lookups,
        hits,
        hits_found,
        misses_absent,
        correct: table_objects == want
            && found == want
            && sums[4] == 0.0
            && hits_found == hits
            && misses_absent == lookups - hits,
    })
}
