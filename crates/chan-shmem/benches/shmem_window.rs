//! aiac's SHMEM window against raw OpenSHMEM written directly (`shmem_align`,
//! `shmem_putmem` + `shmem_quiet`, `shmem_getmem`, `shmem_ulong_atomic_compare_swap`,
//! `shmem_ulong_atomic_fetch_add`), between two PEs: PE 0 operates on PE 1's memory, PE 1
//! only waits.
//!
//! Latency: one operation complete at the target per iteration, 8 B and 64 KB puts and gets,
//! 8 B compare-and-swap and fetch-add. Throughput ("burst"): 64 (8 B) or 16 (64 KB)
//! operations (`shmem_putmem_nbi`/`shmem_getmem_nbi` for the raw bursts, the fetching atomics
//! one after the other), then one `shmem_quiet`. Raw and aiac are timed in alternating
//! batches; the table gives medians and minima.
//!
//! `cargo bench -p chan-shmem --bench shmem_window` starts itself under `oshrun -np 2`
//! (`source scripts/mpi-env.sh` first). `AIAC_BENCH_ROUNDS` sets the batches per side.

use chan_core::traits::*;
use chan_shmem::ShmemCtx;
use openshmem_sys as sys;
use std::os::raw::{c_ulong, c_void};
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

/// Symmetric memory made with raw SHMEM calls, as a C programmer would.
struct Raw {
    base: *mut u64,
}

impl Raw {
    fn new(words: usize) -> Raw {
        // SAFETY: collective (both PEs call it with the same size, in the same order).
        let base = unsafe { sys::shmem_align(64, words * 8) }.cast::<u64>();
        assert!(!base.is_null(), "shmem_align");
        // SAFETY: no arguments; both PEs call it.
        unsafe { sys::shmem_barrier_all() };
        Raw { base }
    }

    fn free(self) {
        // SAFETY: collective; nothing targets the memory any more (a barrier came before).
        unsafe { sys::shmem_free(self.base.cast::<c_void>()) };
    }
}

// SAFETY (every block below): PE 1 and offsets inside the symmetric allocation of 8192 words;
// buffers live on the caller's frame until the shmem_quiet (or the blocking call) returns.
impl RawOps for Raw {
    fn put(&mut self, src: &[u64]) {
        // SAFETY: see the impl.
        unsafe {
            sys::shmem_putmem(self.base.cast(), src.as_ptr().cast(), src.len() * 8, 1);
            sys::shmem_quiet();
        }
    }
    fn get(&mut self, dst: &mut [u64]) {
        // SAFETY: see the impl (shmem_getmem returns with the data).
        unsafe { sys::shmem_getmem(dst.as_mut_ptr().cast(), self.base.cast(), dst.len() * 8, 1) };
    }
    fn cas(&mut self, expected: u64, new: u64) -> u64 {
        // SAFETY: see the impl.
        unsafe {
            sys::shmem_ulong_atomic_compare_swap(
                self.base.add(2).cast::<c_ulong>(),
                expected as c_ulong,
                new as c_ulong,
                1,
            ) as u64
        }
    }
    fn fadd(&mut self, delta: u64) -> u64 {
        // SAFETY: see the impl.
        unsafe {
            sys::shmem_ulong_atomic_fetch_add(self.base.cast::<c_ulong>(), delta as c_ulong, 1)
                as u64
        }
    }
    fn put_burst(&mut self, src: &[u64], k: usize) {
        // SAFETY: see the impl.
        unsafe {
            for _ in 0..k {
                sys::shmem_putmem_nbi(self.base.cast(), src.as_ptr().cast(), src.len() * 8, 1);
            }
            sys::shmem_quiet();
        }
    }
    fn get_burst(&mut self, dst: &mut [Vec<u64>], words: usize) {
        // SAFETY: see the impl; each buffer holds at least `words` words.
        unsafe {
            for d in dst.iter_mut() {
                assert!(d.len() >= words);
                sys::shmem_getmem_nbi(d.as_mut_ptr().cast(), self.base.cast(), words * 8, 1);
            }
            sys::shmem_quiet();
        }
    }
    fn fadd_burst(&mut self, k: usize) -> u64 {
        let mut first = 0;
        for i in 0..k {
            // SAFETY: see the impl.
            let v = unsafe {
                sys::shmem_ulong_atomic_fetch_add(self.base.add(1).cast::<c_ulong>(), 1, 1)
            };
            if i == 0 {
                first = v as u64;
            }
        }
        // SAFETY: no arguments (what an aiac epoch's flush does when only atomics ran: nothing
        // is pending, so aiac skips it; the raw side keeps the C programmer's habit).
        unsafe { sys::shmem_quiet() };
        first
    }
}

fn main() -> ExitCode {
    if !two_ranks::launched() {
        return two_ranks::relaunch("oshrun");
    }
    let mut ctx = ShmemCtx::init().expect("SHMEM starts");
    assert_eq!(ctx.size(), 2, "run with 2 PEs");
    let words = *window_ops::WORDS.iter().max().unwrap();
    let mut win = ctx.window::<u64>(words).expect("window");
    let mut raw = Raw::new(words);
    if ctx.rank() == 0 {
        window_ops::table("aiac SHMEM window / raw OpenSHMEM", &mut raw, &mut win);
    }
    ctx.barrier().expect("barrier");
    raw.free();
    win.free().expect("window freed");
    ctx.finalize().expect("finalize");
    ExitCode::SUCCESS
}
