//! Pairwise channels over OpenSHMEM (chan-core's `Context::open_pair`; docs/architecture.md,
//! "Pairwise creation"). `shmem_malloc` is collective, so their memory is set aside in
//! advance: at init every PE allocates one symmetric **pool** (`AIAC_SHMEM_PAIR_POOL` bytes,
//! default 4 MiB, the largest any PE asked for). Its first words are the rendezvous slots,
//! [`MEET_WORDS`] per PE; the rest is carved, first fit, into the inbound regions of
//! pairwise ends and given back when an end goes after its peer's close landed (the peer
//! writes the region no more); a region whose peer has not closed yet waits in a list that
//! every later pairwise open sweeps.
//!
//! ## The rendezvous: one compare-and-swap decides
//! The slot for PE p on PE q (`slot(p)` at q) carries `[state, tag, nonce, offer…, vflag]`.
//! The higher rank h of a pair offers, the lower rank l takes:
//! * h puts `[tag, n, offer]` into `slot(h)` at l (n new on h), `shmem_fence`, then sets
//!   `state = n·4 + POSTED` there with an atomic set; then it waits until its own
//!   `slot(l).vflag` reads n.
//! * l polls its `slot(h).state` (an atomic fetch); on `POSTED` with its tag it swaps the
//!   state to `TAKEN` (`shmem_ulong_atomic_compare_swap` on its own memory), puts
//!   `[tag, n, its offer]` into `slot(l)` at h, `shmem_fence`, and puts `vflag = n`.
//! * At its deadline h swaps l's state from `POSTED` to `WITHDRAWN`. Exactly one of the two
//!   swaps succeeds: if l's did, h waits on for the verdict (l is putting it); if h's did, l
//!   never took the offer. A late l finds `WITHDRAWN` and times out in turn; a late h posts
//!   to an l that left, nobody takes it, and h withdraws at its own deadline.
//!
//! l writes nothing into h's memory before its swap succeeded, and h nothing into l's but its
//! own slot, so a timeout leaves nothing to clean up but the region, given back to the pool.

use crate::env::ShmemCtx;
use crate::sym::{atomic_at, fence, put, put_word, quiet, shmem_err, Sym};
use crate::vars::POOL_ENV;
use chan_core::backend::{PairOffer, CLOSE_WORD, OFFER_WORDS};
use chan_core::{ChannelSpec, CommError, CreateError};
use openshmem_sys as sys;
use std::cell::{Cell, RefCell};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const POOL_HINT: &str = "; set AIAC_SHMEM_PAIR_POOL (bytes per PE) for a larger pool";

/// Words of one rendezvous slot.
pub(crate) const MEET_WORDS: usize = 16;
const STATE: usize = 0;
const TAG: usize = 1;
const NONCE: usize = 2;
const OFFER_AT: usize = 3;
const VFLAG: usize = OFFER_AT + OFFER_WORDS;
const _: () = assert!(VFLAG < MEET_WORDS);

const POSTED: u64 = 1;
const TAKEN: u64 = 2;
const WITHDRAWN: u64 = 3;

/// One PE's pool of symmetric memory for pairwise channels (module docs).
pub(crate) struct Pool {
    mem: RefCell<Option<Sym<u64>>>,
    base: *mut u64,
    /// Words of the rendezvous slots, where the regions start.
    first: usize,
    words: usize,
    /// Free pieces (offset, words), by offset, neighbours merged.
    free: RefCell<Vec<(usize, usize)>>,
    /// Pieces given back before the peer's close landed.
    held: RefCell<Vec<(usize, usize)>>,
    nonce: Cell<u64>,
}

