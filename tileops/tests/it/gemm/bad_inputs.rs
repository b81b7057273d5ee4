//! `gemm` on bad input gets a clear error naming the op, the field and the value: never a panic.
//! Runs on the CPU; the same checks run before any GPU work.

use tileops::ops::Gemm;
use tileops::{DType, Device, Error, Tensor};

use crate::common::spec;

fn plan(a: &[usize], b: &[usize], dtype: DType, ta: bool, tb: bool) -> Result<Gemm, Error> {
    Gemm::new(
        spec(a, dtype),
        spec(b, dtype),
        tileops::ops::GemmOptions::new().trans_a(ta).trans_b(tb),
        &Device::cpu(),
    )
}

#[test]
fn operands_must_be_matrices() {
    for (a, b, field) in [
        (&[4][..], &[4, 8][..], "a"),
        (&[2, 3, 4], &[4, 8], "a"),
        (&[], &[4, 8], "a"),
        (&[3, 4], &[4], "b"),
        (&[3, 4], &[1, 4, 8], "b"),
    ] {
        let err = plan(a, b, DType::Float16, false, false).unwrap_err();
        assert!(
            matches!(err, Error::InvalidShape { op: "gemm", field: f, .. } if f == field),
            "{a:?} {b:?}: {err:?}"
        );
        assert!(err.to_string().contains("rank 2"), "{err}");
    }
}

#[test]
fn inner_dims_must_agree_in_every_layout() {
    // a is [3, 4] as stored; b has K = 5 once the flags are applied.
    for (a, b, ta, tb) in [
        (&[3, 4][..], &[5, 8][..], false, false),
        (&[4, 3], &[5, 8], true, false),
        (&[3, 4], &[8, 5], false, true),
        (&[4, 3], &[8, 5], true, true),
    ] {
        let err = plan(a, b, DType::BFloat16, ta, tb).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "gemm",
                    field: "b",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("inner dims disagree") && text.contains("[3, 4]"),
            "{text}"
        );
    }
    // The same shapes agree under the other flag: stored [4, 3] with trans_a is [3, 4].
    assert!(plan(&[4, 3], &[4, 8], DType::BFloat16, true, false).is_ok());
    assert!(plan(&[3, 4], &[8, 4], DType::BFloat16, false, true).is_ok());
}

#[test]
fn unsupported_and_mixed_dtypes_are_named() {
    let cpu = Device::cpu();
    for dtype in [
        DType::Float64,
        DType::Int32,
        DType::Int8,
        DType::Bool,
        DType::Float8E4M3Fn,
    ] {
        let err = plan(&[2, 3], &[3, 4], dtype, false, false).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "gemm", field: "a", value, .. } if value == dtype),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(dtype.name()) && err.to_string().contains("bfloat16"),
            "{err}"
        );
    }
    let err = Gemm::new(
        spec(&[2, 3], DType::Float16),
        spec(&[3, 4], DType::BFloat16),
        tileops::ops::GemmOptions::new(),
        &cpu,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidDType {
                op: "gemm",
                field: "b",
                value: DType::BFloat16,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("float16"), "{err}");
}

#[test]
fn tf32_is_for_float32_only() {
    let cpu = Device::cpu();
    for dtype in [DType::Float16, DType::BFloat16] {
        let err = Gemm::new(
            spec(&[2, 3], dtype),
            spec(&[3, 4], dtype),
            tileops::ops::GemmOptions::new().allow_tf32(true),
            &cpu,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "gemm",
                    field: "allow_tf32",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let f = DType::Float32;
    assert!(
        Gemm::new(
            spec(&[2, 3], f),
            spec(&[3, 4], f),
            tileops::ops::GemmOptions::new().allow_tf32(true),
            &cpu
        )
        .is_ok()
    );
}

#[test]
fn empty_dims_are_refused_at_plan_time() {
    // M = 0, K = 0 (in a and in b), N = 0, in the stored and transposed layouts.
    for (a, b, ta, tb) in [
        (&[0, 4][..], &[4, 8][..], false, false),
        (&[3, 0], &[0, 8], false, false),
        (&[3, 4], &[4, 0], false, false),
        (&[4, 0], &[4, 8], true, false),
        (&[3, 4], &[0, 4], false, true),
        (&[0, 0], &[0, 0], true, true),
    ] {
        let err = plan(a, b, DType::Float32, ta, tb).unwrap_err();
        assert!(
            matches!(err, Error::InvalidShape { op: "gemm", .. }),
            "{a:?} {b:?}: {err:?}"
        );
        assert!(err.to_string().contains("empty"), "{err}");
    }
}

#[test]
fn tensors_that_do_not_match_the_plan_are_refused() {
    let cpu = Device::cpu();
    let (a, b) = (spec(&[3, 4], DType::Float16), spec(&[4, 5], DType::Float16));
    let op = Gemm::new(a.clone(), b.clone(), tileops::ops::GemmOptions::new(), &cpu).unwrap();
    let x = Tensor::random(&a, 1, &cpu).unwrap();
    let y = Tensor::random(&b, 2, &cpu).unwrap();
    // a: wrong shape (the transposed one), wrong dtype.
    for other in [
        spec(&[4, 3], DType::Float16),
        spec(&[3, 4], DType::BFloat16),
    ] {
        let wrong = Tensor::random(&other, 3, &cpu).unwrap();
        let err = op.forward(&wrong, &y).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InputMismatch {
                    op: "gemm",
                    field: "a",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("float16[3, 4]") && text.contains(&other.to_string()),
            "{text}"
        );
    }
    // b: swapped operands.
    let err = op.forward(&y, &x).unwrap_err();
    assert!(
        matches!(err, Error::InputMismatch { field: "a", .. }),
        "{err:?}"
    );
    let wrong_b = Tensor::random(&spec(&[4, 6], DType::Float16), 4, &cpu).unwrap();
    let err = op.forward(&x, &wrong_b).unwrap_err();
    assert!(
        matches!(err, Error::InputMismatch { field: "b", .. }),
        "{err:?}"
    );
    // The output of forward_into: [M, N] in the operands' dtype.
    for wrong_c in [spec(&[5, 3], DType::Float16), spec(&[3, 5], DType::Float32)] {
        let mut c = Tensor::zeros(&wrong_c, &cpu).unwrap();
        let err = op.forward_into(&x, &y, &mut c).unwrap_err();
        assert!(
            matches!(err, Error::InputMismatch { field: "c", .. }),
            "{err:?}"
        );
    }
    let mut c = Tensor::zeros(&spec(&[3, 5], DType::Float16), &cpu).unwrap();
    op.forward_into(&x, &y, &mut c).unwrap();
}

#[test]
fn every_workload_row_plans_through_the_registry() {
    // The registry's constructor hook maps each row (shapes, trans flags) onto Gemm::new.
    let gemm = tileops::registry::find("gemm").expect("gemm is registered");
    assert!(gemm.workloads.iter().any(|w| w.param("trans_b").is_some()));
    for workload in gemm.workloads {
        for case in workload.cases() {
            assert!(
                (gemm.build)(&Device::cpu(), &case).is_ok(),
                "{}",
                case.name()
            );
        }
    }
}
