//! A matrix's row block as an iterate of the Jacobi loops (`solver/`): the same sync,
//! async and racy loops, the same certification and records as the stencil's grid, and
//! multisplitting's inner solves (`multisplit.rs`) over the block's rows.
//!
//! **Links.** The loops run one channel per neighbour, each serving both directions with one
//! length. A row block's neighbour `q` is any rank it receives ghosts from or sends values
//! to; the channel's messages carry the longer of the two directions (`max(send, recv)`
//! values), each side packing its own values first and reading its own ghosts from the front.
//! For a matrix whose pattern is symmetric the two are usually equal (a banded or grid
//! matrix: the rows across the cut either way); a neighbour only one way (a pattern that is
//! not symmetric) gets messages of the other's length that it does not read.
//!
//! **The sweep** is fused: one pass over each row computes `s = Σ_j a_ij x_j`, the residual
//! `r_i = b_i − s` (summed into Σ r² of the iterate the sweep starts from), and the update
//! `y_i = x_i + r_i / a_ii`. The ghosts are carried to the next iterate after the sweep (a
//! copy of the ghost part only), so a halo received before any sweep is read by the next.

use super::dist::RowBlock;
use super::kernel::{MatrixStorage, Rows};
use crate::config::Inner;
use crate::error::Error;
use crate::geometry::Dims;
use crate::halo::Halo;
use crate::iterate::{Iterate, Lacks, SolveInner};
use crate::multisplit::{self, CgBlock, Fresher, InnerSolve, Work};
use crate::problem::Problem;
use crate::slow::Slowdown;
use chan_core::backend::Lists;
use chan_core::AtomicF64Slice;
use std::sync::Arc;

/// One neighbour's exchange.
#[derive(Debug, Clone)]
pub(crate) struct Neighbour {
    /// The other rank.
    pub(crate) peer: usize,
    /// Own rows whose values go to it, in the message's order.
    send: Vec<u32>,
    /// Ghost slots of the extended vector its message fills, in order.
    recv: Vec<u32>,
    /// Values per message, both ways: the longer of the two.
    len: usize,
}

impl Neighbour {
    /// Values per message, both ways.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The message to this neighbour from the extended vector `x`: the values it reads,
    /// then zeros to the channel's length.
    pub(crate) fn pack(&self, x: &[f64], buf: &mut [f64]) {
        let (data, pad) = buf.split_at_mut(self.send.len());
        for (b, &i) in data.iter_mut().zip(&self.send) {
            *b = x[i as usize];
        }
        pad.fill(0.0);
    }

    /// This neighbour's message into the ghosts of the extended vector `x`.
    pub(crate) fn unpack(&self, data: &[f64], x: &mut [f64]) {
        for (&i, &v) in self.recv.iter().zip(data) {
            x[i as usize] = v;
        }
    }
}

/// The neighbours of a row block, in rank order: every rank it sends values to or receives
/// ghosts from.
pub(crate) fn neighbours(blk: &RowBlock) -> Vec<Neighbour> {
    let mut out: Vec<Neighbour> = Vec::new();
    for l in blk.send_links() {
        out.push(Neighbour {
            peer: l.peer,
            send: l.indices.clone(),
            recv: Vec::new(),
            len: 0,
        });
    }
    for l in blk.recv_links() {
        match out.iter_mut().find(|n| n.peer == l.peer) {
            Some(n) => n.recv = l.indices.clone(),
            None => out.push(Neighbour {
                peer: l.peer,
                send: Vec::new(),
                recv: l.indices.clone(),
                len: 0,
            }),
        }
    }
    out.sort_by_key(|n| n.peer);
    for n in &mut out {
        n.len = n.send.len().max(n.recv.len());
    }
    out
}

/// A rank's part of the system, as both solver families see it: its rows, the inverse of
/// their diagonal, its part of `b`, the exact solution's value where known, and its
/// neighbours. The Jacobi iterate ([`SparseIterate`]) and the Krylov operator
/// (`operator.rs`) each hold one.
#[derive(Debug)]
pub(crate) struct BlockSystem {
    pub(crate) rank: usize,
    /// The block's rows.
    pub(crate) a: Rows,
    pub(crate) inv_diag: Vec<f64>,
    pub(crate) b: Vec<f64>,
    /// The exact solution's value at every row, when it is one value (b = A·1: 1).
    pub(crate) exact: Option<f64>,
    pub(crate) neighbours: Arc<[Neighbour]>,
    /// The first global row owned.
    pub(crate) first: usize,
    /// The block's rows of the start iterate, when one is given (the Krylov solvers' x₀).
    pub(crate) x0: Option<Vec<f64>>,
}

