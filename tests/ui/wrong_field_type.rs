// The manifest is fine; the struct is not: `x` is no tensor input. The error points at the field.
#[tileops::roofline_op("wrong_field_type", manifest = "tests/ui/manifests/model.yaml", register = false)]
pub struct Op {
    pub x: u8,
    pub eps: f64,
}

fn main() {}
