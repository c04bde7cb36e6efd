//! chan-testkit's backend-generic semantic checks, and the MPI backend's own, under real
//! `mpirun` with 1 to 4 ranks.
//!
//! `cargo test` runs this binary without a launcher; it then starts itself again under
//! `timeout … mpirun --oversubscribe -np N` once per case and judges each run by its exit
//! status (a hang is killed by the timeout and reported). Under mpirun it runs the case named
//! on its command line on every rank; a rank whose check fails prints why and calls
//! `MPI_Abort`, so no rank waits forever for a dead peer. Every case ends with
//! `MpiCtx::finalize`, which fails if any MPI request is still outstanding.
//!
//! `cargo test -p chan-mpi --all-features --test mpi_checks [-- FILTER]`

use chan_core::traits::*;
use chan_mpi::{MpiCtx, ReductionKind};
use chan_testkit::jobs::{self, Job, Launcher};
use chan_testkit::window as wk;
use chan_testkit::{self as testkit, Check};
use std::process::ExitCode;

/// Each case, the rank counts it runs with, and its time limit.
const CASES: &[(&str, &[usize], u64)] = &[
    ("async_semantics", &[2, 3, 4], 120),
    ("sync_semantics", &[2, 3, 4], 120),
    ("racy_semantics", &[2, 3, 4], 120),
    ("staged_sends", &[2, 3, 4], 120),
    ("mismatched_ends", &[2, 3], 60),
    ("element_types", &[2, 3, 4], 120),
    ("mismatched_element_types", &[2, 3], 60),
    ("send_before_recv_8B_20KB_4MB", &[2, 3], 60),
    ("reductions_iallreduce", &[1, 2, 3, 4], 60),
    ("reductions_tree", &[1, 2, 3, 4], 60),
    ("close_with_traffic", &[2, 3, 4], 120),
    ("reclaim_after_close", &[2, 3], 30),
    // 10^5 8-byte messages to a receiver that sleeps, R = 1 and 4, every mode.
    ("fast_sender_slow_receiver", &[2, 3], 240),
    ("drop_without_close", &[2, 3, 4], 60),
    ("collectives_match", &[1, 2, 3, 4, 6], 60),
    // Channels to a few ranks each, none to most: the handshake's lists are mostly empty.
    ("sparse_channels", &[6], 60),
    // 128 rings of 4 ranks, 64 KB racy messages written by MPI into one buffer per end.
    ("racy_whole_words", &[4], 240),
    ("window_colliding_inserts", &[1, 2, 3, 4], 120),
    ("window_fetch_add_totals", &[1, 2, 3, 4], 120),
    ("window_locked_counters", &[1, 2, 3], 120),
    ("window_put_get_8B_64KB", &[1, 2, 4], 120),
    ("window_mismatched_sizes", &[2, 3], 60),
    ("window_out_of_range", &[1, 2, 3], 60),
    // Pairwise creation: ranks 0 and 2 alone, while 1 and 3 compute and then pair.
    ("pairwise_two_pairs", &[4], 60),
    ("pairwise_element_types", &[2, 3, 4], 60),
    ("pairwise_mismatch", &[2, 3], 60),
    // 200 ms timeouts: a peer that never comes, then one that comes too late.
    ("pairwise_timeout", &[2, 3], 60),
    ("pairwise_opposite_orders", &[3], 60),
    ("pairwise_tag_reuse", &[2, 3], 60),
    // MPI_Ineighbor_alltoallv on a line of ranks, lengths differing per direction.
    ("neighbor_exchange", &[1, 2, 3, 4], 60),
    // Ranks that each keep as many threads busy as the machine has CPUs wait by yielding.
    ("hybrid_wait_policy", &[2], 60),
];

/// Cases run again where Open MPI can make no shared-memory window (its `sm` one-sided
/// component left out, as `OMPI_MCA_osc=ucx` does): every end between ranks of the node falls
/// back to the two-sided path, and the cases pass on it.
const NO_WINDOW_CASES: &[(&str, usize)] = &[
    ("async_semantics", 2),
    ("sync_semantics", 3),
    ("racy_semantics", 2),
    ("staged_sends", 2),
    ("element_types", 2),
    ("close_with_traffic", 3),
];

/// The launcher's words that leave Open MPI without shared-memory windows.
const NO_WINDOW_ARGS: &[&str] = &["--mca", "osc", "ucx"];

/// `close()` with messages in flight both ways, then `MPI_Finalize`: this many separate jobs.
const CLOSE_FINALIZE_JOBS: usize = 50;

