//! `aiac dht`: Maynard's distributed hash table benchmark over one-sided windows.
//!
//! Each rank creates LV objects (distinct nonzero 8-byte integers from a seeded stream),
//! hashes each to an owner rank and a slot, and inserts it with compare-and-swap and linear
//! probing (a slot taken by another object is a collision: try the next, across rank
//! boundaries). Then it probes for every object it inserted. The table has
//! [`SLOTS_PER_OBJECT`] × LV slots per rank (load factor 0.5). Correctness is part of the run:
//! every object must be found, and the table must hold exactly ranks × LV objects (the
//! objects are distinct, so that means each exactly once); otherwise exit 1.

use crate::args::{BackendArg, MAX_THREADS};
use crate::error::Error;
use crate::launch::{log_gist, on_launched_rank, run_logged, Ended, Launcher, Placement, RankWork};
#[cfg(any(feature = "mpi", feature = "shmem"))]
use crate::launch::{Launched, Rank};
use crate::output::{check_distinct, check_file, write_atomically};
use chan_core::backend::RawWindow;
use chan_core::traits::*;
use chan_core::{ReduceOp, Window, WindowError};
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

/// Object `i` of `rank`: splitmix64 of a counter unique to (rank, i), offset by the seed.
/// Distinct for distinct (rank, i), since splitmix64 is a bijection of distinct counters. 0
/// marks an empty slot, so the one counter that maps to 0 gives `u64::MAX` instead; a run
/// would then hold `u64::MAX` twice only if another of its counters also mapped there (odds
/// about 2^-64 per object), and the run's own check would report it.
pub(crate) fn object(seed: u64, rank: usize, lv: usize, i: usize) -> u64 {
    let counter = seed
        .wrapping_mul(1 << 40)
        .wrapping_add((rank * lv + i) as u64);
    match splitmix64(counter) {
        0 => u64::MAX,
        v => v,
    }
}

/// One run's measurements.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DhtRow {
    pub(crate) backend: String,
    /// Open MPI's one-sided component (`OMPI_MCA_osc`) for MPI runs, else empty.
    #[serde(default)]
    pub(crate) osc: String,
    pub(crate) ranks: usize,
    pub(crate) local_volume: usize,
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
    /// Every object found and the table holds exactly ranks × LV.
    pub(crate) correct: bool,
}

fn home(obj: u64, total: u64) -> u64 {
    fmix64(obj) % total
}

/// Run the benchmark once for `lv` objects per rank (collective).
pub(crate) fn run_once<C: Windows>(
    ctx: &mut C,
    lv: usize,
    seed: u64,
) -> Result<DhtRow, WindowError> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let slots = SLOTS_PER_OBJECT * lv.max(1);
    let total = (size * slots) as u64;
    let mut win: Window<C::Raw, u64> = ctx.window(slots)?;
    let objs: Vec<u64> = (0..lv).map(|i| object(seed, rank, lv, i)).collect();
    let at = |g: u64| ((g / slots as u64) as usize, (g % slots as u64) as usize);

    ctx.barrier()?;
    let t0 = Instant::now();
    let mut collisions = 0u64;
    let mut duplicates = 0u64;
    let mut full = 0u64;
    for &obj in &objs {
        let mut g = home(obj, total);
        let mut placed = false;
        for _ in 0..total {
            let (t, s) = at(g);
            let old = win.compare_and_swap(t, s, 0, obj)?;
            if old == 0 {
                placed = true;
                break;
            }
            if old == obj {
                duplicates += 1;
                placed = true;
                break;
            }
            collisions += 1;
            g = (g + 1) % total;
        }
        full += u64::from(!placed);
    }
    win.fence()?;
    let insert_s = t0.elapsed().as_secs_f64();

    ctx.barrier()?;
    let t1 = Instant::now();
    let mut found = 0u64;
    let mut reads = 0u64;
    for &obj in &objs {
        let mut g = home(obj, total);
        for _ in 0..total {
            let (t, s) = at(g);
            let v = win.load(t, s)?;
            reads += 1;
            if v == obj {
                found += 1;
                break;
            }
            if v == 0 {
                break; // an empty slot ends the probe sequence: not in the table
            }
            g = (g + 1) % total;
        }
    }
    win.fence()?;
    let probe_s = t1.elapsed().as_secs_f64();

    let mut local = vec![0u64; slots];
    win.read_local(&mut local)?;
    win.free()?;
    let held = local.iter().filter(|&&v| v != 0).count() as u64;

    let mut sums = [
        collisions as f64,
        reads as f64,
        held as f64,
        found as f64,
        (duplicates + full) as f64,
    ];
    ctx.all_reduce(&mut sums, ReduceOp::Sum)?;
    let mut times = [insert_s, probe_s];
    ctx.all_reduce(&mut times, ReduceOp::Max)?;
    let want = (size * lv) as u64;
    let (table_objects, found_all) = (sums[2] as u64, sums[3] as u64);
    Ok(DhtRow {
        backend: <C::Raw as RawWindow>::NAME.to_string(),
        osc: if <C::Raw as RawWindow>::NAME == "mpi" {
            std::env::var("OMPI_MCA_osc").unwrap_or_else(|_| "default".into())
        } else {
            String::new()
        },
        ranks: size,
        local_volume: lv,
        insert_s: times[0],
        probe_s: times[1],
        insert_ops_per_s_per_rank: lv as f64 / times[0],
        probe_ops_per_s_per_rank: lv as f64 / times[1],
        collisions: sums[0] as u64,
        probe_reads: sums[1] as u64,
        table_objects,
        found: found_all,
        correct: table_objects == want && found_all == want && sums[4] == 0.0,
    })
}

