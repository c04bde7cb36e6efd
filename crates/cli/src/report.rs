//! `aiac report`: the tables and plots again, from saved JSON, without running anything.

use crate::error::Error;
use crate::output::{check_dir, check_distinct, lock_dir, write_atomically};
use crate::saved::{self, Outcome};
use crate::{plots, summary};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `aiac report`'s arguments.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    aiac report aiac-sweep                       # a sweep's --out directory\n  \
    aiac report sync.json async.json --out plots # runs of aiac run --json, compared")]
pub(crate) struct ReportArgs {
    /// Reports of `aiac run --json` (schema aiac.run/4, or /3, /2, /1), a sweep's records of failed runs,
    /// or directories holding them (a sweep's --out directory, or its runs/).
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Draw the plots (PNG and SVG) into DIR, and write runs.csv there (one row per run).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `aiac report`.
pub(crate) fn report(args: &ReportArgs) -> Result<ExitCode, Error> {
    tracing::debug!(?args, "aiac report");
    let files = saved::expand(&args.files).map_err(Error::Invalid)?;
    let mut names = Vec::with_capacity(files.len());
    let mut runs = Vec::with_capacity(files.len());
    let mut skipped = 0;
    for found in &files {
        let f = &found.path;
        if let Some(why) = &found.not_a_file {
            eprintln!("aiac report: skipping {}: {why}", f.display());
            skipped += 1;
            continue;
        }
        match saved::load(f) {
            Ok(run) => runs.push(run),
            // A file found in a directory (a run killed while writing, a stray file) is
            // skipped, not the directory; a file named on the command line must be right.
            Err(e) if found.in_dir => {
                eprintln!("aiac report: skipping {e}");
                skipped += 1;
                continue;
            }
            Err(e) => return Err(Error::Invalid(e)),
        }
        let stem = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        names.push(
            stem.trim_end_matches(".json")
                .trim_end_matches(".failed")
                .to_string(),
        );
    }
    if runs.is_empty() {
        return Err(Error::Invalid(format!(
            "no readable report among the {skipped} file(s) found"
        )));
    }
    let _lock = match &args.out {
        Some(dir) => {
            check_dir("--out", dir)?;
            // Nothing written over a report read (one renamed runs.csv, say).
            let written: Vec<PathBuf> = std::iter::once(dir.join("runs.csv"))
                .chain(
                    plots::PLOTS
                        .iter()
                        .flat_map(|p| ["png", "svg"].map(|ext| dir.join(p).with_extension(ext))),
                )
                .collect();
            let outputs: Vec<(&'static str, &Path)> =
                written.iter().map(|p| ("--out", p.as_path())).collect();
            let inputs: Vec<(&'static str, &Path)> = files
                .iter()
                .filter(|f| f.not_a_file.is_none())
                .map(|f| ("FILES", f.path.as_path()))
                .collect();
            check_distinct(&outputs, &inputs)?;
            Some(lock_dir("--out", dir)?)
        }
        None => None,
    };
    print!("{}", summary::summary(&runs));
    if let Some(dir) = &args.out {
        let csv_path = dir.join("runs.csv");
        let files = write_table_and_plots(&names, &runs, &csv_path, dir)?;
        println!();
        println!("table    {}", csv_path.display());
        print_plots(dir, &files, &runs);
    }
    Ok(ExitCode::SUCCESS)
}

/// Write the one-row-per-run table to `csv_path` and draw the plots into `plots_dir`; the
/// plot files written. What `aiac report --out` and `aiac sweep` both leave behind.
pub(crate) fn write_table_and_plots(
    names: &[String],
    runs: &[Outcome],
    csv_path: &Path,
    plots_dir: &Path,
) -> Result<Vec<PathBuf>, Error> {
    write_atomically(csv_path, summary::runs_csv(names, runs).as_bytes()).map_err(|e| {
        Error::Output {
            flag: "--out",
            path: csv_path.to_path_buf(),
            why: e.to_string(),
        }
    })?;
    plots::draw_all(runs, plots_dir).map_err(|e| Error::Output {
        flag: "--out",
        path: plots_dir.to_path_buf(),
        why: e,
    })
}

/// List the plot files drawn into `dir` from `runs`, or say why there are none.
pub(crate) fn print_plots(dir: &Path, files: &[PathBuf], runs: &[Outcome]) {
    if files.is_empty() {
        if runs.iter().any(|o| o.run().is_some()) {
            println!(
                "plots    none (nothing to draw: each plot needs a residual history point, more \
                 than one rank, an async or racy run, or a sweep over R, N or p)"
            );
        } else {
            println!("plots    none (no run has a report)");
        }
        return;
    }
    println!("plots    {}/", dir.display());
    for f in files {
        if let Some(name) = f.file_name() {
            println!("           {}", name.to_string_lossy());
        }
    }
}
