//! Constructs that TileOPs's own manifests use, on synthetic entries
//! (`tests/manifests/tileops_constructs.yaml`) beside the compatibility suite: each compiles
//! through `#[roofline_op]` and evaluates to hand-computed values. Also the run-time agreement of
//! fixed-rank dims, TileOPs's dims named like params (two of its entries, vendored in
//! `tests/manifests/tileops_dims_as_params.yaml`), and an entry of 5,000 `vars` (generated code is
//! flat, so rustc copes).

use tileops::roofline::Value;
use tileops::{DType, RooflineError, TensorSpec};

#[tileops::roofline_op(
    "seq_shape_gemm",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct SeqShapeGemm {
    a: TensorSpec,
    b: TensorSpec,
}

#[tileops::roofline_op(
    "var_reuses_dim",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct VarReusesDim {
    input: TensorSpec,
}

// No `idx` field: `elem_bytes` comes from `dtype`, so the unbound first input is not read.
#[tileops::roofline_op(
    "elem_bytes_from_dtype",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct ElemBytesFromDtype {
    x: TensorSpec,
    dtype: DType,
}

#[tileops::roofline_op(
    "keyword_input",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct KeywordInput {
    r#type: TensorSpec,
    r#match: i64,
}

#[tileops::roofline_op(
    "square",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct Square {
    a: TensorSpec,
}

#[tileops::roofline_op(
    "shared_dims",
    manifest = "tests/manifests/tileops_constructs.yaml",
    register = false
)]
struct SharedDims {
    a: TensorSpec,
    b: TensorSpec,
    bias: Option<TensorSpec>,
}

// Every dim of its inputs is also a param: `a: [numel, k]`, `b: [num_experts, n, k]`, ...
#[tileops::roofline_op(
    "MoeGroupedGemmNopadFwdOp",
    manifest = "tests/manifests/tileops_dims_as_params.yaml",
    register = false
)]
struct MoeGroupedGemmNopad {
    a: TensorSpec,
    b: TensorSpec,
    true_sizes: TensorSpec,
    true_offsets: TensorSpec,
    numel: i64,
    num_experts: i64,
    n: i64,
    k: i64,
}

// Params as formula values, so that a test can give one that is not an int.
#[tileops::roofline_op(
    "MoeGateUpFwdOp",
    manifest = "tests/manifests/tileops_dims_as_params.yaml",
    register = false
)]
struct MoeGateUp {
    a: TensorSpec,
    b: TensorSpec,
    true_sizes: TensorSpec,
    true_offsets: TensorSpec,
    numel: Value,
    num_experts: Value,
    ffn: Value,
    k: Value,
}

#[tileops::roofline_op(
    "many_vars",
    manifest = "tests/manifests/many_vars.yaml",
    register = false
)]
struct ManyVars {
    x: TensorSpec,
}

fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype)
}

