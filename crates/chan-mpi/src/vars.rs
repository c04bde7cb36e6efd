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

/// The wait policy of a rank its launcher started: `AIAC_WAIT`, else the launcher's verdict,
/// else the node's count of the job's ranks against this process's CPUs.
pub(crate) fn wait_policy() -> Result<WaitPolicy, EnvVarError> {
    let launch = launch_env::Launch::from_env();
    WaitPolicy::detect(launch.yield_verdict(), launch.local_procs)
}
