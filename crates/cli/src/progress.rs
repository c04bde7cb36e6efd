//! What a person watching sees while aiac works: one updating line per run (an indicatif bar
//! on a terminal, a plain line every second otherwise), and a bar over a sweep's runs.
//!
//! The solver's side of a run's progress line is [`Hook`]: the solver calls it at most ten
//! times a second from its iteration loop, and it only stores four atomics. A display thread
//! of the CLI reads them and draws, so the loop never formats, allocates, locks or writes.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use jacobi::{Config, Progress, ProgressSample};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the display thread looks at the samples.
const TICK: Duration = Duration::from_millis(100);
/// Plain lines (not a terminal): one per this interval at most.
const LINE_EVERY: Duration = Duration::from_secs(1);

/// Where the solver leaves its latest sample.
///
/// ## Memory ordering
/// Relaxed throughout: the fields are independent display values; a line that mixes two
/// consecutive samples is harmless. `seq` (bumped last) only tells the display that something
/// new arrived.
#[derive(Debug, Default)]
pub(crate) struct Hook {
    iteration: AtomicU64,
    residual: AtomicU64,
    elapsed_ns: AtomicU64,
    seq: AtomicU64,
}

impl Progress for Hook {
    fn update(&self, s: &ProgressSample) {
        self.iteration.store(s.iteration, Relaxed);
        self.residual.store(s.residual.to_bits(), Relaxed);
        self.elapsed_ns.store(
            u64::try_from(s.elapsed.as_nanos()).unwrap_or(u64::MAX),
            Relaxed,
        );
        self.seq.fetch_add(1, Relaxed);
    }
}

/// A sample as the display reads it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    iteration: u64,
    residual: f64,
    elapsed: Duration,
}

impl Hook {
    fn read(&self) -> Seen {
        Seen {
            iteration: self.iteration.load(Relaxed),
            residual: f64::from_bits(self.residual.load(Relaxed)),
            elapsed: Duration::from_nanos(self.elapsed_ns.load(Relaxed)),
        }
    }
}

