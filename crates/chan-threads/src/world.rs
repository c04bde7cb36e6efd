//! The world of the threads backend: spawning ranks, blocking collectives, the registry that
//! hands both ends of an agreed channel the same shared state, and failure propagation (a rank that panics or returns early makes every
//! blocking call elsewhere fail instead of hang).

use crate::endpoint::{MailboxEnd, MailboxPair, RacyEnd, RacyPair};
use crate::window::{ThreadWindow, WinMem};
use crate::Threads;
use chan_core::backend::{
    Agreed, ChannelHooks, Collective, EnvVarError, Lists, PairAgreed, PairOffer, ReservedTags,
    Shared as SharedDelivery, Slots, WaitPolicy, WindowHooks, WindowMode,
};
use chan_core::{ChannelSpec, CommError, CreateError, ReduceOp, TreeReduction};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a blocked collective sleeps before it looks at the world's health again.
const RECHECK: Duration = Duration::from_millis(20);

/// A world that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// Zero threads.
    #[error("a world needs at least 1 thread, got 0")]
    Empty,
    /// `AIAC_WAIT` holds a value it does not accept.
    #[error(transparent)]
    Env(#[from] EnvVarError),
}

/// N ranks as N threads. [`World::run`] runs the same closure on every rank.
#[derive(Debug, Clone)]
pub struct World {
    size: usize,
    pin: bool,
    wait: WaitPolicy,
}

impl World {
    /// A world of `size` ranks. With more ranks than the CPUs this process may use (or
    /// `AIAC_WAIT=yield`) its channels wait by yielding ([`WaitPolicy`], [`World::wait_policy`]).
    pub fn new(size: usize) -> Result<Self, WorldError> {
        if size == 0 {
            return Err(WorldError::Empty);
        }
        let wait = WaitPolicy::detect(None, Some(size))?;
        Ok(World {
            size,
            pin: false,
            wait,
        })
    }

