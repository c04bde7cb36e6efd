//! The measuring side of `aiac probe`: one rank's kernels over raw MPI calls and an aiac
//! channel, their medians gathered at rank 0, and the threshold's bisection (the kernels
//! are described in the parent module's docs).

use chan_core::traits::*;
use chan_core::{ChannelConfig, ChannelSpec, Sync as SyncMode};
use chan_mpi::MpiCtx;
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

/// One size's medians (seconds), as the table shows them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Row {
    pub(super) size: usize,
    pub(super) isend: f64,
    pub(super) send_wait: [f64; 3],
    /// Receiver's time inside MPI after posting (test + wait), per variant.
    pub(super) recv_exposed: [f64; 3],
    /// Sender's Wait when the receive is posted only after the computation (the protocol
    /// test: see [`Kernel::Unexpected`]).
    pub(super) unexpected_wait: f64,
    /// Repetitions of [`Kernel::Unexpected`] whose send completed before its receive was
    /// posted: none for a rendezvous message, whatever the load.
    pub(super) early: usize,
    /// Receiver's Wait while the sender computes without MPI ([`Kernel::SenderSilent`]).
    pub(super) silent_wait: f64,
    pub(super) transfer: f64,
}

/// The receiver of [`Kernel::Unexpected`] posts its receive this many C after the start.
const UNEXPECTED_SPAN: u32 = 4;

/// The raw kernels (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
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

impl Row {
    pub(super) fn rendezvous(&self) -> bool {
        self.early == 0
    }

    pub(super) fn overlap(&self, v: usize) -> f64 {
        if self.transfer <= 0.0 {
            return 0.0;
        }
        (1.0 - self.recv_exposed[v] / self.transfer).clamp(0.0, 1.0)
    }
}

/// `MPI_Get_library_version`, first line.
pub(super) fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: MPI_Get_library_version may be called at any time, even after finalize; buf
    // has room for MPI_MAX_LIBRARY_VERSION_STRING (at most 8192 in Open MPI and MPICH).
    let rc = unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return "unknown".into();
    }
    buf.truncate(len.clamp(0, 8192) as usize);
    let s = String::from_utf8_lossy(&buf);
    let tidy = |l: &str| {
        l.trim_matches(char::from(0))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut v = tidy(s.lines().next().unwrap_or("unknown"));
    // MPICH names its device (ch4:ucx, ch3:nemesis) on a line of its own.
    if let Some(d) = s.lines().find(|l| l.starts_with("MPICH Device:")) {
        v = format!("{v}, {}", tidy(d));
    }
    v
}

/// A failed MPI call, with MPI's message.
pub(super) fn check(rc: c_int, call: &str) -> Result<(), String> {
    match rc {
        0 => Ok(()),
        _ => Err(format!("{call} failed: {}", chan_mpi::error_string(rc))),
    }
}

/// `n` (bytes of a message, values of a gather) as MPI's `int` count.
pub(super) fn count(n: usize, what: &str) -> Result<c_int, String> {
    chan_mpi::int_count(n).ok_or_else(|| format!("{n} {what} exceed MPI's int count"))
}

/// Spin until `deadline`: the kernel's computation (no MPI call inside).
pub(super) fn compute_until(deadline: Instant) {
    let mut x = 1.0f64;
    while Instant::now() < deadline {
        for _ in 0..64 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
    }
    std::hint::black_box(x);
}

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The measuring state of one rank.
pub(super) struct Probe {
    pub(super) comm: ffi::MPI_Comm,
    pub(super) rank: usize,
    pub(super) compute: Duration,
    pub(super) reps: usize,
    pub(super) buf: Vec<u8>,
    data: Vec<f64>,
    /// [`mono`] at the last repetition's event: the sender's completion (rank 0), the
    /// receiver's post (rank 1; [`Kernel::Unexpected`]).
    event: f64,
    /// Rank 1's clock minus rank 0's (rank 0 only), estimated by ping-pong.
    pub(super) offset: f64,
    /// The path the channel kernel's channel took, once it was opened.
    pub(super) channel_path: Option<ChannelPath>,
}

/// The path of chan-mpi's a channel end took (`MpiCtx::node_ends` counts the node-local ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChannelPath {
    /// MPI sends and receives (`chan_mpi`'s two-sided path): `MPI_Send` up to 1 KiB,
    /// `MPI_Isend` above, into receives the peer pre-posted.
    TwoSided,
    /// A shared-memory window of the node: the send writes the peer's slot in place, no MPI
    /// message.
    NodeLocal,
}

