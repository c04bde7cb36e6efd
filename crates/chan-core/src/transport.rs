//! What a backend implements. The channel logic (newest-wins, in-order delivery, statistics)
//! is written once in [`crate::Channel`] on top of these primitives.
//!
//! A backend provides two transports: a **mailbox** (R slots per direction with end-to-end
//! acknowledgement; carries Sync and Async channels) and a **racy** transport (one receive
//! buffer written by the transport at any moment). Each handles one channel end; both
//! directions of a channel go through it.

use crate::atomic::AtomicF64Slice;
use crate::error::CommError;
use std::cell::Cell;
use std::time::Duration;

/// A message's header, carried with its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Per-direction sequence number: 1 for the first message, then 2, 3, …
    pub seq: u64,
    /// The sender's iteration stamp.
    pub stamp: u64,
}

/// A message that arrived in a mailbox slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Slot index, valid for [`MailboxTransport::data`] and [`MailboxTransport::release`].
    pub slot: usize,
    /// Its header.
    pub header: Header,
}

/// What a transport's close found, matched with the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseReport {
    /// Messages the peer sent in total (it told us when it closed).
    pub peer_sent: u64,
    /// Messages that had arrived (or arrived during close) but were never reported by a poll;
    /// the transport released or cancelled them.
    pub drained: u64,
}

/// What both transports do: the sending side, and the close.
///
/// Not `Send` by requirement: a transport whose library must be called from one thread (MPI
/// initialised for a single thread) is `!Send`, and so is every channel over it.
pub trait Transport {
    /// Progress outstanding sends; the number of this end's messages in flight: sent, and not
    /// yet taken delivery of by the peer's channel. Never more than R.
    fn in_flight(&mut self) -> Result<usize, CommError>;

    /// Progress outstanding sends; true when [`Transport::send_with`] may be called now (fewer
    /// than R in flight and a free send slot; always, where a send completes when it returns).
    fn can_send(&mut self) -> Result<bool, CommError>;

    /// Start one message: `fill` writes its `len()` elements into the send slot. Only called
    /// after [`Transport::can_send`] returned true; the caller's data is free on return.
    fn send_with<F: FnOnce(&mut [f64])>(
        &mut self,
        header: Header,
        fill: F,
    ) -> Result<(), CommError>;

    /// As [`Transport::send_with`], copying `data` (a transport may write it straight to the
    /// peer without a staging copy).
    fn send_from(&mut self, header: Header, data: &[f64]) -> Result<(), CommError> {
        self.send_with(header, |buf| buf.copy_from_slice(data))
    }

    /// Fill a message now and start it later with [`Transport::start_staged`]: `fill` writes
    /// its `len()` elements where the send will go from (a send slot, or a staging buffer).
    /// Called only after [`Transport::can_send`] returned true, or while a message is staged,
    /// which it then replaces. Until it starts, a staged message holds one of the R places:
    /// `can_send` is true only when another message fits beside it, so starting it never
    /// waits. It is not in flight. `begin_close` discards a message still staged.
    fn stage_with<F: FnOnce(&mut [f64])>(&mut self, fill: F) -> Result<(), CommError>;

    /// Start the staged message with `header`. Only while a message is staged; never waits.
    fn start_staged(&mut self, header: Header) -> Result<(), CommError>;

    /// True once the peer has begun closing (or dropped) its end: it receives nothing more.
    /// Messages this end sent before its own close are still accounted for by the peer's close
    /// (received or drained), so sending stays legal; only waiting for a slot becomes futile.
    /// A backend may answer from what its last `can_send` found (MPI does): the channel asks
    /// right after one.
    fn peer_closed(&mut self) -> bool;

