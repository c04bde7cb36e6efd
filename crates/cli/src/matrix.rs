//! `aiac run --matrix FILE [--rhs FILE]`: the user's own sparse system, in contiguous row
//! blocks balanced by nonzeros, one per rank, solved over the ghost channels
//! ([`jacobi::Solve::system`]).
//!
//! A launched rank (mpirun, oshrun) reads its own rows only ([`read_block`]: two passes over
//! the file, the memory of its block); the threads backend reads the file once and cuts
//! every rank's block from it. Either way every rank checks the file the same way, so a bad
//! file is one error, naming the file and the line, before anything runs. What needs every
//! block (is the matrix symmetric, diagonally dominant?) is settled by one all-reduce at
//! the start of the run ([`Loaded::settle`]).

use crate::args::{mem_available, RunArgs};
use crate::error::Error;
use crate::input::{self, MatrixFile};
use chan_core::traits::*;
use chan_core::ReduceOp;
use jacobi::sparse::{
    read_block, read_matrix, read_vector, read_vector_block, row_blocks, storage_of, Csr,
    MatrixKind, MatrixStorage, RowBlock, StorageInfo,
};
use jacobi::{Config, Inner, MatrixInfo, Method, Pc, RunConfig, SystemBlock};
use std::path::Path;

/// What this process read of the system: one block per rank it runs, and the system's
/// description, its flags those of the rows read here until [`Loaded::settle`].
pub(crate) struct Loaded {
    /// The blocks of the ranks this process runs: every rank (threads), or its own.
    blocks: Vec<SystemBlock>,
    /// The first rank of `blocks`.
    first_rank: usize,
    info: MatrixInfo,
    /// Over the rows read here: every row weakly diagonally dominant, one strictly.
    dominance: (bool, bool),
}

impl Loaded {
    /// The system, as read (its dominance not yet settled over every rank).
    pub(crate) fn info(&self) -> &MatrixInfo {
        &self.info
    }

    /// Rank `rank`'s block.
    pub(crate) fn block(&self, rank: usize) -> &SystemBlock {
        &self.blocks[rank - self.first_rank]
    }

    /// Settle the flags over every rank (collective: one all-reduce), warn from rank 0 when
    /// the matrix is not diagonally dominant (unless `quiet`), and return the report's
    /// `config`.
    pub(crate) fn settle<C: Context>(
        &self,
        ctx: &mut C,
        args: &RunArgs,
        cfg: &Config,
    ) -> Result<RunConfig, Error> {
        let (weak, strict) = self.dominance;
        let blk = self.block(ctx.rank());
        let stored = storage_of(&blk.block, blk.storage);
        let names = StorageInfo::NAMES;
        let mut v = [0.0; 5 + StorageInfo::NAMES.len()];
        v[..5].copy_from_slice(&[
            f64::from(u8::from(!self.info.symmetric)),
            f64::from(u8::from(!weak)),
            f64::from(u8::from(strict)),
            stored.bytes as f64,
            stored.entries as f64,
        ]);
        let taken = names.iter().position(|&n| n == stored.name);
        v[5 + taken.expect("a storage of the list")] = 1.0;
        ctx.all_reduce(&mut v, ReduceOp::Sum)
            .map_err(jacobi::Error::from)?;
        let mut info = self.info.clone();
        info.symmetric = v[0] == 0.0;
        info.diagonally_dominant = v[1] == 0.0 && v[2] > 0.0;
        let ranks = ctx.size() as f64;
        info.storage = Some(match names.iter().zip(&v[5..]).find(|(_, &k)| k == ranks) {
            Some((n, _)) => n.to_string(),
            None => "mixed".to_string(),
        });
        info.bytes_per_entry = Some(v[3] / v[4].max(1.0));
        let blockwise = matches!(cfg.method, Method::Jacobi(_) | Method::Multisplit(_));
        if ctx.rank() == 0 && !args.quiet && blockwise && !info.diagonally_dominant {
            crate::error::say(&format!(
                "aiac: warning: {} is not diagonally dominant (every row |a_ii| ≥ Σ|a_ij|, \
                 one strictly): Jacobi and multisplitting may not converge, sync or async \
                 (a run stops at --max-iters, or once its residual grows past 1e20 of its start)",
                info.file
            ));
        }
        let reduction = args.reduction().unwrap_or_default();
        Ok(RunConfig::of_matrix(
            args.backend_name(),
            cfg,
            reduction,
            info,
        ))
    }
}

/// A file's error, as the run's.
fn bad(e: jacobi::sparse::MatrixError) -> Error {
    Error::Invalid(e.to_string())
}

