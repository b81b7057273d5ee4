use tileops::TensorSpec;

#[tileops::roofline_op("bad_call", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
