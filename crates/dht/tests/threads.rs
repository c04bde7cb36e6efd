//! The table used directly from Rust on the threads backend.

mod shared;

use dht::Insert;

#[test]
fn map_round_trip_over_threads() {
    for n in [1, 2, 4] {
        for insert in [Insert::Cas, Insert::Lock] {
            let out = chan_threads::World::new(n)
                .unwrap()
                .run(|ctx| shared::map_round_trip(ctx, 300, insert));
            for (rank, r) in out.into_iter().enumerate() {
                assert_eq!(r, Ok(()), "{n} ranks, rank {rank}");
            }
        }
    }
}

#[test]
fn bench_over_threads() {
    for insert in [Insert::Cas, Insert::Lock] {
        let out = chan_threads::World::new(3)
            .unwrap()
            .run(|ctx| shared::bench_is_correct(ctx, insert));
        assert!(out.iter().all(Result::is_ok), "{out:?}");
    }
}
