//! Jacobi's loops, written once against chan-core's [`Context`] and over the [`Iterate`]
//! trait: one sync loop ([`Run::sync`]) and one async loop for the async and racy variants
//! ([`Run::asynchronous`]), each monomorphised for the one-plane [`Field`] and the deep halo's
//! iterate (`deep.rs`), and run by multisplitting with its inner solve in place of the sweep
//! (`multisplit.rs`). Which loop, over which iterate, is chosen in `dispatch.rs`.
//!
//! Every decision that ends or changes the course of a run is taken from a value every rank
//! sees identically: a blocking all-reduce (sync checks, certification), one round of the
//! non-blocking reduction (async, racy; a snapshot's with `--detect snapshot`), or the
//! completion of a non-blocking barrier followed by blocking sums (`--detect ibarrier`). So all ranks make the same sequence of collective
//! calls and no rank waits for another that went a different way.

use crate::clock::{Instant, Work};
use crate::config::{Config, ConfigError, Detect, Exchange, RacyRead};
use crate::field::Field;
use crate::geometry::{Axis, Face, Geometry, Plan};
use crate::halo;
use crate::iterate::Iterate;
use crate::kernel::Region;
use crate::method::BlockIteration;
use crate::multisplit::{Fresher, InnerSolve};
use crate::parts::Parts;
use crate::problem::StopCriterion;
use crate::progress::{History, HistoryPoint, Progress, ProgressGate};
use crate::record::{
    Certification, ExchangeStep, MessageTotals, MultisplitRecord, RankRecord, Residuals, StopReason,
};
use crate::slow::Slowdown;
use crate::Error;
use chan_core::traits::*;
use chan_core::{
    close_all, Async, Channel, ChannelSpec, ChannelStats, Racy, ReduceOp, Sync, TrySendError,
};
use std::time::Duration;

/// This rank's block of the grid, set up the same way for every solver: its geometry, the
/// starting iterate, the faces with a neighbour, and the interior and shell of owned points.
pub(crate) struct Block {
    pub geom: Geometry,
    pub field: Field,
    pub faces: Vec<Face>,
    pub interior: Region,
    pub shell: Vec<Region>,
}

impl Block {
    /// `ctx`'s block of `plan`; an error if `plan`'s process grid is not `ctx`'s size.
    pub(crate) fn of_rank<C: Context>(ctx: &C, cfg: &Config, plan: &Plan) -> Result<Self, Error> {
        if plan.procs.size() != ctx.size() {
            return Err(ConfigError::GridSize {
                grid: plan.procs,
                size: ctx.size(),
            }
            .into());
        }
        let geom = plan.geometry(ctx.rank());
        let field = Field::new(&geom, &cfg.problem);
        let faces: Vec<Face> = Face::ALL
            .into_iter()
            .filter(|f| geom.neighbours[f.index()].is_some())
            .collect();
        let (interior, shell) = field.interior_and_shell();
        Ok(Block {
            geom,
            field,
            faces,
            interior,
            shell,
        })
    }
}

/// The state of one rank's run, over its iterate `F`: the one-plane [`Field`], or the deep
/// halo's (`deep.rs`).
pub(crate) struct Run<'a, F: Iterate> {
    pub(crate) cfg: &'a Config,
    /// How the block iteration runs over channels (the method's).
    pub(crate) scheme: BlockIteration,
    /// How the sync variant swaps its halos (Jacobi's `--exchange`; multisplit: waitall).
    pub(crate) exchange: Exchange,
    rank: usize,
    /// The block's points that read no neighbour's halo, and the shell around them (the
    /// overlapped exchange sweeps them apart; computed once, not per iteration).
    interior: Region,
    shell: Vec<Region>,
    /// The steps of the first overlapped exchange.
    trace: Vec<ExchangeStep>,
    /// The slow rank's extra passes (`slow.rs`).
    slow: Slowdown,
    /// The links to neighbours (a grid block's faces with a neighbour, in [`Face::ALL`]
    /// order); channel k serves `faces[k]`.
    pub(crate) faces: Vec<F::Link>,
    pub(crate) field: F,
    /// ‖b − A u_0‖².
    pub(crate) res0_sq: f64,
    /// Sweeps done.
    pub(crate) it: u64,
    /// Where the time went: sweeps (`compute_s`), and the communication parts (`comm_s`).
    pub(crate) parts: Parts,
    /// The last value the solver's own test saw (none before the first check).
    pub(crate) reported: Option<f64>,
    /// The convergence profile.
    pub(crate) history: History,
    pub(crate) certifications: Vec<Certification>,
    /// Rounds of the non-blocking reduction completed.
    pub(crate) reductions: u64,
    /// Rounds of the convergence detection completed (async and racy over channels).
    pub(crate) detect_rounds: Option<u64>,
    /// This block's Σ r² at the last true-residual computation.
    pub(crate) last_true_local: f64,
    /// When the solve started (after the channels were opened and a barrier).
    pub(crate) start: Instant,
    pub(crate) progress: ProgressGate<'a>,
    /// Multisplitting's inner solver, which replaces the sweep (`None`: Jacobi).
    pub(crate) inner: Option<InnerSolve>,
}

/// One face's receive state in async and racy runs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Inbox {
    /// The halo already holds the neighbour's iterate of this stamp (from a certification
    /// exchange); older messages still in flight are not applied.
    floor: u64,
    /// The stamp of the newest message applied to the halo (0: none yet).
    stamp: u64,
    /// Multisplitting: that message's trailing word, the stamp of this rank's faces that the
    /// neighbour's solve started from (0: none, or not multisplitting).
    echo: u64,
}

impl Inbox {
    /// A message stamped `stamp` was applied; `extra` is what followed its face data (the
    /// echo word of multisplitting's messages, nothing otherwise).
    fn applied(&mut self, stamp: u64, extra: Option<f64>) {
        self.stamp = stamp;
        // A stamp is an iteration count, exact as an f64 (below 2^53).
        self.echo = extra.map_or(0, |e| e as u64);
    }
}

/// One face's send state in async and racy runs.
///
/// **Multisplitting's echo.** Each message carries, after the face's values, the stamp of the
/// neighbour's faces that the solve which computed it started from. A rank starting a solve
/// whose neighbour's newest faces echo this rank's newest (`sent`) knows that neighbour has
/// answered them and waits for this solve: the two take turns, one solving while the other
/// waits, and a slowed rank's solves are never cut short. The rank then sends that neighbour
/// its faces once, after the solve's first inner iteration (an intermediate iterate: valid
/// data for an asynchronous method, Frommer and Szyld's "flexible communication"); the
/// neighbour solves with them while this rank solves on, and its answer cuts this solve
/// short, which restores the overlap. Those mid-solve faces echo 0 (they answer nothing: their
/// sender is solving, not waiting), so the neighbour does not send mid-solve in turn. In a
/// balanced run a rank starts each solve with faces its neighbour computed from older ones,
/// the echoes never match, and nothing extra is sent.
#[derive(Debug, Clone, Copy, Default)]
struct Outbox {
    /// Offered but not sent (all R slots busy).
    unsent: bool,
    /// The stamp of this rank's newest faces sent (0: none yet).
    sent: u64,
    /// What this rank's faces echo: the stamp of the neighbour's faces the current iterate's
    /// solve started from.
    echo: u64,
    /// The neighbour answered this rank's newest faces and waits for the current solve: it
    /// gets faces once mid-solve.
    waits: bool,
}

