//! Every kernel entry point x dtype, launched at least once through the ops' public API, on small
//! shapes chosen from each op's plan code (`tileops/src/ops/*.rs`) to reach the edge cases of
//! every path; every output is compared with the f64 CPU reference, and every output starts
//! poisoned, so an element a kernel never writes shows up.
//!
//! The shapes are written in units of the dtype's 16-byte vector width `V` (4 float32, 8 float16
//! or bfloat16), so each dtype reaches the same path:
//! - row lengths that are not a multiple of `V` (odd lengths: every other row is misaligned), one
//!   element, length-1 rows, size-1 dims;
//! - each row kernel at and past its limit: `*_rows_v4` up to 4096 vectors (softmax and
//!   log_softmax: 1024, then `*_rows_v8` up to 4096), `*_rows_v16` up to 8192, then `*_loop` (the
//!   norms) or `*_partial` + `*_finalize` (softmax, log_softmax);
//! - the other layouts: `*_cols` and `*_cols_vec` (a non-last dim), the reduction split kernels
//!   (`reduce_*_split_*` + `reduce_finish_*`), the runs kernels (`reduce_runs_*`) and the strided
//!   multi-dim kernels, keepdim;
//! - grid-stride tails where a cheap shape reaches them (sized from the device's SM count);
//! - rope at positions 0 and max_pos - 1 (and outside the table), `rope_vec` and `rope_scalar`;
//!   fp8 saturation (beyond ±448, ±inf, NaN, all-zero and all-NaN groups, values under the scale
//!   floor) in every group-size class of `fp8_quant_rows` and `fp8_quant_loop`;
//! - gemm in the four transpose layouts x float32 (strict and TF32), float16, bfloat16;
//! - attention decode, dense and paged, with 16-bit and fp8 caches, through the split-KV merge
//!   (one case of `attention::gpu` per entry point; the family tests sweep the rest);
//! - attention prefill on tensor cores, f16 and bf16 x head dims 64, 128, 256 (one causal batch
//!   of two sequences, a tile edge in each; `attention::prefill_gpu` sweeps the rest);
//!
//! On the emulated device (cuda-emu) with `CUDA_EMU_COVERAGE_DIR` set, each test also reads the
//! emulator's list of the entries this process launched and fails when one of its family's entry
//! points is missing: a plan change that moves a shape off a kernel cannot go unnoticed.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one row per case and `WORST <op> <dtype>` lines.

use std::collections::HashSet;

use super::ledger;
use crate::attention::gpu::{Layout, decode_cases, decode_entry_cases};
use crate::attention::prefill_gpu::{prefill_cases, prefill_entry_cases};
use crate::common::{ACTIVATIONS, KeepWorst, Measures, POISON_CODE, activation_forward, download};
use crate::common::{DTYPES, POISON, Report, Special, bound, element_error, floor, gpu_or_skip};
use crate::common::{Fp8Check, code_distance, worst_scaled};
use crate::common::{gemm_bound, input_with, lined_up, make_input, reduction_sets, rope_table};
use crate::common::{row_specials, softmax_lines, worst_by, worst_codes, worst_error};
use crate::position_encoding::gpu::{case_plan, positions_as};
use tileops::kernels::{self, KernelSource};
use tileops::ops::reference as norm_act;
use tileops::ops::reference as rope_fp8;
use tileops::ops::reference::{self as reference_reduction, ReduceKind};
use tileops::ops::{
    Abs, Amax, Fp8Quant, FusedAddRmsNorm, Gelu, GeluApproximate, Gemm, LayerNorm, LogSoftmax,
    Logsumexp, Mean, Neg, QkNormRopeFp8, QkNormRopeFp8Output, ReduceDim, Relu, RmsNorm, RopeStyle,
    Sigmoid, Silu, SiluAndMul, Softmax, Sum, reference,
};
use tileops::{DType, Device, Tensor, TensorSpec};

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// Whether the innermost dim of `spec` is whole 16-byte vectors (every row aligned): the calls
/// whose access pattern the coalescing and bank-conflict gates judge. The scalar paths of
/// misaligned rows (odd lengths) are the coverage tests' edge cases, not a hot path.
fn whole_vectors(spec: &TensorSpec) -> bool {
    spec.shape
        .last()
        .is_none_or(|&n| (n * spec.dtype.size_in_bytes()).is_multiple_of(16))
}

/// The roofline of the activation `name` (as `activation_forward` plans it) on `spec`.
fn activation_roofline(
    name: &str,
    device: &Device,
    spec: &TensorSpec,
) -> Result<tileops::Roofline, tileops::RooflineError> {
    let spec = spec.clone();
    match name {
        "relu" => Relu::new(spec, device).expect("plan").eval_roofline(),
        "gelu" => Gelu::new(spec, GeluApproximate::None, device)
            .expect("plan")
            .eval_roofline(),
        "gelu_tanh" => Gelu::new(spec, GeluApproximate::Tanh, device)
            .expect("plan")
            .eval_roofline(),
        "silu" => Silu::new(spec, device).expect("plan").eval_roofline(),
        "neg" => Neg::new(spec, device).expect("plan").eval_roofline(),
        "abs" => Abs::new(spec, device).expect("plan").eval_roofline(),
        _ => Sigmoid::new(spec, device).expect("plan").eval_roofline(),
    }
}

/// Elements of `dtype` per 16-byte vector.
fn per_vector(dtype: DType) -> usize {
    16 / dtype.size_in_bytes()
}

/// The SM count the plans size their grids with (an H200's 132 on the CPU, where no grid is
/// launched).
fn sm_count(device: &Device) -> usize {
    device.sm_count().map_or(132, |n| n as usize)
}

fn special_label(special: bool) -> &'static str {
    if special { " +inf/nan" } else { "" }
}

