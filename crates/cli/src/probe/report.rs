//! The reporting side of `aiac probe` (rank 0): the table, probe.json, probe.csv and the
//! plot, from the kernel's report (`mpi_probe::KernelReport`).

use super::JobPath;
use crate::error::Error;
use crate::output::{write_atomically, Csv};
use crate::plots;
use mpi_probe::{KernelReport, Row, Threshold};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Bytes as the table writes them (4K, 1M, 4072).
pub(super) fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Everything rank 0 prints and writes.
pub(super) struct Report {
    pub(super) library: String,
    pub(super) path: JobPath,
    pub(super) compute: f64,
    pub(super) reps: usize,
    /// The rows, the threshold and the channel column's path.
    pub(super) measured: KernelReport,
}

impl Report {
    fn threshold_text(&self) -> String {
        let Threshold {
            last_eager,
            first_rendezvous,
        } = self.measured.threshold;
        match (last_eager, first_rendezvous) {
            (Some(lo), Some(hi)) => format!(
                "eager up to {lo} B, rendezvous from {hi} B (threshold {})",
                bytes(lo)
            ),
            (Some(lo), None) => format!("every size went eagerly (up to {})", bytes(lo)),
            (None, Some(hi)) => format!("every size went by rendezvous (from {})", bytes(hi)),
            (None, None) => "no clean threshold: eager and rendezvous sizes interleave \
                             (a loaded machine? raise --compute-ms or --reps)"
                .into(),
        }
    }

