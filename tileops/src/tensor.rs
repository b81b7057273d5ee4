//! Dense tensors on the CPU or a GPU, with explicit host copies and deterministic random fill.
//!
//! A tensor is a [`TensorSpec`] (shape and dtype) plus contiguous row-major storage. Nothing
//! converts dtypes behind your back: typed constructors and copies must match the dtype, and the
//! few conversions that exist say so in their names (`from_f64_rounded`, `to_vec_f64`).

mod borrowed;
mod convert;
mod interop;

pub use borrowed::{TensorMut, TensorRef};
pub use interop::FromCudaError;

use cudarc::driver::CudaSlice;
use half::{bf16, f16};

use crate::{DType, Device, Error, TensorSpec, alloc};

/// A dense, contiguous, row-major tensor on a [`Device`].
///
/// Every constructor computes the size through [`TensorSpec::size_in_bytes`] and allocates
/// fallibly: a shape whose size overflows is [`Error::ShapeOverflow`], one the host or the GPU
/// cannot hold is [`Error::OutOfMemory`], in debug and release builds alike.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let cpu = Device::cpu();
/// let t = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0], [2, 2], &cpu)?;
/// assert_eq!(t.dtype(), DType::Float32);
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.to_vec_f32()?, vec![1.0, 2.0, 3.0, 4.0]);
///
/// // Deterministic: the same seed gives the same values, on any device.
/// let spec = TensorSpec::new([3, 5], DType::BFloat16);
/// let a = Tensor::random(&spec, 7, &cpu)?;
/// let b = Tensor::random(&spec, 7, &cpu)?;
/// assert_eq!(a.to_bytes()?, b.to_bytes()?);
///
/// // No silent conversion: reading bf16 data as f32 values is an error...
/// assert!(a.to_vec::<f32>().is_err());
/// // ...but widening copies are exact and say so.
/// assert_eq!(a.to_vec_f32()?.len(), 15);
/// # Ok::<(), tileops::Error>(())
/// ```
pub struct Tensor {
    spec: TensorSpec,
    device: Device,
    storage: Storage,
}

enum Storage {
    Host(Vec<u8>),
    /// `None` for a tensor with no elements: CUDA does not allocate zero bytes.
    Cuda(Option<CudaSlice<u8>>),
}

/// A Rust element type that matches one [`DType`] exactly.
///
/// Implemented for `f32`, `f64`, `half::f16`, `half::bf16`, `i8`, `i16`, `i32`, `i64`, `u8` and
/// `bool`. (fp8 data has no Rust type: use [`Tensor::from_f64_rounded`] or
/// [`Tensor::from_bytes`].)
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The dtype this type stores.
    const DTYPE: DType;
    #[doc(hidden)]
    fn write_le(self, out: &mut Vec<u8>);
    #[doc(hidden)]
    fn read_le(bytes: &[u8]) -> Self;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $dtype:expr, |$v:ident, $out:ident| $write:expr, |$b:ident| $read:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn write_le(self, $out: &mut Vec<u8>) {
                let $v = self;
                $write
            }
            fn read_le($b: &[u8]) -> Self {
                $read
            }
        }
    };
    ($t:ty, $dtype:expr, $n:literal) => {
        element!(
            $t,
            $dtype,
            |v, out| out.extend_from_slice(&v.to_le_bytes()),
            |b| {
                let mut raw = [0u8; $n];
                raw.copy_from_slice(&b[..$n]);
                <$t>::from_le_bytes(raw)
            }
        );
    };
}

element!(f32, DType::Float32, 4);
element!(f64, DType::Float64, 8);
element!(i8, DType::Int8, 1);
element!(i16, DType::Int16, 2);
element!(i32, DType::Int32, 4);
element!(i64, DType::Int64, 8);
element!(u8, DType::UInt8, 1);
element!(u32, DType::UInt32, 4);
element!(bool, DType::Bool, |v, out| out.push(u8::from(v)), |b| b[0]
    != 0);
element!(
    f16,
    DType::Float16,
    |v, out| out.extend_from_slice(&v.to_bits().to_le_bytes()),
    |b| f16::from_bits(u16::from_le_bytes([b[0], b[1]]))
);
element!(
    bf16,
    DType::BFloat16,
    |v, out| out.extend_from_slice(&v.to_bits().to_le_bytes()),
    |b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]]))
);

impl Tensor {
    /// A tensor of `T`'s dtype holding `data` (row-major), on `device`.
    pub fn from_slice<T: Element>(
        data: &[T],
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Tensor, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        check_len(&spec, data.len())?;
        let mut bytes = alloc::host_vec(spec.size_in_bytes()?)?;
        for &v in data {
            v.write_le(&mut bytes);
        }
        Tensor::from_host_bytes(spec, bytes, device)
    }

