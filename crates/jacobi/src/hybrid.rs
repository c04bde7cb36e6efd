//! Hybrid ranks (`--threads-per-rank T`): every rank of a channel backend (MPI, SHMEM) sweeps
//! its block with a team of T workers, and talks to the other ranks over its channels as a
//! one-thread rank does. The shared-memory sync variant is one such rank, its team sweeping
//! the whole grid (`shared/`).
//!
//! * **One region per solve.** The rank's own thread is worker 0; T − 1 more threads start
//!   with the solve and end with it. Worker t owns a fixed range of the block's z-planes for
//!   the whole solve (the planes split as evenly as they go, lower workers taking the extra
//!   ones), pinned to a CPU of its own in the rank's allowed set when it has T of them
//!   (ranks started unbound take disjoint CPUs by their local rank: [`RankTeam`]).
//! * **Who exchanges.** Worker 0 runs Jacobi's loops (`solver/`) unchanged, over a
//!   [`TeamField`]: the halo exchange, the reductions, the certification and every decision
//!   are its own, between sweeps, while the other workers wait. A sweep has two
//!   synchronisations: "go", after worker 0 published the arrays, and "done", after which
//!   worker 0 swaps them. Between the two every worker reads the current iterate (halo
//!   included) and writes its own planes of the next one. "Go" is one-way ([`Team::go`]):
//!   worker 0 does not wait for the others, who spin, then yield, then sleep until it comes
//!   (an exchange can take a while, and a sleeping worker leaves its core to others);
//!   "done" is the team's [`SpinBarrier`], which backs off to short sleeps when the job's
//!   busy threads outnumber the cores ([`team_wait_policy`]).
//! * **The same bits as one thread.** Every point's update is the kernel's, whoever computes
//!   it. A sweep whose residual a check reads has each worker total each of its planes on its
//!   own into a per-plane slot, and worker 0 adds the slots in z order: a whole-block sweep's
//!   residual is summed the same way (`kernel.rs`, "Plane-ordered sums"). So a sync run with T
//!   workers per rank has the iterates, the residual history and the iteration count of the
//!   run with one, bit for bit.
//! * Async and racy runs sweep the same way: the team's sweep replaces the rank's, and
//!   everything else (taking whatever halo is there, offering faces, the non-blocking
//!   reduction, the certification) is worker 0's between sweeps.
//!
//! Jacobi on the grid only, one-plane halos, `--exchange waitall` or `blocking`: the Krylov
//! solvers, multisplitting, deep halos and the overlapped exchange (which sweeps its block in
//! regions) are refused with T > 1 ([`Config::check_threads_per_rank`]).

use crate::config::{Config, ConfigError};
use crate::field::Field;
use crate::geometry::{Dims, Face, Plan};
use crate::halo::Halo;
use crate::iterate::{Iterate, Lacks};
use crate::kernel::{self, Shape};
use crate::problem::Problem;
use crate::slow::Slowdown;
use crate::team::{
    rank_team_cpus, team_wait_policy, BreakOnPanic, Slots, SpinBarrier, Waiter, SPIN_STEPS,
};
use chan_core::backend::WaitPolicy;
use chan_core::AtomicF64Slice;
use std::ops::Range;
use std::sync::atomic::{
    AtomicPtr, AtomicU64, AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The most workers per rank `--threads-per-rank` takes.
pub const MAX_THREADS_PER_RANK: usize = 256;

impl Config {
    /// Check T = `threads` workers per rank against this configuration and the decomposition
    /// `plan` ([`Config::check_in`] with hybrid ranks): from 1 to [`MAX_THREADS_PER_RANK`], at
    /// most one worker per z-plane of a rank's block, and with T > 1 Jacobi on one-plane
    /// halos, swapped by a whole-plane exchange.
    pub fn check_threads_per_rank(&self, threads: usize, plan: &Plan) -> Result<(), ConfigError> {
        self.check_in(&crate::Context {
            threads_per_rank: threads,
            ..self.context(crate::Backend::CHANNELS)
        })?;
        crate::settings::check_team(threads, plan)
    }
}

/// How a rank's team is placed: its workers, and which of the processes sharing this
/// machine the rank is (a launcher says: `OMPI_COMM_WORLD_LOCAL_RANK` and `_SIZE` under Open
/// MPI). Ranks started unbound pin their teams to disjoint CPUs by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankTeam {
    /// Workers per rank (`--threads-per-rank`), the rank's own thread included.
    pub threads: usize,
    /// This process's rank among the job's processes on this machine.
    pub local_rank: usize,
    /// The job's processes on this machine.
    pub local_size: usize,
}