/// Pack `face` of the current iterate into `buf`, followed by `echo` when the channel carries
/// a word more than the face (multisplitting).
fn pack_echo<F: Iterate>(field: &F, face: F::Link, echo: u64, buf: &mut [f64]) {
    let (data, extra) = buf.split_at_mut(field.message_len(face));
    field.pack(face, data);
    if let Some(e) = extra.first_mut() {
        *e = echo as f64;
    }
}

/// Offer `face` of `field`, stamped `it`, with `echo` (`try_send`), timed into `parts` as pack
/// and send: true when sent, false when all R slots were busy.
fn offer_face<B: Backend, M: chan_core::Mode, F: Iterate>(
    ch: &mut Channel<B, M>,
    field: &F,
    face: F::Link,
    echo: u64,
    it: u64,
    parts: &mut Parts,
) -> Result<bool, Error> {
    ch.set_iteration(it);
    match parts.offer(
        |fill| ch.try_send_with(fill),
        |buf| pack_echo(field, face, echo, buf),
    ) {
        Ok(()) => Ok(true),
        Err(TrySendError::Full(_)) => Ok(false),
        Err(TrySendError::Comm(e)) => Err(e.into()),
    }
}

/// Taking whatever new halo data a channel holds: the only thing async and racy runs do
/// differently, for every iterate.
pub(crate) trait HaloSource {
    /// Apply new data on this channel to the halo beyond `face`, if any (racy: read as `read`
    /// says), unless older than the inbox's floor, timed into `parts` as wait (looking for
    /// it) and unpack. True when the halo was written.
    fn take<F: Iterate>(
        &mut self,
        field: &mut F,
        face: F::Link,
        inbox: &mut Inbox,
        read: RacyRead,
        parts: &mut Parts,
    ) -> Result<bool, Error>;

    /// Whether new data has arrived since the last [`HaloSource::take`], without taking it
    /// or waiting (multisplitting's early stop). Async: a message newer than the last one
    /// received (one that a certification swap made stale still counts: it only ends a solve
    /// early). Racy: a send landed in the view.
    fn fresh(&mut self) -> Result<bool, Error>;
}

