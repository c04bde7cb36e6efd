//! The shared-memory variants (`--backend shared`): the paper's OpenMP section with rayon.
//! The grid is split in z over T threads (1-D decomposition); threads read their neighbours'
//! boundary planes directly, with no messages.
//!
//! * **sync**: one pair of global arrays and one parallel region for the whole solve; each
//!   worker (a pool thread, pinned with `AIAC_SHARED_PIN=1`) owns a fixed range of planes, sweeps it from the old array
//!   (neighbours' planes included) into the new one, and meets the others at one spinning,
//!   then yielding, barrier per sweep; the residual is summed from per-worker slots in worker
//!   order, so the iterates and the iteration count are those of a serial run.
//! * **async**: each thread iterates on its own slab. Each inter-thread boundary plane has a
//!   lock, taken while the plane is written (by its owner, after each sweep) or read (by the
//!   neighbour, before each sweep).
//! * **racy**: the same with atomic boundary planes ([`AtomicF64`], relaxed) and no locks;
//!   the slabs' interior stays plain `f64`, so the sweep vectorises.
//!
//! A thread that finds nothing new in a neighbour's plane gives its core away as the run's
//! wait policy says (chan-core's `WaitPolicy`, as a threads-backend receive does).
//!
//! Async and racy estimate the global residual by rounds: each thread keeps its newest
//! slab Σ r² in a slot, and once every thread has swept since a round opened, the last one
//! sums the slots ([`Team`]). When two rounds in a row meet the criterion (or a thread
//! reaches `max_iters`) the threads meet at a barrier, compute the true residual from
//! current planes, and stop or carry on, all alike (`confirm`; without it they stop at
//! once).

use crate::config::{Config, ConfigError, Variant};
use crate::field::{assemble, Field};
use crate::geometry::{Axis, Dims, Face, Plan, ProcGrid};
use crate::kernel::{self, Shape};
use crate::progress::{History, HistoryPoint, Progress, ProgressGate};
use crate::record::{Certification, MessageTotals, RankRecord, Residuals, StopReason};
use crate::slow::Slowdown;
use crate::team::{team_cpus, BreakOnPanic, CacheLine, Slots, SpinBarrier, Waiter};
use crate::Error;
use chan_core::backend::{EnvVarError, IdleStreak, WaitPolicy};
use chan_core::{AtomicF64, AtomicF64Slice};
use std::sync::atomic::{
    AtomicU64, AtomicU8, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};
use std::sync::{Barrier, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a shared-memory run ends with.
#[derive(Debug)]
pub(crate) struct SharedOutcome {
    /// One record per thread.
    pub(crate) records: Vec<RankRecord>,
    /// The decomposition used (1 × 1 × T).
    #[cfg_attr(not(test), allow(dead_code))] // read by the crate's tests
    pub(crate) plan: Plan,
    /// The final global interior, x fastest.
    #[cfg_attr(not(test), allow(dead_code))] // read by the crate's tests
    pub(crate) solution: Vec<f64>,
}

impl Config {
    /// The decomposition of a shared-memory run over `threads` threads: always 1 × 1 × T.
    /// The block per rank is each thread's slab; the global grid must split evenly in z.
    /// Validates the configuration as [`Config::plan_in`] does for shared memory.
    pub fn shared_plan(&self, threads: usize) -> Result<Plan, ConfigError> {
        self.plan_in(&self.context(crate::Backend::SHARED), threads)
    }
}

/// Run on `threads` threads of this process with shared memory: the shared-memory entry point.
/// One record per thread.
pub fn solve_shared(cfg: &Config, threads: usize) -> Result<Vec<RankRecord>, Error> {
    let plan = cfg.shared_plan(threads)?;
    solve_shared_with(cfg, &plan, None)
}

/// As [`solve_shared`], over the decomposition `plan` that [`Config::shared_plan`] gave (its
/// process grid 1 × 1 × T names the thread count), calling `progress` (when given) from
/// thread 0 as the run goes, at most 10 times a second.
pub fn solve_shared_with(
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
) -> Result<Vec<RankRecord>, Error> {
    solve(cfg, plan, progress).map(|o| o.records)
}

/// As [`solve_shared_with`], also returning the final solution.
pub(crate) fn solve(
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
) -> Result<SharedOutcome, Error> {
    let pin = EnvVarError::switch(
        PIN_ENV,
        "1 (pin the sync workers, one per CPU), 0 or unset (unpinned)",
    )
    .map_err(|e| Error::Pool(e.to_string()))?;
    solve_pinned(cfg, plan, progress, pin)
}

/// The variable that pins the sync variant's workers, one per CPU: `1` (unset, empty or `0`:
/// unpinned). Off by default: on a machine where another program keeps one core busy, a
/// worker pinned to that core gets half of it and every sweep waits for that worker (the
/// 50³-per-thread run took 1.8× as long pinned as unpinned, docs/performance.md), where the
/// scheduler moves unpinned workers to the free core.
const PIN_ENV: &str = "AIAC_SHARED_PIN";

/// As [`solve`], the sync variant's workers pinned or not as `pin` says.
fn solve_pinned(
    cfg: &Config,
    plan: &Plan,
    progress: Option<&dyn Progress>,
    pin: bool,
) -> Result<SharedOutcome, Error> {
    let threads = plan.procs.size();
    if plan.procs != ProcGrid(Dims::new(1, 1, threads)) {
        return Err(ConfigError::Unsupported {
            setting: crate::Setting::Grid,
            value: plan.procs.to_string(),
            backend: crate::Backend::SHARED.name,
            why: crate::Limit::SharedGrid,
        }
        .into());
    }
    let gate = ProgressGate::new(progress, cfg.criterion.tol(), cfg.max_iters);
    let variant = cfg.variant();
    let pool = pool(threads, pin && variant == Variant::Sync)?;
    // As a threads-backend world of as many ranks waits (`chan_threads::World::new`).
    let policy = || WaitPolicy::detect(None, Some(threads)).map_err(|e| Error::Pool(e.to_string()));
    match variant {
        Variant::Sync => Ok(sync(cfg, plan, &pool, gate)),
        Variant::Async => Ok(asynchronous::<LockedPlanes>(
            cfg,
            plan,
            &pool,
            gate,
            policy()?,
        )),
        Variant::Racy => Ok(asynchronous::<AtomicPlanes>(
            cfg,
            plan,
            &pool,
            gate,
            policy()?,
        )),
    }
}

/// The run's pool of `threads` threads, thread i named `aiac-shared-i`. With `pin`, thread i
/// is pinned to the i-th CPU this process may use, as `chan_threads::World::pinned` pins its
/// ranks: each sync worker then sweeps its planes on one core for the whole solve. With
/// more threads than those CPUs (or where they cannot be listed) the threads run unpinned:
/// pinning would stack two of them on one core for good.
fn pool(threads: usize, pin: bool) -> Result<rayon::ThreadPool, Error> {
    let cpus = if pin {
        team_cpus(threads).unwrap_or_default()
    } else {
        Vec::new()
    };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("aiac-shared-{i}"))
        .start_handler(move |i| {
            if let Some(&cpu) = cpus.get(i) {
                // A refusal (a CPU set changed meanwhile) leaves the thread unpinned: slower
                // perhaps, never wrong.
                core_affinity::set_for_current(cpu);
            }
        })
        .build()
        .map_err(|e| Error::Pool(e.to_string()))
}

