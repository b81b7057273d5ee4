//! The JSON documents of [`Report`](crate::report::Report) and
//! [`Comparison`](crate::report::Comparison) as borrowed views that serialise straight
//! into a writer. Fields are declared in alphabetical order, the order a `serde_json::Value`
//! object (a sorted map) prints them in, so the streamed text and the `Value` text are the same.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use crate::records::RunMeta;
use crate::report::{self, BlankReason, Bound, Call, Verdict};

/// serde_json's pretty printer, but a [`is_hidden`](crate::text::is_hidden) character in a string
/// is written as a `\uXXXX` escape. serde_json escapes the C0 controls only: a C1 control or a bidi
/// override from a records file would reach the terminal that shows the JSON raw. An escape is the
/// same JSON value, so the document reads back exactly.
pub(super) struct VisibleFormatter(serde_json::ser::PrettyFormatter<'static>);

impl VisibleFormatter {
    pub(super) fn new() -> Self {
        VisibleFormatter(serde_json::ser::PrettyFormatter::new())
    }
}

impl serde_json::ser::Formatter for VisibleFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // serde_json has escaped the C0 controls, `"` and `\` already: the fragment holds none.
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if crate::text::is_hidden(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                // Every hidden character is in the Basic Multilingual Plane: one `\u` escape.
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    // The rest is the pretty printer's: every method it overrides, delegated.
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pipes: Option<Pipes<'a>>,
    profile: Option<&'a str>,
    reason: Option<String>,
    roof: Option<&'a str>,
    sol_ms: Option<f64>,
    verdict: Option<&'static str>,
    workload: &'a str,
}

/// A row's kernel ledger priced ([`report::PipeTimes`]), or why it could not be; from the
/// ledger, not measured.
#[derive(Serialize)]
struct Pipes<'a> {
    blank: Option<String>,
    ceiling: Option<f64>,
    compute_ms: Option<f64>,
    entries: &'a [String],
    issue_ms: Option<f64>,
    limiter: Option<&'static str>,
    memory_ms: Option<f64>,
    /// The time model's prediction (not a measurement), when the profile has its constants.
    predicted_efficiency: Option<f64>,
    predicted_limiter: Option<&'static str>,
    predicted_ms: Option<f64>,
    sectors_per_request_ratio: Option<f64>,
    sfu_ms: Option<f64>,
    shared_ms: Option<f64>,
    /// Only for a kernel that issues tensor-core instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    tensor_ms: Option<f64>,
    traffic_ratio: Option<f64>,
    wavefronts_ratio: Option<f64>,
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
            pipes: row.pipes.as_ref().map(|pipes| {
                let ok = pipes.as_ref().ok();
                Pipes {
                    blank: pipes.as_ref().err().map(ToString::to_string),
                    ceiling: ok.map(report::PipeTimes::ceiling),
                    compute_ms: ok.map(|p| p.compute_ms),
                    entries: &row.entries,
                    issue_ms: ok.map(|p| p.issue_ms),
                    limiter: ok.map(|p| p.limiter().as_str()),
                    memory_ms: ok.map(|p| p.memory_ms),
                    predicted_efficiency: ok.and_then(report::PipeTimes::predicted_efficiency),
                    predicted_limiter: ok.and_then(|p| p.prediction).map(|p| p.limiter.as_str()),
                    predicted_ms: ok.and_then(report::PipeTimes::predicted_ms),
                    sectors_per_request_ratio: ok.and_then(|p| p.sectors_per_request_ratio),
                    sfu_ms: ok.map(|p| p.sfu_ms),
                    shared_ms: ok.map(|p| p.shared_ms),
                    tensor_ms: ok.map(|p| p.tensor_ms).filter(|t| *t > 0.0),
                    traffic_ratio: ok.and_then(|p| p.traffic_ratio),
                    wavefronts_ratio: ok.and_then(|p| p.wavefronts_ratio),
                }
            }),
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
