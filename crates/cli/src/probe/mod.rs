//! `aiac probe`: the test kernel of Saif and Parashar ("Understanding the behavior and
//! performance of non-blocking communications in MPI", Euro-Par 2004) and their other
//! experiments, run under `mpirun -np 2` on the user's own MPI by the `mpi-probe` crate (whose
//! docs describe each measurement). Here: the flags and their checks, the transport's check
//! and the eager limit the job is configured with (from the launcher's environment and
//! `ompi_info`), starting MPI with the ranks agreeing, and rank 0's table, JSON, CSV and plot
//! ([`report`], [`experiments`]).
//!
//! `--compute-ms` is the kernel's C. The channel column runs on chan-mpi's two-sided path
//! unless `--channel-path node-local`: the probe sets `AIAC_MPI_REMOTE=1` before MPI starts,
//! so that the channel meets MPI's eager limit as the raw kernels do. `--experiment` runs the
//! paper's other experiments instead (two-way, cumulative, waiting).

mod experiments;
mod report;

use crate::error::Error;
use crate::launch::{Placement, Rank};
use crate::output::check_dir;
use chan_mpi::MpiCtx;
use clap::{Args, ValueEnum};
use experiments::{ExperimentReport, Outcome};
use mpi_probe::{library_version, Probe, SettingError, Settings};
use report::Report;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// The transport `--transport` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Transport {
    /// Whatever the job was launched with (reported in the output).
    Default,
    /// Open MPI's TCP BTL: the job must be launched with `--mca pml ob1 --mca btl self,tcp`
    /// (checked; a launched job's MCA parameters cannot change).
    Tcp,
}

/// What `aiac probe` runs (`--experiment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Experiment {
    /// The Isend / compute / Wait kernel with and without a test and through a channel, and
    /// the eager/rendezvous threshold.
    Kernel,
    /// Both ranks Isend to each other: what completes when, and whether blocking sends on
    /// both sides would deadlock.
    TwoWay,
    /// `--count` messages of each size in flight at once: eager each, or not together?
    Cumulative,
    /// Waits after the computation, early waits, or tests inside it, sender and receiver.
    Waiting,
}

impl Experiment {
    /// As `--experiment` spells it.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }
}

/// The path of the kernel's channel column (`--channel-path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ChannelPathArg {
    /// chan-mpi's MPI sends and receives (`AIAC_MPI_REMOTE=1`, set by the probe).
    TwoSided,
    /// chan-mpi's shared window between ranks of one node (`AIAC_MPI_REMOTE=0`): no MPI
    /// message.
    NodeLocal,
}

/// `aiac probe` arguments.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    mpirun -np 2 aiac probe\n  \
    mpirun --mca pml ob1 --mca btl self,vader -np 2 aiac probe --out probe-vader\n  \
    mpirun --mca pml ob1 --mca btl self,tcp -np 2 aiac probe --transport tcp\n  \
    mpiexec.mpich -n 2 aiac probe   (an aiac built against MPICH: scripts/test-mpich)\n  \
    mpirun -np 2 aiac probe --experiment two-way --sizes 1K..1M\n  \
    mpirun -np 2 aiac probe --experiment cumulative --sizes 1K,2K,20K --count 3")]
pub(crate) struct ProbeArgs {
    /// Message sizes in bytes: `A..B` (A doubled while below B, then B: `1K..4M` is the
    /// powers of two between), or a comma list
    /// (`4K,64K,1M`); suffixes K and M are 1024 and 1024².
    #[arg(long, default_value = "1K..4M")]
    pub(crate) sizes: String,
    /// `tcp`: check that the job runs on Open MPI's TCP BTL (launch it with
    /// `mpirun --mca pml ob1 --mca btl self,tcp`). `default`: the transport it was launched
    /// with.
    #[arg(long, value_enum, default_value_t = Transport::Default)]
    pub(crate) transport: Transport,
    /// The sender's computation per repetition, milliseconds, from 0.05 to 1000 (the
    /// kernel's receiver computes twice that; in `--experiment`, both ranks compute it).
    #[arg(long, default_value_t = mpi_probe::DEFAULT_COMPUTE.as_secs_f64() * 1e3,
          allow_hyphen_values = true)]
    pub(crate) compute_ms: f64,
    /// Repetitions per size and variant (the table shows medians).
    #[arg(long, default_value_t = mpi_probe::DEFAULT_REPS)]
    pub(crate) reps: usize,
    /// Directory for probe.json, probe.csv and the plot probe.png / probe.svg (an
    /// experiment: EXPERIMENT.json, .csv, and its plot when it has one).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// `kernel`: the paper's Isend / compute / Wait kernel and the threshold; `two-way`,
    /// `cumulative`, `waiting`: its other experiments (docs/performance.md).
    #[arg(long, value_enum, default_value_t = Experiment::Kernel)]
    pub(crate) experiment: Experiment,
    /// Messages in flight at once in `--experiment cumulative`, from 2 to 64 [default: 3].
    #[arg(long)]
    pub(crate) count: Option<usize>,
    /// The path of the kernel's channel column: `two-sided` (MPI messages, as between
    /// nodes) or `node-local` (a shared window on one node: no MPI message) [default:
    /// two-sided].
    #[arg(long, value_enum)]
    pub(crate) channel_path: Option<ChannelPathArg>,
}

