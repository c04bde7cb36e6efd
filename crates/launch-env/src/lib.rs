//! What a parallel job's launcher tells the processes it starts, read from their environment
//! in this one place: Open MPI's `mpirun` and `oshrun` (`OMPI_*`) and MPICH's Hydra
//! (`MPI_LOCALNRANKS`). The backends that a launcher starts (chan-mpi, chan-shmem) read it
//! here and hand chan-core's wait policy a verdict; chan-core itself reads no launcher's
//! variable.
//!
//! | variable | set by | read as |
//! |---|---|---|
//! | `OMPI_COMM_WORLD_RANK`, `PMIX_RANK`, `PMI_RANK` | Open MPI, PMIx, Hydra and Slurm's PMI | this process's rank in the job (the first set) |
//! | `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE` | Open MPI, PMI | the job's size |
//! | `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID` | Open MPI, Hydra | this process's rank on its node |
//! | `OMPI_COMM_WORLD_LOCAL_SIZE`, `MPI_LOCALNRANKS` | Open MPI, Hydra | the job's processes on this node |
//! | `OMPI_MCA_mpi_yield_when_idle` | the user | anything but empty, `0`, `false`, `no`: yield |
//! | `OMPI_MCA_orte_bound_at_launch` | Open MPI | `1`: the launcher bound each process |

/// What the launcher said, as read from this process's environment: all `None` (and not
/// bound) in a process no launcher started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Launch {
    /// This process's rank in the job.
    pub rank: Option<usize>,
    /// The job's size.
    pub size: Option<usize>,
    /// This process's rank among the job's processes on this node.
    pub local_rank: Option<usize>,
    /// The job's processes on this node.
    pub local_procs: Option<usize>,
    /// The user's `OMPI_MCA_mpi_yield_when_idle`, when set and not empty.
    pub yield_when_idle: Option<bool>,
    /// Open MPI bound the processes (`OMPI_MCA_orte_bound_at_launch=1`).
    pub bound: bool,
}

impl Launch {
    /// Read this process's environment.
    pub fn from_env() -> Launch {
        fn var(name: &str) -> Option<String> {
            std::env::var(name).ok().map(|v| v.trim().to_owned())
        }
        let number = |names: &[&str]| names.iter().find_map(|n| var(n)?.parse().ok());
        // MPICH's launcher (Hydra) says MPI_LOCALNRANKS; it binds nothing unless asked and has
        // no yield setting, so only the count applies there.
        let local_procs = number(&["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]);
        let yield_when_idle = var("OMPI_MCA_mpi_yield_when_idle")
            .filter(|y| !y.is_empty())
            .map(|y| !matches!(y.as_str(), "0" | "false" | "no"));
        let bound = var("OMPI_MCA_orte_bound_at_launch").as_deref() == Some("1");
        Launch {
            rank: number(&["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]),
            size: number(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]),
            local_rank: number(&["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"]),
            local_procs,
            yield_when_idle,
            bound,
        }
    }

    /// The threads that keep a core busy on this node when each of the job's processes here
    /// runs `threads` of them (a hybrid rank's team counts whole; at least one each): the
    /// count a wait policy compares with the cores. `None` when the launcher did not say how
    /// many processes share the node.
    pub fn local_threads(&self, threads: usize) -> Option<usize> {
        self.local_procs.map(|n| n.saturating_mul(threads.max(1)))
    }

    /// Whether a waiting thread should give up its core, when the launcher decides it, for
    /// processes that each run `threads` busy threads: the user's yield setting first; else,
    /// when the launcher bound the processes, whether more threads share the node than it has
    /// online CPUs ([`Launch::local_threads`]; bound is not a core each: `--bind-to
    /// core:overload-allowed` binds several processes to one core and sets the flag too, a
    /// process bound to one core runs all its threads there, and a bound process sees only
    /// its own CPUs, so the node's count is the one to compare); else `None`: the launcher
    /// said nothing, the process decides from the count.
    pub fn yield_verdict(&self, threads: usize) -> Option<bool> {
        match (self.yield_when_idle, self.bound) {
            (Some(y), _) => Some(y),
            (None, true) => Some(
                self.local_threads(threads)
                    .zip(node_cpus())
                    .is_some_and(|(n, c)| n > c),
            ),
            (None, false) => None,
        }
    }
}

/// The node's online CPUs (`/sys/devices/system/cpu/online`, e.g. `0-3,8`), whatever this
/// process's affinity; `None` where that cannot be read.
pub fn node_cpus() -> Option<usize> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    list.trim().split(',').try_fold(0usize, |n, part| {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        Some(n + b.checked_sub(a)? + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::{node_cpus, Launch};

    #[test]
    fn the_node_counts_at_least_the_cpus_this_process_may_use() {
        let cpus = node_cpus().expect("this machine lists its online CPUs");
        assert!(cpus >= std::thread::available_parallelism().map_or(1, usize::from));
    }

    #[test]
    fn the_user_setting_wins_then_binding_compares_with_the_node() {
        let user = |y| Launch {
            local_procs: Some(usize::MAX),
            yield_when_idle: Some(y),
            bound: true,
            ..Launch::default()
        };
        assert_eq!(user(false).yield_verdict(1), Some(false));
        assert_eq!(user(true).yield_verdict(1), Some(true));
        let bound = |n| Launch {
            local_procs: Some(n),
            bound: true,
            ..Launch::default()
        };
        assert_eq!(bound(1).yield_verdict(1), Some(false));
        assert_eq!(bound(usize::MAX).yield_verdict(1), Some(true));
        let free = Launch {
            local_procs: Some(usize::MAX),
            ..Launch::default()
        };
        assert_eq!(free.yield_verdict(1), None);
    }

    /// A process per core, bound, is not oversubscribed; the same processes with a team of
    /// two threads each are: the count is of threads, not processes.
    #[test]
    fn bound_processes_count_their_threads_against_the_cores() {
        let cpus = node_cpus().expect("this machine lists its online CPUs");
        let full = Launch {
            local_procs: Some(cpus),
            bound: true,
            ..Launch::default()
        };
        assert_eq!(full.local_threads(1), Some(cpus));
        assert_eq!(
            full.local_threads(0),
            Some(cpus),
            "at least one thread each"
        );
        assert_eq!(full.local_threads(2), Some(2 * cpus));
        assert_eq!(full.yield_verdict(1), Some(false));
        assert_eq!(full.yield_verdict(2), Some(true));
        assert_eq!(Launch::default().local_threads(2), None);
    }
}