impl BlockSystem {
    /// Rank `rank`'s block `blk` and its part `b` of the right-hand side. The block's
    /// diagonal must have no zero for Jacobi (checked when the system was set up). Its rows
    /// are stored as `storage` says and the block allows.
    pub(crate) fn new(
        rank: usize,
        blk: &RowBlock,
        b: Vec<f64>,
        exact: Option<f64>,
        storage: MatrixStorage,
    ) -> Self {
        assert_eq!(b.len(), blk.rows(), "b is the block's part");
        let a = Rows::new(blk, storage);
        BlockSystem {
            rank,
            inv_diag: a.diagonal().iter().map(|d| 1.0 / d).collect(),
            a,
            b,
            exact,
            neighbours: neighbours(blk).into(),
            first: blk.first_row(),
            x0: None,
        }
    }

    /// Rows owned.
    pub(crate) fn rows(&self) -> usize {
        self.a.len()
    }

    /// This block's rows of the global vector `x` (a start iterate): an error when `x` is
    /// too short to hold them.
    pub(crate) fn own_part<'x>(&self, x: &'x [f64]) -> Result<&'x [f64], Error> {
        x.get(self.first..self.first + self.rows()).ok_or_else(|| {
            Error::Start(format!(
                "{} values, rows {}..{} asked for",
                x.len(),
                self.first,
                self.first + self.rows()
            ))
        })
    }

    /// The block's place in a record: `[rank, 0, 0]`, rows × 1 × 1.
    pub(crate) fn place(&self) -> ([usize; 3], Dims) {
        ([self.rank, 0, 0], Dims::new(self.rows(), 1, 1))
    }

    /// The largest |x_i − exact| over the owned values `own`, when the solution is known:
    /// NaN when one is (a diverged iterate), never the largest of the others.
    pub(crate) fn error_max(&self, own: &[f64]) -> Option<f64> {
        self.exact.map(|e| {
            own.iter()
                .fold(0.0f64, |m, v| crate::field::worse(m, (v - e).abs()))
        })
    }
}

/// One rank's row block, its right-hand side and its iterate.
#[derive(Debug)]
pub(crate) struct SparseIterate {
    sys: BlockSystem,
    /// The current iterate, extended (own values, then the ghosts).
    x: Vec<f64>,
    /// The next iterate (its ghost part refreshed from `x` after each sweep).
    y: Vec<f64>,
    /// Inner CG's vectors (multisplitting): r, p (extended, its ghosts zero), q.
    cg: Option<[Vec<f64>; 3]>,
}

impl SparseIterate {
    /// The block `sys`, starting from x = 0, with the vectors of `inner` CG when
    /// multisplitting asks for it.
    pub(crate) fn new(sys: BlockSystem, inner: Option<Inner>) -> Self {
        let (rows, ext) = (sys.rows(), sys.a.ext());
        SparseIterate {
            sys,
            x: vec![0.0; ext],
            y: vec![0.0; ext],
            cg: (inner == Some(Inner::Cg))
                .then(|| [vec![0.0; rows], vec![0.0; ext], vec![0.0; rows]]),
        }
    }

    /// The links of the loops: one per neighbour, in rank order.
    pub(crate) fn links(&self) -> Vec<usize> {
        (0..self.sys.neighbours.len()).collect()
    }

    /// The owned values of the current iterate.
    pub(crate) fn own(&self) -> &[f64] {
        &self.x[..self.sys.rows()]
    }

    /// One fused Jacobi sweep (module docs): Σ r² of the iterate it started from.
    fn sweep(&mut self) -> f64 {
        let s = &self.sys;
        let acc = s.a.sweep(&s.b, &s.inv_diag, &self.x, &mut self.y);
        let rows = s.rows();
        let (x, y) = (&self.x, &mut self.y);
        y[rows..].copy_from_slice(&x[rows..]);
        std::mem::swap(&mut self.x, &mut self.y);
        acc
    }
}

