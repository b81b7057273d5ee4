//! The CUDA path: tileops's kernels on candle's own stream.
//!
//! The tileops device is built on candle's stream (`Device::from_cuda_stream`), once per candle
//! device: every tileops launch, copy and allocation is then issued to that stream, ordered with
//! candle's own work on it, and no synchronisation is needed in either direction. Outputs are
//! allocated by tileops on that stream and handed to candle as they are (`into_cuda_slice` →
//! `CudaStorage::wrap_cuda_slice`): no copy. fp8 crosses as its bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DeviceRepr};
use candle_core::cuda_backend::{CudaStorageSlice, DeviceId};
use candle_core::{CudaDevice, CudaStorage, Layout, Shape};
use float8::F8E4M3;
use half::{bf16, f16};
use tileops::{DType, Tensor, TensorSpec};

use crate::bridge::{Kernel, candle_error};
use crate::convert::contiguous_range;

/// The tileops device of a candle CUDA device: built on candle's stream the first time, then
/// reused. Building one makes its cuBLAS handles and looks up the shared kernel cache; reusing it
/// keeps the cuBLASLt plans and handles across calls. The stream is checked on every call, so a
/// candle device that ever changed streams would get a new tileops device rather than a stale one.
fn tileops_device(device: &CudaDevice) -> candle_core::Result<tileops::Device> {
    static DEVICES: OnceLock<Mutex<HashMap<DeviceId, tileops::Device>>> = OnceLock::new();
    let stream = device.cuda_stream();
    let mut devices = DEVICES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(cached) = devices.get(&device.id())
        && cached
            .cuda_stream()
            .is_some_and(|s| Arc::ptr_eq(s, &stream))
    {
        return Ok(cached.clone());
    }
    let built = tileops::Device::from_cuda_stream(stream.context().clone(), stream)
        .map_err(candle_error)?;
    devices.insert(device.id(), built.clone());
    Ok(built)
}

/// Runs `kernel` on candle CUDA storages, all on one candle device.
pub(crate) fn cuda_run<K: Kernel + ?Sized>(
    kernel: &K,
    inputs: &[(&CudaStorage, &Layout)],
) -> candle_core::Result<Vec<(CudaStorage, Shape)>> {
    let Some((first, _)) = inputs.first() else {
        candle_core::bail!("{}: no inputs", kernel.name());
    };
    let candle_device = first.device.clone();
    let device = tileops_device(&candle_device)?;
    let tensors = inputs
        .iter()
        .enumerate()
        .map(|(i, (storage, layout))| device_tensor(kernel.name(), i, storage, layout, &device))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let outputs = kernel.run(&device, &refs).map_err(candle_error)?;
    outputs
        .into_iter()
        .map(|t| {
            let shape = Shape::from(t.shape());
            Ok((candle_storage(t, &candle_device)?, shape))
        })
        .collect()
}

/// The tileops tensor of what `layout` covers of a candle buffer.
///
/// The elements are copied device to device, on candle's stream, into a buffer the tileops tensor
/// owns: tileops's `Tensor` owns its buffer, and a candle storage can be shared by other tensors,
/// so it cannot be moved out. (Borrowing it in place needs tileops's borrowed tensors.)
fn device_tensor(
    op: &str,
    input: usize,
    storage: &CudaStorage,
    layout: &Layout,
    device: &tileops::Device,
) -> candle_core::Result<Tensor> {
    let (start, end) = contiguous_range(op, input, layout)?;
    let dims = layout.dims();
    fn copy<T: tileops::tensor::Element + DeviceRepr>(
        slice: &CudaSlice<T>,
        range: (usize, usize),
        dims: &[usize],
        device: &tileops::Device,
    ) -> candle_core::Result<Tensor> {
        let stream = slice.stream();
        let copied = stream
            .clone_dtod(&slice.slice(range.0..range.1))
            .map_err(candle_core::Error::wrap)?;
        let spec = TensorSpec::new(dims, T::DTYPE);
        Tensor::from_cuda_slice(copied, &spec, device).map_err(|e| candle_error(e.into_parts().0))
    }
    let range = (start, end);
    match &storage.slice {
        CudaStorageSlice::F32(s) => copy::<f32>(s, range, dims, device),
        CudaStorageSlice::F16(s) => copy::<f16>(s, range, dims, device),
        CudaStorageSlice::BF16(s) => copy::<bf16>(s, range, dims, device),
        CudaStorageSlice::F64(s) => copy::<f64>(s, range, dims, device),
        CudaStorageSlice::I64(s) => copy::<i64>(s, range, dims, device),
        CudaStorageSlice::I32(s) => copy::<i32>(s, range, dims, device),
        CudaStorageSlice::I16(s) => copy::<i16>(s, range, dims, device),
        CudaStorageSlice::U8(s) => copy::<u8>(s, range, dims, device),
        CudaStorageSlice::F8E4M3(s) => {
            let view: CudaView<'_, F8E4M3> = s.slice(start..end);
            // SAFETY: float8 0.7's F8E4M3 is a one-byte code (`#[repr(transparent)]` over u8);
            // every byte is a valid u8, and the view holds `end - start` of them.
            let bytes = unsafe { view.transmute::<u8>(end - start) }.ok_or_else(|| {
                candle_core::Error::msg(format!("tileops {op}: input {input}: short fp8 buffer"))
            })?;
            let copied = s
                .stream()
                .clone_dtod(&bytes)
                .map_err(candle_core::Error::wrap)?;
            let spec = TensorSpec::new(dims, DType::Float8E4M3Fn);
            Tensor::from_cuda_bytes(copied, &spec, device)
                .map_err(|e| candle_error(e.into_parts().0))
        }
        _ => candle_core::bail!(
            "tileops {op}: input {input} has a dtype tileops has no op for ({:?})",
            storage.dtype()
        ),
    }
}

/// A tileops output as a candle storage: its buffer, moved, no copy.
fn candle_storage(t: Tensor, device: &CudaDevice) -> candle_core::Result<CudaStorage> {
    let device = device.clone();
    let e = candle_error;
    Ok(match t.dtype() {
        DType::Float32 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<f32>().map_err(e)?, device)
        }
        DType::Float16 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<f16>().map_err(e)?, device)
        }
        DType::BFloat16 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<bf16>().map_err(e)?, device)
        }
        DType::Float64 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<f64>().map_err(e)?, device)
        }
        DType::Int64 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<i64>().map_err(e)?, device)
        }
        DType::Int32 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<i32>().map_err(e)?, device)
        }
        DType::Float8E4M3Fn => {
            let bytes = t.into_cuda_bytes().map_err(e)?;
            let (len, stream) = (bytes.len(), bytes.stream().clone());
            // `leak` makes the stream wait for the buffer's pending work and gives the allocation
            // up unfreed; `upgrade_device_ptr` makes the candle slice its one owner.
            let ptr = bytes.leak();
            // SAFETY: `ptr` is a live allocation of `len` bytes owned by nothing since `leak`,
            // allocated on `stream` (candle's), where the new slice frees it; each byte is an
            // e4m3fn code, a valid one-byte F8E4M3.
            let codes = unsafe { stream.upgrade_device_ptr::<F8E4M3>(ptr, len) };
            CudaStorage::wrap_cuda_slice(codes, device)
        }
        other => candle_core::bail!("tileops output of dtype {other}, which candle cannot hold"),
    })
}