    /// Called between polls by blocking operations: yield, back off, or progress the library.
    /// An implementation that does not go through [`WaitPolicy::relax`] calls
    /// [`IdleStreak::note_relax`].
    fn relax(&mut self, spins: u32) {
        IdleStreak::note_relax();
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// Called between polls by a wait that only this end's own progress can end (a receive
    /// on its channel, a wait for a slot or for its sends to complete): a transport whose
    /// library can block until then does (MPI under SimGrid's SMPI, where each poll costs
    /// simulated time and a run of the simulation's engine); by default [`Transport::relax`].
    fn await_own(&mut self, spins: u32) -> Result<(), CommError> {
        self.relax(spins);
        Ok(())
    }

    /// A failure elsewhere that makes waiting pointless (the world failed), if any.
    fn check_world(&self) -> Result<(), CommError> {
        Ok(())
    }

    /// First half of a close: tell the peer this end sent `sent` messages in all and will send
    /// no more. Never waits for the peer, so a rank can begin closing all its channels before
    /// it waits for any (see [`crate::close_all`]). Called at most once.
    fn begin_close(&mut self, sent: u64) -> Result<(), CommError>;

    /// Second half of a close, after [`Transport::begin_close`]: wait for the peer's
    /// announcement, complete every send, drain or cancel every receive. After it returns
    /// nothing is outstanding and `Drop` is harmless. Called at most once.
    fn finish_close(&mut self) -> Result<CloseReport, CommError>;
}

/// R slots per direction with acknowledgement: the transport of Sync and Async channels.
///
/// A message arrives into a receive slot; [`MailboxTransport::poll`] reports it once. It stops
/// counting as in flight for the sender once it is acknowledged, "received into the channel":
/// on arrival in a receive slot kept for it (MPI: a send landed in the receive its credit
/// guarantees; SHMEM: a put into a released slot) or at the latest when a poll reports it
/// (threads). The slot's data stays valid and unchanged until [`MailboxTransport::release`]. A
/// transport keeps at least R + 1 receive slots, one more than R, so a sender can have R in
/// flight while the channel holds the message it lent last; a poll reports at most R + 1 new
/// messages (MPI keeps R + 2, so that a sender R + 1 beyond the last acknowledgement still
/// finds a posted receive).
pub trait MailboxTransport: Transport {
    /// Progress receives; push every message that arrived since the last call onto `out`, in
    /// any order. Never allocates when `out` has capacity R + 1.
    fn poll(&mut self, out: &mut Vec<Arrival>) -> Result<(), CommError>;

    /// The data of a slot reported by `poll` and not yet released.
    fn data(&self, slot: usize) -> &[f64];

    /// Give back a slot reported by `poll`: it may receive again.
    fn release(&mut self, slot: usize) -> Result<(), CommError>;

    /// `Some(n)` once the peer has begun closing (or dropped) its end after sending `n`
    /// messages. A backend may answer from what its last `poll` found (MPI does): the
    /// channel asks right after one.
    fn peer_sent_total(&mut self) -> Option<u64>;
}

/// What a racy poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RacyPoll {
    /// Sends that completed into the view since the last poll.
    pub arrived: u64,
    /// The stamp of the newest of them (meaningful when `arrived > 0`).
    pub stamp: u64,
}

/// One receive buffer per direction that the transport writes whenever a send lands.
pub trait RacyTransport: Transport {
    /// Progress receives; what completed into the view since the last call.
    fn poll(&mut self) -> Result<RacyPoll, CommError>;

    /// The receive buffer, read through atomics.
    fn view(&self) -> &AtomicF64Slice;
}

/// A backend's channel transports, one per delivery. Implemented by a marker type (chan-threads'
/// `Threads`, chan-mpi's `Mpi`, chan-shmem's `Shmem`).
pub trait Backend: Sized + Send + 'static {
    /// Short name: `threads`, `mpi`, `shmem`.
    const NAME: &'static str;
    /// Carries Sync and Async channels.
    type Mailbox: MailboxTransport;
    /// Carries Racy channels.
    type Racy: RacyTransport;
}

/// How a launched backend's blocking loops wait between polls ([`Transport::relax`]), and
/// whether a poll that found nothing gives the core away ([`WaitPolicy::idle`]).
///
/// With at most one process per core, the peer a loop waits for is running, and the word or
/// request it waits for changes within nanoseconds of the peer's write: spinning sees it
/// soonest, and a `sched_yield` would add a system call to every wait ([`WaitPolicy::Spin`]).
/// With more processes on the node than cores (or more busy threads: ranks × each one's
/// threads), the peer may be descheduled, and a process that spins keeps it off the core for
/// the rest of its time slice ([`WaitPolicy::Yield`]): waits
/// back off (a few spins, then `sched_yield`, then short sleeps), and a poll that found nothing
/// yields, as Open MPI's progress engine does when its launcher found the node oversubscribed
/// (`mpi_yield_when_idle`). Measured on 2 cores, 8 processes: a SHMEM sync Jacobi solve took
/// 35 s spinning and 0.1 s yielding (docs/performance.md, "Oversubscribed").
///
/// The count is this job's; other jobs or threads may hold the cores it counted on. So under
/// `Spin` a receive that polls outside a blocking wait (an async or racy `recv` in the
/// caller's loop) gives the core away too, rarely: once per [`SPIN_IDLE_YIELD`] in a row that
/// found nothing ([`IdleStreak`]). Such a streak means the peer has not written for many of
/// the caller's iterations, and a `sched_yield` that finds no other task returns in under a
/// microsecond. Without it, two ranks of an async run that shared a core with a third program
/// exchanged R messages per time slice: 160 faces in 2 million steps (docs/performance.md,
/// "Oversubscribed"). A `Spin` blocking wait ([`WaitPolicy::relax`] between its polls) does not
/// yield: beside a program that never yields, each `sched_yield` hands it a whole time slice,
/// and a SHMEM sync run whose waits yielded now and then took up to 20 times as long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Busy-poll: one process per core.
    Spin,
    /// Back off and yield: more processes than cores on the node.
    Yield,
}

