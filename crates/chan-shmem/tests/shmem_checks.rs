//! chan-testkit's backend-generic semantic checks, and the SHMEM backend's own, under real
//! `oshrun` with 1 to 4 PEs.
//!
//! `cargo test` runs this binary without a launcher; it then starts itself again under
//! `timeout … oshrun --oversubscribe -np N` once per case and judges each run by its exit
//! status (a hang is killed by the timeout and reported). Under oshrun it runs the case named
//! on its command line on every PE; a PE whose check fails prints why and calls
//! `shmem_global_exit`, so no PE waits forever for a dead peer. Every case ends with
//! `ShmemCtx::finalize`, which fails if a channel is still open.
//!
//! `cargo test -p chan-shmem --all-features --test shmem_checks [-- FILTER]`
//!
//! With `AIAC_SHMEM_REMOTE=1` every PE takes the between-nodes path to every peer (no
//! `shmem_ptr` mapping: a racy send is a bulk put into a landing buffer, which the receiver
//! copies into its view once it is whole), and each child first checks that the switch took
//! effect. `scripts/test` runs the checks once that way.

use chan_core::traits::*;
use chan_core::{close_all, Async, ChannelConfig, ChannelSpec, CreateError, Racy, Sync};
use chan_shmem::ShmemCtx;
use chan_testkit::jobs::{self, Job, Launcher};
use chan_testkit::window as wk;
use chan_testkit::{self as testkit, decode, Check};
use std::process::ExitCode;
use std::sync::atomic::{fence, Ordering};

/// Each case, the PE counts it runs with, and its time limit in seconds.
const CASES: &[(&str, &[usize], u64)] = &[
    ("async_semantics", &[2, 3, 4], 60),
    ("sync_semantics", &[2, 3, 4], 60),
    ("racy_semantics", &[2, 3, 4], 60),
    ("staged_sends", &[2, 3, 4], 60),
    ("mismatched_ends", &[2, 3, 4], 30),
    ("element_types", &[2, 3, 4], 120),
    ("mismatched_element_types", &[2, 3], 60),
    ("send_before_recv_8B_20KB_4MB", &[2, 3, 4], 30),
    ("reductions_match_serial", &[1, 2, 3, 4], 30),
    ("close_with_traffic", &[2, 3, 4], 60),
    ("racy_stress", &[2, 3, 4], 60),
    ("async_held_message_intact", &[2, 3], 60),
    ("creation_errors", &[2, 3], 30),
    ("reclaim_after_close", &[2, 3], 30),
    ("drop_without_close", &[2, 3, 4], 30),
    ("collectives_match", &[1, 2, 3, 4], 30),
    // 32 rings of 4 PEs, 64 KB racy messages into one buffer per end: with AIAC_SHMEM_REMOTE=1
    // every one a bulk put (the between-nodes path), which on one node tears words now and
    // then (a memcpy into the peer's heap); the views must show whole ones only.
    ("racy_whole_words", &[4], 120),
    ("window_colliding_inserts", &[1, 2, 3, 4], 120),
    ("window_fetch_add_totals", &[1, 2, 3, 4], 120),
    ("window_locked_counters", &[1, 2, 3], 120),
    ("window_put_get_8B_64KB", &[1, 2, 4], 120),
    ("window_mismatched_sizes", &[2, 3], 60),
    ("window_out_of_range", &[1, 2, 3], 60),
    // Pairwise creation: PEs 0 and 2 alone, while 1 and 3 compute and then pair.
    ("pairwise_two_pairs", &[4], 60),
    ("pairwise_element_types", &[2, 3, 4], 60),
    ("pairwise_mismatch", &[2, 3], 60),
    // 200 ms timeouts: a peer that never comes, then one that comes too late.
    ("pairwise_timeout", &[2, 3], 60),
    ("pairwise_opposite_orders", &[3], 60),
    ("pairwise_pool", &[2, 3], 60),
];

/// Messages in flight both ways, `close`, then `shmem_finalize`: this many separate jobs.
const CLOSE_FINALIZE_JOBS: usize = 20;