fn run_case(ctx: &mut MpiCtx, case: &str) -> Check {
    if let Some(check) = testkit::mode_case(ctx, case, 1500, 200) {
        return check;
    }
    match case {
        "mismatched_ends" => testkit::mismatched_ends(ctx),
        "pairwise_element_types" => testkit::elements::pairwise_element_types(ctx),
        "element_types" => testkit::elements::element_types(ctx, 20),
        "mismatched_element_types" => testkit::elements::mismatched_element_types(ctx),
        "send_before_recv_8B_20KB_4MB" => testkit::send_before_recv(ctx, &[1, 2500, 524_288]),
        "reductions_iallreduce" => {
            ctx.set_reduction_kind(ReductionKind::Iallreduce);
            testkit::reductions_match_serial(ctx, 30, 5)
        }
        "reductions_tree" => {
            ctx.set_reduction_kind(ReductionKind::Tree);
            testkit::reductions_match_serial(ctx, 30, 5)
        }
        "close_with_traffic" => testkit::close_with_traffic(ctx, 50, 16),
        // Two-sided, a racy send is in flight until MPI completes it: R + 1 receives bound
        // the racy queue as the slots bound the others. On the node-local path it writes the
        // peer's buffer, and nothing queues.
        "fast_sender_slow_receiver" => (|| {
            for r in [1, 4] {
                let racy_bound = ctx.remote_only().then_some(r as u64 + 1);
                testkit::fast_sender_slow_receiver(ctx, 100_000, r, racy_bound)?;
            }
            Ok(())
        })(),
        "reclaim_after_close" if ctx.remote_only() || ctx.ranks_on_node() < ctx.size() => {
            ring_without_shared_windows(ctx)
        }
        "reclaim_after_close" => {
            testkit::reclaim_after_close(ctx, MpiCtx::reclaim, MpiCtx::live_windows)
        }
        "close_then_finalize" => testkit::close_unread(ctx),
        "drop_without_close" => testkit::drop_without_close(ctx),
        "collectives_match" => testkit::collectives_match(ctx),
        "sparse_channels" => testkit::sparse_channels(ctx, 20, 100),
        "racy_whole_words" => testkit::racy_whole_words(ctx, 128, 40, 8192),
        "window_colliding_inserts" => wk::window_colliding_inserts(ctx, 150, 100),
        "window_fetch_add_totals" => wk::window_fetch_add_totals(ctx, 200),
        "window_locked_counters" => wk::window_locked_counters(ctx, 100),
        "window_put_get_8B_64KB" => wk::window_put_get(ctx, &[1, 3, 8192]),
        "window_mismatched_sizes" => wk::window_mismatched_sizes(ctx),
        "window_out_of_range" => wk::window_out_of_range(ctx),
        "pairwise_two_pairs" => testkit::pairwise::pairwise_two_pairs(ctx, 50),
        "pairwise_mismatch" => testkit::pairwise::pairwise_mismatch(ctx),
        "pairwise_timeout" => pairwise_timeout_leaves_nothing(ctx),
        "pairwise_tag_reuse" => pairwise_tag_reuse(ctx),
        "neighbor_exchange" => neighbor_exchange(ctx),
        "hybrid_wait_policy" => hybrid_wait_policy(ctx),
        "pairwise_opposite_orders" => {
            testkit::pairwise::pairwise_opposite_orders(ctx, std::time::Duration::from_millis(200))
        }
        other => Err(format!("unknown case {other}")),
    }
}

/// `pairwise_timeout`, and no request of the timed-out rendezvous is left: the count of
/// outstanding requests is back to what it was before.
fn pairwise_timeout_leaves_nothing(ctx: &mut MpiCtx) -> Check {
    let before = ctx.outstanding_requests();
    testkit::pairwise::pairwise_timeout(ctx, std::time::Duration::from_millis(200))?;
    let after = ctx.outstanding_requests();
    if after != before {
        return Err(format!(
            "{after} requests outstanding after the pairwise timeouts, {before} before"
        ));
    }
    Ok(())
}

