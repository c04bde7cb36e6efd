//! mpi-probe under real `mpirun`: the kernel's and the experiments' data from Rust, the
//! request scope completing what a closure left active, and refused settings and job sizes.
//!
//! `cargo test` runs this binary without a launcher; it then starts itself again under
//! `timeout … mpirun --oversubscribe -np N` once per case (chan-testkit's harness) and judges
//! each run by its exit status (a hang is killed by the timeout and reported). Under mpirun
//! it runs the case named on its command line on every rank; a rank whose check fails prints
//! why and aborts the job.
//!
//! `cargo test -p mpi-probe --test probe_jobs [-- FILTER]`

use chan_core::traits::*;
use chan_mpi::MpiCtx;
use chan_testkit::jobs::{self, Launcher};
use mpi_probe::request::Requests;
use mpi_probe::{
    BlockingExchange, ChannelPath, Comm, Error, Probe, Protocol, SettingError, Settings,
    SizesError, Strategy, WAITING,
};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// A failed property.
type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        let holds: bool = $cond;
        if !holds {
            return Err(format!($($fmt)*));
        }
    };
}

/// Each case, the rank counts it runs with, and its time limit.
const CASES: &[(&str, &[usize], u64)] = &[
    ("kernel_finds_a_threshold", &[2], 120),
    ("experiments_report_verdicts", &[2], 120),
    ("scope_cancels_a_left_receive", &[2], 30),
    ("scope_waits_for_a_left_send", &[2], 60),
    ("settings_refused_on_both_ranks", &[2], 60),
    ("two_ranks_only", &[1, 3], 60),
];

/// 1 KiB goes eagerly and 1 MiB by rendezvous on every MPI the project runs on (Open MPI's
/// shared memory and TCP, MPICH over UCX).
const SMALL: usize = 1 << 10;
const LARGE: usize = 1 << 20;

fn settings(ms: u64, reps: usize) -> Settings {
    Settings::new(Duration::from_millis(ms), reps).expect("within range")
}

fn kernel(ctx: &mut MpiCtx) -> Check {
    let report = {
        let mut p = Probe::new(ctx, settings(2, 3)).map_err(|e| e.to_string())?;
        p.run_kernel(&[SMALL, LARGE]).map_err(|e| e.to_string())?
    };
    let Some(r) = report else {
        ensure!(ctx.rank() == 1, "rank 0 got no report");
        return Ok(());
    };
    ensure!(ctx.rank() == 0, "rank 1 got a report");
    let sizes: Vec<usize> = r.rows.iter().map(|r| r.size).collect();
    ensure!(sizes == [SMALL, LARGE], "rows {sizes:?}");
    let protocols: Vec<Protocol> = r.rows.iter().map(|r| r.protocol()).collect();
    ensure!(
        protocols == [Protocol::Eager, Protocol::Rendezvous],
        "{protocols:?}: {r:#?}"
    );
    let (Some(last), Some(first)) = (r.threshold.last_eager, r.threshold.first_rendezvous) else {
        return Err(format!("no threshold between {SMALL} and {LARGE}: {r:#?}"));
    };
    // Bisected to 1/64 of the threshold, between the sizes measured.
    ensure!(
        SMALL <= last && last < first && first <= LARGE && first - last <= (last / 64).max(1),
        "threshold {last}..{first}: {r:#?}"
    );
    for row in &r.rows {
        ensure!(row.transfer > 0.0, "no transfer time: {row:?}");
        for o in row.overlap().values() {
            ensure!((0.0..=1.0).contains(&o), "overlap {o}: {row:?}");
        }
    }
    // The path the report names is the one chan-mpi counted.
    let node_local = ctx.node_ends() > 0;
    ensure!(
        (r.channel == ChannelPath::NodeLocal) == node_local,
        "channel {:?}, node-local ends {}",
        r.channel,
        ctx.node_ends()
    );
    Ok(())
}

