//! Borrowed tensors: a shape and dtype over memory the caller owns (part of a cudarc `CudaSlice`,
//! a `CudaView`, a host slice, or a [`Tensor`]), read or written by ops in place.
//!
//! Nothing here copies or allocates device memory, and nothing takes ownership: a [`TensorRef`]
//! is a shared borrow of the caller's buffer, a [`TensorMut`] an exclusive one, and Rust's
//! borrow checker keeps either from outliving the buffer or from coexisting with a write to it.
//!
//! A borrowed GPU buffer must be contiguous row-major, start 16-byte aligned (the kernels read
//! and write 16 bytes at a time from a tensor's base) and belong to the device's context; a
//! buffer that is not is refused with an error rather than copied, since a silent copy would
//! break the promise that an op writes the caller's memory.

use std::borrow::Cow;
use std::fmt;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtr, DeviceRepr, DeviceSlice};

use super::interop::check_cuda_device;
use super::{Element, Storage, Tensor, convert};
use crate::{DType, Device, Error, TensorSpec, alloc};

/// A tensor borrowed for reading: a [`TensorSpec`] over contiguous row-major memory the caller
/// owns, on a [`Device`]. Ops take it wherever they take an input (`impl Into<TensorRef>`), so a
/// `&Tensor` works as before.
///
/// On a GPU it is a range of the caller's `CudaSlice` (or `CudaView`) at an element offset: the
/// op reads that memory on the device's stream, without a copy. On the CPU it is a host slice.
///
/// ```
/// use tileops::ops::RmsNorm;
/// use tileops::{DType, Device, Tensor, TensorMut, TensorRef, TensorSpec};
///
/// let cpu = Device::cpu();
/// // The caller's memory: a row of 4 values after 2 values that are not part of it.
/// let data = [9.0f32, 9.0, 3.0, 4.0, 0.0, 0.0];
/// let x = TensorRef::from_host_slice(&data[2..4], [1, 2], &cpu)?;
/// let weight = Tensor::full(&TensorSpec::new([2], DType::Float32), 1.0, &cpu)?;
/// let mut out = [0.0f32; 4];
/// let y = TensorMut::from_host_slice_mut(&mut out[1..3], [1, 2], &cpu)?;
///
/// let norm = RmsNorm::new(x.spec().clone(), weight.spec().clone(), 0.0, &cpu)?;
/// norm.forward_into(x, &weight, y)?;
/// let r = 12.5f32.sqrt();
/// assert_eq!(out, [0.0, 3.0 / r, 4.0 / r, 0.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
///
/// A borrow cannot outlive the memory it borrows: this does not compile.
///
/// ```compile_fail,E0597
/// use tileops::{Device, TensorRef};
///
/// let x = {
///     let data = vec![1.0f32; 4];
///     TensorRef::from_host_slice(&data, [4], &Device::cpu()).unwrap()
/// }; // `data` is dropped here, while `x` still borrows it
/// println!("{:?}", x.shape());
/// ```
pub struct TensorRef<'a> {
    spec: Cow<'a, TensorSpec>,
    device: Cow<'a, Device>,
    storage: RefStorage<'a>,
}

enum RefStorage<'a> {
    Host(&'a [u8]),
    /// `None` for a tensor with no elements (CUDA has no zero-byte allocation to point into).
    Cuda(Option<CudaView<'a, u8>>),
}

/// A tensor borrowed for writing: like [`TensorRef`], exclusively. Ops take it wherever they
/// write an output (`impl Into<TensorMut>`), so a `&mut Tensor` works as before; what the op
/// writes is the caller's memory, on the device's stream, with no copy.
///
/// ```
/// use tileops::ops::Softmax;
/// use tileops::{DType, Device, TensorMut, TensorRef, TensorSpec};
///
/// let cpu = Device::cpu();
/// let x = [0.0f32, 0.0, 0.0, 0.0];
/// let mut y = vec![-1.0f32; 6];
/// let op = Softmax::new(TensorSpec::new([4], DType::Float32), -1, &cpu)?;
/// let mut out = TensorMut::from_host_slice_mut(&mut y[1..5], [4], &cpu)?;
/// op.forward_into(TensorRef::from_host_slice(&x, [4], &cpu)?, &mut out)?;
/// // A reborrow for reading, while `out` stays alive.
/// assert_eq!(out.as_tensor_ref().to_tensor()?.to_vec::<f32>()?, vec![0.25; 4]);
/// drop(out);
/// assert_eq!(y, [-1.0, 0.25, 0.25, 0.25, 0.25, -1.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub struct TensorMut<'a> {
    spec: Cow<'a, TensorSpec>,
    device: Cow<'a, Device>,
    storage: MutStorage<'a>,
}

enum MutStorage<'a> {
    Host(&'a mut [u8]),
    /// `None` for a tensor with no elements.
    Cuda(Option<CudaMut<'a>>),
}

/// A writable GPU range as bytes. A byte view of a typed view cannot be made by value in cudarc
/// (its `transmute_mut` reborrows), so a typed view is kept as it is, behind [`ByteViewMut`],
/// and byte views of it are reborrowed when an op runs. A tensor's own buffer is bytes already
/// and needs no box.
enum CudaMut<'a> {
    Bytes(CudaViewMut<'a, u8>),
    Typed(Box<dyn ByteViewMut + 'a>),
}

/// A typed writable view, seen as its bytes.
trait ByteViewMut {
    fn bytes(&self) -> CudaView<'_, u8>;
    fn bytes_mut(&mut self) -> CudaViewMut<'_, u8>;
}

/// The first `len` elements of a typed writable view: the tensor's.
struct Typed<'a, T> {
    view: CudaViewMut<'a, T>,
    len: usize,
}

impl<T> ByteViewMut for Typed<'_, T> {
    fn bytes(&self) -> CudaView<'_, u8> {
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: every byte pattern is a valid u8; the constructors checked that the view
        // holds `len` elements, so the bytes fit (`transmute` checks it again).
        unsafe { self.view.transmute::<u8>(bytes) }.expect("the constructors checked the length")
    }

    fn bytes_mut(&mut self) -> CudaViewMut<'_, u8> {
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: as above; the borrowed tensor's dtype is `T`'s, so the bytes ops write are
        // valid `T`s (bool, whose bytes could be invalid, is refused by the constructors).
        unsafe { self.view.transmute_mut::<u8>(bytes) }
            .expect("the constructors checked the length")
    }
}

