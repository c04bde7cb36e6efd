//! The threads backend's channels against crossbeam-channel doing the same pattern between two
//! threads, for 8 B (1 f64) and 20 KB (2500 f64, a 50×50 halo face) messages:
//!
//! - **ping-pong**: rank 0 sends, rank 1 answers, one round trip per iteration (latency);
//! - **one-way**: rank 0 streams messages to rank 1 (throughput), R = 4 (`bounded(4)`).
//!
//! Both patterns run with one thread pinned to each of two CPUs (`World::pinned`, and the same
//! pinning for crossbeam's two threads): two busy-polling threads the scheduler places on one
//! core run many times slower, and fresh threads for every batch make that likely.
//!
//! crossbeam carries `[f64; N]` by value, so each message is copied into the channel and out of
//! it, as aiac copies it into a slot (the receiver reads aiac's slot in place). World creation
//! and channel set-up happen outside the timed region. At the end the ratio aiac / crossbeam of
//! every pair is printed from batches of all four taken in turn (`support/interleaved.rs`).
//!
//! A third group, **elements**, times the same bytes carried as other element types: a Sync
//! ping-pong and a Sync stream of 20 KB as 2500 `f64`, 5000 `f32` and 1250 16-byte structs,
//! and of one word as 1 `f64` and 2 `f32` (an element type changes what the channel casts, not
//! what the transport moves: the ratio table says what that costs).
//!
//! `cargo bench --bench threads_channel` (`AIAC_BENCH_RATIOS_ONLY=1`: only the ratio tables;
//! `AIAC_BENCH_ROUNDS`: batches per row, 15 by default)

use bytemuck::{Pod, Zeroable};
use chan_core::traits::*;
use chan_core::{Async, ChannelConfig, ChannelSpec, Element, Racy, Sync};
use chan_threads::World;
use criterion::{BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};

#[path = "support/interleaved.rs"]
mod interleaved;

const SMALL: usize = 1;
const FACE: usize = 2500;
const STREAM_R: usize = 4;

fn spec(peer: usize, len: usize, r: usize) -> ChannelSpec {
    ChannelSpec::new(peer, 0, ChannelConfig::new(len, r).unwrap()).unwrap()
}

fn pingpong_aiac(mode: &str, len: usize, iters: u64) -> Duration {
    if mode == "sync" {
        return sync_typed::<f64>(false, len, iters);
    }
    let mode = mode.to_owned();
    // Channels are opened inside the timed closure's world but before its clock starts.
    World::new(2)
        .unwrap()
        .pinned()
        .run(|ctx| {
            let peer = 1 - ctx.rank();
            let first = ctx.rank() == 0;
            let data = vec![1.0; len];
            let mut sink = vec![0.0; len];
            macro_rules! timed {
                ($body:block) => {{
                    ctx.barrier().unwrap();
                    let t = Instant::now();
                    $body;
                    t.elapsed()
                }};
            }
            match mode.as_str() {
                "async" => {
                    let mut ch = ctx.open::<Async>(&[spec(peer, len, 1)]).unwrap().remove(0);
                    let wait = |ch: &mut chan_core::Channel<_, Async>, sink: &mut [f64]| loop {
                        if let Some(m) = ch.recv().unwrap() {
                            sink.copy_from_slice(&m);
                            break;
                        }
                    };
                    let e = timed!({
                        for _ in 0..iters {
                            if first {
                                ch.send(&data).unwrap();
                                wait(&mut ch, &mut sink);
                            } else {
                                wait(&mut ch, &mut sink);
                                ch.send(&sink).unwrap();
                            }
                        }
                    });
                    ch.close().unwrap();
                    e
                }
                _ => {
                    let mut ch = ctx.open::<Racy>(&[spec(peer, len, 1)]).unwrap().remove(0);
                    let wait = |ch: &mut chan_core::Channel<_, Racy>, sink: &mut [f64]| {
                        while !ch.can_recv().unwrap() {}
                        ch.recv().unwrap().load_into(sink);
                    };
                    let e = timed!({
                        for _ in 0..iters {
                            if first {
                                ch.send(&data).unwrap();
                                wait(&mut ch, &mut sink);
                            } else {
                                wait(&mut ch, &mut sink);
                                ch.send(&sink).unwrap();
                            }
                        }
                    });
                    ch.close().unwrap();
                    e
                }
            }
        })
        .into_iter()
        .max()
        .unwrap()
}

/// Pin the calling thread to the k-th CPU the spawning thread may use (as `World::pinned`
/// does); the main thread itself stays unpinned, or it would narrow that list to one CPU.
fn pin(k: usize) {
    if let Some(ids) = core_affinity::get_core_ids().filter(|ids| !ids.is_empty()) {
        core_affinity::set_for_current(ids[k % ids.len()]);
    }
}

