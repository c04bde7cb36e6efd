//! Saved runs, read back from JSON: a run's report (`aiac run --json`, schema `aiac.run/1`,
//! see docs/json-schema.md) or the record `aiac sweep` leaves for a run that failed
//! (`aiac.failed-run/1`). The tables, CSV files and plots are all made from these, so
//! `aiac report` redraws exactly what `aiac run` and `aiac sweep` drew.

use chan_core::{ChannelStats, Histogram};
use jacobi::RankRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The schema of a failed run's record.
pub const FAILED_SCHEMA: &str = "aiac.failed-run/1";

/// min / mean / max over ranks.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// A run's configuration as reported (`config` in the JSON): the fields the tables and plots
/// need, and the whole object to tell configurations apart.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct SavedConfig {
    pub backend: String,
    pub ranks: usize,
    pub variant: String,
    pub exchange: String,
    pub halo_every: u64,
    pub max_in_flight: usize,
    pub check_every: u64,
    pub max_iters: u64,
    /// Everything, as written.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// Whether a run flag means anything for a run of `variant` on `backend` solving `problem`:
/// the rule `aiac sweep` skips flags by, and the summary and plots blank columns by.
pub fn applies(flag: &str, variant: &str, backend: &str, problem: &str) -> bool {
    match flag {
        // Sync over channels swaps halos; shared memory reads them in place.
        "--exchange" => variant == "sync" && backend != "shared",
        "--check-every" => variant == "sync",
        // Messages in flight: async and racy over channels.
        "--max-in-flight" => variant != "sync" && backend != "shared",
        "--offset" => problem == "laplace",
        _ => true,
    }
}

impl SavedConfig {
    /// [`applies`] for this run (flags that do not depend on the problem).
    pub fn applies(&self, flag: &str) -> bool {
        applies(flag, &self.variant, &self.backend, "")
    }

    /// The whole configuration as one canonical string: runs with equal keys are repeats.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The key without the process count: one configuration over several p. With `--global`
    /// (strong scaling) the blocks shrink as p grows; with `--local` (weak scaling) the
    /// global grid grows: either way that size and the process grid are left out.
    pub fn key_without_ranks(&self) -> String {
        let mut c = self.clone();
        c.ranks = 0;
        c.rest.remove("process_grid");
        c.rest.remove(if self.is_global_size() {
            "local"
        } else {
            "global"
        });
        c.key()
    }

    /// `--global N` (strong scaling) rather than `--local N` (weak scaling).
    pub fn is_global_size(&self) -> bool {
        matches!(self.rest.get("size"), Some(Value::Object(m)) if m.contains_key("global"))
    }

    /// `sync`, `async`, `racy`.
    pub fn is_sync(&self) -> bool {
        self.variant == "sync"
    }
}

/// Message counts summed over ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Messages {
    pub sent: u64,
    pub skipped: u64,
    pub received: u64,
    pub superseded: u64,
}

/// Reported and true final residual.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Residual {
    pub reported: Option<f64>,
    #[serde(rename = "true")]
    pub true_residual: f64,
}

/// A run's report (`aiac.run/1`), as read back.
#[derive(Debug, Clone, Deserialize)]
pub struct SavedRun {
    pub converged: bool,
    pub stop: String,
    pub iterations: Spread,
    pub time_s: f64,
    pub updates_per_s: f64,
    pub residual: Residual,
    pub tol: f64,
    pub messages: Messages,
    #[serde(default)]
    pub error_max: Option<f64>,
    pub config: SavedConfig,
    pub ranks: Vec<RankRecord>,
}

impl SavedRun {
    /// `converged`; `max_iters` (stopped at `--max-iters`); or `not_converged` (a convergence
    /// claim the true residual did not confirm, possible with `--no-confirm`).
    pub fn status(&self) -> &'static str {
        if self.converged {
            "converged"
        } else if self.stop == "max_iters" {
            "max_iters"
        } else {
            "not_converged"
        }
    }

    /// Iterations per second: the mean iterations over ranks over the solve time.
    pub fn iteration_rate(&self) -> f64 {
        if self.time_s > 0.0 {
            self.iterations.mean / self.time_s
        } else {
            0.0
        }
    }
}

