//! How async and racy runs detect convergence (`--detect`): rounds of the non-blocking
//! reduction, consistent snapshots, a non-blocking barrier; and the certification of a
//! claim by the true residual, for all three.

use super::*;
use crate::iterate::SnapshotOf;

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
    /// Fresh shares ([`Run::fresh_rounds`]): a round starts only after a sweep that began
    /// once the previous round had returned, and a claim needs two rounds in a row.
    fresh: bool,
    /// The last round that returned met the criterion (read with `fresh` only).
    met_before: bool,
}

impl<R: chan_core::Reduction> Rounds<R> {
    pub(crate) fn new(red: R, cfg: &Config, scheme: &BlockIteration, fresh: bool) -> Self {
        Rounds {
            red,
            pace: scheme.pace_reductions.then_some(cfg.check_every),
            max_iters: cfg.max_iters,
            started: None,
            waiting: false,
            fresh,
            met_before: false,
        }
    }

    /// A round that returned with `met` (its value meets the criterion): does it claim
    /// convergence? With fresh shares only the second of two rounds in a row that meet it.
    fn claims(&mut self, met: bool) -> bool {
        let claim = met && (!self.fresh || self.met_before);
        self.met_before = met;
        claim
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
pub(crate) enum Detector<R, B: Backend, F: Iterate> {
    /// Rounds of the non-blocking reduction of the residuals the sweeps saw.
    Reduction(Rounds<R>),
    /// Rounds of a consistent snapshot ("Snapshot detection" at [`Run::snapshot_round`]).
    Snapshot(Box<Snapshots<R, B, F>>),
    /// Rounds of a non-blocking barrier ("Barrier detection" at [`Run::barrier_round`]).
    Barrier(Barrier<R>),
}

impl<R: chan_core::Reduction, B: Backend, F: Iterate> Detector<R, B, F> {
    /// [`Rounds::set_waiting`] (multisplitting, which detects by reduction only).
    pub(super) fn set_waiting(&mut self, waiting: bool) {
        if let Detector::Reduction(r) = self {
            r.set_waiting(waiting);
        }
    }

    /// Rounds of the scheme completed.
    pub(super) fn rounds(&self, reductions: u64) -> u64 {
        match self {
            Detector::Reduction(_) => reductions,
            Detector::Snapshot(s) => s.rounds,
            Detector::Barrier(b) => b.rounds,
        }
    }

    /// The snapshot detection's channels, to close with the others.
    pub(super) fn into_channels(self) -> Vec<Channel<B, Sync>> {
        match self {
            Detector::Snapshot(s) => s.chans,
            Detector::Reduction(_) | Detector::Barrier(_) => Vec::new(),
        }
    }
}

/// Snapshot detection's state: the snapshot of this rank's block (allocated once), the Sync
/// channels its faces travel on (one per link, opened at setup beside the async halo
/// channels, so a snapshot face is never taken for an iterate), and the round under way.
pub(crate) struct Snapshots<R, B: Backend, F: Iterate> {
    red: R,
    snap: F::Snapshot,
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

impl<F: Iterate, S: Step<F>> Run<'_, F, S> {
    /// The snapshot detection's buffer, allocated once (`None` for the other schemes); an
    /// error naming the setting that rules it out for an iterate with no snapshot.
    pub(super) fn snapshot_buffer(&self) -> Result<Option<F::Snapshot>, Error> {
        match self.scheme.detect {
            Detect::Snapshot => Ok(Some(
                self.field
                    .snapshot_buffer()
                    .map_err(ConfigError::SnapshotOf)?,
            )),
            Detect::Reduction | Detect::Ibarrier => Ok(None),
        }
    }

    /// The detection scheme's state, its reduction, barrier or channels opened (collective),
    /// with `snapshot` from [`Run::snapshot_buffer`].
    pub(super) fn detector<C: Context>(
        &self,
        ctx: &mut C,
        snapshot: Option<F::Snapshot>,
    ) -> Result<Detector<C::Reduction, C::Backend, F>, Error> {
        Ok(match (self.scheme.detect, snapshot) {
            (Detect::Snapshot, Some(snap)) => {
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
            (Detect::Ibarrier, _) => Detector::Barrier(Barrier {
                bar: ctx.ibarrier()?,
                entered: false,
                diverged: false,
                rounds: 0,
                ranks: ctx.size() as f64,
            }),
            _ => Detector::Reduction(Rounds::new(
                ctx.reduction(2, ReduceOp::Sum)?,
                self.cfg,
                &self.scheme,
                self.fresh_rounds,
            )),
        })
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
            s.snap.take_from(&self.field);
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
            s.snap.restore_into(&mut self.field);
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
        if rounds.claims(self.criterion().met(value)) {
            if !self.cfg.confirm {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            let t = self.certify(ctx, cert)?;
            *last_true = Some(t);
            if self.criterion().met(t) {
                return Ok(RoundStep::Stop(StopReason::Criterion));
            }
            local[0] = self.last_true_local;
            rounds.met_before = false;
            step = RoundStep::Rejected;
        }
        if g[1] > 0.0 {
            return Ok(RoundStep::Stop(StopReason::MaxIters));
        }
        // Fresh shares: the next pass's poll starts the round, after a sweep.
        if !rounds.fresh && rounds.due(self.it) {
            let t = Instant::now();
            rounds.start(self.it, local)?;
            self.parts.reduced(t);
        }
        Ok(step)
    }
}
