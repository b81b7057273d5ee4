// An input named `type` (and a param named `match`) bind the raw fields `r#type` and `r#match`: the
// attribute expands without error: the snapshot's only error is the deliberate one in `main`.
use tileops::TensorSpec;

#[tileops::roofline_op("keyword_input", manifest = "tests/manifests/tileops_constructs.yaml", register = false)]
pub struct Op {
    pub r#type: TensorSpec,
    pub r#match: i64,
    pub dtype: tileops::DType,
}

fn main() {
    let _: () = Op {
        r#type: TensorSpec::new([1], tileops::DType::Float16),
        r#match: 1,
        dtype: tileops::DType::Float16,
    }
    .eval_roofline();
}