fn run_case(ctx: &mut ShmemCtx, case: &str) -> Check {
    if let Some(check) = testkit::mode_case(ctx, case, 1000, 150) {
        return check;
    }
    match case {
        "mismatched_ends" => testkit::mismatched_ends(ctx),
        "pairwise_element_types" => testkit::elements::pairwise_element_types(ctx),
        "element_types" => testkit::elements::element_types(ctx, 20),
        "mismatched_element_types" => testkit::elements::mismatched_element_types(ctx),
        "send_before_recv_8B_20KB_4MB" => testkit::send_before_recv(ctx, &[1, 2500, 524_288]),
        "reductions_match_serial" => {
            testkit::reductions_match_serial(ctx, 30, 5)?;
            // Longer than one chunk of the blocking all-reduce's symmetric scratch.
            testkit::reductions_match_serial(ctx, 3, 1500)
        }
        "close_with_traffic" => testkit::close_with_traffic(ctx, 40, 16),
        "collectives_match" => testkit::collectives_match(ctx),
        "racy_stress" => racy_stress(ctx),
        "async_held_message_intact" => async_held_message_intact(ctx),
        "creation_errors" => creation_errors(ctx),
        "reclaim_after_close" => {
            testkit::reclaim_after_close(ctx, ShmemCtx::reclaim, ShmemCtx::live_sets)
        }
        "close_then_finalize" => testkit::close_unread(ctx),
        "drop_without_close" => testkit::drop_without_close(ctx),
        "racy_whole_words" => testkit::racy_whole_words(ctx, 32, 40, 8192),
        "window_colliding_inserts" => wk::window_colliding_inserts(ctx, 150, 100),
        "window_fetch_add_totals" => wk::window_fetch_add_totals(ctx, 200),
        "window_locked_counters" => wk::window_locked_counters(ctx, 100),
        "window_put_get_8B_64KB" => wk::window_put_get(ctx, &[1, 3, 8192]),
        "window_mismatched_sizes" => wk::window_mismatched_sizes(ctx),
        "window_out_of_range" => wk::window_out_of_range(ctx),
        "pairwise_two_pairs" => testkit::pairwise::pairwise_two_pairs(ctx, 50),
        "pairwise_mismatch" => testkit::pairwise::pairwise_mismatch(ctx),
        "pairwise_timeout" => {
            testkit::pairwise::pairwise_timeout(ctx, std::time::Duration::from_millis(200))
        }
        "pairwise_pool" => pairwise_pool(ctx),
        "pairwise_opposite_orders" => {
            testkit::pairwise::pairwise_opposite_orders(ctx, std::time::Duration::from_millis(200))
        }
        other => Err(format!("unknown case {other}")),
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)*));
        }
    };
}

