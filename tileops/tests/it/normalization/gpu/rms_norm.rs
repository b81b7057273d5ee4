//! rms_norm x dtype x shape on the GPU against the f64 reference, on fresh random inputs, with the
//! output poisoned first so that an element the kernel never writes shows up.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead, so a broken GPU setup cannot pass silently. `-- --nocapture` prints the worst
//! relative error per dtype.

use crate::common::softmax_lines;
use crate::common::{DTYPES, POISON, Report, Special, gpu_or_skip, make_input};
use crate::reduction::gpu::softmax::worst_error;
use tileops::ops::{RmsNorm, reference};
use tileops::{Device, Tensor, TensorSpec};

#[test]
fn rms_norm_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("rms_norm_matches_the_reference") else {
        return;
    };
    rms_norm_cases(&gpu).finish();
}

pub(crate) fn rms_norm_cases(device: &Device) -> Report {
    let cases: &[(&[usize], Special)] = &[
        (&[1, 1], Special::None),
        (&[3, 7], Special::None),
        (&[5, 33], Special::NonFinite),
        (&[257, 64], Special::None),
        (&[16, 4096], Special::NonFinite),
        (&[3, 4097], Special::None),
        (&[2, 8192], Special::None),
        (&[4, 16384], Special::None),
        (&[2, 65536], Special::None),
        (&[2, 131072], Special::NonFinite),
        (&[4, 3, 100], Special::None),
    ];
    let mut report = Report::new(9, 34);
    let mut seed = 500;
    for dtype in DTYPES {
        for (shape, special) in cases {
            seed += 2;
            let n = *shape.last().expect("rank >= 1");
            let spec = TensorSpec::new(*shape, dtype);
            let w_spec = TensorSpec::new([n], dtype);
            let eps = 1e-6;
            let op = RmsNorm::new(spec.clone(), w_spec.clone(), eps, device).expect("valid plan");
            let lines = softmax_lines(shape, shape.len() - 1, 4);
            let x = make_input(&spec, seed, special, &lines, device);
            let w = make_input(&w_spec, seed + 1, &Special::None, &[], device);
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            op.forward_into(&x, &w, &mut y).expect("launch");
            device.synchronize().expect("kernel ran");
            let got = y.to_vec_f64().expect("copy back");
            let want = reference::rms_norm(
                &x.to_vec_f64().expect("x"),
                &w.to_vec_f64().expect("w"),
                n,
                eps,
            );
            let err = worst_error(&got, &want, dtype);
            let label = format!(
                "{shape:?}{}",
                if matches!(special, Special::NonFinite) {
                    " +inf/nan"
                } else {
                    ""
                }
            );
            report.record("rms_norm", label, dtype, err, &got, &want);
        }
    }
    report
}
