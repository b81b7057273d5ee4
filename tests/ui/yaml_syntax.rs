use tileops::TensorSpec;

#[tileops::roofline_op("softmax", manifest = "tests/ui/manifests/broken_syntax.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
