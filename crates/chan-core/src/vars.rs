//! The environment variables chan-core reads, all read here. A backend crate reads its own in
//! its own module (chan-mpi's and chan-shmem's `vars.rs`); a launcher's variables (`OMPI_*`)
//! are read by the `launch-env` crate, never here.
//!
//! | variable | values | what it does |
//! |---|---|---|
//! | `AIAC_WAIT` | `spin`, `yield` (unset or empty: detect) | overrides the wait policy every backend detects ([`WaitPolicy::detect`]) |

use crate::transport::WaitPolicy;

/// Overrides the detected wait policy: `spin` or `yield` (unset or empty: detect).
pub const WAIT: &str = "AIAC_WAIT";

/// An environment variable holds a value its reader does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var}={value:?}: allowed values are {allowed}")]
pub struct EnvVarError {
    /// The variable.
    pub var: &'static str,
    /// What it holds.
    pub value: String,
    /// What it may hold.
    pub allowed: &'static str,
}

impl EnvVarError {
    /// A switch read from `var`: `1` is on; unset, empty or `0` off; anything else an error
    /// that lists `allowed` (the values, and what `1` does). The one parser of every crate's
    /// on/off variables.
    pub fn switch(var: &'static str, allowed: &'static str) -> Result<bool, EnvVarError> {
        match std::env::var_os(var) {
            None => Ok(false),
            Some(v) => match v.to_str().map(str::trim) {
                Some("" | "0") => Ok(false),
                Some("1") => Ok(true),
                _ => Err(EnvVarError {
                    var,
                    value: v.to_string_lossy().into_owned(),
                    allowed,
                }),
            },
        }
    }
}

/// [`WAIT`]: the policy it forces, or `None` when unset or empty (detect).
pub(crate) fn wait_override() -> Result<Option<WaitPolicy>, EnvVarError> {
    let bad = |value: String| EnvVarError {
        var: WAIT,
        value,
        allowed: "spin, yield (unset: detect)",
    };
    match std::env::var(WAIT).as_deref().map(str::trim) {
        Ok("spin") => Ok(Some(WaitPolicy::Spin)),
        Ok("yield") => Ok(Some(WaitPolicy::Yield)),
        Ok("") | Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(other) => Err(bad(other.to_string())),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(v.to_string_lossy().into_owned())),
    }
}
