//! The paper's figures, drawn with plotters as PNG and SVG from saved runs.
//!
//! * `convergence`: the stopping criterion against time and against iterations, one line per
//!   configuration, log scale (Bethune et al., Figures 8 and 9);
//! * `iterations`: iterations done by each rank (Figure 7);
//! * `batches`: how many new messages each receive found (the arrival batch size that
//!   chan-core's channels count), async and racy runs;
//! * `vs_R`, `vs_N`, `vs_p`: time to solution and iteration rate against the messages in
//!   flight R (Figure 10), the halo period N (Figure 11) and the process count (Figure 3),
//!   when a set of runs varies them.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary (the `dejavu` crate; the fonts'
//! licence is the permissive Bitstream Vera / DejaVu licence), so drawing needs no system
//! font and no display. Every file is written atomically.

use crate::output::write_atomically;
use crate::saved::{channel_buckets, ConfigExt, Outcome};
use crate::summary::{self, Group};
use jacobi::{Report, RunConfig, StopCriterion};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Register the embedded font as plotters' "sans-serif" (once per process).
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let font = dejavu::sans::regular();
        if plotters::style::register_font("sans-serif", FontStyle::Normal, font).is_err() {
            tracing::warn!("the embedded font could not be loaded: plots will have no text");
        }
        let bold = dejavu::sans::bold();
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, bold);
    });
}

/// Tableau 10: distinguishable, print-safe colours.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(crate) fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// At most this many lines or bar series in one plot (legends stay readable).
const MAX_SERIES: usize = 10;

/// The legend in the upper right corner, as every figure draws it.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .label_font(label_font())
        .draw()
        .map_err(err)
}

/// A line series' legend key: a short stroke of colour `c`, `width` pixels wide.
pub(crate) fn line_key(c: RGBColor, width: u32) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(width))
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A figure that can be drawn on any plotters backend.
pub(crate) trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// The plots [`draw_all`] may draw into its directory, each as `NAME.png` and `NAME.svg`.
pub(crate) const PLOTS: [&str; 3] = ["convergence", "iterations", "batches"];

/// Draw `fig` as `stem.png` and `stem.svg`, each written atomically.
pub(crate) fn save<F: Figure>(fig: &F, stem: &Path) -> Result<Vec<PathBuf>, String> {
    register_font();
    let (w, h) = fig.size();
    let svg_path = stem.with_extension("svg");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(err)?;
    }
    write_atomically(&svg_path, svg.as_bytes())
        .map_err(|e| format!("{}: {e}", svg_path.display()))?;
    let png_path = stem.with_extension("png");
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(err)?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(err)?;
        wr.write_image_data(&rgb).map_err(err)?;
        wr.finish().map_err(err)?;
    }
    write_atomically(&png_path, &png_bytes).map_err(|e| format!("{}: {e}", png_path.display()))?;
    Ok(vec![png_path, svg_path])
}

fn title_font() -> TextStyle<'static> {
    ("sans-serif", 26).into_font().style(FontStyle::Bold).into()
}

pub(crate) fn caption_font() -> TextStyle<'static> {
    ("sans-serif", 20).into_font().into()
}

pub(crate) fn desc_font() -> TextStyle<'static> {
    ("sans-serif", 18).into_font().into()
}

pub(crate) fn label_font() -> TextStyle<'static> {
    ("sans-serif", 15).into_font().into()
}

/// How far above the data the y axis goes, so that a legend of `n` entries in the upper
/// right corner stays clear of it.
fn headroom(n: usize) -> f64 {
    1.12 + 0.075 * n as f64
}

/// Tick label for numbers spanning orders of magnitude.
pub(crate) fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if (1e-3..1e5).contains(&a) {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
}

/// One line of a convergence profile.
struct Profile {
    label: String,
    /// (iteration, residual, seconds)
    points: Vec<(f64, f64, f64)>,
}

struct Convergence {
    lines: Vec<Profile>,
    tol: Option<f64>,
    what: String,
    title: String,
}

