//! The MPI channel in each mode against raw MPI doing the same pattern between two ranks, for
//! 8 B, 20 KB (a 50×50 halo face) and 1 MB messages:
//!
//! - **pingpong**: rank 0 sends, rank 1 answers; one round trip per iteration (latency). Raw:
//!   each rank posts its `MPI_Irecv`, then `MPI_Isend`s and waits, as a C halo swap would.
//! - **stream**: rank 0 sends a stream to rank 1 with R = 4 in flight (bandwidth). Raw: a ring
//!   of 4 `MPI_Isend` requests at the sender, 4 `MPI_Irecv` kept posted at the receiver.
//! - **stream-r16**, **stream-r32**: the same with R = 16 and 32 (rings of 16 and 32 raw
//!   requests). A channel's sender stays within R + 1 messages of the receiver's
//!   acknowledgement, so it sends at most R + 1 messages per round trip; the raw ring is not
//!   flow controlled (its eager sends complete at once). With R = 4 that bound is above raw's
//!   time per 8 B message; from R = 16 it is well below, and these rows show the channel's own
//!   per-message cost.
//! - **exchange**: both ranks send at once and then receive, the halo swap of a synchronous
//!   Jacobi step. Raw: pack, `MPI_Irecv`, `MPI_Isend`, `MPI_Waitall`, unpack on both ranks.
//!
//! `cargo bench -p chan-mpi --bench mpi_channel` starts itself under `mpirun -np 2`. Criterion
//! runs on rank 0; before each sample rank 0 broadcasts (case, iterations) and rank 1 runs the
//! same case as its partner. The table at the end gives each mode's time over raw MPI's, from
//! batches of all four taken in turn (`benches/support/interleaved.rs`); set
//! `AIAC_BENCH_RATIOS_ONLY=1` to print only that table, and `AIAC_BENCH_ROUNDS` for more
//! batches than 15 per row. A last table times a Sync ping-pong of 20 KB carried as 2500
//! `f64`, 5000 `f32` and 1250 16-byte structs, against `f64` (`two_ranks::Typed`).

use chan_core::traits::*;
use chan_core::{close_all, Async, Channel, ChannelConfig, ChannelSpec, Racy, Sync};
use chan_mpi::{Mpi, MpiCtx};
use mpi::ffi;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

#[path = "../../../benches/support/interleaved.rs"]
mod interleaved;
#[path = "../../../benches/support/two_ranks.rs"]
mod two_ranks;

type Chans = two_ranks::Chans<Mpi>;

const LENS: [usize; 3] = [1, 2500, 131_072];
const STREAM_R: usize = 4;
/// R of the wider stream rows, after the R = 4 one (patterns 3 and 4).
const WIDE_R: [usize; 2] = [16, 32];
const CASES: two_ranks::Cases = two_ranks::Cases {
    prefix: "mpi",
    patterns: &["pingpong", "stream", "exchange", "stream-r16", "stream-r32"],
    lens: &LENS,
    impls: &["raw-mpi", "aiac-sync", "aiac-async", "aiac-racy"],
    one_way: &["stream", "stream-r16", "stream-r32"],
    title: "aiac MPI channel / raw MPI Isend+Irecv",
    batch: Duration::from_millis(20),
    rounds: 15,
};
const QUIT: u64 = u64::MAX;
/// Case numbers from here on are the element rows' (`two_ranks::Typed`).
const TYPED_BASE: u64 = 1 << 32;

/// Raw MPI baseline state: buffers and requests on MPI_COMM_WORLD.
struct Raw {
    send: Vec<Vec<f64>>,
    recv: Vec<Vec<f64>>,
    reqs: Vec<ffi::MPI_Request>,
}

fn world() -> ffi::MPI_Comm {
    // SAFETY: reading an immutable handle constant.
    unsafe { ffi::RSMPI_COMM_WORLD }
}

