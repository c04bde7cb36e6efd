//! The table: keys and values in one window of 8-byte words, a slot of one key word (and one
//! value word unless the value is `()`) per `slots_per_rank` on every rank.
//!
//! Slot `g` of all (`0..size × slots_per_rank`) is slot `g % slots_per_rank` of rank
//! `g / slots_per_rank`; a key's probe sequence starts at its hash and steps on by one slot,
//! across rank boundaries, wrapping at the end. A key word of 0 is an empty slot.

use crate::hash::fmix64;
use chan_core::backend::RawWindow;
use chan_core::traits::*;
use chan_core::{LockedWindow, TargetLock, Window, WindowError};
use std::marker::PhantomData;

#[cfg(test)]
mod test;

/// How a rank claims a slot (the benchmark's `insert` setting).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Insert {
    /// Compare-and-swap of the slot (`MPI_Compare_and_swap`, `shmem_atomic_compare_swap`).
    ///
    /// The key word is swapped in and the value written after it: a [`Table::fence`] after
    /// the inserts makes the values visible to every rank.
    #[default]
    Cas,
    /// Under the owner's exclusive lock: read the slot, write it if empty
    /// (`MPI_Win_lock(MPI_LOCK_EXCLUSIVE)`, `shmem_set_lock`).
    ///
    /// Key and value are written together. A probe sequence that crosses into the next
    /// rank's slots releases the lock and takes that rank's (one lock at a time: no rank
    /// waits for a lock while holding one).
    Lock,
}

impl Insert {
    /// The name (`cas`, `lock`), as serialised.
    pub fn name(self) -> &'static str {
        match self {
            Insert::Cas => "cas",
            Insert::Lock => "lock",
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for u64 {}
    impl Sealed for i64 {}
    impl Sealed for f64 {}
}

/// What a key maps to: `()` (the table is a set: no value word), or an 8-byte word (`u64`,
/// `i64`, `f64`). Sealed.
pub trait Value: Copy + sealed::Sealed + std::fmt::Debug + 'static {
    /// Words a slot holds for the value: 0 or 1.
    const WORDS: usize;
    /// The value's bits.
    fn to_bits(self) -> u64;
    /// The value with these bits.
    fn from_bits(bits: u64) -> Self;
}

impl Value for () {
    const WORDS: usize = 0;
    fn to_bits(self) -> u64 {
        0
    }
    fn from_bits(_: u64) -> Self {}
}

macro_rules! word_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            const WORDS: usize = 1;
            fn to_bits(self) -> u64 {
                Word::to_bits(self)
            }
            fn from_bits(bits: u64) -> Self {
                Word::from_bits(bits)
            }
        }
    )*};
}
word_value!(u64, i64, f64);

/// What can fail on a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The slots per rank: 0, or more words than a window can count.
    #[error("slots per rank {0}: must be at least 1, and its words fit a usize")]
    SlotsPerRank(usize),
    /// A key whose bits are 0: that word marks an empty slot.
    #[error("key 0: a key word of 0 marks an empty slot, so keys must be nonzero")]
    ZeroKey,
    /// Every slot of the table holds another key.
    #[error("the table is full: its {slots} slots all hold other keys")]
    Full {
        /// Slots of every rank.
        slots: u64,
    },
    /// The window under the table (creation, a one-sided operation, a fence, freeing it).
    #[error(transparent)]
    Window(#[from] WindowError),
}

impl From<chan_core::CreateError> for TableError {
    fn from(e: chan_core::CreateError) -> Self {
        TableError::Window(e.into())
    }
}

impl From<chan_core::CommError> for TableError {
    fn from(e: chan_core::CommError) -> Self {
        TableError::Window(e.into())
    }
}

/// An insert's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The key was there already (its value is left as it was).
    pub present: bool,
    /// Slots holding other keys met before the key's slot.
    pub collisions: u64,
}

/// A lookup's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found<V> {
    /// The key's value, or None when the key is not in the table.
    pub value: Option<V>,
    /// Slots read.
    pub reads: u64,
}

/// The window under a table: atomic (compare-and-swap) or reached under locks.
enum Slots<R: RawWindow> {
    Atomic(Window<R, u64>),
    Locked(LockedWindow<R, u64>),
}

/// A distributed hash table of `K` keys (nonzero `u64` or `i64`) to `V` values over a
/// backend's window `R`, spread over every rank: open addressing with linear probing, no
/// removal. Any rank inserts and looks up any key; [`Table::fence`] (collective) completes
/// every rank's operations so far. An insert of a key already present leaves its value.
pub struct Table<R: RawWindow, K: IntWord, V: Value = ()> {
    slots: Slots<R>,
    per_rank: usize,
    all: u64,
    _kv: PhantomData<fn() -> (K, V)>,
}

/// A distributed set: a table without values.
pub type Set<R, K> = Table<R, K, ()>;

/// Words per slot of a table of `V`.
const fn words<V: Value>() -> usize {
    1 + V::WORDS
}

