//! The racy put path against a [`PeerMem`] whose puts tear every word on purpose: both
//! ends in this process, on two threads, over one buffer of atomics.

use super::*;
use std::sync::atomic::{
    AtomicBool,
    Ordering::{Relaxed, SeqCst},
};
use std::time::{Duration, Instant};

/// Puts every word in two stores: first its new low half over its old high half (a torn
/// word, left for a while), then the whole new word: the tear a bulk copy can show a
/// reader. `WHOLE` claims whole-word puts all the same, for the control that shows the
/// tear is seen through a view that is put into. Maps the peer (identity) when `map`.
struct Tearing<const WHOLE: bool> {
    map: bool,
}

// SAFETY: both ends' regions are one live buffer of this test, addressed directly; every
// access is an atomic one (put's two stores per word, put_word's store), so a torn word
// is a value, not undefined behaviour; `fence` is a SeqCst fence, which orders this
// thread's stores as the other thread's Acquire loads see them; nothing is left to
// complete (`quiet`). With WHOLE = true put does not write whole words, on purpose: the
// control below expects the view to show it.
unsafe impl<const WHOLE: bool> PeerMem for Tearing<WHOLE> {
    const BACKEND: &'static str = "tearing";
    const PUT_WHOLE_WORDS: bool = WHOLE;

    fn wait(&self) -> WaitPolicy {
        WaitPolicy::Yield
    }

    unsafe fn map(&self, p: *mut u64) -> Option<NonNull<u64>> {
        self.map.then(|| NonNull::new(p)).flatten()
    }

    unsafe fn put(&self, dst: *mut u8, src: *const u8, bytes: usize) {
        for i in 0..bytes / 8 {
            // SAFETY: (caller) an aligned word of the peer's region, read there through
            // atomics; src + i readable (read unaligned, as its alignment is not promised).
            let (w, new) = unsafe {
                (
                    atomic_at(dst.cast::<u64>().add(i)),
                    src.cast::<u64>().add(i).read_unaligned(),
                )
            };
            let old = w.load(Relaxed);
            w.store((old & !0xffff_ffff) | (new & 0xffff_ffff), Relaxed);
            for _ in 0..20 {
                std::hint::spin_loop();
            }
            w.store(new, Relaxed);
        }
    }

    unsafe fn put_word(&self, dst: *mut u64, v: u64) {
        // SAFETY: (caller) an aligned word of the peer's region, read through atomics.
        unsafe { atomic_at(dst) }.store(v, Relaxed);
    }

    fn fence(&self) {
        std::sync::atomic::fence(SeqCst);
    }

    fn quiet(&self) {}
}

/// Element `j` of send `s`: its high half `s`, its low half a function of `s` and `j`, so
/// a word mixing two sends' halves is nobody's.
fn word(s: u64, j: usize) -> u64 {
    (s << 32) | ((s ^ j as u64 ^ 0x5a5a_5a5a) & 0xffff_ffff)
}

/// The send that wrote element `j`'s bits `v`: Some(0) for the initial 0, None for a torn
/// word.
fn sender(v: u64, j: usize) -> Option<u64> {
    (v == 0 || word(v >> 32, j) == v).then_some(v >> 32)
}

const LEN: usize = 512;

/// A racy end over `Tearing`, as rank `rank` of two, both regions in `mem`.
///
/// # Safety
/// `mem` holds two regions of the shape, zeroed, and outlives the end.
unsafe fn end<const WHOLE: bool>(
    mem: &[AtomicU64],
    rank: usize,
    map: bool,
) -> OneSidedEnd<SharedBuf, Tearing<WHOLE>> {
    let words = OneSidedEnd::<SharedBuf, Tearing<WHOLE>>::shape(LEN, 1)
        .words()
        .unwrap();
    assert_eq!(mem.len(), 2 * words);
    let base = mem.as_ptr().cast_mut().cast::<u64>();
    // SAFETY: (caller) two zeroed regions of this shape that outlive the end; every access
    // to them is atomic.
    unsafe {
        OneSidedEnd::new(
            Tearing { map },
            1 - rank,
            LEN,
            1,
            base.add(rank * words),
            base.add((1 - rank) * words),
            map,
        )
    }
}

