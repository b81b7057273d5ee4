//! bench_all on the CPU backend, as a downstream user runs it: the CLI writes a records file that
//! loads, with one record per case (timed, or skipped with the reason), and FLOPs and bytes that
//! are exactly what `eval_roofline` of the same planned op returns. With `TILEOPS_EMU_LIB` naming
//! cuda-emu's library directory, also on the emulated device: rows run once, no figure recorded,
//! the roofline report blank, calibrate's kernels checked instead of timed.
//!
//! From the outside, the built tool in its own process: an unwritable `--out` fails before any
//! row runs; a full disk (`ulimit -f`) leaves the previous records byte for byte; SIGINT and
//! SIGTERM in mid-run write the finished rows, marked partial, which the roofline tool reports; a
//! closed stdout ends the tool quietly and the records are still written.

use crate::common;

// The CLI itself (the library's, which the example wraps), so that its arguments, table and
// file are tested too.
use tileops_bench::cli::bench as bench_all_cli;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bench_all_cli::CliError;
use tileops::Device;
use tileops::registry::{self, WorkloadCase};
use tileops_bench::bench::{self, BenchConfig, CpuBudget, Quiet, Selection};
use tileops_bench::records::{Run, TimingStats};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tileops-bench-all-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cli(args: &[&str]) -> (Result<u8, CliError>, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = bench_all_cli::run(args, &mut out, &mut err);
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
    assert_eq!(result.unwrap_or_else(|e| panic!("{e}\n{log}")), 0);
    let run = Run::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.meta.partial.is_none(), "a complete run is not partial");

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
                // Every raw sample is kept (at most 200 taken, under the 1000 bound), and they
                // are the statistics' samples.
                assert_eq!(record.samples_ms.len(), record.samples as usize);
                let again = TimingStats::from_samples(&record.samples_ms).unwrap();
                assert_eq!(again.median_ms, median);
            }
        }
    }
    assert!(
        timed >= 1 && skipped >= 1,
        "{timed} timed, {skipped} skipped"
    );

    // The table: a header, a rule and a line per timed record, then one line per kind of skip
    // (here the CPU budget's); no efficiency without a profile.
    assert_eq!(table.lines().count(), 2 + timed + 1, "{table}");
    assert!(table.trim_start().starts_with("op "), "{table}");
    let collapsed = table.lines().last().unwrap();
    assert!(
        collapsed.starts_with(&format!(
            "{skipped} rows skipped: CPU backend: N B per call"
        )),
        "{table}"
    );
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
    let run = bench::run(
        &Device::cpu(),
        tileops_bench::cli::meta::run_meta(&Device::cpu(), std::time::SystemTime::now()),
        &cases,
        &config,
        &mut Quiet,
    )
    .unwrap();
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
    assert_eq!(result.unwrap(), 0);
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
fn an_unwritable_output_is_an_error_before_the_run() {
    let dir = scratch("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let blocker = dir.join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let (result, table, log) = cli(&[
        "--op",
        "rms_norm",
        "--cpu",
        "--cpu-max-bytes",
        "0",
        "--out",
        blocker.join("records.json").to_str().unwrap(),
    ]);
    let err = result.unwrap_err();
    assert!(matches!(err, CliError::Output { .. }), "{err}");
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("nothing was run"), "{err}");
    assert!(table.is_empty() && log.is_empty(), "{table}{log}");
    assert_eq!(std::fs::read(&blocker).unwrap(), b"not a directory");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// bench_all in its own process on the CPU backend.
fn bench_all() -> Command {
    let mut command = common::tool("bench_all");
    command.arg("--cpu");
    command
}

/// A row line of the log (`[1/132] softmax/...`), the sign that a row ran.
fn has_row_line(log: &str) -> bool {
    log.lines().any(|l| l.starts_with('[') && l.contains("] "))
}

