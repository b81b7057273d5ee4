//! fp8_quant on the GPU against the CPU reference, every dtype and shape (edge cases included), on
//! fresh random inputs, with the outputs poisoned first so that an element the kernel never writes
//! shows up. The kernels and the reference do the same f32 steps and the same conversion, so codes
//! and scales must be identical: the bound is 0 codes apart, 0 relative scale error.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one line per case and `WORST <op> <dtype>` lines.

use crate::common::Fp8Check;
use crate::common::{DTYPES, KeepWorst, Measures, POISON, POISON_CODE, gpu_or_skip};
use crate::position_encoding::gpu::{random_values, upload};
// The per-dtype bounds of `reduction::gpu::softmax` (`common::bound`).
use tileops::ops::Fp8Quant;
use tileops::ops::reference;
use tileops::{DType, Device, Tensor, TensorSpec};

pub(crate) fn codes(t: &Tensor) -> Vec<u8> {
    t.to_bytes().expect("copy back")
}

#[test]
fn fp8_quant_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("fp8_quant_matches_the_reference") else {
        return;
    };
    fp8_quant_cases(&gpu).finish();
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
            let op = Fp8Quant::new(xs.clone(), group_size, device).expect("valid plan");
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

pub(crate) fn fp8_quant_cases(device: &Device) -> Measures {
    let mut report = Measures::new(40, KeepWorst::Largest, 0);
    let mut seed = 1300;
    for dtype in DTYPES {
        for &(shape, group_size, edges) in QUANT_CASES {
            seed += 1;
            let xs = TensorSpec::new(shape, dtype);
            let op = Fp8Quant::new(xs.clone(), group_size, device).expect("valid plan");
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
            let check = Fp8Check {
                got: (&got_codes, &got_scales),
                want: (&want_codes, &want_scales),
                code_steps: 0.0,
                scale_bound: 0.0,
            };
            report.record_fp8("fp8_quant", &label, dtype, check, |_| String::new());
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
    let op = Fp8Quant::new(spec.clone(), 0, &gpu).expect("valid plan");
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let err = op.forward(&on_cpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}
