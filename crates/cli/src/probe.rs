//! `aiac probe`: the test kernel of Saif and Parashar ("Understanding the behavior and
//! performance of non-blocking communications in MPI", Euro-Par 2004), run under
//! `mpirun -np 2` on the user's own MPI.
//!
//! For every message size, after a barrier, rank 0 `MPI_Isend`s and computes for `C`
//! (`--compute-ms`), rank 1 `MPI_Irecv`s and computes for `2C`, then each `MPI_Wait`s. The
//! receiver is busy longer on purpose: a send still waiting for the receiver when the
//! sender's computation ends shows as a sender `Wait` of about `C`. Kernels ([`Kernel`]):
//!
//! * **plain**: nothing between the post and the `Wait`;
//! * **test**: the receiver calls `MPI_Test` once, a quarter into its computation (before the
//!   sender's computation ends);
//! * **channel**: the same kernel through an aiac Sync channel (R = 1) of the message size:
//!   `send` on rank 0, one `try_recv` on rank 1 at the test's point and `recv` at the end; the
//!   sender's `Wait` polls `in_flight` until its send completed. chan-mpi sends with
//!   `MPI_Issend`, which completes only once the receiver matched it, so the channel's
//!   sender depends on the receiver's progress at every size: the row shows what the
//!   channel's rule (every call progresses) gets from the one call a solver makes anyway;
//! * **unexpected** (the protocol test): the receive is posted only after a computation of
//!   4C, during which the receiver calls MPI every C/4 (`MPI_Iprobe` for a tag nobody sends).
//!   An eager message is delivered then as an unexpected message and the sender's request
//!   can complete; a rendezvous message cannot move before its receive is posted. A size
//!   whose send completed before the receive was posted in at least one repetition went
//!   eagerly; a rendezvous send never can, whatever the load (causality), so the verdict
//!   does not depend on medians. Both ranks' times are read on `CLOCK_MONOTONIC`, one clock
//!   per node; across nodes the offset is estimated by ping-pong (error: half a round trip,
//!   against a margin of `C/4`);
//! * **sender silent**: the sender computes `2C` without calling MPI, the receiver `C`: does
//!   the receiver need the sender's progress to finish (TCP's rendezvous does; Open MPI's
//!   single-copy shared memory, where the receiver reads the sender's buffer, does not)?
//! * **transfer**: both wait at once, no computation: the time the message takes.
//!
//! Between the largest eager and the smallest rendezvous size of the grid, bisection finds
//! the threshold to 1/64 of it.
//!
//! Overlap is the share of the transfer time hidden behind the receiver's computation:
//! `1 - (receiver's time inside MPI after posting) / transfer`, clamped to [0, 1]. The time a
//! `Test` spends moving data counts as exposed: on one node the receiver copies a rendezvous
//! message itself (Open MPI's single-copy `process_vm_readv`), inside whichever call finds it.

use crate::output::{check_dir, write_atomically, Csv};
use crate::plots;
use crate::run::{launched_rank, RunError};
use chan_core::traits::*;
use chan_core::{ChannelConfig, ChannelSpec, Sync as SyncMode};
use chan_mpi::MpiCtx;
use clap::{Args, ValueEnum};
use mpi::ffi;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// The transport `--transport` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// Whatever the job was launched with (reported in the output).
    Default,
    /// Open MPI's TCP BTL: the job must be launched with `--mca pml ob1 --mca btl self,tcp`
    /// (checked; a launched job's MCA parameters cannot change).
    Tcp,
}

/// `aiac probe` arguments.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    mpirun -np 2 aiac probe\n  \
    mpirun --mca pml ob1 --mca btl self,vader -np 2 aiac probe --out probe-vader\n  \
    mpirun --mca pml ob1 --mca btl self,tcp -np 2 aiac probe --transport tcp\n  \
    mpiexec.mpich -n 2 aiac probe   (an aiac built against MPICH: scripts/test-mpich)")]
pub struct ProbeArgs {
    /// Message sizes in bytes: `A..B` (the powers of two from A to B), or a comma list
    /// (`4K,64K,1M`); suffixes K and M are 1024 and 1024².
    #[arg(long, default_value = "1K..4M")]
    pub sizes: String,
    /// `tcp`: check that the job runs on Open MPI's TCP BTL (launch it with
    /// `mpirun --mca pml ob1 --mca btl self,tcp`). `default`: the transport it was launched
    /// with.
    #[arg(long, value_enum, default_value_t = Transport::Default)]
    pub transport: Transport,
    /// The sender's computation per repetition, milliseconds (the receiver's is twice that).
    #[arg(long, default_value_t = 5.0)]
    pub compute_ms: f64,
    /// Repetitions per size and variant (the table shows medians).
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// Directory for probe.json, probe.csv and the plot probe.png / probe.svg.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Largest message: MPI counts are C ints, and two buffers of it per rank.
const MAX_SIZE: usize = 1 << 30;

/// Parse `1K`, `64`, `4M` (binary units).
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1024),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or with K or M)"))?;
    let v = n
        .checked_mul(mul)
        .filter(|&v| (1..=MAX_SIZE).contains(&v))
        .ok_or_else(|| format!("{s:?} is not between 1 byte and 1G"))?;
    Ok(v)
}