#[test]
fn a_shape_given_as_a_yaml_sequence_binds_its_dims() {
    let r = SeqShapeGemm {
        a: spec(&[128, 64], DType::Float16),
        b: spec(&[64, 32], DType::Float16),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!(r.flops, 2 * 128 * 32 * 64);
    assert_eq!(r.bytes, (128 * 64 + 64 * 32 + 128 * 32) * 2);
}

#[test]
fn a_var_named_like_a_dim_is_what_later_formulas_see() {
    let r = VarReusesDim {
        input: spec(&[2, 3, 5, 7], DType::Float16),
    }
    .eval_roofline()
    .unwrap();
    // N = 2 * 10 = 20 for flops; `before` read the dim N = 2.
    assert_eq!(r.flops, 20 * 3 * 5 * 7);
    assert_eq!(r.bytes, 2 * 1000 + 20);
}

#[test]
fn elem_bytes_comes_from_the_dtype_field_when_there_is_one() {
    let op = |dtype| ElemBytesFromDtype {
        x: spec(&[4, 16], DType::Float32),
        dtype,
    };
    // `[M, 2 * N]`: M = 4 binds from the shape, N = 16 // 2 is a var.
    let r = op(DType::Float32).eval_roofline().unwrap();
    assert_eq!((r.flops, r.bytes), (4 * 8, 3 * 4 * 8 * 4));
    let r = op(DType::Float16).eval_roofline().unwrap();
    assert_eq!(
        r.bytes,
        3 * 4 * 8 * 2,
        "the dtype field, not the input's dtype"
    );
}

#[test]
fn an_input_named_like_a_rust_keyword_binds_the_raw_field() {
    let r = KeywordInput {
        r#type: spec(&[3, 4], DType::Float32),
        r#match: 5,
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((r.flops, r.bytes), (12 * 5, 12 * 4));
}

#[test]
fn a_dim_written_twice_in_one_shape_must_agree() {
    let r = Square {
        a: spec(&[6, 6], DType::Float32),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((r.flops, r.bytes), (216, 144));
    let err = Square {
        a: spec(&[6, 7], DType::Float32),
    }
    .eval_roofline()
    .unwrap_err();
    assert_eq!(
        err,
        RooflineError::DimMismatch {
            op: "square",
            dim: "N",
            first: "a",
            first_axis: 0,
            first_extent: 6,
            second: "a",
            second_axis: 1,
            second_extent: 7,
        }
    );
    assert_eq!(
        err.to_string(),
        "square: dim `N` is 6 in `a.shape[0]` but 7 in `a.shape[1]`"
    );
}

#[test]
fn inputs_that_disagree_on_a_dim_are_an_evaluation_error_not_a_silent_pick() {
    let op = |k_b: usize, bias: Option<TensorSpec>| SharedDims {
        a: spec(&[8, 16], DType::Float32),
        b: spec(&[k_b, 4], DType::Float32),
        bias,
    };
    let r = op(16, None).eval_roofline().unwrap();
    assert_eq!(r.flops, 2 * 8 * 4 * 16);
    let r = op(16, Some(spec(&[4], DType::Float32)))
        .eval_roofline()
        .unwrap();
    assert_eq!(r.bytes, (8 * 16 + 16 * 4 + 8 * 4) * 4);
    let err = op(32, None).eval_roofline().unwrap_err();
    assert_eq!(
        err.to_string(),
        "shared_dims: dim `K` is 16 in `a.shape[1]` but 32 in `b.shape[0]`"
    );
    assert_eq!(err.op(), "shared_dims");
    // The optional input is checked when present.
    let err = op(16, Some(spec(&[5], DType::Float32)))
        .eval_roofline()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "shared_dims: dim `N` is 4 in `b.shape[1]` but 5 in `bias.shape[0]`"
    );
}

/// TileOPs's MoeGroupedGemmNopadFwdOp at its DeepSeek-V3 decode workload, with `k` (the param
/// and the dim of `a` and `b`) given by `k_param`, `a.shape[1]` and `b.shape[2]`.
fn nopad(k_param: i64, k_a: usize, k_b: usize) -> MoeGroupedGemmNopad {
    MoeGroupedGemmNopad {
        a: spec(&[4096, k_a], DType::BFloat16),
        b: spec(&[256, 4096, k_b], DType::BFloat16),
        true_sizes: spec(&[256], DType::Int32),
        true_offsets: spec(&[256], DType::Int32),
        numel: 4096,
        num_experts: 256,
        n: 4096,
        k: k_param,
    }
}

#[test]
fn a_dim_named_like_a_param_reads_the_param_when_the_shapes_agree() {
    let r = nopad(7168, 7168, 7168).eval_roofline().unwrap();
    // TileOPs: flops "2 * numel * n * k", bytes "(numel * k + num_experts * n * k + numel * n) * elem_bytes".
    assert_eq!(r.flops, 2 * 4096 * 4096 * 7168);
    assert_eq!(r.bytes, (4096 * 7168 + 256 * 4096 * 7168 + 4096 * 4096) * 2);
    let r = MoeGateUp {
        a: spec(&[32768, 7168], DType::BFloat16),
        b: spec(&[256, 4096, 7168], DType::BFloat16),
        true_sizes: spec(&[256], DType::Int32),
        true_offsets: spec(&[256], DType::Int32),
        numel: Value::Int(32768),
        num_experts: Value::Int(256),
        ffn: Value::Int(2048),
        k: Value::Int(7168),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!(r.flops, 4 * 32768 * 2048 * 7168);
    assert_eq!(
        r.bytes,
        (32768 * 7168 + 256 * 2 * 2048 * 7168 + 32768 * 2048) * 2
    );
}

#[test]
fn a_dim_named_like_a_param_must_have_the_param_as_its_extent() {
    let err = nopad(7000, 7168, 7168).eval_roofline().unwrap_err();
    assert_eq!(
        err,
        RooflineError::DimParamMismatch {
            op: "MoeGroupedGemmNopadFwdOp",
            dim: "k",
            input: "a",
            axis: 1,
            extent: 7168,
            param: 7000,
        }
    );
    assert_eq!(
        err.to_string(),
        "MoeGroupedGemmNopadFwdOp: dim `k` is 7168 in `a.shape[1]` but the param `k` is 7000; the formulas read `k` as the param, so the shape must agree with it"
    );
    assert_eq!(err.op(), "MoeGroupedGemmNopadFwdOp");
    // Every place that declares the dim is checked, not only the first.
    let err = nopad(7168, 7168, 2048).eval_roofline().unwrap_err();
    assert_eq!(
        err.to_string(),
        "MoeGroupedGemmNopadFwdOp: dim `k` is 2048 in `b.shape[2]` but the param `k` is 7168; the formulas read `k` as the param, so the shape must agree with it"
    );
}

#[test]
fn a_param_named_like_a_dim_that_is_not_an_int_is_an_evaluation_error() {
    let op = |k: Value| MoeGateUp {
        a: spec(&[4096, 7168], DType::BFloat16),
        b: spec(&[256, 4096, 7168], DType::BFloat16),
        true_sizes: spec(&[256], DType::Int32),
        true_offsets: spec(&[256], DType::Int32),
        numel: Value::Int(4096),
        num_experts: Value::Int(256),
        ffn: Value::Int(2048),
        k,
    };
    let err = op(Value::None).eval_roofline().unwrap_err();
    assert!(matches!(err, RooflineError::Evaluation { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "MoeGateUpFwdOp: evaluating `a.shape` = `[numel, k]` failed: TypeError: the param `k` is None (a NoneType), not an int, but it names the dim `k` of `a.shape[1]`, whose extent (7168) it must equal"
    );
    let err = op(Value::List(vec![Value::Int(7168)]))
        .eval_roofline()
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("TypeError: the param `k` is [7168] (a list), not an int, but it names the dim `k` of `a.shape[1]`, whose extent (7168) it must equal"),
        "{err}"
    );
    // A float equal to the extent is still not an int: an extent is a count.
    let err = op(Value::Float(7168.0)).eval_roofline().unwrap_err();
    assert!(
        err.to_string().contains("is 7168.0 (a float), not an int"),
        "{err}"
    );
}

#[test]
fn five_thousand_vars_compile_and_evaluate_in_order() {
    // v0 = product(x.shape), v_i = v_{i-1} + 1: v4999 = 32 + 4999.
    let r = ManyVars {
        x: spec(&[4, 8], DType::Float16),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((r.flops, r.bytes), (32 + 4999, 32 * 2));
}
