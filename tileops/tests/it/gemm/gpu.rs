//! `gemm` on the GPU (cuBLASLt; cuBLAS Sgemm for strict float32) against the f64 reference, for
//! every dtype, the four trans layouts and edge shapes, on fresh random inputs, with the output
//! poisoned (NaN) first so that an element cuBLAS never writes shows up.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints the worst error per dtype (`WORST gemm <dtype>`).
//!
//! The error of one element is measured against the magnitude the product was accumulated from,
//! `|got - want| / sum_k |a[i, k]| |b[k, j]|`: elementwise relative error is meaningless where the
//! sum cancels. Its bound scales with K (see [`bound`]).

use crate::common::{element_error, floor, gemm_bound, gpu_or_skip, lined_up, worst_by};
use tileops::ops::{Gemm, reference};
use tileops::{DType, Device, Tensor, TensorSpec};

/// The precisions tested: each dtype, and float32 once more as TF32.
const VARIANTS: [(DType, bool); 4] = [
    (DType::Float32, false),
    (DType::Float32, true),
    (DType::Float16, false),
    (DType::BFloat16, false),
];

fn label(dtype: DType, tf32: bool) -> String {
    if tf32 {
        format!("{dtype}(tf32)")
    } else {
        dtype.to_string()
    }
}

/// The worst normalized error of `got` against `want` (see the module doc); infinite when NaN,
/// infinities or the poison do not line up.
fn worst_error(got: &[f64], want: &[f64], scale: &[f64], dtype: DType) -> (f64, usize) {
    worst_by(got, want, |i, g, w| {
        let s = scale[i];
        if s.is_finite() {
            // Below the dtype's smallest normal number the output only has absolute precision
            // (float16 subnormals); an all-zero sum must give exactly 0.
            element_error(g, w, || s.max(floor(dtype)))
        } else {
            lined_up(g, w)
        }
    })
}

/// Special values written into the inputs.
#[derive(Clone, Copy, PartialEq)]
enum Special {
    None,
    /// a: a NaN in row 1, +inf in row 2 (column 0), -inf in row 3 (last column); b: one zero
    /// where row 2's inf meets it (NaN out), the rest random.
    NonFinite,
}

/// One case: logical sizes, layout, specials.
struct Case {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    special: Special,
}

const fn case(m: usize, n: usize, k: usize, trans_a: bool, trans_b: bool) -> Case {
    Case {
        m,
        n,
        k,
        trans_a,
        trans_b,
        special: Special::None,
    }
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        case(1, 1, 1, false, false),
        // A row vector times a matrix, a matrix times a column vector.
        case(1, 7, 33, false, true),
        case(33, 1, 17, true, false),
        case(17, 33, 9, true, true),
        // K = 1: an outer product.
        case(9, 11, 1, false, false),
        case(64, 64, 64, false, false),
        Case {
            special: Special::NonFinite,
            ..case(16, 24, 40, false, true)
        },
        Case {
            special: Special::NonFinite,
            ..case(16, 24, 40, true, false)
        },
        // A long K.
        case(5, 3, 4096, false, true),
        case(128, 256, 512, false, false),
        case(129, 257, 1023, false, true),
        case(255, 130, 300, true, false),
        // DeepSeek-V3-like: decode m, nn.Linear weight; and K = 7168.
        case(128, 2112, 1024, false, true),
        case(96, 512, 7168, false, false),
    ];
    // Odd sizes in every layout.
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        cases.push(case(19, 23, 29, ta, tb));
    }
    cases
}

