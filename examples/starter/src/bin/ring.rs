//! `ring [RANKS] [LAPS]`: a token round a ring of RANKS threads (default 4) LAPS times (default
//! 1000) over synchronous channels; exit 1 when it does not come back as LAPS · Σ ranks.

use aiac_starter::ring;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let (Ok(ranks), Ok(laps)) = (
        args.next().unwrap_or(Ok(4)),
        args.next().unwrap_or(Ok(1000)),
    ) else {
        eprintln!("ring: RANKS and LAPS must be whole numbers");
        return std::process::ExitCode::FAILURE;
    };
    let world = match chan_threads::World::new(ranks as usize) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("ring: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let tokens = world.run(|ctx| ring(ctx, laps));
    let want = (laps * ranks * (ranks.saturating_sub(1)) / 2) as f64;
    match &tokens[0] {
        Ok(t) if *t == want => {
            println!("ring: {ranks} ranks, {laps} laps, token {t} as expected");
            std::process::ExitCode::SUCCESS
        }
        Ok(t) => {
            eprintln!("ring: token {t}, expected {want}");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("ring: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