/// What the method asks of the matrix, checked on the rows `first..` of `blk` (global row
/// numbers in the messages): a diagonal Jacobi can divide by (neither zero nor subnormal) for
/// Jacobi and multisplitting, symmetry for CG and multisplitting's inner CG.
fn check(cfg: &Config, file: &str, blk: &RowBlock, symmetric: bool) -> Result<(), Error> {
    let divides = match cfg.method {
        Method::Jacobi(_) | Method::Multisplit(_) => Some(
            "Jacobi divides by it (and multisplitting's block solve needs it); use --solver cg \
             for a symmetric positive definite matrix, or scale or reorder the system",
        ),
        Method::Krylov(k) if k.pc == Pc::Jacobi => {
            Some("the Jacobi preconditioner divides by it; use --pc none, or scale the system")
        }
        Method::Krylov(_) => None,
    };
    if let (Some(then), Some((row, d))) = (divides, blk.unusable_diagonal()) {
        let what = match d == 0.0 {
            true => "has a zero diagonal entry".to_string(),
            false => format!(
                "has the diagonal entry {d:e}, subnormal (below f64's least normal number, \
                 2.2e-308: too few significant bits, and 1/a_ii overflows below 5.6e-309)"
            ),
        };
        return Err(Error::Invalid(format!(
            "{file}: row {} {what}: {then}",
            row + 1
        )));
    }
    let needs_spd = match cfg.method {
        Method::Krylov(k) => !k.solver.solver().is_nonsymmetric(),
        Method::Multisplit(m) => m.inner.solver == Inner::Cg,
        Method::Jacobi(_) => false,
    };
    if needs_spd && !symmetric {
        return Err(Error::Invalid(format!(
            "{file} is not symmetric (rows {} to {} differ from their columns), and {} needs \
             a symmetric positive definite matrix: use --solver gmres or bicgstab, jacobi, or \
             multisplit with --inner jacobi",
            blk.first_row() + 1,
            blk.first_row() + blk.rows(),
            match cfg.method {
                Method::Multisplit(_) => "multisplitting's inner CG",
                _ => "CG",
            }
        )));
    }
    Ok(())
}

/// `b = A·1` over the block's rows.
fn ones_rhs(blk: &RowBlock) -> Vec<f64> {
    let mut b = vec![0.0; blk.rows()];
    blk.mul(&vec![1.0; blk.extended_len()], &mut b);
    b
}

/// The right-hand side's rows `first..first + b.len()` of `n` must give the run numbers it
/// can compute with: every value finite (`b = A·1` overflows when a row's entries sum past
/// f64's largest, 1.8e308), and at most √(f64::MAX / 4n) in size, so that ‖b‖₂, which every
/// residual is relative to, is finite: n values each at most that square to at most a quarter
/// of f64::MAX, room for the sum's rounding and for a residual twice b's size. Checked row
/// by row, so every rank (or the one process cutting every block)
/// refuses the same file with the same first row. `rhs` names the --rhs file, or is None
/// for `b = A·1`.
fn check_rhs(
    file: &str,
    rhs: Option<&str>,
    b: &[f64],
    first: usize,
    n: usize,
) -> Result<(), Error> {
    let bound = (f64::MAX / (4.0 * n as f64)).sqrt();
    let Some((i, v)) = b
        .iter()
        .enumerate()
        .find(|(_, v)| !v.is_finite() || v.abs() > bound)
    else {
        return Ok(());
    };
    let row = first + i + 1;
    let (name, what) = match rhs {
        Some(r) => (r.to_string(), "b".to_string()),
        None => (file.to_string(), "b = A·1".to_string()),
    };
    Err(Error::Invalid(if v.is_finite() {
        format!(
            "{name}: {what} is {v:e} at row {row}, past {bound:.3e} (√(f64::MAX / 4n), n = \
             {n}): ‖b‖₂, which the residual is relative to, would overflow f64; scale the \
             system"
        )
    } else {
        format!(
            "{name}: {what} overflows f64 at row {row} (the row's entries sum past \
             1.8e308); scale the system{}",
            if rhs.is_none() { ", or give --rhs" } else { "" }
        )
    }))
}

fn kind_name(kind: MatrixKind) -> &'static str {
    match kind {
        MatrixKind::General => "general",
        MatrixKind::Symmetric => "symmetric",
        MatrixKind::SkewSymmetric => "skew-symmetric",
    }
}

fn paths(args: &RunArgs) -> (&Path, String) {
    let path = args.system.matrix.as_deref().expect("a --matrix run");
    (path, path.display().to_string())
}

fn rhs_name(args: &RunArgs) -> Option<String> {
    args.system.rhs.as_ref().map(|p| p.display().to_string())
}

/// `--matrix` and `--rhs` must name regular files: refused by flag before either is opened
/// (a FIFO would block every rank's open).
fn check_inputs(args: &RunArgs) -> Result<(), Error> {
    for (flag, p) in [
        ("--matrix", &args.system.matrix),
        ("--rhs", &args.system.rhs),
    ] {
        if let Some(p) = p {
            input::check(flag, p)?;
        }
    }
    Ok(())
}

/// The threads backend: read the whole system once and cut the `ranks` blocks from it.
pub(crate) fn load_all(args: &RunArgs, cfg: &Config, ranks: usize) -> Result<Loaded, Error> {
    cfg.validate_matrix()?;
    System::read(args)?.cut(cfg, ranks)
}

