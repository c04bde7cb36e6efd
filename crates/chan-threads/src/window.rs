//! One-sided windows between threads: every rank's words live in one shared array of
//! `AtomicU64`, and each operation is one atomic instruction, complete when it returns. A
//! locked window's lock of rank r is a spinlock word (an `AtomicBool`) beside the words.
//!
//! ## Memory ordering
//! A put is a `Release` store per word and a get an `Acquire` load, which pair with each
//! other: a rank that reads a word another rank put also sees what that rank wrote before the
//! put. `compare_and_swap` and `fetch_add` are `AcqRel` read-modify-writes (a failed
//! compare-and-swap `Acquire`s): they pair with the puts and atomics that wrote the value they
//! read, and with the gets that read theirs. That is stronger than chan-core's model asks
//! (ordering between ranks only at a fence, where the world's barrier, a mutex, orders
//! everything), and costs nothing on x86-64, where every RMW is a full barrier anyway.
//! `read_local` loads `Acquire` for the same reason.

use crate::world::Shared;
use chan_core::backend::{RawWindow, Span, WordOp};
use chan_core::{CommError, ReduceOp};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The memory of one window: `len` words per rank, rank r's at `r * len..`, and one lock
/// word per rank (a locked window's: rank r's lock guards rank r's words).
pub(crate) struct WinMem {
    words: Box<[AtomicU64]>,
    locks: Box<[AtomicBool]>,
}

impl WinMem {
    /// Zeroed words for `size` ranks of `len` each, every lock free.
    pub(crate) fn new(size: usize, len: usize) -> Self {
        WinMem {
            words: (0..size * len).map(|_| AtomicU64::new(0)).collect(),
            locks: (0..size).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

/// Spins on a taken lock before giving the core away (`yield_now`) between tries: with more
/// ranks than cores the holder may be waiting for this core.
const LOCK_SPINS: u32 = 64;

/// One rank's handle on a window of a threads world.
pub struct ThreadWindow {
    mem: Arc<WinMem>,
    shared: Arc<Shared>,
    rank: usize,
    len: usize,
}

impl std::fmt::Debug for ThreadWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadWindow")
            .field("rank", &self.rank)
            .field("len", &self.len)
            .finish()
    }
}

impl ThreadWindow {
    pub(crate) fn new(mem: Arc<WinMem>, shared: Arc<Shared>, rank: usize, len: usize) -> Self {
        ThreadWindow {
            mem,
            shared,
            rank,
            len,
        }
    }

    /// The words `at` (a span chan-core checked against this window).
    #[inline(always)]
    fn words(&self, at: Span) -> &[AtomicU64] {
        let base = at.target() * self.len + at.offset();
        &self.mem.words[base..base + at.count()]
    }
}

// SAFETY: every operation completes before it returns, touching only the words of the window
// (indexing is bounds-checked) and the caller's buffers inside the ranges given.
unsafe impl RawWindow for ThreadWindow {
    const NAME: &'static str = "threads";

    fn len(&self) -> usize {
        self.len
    }

    unsafe fn put(&mut self, at: Span, src: *const u64) -> Result<(), CommError> {
        // SAFETY: the caller's contract: src..src+count is readable now.
        let src = unsafe { std::slice::from_raw_parts(src, at.count()) };
        for (w, &v) in self.words(at).iter().zip(src) {
            // Release: pairs with the Acquire load of a get (module docs).
            w.store(v, Ordering::Release);
        }
        Ok(())
    }

    unsafe fn get(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError> {
        // SAFETY: the caller's contract: dst..dst+count is writable and nobody else touches
        // it until the flush that follows.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst, at.count()) };
        for (d, w) in dst.iter_mut().zip(self.words(at)) {
            // Acquire: pairs with the Release store of a put (module docs).
            *d = w.load(Ordering::Acquire);
        }
        Ok(())
    }

    unsafe fn compare_and_swap(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        // SAFETY: the caller's contract: *op is valid and ours until the flush.
        let op = unsafe { &mut *op };
        // AcqRel / Acquire: see the module docs.
        op.result = match self.words(at)[0].compare_exchange(
            op.compare,
            op.operand,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(v) | Err(v) => v,
        };
        Ok(())
    }

    unsafe fn fetch_add(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError> {
        // SAFETY: the caller's contract: *op is valid and ours until the flush.
        let op = unsafe { &mut *op };
        // AcqRel: see the module docs. fetch_add wraps, as the model says.
        op.result = self.words(at)[0].fetch_add(op.operand, Ordering::AcqRel);
        Ok(())
    }

    fn flush(&mut self, _target: usize) -> Result<(), CommError> {
        Ok(())
    }

    fn flush_all(&mut self) -> Result<(), CommError> {
        Ok(())
    }

    fn fence(&mut self) -> Result<(), CommError> {
        // The world's barrier (a mutex and condvar) orders every rank's operations before
        // it with every rank's after it.
        self.shared.all_reduce(self.rank, &mut [], ReduceOp::Sum)
    }

    fn read_local(&mut self, out: &mut [u64]) -> Result<(), CommError> {
        let base = self.rank * self.len;
        for (d, w) in out.iter_mut().zip(&self.mem.words[base..base + self.len]) {
            // Acquire: as a get's.
            *d = w.load(Ordering::Acquire);
        }
        Ok(())
    }

    /// Nothing collective: the memory goes with the last rank's handle.
    fn free(&mut self) -> Result<(), CommError> {
        Ok(())
    }

    fn abandon(&mut self) {}

    fn lock(&mut self, target: usize) -> Result<(), CommError> {
        let word = &self.mem.locks[target];
        let mut tries = 0u32;
        // Acquire: the holder's writes, released by its unlock, are visible to this rank's.
        while word
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            tries = tries.saturating_add(1);
            if tries < LOCK_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn unlock(&mut self, target: usize) -> Result<(), CommError> {
        // Release: pairs with the next holder's Acquire (every operation completed on return).
        self.mem.locks[target].store(false, Ordering::Release);
        Ok(())
    }
}
