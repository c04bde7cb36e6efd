//! Backend-generic checks of one-sided windows ([`chan_core::Window`]). Each is collective,
//! and every rank returns the same verdict (a failure anywhere is an `Err` everywhere), so a
//! launched job never leaves a rank waiting for one that gave up.

use super::Check;
use chan_core::backend::Lists;
use chan_core::traits::*;
use chan_core::{CreateError, ReduceOp, WindowError};
use std::collections::BTreeMap;

/// Every rank learns whether any rank's `local` failed; the rank's own message where it
/// failed, a pointer to the lowest failing rank elsewhere.
fn agree<C: Windows>(ctx: &mut C, local: Check) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut lowest = [if local.is_err() { rank } else { size } as f64];
    ctx.all_reduce(&mut lowest, ReduceOp::Min)
        .map_err(|e| e.to_string())?;
    local?;
    if (lowest[0] as usize) < size {
        return Err(format!("rank {} failed; see its message", lowest[0]));
    }
    Ok(())
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A deliberately poor hash (7 home slots in the whole table), so that keys from every rank
/// collide and probe long runs of taken slots.
fn poor_home(key: u64) -> u64 {
    key % 7
}

/// Insert `key` if absent, by compare-and-swap and linear probing over the global table of
/// `size × slots` words (0 marks an empty slot). `Ok(true)` when this call stored it,
/// `Ok(false)` when it was there already.
fn insert<R: chan_core::backend::RawWindow>(
    win: &mut chan_core::Window<R, u64>,
    key: u64,
    slots: usize,
) -> Result<bool, String> {
    let total = (win.size() * slots) as u64;
    let mut g = poor_home(key) % total;
    for _ in 0..total {
        let (target, offset) = ((g / slots as u64) as usize, (g % slots as u64) as usize);
        let old = win.compare_and_swap(target, offset, 0, key).map_err(s)?;
        if old == 0 {
            return Ok(true);
        }
        if old == key {
            return Ok(false);
        }
        g = (g + 1) % total;
    }
    Err(format!("table of {total} slots full inserting {key}"))
}

/// Concurrent inserts of colliding keys from every rank lose nothing and duplicate nothing:
/// rank r inserts its own keys and `shared` keys every rank also inserts, all hashing to 7
/// home slots; after a fence the table's contents, gathered at rank 0, are exactly the serial
/// set of every key, each once, and the inserts that reported storing a key number exactly
/// the distinct keys.
pub fn window_colliding_inserts<C: Windows>(ctx: &mut C, own: usize, shared: usize) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let distinct = size * own + shared;
    let slots = (2 * distinct).div_ceil(size);
    let mut win = ctx.window::<u64>(slots).map_err(s)?;
    // Keys are never 0 (the empty mark); shared keys 1..=shared, own keys above them.
    let own_key = |r: usize, i: usize| (shared + 1 + r * own + i) as u64;
    let mut stored = 0u64;
    let mut local: Check = Ok(());
    // Interleave own and shared keys so that ranks race on the same slots.
    for i in 0..own.max(shared) {
        let mut keys = Vec::with_capacity(2);
        if i < shared {
            keys.push((((i + rank) % shared) + 1) as u64);
        }
        if i < own {
            keys.push(own_key(rank, i));
        }
        for k in keys {
            match insert(&mut win, k, slots) {
                Ok(true) => stored += 1,
                Ok(false) => {}
                Err(e) => {
                    local = Err(e);
                    break;
                }
            }
        }
    }
    agree(ctx, local)?;
    win.fence().map_err(s)?;
    let mut mine = vec![0u64; slots];
    win.read_local(&mut mine).map_err(s)?;
    win.free().map_err(s)?;
    let mut words: Vec<u64> = mine.into_iter().filter(|&k| k != 0).collect();
    words.push(stored);
    let all = ctx.gather_v(&words, 0).map_err(s)?;
    let verdict = match all {
        None => Ok(()),
        Some(lists) => judge_table(&lists, size, own, shared, own_key),
    };
    agree(ctx, verdict)
}

