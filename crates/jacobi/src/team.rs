//! What a team of workers sweeping one block together needs: the hybrid ranks' teams
//! (`hybrid.rs`), which the shared-memory sync variant runs too (`shared/`): a spinning, then
//! yielding (or, with more busy threads than cores, backing off) barrier for a fixed team;
//! per-worker (or per-plane) f64 slots, each on its own cache line; the CPUs to pin the
//! workers to; and how the workers of the job's rank teams wait for each other.

use chan_core::backend::WaitPolicy;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};

/// How the workers of a rank's team of `threads` wait for each other, one of `local_size`
/// processes on this machine each running such a team: [`WaitPolicy::Yield`] when the busy
/// threads outnumber the cores they run on, so that a waiting worker backs off and leaves the
/// core to the one it waits for. That is when this thread may run on fewer CPUs than the team
/// has workers (a rank bound to one core, Open MPI's default), or when it may run on every
/// CPU of the machine (a job started unbound) and the job's teams together outnumber them.
/// A rank bound to CPUs of its own, at least one per worker (`--map-by slot:PE=T`), spins.
/// `AIAC_WAIT` overrides, as for the channels ([`WaitPolicy::detect`]); a bad value is left
/// to the backend's start to report, and waits spin meanwhile.
pub(crate) fn team_wait_policy(threads: usize, local_size: usize) -> WaitPolicy {
    let own = core_affinity::get_core_ids().map_or(1, |ids| ids.len().max(1));
    let unbound = launch_env::node_cpus().is_some_and(|node| own >= node);
    let oversubscribed =
        own < threads || (unbound && local_size.max(1).saturating_mul(threads) > own);
    WaitPolicy::detect(Some(oversubscribed), None).unwrap_or(WaitPolicy::Spin)
}

/// The CPUs to pin the team of `threads` workers of one of `local_size` processes sharing
/// this machine (the `local_rank`-th) to, one each, among those this thread may run on:
/// with room for every process's team in that set (a job started unbound, `mpirun
/// --bind-to none`: every process has the whole machine), the `local_rank`-th T of them, so
/// that the processes' teams do not share cores; else, with T of them (the process bound to
/// its own cores, `--map-by slot:PE=T`), the first T. `None` with fewer than T.
pub(crate) fn rank_team_cpus(
    threads: usize,
    local_rank: usize,
    local_size: usize,
) -> Option<Vec<core_affinity::CoreId>> {
    let ids = core_affinity::get_core_ids()?;
    let first = match local_rank.checked_mul(threads) {
        Some(first)
            if local_rank < local_size && ids.len() >= local_size.saturating_mul(threads) =>
        {
            first
        }
        _ => 0,
    };
    (ids.len() >= threads).then(|| ids[first..first + threads].to_vec())
}

/// One f64 per worker, each on a cache line of its own, so that workers storing their own
/// slot do not bounce one line between cores. Relaxed: the team's barrier orders the stores
/// before it with the loads after it.
pub(crate) struct Slots(Box<[CacheLine<AtomicU64>]>);

/// A value alone on its cache line (128 bytes: two lines, as adjacent-line prefetch pairs
/// them on x86-64).
#[repr(align(128))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl Slots {
    pub(crate) fn new(n: usize) -> Self {
        Slots((0..n).map(|_| CacheLine(AtomicU64::new(0))).collect())
    }
    pub(crate) fn put(&self, t: usize, v: f64) {
        self.0[t].0.store(v.to_bits(), Relaxed);
    }
    /// The sum in worker order, so every worker (and every run) finds the same value.
    pub(crate) fn sum(&self) -> f64 {
        self.0
            .iter()
            .map(|s| f64::from_bits(s.0.load(Relaxed)))
            .sum()
    }
}

/// A sense-reversing barrier for a fixed team: the arrivals count down, the last one resets
/// the count and flips the shared sense, the others wait for the flip. A waiter spins a
/// little, backing off, then yields its core at every look: with more workers than cores
/// (tests) the one it waits for may need that core. Under [`WaitPolicy::Yield`] (more busy
/// threads than cores: [`team_wait_policy`]) it backs off further, as a channel's blocking
/// wait does ([`WaitPolicy::relax`]: a few spins, yields, then short sleeps), so that a
/// worker of another team sharing its core, or a rank's halo wait, is not kept off it.
///
/// ## Memory ordering
/// Each arrival is an AcqRel `fetch_sub` on `left`. RMWs extend a release sequence, so the
/// last arrival's acquire synchronizes with every earlier arrival's release: it sees all
/// their writes from before the barrier. Its Release store of the new sense then pairs with
/// the Acquire load by which each waiter sees the flip. So whatever any worker wrote before
/// `wait` happens before whatever any worker does after it. The reset of `left` is sequenced
/// before the sense store, hence seen by every arrival at the next passage.
pub(crate) struct SpinBarrier {
    left: CacheLine<AtomicUsize>,
    sense: CacheLine<AtomicBool>,
    /// Set when a worker panicked: the waiters panic too rather than wait for ever.
    broken: AtomicBool,
    n: usize,
    /// How a waiter waits once its first spins found no flip.
    wait: WaitPolicy,
}

/// A worker's handle on a [`SpinBarrier`]: its own sense, flipped at each passage.
pub(crate) struct Waiter<'a> {
    barrier: &'a SpinBarrier,
    sense: bool,
}

/// Spin-loop hints before a waiter starts yielding: 1 + 2 + … + 2^SPIN_STEPS.
pub(crate) const SPIN_STEPS: u32 = 6;

