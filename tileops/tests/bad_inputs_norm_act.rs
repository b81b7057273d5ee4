//! Bad input to layer_norm, fused_add_rms_norm, the activations and silu_and_mul gets a clear
//! error naming the op, the field and the value: never a panic. Runs on the CPU; the same checks
//! run before any GPU work.

mod common;

use tileops::ops::{
    FusedAddRmsNorm, Gelu, GeluApproximate, LayerNorm, Relu, Sigmoid, Silu, SiluAndMul,
};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

use common::spec;

fn layer_norm(
    x: &[usize],
    w: &[usize],
    b: &[usize],
    dtype: DType,
    eps: f64,
) -> Result<LayerNorm, Error> {
    LayerNorm::new(
        &Device::cpu(),
        spec(x, dtype),
        spec(w, dtype),
        spec(b, dtype),
        eps,
    )
}

fn fused(
    x: &[usize],
    r: &[usize],
    w: &[usize],
    dtype: DType,
    eps: f64,
) -> Result<FusedAddRmsNorm, Error> {
    FusedAddRmsNorm::new(
        &Device::cpu(),
        spec(x, dtype),
        spec(r, dtype),
        spec(w, dtype),
        eps,
    )
}

/// Every activation plan for `x`, by op name.
fn activations(x: &TensorSpec) -> Vec<(&'static str, Result<(), Error>)> {
    let cpu = Device::cpu();
    vec![
        ("relu", Relu::new(&cpu, x.clone()).map(drop)),
        (
            "gelu",
            Gelu::new(&cpu, x.clone(), GeluApproximate::None).map(drop),
        ),
        (
            "gelu",
            Gelu::new(&cpu, x.clone(), GeluApproximate::Tanh).map(drop),
        ),
        ("silu", Silu::new(&cpu, x.clone()).map(drop)),
        ("sigmoid", Sigmoid::new(&cpu, x.clone()).map(drop)),
        ("silu_and_mul", SiluAndMul::new(&cpu, x.clone()).map(drop)),
    ]
}

#[test]
fn rank_zero_is_refused_where_a_last_dim_is_needed() {
    let err = layer_norm(&[], &[1], &[1], DType::Float32, 1e-5).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "layer_norm",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("at least one dimension"), "{err}");
    let err = fused(&[], &[], &[1], DType::Float32, 1e-6).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "fused_add_rms_norm",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    let err = SiluAndMul::new(&Device::cpu(), spec(&[], DType::Float32)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "silu_and_mul",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    // Elementwise activations take any rank, a scalar included.
    for (op, plan) in activations(&spec(&[], DType::Float32)) {
        if op != "silu_and_mul" {
            assert!(plan.is_ok(), "{op}: {plan:?}");
        }
    }
}

#[test]
fn bad_dims_are_named() {
    let dt = DType::BFloat16;
    let err = layer_norm(&[2, 8], &[7], &[8], dt, 1e-5).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "layer_norm",
                field: "weight",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("must be [8]"), "{err}");
    let err = layer_norm(&[2, 8], &[8], &[2, 8], dt, 1e-5).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "layer_norm",
                field: "bias",
                ..
            }
        ),
        "{err:?}"
    );
    let err = fused(&[2, 8], &[2, 9], &[8], dt, 1e-6).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "fused_add_rms_norm",
                field: "residual",
                ..
            }
        ),
        "{err:?}"
    );
    let err = fused(&[2, 8], &[2, 8], &[16], dt, 1e-6).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "fused_add_rms_norm",
                field: "weight",
                ..
            }
        ),
        "{err:?}"
    );
    for last in [1, 3, 4097] {
        let err = SiluAndMul::new(&Device::cpu(), spec(&[2, last], dt)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "silu_and_mul",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("must be even"), "{err}");
    }
}