/// The entry points of `source` whose dtype suffix (`_f32`, `_f16`, `_bf16`) is one of `dtypes`.
fn entries_of(source: &'static KernelSource, dtypes: &[DType]) -> Vec<&'static str> {
    let suffixes: Vec<&str> = dtypes
        .iter()
        .map(|d| match d {
            DType::Float32 => "_f32",
            DType::Float16 => "_f16",
            _ => "_bf16",
        })
        .collect();
    source
        .entries
        .iter()
        .map(|e| e.name)
        .filter(|name| suffixes.iter().any(|s| name.ends_with(s)))
        .collect()
}

/// On cuda-emu with `CUDA_EMU_COVERAGE_DIR` set: panics unless every one of `entries` is in the
/// emulator's list of what this process launched (`launched-<pid>.txt`, one name a line, written
/// at each entry's first launch). Elsewhere a no-op.
fn assert_launched(device: &Device, family: &str, entries: &[&'static str]) {
    if !device.is_emulated() {
        return;
    }
    let Some(dir) = std::env::var_os("CUDA_EMU_COVERAGE_DIR") else {
        return;
    };
    let path = std::path::Path::new(&dir).join(format!("launched-{}.txt", std::process::id()));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{family}: reading {}: {e}", path.display()));
    let launched: HashSet<&str> = text.lines().map(str::trim).collect();
    let missing: Vec<&str> = entries
        .iter()
        .copied()
        .filter(|e| !launched.contains(e))
        .collect();
    assert!(
        missing.is_empty(),
        "{family}: these entry points never launched (the shapes no longer reach them): {missing:?}"
    );
    println!("{family}: all {} entry points launched", entries.len());
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax: rows_v4, rows_v8, rows_v16, partial + finalize, cols, cols_vec
// ---------------------------------------------------------------------------------------------

/// (shape, dim, non-finite lines) for one dtype of vector width `v`. `big` adds, in float32, a
/// grid-stride tail of a cols kernel (more column groups than the 16 blocks per SM x 256 threads
/// the plan launches): `*_cols` for softmax, `*_cols_vec` for log_softmax (one body each, with the
/// output step as a template parameter).
fn softmax_shapes(v: usize, sm: usize, big: bool, log: bool) -> Vec<(Vec<usize>, i64, bool)> {
    let mut cases = vec![
        // Last dim, rows_v4: one element, length-1 rows (4 rows a block: a partial last block),
        // odd lengths, 256 threads a row at the v4 limit.
        (vec![1], 0, false),
        (vec![1, 1], -1, false),
        (vec![37, 1], -1, false),
        (vec![3, 7], -1, false),
        (vec![5, 4 * v + 1], -1, true),
        (vec![6, 2 * v], -1, false),
        (vec![3, 1024 * v + 3], -1, false),
        // rows_v8: just past the v4 limit (odd), and 512 threads a row at its own limit.
        (vec![3, 1025 * v + 5], -1, true),
        (vec![2, 4096 * v], -1, false),
        // rows_v16: just past the v8 limit (odd), and at its own limit.
        (vec![4, 4097 * v + 3], -1, true),
        (vec![2, 8192 * v], -1, false),
        // partial + finalize: 5 chunks of 2048 vectors (odd length), and whole chunks.
        (vec![4, 8193 * v + 5], -1, true),
        (vec![1, 16384 * v], -1, false),
        // A trailing size-1 dim: the rows path over dim 1.
        (vec![3, 5, 1], 1, false),
        // cols (inner not a whole number of vectors): inner 3, 5; n = 1.
        (vec![2, 3], 0, false),
        (vec![4, 33, 5], 1, true),
        (vec![1, 1, 3], 1, false),
        (vec![2, 3, 4, 5], -2, false),
        // cols_vec: inner a whole number of vectors; n = 1.
        (vec![4, 6, 2 * v], 1, true),
        (vec![6, 2, 8], 0, false),
        (vec![3, 1, v], 1, false),
    ];
    if big && v == 4 {
        let groups = sm * 16 * 256;
        cases.push(if log {
            (vec![groups + 1, 1, 4], 1, false)
        } else {
            (vec![1, 2, groups + 3], 1, false)
        });
    }
    cases
}

fn softmax_cases(device: &Device, big: bool) -> Report {
    let mut report = Report::new(11, 36);
    let mut seed = 10_000;
    let sm = sm_count(device);
    for log in [false, true] {
        let op_name = if log { "log_softmax" } else { "softmax" };
        for dtype in DTYPES {
            for (shape, dim, special) in softmax_shapes(per_vector(dtype), sm, big, log) {
                seed += 1;
                let spec = TensorSpec::new(shape.clone(), dtype);
                let axis = dim.rem_euclid(shape.len() as i64) as usize;
                let special_kind = if special {
                    Special::NonFinite
                } else {
                    Special::None
                };
                let lines = if special {
                    softmax_lines(&shape, axis, 4)
                } else {
                    Vec::new()
                };
                let x = make_input(&spec, seed, &special_kind, &lines, device);
                let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
                if log {
                    let op = LogSoftmax::new(spec.clone(), dim, device).expect("valid plan");
                    ledger::call(
                        device,
                        op_name,
                        op.eval_roofline(),
                        whole_vectors(&spec),
                        || op.forward_into(&x, &mut y),
                    )
                } else {
                    let op = Softmax::new(spec.clone(), dim, device).expect("valid plan");
                    ledger::call(
                        device,
                        op_name,
                        op.eval_roofline(),
                        whole_vectors(&spec),
                        || op.forward_into(&x, &mut y),
                    )
                }
                .expect("launch");
                let got = download(device, &y);
                let xs = x.to_vec_f64().expect("x");
                let outer = shape[..axis].iter().product();
                let inner = shape[axis + 1..].iter().product();
                let (want, scale) = if log {
                    // Log-probabilities: absolute error near 0.
                    let want = reference_reduction::log_softmax(&xs, outer, shape[axis], inner);
                    let ones = vec![1.0; want.len()];
                    (want, ones)
                } else {
                    let want = reference::softmax(&xs, outer, shape[axis], inner);
                    let zeros = vec![0.0; want.len()];
                    (want, zeros)
                };
                let err = worst_error(&got, &want, &scale, dtype);
                let label = format!("{shape:?} dim={dim}{}", special_label(special));
                report.record(op_name, label, dtype, err, &got, &want);
            }
        }
    }
    report
}

#[test]
fn softmax_and_log_softmax_reach_every_kernel() {
    let Some(gpu) = gpu_or_skip("softmax_and_log_softmax_reach_every_kernel") else {
        return;
    };
    softmax_cases(&gpu, true).finish();
    ledger::no_stale_exceptions(&["softmax", "log_softmax"]);
    assert_launched(&gpu, "softmax.cu", &entries_of(&kernels::SOFTMAX, &DTYPES));
}

// ---------------------------------------------------------------------------------------------
// rms_norm, layer_norm, fused_add_rms_norm: rows_v4, rows_v16 (not fused), loop
// ---------------------------------------------------------------------------------------------

/// (shape, non-finite rows) for one dtype of vector width `v`.
fn norm_shapes(v: usize) -> Vec<(Vec<usize>, bool)> {
    vec![
        (vec![1], false),
        (vec![1, 1], false),
        (vec![5, 1], true),
        (vec![3, 7], false),
        (vec![5, 4 * v + 1], true),
        (vec![4, 3, 2 * v + 1], false),
        (vec![3, 1024 * v + 3], false),
        // Whole vectors: layer_norm's v4 for rows a multiple of the vector width (x kept as
        // f32), several rows per block with rows past the end, and at its limit (512 threads).
        (vec![5, 8 * v], true),
        (vec![2, 2048 * v], false),
        // v4 at its limit (1024 threads; layer_norm's v16).
        (vec![2, 4096 * v], false),
        // v16 (the loop kernel for fused_add_rms_norm, which has no v16): past the v4 limit
        // (odd), and at the v16 limit.
        (vec![4, 4097 * v + 3], true),
        (vec![2, 8192 * v], false),
        // loop: past every register kernel (odd), and a whole number of vectors.
        (vec![4, 8193 * v + 5], true),
        (vec![2, 8193 * v], false),
    ]
}

fn norm_cases(device: &Device) -> Report {
    let mut report = Report::new(22, 30);
    let mut seed = 20_000;
    for dtype in DTYPES {
        for (shape, special) in norm_shapes(per_vector(dtype)) {
            seed += 4;
            let n = *shape.last().expect("rank >= 1");
            let rows = shape.iter().product::<usize>() / n;
            let spec = TensorSpec::new(shape.clone(), dtype);
            let p_spec = TensorSpec::new([n], dtype);
            let specials = if special {
                row_specials(rows, n)
            } else {
                Vec::new()
            };
            let label = format!("{shape:?}{}", special_label(special));
            let x = input_with(&spec, seed, &specials, device);
            let w = input_with(&p_spec, seed + 1, &[], device);
            let xs = x.to_vec_f64().expect("x");
            let ws = w.to_vec_f64().expect("w");

            // rms_norm: relative to the value (a product).
            let eps = 1e-6;
            let op = RmsNorm::new(spec.clone(), p_spec.clone(), eps, device).expect("valid plan");
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            ledger::call(
                device,
                "rms_norm",
                op.eval_roofline(),
                whole_vectors(&spec),
                || op.forward_into(&x, &w, &mut y),
            )
            .expect("launch");
            let got = download(device, &y);
            let want = reference::rms_norm(&xs, &ws, n, eps);
            let err = worst_error(&got, &want, &vec![0.0; want.len()], dtype);
            report.record("rms_norm", label.clone(), dtype, err, &got, &want);

            // layer_norm: (x - mean) * rstd * w and b can cancel; measured against both terms.
            let b = input_with(&p_spec, seed + 2, &[], device);
            let bs = b.to_vec_f64().expect("b");
            let eps = 1e-5;
            let op = LayerNorm::new(spec.clone(), p_spec.clone(), p_spec.clone(), eps, device)
                .expect("valid plan");
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            ledger::call(
                device,
                "layer_norm",
                op.eval_roofline(),
                whole_vectors(&spec),
                || op.forward_into(&x, &w, &b, &mut y),
            )
            .expect("launch");
            let got = download(device, &y);
            let want = norm_act::layer_norm(&xs, &ws, &bs, n, eps);
            let unbiased = norm_act::layer_norm(&xs, &ws, &vec![0.0; n], n, eps);
            let scale: Vec<f64> = unbiased
                .iter()
                .enumerate()
                .map(|(i, s)| s.abs() + bs[i % n].abs())
                .collect();
            let err = worst_error(&got, &want, &scale, dtype);
            report.record("layer_norm", label.clone(), dtype, err, &got, &want);

            // fused_add_rms_norm: residual_out is x + residual rounded to the dtype, y the norm
            // of that rounded sum.
            let r = input_with(&spec, seed + 3, &[], device);
            let rs = r.to_vec_f64().expect("residual");
            let eps = 1e-6;
            let op = FusedAddRmsNorm::new(spec.clone(), spec.clone(), p_spec.clone(), eps, device)
                .expect("valid plan");
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            let mut h = Tensor::full(&spec, POISON, device).expect("poisoned output");
            ledger::call(
                device,
                "fused_add_rms_norm",
                op.eval_roofline(),
                whole_vectors(&spec),
                || op.forward_into(&x, &r, &w, &mut y, &mut h),
            )
            .expect("launch");
            let (got_y, got_h) = (download(device, &y), download(device, &h));
            let sum: Vec<f64> = xs.iter().zip(&rs).map(|(a, b)| a + b).collect();
            let want_h = Tensor::from_f64_rounded(&sum, &spec, &Device::cpu())
                .and_then(|t| t.to_vec_f64())
                .expect("rounded sum");
            let h_scale: Vec<f64> = xs.iter().zip(&rs).map(|(a, b)| a.abs() + b.abs()).collect();
            let err = worst_error(&got_h, &want_h, &h_scale, dtype);
            report.record(
                "fused_add_rms_norm.res",
                label.clone(),
                dtype,
                err,
                &got_h,
                &want_h,
            );
            let want_y = norm_act::fused_add_rms_norm_y(&want_h, &ws, n, eps);
            let err = worst_error(&got_y, &want_y, &vec![0.0; want_y.len()], dtype);
            report.record("fused_add_rms_norm.y", label, dtype, err, &got_y, &want_y);
        }
    }
    report
}

#[test]
fn norms_reach_every_kernel() {
    let Some(gpu) = gpu_or_skip("norms_reach_every_kernel") else {
        return;
    };
    norm_cases(&gpu).finish();
    ledger::no_stale_exceptions(&["rms_norm", "layer_norm", "fused_add_rms_norm"]);
    let mut entries = entries_of(&kernels::RMS_NORM, &DTYPES);
    entries.extend(entries_of(&kernels::LAYER_NORM, &DTYPES));
    entries.extend(entries_of(&kernels::FUSED_ADD_RMS_NORM, &DTYPES));
    assert_launched(
        &gpu,
        "rms_norm.cu, layer_norm.cu, fused_add_rms_norm.cu",
        &entries,
    );
}

// ---------------------------------------------------------------------------------------------
// Activations (the vector loop and the scalar tail of each), silu_and_mul (vec, scalar)
// ---------------------------------------------------------------------------------------------

/// NaN, infinities, signed zeros, the far tails, and the deep negative tail where the f32
/// denominators `1 + exp(-x)` of sigmoid, silu and silu_and_mul cross 2^126 and then overflow
/// (signed zeros from there), with gelu_tanh's cancellation region and its own overflow.
const SPECIAL_VALUES: [f64; 19] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    -100.0,
    100.0,
    -30.0,
    12.0,
    -87.3365,
    -87.3366,
    -88.5,
    -88.72283_f32 as f64,
    -88.72284_f32 as f64,
    -89.0,
    -1e30,
    -6.0,
    -10.060965538024902,
    -10.060966491699219,
];

/// [`SPECIAL_VALUES`] at spread indices of an elementwise input of `len` (where they collide in a
/// short input, the later ones win).
fn elementwise_specials(len: usize) -> Vec<(usize, f64)> {
    SPECIAL_VALUES
        .iter()
        .enumerate()
        .map(|(k, &v)| ((k * 7919 + 3) % len.max(1), v))
        .collect()
}

/// [`SPECIAL_VALUES`] in the gates of a SwiGLU input of `rows` x `2n` (spread over rows and
/// columns), and NaN and the infinities in some `up` halves too.
fn swiglu_specials(rows: usize, n: usize) -> Vec<(usize, f64)> {
    let at = |k: usize, up: bool| (k % rows) * 2 * n + (k * 7919 + 3) % n + if up { n } else { 0 };
    let mut out: Vec<(usize, f64)> = SPECIAL_VALUES
        .iter()
        .enumerate()
        .map(|(k, &v)| (at(k, false), v))
        .collect();
    out.extend(
        SPECIAL_VALUES[..3]
            .iter()
            .enumerate()
            .map(|(k, &v)| (at(k + 5, true), v)),
    );
    out
}

/// Elementwise shapes for vector width `v`: the scalar tail alone, one vector, vectors and a
/// tail, one block's full unroll round, several blocks with a partial last round; `big` adds, for
/// float32 relu only, more vectors than one wave of blocks x 4 unrolled loads covers, so the
/// grid-stride loop wraps.
fn activation_shapes(v: usize, sm: usize, big: bool) -> Vec<Vec<usize>> {
    let mut shapes = vec![
        vec![1],
        vec![v - 1],
        vec![v],
        vec![2, v + 1],
        vec![3, 37],
        vec![1024 * v + 5],
        vec![4100 * v + 3],
    ];
    if big {
        let wave = sm * 8 * 256;
        shapes.push(vec![(4 * wave + 3 * 256 + 7) * v + 3]);
    }
    shapes
}

/// One elementwise case (an activation or silu_and_mul) on the input `x` of `shape`, with the
/// special values written in.
struct ElementwiseCase<'a> {
    op: &'a str,
    shape: &'a [usize],
    device: &'a Device,
    x: &'a Tensor,
    y_spec: &'a TensorSpec,
}

impl ElementwiseCase<'_> {
    /// Runs `forward` into a poisoned output of `y_spec` and records its error against
    /// `reference` of the input's values, relative to the value itself.
    fn check(
        &self,
        report: &mut Report,
        forward: impl FnOnce(&mut Tensor),
        reference: impl FnOnce(Vec<f64>) -> Vec<f64>,
    ) {
        let dtype = self.x.dtype();
        let mut y = Tensor::full(self.y_spec, POISON, self.device).expect("poisoned output");
        forward(&mut y);
        let got = download(self.device, &y);
        let want = reference(self.x.to_vec_f64().expect("x"));
        let err = worst_error(&got, &want, &vec![0.0; want.len()], dtype);
        let shape = self.shape;
        report.record(
            self.op,
            format!("{shape:?} +specials"),
            dtype,
            err,
            &got,
            &want,
        );
    }
}

