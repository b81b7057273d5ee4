// An op's output borrowed from a slice excludes every other borrow of that slice: an input read
// from the same slice while the output is live does not compile.

use tileops::cudarc::driver::CudaContext;
use tileops::ops::Silu;
use tileops::{DType, Device, TensorMut, TensorRef, TensorSpec};

fn main() {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let device = Device::from_cuda_stream(ctx, stream.clone()).unwrap();
    let silu = Silu::new(TensorSpec::new([16], DType::Float32), &device).unwrap();
    let mut slice = stream.alloc_zeros::<f32>(32).unwrap();
    let y = TensorMut::from_cuda_slice_mut(&mut slice, 16, [16], &device).unwrap();
    let x = TensorRef::from_cuda_slice(&slice, 0, [16], &device).unwrap();
    silu.forward_into(x, y).unwrap();
}
