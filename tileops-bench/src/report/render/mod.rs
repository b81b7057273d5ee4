//! The outputs of a [`Report`] and a [`Comparison`]: markdown, CSV and JSON here, the roofline
//! chart in [`svg`] and the self-contained page in [`html`]. Every table goes through the one
//! table renderer ([`crate::table`]); the JSON is streamed from borrowed views, so a large
//! report is never held twice.
//!
//! Every string from the records or a profile is untrusted: the table renderer makes each cell
//! safe, and the markdown's sentences pass theirs through [`crate::text::for_markdown_cell`] too
//! (inside a code span, where GFM shows an entity as written, that costs a hostile string its
//! looks, never its escaping). The JSON escapes hidden characters as `\uXXXX`: its values stay
//! exact.

pub mod html;
mod json;
pub mod svg;

use std::fmt::Write as _;

use serde_json::Value;

use super::compare::{BOOTSTRAP_RESAMPLES, CONFIDENCE};
use super::{BlankReason, Bound, Call, Comparison, Report, Summary, Verdict};
use crate::records::DeviceInfo;
use crate::table::{Cell, Column, Table};
use crate::text::for_markdown_cell as md;

impl Report {
    /// The report as a markdown document: run and profile, the table, the summary.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.meta;
        let _ = writeln!(out, "# Roofline report\n");
        let _ = writeln!(
            out,
            "Run `{}` of {}, tileops {}, on {}.\n",
            md(&m.git_revision),
            md(&m.date),
            md(&m.tool_version),
            describe_device(&m.device)
        );
        if let Some(note) = self.partial_note() {
            let _ = writeln!(out, "**{}**\n", md(&note));
        }
        if self.profiles.is_empty() {
            let _ = writeln!(
                out,
                "Profile: none describes this device; efficiency is blank (pass `--profile`, or \
                 calibrate the host with `calibrate --cpu`).\n"
            );
        }
        for p in &self.profiles {
            let _ = writeln!(out, "Profile {}.\n", md(p));
        }
        if let Some(note) = self.host_note() {
            let _ = writeln!(out, "{}\n", md(note));
        }
        if let Some(n) = self.summary.blank.get(BlankReason::Emulated.kind()) {
            let _ = writeln!(
                out,
                "{n} row(s) ran on an emulated device: run once for correctness, never timed, so \
                 blank (an emulator's timings say nothing about a GPU).\n"
            );
        }
        let baselines = self.has_baselines();
        if let Some(sentence) = self.baseline_summary() {
            let _ = writeln!(out, "{sentence}\n");
        }
        // Left-aligned throughout (`---`), figures included: the rows table of a saved report
        // keeps the layout its readers and diffs know; only the summary tables align numbers.
        let mut columns: Vec<Column> = [
            "op",
            "workload",
            "dtype",
            "impl",
            "roof",
            "median ms",
            "GB/s",
            "TFLOP/s",
            "SOL ms",
            "bound",
            "efficiency",
            "verdict",
        ]
        .into_iter()
        .map(Column::left)
        .collect();
        if baselines {
            columns.extend(["baseline", "baseline ms", "vs baseline"].map(Column::left));
        }
        columns.push(Column::left("reason"));
        let mut rows = Table::new(columns);
        // Timed rows (and every other blank) in the table; the rows the harness skipped after it,
        // a line per reason, as the console shows them.
        for row in self.rows.iter().filter(|r| !r.is_skipped()) {
            let baseline_cells = baselines.then(|| {
                let b = row.baseline.as_ref();
                [
                    b.map(|b| b.implementation.clone()).unwrap_or_default(),
                    opt(b.map(|b| b.stats.median_ms), sig4),
                    opt(row.baseline_ratio(), |r| {
                        let call = row.baseline_call().map_or("", Call::as_str);
                        format!("{r:.3} ({call})")
                    }),
                ]
            });
            let mut cells = vec![
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.key.implementation.clone(),
                row.roof.clone().unwrap_or_default(),
                opt(row.stats.map(|s| s.median_ms), sig4),
                opt(row.achieved_bytes_per_s(), |v| sig4(v / 1e9)),
                opt(row.achieved_flops_per_s(), |v| sig4(v / 1e12)),
                opt(row.sol_ms(), sig4),
                row.bound()
                    .map(Bound::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                opt(row.efficiency(), |e| format!("{:.1}%", e * 100.0)),
                row.verdict()
                    .map(Verdict::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ];
            cells.extend(baseline_cells.into_iter().flatten());
            cells.push(row.reason().unwrap_or_default());
            rows.push(cells);
        }
        out.push_str(&rows.to_markdown());
        let skipped = self.skipped_groups();
        if !skipped.is_empty() {
            let _ = writeln!(out, "\n## Skipped\n");
            for group in &skipped {
                let keys: Vec<String> = group
                    .rows
                    .iter()
                    .map(|r| md(&r.key.to_string()).into_owned())
                    .collect();
                let _ = writeln!(
                    out,
                    "- {} row(s): {}: {}",
                    group.rows.len(),
                    md(&group.reason),
                    keys.join(", ")
                );
            }
        }
        if let Some(pipes) = self.pipes_table() {
            let _ = writeln!(out, "\n## Pipes (from the ledger, not measured)\n");
            let _ = writeln!(out, "{PIPES_NOTE}\n");
            out.push_str(&pipes.to_markdown());
        }
        let s = &self.summary;
        let _ = writeln!(out, "\n## Summary\n\n{} rows.\n", s.rows);
        out.push_str(&s.verdict_table().to_markdown());
        let _ = writeln!(
            out,
            "\nGeometric-mean efficiency per family, over `at_ceiling` and `below` rows:\n"
        );
        out.push_str(&s.family_table().to_markdown());
        out
    }

    /// The rows with a kernel ledger, priced against their profile's pipes: memory, compute,
    /// issue and SFU times, the limiter and the ceiling (from the ledger, not measured), the
    /// measured efficiency beside it where the row was timed, and the traffic figures the emulator
    /// counted. `None` when no row has a ledger.
    pub(crate) fn pipes_table(&self) -> Option<Table> {
        let with: Vec<_> = self
            .rows
            .iter()
            .filter_map(|r| Some((r, r.pipes.as_ref()?)))
            .collect();
        if with.is_empty() {
            return None;
        }
        let mut table = Table::new(vec![
            Column::left("op"),
            Column::left("workload"),
            Column::left("dtype"),
            Column::left("kernels"),
            Column::right("memory ms"),
            Column::right("compute ms"),
            Column::right("issue ms"),
            Column::right("SFU ms"),
            Column::right("shared ms"),
            Column::left("limiter"),
            Column::right("ceiling"),
            Column::right("predicted µs"),
            Column::right("predicted"),
            Column::left("predicted limiter"),
            Column::right("measured"),
            Column::right("traffic / bytes"),
            Column::right("sectors / ideal"),
            Column::right("wavefronts / ideal"),
            Column::left("note"),
        ]);
        let ratio = |v: Option<f64>| opt(v, |r| format!("{r:.3}"));
        for (row, pipes) in with {
            let ok = pipes.as_ref().ok();
            table.push([
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.entries.join(" + "),
                opt(ok.map(|p| p.memory_ms), sig4),
                opt(ok.map(|p| p.compute_ms), sig4),
                opt(ok.map(|p| p.issue_ms), sig4),
                opt(ok.map(|p| p.sfu_ms), sig4),
                opt(ok.map(|p| p.shared_ms), sig4),
                ok.map(|p| p.limiter().as_str().to_owned())
                    .unwrap_or_default(),
                opt(ok.map(super::PipeTimes::ceiling), |c| {
                    format!("{:.1}%", c * 100.0)
                }),
                opt(ok.and_then(super::PipeTimes::predicted_ms), |t| {
                    sig4(t * 1e3)
                }),
                opt(ok.and_then(super::PipeTimes::predicted_efficiency), |e| {
                    format!("{:.1}%", e * 100.0)
                }),
                ok.and_then(|p| p.prediction)
                    .map(|p| p.limiter.as_str().to_owned())
                    .unwrap_or_default(),
                opt(row.efficiency(), |e| format!("{:.1}%", e * 100.0)),
                ratio(ok.and_then(|p| p.traffic_ratio)),
                ratio(ok.and_then(|p| p.sectors_per_request_ratio)),
                ratio(ok.and_then(|p| p.wavefronts_ratio)),
                pipes
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            ]);
        }
        Some(table)
    }

    /// The rows as CSV (header line first; blank cells for missing numbers).
    pub fn to_csv(&self) -> String {
        let header = [
            "op",
            "family",
            "workload",
            "dtype",
            "impl",
            "roof",
            "profile",
            "flops",
            "bytes",
            "median_ms",
            "p10_ms",
            "p90_ms",
            "memory_ms",
            "compute_ms",
            "sol_ms",
            "efficiency",
            "bound",
            "verdict",
            "blank",
            "reason",
        ];
        let baselines = self.has_baselines();
        let mut header = header.to_vec();
        if baselines {
            header.extend([
                "baseline_impl",
                "baseline_median_ms",
                "baseline_time_ratio",
                "baseline_call",
            ]);
        }
        let pipes = self.rows.iter().any(|r| r.pipes.is_some());
        if pipes {
            header.extend([
                "ledger_memory_ms",
                "issue_ms",
                "sfu_ms",
                "shared_ms",
                "limiter",
                "ceiling",
                "predicted_ms",
                "predicted_efficiency",
                "predicted_limiter",
                "traffic_ratio",
                "ledger_note",
            ]);
        }
        let mut table = Table::new(header.into_iter().map(Column::left).collect());
        for row in &self.rows {
            let p = row.priced();
            let pipe_cells = pipes.then(|| {
                let ok = row.pipes.as_ref().and_then(|p| p.as_ref().ok());
                [
                    csv_number(ok.map(|p| p.memory_ms)),
                    csv_number(ok.map(|p| p.issue_ms)),
                    csv_number(ok.map(|p| p.sfu_ms)),
                    csv_number(ok.map(|p| p.shared_ms)),
                    Cell::new(ok.map_or("", |p| p.limiter().as_str())),
                    csv_number(ok.map(super::PipeTimes::ceiling)),
                    csv_number(ok.and_then(super::PipeTimes::predicted_ms)),
                    csv_number(ok.and_then(super::PipeTimes::predicted_efficiency)),
                    Cell::new(
                        ok.and_then(|p| p.prediction)
                            .map_or("", |p| p.limiter.as_str()),
                    ),
                    csv_number(ok.and_then(|p| p.traffic_ratio)),
                    Cell::new(
                        row.pipes
                            .as_ref()
                            .and_then(|p| p.as_ref().err())
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                    ),
                ]
            });
            let baseline_cells = baselines.then(|| {
                let b = row.baseline.as_ref();
                [
                    Cell::new(b.map(|b| b.implementation.clone()).unwrap_or_default()),
                    csv_number(b.map(|b| b.stats.median_ms)),
                    csv_number(row.baseline_ratio()),
                    Cell::new(row.baseline_call().map_or("", Call::as_str)),
                ]
            });
            table.push(
                [
                    Cell::new(row.key.op.clone()),
                    Cell::new(row.family.clone()),
                    Cell::new(row.key.workload.clone()),
                    Cell::new(row.key.dtype.clone()),
                    Cell::new(row.key.implementation.clone()),
                    Cell::new(row.roof.clone().unwrap_or_default()),
                    Cell::new(row.profile.clone().unwrap_or_default()),
                    Cell::numeral(row.flops.map(|v| v.to_string()).unwrap_or_default()),
                    Cell::numeral(row.bytes.map(|v| v.to_string()).unwrap_or_default()),
                    csv_number(row.stats.map(|s| s.median_ms)),
                    csv_number(row.stats.map(|s| s.p10_ms)),
                    csv_number(row.stats.map(|s| s.p90_ms)),
                    csv_number(p.map(|p| p.memory_ms)),
                    csv_number(p.map(|p| p.compute_ms)),
                    csv_number(row.sol_ms()),
                    csv_number(row.efficiency()),
                    Cell::new(row.bound().map(Bound::as_str).unwrap_or_default()),
                    Cell::new(row.verdict().map(Verdict::as_str).unwrap_or_default()),
                    Cell::new(row.blank().map(BlankReason::kind).unwrap_or_default()),
                    Cell::new(row.reason().unwrap_or_default()),
                ]
                .into_iter()
                .chain(baseline_cells.into_iter().flatten())
                .chain(pipe_cells.into_iter().flatten()),
            );
        }
        table.to_csv()
    }

    /// The report as JSON: `meta`, `profiles`, `rows` (every field, `null` where blank) and
    /// `summary`. For a large report prefer [`Report::write_json`], which streams the same text
    /// without building the tree.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json::Report::of(self, None)).unwrap_or(Value::Null)
    }

