//! rope, fp8_quant and qk_norm_rope_fp8 on the GPU against the CPU reference, every dtype and
//! shape (edge cases included), on fresh random inputs, with the outputs poisoned first so that an
//! element the kernel never writes shows up.
//!
//! Error measures:
//! - rope: |got - want| / (|x1 cos| + |x2 sin|) per element (the size of the terms that cancel;
//!   relative to |want| alone, cancellation would blame the output rounding on the kernel), with
//!   the per-dtype bounds of `gpu_ops.rs`.
//! - fp8_quant: the kernels and the reference do the same f32 steps and the same conversion, so
//!   codes and scales must be identical: the bound is 0 codes apart, 0 relative scale error.
//! - qk_norm_rope_fp8: the norm sums in f32 on the GPU and in f64 on the CPU, so a value on a
//!   rounding midpoint may land one code away: the bound is 1 code, scales within 1e-5.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one line per case and `WORST <op> <dtype>` lines.

mod common;

use common::{DTYPES, KeepWorst, Measures, POISON, POISON_CODE, code_distance, floor, gpu_or_skip};
use common::{rope_table, worst_codes, worst_scale_error, worst_scaled};
// The per-dtype bounds of `gpu_ops.rs`.
use common::bound as rope_bound;
use tileops::ops::reference_rope_fp8::{self as reference, fp8_e4m3_value};
use tileops::ops::{Fp8Quant, QkNormRopeFp8, QkNormRopeFp8Output, Rope};
use tileops::{DType, Device, Tensor, TensorSpec};

/// Random values of `spec` as f64 (already rounded to its dtype), from `seed`.
fn random_values(spec: &TensorSpec, seed: u64) -> Vec<f64> {
    Tensor::random(spec, seed, &Device::cpu())
        .expect("random")
        .to_vec_f64()
        .expect("float")
}

/// Positions: distinct, spread over the table, with `bad` at the last token when asked (a
/// position past the table, which the GPU turns into NaN rows).
fn positions(tokens: usize, max_pos: usize, seed: u64, bad: bool) -> Vec<i64> {
    let mut p: Vec<i64> = (0..tokens)
        .map(|t| ((seed as usize * 31 + t * 7) % max_pos) as i64)
        .collect();
    if bad && let Some(last) = p.last_mut() {
        *last = max_pos as i64;
    }
    p
}

fn upload(values: &[f64], spec: &TensorSpec, device: &Device) -> Tensor {
    Tensor::from_f64_rounded(values, spec, device).expect("input on the device")
}

fn codes(t: &Tensor) -> Vec<u8> {
    t.to_bytes().expect("copy back")
}

#[test]
fn rope_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("rope_matches_the_reference") else {
        return;
    };
    rope_cases(&gpu).finish();
}

#[test]
fn fp8_quant_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("fp8_quant_matches_the_reference") else {
        return;
    };
    fp8_quant_cases(&gpu).finish();
}

#[test]
fn qk_norm_rope_fp8_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("qk_norm_rope_fp8_matches_the_reference") else {
        return;
    };
    fused_cases(&gpu).finish();
}

