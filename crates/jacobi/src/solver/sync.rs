//! The sync loop (the paper's Figure 1) and its halo exchanges: waitall, blocking,
//! overlapped with the sweep, the neighbourhood collective.

use super::*;
use crate::iterate::SweepRegions;
use chan_core::NeighborExchange;

impl<F: Iterate, S: Step<F>> Run<'_, F, S> {
    /// The sync variant (the paper's Figure 1): halo swap every `halo_every` iterations,
    /// global residual every `check_every`. With a deep halo each swap brings k planes and
    /// is followed by a block of k sweeps (`deep/`; `halo_every` is 1 and K a multiple of
    /// k there, so a check falls at the end of a block).
    ///
    /// `X` is how a due swap goes around the sweep: [`Whole`], or [`Overlapped`] for an
    /// iterate that sweeps by regions.
    pub(crate) fn sync<C: Context, X: Swap<F>>(&mut self, ctx: &mut C) -> Result<Ending, Error> {
        // A swap before every sweep, and no inner solve sweeping without one: the next
        // array's halo is never read.
        let every = !S::INNER && self.scheme.halo_every == 1;
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
        // A given start: its residual; resumed (iterations already done), the run goes on as
        // the interrupted one would have, with no check of its own here.
        let begun = self.begin(ctx, &mut chans)?;
        let resumed = self.it > 0;
        let initial = self.measure(begun.unwrap_or(self.res0_sq));
        let mut last_true = Some(initial);
        let mut fresh = true; // the halo holds the neighbours' current iterate
                              // u_0 may already solve the system (a zero initial residual).
        let stop = if !resumed && self.criterion().met(initial) {
            StopReason::Criterion
        } else if resumed && self.it >= self.cfg.max_iters {
            StopReason::MaxIters // resumed at the iteration limit: nothing more to do
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
                let r = if swap {
                    X::swap_sweep(self, &mut chans, nb.as_deref_mut(), m, resid)?
                } else {
                    self.sweep(m, resid)?
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
                if self.checkpoint_due() {
                    self.save_checkpoint(ctx)?;
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

    /// Record a step of the first overlapped exchange (no allocation: capacity 4).
    fn trace_step(&mut self, s: ExchangeStep) {
        if self.trace.len() < self.trace.capacity() {
            self.trace.push(s);
        }
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
}

/// The overlapped exchange's sweeps, for an iterate that sweeps by regions.
impl<F: SweepRegions, S: Step<F>> Run<'_, F, S> {
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
        self.trace_step(ExchangeStep::Posted);
        let inner = self.sweep_regions(true, resid);
        self.trace_step(ExchangeStep::InteriorSwept);
        halo::complete(chans, &self.faces, &mut self.field, &mut self.parts)?;
        self.trace_step(ExchangeStep::HalosArrived);
        let outer = self.sweep_regions(false, resid);
        self.trace_step(ExchangeStep::ShellSwept);
        let t = Instant::now();
        let field = &self.field;
        let extra = self.slow.after(1, || field.residual_sq());
        self.parts.sweep += t.computed(Work::pass(extra * self.points()));
        self.field.finish_sweep();
        self.it += 1;
        Ok(inner + outer)
    }
}

/// How the sync loop swaps the halo around a block of sweeps when a swap is due
/// (`--exchange`), chosen by `dispatch.rs`.
pub(crate) trait Swap<F: Iterate> {
    /// Swap the halo over `chans` (or `nb`, the neighbourhood collective) and sweep the block
    /// of `m`: Σ r² of the iterate the block started from when `resid`, else 0.
    fn swap_sweep<B: Backend, S: Step<F>, N: NeighborExchange + ?Sized>(
        run: &mut Run<'_, F, S>,
        chans: &mut [Channel<B, Sync>],
        nb: Option<&mut N>,
        m: u64,
        resid: bool,
    ) -> Result<f64, Error>;
}

/// The whole halo swapped, then the block swept: `--exchange waitall`, `blocking` and
/// `neighbor`, for every iterate. (`overlap` computes the same iterate, bit for bit, swapping
/// the whole halo first: dispatch runs it as [`Overlapped`] wherever the iterate sweeps by
/// regions, and the configuration refuses it elsewhere.)
pub(crate) struct Whole;

impl<F: Iterate> Swap<F> for Whole {
    fn swap_sweep<B: Backend, S: Step<F>, N: NeighborExchange + ?Sized>(
        run: &mut Run<'_, F, S>,
        chans: &mut [Channel<B, Sync>],
        nb: Option<&mut N>,
        m: u64,
        resid: bool,
    ) -> Result<f64, Error> {
        match (run.exchange, nb) {
            (Exchange::Blocking, _) => run.exchange_blocking(chans)?,
            (Exchange::Neighbor, Some(nb)) => {
                halo::swap_neighbor(nb, &run.faces, &mut run.field, &mut run.parts)?
            }
            _ => run.exchange(chans)?,
        }
        run.sweep(m, resid)
    }
}

/// `--exchange overlap`: the sends posted, the interior swept while they travel, the shell
/// swept once they have arrived ([`Run::overlapped_sweep`]).
pub(crate) struct Overlapped;

impl<F: SweepRegions> Swap<F> for Overlapped {
    fn swap_sweep<B: Backend, S: Step<F>, N: NeighborExchange + ?Sized>(
        run: &mut Run<'_, F, S>,
        chans: &mut [Channel<B, Sync>],
        _: Option<&mut N>,
        m: u64,
        resid: bool,
    ) -> Result<f64, Error> {
        debug_assert_eq!(m, 1, "one-plane halos: one sweep per swap");
        run.overlapped_sweep(chans, resid)
    }
}