impl CudaMut<'_> {
    fn bytes(&self) -> CudaView<'_, u8> {
        match self {
            CudaMut::Bytes(view) => view.as_view(),
            CudaMut::Typed(view) => view.bytes(),
        }
    }

    fn bytes_mut(&mut self) -> CudaViewMut<'_, u8> {
        match self {
            CudaMut::Bytes(view) => view.as_view_mut(),
            CudaMut::Typed(view) => view.bytes_mut(),
        }
    }
}

/// `CudaViewMut::as_view_mut` is not in cudarc (only `CudaSlice::as_view_mut`): a whole-range
/// reborrow.
trait Reborrow {
    fn as_view_mut(&mut self) -> CudaViewMut<'_, u8>;
}

impl Reborrow for CudaViewMut<'_, u8> {
    fn as_view_mut(&mut self) -> CudaViewMut<'_, u8> {
        let len = self.len();
        self.slice_mut(0..len)
    }
}

impl<'a> From<&'a Tensor> for TensorRef<'a> {
    fn from(tensor: &'a Tensor) -> TensorRef<'a> {
        let storage = match &tensor.storage {
            Storage::Host(bytes) => RefStorage::Host(bytes),
            Storage::Cuda(slice) => RefStorage::Cuda(slice.as_ref().map(CudaSlice::as_view)),
        };
        TensorRef {
            spec: Cow::Borrowed(&tensor.spec),
            device: Cow::Borrowed(&tensor.device),
            storage,
        }
    }
}

/// A shared tensor (`&Arc<Tensor>`, as candle blocks and caches hold them) borrows its tensor, as
/// `&Tensor` did through deref before ops took `impl Into<TensorRef>`.
///
/// ```
/// use std::sync::Arc;
/// use tileops::{DType, Device, Tensor, TensorRef, TensorSpec};
///
/// let x = Arc::new(Tensor::zeros(&TensorSpec::new([2, 3], DType::Float32), &Device::cpu())?);
/// let view: TensorRef<'_> = (&x).into();
/// assert_eq!(view.shape(), [2, 3]);
/// # Ok::<(), tileops::Error>(())
/// ```
impl<'a> From<&'a std::sync::Arc<Tensor>> for TensorRef<'a> {
    fn from(tensor: &'a std::sync::Arc<Tensor>) -> TensorRef<'a> {
        TensorRef::from(&**tensor)
    }
}

/// A boxed tensor borrows its tensor, as [`Arc`](std::sync::Arc) does.
impl<'a> From<&'a Box<Tensor>> for TensorRef<'a> {
    fn from(tensor: &'a Box<Tensor>) -> TensorRef<'a> {
        TensorRef::from(&**tensor)
    }
}

/// A reference-counted tensor borrows its tensor, as [`Arc`](std::sync::Arc) does.
impl<'a> From<&'a std::rc::Rc<Tensor>> for TensorRef<'a> {
    fn from(tensor: &'a std::rc::Rc<Tensor>) -> TensorRef<'a> {
        TensorRef::from(&**tensor)
    }
}

impl<'a> From<&'a mut Tensor> for TensorMut<'a> {
    fn from(tensor: &'a mut Tensor) -> TensorMut<'a> {
        let storage = match &mut tensor.storage {
            Storage::Host(bytes) => MutStorage::Host(bytes),
            Storage::Cuda(slice) => {
                MutStorage::Cuda(slice.as_mut().map(|s| CudaMut::Bytes(s.as_view_mut())))
            }
        };
        TensorMut {
            spec: Cow::Borrowed(&tensor.spec),
            device: Cow::Borrowed(&tensor.device),
            storage,
        }
    }
}

/// A reborrow, so that one `TensorRef` can be passed to several ops.
impl<'b> From<&'b TensorRef<'_>> for TensorRef<'b> {
    fn from(tensor: &'b TensorRef<'_>) -> TensorRef<'b> {
        tensor.reborrow()
    }
}

/// A reborrow, so that one `TensorMut` can be written by several ops in turn.
impl<'b> From<&'b mut TensorMut<'_>> for TensorMut<'b> {
    fn from(tensor: &'b mut TensorMut<'_>) -> TensorMut<'b> {
        tensor.reborrow()
    }
}

/// Reading a `TensorMut`'s memory, while the `TensorMut` stays borrowed.
impl<'b> From<&'b TensorMut<'_>> for TensorRef<'b> {
    fn from(tensor: &'b TensorMut<'_>) -> TensorRef<'b> {
        tensor.as_tensor_ref()
    }
}

impl Tensor {
    /// This tensor, borrowed for reading (what `&tensor` converts into where ops take
    /// `impl Into<TensorRef>`).
    pub fn as_tensor_ref(&self) -> TensorRef<'_> {
        TensorRef::from(self)
    }

    /// This tensor, borrowed for writing (what `&mut tensor` converts into where ops take
    /// `impl Into<TensorMut>`).
    pub fn as_tensor_mut(&mut self) -> TensorMut<'_> {
        TensorMut::from(self)
    }
}

