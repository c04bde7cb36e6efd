//! aiac's MPI window against raw MPI-3 RMA written directly (`MPI_Win_allocate`,
//! `MPI_Win_lock_all`, `MPI_Put`/`MPI_Get`/`MPI_Compare_and_swap`/`MPI_Fetch_and_op`, then
//! `MPI_Win_flush`), between two ranks: rank 0 operates on rank 1's memory, rank 1 only waits.
//!
//! Latency: one operation completed at the target (`MPI_Win_flush(1)`) per iteration, 8 B and
//! 64 KB puts and gets, 8 B compare-and-swap and fetch-add. Throughput ("burst"): 64 (8 B) or
//! 16 (64 KB) operations, then one `MPI_Win_flush_all`, which is what an aiac epoch ends with.
//! Raw and aiac are timed in alternating batches; the table gives medians and minima.
//!
//! `cargo bench -p chan-mpi --bench mpi_window` starts itself under `mpirun -np 2`
//! (`source scripts/mpi-env.sh` first). `AIAC_BENCH_ROUNDS` sets the batches per side.

use chan_core::traits::*;
use chan_mpi::MpiCtx;
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::process::ExitCode;

#[path = "../../../benches/support/interleaved.rs"]
#[allow(dead_code)]
mod interleaved;
#[path = "../../../benches/support/two_ranks.rs"]
#[allow(dead_code)]
mod two_ranks;
#[path = "../../../benches/support/window_ops.rs"]
mod window_ops;

use window_ops::RawOps;

/// A window made with raw MPI calls, as a C programmer would.
struct Raw {
    win: ffi::MPI_Win,
    result: u64,
}

fn ok(rc: c_int, call: &str) {
    assert_eq!(rc, 0, "{call} failed with {rc}");
}

fn u64_t() -> ffi::MPI_Datatype {
    // SAFETY: reading an immutable handle constant.
    unsafe { ffi::RSMPI_UINT64_T }
}

impl Raw {
    fn new(words: usize) -> Raw {
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: null handle constant, overwritten by MPI_Win_allocate.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: collective on the world communicator (both ranks call it); MPI writes the
        // base and the handle into the locals.
        unsafe {
            ok(
                ffi::MPI_Win_allocate(
                    (words * 8) as ffi::MPI_Aint,
                    8,
                    ffi::RSMPI_INFO_NULL,
                    ffi::RSMPI_COMM_WORLD,
                    (&mut base as *mut *mut c_void).cast(),
                    &mut win,
                ),
                "MPI_Win_allocate",
            );
            ok(
                ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win),
                "MPI_Win_lock_all",
            );
        }
        Raw { win, result: 0 }
    }

    fn free(mut self) {
        // SAFETY: the window made in new, locked; collective (both ranks call it).
        unsafe {
            ok(ffi::MPI_Win_unlock_all(self.win), "MPI_Win_unlock_all");
            ok(ffi::MPI_Win_free(&mut self.win), "MPI_Win_free");
        }
    }
}