    /// Writes the report as pretty-printed JSON to `out`, row by row: the same document as
    /// `format!("{:#}", report.to_json())` (and `comparison`'s [`Comparison::to_json`] under the
    /// key `comparison`, when given), without building it in memory first; a newline ends it.
    /// The text differs only where a string holds a hidden character ([`crate::text::is_hidden`]):
    /// it is written as a `\uXXXX` escape, so that no bidi or C1 control reaches a terminal raw,
    /// and the value read back is the same.
    /// Memory stays that of the report itself. `out` should be buffered.
    ///
    /// ```
    /// use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta};
    /// use tileops_bench::report::{ProfileChoice, Report};
    ///
    /// let device = DeviceInfo::new("cpu: test");
    /// let record = Record::new("relu", "elementwise", "w", "float32", device.clone());
    /// let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
    /// let report = Report::build(&run, ProfileChoice::ByDevice(&[]));
    /// let mut text = Vec::new();
    /// report.write_json(&mut text, None)?;
    /// assert_eq!(String::from_utf8(text).unwrap(), format!("{:#}\n", report.to_json()));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// The first error writing to `out`.
    pub fn write_json(
        &self,
        out: &mut dyn std::io::Write,
        comparison: Option<&Comparison>,
    ) -> std::io::Result<()> {
        let mut serializer =
            serde_json::Serializer::with_formatter(&mut *out, json::VisibleFormatter::new());
        serde::Serialize::serialize(&json::Report::of(self, comparison), &mut serializer)
            .map_err(std::io::Error::from)?;
        out.write_all(b"\n")
    }
}