/// The sizes `--sizes` names, ascending and distinct.
pub fn parse_sizes(spec: &str) -> Result<Vec<usize>, String> {
    let bad = |why: String| format!("--sizes {spec}: {why}");
    let mut sizes = if let Some((a, b)) = spec.split_once("..") {
        let (a, b) = (parse_size(a).map_err(bad)?, parse_size(b).map_err(bad)?);
        if a > b {
            return Err(bad(format!("the range goes down ({a} > {b} bytes)")));
        }
        let mut v = Vec::new();
        let mut s = a;
        while s <= b {
            v.push(s);
            s *= 2;
        }
        v
    } else {
        spec.split(',')
            .map(parse_size)
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?
    };
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() > 40 {
        return Err(bad(format!("{} sizes; at most 40", sizes.len())));
    }
    Ok(sizes)
}

/// One size's medians (seconds), as the table shows them.
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    size: usize,
    isend: f64,
    send_wait: [f64; 3],
    /// Receiver's time inside MPI after posting (test + wait), per variant.
    recv_exposed: [f64; 3],
    /// Sender's Wait when the receive is posted only after the computation (the protocol
    /// test: see [`Kernel::Unexpected`]).
    unexpected_wait: f64,
    /// Repetitions of [`Kernel::Unexpected`] whose send completed before its receive was
    /// posted: none for a rendezvous message, whatever the load.
    early: usize,
    /// Receiver's Wait while the sender computes without MPI ([`Kernel::SenderSilent`]).
    silent_wait: f64,
    transfer: f64,
}

/// The receiver of [`Kernel::Unexpected`] posts its receive this many C after the start.
const UNEXPECTED_SPAN: u32 = 4;

/// The raw kernels (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Irecv posted first, nothing until the Wait.
    Plain,
    /// Irecv posted first, one MPI_Test a quarter into the receiver's computation.
    Test,
    /// The receive is posted after a computation of 4C, during which the receiver calls MPI
    /// every C/4 (`MPI_Iprobe` for a tag nobody sends). An eager message is delivered then,
    /// as an unexpected message, and the sender's request can complete; a rendezvous one
    /// cannot move before its receive is posted, and the sender waits about 3C.
    Unexpected,
    /// No computation: both wait at once.
    Transfer,
    /// The sender computes 2C without calling MPI, the receiver C, then Waits: a message
    /// the receiver can complete alone (eager, or pulled by the receiver) costs it a copy, one
    /// that needs the sender's progress costs it about C.
    SenderSilent,
}

impl Row {
    fn rendezvous(&self) -> bool {
        self.early == 0
    }

    fn overlap(&self, v: usize) -> f64 {
        if self.transfer <= 0.0 {
            return 0.0;
        }
        (1.0 - self.recv_exposed[v] / self.transfer).clamp(0.0, 1.0)
    }
}