impl Figure for Convergence {
    fn size(&self) -> (u32, u32) {
        (1500, 620)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let root = root.titled(&self.title, title_font()).map_err(err)?;
        let (left, right) = root.split_horizontally(750);
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let rmin = all()
            .map(|p| p.1)
            .chain(self.tol)
            .fold(f64::INFINITY, f64::min);
        let rmax = all()
            .map(|p| p.1)
            .chain(self.tol)
            .fold(f64::NEG_INFINITY, f64::max);
        let (ylo, yhi) = (rmin / 3.0, rmax * 3.0);
        let tmax = all().map(|p| p.2).fold(0.0, f64::max).max(1e-6) * 1.03;
        let imax = all().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.03;
        for (area, by_time) in [(&left, true), (&right, false)] {
            let xmax = if by_time { tmax } else { imax };
            let mut chart = ChartBuilder::on(area)
                .caption(
                    if by_time {
                        "against time"
                    } else {
                        "against iterations"
                    },
                    caption_font(),
                )
                .margin(15)
                .x_label_area_size(55)
                .y_label_area_size(85)
                .build_cartesian_2d(0f64..xmax, (ylo..yhi).log_scale())
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(if by_time {
                    "time since the solve started (s)"
                } else {
                    "iteration (rank 0)"
                })
                .y_desc(self.what.as_str())
                .axis_desc_style(desc_font())
                .label_style(label_font())
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| format!("{v:.0e}"))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            if let Some(tol) = self.tol {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(0.0, tol), (xmax, tol)],
                        8,
                        6,
                        BLACK.stroke_width(1),
                    ))
                    .map_err(err)?
                    .label(format!("tol {tol:.0e}"))
                    .legend(line_key(BLACK, 1));
            }
            for (i, l) in self.lines.iter().enumerate() {
                let c = colour(i);
                let pts: Vec<(f64, f64)> = l
                    .points
                    .iter()
                    .map(|p| (if by_time { p.2 } else { p.0 }, p.1))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                    .map_err(err)?
                    .label(l.label.clone())
                    .legend(line_key(c, 3));
            }
            draw_legend(&mut chart)?;
        }
        Ok(())
    }
}

/// Grouped bars: categories along x, one bar per series in each.
struct Bars {
    title: String,
    x_desc: String,
    y_desc: String,
    categories: Vec<u64>,
    /// (label, value per category)
    series: Vec<(String, Vec<f64>)>,
    /// A log scale for y (for distributions with a long tail); zero values are not drawn.
    log_y: bool,
}

/// Draw `bars` on a chart whose y axis is `$yr`, bars rising from `$floor`.
macro_rules! draw_bars {
    ($bars:expr, $root:expr, $yr:expr, $floor:expr, $yfmt:expr) => {{
        let b = $bars;
        let n = b.categories.len().max(1);
        let mut chart = ChartBuilder::on($root)
            .caption(b.title.as_str(), title_font())
            .margin(20)
            .x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, $yr)
            .map_err(err)?;
        let cats = b.categories.clone();
        let fmt = move |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
                cats[i as usize].to_string()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(40))
            .x_label_formatter(&fmt)
            .y_label_formatter(&$yfmt)
            .x_desc(b.x_desc.as_str())
            .y_desc(b.y_desc.as_str())
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let k = b.series.len().max(1) as f64;
        let w = 0.8 / k;
        let floor: f64 = $floor;
        for (si, (label, vals)) in b.series.iter().enumerate() {
            let c = colour(si);
            chart
                .draw_series(vals.iter().enumerate().filter(|(_, v)| **v > floor).map(
                    |(ci, &v)| {
                        let x0 = ci as f64 - 0.4 + si as f64 * w;
                        Rectangle::new([(x0, floor), (x0 + w * 0.92, v)], c.filled())
                    },
                ))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        }
        draw_legend(&mut chart)?;
    }};
}

impl Figure for Bars {
    fn size(&self) -> (u32, u32) {
        (1100, 620)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let vals = || self.series.iter().flat_map(|s| s.1.iter().copied());
        let ymax = vals().fold(0.0, f64::max).max(1e-9);
        if self.log_y {
            let ymin = vals().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
            let floor = if ymin.is_finite() {
                ymin / 3.0
            } else {
                ymax / 10.0
            };
            // Headroom for the legend: a factor per entry on a log axis.
            let decades = (ymax / floor).log10();
            let top = ymax * 10f64.powf(0.04 * self.series.len() as f64 * decades.max(1.0));
            draw_bars!(self, root, (floor..top).log_scale(), floor, |v: &f64| tick(
                *v
            ));
        } else {
            let top = ymax * headroom(self.series.len());
            draw_bars!(self, root, 0f64..top, 0.0, |v: &f64| tick(*v));
        }
        Ok(())
    }
}

