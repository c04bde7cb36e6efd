//! The step of a block iteration, a type parameter of the loops ([`Run`]): Jacobi's plain
//! sweep ([`Sweep`]) or multisplitting's inner solve of the block ([`InnerSolve`]), which an
//! iterate offers with the [`SolveInner`] capability. The loops read [`Step::INNER`] where
//! multisplitting's messages and turns differ from Jacobi's; the compiler drops the other
//! branch from each instance.

use super::*;
use crate::iterate::SolveInner;

/// What a loop does to the block in one iteration.
pub(crate) trait Step<F: Iterate> {
    /// Multisplitting: faces carry an echo word, a rank does not solve the same block problem
    /// twice (it waits for new faces), and faces not sent for want of a slot are retried
    /// (`asynchronous.rs`, `Outbox`).
    const INNER: bool;

    /// The sync loop's block of `m` sweeps ([`Iterate::block_len`]; multisplit: one full
    /// solve), the slow rank's extra passes included: Σ r² of the iterate the last sweep
    /// started from, or 0 without `resid`.
    /// With the work done for the cost model (`points`: the block's owned points).
    fn block(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        m_points: (u64, u64),
        resid: bool,
    ) -> Result<(f64, Work), Error>;

    /// The async loop's step, which `fresher` may cut short (multisplit, `multisplit.rs`):
    /// Σ r² of the iterate it started from.
    /// With the work done for the cost model (`points`: the block's owned points).
    fn step(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        points: u64,
        fresher: &mut Fresher<'_, F>,
    ) -> Result<(f64, Work), Error>;

    /// Faces sent to waiting neighbours during the last step.
    fn sent_mid_solve(&mut self, _faces: u64) {}

    /// Multisplitting's part of the record after `outer` iterations (Jacobi: none).
    fn record(&self, _outer: u64) -> Option<MultisplitRecord> {
        None
    }
}

/// The work of `m` sweeps of a block of `points` and the slow rank's `extra` passes over it.
fn swept(m: u64, extra: u64, points: u64) -> Work {
    Work {
        pass_points: extra * points,
        ..Work::sweep(m * points)
    }
}

/// Jacobi's step: a sweep of the iterate.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sweep;

impl<F: Iterate> Step<F> for Sweep {
    const INNER: bool = false;

    fn block(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        (m, points): (u64, u64),
        resid: bool,
    ) -> Result<(f64, Work), Error> {
        let r = field.sweep_block(m, resid);
        let extra = slow.after(m, || field.residual_sq());
        Ok((r, swept(m, extra, points)))
    }

    fn step(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        points: u64,
        _: &mut Fresher<'_, F>,
    ) -> Result<(f64, Work), Error> {
        let r = field.sweep_async();
        let extra = slow.after(1, || field.residual_sq());
        Ok((r, swept(1, extra, points)))
    }
}

/// Multisplitting's step: the inner solve of the block, its units of work slowed one by one
/// (the solve can stop between them).
impl<F: SolveInner> Step<F> for InnerSolve {
    const INNER: bool = true;

    fn block(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        _: (u64, u64),
        _resid: bool,
    ) -> Result<(f64, Work), Error> {
        let r = field.solve_inner(self, slow, &mut |_: &F| Ok(false))?;
        Ok((r, Work::unmodelled()))
    }

    fn step(
        &mut self,
        field: &mut F,
        slow: &mut Slowdown,
        _: u64,
        fresher: &mut Fresher<'_, F>,
    ) -> Result<(f64, Work), Error> {
        let r = field.solve_inner(self, slow, fresher)?;
        Ok((r, Work::unmodelled()))
    }

    fn sent_mid_solve(&mut self, faces: u64) {
        self.sent_mid_solve += faces;
    }

    fn record(&self, outer: u64) -> Option<MultisplitRecord> {
        Some(MultisplitRecord {
            inner_iterations: self.total,
            inner_per_outer: if outer > 0 {
                self.total as f64 / outer as f64
            } else {
                0.0
            },
            inner_fewest: if self.fewest == u64::MAX {
                0
            } else {
                self.fewest
            },
            inner_most: self.most,
            inner_cut_short: self.cut_short,
            faces_sent_mid_solve: self.sent_mid_solve,
        })
    }
}