impl Summary {
    /// The rows per verdict, then the blank rows, in all and per reason: the table every format
    /// shows. Each verdict's cell has the verdict's HTML class (`v-fail`).
    pub(crate) fn verdict_table(&self) -> Table {
        let mut table = Table::new(vec![Column::left("verdict"), Column::right("rows")]);
        for (verdict, n) in &self.verdicts {
            table.push([
                Cell::new(verdict.as_str()).with_class(format!("v-{verdict}")),
                Cell::new(n.to_string()),
            ]);
        }
        table.push(["blank".to_owned(), self.blank_rows().to_string()]);
        for (kind, n) in &self.blank {
            table.push([format!("blank: {kind}"), n.to_string()]);
        }
        table
    }

    /// The geometric-mean efficiency per family, with its row counts.
    pub(crate) fn family_table(&self) -> Table {
        let mut table = Table::new(vec![
            Column::left("family"),
            Column::right("rows"),
            Column::right("counted"),
            Column::right("geomean efficiency"),
        ]);
        for f in &self.families {
            table.push([
                f.family.clone(),
                f.rows.to_string(),
                f.counted.to_string(),
                opt(f.geomean_efficiency, |e| format!("{:.1}%", e * 100.0)),
            ]);
        }
        table
    }
}

/// What the pipes table is, said above it in every format that shows it.
pub(crate) const PIPES_NOTE: &str = "Each row's kernel ledger (instructions and MUFU operations \
     from the sm_90 SASS, launch shapes and traffic from the emulator) priced against the \
     profile's pipes: the limiter is the slowest pipe, the ceiling the highest efficiency the \
     kernel can reach given its pipes (the spec's SOL time over the limiter's). The predicted \
     time, efficiency and limiter are the time model's (the profile's fitted constants over \
     these pipes, HBM latency and the launches: tileops-bench/src/report/predict.rs): \
     predictions, not measurements. From the ledger, not measured; traffic columns are blank \
     where the emulator did not count (a dry run over its budget, or a build without the \
     traffic instrumentation).";

