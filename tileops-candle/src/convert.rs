//! candle's dtypes, layouts and CPU storages as tileops's, and back.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout};
use float8::F8E4M3;
use tileops::{DType, Tensor, TensorRef, TensorSpec};

/// The tileops dtype of a candle dtype; `None` for the ones tileops has no op for.
pub(crate) fn tileops_dtype(dtype: candle_core::DType) -> Option<DType> {
    use candle_core::DType as C;
    Some(match dtype {
        C::F32 => DType::Float32,
        C::F16 => DType::Float16,
        C::BF16 => DType::BFloat16,
        C::F64 => DType::Float64,
        C::I64 => DType::Int64,
        C::I32 => DType::Int32,
        C::I16 => DType::Int16,
        C::U8 => DType::UInt8,
        C::U32 => DType::UInt32,
        // The same code (e4m3fn: no infinities, NaN 0x7F/0xFF) in both crates.
        C::F8E4M3 => DType::Float8E4M3Fn,
        _ => return None,
    })
}

/// The element range `[start, end)` of a contiguous layout in its storage.
///
/// Non-contiguous inputs are refused rather than copied: tileops reads dense row-major buffers,
/// a strided gather would be a hidden copy on the CPU and a candle kernel on a GPU, and candle's
/// own fused ops (candle-nn's `rms_norm`, `softmax_last_dim`) refuse them the same way. The
/// message says what to call.
pub(crate) fn contiguous_range(
    op: &str,
    input: usize,
    layout: &Layout,
) -> candle_core::Result<(usize, usize)> {
    layout.contiguous_offsets().ok_or_else(|| {
        candle_core::Error::msg(format!(
            "tileops {op}: input {input} is not contiguous (shape {:?}, stride {:?}); \
             call `.contiguous()` on it first",
            layout.dims(),
            layout.stride()
        ))
    })
}

/// What `layout` covers of `storage`, borrowed in place as a tileops tensor: no copy.
pub(crate) fn host_ref<'a>(
    op: &str,
    input: usize,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<TensorRef<'a>> {
    let (start, end) = contiguous_range(op, input, layout)?;
    let shape = layout.dims().to_vec();
    let cpu = tileops::Device::cpu();
    let tensor = match storage {
        CpuStorage::F32(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::F16(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::BF16(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::F64(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::I64(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::I32(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::I16(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::U8(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        CpuStorage::U32(v) => TensorRef::from_host_slice(&v[start..end], shape, &cpu),
        // Bit patterns, never values: float8 0.7 (candle) and 0.4 (tileops) are different
        // types, and the codes are what both mean.
        CpuStorage::F8E4M3(v) => TensorRef::from_host_bytes(
            bytemuck::cast_slice(&v[start..end]),
            &TensorSpec::new(shape, DType::Float8E4M3Fn),
            &cpu,
        ),
        other => candle_core::bail!(
            "tileops {op}: input {input} has dtype {:?}, which tileops has no op for",
            other.dtype()
        ),
    };
    tensor.map_err(crate::bridge::candle_error)
}

/// A tileops host tensor as a candle CPU storage of the same dtype.
pub(crate) fn cpu_storage(tensor: &Tensor) -> candle_core::Result<CpuStorage> {
    let e = crate::bridge::candle_error;
    Ok(match tensor.dtype() {
        DType::Float32 => CpuStorage::F32(tensor.to_vec().map_err(e)?),
        DType::Float16 => CpuStorage::F16(tensor.to_vec().map_err(e)?),
        DType::BFloat16 => CpuStorage::BF16(tensor.to_vec().map_err(e)?),
        DType::Float64 => CpuStorage::F64(tensor.to_vec().map_err(e)?),
        DType::Int64 => CpuStorage::I64(tensor.to_vec().map_err(e)?),
        DType::Int32 => CpuStorage::I32(tensor.to_vec().map_err(e)?),
        DType::Int16 => CpuStorage::I16(tensor.to_vec().map_err(e)?),
        DType::UInt8 => CpuStorage::U8(tensor.to_vec().map_err(e)?),
        DType::UInt32 => CpuStorage::U32(tensor.to_vec().map_err(e)?),
        DType::Float8E4M3Fn => CpuStorage::F8E4M3(
            tensor
                .to_bytes()
                .map_err(e)?
                .into_iter()
                .map(F8E4M3::from_bits)
                .collect(),
        ),
        other => candle_core::bail!("tileops output of dtype {other}, which candle cannot hold"),
    })
}
