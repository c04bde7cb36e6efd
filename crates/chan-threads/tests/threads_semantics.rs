//! The backend-generic semantic checks of `chan_testkit`, on the threads backend, for
//! 2, 3 and 4 ranks (and the tree reduction for 1..=17). The same checks run under mpirun and
//! oshrun in the other backends' tests.

use chan_testkit as testkit;
use chan_threads::World;
use std::time::{Duration, Instant};

/// Run a check on every rank of a world of `n`; every rank must pass. A failing rank panics,
/// so the others' blocking calls fail instead of waiting for it. The test fails with the lowest
/// rank's panic, which may be a "another rank failed" that followed the first; every rank's
/// message is on stderr, in the order they failed.
fn on_world(n: usize, check: impl Fn(&mut chan_threads::ThreadCtx) -> testkit::Check + Sync) {
    World::new(n).unwrap().run(|ctx| {
        let rank = chan_core::traits::Collective::rank(ctx);
        if let Err(e) = check(ctx) {
            panic!("world of {n}, rank {rank}: {e}");
        }
    });
}

#[test]
fn collectives_deliver_every_list_whole_in_rank_order() {
    for n in 1..=5 {
        on_world(n, testkit::collectives_match);
    }
}

#[test]
fn async_never_torn_newest_bounded() {
    for n in 2..=4 {
        for (len, r) in [(1, 1), (7, 2), (2500, 3), (64, 8)] {
            on_world(n, |ctx| testkit::async_semantics(ctx, 3000, len, r));
        }
    }
}

#[test]
fn sync_every_message_once_in_order() {
    for n in 2..=4 {
        for (len, r) in [(1, 1), (13, 3), (2500, 2)] {
            on_world(n, |ctx| testkit::sync_semantics(ctx, 200, len, r));
        }
    }
}

#[test]
fn racy_reads_only_values_some_send_wrote() {
    for n in 2..=4 {
        for len in [1, 33, 2500] {
            on_world(n, |ctx| testkit::racy_semantics(ctx, 3000, len));
        }
    }
}

#[test]
fn staged_sends_start_whole_and_close_discards_them() {
    for n in 2..=4 {
        for len in [1, 2500] {
            on_world(n, |ctx| testkit::staged_sends(ctx, 200, len));
        }
    }
}

#[test]
fn every_element_type_round_trips_bit_for_bit() {
    for n in 2..=4 {
        on_world(n, |ctx| testkit::elements::element_types(ctx, 50));
    }
}

#[test]
fn typed_channels_opened_pairwise() {
    for n in 2..=4 {
        on_world(n, testkit::elements::pairwise_element_types);
    }
}

#[test]
fn mismatched_element_types_fail_on_both_sides() {
    for n in 2..=3 {
        on_world(n, testkit::elements::mismatched_element_types);
    }
}

#[test]
fn mismatched_ends_fail_on_both_sides_quickly() {
    for n in 2..=4 {
        let t = Instant::now();
        on_world(n, testkit::mismatched_ends);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "mismatch took {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn tree_reduction_matches_serial_sum_1_to_17_ranks() {
    for n in 1..=17 {
        on_world(n, |ctx| testkit::reductions_match_serial(ctx, 20, 3));
    }
}

#[test]
fn close_with_messages_in_flight() {
    for n in 2..=4 {
        on_world(n, |ctx| testkit::close_with_traffic(ctx, 50, 16));
    }
}

#[test]
fn both_ends_send_before_either_receives() {
    on_world(2, |ctx| testkit::send_before_recv(ctx, &[1, 2500, 524_288]));
}

#[test]
fn fast_sender_slow_receiver_loses_nothing() {
    // A racy send writes the peer's buffer before it returns: nothing queues, no bound.
    for n in [2, 3] {
        on_world(n, |ctx| {
            testkit::fast_sender_slow_receiver(ctx, 100_000, 1, None)?;
            testkit::fast_sender_slow_receiver(ctx, 100_000, 4, None)
        });
    }
}

#[test]
fn pairwise_channels_between_two_ranks_while_others_do_their_own() {
    on_world(4, |ctx| testkit::pairwise::pairwise_two_pairs(ctx, 50));
}

#[test]
fn pairwise_mismatch_fails_on_both_ends() {
    for n in [2, 3] {
        on_world(n, testkit::pairwise::pairwise_mismatch);
    }
}

#[test]
fn pairwise_peer_that_never_comes_times_out_and_a_late_one_too() {
    for n in [2, 3] {
        on_world(n, |ctx| {
            testkit::pairwise::pairwise_timeout(ctx, Duration::from_millis(200))
        });
    }
}

#[test]
fn pairwise_opens_in_opposite_orders_time_out_instead_of_hanging() {
    on_world(3, |ctx| {
        testkit::pairwise::pairwise_opposite_orders(ctx, Duration::from_millis(200))
    });
}