fn pingpong_crossbeam<const N: usize>(iters: u64) -> Duration {
    let (to1, from0) = crossbeam_channel::bounded::<[f64; N]>(1);
    let (to0, from1) = crossbeam_channel::bounded::<[f64; N]>(1);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let b = &barrier;
        let echo = s.spawn(move || {
            pin(1);
            b.wait();
            for _ in 0..iters {
                let m = from0.recv().unwrap();
                to0.send(m).unwrap();
            }
        });
        let ping = s.spawn(move || {
            pin(0);
            let data = [1.0; N];
            b.wait();
            let t = Instant::now();
            for _ in 0..iters {
                to1.send(data).unwrap();
                std::hint::black_box(from1.recv().unwrap());
            }
            t.elapsed()
        });
        echo.join().unwrap();
        ping.join().unwrap()
    })
}

fn stream_aiac(mode: &str, len: usize, n: u64) -> Duration {
    if mode == "sync" {
        return sync_typed::<f64>(true, len, n);
    }
    let mode = mode.to_owned();
    World::new(2)
        .unwrap()
        .pinned()
        .run(|ctx| {
            let peer = 1 - ctx.rank();
            let sender = ctx.rank() == 0;
            let data = vec![1.0; len];
            let mut sink = vec![0.0; len];
            match mode.as_str() {
                "async" => {
                    let mut ch = ctx
                        .open::<Async>(&[spec(peer, len, STREAM_R)])
                        .unwrap()
                        .remove(0);
                    ctx.barrier().unwrap();
                    let t = Instant::now();
                    if sender {
                        for _ in 0..n {
                            ch.send(&data).unwrap();
                        }
                    } else {
                        // Newest-wins: the receiver takes what is newest until the last arrives.
                        let mut last = 0;
                        while last < n {
                            if let Some(m) = ch.recv().unwrap() {
                                sink.copy_from_slice(&m);
                                last = m.seq();
                            }
                        }
                    }
                    let e = t.elapsed();
                    ch.close().unwrap();
                    e
                }
                _ => {
                    let mut ch = ctx
                        .open::<Racy>(&[spec(peer, len, STREAM_R)])
                        .unwrap()
                        .remove(0);
                    ctx.barrier().unwrap();
                    let t = Instant::now();
                    if sender {
                        for _ in 0..n {
                            ch.send(&data).unwrap();
                        }
                    } else {
                        while ch.stats().received < n {
                            ch.recv().unwrap().load_into(&mut sink);
                        }
                    }
                    let e = t.elapsed();
                    ch.close().unwrap();
                    e
                }
            }
        })
        .into_iter()
        .max()
        .unwrap()
}

fn stream_crossbeam<const N: usize>(n: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<[f64; N]>(STREAM_R);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let b = &barrier;
        let recv = s.spawn(move || {
            pin(1);
            b.wait();
            let t = Instant::now();
            for _ in 0..n {
                std::hint::black_box(rx.recv().unwrap());
            }
            t.elapsed()
        });
        let send = s.spawn(move || {
            pin(0);
            let data = [1.0; N];
            b.wait();
            let t = Instant::now();
            for _ in 0..n {
                tx.send(data).unwrap();
            }
            t.elapsed()
        });
        let e = send.join().unwrap();
        e.max(recv.join().unwrap())
    })
}

fn pingpong(c: &mut Criterion) {
    let mut g = c.benchmark_group("pingpong");
    for len in [SMALL, FACE] {
        let bytes = (len * 8) as u64;
        g.throughput(Throughput::Bytes(2 * bytes));
        for mode in ["sync", "async", "racy"] {
            g.bench_with_input(
                BenchmarkId::new(format!("aiac-{mode}"), bytes),
                &len,
                |b, &len| b.iter_custom(|iters| pingpong_aiac(mode, len, iters)),
            );
        }
        g.bench_with_input(BenchmarkId::new("crossbeam", bytes), &len, |b, &len| {
            b.iter_custom(|iters| match len {
                SMALL => pingpong_crossbeam::<SMALL>(iters),
                _ => pingpong_crossbeam::<FACE>(iters),
            })
        });
    }
    g.finish();
}

/// The struct payload: a particle's position and id, 16 bytes.
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Particle {
    pos: [f32; 3],
    id: u32,
}

