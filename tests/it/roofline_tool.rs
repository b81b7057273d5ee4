//! The roofline tool, as a downstream user runs it: every verdict and every blank reason on fixed
//! records against `profiles/h200.yaml`, bad input, the outputs, the chart and the comparison.
//!
//! From the outside, the built tool in its own process: inputs that are not regular files (a FIFO
//! with no writer, `/dev/zero`, a directory as `--profile`) are refused at once; a file over the
//! bound is refused naming it; a BOM is accepted; a `fail` verdict and an output error combine
//! into exit status 3; a closed stdout ends the tool quietly; a failed chart write (`ulimit -f`)
//! leaves the previous chart byte for byte; a partial run is reported as partial.

use crate::common;

// The CLI itself (the library's, which the example wraps), so that its argument handling, exit
// status and files are tested too.
use tileops_bench::cli::roofline as roofline_cli;

use std::path::PathBuf;

use roofline_cli::CliError;
use tileops_bench::profile::{DeviceMismatch, Profile};
use tileops_bench::records::{
    DeviceInfo, Partial, Record, RecordsError, Run, RunMeta, TimingStats,
};
use tileops_bench::report::{
    BlankReason, Bound, Comparison, Outcome, ProfileChoice, Report, Verdict,
};

const H200_L2: u64 = 62_914_560;

fn h200_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles/h200.yaml")
}

fn h200() -> Profile {
    Profile::from_path(h200_file()).unwrap_or_else(|e| panic!("{e}"))
}

fn h200_device() -> DeviceInfo {
    DeviceInfo::new("NVIDIA H200")
        .with_compute_capability("9.0".parse().unwrap())
        .with_driver("580.65.06")
        .with_l2_bytes(H200_L2)
}

fn cpu_device() -> DeviceInfo {
    DeviceInfo::new("cpu: x86_64, 2 cores")
}

/// A timed record on the H200 with a tight spread around `median_ms`.
fn timed(op: &str, workload: &str, flops: u64, bytes: u64, roof: &str, median_ms: f64) -> Record {
    Record::new(op, "test", workload, "bfloat16", h200_device())
        .with_roofline(Some(flops), Some(bytes))
        .with_roof(roof)
        .with_timing(
            "cuda_events",
            TimingStats::new(100, median_ms, median_ms * 0.98, median_ms * 1.02),
        )
}

fn run_of(records: Vec<Record>) -> Run {
    let device = records
        .first()
        .map_or_else(h200_device, |r| r.device.clone());
    Run::new(
        RunMeta::new("0123abc", "2026-11-30T04:00:00Z", "0.1.0", device),
        records,
    )
}

const GB: u64 = 1_000_000_000;
const GEMM_8K_FLOPS: u64 = 2 * 8192 * 8192 * 8192;
const GEMM_8K_BYTES: u64 = 3 * 8192 * 8192 * 2;

/// One record per verdict, named after it.
fn verdict_records() -> Vec<Record> {
    vec![
        // 1 GB in 0.25 ms: 4.0 TB/s, 88.8% of the 4502.4 GB/s envelope.
        timed("copy", "at_ceiling", GB / 4, GB, "cuda_core.fp32", 0.25),
        // 1 GB in 0.5 ms: 44.4%.
        timed("copy", "below", GB / 4, GB, "cuda_core.fp32", 0.5),
        // 1 GB in 0.21 ms: 4.76 TB/s, possible (< 4.8) but 105.8% of the envelope.
        timed("copy", "anomaly", GB / 4, GB, "cuda_core.fp32", 0.21),
        // 1 GB in 0.2 ms: 5.0 TB/s, more than the HBM can move.
        timed("copy", "fail_hbm", GB / 4, GB, "cuda_core.fp32", 0.2),
        // A decode-size row: SOL 3.6 ns, measured 8 µs.
        timed(
            "rms_norm",
            "latency_bound",
            4 * 4096,
            2 * 4096 * 2,
            "cuda_core.fp32",
            0.008,
        ),
        // GEMM 8192^3 bf16 in 1.8 ms: 611 TFLOP/s, 87% of 700.3 effective.
        timed(
            "gemm",
            "at_ceiling_compute",
            GEMM_8K_FLOPS,
            GEMM_8K_BYTES,
            "tensor_core.bf16",
            1.8,
        ),
        // The same GEMM in 1.0 ms: 1099.5 TFLOP/s, above the 989.5 theoretical peak.
        timed(
            "gemm",
            "fail_compute",
            GEMM_8K_FLOPS,
            GEMM_8K_BYTES,
            "tensor_core.bf16",
            1.0,
        ),
    ]
}

#[test]
fn the_h200_file_is_the_profile_the_crate_ships() {
    let file = h200();
    let builtin = Profile::builtin("h200").unwrap();
    assert_eq!(file.roofs, builtin.roofs);
    assert_eq!(file.device, builtin.device);
    assert_eq!(file.hbm().theoretical, 4800e9);
    assert!((file.hbm().effective() - 4502.4e9).abs() < 1.0);
}

#[test]
fn every_verdict() {
    let report = Report::build(&run_of(verdict_records()), ProfileChoice::Fixed(&h200()));
    let got: Vec<(&str, Option<Verdict>)> = report
        .rows
        .iter()
        .map(|r| (r.key.workload.as_str(), r.verdict()))
        .collect();
    assert_eq!(
        got,
        [
            ("at_ceiling", Some(Verdict::AtCeiling)),
            ("below", Some(Verdict::Below)),
            ("anomaly", Some(Verdict::Anomaly)),
            ("fail_hbm", Some(Verdict::Fail)),
            ("latency_bound", Some(Verdict::LatencyBound)),
            ("at_ceiling_compute", Some(Verdict::AtCeiling)),
            ("fail_compute", Some(Verdict::Fail)),
        ]
    );
    // The numbers behind the first row, by the definition.
    let row = &report.rows[0];
    let memory_ms = 1e9 / (4800e9 * 0.9380) * 1e3;
    assert!((row.sol_ms().unwrap() - memory_ms).abs() < 1e-12);
    assert!((row.efficiency().unwrap() - memory_ms / 0.25).abs() < 1e-12);
    assert_eq!(row.bound(), Some(Bound::Memory));
    assert_eq!(report.rows[5].bound(), Some(Bound::Compute));
    assert!(
        report.rows[3]
            .reason()
            .unwrap()
            .contains("5.00 TB/s, above the 4.80 TB/s")
    );
    assert!(
        report.rows[6]
            .reason()
            .unwrap()
            .contains("989.5 TFLOP/s theoretical peak of tensor_core.bf16")
    );
    assert!(report.rows[2].reason().unwrap().contains("never a win"));
    assert!(report.has_fail());
    let s = &report.summary;
    assert_eq!(
        [
            Verdict::Fail,
            Verdict::Anomaly,
            Verdict::LatencyBound,
            Verdict::AtCeiling,
            Verdict::Below
        ]
        .map(|v| s.count(v)),
        [2, 1, 1, 2, 1]
    );
}

