//! The roofline chart: a log-log SVG of a report against its profile.
//!
//! Arithmetic intensity (FLOP/byte) across, attained TFLOP/s up. The HBM diagonal and one
//! horizontal roof per compute roof of the profile, each twice: theoretical dashed, effective
//! (theoretical × calibration) solid; a triangle at each effective ridge point (where the roof meets
//! the diagonal), its intensity in the legend beside the plot; one filled circle per record, coloured by verdict
//! (grey when blank). A record that has no place on log axes (not timed, zero or missing bytes or
//! flops) is not drawn but counted in a note under the chart, so no row disappears silently.
//!
//! Drawn with `plotters` through its SVG backend only: no font files, no system libraries.
//!
//! ```
//! use tileops::perf::profile::Profile;
//! use tileops::perf::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops::perf::report::{ProfileChoice, Report};
//!
//! let device = DeviceInfo::new("NVIDIA H200");
//! let record = Record::new("softmax", "reduction", "8k", "bfloat16", device.clone())
//!     .with_roofline(Some(5 << 26), Some(2 * 2 << 26))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(50, 0.070, 0.069, 0.072));
//! let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
//! let h200 = Profile::builtin("h200")?;
//! let report = Report::build(&run, ProfileChoice::Fixed(&h200));
//! let chart = tileops::perf::svg::render(&report, Some(&h200))?;
//! assert_eq!(chart.plotted, 1);
//! assert!(chart.svg.starts_with("<svg"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;

use plotters::prelude::*;

use super::files;
use super::profile::Profile;
use super::records::RecordKey;
use super::report::{Report, Row, Verdict};

/// Width of the chart, pixels.
const WIDTH: u32 = 1400;
/// Width of the plot; the legend panel takes the rest.
const PLOT_WIDTH: u32 = 1040;
/// Height of the chart, pixels.
const HEIGHT: u32 = 760;

/// A rendered chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The SVG document.
    pub svg: String,
    /// Records drawn as markers (one circle each).
    pub plotted: usize,
    /// Records with no place on log axes, and why.
    pub not_plotted: Vec<(RecordKey, &'static str)>,
}

impl Chart {
    /// Writes the SVG document to `path` atomically ([`files::write_atomic`]): a failed write
    /// leaves the previous file at `path` as it was.
    ///
    /// # Errors
    /// The write's error (the path is the caller's to name).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        files::write_atomic(path, self.svg.as_bytes())
    }
}

/// The chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the roofline chart: {0}")]
pub struct SvgError(String);

/// The colour of a verdict's markers; blank rows are grey.
pub fn verdict_color(verdict: Option<Verdict>) -> RGBColor {
    match verdict {
        Some(Verdict::Fail) => RGBColor(214, 39, 40),
        Some(Verdict::Anomaly) => RGBColor(200, 0, 200),
        Some(Verdict::LatencyBound) => RGBColor(31, 119, 180),
        Some(Verdict::AtCeiling) => RGBColor(44, 160, 44),
        Some(Verdict::Below) => RGBColor(255, 127, 14),
        None => RGBColor(150, 150, 150),
    }
}

fn roof_color(key: &str) -> RGBColor {
    match key {
        "cuda_core.fp32" => RGBColor(31, 119, 180),
        "tensor_core.fp16" => RGBColor(148, 103, 189),
        "tensor_core.bf16" => RGBColor(140, 86, 75),
        "tensor_core.tf32" => RGBColor(23, 190, 207),
        "tensor_core.fp8" => RGBColor(188, 189, 34),
        _ => RGBColor(127, 127, 127),
    }
}

/// Where a row sits on the chart: (FLOP/byte, TFLOP/s), or why it has no place.
fn position(row: &Row) -> Result<(f64, f64), &'static str> {
    let stats = row.stats.ok_or("not timed")?;
    let bytes = row.bytes.ok_or("no bytes")?;
    let flops = row.flops.ok_or("no flops")?;
    if bytes == 0 {
        return Err("zero bytes");
    }
    if flops == 0 {
        return Err("zero flops (no intensity on a log axis)");
    }
    Ok((
        flops as f64 / bytes as f64,
        flops as f64 / (stats.median_ms / 1e3) / 1e12,
    ))
}

