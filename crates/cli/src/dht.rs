//! `aiac dht`: Maynard's distributed hash table benchmark over one-sided windows.
//!
//! Each rank creates its objects (distinct nonzero 8-byte integers from a seeded stream: LV
//! per rank with `--local-volume`, weak scaling, or a share of a fixed `--total`, strong
//! scaling), hashes each to an owner rank and a slot, and inserts it with linear probing (a
//! slot taken by another object is a collision: try the next, across rank boundaries), by
//! compare-and-swap (`--insert cas`) or under the owner's exclusive lock (`--insert lock`:
//! read the slot, write it if empty; a probe sequence that crosses into the next rank
//! releases the lock and takes that rank's). Then it probes for every object it inserted, and
//! looks up as many objects again, a `--hit-ratio` share of them objects of other ranks (hits)
//! and the rest objects nobody inserted (misses). The table has [`SLOTS_PER_OBJECT`] slots
//! per object of the largest share (load factor 0.5). Correctness is part of the run: every
//! object must be found, the table must hold exactly the objects inserted (they are distinct,
//! so that means each exactly once), every hit must be found and every miss reported absent;
//! otherwise exit 1.

use crate::args::{BackendArg, MAX_THREADS};
use crate::error::Error;
use crate::launch::{log_gist, on_launched_rank, run_logged, Ended, Launcher, Placement, RankWork};
#[cfg(any(feature = "mpi", feature = "shmem"))]
use crate::launch::{Launched, Rank};
use crate::output::{check_distinct, check_file, write_atomically};
use chan_core::backend::RawWindow;
use chan_core::traits::*;
use chan_core::{LockedWindow, ReduceOp, Window, WindowError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Table slots per object a rank inserts: a load factor of 1/2.
pub(crate) const SLOTS_PER_OBJECT: usize = 2;

/// splitmix64's finaliser (Steele, Lea and Flood 2014): a bijection of u64, so distinct
/// inputs give distinct objects.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// MurmurHash3's 64-bit finaliser: the table's hash (independent of the stream's mixer).
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Object `g` of the run (rank r's objects are `g = first(r)..first(r) + count(r)`; those from
/// the run's total on are the lookups' misses): splitmix64 of a counter unique to `g`, offset
/// by the seed. Distinct for distinct `g`, since splitmix64 is a bijection of distinct
/// counters. 0 marks an empty slot, so the one counter that maps to 0 gives `u64::MAX`
/// instead; a run would then hold `u64::MAX` twice only if another of its counters also
/// mapped there (odds about 2^-64 per object), and the run's own check would report it.
pub(crate) fn object(seed: u64, g: u64) -> u64 {
    let counter = seed.wrapping_mul(1 << 40).wrapping_add(g);
    match splitmix64(counter) {
        0 => u64::MAX,
        v => v,
    }
}

/// How the objects are inserted (`--insert`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Insert {
    /// Compare-and-swap of the slot (`MPI_Compare_and_swap`, `shmem_atomic_compare_swap`).
    #[default]
    Cas,
    /// Under the owner's exclusive lock: read the slot, write it if empty
    /// (`MPI_Win_lock(MPI_LOCK_EXCLUSIVE)`, `shmem_set_lock`).
    Lock,
}

impl Insert {
    fn name(self) -> &'static str {
        match self {
            Insert::Cas => "cas",
            Insert::Lock => "lock",
        }
    }
}

/// How many objects a run inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Volume {
    /// This many per rank (weak scaling).
    PerRank(usize),
    /// This many in all, shared out as evenly as possible (strong scaling).
    Total(usize),
}

impl Volume {
    /// Rank `rank`'s objects of a world of `size`: (first, count).
    fn share(self, rank: usize, size: usize) -> (usize, usize) {
        match self {
            Volume::PerRank(lv) => (rank * lv, lv),
            Volume::Total(n) => {
                let (q, r) = (n / size, n % size);
                (rank * q + rank.min(r), q + usize::from(rank < r))
            }
        }
    }

    /// Objects of every rank.
    fn total(self, size: usize) -> usize {
        match self {
            Volume::PerRank(lv) => lv * size,
            Volume::Total(n) => n,
        }
    }

    /// The largest share of a rank.
    fn most(self, size: usize) -> usize {
        match self {
            Volume::PerRank(lv) => lv,
            Volume::Total(n) => n.div_ceil(size),
        }
    }
}

/// One run's parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) volume: Volume,
    pub(crate) seed: u64,
    pub(crate) insert: Insert,
    /// The share of lookups that look for an object in the table.
    pub(crate) hit_ratio: f64,
}

/// Lookup `j` is a hit when the running count of hits steps up there: `hit_ratio` of any
/// stretch of lookups, spread evenly.
fn is_hit(j: usize, hit_ratio: f64) -> bool {
    ((j + 1) as f64 * hit_ratio).floor() > (j as f64 * hit_ratio).floor()
}

