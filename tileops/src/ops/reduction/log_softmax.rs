//! `log_softmax`: `(x - max) - log(sum(exp(x - max)))` along one dimension. The plan, API,
//! launch geometry and kernels are softmax's (`softmax_op!` and `SoftmaxPlan` in `softmax.rs`,
//! `softmax.cu`), with the log output step.

use super::reference;
use super::softmax::softmax_op;
use crate::{Error, Tensor};

softmax_op!(
    /// log_softmax along `dim`, as `torch.nn.functional.log_softmax(x, dim)`, in float32,
    /// float16 or bfloat16, accumulating in f32 on the GPU (f64 on the CPU). The last dim is the
    /// fast path.
    ///
    /// A row that holds a NaN or `+inf`, or is all `-inf`, comes out all NaN, as in PyTorch.
    ///
    /// ```
    /// use tileops::ops::LogSoftmax;
    /// use tileops::{DType, Device, Tensor, TensorSpec};
    ///
    /// let device = Device::best();
    /// let spec = TensorSpec::new([4, 1000], DType::BFloat16);
    /// let log_softmax = LogSoftmax::new(spec.clone(), -1, &device)?;
    /// let x = Tensor::random(&spec, 0, &device)?;
    /// let y = log_softmax.forward(&x)?;
    /// let row: f32 = y.to_vec_f32()?[..1000].iter().map(|v| v.exp()).sum();
    /// assert!((row - 1.0).abs() < 0.05);
    ///
    /// // Plans are checked up front: dim out of range, unsupported dtypes...
    /// assert!(LogSoftmax::new(spec.clone(), 2, &device).is_err());
    /// assert!(LogSoftmax::new(TensorSpec::new([4], DType::Int32), 0, &device).is_err());
    /// // ...and inputs against the plan.
    /// let other = Tensor::random(&TensorSpec::new([4, 999], DType::BFloat16), 0, &device)?;
    /// assert!(log_softmax.forward(&other).is_err());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    LogSoftmax,
    "log_softmax",
    reference::log_softmax
);

// Unit tests of the shared plan, for both ops, are in `softmax.rs`.

/// log_softmax of `x` along `dim` (Python-style: `-1` is the last), in one call: plans a
/// [`LogSoftmax`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 1.0], [2], &device)?;
/// let y = tileops::ops::log_softmax(&x, 0)?.to_vec_f32()?;
/// assert!(y.iter().all(|v| (v + 2f32.ln()).abs() < 1e-6));
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn log_softmax(x: &Tensor, dim: i64) -> Result<Tensor, Error> {
    LogSoftmax::new(x.spec().clone(), dim, x.device())?.forward(x)
}
