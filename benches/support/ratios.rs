//! Reads criterion's saved estimates and prints the ratio of each candidate to a baseline, so
//! a bench run ends with the comparison its issue asks for. Included by several benches with
//! `#[path]`.

use std::path::PathBuf;

/// Where criterion saves its results, found the way criterion finds it: `CRITERION_HOME`,
/// else `CARGO_TARGET_DIR`, else the workspace's target directory from `cargo metadata`.
fn criterion_home() -> PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(h);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let out = std::process::Command::new(std::env::var_os("CARGO")?)
                .args(["metadata", "--format-version", "1", "--no-deps"])
                .output()
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            v["target_directory"].as_str().map(PathBuf::from)
        });
    target
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("criterion")
}

/// criterion's mean estimate (ns per iteration) of `group/id/param`, from its saved estimates.
pub fn mean_ns(group: &str, id: &str, param: &str) -> Option<f64> {
    let path = criterion_home()
        .join(group)
        .join(id)
        .join(param)
        .join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    v["mean"]["point_estimate"].as_f64()
}

/// Print one row per (group, param, candidate): both means and candidate / baseline.
pub fn print_table(
    title: &str,
    groups: &[&str],
    params: &[&str],
    baseline: &str,
    candidates: &[&str],
) {
    println!("\n{title} (mean time per iteration, lower is better)");
    println!(
        "{:<16} {:>9} {:>14} {:>14} {:>8}  candidate",
        "group", "bytes", "candidate", baseline, "ratio"
    );
    for group in groups {
        for param in params {
            let Some(base) = mean_ns(group, baseline, param) else {
                continue;
            };
            for c in candidates {
                if let Some(t) = mean_ns(group, c, param) {
                    println!(
                        "{:<16} {:>9} {:>11.1} ns {:>11.1} ns {:>7.2}×  {c}",
                        group,
                        param,
                        t,
                        base,
                        t / base
                    );
                }
            }
        }
    }
}
