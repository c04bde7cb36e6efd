//! The grid of a sweep: its axes' combinations, the runs they give and the checks that every
//! value of every list is taken by some run.

use super::{Axis, Point, SweepArgs};
use crate::args::{BackendArg, RunArgs};
use crate::error::Error;
use crate::matrix::System;
use clap::ValueEnum;
use jacobi::{Applies, Config, Context, Operator, Plan, Problem, Setting, Solver, Variant};

impl SweepArgs {
    /// The digits of combination `n` of the grid of `axes` (the first axis varies slowest).
    fn odometer(axes: &[Axis], mut n: usize) -> Vec<usize> {
        let mut idx = vec![0; axes.len()];
        for (i, a) in axes.iter().enumerate().rev() {
            let d = a.values.len().max(1);
            idx[i] = n % d;
            n /= d;
        }
        idx
    }

    /// The `aiac run` arguments of combination `idx` (every flag given, or with `collapse`
    /// only those that apply to it), its label, backend and process count.
    fn combination(
        &self,
        axes: &[Axis],
        idx: &[usize],
        collapse: bool,
    ) -> (Vec<String>, String, BackendArg, usize) {
        let val = |id: &str| -> Option<&str> {
            let i = axes.iter().position(|a| a.id == id)?;
            axes[i].values.get(idx[i]).map(String::as_str)
        };
        let variant = val("variant").unwrap_or(Variant::default().name());
        let backend = val("backend").unwrap_or("threads");
        let solver = val("solver").unwrap_or(Solver::default().name());
        let backend_arg = BackendArg::from_str(backend, false).unwrap_or(BackendArg::Threads);
        let ctx = Context {
            solver: Solver::from_str(solver, false).unwrap_or_default(),
            variant: Variant::from_str(variant, false).unwrap_or(Variant::Sync),
            backend: backend_arg.info().backend,
            threads_per_rank: val("threads_per_rank")
                .and_then(|t| t.parse().ok())
                .unwrap_or(1),
            operator: match (&self.system.matrix, val("problem")) {
                (Some(_), _) => Operator::Matrix,
                (None, Some("poisson")) => Operator::Grid(Problem::Poisson),
                (None, _) => Operator::Grid(Problem::Laplace { offset: 0.0 }),
            },
        };
        // The settings' rule: a flag that changes nothing here is not passed.
        let applies = |s: Setting| s.applies(&ctx) == Applies::Yes;
        let mut argv = Vec::new();
        let mut label = Vec::new();
        for (a, &i) in axes.iter().zip(idx) {
            let Some(v) = a.values.get(i) else { continue };
            if collapse && !applies(a.setting) {
                continue;
            }
            if a.id == "slowdown" {
                if let Some(k) = self.fixed.slow_rank {
                    argv.extend(["--slow-rank".to_string(), k.to_string()]);
                }
            }
            argv.extend([a.flag(), v.clone()]);
            if a.values.len() > 1 {
                label.push(if a.short.is_empty() {
                    v.clone()
                } else {
                    format!("{}={v}", a.short)
                });
            }
        }
        if self.slowdown.is_empty() {
            if let Some(k) = self.fixed.slow_rank {
                argv.extend(["--slow-rank".to_string(), k.to_string()]);
            }
        }
        if self.fixed.no_confirm && applies(Setting::Confirm) {
            argv.push("--no-confirm".into());
        }
        if let Some(m) = &self.system.matrix {
            argv.extend(["--matrix".into(), m.display().to_string()]);
        }
        if let Some(r) = &self.system.rhs {
            argv.extend(["--rhs".into(), r.display().to_string()]);
        }
        let label = if label.is_empty() {
            if solver == "jacobi" {
                variant.to_string()
            } else {
                solver.to_string()
            }
        } else {
            label.join(" ")
        };
        let ranks = val("threads").and_then(|v| v.parse().ok()).unwrap_or(1);
        (argv, label, backend_arg, ranks)
    }

    /// The number of combinations of the grid of `axes`.
    fn combinations(axes: &[Axis]) -> usize {
        axes.iter().map(|a| a.values.len().max(1)).product()
    }

