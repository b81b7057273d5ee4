use tileops::TensorSpec;

#[tileops::roofline_op("shadowing_var", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
    pub dim: i64,
}

fn main() {}
