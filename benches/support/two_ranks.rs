//! What the two-rank channel benches (MPI, SHMEM) share: starting under the launcher, the
//! channels of every mode they open, and the leading rank's side (criterion's measurements,
//! then the table of ratios to the baseline from interleaved batches). The other rank runs
//! each case as the leader's partner, told which by a broadcast that each bench does in its
//! own library. Included with `#[path]`, next to `interleaved.rs`.

use crate::interleaved;
use chan_core::Backend;
use chan_core::{close_all, Async, Channel, ChannelConfig, ChannelSpec, Context, Racy, Sync};
use criterion::{BenchmarkId, Criterion, Throughput};
use std::process::ExitCode;
use std::time::Duration;

/// True when this process runs under `mpirun`/`oshrun` (Open MPI sets the world size).
pub fn launched() -> bool {
    std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some()
}

/// Run this bench again under `launcher -np 2`, with the same arguments.
pub fn relaunch(launcher: &str) -> ExitCode {
    let exe = std::env::current_exe().expect("own path");
    let status = std::process::Command::new(launcher)
        .args(["-np", "2"])
        .arg(exe)
        .args(std::env::args().skip(1))
        .status()
        .unwrap_or_else(|e| panic!("{launcher} starts (scripts/setup.sh installs Open MPI): {e}"));
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Every channel both ranks open once, before timing: for each mode, one per message length
/// for the ping-pong (R = 1) and one for the stream (R = `stream_r`).
pub struct Chans<B: Backend> {
    pub pp_sync: Vec<Channel<B, Sync>>,
    pub pp_async: Vec<Channel<B, Async>>,
    pub pp_racy: Vec<Channel<B, Racy>>,
    pub st_sync: Vec<Channel<B, Sync>>,
    pub st_async: Vec<Channel<B, Async>>,
    pub st_racy: Vec<Channel<B, Racy>>,
}

impl<B: Backend> Chans<B> {
    /// Open them all with the peer rank, tags 0.. by tens. `set_each`: every channel as a set
    /// of its own (a set may share resources, such as an MPI communicator, whose queues a
    /// benchmark channel should not share with idle set-mates); otherwise one set per group.
    pub fn open<C: Context<Backend = B>>(
        ctx: &mut C,
        lens: &[usize],
        stream_r: usize,
        set_each: bool,
    ) -> Self {
        fn group<C: Context, M: chan_core::Mode>(
            ctx: &mut C,
            lens: &[usize],
            r: usize,
            tag0: u32,
            set_each: bool,
        ) -> Vec<Channel<C::Backend, M>> {
            let peer = 1 - ctx.rank();
            let specs: Vec<ChannelSpec> = (0..lens.len())
                .map(|i| {
                    let cfg = ChannelConfig::new(lens[i], r).unwrap();
                    ChannelSpec::new(peer, tag0 + i as u32, cfg).unwrap()
                })
                .collect();
            if set_each {
                specs
                    .iter()
                    .map(|s| ctx.open::<M>(std::slice::from_ref(s)).unwrap().remove(0))
                    .collect()
            } else {
                ctx.open::<M>(&specs).unwrap()
            }
        }
        Chans {
            pp_sync: group(ctx, lens, 1, 0, set_each),
            pp_async: group(ctx, lens, 1, 10, set_each),
            pp_racy: group(ctx, lens, 1, 20, set_each),
            st_sync: group(ctx, lens, stream_r, 30, set_each),
            st_async: group(ctx, lens, stream_r, 40, set_each),
            st_racy: group(ctx, lens, stream_r, 50, set_each),
        }
    }

    /// Close them all, each mode's channels together.
    pub fn close(self) {
        close_all(self.pp_sync.into_iter().chain(self.st_sync)).unwrap();
        close_all(self.pp_async.into_iter().chain(self.st_async)).unwrap();
        close_all(self.pp_racy.into_iter().chain(self.st_racy)).unwrap();
    }
}

/// The cases of a two-rank bench: every pattern × message length × implementation, numbered
/// `(pattern · lens + length) · impls + implementation`; implementation 0 is the baseline.
pub struct Cases {
    /// Criterion's group names are `{prefix}-{pattern}`.
    pub prefix: &'static str,
    /// Pattern names, in case order.
    pub patterns: &'static [&'static str],
    /// Message lengths in f64, in case order.
    pub lens: &'static [usize],
    /// Implementation names, baseline first.
    pub impls: &'static [&'static str],
    /// Patterns whose iteration moves one message; the others move two (there and back).
    pub one_way: &'static [&'static str],
    /// The ratio table's title.
    pub title: &'static str,
    /// The length of one interleaved batch.
    pub batch: Duration,
    /// Interleaved batches per row, unless `AIAC_BENCH_ROUNDS` says otherwise.
    pub rounds: usize,
}

impl Cases {
    /// (pattern, length index, implementation) of case `id`.
    pub fn split(&self, id: usize) -> (usize, usize, usize) {
        let (nl, ni) = (self.lens.len(), self.impls.len());
        (id / (nl * ni), (id / ni) % nl, id % ni)
    }

    fn id(&self, pattern: usize, len: usize, imp: usize) -> usize {
        (pattern * self.lens.len() + len) * self.impls.len() + imp
    }