fn judge_table(
    lists: &Lists,
    size: usize,
    own: usize,
    shared: usize,
    own_key: impl Fn(usize, usize) -> u64,
) -> Check {
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    let mut stored = 0u64;
    for r in 0..size {
        let (keys, n) = lists.list(r).split_at(lists.list(r).len() - 1);
        stored += n[0];
        for &k in keys {
            *count.entry(k).or_default() += 1;
        }
    }
    let serial: Vec<u64> = (1..=shared as u64)
        .chain(
            (0..size)
                .flat_map(|r| (0..own).map(move |i| (r, i)))
                .map(|(r, i)| own_key(r, i)),
        )
        .collect();
    for &k in &serial {
        match count.get(&k) {
            None => return Err(format!("key {k} was lost")),
            Some(&c) if c > 1 => return Err(format!("key {k} is in the table {c} times")),
            _ => {}
        }
    }
    if count.len() != serial.len() {
        let extra: Vec<_> = count
            .keys()
            .filter(|k| !serial.contains(k))
            .take(5)
            .collect();
        return Err(format!("the table holds keys nobody inserted: {extra:?}"));
    }
    if stored != serial.len() as u64 {
        return Err(format!(
            "{stored} inserts reported storing a key, for {} distinct keys",
            serial.len()
        ));
    }
    Ok(())
}

/// A locked window's lock excludes: every rank, `n` times, takes each rank's lock in turn and
/// adds 1 to its word 0 by a load and a store (not atomic: a yield between them lets the
/// other ranks in, were the lock not exclusive); after a fence each rank's word 0 is
/// `n · size`. Word 1 of each rank marks the holder (rank + 1 while it holds the lock, 0
/// otherwise): a holder that finds it taken was let in beside another.
pub fn window_locked_counters<C: Windows>(ctx: &mut C, n: usize) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut win = ctx.locked_window::<u64>(2).map_err(s)?;
    let mut run = || -> Result<(), String> {
        for _ in 0..n {
            for i in 0..size {
                let t = (rank + i) % size;
                let mut l = win.lock(t).map_err(s)?;
                let holder = l.load(1).map_err(s)?;
                if holder != 0 {
                    return Err(format!(
                        "rank {rank} took rank {t}'s lock while rank {} held it",
                        holder - 1
                    ));
                }
                l.store(1, rank as u64 + 1).map_err(s)?;
                let v = l.load(0).map_err(s)?;
                std::thread::yield_now();
                l.store(0, v + 1).map_err(s)?;
                l.store(1, 0).map_err(s)?;
                l.unlock().map_err(s)?;
            }
        }
        Ok(())
    };
    let local = run();
    agree(ctx, local)?;
    win.fence().map_err(s)?;
    let mut mine = [0u64; 2];
    win.read_local(&mut mine).map_err(s)?;
    win.free().map_err(s)?;
    let want = (n * size) as u64;
    let local = if mine == [want, 0] {
        Ok(())
    } else {
        Err(format!(
            "rank {rank}'s counter is {} after {n} locked increments by each of {size} ranks \
             (want {want}); holder word {}",
            mine[0], mine[1]
        ))
    };
    agree(ctx, local)
}

/// `fetch_add` loses no update: every rank adds `rank + 1` to word 0 of every rank `n` times
/// (blocking) and `n` times more in one epoch (non-blocking); after a fence each rank's word
/// 0 is `2n · size(size+1)/2`. And the old values one shared counter (word 1 of rank 0)
/// returned, gathered at rank 0, are exactly `0..size·n`: no two ranks got the same ticket.
pub fn window_fetch_add_totals<C: Windows>(ctx: &mut C, n: usize) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut win = ctx.window::<i64>(2).map_err(s)?;
    let delta = rank as i64 + 1;
    let mut tickets = Vec::with_capacity(n);
    for _ in 0..n {
        for t in 0..size {
            win.fetch_add(t, 0, delta).map_err(s)?;
        }
        tickets.push(win.fetch_add(0, 1, 1).map_err(s)? as u64);
    }
    win.epoch(|ep| {
        let mut first = Vec::with_capacity(n * size);
        for _ in 0..n {
            for t in 0..size {
                first.push(ep.fetch_add(t, 0, delta)?);
            }
        }
        let done = ep.flush()?;
        // Each old value is a partial sum: never negative, never past the total.
        let total = (2 * n * size * (size + 1) / 2) as i64;
        for p in first {
            let v = p.value(&done);
            if !(0..total).contains(&v) {
                return Err(WindowError::Comm(chan_core::CommError::Backend {
                    backend: "check",
                    call: "fetch_add",
                    message: format!("old value {v} outside 0..{total}"),
                }));
            }
        }
        Ok(())
    })
    .map_err(s)?;
    win.fence().map_err(s)?;
    let mut mine = [0i64; 2];
    win.read_local(&mut mine).map_err(s)?;
    win.free().map_err(s)?;
    let want = (2 * n * size * (size + 1) / 2) as i64;
    let local = if mine[0] == want {
        Ok(())
    } else {
        Err(format!("rank {rank}: word 0 is {}, want {want}", mine[0]))
    };
    agree(ctx, local)?;
    let all = ctx.gather_v(&tickets, 0).map_err(s)?;
    let verdict = match all {
        None => Ok(()),
        Some(lists) => {
            let mut t = lists.flat().to_vec();
            t.sort_unstable();
            if t.iter().copied().eq(0..(size * n) as u64) {
                Ok(())
            } else {
                Err(format!(
                    "tickets are not 0..{}: {:?}…",
                    size * n,
                    &t[..t.len().min(8)]
                ))
            }
        }
    };
    agree(ctx, verdict)
}