/// Random operands of `c` as stored, with its specials, on `device`.
fn make_inputs(c: &Case, dtype: DType, seed: u64, device: &Device) -> (Tensor, Tensor) {
    let a_spec = stored(c.m, c.k, c.trans_a, dtype);
    let b_spec = stored(c.k, c.n, c.trans_b, dtype);
    let random = |spec: &TensorSpec, seed| {
        Tensor::random(spec, seed, &Device::cpu())
            .and_then(|t| t.to_vec_f64())
            .expect("random input")
    };
    let (mut a, mut b) = (random(&a_spec, seed), random(&b_spec, seed + 1));
    if c.special == Special::NonFinite {
        // Index of logical a[i, p] and b[p, j] in their storage.
        let ai = |i: usize, p: usize| if c.trans_a { p * c.m + i } else { i * c.k + p };
        let bi = |p: usize, j: usize| if c.trans_b { j * c.k + p } else { p * c.n + j };
        a[ai(1, c.k / 2)] = f64::NAN;
        a[ai(2, 0)] = f64::INFINITY;
        a[ai(3, c.k - 1)] = f64::NEG_INFINITY;
        b[bi(0, 5)] = 0.0;
    }
    let upload = |values: &[f64], spec: &TensorSpec| {
        Tensor::from_f64_rounded(values, spec, device).expect("input on the device")
    };
    (upload(&a, &a_spec), upload(&b, &b_spec))
}

/// The stored spec of a logical `[rows, cols]` operand: `[cols, rows]` when transposed.
fn stored(rows: usize, cols: usize, trans: bool, dtype: DType) -> TensorSpec {
    if trans {
        TensorSpec::new([cols, rows], dtype)
    } else {
        TensorSpec::new([rows, cols], dtype)
    }
}

struct Report {
    rows: Vec<String>,
    failures: Vec<String>,
    worst: Vec<(String, f64, f64)>,
}

impl Report {
    fn new() -> Self {
        Report {
            rows: Vec::new(),
            failures: Vec::new(),
            worst: Vec::new(),
        }
    }

    fn record(
        &mut self,
        variant: String,
        case: String,
        bound: f64,
        err: (f64, usize),
        got: f64,
        want: f64,
    ) {
        self.rows.push(format!(
            "gemm {variant:<15} {case:<34} worst err {:.3e} (bound {bound:.1e}) at {}",
            err.0, err.1
        ));
        let ok = err.0 <= bound;
        if !ok {
            self.failures.push(format!(
                "gemm {variant} {case}: error {:.3e} > {bound:.1e} at element {} (got {got}, want {want})",
                err.0, err.1
            ));
        }
        // The worst error as a fraction of its bound, per variant.
        match self.worst.iter_mut().find(|(v, _, _)| *v == variant) {
            Some(entry) if err.0 / bound > entry.2 => {
                entry.1 = err.0;
                entry.2 = err.0 / bound;
            }
            Some(_) => {}
            None => self.worst.push((variant, err.0, err.0 / bound)),
        }
    }

