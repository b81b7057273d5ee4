//! A user's crate: a library op used as a new user would, and an op of its own defined against its
//! own manifest (`manifest/ops.yaml`, the op in `src/lib.rs`).
use tileops::ops::Softmax;
use tileops::{DType, Device, Tensor, TensorSpec};
use tileops_downstream_example::ScaledResidualAdd;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's op, planned on the best device (the CPU when there is no GPU).
    let device = Device::best();
    let spec = TensorSpec::new([32, 32, 4096], DType::BFloat16);
    let softmax = Softmax::new(spec, -1, &device)?;
    let r = softmax.eval_roofline()?;
    println!("softmax flops={} bytes={}", r.flops, r.bytes);
    let small = TensorSpec::new([2, 3], DType::Float32);
    let y =
        Softmax::new(small.clone(), -1, &device)?.forward(&Tensor::random(&small, 7, &device)?)?;
    let row: f32 = y.to_vec_f32()?[..3].iter().sum();
    println!(
        "softmax row sum={row:.4} on {}",
        if device.is_cuda() { "cuda" } else { "cpu" }
    );

    // The user's own op, against the user's own manifest.
    let x = TensorSpec::new([2048, 4096], DType::BFloat16);
    let op = ScaledResidualAdd {
        residual: x.clone(),
        x,
        alpha: 0.5,
        device: device.clone(),
    };
    let r = op.eval_roofline()?;
    println!("scaled_residual_add flops={} bytes={}", r.flops, r.bytes);
    Ok(())
}
