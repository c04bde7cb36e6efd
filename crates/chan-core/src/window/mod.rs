//! One-sided windows: the user's [`Window`] (its docs give the model) over a backend's
//! [`RawWindow`]; the words it holds in `word.rs`, an epoch of non-blocking operations in
//! `epoch.rs`, the window reached under locks in `locked.rs`.

use crate::backend::{vote, Collective, Lists};
use crate::error::{CommError, CreateError};
use std::marker::PhantomData;
mod epoch;
mod locked;
#[cfg(test)]
mod test;
mod word;

pub use epoch::{Epoch, Flushed, PendingGet, PendingWord};
use epoch::{FlushGuard, Slots};
pub use locked::{LockedWindow, TargetLock};
use word::as_words;
pub use word::{IntWord, Word};

/// A one-sided operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The target rank is not in the world.
    #[error("target rank {target} is outside the window's world of {size} ranks")]
    BadTarget {
        /// The rank asked for.
        target: usize,
        /// World size.
        size: usize,
    },
    /// The words touched are not all inside the window.
    #[error("words {offset}..{offset}+{count} are outside the window of {len} words per rank")]
    OutOfRange {
        /// First word.
        offset: usize,
        /// Words touched.
        count: usize,
        /// The window's words per rank.
        len: usize,
    },
    /// The window could not be created (see [`CreateError`]).
    #[error(transparent)]
    Create(#[from] CreateError),
    /// The backend failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// The operands and result of one atomic operation, in memory that stays put until the
/// operation completes (MPI reads the operands and writes the result at completion).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct WordOp {
    /// What is written (`compare_and_swap`) or added (`fetch_add`).
    pub operand: u64,
    /// What the target word is compared with (`compare_and_swap` only).
    pub compare: u64,
    /// The target word's value before the operation, written by the backend.
    pub result: u64,
}

impl WordOp {
    /// A compare-and-swap's operands: make the word `new` where it equals `expected`.
    fn swap<T: Word>(expected: T, new: T) -> Self {
        WordOp {
            operand: new.to_bits(),
            compare: expected.to_bits(),
            result: 0,
        }
    }

    /// A wrapping add's operand.
    fn add<T: Word>(delta: T) -> Self {
        WordOp {
            operand: delta.to_bits(),
            ..WordOp::default()
        }
    }
}

/// Words `offset..offset + count` of rank `target`'s window, checked against the window's
/// world and length: what chan-core hands each [`RawWindow`] operation, so that a backend's
/// operation is its library call alone. Only chan-core makes one, after the check
/// ([`WindowError::BadTarget`], [`WindowError::OutOfRange`]); a backend takes its fields as
/// in range: `target < size`, `offset + count <= len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    target: usize,
    offset: usize,
    count: usize,
}

impl Span {
    /// Words `offset..offset + count` of `target` in a window of `len` words per rank over
    /// `size` ranks, or why they are not.
    pub(crate) fn checked(
        target: usize,
        offset: usize,
        count: usize,
        size: usize,
        len: usize,
    ) -> Result<Span, WindowError> {
        checked_target(target, size)?;
        if offset.checked_add(count).is_none_or(|end| end > len) {
            return Err(WindowError::OutOfRange { offset, count, len });
        }
        Ok(Span {
            target,
            offset,
            count,
        })
    }

    /// The rank whose words these are.
    #[inline]
    pub fn target(self) -> usize {
        self.target
    }

    /// The first word.
    #[inline]
    pub fn offset(self) -> usize {
        self.offset
    }

    /// How many words.
    #[inline]
    pub fn count(self) -> usize {
        self.count
    }

    /// How many bytes (8 a word).
    #[inline]
    pub fn bytes(self) -> usize {
        self.count * 8
    }
}

/// `target` when it is a rank of a world of `size`.
fn checked_target(target: usize, size: usize) -> Result<usize, WindowError> {
    if target >= size {
        return Err(WindowError::BadTarget { target, size });
    }
    Ok(target)
}

/// A backend's window: one rank's handle on `len` words per rank, made by
/// [`WindowHooks::make_window`]. chan-core checks every target and range before it calls
/// these (a [`Span`], or a target below the world's size), and keeps every buffer it passes
/// alive and untouched until the next flush.
///
/// # Safety
/// Implementors write only where told: `get` into `dst..dst+count`, the atomics into
/// `op.result`, and nothing after the `flush(target)`/`flush_all` that follows the call
/// returns; a put reads `src..src+count` only until then. After `flush(target)` every
/// operation this rank started to `target` is complete at the target; after `flush_all`, to
/// every target. chan-core's safe [`Window`] relies on this to lend Rust buffers.
pub unsafe trait RawWindow {
    /// The backend's name (`threads`, `mpi`, `shmem`).
    const NAME: &'static str;

