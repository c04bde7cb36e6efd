//! Saif and Parashar's other experiments, on the same two ranks, clocks and causality as the
//! kernel:
//!
//! * **two-way** ([`Probe::two_way`]): both ranks `MPI_Isend` a message to each other. Timed
//!   part: each posts its `MPI_Irecv` first, then the `Isend`, computes C and `Wait`s the
//!   send, then the receive. Verdict part: each `Isend`s, computes 4C calling `MPI_Test` on
//!   its send every C/4, and posts its receive only then. A send that completed before the
//!   peer posted its receive went eagerly (a rendezvous send cannot: its data waits for the
//!   receive). Both ranks' sends completing with no receive posted is exactly what a blocking
//!   `MPI_Send` on both sides needs to return (each process blocked in `MPI_Send` only
//!   progresses, as the tests do): when either direction never completed so, the blocking
//!   exchange would deadlock. The bounded test loop stands in for the blocking send, so
//!   nothing hangs: once the deadline passed the receives are posted and every request
//!   completes.
//! * **cumulative** ([`Probe::cumulative`]): rank 0 posts `count` sends of one size at once,
//!   rank 1 posts their receives only after 4C (calling `MPI_Iprobe` every C/4 meanwhile);
//!   each message's verdict is the kernel's (completed before its receive was posted: eager).
//!   The same size sent alone is the reference: a message that goes eagerly alone and by
//!   rendezvous among others shows a limit on the bytes in flight, not only on the message.
//! * **waiting** ([`Probe::waiting`]): one message from rank 0 to rank 1, both computing C.
//!   Each side either waits after its computation (`after`), waits right after posting and
//!   then computes (`early`), or calls `MPI_Test` every C/4 inside its computation and waits
//!   after it (`tests`). The combinations ([`WAITING`]): both `after`; `early` or `tests` on
//!   one side, the other waiting after; `tests` on both. The time a side spends inside MPI
//!   (post, tests and waits: the computation is the same work whatever the strategy) is what
//!   the strategy costs it; overlap is `1 - that / transfer`, clamped to [0, 1].

use crate::error::Error;
use crate::kernel::{Kernel, Protocol};
use crate::probe::Probe;
use crate::settings::{check_count, COUNT};
use crate::time::{compute_until, median, mono};
use std::time::Instant;

/// The verdict kernels' receives are posted this many C after the start, and the ranks call
/// MPI every C/4 until then (as the kernel's protocol test).
const LATE: u32 = 4;

/// The experiments' message tag.
const TAG: i32 = 0;

/// The most messages the cumulative experiment has in flight at once.
const MAX_COUNT: usize = *COUNT.end();

/// A two-way row: per rank, medians of the timed part and the verdict part's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TwoWayRow {
    /// The messages, bytes.
    pub size: usize,
    /// Per rank: its `Isend`.
    pub isend: [f64; 2],
    /// Per rank: its send's `Wait` after the computation.
    pub send_wait: [f64; 2],
    /// Per rank: its receive's `Wait`, after the send's.
    pub recv_wait: [f64; 2],
    /// Repetitions whose send from rank `i` completed before the other rank posted its
    /// receive.
    pub early: [usize; 2],
    /// Repetitions where both did (reported; the verdict does not need them together).
    pub both_early: usize,
}

/// What `MPI_Send` on both ranks before their receives does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockingExchange {
    /// Both sends can complete with no receive posted: both return.
    Completes,
    /// A direction's send never did: both would wait for the other's receive.
    WouldDeadlock,
}

impl BlockingExchange {
    /// "completes" or "would deadlock".
    pub fn as_str(self) -> &'static str {
        match self {
            BlockingExchange::Completes => "completes",
            BlockingExchange::WouldDeadlock => "would deadlock",
        }
    }
}

impl TwoWayRow {
    /// How the message from rank `from` went.
    pub fn protocol(&self, from: usize) -> Protocol {
        Protocol::of_early(self.early[from])
    }

    /// What `MPI_Send` on both ranks before their receives does: it returns when both sends
    /// can complete with no receive posted, that is when both go eagerly (each direction's
    /// verdict, so that a repetition in which a descheduled rank delayed one of them does not
    /// count against it).
    pub fn blocking(&self) -> BlockingExchange {
        if self.early[0] > 0 && self.early[1] > 0 {
            BlockingExchange::Completes
        } else {
            BlockingExchange::WouldDeadlock
        }
    }
}