/// The largest message (`mpi_probe::MAX_SIZE`, 1G).
const MAX_SIZE: usize = mpi_probe::MAX_SIZE;

/// Parse `1K`, `64`, `4M`, `1G` (binary units).
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1024),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1024 * 1024),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or with K, M or G)"))?;
    let v = n
        .checked_mul(mul)
        .filter(|&v| (1..=MAX_SIZE).contains(&v))
        .ok_or_else(|| format!("{s:?} is not between 1 byte and 1G"))?;
    Ok(v)
}

/// `--compute-ms`, within the library's range (0.05 to 1000 ms). Checked with the other
/// arguments, after parsing, so that under a launcher only rank 0 reports it; the value is
/// quoted short (`1e300` as a plain float is 301 digits).
fn check_compute_ms(v: f64) -> Result<Duration, String> {
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    match Duration::try_from_secs_f64(v * 1e-3) {
        Ok(d) if mpi_probe::check_compute(d).is_ok() => Ok(d),
        _ => Err(format!(
            "--compute-ms {}: must be a number of milliseconds from {} to {}",
            crate::args::shown(v),
            ms(mpi_probe::COMPUTE.start()),
            ms(mpi_probe::COMPUTE.end())
        )),
    }
}

/// The sizes `--sizes` names, ascending and distinct.
fn parse_sizes(spec: &str) -> Result<Vec<usize>, String> {
    let bad = |why: String| format!("--sizes {spec}: {why}");
    let mut sizes = if let Some((a, b)) = spec.split_once("..") {
        let (a, b) = (parse_size(a).map_err(bad)?, parse_size(b).map_err(bad)?);
        if a > b {
            return Err(bad(format!("the range goes down ({a} > {b} bytes)")));
        }
        // A, 2A, 4A … below B, then B itself: `3K..5K` is 3K and 5K, not 3K alone.
        let mut v = Vec::new();
        let mut s = a;
        while s < b {
            v.push(s);
            s *= 2;
        }
        v.push(b);
        v
    } else {
        spec.split(',')
            .map(parse_size)
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?
    };
    sizes.sort_unstable();
    sizes.dedup();
    // The library's own rule (at most 40 sizes) on the sorted, distinct sizes.
    mpi_probe::check_sizes(&sizes).map_err(|e| match e {
        SettingError::Sizes(e) => bad(e.to_string()),
        e => bad(e.to_string()),
    })?;
    Ok(sizes)
}

/// Which MPI and which path the job runs on, from the launcher's environment.
#[derive(Debug, Clone, Default)]
struct JobPath {
    /// "pml ob1, btl self,vader" or what is known.
    pub(super) label: String,
    /// The eager limit the library is configured with (name, bytes), when known.
    pub(super) eager: Option<(String, u64)>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// True under Open MPI's launcher.
fn open_mpi_job() -> bool {
    env("OMPI_COMM_WORLD_SIZE").is_some()
}

/// Open MPI's BTL list (`--mca btl`), split.
fn btls() -> Vec<String> {
    env("OMPI_MCA_btl")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect()
}

/// The eager limit of `btl` as `ompi_info` reports it in this environment (it reads the same
/// `OMPI_MCA_*` variables the job's processes do).
fn ompi_eager_limit(btl: &str) -> Option<u64> {
    let out = Command::new("ompi_info")
        .args(["--param", "btl", btl, "--level", "9", "--parsable"])
        .output()
        .ok()?;
    let key = format!("mca:btl:{btl}:param:btl_{btl}_eager_limit:value:");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&key)?.trim().parse().ok())
}

