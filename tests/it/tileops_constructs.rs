//! Constructs that TileOPs's own manifests use, on synthetic entries
//! (`tests/manifests/tileops_constructs.yaml`) beside the compatibility suite: each compiles
//! through `#[roofline_op]` and evaluates to hand-computed values. Also the run-time agreement of
//! fixed-rank dims, and an entry of 5,000 `vars` (generated code is flat, so rustc copes).

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
