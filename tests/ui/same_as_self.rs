use tileops::TensorSpec;

#[tileops::roofline_op("same_as_self", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