#[test]
fn physics_check_fails_a_record_implying_more_than_4_8_tb_s() {
    let h200 = h200();
    let verdict = |bytes: u64, ms: f64| match tileops_bench::report::price(
        &timed("x", "w", 0, bytes, "cuda_core.fp32", ms),
        &h200,
    ) {
        Outcome::Priced(p) => p.verdict(),
        Outcome::Blank(reason) => panic!("{reason}"),
    };
    // 4.81 TB/s: impossible.
    assert_eq!(verdict(4_810_000_000, 1.0), Verdict::Fail);
    // Exactly 4.8 TB/s is possible, and 106.6% of the envelope: an anomaly, not a win.
    assert_eq!(verdict(4_800_000_000, 1.0), Verdict::Anomaly);
    // The verdict uses the theoretical peak, not the effective one: 4.6 TB/s is above the 4.5024
    // envelope yet within 5%.
    assert_eq!(verdict(4_600_000_000, 1.0), Verdict::AtCeiling);
}

/// One record per blank reason, named after it.
fn blank_records() -> Vec<Record> {
    let base = || timed("softmax", "", GB / 4, GB, "cuda_core.fp32", 0.3);
    let named = |r: Record, name: &str| Record {
        workload: name.to_owned(),
        ..r
    };
    vec![
        named(
            base().with_skip("too large for the CPU reference"),
            "not_timed",
        ),
        named(
            Record {
                device: DeviceInfo::new("NVIDIA A100-SXM4-80GB"),
                ..base()
            },
            "device_name",
        ),
        named(
            Record {
                device: h200_device().with_l2_bytes(7_864_320),
                ..base()
            },
            "device_l2",
        ),
        named(
            Record {
                device: h200_device().with_compute_capability("8.0".parse().unwrap()),
                ..base()
            },
            "device_cc",
        ),
        named(
            Record {
                roof: None,
                ..base()
            },
            "no_roof",
        ),
        named(base().with_roof("tensor_core.int8"), "roof_not_in_profile"),
        named(base().with_roofline(Some(1), None), "no_bytes"),
        named(base().with_roofline(Some(1), Some(0)), "zero_bytes"),
        named(base().with_roofline(None, Some(GB)), "no_flops"),
    ]
}

#[test]
fn every_blank_reason_against_a_fixed_profile() {
    let report = Report::build(&run_of(blank_records()), ProfileChoice::Fixed(&h200()));
    assert_eq!(report.rows.len(), 9, "no row dropped");
    for row in &report.rows {
        assert_eq!(row.verdict(), None, "{}", row.key);
        assert_eq!(row.efficiency(), None, "{}", row.key);
        assert_eq!(row.sol_ms(), None, "{}", row.key);
        assert!(!row.reason().unwrap_or_default().is_empty(), "{}", row.key);
    }
    let blank = |i: usize| report.rows[i].blank().cloned().unwrap();
    assert_eq!(
        blank(0),
        BlankReason::NotTimed {
            reason: "too large for the CPU reference".into()
        }
    );
    assert!(matches!(
        blank(1),
        BlankReason::DeviceMismatch(DeviceMismatch::Name { .. })
    ));
    assert!(matches!(
        blank(2),
        BlankReason::DeviceMismatch(DeviceMismatch::L2 { .. })
    ));
    assert!(matches!(
        blank(3),
        BlankReason::DeviceMismatch(DeviceMismatch::ComputeCapability { .. })
    ));
    assert_eq!(blank(4), BlankReason::NoRoof);
    assert!(
        matches!(blank(5), BlankReason::RoofNotInProfile { ref roof, .. } if roof == "tensor_core.int8")
    );
    assert_eq!(blank(6), BlankReason::NoBytes);
    assert_eq!(blank(7), BlankReason::ZeroBytes);
    assert_eq!(blank(8), BlankReason::NoFlops);
    assert!(
        report.rows[1]
            .reason()
            .unwrap()
            .contains("NVIDIA A100-SXM4-80GB")
    );
    assert!(report.rows[7].reason().unwrap().contains("placeholder"));
    assert_eq!(report.summary.blank_rows(), 9);
    assert_eq!(report.summary.blank["device_mismatch"], 3);
    assert!(!report.has_fail());
}

#[test]
fn blank_reasons_when_choosing_by_device() {
    let h200_text = std::fs::read_to_string(h200_file()).unwrap();
    let twins = [
        Profile::from_yaml_str(&h200_text, "h200", "a.yaml").unwrap(),
        Profile::from_yaml_str(&h200_text, "h200_copy", "b.yaml").unwrap(),
    ];
    let record = timed("softmax", "w", 1, GB, "cuda_core.fp32", 0.3);
    let report = Report::build(
        &run_of(vec![record.clone()]),
        ProfileChoice::ByDevice(&twins),
    );
    assert!(
        matches!(report.rows[0].blank(), Some(BlankReason::AmbiguousProfile { profiles, .. }) if profiles.len() == 2)
    );

    let builtins = Profile::builtins().unwrap();
    let cpu = Record {
        device: cpu_device(),
        ..record.clone()
    };
    let h20 = Record {
        device: DeviceInfo::new("NVIDIA H20-3e"),
        roof: Some("cuda_core.fp32".into()),
        ..record.clone()
    };
    let report = Report::build(
        &run_of(vec![cpu, h20, record]),
        ProfileChoice::ByDevice(&builtins),
    );
    assert!(
        matches!(report.rows[0].blank(), Some(BlankReason::NoProfile { device, .. }) if device.starts_with("cpu")),
        "{:?}",
        report.rows[0]
    );
    // The H20-3e profile publishes no fp32 calibration: blank, not guessed.
    assert!(
        matches!(report.rows[1].blank(), Some(BlankReason::RoofNotInProfile { profile, .. }) if profile == "h20_3e")
    );
    assert_eq!(report.rows[2].profile.as_deref(), Some("h200"));
    assert_eq!(report.rows[2].verdict(), Some(Verdict::Below));
}

// ---- the command line ----

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("roofline_tool");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write_run(name: &str, run: &Run) -> PathBuf {
    let path = tmp(name);
    run.save(&path).unwrap();
    path
}

struct Cli {
    code: Result<u8, CliError>,
    out: String,
    err: String,
}