impl Halo for SparseIterate {
    type Link = usize;
    fn pack(&self, link: usize, buf: &mut [f64]) {
        self.sys.neighbours[link].pack(&self.x, buf);
    }
    fn unpack(&mut self, link: usize, data: &[f64]) {
        self.sys.neighbours[link].unpack(data, &mut self.x);
    }
}

impl Iterate for SparseIterate {
    type Snapshot = Lacks;
    fn link_peer(&self, link: usize) -> usize {
        self.sys.neighbours[link].peer
    }
    fn link_tag(&self, _: usize) -> u32 {
        0 // one channel per neighbour
    }
    fn message_len(&self, link: usize) -> usize {
        self.sys.neighbours[link].len()
    }
    fn unpack_atomic(&mut self, link: usize, view: &AtomicF64Slice) {
        let n = &self.sys.neighbours[link];
        for (k, &i) in n.recv.iter().enumerate() {
            self.x[i as usize] = view.load(k);
        }
    }
    fn place(&self) -> ([usize; 3], Dims) {
        self.sys.place()
    }
    fn snapshot_buffer(&self) -> Result<Lacks, crate::Setting> {
        Err(crate::Setting::Matrix)
    }
    fn residual_sq(&self) -> f64 {
        let s = &self.sys;
        (0..s.rows())
            .map(|i| {
                let r = s.b[i] - s.a.row(i, &self.x);
                r * r
            })
            .sum()
    }
    fn sweep_block(&mut self, m: u64, resid: bool) -> f64 {
        debug_assert_eq!(m, 1);
        let r = self.sweep();
        if resid {
            r
        } else {
            0.0
        }
    }
    fn sweep_async(&mut self) -> f64 {
        self.sweep()
    }
    fn error_max(&self, _: &Problem) -> Option<f64> {
        self.sys.error_max(self.own())
    }
    fn restartable(&self) -> Result<(), Error> {
        Ok(())
    }
    fn start_from(&mut self, x: &[f64]) -> Result<(), Error> {
        let own = self.sys.own_part(x)?;
        self.x[..own.len()].copy_from_slice(own);
        Ok(())
    }
    fn owned_bits_into(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.own().iter().map(|v| v.to_bits()));
    }
    /// The row blocks are contiguous, in rank order: their concatenation.
    fn assemble_into(&self, blocks: &Lists, out: &mut Vec<f64>) {
        out.clear();
        for r in 0..blocks.len() {
            out.extend(blocks.list(r).iter().map(|&b| f64::from_bits(b)));
        }
    }
}

impl SolveInner for SparseIterate {
    fn solve_inner(
        &mut self,
        inner: &mut InnerSolve,
        slow: &mut Slowdown,
        fresher: &mut Fresher<'_, Self>,
    ) -> Result<f64, Error> {
        let spec = inner.spec();
        let mut work = Work { slow, fresher };
        let out = match spec.solver {
            Inner::Jacobi => multisplit::jacobi(spec, self, &mut work)?,
            Inner::Cg => multisplit::cg(spec, &mut RowCg(self), &mut work)?,
            Inner::Cg32 => {
                unreachable!("the inner cg32 is refused for a matrix (Config::validate_matrix)")
            }
        };
        Ok(inner.count(out))
    }
}

/// Inner CG over a row block: `A_loc` is the block's rows with the ghost columns dropped
/// (p's ghost part stays zero).
struct RowCg<'a>(&'a mut SparseIterate);

impl CgBlock for RowCg<'_> {
    type It = SparseIterate;
    fn iterate(&self) -> &SparseIterate {
        self.0
    }
    fn residual(&mut self) -> f64 {
        let s = &mut *self.0;
        let [r, _, _] = s.cg.as_mut().expect("inner CG's vectors");
        s.sys.a.residual(&s.sys.b, &s.x, r, None)[0]
    }
    fn direction_apply(&mut self, beta: f64) -> f64 {
        let s = &mut *self.0;
        let [r, p, q] = s.cg.as_mut().expect("inner CG's vectors");
        for (pi, ri) in p.iter_mut().zip(r.iter()) {
            *pi = ri + beta * *pi;
        }
        s.sys.a.apply(None, p, q)
    }
    fn update(&mut self, alpha: f64) -> f64 {
        let s = &mut *self.0;
        let [r, p, q] = s.cg.as_mut().expect("inner CG's vectors");
        let mut rr = 0.0;
        for i in 0..s.sys.rows() {
            s.x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
            rr += r[i] * r[i];
        }
        rr
    }
}