impl<B: Backend> HaloSource for Channel<B, Async> {
    fn take<F: Iterate>(
        &mut self,
        field: &mut F,
        face: F::Link,
        inbox: &mut Inbox,
        _: RacyRead,
        parts: &mut Parts,
    ) -> Result<bool, Error> {
        let t = Instant::now();
        let m = self.recv()?;
        parts.wait += t.elapsed();
        if let Some(m) = m {
            if m.stamp() >= inbox.floor {
                let (data, extra) = m.data().split_at(field.message_len(face));
                parts.unpack(data.len(), || field.unpack(face, data));
                inbox.applied(m.stamp(), extra.first().copied());
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn fresh(&mut self) -> Result<bool, Error> {
        Ok(self.can_recv()?)
    }
}

impl<B: Backend> HaloSource for Channel<B, Racy> {
    fn take<F: Iterate>(
        &mut self,
        field: &mut F,
        face: F::Link,
        inbox: &mut Inbox,
        read: RacyRead,
        parts: &mut Parts,
    ) -> Result<bool, Error> {
        let t = Instant::now();
        let read_now = match read {
            // Read the view only once a send newer than the halo's data has landed: before
            // any send the view holds zeros, not the neighbour's iterate.
            RacyRead::Landed => self.can_recv()? && self.last_stamp() >= inbox.floor.max(1),
            // The paper's racy receive: always ready, the view read every iteration.
            RacyRead::Always => true,
        };
        if read_now {
            self.recv()?;
        }
        parts.wait += t.elapsed();
        if read_now {
            let (data, extra) = self.view().split_at(field.message_len(face));
            parts.unpack(data.len(), || field.unpack_atomic(face, data));
            // The echo word is some send's whole word, like every element of the view.
            inbox.applied(
                self.last_stamp(),
                (!extra.is_empty()).then(|| extra.load(0)),
            );
        }
        Ok(read_now)
    }

    fn fresh(&mut self) -> Result<bool, Error> {
        Ok(self.can_recv()?)
    }
}

/// A value of the criterion past which a run is diverging: not finite, or above
/// [`DIVERGED`]. Relative residuals start at 1; no iteration that converges on a system it
/// is meant for (Jacobi on a dominant matrix, multisplitting on an M-matrix) first grows its
/// residual by 20 orders of magnitude, while one that diverges, as Jacobi does at a rate
/// of ρ > 1 a sweep, passes 1e20 long before f64 overflows (at ρ = 3, some 600 sweeps
/// before). So the run stops while its iterate, residual and report are still finite
/// numbers.
fn diverged(value: f64) -> bool {
    value.is_nan() || value > DIVERGED
}

/// See [`diverged`].
const DIVERGED: f64 = 1e20;

/// The blocking all-reduce of one value, as a sum.
pub(crate) fn sum_all<C: Context>(ctx: &mut C, v: f64) -> Result<f64, Error> {
    let mut buf = [v];
    ctx.all_reduce(&mut buf, ReduceOp::Sum)?;
    Ok(buf[0])
}

/// The non-blocking reduction of async and racy runs, `[Σ r², ranks at max_iters]`: restarted
/// as soon as it returns or, with [`BlockIteration::pace_reductions`], no sooner than `check_every`
/// iterations after the previous start, or once this rank has stopped iterating (it only
/// waits for the rounds then).
pub(crate) struct Rounds<R> {
    red: R,
    pace: Option<u64>,
    max_iters: u64,
    /// The iteration the last round started at (none yet).
    started: Option<u64>,
    /// The rank is waiting, not iterating (multisplitting with no new faces): its iteration
    /// count stands still, so pacing by it would never start the round the others wait in.
    waiting: bool,
}

impl<R: chan_core::Reduction> Rounds<R> {
    pub(crate) fn new(red: R, cfg: &Config, scheme: &BlockIteration) -> Self {
        Rounds {
            red,
            pace: scheme.pace_reductions.then_some(cfg.check_every),
            max_iters: cfg.max_iters,
            started: None,
            waiting: false,
        }
    }

    /// Whether the rank is waiting for its neighbours instead of iterating: a waiting rank's
    /// round is always due. (A rank stopped at `--max-iters` sends no more faces; a
    /// multisplitting neighbour waiting for them did not start the round that stops the run,
    /// paced by an iteration count that no longer moved, and both waited for ever.)
    pub(crate) fn set_waiting(&mut self, waiting: bool) {
        self.waiting = waiting;
    }

    /// May a round start at iteration `it`?
    pub(crate) fn due(&self, it: u64) -> bool {
        match (self.pace, self.started) {
            (Some(k), Some(s)) => it >= s.saturating_add(k) || it >= self.max_iters || self.waiting,
            _ => true,
        }
    }

    /// Start a round from `local` at iteration `it`.
    pub(crate) fn start(&mut self, it: u64, local: &[f64; 2]) -> Result<(), Error> {
        self.red.start(local)?;
        self.started = Some(it);
        Ok(())
    }

    /// Test the round in progress: its global values once it has returned. With none in
    /// progress, start one from `local` if due.
    pub(crate) fn poll(&mut self, it: u64, local: &[f64; 2]) -> Result<Option<[f64; 2]>, Error> {
        if self.red.in_progress() {
            Ok(self.red.test()?.map(|g| [g[0], g[1]]))
        } else {
            if self.due(it) {
                self.start(it, local)?;
            }
            Ok(None)
        }
    }
}

/// What [`Run::async_round`] did.
pub(crate) enum RoundStep {
    /// No round has returned yet.
    Pending,
    /// A round returned and the run goes on.
    Went,
    /// A round claimed convergence and the certification rejected it: its synchronous
    /// exchange gave the halo the neighbours' current iterate, newer than any message sent
    /// before it, and the run goes on.
    Rejected,
    /// The run stops.
    Stop(StopReason),
}

/// How an async or racy run detects convergence (`--detect`): the state of its scheme.
pub(crate) enum Detector<R, B: Backend, F> {
    /// Rounds of the non-blocking reduction of the residuals the sweeps saw.
    Reduction(Rounds<R>),
    /// Rounds of a consistent snapshot ("Snapshot detection" at [`Run::snapshot_round`]).
    Snapshot(Box<Snapshots<R, B, F>>),
    /// Rounds of a non-blocking barrier ("Barrier detection" at [`Run::barrier_round`]).
    Barrier(Barrier<R>),
}

impl<R: chan_core::Reduction, B: Backend, F> Detector<R, B, F> {
    /// [`Rounds::set_waiting`] (multisplitting, which detects by reduction only).
    fn set_waiting(&mut self, waiting: bool) {
        if let Detector::Reduction(r) = self {
            r.set_waiting(waiting);
        }
    }

    /// Rounds of the scheme completed.
    fn rounds(&self, reductions: u64) -> u64 {
        match self {
            Detector::Reduction(_) => reductions,
            Detector::Snapshot(s) => s.rounds,
            Detector::Barrier(b) => b.rounds,
        }
    }

    /// The snapshot detection's channels, to close with the others.
    fn into_channels(self) -> Vec<Channel<B, Sync>> {
        match self {
            Detector::Snapshot(s) => s.chans,
            Detector::Reduction(_) | Detector::Barrier(_) => Vec::new(),
        }
    }
}

/// Snapshot detection's state: the snapshot of this rank's block (allocated once), the Sync
/// channels its faces travel on (one per link, opened at setup beside the async halo
/// channels, so a snapshot face is never taken for an iterate), and the round under way.
pub(crate) struct Snapshots<R, B: Backend, F> {
    red: R,
    snap: F,
    chans: Vec<Channel<B, Sync>>,
    /// This round's snapshot faces not sent yet (the channel's slot still busy).
    unsent: Vec<bool>,
    /// This round's neighbour snapshot faces unpacked into the snapshot's halo.
    got: Vec<bool>,
    /// A round is under way: its snapshot taken, its faces travelling or its reduction in
    /// flight.
    taken: bool,
    /// The iteration the round's snapshot was taken at.
    at: u64,
    /// Rounds completed.
    rounds: u64,
    /// [`BlockIteration::pace_reductions`]: a round starts no sooner than this many
    /// iterations after the previous one did.
    pace: Option<u64>,
}

/// Barrier detection's state.
pub(crate) struct Barrier<R> {
    bar: R,
    /// This rank has entered the current round.
    entered: bool,
    /// This rank's share had diverged when it entered the current round.
    diverged: bool,
    /// Rounds completed.
    rounds: u64,
    /// The number of ranks, P.
    ranks: f64,
}

impl<'a, F: Iterate> Run<'a, F> {
    /// The state before the run: nothing swept, timed or recorded yet. `regions` is the
    /// one-plane block's interior and shell (the overlapped exchange's; unused with a deep
    /// halo).
    pub(crate) fn new(
        cfg: &'a Config,
        scheme: BlockIteration,
        rank: usize,
        field: F,
        faces: Vec<F::Link>,
        (interior, shell): (Region, Vec<Region>),
        progress: Option<&'a dyn Progress>,
    ) -> Self {
        Run {
            cfg,
            scheme,
            exchange: Exchange::Waitall,
            rank,
            interior,
            shell,
            trace: Vec::with_capacity(4),
            slow: Slowdown::new(cfg.slowdown_of(rank)),
            faces,
            field,
            res0_sq: 0.0,
            it: 0,
            parts: Parts::default(),
            reported: None,
            history: History::new(),
            certifications: Vec::new(),
            reductions: 0,
            detect_rounds: None,
            last_true_local: 0.0,
            start: Instant::now(),
            progress: ProgressGate::new(progress, cfg.criterion.tol(), cfg.max_iters),
            inner: None,
        }
    }

    pub(crate) fn criterion(&self) -> StopCriterion {
        self.cfg.criterion
    }

    pub(crate) fn measure(&self, res_sq: f64) -> f64 {
        self.criterion().measure(res_sq, self.res0_sq)
    }

    /// A value of the criterion at iteration `it`: into the history, and to the progress hook
    /// (rate-limited). No allocation: the history's room was reserved at the start.
    #[inline]
    pub(crate) fn observe(&mut self, it: u64, value: f64) {
        let elapsed = self.start.elapsed();
        self.history
            .record(HistoryPoint(it, value, elapsed.as_secs_f64()));
        self.progress.offer(self.it, value, elapsed);
    }

    /// A blocking halo swap over Sync channels: send every face, then receive every face.
    /// Sends only wait for a slot, which the peer freed when it received the previous swap.
    pub(crate) fn exchange<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
    ) -> Result<(), Error> {
        self.field
            .exchange(chans, &self.faces, self.it, &mut self.parts)
    }

    /// The true residual of the current global iterate: a synchronous halo swap, the residual
    /// of every block, a blocking sum. Collective. Returns ‖b − A u‖².
    pub(crate) fn true_residual_sq<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
    ) -> Result<f64, Error> {
        self.exchange(chans)?;
        let t = Instant::now();
        let local = self.field.residual_sq();
        self.last_true_local = local;
        self.parts.sweep += t.computed(Work::pass(self.points()));
        let t = Instant::now();
        let g = sum_all(ctx, local)?;
        self.parts.reduced(t);
        Ok(g)
    }

    /// Certify a convergence claim: the true residual, recorded. Collective.
    pub(crate) fn certify<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
    ) -> Result<f64, Error> {
        let g = self.true_residual_sq(ctx, chans)?;
        let true_value = self.measure(g);
        self.certifications.push(Certification {
            iteration: self.it,
            reported: self.reported,
            true_residual: true_value,
            accepted: self.criterion().met(true_value),
        });
        Ok(true_value)
    }

