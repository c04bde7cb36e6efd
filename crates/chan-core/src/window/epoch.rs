//! An epoch of non-blocking operations on a [`Window`](super::Window): the stable storage of
//! its atomics' results, and the handles that read them once a flush completed them.

use super::word::{as_words, IntWord, Word};
use super::{checked_target, RawWindow, Span, WindowError, WordOp};
use crate::error::CommError;
use std::cell::UnsafeCell;
use std::marker::PhantomData;

/// Words of atomic results per block of [`Slots`].
const BLOCK: usize = 256;

/// Stable storage for the operands and results of an epoch's atomics: blocks that never move
/// once allocated (the backend writes a result at completion), reused by later epochs.
#[derive(Default)]
pub(super) struct Slots {
    blocks: Vec<Box<[UnsafeCell<WordOp>; BLOCK]>>,
    pub(super) used: usize,
}

impl Slots {
    /// The next slot, holding `op`.
    #[inline]
    fn next(&mut self, op: WordOp) -> (usize, *mut WordOp) {
        let i = self.used;
        if i / BLOCK == self.blocks.len() {
            self.grow();
        }
        self.used += 1;
        let p = self.blocks[i / BLOCK][i % BLOCK].get();
        // SAFETY: slot i was not handed out in this epoch (used grows), so no operation
        // writes it; the pointer comes from the UnsafeCell.
        unsafe { p.write(op) };
        (i, p)
    }

    /// One more block (once per BLOCK atomics of the window's busiest epoch so far).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.blocks.push(Box::new(std::array::from_fn(|_| {
            UnsafeCell::new(WordOp::default())
        })));
    }

    /// The result in slot `i` (after a flush covering it).
    #[inline]
    fn result(&self, i: usize) -> u64 {
        // SAFETY: slot i was handed out in this epoch and a flush completed since (the
        // caller holds a Flushed), so the backend no longer writes it.
        unsafe { (*self.blocks[i / BLOCK][i % BLOCK].get()).result }
    }
}
/// Flushes the window when an epoch ends by a panic (the normal end flushes explicitly, to
/// report the error).
pub(super) struct FlushGuard<'a, R: RawWindow> {
    pub(super) raw: &'a mut R,
    pub(super) done: bool,
}

impl<R: RawWindow> Drop for FlushGuard<'_, R> {
    fn drop(&mut self) {
        if !self.done {
            // Unwinding: the borrowed buffers are about to be released; complete every
            // operation that still uses them first.
            if let Err(e) = self.raw.flush_all() {
                eprintln!("aiac ({}): flushing a window while unwinding: {e}", R::NAME);
            }
        }
    }
}

/// Non-blocking operations on a [`Window`], completed by [`Epoch::flush`] or at the end of
/// [`Window::epoch`]. `'s` brands the epoch (a handle of one epoch cannot be read with
/// another's [`Flushed`]); `'env` is the life of the buffers it borrows.
pub struct Epoch<'s, 'env, R: RawWindow, T: Word> {
    pub(super) raw: &'s mut R,
    pub(super) slots: &'s mut Slots,
    pub(super) dirty: &'s mut bool,
    pub(super) size: usize,
    pub(super) len: usize,
    pub(super) _brand: PhantomData<fn(&'s ()) -> &'s ()>,
    pub(super) _env: PhantomData<(&'env mut &'env (), T)>,
}

/// The proof that every operation of an epoch started before it is complete: made by
/// [`Epoch::flush`], it borrows the epoch, so no operation can start while it lives, and
/// every handle it reads was made before it.
pub struct Flushed<'s, 'e> {
    slots: &'e Slots,
    _brand: PhantomData<fn(&'s ()) -> &'s ()>,
}

/// The result of a non-blocking atomic or one-word get: readable with a [`Flushed`] of the
/// same epoch made after it.
#[must_use = "the result is readable only after a flush: call .value(&flushed)"]
pub struct PendingWord<'s, T: Word> {
    slot: usize,
    _brand: PhantomData<fn(&'s ()) -> &'s ()>,
    _word: PhantomData<T>,
}

impl<'s, T: Word> PendingWord<'s, T> {
    /// The operation's result (an atomic's old value, or the word read).
    pub fn value(self, done: &Flushed<'s, '_>) -> T {
        T::from_bits(done.slots.result(self.slot))
    }
}

/// A non-blocking get into a borrowed buffer: the buffer comes back, filled, with a
/// [`Flushed`] of the same epoch made after it.
#[must_use = "the buffer is readable only after a flush: call .into_slice(&flushed)"]
pub struct PendingGet<'s, 'env, T: Word> {
    dst: &'env mut [T],
    _brand: PhantomData<fn(&'s ()) -> &'s ()>,
}

impl<'s, 'env, T: Word> PendingGet<'s, 'env, T> {
    /// The filled buffer.
    pub fn into_slice(self, _done: &Flushed<'s, '_>) -> &'env mut [T] {
        self.dst
    }
}

impl<'s, 'env, R: RawWindow, T: Word> Epoch<'s, 'env, R, T> {
    fn span(&self, target: usize, offset: usize, count: usize) -> Result<Span, WindowError> {
        Span::checked(target, offset, count, self.size, self.len)
    }

