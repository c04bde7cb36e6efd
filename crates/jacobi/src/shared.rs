//! The shared-memory variants (`--backend shared`): the paper's OpenMP section with rayon.
//! The grid is split in z over T threads (1-D decomposition); threads read their neighbours'
//! boundary planes directly, with no messages.
//!
//! * **sync**: one pair of global arrays; each sweep is a parallel loop over the threads'
//!   plane ranges, reading the old array (neighbours' planes included) and writing disjoint
//!   planes of the new one; the join of the loop is the barrier between sweeps.
//! * **async**: each thread iterates on its own slab. Each inter-thread boundary plane has a
//!   lock, taken while the plane is written (by its owner, after each sweep) or read (by the
//!   neighbour, before each sweep).
//! * **racy**: the same with atomic boundary planes ([`AtomicF64`], relaxed) and no locks;
//!   the slabs' interior stays plain `f64`, so the sweep vectorises.
//!
//! Async and racy keep the global residual as a running shared sum: after each sweep a
//! thread adds the change of its slab's Σ r². When the sum meets the criterion (or a thread
//! reaches `max_iters`) the threads meet at a barrier, compute the true residual from current
//! planes, and stop or carry on, all alike (`confirm`; without it they stop at once).

use crate::config::{Config, ConfigError, Variant};
use crate::field::{assemble, Field};
use crate::geometry::{Axis, Dims, Face, Plan, ProcGrid};
use crate::kernel::{self, Shape};
use crate::method::Method;
use crate::progress::{History, HistoryPoint, Progress, ProgressGate};
use crate::record::{Certification, MessageTotals, RankRecord, Residuals, StopReason};
use crate::slow::Slowdown;
use crate::Error;
use chan_core::{AtomicF64, AtomicF64Slice};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
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
    /// `--local` is each thread's slab; `--global` must split evenly in z. Validates the
    /// configuration as [`Config::plan`] does, and the flags shared memory cannot honour.
    pub fn shared_plan(&self, threads: usize) -> Result<Plan, ConfigError> {
        let procs = ProcGrid(Dims::new(1, 1, threads));
        let jacobi = match self.method {
            Method::Jacobi(j) => j,
            Method::Krylov(_) => {
                return Err(ConfigError::Unsupported {
                    flag: "--solver",
                    backend: "--backend shared",
                    why: "the Krylov solvers (cg, cg-overlap, pipecg) run over channels: use \
                          --backend threads for one process",
                })
            }
            Method::Multisplit(_) => {
                return Err(ConfigError::Unsupported {
                    flag: "--solver multisplit",
                    backend: "--backend shared",
                    why: "multisplitting exchanges its blocks' boundaries over channels: use \
                          --backend threads for one process",
                })
            }
        };
        if let Some(g) = self.grid {
            if g != procs {
                return Err(ConfigError::Unsupported {
                    flag: "--grid",
                    backend: "--backend shared",
                    why: "it splits the grid in z only: the grid is 1x1xT",
                });
            }
        }
        if jacobi.exchange != crate::config::Exchange::Waitall {
            return Err(ConfigError::Unsupported {
                flag: "--exchange",
                backend: "--backend shared",
                why: "threads read their neighbours' planes directly: there is no message to exchange",
            });
        }
        if jacobi.iteration.halo_every != 1 {
            return Err(ConfigError::Unsupported {
                flag: "--halo-every",
                backend: "--backend shared",
                why: "threads read their neighbours' planes directly at every sweep",
            });
        }
        if jacobi.halo_depth != 1 {
            return Err(ConfigError::Unsupported {
                flag: "--halo-depth",
                backend: "--backend shared",
                why: "threads read their neighbours' planes directly at every sweep: there is \
                      no halo to deepen",
            });
        }
        let mut c = self.clone();
        c.grid = Some(procs);
        c.plan(threads)
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
    let threads = plan.procs.size();
    if plan.procs != ProcGrid(Dims::new(1, 1, threads)) {
        return Err(ConfigError::Unsupported {
            flag: "--grid",
            backend: "--backend shared",
            why: "it splits the grid in z only: the grid is 1x1xT",
        }
        .into());
    }
    let gate = ProgressGate::new(progress, cfg.criterion.tol(), cfg.max_iters);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("aiac-shared-{i}"))
        .build()
        .map_err(|e| Error::Pool(e.to_string()))?;
    match cfg.variant() {
        Variant::Sync => Ok(pool.install(|| sync(cfg, plan, gate))),
        Variant::Async => Ok(asynchronous::<LockedPlanes>(cfg, plan, &pool, gate)),
        Variant::Racy => Ok(asynchronous::<AtomicPlanes>(cfg, plan, &pool, gate)),
    }
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
        stop,
        converged: cfg.criterion.met(residual.true_residual),
        residual,
        reductions: 0,
        certifications,
        history,
        messages: MessageTotals::default(),
        channels: Vec::new(),
        error_max,
        krylov: None,
        multisplit: None,
        exchange_trace: Vec::new(),
    }
}