/// A record with the fields every shared variant fills alike.
#[allow(clippy::too_many_arguments)]
fn record(
    cfg: &Config,
    plan: &Plan,
    t: usize,
    iterations: u64,
    time: Duration,
    compute: Duration,
    comm: Duration,
    stop: StopReason,
    residual: Residuals,
    certifications: Vec<Certification>,
    history: History,
    error_max: Option<f64>,
) -> RankRecord {
    RankRecord {
        rank: t,
        backend: "shared".into(),
        coords: [0, 0, t],
        local: plan.local,
        iterations,
        time_s: time.as_secs_f64(),
        compute_s: compute.as_secs_f64(),
        comm_s: comm.as_secs_f64(),
        // Threads read their neighbours' planes: no messages, so no parts to time apart.
        breakdown: None,
        stop,
        converged: cfg.criterion.met(residual.true_residual),
        residual,
        reductions: 0,
        detect_rounds: None,
        certifications,
        history,
        messages: MessageTotals::default(),
        channels: Vec::new(),
        error_max,
        krylov: None,
        multisplit: None,
        halo_auto: None,
        exchange_trace: Vec::new(),
    }
}

/// The sync variant: one parallel region for the whole solve. Worker t owns planes
/// `ranges[t]` of both global arrays for good (its pool thread pinned to a CPU with
/// [`PIN_ENV`], see [`pool`]); each sweep reads u_k whole and writes the worker's planes of
/// u_{k+1}, then the workers meet at one [`SpinBarrier`]. Every worker sums the per-worker
/// residual slots in worker order and takes the same decision from the same numbers, so no
/// verdict is broadcast. Nothing is allocated inside the loop but a certification's record
/// beyond the fourth.
fn sync(
    cfg: &Config,
    plan: &Plan,
    pool: &rayon::ThreadPool,
    gate: ProgressGate<'_>,
) -> SharedOutcome {
    let whole = Plan {
        global: plan.global,
        procs: ProcGrid(Dims::new(1, 1, 1)),
        local: plan.global,
    };
    let (mut a, mut b, rhs) = Field::new(&whole.geometry(0), &cfg.problem).into_arrays();
    let rhs = rhs.as_deref();
    let sh = Shape::new(plan.global);
    let threads = plan.procs.size();
    let nz = plan.local.z;
    let ranges: Vec<std::ops::Range<usize>> =
        (0..threads).map(|t| t * nz + 1..(t + 1) * nz + 1).collect();
    let team = SyncTeam {
        arrays: SweepArrays::new(&mut a, &mut b, sh.plane),
        barrier: SpinBarrier::new(threads),
        swept: [Slots::new(threads), Slots::new(threads)],
        checked: Slots::new(threads),
    };
    let ends: Vec<SyncEnd> = pool.broadcast(|ctx| {
        let t = ctx.index();
        // The pool has exactly `threads` threads, each running this once.
        debug_assert!(t < threads && ctx.num_threads() == threads);
        team.work(cfg, &sh, rhs, ranges[t].clone(), t, gate)
    });
    drop(team);
    // Every worker returned the same iteration count and verdict; worker 0 also kept the
    // history, the certifications and the wall time.
    let it = ends[0].iterations;
    debug_assert!(ends
        .iter()
        .all(|e| e.iterations == it && e.stop == ends[0].stop));
    let u: &[f64] = if it.is_multiple_of(2) { &a } else { &b };
    let SyncEnd {
        stop,
        residual,
        time,
        ..
    } = ends[0];
    // Each thread's largest error over its own planes, on the one global array.
    let global_geom = whole.geometry(0);
    let slab_error = |zs: &std::ops::Range<usize>| -> Option<f64> {
        let mut worst = 0.0f64;
        for z in zs.clone() {
            for y in 1..=plan.global.y {
                for x in 1..=plan.global.x {
                    let l = crate::geometry::LocalIdx { x, y, z };
                    let exact = cfg
                        .problem
                        .exact(global_geom.position(global_geom.to_global(l)))?;
                    worst = worst.max((u[sh.at(l)] - exact).abs());
                }
            }
        }
        Some(worst)
    };
    let records = (0..threads)
        .map(|t| {
            let compute = ends[t].compute;
            let comm = time.saturating_sub(compute);
            record(
                cfg,
                plan,
                t,
                it,
                time,
                compute,
                comm,
                stop,
                residual,
                ends[0].certs.clone(),
                ends[0].history.clone(),
                slab_error(&ranges[t]),
            )
        })
        .collect();
    let mut solution = Vec::with_capacity(plan.global.volume());
    for z in 1..=plan.global.z {
        for y in 1..=plan.global.y {
            let b = sh.index(1, y, z);
            solution.extend_from_slice(&u[b..b + plan.global.x]);
        }
    }
    SharedOutcome {
        records,
        plan: *plan,
        solution,
    }
}

