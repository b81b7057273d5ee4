//! The crate-wide error: CUDA setup, kernel compilation and launch, and input validation.

/// Everything that can go wrong in tileops outside a roofline formula.
///
/// Validation errors name the op, the field and the offending value, and say what would be
/// accepted; CUDA errors say what was looked for and how to fix the setup.
///
/// ```
/// use tileops::ops::Softmax;
/// use tileops::{DType, Device, Error, TensorSpec};
///
/// let err = Softmax::new(TensorSpec::new([4, 8], DType::Float32), 2, &Device::cpu()).unwrap_err();
/// assert!(matches!(err, Error::InvalidParam { op: "softmax", field: "dim", .. }));
/// assert!(err.to_string().contains("dim"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be loaded.
    #[error(
        "CUDA driver library not found ({detail}); install the NVIDIA driver, or use Device::cpu()"
    )]
    DriverMissing {
        /// What was tried.
        detail: String,
    },

    /// The driver loaded, but there is no usable GPU with that ordinal.
    #[error("no usable CUDA device: {reason}")]
    NoDevice {
        /// Why (driver error, device count, ordinal out of range).
        reason: String,
    },

    /// A CUDA driver call failed (context creation, allocation, copy, synchronisation).
    #[error("CUDA driver call failed while {context}: {source}")]
    Driver {
        /// What tileops was doing.
        context: String,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// A cuBLAS or cuBLASLt call failed (handle creation, descriptors, the matrix product).
    #[error("cuBLAS call failed while {context}: {source}")]
    Blas {
        /// What tileops was doing.
        context: String,
        /// The library's error.
        #[source]
        source: BlasError,
    },

    /// NVRTC (`libnvrtc.so`) or the CUDA headers it needs could not be found in the search
    /// order of [`libraries::search_order`](crate::libraries::search_order).
    #[error(
        "NVRTC not usable: {detail}. Searched, in order: {searched}. Set TILEOPS_CUDA_PATH (or \
         CUDA_HOME) to a CUDA 13 toolkit, or TILEOPS_CUDA_WHEELS to the directory \
         `scripts/install-cuda-wheels.sh` installs the pinned wheels into (`.cuda-wheels` in the \
         repository); the current directory is never searched"
    )]
    NvrtcMissing {
        /// What is missing.
        detail: String,
        /// The search order, step by step (`1. TILEOPS_CUDA_PATH (unset); 2. ...`).
        searched: String,
    },

    /// cuBLAS or cuBLASLt (`libcublas.so.13`, `libcublasLt.so.13`) could not be found in the
    /// search order of [`libraries::search_order`](crate::libraries::search_order).
    #[error(
        "cuBLAS not usable: {detail}. Searched, in order: {searched}. Set TILEOPS_CUDA_PATH (or \
         CUDA_HOME) to a CUDA 13 toolkit, or TILEOPS_CUDA_WHEELS to a directory holding the \
         nvidia-cublas wheel; the current directory is never searched"
    )]
    CublasMissing {
        /// What is missing.
        detail: String,
        /// The search order, step by step.
        searched: String,
    },

    /// NVRTC rejected a kernel.
    #[error("NVRTC failed to compile kernel `{kernel}` for {arch}: {message}\n{log}")]
    Compile {
        /// The kernel file (`softmax.cu`).
        kernel: String,
        /// The target (`sm_90`, `compute_90`).
        arch: String,
        /// NVRTC's status.
        message: String,
        /// The program log.
        log: String,
        /// NVRTC's error, when the failure came from an NVRTC call.
        #[source]
        source: Option<cudarc::nvrtc::result::NvrtcError>,
    },

    /// Loading a compiled module or launching a kernel failed, or tileops refused the launch
    /// (a misaligned buffer, a grid too large).
    #[error("kernel `{kernel}` failed: {message}")]
    Launch {
        /// The entry point (`softmax_rows_v4_bf16`).
        kernel: String,
        /// What went wrong.
        message: String,
        /// The driver's error, when the driver refused.
        #[source]
        source: Option<cudarc::driver::DriverError>,
    },

    /// A shape or rank that an op does not accept.
    #[error("{op}: {field} has shape {shape:?}: {reason}")]
    InvalidShape {
        /// The op (`softmax`).
        op: &'static str,
        /// The input or output (`x`).
        field: &'static str,
        /// The offending shape.
        shape: Vec<usize>,
        /// What is accepted.
        reason: String,
    },

    /// A dtype that an op does not support.
    #[error("{op}: {field} has dtype {value}, which is not supported; supported: {supported}")]
    InvalidDType {
        /// The op.
        op: &'static str,
        /// The input.
        field: &'static str,
        /// The offending dtype.
        value: crate::DType,
        /// The dtypes the op accepts.
        supported: String,
    },

    /// A parameter value out of range.
    #[error("{op}: {field} = {value} is invalid: {reason}")]
    InvalidParam {
        /// The op.
        op: &'static str,
        /// The parameter (`dim`, `eps`).
        field: &'static str,
        /// The offending value.
        value: String,
        /// What is accepted.
        reason: String,
    },

    /// A tensor passed to `forward` that does not match what the op was planned for.
    #[error("{op}: {field} is {actual}, but the op was planned for {expected}")]
    InputMismatch {
        /// The op.
        op: &'static str,
        /// The input or output.
        field: &'static str,
        /// What the plan expects (`bfloat16[2048, 4096] on cuda:0`).
        expected: String,
        /// What was passed.
        actual: String,
    },

    /// A shape whose element count, or byte size in its dtype, does not fit in `usize`.
    ///
    /// ```
    /// use tileops::{DType, Error, TensorSpec};
    /// let err = TensorSpec::new([1 << 32, 1 << 32], DType::Float32).numel().unwrap_err();
    /// assert!(matches!(err, Error::ShapeOverflow { what: "element count", .. }), "{err}");
    /// ```
    #[error("{dtype}{shape:?} is too large: its {what} overflows usize")]
    ShapeOverflow {
        /// The shape.
        shape: Vec<usize>,
        /// Its dtype.
        dtype: crate::DType,
        /// `"element count"` or `"byte size"`.
        what: &'static str,
    },

    /// An allocation that the host or the GPU could not make: reported, never aborted.
    ///
    /// On the host, a request larger than the machine's RAM plus swap is refused before the
    /// allocator sees it (under Linux's overcommit it could otherwise succeed and then be killed
    /// while being filled); a smaller one is refused when the allocator refuses it.
    ///
    /// ```
    /// use tileops::{DType, Device, Error, Tensor, TensorSpec};
    /// let huge = TensorSpec::new([1 << 38], DType::Float32); // 1 TiB
    /// let err = Tensor::zeros(&huge, &Device::cpu()).unwrap_err();
    /// assert!(matches!(err, Error::OutOfMemory { bytes: 1_099_511_627_776, .. }), "{err}");
    /// ```
    #[error("out of memory: {bytes} bytes could not be allocated on {device}")]
    OutOfMemory {
        /// The size of the allocation.
        bytes: usize,
        /// Where: `cpu`, or the GPU (`cuda:0 (NVIDIA H200, sm_90)`).
        device: String,
    },

    /// A caller's GPU buffer whose byte length is not the size of the spec it was wrapped as
    /// ([`Tensor::from_cuda_slice`](crate::Tensor::from_cuda_slice)).
    ///
    /// ```
    /// # use tileops::Error;
    /// let err = Error::BufferMismatch { spec: "float32[2, 3]".into(), expected_bytes: 24, got_bytes: 20 };
    /// assert_eq!(err.to_string(), "a GPU buffer of 20 bytes cannot hold float32[2, 3], which is 24 bytes");
    /// ```
    #[error(
        "a GPU buffer of {got_bytes} bytes cannot hold {spec}, which is {expected_bytes} bytes"
    )]
    BufferMismatch {
        /// The spec the buffer was to hold (`bfloat16[4, 8]`).
        spec: String,
        /// Its size, [`TensorSpec::size_in_bytes`](crate::TensorSpec::size_in_bytes).
        expected_bytes: usize,
        /// The buffer's length in bytes.
        got_bytes: usize,
    },

    /// A typed buffer whose element type is not the dtype it was to be used as (a
    /// `CudaSlice<f32>` wrapped as bfloat16, a bfloat16 tensor viewed as `f32`, a `&mut [bool]`
    /// for an op to write), in GPU or host memory.
    ///
    /// ```
    /// # use tileops::{DType, Error};
    /// let err = Error::BufferDType { spec: "bool[4]".into(), buffer: DType::Bool, host: true };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "a host buffer of bool elements cannot be used as bool[4]; wrap raw bytes instead \
    ///      (from_host_bytes, from_host_bytes_mut)"
    /// );
    /// ```
    #[error(
        "a {} buffer of {buffer} elements cannot be used as {spec}; wrap raw bytes instead ({})",
        if *.host { "host" } else { "GPU" },
        if *.host { "from_host_bytes, from_host_bytes_mut" } else { "from_cuda_bytes, from_cuda_bytes_mut" }
    )]
    BufferDType {
        /// The tensor's spec (`bfloat16[4, 8]`).
        spec: String,
        /// The dtype of the buffer's element type.
        buffer: crate::DType,
        /// Whether the buffer is the caller's host memory (else GPU memory).
        host: bool,
    },

    /// A stream or buffer that belongs to another CUDA context (or GPU) than the one it is used
    /// with: its memory or its work would not be valid there.
    #[error("{what} belongs to {got}, but is used with {expected}")]
    WrongContext {
        /// What was passed (`the stream`, `the buffer`).
        what: String,
        /// The context or device it must belong to.
        expected: String,
        /// The one it belongs to.
        got: String,
    },

    /// An op's `run` (the bench harness's entry) given the wrong number of tensors for the
    /// manifest signature.
    ///
    /// ```
    /// # use tileops::Error;
    /// let err = Error::Arity { op: "rms_norm", expected: 2, got: 1 };
    /// assert_eq!(err.to_string(), "rms_norm takes 2 inputs, 1 given");
    /// ```
    #[error("{op} takes {expected} inputs, {got} given")]
    Arity {
        /// The op.
        op: &'static str,
        /// How many inputs its manifest signature declares.
        expected: usize,
        /// How many were passed.
        got: usize,
    },

    /// A tensor on a GPU device without a device buffer (a tensor whose buffer was moved out).
    #[error("{op}: {field} is on a GPU but has no device buffer")]
    MissingBuffer {
        /// The op.
        op: &'static str,
        /// The input or output.
        field: &'static str,
    },

    /// Data whose length does not match the spec it is to fill.
    ///
    /// ```
    /// use tileops::{DType, Device, Error, Tensor};
    /// let err = Tensor::from_f32_slice(&[1.0, 2.0], [3], &Device::cpu()).unwrap_err();
    /// assert!(matches!(err, Error::LengthMismatch { expected: 3, got: 2, .. }), "{err}");
    /// ```
    #[error("{got} {unit} given for {spec}, which needs {expected}")]
    LengthMismatch {
        /// The spec to fill (`float32[3]`).
        spec: String,
        /// What was counted: `bytes` or `values`.
        unit: &'static str,
        /// How many the spec needs.
        expected: usize,
        /// How many were given.
        got: usize,
    },

    /// A host copy that would lose information or does not exist for the tensor's dtype
    /// (`to_vec_f32()` of a float64 tensor).
    #[error("{view} of a {dtype} tensor: {reason}")]
    HostView {
        /// The method (`to_vec_f32()`).
        view: String,
        /// The tensor's dtype.
        dtype: crate::DType,
        /// Why not, and what to use instead.
        reason: String,
    },

    /// cuBLAS could not be set up for a device: the first attempt's failure, kept (the handles are
    /// created once per device and shared, so the library's error itself is not).
    #[error("cuBLAS could not be set up while {context}: {message}")]
    BlasInit {
        /// What tileops was doing.
        context: String,
        /// The first attempt's error.
        message: String,
    },

    /// A value that the dtype cannot hold exactly where exactness is required (an integer dtype
    /// given a fraction or an out-of-range value, a bool given 2).
    #[error("a value cannot be stored as {dtype}: {message}")]
    Unrepresentable {
        /// The dtype.
        dtype: crate::DType,
        /// Which value, and why.
        message: String,
    },

    /// A tensor used where its device or buffer does not fit: a CPU tensor asked for its GPU
    /// buffer, a GPU buffer wrapped on a CPU device.
    #[error("{what}: {reason}")]
    WrongDevice {
        /// The tensor or buffer (`float32[4] on cpu`).
        what: String,
        /// Why it cannot be used so, and what to do instead.
        reason: String,
    },

    /// A borrowed tensor ([`TensorRef`](crate::TensorRef), [`TensorMut`](crate::TensorMut))
    /// that would reach past the end of the caller's buffer.
    ///
    /// ```
    /// use tileops::{Device, Error, TensorRef};
    /// let data = [0.0f32; 8];
    /// let err = TensorRef::from_host_slice(&data, [3, 3], &Device::cpu()).unwrap_err();
    /// assert!(matches!(err, Error::LengthMismatch { .. }), "{err}");
    /// let err = Error::BorrowOutOfRange {
    ///     spec: "float32[4]".into(), offset: 6, needed: 4, available: 8, unit: "elements",
    /// };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "float32[4] borrowed at offset 6 needs elements 6..10 of a buffer of 8 elements"
    /// );
    /// ```
    #[error(
        "{spec} borrowed at offset {offset} needs {unit} {offset}..{} of a buffer of {available} {unit}",
        offset.saturating_add(*needed)
    )]
    BorrowOutOfRange {
        /// The spec borrowed (`float32[4, 8]`).
        spec: String,
        /// Where it starts in the buffer, in `unit`s.
        offset: usize,
        /// How many `unit`s it spans.
        needed: usize,
        /// The buffer's length in `unit`s.
        available: usize,
        /// `elements` (a typed buffer) or `bytes`.
        unit: &'static str,
    },

    /// A borrowed GPU tensor that does not start 16-byte aligned: tileops's kernels read and
    /// write 16 bytes at a time from a tensor's base. Refused rather than copied, since a copy
    /// would not be the caller's memory.
    #[error(
        "{spec} borrowed at byte offset {byte_offset} starts at address {address:#x}, which is \
         not 16-byte aligned as tileops's kernels need; borrow at an offset whose address is a \
         multiple of 16, or copy the data into a Tensor"
    )]
    Misaligned {
        /// The spec borrowed.
        spec: String,
        /// The device address it would start at.
        address: u64,
        /// Its offset in bytes into the caller's buffer.
        byte_offset: usize,
    },

    /// A strided layout that is not contiguous row-major (a transposed or broadcast view, as
    /// candle's `Layout` can describe): tileops's kernels read contiguous tensors only.
    ///
    /// ```
    /// # use tileops::Error;
    /// let err = Error::NotContiguous {
    ///     shape: vec![2, 3], strides: vec![1, 2], reason: "dim 1 (extent 3) has stride 2".into(),
    /// };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "a layout of shape [2, 3] with strides [1, 2] is not contiguous row-major: dim 1 (extent 3) has stride 2"
    /// );
    /// ```
    #[error(
        "a layout of shape {shape:?} with strides {strides:?} is not contiguous row-major: {reason}"
    )]
    NotContiguous {
        /// The extents, outermost first.
        shape: Vec<usize>,
        /// The strides, in elements.
        strides: Vec<usize>,
        /// Which dim breaks it, and what to do.
        reason: String,
    },

    /// A state tileops's own code should make impossible: a bug, reported rather than panicking.
    #[error("internal error in tileops (please report): {0}")]
    Internal(String),

    /// An op's roofline could not be computed: a manifest formula failed on the op's shapes and
    /// params. It converts with `?`, so one function returning [`Error`] can plan an op, price it
    /// with `eval_roofline()` and run it; the message is the roofline error's own.
    ///
    /// ```
    /// use tileops::{Error, RooflineError};
    ///
    /// fn priced() -> Result<u64, Error> {
    ///     let roofline: Result<tileops::Roofline, RooflineError> =
    ///         Err(RooflineError::func("attention", "window larger than the sequence"));
    ///     Ok(roofline?.flops)
    /// }
    /// let err = priced().unwrap_err();
    /// assert!(matches!(&err, Error::Roofline(e) if e.op() == "attention"));
    /// assert_eq!(err.to_string(), "attention: window larger than the sequence");
    /// ```
    #[error(transparent)]
    Roofline(#[from] crate::roofline::RooflineError),
}

