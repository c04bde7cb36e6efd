//! Non-blocking reductions, and the binary-tree reduce-then-broadcast written once over
//! point-to-point Sync channels (the paper's hand-written tree, for backends without a native
//! non-blocking collective).

use crate::backend::ChannelHooks;
use crate::channel::{close_all, Channel};
use crate::config::{ChannelConfig, ChannelSpec};
use crate::context::Context;
use crate::error::{CommError, CreateError, ReduceError, TrySendError};
use crate::mode::Sync;
use crate::transport::Backend;
use serde::Serialize;

/// How values combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
}

impl ReduceOp {
    /// Combine `src` into `acc` element-wise: `acc[i] = acc[i] op src[i]`.
    #[inline]
    pub fn combine(self, acc: &mut [f64], src: &[f64]) {
        debug_assert_eq!(acc.len(), src.len());
        match self {
            ReduceOp::Sum => acc.iter_mut().zip(src).for_each(|(a, b)| *a += b),
            ReduceOp::Max => acc
                .iter_mut()
                .zip(src)
                .for_each(|(a, &b)| *a = nan_max(*a, b)),
            ReduceOp::Min => acc
                .iter_mut()
                .zip(src)
                .for_each(|(a, &b)| *a = nan_min(*a, b)),
        }
    }
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// A non-blocking all-reduce: [`Reduction::start`] with this rank's values, then
/// [`Reduction::test`] while computing until it yields the global result (the same on every
/// rank), or [`Reduction::wait`]. A finished reduction can be started again at once.
pub trait Reduction {
    /// Number of values reduced.
    fn len(&self) -> usize;
    /// True for a reduction of no values.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Begin a reduction with this rank's contribution (copied; `local` is free on return).
    fn start(&mut self, local: &[f64]) -> Result<(), ReduceError>;
    /// Progress; the global result once it is complete (exactly once per `start`).
    fn test(&mut self) -> Result<Option<&[f64]>, ReduceError>;
    /// Progress until complete; the global result.
    fn wait(&mut self) -> Result<&[f64], ReduceError>;
    /// True between `start` and the `test`/`wait` that returned the result.
    fn in_progress(&self) -> bool;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Waiting for children's partial results.
    Gather,
    /// Partial result ready; its send to the parent has not started yet.
    SendUp,
    /// Sent up; waiting for the parent's broadcast.
    AwaitParent,
    /// Result known; sends to the children still to start (`down_pending`).
    SendDown,
}

/// Binary-tree reduce-then-broadcast over Sync channels. Rank r's parent is (r−1)/2, its
/// children 2r+1 and 2r+2. Each rank combines its own value, then child 2r+1's, then child
/// 2r+2's, whatever order they arrive in, so the result is the same on every rank and in every
/// run. Each tree edge carries one message up and one down per reduction.
///
/// Every step is non-blocking: a send whose channel is still busy (a transport may report the
/// previous round's message in flight a little after the peer received it) is retried at the
/// next [`Reduction::test`], so a reduction only completes here once its sends have started.
pub struct TreeReduction<B: Backend> {
    op: ReduceOp,
    len: usize,
    parent: Option<Channel<B, Sync>>,
    children: Vec<Channel<B, Sync>>,
    /// Partial results from each child, combined in child order once all are in.
    child_vals: Vec<Vec<f64>>,
    got: Vec<bool>,
    down_pending: Vec<bool>,
    acc: Vec<f64>,
    phase: Phase,
    rounds: u64,
}

impl<B: Backend> std::fmt::Debug for TreeReduction<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeReduction")
            .field("op", &self.op)
            .field("len", &self.len)
            .field("children", &self.children.len())
            .field("phase", &self.phase)
            .finish()
    }
}

/// Start `data` on `ch` if it has room: Ok(true) when sent, Ok(false) to retry later.
fn try_start(ch: &mut Channel<impl Backend, Sync>, data: &[f64]) -> Result<bool, ReduceError> {
    match ch.try_send(data) {
        Ok(()) => Ok(true),
        Err(TrySendError::Full(_)) => Ok(false),
        Err(TrySendError::Comm(e)) => Err(e.into()),
    }
}

impl<B: Backend> TreeReduction<B> {
    /// Collectively build the tree over `ctx`'s ranks.
    pub fn new<W: ChannelHooks<Backend = B>>(
        ctx: &mut W,
        len: usize,
        op: ReduceOp,
    ) -> Result<Self, CreateError> {
        let tag = ctx.reserved_tags().next();
        let (rank, size) = (ctx.rank(), ctx.size());
        // A reduction of zero values still synchronises; its messages carry one dummy value.
        let cfg = ChannelConfig::new(len.max(1), 1)?;
        let mut specs = Vec::with_capacity(3);
        if rank > 0 {
            specs.push(ChannelSpec::reserved((rank - 1) / 2, tag, cfg));
        }
        for c in [2 * rank + 1, 2 * rank + 2] {
            if c < size {
                specs.push(ChannelSpec::reserved(c, tag, cfg));
            }
        }
        let mut chans = ctx.open::<Sync>(&specs)?.into_iter();
        let parent = if rank > 0 { chans.next() } else { None };
        let children: Vec<_> = chans.collect();
        Ok(TreeReduction {
            op,
            len,
            parent,
            child_vals: vec![vec![0.0; len]; children.len()],
            got: vec![false; children.len()],
            down_pending: vec![false; children.len()],
            children,
            acc: vec![0.0; len.max(1)],
            phase: Phase::Idle,
            rounds: 0,
        })
    }

