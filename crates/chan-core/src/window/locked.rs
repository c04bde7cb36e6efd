//! A window reached only under the target's exclusive lock.

use super::{checked_target, RawWindow, Window, WindowError, Word};
use crate::error::CommError;

/// A window whose words are reached only under the target's exclusive lock: the lock-based
/// insertion Maynard compares with compare-and-swap (MPI's `MPI_Win_lock(MPI_LOCK_EXCLUSIVE,
/// target)` … `MPI_Win_unlock`, OpenSHMEM's `shmem_set_lock` … `shmem_clear_lock`).
///
/// [`LockedWindow::lock`] waits for a target's lock and returns a [`TargetLock`], which reads
/// and writes that target's words and releases the lock when dropped or
/// [`unlocked`](TargetLock::unlock). The lock borrows the window mutably, so a rank holds one
/// lock at a time (no two ranks can wait on each other's). Everything written under a lock is
/// complete at the target when the lock is released, so the next rank to take it reads it.
///
/// ```no_run
/// use chan_core::traits::*;
/// use chan_core::WindowError;
///
/// fn insert_once<C: Windows>(ctx: &mut C, key: u64) -> Result<bool, WindowError> {
///     let mut win = ctx.locked_window::<u64>(16)?;     // collective
///     let mut slot = win.lock(0)?;                      // rank 0's lock
///     let empty = slot.load(3)? == 0;
///     if empty {
///         slot.store(3, key)?;
///     }
///     slot.unlock()?;
///     win.fence()?;                                     // collective
///     win.free()?;                                      // collective
///     Ok(empty)
/// }
/// ```
pub struct LockedWindow<R: RawWindow, T: Word> {
    pub(super) win: Window<R, T>,
}

impl<R: RawWindow, T: Word> std::fmt::Debug for LockedWindow<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockedWindow")
            .field("window", &self.win)
            .finish()
    }
}

impl<R: RawWindow, T: Word> LockedWindow<R, T> {
    /// Words of `T` per rank.
    pub fn len(&self) -> usize {
        self.win.len
    }

    /// Never true (a window holds at least one word).
    pub fn is_empty(&self) -> bool {
        self.win.len == 0
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.win.rank
    }

    /// Ranks in the window's world.
    pub fn size(&self) -> usize {
        self.win.size
    }

    /// Wait until this rank holds `target`'s exclusive lock.
    pub fn lock(&mut self, target: usize) -> Result<TargetLock<'_, R, T>, WindowError> {
        self.win.raw.lock(checked_target(target, self.win.size)?)?;
        Ok(TargetLock {
            win: &mut self.win,
            target,
            held: true,
        })
    }

    /// Collective: every rank's locked operations so far are visible to every rank's
    /// [`read_local`](LockedWindow::read_local) after it (a barrier: each completed at its
    /// unlock).
    pub fn fence(&mut self) -> Result<(), WindowError> {
        self.win.fence()
    }

    /// This rank's words, as they are now (see [`Window::read_local`]).
    pub fn read_local(&mut self, out: &mut [T]) -> Result<(), WindowError> {
        self.win.read_local(out)
    }

    /// Collective: release the window on every rank.
    pub fn free(self) -> Result<(), CommError> {
        self.win.free()
    }
}

/// `target`'s exclusive lock on a [`LockedWindow`], held until [`TargetLock::unlock`] or the
/// drop (which reports a failed unlock on stderr: call `unlock` to get the error). Every
/// operation completes before it returns.
pub struct TargetLock<'w, R: RawWindow, T: Word> {
    win: &'w mut Window<R, T>,
    target: usize,
    held: bool,
}

impl<R: RawWindow, T: Word> TargetLock<'_, R, T> {
    /// The rank whose lock this is.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Read words `offset..offset + dst.len()` of the target into `dst`.
    pub fn get(&mut self, offset: usize, dst: &mut [T]) -> Result<(), WindowError> {
        self.win.get(self.target, offset, dst)
    }

    /// Word `offset` of the target.
    pub fn load(&mut self, offset: usize) -> Result<T, WindowError> {
        self.win.load(self.target, offset)
    }

    /// Write `src` to words `offset..` of the target; complete at the target on return.
    pub fn put(&mut self, offset: usize, src: &[T]) -> Result<(), WindowError> {
        self.win.put(self.target, offset, src)
    }

    /// Make word `offset` of the target `v`.
    pub fn store(&mut self, offset: usize, v: T) -> Result<(), WindowError> {
        self.put(offset, &[v])
    }

    /// Release the lock.
    pub fn unlock(mut self) -> Result<(), WindowError> {
        self.held = false;
        Ok(self.win.raw.unlock(self.target)?)
    }
}

impl<R: RawWindow, T: Word> Drop for TargetLock<'_, R, T> {
    fn drop(&mut self) {
        if self.held {
            if let Err(e) = self.win.raw.unlock(self.target) {
                eprintln!(
                    "aiac ({}): releasing rank {}'s lock: {e}",
                    R::NAME,
                    self.target
                );
            }
        }
    }
}