    /// The leading rank: criterion's measurements (unless `AIAC_BENCH_RATIOS_ONLY` is set),
    /// then the ratio table. `drive(id, iters)` runs case `id` for `iters` iterations on both
    /// ranks (telling the other rank first) and returns this rank's time.
    pub fn lead(&self, mut drive: impl FnMut(usize, u64) -> Duration) {
        if std::env::var_os("AIAC_BENCH_RATIOS_ONLY").is_none() {
            let mut c = Criterion::default()
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2))
                .sample_size(20)
                .configure_from_args();
            for (s, pattern) in self.patterns.iter().enumerate() {
                let mut g = c.benchmark_group(format!("{}-{pattern}", self.prefix));
                let messages = if self.one_way.contains(pattern) { 1 } else { 2 };
                for (li, &len) in self.lens.iter().enumerate() {
                    g.throughput(Throughput::Bytes((messages * len * 8) as u64));
                    for (w, name) in self.impls.iter().enumerate() {
                        let id = self.id(s, li, w);
                        g.bench_function(BenchmarkId::new(*name, len * 8), |b| {
                            b.iter_custom(|iters| drive(id, iters))
                        });
                    }
                }
                g.finish();
            }
            c.final_summary();
        }
        interleaved::print_header(self.title, self.impls[0]);
        for (s, pattern) in self.patterns.iter().enumerate() {
            for (li, &len) in self.lens.iter().enumerate() {
                let m = interleaved::medians(
                    self.impls.len(),
                    |w, iters| drive(self.id(s, li, w), iters),
                    self.batch,
                    interleaved::rounds(self.rounds),
                );
                interleaved::print_row(pattern, len * 8, self.impls, &m);
            }
        }
    }
}

/// The struct payload of the element rows: a particle's position and id, 16 bytes.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Particle {
    pos: [f32; 3],
    id: u32,
}

/// Bytes of one message of the element rows: a 50×50 halo face of `f64`.
const TYPED_BYTES: usize = 20_000;
/// The element rows' cases, the same bytes as each type: `f64` (the baseline), `f32`, struct.
const TYPED: [&str; 3] = ["f64", "f32", "struct"];

/// Sync ping-pong channels of [`TYPED_BYTES`] as `f64`, `f32` and [`Particle`] (R = 1), and
/// the buffers they send from and receive into.
pub struct Typed<B: Backend> {
    f64s: (Channel<B, Sync, f64>, Vec<f64>),
    f32s: (Channel<B, Sync, f32>, Vec<f32>),
    parts: (Channel<B, Sync, Particle>, Vec<Particle>),
}

/// A Sync ping-pong of `iters` round trips of `buf` (rank 0 sends first).
fn pingpong_typed<B: Backend, T: chan_core::Element>(
    (ch, buf): &mut (Channel<B, Sync, T>, Vec<T>),
    rank: usize,
    iters: u64,
) {
    for _ in 0..iters {
        if rank == 0 {
            ch.send(buf).unwrap();
            ch.recv_into(buf).unwrap();
        } else {
            ch.recv_into(buf).unwrap();
            ch.send(buf).unwrap();
        }
    }
}

impl<B: Backend> Typed<B> {
    /// Open the three channels with the peer rank, tags `tag0..`.
    pub fn open<C: Context<Backend = B>>(ctx: &mut C, tag0: u32) -> Self {
        let peer = 1 - ctx.rank();
        let spec = |k: u32, len| {
            ChannelSpec::new(peer, tag0 + k, ChannelConfig::new(len, 1).unwrap()).unwrap()
        };
        let f = TYPED_BYTES / 8;
        Typed {
            f64s: (
                ctx.open_typed(&[spec(0, f)]).unwrap().remove(0),
                vec![1.0; f],
            ),
            f32s: (
                ctx.open_typed(&[spec(1, 2 * f)]).unwrap().remove(0),
                vec![1.0; 2 * f],
            ),
            parts: (
                ctx.open_typed(&[spec(2, f / 2)]).unwrap().remove(0),
                vec![bytemuck::Zeroable::zeroed(); f / 2],
            ),
        }
    }

    /// Element case `k` ([`TYPED`]) for `iters` round trips, as rank `rank`; both ranks call
    /// it in step.
    pub fn run(&mut self, k: usize, rank: usize, iters: u64) {
        match k {
            0 => pingpong_typed(&mut self.f64s, rank, iters),
            1 => pingpong_typed(&mut self.f32s, rank, iters),
            _ => pingpong_typed(&mut self.parts, rank, iters),
        }
    }

    /// The leading rank's element table: `drive(k, iters)` runs case `k` on both ranks.
    pub fn lead(
        title: &str,
        batch: Duration,
        rounds: usize,
        drive: impl FnMut(usize, u64) -> Duration,
    ) {
        interleaved::print_header(title, TYPED[0]);
        let m = interleaved::medians(TYPED.len(), drive, batch, interleaved::rounds(rounds));
        interleaved::print_row("pingpong", TYPED_BYTES, &TYPED, &m);
    }

    /// Close the three channels.
    pub fn close(self) {
        self.f64s.0.close().unwrap();
        self.f32s.0.close().unwrap();
        self.parts.0.close().unwrap();
    }
}