/// A point of a parameter study: (parameter value, time to solution s, iterations/s).
type StudyPoint = (f64, f64, f64);

/// Time to solution and iteration rate against one parameter.
struct VsParam {
    title: String,
    x_desc: String,
    /// (label, points)
    series: Vec<(String, Vec<StudyPoint>)>,
}

impl Figure for VsParam {
    fn size(&self) -> (u32, u32) {
        (1500, 620)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let root = root.titled(&self.title, title_font()).map_err(err)?;
        let (left, right) = root.split_horizontally(750);
        let pts = || self.series.iter().flat_map(|s| s.1.iter());
        // The parameter's values, evenly spaced (1, 2, 4, 8 are steps of one doubling).
        let mut xs: Vec<f64> = pts().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let pos = |x: f64| xs.iter().position(|v| *v == x).unwrap_or(0) as f64;
        let n = xs.len();
        let (xlo, xhi) = (-0.3, n as f64 - 0.7);
        let labels = xs.clone();
        let fmt = move |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                tick(labels[i as usize])
            } else {
                String::new()
            }
        };
        for (area, time) in [(&left, true), (&right, false)] {
            let y = |p: &(f64, f64, f64)| if time { p.1 } else { p.2 };
            let ymax = pts().map(y).fold(0.0, f64::max).max(1e-12) * headroom(self.series.len());
            let mut chart = ChartBuilder::on(area)
                .caption(
                    if time {
                        "time to solution"
                    } else {
                        "iteration rate"
                    },
                    caption_font(),
                )
                .margin(15)
                .x_label_area_size(55)
                .y_label_area_size(90)
                .build_cartesian_2d(xlo..xhi, 0f64..ymax)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(self.x_desc.as_str())
                .y_desc(if time {
                    "time (s), median over repeats"
                } else {
                    "iterations per second (mean over ranks)"
                })
                .axis_desc_style(desc_font())
                .label_style(label_font())
                .disable_x_mesh()
                .x_labels(n.min(40))
                .x_label_formatter(&fmt)
                .y_label_formatter(&|v| tick(*v))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            for (i, (label, p)) in self.series.iter().enumerate() {
                let c = colour(i);
                let line: Vec<(f64, f64)> = p.iter().map(|q| (pos(q.0), y(q))).collect();
                chart
                    .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                    .map_err(err)?
                    .label(label.clone())
                    .legend(line_key(c, 3));
                chart
                    .draw_series(line.into_iter().map(|q| Circle::new(q, 5, c.filled())))
                    .map_err(err)?;
            }
            draw_legend(&mut chart)?;
        }
        Ok(())
    }
}

/// What the runs' stopping criterion is, for an axis.
fn criterion_desc(configs: &[&RunConfig]) -> String {
    let all = |f: fn(&StopCriterion) -> bool| configs.iter().all(|c| f(&c.config.criterion));
    if all(|c| matches!(c, StopCriterion::RelativeResidual { .. })) {
        "relative residual ‖b − Au‖₂ / ‖b − Au₀‖₂".into()
    } else if all(|c| matches!(c, StopCriterion::UpdateNorm { .. })) {
        "update norm ‖u_k − u_k−1‖₂".into()
    } else {
        "stopping criterion".into()
    }
}

/// What the figures of [`draw_all`] read: the runs grouped by configuration, and the columns
/// whose values tell the configurations apart in a legend.
struct Figures<'a> {
    groups: Vec<Group<'a>>,
    configs: Vec<&'a RunConfig>,
    cols: Vec<&'static summary::Column>,
}

/// A figure's time and rate against a parameter: its file name, the title's end, the x axis,
/// the x of a configuration (none: the parameter does not apply to it), the key of the family
/// its line belongs to, and the legend columns left out.
type Param = (
    &'static str,
    &'static str,
    &'static str,
    fn(&RunConfig) -> Option<f64>,
    fn(&RunConfig) -> String,
    &'static [&'static str],
);

