//! `log_softmax`: `(x - max) - log(sum(exp(x - max)))` along one dimension. The plan, launch
//! geometry and kernels are softmax's (`SoftmaxPlan` in `softmax.rs`, `softmax.cu`), with the
//! log output step.

use super::softmax::{Output, SoftmaxPlan};
use crate::registry::RoofKey;
use crate::{Device, Error, Tensor, TensorSpec};

/// log_softmax along `dim`, as `torch.nn.functional.log_softmax(x, dim)`, in float32, float16 or
/// bfloat16, accumulating in f32 on the GPU (f64 on the CPU). The last dim is the fast path.
///
/// A row that holds a NaN or `+inf`, or is all `-inf`, comes out all NaN, as in PyTorch.
///
/// ```
/// use tileops::ops::LogSoftmax;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let spec = TensorSpec::new([4, 1000], DType::BFloat16);
/// let log_softmax = LogSoftmax::new(&device, spec.clone(), -1)?;
/// let x = Tensor::random(&spec, 0, &device)?;
/// let y = log_softmax.forward(&x)?;
/// let row: f32 = y.to_vec_f32()?[..1000].iter().map(|v| v.exp()).sum();
/// assert!((row - 1.0).abs() < 0.05);
///
/// // Plans are checked up front: dim out of range, unsupported dtypes...
/// assert!(LogSoftmax::new(&device, spec.clone(), 2).is_err());
/// assert!(LogSoftmax::new(&device, TensorSpec::new([4], DType::Int32), 0).is_err());
/// // ...and inputs against the plan.
/// let other = Tensor::random(&TensorSpec::new([4, 999], DType::BFloat16), 0, &device)?;
/// assert!(log_softmax.forward(&other).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("log_softmax")]
#[derive(Debug, Clone)]
pub struct LogSoftmax {
    /// The input the op is planned for (the manifest's formulas read its shape).
    x: TensorSpec,
    /// The dimension, as given (negative counts from the end).
    dim: i64,
    /// Validation, geometry and launch, shared with softmax.
    plan: SoftmaxPlan,
}

impl LogSoftmax {
    /// The roof an optimal log_softmax is priced against: it is memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a log_softmax of inputs like `x` along `dim` (Python-style: `-1` is the last) on
    /// `device`.
    ///
    /// Errors when `x` has rank 0, no elements, or a dtype other than float32, float16 or
    /// bfloat16, or when `dim` is outside `[-rank, rank)`.
    pub fn new(device: &Device, x: TensorSpec, dim: i64) -> Result<LogSoftmax, Error> {
        let plan = SoftmaxPlan::new(Output::LogSoftmax, device, &x, dim)?;
        Ok(LogSoftmax { x, dim, plan })
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The log_softmax dimension, as given to [`LogSoftmax::new`].
    pub fn dim(&self) -> i64 {
        self.dim
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        self.plan.device()
    }

    /// log_softmax of `x`, into a new tensor. `x` must match the plan (spec and device).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        self.plan.forward(&self.x, x)
    }

    /// log_softmax of `x`, written into `y` (same spec and device as `x`). On a GPU the call is
    /// asynchronous: copies and [`Device::synchronize`] wait for it.
    pub fn forward_into(&self, x: &Tensor, y: &mut Tensor) -> Result<(), Error> {
        self.plan.forward_into(&self.x, x, y)
    }
}

// Unit tests of the shared plan, for both outputs, are in `softmax.rs`.
