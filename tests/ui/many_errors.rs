use tileops::TensorSpec;

#[tileops::roofline_op("many_errors", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