/// The figures of time and rate against R, N and p.
const PARAMS: [Param; 3] = [
    (
        "vs_R",
        "against R, the messages in flight per channel",
        "R (messages in flight per channel direction)",
        |c| {
            c.applies(jacobi::Setting::MaxInFlight)
                .then_some(crate::summary::iteration(c).max_in_flight as f64)
        },
        |c| {
            let mut c = c.clone();
            if let Some(it) = c.config.method.iteration_mut() {
                it.max_in_flight = 0;
            }
            c.key()
        },
        &["R"],
    ),
    (
        "vs_N",
        "against N, the halo exchange period",
        "N (iterations between halo exchanges)",
        |c| Some(crate::summary::iteration(c).halo_every as f64),
        |c| {
            let mut c = c.clone();
            if let Some(it) = c.config.method.iteration_mut() {
                it.halo_every = 0;
            }
            c.key()
        },
        &["N"],
    ),
    (
        "vs_p",
        "against p, the number of processes",
        "p (processes or threads)",
        |c| Some(c.ranks as f64),
        RunConfig::key_without_ranks,
        &["p", "size", "decomp"],
    ),
];

/// Draw every figure the runs support into `dir`; the files written.
pub(crate) fn draw_all(outcomes: &[Outcome], dir: &Path) -> Result<Vec<PathBuf>, String> {
    let groups = summary::groups(outcomes);
    let configs: Vec<&RunConfig> = groups.iter().map(|g| g.config).collect();
    let cols = summary::legend_columns(&configs);
    let figs = Figures {
        groups,
        configs,
        cols,
    };
    let mut files = Vec::new();
    figs.convergence(dir, &mut files)?;
    figs.iterations_per_rank(dir, &mut files)?;
    figs.arrival_batches(dir, &mut files)?;
    for param in PARAMS {
        figs.against(param, dir, &mut files)?;
    }
    Ok(files)
}