fn activation_cases(device: &Device, big: bool) -> Report {
    let mut report = Report::new(12, 30);
    let mut seed = 30_000;
    let sm = sm_count(device);
    for (name, f) in ACTIVATIONS {
        for dtype in DTYPES {
            let wrap = big && name == "relu" && dtype == DType::Float32;
            for shape in activation_shapes(per_vector(dtype), sm, wrap) {
                seed += 1;
                let spec = TensorSpec::new(shape.clone(), dtype);
                let x = input_with(
                    &spec,
                    seed,
                    &elementwise_specials(spec.numel().unwrap()),
                    device,
                );
                let case = ElementwiseCase {
                    op: name,
                    shape: &shape,
                    device,
                    x: &x,
                    y_spec: &spec,
                };
                case.check(
                    &mut report,
                    |y| {
                        ledger::call(
                            device,
                            name,
                            activation_roofline(name, device, &spec),
                            whole_vectors(&spec),
                            || activation_forward(name, device, &spec, &x, y),
                        )
                    },
                    |xs| xs.into_iter().map(f).collect(),
                );
            }
        }
    }
    report
}

#[test]
fn activations_reach_every_kernel() {
    let Some(gpu) = gpu_or_skip("activations_reach_every_kernel") else {
        return;
    };
    activation_cases(&gpu, false).finish();
    ledger::no_stale_exceptions(&ACTIVATIONS.map(|(name, _)| name));
    assert_launched(
        &gpu,
        "activation.cu",
        &entries_of(&kernels::ACTIVATION, &DTYPES),
    );
}

