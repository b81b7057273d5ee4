//! Bad input to rope, fp8_quant and qk_norm_rope_fp8 gets a clear error naming the op, the field
//! and the value: never a panic. Runs on the CPU; the same checks run before any GPU work.

mod common;

use tileops::ops::{Fp8Quant, QkNormRopeFp8, Rope};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

use common::spec;

fn rope(
    x: &[usize],
    dtype: DType,
    positions: TensorSpec,
    cache: TensorSpec,
) -> Result<Rope, Error> {
    Rope::new(&Device::cpu(), spec(x, dtype), positions, cache)
}

fn field_of(err: &Error) -> &'static str {
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
    let err = rope(
        &[4, 2, 8],
        DType::Float32,
        spec(&[4], DType::Int32),
        table(8),
    )
    .unwrap_err();
    assert_eq!(field_of(&err), "positions", "{err:?}");
    assert!(err.to_string().contains("int64"), "{err}");
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
        let err = Fp8Quant::new(&cpu, spec(&shape, DType::BFloat16), 0).unwrap_err();
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
fn fp8_quant_rejects_bad_ranks_dtypes_and_groups() {
    let cpu = Device::cpu();
    for shape in [&[8][..], &[2, 4, 8], &[]] {
        let err = Fp8Quant::new(&cpu, spec(shape, DType::Float32), 0).unwrap_err();
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
    }
    for dtype in [
        DType::Float64,
        DType::Int8,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
    ] {
        let err = Fp8Quant::new(&cpu, spec(&[4, 8], dtype), 0).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "fp8_quant", field: "x", value, .. } if value == dtype),
            "{err:?}"
        );
    }
    for group in [3, 16, 9] {
        let err = Fp8Quant::new(&cpu, spec(&[4, 8], DType::Float32), group).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "fp8_quant",
                    field: "group_size",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("divide K = 8"), "{err}");
    }
    for group in [0, 1, 2, 4, 8] {
        let op = Fp8Quant::new(&cpu, spec(&[4, 8], DType::Float32), group).unwrap();
        let per_row = 8usize.checked_div(group).unwrap_or(1);
        assert_eq!(op.scales_spec().shape, vec![4, per_row]);
    }
}

fn fused(q: &[usize], k: &[usize], dtype: DType) -> Result<QkNormRopeFp8, Error> {
    QkNormRopeFp8::new(
        &Device::cpu(),
        spec(q, dtype),
        spec(k, dtype),
        spec(&[128], dtype),
        spec(&[128], dtype),
        spec(&[q.first().copied().unwrap_or(1)], DType::Int64),
        spec(&[32, 128], DType::Float32),
        1e-6,
    )
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
        QkNormRopeFp8::new(
            &cpu,
            spec(&[4, 8, 128], bf),
            k,
            qw,
            spec(&[128], bf),
            pos,
            cache,
            eps,
        )
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

#[test]
fn tensors_that_do_not_match_the_plan_are_refused() {
    let cpu = Device::cpu();
    // rope: each input, and the output of forward_into.
    let xs = spec(&[2, 3, 8], DType::Float32);
    let op = Rope::new(
        &cpu,
        xs.clone(),
        spec(&[2], DType::Int64),
        spec(&[4, 8], DType::Float32),
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
    let quant = Fp8Quant::new(&cpu, xs.clone(), 16).unwrap();
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

#[test]
fn cpu_paths_handle_edge_values() {
    let cpu = Device::cpu();
    // fp8_quant: a length-1 row, saturation, NaN, inf and zeros.
    let xs = spec(&[5, 2], DType::Float32);
    let x = Tensor::from_f32_slice(
        &[
            3.0,
            1.0e-6,
            f32::NAN,
            1.0,
            f32::INFINITY,
            -2.0,
            0.0,
            -0.0,
            -5.0,
            5.0,
        ],
        [5, 2],
        &cpu,
    )
    .unwrap();
    let (y, scales) = Fp8Quant::new(&cpu, xs, 0).unwrap().forward(&x).unwrap();
    let y = y.to_vec_f32().unwrap();
    let scales = scales.to_vec_f32().unwrap();
    assert_eq!(y[0], 448.0);
    assert_eq!(y[1], 0.0); // 1e-6 * 448 / 3 is below half the smallest subnormal (2^-10)
    // A NaN poisons its group (amax, scale and every code), as `torch.amax` propagates it.
    assert!(y[2].is_nan() && y[3].is_nan() && scales[1].is_nan());
    assert!(y[4].is_nan() && y[5] == 0.0 && scales[2].is_infinite());
    assert_eq!((y[6], y[7], scales[3]), (0.0, 0.0, 1.0 / (448.0 * 512.0)));
    assert_eq!((y[8], y[9]), (-448.0, 448.0));
    let one = spec(&[1, 1], DType::BFloat16);
    let (y, s) = Fp8Quant::new(&cpu, one.clone(), 0)
        .unwrap()
        .forward(&Tensor::full(&one, -0.75, &cpu).unwrap())
        .unwrap();
    assert_eq!(y.to_vec_f32().unwrap(), vec![-448.0]);
    assert_eq!(s.to_vec_f32().unwrap(), vec![0.75 / 448.0]);
}
