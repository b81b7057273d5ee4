use tileops::TensorSpec;

#[tileops::roofline_op("forbidden_construct", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