/// SwiGLU shapes `[.., 2N]` for vector width `v`: N = 1 and odd N (scalar), N a whole number of
/// vectors (vec), N over one block's columns in both kernels (a partial unroll round in vec).
fn silu_and_mul_shapes(v: usize) -> Vec<Vec<usize>> {
    vec![
        vec![1, 2],
        vec![3, 14],
        vec![5, 2 * (v + 1)],
        vec![3, 2 * (257 * v + 1)],
        vec![1, 2 * v],
        vec![2, 3, 2 * v],
        vec![4, 2 * (1025 * v)],
    ]
}

fn silu_and_mul_cases(device: &Device) -> Report {
    let mut report = Report::new(12, 30);
    let mut seed = 35_000;
    for dtype in DTYPES {
        for shape in silu_and_mul_shapes(per_vector(dtype)) {
            seed += 1;
            let spec = TensorSpec::new(shape.clone(), dtype);
            let op = SiluAndMul::new(spec.clone(), device).expect("valid plan");
            let n = shape[shape.len() - 1] / 2;
            let rows = spec.numel().unwrap() / (2 * n);
            let x = input_with(&spec, seed, &swiglu_specials(rows, n), device);
            let case = ElementwiseCase {
                op: "silu_and_mul",
                shape: &shape,
                device,
                x: &x,
                y_spec: op.y(),
            };
            case.check(
                &mut report,
                |y| {
                    ledger::call(
                        device,
                        "silu_and_mul",
                        op.eval_roofline(),
                        whole_vectors(&spec),
                        || op.forward_into(&x, y),
                    )
                    .expect("launch")
                },
                |xs| norm_act::silu_and_mul(&xs, n),
            );
        }
    }
    report
}

#[test]
fn silu_and_mul_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("silu_and_mul_reaches_every_kernel") else {
        return;
    };
    silu_and_mul_cases(&gpu).finish();
    ledger::no_stale_exceptions(&["silu_and_mul"]);
    assert_launched(
        &gpu,
        "silu_and_mul.cu",
        &entries_of(&kernels::SILU_AND_MUL, &DTYPES),
    );
}

// ---------------------------------------------------------------------------------------------
// sum, mean, amax, logsumexp: rows, rows_split, cols, cols_split, cols_vec, cols_vec_split,
// runs, strided, finish
// ---------------------------------------------------------------------------------------------

const KINDS: [ReduceKind; 4] = [
    ReduceKind::Sum,
    ReduceKind::Mean,
    ReduceKind::Amax,
    ReduceKind::Logsumexp,
];

/// (shape, dims, keepdim, non-finite sets) for vector width `v` on `sm` SMs. `cols_tail` adds
/// the grid-stride tails of the cols and cols_vec kernels (more tiles than 16 blocks per SM),
/// `strided_tail` that of the strided kernel (more outputs than 32 blocks per SM: a million
/// emulated threads, so once).
fn reduction_shapes(
    v: usize,
    sm: usize,
    cols_tail: bool,
    strided_tail: bool,
) -> Vec<(Vec<usize>, Vec<i64>, bool, bool)> {
    let mut cases = vec![
        // Rows (the reduced dims trailing): one element, n = 1, odd n, keepdim, many rows,
        // size-1 reduced dims (n = 1), every dim, merged trailing dims.
        (vec![1], vec![0], false, false),
        (vec![1, 1], vec![-1], true, false),
        (vec![37, 1], vec![-1], false, false),
        (vec![3, 7], vec![-1], true, false),
        (vec![5, 4 * v + 1], vec![1], false, true),
        (vec![2 * sm + 5, 2 * v + 1], vec![-1], false, false),
        (vec![6, 1, 8], vec![1], false, false),
        (vec![3, 4, 5], vec![0, 1, 2], false, false),
        (vec![6, 5, 9], vec![-1, -2], true, true),
        (vec![7, 1, 3], vec![0, 2], true, false),
        // Rows split (few rows, at least 1024 vectors each): 2 and 8 chunks, odd n.
        (vec![4, 1024 * v + 3], vec![-1], false, true),
        (vec![2, 4096 * v + 1], vec![-1], true, false),
        (vec![3, 1500 * v + 7], vec![1], false, false),
        // Cols (one block of reduced dims between kept ones), inner not whole vectors.
        (vec![2, 3], vec![0], false, false),
        (vec![4, 33, 5], vec![1], false, true),
        (vec![2, 3, 4, 5], vec![1, 2], true, false),
        (vec![2, 1, 3, 1, 4], vec![0, 2], false, false),
        // Enough tiles for no split with n >= 64.
        (vec![2 * sm + 1, 64, 3], vec![1], false, false),
        // Cols vec: inner a whole number of vectors (8 and 16 are, for every dtype).
        (vec![3, 10, 8], vec![1], true, false),
        (vec![4, 6, 16], vec![1], false, true),
        (vec![2 * sm + 1, 64, v], vec![1], false, false),
        // Cols split (few tiles, n >= 64): uneven slices of n.
        (vec![2, 100, 5], vec![1], false, true),
        (vec![300, 3], vec![0], true, false),
        // Cols vec split.
        (vec![2, 100, 8], vec![1], false, false),
        (vec![64, 6 * v], vec![0], true, false),
        (vec![4, 70, 16], vec![1], false, true),
        // Runs: several blocks of reduced dims, the innermost reduced and at least 8 vectors
        // long: whole vectors, an odd run (misaligned runs), few long runs in chunks, keepdim.
        (vec![4, 12, 16 * v], vec![0, 2], true, true),
        (vec![3, 2, 8 * v + 3], vec![0, 2], false, false),
        (vec![2, 3, 1024 * v + 5], vec![0, 2], false, true),
        // Strided: several blocks of reduced dims; keepdim; long reduction sets.
        (vec![4, 12, 5], vec![0, 2], true, true),
        (vec![2, 3, 4, 5], vec![0, 3], false, false),
        (vec![3, 2, 5, 2, 7], vec![0, 2, 4], false, true),
        (vec![3, 4, 100], vec![0, 2], false, false),
        (vec![2, 3, 4], vec![-3, -1], true, false),
    ];
    if cols_tail {
        cases.push((vec![sm * 16 + 5, 2, 3], vec![1], false, false));
        cases.push((vec![sm * 16 + 5, 2, v], vec![1], false, false));
    }
    if strided_tail {
        cases.push((vec![2, sm * 32 + 7, 2], vec![0, 2], false, false));
    }
    cases
}

