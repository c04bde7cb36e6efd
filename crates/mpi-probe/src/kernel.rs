//! The kernel ([`Probe::run_kernel`]): the raw variants over `MPI_Isend`/`MPI_Irecv`, the
//! channel column over an aiac Sync channel, and the threshold's bisection (the crate's docs
//! describe each).

use crate::error::{channel, Error};
use crate::probe::Probe;
use crate::time::{compute_until, median, mono};
use chan_core::traits::*;
use chan_core::{ChannelConfig, ChannelSpec, Sync as SyncMode};
use std::time::{Duration, Instant};

/// The receiver of [`Kernel::Unexpected`] posts its receive this many C after the start.
const UNEXPECTED_SPAN: u32 = 4;

/// The kernel's message tag.
const TAG: i32 = 0;

/// How a message went: eagerly (its send can complete before the receive is posted) or by
/// rendezvous (its data waits for the receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Sent before its receive was posted, in at least one repetition.
    Eager,
    /// Never sent before its receive was posted.
    Rendezvous,
}

impl Protocol {
    /// The verdict of `early` repetitions whose send completed before the receive was posted:
    /// a rendezvous send never can, whatever the load (causality), so one is enough.
    pub fn of_early(early: usize) -> Self {
        match early {
            0 => Protocol::Rendezvous,
            _ => Protocol::Eager,
        }
    }

    /// "eager" or "rendezvous".
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Eager => "eager",
            Protocol::Rendezvous => "rendezvous",
        }
    }
}

/// One figure for each of the kernel's three receivers, in this order: nothing between the
/// post and the wait, one `MPI_Test`, an aiac channel.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PerReceiver<T> {
    /// The receiver does nothing between its post and its wait.
    pub plain: T,
    /// The receiver calls `MPI_Test` once, a quarter into its computation.
    pub test: T,
    /// The same kernel through an aiac Sync channel (`try_recv` at the test's point).
    pub channel: T,
}

impl<T: Copy> PerReceiver<T> {
    /// Plain, test, channel.
    pub fn values(&self) -> [T; 3] {
        [self.plain, self.test, self.channel]
    }

    /// Each figure mapped.
    pub fn map<U>(&self, f: impl Fn(T) -> U) -> PerReceiver<U> {
        PerReceiver {
            plain: f(self.plain),
            test: f(self.test),
            channel: f(self.channel),
        }
    }
}

/// One size's medians (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Row {
    /// The message, bytes.
    pub size: usize,
    /// The sender's `MPI_Isend` (plain kernel).
    pub isend: f64,
    /// The sender's `MPI_Wait` after its computation, per receiver.
    pub send_wait: PerReceiver<f64>,
    /// The receiver's time inside MPI after posting (test and wait), per receiver.
    pub recv_exposed: PerReceiver<f64>,
    /// The sender's wait when the receive is posted only after 4C (the protocol test).
    pub unexpected_wait: f64,
    /// Repetitions of the protocol test whose send completed before its receive was posted:
    /// none for a rendezvous message, whatever the load.
    pub early: usize,
    /// The receiver's wait while the sender computes without calling MPI.
    pub silent_wait: f64,
    /// The message alone, no computation: both wait at once.
    pub transfer: f64,
}

impl Row {
    /// The protocol test's verdict.
    pub fn protocol(&self) -> Protocol {
        Protocol::of_early(self.early)
    }

    /// The share of the transfer hidden behind the receiver's computation, per receiver:
    /// `1 - recv_exposed / transfer`, clamped to [0, 1] (0 when the transfer took no time).
    pub fn overlap(&self) -> PerReceiver<f64> {
        self.recv_exposed.map(|e| {
            if self.transfer <= 0.0 {
                0.0
            } else {
                (1.0 - e / self.transfer).clamp(0.0, 1.0)
            }
        })
    }
}