impl Pool {
    /// Collective: every PE calls it with the same `size` and `bytes`; the caller synchronises
    /// (a barrier) before any PE puts into it.
    pub(crate) fn new(size: usize, bytes: usize) -> Result<Self, CommError> {
        let first = (size * MEET_WORDS).div_ceil(8) * 8;
        let words = first + bytes / 8;
        let mem = Sym::<u64>::alloc_zeroed(words).map_err(|e| {
            shmem_err(
                "init",
                format!("setting aside {bytes} bytes for pairwise channels ({POOL_ENV}, 0 for none): {e}"),
            )
        })?;
        let base = mem.ptr();
        Ok(Pool {
            mem: RefCell::new(Some(mem)),
            base,
            first,
            words,
            free: RefCell::new(if words > first {
                vec![(first, words - first)]
            } else {
                Vec::new()
            }),
            held: RefCell::new(Vec::new()),
            nonce: Cell::new(0),
        })
    }

    /// Whether a region of `words` words at `off` lies in the regions' part of the pool.
    pub(crate) fn holds(&self, off: usize, words: usize) -> bool {
        off >= self.first && off.checked_add(words).is_some_and(|end| end <= self.words)
    }

    /// Bytes for regions.
    fn pool_bytes(&self) -> usize {
        (self.words - self.first) * 8
    }

    /// Collective, at finalize (see [`Sym::free`]).
    pub(crate) fn free(&self) {
        if let Some(m) = self.mem.borrow_mut().take() {
            m.free();
        }
    }

    /// Word `w` of the pool (a symmetric address).
    pub(crate) fn at(&self, w: usize) -> *mut u64 {
        assert!(w < self.words, "word {w} of a pool of {}", self.words);
        // SAFETY: w lies inside the pool's allocation of `words` words (asserted).
        unsafe { self.base.add(w) }
    }

    /// The rendezvous slot of PE `pe` (on whichever PE the address is used).
    fn slot(&self, pe: usize) -> Slot<'_> {
        Slot {
            p: self.at(pe * MEET_WORDS),
            _pool: std::marker::PhantomData,
        }
    }

    /// A free piece of `words` words (a multiple of 8: regions stay cache-line aligned), or
    /// the largest free piece's size.
    fn carve(&self, words: usize) -> Result<usize, usize> {
        self.sweep();
        let mut free = self.free.borrow_mut();
        match free.iter().position(|&(_, w)| w >= words) {
            Some(i) => {
                let (off, w) = free[i];
                if w == words {
                    free.remove(i);
                } else {
                    free[i] = (off + words, w - words);
                }
                Ok(off)
            }
            None => Err(free.iter().map(|&(_, w)| w).max().unwrap_or(0)),
        }
    }

    /// Back into the free list, merged with its neighbours.
    pub(crate) fn give_back(&self, off: usize, words: usize) {
        let mut free = self.free.borrow_mut();
        let i = free.partition_point(|&(o, _)| o < off);
        free.insert(i, (off, words));
        if i + 1 < free.len() && free[i].0 + free[i].1 == free[i + 1].0 {
            free[i].1 += free[i + 1].1;
            free.remove(i + 1);
        }
        if i > 0 && free[i - 1].0 + free[i - 1].1 == free[i].0 {
            free[i - 1].1 += free[i].1;
            free.remove(i);
        }
    }

    /// The end of a region went: the region is free once the peer's close landed in it.
    pub(crate) fn release(&self, off: usize, words: usize) {
        if self.peer_closed(off) {
            self.give_back(off, words);
        } else {
            self.held.borrow_mut().push((off, words));
        }
    }

    /// Free the held regions whose peer closed since.
    fn sweep(&self) {
        let held = std::mem::take(&mut *self.held.borrow_mut());
        for (off, words) in held {
            self.release(off, words);
        }
    }

    fn peer_closed(&self, off: usize) -> bool {
        // SAFETY: the region's control word lies in the live pool; the peer writes it only
        // with word puts, and this PE reads it only through atomics. Acquire: the peer fenced
        // its other puts into the region before this one.
        unsafe { atomic_at(self.at(off + CLOSE_WORD)) }.load(Ordering::Acquire) != 0
    }
}

