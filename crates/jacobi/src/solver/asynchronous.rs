//! The async loop of the async and racy variants: taking whatever halo has arrived, offering
//! faces, multisplitting's turns (`Outbox`), and the round of its detection at each pass.

use super::detect::{Detector, RoundStep};
use super::*;

/// One face's receive state in async and racy runs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Inbox {
    /// The halo already holds the neighbour's iterate of this stamp (from a certification
    /// exchange); older messages still in flight are not applied.
    pub(super) floor: u64,
    /// The stamp of the newest message applied to the halo (0: none yet).
    pub(super) stamp: u64,
    /// Multisplitting: that message's trailing word, the stamp of this rank's faces that the
    /// neighbour's solve started from (0: none, or not multisplitting).
    pub(super) echo: u64,
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
pub(super) fn pack_echo<F: Iterate>(field: &F, face: F::Link, echo: u64, buf: &mut [f64]) {
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

/// What the async loop keeps from one pass to the next, beside the run's state.
struct Pass<L> {
    /// Each face's receive state.
    inbox: Vec<Inbox>,
    /// Faces offered but not sent (all R slots busy: multisplitting retries them), what
    /// multisplitting's faces echo, and which neighbours wait for this rank's next ones.
    outbox: Vec<Outbox>,
    /// The links, for multisplitting's mid-solve sends (the solve's closure cannot borrow
    /// the run's).
    faces: Vec<L>,
    /// Multisplitting is waiting for faces, and has taken the residual it reduces meanwhile.
    idled: bool,
    /// Passes in a row spent waiting.
    spins: u32,
    /// A certification swap wrote new halos: solve with them.
    resolve: bool,
    /// Multisplitting: the faces with new data since the last solve, when the first of them
    /// came, and how long the last solve took.
    fresh: Vec<bool>,
    first_new: Option<Instant>,
    last_solve: Duration,
    /// This rank's share of the next round: `[Σ r², at max_iters]`.
    local: [f64; 2],
}

impl<L: Copy> Pass<L> {
    fn new(faces: &[L]) -> Self {
        let n = faces.len();
        Pass {
            inbox: vec![Inbox::default(); n],
            outbox: vec![Outbox::default(); n],
            faces: faces.to_vec(),
            idled: false,
            spins: 0,
            resolve: false,
            fresh: vec![false; n],
            first_new: None,
            last_solve: Duration::ZERO,
            local: [0.0, 0.0],
        }
    }

    /// Does multisplitting wait for new faces at iteration `it` instead of solving? It does
    /// not solve the same block problem twice: with no new halo since its last solve, it
    /// offers the faces it could not send yet, reduces the residual of its current iterate,
    /// and waits. Every solve sends new faces, so a neighbour always brings new data. Once
    /// one face has new data it waits for the others at most as long as its last solve
    /// took, then solves with whatever has arrived: a slow neighbour holds it back by one
    /// solve at most. (Only after a solve that sent its faces: with --halo-every N it solves
    /// on until one does.) Jacobi (`inner` false) never waits.
    fn idle(&mut self, inner: bool, it: u64, halo_every: u64) -> bool {
        if !(inner && it > 0 && it.is_multiple_of(halo_every) && !self.resolve) {
            return false;
        }
        if self.fresh.is_empty() {
            return false;
        }
        let any = self.fresh.iter().any(|&f| f);
        if any && self.first_new.is_none() {
            self.first_new = Some(Instant::now());
        }
        !any || (!self.fresh.iter().all(|&f| f)
            && self
                .first_new
                .is_some_and(|t0| t0.elapsed() < self.last_solve))
    }
}

impl<F: Iterate, S: Step<F>> Run<'_, F, S> {
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
        let snapshot = self.snapshot_buffer()?;
        // Multisplitting's faces carry one word after the values: the echo (`Outbox`).
        let specs = self.specs(0, self.scheme.max_in_flight, usize::from(S::INNER))?;
        let mut chans = ctx.open::<M>(&specs)?;
        let cert_specs = self.specs(3, 1, 0)?;
        let mut cert = ctx.open::<Sync>(&cert_specs)?;
        let mut rounds = self.detector(ctx, snapshot)?;
        ctx.barrier()?;
        self.start = Instant::now();
        self.res0_sq = self.true_residual_sq(ctx, &mut cert)?;
        // A given start (and, resumed, the iterations already done): its true residual.
        let begun = self.begin(ctx, &mut cert)?;
        let first = self.it;
        let mut pass = Pass::new(&self.faces);
        // Resumed at the iteration limit: no sweep, and the first round says so.
        pass.local[1] = f64::from(u8::from(self.it >= self.cfg.max_iters));
        let initial = self.measure(begun.unwrap_or(self.res0_sq));
        let mut last_true = Some(initial);
        let stop = 'run: loop {
            if self.it == first && self.criterion().met(initial) {
                break StopReason::Criterion; // u_0 already solves the system
            }
            if self.it < self.cfg.max_iters {
                let got = self.take_halos(&mut chans, &mut pass)?;
                let idle = pass.idle(S::INNER, self.it, self.scheme.halo_every);
                rounds.set_waiting(idle);
                if idle {
                    self.wait_for_faces(&mut chans, &mut pass, got)?;
                } else {
                    self.step_and_offer(&mut chans, &mut pass)?;
                }
                pass.local[1] = f64::from(u8::from(self.it >= self.cfg.max_iters));
            }
            // Test the reduction; restart it as soon as it returns (paced: once due).
            let rounds_before = self.reductions;
            let step = match &mut rounds {
                Detector::Reduction(r) => {
                    self.async_round(ctx, r, &mut cert, &mut pass.local, &mut last_true)?
                }
                Detector::Snapshot(s) => self.snapshot_round(ctx, s, &mut cert, &mut last_true)?,
                Detector::Barrier(b) => {
                    self.barrier_round(ctx, b, &mut cert, &pass.local, &mut last_true)?
                }
            };
            match step {
                RoundStep::Stop(reason) => break 'run reason,
                RoundStep::Rejected => {
                    // Messages sent before the certification swap carry older stamps.
                    for (ch, ib) in cert.iter().zip(&mut pass.inbox) {
                        ib.floor = ch.latest().map_or(ib.floor, |m| m.stamp());
                        // The halo holds that iterate now; it answers nothing.
                        ib.applied(ib.floor, None);
                    }
                    pass.resolve = true; // solve with the new halo
                }
                RoundStep::Pending | RoundStep::Went => {}
            }
            // A checkpoint every K completed rounds: every rank sees the same rounds.
            if self.reductions != rounds_before
                && self
                    .checkpoint
                    .is_some_and(|c| c.every() > 0 && self.reductions.is_multiple_of(c.every()))
            {
                self.save_checkpoint(ctx)?;
            }
        };
        self.end_async(ctx, stop, last_true, rounds, chans, cert)
    }

    /// Take whatever new halo data is there: true when some was applied. Multisplitting's
    /// first solve starts from the initial halo on every rank, so the first solves overlap
    /// even when a rank starts late: it finds its neighbours' first faces mid-solve (and is
    /// cut short by them), not before it. Were it to take them first, it would solve while
    /// they wait for its faces and they while it waits for theirs, one rank at a time, and
    /// stay that way for the rest of the run.
    fn take_halos<Ch: HaloSource>(
        &mut self,
        chans: &mut [Ch],
        pass: &mut Pass<F::Link>,
    ) -> Result<bool, Error> {
        let mut got = false;
        if S::INNER && self.it == 0 {
            return Ok(got);
        }
        for (((ch, &face), ib), new) in chans
            .iter_mut()
            .zip(&self.faces)
            .zip(&mut pass.inbox)
            .zip(&mut pass.fresh)
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
        Ok(got)
    }

    /// Multisplitting waiting for new faces ([`Pass::idle`]): the residual of the current
    /// iterate with the newest halo (once, and again when `got` new data), the faces not sent
    /// yet offered again, the core given away as the transport waits.
    fn wait_for_faces<B: Backend, M: chan_core::Mode>(
        &mut self,
        chans: &mut [Channel<B, M>],
        pass: &mut Pass<F::Link>,
        got: bool,
    ) -> Result<(), Error> {
        if !pass.idled || got {
            pass.idled = true;
            let t = Instant::now();
            pass.local[0] = self.field.residual_sq();
            self.parts.sweep += t.computed(Work::pass(self.points()));
        }
        if pass.outbox.iter().any(|o| o.unsent) {
            self.offer(chans, &mut pass.outbox)?;
        }
        chans[0].relax(pass.spins);
        pass.spins = pass.spins.saturating_add(1);
        Ok(())
    }

    /// The step (a sweep, or multisplitting's inner solve, which new faces from every
    /// neighbour cut short), then the new faces offered when due.
    fn step_and_offer<B: Backend, M: chan_core::Mode>(
        &mut self,
        chans: &mut [Channel<B, M>],
        pass: &mut Pass<F::Link>,
    ) -> Result<(), Error>
    where
        Channel<B, M>: HaloSource,
    {
        pass.idled = false;
        pass.resolve = false;
        pass.spins = 0;
        pass.fresh.fill(false);
        pass.first_new = None;
        let t = Instant::now();
        // Multisplitting: a neighbour whose newest faces answer this rank's newest waits for
        // this solve (they took turns); it gets this rank's faces once mid-solve (`Outbox`).
        // The solve's faces echo the halo it starts from.
        for (o, ib) in pass.outbox.iter_mut().zip(&pass.inbox) {
            o.waits = S::INNER && o.sent > 0 && ib.echo == o.sent;
            o.echo = ib.stamp;
        }
        let mut mid = pass.outbox.iter().any(|o| o.waits);
        let mut mid_sent = 0;
        let it = self.it;
        let (faces, outbox) = (&pass.faces, &pass.outbox);
        // Multisplitting stops its inner solve once every neighbour has sent new faces since
        // it began (`multisplit.rs`); Jacobi's sweep never asks.
        let mut fresher = |field: &F| {
            if std::mem::take(&mut mid) {
                for ((ch, &face), _) in chans
                    .iter_mut()
                    .zip(faces)
                    .zip(outbox)
                    .filter(|(_, o)| o.waits)
                {
                    // Echo 0: this rank is solving, not waiting (`Outbox`). Timed in the
                    // solve: multisplitting's sweep.
                    let mut aside = Parts::default();
                    mid_sent += u64::from(offer_face(ch, field, face, 0, it, &mut aside)?);
                }
            }
            for ch in chans.iter_mut() {
                if !ch.fresh()? {
                    return Ok(false);
                }
            }
            Ok(!chans.is_empty())
        };
        pass.local[0] = self.sweep_or_solve(&mut fresher)?;
        pass.last_solve = t.elapsed();
        self.step.sent_mid_solve(mid_sent);
        // Offer the new faces.
        if self.it.is_multiple_of(self.scheme.halo_every) {
            pass.outbox.iter_mut().for_each(|o| o.unsent = true);
            self.offer(chans, &mut pass.outbox)?;
        }
        Ok(())
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
                o.unsent = S::INNER;
            }
        }
        Ok(())
    }
}