/// A NaN in a group makes that group's scale NaN and all its codes NaN (as `torch.amax`
/// propagates NaN), and leaves the other groups alone: the issue's `[NaN, 1, 2, 3]`, then shapes
/// that take each reduction path of the kernel (lane segments, a block reduction over several
/// warps, the loop kernel), with the NaN at the first, a middle and the last element of a group.
fn fp8_quant_nan_cases(device: &Device) {
    for dtype in DTYPES {
        for (shape, group_size) in [
            ([3, 4], 0),
            ([4, 512], 128),
            ([4, 100], 20),
            ([3, 8192], 0),
            ([3, 65536], 0),
        ] {
            let label = format!("{dtype} {shape:?} group={group_size} on {device}");
            let xs = TensorSpec::new(shape, dtype);
            let op = Fp8Quant::new(device, xs.clone(), group_size).expect("valid plan");
            let group = if group_size == 0 {
                shape[1]
            } else {
                group_size
            };
            let mut xv: Vec<f64> = (0..shape[0] * shape[1])
                .map(|i| 1.0 + (i % 7) as f64)
                .collect();
            // Groups 0 (first element), 1 in the middle, and the last group (last element).
            let groups = xv.len() / group;
            let poisoned = [(0, 0), (1, group / 2), (groups - 1, group - 1)];
            for &(g, at) in &poisoned {
                xv[g * group + at] = f64::NAN;
            }
            let (y, scales) = op.forward(&upload(&xv, &xs, device)).expect("quantized");
            let codes = codes(&y);
            let scales = scales.to_vec_f32().expect("scales");
            assert_eq!(scales.len(), groups, "{label}");
            for g in 0..groups {
                let group_codes = &codes[g * group..(g + 1) * group];
                if poisoned.iter().any(|&(p, _)| p == g) {
                    assert!(scales[g].is_nan(), "{label}: group {g} scale {}", scales[g]);
                    assert!(
                        group_codes.iter().all(|&c| c & 0x7f == 0x7f),
                        "{label}: group {g} has a code that is not NaN"
                    );
                } else {
                    let amax = xv[g * group..(g + 1) * group]
                        .iter()
                        .fold(0.0f64, |m, v| m.max(v.abs()));
                    let want = amax as f32 / 448.0;
                    assert!(
                        (scales[g] - want).abs() <= want * 1e-6,
                        "{label}: clean group {g} scale {} (want {want})",
                        scales[g]
                    );
                    assert!(
                        group_codes.iter().all(|&c| c & 0x7f != 0x7f),
                        "{label}: clean group {g} has a NaN code"
                    );
                }
            }
        }
    }
}

#[test]
fn fp8_quant_nan_poisons_its_group_on_the_cpu() {
    fp8_quant_nan_cases(&Device::cpu());
}