/// A run's progress line, drawn by its own thread until dropped (which clears it).
pub(crate) struct RunProgress {
    hook: Arc<Hook>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl RunProgress {
    /// Start showing the progress of a run of `cfg` on stderr.
    pub(crate) fn start(cfg: &Config) -> Self {
        let hook = Arc::new(Hook::default());
        let (tx, rx) = mpsc::channel::<()>();
        let tol = cfg.criterion.tol();
        let max_iters = cfg.max_iters;
        let h = Arc::clone(&hook);
        let terminal = std::io::stderr().is_terminal();
        let thread = std::thread::Builder::new()
            .name("aiac-progress".into())
            .spawn(move || display(&h, &rx, tol, max_iters, terminal))
            .ok();
        RunProgress {
            hook,
            stop: Some(tx),
            thread,
        }
    }

    /// The hook to give the solver.
    pub(crate) fn hook(&self) -> &dyn Progress {
        &*self.hook
    }
}

impl Drop for RunProgress {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Seen {
    /// Seconds elapsed, and iterations per second so far (0 before any time passed).
    fn rate(&self) -> (f64, f64) {
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.iteration as f64 / secs
        } else {
            0.0
        };
        (secs, rate)
    }
}

/// The line: iteration, residual against tol, iterations per second, elapsed.
fn line(s: &Seen, tol: f64) -> String {
    let (secs, rate) = s.rate();
    format!(
        "iteration {:>8}   residual {:.3e} (tol {:.1e})   {} it/s   {:.1} s",
        s.iteration,
        s.residual,
        tol,
        human(rate),
        secs
    )
}

/// The same, short enough for a bar on an 80-column terminal.
fn short_line(s: &Seen, tol: f64) -> String {
    let (secs, rate) = s.rate();
    format!(
        "it {} · res {:.2e} (tol {:.0e}) · {} it/s · {:.1} s",
        s.iteration,
        s.residual,
        tol,
        human(rate),
        secs
    )
}

/// 12345.6 → "12.3k".
pub(crate) fn human(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// How far the residual has come from its first value `r0` to `tol`, on a log scale, in
/// thousandths.
fn permille(r0: f64, r: f64, tol: f64) -> u64 {
    if !(r0 > 0.0 && r > 0.0 && tol > 0.0) || r <= tol {
        return if r <= tol { 1000 } else { 0 };
    }
    if r0 <= tol {
        return 1000;
    }
    let f = (r0 / r).ln() / (r0 / tol).ln();
    (f.clamp(0.0, 1.0) * 1000.0) as u64
}

fn display(hook: &Hook, stop: &mpsc::Receiver<()>, tol: f64, max_iters: u64, terminal: bool) {
    let bar = terminal.then(|| {
        let b = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner:.green} [{bar:20.cyan/blue}] {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_message(format!(
            "starting (tol {tol:.0e}, at most {max_iters} iterations)"
        ));
        b
    });
    let mut seen_seq = 0;
    let mut r0: Option<f64> = None;
    let mut last_line: Option<Duration> = None;
    loop {
        let stopping = !matches!(
            stop.recv_timeout(TICK),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        if stopping {
            // Without a terminal, a run shorter than a tick still shows one line.
            if bar.is_none() && last_line.is_none() && hook.seq.load(Relaxed) > 0 {
                eprintln!("[aiac] {}", line(&hook.read(), tol));
            }
            break;
        }
        let seq = hook.seq.load(Relaxed);
        if let Some(b) = &bar {
            b.tick();
        }
        if seq == seen_seq {
            continue;
        }
        seen_seq = seq;
        let s = hook.read();
        let first = *r0.get_or_insert(s.residual);
        match &bar {
            Some(b) => {
                b.set_position(permille(first, s.residual, tol));
                b.set_message(short_line(&s, tol));
            }
            None => {
                if last_line.is_none_or(|t| s.elapsed >= t + LINE_EVERY) {
                    last_line = Some(s.elapsed);
                    eprintln!("[aiac] {}", line(&s, tol));
                }
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// A sweep's progress: a bar over its runs on a terminal, one line per run otherwise.
pub(crate) struct SweepProgress {
    bar: Option<ProgressBar>,
    total: usize,
    quiet: bool,
}

impl SweepProgress {
    pub(crate) fn new(total: usize, quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner:.green} run {pos}/{len} [{bar:24.cyan/blue}] {elapsed} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        SweepProgress { bar, total, quiet }
    }

    /// Run `index` (0-based), described by `what`, starts.
    pub(crate) fn starting(&self, index: usize, what: &str) {
        match &self.bar {
            Some(b) => b.set_message(what.to_string()),
            None if !self.quiet => {
                eprintln!("[aiac sweep] run {}/{}: {what}", index + 1, self.total)
            }
            None => {}
        }
    }

    /// It ended: `result` says how.
    pub(crate) fn finished(&self, index: usize, what: &str, result: &str) {
        match &self.bar {
            Some(b) => {
                b.println(format!(
                    "  run {}/{}: {what}: {result}",
                    index + 1,
                    self.total
                ));
                b.inc(1);
            }
            None if !self.quiet => eprintln!("[aiac sweep]   {result}"),
            None => {}
        }
    }

    /// A message that must be seen.
    pub(crate) fn warn(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }
}

impl Drop for SweepProgress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_logarithmic_from_the_first_residual_to_tol() {
        assert_eq!(permille(1.0, 1.0, 1e-4), 0);
        assert_eq!(permille(1.0, 1e-2, 1e-4), 500);
        assert_eq!(permille(1.0, 1e-5, 1e-4), 1000);
        assert_eq!(permille(1.0, 2.0, 1e-4), 0);
        assert_eq!(permille(f64::NAN, 0.5, 1e-4), 0);
    }

    #[test]
    fn human_rates() {
        assert_eq!(human(950.0), "950");
        assert_eq!(human(12_345.0), "12.3k");
        assert_eq!(human(2.5e6), "2.50M");
    }

    #[test]
    fn the_hook_keeps_the_latest_sample() {
        let h = Hook::default();
        h.update(&ProgressSample {
            iteration: 7,
            residual: 0.25,
            tol: 1e-4,
            elapsed: Duration::from_millis(1500),
            max_iters: 10,
        });
        let s = h.read();
        assert_eq!(
            (s.iteration, s.residual, s.elapsed),
            (7, 0.25, Duration::from_millis(1500))
        );
        assert!(line(&s, 1e-4).contains("iteration        7"));
    }
}
