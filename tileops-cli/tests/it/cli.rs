//! The `tileops` binary from the outside, as a user runs it: help, version, clap's suggestions and
//! ours for op names and dtypes, `--filter` and `--dtype`, the exit statuses, the regression gate
//! on two fixed runs (20% slower with tight samples fails it, an A/A pair passes), named baselines,
//! and `tileops manifest check`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta};

/// The built binary, on the CPU backend whatever the machine.
fn tileops(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tileops"))
        .args(args)
        .env_remove("TILEOPS_DEVICE")
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("the tileops binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit code, stdout, stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = tileops(args);
    (
        out.status.code().expect("not killed by a signal"),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tileops-cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn help_and_version() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for command in ["bench", "roofline", "calibrate", "manifest"] {
        assert!(out.contains(command), "{command}: {out}");
    }
    let (code, out, _) = run(&["bench", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--filter <REGEX>",
        "--dtype <DTYPE>",
        "--op <NAME>",
        "--color <WHEN>",
        "--verbose",
        "Exit status",
    ] {
        assert!(out.contains(flag), "{flag}: {out}");
    }
    let (code, out, _) = run(&["roofline", "--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--fail-on-regression <PCT>",
        "--save-baseline <NAME>",
        "--baseline <NAME>",
        "--torch <RECORDS.json>",
        "4 when",
    ] {
        assert!(out.contains(flag), "{flag}: {out}");
    }
    let version = format!("{}\n", env!("CARGO_PKG_VERSION"));
    let (code, out, _) = run(&["--version"]);
    assert_eq!((code, out), (0, format!("tileops {version}")));
    let (code, out, _) = run(&["bench", "--version"]);
    assert_eq!(code, 0);
    assert!(out.ends_with(&version), "{out}");
}

#[test]
fn mistyped_commands_flags_ops_and_dtypes_get_suggestions() {
    let (code, _, err) = run(&["bnch"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("a similar subcommand exists: 'bench'"),
        "{err}"
    );
    let (code, _, err) = run(&["bench", "--cpu-max-byte", "1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("a similar argument exists: '--cpu-max-bytes'"),
        "{err}"
    );
    let (code, _, err) = run(&["roofline", "x.json", "--fail-on-regresion", "5"]);
    assert_eq!(code, 2);
    assert!(err.contains("'--fail-on-regression'"), "{err}");
    let (code, out, err) = run(&["bench", "--list", "--op", "sofmax"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("no registered op is named `sofmax`; did you mean `softmax`?"),
        "{err}"
    );
    let (code, _, err) = run(&["bench", "--list", "--family", "reductoin"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `reduction`?"), "{err}");
    let (code, _, err) = run(&["bench", "--list", "--dtype", "bfloat61"]);
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `bfloat16`?"), "{err}");
    // Far from every name: no suggestion, the list.
    let (code, _, err) = run(&["bench", "--list", "--op", "zzzz"]);
    assert_eq!(code, 2);
    assert!(
        !err.contains("did you mean") && err.contains("registered: "),
        "{err}"
    );
}

#[test]
fn filter_and_dtype_select_cases_over_op_workload_dtype() {
    let (code, all, _) = run(&["bench", "--list"]);
    assert_eq!(code, 0);
    let (code, out, err) = run(&["bench", "--list", "--filter", "^softmax/decode"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("softmax (reduction, "), "{out}");
    assert!(
        !out.contains("log_softmax") && !out.contains("attn-weights"),
        "{out}"
    );
    assert!(
        out.contains("decode-attn-4k") && out.len() < all.len(),
        "{out}"
    );
    // The dtype is the third part: only float16 rows of softmax.
    let (code, out, _) = run(&["bench", "--list", "--filter", "^softmax/.*/float16$"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("float16") && !out.contains("bfloat16") && !out.contains("float32"),
        "{out}"
    );
    let (code, same, _) = run(&["bench", "--list", "--op", "softmax", "--dtype", "float16"]);
    assert_eq!((code, same), (0, out));
    // Nothing left: an error naming the filter, status 2.
    let (code, _, err) = run(&["bench", "--list", "--filter", "^nothing/"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no case matches --filter `^nothing/`"),
        "{err}"
    );
    let (code, _, err) = run(&["bench", "--list", "--filter", "("]);
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid value '(' for '--filter <REGEX>'"),
        "{err}"
    );
}

#[test]
fn a_filtered_cpu_run_writes_its_rows_and_says_where() {
    let dir = scratch("filtered-run");
    let out = dir.join("run.json");
    let (code, table, err) = run(&[
        "bench",
        "--cpu",
        "--filter",
        "^softmax/decode-attn-4k/float16$",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let records = Run::load(&out).unwrap();
    assert_eq!(records.records.len(), 1);
    let record = &records.records[0];
    assert_eq!(
        (record.op.as_str(), record.dtype.as_str()),
        ("softmax", "float16")
    );
    assert!(
        record.skipped.is_none() && !record.samples_ms.is_empty(),
        "{record:?}"
    );
    // Scaled units: a CPU reference row reads in ms and MB/s or GB/s, never a long fraction.
    assert!(table.contains(" ms ") && table.contains("B/s"), "{table}");
    assert!(err.contains(&format!("wrote {}", out.display())), "{err}");
    assert!(err.contains("next: tileops roofline "), "{err}");
    // An unwritable records path: status 1 before any row.
    let blocker = dir.join("file");
    std::fs::write(&blocker, "x").unwrap();
    let bad = blocker.join("run.json");
    let (code, table, err) = run(&[
        "bench",
        "--cpu",
        "--op",
        "softmax",
        "--out",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(table.is_empty() && err.contains("nothing was run"), "{err}");
}

/// A run of one timed row whose samples are `samples`.
fn run_with_samples(samples: &[f64]) -> Run {
    let device = DeviceInfo::new("NVIDIA H200");
    let record = Record::new(
        "softmax",
        "reduction",
        "decode-attn-4k",
        "bfloat16",
        device.clone(),
    )
    .with_roofline(Some(5 * 32 * 4096), Some(2 * 32 * 4096 * 2))
    .with_roof("cuda_core.fp32")
    .with_samples("cuda_events+l2_flush+spin_hold", samples)
    .unwrap();
    Run::new(
        RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", device),
        vec![record],
    )
}

/// 200 tight samples around `median` ms (within ±1%), in an order set by `stride`: two strides
/// give two runs of the same distribution, an A/A pair.
fn tight_samples(median: f64, stride: usize) -> Vec<f64> {
    (0..200)
        .map(|i| median * (1.0 + 0.01 * (((i * stride) % 201) as f64 / 100.0 - 1.0)))
        .collect()
}

fn save(dir: &Path, name: &str, run: &Run) -> String {
    let path = dir.join(name);
    run.save(&path).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn the_regression_gate_fails_a_20_percent_slowdown_and_passes_an_a_a_pair() {
    let dir = scratch("gate");
    let base = save(
        &dir,
        "base.json",
        &run_with_samples(&tight_samples(0.010, 7)),
    );
    let again = save(
        &dir,
        "again.json",
        &run_with_samples(&tight_samples(0.010, 13)),
    );
    let slower = save(
        &dir,
        "slower.json",
        &run_with_samples(&tight_samples(0.012, 11)),
    );

    // 20% slower with tight samples: the interval is well above 1.10, the gate fails with 4.
    let (code, out, err) = run(&[
        "roofline",
        &slower,
        "--compare",
        &base,
        "--fail-on-regression",
        "10",
    ]);
    assert_eq!(code, 4, "{err}\n{out}");
    assert!(
        err.contains("regression: softmax/decode-attn-4k/bfloat16"),
        "{err}"
    );
    assert!(
        err.contains("1 of 1 compared rows slower beyond it"),
        "{err}"
    );
    assert!(out.contains("0 faster, 1 slower, 0 same"), "{out}");
    // A threshold above the slowdown passes; so does the same comparison without the gate.
    let (code, _, err) = run(&[
        "roofline",
        &slower,
        "--compare",
        &base,
        "--fail-on-regression",
        "25",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(&["roofline", &slower, "--compare", &base]);
    assert_eq!(code, 0);

    // A/A: two runs of one distribution, even a 1% gate passes, and the call is `same`.
    let (code, out, err) = run(&[
        "roofline",
        &again,
        "--compare",
        &base,
        "--fail-on-regression",
        "1",
    ]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.contains("0 faster, 0 slower, 1 same"), "{out}");

    // The interval is in the CSV, and it is the seeded one: the same files give the same bytes.
    let (_, csv, _) = run(&["roofline", &slower, "--compare", &base, "--format", "csv"]);
    let (_, csv_again, _) = run(&["roofline", &slower, "--compare", &base, "--format", "csv"]);
    assert_eq!(csv, csv_again);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let cell = |name: &str| -> f64 {
        row[header.iter().position(|h| *h == name).unwrap()]
            .parse()
            .unwrap()
    };
    assert!(
        cell("ratio_low") > 1.15 && cell("ratio_high") < 1.25,
        "{csv}"
    );

    // A gate with nothing to compare is a usage error.
    let (code, _, err) = run(&["roofline", &slower, "--fail-on-regression", "10"]);
    assert_eq!(code, 2);
    assert!(err.contains("needs a run to compare with"), "{err}");
    // A fail verdict and a regression add up: 1 + 4.
    let impossible = save(
        &dir,
        "impossible.json",
        &run_with_samples(&tight_samples(0.00002, 7)),
    );
    let quick = save(
        &dir,
        "quick.json",
        &run_with_samples(&tight_samples(0.000015, 7)),
    );
    let (code, _, err) = run(&[
        "roofline",
        &impossible,
        "--compare",
        &quick,
        "--fail-on-regression",
        "10",
    ]);
    assert_eq!(code, 5, "{err}");
}

#[test]
fn named_baselines_are_saved_under_the_target_directory_and_compared_by_name() {
    let dir = scratch("baselines");
    let base = save(
        &dir,
        "base.json",
        &run_with_samples(&tight_samples(0.010, 7)),
    );
    let slower = save(
        &dir,
        "slower.json",
        &run_with_samples(&tight_samples(0.012, 11)),
    );
    let target = dir.join("target");
    let with_target = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tileops"))
            .args(args)
            .env("CARGO_TARGET_DIR", &target)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            text(&out.stdout),
            text(&out.stderr),
        )
    };
    let (code, _, err) = with_target(&["roofline", &base, "--save-baseline", "main"]);
    assert_eq!(code, 0, "{err}");
    let saved = target.join("tileops/baselines/main.json");
    assert!(
        err.contains(&format!("saved the baseline {}", saved.display())),
        "{err}"
    );
    assert_eq!(Run::load(&saved).unwrap(), Run::load(&base).unwrap());
    let (code, out, err) = with_target(&[
        "roofline",
        &slower,
        "--baseline",
        "main",
        "--fail-on-regression",
        "10",
    ]);
    assert_eq!(code, 4, "{err}");
    assert!(out.contains("## Comparison"), "{out}");
    // A missing baseline names its path; a name that is a path is refused; --compare and
    // --baseline are one or the other.
    let (code, _, err) = with_target(&["roofline", &slower, "--baseline", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("tileops/baselines/nope.json"), "{err}");
    let (code, _, err) = with_target(&["roofline", &slower, "--save-baseline", "../x"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a path"), "{err}");
    let (code, _, err) = with_target(&[
        "roofline",
        &slower,
        "--baseline",
        "main",
        "--compare",
        &base,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn manifest_check_passes_the_shipped_manifest_and_fails_a_broken_one() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tileops/manifest");
    let (code, out, _) = run(&["manifest", "check", shipped.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with(": ok"), "{out}");
    let dir = scratch("manifest");
    let broken = dir.join("ops.yaml");
    std::fs::write(
        &broken,
        "my_op:\n  family: elementwise\n  status: implemented\n  signature:\n    inputs:\n      x: {dtype: \"float32\"}\n    outputs:\n      y: {dtype: \"same_as(x)\"}\n  workloads: []\n  roofline:\n    flops: \"2 * Q\"\n    bytes: \"4\"\n",
    )
    .unwrap();
    let (code, out, _) = run(&["manifest", "check", broken.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("error: "), "{out}");
    let (code, _, err) = run(&["manifest", "check"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn calibrate_checks_its_output_before_measuring() {
    // Once it measured the host for tens of seconds and then failed on the path.
    let start = std::time::Instant::now();
    let (code, out, err) = run(&["calibrate", "--cpu", "--out", "/proc/x.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.starts_with("calibrate: --out /proc/x.yaml: cannot create a file in /proc"),
        "{err}"
    );
    assert!(!err.contains("  "), "nothing measured: {err}");
    println!("refused in {:.2?}", start.elapsed());
    // Nor over the base profile it reads.
    let dir = scratch("calibrate-over-base");
    let base = dir.join("base.yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tileops-bench/profiles/h200.yaml"),
        &base,
    )
    .unwrap();
    let base = base.to_str().unwrap();
    let (code, _, err) = run(&["calibrate", "--base", base, "--out", base]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is the --base profile file"), "{err}");
}

#[test]
fn a_log_states_a_skip_reason_once_then_points_back_to_it() {
    // Five rope prefill rows over the CPU budget (the interleaved one included): stderr is not a
    // terminal here, so the progress is a line per row.
    let dir = scratch("skip-reasons-once");
    let out = dir.join("run.json");
    let (code, _, err) = run(&[
        "bench",
        "--cpu",
        "--op",
        "rope",
        "--filter",
        "prefill",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let skips: Vec<&str> = err.lines().filter(|l| l.contains(": skipped: ")).collect();
    assert_eq!(skips.len(), 5, "{err}");
    let advice = "a GPU run times it";
    assert!(skips[0].contains(advice), "the first in full: {}", skips[0]);
    for line in &skips[1..] {
        assert!(!line.contains(advice), "{line}");
        assert!(line.contains("over the reference budget"), "{line}");
        assert!(line.ends_with("(the rest as in [1/5])"), "{line}");
    }
    // No built-in profile describes a CPU: the way to priced rows is said.
    assert!(
        err.contains("`calibrate --cpu` measures this host"),
        "{err}"
    );
}