impl<'a> TensorRef<'a> {
    /// Borrows `shape` elements of the caller's typed GPU buffer, from element `offset` on, as
    /// a tensor of `T`'s dtype on `device`: no copy.
    ///
    /// Errors: [`Error::BorrowOutOfRange`] when `offset + numel` passes the slice's end,
    /// [`Error::Misaligned`] when element `offset` is not 16-byte aligned,
    /// [`Error::WrongContext`] when the slice belongs to another context than the device's,
    /// [`Error::WrongDevice`] for a CPU device.
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use tileops::{Device, TensorRef};
    ///
    /// let ctx = CudaContext::new(0).expect("a GPU");
    /// let stream = ctx.new_stream().expect("a stream");
    /// let device = Device::from_cuda_stream(ctx, stream.clone())?;
    /// let slice = stream.alloc_zeros::<f32>(64).expect("an allocation");
    /// // Elements 16..48 as a [4, 8] tensor.
    /// let x = TensorRef::from_cuda_slice(&slice, 16, [4, 8], &device)?;
    /// assert_eq!(x.shape(), &[4, 8]);
    /// // Element 1 is 4 bytes past a 16-byte boundary: refused, not copied.
    /// assert!(TensorRef::from_cuda_slice(&slice, 1, [4, 8], &device).is_err());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn from_cuda_slice<T: Element + DeviceRepr>(
        slice: &'a CudaSlice<T>,
        offset: usize,
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        TensorRef::from_cuda_view_at(slice.as_view(), offset, shape, device)
    }

    /// Borrows the caller's typed GPU view (its first `shape` elements) as a tensor of `T`'s
    /// dtype on `device`: no copy. Errors as [`TensorRef::from_cuda_slice`].
    pub fn from_cuda_view<T: Element + DeviceRepr>(
        view: CudaView<'a, T>,
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        TensorRef::from_cuda_view_at(view, 0, shape, device)
    }

    fn from_cuda_view_at<T: Element + DeviceRepr>(
        view: CudaView<'a, T>,
        offset: usize,
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        let numel = spec.numel()?;
        let range = check_range(&spec, offset, numel, view.len(), "elements")?;
        check_cuda_device(&spec, view.stream(), device)?;
        let size = std::mem::size_of::<T>();
        let storage = match view.try_slice(range) {
            Some(part) if numel > 0 => {
                // SAFETY: every byte pattern is a valid u8; the length is exactly the part's.
                let bytes = unsafe { part.transmute::<u8>(numel * size) }
                    .ok_or_else(|| Error::internal("a part's bytes fit the part"))?;
                check_borrow_aligned(&spec, &bytes, offset * size, device)?;
                Some(bytes)
            }
            _ => None,
        };
        Ok(TensorRef {
            spec: Cow::Owned(spec),
            device: Cow::Owned(device.clone()),
            storage: RefStorage::Cuda(storage),
        })
    }

    /// Borrows `spec` from byte `byte_offset` of the caller's GPU buffer of raw little-endian
    /// bytes: any dtype, fp8 included; no copy. Errors as [`TensorRef::from_cuda_slice`].
    pub fn from_cuda_bytes(
        slice: &'a CudaSlice<u8>,
        byte_offset: usize,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        TensorRef::from_cuda_bytes_view_at(slice.as_view(), byte_offset, spec, device)
    }

    /// Borrows `spec` from the start of the caller's GPU view of raw little-endian bytes: any
    /// dtype, fp8 included; no copy. A view is what cudarc's `transmute` makes of another
    /// element type's buffer (candle's fp8 slices, of float8 0.7's type, re-typed as bytes).
    /// Errors as [`TensorRef::from_cuda_slice`].
    pub fn from_cuda_bytes_view(
        view: CudaView<'a, u8>,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        TensorRef::from_cuda_bytes_view_at(view, 0, spec, device)
    }

    fn from_cuda_bytes_view_at(
        view: CudaView<'a, u8>,
        byte_offset: usize,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        let size = spec.size_in_bytes()?;
        let range = check_range(spec, byte_offset, size, view.len(), "bytes")?;
        check_cuda_device(spec, view.stream(), device)?;
        let storage = match view.try_slice(range) {
            Some(bytes) if size > 0 => {
                check_borrow_aligned(spec, &bytes, byte_offset, device)?;
                Some(bytes)
            }
            _ => None,
        };
        Ok(TensorRef {
            spec: Cow::Owned(spec.clone()),
            device: Cow::Owned(device.clone()),
            storage: RefStorage::Cuda(storage),
        })
    }

    /// Borrows a strided layout of the caller's typed GPU buffer (as candle's `Layout` gives:
    /// `offset` and `strides` in elements), which must be contiguous row-major: tileops's
    /// kernels read no other. A dim of size 1 may have any stride, since it is never stepped
    /// along. Otherwise [`Error::NotContiguous`], naming the shape and strides; else as
    /// [`TensorRef::from_cuda_slice`].
    pub fn from_cuda_strided<T: Element + DeviceRepr>(
        slice: &'a CudaSlice<T>,
        offset: usize,
        shape: &[usize],
        strides: &[usize],
        device: &Device,
    ) -> Result<Self, Error> {
        check_contiguous(shape, strides)?;
        TensorRef::from_cuda_slice(slice, offset, shape, device)
    }

    /// Borrows the caller's host data (row-major, exactly `shape`'s element count) as a tensor
    /// of `T`'s dtype on `device`, which must be the CPU ([`Error::WrongDevice`] otherwise: GPU
    /// kernels cannot read host memory).
    pub fn from_host_slice<T: Element>(
        data: &'a [T],
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        check_host(&spec, data.len(), device)?;
        Ok(TensorRef {
            spec: Cow::Owned(spec),
            device: Cow::Owned(device.clone()),
            storage: RefStorage::Host(host_bytes(data)?),
        })
    }

    /// Borrows the caller's host bytes (raw little-endian, exactly `spec.size_in_bytes()`) as
    /// `spec` on `device`, which must be the CPU: any dtype, fp8 included.
    pub fn from_host_bytes(
        bytes: &'a [u8],
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        check_host_bytes(spec, bytes.len(), device)?;
        Ok(TensorRef {
            spec: Cow::Owned(spec.clone()),
            device: Cow::Owned(device.clone()),
            storage: RefStorage::Host(bytes),
        })
    }

    /// Shape and dtype.
    pub fn spec(&self) -> &TensorSpec {
        &self.spec
    }

    /// Extent of each dimension, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.spec.shape
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.spec.dtype
    }

    /// The device whose ops read it.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A shorter borrow of the same memory.
    pub fn reborrow(&self) -> TensorRef<'_> {
        let storage = match &self.storage {
            RefStorage::Host(bytes) => RefStorage::Host(bytes),
            RefStorage::Cuda(view) => RefStorage::Cuda(view.as_ref().map(whole)),
        };
        TensorRef {
            spec: Cow::Borrowed(&self.spec),
            device: Cow::Borrowed(&self.device),
            storage,
        }
    }

    /// An owned copy on the same device (a device-to-device copy on the device's stream for a
    /// GPU tensor).
    pub fn to_tensor(&self) -> Result<Tensor, Error> {
        match &self.storage {
            RefStorage::Host(bytes) => Tensor::from_bytes(bytes, &self.spec, &self.device),
            RefStorage::Cuda(None) => Tensor::zeros(&self.spec, &self.device),
            RefStorage::Cuda(Some(view)) => {
                let mut copy = Tensor::empty(&self.spec, &self.device)?;
                let (Some(dev), Some(dst)) = (self.device.cuda_device(), copy.cuda_slice_mut())
                else {
                    return Err(Error::internal(format!("a GPU copy of {}", self.spec)));
                };
                dev.stream.memcpy_dtod(view, dst).map_err(|e| {
                    Error::driver(format!("copying {} on {}", self.spec, self.device), e)
                })?;
                Ok(copy)
            }
        }
    }

    /// Number of elements (the spec's size was computed without overflow when it was made).
    pub(crate) fn numel(&self) -> usize {
        self.spec.shape.iter().product()
    }

    /// The GPU bytes (`None` on the CPU and with no elements).
    pub(crate) fn cuda_view(&self) -> Option<CudaView<'_, u8>> {
        match &self.storage {
            RefStorage::Cuda(Some(view)) => Some(whole(view)),
            _ => None,
        }
    }

    /// The elements of a CPU tensor as `T`, which must be the dtype exactly.
    pub(crate) fn host_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if T::DTYPE != self.dtype() {
            return Err(Error::internal(format!(
                "host_vec::<{}>() of {}",
                T::DTYPE,
                self.spec
            )));
        }
        let bytes = self.host_bytes("host_vec")?;
        let mut values = alloc::host_vec(self.numel())?;
        values.extend(bytes.chunks_exact(T::DTYPE.size_in_bytes()).map(T::read_le));
        Ok(values)
    }

    /// Widened f64 values of a CPU tensor, or an error (ops validate dtypes first).
    pub(crate) fn host_f64(&self) -> Result<Vec<f64>, Error> {
        let bytes = self.host_bytes("host_f64")?;
        decode(self.dtype(), bytes, "host_f64()")
    }

    /// Widened f64 values of the rows `rows` (in that order) of a float tensor viewed as rows of
    /// `row_len` elements, without widening the rest. An internal error for a row past the end
    /// (callers check their indices first).
    pub(crate) fn host_rows_f64(&self, rows: &[usize], row_len: usize) -> Result<Vec<f64>, Error> {
        let bytes = self.host_bytes("host_rows_f64")?;
        let row_bytes = row_len * self.dtype().size_in_bytes();
        let mut values = Vec::with_capacity(rows.len() * row_len);
        for &row in rows {
            let range = row * row_bytes..(row + 1) * row_bytes;
            let row_of = bytes.get(range).ok_or_else(|| {
                Error::internal(format!("row {row} of {} as rows of {row_len}", self.spec))
            })?;
            values.extend(decode(self.dtype(), row_of, "host_rows_f64()")?);
        }
        Ok(values)
    }

    fn host_bytes(&self, what: &str) -> Result<&[u8], Error> {
        match &self.storage {
            RefStorage::Host(bytes) => Ok(bytes),
            RefStorage::Cuda(_) => Err(Error::internal(format!(
                "{what} of {} on {}",
                self.spec, self.device
            ))),
        }
    }
}

