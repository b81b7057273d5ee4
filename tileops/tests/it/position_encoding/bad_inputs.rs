//! Bad input to rope gets a clear error naming the op, the field and the value: never a panic.
//! Runs on the CPU; the same checks run before any GPU work. (Two tests check fp8_quant's and
//! qk_norm_rope_fp8's plans next to rope's and stay whole, here.)

use crate::common::spec;
use crate::fused::bad_inputs::fused;
use tileops::ops::{Fp8Quant, Rope};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

fn rope(
    x: &[usize],
    dtype: DType,
    positions: TensorSpec,
    cache: TensorSpec,
) -> Result<Rope, Error> {
    Rope::new(spec(x, dtype), positions, cache, &Device::cpu())
}

pub(crate) fn field_of(err: &Error) -> &'static str {
    match err {
        Error::InvalidShape { field, .. }
        | Error::InvalidDType { field, .. }
        | Error::InvalidParam { field, .. }
        | Error::InputMismatch { field, .. } => field,
        _ => "?",
    }
}

#[test]
fn rope_rejects_bad_ranks_dims_and_dtypes() {
    let i64s = |n: usize| spec(&[n], DType::Int64);
    let table = |w: usize| spec(&[16, w], DType::Float32);
    assert!(rope(&[4, 2, 8], DType::BFloat16, i64s(4), table(8)).is_ok());
    // Wrong rank of x.
    for shape in [&[4, 8][..], &[4, 2, 8, 1], &[]] {
        let err = rope(shape, DType::Float32, i64s(4), table(8)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "rope",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("rank 3"), "{err}");
    }
    // Odd head_dim, and one too wide for the kernels' shared-memory table.
    let err = rope(&[4, 2, 7], DType::Float32, i64s(4), table(7)).unwrap_err();
    assert!(err.to_string().contains("even"), "{err}");
    assert!(rope(&[1, 1, 8194], DType::Float32, i64s(1), table(8194)).is_err());
    // Unsupported dtypes of each input.
    for dtype in [DType::Float64, DType::Int32, DType::Float8E4M3Fn] {
        let err = rope(&[4, 2, 8], dtype, i64s(4), table(8)).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "rope", field: "x", value, .. } if value == dtype),
            "{err:?}"
        );
    }
    // Positions of a float or 8/16-bit type: the message names the index types taken.
    for dtype in [DType::Float32, DType::Int16, DType::UInt8] {
        let err = rope(&[4, 2, 8], DType::Float32, spec(&[4], dtype), table(8)).unwrap_err();
        assert_eq!(field_of(&err), "positions", "{err:?}");
        assert!(err.to_string().contains("int64, int32 or uint32"), "{err}");
    }
    let err = rope(
        &[4, 2, 8],
        DType::Float32,
        i64s(4),
        spec(&[16, 8], DType::BFloat16),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidDType {
                field: "cos_sin_cache",
                ..
            }
        ),
        "{err:?}"
    );
    // positions must be [tokens]; the table [max_pos >= 1, head_dim].
    for bad in [i64s(3), spec(&[4, 1], DType::Int64)] {
        let err = rope(&[4, 2, 8], DType::Float32, bad, table(8)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    field: "positions",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    for bad in [
        table(4),
        table(16),
        spec(&[0, 8], DType::Float32),
        spec(&[8], DType::Float32),
    ] {
        let err = rope(&[4, 2, 8], DType::Float32, i64s(4), bad).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    field: "cos_sin_cache",
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
    for shape in [[0usize, 2, 8], [4, 0, 8], [4, 2, 0]] {
        let err = rope(
            &shape,
            DType::Float16,
            spec(&[shape[0]], DType::Int64),
            spec(&[4, shape[2]], DType::Float32),
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::InvalidShape { op: "rope", .. }),
            "{err:?}"
        );
    }
    for shape in [[0usize, 8], [4, 0]] {
        let err = Fp8Quant::new(spec(&shape, DType::BFloat16), 0, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "fp8_quant",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("empty"), "{err}");
    }
    let err = fused(&[0, 2, 128], &[0, 1, 128], DType::BFloat16).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidShape {
                op: "qk_norm_rope_fp8",
                field: "q",
                ..
            }
        ),
        "{err:?}"
    );
    let err = fused(&[2, 2, 128], &[2, 0, 128], DType::BFloat16).unwrap_err();
    assert_eq!(field_of(&err), "k", "{err:?}");
}