/// Spins of [`WaitPolicy::Yield`]'s `relax` before it starts yielding: a peer running on the
/// other core answers within them.
const YIELD_AFTER: u32 = 16;
/// `sched_yield`s before it starts sleeping: a peer that is runnable on this core gets it.
const SLEEP_AFTER: u32 = YIELD_AFTER + 64;
/// One sleep: long enough to leave the run queue, short against a time slice.
const NAP: Duration = Duration::from_micros(50);
/// [`WaitPolicy::Spin`]'s polls yield once per this many in a row that found nothing, outside
/// blocking waits ([`IdleStreak`]).
pub const SPIN_IDLE_YIELD: u32 = 64;

thread_local! {
    /// Relaxes of blocking waits on this thread so far ([`IdleStreak::note_relax`]).
    static RELAXES: Cell<u32> = const { Cell::new(0) };
}

/// What [`WaitPolicy::idle`] counts for one receiving end: its polls in a row that found
/// nothing, outside blocking waits. A blocking wait relaxes between its polls, on whichever of
/// the channels it waits on (a tree reduction relaxes on one and polls them all); any relax on
/// the thread since this end's last poll starts the count again, so under
/// [`WaitPolicy::Spin`] a blocking wait never yields.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdleStreak {
    polls: u32,
    relaxes: u32,
}

impl IdleStreak {
    /// A blocking wait relaxed between polls (called by [`WaitPolicy::relax`] and the default
    /// [`Transport::relax`]).
    #[inline]
    pub fn note_relax() {
        RELAXES.with(|r| r.set(r.get().wrapping_add(1)));
    }

    /// A poll found something new.
    #[inline]
    pub fn found(&mut self) {
        self.polls = 0;
    }

    /// A poll found nothing new: wait as `policy` says ([`WaitPolicy::idle`]).
    #[inline]
    pub fn empty(&mut self, policy: WaitPolicy) {
        let relaxes = RELAXES.with(Cell::get);
        if relaxes != self.relaxes {
            self.relaxes = relaxes;
            self.polls = 0;
        }
        policy.idle(self.polls);
        self.polls = self.polls.wrapping_add(1);
    }
}

pub use crate::vars::EnvVarError;

impl WaitPolicy {
    /// The policy of this process. [`vars::WAIT`](crate::vars::WAIT) (`AIAC_WAIT`) decides
    /// when set. Otherwise the launcher's verdict does, when it gave one (`launcher`: the
    /// backend reads it from its launcher's environment, e.g. Open MPI's `mpirun` and `oshrun`
    /// bind each process to its own core only when the node has a core for each, and a user's
    /// `OMPI_MCA_mpi_yield_when_idle` says what Open MPI's own progress loop does). Otherwise
    /// `Yield` when `local_threads`, the threads the job keeps busy on this node (its
    /// processes × the threads each runs: a hybrid rank's team counts whole), exceeds the CPUs
    /// this process may use ([`std::thread::available_parallelism`], which counts its affinity
    /// and cgroup quota); else `Spin`.
    pub fn detect(
        launcher: Option<bool>,
        local_threads: Option<usize>,
    ) -> Result<Self, EnvVarError> {
        if let Some(policy) = crate::vars::wait_override()? {
            return Ok(policy);
        }
        if let Some(y) = launcher {
            return Ok(if y {
                WaitPolicy::Yield
            } else {
                WaitPolicy::Spin
            });
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(match local_threads {
            Some(n) if n > cores => WaitPolicy::Yield,
            _ => WaitPolicy::Spin,
        })
    }

    /// Wait once between polls of a blocking operation; `spins` counts the polls so far.
    /// `Spin`: one `spin_loop` hint. `Yield`: a few spins, then `sched_yield`, then 50 µs naps.
    #[inline]
    pub fn relax(self, spins: u32) {
        IdleStreak::note_relax();
        self.relax_pause(spins).take();
    }

    /// What [`WaitPolicy::relax`] does after `spins` polls.
    #[inline]
    fn relax_pause(self, spins: u32) -> Pause {
        match self {
            WaitPolicy::Spin => Pause::Spin,
            WaitPolicy::Yield if spins < YIELD_AFTER => Pause::Spin,
            WaitPolicy::Yield if spins < SLEEP_AFTER => Pause::Yield,
            WaitPolicy::Yield => Pause::Nap,
        }
    }

    /// After a poll found nothing new; `streak` counts the polls in a row before this one that
    /// found nothing, outside blocking waits ([`IdleStreak`] keeps it). `Yield` gives the core
    /// to a process that may have something to do (Open MPI's `opal_progress` under
    /// `mpi_yield_when_idle`); `Spin` does so once per [`SPIN_IDLE_YIELD`] and otherwise
    /// returns at once.
    #[inline]
    pub fn idle(self, streak: u32) {
        self.idle_pause(streak).take();
    }

    /// What [`WaitPolicy::idle`] does after a streak of `streak` empty polls.
    #[inline]
    fn idle_pause(self, streak: u32) -> Pause {
        if self == WaitPolicy::Yield || streak % SPIN_IDLE_YIELD == SPIN_IDLE_YIELD - 1 {
            Pause::Yield
        } else {
            Pause::None
        }
    }
}

/// One wait between polls, as [`WaitPolicy`] schedules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    /// Return at once.
    None,
    /// One `spin_loop` hint.
    Spin,
    /// `sched_yield`.
    Yield,
    /// Sleep [`NAP`].
    Nap,
}