#[test]
fn fp8_quant_nan_poisons_its_group_on_the_gpu() {
    let Some(gpu) = gpu_or_skip("fp8_quant_nan_poisons_its_group_on_the_gpu") else {
        return;
    };
    fp8_quant_nan_cases(&gpu);
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

fn rope_cases(device: &Device) -> Measures {
    let mut report = Measures::new(40, KeepWorst::Largest, 0);
    let mut seed = 900;
    let max_pos = 97;
    for dtype in DTYPES {
        for &(tokens, heads, head_dim, special, bad_pos) in ROPE_CASES {
            seed += 1;
            let xs = TensorSpec::new([tokens, heads, head_dim], dtype);
            let cs = TensorSpec::new([max_pos, head_dim], DType::Float32);
            let op = Rope::new(
                device,
                xs.clone(),
                TensorSpec::new([tokens], DType::Int64),
                cs.clone(),
            )
            .expect("valid plan");
            let mut xv = random_values(&xs, seed);
            if special {
                xv[1] = f64::NAN;
                xv[head_dim + 2] = f64::INFINITY;
                let last = xv.len() - 1;
                xv[last] = f64::NEG_INFINITY;
            }
            let pv = positions(tokens, max_pos, seed, bad_pos && device.is_cuda());
            let tv = rope_table(max_pos, head_dim);
            let x = upload(&xv, &xs, device);
            let p = Tensor::from_slice(&pv, [tokens], device).expect("positions");
            let c = upload(&tv, &cs, device);
            let mut y = Tensor::full(&xs, POISON, device).expect("poisoned output");
            op.forward_into(&x, &p, &c, &mut y).expect("launch");
            device.synchronize().expect("kernel ran");
            let got = y.to_vec_f64().expect("copy back");
            let (want, magnitude) = reference::rope(&xv, &pv, &tv, heads, head_dim);
            let err = worst_scaled(&got, &want, &magnitude, floor(dtype));
            let label = format!(
                "[{tokens}, {heads}, {head_dim}]{}{}",
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
    report
}

/// fp8_quant cases: (shape, group_size, edge values).
const QUANT_CASES: &[([usize; 2], usize, bool)] = &[
    ([1, 1], 0, false),
    ([37, 1], 0, false),
    ([3, 7], 0, true),
    ([5, 33], 0, true),
    ([4, 64], 16, false),
    ([6, 100], 10, true),
    ([16, 4096], 0, true),
    ([3, 4104], 0, false),
    ([8, 7168], 128, true),
    ([4, 7168], 0, false),
    ([2, 20000], 0, false),
    ([2, 65536], 0, true),
    ([9, 96], 3, false),
];

/// Edge values in the first rows: a NaN; a +inf; one large value with the rest tiny (subnormal
/// codes and zeros); an all-zero row.
fn quant_edges(values: &mut [f64], k: usize) {
    let rows = values.len() / k;
    if rows > 0 {
        values[k / 2] = f64::NAN;
    }
    if rows > 1 {
        values[k + k - 1] = f64::INFINITY;
    }
    if rows > 2 {
        for (i, v) in values[2 * k..3 * k].iter_mut().enumerate() {
            *v = if i == 0 { -1000.0 } else { *v * 1e-3 };
        }
    }
    if rows > 3 {
        values[3 * k..4 * k].fill(0.0);
    }
}

fn fp8_quant_cases(device: &Device) -> Measures {
    let mut report = Measures::new(40, KeepWorst::Largest, 0);
    let mut seed = 1300;
    for dtype in DTYPES {
        for &(shape, group_size, edges) in QUANT_CASES {
            seed += 1;
            let xs = TensorSpec::new(shape, dtype);
            let op = Fp8Quant::new(device, xs.clone(), group_size).expect("valid plan");
            let mut xv = random_values(&xs, seed);
            if edges {
                quant_edges(&mut xv, shape[1]);
            }
            let x = upload(&xv, &xs, device);
            let ys = op.y_spec();
            let mut y = Tensor::from_bytes(&vec![POISON_CODE; ys.numel().unwrap()], &ys, device)
                .expect("poisoned y");
            let mut s = Tensor::full(op.scales_spec(), POISON, device).expect("poisoned scales");
            op.forward_into(&x, &mut y, &mut s).expect("launch");
            device.synchronize().expect("kernel ran");
            let group = if group_size == 0 {
                shape[1]
            } else {
                group_size
            };
            let exact: Vec<f32> = x.to_vec_f32().expect("x");
            let (want_codes, want_scales) = reference::fp8_quant(&exact, group);
            let got_codes = codes(&y);
            let got_scales = s.to_vec_f32().expect("scales");
            let label = format!(
                "{shape:?} group={group_size}{}",
                if edges { " +edges" } else { "" }
            );
            let c = worst_codes(&got_codes, &want_codes);
            let detail = format!(
                "got {:#04x} = {}, want {:#04x} = {}",
                got_codes[c.1],
                fp8_e4m3_value(got_codes[c.1]),
                want_codes[c.1],
                fp8_e4m3_value(want_codes[c.1])
            );
            report.record(
                "fp8_quant",
                &label,
                dtype,
                "codes",
                (f64::from(c.0), c.1),
                0.0,
                detail,
            );
            let e = worst_scale_error(&got_scales, &want_scales);
            let detail = format!("got {}, want {}", got_scales[e.1], want_scales[e.1]);
            report.record("fp8_quant", &label, dtype, "scale", e, 0.0, detail);
        }
    }
    report
}

/// qk_norm_rope_fp8 cases: (tokens, q_heads, k_heads, inject NaN/inf, a position past the table).
const FUSED_CASES: &[(usize, usize, usize, bool, bool)] = &[
    (1, 1, 1, false, false),
    (1, 32, 8, false, false),
    (3, 4, 2, true, false),
    (5, 3, 5, false, true),
    (64, 32, 8, true, false),
    (2, 70, 10, false, false),
    (257, 8, 1, false, false),
];

fn fused_cases(device: &Device) -> Measures {
    let mut report = Measures::new(40, KeepWorst::Largest, 0);
    let mut seed = 1700;
    let max_pos = 300;
    let tv = rope_table(max_pos, 128);
    for dtype in [DType::BFloat16, DType::Float16] {
        for &(tokens, qh, kh, special, bad_pos) in FUSED_CASES {
            seed += 4;
            let qs = TensorSpec::new([tokens, qh, 128], dtype);
            let ks = TensorSpec::new([tokens, kh, 128], dtype);
            let ws = TensorSpec::new([128], dtype);
            let ps = TensorSpec::new([tokens], DType::Int64);
            let cs = TensorSpec::new([max_pos, 128], DType::Float32);
            let op = QkNormRopeFp8::new(
                device,
                qs.clone(),
                ks.clone(),
                ws.clone(),
                ws.clone(),
                ps,
                cs.clone(),
                1e-6,
            )
            .expect("valid plan");
            let mut qv = random_values(&qs, seed);
            let mut kv = random_values(&ks, seed + 1);
            if special {
                qv[5] = f64::NAN; // row 0 of q: all NaN
                qv[128 + 7] = f64::INFINITY; // row 1 of q: its pair NaN, the rest 0
                kv[3] = f64::NEG_INFINITY;
            }
            let qwv = random_values(&ws, seed + 2);
            let kwv = random_values(&ws, seed + 3);
            let pv = positions(tokens, max_pos, seed, bad_pos && device.is_cuda());
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
            let inputs = [
                upload(&qv, &qs, device),
                upload(&kv, &ks, device),
                upload(&qwv, &ws, device),
                upload(&kwv, &ws, device),
                Tensor::from_slice(&pv, [tokens], device).expect("positions"),
                upload(&tv, &cs, device),
            ];
            let [q, k, qw, kw, p, c] = &inputs;
            op.forward_into(q, k, qw, kw, p, c, &mut out)
                .expect("launch");
            device.synchronize().expect("kernel ran");
            let label = format!(
                "[{tokens}, {qh}+{kh}, 128]{}{}",
                if special { " +nan/inf" } else { "" },
                if bad_pos && device.is_cuda() {
                    " +bad pos"
                } else {
                    ""
                }
            );
            for (name, xv, wv, heads, codes_t, scales_t) in [
                ("q", &qv, &qwv, qh, &out.q_fp8, &out.q_scale),
                ("k", &kv, &kwv, kh, &out.k_fp8, &out.k_scale),
            ] {
                let (want_codes, want_scales, _) =
                    reference::qk_norm_rope_fp8(xv, wv, &pv, &tv, heads, 128, 1e-6);
                let got_codes = codes(codes_t);
                let got_scales = scales_t.to_vec_f32().expect("scales");
                let case = format!("{label} {name}");
                let d = worst_codes(&got_codes, &want_codes);
                let detail = format!("got {:#04x}, want {:#04x}", got_codes[d.1], want_codes[d.1]);
                report.record(
                    "qk_norm_rope_fp8",
                    &case,
                    dtype,
                    "codes",
                    (f64::from(d.0), d.1),
                    1.0,
                    detail,
                );
                let e = worst_scale_error(&got_scales, &want_scales);
                let detail = format!("got {}, want {}", got_scales[e.1], want_scales[e.1]);
                report.record("qk_norm_rope_fp8", &case, dtype, "scale", e, 1e-5, detail);
            }
        }
    }
    report
}

#[test]
fn gpu_plans_reject_cpu_tensors() {
    let Some(gpu) = gpu_or_skip("gpu_plans_reject_cpu_tensors") else {
        return;
    };
    let spec = TensorSpec::new([4, 32], DType::BFloat16);
    let op = Fp8Quant::new(&gpu, spec.clone(), 0).expect("valid plan");
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let err = op.forward(&on_cpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}