fn run_reduction(
    kind: ReduceKind,
    device: &Device,
    x: &Tensor,
    dim: ReduceDim,
    keepdim: bool,
) -> (Vec<f64>, Vec<usize>, Vec<usize>) {
    let spec = x.spec().clone();
    macro_rules! run {
        ($op:ident, $name:literal) => {{
            let op = $op::new(spec, dim, keepdim, device).expect("valid plan");
            let mut y = Tensor::full(op.y(), POISON, device).expect("poisoned output");
            ledger::call(
                device,
                $name,
                op.eval_roofline(),
                whole_vectors(x.spec()),
                || op.forward_into(x, &mut y),
            )
            .expect("launch");
            (
                download(device, &y),
                op.axes().to_vec(),
                op.y().shape.clone(),
            )
        }};
    }
    match kind {
        ReduceKind::Sum => run!(Sum, "sum"),
        ReduceKind::Mean => run!(Mean, "mean"),
        ReduceKind::Amax => run!(Amax, "amax"),
        ReduceKind::Logsumexp => run!(Logsumexp, "logsumexp"),
    }
}

fn reduction_cases(device: &Device, big: bool) -> Report {
    let mut report = Report::new(11, 44);
    let mut seed = 40_000;
    let sm = sm_count(device);
    for (k, kind) in KINDS.into_iter().enumerate() {
        for (d, dtype) in DTYPES.into_iter().enumerate() {
            // The cols tails once per dtype (sum f32, logsumexp f16, amax bf16), the strided
            // tail once (logsumexp f16: the (max, sum) state).
            let cols_tail = big && (k + d) % 4 == 0;
            let strided_tail = big && kind == ReduceKind::Logsumexp && dtype == DType::Float16;
            for (shape, dims, keepdim, special) in
                reduction_shapes(per_vector(dtype), sm, cols_tail, strided_tail)
            {
                seed += 1;
                let spec = TensorSpec::new(shape.clone(), dtype);
                let rank = shape.len() as i64;
                let mut axes: Vec<usize> =
                    dims.iter().map(|d| d.rem_euclid(rank) as usize).collect();
                axes.sort_unstable();
                let sets = reduction_sets(&shape, &axes);
                let special_kind = if special {
                    Special::NonFinite
                } else {
                    Special::None
                };
                let x = make_input(&spec, seed, &special_kind, &sets, device);
                let dim = if dims.len() == 1 {
                    ReduceDim::One(dims[0])
                } else {
                    ReduceDim::Many(dims.clone())
                };
                let (got, planned_axes, y_shape) = run_reduction(kind, device, &x, dim, keepdim);
                assert_eq!(planned_axes, axes, "{shape:?} {dims:?}");
                let want_shape: Vec<usize> = (0..shape.len())
                    .filter_map(|d| match (axes.contains(&d), keepdim) {
                        (false, _) => Some(shape[d]),
                        (true, true) => Some(1),
                        (true, false) => None,
                    })
                    .collect();
                assert_eq!(y_shape, want_shape, "{shape:?} {dims:?} keepdim={keepdim}");
                let xs = x.to_vec_f64().expect("x");
                let want = reference_reduction::reduce(&xs, &shape, &axes, kind);
                let scale: Vec<f64> = sets
                    .iter()
                    .map(|set| {
                        let abs: f64 = set.iter().map(|&i| xs[i].abs()).sum();
                        match kind {
                            ReduceKind::Sum => abs,
                            ReduceKind::Mean => abs / set.len() as f64,
                            ReduceKind::Amax => 0.0,
                            ReduceKind::Logsumexp => 1.0,
                        }
                    })
                    .collect();
                let err = worst_error(&got, &want, &scale, dtype);
                let label = format!(
                    "{shape:?} dim={dims:?}{}{}",
                    if keepdim { " keepdim" } else { "" },
                    special_label(special)
                );
                report.record(kind.name(), label, dtype, err, &got, &want);
            }
        }
    }
    report
}

#[test]
fn reductions_reach_every_kernel() {
    let Some(gpu) = gpu_or_skip("reductions_reach_every_kernel") else {
        return;
    };
    reduction_cases(&gpu, true).finish();
    ledger::no_stale_exceptions(&["sum", "mean", "amax", "logsumexp"]);
    assert_launched(&gpu, "reduce.cu", &entries_of(&kernels::REDUCE, &DTYPES));
}

// ---------------------------------------------------------------------------------------------
// rope (vec, scalar), fp8_quant (rows, loop), qk_norm_rope_fp8
// ---------------------------------------------------------------------------------------------

/// Positions 0 and `max_pos - 1` first, then spread over the table; with `bad`, the last two are
/// -1 and `max_pos` (outside the table: the GPU writes NaN rows; the CPU path refuses them).
fn rope_positions(tokens: usize, max_pos: usize, seed: u64, bad: bool) -> Vec<i64> {
    let mut p: Vec<i64> = (0..tokens)
        .map(|t| match t {
            0 => 0,
            1 => max_pos as i64 - 1,
            _ => ((seed as usize * 31 + t * 7) % max_pos) as i64,
        })
        .collect();
    if bad && tokens >= 4 {
        p[tokens - 2] = -1;
        p[tokens - 1] = max_pos as i64;
    }
    p
}

/// (tokens, heads, head_dim, non-finite x, positions outside the table) for vector width `v`.
fn rope_shapes(v: usize) -> Vec<(usize, usize, usize, bool, bool)> {
    vec![
        // rope_scalar: head_dim / 2 not a whole number of vectors.
        (1, 1, 2, false, false),
        (3, 2, 6, true, false),
        (5, 2, v, false, true),
        // More pairs than the 512 threads of a block.
        (2, 40, 30, false, false),
        (2, 3, 8190, false, false),
        // rope_vec.
        (4, 3, 2 * v, true, false),
        (7, 4, 4 * v, false, true),
        (2, 33, 256, false, false),
        // The largest head_dim (32 KiB of shared table row).
        (3, 1, 8192, false, false),
    ]
}