#[test]
fn unsupported_and_mixed_dtypes_are_named() {
    for dtype in [
        DType::Float64,
        DType::Int32,
        DType::Bool,
        DType::Float8E4M3Fn,
    ] {
        let err = layer_norm(&[4, 8], &[8], &[8], dtype, 1e-5).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "layer_norm", field: "x", value, .. } if value == dtype),
            "{err:?}"
        );
        let err = fused(&[4, 8], &[4, 8], &[8], dtype, 1e-6).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidDType {
                    op: "fused_add_rms_norm",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        for (op, plan) in activations(&spec(&[4, 8], dtype)) {
            let err = plan.unwrap_err();
            assert!(
                matches!(err, Error::InvalidDType { op: o, field: "x", value, .. } if o == op && value == dtype),
                "{err:?}"
            );
            assert!(
                err.to_string().contains(dtype.name()) && err.to_string().contains("bfloat16"),
                "{err}"
            );
        }
    }
    let cpu = Device::cpu();
    let x = spec(&[2, 8], DType::Float16);
    let err = LayerNorm::new(
        &cpu,
        x.clone(),
        spec(&[8], DType::Float32),
        spec(&[8], DType::Float16),
        1e-5,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidDType {
                op: "layer_norm",
                field: "weight",
                ..
            }
        ),
        "{err:?}"
    );
    let err = FusedAddRmsNorm::new(
        &cpu,
        x.clone(),
        spec(&[2, 8], DType::BFloat16),
        spec(&[8], DType::Float16),
        1e-6,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidDType {
                op: "fused_add_rms_norm",
                field: "residual",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn empty_tensors_are_refused_at_plan_time() {
    for shape in [&[0usize, 8][..], &[4, 0], &[0], &[2, 0, 4]] {
        let n = *shape.last().unwrap();
        let err = layer_norm(shape, &[n], &[n], DType::Float16, 1e-5).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "layer_norm",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("empty"), "{err}");
        let err = fused(shape, shape, &[n], DType::Float16, 1e-6).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "fused_add_rms_norm",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        for (op, plan) in activations(&spec(shape, DType::Float16)) {
            let err = plan.unwrap_err();
            assert!(
                matches!(err, Error::InvalidShape { op: o, field: "x", .. } if o == op),
                "{op}: {err:?}"
            );
        }
    }
}

#[test]
fn bad_eps_and_gelu_approximate_are_refused() {
    for eps in [-1e-6, f64::NAN, f64::INFINITY] {
        let err = layer_norm(&[2, 8], &[8], &[8], DType::Float32, eps).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "layer_norm",
                    field: "eps",
                    ..
                }
            ),
            "{err:?}"
        );
        let err = fused(&[2, 8], &[2, 8], &[8], DType::Float32, eps).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "fused_add_rms_norm",
                    field: "eps",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let err = "sigmoid".parse::<GeluApproximate>().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidParam {
                op: "gelu",
                field: "approximate",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("sigmoid"), "{err}");
}

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

    let relu = Relu::new(&cpu, planned.clone()).unwrap();
    let swiglu = SiluAndMul::new(&cpu, planned.clone()).unwrap();
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

#[test]
fn bench_hooks_refuse_the_wrong_number_of_inputs() {
    use tileops::registry::BenchOp;
    let cpu = Device::cpu();
    let x = spec(&[2, 8], DType::Float32);
    let t = Tensor::random(&x, 1, &cpu).unwrap();
    let norm = layer_norm(&[2, 8], &[8], &[8], DType::Float32, 1e-5).unwrap();
    assert!(matches!(
        norm.run(std::slice::from_ref(&t)),
        Err(Error::Arity { .. })
    ));
    let relu = Relu::new(&cpu, x).unwrap();
    assert!(matches!(relu.run(&[]), Err(Error::Arity { .. })));
    let inputs = norm.random_inputs(3).unwrap();
    assert_eq!(norm.run(&inputs).unwrap().len(), 1);
    let op = fused(&[2, 8], &[2, 8], &[8], DType::Float32, 1e-6).unwrap();
    let inputs = op.random_inputs(3).unwrap();
    assert_eq!(op.run(&inputs).unwrap().len(), 2);
}
