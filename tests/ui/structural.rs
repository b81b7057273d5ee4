use tileops::TensorSpec;

#[tileops::roofline_op("mixed_modes", manifest = "tests/ui/manifests/structure.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