fn mpi_bytes() -> ffi::MPI_Datatype {
    // SAFETY: reading an immutable handle constant.
    unsafe { ffi::RSMPI_UINT8_T }
}

fn barrier() {
    // SAFETY: a collective on the world communicator, called by both ranks in step.
    unsafe { ffi::MPI_Barrier(world()) };
}

/// Raw ping-pong and exchange: what a C programmer writes for a halo swap (pack, Irecv,
/// Isend, wait, unpack). With `reply`, rank 1 waits for the message before sending its own
/// (ping-pong); without, both send at once (exchange).
fn raw_swap(raw: &mut Raw, rank: usize, face: &[f64], grid: &mut [f64], iters: u64, reply: bool) {
    let peer = (1 - rank) as c_int;
    let len = face.len();
    let n = (len * 8) as c_int;
    for _ in 0..iters {
        raw.send[0][..len].copy_from_slice(face);
        let (s, r) = (raw.send[0].as_ptr(), raw.recv[0].as_mut_ptr());
        let mut q = [null_req(), null_req()];
        // SAFETY: buffers hold len f64 and outlive the requests, which are completed by
        // MPI_Waitall before anything touches the buffers again.
        unsafe {
            ffi::MPI_Irecv(r.cast(), n, mpi_bytes(), peer, 7, world(), &mut q[0]);
            if reply && rank == 1 {
                ffi::MPI_Wait(&mut q[0], ffi::RSMPI_STATUS_IGNORE);
            }
            ffi::MPI_Isend(s.cast(), n, mpi_bytes(), peer, 7, world(), &mut q[1]);
            ffi::MPI_Waitall(2, q.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE);
        }
        grid.copy_from_slice(&raw.recv[0][..len]);
    }
}

/// Raw stream: a ring of `r` sends at rank 0 (each packed first), `r` receives kept posted at
/// rank 1 (each unpacked once it completed).
fn raw_stream(raw: &mut Raw, r: usize, rank: usize, face: &[f64], grid: &mut [f64], iters: u64) {
    let peer = (1 - rank) as c_int;
    let len = face.len();
    let n = (len * 8) as c_int;
    let unpack = |grid: &mut [f64], buf: &[f64]| grid.copy_from_slice(&buf[..len]);
    for i in 0..iters as usize {
        let k = i % r;
        let was_active = raw.reqs[k] != null_req();
        // SAFETY: slot k's buffers are only touched after MPI_Wait completed its previous
        // request; they live in `raw` for the whole run.
        unsafe { ffi::MPI_Wait(&mut raw.reqs[k], ffi::RSMPI_STATUS_IGNORE) };
        if rank == 0 {
            raw.send[k][..len].copy_from_slice(face);
            let buf = raw.send[k].as_ptr().cast();
            // SAFETY: as above; the buffer is not written until this request completed.
            unsafe { ffi::MPI_Isend(buf, n, mpi_bytes(), peer, 8, world(), &mut raw.reqs[k]) };
        } else {
            if was_active {
                unpack(grid, &raw.recv[k]);
            }
            let buf = raw.recv[k].as_mut_ptr().cast();
            // SAFETY: as above; the buffer is not read until this request completed.
            unsafe { ffi::MPI_Irecv(buf, n, mpi_bytes(), peer, 8, world(), &mut raw.reqs[k]) };
        }
    }
    // SAFETY: completes every request this stream started.
    unsafe {
        ffi::MPI_Waitall(
            r as c_int,
            raw.reqs.as_mut_ptr(),
            ffi::RSMPI_STATUSES_IGNORE,
        )
    };
    if rank == 1 {
        for k in 0..r.min(iters as usize) {
            unpack(grid, &raw.recv[k]);
        }
    }
}

