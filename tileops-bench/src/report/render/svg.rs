//! The roofline chart: a log-log SVG of a report against its profile.
//!
//! Arithmetic intensity (FLOP/byte) across, attained TFLOP/s up, both axes labelled at decades
//! only, as `10ⁿ`. The memory diagonal and one horizontal roof per compute roof of the profile,
//! each in its own colour and each twice: theoretical dashed, effective (theoretical ×
//! calibration) solid; a triangle at each effective ridge point (where the roof meets the
//! diagonal), its intensity in the legend beside the plot. One marker per record: its shape says
//! the op family, its fill the verdict (grey when blank), and its `<title>` (the browser's
//! tooltip) names op, workload, dtype, time, efficiency and verdict. A record that has no place
//! on log axes (not timed, zero or missing bytes or flops) is not drawn but counted in a note
//! under the chart, so no row disappears silently.
//!
//! The frame, roofs, legend and caption are drawn with `plotters` through its SVG backend only (no
//! font files, no system libraries). The axes (ticks, labels, titles) and the markers are written
//! here as SVG elements and spliced into plotters' document: plotters' log axes put labels at
//! non-decades in `f64` notation (`9.999999999999999e-5`), size them without knowing their width,
//! and cannot attach a `<title>` to a marker.
//!
//! ```
//! use tileops_bench::profile::Profile;
//! use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops_bench::report::{ProfileChoice, Report};
//!
//! let device = DeviceInfo::new("NVIDIA H200");
//! let record = Record::new("softmax", "reduction", "8k", "bfloat16", device.clone())
//!     .with_roofline(Some(5 << 26), Some(2 * 2 << 26))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(50, 0.070, 0.069, 0.072));
//! let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
//! let h200 = Profile::builtin("h200")?;
//! let report = Report::build(&run, ProfileChoice::Fixed(&h200));
//! let chart = tileops_bench::svg::render(&report, Some(&h200))?;
//! assert_eq!(chart.plotted, 1);
//! assert!(chart.svg.starts_with("<svg"));
//! assert!(chart.svg.contains("<title>op: softmax\nworkload: 8k\ndtype: bfloat16"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use crate::files;
use crate::profile::{MMA_SYNC_ROOF, Profile};
use crate::records::RecordKey;
use crate::report::{Report, Row, Verdict, sig4};
use crate::text;
use tileops::registry::RoofKey;

/// Width of the chart, pixels.
const WIDTH: u32 = 1400;
/// Width of the plot; the legend panel takes the rest.
const PLOT_WIDTH: u32 = 1040;
/// Smallest height of the chart, pixels; a long legend makes it taller.
const MIN_HEIGHT: u32 = 760;
/// Height of the note line under the chart.
const NOTE_HEIGHT: u32 = 36;
/// Room left of the plot for the y tick labels and the y title.
const Y_LABEL_AREA: u32 = 96;
/// Room under the plot for the x tick labels and the x title.
const X_LABEL_AREA: u32 = 64;
/// Tick label font size, pixels.
const TICK_FONT: u32 = 14;
/// Axis title font size, pixels.
const TITLE_FONT: u32 = 16;
/// Marker size: the radius of the circle the shape fits in, pixels.
const MARKER_R: f64 = 6.0;

/// A rendered chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The SVG document.
    pub svg: String,
    /// Records drawn as markers (one each, with a `<title>`).
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

/// The colour of a compute roof's lines, ridge point and legend entry.
///
/// One colour per roof key, far apart from each other and from the black memory diagonal (the
/// unit tests check the distances), so that fp16 and bf16 roofs, which sit close together on an
/// H200, can be told apart.
pub fn roof_color(key: &str) -> RGBColor {
    match RoofKey::parse(key) {
        Some(RoofKey::CUDA_CORE_FP32) => RGBColor(0, 128, 128),
        Some(RoofKey::TENSOR_CORE_FP16) => RGBColor(117, 68, 200),
        Some(RoofKey::TENSOR_CORE_BF16) => RGBColor(190, 110, 30),
        Some(RoofKey::TENSOR_CORE_TF32) => RGBColor(0, 160, 230),
        Some(RoofKey::TENSOR_CORE_FP8) => RGBColor(230, 40, 150),
        Some(RoofKey::CPU_FP64) => RGBColor(110, 140, 0),
        Some(RoofKey::CPU_FP32) => RGBColor(130, 40, 40),
        _ => RGBColor(127, 127, 127),
    }
}

/// A marker shape: one per op family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A circle.
    Circle,
    /// A square.
    Square,
    /// A diamond.
    Diamond,
    /// A triangle pointing up.
    TriangleUp,
    /// A triangle pointing down.
    TriangleDown,
    /// A five-pointed star.
    Star,
    /// A pentagon.
    Pentagon,
    /// A hexagon.
    Hexagon,
    /// A plus sign.
    Plus,
    /// A diagonal cross.
    Cross,
}

impl Shape {
    /// Every shape, in the order families get them.
    /// The upward triangle comes last: the ridge points are upward triangles too.
    /// The pentagon comes after the hexagon and the other shapes: at a marker's size the two
    /// look alike (the H200 chart gave them to gemm and position_encoding), so they meet only
    /// from the ninth family on.
    pub const ALL: [Shape; 10] = [
        Shape::Circle,
        Shape::Square,
        Shape::Diamond,
        Shape::TriangleDown,
        Shape::Plus,
        Shape::Star,
        Shape::Cross,
        Shape::Hexagon,
        Shape::Pentagon,
        Shape::TriangleUp,
    ];

