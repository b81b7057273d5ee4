//! softmax x dtype x shape on the GPU against the f64 reference, on fresh random inputs, with the
//! output poisoned first so that an element the kernel never writes shows up. The harness test
//! checks rms_norm's cases (`normalization::gpu::rms_norm`) too.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead, so a broken GPU setup cannot pass silently. `-- --nocapture` prints the worst
//! relative error per op and dtype.

use crate::common::{DTYPES, POISON, Report, Special, bound, floor, gpu_or_skip, make_input};
use crate::common::{element_error, softmax_lines, worst_by};
use crate::normalization::gpu::rms_norm::rms_norm_cases;
use tileops::ops::{Softmax, reference};
use tileops::{DType, Device, Tensor, TensorSpec};

/// The worst relative error of `got` against `want`; infinite when NaN, infinities or the
/// poison value do not line up.
pub(crate) fn worst_error(got: &[f64], want: &[f64], dtype: DType) -> (f64, usize) {
    worst_by(got, want, |_, g, w| {
        element_error(g, w, || w.abs().max(floor(dtype)))
    })
}

#[test]
fn softmax_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("softmax_matches_the_reference") else {
        return;
    };
    softmax_cases(&gpu).finish();
}

/// The harness itself, on the CPU: correctly rounded outputs must pass every bound (so the
/// bounds are not too tight for the best possible kernel), and a poisoned or wrong element must
/// fail.
#[test]
fn harness_accepts_correctly_rounded_outputs_and_catches_poison() {
    softmax_cases(&Device::cpu()).finish();
    rms_norm_cases(&Device::cpu()).finish();
    let want = [0.25, f64::NAN, 0.5];
    assert_eq!(
        worst_error(&[0.25, f64::NAN, 0.5], &want, DType::Float32).0,
        0.0
    );
    assert!(
        worst_error(&[0.25, POISON, 0.5], &want, DType::Float32)
            .0
            .is_infinite()
    );
    assert!(
        worst_error(&[POISON, f64::NAN, 0.5], &want, DType::BFloat16).0 > bound(DType::BFloat16)
    );
    assert!(
        worst_error(&[0.25, f64::NAN, 0.5 + 1e-3], &want, DType::Float32).0 > bound(DType::Float32)
    );
}

fn softmax_cases(device: &Device) -> Report {
    let cases: &[(&[usize], i64, Special)] = &[
        (&[1, 1], -1, Special::None),
        (&[37, 1], -1, Special::None),
        (&[3, 7], -1, Special::None),
        (&[5, 33], -1, Special::NonFinite),
        (&[300, 64], -1, Special::None),
        (&[16, 4096], -1, Special::NonFinite),
        (&[3, 4097], -1, Special::None),
        (&[2, 32768], -1, Special::None),
        (&[2, 65536], -1, Special::None),
        (&[4, 102400], -1, Special::NonFinite),
        (&[2, 131072], -1, Special::None),
        (&[3, 70001], -1, Special::None),
        (&[4, 33, 5], 1, Special::NonFinite),
        (&[4, 6, 16], 1, Special::NonFinite),
        (&[6, 2, 8], 0, Special::None),
        (&[2, 3, 4, 5], -2, Special::None),
    ];
    let mut report = Report::new(9, 34);
    let mut seed = 100;
    for dtype in DTYPES {
        for (shape, dim, special) in cases {
            seed += 1;
            let spec = TensorSpec::new(*shape, dtype);
            let op = Softmax::new(spec.clone(), *dim, device).expect("valid plan");
            let axis = dim.rem_euclid(shape.len() as i64) as usize;
            let x = make_input(&spec, seed, special, &softmax_lines(shape, axis, 4), device);
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            op.forward_into(&x, &mut y).expect("launch");
            device.synchronize().expect("kernel ran");
            let got = y.to_vec_f64().expect("copy back");
            let xs = x.to_vec_f64().expect("copy back");
            let (outer, n) = (shape[..axis].iter().product(), shape[axis]);
            let want = reference::softmax(&xs, outer, n, shape[axis + 1..].iter().product());
            let err = worst_error(&got, &want, dtype);
            let label = format!(
                "{shape:?} dim={dim}{}",
                if matches!(special, Special::NonFinite) {
                    " +inf/nan"
                } else {
                    ""
                }
            );
            report.record("softmax", label, dtype, err, &got, &want);
        }
    }
    report
}

#[test]
fn gpu_plans_reject_cpu_tensors() {
    let Some(gpu) = gpu_or_skip("gpu_plans_reject_cpu_tensors") else {
        return;
    };
    let spec = TensorSpec::new([4, 8], DType::Float32);
    let op = Softmax::new(spec.clone(), -1, &gpu).expect("valid plan");
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let err = op.forward(&on_cpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}

#[test]
fn forward_allocates_and_round_trips() {
    let Some(gpu) = gpu_or_skip("forward_allocates_and_round_trips") else {
        return;
    };
    let spec = TensorSpec::new([2, 3], DType::Float32);
    let op = Softmax::new(spec, -1, &gpu).expect("valid plan");
    let x = Tensor::from_f32_slice(&[0.0, 0.0, 0.0, 1.0, 2.0, 3.0], [2, 3], &gpu).expect("upload");
    let y = op
        .forward(&x)
        .expect("forward")
        .to_vec_f32()
        .expect("download");
    let third = 1.0f32 / 3.0;
    assert!(y[..3].iter().all(|v| (v - third).abs() < 1e-6), "{y:?}");
    assert!((y[3..].iter().sum::<f32>() - 1.0).abs() < 1e-6, "{y:?}");
}
