//! Jacobi's loops, written once against chan-core's [`Context`] and over the [`Iterate`]
//! trait: one sync loop ([`Run::sync`]) and one async loop for the async and racy variants
//! ([`Run::asynchronous`]), each monomorphised for the one-plane [`Field`] and the deep halo's
//! iterate (`deep/`), and run by multisplitting with its inner solve in place of the sweep
//! (`multisplit.rs`). Which loop, over which iterate, is chosen in `dispatch.rs`.
//!
//! Every decision that ends or changes the course of a run is taken from a value every rank
//! sees identically: a blocking all-reduce (sync checks, certification), one round of the
//! non-blocking reduction (async, racy; a snapshot's with `--detect snapshot`), or the
//! completion of a non-blocking barrier followed by blocking sums (`--detect ibarrier`). So all ranks make the same sequence of collective
//! calls and no rank waits for another that went a different way.

mod asynchronous;
mod detect;
mod step;
mod sync;
#[cfg(test)]
mod test;

pub(crate) use step::{Step, Sweep};
pub(crate) use sync::{Overlapped, Swap, Whole};

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
use crate::start::{Checkpoint, Saved, Start};
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
/// halo's (`deep/`).
pub(crate) struct Run<'a, F: Iterate, S: Step<F> = Sweep> {
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
    pub(crate) slow: Slowdown,
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
    /// The block iteration's step: Jacobi's sweep, or multisplitting's inner solve.
    pub(crate) step: S,
    /// Async rounds of fresh shares (the shared-memory backend, whose threads may be
    /// descheduled between reading their halos and sweeping, a whole round long): each
    /// round's shares come from sweeps that read their halos after the previous round
    /// returned, and a claim needs two rounds in a row below tolerance (`shared/`, "Rounds").
    pub(crate) fresh_rounds: bool,
    /// Where the run starts instead of the problem's iterate ([`crate::Start`]).
    pub(crate) begin: Option<&'a Start>,
    /// Where its checkpoints go, every K iterations ([`crate::Checkpoint`]).
    pub(crate) checkpoint: Option<&'a dyn Checkpoint>,
    /// The checkpoint's buffers: this block's values as bits, and (rank 0) the global
    /// iterate; their room is made at the first checkpoint and kept.
    saved_bits: Vec<u64>,
    saved_global: Vec<f64>,
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

impl<'a, F: Iterate, S: Step<F>> Run<'a, F, S> {
    /// The state before the run: nothing swept, timed or recorded yet. `regions` is the
    /// one-plane block's interior and shell (the overlapped exchange's; unused with a deep
    /// halo); `step` is what an iteration does to the block.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: &'a Config,
        scheme: BlockIteration,
        rank: usize,
        field: F,
        faces: Vec<F::Link>,
        (interior, shell): (Region, Vec<Region>),
        progress: Option<&'a dyn Progress>,
        step: S,
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
            step,
            fresh_rounds: false,
            begin: None,
            checkpoint: None,
            saved_bits: Vec::new(),
            saved_global: Vec::new(),
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
            multisplit: self.step.record(self.it),
            halo_auto: None,
            exchange_trace: self.trace.clone(),
            messages,
            channels: channels.to_vec(),
        }
    }

    /// Start from the given iterate, when there is one, once ‖b − A u₀‖ of the problem's
    /// own start is known (collective): the iterations already done, and ‖b − A u‖² of the
    /// iterate started from (its halo swapped).
    pub(crate) fn begin<C: Context>(
        &mut self,
        ctx: &mut C,
        chans: &mut [Channel<C::Backend, Sync>],
    ) -> Result<Option<f64>, Error> {
        if self.checkpoint.is_some() {
            self.field.restartable()?;
        }
        let Some(start) = self.begin else {
            return Ok(None);
        };
        self.field.start_from(&start.x)?;
        self.it = start.iteration;
        self.true_residual_sq(ctx, chans).map(Some)
    }

    /// True when a checkpoint falls after this iteration.
    pub(crate) fn checkpoint_due(&self) -> bool {
        self.checkpoint
            .is_some_and(|c| c.every() > 0 && self.it.is_multiple_of(c.every()))
    }

    /// A checkpoint (collective): every block to rank 0, which assembles the global iterate
    /// and saves it; every rank then learns whether the save succeeded. Allocates only the
    /// gather's receive on rank 0 (the blocks' buffers are kept from one checkpoint to the
    /// next).
    pub(crate) fn save_checkpoint<C: Context>(&mut self, ctx: &mut C) -> Result<(), Error> {
        let Some(cp) = self.checkpoint else {
            return Ok(());
        };
        let t = Instant::now();
        self.field.owned_bits_into(&mut self.saved_bits);
        let all = ctx.gather_v(&self.saved_bits, 0)?;
        let mut why = None;
        if let Some(all) = all {
            self.field.assemble_into(&all, &mut self.saved_global);
            let saved = Saved {
                iteration: self.it,
                x: &self.saved_global,
            };
            why = cp.save(&saved).err();
        }
        let failed = sum_all(ctx, f64::from(u8::from(why.is_some())))?;
        self.parts.reduced(t);
        if failed > 0.0 {
            return Err(Error::Checkpoint(
                why.unwrap_or_else(|| "rank 0 could not save it".to_string()),
            ));
        }
        Ok(())
    }

    fn specs(&self, tag_base: u32, r: usize, extra: usize) -> Result<Vec<ChannelSpec>, Error> {
        halo::specs(&self.field, &self.faces, tag_base, r, extra)
    }
}

/// The sweeps, timed, over any iterate.
impl<F: Iterate, S: Step<F>> Run<'_, F, S> {
    /// The block's owned points: the unit of its sweeps and passes in the cost model.
    pub(super) fn points(&self) -> u64 {
        let (_, d) = self.field.place();
        (d.x * d.y * d.z) as u64
    }

    /// The sync loop's block of `m` sweeps ([`Iterate::block_len`]; multisplit: one full
    /// inner solve of the block), timed as compute, with the slow rank's extra passes; Σ r² of
    /// the iterate the last sweep started from, or 0 when `resid` is false (the sweeps
    /// between checks).
    fn sweep(&mut self, m: u64, resid: bool) -> Result<f64, Error> {
        let t = Instant::now();
        let points = self.points();
        let (r, work) = self
            .step
            .block(&mut self.field, &mut self.slow, (m, points), resid)?;
        self.parts.sweep += t.computed(work);
        self.it += m;
        Ok(r)
    }

    /// The async loop's sweep, or multisplit's inner solve of the block, which `fresher` may
    /// cut short (`multisplit.rs`); timed as compute. Σ r² of the iterate it started from.
    fn sweep_or_solve(&mut self, fresher: &mut Fresher<'_, F>) -> Result<f64, Error> {
        let t = Instant::now();
        let points = self.points();
        let (r, work) = self
            .step
            .step(&mut self.field, &mut self.slow, points, fresher)?;
        self.parts.sweep += t.computed(work);
        self.it += 1;
        Ok(r)
    }
}

/// How a run ended: the reason, the true final residual (relative), the solve time and the
/// channels' statistics.
pub(crate) type Ending = (StopReason, f64, Duration, Vec<ChannelStats>);
