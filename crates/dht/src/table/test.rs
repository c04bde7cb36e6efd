use super::*;
use chan_threads::World;

/// A map: every rank inserts its keys with values, any rank reads any key's value after the
/// fence, keys nobody inserted are absent, and a second insert keeps the first value.
#[test]
fn values_are_read_back_by_every_rank() {
    for insert in [Insert::Cas, Insert::Lock] {
        let out = World::new(3).unwrap().run(|ctx| {
            let (rank, size) = (ctx.rank() as u64, ctx.size() as u64);
            let mut t = Table::<_, u64, f64>::new(ctx, 40, insert).unwrap();
            for k in 1..=20u64 {
                let p = t.insert(k * size + rank, k as f64 + rank as f64 / 10.0);
                assert!(!p.unwrap().present);
            }
            t.fence().unwrap();
            assert!(t.insert(size + rank, -1.0).unwrap().present);
            t.fence().unwrap();
            for k in 1..=20u64 {
                for r in 0..size {
                    let want = k as f64 + r as f64 / 10.0;
                    assert_eq!(t.get(k * size + r).unwrap(), Some(want), "{insert:?}");
                }
            }
            assert_eq!(t.get(1000).unwrap(), None);
            let held = t.local_len().unwrap();
            t.free().unwrap();
            held
        });
        assert_eq!(out.iter().sum::<usize>(), 60, "{insert:?}");
    }
}

/// Keys meet in their probe sequences (a table of as many slots as keys): every key is still
/// placed once, collisions are counted, and a full table says so.
#[test]
fn a_full_table_is_an_error_and_no_key_is_lost() {
    for insert in [Insert::Cas, Insert::Lock] {
        let out = World::new(2).unwrap().run(|ctx| {
            let rank = ctx.rank() as i64;
            let mut t = Table::<_, i64, i64>::new(ctx, 8, insert).unwrap();
            let mut collisions = 0;
            for k in 0..8 {
                collisions += t.insert(-(2 * k + rank + 1), k).unwrap().collisions;
            }
            t.fence().unwrap();
            let full = t.insert(99, 0);
            let all: Vec<Option<i64>> = (1..=16).map(|k| t.get(-k).unwrap()).collect();
            t.fence().unwrap();
            (collisions, full, all, t.local_len().unwrap())
        });
        for (_, full, all, held) in &out {
            assert_eq!(*held, 8, "{insert:?}");
            assert_eq!(*full, Err(TableError::Full { slots: 16 }));
            assert_eq!(all.iter().flatten().count(), 16);
        }
        // 16 keys in 16 slots without a collision would take a hash that is a permutation.
        assert!(out.iter().map(|o| o.0).sum::<u64>() > 0, "{insert:?}");
    }
}

#[test]
fn zero_keys_and_no_slots_are_refused() {
    let out = World::new(1).unwrap().run(|ctx| {
        let none = Set::<_, u64>::new(ctx, 0, Insert::Cas).err();
        let mut t = Set::<_, u64>::new(ctx, 4, Insert::Lock).unwrap();
        (none, t.insert(0, ()).unwrap_err(), t.get(0).unwrap_err())
    });
    assert_eq!(
        out[0],
        (
            Some(TableError::SlotsPerRank(0)),
            TableError::ZeroKey,
            TableError::ZeroKey
        )
    );
}