    pub(super) fn table(&self) -> String {
        use std::fmt::Write;
        let us = |s: f64| format!("{:.1}", s * 1e6);
        let pc = |f: f64| format!("{:.0}%", f * 100.0);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "aiac probe: Saif & Parashar's Isend / compute / Wait kernel"
        );
        let _ = writeln!(t, "MPI: {}", self.library);
        let _ = writeln!(t, "path: {}", self.path.label);
        let _ = writeln!(
            t,
            "channel column: an aiac Sync channel on chan-mpi's {} path",
            self.measured.channel.label()
        );
        let _ = writeln!(
            t,
            "compute: sender {:.2} ms, receiver {:.2} ms (test at {:.2} ms); median of {} reps; times in µs",
            self.compute * 1e3,
            2.0 * self.compute * 1e3,
            self.compute * 0.5e3,
            self.reps
        );
        let _ = writeln!(
            t,
            "{:>6} {:>7} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>8} | {:>4} {:>4} {:>4} | {:>8} {:>5} {:>8} protocol",
            "size",
            "Isend",
            "sWait",
            "sW test",
            "sW chan",
            "rMPI",
            "rM test",
            "rM chan",
            "transfer",
            "ovl",
            "o tst",
            "o chn",
            "sW unexp",
            "early",
            "rW silnt",
        );
        for r in &self.measured.rows {
            let (w, m, o) = (r.send_wait, r.recv_exposed, r.overlap());
            let _ = writeln!(
                t,
                "{:>6} {:>7} | {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} | {:>8} | {:>4} {:>4} {:>4} | {:>8} {:>5} {:>8} {}",
                bytes(r.size),
                us(r.isend),
                us(w.plain),
                us(w.test),
                us(w.channel),
                us(m.plain),
                us(m.test),
                us(m.channel),
                us(r.transfer),
                pc(o.plain),
                pc(o.test),
                pc(o.channel),
                us(r.unexpected_wait),
                format!("{}/{}", r.early, self.reps),
                us(r.silent_wait),
                r.protocol().as_str()
            );
        }
        let _ = writeln!(
            t,
            "sWait: sender's MPI_Wait after its computation (receiver: nothing / one MPI_Test / \
             an aiac channel's try_recv); rMPI: receiver's time inside MPI after posting; \
             ovl: share of the transfer hidden behind the receiver's computation; sW unexp: \
             sender's Wait when the receive is posted 3C after the sender's Wait began \
             (rendezvous: about 3C); early: repetitions whose send completed before the \
             receive was posted (none: rendezvous); rW silnt: receiver's Wait while the \
             sender computes without MPI"
        );
        let _ = writeln!(t, "threshold: {}", self.threshold_text());
        if let Some((name, v)) = &self.path.eager {
            let _ = writeln!(
                t,
                "configured: {name} = {v} B{}",
                if name.starts_with("btl_") {
                    " (ompi_info; includes ob1's header)"
                } else {
                    ""
                }
            );
        }
        t
    }

    fn json(&self) -> serde_json::Value {
        let rows: Vec<_> = self
            .measured
            .rows
            .iter()
            .map(|r| {
                let (w, m, o) = (r.send_wait, r.recv_exposed, r.overlap());
                serde_json::json!({
                    "size": r.size,
                    "protocol": r.protocol().as_str(),
                    "isend_s": r.isend,
                    "send_wait_s": {"plain": w.plain, "test": w.test, "channel": w.channel, "unexpected": r.unexpected_wait},
                    "recv_mpi_s": {"plain": m.plain, "test": m.test, "channel": m.channel},
                    "transfer_s": r.transfer,
                    "overlap": {"plain": o.plain, "test": o.test, "channel": o.channel},
                })
            })
            .collect();
        let threshold = self.measured.threshold;
        serde_json::json!({
            "schema": "aiac.probe/1",
            "mpi": self.library,
            "path": self.path.label,
            "channel_path": self.measured.channel.label(),
            "configured_eager_limit": self.path.eager.as_ref().map(|(n, v)| serde_json::json!({"param": n, "bytes": v})),
            "compute_s": self.compute,
            "reps": self.reps,
            "threshold": {"last_eager": threshold.last_eager, "first_rendezvous": threshold.first_rendezvous},
            "rows": rows,
        })
    }

    pub(super) fn write(&self, dir: &Path) -> Result<(), Error> {
        let fail = |p: &Path, why: String| Error::Output {
            flag: "--out",
            path: p.to_path_buf(),
            why,
        };
        let json = dir.join("probe.json");
        let text =
            serde_json::to_string_pretty(&self.json()).map_err(|e| fail(&json, e.to_string()))?;
        write_atomically(&json, text.as_bytes()).map_err(|e| fail(&json, e.to_string()))?;
        let mut csv = Csv::new(&[
            "size",
            "protocol",
            "isend_s",
            "send_wait_plain_s",
            "send_wait_test_s",
            "send_wait_channel_s",
            "send_wait_unexpected_s",
            "recv_mpi_plain_s",
            "recv_mpi_test_s",
            "recv_mpi_channel_s",
            "transfer_s",
        ]);
        for r in &self.measured.rows {
            csv.row(
                [r.size.to_string(), r.protocol().as_str().to_string()]
                    .into_iter()
                    .chain(
                        [r.isend]
                            .into_iter()
                            .chain(r.send_wait.values())
                            .chain([r.unexpected_wait])
                            .chain(r.recv_exposed.values())
                            .chain([r.transfer])
                            .map(|v| format!("{v:e}")),
                    ),
            );
        }
        let path = dir.join("probe.csv");
        write_atomically(&path, csv.as_bytes()).map_err(|e| fail(&path, e.to_string()))?;
        let stem = dir.join("probe");
        let files = plots::save(&figure(self), &stem).map_err(|e| fail(&stem, e))?;
        for f in files.iter().chain([&json, &path]) {
            println!("wrote {}", f.display());
        }
        Ok(())
    }
}