/// The sync variant: parallel sweeps of disjoint plane ranges of one global array.
fn sync(cfg: &Config, plan: &Plan, mut gate: ProgressGate<'_>) -> SharedOutcome {
    let whole = Plan {
        global: plan.global,
        procs: ProcGrid(Dims::new(1, 1, 1)),
        local: plan.global,
    };
    let (mut u, mut next, rhs) = Field::new(&whole.geometry(0), &cfg.problem).into_arrays();
    let rhs = rhs.as_deref();
    let sh = Shape::new(plan.global);
    let threads = plan.procs.size();
    let nz = plan.local.z;
    let ranges: Vec<std::ops::Range<usize>> =
        (0..threads).map(|t| t * nz + 1..(t + 1) * nz + 1).collect();
    let crit = cfg.criterion;
    let start = Instant::now();
    let mut compute = vec![Duration::ZERO; threads];
    // Each thread's (squared update norm, sweep time) of the last sweep; filled in place.
    let mut parts: Vec<(f64, Duration)> = Vec::with_capacity(threads);
    let residual_all = |u: &[f64]| -> f64 {
        let parts: Vec<f64> = ranges
            .par_iter()
            .map(|zs| kernel::residual_sq_planes(&sh, u, rhs, zs.clone()))
            .collect();
        parts.iter().sum()
    };
    let res0 = residual_all(&u);
    let mut it = 0u64;
    let mut history = History::new();
    let mut certs = Vec::new();
    let mut reported = None;
    let mut true_value = crit.measure(res0, res0);
    let mut true_is_current = true;
    let stop = if crit.met(true_value) {
        StopReason::Criterion
    } else {
        loop {
            let interior = &mut next[sh.planes(1..plan.global.z + 1)];
            interior
                .par_chunks_mut(nz * sh.plane)
                .zip(ranges.par_iter())
                .enumerate()
                .map(|(t, (dst, zs))| {
                    let t0 = Instant::now();
                    let r = kernel::sweep_planes(&sh, &u, rhs, dst, zs.clone());
                    // The slow thread's extra passes (`slow.rs`), `it` sweeps done before.
                    Slowdown::after_units(cfg.slowdown_of(t), it)
                        .after(1, || kernel::residual_sq_planes(&sh, &u, rhs, zs.clone()));
                    (r, t0.elapsed())
                })
                .collect_into_vec(&mut parts);
            std::mem::swap(&mut u, &mut next);
            it += 1;
            true_is_current = false;
            for (c, p) in compute.iter_mut().zip(&parts) {
                *c += p.1;
            }
            if it % cfg.check_every == 0 {
                let v = crit.measure(parts.iter().map(|p| p.0).sum(), res0);
                reported = Some(v);
                let elapsed = start.elapsed();
                history.record(HistoryPoint(it - 1, v, elapsed.as_secs_f64()));
                gate.offer(it, v, elapsed);
                if crit.met(v) {
                    if !cfg.confirm {
                        break StopReason::Criterion;
                    }
                    true_value = crit.measure(residual_all(&u), res0);
                    true_is_current = true;
                    certs.push(Certification {
                        iteration: it,
                        reported,
                        true_residual: true_value,
                        accepted: crit.met(true_value),
                    });
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
        true_value = crit.measure(residual_all(&u), res0);
    }
    let time = start.elapsed();
    history.finish();
    let residual = Residuals {
        reported,
        true_residual: true_value,
        initial_norm: res0.sqrt(),
    };
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
            let comm = time.saturating_sub(compute[t]);
            record(
                cfg,
                plan,
                t,
                it,
                time,
                compute[t],
                comm,
                stop,
                residual,
                certs.clone(),
                history.clone(),
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

/// The boundary planes threads share in the async and racy variants: for each thread, its
/// lowest and highest owned plane, written by it and read by its neighbours.
trait BoundaryPlanes: std::marker::Sync + Sized {
    /// Planes for `threads` threads of `len` values each.
    fn new(threads: usize, len: usize) -> Self;
    /// Thread `t` publishes its owned layer next to `face` (z− or z+).
    fn publish(&self, t: usize, face: Face, field: &Field);
    /// Copy thread `owner`'s plane next to `owner_face` into `field`'s halo beyond `face`.
    fn read(&self, owner: usize, owner_face: Face, field: &mut Field, face: Face);
}

/// Async: a lock per boundary plane, held while the plane is written or read.
struct LockedPlanes(Vec<[Mutex<Vec<f64>>; 2]>);

fn lock(m: &Mutex<Vec<f64>>) -> MutexGuard<'_, Vec<f64>> {
    // A thread that panicked while holding the plane left whole values in it (the writes are
    // plain stores of f64); the run is failing anyway, keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BoundaryPlanes for LockedPlanes {
    fn new(threads: usize, len: usize) -> Self {
        LockedPlanes(
            (0..threads)
                .map(|_| [Mutex::new(vec![0.0; len]), Mutex::new(vec![0.0; len])])
                .collect(),
        )
    }
    fn publish(&self, t: usize, face: Face, field: &Field) {
        field.pack(face, &mut lock(&self.0[t][usize::from(face.high)]));
    }
    fn read(&self, owner: usize, owner_face: Face, field: &mut Field, face: Face) {
        field.unpack(face, &lock(&self.0[owner][usize::from(owner_face.high)]));
    }
}

/// Racy: atomic boundary planes, no locks; relaxed loads and stores, so a reader may see a
/// plane half old, half new (each value whole).
struct AtomicPlanes(Vec<[Box<[AtomicF64]>; 2]>);

impl BoundaryPlanes for AtomicPlanes {
    fn new(threads: usize, len: usize) -> Self {
        let plane = || (0..len).map(|_| AtomicF64::new(0.0)).collect::<Box<[_]>>();
        AtomicPlanes((0..threads).map(|_| [plane(), plane()]).collect())
    }
    fn publish(&self, t: usize, face: Face, field: &Field) {
        let view = AtomicF64Slice::from_atomics(&self.0[t][usize::from(face.high)]);
        field.pack_atomic(face, view);
    }
    fn read(&self, owner: usize, owner_face: Face, field: &mut Field, face: Face) {
        let view = AtomicF64Slice::from_atomics(&self.0[owner][usize::from(owner_face.high)]);
        field.unpack_atomic(face, view);
    }
}

/// An f64 running sum shared by the threads, updated by deltas with compare-and-swap.
///
/// ## Memory ordering
/// Relaxed throughout: the sum is a hint that triggers a rendezvous; no other data is read
/// on the strength of it. Exact values are exchanged at the rendezvous, whose [`Barrier`]
/// orders everything written before it.
struct SharedSum(AtomicU64);

impl SharedSum {
    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }
    fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed)
    }
    fn add(&self, d: f64) {
        let _ = self.0.fetch_update(Relaxed, Relaxed, |b| {
            Some((f64::from_bits(b) + d).to_bits())
        });
    }
}

/// Bits of the rendezvous request.
const CONVERGED: u8 = 1;
const AT_MAX_ITERS: u8 = 2;

/// What the threads of an async or racy run share.
struct Team<P> {
    planes: P,
    sum: SharedSum,
    /// Set by any thread to call a rendezvous (CONVERGED | AT_MAX_ITERS); Relaxed: the
    /// rendezvous barrier orders it with everything that follows.
    request: AtomicU8,
    /// The running sum's value when CONVERGED was first requested.
    trigger: SharedSum,
    /// Each thread's Σ r² at a rendezvous.
    slots: Vec<SharedSum>,
    barrier: Barrier,
}

/// The result of a rendezvous, the same on every thread.
struct Verdict {
    stop: Option<StopReason>,
    true_value: f64,
    claimed: bool,
    reported: f64,
}

impl<P: BoundaryPlanes> Team<P> {
    fn read_halos(&self, t: usize, threads: usize, field: &mut Field) {
        let (lo, hi) = (Face::new(Axis::Z, false), Face::new(Axis::Z, true));
        if t > 0 {
            self.planes.read(t - 1, hi, field, lo);
        }
        if t + 1 < threads {
            self.planes.read(t + 1, lo, field, hi);
        }
    }

    fn publish(&self, t: usize, threads: usize, field: &Field) {
        if t > 0 {
            self.planes.publish(t, Face::new(Axis::Z, false), field);
        }
        if t + 1 < threads {
            self.planes.publish(t, Face::new(Axis::Z, true), field);
        }
    }

    /// All threads: stop, swap current planes, sum the true residual, decide alike.
    /// Every thread has published its planes after its last sweep before it gets here.
    fn rendezvous(&self, t: usize, field: &mut Field, cfg: &Config, res0: f64) -> Verdict {
        let threads = self.slots.len();
        self.barrier.wait();
        // Stable until the third barrier: every thread is inside the rendezvous.
        let req = self.request.load(Relaxed);
        self.read_halos(t, threads, field);
        self.slots[t].store(field.residual_sq());
        self.barrier.wait();
        let total: f64 = self.slots.iter().map(SharedSum::load).sum();
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
            // Carry on from exact values: re-base the running sum, clear the request.
            self.sum.store(total);
            self.request.store(0, Relaxed);
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
) -> SharedOutcome {
    let threads = plan.procs.size();
    let plane_len = plan.local.x * plan.local.y;
    let team = Team {
        planes: P::new(threads, plane_len),
        sum: SharedSum(AtomicU64::new(0f64.to_bits())),
        request: AtomicU8::new(0),
        trigger: SharedSum(AtomicU64::new(0f64.to_bits())),
        slots: (0..threads)
            .map(|_| SharedSum(AtomicU64::new(0f64.to_bits())))
            .collect(),
        barrier: Barrier::new(threads),
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
        team.publish(t, threads, &field);
        team.barrier.wait();
        team.read_halos(t, threads, &mut field);
        let mine = field.residual_sq();
        team.slots[t].store(mine);
        team.sum.add(mine);
        team.barrier.wait();
        let res0: f64 = team.slots.iter().map(SharedSum::load).sum();
        let mut last = mine;
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
                    let v = team.rendezvous(t, &mut field, cfg, res0);
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
                    last = team.slots[t].load();
                }
                let tc = Instant::now();
                team.read_halos(t, threads, &mut field);
                comm += tc.elapsed();
                let t0 = Instant::now();
                let r = field.sweep();
                slow.after(1, || field.residual_sq());
                compute += t0.elapsed();
                it += 1;
                let tc = Instant::now();
                team.publish(t, threads, &field);
                team.sum.add(r - last);
                last = r;
                if it >= cfg.max_iters {
                    team.request.fetch_or(AT_MAX_ITERS, Relaxed);
                }
                let s = team.sum.load();
                let value = crit.measure(s, res0);
                if it % cfg.check_every == 0 {
                    let elapsed = start.elapsed();
                    history.record(HistoryPoint(it, value, elapsed.as_secs_f64()));
                    gate.offer(it, value, elapsed);
                }
                if crit.met(value) {
                    let before = team.request.fetch_or(CONVERGED, Relaxed);
                    if before & CONVERGED == 0 {
                        team.trigger.store(s);
                    }
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
