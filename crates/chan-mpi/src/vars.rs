//! The environment variables chan-mpi reads, all read here (chan-core's in `chan_core::vars`,
//! the launcher's in the `launch-env` crate).
//!
//! | variable | values | what it does |
//! |---|---|---|
//! | `AIAC_MPI_REMOTE` | `1`; `0`, empty or unset: off | every peer takes the two-sided path, as between nodes ([`crate::MpiCtx::remote_only`]) |
//! | `AIAC_WAIT` | `spin`, `yield` | chan-core's override of the wait policy this reads from the launcher |

use chan_core::backend::{EnvVarError, WaitPolicy};

/// The variable that forces the two-sided path to every peer.
pub(crate) const REMOTE_ENV: &str = "AIAC_MPI_REMOTE";

/// `AIAC_MPI_REMOTE`: whether to treat every peer as if on another node.
pub(crate) fn remote_from_env() -> Result<bool, EnvVarError> {
    EnvVarError::switch(
        REMOTE_ENV,
        "1 (every peer takes the two-sided path), 0 or unset",
    )
}

/// The wait policy of a rank its launcher started that runs `threads` busy threads (the
/// caller's own included): `AIAC_WAIT`, else the launcher's verdict, else the node's count of
/// the job's ranks × `threads` against this process's CPUs.
pub(crate) fn wait_policy(threads: usize) -> Result<WaitPolicy, EnvVarError> {
    policy_of(&launch_env::Launch::from_env(), threads)
}

/// [`wait_policy`] for what `launch` says.
fn policy_of(launch: &launch_env::Launch, threads: usize) -> Result<WaitPolicy, EnvVarError> {
    WaitPolicy::detect(launch.yield_verdict(threads), launch.local_threads(threads))
}

#[cfg(test)]
mod tests {
    use super::policy_of;
    use chan_core::backend::WaitPolicy;

    /// As many ranks as this process has CPUs, launched unbound (the count decides) or bound
    /// (the launcher's verdict does): one thread each spins; a team of two each is more
    /// threads than cores, and yields. (`AIAC_WAIT` set: it decides, nothing to detect.)
    #[test]
    fn ranks_times_threads_over_the_cores_yield() {
        let unbound = launch_env::Launch {
            local_procs: std::thread::available_parallelism().ok().map(usize::from),
            ..launch_env::Launch::default()
        };
        let bound = launch_env::Launch {
            local_procs: launch_env::node_cpus(),
            bound: true,
            ..launch_env::Launch::default()
        };
        let detected = std::env::var_os(chan_core::vars::WAIT).is_none();
        for launch in [unbound, bound].iter().filter(|_| detected) {
            let policies = [1, 2].map(|threads| policy_of(launch, threads));
            assert_eq!(
                policies,
                [Ok(WaitPolicy::Spin), Ok(WaitPolicy::Yield)],
                "{launch:?}"
            );
        }
    }
}
