use serde_json::Value;

use super::*;
use crate::records::{DeviceInfo, RunMeta};

fn h200() -> Profile {
    Profile::builtin("h200").unwrap()
}

fn device() -> DeviceInfo {
    DeviceInfo::new("NVIDIA H200")
        .with_compute_capability("9.0".parse().unwrap())
        .with_l2_bytes(62_914_560)
}

fn record(flops: u64, bytes: u64, median_ms: f64) -> Record {
    Record::new("op", "fam", "w", "float16", device())
        .with_roofline(Some(flops), Some(bytes))
        .with_roof("cuda_core.fp32")
        .with_timing(
            "cuda_events",
            TimingStats::new(10, median_ms, median_ms * 0.99, median_ms * 1.01),
        )
}

fn verdict(r: &Record) -> Option<Verdict> {
    match price(r, &h200()) {
        Outcome::Priced(p) => Some(p.verdict()),
        Outcome::Blank(_) => None,
    }
}

#[test]
fn the_streamed_json_is_the_json_value_text() {
    let meta = RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", device());
    let fast = Record {
        workload: "fast".into(),
        ..record(1_000, 2_000_000_000, 0.25)
    };
    let torch = Record {
        workload: "fast".into(),
        ..record(1_000, 2_000_000_000, 0.5).with_impl("torch")
    };
    let skipped = record(1_000, 1_000, 1.0).with_skip("over the budget");
    let run = Run::new(meta.clone(), vec![fast, torch, skipped]);
    let mut other = run.clone();
    other.records[0].median_ms = Some(0.3);
    other.records[0].p90_ms = Some(0.31);
    other.records.pop();
    let report = Report::build(&run, ProfileChoice::Fixed(&h200()));
    assert!(report.has_baselines() && report.has_fail());
    let comparison = Comparison::build(&run, &other);
    for with in [None, Some(&comparison)] {
        let mut streamed = Vec::new();
        report.write_json(&mut streamed, with).unwrap();
        let mut value = report.to_json();
        if let Some(c) = with {
            value["comparison"] = c.to_json();
        }
        assert_eq!(String::from_utf8(streamed).unwrap(), format!("{value:#}\n"));
    }
    // Every field of a row, and of its baseline, is there.
    let json = report.to_json();
    let row = json["rows"][0].as_object().unwrap();
    let keys: Vec<&str> = row.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "baseline",
            "blank",
            "bound",
            "bytes",
            "compute_ms",
            "dtype",
            "efficiency",
            "family",
            "flops",
            "impl",
            "median_ms",
            "memory_ms",
            "op",
            "p10_ms",
            "p90_ms",
            "profile",
            "reason",
            "roof",
            "sol_ms",
            "verdict",
            "workload"
        ]
    );
    assert_eq!(json["rows"][0]["verdict"], "fail");
    assert_eq!(json["rows"][0]["baseline"]["impl"], "torch");
    assert_eq!(json["rows"][0]["baseline"]["candidates"], 1);
    assert_eq!(json["rows"][0]["baseline"]["time_ratio"], 0.5);
    assert_eq!(json["rows"][2]["blank"], "not_timed");
    assert_eq!(json["summary"]["verdicts"]["fail"], 1);
    assert_eq!(json["meta"]["git_revision"], "abc");
    let c = comparison.to_json();
    assert_eq!(c["rows"].as_array().unwrap().len(), 3);
    assert_eq!(c["rows"][0]["other_median_ms"], 0.3);
    assert_eq!(c["current"]["date"], "2026-11-30T04:00:00Z");
}

#[test]
fn arithmetic_follows_the_definition() {
    // 1 GB at 4502.4 GB/s effective = 0.2221 ms; flops negligible.
    let r = record(1_000, 1_000_000_000, 0.25);
    let Outcome::Priced(p) = price(&r, &h200()) else {
        panic!()
    };
    assert!((p.memory_ms - 1e9 / 4502.4e9 * 1e3).abs() < 1e-12);
    assert_eq!(p.bound(), Bound::Memory);
    assert!((p.efficiency() - p.memory_ms / 0.25).abs() < 1e-12);
    assert_eq!(p.verdict(), Verdict::AtCeiling);
}

