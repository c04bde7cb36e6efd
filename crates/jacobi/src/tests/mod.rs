//! The crate's tests that need its insides: solutions assembled from every block, the serial
//! oracle, the overlapped exchange's trace. Tests of the public API are in `tests/`.

mod breakdown;
pub(crate) mod common;
mod detect;
mod hybrid;
mod krylov;
mod matrix;
mod multisplit;
mod nonsym;
mod poisson;
mod shared_async;
mod shared_sync;
mod solution_properties;
mod sync_agreement;
