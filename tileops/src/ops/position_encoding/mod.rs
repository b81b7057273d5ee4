//! The `position_encoding` family of the manifest: rotary embeddings.

pub(crate) mod reference;
pub(crate) mod rope;

pub use rope::Rope;

use crate::{Error, Tensor};

/// NeoX RoPE of `x` `[tokens, heads, head_dim]` in one call: plans a [`Rope`] for the tensors'
/// specs on `x`'s device and runs it. `positions` is int64 `[tokens]`, `cos_sin_cache` float32
/// `[max_pos, head_dim]` with rows `[cos | sin]`. Build the plan once with [`Rope::new`] when the
/// same shapes run repeatedly.
///
/// ```
/// use tileops::{Device, Tensor, ops};
///
/// let cpu = Device::cpu();
/// // One token, one head of 2: a quarter turn (cos 0, sin 1) maps (x1, x2) to (-x2, x1).
/// let x = Tensor::from_f32_slice(&[1.0, 2.0], [1, 1, 2], &cpu)?;
/// let positions = Tensor::from_slice(&[0i64], [1], &cpu)?;
/// let table = Tensor::from_f32_slice(&[0.0, 1.0], [1, 2], &cpu)?;
/// let y = ops::rope(&x, &positions, &table)?;
/// assert_eq!(y.to_vec_f32()?, vec![-2.0, 1.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn rope(x: &Tensor, positions: &Tensor, cos_sin_cache: &Tensor) -> Result<Tensor, Error> {
    Rope::new(
        x.spec().clone(),
        positions.spec().clone(),
        cos_sin_cache.spec().clone(),
        x.device(),
    )?
    .forward(x, positions, cos_sin_cache)
}
