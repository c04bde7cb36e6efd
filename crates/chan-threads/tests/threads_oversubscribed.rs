//! Async channels between neighbours that share a core. A world with more ranks than CPUs
//! waits by yielding (`World::wait_policy`): a receive that finds nothing new gives the core
//! away. Without that, two busy-polling neighbours on one core never ran at once, and the
//! async channel between them carried its R messages per time slice: in release builds, with
//! 3 ranks on 2 cores, 8 to 36 messages in 100 000 iterations, against 35 000 to 90 000 on the
//! other channel, and the async Jacobi runs of `tests/cross_backend.rs` failed to converge in
//! 200 000 iterations in 19 of 20 runs. A world that fits the CPUs spins, but another program
//! may hold a core it counted on: its receives yield once per 64 that found nothing. Without
//! that, the starter's 2-rank `heat2d` run beside other tests' threads exchanged 160 faces in
//! 2 million steps and did not converge (11 of 30 release runs beside one busy loop). A binary
//! of its own, so that no other test's threads compete for the cores; its tests take turns.

use chan_core::backend::WaitPolicy;
use chan_core::traits::*;
use chan_core::{close_all, Async, ChannelConfig, ChannelSpec};
use chan_threads::World;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Iterations every rank does (each keeps iterating, and receiving, until all have).
const ITERS: u64 = 100_000;

/// Held by each test, so that they do not compete for the cores.
static TURN: Mutex<()> = Mutex::new(());

/// Ranks in a line, one more than the CPUs: every channel must keep carrying messages
/// (`exchange`).
#[test]
fn async_neighbours_sharing_a_core_keep_exchanging() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let n = (cpus + 1).max(3);
    let world = World::new(n).unwrap();
    if std::env::var_os(chan_core::vars::WAIT).is_none() {
        assert_eq!(
            world.wait_policy(),
            WaitPolicy::Yield,
            "{n} ranks on {cpus} CPUs"
        );
    }
    exchange(&world, None, ITERS / 10);
}

/// Two ranks of a world that fits the CPUs (so it spins), both on one CPU, as when other
/// programs hold the rest: the channel between them must keep carrying messages. Yielding
/// once per 64 empty receives, it carries about one per 32 iterations (3 077 of 100 000 in
/// release); before, 2 or 3 in all.
#[test]
fn spinning_neighbours_put_on_one_core_keep_exchanging() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let world = World::new(2).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if std::env::var_os(chan_core::vars::WAIT).is_none() && cpus >= 2 {
        assert_eq!(
            world.wait_policy(),
            WaitPolicy::Spin,
            "2 ranks on {cpus} CPUs"
        );
    }
    let cpu = core_affinity::get_core_ids()
        .and_then(|ids| ids.first().copied())
        .expect("this machine lists the CPUs this process may use");
    exchange(&world, Some(cpu), ITERS / 100);
}

/// Ranks in a line (each pinned to `cpu` when given): every iteration takes the newest
/// message from each neighbour and offers one to each (`try_send`, R = 2), as async Jacobi
/// does. Every channel must carry at least `min` messages: with the core shared, a channel
/// that waits for both its ends to be running at once carries a few per time slice.
fn exchange(world: &World, cpu: Option<core_affinity::CoreId>, min: u64) {
    let n = world.size();
    let done = AtomicUsize::new(0);
    let per_rank = world.run(|ctx| {
        if let Some(cpu) = cpu {
            assert!(core_affinity::set_for_current(cpu), "pinning to {cpu:?}");
        }
        let me = ctx.rank();
        let peers: Vec<usize> = [me.checked_sub(1), Some(me + 1).filter(|&p| p < n)]
            .into_iter()
            .flatten()
            .collect();
        let specs: Vec<_> = peers
            .iter()
            .map(|&p| ChannelSpec::new(p, 0, ChannelConfig::new(72, 2).unwrap()).unwrap())
            .collect();
        let mut chans = ctx.open::<Async>(&specs).unwrap();
        let mut it = 0u64;
        while done.load(Ordering::Acquire) < n {
            for c in chans.iter_mut() {
                c.recv().unwrap();
            }
            for c in chans.iter_mut() {
                c.set_iteration(it);
                let _ = c.try_send_with(|b| b.fill(it as f64));
            }
            it += 1;
            if it == ITERS {
                done.fetch_add(1, Ordering::AcqRel);
            }
        }
        let sent: Vec<(usize, u64)> = peers
            .iter()
            .zip(&chans)
            .map(|(&p, c)| (p, c.stats().sent))
            .collect();
        ctx.barrier().unwrap();
        close_all(chans).unwrap();
        sent
    });
    for (rank, sent) in per_rank.iter().enumerate() {
        for &(peer, s) in sent {
            assert!(
                s >= min,
                "rank {rank} sent {s} messages to rank {peer} in at least {ITERS} iterations: \
                 {per_rank:?}"
            );
        }
    }
}