impl Figures<'_> {
    /// A configuration's legend label, without the columns `skip`.
    fn label(&self, c: &RunConfig, skip: &[&str]) -> String {
        let l = summary::label(c, &self.cols, skip);
        if l.is_empty() {
            c.config.variant().name().to_string()
        } else {
            l
        }
    }

    /// Each configuration that has a report, with its first.
    fn with_run(&self) -> Vec<(&Group<'_>, &Report)> {
        self.groups
            .iter()
            .filter_map(|g| g.first_ok().map(|r| (g, r)))
            .collect()
    }

    /// Convergence profiles.
    fn convergence(&self, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
        let with_run = self.with_run();
        let all_lines = with_run.len();
        let lines: Vec<Profile> = with_run
            .iter()
            .filter_map(|(g, r)| {
                let r0 = r.ranks.first()?;
                let points: Vec<(f64, f64, f64)> = r0
                    .history
                    .iter()
                    .filter(|p| p.residual() > 0.0 && p.residual().is_finite())
                    .map(|p| (p.iteration() as f64, p.residual(), p.time_s()))
                    .collect();
                (!points.is_empty()).then(|| Profile {
                    label: self.label(g.config, &[]),
                    points,
                })
            })
            .take(MAX_SERIES)
            .collect();
        if lines.is_empty() {
            return Ok(());
        }
        let tols: Vec<f64> = with_run.iter().map(|(_, r)| r.tol).collect();
        let tol = tols
            .first()
            .copied()
            .filter(|t| tols.iter().all(|u| u == t));
        let title = if all_lines > lines.len() {
            format!(
                "Convergence profile as rank 0 saw it (first {} of {all_lines} configurations)",
                lines.len()
            )
        } else {
            "Convergence profile: the stopping criterion as rank 0 saw it".into()
        };
        let fig = Convergence {
            lines,
            tol,
            what: criterion_desc(&self.configs),
            title,
        };
        files.extend(save(&fig, &dir.join(PLOTS[0]))?);
        Ok(())
    }

    /// Iterations per rank, for the configurations with the most ranks.
    fn iterations_per_rank(&self, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
        let with_run = self.with_run();
        let pmax = with_run
            .iter()
            .map(|(_, r)| r.ranks.len())
            .max()
            .unwrap_or(0);
        if pmax <= 1 {
            return Ok(());
        }
        let series: Vec<(String, Vec<f64>)> = with_run
            .iter()
            .filter(|(_, r)| r.ranks.len() == pmax)
            .take(MAX_SERIES)
            .map(|(g, r)| {
                (
                    self.label(g.config, &["p"]),
                    r.ranks.iter().map(|k| k.iterations as f64).collect(),
                )
            })
            .collect();
        let fig = Bars {
            title: format!("Iterations done by each of {pmax} ranks"),
            x_desc: "rank".into(),
            y_desc: "iterations".into(),
            categories: (0..pmax as u64).collect(),
            series,
            log_y: false,
        };
        files.extend(save(&fig, &dir.join(PLOTS[1]))?);
        Ok(())
    }

    /// Arrival batch sizes of async and racy runs.
    fn arrival_batches(&self, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
        let hists: Vec<(String, Vec<(u64, u64)>)> = self
            .with_run()
            .iter()
            .filter(|(g, _)| g.config.variant() != jacobi::Variant::Sync)
            .filter_map(|(g, r)| {
                let mut sum = std::collections::BTreeMap::<u64, u64>::new();
                for k in &r.ranks {
                    for (v, c) in channel_buckets(k, g.config.variant(), |ch| &ch.batches) {
                        *sum.entry(v).or_default() += c;
                    }
                }
                (!sum.is_empty()).then(|| (self.label(g.config, &[]), sum.into_iter().collect()))
            })
            .take(MAX_SERIES)
            .collect();
        if hists.is_empty() {
            return Ok(());
        }
        let mut cats: Vec<u64> = hists.iter().flat_map(|h| h.1.iter().map(|p| p.0)).collect();
        cats.sort_unstable();
        cats.dedup();
        let series = hists
            .iter()
            .map(|(l, h)| {
                let total: u64 = h.iter().map(|p| p.1).sum::<u64>().max(1);
                let vals = cats
                    .iter()
                    .map(|c| {
                        h.iter().find(|p| p.0 == *c).map_or(0.0, |p| p.1 as f64) * 100.0
                            / total as f64
                    })
                    .collect();
                (l.clone(), vals)
            })
            .collect();
        let fig = Bars {
            title: "Messages found by each receive (arrival batch size)".into(),
            x_desc: "new messages found by one receive (all ranks' halo channels)".into(),
            y_desc: "share of receives (%), log scale".into(),
            categories: cats,
            series,
            log_y: true,
        };
        files.extend(save(&fig, &dir.join(PLOTS[2]))?);
        Ok(())
    }

    /// Time and rate against one parameter ([`PARAMS`]): a line per family of configurations
    /// that differ in it only, where a family has two points or more.
    fn against(
        &self,
        (name, title, x_desc, x_of, family_of, skip): Param,
        dir: &Path,
        files: &mut Vec<PathBuf>,
    ) -> Result<(), String> {
        // (family key, label, points)
        let mut fams: Vec<(String, String, Vec<StudyPoint>)> = Vec::new();
        for g in &self.groups {
            let Some(x) = x_of(g.config) else { continue };
            let (Some(t), Some(rate)) = (g.median(|r| r.time_s), g.median(Report::iteration_rate))
            else {
                continue;
            };
            let key = family_of(g.config);
            match fams.iter_mut().find(|f| f.0 == key) {
                Some(f) => f.2.push((x, t, rate)),
                None => fams.push((key, self.label(g.config, skip), vec![(x, t, rate)])),
            }
        }
        let series: Vec<(String, Vec<StudyPoint>)> = fams
            .into_iter()
            .filter(|f| f.2.len() >= 2)
            .take(MAX_SERIES)
            .map(|(_, l, mut p)| {
                p.sort_by(|a, b| a.0.total_cmp(&b.0));
                (l, p)
            })
            .collect();
        if series.is_empty() {
            return Ok(());
        }
        let fig = VsParam {
            title: format!("Time to solution and iteration rate {title}"),
            x_desc: x_desc.into(),
            series,
        };
        files.extend(save(&fig, &dir.join(name))?);
        Ok(())
    }
}

/// One line of the hash table's weak-scaling plot: (ranks, insert s, probe s) for one
/// backend and local volume.
pub(crate) struct DhtLine {
    /// Legend label (backend, LV).
    pub(crate) label: String,
    /// Which backend (line style and marker: solid circles, dashed triangles, dotted crosses).
    pub(crate) group: usize,
    /// Which local volume (colour).
    pub(crate) shade: usize,
    /// (ranks, insert seconds, probe seconds), by ranks.
    pub(crate) points: Vec<(f64, f64, f64)>,
}

/// Lines in the hash table's plot: 3 backends × 5 local volumes, and one to spare.
const DHT_MAX_SERIES: usize = 16;

