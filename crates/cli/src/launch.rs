//! Ranks that are processes a launcher starts (`mpirun` for MPI, `oshrun` for OpenSHMEM),
//! from both sides, for `aiac run`, `aiac dht`, `aiac probe` and `aiac sweep` alike:
//!
//! * [`Launcher`] names a launcher and the backend whose ranks it starts, and starts this
//!   program under it ([`Launcher::command`], [`run_logged`]: a child job under a deadline);
//! * [`Placement`] is where a launcher put this process, read before any library starts;
//! * [`Rank`] is this process as rank r of n of a launched job, its library started: the ranks
//!   agree on their input before any other collective call ([`Rank::agree`]), an error during
//!   the work stops the job ([`Rank::or_abort`]), and [`Rank::stop`] finalizes.

// Without a launched backend only the child-job side is used.
#![cfg_attr(not(any(feature = "mpi", feature = "shmem")), allow(dead_code))]

use crate::error::Error;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A launcher, and the backend whose ranks are the processes it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Launcher {
    /// Open MPI's `mpirun`: MPI ranks (`--backend mpi`).
    Mpirun,
    /// Open MPI's `oshrun`: OpenSHMEM processing elements (`--backend shmem`).
    Oshrun,
}

/// The environment Open MPI's launchers need here (as `scripts/mpi-env.sh` sets it), given to
/// a launcher when the user's environment does not set it: running as root (containers, CI),
/// more ranks than cores, and the one-sided component OpenSHMEM's finalize survives.
const LAUNCH_ENV: [(&str, &str); 4] = [
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
    ("OMPI_MCA_osc", "sm,ucx"),
];

impl Launcher {
    /// The program.
    pub(crate) fn program(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpirun",
            Launcher::Oshrun => "oshrun",
        }
    }

    /// The backend, as `--backend` spells it.
    pub(crate) fn backend(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpi",
            Launcher::Oshrun => "shmem",
        }
    }

    /// The library's name in messages.
    pub(crate) fn library(self) -> &'static str {
        match self {
            Launcher::Mpirun => "MPI",
            Launcher::Oshrun => "SHMEM",
        }
    }

    /// What the library calls a process.
    pub(crate) fn process(self) -> &'static str {
        match self {
            Launcher::Mpirun => "rank",
            Launcher::Oshrun => "PE",
        }
    }

    /// Fail unless the launcher is on `PATH`.
    pub(crate) fn check_installed(self) -> Result<(), Error> {
        let found = std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|d| d.join(self.program()).is_file())
        });
        match found {
            true => Ok(()),
            false => Err(Error::Launch(format!(
                "--backend {}: its launcher `{}` is not on PATH (install Open MPI: \
                 scripts/setup.sh)",
                self.backend(),
                self.program()
            ))),
        }
    }

    /// `LAUNCHER -np N EXE`: `np` copies of `exe` (this program) as one job, with the
    /// environment the launcher needs here ([`LAUNCH_ENV`]) where the user's does not set it.
    /// The caller adds `exe`'s arguments.
    pub(crate) fn command(self, np: usize, exe: &Path) -> Command {
        self.command_with(&[], np, exe)
    }

    /// [`Launcher::command`] with the launcher's own options `opts` before `-np`.
    pub(crate) fn command_with(self, opts: &[&str], np: usize, exe: &Path) -> Command {
        let mut c = Command::new(self.program());
        c.args(opts).args(["-np", &np.to_string()]).arg(exe);
        for (k, v) in LAUNCH_ENV {
            if std::env::var_os(k).is_none() {
                c.env(k, v);
            }
        }
        c
    }
}

/// Where a launcher put this process, from the environment it gives the processes it starts
/// (Open MPI's mpirun and oshrun, PMIx, MPICH's Hydra and Slurm's PMI), known before any
/// library is initialised. All `None` in a process no launcher started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    /// This process's rank in the job.
    pub(crate) rank: Option<usize>,
    /// The job's size.
    pub(crate) size: Option<usize>,
    /// This process's rank among the job's processes on this machine.
    pub(crate) local_rank: Option<usize>,
    /// How many of the job's processes run on this machine.
    pub(crate) local_size: Option<usize>,
}

/// Under SimGrid's SMPI: this simulated rank (set by [`set_simulated`] before anything else;
/// SMPI gives each simulated rank its own copy of the program's statics).
static SIMULATED_RANK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// This program runs as simulated rank `rank` under SMPI's `smpirun`: the ranks are not
/// processes, and no launcher's environment says where they are.
pub(crate) fn set_simulated(rank: usize) {
    let _ = SIMULATED_RANK.set(rank);
}