impl RankTeam {
    /// `threads` workers for the only process on this machine.
    pub fn alone(threads: usize) -> Self {
        RankTeam {
            threads,
            local_rank: 0,
            local_size: 1,
        }
    }

    /// The CPUs this rank's thread may run on, when fewer than its workers: they run
    /// unpinned (`None`: there are enough, or one worker). Under mpirun a rank is bound to
    /// one core unless told otherwise (`--bind-to none`, `--map-by slot:PE=T`).
    pub fn cpus_short(&self) -> Option<usize> {
        if self.threads <= 1 {
            return None;
        }
        let have = core_affinity::get_core_ids().map_or(0, |ids| ids.len());
        (have < self.threads).then_some(have)
    }

    /// The CPUs to pin the workers to, one each ([`rank_team_cpus`]).
    fn cpus(&self) -> Option<Vec<core_affinity::CoreId>> {
        rank_team_cpus(self.threads, self.local_rank, self.local_size)
    }

    /// How the workers wait for each other ([`team_wait_policy`]).
    fn wait_policy(&self) -> WaitPolicy {
        team_wait_policy(self.threads, self.local_size)
    }
}

/// Worker t's planes of a block of `nz` planes among `threads` workers: contiguous, in
/// worker order, the first `nz mod T` workers one plane more.
fn planes_of(nz: usize, threads: usize, t: usize) -> Range<usize> {
    let (q, r) = (nz / threads, nz % threads);
    let start = 1 + t * q + t.min(r);
    start..start + q + usize::from(t < r)
}

/// What worker 0 asks of the team at the "go" barrier.
const STEP: u8 = 0;
const SWEEP: u8 = 1;
const STOP: u8 = 2;

/// How long a worker waiting for "go" spins and yields before it sleeps.
const BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// What a rank's workers share for the solve.
pub(crate) struct Team {
    /// "Done": every worker has swept its planes.
    barrier: SpinBarrier,
    /// "Go": the sweeps worker 0 has started, the count itself. Release when worker 0 adds
    /// one, after it published the arrays and the command; Acquire where a worker sees it
    /// change: the worker then sees them.
    go: AtomicU64,
    /// Σ r² of each owned plane (z − 1) of the iterate a checked sweep started from.
    planes: Slots,
    shape: Shape,
    threads: usize,
    /// The sweep's arrays and what to do with them ([`STEP`], [`SWEEP`], [`STOP`]), published
    /// by worker 0 before "go" and read by the others after it (Relaxed: `go` orders them);
    /// `rhs` null for none.
    src: AtomicPtr<f64>,
    dst: AtomicPtr<f64>,
    rhs: AtomicPtr<f64>,
    cmd: AtomicU8,
    /// Each worker's slowdown factor (`slow.rs`), when the slow unit is a worker of the team
    /// (the shared-memory backend's threads); empty: no worker is slowed (a hybrid rank is
    /// slowed as a whole, by its loop).
    slow: Vec<f64>,
}

impl Team {
    /// A team of `threads` workers for a block of `shape`, whose "done" waits as `wait` says
    /// ([`team_wait_policy`]), each worker slowed by `slow[t]` (empty: none).
    pub(crate) fn new(shape: Shape, threads: usize, wait: WaitPolicy, slow: Vec<f64>) -> Self {
        assert!(
            threads >= 1 && threads <= shape.n.z,
            "a team of at most one worker per plane"
        );
        Team {
            barrier: SpinBarrier::with_policy(threads, wait),
            go: AtomicU64::new(0),
            planes: Slots::new(shape.n.z),
            shape,
            threads,
            src: AtomicPtr::new(std::ptr::null_mut()),
            dst: AtomicPtr::new(std::ptr::null_mut()),
            rhs: AtomicPtr::new(std::ptr::null_mut()),
            cmd: AtomicU8::new(STEP),
            slow,
        }
    }