/// Renders the report's rows against `profile`'s roofs (`None`: the points alone).
///
/// # Errors
/// [`SvgError`] when plotters fails to draw (not expected for finite data).
pub fn render(report: &Report, profile: Option<&Profile>) -> Result<Chart, SvgError> {
    let mut points = Vec::new();
    let mut not_plotted = Vec::new();
    for row in &report.rows {
        match position(row) {
            Ok(at) => points.push((at, row.verdict())),
            Err(why) => not_plotted.push((row.key.clone(), why)),
        }
    }
    // Roofs in TFLOP/s (compute) and TB/s (HBM, so that TB/s × FLOP/B = TFLOP/s).
    let hbm = profile.map(|p| (p.hbm().theoretical / 1e12, p.hbm().effective() / 1e12));
    let roofs: Vec<(&str, f64, f64)> = profile
        .map(|p| {
            p.roofs
                .iter()
                .filter(|(k, _)| k.as_str() != "hbm")
                .map(|(k, r)| (k.as_str(), r.theoretical / 1e12, r.effective() / 1e12))
                .collect()
        })
        .unwrap_or_default();

    let mut xs: Vec<f64> = points.iter().map(|((x, _), _)| *x).collect();
    let mut ys: Vec<f64> = points.iter().map(|((_, y), _)| *y).collect();
    if let Some((hbm_t, hbm_e)) = hbm {
        for &(_, t, e) in &roofs {
            xs.extend([t / hbm_t, e / hbm_e]);
            ys.extend([t, e]);
        }
    }
    let (x_lo, x_hi) = span(&xs, 0.1, 100.0);
    let (mut y_lo, y_hi) = span(&ys, 0.1, 1000.0);
    if let Some((_, hbm_e)) = hbm {
        y_lo = y_lo.min(hbm_e * x_lo);
    }

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let title = match profile {
            Some(p) => format!("Roofline: {} (profile {})", p.device.name, p.name),
            None => format!(
                "Roofline: {} (no profile: points only)",
                report.meta.device.name
            ),
        };
        let (body, note_area) = root.split_vertically(HEIGHT - 36);
        // The legend gets its own panel: inside the plot it would hide a roof or a marker.
        let (chart_area, legend_area) = body.split_horizontally(PLOT_WIDTH);
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOP / byte)")
            .y_desc("attained TFLOP/s")
            .light_line_style(WHITE)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 17))
            .draw()
            .map_err(drawing)?;

        let mut legend = Legend::new(&legend_area);
        if let Some((hbm_t, hbm_e)) = hbm {
            // The diagonal runs to the highest roof's ridge; beyond that no roof is above it.
            let end = |i: usize, slope: f64| {
                let ridge = roofs
                    .iter()
                    .map(|r| [r.1, r.2][i] / slope)
                    .fold(0.0, f64::max);
                if roofs.is_empty() {
                    x_hi
                } else {
                    ridge.clamp(x_lo, x_hi)
                }
            };
            let (end_t, end_e) = (end(0, hbm_t), end(1, hbm_e));
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_lo, hbm_t * x_lo), (end_t, hbm_t * end_t)],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))
                .map_err(drawing)?;
            chart
                .draw_series(LineSeries::new(
                    [(x_lo, hbm_e * x_lo), (end_e, hbm_e * end_e)],
                    BLACK.stroke_width(2),
                ))
                .map_err(drawing)?;
            legend
                .heading("roofs: solid effective, dashed theoretical")
                .map_err(drawing)?;
            legend
                .line(BLACK, &format!("hbm: {hbm_e:.2} / {hbm_t:.2} TB/s"))
                .map_err(drawing)?;
            let mut by_height: Vec<&(&str, f64, f64)> = roofs.iter().collect();
            by_height.sort_by(|a, b| a.2.total_cmp(&b.2));
            for &&(key, t, e) in &by_height {
                let color = roof_color(key);
                let (ridge_t, ridge_e) = (t / hbm_t, e / hbm_e);
                chart
                    .draw_series(DashedLineSeries::new(
                        [(ridge_t, t), (x_hi, t)],
                        6,
                        4,
                        color.stroke_width(1),
                    ))
                    .map_err(drawing)?;
                chart
                    .draw_series(LineSeries::new(
                        [(ridge_e, e), (x_hi, e)],
                        color.stroke_width(2),
                    ))
                    .map_err(drawing)?;
                chart
                    .draw_series([TriangleMarker::new((ridge_e, e), 7, color.filled())])
                    .map_err(drawing)?;
                legend
                    .line(color, &format!("{key}: {e:.1} / {t:.1} TFLOP/s"))
                    .map_err(drawing)?;
                legend
                    .text(&format!(
                        "    ridge {ridge_e:.1} FLOP/B (theoretical {ridge_t:.1})"
                    ))
                    .map_err(drawing)?;
            }
            legend.skip();
        } else {
            legend
                .heading("no profile describes this device: no roofs")
                .map_err(drawing)?;
            legend.skip();
        }

        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(at, verdict)| Circle::new(at, 5, verdict_color(verdict).filled())),
            )
            .map_err(drawing)?;
        legend.heading("records by verdict").map_err(drawing)?;
        for verdict in Verdict::ALL.iter().map(|v| Some(*v)).chain([None]) {
            let n = points.iter().filter(|(_, v)| *v == verdict).count();
            legend
                .swatch(
                    verdict_color(verdict),
                    &format!("{}: {n}", verdict.map_or("blank", Verdict::as_str)),
                )
                .map_err(drawing)?;
        }

        let mut note = format!("{} of {} records plotted", points.len(), report.rows.len());
        if !not_plotted.is_empty() {
            let mut reasons: Vec<(&str, usize)> = Vec::new();
            for (_, why) in &not_plotted {
                match reasons.iter_mut().find(|(w, _)| w == why) {
                    Some((_, n)) => *n += 1,
                    None => reasons.push((why, 1)),
                }
            }
            let listed: Vec<String> = reasons.iter().map(|(w, n)| format!("{n} {w}")).collect();
            note.push_str(&format!("; not plotted: {}", listed.join(", ")));
        }
        note_area
            .draw(&Text::new(note, (20, 10), ("sans-serif", 14).into_font()))
            .map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(Chart {
        svg,
        plotted: points.len(),
        not_plotted,
    })
}