    /// Words per rank.
    fn len(&self) -> usize;

    /// True when the window holds no word (never, once created).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start writing `at.count()` words from `src` to the words `at`.
    ///
    /// # Safety
    /// `at` was checked against this window; `src..src+at.count()` is readable and unchanged
    /// until the next flush covering `at.target()` returns.
    unsafe fn put(&mut self, at: Span, src: *const u64) -> Result<(), CommError>;

    /// Start reading the words `at` into `dst`.
    ///
    /// # Safety
    /// `at` was checked against this window; `dst..dst+at.count()` is writable and nothing
    /// else reads or writes it until the next flush covering `at.target()` returns.
    unsafe fn get(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError>;

    /// Read the words `at` into `dst`, complete on return (what the blocking [`Window::get`]
    /// calls). The default starts a [`RawWindow::get`] and flushes the target; a backend with a
    /// cheaper blocking get (SHMEM's `shmem_getmem`) overrides it.
    ///
    /// # Safety
    /// As [`RawWindow::get`]; `dst` is ours until this returns.
    unsafe fn get_now(&mut self, at: Span, dst: *mut u64) -> Result<(), CommError> {
        // SAFETY: the caller's contract, and the flush completes the get before we return.
        unsafe { self.get(at, dst)? };
        self.flush(at.target())
    }

    /// Start an atomic compare-and-swap of the word `at` (one word): if it equals
    /// `op.compare` it becomes `op.operand`; its old value goes to `op.result`.
    ///
    /// # Safety
    /// `at` was checked against this window and is one word; `*op` stays valid and is neither
    /// read nor written by anyone else until the next flush covering `at.target()` returns.
    unsafe fn compare_and_swap(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError>;

    /// Start an atomic wrapping add of `op.operand` to the word `at` (one word); its old
    /// value goes to `op.result`.
    ///
    /// # Safety
    /// As [`RawWindow::compare_and_swap`].
    unsafe fn fetch_add(&mut self, at: Span, op: *mut WordOp) -> Result<(), CommError>;

    /// Complete every operation this rank started to `target`.
    fn flush(&mut self, target: usize) -> Result<(), CommError>;

    /// Complete every operation this rank started.
    fn flush_all(&mut self) -> Result<(), CommError>;

    /// Collective: `flush_all` on every rank, then a barrier, so that every rank's operations
    /// so far are visible to every rank's reads after it.
    fn fence(&mut self) -> Result<(), CommError>;

    /// This rank's words, read with atomic loads (`out.len() == len()`); an error when the
    /// library fails to synchronise its view of the memory first.
    fn read_local(&mut self, out: &mut [u64]) -> Result<(), CommError>;

    /// Collective: complete everything and release the window's memory. Called once, by
    /// [`Window::free`] or the window's `Drop`.
    fn free(&mut self) -> Result<(), CommError>;

    /// Give up the window without the collective free (creation failed on another rank, or
    /// this rank is unwinding from a panic): leak what a collective call would release.
    fn abandon(&mut self);

    /// [`WindowMode::Locked`] windows only: wait until this rank holds `target`'s exclusive
    /// lock (no other rank holds it until [`RawWindow::unlock`]). chan-core holds at most one
    /// lock of a window at a time, and on a locked window starts puts and gets only to the
    /// target whose lock it holds.
    fn lock(&mut self, target: usize) -> Result<(), CommError>;

    /// Release `target`'s lock, taken by [`RawWindow::lock`]: every operation this rank
    /// started to `target` is complete at the target first.
    fn unlock(&mut self, target: usize) -> Result<(), CommError>;
}

/// How the ranks of a window reach each other's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowMode {
    /// Every operation at any time ([`Window`]): MPI opens one passive-target epoch to every
    /// rank for the window's life (`MPI_Win_lock_all`).
    Atomic,
    /// Puts and gets only under the target's exclusive lock ([`LockedWindow`]): MPI's
    /// `MPI_Win_lock(MPI_LOCK_EXCLUSIVE)` per target, which cannot nest in an
    /// `MPI_Win_lock_all` epoch, so such a window has none; SHMEM's `shmem_set_lock` on one
    /// lock word per PE; a lock word per rank between threads.
    Locked,
}

impl WindowMode {
    fn code(self) -> u64 {
        match self {
            WindowMode::Atomic => 0,
            WindowMode::Locked => 16,
        }
    }
}

/// What a backend implements, on its world type, to offer windows (beside
/// [`crate::backend::ChannelHooks`]). Every type implementing it is a [`Windows`].
pub trait WindowHooks: Collective {
    /// The backend's window.
    type Window: RawWindow;

