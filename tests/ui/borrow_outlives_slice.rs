// A borrowed tensor cannot outlive the GPU slice it borrows: the slice is dropped at the end of
// the block while `x` still borrows it.

use tileops::cudarc::driver::CudaContext;
use tileops::{Device, TensorRef};

fn main() {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let device = Device::from_cuda_stream(ctx, stream.clone()).unwrap();
    let x = {
        let slice = stream.alloc_zeros::<f32>(64).unwrap();
        TensorRef::from_cuda_slice(&slice, 16, [4, 8], &device).unwrap()
    };
    println!("{:?}", x.shape());
}