#[test]
fn an_unwritable_out_path_fails_at_once_and_runs_no_row() {
    let dir = common::scratch("bench-unwritable");
    std::fs::write(dir.join("file"), "in the way").unwrap();
    let cases: [(PathBuf, &str); 4] = [
        (dir.clone(), "is a directory, not a regular file"),
        (
            PathBuf::from("/proc/x.json"),
            "cannot create a file in /proc",
        ),
        (
            PathBuf::from("/dev/full"),
            "is a character device, not a regular file",
        ),
        (dir.join("file/records.json"), "is a file, not a directory"),
    ];
    for (path, why) in cases {
        // The whole manifest: minutes of rows, were the path checked only at the end.
        let done = common::run_within(
            bench_all().arg("--out").arg(&path),
            Duration::from_secs(120),
        );
        let shown = path.display().to_string();
        assert_eq!(done.code(), 1, "{shown}: {done:?}");
        assert!(
            done.stderr
                .starts_with(&format!("bench: cannot write the records to {shown}: ")),
            "{shown}: {}",
            done.stderr
        );
        assert!(done.stderr.contains(why), "{shown}: {}", done.stderr);
        assert!(done.stderr.contains("nothing was run"), "{}", done.stderr);
        // Failing fast means running nothing: no row line, no table.
        assert!(
            !has_row_line(&done.stderr),
            "{shown}: rows ran:\n{}",
            done.stderr
        );
        assert!(done.stdout.is_empty(), "{shown}: a table:\n{}", done.stdout);
        println!(
            "bench_all --out {shown}: error after {:.1} ms",
            done.elapsed.as_secs_f64() * 1e3
        );
    }
    // Neither the device nor the directory was replaced.
    let full = std::fs::metadata("/dev/full").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &full.file_type()
    ));
    assert_eq!(common::names(&dir), ["file"]);
}

/// A valid records file written by bench_all itself, and its bytes.
fn previous_records(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = dir.join("records.json");
    let done = common::run_within(
        bench_all()
            .args(["--op", "rms_norm", "--cpu-max-bytes", "0", "--out"])
            .arg(&path),
        Duration::from_secs(120),
    );
    assert_eq!(done.code(), 0, "{done:?}");
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn a_full_disk_leaves_the_previous_records_byte_identical() {
    let dir = common::scratch("bench-full-disk");
    let (path, before) = previous_records(&dir);
    assert!(
        before.len() > 4096,
        "{} B: too small to hit the limit",
        before.len()
    );
    // 4 blocks (2 or 4 KiB, by the shell's unit): the probe fits, the records do not.
    let mut run = bench_all();
    run.args(["--op", "softmax", "--cpu-max-bytes", "0", "--out"])
        .arg(&path);
    let done = common::run_within(
        &mut common::with_file_size_limit(4, &run),
        Duration::from_secs(120),
    );
    assert_eq!(done.code(), 1, "{done:?}");
    assert!(done.stderr.contains("File too large"), "{}", done.stderr);
    assert!(has_row_line(&done.stderr), "the rows ran: {}", done.stderr);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the previous file changed"
    );
    assert_eq!(
        common::names(&dir),
        ["records.json"],
        "a temporary file was left"
    );
    Run::load(&path).unwrap_or_else(|e| panic!("{e}"));
}

