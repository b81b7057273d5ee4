//! rope on the GPU against the CPU reference, every dtype and shape (edge cases included), on fresh
//! random inputs, with the outputs poisoned first so that an element the kernel never writes shows
//! up. The error measure: |got - want| / (|x1 cos| + |x2 sin|) per element (the size of the terms
//! that cancel; relative to |want| alone, cancellation would blame the output rounding on the
//! kernel), with the per-dtype bounds of `reduction::gpu::softmax`. The harness test checks
//! fp8_quant's and qk_norm_rope_fp8's cases too.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one line per case and `WORST <op> <dtype>` lines.

use crate::common::{
    DTYPES, KeepWorst, Measures, POISON, POISON_CODE, code_distance, floor, gpu_or_skip,
};
use crate::common::{rope_table, worst_codes, worst_scaled};
use crate::fused::gpu::fused_cases;
use crate::quantization::gpu::fp8_quant_cases;
// The per-dtype bounds of `reduction::gpu::softmax` (`common::bound`).
use crate::common::bound as rope_bound;
use tileops::ops::reference::{self};
use tileops::ops::{Rope, RopeStyle};
use tileops::{DType, Device, Tensor, TensorSpec};

/// Random values of `spec` as f64 (already rounded to its dtype), from `seed`.
pub(crate) fn random_values(spec: &TensorSpec, seed: u64) -> Vec<f64> {
    Tensor::random(spec, seed, &Device::cpu())
        .expect("random")
        .to_vec_f64()
        .expect("float")
}

/// Positions: distinct, spread over the table, with `bad` at the last token when asked (a
/// position past the table, which the GPU turns into NaN rows).
pub(crate) fn positions(tokens: usize, max_pos: usize, seed: u64, bad: bool) -> Vec<i64> {
    let mut p: Vec<i64> = (0..tokens)
        .map(|t| ((seed as usize * 31 + t * 7) % max_pos) as i64)
        .collect();
    if bad && let Some(last) = p.last_mut() {
        *last = max_pos as i64;
    }
    p
}

pub(crate) fn upload(values: &[f64], spec: &TensorSpec, device: &Device) -> Tensor {
    Tensor::from_f64_rounded(values, spec, device).expect("input on the device")
}

#[test]
fn rope_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("rope_matches_the_reference") else {
        return;
    };
    rope_cases(&gpu).finish();
}

/// The harness itself, on the CPU: the CPU paths pass every bound, and poison or a wrong code is
/// caught.
#[test]
fn harness_accepts_the_cpu_paths_and_catches_poison() {
    let cpu = Device::cpu();
    rope_cases(&cpu).finish();
    fp8_quant_cases(&cpu).finish();
    fused_cases(&cpu).finish();
    assert_eq!(code_distance(0x7f, 0xff), 0);
    assert_eq!(code_distance(0x80, 0x00), 0);
    assert_eq!(code_distance(0x81, 0x01), 2);
    assert_eq!(code_distance(0x7e, 0x7f), 255);
    assert_eq!(worst_codes(&[1, 2, POISON_CODE], &[1, 2, 3]).1, 2);
    let (err, at) = worst_scaled(&[1.0, POISON], &[1.0, 0.5], &[1.0, 1.0], 1e-30);
    assert!(err > 100.0 && at == 1);
}

/// rope cases: (tokens, heads, head_dim, inject NaN/inf, a position past the table).
const ROPE_CASES: &[(usize, usize, usize, bool, bool)] = &[
    (1, 1, 2, false, false),
    (3, 2, 6, true, false),
    (5, 3, 8, false, true),
    (4, 3, 80, false, false),
    (7, 32, 128, true, false),
    (64, 8, 128, false, true),
    (33, 5, 256, false, false),
    (2, 70, 64, false, false),
    (3, 2, 10, false, false),
];

