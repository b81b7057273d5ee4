//! The shipped manifest's formulas whose params are machine ints and bools (`dim: i64`,
//! `group_size: i64`, `trans_a: bool`) compute on machine values; each entry is compiled twice,
//! typed and (`typed = false`) on the value runtime alone, and both must give the same roofline
//! or the same error, message included, over hostile params and shapes.

use tileops::roofline::Value;
use tileops::{DType, Roofline, TensorSpec};

/// `#[roofline_op]` twice over one struct body: `$typed` as generated, `$runtime` with
/// `typed = false`.
macro_rules! twins {
    ($op:literal, $manifest:literal, $typed:ident, $runtime:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        #[tileops::roofline_op($op, manifest = $manifest, register = false)]
        struct $typed { $($field: $ty),* }
        #[tileops::roofline_op($op, manifest = $manifest, register = false, typed = false)]
        struct $runtime { $($field: $ty),* }
    };
}

twins!(
    "softmax",
    "tileops/manifest/reduction.yaml",
    Softmax,
    SoftmaxRuntime {
        x: TensorSpec,
        dim: i64
    }
);
twins!(
    "sum",
    "tileops/manifest/reduction.yaml",
    Sum,
    SumRuntime {
        x: TensorSpec,
        dim: Value
    }
);
twins!(
    "fp8_quant",
    "tileops/manifest/quantization.yaml",
    Fp8Quant,
    Fp8QuantRuntime {
        x: TensorSpec,
        group_size: i64
    }
);
twins!(
    "gemm",
    "tileops/manifest/gemm.yaml",
    Gemm,
    GemmRuntime {
        a: TensorSpec,
        b: TensorSpec,
        trans_a: bool,
        trans_b: bool
    }
);

/// Both results, errors as their messages.
fn both(
    typed: Result<Roofline, tileops::RooflineError>,
    runtime: Result<Roofline, tileops::RooflineError>,
) -> (Result<Roofline, String>, Result<Roofline, String>) {
    (
        typed.map_err(|e| e.to_string()),
        runtime.map_err(|e| e.to_string()),
    )
}

fn shapes() -> Vec<Vec<usize>> {
    let huge = 1usize << 62;
    vec![
        vec![],
        vec![0],
        vec![3],
        vec![2, 3, 5],
        vec![4, 0, 6, 7],
        vec![huge, huge, huge],
        vec![huge, 4],
    ]
}