/// One run's measurements.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DhtRow {
    pub(crate) backend: String,
    /// Open MPI's one-sided component (`OMPI_MCA_osc`) for MPI runs, else empty.
    #[serde(default)]
    pub(crate) osc: String,
    pub(crate) ranks: usize,
    /// Objects per rank (the largest share with `--total`).
    pub(crate) local_volume: usize,
    /// How the objects were inserted (rows saved before `--insert` are compare-and-swap).
    #[serde(default)]
    pub(crate) insert: Insert,
    /// `--total`'s objects (strong scaling), or 0: ranks × LV (weak scaling).
    #[serde(default)]
    pub(crate) total: usize,
    /// Slowest rank's insert phase, seconds (inserts, then a fence).
    pub(crate) insert_s: f64,
    /// Slowest rank's probe phase, seconds.
    pub(crate) probe_s: f64,
    /// LV / insert_s.
    pub(crate) insert_ops_per_s_per_rank: f64,
    /// LV / probe_s.
    pub(crate) probe_ops_per_s_per_rank: f64,
    /// Taken slots met while inserting, every rank.
    pub(crate) collisions: u64,
    /// Slots read while probing, every rank.
    pub(crate) probe_reads: u64,
    /// Objects the table holds after the insert phase, every rank.
    pub(crate) table_objects: u64,
    /// Objects found by the probe phase, every rank.
    pub(crate) found: u64,
    /// Slowest rank's lookup phase, seconds (0 in rows saved before the lookups).
    #[serde(default)]
    pub(crate) lookup_s: f64,
    /// Lookups per rank (the largest share) / lookup_s.
    #[serde(default)]
    pub(crate) lookup_ops_per_s_per_rank: f64,
    /// `--hit-ratio`: the share of lookups that are hits.
    #[serde(default)]
    pub(crate) hit_ratio: f64,
    /// Lookups, every rank.
    #[serde(default)]
    pub(crate) lookups: u64,
    /// Of those, the hits (objects in the table).
    #[serde(default)]
    pub(crate) hits: u64,
    /// Hits the lookups found.
    #[serde(default)]
    pub(crate) hits_found: u64,
    /// Misses the lookups reported absent.
    #[serde(default)]
    pub(crate) misses_absent: u64,
    /// Every object found, the table holds exactly the objects inserted, every hit found and
    /// every miss absent.
    pub(crate) correct: bool,
}

impl DhtRow {
    /// Objects inserted, every rank.
    fn objects(&self) -> usize {
        if self.total > 0 {
            self.total
        } else {
            self.ranks * self.local_volume
        }
    }
}

/// A distributed hash table of `u64` objects on a window: linear probing over every rank's
/// slots, 0 an empty slot.
trait Table {
    /// Put `obj` in the first empty slot from `g` on, unless it is there already. Returns
    /// (placed, slots taken by other objects met, was already there).
    fn insert(&mut self, obj: u64, g: u64) -> Result<(bool, u64, bool), WindowError>;
    /// Look for `obj` from slot `g` on, up to the first empty slot. Returns (found, slots
    /// read).
    fn find(&mut self, obj: u64, g: u64) -> Result<(bool, u64), WindowError>;
    /// Collective: every rank's operations so far are in the table.
    fn fence(&mut self) -> Result<(), WindowError>;
    /// This rank's slots.
    fn read_local(&mut self, out: &mut [u64]) -> Result<(), WindowError>;
}

/// Slot `g` of all: (rank, slot).
fn at(g: u64, slots: usize) -> (usize, usize) {
    ((g / slots as u64) as usize, (g % slots as u64) as usize)
}

/// `--insert cas`: an atomic window.
struct CasTable<R: RawWindow> {
    win: Window<R, u64>,
    slots: usize,
    all: u64,
}

impl<R: RawWindow> Table for CasTable<R> {
    fn insert(&mut self, obj: u64, mut g: u64) -> Result<(bool, u64, bool), WindowError> {
        let mut collisions = 0;
        for _ in 0..self.all {
            let (t, s) = at(g, self.slots);
            let old = self.win.compare_and_swap(t, s, 0, obj)?;
            if old == 0 {
                return Ok((true, collisions, false));
            }
            if old == obj {
                return Ok((true, collisions, true));
            }
            collisions += 1;
            g = (g + 1) % self.all;
        }
        Ok((false, collisions, false))
    }

    fn find(&mut self, obj: u64, mut g: u64) -> Result<(bool, u64), WindowError> {
        let mut reads = 0;
        for _ in 0..self.all {
            let (t, s) = at(g, self.slots);
            let v = self.win.load(t, s)?;
            reads += 1;
            if v == obj {
                return Ok((true, reads));
            }
            if v == 0 {
                break; // an empty slot ends the probe sequence: not in the table
            }
            g = (g + 1) % self.all;
        }
        Ok((false, reads))
    }

    fn fence(&mut self) -> Result<(), WindowError> {
        self.win.fence()
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), WindowError> {
        self.win.read_local(out)
    }
}

/// `--insert lock`: a locked window; each rank's run of a probe sequence under that rank's
/// lock, released before the next rank's is taken (one lock at a time: no rank waits for a
/// lock while holding one). A slot taken between two locks is simply read under the next.
struct LockTable<R: RawWindow> {
    win: LockedWindow<R, u64>,
    slots: usize,
    all: u64,
}

impl<R: RawWindow> Table for LockTable<R> {
    fn insert(&mut self, obj: u64, mut g: u64) -> Result<(bool, u64, bool), WindowError> {
        let (mut collisions, mut steps) = (0u64, 0u64);
        while steps < self.all {
            let (t, mut s) = at(g, self.slots);
            let mut l = self.win.lock(t)?;
            loop {
                let v = l.load(s)?;
                if v == 0 || v == obj {
                    if v == 0 {
                        l.store(s, obj)?;
                    }
                    l.unlock()?;
                    return Ok((true, collisions, v == obj));
                }
                collisions += 1;
                steps += 1;
                g = (g + 1) % self.all;
                s += 1;
                if s == self.slots || steps == self.all {
                    break; // on into the next rank's slots, under its lock
                }
            }
            l.unlock()?;
        }
        Ok((false, collisions, false))
    }