impl<R: RawWindow, K: IntWord, V: Value> Table<R, K, V> {
    /// Collectively create a table of `slots_per_rank` slots on every rank (a key and, unless
    /// `V` is `()`, its value each), empty, whose inserts claim a slot as `insert` says. Every
    /// rank must ask for the same table.
    pub fn new<C>(ctx: &mut C, slots_per_rank: usize, insert: Insert) -> Result<Self, TableError>
    where
        C: Windows<Raw = R>,
    {
        let bad = TableError::SlotsPerRank(slots_per_rank);
        if slots_per_rank == 0 {
            return Err(bad);
        }
        let len = slots_per_rank
            .checked_mul(words::<V>())
            .ok_or(bad.clone())?;
        let all = slots_per_rank.checked_mul(ctx.size()).ok_or(bad)? as u64;
        let slots = match insert {
            Insert::Cas => Slots::Atomic(ctx.window(len)?),
            Insert::Lock => Slots::Locked(ctx.locked_window(len)?),
        };
        Ok(Table {
            slots,
            per_rank: slots_per_rank,
            all,
            _kv: PhantomData,
        })
    }

    /// Slots on each rank.
    pub fn slots_per_rank(&self) -> usize {
        self.per_rank
    }

    /// Slots of every rank.
    pub fn slots(&self) -> u64 {
        self.all
    }

    /// How inserts claim a slot.
    pub fn insert_mode(&self) -> Insert {
        match self.slots {
            Slots::Atomic(_) => Insert::Cas,
            Slots::Locked(_) => Insert::Lock,
        }
    }

    /// The slot a key's probe sequence starts at: MurmurHash3's 64-bit finaliser of its bits,
    /// modulo the slots.
    pub fn home(&self, key: K) -> u64 {
        fmix64(key.to_bits()) % self.all
    }

    /// `key`'s probe sequence.
    fn seq(&self, key: K) -> Seq {
        Seq {
            g: self.home(key),
            per_rank: self.per_rank,
            all: self.all,
        }
    }

    // `insert` and `find`, and the walks under them, are inlined whole into the caller's loop:
    // called, they spent about 40 instructions an operation on saving registers and passing
    // results through memory (callgrind, one thread rank: 19% more than the CLI's former
    // table; inlined, 4%).

    /// Put `key` with `value` in the first empty slot of its probe sequence, unless the key is
    /// there already. [`TableError::Full`] when the sequence met every slot.
    #[inline(always)]
    pub fn insert(&mut self, key: K, value: V) -> Result<Placed, TableError> {
        let slot = [nonzero(key)?, value.to_bits()];
        let seq = self.seq(key);
        insert::<R, V>(&mut self.slots, slot, seq)
    }

    /// Look `key` up: its value (None when absent) and the slots read. The probe sequence
    /// ends at the key or at the first empty slot.
    #[inline(always)]
    pub fn find(&mut self, key: K) -> Result<Found<V>, TableError> {
        let k = nonzero(key)?;
        let seq = self.seq(key);
        let (value, reads) = find::<R, V>(&mut self.slots, k, seq)?;
        Ok(Found {
            value: value.map(V::from_bits),
            reads,
        })
    }

    /// The value of `key`, or None when it is not in the table.
    #[inline]
    pub fn get(&mut self, key: K) -> Result<Option<V>, TableError> {
        Ok(self.find(key)?.value)
    }

    /// Whether `key` is in the table.
    #[inline]
    pub fn contains(&mut self, key: K) -> Result<bool, TableError> {
        Ok(self.find(key)?.value.is_some())
    }

    /// Collective: every rank's operations so far are complete in the table when any rank
    /// returns.
    pub fn fence(&mut self) -> Result<(), TableError> {
        match &mut self.slots {
            Slots::Atomic(w) => w.fence()?,
            Slots::Locked(w) => w.fence()?,
        }
        Ok(())
    }

    /// Keys held in this rank's slots (reads a copy of them: one word per slot's word).
    pub fn local_len(&mut self) -> Result<usize, TableError> {
        let mut local = vec![0u64; self.per_rank * words::<V>()];
        match &mut self.slots {
            Slots::Atomic(w) => w.read_local(&mut local)?,
            Slots::Locked(w) => w.read_local(&mut local)?,
        }
        Ok(local
            .iter()
            .step_by(words::<V>())
            .filter(|&&k| k != 0)
            .count())
    }

    /// Collectively free the table's window.
    pub fn free(self) -> Result<(), TableError> {
        match self.slots {
            Slots::Atomic(w) => w.free()?,
            Slots::Locked(w) => w.free()?,
        }
        Ok(())
    }
}

/// The key's bits, unless 0.
fn nonzero<K: IntWord>(key: K) -> Result<u64, TableError> {
    match key.to_bits() {
        0 => Err(TableError::ZeroKey),
        k => Ok(k),
    }
}

/// A key's probe sequence: the slot it is at (of all), the slots per rank and of all.
#[derive(Debug, Clone, Copy)]
struct Seq {
    g: u64,
    per_rank: usize,
    all: u64,
}