impl ChannelPath {
    pub(super) fn label(self) -> &'static str {
        match self {
            ChannelPath::TwoSided => "two-sided",
            ChannelPath::NodeLocal => "node-local window",
        }
    }
}

/// `CLOCK_MONOTONIC` in seconds: one clock for every process of a node (across nodes, the
/// probe estimates the offset).
pub(super) fn mono() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux, so the
    // call cannot fail (checked anyway: a zero time would only make every size "rendezvous").
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A request's buffer: `len` bytes at `ptr`, owned by the caller, which neither reads, writes
/// nor frees it, nor borrows it anew (a fresh `&mut` to the buffer would invalidate the
/// pointer MPI holds), until the request completed.
#[derive(Clone, Copy)]
pub(super) struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    /// All of `v`: the one pointer to it that every part is taken from.
    pub(super) fn of(v: &mut [u8]) -> Region {
        Region {
            ptr: v.as_mut_ptr(),
            len: v.len(),
        }
    }

    /// Part `i` of `n` equal parts, offset from this region's pointer, so that taking a part
    /// while MPI still uses another does not borrow the buffer again.
    pub(super) fn part(self, i: usize, n: usize) -> Region {
        assert!(i < n, "part {i} of {n}");
        let len = self.len / n;
        Region {
            // In bounds: (i + 1) * len <= self.len.
            ptr: self.ptr.wrapping_add(i * len),
            len,
        }
    }
}

/// `MPI_Test` on `req` (active or null): whether it completed.
pub(super) fn test(req: &mut ffi::MPI_Request) -> Result<bool, String> {
    let mut flag: c_int = 0;
    // SAFETY: req is an active request of this probe or null (MPI_Test returns at once); its
    // buffer follows the Region rule until it completes; the status is ignored.
    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, "MPI_Test")?;
    Ok(flag != 0)
}