    /// Worker `t`'s slowdown, from no sweep done.
    fn slowdown(&self, t: usize) -> Slowdown {
        Slowdown::new(self.slow.get(t).copied().unwrap_or(1.0))
    }

    /// Worker `t` (≥ 1) for the whole solve: sweep its planes at each "go" until told to stop.
    pub(crate) fn work(&self, t: usize) {
        let mut bar = self.barrier.waiter();
        // If this worker panics worker 0 would wait for it for ever: break the barrier.
        let _guard = BreakOnPanic(&self.barrier);
        let mut seen = 0;
        let mut slow = self.slowdown(t);
        loop {
            seen = self.wait_for_go(seen);
            let cmd = self.cmd.load(Relaxed);
            if cmd == STOP {
                return;
            }
            // SAFETY: (1) between this "go" and the "done" below the sweep's protocol holds
            // (`sweep_planes`' Safety); worker 0 published the arrays before "go".
            unsafe { self.sweep_planes(t, cmd == SWEEP, &mut slow) };
            bar.wait(); // done
        }
    }

    /// Wait until the count of "go"s passes `seen`; returns the new count. Spins a little,
    /// then yields its core at every look, then sleeps (`park`: worker 0 unparks every
    /// worker after each "go", and a wake-up that comes before the sleep is kept).
    fn wait_for_go(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut step = 0;
        loop {
            // Acquire: pairs with worker 0's Release increment (the field's docs).
            let now = self.go.load(Acquire);
            if now != seen {
                return now;
            }
            if step <= SPIN_STEPS {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
                step += 1;
            } else if start.elapsed() < BEFORE_SLEEP {
                std::thread::yield_now();
            } else {
                std::thread::park();
            }
        }
    }

    /// Sweep worker `t`'s planes from the published current iterate into the published next
    /// array; with `resid`, each plane's Σ r² into its slot. Then the worker's extra passes
    /// over its planes when it is the slow one (`slow`).
    ///
    /// # Safety
    /// Called between a "go" and the following "done" passage of the barrier, with the
    /// pointers worker 0 published before that "go": it derived them from its field's
    /// arrays (`Field::sweep_arrays`) and touches the field by no other way until "done".
    /// Then nobody writes the current iterate or the source term, and each worker writes only
    /// its own planes of the next array (the ranges of [`planes_of`] are disjoint).
    unsafe fn sweep_planes(&self, t: usize, resid: bool, slow: &mut Slowdown) {
        let sh = &self.shape;
        let zs = planes_of(sh.n.z, self.threads, t);
        let (src, dst, rhs) = (
            self.src.load(Relaxed),
            self.dst.load(Relaxed),
            self.rhs.load(Relaxed),
        );
        // SAFETY: (1) `src` and `rhs` (when not null) point at arrays of `sh.len` values
        // (the field's, of its shape), alive until "done"; (2) nobody writes them meanwhile
        // (this function's Safety).
        let src = unsafe { std::slice::from_raw_parts(src.cast_const(), sh.len) };
        let rhs = (!rhs.is_null())
            // SAFETY: as for `src`.
            .then(|| unsafe { std::slice::from_raw_parts(rhs.cast_const(), sh.len) });
        let (lo, hi) = (zs.start * sh.plane, zs.end * sh.plane);
        assert!(hi <= sh.len, "planes {zs:?} out of the block");
        // SAFETY: (1) `lo..hi` lies inside the next array of `sh.len` values (asserted),
        // alive until "done"; (2) planes `zs` of it are this worker's alone, and nobody
        // reads the next array before "done" (this function's Safety).
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.add(lo), hi - lo) };
        if resid {
            for (z, plane) in zs.clone().zip(dst.chunks_exact_mut(sh.plane)) {
                let r = kernel::sweep_planes(sh, src, rhs, plane, z..z + 1);
                self.planes.put(z - 1, r);
            }
        } else {
            kernel::step_planes(sh, src, rhs, dst, zs.clone());
        }
        slow.after(1, || kernel::residual_sq_planes(sh, src, rhs, zs.clone()));
    }
}