/// The header of the table [`row_line`] fills.
pub(crate) fn header() -> String {
    format!(
        "{:<10} {:>5} {:>8} {:>10} {:>10} {:>14} {:>14} {:>11} {:>8}",
        "backend",
        "ranks",
        "LV",
        "insert s",
        "probe s",
        "insert op/s/r",
        "probe op/s/r",
        "collisions",
        "correct"
    )
}

/// One row of the table.
pub(crate) fn row_line(r: &DhtRow) -> String {
    format!(
        "{:<10} {:>5} {:>8} {:>10.4} {:>10.4} {:>14.0} {:>14.0} {:>11} {:>8}",
        if r.osc.is_empty() {
            r.backend.clone()
        } else {
            format!("{}/{}", r.backend, r.osc)
        },
        r.ranks,
        r.local_volume,
        r.insert_s,
        r.probe_s,
        r.insert_ops_per_s_per_rank,
        r.probe_ops_per_s_per_rank,
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
    /// Objects each rank inserts (comma-separated list: one run each).
    #[arg(
        long = "local-volume",
        value_delimiter = ',',
        default_value = "10000,20000,40000,80000,160000"
    )]
    local_volume: Vec<usize>,
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
    /// With `-t` on MPI or SHMEM: the longest a job may run, in seconds, more than 0 and at
    /// most a day (then it is stopped and the command fails).
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
    /// Draw the weak-scaling plot (insert and probe time against ranks, one line per backend
    /// and LV) as STEM.png and STEM.svg.
    #[arg(long, value_name = "STEM")]
    plot: Option<PathBuf>,
}

