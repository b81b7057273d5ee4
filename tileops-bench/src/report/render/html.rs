//! The roofline report as one self-contained HTML page: the summary, the table (sortable by
//! clicking a column header), and the chart.
//!
//! Everything the page needs is inside it: the CSS and the sorting script are inline, and the
//! chart is the [`svg`](super::svg) document itself, so the file opens offline and can be mailed
//! or attached to a CI run. Every text taken from the records or the profile is escaped.
//!
//! The sorting script also reads the address's fragment: `REPORT.html#sort=efficiency` opens the
//! table sorted by efficiency, ascending (`#sort=efficiency-desc`: descending), which is how a
//! test checks the script without clicking. After sorting, the table's `data-sorted` attribute
//! names the column and direction.
//!
//! ```
//! use tileops_bench::profile::Profile;
//! use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops_bench::report::{ProfileChoice, Report};
//!
//! let device = DeviceInfo::new("NVIDIA H200");
//! let record = Record::new("softmax", "reduction", "<8k>", "bfloat16", device.clone())
//!     .with_roofline(Some(5 << 26), Some(2 * 2 << 26))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(50, 0.070, 0.069, 0.072));
//! let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
//! let h200 = Profile::builtin("h200")?;
//! let report = Report::build(&run, ProfileChoice::Fixed(&h200));
//! let chart = tileops_bench::svg::render(&report, Some(&h200))?;
//! let page = tileops_bench::html::render(&report, Some(&chart));
//! assert!(page.starts_with("<!DOCTYPE html>"));
//! assert!(page.contains("<td>&lt;8k&gt;</td>"));
//! assert!(page.contains("<figure id=\"chart\">\n<svg") && !page.contains("<link"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt::Write as _;

use super::svg::{Chart, escape_xml as esc};
use crate::report::{Bound, Report, Row, Verdict, sig4};
use crate::table::{self, Cell, Table};