fn rope_cases(device: &Device) -> Measures {
    let mut report = Measures::new(44, KeepWorst::RelativeToBound, 1);
    let mut seed = 50_000;
    let max_pos = 37;
    for dtype in DTYPES {
        for (i, (tokens, heads, head_dim, special, bad)) in
            rope_shapes(per_vector(dtype)).into_iter().enumerate()
        {
            seed += 1;
            let bad = bad && device.is_cuda();
            // Both pair layouts on the scalar and the vector kernels (shapes 0-4 and 5-8), and
            // every index and table dtype in turn.
            let style = if i % 2 == 0 {
                RopeStyle::NeoX
            } else {
                RopeStyle::Interleaved
            };
            let shape = [tokens, heads, head_dim];
            let (op, xs, cs) = case_plan(i, shape, dtype, max_pos, style, device);
            let (pos_dtype, table_dtype) = (op.positions().dtype, cs.dtype);
            let mut specials = Vec::new();
            if special {
                let last = xs.numel().unwrap() - 1;
                specials = vec![
                    (1, f64::NAN),
                    (head_dim + 2, f64::INFINITY),
                    (last, f64::NEG_INFINITY),
                ];
            }
            let x = input_with(&xs, seed, &specials, device);
            let xv = x.to_vec_f64().expect("x");
            let pv = rope_positions(tokens, max_pos, seed, bad);
            // A uint32 -1 is 2^32 - 1: outside the table too.
            let stored: Vec<i64> = match pos_dtype {
                DType::UInt32 => pv.iter().map(|&p| i64::from(p as u32)).collect(),
                _ => pv.clone(),
            };
            let p = positions_as(&stored, pos_dtype, device);
            let c = Tensor::from_f64_rounded(&rope_table(max_pos, head_dim), &cs, device)
                .expect("table");
            let tv = c.to_vec_f64().expect("table");
            let mut y = Tensor::full(&xs, POISON, device).expect("poisoned output");
            ledger::call(
                device,
                "rope",
                op.eval_roofline(),
                whole_vectors(&xs),
                || op.forward_into(&x, &p, &c, &mut y),
            )
            .expect("launch");
            let got = download(device, &y);
            let (want, magnitude) =
                rope_fp8::rope_with_style(&xv, &stored, &tv, heads, head_dim, style);
            let err = worst_scaled(&got, &want, &magnitude, floor(dtype));
            let label = format!(
                "[{tokens}, {heads}, {head_dim}] {style:?} {pos_dtype} {table_dtype} pos 0, {}{}{}",
                max_pos - 1,
                special_label(special),
                if bad { " +bad pos" } else { "" }
            );
            let detail = format!("got {}, want {}", got[err.1], want[err.1]);
            report.record("rope", &label, dtype, "rel err", err, bound(dtype), detail);
        }
    }
    report
}

#[test]
fn rope_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("rope_reaches_every_kernel") else {
        return;
    };
    rope_cases(&gpu).finish();
    ledger::no_stale_exceptions(&["rope"]);
    assert_launched(&gpu, "rope.cu", &entries_of(&kernels::ROPE, &DTYPES));
}

/// The largest finite value of `dtype`.
fn max_finite(dtype: DType) -> f64 {
    match dtype {
        DType::Float16 => 65504.0,
        DType::BFloat16 => 3.389_531_389_251_535_5e38,
        _ => f64::from(f32::MAX),
    }
}

/// Edge values group by group (groups of `group`, cycling through nine kinds): a NaN; a +inf; one
/// large value with the rest tiny (subnormal codes and zeros); all zeros of both signs; values far
/// beyond ±448 with the dtype's largest finite value; a -inf; all NaN; all under the scale floor
/// (`amax < 448 * MIN_SCALE`, about 2e-3); the ninth keeps its random values.
fn quant_edges(values: &mut [f64], group: usize, dtype: DType) {
    for (g, chunk) in values.chunks_mut(group).enumerate() {
        let last = chunk.len() - 1;
        match g % 9 {
            0 => chunk[last / 2] = f64::NAN,
            1 => chunk[last] = f64::INFINITY,
            2 => {
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v = if i == 0 { -1000.0 } else { *v * 1e-3 };
                }
            }
            3 => {
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v = if i % 2 == 0 { 0.0 } else { -0.0 };
                }
            }
            4 => {
                for v in chunk.iter_mut() {
                    *v *= 5000.0;
                }
                chunk[last] = -max_finite(dtype);
                chunk[0] = 600.0;
            }
            5 => chunk[0] = f64::NEG_INFINITY,
            6 => chunk.fill(f64::NAN),
            7 => {
                for v in chunk.iter_mut() {
                    *v *= 1e-5;
                }
            }
            _ => {}
        }
    }
}

/// (rows, K, group_size) for one dtype: per-token (group_size 0) and grouped, one case per
/// threads-per-group class of `fp8_quant_rows` (1 to 512 threads: groups of 1 to 32768
/// elements; group sizes that are not multiples of 16 start misaligned), then the loop kernel.
fn quant_shapes(dtype: DType) -> Vec<(usize, usize, usize)> {
    let rows_limit = 16 * 512 * if dtype == DType::Float32 { 2 } else { 4 };
    let mut cases = vec![
        (1, 1, 0),
        (9, 1, 0),
        (3, 7, 0),
        (10, 33, 0),
        (9, 7168, 0),
        (10, 12, 1),
        (9, 27, 3),
        (9, 160, 16),
        (10, 48, 24),
        (9, 96, 32),
        (9, 192, 64),
        (10, 300, 100),
        (9, 384, 128),
        (3, 768, 256),
        (3, 1536, 512),
        (3, 3072, 1024),
        (3, 6144, 2048),
        (3, 12288, 4096),
        (3, 24576, 8192),
        (3, 49152, 16384),
    ];
    if dtype != DType::Float32 {
        cases.push((3, 98304, 32768));
    }
    // fp8_quant_loop: groups longer than the rows kernel holds, per token (odd) and grouped.
    cases.push((9, rows_limit + 5, 0));
    cases.push((3, 3 * (rows_limit + 24), rows_limit + 24));
    cases
}

fn fp8_quant_cases(device: &Device) -> Measures {
    let mut report = Measures::new(44, KeepWorst::RelativeToBound, 1);
    let mut seed = 60_000;
    for dtype in DTYPES {
        for (m, k, group_size) in quant_shapes(dtype) {
            seed += 1;
            let xs = TensorSpec::new([m, k], dtype);
            let op = Fp8Quant::new(xs.clone(), group_size, device).expect("valid plan");
            let group = if group_size == 0 { k } else { group_size };
            let mut xv = Tensor::random(&xs, seed, &Device::cpu())
                .and_then(|t| t.to_vec_f64())
                .expect("random");
            quant_edges(&mut xv, group, dtype);
            let x = Tensor::from_f64_rounded(&xv, &xs, device).expect("x");
            let ys = op.y_spec();
            let mut y = Tensor::from_bytes(&vec![POISON_CODE; ys.numel().unwrap()], &ys, device)
                .expect("poisoned y");
            let mut s = Tensor::full(op.scales_spec(), POISON, device).expect("poisoned scales");
            ledger::call(
                device,
                "fp8_quant",
                op.eval_roofline(),
                whole_vectors(&xs),
                || op.forward_into(&x, &mut y, &mut s),
            )
            .expect("launch");
            device.synchronize().expect("kernel ran");
            let exact: Vec<f32> = x.to_vec_f32().expect("x");
            let (want_codes, want_scales) = rope_fp8::fp8_quant(&exact, group);
            let got_codes = y.to_bytes().expect("codes");
            let got_scales = s.to_vec_f32().expect("scales");
            let label = format!("[{m}, {k}] group_size={group_size} +edges");
            let check = Fp8Check {
                got: (&got_codes, &got_scales),
                want: (&want_codes, &want_scales),
                code_steps: 0.0,
                scale_bound: 0.0,
            };
            report.record_fp8("fp8_quant", &label, dtype, check, |i| {
                format!("x = {}, ", exact[i])
            });
        }
    }
    report
}