/// The error of a cuBLAS or cuBLASLt call ([`Error::Blas`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlasError {
    /// cuBLAS's status.
    #[error(transparent)]
    Cublas(#[from] cudarc::cublas::result::CublasError),
    /// cuBLASLt's status.
    #[error(transparent)]
    CublasLt(#[from] cudarc::cublaslt::result::CublasError),
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failed driver call, with what the caller was doing (for code that drives the GPU beside
    /// tileops's ops, such as the bench crate's timers).
    ///
    /// ```
    /// use tileops::Error;
    /// use tileops::cudarc::driver::{DriverError, sys::CUresult};
    /// let err = Error::driver("creating an event", DriverError(CUresult::CUDA_ERROR_INVALID_VALUE));
    /// // (Displaying the driver's error asks the driver for its text: not done here, on a machine
    /// // that may have none.)
    /// assert!(matches!(&err, Error::Driver { context, .. } if context == "creating an event"));
    /// ```
    pub fn driver(context: impl Into<String>, source: cudarc::driver::DriverError) -> Self {
        Error::Driver {
            context: context.into(),
            source,
        }
    }

    /// A failed cuBLAS or cuBLASLt call, with what the caller was doing.
    pub fn blas(context: impl Into<String>, source: impl Into<BlasError>) -> Self {
        Error::Blas {
            context: context.into(),
            source: source.into(),
        }
    }

    /// A state tileops's own code (or the tools built on it) should make impossible.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// A failed driver call that allocated `bytes` on `device`: [`Error::OutOfMemory`] when the
    /// driver says so, else [`Error::Driver`].
    pub fn device_alloc(
        context: impl Into<String>,
        bytes: usize,
        device: impl std::fmt::Display,
        err: cudarc::driver::DriverError,
    ) -> Self {
        use cudarc::driver::sys::CUresult;
        if err.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Error::OutOfMemory {
                bytes,
                device: device.to_string(),
            };
        }
        Error::driver(context, err)
    }

    /// A launch or module load of `kernel` that the driver refused.
    pub fn launch(kernel: impl Into<String>, source: cudarc::driver::DriverError) -> Self {
        Error::Launch {
            kernel: kernel.into(),
            message: source.to_string(),
            source: Some(source),
        }
    }

    /// A launch of `kernel` that tileops refuses before the driver sees it.
    pub(crate) fn launch_refused(kernel: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Launch {
            kernel: kernel.into(),
            message: message.into(),
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Softmax;
    use crate::roofline::{EvalError, RooflineError};
    use crate::{DType, Device, TensorSpec};

    /// Plans a softmax and prices it in one function returning tileops's `Result`, as the README's
    /// "Using an op" does; `fail` substitutes a formula failure for the roofline.
    fn plan_and_price(fail: bool) -> Result<u64> {
        let op = Softmax::new(TensorSpec::new([4, 8], DType::Float32), -1, &Device::cpu())?;
        let roofline = if fail {
            Err(RooflineError::evaluation(
                "softmax",
                "flops",
                "5 * M * N",
                EvalError::new("ZeroDivisionError: division by zero"),
            ))
        } else {
            op.eval_roofline()
        };
        Ok(roofline?.flops)
    }

    #[test]
    fn a_roofline_error_converts_with_the_question_mark_and_keeps_its_message() {
        assert_eq!(plan_and_price(false).unwrap(), 5 * 4 * 8);
        let err = plan_and_price(true).unwrap_err();
        let Error::Roofline(inner) = &err else {
            panic!("not Error::Roofline: {err:?}");
        };
        assert_eq!(inner.op(), "softmax");
        // Transparent: the message is the roofline error's, with nothing wrapped around it.
        assert_eq!(
            err.to_string(),
            "softmax: evaluating `flops` = `5 * M * N` failed: ZeroDivisionError: division by zero"
        );
    }
}
