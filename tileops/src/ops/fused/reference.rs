//! The reference of `qk_norm_rope_fp8` (the CPU path of the op and the yardstick of its GPU
//! tests): the norm and RoPE in f64, the fp8 step with the quantizers' shared rules.

use crate::ops::position_encoding::reference::{assert_head_rows, rope_row, table_row};
use crate::ops::quantization::reference::{fp8_e4m3_saturate, fp8_scale};

/// One tensor (q or k) of `qk_norm_rope_fp8`: `x` viewed as `[tokens, heads, head_dim]`; per head
/// row, RMS norm with `weight` (f64), NeoX RoPE at the token's position (f64), then fp8 with one
/// scale per row: `scale = fp8_scale(max |y|)` (the max in f64, then rounded to f32; NaN
/// propagating, as `torch.amax`), codes `fp8_e4m3_saturate(y * (1 / scale))`.
///
/// Returns the codes, the scales and the exact (unquantized) rotated values, for error bounds.
/// A row with a NaN after the norm and RoPE (a NaN input, spread over the row by the norm; an
/// inf, whose `inf * 0` there is NaN) gets scale NaN and NaN codes; so does every row of a token
/// whose position is outside the table.
///
/// # Panics
///
/// When the lengths do not match (as [`rope`](crate::ops::reference::rope), and `weight.len() == head_dim`).
///
/// ```
/// use tileops::ops::reference::qk_norm_rope_fp8;
/// // One row [3, 4] with weight 1 and cos = 1, sin = 0: normalized to [0.85, 1.13], whose
/// // largest magnitude maps to 448.
/// let (codes, scales, _) = qk_norm_rope_fp8(&[3.0, 4.0], &[1.0, 1.0], &[0], &[1.0, 0.0], 1, 2, 0.0);
/// assert_eq!(codes[1], 0x7e);
/// assert!((f64::from(scales[0]) - 4.0 / 12.5f64.sqrt() / 448.0).abs() < 1e-9);
/// ```
pub fn qk_norm_rope_fp8(
    x: &[f64],
    weight: &[f64],
    positions: &[i64],
    cache: &[f64],
    heads: usize,
    head_dim: usize,
    eps: f64,
) -> (Vec<u8>, Vec<f32>, Vec<f64>) {
    assert_eq!(weight.len(), head_dim, "weight must be [head_dim]");
    assert_head_rows(x, positions, heads, head_dim);
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len() / head_dim);
    let mut rotated = vec![0.0; x.len()];
    let mut normed = vec![0.0; head_dim];
    let mut magnitude = vec![0.0; head_dim];
    for (r, row) in x.chunks_exact(head_dim).enumerate() {
        let table = table_row(cache, positions[r / heads], head_dim);
        let mean_square = row.iter().map(|v| v * v).sum::<f64>() / head_dim as f64;
        let rstd = 1.0 / (mean_square + eps).sqrt();
        for ((n, v), w) in normed.iter_mut().zip(row).zip(weight) {
            *n = v * rstd * w;
        }
        let out = &mut rotated[r * head_dim..(r + 1) * head_dim];
        rope_row(&normed, table, out, &mut magnitude);
        let amax = out.iter().fold(0.0f64, |m, v| {
            if m.is_nan() || v.abs() <= m {
                m
            } else {
                v.abs()
            }
        });
        let scale = fp8_scale(amax as f32);
        let inv = f64::from(1.0 / scale);
        codes.extend(out.iter().map(|&v| fp8_e4m3_saturate((v * inv) as f32)));
        scales.push(scale);
    }
    (codes, scales, rotated)
}

#[cfg(test)]
mod tests;
