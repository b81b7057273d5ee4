use tileops::TensorSpec;

#[tileops::roofline_op("optional_input", manifest = "tests/ui/manifests/formulas.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
    pub weight: Option<TensorSpec>,
}

fn main() {}