impl<'a> TensorMut<'a> {
    /// Borrows `shape` elements of the caller's typed GPU buffer, from element `offset` on, for
    /// an op to write as a tensor of `T`'s dtype on `device`: no copy. Errors as
    /// [`TensorRef::from_cuda_slice`]; a `bool` buffer is [`Error::BufferDType`] (an op could
    /// write bytes that are not valid `bool`s: borrow its bytes with
    /// [`TensorMut::from_cuda_bytes_mut`]).
    ///
    /// ```no_run
    /// use cudarc::driver::CudaContext;
    /// use tileops::ops::Silu;
    /// use tileops::{DType, Device, TensorMut, TensorRef, TensorSpec};
    ///
    /// let ctx = CudaContext::new(0).expect("a GPU");
    /// let stream = ctx.new_stream().expect("a stream");
    /// let device = Device::from_cuda_stream(ctx, stream.clone())?;
    /// let x = stream.alloc_zeros::<f32>(32).expect("an allocation");
    /// let mut y = stream.alloc_zeros::<f32>(64).expect("an allocation");
    /// let silu = Silu::new(TensorSpec::new([32], DType::Float32), &device)?;
    /// // Writes elements 32..64 of `y`, on `stream`.
    /// silu.forward_into(
    ///     TensorRef::from_cuda_slice(&x, 0, [32], &device)?,
    ///     TensorMut::from_cuda_slice_mut(&mut y, 32, [32], &device)?,
    /// )?;
    /// # Ok::<(), tileops::Error>(())
    /// ```
    pub fn from_cuda_slice_mut<T: Element + DeviceRepr>(
        slice: &'a mut CudaSlice<T>,
        offset: usize,
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        let numel = spec.numel()?;
        let range = check_range(&spec, offset, numel, slice.len(), "elements")?;
        let view = slice
            .try_slice_mut(range)
            .ok_or_else(|| Error::internal("a checked range is within the slice"))?;
        TensorMut::from_typed(spec, view, offset, device)
    }