/// Maynard's Figures 4–6: time against ranks at fixed objects per rank (weak scaling), one
/// line per backend (style, marker) and local volume (colour); insert time left, probe time
/// right, log scale (a flat line is perfect weak scaling). With `strong`, at a fixed total
/// (a line falling as 1/ranks is perfect strong scaling).
struct DhtWeak {
    lines: Vec<DhtLine>,
    /// Strong scaling (total objects fixed): the title says so.
    strong: bool,
}

impl Figure for DhtWeak {
    fn size(&self) -> (u32, u32) {
        (1500, 640)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let root = root
            .titled(
                if self.strong {
                    "Distributed hash table, strong scaling (total objects fixed)"
                } else {
                    "Distributed hash table, weak scaling (objects per rank fixed)"
                },
                title_font(),
            )
            .map_err(err)?;
        let (left, right) = root.split_horizontally(750);
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let xmax = all().map(|p| p.0).fold(1.0, f64::max);
        for (area, insert) in [(&left, true), (&right, false)] {
            let y = |p: &(f64, f64, f64)| if insert { p.1 } else { p.2 }.max(1e-6);
            let ylo = all().map(y).fold(f64::INFINITY, f64::min) / 2.0;
            let ymax = all().map(y).fold(0.0, f64::max) * 2.0;
            // Room above the data for the legend, on a log scale: the decades the data spans
            // again, times what the legend's entries need.
            let yhi = ymax * (ymax / ylo).powf(0.75 * (headroom(self.lines.len()) - 1.0) * 1.5);
            let mut chart = ChartBuilder::on(area)
                .caption(
                    if insert {
                        "insert phase"
                    } else {
                        "probe phase"
                    },
                    caption_font(),
                )
                .margin(15)
                .x_label_area_size(55)
                .y_label_area_size(85)
                .build_cartesian_2d((0.8f64..xmax * 1.25).log_scale(), (ylo..yhi).log_scale())
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("ranks")
                .y_desc("time (s), slowest rank")
                .axis_desc_style(desc_font())
                .label_style(label_font())
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            for l in self.lines.iter().take(DHT_MAX_SERIES) {
                let c = colour(l.shade);
                let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, y(p))).collect();
                match l.group % 3 {
                    0 => {
                        chart
                            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                            .map_err(err)?
                            .label(l.label.clone())
                            .legend(line_key(c, 3));
                        chart
                            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))
                            .map_err(err)?;
                    }
                    g => {
                        let (dash, gap) = if g == 1 { (10, 6) } else { (3, 4) };
                        chart
                            .draw_series(DashedLineSeries::new(
                                pts.clone(),
                                dash,
                                gap,
                                c.stroke_width(2),
                            ))
                            .map_err(err)?
                            .label(l.label.clone())
                            .legend(move |(x, y)| {
                                // The line's own dashes, as the key: two long or three short.
                                let seg: [(i32, i32); 3] = if g == 1 {
                                    [(0, 9), (15, 24), (24, 24)]
                                } else {
                                    [(0, 4), (10, 14), (20, 24)]
                                };
                                let part = |(a, b): (i32, i32)| {
                                    PathElement::new(
                                        vec![(x + a, y), (x + b, y)],
                                        c.stroke_width(3),
                                    )
                                };
                                EmptyElement::at((0, 0))
                                    + part(seg[0])
                                    + part(seg[1])
                                    + part(seg[2])
                            });
                        if g == 1 {
                            chart
                                .draw_series(
                                    pts.into_iter()
                                        .map(|p| TriangleMarker::new(p, 6, c.filled())),
                                )
                                .map_err(err)?;
                        } else {
                            chart
                                .draw_series(
                                    pts.into_iter().map(|p| Cross::new(p, 5, c.stroke_width(2))),
                                )
                                .map_err(err)?;
                        }
                    }
                }
            }
            draw_legend(&mut chart)?;
        }
        Ok(())
    }
}

/// Draw the hash table's weak-scaling plot (or strong-scaling, `strong`) as `stem.png` and
/// `stem.svg`.
pub(crate) fn draw_dht(
    lines: Vec<DhtLine>,
    stem: &Path,
    strong: bool,
) -> Result<Vec<PathBuf>, String> {
    save(&DhtWeak { lines, strong }, stem)
}