#[test]
fn emulated_rows_are_blank_with_their_reason_whatever_the_profile() {
    let emu = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)")
        .with_compute_capability("9.0".parse().unwrap())
        .with_l2_bytes(62_914_560);
    let ran = Record::new("op", "fam", "ran", "float16", emu.clone())
        .with_roofline(Some(1_000), Some(1_000_000))
        .with_roof("cuda_core.fp32")
        .with_emulated_run();
    let over = Record::new("op", "fam", "big", "float16", emu.clone())
        .with_roofline(Some(1_000), Some(1_000_000_000))
        .with_roof("cuda_core.fp32")
        .with_skip("emulated device: over the budget");
    // Even a record on a device the profile describes: an emulated row is never priced.
    let mut on_h200 = ran.clone();
    on_h200.device = device();
    on_h200.workload = "named-h200".into();
    assert_eq!(
        price(&on_h200, &h200()),
        Outcome::Blank(BlankReason::Emulated)
    );
    let run = Run::new(RunMeta::new("a", "d", "v", emu), vec![ran, over, on_h200]);
    let builtins = Profile::builtins().unwrap();
    let fixed = h200();
    for choice in [
        ProfileChoice::Fixed(&fixed),
        ProfileChoice::ByDevice(&builtins),
    ] {
        let report = Report::build(&run, choice);
        let reasons: Vec<String> = report.rows.iter().map(|r| r.reason().unwrap()).collect();
        assert_eq!(reasons[0], "emulated device: no timing");
        assert_eq!(reasons[1], "not timed: emulated device: over the budget");
        assert_eq!(reasons[2], "emulated device: no timing");
        assert_eq!(report.rows[0].blank(), Some(&BlankReason::Emulated));
        assert_eq!(report.summary.blank.get("emulated"), Some(&2));
        assert_eq!(report.summary.blank.get("not_timed"), Some(&1));
        assert!(report.rows.iter().all(|r| r.stats.is_none()));
        assert!(!report.has_fail());
        let md = report.to_markdown();
        assert!(md.contains("| blank: emulated | 2 |"), "{md}");
        let csv = report.to_csv();
        assert!(
            csv.contains(",emulated,emulated device: no timing"),
            "{csv}"
        );
        let json = report.to_json();
        assert_eq!(json["rows"][0]["blank"], "emulated");
        assert_eq!(json["rows"][0]["reason"], "emulated device: no timing");
        assert_eq!(json["rows"][0]["median_ms"], Value::Null);
    }
    // Compared with another run, an emulated side says why it has no time.
    let cmp = Comparison::build(&run, &run);
    assert_eq!(
        cmp.rows[0].current,
        Side::Skipped("emulated device: no timing".into())
    );
}

#[test]
fn tie_is_compute_bound() {
    let p = Priced {
        memory_ms: 1.0,
        compute_ms: 1.0,
        median_ms: 2.0,
        impossible: None,
    };
    assert_eq!(p.bound(), Bound::Compute);
}

#[test]
fn thresholds_are_exact() {
    let p = |sol: f64, median: f64| Priced {
        memory_ms: sol,
        compute_ms: 0.0,
        median_ms: median,
        impossible: None,
    };
    assert_eq!(p(0.8, 1.0).verdict(), Verdict::AtCeiling);
    assert_eq!(p(0.7999, 1.0).verdict(), Verdict::Below);
    assert_eq!(p(1.05, 1.0).verdict(), Verdict::AtCeiling);
    assert_eq!(p(1.0501, 1.0).verdict(), Verdict::Anomaly);
    assert_eq!(p(0.0029, 0.0199).verdict(), Verdict::LatencyBound);
    assert_eq!(p(0.003, 0.0199).verdict(), Verdict::Below);
    assert_eq!(p(0.0029, 0.020).verdict(), Verdict::Below);
    // Anomaly is checked before latency.
    assert_eq!(p(0.0029, 0.0025).verdict(), Verdict::Anomaly);
}

