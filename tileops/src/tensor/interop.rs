//! GPU memory the caller already has: cudarc `CudaSlice`s wrapped as tensors without a copy,
//! borrowed back as slices or typed views, and taken back out.
//!
//! A tensor's GPU storage is one `CudaSlice<u8>`. A typed slice (`CudaSlice<bf16>`) becomes that
//! by handing its allocation from one `CudaSlice` to another (cudarc's `leak` then
//! `upgrade_device_ptr`): the same device memory, on the same stream, freed once.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr};

use super::Element;
use super::{Storage, Tensor};
use crate::{Device, Error, TensorSpec};

/// A slice [`Tensor::from_cuda_slice`] or [`Tensor::from_cuda_bytes`] refused, handed back with
/// the reason: a refused buffer is the caller's, and is not freed.
///
/// Converts into [`Error`] (dropping, and so freeing, the slice), so `?` works where the slice
/// is not wanted back.
pub struct FromCudaError<T>(Box<Refused<T>>);

/// Boxed: a `Result` carrying it stays small.
struct Refused<T> {
    error: Error,
    slice: CudaSlice<T>,
}

impl<T> FromCudaError<T> {
    fn new(error: Error, slice: CudaSlice<T>) -> Self {
        FromCudaError(Box::new(Refused { error, slice }))
    }

    /// Why the slice was refused.
    pub fn error(&self) -> &Error {
        &self.0.error
    }

    /// The slice, unchanged.
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.0.slice
    }

    /// The slice back, for the caller to keep using.
    pub fn into_slice(self) -> CudaSlice<T> {
        self.0.slice
    }

    /// The reason and the slice.
    pub fn into_parts(self) -> (Error, CudaSlice<T>) {
        let refused = *self.0;
        (refused.error, refused.slice)
    }
}

impl<T> fmt::Debug for FromCudaError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromCudaError")
            .field("error", self.error())
            .field("slice_len", &self.slice().len())
            .finish()
    }
}

impl<T> fmt::Display for FromCudaError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error().fmt(f)
    }
}

impl<T> std::error::Error for FromCudaError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.error())
    }
}

impl<T> From<FromCudaError<T>> for Error {
    fn from(err: FromCudaError<T>) -> Error {
        err.0.error
    }
}

impl Tensor {
    /// Wraps the caller's typed GPU buffer as a tensor of `spec` on `device`, without a copy.
    ///
    /// `T` must be the spec's dtype exactly (`half::bf16` for bfloat16, `f32` for float32; fp8
    /// and other raw data: [`Tensor::from_cuda_bytes`]), the slice must hold exactly
    /// `spec.numel()` elements, and it must belong to the device's context. Otherwise the slice
    /// comes back in a [`FromCudaError`] with [`Error::BufferDType`], [`Error::BufferMismatch`],
    /// [`Error::WrongContext`] or (a CPU device) [`Error::WrongDevice`].
    ///
    /// The memory stays on the slice's own stream, where it is freed when the tensor drops. When
    /// that is not the device's stream, cudarc's event tracking (on by default) orders the two.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use cudarc::driver::CudaContext;
    /// use half::bf16;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let ctx = CudaContext::new(0).expect("a GPU");
    /// let stream = ctx.new_stream().expect("a stream");
    /// let device = Device::from_cuda_stream(ctx, stream.clone())?;
    ///
    /// let host = vec![bf16::from_f32(1.0); 2 * 8];
    /// let slice = stream.clone_htod(&host).expect("a copy");
    /// let x = Tensor::from_cuda_slice(slice, &TensorSpec::new([2, 8], DType::BFloat16), &device)?;
    /// assert_eq!(x.to_vec::<bf16>()?, host);
    ///
    /// // Back out, as the caller's typed slice again: the same memory.
    /// let slice = x.into_cuda_slice::<bf16>()?;
    /// assert_eq!(slice.len(), 16);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn from_cuda_slice<T: Element + DeviceRepr>(
        slice: CudaSlice<T>,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Tensor, FromCudaError<T>> {
        if T::DTYPE != spec.dtype {
            let error = Error::BufferDType {
                spec: spec.to_string(),
                buffer: T::DTYPE,
                host: false,
            };
            return Err(FromCudaError::new(error, slice));
        }
        if let Err(error) = check_buffer(spec, slice.num_bytes(), slice.stream(), device) {
            return Err(FromCudaError::new(error, slice));
        }
        Ok(Tensor::wrap_checked(retype::<T, u8>(slice), spec, device))
    }