    /// Borrows the caller's typed writable GPU view (its first `shape` elements) for an op to
    /// write: no copy. Errors as [`TensorMut::from_cuda_slice_mut`].
    pub fn from_cuda_view_mut<T: Element + DeviceRepr>(
        view: CudaViewMut<'a, T>,
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        let numel = spec.numel()?;
        check_range(&spec, 0, numel, view.len(), "elements")?;
        TensorMut::from_typed(spec, view, 0, device)
    }

    /// The checks and storage of the typed constructors: `view` starts at the tensor and holds
    /// at least its elements; `offset` is where it starts in the caller's slice (for errors).
    fn from_typed<T: Element + DeviceRepr>(
        spec: TensorSpec,
        view: CudaViewMut<'a, T>,
        offset: usize,
        device: &Device,
    ) -> Result<Self, Error> {
        if T::DTYPE == DType::Bool {
            return Err(Error::BufferDType {
                spec: spec.to_string(),
                buffer: T::DTYPE,
                host: false,
            });
        }
        check_cuda_device(&spec, view.stream(), device)?;
        let numel = spec.numel()?;
        let storage = if numel == 0 {
            None
        } else {
            let typed = Typed { view, len: numel };
            check_borrow_aligned(
                &spec,
                &typed.bytes(),
                offset * std::mem::size_of::<T>(),
                device,
            )?;
            Some(CudaMut::Typed(Box::new(typed)))
        };
        Ok(TensorMut {
            spec: Cow::Owned(spec),
            device: Cow::Owned(device.clone()),
            storage: MutStorage::Cuda(storage),
        })
    }

    /// Borrows `spec` from byte `byte_offset` of the caller's GPU buffer of raw bytes for an op
    /// to write: any dtype, fp8 included; no copy. Errors as [`TensorRef::from_cuda_slice`].
    pub fn from_cuda_bytes_mut(
        slice: &'a mut CudaSlice<u8>,
        byte_offset: usize,
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        let size = spec.size_in_bytes()?;
        let range = check_range(spec, byte_offset, size, slice.len(), "bytes")?;
        check_cuda_device(spec, slice.stream(), device)?;
        let storage = if size == 0 {
            None
        } else {
            let bytes = slice
                .try_slice_mut(range)
                .ok_or_else(|| Error::internal("a checked range is within the slice"))?;
            check_borrow_aligned(spec, &bytes.as_view(), byte_offset, device)?;
            Some(CudaMut::Bytes(bytes))
        };
        Ok(TensorMut {
            spec: Cow::Owned(spec.clone()),
            device: Cow::Owned(device.clone()),
            storage: MutStorage::Cuda(storage),
        })
    }

    /// Borrows the caller's host data (exactly `shape`'s element count) for an op to write, on
    /// `device`, which must be the CPU ([`Error::WrongDevice`] otherwise). A `bool` slice is
    /// [`Error::BufferDType`], as in [`TensorMut::from_cuda_slice_mut`].
    pub fn from_host_slice_mut<T: Element>(
        data: &'a mut [T],
        shape: impl Into<Vec<usize>>,
        device: &Device,
    ) -> Result<Self, Error> {
        let spec = TensorSpec::new(shape, T::DTYPE);
        if T::DTYPE == DType::Bool {
            return Err(Error::BufferDType {
                spec: spec.to_string(),
                buffer: T::DTYPE,
                host: true,
            });
        }
        check_host(&spec, data.len(), device)?;
        Ok(TensorMut {
            spec: Cow::Owned(spec),
            device: Cow::Owned(device.clone()),
            storage: MutStorage::Host(host_bytes_mut(data)?),
        })
    }

    /// Borrows the caller's host bytes for an op to write as `spec` (any dtype, fp8 included;
    /// exactly `spec.size_in_bytes()` long) on `device`, which must be the CPU.
    pub fn from_host_bytes_mut(
        bytes: &'a mut [u8],
        spec: &TensorSpec,
        device: &Device,
    ) -> Result<Self, Error> {
        check_host_bytes(spec, bytes.len(), device)?;
        Ok(TensorMut {
            spec: Cow::Owned(spec.clone()),
            device: Cow::Owned(device.clone()),
            storage: MutStorage::Host(bytes),
        })
    }

    /// Shape and dtype.
    pub fn spec(&self) -> &TensorSpec {
        &self.spec
    }