    /// Start writing `src` to words `offset..` of `target`. `src` stays borrowed until the
    /// epoch ends.
    pub fn put(&mut self, target: usize, offset: usize, src: &'env [T]) -> Result<(), WindowError> {
        let at = self.span(target, offset, src.len())?;
        *self.dirty = true;
        // SAFETY: checked range; src is borrowed for 'env, which outlives the epoch, whose
        // end flushes every operation (FlushGuard even when unwinding).
        unsafe { self.raw.put(at, as_words(src).as_ptr())? };
        Ok(())
    }

    /// Start reading words `offset..offset + dst.len()` of `target` into `dst`.
    pub fn get_into(
        &mut self,
        target: usize,
        offset: usize,
        dst: &'env mut [T],
    ) -> Result<PendingGet<'s, 'env, T>, WindowError> {
        let at = self.span(target, offset, dst.len())?;
        *self.dirty = true;
        // SAFETY: checked range; dst is borrowed mutably for 'env by the handle (nothing
        // else reads it; the handle gives it back only with a Flushed made after this
        // call), and the epoch's end flushes before 'env can end. Any bits are a valid T.
        unsafe { self.raw.get(at, dst.as_mut_ptr().cast::<u64>())? };
        Ok(PendingGet {
            dst,
            _brand: PhantomData,
        })
    }

    /// Start reading word `offset` of `target`.
    pub fn get(&mut self, target: usize, offset: usize) -> Result<PendingWord<'s, T>, WindowError> {
        let at = self.span(target, offset, 1)?;
        let (slot, op) = self.slots.next(WordOp::default());
        *self.dirty = true;
        // SAFETY: checked range; the slot's `result` is a stable u64 nothing else touches
        // until a flush (Slots never move; handed out once per epoch).
        unsafe { self.raw.get(at, std::ptr::addr_of_mut!((*op).result))? };
        Ok(pending(slot))
    }

    /// Start an atomic compare-and-swap (see [`Window::compare_and_swap`]).
    pub fn compare_and_swap(
        &mut self,
        target: usize,
        offset: usize,
        expected: T,
        new: T,
    ) -> Result<PendingWord<'s, T>, WindowError> {
        let op = WordOp::swap(expected, new);
        self.start_atomic(target, offset, op, R::compare_and_swap)
    }

    /// Start the atomic `start` on word `offset` of `target`, its operands `op` in a slot of
    /// their own.
    fn start_atomic(
        &mut self,
        target: usize,
        offset: usize,
        op: WordOp,
        start: unsafe fn(&mut R, Span, *mut WordOp) -> Result<(), CommError>,
    ) -> Result<PendingWord<'s, T>, WindowError> {
        let at = self.span(target, offset, 1)?;
        let (slot, op) = self.slots.next(op);
        *self.dirty = true;
        // SAFETY: checked range; the slot is stable and untouched until a flush (Slots never
        // move; handed out once per epoch).
        unsafe { start(self.raw, at, op)? };
        Ok(pending(slot))
    }

    /// Complete every operation started so far in this epoch; their handles become readable.
    pub fn flush(&mut self) -> Result<Flushed<'s, '_>, WindowError> {
        self.raw.flush_all()?;
        *self.dirty = false;
        Ok(Flushed {
            slots: self.slots,
            _brand: PhantomData,
        })
    }

    /// Complete every operation started so far to `target` (the others may still be in
    /// flight); handles to other targets must wait for a full [`Epoch::flush`].
    pub fn flush_target(&mut self, target: usize) -> Result<(), WindowError> {
        Ok(self.raw.flush(checked_target(target, self.size)?)?)
    }
}

impl<'s, 'env, R: RawWindow, T: IntWord> Epoch<'s, 'env, R, T> {
    /// Start an atomic wrapping add (see [`Window::fetch_add`]).
    pub fn fetch_add(
        &mut self,
        target: usize,
        offset: usize,
        delta: T,
    ) -> Result<PendingWord<'s, T>, WindowError> {
        self.start_atomic(target, offset, WordOp::add(delta), R::fetch_add)
    }
}

fn pending<'s, T: Word>(slot: usize) -> PendingWord<'s, T> {
    PendingWord {
        slot,
        _brand: PhantomData,
        _word: PhantomData,
    }
}