/// What the workers of a sync run share.
struct SyncTeam<'a> {
    arrays: SweepArrays<'a>,
    barrier: SpinBarrier,
    /// Each worker's Σ r² of its planes from the sweep of u_k, in `swept[k % 2]` (0 unless
    /// a check reads it, after the sweep that gives u_{k+1}, k + 1 a multiple of
    /// `check_every`): a worker
    /// may write its slot for u_{k+1} while a slower one still sums those of u_k, but it
    /// cannot write the slots of u_{k+2} before every worker has passed the barrier after
    /// the sweep of u_{k+1}, hence after it summed those of u_k.
    swept: [Slots; 2],
    /// Each worker's Σ r² of its planes of the current iterate, without updating: the
    /// initial residual, a certification, the final true residual. Between two uses there is
    /// always at least one barrier after every worker has read the first.
    checked: Slots,
}

/// What each worker of a sync run ends with. `iterations`, `stop` and `residual` are equal on
/// every worker; only worker 0 keeps `history` and `certs` (the others' stay empty), and the
/// records take `time` from worker 0.
struct SyncEnd {
    iterations: u64,
    stop: StopReason,
    residual: Residuals,
    compute: Duration,
    time: Duration,
    certs: Vec<Certification>,
    history: History,
}

impl SyncTeam<'_> {
    /// Worker `t`'s whole solve: it sweeps planes `zs` and takes every decision as the others
    /// do, from the same sums. Worker 0 also records the history and feeds the progress gate.
    fn work(
        &self,
        cfg: &Config,
        sh: &Shape,
        rhs: Option<&[f64]>,
        zs: std::ops::Range<usize>,
        t: usize,
        mut gate: ProgressGate<'_>,
    ) -> SyncEnd {
        let crit = cfg.criterion;
        let lead = t == 0;
        let mut bar = self.barrier.waiter();
        // If this worker panics the others would wait for it for ever: break the barrier.
        let _guard = BreakOnPanic(&self.barrier);
        let mut history = History::new();
        // Room for the usual few certifications, so that the loop does not allocate.
        let mut certs = Vec::with_capacity(if lead { 4 } else { 0 });
        let mut compute = Duration::ZERO;
        // Every worker is here: the pool's threads have started, nobody sweeps yet.
        bar.wait();
        let start = Instant::now();
        // Σ r² of the current iterate u_k over everyone's planes, in worker order.
        let true_sq = |bar: &mut Waiter<'_>, k: u64| -> f64 {
            // SAFETY: (1) between the barrier that ended the sweep of u_k (or the start) and
            // the next `bar.wait()` below, no worker writes array k % 2: the sweeps write
            // array (k + 1) % 2 and none runs before this barrier is passed (SweepArrays).
            let u = unsafe { self.arrays.read(k) };
            self.checked
                .put(t, kernel::residual_sq_planes(sh, u, rhs, zs.clone()));
            bar.wait();
            self.checked.sum()
        };
        let res0 = true_sq(&mut bar, 0);
        let mut it = 0u64;
        let mut reported = None;
        let mut true_value = crit.measure(res0, res0);
        let mut true_is_current = true;
        let stop = if crit.met(true_value) {
            StopReason::Criterion
        } else {
            loop {
                let t0 = Instant::now();
                let r = {
                    // SAFETY: (1) array it % 2 holds u_it, which no worker writes until every
                    // worker has passed the `bar.wait()` below; (2) planes `zs` of array
                    // (it + 1) % 2 are this worker's alone (the ranges are disjoint), and the
                    // last readers of their old contents (u_{it−1}) finished before the
                    // barrier that ended the previous sweep. Both borrows end in this block.
                    let (u, next) = unsafe {
                        (
                            self.arrays.read(it),
                            self.arrays.planes_mut(it + 1, zs.clone()),
                        )
                    };
                    // Σ r² only where a check reads it (as the threads backend does): the
                    // other sweeps skip the centre load and the accumulation, same bits.
                    let r = if (it + 1).is_multiple_of(cfg.check_every) {
                        kernel::sweep_planes(sh, u, rhs, next, zs.clone())
                    } else {
                        kernel::step_planes(sh, u, rhs, next, zs.clone());
                        0.0
                    };
                    // The slow thread's extra passes (`slow.rs`), `it` sweeps done before.
                    Slowdown::after_units(cfg.slowdown_of(t), it)
                        .after(1, || kernel::residual_sq_planes(sh, u, rhs, zs.clone()));
                    r
                };
                compute += t0.elapsed();
                let parity = (it % 2) as usize;
                self.swept[parity].put(t, r);
                bar.wait();
                it += 1;
                true_is_current = false;
                if it.is_multiple_of(cfg.check_every) {
                    let v = crit.measure(self.swept[parity].sum(), res0);
                    reported = Some(v);
                    if lead {
                        let elapsed = start.elapsed();
                        history.record(HistoryPoint(it - 1, v, elapsed.as_secs_f64()));
                        gate.offer(it, v, elapsed);
                    }
                    if crit.met(v) {
                        if !cfg.confirm {
                            break StopReason::Criterion;
                        }
                        true_value = crit.measure(true_sq(&mut bar, it), res0);
                        true_is_current = true;
                        if lead {
                            certs.push(Certification {
                                iteration: it,
                                reported,
                                true_residual: true_value,
                                accepted: crit.met(true_value),
                            });
                        }
                        if crit.met(true_value) {
                            break StopReason::Criterion;
                        }
                    }
                }
                if it >= cfg.max_iters {
                    break StopReason::MaxIters;
                }
            }
        };
        if !true_is_current {
            true_value = crit.measure(true_sq(&mut bar, it), res0);
        }
        let time = start.elapsed();
        history.finish();
        SyncEnd {
            iterations: it,
            stop,
            residual: Residuals {
                reported,
                true_residual: true_value,
                initial_norm: res0.sqrt(),
            },
            compute,
            time,
            certs,
            history,
        }
    }
}

