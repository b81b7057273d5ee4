//! The console table `bench` prints: a row per timed (or emulated) record, figures in scaled
//! units, verdicts coloured on a terminal, and the skipped rows collapsed into one line per reason.
//!
//! A CPU run skips most rows (over the reference budget); a line of about 150 characters per skip
//! buried the timed rows. The records file keeps every row and its full reason; the console says
//! each reason once, with its count, and lists the skipped rows only with `--verbose`.
//!
//! The table is drawn by the crate's one table renderer, the same that writes the roofline
//! report's markdown, CSV and HTML tables.

use std::fmt::Write as _;

use comfy_table::Color;

use crate::profile::Profile;
use crate::records::Record;
use crate::report::{self, Outcome, Verdict};
use crate::table::{Cell, Column, Table};
use crate::text::group_by_reason;
use crate::units::{Unit, scaled};

/// How the table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// Colour the verdicts (ANSI escapes): a terminal, no `NO_COLOR`.
    pub color: bool,
    /// List every skipped row in the table (each with its reason's first clause) instead of the
    /// one line per reason.
    pub verbose: bool,
}

/// The note of a row that ran on an emulated device.
const EMULATED_TABLE_NOTE: &str = "emulated: ran once for correctness, not timed";

/// The longest skip note a `--verbose` table shows.
const NOTE_CHARS: usize = 100;

/// The console table of a run, then (without `verbose`) one line per kind of skip reason.
///
/// Columns: op, workload, dtype, median / p10 / p90 (ns, µs, ms or s), noise
/// (`(p90 - p10) / median`), bandwidth and compute rates (scaled, [`crate::units`]),
/// efficiency and verdict against `profile` ([`report::price()`], the roofline tool's own pricing,
/// so the two agree; blank without a profile or for a row it cannot price) and a note.
///
/// ```
/// use tileops_bench::cli::table::{console_table, TableOptions};
/// use tileops_bench::records::{DeviceInfo, Record, TimingStats};
/// let device = DeviceInfo::new("cpu: test");
/// let timed = Record::new("softmax", "reduction", "w", "float32", device.clone())
///     .with_roofline(Some(5_000_000), Some(8_000_000))
///     .with_timing("cpu_wall", TimingStats::new(10, 2.0, 1.9, 2.2));
/// let skipped = Record::new("softmax", "reduction", "big", "float32", device)
///     .with_skip("CPU backend: 9000 B per call, over the budget of 10 B");
/// let text = console_table(&[timed, skipped], None, TableOptions::default());
/// assert!(text.contains("2.000 ms") && text.contains("4.000 GB/s"), "{text}");
/// assert!(text.contains("1 row skipped: CPU backend: 9000 B per call"), "{text}");
/// ```
pub fn console_table(
    records: &[Record],
    profile: Option<&Profile>,
    options: TableOptions,
) -> String {
    let columns = [
        "op",
        "workload",
        "dtype",
        "median",
        "p10",
        "p90",
        "noise",
        "bandwidth",
        "compute",
        "efficiency",
        "verdict",
        "note",
    ];
    // The figures, median to efficiency, are right-aligned.
    let mut table = Table::new(
        columns
            .into_iter()
            .enumerate()
            .map(|(i, header)| match i {
                3..=9 => Column::right(header),
                _ => Column::left(header),
            })
            .collect(),
    );
    let shown = records
        .iter()
        .filter(|r| options.verbose || r.skipped.is_none() || r.is_emulated());
    for r in shown {
        table.push(row(r, profile));
    }
    let mut out = table.to_console(options.color);
    if !options.verbose {
        for (count, reason) in collapsed_skips(records) {
            let rows = if count == 1 { "row" } else { "rows" };
            let _ = writeln!(
                out,
                "{count} {rows} skipped: {}",
                crate::text::for_terminal(&reason)
            );
        }
    }
    out
}

/// One table row.
fn row(r: &Record, profile: Option<&Profile>) -> Vec<Cell> {
    let stats = r.stats();
    let time = |ms: Option<f64>| {
        ms.map(|ms| scaled(ms / 1e3, Unit::Seconds))
            .unwrap_or_default()
    };
    let rate = |amount: Option<u64>, unit: Unit| match (amount, stats) {
        (Some(a), Some(s)) => scaled(a as f64 / (s.median_ms / 1e3), unit),
        _ => String::new(),
    };
    let priced = profile.and_then(|p| match report::price(r, p) {
        Outcome::Priced(priced) => Some(priced),
        Outcome::Blank(_) => None,
    });
    let verdict = priced.as_ref().map(|p| p.verdict());
    let mut verdict_cell = Cell::new(verdict.map(Verdict::as_str).unwrap_or_default());
    if let Some(v) = verdict {
        verdict_cell = verdict_cell.with_color(verdict_color(v));
    }
    let note = match &r.skipped {
        None => String::new(),
        Some(_) if r.is_emulated() => EMULATED_TABLE_NOTE.to_owned(),
        // The first clause: the rest (what to do about it) is in the records.
        Some(reason) => shorten(
            &format!("skipped: {}", reason.split("; ").next().unwrap_or(reason)),
            NOTE_CHARS,
        ),
    };
    vec![
        Cell::new(&r.op),
        Cell::new(&r.workload),
        Cell::new(&r.dtype),
        Cell::new(time(stats.map(|s| s.median_ms))),
        Cell::new(time(stats.map(|s| s.p10_ms))),
        Cell::new(time(stats.map(|s| s.p90_ms))),
        Cell::new(
            r.noise()
                .map(|n| format!("{:.1}%", n * 100.0))
                .unwrap_or_default(),
        ),
        Cell::new(rate(r.bytes, Unit::BytesPerSecond)),
        Cell::new(rate(r.flops, Unit::FlopsPerSecond)),
        Cell::new(
            priced
                .as_ref()
                .map(|p| format!("{:.1}%", p.efficiency() * 100.0))
                .unwrap_or_default(),
        ),
        verdict_cell,
        Cell::new(note),
    ]
}

/// A verdict's colour: red for the impossible, yellow for what needs a look, green at the
/// ceiling, none for the ordinary.
fn verdict_color(verdict: Verdict) -> Color {
    match verdict {
        Verdict::Fail => Color::Red,
        Verdict::Anomaly => Color::Magenta,
        Verdict::LatencyBound => Color::Yellow,
        Verdict::AtCeiling => Color::Green,
        Verdict::Below => Color::Reset,
    }
}

/// The skipped rows (emulated runs aside) grouped by reason: `(count, reason)` in order of first
/// appearance. Reasons that differ only in their numbers (`9000 B per call` in one row,
/// `12000 B per call` in the next) are one group; the line keeps each word the group's rows share
/// and shows `N` where their numbers differ. Only the reason's first clause is shown: the rest
/// (what to do about it) is in the records.
pub fn collapsed_skips(records: &[Record]) -> Vec<(usize, String)> {
    let skipped = records
        .iter()
        .filter(|r| !r.is_emulated())
        .filter_map(|r| Some((r.skipped.as_deref()?, ())));
    group_by_reason(skipped)
        .into_iter()
        .map(|(reason, rows)| (rows.len(), reason))
        .collect()
}

/// `text` cut to `max` characters, the cut marked with `…`.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests;
