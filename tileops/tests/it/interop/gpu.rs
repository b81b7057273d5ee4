//! GPU memory the caller already has: cudarc slices (typed and bytes) wrapped as tensors without a
//! copy, ops on the caller's own stream (kernels and cuBLAS), borrowing and taking the buffers
//! back, and the errors for a buffer of the wrong length, dtype or context.
//!
//! Every result is compared bit for bit with the same op run on tileops-allocated tensors of
//! `Device::cuda(0)`, and with the f64 reference within the usual per-dtype bound.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead.

mod borrowed;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::common::{bound, gpu_or_skip, spec};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
use half::bf16;
use tileops::ops::reference;
use tileops::ops::{Gemm, RmsNorm, Softmax};
use tileops::tensor::Element;
use tileops::{DType, Device, Error, Tensor, TensorSpec};

/// The caller's setup: its own context handle and a stream of its own (not the default stream
/// `Device::cuda` uses), and the tileops device on them.
struct Caller {
    stream: Arc<CudaStream>,
    device: Device,
    /// `Device::cuda(0)`: tileops's own allocation and stream, the comparison.
    own: Device,
}

fn caller_or_skip(test: &str) -> Option<Caller> {
    let own = gpu_or_skip(test)?;
    let ctx = CudaContext::new(0).expect("the caller's context");
    let stream = ctx.new_stream().expect("the caller's stream");
    let device = Device::from_cuda_stream(ctx, stream.clone()).expect("a device on the stream");
    Some(Caller {
        stream,
        device,
        own,
    })
}

/// The address of a slice's allocation: equal addresses mean no copy was made.
fn address<T>(slice: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    slice.device_ptr(stream).0
}

/// `values` rounded to `T` (the dtype's own type), as the caller's host data.
fn host_values<T: Element>(values: &[f64], shape: &[usize]) -> Vec<T> {
    let t = Tensor::from_f64_rounded(values, &spec(shape, T::DTYPE), &Device::cpu()).unwrap();
    t.to_vec::<T>().unwrap()
}

fn inputs(n: usize, seed: u64) -> Vec<f64> {
    let t = Tensor::random(&spec(&[n], DType::Float64), seed, &Device::cpu()).unwrap();
    t.to_vec_f64().unwrap()
}

/// Softmax over the last dim, inputs and output in the caller's typed slices on its stream.
fn softmax_typed<T>(caller: &Caller)
where
    T: Element + DeviceRepr + ValidAsZeroBits + PartialEq + std::fmt::Debug,
{
    let shape = [6, 40];
    let x_spec = spec(&shape, T::DTYPE);
    let values = inputs(240, 11);
    let host: Vec<T> = host_values(&values, &shape);
    let s = &caller.stream;

    let x_slice = s.clone_htod(&host).unwrap();
    let x_address = address(&x_slice, s);
    let x = Tensor::from_cuda_slice(x_slice, &x_spec, &caller.device).unwrap();
    // No copy: the tensor holds the caller's allocation.
    assert_eq!(address(x.cuda_bytes().unwrap(), s), x_address);
    assert_eq!(x.cuda_view::<T>().unwrap().len(), 240);

    let y_slice = s.alloc_zeros::<T>(240).unwrap();
    let y_address = address(&y_slice, s);
    let mut y = Tensor::from_cuda_slice(y_slice, &x_spec, &caller.device).unwrap();
    let op = Softmax::new(x_spec.clone(), -1, &caller.device).unwrap();
    op.forward_into(&x, &mut y).unwrap();

    // Taken back out: the same allocation, read on the caller's stream (which orders the read
    // after the kernel: no synchronize in between).
    let y_slice = y.into_cuda_slice::<T>().unwrap();
    assert_eq!(address(&y_slice, s), y_address);
    let got: Vec<T> = s.clone_dtoh(&y_slice).unwrap();

    // The same op on tileops-allocated tensors of Device::cuda(0).
    let own_x = Tensor::from_slice(&host, shape, &caller.own).unwrap();
    let own_op = Softmax::new(x_spec, -1, &caller.own).unwrap();
    let want: Vec<T> = own_op.forward(&own_x).unwrap().to_vec().unwrap();
    assert_eq!(got, want, "{}: caller's slices vs tileops's", T::DTYPE);

    let widened = Tensor::from_slice(&got, shape, &Device::cpu()).unwrap();
    let x64 = Tensor::from_slice(&host, shape, &Device::cpu())
        .unwrap()
        .to_vec_f64()
        .unwrap();
    let reference = reference::softmax(&x64, 6, 40, 1);
    for (g, r) in widened.to_vec_f64().unwrap().iter().zip(&reference) {
        assert!(
            (g - r).abs() <= bound(T::DTYPE) * r.abs().max(1e-3),
            "{g} vs {r}"
        );
    }
}