    /// A `float32` tensor holding `data` (row-major), on `device`.
    pub fn from_f32_slice(
        data: &[f32],
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Tensor, Error> {
        Tensor::from_slice(data, shape, device)
    }

    /// A tensor of `spec` whose elements are `values` rounded to `spec.dtype` (nearest, ties to
    /// even; fp8 overflow as PyTorch converts it). Integer dtypes take exact integers only.
    pub fn from_f64_rounded(
        values: &[f64],
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Tensor, Error> {
        check_len(spec, values.len())?;
        let mut bytes = alloc::host_vec(spec.size_in_bytes()?)?;
        convert::encode_f64_into(spec.dtype, values, &mut bytes).map_err(|message| {
            Error::Unrepresentable {
                dtype: spec.dtype,
                message,
            }
        })?;
        Tensor::from_host_bytes(spec.clone(), bytes, device)
    }

    /// Like [`Tensor::from_f64_rounded`], from `f32` values.
    pub fn from_f32_rounded(
        values: &[f32],
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Tensor, Error> {
        let mut wide = alloc::host_vec(values.len())?;
        wide.extend(values.iter().map(|&v| f64::from(v)));
        Tensor::from_f64_rounded(&wide, spec, device)
    }

    /// A tensor of `spec` from its raw little-endian bytes.
    pub fn from_bytes(bytes: &[u8], spec: &TensorSpec, device: &Device) -> Result<Tensor, Error> {
        let size = spec.size_in_bytes()?;
        if bytes.len() != size {
            return Err(Error::LengthMismatch {
                spec: spec.to_string(),
                unit: "bytes",
                expected: size,
                got: bytes.len(),
            });
        }
        Tensor::from_host_bytes(spec.clone(), alloc::host_copy(bytes)?, device)
    }

    /// A tensor of `spec` with every element `value` rounded to the dtype.
    pub fn full(spec: &TensorSpec, value: f64, device: &Device) -> Result<Tensor, Error> {
        let one = convert::encode_f64(spec.dtype, &[value]).map_err(|message| {
            Error::Unrepresentable {
                dtype: spec.dtype,
                message,
            }
        })?;
        let mut bytes = alloc::host_vec(spec.size_in_bytes()?)?;
        for _ in 0..spec.numel()? {
            bytes.extend_from_slice(&one);
        }
        Tensor::from_host_bytes(spec.clone(), bytes, device)
    }

    /// A tensor of `spec` filled with zeros.
    pub fn zeros(spec: &TensorSpec, device: &Device) -> Result<Tensor, Error> {
        Tensor::from_host_bytes(
            spec.clone(),
            alloc::host_zeros(spec.size_in_bytes()?)?,
            device,
        )
    }

    /// A tensor of `spec` filled deterministically from `seed`: the same bytes for the same spec
    /// and seed, on every device and every run.
    ///
    /// Floats are standard normal samples rounded to the dtype; signed integers are uniform in
    /// `[-8, 8)`, `uint8` and `uint32` in `[0, 16)`, `bool` 0 or 1.
    pub fn random(spec: &TensorSpec, seed: u64, device: &Device) -> Result<Tensor, Error> {
        /// Values drawn and encoded at a time: the f64 staging stays small (32 KiB) whatever the
        /// tensor's size, so the only large allocation is the tensor's own.
        const BATCH: usize = 4096;
        let mut rng = SplitMix64::new(seed);
        let mut draw = || match spec.dtype {
            d if d.is_float() => rng.normal(),
            DType::UInt8 | DType::UInt32 => (rng.next_u64() >> 60) as f64,
            DType::Bool => (rng.next_u64() >> 63) as f64,
            _ => (rng.next_u64() >> 60) as f64 - 8.0,
        };
        let n = spec.numel()?;
        let mut bytes = alloc::host_vec(spec.size_in_bytes()?)?;
        let mut batch = Vec::with_capacity(BATCH.min(n));
        let mut left = n;
        while left > 0 {
            batch.clear();
            batch.extend((0..BATCH.min(left)).map(|_| draw()));
            convert::encode_f64_into(spec.dtype, &batch, &mut bytes).map_err(|message| {
                Error::Unrepresentable {
                    dtype: spec.dtype,
                    message,
                }
            })?;
            left -= batch.len();
        }
        Tensor::from_host_bytes(spec.clone(), bytes, device)
    }

    fn from_host_bytes(spec: TensorSpec, bytes: Vec<u8>, device: &Device) -> Result<Tensor, Error> {
        let storage = match device.cuda_device() {
            None => Storage::Host(bytes),
            Some(_) if bytes.is_empty() => Storage::Cuda(None),
            Some(dev) => {
                let slice = dev.stream.clone_htod(&bytes).map_err(|e| {
                    Error::device_alloc(
                        format!("copying {spec} to {device}"),
                        bytes.len(),
                        device,
                        e,
                    )
                })?;
                Storage::Cuda(Some(slice))
            }
        };
        Ok(Tensor {
            spec,
            device: device.clone(),
            storage,
        })
    }

    /// An uninitialised tensor (zeros on the CPU) for an op to write into.
    pub(crate) fn empty(spec: &TensorSpec, device: &Device) -> Result<Tensor, Error> {
        let size = spec.size_in_bytes()?;
        let storage = match device.cuda_device() {
            None => Storage::Host(alloc::host_zeros(size)?),
            Some(_) if size == 0 => Storage::Cuda(None),
            Some(dev) => {
                // SAFETY: u8 has no invalid bit patterns, and ops write every element before
                // anyone reads them.
                let slice = unsafe { dev.stream.alloc::<u8>(size) }.map_err(|e| {
                    Error::device_alloc(format!("allocating {spec} on {device}"), size, device, e)
                })?;
                Storage::Cuda(Some(slice))
            }
        };
        Ok(Tensor {
            spec: spec.clone(),
            device: device.clone(),
            storage,
        })
    }

    /// Shape and dtype.
    pub fn spec(&self) -> &TensorSpec {
        &self.spec
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.spec.dtype
    }

    /// Extent of each dimension, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.spec.shape
    }

    /// Number of elements. Infallible, unlike [`TensorSpec::numel`]: a tensor exists only once
    /// its size was computed without overflow, and its spec never changes.
    pub fn numel(&self) -> usize {
        self.spec.shape.iter().product()
    }

    /// The device holding the data.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The raw little-endian bytes, copied to the host (waits for pending GPU work).
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        match &self.storage {
            Storage::Host(bytes) => alloc::host_copy(bytes),
            Storage::Cuda(None) => Ok(Vec::new()),
            Storage::Cuda(Some(slice)) => {
                let stream = slice.stream();
                let failed =
                    |e| Error::driver(format!("copying {} from {}", self.spec, self.device), e);
                let mut bytes = alloc::host_zeros(slice.len())?;
                stream.memcpy_dtoh(slice, &mut bytes).map_err(failed)?;
                stream.synchronize().map_err(failed)?;
                Ok(bytes)
            }
        }
    }

    /// The elements as `T`, copied to the host; an error unless `T` is exactly the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if T::DTYPE != self.dtype() {
            return Err(Error::HostView {
                view: format!("to_vec::<{}>()", T::DTYPE),
                dtype: self.dtype(),
                reason: "use the dtype's own type or a widening copy".to_owned(),
            });
        }
        let bytes = self.to_bytes()?;
        let mut values = alloc::host_vec(self.numel())?;
        values.extend(bytes.chunks_exact(T::DTYPE.size_in_bytes()).map(T::read_le));
        Ok(values)
    }

    /// The elements widened to `f32` (exact), for float32, float16, bfloat16 and fp8 tensors;
    /// an error for other dtypes, whose values f32 may not hold.
    pub fn to_vec_f32(&self) -> Result<Vec<f32>, Error> {
        match self.dtype() {
            DType::Float32
            | DType::Float16
            | DType::BFloat16
            | DType::Float8E4M3Fn
            | DType::Float8E5M2 => {
                let wide = self.to_vec_f64()?;
                let mut values = alloc::host_vec(wide.len())?;
                values.extend(wide.into_iter().map(|v| v as f32));
                Ok(values)
            }
            other => Err(Error::HostView {
                view: "to_vec_f32()".to_owned(),
                dtype: other,
                reason: "it would round; use to_vec_f64() or to_vec::<T>()".to_owned(),
            }),
        }
    }

    /// The elements widened to `f64` (exact), for every dtype but int64.
    pub fn to_vec_f64(&self) -> Result<Vec<f64>, Error> {
        let bytes = self.to_bytes()?;
        convert::decode_f64(self.dtype(), &bytes).unwrap_or_else(|| {
            Err(Error::HostView {
                view: "to_vec_f64()".to_owned(),
                dtype: self.dtype(),
                reason: "it would round; use to_vec::<i64>()".to_owned(),
            })
        })
    }

    /// A copy of this tensor on `device`.
    pub fn to_device(&self, device: &Device) -> Result<Tensor, Error> {
        Tensor::from_host_bytes(self.spec.clone(), self.to_bytes()?, device)
    }

    /// A copy of this tensor on the same device.
    pub fn try_clone(&self) -> Result<Tensor, Error> {
        let storage = match &self.storage {
            Storage::Host(bytes) => Storage::Host(alloc::host_copy(bytes)?),
            Storage::Cuda(None) => Storage::Cuda(None),
            Storage::Cuda(Some(slice)) => Storage::Cuda(Some(slice.try_clone().map_err(|e| {
                Error::device_alloc(
                    format!("copying {}", self.spec),
                    slice.len(),
                    &self.device,
                    e,
                )
            })?)),
        };
        Ok(Tensor {
            spec: self.spec.clone(),
            device: self.device.clone(),
            storage,
        })
    }

    /// The device buffer of a GPU tensor (`None` on the CPU or when empty).
    pub(crate) fn cuda_slice(&self) -> Option<&CudaSlice<u8>> {
        match &self.storage {
            Storage::Cuda(slice) => slice.as_ref(),
            Storage::Host(_) => None,
        }
    }

    pub(crate) fn cuda_slice_mut(&mut self) -> Option<&mut CudaSlice<u8>> {
        match &mut self.storage {
            Storage::Cuda(slice) => slice.as_mut(),
            Storage::Host(_) => None,
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({} on {})", self.spec, self.device)
    }
}

