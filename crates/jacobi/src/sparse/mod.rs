//! A general sparse system: the matrix in compressed sparse rows (CSR), read from a Matrix
//! Market file, and its split into contiguous row blocks balanced by nonzeros (the block each
//! rank owns).
//!
//! * [`read_matrix`] reads a `coordinate real|integer general|symmetric|skew-symmetric` file
//!   (the symmetric kinds expanded to both triangles) and [`read_vector`] a right-hand side
//!   (`array real`, or a `coordinate` n × 1 matrix). Every malformed input is an error naming
//!   the file and the line: a bad header, a pattern or complex matrix, a size line that does
//!   not parse, a non-square matrix, an index out of range, a NaN or infinite value, fewer or
//!   more entries than the size line says, a line longer than [`MAX_LINE`], a file whose
//!   matrix would not fit in the memory given. Nothing is allocated from the size line before
//!   it is checked against that memory, and no line is read past [`MAX_LINE`]. The readers
//!   take a [`Source`]: a path, or the caller's own way of opening it.
//! * [`read_block`] reads the same files by row blocks: each rank passes over the file twice
//!   and keeps its own rows (and the other ranks' entries in its columns, for its send lists
//!   and its symmetry check), never the whole matrix, and refuses a bad file alike on every
//!   rank without communicating; [`read_vector_block`] keeps one block of a vector.
//!   [`write_matrix`] writes a `Csr` back out (tests and benchmarks).
//! * [`Csr`] holds the rows sorted by column, duplicates summed (a file may list an entry more
//!   than once; PETSc's and SciPy's readers add them too).
//! * [`row_blocks`] splits the rows into `p` contiguous blocks of about equal nonzeros.
//! * [`RowBlock`] is one rank's rows, its ghost columns found from the pattern, and the
//!   lists of what each neighbour sends it and it sends each neighbour.
//! * The solvers run on a row block through [`crate::Solve::system`]: `iterate.rs` makes it
//!   an iterate of Jacobi's sync, async and racy loops and multisplitting (one channel per
//!   neighbouring block), `operator.rs` the Krylov solvers' operator, `kernel.rs` holds the
//!   fused product, sweep and residual.
//! * [`generate`] makes test and benchmark systems: the stencil's 7-point operator, an
//!   anisotropic 2-D Laplacian, a 3-D coefficient jump, a non-symmetric convection–diffusion.

mod block;
mod csr;
mod dist;
pub mod generate;
pub(crate) mod iterate;
mod kernel;
mod mtx;
pub(crate) mod operator;

pub use block::{read_block, BlockRead};
pub use csr::{row_blocks, Csr};
pub use dist::{Link, RowBlock};
pub use kernel::{MatrixStorage, StorageInfo, COMPACT_FROM};
pub use mtx::{
    read_matrix, read_vector, read_vector_block, write_matrix, MatrixError, MatrixKind, Source,
    MAX_LINE,
};

/// The storage `storage` takes for `blk`'s rows (module `kernel`, "Storage"): its name and
/// bytes per entry. Builds the rows once to see (memory for a copy of the block's matrix
/// while it runs).
pub fn storage_of(blk: &RowBlock, storage: MatrixStorage) -> StorageInfo {
    kernel::Rows::new(blk, storage).storage()
}
