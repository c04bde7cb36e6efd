//! The table: keys and values in one window of 8-byte words, a slot of one key word (and one
//! value word unless the value is `()`) per `slots_per_rank` on every rank.
//!
//! Slot `g` of all (`0..size × slots_per_rank`) is slot `g % slots_per_rank` of rank
//! `g / slots_per_rank`; a key's probe sequence starts at its hash and steps on by one slot,
//! across rank boundaries, wrapping at the end. A key word of 0 is an empty slot.

use crate::hash::fmix64;
use chan_core::backend::RawWindow;
use chan_core::traits::*;
use chan_core::{LockedWindow, Window, WindowError};
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
    /// Compare-and-swap of the slot's key word (`MPI_Compare_and_swap`,
    /// `shmem_atomic_compare_swap`). A value is written after its key: a [`Table::fence`]
    /// after the inserts makes it visible to every rank.
    #[default]
    Cas,
    /// Under the owner's exclusive lock: read the slot, write key and value if it is empty
    /// (`MPI_Win_lock(MPI_LOCK_EXCLUSIVE)`, `shmem_set_lock`). A probe sequence that crosses
    /// into the next rank's slots releases the lock and takes that rank's (one lock at a
    /// time: no rank waits for a lock while holding one).
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

    /// Put `key` with `value` in the first empty slot of its probe sequence, unless the key is
    /// there already. [`TableError::Full`] when the sequence met every slot.
    pub fn insert(&mut self, key: K, value: V) -> Result<Placed, TableError> {
        let k = nonzero(key)?;
        let g = self.home(key);
        let (per_rank, all) = (self.per_rank, self.all);
        let slot = [k, value.to_bits()];
        let slot = &slot[..words::<V>()];
        match &mut self.slots {
            Slots::Atomic(w) => insert_atomic(w, slot, g, per_rank, all),
            Slots::Locked(w) => insert_locked(w, slot, g, per_rank, all),
        }
    }

    /// Look `key` up: its value (None when absent) and the slots read. The probe sequence
    /// ends at the key or at the first empty slot.
    pub fn find(&mut self, key: K) -> Result<Found<V>, TableError> {
        let k = nonzero(key)?;
        let g = self.home(key);
        let (per_rank, all) = (self.per_rank, self.all);
        let (value, reads) = match &mut self.slots {
            Slots::Atomic(w) => find_atomic(w, k, words::<V>(), g, per_rank, all)?,
            Slots::Locked(w) => find_locked(w, k, words::<V>(), g, per_rank, all)?,
        };
        Ok(Found {
            value: value.map(V::from_bits),
            reads,
        })
    }

    /// The value of `key`, or None when it is not in the table.
    pub fn get(&mut self, key: K) -> Result<Option<V>, TableError> {
        Ok(self.find(key)?.value)
    }

    /// Whether `key` is in the table.
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

/// Slot `g` of all: (rank, slot).
fn at(g: u64, per_rank: usize) -> (usize, usize) {
    (
        (g / per_rank as u64) as usize,
        (g % per_rank as u64) as usize,
    )
}

/// [`Insert::Cas`]: claim the key word by compare-and-swap, then write the value.
fn insert_atomic<R: RawWindow>(
    win: &mut Window<R, u64>,
    slot: &[u64],
    mut g: u64,
    per_rank: usize,
    all: u64,
) -> Result<Placed, TableError> {
    let (key, w) = (slot[0], slot.len());
    let mut collisions = 0;
    for _ in 0..all {
        let (t, s) = at(g, per_rank);
        let old = win.compare_and_swap(t, s * w, 0, key)?;
        if old == 0 {
            if w > 1 {
                win.put(t, s * w + 1, &slot[1..])?;
            }
            return Ok(Placed {
                present: false,
                collisions,
            });
        }
        if old == key {
            return Ok(Placed {
                present: true,
                collisions,
            });
        }
        collisions += 1;
        g = (g + 1) % all;
    }
    Err(TableError::Full { slots: all })
}

/// [`Insert::Cas`]'s lookup: one get of the slot's words per step.
fn find_atomic<R: RawWindow>(
    win: &mut Window<R, u64>,
    key: u64,
    w: usize,
    mut g: u64,
    per_rank: usize,
    all: u64,
) -> Result<(Option<u64>, u64), TableError> {
    let mut slot = [0u64; 2];
    let mut reads = 0;
    for _ in 0..all {
        let (t, s) = at(g, per_rank);
        win.get(t, s * w, &mut slot[..w])?;
        reads += 1;
        if slot[0] == key {
            return Ok((Some(slot[1]), reads));
        }
        if slot[0] == 0 {
            break; // an empty slot ends the probe sequence: not in the table
        }
        g = (g + 1) % all;
    }
    Ok((None, reads))
}

/// [`Insert::Lock`]: each rank's run of the probe sequence under that rank's lock, released
/// before the next rank's is taken. A slot taken between two locks is simply read under the
/// next.
fn insert_locked<R: RawWindow>(
    win: &mut LockedWindow<R, u64>,
    slot: &[u64],
    mut g: u64,
    per_rank: usize,
    all: u64,
) -> Result<Placed, TableError> {
    let (key, w) = (slot[0], slot.len());
    let (mut collisions, mut steps) = (0u64, 0u64);
    while steps < all {
        let (t, mut s) = at(g, per_rank);
        let mut l = win.lock(t)?;
        loop {
            let v = l.load(s * w)?;
            if v == 0 || v == key {
                if v == 0 {
                    l.put(s * w, slot)?;
                }
                l.unlock()?;
                return Ok(Placed {
                    present: v == key,
                    collisions,
                });
            }
            collisions += 1;
            steps += 1;
            g = (g + 1) % all;
            s += 1;
            if s == per_rank || steps == all {
                break; // on into the next rank's slots, under its lock
            }
        }
        l.unlock()?;
    }
    Err(TableError::Full { slots: all })
}

/// [`Insert::Lock`]'s lookup, under the locks as [`insert_locked`] takes them.
fn find_locked<R: RawWindow>(
    win: &mut LockedWindow<R, u64>,
    key: u64,
    w: usize,
    mut g: u64,
    per_rank: usize,
    all: u64,
) -> Result<(Option<u64>, u64), TableError> {
    let mut slot = [0u64; 2];
    let mut reads = 0u64;
    while reads < all {
        let (t, mut s) = at(g, per_rank);
        let mut l = win.lock(t)?;
        loop {
            l.get(s * w, &mut slot[..w])?;
            reads += 1;
            if slot[0] == key || slot[0] == 0 {
                l.unlock()?;
                return Ok(((slot[0] == key).then_some(slot[1]), reads));
            }
            g = (g + 1) % all;
            s += 1;
            if s == per_rank || reads == all {
                break;
            }
        }
        l.unlock()?;
    }
    Ok((None, reads))
}
