//! std or loom: the concurrency primitives the lock-free parts use, swapped for loom's under
//! `cfg(loom)` so the model tests explore every interleaving.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

#[cfg(loom)]
pub(crate) use loom::sync::atomic;

/// An `UnsafeCell` with loom's closure API, so the same code runs under std and loom.
#[derive(Debug)]
pub(crate) struct Cell<T>(
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
);

impl<T> Cell<T> {
    pub(crate) fn new(v: T) -> Self {
        #[cfg(not(loom))]
        return Cell(std::cell::UnsafeCell::new(v));
        #[cfg(loom)]
        return Cell(loom::cell::UnsafeCell::new(v));
    }

    /// Shared access to the contents.
    ///
    /// # Safety
    /// No `with_mut` on this cell may run concurrently (the caller's protocol excludes it).
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with(f);
    }

    /// A raw pointer to the contents (std only; loom tracks accesses through `with`).
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn get(&self) -> *mut T {
        self.0.get()
    }

    /// Exclusive access to the contents.
    ///
    /// # Safety
    /// No other `with` or `with_mut` on this cell may run concurrently.
    #[inline(always)]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}
