//! Bad input to qk_norm_rope_fp8 gets a clear error naming the op, the field and the value: never
//! a panic. Runs on the CPU; the same checks run before any GPU work.

use crate::common::spec;
use crate::position_encoding::bad_inputs::field_of;
use tileops::ops::QkNormRopeFp8;
use tileops::{DType, Device, Error, TensorSpec};

pub(crate) fn fused(q: &[usize], k: &[usize], dtype: DType) -> Result<QkNormRopeFp8, Error> {
    QkNormRopeFp8::builder(
        spec(q, dtype),
        spec(k, dtype),
        spec(&[32, 128], DType::Float32),
    )
    .q_weight(spec(&[128], dtype))
    .k_weight(spec(&[128], dtype))
    .positions(spec(&[q.first().copied().unwrap_or(1)], DType::Int64))
    .eps(1e-6)
    .build(&Device::cpu())
}

#[test]
fn qk_norm_rope_fp8_rejects_bad_shapes_dtypes_and_eps() {
    let cpu = Device::cpu();
    let bf = DType::BFloat16;
    assert!(fused(&[4, 8, 128], &[4, 2, 128], bf).is_ok());
    assert!(fused(&[4, 8, 128], &[4, 2, 128], DType::Float16).is_ok());
    // Rank, head_dim other than 128, token mismatch.
    let err = fused(&[4, 1024], &[4, 2, 128], bf).unwrap_err();
    assert_eq!(field_of(&err), "q", "{err:?}");
    let err = fused(&[4, 8, 64], &[4, 2, 64], bf).unwrap_err();
    assert!(err.to_string().contains("head_dim must be 128"), "{err}");
    let err = fused(&[4, 8, 128], &[3, 2, 128], bf).unwrap_err();
    assert!(
        matches!(err, Error::InvalidShape { field: "k", .. }),
        "{err:?}"
    );
    // Dtypes: q only bf16/f16; everything else must follow q.
    for dtype in [DType::Float32, DType::Float8E4M3Fn, DType::Int64] {
        let err = fused(&[4, 8, 128], &[4, 2, 128], dtype).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidDType {
                    op: "qk_norm_rope_fp8",
                    field: "q",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    let plan = |k: TensorSpec, qw: TensorSpec, pos: TensorSpec, cache: TensorSpec, eps: f64| {
        QkNormRopeFp8::builder(spec(&[4, 8, 128], bf), k, cache)
            .q_weight(qw)
            .k_weight(spec(&[128], bf))
            .positions(pos)
            .eps(eps)
            .build(&cpu)
    };
    let (k, w, pos, cache) = (
        spec(&[4, 2, 128], bf),
        spec(&[128], bf),
        spec(&[4], DType::Int64),
        spec(&[32, 128], DType::Float32),
    );
    let cases: Vec<(Result<QkNormRopeFp8, Error>, &str)> = vec![
        (
            plan(
                spec(&[4, 2, 128], DType::Float16),
                w.clone(),
                pos.clone(),
                cache.clone(),
                1e-6,
            ),
            "k",
        ),
        (
            plan(
                k.clone(),
                spec(&[128], DType::Float32),
                pos.clone(),
                cache.clone(),
                1e-6,
            ),
            "q_weight",
        ),
        (
            plan(k.clone(), spec(&[64], bf), pos.clone(), cache.clone(), 1e-6),
            "q_weight",
        ),
        (
            plan(
                k.clone(),
                w.clone(),
                spec(&[4], DType::Int32),
                cache.clone(),
                1e-6,
            ),
            "positions",
        ),
        (
            plan(
                k.clone(),
                w.clone(),
                spec(&[5], DType::Int64),
                cache.clone(),
                1e-6,
            ),
            "positions",
        ),
        (
            plan(
                k.clone(),
                w.clone(),
                pos.clone(),
                spec(&[32, 64], DType::Float32),
                1e-6,
            ),
            "cos_sin_cache",
        ),
        (
            plan(
                k.clone(),
                w.clone(),
                pos.clone(),
                spec(&[32, 128], bf),
                1e-6,
            ),
            "cos_sin_cache",
        ),
        (
            plan(k.clone(), w.clone(), pos.clone(), cache.clone(), -1.0),
            "eps",
        ),
        (
            plan(k.clone(), w.clone(), pos.clone(), cache.clone(), f64::NAN),
            "eps",
        ),
    ];
    for (result, field) in cases {
        let err = result.unwrap_err();
        assert_eq!(field_of(&err), field, "{err:?}");
        assert!(err.to_string().starts_with("qk_norm_rope_fp8: "), "{err}");
    }
}
