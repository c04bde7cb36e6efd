//! [`Probe`]: one rank's measuring state, shared by the kernel and the experiments: the two
//! ranks' communicator, the clocks' offset, the buffers, and the medians gathered at rank 0.

use crate::comm::Comm;
use crate::error::Error;
use crate::request::Requests;
use crate::settings::{check_sizes, Settings};
use crate::time::{median, mono};
use chan_mpi::MpiCtx;
use std::time::Duration;

/// One rank's side of the probe: both ranks of a two-rank job make one with the same
/// settings, and call the same measurements with the same arguments (each is collective).
/// The results are gathered at rank 0, which returns them; rank 1 returns `None`.
///
/// ```no_run
/// use mpi_probe::{Probe, Settings};
/// use std::time::Duration;
///
/// let mut ctx = chan_mpi::MpiCtx::init().expect("MPI starts");
/// let settings = Settings::new(Duration::from_millis(2), 5).expect("within range");
/// let mut probe = Probe::new(&mut ctx, settings).expect("a job of 2 ranks");
/// if let Some(report) = probe.run_kernel(&[1024, 65536]).expect("measured") {
///     for row in &report.rows {
///         println!("{} B: {}", row.size, row.protocol().as_str());
///     }
/// }
/// drop(probe);
/// ctx.finalize().expect("nothing left open");
/// ```
pub struct Probe<'c> {
    /// The context (the kernel opens its channel column's channel on it).
    pub(crate) ctx: &'c mut MpiCtx,
    pub(crate) comm: Comm,
    pub(crate) compute: Duration,
    pub(crate) reps: usize,
    /// Room for the requests of a scope (one repetition's).
    pub(crate) requests: Requests,
    /// The raw kernels' message.
    pub(crate) buf: Vec<u8>,
    /// The channel kernel's message, in f64.
    pub(crate) data: Vec<f64>,
    /// [`mono`] at the last repetition's event: the sender's completion (rank 0), the
    /// receiver's post (rank 1; the protocol test).
    pub(crate) event: f64,
    /// Rank 1's clock minus rank 0's (rank 0 only), estimated by ping-pong.
    pub(crate) offset: f64,
}

impl std::fmt::Debug for Probe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("rank", &self.comm.rank())
            .field("compute", &self.compute)
            .field("reps", &self.reps)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl<'c> Probe<'c> {
    /// Collective: the two ranks' communicator, and the offset between their clocks. Fails on
    /// a job of other than 2 ranks ([`Error::Ranks`]).
    pub fn new(ctx: &'c mut MpiCtx, settings: Settings) -> Result<Self, Error> {
        let comm = Comm::pair(ctx)?;
        let mut p = Probe {
            ctx,
            comm,
            compute: settings.compute(),
            reps: settings.reps(),
            requests: Requests::new(2),
            buf: Vec::new(),
            data: Vec::new(),
            event: 0.0,
            offset: 0.0,
        };
        p.offset = p.clock_offset()?;
        Ok(p)
    }

    /// This rank: 0 (the kernel's sender, where results are gathered) or 1.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Rank 1's clock minus rank 0's as rank 0 estimated it (0 on rank 1): the ping-pong with
    /// the shortest round trip of 32 (Cristian's algorithm; error at most half that round
    /// trip). 0 on one node, where both read the same `CLOCK_MONOTONIC`, up to that error.
    pub fn clock_offset_estimate(&self) -> f64 {
        self.offset
    }

    fn clock_offset(&self) -> Result<f64, Error> {
        let (mut best, mut offset) = (f64::INFINITY, 0.0);
        for _ in 0..32 {
            if self.rank() == 0 {
                let t0 = mono();
                self.comm.send_time(0.0)?;
                let t1 = self.comm.recv_time()?;
                let t2 = mono();
                if t2 - t0 < best {
                    best = t2 - t0;
                    offset = t1 - 0.5 * (t0 + t2);
                }
            } else {
                self.comm.recv_time()?;
                self.comm.send_time(mono())?;
            }
        }
        Ok(offset)
    }

    /// The sizes, checked (the same on both ranks, so both refuse alike).
    pub(crate) fn check(&self, sizes: &[usize]) -> Result<(), Error> {
        Ok(check_sizes(sizes)?)
    }

    /// Medians over the repetitions of `once`, gathered at rank 0: [rank 0's two, rank 1's
    /// two]. One warm-up repetition first.
    pub(crate) fn medians(
        &mut self,
        mut once: impl FnMut(&mut Self) -> Result<[f64; 2], Error>,
    ) -> Result<[f64; 4], Error> {
        once(self)?;
        let (mut a, mut b) = (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [x, y] = once(self)?;
            a.push(x);
            b.push(y);
        }
        let mut all = [0.0f64; 4];
        self.comm
            .gather_into(&[median(&mut a), median(&mut b)], &mut all)?;
        Ok(all)
    }

    /// The raw kernels' message of `size` bytes, the channel kernel's of as many f64 as hold
    /// it.
    pub(crate) fn size_buffers(&mut self, size: usize) {
        self.buf.clear();
        self.buf.resize(size, 0x5a);
        self.data.clear();
        self.data.resize(size.div_ceil(8), 1.0);
    }

    /// Of `reps` repetitions on both ranks, which saw the time `done[i]` of rank `from` come
    /// before the other rank's `posted[i]` by more than a quarter of the computation, with
    /// `all` as [`Comm::gather_into`] leaves it at rank 0 from each rank's `[done..,
    /// posted..]`. The margin is far above the clocks' offset error (half a round trip), far
    /// below the gap of a timely eager repetition (about 3C).
    pub(crate) fn early_in(&self, all: &[f64], from: usize) -> Vec<bool> {
        let n = self.reps;
        let margin = self.compute.as_secs_f64() / 4.0;
        let (r0, r1) = all.split_at(2 * n);
        let (done, posted, shift) = if from == 0 {
            (&r0[..n], &r1[n..], self.offset)
        } else {
            (&r1[..n], &r0[n..], -self.offset)
        };
        done.iter()
            .zip(posted)
            .map(|(d, p)| *d + shift < *p - margin)
            .collect()
    }
}