/// A cumulative row: `count` messages of `size` posted at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CumulativeRow {
    /// Each message, bytes.
    pub size: usize,
    /// Repetitions in which the message sent alone completed before its receive was posted.
    pub alone_early: usize,
    /// The same for each of the `count` messages sent together, in posting order.
    pub early: Vec<usize>,
    /// The sender's `Waitall` after its test loop (median): alone, together.
    pub wait: [f64; 2],
}

/// The cumulative experiment's verdict on one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cumulative {
    /// Eager alone and every message eager together.
    None,
    /// Rendezvous alone and every message rendezvous together.
    RendezvousAlways,
    /// Eager alone, but not every message together: a limit on the bytes in flight.
    Cumulative,
    /// Rendezvous alone but eager together: the machine's load, not the protocol.
    Inconsistent,
}

impl Cumulative {
    /// As the report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cumulative::None => "no cumulative effect (all eager)",
            Cumulative::RendezvousAlways => "rendezvous alone and together",
            Cumulative::Cumulative => "cumulative: eager alone, not all eager together",
            Cumulative::Inconsistent => "eager together, rendezvous alone (load?)",
        }
    }
}

impl CumulativeRow {
    /// The message sent alone.
    pub fn alone(&self) -> Protocol {
        Protocol::of_early(self.alone_early)
    }

    /// Each message sent together.
    pub fn together(&self) -> impl Iterator<Item = Protocol> + '_ {
        self.early.iter().map(|&e| Protocol::of_early(e))
    }

    /// Alone against together.
    pub fn verdict(&self) -> Cumulative {
        let alone = self.alone_early > 0;
        let together = self.early.iter().filter(|&&e| e > 0).count();
        match (alone, together == self.early.len(), together == 0) {
            (true, true, _) => Cumulative::None,
            (false, _, true) => Cumulative::RendezvousAlways,
            (true, false, _) => Cumulative::Cumulative,
            (false, _, false) => Cumulative::Inconsistent,
        }
    }
}

/// Where a side places its waits ([`Probe::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Wait after the computation.
    After,
    /// Wait right after the post, then compute.
    Early,
    /// `MPI_Test` every C/4 inside the computation, wait after it.
    Tests,
}

impl Strategy {
    /// "after", "early" or "tests".
    pub fn name(self) -> &'static str {
        match self {
            Strategy::After => "after",
            Strategy::Early => "early",
            Strategy::Tests => "tests",
        }
    }
}

/// The combinations measured: (sender, receiver).
pub const WAITING: [(Strategy, Strategy); 6] = [
    (Strategy::After, Strategy::After),
    (Strategy::Early, Strategy::After),
    (Strategy::Tests, Strategy::After),
    (Strategy::After, Strategy::Early),
    (Strategy::After, Strategy::Tests),
    (Strategy::Tests, Strategy::Tests),
];

/// A waiting row: one size, every combination of [`WAITING`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WaitingRow {
    /// The message, bytes.
    pub size: usize,
    /// The message alone, no computation (the kernel's transfer).
    pub transfer: f64,
    /// Per combination: the sender's and the receiver's post (medians).
    pub post: Vec<[f64; 2]>,
    /// Per combination: the sender's and the receiver's time inside MPI, the post included
    /// (medians; each repetition's is at least its post, so the median is too).
    pub mpi: Vec<[f64; 2]>,
}

impl WaitingRow {
    /// Combination `i`'s overlap for `side` (0 sender, 1 receiver): `1 - mpi / transfer`,
    /// clamped to [0, 1].
    pub fn overlap(&self, i: usize, side: usize) -> f64 {
        if self.transfer <= 0.0 {
            return 0.0;
        }
        (1.0 - self.mpi[i][side] / self.transfer).clamp(0.0, 1.0)
    }
}

