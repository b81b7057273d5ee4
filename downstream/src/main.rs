//! A user's op defined against the user's own manifest.
use tileops::{DType, TensorSpec};

/// `y = x + alpha * residual`, planned for one shape.
#[tileops::roofline_op("scaled_residual_add", register = false)]
pub struct ScaledResidualAdd {
    pub x: TensorSpec,
    pub residual: TensorSpec,
    pub alpha: f64,
}

fn main() {
    let x = TensorSpec::new([2048, 4096], DType::BFloat16);
    let op = ScaledResidualAdd { residual: x.clone(), x, alpha: 0.5 };
    match op.eval_roofline() {
        Ok(r) => println!("flops={} bytes={}", r.flops, r.bytes),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
