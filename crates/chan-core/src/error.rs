//! Errors, one enum per operation.

use crate::mode::ModeKind;
use thiserror::Error;

/// A [`crate::ChannelConfig`] or [`crate::ChannelSpec`] that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// Message length 0.
    #[error("message length must be at least 1 element, got 0")]
    ZeroLength,
    /// R = 0.
    #[error("max in flight (R) must be at least 1, got 0")]
    ZeroInFlight,
    /// R beyond the supported limit.
    #[error("max in flight (R) {requested} exceeds the limit {limit}")]
    TooManyInFlight {
        /// What was asked.
        requested: usize,
        /// The limit.
        limit: usize,
    },
    /// (R+1)·len·8 bytes do not fit in memory.
    #[error("a channel of {len} elements with R = {max_in_flight} does not fit in memory")]
    TooLarge {
        /// Message length.
        len: usize,
        /// R.
        max_in_flight: usize,
    },
    /// A user tag with the reserved bit.
    #[error("tag {0:#x} has the reserved bit 1<<31 set")]
    ReservedTag(u32),
}

/// A failure of the transport underneath (MPI error code, SHMEM failure, a peer that died).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommError {
    /// The peer closed or dropped its end, or its process/thread ended.
    #[error("peer rank {peer} has closed its end of the channel")]
    Disconnected {
        /// The peer's rank.
        peer: usize,
    },
    /// Another rank failed (a thread panicked, a process aborted); blocking calls return this
    /// instead of waiting for it forever.
    #[error("another rank failed; giving up: {0}")]
    WorldFailed(String),
    /// The backend's library reported an error.
    #[error("{backend} error in {call}: {message}")]
    Backend {
        /// `mpi`, `shmem`, `threads`.
        backend: &'static str,
        /// The library call.
        call: &'static str,
        /// The library's message or code.
        message: String,
    },
    /// A slice handed to a channel operation had the wrong length.
    #[error("message length {got} does not match the channel's length {expected}")]
    LengthMismatch {
        /// The channel's message length.
        expected: usize,
        /// The slice's length.
        got: usize,
    },
}

/// Which parameter two channel ends disagree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecField {
    /// Message length.
    Length,
    /// R.
    MaxInFlight,
    /// Sync / Async / Racy.
    Mode,
    /// The element type.
    Element,
}

impl std::fmt::Display for SpecField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpecField::Length => "message length",
            SpecField::MaxInFlight => "max in flight (R)",
            SpecField::Mode => "mode",
            SpecField::Element => "element type",
        })
    }
}

/// Channel (or reduction) creation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CreateError {
    /// The two ends of a channel disagree on a parameter.
    #[error("channel between rank {rank} and rank {peer} (tag {tag:#x}): {field} is {here} at rank {rank} but {there} at rank {peer}")]
    Mismatch {
        /// This rank.
        rank: usize,
        /// The peer.
        peer: usize,
        /// The channel's tag.
        tag: u32,
        /// What differs.
        field: SpecField,
        /// The value on this side.
        here: String,
        /// The value on the peer's side.
        there: String,
    },
    /// The peer finished the same collective creation without opening the matching end.
    #[error("rank {rank} opened a channel to rank {peer} (tag {tag:#x}) but rank {peer} opened none to rank {rank} with that tag")]
    Unmatched {
        /// This rank.
        rank: usize,
        /// The peer.
        peer: usize,
        /// The channel's tag.
        tag: u32,
    },
    /// A peer rank outside `0..size`, or this rank itself.
    #[error("rank {rank}: invalid peer {peer} for a world of {size} ranks")]
    BadPeer {
        /// This rank.
        rank: usize,
        /// The requested peer.
        peer: usize,
        /// World size.
        size: usize,
    },
    /// The same (peer, tag) twice in one set.
    #[error("rank {rank}: channel to rank {peer} with tag {tag:#x} requested twice")]
    Duplicate {
        /// This rank.
        rank: usize,
        /// The peer.
        peer: usize,
        /// The tag.
        tag: u32,
    },
    /// A pairwise creation ([`crate::Context::open_pair`]) whose peer did not make the
    /// matching call (same tag, naming this rank) within the timeout. Nothing of it is left:
    /// the same call may be made again.
    #[error("rank {rank}: rank {peer} did not open the pairwise channel with tag {tag:#x} to it within {timeout:?}")]
    PairTimeout {
        /// This rank.
        rank: usize,
        /// The peer that did not come.
        peer: usize,
        /// The channel's tag.
        tag: u32,
        /// How long this rank waited.
        timeout: std::time::Duration,
    },
    /// A pairwise channel's memory could not be set aside: the backend's pairwise pool
    /// (SHMEM: symmetric memory reserved at init) has no free piece large enough.
    #[error("rank {rank}: no room for the pairwise channel to rank {peer} (tag {tag:#x}): it needs {needed} bytes, the largest free piece of the {pool}-byte pairwise pool is {free} bytes{hint}")]
    PairPoolExhausted {
        /// This rank.
        rank: usize,
        /// The peer.
        peer: usize,
        /// The channel's tag.
        tag: u32,
        /// Bytes the end needs.
        needed: usize,
        /// The largest free piece.
        free: usize,
        /// The pool's size.
        pool: usize,
        /// How to make the pool larger.
        hint: &'static str,
    },
    /// Creation failed at another rank; collective creation fails everywhere.
    #[error("channel creation failed at rank {failed_rank}; see its message")]
    FailedElsewhere {
        /// The lowest rank that failed.
        failed_rank: usize,
    },
    /// The ranks of a collective window creation asked for different windows. Every rank
    /// gets the same error: rank 0's request and the first rank that differs.
    #[error("window creation: rank {rank} asked for {len} words of {word} per rank but rank {other_rank} asked for {other_len} words of {other_word}")]
    WindowMismatch {
        /// Rank 0.
        rank: usize,
        /// Words per rank it asked for.
        len: usize,
        /// Its word type.
        word: &'static str,
        /// The first rank that asked for something else.
        other_rank: usize,
        /// Words per rank that rank asked for.
        other_len: usize,
        /// Its word type.
        other_word: &'static str,
    },
    /// Every rank asked for a window of 0 words.
    #[error("window creation: a window holds at least 1 word per rank, got 0")]
    EmptyWindow,
    /// Invalid parameters.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The transport failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

