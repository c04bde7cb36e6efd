//! The paper's table of a [`Report`]: its heading (problem, method, ranks, layout, stopping
//! test), the measured lines, the Krylov solvers' lines, and the result.

use super::{Breakdown, Report, StopReason};
use crate::config::{Exchange, HaloDepth};
use crate::method::Method;
use crate::problem::StopCriterion;

impl Report {
    /// The paper's table: iterations min / mean / max over ranks, time, update rate,
    /// messages, and the true final residual.
    pub fn table(&self) -> String {
        let mut s = self.heading();
        self.measured(&mut s);
        self.krylov_lines(&mut s);
        s.push_str(&format!("  result           {}\n", self.result()));
        s
    }

    /// The method as the heading names it.
    fn method(&self) -> String {
        match self.config.config.method {
            Method::Krylov(k) => format!(
                "{} (pc {}{})",
                k.solver.solver(),
                k.pc.name(),
                match k.exchange {
                    Exchange::Waitall => String::new(),
                    e => format!(", {} exchange", e.name()),
                }
            ),
            Method::Multisplit(m) => format!(
                "multisplit {} (inner {}, inner tol {:.0e}, at most {})",
                m.iteration.variant,
                m.inner.solver.name(),
                m.inner.tol,
                m.inner.max
            ),
            Method::Jacobi(j) => format!(
                "{}{}",
                j.iteration.variant,
                match j.exchange {
                    Exchange::Waitall => String::new(),
                    e => format!(" ({} exchange)", e.name()),
                }
            ),
        }
    }

    /// The first line: problem, method, ranks, layout and the stopping test; then the backend
    /// and the halo depth.
    fn heading(&self) -> String {
        let c = &self.config;
        let (problem, layout) = match &c.matrix {
            None => (
                c.config.problem.name().to_string(),
                format!(
                    "grid {}, {} points ({} per rank)",
                    c.process_grid, c.global, c.local
                ),
            ),
            Some(m) => (
                m.file.clone(),
                format!(
                    "n {} ({} nonzeros, {}{}), rows of a rank at most {}{}",
                    m.n,
                    m.nnz,
                    m.kind,
                    if m.diagonally_dominant {
                        ", diagonally dominant"
                    } else {
                        ""
                    },
                    c.local.x,
                    match (&m.storage, m.bytes_per_entry) {
                        (Some(s), Some(b)) => format!(", stored {s} ({b:.2} bytes an entry)"),
                        _ => String::new(),
                    }
                ),
            ),
        };
        let mut s = format!(
            "aiac run: {} {} on {} rank(s){}, {}, {} {:.1e}\n",
            problem,
            self.method(),
            c.ranks,
            match c.threads_per_rank {
                1 => String::new(),
                t => format!(" x {t} threads"),
            },
            layout,
            match c.config.criterion {
                StopCriterion::RelativeResidual { .. }
                    if c.config.solver().is_krylov() || c.matrix.is_some() =>
                {
                    "‖b − A x‖/‖b‖ <"
                }
                StopCriterion::RelativeResidual { .. } => "relative residual <",
                StopCriterion::UpdateNorm { .. } => "‖u_k − u_k−1‖ ≤",
            },
            self.tol
        );
        s.push_str(&format!("  backend          {}\n", c.backend));
        match (&self.halo_auto, c.config.halo_depth()) {
            (Some(a), _) => s.push_str(&format!("  halo depth       auto: {}\n", a.summary())),
            (None, HaloDepth::Fixed(k)) if k > 1 => {
                s.push_str(&format!("  halo depth       {k}\n"));
            }
            _ => {}
        }
        s
    }

