//! The outputs of a [`Report`] and a [`Comparison`]: markdown, CSV and JSON. Every table goes
//! through the one table renderer ([`crate::perf::table`]); the JSON is streamed from borrowed
//! views, so a large report is never held twice.

use std::fmt::Write as _;

use serde_json::Value;

use super::compare::{BOOTSTRAP_RESAMPLES, CONFIDENCE};
use super::{BlankReason, Bound, Call, Comparison, Report, Summary, Verdict};
use crate::perf::records::DeviceInfo;
use crate::perf::table::{Cell, Column, Table};

impl Report {
    /// The report as a markdown document: run and profile, the table, the summary.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.meta;
        let _ = writeln!(out, "# Roofline report\n");
        let _ = writeln!(
            out,
            "Run `{}` of {}, tileops {}, on {}.\n",
            m.git_revision,
            m.date,
            m.tool_version,
            describe_device(&m.device)
        );
        if let Some(note) = self.partial_note() {
            let _ = writeln!(out, "**{note}**\n");
        }
        if self.profiles.is_empty() {
            let _ = writeln!(
                out,
                "Profile: none describes this device; efficiency is blank.\n"
            );
        }
        for p in &self.profiles {
            let _ = writeln!(out, "Profile {p}.\n");
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
        for row in &self.rows {
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
        let mut table = Table::new(header.into_iter().map(Column::left).collect());
        for row in &self.rows {
            let p = row.priced();
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            let baseline_cells = baselines.then(|| {
                let b = row.baseline.as_ref();
                [
                    b.map(|b| b.implementation.clone()).unwrap_or_default(),
                    num(b.map(|b| b.stats.median_ms)),
                    num(row.baseline_ratio()),
                    row.baseline_call().map_or("", Call::as_str).to_owned(),
                ]
            });
            table.push(
                [
                    row.key.op.clone(),
                    row.family.clone(),
                    row.key.workload.clone(),
                    row.key.dtype.clone(),
                    row.key.implementation.clone(),
                    row.roof.clone().unwrap_or_default(),
                    row.profile.clone().unwrap_or_default(),
                    row.flops.map(|v| v.to_string()).unwrap_or_default(),
                    row.bytes.map(|v| v.to_string()).unwrap_or_default(),
                    num(row.stats.map(|s| s.median_ms)),
                    num(row.stats.map(|s| s.p10_ms)),
                    num(row.stats.map(|s| s.p90_ms)),
                    num(p.map(|p| p.memory_ms)),
                    num(p.map(|p| p.compute_ms)),
                    num(row.sol_ms()),
                    num(row.efficiency()),
                    row.bound()
                        .map(Bound::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    row.verdict()
                        .map(Verdict::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    row.blank()
                        .map(BlankReason::kind)
                        .unwrap_or_default()
                        .to_owned(),
                    row.reason().unwrap_or_default(),
                ]
                .into_iter()
                .chain(baseline_cells.into_iter().flatten()),
            );
        }
        table.to_csv()
    }

    /// The report as JSON: `meta`, `profiles`, `rows` (every field, `null` where blank) and
    /// `summary`. For a large report prefer [`Report::write_json`], which streams the same text
    /// without building the tree.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json_view::Report::of(self, None)).unwrap_or(Value::Null)
    }

    /// Writes the report as pretty-printed JSON to `out`, row by row: the same document as
    /// `format!("{:#}", report.to_json())` (and `comparison`'s [`Comparison::to_json`] under the
    /// key `comparison`, when given), without building it in memory first; a newline ends it.
    /// Memory stays that of the report itself. `out` should be buffered.
    ///
    /// ```
    /// use tileops::perf::records::{DeviceInfo, Record, Run, RunMeta};
    /// use tileops::perf::report::{ProfileChoice, Report};
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
        serde_json::to_writer_pretty(&mut *out, &json_view::Report::of(self, comparison))
            .map_err(std::io::Error::from)?;
        out.write_all(b"\n")
    }
}

/// The JSON documents of [`Report`] and [`Comparison`] as borrowed views that serialise straight
/// into a writer. Fields are declared in alphabetical order, the order a `serde_json::Value`
/// object (a sorted map) prints them in, so the streamed text and the `Value` text are the same.
mod json_view {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde::ser::{SerializeSeq, Serializer};

