//! The Krylov solvers' preconditioners beyond the pointwise Jacobi one: block Jacobi
//! (PETSc's PCBJACOBI, one block a rank), each rank solving with its own diagonal block of A
//! (the couplings to other ranks dropped) by ILU(0), IC(0) ([`factor`]). The solvers apply
//! M⁻¹ through [`Precond`], over the owned values of a vector's storage.
//!
//! Setting up is collective: every rank factors its block, then one reduction tells every
//! rank whether any factorisation failed, so that a zero pivot on one rank stops every rank
//! with the same message naming the rank and the row.

mod factor;

use crate::config::{Pc, PcSub};
use crate::krylov::vecs::Runs;
use crate::krylov::Operator;
use crate::method::Krylov as Settings;
use crate::Error;
use chan_core::traits::*;
use chan_core::ReduceOp;
pub(crate) use factor::{Factor, FactorError};

/// A rank's block of A in compressed rows, its columns ascending in each row.
#[derive(Debug, Clone, Default)]
pub(crate) struct LocalCsr {
    pub(crate) ptr: Vec<usize>,
    pub(crate) cols: Vec<usize>,
    pub(crate) vals: Vec<f64>,
}

impl LocalCsr {
    /// An empty matrix to fill row by row ([`LocalCsr::push`], [`LocalCsr::end_row`]) with
    /// room for `rows` rows.
    pub(crate) fn with_rows(rows: usize) -> Self {
        let mut ptr = Vec::with_capacity(rows + 1);
        ptr.push(0);
        LocalCsr {
            ptr,
            cols: Vec::new(),
            vals: Vec::new(),
        }
    }

    /// An entry of the current row (a column given twice is summed at [`end_row`]).
    ///
    /// [`end_row`]: LocalCsr::end_row
    pub(crate) fn push(&mut self, col: usize, val: f64) {
        self.cols.push(col);
        self.vals.push(val);
    }

    /// Close the current row: its columns sorted, duplicates summed.
    pub(crate) fn end_row(&mut self) {
        let start = *self.ptr.last().expect("ptr starts with 0");
        let mut row: Vec<(usize, f64)> = self.cols[start..]
            .iter()
            .copied()
            .zip(self.vals[start..].iter().copied())
            .collect();
        row.sort_by_key(|e| e.0);
        self.cols.truncate(start);
        self.vals.truncate(start);
        for (c, v) in row {
            if self.cols.len() > start && self.cols[self.cols.len() - 1] == c {
                *self.vals.last_mut().expect("an entry") += v;
            } else {
                self.cols.push(c);
                self.vals.push(v);
            }
        }
        self.ptr.push(self.cols.len());
    }

    /// Rows.
    pub(crate) fn rows(&self) -> usize {
        self.ptr.len() - 1
    }
}

/// M⁻¹ as the solvers apply it to the owned values.
pub(crate) struct Precond {
    kind: Kind,
    runs: Vec<(usize, usize)>,
    /// The owned values gathered contiguous for a block solve.
    buf: Vec<f64>,
}

enum Kind {
    /// M = I.
    None,
    /// M⁻¹ = D⁻¹, in the vectors' storage.
    Diag(Vec<f64>),
    /// The block's factors.
    Block(Factor),
}

impl Precond {
    /// The preconditioner `settings` asks for on `op` (collective: block Jacobi's
    /// factorisation fails on every rank if it fails on one).
    pub(crate) fn new<C: Context, O: Operator>(
        ctx: &mut C,
        op: &O,
        settings: &Settings,
    ) -> Result<Self, Error> {
        let runs = op.runs();
        let kind = match settings.pc {
            Pc::None => Kind::None,
            Pc::Jacobi => Kind::Diag(op.data(&op.inv_diag()).to_vec()),
            Pc::BJacobi => {
                let factored = Factor::new(&op.local_block(), settings.pc_sub);
                // The first rank whose factorisation failed, and its row, to every rank.
                let rank = ctx.rank() as f64;
                let mut first = [match &factored {
                    Err(_) => rank,
                    Ok(_) => f64::INFINITY,
                }];
                ctx.all_reduce(&mut first, ReduceOp::Min)?;
                if first[0].is_finite() {
                    let mut why = [0.0, 0.0];
                    if let (Err(e), true) = (&factored, first[0] == rank) {
                        why = [e.row as f64, e.kind as u8 as f64];
                    }
                    ctx.all_reduce(&mut why, ReduceOp::Sum)?;
                    return Err(Error::Precond(
                        FactorError {
                            row: why[0] as usize,
                            kind: factor::Failure::from_code(why[1] as u8),
                        }
                        .describe(settings.pc_sub, first[0] as usize),
                    ));
                }
                Kind::Block(factored.expect("every rank factored"))
            }
        };
        let n = runs.iter().map(|r| r.1).sum();
        Ok(Precond {
            kind,
            buf: if settings.pc == Pc::BJacobi {
                vec![0.0; n]
            } else {
                Vec::new()
            },
            runs,
        })
    }

    /// M = I.
    pub(crate) fn is_none(&self) -> bool {
        matches!(self.kind, Kind::None)
    }

    /// `dst = M⁻¹ src` over the owned values (storage of the operator's vectors).
    pub(crate) fn apply(&mut self, src: &[f64], dst: &mut [f64]) {
        let runs: &Runs = &self.runs;
        match &self.kind {
            Kind::None => crate::krylov::vecs::copy(runs, src, dst),
            Kind::Diag(d) => {
                for &(s, m) in runs {
                    for ((y, x), d) in dst[s..s + m]
                        .iter_mut()
                        .zip(&src[s..s + m])
                        .zip(&d[s..s + m])
                    {
                        *y = d * x;
                    }
                }
            }
            Kind::Block(f) => {
                let mut k = 0;
                for &(s, m) in runs {
                    self.buf[k..k + m].copy_from_slice(&src[s..s + m]);
                    k += m;
                }
                f.solve(&mut self.buf);
                let mut k = 0;
                for &(s, m) in runs {
                    dst[s..s + m].copy_from_slice(&self.buf[k..k + m]);
                    k += m;
                }
            }
        }
    }
}

/// Block Jacobi's block solve in words, for messages.
pub(crate) fn sub_name(sub: PcSub) -> &'static str {
    match sub {
        PcSub::Ilu0 => "ILU(0)",
        PcSub::Ic0 => "IC(0)",
    }
}
