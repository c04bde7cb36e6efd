//! The SHMEM channel in each mode against raw OpenSHMEM doing the same pattern between two
//! PEs, written directly on `openshmem-sys` as a C programmer would (put, `shmem_fence`, flag
//! put, `shmem_uint64_wait_until`), for 8 B, 20 KB (a 50×50 halo face) and 1 MB messages:
//!
//! - **pingpong**: PE 0 sends, PE 1 answers; one round trip per iteration (latency). Raw: put
//!   the face into the peer's symmetric buffer, fence, put the iteration number into its flag,
//!   wait for the own flag, copy the buffer out.
//! - **stream**: PE 0 sends a stream to PE 1 with R = 4 in flight (bandwidth). Raw: a ring of 4
//!   slots with flags at the receiver and 4 ack words at the sender; the sender refills a slot
//!   once the receiver acknowledged it (copied out, then put the ack).
//!
//! `cargo bench -p chan-shmem --bench shmem_channel` starts itself under `oshrun -np 2`.
//! Criterion runs on PE 0; before each sample PE 0 broadcasts (case, iterations) and PE 1 runs
//! the same case as its partner. The table at the end gives each mode's time over raw SHMEM's,
//! from batches of all four taken in turn (`benches/support/interleaved.rs`); set
//! `AIAC_BENCH_RATIOS_ONLY=1` to print only that table, and `AIAC_BENCH_ROUNDS` for more
//! batches than 25 per row. A last table times a Sync ping-pong of 20 KB carried as 2500
//! `f64`, 5000 `f32` and 1250 16-byte structs, against `f64` (`two_ranks::Typed`).

use chan_core::traits::*;
use chan_core::{Channel, ReduceOp};
use chan_shmem::{Shmem, ShmemCtx};
use openshmem_sys as sys;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "../../../benches/support/interleaved.rs"]
mod interleaved;
#[path = "../../../benches/support/two_ranks.rs"]
mod two_ranks;

type Chans = two_ranks::Chans<Shmem>;

const LENS: [usize; 3] = [1, 2500, 131_072];
const STREAM_R: usize = 4;
const CASES: two_ranks::Cases = two_ranks::Cases {
    prefix: "shmem",
    patterns: &["pingpong", "stream"],
    lens: &LENS,
    impls: &["raw-shmem", "aiac-sync", "aiac-async", "aiac-racy"],
    one_way: &["stream"],
    title: "aiac SHMEM channel / raw put+fence+flag",
    batch: Duration::from_millis(60),
    rounds: 25,
};
const QUIT: f64 = -1.0;
/// Case numbers from here on are the element rows' (`two_ranks::Typed`).
const TYPED_BASE: usize = 1 << 20;
/// The raw slots have the channel's layout (a header word, then the payload, in a 64-byte
/// aligned slot), so that both copy with the same alignment: memcpy's speed depends on the
/// distance between source and target modulo 4 KiB, which otherwise differs between the two.
const HDR: usize = 1;

/// Raw SHMEM baseline state: symmetric buffers from `shmem_malloc`, and the running tick both
/// PEs advance alike (flags carry it, so they never need clearing).
struct Raw {
    /// STREAM_R receive slots of the largest message (slot 0 serves the ping-pong).
    slots: *mut f64,
    maxlen: usize,
    /// One flag per slot, written by the sender.
    flags: *mut u64,
    /// One ack per slot, written by the receiver into the sender's memory.
    acks: *mut u64,
    tick: u64,
    /// Wait with `shmem_uint64_wait_until` instead of spinning on the flag.
    wait_until: bool,
    /// Sender: the tick last put into each slot.
    slot_tick: [u64; STREAM_R],
}

impl Raw {
    /// Words per slot: header and payload, rounded up to a cache line.
    fn stride(&self) -> usize {
        (HDR + self.maxlen).div_ceil(8) * 8
    }