#[test]
fn tensors_that_do_not_match_the_plan_are_refused() {
    let cpu = Device::cpu();
    // rope: each input, and the output of forward_into.
    let xs = spec(&[2, 3, 8], DType::Float32);
    let op = Rope::new(
        xs.clone(),
        spec(&[2], DType::Int64),
        spec(&[4, 8], DType::Float32),
        &cpu,
    )
    .unwrap();
    let x = Tensor::random(&xs, 1, &cpu).unwrap();
    let pos = Tensor::from_slice(&[0i64, 3], [2], &cpu).unwrap();
    let cache = Tensor::zeros(&spec(&[4, 8], DType::Float32), &cpu).unwrap();
    let other_x = Tensor::random(&spec(&[2, 3, 8], DType::BFloat16), 1, &cpu).unwrap();
    let err = op.forward(&other_x, &pos, &cache).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "rope",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("float32[2, 3, 8]"), "{err}");
    let other_pos = Tensor::from_slice(&[0i64, 1, 2], [3], &cpu).unwrap();
    let err = op.forward(&x, &other_pos, &cache).unwrap_err();
    assert_eq!(field_of(&err), "positions");
    let other_cache = Tensor::zeros(&spec(&[5, 8], DType::Float32), &cpu).unwrap();
    let err = op.forward(&x, &pos, &other_cache).unwrap_err();
    assert_eq!(field_of(&err), "cos_sin_cache");
    let mut wrong_y = Tensor::zeros(&spec(&[2, 3, 8], DType::Float16), &cpu).unwrap();
    let err = op.forward_into(&x, &pos, &cache, &mut wrong_y).unwrap_err();
    assert_eq!(field_of(&err), "y");
    assert!(op.forward(&x, &pos, &cache).is_ok());
    // Position values outside the table: an error on the CPU.
    let bad_pos = Tensor::from_slice(&[0i64, 4], [2], &cpu).unwrap();
    let err = op.forward(&x, &bad_pos, &cache).unwrap_err();
    assert!(err.to_string().contains("[0, 4)"), "{err}");

    // fp8_quant: x, y and scales.
    let xs = spec(&[4, 32], DType::BFloat16);
    let quant = Fp8Quant::new(xs.clone(), 16, &cpu).unwrap();
    let x = Tensor::random(&xs, 2, &cpu).unwrap();
    let err = quant
        .forward(&Tensor::random(&spec(&[4, 16], DType::BFloat16), 2, &cpu).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InputMismatch {
                op: "fp8_quant",
                field: "x",
                ..
            }
        ),
        "{err:?}"
    );
    let mut y = Tensor::zeros(&quant.y_spec(), &cpu).unwrap();
    let mut bad_scales = Tensor::zeros(&spec(&[4, 1], DType::Float32), &cpu).unwrap();
    let err = quant.forward_into(&x, &mut y, &mut bad_scales).unwrap_err();
    assert_eq!(field_of(&err), "scales");
    let mut bad_y = Tensor::zeros(&spec(&[4, 32], DType::UInt8), &cpu).unwrap();
    let mut scales = Tensor::zeros(quant.scales_spec(), &cpu).unwrap();
    let err = quant.forward_into(&x, &mut bad_y, &mut scales).unwrap_err();
    assert_eq!(field_of(&err), "y");
    assert!(quant.forward_into(&x, &mut y, &mut scales).is_ok());

    // qk_norm_rope_fp8: an input and an output.
    let op = fused(&[2, 3, 128], &[2, 1, 128], DType::BFloat16).unwrap();
    let t = |shape: &[usize], dtype| Tensor::random(&spec(shape, dtype), 3, &cpu).unwrap();
    let (q, k) = (
        t(&[2, 3, 128], DType::BFloat16),
        t(&[2, 1, 128], DType::BFloat16),
    );
    let (qw, kw) = (t(&[128], DType::BFloat16), t(&[128], DType::BFloat16));
    let pos = Tensor::from_slice(&[1i64, 31], [2], &cpu).unwrap();
    let cache = Tensor::zeros(&spec(&[32, 128], DType::Float32), &cpu).unwrap();
    let err = op.forward(&k, &k, &qw, &kw, &pos, &cache).unwrap_err();
    assert_eq!(field_of(&err), "q");
    let err = op
        .forward(&q, &k, &qw, &t(&[128], DType::Float16), &pos, &cache)
        .unwrap_err();
    assert_eq!(field_of(&err), "k_weight");
    let mut out = op.forward(&q, &k, &qw, &kw, &pos, &cache).unwrap();
    out.k_scale = Tensor::zeros(&spec(&[2, 3], DType::Float32), &cpu).unwrap();
    let err = op
        .forward_into(&q, &k, &qw, &kw, &pos, &cache, &mut out)
        .unwrap_err();
    assert_eq!(field_of(&err), "k_scale");
    let bad_pos = Tensor::from_slice(&[-1i64, 0], [2], &cpu).unwrap();
    let err = op.forward(&q, &k, &qw, &kw, &bad_pos, &cache).unwrap_err();
    assert_eq!(field_of(&err), "positions");
}