#[test]
fn typed_params_and_shapes_agree_with_the_value_runtime() {
    let ints = [i64::MIN, -100, -5, -4, -3, -1, 0, 1, 2, 3, 4, 7, i64::MAX];
    let values = [
        Value::None,
        Value::Int(-1),
        Value::Int(7),
        Value::List(vec![Value::Int(0), Value::Int(2)]),
        Value::List(vec![Value::Int(-1), Value::Int(-1)]),
        Value::List(vec![]),
        Value::List(vec![Value::Float(1.0)]),
        Value::Float(0.5),
        Value::Bool(true),
    ];
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut check = |label: String, pair: (Result<Roofline, String>, Result<Roofline, String>)| {
        if pair.0 != pair.1 {
            failures.push(format!("{label}: typed {:?}, runtime {:?}", pair.0, pair.1));
        }
        compared += 1;
    };
    for shape in shapes() {
        for dtype in [DType::Float32, DType::BFloat16] {
            let x = TensorSpec::new(shape.clone(), dtype);
            for &d in &ints {
                check(
                    format!("softmax {shape:?} dim={d}"),
                    both(
                        Softmax {
                            x: x.clone(),
                            dim: d,
                        }
                        .eval_roofline(),
                        SoftmaxRuntime {
                            x: x.clone(),
                            dim: d,
                        }
                        .eval_roofline(),
                    ),
                );
                check(
                    format!("fp8_quant {shape:?} group_size={d}"),
                    both(
                        Fp8Quant {
                            x: x.clone(),
                            group_size: d,
                        }
                        .eval_roofline(),
                        Fp8QuantRuntime {
                            x: x.clone(),
                            group_size: d,
                        }
                        .eval_roofline(),
                    ),
                );
            }
            for v in &values {
                check(
                    format!("sum {shape:?} dim={v}"),
                    both(
                        Sum {
                            x: x.clone(),
                            dim: v.clone(),
                        }
                        .eval_roofline(),
                        SumRuntime {
                            x: x.clone(),
                            dim: v.clone(),
                        }
                        .eval_roofline(),
                    ),
                );
            }
            for other in shapes() {
                let b = TensorSpec::new(other.clone(), dtype);
                for (trans_a, trans_b) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    check(
                        format!("gemm {shape:?} x {other:?} {trans_a} {trans_b}"),
                        both(
                            Gemm {
                                a: x.clone(),
                                b: b.clone(),
                                trans_a,
                                trans_b,
                            }
                            .eval_roofline(),
                            GemmRuntime {
                                a: x.clone(),
                                b: b.clone(),
                                trans_a,
                                trans_b,
                            }
                            .eval_roofline(),
                        ),
                    );
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} evaluations differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 800, "only {compared} evaluations compared");
}

twins!(
    "axes",
    "tests/manifests/typed_versions.yaml",
    Axes,
    AxesRuntime {
        x: TensorSpec,
        dim: Value
    }
);
twins!(
    "kinds",
    "tests/manifests/typed_versions.yaml",
    Kinds,
    KindsRuntime {
        x: TensorSpec,
        d: Value,
        flag: Value
    }
);
twins!(
    "folds",
    "tests/manifests/typed_versions.yaml",
    Folds,
    FoldsRuntime {
        x: TensorSpec,
        n: Value
    }
);
twins!(
    "scan_budget",
    "tests/manifests/typed_versions.yaml",
    ScanBudget,
    ScanBudgetRuntime {
        x: TensorSpec,
        n: Value
    }
);

/// Params of every kind: the ints and bools and `None` that have typed versions (negative,
/// zero, past any rank, at the ends of `i128`), and the kinds that take the general one.
fn hostile_values() -> Vec<Value> {
    let mut values: Vec<Value> = [
        i128::MIN,
        -(1 << 40),
        -100,
        -5,
        -3,
        -2,
        -1,
        0,
        1,
        2,
        3,
        5,
        1 << 40,
        i128::MAX,
    ]
    .into_iter()
    .map(Value::Int)
    .collect();
    values.extend([
        Value::None,
        Value::Bool(true),
        Value::Bool(false),
        Value::Float(1.0),
        Value::Float(0.5),
        Value::Str("x".into()),
        Value::List(vec![]),
        Value::List(vec![Value::Int(0), Value::Int(-1), Value::Int(0)]),
        Value::Tuple(vec![Value::Int(1)]),
        Value::List(vec![Value::Float(1.0)]),
    ]);
    values
}

#[test]
fn typed_versions_of_value_params_agree_with_the_value_runtime() {
    let huge = 1usize << 62;
    let mut shapes = shapes();
    // A zero at one end and overflowing dims at the other: a product over a set of axes fails
    // or not by the order it visits them (the set's, ascending).
    shapes.push(vec![0, 1, huge, 1, huge]);
    shapes.push(vec![huge, 1, huge, 1, 0]);
    shapes.push(vec![1; 300]);
    let values = hostile_values();
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut check = |label: String, pair: (Result<Roofline, String>, Result<Roofline, String>)| {
        if pair.0 != pair.1 {
            failures.push(format!("{label}: typed {:?}, runtime {:?}", pair.0, pair.1));
        }
        compared += 1;
    };
    for shape in &shapes {
        let x = TensorSpec::new(shape.clone(), DType::Float32);
        for v in &values {
            check(
                format!("axes {shape:?} dim={v}"),
                both(
                    Axes {
                        x: x.clone(),
                        dim: v.clone(),
                    }
                    .eval_roofline(),
                    AxesRuntime {
                        x: x.clone(),
                        dim: v.clone(),
                    }
                    .eval_roofline(),
                ),
            );
            check(
                format!("folds {shape:?} n={v}"),
                both(
                    Folds {
                        x: x.clone(),
                        n: v.clone(),
                    }
                    .eval_roofline(),
                    FoldsRuntime {
                        x: x.clone(),
                        n: v.clone(),
                    }
                    .eval_roofline(),
                ),
            );
            for flag in [
                Value::Bool(true),
                Value::Bool(false),
                Value::Int(1),
                Value::None,
            ] {
                check(
                    format!("kinds {shape:?} d={v} flag={flag}"),
                    both(
                        Kinds {
                            x: x.clone(),
                            d: v.clone(),
                            flag: flag.clone(),
                        }
                        .eval_roofline(),
                        KindsRuntime {
                            x: x.clone(),
                            d: v.clone(),
                            flag: flag.clone(),
                        }
                        .eval_roofline(),
                    ),
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} evaluations differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared >= 1440, "only {compared} evaluations compared");
}

#[test]
fn typed_scans_and_sets_charge_the_budget_as_the_value_runtime() {
    let x = TensorSpec::new(vec![2, 3], DType::Float32);
    let fits = 1i128 << 20;
    let mut results = Vec::new();
    for n in [
        Value::Int(0),
        Value::Int(7),
        Value::Int(fits),
        Value::Int(fits + 1),
        Value::Bool(true),
        Value::None,
    ] {
        let (typed, runtime) = both(
            ScanBudget {
                x: x.clone(),
                n: n.clone(),
            }
            .eval_roofline(),
            ScanBudgetRuntime {
                x: x.clone(),
                n: n.clone(),
            }
            .eval_roofline(),
        );
        assert_eq!(typed, runtime, "n = {n}");
        results.push(typed);
    }
    // The boundary is where it should be: 2**20 steps fit, one more runs out (of `S`'s budget,
    // the first formula that evaluates).
    assert!(results[2].is_ok(), "{:?}", results[2]);
    let err = results[3].as_ref().unwrap_err();
    assert!(
        err.contains("vars.S") && err.contains("MemoryError: the formula does more than"),
        "{err}"
    );
}
