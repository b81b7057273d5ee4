//! Bad input to log_softmax and the reductions (sum, mean, amax, logsumexp) gets a clear error
//! naming the op, the field and the value: never a panic. Runs on the CPU; the same checks run
//! before any GPU work.

use tileops::ops::{Amax, LogSoftmax, Logsumexp, Mean, ReduceDim, Sum};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

use crate::common::spec;

/// Plans every reduction with the same arguments; the op name first.
fn plan_all(
    x: &TensorSpec,
    dim: ReduceDim,
    keepdim: bool,
) -> Vec<(&'static str, Result<TensorSpec, Error>)> {
    let cpu = Device::cpu();
    vec![
        (
            "sum",
            Sum::new(x.clone(), dim.clone(), keepdim, &cpu).map(|op| op.y().clone()),
        ),
        (
            "mean",
            Mean::new(x.clone(), dim.clone(), keepdim, &cpu).map(|op| op.y().clone()),
        ),
        (
            "amax",
            Amax::new(x.clone(), dim.clone(), keepdim, &cpu).map(|op| op.y().clone()),
        ),
        (
            "logsumexp",
            Logsumexp::new(x.clone(), dim, keepdim, &cpu).map(|op| op.y().clone()),
        ),
    ]
}

fn assert_param_error(err: &Error, want_op: &str, needle: &str) {
    assert!(
        matches!(err, Error::InvalidParam { op, field: "dim", .. } if *op == want_op),
        "{err:?}"
    );
    assert!(err.to_string().contains(needle), "{err}");
}

#[test]
fn reductions_reject_dims_out_of_range() {
    let x = spec(&[4, 8], DType::Float32);
    for dim in [
        ReduceDim::One(2),
        ReduceDim::One(-3),
        ReduceDim::One(i64::MAX),
        ReduceDim::One(i64::MIN),
        ReduceDim::Many(vec![0, 2]),
        ReduceDim::Many(vec![-3]),
    ] {
        for (op, result) in plan_all(&x, dim.clone(), false) {
            let err = result.expect_err("dim out of range");
            assert_param_error(&err, op, "[-2, 2)");
        }
    }
    for dim in [
        ReduceDim::One(-2),
        ReduceDim::One(1),
        ReduceDim::Many(vec![-1, 0]),
    ] {
        for (op, result) in plan_all(&x, dim.clone(), true) {
            assert!(result.is_ok(), "{op} {dim}");
        }
    }
}

#[test]
fn reductions_reject_duplicate_and_empty_dims() {
    let x = spec(&[4, 8, 3], DType::BFloat16);
    for dim in [vec![1, 1], vec![0, 2, -1], vec![-3, 0]] {
        for (op, result) in plan_all(&x, ReduceDim::Many(dim.clone()), false) {
            let err = result.expect_err("duplicate dims");
            assert_param_error(&err, op, "more than once");
        }
    }
    for (op, result) in plan_all(&x, ReduceDim::Many(vec![]), false) {
        let err = result.expect_err("empty dim list");
        assert_param_error(&err, op, "at least one dim");
    }
}

#[test]
fn reductions_and_log_softmax_reject_rank_zero_and_empty_tensors() {
    let cpu = Device::cpu();
    for (op, result) in plan_all(&spec(&[], DType::Float32), ReduceDim::One(0), false) {
        let err = result.expect_err("rank 0");
        assert!(
            matches!(err, Error::InvalidShape { op: o, field: "x", .. } if o == op),
            "{err:?}"
        );
        assert!(err.to_string().contains("at least one dimension"), "{err}");
    }
    let err = LogSoftmax::new(spec(&[], DType::Float32), 0, &cpu).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "log_softmax",
                ..
            }
        ),
        "{err:?}"
    );
    for shape in [&[0usize, 4][..], &[4, 0], &[2, 0, 3]] {
        for (op, result) in plan_all(&spec(shape, DType::Float16), ReduceDim::One(-1), false) {
            let err = result.expect_err("empty tensor");
            assert!(
                matches!(err, Error::InvalidShape { op: o, field: "x", .. } if o == op),
                "{err:?}"
            );
            assert!(err.to_string().contains("empty"), "{err}");
        }
        let err = LogSoftmax::new(spec(shape, DType::Float16), -1, &cpu).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }
}

#[test]
fn log_softmax_rejects_dims_out_of_range() {
    let cpu = Device::cpu();
    for dim in [2, -3, i64::MAX, i64::MIN] {
        let err = LogSoftmax::new(spec(&[4, 8], DType::Float32), dim, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "log_softmax",
                    field: "dim",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("[-2, 2)"), "{err}");
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
        let x = spec(&[4, 8], dtype);
        for (op, result) in plan_all(&x, ReduceDim::One(-1), false) {
            let err = result.expect_err("unsupported dtype");
            assert!(
                matches!(err, Error::InvalidDType { op: o, field: "x", value, .. } if o == op && value == dtype),
                "{err:?}"
            );
            assert!(err.to_string().contains("bfloat16"), "{err}");
        }
        let err = LogSoftmax::new(x, -1, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidDType {
                    op: "log_softmax",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn inputs_that_do_not_match_the_plan_are_rejected() {
    let cpu = Device::cpu();
    let planned = spec(&[4, 8], DType::Float32);
    let others = [
        spec(&[4, 9], DType::Float32),
        spec(&[8, 4], DType::Float32),
        spec(&[4, 8, 1], DType::Float32),
        spec(&[4, 8], DType::BFloat16),
    ];
    let sum = Sum::new(planned.clone(), -1, false, &cpu).unwrap();
    let lse = Logsumexp::new(planned.clone(), [0, 1], true, &cpu).unwrap();
    let log_softmax = LogSoftmax::new(planned.clone(), 0, &cpu).unwrap();
    for other in &others {
        let x = Tensor::random(other, 1, &cpu).unwrap();
        for err in [
            sum.forward(&x).unwrap_err(),
            lse.forward(&x).unwrap_err(),
            log_softmax.forward(&x).unwrap_err(),
        ] {
            assert!(
                matches!(err, Error::InputMismatch { field: "x", .. }),
                "{err:?}"
            );
            assert!(err.to_string().contains("float32[4, 8]"), "{err}");
        }
    }
    // An output of the wrong shape: the input's shape instead of the reduced one.
    let x = Tensor::random(&planned, 1, &cpu).unwrap();
    let mut y = Tensor::zeros(&planned, &cpu).unwrap();
    let err = sum.forward_into(&x, &mut y).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "sum",
                field: "y",
                ..
            }
        ),
        "{err:?}"
    );
    let mut y = Tensor::zeros(sum.y(), &cpu).unwrap();
    sum.forward_into(&x, &mut y).unwrap();
}
