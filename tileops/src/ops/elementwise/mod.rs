//! The `elementwise` family of the manifest: activations and the gated `silu_and_mul`.

mod activation;
pub(crate) mod reference;
mod silu_and_mul;

pub use activation::{Gelu, GeluApproximate, Neg, Relu, Sigmoid, Silu};
pub use silu_and_mul::SiluAndMul;

use crate::{Error, Tensor};

/// GELU of `x` (exact or the tanh approximation) in one call: plans a [`Gelu`] for `x`'s spec on
/// its device and runs it.
///
/// ```
/// use tileops::ops::GeluApproximate;
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 1.0], [2], &device)?;
/// let y = tileops::ops::gelu(&x, GeluApproximate::None)?.to_vec_f32()?;
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 0.841_344_7).abs() < 1e-6);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn gelu(x: &Tensor, approximate: GeluApproximate) -> Result<Tensor, Error> {
    Gelu::new(x.spec().clone(), approximate, x.device())?.forward(x)
}

/// `max(x, 0)` in one call: plans a [`Relu`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[-1.0, 0.5], [2], &device)?;
/// assert_eq!(tileops::ops::relu(&x)?.to_vec_f32()?, vec![0.0, 0.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn relu(x: &Tensor) -> Result<Tensor, Error> {
    Relu::new(x.spec().clone(), x.device())?.forward(x)
}

/// `-x` in one call: plans a [`Neg`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[-1.0, 0.5], [2], &device)?;
/// assert_eq!(tileops::ops::neg(&x)?.to_vec_f32()?, vec![1.0, -0.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn neg(x: &Tensor) -> Result<Tensor, Error> {
    Neg::new(x.spec().clone(), x.device())?.forward(x)
}

/// `1 / (1 + exp(-x))` in one call: plans a [`Sigmoid`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, f32::NEG_INFINITY], [2], &device)?;
/// assert_eq!(tileops::ops::sigmoid(&x)?.to_vec_f32()?, vec![0.5, 0.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn sigmoid(x: &Tensor) -> Result<Tensor, Error> {
    Sigmoid::new(x.spec().clone(), x.device())?.forward(x)
}

/// `x * sigmoid(x)` in one call: plans a [`Silu`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 20.0], [2], &device)?;
/// assert_eq!(tileops::ops::silu(&x)?.to_vec_f32()?, vec![0.0, 20.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn silu(x: &Tensor) -> Result<Tensor, Error> {
    Silu::new(x.spec().clone(), x.device())?.forward(x)
}

/// SwiGLU of `x` (`[..., 2N]`: gate then up) in one call, `silu(gate) * up` of shape `[..., N]`:
/// plans a [`SiluAndMul`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 30.0, 5.0, 2.0], [1, 4], &device)?;
/// assert_eq!(tileops::ops::silu_and_mul(&x)?.to_vec_f32()?, vec![0.0, 60.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn silu_and_mul(x: &Tensor) -> Result<Tensor, Error> {
    SiluAndMul::new(x.spec().clone(), x.device())?.forward(x)
}
