//! The `reduction` family of the manifest: softmax, log_softmax and the reductions over dims.

mod log_softmax;
mod reduce;
pub(crate) mod reference;
mod softmax;

pub use log_softmax::LogSoftmax;
pub use reduce::{Amax, Logsumexp, Mean, ReduceDim, Sum};
pub use softmax::Softmax;

use crate::{Error, Tensor};

/// Softmax of `x` along `dim` (Python-style: `-1` is the last), in one call: plans a [`Softmax`]
/// for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 0.0, 5.0, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::softmax(&x, -1)?.to_vec_f32()?, vec![0.5; 4]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn softmax(x: &Tensor, dim: i64) -> Result<Tensor, Error> {
    Softmax::new(x.device(), x.spec().clone(), dim)?.forward(x)
}

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
    LogSoftmax::new(x.device(), x.spec().clone(), dim)?.forward(x)
}

/// `torch.sum(x, dim, keepdim)` in one call: plans a [`Sum`] for `x`'s spec on its device and
/// runs it. `dim` is one dim or a list of them.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &device)?;
/// assert_eq!(tileops::ops::sum(&x, -1, false)?.to_vec_f32()?, vec![6.0, 15.0]);
/// assert_eq!(tileops::ops::sum(&x, [0, 1], true)?.shape(), &[1, 1]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn sum(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Sum::new(x.device(), x.spec().clone(), dim, keepdim)?.forward(x)
}

/// `torch.mean(x, dim, keepdim)` in one call: plans a [`Mean`] for `x`'s spec on its device and
/// runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::mean(&x, 0, false)?.to_vec_f32()?, vec![2.0, 3.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn mean(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Mean::new(x.device(), x.spec().clone(), dim, keepdim)?.forward(x)
}

/// `torch.amax(x, dim, keepdim)` in one call: plans an [`Amax`] for `x`'s spec on its device and
/// runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, -2.0, 0.5, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::amax(&x, 1, false)?.to_vec_f32()?, vec![1.0, 5.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn amax(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Amax::new(x.device(), x.spec().clone(), dim, keepdim)?.forward(x)
}

/// `torch.logsumexp(x, dim, keepdim)` in one call: plans a [`Logsumexp`] for `x`'s spec on its
/// device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 0.0], [2], &device)?;
/// let y = tileops::ops::logsumexp(&x, 0, false)?.to_vec_f32()?;
/// assert!((y[0] - 2f32.ln()).abs() < 1e-7);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn logsumexp(x: &Tensor, dim: impl Into<ReduceDim>, keepdim: bool) -> Result<Tensor, Error> {
    Logsumexp::new(x.device(), x.spec().clone(), dim, keepdim)?.forward(x)
}
