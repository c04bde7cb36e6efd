//! Saved runs, read back from JSON: a run's report (`aiac run --json`, a [`jacobi::Report`],
//! schema `aiac.run/4`, see docs/json-schema.md) or the record `aiac sweep` leaves for a run
//! that failed (`aiac.failed-run/2`; `/1`, whose `config` is schema 3's, reads too). The tables, CSV files and plots are all made from these
//! typed values, so `aiac report` redraws exactly what `aiac run` and `aiac sweep` drew.
//! Reports of the earlier schemas are read too: `aiac.run/3` (the method's settings flat),
//! `aiac.run/2` (before multisplitting) and `aiac.run/1` (Jacobi only), their missing fields
//! taking the values every run had then (solver jacobi, no preconditioner).

use crate::args::BackendArg;
use chan_core::{ChannelStats, Histogram, ModeKind};
use clap::ValueEnum;
use jacobi::{
    Applies, Context, Operator, RankRecord, Report, RunConfig, Setting, SizeSpec, Variant,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The schema of a failed run's record.
pub(crate) const FAILED_SCHEMA: &str = "aiac.failed-run/2";

/// The schema of a failed run's record before `aiac.run/4`: its `config` is schema 3's.
pub(crate) const FAILED_SCHEMA_V1: &str = "aiac.failed-run/1";

/// What the tables and plots ask of a run's configuration.
pub(crate) trait ConfigExt {
    /// Where this run ran, for the settings' rule.
    fn context(&self) -> Context;
    /// Whether `setting` meant something in this run ([`Setting::applies`]): its column is
    /// blank where it did not.
    fn applies(&self, setting: Setting) -> bool;
    /// The whole configuration as one canonical string: runs with equal keys are repeats.
    fn key(&self) -> String;
    /// The key without the process count: one configuration over several p. With `--global`
    /// (strong scaling) the blocks shrink as p grows; with `--local` (weak scaling) the
    /// global grid grows: either way that size and the process grid are left out, and so are a
    /// matrix's rows of each rank.
    fn key_without_ranks(&self) -> String;
    /// `--global N` (strong scaling) rather than `--local N` (weak scaling); a matrix always.
    fn is_global_size(&self) -> bool;
    /// `sync`, `async`, `racy`.
    fn variant(&self) -> Variant;
}

impl ConfigExt for RunConfig {
    fn context(&self) -> Context {
        // A backend this aiac does not know: a channel backend, nothing more known.
        let backend = BackendArg::from_str(&self.backend, false)
            .map_or(jacobi::Backend::CHANNELS, |b| b.info().backend);
        Context {
            threads_per_rank: self.threads_per_rank,
            operator: match self.matrix {
                Some(_) => Operator::Matrix,
                None => Operator::Grid(self.config.problem),
            },
            ..self.config.context(backend)
        }
    }

    fn applies(&self, setting: Setting) -> bool {
        setting.applies(&self.context()) == Applies::Yes
    }

    fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn key_without_ranks(&self) -> String {
        let mut c = self.clone();
        let none = jacobi::Dims::cube(0);
        c.ranks = 0;
        c.process_grid = none;
        if self.is_global_size() {
            c.local = none;
        } else {
            c.global = none;
        }
        if let Some(m) = &mut c.matrix {
            m.row_bounds.clear(); // the rows of each rank
                                  // How the rows were stored, and their bytes an entry, follow from the blocks.
            m.storage = None;
            m.bytes_per_entry = None;
        }
        c.key()
    }

    fn is_global_size(&self) -> bool {
        // A matrix's order is fixed: its rows are shared over the ranks.
        self.matrix.is_some() || matches!(self.config.size, SizeSpec::Global(_))
    }

    fn variant(&self) -> Variant {
        self.config.variant()
    }
}

/// What `aiac sweep` records for a run that failed or timed out (`aiac.failed-run/2`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FailedRun {
    pub(crate) schema: String,
    /// `failed` (exit code 1, a signal, or no readable report) or `timeout`.
    pub(crate) status: String,
    /// The exit code, when the run exited.
    pub(crate) exit_code: Option<i32>,
    /// The command that was run.
    pub(crate) command: Vec<String>,
    /// Its output (stdout and stderr), relative to this file's directory.
    pub(crate) log: String,
    /// The repeat (0-based).
    pub(crate) repeat: u32,
    /// The configuration, as the run's report would have said it.
    pub(crate) config: RunConfig,
}

/// One run of a set: its report, or why it has none.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Ok(Box<Report>),
    Failed(Box<FailedRun>),
}

impl Outcome {
    pub(crate) fn config(&self) -> &RunConfig {
        match self {
            Outcome::Ok(r) => &r.config,
            Outcome::Failed(f) => &f.config,
        }
    }
    pub(crate) fn run(&self) -> Option<&Report> {
        match self {
            Outcome::Ok(r) => Some(r),
            Outcome::Failed(_) => None,
        }
    }
}