    fn new(maxlen: usize) -> Self {
        let stride = (HDR + maxlen).div_ceil(8) * 8;
        // SAFETY: collective allocations, same sizes and order on both PEs; zeroed below and
        // synchronised by the barrier before any put.
        let (slots, flags, acks) = unsafe {
            let s = sys::shmem_align(64, STREAM_R * stride * 8).cast::<f64>();
            let f = sys::shmem_malloc(STREAM_R * 8).cast::<u64>();
            let a = sys::shmem_malloc(STREAM_R * 8).cast::<u64>();
            assert!(
                !s.is_null() && !f.is_null() && !a.is_null(),
                "symmetric heap"
            );
            std::ptr::write_bytes(f, 0, STREAM_R);
            std::ptr::write_bytes(a, 0, STREAM_R);
            sys::shmem_barrier_all();
            (s, f, a)
        };
        Raw {
            slots,
            maxlen,
            flags,
            acks,
            tick: 0,
            wait_until: std::env::var_os("AIAC_BENCH_RAW_WAIT_UNTIL").is_some(),
            slot_tick: [0; STREAM_R],
        }
    }

    fn slot(&self, k: usize) -> *mut f64 {
        // SAFETY: k < STREAM_R slots of HDR + maxlen f64 each (stride rounded to 64 bytes).
        unsafe { self.slots.add(k * self.stride()) }
    }
}

/// Wait until a flag word holds `v`: by spinning on it, as the channel waits (so the ratio
/// measures the channel's own work), or with `shmem_uint64_wait_until` when
/// `AIAC_BENCH_RAW_WAIT_UNTIL` is set (OSHMEM progresses UCX on every test inside it).
fn wait_eq(flag: *mut u64, v: u64, wait_until: bool) {
    if wait_until {
        // SAFETY: a symmetric word the peer writes with puts; wait_until reads it as volatile.
        unsafe { sys::shmem_uint64_wait_until(flag, sys::cmp_eq(), v) }
    } else {
        // SAFETY: an aligned symmetric word that Rust only reads through this atomic; the
        // peer's puts store it whole.
        let a = unsafe { AtomicU64::from_ptr(flag) };
        // Acquire: the slot reads after this follow the flag (the sender fenced before it).
        while a.load(Ordering::Acquire) != v {
            std::hint::spin_loop();
        }
    }
}

/// Put `data` into the peer's slot `k`, fence, put `tick` into its flag `k`.
fn raw_put(raw: &Raw, k: usize, data: &[f64], tick: u64, peer: c_int) {
    // SAFETY: slot k and flag k are symmetric and the peer reads the slot only after seeing
    // the flag (fence between); data holds len ≤ maxlen f64.
    unsafe {
        sys::shmem_putmem(
            raw.slot(k).add(HDR).cast(),
            data.as_ptr().cast(),
            data.len() * 8,
            peer,
        );
        sys::shmem_fence();
        sys::shmem_uint64_p(raw.flags.add(k), tick, peer);
    }
}

/// Copy slot `k` out (after its flag was seen).
fn raw_read(raw: &Raw, k: usize, out: &mut [f64]) {
    // SAFETY: the flag for this slot was seen, so the data landed; the peer writes the slot
    // again only after this PE answers (ping-pong) or acks (stream).
    let src = unsafe { std::slice::from_raw_parts(raw.slot(k).add(HDR), out.len()) };
    out.copy_from_slice(src);
}

fn raw_pingpong(raw: &mut Raw, rank: usize, face: &[f64], sink: &mut [f64], iters: u64) {
    let peer = (1 - rank) as c_int;
    for _ in 0..iters {
        raw.tick += 1;
        let t = raw.tick;
        if rank == 0 {
            raw_put(raw, 0, face, t, peer);
            wait_eq(raw.flags, t, raw.wait_until);
            raw_read(raw, 0, sink);
        } else {
            wait_eq(raw.flags, t, raw.wait_until);
            raw_read(raw, 0, sink);
            raw_put(raw, 0, face, t, peer);
        }
    }
}