/// The two global arrays of a sync run, u_k in array k % 2 and u_{k+1} in the other, shared
/// by the workers without a `&mut` to either array as a whole.
///
/// The protocol (the SAFETY arguments of the callers rest on it): between two passages of
/// the team's barrier, the workers read array k % 2 (any plane) and each writes only its own
/// planes of array (k + 1) % 2; the barrier (see [`SpinBarrier`] for the ordering) separates
/// the last access of one phase from the first of the next, where the arrays swap roles.
struct SweepArrays<'a> {
    arrays: [*mut f64; 2],
    len: usize,
    plane: usize,
    /// The arrays are borrowed mutably for `'a`: nobody else touches them meanwhile.
    _borrow: std::marker::PhantomData<&'a mut [f64]>,
}

// SAFETY: the pointers come from two `&'a mut [f64]` held for `'a`; every access through a
// shared `SweepArrays` is by the unsafe methods below, whose callers keep to the protocol
// above (reads of one array and disjoint writes of the other between barriers), so threads
// never access one f64 concurrently with a write of it.
unsafe impl std::marker::Sync for SweepArrays<'_> {}

impl<'a> SweepArrays<'a> {
    fn new(a: &'a mut [f64], b: &'a mut [f64], plane: usize) -> Self {
        assert_eq!(
            a.len(),
            b.len(),
            "the two arrays of a sweep differ in length"
        );
        assert!(
            plane > 0 && a.len().is_multiple_of(plane),
            "arrays of whole planes"
        );
        SweepArrays {
            arrays: [a.as_mut_ptr(), b.as_mut_ptr()],
            len: a.len(),
            plane,
            _borrow: std::marker::PhantomData,
        }
    }