    /// Every run, in order: each configuration's repeats one after the other.
    pub(super) fn points(&self) -> Vec<Point> {
        let axes = self.axes();
        let mut seen: Vec<Vec<String>> = Vec::new();
        let mut out = Vec::new();
        for n in 0..Self::combinations(&axes) {
            let idx = Self::odometer(&axes, n);
            let (argv, label, backend, ranks) = self.combination(&axes, &idx, true);
            if seen.contains(&argv) {
                continue;
            }
            seen.push(argv.clone());
            for repeat in 0..self.repeats {
                out.push(Point {
                    argv: argv.clone(),
                    label: label.clone(),
                    backend,
                    ranks,
                    repeat,
                });
            }
        }
        out
    }

    /// The runs `aiac run` takes, each with its parsed arguments, configuration and
    /// decomposition, and those it refuses with the reason: a combination of values that
    /// do not go together (T = 4 workers on a block of 2 planes) is skipped, while each value
    /// stays in the runs it fits. A flag value `aiac run` cannot parse is refused whole. With
    /// `system`, each run is checked against the matrix too, as `aiac run` checks it (CG needs
    /// a symmetric matrix, every rank a row).
    #[allow(clippy::type_complexity)]
    pub(super) fn accepted<'a>(
        &self,
        points: &'a [Point],
        system: Option<&System>,
    ) -> Result<
        (
            Vec<(&'a Point, RunArgs, Config, Plan)>,
            Vec<(&'a Point, String)>,
        ),
        Error,
    > {
        let mut ok = Vec::with_capacity(points.len());
        let mut refused = Vec::new();
        for p in points {
            let run_args = crate::parse_run_args(&p.argv).map_err(|e| {
                let msg = e.to_string();
                let first = msg
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                Error::Invalid(format!("{first} (in the run {})", p.label))
            })?;
            let checked = run_args.check_config().and_then(|(cfg, plan)| {
                if let Some(system) = system {
                    cfg.validate_matrix()?;
                    system.cut(&cfg, run_args.threads.unwrap_or(1))?;
                }
                Ok((cfg, plan))
            });
            match checked {
                Ok((cfg, plan)) => ok.push((p, run_args, cfg, plan)),
                Err(e) => refused.push((p, e.to_string())),
            }
        }
        Ok((ok, refused))
    }

    /// A value of a list that no run of the sweep takes is refused with `aiac run`'s own
    /// message: every run with it was refused by `aiac run` (`skipped`), or every
    /// combination with it dropped the flag, as one it does not apply to, where `aiac run`
    /// refuses every such combination given the flag (`--solver cg --variant racy` would
    /// otherwise run cg sync, `--solver multisplit --halo-depth 2` depth 1). A value `run`
    /// accepts and ignores (R of racy over threads) only collapses runs that are the same.
    pub(super) fn check_unused(
        &self,
        runs: &[&Point],
        skipped: &[(&Point, String)],
    ) -> Result<(), Error> {
        let axes = self.axes();
        let has =
            |p: &Point, flag: &str, v: &str| p.argv.windows(2).any(|w| w[0] == flag && w[1] == v);
        let refuse = |e: &str, flag: &str, v: &str, label: &str| {
            let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
            Error::Invalid(format!(
                "{first} (no run of this sweep can take {flag} {v}: `aiac run` refuses it in \
                 every combination, the first being {label})"
            ))
        };
        for (ai, a) in axes.iter().enumerate() {
            for (vi, v) in a.values.iter().enumerate() {
                let flag = a.flag();
                if runs.iter().any(|p| has(p, &flag, v)) {
                    continue;
                }
                if let Some((p, e)) = skipped.iter().find(|(p, _)| has(p, &flag, v)) {
                    return Err(refuse(e, &flag, v, &p.label));
                }
                let mut refusal = None;
                for n in 0..Self::combinations(&axes) {
                    let idx = Self::odometer(&axes, n);
                    if idx[ai] != vi {
                        continue;
                    }
                    let (argv, label, ..) = self.combination(&axes, &idx, false);
                    let verdict = crate::parse_run_args(&argv)
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.check_config().map_err(|e| e.to_string()));
                    match verdict {
                        Ok(_) => {
                            refusal = None;
                            break;
                        }
                        Err(e) => {
                            refusal.get_or_insert((e, label));
                        }
                    }
                }
                if let Some((e, label)) = refusal {
                    return Err(refuse(&e, &flag, v, &label));
                }
            }
        }
        // Every run refused, each value taken by some other refused run.
        if let ([], [(p, e), ..]) = (runs, skipped) {
            let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
            return Err(Error::Invalid(format!("{first} (in the run {})", p.label)));
        }
        Ok(())
    }
}