/// The probe's plot: the kernel's times, the threshold found and the configured limit.
fn figure(r: &Report) -> Lines {
    type Series = (&'static str, fn(&Row) -> f64);
    let series: [Series; 8] = [
        ("sender Wait, plain", |x| x.send_wait.plain),
        ("sender Wait, receiver tests", |x| x.send_wait.test),
        ("sender Wait, aiac channel", |x| x.send_wait.channel),
        ("receiver in MPI, plain", |x| x.recv_exposed.plain),
        ("receiver in MPI, tests", |x| x.recv_exposed.test),
        ("receiver in MPI, channel", |x| x.recv_exposed.channel),
        ("transfer (no compute)", |x| x.transfer),
        ("sender Wait, receive posted late", |x| x.unexpected_wait),
    ];
    let mut marks = Vec::new();
    if let Threshold {
        last_eager: Some(lo),
        first_rendezvous: Some(_),
    } = r.measured.threshold
    {
        marks.push(Mark {
            label: format!("threshold found: {lo} B"),
            at: lo as f64,
            colour: RGBColor(90, 90, 90),
            dashed: false,
        });
    }
    if let Some((name, v)) = &r.path.eager {
        marks.push(Mark {
            label: format!("{name} = {v} B"),
            at: *v as f64,
            colour: RGBColor(200, 0, 0),
            dashed: true,
        });
    }
    Lines {
        title: format!("aiac probe: {}", r.path.label),
        sizes: r.measured.rows.iter().map(|x| x.size).collect(),
        series: series
            .iter()
            .map(|(label, f)| (label.to_string(), r.measured.rows.iter().map(*f).collect()))
            .collect(),
        marks,
    }
}

/// A vertical line at a size, with its legend entry.
pub(super) struct Mark {
    pub(super) label: String,
    /// Bytes.
    pub(super) at: f64,
    pub(super) colour: RGBColor,
    pub(super) dashed: bool,
}

/// Times (seconds, one value per size) against message size, both axes logarithmic: the
/// probe's plot and the experiments'.
pub(super) struct Lines {
    pub(super) title: String,
    pub(super) sizes: Vec<usize>,
    pub(super) series: Vec<(String, Vec<f64>)>,
    pub(super) marks: Vec<Mark>,
}

impl plots::Figure for Lines {
    fn size(&self) -> (u32, u32) {
        (1100, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let root = root
            .titled(&self.title, plots::caption_font())
            .map_err(plots::err)?;
        // µs, floored so that the log axis can show a completed-at-once wait.
        let floor = 0.1;
        let us = |s: f64| (s * 1e6).max(floor);
        // x is log2 of the size, so that ticks fall on powers of two (1K, 2K, ...).
        let l2 = |b: f64| b.max(1.0).log2();
        let (xlo, xhi) = (
            self.sizes.first().map_or(0.0, |&s| l2(s as f64)) - 0.5,
            self.sizes.last().map_or(1.0, |&s| l2(s as f64)) + 0.5,
        );
        let ticks = ((xhi - xlo).ceil() as usize + 1).min(40);
        let ymax = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter())
            .map(|&s| us(s))
            .fold(1.0, f64::max)
            * 8.0;
        let mut chart = ChartBuilder::on(&root)
            .margin(15)
            .x_label_area_size(55)
            .y_label_area_size(90)
            .build_cartesian_2d(xlo..xhi, (floor..ymax).log_scale())
            .map_err(plots::err)?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes, log scale)")
            .y_desc("time (µs, log scale), median")
            .axis_desc_style(plots::desc_font())
            .label_style(plots::label_font())
            .x_labels(ticks)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 1e-6 && (0.0..=40.0).contains(&i) {
                    bytes(1usize << i as u32)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| plots::tick(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plots::err)?;
        for (i, (label, v)) in self.series.iter().enumerate() {
            let c = plots::colour(i);
            let line: Vec<(f64, f64)> = self
                .sizes
                .iter()
                .zip(v)
                .map(|(&s, &y)| (l2(s as f64), us(y)))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                .map_err(plots::err)?
                .label(label.as_str())
                .legend(plots::line_key(c, 3));
            chart
                .draw_series(line.into_iter().map(|q| Circle::new(q, 4, c.filled())))
                .map_err(plots::err)?;
        }
        for m in &self.marks {
            let (x, style) = (l2(m.at), m.colour.stroke_width(1));
            let ends = [(x, floor), (x, ymax)];
            let drawn = if m.dashed {
                chart.draw_series(DashedLineSeries::new(ends, 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(ends, style))
            };
            drawn
                .map_err(plots::err)?
                .label(m.label.as_str())
                .legend(plots::line_key(m.colour, 1));
        }
        // Upper left: small sizes finish in microseconds, so that corner is empty.
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font(plots::label_font())
            .draw()
            .map_err(plots::err)
    }
}