/// A region of the pool, held by the pairwise end whose inbound region it is.
pub(crate) struct PairPiece {
    pub(crate) pool: std::rc::Rc<Pool>,
    pub(crate) off: usize,
    pub(crate) words: usize,
}

impl Drop for PairPiece {
    fn drop(&mut self) {
        self.pool.release(self.off, self.words);
    }
}

/// A rendezvous slot of the pool: the same symmetric address on every PE, valid while the
/// pool lives (the borrow). `pe` arguments are PEs of the job (chan-core checked the peer).
#[derive(Clone, Copy)]
struct Slot<'a> {
    p: *mut u64,
    _pool: std::marker::PhantomData<&'a Pool>,
}

impl Slot<'_> {
    /// Word `i` of the slot.
    fn word(self, i: usize) -> *mut u64 {
        debug_assert!(i < MEET_WORDS);
        // SAFETY: the slot's MEET_WORDS words lie inside the pool (Pool::slot).
        unsafe { self.p.add(i) }
    }

    /// An atomic fetch of the state word on `pe`.
    fn fetch_state(self, pe: c_int) -> u64 {
        // SAFETY: a word of the live symmetric pool, written only by SHMEM atomics; SHMEM's
        // ulong is u64 here (window.rs checks it).
        unsafe { sys::shmem_ulong_atomic_fetch(self.word(STATE).cast(), pe) as u64 }
    }

    /// `shmem_ulong_atomic_compare_swap` of the state word on `pe`: the old value.
    fn cswap_state(self, cond: u64, value: u64, pe: c_int) -> u64 {
        // SAFETY: as fetch_state.
        unsafe {
            sys::shmem_ulong_atomic_compare_swap(self.word(STATE).cast(), cond as _, value as _, pe)
                as u64
        }
    }

    /// An atomic set of the state word on `pe`.
    fn set_state(self, value: u64, pe: c_int) {
        // SAFETY: as fetch_state.
        unsafe { sys::shmem_ulong_atomic_set(self.word(STATE).cast(), value as _, pe) }
    }

    /// The vflag word of this PE's copy, written by the peer's word puts.
    fn vflag(&self) -> &AtomicU64 {
        // SAFETY: an aligned word of the live pool, read here only through atomics.
        unsafe { atomic_at(self.word(VFLAG)) }
    }

    /// Put vflag = `n` into the slot on `pe`.
    fn put_vflag(self, n: u64, pe: c_int) {
        // SAFETY: an aligned word of the live pool on pe, which pe reads only through atomics.
        unsafe { put_word(self.word(VFLAG), n, pe) }
    }

    /// The offer in this PE's copy (read through atomics: a peer's puts write it).
    fn read_offer(self) -> (u64, u64, PairOffer) {
        // SAFETY: the slot's words lie in the live pool and are read only through atomics.
        // Acquire: the caller read the word that follows them (state or vflag) first; the
        // writer fenced these puts before it (`sym::fence`: Release, then `shmem_fence`).
        let word = |i: usize| unsafe { atomic_at(self.word(i)) }.load(Ordering::Acquire);
        let mut w = [0; OFFER_WORDS];
        for (i, v) in w.iter_mut().enumerate() {
            *v = word(OFFER_AT + i);
        }
        (word(TAG), word(NONCE), PairOffer::from_words(w))
    }

    /// Put `[tag, nonce, offer]` into the slot on `pe`.
    fn put_offer(self, tag: u32, nonce: u64, offer: PairOffer, pe: c_int) {
        let mut msg = [0u64; VFLAG - TAG];
        msg[0] = u64::from(tag);
        msg[1] = nonce;
        msg[2..].copy_from_slice(&offer.to_words());
        // SAFETY: words TAG..VFLAG of a slot of the live pool on pe, which pe reads only
        // through atomics once the state or vflag that follows (after a fence) says so; msg
        // is a local array.
        unsafe {
            put(
                self.word(TAG).cast(),
                msg.as_ptr().cast(),
                std::mem::size_of_val(&msg),
                pe,
            )
        };
    }
}