    fn find(&mut self, obj: u64, mut g: u64) -> Result<(bool, u64), WindowError> {
        let mut reads = 0u64;
        while reads < self.all {
            let (t, mut s) = at(g, self.slots);
            let mut l = self.win.lock(t)?;
            loop {
                let v = l.load(s)?;
                reads += 1;
                if v == obj || v == 0 {
                    l.unlock()?;
                    return Ok((v == obj, reads));
                }
                g = (g + 1) % self.all;
                s += 1;
                if s == self.slots || reads == self.all {
                    break;
                }
            }
            l.unlock()?;
        }
        Ok((false, reads))
    }

    fn fence(&mut self) -> Result<(), WindowError> {
        self.win.fence()
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), WindowError> {
        self.win.read_local(out)
    }
}

/// Run the benchmark once (collective).
pub(crate) fn run_once<C: Windows>(ctx: &mut C, spec: &Spec) -> Result<DhtRow, WindowError> {
    let size = ctx.size();
    let slots = SLOTS_PER_OBJECT * spec.volume.most(size).max(1);
    let all = (size * slots) as u64;
    match spec.insert {
        Insert::Cas => {
            let win = ctx.window(slots)?;
            let mut t = CasTable { win, slots, all };
            let row = phases(ctx, &mut t, spec, slots)?;
            t.win.free()?;
            Ok(row)
        }
        Insert::Lock => {
            let win = ctx.locked_window(slots)?;
            let mut t = LockTable { win, slots, all };
            let row = phases(ctx, &mut t, spec, slots)?;
            t.win.free()?;
            Ok(row)
        }
    }
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

/// Insert, probe and look up on `table` of `slots` slots per rank, and judge the table.
fn phases<C: Windows, T: Table>(
    ctx: &mut C,
    table: &mut T,
    spec: &Spec,
    slots: usize,
) -> Result<DhtRow, WindowError> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let all = (size * slots) as u64;
    let home = |obj: u64| fmix64(obj) % all;
    let objects = spec.volume.total(size);
    let (first, count) = spec.volume.share(rank, size);
    let objs: Vec<u64> = (first..first + count)
        .map(|g| object(spec.seed, g as u64))
        .collect();
    let (keys, hit) = lookups(spec, first, count, objects);

    ctx.barrier()?;
    let t0 = Instant::now();
    let (mut collisions, mut duplicates, mut full) = (0u64, 0u64, 0u64);
    for &obj in &objs {
        let (placed, c, dup) = table.insert(obj, home(obj))?;
        collisions += c;
        duplicates += u64::from(dup);
        full += u64::from(!placed);
    }
    table.fence()?;
    let insert_s = t0.elapsed().as_secs_f64();

    ctx.barrier()?;
    let t1 = Instant::now();
    let (mut found, mut reads) = (0u64, 0u64);
    for &obj in &objs {
        let (f, r) = table.find(obj, home(obj))?;
        found += u64::from(f);
        reads += r;
    }
    table.fence()?;
    let probe_s = t1.elapsed().as_secs_f64();

    ctx.barrier()?;
    let t2 = Instant::now();
    let (mut hits_found, mut misses_absent, mut hits) = (0u64, 0u64, 0u64);
    for (&obj, &hit) in keys.iter().zip(&hit) {
        let (f, _) = table.find(obj, home(obj))?;
        hits += u64::from(hit);
        hits_found += u64::from(hit && f);
        misses_absent += u64::from(!hit && !f);
    }
    table.fence()?;
    let lookup_s = t2.elapsed().as_secs_f64();

    let mut local = vec![0u64; slots];
    table.read_local(&mut local)?;
    let held = local.iter().filter(|&&v| v != 0).count() as u64;

    let mut sums = [
        collisions as f64,
        reads as f64,
        held as f64,
        found as f64,
        (duplicates + full) as f64,
        keys.len() as f64,
        hits as f64,
        hits_found as f64,
        misses_absent as f64,
    ];
    ctx.all_reduce(&mut sums, ReduceOp::Sum)?;
    let mut times = [insert_s, probe_s, lookup_s];
    ctx.all_reduce(&mut times, ReduceOp::Max)?;
    let want = objects as u64;
    let (table_objects, found_all) = (sums[2] as u64, sums[3] as u64);
    let (lookups, hits) = (sums[5] as u64, sums[6] as u64);
    let (hits_found, misses_absent) = (sums[7] as u64, sums[8] as u64);
    let most = spec.volume.most(size) as f64;
    Ok(DhtRow {
        backend: <C::Raw as RawWindow>::NAME.to_string(),
        osc: if <C::Raw as RawWindow>::NAME == "mpi" {
            std::env::var("OMPI_MCA_osc").unwrap_or_else(|_| "default".into())
        } else {
            String::new()
        },
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
        found: found_all,
        lookup_s: times[2],
        lookup_ops_per_s_per_rank: most / times[2],
        hit_ratio: spec.hit_ratio,
        lookups,
        hits,
        hits_found,
        misses_absent,
        correct: table_objects == want
            && found_all == want
            && sums[4] == 0.0
            && hits_found == hits
            && misses_absent == lookups - hits,
    })
}

/// The header of the table [`row_line`] fills.
pub(crate) fn header() -> String {
    format!(
        "{:<10} {:<6} {:>5} {:>9} {:>8} {:>9} {:>9} {:>9} {:>13} {:>13} {:>13} {:>10} {:>7}",
        "backend",
        "insert",
        "ranks",
        "objects",
        "LV",
        "insert s",
        "probe s",
        "lookup s",
        "insert op/s/r",
        "probe op/s/r",
        "lookup op/s/r",
        "collisions",
        "correct"
    )
}

