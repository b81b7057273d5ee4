//! The `normalization` family of the manifest: norms over the last dimension.

mod fused_add_rms_norm;
mod layer_norm;
pub(crate) mod reference;
mod rms_norm;
mod rows;

pub use fused_add_rms_norm::FusedAddRmsNorm;
pub use layer_norm::LayerNorm;
pub use rms_norm::RmsNorm;

use crate::{Error, Tensor};

/// RMSNorm of `x` over its last dim with `weight` (`[N]`), in one call: plans a [`RmsNorm`] for
/// the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[3.0, 4.0], [1, 2], &device)?;
/// let weight = Tensor::full(&TensorSpec::new([2], DType::Float32), 1.0, &device)?;
/// let y = tileops::ops::rms_norm(&x, &weight, 0.0)?.to_vec_f32()?;
/// let r = 12.5f32.sqrt();
/// assert_eq!(y, vec![3.0 / r, 4.0 / r]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor, Error> {
    RmsNorm::new(x.device(), x.spec().clone(), weight.spec().clone(), eps)?.forward(x, weight)
}

/// LayerNorm of `x` over its last dim with `weight` and `bias` (each `[N]`), in one call: plans
/// a [`LayerNorm`] for the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let p = TensorSpec::new([2], DType::Float32);
/// let x = Tensor::from_f32_slice(&[1.0, 3.0], [1, 2], &device)?;
/// let weight = Tensor::full(&p, 2.0, &device)?;
/// let bias = Tensor::full(&p, 0.5, &device)?;
/// let y = tileops::ops::layer_norm(&x, &weight, &bias, 0.0)?.to_vec_f32()?;
/// assert_eq!(y, vec![-1.5, 2.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor, Error> {
    let spec = |t: &Tensor| t.spec().clone();
    LayerNorm::new(x.device(), spec(x), spec(weight), spec(bias), eps)?.forward(x, weight, bias)
}

/// The residual add fused with RMSNorm, in one call: `(y, residual_out)` with
/// `residual_out = x + residual` and `y = rms_norm(residual_out) * weight`; plans a
/// [`FusedAddRmsNorm`] for the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 3.0], [1, 2], &device)?;
/// let residual = Tensor::from_f32_slice(&[2.0, 1.0], [1, 2], &device)?;
/// let weight = Tensor::full(&TensorSpec::new([2], DType::Float32), 1.0, &device)?;
/// let (y, residual_out) = tileops::ops::fused_add_rms_norm(&x, &residual, &weight, 0.0)?;
/// assert_eq!(residual_out.to_vec_f32()?, vec![3.0, 4.0]);
/// let r = 12.5f32.sqrt();
/// assert_eq!(y.to_vec_f32()?, vec![3.0 / r, 4.0 / r]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn fused_add_rms_norm(
    x: &Tensor,
    residual: &Tensor,
    weight: &Tensor,
    eps: f64,
) -> Result<(Tensor, Tensor), Error> {
    let spec = |t: &Tensor| t.spec().clone();
    FusedAddRmsNorm::new(x.device(), spec(x), spec(residual), spec(weight), eps)?
        .forward(x, residual, weight)
}
