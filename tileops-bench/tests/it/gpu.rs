//! The calibration microbenchmarks (tileops/kernels/perf/calibrate.cu) on the GPU: every kernel
//! launched once on a tiny working set and checked against its host twin; and the bench timer's
//! L2 flush methods.

use std::collections::HashSet;
use std::io::Write;

use tileops::Device;
use tileops::kernels;

/// The GPU, or `None` after printing `SKIP: <test>: <reason>`; a panic instead with
/// `TILEOPS_REQUIRE_GPU=1`, so a broken GPU setup cannot pass silently.
fn gpu_or_skip(test: &str) -> Option<Device> {
    match Device::cuda(0) {
        Ok(device) => Some(device),
        Err(err) if std::env::var("TILEOPS_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("TILEOPS_REQUIRE_GPU=1, but no GPU is usable: {err}")
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "SKIP: {test}: {err}");
            None
        }
    }
}

/// `check_kernels` launches every calibration kernel once on a tiny working set (a 2 x 128 grid)
/// and checks each result against its host twin (copy exact, triad `b + s c`, read's sum, write's
/// fill, each FMA chain, each uniform fill), then one 16^3 cuBLAS GemmEx per dtype. Every entry
/// of calibrate.cu must have passed its check; on cuda-emu with `CUDA_EMU_COVERAGE_DIR` set, every
/// one must also be in the emulator's list of what this process launched.
#[test]
fn calibration_kernels_match_their_host_twins() {
    let Some(gpu) = gpu_or_skip("calibration_kernels_match_their_host_twins") else {
        return;
    };
    let passed = tileops_bench::calibrate_gpu::check_kernels(&gpu, &mut |line| {
        println!("ok: {line}");
    })
    .unwrap_or_else(|e| panic!("calibration kernel check failed: {e}"));
    let entries: Vec<&'static str> = kernels::CALIBRATE.entries.iter().map(|e| e.name).collect();
    let unchecked: Vec<&str> = entries
        .iter()
        .copied()
        .filter(|name| {
            !passed
                .iter()
                .any(|line| line.strip_prefix(name).is_some_and(|r| r.starts_with(':')))
        })
        .collect();
    assert!(
        unchecked.is_empty(),
        "no passed check for {unchecked:?}; passed: {passed:#?}"
    );
    if let (true, Some(dir)) = (gpu.is_emulated(), std::env::var_os("CUDA_EMU_COVERAGE_DIR")) {
        let path = std::path::Path::new(&dir).join(format!("launched-{}.txt", std::process::id()));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let launched: HashSet<&str> = text.lines().map(str::trim).collect();
        let missing: Vec<&str> = entries
            .iter()
            .copied()
            .filter(|e| !launched.contains(e))
            .collect();
        assert!(
            missing.is_empty(),
            "calibrate.cu: never launched: {missing:?}"
        );
    }
}

/// Every L2 flush method on the GPU, through the bench harness on relu's decode row. On cuda-emu
/// the timer is set up and exercised once per run, which for `memset+read` checks that the read
/// sweep covers the whole flush buffer (a planted value at each end), and the row runs once,
/// untimed; on a GPU the row is timed and its `timing` names the flush.
#[test]
fn every_l2_flush_method_runs_and_names_itself() {
    use tileops_bench::bench::{self, BenchConfig, L2Flush, Quiet, Selection};
    use tileops_bench::records::{DeviceInfo, RunMeta};

    let Some(gpu) = gpu_or_skip("every_l2_flush_method_runs_and_names_itself") else {
        return;
    };
    let selection = Selection {
        ops: vec!["relu".into()],
        families: vec![],
    };
    let cases: Vec<bench::Case> = bench::select(&selection)
        .expect("relu is registered")
        .into_iter()
        .filter(|c| c.case.workload.label == "hidden-state-decode")
        .collect();
    assert_eq!(cases.len(), 1, "relu's decode row");
    for flush in L2Flush::ALL {
        let config = BenchConfig {
            l2_flush: flush,
            ..BenchConfig::default()
        };
        let meta = RunMeta::new(
            "test",
            "2026-12-04T00:00:00Z",
            "0",
            DeviceInfo::new(gpu.to_string()),
        );
        let run = bench::run(&gpu, meta, &cases, &config, &mut Quiet)
            .unwrap_or_else(|e| panic!("--l2-flush {flush}: {e}"));
        let record = &run.records[0];
        if gpu.is_emulated() {
            assert!(record.is_emulated(), "{flush}: {record:?}");
        } else {
            assert!(record.skipped.is_none(), "{flush}: {:?}", record.skipped);
            assert!(
                [flush.timing(true), flush.timing(false)].contains(&record.timing.as_str()),
                "{flush}: timing `{}`",
                record.timing
            );
        }
        println!("ok: --l2-flush {flush}: {}", record.timing);
    }
}