// SAFETY (every block below): rank 1 and offsets inside the window of 8192 words; buffers
// live on the caller's frame until the MPI_Win_flush / flush_all in the same function.
impl RawOps for Raw {
    fn put(&mut self, src: &[u64]) {
        let n = src.len() as c_int;
        // SAFETY: see the impl.
        unsafe {
            ok(
                ffi::MPI_Put(src.as_ptr().cast(), n, u64_t(), 1, 0, n, u64_t(), self.win),
                "MPI_Put",
            );
            ok(ffi::MPI_Win_flush(1, self.win), "MPI_Win_flush");
        }
    }
    fn get(&mut self, dst: &mut [u64]) {
        let n = dst.len() as c_int;
        // SAFETY: see the impl.
        unsafe {
            ok(
                ffi::MPI_Get(
                    dst.as_mut_ptr().cast(),
                    n,
                    u64_t(),
                    1,
                    0,
                    n,
                    u64_t(),
                    self.win,
                ),
                "MPI_Get",
            );
            ok(ffi::MPI_Win_flush(1, self.win), "MPI_Win_flush");
        }
    }
    fn cas(&mut self, expected: u64, new: u64) -> u64 {
        // SAFETY: see the impl.
        unsafe {
            ok(
                ffi::MPI_Compare_and_swap(
                    (&new as *const u64).cast(),
                    (&expected as *const u64).cast(),
                    (&mut self.result as *mut u64).cast(),
                    u64_t(),
                    1,
                    2,
                    self.win,
                ),
                "MPI_Compare_and_swap",
            );
            ok(ffi::MPI_Win_flush(1, self.win), "MPI_Win_flush");
        }
        self.result
    }
    fn fadd(&mut self, delta: u64) -> u64 {
        // SAFETY: see the impl.
        unsafe {
            ok(
                ffi::MPI_Fetch_and_op(
                    (&delta as *const u64).cast(),
                    (&mut self.result as *mut u64).cast(),
                    u64_t(),
                    1,
                    0,
                    ffi::RSMPI_SUM,
                    self.win,
                ),
                "MPI_Fetch_and_op",
            );
            ok(ffi::MPI_Win_flush(1, self.win), "MPI_Win_flush");
        }
        self.result
    }
    fn put_burst(&mut self, src: &[u64], k: usize) {
        let n = src.len() as c_int;
        // SAFETY: see the impl.
        unsafe {
            for _ in 0..k {
                ok(
                    ffi::MPI_Put(src.as_ptr().cast(), n, u64_t(), 1, 0, n, u64_t(), self.win),
                    "MPI_Put",
                );
            }
            ok(ffi::MPI_Win_flush_all(self.win), "MPI_Win_flush_all");
        }
    }
    fn get_burst(&mut self, dst: &mut [Vec<u64>], words: usize) {
        let n = words as c_int;
        // SAFETY: see the impl; each buffer holds at least `words` words.
        unsafe {
            for d in dst.iter_mut() {
                assert!(d.len() >= words);
                ok(
                    ffi::MPI_Get(
                        d.as_mut_ptr().cast(),
                        n,
                        u64_t(),
                        1,
                        0,
                        n,
                        u64_t(),
                        self.win,
                    ),
                    "MPI_Get",
                );
            }
            ok(ffi::MPI_Win_flush_all(self.win), "MPI_Win_flush_all");
        }
    }
    fn fadd_burst(&mut self, k: usize) -> u64 {
        let mut results = [0u64; 64];
        let one = 1u64;
        // SAFETY: see the impl; results and one outlive the flush.
        unsafe {
            for r in results.iter_mut().take(k) {
                ok(
                    ffi::MPI_Fetch_and_op(
                        (&one as *const u64).cast(),
                        (r as *mut u64).cast(),
                        u64_t(),
                        1,
                        1,
                        ffi::RSMPI_SUM,
                        self.win,
                    ),
                    "MPI_Fetch_and_op",
                );
            }
            ok(ffi::MPI_Win_flush_all(self.win), "MPI_Win_flush_all");
        }
        results[0]
    }
}

fn main() -> ExitCode {
    if !two_ranks::launched() {
        return two_ranks::relaunch("mpirun");
    }
    let mut ctx = MpiCtx::init().expect("MPI starts");
    assert_eq!(ctx.size(), 2, "run with 2 ranks");
    let words = *window_ops::WORDS.iter().max().unwrap();
    let mut win = ctx.window::<u64>(words).expect("window");
    let mut raw = Raw::new(words);
    if ctx.rank() == 0 {
        let osc = std::env::var("OMPI_MCA_osc").unwrap_or_else(|_| "(default)".into());
        window_ops::table(
            &format!("aiac MPI window / raw MPI-3 RMA, osc={osc}"),
            &mut raw,
            &mut win,
        );
    }
    // SAFETY: a collective on the world communicator: rank 1 waits here while rank 0 works.
    unsafe { ffi::MPI_Barrier(ffi::RSMPI_COMM_WORLD) };
    raw.free();
    win.free().expect("window freed");
    ctx.finalize().expect("finalize");
    ExitCode::SUCCESS
}
