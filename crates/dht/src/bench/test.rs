use super::*;
use chan_threads::World;
use std::collections::HashSet;

fn run_on(n: usize, spec: &Spec) -> Vec<Row> {
    World::new(n).unwrap().run(|ctx| run(ctx, spec).unwrap())
}

#[test]
fn objects_are_distinct_and_nonzero() {
    let mut seen = HashSet::new();
    for r in 0..4 {
        for i in 0..5000 {
            let o = object(42, (r * 5000 + i) as u64);
            assert_ne!(o, 0);
            assert!(seen.insert(o), "object {o} twice");
        }
    }
}

/// Every rank count finds every object once, and the counts add up: the verdict the run
/// prints is computed from the table, not assumed.
#[test]
fn over_threads_is_correct_at_1_to_5_ranks() {
    for n in 1..=5 {
        for insert in [Insert::Cas, Insert::Lock] {
            let spec = Spec {
                volume: Volume::PerRank(2000),
                seed: 7,
                insert,
                hit_ratio: 0.5,
            };
            for r in &run_on(n, &spec) {
                assert!(r.correct, "{n} ranks, {insert:?}: {r:?}");
                assert_eq!(r.table_objects, (n * 2000) as u64);
                assert_eq!(r.found, (n * 2000) as u64);
                assert!(r.probe_reads >= r.found);
                assert_eq!(r.insert, insert);
                assert_eq!(r.backend, "threads");
            }
        }
    }
}

/// Lock-based insertion under contention: 8 ranks insert into a table of twice their objects,
/// every probe sequence long, many crossing into the next rank's slots under its lock. Each
/// object is held once. A read-then-write without the lock loses an object only when two
/// ranks read one empty slot within the same few instructions: with a lock that did not
/// exclude, one run over threads on 2 cores lost objects 1 time in 4 to 1 in 20 (the fewer on
/// a loaded machine), and these 24 runs failed 4 times in 6 on a loaded machine.
/// chan-testkit's `window_locked_counters` catches such a lock every time.
#[test]
fn lock_insertion_holds_every_object_once() {
    for seed in 1..=24 {
        let spec = Spec {
            volume: Volume::PerRank(3000),
            seed,
            insert: Insert::Lock,
            hit_ratio: 1.0,
        };
        let r = &run_on(8, &spec)[0];
        assert_eq!(r.table_objects, 8 * 3000, "{r:?}");
        assert_eq!(r.found, 8 * 3000, "{r:?}");
        assert!(r.correct, "{r:?}");
    }
}

/// The lookups: `hit_ratio` of them hits, every hit found and every miss reported absent;
/// strong scaling shares a fixed total out (unevenly when it does not divide), and the table
/// holds exactly that total.
#[test]
fn lookups_find_the_hits_and_not_the_misses() {
    for (n, total, ratio) in [(1, 1001, 0.5), (3, 1000, 0.25), (4, 999, 1.0), (2, 10, 0.0)] {
        for insert in [Insert::Cas, Insert::Lock] {
            let spec = Spec {
                volume: Volume::Total(total),
                seed: 3,
                insert,
                hit_ratio: ratio,
            };
            let r = &run_on(n, &spec)[0];
            assert_eq!(r.table_objects, total as u64, "{r:?}");
            assert_eq!(r.lookups, total as u64, "{r:?}");
            let want_hits = (total as f64 * ratio).round() as u64;
            assert!(r.hits.abs_diff(want_hits) <= n as u64, "{r:?}");
            assert_eq!(r.hits_found, r.hits, "{r:?}");
            assert_eq!(r.misses_absent, r.lookups - r.hits, "{r:?}");
            assert_eq!(r.local_volume, total.div_ceil(n));
            assert!(r.correct, "{r:?}");
        }
    }
}

/// The memory estimate is what a rank allocates per object: its objects, its lookups and
/// their hit flags, and its slots of the table and their copy read back for the count
/// (measured on the vectors the run makes).
#[test]
fn bytes_per_object_are_what_a_rank_allocates() {
    let spec = Spec {
        volume: Volume::PerRank(1000),
        seed: 5,
        insert: Insert::Cas,
        hit_ratio: 0.5,
    };
    let (first, count) = spec.volume.share(1, 3);
    let (keys, hit) = lookups(&spec, first, count, spec.volume.total(3));
    assert_eq!((keys.len(), hit.len()), (count, count));
    let objects = count * size_of::<u64>();
    let slots = 2 * SLOTS_PER_OBJECT * count * size_of::<u64>();
    let bytes = objects + size_of_val(&keys[..]) + size_of_val(&hit[..]) + slots;
    assert_eq!(bytes as u64, count as u64 * BYTES_PER_OBJECT);
}

#[test]
fn shares_cover_the_total_once() {
    for (n, size) in [(10, 3), (2, 4), (7, 7), (1000, 8)] {
        let v = Volume::Total(n);
        let mut next = 0;
        for rank in 0..size {
            let (first, count) = v.share(rank, size);
            assert_eq!(first, next);
            assert!(count == n / size || count == n / size + 1);
            next += count;
        }
        assert_eq!(next, n);
    }
}

/// A setting out of range is refused by name before any table is made, on every rank.
#[test]
fn bad_settings_are_named() {
    let spec = |volume, hit_ratio| Spec {
        volume,
        seed: 1,
        insert: Insert::Cas,
        hit_ratio,
    };
    for (s, want) in [
        (spec(Volume::PerRank(0), 0.5), SettingError::LocalVolume(0)),
        (spec(Volume::Total(0), 0.5), SettingError::Total(0)),
        (spec(Volume::Total(5), 1.5), SettingError::HitRatio(1.5)),
    ] {
        let out = World::new(2).unwrap().run(|ctx| run(ctx, &s).unwrap_err());
        assert!(
            out.iter().all(|e| *e == BenchError::Setting(want.clone())),
            "{out:?}"
        );
    }
    assert!(matches!(
        spec(Volume::Total(5), f64::NAN).check(),
        Err(SettingError::HitRatio(_))
    ));
}