    /// The name written in the marker's `data-shape` attribute.
    pub const fn name(self) -> &'static str {
        match self {
            Shape::Circle => "circle",
            Shape::Square => "square",
            Shape::Diamond => "diamond",
            Shape::TriangleUp => "triangle-up",
            Shape::TriangleDown => "triangle-down",
            Shape::Star => "star",
            Shape::Pentagon => "pentagon",
            Shape::Hexagon => "hexagon",
            Shape::Plus => "plus",
            Shape::Cross => "cross",
        }
    }

    /// The shape of the `index`-th family. Past [`Shape::ALL`]'s ten shapes they repeat (the
    /// legend still lists each family with its shape).
    pub fn for_family(index: usize) -> Shape {
        Shape::ALL[index % Shape::ALL.len()]
    }

    /// The SVG element drawing the shape centred at `(x, y)` with radius `r`: the opening of the
    /// element (without `>`) and its closing tag, so attributes and a `<title>` go in between.
    fn element(self, x: f64, y: f64, r: f64) -> (String, &'static str) {
        let polygon = |points: Vec<(f64, f64)>| {
            let list: Vec<String> = points
                .iter()
                .map(|(px, py)| format!("{:.1},{:.1}", x + px, y + py))
                .collect();
            (
                format!("<polygon points=\"{}\"", list.join(" ")),
                "</polygon>",
            )
        };
        let regular = |n: usize, radius: f64, turn: f64| -> Vec<(f64, f64)> {
            (0..n)
                .map(|i| {
                    let a = turn + i as f64 * std::f64::consts::TAU / n as f64;
                    (radius * a.cos(), radius * a.sin())
                })
                .collect()
        };
        let up = -std::f64::consts::FRAC_PI_2;
        match self {
            Shape::Circle => (
                format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\""),
                "</circle>",
            ),
            Shape::Square => {
                let s = r * 0.85;
                (
                    format!(
                        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"",
                        x - s,
                        y - s,
                        2.0 * s,
                        2.0 * s
                    ),
                    "</rect>",
                )
            }
            Shape::Diamond => polygon(regular(4, r * 1.15, up)),
            Shape::TriangleUp => polygon(regular(3, r * 1.2, up)),
            Shape::TriangleDown => polygon(regular(3, r * 1.2, -up)),
            Shape::Pentagon => polygon(regular(5, r * 1.05, up)),
            Shape::Hexagon => polygon(regular(6, r, 0.0)),
            Shape::Star => {
                let outer = regular(5, r * 1.3, up);
                let inner = regular(5, r * 0.55, up + std::f64::consts::PI / 5.0);
                polygon(
                    outer
                        .into_iter()
                        .zip(inner)
                        .flat_map(|(o, i)| [o, i])
                        .collect(),
                )
            }
            Shape::Plus | Shape::Cross => {
                let (a, b) = (r * 1.1, r * 0.38);
                let arm = [
                    (-b, -a),
                    (b, -a),
                    (b, -b),
                    (a, -b),
                    (a, b),
                    (b, b),
                    (b, a),
                    (-b, a),
                    (-b, b),
                    (-a, b),
                    (-a, -b),
                    (-b, -b),
                ];
                let turn = if self == Shape::Cross {
                    std::f64::consts::FRAC_PI_4
                } else {
                    0.0
                };
                let (s, c) = turn.sin_cos();
                polygon(
                    arm.iter()
                        .map(|&(px, py)| (px * c - py * s, px * s + py * c))
                        .collect(),
                )
            }
        }
    }
}

/// `10ⁿ` with the exponent in Unicode superscripts (`"10⁻⁴"`, `"10⁰"`, `"10³"`): the one format
/// of every tick label on both axes.
pub fn decade_label(exponent: i32) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut label = String::from("10");
    if exponent < 0 {
        label.push('⁻');
    }
    for digit in exponent.unsigned_abs().to_string().bytes() {
        label.push(DIGITS[usize::from(digit - b'0')]);
    }
    label
}

/// The decade exponents `n` with `10ⁿ` inside `[lo, hi]`: at most [`MAX_DECADES`] of them, and
/// none for bounds that are not finite and positive (an axis from a zero or infinite rate would
/// otherwise ask for ~2³² grid lines).
fn decades(lo: f64, hi: f64) -> std::ops::RangeInclusive<i32> {
    if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && hi >= lo) {
        // An empty range: its start past its end.
        #[allow(clippy::reversed_empty_ranges)]
        return 1..=0;
    }
    // A relative slack so that a bound sitting on a decade (1e-4 computed as 9.99…e-5) keeps it.
    // log10 of a finite positive f64 lies in [-324, 309], so the casts cannot saturate.
    let first = (lo.log10() - 1e-9).ceil() as i32;
    let last = (hi.log10() + 1e-9).floor() as i32;
    first..=last.min(first.saturating_add(MAX_DECADES - 1))
}

/// The most decades an axis labels: those of [`AXIS_LIMITS`], within which [`span`] keeps every
/// axis.
const MAX_DECADES: i32 = 201;

/// Escapes text for XML (and HTML) content and attribute values: [`text::visible`] first (control
/// characters, bidi controls, U+FFFE and U+FFFF shown as `\u{1b}`: XML 1.0 forbids most of them,
/// and the rest would reorder or hide what the page shows), then the markup characters as
/// entities. Tab and line feed stay: XML allows them, as white space (a tooltip's lines).
pub fn escape_xml(text: &str) -> String {
    let shown = text::visible(text);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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
    let at = (
        flops as f64 / bytes as f64,
        flops as f64 / (stats.median_ms / 1e3) / 1e12,
    );
    let on_chart = |v: f64| (AXIS_LIMITS.0..=AXIS_LIMITS.1).contains(&v);
    if !(on_chart(at.0) && on_chart(at.1)) {
        return Err("outside the chart's range (1e-100 to 1e100)");
    }
    Ok(at)
}