    /// Array `k % 2` whole, to read.
    ///
    /// # Safety
    /// While the returned slice lives no thread writes array `k % 2` (no [`Self::planes_mut`]
    /// of `k + 1` or any `j` with `j % 2 == k % 2` on any thread).
    unsafe fn read(&self, k: u64) -> &[f64] {
        // SAFETY: (1) the pointer and length are those of a live `&'a mut [f64]` (new), and
        // `self` does not outlive `'a`; (2) no write to the array while the slice lives is
        // this function's precondition.
        unsafe { std::slice::from_raw_parts(self.arrays[(k % 2) as usize], self.len) }
    }

    /// Planes `zs` of array `k % 2`, to write.
    ///
    /// # Safety
    /// While the returned slice lives no other thread reads or writes planes `zs` of array
    /// `k % 2`, and no thread reads array `k % 2` whole through [`Self::read`].
    #[allow(clippy::mut_from_ref)] // exclusive by the caller's contract, as the Safety says
    unsafe fn planes_mut(&self, k: u64, zs: std::ops::Range<usize>) -> &mut [f64] {
        let (lo, hi) = (zs.start * self.plane, zs.end * self.plane);
        assert!(lo <= hi && hi <= self.len, "planes {zs:?} out of the array");
        // SAFETY: (1) `lo..hi` lies inside the array (asserted), whose pointer is that of a
        // live `&'a mut [f64]`; (2) exclusive access to those planes while the slice lives is
        // this function's precondition.
        unsafe { std::slice::from_raw_parts_mut(self.arrays[(k % 2) as usize].add(lo), hi - lo) }
    }
}

/// The boundary planes threads share in the async and racy variants: for each thread, its
/// lowest and highest owned plane, written by it and read by its neighbours, each with the
/// stamp of the sweep that wrote it (the owner's iteration count), so that a reader knows
/// whether there is anything new to read.
trait BoundaryPlanes: std::marker::Sync + Sized {
    /// Planes for `threads` threads of `len` values each.
    fn new(threads: usize, len: usize) -> Self;
    /// Thread `t` publishes its owned layer next to `face` (z− or z+), stamped `stamp`.
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64);
    /// Copy thread `owner`'s plane next to `owner_face` into `field`'s halo beyond `face` if
    /// its stamp differs from `seen` (always with `force`), and set `seen` to the stamp
    /// read. True when the halo was written.
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool;
}

/// Async: a lock per boundary plane, held while the plane (and its stamp) is written or read.
struct LockedPlanes(Vec<[LockedPlane; 2]>);

/// A boundary plane under its lock: the stamp of the sweep that wrote it, and its values.
type LockedPlane = Mutex<(u64, Vec<f64>)>;

fn lock(m: &LockedPlane) -> MutexGuard<'_, (u64, Vec<f64>)> {
    // A thread that panicked while holding the plane left whole values in it (the writes are
    // plain stores of f64); the run is failing anyway, keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BoundaryPlanes for LockedPlanes {
    fn new(threads: usize, len: usize) -> Self {
        let plane = || Mutex::new((0, vec![0.0; len]));
        LockedPlanes((0..threads).map(|_| [plane(), plane()]).collect())
    }
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64) {
        let mut p = lock(&self.0[t][usize::from(face.high)]);
        field.pack(face, &mut p.1);
        p.0 = stamp;
    }
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool {
        let p = lock(&self.0[owner][usize::from(owner_face.high)]);
        if !force && p.0 == *seen {
            return false;
        }
        field.unpack(face, &p.1);
        *seen = p.0;
        true
    }
}

/// Racy: atomic boundary planes, no locks; relaxed loads and stores, so a reader may see a
/// plane half old, half new (each value whole). The stamp is stored after the values
/// (Release) and loaded before them (Acquire): a reader that sees stamp s reads values of
/// sweep s or newer, and any newer sweep changes the stamp, so none is missed for good.
struct AtomicPlanes(Vec<[AtomicPlane; 2]>);

/// A racy boundary plane: the stamp of the newest sweep that wrote it, and its values.
type AtomicPlane = (AtomicU64, Box<[AtomicF64]>);

impl BoundaryPlanes for AtomicPlanes {
    fn new(threads: usize, len: usize) -> Self {
        let plane = || {
            let vals = (0..len).map(|_| AtomicF64::new(0.0)).collect::<Box<[_]>>();
            (AtomicU64::new(0), vals)
        };
        AtomicPlanes((0..threads).map(|_| [plane(), plane()]).collect())
    }
    fn publish(&self, t: usize, face: Face, field: &Field, stamp: u64) {
        let (s, vals) = &self.0[t][usize::from(face.high)];
        field.pack_atomic(face, AtomicF64Slice::from_atomics(vals));
        s.store(stamp, Release);
    }
    fn read(
        &self,
        owner: usize,
        owner_face: Face,
        field: &mut Field,
        face: Face,
        seen: &mut u64,
        force: bool,
    ) -> bool {
        let (s, vals) = &self.0[owner][usize::from(owner_face.high)];
        let stamp = s.load(Acquire);
        if !force && stamp == *seen {
            return false;
        }
        field.unpack_atomic(face, AtomicF64Slice::from_atomics(vals));
        *seen = stamp;
        true
    }
}