/// `MPI_Waitall` on requests, each active or null.
pub(super) fn wait_all(reqs: &mut [ffi::MPI_Request]) -> Result<(), String> {
    let n = count(reqs.len(), "requests")?;
    // SAFETY: every entry is an active request of this probe or null; their buffers follow
    // the Region rule until they complete; statuses are ignored.
    let rc = unsafe { ffi::MPI_Waitall(n, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
    check(rc, "MPI_Waitall")
}

/// `MPI_Wait` on `req` (active or null: a request `MPI_Test` completed is null and returns at
/// once), timed.
pub(super) fn wait_timed(req: &mut ffi::MPI_Request) -> Result<f64, String> {
    let t = Instant::now();
    // SAFETY: as in `test`.
    let rc = unsafe { ffi::MPI_Wait(req, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, "MPI_Wait")?;
    Ok(t.elapsed().as_secs_f64())
}

/// The threshold found: (largest eager size, smallest rendezvous size) in bytes.
pub(super) type Threshold = (Option<usize>, Option<usize>);

impl Probe {
    pub(super) fn new(ctx: &mut MpiCtx, compute: f64, reps: usize) -> Result<Self, String> {
        // SAFETY: MPI is initialised (ctx lives); every rank dups the world communicator.
        let comm = unsafe { chan_mpi::dup_returning_errors(ffi::RSMPI_COMM_WORLD) }
            .map_err(|e| e.to_string())?;
        Ok(Probe {
            comm,
            rank: ctx.rank(),
            compute: Duration::from_secs_f64(compute),
            reps,
            buf: Vec::new(),
            data: Vec::new(),
            event: 0.0,
            offset: 0.0,
            channel_path: None,
        })
        .and_then(|mut p| {
            p.offset = p.clock_offset()?;
            Ok(p)
        })
    }

    /// Rank 1's clock minus rank 0's, from the ping-pong with the shortest round trip
    /// (Cristian's algorithm; error at most half that round trip). 0 on rank 1.
    fn clock_offset(&self) -> Result<f64, String> {
        let (mut best, mut offset) = (f64::INFINITY, 0.0);
        for _ in 0..32 {
            if self.rank == 0 {
                let t0 = mono();
                self.send_time(0.0)?;
                let t1 = self.recv_time()?;
                let t2 = mono();
                if t2 - t0 < best {
                    best = t2 - t0;
                    offset = t1 - 0.5 * (t0 + t2);
                }
            } else {
                self.recv_time()?;
                self.send_time(mono())?;
            }
        }
        Ok(offset)
    }

    /// Send one time stamp to the other rank (the clock exchange's messages, tag 2).
    fn send_time(&self, t: f64) -> Result<(), String> {
        let peer = if self.rank == 0 { 1 } else { 0 };
        // SAFETY: one double at &t; comm is valid; the peer is the other rank of the two.
        let rc = unsafe {
            ffi::MPI_Send(
                (&t as *const f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                peer,
                2,
                self.comm,
            )
        };
        check(rc, "MPI_Send")
    }

    /// Receive one time stamp from the other rank (tag 2).
    fn recv_time(&self) -> Result<f64, String> {
        let peer = if self.rank == 0 { 1 } else { 0 };
        let mut t = 0.0f64;
        // SAFETY: room for one double at &mut t; comm is valid; the peer is the other rank.
        let rc = unsafe {
            ffi::MPI_Recv(
                (&mut t as *mut f64).cast(),
                1,
                ffi::RSMPI_DOUBLE,
                peer,
                2,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Recv")?;
        Ok(t)
    }

    /// The protocol test ([`Kernel::Unexpected`]) for `size`, every rank: how many
    /// repetitions saw the sender's request complete before the receiver posted its receive
    /// (a rendezvous message never can: its data waits for the receive), and the sender's
    /// median Wait (rank 0).
    fn protocol(&mut self, size: usize) -> Result<(usize, f64), String> {
        self.size_buffers(size);
        self.raw_once(size, Kernel::Unexpected)?;
        let (mut events, mut waits) =
            (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [_, w] = self.raw_once(size, Kernel::Unexpected)?;
            events.push(self.event);
            waits.push(w);
        }
        let mut all = vec![0.0f64; 2 * self.reps];
        self.gather_into(&events, &mut all)?;
        // A margin of a quarter of the computation: far above the clocks' offset error (half
        // a round trip), far below the gap of a timely eager repetition (about 3C).
        let margin = self.compute.as_secs_f64() / 4.0;
        let (done, posted) = all.split_at(self.reps);
        let mut early = done
            .iter()
            .zip(posted)
            .filter(|(d, p)| **d + self.offset < **p - margin)
            .count() as u64;
        self.bcast(&mut early)?;
        Ok((early as usize, median(&mut waits)))
    }

    pub(super) fn barrier(&self) -> Result<(), String> {
        // SAFETY: comm is this probe's valid communicator.
        check(unsafe { ffi::MPI_Barrier(self.comm) }, "MPI_Barrier")
    }

    fn peer(&self) -> c_int {
        1 - self.rank as c_int
    }

    /// Post a send (`send`) or a receive of `r` with `tag` to or from the peer.
    ///
    /// # Safety
    /// `r` follows the [`Region`] rule until the request returned completes.
    pub(super) unsafe fn post(
        &self,
        send: bool,
        r: Region,
        tag: c_int,
    ) -> Result<ffi::MPI_Request, String> {
        let n = count(r.len, "bytes")?;
        // SAFETY: null request constant, overwritten by the post.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let buf = r.ptr.cast::<c_void>();
        let (peer, comm) = (self.peer(), self.comm);
        // SAFETY: r's `len` bytes stay valid and untouched until the request completes (the
        // caller's contract); comm is this probe's communicator, peer the other rank.
        let rc = unsafe {
            if send {
                ffi::MPI_Isend(buf, n, ffi::RSMPI_UINT8_T, peer, tag, comm, &mut req)
            } else {
                ffi::MPI_Irecv(buf, n, ffi::RSMPI_UINT8_T, peer, tag, comm, &mut req)
            }
        };
        check(rc, if send { "MPI_Isend" } else { "MPI_Irecv" })?;
        Ok(req)
    }

    /// An MPI call that matches nothing (a probe for tag 1, which nobody sends): progress
    /// only.
    pub(super) fn idle_call(&self) -> Result<(), String> {
        let mut flag: c_int = 0;
        // SAFETY: comm valid; flag is a local int; the status is ignored.
        let rc = unsafe {
            ffi::MPI_Iprobe(
                self.peer(),
                1,
                self.comm,
                &mut flag,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        check(rc, "MPI_Iprobe")
    }

    /// Rank 0's `v` to every rank.
    pub(super) fn bcast(&self, v: &mut u64) -> Result<(), String> {
        // SAFETY: one u64 at v on every rank; comm is valid.
        let rc = unsafe {
            ffi::MPI_Bcast(
                (v as *mut u64).cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                0,
                self.comm,
            )
        };
        check(rc, "MPI_Bcast")
    }

    /// Every rank's pair at rank 0.
    fn gather(&self, mine: [f64; 2]) -> Result<[f64; 4], String> {
        let mut all = [0.0f64; 4];
        self.gather_into(&mine, &mut all)?;
        Ok(all)
    }

    /// Every rank's `mine` (the same length on both ranks) into `all` at rank 0, rank by
    /// rank.
    pub(super) fn gather_into(&self, mine: &[f64], all: &mut [f64]) -> Result<(), String> {
        assert_eq!(all.len(), 2 * mine.len(), "room for both ranks' values");
        let n = count(mine.len(), "values (--reps)")?;
        // SAFETY: `n` doubles sent from every rank's `mine`; `all` holds `n` per rank of the
        // probe's 2 (asserted above); comm is this probe's valid communicator.
        let rc = unsafe {
            ffi::MPI_Gather(
                mine.as_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                all.as_mut_ptr().cast(),
                n,
                ffi::RSMPI_DOUBLE,
                0,
                self.comm,
            )
        };
        check(rc, "MPI_Gather")
    }

    /// One repetition of a raw kernel; this rank's two times (rank 0: Isend, Wait; rank 1:
    /// its intermediate call, Wait). The buffer is `self.buf` ([`Probe::size_buffers`]).
    pub(super) fn raw_once(&mut self, size: usize, k: Kernel) -> Result<[f64; 2], String> {
        assert_eq!(self.buf.len(), size, "size_buffers before raw_once");
        let c = if k == Kernel::Transfer {
            Duration::ZERO
        } else {
            self.compute
        };
        // `self.buf` is not touched while the request is active: it completes (wait_timed)
        // before this function returns.
        let buf = Region::of(&mut self.buf);
        self.barrier()?;
        let start = Instant::now();
        let silent = k == Kernel::SenderSilent;
        if self.rank == 0 {
            // SAFETY: `buf` follows the Region rule (above) until the wait completes the
            // request.
            let mut req = unsafe { self.post(true, buf, 0)? };
            let posted = start.elapsed().as_secs_f64();
            compute_until(start + if silent { 2 * c } else { c });
            let waited = wait_timed(&mut req)?;
            self.event = mono();
            return Ok([posted, waited]);
        }
        let mut req = if k == Kernel::Unexpected {
            // SAFETY: the null request constant (posted below, after the computation).
            unsafe { ffi::RSMPI_REQUEST_NULL }
        } else {
            // SAFETY: as for the send.
            unsafe { self.post(false, buf, 0)? }
        };
        let mut between = 0.0;
        if k == Kernel::Test {
            compute_until(start + c / 2);
            let t = Instant::now();
            test(&mut req)?;
            between = t.elapsed().as_secs_f64();
        }
        if k == Kernel::Unexpected {
            // A probe for a tag nobody sends, every C/4 until the receive is posted at 4C:
            // MPI progresses, nothing matches. The wide gap and the repeated calls let an
            // eager send complete early even when this rank is descheduled for a while.
            for q in 1..UNEXPECTED_SPAN * 4 {
                compute_until(start + c * q / 4);
                self.idle_call()?;
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
        if k == Kernel::Unexpected {
            self.event = mono();
            // SAFETY: as for the send.
            req = unsafe { self.post(false, buf, 0)? };
        }
        let waited = wait_timed(&mut req)?;
        Ok(if k == Kernel::Transfer {
            // From the barrier to the message's arrival.
            [0.0, start.elapsed().as_secs_f64()]
        } else {
            [between, waited]
        })
    }

    /// One repetition through an aiac Sync channel (see the module docs).
    fn channel_once(
        &mut self,
        ch: &mut chan_core::Channel<chan_mpi::Mpi, SyncMode>,
    ) -> Result<[f64; 2], String> {
        let e = |e: &dyn std::fmt::Display| format!("channel: {e}");
        self.barrier()?;
        let start = Instant::now();
        if self.rank == 0 {
            ch.send(&self.data).map_err(|x| e(&x))?;
            let posted = start.elapsed().as_secs_f64();
            compute_until(start + self.compute);
            let t = Instant::now();
            let mut spins = 0u32;
            while ch.in_flight().map_err(|x| e(&x))? > 0 {
                ch.relax(spins);
                spins = spins.saturating_add(1);
            }
            Ok([posted, t.elapsed().as_secs_f64()])
        } else {
            compute_until(start + self.compute / 2);
            let t = Instant::now();
            let got = ch.try_recv().map_err(|x| e(&x))?.is_some();
            let tested = t.elapsed().as_secs_f64();
            compute_until(start + 2 * self.compute);
            let t = Instant::now();
            if !got {
                ch.recv().map_err(|x| e(&x))?;
            }
            Ok([tested, t.elapsed().as_secs_f64()])
        }
    }

    /// Medians over the repetitions of `once`, gathered at rank 0: [rank 0's two, rank 1's
    /// two]. One warm-up repetition first.
    pub(super) fn medians(
        &mut self,
        mut once: impl FnMut(&mut Self) -> Result<[f64; 2], String>,
    ) -> Result<[f64; 4], String> {
        once(self)?;
        let (mut a, mut b) = (Vec::with_capacity(self.reps), Vec::with_capacity(self.reps));
        for _ in 0..self.reps {
            let [x, y] = once(self)?;
            a.push(x);
            b.push(y);
        }
        self.gather([median(&mut a), median(&mut b)])
    }

    pub(super) fn size_buffers(&mut self, size: usize) {
        self.buf.clear();
        self.buf.resize(size, 0x5a);
        self.data.clear();
        self.data.resize(size.div_ceil(8), 1.0);
    }

    /// The protocol test alone: did `size` go by rendezvous?
    fn classify(&mut self, size: usize) -> Result<bool, String> {
        Ok(self.protocol(size)?.0 == 0)
    }

    /// Every variant for one size (rank 0's row is complete; rank 1's holds nothing).
    fn measure(&mut self, ctx: &mut MpiCtx, size: usize) -> Result<Row, String> {
        self.size_buffers(size);
        let plain = self.medians(|p| p.raw_once(size, Kernel::Plain))?;
        let test = self.medians(|p| p.raw_once(size, Kernel::Test))?;
        let (early, unexpected_wait) = self.protocol(size)?;
        let transfer = self.medians(|p| p.raw_once(size, Kernel::Transfer))?;
        let silent = self.medians(|p| p.raw_once(size, Kernel::SenderSilent))?;
        let peer = 1 - self.rank;
        let cfg = ChannelConfig::new(self.data.len(), 1).map_err(|e| e.to_string())?;
        let spec = ChannelSpec::new(peer, 0, cfg).map_err(|e| e.to_string())?;
        let node_ends = ctx.node_ends();
        let mut chans = ctx
            .open::<SyncMode>(&[spec])
            .map_err(|e| format!("opening the channel: {e}"))?;
        self.channel_path = Some(if ctx.node_ends() > node_ends {
            ChannelPath::NodeLocal
        } else {
            ChannelPath::TwoSided
        });
        let mut ch = chans.pop().ok_or("opening the channel: no channel")?;
        let chan = self.medians(|p| p.channel_once(&mut ch));
        let closed = ch.close();
        let chan = chan?;
        closed.map_err(|e| format!("closing the channel: {e}"))?;
        Ok(Row {
            size,
            isend: plain[0],
            send_wait: [plain[1], test[1], chan[1]],
            unexpected_wait,
            early,
            silent_wait: silent[3],
            recv_exposed: [plain[2] + plain[3], test[2] + test[3], chan[2] + chan[3]],
            transfer: transfer[3],
        })
    }

    /// Every size, then bisection between the largest eager and the smallest rendezvous size.
    pub(super) fn run_all(
        &mut self,
        ctx: &mut MpiCtx,
        sizes: &[usize],
    ) -> Result<(Vec<Row>, Threshold), String> {
        let mut rows = Vec::with_capacity(sizes.len());
        for &s in sizes {
            rows.push(self.measure(ctx, s)?);
        }
        // Rank 0 decides (it measured the sender's waits) and tells rank 1.
        let (mut lo, mut hi) = (0u64, 0u64);
        if self.rank == 0 {
            let first_rdv = rows.iter().position(|r| r.rendezvous());
            let clean = first_rdv.is_some_and(|i| rows[i..].iter().all(|r| r.rendezvous()));
            if let (Some(i), true) = (first_rdv, clean) {
                hi = rows[i].size as u64;
                lo = if i > 0 { rows[i - 1].size as u64 } else { 0 };
            }
        }
        self.bcast(&mut lo)?;
        self.bcast(&mut hi)?;
        let threshold = if hi == 0 {
            let eager = rows.iter().all(|r| !r.rendezvous());
            (eager.then(|| sizes.last().copied()).flatten(), None)
        } else if lo == 0 {
            (None, Some(hi as usize))
        } else {
            let (mut lo, mut hi) = (lo as usize, hi as usize);
            while hi - lo > (lo / 64).max(1) {
                let mid = lo + (hi - lo) / 2;
                if self.classify(mid)? {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            (Some(lo), Some(hi))
        };
        self.free()?;
        Ok((rows, threshold))
    }

    /// Free the probe's communicator (once: the probe is not used after).
    pub(super) fn free(&mut self) -> Result<(), String> {
        // SAFETY: this probe's communicator, freed once: MPI_Comm_free sets it to
        // MPI_COMM_NULL, and the caller does not use the probe after.
        check(
            unsafe { ffi::MPI_Comm_free(&mut self.comm) },
            "MPI_Comm_free",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