#[test]
fn typed_slices_on_the_callers_stream() {
    let Some(caller) = caller_or_skip("typed_slices_on_the_callers_stream") else {
        return;
    };
    assert!(Arc::ptr_eq(
        caller.device.cuda_stream().unwrap(),
        &caller.stream
    ));
    assert!(!Arc::ptr_eq(
        caller.device.cuda_stream().unwrap(),
        caller.own.cuda_stream().unwrap()
    ));
    // The primary context of GPU 0, like Device::cuda(0)'s: the same device.
    assert_eq!(caller.device, caller.own);
    softmax_typed::<f32>(&caller);
    softmax_typed::<bf16>(&caller);
    softmax_typed::<half::f16>(&caller);
}

#[test]
fn byte_slices_and_outputs_on_the_callers_stream() {
    let Some(caller) = caller_or_skip("byte_slices_and_outputs_on_the_callers_stream") else {
        return;
    };
    let s = &caller.stream;
    let x_spec = spec(&[4, 64], DType::BFloat16);
    let w_spec = spec(&[64], DType::BFloat16);
    let cpu = Device::cpu();
    let x_bytes = Tensor::random(&x_spec, 3, &cpu)
        .unwrap()
        .to_bytes()
        .unwrap();
    let w_bytes = Tensor::random(&w_spec, 4, &cpu)
        .unwrap()
        .to_bytes()
        .unwrap();

    let x =
        Tensor::from_cuda_bytes(s.clone_htod(&x_bytes).unwrap(), &x_spec, &caller.device).unwrap();
    let w =
        Tensor::from_cuda_bytes(s.clone_htod(&w_bytes).unwrap(), &w_spec, &caller.device).unwrap();
    let op = RmsNorm::new(x_spec.clone(), w_spec.clone(), 1e-6, &caller.device).unwrap();
    // An output tileops allocates is on the device's stream: the caller's.
    let y = op.forward(&x, &w).unwrap();
    assert!(Arc::ptr_eq(y.cuda_bytes().unwrap().stream(), s));
    let got = s.clone_dtoh(&y.into_cuda_bytes().unwrap()).unwrap();

    let own_op = RmsNorm::new(x_spec.clone(), w_spec.clone(), 1e-6, &caller.own).unwrap();
    let own_x = Tensor::from_bytes(&x_bytes, &x_spec, &caller.own).unwrap();
    let own_w = Tensor::from_bytes(&w_bytes, &w_spec, &caller.own).unwrap();
    let want = own_op.forward(&own_x, &own_w).unwrap().to_bytes().unwrap();
    assert_eq!(got, want);

    // A tensor of Device::cuda(0) is accepted by the plan on the caller's stream (same context;
    // cudarc's events order the two streams), with the same result.
    let mixed = op.forward(&own_x, &w).unwrap().to_bytes().unwrap();
    assert_eq!(mixed, want);
}

