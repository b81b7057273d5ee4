//! The CUDA path: tileops's kernels on candle's own stream.
//!
//! The tileops device is built on candle's stream (`Device::from_cuda_stream`), once per candle
//! device: every tileops launch, copy and allocation is then issued to that stream, ordered with
//! candle's own work on it, and no synchronisation is needed in either direction. Inputs are
//! borrowed in place (`TensorRef::from_cuda_strided` at the layout's start offset); outputs are
//! allocated by tileops on that stream and handed to candle as they are (`into_cuda_slice` →
//! `CudaStorage::wrap_cuda_slice`): no copy either way. fp8 crosses as its bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DeviceRepr};
use candle_core::cuda_backend::{CudaStorageSlice, DeviceId};
use candle_core::{CudaDevice, CudaStorage, Layout, Shape};
use float8::F8E4M3;
use half::{bf16, f16};
use tileops::{DType, Tensor, TensorRef, TensorSpec};

use crate::bridge::{Kernel, candle_error};
use crate::convert::contiguous_range;

/// The tileops device of a candle CUDA device: built on candle's stream the first time, then
/// reused (building one looks up the shared kernel cache and sets up its cuBLAS handles; reusing
/// it keeps them). The stream is checked on every call, so a candle device that ever changed
/// streams would get a new tileops device rather than a stale one. Entries live as long as the
/// process, keeping their stream alive: one per candle device a program makes.
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
    // Each input borrowed in place; the few that cannot be (see `Input::Copy`) copied first, into
    // tensors that live until the op has been issued.
    let planned = inputs
        .iter()
        .enumerate()
        .map(|(i, (storage, layout))| borrow(kernel.name(), i, storage, layout, &device))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let copies = planned
        .iter()
        .map(|input| match input {
            Input::Copy(copy) => copy().map(Some),
            Input::Borrowed(_) => Ok(None),
        })
        .collect::<candle_core::Result<Vec<_>>>()?;
    let refs: Vec<TensorRef<'_>> = planned
        .iter()
        .zip(&copies)
        .map(|(input, copy)| match (input, copy) {
            (Input::Borrowed(r), _) => r.reborrow(),
            (Input::Copy(_), Some(copy)) => TensorRef::from(copy),
            (Input::Copy(_), None) => unreachable!("every Input::Copy was copied above"),
        })
        .collect();
    let outputs = kernel.run(&device, &refs).map_err(candle_error)?;
    outputs
        .into_iter()
        .map(|t| {
            let shape = Shape::from(t.shape());
            Ok((candle_storage(t, &candle_device)?, shape))
        })
        .collect()
}

/// How one input reaches the op.
enum Input<'a> {
    /// Read in place: candle's buffer, at the layout's offset.
    Borrowed(TensorRef<'a>),
    /// Read from a device-to-device copy on candle's stream, made by the closure: an offset
    /// that is not 16-byte aligned (tileops's kernels read 16 bytes at a time from a tensor's
    /// start; a `narrow` can start anywhere). fp8 codes are borrowed in place as bytes
    /// (`TensorRef::from_cuda_bytes_view` over cudarc's `transmute` of candle's slice).
    Copy(Box<dyn Fn() -> candle_core::Result<Tensor> + 'a>),
}

/// What `layout` covers of a candle buffer, for the op: borrowed when it can be.
fn borrow<'a>(
    op: &str,
    input: usize,
    storage: &'a CudaStorage,
    layout: &Layout,
    device: &tileops::Device,
) -> candle_core::Result<Input<'a>> {
    let (start, end) = contiguous_range(op, input, layout)?;
    let dims = layout.dims().to_vec();
    fn typed<'a, T: tileops::tensor::Element + DeviceRepr>(
        slice: &'a CudaSlice<T>,
        (start, end): (usize, usize),
        layout: &Layout,
        device: &tileops::Device,
    ) -> candle_core::Result<Input<'a>> {
        let (dims, stride) = (layout.dims(), layout.stride());
        match TensorRef::from_cuda_strided(slice, start, dims, stride, device) {
            Ok(r) => Ok(Input::Borrowed(r)),
            Err(tileops::Error::Misaligned { .. }) => {
                let (dims, device) = (dims.to_vec(), device.clone());
                Ok(Input::Copy(Box::new(move || {
                    let copied = slice
                        .stream()
                        .clone_dtod(&slice.slice(start..end))
                        .map_err(candle_core::Error::wrap)?;
                    let spec = TensorSpec::new(dims.clone(), T::DTYPE);
                    Tensor::from_cuda_slice(copied, &spec, &device)
                        .map_err(|e| candle_error(e.into_parts().0))
                })))
            }
            Err(e) => Err(candle_error(e)),
        }
    }
    let range = (start, end);
    match &storage.slice {
        CudaStorageSlice::F32(s) => typed::<f32>(s, range, layout, device),
        CudaStorageSlice::F16(s) => typed::<f16>(s, range, layout, device),
        CudaStorageSlice::BF16(s) => typed::<bf16>(s, range, layout, device),
        CudaStorageSlice::F64(s) => typed::<f64>(s, range, layout, device),
        CudaStorageSlice::I64(s) => typed::<i64>(s, range, layout, device),
        CudaStorageSlice::I32(s) => typed::<i32>(s, range, layout, device),
        CudaStorageSlice::I16(s) => typed::<i16>(s, range, layout, device),
        CudaStorageSlice::U8(s) => typed::<u8>(s, range, layout, device),
        CudaStorageSlice::U32(s) => typed::<u32>(s, range, layout, device),
        CudaStorageSlice::F8E4M3(s) => {
            let view: CudaView<'a, F8E4M3> = s.slice(start..end);
            // SAFETY: float8 0.7's F8E4M3 is `#[repr(transparent)]` over u8: every code is a
            // valid u8, and the view holds `end - start` of them.
            let bytes = unsafe { view.transmute::<u8>(end - start) }.ok_or_else(|| {
                candle_core::Error::msg(format!("tileops {op}: input {input}: short fp8 buffer"))
            })?;
            let spec = TensorSpec::new(dims, DType::Float8E4M3Fn);
            match TensorRef::from_cuda_bytes_view(bytes, &spec, device) {
                Ok(r) => Ok(Input::Borrowed(r)),
                Err(tileops::Error::Misaligned { .. }) => {
                    let device = device.clone();
                    Ok(Input::Copy(Box::new(move || {
                        let view: CudaView<'_, F8E4M3> = s.slice(start..end);
                        // SAFETY: as above.
                        let bytes = unsafe { view.transmute::<u8>(end - start) }
                            .ok_or_else(|| candle_core::Error::msg("short fp8 buffer"))?;
                        let copied = s
                            .stream()
                            .clone_dtod(&bytes)
                            .map_err(candle_core::Error::wrap)?;
                        Tensor::from_cuda_bytes(copied, &spec, &device)
                            .map_err(|e| candle_error(e.into_parts().0))
                    })))
                }
                Err(e) => Err(candle_error(e)),
            }
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
        DType::UInt32 => {
            CudaStorage::wrap_cuda_slice(t.into_cuda_slice::<u32>().map_err(e)?, device)
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
