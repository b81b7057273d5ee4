// The functions the structs `build.rs` generates from the vendored TileOPs suite call to bind a
// case of `expected.json`: included (`include!`) into the module that includes the generated
// code, by `tests/it/tileops_compat.rs` and by `benches/eval_roofline.rs`.

fn dtype(case: &serde_json::Value) -> Option<DType> {
    case["dtype"].as_str()?.parse().ok()
}

fn shape(value: &serde_json::Value) -> Option<Vec<usize>> {
    value
        .as_array()?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect()
}

/// A bound input: the case's shape and dtype (every input has the case's dtype).
fn input(case: &serde_json::Value, name: &str) -> Option<TensorSpec> {
    Some(TensorSpec::new(shape(&case["inputs"][name])?, dtype(case)?))
}

/// An optional input: `None` when the case leaves it out.
#[allow(dead_code)] // the bench binds only the entries' first cases
fn optional_input(case: &serde_json::Value, name: &str) -> Option<TensorSpec> {
    input(case, name)
}

/// A param as a formula value; JSON numbers keep their int/float kind.
fn param(case: &serde_json::Value, name: &str) -> Value {
    json_to_value(&case["params"][name])
}

fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::None,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i.into()),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        // expected.json spells non-finite floats as bare words, mapped to strings on load.
        serde_json::Value::String(s) => match s.as_str() {
            "__tileops_inf__" => Value::Float(f64::INFINITY),
            "__tileops_-inf__" => Value::Float(f64::NEG_INFINITY),
            "__tileops_nan__" => Value::Float(f64::NAN),
            other => Value::Str(other.to_owned()),
        },
        serde_json::Value::Array(items) => {
            Value::List(items.iter().map(json_to_value).collect())
        }
        serde_json::Value::Object(_) => Value::None,
    }
}
