// An op the macro registers for the benchmark (the default) without the two traits the harness
// drives it through: the error names them and the way out, `register = false`.
use tileops::TensorSpec;

#[tileops::roofline_op("softmax_like", manifest = "tests/ui/manifests/formulas.yaml")]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
