//! A matrix's row block as the Krylov solvers' operator (`krylov/`, [`Operator`]): CG,
//! CG with the ghost exchange overlapped, and pipelined CG run over it exactly as over the
//! grid's 7-point operator.
//!
//! A vector is the block's own values followed by its ghosts (`RowBlock`'s extended
//! layout); its halo exchange is one channel per neighbouring block (`iterate.rs`). The
//! overlapped product first computes the rows that read no ghost (the interior, in
//! [`INTERIOR_PARTS`] pieces, polling a pipelined reduction between them), then the rows
//! that do (the shell), once the ghosts have arrived.

use super::iterate::{BlockSystem, Neighbour};
use crate::config::Config;
use crate::error::Error;
use crate::geometry::Dims;
use crate::halo::Halo;
use crate::krylov::{Operator, Part, Pipe};
use crate::precond::LocalCsr;
use chan_core::{ChannelConfig, ChannelSpec, CreateError};
use std::sync::Arc;

/// Pieces of the interior the overlapped product computes between polls.
pub(crate) const INTERIOR_PARTS: usize = 8;

/// A vector of a row block: own values, then ghosts.
#[derive(Debug, Clone)]
pub(crate) struct RowVec {
    v: Vec<f64>,
    links: Arc<[Neighbour]>,
}

impl Halo for RowVec {
    type Link = usize;
    fn pack(&self, link: usize, buf: &mut [f64]) {
        self.links[link].pack(&self.v, buf);
    }
    fn unpack(&mut self, link: usize, data: &[f64]) {
        self.links[link].unpack(data, &mut self.v);
    }
}

/// A matrix's row block with its part of `b`.
#[derive(Debug)]
pub(crate) struct RowOp {
    sys: BlockSystem,
    ids: Vec<usize>,
    /// Rows that read a ghost (the shell), and the interior pieces' rows.
    shell: Vec<u32>,
    pieces: Vec<Vec<u32>>,
}

impl RowOp {
    /// The block `sys` as the Krylov solvers' operator.
    pub(crate) fn new(sys: BlockSystem) -> Self {
        let rows = sys.rows();
        let reads_ghost = |i: usize| sys.a.reads_ghost(i);
        let shell: Vec<u32> = (0..rows)
            .filter(|&i| reads_ghost(i))
            .map(|i| i as u32)
            .collect();
        let pieces = (0..INTERIOR_PARTS)
            .map(|k| {
                (k * rows / INTERIOR_PARTS..(k + 1) * rows / INTERIOR_PARTS)
                    .filter(|&i| !reads_ghost(i))
                    .map(|i| i as u32)
                    .collect()
            })
            .collect();
        RowOp {
            ids: (0..sys.neighbours.len()).collect(),
            sys,
            shell,
            pieces,
        }
    }

    /// The block's own values of `x`.
    pub(crate) fn own<'a>(&self, x: &'a RowVec) -> &'a [f64] {
        &x.v[..self.sys.rows()]
    }

    fn vector(&self, fill: impl Fn(usize) -> f64) -> RowVec {
        let mut v = vec![0.0; self.sys.a.ext()];
        for (i, x) in v.iter_mut().enumerate().take(self.sys.rows()) {
            *x = fill(i);
        }
        RowVec {
            v,
            links: self.sys.neighbours.clone(),
        }
    }
}