/// A Sync ping-pong (`stream` false, R = 1) or a Sync stream (R = 4) of `len` elements `T`:
/// `pingpong_aiac` and `stream_aiac`'s Sync rows (`f64`) and the element rows.
fn sync_typed<T: Element>(stream: bool, len: usize, n: u64) -> Duration {
    World::new(2)
        .unwrap()
        .pinned()
        .run(|ctx| {
            let peer = 1 - ctx.rank();
            let first = ctx.rank() == 0;
            let r = if stream { STREAM_R } else { 1 };
            let mut ch = ctx
                .open_typed::<Sync, T>(&[spec(peer, len, r)])
                .unwrap()
                .remove(0);
            let data = vec![T::zeroed(); len];
            let mut sink = vec![T::zeroed(); len];
            ctx.barrier().unwrap();
            let t = Instant::now();
            for _ in 0..n {
                match (stream, first) {
                    (true, true) => ch.send(&data).unwrap(),
                    (true, false) => {
                        ch.recv_into(&mut sink).unwrap();
                    }
                    (false, true) => {
                        ch.send(&data).unwrap();
                        ch.recv_into(&mut sink).unwrap();
                    }
                    (false, false) => {
                        ch.recv_into(&mut sink).unwrap();
                        ch.send(&sink).unwrap();
                    }
                }
            }
            let e = t.elapsed();
            ch.close().unwrap();
            e
        })
        .into_iter()
        .max()
        .unwrap()
}

/// The element cases of one byte size: (name, run).
type Typed = (&'static str, fn(bool, u64) -> Duration);

fn typed_cases(bytes: usize) -> Vec<Typed> {
    match bytes {
        8 => vec![
            ("f64", |s, n| sync_typed::<f64>(s, 1, n)),
            ("f32", |s, n| sync_typed::<f32>(s, 2, n)),
        ],
        _ => vec![
            ("f64", |s, n| sync_typed::<f64>(s, FACE, n)),
            ("f32", |s, n| sync_typed::<f32>(s, 2 * FACE, n)),
            ("struct", |s, n| sync_typed::<Particle>(s, FACE / 2, n)),
        ],
    }
}

fn elements(c: &mut Criterion) {
    let mut g = c.benchmark_group("elements");
    for bytes in [8, FACE * 8] {
        for (name, run) in typed_cases(bytes) {
            g.throughput(Throughput::Bytes(bytes as u64));
            for (pattern, stream) in [("pingpong", false), ("oneway", true)] {
                g.bench_with_input(
                    BenchmarkId::new(format!("sync-{pattern}-{name}"), bytes),
                    &stream,
                    |b, &stream| b.iter_custom(|iters| run(stream, iters)),
                );
            }
        }
    }
    g.finish();
}

fn oneway(c: &mut Criterion) {
    let mut g = c.benchmark_group("oneway");
    for len in [SMALL, FACE] {
        let bytes = (len * 8) as u64;
        g.throughput(Throughput::Bytes(bytes));
        for mode in ["sync", "async", "racy"] {
            g.bench_with_input(
                BenchmarkId::new(format!("aiac-{mode}"), bytes),
                &len,
                |b, &len| b.iter_custom(|iters| stream_aiac(mode, len, iters)),
            );
        }
        g.bench_with_input(BenchmarkId::new("crossbeam", bytes), &len, |b, &len| {
            b.iter_custom(|iters| match len {
                SMALL => stream_crossbeam::<SMALL>(iters),
                _ => stream_crossbeam::<FACE>(iters),
            })
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    if std::env::var_os("AIAC_BENCH_RATIOS_ONLY").is_none() {
        pingpong(&mut c);
        oneway(&mut c);
        elements(&mut c);
        c.final_summary();
    }
    let names = ["crossbeam", "aiac-sync", "aiac-async", "aiac-racy"];
    interleaved::print_header("aiac threads channel / crossbeam-channel", "crossbeam");
    for (group, stream) in [("pingpong", false), ("oneway", true)] {
        for len in [SMALL, FACE] {
            let m = interleaved::medians(
                names.len(),
                |case, iters| match (case, stream, len) {
                    (0, false, SMALL) => pingpong_crossbeam::<SMALL>(iters),
                    (0, false, _) => pingpong_crossbeam::<FACE>(iters),
                    (0, true, SMALL) => stream_crossbeam::<SMALL>(iters),
                    (0, true, _) => stream_crossbeam::<FACE>(iters),
                    (k, false, _) => pingpong_aiac(&names[k][5..], len, iters),
                    (k, true, _) => stream_aiac(&names[k][5..], len, iters),
                },
                Duration::from_millis(20),
                interleaved::rounds(15),
            );
            interleaved::print_row(group, len * 8, &names, &m);
        }
    }
    interleaved::print_header(
        "aiac threads Sync channel: an element type / the same bytes as f64",
        "f64",
    );
    for (group, stream) in [("pingpong", false), ("oneway", true)] {
        for bytes in [8, FACE * 8] {
            let cases = typed_cases(bytes);
            let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
            let m = interleaved::medians(
                cases.len(),
                |case, iters| (cases[case].1)(stream, iters),
                Duration::from_millis(20),
                interleaved::rounds(15),
            );
            interleaved::print_row(group, bytes, &names, &m);
        }
    }
}
