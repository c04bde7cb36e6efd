//! `aiac report`: the tables and plots again, from saved JSON, without running anything.

use crate::output::{check_dir, write_atomically};
use crate::run::RunError;
use crate::saved::{self, Outcome};
use crate::{plots, summary};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// `aiac report`'s arguments.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    aiac report aiac-sweep                       # a sweep's --out directory\n  \
    aiac report sync.json async.json --out plots # runs of aiac run --json, compared")]
pub struct ReportArgs {
    /// Reports of `aiac run --json` (schema aiac.run/1), a sweep's records of failed runs,
    /// or directories holding them (a sweep's --out directory, or its runs/).
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Draw the plots (PNG and SVG) into DIR, and write runs.csv there (one row per run).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `aiac report`.
pub fn report(args: &ReportArgs) -> Result<ExitCode, RunError> {
    tracing::debug!(?args, "aiac report");
    let files = saved::expand(&args.files).map_err(RunError::Invalid)?;
    let mut outcomes: Vec<(String, Outcome)> = Vec::with_capacity(files.len());
    for f in &files {
        let o = saved::load(f).map_err(RunError::Invalid)?;
        let stem = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = stem
            .trim_end_matches(".json")
            .trim_end_matches(".failed")
            .to_string();
        outcomes.push((stem, o));
    }
    if let Some(dir) = &args.out {
        check_dir("--out", dir)?;
    }
    let runs: Vec<Outcome> = outcomes.iter().map(|(_, o)| o.clone()).collect();
    print!("{}", summary::summary(&runs));
    if let Some(dir) = &args.out {
        let named: Vec<(String, &Outcome)> = outcomes.iter().map(|(s, o)| (s.clone(), o)).collect();
        let csv_path = dir.join("runs.csv");
        write_atomically(&csv_path, summary::runs_csv(&named).as_bytes()).map_err(|e| {
            RunError::Output {
                flag: "--out",
                path: csv_path.clone(),
                why: e.to_string(),
            }
        })?;
        let files = plots::draw_all(&runs, dir).map_err(|e| RunError::Output {
            flag: "--out",
            path: dir.clone(),
            why: e,
        })?;
        println!();
        println!("table    {}", csv_path.display());
        println!("plots    {}/", dir.display());
        for f in &files {
            if let Some(name) = f.file_name() {
                println!("           {}", name.to_string_lossy());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