/// The position and table dtypes of case `i`: int64 and f32 (vLLM's), int32 and f32, uint32 and
/// `dtype` (candle's), in turn.
pub(crate) fn index_and_table_dtypes(i: usize, dtype: DType) -> (DType, DType) {
    match i % 3 {
        0 => (DType::Int64, DType::Float32),
        1 => (DType::Int32, DType::Float32),
        _ => (DType::UInt32, dtype),
    }
}

/// The rope plan of case `i`: `x` `[tokens, heads, head_dim]` in `dtype`, the index and table
/// dtypes of [`index_and_table_dtypes`], a table of `max_pos` rows, the pairs of `style`. Returns
/// the plan with its `x` and table specs.
pub(crate) fn case_plan(
    i: usize,
    [tokens, heads, head_dim]: [usize; 3],
    dtype: DType,
    max_pos: usize,
    style: RopeStyle,
    device: &Device,
) -> (Rope, TensorSpec, TensorSpec) {
    let (pos_dtype, table_dtype) = index_and_table_dtypes(i, dtype);
    let xs = TensorSpec::new([tokens, heads, head_dim], dtype);
    let cs = TensorSpec::new([max_pos, head_dim], table_dtype);
    let op = Rope::new(
        xs.clone(),
        TensorSpec::new([tokens], pos_dtype),
        cs.clone(),
        device,
    )
    .expect("valid plan")
    .with_style(style);
    (op, xs, cs)
}

/// `positions` as a tensor of `dtype` (int64, int32 or uint32).
pub(crate) fn positions_as(positions: &[i64], dtype: DType, device: &Device) -> Tensor {
    let values: Vec<f64> = positions.iter().map(|&p| p as f64).collect();
    upload(&values, &TensorSpec::new([positions.len()], dtype), device)
}

fn rope_cases(device: &Device) -> Measures {
    let mut report = Measures::new(80, KeepWorst::Largest, 0);
    let mut seed = 900;
    let max_pos = 97;
    for dtype in DTYPES {
        for (i, &(tokens, heads, head_dim, special, bad_pos)) in ROPE_CASES.iter().enumerate() {
            for style in [RopeStyle::NeoX, RopeStyle::Interleaved] {
                seed += 1;
                let shape = [tokens, heads, head_dim];
                let (op, xs, cs) = case_plan(i, shape, dtype, max_pos, style, device);
                let (pos_dtype, table_dtype) = (op.positions().dtype, cs.dtype);
                let mut xv = random_values(&xs, seed);
                if special {
                    xv[1] = f64::NAN;
                    xv[head_dim + 2] = f64::INFINITY;
                    let last = xv.len() - 1;
                    xv[last] = f64::NEG_INFINITY;
                }
                let pv = positions(tokens, max_pos, seed, bad_pos && device.is_cuda());
                let x = upload(&xv, &xs, device);
                let p = positions_as(&pv, pos_dtype, device);
                let c = upload(&rope_table(max_pos, head_dim), &cs, device);
                // The table as the kernel reads it (rounded to a 16-bit dtype where it is one).
                let tv = c.to_vec_f64().expect("table");
                let mut y = Tensor::full(&xs, POISON, device).expect("poisoned output");
                op.forward_into(&x, &p, &c, &mut y).expect("launch");
                device.synchronize().expect("kernel ran");
                let got = y.to_vec_f64().expect("copy back");
                let (want, magnitude) =
                    reference::rope_with_style(&xv, &pv, &tv, heads, head_dim, style);
                let err = worst_scaled(&got, &want, &magnitude, floor(dtype));
                let label = format!(
                    "[{tokens}, {heads}, {head_dim}] {style:?} {pos_dtype} {table_dtype}{}{}",
                    if special { " +nan/inf" } else { "" },
                    if bad_pos && device.is_cuda() {
                        " +bad pos"
                    } else {
                        ""
                    }
                );
                let detail = format!("got {}, want {}", got[err.1], want[err.1]);
                report.record(
                    "rope",
                    &label,
                    dtype,
                    "rel err",
                    err,
                    rope_bound(dtype),
                    detail,
                );
            }
        }
    }
    report
}
