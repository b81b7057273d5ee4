use tileops::TensorSpec;

#[tileops::roofline_op("unknown_param_type", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