/// Which MPI and which path the job runs on, from the launcher's environment.
#[derive(Debug, Clone, Default)]
struct JobPath {
    /// "pml ob1, btl self,vader" or what is known.
    label: String,
    /// The eager limit the library is configured with (name, bytes), when known.
    eager: Option<(String, u64)>,
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

/// `aiac probe`.
pub fn probe(args: &ProbeArgs) -> Result<ExitCode, RunError> {
    let rank0 = launched_rank().is_none_or(|r| r == 0);
    let checked = (|| -> Result<(Vec<usize>, JobPath), RunError> {
        let sizes = parse_sizes(&args.sizes).map_err(RunError::Invalid)?;
        if !(0.05..=1000.0).contains(&args.compute_ms) {
            return Err(RunError::Invalid(format!(
                "--compute-ms {}: must be between 0.05 and 1000",
                args.compute_ms
            )));
        }
        if !(1..=1000).contains(&args.reps) {
            return Err(RunError::Invalid(format!(
                "--reps {}: must be between 1 and 1000",
                args.reps
            )));
        }
        if let (Some(dir), true) = (&args.out, rank0) {
            check_dir("--out", dir)?;
        }
        let path = path_of(args, rank0).map_err(RunError::Invalid)?;
        Ok((sizes, path))
    })();
    let (sizes, path) = match checked {
        Ok(v) => v,
        Err(_) if !rank0 => return Err(RunError::LeftToRank0),
        Err(e) => return Err(e),
    };
    let mut ctx = MpiCtx::init().map_err(|e| RunError::Launch(format!("MPI: {e}")))?;
    if ctx.size() != 2 {
        use std::io::Write;
        let size = ctx.size();
        if ctx.rank() == 0 {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "aiac: error: aiac probe runs on exactly 2 ranks (`mpirun -np 2 aiac probe`); \
                 this job has {size}"
            );
            let _ = err.flush();
        }
        // Nobody leaves before the message is out: a rank that exits non-zero makes the
        // launcher stop the job, and rank 0 must have printed by then.
        let _ = ctx.barrier();
        let _ = ctx.finalize();
        return Err(RunError::AlreadyReported);
    }
    let outcome = Probe::new(&mut ctx, args.compute_ms * 1e-3, args.reps)
        .and_then(|mut p| p.run_all(&mut ctx, &sizes));
    let (rows, threshold) = match outcome {
        Ok(v) => v,
        Err(e) => {
            // The peer may be inside a collective call waiting for this rank: stop the job.
            eprintln!("aiac: error: probe on rank {}: {e}", ctx.rank());
            ctx.abort(1)
        }
    };
    let rank = ctx.rank();
    ctx.finalize()
        .map_err(|e| RunError::Launch(format!("MPI finalize: {e}")))?;
    if rank != 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let report = Report {
        library: library_version(),
        path,
        compute: args.compute_ms * 1e-3,
        reps: args.reps,
        rows,
        threshold,
    };
    print!("{}", report.table());
    if let Some(dir) = &args.out {
        report.write(dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `MPI_Get_library_version`, first line.
fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: MPI_Get_library_version may be called at any time, even after finalize; buf
    // has room for MPI_MAX_LIBRARY_VERSION_STRING (at most 8192 in Open MPI and MPICH).
    let rc = unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return "unknown".into();
    }
    buf.truncate(len.clamp(0, 8192) as usize);
    let s = String::from_utf8_lossy(&buf);
    let tidy = |l: &str| {
        l.trim_matches(char::from(0))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut v = tidy(s.lines().next().unwrap_or("unknown"));
    // MPICH names its device (ch4:ucx, ch3:nemesis) on a line of its own.
    if let Some(d) = s.lines().find(|l| l.starts_with("MPICH Device:")) {
        v = format!("{v}, {}", tidy(d));
    }
    v
}

/// A failed MPI call, with MPI's message.
fn check(rc: c_int, call: &str) -> Result<(), String> {
    if rc == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 1024];
    let mut len: c_int = 0;
    // SAFETY: buf has room for MPI_MAX_ERROR_STRING (at most 1024 in Open MPI and MPICH).
    let ok = unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len) } == 0;
    buf.truncate(if ok { len.clamp(0, 1024) as usize } else { 0 });
    Err(format!(
        "{call} failed: {} (code {rc})",
        String::from_utf8_lossy(&buf)
    ))
}