    /// Collective: allocate `len` zeroed words on every rank (`len` and `mode` are the same
    /// everywhere and `len` at least 1: chan-core agreed on them first) and make them
    /// accessible to every rank as `mode` says. Every rank's memory is zero and accessible
    /// when any rank's call returns.
    fn make_window(&mut self, len: usize, mode: WindowMode) -> Result<Self::Window, CreateError>;
}

mod sealed_user {
    pub trait Sealed {}
    impl<W: super::WindowHooks> Sealed for W {}
}

/// A rank that can create one-sided [`Window`]s. Sealed: every backend world implementing
/// [`WindowHooks`] is one.
pub trait Windows: Collective + sealed_user::Sealed {
    /// The backend's window.
    type Raw: RawWindow;

    /// Collectively create a window of `len` words of `T` on every rank, zeroed. Every rank
    /// must ask for the same `len` and `T`: otherwise every rank gets the same
    /// [`CreateError::WindowMismatch`] and nothing is allocated. `len = 0` is
    /// [`CreateError::EmptyWindow`] on every rank.
    fn window<T: Word>(&mut self, len: usize) -> Result<Window<Self::Raw, T>, CreateError>;

    /// Collectively create a [`LockedWindow`] of `len` words of `T` on every rank, zeroed:
    /// its words are reached only under a target's exclusive lock. Errors as
    /// [`Windows::window`] (a rank asking for a locked window while another asks for a plain
    /// one is a [`CreateError::WindowMismatch`]).
    fn locked_window<T: Word>(
        &mut self,
        len: usize,
    ) -> Result<LockedWindow<Self::Raw, T>, CreateError>;
}

impl<W: WindowHooks> Windows for W {
    type Raw = W::Window;

    fn window<T: Word>(&mut self, len: usize) -> Result<Window<W::Window, T>, CreateError> {
        create(self, len, WindowMode::Atomic)
    }

    fn locked_window<T: Word>(
        &mut self,
        len: usize,
    ) -> Result<LockedWindow<W::Window, T>, CreateError> {
        Ok(LockedWindow {
            win: create(self, len, WindowMode::Locked)?,
        })
    }
}

/// Collective: agree on `len`, `T` and `mode`, then make the window.
fn create<W: WindowHooks, T: Word>(
    ctx: &mut W,
    len: usize,
    mode: WindowMode,
) -> Result<Window<W::Window, T>, CreateError> {
    let size = ctx.size();
    // Every rank tells every rank what it asked for: [len, type and mode code].
    let mut send = Lists::with_capacity(size, 2 * size);
    for _ in 0..size {
        send.push(&[len as u64, T::CODE + mode.code()]);
    }
    let all = ctx.all_to_all_v(&send)?;
    let asked = |r: usize| {
        let l = all.list(r);
        (
            l.first().copied().unwrap_or(0),
            l.get(1).copied().unwrap_or(0),
        )
    };
    let (len0, code0) = asked(0);
    // The same verdict on every rank: it reads the same lists.
    if let Some(r) = (1..size).find(|&r| asked(r) != (len0, code0)) {
        let (lr, cr) = asked(r);
        return Err(CreateError::WindowMismatch {
            rank: 0,
            len: len0 as usize,
            word: type_name(code0),
            other_rank: r,
            other_len: lr as usize,
            other_word: type_name(cr),
        });
    }
    if len == 0 {
        return Err(CreateError::EmptyWindow);
    }
    if len.checked_mul(8).is_none_or(|b| b > isize::MAX as usize) {
        return Err(CreateError::Comm(CommError::Backend {
            backend: W::Window::NAME,
            call: "window creation",
            message: format!("{len} words per rank do not fit in memory"),
        }));
    }
    let made = ctx.make_window(len, mode);
    let ok = made.is_ok();
    match vote(ctx, made) {
        Ok(raw) => Ok(Window {
            raw,
            rank: ctx.rank(),
            size,
            len,
            slots: Slots::default(),
            dirty: false,
            freed: false,
            _word: PhantomData,
        }),
        Err(e) => {
            debug_assert!(!ok || matches!(e, CreateError::FailedElsewhere { .. }));
            Err(e)
        }
    }
}

fn type_name(code: u64) -> &'static str {
    match code {
        1 => "u64",
        2 => "i64",
        3 => "f64",
        17 => "u64 (locked)",
        18 => "i64 (locked)",
        19 => "f64 (locked)",
        _ => "unknown",
    }
}