fn raw_stream(raw: &mut Raw, rank: usize, face: &[f64], sink: &mut [f64], iters: u64) {
    let peer = (1 - rank) as c_int;
    for _ in 0..iters {
        raw.tick += 1;
        let t = raw.tick;
        let k = (t % STREAM_R as u64) as usize;
        if rank == 0 {
            // SAFETY: ack k is a symmetric word the receiver writes with puts.
            wait_eq(unsafe { raw.acks.add(k) }, raw.slot_tick[k], raw.wait_until);
            raw_put(raw, k, face, t, peer);
            raw.slot_tick[k] = t;
        } else {
            // SAFETY: flag k, as above.
            wait_eq(unsafe { raw.flags.add(k) }, t, raw.wait_until);
            raw_read(raw, k, sink);
            // SAFETY: the sender's ack k, read there by wait_until.
            unsafe { sys::shmem_uint64_p(raw.acks.add(k), t, peer) };
        }
    }
}

/// `iters` messages over `ch` as PE `rank`: a ping-pong (PE 0 sends, then takes the reply
/// with `take`; PE 1 the other way round), or a stream from PE 0 that PE 1 polls with `take`
/// until its channel counted them all received.
fn over_chan<M: chan_core::Mode>(
    ch: &mut Channel<Shmem, M>,
    stream: bool,
    rank: usize,
    (data, iters): (&[f64], u64),
    mut take: impl FnMut(&mut Channel<Shmem, M>),
) {
    match (stream, rank) {
        (false, 0) => (0..iters).for_each(|_| {
            ch.send(data).unwrap();
            take(ch);
        }),
        (false, _) => (0..iters).for_each(|_| {
            take(ch);
            ch.send(data).unwrap();
        }),
        (true, 0) => (0..iters).for_each(|_| ch.send(data).unwrap()),
        (true, _) => {
            let target = ch.stats().received + iters;
            while ch.stats().received < target {
                take(ch);
            }
        }
    }
}

/// The caller's face to send and the buffer to receive into, both page-aligned: memcpy slows
/// down several times when its target lies a few bytes past its source modulo 4 KiB (4K
/// aliasing), and with heap-allocated buffers whether an implementation's slot hits that
/// depended on where the allocator happened to put them (seen: raw 3× slower in some runs).
/// Page-aligned buffers keep every implementation's slots (at 700+ bytes into a page) clear
/// of it alike.
struct Bufs {
    data: Vec<f64>,
    sink: Vec<f64>,
    start: [usize; 2],
}

impl Bufs {
    fn new(maxlen: usize) -> Self {
        let page = 4096 / 8;
        let data = vec![1.0; maxlen + page];
        let sink = vec![0.0; maxlen + page];
        let start = [
            data.as_ptr().align_offset(4096),
            sink.as_ptr().align_offset(4096),
        ];
        assert!(
            start[0] < page && start[1] < page,
            "f64 buffers align to a page"
        );
        Bufs { data, sink, start }
    }

    fn get(&mut self, len: usize) -> (&[f64], &mut [f64]) {
        (
            &self.data[self.start[0]..self.start[0] + len],
            &mut self.sink[self.start[1]..self.start[1] + len],
        )
    }
}