/// One row of the table.
pub(crate) fn row_line(r: &DhtRow) -> String {
    format!(
        "{:<10} {:<6} {:>5} {:>9} {:>8} {:>9.4} {:>9.4} {:>9.4} {:>13.0} {:>13.0} {:>13.0} {:>10} {:>7}",
        if r.osc.is_empty() {
            r.backend.clone()
        } else {
            format!("{}/{}", r.backend, r.osc)
        },
        r.insert.name(),
        r.ranks,
        r.objects(),
        r.local_volume,
        r.insert_s,
        r.probe_s,
        r.lookup_s,
        r.insert_ops_per_s_per_rank,
        r.probe_ops_per_s_per_rank,
        r.lookup_ops_per_s_per_rank,
        r.collisions,
        if r.correct { "yes" } else { "NO" }
    )
}

/// `--backend`'s values for `aiac dht`: the backends with one-sided windows (all but
/// `shared`).
fn window_backends() -> impl clap::builder::TypedValueParser<Value = BackendArg> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    use clap::ValueEnum;
    let names = BackendArg::value_variants()
        .iter()
        .filter(|b| !b.info().shared_memory)
        .filter_map(ValueEnum::to_possible_value);
    PossibleValuesParser::new(names)
        .map(|name| BackendArg::from_str(&name, false).expect("one of BackendArg's own names"))
}

/// `aiac dht` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct DhtArgs {
    /// Backend: threads, or mpi (`mpirun -np N aiac dht --backend mpi`) or shmem (`oshrun -np
    /// N aiac dht --backend shmem`).
    #[arg(long, value_parser = window_backends(), default_value = "threads")]
    backend: BackendArg,
    /// Objects each rank inserts, weak scaling (comma-separated list: one run each; default
    /// 10000,20000,40000,80000,160000 unless --total is given).
    #[arg(long = "local-volume", value_delimiter = ',')]
    local_volume: Vec<usize>,
    /// Objects all ranks insert together, shared out evenly, strong scaling (comma-separated
    /// list: one run each); instead of --local-volume.
    #[arg(long, value_delimiter = ',')]
    total: Vec<usize>,
    /// How a rank inserts: cas (compare-and-swap of the slot) or lock (the owner's exclusive
    /// lock, then read the slot and write it if empty); comma-separated: one run each.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cas")]
    insert: Vec<Insert>,
    /// The share of lookups that look for an object in the table (hits, objects of other
    /// ranks); the rest look for objects nobody inserted (misses). From 0 to 1.
    #[arg(long, default_value_t = 0.5, allow_hyphen_values = true)]
    hit_ratio: f64,
    /// Rank counts (comma-separated). Threads: worlds of that many threads. MPI and SHMEM:
    /// one `mpirun`/`oshrun -np N` job each, started by this command (not under a launcher:
    /// there the launcher's `-np` decides).
    #[arg(
        short = 't',
        long = "threads",
        visible_alias = "ranks",
        value_delimiter = ','
    )]
    ranks: Vec<usize>,
    /// With `-t` on MPI or SHMEM: the longest a job may run, in seconds, from 0.001 to a
    /// day (then it is stopped and the command fails).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 600.0,
        allow_hyphen_values = true,
        value_parser = crate::args::parse_timeout
    )]
    timeout: f64,
    /// Seed of the object stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the rows as a JSON array to this file (rank 0).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run nothing: read the rows of earlier `--json` files (one per rank count, say) and
    /// print them as one table (and `--plot` them).
    #[arg(long, num_args = 1.., value_name = "JSON")]
    from: Vec<PathBuf>,
    /// Draw the scaling plot (insert and probe time against ranks, one line per backend,
    /// insertion and LV, or total with --total) as STEM.png and STEM.svg.
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
}