/// Whether this program runs under SMPI ([`set_simulated`]).
pub(crate) fn simulated() -> bool {
    SIMULATED_RANK.get().is_some()
}

impl Placement {
    /// This process's placement. A simulated rank runs on a simulated core, never beside
    /// another for a core of this machine (SMPI runs one rank at a time): it counts as the
    /// only rank of its node, so no check for oversubscription applies.
    pub(crate) fn here() -> Self {
        if let Some(&rank) = SIMULATED_RANK.get() {
            return Placement {
                rank: Some(rank),
                size: None,
                local_rank: Some(0),
                local_size: Some(1),
            };
        }
        let l = launch_env::Launch::from_env();
        Placement {
            rank: l.rank,
            size: l.size,
            local_rank: l.local_rank,
            local_size: l.local_procs,
        }
    }

    /// Whether this process reports for the whole job what every process finds alike before
    /// any library starts (a usage error): rank 0, or a process no launcher started.
    pub(crate) fn reports_for_job(&self) -> bool {
        self.rank.is_none_or(|r| r == 0)
    }

    /// An error every process of the job finds alike before any library starts: this process
    /// reports it if [`Self::reports_for_job`]; any other exits 0 at once, so that the
    /// launcher does not stop rank 0 before it has printed (the job's exit code is rank 0's).
    pub(crate) fn before_start(&self, e: Error) -> Error {
        match self.reports_for_job() {
            true => e,
            false => Error::LeftToRank0,
        }
    }
}

/// What became of a child job.
pub(crate) enum Ended {
    Exited(ExitStatus),
    TimedOut,
    /// This process was signalled (SIGINT, SIGTERM): the child was given the signal and has
    /// ended.
    Signalled(i32),
}