/// Starts the whole manifest on the CPU, sends `signal` once the first row is done, and checks
/// what it leaves: status 128 + signal, the finished rows written, marked partial, and the
/// roofline tool saying so.
fn interrupted_by(signal: i32, name: &str) {
    let dir = common::scratch(&format!("bench-{name}"));
    let path = dir.join("records.json");
    let mut child = bench_all()
        .arg("--out")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // The tool first says which device it runs on, then the first row line; the manifest has
    // 132 rows, minutes of them in a debug build.
    let next_line = || {
        log.recv_timeout(Duration::from_secs(300))
            .unwrap_or_else(|e| panic!("no line from bench_all: {e}"))
    };
    let device = next_line();
    assert!(device.starts_with("bench: running on cpu"), "{device}");
    let first = next_line();
    assert!(first.starts_with("[1/"), "{first}");
    // SAFETY: `kill` sends a signal to the child started above, which has not been waited for,
    // so the pid is still its own.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {name}");
    let status = common::wait_within(
        &mut child,
        Duration::from_secs(300),
        &Command::new("bench_all"),
    );
    let log = reader.join().unwrap();
    assert_eq!(status.code(), Some(128 + signal), "{log}");
    assert!(
        log.contains(&format!("interrupted by {name} after ")),
        "{log}"
    );
    assert!(log.contains("marked partial in meta"), "{log}");

    let run = Run::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let partial = run.meta.partial.clone().expect("meta.partial");
    assert!(
        partial
            .reason
            .starts_with(&format!("interrupted by {name} after ")),
        "{partial:?}"
    );
    assert_eq!(
        partial.planned_rows,
        bench::select(&Selection::default()).unwrap().len()
    );
    assert!(
        (1..partial.planned_rows).contains(&run.records.len()),
        "{} rows of {}",
        run.records.len(),
        partial.planned_rows
    );
    // Every row that is there is whole: it validated on load, and it is one the log reported.
    let reported = log.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(run.records.len(), reported, "{log}");

    let report = common::run_within(
        common::tool("roofline").arg(&path),
        Duration::from_secs(120),
    );
    assert_eq!(report.code(), 0, "{report:?}");
    assert!(
        report.stderr.contains(&format!(
            "{} is a partial run: interrupted by {name}",
            path.display()
        )),
        "{}",
        report.stderr
    );
    assert!(
        report.stdout.contains("**Partial run: interrupted by "),
        "{}",
        report.stdout
    );
    assert_eq!(common::names(&dir), ["records.json"]);
}