/// The run's device for the report's first line, as markdown: its name, and its compute
/// capability, driver and L2 size where known.
fn describe_device(d: &DeviceInfo) -> String {
    let mut out = format!("`{}`", md(&d.name));
    if let Some(cc) = d.compute_capability {
        let _ = write!(out, ", compute capability {cc}");
    }
    if let Some(driver) = &d.driver {
        let _ = write!(out, ", driver {}", md(driver));
    }
    if let Some(l2) = d.l2_bytes {
        let _ = write!(out, ", L2 {:.1} MiB", l2 as f64 / (1u64 << 20) as f64);
    }
    out
}

/// A CSV figure: the value exactly as `f64` writes it (a negative one stays a number, not a text
/// to neutralise), or an empty cell without one.
fn csv_number(v: Option<f64>) -> Cell {
    Cell::numeral(v.map(|v| v.to_string()).unwrap_or_default())
}

/// `f` of the value, or an empty cell without one.
fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_default()
}

/// Four significant digits, without exponent for the magnitudes reports show.
pub(crate) fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{v:.digits$}")
}

impl Comparison {
    /// The comparison as markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Comparison\n\nCurrent run `{}` ({}) against `{}` ({}): {} faster, {} slower, \
             {} same, {} without a call.\n",
            md(&self.current.git_revision),
            md(&self.current.date),
            md(&self.other.git_revision),
            md(&self.other.date),
            self.count(Call::Faster),
            self.count(Call::Slower),
            self.count(Call::Same),
            self.rows.iter().filter(|r| r.call().is_none()).count()
        );
        let _ = writeln!(
            out,
            "Calls come from the {:.0}% bootstrap interval of the ratio of medians ({} resamples of \
             the raw samples); a row without raw samples is called from the p10-p90 spreads.\n",
            CONFIDENCE * 100.0,
            BOOTSTRAP_RESAMPLES
        );
        if let Some(note) = self.device_note() {
            let _ = writeln!(out, "Note: {}.\n", md(&note));
        }
        let header = [
            "op",
            "workload",
            "dtype",
            "impl",
            "current ms",
            "other ms",
            "time ratio",
            "95% interval",
            "call",
            "note",
        ];
        let mut table = Table::new(header.into_iter().map(Column::left).collect());
        for row in &self.rows {
            table.push([
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.key.implementation.clone(),
                opt(row.current.stats().map(|s| s.median_ms), sig4),
                opt(row.other.stats().map(|s| s.median_ms), sig4),
                opt(row.time_ratio(), |r| format!("{r:.3}")),
                opt(row.interval, |i| format!("{:.3}–{:.3}", i.low, i.high)),
                row.call().map(Call::as_str).unwrap_or_default().to_owned(),
                row.note().unwrap_or_default(),
            ]);
        }
        out.push_str(&table.to_markdown());
        out
    }

    /// The comparison as CSV: both sides' statistics, the bootstrap interval of the time ratio
    /// (`ratio_low`, `ratio_high`), the ratio, the call and the note.
    pub fn to_csv(&self) -> String {
        let header = [
            "op",
            "workload",
            "dtype",
            "impl",
            "current_median_ms",
            "current_p10_ms",
            "current_p90_ms",
            "other_median_ms",
            "other_p10_ms",
            "other_p90_ms",
            "ratio_low",
            "ratio_high",
            "time_ratio",
            "call",
            "note",
        ];
        let mut table = Table::new(header.into_iter().map(Column::left).collect());
        for row in &self.rows {
            let (c, o) = (row.current.stats(), row.other.stats());
            table.push([
                Cell::new(row.key.op.clone()),
                Cell::new(row.key.workload.clone()),
                Cell::new(row.key.dtype.clone()),
                Cell::new(row.key.implementation.clone()),
                csv_number(c.map(|s| s.median_ms)),
                csv_number(c.map(|s| s.p10_ms)),
                csv_number(c.map(|s| s.p90_ms)),
                csv_number(o.map(|s| s.median_ms)),
                csv_number(o.map(|s| s.p10_ms)),
                csv_number(o.map(|s| s.p90_ms)),
                csv_number(row.interval.map(|i| i.low)),
                csv_number(row.interval.map(|i| i.high)),
                csv_number(row.time_ratio()),
                Cell::new(row.call().map(Call::as_str).unwrap_or_default()),
                Cell::new(row.note().unwrap_or_default()),
            ]);
        }
        table.to_csv()
    }

    /// The comparison as JSON: both runs' metadata, the device note and a row per key.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json::Comparison::of(self)).unwrap_or(Value::Null)
    }
}