    /// Extent of each dimension, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.spec.shape
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.spec.dtype
    }

    /// The device whose ops write it.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The same memory borrowed for reading, while this borrow lasts.
    pub fn as_tensor_ref(&self) -> TensorRef<'_> {
        let storage = match &self.storage {
            MutStorage::Host(bytes) => RefStorage::Host(bytes),
            MutStorage::Cuda(view) => RefStorage::Cuda(view.as_ref().map(CudaMut::bytes)),
        };
        TensorRef {
            spec: Cow::Borrowed(&self.spec),
            device: Cow::Borrowed(&self.device),
            storage,
        }
    }

    /// A shorter exclusive borrow of the same memory.
    pub fn reborrow(&mut self) -> TensorMut<'_> {
        let storage = match &mut self.storage {
            MutStorage::Host(bytes) => MutStorage::Host(bytes),
            MutStorage::Cuda(view) => {
                MutStorage::Cuda(view.as_mut().map(|v| CudaMut::Bytes(v.bytes_mut())))
            }
        };
        TensorMut {
            spec: Cow::Borrowed(&self.spec),
            device: Cow::Borrowed(&self.device),
            storage,
        }
    }

    /// The GPU bytes, to write (`None` on the CPU and with no elements).
    pub(crate) fn cuda_view_mut(&mut self) -> Option<CudaViewMut<'_, u8>> {
        match &mut self.storage {
            MutStorage::Cuda(Some(view)) => Some(view.bytes_mut()),
            _ => None,
        }
    }

    /// Widened f64 values of a CPU tensor (what an op wrote), or an error.
    pub(crate) fn host_f64(&self) -> Result<Vec<f64>, Error> {
        self.as_tensor_ref().host_f64()
    }

    /// The host bytes of a CPU tensor, to write in place.
    pub(crate) fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.storage {
            MutStorage::Host(bytes) => Some(bytes),
            MutStorage::Cuda(_) => None,
        }
    }

    /// Overwrites a CPU tensor with `values` rounded to its dtype.
    pub(crate) fn set_host_f64(&mut self, values: &[f64]) -> Result<(), Error> {
        let dtype = self.dtype();
        let mut bytes = alloc::host_vec(values.len().saturating_mul(dtype.size_in_bytes()))?;
        convert::encode_f64_into(dtype, values, &mut bytes)
            .map_err(|message| Error::Unrepresentable { dtype, message })?;
        let what = format!("set_host_f64 of {} on {}", self.spec, self.device);
        let host = self
            .host_bytes_mut()
            .ok_or_else(|| Error::internal(&what))?;
        if host.len() != bytes.len() {
            return Err(Error::internal(format!("{what}: {} values", values.len())));
        }
        host.copy_from_slice(&bytes);
        Ok(())
    }
}

impl fmt::Debug for TensorRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorRef({} on {})", self.spec, self.device)
    }
}

impl fmt::Debug for TensorMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorMut({} on {})", self.spec, self.device)
    }
}

/// The same range as `view`, as a new view (cudarc views are not `Clone`).
fn whole<'v>(view: &CudaView<'v, u8>) -> CudaView<'v, u8> {
    view.slice(..)
}

/// `[offset, offset + len)` within a buffer of `available` (`unit`s), or
/// [`Error::BorrowOutOfRange`].
fn check_range(
    spec: &TensorSpec,
    offset: usize,
    len: usize,
    available: usize,
    unit: &'static str,
) -> Result<std::ops::Range<usize>, Error> {
    match offset.checked_add(len) {
        Some(end) if end <= available => Ok(offset..end),
        _ => Err(Error::BorrowOutOfRange {
            spec: spec.to_string(),
            offset,
            needed: len,
            available,
            unit,
        }),
    }
}

/// The kernels' 16-byte accesses need the borrowed range to start 16-byte aligned: refused
/// rather than copied (a copy would not be the caller's memory).
fn check_borrow_aligned(
    spec: &TensorSpec,
    bytes: &CudaView<'_, u8>,
    byte_offset: usize,
    device: &Device,
) -> Result<(), Error> {
    let Some(stream) = device.cuda_stream() else {
        return Ok(());
    };
    let (address, _sync) = bytes.device_ptr(stream);
    if address % 16 != 0 {
        return Err(Error::Misaligned {
            spec: spec.to_string(),
            address,
            byte_offset,
        });
    }
    Ok(())
}

/// A strided layout is contiguous row-major when each dim's stride is the product of the
/// extents inside it; a dim of extent 1 is never stepped along, so its stride does not matter.
fn check_contiguous(shape: &[usize], strides: &[usize]) -> Result<(), Error> {
    let refuse = |reason: String| Error::NotContiguous {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        reason,
    };
    if shape.len() != strides.len() {
        return Err(refuse(format!(
            "{} strides for {} dims",
            strides.len(),
            shape.len()
        )));
    }
    // An empty tensor has no element to step to.
    if shape.contains(&0) {
        return Ok(());
    }
    let mut expected = 1usize;
    for (dim, (&extent, &stride)) in shape.iter().zip(strides).enumerate().rev() {
        if extent != 1 && stride != expected {
            return Err(refuse(format!(
                "dim {dim} (extent {extent}) has stride {stride}, contiguous row-major needs \
                 {expected}; make the tensor contiguous first"
            )));
        }
        expected = expected.saturating_mul(extent);
    }
    Ok(())
}

/// Host data of `len` values for `spec` on `device`: the CPU, and the spec's count.
fn check_host(spec: &TensorSpec, len: usize, device: &Device) -> Result<(), Error> {
    check_cpu(spec, device)?;
    super::check_len(spec, len)
}

/// Host data of `len` bytes for `spec` on `device`: the CPU, and the spec's size.
fn check_host_bytes(spec: &TensorSpec, len: usize, device: &Device) -> Result<(), Error> {
    check_cpu(spec, device)?;
    let size = spec.size_in_bytes()?;
    if len != size {
        return Err(Error::LengthMismatch {
            spec: spec.to_string(),
            unit: "bytes",
            expected: size,
            got: len,
        });
    }
    Ok(())
}

/// Host memory is for CPU devices only: GPU kernels read device memory.
fn check_cpu(spec: &TensorSpec, device: &Device) -> Result<(), Error> {
    if !device.is_cpu() {
        return Err(Error::WrongDevice {
            what: format!("host data for {spec}"),
            reason: format!(
                "it cannot be borrowed on {device}, whose kernels read device memory; copy it \
                 with Tensor::from_slice, or borrow a CudaSlice"
            ),
        });
    }
    Ok(())
}