#[test]
fn physics_check_uses_the_theoretical_peaks() {
    // 4.9 TB/s: above 4.8 theoretical.
    assert_eq!(verdict(&record(0, 4_900_000_000, 1.0)), Some(Verdict::Fail));
    // 4.7 TB/s: below theoretical, above the 4.5024 effective by 4.4%: at ceiling, not a fail.
    assert_eq!(
        verdict(&record(0, 4_700_000_000, 1.0)),
        Some(Verdict::AtCeiling)
    );
    // 70 TFLOP/s on cuda_core.fp32 (67 theoretical).
    assert_eq!(
        verdict(&record(70_000_000_000, 1, 1.0)),
        Some(Verdict::Fail)
    );
}

#[test]
fn geomean_counts_judgeable_rows_only() {
    let rows: Vec<Row> = [(0.9, "a"), (0.4, "a"), (2.0, "a"), (0.5, "b")]
        .iter()
        .map(|&(eff, fam)| Row {
            key: record(0, 1, 1.0).key(),
            family: fam.to_owned(),
            roof: None,
            profile: None,
            flops: None,
            bytes: None,
            stats: None,
            baseline: None,
            pipes: None,
            entries: Vec::new(),
            outcome: Outcome::Priced(Priced {
                memory_ms: eff,
                compute_ms: 0.0,
                median_ms: 1.0,
                impossible: None,
            }),
        })
        .collect();
    let s = Summary::of(&rows);
    assert_eq!(s.families[0].counted, 2);
    assert!((s.families[0].geomean_efficiency.unwrap() - 0.6).abs() < 1e-12);
    assert_eq!(s.count(Verdict::Anomaly), 1);
    assert_eq!(s.families[1].family, "b");
}

#[test]
fn compare_calls_from_spreads() {
    let meta = RunMeta::new("a", "d", "v", device());
    let timed = |m: f64, p10: f64, p90: f64| {
        Record::new("op", "f", "w", "float16", device())
            .with_timing("e", TimingStats::new(5, m, p10, p90))
    };
    let cur = Run::new(
        meta.clone(),
        vec![
            timed(1.0, 0.9, 1.1),
            timed(1.0, 0.9, 1.1).with_impl("x"),
            timed(1.0, 0.95, 1.3).with_impl("y"),
            timed(1.0, 0.9, 1.1).with_impl("only-current"),
        ],
    );
    let other = Run::new(
        meta,
        vec![
            timed(2.0, 1.2, 2.2),
            timed(0.5, 0.4, 0.85).with_impl("x"),
            timed(1.2, 1.1, 1.4).with_impl("y"),
            timed(1.0, 0.9, 1.1).with_impl("only-other"),
        ],
    );
    let c = Comparison::build(&cur, &other);
    let calls: Vec<Option<Call>> = c.rows.iter().map(CompareRow::call).collect();
    assert_eq!(
        calls,
        [
            Some(Call::Faster),
            Some(Call::Slower),
            Some(Call::Same),
            None,
            None
        ]
    );
    assert_eq!(c.rows[0].time_ratio(), Some(0.5));
    assert_eq!(c.rows[3].note().as_deref(), Some("not in the other run"));
    assert_eq!(c.rows[4].note().as_deref(), Some("not in the current run"));
    assert!(c.device_note().is_none());
}

