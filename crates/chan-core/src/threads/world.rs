//! The world of the threads backend: spawning ranks, the channel handshake registry, blocking
//! collectives, and failure propagation (a rank that panics or returns early makes every
//! blocking call elsewhere fail instead of hang).

use super::endpoint::{MailboxEnd, MailboxPair, RacyEnd, RacyPair};
use super::Threads;
use crate::config::{ChannelSpec, RESERVED_TAG_BIT};
use crate::context::Context;
use crate::error::{CommError, CreateError};
use crate::mode::ModeKind;
use crate::reduce::{ReduceOp, TreeReduction};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long a blocked collective sleeps before it looks at the world's health again.
const RECHECK: Duration = Duration::from_millis(20);

/// A world that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// Zero threads.
    #[error("a world needs at least 1 thread, got 0")]
    Empty,
}

/// N ranks as N threads. [`World::run`] runs the same closure on every rank.
#[derive(Debug, Clone)]
pub struct World {
    size: usize,
    pin: bool,
}

impl World {
    /// A world of `size` ranks.
    pub fn new(size: usize) -> Result<Self, WorldError> {
        if size == 0 {
            return Err(WorldError::Empty);
        }
        Ok(World { size, pin: false })
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
        let shared = Arc::new(Shared::new(self.size));
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
                                reserved_tags: 0,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    mode: ModeKind,
    len: usize,
    r: usize,
}

#[derive(Clone)]
enum PairKind {
    Mailbox(Arc<MailboxPair>),
    Racy(Arc<RacyPair>),
}

/// (lower rank, higher rank, tag, epoch)
type Key = (usize, usize, u32, u64);

struct Entry {
    first: usize,
    params: Params,
    /// Set by the second end: the pair, or the error as the first end sees it.
    outcome: Option<Result<PairKind, CreateError>>,
}

#[derive(Default)]
struct Coll {
    generation: u64,
    arrived: usize,
    contrib: Vec<Vec<f64>>,
    result: Vec<f64>,
    mismatch: bool,
}

/// State shared by all ranks of one `World::run`.
pub(crate) struct Shared {
    size: usize,
    failed: AtomicBool,
    failure: Mutex<String>,
    exited: AtomicUsize,
    registry: Mutex<HashMap<Key, Entry>>,
    registry_cv: Condvar,
    /// `open_done[r]`: the last open epoch whose handshakes rank r finished.
    open_done: Vec<AtomicU64>,
    coll: Mutex<Coll>,
    coll_cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A rank that panicked while holding the lock left consistent data (every critical section
    // here completes its updates before anything can panic); keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn new(size: usize) -> Self {
        Shared {
            size,
            failed: AtomicBool::new(false),
            failure: Mutex::new(String::new()),
            exited: AtomicUsize::new(0),
            registry: Mutex::new(HashMap::new()),
            registry_cv: Condvar::new(),
            open_done: (0..size).map(|_| AtomicU64::new(0)).collect(),
            coll: Mutex::new(Coll {
                contrib: vec![Vec::new(); size],
                ..Coll::default()
            }),
            coll_cv: Condvar::new(),
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
        // Take each lock so a waiter between its check and its wait cannot miss the wake-up.
        drop(lock(&self.registry));
        self.registry_cv.notify_all();
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

    /// Blocking all-reduce; contributions are combined in rank order.
    fn all_reduce(&self, rank: usize, data: &mut [f64], op: ReduceOp) -> Result<(), CommError> {
        let mut c = lock(&self.coll);
        let generation = c.generation;
        c.contrib[rank].clear();
        c.contrib[rank].extend_from_slice(data);
        c.arrived += 1;
        if c.arrived == self.size {
            let Coll {
                contrib,
                result,
                mismatch,
                ..
            } = &mut *c;
            *mismatch = contrib.iter().any(|v| v.len() != contrib[0].len());
            result.clear();
            result.extend_from_slice(&contrib[0]);
            if !*mismatch {
                for v in &contrib[1..] {
                    op.combine(result, v);
                }
            }
            c.arrived = 0;
            c.generation += 1;
            self.coll_cv.notify_all();
        } else {
            while c.generation == generation {
                if let Err(e) = self.check_collective() {
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
        if c.mismatch {
            return Err(CommError::Backend {
                backend: "threads",
                call: "all_reduce",
                message: "ranks passed different lengths".into(),
            });
        }
        data.copy_from_slice(&c.result);
        Ok(())
    }

    /// Collective creation of one set of channel ends (see [`Context::open`]).
    fn open_set(
        self: &Arc<Self>,
        rank: usize,
        epoch: u64,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<PairKind>, CreateError> {
        let (valid, mut local_err) = ChannelSpec::check_set(rank, self.size, specs);

        // Post every valid end, completing those whose peer is already there.
        let mut outcomes: Vec<Option<Result<PairKind, CreateError>>> = vec![None; specs.len()];
        {
            let mut reg = lock(&self.registry);
            for (i, s) in specs.iter().enumerate().filter(|(i, _)| valid[*i]) {
                let key = (rank.min(s.peer), rank.max(s.peer), s.tag, epoch);
                let mine = Params {
                    mode,
                    len: s.config.len(),
                    r: s.config.max_in_flight(),
                };
                match reg.get_mut(&key) {
                    Some(e) if e.first != rank && e.outcome.is_none() => {
                        let theirs = e.params;
                        let check = |a: Params, b: Params, me: usize, other: usize| {
                            CreateError::check_match(
                                me,
                                other,
                                s.tag,
                                (a.mode, a.len, a.r),
                                (b.mode, b.len, b.r),
                            )
                        };
                        match check(mine, theirs, rank, s.peer) {
                            Ok(()) => {
                                let pair = match mode {
                                    ModeKind::Racy => {
                                        PairKind::Racy(Arc::new(RacyPair::new(mine.len)))
                                    }
                                    _ => PairKind::Mailbox(Arc::new(MailboxPair::new(
                                        mine.len, mine.r,
                                    ))),
                                };
                                e.outcome = Some(Ok(pair.clone()));
                                outcomes[i] = Some(Ok(pair));
                            }
                            Err(err) => {
                                e.outcome = Some(Err(check(theirs, mine, s.peer, rank)
                                    .expect_err("a mismatch is symmetric")));
                                outcomes[i] = Some(Err(err));
                            }
                        }
                    }
                    _ => {
                        reg.insert(
                            key,
                            Entry {
                                first: rank,
                                params: mine,
                                outcome: None,
                            },
                        );
                    }
                }
            }
        }
        self.registry_cv.notify_all();

        // Wait for the ends this rank posted first.
        {
            let mut reg = lock(&self.registry);
            loop {
                let mut waiting = false;
                for (i, s) in specs.iter().enumerate() {
                    if !valid[i] || outcomes[i].is_some() {
                        continue;
                    }
                    let key = (rank.min(s.peer), rank.max(s.peer), s.tag, epoch);
                    let done = reg.get(&key).and_then(|e| e.outcome.clone());
                    if let Some(o) = done {
                        reg.remove(&key);
                        outcomes[i] = Some(o);
                    } else if self.open_done[s.peer].load(Ordering::SeqCst) >= epoch
                        || self.exited.load(Ordering::SeqCst) > 0
                            && self.failed.load(Ordering::SeqCst)
                    {
                        reg.remove(&key);
                        outcomes[i] = Some(Err(CreateError::Unmatched {
                            rank,
                            peer: s.peer,
                            tag: s.tag,
                        }));
                    } else {
                        waiting = true;
                    }
                }
                if !waiting {
                    break;
                }
                if let Err(e) = self.check() {
                    for (i, s) in specs.iter().enumerate() {
                        if valid[i] && outcomes[i].is_none() {
                            reg.remove(&(rank.min(s.peer), rank.max(s.peer), s.tag, epoch));
                        }
                    }
                    return Err(e.into());
                }
                reg = self
                    .registry_cv
                    .wait_timeout(reg, RECHECK)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            // Under the registry lock, so a peer that checks `open_done` sees either our
            // completion of its entry or this mark, never neither.
            self.open_done[rank].store(epoch, Ordering::SeqCst);
        }
        self.registry_cv.notify_all();

        let mut pairs = Vec::with_capacity(specs.len());
        for o in outcomes.into_iter().flatten() {
            match o {
                Ok(p) => pairs.push(p),
                Err(e) => {
                    local_err.get_or_insert(e);
                }
            }
        }

        // Collective agreement: fail everywhere if it failed anywhere.
        let mut vote = [if local_err.is_some() {
            rank as f64
        } else {
            f64::INFINITY
        }];
        self.all_reduce(rank, &mut vote, ReduceOp::Min)?;
        if let Some(e) = local_err {
            return Err(e);
        }
        if vote[0].is_finite() {
            return Err(CreateError::FailedElsewhere {
                failed_rank: vote[0] as usize,
            });
        }
        Ok(pairs)
    }
}

/// One rank of a threads [`World`].
pub struct ThreadCtx {
    rank: usize,
    shared: Arc<Shared>,
    epoch: u64,
    reserved_tags: u32,
}

impl std::fmt::Debug for ThreadCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCtx")
            .field("rank", &self.rank)
            .field("size", &self.shared.size)
            .finish()
    }
}

impl ThreadCtx {
    fn open_pairs(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<PairKind>, CreateError> {
        self.epoch += 1;
        self.shared.open_set(self.rank, self.epoch, mode, specs)
    }
}

impl Context for ThreadCtx {
    type Backend = Threads;
    type Reduction = TreeReduction<Threads>;

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn open_mailboxes(
        &mut self,
        mode: ModeKind,
        specs: &[ChannelSpec],
    ) -> Result<Vec<MailboxEnd>, CreateError> {
        let pairs = self.open_pairs(mode, specs)?;
        Ok(pairs
            .into_iter()
            .zip(specs)
            .map(|(p, s)| match p {
                PairKind::Mailbox(pair) => MailboxEnd::new(
                    pair,
                    Arc::clone(&self.shared),
                    usize::from(self.rank > s.peer),
                    s.peer,
                    s.config.len(),
                    s.config.max_in_flight(),
                ),
                PairKind::Racy(_) => unreachable!("a mailbox handshake builds mailbox pairs"),
            })
            .collect())
    }

    fn open_racy(&mut self, specs: &[ChannelSpec]) -> Result<Vec<RacyEnd>, CreateError> {
        let pairs = self.open_pairs(ModeKind::Racy, specs)?;
        Ok(pairs
            .into_iter()
            .zip(specs)
            .map(|(p, s)| match p {
                PairKind::Racy(pair) => RacyEnd::new(
                    pair,
                    Arc::clone(&self.shared),
                    usize::from(self.rank > s.peer),
                    s.peer,
                    s.config.len(),
                    s.config.max_in_flight(),
                ),
                PairKind::Mailbox(_) => unreachable!("a racy handshake builds racy pairs"),
            })
            .collect())
    }

    fn reduction(
        &mut self,
        len: usize,
        op: ReduceOp,
    ) -> Result<TreeReduction<Threads>, CreateError> {
        TreeReduction::new(self, len, op)
    }

    fn next_reserved_tag(&mut self) -> u32 {
        self.reserved_tags += 1;
        self.reserved_tags | RESERVED_TAG_BIT
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        self.shared.all_reduce(self.rank, &mut [], ReduceOp::Sum)
    }

    fn all_reduce(&mut self, data: &mut [f64], op: ReduceOp) -> Result<(), CommError> {
        self.shared.all_reduce(self.rank, data, op)
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