#[test]
fn sigint_in_mid_run_writes_the_finished_rows_marked_partial() {
    interrupted_by(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_in_mid_run_writes_the_finished_rows_marked_partial() {
    interrupted_by(libc::SIGTERM, "SIGTERM");
}

#[test]
fn a_closed_stdout_ends_quietly_and_the_records_are_still_written() {
    let dir = common::scratch("bench-closed-stdout");
    for args in [&["--help"][..], &["--list"]] {
        let done = common::run_with_stdout(
            bench_all().args(args),
            common::closed_pipe(),
            Duration::from_secs(60),
        );
        assert_eq!(done.code(), 0, "{args:?}: {done:?}");
        assert!(done.stderr.is_empty(), "{args:?}: {}", done.stderr);
    }
    let path = dir.join("records.json");
    let done = common::run_with_stdout(
        bench_all()
            .args(["--op", "rms_norm", "--cpu-max-bytes", "0", "--out"])
            .arg(&path),
        common::closed_pipe(),
        Duration::from_secs(120),
    );
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
    assert!(done.stderr.contains("wrote "), "{}", done.stderr);
    // The example's user has a checkout, not necessarily an installed `tileops`: the next step it
    // names is the roofline example.
    let next = format!(
        "next: cargo run --release --example roofline -- {}",
        path.display()
    );
    assert!(done.stderr.contains(&next), "{}", done.stderr);
    let run = Run::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!run.records.is_empty() && run.meta.partial.is_none());
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
    in_an_emulated_child(
        "bench_all::bench_all_on_the_emulated_device_runs_rows_once_and_records_no_figure",
        on_the_emulated_device,
    );
}

/// Runs `body` in a child process of this test binary (test `name`, exactly) with the emulator's
/// library directory on `LD_LIBRARY_PATH`, so that the stand-in driver is the process's
/// `libcuda.so.1`; prints a `SKIP:` line without `TILEOPS_EMU_LIB`.
fn in_an_emulated_child(name: &str, body: fn()) {
    let Some(lib) = std::env::var_os(EMU_LIB).filter(|v| !v.is_empty()) else {
        println!("SKIP: {EMU_LIB} is not set (the emulator's lib dir, e.g. target/emu/lib)");
        return;
    };
    if std::env::var_os(EMU_CHILD).is_some() {
        return body();
    }
    let mut path = std::ffi::OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let exe = std::env::current_exe().expect("the test executable");
    let output = std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
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
    // The child's own SKIP lines and figures, for the log.
    for line in text
        .lines()
        .filter(|l| l.starts_with("SKIP:") || l.starts_with("ledger:"))
    {
        println!("{line}");
    }
}

fn on_the_emulated_device() {
    use tileops_bench::calibrate_gpu::{self, CalibrateGpuError, CalibrateOptions};
    use tileops_bench::profile::Profile;
    use tileops_bench::records::{EMULATED_NOTE, EMULATED_TIMING};
    use tileops_bench::report::{BlankReason, ProfileChoice, Report};

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
        // Every row, run or launched dry, carries its kernel ledger.
        let ledger = record
            .ledger
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no kernel ledger ({reason})", record.key()));
        assert_eq!(
            ledger.all_ran(),
            record.timing == EMULATED_TIMING,
            "{}",
            record.key()
        );
        // A GEMM launches cuBLASLt's kernels: a ledger without launches (a library call).
        assert!(
            ledger.thread_instructions() > 0.0
                || (record.op == "gemm" && ledger.launches.is_empty()),
            "{}",
            record.key()
        );
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
            assert!(
                reason.ends_with("launched dry (shapes only, nothing run) for its kernel ledger"),
                "{reason}"
            );
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
        // ... and every row priced from its ledger against the H200 the emulator models.
        for row in &report.rows {
            let pipes = row
                .pipes
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap_or_else(|e| panic!("{}: {e}", row.key));
            assert!(
                pipes.ceiling() > 0.0 && pipes.ceiling().is_finite(),
                "{}",
                row.key
            );
        }
        assert!(
            report
                .to_markdown()
                .contains("## Pipes (from the ledger, not measured)")
        );
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

/// The backtest's summary (the time model against the one H200 run), for the kernel ledger
/// document: its inputs in `tileops-bench/ledger/backtest/`, the measured records in `results/`.
fn backtest_summary(
    profile: &tileops_bench::profile::Profile,
) -> tileops_bench::ledger::backtest::Summary {
    use tileops_bench::ledger::backtest;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    };
    let run = Run::load(root.join("results/h200-2026-12-04/records.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let launches =
        backtest::parse_launches(&read("tileops-bench/ledger/backtest/launches-7e0417f.tsv"))
            .unwrap_or_else(|e| panic!("{e}"));
    let sass = tileops_bench::ledger::Ledger::from_json(&read(
        "tileops-bench/ledger/backtest/sass_sm90-7e0417f.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let reasons = backtest::parse_reasons(&read("tileops-bench/ledger/backtest/outliers.tsv"))
        .unwrap_or_else(|e| panic!("{e}"));
    let rows = backtest::rows(&run, &launches, &sass, profile).unwrap_or_else(|e| panic!("{e}"));
    backtest::summary(&rows, profile, &reasons).unwrap_or_else(|e| panic!("{e}"))
}

/// The kernel ledger document (`tileops/docs/kernels.md`) and its ceiling gate: every manifest
/// row benched on the emulated device, launched dry (launch shapes only), priced against the H200
/// profile. Fails when the committed document differs from the regenerated one (regenerate with
/// `TILEOPS_LEDGER_UPDATE=1`), and, first, when a row's ceiling dropped below the committed
/// `tileops-bench/ledger/ceilings.txt` (the entry, the figure and the bound in the message).
#[test]
fn bench_all_on_the_emulated_device_writes_the_kernel_ledger() {
    in_an_emulated_child(
        "bench_all::bench_all_on_the_emulated_device_writes_the_kernel_ledger",
        kernel_ledger_on_the_emulated_device,
    );
}

fn kernel_ledger_on_the_emulated_device() {
    use tileops_bench::kernel_doc;
    use tileops_bench::profile::Profile;

    let dir = scratch("ledger");
    let out = dir.join("records.json");
    let (result, _, log) = cli(&[
        "--emu-max-bytes",
        "0",
        "--emu-max-flops",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    result.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let run = Run::load(&out).unwrap_or_else(|e| panic!("{e}"));
    let missing: Vec<String> = run
        .records
        .iter()
        .filter(|r| r.ledger.is_none())
        .map(|r| format!("{}: {}", r.key(), r.skipped.as_deref().unwrap_or_default()))
        .collect();
    assert!(
        missing.is_empty(),
        "rows without a kernel ledger:\n{}",
        missing.join("\n")
    );

    let h200 = Profile::builtin("h200").unwrap();
    let sass = tileops_bench::ledger::Ledger::builtin().unwrap();
    // The traffic pass's launch log (scripts/emu-check.sh sets it after pass C): the entries'
    // coalescing and bank-conflict figures. Without it the document cannot be compared.
    let traffic_log = std::env::var_os("TILEOPS_TRAFFIC_LOG")
        .map(|p| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
    let backtest = backtest_summary(&h200);
    let doc = kernel_doc::render(
        &run,
        &h200,
        sass,
        kernel_doc::CHANGES,
        traffic_log.as_deref(),
        Some(&backtest),
    )
    .unwrap_or_else(|e| panic!("the traffic log: {e}"));
    let rows = kernel_doc::ceilings(&run, &h200);
    let with_ledger = run.records.iter().filter(|r| r.ledger.is_some()).count();
    assert_eq!(rows.len(), with_ledger, "every row with a ledger priced");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = root.join("tileops/docs/kernels.md");
    let ceilings_path = root.join("tileops-bench/ledger/ceilings.txt");
    let predicted_path = root.join("tileops-bench/ledger/predicted-h200.tsv");
    let predicted = kernel_doc::predicted_text(&rows);
    if std::env::var_os("TILEOPS_LEDGER_UPDATE").is_some_and(|v| v == "1") {
        std::fs::write(&doc_path, &doc).unwrap();
        std::fs::write(&ceilings_path, kernel_doc::ceilings_text(&rows)).unwrap();
        std::fs::write(&predicted_path, &predicted).unwrap();
        println!(
            "ledger: wrote {}, {} and {}",
            doc_path.display(),
            ceilings_path.display(),
            predicted_path.display()
        );
        return;
    }
    // Every row of the manifest has its prediction, and the committed table is today's.
    assert_eq!(
        predicted.lines().filter(|l| !l.starts_with('#')).count(),
        rows.len(),
        "every priced row has a predicted time"
    );
    let committed_predicted = std::fs::read_to_string(&predicted_path).unwrap_or_default();
    if committed_predicted != predicted {
        let first = committed_predicted
            .lines()
            .zip(predicted.lines())
            .find(|(a, b)| a != b);
        panic!(
            "{} is stale (first difference: {first:?}); regenerate: TILEOPS_LEDGER_UPDATE=1 \
             bash scripts/emu-check.sh (or this test with TILEOPS_EMU_LIB set)",
            predicted_path.display()
        );
    }
    // The gate: no memory-bound row's ceiling below the committed one.
    let committed = kernel_doc::parse_ceilings(&std::fs::read_to_string(&ceilings_path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", ceilings_path.display()));
    let mut worse = Vec::new();
    for row in &rows {
        if let Some((bound, _)) = committed.get(&row.key)
            && row.memory_bound
            && row.ceiling < bound - 0.0005
        {
            worse.push(format!(
                "{}: ceiling {:.4} (limiter {}) is below the committed {bound:.4}",
                row.key, row.ceiling, row.limiter
            ));
        }
    }
    assert!(
        worse.is_empty(),
        "the kernel ledger got worse:\n{}",
        worse.join("\n")
    );
    let committed_doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
    if traffic_log.is_none() {
        println!(
            "SKIP: {} not compared: TILEOPS_TRAFFIC_LOG (the traffic pass's launch log) is not set",
            doc_path.display()
        );
    } else if committed_doc != doc {
        let first = committed_doc
            .lines()
            .zip(doc.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed_doc.lines().count().min(doc.lines().count()));
        panic!(
            "{} is stale (first difference at line {}: {:?}); regenerate: \
             TILEOPS_LEDGER_UPDATE=1 bash scripts/emu-check.sh (or this test with \
             TILEOPS_EMU_LIB set)",
            doc_path.display(),
            first + 1,
            doc.lines().nth(first)
        );
    }
    let short = rows
        .iter()
        .filter(|r| r.memory_bound && r.issue_share > 0.6)
        .count();
    println!(
        "ledger: {} rows priced; {short} memory-bound rows with issue > 0.6 x memory time",
        rows.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