/// A rank's block swept by its team: the one-plane [`Field`] that worker 0 exchanges,
/// reduces and decides on, whose sweeps the whole team does.
pub(crate) struct TeamField<'t> {
    field: Field,
    team: &'t Team,
    /// Worker 0's passages of the barrier; tells the others to stop when dropped.
    lead: Lead<'t>,
    /// Worker 0's slowdown ([`Team::slowdown`]).
    slow: Slowdown,
}

/// Worker 0's handle on the team: its passages of "done", and the other workers' threads to
/// wake at "go". Dropped, it tells them to stop (the run ended, well or with an error) and,
/// while worker 0 unwinds, breaks the barrier, so that a worker waiting at "done" panics
/// rather than wait for ever.
struct Lead<'t> {
    team: &'t Team,
    bar: Waiter<'t>,
    workers: Vec<Thread>,
}

impl Lead<'_> {
    /// "Go": the published sweep starts on every worker.
    fn go(&self) {
        // Release: pairs with the workers' Acquire load (Team::go).
        self.team.go.fetch_add(1, Release);
        for w in &self.workers {
            w.unpark();
        }
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            drop(BreakOnPanic(&self.team.barrier));
        }
        // Every worker waits for "go" here unless worker 0 unwinds from inside a sweep;
        // those at "done" then see the broken barrier.
        self.team.cmd.store(STOP, Relaxed);
        self.go();
    }
}

impl<'t> TeamField<'t> {
    /// `field` swept by `team`, whose workers 1.. run [`Team::work`]. Called on worker 0's
    /// thread before any of them can pass the barrier (they cannot without worker 0).
    fn new(field: Field, team: &'t Team) -> Self {
        assert_eq!(
            *field.shape(),
            team.shape,
            "the team sweeps a block of its shape"
        );
        TeamField {
            field,
            team,
            slow: team.slowdown(0),
            lead: Lead {
                team,
                bar: team.barrier.waiter(),
                workers: Vec::with_capacity(team.threads - 1),
            },
        }
    }

    /// The block's field, the team told to stop.
    pub(crate) fn into_field(self) -> Field {
        let TeamField { field, lead, .. } = self;
        drop(lead);
        field
    }

    /// One sweep by the whole team, then swap: Σ r² of the iterate it started from, summed
    /// plane by plane in z order, when `resid` (else 0).
    fn team_sweep(&mut self, resid: bool) -> f64 {
        let team = self.team;
        let (u, next, rhs) = self.field.sweep_arrays();
        team.src.store(u.as_ptr().cast_mut(), Relaxed);
        team.dst.store(next.as_mut_ptr(), Relaxed);
        team.rhs.store(
            rhs.map_or(std::ptr::null_mut(), |r| r.as_ptr().cast_mut()),
            Relaxed,
        );
        team.cmd.store(if resid { SWEEP } else { STEP }, Relaxed);
        self.lead.go();
        // SAFETY: (1) between "go" and "done", with the pointers just published from the
        // field's arrays, whose borrows ended there; the field is not touched until "done".
        unsafe { team.sweep_planes(0, resid, &mut self.slow) };
        self.lead.bar.wait(); // done: every plane of the next array written
        self.field.finish_sweep();
        if resid {
            team.planes.sum()
        } else {
            0.0
        }
    }
}

impl Halo for TeamField<'_> {
    type Link = Face;
    fn pack(&self, face: Face, buf: &mut [f64]) {
        self.field.pack(face, buf);
    }
    fn unpack(&mut self, face: Face, data: &[f64]) {
        self.field.unpack(face, data);
    }
}