/// Spin until `deadline`: the kernel's computation (no MPI call inside).
fn compute_until(deadline: Instant) {
    let mut x = 1.0f64;
    while Instant::now() < deadline {
        for _ in 0..64 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
    }
    std::hint::black_box(x);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The measuring state of one rank.
struct Probe {
    comm: ffi::MPI_Comm,
    rank: usize,
    compute: Duration,
    reps: usize,
    buf: Vec<u8>,
    data: Vec<f64>,
    /// [`mono`] at the last repetition's event: the sender's completion (rank 0), the
    /// receiver's post (rank 1; [`Kernel::Unexpected`]).
    event: f64,
    /// Rank 1's clock minus rank 0's (rank 0 only), estimated by ping-pong.
    offset: f64,
}

/// `CLOCK_MONOTONIC` in seconds: one clock for every process of a node (across nodes, the
/// probe estimates the offset).
fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux, so the
    // call cannot fail (checked anyway: a zero time would only make every size "rendezvous").
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The threshold found: (largest eager size, smallest rendezvous size) in bytes.
type Threshold = (Option<usize>, Option<usize>);

impl Probe {
    fn new(ctx: &mut MpiCtx, compute: f64, reps: usize) -> Result<Self, String> {
        // SAFETY: null handle constant, overwritten by MPI_Comm_dup below.
        let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: MPI is initialised (ctx lives); every rank dups the world communicator;
        // the new handle is given ERRORS_RETURN so every failure comes back as a code.
        unsafe {
            check(
                ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm),
                "MPI_Comm_dup",
            )?;
            check(
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
                "MPI_Comm_set_errhandler",
            )?;
        }
        Ok(Probe {
            comm,
            rank: ctx.rank(),
            compute: Duration::from_secs_f64(compute),
            reps,
            buf: Vec::new(),
            data: Vec::new(),
            event: 0.0,
            offset: 0.0,
        })
        .and_then(|mut p| {
            p.offset = p.clock_offset()?;
            Ok(p)
        })
    }

    /// Rank 1's clock minus rank 0's, from the ping-pong with the shortest round trip
    /// (Cristian's algorithm; error at most half that round trip). 0 on rank 1.
    fn clock_offset(&self) -> Result<f64, String> {
        let (mut best, mut offset) = (f64::INFINITY, 0.0);
        for _ in 0..32 {
            if self.rank == 0 {
                let t0 = mono();
                self.send_time(0.0)?;
                let t1 = self.recv_time()?;
                let t2 = mono();
                if t2 - t0 < best {
                    best = t2 - t0;
                    offset = t1 - 0.5 * (t0 + t2);
                }
            } else {
                self.recv_time()?;
                self.send_time(mono())?;
            }
        }
        Ok(offset)
    }

    /// Send one time stamp to the other rank (the clock exchange's messages, tag 2).
    fn send_time(&self, t: f64) -> Result<(), String> {
        let peer = if self.rank == 0 { 1 } else { 0 };
        // SAFETY: one double at &t; comm is valid; the peer is the other rank of the two.
        let rc = unsafe {
            ffi::MPI_Send(
                (&t as *const f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                peer,
                2,
                self.comm,
            )
        };
        check(rc, "MPI_Send")
    }

    /// Receive one time stamp from the other rank (tag 2).
    fn recv_time(&self) -> Result<f64, String> {
        let peer = if self.rank == 0 { 1 } else { 0 };
        let mut t = 0.0f64;
        // SAFETY: room for one double at &mut t; comm is valid; the peer is the other rank.
        let rc = unsafe {
            ffi::MPI_Recv(
                (&mut t as *mut f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                peer,
                2,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Recv")?;
        Ok(t)
    }

    /// The protocol test ([`Kernel::Unexpected`]) for `size`, every rank: how many
    /// repetitions saw the sender's request complete before the receiver posted its receive
    /// (a rendezvous message never can: its data waits for the receive), and the sender's
    /// median Wait (rank 0).
    fn protocol(&mut self, size: usize) -> Result<(usize, f64), String> {
        self.size_buffers(size);
        self.raw_once(size, Kernel::Unexpected)?;
        let (mut events, mut waits) =
            (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [_, w] = self.raw_once(size, Kernel::Unexpected)?;
            events.push(self.event);
            waits.push(w);
        }
        let mut all = vec![0.0f64; 2 * self.reps];
        self.gather_into(&events, &mut all)?;
        // A margin of a quarter of the computation: far above the clocks' offset error (half
        // a round trip), far below the gap of a timely eager repetition (about 3C).
        let margin = self.compute.as_secs_f64() / 4.0;
        let (done, posted) = all.split_at(self.reps);
        let mut early = done
            .iter()
            .zip(posted)
            .filter(|(d, p)| **d + self.offset < **p - margin)
            .count() as u64;
        self.bcast(&mut early)?;
        Ok((early as usize, median(&mut waits)))
    }

    fn barrier(&self) -> Result<(), String> {
        // SAFETY: comm is this probe's valid communicator.
        check(unsafe { ffi::MPI_Barrier(self.comm) }, "MPI_Barrier")
    }

    /// Rank 0's `v` to every rank.
    fn bcast(&self, v: &mut u64) -> Result<(), String> {
        // SAFETY: one u64 at v on every rank; comm is valid.
        let rc = unsafe {
            ffi::MPI_Bcast(
                (v as *mut u64).cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                0,
                self.comm,
            )
        };
        check(rc, "MPI_Bcast")
    }

    /// Every rank's pair at rank 0.
    fn gather(&self, mine: [f64; 2]) -> Result<[f64; 4], String> {
        let mut all = [0.0f64; 4];
        self.gather_into(&mine, &mut all)?;
        Ok(all)
    }

    /// Every rank's `mine` (the same length on both ranks) into `all` at rank 0, rank by
    /// rank.
    fn gather_into(&self, mine: &[f64], all: &mut [f64]) -> Result<(), String> {
        assert_eq!(all.len(), 2 * mine.len(), "room for both ranks' values");
        let n = c_int::try_from(mine.len()).map_err(|_| "too many --reps".to_string())?;
        // SAFETY: `n` doubles sent from every rank's `mine`; `all` holds `n` per rank of the
        // probe's 2 (asserted above); comm is this probe's valid communicator.
        let rc = unsafe {
            ffi::MPI_Gather(
                mine.as_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                all.as_mut_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                0,
                self.comm,
            )
        };
        check(rc, "MPI_Gather")
    }

    /// One repetition of a raw kernel; this rank's two times (rank 0: Isend, Wait; rank 1:
    /// its intermediate call, Wait).
    fn raw_once(&mut self, size: usize, k: Kernel) -> Result<[f64; 2], String> {
        let count = c_int::try_from(size).map_err(|_| format!("{size} bytes exceed an int"))?;
        let peer = 1 - self.rank as c_int;
        // SAFETY: null request constant, overwritten by the post below.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let mut flag: c_int = 0;
        let c = if k == Kernel::Transfer {
            Duration::ZERO
        } else {
            self.compute
        };
        let buf = self.buf.as_mut_ptr().cast::<c_void>();
        // Every MPI call below: buf holds `size` bytes and is not touched while the request
        // is active; the request completes (MPI_Wait) before this function returns; comm is
        // valid; statuses are ignored.
        let irecv = |req: &mut ffi::MPI_Request| {
            // SAFETY: see above.
            let rc =
                unsafe { ffi::MPI_Irecv(buf, count, ffi::RSMPI_UINT8_T, peer, 0, self.comm, req) };
            check(rc, "MPI_Irecv")
        };
        let wait = |req: &mut ffi::MPI_Request| {
            let t = Instant::now();
            // SAFETY: see above (a request that MPI_Test completed is null: returns at once).
            let rc = unsafe { ffi::MPI_Wait(req, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Wait").map(|()| t.elapsed().as_secs_f64())
        };
        self.barrier()?;
        let start = Instant::now();
        let silent = k == Kernel::SenderSilent;
        if self.rank == 0 {
            // SAFETY: see above.
            let rc = unsafe {
                ffi::MPI_Isend(buf, count, ffi::RSMPI_UINT8_T, peer, 0, self.comm, &mut req)
            };
            check(rc, "MPI_Isend")?;
            let posted = start.elapsed().as_secs_f64();
            compute_until(start + if silent { 2 * c } else { c });
            let waited = wait(&mut req)?;
            self.event = mono();
            return Ok([posted, waited]);
        }
        if k != Kernel::Unexpected {
            irecv(&mut req)?;
        }
        let mut between = 0.0;
        if k == Kernel::Test {
            compute_until(start + c / 2);
            let t = Instant::now();
            // SAFETY: see above.
            let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Test")?;
            between = t.elapsed().as_secs_f64();
        }
        if k == Kernel::Unexpected {
            // A probe for a tag nobody sends, every C/4 until the receive is posted at 4C:
            // MPI progresses, nothing matches. The wide gap and the repeated calls let an
            // eager send complete early even when this rank is descheduled for a while.
            for q in 1..UNEXPECTED_SPAN * 4 {
                compute_until(start + c * q / 4);
                // SAFETY: comm valid; flag is a local int; the status is ignored.
                let rc = unsafe {
                    ffi::MPI_Iprobe(peer, 1, self.comm, &mut flag, ffi::RSMPI_STATUS_IGNORE)
                };
                check(rc, "MPI_Iprobe")?;
            }
        }
        compute_until(
            start
                + match k {
                    Kernel::SenderSilent => c,
                    Kernel::Unexpected => c * UNEXPECTED_SPAN,
                    _ => 2 * c,
                },
        );
        if k == Kernel::Unexpected {
            self.event = mono();
            irecv(&mut req)?;
        }
        let waited = wait(&mut req)?;
        Ok(if k == Kernel::Transfer {
            // From the barrier to the message's arrival.
            [0.0, start.elapsed().as_secs_f64()]
        } else {
            [between, waited]
        })
    }

    /// One repetition through an aiac Sync channel (see the module docs).
    fn channel_once(
        &mut self,
        ch: &mut chan_core::Channel<chan_mpi::Mpi, SyncMode>,
    ) -> Result<[f64; 2], String> {
        let e = |e: &dyn std::fmt::Display| format!("channel: {e}");
        self.barrier()?;
        let start = Instant::now();
        if self.rank == 0 {
            ch.send(&self.data).map_err(|x| e(&x))?;
            let posted = start.elapsed().as_secs_f64();
            compute_until(start + self.compute);
            let t = Instant::now();
            let mut spins = 0u32;
            while ch.in_flight().map_err(|x| e(&x))? > 0 {
                ch.relax(spins);
                spins = spins.saturating_add(1);
            }
            Ok([posted, t.elapsed().as_secs_f64()])
        } else {
            compute_until(start + self.compute / 2);
            let t = Instant::now();
            let got = ch.try_recv().map_err(|x| e(&x))?.is_some();
            let tested = t.elapsed().as_secs_f64();
            compute_until(start + 2 * self.compute);
            let t = Instant::now();
            if !got {
                ch.recv().map_err(|x| e(&x))?;
            }
            Ok([tested, t.elapsed().as_secs_f64()])
        }
    }

    /// Medians over the repetitions of `once`, gathered at rank 0: [rank 0's two, rank 1's
    /// two]. One warm-up repetition first.
    fn medians(
        &mut self,
        mut once: impl FnMut(&mut Self) -> Result<[f64; 2], String>,
    ) -> Result<[f64; 4], String> {
        once(self)?;
        let (mut a, mut b) = (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [x, y] = once(self)?;
            a.push(x);
            b.push(y);
        }
        self.gather([median(&mut a), median(&mut b)])
    }

    fn size_buffers(&mut self, size: usize) {
        self.buf.clear();
        self.buf.resize(size, 0x5a);
        self.data.clear();
        self.data.resize(size.div_ceil(8), 1.0);
    }

    /// The protocol test alone: did `size` go by rendezvous?
    fn classify(&mut self, size: usize) -> Result<bool, String> {
        Ok(self.protocol(size)?.0 == 0)
    }

    /// Every variant for one size (rank 0's row is complete; rank 1's holds nothing).
    fn measure(&mut self, ctx: &mut MpiCtx, size: usize) -> Result<Row, String> {
        self.size_buffers(size);
        let plain = self.medians(|p| p.raw_once(size, Kernel::Plain))?;
        let test = self.medians(|p| p.raw_once(size, Kernel::Test))?;
        let (early, unexpected_wait) = self.protocol(size)?;
        let transfer = self.medians(|p| p.raw_once(size, Kernel::Transfer))?;
        let silent = self.medians(|p| p.raw_once(size, Kernel::SenderSilent))?;
        let peer = 1 - self.rank;
        let cfg = ChannelConfig::new(self.data.len(), 1).map_err(|e| e.to_string())?;
        let spec = ChannelSpec::new(peer, 0, cfg).map_err(|e| e.to_string())?;
        let mut chans = ctx
            .open::<SyncMode>(&[spec])
            .map_err(|e| format!("opening the channel: {e}"))?;
        let mut ch = chans.pop().ok_or("opening the channel: no channel")?;
        let chan = self.medians(|p| p.channel_once(&mut ch));
        let closed = ch.close();
        let chan = chan?;
        closed.map_err(|e| format!("closing the channel: {e}"))?;
        Ok(Row {
            size,
            isend: plain[0],
            send_wait: [plain[1], test[1], chan[1]],
            unexpected_wait,
            early,
            silent_wait: silent[3],
            recv_exposed: [plain[2] + plain[3], test[2] + test[3], chan[2] + chan[3]],
            transfer: transfer[3],
        })
    }

    /// Every size, then bisection between the largest eager and the smallest rendezvous size.
    fn run_all(
        &mut self,
        ctx: &mut MpiCtx,
        sizes: &[usize],
    ) -> Result<(Vec<Row>, Threshold), String> {
        let mut rows = Vec::with_capacity(sizes.len());
        for &s in sizes {
            rows.push(self.measure(ctx, s)?);
        }
        // Rank 0 decides (it measured the sender's waits) and tells rank 1.
        let (mut lo, mut hi) = (0u64, 0u64);
        if self.rank == 0 {
            let first_rdv = rows.iter().position(|r| r.rendezvous());
            let clean = first_rdv.is_some_and(|i| rows[i..].iter().all(|r| r.rendezvous()));
            if let (Some(i), true) = (first_rdv, clean) {
                hi = rows[i].size as u64;
                lo = if i > 0 { rows[i - 1].size as u64 } else { 0 };
            }
        }
        self.bcast(&mut lo)?;
        self.bcast(&mut hi)?;
        let threshold = if hi == 0 {
            let eager = rows.iter().all(|r| !r.rendezvous());
            (eager.then(|| sizes.last().copied()).flatten(), None)
        } else if lo == 0 {
            (None, Some(hi as usize))
        } else {
            let (mut lo, mut hi) = (lo as usize, hi as usize);
            while hi - lo > (lo / 64).max(1) {
                let mid = lo + (hi - lo) / 2;
                if self.classify(mid)? {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            (Some(lo), Some(hi))
        };
        let mut comm = self.comm;
        // SAFETY: this probe's communicator, freed once (the probe is not used after).
        check(unsafe { ffi::MPI_Comm_free(&mut comm) }, "MPI_Comm_free")?;
        Ok((rows, threshold))
    }
}

/// Bytes as the table writes them (4K, 1M, 4072).
fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Everything rank 0 prints and writes.
struct Report {
    library: String,
    path: JobPath,
    compute: f64,
    reps: usize,
    rows: Vec<Row>,
    threshold: Threshold,
}

impl Report {
    fn threshold_text(&self) -> String {
        match self.threshold {
            (Some(lo), Some(hi)) => format!(
                "eager up to {lo} B, rendezvous from {hi} B (threshold {})",
                bytes(lo)
            ),
            (Some(lo), None) => format!("every size went eagerly (up to {})", bytes(lo)),
            (None, Some(hi)) => format!("every size went by rendezvous (from {})", bytes(hi)),
            (None, None) => "no clean threshold: eager and rendezvous sizes interleave \
                             (a loaded machine? raise --compute-ms or --reps)"
                .into(),
        }
    }

    fn table(&self) -> String {
        use std::fmt::Write;
        let us = |s: f64| format!("{:.1}", s * 1e6);
        let pc = |f: f64| format!("{:.0}%", f * 100.0);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "aiac probe: Saif & Parashar's Isend / compute / Wait kernel"
        );
        let _ = writeln!(t, "MPI: {}", self.library);
        let _ = writeln!(t, "path: {}", self.path.label);
        let _ = writeln!(
            t,
            "compute: sender {:.2} ms, receiver {:.2} ms (test at {:.2} ms); median of {} reps; times in µs",
            self.compute * 1e3,
            2.0 * self.compute * 1e3,
            self.compute * 0.5e3,
            self.reps
        );
        let _ = writeln!(
            t,
            "{:>6} {:>7} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>8} | {:>4} {:>4} {:>4} | {:>8} {:>5} {:>8} protocol",
            "size",
            "Isend",
            "sWait",
            "sW test",
            "sW chan",
            "rMPI",
            "rM test",
            "rM chan",
            "transfer",
            "ovl",
            "o tst",
            "o chn",
            "sW unexp",
            "early",
            "rW silnt",
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:>6} {:>7} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>8} | {:>4} {:>4} {:>4} | {:>8} {:>5} {:>8} {}",
                bytes(r.size),
                us(r.isend),
                us(r.send_wait[0]),
                us(r.send_wait[1]),
                us(r.send_wait[2]),
                us(r.recv_exposed[0]),
                us(r.recv_exposed[1]),
                us(r.recv_exposed[2]),
                us(r.transfer),
                pc(r.overlap(0)),
                pc(r.overlap(1)),
                pc(r.overlap(2)),
                us(r.unexpected_wait),
                format!("{}/{}", r.early, self.reps),
                us(r.silent_wait),
                if r.rendezvous() {
                    "rendezvous"
                } else {
                    "eager"
                }
            );
        }
        let _ = writeln!(
            t,
            "sWait: sender's MPI_Wait after its computation (receiver: nothing / one MPI_Test / \
             an aiac channel's try_recv); rMPI: receiver's time inside MPI after posting; \
             ovl: share of the transfer hidden behind the receiver's computation; sW unexp: \
             sender's Wait when the receive is posted 3C after the sender's Wait began \
             (rendezvous: about 3C); early: repetitions whose send completed before the \
             receive was posted (none: rendezvous); rW silnt: receiver's Wait while the \
             sender computes without MPI"
        );
        let _ = writeln!(t, "threshold: {}", self.threshold_text());
        if let Some((name, v)) = &self.path.eager {
            let _ = writeln!(
                t,
                "configured: {name} = {v} B{}",
                if name.starts_with("btl_") {
                    " (ompi_info; includes ob1's header)"
                } else {
                    ""
                }
            );
        }
        t
    }

    fn json(&self) -> serde_json::Value {
        let rows: Vec<_> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "size": r.size,
                    "protocol": if r.rendezvous() { "rendezvous" } else { "eager" },
                    "isend_s": r.isend,
                    "send_wait_s": {"plain": r.send_wait[0], "test": r.send_wait[1], "channel": r.send_wait[2], "unexpected": r.unexpected_wait},
                    "recv_mpi_s": {"plain": r.recv_exposed[0], "test": r.recv_exposed[1], "channel": r.recv_exposed[2]},
                    "transfer_s": r.transfer,
                    "overlap": {"plain": r.overlap(0), "test": r.overlap(1), "channel": r.overlap(2)},
                })
            })
            .collect();
        serde_json::json!({
            "schema": "aiac.probe/1",
            "mpi": self.library,
            "path": self.path.label,
            "configured_eager_limit": self.path.eager.as_ref().map(|(n, v)| serde_json::json!({"param": n, "bytes": v})),
            "compute_s": self.compute,
            "reps": self.reps,
            "threshold": {"last_eager": self.threshold.0, "first_rendezvous": self.threshold.1},
            "rows": rows,
        })
    }

    fn write(&self, dir: &Path) -> Result<(), RunError> {
        let fail = |p: &Path, why: String| RunError::Output {
            flag: "--out",
            path: p.to_path_buf(),
            why,
        };
        let json = dir.join("probe.json");
        let text =
            serde_json::to_string_pretty(&self.json()).map_err(|e| fail(&json, e.to_string()))?;
        write_atomically(&json, text.as_bytes()).map_err(|e| fail(&json, e.to_string()))?;
        let mut csv = Csv::new(&[
            "size",
            "protocol",
            "isend_s",
            "send_wait_plain_s",
            "send_wait_test_s",
            "send_wait_channel_s",
            "send_wait_unexpected_s",
            "recv_mpi_plain_s",
            "recv_mpi_test_s",
            "recv_mpi_channel_s",
            "transfer_s",
        ]);
        for r in &self.rows {
            let proto = if r.rendezvous() {
                "rendezvous"
            } else {
                "eager"
            };
            csv.row(
                [r.size.to_string(), proto.to_string()].into_iter().chain(
                    [r.isend]
                        .iter()
                        .chain(&r.send_wait)
                        .chain([&r.unexpected_wait])
                        .chain(&r.recv_exposed)
                        .chain([&r.transfer])
                        .map(|v| format!("{v:e}")),
                ),
            );
        }
        let path = dir.join("probe.csv");
        write_atomically(&path, csv.as_bytes()).map_err(|e| fail(&path, e.to_string()))?;
        let stem = dir.join("probe");
        let files = plots::save(&ProbeFigure(self), &stem).map_err(|e| fail(&stem, e))?;
        for f in files.iter().chain([&json, &path]) {
            println!("wrote {}", f.display());
        }
        Ok(())
    }
}