fn cli(args: &[&str]) -> Cli {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = roofline_cli::run(args, &mut out, &mut err);
    Cli {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

fn error_text(c: &Cli) -> String {
    match &c.code {
        Err(e) => e.to_string(),
        Ok(code) => panic!("expected an error, got exit {code}; out:\n{}", c.out),
    }
}

#[test]
fn cli_exits_1_on_fail_and_lists_every_row_in_every_format() {
    let mut records = verdict_records();
    records.extend(blank_records());
    let n = records.len();
    let path = write_run("all.json", &run_of(records));
    let path = path.to_str().unwrap();

    let md = cli(&[path, "--profile", h200_file().to_str().unwrap()]);
    assert_eq!(md.code.as_ref().ok(), Some(&1), "{}", md.err);
    assert!(md.err.contains("2 record(s) fail"), "{}", md.err);
    let table_rows = md
        .out
        .lines()
        .filter(|l| {
            l.starts_with("| copy")
                || l.starts_with("| gemm")
                || l.starts_with("| rms_norm")
                || l.starts_with("| softmax")
        })
        .count();
    // Every row: in the table, or (skipped by the harness) a line per reason after it.
    let skipped: usize = md
        .out
        .lines()
        .filter_map(|l| {
            l.strip_prefix("- ")?
                .split(" row(s): ")
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert!(skipped > 0, "{}", md.out);
    assert_eq!(table_rows + skipped, n, "{}", md.out);
    assert!(
        md.out.contains("| fail | 2 |") && md.out.contains("| blank | 9 |"),
        "{}",
        md.out
    );
    assert!(md.out.contains("blank: zero_bytes"), "{}", md.out);

    let csv = cli(&[path, "--profile", "h200", "--format", "csv"]);
    assert_eq!(csv.code.as_ref().ok(), Some(&1));
    assert_eq!(csv.out.lines().count(), n + 1, "{}", csv.out);
    assert!(
        csv.out
            .starts_with("op,family,workload,dtype,impl,roof,profile,flops,bytes,median_ms")
    );

    let json = cli(&[path, "--profile=h200", "--format=json"]);
    let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(value["rows"].as_array().unwrap().len(), n);
    assert_eq!(value["summary"]["verdicts"]["fail"], 2);
    assert_eq!(value["rows"][7]["verdict"], serde_json::Value::Null);
    assert_eq!(value["rows"][7]["blank"], "not_timed");
}

#[test]
fn cli_on_records_from_a_host_no_profile_describes() {
    let cpu = Record::new("softmax", "reduction", "llama-8b", "float32", cpu_device())
        .with_roofline(Some(5 * 2048 * 4096), Some(2 * 2048 * 4096 * 4))
        .with_roof("cuda_core.fp32")
        .with_timing("cpu_wall", TimingStats::new(10, 25.0, 24.0, 27.0));
    let path = write_run("cpu.json", &run_of(vec![cpu]));
    let c = cli(&[path.to_str().unwrap()]);
    assert_eq!(c.code.as_ref().ok(), Some(&0));
    assert!(c.out.contains("none describes this device"), "{}", c.out);
    // A markdown cell writes a backtick as `&#96;` (a field from the file cannot open a code span).
    assert!(
        c.out
            .contains("no profile describes &#96;cpu: x86_64, 2 cores&#96;"),
        "{}",
        c.out
    );
    // The measured rate is still shown; only the priced columns are blank.
    assert!(c.out.contains("| 25.00 | 2.684 |"), "{}", c.out);
    // And the way to price them is said.
    assert!(c.err.contains("`tileops calibrate --cpu`"), "{}", c.err);

    // A host profile beside the records (`<dir>/profiles/` next to `<dir>/bench/`), as a run in
    // another directory than the tool's leaves it, prices them.
    let dir = common::scratch("roofline-host-beside");
    std::fs::create_dir_all(dir.join("bench")).unwrap();
    std::fs::create_dir_all(dir.join("profiles")).unwrap();
    let beside = dir.join("bench/cpu.json");
    std::fs::copy(&path, &beside).unwrap();
    let host = "device:\n  name: this host\n  kind: cpu\n  match: [\"cpu: x86_64, 2 cores\"]\n  \
                l2_bytes: 1048576\nhbm:\n  theoretical: 20e9\n  calibration: 0.5\ncpu:\n  fp32:\n    \
                theoretical: 200e9\n    calibration: 0.5\n";
    std::fs::write(dir.join("profiles/host-this.yaml"), host).unwrap();
    let priced = cli(&[beside.to_str().unwrap()]);
    assert!(priced.code.is_ok(), "{}", priced.err);
    assert!(
        !priced.out.contains("no profile describes"),
        "{}",
        priced.out
    );
    assert!(!priced.err.contains("calibrate --cpu"), "{}", priced.err);

    // Forcing a profile does not price them either.
    let forced = cli(&[path.to_str().unwrap(), "--profile", "h200"]);
    assert_eq!(forced.code.as_ref().ok(), Some(&0));
    assert!(
        forced
            .out
            .contains("not the profiled device: timed on &#96;cpu: x86_64, 2 cores&#96;"),
        "{}",
        forced.out
    );
}

#[test]
fn cli_on_records_from_the_emulated_device_leaves_every_row_blank_with_its_reason() {
    // What bench_all writes on cuda-emu: rows run once (timing `emulated`, no figure) and rows
    // over the emulator budget (skipped). The device names an H200, its L2 and capability too.
    let emu = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)")
        .with_compute_capability("9.0".parse().unwrap())
        .with_l2_bytes(H200_L2);
    let ran = Record::new(
        "softmax",
        "reduction",
        "decode-attn-4k",
        "bfloat16",
        emu.clone(),
    )
    .with_roofline(Some(5 * 32 * 4096), Some(2 * 32 * 4096 * 2))
    .with_roof("cuda_core.fp32")
    .with_emulated_run();
    let over = Record::new(
        "softmax",
        "reduction",
        "attn-weights-32k",
        "bfloat16",
        emu.clone(),
    )
    .with_roofline(Some(5 << 25), Some(1 << 27))
    .with_roof("cuda_core.fp32")
    .with_skip("emulated device: 134217728 B per call (134.2 MB), over the emulator budget");
    let run = Run::new(
        RunMeta::new("0123abc", "2026-11-30T04:00:00Z", "0.1.0", emu),
        vec![ran, over],
    );
    let path = write_run("emulated.json", &run);
    let path = path.to_str().unwrap();
    let svg = tmp("emulated.svg");
    for profile in [None, Some("h200")] {
        let mut args = vec![path, "--svg", svg.to_str().unwrap()];
        args.extend(profile.map(|p| ["--profile", p]).into_iter().flatten());
        let c = cli(&args);
        assert_eq!(c.code.as_ref().ok(), Some(&0), "{profile:?}: {}", c.err);
        let rows: Vec<&str> = c
            .out
            .lines()
            .filter(|l| l.starts_with("| softmax"))
            .collect();
        // The skipped row follows the table, a line per reason.
        assert_eq!(rows.len(), 1, "{}", c.out);
        assert!(
            rows[0].ends_with("| emulated device: no timing |"),
            "{}",
            rows[0]
        );
        assert!(
            c.out.contains("## Skipped\n\n- 1 row(s): emulated device: 134217728 B per call (134.2 MB), over the emulator budget: softmax/attn-weights-32k/bfloat16\n"),
            "{}",
            c.out
        );
        assert!(c.out.contains("| blank: emulated | 1 |"), "{}", c.out);
        assert!(
            c.out.contains("1 row(s) ran on an emulated device"),
            "{}",
            c.out
        );
        assert!(c.err.contains("emulated device: no timing"), "{}", c.err);
        assert!(c.out.contains("| blank: not_timed | 1 |"), "{}", c.out);
        assert!(!c.out.contains('%'), "no efficiency anywhere: {}", c.out);
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

        let mut json_args = vec![path, "--format", "json"];
        json_args.extend(profile.map(|p| ["--profile", p]).into_iter().flatten());
        let json = cli(&json_args);
        let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
        assert_eq!(value["rows"][0]["blank"], "emulated");
        assert_eq!(value["rows"][0]["reason"], "emulated device: no timing");
        assert_eq!(value["rows"][0]["median_ms"], serde_json::Value::Null);
        assert_eq!(value["summary"]["blank"]["emulated"], 1);
    }
}

#[test]
fn cli_bad_input_is_a_clear_error() {
    let good = run_of(verdict_records()).to_json_pretty().unwrap();

    let truncated = tmp("truncated.json");
    std::fs::write(&truncated, &good[..good.len() * 2 / 3]).unwrap();
    let text = error_text(&cli(&[truncated.to_str().unwrap()]));
    assert!(
        text.starts_with(&format!("{}:", truncated.display())) && text.contains("truncated"),
        "{text}"
    );

    let malformed = tmp("malformed.json");
    std::fs::write(&malformed, good.replacen("\"flops\"", "\"flops\" 1,", 1)).unwrap();
    let c = cli(&[malformed.to_str().unwrap()]);
    assert!(
        matches!(
            c.code,
            Err(CliError::Records(RecordsError::Malformed { line: 2.., .. }))
        ),
        "{}",
        error_text(&c)
    );

    let wrong_type = tmp("wrong_type.json");
    std::fs::write(
        &wrong_type,
        good.replacen("\"bytes\": 1000000000", "\"bytes\": \"1 GB\"", 1),
    )
    .unwrap();
    let text = error_text(&cli(&[wrong_type.to_str().unwrap()]));
    assert!(text.contains("invalid type: string \"1 GB\""), "{text}");

    let text = error_text(&cli(&[tmp("missing.json").to_str().unwrap()]));
    assert!(text.contains("missing.json"), "{text}");

    let path = write_run("good.json", &run_of(verdict_records()));
    let text = error_text(&cli(&[path.to_str().unwrap(), "--profile", "a100"]));
    assert!(
        text.contains("unknown profile `a100`") && text.contains("h200, h100, h20_3e"),
        "{text}"
    );

    let bad_profile = tmp("bad_profile.yaml");
    let h200_text = std::fs::read_to_string(h200_file()).unwrap();
    std::fs::write(
        &bad_profile,
        h200_text.replace("calibration: 0.7077", "calibration: 1.07"),
    )
    .unwrap();
    let text = error_text(&cli(&[
        path.to_str().unwrap(),
        "--profile",
        bad_profile.to_str().unwrap(),
    ]));
    let line = h200_text
        .lines()
        .position(|l| l.contains("calibration: 0.7077"))
        .unwrap()
        + 1;
    assert!(
        text.starts_with(&format!("{}:{line}:", bad_profile.display())),
        "{text}"
    );
    assert!(text.contains("tensor_core.bf16.calibration"), "{text}");

    for args in [
        &[][..],
        &[path.to_str().unwrap(), "--format", "xml"],
        &[path.to_str().unwrap(), "--bogus"],
        &[path.to_str().unwrap(), "--svg"],
    ] {
        assert!(
            matches!(cli(args).code, Err(CliError::Usage(_))),
            "{args:?}"
        );
    }
    assert!(matches!(cli(&["--help"]).code, Err(CliError::Help(_))));
}

#[test]
fn cli_zero_bytes_and_other_devices_are_blank_rows_not_errors() {
    let zero = timed("softmax", "placeholder", 5, 0, "cuda_core.fp32", 0.3);
    let other = Record {
        device: DeviceInfo::new("NVIDIA H100 80GB HBM3"),
        ..timed("softmax", "h100", 1, GB, "cuda_core.fp32", 0.3)
    };
    let path = write_run("blank_rows.json", &run_of(vec![zero, other]));
    let c = cli(&[
        path.to_str().unwrap(),
        "--profile",
        "h200",
        "--format",
        "csv",
    ]);
    assert_eq!(c.code.as_ref().ok(), Some(&0));
    let lines: Vec<&str> = c.out.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[1].contains(",zero_bytes,bytes is 0"), "{}", lines[1]);
    assert!(lines[2].contains(",device_mismatch,"), "{}", lines[2]);
}

#[test]
fn svg_shows_the_roofs_and_one_marker_per_record() {
    let mut records = verdict_records();
    records.push(timed("copy", "zero_flops", 0, GB, "cuda_core.fp32", 0.3));
    let plottable = records.len() - 1;
    let path = write_run("chart.json", &run_of(records));
    let svg_path = tmp("chart.svg");
    let _ = std::fs::remove_file(&svg_path);
    let c = cli(&[
        path.to_str().unwrap(),
        "--svg",
        svg_path.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(c.code.as_ref().ok(), Some(&1));
    assert!(
        c.err
            .contains(&format!("{plottable} of {} records plotted", plottable + 1)),
        "{}",
        c.err
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(
        svg.matches("class=\"marker\"").count(),
        plottable,
        "one marker per plottable record"
    );
    assert_eq!(
        svg.matches("<title>op: ").count(),
        plottable,
        "each with its tooltip"
    );
    // The HBM diagonal and the five compute roofs of the H200 (effective / theoretical), each in
    // the legend, with a ridge-point triangle per compute roof.
    let texts = svg_texts(&svg);
    for roof in [
        "hbm: 4.50 / 4.80 TB/s",
        "cuda_core.fp32: 57.3 / 67.0 TFLOP/s",
        "tensor_core.fp16: 661.4 / 989.5 TFLOP/s",
        "tensor_core.bf16: 700.3 / 989.5 TFLOP/s",
        "tensor_core.tf32: 358.6 / 494.7 TFLOP/s",
        "tensor_core.fp8: 1247.4 / 1979.0 TFLOP/s",
    ] {
        assert!(texts.iter().any(|t| t == roof), "{roof}: {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t == "ridge 12.7 FLOP/B (theoretical 14.0)"),
        "{texts:?}"
    );
    // Plotters' polygons are the ridge points; the markers and legend shapes carry a class.
    assert_eq!(
        svg.split("<polygon")
            .skip(1)
            .filter(|p| !p.split_once('>').unwrap().0.contains("class="))
            .count(),
        5,
        "one ridge point per compute roof"
    );
    // Theoretical dashed: the dashes are many short segments in the roof's colour.
    assert!(
        svg.matches("<polyline").count() > 40,
        "dashed theoretical roofs"
    );
    for (verdict, n) in [
        ("fail", 2),
        ("anomaly", 1),
        ("latency_bound", 1),
        ("at_ceiling", 2),
        ("below", 1),
        ("blank", 0),
    ] {
        let entry = format!("{verdict}: {n}");
        assert!(texts.contains(&entry), "legend entry {entry}: {texts:?}");
    }
    assert!(
        svg.contains("not plotted: 1 zero flops"),
        "the unplottable record is named"
    );
}

/// The contents of the chart's `<text>` elements.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn compare_two_runs_from_their_spreads() {
    let stats = |m: f64, lo: f64, hi: f64| TimingStats::new(50, m, lo, hi);
    let rec = |w: &str, s: TimingStats| {
        timed("softmax", w, 1, GB, "cuda_core.fp32", 1.0).with_timing("cuda_events", s)
    };
    let current = run_of(vec![
        rec("faster", stats(0.30, 0.29, 0.31)),
        rec("slower", stats(0.50, 0.48, 0.52)),
        rec("same", stats(0.40, 0.36, 0.44)),
        rec("new", stats(0.40, 0.39, 0.41)),
        timed("softmax", "skipped", 1, GB, "cuda_core.fp32", 1.0).with_skip("too large"),
    ]);
    let other = run_of(vec![
        rec("faster", stats(0.40, 0.38, 0.42)),
        rec("slower", stats(0.40, 0.38, 0.42)),
        rec("same", stats(0.42, 0.40, 0.45)),
        rec("skipped", stats(0.40, 0.39, 0.41)),
        rec("gone", stats(0.40, 0.39, 0.41)),
    ]);
    let c = Comparison::build(&current, &other);
    let calls: Vec<(&str, Option<&str>)> = c
        .rows
        .iter()
        .map(|r| (r.key.workload.as_str(), r.call().map(|c| c.as_str())))
        .collect();
    assert_eq!(
        calls,
        [
            ("faster", Some("faster")),
            ("slower", Some("slower")),
            ("same", Some("same")),
            ("new", None),
            ("skipped", None),
            ("gone", None),
        ]
    );
    assert!((c.rows[0].time_ratio().unwrap() - 0.75).abs() < 1e-12);
    assert_eq!(
        c.rows[4].note().as_deref(),
        Some("not timed in the current run: too large")
    );

    let (a, b) = (
        write_run("current.json", &current),
        write_run("other.json", &other),
    );
    let md = cli(&[a.to_str().unwrap(), "--compare", b.to_str().unwrap()]);
    assert_eq!(md.code.as_ref().ok(), Some(&0));
    assert!(
        md.out.contains("## Comparison")
            && md
                .out
                .contains("1 faster, 1 slower, 1 same, 3 without a call"),
        "{}",
        md.out
    );
    let json = cli(&[
        a.to_str().unwrap(),
        "--compare",
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(value["comparison"]["rows"].as_array().unwrap().len(), 6);
    assert_eq!(value["rows"].as_array().unwrap().len(), 5);
    let csv = cli(&[
        a.to_str().unwrap(),
        "--compare",
        b.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(csv.out.lines().count(), 7);
    let first: Vec<&str> = csv.out.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(first[first.len() - 2], "faster", "{}", csv.out);
    assert!(
        (first[first.len() - 3].parse::<f64>().unwrap() - 0.75).abs() < 1e-12,
        "{}",
        csv.out
    );
}

// ---- from the outside: the built tool in its own process ----

/// roofline in its own process, within `limit` (a hang fails the test).
fn roofline(args: &[&std::ffi::OsStr], limit_s: u64) -> common::Finished {
    common::run_within(
        common::tool("roofline").args(args),
        std::time::Duration::from_secs(limit_s),
    )
}

/// `path` as an argument.
fn arg(path: &std::path::Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_without_waiting() {
    let dir = common::scratch("roofline-not-regular");
    let fifo = dir.join("records.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo");
    let good = write_run("not-regular-good.json", &run_of(verdict_records()));
    let zero = std::path::Path::new("/dev/zero");
    let cases: [(Vec<&std::ffi::OsStr>, &str); 6] = [
        // A FIFO with no writer: opening it for reading used to wait forever.
        (
            vec![arg(&fifo)],
            "is a FIFO (named pipe), not a regular file",
        ),
        (vec![arg(zero)], "is a character device, not a regular file"),
        (vec![arg(&dir)], "is a directory, not a regular file"),
        (
            vec![arg(&good), "--profile".as_ref(), arg(&dir)],
            "is a directory, not a regular file",
        ),
        (
            vec![arg(&good), "--profile".as_ref(), arg(&fifo)],
            "is a FIFO (named pipe), not a regular file",
        ),
        (
            vec![arg(&good), "--torch".as_ref(), arg(zero)],
            "is a character device, not a regular file",
        ),
    ];
    for (args, why) in cases {
        let done = roofline(&args, 60);
        assert_eq!(done.code(), 2, "{args:?}: {done:?}");
        assert!(done.stderr.contains(why), "{args:?}: {}", done.stderr);
        assert!(!done.stderr.contains("no such file"), "{}", done.stderr);
        assert!(done.stdout.is_empty(), "{args:?}: {}", done.stdout);
    }
}

#[test]
fn a_records_file_over_the_bound_is_refused_with_the_bound() {
    let dir = common::scratch("roofline-huge");
    let huge = dir.join("huge.json");
    // Sparse: 2 GiB + 1 byte of holes costs no disk and no time to make.
    let bound = tileops_bench::records::MAX_FILE_BYTES;
    assert_eq!(bound, 2 << 30);
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(bound + 1).unwrap();
    let done = roofline(&[arg(&huge)], 60);
    assert_eq!(done.code(), 2, "{done:?}");
    assert!(
        done.stderr
            .contains("is 2147483649 B (2.0 GiB), over the 2147483648 B (2.0 GiB) this tool reads"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let plain = write_run("bom-plain.json", &run_of(verdict_records()));
    let bom = tmp("bom.json");
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(&plain).unwrap());
    std::fs::write(&bom, bytes).unwrap();
    let with = cli(&[bom.to_str().unwrap(), "--profile", "h200"]);
    let without = cli(&[plain.to_str().unwrap(), "--profile", "h200"]);
    assert_eq!(with.code.as_ref().ok(), Some(&1), "{}", with.err);
    assert_eq!(with.out, without.out);
    // A profile with one loads too.
    let profile = tmp("bom-profile.yaml");
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(h200_file()).unwrap());
    std::fs::write(&profile, bytes).unwrap();
    let c = cli(&[
        plain.to_str().unwrap(),
        "--profile",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(c.code.as_ref().ok(), Some(&1), "{}", c.err);
}

#[test]
fn a_fail_verdict_is_never_hidden_by_an_output_error() {
    let dir = common::scratch("roofline-exit-codes");
    let fail = write_run("exit-fail.json", &run_of(verdict_records()));
    let pass = write_run("exit-pass.json", &run_of(verdict_records()[..2].to_vec()));
    // A directory where the chart should go: the chart cannot be written.
    let unwritable = dir.clone();
    let svg = dir.join("chart.svg");
    let h200 = h200_file();
    let profile = ["--profile".as_ref(), arg(&h200)];
    let with = |records: &PathBuf, extra: &[&std::ffi::OsStr]| {
        let mut args = vec![arg(records)];
        args.extend(profile);
        args.extend(extra);
        roofline(&args, 60)
    };
    let cases: [(&PathBuf, Vec<&std::ffi::OsStr>, i32); 4] = [
        (&pass, vec!["--svg".as_ref(), arg(&svg)], 0),
        (&fail, vec!["--svg".as_ref(), arg(&svg)], 1),
        (&pass, vec!["--svg".as_ref(), arg(&unwritable)], 2),
        (&fail, vec!["--svg".as_ref(), arg(&unwritable)], 3),
    ];
    for (records, extra, code) in cases {
        let done = with(records, &extra);
        assert_eq!(done.code(), code, "{extra:?}: {done:?}");
        // Whatever else failed, the report is out and each problem is said.
        assert!(
            done.stdout.starts_with("# Roofline report"),
            "{}",
            done.stdout
        );
        assert_eq!(
            done.stderr.contains("record(s) fail"),
            code & 1 == 1,
            "{}",
            done.stderr
        );
        assert_eq!(
            done.stderr.contains("is a directory, not a regular file"),
            code & 2 == 2,
            "{}",
            done.stderr
        );
    }
    // stdout unwritable (a full device): the same rule.
    let mut command = common::tool("roofline");
    command.arg(&fail).args(profile);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let done = common::run_with_stdout(&mut command, full, std::time::Duration::from_secs(60));
    assert_eq!(done.code(), 3, "{done:?}");
    assert!(
        done.stderr.contains("stdout: No space left on device"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_closed_stdout_ends_the_tool_quietly() {
    let fail = write_run("pipe-fail.json", &run_of(verdict_records()));
    let pass = write_run("pipe-pass.json", &run_of(verdict_records()[..2].to_vec()));
    let cases: [(&[&std::ffi::OsStr], i32); 5] = [
        (&["--help".as_ref()], 0),
        (&[arg(&pass)], 0),
        (&[arg(&pass), "--format".as_ref(), "json".as_ref()], 0),
        (&[arg(&pass), "--format".as_ref(), "csv".as_ref()], 0),
        // The reader leaving is no error, and hides no fail.
        (&[arg(&fail), "--profile".as_ref(), "h200".as_ref()], 1),
    ];
    for (args, code) in cases {
        let mut command = common::tool("roofline");
        command.args(args);
        let done = common::run_with_stdout(
            &mut command,
            common::closed_pipe(),
            std::time::Duration::from_secs(60),
        );
        assert_eq!(done.code(), code, "{args:?}: {done:?}");
        assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
        assert!(!done.stderr.contains("Broken pipe"), "{}", done.stderr);
        assert_eq!(
            done.stderr.is_empty(),
            code == 0,
            "{args:?}: {}",
            done.stderr
        );
    }
    // calibrate's usage too (the rest of it needs a GPU).
    let mut command = common::tool("calibrate");
    command.arg("--help");
    let done = common::run_with_stdout(
        &mut command,
        common::closed_pipe(),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.stderr.is_empty(), "{}", done.stderr);
}

#[test]
fn a_failed_chart_write_leaves_the_previous_chart_byte_identical() {
    let dir = common::scratch("roofline-full-disk");
    let records = write_run("chart-records.json", &run_of(verdict_records()));
    let svg = dir.join("chart.svg");
    let previous = b"<svg>the previous chart</svg>\n";
    std::fs::write(&svg, previous).unwrap();
    let mut command = common::tool("roofline");
    command
        .arg(&records)
        .args(["--profile", "h200", "--svg"])
        .arg(&svg);
    // 1 block (512 B or 1 KiB): a chart is tens of kilobytes.
    let done = common::run_within(
        &mut common::with_file_size_limit(1, &command),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(done.code(), 3, "{done:?}");
    assert!(done.stderr.contains("File too large"), "{}", done.stderr);
    assert_eq!(std::fs::read(&svg).unwrap(), previous);
    assert_eq!(
        common::names(&dir),
        ["chart.svg"],
        "a temporary file was left"
    );
}

#[test]
fn a_partial_run_is_reported_as_partial() {
    let mut run = run_of(verdict_records()[..2].to_vec());
    run.meta = run
        .meta
        .with_partial(Partial::new("interrupted by SIGINT after 2 of 9 rows", 9));
    let path = write_run("partial.json", &run);
    let md = cli(&[path.to_str().unwrap(), "--profile", "h200"]);
    assert_eq!(md.code.as_ref().ok(), Some(&0), "{}", md.err);
    let said = format!(
        "{} is a partial run: interrupted by SIGINT after 2 of 9 rows; 2 of the 9 planned rows \
         are in the file",
        path.display()
    );
    assert!(md.err.contains(&said), "{}", md.err);
    assert!(
        md.out.contains("**Partial run: interrupted by SIGINT after 2 of 9 rows; 2 of the 9 planned rows are in the file**"),
        "{}",
        md.out
    );
    let json = cli(&[path.to_str().unwrap(), "--format", "json"]);
    let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(value["meta"]["partial"]["planned_rows"], 9);
    let csv = cli(&[path.to_str().unwrap(), "--format", "csv"]);
    assert!(csv.err.contains(&said), "{}", csv.err);
    // A complete run says nothing of the kind.
    let complete = write_run("complete.json", &run_of(verdict_records()[..2].to_vec()));
    let c = cli(&[complete.to_str().unwrap()]);
    assert!(
        !c.err.contains("partial") && !c.out.contains("Partial"),
        "{}",
        c.err
    );
}

#[test]
fn the_json_report_of_many_rows_is_complete_and_valid() {
    // Many rows, each its own workload; not a timing test (performance is measured, not
    // asserted: see the records_synth example).
    let n = 20_000;
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let ms = 0.2 + (i % 7) as f64 * 0.1;
            timed("copy", &format!("w{i}"), GB / 4, GB, "cuda_core.fp32", ms)
        })
        .collect();
    let path = write_run("many.json", &run_of(records));
    let json = cli(&[
        path.to_str().unwrap(),
        "--format",
        "json",
        "--compare",
        path.to_str().unwrap(),
    ]);
    assert_eq!(json.code.as_ref().ok(), Some(&1), "{}", json.err);
    let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    let rows = value["rows"].as_array().unwrap();
    assert_eq!(rows.len(), n);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["workload"], format!("w{i}"));
    }
    assert_eq!(value["summary"]["rows"], n);
    assert_eq!(value["comparison"]["rows"].as_array().unwrap().len(), n);
    assert!(json.out.ends_with("}\n"));
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let records = write_run("same-records.json", &run_of(verdict_records()));
    let other = write_run("same-other.json", &run_of(verdict_records()));
    let torch = write_run("same-torch.json", &run_of(verdict_records()));
    let before = std::fs::read(&records).unwrap();
    let profile = tmp("same-profile.yaml");
    std::fs::copy(h200_file(), &profile).unwrap();
    let (r, o, t, p) = (
        records.to_str().unwrap(),
        other.to_str().unwrap(),
        torch.to_str().unwrap(),
        profile.to_str().unwrap(),
    );
    let cases: [(&[&str], &str); 5] = [
        (&[r, "--html", r], "--html"),
        (&[r, "--svg", r], "--svg"),
        (&[r, "--compare", o, "--svg", o], "compared run's file"),
        (&[r, "--torch", t, "--html", t], "PyTorch records file"),
        (&[r, "--profile", p, "--svg", p], "profile file"),
    ];
    for (args, expected) in cases {
        let c = cli(args);
        let text = error_text(&c);
        assert!(
            matches!(c.code, Err(CliError::Usage(_))),
            "{args:?}: {text}"
        );
        assert!(text.contains(expected), "{args:?}: {text}");
        assert!(
            text.contains("would replace that input"),
            "{args:?}: {text}"
        );
    }
    assert_eq!(std::fs::read(&records).unwrap(), before, "the records kept");
    assert_eq!(
        std::fs::read(&profile).unwrap(),
        std::fs::read(h200_file()).unwrap()
    );
}

#[test]
fn a_profile_with_an_unphysical_rate_is_refused_and_any_chart_is_finite() {
    let records = write_run("extreme-records.json", &run_of(verdict_records()));
    let svg = tmp("extreme.svg");
    // Each made the chart loop ~2³¹ times once; now the profile is refused at once.
    let text = std::fs::read_to_string(h200_file()).unwrap();
    for (from, to) in [
        ("calibration: 0.9380", "calibration: 1e-300"),
        ("theoretical: 4800e9", "theoretical: 6e-295"),
    ] {
        assert!(text.contains(from), "the h200 profile has `{from}`");
        let profile = tmp("extreme-profile.yaml");
        std::fs::write(&profile, text.replacen(from, to, 1)).unwrap();
        let c = cli(&[
            records.to_str().unwrap(),
            "--profile",
            profile.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ]);
        let err = error_text(&c);
        assert!(err.contains("physical range"), "{to}: {err}");
    }
    // Records whose points are extreme (a time of 1e-300 ms, an intensity of 2⁶⁴) chart
    // within bounds: the off-scale one is listed as not plotted.
    let mut extreme = verdict_records();
    extreme.push(timed("tiny_time", "w", 1, 1, "hbm", 1e-300));
    extreme.push(timed(
        "huge_intensity",
        "w",
        u64::MAX,
        1,
        "cuda_core.fp32",
        1.0,
    ));
    let records = write_run("extreme-points.json", &run_of(extreme));
    let c = cli(&[
        records.to_str().unwrap(),
        "--profile",
        "h200",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(c.code.is_ok(), "{}", c.err);
    let chart = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&chart).expect("the chart is well-formed XML");
    assert!(
        chart.contains("1 outside the chart&apos;s range"),
        "{}",
        c.err
    );
}

#[test]
fn a_large_comparison_shows_its_progress_a_line_per_tenth() {
    let template = verdict_records().remove(0);
    let many: Vec<Record> = (0..2500)
        .map(|i| {
            let mut r = template.clone();
            r.workload = format!("w{i}");
            r
        })
        .collect();
    let records = write_run("progress-records.json", &run_of(many));
    let c = cli(&[
        records.to_str().unwrap(),
        "--compare",
        records.to_str().unwrap(),
        "--profile",
        "h200",
    ]);
    assert!(c.code.is_ok(), "{}", c.err);
    let lines: Vec<&str> = c
        .err
        .lines()
        .filter(|l| l.starts_with("roofline: comparing: "))
        .collect();
    assert_eq!(lines.len(), 10, "{}", c.err);
    assert_eq!(lines[9], "roofline: comparing: 2500 of 2500 rows");
    // A small comparison stays quiet.
    let small = write_run("progress-small.json", &run_of(verdict_records()));
    let s = small.to_str().unwrap();
    let c = cli(&[s, "--compare", s, "--profile", "h200"]);
    assert!(!c.err.contains("comparing:"), "{}", c.err);
}

// ---- strings from the records are data, never code ----

/// A raw character that a terminal, an XML parser or a reader's eyes would take for something
/// else: a control character other than the line feed and the tab (ESC, BEL, CR, C1 CSI), a bidi
/// control, U+2028/U+2029, U+FFFE or U+FFFF.
fn raw_hidden(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(
                c,
                '\u{61c}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{fffe}'
                    | '\u{ffff}'
            )
    })
}

/// The fields of an RFC 4180 CSV text, row by row (quoted fields may hold commas, quotes and
/// line breaks).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

/// Records whose every string carries a payload: terminal sequences (a screen clear, an OSC 8
/// link, an OSC 52 clipboard write, a C1 CSI), bidi controls, XML's forbidden characters, CSV
/// formulas, HTML and a carriage return in the middle of a markdown cell.
fn hostile_run(median_scale: f64) -> Run {
    let device = DeviceInfo::new("NVIDIA H200 \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{9b}31m\u{202e}")
        .with_driver("580\u{1b}[2J")
        .with_l2_bytes(H200_L2);
    let timed = |op: &str, family: &str, workload: &str| {
        Record::new(op, family, workload, "bfloat16", device.clone())
            .with_roofline(Some(GB / 4), Some(GB))
            .with_roof("cuda_core.fp32")
            .with_timing(
                "cuda_events",
                TimingStats::new(
                    100,
                    0.5 * median_scale,
                    0.49 * median_scale,
                    0.51 * median_scale,
                ),
            )
    };
    let records = vec![
        timed(
            "=HYPERLINK(\"http://x\",\"y\")\u{1b}[2J",
            "fam\u{1}\u{8}\u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{7}\u{fffe}\u{ffff}",
            "<img src=x onerror=alert(1)>\rsplit `code` | cell",
        )
        .with_impl("@SUM(A1:A2)"),
        timed("+1", "fam\u{2066}\u{202e}lanigiro", "-cmd").with_impl("\ttorch"),
        Record::new("copy", "fam", "skipped", "bfloat16", device.clone())
            .with_skip("too big\u{1b}[2J\u{9b}\u{200f}\r\n=1+1"),
    ];
    let meta =
        RunMeta::new("0123abc\u{1b}[31m", "2026-11-30T04:00:00Z", "0.1.0", device).with_partial(
            Partial::new("interrupted\u{1b}[2J by \u{9b}\u{202e}SIGINT", 9),
        );
    Run::new(meta, records)
}

#[test]
fn no_string_from_the_records_reaches_a_terminal_spreadsheet_or_renderer_as_code() {
    let run = hostile_run(1.0);
    let path = write_run("hostile.json", &run);
    let path = path.to_str().unwrap();
    let clean = |what: &str, c: &Cli| {
        assert_eq!(
            raw_hidden(&c.out),
            None,
            "{what}: raw in stdout:\n{:?}",
            c.out
        );
        assert_eq!(
            raw_hidden(&c.err),
            None,
            "{what}: raw in stderr:\n{:?}",
            c.err
        );
    };

    // Markdown: the payloads shown, escaped; no HTML; a row per record, each one line.
    let md = cli(&[path, "--profile", "h200"]);
    assert!(md.code.is_ok(), "{}", md.err);
    clean("md", &md);
    assert!(
        md.err
            .contains("is a partial run: interrupted\\u{1b}[2J by \\u{9b}\\u{202e}SIGINT")
    );
    assert!(
        !md.out.contains("<img") && !md.out.contains('\r'),
        "{}",
        md.out
    );
    assert!(
        md.out
            .contains("&lt;img src=x onerror=alert(1)&gt; split &#96;code&#96; \\| cell")
    );
    assert!(
        md.out
            .contains("NVIDIA H200 \\u{1b}\\]52;c;cm0gLXJmIH4=\\u{7}\\u{9b}31m\\u{202e}")
    );
    let rows: Vec<&str> = md
        .out
        .lines()
        .skip_while(|l| !l.starts_with("| op |"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    // The skipped row is listed after the table.
    assert_eq!(rows.len(), 2 + run.records.len() - 1, "{}", md.out);
    // The cell separators of a row as GFM finds them: each `|` not escaped by a backslash.
    let separators = |row: &str| {
        let mut chars = row.chars();
        let mut n = 0;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '|' => n += 1,
                _ => {}
            }
        }
        n
    };
    for row in &rows {
        // Every row has the header's cells: no `|` from a field split one.
        assert_eq!(separators(row), separators(rows[0]), "{row}");
    }

    // CSV: a formula's first character neutralised in text cells, numbers left numbers.
    let csv = cli(&[path, "--profile", "h200", "--format", "csv"]);
    assert!(csv.code.is_ok(), "{}", csv.err);
    clean("csv", &csv);
    let table = csv_rows(&csv.out);
    assert_eq!(table.len(), 1 + run.records.len(), "{}", csv.out);
    let at = |row: usize, column: &str| {
        let i = table[0].iter().position(|h| h == column).unwrap();
        table[row][i].as_str()
    };
    assert_eq!(at(1, "op"), "'=HYPERLINK(\"http://x\",\"y\")\\u{1b}[2J");
    assert_eq!(at(1, "impl"), "'@SUM(A1:A2)");
    assert_eq!(at(2, "op"), "'+1");
    assert_eq!(at(2, "workload"), "'-cmd");
    assert_eq!(at(2, "impl"), "'\ttorch");
    // CSV quoting carries the line feed inside a cell; the carriage return is shown escaped.
    assert_eq!(
        at(3, "reason"),
        "not timed: too big\\u{1b}[2J\\u{9b}\\u{200f}\\u{d}\n=1+1"
    );
    assert_eq!(at(1, "flops"), (GB / 4).to_string());
    assert_eq!(at(1, "median_ms"), "0.5");
    for row in &table[1..] {
        for cell in row {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "{cell:?} would be evaluated"
            );
        }
    }

    // JSON is data: every value exactly as in the file, the hidden characters as JSON escapes.
    let json = cli(&[path, "--profile", "h200", "--format", "json"]);
    assert!(json.code.is_ok(), "{}", json.err);
    clean("json", &json);
    let value: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    for (i, record) in run.records.iter().enumerate() {
        assert_eq!(value["rows"][i]["op"], record.op.as_str());
        assert_eq!(value["rows"][i]["family"], record.family.as_str());
        assert_eq!(value["rows"][i]["workload"], record.workload.as_str());
        assert_eq!(value["rows"][i]["impl"], record.implementation.as_str());
    }
    assert_eq!(
        value["meta"]["device"]["name"],
        run.meta.device.name.as_str()
    );
    assert_eq!(
        value["meta"]["partial"]["reason"],
        run.meta.partial.as_ref().unwrap().reason.as_str()
    );

    // The chart parses as XML, shows the payloads escaped and holds none raw; the page escapes
    // its HTML as before.
    let svg = tmp("hostile.svg");
    let html = tmp("hostile.html");
    let files = cli(&[
        path,
        "--profile",
        "h200",
        "--svg",
        svg.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(files.code.is_ok(), "{}", files.err);
    clean("svg/html", &files);
    assert!(
        files.err.contains("(2 of 3 records plotted)"),
        "{}",
        files.err
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(raw_hidden(&svg), None, "raw in the SVG");
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}"));
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    let legend =
        "fam\\u{1}\\u{8}\\u{1b}]8;;http://x\\u{7}link\\u{1b}]8;;\\u{7}\\u{fffe}\\u{ffff}: 1";
    assert!(texts.iter().any(|t| t.trim() == legend), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.trim() == "fam\\u{2066}\\u{202e}lanigiro: 1")
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(raw_hidden(&page), None, "raw in the page");
    assert!(!page.contains("<img"));
    assert!(page.contains("<td>&lt;img src=x onerror=alert(1)&gt;\\u{d}split `code` | cell</td>"));

    // A comparison that finds regressions names the rows on stderr, escaped.
    let slower = write_run("hostile-fast.json", &hostile_run(0.5));
    let gate = cli(&[
        path,
        "--profile",
        "h200",
        "--compare",
        slower.to_str().unwrap(),
        "--fail-on-regression",
        "5",
    ]);
    assert_eq!(gate.code.as_ref().ok(), Some(&4), "{}", gate.err);
    clean("compare", &gate);
    assert!(
        gate.err.contains(
            "regression: =HYPERLINK(\"http://x\",\"y\")\\u{1b}[2J/<img src=x onerror=alert(1)>\\u{d}split"
        ),
        "{}",
        gate.err
    );
    assert!(
        gate.out.contains("Current run `0123abc\\u{1b}\\[31m`"),
        "{}",
        gate.out
    );

    // An error that quotes the file: escaped too.
    let mut bad = hostile_run(1.0);
    bad.records[0].roof = Some(" ".into());
    // Written past `Run::save`, which checks a run as the tool does.
    let bad_path = tmp("hostile-bad.json");
    std::fs::write(&bad_path, serde_json::to_string(&bad).unwrap()).unwrap();
    let bad = bad_path;
    let refused = cli(&[bad.to_str().unwrap()]);
    let message = error_text(&refused);
    assert!(message.contains("=HYPERLINK"), "{message}");
    assert_eq!(raw_hidden(&message), None, "{message:?}");
}

/// An emulated run's kernel ledger, row by row: a pipes table on its own, joined onto a GPU run's
/// rows with `--ledger`, and the kernel ledger document with `--kernels-md`; bad ledgers in a
/// records file are refused naming the field.
#[test]
fn cli_prices_kernel_ledgers_and_writes_the_kernel_document() {
    use tileops_bench::records::{LaunchLedger, Ledger};

    let emulated = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)");
    let ledger = Ledger {
        method: "test".into(),
        launches: vec![LaunchLedger {
            entry: "relu_bf16".into(),
            grid: [1024, 1, 1],
            block: [256, 1, 1],
            dynamic_smem: 0,
            ran: false,
            thread_instructions: 6.0 * f64::from(1u32 << 23),
            mufu_ops: 0.0,
            tensor_ops: 0.0,
            instr_per_elem: 6.0,
            mufu_per_elem: 0.0,
            registers: 38,
            ctas_per_sm: 6,
            traffic: None,
            ..Default::default()
        }],
        written_bytes: None,
    };
    let emu_record = Record::new("relu", "elementwise", "w", "bfloat16", emulated.clone())
        .with_roofline(Some(1 << 23), Some(4 << 23))
        .with_roof("cuda_core.fp32")
        .with_emulated_run()
        .with_ledger(ledger.clone());
    let emu_run = Run::new(
        RunMeta::new("abc", "2026-12-04T00:00:00Z", "0.1.0", emulated),
        vec![emu_record.clone()],
    );
    let emu_path = write_run("ledger-emu.json", &emu_run);
    let emu = emu_path.to_str().unwrap();

    let alone = cli(&[emu]);
    assert_eq!(alone.code.as_ref().ok(), Some(&0), "{}", alone.err);
    assert!(
        alone
            .out
            .contains("## Pipes (from the ledger, not measured)"),
        "{}",
        alone.out
    );
    assert!(
        alone.out.contains("| relu | w | bfloat16 | relu_bf16 |"),
        "{}",
        alone.out
    );
    assert!(
        alone
            .err
            .contains("1 record(s) carry a kernel ledger, 1 priced"),
        "{}",
        alone.err
    );

    let gpu = timed("relu", "w", 1 << 23, 4 << 23, "cuda_core.fp32", 0.01);
    let gpu_path = write_run("ledger-gpu.json", &run_of(vec![gpu]));
    let joined = cli(&[
        gpu_path.to_str().unwrap(),
        "--ledger",
        emu,
        "--format",
        "json",
    ]);
    assert_eq!(joined.code.as_ref().ok(), Some(&0), "{}", joined.err);
    let json: serde_json::Value = serde_json::from_str(&joined.out).unwrap();
    assert_eq!(json["rows"][0]["pipes"]["limiter"], "memory");
    assert!(json["rows"][0]["efficiency"].as_f64().is_some());

    let doc = tmp("kernels.md");
    let _ = std::fs::remove_file(&doc);
    let needs_profile = cli(&[emu, "--kernels-md", doc.to_str().unwrap()]);
    assert!(
        error_text(&needs_profile).contains("--profile"),
        "{}",
        error_text(&needs_profile)
    );
    let wrote = cli(&[
        emu,
        "--profile",
        "h200",
        "--kernels-md",
        doc.to_str().unwrap(),
    ]);
    assert_eq!(wrote.code.as_ref().ok(), Some(&0), "{}", wrote.err);
    let text = std::fs::read_to_string(&doc).unwrap();
    assert!(
        text.starts_with("# Kernels: resources and ledgers"),
        "{text}"
    );
    assert!(
        text.contains("| relu/w/bfloat16 | relu_bf16 | 1024×1×1 × 256 | 6.00 |"),
        "{text}"
    );

    // A ledger that cannot be right is refused, naming the field.
    let mut bad = emu_record;
    bad.ledger.as_mut().unwrap().launches[0].grid = [0, 1, 1];
    let bad_path = tmp("ledger-bad.json");
    let mut bad_run = emu_run;
    bad_run.records = vec![bad];
    std::fs::write(&bad_path, serde_json::to_string(&bad_run).unwrap()).unwrap();
    let refused = cli(&[bad_path.to_str().unwrap()]);
    let message = error_text(&refused);
    assert!(
        message.contains("ledger.launches") && message.contains("zero dimension"),
        "{message}"
    );
}
