use tileops::TensorSpec;

#[tileops::roofline_op("parse_error", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