    fn finish(self) {
        for row in &self.rows {
            println!("{row}");
        }
        for (variant, worst, ratio) in &self.worst {
            println!(
                "WORST gemm {variant}: {worst:.3e} ({:.0}% of its bound)",
                ratio * 100.0
            );
        }
        assert!(
            self.failures.is_empty(),
            "{} failures:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Runs every case on `device`; `max_work` skips cases above that many multiply-adds (the CPU
/// harness in a debug build).
fn gemm_cases(device: &Device, max_work: usize) -> Report {
    let mut report = Report::new();
    let mut seed = 900;
    for (dtype, tf32) in VARIANTS {
        for c in cases() {
            seed += 2;
            if c.m * c.n * c.k > max_work {
                continue;
            }
            let (a, b) = make_inputs(&c, dtype, seed, device);
            let op = Gemm::new(
                a.spec().clone(),
                b.spec().clone(),
                tileops::ops::GemmOptions::new()
                    .trans_a(c.trans_a)
                    .trans_b(c.trans_b)
                    .allow_tf32(tf32),
                device,
            )
            .expect("valid plan");
            let mut out = Tensor::full(op.c(), f64::NAN, device).expect("poisoned output");
            op.forward_into(&a, &b, &mut out).expect("launch");
            device.synchronize().expect("gemm ran");
            let got = out.to_vec_f64().expect("copy back");
            let (av, bv) = (a.to_vec_f64().expect("a"), b.to_vec_f64().expect("b"));
            let want = reference::gemm(&av, &bv, c.m, c.n, c.k, c.trans_a, c.trans_b);
            let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
            let scale = reference::gemm(&abs(&av), &abs(&bv), c.m, c.n, c.k, c.trans_a, c.trans_b);
            let err = worst_error(&got, &want, &scale, dtype);
            let layout = match (c.trans_a, c.trans_b) {
                (false, false) => "nn",
                (true, false) => "tn",
                (false, true) => "nt",
                (true, true) => "tt",
            };
            let name = format!(
                "{}x{}x{} {layout}{}",
                c.m,
                c.n,
                c.k,
                if c.special == Special::NonFinite {
                    " +inf/nan"
                } else {
                    ""
                }
            );
            let bound = gemm_bound(dtype, tf32, c.k);
            report.record(
                label(dtype, tf32),
                name,
                bound,
                err,
                got[err.1],
                want[err.1],
            );
        }
    }
    report
}

#[test]
fn gemm_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("gemm_matches_the_reference") else {
        return;
    };
    gemm_cases(&gpu, usize::MAX).finish();
}

/// The harness itself, on the CPU: correctly rounded outputs must pass every bound (so the bounds
/// are not too tight for the best possible kernel), and poisoned or wrong elements must fail.
/// A debug build runs only the cases up to 2^21 multiply-adds (the reference is ~30x slower).
#[test]
fn harness_accepts_correctly_rounded_outputs_and_catches_poison() {
    let max_work = if cfg!(debug_assertions) {
        1 << 21
    } else {
        usize::MAX
    };
    gemm_cases(&Device::cpu(), max_work).finish();
    let want = [2.0, f64::NAN, -1.0, f64::INFINITY];
    let scale = [4.0, f64::NAN, 3.0, f64::INFINITY];
    assert_eq!(worst_error(&want, &want, &scale, DType::Float32).0, 0.0);
    // The poison (NaN) where a finite value belongs.
    assert!(
        worst_error(
            &[f64::NAN, f64::NAN, -1.0, f64::INFINITY],
            &want,
            &scale,
            DType::Float16
        )
        .0
        .is_infinite()
    );
    // A wrong infinity, and an error just above the bf16 bound.
    assert!(
        worst_error(
            &[2.0, f64::NAN, -1.0, f64::NEG_INFINITY],
            &want,
            &scale,
            DType::Float32
        )
        .0
        .is_infinite()
    );
    let b = gemm_bound(DType::BFloat16, false, 1);
    let off = [2.0 + 4.0 * b * 1.01, f64::NAN, -1.0, f64::INFINITY];
    assert!(worst_error(&off, &want, &scale, DType::BFloat16).0 > b);
    // TF32 bounds are looser than strict float32's, which must catch TF32 rounding.
    assert!(gemm_bound(DType::Float32, true, 64) > 10.0 * gemm_bound(DType::Float32, false, 64));
}

/// Strict float32 must not run as TF32: `(1 + 2^-20) * 1` survives f32, not TF32's 10 bits.
#[test]
fn strict_float32_keeps_every_bit() {
    let Some(gpu) = gpu_or_skip("strict_float32_keeps_every_bit") else {
        return;
    };
    let x = 1.0 + 2f32.powi(-20);
    let a = Tensor::from_f32_slice(&[x; 4], [2, 2], &gpu).expect("upload");
    let b = Tensor::from_f32_slice(&[1.0, 0.0, 0.0, 1.0], [2, 2], &gpu).expect("upload");
    let strict = Gemm::new(
        a.spec().clone(),
        b.spec().clone(),
        tileops::ops::GemmOptions::new(),
        &gpu,
    )
    .expect("plan");
    let c = strict
        .forward(&a, &b)
        .expect("forward")
        .to_vec_f32()
        .expect("copy");
    assert_eq!(c, vec![x; 4]);
    let tf32 = Gemm::new(
        a.spec().clone(),
        b.spec().clone(),
        tileops::ops::GemmOptions::new().allow_tf32(true),
        &gpu,
    )
    .expect("plan");
    let c = tf32
        .forward(&a, &b)
        .expect("forward")
        .to_vec_f32()
        .expect("copy");
    // TF32 *allows* the tensor cores; cuBLASLt may still pick an FP32 kernel for a 2x2 product.
    assert!(c.iter().all(|&v| v == 1.0 || v == x), "{c:?}");
    println!(
        "allow_tf32 on a 2x2 product: {}",
        if c[0] == 1.0 {
            "ran as TF32"
        } else {
            "ran in FP32"
        }
    );
}

#[test]
fn gpu_plans_reject_cpu_tensors() {
    let Some(gpu) = gpu_or_skip("gpu_plans_reject_cpu_tensors") else {
        return;
    };
    let spec = TensorSpec::new([4, 8], DType::BFloat16);
    let op = Gemm::new(
        spec.clone(),
        spec.clone(),
        tileops::ops::GemmOptions::new().trans_b(true),
        &gpu,
    )
    .expect("valid plan");
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let on_gpu = Tensor::random(&spec, 2, &gpu).expect("gpu tensor");
    let err = op.forward(&on_cpu, &on_gpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
    let err = op.forward(&on_gpu, &on_cpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}

/// FLOPs of the largest workload case that runs on the emulated device (cuda-emu): 2^33, so the
/// DeepSeek-V3 decode products run (m = 128, about 3.9e9 FLOPs, a few seconds of the host
/// stand-in each). The prefill products (1.2e11 FLOPs each) would take the emulator over ten
/// minutes: there they are planned but not run. No code path is lost: each is the same cuBLASLt
/// call with other sizes, and every layout and dtype runs in `gemm_matches_the_reference` (and in
/// `coverage::gpu`).
const EMULATED_FLOP_BUDGET: u64 = 1 << 33;

/// Every manifest workload plans on the GPU (cuBLASLt finds an algorithm) and runs once. On the
/// emulated device every case is planned, but only those up to [`EMULATED_FLOP_BUDGET`] run.
#[test]
fn every_workload_runs_on_the_gpu() {
    let Some(gpu) = gpu_or_skip("every_workload_runs_on_the_gpu") else {
        return;
    };
    let emulated = gpu.is_emulated();
    let gemm = tileops::registry::find("gemm").expect("gemm is registered");
    let (mut ran, mut skipped) = (0, 0);
    for workload in gemm.workloads {
        for case in workload.cases() {
            let op = (gemm.build)(&gpu, &case).unwrap_or_else(|e| panic!("{}: {e}", case.name()));
            let flops = op
                .roofline()
                .unwrap_or_else(|e| panic!("{}: roofline: {e}", case.name()))
                .flops;
            if emulated && flops > EMULATED_FLOP_BUDGET {
                println!("{}: planned, not run ({flops} FLOPs)", case.name());
                skipped += 1;
                continue;
            }
            let inputs = op.random_inputs(7).expect("inputs");
            let out = op.run(&inputs).expect("run");
            gpu.synchronize().expect("ran");
            let values = out[0].to_vec_f32().expect("copy back");
            assert!(values.iter().all(|v| v.is_finite()), "{}", case.name());
            println!("{}: ok ({}, {flops} FLOPs)", case.name(), op.roof());
            ran += 1;
        }
    }
    if skipped > 0 {
        println!("emulated: skipping {skipped} large workload cases (covered on a real GPU)");
    }
    println!("{ran} workload cases ran");
    assert!(ran > 0, "no workload case ran");
}

/// cuBLASLt's heuristic assumes 256-byte-aligned operands unless its `MIN_ALIGNMENT_*_BYTES`
/// preferences say otherwise, and may then pick a kernel that faults on (or, on cuda-emu, refuses)
/// a less aligned pointer; tileops's ops accept any 16-byte-aligned buffer. One plan runs on the
/// driver's own allocations, then on operands 16, 48 and 32 bytes past 256-byte boundaries
/// (wrapped from inside one allocation, as a caller's sub-buffer would be), and both give the
/// exact product (small integers: every algorithm sums them exactly).
#[test]
fn gemm_runs_on_operands_aligned_to_16_bytes_only() {
    use cudarc::driver::DevicePtr;
    let Some(gpu) = gpu_or_skip("gemm_runs_on_operands_aligned_to_16_bytes_only") else {
        return;
    };
    let stream = gpu
        .cuda_stream()
        .expect("a GPU device has a stream")
        .clone();
    let (m, n, k) = (32, 48, 64);
    let small = |i: usize, salt: usize| ((i * 7 + salt) % 3) as f64 - 1.0;
    let a_values: Vec<f64> = (0..m * k).map(|i| small(i, 1)).collect();
    let b_values: Vec<f64> = (0..k * n).map(|i| small(i, 2)).collect();
    let want = reference::gemm(&a_values, &b_values, m, n, k, false, false);
    for (dtype, tf32) in VARIANTS {
        let what = label(dtype, tf32);
        let a_spec = TensorSpec::new([m, k], dtype);
        let b_spec = TensorSpec::new([k, n], dtype);
        let a = Tensor::from_f64_rounded(&a_values, &a_spec, &gpu).expect("upload");
        let b = Tensor::from_f64_rounded(&b_values, &b_spec, &gpu).expect("upload");
        let options = tileops::ops::GemmOptions::new().allow_tf32(tf32);
        let op = Gemm::new(a_spec.clone(), b_spec.clone(), options, &gpu).expect("plan");
        let aligned = op.forward(&a, &b).expect("forward").to_vec_f64();
        assert_eq!(
            aligned.expect("copy"),
            want,
            "{what}: 256-byte-aligned operands"
        );

        // One allocation; a, b and c inside it at 16, 48 and 32 bytes past a 256-byte boundary.
        let c_spec = op.c().clone();
        let sizes = [&a_spec, &b_spec, &c_spec].map(|s| s.size_in_bytes().expect("size"));
        let arena = stream
            .alloc_zeros::<u8>(sizes.iter().sum::<usize>() + 3 * 512)
            .expect("arena");
        let base = arena.device_ptr(&stream).0;
        let mut cursor = base;
        let mut views = Vec::new();
        for (size, offset) in sizes.into_iter().zip([16u64, 48, 32]) {
            let ptr = cursor.next_multiple_of(256) + offset;
            cursor = ptr + size as u64;
            assert_eq!(ptr % 256, offset);
            // SAFETY: `ptr..ptr + size` lies inside `arena`, which outlives the view; the view
            // is leaked below, never freed (it does not start an allocation).
            views.push(unsafe { stream.upgrade_device_ptr::<u8>(ptr, size) });
        }
        let [mut va, mut vb, vc] = <[_; 3]>::try_from(views).expect("three views");
        stream
            .memcpy_dtod(a.cuda_bytes().expect("a buffer"), &mut va)
            .expect("copy a");
        stream
            .memcpy_dtod(b.cuda_bytes().expect("b buffer"), &mut vb)
            .expect("copy b");
        let wrap = |view, spec: &TensorSpec| {
            Tensor::from_cuda_bytes(view, spec, &gpu).map_err(|refused| {
                let (error, view) = refused.into_parts();
                view.leak();
                error
            })
        };
        let (ta, tb, mut tc) = (
            wrap(va, &a_spec).expect("a view"),
            wrap(vb, &b_spec).expect("b view"),
            wrap(vc, &c_spec).expect("c view"),
        );
        let ran = op.forward_into(&ta, &tb, &mut tc);
        let got = ran.and_then(|()| tc.to_vec_f64());
        for t in [ta, tb, tc] {
            t.into_cuda_bytes().expect("the view back").leak();
        }
        drop(arena);
        let got = got.unwrap_or_else(|e| panic!("{what}: operands 16/48/32 bytes past 256: {e}"));
        assert_eq!(got, want, "{what}: operands 16/48/32 bytes past 256");
    }
}
