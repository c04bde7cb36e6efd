//! The environment variables chan-shmem reads or sets, all here (chan-core's in
//! `chan_core::vars`, the launcher's in the `launch-env` crate).
//!
//! | variable | values | what it does |
//! |---|---|---|
//! | `AIAC_SHMEM_REMOTE` | `1`; `0`, empty or unset: off | every peer takes the between-nodes path ([`crate::ShmemCtx::remote_only`]) |
//! | `AIAC_SHMEM_PAIR_POOL` | bytes per PE (default 4194304) | the symmetric memory set aside at init for pairwise channels |
//! | `AIAC_WAIT` | `spin`, `yield` | chan-core's override of the wait policy this reads from the launcher |
//! | `OMPI_MCA_osc` | set to `sm,ucx` when unset | Open MPI 4.1's OSHMEM crashed in finalize with its default one-sided components |

use chan_core::backend::{EnvVarError, WaitPolicy};

/// The variable that forces the between-nodes path: `1` (unset, empty or `0`: off).
pub(crate) const REMOTE_ENV: &str = "AIAC_SHMEM_REMOTE";
/// The variable that sizes the pool of pairwise channels, in bytes per PE.
pub(crate) const POOL_ENV: &str = "AIAC_SHMEM_PAIR_POOL";
/// The pool's default size: 4 MiB per PE (about 50 mailboxes of 2500 values with R = 3).
const DEFAULT_POOL_BYTES: usize = 4 << 20;

/// `AIAC_SHMEM_REMOTE`: whether to treat every peer as if on another node.
pub(crate) fn remote_from_env() -> Result<bool, EnvVarError> {
    EnvVarError::switch(
        REMOTE_ENV,
        "1 (every peer takes the between-nodes path), 0 or unset",
    )
}

/// `AIAC_SHMEM_PAIR_POOL`: the pool's bytes per PE (unset or empty: the default).
pub(crate) fn pool_bytes_from_env() -> Result<usize, EnvVarError> {
    let bad = |value: String| EnvVarError {
        var: POOL_ENV,
        value,
        allowed: "a number of bytes per PE (default 4194304)",
    };
    match std::env::var(POOL_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_POOL_BYTES),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(v.to_string_lossy().into_owned())),
        Ok(v) if v.trim().is_empty() => Ok(DEFAULT_POOL_BYTES),
        Ok(v) => v.trim().parse().map_err(|_| bad(v)),
    }
}

/// The wait policy of a PE its launcher started that runs `threads` busy threads (the
/// caller's own included): `AIAC_WAIT`, else the launcher's verdict, else the node's count of
/// the job's PEs × `threads` against this process's CPUs.
pub(crate) fn wait_policy(threads: usize) -> Result<WaitPolicy, EnvVarError> {
    let launch = launch_env::Launch::from_env();
    WaitPolicy::detect(launch.yield_verdict(threads), launch.local_threads(threads))
}

/// Open MPI 4.1's OSHMEM crashes in finalize with its default one-sided components; with
/// `sm,ucx` it does not. Set before `shmem_init` when the user has not chosen, while this
/// process runs no other thread (the caller's contract: SHMEM init is the first thing).
pub(crate) fn default_osc() {
    if std::env::var_os("OMPI_MCA_osc").is_none() {
        std::env::set_var("OMPI_MCA_osc", "sm,ucx");
    }
}