fn experiments(ctx: &mut MpiCtx) -> Check {
    let e = |e: Error| e.to_string();
    let mut p = Probe::new(ctx, settings(5, 3)).map_err(e)?;
    let two_way = p.two_way(&[SMALL, LARGE]).map_err(e)?;
    let cumulative = p.cumulative(&[SMALL], 3).map_err(e)?;
    let waiting = p.waiting(&[SMALL]).map_err(e)?;
    let rank = p.rank();
    drop(p);
    let (Some(two_way), Some(cumulative), Some(waiting)) = (two_way, cumulative, waiting) else {
        ensure!(rank == 1, "rank 0 got no rows");
        return Ok(());
    };
    ensure!(
        two_way[0].blocking() == BlockingExchange::Completes,
        "{SMALL} B both ways: {:?}",
        two_way[0]
    );
    ensure!(
        two_way[1].early == [0, 0] && two_way[1].blocking() == BlockingExchange::WouldDeadlock,
        "{LARGE} B both ways: {:?}",
        two_way[1]
    );
    let c = &cumulative[0];
    ensure!(
        c.early.len() == 3 && c.alone() == Protocol::Eager,
        "3 × {SMALL} B: {c:?}"
    );
    let w = &waiting[0];
    ensure!(
        w.post.len() == WAITING.len() && w.mpi.len() == WAITING.len(),
        "{w:?}"
    );
    ensure!(WAITING[1].0 == Strategy::Early, "{:?}", WAITING);
    for (i, (post, mpi)) in w.post.iter().zip(&w.mpi).enumerate() {
        for side in 0..2 {
            ensure!(
                mpi[side] >= post[side] && post[side] > 0.0,
                "case {i}: {w:?}"
            );
            let o = w.overlap(i, side);
            ensure!((0.0..=1.0).contains(&o), "case {i}: overlap {o}");
        }
    }
    Ok(())
}

/// A receive a scope's closure left active (it returned an error, it panicked) is cancelled
/// when the scope ends: the message sent after is received by the next receive posted, which
/// would wait forever (the job's timeout) had the first receive stayed posted and taken it.
/// The buffer of the cancelled receive is not written.
fn scope_cancels(ctx: &mut MpiCtx) -> Check {
    const TAG: i32 = 7;
    let comm = Comm::pair(ctx).map_err(|e| e.to_string())?;
    let mut requests = Requests::new(1);
    for how in ["error", "panic"] {
        let mut left = vec![0u8; 64];
        if comm.rank() == 1 {
            if how == "error" {
                let r: Result<(), Error> = requests.scope(&comm, |s| {
                    let _left = s.irecv(&mut left, TAG)?;
                    Err(Error::Ranks(0))
                });
                ensure!(matches!(r, Err(Error::Ranks(0))), "{r:?}");
            } else {
                let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    requests.scope(&comm, |s| {
                        let _left = s.irecv(&mut left, TAG).expect("posted");
                        panic!("a closure that panics with a receive posted");
                    })
                }));
                ensure!(unwound.is_err(), "the closure panicked");
            }
        }
        comm.barrier().map_err(|e| e.to_string())?;
        let mut msg = vec![0u8; 64];
        if comm.rank() == 0 {
            msg.fill(0xab);
            requests
                .scope(&comm, |s| s.isend(&msg, TAG)?.wait())
                .map_err(|e| e.to_string())?;
        } else {
            requests
                .scope(&comm, |s| s.irecv(&mut msg, TAG)?.wait())
                .map_err(|e| e.to_string())?;
            ensure!(
                msg.iter().all(|&b| b == 0xab),
                "{how}: the message went elsewhere"
            );
            ensure!(
                left.iter().all(|&b| b == 0),
                "{how}: the cancelled receive's buffer was written"
            );
        }
    }
    Ok(())
}