    use crate::perf::records::RunMeta;
    use crate::perf::report::{self, BlankReason, Bound, Call, Verdict};

    /// Rows serialised one at a time, each view made just before it is written: only one row's
    /// view exists at once.
    struct Each<'a, T, V>(&'a [T], fn(&'a T) -> V);

    impl<'a, T, V: Serialize> Serialize for Each<'a, T, V> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
            for item in self.0 {
                seq.serialize_element(&(self.1)(item))?;
            }
            seq.end()
        }
    }

    /// [`RunMeta`] with its keys sorted (as `serde_json::to_value` gives them).
    fn sorted_meta(meta: &RunMeta) -> serde_json::Value {
        serde_json::to_value(meta).unwrap_or(serde_json::Value::Null)
    }

    #[derive(Serialize)]
    pub(super) struct Report<'a> {
        baseline_summary: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        comparison: Option<Comparison<'a>>,
        meta: serde_json::Value,
        profiles: &'a [String],
        rows: Each<'a, report::Row, Row<'a>>,
        summary: Summary<'a>,
    }

    impl<'a> Report<'a> {
        pub(super) fn of(
            report: &'a report::Report,
            comparison: Option<&'a report::Comparison>,
        ) -> Self {
            let s = &report.summary;
            Report {
                baseline_summary: report.baseline_summary(),
                comparison: comparison.map(Comparison::of),
                meta: sorted_meta(&report.meta),
                profiles: &report.profiles,
                rows: Each(&report.rows, Row::of),
                summary: Summary {
                    blank: &s.blank,
                    families: s
                        .families
                        .iter()
                        .map(|f| Family {
                            counted: f.counted,
                            family: &f.family,
                            geomean_efficiency: f.geomean_efficiency,
                            rows: f.rows,
                        })
                        .collect(),
                    rows: s.rows,
                    verdicts: s.verdicts.iter().map(|(v, n)| (v.as_str(), *n)).collect(),
                },
            }
        }
    }

    #[derive(Serialize)]
    struct Summary<'a> {
        blank: &'a BTreeMap<&'static str, usize>,
        families: Vec<Family<'a>>,
        rows: usize,
        verdicts: BTreeMap<&'static str, usize>,
    }

    #[derive(Serialize)]
    struct Family<'a> {
        counted: usize,
        family: &'a str,
        geomean_efficiency: Option<f64>,
        rows: usize,
    }

    #[derive(Serialize)]
    pub(super) struct Row<'a> {
        baseline: Option<Baseline<'a>>,
        blank: Option<&'static str>,
        bound: Option<&'static str>,
        bytes: Option<u64>,
        compute_ms: Option<f64>,
        dtype: &'a str,
        efficiency: Option<f64>,
        family: &'a str,
        flops: Option<u64>,
        #[serde(rename = "impl")]
        implementation: &'a str,
        median_ms: Option<f64>,
        memory_ms: Option<f64>,
        op: &'a str,
        p10_ms: Option<f64>,
        p90_ms: Option<f64>,
        profile: Option<&'a str>,
        reason: Option<String>,
        roof: Option<&'a str>,
        sol_ms: Option<f64>,
        verdict: Option<&'static str>,
        workload: &'a str,
    }

    impl<'a> Row<'a> {
        fn of(row: &'a report::Row) -> Row<'a> {
            let p = row.priced();
            Row {
                baseline: row.baseline.as_ref().map(|b| Baseline {
                    call: row.baseline_call().map(Call::as_str),
                    candidates: b.candidates,
                    implementation: &b.implementation,
                    median_ms: b.stats.median_ms,
                    p10_ms: b.stats.p10_ms,
                    p90_ms: b.stats.p90_ms,
                    time_ratio: row.baseline_ratio(),
                }),
                blank: row.blank().map(BlankReason::kind),
                bound: row.bound().map(Bound::as_str),
                bytes: row.bytes,
                compute_ms: p.map(|p| p.compute_ms),
                dtype: &row.key.dtype,
                efficiency: row.efficiency(),
                family: &row.family,
                flops: row.flops,
                implementation: &row.key.implementation,
                median_ms: row.stats.map(|s| s.median_ms),
                memory_ms: p.map(|p| p.memory_ms),
                op: &row.key.op,
                p10_ms: row.stats.map(|s| s.p10_ms),
                p90_ms: row.stats.map(|s| s.p90_ms),
                profile: row.profile.as_deref(),
                reason: row.reason(),
                roof: row.roof.as_deref(),
                sol_ms: row.sol_ms(),
                verdict: row.verdict().map(Verdict::as_str),
                workload: &row.key.workload,
            }
        }
    }

    #[derive(Serialize)]
    struct Baseline<'a> {
        call: Option<&'static str>,
        candidates: usize,
        #[serde(rename = "impl")]
        implementation: &'a str,
        median_ms: f64,
        p10_ms: f64,
        p90_ms: f64,
        time_ratio: Option<f64>,
    }

    #[derive(Serialize)]
    pub(super) struct Comparison<'a> {
        current: serde_json::Value,
        device_note: Option<String>,
        other: serde_json::Value,
        rows: Each<'a, report::CompareRow, CompareRow<'a>>,
    }

    impl<'a> Comparison<'a> {
        pub(super) fn of(c: &'a report::Comparison) -> Self {
            Comparison {
                current: sorted_meta(&c.current),
                device_note: c.device_note(),
                other: sorted_meta(&c.other),
                rows: Each(&c.rows, CompareRow::of),
            }
        }
    }

    #[derive(Serialize)]
    pub(super) struct CompareRow<'a> {
        call: Option<&'static str>,
        current_median_ms: Option<f64>,
        current_p10_ms: Option<f64>,
        current_p90_ms: Option<f64>,
        dtype: &'a str,
        #[serde(rename = "impl")]
        implementation: &'a str,
        note: Option<String>,
        op: &'a str,
        other_median_ms: Option<f64>,
        other_p10_ms: Option<f64>,
        other_p90_ms: Option<f64>,
        ratio_high: Option<f64>,
        ratio_low: Option<f64>,
        time_ratio: Option<f64>,
        workload: &'a str,
    }

    impl<'a> CompareRow<'a> {
        fn of(row: &'a report::CompareRow) -> CompareRow<'a> {
            let (c, o) = (row.current.stats(), row.other.stats());
            CompareRow {
                call: row.call().map(Call::as_str),
                current_median_ms: c.map(|s| s.median_ms),
                current_p10_ms: c.map(|s| s.p10_ms),
                current_p90_ms: c.map(|s| s.p90_ms),
                dtype: &row.key.dtype,
                implementation: &row.key.implementation,
                note: row.note(),
                op: &row.key.op,
                other_median_ms: o.map(|s| s.median_ms),
                other_p10_ms: o.map(|s| s.p10_ms),
                other_p90_ms: o.map(|s| s.p90_ms),
                ratio_high: row.interval.map(|i| i.high),
                ratio_low: row.interval.map(|i| i.low),
                time_ratio: row.time_ratio(),
                workload: &row.key.workload,
            }
        }
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

/// The run's device for the report's first line: its name, and its compute capability, driver
/// and L2 size where known.
fn describe_device(d: &DeviceInfo) -> String {
    let mut out = format!("`{}`", d.name);
    if let Some(cc) = d.compute_capability {
        let _ = write!(out, ", compute capability {cc}");
    }
    if let Some(driver) = &d.driver {
        let _ = write!(out, ", driver {driver}");
    }
    if let Some(l2) = d.l2_bytes {
        let _ = write!(out, ", L2 {:.1} MiB", l2 as f64 / (1u64 << 20) as f64);
    }
    out
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
            self.current.git_revision,
            self.current.date,
            self.other.git_revision,
            self.other.date,
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
            let _ = writeln!(out, "Note: {note}.\n");
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
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            table.push([
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.key.implementation.clone(),
                num(c.map(|s| s.median_ms)),
                num(c.map(|s| s.p10_ms)),
                num(c.map(|s| s.p90_ms)),
                num(o.map(|s| s.median_ms)),
                num(o.map(|s| s.p10_ms)),
                num(o.map(|s| s.p90_ms)),
                num(row.interval.map(|i| i.low)),
                num(row.interval.map(|i| i.high)),
                num(row.time_ratio()),
                row.call().map(Call::as_str).unwrap_or_default().to_owned(),
                row.note().unwrap_or_default(),
            ]);
        }
        table.to_csv()
    }

    /// The comparison as JSON: both runs' metadata, the device note and a row per key.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json_view::Comparison::of(self)).unwrap_or(Value::Null)
    }
}