impl Probe<'_> {
    /// The two-way experiment for every size. Collective; the rows at rank 0.
    pub fn two_way(&mut self, sizes: &[usize]) -> Result<Option<Vec<TwoWayRow>>, Error> {
        self.check(sizes)?;
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            rows.push(self.two_way_size(size)?);
        }
        Ok((self.rank() == 0).then_some(rows))
    }

    fn two_way_size(&mut self, size: usize) -> Result<TwoWayRow, Error> {
        let mut bufs = vec![0x5au8; 2 * size];
        let c = self.compute;
        // Timed part: one warm-up, then the repetitions.
        let mut t = [
            Vec::with_capacity(self.reps),
            Vec::with_capacity(self.reps),
            Vec::with_capacity(self.reps),
        ];
        for rep in 0..=self.reps {
            self.comm.barrier()?;
            let start = Instant::now();
            let (send, recv) = bufs.split_at_mut(size);
            let times = self.requests.scope(&self.comm, |s| {
                let mut rr = s.irecv(recv, TAG)?;
                let t0 = Instant::now();
                let mut sr = s.isend(send, TAG)?;
                let isend = t0.elapsed().as_secs_f64();
                compute_until(start + c);
                let t1 = Instant::now();
                sr.wait()?;
                let sw = t1.elapsed().as_secs_f64();
                let t2 = Instant::now();
                rr.wait()?;
                Ok::<_, Error>([isend, sw, t2.elapsed().as_secs_f64()])
            })?;
            if rep > 0 {
                for (v, x) in t.iter_mut().zip(times) {
                    v.push(x);
                }
            }
        }
        let mine = t.map(|mut v| median(&mut v));
        let mut all = [0.0; 6];
        self.comm.gather_into(&mine, &mut all)?;
        // Verdict part.
        let (mut done, mut posted) = (
            Vec::with_capacity(2 * self.reps),
            Vec::with_capacity(self.reps),
        );
        for _ in 0..self.reps {
            self.comm.barrier()?;
            let start = Instant::now();
            let comm = &self.comm;
            let (send, recv) = bufs.split_at_mut(size);
            let (when, post) = self.requests.scope(comm, |s| {
                let mut sr = s.isend(send, TAG)?;
                let mut when = f64::INFINITY;
                for q in 1..LATE * 4 {
                    compute_until(start + c * q / 4);
                    if when.is_infinite() {
                        if sr.test()? {
                            when = mono();
                        }
                    } else {
                        comm.idle_call()?;
                    }
                }
                compute_until(start + c * LATE);
                let post = mono();
                let _rr = s.irecv(recv, TAG)?;
                s.wait_all()?;
                Ok::<_, Error>((when, post))
            })?;
            done.push(when);
            posted.push(post);
        }
        done.extend(posted);
        let mut times = vec![0.0; 4 * self.reps];
        self.comm.gather_into(&done, &mut times)?;
        let mut row = TwoWayRow {
            size,
            isend: [all[0], all[3]],
            send_wait: [all[1], all[4]],
            recv_wait: [all[2], all[5]],
            ..Default::default()
        };
        if self.rank() == 0 {
            let (a, b) = (self.early_in(&times, 0), self.early_in(&times, 1));
            row.early = [
                a.iter().filter(|&&x| x).count(),
                b.iter().filter(|&&x| x).count(),
            ];
            row.both_early = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
        }
        Ok(row)
    }

    /// The cumulative experiment: every size alone, then `count` of it at once (within
    /// [`COUNT`](crate::COUNT)). Collective; the rows at rank 0.
    pub fn cumulative(
        &mut self,
        sizes: &[usize],
        count: usize,
    ) -> Result<Option<Vec<CumulativeRow>>, Error> {
        self.check(sizes)?;
        check_count(count)?;
        self.requests.reserve(count);
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let (alone, w1) = self.together(size, 1)?;
            let (early, wk) = self.together(size, count)?;
            rows.push(CumulativeRow {
                size,
                alone_early: alone[0],
                early,
                wait: [w1, wk],
            });
        }
        Ok((self.rank() == 0).then_some(rows))
    }

    /// `k` messages of `size` from rank 0, their receives posted late: per message, the
    /// repetitions in which it completed before its receive was posted (rank 0), and the
    /// sender's median `Waitall` after its test loop.
    fn together(&mut self, size: usize, k: usize) -> Result<(Vec<usize>, f64), Error> {
        let mut bufs = vec![0x5au8; k * size];
        let c = self.compute;
        let (mut mine, mut waits) = (
            Vec::with_capacity(k * self.reps),
            Vec::with_capacity(self.reps),
        );
        let mut when = vec![f64::INFINITY; k];
        for rep in 0..=self.reps {
            self.comm.barrier()?;
            let start = Instant::now();
            let comm = &self.comm;
            if comm.rank() == 0 {
                when.fill(f64::INFINITY);
                let parts = bufs.chunks_exact(size);
                let wait = self.requests.scope(comm, |s| {
                    // At most `COUNT`'s end: an array, not an allocation per repetition.
                    let mut reqs: [Option<_>; MAX_COUNT] = std::array::from_fn(|_| None);
                    for (r, part) in reqs.iter_mut().zip(parts) {
                        *r = Some(s.isend(part, TAG)?);
                    }
                    for q in 1..LATE * 4 {
                        compute_until(start + c * q / 4);
                        for (r, w) in reqs.iter_mut().flatten().zip(when.iter_mut()) {
                            if w.is_infinite() && r.test()? {
                                *w = mono();
                            }
                        }
                    }
                    let t = Instant::now();
                    s.wait_all()?;
                    Ok::<_, Error>(t.elapsed().as_secs_f64())
                })?;
                if rep > 0 {
                    waits.push(wait);
                    mine.extend_from_slice(&when);
                }
            } else {
                for q in 1..LATE * 4 {
                    compute_until(start + c * q / 4);
                    comm.idle_call()?;
                }
                compute_until(start + c * LATE);
                let posted = mono();
                let parts = bufs.chunks_exact_mut(size);
                self.requests.scope(comm, |s| {
                    for part in parts {
                        let _r = s.irecv(part, TAG)?;
                    }
                    s.wait_all()
                })?;
                if rep > 0 {
                    mine.extend(std::iter::repeat_n(posted, k));
                }
            }
        }
        let mut all = vec![0.0; 2 * mine.len()];
        self.comm.gather_into(&mine, &mut all)?;
        let (done, posted) = all.split_at(mine.len());
        let margin = c.as_secs_f64() / 4.0;
        let mut early = vec![0; k];
        for (i, (d, p)) in done.iter().zip(posted).enumerate() {
            if *d + self.offset < *p - margin {
                early[i % k] += 1;
            }
        }
        Ok((early, median(&mut waits)))
    }

    /// The waiting experiment for every size. Collective; the rows at rank 0.
    pub fn waiting(&mut self, sizes: &[usize]) -> Result<Option<Vec<WaitingRow>>, Error> {
        self.check(sizes)?;
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            self.size_buffers(size);
            let transfer = self.medians(|p| p.raw_once(Kernel::Transfer))?[3];
            let (mut post, mut mpi) = (Vec::new(), Vec::new());
            for (s, rcv) in WAITING {
                let mine = if self.rank() == 0 { s } else { rcv };
                let m = self.medians(|p| p.waiting_once(mine))?;
                post.push([m[0], m[2]]);
                mpi.push([m[1], m[3]]);
            }
            rows.push(WaitingRow {
                size,
                transfer,
                post,
                mpi,
            });
        }
        Ok((self.rank() == 0).then_some(rows))
    }

    /// One repetition of the waiting experiment on `self.buf`: this rank's post, and its time
    /// inside MPI (the post included).
    fn waiting_once(&mut self, mine: Strategy) -> Result<[f64; 2], Error> {
        let c = self.compute;
        self.comm.barrier()?;
        let comm = &self.comm;
        let buf = &mut self.buf[..];
        self.requests.scope(comm, |s| {
            let t0 = Instant::now();
            let mut req = match comm.rank() {
                0 => s.isend(buf, TAG)?,
                _ => s.irecv(buf, TAG)?,
            };
            let post = t0.elapsed();
            let mut mpi = post;
            // The computation is the same work whatever the strategy: its deadlines move by
            // the time spent inside MPI.
            match mine {
                Strategy::Early => {
                    let t = Instant::now();
                    req.wait()?;
                    mpi += t.elapsed();
                    compute_until(t0 + mpi + c);
                }
                Strategy::After => compute_until(t0 + mpi + c),
                Strategy::Tests => {
                    for q in 1..4 {
                        compute_until(t0 + mpi + c * q / 4);
                        let t = Instant::now();
                        req.test()?;
                        mpi += t.elapsed();
                    }
                    compute_until(t0 + mpi + c);
                }
            }
            let t = Instant::now();
            req.wait()?;
            mpi += t.elapsed();
            Ok([post.as_secs_f64(), mpi.as_secs_f64()])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_early_counts() {
        let row = |alone_early, early: &[usize]| CumulativeRow {
            alone_early,
            early: early.to_vec(),
            ..Default::default()
        };
        assert_eq!(row(3, &[2, 1, 5]).verdict(), Cumulative::None);
        assert_eq!(row(0, &[0, 0]).verdict(), Cumulative::RendezvousAlways);
        assert_eq!(row(1, &[1, 0]).verdict(), Cumulative::Cumulative);
        assert_eq!(row(0, &[1, 0]).verdict(), Cumulative::Inconsistent);
        let two = |early| TwoWayRow {
            early,
            ..Default::default()
        };
        assert_eq!(two([1, 2]).blocking(), BlockingExchange::Completes);
        assert_eq!(two([0, 2]).blocking(), BlockingExchange::WouldDeadlock);
        assert_eq!(two([0, 2]).protocol(0), Protocol::Rendezvous);
        assert_eq!(two([0, 2]).protocol(1), Protocol::Eager);
    }
}
