//! `aiac probe --experiment`: Saif and Parashar's other experiments, on the same two ranks,
//! clocks and causality as the kernel ([`super::measure`]).
//!
//! * **two-way**: both ranks `MPI_Isend` a message to each other. Timed part: each posts its
//!   `MPI_Irecv` first, then the `Isend`, computes C and `Wait`s the send, then the receive.
//!   Verdict part: each `Isend`s, computes 4C calling `MPI_Test` on its send every C/4, and
//!   posts its receive only then. A send that completed before the peer posted its receive
//!   went eagerly (a rendezvous send cannot: its data waits for the receive). Both ranks'
//!   sends completing with no receive posted is exactly what a blocking `MPI_Send` on both
//!   sides needs to return (each process blocked in `MPI_Send` only progresses, as the tests
//!   do): when either direction never completed so, the blocking exchange would deadlock. The
//!   bounded test loop stands in for the blocking send, so nothing hangs: once the deadline
//!   passed the receives are posted and every request completes.
//! * **cumulative**: rank 0 posts `--count` sends of one size at once, rank 1 posts their
//!   receives only after 4C (calling `MPI_Iprobe` every C/4 meanwhile); each message's
//!   verdict is the kernel's (completed before its receive was posted: eager). The same size
//!   sent alone is the reference: a message that goes eagerly alone and by rendezvous among
//!   others shows a limit on the bytes in flight, not only on the message.
//! * **waiting**: one message from rank 0 to rank 1, both computing C. Each side either
//!   waits after its computation (`after`), waits right after posting and then computes
//!   (`early`), or calls `MPI_Test` every C/4 inside its computation and waits after it
//!   (`tests`). The combinations ([`WAITING`]): both `after`; `early` or `tests` on one side,
//!   the other waiting after; `tests` on both. The time a side spends inside MPI (post, tests
//!   and waits: the computation is the same work whatever the strategy) is what the strategy
//!   costs it; overlap is `1 - that / transfer`, clamped to [0, 1].

use super::measure::{
    compute_until, median, mono, test, wait_all, wait_timed, Kernel, Probe, Region,
};
use super::report::{bytes, Lines};
use super::JobPath;
use crate::error::Error;
use crate::output::{write_atomically, Csv};
use crate::plots;
use std::path::Path;
use std::time::{Duration, Instant};

/// The verdict kernels' receives are posted this many C after the start, and the ranks call
/// MPI every C/4 until then (as [`Kernel::Unexpected`]).
const LATE: u32 = 4;

/// A two-way row: per rank, medians of the timed part and the verdict part's counts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TwoWayRow {
    pub(super) size: usize,
    /// Per rank: its `Isend`, its send's `Wait` after the computation, then its receive's.
    pub(super) isend: [f64; 2],
    pub(super) send_wait: [f64; 2],
    pub(super) recv_wait: [f64; 2],
    /// Repetitions whose send from rank `i` completed before the other rank posted its
    /// receive.
    pub(super) early: [usize; 2],
    /// Repetitions where both did (reported; the verdict does not need them together).
    pub(super) both_early: usize,
}

impl TwoWayRow {
    pub(super) fn protocol(&self, from: usize) -> &'static str {
        if self.early[from] > 0 {
            "eager"
        } else {
            "rendezvous"
        }
    }

    /// What `MPI_Send` on both ranks before their receives does: it returns when both sends
    /// can complete with no receive posted, that is when both go eagerly (each direction's
    /// verdict, so that a repetition in which a descheduled rank delayed one of them does not
    /// count against it).
    pub(super) fn blocking(&self) -> &'static str {
        if self.early[0] > 0 && self.early[1] > 0 {
            "completes"
        } else {
            "would deadlock"
        }
    }
}