/// PEs in pairs (0,1), (2,3): both ends of each pair put into each other's racy view as fast
/// as they can (32 KB messages, so reads overlap puts) while reading it. Every element read is
/// a value some put wrote to that element (or the initial 0); per element the sends only go
/// forward (puts to one PE are ordered by the fence between them); no element comes from a
/// send more than two ahead of the count the view has published (data of send k + 2 is
/// ordered after the count of send k). After a barrier, the view is exactly the last send.
fn racy_stress(ctx: &mut ShmemCtx) -> Check {
    const LEN: usize = 4096;
    const SENDS: u64 = 2000;
    let specs = testkit::pair_specs(ctx, LEN, 1, 9)?;
    let mut chans = ctx.open::<Racy>(&specs).map_err(|e| e.to_string())?;
    if chans.is_empty() {
        ctx.barrier().map_err(|e| e.to_string())?;
        return Ok(());
    }
    let ch = &mut chans[0];
    let mut last = vec![0u64; LEN];
    let mut reads = 0u64;
    let mut nonzero = 0u64;
    let mut seq = 0u64;
    while seq < SENDS {
        seq += 1;
        ch.set_iteration(seq);
        ch.try_send_with(|b| testkit::fill(b, seq))
            .map_err(|e| format!("racy send {seq}: {e}"))?;
        for _ in 0..2 {
            let view = ch.recv().map_err(|e| e.to_string())?;
            let mut seen = [0u64; LEN];
            for (j, s) in seen.iter_mut().enumerate() {
                let v = view.load(j);
                if v == 0.0 {
                    ensure!(
                        last[j] == 0,
                        "element {j} went back to 0 after send {}",
                        last[j]
                    );
                    continue;
                }
                *s = decode(v, j)
                    .ok_or_else(|| format!("element {j} holds {v}: no put wrote that"))?;
            }
            // Order the element loads before the COUNT load in can_recv (an Acquire fence keeps
            // earlier loads before later ones); the sender's fence orders send k + 2's data
            // after send k's COUNT, which this pairs with.
            fence(Ordering::Acquire);
            ch.can_recv().map_err(|e| e.to_string())?;
            let counted = ch.stats().received;
            for (j, &s) in seen.iter().enumerate() {
                if s == 0 {
                    continue;
                }
                ensure!(
                    s >= last[j],
                    "element {j} went back from send {} to {s}",
                    last[j]
                );
                ensure!(
                    s <= counted + 2 && s <= SENDS,
                    "element {j} from send {s}, but only {counted} sends were published"
                );
                last[j] = s;
                nonzero += 1;
            }
            reads += 1;
        }
    }
    // Every put of both ends is complete after the barrier: the view is the last send, whole.
    ctx.barrier().map_err(|e| e.to_string())?;
    let view = chans[0].recv().map_err(|e| e.to_string())?;
    for j in 0..LEN {
        let v = view.load(j);
        ensure!(
            decode(v, j) == Some(SENDS),
            "after the barrier, element {j} is {v}, not from the last send {SENDS}"
        );
    }
    ensure!(nonzero > 0 && reads > 0, "the reader never saw data");
    let s = close_all(chans).map_err(|e| e.to_string())?;
    ensure!(
        s[0].received == s[0].peer_sent && s[0].peer_sent == SENDS,
        "racy counts: {:?}",
        s[0]
    );
    Ok(())
}