fn region_pair<const WHOLE: bool>() -> Vec<AtomicU64> {
    let words = OneSidedEnd::<SharedBuf, Tearing<WHOLE>>::shape(LEN, 1)
        .words()
        .unwrap();
    (0..2 * words).map(|_| AtomicU64::new(0)).collect()
}

fn send(end: &mut OneSidedEnd<SharedBuf, impl PeerMem>, s: u64) {
    end.send_with(Header { seq: s, stamp: s }, |b| {
        for (j, x) in b.iter_mut().enumerate() {
            *x = f64::from_bits(word(s, j));
        }
    })
    .unwrap();
}

/// What the reader of a racy channel over `Tearing<WHOLE>` saw while rank 0 sent as fast
/// as it could: torn elements, elements that went back to an older send, polls that
/// reported sends, and whether the view was the last send, whole, at the end. Runs `sends`
/// sends, or until the first torn element when `until_torn`.
fn race<const WHOLE: bool>(sends: u64, until_torn: bool) -> (u64, u64, u64, bool) {
    let mem = region_pair::<WHOLE>();
    let done = AtomicBool::new(false);
    let torn_seen = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // SAFETY: mem holds two zeroed regions and outlives the scope.
            let mut w = unsafe { end::<WHOLE>(&mem, 0, false) };
            for s in 1..=sends {
                if until_torn && torn_seen.load(Relaxed) {
                    break;
                }
                send(&mut w, s);
            }
            done.store(true, SeqCst);
        });
        // SAFETY: as the sender's.
        let mut r = unsafe { end::<WHOLE>(&mem, 1, false) };
        let (mut torn, mut back, mut reports) = (0u64, 0u64, 0u64);
        let mut last = vec![0u64; LEN];
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let finished = done.load(SeqCst);
            if r.poll().unwrap().arrived > 0 {
                reports += 1;
            }
            for (j, l) in last.iter_mut().enumerate() {
                match sender(r.view().load(j).to_bits(), j) {
                    None => torn += 1,
                    Some(s) if s < *l => back += 1,
                    Some(s) => *l = s,
                }
            }
            if torn > 0 {
                torn_seen.store(true, Relaxed);
            }
            if finished || Instant::now() > deadline {
                break;
            }
        }
        // The sender is done: a last poll copies its last send, whole.
        r.poll().unwrap();
        let whole = (0..LEN).all(|j| r.view().load(j).to_bits() == word(sends, j));
        (torn, back, reports, whole)
    })
}

#[test]
fn racy_puts_that_tear_words_reach_the_view_whole() {
    let (torn, back, reports, whole) = race::<false>(600, false);
    assert_eq!((torn, back), (0, 0), "torn and backward elements");
    assert!(reports > 0, "no poll ever reported a send");
    assert!(
        whole,
        "the view is not the last send once the sender stopped"
    );
}

/// The control: the same puts straight into the view (as when a backend's puts write
/// whole words) show torn elements, so the check above can see them.
#[test]
fn the_same_puts_into_the_view_show_torn_words() {
    let mut torn = 0;
    for _ in 0..20 {
        torn += race::<true>(20_000, true).0;
        if torn > 0 {
            break;
        }
    }
    assert!(torn > 0, "no torn element seen: the check could not tell");
}

/// A racy end expecting landing puts whose peer writes in place, and the reverse, fail
/// their first poll after a send.
#[test]
fn ends_that_disagree_on_the_path_fail_the_poll() {
    for writer_maps in [true, false] {
        let mem = region_pair::<false>();
        // SAFETY: mem holds two zeroed regions and outlives both ends.
        let (mut w, mut r) = unsafe {
            (
                end::<false>(&mem, 0, writer_maps),
                end::<false>(&mem, 1, !writer_maps),
            )
        };
        assert_eq!(w.is_mapped(), writer_maps);
        send(&mut w, 1);
        let e = r
            .poll()
            .expect_err("the poll after a send on the other path");
        assert!(e.to_string().contains("disagree"), "{e}");
    }
}
