use tileops::TensorSpec;

#[tileops::roofline_op("workload_integer", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: TensorSpec,
}

fn main() {}
