use tileops::TensorSpec;

// The formulas read `x`, `weight` and `dim`; the struct only has `x`.
#[tileops::roofline_op("missing_field", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
    pub eps: f64,
}

fn main() {
    // One mistake, one error: the stub keeps this call compiling.
    let _ = Op { x: TensorSpec::new([1], tileops::DType::Float16), eps: 1e-6 }.eval_roofline();
}