impl SpinBarrier {
    /// A barrier whose waiters wait as `wait` says once their first spins found no flip:
    /// `Spin`, yield at every look; `Yield`, back off to short sleeps.
    pub(crate) fn with_policy(n: usize, wait: WaitPolicy) -> Self {
        assert!(n > 0, "a barrier for no worker");
        SpinBarrier {
            left: CacheLine(AtomicUsize::new(n)),
            sense: CacheLine(AtomicBool::new(false)),
            broken: AtomicBool::new(false),
            n,
            wait,
        }
    }

    /// A handle for one worker; each worker takes one and keeps it.
    pub(crate) fn waiter(&self) -> Waiter<'_> {
        Waiter {
            barrier: self,
            sense: self.sense.0.load(Relaxed),
        }
    }
}

impl Waiter<'_> {
    /// Wait until every worker of the team has called `wait` as many times as this one.
    pub(crate) fn wait(&mut self) {
        let b = self.barrier;
        self.sense = !self.sense;
        // AcqRel: see the type's Memory ordering.
        if b.left.0.fetch_sub(1, AcqRel) == 1 {
            b.left.0.store(b.n, Relaxed);
            // Release: pairs with the waiters' Acquire load below.
            b.sense.0.store(self.sense, Release);
            return;
        }
        let (mut step, mut looks) = (0, 0u32);
        // Acquire: pairs with the last arrival's Release store above.
        while b.sense.0.load(Acquire) != self.sense {
            if step <= SPIN_STEPS {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
                step += 1;
            } else {
                if b.broken.load(Relaxed) {
                    panic!("another worker of the team panicked");
                }
                match b.wait {
                    WaitPolicy::Spin => std::thread::yield_now(),
                    WaitPolicy::Yield => {
                        b.wait.relax(looks);
                        looks = looks.saturating_add(1);
                    }
                }
            }
        }
    }
}

/// Breaks the barrier if dropped while its worker unwinds.
pub(crate) struct BreakOnPanic<'a>(pub(crate) &'a SpinBarrier);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.broken.store(true, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks sharing this machine's CPUs take disjoint ones by local rank when all their teams
    /// fit; a rank whose set fits only its own team takes the first; too few, none.
    #[test]
    fn rank_teams_take_disjoint_cpus_when_they_fit() {
        let ids = core_affinity::get_core_ids().expect("this thread's CPUs");
        let n = ids.len();
        for (r, &id) in ids.iter().enumerate() {
            assert_eq!(rank_team_cpus(1, r, n), Some(vec![id]), "rank {r} of {n}");
        }
        // Room for one team of n only: every rank takes the first n (its own set, as with
        // --map-by slot:PE=n, or oversubscribed).
        assert_eq!(rank_team_cpus(n, 1, 2), Some(ids.clone()));
        assert_eq!(
            rank_team_cpus(1, 5, 2),
            Some(vec![ids[0]]),
            "a bad local rank"
        );
        assert_eq!(rank_team_cpus(n + 1, 0, 1), None);
    }

    /// Each round every worker stores the round number in its slot, passes the barrier and
    /// must see every slot at that round; parity slots as the solver uses them. More workers
    /// than cores, so waiters must yield to let the last arrival run.
    #[test]
    fn barrier_orders_every_round() {
        for (n, wait) in [1, 2, 3, 5]
            .into_iter()
            .flat_map(|n| [(n, WaitPolicy::Spin), (n, WaitPolicy::Yield)])
        {
            let barrier = SpinBarrier::with_policy(n, wait);
            let slots = [Slots::new(n), Slots::new(n)];
            std::thread::scope(|s| {
                for t in 0..n {
                    let (barrier, slots) = (&barrier, &slots);
                    s.spawn(move || {
                        let mut bar = barrier.waiter();
                        for round in 0..2000u32 {
                            let mine = &slots[(round % 2) as usize];
                            mine.put(t, f64::from(round));
                            bar.wait();
                            let want = f64::from(round) * n as f64;
                            assert_eq!(mine.sum(), want, "n = {n}, {wait:?}");
                        }
                    });
                }
            });
        }
    }

    /// Teams whose workers outnumber the cores they run on back off; teams that fit spin.
    /// Here: a team with more workers than this process's CPUs, the job's teams together
    /// over the machine's CPUs when this process may use all of them (unbound), and, for
    /// contrast, one worker alone and a team that fits.
    #[test]
    fn teams_over_the_cores_back_off() {
        if std::env::var_os(chan_core::vars::WAIT).is_some() {
            return; // the override decides; nothing to detect
        }
        let own = core_affinity::get_core_ids()
            .expect("this thread's CPUs")
            .len();
        assert_eq!(team_wait_policy(own + 1, 1), WaitPolicy::Yield);
        assert_eq!(team_wait_policy(1, 1), WaitPolicy::Spin);
        assert_eq!(team_wait_policy(own, 1), WaitPolicy::Spin);
        if launch_env::node_cpus().is_some_and(|node| own >= node) {
            // 2 ranks x 2 threads on 2 cores, and the like.
            assert_eq!(team_wait_policy(2, own), WaitPolicy::Yield);
            assert_eq!(team_wait_policy(1, own), WaitPolicy::Spin);
        }
    }

    /// A worker that panics breaks the barrier: the others panic too instead of waiting for
    /// ever, and the panic reaches the caller.
    #[test]
    fn a_panicking_worker_breaks_the_barrier() {
        let barrier = SpinBarrier::with_policy(3, WaitPolicy::Spin);
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::thread::scope(|s| {
                for t in 0..3 {
                    let barrier = &barrier;
                    s.spawn(move || {
                        let mut bar = barrier.waiter();
                        let _guard = BreakOnPanic(barrier);
                        bar.wait();
                        assert!(t != 1, "worker 1 fails");
                        bar.wait();
                    });
                }
            })
        }));
        assert!(out.is_err());
        assert!(barrier.broken.load(Relaxed));
    }
}