    /// The true residual at the end of a run: `last_true` when no rank's iterate has changed
    /// since it was computed, else a new one (collective: every rank must pass `Some` or
    /// every rank `None`).
    pub(crate) fn final_true<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
        last_true: Option<f64>,
    ) -> Result<f64, Error> {
        match last_true {
            Some(t) => Ok(t),
            None => {
                let g = self.true_residual_sq(ctx, chans)?;
                Ok(self.measure(g))
            }
        }
    }

    /// The end of an async or racy run (one-plane and deep): the final true residual
    /// ([`Run::final_true`]), the time since the start, the reduction dropped, the channels
    /// closed (data, then certification).
    pub(crate) fn end_async<C: Context, M: chan_core::Mode, R: chan_core::Reduction>(
        &mut self,
        ctx: &mut C,
        stop: StopReason,
        last_true: Option<f64>,
        detector: Detector<R, C::Backend, F>,
        chans: Vec<Channel<C::Backend, M>>,
        mut cert: Vec<Channel<C::Backend, Sync>>,
    ) -> Result<Ending, Error> {
        let true_value = self.final_true(ctx, &mut cert, last_true)?;
        let time = self.start.elapsed();
        self.detect_rounds = Some(detector.rounds(self.reductions));
        let snapshot_chans = detector.into_channels();
        let mut stats = close_all(chans)?;
        stats.extend(close_all(cert)?);
        stats.extend(close_all(snapshot_chans)?);
        Ok((stop, true_value, time, stats))
    }

    /// **Snapshot detection** (`--detect snapshot`), one pass of the async loop: a round
    /// takes a consistent snapshot of the global iterate and reduces its residual.
    ///
    /// A round: each rank copies its block into the snapshot (owned points and halo) and
    /// offers the snapshot's faces to its neighbours over the snapshot channels, then iterates
    /// on; at every pass it retries the faces not yet sent and takes the neighbours' snapshot
    /// faces that have arrived into the snapshot's halo. Once it holds all of them it computes
    /// the residual of its snapshot block with the neighbours' snapshot faces as halo and
    /// starts the non-blocking reduction of `[Σ r², ranks at max_iters]`. The blocks and
    /// halos of one round are one global vector, so the reduced value is the residual of that
    /// vector, not a mixture of residuals seen at different moments as the reduction scheme's
    /// is. A round starts once the previous one has returned on this rank; since that needs
    /// every rank's contribution, every rank has taken every face of the previous round, so
    /// the Sync channels (one message in flight) carry one round at a time.
    ///
    /// A round below tolerance stops the run **on the snapshot**: every rank restores its
    /// snapshot into its iterate (the sweeps since are dropped), so the final iterate is the
    /// vector whose residual was reduced. The certification (with `confirm`) then swaps halos
    /// and recomputes the residual of that same vector: it can differ from the snapshot's only
    /// by the order of the sums, so it is never rejected for a claim below tolerance but by a
    /// rounding (and then the run carries on as after any rejection). A round that counts a
    /// rank at `--max-iters` stops everyone; such a rank takes its snapshots without sweeping.
    /// A round costs a copy of the block and a residual pass: with
    /// [`BlockIteration::pace_reductions`] (`--check-every K`) one starts no sooner than K
    /// iterations after the previous one was taken.
    pub(crate) fn snapshot_round<C: Context, R: chan_core::Reduction>(
        &mut self,
        ctx: &mut C,
        s: &mut Snapshots<R, C::Backend, F>,
        cert: &mut [Channel<C::Backend, Sync>],
        last_true: &mut Option<f64>,
    ) -> Result<RoundStep, Error> {
        *last_true = None;
        if !s.taken {
            if let Some(k) = s.pace {
                let due = s.rounds == 0
                    || self.it >= s.at.saturating_add(k)
                    || self.it >= self.cfg.max_iters;
                if !due {
                    return Ok(RoundStep::Pending);
                }
            }
            let t = Instant::now();
            s.snap.copy_current_from(&self.field);
            self.parts.sweep += t.computed(Work::pass(self.points()));
            s.taken = true;
            s.at = self.it;
            s.unsent.fill(true);
            s.got.fill(false);
        }
        for ((ch, &link), unsent) in s.chans.iter_mut().zip(&self.faces).zip(&mut s.unsent) {
            if !*unsent {
                continue;
            }
            ch.set_iteration(s.at);
            let snap = &s.snap;
            match self
                .parts
                .offer(|fill| ch.try_send_with(fill), |buf| snap.pack(link, buf))
            {
                Ok(()) => *unsent = false,
                Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Comm(e)) => return Err(e.into()),
            }
        }
        if !s.red.in_progress() {
            for ((ch, &link), got) in s.chans.iter_mut().zip(&self.faces).zip(&mut s.got) {
                if *got {
                    continue;
                }
                let t = Instant::now();
                let m = ch.try_recv()?;
                self.parts.wait += t.elapsed();
                if let Some(m) = m {
                    let snap = &mut s.snap;
                    self.parts
                        .unpack(m.data().len(), || snap.unpack(link, m.data()));
                    *got = true;
                }
            }
            if s.got.iter().any(|&g| !g) {
                return Ok(self.pending());
            }
            let t = Instant::now();
            let r = s.snap.residual_sq();
            self.parts.sweep += t.computed(Work::pass(self.points()));
            let at_max = f64::from(u8::from(self.it >= self.cfg.max_iters));
            let t = Instant::now();
            s.red.start(&[r, at_max])?;
            self.parts.reduced(t);
        }
        let t = Instant::now();
        let round = s.red.test()?.map(|g| [g[0], g[1]]);
        self.parts.reduced(t);
        let Some(g) = round else {
            return Ok(self.pending());
        };
        s.taken = false;
        s.rounds += 1;
        self.reductions += 1;
        let value = self.measure(g[0]);
        if diverged(value) {
            return Ok(RoundStep::Stop(StopReason::Diverged));
        }
        self.reported = Some(value);
        self.observe(s.at, value);
        let mut step = RoundStep::Went;
        if self.criterion().met(value) {
            // Stop on the snapshot: the vector whose residual this is.
            let t = Instant::now();
            self.field.copy_current_from(&s.snap);
            self.parts.sweep += t.computed(Work::pass(self.points()));
            if !self.cfg.confirm {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            let t = self.certify(ctx, cert)?;
            *last_true = Some(t);
            if self.criterion().met(t) {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            step = RoundStep::Rejected;
        }
        if g[1] > 0.0 {
            return Ok(RoundStep::Stop(StopReason::MaxIters));
        }
        Ok(step)
    }

    /// **Barrier detection** (`--detect ibarrier`), one pass of the async loop: a rank enters
    /// the non-blocking barrier (`MPI_Ibarrier` over MPI, the tree reduction of no values
    /// elsewhere) once its own Σ r², the one its last sweep saw, meets the criterion scaled to
    /// its share: `P · Σ_local r²` meets it as the global Σ r² would (P ranks). When every
    /// rank has entered, the Σ r² each saw at its entry sum to at most P times the largest,
    /// so their sum meets the global criterion: the reduction scheme's claim, reached without
    /// reducing a value. A rank at `--max-iters` enters too (so the barrier completes), and
    /// so does a rank whose share has diverged; a rank keeps iterating and testing once it
    /// has entered (it does not wait).
    ///
    /// The barrier completes on every rank, each rank at its own pass; then, collectively,
    /// a blocking sum counts the ranks at `--max-iters` and the ranks that diverged (at their
    /// entry or at their last sweep). One that diverged stops the run as diverged, on every
    /// rank and before any certification: its entry claims nothing about the criterion.
    /// Otherwise (with `confirm`) the true residual certifies the claim as in the reduction
    /// scheme: accepted, the run stops; rejected, a new round begins (each rank enters again
    /// once its own residual is below its share). Every rank completes every round it
    /// entered before the run stops, so the barrier is never dropped while in flight.
    pub(crate) fn barrier_round<C: Context, R: chan_core::Reduction>(
        &mut self,
        ctx: &mut C,
        b: &mut Barrier<R>,
        cert: &mut [Channel<C::Backend, Sync>],
        local: &[f64; 2],
        last_true: &mut Option<f64>,
    ) -> Result<RoundStep, Error> {
        *last_true = None;
        let at_max = self.it >= self.cfg.max_iters;
        // The local criterion: this rank's share of the global one.
        let share = self.measure(b.ranks * local[0]);
        if !b.entered {
            b.diverged = diverged(share);
            if !(at_max || self.criterion().met(share) || b.diverged) {
                return Ok(RoundStep::Pending);
            }
            let t = Instant::now();
            b.bar.start(&[])?;
            self.parts.reduced(t);
            b.entered = true;
        }
        let t = Instant::now();
        let done = b.bar.test()?.is_some();
        self.parts.reduced(t);
        if !done {
            return Ok(self.pending());
        }
        b.entered = false;
        b.rounds += 1;
        let mut counts = [
            f64::from(u8::from(at_max)),
            f64::from(u8::from(b.diverged || diverged(share))),
        ];
        let t = Instant::now();
        ctx.all_reduce(&mut counts, ReduceOp::Sum)?;
        self.parts.reduced(t);
        let [any_max, any_diverged] = counts.map(|n| n > 0.0);
        if any_diverged {
            return Ok(RoundStep::Stop(StopReason::Diverged));
        }
        if !self.cfg.confirm {
            return Ok(RoundStep::Stop(if any_max {
                StopReason::MaxIters
            } else {
                StopReason::Criterion
            }));
        }
        let t = self.certify(ctx, cert)?;
        *last_true = Some(t);
        if diverged(t) {
            return Ok(RoundStep::Stop(StopReason::Diverged));
        }
        // The barrier's claim, certified: the value this scheme reports.
        self.reported = Some(t);
        self.observe(self.it, t);
        if self.criterion().met(t) {
            return Ok(RoundStep::Stop(StopReason::Criterion));
        }
        if any_max {
            return Ok(RoundStep::Stop(StopReason::MaxIters));
        }
        Ok(RoundStep::Rejected)
    }

    /// No round has returned: a rank at `--max-iters` only waits for one, and yields.
    fn pending(&self) -> RoundStep {
        if self.it >= self.cfg.max_iters {
            std::thread::yield_now();
        }
        RoundStep::Pending
    }

    /// The end of a pass of the async and racy loops (one-plane and deep): test the
    /// non-blocking reduction; once a round has returned, report it, certify a convergence
    /// claim (`last_true` holds the true residual in the pass that took it), stop on the
    /// criterion or when a rank reached `--max-iters`, and restart the reduction from
    /// `local` when due. A rejected claim restarts it from the exact local residual
    /// (`local[0]`), not the stale one that joined the wrong claim and would claim again at
    /// once.
    ///
    /// `last_true` is cleared first: a true residual holds only in the pass that certified
    /// it. After that, other ranks may sweep while this one, at --max-iters, does not, and
    /// whether the final true residual is taken again must be the same decision on every
    /// rank (it is collective).
    pub(crate) fn async_round<C: Context, R: chan_core::Reduction>(
        &mut self,
        ctx: &mut C,
        rounds: &mut Rounds<R>,
        cert: &mut [Channel<C::Backend, Sync>],
        local: &mut [f64; 2],
        last_true: &mut Option<f64>,
    ) -> Result<RoundStep, Error> {
        *last_true = None;
        let t = Instant::now();
        let round = rounds.poll(self.it, local)?;
        self.parts.reduced(t);
        let Some(g) = round else {
            if self.it >= self.cfg.max_iters {
                std::thread::yield_now(); // only waiting for the round to come back
            }
            return Ok(RoundStep::Pending);
        };
        self.reductions += 1;
        let value = self.measure(g[0]);
        if diverged(value) {
            // Every rank sees the same round.
            return Ok(RoundStep::Stop(StopReason::Diverged));
        }
        self.reported = Some(value);
        self.observe(self.it, value);
        let mut step = RoundStep::Went;
        if self.criterion().met(value) {
            if !self.cfg.confirm {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            let t = self.certify(ctx, cert)?;
            *last_true = Some(t);
            if self.criterion().met(t) {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            local[0] = self.last_true_local;
            step = RoundStep::Rejected;
        }
        if g[1] > 0.0 {
            return Ok(RoundStep::Stop(StopReason::MaxIters));
        }
        if rounds.due(self.it) {
            let t = Instant::now();
            rounds.start(self.it, local)?;
            self.parts.reduced(t);
        }
        Ok(step)
    }

    /// This rank's record of the run that ended as `(stop, true_value, time)` with these
    /// channels' statistics; `error_max` is the final iterate's largest error.
    pub(crate) fn record(
        &mut self,
        backend: &str,
        (stop, true_value, time): (StopReason, f64, Duration),
        channels: &[ChannelStats],
        error_max: Option<f64>,
    ) -> RankRecord {
        let mut messages = MessageTotals::default();
        for s in channels {
            messages.add(s);
        }
        self.history.finish();
        let (coords, local) = self.field.place();
        RankRecord {
            rank: self.rank,
            backend: backend.to_string(),
            coords,
            local,
            iterations: self.it,
            time_s: time.as_secs_f64(),
            compute_s: self.parts.sweep.as_secs_f64(),
            comm_s: self.parts.comm().as_secs_f64(),
            breakdown: Some(self.parts.breakdown(time)),
            stop,
            converged: self.criterion().met(true_value),
            residual: Residuals {
                reported: self.reported,
                true_residual: true_value,
                initial_norm: self.res0_sq.sqrt(),
            },
            reductions: self.reductions,
            detect_rounds: self.detect_rounds,
            certifications: self.certifications.clone(),
            history: self.history.clone(),
            error_max,
            krylov: None,
            multisplit: self.inner.as_ref().map(|s| MultisplitRecord {
                inner_iterations: s.total,
                inner_per_outer: if self.it > 0 {
                    s.total as f64 / self.it as f64
                } else {
                    0.0
                },
                inner_fewest: if s.fewest == u64::MAX { 0 } else { s.fewest },
                inner_most: s.most,
                inner_cut_short: s.cut_short,
                faces_sent_mid_solve: s.sent_mid_solve,
            }),
            halo_auto: None,
            exchange_trace: self.trace.clone(),
            messages,
            channels: channels.to_vec(),
        }
    }
}

/// The loops and their sweeps, over any iterate.
impl<F: Iterate> Run<'_, F> {
    /// The sync loop's block of `m` sweeps ([`Iterate::block_len`]; multisplit: one full
    /// inner solve of the block), timed as compute, with the slow rank's extra passes; Σ r² of
    /// the iterate the last sweep started from, or 0 when `resid` is false (the sweeps
    /// between checks).
    fn sweep(&mut self, m: u64, resid: bool) -> Result<f64, Error> {
        self.timed(m, |f| f.sweep_block(m, resid), &mut |_: &F| Ok(false))
    }

    /// The async loop's sweep, or multisplit's inner solve of the block, which `fresher` may
    /// cut short (`multisplit.rs`); timed as compute. Σ r² of the iterate it started from.
    fn sweep_or_solve(&mut self, fresher: &mut Fresher<'_, F>) -> Result<f64, Error> {
        self.timed(1, F::sweep_async, fresher)
    }

    /// `m` sweeps by `sweep` (multisplit: its inner solve instead), timed as compute. The slow
    /// rank's extra passes follow the sweeps, and each unit of an inner solve's work (the
    /// solve can stop between them).
    #[inline]
    fn timed(
        &mut self,
        m: u64,
        sweep: impl FnOnce(&mut F) -> f64,
        fresher: &mut Fresher<'_, F>,
    ) -> Result<f64, Error> {
        let t = Instant::now();
        let points = self.points();
        let (r, work) = match &mut self.inner {
            None => {
                let r = sweep(&mut self.field);
                let field = &self.field;
                let extra = self.slow.after(m, || field.residual_sq());
                let work = Work {
                    pass_points: extra * points,
                    ..Work::sweep(m * points)
                };
                (r, work)
            }
            Some(s) => (
                self.field.solve_inner(s, &mut self.slow, fresher)?,
                Work::unmodelled(),
            ),
        };
        self.parts.sweep += t.computed(work);
        self.it += m;
        Ok(r)
    }

    /// The block's owned points: the unit of its sweeps and passes in the cost model.
    fn points(&self) -> u64 {
        let (_, d) = self.field.place();
        (d.x * d.y * d.z) as u64
    }

    /// Record a step of the first overlapped exchange (no allocation: capacity 4).
    fn step(&mut self, s: ExchangeStep) {
        if self.trace.len() < self.trace.capacity() {
            self.trace.push(s);
        }
    }

    /// Sweep some regions into the next iterate, timed as compute; Σ r² of the current
    /// iterate over them (0 without `resid`).
    fn sweep_regions(&mut self, interior: bool, resid: bool) -> f64 {
        let t = Instant::now();
        let r = if interior {
            self.field.sweep_region(&self.interior, resid)
        } else {
            self.shell
                .iter()
                .map(|reg| self.field.sweep_region(reg, resid))
                .sum()
        };
        let volume = |reg: &Region| (reg.x.len() * reg.y.len() * reg.z.len()) as u64;
        let points = if interior {
            volume(&self.interior)
        } else {
            self.shell.iter().map(volume).sum()
        };
        self.parts.sweep += t.computed(Work::sweep(points));
        r
    }

    /// One sweep with the halo swapped around it, as `--exchange overlap` does: start every
    /// face's send, sweep the interior (which reads no neighbour's halo) while the messages
    /// travel, receive and unpack every face, sweep the boundary shell. The iterate is the
    /// one a swap followed by a whole sweep computes, bit for bit. Σ r² of the start iterate.
    fn overlapped_sweep<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
        resid: bool,
    ) -> Result<f64, Error> {
        halo::post(chans, &self.faces, self.it, &self.field, &mut self.parts)?;
        self.step(ExchangeStep::Posted);
        let inner = self.sweep_regions(true, resid);
        self.step(ExchangeStep::InteriorSwept);
        halo::complete(chans, &self.faces, &mut self.field, &mut self.parts)?;
        self.step(ExchangeStep::HalosArrived);
        let outer = self.sweep_regions(false, resid);
        self.step(ExchangeStep::ShellSwept);
        let t = Instant::now();
        let field = &self.field;
        let extra = self.slow.after(1, || field.residual_sq());
        self.parts.sweep += t.computed(Work::pass(extra * self.points()));
        self.field.finish_sweep();
        self.it += 1;
        Ok(inner + outer)
    }

    /// A halo swap with synchronous sends and receives one at a time (`--exchange
    /// blocking`): along each axis, for each direction, ranks at even coordinates send while
    /// ranks at odd ones receive, then the other way round, so every send meets a receive in
    /// the same step and no cycle of waiting ranks can form. A send returns once the
    /// transport is done with it: between threads when the receiving channel took it, over
    /// MPI when the send completed into the receive its credit guarantees is posted (the
    /// pattern of Wang & Gobbert's `MPI_Ssend`/`MPI_Recv`, without the synchronous send's
    /// round trip: the receiver's `recv` still blocks until the data is there).
    fn exchange_blocking<B: Backend>(
        &mut self,
        chans: &mut [Channel<B, Sync>],
    ) -> Result<(), Error> {
        let coords = self.field.place().0;
        let link = |f: &F, face: Face| {
            f.face_link(face)
                .expect("the blocking exchange runs on the grid only (Config::validate_matrix)")
        };
        let channel_of = |faces: &[F::Link], l: F::Link| faces.iter().position(|&g| g == l);
        for axis in [Axis::X, Axis::Y, Axis::Z] {
            let even = coords[axis.index()].is_multiple_of(2);
            for high in [true, false] {
                let out = link(&self.field, Face::new(axis, high));
                let back = link(&self.field, Face::new(axis, high).opposite());
                for sending_phase in [true, false] {
                    // Even ranks send in the first phase, odd ranks in the second.
                    if even == sending_phase {
                        if let Some(k) = channel_of(&self.faces, out) {
                            let ch = &mut chans[k];
                            ch.set_iteration(self.it);
                            let field = &self.field;
                            self.parts
                                .send(|fill| ch.send_with(fill), |buf| field.pack(out, buf))?;
                            // Wait as the transport does: spin with a core per rank, back
                            // off and yield on an oversubscribed node, block where polls
                            // cost (SMPI). The neighbour's receive ends it: a wait.
                            let t = Instant::now();
                            let mut spins = 0u32;
                            while ch.in_flight()? > 0 {
                                ch.check_world()?;
                                ch.await_own(spins)?;
                                spins = spins.saturating_add(1);
                            }
                            self.parts.wait += t.elapsed();
                        }
                    } else if let Some(k) = channel_of(&self.faces, back) {
                        let t = Instant::now();
                        let m = chans[k].recv()?;
                        self.parts.wait += t.elapsed();
                        let field = &mut self.field;
                        self.parts
                            .unpack(m.data().len(), || field.unpack(back, m.data()));
                    }
                }
            }
        }
        Ok(())
    }

    fn specs(&self, tag_base: u32, r: usize, extra: usize) -> Result<Vec<ChannelSpec>, Error> {
        halo::specs(&self.field, &self.faces, tag_base, r, extra)
    }

    /// The sync variant (the paper's Figure 1): halo swap every `halo_every` iterations,
    /// global residual every `check_every`. With a deep halo each swap brings k planes and
    /// is followed by a block of k sweeps (`deep.rs`; `halo_every` is 1 and K a multiple of
    /// k there, so a check falls at the end of a block).
    pub(crate) fn sync<C: Context>(&mut self, ctx: &mut C) -> Result<Ending, Error> {
        // A swap before every sweep, and no inner solve sweeping without one: the next
        // array's halo is never read.
        let every = self.inner.is_none() && self.scheme.halo_every == 1;
        self.field.set_halo_current_only(every);
        let specs = self.specs(0, 1, 0)?;
        let mut chans = ctx.open::<Sync>(&specs)?;
        // `--exchange neighbor`: the sweeps' swaps in one collective; the true residuals and
        // certifications still swap over the channels (the same values).
        let mut nb = match self.exchange {
            Exchange::Neighbor => Some(ctx.neighbor_exchange(&halo::neighbor_specs(&specs))?),
            _ => None,
        };
        ctx.barrier()?;
        let start = Instant::now();
        self.start = start;
        self.res0_sq = self.true_residual_sq(ctx, &mut chans)?;
        let initial = self.measure(self.res0_sq);
        let mut last_true = Some(initial);
        let mut fresh = true; // the halo holds the neighbours' current iterate
                              // u_0 may already solve the system (a zero initial residual).
        let stop = if self.criterion().met(initial) {
            StopReason::Criterion
        } else {
            loop {
                let swap = !fresh && self.it.is_multiple_of(self.scheme.halo_every);
                // A block of sweeps: one, or up to k with a deep halo.
                let m = self
                    .field
                    .block_len(self.cfg.max_iters.saturating_sub(self.it));
                // Only a check reads the block's residual: the others skip it, as the C
                // programs do.
                let resid = (self.it + m).is_multiple_of(self.cfg.check_every);
                let r = match (swap, self.exchange) {
                    (true, Exchange::Overlap) => self.overlapped_sweep(&mut chans, resid)?,
                    (true, Exchange::Blocking) => {
                        self.exchange_blocking(&mut chans)?;
                        self.sweep(m, resid)?
                    }
                    (true, Exchange::Waitall) => {
                        self.exchange(&mut chans)?;
                        self.sweep(m, resid)?
                    }
                    (true, Exchange::Neighbor) => {
                        let nb = nb.as_deref_mut().expect("made above for neighbor");
                        halo::swap_neighbor(nb, &self.faces, &mut self.field, &mut self.parts)?;
                        self.sweep(m, resid)?
                    }
                    (false, _) => self.sweep(m, resid)?,
                };
                fresh = false;
                last_true = None;
                if self.it.is_multiple_of(self.cfg.check_every) {
                    let t = Instant::now();
                    let g = sum_all(ctx, r)?;
                    self.parts.reduced(t);
                    // The (last) sweep's residual is that of the iterate it started from.
                    let value = self.measure(g);
                    if diverged(value) {
                        break StopReason::Diverged; // every rank saw the same sum
                    }
                    self.reported = Some(value);
                    self.observe(self.it - 1, value);
                    if self.criterion().met(value) {
                        if !self.cfg.confirm {
                            break StopReason::Criterion;
                        }
                        let t = self.certify(ctx, &mut chans)?;
                        fresh = true;
                        last_true = Some(t);
                        if self.criterion().met(t) {
                            break StopReason::Criterion;
                        }
                    }
                }
                if self.it >= self.cfg.max_iters {
                    break StopReason::MaxIters;
                }
            }
        };
        let true_value = self.final_true(ctx, &mut chans, last_true)?;
        let time = start.elapsed();
        drop(nb); // frees the graph communicator (every exchange was waited for)
        let stats = close_all(chans)?;
        Ok((stop, true_value, time, stats))
    }

    /// The async and racy variants: each iteration take whatever halo data is there, sweep,
    /// offer the faces with `try_send` (skipped when all R slots are busy), test the
    /// non-blocking reduction and restart it as soon as it returns (with
    /// [`BlockIteration::pace_reductions`], no sooner than `check_every` iterations after the previous
    /// start).
    ///
    /// Termination: each round reduces `[Σ r², ranks at max_iters]`. When a round meets the
    /// criterion and `confirm` is on, a synchronous swap over a second set of (Sync) channels
    /// and a blocking reduction certify the true residual, and the run carries on if it is
    /// above tolerance; the paper proposes this and does not build it. A round that counts
    /// a rank at `max_iters` stops everyone. Every rank sees the same rounds, so all decide
    /// alike. That is `--detect reduction`; `snapshot` and `ibarrier` replace the rounds
    /// ([`Run::snapshot_round`], [`Run::barrier_round`]) and keep the certification.
    pub(crate) fn asynchronous<C: Context, M>(&mut self, ctx: &mut C) -> Result<Ending, Error>
    where
        M: chan_core::Mode,
        Channel<C::Backend, M>: HaloSource,
    {
        // An iterate with no snapshot refuses the scheme before any channel opens.
        let mut snapshot = match self.scheme.detect {
            Detect::Snapshot => Some(
                self.field
                    .snapshot_buffer()
                    .map_err(ConfigError::SnapshotOf)?,
            ),
            Detect::Reduction | Detect::Ibarrier => None,
        };
        // Multisplitting's faces carry one word after the values: the echo (`Outbox`).
        let echo_words = usize::from(self.inner.is_some());
        let specs = self.specs(0, self.scheme.max_in_flight, echo_words)?;
        let mut chans = ctx.open::<M>(&specs)?;
        let cert_specs = self.specs(3, 1, 0)?;
        let mut cert = ctx.open::<Sync>(&cert_specs)?;
        let mut rounds = match self.scheme.detect {
            Detect::Reduction => Detector::Reduction(Rounds::new(
                ctx.reduction(2, ReduceOp::Sum)?,
                self.cfg,
                &self.scheme,
            )),
            Detect::Snapshot => {
                let snap = snapshot
                    .take()
                    .expect("made above for the snapshot detection");
                let specs = self.specs(6, 1, 0)?;
                let chans = ctx.open::<Sync>(&specs)?;
                let n = self.faces.len();
                Detector::Snapshot(Box::new(Snapshots {
                    red: ctx.reduction(2, ReduceOp::Sum)?,
                    snap,
                    chans,
                    unsent: vec![false; n],
                    got: vec![false; n],
                    taken: false,
                    at: 0,
                    rounds: 0,
                    pace: self.scheme.pace_reductions.then_some(self.cfg.check_every),
                }))
            }
            Detect::Ibarrier => Detector::Barrier(Barrier {
                bar: ctx.ibarrier()?,
                entered: false,
                diverged: false,
                rounds: 0,
                ranks: ctx.size() as f64,
            }),
        };
        ctx.barrier()?;
        self.start = Instant::now();
        self.res0_sq = self.true_residual_sq(ctx, &mut cert)?;
        let mut inbox = vec![Inbox::default(); self.faces.len()];
        // Faces offered but not sent (all R slots busy: multisplitting retries them), what
        // multisplitting's faces echo, and which neighbours wait for this rank's next ones.
        let mut outbox = vec![Outbox::default(); self.faces.len()];
        // Multisplitting's mid-solve sends: the solve's closure cannot borrow `self.faces`.
        let faces = self.faces.clone();
        let (mut idled, mut spins) = (false, 0u32);
        // A certification swap wrote new halos: solve with them.
        let mut resolve = false;
        // Multisplitting: the faces with new data since the last solve, when the first of
        // them came, and how long the last solve took.
        let mut fresh = vec![false; self.faces.len()];
        let mut first_new: Option<Instant> = None;
        let mut last_solve = Duration::ZERO;
        let mut local = [0.0, 0.0];
        let initial = self.measure(self.res0_sq);
        let mut last_true = Some(initial);
        let stop = 'run: loop {
            if self.it == 0 && self.criterion().met(initial) {
                break StopReason::Criterion; // u_0 already solves the system
            }
            if self.it < self.cfg.max_iters {
                // Take whatever new halo data is there. Multisplitting's first solve starts
                // from the initial halo on every rank, so the first solves overlap even when
                // a rank starts late: it finds its neighbours' first faces mid-solve (and is
                // cut short by them), not before it. Were it to take them first, it would
                // solve while they wait for its faces and they while it waits for theirs,
                // one rank at a time, and stay that way for the rest of the run.
                let mut got = false;
                let first_solve = self.inner.is_some() && self.it == 0;
                if !first_solve {
                    for (((ch, &face), ib), new) in chans
                        .iter_mut()
                        .zip(&self.faces)
                        .zip(&mut inbox)
                        .zip(&mut fresh)
                    {
                        let applied = ch.take(
                            &mut self.field,
                            face,
                            ib,
                            self.scheme.racy_read,
                            &mut self.parts,
                        )?;
                        *new |= applied;
                        got |= applied;
                    }
                }
                // Multisplitting does not solve the same block problem twice: with no new
                // halo since its last solve, it offers the faces it could not send yet,
                // reduces the residual of its current iterate, and waits. Every solve sends
                // new faces, so a neighbour always brings new data. Once one face has new
                // data it waits for the others at most as long as its last solve took, then
                // solves with whatever has arrived: a slow neighbour holds it back by one
                // solve at most.
                // (Only after a solve that sent its faces: with --halo-every N it solves on
                // until one does.)
                let idle = self.inner.is_some()
                    && self.it > 0
                    && self.it.is_multiple_of(self.scheme.halo_every)
                    && !resolve
                    && !fresh.is_empty()
                    && {
                        let any = fresh.iter().any(|&f| f);
                        if any && first_new.is_none() {
                            first_new = Some(Instant::now());
                        }
                        !any || (!fresh.iter().all(|&f| f)
                            && first_new.is_some_and(|t0| t0.elapsed() < last_solve))
                    };
                rounds.set_waiting(idle);
                if idle {
                    // The residual of the current iterate with the newest halo.
                    if !idled || got {
                        idled = true;
                        let t = Instant::now();
                        local[0] = self.field.residual_sq();
                        self.parts.sweep += t.computed(Work::pass(self.points()));
                    }
                    if outbox.iter().any(|o| o.unsent) {
                        self.offer(&mut chans, &mut outbox)?;
                    }
                    chans[0].relax(spins);
                    spins = spins.saturating_add(1);
                } else {
                    idled = false;
                    resolve = false;
                    spins = 0;
                    fresh.fill(false);
                    first_new = None;
                    let t = Instant::now();
                    // Multisplitting: a neighbour whose newest faces answer this rank's
                    // newest waits for this solve (they took turns); it gets this rank's
                    // faces once mid-solve (`Outbox`). The solve's faces echo the halo it
                    // starts from.
                    for (o, ib) in outbox.iter_mut().zip(&inbox) {
                        o.waits = echo_words > 0 && o.sent > 0 && ib.echo == o.sent;
                        o.echo = ib.stamp;
                    }
                    let mut mid = outbox.iter().any(|o| o.waits);
                    let mut mid_sent = 0;
                    let it = self.it;
                    // Multisplitting stops its inner solve once every neighbour has sent new
                    // faces since it began (`multisplit.rs`); Jacobi's sweep never asks.
                    let mut fresher = |field: &F| {
                        if std::mem::take(&mut mid) {
                            for ((ch, &face), _) in chans
                                .iter_mut()
                                .zip(&faces)
                                .zip(&outbox)
                                .filter(|(_, o)| o.waits)
                            {
                                // Echo 0: this rank is solving, not waiting (`Outbox`).
                                // Timed in the solve: multisplitting's sweep.
                                let mut aside = Parts::default();
                                mid_sent +=
                                    u64::from(offer_face(ch, field, face, 0, it, &mut aside)?);
                            }
                        }
                        for ch in chans.iter_mut() {
                            if !ch.fresh()? {
                                return Ok(false);
                            }
                        }
                        Ok(!chans.is_empty())
                    };
                    local[0] = self.sweep_or_solve(&mut fresher)?;
                    last_solve = t.elapsed();
                    if let Some(s) = &mut self.inner {
                        s.sent_mid_solve += mid_sent;
                    }
                    // Offer the new faces.
                    if self.it.is_multiple_of(self.scheme.halo_every) {
                        outbox.iter_mut().for_each(|o| o.unsent = true);
                        self.offer(&mut chans, &mut outbox)?;
                    }
                }
                local[1] = f64::from(u8::from(self.it >= self.cfg.max_iters));
            }
            // Test the reduction; restart it as soon as it returns (paced: once due).
            let step = match &mut rounds {
                Detector::Reduction(r) => {
                    self.async_round(ctx, r, &mut cert, &mut local, &mut last_true)?
                }
                Detector::Snapshot(s) => self.snapshot_round(ctx, s, &mut cert, &mut last_true)?,
                Detector::Barrier(b) => {
                    self.barrier_round(ctx, b, &mut cert, &local, &mut last_true)?
                }
            };
            match step {
                RoundStep::Stop(reason) => break 'run reason,
                RoundStep::Rejected => {
                    // Messages sent before the certification swap carry older stamps.
                    for (ch, ib) in cert.iter().zip(&mut inbox) {
                        ib.floor = ch.latest().map_or(ib.floor, |m| m.stamp());
                        // The halo holds that iterate now; it answers nothing.
                        ib.applied(ib.floor, None);
                    }
                    resolve = true; // solve with the new halo
                }
                RoundStep::Pending | RoundStep::Went => {}
            }
        };
        self.end_async(ctx, stop, last_true, rounds, chans, cert)
    }

    /// Offer the current faces marked unsent in `outbox` with `try_send`; a face whose R
    /// slots are all busy stays marked (Jacobi never retries one: its next sweep offers newer
    /// faces).
    fn offer<B: Backend, M: chan_core::Mode>(
        &mut self,
        chans: &mut [Channel<B, M>],
        outbox: &mut [Outbox],
    ) -> Result<(), Error> {
        for ((ch, &face), o) in chans.iter_mut().zip(&self.faces).zip(outbox) {
            if !o.unsent {
                continue;
            }
            if offer_face(ch, &self.field, face, o.echo, self.it, &mut self.parts)? {
                o.unsent = false;
                o.sent = self.it;
            } else {
                o.unsent = self.inner.is_some();
            }
        }
        Ok(())
    }
}

