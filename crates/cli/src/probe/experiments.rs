//! The reporting side of `aiac probe --experiment` (rank 0): the table, `EXPERIMENT.json`,
//! `.csv` and the plot, from the rows `mpi_probe`'s experiments gathered (its
//! `src/experiments.rs` describes them).

use super::report::{bytes, Lines};
use super::JobPath;
use crate::error::Error;
use crate::output::{write_atomically, Csv};
use crate::plots;
use mpi_probe::{CumulativeRow, Protocol, TwoWayRow, WaitingRow, WAITING};
use std::path::Path;

/// "eager" or "rendezvous", from the repetitions that went early.
fn verdict(early: usize) -> &'static str {
    Protocol::of_early(early).as_str()
}

/// What rank 0 prints and writes for an experiment.
pub(super) struct ExperimentReport {
    pub(super) library: String,
    pub(super) path: JobPath,
    pub(super) compute: f64,
    pub(super) reps: usize,
    pub(super) result: Outcome,
}

/// An experiment's rows.
pub(super) enum Outcome {
    TwoWay(Vec<TwoWayRow>),
    Cumulative(usize, Vec<CumulativeRow>),
    Waiting(Vec<WaitingRow>),
}

fn us(s: f64) -> String {
    format!("{:.1}", s * 1e6)
}

