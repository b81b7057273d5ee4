use tileops::TensorSpec;

#[tileops::roofline_op("bad_names", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
