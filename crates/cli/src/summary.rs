//! The paper's tables over a set of runs (Bethune et al., Tables 1–3: iterations min / mean /
//! max over ranks and time, for each configuration), medians over repeats; and, when the
//! process count varies, speedup S_p = T_1/T_p and efficiency E_p = S_p/p (Wang & Gobbert)
//! for each configuration. `aiac sweep` and `aiac report` print the same text from the same
//! saved runs.

use crate::output::Csv;
use crate::saved::{ConfigExt, Outcome};
use jacobi::{Decomp, Problem, Report, RunConfig};

/// Runs of one configuration (repeats), in the order they came.
#[derive(Debug)]
pub(crate) struct Group<'a> {
    pub(crate) config: &'a RunConfig,
    pub(crate) runs: Vec<&'a Outcome>,
}

impl Group<'_> {
    pub(crate) fn ok(&self) -> impl Iterator<Item = &Report> + '_ {
        self.runs.iter().filter_map(|o| o.run())
    }
    /// The first run that has a report.
    pub(crate) fn first_ok(&self) -> Option<&Report> {
        self.ok().next()
    }
    /// Median of `f` over the runs that have a report.
    pub(crate) fn median(&self, f: impl Fn(&Report) -> f64) -> Option<f64> {
        median(self.ok().map(f).collect())
    }
}

/// Group runs by configuration, in order of first appearance.
pub(crate) fn groups(outcomes: &[Outcome]) -> Vec<Group<'_>> {
    let mut out: Vec<(String, Group<'_>)> = Vec::new();
    for o in outcomes {
        let key = o.config().key();
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.runs.push(o),
            None => out.push((
                key,
                Group {
                    config: o.config(),
                    runs: vec![o],
                },
            )),
        }
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// The median (mean of the middle two for an even count); None when empty.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A column describing a configuration.
pub(crate) struct Column {
    /// Short header.
    pub(crate) header: &'static str,
    /// Its name in legends (`R=2`).
    pub(crate) name: &'static str,
    /// The value shown.
    pub(crate) value: fn(&RunConfig) -> String,
    /// Shown even when every configuration has the same value.
    pub(crate) always: bool,
}

/// The block iteration of `c`'s method (the defaults for a Krylov solver, which has none).
pub(crate) fn iteration(c: &RunConfig) -> jacobi::BlockIteration {
    c.config.method.iteration().copied().unwrap_or_default()
}

/// A number as the JSON report writes it (`2.0`, `0.0001`).
fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| serde_json::Value::from(v).to_string())
}

