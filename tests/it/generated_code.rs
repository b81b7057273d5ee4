//! What the generated `eval_roofline` does at run time, from a user crate's point of view:
//! fixed-rank dim binding, optional inputs, Python arithmetic, func mode (Rust paths and TileOPs's
//! dotted paths, generic structs included), and evaluation errors that are values naming the op,
//! the field and the value.

use tileops::roofline::Value;
use tileops::{DType, Roofline, RooflineError, TensorSpec};

#[tileops::roofline_op(
    "fixed_rank_matmul",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct Matmul {
    a: TensorSpec,
    b: TensorSpec,
}

#[tileops::roofline_op(
    "optional_bias",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct BiasAdd {
    x: TensorSpec,
    bias: Option<TensorSpec>,
}

#[tileops::roofline_op(
    "fails_at_run_time",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct Fails {
    x: TensorSpec,
    divisor: i64,
}

#[tileops::roofline_op(
    "float_results",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct Floats {
    x: TensorSpec,
}

#[tileops::roofline_op(
    "func_mode",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct FuncMode {
    x: TensorSpec,
}

/// The func-mode formula: real Rust logic, same result type.
fn func_mode_roofline(op: &FuncMode) -> Result<Roofline, RooflineError> {
    let n = op.x.numel().map_err(|e| RooflineError::Func {
        op: "func_mode",
        message: e.to_string(),
    })? as u64;
    Ok(Roofline {
        flops: n,
        bytes: 8 * n,
    })
}

#[tileops::roofline_op(
    "func_mode_dotted",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct DottedFunc {
    x: TensorSpec,
}

/// What `func: "it.generated_code.dotted_func_roofline"` calls.
fn dotted_func_roofline(op: &DottedFunc) -> Result<Roofline, RooflineError> {
    let n =
        op.x.numel()
            .map_err(|e| RooflineError::func("func_mode_dotted", e.to_string()))? as u64;
    Ok(Roofline::new(3 * n, 4 * n))
}

#[tileops::roofline_op(
    "func_mode_generic",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct GenericFunc<T: Copy + Into<u64>> {
    x: TensorSpec,
    factor: T,
}

/// What `func: "it.generated_code.generic_func_roofline"` calls, for every `GenericFunc<T>`.
fn generic_func_roofline<T: Copy + Into<u64>>(
    op: &GenericFunc<T>,
) -> Result<Roofline, RooflineError> {
    let n =
        op.x.numel()
            .map_err(|e| RooflineError::func("func_mode_generic", e.to_string()))? as u64;
    Ok(Roofline::new(op.factor.into() * n, n))
}

#[tileops::roofline_op(
    "func_mode_relative",
    manifest = "tests/manifests/semantics.yaml",
    register = false
)]
struct RelativeFunc {
    x: TensorSpec,
}

mod relative {
    use super::RelativeFunc;
    use tileops::{Roofline, RooflineError};

    /// What `func: "relative::func_roofline"` calls.
    pub(super) fn func_roofline(op: &RelativeFunc) -> Result<Roofline, RooflineError> {
        Ok(Roofline::new(op.x.shape.len() as u64, 1))
    }
}

fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype)
}

#[test]
fn fixed_rank_shapes_bind_their_dim_names() {
    let op = Matmul {
        a: spec(&[128, 7168], DType::BFloat16),
        b: spec(&[7168, 2112], DType::BFloat16),
    };
    let r = op.eval_roofline().unwrap();
    assert_eq!(r.flops, 2 * 128 * 2112 * 7168);
    assert_eq!(r.bytes, (128 * 7168 + 7168 * 2112 + 128 * 2112) * 2);
}

#[test]
fn a_fixed_rank_mismatch_is_an_evaluation_error_not_a_panic() {
    let op = Matmul {
        a: spec(&[2, 3, 4], DType::Float16),
        b: spec(&[4, 5], DType::Float16),
    };
    let err = op.eval_roofline().unwrap_err().to_string();
    assert!(
        err.contains("fixed_rank_matmul") && err.contains("a.shape"),
        "{err}"
    );
}

#[test]
fn optional_inputs_bind_none_when_absent() {
    let x = spec(&[4, 8], DType::Float16);
    let without = BiasAdd {
        x: x.clone(),
        bias: None,
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((without.flops, without.bytes), (32, 2 * 32 * 2));
    let with = BiasAdd {
        x,
        bias: Some(spec(&[8], DType::Float16)),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((with.flops, with.bytes), (64, (2 * 32 + 8) * 2));
}

#[test]
fn evaluation_errors_are_values_that_name_the_op_field_and_value() {
    let x = spec(&[4, 4], DType::Float32);
    let err = Fails {
        x: x.clone(),
        divisor: 0,
    }
    .eval_roofline()
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("fails_at_run_time")
            && err.contains("vars.N")
            && err.contains("ZeroDivisionError"),
        "{err}"
    );
    // flops = 16 - 10 is fine; with divisor 4, N = 4 and flops = -6: not a count.
    let err = Fails { x, divisor: 4 }
        .eval_roofline()
        .unwrap_err()
        .to_string();
    assert!(err.contains("flops") && err.contains("-6"), "{err}");
}

#[test]
fn float_results_convert_like_python_int() {
    let r = Floats {
        x: spec(&[3, 5], DType::Float32),
    }
    .eval_roofline()
    .unwrap();
    // int(15 * 2.5) = 37; ceil(log2(15)) * 4 = 16
    assert_eq!((r.flops, r.bytes), (37, 16));
}

#[test]
fn func_mode_calls_the_rust_path() {
    let r = FuncMode {
        x: spec(&[10], DType::Float32),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!((r.flops, r.bytes), (10, 80));
}

#[test]
fn a_dotted_func_path_calls_the_absolute_rust_path() {
    let r = DottedFunc {
        x: spec(&[2, 5], DType::Float32),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!(r, Roofline::new(30, 40));
}

#[test]
fn func_mode_works_on_a_generic_struct() {
    let x = spec(&[7], DType::Float32);
    let r = GenericFunc {
        x: x.clone(),
        factor: 3u8,
    }
    .eval_roofline()
    .unwrap();
    assert_eq!(r, Roofline::new(21, 7));
    let r = GenericFunc { x, factor: 2u32 }.eval_roofline().unwrap();
    assert_eq!(r, Roofline::new(14, 7));
}

#[test]
fn a_relative_func_path_resolves_from_the_structs_module() {
    let r = RelativeFunc {
        x: spec(&[2, 3, 4], DType::Float32),
    }
    .eval_roofline()
    .unwrap();
    assert_eq!(r, Roofline::new(3, 1));
}

#[test]
fn params_convert_from_plain_rust_types() {
    assert_eq!(Value::from(3i64), Value::Int(3));
    assert_eq!(
        Value::from(Some(vec![0i64, 2])),
        Value::List(vec![Value::Int(0), Value::Int(2)])
    );
    assert_eq!(Value::from(None::<i64>), Value::None);
}