#[test]
fn gemm_runs_cublas_on_the_callers_stream() {
    let Some(caller) = caller_or_skip("gemm_runs_cublas_on_the_callers_stream") else {
        return;
    };
    let s = &caller.stream;
    // float32 strict is cuBLAS's sgemm, bfloat16 is cuBLASLt: both handles on the caller's stream.
    for dtype in [DType::Float32, DType::BFloat16] {
        let (a_spec, b_spec) = (spec(&[16, 32], dtype), spec(&[32, 8], dtype));
        let cpu = Device::cpu();
        let a_bytes = Tensor::random(&a_spec, 5, &cpu)
            .unwrap()
            .to_bytes()
            .unwrap();
        let b_bytes = Tensor::random(&b_spec, 6, &cpu)
            .unwrap()
            .to_bytes()
            .unwrap();
        let wrap = |bytes: &[u8], spec: &TensorSpec| {
            Tensor::from_cuda_bytes(s.clone_htod(bytes).unwrap(), spec, &caller.device).unwrap()
        };
        let (a, b) = (wrap(&a_bytes, &a_spec), wrap(&b_bytes, &b_spec));
        let c_spec = spec(&[16, 8], dtype);
        let mut c = Tensor::from_cuda_bytes(
            s.alloc_zeros::<u8>(c_spec.size_in_bytes().unwrap())
                .unwrap(),
            &c_spec,
            &caller.device,
        )
        .unwrap();
        let op = Gemm::new(
            a_spec.clone(),
            b_spec.clone(),
            tileops::ops::GemmOptions::new(),
            &caller.device,
        )
        .unwrap();
        op.forward_into(&a, &b, &mut c).unwrap();
        let got = s.clone_dtoh(&c.into_cuda_bytes().unwrap()).unwrap();

        let own = Gemm::new(
            a_spec.clone(),
            b_spec.clone(),
            tileops::ops::GemmOptions::new(),
            &caller.own,
        )
        .unwrap();
        let want = own
            .forward(
                &Tensor::from_bytes(&a_bytes, &a_spec, &caller.own).unwrap(),
                &Tensor::from_bytes(&b_bytes, &b_spec, &caller.own).unwrap(),
            )
            .unwrap()
            .to_bytes()
            .unwrap();
        assert_eq!(got, want, "{dtype}");
        assert!(
            got.iter().any(|&b| b != 0),
            "{dtype}: the product was written"
        );
    }
}

