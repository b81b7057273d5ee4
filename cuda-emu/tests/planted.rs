//! The emulator's self-tests: kernels written to be wrong (tests/planted/planted.cu), each of
//! which must be flagged with the reason, and their correct twins, which must pass under every
//! schedule.

use cuda_emu::check::{Arg, check};
use cuda_emu::{Dim3, FaultKind, LaunchConfig};

fn block(threads: u32) -> LaunchConfig {
    LaunchConfig::new(Dim3::x(1), Dim3::x(threads))
}

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 7) as f32 + 0.5).collect()
}

/// Asserts that `entry` is flagged as `kind` with a message containing each of `reasons`.
fn flagged(entry: &str, config: &LaunchConfig, args: &[Arg], kind: FaultKind, reasons: &[&str]) {
    let fault = check(entry, config, args, &[]).expect_err(entry);
    println!("{entry}: {fault}");
    assert_eq!(fault.kind, kind, "{entry}: {fault}");
    for reason in reasons {
        assert!(
            fault.message.contains(reason),
            "{entry}: expected {reason:?} in: {fault}"
        );
    }
}

#[test]
fn a_missing_barrier_before_shared_memory_reuse_is_a_race() {
    let args = [Arg::Input(ramp(256)), Arg::Output(256)];
    flagged(
        "planted_missing_barrier",
        &block(128),
        &args,
        FaultKind::Race,
        &["a race", "warp-greedy"],
    );
    let sums = check("planted_block_sums_ok", &block(128), &args, &[]).unwrap();
    let x = ramp(256);
    let want: [f32; 2] = [x[..128].iter().sum(), x[128..].iter().sum()];
    assert!(sums[0].chunks(2).all(|s| s == want), "{:?}", &sums[0][..4]);
}

#[test]
fn a_read_of_unwritten_shared_memory_is_poison() {
    flagged(
        "planted_unwritten_shared",
        &block(64),
        &[Arg::Input(ramp(64)), Arg::Output(1)],
        FaultKind::Kernel,
        &["poison", "shared memory no thread wrote"],
    );
}

#[test]
fn a_tail_read_one_past_the_end_is_poison() {
    flagged(
        "planted_tail_overread",
        &block(40),
        &[Arg::Input(ramp(37)), Arg::Output(37), Arg::Int(37)],
        FaultKind::Kernel,
        &["output 0 element 36", "outside an allocation"],
    );
}

#[test]
fn a_tail_write_one_past_the_end_is_out_of_bounds() {
    flagged(
        "planted_tail_overwrite",
        &block(40),
        &[Arg::Input(ramp(37)), Arg::Output(37), Arg::Int(37)],
        FaultKind::OutOfBounds,
        &["outside a device allocation", "byte +148"],
    );
}

#[test]
fn a_misaligned_vector_load_names_the_line() {
    flagged(
        "planted_misaligned_load",
        &block(32),
        &[Arg::Input(ramp(64)), Arg::Output(32)],
        FaultKind::Kernel,
        &[
            "misaligned 16-byte __ldg",
            "planted.cu:",
            "planted_misaligned_load",
            "thread (0,0,0)",
        ],
    );
}

#[test]
fn a_divergent_barrier_is_reported() {
    flagged(
        "planted_divergent_barrier",
        &block(32),
        &[Arg::Output(32)],
        FaultKind::Kernel,
        &["divergent __syncthreads", "planted.cu:"],
    );
}

#[test]
fn a_wrong_shuffle_width_is_reported() {
    flagged(
        "planted_wrong_shuffle_width",
        &block(32),
        &[Arg::Input(ramp(32)), Arg::Output(32)],
        FaultKind::Kernel,
        &["wrong shuffle width", "offset 16 with width 16"],
    );
}