/// One-sided communication: symmetric windows of 8-byte words that any rank reads, writes and
/// updates atomically without the owner taking part.
///
/// A channel pairs two ranks that both know of it. A distributed hash table cannot use one:
/// the rank that hashes a key knows where the entry lives, the owner does not know who will
/// write to it or when. A [`Window`] gives every rank `len` words that every other rank can
/// [`put`](Window::put), [`get`](Window::get), [`compare_and_swap`](Window::compare_and_swap)
/// and [`fetch_add`](Window::fetch_add) (MPI-3 RMA §11, OpenSHMEM 1.4 §9.5–9.8).
///
/// ```no_run
/// use chan_core::traits::*;
/// use chan_core::{Window, WindowError};
///
/// fn count_and_publish<C: Windows>(ctx: &mut C) -> Result<(), WindowError> {
///     let mut win = ctx.window::<u64>(16)?;            // collective: 16 words on every rank
///     let ticket = win.fetch_add(0, 0, 1)?;            // word 0 of rank 0, atomically
///     win.put((ctx.rank() + 1) % ctx.size(), 1, &[ticket])?;
///     // Non-blocking: many operations, completed together by one flush.
///     let total = win.epoch(|ep| {
///         let a = ep.fetch_add(0, 2, 5)?;
///         let b = ep.compare_and_swap(0, 3, 0, 7)?;
///         let done = ep.flush()?;
///         Ok(a.value(&done) + b.value(&done))
///     })?;
///     win.fence()?;                                    // collective: every rank's ops landed
///     let mut mine = vec![0u64; win.len()];
///     win.read_local(&mut mine)?;
///     win.free()?;                                     // collective
///     let _ = total;
///     Ok(())
/// }
/// ```
///
/// A result is readable only after its completion; each of these fails to compile:
///
/// ```compile_fail
/// # use chan_core::{Window, WindowError, backend::RawWindow};
/// fn read_before_flush<R: RawWindow>(win: &mut Window<R, u64>) -> Result<u64, WindowError> {
///     win.epoch(|ep| {
///         let old = ep.fetch_add(0, 0, 1)?;
///         Ok(old.value()) // no way to read it without the Flushed of a later flush
///     })
/// }
/// ```
/// ```compile_fail
/// # use chan_core::{Window, WindowError, backend::RawWindow};
/// fn flushed_before_issued<R: RawWindow>(win: &mut Window<R, u64>) -> Result<u64, WindowError> {
///     win.epoch(|ep| {
///         let done = ep.flush()?;
///         let old = ep.fetch_add(0, 0, 1)?; // the epoch is borrowed by `done`
///         Ok(old.value(&done))
///     })
/// }
/// ```
/// ```compile_fail
/// # use chan_core::{Window, WindowError, backend::RawWindow};
/// fn buffer_before_flush<R: RawWindow>(win: &mut Window<R, u64>) -> Result<u64, WindowError> {
///     let mut buf = vec![0u64; 4];
///     win.epoch(|ep| {
///         let _pending = ep.get_into(1, 0, &mut buf)?;
///         Ok(buf[0]) // still borrowed by the get in flight
///     })
/// }
/// ```
/// ```compile_fail
/// # use chan_core::{Window, WindowError, backend::RawWindow};
/// fn handle_escapes<R: RawWindow>(win: &mut Window<R, u64>) {
///     let h = win.epoch(|ep| ep.fetch_add(0, 0, 1)); // a handle cannot leave its epoch
/// }
/// ```
///
/// ## Memory model
/// This is the one place the model is stated; each backend's mapping is in
/// docs/architecture.md ("One-sided windows").
///
/// 1. **Creation is collective and agreed.** Every rank calls [`Windows::window`] with the same
///    length and word type, in the same order as every other collective call. If any rank
///    asked for something else, every rank gets the same [`CreateError::WindowMismatch`]
///    naming rank 0's request and the first rank that differs; nobody allocates. Freeing
///    ([`Window::free`], or dropping the window) is collective too, as `MPI_Win_free` and
///    `shmem_free` are: every rank frees at the same point of the program.
/// 2. **Every access is checked.** The target rank and the words touched are checked
///    against the world and the window before any call reaches the backend: out of range is
///    [`WindowError::OutOfRange`] or [`WindowError::BadTarget`], never a write elsewhere.
/// 3. **Blocking operations are complete at the target when they return**: a `put`'s words
///    are in the target's memory, a `get`'s and an atomic's result in the caller's hands.
///    (MPI: the operation, then `MPI_Win_flush(target)`; SHMEM: `shmem_getmem` and the
///    fetching atomics return complete, a put is followed by `shmem_quiet`.)
/// 4. **Non-blocking operations live in an epoch** ([`Window::epoch`]) and complete at its
///    [`Epoch::flush`] or at its end. A non-blocking get's or atomic's result is a
///    [`PendingWord`] or [`PendingGet`] that yields its value only against a [`Flushed`]
///    made after it: reading early does not compile. A non-blocking put's source and a get's
///    destination stay borrowed until the epoch ends, which always flushes (even on an
///    error or a panic), so no buffer is touched by the network after Rust can reuse it.
/// 5. **Atomicity.** `compare_and_swap` and `fetch_add` on one word are atomic with respect
///    to each other when every concurrent update of that word uses the same one of them
///    (MPI's default `accumulate_ops = same_op_no_op`; the threads and SHMEM backends are
///    stronger). `put` and `get` are not atomic with respect to concurrent atomics on the
///    same word, and a put may be seen part-written by a concurrent get or `read_local` (a
///    bulk transfer is a memcpy on one node and may even tear a word; Rust only ever reads
///    window memory through atomics, so this is a stale or mixed value, never undefined
///    behaviour). To read words other ranks update,
///    separate the phases with [`Window::fence`], or read them with an atomic
///    (`fetch_add(.., 0)`, or a `compare_and_swap` that cannot match).
/// 6. **Ordering between ranks** comes from [`Window::fence`] (collective: every rank's
///    operations so far are complete at their targets, then a barrier): after it, every
///    rank's [`get`](Window::get)s and [`read_local`](Window::read_local) see everything
///    written before it. Two operations of one rank to one target are not ordered unless a
///    flush (or a blocking operation) separates them.
/// 7. **Local memory is read through [`Window::read_local`]** (atomic loads of this rank's
///    words), never through a plain reference: another rank may be writing it at any time.
///
/// A window holds `len()` words of `T` on every rank.
///
/// Dropping a window frees it collectively, as [`Window::free`] does (without the error);
/// a rank unwinding from a panic leaks it instead of waiting for the others.
pub struct Window<R: RawWindow, T: Word> {
    raw: R,
    rank: usize,
    size: usize,
    len: usize,
    slots: Slots,
    /// An epoch started an operation that no flush has completed yet.
    dirty: bool,
    freed: bool,
    _word: PhantomData<T>,
}