/// Checks that `len` values fill `spec`, after its size (a shape that overflows is reported as
/// such, not as a length mismatch).
fn check_len(spec: &TensorSpec, len: usize) -> Result<(), Error> {
    spec.size_in_bytes()?;
    let numel = spec.numel()?;
    if len != numel {
        return Err(Error::LengthMismatch {
            spec: spec.to_string(),
            unit: "values",
            expected: numel,
            got: len,
        });
    }
    Ok(())
}

/// SplitMix64: tiny, fast, and the same stream on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1]: never 0, so the logarithm below is finite.
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal sample (Box-Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_round_trip_and_strict_dtype() {
        let cpu = Device::cpu();
        let data = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
        let t = Tensor::from_slice(&data, [2], &cpu).unwrap();
        assert_eq!(t.dtype(), DType::BFloat16);
        assert_eq!(t.to_vec::<bf16>().unwrap(), data);
        assert!(t.to_vec::<f16>().is_err());
        assert_eq!(t.to_vec_f32().unwrap(), vec![1.5, -2.0]);
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let cpu = Device::cpu();
        assert!(Tensor::from_f32_slice(&[1.0; 5], [2, 3], &cpu).is_err());
        let spec = TensorSpec::new([4], DType::Float16);
        assert!(Tensor::from_bytes(&[0; 7], &spec, &cpu).is_err());
        assert!(Tensor::from_f64_rounded(&[0.0; 3], &spec, &cpu).is_err());
    }

    #[test]
    fn random_is_deterministic_and_seed_dependent() {
        let cpu = Device::cpu();
        let spec = TensorSpec::new([64], DType::Float32);
        let a = Tensor::random(&spec, 1, &cpu)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        let b = Tensor::random(&spec, 1, &cpu)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        let c = Tensor::random(&spec, 2, &cpu)
            .unwrap()
            .to_vec_f32()
            .unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mean = a.iter().map(|&v| f64::from(v)).sum::<f64>() / 64.0;
        assert!(mean.abs() < 0.5, "{mean}");
        assert!(a.iter().all(|v| v.is_finite() && *v != 0.0));
    }

    #[test]
    fn random_covers_every_dtype() {
        let cpu = Device::cpu();
        for dtype in DType::ALL {
            let t = Tensor::random(&TensorSpec::new([3, 4], dtype), 9, &cpu).unwrap();
            assert_eq!(t.to_bytes().unwrap().len(), 12 * dtype.size_in_bytes());
        }
        let ints = Tensor::random(&TensorSpec::new([100], DType::Int32), 3, &cpu).unwrap();
        assert!(
            ints.to_vec::<i32>()
                .unwrap()
                .iter()
                .all(|v| (-8..8).contains(v))
        );
    }

    #[test]
    fn widening_refuses_lossy_dtypes() {
        let cpu = Device::cpu();
        let t = Tensor::from_slice(&[1i64, 2], [2], &cpu).unwrap();
        assert!(t.to_vec_f64().is_err());
        assert!(t.to_vec_f32().is_err());
        let d = Tensor::from_slice(&[1.0f64], [1], &cpu).unwrap();
        assert!(d.to_vec_f32().is_err());
        assert_eq!(d.to_vec_f64().unwrap(), vec![1.0]);
    }

    #[test]
    fn empty_and_full_tensors() {
        let cpu = Device::cpu();
        let empty = Tensor::zeros(&TensorSpec::new([0, 4], DType::Float32), &cpu).unwrap();
        assert_eq!(empty.numel(), 0);
        assert!(empty.to_vec_f32().unwrap().is_empty());
        let full = Tensor::full(&TensorSpec::new([3], DType::Float16), 0.1, &cpu).unwrap();
        assert_eq!(full.to_vec::<f16>().unwrap(), vec![f16::from_f64(0.1); 3]);
        let copy = full.try_clone().unwrap().to_device(&cpu).unwrap();
        assert_eq!(copy.to_bytes().unwrap(), full.to_bytes().unwrap());
    }
}
