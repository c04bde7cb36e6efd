//! A general sparse system: the matrix in compressed sparse rows (CSR), read from a Matrix
//! Market file, and its split into contiguous row blocks balanced by nonzeros (the block each
//! rank owns).
//!
//! * [`read_matrix`] reads a `coordinate real|integer general|symmetric|skew-symmetric` file
//!   (the symmetric kinds expanded to both triangles) and [`read_vector`] a right-hand side
//!   (`array real`, or a `coordinate` n × 1 matrix). Every malformed input is an error naming
//!   the file and the line: a bad header, a pattern or complex matrix, a size line that does
//!   not parse, a non-square matrix, an index out of range, a NaN or infinite value, fewer or
//!   more entries than the size line says, a file whose matrix would not fit in the memory
//!   given. Nothing is allocated from the size line before it is checked against that memory.
//! * [`Csr`] holds the rows sorted by column, duplicates summed (a file may list an entry more
//!   than once; PETSc's and SciPy's readers add them too).
//! * [`row_blocks`] splits the rows into `p` contiguous blocks of about equal nonzeros.
//! * [`RowBlock`] is one rank's rows, its ghost columns found from the pattern, and the
//!   channels (one per direction with something to carry, of exactly that length) and
//!   pack/unpack lists of their exchange.
//! * [`solve`] has synchronous Jacobi and CG over a row block, written once against
//!   chan-core's `Context` (every backend), with a certified stop.
//! * [`generate`] makes test and benchmark systems: the stencil's 7-point operator, an
//!   anisotropic 2-D Laplacian, a 3-D coefficient jump, a non-symmetric convection–diffusion.

mod csr;
mod dist;
pub mod generate;
mod mtx;
pub mod solve;

pub use csr::{row_blocks, Csr};
pub use dist::{Link, RowBlock};
pub use mtx::{read_matrix, read_vector, write_matrix, MatrixError, MatrixKind};
