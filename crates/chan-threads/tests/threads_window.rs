//! chan-testkit's backend-generic window checks on the threads backend, for 1 to 5 ranks.
//! The same checks run under mpirun (chan-mpi's `mpi_checks`) and oshrun (chan-shmem's
//! `shmem_checks`).

use chan_testkit::window as wk;
use chan_testkit::Check;
use chan_threads::{ThreadCtx, World};

/// Run a check on every rank of a world of `n`; every rank must pass.
fn on_world(n: usize, check: impl Fn(&mut ThreadCtx) -> Check + Sync) {
    World::new(n).unwrap().run(|ctx| {
        let rank = chan_core::traits::Collective::rank(ctx);
        if let Err(e) = check(ctx) {
            panic!("world of {n}, rank {rank}: {e}");
        }
    });
}

#[test]
fn colliding_inserts_lose_nothing_and_duplicate_nothing() {
    for n in 1..=5 {
        on_world(n, |ctx| wk::window_colliding_inserts(ctx, 300, 200));
    }
}

#[test]
fn locked_increments_lose_no_update() {
    for n in 1..=5 {
        on_world(n, |ctx| wk::window_locked_counters(ctx, 200));
    }
}

#[test]
fn fetch_add_loses_no_update() {
    for n in 1..=5 {
        on_world(n, |ctx| wk::window_fetch_add_totals(ctx, 200));
    }
}

#[test]
fn put_get_round_trip_8b_and_64kb() {
    for n in 1..=4 {
        on_world(n, |ctx| wk::window_put_get(ctx, &[1, 3, 8192]));
    }
}

#[test]
fn mismatched_window_sizes_fail_alike_everywhere() {
    for n in 2..=4 {
        on_world(n, wk::window_mismatched_sizes);
    }
}

#[test]
fn out_of_range_is_an_error_and_touches_nothing() {
    for n in 1..=3 {
        on_world(n, wk::window_out_of_range);
    }
}