    /// Wraps the caller's GPU buffer of raw little-endian bytes as a tensor of `spec` on
    /// `device`, without a copy: any dtype, fp8 included. The slice must be exactly
    /// `spec.size_in_bytes()` long and belong to the device's context; otherwise it comes back
    /// in a [`FromCudaError`] ([`Error::BufferMismatch`], [`Error::WrongContext`], or
    /// [`Error::WrongDevice`] for a CPU device).
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use tileops::{DType, Device, Error, Tensor, TensorSpec};
    ///
    /// let ctx = CudaContext::new(0).expect("a GPU");
    /// let stream = ctx.default_stream();
    /// let device = Device::from_cuda_stream(ctx, stream.clone())?;
    /// let spec = TensorSpec::new([4, 16], DType::Float8E4M3Fn);
    ///
    /// let bytes = stream.alloc_zeros::<u8>(63).expect("an allocation");
    /// let refused = Tensor::from_cuda_bytes(bytes, &spec, &device).unwrap_err();
    /// assert!(matches!(refused.error(), Error::BufferMismatch { expected_bytes: 64, got_bytes: 63, .. }));
    /// let still_mine = refused.into_slice(); // not freed
    /// assert_eq!(still_mine.len(), 63);
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn from_cuda_bytes(
        slice: CudaSlice<u8>,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Tensor, FromCudaError<u8>> {
        match check_buffer(spec, slice.len(), slice.stream(), device) {
            Ok(()) => Ok(Tensor::wrap_checked(slice, spec, device)),
            Err(error) => Err(FromCudaError::new(error, slice)),
        }
    }

    /// Makes the tensor of a slice [`check_buffer`] accepted.
    fn wrap_checked(slice: CudaSlice<u8>, spec: &TensorSpec, device: &Device) -> Tensor {
        // A tensor with no elements holds no buffer (as tileops's own do): the empty slice is
        // freed here.
        let storage = Storage::Cuda((!slice.is_empty()).then_some(slice));
        Tensor {
            spec: spec.clone(),
            device: device.clone(),
            storage,
        }
    }

    /// The GPU buffer, borrowed: `None` on the CPU, and for a tensor with no elements (CUDA does
    /// not allocate zero bytes).
    ///
    /// Reading it on a stream other than [`Device::cuda_stream`] is ordered by cudarc's event
    /// tracking (on by default).
    pub fn cuda_bytes(&self) -> Option<&CudaSlice<u8>> {
        self.cuda_slice()
    }

    /// The GPU buffer, borrowed mutably (`None` as for [`Tensor::cuda_bytes`]): the caller may
    /// write it, for example with a kernel of its own, and its bytes are the tensor's values.
    pub fn cuda_bytes_mut(&mut self) -> Option<&mut CudaSlice<u8>> {
        self.cuda_slice_mut()
    }

    /// The GPU buffer as a typed view of `T`, which must be the dtype exactly
    /// ([`Error::BufferDType`] otherwise); [`Error::WrongDevice`] on the CPU or with no elements.
    pub fn cuda_view<T: Element + DeviceRepr>(&self) -> Result<CudaView<'_, T>, Error> {
        self.check_view::<T>()?;
        let numel = self.numel();
        let slice = self.cuda_slice().ok_or_else(|| self.no_buffer())?;
        // SAFETY: `T` is the dtype's own type (checked above), so every element of the tensor is a
        // valid `T`, and the buffer is `numel * size_of::<T>()` bytes long.
        unsafe { slice.transmute::<T>(numel) }.ok_or_else(|| self.no_buffer())
    }