/// The configuration columns, in table order.
pub(crate) const COLUMNS: &[Column] = &[
    Column {
        header: "solver",
        name: "",
        value: |c| c.config.solver().name().into(),
        always: false,
    },
    Column {
        header: "inner",
        name: "inner",
        value: |c| {
            c.config.inner_spec().map_or("-".into(), |i| {
                format!("{} {}/{}", i.solver.name(), num(Some(i.tol)), i.max)
            })
        },
        always: false,
    },
    Column {
        header: "pc",
        name: "pc",
        value: |c| {
            if c.applies(jacobi::Setting::Pc) {
                c.config.method.pc().name().into()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "variant",
        name: "",
        value: |c| {
            if c.applies(jacobi::Setting::Variant) {
                c.config.variant().name().into()
            } else {
                "-".into()
            }
        },
        always: true,
    },
    Column {
        header: "backend",
        name: "",
        value: |c| c.backend.clone(),
        always: true,
    },
    Column {
        header: "p",
        name: "p",
        value: |c| c.ranks.to_string(),
        always: true,
    },
    Column {
        header: "T",
        name: "T",
        value: |c| c.threads_per_rank.to_string(),
        always: false,
    },
    Column {
        header: "problem",
        name: "",
        value: |c| match &c.matrix {
            Some(m) => m.file.clone(),
            None => c.config.problem.name().into(),
        },
        always: false,
    },
    Column {
        header: "size",
        name: "size",
        value: |c| {
            if c.is_global_size() {
                c.global.to_string()
            } else {
                format!("{}/rank", c.local)
            }
        },
        always: false,
    },
    Column {
        header: "decomp",
        name: "decomp",
        value: |c| {
            match c.config.decomp {
                Decomp::Paper => "paper",
                Decomp::Z => "z",
            }
            .into()
        },
        always: false,
    },
    Column {
        header: "exchange",
        name: "",
        value: |c| {
            if c.applies(jacobi::Setting::Exchange) {
                c.config.method.exchange().name().into()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "R",
        name: "R",
        value: |c| {
            if c.applies(jacobi::Setting::MaxInFlight) {
                iteration(c).max_in_flight.to_string()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "reduction",
        name: "",
        value: |c| {
            if c.applies(jacobi::Setting::Reduction) {
                c.reduction.name().into()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "detect",
        name: "detect",
        value: |c| {
            if c.applies(jacobi::Setting::Detect) {
                iteration(c).detect.name().into()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "N",
        name: "N",
        value: |c| {
            if c.applies(jacobi::Setting::HaloEvery) {
                iteration(c).halo_every.to_string()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "k",
        name: "k",
        value: |c| {
            if c.applies(jacobi::Setting::HaloDepth) {
                c.config.halo_depth().to_string()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "K",
        name: "K",
        value: |c| {
            let paced = iteration(c).pace_reductions
                || c.config.variant() == jacobi::Variant::Sync
                || c.config.solver().is_krylov();
            if c.applies(jacobi::Setting::CheckEvery) && paced {
                c.config.check_every.to_string()
            } else {
                "-".into()
            }
        },
        always: false,
    },
    Column {
        header: "tol",
        name: "tol",
        value: |c| num(Some(c.config.criterion.tol())),
        always: false,
    },
    Column {
        header: "max-iters",
        name: "max-iters",
        value: |c| c.config.max_iters.to_string(),
        always: false,
    },
    Column {
        header: "confirm",
        name: "confirm",
        value: |c| c.config.confirm.to_string(),
        always: false,
    },
    Column {
        header: "slowdown",
        name: "slowdown",
        value: |c| num(c.config.slow.map(|s| s.factor)),
        always: false,
    },
    Column {
        header: "offset",
        name: "offset",
        value: |c| match c.config.problem {
            Problem::Laplace { offset } => num(Some(offset)),
            Problem::Poisson => "-".into(),
        },
        always: false,
    },
];

/// Two configurations have different values in this column ("-", does not apply, aside).
fn varies(c: &Column, configs: &[&RunConfig]) -> bool {
    let mut vals = configs.iter().map(|k| (c.value)(k)).filter(|v| v != "-");
    let first = vals.next();
    vals.any(|v| Some(&v) != first.as_ref())
}

/// The columns worth showing for these configurations in a table: the `always` ones and
/// those whose value differs between two of them.
pub(crate) fn shown_columns(configs: &[&RunConfig]) -> Vec<&'static Column> {
    COLUMNS
        .iter()
        .filter(|c| c.always || varies(c, configs))
        .collect()
}

/// The columns that tell these configurations apart in a legend: the variant (the solver,
/// for Krylov runs) and whatever differs.
pub(crate) fn legend_columns(configs: &[&RunConfig]) -> Vec<&'static Column> {
    COLUMNS
        .iter()
        .filter(|c| c.header == "variant" || varies(c, configs))
        .collect()
}

/// The size column's value (`64x64x64`, `50x50x50/rank`).
fn size_of(c: &RunConfig) -> String {
    COLUMNS
        .iter()
        .find(|col| col.header == "size")
        .map_or(String::new(), |col| (col.value)(c))
}

/// A legend label for `cfg` among these columns (`sync R=2 p=4`), leaving out `skip`.
pub(crate) fn label(cfg: &RunConfig, columns: &[&Column], skip: &[&str]) -> String {
    let parts: Vec<String> = columns
        .iter()
        .filter(|c| !skip.contains(&c.header))
        .map(|c| {
            let v = (c.value)(cfg);
            if c.name.is_empty() {
                v
            } else {
                format!("{}={v}", c.name)
            }
        })
        .filter(|s| !s.ends_with("=-") && s != "-")
        .collect();
    parts.join(" ")
}

/// Left- or right-aligned text columns.
fn render(rows: &[Vec<String>], right_from: usize) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; n];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            let pad = w - c.chars().count();
            line.push(' ');
            if i >= right_from {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            }
            line.push(' ');
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

fn fmt_time(t: Option<f64>) -> String {
    t.map_or("-".into(), |t| format!("{t:.4}"))
}

fn fmt_f(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// The summary table of a set of runs (and the speedup tables when p varies).
pub(crate) fn summary(outcomes: &[Outcome]) -> String {
    let groups = groups(outcomes);
    let configs: Vec<&RunConfig> = groups.iter().map(|g| g.config).collect();
    let cols = shown_columns(&configs);
    let total = outcomes.len();
    let ok = outcomes.iter().filter(|o| o.run().is_some()).count();
    let repeats = groups.iter().map(|g| g.runs.len()).max().unwrap_or(0);
    let any_error = outcomes
        .iter()
        .any(|o| o.run().is_some_and(|r| r.error_max.is_some()));
    let any_hidden = outcomes
        .iter()
        .any(|o| o.run().is_some_and(|r| r.reductions_hidden().is_some()));
    let any_inner = outcomes
        .iter()
        .any(|o| o.run().is_some_and(|r| r.inner_per_outer.is_some()));
    let mut s = format!(
        "aiac summary: {} configuration(s), {total} run(s), {ok} with a report, {} failed; \
         medians over up to {repeats} repeat(s)\n",
        groups.len(),
        total - ok
    );
    let mut header: Vec<String> = cols.iter().map(|c| c.header.to_string()).collect();
    let right_from = header.len();
    header.extend(
        [
            "runs", "it min", "it mean", "it max", "time (s)", "it/s", "residual",
        ]
        .map(String::from),
    );
    if any_error {
        header.push("error max".into());
    }
    if any_hidden {
        header.push("red. hidden".into());
    }
    if any_inner {
        header.push("inner/outer".into());
    }
    header.push("result".into());
    let mut rows = vec![header];
    for g in &groups {
        let mut row: Vec<String> = cols.iter().map(|c| (c.value)(g.config)).collect();
        let n_ok = g.ok().count();
        let conv = g.ok().filter(|r| r.converged).count();
        row.push(format!("{n_ok}/{}", g.runs.len()));
        row.push(fmt_f(g.median(|r| r.iterations.min), 0));
        row.push(fmt_f(g.median(|r| r.iterations.mean), 1));
        row.push(fmt_f(g.median(|r| r.iterations.max), 0));
        row.push(fmt_time(g.median(|r| r.time_s)));
        row.push(
            g.median(Report::iteration_rate)
                .map_or("-".into(), crate::progress::human),
        );
        row.push(
            g.median(|r| r.residual.true_residual)
                .map_or("-".into(), |v| format!("{v:.2e}")),
        );
        if any_error {
            row.push(
                median(g.ok().filter_map(|r| r.error_max).collect())
                    .map_or("-".into(), |v| format!("{v:.2e}")),
            );
        }
        if any_hidden {
            row.push(
                median(g.ok().filter_map(Report::reductions_hidden).collect())
                    .map_or("-".into(), |v| format!("{:.0}%", 100.0 * v)),
            );
        }
        if any_inner {
            row.push(fmt_f(
                median(
                    g.ok()
                        .filter_map(|r| r.inner_per_outer.map(|s| s.mean))
                        .collect(),
                ),
                1,
            ));
        }
        row.push(if n_ok == 0 {
            "FAILED".into()
        } else if conv == n_ok {
            "converged".into()
        } else if conv == 0 {
            "not converged".into()
        } else {
            format!("{conv}/{n_ok} converged")
        });
        rows.push(row);
    }
    s.push_str(&render(&rows, right_from));
    let speed = speedup(&groups, &legend_columns(&configs));
    if !speed.is_empty() {
        s.push('\n');
        s.push_str(&speed);
    }
    s
}

/// Speedup and efficiency tables, one per configuration run over several process counts.
fn speedup(groups: &[Group<'_>], cols: &[&Column]) -> String {
    let mut fams: Vec<(String, Vec<&Group<'_>>)> = Vec::new();
    for g in groups {
        let k = g.config.key_without_ranks();
        match fams.iter_mut().find(|(f, _)| *f == k) {
            Some((_, v)) => v.push(g),
            None => fams.push((k, vec![g])),
        }
    }
    let mut s = String::new();
    for (_, mut fam) in fams {
        let mut ps: Vec<usize> = fam.iter().map(|g| g.config.ranks).collect();
        ps.sort_unstable();
        ps.dedup();
        if ps.len() < 2 {
            continue;
        }
        fam.sort_by_key(|g| g.config.ranks);
        let c0 = fam[0].config;
        let strong = c0.is_global_size();
        let what = label(c0, cols, &["p", "size", "decomp"]);
        let base = fam.iter().find_map(|g| {
            g.median(|r| r.time_s)
                .filter(|t| *t > 0.0)
                .map(|t| (g.config.ranks, t))
        });
        s.push_str(&if strong {
            format!(
                "speedup S_p = T_1/T_p and efficiency E_p = S_p/p: {what}, global {}\n",
                size_of(c0)
            )
        } else {
            format!(
                "weak scaling (fixed points per rank) efficiency E_p = T_1/T_p: {what}, {}\n",
                size_of(c0)
            )
        });
        if let Some((p0, _)) = base.filter(|(p0, _)| *p0 != 1) {
            s.push_str(&format!(
                "  (no run on 1 process: relative to p = {p0}, S_p = {p0}·T_{p0}/T_p)\n"
            ));
        }
        let header: &[&str] = if strong {
            &["p", "T_p (s)", "S_p", "E_p", "it mean", "result"]
        } else {
            &["p", "T_p (s)", "E_p", "it mean", "result"]
        };
        let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        for g in &fam {
            let p = g.config.ranks;
            let t = g.median(|r| r.time_s);
            let (sp, ep) = match (base, t) {
                (Some((p0, t0)), Some(t)) if t > 0.0 => {
                    let sp = p0 as f64 * t0 / t;
                    if strong {
                        (Some(sp), Some(sp / p as f64))
                    } else {
                        (None, Some(t0 / t))
                    }
                }
                _ => (None, None),
            };
            // One status when every run of the group has it.
            let mut statuses = g.ok().map(Report::status);
            let status = statuses.next().filter(|&s| statuses.all(|t| t == s));
            let mut row = vec![p.to_string(), fmt_time(t)];
            if strong {
                row.push(fmt_f(sp, 2));
            }
            row.extend([
                fmt_f(ep, 2),
                fmt_f(g.median(|r| r.iterations.mean), 1),
                match (g.ok().next(), status) {
                    (None, _) => "FAILED".into(),
                    (Some(_), Some(s)) => s.replace('_', "-"),
                    (Some(_), None) => "mixed".into(),
                },
            ]);
            rows.push(row);
        }
        s.push_str(&render(&rows, 1));
    }
    s
}

/// One row per run: what `aiac sweep` writes as `sweep.csv` (and `aiac report --out`).
pub(crate) fn runs_csv(names: &[String], runs: &[Outcome]) -> Csv {
    let mut csv = Csv::new(&[
        "run",
        "status",
        "exit_code",
        "backend",
        "variant",
        "ranks",
        "problem",
        "size",
        "exchange",
        "max_in_flight",
        "halo_every",
        "check_every",
        "tol",
        "max_iters",
        "converged",
        "stop",
        "iterations_min",
        "iterations_mean",
        "iterations_max",
        "time_s",
        "iterations_per_s",
        "updates_per_s",
        "residual_reported",
        "residual_true",
        "error_max",
        "sent",
        "skipped",
        "received",
        "superseded",
        "solver",
        "pc",
        "reductions_hidden",
        "inner",
        "inner_iterations_mean",
        "inner_per_outer_mean",
        "halo_depth",
        "halo_depth_chosen",
    ]);
    use crate::output::opt;
    for (name, o) in names.iter().zip(runs) {
        let c = o.config();
        let col = |h: &str| {
            COLUMNS
                .iter()
                .find(|c| c.header == h)
                .map_or(String::new(), |col| (col.value)(c))
        };
        let mut row = vec![name.clone()];
        match o {
            Outcome::Ok(r) => {
                row.push(r.status().into());
                row.push(if r.converged { "0" } else { "2" }.into());
            }
            Outcome::Failed(f) => {
                row.push(f.status.clone());
                row.push(opt(f.exit_code));
            }
        }
        row.extend([
            c.backend.clone(),
            c.config.variant().name().into(),
            c.ranks.to_string(),
            col("problem"),
            col("size"),
            col("exchange"),
            col("R"),
            iteration(c).halo_every.to_string(),
            col("K"),
            col("tol"),
            c.config.max_iters.to_string(),
        ]);
        match o.run() {
            Some(r) => row.extend([
                r.converged.to_string(),
                r.stop.name().into(),
                r.iterations.min.to_string(),
                r.iterations.mean.to_string(),
                r.iterations.max.to_string(),
                r.time_s.to_string(),
                r.iteration_rate().to_string(),
                r.updates_per_s.to_string(),
                opt(r.residual.reported),
                r.residual.true_residual.to_string(),
                opt(r.error_max),
                r.messages.sent.to_string(),
                r.messages.skipped.to_string(),
                r.messages.received.to_string(),
                r.messages.superseded.to_string(),
            ]),
            None => row.extend(std::iter::repeat_n(String::new(), 15)),
        }
        row.extend([
            c.config.solver().name().to_string(),
            col("pc"),
            opt(o.run().and_then(Report::reductions_hidden)),
            c.config
                .inner_spec()
                .map_or("-".to_string(), |i| i.solver.name().to_string()),
            opt(o.run().and_then(|r| r.inner_iterations).map(|s| s.mean)),
            opt(o.run().and_then(|r| r.inner_per_outer).map(|s| s.mean)),
            col("k"),
            opt(o.run().and_then(|r| r.halo_auto.as_ref()).map(|a| a.chosen)),
        ]);
        csv.row(row);
    }
    csv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn render_aligns() {
        let t = render(
            &[
                vec!["a".into(), "bb".into()],
                vec!["ccc".into(), "d".into()],
            ],
            1,
        );
        assert_eq!(t, "  a    bb\n  ccc   d\n");
    }
}
