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

/// The tensor-core GEMM of `planted.cu` (`mma_gemm`): C (64 x 64) = A (64 x K) B, K = 56 (one
/// full 32-wide stage and one zero-filled past K), with 16-bit operands packed two per f32.
mod mma {
    use super::*;

    pub(super) const K: usize = 56;

    /// A value exact in bf16 and f16 (a multiple of 1/64 under 2 in magnitude), so that the
    /// inputs are the same numbers in both types.
    fn value(i: usize, j: usize, salt: usize) -> f32 {
        let h = (i * 131 + j * 71 + salt * 29) % 211;
        (h as f32 - 105.0) / 64.0
    }

    pub(super) fn a(i: usize, k: usize) -> f32 {
        value(i, k, 1)
    }

    pub(super) fn b(k: usize, n: usize) -> f32 {
        value(k, n, 2)
    }

    /// 16-bit values, two per f32 (the lower index in the low half), as the kernel reads them.
    fn packed(values: &[f32], bf16: bool) -> Vec<f32> {
        let bits: Vec<u16> = values
            .iter()
            .map(|&v| {
                if bf16 {
                    half::bf16::from_f32(v).to_bits()
                } else {
                    half::f16::from_f32(v).to_bits()
                }
            })
            .collect();
        bits.chunks(2)
            .map(|p| f32::from_bits(u32::from(p[0]) | (u32::from(p[1]) << 16)))
            .collect()
    }

    /// The kernel's arguments: A row-major, B as N x K (`nk`) or K x N.
    pub(super) fn args(bf16: bool, nk: bool) -> Vec<Arg> {
        let a: Vec<f32> = (0..64 * K).map(|x| a(x / K, x % K)).collect();
        let b: Vec<f32> = if nk {
            (0..64 * K).map(|x| b(x % K, x / K)).collect()
        } else {
            (0..K * 64).map(|x| b(x / 64, x % 64)).collect()
        };
        vec![
            Arg::Input(packed(&a, bf16)),
            Arg::Input(packed(&b, bf16)),
            Arg::Output(64 * 64),
            Arg::Int(K as i32),
        ]
    }

    /// The host GEMM, in f32 with k ascending (the emulated mma's order; the sums are exact
    /// anyway: 14-bit products, 56 of them).
    pub(super) fn host() -> Vec<f32> {
        let mut c = vec![0f32; 64 * 64];
        for m in 0..64 {
            for n in 0..64 {
                let mut acc = 0f32;
                for k in 0..K {
                    acc += a(m, k) * b(k, n);
                }
                c[m * 64 + n] = acc;
            }
        }
        c
    }

    /// The elements where `got` differs from the host GEMM.
    pub(super) fn mismatches(got: &[f32]) -> Vec<(usize, f32, f32)> {
        host()
            .into_iter()
            .zip(got)
            .enumerate()
            .filter(|(_, (want, got))| want.to_bits() != got.to_bits())
            .map(|(i, (want, got))| (i, want, *got))
            .collect()
    }

    pub(super) fn config() -> LaunchConfig {
        super::block(128)
    }
}

