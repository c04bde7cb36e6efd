//! Solve a Matrix Market system with `jacobi::sparse::solve` over the threads backend: the
//! iteration counts a peer (PETSc, `peers/petsc_mtx.c`) must reproduce on the same system
//! before `aiac run --matrix` exists. b = A·1, x0 = 0, the stop ‖b − A x‖₂/‖b‖₂ ≤ TOL.
//!
//! ```text
//! cargo run --release -p jacobi --example mtx_solve -- A.mtx cg|jacobi TOL MAX_ITERS RANKS [CHECK_EVERY]
//! ```
//!
//! Jacobi tests its residual every CHECK_EVERY iterations (default 1, so its count is exact).
//! Prints `mtx_solve solver=.. ranks=.. its=.. time_s=.. s_per_iter=.. true_rel_res=..
//! bounds=0,..,n` (the row blocks)
//! and exits 0 when the solve converged, 2 when not, 1 on bad input.

use chan_core::traits::*;
use chan_threads::World;
use jacobi::sparse::{read_matrix, row_blocks, solve, RowBlock};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("mtx_solve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mtx_solve A.mtx cg|jacobi TOL MAX_ITERS RANKS [CHECK_EVERY]";
    if args.len() != 5 && args.len() != 6 {
        return Err(usage.into());
    }
    let num = |i: usize, what: &str| -> Result<f64, String> {
        args[i]
            .parse::<f64>()
            .map_err(|_| format!("{what} `{}` is not a number ({usage})", args[i]))
    };
    let tol = num(2, "TOL")?;
    let whole = |i: usize, what: &str| -> Result<u64, String> {
        match args.get(i).map(|s| s.parse::<u64>()) {
            None => Ok(1),
            Some(Ok(v)) if v >= 1 => Ok(v),
            _ => Err(format!("{what} must be a whole number from 1 ({usage})")),
        }
    };
    let (max_iters, ranks, check) = (
        whole(3, "MAX_ITERS")?,
        whole(4, "RANKS")? as usize,
        whole(5, "CHECK_EVERY")?,
    );
    let cg = match args[1].as_str() {
        "cg" => true,
        "jacobi" => false,
        s => return Err(format!("unknown solver `{s}` ({usage})")),
    };
    let (a, _) = read_matrix(args[0].as_ref(), 1 << 40).map_err(|e| e.to_string())?;
    if ranks > a.n() {
        return Err(format!("{ranks} ranks for {} rows", a.n()));
    }
    let mut b = vec![0.0; a.n()];
    a.mul(&vec![1.0; a.n()], &mut b);
    let bounds = row_blocks(a.row_ptr(), ranks);
    let world = World::new(ranks).map_err(|e| e.to_string())?;
    let out = world.run(|ctx| {
        let blk = RowBlock::from_global(&a, &bounds, ctx.rank());
        let own = &b[blk.first_row()..blk.first_row() + blk.rows()];
        let t = Instant::now();
        let o = match cg {
            true => solve::cg(ctx, &blk, own, tol, max_iters),
            false => solve::jacobi(ctx, &blk, own, tol, max_iters, check),
        };
        (o, t.elapsed().as_secs_f64())
    });
    let time_s = out.iter().map(|(_, t)| *t).fold(0.0, f64::max);
    let o = match out.into_iter().next() {
        Some((Ok(o), _)) => o,
        Some((Err(e), _)) => return Err(e.to_string()),
        None => return Err("no rank ran".into()),
    };
    println!(
        "mtx_solve solver={} ranks={ranks} n={} nnz={} its={} time_s={time_s:.6e} s_per_iter={:.6e} true_rel_res={:.3e} bounds={}",
        args[1],
        a.n(),
        a.nnz(),
        o.iterations,
        time_s / o.iterations.max(1) as f64,
        o.residual,
        bounds.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(",")
    );
    Ok(o.converged)
}