/// The probe's plot: times against message size, both axes logarithmic.
struct ProbeFigure<'a>(&'a Report);

impl plots::Figure for ProbeFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1100, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        let title = format!("aiac probe: {}", r.path.label);
        let root = root
            .titled(&title, plots::caption_font())
            .map_err(plots::err)?;
        // µs, floored so that the log axis can show a completed-at-once wait.
        let floor = 0.1;
        let us = |s: f64| (s * 1e6).max(floor);
        // x is log2 of the size, so that ticks fall on powers of two (1K, 2K, ...).
        let l2 = |b: f64| b.max(1.0).log2();
        let xs: Vec<f64> = r.rows.iter().map(|x| l2(x.size as f64)).collect();
        let (xlo, xhi) = (
            xs.first().copied().unwrap_or(0.0) - 0.5,
            xs.last().copied().unwrap_or(1.0) + 0.5,
        );
        let ticks = ((xhi - xlo).ceil() as usize + 1).min(40);
        let ymax = r
            .rows
            .iter()
            .flat_map(|x| {
                x.send_wait
                    .iter()
                    .chain(&x.recv_exposed)
                    .chain([&x.transfer])
            })
            .map(|&s| us(s))
            .fold(1.0, f64::max)
            * 8.0;
        let mut chart = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(55)
            .y_label_area_size(90)
            .build_cartesian_2d(xlo..xhi, (floor..ymax).log_scale())
            .map_err(plots::err)?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes, log scale)")
            .y_desc("time (µs, log scale), median")
            .axis_desc_style(plots::desc_font())
            .label_style(plots::label_font())
            .x_labels(ticks)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 1e-6 && (0.0..=40.0).contains(&i) {
                    bytes(1usize << i as u32)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| plots::tick(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plots::err)?;
        type Series = (&'static str, Box<dyn Fn(&Row) -> f64>);
        let series: [Series; 8] = [
            ("sender Wait, plain", Box::new(|x: &Row| x.send_wait[0])),
            (
                "sender Wait, receiver tests",
                Box::new(|x: &Row| x.send_wait[1]),
            ),
            (
                "sender Wait, aiac channel",
                Box::new(|x: &Row| x.send_wait[2]),
            ),
            (
                "receiver in MPI, plain",
                Box::new(|x: &Row| x.recv_exposed[0]),
            ),
            (
                "receiver in MPI, tests",
                Box::new(|x: &Row| x.recv_exposed[1]),
            ),
            (
                "receiver in MPI, channel",
                Box::new(|x: &Row| x.recv_exposed[2]),
            ),
            ("transfer (no compute)", Box::new(|x: &Row| x.transfer)),
            (
                "sender Wait, receive posted late",
                Box::new(|x: &Row| x.unexpected_wait),
            ),
        ];
        for (i, (label, f)) in series.iter().enumerate() {
            let c = plots::colour(i);
            let line: Vec<(f64, f64)> = r
                .rows
                .iter()
                .map(|x| (l2(x.size as f64), us(f(x))))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                .map_err(plots::err)?
                .label(*label)
                .legend(plots::line_key(c, 3));
            chart
                .draw_series(line.into_iter().map(|q| Circle::new(q, 4, c.filled())))
                .map_err(plots::err)?;
        }
        if let (Some(lo), Some(_)) = r.threshold {
            let grey = RGBColor(90, 90, 90);
            chart
                .draw_series(LineSeries::new(
                    [(l2(lo as f64), floor), (l2(lo as f64), ymax)],
                    grey.stroke_width(1),
                ))
                .map_err(plots::err)?
                .label(format!("threshold found: {} B", lo))
                .legend(plots::line_key(grey, 1));
        }
        if let Some((name, v)) = &r.path.eager {
            let c = RGBColor(200, 0, 0);
            chart
                .draw_series(DashedLineSeries::new(
                    [(l2(*v as f64), floor), (l2(*v as f64), ymax)],
                    6,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(plots::err)?
                .label(format!("{name} = {v} B"))
                .legend(plots::line_key(c, 1));
        }
        // Upper left: small sizes finish in microseconds, so that corner is empty.
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font(plots::label_font())
            .draw()
            .map_err(plots::err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("1K..8K").unwrap(), vec![1024, 2048, 4096, 8192]);
        assert_eq!(parse_sizes("64K,4K,4K").unwrap(), vec![4096, 65536]);
        assert_eq!(parse_sizes("100").unwrap(), vec![100]);
        assert_eq!(parse_sizes("1M..1M").unwrap(), vec![1 << 20]);
        for bad in ["4M..1K", "0", "x", "1K..", "2G", "-1", "1..1M,4"] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(e.starts_with("--sizes"), "{bad}: {e}");
        }
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