/// Run `cmd` as the leader of its own process group, its output into the file `log` and
/// nothing on its input, for at most `timeout` ([`wait_bounded`]). It does not outlive this
/// process ([`dies_with_this_process`]).
pub(crate) fn run_logged(
    cmd: &mut Command,
    log: &Path,
    timeout: Duration,
) -> std::io::Result<Ended> {
    let log = crate::output::create_log(log)?;
    let err = log.try_clone()?;
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    dies_with_this_process(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn()?;
    wait_bounded(&mut child, timeout)
}

/// The child `cmd` starts is sent SIGTERM when this process ends, even killed by SIGKILL,
/// which no handler sees (Linux's parent-death signal): a launcher then stops its ranks and
/// removes their shared-memory segments (as when `stop` signals it), a run of the threads
/// backend dies of it (or removes the temporary file it was writing). Without it the child
/// of a killed `aiac sweep` or `aiac dht` would run on, past their `--timeout`, for nobody.
///
/// The signal comes when the thread that started the child ends: start it from the main
/// thread (as sweep and dht do), which lasts as long as the process.
fn dies_with_this_process(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl, getppid) and
    // allocates nothing (its errors are raw OS error codes).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // This process may have ended before the prctl, and no signal will come: the
            // child then has another parent, and does not start.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// What a child's log says of its end: its ranks' errors (at most `n`), else its last `n`
/// lines.
pub(crate) fn log_gist(path: &Path, n: usize) -> String {
    // Its last 16 MiB: a job's errors come at its end.
    let text = crate::input::read_tail(path, 16 << 20);
    // The ranks' own errors say why; a launcher's text after them (MPI_ABORT's notice) does
    // not. Each once: every rank of a job can find the same.
    let mut errors: Vec<&str> = Vec::new();
    for l in text.lines().filter(|l| l.starts_with("aiac: error")) {
        if !errors.contains(&l) && errors.len() < n {
            errors.push(l);
        }
    }
    if !errors.is_empty() {
        return errors.join("\n");
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Send `sig` to the child's process group (the child is its leader: a launcher and the
/// ranks it started, or a run of the threads backend).
fn signal_group(child: &Child, sig: nix::sys::signal::Signal) {
    use nix::sys::signal::killpg;
    use nix::unistd::Pid;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    if killpg(pid, sig).is_err() {
        let _ = nix::sys::signal::kill(pid, sig);
    }
}

/// Whether any process of `child`'s process group (it leads it) is still alive.
fn group_alive(child: &Child) -> bool {
    let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    nix::sys::signal::killpg(pgid, None).is_ok()
}

/// Stop `child`: `sig` to its process group (a launcher passes it on to the ranks it
/// started and cleans up), then SIGKILL to the group five seconds later; wait for it and for
/// every process of its group. A launcher killed by the signal can exit before its ranks
/// have: they are waited for too, so that none outlives this call (seen under load: a rank
/// still exiting after mpirun had).
fn stop(child: &mut Child, sig: nix::sys::signal::Signal) -> std::io::Result<()> {
    tracing::debug!(pid = child.id(), ?sig, "stopping the child");
    signal_group(child, sig);
    let grace = Instant::now() + Duration::from_secs(5);
    let mut exited = false;
    while Instant::now() < grace {
        exited = exited || child.try_wait()?.is_some();
        if exited && !group_alive(child) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    tracing::debug!(pid = child.id(), "still running: SIGKILL");
    // A launcher's ranks can lead process groups of their own, which the group's SIGKILL
    // misses: found before it (the launcher's death gives them another parent), killed with it.
    let below = descendants(child.id() as i32);
    signal_group(child, nix::sys::signal::Signal::SIGKILL);
    for pid in below {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    if !exited {
        let _ = child.kill();
        child.wait()?;
    }
    Ok(())
}

/// Every process below `pid` (children, their children, …), from /proc.
fn descendants(pid: i32) -> Vec<i32> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            // /proc/PID/stat: "PID (COMM) STATE PPID ..."; COMM may hold spaces and ')'.
            let Ok(stat) = crate::input::read_kernel_file(&e.path().join("stat")) else {
                continue;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|v| v.parse().ok()) {
                parent_of.push((p, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Wait for `child` at most `timeout`; past it, stop it with SIGTERM. A SIGINT or SIGTERM to
/// this process is passed on to the child, which is waited for. Each child leads its own
/// process group, so the signal reaches the launcher's ranks too, once.
fn wait_bounded(child: &mut Child, timeout: Duration) -> std::io::Result<Ended> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(sig) = crate::signals::pending() {
            let s = nix::sys::signal::Signal::try_from(sig)
                .unwrap_or(nix::sys::signal::Signal::SIGTERM);
            stop(child, s)?;
            return Ok(Ended::Signalled(sig));
        }
        if let Some(st) = child.try_wait()? {
            return Ok(Ended::Exited(st));
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop(child, nix::sys::signal::Signal::SIGTERM)?;
    Ok(Ended::TimedOut)
}

/// The library of a launched backend did not start.
pub(crate) struct InitFailure {
    /// The library's message.
    message: String,
    /// A bad value of one of aiac's variables: found before the library starts, the same on
    /// every rank of a node.
    env: bool,
}

/// The context of a backend whose ranks are processes a launcher starts.
#[cfg(any(feature = "mpi", feature = "shmem"))]
pub(crate) trait Launched: chan_core::Context + chan_core::traits::Windows + Sized {
    /// Its launcher.
    const LAUNCHER: Launcher;
    /// Start the library in this process, a rank that keeps `threads` threads busy (its own
    /// included): the backend's wait policy counts them against the cores.
    fn init(threads: usize) -> Result<Self, InitFailure>;
    /// Build `kind` for the non-blocking reductions (on every rank alike: collective). A
    /// backend with one kind ignores it (the run's checks refuse any other).
    fn use_reduction(&mut self, kind: jacobi::ReductionKind) {
        let _ = kind;
    }
    /// Finalize the library (every rank).
    fn finalize(self) -> Result<(), String>;
    /// Stop every rank of the job, now.
    fn abort(&self, code: i32) -> !;
}

#[cfg(feature = "mpi")]
impl Launched for chan_mpi::MpiCtx {
    const LAUNCHER: Launcher = Launcher::Mpirun;
    fn init(threads: usize) -> Result<Self, InitFailure> {
        chan_mpi::MpiCtx::init_with_threads(threads).map_err(|e| InitFailure {
            env: matches!(e, chan_mpi::InitError::Env(_)),
            message: e.to_string(),
        })
    }
    fn use_reduction(&mut self, kind: jacobi::ReductionKind) {
        self.set_reduction_kind(match kind {
            jacobi::ReductionKind::Iallreduce => chan_mpi::ReductionKind::Iallreduce,
            jacobi::ReductionKind::Tree => chan_mpi::ReductionKind::Tree,
        });
    }
    fn finalize(self) -> Result<(), String> {
        chan_mpi::MpiCtx::finalize(self).map_err(|e| e.to_string())
    }
    fn abort(&self, code: i32) -> ! {
        chan_mpi::MpiCtx::abort(self, code)
    }
}

#[cfg(feature = "shmem")]
impl Launched for chan_shmem::ShmemCtx {
    const LAUNCHER: Launcher = Launcher::Oshrun;
    fn init(threads: usize) -> Result<Self, InitFailure> {
        chan_shmem::ShmemCtx::init_with_threads(threads).map_err(|e| InitFailure {
            env: matches!(e, chan_shmem::InitError::Env(_)),
            message: e.to_string(),
        })
    }
    fn finalize(self) -> Result<(), String> {
        chan_shmem::ShmemCtx::finalize(self).map_err(|e| e.to_string())
    }
    fn abort(&self, code: i32) -> ! {
        chan_shmem::ShmemCtx::abort(self, code)
    }
}

/// This process as one rank of a job its launcher started, the backend's library running.
#[cfg(any(feature = "mpi", feature = "shmem"))]
pub(crate) struct Rank<C: Launched> {
    ctx: C,
}

#[cfg(any(feature = "mpi", feature = "shmem"))]
impl<C: Launched> Rank<C> {
    /// Start the library, for a rank that keeps `threads` threads busy. A bad value of one of
    /// aiac's variables is the same on every rank of a node (the launcher gives them one
    /// environment; another node may not have it): the first rank of each node alone says
    /// so, as rank 0 does for a usage error.
    pub(crate) fn start(threads: usize) -> Result<Self, Error> {
        C::init(threads).map(|ctx| Rank { ctx }).map_err(|f| {
            let here = Placement::here();
            let first_of_node = here.local_rank.or(here.rank) == Some(0);
            if f.env && here.rank.is_some() && !first_of_node {
                Error::LeftToRank0
            } else {
                Error::Launch(f.message)
            }
        })
    }

    /// The backend's context, for the collective work.
    pub(crate) fn ctx(&mut self) -> &mut C {
        &mut self.ctx
    }

    /// This rank.
    pub(crate) fn rank(&self) -> usize {
        self.ctx.rank()
    }

    /// The job's size.
    pub(crate) fn size(&self) -> usize {
        self.ctx.size()
    }

    /// Agree on every rank's check of its input before any other collective call: if every
    /// rank's `checked` is Ok, its value. If any rank refused, the lowest that did prints its
    /// message once, flushed, before a barrier that no rank leaves until it has, and every
    /// rank finalizes the library and returns [`Error::AlreadyReported`] (exit 1). So the
    /// launcher cannot stop the printing rank before the message is out, and the message
    /// appears once.
    pub(crate) fn agree<T>(mut self, checked: Result<T, Error>) -> Result<(Self, T), Error> {
        use std::io::Write;
        let rank = self.rank();
        // The lowest rank that refused, or none (infinity).
        let mut vote = [match &checked {
            Ok(_) => f64::INFINITY,
            Err(_) => rank as f64,
        }];
        let voted = self.ctx.all_reduce(&mut vote, chan_core::ReduceOp::Min);
        match (checked, voted) {
            (Ok(v), Ok(())) if vote[0].is_infinite() => Ok((self, v)),
            (checked, voted) => {
                let printer = voted.is_err() || vote[0] == rank as f64;
                if let (Err(e), true) = (&checked, printer) {
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(err, "aiac: error: {e}");
                    let _ = err.flush();
                }
                if voted.is_ok() {
                    // Nobody leaves before the message is out.
                    let _ = self.ctx.barrier();
                }
                if let Err(f) = self.ctx.finalize() {
                    eprintln!("aiac: while stopping {}: {f}", C::LAUNCHER.backend());
                }
                Err(Error::AlreadyReported)
            }
        }
    }

    /// The value of the collective work's `result`; its error stops the job: other ranks may
    /// be waiting in a collective call for this one, so it prints the error, naming this rank,
    /// and aborts every rank (`MPI_Abort`, `shmem_global_exit`). Nothing hangs.
    pub(crate) fn or_abort<T, E: std::fmt::Display>(&self, result: Result<T, E>) -> T {
        match result {
            Ok(v) => v,
            Err(e) => {
                crate::error::say(&format!(
                    "aiac: error on {} {}: {e}",
                    C::LAUNCHER.process(),
                    self.rank()
                ));
                self.ctx.abort(1)
            }
        }
    }

    /// Finalize the library (every rank).
    pub(crate) fn stop(self) -> Result<(), Error> {
        self.ctx
            .finalize()
            .map_err(|e| Error::Launch(format!("{} finalize: {e}", C::LAUNCHER.library())))
    }
}

/// The work of one rank of a launched job, whichever backend's: what [`on_launched_rank`]
/// runs once the library has started.
pub(crate) trait RankWork {
    /// The work's outcome.
    type Output;
    /// The threads each rank keeps busy (its own included), which the backend's wait policy
    /// counts against the cores: one, unless the work runs a team per rank.
    fn threads_per_rank(&self) -> usize {
        1
    }
    /// Do it as `rank`.
    #[cfg(any(feature = "mpi", feature = "shmem"))]
    fn on<C: Launched>(self, rank: Rank<C>) -> Result<Self::Output, Error>;
}

/// Start `launcher`'s backend in this process and do `work` as one of its ranks; an aiac
/// built without that backend says so.
pub(crate) fn on_launched_rank<W: RankWork>(
    launcher: Launcher,
    work: W,
) -> Result<W::Output, Error> {
    match launcher {
        #[cfg(feature = "mpi")]
        Launcher::Mpirun => {
            let threads = work.threads_per_rank();
            work.on(Rank::<chan_mpi::MpiCtx>::start(threads)?)
        }
        #[cfg(feature = "shmem")]
        Launcher::Oshrun => {
            let threads = work.threads_per_rank();
            work.on(Rank::<chan_shmem::ShmemCtx>::start(threads)?)
        }
        #[allow(unreachable_patterns)]
        other => {
            let _ = work;
            Err(not_built(other))
        }
    }
}

/// `--backend B` in an aiac built without B's cargo feature.
pub(crate) fn not_built(launcher: Launcher) -> Error {
    let backend = launcher.backend();
    Error::Launch(format!(
        "--backend {backend}: this aiac was built without it (cargo feature `{backend}`)"
    ))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures
mod tests {
    use super::{descendants, log_gist, stop};
    use std::process::Command;

    /// A child that ignores SIGTERM, with a grandchild in a session (and process group) of
    /// its own, as a launcher's ranks can be: after the grace both are killed, the grandchild
    /// too (a SIGKILL to the child's group alone left it running).
    #[test]
    fn a_child_deaf_to_sigterm_is_killed_with_every_descendant() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; setsid sleep 120 & wait"]);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().unwrap();
        let t = std::time::Instant::now();
        let mut below = Vec::new();
        while below.is_empty() && t.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            below = descendants(child.id() as i32);
        }
        assert!(!below.is_empty(), "the grandchild started");
        stop(&mut child, nix::sys::signal::Signal::SIGTERM).unwrap();
        let alive = |p: i32| {
            // A zombie is dead; its parent (init here) reaps it when it will.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| {
                    !s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while below.iter().any(|&p| alive(p)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left: Vec<i32> = below.into_iter().filter(|&p| alive(p)).collect();
        assert!(left.is_empty(), "{left:?} outlived the stop");
    }

    /// A job whose ranks failed: their errors come first in what is said of it, each once,
    /// not the launcher's notice that follows them (MPI_ABORT's ten lines were all a failed
    /// `dht --ranks` job showed).
    #[test]
    fn a_failed_jobs_gist_is_its_ranks_errors() {
        let dir = std::env::temp_dir().join(format!("aiac-gist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("job.log");
        let mut text = String::from("aiac dht: starting\n");
        text += "aiac: error on rank 0: dht: the window does not fit\n";
        text += "aiac: error on rank 0: dht: the window does not fit\n";
        text += "aiac: error on rank 1: dht: the window does not fit\n";
        for i in 0..12 {
            text += &format!("MPI_ABORT notice line {i}\n");
        }
        std::fs::write(&log, &text).unwrap();
        let gist = log_gist(&log, 8);
        assert_eq!(
            gist,
            "aiac: error on rank 0: dht: the window does not fit\n\
             aiac: error on rank 1: dht: the window does not fit"
        );
        // Without errors of its own: the end of the log.
        std::fs::write(&log, "a\nb\nc\nd\n").unwrap();
        assert_eq!(log_gist(&log, 2), "c\nd");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