/// What the job runs on, and `--transport`'s check. Run before MPI starts.
fn path_of(args: &ProbeArgs, rank0: bool) -> Result<JobPath, String> {
    if !open_mpi_job() {
        if args.transport == Transport::Tcp {
            return Err(
                "--transport tcp: selects Open MPI's TCP BTL, and this job was not \
                        started by Open MPI's mpirun (MPICH picks its network at build time; \
                        see docs/performance.md)"
                    .into(),
            );
        }
        // MPICH over UCX (Debian's ch4:ucx) switches to rendezvous at UCX's threshold, which
        // the user sets with UCX_RNDV_THRESH (default "auto": UCX picks it per transport).
        let ucx = env("UCX_RNDV_THRESH");
        let eager = ucx
            .as_deref()
            .and_then(|v| parse_size(v).ok())
            .map(|v| ("UCX_RNDV_THRESH".to_string(), v as u64));
        return Ok(JobPath {
            label: format!(
                "as launched (not Open MPI), UCX_RNDV_THRESH={}",
                ucx.as_deref().unwrap_or("(unset: auto)")
            ),
            eager,
        });
    }
    let pml = env("OMPI_MCA_pml");
    let btl = btls();
    let has = |b: &str| btl.iter().any(|x| x == b);
    let tcp_only = pml.as_deref() == Some("ob1")
        && has("tcp")
        && !["vader", "sm", "smcuda"].iter().any(|b| has(b));
    if args.transport == Transport::Tcp && !tcp_only {
        return Err(format!(
            "--transport tcp: this job does not run on Open MPI's TCP BTL alone \
             (OMPI_MCA_pml={}, OMPI_MCA_btl={}); launch it as \
             `mpirun --mca pml ob1 --mca btl self,tcp -np 2 aiac probe --transport tcp`",
            pml.as_deref().unwrap_or("(unset)"),
            env("OMPI_MCA_btl").as_deref().unwrap_or("(unset)")
        ));
    }
    let label = format!(
        "pml {}, btl {}",
        pml.as_deref()
            .unwrap_or("not set (Open MPI chooses: see --mca pml_base_verbose 10)"),
        env("OMPI_MCA_btl").as_deref().unwrap_or("default")
    );
    // The eager limit is a BTL parameter, used only under pml ob1.
    let component = if tcp_only { "tcp" } else { "vader" };
    let eager = if pml.as_deref() == Some("ob1") && rank0 {
        ompi_eager_limit(component).map(|v| (format!("btl_{component}_eager_limit"), v))
    } else {
        None
    };
    Ok(JobPath { label, eager })
}