/// Read a run's report or a failed run's record.
pub(crate) fn load(path: &Path) -> Result<Outcome, String> {
    let bytes = crate::input::read_json(path, crate::input::MAX_JSON)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse a run's report or a failed run's record.
pub(crate) fn parse(bytes: &[u8]) -> Result<Outcome, String> {
    let mut v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let schema = v
        .get("schema")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let schema = schema.as_str();
    if let Some(c) = v.get_mut("config").and_then(Value::as_object_mut) {
        // Written before `config.reduction` existed: the backend's default then and now.
        if !c.contains_key("reduction") {
            let mpi = c.get("backend").and_then(Value::as_str) == Some("mpi");
            let kind = if mpi { "iallreduce" } else { "tree" };
            c.insert("reduction".into(), kind.into());
        }
    }
    if [
        jacobi::REPORT_SCHEMA,
        jacobi::REPORT_SCHEMA_V3,
        jacobi::REPORT_SCHEMA_V2,
        jacobi::REPORT_SCHEMA_V1,
    ]
    .contains(&schema)
    {
        let r: Report =
            serde_json::from_value(v).map_err(|e| format!("not a valid {schema} report: {e}"))?;
        if r.ranks.is_empty() {
            return Err(format!(
                "not a valid {schema} report: \"ranks\" is empty (a run has at least one rank)"
            ));
        }
        Ok(Outcome::Ok(Box::new(r)))
    } else if [FAILED_SCHEMA, FAILED_SCHEMA_V1].contains(&schema) {
        serde_json::from_value(v)
            .map(|r| Outcome::Failed(Box::new(r)))
            .map_err(|e| format!("not a valid {schema} record: {e}"))
    } else if schema.is_empty() {
        Err(format!(
            "no \"schema\" field: not an aiac report ({}, {}, {}, {} or {FAILED_SCHEMA})",
            jacobi::REPORT_SCHEMA,
            jacobi::REPORT_SCHEMA_V3,
            jacobi::REPORT_SCHEMA_V2,
            jacobi::REPORT_SCHEMA_V1
        ))
    } else {
        Err(format!(
            "schema \"{schema}\" is not one this aiac reads ({}, {}, {}, {} or {FAILED_SCHEMA})",
            jacobi::REPORT_SCHEMA,
            jacobi::REPORT_SCHEMA_V3,
            jacobi::REPORT_SCHEMA_V2,
            jacobi::REPORT_SCHEMA_V1
        ))
    }
}

/// One file [`expand`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The path, as given or as found in a directory.
    pub(crate) path: PathBuf,
    /// Found in a directory given (not named itself): a file that cannot be read is skipped.
    pub(crate) in_dir: bool,
    /// Found in a directory, named like a report but not a regular file (a symlink to
    /// nothing, a directory, a FIFO): why it is skipped without being opened.
    pub(crate) not_a_file: Option<String>,
}

/// The JSON files a list of paths names: files as given, directories' `*.json` (and their
/// `runs/` subdirectory's) in name order. Hidden files (temporaries) are skipped, and so is a
/// file named twice (by two paths, or by a path and a directory: the same file after
/// following symlinks counts once). A path that is not a regular file or a directory (a
/// device, a FIFO) is refused without being opened, so nothing waits on it.
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<Found>, String> {
    let mut out: Vec<Found> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |out: &mut Vec<Found>, path: PathBuf, in_dir: bool| {
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.insert(key) {
            out.push(Found {
                path,
                in_dir,
                not_a_file: None,
            });
        } else {
            eprintln!(
                "aiac report: {} is named more than once: counted once",
                path.display()
            );
        }
    };
    for p in paths {
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!("{}: no such file or directory", p.display()))
            }
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        if meta.is_dir() {
            let mut found = Vec::new();
            for dir in [p.clone(), p.join("runs")] {
                let Ok(rd) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for e in rd.flatten() {
                    let path = e.path();
                    let name = e.file_name().to_string_lossy().into_owned();
                    if !name.ends_with(".json") || name.starts_with('.') {
                        continue;
                    }
                    // Named like a report: read it, or say why not (a FIFO is never opened:
                    // it would wait for a writer).
                    let not_a_file = match std::fs::metadata(&path) {
                        Ok(m) if m.is_file() => None,
                        Ok(m) if m.is_dir() => Some("a directory".to_string()),
                        Ok(m) => Some(crate::input::kind_of(&m).to_string()),
                        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                            Some("a symlink loop (its links lead back to themselves)".into())
                        }
                        Err(_) if path.is_symlink() => Some(match std::fs::read_link(&path) {
                            Ok(to) => {
                                format!("a symlink to {}, which does not exist", to.display())
                            }
                            Err(_) => "a symlink to nothing".to_string(),
                        }),
                        Err(e) => Some(e.to_string()),
                    };
                    found.push((path, not_a_file));
                }
            }
            found.sort();
            if found.is_empty() {
                return Err(format!("{}: no .json file in it", p.display()));
            }
            for (f, not_a_file) in found {
                match not_a_file {
                    None => push(&mut out, f, true),
                    Some(why) => out.push(Found {
                        path: f,
                        in_dir: true,
                        not_a_file: Some(why),
                    }),
                }
            }
        } else if meta.is_file() {
            push(&mut out, p.clone(), false);
        } else {
            return Err(format!(
                "{}: is {}, not a file: give reports saved by `aiac run --json` or a sweep's \
                 directory",
                p.display(),
                crate::input::kind_of(&meta)
            ));
        }
    }
    Ok(out)
}