/// A neighbourhood exchange on a line of ranks (rank ± 1), the message from a to b
/// `2 + a + 2b` values long (so the two directions differ): 20 rounds, completed alternately
/// by `test` and by `wait`, deliver every neighbour's values to its own receive buffer; a
/// started exchange is one outstanding request, and none is left after each round or after
/// the drop. A rank that names itself as a neighbour fails the creation on every rank.
fn neighbor_exchange(ctx: &mut MpiCtx) -> Check {
    use chan_core::{CreateError, NeighborSpec};
    let (rank, size) = (ctx.rank(), ctx.size());
    let len = |a: usize, b: usize| 2 + a + 2 * b;
    let value = |a: usize, b: usize, i: usize, round: usize| {
        (a * 1000 + b * 100 + i) as f64 + 0.5 * round as f64
    };
    let peers: Vec<usize> = [rank.checked_sub(1), Some(rank + 1).filter(|&p| p < size)]
        .into_iter()
        .flatten()
        .collect();
    let specs: Vec<NeighborSpec> = peers
        .iter()
        .map(|&p| NeighborSpec {
            peer: p,
            send: len(rank, p),
            recv: len(p, rank),
        })
        .collect();
    let before = ctx.outstanding_requests();
    let mut nb = ctx.neighbor_exchange(&specs).map_err(|e| e.to_string())?;
    if nb.neighbors() != peers.len() {
        return Err(format!(
            "{} neighbours, want {}",
            nb.neighbors(),
            peers.len()
        ));
    }
    for round in 0..20 {
        for (k, &p) in peers.iter().enumerate() {
            let buf = nb.send_buf(k);
            if buf.len() != len(rank, p) {
                return Err(format!("send buffer to {p}: {} values", buf.len()));
            }
            for (i, v) in buf.iter_mut().enumerate() {
                *v = value(rank, p, i, round);
            }
        }
        nb.start().map_err(|e| e.to_string())?;
        if !nb.in_progress() || ctx.outstanding_requests() != before + 1 {
            return Err(format!(
                "round {round}: started, in progress {}, {} requests outstanding ({before} before)",
                nb.in_progress(),
                ctx.outstanding_requests()
            ));
        }
        if round % 2 == 0 {
            while !nb.test().map_err(|e| e.to_string())? {}
        } else {
            nb.wait().map_err(|e| e.to_string())?;
        }
        if nb.in_progress() || ctx.outstanding_requests() != before {
            return Err(format!(
                "round {round}: completed, {} requests outstanding ({before} before)",
                ctx.outstanding_requests()
            ));
        }
        for (k, &p) in peers.iter().enumerate() {
            let want: Vec<f64> = (0..len(p, rank))
                .map(|i| value(p, rank, i, round))
                .collect();
            if nb.recv_buf(k) != want.as_slice() {
                return Err(format!("round {round}: from {p}: {:?}", nb.recv_buf(k)));
            }
        }
    }
    drop(nb);
    // Rank 0 names itself: refused there, and every other rank hears of it.
    let bad = [NeighborSpec {
        peer: 0,
        send: 1,
        recv: 1,
    }];
    let mine: &[NeighborSpec] = if rank == 0 { &bad } else { &[] };
    match ctx.neighbor_exchange(mine) {
        Err(CreateError::BadPeer { .. }) if rank == 0 => {}
        Err(CreateError::FailedElsewhere { failed_rank: 0 }) if rank != 0 => {}
        Err(e) => return Err(format!("rank {rank}: a self-neighbour: {e}")),
        Ok(_) => return Err(format!("rank {rank}: a self-neighbour was accepted")),
    }
    if ctx.outstanding_requests() != before {
        return Err(format!(
            "{} requests outstanding after the drop, {before} before",
            ctx.outstanding_requests()
        ));
    }
    Ok(())
}

/// A (peer, tag) has one pairwise channel at a time over MPI (its MPI tags are the tag's):
/// opening it again while the first is open is refused at both ends, with an error that says
/// so; after `close()`, and after both ends dropped theirs (the close completes in the
/// background), it opens again and carries messages.
fn pairwise_tag_reuse(ctx: &mut MpiCtx) -> Check {
    use chan_core::{ChannelConfig, ChannelSpec, CommError, CreateError, Sync};
    let rank = ctx.rank();
    if rank < 2 {
        let peer = 1 - rank;
        let t = std::time::Duration::from_secs(30);
        let spec = ChannelSpec::new(peer, 60, ChannelConfig::new(3, 2).unwrap()).unwrap();
        let ping = |ch: &mut chan_core::Channel<chan_mpi::Mpi, Sync>, v: f64| -> Check {
            ch.send(&[v, v, v]).map_err(|e| e.to_string())?;
            let m = ch.recv().map_err(|e| e.to_string())?;
            if m.data() != [v, v, v] {
                return Err(format!("after reopening: got {:?}", m.data()));
            }
            Ok(())
        };
        let mut first = ctx.open_pair::<Sync>(spec, t).map_err(|e| e.to_string())?;
        match ctx.open_pair::<Sync>(spec, t) {
            Err(CreateError::Comm(CommError::Backend { message, .. }))
                if message.contains("already has a pairwise channel") => {}
            other => return Err(format!("rank {rank}: second open of a live tag: {other:?}")),
        }
        ping(&mut first, 1.0)?;
        first.close().map_err(|e| e.to_string())?;
        let mut second = ctx.open_pair::<Sync>(spec, t).map_err(|e| e.to_string())?;
        ping(&mut second, 2.0)?;
        ping(&mut second, 3.0)?;
        drop(second);
        let mut third = ctx.open_pair::<Sync>(spec, t).map_err(|e| e.to_string())?;
        ping(&mut third, 4.0)?;
        third.close().map_err(|e| e.to_string())?;
    }
    ctx.barrier().map_err(|e| e.to_string())
}