/// A whole system read in one process: the matrix, its right-hand side and their names.
/// `aiac sweep` reads it once and checks every run's configuration and rank count against it.
pub(crate) struct System {
    a: Csr,
    kind: MatrixKind,
    b: Vec<f64>,
    /// The known solution's value (b = A·1: 1), none with --rhs.
    exact: Option<f64>,
    file: String,
    rhs: Option<String>,
    /// How each rank stores its rows (`--matrix-storage`).
    storage: MatrixStorage,
}

impl System {
    /// Read `--matrix` and `--rhs` (or make b = A·1), each checked as a regular file first.
    pub(crate) fn read(args: &RunArgs) -> Result<System, Error> {
        let (path, file) = paths(args);
        check_inputs(args)?;
        let (a, kind) =
            read_matrix(&MatrixFile(path), mem_available().unwrap_or(u64::MAX)).map_err(bad)?;
        let n = a.n();
        let (b, exact) = match &args.system.rhs {
            Some(p) => (read_vector(&MatrixFile(p), n).map_err(bad)?, None),
            None => {
                let mut b = vec![0.0; n];
                a.mul(&vec![1.0; n], &mut b);
                (b, Some(1.0))
            }
        };
        Ok(System {
            a,
            kind,
            b,
            exact,
            file,
            rhs: rhs_name(args),
            storage: args.system.matrix_storage.into(),
        })
    }

    /// The `ranks` blocks of this system for a run of `cfg`, each checked for what the method
    /// asks of the matrix and the right-hand side.
    pub(crate) fn cut(&self, cfg: &Config, ranks: usize) -> Result<Loaded, Error> {
        let System {
            a,
            kind,
            b,
            exact,
            file,
            rhs,
            storage,
        } = self;
        let (kind, exact, file) = (*kind, *exact, file.clone());
        let n = a.n();
        if ranks > n {
            return Err(Error::Invalid(format!(
                "{file}: the order {n} is less than the {ranks} ranks: every rank needs a row"
            )));
        }
        let bounds = row_blocks(a.row_ptr(), ranks);
        let symmetric = kind == MatrixKind::Symmetric || a.is_symmetric();
        let mut blocks = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let block = RowBlock::from_global(a, &bounds, r);
            check(cfg, &file, &block, symmetric)?;
            check_rhs(
                &file,
                rhs.as_deref(),
                &b[bounds[r]..bounds[r + 1]],
                bounds[r],
                n,
            )?;
            blocks.push(SystemBlock {
                b: b[bounds[r]..bounds[r + 1]].to_vec(),
                block,
                exact,
                storage: *storage,
            });
        }
        let dominance = a.dominance();
        Ok(Loaded {
            blocks,
            first_rank: 0,
            info: MatrixInfo {
                file,
                rhs: rhs.clone(),
                n,
                nnz: a.nnz() as u64,
                kind: kind_name(kind).to_string(),
                symmetric,
                diagonally_dominant: dominance.0 && dominance.1,
                row_bounds: bounds,
                storage: None, // settled over every rank
                bytes_per_entry: None,
            },
            dominance,
        })
    }
}

/// A launched rank: read rank `rank`'s rows of `ranks`, within this machine's available
/// memory over the `ranks_here` ranks that read on it.
pub(crate) fn load_rank(
    args: &RunArgs,
    cfg: &Config,
    ranks: usize,
    rank: usize,
    ranks_here: usize,
) -> Result<Loaded, Error> {
    cfg.validate_matrix()?;
    let (path, file) = paths(args);
    check_inputs(args)?;
    let memory = mem_available().unwrap_or(u64::MAX) / ranks_here.max(1) as u64;
    let read = read_block(&MatrixFile(path), memory, ranks, rank).map_err(bad)?;
    check(cfg, &file, &read.block, read.symmetric)?;
    let (first, rows) = (read.block.first_row(), read.block.rows());
    let (b, exact) = match &args.system.rhs {
        Some(p) => (
            read_vector_block(&MatrixFile(p), read.n, first, rows).map_err(bad)?,
            None,
        ),
        None => (ones_rhs(&read.block), Some(1.0)),
    };
    check_rhs(&file, rhs_name(args).as_deref(), &b, first, read.n)?;
    Ok(Loaded {
        info: MatrixInfo {
            file,
            rhs: args.system.rhs.as_ref().map(|p| p.display().to_string()),
            n: read.n,
            nnz: read.nnz,
            kind: kind_name(read.kind).to_string(),
            symmetric: read.symmetric,
            diagonally_dominant: false, // settled over every rank
            row_bounds: read.bounds,
            storage: None, // settled over every rank
            bytes_per_entry: None,
        },
        dominance: read.dominance,
        blocks: vec![SystemBlock {
            block: read.block,
            b,
            exact,
            storage: args.system.matrix_storage.into(),
        }],
        first_rank: rank,
    })
}

/// `--solution`: x as a Matrix Market `array real general` vector, 17 significant digits
/// (every f64 reads back to its bits).
pub(crate) fn solution_text(x: &[f64]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(32 + 25 * x.len());
    s.push_str("%%MatrixMarket matrix array real general\n");
    s.push_str("% the solution of aiac run\n");
    let _ = writeln!(s, "{} 1", x.len());
    for v in x {
        let _ = writeln!(s, "{v:.16e}");
    }
    s
}
