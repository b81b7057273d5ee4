use super::*;
use crate::records::{ComputeCapability, DeviceInfo, TimingStats};
use crate::text::numbers_as_n;

fn timed(op: &str, median: f64) -> Record {
    Record::new(
        op,
        "reduction",
        "attn-weights-4k",
        "bfloat16",
        DeviceInfo::new("NVIDIA H200")
            .with_compute_capability(ComputeCapability { major: 9, minor: 0 })
            .with_l2_bytes(62_914_560),
    )
    .with_roofline(Some(5 << 27), Some(1 << 29))
    .with_roof("cuda_core.fp32")
    .with_timing(
        "x",
        TimingStats::new(100, median, median * 0.9, median * 1.1),
    )
}

fn skipped(workload: &str, reason: &str) -> Record {
    Record::new(
        "rms_norm",
        "normalization",
        workload,
        "float32",
        DeviceInfo::new("cpu"),
    )
    .with_skip(reason)
}

#[test]
fn figures_scale_and_price_against_a_matching_profile() {
    let h200 = Profile::builtin("h200").unwrap();
    let text = console_table(
        &[timed("softmax", 0.2)],
        Some(&h200),
        TableOptions::default(),
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].trim_start().starts_with("op"), "{text}");
    assert!(lines[1].trim().starts_with('-'), "{text}");
    // 2^29 bytes in 0.2 ms = 2.684 TB/s; 5 * 2^27 FLOP = 3.355 TFLOP/s; noise 20%.
    for figure in [
        "200.0 µs",
        "180.0 µs",
        "220.0 µs",
        "2.684 TB/s",
        "3.355 TFLOP/s",
        "20.0%",
    ] {
        assert!(lines[2].contains(figure), "{figure}: {text}");
    }
    // SOL 0.1192 ms at 4502.4 GB/s over 0.2 ms: 59.6%, below.
    assert!(
        lines[2].contains("59.6%") && lines[2].contains("below"),
        "{text}"
    );
    // Numbers are right-aligned under their header.
    let chars = |l: &str| l.chars().collect::<Vec<char>>();
    let header = chars(lines[0]);
    let end = (0..header.len())
        .find(|&i| header[i..].starts_with(&chars("median")))
        .unwrap()
        + "median".len();
    let row: String = chars(lines[2])[..end].iter().collect();
    assert!(row.ends_with("200.0 µs"), "{text}");
    // Without a profile, no efficiency and no verdict.
    let plain = console_table(&[timed("softmax", 0.2)], None, TableOptions::default());
    assert!(
        !plain.contains("59.6%") && !plain.contains("below"),
        "{plain}"
    );
}

#[test]
fn verdicts_are_coloured_only_when_asked() {
    let h200 = Profile::builtin("h200").unwrap();
    // 2^29 bytes in 0.1 ms: 5.4 TB/s, above the 4.8 TB/s peak: fail, in red.
    let records = [timed("softmax", 0.1)];
    let plain = console_table(&records, Some(&h200), TableOptions::default());
    assert!(
        plain.contains("fail") && !plain.contains('\u{1b}'),
        "{plain}"
    );
    let colored = console_table(
        &records,
        Some(&h200),
        TableOptions {
            color: true,
            verbose: false,
        },
    );
    // Red, around the verdict only (comfy-table pads inside the escape).
    let red = colored.find("\u{1b}[38;5;9m").expect("a red escape");
    assert!(
        colored[red..]
            .trim_start_matches("\u{1b}[38;5;9m")
            .trim_start()
            .starts_with("fail"),
        "{colored:?}"
    );
}

#[test]
fn skipped_rows_collapse_into_one_line_per_reason() {
    let records = [
        timed("softmax", 0.2),
        skipped(
            "a",
            "CPU backend: 9000 B per call (0.0 MB), over the budget of 10 B; raise it",
        ),
        skipped(
            "b",
            "CPU backend: 12000 B per call (0.0 MB), over the budget of 10 B; raise it",
        ),
        skipped("c", "manifest bench_skip_reason: needs a GPU"),
        timed("rms_norm", 0.3).with_emulated_run(),
    ];
    let text = console_table(&records, None, TableOptions::default());
    let lines: Vec<&str> = text.lines().collect();
    // Header, rule, the timed row and the emulated one, then the two reasons.
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[3].ends_with(EMULATED_TABLE_NOTE), "{text}");
    assert_eq!(
        lines[4],
        "2 rows skipped: CPU backend: N B per call (0.0 MB), over the budget of 10 B"
    );
    assert_eq!(numbers_as_n("(4.2"), "(N");
    assert_eq!(numbers_as_n("x1_000y2"), "xNyN");
    assert_eq!(
        collapsed_skips(&[
            skipped("a", "CPU backend: 9 B per call (4.2 MB)"),
            skipped("b", "CPU backend: 10 B per call (16.8 MB)"),
        ]),
        [(2, "CPU backend: N B per call (N MB)".to_owned())]
    );
    assert_eq!(
        lines[5],
        "1 row skipped: manifest bench_skip_reason: needs a GPU"
    );
    // --verbose: every row in the table, no collapsed lines.
    let verbose = console_table(
        &records,
        None,
        TableOptions {
            color: false,
            verbose: true,
        },
    );
    assert_eq!(verbose.lines().count(), 2 + records.len(), "{verbose}");
    assert!(!verbose.contains("rows skipped"), "{verbose}");
    assert!(
        verbose.contains("skipped: CPU backend: 12000 B per call"),
        "{verbose}"
    );
    // Long reasons are cut in the verbose table (the records keep them whole).
    let long = console_table(
        &[skipped("x", &"x".repeat(200))],
        None,
        TableOptions {
            color: false,
            verbose: true,
        },
    );
    let line = long.lines().nth(2).unwrap();
    assert!(line.ends_with("xxx…"), "{long}");
    assert_eq!(
        line[line.find("skipped: ").unwrap()..].chars().count(),
        NOTE_CHARS
    );
}