#[test]
fn fp8_quant_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("fp8_quant_reaches_every_kernel") else {
        return;
    };
    fp8_quant_cases(&gpu).finish();
    ledger::no_stale_exceptions(&["fp8_quant"]);
    assert_launched(
        &gpu,
        "fp8_quant.cu",
        &entries_of(&kernels::FP8_QUANT, &DTYPES),
    );
}

/// qk_norm_rope_fp8 cases: (tokens, q_heads, k_heads, non-finite values, positions outside the
/// table, input scale): one row; positions 0 and max_pos - 1; more rows than one block's 128
/// slots (two passes); inputs and weights far beyond ±448.
const FUSED_CASES: &[(usize, usize, usize, bool, bool, f64)] = &[
    (1, 1, 1, false, false, 1.0),
    (2, 1, 1, false, false, 1.0),
    (3, 4, 2, true, false, 1.0),
    (5, 3, 5, false, true, 1.0),
    (2, 120, 20, false, false, 1.0),
    (4, 8, 1, true, false, 5000.0),
];

fn fused_cases(device: &Device) -> Measures {
    let mut report = Measures::new(44, KeepWorst::RelativeToBound, 1);
    let mut seed = 70_000;
    let max_pos = 41;
    let tv = rope_table(max_pos, 128);
    for dtype in [DType::Float16, DType::BFloat16] {
        for &(tokens, qh, kh, special, bad, scale) in FUSED_CASES {
            seed += 4;
            let bad = bad && device.is_cuda();
            let qs = TensorSpec::new([tokens, qh, 128], dtype);
            let ks = TensorSpec::new([tokens, kh, 128], dtype);
            let ws = TensorSpec::new([128], dtype);
            let cs = TensorSpec::new([max_pos, 128], DType::Float32);
            let op = QkNormRopeFp8::builder(qs.clone(), ks.clone(), cs.clone())
                .q_weight(ws.clone())
                .k_weight(ws.clone())
                .positions(TensorSpec::new([tokens], DType::Int64))
                .eps(1e-6)
                .build(device)
                .expect("valid plan");
            let scaled = |spec: &TensorSpec, seed: u64| -> Vec<f64> {
                Tensor::random(spec, seed, &Device::cpu())
                    .and_then(|t| t.to_vec_f64())
                    .expect("random")
                    .into_iter()
                    .map(|v| v * scale)
                    .collect()
            };
            let mut qv = scaled(&qs, seed);
            let mut kv = scaled(&ks, seed + 1);
            if special {
                qv[5] = f64::NAN; // q row 0: all NaN
                qv[128 + 7] = f64::INFINITY; // q row 1: its pair NaN, the rest 0
                kv[3] = f64::NEG_INFINITY;
            }
            let qwv = scaled(&ws, seed + 2);
            let kwv = scaled(&ws, seed + 3);
            let pv = rope_positions(tokens, max_pos, seed, bad);
            let upload = |values: &[f64], spec: &TensorSpec| {
                Tensor::from_f64_rounded(values, spec, device).expect("input on the device")
            };
            let inputs = [
                upload(&qv, &qs),
                upload(&kv, &ks),
                upload(&qwv, &ws),
                upload(&kwv, &ws),
                Tensor::from_slice(&pv, [tokens], device).expect("positions"),
                upload(&tv, &cs),
            ];
            // What the device holds (rounded to the dtype): the reference reads the same.
            let held: Vec<Vec<f64>> = inputs[..4]
                .iter()
                .map(|t| t.to_vec_f64().expect("copy back"))
                .collect();
            let [q_spec, k_spec, qs_spec, ks_spec] = op.output_specs();
            let poisoned = |spec: &TensorSpec| {
                Tensor::from_bytes(&vec![POISON_CODE; spec.numel().unwrap()], spec, device)
                    .expect("poisoned codes")
            };
            let mut out = QkNormRopeFp8Output {
                q_fp8: poisoned(&q_spec),
                k_fp8: poisoned(&k_spec),
                q_scale: Tensor::full(&qs_spec, POISON, device).expect("poisoned scales"),
                k_scale: Tensor::full(&ks_spec, POISON, device).expect("poisoned scales"),
            };
            let [q, k, qw, kw, p, c] = &inputs;
            ledger::call(device, "qk_norm_rope_fp8", op.eval_roofline(), true, || {
                op.forward_into(q, k, qw, kw, p, c, &mut out)
            })
            .expect("launch");
            device.synchronize().expect("kernel ran");
            let label = format!(
                "[{tokens}, {qh}+{kh}, 128] x{scale}{}{}",
                special_label(special),
                if bad { " +bad pos" } else { "" }
            );
            for (name, xv, wv, heads, codes_t, scales_t) in [
                ("q", &held[0], &held[2], qh, &out.q_fp8, &out.q_scale),
                ("k", &held[1], &held[3], kh, &out.k_fp8, &out.k_scale),
            ] {
                let (want_codes, want_scales, _) =
                    rope_fp8::qk_norm_rope_fp8(xv, wv, &pv, &tv, heads, 128, 1e-6);
                let got_codes = codes_t.to_bytes().expect("codes");
                let got_scales = scales_t.to_vec_f32().expect("scales");
                let case = format!("{label} {name}");
                // The norm sums in f32 on the GPU, f64 here: a value on a rounding midpoint may
                // land one code away.
                let check = Fp8Check {
                    got: (&got_codes, &got_scales),
                    want: (&want_codes, &want_scales),
                    code_steps: 1.0,
                    scale_bound: 1e-5,
                };
                report.record_fp8("qk_norm_rope_fp8", &case, dtype, check, |_| String::new());
            }
        }
    }
    report
}