/// The tooltip of a row's marker: one `field: value` line each.
fn tooltip(row: &Row) -> String {
    let key = &row.key;
    let mut text = format!(
        "op: {}\nworkload: {}\ndtype: {}\nimpl: {}\nfamily: {}",
        key.op, key.workload, key.dtype, key.implementation, row.family
    );
    if let Some(stats) = row.stats {
        let _ = write!(
            text,
            "\ntime: {} ms (median; p10 {}, p90 {})",
            sig4(stats.median_ms),
            sig4(stats.p10_ms),
            sig4(stats.p90_ms)
        );
    }
    let _ = match (row.efficiency(), row.blank()) {
        (Some(e), _) => write!(text, "\nefficiency: {:.1}%", e * 100.0),
        (None, Some(blank)) => write!(text, "\nefficiency: blank ({})", blank.kind()),
        (None, None) => Ok(()),
    };
    let _ = write!(
        text,
        "\nverdict: {}",
        row.verdict().map_or("blank", Verdict::as_str)
    );
    text
}

fn hex(color: RGBColor) -> String {
    // Upper case, as plotters writes its colours: one spelling per colour in the document.
    format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
}

/// A point to mark: its place, verdict, family shape and row.
struct Point<'r> {
    at: (f64, f64),
    shape: Shape,
    row: &'r Row,
}

