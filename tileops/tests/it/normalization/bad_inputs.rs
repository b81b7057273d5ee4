//! Bad input to rms_norm, layer_norm and fused_add_rms_norm gets a clear error naming the op, the
//! field and the value: never a panic. Runs on the CPU; the same checks run before any GPU work.
//! (Tests that also check the activations' plans next to the norms' stay whole, here.)

use crate::common::spec;
use tileops::ops::RmsNorm;
use tileops::ops::{
    FusedAddRmsNorm, Gelu, GeluApproximate, LayerNorm, Relu, Sigmoid, Silu, SiluAndMul,
};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

#[test]
fn rms_norm_rejects_bad_weight_rank_and_eps() {
    let cpu = Device::cpu();
    let x = spec(&[2, 8], DType::BFloat16);
    let err = RmsNorm::new(
        spec(&[], DType::BFloat16),
        spec(&[1], DType::BFloat16),
        1e-6,
        &cpu,
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidShape { field: "x", .. }),
        "{err:?}"
    );
    let err = RmsNorm::new(x.clone(), spec(&[7], DType::BFloat16), 1e-6, &cpu).unwrap_err();
    assert!(err.to_string().contains("must be [8]"), "{err}");
    let err = RmsNorm::new(x.clone(), spec(&[8], DType::Float16), 1e-6, &cpu).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidDType {
                field: "weight",
                ..
            }
        ),
        "{err:?}"
    );
    for eps in [-1e-6, f64::NAN, f64::INFINITY] {
        let err = RmsNorm::new(x.clone(), spec(&[8], DType::BFloat16), eps, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "rms_norm",
                    field: "eps",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

pub(crate) fn layer_norm(
    x: &[usize],
    w: &[usize],
    b: &[usize],
    dtype: DType,
    eps: f64,
) -> Result<LayerNorm, Error> {
    LayerNorm::new(
        spec(x, dtype),
        spec(w, dtype),
        spec(b, dtype),
        eps,
        &Device::cpu(),
    )
}

pub(crate) fn fused(
    x: &[usize],
    r: &[usize],
    w: &[usize],
    dtype: DType,
    eps: f64,
) -> Result<FusedAddRmsNorm, Error> {
    FusedAddRmsNorm::new(
        spec(x, dtype),
        spec(r, dtype),
        spec(w, dtype),
        eps,
        &Device::cpu(),
    )
}

/// Every activation plan for `x`, by op name.
fn activations(x: &TensorSpec) -> Vec<(&'static str, Result<(), Error>)> {
    let cpu = Device::cpu();
    vec![
        ("relu", Relu::new(x.clone(), &cpu).map(drop)),
        (
            "gelu",
            Gelu::new(x.clone(), GeluApproximate::None, &cpu).map(drop),
        ),
        (
            "gelu",
            Gelu::new(x.clone(), GeluApproximate::Tanh, &cpu).map(drop),
        ),
        ("silu", Silu::new(x.clone(), &cpu).map(drop)),
        ("sigmoid", Sigmoid::new(x.clone(), &cpu).map(drop)),
        ("silu_and_mul", SiluAndMul::new(x.clone(), &cpu).map(drop)),
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
    let err = SiluAndMul::new(spec(&[], DType::Float32), &Device::cpu()).unwrap_err();
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
        let err = SiluAndMul::new(spec(&[2, last], dt), &Device::cpu()).unwrap_err();
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
        x.clone(),
        spec(&[8], DType::Float32),
        spec(&[8], DType::Float16),
        1e-5,
        &cpu,
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
        x.clone(),
        spec(&[2, 8], DType::BFloat16),
        spec(&[8], DType::Float16),
        1e-6,
        &cpu,
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
    let relu = Relu::new(x, &cpu).unwrap();
    assert!(matches!(relu.run(&[]), Err(Error::Arity { .. })));
    let inputs = norm.random_inputs(3).unwrap();
    assert_eq!(norm.run(&inputs).unwrap().len(), 1);
    let op = fused(&[2, 8], &[2, 8], &[8], DType::Float32, 1e-6).unwrap();
    let inputs = op.random_inputs(3).unwrap();
    assert_eq!(op.run(&inputs).unwrap().len(), 2);
}
