//! # mpi-probe: how an MPI library moves a non-blocking message
//!
//! The test kernel of Saif and Parashar ("Understanding the behavior and performance of
//! non-blocking communications in MPI", Euro-Par 2004) and their other experiments, on the two
//! ranks of an MPI job, over raw `MPI_Isend`/`MPI_Irecv` and beside an aiac channel. A
//! [`Probe`] measures and returns data (rows of medians, verdicts, the threshold), gathered at
//! rank 0; `aiac probe` prints and plots them.
//!
//! ## The kernel ([`Probe::run_kernel`])
//! For every message size, after a barrier, rank 0 `MPI_Isend`s and computes for C
//! ([`Settings::compute`]), rank 1 `MPI_Irecv`s and computes for 2C, then each `MPI_Wait`s.
//! The receiver is busy longer on purpose: a send still waiting for the receiver when the
//! sender's computation ends shows as a sender `Wait` of about C. The variants:
//!
//! * **plain**: nothing between the post and the `Wait`;
//! * **test**: the receiver calls `MPI_Test` once, a quarter into its computation (before the
//!   sender's computation ends);
//! * **channel**: the same kernel through an aiac Sync channel (R = 1) of the message size:
//!   `send` on rank 0, one `try_recv` on rank 1 at the test's point and `recv` at the end; the
//!   sender's `Wait` polls `in_flight` until its send completed. The channel takes the path
//!   chan-mpi gives it ([`ChannelPath`], reported): with `AIAC_MPI_REMOTE=1` set before MPI
//!   started, the two-sided path, where a message is a standard-mode send into a receive the
//!   peer pre-posted (`MPI_Send` up to 1 KiB of message, `MPI_Isend` above), so the channel
//!   meets MPI's eager limit as the raw kernels do; on one node chan-mpi would otherwise write
//!   the peer's slot of a shared window, with no MPI message to measure. The column shows
//!   what the channel's rule (every call progresses) gets from the one call a solver makes
//!   anyway;
//! * **unexpected** (the protocol test): the receive is posted only after a computation of
//!   4C, during which the receiver calls MPI every C/4 (`MPI_Iprobe` for a tag nobody sends).
//!   An eager message is delivered then as an unexpected message and the sender's request
//!   can complete; a rendezvous message cannot move before its receive is posted. A size
//!   whose send completed before the receive was posted in at least one repetition went
//!   eagerly; a rendezvous send never can, whatever the load (causality), so the verdict
//!   does not depend on medians. Both ranks' times are read on `CLOCK_MONOTONIC`, one clock
//!   per node; across nodes the offset is estimated by ping-pong (error: half a round trip,
//!   against a margin of C/4);
//! * **sender silent**: the sender computes 2C without calling MPI, the receiver C: does the
//!   receiver need the sender's progress to finish (TCP's rendezvous does; Open MPI's
//!   single-copy shared memory, where the receiver reads the sender's buffer, does not)?
//! * **transfer**: both wait at once, no computation: the time the message takes.
//!
//! Between the largest eager and the smallest rendezvous size measured, bisection finds the
//! threshold to 1/64 of it ([`Threshold`]).
//!
//! Overlap ([`Row::overlap`]) is the share of the transfer time hidden behind the receiver's
//! computation: `1 - (receiver's time inside MPI after posting) / transfer`, clamped to
//! [0, 1]. The time a `Test` spends moving data counts as exposed: on one node the receiver
//! copies a rendezvous message itself (Open MPI's single-copy `process_vm_readv`), inside
//! whichever call finds it.
//!
//! The other experiments ([`Probe::two_way`], [`Probe::cumulative`], [`Probe::waiting`]) are
//! described in `src/experiments.rs`.
//!
//! ## Requests held by types
//! Every non-blocking send and receive is posted in a [`request::Scope`], which borrows its
//! buffer for longer than the scope lasts and completes whatever is left active when it ends
//! (the module's docs, with the uses the borrow checker refuses): no `unsafe` at a post.
//!
//! ## Settings
//! [`Settings`] (the computation and the repetitions), the sizes ([`check_sizes`]) and the
//! cumulative experiment's count ([`check_count`]) are checked without MPI, so that a caller
//! can refuse its input before starting MPI; each error ([`SettingError`]) names the setting.

#![warn(missing_docs)]

mod comm;
mod error;
mod experiments;
mod kernel;
mod probe;
pub mod request;
mod settings;
mod time;

pub use comm::{library_version, Comm};
pub use error::{Error, SettingError, SizesError};
pub use experiments::{
    BlockingExchange, Cumulative, CumulativeRow, Strategy, TwoWayRow, WaitingRow, WAITING,
};
pub use kernel::{ChannelPath, KernelReport, PerReceiver, Protocol, Row, Threshold};
pub use probe::Probe;
pub use settings::{
    check_compute, check_count, check_reps, check_sizes, Settings, COMPUTE, COUNT, DEFAULT_COMPUTE,
    DEFAULT_COUNT, DEFAULT_REPS, MAX_SIZE, MAX_SIZES, REPS,
};