impl Pause {
    #[inline]
    fn take(self) {
        match self {
            Pause::None => {}
            Pause::Spin => std::hint::spin_loop(),
            Pause::Yield => std::thread::yield_now(),
            Pause::Nap => std::thread::sleep(NAP),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{IdleStreak, WaitPolicy};

    #[test]
    fn wait_policy_detection() {
        if std::env::var_os(crate::vars::WAIT).is_some() {
            return; // the override decides; nothing to detect
        }
        let detect = |l, n| WaitPolicy::detect(l, n).expect("no override set");
        // The launcher's verdict wins over the count.
        assert_eq!(detect(Some(true), Some(1)), WaitPolicy::Yield);
        assert_eq!(detect(Some(false), Some(usize::MAX)), WaitPolicy::Spin);
        // Otherwise more busy threads on the node than CPUs for this one yield.
        assert_eq!(detect(None, Some(usize::MAX)), WaitPolicy::Yield);
        assert_eq!(detect(None, Some(1)), WaitPolicy::Spin);
        assert_eq!(detect(None, None), WaitPolicy::Spin);
    }

    #[test]
    fn a_relax_starts_the_idle_streak_again() {
        let mut s = IdleStreak::default();
        for _ in 0..5 {
            s.empty(WaitPolicy::Spin);
        }
        assert_eq!(s.polls, 5);
        WaitPolicy::Spin.relax(0);
        s.empty(WaitPolicy::Spin);
        assert_eq!(s.polls, 1, "the relax started the count again");
        s.empty(WaitPolicy::Spin);
        assert_eq!(s.polls, 2);
        s.found();
        assert_eq!(s.polls, 0);
        // Another thread's relaxes are not this thread's waits.
        s.empty(WaitPolicy::Spin);
        std::thread::spawn(|| WaitPolicy::Spin.relax(0))
            .join()
            .unwrap();
        s.empty(WaitPolicy::Spin);
        assert_eq!(s.polls, 2);
    }

    #[test]
    fn the_wait_schedule() {
        use super::{Pause, SLEEP_AFTER, SPIN_IDLE_YIELD, YIELD_AFTER};
        let (spin, yld) = (WaitPolicy::Spin, WaitPolicy::Yield);
        // A blocking wait: Spin never gives the core away; Yield spins, yields, then naps.
        for spins in [0, YIELD_AFTER, SLEEP_AFTER, u32::MAX] {
            assert_eq!(spin.relax_pause(spins), Pause::Spin, "spins = {spins}");
        }
        assert_eq!(yld.relax_pause(0), Pause::Spin);
        assert_eq!(yld.relax_pause(YIELD_AFTER - 1), Pause::Spin);
        assert_eq!(yld.relax_pause(YIELD_AFTER), Pause::Yield);
        assert_eq!(yld.relax_pause(SLEEP_AFTER - 1), Pause::Yield);
        assert_eq!(yld.relax_pause(SLEEP_AFTER), Pause::Nap);
        assert_eq!(yld.relax_pause(u32::MAX), Pause::Nap);
        // An empty poll: Yield always yields; Spin once per SPIN_IDLE_YIELD in a row.
        let spin_yields = (0..4 * SPIN_IDLE_YIELD)
            .filter(|&s| spin.idle_pause(s) == Pause::Yield)
            .collect::<Vec<_>>();
        let every = SPIN_IDLE_YIELD;
        assert_eq!(
            spin_yields,
            [every - 1, 2 * every - 1, 3 * every - 1, 4 * every - 1]
        );
        assert!((0..4 * every).all(|s| yld.idle_pause(s) == Pause::Yield));
        assert_eq!(spin.idle_pause(u32::MAX), Pause::Yield); // u32::MAX ≡ 63 (mod 64)
                                                             // Taking each pause returns (a nap is 50 µs).
        for p in [Pause::None, Pause::Spin, Pause::Yield, Pause::Nap] {
            p.take();
        }
    }
}
