use tileops::TensorSpec;

// A dotted `func` path is the absolute Rust path `::tileops::...`; rustc resolves it, and its
// error names the manifest file and line through the module the call goes by.
#[tileops::roofline_op("missing_function", manifest = "tests/ui/manifests/func.yaml", register = false)]
pub struct MissingFunction {
    pub x: TensorSpec,
}

#[tileops::roofline_op("missing_module", manifest = "tests/ui/manifests/func.yaml", register = false)]
pub struct MissingModule {
    pub x: TensorSpec,
}

fn main() {}