    /// Number of reductions completed.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Close the tree's channels (collective). Dropping the reduction also releases them.
    pub fn close(self) -> Result<(), CommError> {
        close_all(self.parent.into_iter().chain(self.children))?;
        Ok(())
    }

    fn result(&self) -> &[f64] {
        &self.acc[..self.len]
    }

    /// Advance as far as possible without waiting; true when the reduction completed.
    fn step(&mut self) -> Result<bool, ReduceError> {
        if self.phase == Phase::Gather {
            for (i, c) in self.children.iter_mut().enumerate() {
                if !self.got[i] {
                    if let Some(m) = c.try_recv().map_err(CommError::from)? {
                        self.child_vals[i].copy_from_slice(&m[..self.len]);
                        self.got[i] = true;
                    }
                }
            }
            if !self.got.iter().all(|&g| g) {
                return Ok(false);
            }
            for v in &self.child_vals {
                self.op.combine(&mut self.acc[..self.len], v);
            }
            self.phase = if self.parent.is_some() {
                Phase::SendUp
            } else {
                Phase::SendDown
            };
        }
        if self.phase == Phase::SendUp {
            let p = self
                .parent
                .as_mut()
                .expect("only a rank with a parent sends up");
            if !try_start(p, &self.acc)? {
                return Ok(false);
            }
            self.phase = Phase::AwaitParent;
        }
        if self.phase == Phase::AwaitParent {
            let p = self
                .parent
                .as_mut()
                .expect("only a rank with a parent awaits it");
            match p.try_recv().map_err(CommError::from)? {
                Some(m) => self.acc.copy_from_slice(&m),
                None => return Ok(false),
            }
            self.phase = Phase::SendDown;
        }
        if self.phase == Phase::SendDown {
            for (c, pending) in self.children.iter_mut().zip(&mut self.down_pending) {
                if *pending && try_start(c, &self.acc)? {
                    *pending = false;
                }
            }
            if self.down_pending.iter().any(|&p| p) {
                return Ok(false);
            }
            self.phase = Phase::Idle;
            self.rounds += 1;
            return Ok(true);
        }
        Ok(false)
    }
}

impl<B: Backend> Reduction for TreeReduction<B> {
    fn len(&self) -> usize {
        self.len
    }

    fn start(&mut self, local: &[f64]) -> Result<(), ReduceError> {
        if self.phase != Phase::Idle {
            return Err(ReduceError::InProgress);
        }
        if local.len() != self.len {
            return Err(ReduceError::Length {
                expected: self.len,
                got: local.len(),
            });
        }
        self.acc[..self.len].copy_from_slice(local);
        self.got.iter_mut().for_each(|g| *g = false);
        self.down_pending.iter_mut().for_each(|p| *p = true);
        self.phase = Phase::Gather;
        Ok(())
    }

    fn test(&mut self) -> Result<Option<&[f64]>, ReduceError> {
        if self.phase == Phase::Idle {
            return Err(ReduceError::NotStarted);
        }
        if self.step()? {
            Ok(Some(self.result()))
        } else {
            Ok(None)
        }
    }

    fn wait(&mut self) -> Result<&[f64], ReduceError> {
        if self.phase == Phase::Idle {
            return Err(ReduceError::NotStarted);
        }
        let mut spins = 0u32;
        while !self.step()? {
            spins = spins.saturating_add(1);
            if spins.is_multiple_of(1024) {
                // A rank that died never answers: fail instead of waiting for it.
                for c in self.parent.iter().chain(&self.children) {
                    c.check_world()?;
                }
            }
            // Wait as the backend's transport does (MPI and SHMEM busy-poll with a core per
            // rank and back off and yield on an oversubscribed node, threads yield after a
            // while); a tree of one rank completes at its first step.
            if let Some(c) = self.parent.as_mut().or(self.children.first_mut()) {
                c.relax(spins);
            }
        }
        Ok(self.result())
    }

    fn in_progress(&self) -> bool {
        self.phase != Phase::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_ops() {
        let mut a = [1.0, 5.0, -1.0];
        ReduceOp::Sum.combine(&mut a, &[1.0, 1.0, 1.0]);
        assert_eq!(a, [2.0, 6.0, 0.0]);
        ReduceOp::Max.combine(&mut a, &[3.0, 1.0, f64::NAN]);
        assert_eq!(a[..2], [3.0, 6.0]);
        assert!(a[2].is_nan());
        let mut b = [1.0, 5.0];
        ReduceOp::Min.combine(&mut b, &[3.0, 1.0]);
        assert_eq!(b, [1.0, 1.0]);
    }
}
