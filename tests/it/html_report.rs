//! `roofline --html`, checked as a user sees it: the page rendered by headless Chromium, with its
//! script run, has the summary, every row of the table and the chart; the sort script orders the
//! rows (driven by the `#sort=` fragment, since a headless dump cannot click); and a screenshot is
//! taken (`target/tmp/html_report/report.png`) for a person to look at.
//!
//! Chromium comes from `scripts/test.sh` (Debian's `chromium` package). Without it the test fails
//! in CI (`CI` set) and prints `SKIP:` elsewhere.

use tileops_bench::cli::roofline as roofline_cli;

use std::path::{Path, PathBuf};
use std::process::Command;

use tileops_bench::profile::Profile;
use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
use tileops_bench::report::{ProfileChoice, Report};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html_report");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn h200_device() -> DeviceInfo {
    DeviceInfo::new("NVIDIA H200")
        .with_compute_capability("9.0".parse().unwrap())
        .with_driver("580.65.06")
        .with_l2_bytes(62_914_560)
}

/// Rows of four families, efficiencies from 5% to 95%, a latency-bound one and a blank one.
fn run() -> Run {
    let timed = |op: &str, family: &str, workload: &str, flops: u64, bytes: u64, ms: f64| {
        Record::new(op, family, workload, "bfloat16", h200_device())
            .with_roofline(Some(flops), Some(bytes))
            .with_roof("tensor_core.bf16")
            .with_timing(
                "cuda_events",
                TimingStats::new(50, ms, ms * 0.98, ms * 1.03),
            )
    };
    const GB: u64 = 1_000_000_000;
    let records = vec![
        timed("relu", "elementwise", "16M", 16 << 20, GB, 0.234),
        timed("gelu", "elementwise", "4M", 4 << 22, GB / 4, 0.62),
        timed(
            "rms_norm",
            "normalization",
            "llama-8b",
            4 << 24,
            GB / 2,
            0.15,
        ),
        timed("softmax", "reduction", "8k <&>", 5 << 26, GB / 8, 0.5),
        timed(
            "layer_norm",
            "normalization",
            "decode",
            1 << 16,
            1 << 20,
            0.006,
        ),
        timed(
            "gemm",
            "gemm",
            "4096³",
            2 * 4096u64.pow(3),
            3 * 2 * 4096 * 4096,
            0.3,
        ),
        Record::new("gemm", "gemm", "huge", "bfloat16", h200_device()).with_skip("over budget"),
    ];
    Run::new(
        RunMeta::new("0123abc", "2026-11-30T04:00:00Z", "0.1.0", h200_device()),
        records,
    )
}

/// The Chromium binary: `$CHROMIUM`, else the first of the usual names on `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| {
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .map(|name| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// [`chromium`] for a test: without it the test fails in CI (`CI` set) and says `SKIP:` elsewhere.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI: chromium is not installed; scripts/test.sh installs it (apt-get install chromium)"
        );
        println!("SKIP: chromium not installed (scripts/test.sh installs it)");
    }
    found
}

