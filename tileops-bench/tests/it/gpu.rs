//! The calibration microbenchmarks (tileops/kernels/perf/calibrate.cu) on the GPU: every kernel
//! launched once on a tiny working set and checked against its host twin.

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