/// An f64 shared by the threads (Relaxed: see [`Team`]'s memory ordering).
struct SharedSum(AtomicU64);

impl SharedSum {
    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }
    fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed)
    }
}

/// Bits of the rendezvous request.
const CONVERGED: u8 = 1;
const AT_MAX_ITERS: u8 = 2;

/// What the threads of an async or racy run share.
///
/// ## The global residual: rounds
/// Each thread keeps its newest Σ r² in its slot of `mine` (that of the iterate its last
/// sweep started from, with the halo it read for that sweep; after a rendezvous, the exact
/// one). The estimate is the sum of the slots over a **round**, as the non-blocking
/// reduction of the channel backends reduces the ranks' residuals (`solver.rs`, `Rounds`):
/// a round is open from its start until every thread has swept once from halos read since,
/// and the last thread to join it sums the slots in thread order, records the sum (`latest`),
/// calls a rendezvous if it and the round before both meet the criterion, and opens the next
/// round at once. So no thread's share of a claim predates the round: a thread that was not
/// running, or whose neighbour's planes have not reached it yet, holds the round open instead
/// of adding a stale share. A round still lasts as long as its slowest thread takes to read
/// and sweep, and a thread descheduled between the two brings back a share read long before
/// the others' (at the start: a middle thread's share read while its neighbours' planes
/// were still the initial ones, 0 beside a true residual of 2e-2 once they had swept). The
/// next round's shares are all read after it came back, hence the two rounds in a row.
///
/// It replaces a running sum that each thread updated with the change of its share, which
/// failed in two ways: a share computed against a neighbour's plane many sweeps old stayed
/// in the sum (the outer threads of three, sweeping alone while the middle one waited for a
/// core, summed to 2.8e-5 while the true residual was 2e-2), and the deltas' rounding
/// errors, about ε times the initial Σ r² each, made a floor under the estimate near a
/// relative residual of 1e-8 (at `--tol 1e-10` it read 0 where the truth was 5.8e-9).
/// Summing the slots has no such floor, and costs one load of `round` a sweep and, once a
/// round, an increment of `joined` and, for the last thread, T loads.
///
/// ## Memory ordering
/// A thread stores its slot (Relaxed) before it joins a round with an AcqRel increment of
/// `joined`; the increments form a release sequence, so the last one sees every joiner's
/// slot as of its join or newer. It resets `joined` before it stores the next round number
/// (Release), and a thread joins a round only after loading its number (Acquire), so every
/// increment of a round follows the reset. A rendezvous resets the rounds between two
/// barriers, while no thread is in its loop. `request`, `trigger` and `latest` are Relaxed:
/// the rendezvous barrier orders the first two with what follows; `latest` is a report.
struct Team<P> {
    planes: P,
    threads: usize,
    /// Each thread's newest Σ r².
    mine: Slots,
    /// The open round's number, odd; each next one is 2 more.
    round: CacheLine<AtomicU64>,
    /// The threads that joined the open round.
    joined: CacheLine<AtomicUsize>,
    /// The sum of the last round that closed (before any: the initial Σ r²).
    latest: SharedSum,
    /// Set by any thread to call a rendezvous (CONVERGED | AT_MAX_ITERS); Relaxed: the
    /// rendezvous barrier orders it with everything that follows.
    request: AtomicU8,
    /// The sum of the round that requested CONVERGED.
    trigger: SharedSum,
    barrier: Barrier,
    /// How a thread that finds nothing new in a neighbour's plane waits.
    policy: WaitPolicy,
}

/// What a thread of an async or racy run knows of its neighbours' planes (z−, z+): the stamp
/// of the plane it last read, and its reads in a row that found nothing new.
#[derive(Default)]
struct Seen {
    stamps: [u64; 2],
    idle: [IdleStreak; 2],
}

/// The result of a rendezvous, the same on every thread.
struct Verdict {
    stop: Option<StopReason>,
    true_value: f64,
    claimed: bool,
    reported: f64,
}

impl<P: BoundaryPlanes> Team<P> {
    /// Read the neighbours' planes into `field`'s halo: those with a stamp `seen` has not
    /// (all of them with `force`). A neighbour with nothing new counts as an empty poll: the
    /// thread gives its core away as the run's [`WaitPolicy`] says, as a threads-backend
    /// receive does. Without it, on a machine with fewer free cores than threads, the two
    /// outer threads of three swept thousands of times a time slice on the plane of a middle
    /// thread that was not running (docs/performance.md, "Shared-memory async and racy").
    fn read_halos(
        &self,
        t: usize,
        threads: usize,
        field: &mut Field,
        seen: &mut Seen,
        force: bool,
    ) {
        let (lo, hi) = (Face::new(Axis::Z, false), Face::new(Axis::Z, true));
        let sides = [
            (t.checked_sub(1), hi, lo),
            (Some(t + 1).filter(|&n| n < threads), lo, hi),
        ];
        for (k, (owner, owner_face, face)) in sides.into_iter().enumerate() {
            let Some(owner) = owner else { continue };
            let new = self
                .planes
                .read(owner, owner_face, field, face, &mut seen.stamps[k], force);
            if force {
                continue;
            }
            if new {
                seen.idle[k].found();
            } else {
                seen.idle[k].empty(self.policy);
            }
        }
    }

