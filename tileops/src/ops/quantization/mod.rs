//! The `quantization` family of the manifest: float8 quantization with per-group scales.

pub(crate) mod fp8_quant;
pub(crate) mod reference;

pub use fp8_quant::Fp8Quant;

use crate::{Error, Tensor};

/// Dynamic float8_e4m3fn quantization of `x` `[M, K]` in one call, groups of `group_size`
/// elements of a row (0: one scale per row): plans an [`Fp8Quant`] for `x`'s spec on its device
/// and runs it. Returns `(y, scales)`: the codes `[M, K]` and float32 scales `[M, K / group]`,
/// with `y * scale` dequantizing.
///
/// ```
/// use tileops::{Device, Tensor, ops};
///
/// let cpu = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, -2.0, 0.5, 0.0], [1, 4], &cpu)?;
/// let (y, scales) = ops::fp8_quant(&x, 2)?;
/// assert_eq!(scales.to_vec_f32()?, vec![2.0 / 448.0, 0.5 / 448.0]);
/// assert_eq!(y.to_vec_f32()?, vec![224.0, -448.0, 448.0, 0.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn fp8_quant(x: &Tensor, group_size: usize) -> Result<(Tensor, Tensor), Error> {
    Fp8Quant::new(x.spec().clone(), group_size, x.device())?.forward(x)
}