#[test]
fn tensor_core_gemms_match_the_host_under_every_schedule() {
    let start = std::time::Instant::now();
    for (entry, bf16, nk) in [
        ("planted_mma_bf16_a4_nk2_ok", true, true),
        ("planted_mma_f16_a2_kn4t_ok", false, false),
        ("planted_mma_bf16_a1_kn2t_ok", true, false),
        ("planted_mma_f16_a4_nk4_ok", false, true),
        ("planted_mma_bf16_a4_kn1t_ok", true, false),
        ("planted_mma_f16_a1_nk1_ok", false, true),
    ] {
        let c = check(entry, &mma::config(), &mma::args(bf16, nk), &[])
            .unwrap_or_else(|f| panic!("{entry}: {f}"));
        let wrong = mma::mismatches(&c[0]);
        assert!(
            wrong.is_empty(),
            "{entry}: {} elements differ from the host GEMM, first (index, want, got) {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(4)]
        );
    }
    // Six 64 x 64 x 56 GEMMs (112 mma and 88 to 256 ldmatrix per warp each), four schedules.
    println!(
        "tensor-core GEMMs: 6 kernels x 4 schedules in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    // More random seeds (random switches, random early landings) for the first.
    let seeds: Vec<_> = (2..=16).map(cuda_emu::Schedule::Random).collect();
    let c = check(
        "planted_mma_bf16_a4_nk2_ok",
        &mma::config(),
        &mma::args(true, true),
        &seeds,
    )
    .unwrap_or_else(|f| panic!("{f}"));
    assert!(mma::mismatches(&c[0]).is_empty());
}

#[test]
fn a_wrong_fragment_index_is_caught_by_the_host_gemm() {
    // Deterministic, so the emulator itself has nothing to flag: the comparison with the host
    // GEMM is what catches it (and what the correct twins pass above).
    let c = check(
        "planted_mma_wrong_fragment",
        &mma::config(),
        &mma::args(true, true),
        &[],
    )
    .expect("a wrong fragment index is no emulator fault");
    let wrong = mma::mismatches(&c[0]);
    println!(
        "planted_mma_wrong_fragment: {} of 4096 elements differ",
        wrong.len()
    );
    assert!(wrong.len() > 1000, "{} elements differ", wrong.len());
}

#[test]
fn a_missing_cp_async_wait_reads_copies_in_flight() {
    flagged(
        "planted_mma_no_wait",
        &mma::config(),
        &mma::args(true, true),
        FaultKind::Kernel,
        &["poison", "planted_mma_no_wait"],
    );
}

#[test]
fn a_missing_barrier_before_a_cp_async_stage_is_reused_is_a_race() {
    flagged(
        "planted_mma_no_barrier",
        &mma::config(),
        &mma::args(true, true),
        FaultKind::Race,
        &["a race", "planted_mma_no_barrier"],
    );
}

#[test]
fn a_misaligned_ldmatrix_row_names_the_line() {
    flagged(
        "planted_mma_misaligned_row",
        &mma::config(),
        &mma::args(true, true),
        FaultKind::Kernel,
        &["misaligned ldmatrix row", "planted.cu:", "thread (3,0,0)"],
    );
    flagged(
        "planted_mma_row_outside_shared",
        &mma::config(),
        &mma::args(true, true),
        FaultKind::Kernel,
        &["ldmatrix row outside shared memory", "planted.cu:"],
    );
}

#[test]
fn an_mma_collective_with_missing_lanes_is_reported() {
    flagged(
        "planted_mma_divergent",
        &mma::config(),
        &mma::args(true, true),
        FaultKind::Kernel,
        &["ldmatrix.x4", "names lane 16", "does not match the lanes"],
    );
}

#[test]
fn a_misaligned_or_global_cp_async_operand_names_the_line() {
    flagged(
        "planted_cp_async_misaligned",
        &block(32),
        &[Arg::Input(ramp(256)), Arg::Output(32)],
        FaultKind::Kernel,
        &["misaligned cp.async source", "planted.cu:"],
    );
    flagged(
        "planted_cp_async_to_global",
        &block(32),
        &[Arg::Input(ramp(128)), Arg::Output(128)],
        FaultKind::Kernel,
        &["cp.async destination outside shared memory", "planted.cu:"],
    );
}

/// A copy lands no later than the wait that covers it, and under the random schedule at random
/// switches before it: a kernel that reads without waiting sees the poison under round robin and
/// a mixture under the random schedule (so the schedules disagree).
#[test]
fn committed_copies_land_early_only_under_the_random_schedule() {
    let entry = cuda_emu::find("planted_cp_async_peek").expect("the peek kernel");
    let config = block(64);
    let input = ramp(256);
    let run = |schedule| {
        let mut output = vec![0f32; 64];
        let (mut x, mut y) = (input.as_ptr(), output.as_mut_ptr());
        let mut params = [
            &mut x as *mut _ as *mut std::ffi::c_void,
            &mut y as *mut _ as *mut std::ffi::c_void,
        ];
        // SAFETY: the kernel reads 256 floats of x and writes 64 of y.
        unsafe { cuda_emu::launch(entry, &config, params.as_mut_ptr(), schedule) }
            .unwrap_or_else(|f| panic!("{f}"));
        let landed = (0..64).filter(|&t| output[t] == input[4 * t]).count();
        let poison = output.iter().filter(|v| v.to_bits() == u32::MAX).count();
        assert_eq!(landed + poison, 64, "{output:?}");
        landed
    };
    assert_eq!(run(cuda_emu::Schedule::RoundRobin), 0);
    assert_eq!(run(cuda_emu::Schedule::WarpGreedy), 0);
    let landed = run(cuda_emu::Schedule::Random(1));
    println!("random:1: {landed} of 64 copies landed before their wait");
    assert!(landed > 0 && landed < 64, "{landed} of 64 landed early");
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

/// The traffic ledger's planted checks: each wrong kernel is flagged by the gates (the code
/// tileops's coverage tests run, `cuda_emu::gate`) with a message naming the entry, and its
/// correct twin passes them. The ledger is counted in the AddressSanitizer build only.
#[cfg(feature = "asan")]
mod traffic {
    use cuda_emu::check::{Arg, check};
    use cuda_emu::gate::{self, Bounds, Finding, Gate, LaunchRecord};
    use cuda_emu::{Dim3, LaunchConfig, Schedule};

    /// Runs `entry` once and returns its launch-log line, through the log's own text format.
    fn logged(entry: &str, config: &LaunchConfig, args: &[Arg]) -> LaunchRecord {
        cuda_emu::traffic::set_counting(true);
        check(entry, config, args, &[Schedule::RoundRobin]).unwrap_or_else(|f| panic!("{f}"));
        let traffic = cuda_emu::traffic::last().expect("the ASan build counts traffic");
        let (g, b) = (config.grid, config.block);
        let line = format!(
            "{{\"entry\":\"{entry}\",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"dynamic_smem\":0,\
             \"ran\":true,\"traffic\":{}}}",
            g.x,
            g.y,
            g.z,
            b.x,
            b.y,
            b.z,
            traffic.to_json()
        );
        gate::parse_line(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn gates(op: &str, launches: &[LaunchRecord], bytes: f64) -> Vec<Finding> {
        let findings = gate::check_call(op, launches, bytes, &Bounds::default());
        for f in &findings {
            println!("{f}");
        }
        findings
    }

    fn has(findings: &[Finding], gate: Gate, entry: &str) -> bool {
        findings
            .iter()
            .any(|f| f.gate == gate && f.entry.contains(entry) && f.to_string().contains(entry))
    }

    fn ramp(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i % 7) as f32 + 0.5).collect()
    }

    #[test]
    fn asan_traffic_a_32_byte_lane_stride_is_flagged() {
        let config = LaunchConfig::new(Dim3::x(4), Dim3::x(32));
        // 128 threads x 16 bytes out; the strided kernel reads every other 16-byte vector.
        let strided = logged(
            "planted_lane_stride32",
            &config,
            &[Arg::Input(ramp(1024)), Arg::Output(512)],
        );
        let site = &strided.traffic.as_ref().unwrap().sites;
        let load = site.iter().find(|s| s.kind == "load").expect("a load site");
        assert_eq!((load.width, load.requests), (16, 4), "{site:?}");
        assert_eq!((load.sectors, load.ideal_sectors), (128, 64), "{site:?}");
        assert!(load.site.starts_with("planted.cu:"), "{site:?}");
        let findings = gates("planted_stride", &[strided], 4096.0);
        assert!(has(&findings, Gate::Coalescing, "planted_lane_stride32"));

        let twin = logged(
            "planted_lane_contiguous",
            &config,
            &[Arg::Input(ramp(512)), Arg::Output(512)],
        );
        assert_eq!(twin.traffic.as_ref().unwrap().read_bytes, 2048);
        assert!(gates("planted_contiguous", &[twin], 4096.0).is_empty());
    }

    #[test]
    fn asan_traffic_a_shared_memory_bank_conflict_is_flagged() {
        let config = LaunchConfig::new(Dim3::x(1), Dim3::x(32));
        let args = [Arg::Input(ramp(32)), Arg::Output(32)];
        let conflicted = logged("planted_bank_conflict", &config, &args);
        let shared: Vec<_> = conflicted
            .traffic
            .as_ref()
            .unwrap()
            .sites
            .iter()
            .filter(|s| s.space == "shared")
            .cloned()
            .collect();
        assert_eq!(shared.len(), 2, "{shared:?}");
        for s in &shared {
            assert_eq!(
                (s.requests, s.wavefronts, s.ideal_wavefronts),
                (1, 2, 1),
                "{s:?}"
            );
        }
        let findings = gates("planted_staged", &[conflicted], 256.0);
        assert!(has(&findings, Gate::BankConflicts, "planted_bank_conflict"));
        let twin = logged("planted_bank_conflict_free", &config, &args);
        assert!(gates("planted_staged", &[twin], 256.0).is_empty());
    }

    /// cp.async's global read and shared write, and ldmatrix's shared reads, are counted like
    /// other 16-byte accesses, at the kernel's lines.
    #[test]
    fn asan_traffic_counts_cp_async_and_ldmatrix() {
        let record = logged(
            "planted_mma_bf16_a4_nk2_ok",
            &super::mma::config(),
            &super::mma::args(true, true),
        );
        let traffic = record.traffic.as_ref().unwrap();
        for s in &traffic.sites {
            println!("{s:?}");
        }
        // A and B (64 x 56 16-bit elements each) cross DRAM once; C (64 x 64 f32) is written.
        assert_eq!(traffic.read_bytes, 2 * 64 * 56 * 2, "{traffic:?}");
        assert_eq!(traffic.write_bytes, 64 * 64 * 4, "{traffic:?}");
        let find = |space: &str, kind: &str| {
            traffic
                .sites
                .iter()
                .filter(|s| s.space == space && s.kind == kind && s.width == 16)
                .collect::<Vec<_>>()
        };
        let global_loads = find("global", "load");
        assert!(!global_loads.is_empty(), "no 16-byte global load");
        assert!(
            global_loads
                .iter()
                .all(|s| s.site.starts_with("planted.cu:")),
            "{global_loads:?}"
        );
        assert!(
            !find("shared", "store").is_empty(),
            "no 16-byte shared store"
        );
        assert!(!find("shared", "load").is_empty(), "no 16-byte shared load");
    }

    #[test]
    fn asan_traffic_an_input_read_twice_is_flagged() {
        let (blocks, n) = (64u32, 64 * 32);
        let config = LaunchConfig::new(Dim3::x(blocks), Dim3::x(32));
        // The op moves x in and y out: 2 x n x 4 bytes.
        let bytes = (2 * n * 4) as f64;
        let x = ramp(n);
        let max = logged(
            "planted_max_pass",
            &config,
            &[Arg::Input(x.clone()), Arg::Output(blocks as usize)],
        );
        let scale = logged(
            "planted_scale_pass",
            &config,
            &[
                Arg::Input(x.clone()),
                Arg::Input(vec![7.0; blocks as usize]),
                Arg::Output(n),
            ],
        );
        let findings = gates("planted_max_scale", &[max, scale], bytes);
        assert!(has(
            &findings,
            Gate::Traffic,
            "planted_max_pass+planted_scale_pass"
        ));
        let one_pass = logged(
            "planted_max_scale_one_pass",
            &config,
            &[Arg::Input(x), Arg::Output(n)],
        );
        assert!(gates("planted_max_scale", &[one_pass], bytes).is_empty());
    }
}

/// The launch log (`CUDA_EMU_LEDGER`) through the stand-in driver: one line per launch, `ran`
/// false for a dry run (whose output stays untouched), `traffic` present exactly in the build
/// that counts it. (`asan_` in the name: the ASan self-test step runs it too.)
#[test]
fn the_launch_log_and_dry_runs_asan_too() {
    use cuda_emu::driver::{
        cuLaunchKernel, cuMemAlloc_v2, cuMemFree_v2, cuMemcpyDtoH_v2, cuMemcpyHtoD_v2,
        cuModuleGetFunction, cuModuleLoadData, cuda_emu_set_dry_run,
    };
    use cudarc::driver::sys::{CUresult, CUstream};
    let path =
        std::env::temp_dir().join(format!("cuda-emu-launch-log-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    // SAFETY: no other test of this binary reads or writes the environment.
    unsafe { std::env::set_var("CUDA_EMU_LEDGER", &path) };
    // Other tests of this binary may have launched before the variable was set.
    cuda_emu::traffic::set_counting(true);
    let n = 100usize;
    let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut x, mut y) = (0u64, 0u64);
    let input: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut output = vec![0f32; n];
    // SAFETY: valid out-pointers, a NUL-terminated PTX text as the image, buffers of n floats.
    unsafe {
        assert_eq!(
            cuModuleLoadData(&mut module, c"//".as_ptr().cast()),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            cuModuleGetFunction(&mut function, module, c"planted_scale2".as_ptr()),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(cuMemAlloc_v2(&mut x, 4 * n), CUresult::CUDA_SUCCESS);
        assert_eq!(cuMemAlloc_v2(&mut y, 4 * n), CUresult::CUDA_SUCCESS);
        assert_eq!(
            cuMemcpyHtoD_v2(x, input.as_ptr().cast(), 4 * n),
            CUresult::CUDA_SUCCESS
        );
    }
    let mut count = n as i32;
    let mut params = [
        (&mut x as *mut u64).cast::<std::ffi::c_void>(),
        (&mut y as *mut u64).cast(),
        (&mut count as *mut i32).cast(),
    ];
    let launch = |params: &mut [*mut std::ffi::c_void; 3]| {
        // SAFETY: the entry's three parameters, pointing at live values.
        unsafe {
            cuLaunchKernel(
                function,
                2,
                1,
                1,
                64,
                1,
                1,
                0,
                std::ptr::null_mut::<std::ffi::c_void>() as CUstream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    };
    assert_eq!(launch(&mut params), CUresult::CUDA_SUCCESS);
    assert_eq!(cuda_emu_set_dry_run(1), 0);
    // SAFETY: y holds n floats.
    unsafe { cuda_emu::driver::cuMemsetD8_v2(y, 0, 4 * n) };
    assert_eq!(launch(&mut params), CUresult::CUDA_SUCCESS);
    assert_eq!(cuda_emu_set_dry_run(0), 1);
    // SAFETY: y holds n floats.
    unsafe {
        assert_eq!(
            cuMemcpyDtoH_v2(output.as_mut_ptr().cast(), y, 4 * n),
            CUresult::CUDA_SUCCESS
        );
        cuMemFree_v2(x);
        cuMemFree_v2(y);
    }
    assert!(
        output.iter().all(|&v| v == 0.0),
        "the dry run ran the kernel"
    );
    let text = std::fs::read_to_string(&path).expect("the launch log");
    let _ = std::fs::remove_file(&path);
    let lines: Vec<_> = text
        .lines()
        .map(|l| cuda_emu::gate::parse_line(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0].entry, "planted_scale2");
    assert_eq!((lines[0].grid, lines[0].block), ([2, 1, 1], [64, 1, 1]));
    assert!(lines[0].ran && !lines[1].ran, "{text}");
    assert!(lines.iter().all(|l| l.tid.is_some()), "{text}");
    assert!(lines[1].traffic.is_none(), "{text}");
    assert_eq!(
        lines[0].traffic.is_some(),
        cuda_emu::traffic::ENABLED,
        "traffic in the log exactly in the build that counts it: {text}"
    );
    if let Some(t) = &lines[0].traffic {
        // 100 floats read and written: 13 sectors each; 4 warps with work (the last with 4
        // active lanes), one load and one store each.
        assert_eq!((t.read_bytes, t.write_bytes), (416, 416), "{text}");
        assert_eq!(t.global_requests, 8, "{text}");
        assert_eq!(t.global_sectors, t.global_ideal_sectors, "{text}");
    }
}