impl Iterate for TeamField<'_> {
    type Snapshot = Lacks;
    fn link_peer(&self, face: Face) -> usize {
        self.field.link_peer(face)
    }
    fn link_tag(&self, face: Face) -> u32 {
        self.field.link_tag(face)
    }
    fn message_len(&self, face: Face) -> usize {
        self.field.face_len(face)
    }
    fn unpack_atomic(&mut self, face: Face, view: &AtomicF64Slice) {
        self.field.unpack_atomic(face, view);
    }
    fn place(&self) -> ([usize; 3], Dims) {
        Iterate::place(&self.field)
    }
    fn face_link(&self, face: Face) -> Option<Face> {
        Some(face)
    }
    /// Worker 0 alone: a certification's or the end's, plane by plane as a sweep sums it.
    fn residual_sq(&self) -> f64 {
        self.field.residual_sq()
    }
    fn snapshot_buffer(&self) -> Result<Lacks, crate::Setting> {
        Err(crate::Setting::ThreadsPerRank)
    }
    fn set_halo_current_only(&mut self, on: bool) {
        self.field.set_halo_current_only(on);
    }
    fn sweep_block(&mut self, m: u64, resid: bool) -> f64 {
        debug_assert_eq!(m, 1);
        self.team_sweep(resid)
    }
    fn sweep_async(&mut self) -> f64 {
        self.team_sweep(true)
    }
    fn error_max(&self, problem: &Problem) -> Option<f64> {
        self.field.error_max(problem)
    }
}

/// How a team's workers are placed and slowed: pinned or not, and each worker's slowdown
/// factor (empty: none slowed).
pub(crate) struct TeamSetup {
    /// Pin each worker to a CPU of this thread's allowed set when it has that many
    /// ([`RankTeam::cpus`]).
    pub(crate) pin: bool,
    /// Worker t's slowdown factor at `slow[t]` (`slow.rs`).
    pub(crate) slow: Vec<f64>,
}

impl TeamSetup {
    /// A hybrid rank's team: pinned, no worker slowed (the loop slows the rank).
    pub(crate) fn rank() -> Self {
        TeamSetup {
            pin: true,
            slow: Vec::new(),
        }
    }
}

/// Run `body` on this thread as worker 0 of a team of `team.threads` sweeping `field`, the
/// other workers on threads of their own for as long as it runs, placed and slowed as
/// `setup` says. The workers stop when `body` drops the [`TeamField`] or takes its field back
/// ([`TeamField::into_field`]), whichever way it returns.
pub(crate) fn with_team<R>(
    field: Field,
    placement: RankTeam,
    setup: TeamSetup,
    body: impl for<'t> FnOnce(TeamField<'t>) -> R,
) -> R {
    let threads = placement.threads;
    let team = Team::new(*field.shape(), threads, placement.wait_policy(), setup.slow);
    let cpus = if setup.pin { placement.cpus() } else { None };
    std::thread::scope(|s| {
        // Worker 0's handle on the barrier exists before any other worker can pass it, and
        // stops the workers started so far if starting one fails.
        let mut lead = TeamField::new(field, &team);
        for t in 1..threads {
            let (team, cpu) = (&team, cpus.as_ref().map(|c| c[t]));
            let worker = std::thread::Builder::new()
                .name(format!("aiac-team-{t}"))
                .spawn_scoped(s, move || {
                    if let Some(cpu) = cpu {
                        // A refusal leaves the worker unpinned: slower perhaps, never wrong.
                        core_affinity::set_for_current(cpu);
                    }
                    team.work(t);
                })
                .expect("a worker thread of the rank's team");
            lead.lead.workers.push(worker.thread().clone());
        }
        if let Some(cpus) = &cpus {
            core_affinity::set_for_current(cpus[0]);
        }
        body(lead)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_split_in_worker_order() {
        for nz in 1..12 {
            for threads in 1..=nz {
                let mut next = 1;
                for t in 0..threads {
                    let zs = planes_of(nz, threads, t);
                    assert_eq!(zs.start, next, "nz {nz} T {threads} worker {t}");
                    assert!(!zs.is_empty());
                    assert!(zs.len() <= nz / threads + 1);
                    next = zs.end;
                }
                assert_eq!(next, nz + 1);
            }
        }
    }
}
