//! `aiac dht`: Maynard's distributed hash table benchmark over one-sided windows, run by the
//! dht crate ([`dht::bench`]; the table is [`dht::Table`]). This module parses the flags
//! (`--local-volume` or `--total` are the run's [`Volume`], `--insert` its [`Insert`],
//! `--hit-ratio`, `--seed`), checks them (the library's [`SettingError`]s told by flag),
//! launches the runs (a world of threads, or one `mpirun`/`oshrun` job per `-t` count) and
//! reports them: the table, `--json`, `--plot`, and exit 1 unless every run judged its table
//! correct.

use crate::args::{BackendArg, MAX_THREADS};
use crate::error::Error;
use crate::launch::{log_gist, on_launched_rank, run_logged, Ended, Launcher, Placement, RankWork};
#[cfg(any(feature = "mpi", feature = "shmem"))]
use crate::launch::{Launched, Rank};
use crate::output::{check_distinct, check_file, write_atomically};
use dht::bench::{
    self, Row, SettingError, Spec, Volume, BYTES_PER_OBJECT, DEFAULT_LOCAL_VOLUMES,
    SLOTS_PER_OBJECT,
};
use dht::Insert;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
pub(crate) fn row_line(r: &Row) -> String {
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
    #[arg(long, default_value_t = bench::DEFAULT_HIT_RATIO, allow_hyphen_values = true)]
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

/// The library's setting error, told by its flag and the values given.
fn told(e: SettingError, a: &DhtArgs) -> Error {
    Error::Invalid(match e {
        SettingError::LocalVolume(_) => format!(
            "--local-volume: every value must be at least 1, got {:?}",
            a.local_volume
        ),
        SettingError::Total(_) => {
            format!("--total: every value must be at least 1, got {:?}", a.total)
        }
        SettingError::HitRatio(r) => format!(
            "--hit-ratio must be from 0 to 1 (the share of lookups that are hits), got {}",
            crate::args::shown(r)
        ),
        e => e.to_string(),
    })
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
    for v in a.volumes() {
        v.check().map_err(|e| told(e, a))?;
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
    bench::check_hit_ratio(a.hit_ratio).map_err(|e| told(e, a))?;
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
            return DEFAULT_LOCAL_VOLUMES
                .iter()
                .map(|&lv| Volume::PerRank(lv))
                .collect();
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

/// The most objects a rank of `--backend mpi` inserts: its window's word count,
/// [`SLOTS_PER_OBJECT`] × LV, must fit the `int` count of `MPI_Win_allocate`.
const MAX_MPI_LV: usize = i32::MAX as usize / SLOTS_PER_OBJECT;

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
fn load(paths: &[PathBuf]) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for p in paths {
        let bad = |why: String| Error::Invalid(format!("--from {}: {why}", p.display()));
        let text = crate::input::read_json(p, crate::input::MAX_JSON).map_err(bad)?;
        let mut r: Vec<Row> =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not a dht report: {e}")))?;
        rows.append(&mut r);
    }
    Ok(rows)
}

/// What a row's line is drawn for besides its backend: its insertion, and its LV (weak
/// scaling) or total (strong).
fn volume_key(r: &Row) -> (Insert, usize, usize) {
    if r.total > 0 {
        (r.insert, r.total, 0)
    } else {
        (r.insert, 0, r.local_volume)
    }
}

/// The order of the table and the plot's points: by backend, insertion, volume, ranks.
fn row_order(r: &Row) -> (String, String, (Insert, usize, usize), usize) {
    (r.backend.clone(), r.osc.clone(), volume_key(r), r.ranks)
}

/// The plot's lines: one per (backend, osc, insertion, LV or total), points by ranks; style
/// by backend, colour by insertion and volume. `rows` are in [`row_order`].
fn lines(rows: &[Row]) -> Vec<crate::plots::DhtLine> {
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
fn finish(a: &DhtArgs, rows: &[Row]) -> Result<ExitCode, Error> {
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
            let out = world.run(|ctx| bench::run(ctx, &spec));
            let row = out.into_iter().next().expect("one rank at least");
            rows.push(row.map_err(|e| Error::Failed(format!("dht: {e}")))?);
        }
    }
    finish(a, &rows)
}

/// Open MPI's one-sided component for a row of `--backend mpi` (`OMPI_MCA_osc`, as the
/// launcher passed it to this rank), else empty.
#[cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]
fn osc(backend: BackendArg) -> String {
    if backend == BackendArg::Mpi {
        std::env::var("OMPI_MCA_osc").unwrap_or_else(|_| "default".into())
    } else {
        String::new()
    }
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
            let row = bench::run(rank.ctx(), &spec).map_err(|e| format!("dht: {e}"));
            let mut row = rank.or_abort(row);
            row.osc = osc(a.backend);
            rows.push(row);
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