/// The bytes of host values, without a copy: an `Element` is a plain little-endian number (or
/// a `bool`, one byte 0 or 1), the encoding tileops's host tensors hold.
fn host_bytes<T: Element>(data: &[T]) -> Result<&[u8], Error> {
    check_little_endian()?;
    let len = std::mem::size_of_val(data);
    // SAFETY: `T` is one of the Element types, which have no padding and no invalid bytes to
    // read; the bytes are `data`'s, borrowed for as long as `data` is.
    Ok(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), len) })
}

/// Like [`host_bytes`], writable; `bool` is refused by the caller (not every byte is a bool).
fn host_bytes_mut<T: Element>(data: &mut [T]) -> Result<&mut [u8], Error> {
    check_little_endian()?;
    let len = std::mem::size_of_val(data);
    // SAFETY: as in `host_bytes`; every byte pattern is a valid value of the numeric Element
    // types (bool, the exception, never gets here), and the borrow is exclusive.
    Ok(unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), len) })
}

/// Host tensors hold little-endian bytes: another host's own representation is not that.
fn check_little_endian() -> Result<(), Error> {
    if cfg!(target_endian = "big") {
        return Err(Error::WrongDevice {
            what: "borrowed host data".to_owned(),
            reason: "a big-endian host's values are not tileops's little-endian bytes; copy \
                     them with Tensor::from_slice"
                .to_owned(),
        });
    }
    Ok(())
}

