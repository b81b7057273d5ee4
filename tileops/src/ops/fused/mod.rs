//! The `fused` family of the manifest: several ops in one kernel, one pass.

mod qk_norm_rope_fp8;
pub(crate) mod reference;

pub use qk_norm_rope_fp8::{QkNormRopeFp8, QkNormRopeFp8Builder, QkNormRopeFp8Output};

use crate::{Error, Tensor};

/// QK-norm + RoPE + fp8 in one call: plans a [`QkNormRopeFp8`] for the tensors' specs on `q`'s
/// device (norm epsilon `eps`) and runs it. Build the plan once with
/// [`QkNormRopeFp8::builder`] when the same shapes run repeatedly.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec, ops};
///
/// let cpu = Device::cpu();
/// let bf16 = |shape: &[usize]| TensorSpec::new(shape, DType::BFloat16);
/// let q = Tensor::random(&bf16(&[2, 4, 128]), 1, &cpu)?;
/// let k = Tensor::random(&bf16(&[2, 1, 128]), 2, &cpu)?;
/// let ones = Tensor::full(&bf16(&[128]), 1.0, &cpu)?;
/// let positions = Tensor::from_slice(&[0i64, 0], [2], &cpu)?;
/// // Row 0 of the table is the identity rotation: cos 1, sin 0.
/// let mut table = vec![0.0f32; 128];
/// table[..64].fill(1.0);
/// let table = Tensor::from_f32_slice(&table, [1, 128], &cpu)?;
/// let out = ops::qk_norm_rope_fp8(&q, &k, &ones, &ones, &positions, &table, 1e-6)?;
/// assert_eq!(out.q_scale.shape(), &[2, 4]);
/// assert_eq!(out.k_fp8.shape(), &[2, 1, 128]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn qk_norm_rope_fp8(
    q: &Tensor,
    k: &Tensor,
    q_weight: &Tensor,
    k_weight: &Tensor,
    positions: &Tensor,
    cos_sin_cache: &Tensor,
    eps: f64,
) -> Result<QkNormRopeFp8Output, Error> {
    QkNormRopeFp8::builder(
        q.spec().clone(),
        k.spec().clone(),
        cos_sin_cache.spec().clone(),
    )
    .q_weight(q_weight.spec().clone())
    .k_weight(k_weight.spec().clone())
    .positions(positions.spec().clone())
    .eps(eps)
    .build(q.device())?
    .forward(q, k, q_weight, k_weight, positions, cos_sin_cache)
}