/// The eager/rendezvous threshold found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Threshold {
    /// The largest size that went eagerly, bytes (the largest measured when all did).
    pub last_eager: Option<usize>,
    /// The smallest size that went by rendezvous, bytes (the smallest measured when all did).
    pub first_rendezvous: Option<usize>,
}

/// The path chan-mpi gave the channel column's channel (`MpiCtx::node_ends` counts the
/// node-local ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelPath {
    /// MPI sends and receives (chan-mpi's two-sided path): `MPI_Send` up to 1 KiB,
    /// `MPI_Isend` above, into receives the peer pre-posted.
    TwoSided,
    /// A shared-memory window of the node: the send writes the peer's slot in place, no MPI
    /// message.
    NodeLocal,
}

impl ChannelPath {
    /// "two-sided" or "node-local window".
    pub fn label(self) -> &'static str {
        match self {
            ChannelPath::TwoSided => "two-sided",
            ChannelPath::NodeLocal => "node-local window",
        }
    }
}

/// What [`Probe::run_kernel`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelReport {
    /// One row per size, ascending.
    pub rows: Vec<Row>,
    /// The threshold, bisected between the largest eager and the smallest rendezvous size.
    pub threshold: Threshold,
    /// The path the channel column's channel took.
    pub channel: ChannelPath,
}

/// The raw variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Irecv posted first, nothing until the Wait.
    Plain,
    /// Irecv posted first, one MPI_Test a quarter into the receiver's computation.
    Test,
    /// The receive is posted after a computation of 4C, during which the receiver calls MPI
    /// every C/4 (`MPI_Iprobe` for a tag nobody sends). An eager message is delivered then,
    /// as an unexpected message, and the sender's request can complete; a rendezvous one
    /// cannot move before its receive is posted, and the sender waits about 3C.
    Unexpected,
    /// No computation: both wait at once.
    Transfer,
    /// The sender computes 2C without calling MPI, the receiver C, then Waits: a message
    /// the receiver can complete alone (eager, or pulled by the receiver) costs it a copy, one
    /// that needs the sender's progress costs it about C.
    SenderSilent,
}