#[test]
fn borrow_write_and_take_back() {
    let Some(caller) = caller_or_skip("borrow_write_and_take_back") else {
        return;
    };
    let s = &caller.stream;
    let x_spec = spec(&[2, 3], DType::Float32);
    let slice = s.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let at = address(&slice, s);
    let mut x = Tensor::from_cuda_slice(slice, &x_spec, &caller.device).unwrap();

    // Written through the borrowed typed view: the tensor's values change.
    {
        let mut view = x.cuda_view_mut::<f32>().unwrap();
        s.memcpy_htod(&[9.0f32, 8.0, 7.0, 6.0, 5.0, 4.0], &mut view)
            .unwrap();
    }
    assert_eq!(x.to_vec_f32().unwrap(), vec![9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
    // ...and through the borrowed bytes.
    s.memcpy_htod(
        &1.5f32.to_le_bytes(),
        &mut x.cuda_bytes_mut().unwrap().slice_mut(0..4),
    )
    .unwrap();
    assert_eq!(x.to_vec_f32().unwrap()[0], 1.5);

    // A view of another type is refused, and leaves the tensor as it was.
    assert!(matches!(
        x.cuda_view::<bf16>(),
        Err(Error::BufferDType {
            buffer: DType::BFloat16,
            ..
        })
    ));
    let bytes = x.into_cuda_bytes().unwrap();
    assert_eq!((address(&bytes, s), bytes.len()), (at, 24));
    // Bytes back in, typed back out: the same allocation all along.
    let again = Tensor::from_cuda_bytes(bytes, &x_spec, &caller.device).unwrap();
    let typed = again.into_cuda_slice::<f32>().unwrap();
    assert_eq!((address(&typed, s), typed.len()), (at, 6));
    assert_eq!(s.clone_dtoh(&typed).unwrap()[1], 8.0);

    // A tensor with no elements: no buffer to borrow, an empty slice to take back.
    let empty_spec = spec(&[0, 4], DType::Float32);
    let empty =
        Tensor::from_cuda_slice(s.null::<f32>().unwrap(), &empty_spec, &caller.device).unwrap();
    assert!(empty.cuda_bytes().is_none());
    assert!(matches!(
        empty.cuda_view::<f32>(),
        Err(Error::WrongDevice { .. })
    ));
    assert!(empty.into_cuda_slice::<f32>().unwrap().is_empty());
    // A CPU tensor has no GPU buffer.
    let cpu = Tensor::zeros(&x_spec, &Device::cpu()).unwrap();
    assert!(cpu.cuda_bytes().is_none());
    assert!(matches!(
        cpu.into_cuda_bytes(),
        Err(Error::WrongDevice { .. })
    ));
}

#[test]
fn mismatched_buffers_are_errors_and_come_back() {
    let Some(caller) = caller_or_skip("mismatched_buffers_are_errors_and_come_back") else {
        return;
    };
    let s = &caller.stream;
    let x_spec = spec(&[4, 8], DType::BFloat16);

    // Wrong byte length: the error says both sizes, and the caller gets its slice back.
    let short = s.alloc_zeros::<u8>(63).unwrap();
    let at = address(&short, s);
    let refused = Tensor::from_cuda_bytes(short, &x_spec, &caller.device).unwrap_err();
    assert!(
        matches!(
            refused.error(),
            Error::BufferMismatch {
                expected_bytes: 64,
                got_bytes: 63,
                ..
            }
        ),
        "{refused}"
    );
    let (_, short) = refused.into_parts();
    assert_eq!((address(&short, s), short.len()), (at, 63));

    // Wrong element count of the right type.
    let typed = s.alloc_zeros::<bf16>(31).unwrap();
    let refused = Tensor::from_cuda_slice(typed, &x_spec, &caller.device).unwrap_err();
    assert!(matches!(
        refused.error(),
        Error::BufferMismatch {
            expected_bytes: 64,
            got_bytes: 62,
            ..
        }
    ));
    // The same bytes as another dtype: f32 data is not bfloat16, even at the right size.
    let floats = s.alloc_zeros::<f32>(16).unwrap();
    let refused = Tensor::from_cuda_slice(floats, &x_spec, &caller.device).unwrap_err();
    assert!(
        matches!(
            refused.error(),
            Error::BufferDType {
                buffer: DType::Float32,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(refused.slice().len(), 16);
    // `?` turns the refusal into the crate's error.
    let as_error: Result<Tensor, Error> = (|| {
        Ok(Tensor::from_cuda_slice(
            s.alloc_zeros::<bf16>(1).unwrap(),
            &x_spec,
            &caller.device,
        )?)
    })();
    assert!(matches!(as_error, Err(Error::BufferMismatch { .. })));

    // A shape whose byte size overflows is reported as such, not as a length mismatch.
    let huge = spec(&[1 << 62, 8], DType::BFloat16);
    let refused = Tensor::from_cuda_bytes(s.alloc_zeros::<u8>(8).unwrap(), &huge, &caller.device)
        .unwrap_err();
    assert!(
        matches!(refused.error(), Error::ShapeOverflow { .. }),
        "{refused}"
    );

    // The CPU cannot hold a GPU buffer.
    let refused =
        Tensor::from_cuda_bytes(s.alloc_zeros::<u8>(64).unwrap(), &x_spec, &Device::cpu())
            .unwrap_err();
    assert!(
        matches!(refused.error(), Error::WrongDevice { .. }),
        "{refused}"
    );

    // A typed take-out of the wrong type.
    let t = Tensor::zeros(&x_spec, &caller.device).unwrap();
    assert!(matches!(
        t.into_cuda_slice::<f32>(),
        Err(Error::BufferDType { .. })
    ));
}

#[test]
fn another_context_is_refused() {
    let Some(caller) = caller_or_skip("another_context_is_refused") else {
        return;
    };
    // A non-primary context of the same GPU: its memory and streams are not the primary
    // context's. cuda-emu has no cuCtxCreate (cudarc panics looking the symbol up), so on the
    // emulated device only the check against the stream's own context runs.
    let other = catch_unwind(AssertUnwindSafe(|| CudaContext::new_non_primary(0, 0)));
    let Ok(Ok(other)) = other else {
        assert!(
            caller.own.is_emulated(),
            "a non-primary context could not be made on a real GPU"
        );
        println!(
            "another_context_is_refused: no non-primary contexts on {}",
            caller.own
        );
        return;
    };
    let their_stream = other.new_stream().unwrap();
    let ctx = caller.device.cuda_context().unwrap().clone();
    let err = Device::from_cuda_stream(ctx, their_stream.clone()).unwrap_err();
    assert!(matches!(err, Error::WrongContext { .. }), "{err}");

    let theirs = their_stream.alloc_zeros::<u8>(64).unwrap();
    let refused = Tensor::from_cuda_bytes(theirs, &spec(&[4, 8], DType::BFloat16), &caller.device)
        .unwrap_err();
    assert!(
        matches!(refused.error(), Error::WrongContext { .. }),
        "{refused}"
    );
    // On its own context it is a tensor, not equal to Device::cuda(0).
    let on_other = Device::from_cuda_stream(other, their_stream).unwrap();
    assert_ne!(on_other, caller.own);
    Tensor::from_cuda_bytes(
        refused.into_slice(),
        &spec(&[4, 8], DType::BFloat16),
        &on_other,
    )
    .unwrap();
}