    /// Like [`Tensor::cuda_view`], mutably: what the caller writes through it are the tensor's
    /// values.
    pub fn cuda_view_mut<T: Element + DeviceRepr>(&mut self) -> Result<CudaViewMut<'_, T>, Error> {
        self.check_view::<T>()?;
        let numel = self.numel();
        if self.cuda_slice().is_none() {
            return Err(self.no_buffer());
        }
        let shorter = Error::internal(format!("the buffer of {} is shorter than it", self.spec));
        let slice = self.cuda_slice_mut().expect("checked just above");
        // SAFETY: as in `cuda_view`; a `T` written is a valid element of the dtype.
        unsafe { slice.transmute_mut::<T>(numel) }.ok_or(shorter)
    }

    /// The GPU buffer, taken out of the tensor: the caller owns it again (on the stream it was
    /// allocated on). A tensor with no elements gives an empty slice on the device's stream;
    /// a CPU tensor is [`Error::WrongDevice`].
    pub fn into_cuda_bytes(self) -> Result<CudaSlice<u8>, Error> {
        let stream = match self.device.cuda_stream() {
            Some(stream) => stream.clone(),
            None => return Err(self.no_buffer()),
        };
        match self.storage {
            Storage::Cuda(Some(slice)) => Ok(slice),
            Storage::Cuda(None) => stream
                .null::<u8>()
                .map_err(|e| Error::driver("making an empty slice", e)),
            Storage::Host(_) => Err(self.no_buffer()),
        }
    }

    /// The GPU buffer taken out as a typed slice of `T`, which must be the dtype exactly
    /// ([`Error::BufferDType`] otherwise, and the tensor is dropped); else as
    /// [`Tensor::into_cuda_bytes`].
    pub fn into_cuda_slice<T: Element + DeviceRepr>(self) -> Result<CudaSlice<T>, Error> {
        self.check_view::<T>()?;
        let bytes = self.into_cuda_bytes()?;
        // The byte length is numel * size_of::<T>(): the tensor's size in its dtype, T's.
        Ok(retype::<u8, T>(bytes))
    }

    fn check_view<T: Element>(&self) -> Result<(), Error> {
        if T::DTYPE != self.dtype() {
            return Err(Error::BufferDType {
                spec: self.spec.to_string(),
                buffer: T::DTYPE,
                host: false,
            });
        }
        Ok(())
    }

    fn no_buffer(&self) -> Error {
        Error::WrongDevice {
            what: format!("{} on {}", self.spec, self.device),
            reason: if self.device.is_cpu() {
                "it has no GPU buffer: it is on the CPU".to_owned()
            } else {
                "it has no GPU buffer: it has no elements".to_owned()
            },
        }
    }
}

/// Checks that a buffer of `bytes` bytes on `stream` can be `spec` on `device`.
fn check_buffer(
    spec: &TensorSpec,
    bytes: usize,
    stream: &Arc<CudaStream>,
    device: &Device,
) -> Result<(), Error> {
    check_cuda_device(spec, stream, device)?;
    let expected_bytes = spec.size_in_bytes()?;
    if bytes != expected_bytes {
        return Err(Error::BufferMismatch {
            spec: spec.to_string(),
            expected_bytes,
            got_bytes: bytes,
        });
    }
    Ok(())
}

/// Checks that a GPU buffer on `stream` can hold `spec` on `device`: a GPU device, whose context
/// is the buffer's.
pub(super) fn check_cuda_device(
    spec: &TensorSpec,
    stream: &Arc<CudaStream>,
    device: &Device,
) -> Result<(), Error> {
    let Some(ctx) = device.cuda_context() else {
        return Err(Error::WrongDevice {
            what: format!("a GPU buffer for {spec}"),
            reason: format!(
                "it cannot be a tensor on {device}; use Device::from_cuda_stream or Device::cuda"
            ),
        });
    };
    // Another context's memory is not addressable here (a different GPU, or a non-primary
    // context of the same one).
    if **stream.context() != **ctx {
        return Err(Error::WrongContext {
            what: "the buffer".to_owned(),
            expected: device.to_string(),
            got: format!("another context (GPU {})", stream.context().ordinal()),
        });
    }
    Ok(())
}

/// The allocation of `slice` as a slice of `U`, on the same stream: ownership moves, nothing is
/// copied. The callers have checked that the byte length is whole elements of `U` and that those
/// bytes are valid `U`s (the dtype's own type, or raw bytes).
fn retype<T, U: DeviceRepr>(slice: CudaSlice<T>) -> CudaSlice<U> {
    let bytes = slice.num_bytes();
    debug_assert!(bytes.is_multiple_of(std::mem::size_of::<U>()));
    let stream = slice.stream().clone();
    // `leak` makes the stream wait for the slice's pending reads and writes, then gives up the
    // allocation without freeing it; `upgrade_device_ptr` makes the one owner of it again.
    let ptr = slice.leak();
    // SAFETY: `ptr` is a live allocation of `bytes` bytes, owned by nothing since `leak`; it was
    // allocated on `stream`, where the new slice will free it.
    unsafe { stream.upgrade_device_ptr::<U>(ptr, bytes / std::mem::size_of::<U>()) }
}