impl CreateError {
    /// The mismatch error for a parameter seen as `here` on `rank`, `there` on `peer`.
    pub fn mismatch(
        rank: usize,
        peer: usize,
        tag: u32,
        field: SpecField,
        here: impl ToString,
        there: impl ToString,
    ) -> Self {
        CreateError::Mismatch {
            rank,
            peer,
            tag,
            field,
            here: here.to_string(),
            there: there.to_string(),
        }
    }

    /// Compare this end's parameters with the peer's; the first difference is the error.
    pub fn check_match(
        rank: usize,
        peer: usize,
        tag: u32,
        mine: (ModeKind, usize, usize),
        theirs: (ModeKind, usize, usize),
    ) -> Result<(), Self> {
        if mine.0 != theirs.0 {
            return Err(Self::mismatch(
                rank,
                peer,
                tag,
                SpecField::Mode,
                mine.0,
                theirs.0,
            ));
        }
        if mine.1 != theirs.1 {
            return Err(Self::mismatch(
                rank,
                peer,
                tag,
                SpecField::Length,
                mine.1,
                theirs.1,
            ));
        }
        if mine.2 != theirs.2 {
            return Err(Self::mismatch(
                rank,
                peer,
                tag,
                SpecField::MaxInFlight,
                mine.2,
                theirs.2,
            ));
        }
        Ok(())
    }
}

/// `try_send` did not send. Like crossbeam's `TrySendError::Full(T)`, it says why; the
/// caller's data was not touched and stays the caller's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TrySendError {
    /// No slot is free: all R are in flight, or one holds a staged message. Nothing was sent
    /// (counted as a skipped send).
    #[error("no send slot is free (all {0} in flight, or one holds a staged message)")]
    Full(usize),
    /// The transport failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// A blocking `send`, a `stage` or a `send_staged` failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// `send_staged` with no message staged.
    #[error("send_staged: no message is staged (stage one first)")]
    NothingStaged,
    /// A blocking send on a channel with R = 1 while its one slot holds a staged message: the
    /// send would wait forever.
    #[error("the channel's only send slot (R = 1) holds a staged message; start it with send_staged first")]
    SlotStaged,
    /// The transport failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// A receive failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecvError {
    /// The peer closed and every message it sent has been received.
    #[error("peer rank {peer} closed the channel and nothing is left to receive")]
    Closed {
        /// The peer.
        peer: usize,
    },
    /// The transport failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// A reduction failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReduceError {
    /// `start` while the previous reduction has not completed.
    #[error("a reduction is already in progress")]
    InProgress,
    /// `test`/`wait` with no reduction started.
    #[error("no reduction in progress")]
    NotStarted,
    /// The local contribution has the wrong length.
    #[error("reduction length is {expected}, got {got} values")]
    Length {
        /// The reduction's length.
        expected: usize,
        /// Given.
        got: usize,
    },
    /// The transport failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

impl From<RecvError> for CommError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Closed { peer } => CommError::Disconnected { peer },
            RecvError::Comm(c) => c,
        }
    }
}