#[test]
fn tileops_rows_get_their_fastest_baseline_on_the_same_device() {
    let timed = |imp: &str, m: f64, p10: f64, p90: f64| {
        record(0, 1_000_000, m)
            .with_impl(imp)
            .with_timing("cuda_events", TimingStats::new(50, m, p10, p90))
    };
    let meta = RunMeta::new("a", "d", "v", device());
    let run = Run::new(
        meta.clone(),
        vec![
            timed(TILEOPS_IMPL, 0.10, 0.09, 0.11),
            timed("torch", 0.30, 0.29, 0.31),
            Record::new("other", "fam", "w", "float16", device()).with_skip("no"),
        ],
    );
    let mut faster_elsewhere = timed("torch-compile", 0.01, 0.01, 0.01);
    faster_elsewhere.device = DeviceInfo::new("NVIDIA H100 80GB HBM3");
    let compiled = Run::new(
        meta,
        vec![
            timed("torch-compile", 0.12, 0.10, 0.13),
            faster_elsewhere,
            // A tileops row in a baseline file is not a baseline.
            timed(TILEOPS_IMPL, 0.001, 0.001, 0.001),
        ],
    );

    let alone = Report::build(&run, ProfileChoice::Fixed(&h200()));
    let b = alone.rows[0].baseline.as_ref().unwrap();
    assert_eq!((b.implementation.as_str(), b.candidates), ("torch", 1));
    assert!(alone.rows[1].baseline.is_none(), "a baseline row has none");
    assert!((alone.rows[0].baseline_ratio().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(alone.rows[0].baseline_call(), Some(Call::Faster));

    let both = Report::build_with_baselines(
        &run,
        ProfileChoice::Fixed(&h200()),
        std::slice::from_ref(&compiled),
    );
    assert_eq!(both.rows.len(), 3, "baseline files add no rows");
    let b = both.rows[0].baseline.as_ref().unwrap();
    assert_eq!(
        (b.implementation.as_str(), b.candidates),
        ("torch-compile", 2)
    );
    assert_eq!(both.rows[0].baseline_call(), Some(Call::Same));
    assert!(both.rows[2].baseline_ratio().is_none());
    let summary = both.baseline_summary().unwrap();
    assert!(summary.starts_with("1 tileops rows"), "{summary}");
    assert!(
        summary.contains("0 faster, 0 slower, 1 within the noise"),
        "{summary}"
    );

    let md = both.to_markdown();
    assert!(
        md.contains("| verdict | baseline | baseline ms | vs baseline | reason |"),
        "{md}"
    );
    assert!(
        md.contains("| torch-compile | 0.1200 | 0.833 (same) |"),
        "{md}"
    );
    let csv = both.to_csv();
    assert!(
        csv.lines().next().unwrap().ends_with(
            ",reason,baseline_impl,baseline_median_ms,baseline_time_ratio,baseline_call"
        )
    );
    let json = both.to_json();
    assert_eq!(json["rows"][0]["baseline"]["impl"], "torch-compile");
    assert_eq!(json["rows"][1]["baseline"], Value::Null);

    // Without baselines the tables keep their usual columns.
    let none = Report::build(
        &Run::new(run.meta.clone(), run.records[..1].to_vec()),
        ProfileChoice::Fixed(&h200()),
    );
    assert!(!none.has_baselines() && none.baseline_summary().is_none());
    assert!(!none.to_markdown().contains("baseline"));
    assert!(
        none.to_csv()
            .lines()
            .next()
            .unwrap()
            .ends_with(",blank,reason")
    );
}

#[test]
fn four_significant_digits() {
    assert_eq!(sig4(0.017234), "0.01723");
    assert_eq!(sig4(12.3456), "12.35");
    assert_eq!(sig4(0.000123456), "0.0001235");
    assert_eq!(sig4(1234.5), "1234");
}

#[test]
fn the_streamed_json_escapes_hidden_characters_and_keeps_every_value() {
    // serde_json escapes C0 controls by itself; C1 and bidi controls, U+2028 and U+FFFF it writes
    // raw, and a terminal showing the JSON would get them.
    let hostile = "a\u{1b}[2J\u{9b}b\u{202e}c\u{2028}\u{ffff}\u{7f}";
    let meta = RunMeta::new(hostile, "2026-11-30T04:00:00Z", "0.1.0", device());
    let run = Run::new(
        meta,
        vec![Record {
            op: hostile.into(),
            workload: format!("{hostile}\u{2066}"),
            ..record(1_000, 2_000_000_000, 0.25)
        }],
    );
    let report = Report::build(&run, ProfileChoice::Fixed(&h200()));
    let mut text = Vec::new();
    report.write_json(&mut text, None).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        !text.contains(|c: char| crate::text::is_hidden(c) && c != '\n'),
        "{text}"
    );
    assert!(text.contains(r#""op": "a\u001b[2J\u009bb\u202ec\u2028\uffff\u007f""#));
    // The same document, value for value.
    let back: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report.to_json());
    assert_eq!(back["rows"][0]["op"], hostile);
    assert_eq!(back["meta"]["git_revision"], hostile);
}

fn ledger(instructions: f64) -> crate::records::Ledger {
    crate::records::Ledger {
        method: "test".into(),
        launches: vec![crate::records::LaunchLedger {
            entry: "relu_f16".into(),
            grid: [1320, 1, 1],
            block: [256, 1, 1],
            dynamic_smem: 0,
            ran: false,
            thread_instructions: instructions,
            mufu_ops: 0.0,
            tensor_ops: 0.0,
            instr_per_elem: 1.0,
            mufu_per_elem: 0.0,
            registers: 38,
            ctas_per_sm: 6,
            traffic: None,
            ..Default::default()
        }],
        written_bytes: None,
    }
}

#[test]
fn ledger_rows_are_priced_in_every_format_and_joined_onto_gpu_rows() {
    let emulated = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)");
    let bytes = 1u64 << 30;
    let memory_s = bytes as f64 / h200().hbm().effective();
    // Issue-bound: twice the memory time of instructions.
    let issue = 2.0 * memory_s * h200().sm.unwrap().issue.effective();
    let emu_row = Record::new("op", "fam", "w", "float16", emulated.clone())
        .with_roofline(Some(1), Some(bytes))
        .with_roof("cuda_core.fp32")
        .with_emulated_run()
        .with_ledger(ledger(issue));
    let emu_run = Run::new(
        RunMeta::new("abc", "2026-12-04T00:00:00Z", "0.1.0", emulated),
        vec![emu_row],
    );
    let builtins = Profile::builtins().unwrap();
    // On its own: blank efficiency (emulated), the ledger priced against the H200 it models.
    let report = Report::build(&emu_run, ProfileChoice::ByDevice(&builtins));
    let row = &report.rows[0];
    assert_eq!(row.blank(), Some(&BlankReason::Emulated));
    let pipes = row.pipes.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(pipes.limiter(), Pipe::Issue);
    assert!((pipes.ceiling() - 0.5).abs() < 1e-9);
    assert_eq!(row.entries, ["relu_f16"]);
    let md = report.to_markdown();
    assert!(
        md.contains("## Pipes (from the ledger, not measured)"),
        "{md}"
    );
    assert!(md.contains("| issue | 50.0% |"), "{md}");
    let json = report.to_json();
    assert_eq!(json["rows"][0]["pipes"]["limiter"], "issue");
    // The H200 profile has a time model: every priced row has a predicted time, a prediction.
    let predicted = json["rows"][0]["pipes"]["predicted_ms"].as_f64().unwrap();
    assert!(predicted > 0.0 && predicted.is_finite());
    assert!(json["rows"][0]["pipes"]["predicted_limiter"].is_string());
    let csv = report.to_csv();
    assert!(csv.lines().next().unwrap().ends_with(
        ",limiter,ceiling,predicted_ms,predicted_efficiency,predicted_limiter,traffic_ratio,\
         ledger_note"
    ));

    // A GPU-timed row of the same key takes the emulated run's ledger: measured efficiency
    // beside the ceiling. Its time is the issue-bound one, so efficiency = ceiling.
    let gpu = Record {
        workload: "w".into(),
        ..record(1, bytes, 2.0 * memory_s * 1e3)
    };
    let gpu_run = Run::new(
        RunMeta::new("abc", "2026-12-04T00:00:00Z", "0.1.0", device()),
        vec![gpu],
    );
    let alone = Report::build(&gpu_run, ProfileChoice::ByDevice(&builtins));
    assert!(alone.rows[0].pipes.is_none());
    assert!(alone.pipes_table().is_none());
    let joined = Report::build_with_ledgers(
        &gpu_run,
        ProfileChoice::ByDevice(&builtins),
        &[],
        std::slice::from_ref(&emu_run),
    );
    let row = &joined.rows[0];
    let pipes = row.pipes.as_ref().unwrap().as_ref().unwrap();
    assert!((row.efficiency().unwrap() - pipes.ceiling()).abs() < 1e-6);
    let md = joined.to_markdown();
    assert!(md.contains("| issue | 50.0% |"), "{md}");
    assert!(md.contains("| 50.0% |  |"), "{md}");
}