    /// How the ranks' channels wait: [`WaitPolicy::Yield`] when the world has more ranks than
    /// CPUs. A receive that finds nothing new then gives the core away, as a SHMEM poll and
    /// Open MPI's progress do on an oversubscribed node: two neighbours sharing a core would
    /// otherwise never run at once, and an async channel between them would carry its R
    /// messages per time slice. [`WaitPolicy::Spin`] (a CPU per rank) still yields once per
    /// 64 receives in a row that found nothing: other programs or threads may hold the CPUs
    /// it counted on. Blocking waits yield after 64 spins whatever the policy.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.wait
    }

    /// Pin rank r's thread to the r-th of the CPUs the thread calling [`World::run`] may use.
    /// Two unpinned ranks that busy-poll can be placed on one core and run many times slower
    /// until the scheduler moves one; one rank per CPU rules that out. With more ranks than
    /// CPUs (oversubscribed) pinning would stack busy-polling ranks on a core for good, so
    /// the threads then run unpinned, as they do where the CPUs cannot be listed or set.
    pub fn pinned(mut self) -> Self {
        self.pin = true;
        self
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Run `f` on every rank, each on its own thread, and return the results in rank order.
    /// If a rank panics, every blocking call on the other ranks fails with
    /// [`CommError::WorldFailed`] (so they finish), and the first panic is resumed here.
    pub fn run<T, F>(&self, f: F) -> Vec<T>
    where
        T: Send,
        F: Fn(&mut ThreadCtx) -> T + std::marker::Sync,
    {
        let shared = Arc::new(Shared::new(self.size, self.wait));
        let cpus = if self.pin {
            core_affinity::get_core_ids()
                .filter(|ids| ids.len() >= self.size)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let outcomes: Vec<std::thread::Result<T>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.size)
                .map(|rank| {
                    let shared = Arc::clone(&shared);
                    let f = &f;
                    let cpu = cpus.get(rank).copied();
                    std::thread::Builder::new()
                        .name(format!("aiac-rank-{rank}"))
                        .spawn_scoped(scope, move || {
                            if let Some(cpu) = cpu {
                                core_affinity::set_for_current(cpu);
                            }
                            let guard = ExitGuard {
                                shared: Arc::clone(&shared),
                                rank,
                            };
                            let mut ctx = ThreadCtx {
                                rank,
                                shared,
                                epoch: 0,
                                windows: 0,
                                reserved_tags: ReservedTags::new(),
                                meeting: 0,
                            };
                            let out = f(&mut ctx);
                            drop(ctx);
                            drop(guard);
                            out
                        })
                        .expect("spawning a rank thread")
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut results = Vec::with_capacity(self.size);
        for o in outcomes {
            match o {
                Ok(v) => results.push(v),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        results
    }
}

/// Marks a rank's exit; a panicking exit fails the world.
struct ExitGuard {
    shared: Arc<Shared>,
    rank: usize,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.fail(format!("rank {} panicked", self.rank));
        }
        self.shared.exited.fetch_add(1, Ordering::SeqCst);
        self.shared.wake_all();
    }
}

#[derive(Clone)]
enum PairKind {
    Mailbox(Arc<MailboxPair>),
    Racy(Arc<RacyPair>),
}

/// (lower rank, higher rank, tag, wiring epoch)
type Key = (usize, usize, u32, u64);

/// The wiring epochs of pairwise channels: this bit and the meeting's serial number, apart
/// from the collective epochs (a count of wiring calls, far below it).
const PAIR_EPOCH: u64 = 1 << 63;

/// A pairwise creation waiting for its peer (`Shared::meets`, keyed by (lower rank, higher
/// rank, tag)): posted by the end that came first, answered by the other.
struct Meet {
    /// The rank that posted it.
    from: usize,
    offer: PairOffer,
    /// The peer's offer and the meeting's serial number, once it came.
    answer: Option<(PairOffer, u64)>,
}

#[derive(Default)]
struct Coll {
    generation: u64,
    arrived: usize,
    contrib: Vec<Vec<f64>>,
    result: Vec<f64>,
    mismatch: bool,
    /// The word lists of an exchange round ([`Shared::exchange`]), and every rank's once all
    /// arrived.
    words: Vec<Vec<u64>>,
    all_words: Arc<Vec<Vec<u64>>>,
    /// The non-empty lists of an all-to-all round ([`Shared::all_to_all`]), per sender:
    /// `(receiver, list)` in receiver order; every sender's once all arrived. Sparse, so a
    /// round holds the words sent, not a count for every pair of ranks.
    sparse: Vec<Sparse>,
    all_sparse: Arc<Vec<Sparse>>,
}

/// One sender's non-empty lists of an all-to-all, by receiver (ascending).
type Sparse = Vec<(usize, Vec<u64>)>;

/// State shared by all ranks of one `World::run`.
pub(crate) struct Shared {
    size: usize,
    /// How the channels of this world wait ([`World::wait_policy`]).
    pub(crate) wait: WaitPolicy,
    failed: AtomicBool,
    failure: Mutex<String>,
    exited: AtomicUsize,
    /// Agreed channels whose first end was wired, waiting for the second.
    registry: Mutex<HashMap<Key, PairKind>>,
    coll: Mutex<Coll>,
    coll_cv: Condvar,
    /// Windows being created: the memory, made by the first rank, and how many ranks took it.
    windows: Mutex<HashMap<u64, (Arc<WinMem>, usize)>>,
    /// Pairwise creations whose first end waits for the second, by (lower rank, higher rank,
    /// tag); an entry lives only while its poster is inside `pair_meet`.
    meets: Mutex<HashMap<(usize, usize, u32), Meet>>,
    meet_cv: Condvar,
    /// Serial numbers of pairwise meetings, which key their pairs in `registry`.
    meetings: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A rank that panicked while holding the lock left consistent data (every critical section
    // here completes its updates before anything can panic); keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn new(size: usize, wait: WaitPolicy) -> Self {
        Shared {
            size,
            wait,
            failed: AtomicBool::new(false),
            failure: Mutex::new(String::new()),
            exited: AtomicUsize::new(0),
            registry: Mutex::new(HashMap::new()),
            coll: Mutex::new(Coll {
                contrib: vec![Vec::new(); size],
                words: vec![Vec::new(); size],
                sparse: vec![Vec::new(); size],
                ..Coll::default()
            }),
            coll_cv: Condvar::new(),
            windows: Mutex::new(HashMap::new()),
            meets: Mutex::new(HashMap::new()),
            meet_cv: Condvar::new(),
            meetings: AtomicU64::new(0),
        }
    }

    /// The rendezvous of a pairwise creation (`ChannelHooks::pair_meet`): answer the peer's
    /// posted offer, or post this rank's and wait for the answer until `deadline`. Posting,
    /// answering and withdrawing happen under one lock, so a withdrawn offer was never
    /// answered and an answered one is never withdrawn: both ends see the same outcome.
    fn meet(
        &self,
        rank: usize,
        peer: usize,
        tag: u32,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<(PairOffer, u64)>, CommError> {
        let key = (rank.min(peer), rank.max(peer), tag);
        let mut m = lock(&self.meets);
        // Answer the peer's offer, or post ours once the key is free (an entry of the peer's
        // this rank answered in an earlier call goes as soon as the peer wakes).
        loop {
            self.check()?;
            match m.get_mut(&key) {
                Some(e) if e.from == peer && e.answer.is_none() => {
                    // Relaxed: a unique number is all that is needed; the lock orders the rest.
                    let serial = self.meetings.fetch_add(1, Ordering::Relaxed);
                    e.answer = Some((mine, serial));
                    let theirs = e.offer;
                    self.meet_cv.notify_all();
                    return Ok(Some((theirs, serial)));
                }
                Some(_) => {}
                None => {
                    m.insert(
                        key,
                        Meet {
                            from: rank,
                            offer: mine,
                            answer: None,
                        },
                    );
                    break;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            m = self
                .meet_cv
                .wait_timeout(m, (deadline - now).min(RECHECK))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        loop {
            let answered = m.get(&key).and_then(|e| e.answer);
            if let Some(answer) = answered {
                m.remove(&key);
                self.meet_cv.notify_all();
                return Ok(Some(answer));
            }
            let now = Instant::now();
            let failed = self.check();
            if now >= deadline || failed.is_err() {
                // Withdrawn unanswered: the peer, if it comes later, posts its own and waits
                // in turn until its deadline.
                m.remove(&key);
                self.meet_cv.notify_all();
                return failed.map(|()| None);
            }
            m = self
                .meet_cv
                .wait_timeout(m, (deadline - now).min(RECHECK))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn fail(&self, why: String) {
        let mut f = lock(&self.failure);
        if f.is_empty() {
            *f = why;
        }
        // SeqCst: one flag read by every blocking loop; no data depends on it.
        self.failed.store(true, Ordering::SeqCst);
    }

    fn wake_all(&self) {
        // Take the lock so a waiter between its check and its wait cannot miss the wake-up.
        drop(lock(&self.coll));
        self.coll_cv.notify_all();
    }

    /// Err when a rank failed.
    pub(crate) fn check(&self) -> Result<(), CommError> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(CommError::WorldFailed(lock(&self.failure).clone()));
        }
        Ok(())
    }

    /// Err when a rank failed or exited: a collective cannot complete any more.
    fn check_collective(&self) -> Result<(), CommError> {
        self.check()?;
        let gone = self.exited.load(Ordering::SeqCst);
        if gone > 0 {
            return Err(CommError::WorldFailed(format!(
                "{gone} rank(s) returned without joining a collective call"
            )));
        }
        Ok(())
    }

    /// One blocking collective round: `deposit` this rank's contribution; the last rank to
    /// arrive runs `complete` on every contribution and opens the next round; every rank then
    /// `read`s the result. The next round cannot complete before this rank joins it, so what
    /// `read` sees is this round's.
    fn round<A: ?Sized, T>(
        &self,
        arg: &mut A,
        deposit: impl FnOnce(&mut Coll, &mut A),
        complete: impl FnOnce(&mut Coll),
        read: impl FnOnce(&Coll, &mut A) -> T,
    ) -> Result<T, CommError> {
        let mut c = lock(&self.coll);
        let generation = c.generation;
        deposit(&mut c, arg);
        c.arrived += 1;
        if c.arrived == self.size {
            complete(&mut c);
            c.arrived = 0;
            c.generation += 1;
            self.coll_cv.notify_all();
        } else {
            while c.generation == generation {
                if let Err(e) = self.check_collective() {
                    // A contribution left behind is overwritten by the next deposit.
                    c.arrived -= 1;
                    return Err(e);
                }
                c = self
                    .coll_cv
                    .wait_timeout(c, RECHECK)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        Ok(read(&c, arg))
    }

    /// Blocking all-reduce; contributions are combined in rank order.
    pub(crate) fn all_reduce(
        &self,
        rank: usize,
        data: &mut [f64],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let mismatch = self.round(
            data,
            |c, data| {
                c.contrib[rank].clear();
                c.contrib[rank].extend_from_slice(data);
            },
            |c| {
                let Coll {
                    contrib,
                    result,
                    mismatch,
                    ..
                } = c;
                *mismatch = contrib.iter().any(|v| v.len() != contrib[0].len());
                result.clear();
                result.extend_from_slice(&contrib[0]);
                if !*mismatch {
                    for v in &contrib[1..] {
                        op.combine(result, v);
                    }
                }
            },
            |c, data| {
                if !c.mismatch {
                    data.copy_from_slice(&c.result);
                }
                c.mismatch
            },
        )?;
        if mismatch {
            return Err(misuse(
                "all_reduce",
                "ranks passed different lengths".into(),
            ));
        }
        Ok(())
    }

    /// Blocking exchange: every rank contributes a list of words and gets every rank's, in
    /// rank order (the all-gather behind [`Collective::all_to_all_v`] and
    /// [`Collective::gather_v`]).
    fn exchange(&self, rank: usize, mine: Vec<u64>) -> Result<Arc<Vec<Vec<u64>>>, CommError> {
        self.round(
            &mut Some(mine),
            |c, mine| c.words[rank] = mine.take().unwrap_or_default(),
            |c| c.all_words = Arc::new(c.words.iter_mut().map(std::mem::take).collect()),
            |c, _| Arc::clone(&c.all_words),
        )
    }

    /// Blocking all-to-all of sparse lists: every rank deposits its non-empty lists by
    /// receiver and gets every sender's deposit, in rank order. A receiver finds its list in
    /// each by binary search, so a round costs each rank O(size · log k), k its lists, not
    /// O(size²).
    fn all_to_all(&self, rank: usize, mine: Sparse) -> Result<Arc<Vec<Sparse>>, CommError> {
        self.round(
            &mut Some(mine),
            |c, mine| c.sparse[rank] = mine.take().unwrap_or_default(),
            |c| c.all_sparse = Arc::new(c.sparse.iter_mut().map(std::mem::take).collect()),
            |c, _| Arc::clone(&c.all_sparse),
        )
    }

    /// The shared state of an agreed channel: made by whichever end is wired first, taken
    /// by the other.
    fn pair(&self, key: Key, make: impl FnOnce() -> PairKind) -> PairKind {
        let mut reg = lock(&self.registry);
        match reg.remove(&key) {
            Some(p) => p,
            None => {
                let p = make();
                reg.insert(key, p.clone());
                p
            }
        }
    }
}

/// One rank of a threads [`World`].
pub struct ThreadCtx {
    rank: usize,
    shared: Arc<Shared>,
    epoch: u64,
    /// Windows this rank created (every rank creates them in the same order).
    windows: u64,
    reserved_tags: ReservedTags,
    /// The serial number of this rank's last pairwise meeting, which keys its pair.
    meeting: u64,
}

impl std::fmt::Debug for ThreadCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCtx")
            .field("rank", &self.rank)
            .field("size", &self.shared.size)
            .finish()
    }
}

impl Collective for ThreadCtx {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        self.shared.all_reduce(self.rank, &mut [], ReduceOp::Sum)
    }

    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError> {
        self.shared.all_reduce(self.rank, data, op)
    }

    fn all_to_all_v(&mut self, send: &Lists) -> Result<Lists, CommError> {
        let size = self.shared.size;
        if send.len() != size {
            return Err(misuse(
                "all_to_all_v",
                format!("{} lists for {size} ranks", send.len()),
            ));
        }
        // Only the non-empty lists travel (a rank talks to a handful of neighbours).
        let mine: Sparse = (0..size)
            .map(|p| (p, send.list(p)))
            .filter(|(_, l)| !l.is_empty())
            .map(|(p, l)| (p, l.to_vec()))
            .collect();
        let all = self.shared.all_to_all(self.rank, mine)?;
        let mut out = Lists::with_capacity(size, 0);
        for theirs in all.iter() {
            match theirs.binary_search_by_key(&self.rank, |(p, _)| *p) {
                Ok(i) => out.push(&theirs[i].1),
                Err(_) => out.end_list(),
            }
        }
        Ok(out)
    }

    fn gather_v(&mut self, mine: &[u64], root: usize) -> Result<Option<Lists>, CommError> {
        let all = self.shared.exchange(self.rank, mine.to_vec())?;
        Ok((self.rank == root).then(|| {
            let mut out = Lists::with_capacity(all.len(), 0);
            all.iter().for_each(|l| out.push(l));
            out
        }))
    }
}

impl ThreadCtx {
    /// The shared state of each agreed end, in the agreement's order.
    fn pairs<D: chan_core::backend::Delivery>(
        &mut self,
        agreed: &Agreed<D>,
        make: impl Fn(usize, usize) -> PairKind,
    ) -> Vec<PairKind> {
        self.epoch += 1;
        agreed
            .ends()
            .iter()
            .map(|e| {
                let (s, me) = (e.spec, self.rank);
                let key = (me.min(s.peer), me.max(s.peer), s.tag, self.epoch);
                self.shared
                    .pair(key, || make(s.config.len(), s.config.max_in_flight()))
            })
            .collect()
    }
}

impl ThreadCtx {
    /// The registry key of the pair of the last pairwise meeting, on the channel of `s`.
    fn pair_key(&self, s: &ChannelSpec) -> Key {
        let me = self.rank;
        (
            me.min(s.peer),
            me.max(s.peer),
            s.tag,
            PAIR_EPOCH | self.meeting,
        )
    }
}

impl ChannelHooks for ThreadCtx {
    type Backend = Threads;
    type Reduction = TreeReduction<Threads>;

    fn wire_slots(&mut self, agreed: Agreed<Slots>) -> Result<Vec<MailboxEnd>, CreateError> {
        let pairs = self.pairs(&agreed, |len, r| {
            PairKind::Mailbox(Arc::new(MailboxPair::new(len, r)))
        });
        Ok(pairs
            .into_iter()
            .zip(agreed.ends())
            .map(|(p, e)| {
                let PairKind::Mailbox(pair) = p else {
                    unreachable!("a key names one channel, wired with one delivery at both ends")
                };
                let s = e.spec;
                MailboxEnd::new(
                    pair,
                    Arc::clone(&self.shared),
                    usize::from(self.rank > s.peer),
                    s.config.max_in_flight(),
                )
            })
            .collect())
    }

    fn wire_shared(&mut self, agreed: Agreed<SharedDelivery>) -> Result<Vec<RacyEnd>, CreateError> {
        let pairs = self.pairs(&agreed, |len, _| {
            PairKind::Racy(Arc::new(RacyPair::new(len)))
        });
        Ok(pairs
            .into_iter()
            .zip(agreed.ends())
            .map(|(p, e)| {
                let PairKind::Racy(pair) = p else {
                    unreachable!("a key names one channel, wired with one delivery at both ends")
                };
                RacyEnd::new(
                    pair,
                    Arc::clone(&self.shared),
                    usize::from(self.rank > e.spec.peer),
                )
            })
            .collect())
    }

    fn pair_meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        let met = self
            .shared
            .meet(self.rank, spec.peer, spec.tag, mine, deadline)?;
        Ok(met.map(|(theirs, serial)| {
            self.meeting = serial;
            theirs
        }))
    }

    fn pair_wire_slots(&mut self, agreed: PairAgreed<Slots>) -> Result<MailboxEnd, CreateError> {
        let s = agreed.spec;
        let (len, r) = (s.config.len(), s.config.max_in_flight());
        let key = self.pair_key(&s);
        let PairKind::Mailbox(pair) = self.shared.pair(key, || {
            PairKind::Mailbox(Arc::new(MailboxPair::new(len, r)))
        }) else {
            unreachable!("a meeting names one channel, wired with one delivery at both ends")
        };
        Ok(MailboxEnd::new(
            pair,
            Arc::clone(&self.shared),
            usize::from(self.rank > s.peer),
            r,
        ))
    }

    fn pair_wire_shared(
        &mut self,
        agreed: PairAgreed<SharedDelivery>,
    ) -> Result<RacyEnd, CreateError> {
        let s = agreed.spec;
        let len = s.config.len();
        let key = self.pair_key(&s);
        let PairKind::Racy(pair) = self
            .shared
            .pair(key, || PairKind::Racy(Arc::new(RacyPair::new(len))))
        else {
            unreachable!("a meeting names one channel, wired with one delivery at both ends")
        };
        Ok(RacyEnd::new(
            pair,
            Arc::clone(&self.shared),
            usize::from(self.rank > s.peer),
        ))
    }

    fn make_reduction(
        &mut self,
        len: usize,
        op: ReduceOp,
    ) -> Result<TreeReduction<Threads>, CreateError> {
        TreeReduction::new(self, len, op)
    }

    fn reserved_tags(&mut self) -> &mut ReservedTags {
        &mut self.reserved_tags
    }
}

impl WindowHooks for ThreadCtx {
    type Window = ThreadWindow;

    fn make_window(&mut self, len: usize, _mode: WindowMode) -> Result<ThreadWindow, CreateError> {
        let key = self.windows;
        self.windows += 1;
        let size = self.shared.size;
        let mem = {
            let mut reg = lock(&self.shared.windows);
            let entry = reg
                .entry(key)
                .or_insert_with(|| (Arc::new(WinMem::new(size, len)), 0));
            entry.1 += 1;
            let mem = Arc::clone(&entry.0);
            if entry.1 == size {
                reg.remove(&key);
            }
            mem
        };
        Ok(ThreadWindow::new(
            mem,
            Arc::clone(&self.shared),
            self.rank,
            len,
        ))
    }
}

fn misuse(call: &'static str, message: String) -> CommError {
    CommError::Backend {
        backend: "threads",
        call,
        message,
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::World;

    /// The CPUs the calling thread may use.
    fn allowed() -> Vec<usize> {
        core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect()
    }

    #[test]
    fn pinned_ranks_get_one_cpu_each_and_oversubscribed_ones_none() {
        let cpus = allowed();
        if cpus.len() < 2 {
            return; // nothing to pin apart on a single CPU
        }
        let n = cpus.len().min(4);
        let seen = World::new(n).unwrap().pinned().run(|_| allowed());
        assert!(seen.iter().all(|s| s.len() == 1), "{seen:?}");
        let mut ids: Vec<usize> = seen.iter().map(|s| s[0]).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "two ranks on one CPU: {seen:?}");
        // More ranks than CPUs: pinning would stack busy-polling ranks; they run unpinned.
        let over = World::new(cpus.len() + 1)
            .unwrap()
            .pinned()
            .run(|_| allowed());
        assert!(over.iter().all(|s| s.len() == cpus.len()), "{over:?}");
        // The calling thread is left as it was.
        assert_eq!(allowed(), cpus);
    }
}
