//! Async channels between neighbours that share a core. A world with more ranks than CPUs
//! waits by yielding (`World::wait_policy`): a receive that finds nothing new gives the core
//! away. Without that, two busy-polling neighbours on one core never ran at once, and the
//! async channel between them carried its R messages per time slice: in release builds, with
//! 3 ranks on 2 cores, 8 to 36 messages in 100 000 iterations, against 35 000 to 90 000 on the
//! other channel, and the async Jacobi runs of `tests/cross_backend.rs` failed to converge in
//! 200 000 iterations in 19 of 20 runs. A binary of its own, so that no other test's threads
//! compete for the cores.

use chan_core::backend::WaitPolicy;
use chan_core::traits::*;
use chan_core::{close_all, Async, ChannelConfig, ChannelSpec};
use chan_threads::World;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Iterations every rank does (each keeps iterating, and receiving, until all have).
const ITERS: u64 = 100_000;

/// Ranks in a line, one more than the CPUs: every iteration takes the newest message from
/// each neighbour and offers one to each (`try_send`, R = 2), as async Jacobi does. Every
/// channel must carry at least a tenth of the iterations: with the core shared, a channel
/// that waits for both its ends to be running at once carries a few per time slice.
#[test]
fn async_neighbours_sharing_a_core_keep_exchanging() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let n = (cpus + 1).max(3);
    let world = World::new(n).unwrap();
    if std::env::var_os(WaitPolicy::ENV).is_none() {
        assert_eq!(
            world.wait_policy(),
            WaitPolicy::Yield,
            "{n} ranks on {cpus} CPUs"
        );
    }
    let done = AtomicUsize::new(0);
    let per_rank = world.run(|ctx| {
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
                s >= ITERS / 10,
                "rank {rank} sent {s} messages to rank {peer} in at least {ITERS} iterations: \
                 {per_rank:?}"
            );
        }
    }
}
