use tileops::TensorSpec;

#[tileops::roofline_op("dim_name_clash", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