/// The page's style: readable defaults, verdict colours matching the chart's markers.
const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.summary { display: inline-table; margin-right: 2em; vertical-align: top; }
#rows th { background: #f0f0f0; cursor: pointer; user-select: none; white-space: nowrap; }
#rows th[aria-sort=ascending]::after { content: ' \\25B2'; }
#rows th[aria-sort=descending]::after { content: ' \\25BC'; }
#rows tbody tr:nth-child(even) { background: #fafafa; }
td.reason { color: #555; max-width: 40em; }
td.v-fail { background: #f6c6c6; } td.v-anomaly { background: #f0c0f0; }
td.v-latency_bound { background: #c8dcf0; } td.v-at_ceiling { background: #c8eac8; }
td.v-below { background: #fde0c0; }
figure { margin: 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
";

/// Sorts `#rows` by a clicked header (again: the other way), numbers by their `data-value`,
/// blanks last either way; and once on load by the `#sort=KEY[-desc]` fragment.
const SCRIPT: &str = "
(function () {
  var table = document.getElementById('rows');
  if (!table) { return; }
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function value(row, i, numeric) {
    var cell = row.cells[i];
    if (numeric) {
      var v = cell.getAttribute('data-value');
      return v === null || v === '' ? null : parseFloat(v);
    }
    var t = cell.textContent;
    return t === '' ? null : t;
  }
  function sortBy(i, descending) {
    var numeric = heads[i].getAttribute('data-type') === 'num';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, i, numeric), y = value(b, i, numeric);
      if (x === null || y === null) { return (x === null) - (y === null); }
      var c = numeric ? x - y : x.localeCompare(y);
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
    heads[i].setAttribute('aria-sort', descending ? 'descending' : 'ascending');
    table.setAttribute('data-sorted', heads[i].getAttribute('data-key') + (descending ? '-desc' : ''));
  }
  heads.forEach(function (h, i) {
    h.addEventListener('click', function () {
      sortBy(i, h.getAttribute('aria-sort') === 'ascending');
    });
  });
  var m = /(?:^#|&)sort=([a-z_]+?)(-desc)?$/.exec(window.location.hash);
  if (m) {
    heads.forEach(function (h, i) {
      if (h.getAttribute('data-key') === m[1]) { sortBy(i, !!m[2]); }
    });
  }
})();
";

/// A column of the rows table: its key (for `#sort=`), header, whether numeric, and its cell.
struct RowsColumn {
    key: &'static str,
    header: &'static str,
    numeric: bool,
    cell: fn(&Row) -> Cell,
}

/// The rows table's columns, in order (`vs_baseline` only shown when some row has a baseline).
const COLUMNS: [RowsColumn; 15] = [
    RowsColumn {
        key: "op",
        header: "op",
        numeric: false,
        cell: |r| Cell::new(r.key.op.clone()),
    },
    RowsColumn {
        key: "family",
        header: "family",
        numeric: false,
        cell: |r| Cell::new(r.family.clone()),
    },
    RowsColumn {
        key: "workload",
        header: "workload",
        numeric: false,
        cell: |r| Cell::new(r.key.workload.clone()),
    },
    RowsColumn {
        key: "dtype",
        header: "dtype",
        numeric: false,
        cell: |r| Cell::new(r.key.dtype.clone()),
    },
    RowsColumn {
        key: "impl",
        header: "impl",
        numeric: false,
        cell: |r| Cell::new(r.key.implementation.clone()),
    },
    RowsColumn {
        key: "roof",
        header: "roof",
        numeric: false,
        cell: |r| Cell::new(r.roof.clone().unwrap_or_default()),
    },
    RowsColumn {
        key: "median_ms",
        header: "median ms",
        numeric: true,
        cell: |r| Cell::number(r.stats.map(|s| s.median_ms), sig4),
    },
    RowsColumn {
        key: "gb_s",
        header: "GB/s",
        numeric: true,
        cell: |r| Cell::number(r.achieved_bytes_per_s().map(|v| v / 1e9), sig4),
    },
    RowsColumn {
        key: "gflop_s",
        header: "GFLOP/s",
        numeric: true,
        cell: |r| Cell::number(r.achieved_flops_per_s().map(|v| v / 1e9), sig4),
    },
    RowsColumn {
        key: "sol_ms",
        header: "SOL ms",
        numeric: true,
        cell: |r| Cell::number(r.sol_ms(), sig4),
    },
    RowsColumn {
        key: "bound",
        header: "bound",
        numeric: false,
        cell: |r| Cell::new(r.bound().map_or("", Bound::as_str)),
    },
    RowsColumn {
        key: "efficiency",
        header: "efficiency",
        numeric: true,
        cell: |r| Cell::number(r.efficiency(), |e| format!("{:.1}%", e * 100.0)),
    },
    RowsColumn {
        key: "verdict",
        header: "verdict",
        numeric: false,
        cell: |r| Cell::new(r.verdict().map_or("", Verdict::as_str)),
    },
    RowsColumn {
        key: "vs_baseline",
        header: "vs baseline",
        numeric: true,
        cell: |r| Cell::number(r.baseline_ratio(), |v| format!("{v:.3}")),
    },
    RowsColumn {
        key: "reason",
        header: "reason",
        numeric: false,
        cell: |r| Cell::new(r.reason().unwrap_or_default()),
    },
];

/// The page: `report`'s summary and table, and `chart` when given (otherwise a line saying there
/// is none). A pure function: the caller writes the file.
pub fn render(report: &Report, chart: Option<&Chart>) -> String {
    let mut out = String::new();
    let m = &report.meta;
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Roofline report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Roofline report</h1>\n<p class=\"meta\">Run <code>{}</code> of {}, tileops {}, on \
         {}.</p>\n",
        esc(&m.device.name),
        esc(&m.git_revision),
        esc(&m.date),
        esc(&m.tool_version),
        esc(&m.device.name),
    );
    if report.profiles.is_empty() {
        out.push_str(
            "<p>Profile: none describes this device; efficiency is blank (pass \
             <code>--profile</code>, or calibrate the host with <code>calibrate --cpu</code>).</p>\n",
        );
    }
    for p in &report.profiles {
        let _ = writeln!(out, "<p>Profile {}.</p>", esc(p));
    }
    if let Some(note) = report.host_note() {
        let _ = writeln!(out, "<p>{}</p>", esc(note));
    }
    if let Some(sentence) = report.baseline_summary() {
        let _ = writeln!(out, "<p>{}</p>", esc(&sentence));
    }
    summary(&mut out, report);
    let _ = writeln!(
        out,
        "<h2>Rows</h2>\n<p class=\"meta\">{} rows; click a column header to sort.</p>",
        report.rows.iter().filter(|r| !r.is_skipped()).count()
    );
    table(&mut out, report);
    // The rows the harness skipped, a line per reason (their keys folded away), as the console
    // shows them.
    let skipped = report.skipped_groups();
    if !skipped.is_empty() {
        out.push_str("<h2>Skipped</h2>\n<ul class=\"skipped\">\n");
        for group in &skipped {
            let keys: Vec<String> = group.rows.iter().map(|r| esc(&r.key.to_string())).collect();
            let _ = writeln!(
                out,
                "<li><details><summary>{} row(s): {}</summary>{}</details></li>",
                group.rows.len(),
                esc(&group.reason),
                keys.join(", ")
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Chart</h2>\n");
    match chart {
        Some(chart) => {
            let _ = writeln!(
                out,
                "<figure id=\"chart\">\n{}\n</figure>",
                chart.svg.trim()
            );
        }
        None => out.push_str("<p>No chart.</p>\n"),
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// The two summary tables: rows per verdict, and efficiency per family.
fn summary(out: &mut String, report: &Report) {
    let s = &report.summary;
    out.push_str("<h2>Summary</h2>\n");
    out.push_str(&s.verdict_table().to_html("verdicts", Some("summary")));
    out.push_str(&s.family_table().to_html("families", Some("summary")));
    out.push_str(
        "<p class=\"meta\">Geometric-mean efficiency per family, over <code>at_ceiling</code> \
         and <code>below</code> rows.</p>\n",
    );
}

/// The rows table, sortable by its headers; each row's class is its verdict (`v-blank` for a
/// blank one).
fn table(out: &mut String, report: &Report) {
    // The baseline column only when some row has a baseline, as in the other formats.
    let columns: Vec<&RowsColumn> = COLUMNS
        .iter()
        .filter(|c| c.key != "vs_baseline" || report.has_baselines())
        .collect();
    let mut table = Table::new(
        columns
            .iter()
            .map(|c| {
                let column = if c.numeric {
                    table::Column::right(c.header)
                } else {
                    table::Column::left(c.header)
                };
                column.sorted_by(c.key)
            })
            .collect(),
    );
    for row in report.rows.iter().filter(|r| !r.is_skipped()) {
        let verdict = row.verdict().map_or("blank", Verdict::as_str);
        let cells = columns
            .iter()
            .map(|c| {
                let cell = (c.cell)(row);
                match c.key {
                    // The verdict cell carries the verdict's colour (the row's class is for
                    // scripts: a coloured row would fight the striping).
                    "verdict" => cell.with_class(format!("v-{verdict}")),
                    "reason" => cell.with_class("reason"),
                    _ => cell,
                }
            })
            .collect();
        table.push_row(table::Row {
            cells,
            class: Some(format!("v-{verdict}")),
        });
    }
    out.push_str(&table.to_html("rows", None));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
    use crate::report::ProfileChoice;

    fn report() -> Report {
        let device = DeviceInfo::new("NVIDIA H200 <&>");
        let timed = |op: &str, workload: &str, bytes: u64, ms: f64| {
            Record::new(op, "fam'ily", workload, "bfloat16", device.clone())
                .with_roofline(Some(bytes / 4), Some(bytes))
                .with_roof("cuda_core.fp32")
                .with_timing(
                    "cuda_events",
                    TimingStats::new(10, ms, ms * 0.99, ms * 1.01),
                )
        };
        let records = vec![
            timed("relu", "</td><script>alert(1)</script>", 1 << 30, 0.3),
            timed("gelu", "\"quoted\"", 1 << 28, 0.2),
            Record::new("gemm", "gemm", "big", "bfloat16", device.clone()).with_skip("too big"),
        ];
        let run = Run::new(RunMeta::new("abc", "d", "v", device.clone()), records);
        let mut h200 = Profile::builtin("h200").unwrap();
        h200.device.patterns = vec!["NVIDIA H200 <&>".into()];
        Report::build(&run, ProfileChoice::Fixed(&h200))
    }

    #[test]
    fn everything_from_the_records_is_escaped() {
        let page = render(&report(), None);
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("<td>&quot;quoted&quot;</td>"));
        assert!(page.contains("<td>fam&#39;ily</td>"));
        assert!(page.contains("<title>Roofline report: NVIDIA H200 &lt;&amp;&gt;</title>"));
        // One script: the page's own.
        assert_eq!(page.matches("<script>").count(), 1);
    }

    #[test]
    fn the_table_has_every_row_with_sortable_numbers() {
        let report = report();
        let page = render(&report, None);
        let body = page.split("<table id=\"rows\">").nth(1).unwrap();
        let body = body.split("</table>").next().unwrap();
        // Every row but the skipped ones, which follow the table a line per reason.
        let skipped = report.rows.iter().filter(|r| r.is_skipped()).count();
        assert!(skipped > 0);
        assert_eq!(
            body.matches("<tr class=").count(),
            report.rows.len() - skipped
        );
        let after = page.split("<h2>Skipped</h2>").nth(1).unwrap();
        assert_eq!(
            after.matches("<li><details><summary>").count(),
            report.skipped_groups().len()
        );
        assert_eq!(body.matches("<th data-key=").count(), COLUMNS.len() - 1);
        assert!(body.contains("<th data-key=\"efficiency\" data-type=\"num\">"));
        let e = report.rows[0].efficiency().unwrap();
        assert!(body.contains(&format!("data-value=\"{e:e}\">{:.1}%</td>", e * 100.0)));
        assert!(page.contains("<p>No chart.</p>"));
    }

    #[test]
    fn the_page_is_self_contained() {
        let report = report();
        let chart = crate::svg::render(&report, None).unwrap();
        let page = render(&report, Some(&chart));
        assert!(page.contains("<figure id=\"chart\">\n<svg"));
        for external in ["<link", "src=", "@import", "url("] {
            assert!(!page.contains(external), "{external}");
        }
        // The only URL is the SVG namespace, which names a format and is never fetched.
        let urls = page.matches("http").count();
        assert_eq!(urls, page.matches("http://www.w3.org/2000/svg").count());
    }
}