fn decode(dtype: DType, bytes: &[u8], view: &str) -> Result<Vec<f64>, Error> {
    convert::decode_f64(dtype, bytes).unwrap_or_else(|| {
        Err(Error::HostView {
            view: view.to_owned(),
            dtype,
            reason: "the dtype has no exact f64 view".to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use half::bf16;

    use super::*;
    use crate::ops::{Fp8Quant, FusedAddRmsNorm, RmsNorm, Softmax};

    #[test]
    fn host_borrows_hold_the_callers_data() {
        let cpu = Device::cpu();
        let data = [bf16::from_f32(1.5), bf16::from_f32(-2.0), bf16::ONE];
        let x = TensorRef::from_host_slice(&data[1..], [2, 1], &cpu).unwrap();
        assert_eq!(x.spec(), &TensorSpec::new([2, 1], DType::BFloat16));
        assert_eq!((x.shape(), x.dtype()), (&[2, 1][..], DType::BFloat16));
        assert!(x.device().is_cpu());
        assert_eq!(
            x.to_tensor().unwrap().to_vec::<bf16>().unwrap(),
            data[1..].to_vec()
        );
        assert_eq!(format!("{x:?}"), "TensorRef(bfloat16[2, 1] on cpu)");

        let mut out = [0i32; 3];
        let mut y = TensorMut::from_host_slice_mut(&mut out, [3], &cpu).unwrap();
        y.set_host_f64(&[1.0, -2.0, 3.0]).unwrap();
        assert_eq!(y.as_tensor_ref().host_vec::<i32>().unwrap(), vec![1, -2, 3]);
        drop(y);
        assert_eq!(out, [1, -2, 3]);
    }

    #[test]
    fn host_borrows_are_checked() {
        let cpu = Device::cpu();
        let data = [0.0f32; 6];
        let err = TensorRef::from_host_slice(&data, [7], &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::LengthMismatch {
                    expected: 7,
                    got: 6,
                    ..
                }
            ),
            "{err}"
        );
        let err = TensorRef::from_host_slice(&data, [usize::MAX, 2], &cpu).unwrap_err();
        assert!(matches!(err, Error::ShapeOverflow { .. }), "{err}");
        // A bool output could be written with bytes that are not bools.
        let mut flags = [false; 2];
        let err = TensorMut::from_host_slice_mut(&mut flags, [2], &cpu).unwrap_err();
        assert!(
            matches!(err, Error::BufferDType { host: true, .. }),
            "{err}"
        );
        // ... and says so of host memory, with the host constructor to use.
        assert_eq!(
            err.to_string(),
            "a host buffer of bool elements cannot be used as bool[2]; wrap raw bytes instead \
             (from_host_bytes, from_host_bytes_mut)"
        );
        // Reading bools is fine.
        let x = TensorRef::from_host_slice(&flags, [2], &cpu).unwrap();
        assert_eq!(x.dtype(), DType::Bool);
    }

    #[test]
    fn strided_layouts_must_be_contiguous() {
        assert!(check_contiguous(&[2, 3, 4], &[12, 4, 1]).is_ok());
        // Dims of extent 1 are never stepped along: any stride.
        assert!(check_contiguous(&[1, 3, 1, 4], &[7, 4, 0, 1]).is_ok());
        assert!(check_contiguous(&[], &[]).is_ok());
        assert!(check_contiguous(&[2, 0, 3], &[5, 5, 5]).is_ok());
        for (shape, strides) in [
            (&[2, 3][..], &[1, 2][..]),
            (&[2, 3], &[0, 1]),
            (&[2, 3], &[4, 1]),
            (&[6], &[2]),
            (&[2, 3], &[3]),
        ] {
            let err = check_contiguous(shape, strides).unwrap_err();
            assert!(matches!(err, Error::NotContiguous { .. }), "{err}");
            let message = err.to_string();
            assert!(
                message.contains(&format!("{shape:?}"))
                    && message.contains(&format!("{strides:?}")),
                "{message}"
            );
        }
    }

    #[test]
    fn ranges_are_checked_without_overflow() {
        let spec = TensorSpec::new([4], DType::Float32);
        assert_eq!(check_range(&spec, 2, 4, 6, "elements").unwrap(), 2..6);
        let err = check_range(&spec, 3, 4, 6, "elements").unwrap_err();
        assert_eq!(
            err.to_string(),
            "float32[4] borrowed at offset 3 needs elements 3..7 of a buffer of 6 elements"
        );
        assert!(check_range(&spec, usize::MAX, 4, 6, "bytes").is_err());
    }

    #[test]
    fn ops_on_host_borrows_equal_the_owned_path() {
        let cpu = Device::cpu();
        let (rows, n) = (3, 16);
        let x_spec = TensorSpec::new([rows, n], DType::BFloat16);
        let w_spec = TensorSpec::new([n], DType::BFloat16);
        let x = Tensor::random(&x_spec, 1, &cpu).unwrap();
        let w = Tensor::random(&w_spec, 2, &cpu).unwrap();
        let r = Tensor::random(&x_spec, 3, &cpu).unwrap();

        // The caller's host data: the values at an offset inside larger buffers.
        let pad = bf16::from_f32(99.0);
        let inside = |t: &Tensor| {
            let mut v = vec![pad; 5];
            v.extend(t.to_vec::<bf16>().unwrap());
            v.extend([pad; 3]);
            v
        };
        let (xs, ws, rs) = (inside(&x), inside(&w), inside(&r));
        fn borrowed<'v>(v: &'v [bf16], spec: &TensorSpec) -> TensorRef<'v> {
            let len = spec.numel().unwrap();
            TensorRef::from_host_slice(&v[5..5 + len], spec.shape.clone(), &Device::cpu()).unwrap()
        }

        let norm = RmsNorm::new(x_spec.clone(), w_spec.clone(), 1e-6, &cpu).unwrap();
        let want = norm.forward(&x, &w).unwrap().to_vec::<bf16>().unwrap();
        let mut out = vec![pad; rows * n + 2];
        let y = TensorMut::from_host_slice_mut(&mut out[1..=rows * n], [rows, n], &cpu).unwrap();
        norm.forward_into(borrowed(&xs, &x_spec), borrowed(&ws, &w_spec), y)
            .unwrap();
        assert_eq!(out[0], pad);
        assert_eq!(out[rows * n + 1], pad);
        assert_eq!(out[1..=rows * n], want[..]);
        // `forward` of borrowed inputs too.
        let owned = norm
            .forward(borrowed(&xs, &x_spec), borrowed(&ws, &w_spec))
            .unwrap();
        assert_eq!(owned.to_vec::<bf16>().unwrap(), want);
        // And of shared and boxed tensors, as a caller's cache holds them.
        let shared = std::sync::Arc::new(x.try_clone().unwrap());
        let boxed = Box::new(w.try_clone().unwrap());
        let rc = std::rc::Rc::new(w.try_clone().unwrap());
        let via_arc = norm.forward(&shared, &boxed).unwrap();
        assert_eq!(via_arc.to_vec::<bf16>().unwrap(), want);
        assert_eq!(
            norm.forward(&x, &rc).unwrap().to_vec::<bf16>().unwrap(),
            want
        );

        // Two outputs, one of them read back by the CPU backend after it is written.
        let fused =
            FusedAddRmsNorm::new(x_spec.clone(), x_spec.clone(), w_spec.clone(), 1e-6, &cpu)
                .unwrap();
        let (want_y, want_sum) = fused.forward(&x, &r, &w).unwrap();
        let mut y = vec![pad; rows * n];
        let mut sum = vec![pad; rows * n];
        fused
            .forward_into(
                borrowed(&xs, &x_spec),
                borrowed(&rs, &x_spec),
                borrowed(&ws, &w_spec),
                TensorMut::from_host_slice_mut(&mut y, [rows, n], &cpu).unwrap(),
                TensorMut::from_host_slice_mut(&mut sum, [rows, n], &cpu).unwrap(),
            )
            .unwrap();
        assert_eq!(y, want_y.to_vec::<bf16>().unwrap());
        assert_eq!(sum, want_sum.to_vec::<bf16>().unwrap());

        // fp8 codes into the caller's raw bytes, scales into its f32s.
        let quant = Fp8Quant::new(x_spec.clone(), 16, &cpu).unwrap();
        let (want_codes, want_scales) = quant.forward(&x).unwrap();
        let mut codes = vec![0u8; rows * n];
        let mut scales = vec![0f32; quant.scales_spec().numel().unwrap()];
        quant
            .forward_into(
                borrowed(&xs, &x_spec),
                TensorMut::from_host_bytes_mut(&mut codes, want_codes.spec(), &cpu).unwrap(),
                TensorMut::from_host_slice_mut(
                    &mut scales,
                    quant.scales_spec().shape.clone(),
                    &cpu,
                )
                .unwrap(),
            )
            .unwrap();
        assert_eq!(codes, want_codes.to_bytes().unwrap());
        assert_eq!(scales, want_scales.to_vec::<f32>().unwrap());
        // Read back as fp8 through the bytes constructor.
        let again = TensorRef::from_host_bytes(&codes, want_codes.spec(), &cpu).unwrap();
        assert_eq!(
            again.to_tensor().unwrap().to_vec_f64().unwrap(),
            want_codes.to_vec_f64().unwrap()
        );
        let err = TensorRef::from_host_bytes(&codes[1..], want_codes.spec(), &cpu).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { .. }), "{err}");

        // A reborrowed output written twice, and read through `as_tensor_ref` in between.
        let softmax = Softmax::new(w_spec.clone(), -1, &cpu).unwrap();
        let mut probs = vec![pad; n];
        let mut p = TensorMut::from_host_slice_mut(&mut probs, [n], &cpu).unwrap();
        softmax.forward_into(&w, &mut p).unwrap();
        let once = p.as_tensor_ref().to_tensor().unwrap();
        softmax.forward_into(&once, &mut p).unwrap();
        drop(p);
        let twice = softmax
            .forward(&softmax.forward(&w).unwrap())
            .unwrap()
            .to_vec::<bf16>()
            .unwrap();
        assert_eq!(probs, twice);
    }
}