#[test]
fn qk_norm_rope_fp8_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("qk_norm_rope_fp8_reaches_every_kernel") else {
        return;
    };
    fused_cases(&gpu).finish();
    ledger::no_stale_exceptions(&["qk_norm_rope_fp8"]);
    assert_launched(
        &gpu,
        "qk_norm_rope_fp8.cu",
        &entries_of(
            &kernels::QK_NORM_ROPE_FP8,
            &[DType::Float16, DType::BFloat16],
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// gqa_decode, gqa_decode_paged: dense and paged, 16-bit and fp8 caches, split and one-pass, merge
// ---------------------------------------------------------------------------------------------

#[test]
fn attention_decode_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("attention_decode_reaches_every_kernel") else {
        return;
    };
    // One case per entry point: the family tests (attention::gpu) sweep head dims, groups, page
    // sizes and the one-pass path.
    decode_entry_cases(&gpu, Layout::Dense).finish();
    decode_entry_cases(&gpu, Layout::Paged).finish();
    assert_launched(
        &gpu,
        "gqa_decode.cu",
        &entries_of(&kernels::GQA_DECODE, &[DType::Float16, DType::BFloat16]),
    );
}

// ---------------------------------------------------------------------------------------------
// gqa_prefill: f16 and bf16 x head dims 64, 128, 256
// ---------------------------------------------------------------------------------------------

#[test]
fn attention_prefill_reaches_every_kernel() {
    let Some(gpu) = gpu_or_skip("attention_prefill_reaches_every_kernel") else {
        return;
    };
    prefill_entry_cases(&gpu).finish();
    assert_launched(
        &gpu,
        "gqa_prefill.cu",
        &entries_of(&kernels::GQA_PREFILL, &[DType::Float16, DType::BFloat16]),
    );
}

// ---------------------------------------------------------------------------------------------
// gemm: the four layouts x float32 (strict: cuBLAS Sgemm; TF32: cuBLASLt), float16, bfloat16
// ---------------------------------------------------------------------------------------------

fn gemm_cases(device: &Device) -> Measures {
    let mut report = Measures::new(44, KeepWorst::RelativeToBound, 1);
    let mut seed = 80_000;
    let variants = [
        (DType::Float32, false),
        (DType::Float32, true),
        (DType::Float16, false),
        (DType::BFloat16, false),
    ];
    for (dtype, tf32) in variants {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            for (m, n, k, special) in [(1, 1, 1, false), (3, 5, 7, false), (17, 9, 33, true)] {
                seed += 2;
                let stored = |rows: usize, cols: usize, t: bool| {
                    if t {
                        TensorSpec::new([cols, rows], dtype)
                    } else {
                        TensorSpec::new([rows, cols], dtype)
                    }
                };
                let (a_spec, b_spec) = (stored(m, k, ta), stored(k, n, tb));
                let random = |spec: &TensorSpec, seed| {
                    Tensor::random(spec, seed, &Device::cpu())
                        .and_then(|t| t.to_vec_f64())
                        .expect("random")
                };
                let (mut av, mut bv) = (random(&a_spec, seed), random(&b_spec, seed + 1));
                if special {
                    // a: a NaN in row 1, +inf in row 2, -inf in row 3; b: a zero where row 2's
                    // inf meets column 5 (NaN out).
                    let ai = |i: usize, p: usize| if ta { p * m + i } else { i * k + p };
                    let bi = |p: usize, j: usize| if tb { j * k + p } else { p * n + j };
                    av[ai(1, k / 2)] = f64::NAN;
                    av[ai(2, 0)] = f64::INFINITY;
                    av[ai(3, k - 1)] = f64::NEG_INFINITY;
                    bv[bi(0, 5)] = 0.0;
                }
                let a = Tensor::from_f64_rounded(&av, &a_spec, device).expect("a");
                let b = Tensor::from_f64_rounded(&bv, &b_spec, device).expect("b");
                let op = Gemm::new(
                    a_spec.clone(),
                    b_spec.clone(),
                    tileops::ops::GemmOptions::new()
                        .trans_a(ta)
                        .trans_b(tb)
                        .allow_tf32(tf32),
                    device,
                )
                .expect("valid plan");
                let mut c = Tensor::full(op.c(), f64::NAN, device).expect("poisoned output");
                op.forward_into(&a, &b, &mut c).expect("launch");
                let got = download(device, &c);
                let (av, bv) = (a.to_vec_f64().expect("a"), b.to_vec_f64().expect("b"));
                let want = reference::gemm(&av, &bv, m, n, k, ta, tb);
                let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
                let scale = reference::gemm(&abs(&av), &abs(&bv), m, n, k, ta, tb);
                let err = worst_by(&got, &want, |i, g, w| {
                    if scale[i].is_finite() {
                        element_error(g, w, || scale[i].max(floor(dtype)))
                    } else {
                        lined_up(g, w)
                    }
                });
                let layout = match (ta, tb) {
                    (false, false) => "nn",
                    (true, false) => "tn",
                    (false, true) => "nt",
                    (true, true) => "tt",
                };
                let label = format!(
                    "{m}x{n}x{k} {layout}{}{}",
                    if tf32 { " tf32" } else { "" },
                    special_label(special)
                );
                let detail = format!("got {}, want {}", got[err.1], want[err.1]);
                report.record(
                    if tf32 { "gemm.tf32" } else { "gemm" },
                    &label,
                    dtype,
                    "err",
                    err,
                    gemm_bound(dtype, tf32, k),
                    detail,
                );
            }
        }
    }
    report
}

#[test]
fn gemm_runs_every_layout_and_dtype() {
    let Some(gpu) = gpu_or_skip("gemm_runs_every_layout_and_dtype") else {
        return;
    };
    gemm_cases(&gpu).finish();
}

// ---------------------------------------------------------------------------------------------
// The harness itself
// ---------------------------------------------------------------------------------------------

/// On the CPU (the ops' CPU paths are the references, rounded once): every case passes its bound,
/// so no bound is too tight for a correctly rounded kernel; and the measures catch poison and
/// wrong values. The grid-stride cases are left out (they only matter on a GPU).
#[test]
fn harness_accepts_the_cpu_paths_and_catches_poison() {
    let cpu = Device::cpu();
    softmax_cases(&cpu, false).finish();
    norm_cases(&cpu).finish();
    activation_cases(&cpu, false).finish();
    silu_and_mul_cases(&cpu).finish();
    reduction_cases(&cpu, false).finish();
    rope_cases(&cpu).finish();
    fp8_quant_cases(&cpu).finish();
    fused_cases(&cpu).finish();
    gemm_cases(&cpu).finish();
    decode_cases(&cpu, Layout::Dense).finish();
    decode_cases(&cpu, Layout::Paged).finish();
    prefill_cases(&cpu).finish();
    let want = [0.25, f64::NAN, 0.5];
    let zeros = [0.0; 3];
    assert_eq!(
        worst_error(&[0.25, f64::NAN, 0.5], &want, &zeros, DType::Float32).0,
        0.0
    );
    assert!(
        worst_error(&[0.25, POISON, 0.5], &want, &zeros, DType::Float32)
            .0
            .is_infinite()
    );
    assert!(
        worst_error(&[POISON, f64::NAN, 0.5], &want, &zeros, DType::BFloat16).0
            > bound(DType::BFloat16)
    );
    assert!(
        worst_error(&[0.25, f64::NAN, 0.5 + 1e-3], &want, &zeros, DType::Float32).0
            > bound(DType::Float32)
    );
    assert_eq!(code_distance(0x7f, 0xff), 0);
    assert_eq!(code_distance(0x80, 0x00), 0);
    assert_eq!(code_distance(0x7e, 0x7f), 255);
    assert_eq!(worst_codes(&[1, 2, POISON_CODE], &[1, 2, 3]).1, 2);
    // The entry lists the coverage check compares with.
    assert_eq!(entries_of(&kernels::SOFTMAX, &DTYPES).len(), 42);
    assert_eq!(entries_of(&kernels::REDUCE, &[DType::BFloat16]).len(), 36);
    assert_eq!(
        entries_of(
            &kernels::QK_NORM_ROPE_FP8,
            &[DType::Float16, DType::BFloat16]
        ),
        vec!["qk_norm_rope_fp8_f16", "qk_norm_rope_fp8_bf16"]
    );
    // Per q dtype: 18 instantiations (16-bit caches at 4 and 8 heads a block, fp8 at 4; dense
    // and paged; head dims 64, 128, 256) and the merge.
    assert_eq!(
        entries_of(&kernels::GQA_DECODE, &[DType::Float16, DType::BFloat16]).len(),
        38
    );
    assert_eq!(
        entries_of(&kernels::GQA_PREFILL, &[DType::Float16, DType::BFloat16]).len(),
        6
    );
}
