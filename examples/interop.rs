//! GPU memory you already have: a caller that allocates with cudarc on its own stream hands the
//! buffers to a tileops op, without a copy, and takes the output back.
//!
//! ```text
//! cargo run --release --example interop
//! ```
//!
//! Allocates bf16 `x` and `weight` and an output buffer on a stream of its own, wraps them as
//! tensors, runs `RmsNorm` on that stream, takes the output slice back, copies it to the host on
//! the same stream and checks it against the f64 CPU reference. Without a GPU it says so and
//! exits 0.

use std::process::ExitCode;

use tileops::cudarc::driver::{CudaContext, DevicePtr};
use tileops::half::bf16;
use tileops::ops::{RmsNorm, reference};
use tileops::{DType, Device, Error, Tensor, TensorSpec};

const ROWS: usize = 8;
const N: usize = 512;
const EPS: f64 = 1e-6;

fn main() -> ExitCode {
    // Only to learn whether a GPU is usable: `Device::cuda` never panics without one, where
    // cudarc's `CudaContext::new` would.
    if let Err(err) = Device::cuda(0) {
        println!("interop: no usable CUDA GPU ({err}); nothing to run");
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("interop: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let driver = |what: &'static str| {
        move |source: tileops::cudarc::driver::DriverError| Error::Driver {
            context: what.to_owned(),
            source,
        }
    };

    // The caller's side: its context, its own stream, its own allocations.
    let ctx = CudaContext::new(0).map_err(driver("creating the context"))?;
    let stream = ctx.new_stream().map_err(driver("creating a stream"))?;
    let x_host: Vec<bf16> = (0..ROWS * N)
        .map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.0) / 16.0))
        .collect();
    let w_host: Vec<bf16> = (0..N)
        .map(|i| bf16::from_f32(0.5 + (i % 7) as f32 / 8.0))
        .collect();
    let x_slice = stream.clone_htod(&x_host).map_err(driver("copying x"))?;
    let w_slice = stream
        .clone_htod(&w_host)
        .map_err(driver("copying weight"))?;
    let y_slice = stream
        .alloc_zeros::<bf16>(ROWS * N)
        .map_err(driver("allocating y"))?;
    let y_address = y_slice.device_ptr(&stream).0;

    // tileops on the caller's stream: the buffers become tensors without a copy.
    let device = Device::from_cuda_stream(ctx, stream.clone())?;
    println!("interop: running on {device}, on the caller's own stream");
    let x_spec = TensorSpec::new([ROWS, N], DType::BFloat16);
    let w_spec = TensorSpec::new([N], DType::BFloat16);
    let x = Tensor::from_cuda_slice(x_slice, &x_spec, &device)?;
    let w = Tensor::from_cuda_slice(w_slice, &w_spec, &device)?;
    let mut y = Tensor::from_cuda_slice(y_slice, &x_spec, &device)?;

    let op = RmsNorm::new(x_spec.clone(), w_spec, EPS, &device)?;
    op.forward_into(&x, &w, &mut y)?;

    // The output back in the caller's hands: the same allocation, still on its stream, which
    // orders the copy after the kernel (no synchronize needed in between).
    let y_slice = y.into_cuda_slice::<bf16>()?;
    let same = y_slice.device_ptr(&stream).0 == y_address;
    println!(
        "interop: took back {} bf16 values ({}), the buffer the caller allocated: {same}",
        y_slice.len(),
        x_spec
    );
    let got = stream.clone_dtoh(&y_slice).map_err(driver("copying y"))?;

    // The CPU reference, in f64.
    let wide = |v: &[bf16]| v.iter().map(|b| b.to_f64()).collect::<Vec<_>>();
    let want = reference::rms_norm(&wide(&x_host), &wide(&w_host), N, EPS);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g.to_f64() - w).abs() / w.abs().max(1e-3))
        .fold(0.0f64, f64::max);
    // bf16 output: half a unit in the last place (2^-9) plus the kernel's f32 arithmetic.
    let bound = 1e-2;
    println!(
        "interop: rms_norm of {ROWS}x{N} bf16 against the f64 CPU reference: worst relative \
         error {worst:.2e} (bound {bound:.0e})"
    );
    if !same || worst > bound {
        return Err(format!(
            "the result does not match (same buffer: {same}, worst error {worst:e})"
        )
        .into());
    }
    println!("interop: OK");
    Ok(())
}
