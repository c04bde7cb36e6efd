//! Write a generated benchmark system as a Matrix Market file.
//!
//! ```text
//! cargo run --release -p jacobi --example mtx_gen -- KIND N OUT.mtx
//! ```
//!
//! KIND (from `jacobi::sparse::generate`; symmetric ones are written `symmetric`, one
//! triangle):
//! * `laplace3d`: the stencil's 7-point operator on an N × N × N grid;
//! * `aniso2d`: `−u_xx − 0.01 u_yy` on an N × N grid;
//! * `jump3d`: `−∇·(k ∇u)` on N³ points, k = 1000 in the central cube;
//! * `convdiff2d`: upwinded convection–diffusion on N × N points, cell Péclet number 1 (not
//!   symmetric; Jacobi converges on it, CG need not).
//!
//! Prints `n nnz` (the expanded matrix's order and entries).

use jacobi::sparse::{generate, write_matrix};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mtx_gen laplace3d|aniso2d|jump3d|convdiff2d N OUT.mtx";
    let [kind, n, out] = &args[..] else {
        eprintln!("mtx_gen: {usage}");
        return ExitCode::FAILURE;
    };
    let n: usize = match n.parse() {
        Ok(n) if n >= 1 => n,
        _ => {
            eprintln!("mtx_gen: N must be a whole number from 1, got `{n}`");
            return ExitCode::FAILURE;
        }
    };
    let a = match kind.as_str() {
        "laplace3d" => generate::laplace_3d(n, n, n),
        "aniso2d" => generate::anisotropic_2d(n, 0.01),
        "jump3d" => generate::jump_3d(n, 1000.0),
        "convdiff2d" => generate::convection_diffusion_2d(n, 1.0),
        k => {
            eprintln!("mtx_gen: unknown KIND `{k}` ({usage})");
            return ExitCode::FAILURE;
        }
    };
    // The library writes to what its caller opens; this tool opens the file it was asked for.
    #[allow(clippy::disallowed_methods)]
    let written = std::fs::File::create(out).and_then(|f| write_matrix(f, &a, a.is_symmetric()));
    if let Err(e) = written {
        eprintln!("mtx_gen: {out}: {e}");
        return ExitCode::FAILURE;
    }
    println!("{} {}", a.n(), a.nnz());
    ExitCode::SUCCESS
}
