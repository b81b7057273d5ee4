//! layer_norm and fused_add_rms_norm on the GPU against the f64 reference: every op x dtype x shape
//! (edge cases included) on fresh random inputs, outputs poisoned first so that an element the
//! kernel never writes shows up. The harness test checks the activations' cases too.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one row per case and a `WORST <op> <dtype>` line.

use crate::common::{DTYPES, POISON, Report, bound, download, gpu_or_skip};
use crate::common::{input_with, row_specials, worst_error};
use crate::elementwise::gpu::{activation_cases, silu_and_mul_cases};
use tileops::ops::reference;
use tileops::ops::{FusedAddRmsNorm, LayerNorm};
use tileops::{DType, Device, Tensor, TensorSpec};

/// Relative to the value itself: for outputs that are products, not sums.
pub(crate) fn relative(want: &[f64]) -> Vec<f64> {
    want.iter().map(|v| v.abs()).collect()
}

pub(crate) fn label(shape: &[usize], special: bool) -> String {
    format!("{shape:?}{}", if special { " +inf/nan" } else { "" })
}

/// Row shapes for the norms: length-1 rows, odd lengths, each row kernel (v4, v16, loop) in
/// every dtype, rank 3; `true` adds the non-finite rows.
const NORM_CASES: &[(&[usize], bool)] = &[
    (&[1, 1], false),
    (&[5, 1], true),
    (&[3, 7], false),
    (&[5, 33], true),
    (&[257, 64], false),
    (&[16, 4096], true),
    (&[3, 4097], false),
    (&[2, 8192], false),
    (&[4, 16384], false),
    (&[2, 65536], false),
    (&[2, 131072], true),
    (&[3, 70001], false),
    (&[4, 3, 100], false),
];

fn layer_norm_cases(device: &Device) -> Report {
    let mut report = Report::new(22, 30);
    let mut seed = 1000;
    for dtype in DTYPES {
        for &(shape, special) in NORM_CASES {
            seed += 3;
            let n = *shape.last().expect("rank >= 1");
            let rows = shape.iter().product::<usize>() / n;
            let spec = TensorSpec::new(shape, dtype);
            let p_spec = TensorSpec::new([n], dtype);
            let eps = 1e-5;
            let op = LayerNorm::new(spec.clone(), p_spec.clone(), p_spec.clone(), eps, device)
                .expect("valid plan");
            let specials = if special {
                row_specials(rows, n)
            } else {
                Vec::new()
            };
            let x = input_with(&spec, seed, &specials, device);
            let w = input_with(&p_spec, seed + 1, &[], device);
            let b = input_with(&p_spec, seed + 2, &[], device);
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            op.forward_into(&x, &w, &b, &mut y).expect("launch");
            let got = download(device, &y);
            let (xs, ws, bs) = (
                x.to_vec_f64().expect("x"),
                w.to_vec_f64().expect("w"),
                b.to_vec_f64().expect("b"),
            );
            let want = reference::layer_norm(&xs, &ws, &bs, n, eps);
            // (x - mean) * rstd * w and b can cancel: measure against their magnitudes.
            let scaled = reference::layer_norm(&xs, &ws, &vec![0.0; n], n, eps);
            let scale: Vec<f64> = scaled
                .iter()
                .enumerate()
                .map(|(i, s)| s.abs() + bs[i % n].abs())
                .collect();
            let err = worst_error(&got, &want, &scale, dtype);
            report.record("layer_norm", label(shape, special), dtype, err, &got, &want);
        }
    }
    report
}

fn fused_add_rms_norm_cases(device: &Device) -> Report {
    let mut report = Report::new(22, 30);
    let mut seed = 2000;
    for dtype in DTYPES {
        for &(shape, special) in NORM_CASES {
            seed += 3;
            let n = *shape.last().expect("rank >= 1");
            let rows = shape.iter().product::<usize>() / n;
            let spec = TensorSpec::new(shape, dtype);
            let w_spec = TensorSpec::new([n], dtype);
            let eps = 1e-6;
            let op = FusedAddRmsNorm::new(spec.clone(), spec.clone(), w_spec.clone(), eps, device)
                .expect("valid plan");
            let specials = if special {
                row_specials(rows, n)
            } else {
                Vec::new()
            };
            let x = input_with(&spec, seed, &specials, device);
            let r = input_with(&spec, seed + 1, &[], device);
            let w = input_with(&w_spec, seed + 2, &[], device);
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            let mut h = Tensor::full(&spec, POISON, device).expect("poisoned output");
            op.forward_into(&x, &r, &w, &mut y, &mut h).expect("launch");
            let (got_y, got_h) = (download(device, &y), download(device, &h));
            let sum: Vec<f64> = x
                .to_vec_f64()
                .expect("x")
                .iter()
                .zip(r.to_vec_f64().expect("residual"))
                .map(|(a, b)| a + b)
                .collect();
            // residual_out is the sum rounded to the dtype; y is the norm of that rounded sum.
            let want_h = Tensor::from_f64_rounded(&sum, &spec, &Device::cpu())
                .expect("rounded sum")
                .to_vec_f64()
                .expect("rounded sum");
            let want_y =
                reference::fused_add_rms_norm_y(&want_h, &w.to_vec_f64().expect("w"), n, eps);
            // The sum itself can cancel: measure residual_out against |x| + |residual|.
            let h_scale: Vec<f64> = x
                .to_vec_f64()
                .expect("x")
                .iter()
                .zip(r.to_vec_f64().expect("residual"))
                .map(|(a, b)| a.abs() + b.abs())
                .collect();
            let err = worst_error(&got_h, &want_h, &h_scale, dtype);
            report.record(
                "fused_add_rms_norm.res",
                label(shape, special),
                dtype,
                err,
                &got_h,
                &want_h,
            );
            let err = worst_error(&got_y, &want_y, &relative(&want_y), dtype);
            report.record(
                "fused_add_rms_norm.y",
                label(shape, special),
                dtype,
                err,
                &got_y,
                &want_y,
            );
        }
    }
    report
}

#[test]
fn layer_norm_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("layer_norm_matches_the_reference") else {
        return;
    };
    layer_norm_cases(&gpu).finish();
}

#[test]
fn fused_add_rms_norm_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("fused_add_rms_norm_matches_the_reference") else {
        return;
    };
    fused_add_rms_norm_cases(&gpu).finish();
}

/// The harness itself, on the CPU: correctly rounded outputs must pass every bound (so the
/// bounds are not too tight for the best possible kernel), and a poisoned or wrong element must
/// fail.
#[test]
fn harness_accepts_correctly_rounded_outputs_and_catches_poison() {
    let cpu = Device::cpu();
    layer_norm_cases(&cpu).finish();
    fused_add_rms_norm_cases(&cpu).finish();
    activation_cases(&cpu, false).finish();
    silu_and_mul_cases(&cpu).finish();
    let want = [0.25, f64::NAN, 0.5];
    let scale = relative(&want);
    assert_eq!(
        worst_error(&[0.25, f64::NAN, 0.5], &want, &scale, DType::Float32).0,
        0.0
    );
    assert!(
        worst_error(&[0.25, POISON, 0.5], &want, &scale, DType::Float32)
            .0
            .is_infinite()
    );
    assert!(
        worst_error(&[POISON, f64::NAN, 0.5], &want, &scale, DType::BFloat16).0
            > bound(DType::BFloat16)
    );
    assert!(
        worst_error(&[0.25, f64::NAN, 0.5 + 1e-3], &want, &scale, DType::Float32).0
            > bound(DType::Float32)
    );
}