#[test]
fn a_shuffle_mask_that_does_not_match_the_lanes_is_reported() {
    flagged(
        "planted_shuffle_in_divergent_branch",
        &block(32),
        &[Arg::Input(ramp(32)), Arg::Output(32)],
        FaultKind::Kernel,
        &[
            "__shfl_xor_sync mask 0xffffffff",
            "has exited",
            "does not match the lanes",
        ],
    );
}

#[test]
fn a_warp_exchange_without_syncwarp_is_flagged() {
    let args = [Arg::Input(ramp(64)), Arg::Output(64)];
    flagged(
        "planted_warp_exchange_no_syncwarp",
        &block(64),
        &args,
        FaultKind::Kernel,
        &["poison"],
    );
    let y = check("planted_warp_exchange_ok", &block(64), &args, &[]).unwrap();
    let x = ramp(64);
    assert!((0..64).all(|i| y[0][i] == x[i ^ 1]));
}

#[test]
fn launches_outside_their_limits_are_refused() {
    let args = [Arg::Output(128)];
    flagged(
        "planted_bounded",
        &block(128),
        &args,
        FaultKind::InvalidLaunch,
        &["__launch_bounds__(64)"],
    );
    assert!(check("planted_bounded", &block(64), &[Arg::Output(64)], &[]).is_ok());
    let too_big = LaunchConfig::new(Dim3::x(1), Dim3::new(32, 32, 2));
    flagged(
        "planted_bounded",
        &too_big,
        &args,
        FaultKind::InvalidLaunch,
        &["2048 threads"],
    );
    let mut shared = block(32);
    shared.dynamic_shared_bytes = 64 * 1024;
    flagged(
        "planted_bounded",
        &shared,
        &args,
        FaultKind::InvalidLaunch,
        &["dynamic shared memory"],
    );
}

#[test]
fn a_correct_kernel_passes_every_schedule_over_many_blocks() {
    let x = ramp(1000);
    let config = LaunchConfig::new(Dim3::x(3), Dim3::x(96));
    let y = check(
        "planted_scale2",
        &config,
        &[Arg::Input(x.clone()), Arg::Output(1000), Arg::Int(1000)],
        &[],
    )
    .unwrap();
    assert!(y[0].iter().zip(&x).all(|(y, x)| *y == 2.0 * x));
}

#[test]
fn every_tileops_kernel_file_is_compiled_in() {
    let files: std::collections::BTreeSet<_> = cuda_emu::entries().iter().map(|e| e.file).collect();
    for file in [
        "activation.cu",
        "calibrate.cu",
        "fp8_quant.cu",
        "fused_add_rms_norm.cu",
        "layer_norm.cu",
        "qk_norm_rope_fp8.cu",
        "reduce.cu",
        "rms_norm.cu",
        "rope.cu",
        "silu_and_mul.cu",
        "softmax.cu",
        "bench_util.cu",
    ] {
        assert!(files.contains(file), "{file} missing from {files:?}");
    }
}

/// The AddressSanitizer build names the faulting line of a read past the end, which the normal
/// build only sees as poison in the output. ASan ends the process at the first report, so the
/// kernel runs in a child process (this test binary again, with `CUDA_EMU_ASAN_CHILD` set).
#[cfg(feature = "asan")]
#[test]
fn asan_names_the_line_of_a_read_past_the_end() {
    let args = [Arg::Input(ramp(37)), Arg::Output(37), Arg::Int(37)];
    if std::env::var_os("CUDA_EMU_ASAN_CHILD").is_some() {
        let _ = check("planted_tail_overread", &block(40), &args, &[]);
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "asan_names_the_line_of_a_read_past_the_end",
            "--nocapture",
        ])
        .env("CUDA_EMU_ASAN_CHILD", "1")
        .output()
        .expect("running the child");
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        !child.status.success(),
        "ASan did not stop the child:\n{stderr}"
    );
    assert!(stderr.contains("heap-buffer-overflow"), "{stderr}");
    assert!(stderr.contains("planted.cu:"), "{stderr}");
}