/// Check the arguments before any run: one message naming the flag.
fn check_args(a: &DhtArgs, here: &Placement) -> Result<(), Error> {
    let bad = |m: String| Err(Error::Invalid(m));
    if !a.total.is_empty() && !a.local_volume.is_empty() {
        return bad(
            "--total and --local-volume: give one, the objects of all ranks (strong \
             scaling) or of each rank (weak scaling)"
                .into(),
        );
    }
    if a.local_volume.contains(&0) {
        return bad(format!(
            "--local-volume: every value must be at least 1, got {:?}",
            a.local_volume
        ));
    }
    if a.total.contains(&0) {
        return bad(format!(
            "--total: every value must be at least 1, got {:?}",
            a.total
        ));
    }
    if let Some(twice) = a
        .insert
        .iter()
        .enumerate()
        .find_map(|(i, m)| a.insert[..i].contains(m).then_some(m))
    {
        return bad(format!(
            "--insert names {} twice: each method is one run",
            twice.name()
        ));
    }
    if !(0.0..=1.0).contains(&a.hit_ratio) {
        return bad(format!(
            "--hit-ratio must be from 0 to 1 (the share of lookups that are hits), got {}",
            crate::args::shown(a.hit_ratio)
        ));
    }
    if a.backend.info().launcher.is_some() && !a.ranks.is_empty() && here.rank.is_some() {
        return bad(
            "-t/--threads (--ranks): under mpirun/oshrun the launcher's -np sets the \
                    ranks; give -t without a launcher to start one job per count"
                .into(),
        );
    }
    if a.ranks.contains(&0) {
        return bad(format!(
            "-t/--threads (--ranks): every value must be at least 1, got {:?}",
            a.ranks
        ));
    }
    let most_ranks = a.ranks.iter().copied().max().unwrap_or(1);
    if a.backend.info().launcher.is_none() && most_ranks > MAX_THREADS {
        return bad(format!(
            "-t/--threads (--ranks) must be from 1 to {MAX_THREADS} with --backend threads: \
             every rank is a thread of this one process; got {most_ranks} (for more ranks, \
             --backend mpi or shmem)"
        ));
    }
    // The most objects a rank holds: the largest LV, or the largest total over the fewest
    // ranks.
    let fewest = match (a.backend.info().launcher, here.size) {
        (Some(_), Some(n)) if a.ranks.is_empty() => n,
        _ => a.ranks.iter().copied().min().unwrap_or(1),
    };
    let most_lv = a
        .volumes()
        .iter()
        .map(|v| v.most(fewest.max(1)))
        .max()
        .unwrap_or(1);
    if a.backend == BackendArg::Mpi && most_lv > MAX_MPI_LV {
        return bad(format!(
            "--local-volume (or --total over the ranks) must be at most {MAX_MPI_LV} objects \
             per rank with --backend mpi: a rank's window of {SLOTS_PER_OBJECT} slots per \
             object must count its words in an MPI int; got {most_lv}"
        ));
    }
    // The ranks this machine holds at once: every rank of a threads run is in this process,
    // `-t` starts each job here, and under a launcher the job's processes on this node.
    let ranks_here = match (a.backend.info().launcher, here.rank) {
        (Some(_), Some(_)) => here.local_size.unwrap_or(1),
        _ => most_ranks,
    };
    if let Some(available) = crate::args::mem_available() {
        check_memory(a.backend, most_lv, ranks_here, available)?;
    }
    // The outputs go through the checks `run`'s do: writable where asked, special files
    // in place, and no two flags naming one file (`--plot pl --json pl.svg` overwrote the JSON
    // with the plot).
    let plot: Option<[PathBuf; 2]> = a
        .plot
        .as_ref()
        .map(|s| [s.with_extension("svg"), s.with_extension("png")]);
    let mut files: Vec<(&'static str, &std::path::Path)> = Vec::new();
    if let Some(p) = &a.json {
        files.push(("--json", p));
    }
    for p in plot.iter().flatten() {
        files.push(("--plot", p));
    }
    for (flag, p) in &files {
        check_file(flag, p)?;
    }
    let from: Vec<(&'static str, &std::path::Path)> =
        a.from.iter().map(|p| ("--from", p.as_path())).collect();
    check_distinct(&files, &from)
}

impl DhtArgs {
    /// The runs' volumes: `--total`'s, else `--local-volume`'s or its default.
    fn volumes(&self) -> Vec<Volume> {
        if !self.total.is_empty() {
            return self.total.iter().map(|&n| Volume::Total(n)).collect();
        }
        if self.local_volume.is_empty() {
            return DEFAULT_LV.iter().map(|&lv| Volume::PerRank(lv)).collect();
        }
        self.local_volume
            .iter()
            .map(|&lv| Volume::PerRank(lv))
            .collect()
    }

    /// Every run of one world: each volume with each insertion.
    fn specs(&self) -> Vec<Spec> {
        let mut out = Vec::new();
        for v in self.volumes() {
            for &insert in &self.insert {
                out.push(Spec {
                    volume: v,
                    seed: self.seed,
                    insert,
                    hit_ratio: self.hit_ratio,
                });
            }
        }
        out
    }
}

/// `--local-volume`'s default.
const DEFAULT_LV: [usize; 5] = [10000, 20000, 40000, 80000, 160000];

/// The most objects a rank of `--backend mpi` inserts: its window's word count,
/// [`SLOTS_PER_OBJECT`] × LV, must fit the `int` count of `MPI_Win_allocate`.
const MAX_MPI_LV: usize = i32::MAX as usize / SLOTS_PER_OBJECT;

/// Bytes per object on a rank: the object itself, its lookup and that lookup's hit flag
/// ([`lookups`]), its [`SLOTS_PER_OBJECT`] table slots, and the copy of the slots read back
/// for the count.
const BYTES_PER_OBJECT: u64 = (size_of::<u64>()
    + size_of::<u64>()
    + size_of::<bool>()
    + 2 * SLOTS_PER_OBJECT * size_of::<u64>()) as u64;

/// What a rank holds before its first object: a thread of this process (stack and channel
/// state: 2048 ranks of 10 objects measured at 494 MB) or a launched process (15 MB measured
/// for a rank of Open MPI).
fn rank_base(backend: BackendArg) -> u64 {
    match backend.info().launcher {
        None => 256 << 10,
        Some(_) => 16 << 20,
    }
}

/// Refuse a run whose `ranks_here` ranks of `lv` objects would not fit in `available` bytes,
/// with the figure, before anything is allocated (a table past memory was killed by the
/// allocator, or by the machine).
fn check_memory(
    backend: BackendArg,
    lv: usize,
    ranks_here: usize,
    available: u64,
) -> Result<(), Error> {
    use jacobi::human_bytes;
    let per_rank = (lv as u64)
        .saturating_mul(BYTES_PER_OBJECT)
        .saturating_add(rank_base(backend));
    let need = per_rank.saturating_mul(ranks_here as u64);
    if need > available {
        return Err(Error::Invalid(format!(
            "--local-volume (--total)/--ranks: this run needs about {} ({} per rank: {BYTES_PER_OBJECT} \
             bytes per object and the rank itself, {ranks_here} rank(s) on this machine), but \
             this machine has {} available (MemAvailable): use a smaller --local-volume or \
             fewer ranks",
            human_bytes(need),
            human_bytes(per_rank),
            human_bytes(available)
        )));
    }
    Ok(())
}

/// Read the rows of saved `--json` files.
fn load(paths: &[PathBuf]) -> Result<Vec<DhtRow>, Error> {
    let mut rows = Vec::new();
    for p in paths {
        let bad = |why: String| Error::Invalid(format!("--from {}: {why}", p.display()));
        let text = crate::input::read_json(p, crate::input::MAX_JSON).map_err(bad)?;
        let mut r: Vec<DhtRow> =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not a dht report: {e}")))?;
        rows.append(&mut r);
    }
    Ok(rows)
}

/// What a row's line is drawn for besides its backend: its insertion, and its LV (weak
/// scaling) or total (strong).
fn volume_key(r: &DhtRow) -> (Insert, usize, usize) {
    if r.total > 0 {
        (r.insert, r.total, 0)
    } else {
        (r.insert, 0, r.local_volume)
    }
}

/// The order of the table and the plot's points: by backend, insertion, volume, ranks.
fn row_order(r: &DhtRow) -> (String, String, (Insert, usize, usize), usize) {
    (r.backend.clone(), r.osc.clone(), volume_key(r), r.ranks)
}

/// The plot's lines: one per (backend, osc, insertion, LV or total), points by ranks; style
/// by backend, colour by insertion and volume. `rows` are in [`row_order`].
fn lines(rows: &[DhtRow]) -> Vec<crate::plots::DhtLine> {
    let mut backends: Vec<(String, String)> = Vec::new();
    let mut volumes: Vec<(Insert, usize, usize)> = Vec::new();
    for r in rows {
        if !backends.contains(&(r.backend.clone(), r.osc.clone())) {
            backends.push((r.backend.clone(), r.osc.clone()));
        }
        if !volumes.contains(&volume_key(r)) {
            volumes.push(volume_key(r));
        }
    }
    volumes.sort_unstable();
    let inserts = volumes
        .iter()
        .map(|v| v.0)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut out: Vec<crate::plots::DhtLine> = Vec::new();
    let mut key = None;
    for r in rows {
        let k = (r.backend.clone(), r.osc.clone(), volume_key(r));
        if key.as_ref() != Some(&k) {
            let osc = if r.osc.is_empty() {
                String::new()
            } else {
                format!(" (osc {})", r.osc)
            };
            let insert = if inserts > 1 {
                format!(", {}", r.insert.name())
            } else {
                String::new()
            };
            let volume = if r.total > 0 {
                format!("total {}", r.total)
            } else {
                format!("LV {}", r.local_volume)
            };
            out.push(crate::plots::DhtLine {
                label: format!("{}{osc}{insert}, {volume}", r.backend),
                group: backends
                    .iter()
                    .position(|b| (&b.0, &b.1) == (&k.0, &k.1))
                    .unwrap_or(0),
                shade: volumes.iter().position(|v| *v == k.2).unwrap_or(0),
                points: Vec::new(),
            });
            key = Some(k);
        }
        if let Some(l) = out.last_mut() {
            l.points.push((r.ranks as f64, r.insert_s, r.probe_s));
        }
    }
    out
}

/// Print the table, write the JSON and the plot, and turn the verdict into the exit code
/// (rank 0).
fn finish(a: &DhtArgs, rows: &[DhtRow]) -> Result<ExitCode, Error> {
    if rows.is_empty() {
        return Err(Error::Failed(
            "dht: no run completed, nothing to report".into(),
        ));
    }
    let mut rows = rows.to_vec();
    rows.sort_by_key(row_order);
    let rows = &rows[..];
    println!("{}", header());
    for r in rows {
        println!("{}", row_line(r));
    }
    let output = |flag: &'static str, path: &std::path::Path, why: String| Error::Output {
        flag,
        path: path.to_path_buf(),
        why,
    };
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(rows).expect("rows serialise");
        write_atomically(p, text.as_bytes()).map_err(|e| output("--json", p, e.to_string()))?;
    }
    if let Some(stem) = &a.plot {
        let strong = rows.iter().filter(|r| r.total > 0).count();
        if strong != 0 && strong != rows.len() {
            return Err(Error::Invalid(format!(
                "--plot: the rows mix weak scaling (--local-volume, {} rows) and strong \
                 scaling (--total, {strong} rows): plot them apart",
                rows.len() - strong
            )));
        }
        let files = crate::plots::draw_dht(lines(rows), stem, strong > 0)
            .map_err(|e| output("--plot", stem, e))?;
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| !r.correct)
        .map(|r| {
            format!(
                "dht {} ({}) ranks={} LV={}: the table holds {} objects and {} were found, \
                 want {}; {} of {} hits found, {} of {} misses reported absent",
                r.backend,
                r.insert.name(),
                r.ranks,
                r.local_volume,
                r.table_objects,
                r.found,
                r.objects(),
                r.hits_found,
                r.hits,
                r.misses_absent,
                r.lookups.saturating_sub(r.hits)
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(Error::Failed(bad.join("\n")));
    }
    println!(
        "correct: every object found exactly once, the table holds every object inserted, \
         every hit found and every miss absent ({} runs)",
        rows.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `aiac dht`.
pub(crate) fn dht(a: &DhtArgs) -> Result<ExitCode, Error> {
    let here = Placement::here();
    let checked = check_args(a, &here);
    if !a.from.is_empty() {
        checked?;
        return finish(a, &load(&a.from)?);
    }
    match a.backend.info().launcher {
        // Under a launcher the ranks agree on the check (one message, exit 1 everywhere).
        Some(launcher) if a.ranks.is_empty() || here.rank.is_some() => {
            on_launched_rank(launcher, Launch { args: a, checked })
        }
        Some(launcher) => checked.and_then(|()| jobs(a, launcher)),
        None => crate::run::one_process_job(&here, "dht", a.backend)
            .and(checked)
            .and_then(|()| threads(a))
            .map_err(|e| here.before_start(e)),
    }
}

/// `--backend threads`: a world of threads per rank count, every volume in each.
fn threads(a: &DhtArgs) -> Result<ExitCode, Error> {
    let counts = if a.ranks.is_empty() {
        vec![1]
    } else {
        a.ranks.clone()
    };
    let mut rows = Vec::new();
    for &n in &counts {
        let world = chan_threads::World::new(n).expect("n ≥ 1 checked");
        for spec in a.specs() {
            let out = world.run(|ctx| run_once(ctx, &spec));
            let row = out.into_iter().next().expect("one rank at least");
            rows.push(row.map_err(|e| Error::Failed(format!("dht: {e}")))?);
        }
    }
    finish(a, &rows)
}

/// `-t` on MPI or SHMEM: one launcher job per count, each writing its rows to a temporary
/// file; then one table (and plot) of those that completed, and one error naming those that
/// did not.
fn jobs(a: &DhtArgs, launcher: Launcher) -> Result<ExitCode, Error> {
    let backend = launcher.backend();
    let exe =
        std::env::current_exe().map_err(|e| Error::Launch(format!("finding this program: {e}")))?;
    let dir = crate::output::job_dir("aiac-dht")
        .map_err(|e| Error::Launch(format!("a working directory for the jobs: {e}")))?;
    crate::signals::defer();
    let join = |v: &[usize]| {
        v.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let (flag, volumes) = if a.total.is_empty() {
        let lvs: Vec<usize> = a.volumes().iter().map(|v| v.most(1)).collect();
        ("--local-volume", join(&lvs))
    } else {
        ("--total", join(&a.total))
    };
    let inserts: Vec<&str> = a.insert.iter().map(|i| i.name()).collect();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for &n in &a.ranks {
        let json = dir.join(format!("{backend}-{n}.json"));
        let log = dir.join(format!("{backend}-{n}.log"));
        let mut c = launcher.command(n, &exe);
        c.args(["dht", "--backend", backend, "--seed", &a.seed.to_string()])
            .args([flag, &volumes])
            .args(["--insert", &inserts.join(",")])
            .args(["--hit-ratio", &a.hit_ratio.to_string()])
            .arg("--json")
            .arg(&json);
        eprintln!(
            "aiac dht: {} -np {n} ({backend}, {} {volumes}, --insert {})",
            launcher.program(),
            &flag[2..],
            inserts.join(",")
        );
        let why = match run_logged(&mut c, &log, Duration::from_secs_f64(a.timeout)) {
            Ok(Ended::Exited(st)) if st.success() => None,
            Ok(Ended::Exited(st)) => Some(format!("exited with {st}")),
            Ok(Ended::TimedOut) => Some(format!(
                "stopped after --timeout {} s",
                crate::args::shown(a.timeout)
            )),
            Ok(Ended::Signalled(sig)) => {
                let _ = std::fs::remove_dir_all(&dir);
                eprintln!(
                    "aiac dht: stopped by signal {sig}; the running {} job was stopped too",
                    launcher.program()
                );
                return Ok(crate::signals::exit_code(sig));
            }
            Err(e) => Some(format!("{}: {e}", launcher.program())),
        };
        match why {
            Some(why) => failures.push(format!(
                "dht {backend} at {n} ranks {why}; its output says:\n{}",
                log_gist(&log, 8)
            )),
            None => match load(std::slice::from_ref(&json)) {
                Ok(mut r) => rows.append(&mut r),
                Err(e) => failures.push(format!("dht {backend} at {n} ranks: {e}")),
            },
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failures.is_empty() {
        return finish(a, &rows);
    }
    if !rows.is_empty() {
        if let Err(e) = finish(a, &rows) {
            failures.push(e.to_string());
        }
    }
    Err(Error::Failed(failures.join("\n")))
}

/// `--backend mpi|shmem` without `-t`: every process of the launched job runs each volume;
/// rank 0 prints the table.
#[cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]
struct Launch<'a> {
    args: &'a DhtArgs,
    /// This rank's check of the arguments, agreed on before any run.
    checked: Result<(), Error>,
}

impl RankWork for Launch<'_> {
    type Output = ExitCode;

    /// An error on a rank aborts the job (nothing hangs).
    #[cfg(any(feature = "mpi", feature = "shmem"))]
    fn on<C: Launched>(self, rank: Rank<C>) -> Result<ExitCode, Error> {
        let a = self.args;
        let (mut rank, ()) = rank.agree(self.checked)?;
        let mut rows = Vec::new();
        for spec in a.specs() {
            let row = run_once(rank.ctx(), &spec).map_err(|e| format!("dht: {e}"));
            rows.push(rank.or_abort(row));
        }
        let outcome = match rank.rank() {
            0 => finish(a, &rows),
            // Rank 0 reports a wrong table; every rank gathered the same verdict.
            _ if rows.iter().all(|r| r.correct) => Ok(ExitCode::SUCCESS),
            _ => Err(Error::AlreadyReported),
        };
        let stopped = rank.stop();
        let code = outcome?;
        stopped?;
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chan_threads::World;
    use std::collections::HashSet;

    #[test]
    fn objects_are_distinct_and_nonzero() {
        let mut seen = HashSet::new();
        for r in 0..4 {
            for i in 0..5000 {
                let o = object(42, (r * 5000 + i) as u64);
                assert_ne!(o, 0);
                assert!(seen.insert(o), "object {o} twice");
            }
        }
    }

    /// Every rank count finds every object once, and the counts add up: the verdict the
    /// run prints is computed from the table, not assumed.
    #[test]
    fn dht_over_threads_is_correct_at_1_to_5_ranks() {
        for n in 1..=5 {
            for insert in [Insert::Cas, Insert::Lock] {
                let spec = Spec {
                    volume: Volume::PerRank(2000),
                    seed: 7,
                    insert,
                    hit_ratio: 0.5,
                };
                let rows = World::new(n)
                    .unwrap()
                    .run(|ctx| run_once(ctx, &spec).unwrap());
                for r in &rows {
                    assert!(r.correct, "{n} ranks, {insert:?}: {r:?}");
                    assert_eq!(r.table_objects, (n * 2000) as u64);
                    assert_eq!(r.found, (n * 2000) as u64);
                    assert!(r.probe_reads >= r.found);
                    assert_eq!(r.insert, insert);
                }
            }
        }
    }

    /// Lock-based insertion under contention: 8 ranks insert into a table of twice their
    /// objects, every probe sequence long, many crossing into the next rank's slots under its
    /// lock. Each object is held once. A read-then-write without the lock loses an object
    /// only when two ranks read one empty slot within the same few instructions: with a lock
    /// that did not exclude, one run over threads on 2 cores lost objects 1 time in 4 to 1 in
    /// 20 (the fewer on a loaded machine), and these 24 runs failed 4 times in 6 on a loaded
    /// machine. chan-testkit's `window_locked_counters` catches such a lock every time.
    #[test]
    fn lock_insertion_holds_every_object_once() {
        for seed in 1..=24 {
            let spec = Spec {
                volume: Volume::PerRank(3000),
                seed,
                insert: Insert::Lock,
                hit_ratio: 1.0,
            };
            let rows = World::new(8)
                .unwrap()
                .run(|ctx| run_once(ctx, &spec).unwrap());
            let r = &rows[0];
            assert_eq!(r.table_objects, 8 * 3000, "{r:?}");
            assert_eq!(r.found, 8 * 3000, "{r:?}");
            assert!(r.correct, "{r:?}");
        }
    }

    /// The lookups: `hit_ratio` of them hits, every hit found and every miss reported absent;
    /// strong scaling shares a fixed total out (unevenly when it does not divide), and the
    /// table holds exactly that total.
    #[test]
    fn lookups_find_the_hits_and_not_the_misses() {
        for (n, total, ratio) in [(1, 1001, 0.5), (3, 1000, 0.25), (4, 999, 1.0), (2, 10, 0.0)] {
            for insert in [Insert::Cas, Insert::Lock] {
                let spec = Spec {
                    volume: Volume::Total(total),
                    seed: 3,
                    insert,
                    hit_ratio: ratio,
                };
                let rows = World::new(n)
                    .unwrap()
                    .run(|ctx| run_once(ctx, &spec).unwrap());
                let r = &rows[0];
                assert_eq!(r.table_objects, total as u64, "{r:?}");
                assert_eq!(r.lookups, total as u64, "{r:?}");
                let want_hits = (total as f64 * ratio).round() as u64;
                assert!(r.hits.abs_diff(want_hits) <= n as u64, "{r:?}");
                assert_eq!(r.hits_found, r.hits, "{r:?}");
                assert_eq!(r.misses_absent, r.lookups - r.hits, "{r:?}");
                assert_eq!(r.local_volume, total.div_ceil(n));
                assert!(r.correct, "{r:?}");
            }
        }
    }

    /// The memory estimate is what a rank allocates per object: its objects, its lookups and
    /// their hit flags, and its slots of the table and their copy read back for the count (measured on the vectors
    /// the run makes).
    #[test]
    fn bytes_per_object_are_what_a_rank_allocates() {
        let spec = Spec {
            volume: Volume::PerRank(1000),
            seed: 5,
            insert: Insert::Cas,
            hit_ratio: 0.5,
        };
        let (first, count) = spec.volume.share(1, 3);
        let (keys, hit) = lookups(&spec, first, count, spec.volume.total(3));
        assert_eq!((keys.len(), hit.len()), (count, count));
        let objects = count * size_of::<u64>();
        let slots = 2 * SLOTS_PER_OBJECT * count * size_of::<u64>();
        let bytes = objects + size_of_val(&keys[..]) + size_of_val(&hit[..]) + slots;
        assert_eq!(bytes as u64, count as u64 * BYTES_PER_OBJECT);
    }

    #[test]
    fn shares_cover_the_total_once() {
        for (n, size) in [(10, 3), (2, 4), (7, 7), (1000, 8)] {
            let v = Volume::Total(n);
            let mut next = 0;
            for rank in 0..size {
                let (first, count) = v.share(rank, size);
                assert_eq!(first, next);
                assert!(count == n / size || count == n / size + 1);
                next += count;
            }
            assert_eq!(next, n);
        }
    }
}