impl<R: RawWindow, T: Word> std::fmt::Debug for Window<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("backend", &R::NAME)
            .field("word", &T::NAME)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("len", &self.len)
            .finish()
    }
}

impl<R: RawWindow, T: Word> Window<R, T> {
    /// Words of `T` per rank.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (a window holds at least one word).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the window's world.
    pub fn size(&self) -> usize {
        self.size
    }

    fn span(&self, target: usize, offset: usize, count: usize) -> Result<Span, WindowError> {
        Span::checked(target, offset, count, self.size, self.len)
    }

    /// Write `src` to words `offset..` of `target`; complete at the target on return.
    pub fn put(&mut self, target: usize, offset: usize, src: &[T]) -> Result<(), WindowError> {
        let at = self.span(target, offset, src.len())?;
        // SAFETY: checked range; src is borrowed until the flush below returns.
        unsafe { self.raw.put(at, as_words(src).as_ptr())? };
        Ok(self.raw.flush(target)?)
    }

    /// Read words `offset..offset + dst.len()` of `target` into `dst`.
    pub fn get(&mut self, target: usize, offset: usize, dst: &mut [T]) -> Result<(), WindowError> {
        let at = self.span(target, offset, dst.len())?;
        // SAFETY: checked range; dst is borrowed mutably (nothing else touches it) until
        // get_now, which completes the get, returns; any bits are a valid T (Word's contract).
        unsafe { self.raw.get_now(at, dst.as_mut_ptr().cast::<u64>())? };
        Ok(())
    }