/// A cumulative row: `count` messages of `size` posted at once.
#[derive(Debug, Clone, Default)]
pub(super) struct CumulativeRow {
    pub(super) size: usize,
    /// Repetitions in which the message sent alone completed before its receive was posted.
    pub(super) alone_early: usize,
    /// The same for each of the `count` messages sent together, in posting order.
    pub(super) early: Vec<usize>,
    /// The sender's `Waitall` after its test loop (median): alone, together.
    pub(super) wait: [f64; 2],
}

fn verdict(early: usize) -> &'static str {
    if early > 0 {
        "eager"
    } else {
        "rendezvous"
    }
}

impl CumulativeRow {
    pub(super) fn verdict(&self) -> &'static str {
        let alone = self.alone_early > 0;
        let together = self.early.iter().filter(|&&e| e > 0).count();
        match (alone, together == self.early.len(), together == 0) {
            (true, true, _) => "no cumulative effect (all eager)",
            (false, _, true) => "rendezvous alone and together",
            (true, false, _) => "cumulative: eager alone, not all eager together",
            (false, _, false) => "eager together, rendezvous alone (load?)",
        }
    }
}

/// Where a side places its waits ([`Probe::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    After,
    Early,
    Tests,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::After => "after",
            Strategy::Early => "early",
            Strategy::Tests => "tests",
        }
    }
}

/// The combinations measured: (sender, receiver).
pub(super) const WAITING: [(Strategy, Strategy); 6] = [
    (Strategy::After, Strategy::After),
    (Strategy::Early, Strategy::After),
    (Strategy::Tests, Strategy::After),
    (Strategy::After, Strategy::Early),
    (Strategy::After, Strategy::Tests),
    (Strategy::Tests, Strategy::Tests),
];

/// A waiting row: one size, every combination of [`WAITING`].
#[derive(Debug, Clone, Default)]
pub(super) struct WaitingRow {
    pub(super) size: usize,
    pub(super) transfer: f64,
    /// Per combination: the sender's and the receiver's post (medians).
    pub(super) post: Vec<[f64; 2]>,
    /// Per combination: the sender's and the receiver's time inside MPI, the post included
    /// (medians; each repetition's is at least its post, so the median is too).
    pub(super) mpi: Vec<[f64; 2]>,
}

impl WaitingRow {
    pub(super) fn overlap(&self, i: usize, side: usize) -> f64 {
        if self.transfer <= 0.0 {
            return 0.0;
        }
        (1.0 - self.mpi[i][side] / self.transfer).clamp(0.0, 1.0)
    }
}

