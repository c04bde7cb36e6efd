//! The probe's errors: a setting it cannot run with ([`SettingError`], checked before anything
//! is measured, and without MPI, so that a caller can check its input before it starts MPI),
//! and what can fail once it runs ([`Error`]).

use crate::settings::{COMPUTE, COUNT, MAX_SIZE, MAX_SIZES, REPS};
use std::os::raw::c_int;
use std::time::Duration;

/// A setting outside what the probe accepts; each variant names the setting and holds the value
/// given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// The sender's computation per repetition ([`Settings::compute`](crate::Settings)) outside
    /// [`COMPUTE`].
    #[error("compute {0:?}: must be from {min:?} to {max:?}", min = COMPUTE.start(), max = COMPUTE.end())]
    Compute(Duration),
    /// Repetitions per size and variant outside [`REPS`].
    #[error("reps {0}: must be between {min} and {max}", min = REPS.start(), max = REPS.end())]
    Reps(usize),
    /// Messages in flight at once (the cumulative experiment) outside [`COUNT`].
    #[error("count {0}: must be between {min} and {max}", min = COUNT.start(), max = COUNT.end())]
    Count(usize),
    /// The message sizes.
    #[error("sizes: {0}")]
    Sizes(SizesError),
}

/// What is wrong with a list of message sizes ([`check_sizes`](crate::check_sizes)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizesError {
    /// No size.
    #[error("no size given")]
    Empty,
    /// More sizes than [`MAX_SIZES`] (each is measured many times).
    #[error("{0} sizes; at most {MAX_SIZES}")]
    TooMany(usize),
    /// A size of 0 bytes or above [`MAX_SIZE`].
    #[error("{0} bytes is not between 1 byte and {MAX_SIZE} bytes")]
    OutOfRange(usize),
    /// Sizes not strictly ascending (the threshold's bisection runs between neighbours).
    #[error("{0} bytes after {1} bytes: the sizes must ascend, each once")]
    NotAscending(usize, usize),
}

impl From<SizesError> for SettingError {
    fn from(e: SizesError) -> Self {
        SettingError::Sizes(e)
    }
}

/// What can fail while the probe runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting the probe cannot run with.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// The job does not have exactly two ranks: the kernel is one sender and one receiver.
    #[error("the probe runs on exactly 2 ranks; this job has {0}")]
    Ranks(usize),
    /// An MPI call returned an error: the call, and MPI's message for it.
    #[error("{call} failed: {message}")]
    Mpi {
        /// The MPI function.
        call: &'static str,
        /// MPI's message (`MPI_Error_string`) and the code.
        message: String,
    },
    /// Duplicating the world's communicator for the probe.
    #[error("{0}")]
    Comm(#[from] chan_core::CommError),
    /// The channel column's aiac channel: the step (`opening the channel`, `channel`,
    /// `closing the channel`) and chan-core's message.
    #[error("{step}: {message}")]
    Channel {
        /// What the probe was doing with the channel.
        step: &'static str,
        /// chan-core's error, as text (its types differ per step).
        message: String,
    },
    /// A count beyond MPI's `int` (bytes of a message, values of a gather).
    #[error("{n} {what} exceed MPI's int count")]
    Count {
        /// The count.
        n: usize,
        /// What is counted.
        what: &'static str,
    },
}

/// A failed MPI call, with MPI's message.
pub(crate) fn check(rc: c_int, call: &'static str) -> Result<(), Error> {
    match rc {
        0 => Ok(()),
        _ => Err(Error::Mpi {
            call,
            message: chan_mpi::error_string(rc),
        }),
    }
}

/// `n` (bytes of a message, values of a gather) as MPI's `int` count.
pub(crate) fn count(n: usize, what: &'static str) -> Result<c_int, Error> {
    chan_mpi::int_count(n).ok_or(Error::Count { n, what })
}

/// The channel step's error, as text.
pub(crate) fn channel<E: std::fmt::Display>(step: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Channel {
        step,
        message: e.to_string(),
    }
}