/// `reclaim_after_close` where the ranks do not all share one node's windows: a ring opens
/// and closes; under `AIAC_MPI_REMOTE=1` (two-sided ends only) no shared window may exist.
/// Across nodes a ring's neighbours may share none, so only the open and close are checked.
fn ring_without_shared_windows(ctx: &mut MpiCtx) -> Check {
    let chans = ctx
        .open::<chan_core::Async>(&testkit::ring_specs(ctx, 100, 2)?)
        .map_err(|e| e.to_string())?;
    let live = ctx.live_windows();
    chan_core::close_all(chans).map_err(|e| e.to_string())?;
    if ctx.remote_only() && live != 0 {
        return Err(format!("{live} windows under AIAC_MPI_REMOTE=1"));
    }
    Ok(())
}

/// The threads a rank of `case` says it keeps busy ([`MpiCtx::init_with_threads`]): as many
/// as the machine has CPUs for `hybrid_wait_policy`, so that 2 ranks outnumber the cores.
fn threads_of(case: &str) -> usize {
    match case {
        "hybrid_wait_policy" => launch_env::node_cpus().unwrap_or(2),
        _ => 1,
    }
}

/// Ranks started with more threads each than the node's CPUs share (2 ranks × the CPUs) wait
/// by yielding, whatever the launcher bound, unless `AIAC_WAIT` says otherwise; and their
/// channels work so.
fn hybrid_wait_policy(ctx: &mut MpiCtx) -> Check {
    let want = match std::env::var("AIAC_WAIT").as_deref() {
        Ok("spin") => chan_core::backend::WaitPolicy::Spin,
        _ => chan_core::backend::WaitPolicy::Yield,
    };
    if ctx.wait_policy() != want {
        return Err(format!(
            "{} ranks x {} threads on {:?} CPUs wait as {:?}, not {want:?}",
            ctx.size(),
            threads_of("hybrid_wait_policy"),
            launch_env::node_cpus(),
            ctx.wait_policy()
        ));
    }
    testkit::sync_semantics(ctx, 200, 13, 3)
}

fn child(case: &str) -> ExitCode {
    let mut ctx = match MpiCtx::init_with_threads(threads_of(case)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("MPI init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rank = ctx.rank();
    let remote_asked = std::env::var_os("AIAC_MPI_REMOTE").is_some_and(|v| v == "1");
    // Open MPI passes a launcher's `--mca osc LIST` to its processes as OMPI_MCA_osc.
    let no_window = std::env::var("OMPI_MCA_osc").is_ok_and(|v| !v.split(',').any(|c| c == "sm"));
    let checked = if remote_asked && !ctx.remote_only() {
        Err("AIAC_MPI_REMOTE=1, but the context takes the node-local path".to_string())
    } else {
        run_case(&mut ctx, case).and_then(|()| {
            let ends = (ctx.ends_opened(), ctx.ends_to_node());
            let two_sided = remote_asked || no_window;
            testkit::path_as_asked(case, ctx.size(), ends, ctx.node_ends(), two_sided)
        })
    };
    if let Err(e) = checked {
        eprintln!("rank {rank}: {case}: {e}");
        ctx.abort(1);
    }
    let outstanding = ctx.outstanding_requests();
    if let Err(e) = ctx.finalize() {
        eprintln!("rank {rank}: {case}: finalize: {e} ({outstanding} before finalize)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(case) = jobs::child_case(&args) {
        return child(case);
    }
    if std::env::var_os("AIAC_MPI_REMOTE").is_some_and(|v| v == "1") {
        println!("\nAIAC_MPI_REMOTE=1: every rank takes the two-sided path to every peer");
    }
    let mut all = jobs::per_count(CASES);
    for &(case, procs) in NO_WINDOW_CASES {
        all.push(Job {
            name: format!("{case} np={procs} no shared window"),
            open_mpi_args: NO_WINDOW_ARGS,
            ..Job::new(case, procs, 120)
        });
    }
    for k in 0..CLOSE_FINALIZE_JOBS {
        all.push(Job {
            name: format!("close_then_finalize #{k} np=2"),
            ..Job::new("close_then_finalize", 2, 60)
        });
    }
    jobs::run_all(
        &Launcher {
            program: "mpirun",
            what: "MPI",
            unit: "ranks",
        },
        &args,
        all,
    )
}