/// How a run ended: the reason, the true final residual (relative), the solve time and the
/// channels' statistics.
pub(crate) type Ending = (StopReason, f64, Duration, Vec<ChannelStats>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::{Dims, ProcGrid};
    use crate::problem::Problem;
    use chan_core::Mode;
    use chan_threads::World;

    /// The one face of a block with one neighbour.
    fn neighbour_face(f: &Field) -> Face {
        let g = f.geometry();
        Face::ALL
            .into_iter()
            .find(|fc| g.neighbours[fc.index()].is_some())
            .unwrap()
    }

    /// Rank 0 sends its face stamped 7 with echo 5 over a multisplit halo channel of mode `M`;
    /// rank 1 takes it into `field`. Rank 1's inbox after the take (rank 0's: untouched).
    fn send_with_echo<C: Context, M: Mode>(ctx: &mut C, field: &mut Field) -> Inbox
    where
        Channel<C::Backend, M>: HaloSource,
    {
        let face = neighbour_face(field);
        let specs = halo::specs(field, &[face], 0, 2, 1).unwrap();
        let mut chans = ctx.open::<M>(&specs).unwrap();
        let mut ib = Inbox::default();
        if ctx.rank() == 0 {
            chans[0].set_iteration(7);
            let f = &*field;
            chans[0]
                .try_send_with(|b| pack_echo(f, face, 5, b))
                .unwrap();
        } else {
            while !chans[0]
                .take(
                    field,
                    face,
                    &mut ib,
                    RacyRead::Landed,
                    &mut Parts::default(),
                )
                .unwrap()
            {}
        }
        ctx.barrier().unwrap();
        close_all(chans).unwrap();
        ib
    }

    /// Multisplitting's wire format over real channels (threads backend): the face one rank
    /// packs with an echo arrives in the other's halo value for value, as a plain unpack of
    /// the same face writes it, and the receiver's inbox reads back the sender's stamp and
    /// echo, in async and racy mode.
    #[test]
    fn a_multisplit_face_carries_its_echo() {
        let plan = Plan::split(Dims::new(12, 5, 4), ProcGrid(Dims::new(2, 1, 1))).unwrap();
        // A rank's block, its values distinct.
        let block = |r: usize| {
            let mut f = Field::new(&plan.geometry(r), &Problem::Laplace { offset: 0.0 });
            for (i, v) in f.iterate_mut().iter_mut().enumerate() {
                *v = 0.5 + i as f64;
            }
            f
        };
        let sender = block(0);
        let mut face = vec![0.0; sender.face_len(neighbour_face(&sender))];
        sender.pack(neighbour_face(&sender), &mut face);
        let mut want = block(1);
        want.unpack(neighbour_face(&want), &face);
        for mode in ["async", "racy"] {
            let outs = World::new(2).unwrap().run(|ctx| {
                let mut field = block(ctx.rank());
                let ib = match mode {
                    "async" => send_with_echo::<_, Async>(ctx, &mut field),
                    _ => send_with_echo::<_, Racy>(ctx, &mut field),
                };
                (ib, field)
            });
            let (ib, field) = &outs[1];
            assert_eq!(field.iterate(), want.iterate(), "{mode}: the halo");
            assert_eq!((ib.stamp, ib.echo), (7, 5), "{mode}: stamp and echo");
        }
    }
}