/// The value rank `from` writes at word `i` in round `round`.
fn pattern(from: usize, round: usize, i: usize) -> f64 {
    (from * 1_000_000 + round * 100_000 + i) as f64 + 0.25
}

/// Puts and gets round-trip `lens` words (8 B and 64 KB, say) exactly, blocking and
/// non-blocking: each rank puts a pattern into its successor, fences, checks its own memory
/// (written by its predecessor) with `read_local` and its successor's with a get, then does
/// the same through an epoch (`put` from a borrowed buffer, `get_into` one).
pub fn window_put_get<C: Windows>(ctx: &mut C, lens: &[usize]) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let max = lens.iter().copied().max().unwrap_or(1);
    let mut win = ctx.window::<f64>(max).map_err(s)?;
    let mut local: Check = Ok(());
    for (round, &len) in lens.iter().enumerate() {
        let src: Vec<f64> = (0..len).map(|i| pattern(rank, round, i)).collect();
        win.put(next, 0, &src).map_err(s)?;
        win.fence().map_err(s)?;
        let mut mine = vec![0.0; max];
        win.read_local(&mut mine).map_err(s)?;
        let want: Vec<f64> = (0..len).map(|i| pattern(prev, round, i)).collect();
        if local.is_ok() && mine[..len] != want[..] {
            local = Err(format!(
                "rank {rank}: blocking put of {len} words from {prev} differs"
            ));
        }
        let mut back = vec![0.0; len];
        win.get(next, 0, &mut back).map_err(s)?;
        if local.is_ok() && back != src {
            local = Err(format!(
                "rank {rank}: blocking get of {len} words from {next} differs"
            ));
        }
        win.fence().map_err(s)?;
        // Non-blocking: a put from a borrowed buffer, a fence, then gets into a borrowed one.
        let src2: Vec<f64> = (0..len).map(|i| -pattern(rank, round, i)).collect();
        win.epoch(|ep| ep.put(next, 0, &src2)).map_err(s)?;
        win.fence().map_err(s)?;
        let mut back2 = vec![0.0; len];
        let first = win
            .epoch(|ep| {
                let g = ep.get_into(next, 0, &mut back2)?;
                let w = ep.get(next, 0)?;
                let done = ep.flush()?;
                let filled = g.into_slice(&done);
                Ok((filled[len - 1], w.value(&done)))
            })
            .map_err(s)?;
        if local.is_ok() && (back2 != src2 || first != (src2[len - 1], src2[0])) {
            local = Err(format!("rank {rank}: epoch put/get of {len} words differs"));
        }
        win.fence().map_err(s)?;
    }
    win.free().map_err(s)?;
    agree(ctx, local)
}