    /// Word `offset` of `target`.
    pub fn load(&mut self, target: usize, offset: usize) -> Result<T, WindowError> {
        let mut v = [T::from_bits(0)];
        self.get(target, offset, &mut v)?;
        Ok(v[0])
    }

    /// Atomically: if word `offset` of `target` equals `expected`, make it `new`. Returns the
    /// word's old value (equal to `expected` when the swap happened). Floats compare by bits.
    pub fn compare_and_swap(
        &mut self,
        target: usize,
        offset: usize,
        expected: T,
        new: T,
    ) -> Result<T, WindowError> {
        let at = self.span(target, offset, 1)?;
        let mut op = WordOp::swap(expected, new);
        // SAFETY: checked range; op lives on this frame until the flush below returns.
        unsafe { self.raw.compare_and_swap(at, &mut op)? };
        self.raw.flush(target)?;
        Ok(T::from_bits(op.result))
    }

    /// Make the window's memory at every rank agree: every rank's operations so far are
    /// complete at their targets when any rank returns. Collective.
    pub fn fence(&mut self) -> Result<(), WindowError> {
        Ok(self.raw.fence()?)
    }

    /// Complete every operation this rank started (a no-op after blocking operations, which
    /// complete on return; an epoch flushes on its own).
    pub fn flush_all(&mut self) -> Result<(), WindowError> {
        Ok(self.raw.flush_all()?)
    }

    /// This rank's words, as they are now (atomic loads; after [`Window::fence`], with every
    /// rank's earlier operations in them). `out.len()` must be `len()`.
    pub fn read_local(&mut self, out: &mut [T]) -> Result<(), WindowError> {
        assert_eq!(
            out.len(),
            self.len,
            "read_local: out holds the window's words"
        );
        // SAFETY: Word's contract: out may be viewed as [u64] of the same length; it is
        // borrowed mutably for the call.
        let words =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u64>(), out.len()) };
        Ok(self.raw.read_local(words)?)
    }

    /// Run `f` with an [`Epoch`] of non-blocking operations; every operation started in it is
    /// complete when this returns, even if `f` fails or panics. `'env` is the life of the
    /// buffers the epoch borrows (put sources, get destinations), as in
    /// [`std::thread::scope`].
    pub fn epoch<'env, F, Out>(&mut self, f: F) -> Result<Out, WindowError>
    where
        F: for<'s> FnOnce(&mut Epoch<'s, 'env, R, T>) -> Result<Out, WindowError>,
    {
        self.slots.used = 0;
        self.dirty = false;
        let mut guard = FlushGuard {
            raw: &mut self.raw,
            done: false,
        };
        let out = f(&mut Epoch {
            raw: &mut *guard.raw,
            slots: &mut self.slots,
            dirty: &mut self.dirty,
            size: self.size,
            len: self.len,
            _brand: PhantomData,
            _env: PhantomData,
        });
        guard.done = true;
        // Nothing to complete when the last thing the epoch did was a flush.
        let flushed = if self.dirty {
            guard.raw.flush_all()
        } else {
            Ok(())
        };
        let out = out?;
        flushed?;
        Ok(out)
    }

    /// Collective: complete everything and release the window on every rank.
    pub fn free(mut self) -> Result<(), CommError> {
        self.freed = true;
        self.raw.free()
    }
}

impl<R: RawWindow, T: IntWord> Window<R, T> {
    /// Atomically add `delta` (wrapping) to word `offset` of `target`; returns its old value.
    pub fn fetch_add(&mut self, target: usize, offset: usize, delta: T) -> Result<T, WindowError> {
        let at = self.span(target, offset, 1)?;
        let mut op = WordOp::add(delta);
        // SAFETY: checked range; op lives on this frame until the flush below returns.
        unsafe { self.raw.fetch_add(at, &mut op)? };
        self.raw.flush(target)?;
        Ok(T::from_bits(op.result))
    }
}

impl<R: RawWindow, T: Word> Drop for Window<R, T> {
    fn drop(&mut self) {
        if self.freed {
            return;
        }
        if std::thread::panicking() {
            self.raw.abandon();
            return;
        }
        if let Err(e) = self.raw.free() {
            eprintln!("aiac ({}): freeing a window: {e}", R::NAME);
        }
    }
}