fn null_req() -> ffi::MPI_Request {
    // SAFETY: reading an immutable handle constant.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// Ping-pong over a channel, in the raw loop's order: rank 1 stages (packs) its reply before
/// the message arrives, as the raw loop packs before `MPI_Wait`, starts it as soon as the
/// message has arrived, and takes (unpacks) the message after; rank 0 sends, waits and takes.
fn pingpong_chan<M: Mode>(
    ch: &mut Channel<Mpi, M>,
    rank: usize,
    data: &[f64],
    iters: u64,
    mut arrived: impl FnMut(&mut Channel<Mpi, M>) -> bool,
    mut take: impl FnMut(&mut Channel<Mpi, M>),
) {
    for _ in 0..iters {
        if rank == 0 {
            ch.send(data).unwrap();
            while !arrived(ch) {}
            take(ch);
        } else {
            ch.stage(data).unwrap();
            while !arrived(ch) {}
            ch.send_staged().unwrap();
            take(ch);
        }
    }
}

/// The `arrived` test of an async or racy ping-pong: true once per message of the peer, by
/// the count of arrivals (`stats().received`), not by `can_recv`. Rank 1 answers before it
/// takes the message, so the peer's next message can land before the take (on the node-local
/// path it does, within tens of nanoseconds); newest wins, so that take consumes it too, and a
/// `can_recv` would then wait for a message that was already taken.
fn arrivals<M: Mode>(
    mut poll: impl FnMut(&mut Channel<Mpi, M>),
) -> impl FnMut(&mut Channel<Mpi, M>) -> bool {
    let mut counted = None;
    move |c| {
        // The count before this batch's first poll.
        let seen = counted.get_or_insert(c.stats().received);
        poll(c);
        let new = c.stats().received > *seen;
        *seen += u64::from(new);
        new
    }
}

/// Exchange over an async or racy channel: send, wait until the peer's message of this round
/// arrived, take the newest. Newest wins, so two of the peer's messages landing in one poll
/// supersede one another: the wait counts arrivals, not receives.
fn exchange_counted<M: Mode>(
    ch: &mut Channel<Mpi, M>,
    data: &[f64],
    iters: u64,
    mut poll: impl FnMut(&mut Channel<Mpi, M>),
    mut take: impl FnMut(&mut Channel<Mpi, M>),
) {
    let mut target = ch.stats().received;
    for _ in 0..iters {
        ch.send(data).unwrap();
        target += 1;
        while ch.stats().received < target {
            poll(ch);
        }
        take(ch);
    }
}

/// A stream's sending side (rank 0): `n` sends of `data`, each waiting for a slot.
fn send_all<M: chan_core::Mode>(c: &mut Channel<Mpi, M>, data: &[f64], n: u64) {
    for _ in 0..n {
        c.send(data).unwrap();
    }
}

/// Stream over a sync channel: rank 0 sends, rank 1 receives each message in order.
fn stream_sync(c: &mut Channel<Mpi, Sync>, rank: usize, data: &[f64], sink: &mut [f64], n: u64) {
    if rank == 0 {
        send_all(c, data, n);
    } else {
        for _ in 0..n {
            c.recv_into(sink).unwrap();
        }
    }
}

/// Stream over an async channel: rank 0 sends, rank 1 takes the newest until all arrived.
fn stream_async(c: &mut Channel<Mpi, Async>, rank: usize, data: &[f64], sink: &mut [f64], n: u64) {
    if rank == 0 {
        send_all(c, data, n);
        return;
    }
    let target = c.stats().received + n;
    while c.stats().received < target {
        if let Some(m) = c.recv().unwrap() {
            sink.copy_from_slice(&m);
        }
    }
}

/// Stream over a racy channel: rank 0 sends, rank 1 copies the view until all arrived.
fn stream_racy(c: &mut Channel<Mpi, Racy>, rank: usize, data: &[f64], sink: &mut [f64], n: u64) {
    if rank == 0 {
        send_all(c, data, n);
        return;
    }
    let target = c.stats().received + n;
    while c.stats().received < target {
        c.recv().unwrap().load_into(sink);
    }
}

/// The stream channels of one wider R: one per message length in each mode.
struct Wide {
    sync: Vec<Channel<Mpi, Sync>>,
    async_: Vec<Channel<Mpi, Async>>,
    racy: Vec<Channel<Mpi, Racy>>,
}

impl Wide {
    /// Open them with the peer rank, each a set of its own (as `Chans::open` with `set_each`),
    /// tags `tag0`.. by tens (after the 0..59 of `Chans`).
    fn open(ctx: &mut MpiCtx, r: usize, tag0: u32) -> Self {
        fn group<M: Mode>(ctx: &mut MpiCtx, r: usize, tag0: u32) -> Vec<Channel<Mpi, M>> {
            let peer = 1 - ctx.rank();
            (0..LENS.len())
                .map(|i| {
                    let cfg = ChannelConfig::new(LENS[i], r).unwrap();
                    let spec = ChannelSpec::new(peer, tag0 + i as u32, cfg).unwrap();
                    ctx.open::<M>(&[spec]).unwrap().remove(0)
                })
                .collect()
        }
        Wide {
            sync: group(ctx, r, tag0),
            async_: group(ctx, r, tag0 + 10),
            racy: group(ctx, r, tag0 + 20),
        }
    }

    fn close(self) {
        close_all(self.sync).unwrap();
        close_all(self.async_).unwrap();
        close_all(self.racy).unwrap();
    }
}

/// Run case `id` for `iters` iterations as rank `rank`; both ranks call it in step.
fn run(
    id: usize,
    iters: u64,
    rank: usize,
    chans: &mut Chans,
    wide: &mut [Wide],
    raw: &mut Raw,
) -> Duration {
    let (pattern, li, which) = CASES.split(id);
    let len = LENS[li];
    let data = vec![1.0; len];
    let mut sink = vec![0.0; len];
    barrier();
    let t = Instant::now();
    match (pattern, which) {
        (0, 0) => raw_swap(raw, rank, &data, &mut sink, iters, true),
        (0, 1) => pingpong_chan(
            &mut chans.pp_sync[li],
            rank,
            &data,
            iters,
            |c| c.can_recv().unwrap(),
            |c| {
                c.recv_into(&mut sink).unwrap();
            },
        ),
        (0, 2) => pingpong_chan(
            &mut chans.pp_async[li],
            rank,
            &data,
            iters,
            arrivals(|c: &mut Channel<Mpi, Async>| {
                c.can_recv().unwrap();
            }),
            |c| {
                // None when the message counted was superseded by a newer one (see arrivals).
                if let Some(m) = c.recv().unwrap() {
                    sink.copy_from_slice(&m);
                }
            },
        ),
        (0, _) => pingpong_chan(
            &mut chans.pp_racy[li],
            rank,
            &data,
            iters,
            arrivals(|c: &mut Channel<Mpi, Racy>| {
                c.can_recv().unwrap();
            }),
            |c| c.recv().unwrap().load_into(&mut sink),
        ),
        (1, 0) => raw_stream(raw, STREAM_R, rank, &data, &mut sink, iters),
        (1, 1) => stream_sync(&mut chans.st_sync[li], rank, &data, &mut sink, iters),
        (1, 2) => stream_async(&mut chans.st_async[li], rank, &data, &mut sink, iters),
        (1, _) => stream_racy(&mut chans.st_racy[li], rank, &data, &mut sink, iters),
        (3.., 0) => raw_stream(raw, WIDE_R[pattern - 3], rank, &data, &mut sink, iters),
        (3.., 1) => stream_sync(
            &mut wide[pattern - 3].sync[li],
            rank,
            &data,
            &mut sink,
            iters,
        ),
        (3.., 2) => stream_async(
            &mut wide[pattern - 3].async_[li],
            rank,
            &data,
            &mut sink,
            iters,
        ),
        (3.., _) => stream_racy(
            &mut wide[pattern - 3].racy[li],
            rank,
            &data,
            &mut sink,
            iters,
        ),
        (_, 0) => raw_swap(raw, rank, &data, &mut sink, iters, false),
        (_, 1) => {
            let c = &mut chans.pp_sync[li];
            for _ in 0..iters {
                c.send(&data).unwrap();
                c.recv_into(&mut sink).unwrap();
            }
        }
        (_, 2) => exchange_counted(
            &mut chans.pp_async[li],
            &data,
            iters,
            |c| {
                c.can_recv().unwrap();
            },
            |c| {
                if let Some(m) = c.recv().unwrap() {
                    sink.copy_from_slice(&m);
                }
            },
        ),
        (_, _) => exchange_counted(
            &mut chans.pp_racy[li],
            &data,
            iters,
            |c| {
                c.can_recv().unwrap();
            },
            |c| c.recv().unwrap().load_into(&mut sink),
        ),
    }
    barrier();
    t.elapsed()
}

fn bcast(cmd: &mut [u64; 2]) {
    // SAFETY: two u64 on the world communicator; both ranks call it in step.
    unsafe { ffi::MPI_Bcast(cmd.as_mut_ptr().cast(), 2, ffi::RSMPI_UINT64_T, 0, world()) };
}

fn main() -> std::process::ExitCode {
    if !two_ranks::launched() {
        return two_ranks::relaunch("mpirun");
    }
    let mut ctx = MpiCtx::init().expect("MPI starts");
    assert_eq!(ctx.size(), 2, "the MPI bench runs on exactly 2 ranks");
    let rank = ctx.rank();
    // One set per channel: a set shares one communicator, and a benchmark channel should not
    // sit behind idle set-mates in MPI's matching queues.
    let mut chans = Chans::open(&mut ctx, &LENS, STREAM_R, true);
    let mut wide: Vec<Wide> = (0..WIDE_R.len())
        .map(|w| Wide::open(&mut ctx, WIDE_R[w], 60 + 30 * w as u32))
        .collect();
    let maxlen = *LENS.iter().max().unwrap();
    let ring = WIDE_R.into_iter().fold(STREAM_R, usize::max);
    let mut raw = Raw {
        send: (0..ring).map(|_| vec![1.0; maxlen]).collect(),
        recv: (0..ring).map(|_| vec![0.0; maxlen]).collect(),
        reqs: vec![null_req(); ring],
    };
    let mut typed = two_ranks::Typed::open(&mut ctx, 200);
    let mut run_typed = |k: usize, iters: u64, rank: usize| {
        barrier();
        let t = Instant::now();
        typed.run(k, rank, iters);
        barrier();
        t.elapsed()
    };
    if rank == 0 {
        CASES.lead(|id, iters| {
            bcast(&mut [id as u64, iters]);
            run(id, iters, 0, &mut chans, &mut wide, &mut raw)
        });
        two_ranks::Typed::<Mpi>::lead(
            "aiac MPI Sync channel: an element type / the same bytes as f64",
            CASES.batch,
            CASES.rounds,
            |k, iters| {
                bcast(&mut [TYPED_BASE + k as u64, iters]);
                run_typed(k, iters, 0)
            },
        );
        bcast(&mut [QUIT, 0]);
    } else {
        loop {
            let mut cmd = [0u64; 2];
            bcast(&mut cmd);
            match cmd[0] {
                QUIT => break,
                k if k >= TYPED_BASE => {
                    run_typed((k - TYPED_BASE) as usize, cmd[1], 1);
                }
                id => {
                    run(id as usize, cmd[1], 1, &mut chans, &mut wide, &mut raw);
                }
            }
        }
    }
    typed.close();
    chans.close();
    wide.into_iter().for_each(Wide::close);
    ctx.finalize().expect("no request left at finalize");
    std::process::ExitCode::SUCCESS
}