/// Runs headless Chromium on `url` with `args` and returns its stdout.
fn headless(chromium: &Path, args: &[&str], url: &str) -> String {
    // A profile directory per call: parallel runs must not share Chromium's lock.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = tmp(&format!("profile-{call}"));
    let output = Command::new(chromium)
        // --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", chromium.display()));
    assert!(
        output.status.success(),
        "chromium {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The first cell's text of each row of the `#rows` table, in document order.
fn row_ops(dom: &str) -> Vec<String> {
    let table = dom
        .split("<table id=\"rows\"")
        .nth(1)
        .expect("the rows table");
    let body = table.split("<tbody>").nth(1).unwrap();
    let body = body.split("</tbody>").next().unwrap();
    body.split("<tr")
        .skip(1)
        .map(|row| {
            let cell = row.split("<td>").nth(1).unwrap();
            cell.split("</td>").next().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn the_html_report_renders_in_chromium_with_its_table_and_chart() {
    let records = tmp("records.json");
    run().save(&records).unwrap();
    let page = tmp("report.html");
    let _ = std::fs::remove_file(&page);
    let args: Vec<String> = [
        records.to_str().unwrap(),
        "--profile",
        "h200",
        "--html",
        page.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = roofline_cli::run(&args, &mut out, &mut err).unwrap();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    let siblings: Vec<_> = std::fs::read_dir(page.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(siblings.is_empty(), "the atomic write left {siblings:?}");

    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let url = format!("file://{}", page.display());

    // Unsorted: every row, in the run's order, the summary and the chart.
    let dom = headless(&chromium, &["--dump-dom"], &url);
    let report = Report::build(
        &run(),
        ProfileChoice::Fixed(&Profile::builtin("h200").unwrap()),
    );
    // The table holds every row but the skipped ones, which follow it a line per reason.
    let tabled: Vec<&tileops_bench::report::Row> =
        report.rows.iter().filter(|r| !r.is_skipped()).collect();
    let in_order: Vec<String> = tabled.iter().map(|r| r.key.op.clone()).collect();
    assert_eq!(row_ops(&dom), in_order);
    assert!(
        dom.contains("<h2>Skipped</h2>"),
        "the skipped rows are listed"
    );
    assert!(dom.contains("<table class=\"summary\" id=\"verdicts\">"));
    assert!(dom.contains("<td class=\"v-at_ceiling\">at_ceiling</td><td class=\"num\">"));
    assert!(dom.contains("<figure id=\"chart\">"));
    let svg = dom.split("<figure id=\"chart\">").nth(1).unwrap();
    assert!(svg.trim_start().starts_with("<svg"), "the chart is inline");
    assert_eq!(
        svg.matches("class=\"marker\"").count(),
        report.rows.len() - 1,
        "a marker per timed row"
    );
    assert!(dom.contains("8k &lt;&amp;&gt;"), "escaped text survives");

    // Sorted by the script: efficiency descending, blank efficiencies last.
    let dom = headless(
        &chromium,
        &["--dump-dom"],
        &format!("{url}#sort=efficiency-desc"),
    );
    assert!(
        dom.contains("data-sorted=\"efficiency-desc\""),
        "the script ran"
    );
    let mut by_efficiency = tabled.clone();
    by_efficiency.sort_by(|a, b| match (a.efficiency(), b.efficiency()) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (x, y) => x.is_none().cmp(&y.is_none()),
    });
    let expected: Vec<String> = by_efficiency.iter().map(|r| r.key.op.clone()).collect();
    assert_eq!(row_ops(&dom), expected);
    let dom = headless(&chromium, &["--dump-dom"], &format!("{url}#sort=op"));
    let mut alphabetical = in_order.clone();
    alphabetical.sort();
    assert_eq!(row_ops(&dom), alphabetical);

    // The screenshot, for a person to look at.
    let png = tmp("report.png");
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    headless(&chromium, &[&shot, "--window-size=1500,2200"], &url);
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1500, 2200));
    assert!(bytes.len() > 50_000, "a blank page compresses to far less");
    println!("screenshot: {}", png.display());
}

/// The markdown report rendered as a reader's tool renders it (CommonMark with GFM tables, raw
/// HTML passed through, as GitHub's and Python-Markdown's renderers do) and loaded in Chromium:
/// markup from a records file runs nothing. The payload's handler would mark the page; a page
/// built from the raw payload shows that the check sees it run.
#[test]
fn the_markdown_report_rendered_in_chromium_runs_nothing_from_the_records() {
    let payload = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">";
    let mut records = run().records;
    records[0].op = format!("relu{payload}");
    records[1].workload = format!("w`{payload}`\r| x |");
    let path = tmp("markdown-payload.json");
    Run::new(run().meta, records).save(&path).unwrap();
    let args = [path.to_str().unwrap(), "--profile", "h200"];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    roofline_cli::run(args, &mut out, &mut err).unwrap();
    let markdown = String::from_utf8(out).unwrap();

    let render = |markdown: &str| {
        let parser =
            pulldown_cmark::Parser::new_ext(markdown, pulldown_cmark::Options::ENABLE_TABLES);
        let mut body = String::new();
        pulldown_cmark::html::push_html(&mut body, parser);
        format!("<!DOCTYPE html><html><body>{body}</body></html>")
    };
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let load = |name: &str, html: String| {
        let page = tmp(name);
        std::fs::write(&page, html).unwrap();
        headless(
            &chromium,
            &["--dump-dom", "--virtual-time-budget=2000"],
            &format!("file://{}", page.display()),
        )
    };
    // The check sees a payload run: the raw one, rendered the same way.
    let raw = load(
        "markdown-raw.html",
        render(&format!("| op |\n| --- |\n| {payload} |\n")),
    );
    // The handler marks the body; the payload's own text (shown escaped) names the mark too.
    let ran = |dom: &str| dom.contains("<body data-pwned=\"1\">");
    assert!(ran(&raw), "the raw payload runs: {raw}");
    // The report's markdown runs nothing, and shows the payload as text.
    let dom = load("markdown-report.html", render(&markdown));
    assert!(!ran(&dom), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
    assert!(dom.contains("relu&lt;img src=x onerror="), "{dom}");
}