impl Seq {
    /// The slot it is at: (rank, slot).
    fn at(self) -> (usize, usize) {
        let per_rank = self.per_rank as u64;
        ((self.g / per_rank) as usize, (self.g % per_rank) as usize)
    }

    /// On to the next slot, across rank boundaries, wrapping at the end.
    fn step(&mut self) {
        self.g = (self.g + 1) % self.all;
    }
}

/// Walk `seq` over an atomic window until `visit` (given the rank and slot) answers, at most
/// once round the table. Returns the answer (None when none came) and the slots visited.
#[inline(always)]
fn walk_atomic<R: RawWindow, Out>(
    win: &mut Window<R, u64>,
    mut seq: Seq,
    mut visit: impl FnMut(&mut Window<R, u64>, usize, usize) -> Result<Option<Out>, WindowError>,
) -> Result<(Option<Out>, u64), TableError> {
    for steps in 1..=seq.all {
        let (t, s) = seq.at();
        if let Some(out) = visit(win, t, s)? {
            return Ok((Some(out), steps));
        }
        seq.step();
    }
    Ok((None, seq.all))
}

/// Walk `seq` over a locked window as [`walk_atomic`] does, each rank's run of it under that
/// rank's lock, released before the next rank's is taken (one lock at a time: no rank waits
/// for a lock while holding one). A slot taken between two locks is simply read under the
/// next.
#[inline(always)]
fn walk_locked<R: RawWindow, Out>(
    win: &mut LockedWindow<R, u64>,
    mut seq: Seq,
    mut visit: impl FnMut(&mut TargetLock<'_, R, u64>, usize) -> Result<Option<Out>, WindowError>,
) -> Result<(Option<Out>, u64), TableError> {
    let mut steps = 0u64;
    while steps < seq.all {
        let (t, mut s) = seq.at();
        let mut l = win.lock(t)?;
        loop {
            steps += 1;
            if let Some(out) = visit(&mut l, s)? {
                l.unlock()?;
                return Ok((Some(out), steps));
            }
            seq.step();
            s += 1;
            if s == seq.per_rank || steps == seq.all {
                break; // on into the next rank's slots, under its lock
            }
        }
        l.unlock()?;
    }
    Ok((None, steps))
}

/// What a probe sequence's slot says of `key` on the way to insert it: Some(present) to stop
/// there, None to go on.
fn claim(key: u64, found: u64) -> Option<bool> {
    (found == 0 || found == key).then_some(found == key)
}

/// What a slot `[key word, value word]` says of `key` on the way to find it: Some(value or
/// None) to stop there (the key, or an empty slot: not in the table), None to go on.
fn look(key: u64, slot: [u64; 2]) -> Option<Option<u64>> {
    match slot[0] {
        k if k == key => Some(Some(slot[1])),
        0 => Some(None),
        _ => None,
    }
}

/// Insert `slot` (key, then value, unless `V` is `()`) along `seq`. Generic over `V` so that
/// the words per slot are a constant in the loop.
#[inline(always)]
fn insert<R: RawWindow, V: Value>(
    slots: &mut Slots<R>,
    slot: [u64; 2],
    seq: Seq,
) -> Result<Placed, TableError> {
    let (key, w) = (slot[0], words::<V>());
    let (present, steps) = match slots {
        // Claim the key word by compare-and-swap, then write the value.
        Slots::Atomic(win) => walk_atomic(win, seq, |win, t, s| {
            let present = claim(key, win.compare_and_swap(t, s * w, 0, key)?);
            if present == Some(false) && w > 1 {
                win.put(t, s * w + 1, &slot[1..w])?;
            }
            Ok(present)
        })?,
        // Read the key word, and write key and value together into an empty slot.
        Slots::Locked(win) => walk_locked(win, seq, |l, s| {
            let present = claim(key, l.load(s * w)?);
            if present == Some(false) {
                l.put(s * w, &slot[..w])?;
            }
            Ok(present)
        })?,
    };
    match present {
        // Every slot before the key's held another key.
        Some(present) => Ok(Placed {
            present,
            collisions: steps - 1,
        }),
        None => Err(TableError::Full { slots: seq.all }),
    }
}

/// Look `key` up along `seq`: its value word (None when absent) and the slots read.
#[inline(always)]
fn find<R: RawWindow, V: Value>(
    slots: &mut Slots<R>,
    key: u64,
    seq: Seq,
) -> Result<(Option<u64>, u64), TableError> {
    let w = words::<V>();
    let mut slot = [0u64; 2];
    let (value, reads) = match slots {
        Slots::Atomic(win) => walk_atomic(win, seq, |win, t, s| {
            win.get(t, s * w, &mut slot[..w])?;
            Ok(look(key, slot))
        })?,
        Slots::Locked(win) => walk_locked(win, seq, |l, s| {
            l.get(s * w, &mut slot[..w])?;
            Ok(look(key, slot))
        })?,
    };
    Ok((value.flatten(), reads))
}