/// Σ over `0..n` of `f(i)` in four lanes (as the grid's kernels sum, so that long sums keep
/// their accuracy and vectorise).
#[inline(always)]
pub(crate) fn lanes(n: usize, mut f: impl FnMut(usize) -> f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut i = 0;
    while i + 4 <= n {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(i + l);
        }
        i += 4;
    }
    for (l, k) in (i..n).enumerate() {
        acc[l] += f(k);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

impl Operator for RowOp {
    type Link = usize;
    type Vector = RowVec;
    fn links(&self) -> &[usize] {
        &self.ids
    }
    fn specs(&self) -> Result<Vec<ChannelSpec>, Error> {
        self.sys
            .neighbours
            .iter()
            .map(|n| {
                let cfg = ChannelConfig::new(n.len(), 1).map_err(CreateError::from)?;
                ChannelSpec::new(n.peer, 0, cfg).map_err(|e| Error::Create(e.into()))
            })
            .collect()
    }
    fn zeros(&self) -> RowVec {
        self.vector(|_| 0.0)
    }
    fn inv_diag(&self) -> RowVec {
        self.vector(|i| self.sys.inv_diag[i])
    }
    fn x0(&self) -> RowVec {
        match &self.sys.x0 {
            Some(x0) => self.vector(|i| x0[i]),
            None => self.zeros(),
        }
    }
    fn b_sq(&self, _: (&mut RowVec, &mut RowVec)) -> f64 {
        let b = &self.sys.b;
        lanes(b.len(), |i| b[i] * b[i])
    }
    fn interior_parts(&self) -> usize {
        INTERIOR_PARTS
    }
    fn apply(&self, src: &RowVec, dst: &mut RowVec, part: Part) -> f64 {
        let rows = match part {
            Part::All => None,
            Part::Interior(k) => Some(&self.pieces[k][..]),
            Part::Shell => Some(&self.shell[..]),
        };
        self.sys.a.apply(rows, &src.v, &mut dst.v)
    }
    fn residual(&self, x: &RowVec, r: &mut RowVec, rec: Option<&RowVec>) -> [f64; 2] {
        let s = &self.sys;
        s.a.residual(&s.b, &x.v, &mut r.v, rec.map(|o| &o.v[..]))
    }
    fn dot(&self, a: &RowVec, b: &RowVec) -> f64 {
        lanes(self.sys.rows(), |i| a.v[i] * b.v[i])
    }
    fn dot3(&self, a: &RowVec, d: &RowVec, b: &RowVec) -> f64 {
        lanes(self.sys.rows(), |i| a.v[i] * (d.v[i] * b.v[i]))
    }
    fn scale(&self, d: &RowVec, src: &RowVec, dst: &mut RowVec) -> f64 {
        let mut acc = 0.0;
        for i in 0..self.sys.rows() {
            dst.v[i] = d.v[i] * src.v[i];
            acc += src.v[i] * dst.v[i];
        }
        acc
    }
    fn direction(&self, z: &RowVec, beta: f64, p: &mut RowVec) {
        for (p, z) in p.v[..self.sys.rows()]
            .iter_mut()
            .zip(&z.v[..self.sys.rows()])
        {
            *p = z + beta * *p;
        }
    }
    fn cg_update(
        &self,
        alpha: f64,
        x: &mut RowVec,
        r: &mut RowVec,
        (p, q): (&RowVec, &RowVec),
        pc: Option<(&RowVec, &mut RowVec)>,
    ) -> [f64; 2] {
        let n = self.sys.rows();
        let (x, r, p, q) = (&mut x.v[..n], &mut r.v[..n], &p.v[..n], &q.v[..n]);
        let (mut rz, mut rr) = (0.0, 0.0);
        match pc {
            None => {
                for i in 0..n {
                    x[i] += alpha * p[i];
                    r[i] -= alpha * q[i];
                    rr += r[i] * r[i];
                }
                [rr, rr]
            }
            Some((d, z)) => {
                for i in 0..n {
                    x[i] += alpha * p[i];
                    r[i] -= alpha * q[i];
                    z.v[i] = d.v[i] * r[i];
                    rz += r[i] * z.v[i];
                    rr += r[i] * r[i];
                }
                [rz, rr]
            }
        }
    }
    fn pipe_update(&self, alpha: f64, beta: f64, x: &mut RowVec, v: &mut Pipe<RowVec>) -> [f64; 3] {
        let (mut g, mut d, mut rr) = (0.0, 0.0, 0.0);
        let Pipe {
            r,
            w,
            n,
            z,
            s,
            p,
            pc,
            ..
        } = v;
        for i in 0..self.sys.rows() {
            z.v[i] = n.v[i] + beta * z.v[i];
            s.v[i] = w.v[i] + beta * s.v[i];
            let u = pc.as_ref().map_or(r.v[i], |pm| pm.d.v[i] * r.v[i]);
            p.v[i] = u + beta * p.v[i];
            x.v[i] += alpha * p.v[i];
            r.v[i] -= alpha * s.v[i];
            w.v[i] -= alpha * z.v[i];
            let u = match pc.as_mut() {
                Some(pm) => {
                    pm.m.v[i] = pm.d.v[i] * w.v[i];
                    pm.d.v[i] * r.v[i]
                }
                None => r.v[i],
            };
            g += r.v[i] * u;
            d += w.v[i] * u;
            rr += r.v[i] * r.v[i];
        }
        [if pc.is_some() { g } else { rr }, d, rr]
    }
    fn place(&self) -> ([usize; 3], Dims) {
        self.sys.place()
    }
    fn error_max(&mut self, x: &RowVec, _: &Config) -> Option<f64> {
        self.sys.error_max(self.own(x))
    }
    fn runs(&self) -> Vec<(usize, usize)> {
        vec![(0, self.sys.rows())]
    }
    fn data<'v>(&self, v: &'v RowVec) -> &'v [f64] {
        &v.v
    }
    fn data_mut<'v>(&self, v: &'v mut RowVec) -> &'v mut [f64] {
        &mut v.v
    }
    /// The entries of the block's rows in its own columns (the ghosts' dropped).
    fn local_block(&self) -> LocalCsr {
        let rows = self.sys.rows();
        let mut a = LocalCsr::with_rows(rows);
        for i in 0..rows {
            self.sys.a.each(i, |c, v| {
                if c < rows {
                    a.push(c, v);
                }
            });
            a.end_row();
        }
        a
    }
}