/// A window whose ranks ask for different sizes, or word types, fails on every rank with the
/// same [`CreateError::WindowMismatch`], and `len = 0` with [`CreateError::EmptyWindow`];
/// nothing hangs, and the next (agreed) creation works. Needs 2 ranks or more.
pub fn window_mismatched_sizes<C: Windows>(ctx: &mut C) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let last = size - 1;
    let want = CreateError::WindowMismatch {
        rank: 0,
        len: 100,
        word: "u64",
        other_rank: last,
        other_len: 101,
        other_word: "u64",
    };
    let got = ctx.window::<u64>(if rank == last { 101 } else { 100 });
    let mut local = match got {
        Err(e) if e == want => Ok(()),
        Err(e) => Err(format!(
            "rank {rank}: size mismatch gave {e:?}, want {want:?}"
        )),
        Ok(_) => Err(format!("rank {rank}: mismatched sizes created a window")),
    };
    let want_type = CreateError::WindowMismatch {
        rank: 0,
        len: 8,
        word: "u64",
        other_rank: last,
        other_len: 8,
        other_word: "f64",
    };
    let got = if rank == last {
        ctx.window::<f64>(8).map(drop)
    } else {
        ctx.window::<u64>(8).map(drop)
    };
    if local.is_ok() {
        local = match got {
            Err(e) if e == want_type => Ok(()),
            Err(e) => Err(format!(
                "rank {rank}: type mismatch gave {e:?}, want {want_type:?}"
            )),
            Ok(()) => Err(format!("rank {rank}: mismatched types created a window")),
        };
    }
    let empty = ctx.window::<u64>(0);
    if local.is_ok() && !matches!(empty, Err(CreateError::EmptyWindow)) {
        local = Err(format!("rank {rank}: len 0 gave {empty:?}"));
    }
    agree(ctx, local)?;
    // The world is still in step: an agreed window works.
    let mut win = ctx.window::<u64>(4).map_err(s)?;
    win.fetch_add(0, 0, 1).map_err(s)?;
    win.fence().map_err(s)?;
    let v = win.load(0, 0).map_err(s)?;
    win.free().map_err(s)?;
    agree(
        ctx,
        if v == size as u64 {
            Ok(())
        } else {
            Err(format!(
                "after the mismatches, a counter reached {v}, want {size}"
            ))
        },
    )
}

/// Out-of-range offsets and targets are errors naming the range, in every operation,
/// blocking and in an epoch, and touch no memory: the window (filled with a pattern) and
/// its neighbours' words are unchanged after every failed call.
pub fn window_out_of_range<C: Windows>(ctx: &mut C) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let len = 16;
    let mut win = ctx.window::<u64>(len).map_err(s)?;
    let fill: Vec<u64> = (0..len as u64)
        .map(|i| 1000 * rank as u64 + i + 1)
        .collect();
    win.put(rank, 0, &fill).map_err(s)?;
    win.fence().map_err(s)?;
    let next = (rank + 1) % size;
    let oor = |offset, count| WindowError::OutOfRange { offset, count, len };
    let bad = WindowError::BadTarget { target: size, size };
    let mut local: Check = Ok(());
    let mut expect = |what: &str, got: Result<(), WindowError>, want: &WindowError| {
        if local.is_ok() && got.as_ref().err() != Some(want) {
            local = Err(format!("rank {rank}: {what} gave {got:?}, want {want:?}"));
        }
    };
    let big = vec![7u64; 4];
    expect(
        "put past the end",
        win.put(next, len - 2, &big),
        &oor(len - 2, 4),
    );
    expect("put at len", win.put(next, len, &big[..1]), &oor(len, 1));
    expect(
        "put whose end overflows",
        win.put(next, usize::MAX, &big[..2]),
        &oor(usize::MAX, 2),
    );
    expect("put to rank size", win.put(size, 0, &big), &bad);
    let mut dst = [0u64; 4];
    expect(
        "get past the end",
        win.get(next, len - 1, &mut dst),
        &oor(len - 1, 4),
    );
    expect("load at len", win.load(next, len).map(drop), &oor(len, 1));
    expect(
        "compare_and_swap at len",
        win.compare_and_swap(next, len, 0, 9).map(drop),
        &oor(len, 1),
    );
    expect(
        "fetch_add at len",
        win.fetch_add(next, len, 9).map(drop),
        &oor(len, 1),
    );
    expect(
        "fetch_add to rank size",
        win.fetch_add(size, 0, 9).map(drop),
        &bad,
    );
    let got = win.epoch(|ep| {
        ep.put(next, len - 1, &big)?;
        Ok(())
    });
    expect("epoch put past the end", got, &oor(len - 1, 4));
    let got = win.epoch(|ep| ep.fetch_add(next, len, 1).map(drop));
    expect("epoch fetch_add at len", got, &oor(len, 1));
    let got = win.epoch(|ep| ep.compare_and_swap(size, 0, 0, 1).map(drop));
    expect("epoch compare_and_swap to rank size", got, &bad);
    let got = win.epoch(|ep| ep.get_into(next, len, &mut dst).map(drop));
    expect("epoch get_into at len", got, &oor(len, 4));
    let got = win.epoch(|ep| ep.flush_target(size));
    expect("flush of rank size", got, &bad);
    win.fence().map_err(s)?;
    let mut mine = vec![0u64; len];
    win.read_local(&mut mine).map_err(s)?;
    if local.is_ok() && mine != fill {
        local = Err(format!(
            "rank {rank}: failed calls changed the window: {mine:?}"
        ));
    }
    win.free().map_err(s)?;
    agree(ctx, local)
}