/// Check the arguments before any run: one message naming the flag.
fn check_args(a: &DhtArgs, here: &Placement) -> Result<(), Error> {
    let bad = |m: String| Err(Error::Invalid(m));
    if a.local_volume.is_empty() || a.local_volume.contains(&0) {
        return bad(format!(
            "--local-volume: every value must be at least 1, got {:?}",
            a.local_volume
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
    let most_lv = a.local_volume.iter().copied().max().unwrap_or(1);
    if a.backend == BackendArg::Mpi && most_lv > MAX_MPI_LV {
        return bad(format!(
            "--local-volume must be at most {MAX_MPI_LV} with --backend mpi: a rank's window \
             of {SLOTS_PER_OBJECT} slots per object must count its words in an MPI int; got \
             {most_lv}"
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
    check_distinct(&files)
}

/// The most objects a rank of `--backend mpi` inserts: its window's word count,
/// [`SLOTS_PER_OBJECT`] × LV, must fit the `int` count of `MPI_Win_allocate`.
const MAX_MPI_LV: usize = i32::MAX as usize / SLOTS_PER_OBJECT;

/// Bytes per object on a rank: the object itself, its [`SLOTS_PER_OBJECT`] table slots, and
/// the copy of the slots read back for the count.
const BYTES_PER_OBJECT: u64 = 8 * (1 + 2 * SLOTS_PER_OBJECT as u64);

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
            "--local-volume/--ranks: this run needs about {} ({} per rank: {BYTES_PER_OBJECT} \
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
        let text = std::fs::read_to_string(p).map_err(|e| bad(e.to_string()))?;
        let mut r: Vec<DhtRow> =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a dht report: {e}")))?;
        rows.append(&mut r);
    }
    Ok(rows)
}

/// The plot's lines: one per (backend, osc, LV), points by ranks; style by backend, colour by
/// LV.
fn lines(rows: &[DhtRow]) -> Vec<crate::plots::DhtLine> {
    let mut backends: Vec<(String, String)> = Vec::new();
    let mut lvs: Vec<usize> = Vec::new();
    for r in rows {
        if !backends.contains(&(r.backend.clone(), r.osc.clone())) {
            backends.push((r.backend.clone(), r.osc.clone()));
        }
        if !lvs.contains(&r.local_volume) {
            lvs.push(r.local_volume);
        }
    }
    lvs.sort_unstable();
    let mut out: Vec<crate::plots::DhtLine> = Vec::new();
    let mut key = None;
    for r in rows {
        let k = (r.backend.clone(), r.osc.clone(), r.local_volume);
        if key.as_ref() != Some(&k) {
            let osc = if r.osc.is_empty() {
                String::new()
            } else {
                format!(" (osc {})", r.osc)
            };
            out.push(crate::plots::DhtLine {
                label: format!("{}{osc}, LV {}", r.backend, r.local_volume),
                group: backends
                    .iter()
                    .position(|b| (&b.0, &b.1) == (&k.0, &k.1))
                    .unwrap_or(0),
                shade: lvs.iter().position(|&l| l == k.2).unwrap_or(0),
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
    rows.sort_by(|a, b| {
        (&a.backend, &a.osc, a.local_volume, a.ranks).cmp(&(
            &b.backend,
            &b.osc,
            b.local_volume,
            b.ranks,
        ))
    });
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
        let files =
            crate::plots::draw_dht(lines(rows), stem).map_err(|e| output("--plot", stem, e))?;
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| !r.correct)
        .map(|r| {
            format!(
                "dht {} ranks={} LV={}: the table holds {} objects and {} were found, want {}",
                r.backend,
                r.ranks,
                r.local_volume,
                r.table_objects,
                r.found,
                r.ranks * r.local_volume
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(Error::Failed(bad.join("\n")));
    }
    println!(
        "correct: every object found exactly once, the table holds ranks × LV objects ({} runs)",
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
        for &lv in &a.local_volume {
            let out = world.run(|ctx| run_once(ctx, lv, a.seed));
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
    let lvs: Vec<String> = a.local_volume.iter().map(|v| v.to_string()).collect();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for &n in &a.ranks {
        let json = dir.join(format!("{backend}-{n}.json"));
        let log = dir.join(format!("{backend}-{n}.log"));
        let mut c = launcher.command(n, &exe);
        c.args(["dht", "--backend", backend, "--seed", &a.seed.to_string()])
            .args(["--local-volume", &lvs.join(",")])
            .arg("--json")
            .arg(&json);
        eprintln!(
            "aiac dht: {} -np {n} ({backend}, LV {})",
            launcher.program(),
            lvs.join(",")
        );
        let why = match run_logged(&mut c, &log, Duration::from_secs_f64(a.timeout)) {
            Ok(Ended::Exited(st)) if st.success() => None,
            Ok(Ended::Exited(st)) => Some(format!("exited with {st}")),
            Ok(Ended::TimedOut) => Some(format!("stopped after --timeout {} s", a.timeout)),
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
        for &lv in &a.local_volume {
            let row = run_once(rank.ctx(), lv, a.seed).map_err(|e| format!("dht: {e}"));
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
                let o = object(42, r, 5000, i);
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
            let rows = World::new(n)
                .unwrap()
                .run(|ctx| run_once(ctx, 2000, 7).unwrap());
            for r in &rows {
                assert!(r.correct, "{n} ranks: {r:?}");
                assert_eq!(r.table_objects, (n * 2000) as u64);
                assert!(r.probe_reads >= r.found);
            }
        }
    }
}