/// A send a scope's closure left uncompleted (its request dropped, or forgotten) is waited
/// for when the scope ends: the scope returns only once the receiver, which posts its receive 300 ms
/// later, has the message (1 MiB: a rendezvous, so the send cannot complete before). Without
/// that wait the scope would return at once and the buffer be the caller's to change while
/// MPI still reads it.
fn scope_waits(ctx: &mut MpiCtx) -> Check {
    const TAG: i32 = 8;
    const LATE: Duration = Duration::from_millis(300);
    let comm = Comm::pair(ctx).map_err(|e| e.to_string())?;
    let mut requests = Requests::new(1);
    let mut buf = vec![0u8; LARGE];
    comm.barrier().map_err(|e| e.to_string())?;
    if comm.rank() == 0 {
        buf.fill(0xcd);
        let t = Instant::now();
        requests
            .scope(&comm, |s| {
                // Dropped uncompleted: the same as `mem::forget` (a `Request` has no `Drop`;
                // the scope holds its handle).
                let _ = s.isend(&buf, TAG)?;
                Ok::<_, Error>(())
            })
            .map_err(|e| e.to_string())?;
        let took = t.elapsed();
        ensure!(
            took >= LATE - Duration::from_millis(50),
            "the scope returned after {took:?}, before the receive was posted"
        );
        // The caller's again.
        buf.fill(0);
    } else {
        std::thread::sleep(LATE);
        requests
            .scope(&comm, |s| s.irecv(&mut buf, TAG)?.wait())
            .map_err(|e| e.to_string())?;
        ensure!(buf.iter().all(|&b| b == 0xcd), "the message arrived whole");
    }
    Ok(())
}

/// Settings out of range are refused on both ranks alike, naming the setting, before any
/// message: nobody waits for the other.
fn settings_refused(ctx: &mut MpiCtx) -> Check {
    let mut p = Probe::new(ctx, Settings::default()).map_err(|e| e.to_string())?;
    let refused = |r: Result<_, Error>| match r {
        Err(Error::Setting(e)) => Ok(e),
        other => Err(format!("not refused: {other:?}")),
    };
    let e = refused(p.run_kernel(&[]).map(|_| ()))?;
    ensure!(e == SettingError::Sizes(SizesError::Empty), "{e:?}");
    let e = refused(p.two_way(&[4096, 1024]).map(|_| ()))?;
    ensure!(
        e == SettingError::Sizes(SizesError::NotAscending(1024, 4096)),
        "{e:?}"
    );
    let e = refused(p.cumulative(&[1024], 1).map(|_| ()))?;
    ensure!(e == SettingError::Count(1), "{e:?}");
    ensure!(!e.to_string().contains("--"), "a flag in {e}");
    // Still in step: one measurement after the refusals.
    p.waiting(&[64]).map_err(|e| e.to_string())?;
    Ok(())
}

fn two_ranks_only(ctx: &mut MpiCtx) -> Check {
    let size = ctx.size();
    match Probe::new(ctx, Settings::default()) {
        Err(Error::Ranks(n)) if n == size => Ok(()),
        Err(e) => Err(format!("{e}")),
        Ok(_) => Err(format!("a probe on {size} ranks")),
    }
}

fn run_case(ctx: &mut MpiCtx, case: &str) -> Check {
    match case {
        "kernel_finds_a_threshold" => kernel(ctx),
        "experiments_report_verdicts" => experiments(ctx),
        "scope_cancels_a_left_receive" => scope_cancels(ctx),
        "scope_waits_for_a_left_send" => scope_waits(ctx),
        "settings_refused_on_both_ranks" => settings_refused(ctx),
        "two_ranks_only" => two_ranks_only(ctx),
        other => Err(format!("no case {other}")),
    }
}

fn child(case: &str) -> ExitCode {
    let mut ctx = match MpiCtx::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("MPI init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rank = ctx.rank();
    if let Err(e) = run_case(&mut ctx, case) {
        eprintln!("rank {rank}: {case}: {e}");
        ctx.abort(1);
    }
    if let Err(e) = ctx.finalize() {
        eprintln!("rank {rank}: {case}: finalize: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(case) = jobs::child_case(&args) {
        return child(case);
    }
    jobs::run_all(
        &Launcher {
            program: "mpirun",
            what: "mpi-probe",
            unit: "ranks",
        },
        &args,
        jobs::per_count(CASES),
    )
}