/// The message an Async receive lends stays whole and unchanged while the channel keeps
/// polling (`can_recv`) and the peer keeps sending: the sender only refills slots the receiver
/// released, never the one it holds. Pairs (0,1), (2,3); R = 1 and 2, both directions at once.
fn async_held_message_intact(ctx: &mut ShmemCtx) -> Check {
    for r in [1, 2] {
        let specs = testkit::pair_specs(ctx, 300, r, 4)?;
        let mut chans = ctx.open::<Async>(&specs).map_err(|e| e.to_string())?;
        if chans.is_empty() {
            ctx.barrier().map_err(|e| e.to_string())?;
            continue;
        }
        let ch = &mut chans[0];
        let mut seq = 0u64;
        let mut held = 0u64;
        let mut holds = 0u64;
        // At least 3000 rounds, and until something arrived (an oversubscribed peer may
        // start late; everything it sent stays receivable after it begins closing).
        let mut round = 0u64;
        while round < 3000 || holds == 0 {
            round += 1;
            if ch.can_send().map_err(|e| e.to_string())? {
                seq += 1;
                ch.try_send_with(|b| testkit::fill(b, seq))
                    .map_err(|e| e.to_string())?;
            }
            if round.is_multiple_of(3) {
                if let Some(m) = ch.recv().map_err(|e| e.to_string())? {
                    held = m.seq();
                }
            } else {
                // Poll without releasing what is held; the peer may see its other slots free.
                ch.can_recv().map_err(|e| e.to_string())?;
            }
            if let Some(m) = ch.latest() {
                ensure!(
                    m.seq() == held,
                    "latest() changed from {held} to {}",
                    m.seq()
                );
                testkit::check_whole(m.data(), held, &format!("R = {r}: held message"))?;
                holds += 1;
            }
        }
        // The loop ran until something was held; something must have been sent too.
        ensure!(seq > 0, "nothing was sent");
        let s = close_all(chans).map_err(|e| e.to_string())?;
        ensure!(s[0].received == s[0].peer_sent, "counts: {:?}", s[0]);
        ctx.barrier().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Collective creation with bad parameters fails on every PE: the PE at fault with its own
/// error, every other PE with `FailedElsewhere` naming it. Nothing is allocated, and a good
/// set opens afterwards.
fn creation_errors(ctx: &mut ShmemCtx) -> Check {
    let (rank, size) = (ctx.rank(), ctx.size());
    let cfg = ChannelConfig::new(4, 1).expect("valid");
    let spec = |peer, tag| ChannelSpec::new(peer, tag, cfg).expect("valid");
    let sets_before = ctx.live_sets();
    let judge = |name: &str,
                 faulty: usize,
                 e: Option<CreateError>,
                 ok: &dyn Fn(&CreateError) -> bool|
     -> Check {
        match e {
            Some(e) if rank == faulty => {
                ensure!(ok(&e), "{name}: PE {rank}: wrong error: {e}");
                eprintln!("  PE {rank} {name}: {e}");
                Ok(())
            }
            Some(CreateError::FailedElsewhere { failed_rank }) if failed_rank == faulty => Ok(()),
            other => Err(format!("{name}: PE {rank}: got {other:?}")),
        }
    };
    // PE 1 names a peer outside the world.
    let specs = if rank == 1 {
        vec![spec(size, 0)]
    } else {
        vec![]
    };
    let e = ctx.open::<Sync>(&specs).err();
    judge(
        "bad peer",
        1,
        e,
        &|e| matches!(e, CreateError::BadPeer { rank: 1, peer, size: s } if *peer == size && *s == size),
    )?;
    // PE 0 opens a channel to PE 1 that PE 1 does not open.
    let specs = if rank == 0 { vec![spec(1, 5)] } else { vec![] };
    let e = ctx.open::<Async>(&specs).err();
    judge("unmatched", 0, e, &|e| {
        matches!(
            e,
            CreateError::Unmatched {
                rank: 0,
                peer: 1,
                tag: 5
            }
        )
    })?;
    // PE 0 names (1, 3) twice.
    let specs = match rank {
        0 => vec![spec(1, 3), spec(1, 3)],
        1 => vec![spec(0, 3)],
        _ => vec![],
    };
    let e = ctx.open::<Racy>(&specs).err();
    judge("duplicate", 0, e, &|e| {
        matches!(
            e,
            CreateError::Duplicate {
                rank: 0,
                peer: 1,
                tag: 3
            }
        )
    })?;
    ensure!(
        ctx.live_sets() == sets_before,
        "failed creations allocated: {} sets, {sets_before} before",
        ctx.live_sets()
    );
    // The world is still usable.
    let mut chans = ctx
        .open::<Sync>(&testkit::ring_specs(ctx, 4, 1)?)
        .map_err(|e| e.to_string())?;
    for ch in &mut chans {
        ch.send(&[rank as f64; 4]).map_err(|e| e.to_string())?;
    }
    for ch in &mut chans {
        let p = ch.peer() as f64;
        let m = ch.recv().map_err(|e| e.to_string())?;
        ensure!(m.data() == [p; 4], "after the errors: got {:?}", m.data());
    }
    close_all(chans).map_err(|e| e.to_string())?;
    Ok(())
}

fn child(case: &str) -> ExitCode {
    let mut ctx = match ShmemCtx::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SHMEM init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rank = ctx.rank();
    let remote_asked = std::env::var_os("AIAC_SHMEM_REMOTE").is_some_and(|v| v == "1");
    let checked = if remote_asked && !ctx.remote_only() {
        Err("AIAC_SHMEM_REMOTE=1, but the context maps its peers".to_string())
    } else {
        run_case(&mut ctx, case).and_then(|()| {
            let (opened, mapped) = (ctx.ends_opened(), ctx.mapped_ends());
            // Which PEs share this node, SHMEM does not say: checked when the launcher put
            // every PE on one (its local size is the job's).
            let local = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE").ok();
            if local.and_then(|l| l.parse().ok()) != Some(ctx.size()) {
                return Ok(());
            }
            testkit::path_as_asked(case, ctx.size(), (opened, opened), mapped, remote_asked)
        })
    };
    if let Err(e) = checked {
        eprintln!("PE {rank}: {case}: {e}");
        ctx.abort(1);
    }
    if let Err(e) = ctx.finalize() {
        eprintln!("PE {rank}: {case}: finalize: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(case) = jobs::child_case(&args) {
        return child(case);
    }
    if std::env::var_os("AIAC_SHMEM_REMOTE").is_some_and(|v| v == "1") {
        println!("\nAIAC_SHMEM_REMOTE=1: every PE takes the between-nodes path to every peer");
    }
    let mut all = jobs::per_count(CASES);
    for k in 0..CLOSE_FINALIZE_JOBS {
        let n = 2 + k % 2;
        all.push(Job {
            name: format!("close_then_finalize #{k} np={n}"),
            ..Job::new("close_then_finalize", n, 30)
        });
    }
    jobs::run_all(
        &Launcher {
            program: "oshrun",
            what: "SHMEM",
            unit: "PEs",
        },
        &args,
        all,
    )
}

/// The pool of pairwise regions (4 MiB per PE by default): an end that does not fit is
/// refused with `PairPoolExhausted` at its PE and `FailedElsewhere` at its peer, and closed
/// ends give their regions back: 60 channels of 400 KB each, one after the other, fit in it;
/// so do the ends of opens that timed out: 3.2 MB carved three times for a peer that never
/// came, then for one that does.
fn pairwise_pool(ctx: &mut ShmemCtx) -> Check {
    let rank = ctx.rank();
    if rank < 2 {
        let peer = 1 - rank;
        let t = std::time::Duration::from_secs(30);
        let len = if rank == 0 { 1 << 20 } else { 10 };
        let spec = ChannelSpec::new(peer, 3, ChannelConfig::new(len, 1).unwrap()).unwrap();
        match (rank, ctx.open_pair::<Sync>(spec, t)) {
            (0, Err(CreateError::PairPoolExhausted { needed, pool, .. })) => {
                ensure!(
                    needed > pool,
                    "refused {needed} bytes from a pool of {pool}"
                );
            }
            (1, Err(CreateError::FailedElsewhere { failed_rank: 0 })) => {}
            (_, other) => return Err(format!("rank {rank}: oversized pairwise end: {other:?}")),
        }
        for k in 0..60u64 {
            let spec = ChannelSpec::new(peer, 4, ChannelConfig::new(25_000, 1).unwrap()).unwrap();
            let mut ch = ctx
                .open_pair::<Sync>(spec, t)
                .map_err(|e| format!("pairwise channel {k}: {e}"))?;
            let mut out = vec![0.0; 25_000];
            testkit::fill(&mut out, k + 1);
            ch.send(&out).map_err(|e| e.to_string())?;
            let m = ch.recv().map_err(|e| e.to_string())?;
            testkit::check_whole(m.data(), k + 1, "pairwise pool round")?;
            ch.close().map_err(|e| e.to_string())?;
        }
        let big = ChannelSpec::new(peer, 5, ChannelConfig::new(200_000, 1).unwrap()).unwrap();
        if rank == 0 {
            for k in 0..3 {
                let short = std::time::Duration::from_millis(50);
                match ctx.open_pair::<Sync>(big, short) {
                    Err(CreateError::PairTimeout { .. }) => {}
                    other => return Err(format!("lonely 3.2 MB open {k}: {other:?}")),
                }
            }
        }
        ctx.barrier().map_err(|e| e.to_string())?;
        let mut ch = ctx
            .open_pair::<Sync>(big, t)
            .map_err(|e| format!("3.2 MB pairwise channel after timeouts: {e}"))?;
        let mut out = vec![0.0; 200_000];
        testkit::fill(&mut out, 7);
        ch.send(&out).map_err(|e| e.to_string())?;
        let m = ch.recv().map_err(|e| e.to_string())?;
        testkit::check_whole(m.data(), 7, "3.2 MB pairwise channel")?;
        ch.close().map_err(|e| e.to_string())?;
    } else {
        ctx.barrier().map_err(|e| e.to_string())?;
    }
    ctx.barrier().map_err(|e| e.to_string())
}