/// One histogram of every halo channel of a rank (those in the run's own mode; `which` picks
/// it, e.g. `|ch| &ch.batches`), as (value, count) buckets summed.
pub(crate) fn channel_buckets(
    rank: &RankRecord,
    variant: Variant,
    which: impl Fn(&ChannelStats) -> &Histogram,
) -> Vec<(u64, u64)> {
    let mode = match variant {
        Variant::Sync => ModeKind::Sync,
        Variant::Async => ModeKind::Async,
        Variant::Racy => ModeKind::Racy,
    };
    let mut sum: std::collections::BTreeMap<u64, u64> = Default::default();
    for ch in rank.channels.iter().filter(|ch| ch.mode == mode) {
        for (v, c) in which(ch).nonzero() {
            *sum.entry(v as u64).or_default() += c;
        }
    }
    sum.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jacobi::{Problem, Solver};

    /// The rule `aiac sweep` collapsed flags by before the settings' rule: the reference the
    /// library's rule is held to.
    fn collapsed_before(
        flag: &str,
        solver: &str,
        variant: &str,
        backend: &str,
        problem: &str,
    ) -> bool {
        let multisplit = solver == "multisplit";
        let jacobi = solver == "jacobi" || multisplit;
        match flag {
            "--variant" | "--halo-every" => jacobi,
            "--pc" => !jacobi,
            "--inner" | "--inner-tol" | "--inner-max" => multisplit,
            "--exchange" => {
                (solver == "jacobi" && variant == "sync" || solver == "cg") && backend != "shared"
            }
            "--halo-depth" => solver == "jacobi" && backend != "shared",
            "--check-every" => !jacobi || variant == "sync" || backend != "shared",
            "--max-in-flight" if !jacobi => false,
            "--max-in-flight" => match variant {
                "async" => backend != "shared",
                "racy" => backend == "mpi",
                _ => false,
            },
            "--confirm" => jacobi && variant != "sync",
            "--offset" => problem == "laplace",
            "--threads-per-rank" => solver == "jacobi" && (backend == "mpi" || backend == "shmem"),
            "--reduction" => backend == "mpi" && (variant != "sync" || solver == "pipecg"),
            "--detect" => solver == "jacobi" && variant != "sync" && backend != "shared",
            _ => true,
        }
    }

    /// Over every method, variant, backend and problem a sweep can combine, a setting varies a
    /// run exactly where the flag did before, but for one correction: shared memory takes no
    /// halo period (it reads its neighbours' planes at every sweep, and `aiac run` refuses any
    /// N but 1 there), so a sweep no longer runs each N of it.
    #[test]
    fn the_rule_collapses_a_sweep_as_before() {
        let settings = [
            Setting::Variant,
            Setting::HaloEvery,
            Setting::Pc,
            Setting::Inner,
            Setting::InnerTol,
            Setting::InnerMax,
            Setting::Exchange,
            Setting::HaloDepth,
            Setting::CheckEvery,
            Setting::MaxInFlight,
            Setting::Confirm,
            Setting::Offset,
            Setting::ThreadsPerRank,
            Setting::Reduction,
            Setting::Detect,
        ];
        let mut compared = 0;
        for solver in Solver::value_variants() {
            for variant in Variant::value_variants() {
                if solver.is_krylov() && *variant != Variant::Sync {
                    continue;
                }
                for backend in BackendArg::value_variants() {
                    if *backend == BackendArg::Shared && *solver != Solver::Jacobi {
                        continue;
                    }
                    for problem in [Problem::default(), Problem::Poisson] {
                        let info = backend.info();
                        let ctx = Context {
                            solver: *solver,
                            variant: *variant,
                            backend: info.backend,
                            threads_per_rank: 1,
                            operator: Operator::Grid(problem),
                        };
                        for s in settings {
                            let now = s.applies(&ctx) == Applies::Yes;
                            let flag = crate::flags::flag(s);
                            let before = collapsed_before(
                                flag,
                                solver.name(),
                                variant.name(),
                                info.name,
                                problem.name(),
                            );
                            let corrected = s == Setting::HaloEvery && info.shared_memory;
                            assert_eq!(
                                now,
                                before && !corrected,
                                "{flag} for {solver} {variant} on {} ({})",
                                info.name,
                                problem.name()
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 500, "{compared}");
    }
}