/// `aiac probe`: check the arguments (before MPI starts: the path's check reads the
/// launcher's environment and runs `ompi_info`), start MPI, agree on the checks and on the
/// job's size, measure, and report from rank 0.
pub(crate) fn probe(args: &ProbeArgs) -> Result<ExitCode, Error> {
    let rank0 = Placement::here().reports_for_job();
    let checked = check(args, rank0);
    // chan-mpi reads the variable once, when MPI starts (and the ranks agree on it): set here,
    // while this process runs no other thread.
    std::env::set_var(
        "AIAC_MPI_REMOTE",
        match args.channel_path.unwrap_or(ChannelPathArg::TwoSided) {
            ChannelPathArg::TwoSided => "1",
            ChannelPathArg::NodeLocal => "0",
        },
    );
    let rank = Rank::<MpiCtx>::start(1)?;
    let size = rank.size();
    let checked = checked.and_then(|v| match size {
        2 => Ok(v),
        _ => Err(Error::Launch(format!(
            "aiac probe runs on exactly 2 ranks (`mpirun -np 2 aiac probe`); this job has \
             {size}"
        ))),
    });
    let (
        mut rank,
        Checked {
            sizes,
            path,
            settings,
        },
    ) = rank.agree(checked)?;
    let compute = args.compute_ms * 1e-3;
    if args.experiment != Experiment::Kernel {
        let measured = Probe::new(rank.ctx(), settings)
            .and_then(|mut p| match args.experiment {
                Experiment::TwoWay => Ok(p.two_way(&sizes)?.map(Outcome::TwoWay)),
                Experiment::Cumulative => {
                    let count = args.count.unwrap_or(mpi_probe::DEFAULT_COUNT);
                    Ok(p.cumulative(&sizes, count)?
                        .map(|r| Outcome::Cumulative(count, r)))
                }
                _ => Ok(p.waiting(&sizes)?.map(Outcome::Waiting)),
            })
            .map_err(|e| format!("probe: {e}"));
        let result = rank.or_abort(measured);
        rank.stop()?;
        // Gathered at rank 0, which reports.
        let Some(result) = result else {
            return Ok(ExitCode::SUCCESS);
        };
        let report = ExperimentReport {
            library: library_version(),
            path,
            compute,
            reps: args.reps,
            result,
        };
        print!("{}", report.table());
        if let Some(dir) = &args.out {
            report.write(dir)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let measured = Probe::new(rank.ctx(), settings)
        .and_then(|mut p| p.run_kernel(&sizes))
        .map_err(|e| format!("probe: {e}"));
    let measured = rank.or_abort(measured);
    rank.stop()?;
    let Some(measured) = measured else {
        return Ok(ExitCode::SUCCESS);
    };
    let report = Report {
        library: library_version(),
        path,
        compute,
        reps: args.reps,
        measured,
    };
    print!("{}", report.table());
    if let Some(dir) = &args.out {
        report.write(dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the checks give the ranks to agree on.
struct Checked {
    sizes: Vec<usize>,
    path: JobPath,
    settings: Settings,
}

/// Every check of the arguments: the sizes, the kernel's parameters, the output directory
/// (rank 0, which writes it) and `--transport`. The path the job runs on, when they pass.
fn check(args: &ProbeArgs, rank0: bool) -> Result<Checked, Error> {
    let sizes = parse_sizes(&args.sizes).map_err(Error::Invalid)?;
    let compute = check_compute_ms(args.compute_ms).map_err(Error::Invalid)?;
    match (args.experiment, args.count) {
        (Experiment::Cumulative, Some(n)) if mpi_probe::check_count(n).is_err() => {
            return Err(Error::Invalid(format!(
                "--count {n}: must be between {} and {}",
                mpi_probe::COUNT.start(),
                mpi_probe::COUNT.end()
            )));
        }
        (Experiment::Cumulative, _) | (_, None) => {}
        (e, Some(_)) => {
            return Err(Error::Invalid(format!(
                "--count applies to --experiment cumulative (messages in flight at once), not \
                 to --experiment {}",
                e.name()
            )))
        }
    }
    if args.channel_path.is_some() && args.experiment != Experiment::Kernel {
        return Err(Error::Invalid(format!(
            "--channel-path applies to --experiment kernel (its channel column), not to \
             --experiment {}",
            args.experiment.name()
        )));
    }
    let settings = Settings::new(compute, args.reps).map_err(|e| {
        Error::Invalid(match e {
            SettingError::Reps(n) => format!(
                "--reps {n}: must be between {} and {}",
                mpi_probe::REPS.start(),
                mpi_probe::REPS.end()
            ),
            // --compute-ms was checked above.
            e => e.to_string(),
        })
    })?;
    if let (Some(dir), true) = (&args.out, rank0) {
        check_dir("--out", dir)?;
    }
    let path = path_of(args, rank0).map_err(Error::Invalid)?;
    Ok(Checked {
        sizes,
        path,
        settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("1K..8K").unwrap(), vec![1024, 2048, 4096, 8192]);
        // A range's end is measured even off A's powers of two (it measured 3K alone).
        assert_eq!(parse_sizes("3K..5K").unwrap(), vec![3072, 5120]);
        assert_eq!(parse_sizes("3K..12K").unwrap(), vec![3072, 6144, 12288]);
        assert_eq!(parse_sizes("64K,4K,4K").unwrap(), vec![4096, 65536]);
        assert_eq!(parse_sizes("100").unwrap(), vec![100]);
        assert_eq!(parse_sizes("1M..1M").unwrap(), vec![1 << 20]);
        // The top the message for a size out of range names, 1G, is itself a size.
        assert_eq!(parse_sizes("1G").unwrap(), vec![MAX_SIZE]);
        assert!(parse_sizes("0").unwrap_err().contains("1G"));
        for bad in ["4M..1K", "0", "x", "1K..", "2G", "-1", "1..1M,4"] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(e.starts_with("--sizes"), "{bad}: {e}");
        }
    }

    /// `--compute-ms` out of range is refused with its value short, not 300 digits.
    #[test]
    fn compute_ms_is_checked_as_parsed() {
        assert_eq!(check_compute_ms(5.0).unwrap(), Duration::from_millis(5));
        assert_eq!(check_compute_ms(0.05).unwrap(), Duration::from_micros(50));
        assert_eq!(check_compute_ms(1000.0).unwrap(), Duration::from_secs(1));
        for bad in [1e300, 0.0, -1.0, f64::NAN, f64::INFINITY, 1001.0, 0.049] {
            let e = check_compute_ms(bad).unwrap_err();
            assert!(e.contains("0.05 to 1000") && e.len() < 90, "{bad}: {e}");
        }
    }
}