fn drawing(e: impl std::fmt::Display) -> SvgError {
    SvgError(e.to_string())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The legend panel beside the plot, filled top to bottom.
struct Legend<'p, 'a> {
    area: &'p Area<'a>,
    y: i32,
}

impl<'p, 'a> Legend<'p, 'a> {
    const LINE: i32 = 20;
    const TEXT_X: i32 = 40;

    fn new(area: &'p Area<'a>) -> Self {
        Legend { area, y: 60 }
    }

    fn text_at(&mut self, x: i32, text: &str, size: u32) -> Result<(), SvgError> {
        self.area
            .draw(&Text::new(
                text.to_owned(),
                (x, self.y - 7),
                ("sans-serif", size).into_font(),
            ))
            .map_err(drawing)?;
        self.y += Self::LINE;
        Ok(())
    }

    fn heading(&mut self, text: &str) -> Result<(), SvgError> {
        self.text_at(8, text, 15)
    }

    fn text(&mut self, text: &str) -> Result<(), SvgError> {
        self.text_at(Self::TEXT_X, text, 13)
    }

    fn line(&mut self, color: RGBColor, text: &str) -> Result<(), SvgError> {
        self.area
            .draw(&PathElement::new(
                vec![(10, self.y), (32, self.y)],
                color.stroke_width(2),
            ))
            .map_err(drawing)?;
        self.text(text)
    }

    fn swatch(&mut self, color: RGBColor, text: &str) -> Result<(), SvgError> {
        self.area
            .draw(&Rectangle::new(
                [(16, self.y - 5), (26, self.y + 5)],
                color.filled(),
            ))
            .map_err(drawing)?;
        self.text(text)
    }

    fn skip(&mut self) {
        self.y += Self::LINE / 2;
    }
}

/// A log range covering `values` with margin, or `[lo, hi]` when there are none.
fn span(values: &[f64], lo: f64, hi: f64) -> (f64, f64) {
    let finite = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
    let (min, max) = finite.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if max == 0.0 {
        return (lo, hi);
    }
    // A decade of room below and above keeps markers off the frame.
    let (min, max) = (min / 4.0, max * 4.0);
    if max / min < 100.0 {
        (min.min(max / 100.0), max)
    } else {
        (min, max)
    }
}