    fn publish(&self, t: usize, threads: usize, field: &Field, stamp: u64) {
        if t > 0 {
            self.planes
                .publish(t, Face::new(Axis::Z, false), field, stamp);
        }
        if t + 1 < threads {
            self.planes
                .publish(t, Face::new(Axis::Z, true), field, stamp);
        }
    }

    /// The open round's number, loaded before a thread reads its halos for a sweep.
    fn open_round(&self) -> u64 {
        // Acquire: pairs with the Release store that opened the round.
        self.round.0.load(Acquire)
    }

    /// Thread `t`'s sweep started from an iterate of Σ r² = `r`, with the halos it read
    /// while round `read_in` was open: its new share. It joins that round if the round is
    /// still open and it has not joined it yet (`joined`: the last round it joined); the
    /// last to join closes the round ([`Team`]). A share read before the open round began
    /// joins none: the thread that was not running while the others swept is the one
    /// that joins last, and its share, read before it stopped, missed every plane they
    /// published meanwhile (claims 10 to 40 times the true residual, under load).
    fn contribute(
        &self,
        t: usize,
        r: f64,
        read_in: u64,
        joined: &mut u64,
        cfg: &Config,
        res0: f64,
    ) {
        self.mine.put(t, r);
        // A round closes only once every thread joined it, this one too: when it is still
        // open here, the increment below counts in it.
        if *joined == read_in || self.open_round() != read_in {
            return;
        }
        *joined = read_in;
        let round = read_in;
        // AcqRel: see the type's memory ordering.
        if self.joined.0.fetch_add(1, AcqRel) + 1 < self.threads {
            return;
        }
        // Every thread has swept since the round opened.
        let s = self.mine.sum();
        let previous = self.latest.load();
        self.latest.store(s);
        let met = |sq: f64| cfg.criterion.met(cfg.criterion.measure(sq, res0));
        if met(s) && met(previous) && self.request.load(Relaxed) & CONVERGED == 0 {
            // Only the closer of a round requests CONVERGED, and the next round cannot
            // close before this one has opened it: no other thread writes the trigger now.
            self.trigger.store(s);
            self.request.fetch_or(CONVERGED, Relaxed);
        }
        self.open_next(round);
    }

    /// Open the round after `round`: reset the count, then publish the number.
    fn open_next(&self, round: u64) {
        self.joined.0.store(0, Relaxed);
        // Release: pairs with the joiners' Acquire load (the reset comes first).
        self.round.0.store(round + 2, Release);
    }

    /// All threads: stop, swap current planes, sum the true residual, decide alike.
    /// Every thread has published its planes after its last sweep before it gets here.
    fn rendezvous(
        &self,
        t: usize,
        field: &mut Field,
        seen: &mut Seen,
        cfg: &Config,
        res0: f64,
    ) -> Verdict {
        self.barrier.wait();
        // Stable until the third barrier: every thread is inside the rendezvous.
        let req = self.request.load(Relaxed);
        self.read_halos(t, self.threads, field, seen, true);
        self.mine.put(t, field.residual_sq());
        self.barrier.wait();
        let total = self.mine.sum();
        let true_value = cfg.criterion.measure(total, res0);
        let claimed = req & CONVERGED != 0;
        let stop = if claimed && (!cfg.confirm || cfg.criterion.met(true_value)) {
            Some(StopReason::Criterion)
        } else if req & AT_MAX_ITERS != 0 {
            Some(StopReason::MaxIters)
        } else {
            None
        };
        let reported = cfg.criterion.measure(self.trigger.load(), res0);
        if stop.is_none() && t == 0 {
            // Carry on from exact shares: clear the request, and start a round afresh (no
            // thread is in its loop: the round and its count are not in use).
            self.latest.store(total);
            self.request.store(0, Relaxed);
            self.open_next(self.round.0.load(Relaxed));
        }
        self.barrier.wait();
        Verdict {
            stop,
            true_value,
            claimed,
            reported,
        }
    }
}

