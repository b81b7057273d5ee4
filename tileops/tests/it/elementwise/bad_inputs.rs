//! Tensors that do not match an activation's or silu_and_mul's plan are refused, with a clear error
//! naming the op and the field (the norms' plans are checked in the same test). Runs on the CPU.
//! The activations' other plan-time checks run with the norms' in `normalization::bad_inputs`.

use crate::common::spec;
use crate::normalization::bad_inputs::{fused, layer_norm};
use tileops::ops::{Relu, SiluAndMul};
use tileops::{DType, Device, Error, Tensor};

#[test]
fn tensors_that_do_not_match_the_plan_are_refused() {
    let cpu = Device::cpu();
    let planned = spec(&[4, 8], DType::Float32);
    let x = Tensor::random(&planned, 1, &cpu).unwrap();
    let others = [
        spec(&[4, 9], DType::Float32),
        spec(&[4, 8], DType::BFloat16),
        spec(&[32], DType::Float32),
    ];

    let relu = Relu::new(planned.clone(), &cpu).unwrap();
    let swiglu = SiluAndMul::new(planned.clone(), &cpu).unwrap();
    for other in &others {
        let wrong = Tensor::random(other, 1, &cpu).unwrap();
        let err = relu.forward(&wrong).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InputMismatch {
                    op: "relu",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("float32[4, 8]"), "{err}");
        let err = swiglu.forward(&wrong).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InputMismatch {
                    op: "silu_and_mul",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    // The outputs of forward_into are checked too: silu_and_mul's is [4, 4], not x's spec.
    let mut wrong_out = Tensor::zeros(&planned, &cpu).unwrap();
    let err = swiglu.forward_into(&x, &mut wrong_out).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "silu_and_mul",
                field: "y",
                ..
            }
        ),
        "{err:?}"
    );
    let mut out = Tensor::zeros(swiglu.y(), &cpu).unwrap();
    swiglu.forward_into(&x, &mut out).unwrap();
    let mut wrong_out = Tensor::zeros(&spec(&[4, 8], DType::Float16), &cpu).unwrap();
    let err = relu.forward_into(&x, &mut wrong_out).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "relu",
                field: "y",
                ..
            }
        ),
        "{err:?}"
    );

    let p = Tensor::random(&spec(&[8], DType::Float32), 2, &cpu).unwrap();
    let p_wrong = Tensor::random(&spec(&[8], DType::BFloat16), 2, &cpu).unwrap();
    let norm = layer_norm(&[4, 8], &[8], &[8], DType::Float32, 1e-5).unwrap();
    let err = norm.forward(&x, &p, &p_wrong).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "layer_norm",
                field: "bias",
                ..
            }
        ),
        "{err:?}"
    );

    let op = fused(&[4, 8], &[4, 8], &[8], DType::Float32, 1e-6).unwrap();
    let r_wrong = Tensor::random(&spec(&[4, 9], DType::Float32), 3, &cpu).unwrap();
    let err = op.forward(&x, &r_wrong, &p).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "fused_add_rms_norm",
                field: "residual",
                ..
            }
        ),
        "{err:?}"
    );
    let (mut y, mut bad) = (
        Tensor::zeros(&planned, &cpu).unwrap(),
        Tensor::zeros(&spec(&[4, 8], DType::Float16), &cpu).unwrap(),
    );
    let err = op.forward_into(&x, &x, &p, &mut y, &mut bad).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "fused_add_rms_norm",
                field: "residual_out",
                ..
            }
        ),
        "{err:?}"
    );
}
