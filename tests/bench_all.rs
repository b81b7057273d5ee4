//! bench_all on the CPU backend, as a downstream user runs it: the CLI writes a records file that
//! loads, with one record per case (timed, or skipped with the reason), and FLOPs and bytes that
//! are exactly what `eval_roofline` of the same planned op returns. With `TILEOPS_EMU_LIB` naming
//! cuda-emu's library directory, also on the emulated device: rows run once, no figure recorded,
//! the roofline report blank, calibrate's kernels checked instead of timed.

// The CLI itself, so that its arguments, table and file are tested too.
#[allow(dead_code)]
#[path = "../examples/bench_all.rs"]
mod bench_all_cli;

use std::path::PathBuf;

use bench_all_cli::CliError;
use tileops::Device;
use tileops::perf::bench::{self, BenchConfig, CpuBudget, Quiet, Selection};
use tileops::perf::records::Run;
use tileops::registry::{self, WorkloadCase};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tileops-bench-all-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cli(args: &[&str]) -> (Result<(), CliError>, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = bench_all_cli::run(&args, &mut out, &mut err);
    (
        result,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[test]
fn softmax_on_the_cpu_gives_one_loadable_record_per_case_priced_by_eval_roofline() {
    let dir = scratch("softmax");
    let out = dir.join("records/softmax.json");
    // A small budget keeps the debug-build test quick: the decode rows are timed, the rest
    // skipped with the reason.
    let (result, table, log) = cli(&[
        "--op",
        "softmax",
        "--cpu",
        "--cpu-max-bytes",
        "600000",
        "--out",
        out.to_str().unwrap(),
    ]);
    result.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let run = Run::load(&out).unwrap_or_else(|e| panic!("{e}"));

    let op = registry::find("softmax").expect("softmax is registered");
    let cases: Vec<WorkloadCase> = op.workloads.iter().flat_map(|w| w.cases()).collect();
    assert_eq!(run.records.len(), cases.len(), "one record per case");
    assert!(
        run.meta.device.name.starts_with("cpu: "),
        "{:?}",
        run.meta.device
    );
    assert!(!run.meta.git_revision.is_empty() && run.meta.date.ends_with('Z'));

    let device = Device::cpu();
    let (mut timed, mut skipped) = (0, 0);
    for (record, case) in run.records.iter().zip(&cases) {
        assert_eq!(
            (record.op.as_str(), record.workload.as_str()),
            ("softmax", case.workload.label)
        );
        assert_eq!(record.dtype, case.dtype.to_string());
        assert_eq!(record.family, op.family);
        assert_eq!(record.implementation, "tileops");
        assert_eq!(record.inputs[0].name, "x");
        let shape: Vec<u64> = case
            .workload
            .shape("x")
            .unwrap()
            .iter()
            .map(|&d| d as u64)
            .collect();
        assert_eq!(record.inputs[0].shape, shape);

        // FLOPs and bytes are eval_roofline's, for the op planned the same way.
        let planned = (op.build)(&device, case).unwrap_or_else(|e| panic!("{e}"));
        let roofline = planned.roofline().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(record.flops, Some(roofline.flops), "{}", case.name());
        assert_eq!(record.bytes, Some(roofline.bytes), "{}", case.name());
        assert_eq!(record.roof.as_deref(), Some(planned.roof().0));

        match &record.skipped {
            Some(reason) => {
                skipped += 1;
                assert!(reason.starts_with("CPU backend: "), "{reason}");
                assert!(
                    roofline.bytes > 600_000,
                    "{}: skipped under budget",
                    case.name()
                );
                assert_eq!((record.samples, record.median_ms), (0, None));
            }
            None => {
                timed += 1;
                assert_eq!(record.timing, bench::CPU_METHOD);
                assert!((10..=200).contains(&record.samples), "{}", record.samples);
                let (p10, median, p90) = (
                    record.p10_ms.unwrap(),
                    record.median_ms.unwrap(),
                    record.p90_ms.unwrap(),
                );
                assert!(0.0 < p10 && p10 <= median && median <= p90);
                assert!(record.noise().is_some_and(|n| n >= 0.0));
            }
        }
    }
    assert!(
        timed >= 1 && skipped >= 1,
        "{timed} timed, {skipped} skipped"
    );

    // The table: a header, a rule and a line per record; no efficiency without a profile.
    assert_eq!(table.lines().count(), 2 + cases.len(), "{table}");
    assert!(table.starts_with("op "), "{table}");
    assert!(
        log.contains("efficiency blank: no built-in profile describes `cpu: "),
        "{log}"
    );
    assert!(log.contains(&format!("wrote {}", out.display())), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_case_is_dropped_when_everything_is_over_the_budget() {
    let cases = bench::select(&Selection::default()).unwrap();
    let config = BenchConfig {
        cpu: CpuBudget {
            max_bytes: 0,
            max_flops: 0,
        },
        ..BenchConfig::default()
    };
    let run = bench::run(&Device::cpu(), &cases, &config, &mut Quiet).unwrap();
    assert_eq!(run.records.len(), cases.len());
    for (record, case) in run.records.iter().zip(&cases) {
        assert_eq!(record.op, case.op.name);
        let reason = record
            .skipped
            .as_deref()
            .unwrap_or_else(|| panic!("{} timed", case.name()));
        assert!(
            reason.starts_with("CPU backend: ") || reason.starts_with("manifest bench_skip_reason"),
            "{}: {reason}",
            case.name()
        );
    }
    // Every registered op is there, and the run is valid as bench_all writes it.
    for op in registry::all() {
        assert!(
            run.records.iter().any(|r| r.op == op.name),
            "{} missing",
            op.name
        );
    }
    run.validate("in memory").unwrap();
}

#[test]
fn list_and_bad_arguments() {
    let (result, listing, _) = cli(&["--list", "--family", "reduction"]);
    result.unwrap();
    assert!(listing.contains("softmax (reduction, "), "{listing}");
    assert!(listing.contains("decode-attn-4k"), "{listing}");
    assert!(!listing.contains("rms_norm"), "{listing}");

    let (result, _, _) = cli(&["--op", "sofmax", "--list"]);
    let err = result.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("registered: "), "{err}");

    for bad in [
        &["--seed", "x"][..],
        &["--out"],
        &["--frobnicate"],
        &["--cpu-max-bytes", "-1"],
    ] {
        let (result, _, _) = cli(bad);
        let err = result.unwrap_err();
        assert!(matches!(err, CliError::Usage(_)), "{bad:?}: {err}");
        assert_eq!(err.exit_code(), 2);
    }
}

#[test]
fn an_unwritable_output_is_an_error_after_the_run() {
    let dir = scratch("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let blocker = dir.join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let (result, _, _) = cli(&[
        "--op",
        "rms_norm",
        "--cpu",
        "--cpu-max-bytes",
        "0",
        "--out",
        blocker.join("records.json").to_str().unwrap(),
    ]);
    let err = result.unwrap_err();
    assert!(matches!(err, CliError::Records(_)), "{err}");
    assert_eq!(err.exit_code(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The variable naming the emulator's library directory (`target/emu/lib`, with libcuda.so.1).
const EMU_LIB: &str = "TILEOPS_EMU_LIB";
/// Set in the child process that runs with the emulator on its library path.
const EMU_CHILD: &str = "TILEOPS_BENCH_ALL_EMU_CHILD";

/// bench_all, the roofline report and calibrate's kernel check on cuda-emu's emulated device.
///
/// Runs only when `TILEOPS_EMU_LIB` names the emulator's library directory (scripts/emu-check.sh
/// sets it); prints `SKIP: ...` otherwise, so plain `cargo test` needs no emulator. The driver is
/// found through `LD_LIBRARY_PATH` when the process starts, so the test runs itself again with the
/// directory in front of it.
#[test]
fn bench_all_on_the_emulated_device_runs_rows_once_and_records_no_figure() {
    let Some(lib) = std::env::var_os(EMU_LIB).filter(|v| !v.is_empty()) else {
        println!("SKIP: {EMU_LIB} is not set (the emulator's lib dir, e.g. target/emu/lib)");
        return;
    };
    if std::env::var_os(EMU_CHILD).is_some() {
        return on_the_emulated_device();
    }
    let mut path = std::ffi::OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let exe = std::env::current_exe().expect("the test executable");
    let output = std::process::Command::new(exe)
        .args([
            "--exact",
            "bench_all_on_the_emulated_device_runs_rows_once_and_records_no_figure",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_LIBRARY_PATH", path)
        .env(EMU_CHILD, "1")
        .env_remove("TILEOPS_DEVICE")
        .output()
        .expect("running the test again with the emulator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "on the emulated device:\n{text}");
    assert!(text.contains("1 passed"), "the child ran nothing:\n{text}");
}

fn on_the_emulated_device() {
    use tileops::perf::calibrate_gpu::{self, CalibrateGpuError, CalibrateOptions};
    use tileops::perf::profile::Profile;
    use tileops::perf::records::{EMULATED_NOTE, EMULATED_TIMING};
    use tileops::perf::report::{BlankReason, ProfileChoice, Report};

    let device = Device::cuda(0)
        .unwrap_or_else(|e| panic!("{EMU_LIB} is set, but no (emulated) CUDA device opens: {e}"));
    assert!(
        device.is_emulated(),
        "{EMU_LIB} is set, but {device} is not cuda-emu's emulated device"
    );

    let dir = scratch("emulated");
    let out = dir.join("records.json");
    // The decode rows (0.5 MB and less) run, the prefill rows are skipped with the reason.
    let (result, table, log) = cli(&[
        "--op",
        "softmax",
        "--op",
        "rms_norm",
        "--emu-max-bytes",
        "600000",
        "--out",
        out.to_str().unwrap(),
    ]);
    result.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(log.contains("is emulated: nothing is timed"), "{log}");
    assert!(log.contains("efficiency blank: emulated device"), "{log}");
    assert!(log.contains("(emulated: "), "{log}");
    assert!(log.contains("0 of them failed to run"), "{log}");
    let run = Run::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.meta.device.name.starts_with("cuda-emu"),
        "{:?}",
        run.meta
    );

    let (mut ran, mut skipped) = (0, 0);
    for record in &run.records {
        // No figure, ever: not a sample, not a time.
        assert_eq!(record.samples, 0, "{}", record.key());
        assert_eq!(
            (record.median_ms, record.p10_ms, record.p90_ms),
            (None, None, None),
            "{}",
            record.key()
        );
        let reason = record.skipped.as_deref().unwrap_or_default();
        if record.timing == EMULATED_TIMING {
            ran += 1;
            assert_eq!(reason, EMULATED_NOTE);
            assert!(
                record.bytes.is_some_and(|b| b <= 600_000),
                "{}",
                record.key()
            );
        } else {
            skipped += 1;
            assert_eq!(record.timing, "none");
            assert!(reason.starts_with("emulated device: "), "{reason}");
            assert!(reason.contains("--emu-max-bytes"), "{reason}");
        }
    }
    assert!(ran >= 4 && skipped >= 4, "{ran} ran, {skipped} skipped");
    assert!(
        table.contains("emulated: ran once for correctness, not timed"),
        "{table}"
    );

    // The roofline report: every row blank, the rows that ran for being emulated.
    let h200 = Profile::builtin("h200").unwrap();
    let builtins = Profile::builtins().unwrap();
    for choice in [
        ProfileChoice::Fixed(&h200),
        ProfileChoice::ByDevice(&builtins),
    ] {
        let report = Report::build(&run, choice);
        assert!(report.rows.iter().all(|r| r.verdict().is_none()));
        assert_eq!(report.summary.blank.get("emulated"), Some(&ran));
        for row in report
            .rows
            .iter()
            .filter(|r| r.blank() == Some(&BlankReason::Emulated))
        {
            assert_eq!(row.reason().as_deref(), Some("emulated device: no timing"));
        }
        assert!(!report.has_fail());
    }

    // calibrate: no profile from an emulator; its kernels are checked instead.
    let err = calibrate_gpu::calibrate(&device, &h200, &CalibrateOptions::quick(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, CalibrateGpuError::Emulated(_)), "{err}");
    let mut lines = Vec::new();
    let passed = calibrate_gpu::check_kernels(&device, &mut |l| lines.push(l.to_owned()))
        .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    assert!(passed.len() >= 12, "{passed:?}");
    for entry in [
        "hbm_copy",
        "hbm_triad",
        "fma_chain_ilp16",
        "fill_uniform_bf16",
    ] {
        assert!(
            passed.iter().any(|l| l.starts_with(entry)),
            "{entry}: {passed:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