/// Run case `id` for `iters` iterations as PE `rank`; both PEs call it in step.
fn run(
    id: usize,
    iters: u64,
    rank: usize,
    ctx: &mut ShmemCtx,
    chans: &mut Chans,
    raw: &mut Raw,
    bufs: &mut Bufs,
) -> Duration {
    let (pattern, li, which) = CASES.split(id);
    let stream = pattern == 1;
    let len = LENS[li];
    let (data, sink) = bufs.get(len);
    ctx.barrier().unwrap();
    let t = Instant::now();
    match (stream, which) {
        (false, 0) => raw_pingpong(raw, rank, data, sink, iters),
        (false, 1) => over_chan(&mut chans.pp_sync[li], false, rank, (data, iters), |c| {
            c.recv_into(sink).unwrap();
        }),
        (false, 2) => over_chan(&mut chans.pp_async[li], false, rank, (data, iters), |c| {
            loop {
                if let Some(m) = c.recv().unwrap() {
                    sink.copy_from_slice(&m);
                    break;
                }
            }
        }),
        (false, _) => over_chan(&mut chans.pp_racy[li], false, rank, (data, iters), |c| {
            while !c.can_recv().unwrap() {}
            c.recv().unwrap().load_into(sink);
        }),
        (true, 0) => raw_stream(raw, rank, data, sink, iters),
        (true, 1) => over_chan(&mut chans.st_sync[li], true, rank, (data, iters), |c| {
            c.recv_into(sink).unwrap();
        }),
        (true, 2) => over_chan(&mut chans.st_async[li], true, rank, (data, iters), |c| {
            if let Some(m) = c.recv().unwrap() {
                sink.copy_from_slice(&m);
            }
        }),
        // Copy the view out when a send landed since the last copy, as the raw reader copies
        // once per flag: a reader copying without pause would fight the writer for every
        // cache line of the view.
        (true, _) => over_chan(&mut chans.st_racy[li], true, rank, (data, iters), |c| {
            if c.can_recv().unwrap() {
                c.recv().unwrap().load_into(sink);
            }
        }),
    }
    ctx.barrier().unwrap();
    t.elapsed()
}

/// PE 0's command to PE 1: (case, iterations), or QUIT. A sum of PE 0's values and PE 1's
/// zeros is a broadcast.
fn bcast(ctx: &mut ShmemCtx, cmd: [f64; 2]) -> [f64; 2] {
    let mut v = if ctx.rank() == 0 { cmd } else { [0.0; 2] };
    ctx.all_reduce(&mut v, ReduceOp::Sum).unwrap();
    v
}

fn main() -> std::process::ExitCode {
    if !two_ranks::launched() {
        return two_ranks::relaunch("oshrun");
    }
    let mut ctx = ShmemCtx::init().expect("SHMEM starts");
    assert_eq!(ctx.size(), 2, "the SHMEM bench runs on exactly 2 PEs");
    let rank = ctx.rank();
    let mut chans = Chans::open(&mut ctx, &LENS, STREAM_R, false);
    let maxlen = *LENS.iter().max().unwrap();
    let mut raw = Raw::new(maxlen);
    let mut bufs = Bufs::new(maxlen);
    let mut typed = two_ranks::Typed::open(&mut ctx, 200);
    let run_typed = |ctx: &mut ShmemCtx, typed: &mut two_ranks::Typed<Shmem>, k, iters, rank| {
        ctx.barrier().unwrap();
        let t = Instant::now();
        typed.run(k, rank, iters);
        ctx.barrier().unwrap();
        t.elapsed()
    };
    if rank == 0 {
        CASES.lead(|id, iters| {
            bcast(&mut ctx, [id as f64, iters as f64]);
            run(id, iters, 0, &mut ctx, &mut chans, &mut raw, &mut bufs)
        });
        two_ranks::Typed::<Shmem>::lead(
            "aiac SHMEM Sync channel: an element type / the same bytes as f64",
            CASES.batch,
            CASES.rounds,
            |k, iters| {
                bcast(&mut ctx, [(TYPED_BASE + k) as f64, iters as f64]);
                run_typed(&mut ctx, &mut typed, k, iters, 0)
            },
        );
        bcast(&mut ctx, [QUIT, 0.0]);
    } else {
        loop {
            let cmd = bcast(&mut ctx, [0.0; 2]);
            if cmd[0] == QUIT {
                break;
            }
            let (id, iters) = (cmd[0] as usize, cmd[1] as u64);
            if id >= TYPED_BASE {
                run_typed(&mut ctx, &mut typed, id - TYPED_BASE, iters, 1);
            } else {
                run(id, iters, 1, &mut ctx, &mut chans, &mut raw, &mut bufs);
            }
        }
    }
    typed.close();
    chans.close();
    ctx.finalize().expect("every channel closed at finalize");
    std::process::ExitCode::SUCCESS
}