    /// Iterations, time and its parts, updates, messages, the residual and the error.
    fn measured(&self, s: &mut String) {
        let c = &self.config;
        let fmt_opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3e}"));
        s.push_str(&format!(
            "  {}min {:.0}   mean {:.1}   max {:.0}\n",
            if self.inner_iterations.is_some() {
                "outer iterations "
            } else {
                "iterations       "
            },
            self.iterations.min,
            self.iterations.mean,
            self.iterations.max
        ));
        if let (Some(t), Some(p)) = (self.inner_iterations, self.inner_per_outer) {
            s.push_str(&format!(
                "  inner iterations total min {:.0}   mean {:.1}   max {:.0};   per outer iteration mean {:.1} (ranks {:.1} to {:.1})\n",
                t.min, t.mean, t.max, p.mean, p.min, p.max
            ));
        }
        s.push_str(&format!(
            "  time             {:.4} s   (compute {:.4} s, communication {:.4} s, mean per rank)\n",
            self.time_s, self.compute_s.mean, self.comm_s.mean
        ));
        if let Some(b) = &self.breakdown_per_iteration {
            let parts: Vec<String> = Breakdown::NAMES
                .iter()
                .zip(b.parts())
                .map(|(n, v)| format!("{n} {:.2} µs", v * 1e6))
                .collect();
            s.push_str(&format!(
                "  per iteration    {}   (mean per rank)\n",
                parts.join(", ")
            ));
        }
        s.push_str(&format!("  updates/s        {:.3e}\n", self.updates_per_s));
        s.push_str(&format!(
            "  messages         sent {}   skipped {}   received {}   superseded {}\n",
            self.messages.sent,
            self.messages.skipped,
            self.messages.received,
            self.messages.superseded
        ));
        s.push_str(&format!(
            "  {:<16} reported {}   true {:.3e}\n",
            match c.config.criterion {
                StopCriterion::RelativeResidual { .. } => "residual",
                StopCriterion::UpdateNorm { .. } => "update norm",
            },
            fmt_opt(self.residual.reported),
            self.residual.true_residual
        ));
        if let Some(e) = self.error_max {
            s.push_str(&format!(
                "  error (max)      {e:.3e}   against the exact solution\n"
            ));
        }
    }

    /// The reductions hidden, the true residuals computed during the solve, and the
    /// certifications.
    fn krylov_lines(&self, s: &mut String) {
        if let Some(h) = self.reductions_hidden() {
            let n = self.ranks.len().max(1) as f64;
            let ks = self.ranks.iter().filter_map(|r| r.krylov.as_ref());
            let (flight, wait) = ks.fold((0.0, 0.0), |(f, w), k| {
                (f + k.reduce_flight_s, w + k.reduce_wait_s)
            });
            s.push_str(&format!(
                "  reductions       {} per rank: in flight {:.4} s, waited {:.4} s (mean per rank): {:.0}% hidden behind computation\n",
                self.ranks[0].reductions,
                flight / n,
                wait / n,
                100.0 * h
            ));
        }
        if let Some(k) = self.ranks[0].krylov.as_ref() {
            if k.replacements > 0 || k.true_residual_checks > 0 {
                s.push_str(&format!(
                    "  true residual    computed {} time(s) during the solve, {} residual replacement(s)\n",
                    k.true_residual_checks, k.replacements
                ));
            }
        }
        if !self.certifications.is_empty() {
            let rejected = self.certifications.iter().filter(|c| !c.accepted).count();
            s.push_str(&format!(
                "  certifications   {} ({} rejected)\n",
                self.certifications.len(),
                rejected
            ));
        }
    }

    /// The last line: converged, or why not.
    fn result(&self) -> String {
        match (self.converged, self.stop) {
            (true, _) => "converged".to_string(),
            (false, StopReason::MaxIters) => {
                format!(
                    "NOT converged within the iteration limit, {}",
                    self.config.config.max_iters
                )
            }
            (false, StopReason::Criterion) => {
                "NOT converged: the unconfirmed claim was wrong (true residual above tol)"
                    .to_string()
            }
            (false, StopReason::Breakdown) => format!(
                "NOT converged: breakdown, {}",
                self.ranks[0]
                    .krylov
                    .as_ref()
                    .and_then(|k| k.breakdown.as_deref())
                    .unwrap_or("see the ranks' records")
            ),
            (false, StopReason::Diverged) => format!(
                "NOT converged: diverged (the residual passed 1e20 of its start, or was \
                 not finite, by iteration {})",
                self.iterations.max
            ),
        }
    }
}