/// What `aiac sweep` records for a run that failed or timed out (`aiac.failed-run/1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedRun {
    pub schema: String,
    /// `failed` (exit code 1, a signal, or no readable report) or `timeout`.
    pub status: String,
    /// The exit code, when the run exited.
    pub exit_code: Option<i32>,
    /// The command that was run.
    pub command: Vec<String>,
    /// Its output (stdout and stderr), relative to this file's directory.
    pub log: String,
    /// The repeat (0-based).
    pub repeat: u32,
    /// The configuration, as the run's report would have said it.
    pub config: SavedConfig,
}

/// One run of a set: its report, or why it has none.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ok(Box<SavedRun>),
    Failed(Box<FailedRun>),
}

impl Outcome {
    pub fn config(&self) -> &SavedConfig {
        match self {
            Outcome::Ok(r) => &r.config,
            Outcome::Failed(f) => &f.config,
        }
    }
    pub fn run(&self) -> Option<&SavedRun> {
        match self {
            Outcome::Ok(r) => Some(r),
            Outcome::Failed(_) => None,
        }
    }
}

/// Read a run's report or a failed run's record.
pub fn load(path: &Path) -> Result<Outcome, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse a run's report or a failed run's record.
pub fn parse(bytes: &[u8]) -> Result<Outcome, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let schema = v.get("schema").and_then(Value::as_str).unwrap_or("");
    if schema == jacobi::REPORT_SCHEMA {
        serde_json::from_value(v)
            .map(|r| Outcome::Ok(Box::new(r)))
            .map_err(|e| format!("not a valid {} report: {e}", jacobi::REPORT_SCHEMA))
    } else if schema == FAILED_SCHEMA {
        serde_json::from_value(v)
            .map(|r| Outcome::Failed(Box::new(r)))
            .map_err(|e| format!("not a valid {FAILED_SCHEMA} record: {e}"))
    } else if schema.is_empty() {
        Err(format!(
            "no \"schema\" field: not an aiac report ({} or {FAILED_SCHEMA})",
            jacobi::REPORT_SCHEMA
        ))
    } else {
        Err(format!(
            "schema \"{schema}\" is not one this aiac reads ({} or {FAILED_SCHEMA})",
            jacobi::REPORT_SCHEMA
        ))
    }
}

/// The JSON files a list of paths names: files as given, directories' `*.json` (and their
/// `runs/` subdirectory's) in name order. Hidden files (temporaries) are skipped.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            for dir in [p.clone(), p.join("runs")] {
                let Ok(rd) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for e in rd.flatten() {
                    let path = e.path();
                    let name = e.file_name().to_string_lossy().into_owned();
                    if path.is_file() && name.ends_with(".json") && !name.starts_with('.') {
                        found.push(path);
                    }
                }
            }
            found.sort();
            if found.is_empty() {
                return Err(format!("{}: no .json file in it", p.display()));
            }
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    Ok(out)
}

/// One histogram of every halo channel of a rank (those in the run's own mode; `which` picks
/// it, e.g. `|ch| &ch.batches`), as (value, count) buckets summed.
pub fn channel_buckets(
    rank: &RankRecord,
    variant: &str,
    which: impl Fn(&ChannelStats) -> &Histogram,
) -> Vec<(u64, u64)> {
    let mut sum: std::collections::BTreeMap<u64, u64> = Default::default();
    for ch in rank.channels.iter().filter(|ch| ch.mode.name() == variant) {
        for (v, c) in which(ch).nonzero() {
            *sum.entry(v as u64).or_default() += c;
        }
    }
    sum.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(converged: bool, stop: &str) -> SavedRun {
        serde_json::from_value(serde_json::json!({
            "converged": converged, "stop": stop,
            "iterations": {"min": 1.0, "mean": 1.0, "max": 1.0},
            "time_s": 1.0, "updates_per_s": 1.0,
            "residual": {"reported": null, "true": 1.0}, "tol": 1e-6,
            "messages": {"sent": 0, "skipped": 0, "received": 0, "superseded": 0},
            "config": {"backend": "threads", "ranks": 1, "variant": "sync", "exchange": "blocking",
                       "halo_every": 1, "max_in_flight": 1, "check_every": 1, "max_iters": 10},
            "ranks": []
        }))
        .expect("a minimal report")
    }

    #[test]
    fn status_tells_an_unconfirmed_claim_from_the_iteration_limit() {
        assert_eq!(run(true, "criterion").status(), "converged");
        assert_eq!(run(false, "max_iters").status(), "max_iters");
        assert_eq!(run(false, "criterion").status(), "not_converged");
    }
}