/// The async (locks) and racy (atomics) variants.
fn asynchronous<P: BoundaryPlanes>(
    cfg: &Config,
    plan: &Plan,
    pool: &rayon::ThreadPool,
    gate: ProgressGate<'_>,
    policy: WaitPolicy,
) -> SharedOutcome {
    let threads = plan.procs.size();
    let plane_len = plan.local.x * plan.local.y;
    let team = Team {
        planes: P::new(threads, plane_len),
        threads,
        mine: Slots::new(threads),
        round: CacheLine(AtomicU64::new(1)),
        joined: CacheLine(AtomicUsize::new(0)),
        latest: SharedSum(AtomicU64::new(0f64.to_bits())),
        request: AtomicU8::new(0),
        trigger: SharedSum(AtomicU64::new(0f64.to_bits())),
        barrier: Barrier::new(threads),
        policy,
    };
    let crit = cfg.criterion;
    let results: Vec<(RankRecord, crate::geometry::Geometry, Vec<f64>)> = pool.broadcast(|b| {
        let t = b.index();
        let geom = plan.geometry(t);
        let mut field = Field::new(&geom, &cfg.problem);
        let mut slow = Slowdown::new(cfg.slowdown_of(t));
        let (mut compute, mut comm) = (Duration::ZERO, Duration::ZERO);
        team.barrier.wait();
        let start = Instant::now();
        // The initial residual, from published planes.
        let mut seen = Seen::default();
        team.publish(t, threads, &field, 0);
        team.barrier.wait();
        team.read_halos(t, threads, &mut field, &mut seen, true);
        team.mine.put(t, field.residual_sq());
        team.barrier.wait();
        let res0 = team.mine.sum();
        if t == 0 {
            team.latest.store(res0);
        }
        // Every thread has summed the initial shares before any sweep overwrites one: a
        // thread whose initial Σ r² differed from the others' would measure every residual
        // differently, decide differently at a rendezvous, and leave them waiting there.
        team.barrier.wait();
        // The last round this thread joined (none yet: round numbers are odd).
        let mut joined = 0u64;
        let mut it = 0u64;
        let mut certs = Vec::new();
        let mut reported = None;
        let mut true_value = crit.measure(res0, res0);
        let mut history = History::new();
        // Thread 0 alone reports progress.
        let mut gate = if t == 0 {
            gate
        } else {
            ProgressGate::new(None, 0.0, 0)
        };
        // Every way out of the loop is a rendezvous, which leaves `true_value` current.
        let stop = if crit.met(true_value) {
            StopReason::Criterion
        } else {
            loop {
                if team.request.load(Relaxed) != 0 {
                    let tc = Instant::now();
                    let v = team.rendezvous(t, &mut field, &mut seen, cfg, res0);
                    comm += tc.elapsed();
                    true_value = v.true_value;
                    if v.claimed {
                        reported = Some(v.reported);
                        if cfg.confirm {
                            certs.push(Certification {
                                iteration: it,
                                reported,
                                true_residual: v.true_value,
                                accepted: crit.met(v.true_value),
                            });
                        }
                    }
                    if let Some(s) = v.stop {
                        break s;
                    }
                }
                let tc = Instant::now();
                let read_in = team.open_round();
                team.read_halos(t, threads, &mut field, &mut seen, false);
                comm += tc.elapsed();
                let t0 = Instant::now();
                let r = field.sweep();
                slow.after(1, || field.residual_sq());
                compute += t0.elapsed();
                it += 1;
                let tc = Instant::now();
                team.publish(t, threads, &field, it);
                team.contribute(t, r, read_in, &mut joined, cfg, res0);
                if it >= cfg.max_iters {
                    team.request.fetch_or(AT_MAX_ITERS, Relaxed);
                }
                if it.is_multiple_of(cfg.check_every) {
                    let value = crit.measure(team.latest.load(), res0);
                    let elapsed = start.elapsed();
                    history.record(HistoryPoint(it, value, elapsed.as_secs_f64()));
                    gate.offer(it, value, elapsed);
                }
                comm += tc.elapsed();
            }
        };
        let time = start.elapsed();
        history.finish();
        let residual = Residuals {
            reported,
            true_residual: true_value,
            initial_norm: res0.sqrt(),
        };
        let rec = record(
            cfg,
            plan,
            t,
            it,
            time,
            compute,
            comm,
            stop,
            residual,
            certs,
            history,
            field.error_max(&cfg.problem),
        );
        let vals = field.owned_values();
        (rec, geom, vals)
    });
    let mut records = Vec::with_capacity(threads);
    let mut blocks = Vec::with_capacity(threads);
    for (rec, geom, vals) in results {
        records.push(rec);
        blocks.push((geom, vals));
    }
    SharedOutcome {
        records,
        plan: *plan,
        solution: assemble(plan.global, &blocks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned workers (one per CPU; unpinned beyond the CPUs) run the same solve as unpinned
    /// ones: bit-identical solution, same iterations.
    #[test]
    fn pinned_workers_give_the_same_run() {
        let mut c = crate::tests::common::cfg(Dims::new(8, 9, 12), Variant::Sync);
        c.check_every = 5;
        let reference = {
            let plan = c.shared_plan(1).unwrap();
            solve_pinned(&c, &plan, None, false).unwrap()
        };
        for n in [1, 2, 3] {
            let plan = c.shared_plan(n).unwrap();
            let o = solve_pinned(&c, &plan, None, true).unwrap();
            assert_eq!(o.records.len(), n);
            for r in &o.records {
                assert_eq!(r.iterations, reference.records[0].iterations, "{n} pinned");
                assert!(r.converged, "{n} pinned");
            }
            assert!(
                o.solution
                    .iter()
                    .zip(&reference.solution)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{n} pinned"
            );
        }
    }
}
