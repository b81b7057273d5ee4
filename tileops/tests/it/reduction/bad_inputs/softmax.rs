//! Bad input to softmax gets a clear error naming the op, the field and the value: never a panic.
//! Runs on the CPU; the same checks run before any GPU work. (Three tests check rms_norm's plan
//! next to softmax's and stay whole, here.)

use crate::common::spec;
use tileops::ops::{RmsNorm, Softmax};
use tileops::{DType, Device, Error, Tensor};

#[test]
fn softmax_rejects_rank_zero() {
    let err = Softmax::new(spec(&[], DType::Float32), 0, &Device::cpu()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "softmax",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("at least one dimension"), "{err}");
}

#[test]
fn softmax_rejects_dims_out_of_range() {
    let cpu = Device::cpu();
    for dim in [2, 3, -3, i64::MAX, i64::MIN] {
        let err = Softmax::new(spec(&[4, 8], DType::Float32), dim, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "softmax",
                    field: "dim",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&dim.to_string()) && text.contains("[-2, 2)"),
            "{text}"
        );
    }
    for dim in [-2, -1, 0, 1] {
        assert!(Softmax::new(spec(&[4, 8], DType::Float32), dim, &cpu).is_ok());
    }
}

#[test]
fn unsupported_dtypes_are_named() {
    let cpu = Device::cpu();
    for dtype in [
        DType::Float64,
        DType::Int32,
        DType::Bool,
        DType::Float8E4M3Fn,
    ] {
        let err = Softmax::new(spec(&[4, 8], dtype), -1, &cpu).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "softmax", field: "x", value, .. } if value == dtype),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(dtype.name()) && err.to_string().contains("bfloat16"),
            "{err}"
        );
        let err = RmsNorm::new(spec(&[4, 8], dtype), spec(&[8], dtype), 1e-6, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidDType {
                    op: "rms_norm",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn empty_tensors_are_refused_at_plan_time() {
    let cpu = Device::cpu();
    for shape in [&[0usize, 8][..], &[4, 0], &[0]] {
        let err = Softmax::new(spec(shape, DType::Float16), -1, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "softmax",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("empty"), "{err}");
        let n = *shape.last().unwrap();
        let err = RmsNorm::new(
            spec(shape, DType::Float16),
            spec(&[n], DType::Float16),
            1e-6,
            &cpu,
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::InvalidShape { op: "rms_norm", .. }),
            "{err:?}"
        );
    }
}

#[test]
fn tensors_that_do_not_match_the_plan_are_refused() {
    let cpu = Device::cpu();
    let planned = spec(&[4, 8], DType::Float32);
    let op = Softmax::new(planned.clone(), -1, &cpu).unwrap();
    for other in [
        spec(&[4, 9], DType::Float32),
        spec(&[4, 8], DType::BFloat16),
        spec(&[32], DType::Float32),
    ] {
        let x = Tensor::random(&other, 1, &cpu).unwrap();
        let err = op.forward(&x).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InputMismatch {
                    op: "softmax",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("float32[4, 8]") && text.contains(&other.to_string()),
            "{text}"
        );
    }
    // The output of forward_into is checked too.
    let x = Tensor::random(&planned, 1, &cpu).unwrap();
    let mut wrong_out = Tensor::zeros(&spec(&[4, 8], DType::Float16), &cpu).unwrap();
    let err = op.forward_into(&x, &mut wrong_out).unwrap_err();
    assert!(
        matches!(err, Error::InputMismatch { field: "y", .. }),
        "{err:?}"
    );

    let norm = RmsNorm::new(planned.clone(), spec(&[8], DType::Float32), 1e-6, &cpu).unwrap();
    let w_wrong = Tensor::random(&spec(&[8], DType::BFloat16), 2, &cpu).unwrap();
    let err = norm.forward(&x, &w_wrong).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "rms_norm",
                field: "weight",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn cpu_path_handles_edge_rows() {
    let cpu = Device::cpu();
    let inf = f64::INFINITY;
    let s = spec(&[4, 3], DType::Float32);
    let x = Tensor::from_f64_rounded(
        &[
            -inf,
            -inf,
            -inf,
            1.0,
            f64::NAN,
            2.0,
            1.0,
            inf,
            0.0,
            -inf,
            0.0,
            0.0,
        ],
        &s,
        &cpu,
    )
    .unwrap();
    let y = Softmax::new(s, -1, &cpu)
        .unwrap()
        .forward(&x)
        .unwrap()
        .to_vec_f32()
        .unwrap();
    assert!(y[..9].iter().all(|v| v.is_nan()), "{y:?}");
    assert_eq!(&y[9..], &[0.0, 0.5, 0.5]);
    // A row of one element is 1.
    let one = spec(&[5, 1], DType::BFloat16);
    let x = Tensor::random(&one, 3, &cpu).unwrap();
    let y = Softmax::new(one, -1, &cpu)
        .unwrap()
        .forward(&x)
        .unwrap()
        .to_vec_f32()
        .unwrap();
    assert_eq!(y, vec![1.0; 5]);
}