impl Probe<'_> {
    /// The kernel for every size (ascending, as [`check_sizes`](crate::check_sizes) wants),
    /// then the threshold's bisection between the largest eager and the smallest rendezvous
    /// size, to 1/64 of it. Collective; the report at rank 0, `None` at rank 1.
    pub fn run_kernel(&mut self, sizes: &[usize]) -> Result<Option<KernelReport>, Error> {
        self.check(sizes)?;
        let mut rows = Vec::with_capacity(sizes.len());
        let mut path = ChannelPath::TwoSided;
        for &s in sizes {
            let (row, p) = self.measure(s)?;
            rows.push(row);
            path = p;
        }
        let threshold = self.threshold(sizes, &rows)?;
        Ok((self.rank() == 0).then_some(KernelReport {
            rows,
            threshold,
            channel: path,
        }))
    }

    /// Rank 0 decides where the threshold lies (it measured the sender's waits) and tells rank
    /// 1; both bisect.
    fn threshold(&mut self, sizes: &[usize], rows: &[Row]) -> Result<Threshold, Error> {
        let rendezvous = |r: &Row| r.protocol() == Protocol::Rendezvous;
        let (mut lo, mut hi) = (0u64, 0u64);
        if self.rank() == 0 {
            let first_rdv = rows.iter().position(rendezvous);
            let clean = first_rdv.is_some_and(|i| rows[i..].iter().all(rendezvous));
            if let (Some(i), true) = (first_rdv, clean) {
                hi = rows[i].size as u64;
                lo = if i > 0 { rows[i - 1].size as u64 } else { 0 };
            }
        }
        self.comm.bcast(&mut lo)?;
        self.comm.bcast(&mut hi)?;
        if hi == 0 {
            let eager = !rows.iter().any(rendezvous);
            return Ok(Threshold {
                last_eager: eager.then(|| sizes.last().copied()).flatten(),
                first_rendezvous: None,
            });
        }
        if lo == 0 {
            return Ok(Threshold {
                last_eager: None,
                first_rendezvous: Some(hi as usize),
            });
        }
        let (mut lo, mut hi) = (lo as usize, hi as usize);
        while hi - lo > (lo / 64).max(1) {
            let mid = lo + (hi - lo) / 2;
            if self.protocol(mid)?.0 == 0 {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(Threshold {
            last_eager: Some(lo),
            first_rendezvous: Some(hi),
        })
    }

    /// Every variant for one size (rank 0's row is complete; rank 1's holds nothing), and the
    /// path the channel took.
    fn measure(&mut self, size: usize) -> Result<(Row, ChannelPath), Error> {
        self.size_buffers(size);
        let plain = self.medians(|p| p.raw_once(Kernel::Plain))?;
        let test = self.medians(|p| p.raw_once(Kernel::Test))?;
        let (early, unexpected_wait) = self.protocol(size)?;
        let transfer = self.medians(|p| p.raw_once(Kernel::Transfer))?;
        let silent = self.medians(|p| p.raw_once(Kernel::SenderSilent))?;
        let (chan, path) = self.channel_medians()?;
        let row = Row {
            size,
            isend: plain[0],
            send_wait: PerReceiver {
                plain: plain[1],
                test: test[1],
                channel: chan[1],
            },
            recv_exposed: PerReceiver {
                plain: plain[2] + plain[3],
                test: test[2] + test[3],
                channel: chan[2] + chan[3],
            },
            unexpected_wait,
            early,
            silent_wait: silent[3],
            transfer: transfer[3],
        };
        Ok((row, path))
    }

    /// The protocol test ([`Kernel::Unexpected`]) for `size`, both ranks: how many
    /// repetitions saw the sender's request complete before the receiver posted its receive
    /// (a rendezvous message never can: its data waits for the receive), and the sender's
    /// median Wait (rank 0).
    pub(crate) fn protocol(&mut self, size: usize) -> Result<(usize, f64), Error> {
        self.size_buffers(size);
        self.raw_once(Kernel::Unexpected)?;
        let (mut events, mut waits) =
            (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [_, w] = self.raw_once(Kernel::Unexpected)?;
            events.push(self.event);
            waits.push(w);
        }
        let mut all = vec![0.0f64; 2 * self.reps];
        self.comm.gather_into(&events, &mut all)?;
        // A margin of a quarter of the computation: far above the clocks' offset error (half
        // a round trip), far below the gap of a timely eager repetition (about 3C).
        let margin = self.compute.as_secs_f64() / 4.0;
        let (done, posted) = all.split_at(self.reps);
        let mut early = done
            .iter()
            .zip(posted)
            .filter(|(d, p)| **d + self.offset < **p - margin)
            .count() as u64;
        self.comm.bcast(&mut early)?;
        Ok((early as usize, median(&mut waits)))
    }

    /// One repetition of a raw kernel on `self.buf` ([`Probe::size_buffers`]); this rank's two
    /// times (rank 0: Isend, Wait; rank 1: its intermediate call, Wait).
    pub(crate) fn raw_once(&mut self, k: Kernel) -> Result<[f64; 2], Error> {
        let c = if k == Kernel::Transfer {
            Duration::ZERO
        } else {
            self.compute
        };
        self.comm.barrier()?;
        let start = Instant::now();
        let (comm, event) = (&self.comm, &mut self.event);
        let buf = &mut self.buf[..];
        if comm.rank() == 0 {
            let silent = k == Kernel::SenderSilent;
            return self.requests.scope(comm, |s| {
                let mut req = s.isend(buf, TAG)?;
                let posted = start.elapsed().as_secs_f64();
                compute_until(start + if silent { 2 * c } else { c });
                let t = Instant::now();
                req.wait()?;
                let waited = t.elapsed().as_secs_f64();
                *event = mono();
                Ok([posted, waited])
            });
        }
        self.requests.scope(comm, |s| {
            // The protocol test posts its receive only after its computation.
            let (mut req, buf) = match k {
                Kernel::Unexpected => (None, Some(buf)),
                _ => (Some(s.irecv(buf, TAG)?), None),
            };
            let mut between = 0.0;
            if let (Kernel::Test, Some(r)) = (k, req.as_mut()) {
                compute_until(start + c / 2);
                let t = Instant::now();
                r.test()?;
                between = t.elapsed().as_secs_f64();
            }
            if k == Kernel::Unexpected {
                // A probe for a tag nobody sends, every C/4 until the receive is posted at
                // 4C: MPI progresses, nothing matches. The wide gap and the repeated calls
                // let an eager send complete early even when this rank is descheduled for a
                // while.
                for q in 1..UNEXPECTED_SPAN * 4 {
                    compute_until(start + c * q / 4);
                    comm.idle_call()?;
                }
            }
            compute_until(
                start
                    + match k {
                        Kernel::SenderSilent => c,
                        Kernel::Unexpected => c * UNEXPECTED_SPAN,
                        _ => 2 * c,
                    },
            );
            if let Some(buf) = buf {
                *event = mono();
                req = Some(s.irecv(buf, TAG)?);
            }
            let mut req = req.expect("posted first or after the computation");
            let t = Instant::now();
            req.wait()?;
            let waited = t.elapsed().as_secs_f64();
            Ok(if k == Kernel::Transfer {
                // From the barrier to the message's arrival.
                [0.0, start.elapsed().as_secs_f64()]
            } else {
                [between, waited]
            })
        })
    }

    /// The channel kernel's medians over an aiac Sync channel of the message's size, opened
    /// for them and closed after, and the path chan-mpi gave it.
    fn channel_medians(&mut self) -> Result<([f64; 4], ChannelPath), Error> {
        let peer = 1 - self.rank();
        let cfg = ChannelConfig::new(self.data.len(), 1).map_err(channel("the channel"))?;
        let spec = ChannelSpec::new(peer, 0, cfg).map_err(channel("the channel"))?;
        let node_ends = self.ctx.node_ends();
        let mut chans = self
            .ctx
            .open::<SyncMode>(&[spec])
            .map_err(channel("opening the channel"))?;
        let path = match self.ctx.node_ends() > node_ends {
            true => ChannelPath::NodeLocal,
            false => ChannelPath::TwoSided,
        };
        let mut ch = chans
            .pop()
            .ok_or_else(|| channel("opening the channel")("no channel"))?;
        let chan = self.medians(|p| p.channel_once(&mut ch));
        let closed = ch.close();
        let chan = chan?;
        closed.map_err(channel("closing the channel"))?;
        Ok((chan, path))
    }

    /// One repetition through the channel: rank 0 sends and polls `in_flight` until the send
    /// completed; rank 1 calls `try_recv` at the test's point and `recv` at the end.
    fn channel_once(
        &mut self,
        ch: &mut chan_core::Channel<chan_mpi::Mpi, SyncMode>,
    ) -> Result<[f64; 2], Error> {
        self.comm.barrier()?;
        let start = Instant::now();
        if self.rank() == 0 {
            ch.send(&self.data).map_err(channel("channel"))?;
            let posted = start.elapsed().as_secs_f64();
            compute_until(start + self.compute);
            let t = Instant::now();
            let mut spins = 0u32;
            while ch.in_flight().map_err(channel("channel"))? > 0 {
                ch.relax(spins);
                spins = spins.saturating_add(1);
            }
            Ok([posted, t.elapsed().as_secs_f64()])
        } else {
            compute_until(start + self.compute / 2);
            let t = Instant::now();
            let got = ch.try_recv().map_err(channel("channel"))?.is_some();
            let tested = t.elapsed().as_secs_f64();
            compute_until(start + 2 * self.compute);
            let t = Instant::now();
            if !got {
                ch.recv().map_err(channel("channel"))?;
            }
            Ok([tested, t.elapsed().as_secs_f64()])
        }
    }
}