impl Probe {
    /// Repetitions (of `reps` on both ranks) in which the time `done[i]` of rank `from` came
    /// before the other rank's `posted[i]` by more than the margin, with `all` as
    /// [`Probe::gather_into`] leaves it at rank 0 from each rank's `[done.., posted..]`.
    fn early_in(&self, all: &[f64], from: usize) -> Vec<bool> {
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

    /// The two-way experiment for every size (rank 0's rows are complete).
    pub(super) fn two_way(&mut self, sizes: &[usize]) -> Result<Vec<TwoWayRow>, String> {
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            // `bufs` is not touched again until every request completed: the requests hold
            // pointers into it, taken once (Region).
            let mut bufs = vec![0x5au8; 2 * size];
            let whole = Region::of(&mut bufs);
            let (send, recv) = (whole.part(0, 2), whole.part(1, 2));
            let c = self.compute;
            // Timed part: one warm-up, then the repetitions.
            let mut t = [Vec::new(), Vec::new(), Vec::new()];
            for rep in 0..=self.reps {
                self.barrier()?;
                let start = Instant::now();
                // SAFETY: `recv` follows the Region rule: `bufs` outlives the request, which
                // completes before the region is posted again.
                let mut rr = unsafe { self.post(false, recv, 0)? };
                let t0 = Instant::now();
                // SAFETY: the same for `send`.
                let mut sr = unsafe { self.post(true, send, 0)? };
                let isend = t0.elapsed().as_secs_f64();
                compute_until(start + c);
                let sw = wait_timed(&mut sr)?;
                let rw = wait_timed(&mut rr)?;
                if rep > 0 {
                    for (v, x) in t.iter_mut().zip([isend, sw, rw]) {
                        v.push(x);
                    }
                }
            }
            let mine: Vec<f64> = t.iter_mut().map(|v| median(v)).collect();
            let mut all = [0.0; 6];
            self.gather_into(&mine, &mut all)?;
            // Verdict part.
            let (mut done, mut posted) = (Vec::new(), Vec::new());
            for _ in 0..self.reps {
                self.barrier()?;
                let start = Instant::now();
                // SAFETY: `send` follows the Region rule; the Waitall below completes the
                // request.
                let mut sr = unsafe { self.post(true, send, 0)? };
                let mut when = f64::INFINITY;
                for q in 1..LATE * 4 {
                    compute_until(start + c * q / 4);
                    if when.is_infinite() {
                        if test(&mut sr)? {
                            when = mono();
                        }
                    } else {
                        self.idle_call()?;
                    }
                }
                compute_until(start + c * LATE);
                posted.push(mono());
                // SAFETY: the same for `recv`.
                let rr = unsafe { self.post(false, recv, 0)? };
                wait_all(&mut [sr, rr])?;
                done.push(when);
            }
            done.extend(posted);
            let mut times = vec![0.0; 4 * self.reps];
            self.gather_into(&done, &mut times)?;
            let mut row = TwoWayRow {
                size,
                isend: [all[0], all[3]],
                send_wait: [all[1], all[4]],
                recv_wait: [all[2], all[5]],
                ..Default::default()
            };
            if self.rank == 0 {
                let (a, b) = (self.early_in(&times, 0), self.early_in(&times, 1));
                row.early = [
                    a.iter().filter(|&&x| x).count(),
                    b.iter().filter(|&&x| x).count(),
                ];
                row.both_early = a.iter().zip(&b).filter(|(x, y)| **x && **y).count();
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// `k` messages of `size` from rank 0, their receives posted late: per message, the
    /// repetitions in which it completed before its receive was posted (rank 0), and the
    /// sender's median `Waitall` after its test loop.
    fn together(&mut self, size: usize, k: usize) -> Result<(Vec<usize>, f64), String> {
        // `bufs` is not touched again until every request completed: the requests hold
        // pointers into it, taken once (Region).
        let mut bufs = vec![0x5au8; k * size];
        let whole = Region::of(&mut bufs);
        let c = self.compute;
        let (mut mine, mut waits) = (Vec::new(), Vec::new());
        for rep in 0..=self.reps {
            self.barrier()?;
            let start = Instant::now();
            let mut reqs = Vec::with_capacity(k);
            if self.rank == 0 {
                for i in 0..k {
                    // SAFETY: part `i` follows the Region rule; the Waitall below completes
                    // every request.
                    reqs.push(unsafe { self.post(true, whole.part(i, k), 0)? });
                }
                let mut when = vec![f64::INFINITY; k];
                for q in 1..LATE * 4 {
                    compute_until(start + c * q / 4);
                    for (r, w) in reqs.iter_mut().zip(when.iter_mut()) {
                        if w.is_infinite() && test(r)? {
                            *w = mono();
                        }
                    }
                }
                let t = Instant::now();
                wait_all(&mut reqs)?;
                if rep > 0 {
                    waits.push(t.elapsed().as_secs_f64());
                    mine.extend(when);
                }
            } else {
                for q in 1..LATE * 4 {
                    compute_until(start + c * q / 4);
                    self.idle_call()?;
                }
                compute_until(start + c * LATE);
                let posted = mono();
                for i in 0..k {
                    // SAFETY: as for the sends.
                    reqs.push(unsafe { self.post(false, whole.part(i, k), 0)? });
                }
                wait_all(&mut reqs)?;
                if rep > 0 {
                    mine.extend(std::iter::repeat_n(posted, k));
                }
            }
        }
        let mut all = vec![0.0; 2 * mine.len()];
        self.gather_into(&mine, &mut all)?;
        let (done, posted) = all.split_at(mine.len());
        let margin = c.as_secs_f64() / 4.0;
        let mut early = vec![0; k];
        for (i, (d, p)) in done.iter().zip(posted).enumerate() {
            if *d + self.offset < *p - margin {
                early[i % k] += 1;
            }
        }
        let wait = if waits.is_empty() {
            0.0
        } else {
            median(&mut waits)
        };
        Ok((early, wait))
    }

    /// The cumulative experiment: every size alone, then `k` of it at once.
    pub(super) fn cumulative(
        &mut self,
        sizes: &[usize],
        k: usize,
    ) -> Result<Vec<CumulativeRow>, String> {
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let (alone, w1) = self.together(size, 1)?;
            let (early, wk) = self.together(size, k)?;
            rows.push(CumulativeRow {
                size,
                alone_early: alone[0],
                early,
                wait: [w1, wk],
            });
        }
        Ok(rows)
    }

    /// One repetition of the waiting experiment: this rank's post, and its time inside MPI
    /// (the post included).
    fn waiting_once(&mut self, r: Region, mine: Strategy) -> Result<[f64; 2], String> {
        let c = self.compute;
        self.barrier()?;
        let t0 = Instant::now();
        // SAFETY: `r` follows the Region rule (the caller's); the wait below completes the
        // request.
        let mut req = unsafe { self.post(self.rank == 0, r, 0)? };
        let post = t0.elapsed();
        let mut mpi = post;
        // The computation is the same work whatever the strategy: its deadlines move by the
        // time spent inside MPI.
        match mine {
            Strategy::Early => {
                mpi += Duration::from_secs_f64(wait_timed(&mut req)?);
                compute_until(t0 + mpi + c);
            }
            Strategy::After => compute_until(t0 + mpi + c),
            Strategy::Tests => {
                for q in 1..4 {
                    compute_until(t0 + mpi + c * q / 4);
                    let t = Instant::now();
                    test(&mut req)?;
                    mpi += t.elapsed();
                }
                compute_until(t0 + mpi + c);
            }
        }
        mpi += Duration::from_secs_f64(wait_timed(&mut req)?);
        Ok([post.as_secs_f64(), mpi.as_secs_f64()])
    }

    /// The waiting experiment for every size.
    pub(super) fn waiting(&mut self, sizes: &[usize]) -> Result<Vec<WaitingRow>, String> {
        let mut rows = Vec::with_capacity(sizes.len());
        for &size in sizes {
            self.size_buffers(size);
            let transfer = self.medians(|p| p.raw_once(size, Kernel::Transfer))?[3];
            // Not touched again until every request completed (the Region rule).
            let mut bufs = vec![0x5au8; size];
            let r = Region::of(&mut bufs);
            let (mut post, mut mpi) = (Vec::new(), Vec::new());
            for (s, rcv) in WAITING {
                let mine = if self.rank == 0 { s } else { rcv };
                let m = self.medians(|p| p.waiting_once(r, mine))?;
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
        Ok(rows)
    }
}

/// What rank 0 prints and writes for an experiment.
pub(super) struct ExperimentReport {
    pub(super) library: String,
    pub(super) path: JobPath,
    pub(super) compute: f64,
    pub(super) reps: usize,
    pub(super) result: Outcome,
}

/// An experiment's rows.
pub(super) enum Outcome {
    TwoWay(Vec<TwoWayRow>),
    Cumulative(usize, Vec<CumulativeRow>),
    Waiting(Vec<WaitingRow>),
}

fn us(s: f64) -> String {
    format!("{:.1}", s * 1e6)
}

impl ExperimentReport {
    fn name(&self) -> &'static str {
        match self.result {
            Outcome::TwoWay(_) => "two-way",
            Outcome::Cumulative(..) => "cumulative",
            Outcome::Waiting(_) => "waiting",
        }
    }

    pub(super) fn table(&self) -> String {
        use std::fmt::Write;
        let mut t = String::new();
        let c = self.compute * 1e3;
        let title = match self.result {
            Outcome::TwoWay(_) => "simultaneous two-way Isend / compute / Wait",
            Outcome::Cumulative(..) => "several messages in flight at once",
            Outcome::Waiting(_) => "where the waits go (sender and receiver)",
        };
        let _ = writeln!(t, "aiac probe --experiment {}: {title}", self.name());
        let _ = writeln!(t, "MPI: {}", self.library);
        let _ = writeln!(t, "path: {}", self.path.label);
        let _ = writeln!(
            t,
            "compute: {c:.2} ms; median of {} reps; times in µs",
            self.reps
        );
        let n = self.reps;
        match &self.result {
            Outcome::TwoWay(rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} | {:>7} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>6} {:>6} {:>10} {:>10} | MPI_Send both ways",
                    "size", "Isend0", "Isend1", "sWait0", "sWait1", "rWait0", "rWait1",
                    "early", "early", "0->1", "1->0"
                );
                for r in rows {
                    let _ = writeln!(
                        t,
                        "{:>6} | {:>7} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>6} {:>6} {:>10} {:>10} | {}",
                        bytes(r.size),
                        us(r.isend[0]),
                        us(r.isend[1]),
                        us(r.send_wait[0]),
                        us(r.send_wait[1]),
                        us(r.recv_wait[0]),
                        us(r.recv_wait[1]),
                        format!("{}/{n}", r.early[0]),
                        format!("{}/{n}", r.early[1]),
                        r.protocol(0),
                        r.protocol(1),
                        r.blocking(),
                    );
                }
                let _ = writeln!(
                    t,
                    "Isend, sWait, rWait: each rank's Isend, then its send's Wait and its \
                     receive's Wait after computing C, the receives posted first; early: \
                     repetitions whose send (from rank 0, from rank 1) completed before the \
                     other rank posted its receive, both sending first and computing 4C with \
                     an MPI_Test every C/4; MPI_Send both ways: a blocking send on both ranks \
                     before their receives returns only if both sends can complete so \
                     (\"would deadlock\": a direction's send never did; measured with the \
                     bounded test loop, not a real MPI_Send)"
                );
            }
            Outcome::Cumulative(k, rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} {:>8} | {:>6} {:>10} | {:<width$} | {:>9} {:>9} | verdict",
                    "size",
                    "in flight",
                    "alone",
                    "",
                    format!("{k} at once (early per message)"),
                    "sWait 1",
                    format!("sWait {k}"),
                    width = 6 * k + 10,
                );
                for r in rows {
                    let per: Vec<String> = r.early.iter().map(|e| format!("{e}/{n}")).collect();
                    let _ = writeln!(
                        t,
                        "{:>6} {:>8} | {:>6} {:>10} | {:<width$} | {:>9} {:>9} | {}",
                        bytes(r.size),
                        bytes(r.size * k),
                        format!("{}/{n}", r.alone_early),
                        verdict(r.alone_early),
                        per.join(" "),
                        us(r.wait[0]),
                        us(r.wait[1]),
                        r.verdict(),
                        width = 6 * k + 10,
                    );
                }
                let _ = writeln!(
                    t,
                    "alone: repetitions whose single send completed before its receive was \
                     posted (after 4C); {k} at once: the same for each of {k} sends posted \
                     together, in posting order; sWait: the sender's Waitall after its 4C of \
                     tests (rendezvous: about the wait for the receive)"
                );
            }
            Outcome::Waiting(rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} {:>8} | {:<17} | {:>9} {:>9} | {:>5} {:>5}",
                    "size", "transfer", "sender / receiver", "sMPI", "rMPI", "ovl s", "ovl r"
                );
                for r in rows {
                    for (i, (s, rc)) in WAITING.iter().enumerate() {
                        let _ = writeln!(
                            t,
                            "{:>6} {:>8} | {:<17} | {:>9} {:>9} | {:>4.0}% {:>4.0}%",
                            bytes(r.size),
                            us(r.transfer),
                            format!("{} / {}", s.name(), rc.name()),
                            us(r.mpi[i][0]),
                            us(r.mpi[i][1]),
                            r.overlap(i, 0) * 100.0,
                            r.overlap(i, 1) * 100.0,
                        );
                    }
                }
                let _ = writeln!(
                    t,
                    "after: Wait after the computation; early: Wait right after the post, then \
                     compute; tests: MPI_Test every C/4 inside the computation, Wait after; \
                     sMPI, rMPI: the sender's and the receiver's time inside MPI (post, tests, \
                     waits); ovl: 1 - that / transfer (the message alone, no computation)"
                );
            }
        }
        t
    }

    fn json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = match &self.result {
            Outcome::TwoWay(rows) => rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "size": r.size,
                        "isend_s": r.isend,
                        "send_wait_s": r.send_wait,
                        "recv_wait_s": r.recv_wait,
                        "early": r.early,
                        "both_early": r.both_early,
                        "protocol": [r.protocol(0), r.protocol(1)],
                        "blocking_exchange": r.blocking(),
                    })
                })
                .collect(),
            Outcome::Cumulative(k, rows) => rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "size": r.size,
                        "count": k,
                        "alone_early": r.alone_early,
                        "alone": verdict(r.alone_early),
                        "early": r.early,
                        "together": r.early.iter().map(|&e| verdict(e)).collect::<Vec<_>>(),
                        "send_wait_s": {"alone": r.wait[0], "together": r.wait[1]},
                        "verdict": r.verdict(),
                    })
                })
                .collect(),
            Outcome::Waiting(rows) => rows
                .iter()
                .map(|r| {
                    let cases: Vec<_> = WAITING
                        .iter()
                        .enumerate()
                        .map(|(i, (s, rc))| {
                            serde_json::json!({
                                "sender": s.name(),
                                "receiver": rc.name(),
                                "sender_post_s": r.post[i][0],
                                "receiver_post_s": r.post[i][1],
                                "sender_mpi_s": r.mpi[i][0],
                                "receiver_mpi_s": r.mpi[i][1],
                                "overlap": [r.overlap(i, 0), r.overlap(i, 1)],
                            })
                        })
                        .collect();
                    serde_json::json!({"size": r.size, "transfer_s": r.transfer, "cases": cases})
                })
                .collect(),
        };
        serde_json::json!({
            "schema": format!("aiac.probe.{}/1", self.name()),
            "experiment": self.name(),
            "mpi": self.library,
            "path": self.path.label,
            "configured_eager_limit": self.path.eager.as_ref().map(|(n, v)| serde_json::json!({"param": n, "bytes": v})),
            "compute_s": self.compute,
            "reps": self.reps,
            "rows": rows,
        })
    }

    fn csv(&self) -> Csv {
        let e = |v: f64| format!("{v:e}");
        match &self.result {
            Outcome::TwoWay(rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "isend0_s",
                    "isend1_s",
                    "send_wait0_s",
                    "send_wait1_s",
                    "recv_wait0_s",
                    "recv_wait1_s",
                    "early0",
                    "early1",
                    "blocking_exchange",
                ]);
                for r in rows {
                    csv.row([
                        r.size.to_string(),
                        e(r.isend[0]),
                        e(r.isend[1]),
                        e(r.send_wait[0]),
                        e(r.send_wait[1]),
                        e(r.recv_wait[0]),
                        e(r.recv_wait[1]),
                        r.early[0].to_string(),
                        r.early[1].to_string(),
                        r.blocking().to_string(),
                    ]);
                }
                csv
            }
            Outcome::Cumulative(k, rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "count",
                    "message",
                    "early",
                    "protocol",
                    "send_wait_s",
                ]);
                for r in rows {
                    csv.row([
                        r.size.to_string(),
                        "1".into(),
                        "0".into(),
                        r.alone_early.to_string(),
                        verdict(r.alone_early).into(),
                        e(r.wait[0]),
                    ]);
                    for (i, &x) in r.early.iter().enumerate() {
                        csv.row([
                            r.size.to_string(),
                            k.to_string(),
                            i.to_string(),
                            x.to_string(),
                            verdict(x).into(),
                            e(r.wait[1]),
                        ]);
                    }
                }
                csv
            }
            Outcome::Waiting(rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "sender",
                    "receiver",
                    "sender_post_s",
                    "receiver_post_s",
                    "sender_mpi_s",
                    "receiver_mpi_s",
                    "transfer_s",
                ]);
                for r in rows {
                    for (i, (s, rc)) in WAITING.iter().enumerate() {
                        csv.row([
                            r.size.to_string(),
                            s.name().into(),
                            rc.name().into(),
                            e(r.post[i][0]),
                            e(r.post[i][1]),
                            e(r.mpi[i][0]),
                            e(r.mpi[i][1]),
                            e(r.transfer),
                        ]);
                    }
                }
                csv
            }
        }
    }

    /// The plot's lines, when the experiment has one (the cumulative one is a verdict table).
    fn lines(&self) -> Option<Lines> {
        type Series = Vec<(String, Vec<f64>)>;
        let (sizes, series): (Vec<usize>, Series) = match &self.result {
            Outcome::TwoWay(rows) => (
                rows.iter().map(|r| r.size).collect(),
                vec![
                    (
                        "rank 0 send's Wait".into(),
                        rows.iter().map(|r| r.send_wait[0]).collect(),
                    ),
                    (
                        "rank 1 send's Wait".into(),
                        rows.iter().map(|r| r.send_wait[1]).collect(),
                    ),
                    (
                        "rank 0 receive's Wait".into(),
                        rows.iter().map(|r| r.recv_wait[0]).collect(),
                    ),
                    (
                        "rank 1 receive's Wait".into(),
                        rows.iter().map(|r| r.recv_wait[1]).collect(),
                    ),
                    (
                        "rank 0 Isend".into(),
                        rows.iter().map(|r| r.isend[0]).collect(),
                    ),
                ],
            ),
            Outcome::Cumulative(..) => return None,
            Outcome::Waiting(rows) => {
                let mut series: Series = WAITING
                    .iter()
                    .enumerate()
                    .map(|(i, (s, rc))| {
                        (
                            format!("{} / {}: slower side in MPI", s.name(), rc.name()),
                            rows.iter().map(|r| r.mpi[i][0].max(r.mpi[i][1])).collect(),
                        )
                    })
                    .collect();
                series.push((
                    "transfer (no compute)".into(),
                    rows.iter().map(|r| r.transfer).collect(),
                ));
                (rows.iter().map(|r| r.size).collect(), series)
            }
        };
        Some(Lines {
            title: format!(
                "aiac probe --experiment {}: {}",
                self.name(),
                self.path.label
            ),
            sizes,
            series,
            marks: Vec::new(),
        })
    }

    /// `DIR/<experiment>.json`, `.csv` and, with a plot, `.png` and `.svg`.
    pub(super) fn write(&self, dir: &Path) -> Result<(), Error> {
        let fail = |p: &Path, why: String| Error::Output {
            flag: "--out",
            path: p.to_path_buf(),
            why,
        };
        let json = dir.join(format!("{}.json", self.name()));
        let text =
            serde_json::to_string_pretty(&self.json()).map_err(|e| fail(&json, e.to_string()))?;
        write_atomically(&json, text.as_bytes()).map_err(|e| fail(&json, e.to_string()))?;
        let csv = dir.join(format!("{}.csv", self.name()));
        write_atomically(&csv, self.csv().as_bytes()).map_err(|e| fail(&csv, e.to_string()))?;
        let mut files = Vec::new();
        if let Some(lines) = self.lines() {
            let stem = dir.join(self.name());
            files = plots::save(&lines, &stem).map_err(|e| fail(&stem, e))?;
        }
        for f in files.iter().chain([&json, &csv]) {
            println!("wrote {}", f.display());
        }
        Ok(())
    }
}