/// Renders the report's rows against `profile`'s roofs (`None`: the points alone).
///
/// # Errors
/// [`SvgError`] when plotters fails to draw (not expected for finite data).
pub fn render(report: &Report, profile: Option<&Profile>) -> Result<Chart, SvgError> {
    let families: Vec<&str> = report
        .summary
        .families
        .iter()
        .map(|f| f.family.as_str())
        .collect();
    // Each family's index (its shape) and plotted markers, looked up once per row: the chart
    // stays linear in rows and families together (a scan per row was quadratic, 18 s for 40k
    // families).
    let mut family_index: HashMap<&str, (usize, usize)> = families
        .iter()
        .enumerate()
        .map(|(i, f)| (*f, (i, 0)))
        .collect();
    let mut points = Vec::new();
    let mut not_plotted = Vec::new();
    for row in &report.rows {
        match position(row) {
            Ok(at) => {
                let (index, plotted) = family_index.entry(row.family.as_str()).or_insert((0, 0));
                *plotted += 1;
                points.push(Point {
                    at,
                    shape: Shape::for_family(*index),
                    row,
                });
            }
            Err(why) => not_plotted.push((row.key.clone(), why)),
        }
    }
    // Roofs in TFLOP/s (compute) and TB/s (memory, so that TB/s × FLOP/B = TFLOP/s).
    let hbm = profile.map(|p| (p.hbm().theoretical / 1e12, p.hbm().effective() / 1e12));
    let roofs: Vec<(&str, f64, f64)> = profile
        .map(|p| {
            p.roofs
                .iter()
                // HBM is the diagonal; `mma.sync`'s roof prices the ledger's HMMA instructions,
                // not a record: neither is a compute roof of the chart.
                .filter(|(k, _)| k.as_str() != RoofKey::HBM.as_str() && k.as_str() != MMA_SYNC_ROOF)
                .map(|(k, r)| (k.as_str(), r.theoretical / 1e12, r.effective() / 1e12))
                .collect()
        })
        .unwrap_or_default();

    let mut xs: Vec<f64> = points.iter().map(|p| p.at.0).collect();
    let mut ys: Vec<f64> = points.iter().map(|p| p.at.1).collect();
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

    // The legend's lines decide the height, so that no entry falls off the bottom.
    let legend_lines = 2
        + 2 * roofs.len()
        + 1
        + Verdict::ALL.len()
        + 2
        + 1
        + families.len()
        + usize::from(hbm.is_some());
    let height = MIN_HEIGHT.max(Legend::TOP as u32 + legend_lines as u32 * 20 + NOTE_HEIGHT + 30);

    let mut svg = String::new();
    // SVG written here rather than by plotters: the axes and the markers (see the module docs).
    let mut own = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let title = match profile {
            Some(p) => format!("Roofline: {} (profile {})", p.device.name, p.name),
            None => format!(
                "Roofline: {} (no profile: points only)",
                report.meta.device.name
            ),
        };
        // Plotters escapes the markup characters of its texts but not the characters XML
        // forbids: every text it draws goes through the shared step first.
        let title = text::visible(&title).into_owned();
        let (body, note_area) = root.split_vertically(height - NOTE_HEIGHT);
        // The legend gets its own panel: inside the plot it would hide a roof or a marker.
        let (chart_area, legend_area) = body.split_horizontally(PLOT_WIDTH);
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(X_LABEL_AREA)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(drawing)?;

        // Grid lines at the decades, under everything else.
        let grid = RGBColor(225, 225, 225);
        for n in decades(x_lo, x_hi) {
            let x = 10f64.powi(n);
            chart
                .draw_series(LineSeries::new(
                    [(x, y_lo), (x, y_hi)],
                    grid.stroke_width(1),
                ))
                .map_err(drawing)?;
        }
        for n in decades(y_lo, y_hi) {
            let y = 10f64.powi(n);
            chart
                .draw_series(LineSeries::new(
                    [(x_lo, y), (x_hi, y)],
                    grid.stroke_width(1),
                ))
                .map_err(drawing)?;
        }

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
            let memory = if profile.is_some_and(Profile::is_host) {
                "memory"
            } else {
                RoofKey::HBM.as_str()
            };
            legend
                .line(BLACK, &format!("{memory}: {hbm_e:.2} / {hbm_t:.2} TB/s"))
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
                    .line(color, &format!("{key}: {} / {} TFLOP/s", rate(e), rate(t)))
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

        legend.heading("fill: verdict").map_err(drawing)?;
        for verdict in Verdict::ALL.iter().map(|v| Some(*v)).chain([None]) {
            let n = points.iter().filter(|p| p.row.verdict() == verdict).count();
            legend
                .swatch(
                    verdict_color(verdict),
                    &format!("{}: {n}", verdict.map_or("blank", Verdict::as_str)),
                )
                .map_err(drawing)?;
        }
        legend.skip();
        legend
            .heading("shape: op family (hover: the row)")
            .map_err(drawing)?;
        for (i, family) in families.iter().enumerate() {
            let n = family_index.get(family).map_or(0, |&(_, plotted)| plotted);
            let shape = Shape::for_family(i);
            let (x, y) = legend.glyph_at();
            let (open, close) = shape.element(f64::from(x), f64::from(y), MARKER_R);
            let _ = writeln!(
                own,
                "{open} class=\"legend-shape\" data-shape=\"{}\" fill=\"#ffffff\" \
                 stroke=\"#333333\" stroke-width=\"1.2\">{close}",
                shape.name()
            );
            legend.text(&format!("{family}: {n}")).map_err(drawing)?;
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
            .draw(&Text::new(
                text::visible(&note).into_owned(),
                (20, 10),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(drawing)?;

        let (px, py) = chart.plotting_area().get_pixel_range();
        write_axes(
            &mut own,
            &|at| chart.backend_coord(&at),
            (px, py),
            (x_lo, x_hi),
            (y_lo, y_hi),
        );
        let _ = writeln!(own, "<g class=\"markers\">");
        for point in &points {
            let (x, y) = chart.backend_coord(&point.at);
            let (open, close) = point.shape.element(f64::from(x), f64::from(y), MARKER_R);
            let _ = writeln!(
                own,
                "{open} class=\"marker\" data-family=\"{}\" data-shape=\"{}\" fill=\"{}\" \
                 stroke=\"#222222\" stroke-width=\"0.8\"><title>{}</title>{close}",
                escape_xml(&point.row.family),
                point.shape.name(),
                hex(verdict_color(point.row.verdict())),
                escape_xml(&tooltip(point.row)),
            );
        }
        let _ = writeln!(own, "</g>");
        // A static image has no tooltips: the markers a reader most needs to name carry their
        // op/workload beside them.
        let _ = writeln!(
            own,
            "<g class=\"marker-labels\" font-family=\"sans-serif\" font-size=\"11\" \
             fill=\"#333333\">"
        );
        for point in labelled(&points) {
            let (x, y) = chart.backend_coord(&point.at);
            let _ = writeln!(
                own,
                "<text class=\"marker-label\" x=\"{}\" y=\"{}\">{}/{}</text>",
                x + 8,
                y - 6,
                escape_xml(&point.row.key.op),
                escape_xml(&point.row.key.workload),
            );
        }
        let _ = writeln!(own, "</g>");
        root.present().map_err(drawing)?;
    }
    let end = svg
        .rfind("</svg>")
        .ok_or_else(|| SvgError("the SVG backend wrote no closing </svg>".into()))?;
    svg.insert_str(end, &own);
    Ok(Chart {
        svg,
        plotted: points.len(),
        not_plotted,
    })
}

/// A TFLOP/s figure with precision that suits its size (a host's roofs are below 1 TFLOP/s).
fn rate(tflops: f64) -> String {
    if tflops >= 10.0 {
        format!("{tflops:.1}")
    } else {
        sig4(tflops)
    }
}

/// The frame, the decade ticks with their `10ⁿ` labels, and the axis titles, placed so that no
/// label is clipped and the titles clear the labels: the y labels end 8 px left of the plot and
/// are at most [`Y_LABEL_AREA`] − 40 px wide; the y title's centre line is 76 px left of it.
fn write_axes(
    own: &mut String,
    to_px: &dyn Fn((f64, f64)) -> (i32, i32),
    (px, py): (std::ops::Range<i32>, std::ops::Range<i32>),
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
) {
    let (left, right, top, bottom) = (px.start, px.end, py.start, py.end);
    let _ = writeln!(
        own,
        "<g class=\"axes\" font-family=\"sans-serif\" fill=\"#000000\">\n<rect class=\"frame\" \
         x=\"{left}\" y=\"{top}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#000000\"/>",
        right - left,
        bottom - top
    );
    for n in decades(x_lo, x_hi) {
        let (x, _) = to_px((10f64.powi(n), y_lo));
        let _ = writeln!(
            own,
            "<line x1=\"{x}\" y1=\"{bottom}\" x2=\"{x}\" y2=\"{}\" stroke=\"#000000\"/>\
             <text class=\"tick-label x\" x=\"{x}\" y=\"{}\" text-anchor=\"middle\" \
             font-size=\"{TICK_FONT}\">{}</text>",
            bottom + 6,
            bottom + 8 + TICK_FONT as i32,
            decade_label(n)
        );
    }
    for n in decades(y_lo, y_hi) {
        let (_, y) = to_px((x_lo, 10f64.powi(n)));
        let _ = writeln!(
            own,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{left}\" y2=\"{y}\" stroke=\"#000000\"/>\
             <text class=\"tick-label y\" x=\"{}\" y=\"{y}\" dy=\"0.35em\" text-anchor=\"end\" \
             font-size=\"{TICK_FONT}\">{}</text>",
            left - 6,
            left - 8,
            decade_label(n)
        );
    }
    let (mid_x, mid_y) = ((left + right) / 2, (top + bottom) / 2);
    let _ = writeln!(
        own,
        "<text class=\"axis-title x\" x=\"{mid_x}\" y=\"{}\" text-anchor=\"middle\" \
         font-size=\"{TITLE_FONT}\">arithmetic intensity (FLOP / byte)</text>",
        bottom + X_LABEL_AREA as i32 - 12
    );
    let title_x = left - Y_LABEL_AREA as i32 + 20;
    let _ = writeln!(
        own,
        "<text class=\"axis-title y\" x=\"{title_x}\" y=\"{mid_y}\" text-anchor=\"middle\" \
         dy=\"0.35em\" font-size=\"{TITLE_FONT}\" transform=\"rotate(-90 {title_x} {mid_y})\">\
         attained TFLOP/s</text>\n</g>"
    );
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
    const TOP: i32 = 60;

    fn new(area: &'p Area<'a>) -> Self {
        Legend { area, y: Self::TOP }
    }

    /// Draws a legend line. A family or roof name comes from a file: the shared step makes its
    /// hidden characters visible (plotters would write them raw, and the chart would not parse).
    fn text_at(&mut self, x: i32, line: &str, size: u32) -> Result<(), SvgError> {
        self.area
            .draw(&Text::new(
                text::visible(line).into_owned(),
                (x, self.y - 7),
                ("sans-serif", size).into_font(),
            ))
            .map_err(drawing)?;
        self.y += Self::LINE;
        Ok(())
    }

    // Plotters writes font-size as the size given / 1.24: 18 and 16 come out 14.5 and 13 px.
    fn heading(&mut self, text: &str) -> Result<(), SvgError> {
        self.text_at(8, text, 18)
    }

    fn text(&mut self, text: &str) -> Result<(), SvgError> {
        self.text_at(Self::TEXT_X, text, 16)
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

    /// Where the next entry's glyph goes, in the document's coordinates.
    fn glyph_at(&self) -> (i32, i32) {
        let (x, y) = self.area.get_base_pixel();
        (x + 21, y + self.y)
    }

    fn skip(&mut self) {
        self.y += Self::LINE / 2;
    }
}

/// The most markers the chart labels, so that labels never bury the chart.
const MAX_LABELS: usize = 12;

/// The lowest efficiencies the chart labels beside every `fail` and `anomaly`.
const LABELLED_LOWEST: usize = 5;

/// The points whose markers get a label: every `fail` and `anomaly` (a formula or calibration to
/// fix), then the [`LABELLED_LOWEST`] lowest efficiencies (the kernels to work on), at most
/// [`MAX_LABELS`] in all.
fn labelled<'p, 'r>(points: &'p [Point<'r>]) -> Vec<&'p Point<'r>> {
    let mut chosen: Vec<&Point<'_>> = points
        .iter()
        .filter(|p| matches!(p.row.verdict(), Some(Verdict::Fail | Verdict::Anomaly)))
        .collect();
    let mut by_efficiency: Vec<(f64, &Point<'_>)> = points
        .iter()
        .filter_map(|p| Some((p.row.efficiency()?, p)))
        .filter(|(_, p)| !matches!(p.row.verdict(), Some(Verdict::Fail | Verdict::Anomaly)))
        .collect();
    by_efficiency.sort_by(|a, b| a.0.total_cmp(&b.0));
    chosen.extend(
        by_efficiency
            .into_iter()
            .take(LABELLED_LOWEST)
            .map(|(_, p)| p),
    );
    chosen.truncate(MAX_LABELS);
    chosen
}

/// A log range covering `values` with margin, or `[lo, hi]` when there are none.
fn span(values: &[f64], lo: f64, hi: f64) -> (f64, f64) {
    // Only normal, positive values: a subnormal's logarithm is finite, but dividing by one is not.
    let normal = values.iter().copied().filter(|v| v.is_normal() && *v > 0.0);
    let (min, max) = normal.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if max == 0.0 {
        return (lo, hi);
    }
    // Room below and above keeps markers off the frame (and the bounds finite and normal).
    let (min, max) = (
        (min / 4.0).max(AXIS_LIMITS.0),
        (max * 4.0).min(AXIS_LIMITS.1),
    );
    if max / min < 100.0 {
        (min.min(max / 100.0), max)
    } else {
        (min, max)
    }
}

/// Where an axis may reach (TFLOP/s, TB/s and FLOP/B): far past any record or roof, and such
/// that products and ratios of two bounds stay finite and normal. A record outside is not
/// plotted (and listed as such).
const AXIS_LIMITS: (f64, f64) = (1e-100, 1e100);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
    use crate::report::ProfileChoice;

    fn device() -> DeviceInfo {
        DeviceInfo::new("NVIDIA H200")
            .with_compute_capability("9.0".parse().unwrap())
            .with_l2_bytes(62_914_560)
    }

    /// Rows of four families over several decades, one with characters XML must escape, one not
    /// timed, one with zero flops.
    fn report() -> Report {
        let timed = |op: &str, family: &str, workload: &str, flops: u64, bytes: u64, ms: f64| {
            Record::new(op, family, workload, "bfloat16", device())
                .with_roofline(Some(flops), Some(bytes))
                .with_roof("tensor_core.bf16")
                .with_timing(
                    "cuda_events",
                    TimingStats::new(20, ms, ms * 0.98, ms * 1.03),
                )
        };
        let records = vec![
            timed("relu", "elementwise", "16M", 16 << 20, 64 << 20, 0.02),
            timed("gelu", "elementwise", "1k", 1 << 10, 4 << 10, 0.004),
            timed("rms_norm", "normalization", "8b", 4 << 24, 2 << 24, 0.01),
            timed(
                "softmax",
                "reduction",
                "a<b & \"c\"",
                5 << 26,
                4 << 26,
                0.07,
            ),
            timed(
                "gemm",
                "gemm",
                "8192³",
                2 * (8192u64).pow(3),
                3 * 2 * 8192 * 8192,
                2.1,
            ),
            Record::new("gemm", "gemm", "huge", "bfloat16", device()).with_skip("too big"),
            timed("copy", "elementwise", "zero", 0, 1 << 20, 0.01),
        ];
        let run = Run::new(RunMeta::new("abc", "d", "v", device()), records);
        Report::build(
            &run,
            ProfileChoice::Fixed(&Profile::builtin("h200").unwrap()),
        )
    }

    fn chart() -> Chart {
        render(&report(), Some(&Profile::builtin("h200").unwrap())).unwrap()
    }

    /// One row per family, `families` of them: the chart's worst case for work per family.
    fn distinct_families(families: usize) -> Report {
        let records = (0..families)
            .map(|i| {
                Record::new("op", format!("family-{i}"), "w", "bfloat16", device())
                    .with_roofline(Some(1 << 20), Some(1 << 21))
                    .with_roof("tensor_core.bf16")
                    .with_timing("cuda_events", TimingStats::new(20, 0.01, 0.0098, 0.0103))
            })
            .collect();
        let run = Run::new(RunMeta::new("abc", "d", "v", device()), records);
        Report::build(
            &run,
            ProfileChoice::Fixed(&Profile::builtin("h200").unwrap()),
        )
    }

    #[test]
    fn forty_thousand_families_chart_with_one_legend_line_each() {
        // Each row's family was once looked up by a scan of every family, and each legend
        // line counted its markers by a scan of every row: quadratic, 18 s for 40k families.
        // Now one map lookup each (`cargo test --release -- forty_thousand --nocapture` prints
        // the time; measured figures, not asserted, are in the change's note).
        let report = distinct_families(40_000);
        let start = std::time::Instant::now();
        let chart = render(&report, Some(&Profile::builtin("h200").unwrap())).unwrap();
        println!("40000 families charted in {:.2?}", start.elapsed());
        assert_eq!(chart.plotted, 40_000);
        for i in [0, 9_999, 39_999] {
            let line = format!("\nfamily-{i}: 1\n</text>");
            assert!(chart.svg.contains(&line), "family-{i}'s legend line");
        }
    }

    fn class_is(node: &roxmltree::Node<'_, '_>, class: &str) -> bool {
        node.attribute("class")
            .is_some_and(|c| c.split_whitespace().any(|c| c == class))
    }

    fn number(node: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
        node.attribute(attr).unwrap().parse().unwrap()
    }

    #[test]
    fn hidden_characters_from_the_records_or_profile_leave_the_svg_well_formed_and_visible() {
        // C0 controls (XML forbids them), a C1 control, bidi controls and U+FFFE/U+FFFF in the
        // family (the legend, drawn by plotters), the device (the caption) and the workload (the
        // tooltip, written here).
        let hostile = "a\u{1}\u{1b}[2J\u{8}\u{9b}\u{202e}\u{2066}\u{fffe}\u{ffff}<b>";
        let device = DeviceInfo::new(format!("GPU {hostile}"));
        let record = Record::new(
            "relu",
            format!("fam {hostile}"),
            hostile,
            "bf16",
            device.clone(),
        )
        .with_roofline(Some(1 << 20), Some(1 << 22))
        .with_roof("cuda_core.fp32")
        .with_timing("cuda_events", TimingStats::new(20, 0.01, 0.0098, 0.0103));
        let run = Run::new(RunMeta::new("abc", "d", "v", device), vec![record]);
        let mut h200 = Profile::builtin("h200").unwrap();
        h200.device.name = format!("H200 {hostile}");
        let report = Report::build(&run, ProfileChoice::Fixed(&h200));
        for profile in [None, Some(&h200)] {
            let chart = render(&report, profile).unwrap();
            let doc = roxmltree::Document::parse(&chart.svg)
                .unwrap_or_else(|e| panic!("not well-formed: {e}"));
            assert_eq!(chart.plotted, 1);
            assert!(
                !chart
                    .svg
                    .contains(|c: char| text::is_hidden(c) && c != '\n'),
                "a raw hidden character in the SVG"
            );
            let shown = "a\\u{1}\\u{1b}[2J\\u{8}\\u{9b}\\u{202e}\\u{2066}\\u{fffe}\\u{ffff}<b>";
            let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
            let has = |needle: &str| texts.iter().any(|t| t.contains(needle));
            assert!(
                has(&format!("fam {shown}: 1")),
                "the legend line: {texts:?}"
            );
            let caption = match profile {
                Some(_) => format!("H200 {shown}"),
                None => format!("GPU {shown}"),
            };
            assert!(has(&caption), "the caption: {texts:?}");
            assert!(has(&format!("workload: {shown}")), "the tooltip");
        }
        assert_eq!(escape_xml("a\u{0}\tb\u{202e}&"), "a\\u{0}\tb\\u{202e}&amp;");
    }

    #[test]
    fn decade_labels_use_superscripts() {
        assert_eq!(decade_label(-4), "10⁻⁴");
        assert_eq!(decade_label(0), "10⁰");
        assert_eq!(decade_label(12), "10¹²");
        assert_eq!(decade_label(-10), "10⁻¹⁰");
        assert_eq!(decades(1e-4 * (1.0 - 1e-15), 0.05), -4..=-2);
        assert_eq!(decades(0.2, 0.9).count(), 0, "no decade inside");
        // Bounds from a zero, subnormal or infinite rate: no decades, or a bounded count, never
        // the ~2³² of an infinity cast to i32.
        assert_eq!(decades(0.0, 1.0).count(), 0);
        assert_eq!(decades(1.0, f64::INFINITY).count(), 0);
        assert_eq!(decades(f64::NAN, 1.0).count(), 0);
        assert!(decades(5e-324, f64::MAX).count() <= MAX_DECADES as usize);
        let (lo, hi) = span(&[5e-324, 1e-300, 1e300, f64::MAX], 0.1, 100.0);
        assert!(lo.is_normal() && hi.is_normal() && lo < hi, "{lo} {hi}");
        assert!(decades(lo, hi).count() <= MAX_DECADES as usize);
    }

    #[test]
    fn the_svg_parses_and_every_tick_label_is_a_decade_on_both_axes() {
        let chart = chart();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let mut seen = [0usize; 2];
        for (i, axis) in ["x", "y"].iter().enumerate() {
            for label in doc
                .descendants()
                .filter(|n| class_is(n, "tick-label") && class_is(n, axis))
            {
                let text = label.text().unwrap();
                let exponent = text.strip_prefix("10").unwrap_or_else(|| panic!("{text}"));
                assert!(
                    !exponent.is_empty() && exponent.chars().all(|c| "⁻⁰¹²³⁴⁵⁶⁷⁸⁹".contains(c)),
                    "{axis} tick label {text:?}"
                );
                seen[i] += 1;
            }
        }
        assert!(seen[0] >= 3 && seen[1] >= 3, "{seen:?}");
        // No text anywhere in plotters' f64 notation.
        for text in doc.descendants().filter(|n| n.has_tag_name("text")) {
            let t = text.text().unwrap_or_default();
            assert!(!t.contains("9999") && !t.contains("e-"), "{t:?}");
        }
    }

    /// Text widths are estimated at 0.62 em per character (sans-serif digits are 0.55 em):
    /// generous, so the check errs towards calling a label clipped.
    #[test]
    fn tick_labels_fit_the_chart_and_the_axis_titles_clear_them() {
        let chart = chart();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let frame = doc.descendants().find(|n| class_is(n, "frame")).unwrap();
        let left = number(&frame, "x");
        let bottom = number(&frame, "y") + number(&frame, "height");
        let width = |n: &roxmltree::Node<'_, '_>| {
            n.text().unwrap().chars().count() as f64 * 0.62 * number(n, "font-size")
        };
        let y_labels: Vec<_> = doc
            .descendants()
            .filter(|n| class_is(n, "tick-label") && class_is(n, "y"))
            .collect();
        let mut leftmost = f64::INFINITY;
        for label in &y_labels {
            assert_eq!(label.attribute("text-anchor"), Some("end"));
            let (right_edge, w) = (number(label, "x"), width(label));
            assert!(right_edge < left, "a y label overlaps the frame");
            assert!(right_edge - w > 0.0, "y label clipped at the left edge");
            leftmost = leftmost.min(right_edge - w);
        }
        let title = doc
            .descendants()
            .find(|n| class_is(n, "axis-title") && class_is(n, "y"))
            .unwrap();
        // Rotated: its glyphs span font-size around its x.
        let title_right = number(&title, "x") + number(&title, "font-size") * 0.7;
        assert!(
            title_right < leftmost,
            "y title (right edge {title_right}) overlaps the tick labels (from {leftmost})"
        );
        assert!(number(&title, "x") - number(&title, "font-size") * 0.7 > 0.0);
        let height = number(&doc.root_element(), "height");
        for label in doc
            .descendants()
            .filter(|n| class_is(n, "tick-label") && class_is(n, "x"))
        {
            let y = number(&label, "y");
            assert!(y > bottom && y < height, "x label outside the chart");
        }
        let x_title = doc
            .descendants()
            .find(|n| class_is(n, "axis-title") && class_is(n, "x"))
            .unwrap();
        let label_y = bottom + 8.0 + f64::from(TICK_FONT);
        assert!(number(&x_title, "y") - number(&x_title, "font-size") > label_y);
    }

    #[test]
    fn every_marker_has_a_title_with_its_row() {
        let report = report();
        let chart = render(&report, Some(&Profile::builtin("h200").unwrap())).unwrap();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let markers: Vec<_> = doc
            .descendants()
            .filter(|n| class_is(n, "marker"))
            .collect();
        assert_eq!(markers.len(), chart.plotted);
        assert_eq!(chart.plotted, 5, "{:?}", chart.not_plotted);
        for (marker, row) in markers
            .iter()
            .zip(report.rows.iter().filter(|r| position(r).is_ok()))
        {
            let title = marker
                .children()
                .find(|n| n.has_tag_name("title"))
                .and_then(|t| t.text())
                .unwrap_or_else(|| panic!("a marker without a <title>"));
            let stats = row.stats.unwrap();
            for field in [
                format!("op: {}", row.key.op),
                format!("workload: {}", row.key.workload),
                format!("dtype: {}", row.key.dtype),
                format!("time: {} ms", sig4(stats.median_ms)),
                format!("efficiency: {:.1}%", row.efficiency().unwrap() * 100.0),
                format!("verdict: {}", row.verdict().unwrap()),
            ] {
                assert!(title.contains(&field), "{field:?} not in {title:?}");
            }
        }
        // The workload with XML metacharacters survived the round trip.
        assert!(chart.svg.contains("workload: a&lt;b &amp; &quot;c&quot;"));
    }

    #[test]
    fn the_markers_a_reader_must_name_are_labelled() {
        let report = report();
        let chart = render(&report, Some(&Profile::builtin("h200").unwrap())).unwrap();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let labels: Vec<String> = doc
            .descendants()
            .filter(|n| class_is(n, "marker-label"))
            .map(|n| n.text().unwrap_or_default().to_owned())
            .collect();
        // Every outlier, then the lowest efficiencies: here every priced row (fewer than five
        // besides the outliers).
        let expected: Vec<String> = report
            .rows
            .iter()
            .filter(|r| position(r).is_ok() && r.efficiency().is_some())
            .map(|r| format!("{}/{}", r.key.op, r.key.workload))
            .collect();
        assert!(!labels.is_empty());
        let mut sorted_labels = labels.clone();
        sorted_labels.sort();
        let mut sorted_expected = expected;
        sorted_expected.sort();
        assert_eq!(sorted_labels, sorted_expected);
        // Many rows: the cap holds.
        let many = distinct_families(100);
        let chart = render(&many, Some(&Profile::builtin("h200").unwrap())).unwrap();
        assert_eq!(
            chart.svg.matches("class=\"marker-label\"").count(),
            LABELLED_LOWEST
        );
    }

    #[test]
    fn markers_differ_by_family_and_the_legend_shows_each_shape() {
        let chart = chart();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let mut by_family: Vec<(String, String, String)> = Vec::new();
        for m in doc.descendants().filter(|n| class_is(n, "marker")) {
            let family = m.attribute("data-family").unwrap().to_owned();
            let shape = m.attribute("data-shape").unwrap().to_owned();
            by_family.push((family, shape, m.tag_name().name().to_owned()));
        }
        let families: std::collections::BTreeSet<&str> =
            by_family.iter().map(|(f, _, _)| f.as_str()).collect();
        assert_eq!(families.len(), 4);
        for family in &families {
            let shapes: std::collections::BTreeSet<&str> = by_family
                .iter()
                .filter(|(f, _, _)| f == family)
                .map(|(_, s, _)| s.as_str())
                .collect();
            assert_eq!(shapes.len(), 1, "{family}: one shape");
        }
        let shapes: std::collections::BTreeSet<&str> =
            by_family.iter().map(|(_, s, _)| s.as_str()).collect();
        assert_eq!(shapes.len(), families.len(), "a shape per family");
        let legend: Vec<_> = doc
            .descendants()
            .filter(|n| class_is(n, "legend-shape"))
            .map(|n| n.attribute("data-shape").unwrap())
            .collect();
        assert_eq!(legend, ["circle", "square", "diamond", "triangle-down"]);
        // The shapes differ in their drawing too, not only in the attribute.
        let outlines: std::collections::BTreeSet<(String, usize)> = Shape::ALL
            .iter()
            .map(|s| {
                let (open, _) = s.element(0.0, 0.0, 6.0);
                let tag = open.split_whitespace().next().unwrap().to_owned();
                let points = open.matches(',').count();
                (tag, points)
            })
            .collect();
        assert!(outlines.len() >= 8, "{outlines:?}");
        let (plus, _) = Shape::Plus.element(0.0, 0.0, 6.0);
        let (cross, _) = Shape::Cross.element(0.0, 0.0, 6.0);
        assert_ne!(plus, cross);
    }

    #[test]
    fn roof_colours_are_distinct_and_each_roof_is_drawn_in_its_own() {
        let keys: Vec<&str> = crate::profile::ROOF_KEYS[1..].to_vec();
        let dist = |a: RGBColor, b: RGBColor| {
            let d = |x: u8, y: u8| (f64::from(x) - f64::from(y)).powi(2);
            (d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)).sqrt()
        };
        for (i, a) in keys.iter().enumerate() {
            assert!(
                dist(roof_color(a), BLACK) > 80.0,
                "{a} vs the memory diagonal"
            );
            assert!(
                dist(roof_color(a), RGBColor(127, 127, 127)) > 60.0,
                "{a} vs unknown"
            );
            for b in &keys[i + 1..] {
                assert!(
                    dist(roof_color(a), roof_color(b)) > 80.0,
                    "{a} and {b} look alike"
                );
            }
        }
        let svg = chart().svg;
        let h200 = Profile::builtin("h200").unwrap();
        for key in h200
            .roofs
            .keys()
            .filter(|k| *k != "hbm" && *k != MMA_SYNC_ROOF)
        {
            let stroke = format!("stroke=\"{}\"", hex(roof_color(key)));
            assert!(svg.matches(&stroke).count() >= 3, "{key}: {stroke}");
        }
    }

    #[test]
    fn the_legend_stays_beside_the_plot_and_inside_the_chart() {
        let chart = chart();
        let doc = roxmltree::Document::parse(&chart.svg).unwrap();
        let height = number(&doc.root_element(), "height");
        let frame = doc.descendants().find(|n| class_is(n, "frame")).unwrap();
        let plot_right = number(&frame, "x") + number(&frame, "width");
        let legend_texts: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text") && n.attribute("x").is_some())
            .filter(|n| number(n, "x") > f64::from(PLOT_WIDTH))
            .collect();
        assert!(legend_texts.len() > 15);
        for t in &legend_texts {
            assert!(number(t, "x") > plot_right, "legend text inside the plot");
            assert!(number(t, "y") < height - f64::from(NOTE_HEIGHT));
            let right = number(t, "x")
                + t.text().unwrap().chars().count() as f64 * 0.55 * number(t, "font-size");
            assert!(
                right < f64::from(WIDTH),
                "{:?} runs off the chart",
                t.text()
            );
        }
    }
}