impl ShmemCtx {
    /// chan-core's `pair_declare`: carve this end's region from the pool and zero it.
    pub(crate) fn pair_region(
        &mut self,
        spec: &ChannelSpec,
        words: usize,
    ) -> Result<u64, CreateError> {
        let pool = &self.shared().pool;
        let words = words.div_ceil(8) * 8;
        let off = pool
            .carve(words)
            .map_err(|free| CreateError::PairPoolExhausted {
                rank: self.shared().rank,
                peer: spec.peer,
                tag: spec.tag,
                needed: words * 8,
                free: free * 8,
                pool: pool.pool_bytes(),
                hint: POOL_HINT,
            })?;
        // SAFETY: the piece lies inside the pool and belongs to no end: no peer writes it
        // until it learns the offset, after this zeroing (fenced before the offer's put).
        unsafe { std::ptr::write_bytes(pool.at(off), 0, words) };
        Ok(off as u64)
    }

    /// chan-core's `pair_forget`.
    pub(crate) fn forget_region(&mut self, words: usize, off: u64) {
        self.shared()
            .pool
            .give_back(off as usize, words.div_ceil(8) * 8);
    }

    /// chan-core's `pair_meet` (module docs).
    pub(crate) fn meet(
        &mut self,
        spec: &ChannelSpec,
        mine: PairOffer,
        deadline: Instant,
    ) -> Result<Option<PairOffer>, CreateError> {
        let sh = std::rc::Rc::clone(self.shared());
        let pool = &sh.pool;
        let (me, peer) = (sh.rank, spec.peer);
        let pe = peer as c_int;
        let mut spins = 0u32;
        let mut relax = || {
            sh.wait.relax(spins);
            spins = spins.saturating_add(1);
        };
        if me > peer {
            let n = pool.nonce.get() + 1;
            pool.nonce.set(n);
            let theirs = pool.slot(me);
            theirs.put_offer(spec.tag, n, mine, pe);
            fence();
            theirs.set_state((n << 2) | POSTED, pe);
            quiet();
            let verdict = pool.slot(peer);
            let mut withdrawn_failed = false;
            loop {
                // Acquire: pairs with l's fence between its verdict's words and vflag.
                if verdict.vflag().load(Ordering::Acquire) == n {
                    let (tag, nonce, offer) = verdict.read_offer();
                    if tag != u64::from(spec.tag) || nonce != n {
                        return Err(CreateError::Comm(shmem_err(
                            "open_pair",
                            format!("PE {peer}'s verdict names tag {tag}, offer {nonce}; expected tag {}, offer {n}", spec.tag),
                        )));
                    }
                    return Ok(Some(offer));
                }
                if !withdrawn_failed && Instant::now() >= deadline {
                    let old = theirs.cswap_state((n << 2) | POSTED, (n << 2) | WITHDRAWN, pe);
                    if old == (n << 2) | POSTED {
                        return Ok(None);
                    }
                    // Taken before the withdrawal: the verdict is on its way.
                    withdrawn_failed = true;
                }
                relax();
            }
        }
        let slot = pool.slot(peer);
        let me_pe = me as c_int;
        loop {
            let st = slot.fetch_state(me_pe);
            if st & 3 == POSTED {
                // Pairs with h's fence between its offer's words and the state it set.
                std::sync::atomic::fence(Ordering::Acquire);
                let n = st >> 2;
                let (tag, nonce, theirs) = slot.read_offer();
                if tag == u64::from(spec.tag)
                    && nonce == n
                    && slot.cswap_state(st, (n << 2) | TAKEN, me_pe) == st
                {
                    let verdict = pool.slot(me);
                    verdict.put_offer(spec.tag, n, mine, pe);
                    fence();
                    verdict.put_vflag(n, pe);
                    quiet();
                    return Ok(Some(theirs));
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            relax();
        }
    }
}