impl ExperimentReport {
    fn name(&self) -> &'static str {
        match self.result {
            Outcome::TwoWay(_) => "two-way",
            Outcome::Cumulative(..) => "cumulative",
            Outcome::Waiting(_) => "waiting",
        }
    }

    pub(super) fn table(&self) -> String {
        use std::fmt::Write;
        let mut t = String::new();
        let c = self.compute * 1e3;
        let title = match self.result {
            Outcome::TwoWay(_) => "simultaneous two-way Isend / compute / Wait",
            Outcome::Cumulative(..) => "several messages in flight at once",
            Outcome::Waiting(_) => "where the waits go (sender and receiver)",
        };
        let _ = writeln!(t, "aiac probe --experiment {}: {title}", self.name());
        let _ = writeln!(t, "MPI: {}", self.library);
        let _ = writeln!(t, "path: {}", self.path.label);
        let _ = writeln!(
            t,
            "compute: {c:.2} ms; median of {} reps; times in µs",
            self.reps
        );
        let n = self.reps;
        match &self.result {
            Outcome::TwoWay(rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} | {:>7} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>6} {:>6} {:>10} {:>10} | MPI_Send both ways",
                    "size", "Isend0", "Isend1", "sWait0", "sWait1", "rWait0", "rWait1",
                    "early", "early", "0->1", "1->0"
                );
                for r in rows {
                    let _ = writeln!(
                        t,
                        "{:>6} | {:>7} {:>7} | {:>8} {:>8} | {:>8} {:>8} | {:>6} {:>6} {:>10} {:>10} | {}",
                        bytes(r.size),
                        us(r.isend[0]),
                        us(r.isend[1]),
                        us(r.send_wait[0]),
                        us(r.send_wait[1]),
                        us(r.recv_wait[0]),
                        us(r.recv_wait[1]),
                        format!("{}/{n}", r.early[0]),
                        format!("{}/{n}", r.early[1]),
                        r.protocol(0).as_str(),
                        r.protocol(1).as_str(),
                        r.blocking().as_str(),
                    );
                }
                let _ = writeln!(
                    t,
                    "Isend, sWait, rWait: each rank's Isend, then its send's Wait and its \
                     receive's Wait after computing C, the receives posted first; early: \
                     repetitions whose send (from rank 0, from rank 1) completed before the \
                     other rank posted its receive, both sending first and computing 4C with \
                     an MPI_Test every C/4; MPI_Send both ways: a blocking send on both ranks \
                     before their receives returns only if both sends can complete so \
                     (\"would deadlock\": a direction's send never did; measured with the \
                     bounded test loop, not a real MPI_Send)"
                );
            }
            Outcome::Cumulative(k, rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} {:>8} | {:>6} {:>10} | {:<width$} | {:>9} {:>9} | verdict",
                    "size",
                    "in flight",
                    "alone",
                    "",
                    format!("{k} at once (early per message)"),
                    "sWait 1",
                    format!("sWait {k}"),
                    width = 6 * k + 10,
                );
                for r in rows {
                    let per: Vec<String> = r.early.iter().map(|e| format!("{e}/{n}")).collect();
                    let _ = writeln!(
                        t,
                        "{:>6} {:>8} | {:>6} {:>10} | {:<width$} | {:>9} {:>9} | {}",
                        bytes(r.size),
                        bytes(r.size * k),
                        format!("{}/{n}", r.alone_early),
                        verdict(r.alone_early),
                        per.join(" "),
                        us(r.wait[0]),
                        us(r.wait[1]),
                        r.verdict().as_str(),
                        width = 6 * k + 10,
                    );
                }
                let _ = writeln!(
                    t,
                    "alone: repetitions whose single send completed before its receive was \
                     posted (after 4C); {k} at once: the same for each of {k} sends posted \
                     together, in posting order; sWait: the sender's Waitall after its 4C of \
                     tests (rendezvous: about the wait for the receive)"
                );
            }
            Outcome::Waiting(rows) => {
                let _ = writeln!(
                    t,
                    "{:>6} {:>8} | {:<17} | {:>9} {:>9} | {:>5} {:>5}",
                    "size", "transfer", "sender / receiver", "sMPI", "rMPI", "ovl s", "ovl r"
                );
                for r in rows {
                    for (i, (s, rc)) in WAITING.iter().enumerate() {
                        let _ = writeln!(
                            t,
                            "{:>6} {:>8} | {:<17} | {:>9} {:>9} | {:>4.0}% {:>4.0}%",
                            bytes(r.size),
                            us(r.transfer),
                            format!("{} / {}", s.name(), rc.name()),
                            us(r.mpi[i][0]),
                            us(r.mpi[i][1]),
                            r.overlap(i, 0) * 100.0,
                            r.overlap(i, 1) * 100.0,
                        );
                    }
                }
                let _ = writeln!(
                    t,
                    "after: Wait after the computation; early: Wait right after the post, then \
                     compute; tests: MPI_Test every C/4 inside the computation, Wait after; \
                     sMPI, rMPI: the sender's and the receiver's time inside MPI (post, tests, \
                     waits); ovl: 1 - that / transfer (the message alone, no computation)"
                );
            }
        }
        t
    }

    fn json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = match &self.result {
            Outcome::TwoWay(rows) => rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "size": r.size,
                        "isend_s": r.isend,
                        "send_wait_s": r.send_wait,
                        "recv_wait_s": r.recv_wait,
                        "early": r.early,
                        "both_early": r.both_early,
                        "protocol": [r.protocol(0).as_str(), r.protocol(1).as_str()],
                        "blocking_exchange": r.blocking().as_str(),
                    })
                })
                .collect(),
            Outcome::Cumulative(k, rows) => rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "size": r.size,
                        "count": k,
                        "alone_early": r.alone_early,
                        "alone": verdict(r.alone_early),
                        "early": r.early,
                        "together": r.early.iter().map(|&e| verdict(e)).collect::<Vec<_>>(),
                        "send_wait_s": {"alone": r.wait[0], "together": r.wait[1]},
                        "verdict": r.verdict().as_str(),
                    })
                })
                .collect(),
            Outcome::Waiting(rows) => rows
                .iter()
                .map(|r| {
                    let cases: Vec<_> = WAITING
                        .iter()
                        .enumerate()
                        .map(|(i, (s, rc))| {
                            serde_json::json!({
                                "sender": s.name(),
                                "receiver": rc.name(),
                                "sender_post_s": r.post[i][0],
                                "receiver_post_s": r.post[i][1],
                                "sender_mpi_s": r.mpi[i][0],
                                "receiver_mpi_s": r.mpi[i][1],
                                "overlap": [r.overlap(i, 0), r.overlap(i, 1)],
                            })
                        })
                        .collect();
                    serde_json::json!({"size": r.size, "transfer_s": r.transfer, "cases": cases})
                })
                .collect(),
        };
        serde_json::json!({
            "schema": format!("aiac.probe.{}/1", self.name()),
            "experiment": self.name(),
            "mpi": self.library,
            "path": self.path.label,
            "configured_eager_limit": self.path.eager.as_ref().map(|(n, v)| serde_json::json!({"param": n, "bytes": v})),
            "compute_s": self.compute,
            "reps": self.reps,
            "rows": rows,
        })
    }

    fn csv(&self) -> Csv {
        let e = |v: f64| format!("{v:e}");
        match &self.result {
            Outcome::TwoWay(rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "isend0_s",
                    "isend1_s",
                    "send_wait0_s",
                    "send_wait1_s",
                    "recv_wait0_s",
                    "recv_wait1_s",
                    "early0",
                    "early1",
                    "blocking_exchange",
                ]);
                for r in rows {
                    csv.row([
                        r.size.to_string(),
                        e(r.isend[0]),
                        e(r.isend[1]),
                        e(r.send_wait[0]),
                        e(r.send_wait[1]),
                        e(r.recv_wait[0]),
                        e(r.recv_wait[1]),
                        r.early[0].to_string(),
                        r.early[1].to_string(),
                        r.blocking().as_str().to_string(),
                    ]);
                }
                csv
            }
            Outcome::Cumulative(k, rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "count",
                    "message",
                    "early",
                    "protocol",
                    "send_wait_s",
                ]);
                for r in rows {
                    csv.row([
                        r.size.to_string(),
                        "1".into(),
                        "0".into(),
                        r.alone_early.to_string(),
                        verdict(r.alone_early).into(),
                        e(r.wait[0]),
                    ]);
                    for (i, &x) in r.early.iter().enumerate() {
                        csv.row([
                            r.size.to_string(),
                            k.to_string(),
                            i.to_string(),
                            x.to_string(),
                            verdict(x).into(),
                            e(r.wait[1]),
                        ]);
                    }
                }
                csv
            }
            Outcome::Waiting(rows) => {
                let mut csv = Csv::new(&[
                    "size",
                    "sender",
                    "receiver",
                    "sender_post_s",
                    "receiver_post_s",
                    "sender_mpi_s",
                    "receiver_mpi_s",
                    "transfer_s",
                ]);
                for r in rows {
                    for (i, (s, rc)) in WAITING.iter().enumerate() {
                        csv.row([
                            r.size.to_string(),
                            s.name().into(),
                            rc.name().into(),
                            e(r.post[i][0]),
                            e(r.post[i][1]),
                            e(r.mpi[i][0]),
                            e(r.mpi[i][1]),
                            e(r.transfer),
                        ]);
                    }
                }
                csv
            }
        }
    }

    /// The plot's lines, when the experiment has one (the cumulative one is a verdict table).
    fn lines(&self) -> Option<Lines> {
        type Series = Vec<(String, Vec<f64>)>;
        let (sizes, series): (Vec<usize>, Series) = match &self.result {
            Outcome::TwoWay(rows) => (
                rows.iter().map(|r| r.size).collect(),
                vec![
                    (
                        "rank 0 send's Wait".into(),
                        rows.iter().map(|r| r.send_wait[0]).collect(),
                    ),
                    (
                        "rank 1 send's Wait".into(),
                        rows.iter().map(|r| r.send_wait[1]).collect(),
                    ),
                    (
                        "rank 0 receive's Wait".into(),
                        rows.iter().map(|r| r.recv_wait[0]).collect(),
                    ),
                    (
                        "rank 1 receive's Wait".into(),
                        rows.iter().map(|r| r.recv_wait[1]).collect(),
                    ),
                    (
                        "rank 0 Isend".into(),
                        rows.iter().map(|r| r.isend[0]).collect(),
                    ),
                ],
            ),
            Outcome::Cumulative(..) => return None,
            Outcome::Waiting(rows) => {
                let mut series: Series = WAITING
                    .iter()
                    .enumerate()
                    .map(|(i, (s, rc))| {
                        (
                            format!("{} / {}: slower side in MPI", s.name(), rc.name()),
                            rows.iter().map(|r| r.mpi[i][0].max(r.mpi[i][1])).collect(),
                        )
                    })
                    .collect();
                series.push((
                    "transfer (no compute)".into(),
                    rows.iter().map(|r| r.transfer).collect(),
                ));
                (rows.iter().map(|r| r.size).collect(), series)
            }
        };
        Some(Lines {
            title: format!(
                "aiac probe --experiment {}: {}",
                self.name(),
                self.path.label
            ),
            sizes,
            series,
            marks: Vec::new(),
        })
    }

    /// `DIR/<experiment>.json`, `.csv` and, with a plot, `.png` and `.svg`.
    pub(super) fn write(&self, dir: &Path) -> Result<(), Error> {
        let fail = |p: &Path, why: String| Error::Output {
            flag: "--out",
            path: p.to_path_buf(),
            why,
        };
        let json = dir.join(format!("{}.json", self.name()));
        let text =
            serde_json::to_string_pretty(&self.json()).map_err(|e| fail(&json, e.to_string()))?;
        write_atomically(&json, text.as_bytes()).map_err(|e| fail(&json, e.to_string()))?;
        let csv = dir.join(format!("{}.csv", self.name()));
        write_atomically(&csv, self.csv().as_bytes()).map_err(|e| fail(&csv, e.to_string()))?;
        let mut files = Vec::new();
        if let Some(lines) = self.lines() {
            let stem = dir.join(self.name());
            files = plots::save(&lines, &stem).map_err(|e| fail(&stem, e))?;
        }
        for f in files.iter().chain([&json, &csv]) {
            println!("wrote {}", f.display());
        }
        Ok(())
    }
}
