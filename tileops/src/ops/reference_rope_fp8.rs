//! Reference implementations of `rope`, `fp8_quant` and `qk_norm_rope_fp8`: the CPU path of those
//! ops and the yardstick of their GPU tests.
//!
//! RoPE and the norm accumulate in f64. The fp8 steps mirror the kernels' f32 arithmetic exactly
//! (the group max is exact, `scale = max(amax / 448, MIN_SCALE)` and its reciprocal are correctly
//! rounded f32 divisions, `x * (1 / scale)` one f32 multiply), and [`fp8_e4m3_saturate`] is the
//! kernels' conversion bit for bit, so `fp8_quant` on the CPU and on the GPU agree code for code.
//! The max propagates NaN on both sides ([`nan_max`]), as `torch.amax` does.

/// The largest finite `float8_e4m3fn` value.
pub const FP8_E4M3_MAX: f32 = 448.0;

/// The smallest scale the quantizers use, `1 / (448 * 512)` (vLLM's floor): a group whose
/// largest magnitude is 0 or tiny still gets a finite reciprocal, and its codes stay exact zeros.
pub const MIN_SCALE: f32 = 1.0 / (448.0 * 512.0);

/// `float8_e4m3fn` code of `v`: round to nearest, ties to even, saturating at ±448 (±inf gives
/// ±448), NaN gives 0x7F, values at most 2^-10 in magnitude give a signed zero.
///
/// The same conversion as CUDA's `__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)` (the
/// `cvt.rn.satfinite.e4m3x2.f32` instruction on sm_89 and newer, the header's software path on
/// older GPUs), through the `float8` crate's port of `cuda_fp8.hpp`.
///
/// ```
/// use tileops::ops::reference_rope_fp8::fp8_e4m3_saturate;
/// assert_eq!(fp8_e4m3_saturate(448.0), 0x7e);
/// assert_eq!(fp8_e4m3_saturate(1.0e9), 0x7e);
/// assert_eq!(fp8_e4m3_saturate(f32::NEG_INFINITY), 0xfe);
/// assert_eq!(fp8_e4m3_saturate(f32::NAN), 0x7f);
/// assert_eq!(fp8_e4m3_saturate(1.0), 0x38);
/// assert_eq!(fp8_e4m3_saturate(2f32.powi(-9)), 0x01); // the smallest subnormal
/// ```
pub fn fp8_e4m3_saturate(v: f32) -> u8 {
    // The `float8` crate ports the same header, NaN aside: it keeps a NaN's sign (-NaN is 0xFF),
    // while the kernels' `cvt.rn.satfinite` always gives 0x7F. (The hand-written port it
    // replaced is the oracle in tensor/convert/fp8_oracle.rs.)
    if v.is_nan() {
        return 0x7f;
    }
    float8::F8E4M3::from_f32(v).to_bits()
}

/// The value of a `float8_e4m3fn` code (NaN for 0x7F and 0xFF).
///
/// ```
/// use tileops::ops::reference_rope_fp8::fp8_e4m3_value;
/// assert_eq!(fp8_e4m3_value(0x7e), 448.0);
/// assert_eq!(fp8_e4m3_value(0x81), -(2f64.powi(-9)));
/// ```
pub fn fp8_e4m3_value(code: u8) -> f64 {
    // Exact: every e4m3 value is an f16 value, which `float8` decodes through.
    float8::F8E4M3::from_bits(code).to_f64()
}

/// The larger of `a` and `b`, NaN when either is NaN: the max of `torch.amax` and of the kernels'
/// `nan_max` (Rust's `f32::max`, like CUDA's `fmaxf`, would drop the NaN).
///
/// ```
/// use tileops::ops::reference_rope_fp8::nan_max;
/// assert_eq!(nan_max(1.0, 2.0), 2.0);
/// assert!(nan_max(f32::NAN, 2.0).is_nan() && nan_max(2.0, f32::NAN).is_nan());
/// ```
pub fn nan_max(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() { a } else { b }
}

/// The scale of a group whose largest magnitude is `amax`, as the kernels compute it:
/// `max(amax / 448, MIN_SCALE)` in f32, NaN for a NaN `amax` (as `torch.clamp` keeps NaN).
///
/// ```
/// use tileops::ops::reference_rope_fp8::{MIN_SCALE, fp8_scale};
/// assert_eq!(fp8_scale(448.0), 1.0);
/// assert_eq!(fp8_scale(0.0), MIN_SCALE);
/// assert!(fp8_scale(f32::NAN).is_nan());
/// ```
pub fn fp8_scale(amax: f32) -> f32 {
    nan_max(amax / FP8_E4M3_MAX, MIN_SCALE)
}

/// Dynamic fp8 quantization of `x` (f32 values of the input) in contiguous groups of `group`:
/// per group, `scale = fp8_scale(max |x|)` and codes `fp8_e4m3_saturate(x * (1 / scale))`.
/// Returns the codes and one scale per group.
///
/// The max propagates NaN, as `torch.amax`: a group holding a NaN gets scale NaN and every code
/// NaN (0x7F), which is what PyTorch's `x.abs().amax()`, `clamp(min=MIN_SCALE)`, `x / scale`,
/// `.to(float8_e4m3fn)` gives.
///
/// # Panics
///
/// When `group` is 0 or `x` is not whole groups (the op validates shapes first).
///
/// ```
/// use tileops::ops::reference_rope_fp8::fp8_quant;
/// let (codes, scales) = fp8_quant(&[1.0, -2.0, 0.0, 0.0], 2);
/// assert_eq!(scales, vec![2.0 / 448.0, 1.0 / (448.0 * 512.0)]);
/// assert_eq!(codes, vec![0x76, 0xfe, 0, 0]); // 224, -448, 0, 0
///
/// // A NaN poisons its group only: [NaN, 1, 2, 3] gives scale NaN, not 3 / 448.
/// let (codes, scales) = fp8_quant(&[f32::NAN, 1.0, 2.0, 3.0, 448.0, 0.0, 0.0, 0.0], 4);
/// assert!(scales[0].is_nan());
/// assert_eq!(&codes[..4], &[0x7f; 4]);
/// assert_eq!((scales[1], codes[4]), (1.0, 0x7e));
/// ```
pub fn fp8_quant(x: &[f32], group: usize) -> (Vec<u8>, Vec<f32>) {
    assert!(
        group > 0 && x.len().is_multiple_of(group),
        "x must be whole groups"
    );
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len() / group);
    for g in x.chunks_exact(group) {
        let amax = g.iter().fold(0.0f32, |m, v| nan_max(m, v.abs()));
        let scale = fp8_scale(amax);
        let inv = 1.0 / scale;
        codes.extend(g.iter().map(|&v| fp8_e4m3_saturate(v * inv)));
        scales.push(scale);
    }
    (codes, scales)
}

/// The `[cos | sin]` halves of the table row of `position`, or `None` when it is out of range.
fn table_row(cache: &[f64], position: i64, head_dim: usize) -> Option<&[f64]> {
    let rows = cache.len() / head_dim;
    usize::try_from(position)
        .ok()
        .filter(|&p| p < rows)
        .map(|p| &cache[p * head_dim..(p + 1) * head_dim])
}

/// NeoX RoPE of one head row `x` (length `d`, even) with the table row `[cos | sin]`, in f64;
/// with it, each output's condition magnitude `|x1 cos| + |x2 sin|` (the size of the terms that
/// cancel), which bounds the rounding error of any implementation.
fn rope_row(x: &[f64], table: Option<&[f64]>, out: &mut [f64], magnitude: &mut [f64]) {
    let half = x.len() / 2;
    for i in 0..half {
        let (c, s) = table.map_or((f64::NAN, f64::NAN), |t| (t[i], t[half + i]));
        let (x1, x2) = (x[i], x[half + i]);
        out[i] = x1 * c - x2 * s;
        out[half + i] = x2 * c + x1 * s;
        magnitude[i] = (x1 * c).abs() + (x2 * s).abs();
        magnitude[half + i] = (x2 * c).abs() + (x1 * s).abs();
    }
}

/// NeoX RoPE of `x` viewed as `[tokens, heads, head_dim]` with `positions` (one per token) and
/// `cache` viewed as `[max_pos, head_dim]`, each row `[cos (head_dim/2) | sin (head_dim/2)]`:
/// `y1 = x1 cos - x2 sin`, `y2 = x2 cos + x1 sin`. A token whose position is outside
/// `[0, max_pos)` gets NaN rows (the kernel's behaviour; the op's CPU path refuses them first).
///
/// Returns `y` and, per element, `|x1 cos| + |x2 sin|` (the magnitude of the terms that cancel:
/// the yardstick of the GPU test's error).
///
/// # Panics
///
/// When the lengths do not match (`x.len() == positions.len() * heads * head_dim`, `cache` whole
/// rows of `head_dim`, `head_dim` even and non-zero).
///
/// ```
/// use tileops::ops::reference_rope_fp8::rope;
/// // cos = 0, sin = 1: a quarter turn, (x1, x2) -> (-x2, x1).
/// let (y, _) = rope(&[1.0, 2.0], &[0], &[0.0, 1.0], 1, 2);
/// assert_eq!(y, vec![-2.0, 1.0]);
/// ```
pub fn rope(
    x: &[f64],
    positions: &[i64],
    cache: &[f64],
    heads: usize,
    head_dim: usize,
) -> (Vec<f64>, Vec<f64>) {
    assert!(
        head_dim > 0 && head_dim.is_multiple_of(2),
        "head_dim must be even"
    );
    assert_eq!(
        x.len(),
        positions.len() * heads * head_dim,
        "x must be [tokens, heads, head_dim]"
    );
    assert!(
        cache.len().is_multiple_of(head_dim),
        "cache must be whole rows"
    );
    let mut y = vec![0.0; x.len()];
    let mut magnitude = vec![0.0; x.len()];
    let token_len = heads * head_dim;
    for (t, &position) in positions.iter().enumerate() {
        let table = table_row(cache, position, head_dim);
        for h in 0..heads {
            let at = t * token_len + h * head_dim;
            let range = at..at + head_dim;
            rope_row(
                &x[range.clone()],
                table,
                &mut y[range.clone()],
                &mut magnitude[range],
            );
        }
    }
    (y, magnitude)
}

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
/// When the lengths do not match (as [`rope`], and `weight.len() == head_dim`).
///
/// ```
/// use tileops::ops::reference_rope_fp8::qk_norm_rope_fp8;
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
    assert!(
        head_dim > 0 && head_dim.is_multiple_of(2),
        "head_dim must be even"
    );
    assert_eq!(
        x.len(),
        positions.len() * heads * head_dim,
        "x must be [tokens, heads, head_dim]"
    );
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
mod tests {
    use super::*;
    use crate::{DType, Device, Tensor, TensorSpec};

    /// The crate's own correctly rounded fp8 encoder (which turns overflow into NaN, as
    /// PyTorch's cast does), for values that do not overflow.
    fn tensor_code(v: f32) -> u8 {
        let spec = TensorSpec::new([1], DType::Float8E4M3Fn);
        Tensor::from_f64_rounded(&[f64::from(v)], &spec, &Device::cpu())
            .unwrap()
            .to_bytes()
            .unwrap()[0]
    }

    #[test]
    fn fp8_conversion_agrees_with_the_tensor_encoder_below_overflow() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut checked = 0;
        for _ in 0..200_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Magnitudes from 2^-14 to 2^9, both signs: subnormals, normals, the overflow edge.
            let e = ((state >> 40) % 24) as i32 - 14;
            let m = 1.0 + ((state >> 16) & 0xffff) as f32 / 65536.0;
            let v = m * 2f32.powi(e) * if state >> 63 == 1 { -1.0 } else { 1.0 };
            if v.abs() <= 464.0 {
                assert_eq!(fp8_e4m3_saturate(v), tensor_code(v), "{v:e}");
                checked += 1;
            }
        }
        assert!(checked > 100_000);
        // Every code's value converts back to itself.
        for code in 0..=255u8 {
            let v = fp8_e4m3_value(code);
            if !v.is_nan() {
                assert_eq!(fp8_e4m3_saturate(v as f32), code, "code {code:#x}");
            }
        }
    }

    #[test]
    fn fp8_saturates_at_448_and_keeps_nan_and_subnormals() {
        assert_eq!(fp8_e4m3_value(fp8_e4m3_saturate(448.0)), 448.0);
        assert_eq!(fp8_e4m3_value(fp8_e4m3_saturate(-448.0)), -448.0);
        // 464 is the midpoint between 448 and (the missing) 480: ties to even, 448.
        for v in [449.0, 463.9, 464.0, 464.1, 480.0, 1.0e30, f32::INFINITY] {
            assert_eq!(fp8_e4m3_saturate(v), 0x7e, "{v}");
            assert_eq!(fp8_e4m3_saturate(-v), 0xfe, "{v}");
        }
        assert_eq!(fp8_e4m3_saturate(f32::NAN), 0x7f);
        assert_eq!(fp8_e4m3_saturate(-f32::NAN), 0x7f);
        // Subnormals: 2^-9 is the smallest; 2^-10 is a tie and goes to 0 (even); just above
        // rounds up; 3 * 2^-10 is a tie between codes 1 and 2 and goes to 2.
        let q = 2f32.powi(-10);
        assert_eq!(fp8_e4m3_saturate(2.0 * q), 0x01);
        assert_eq!(fp8_e4m3_saturate(q), 0x00);
        assert_eq!(fp8_e4m3_saturate(-q), 0x80);
        assert_eq!(fp8_e4m3_saturate(q * 1.0001), 0x01);
        assert_eq!(fp8_e4m3_saturate(3.0 * q), 0x02);
        assert_eq!(fp8_e4m3_saturate(7.0 * 2.0 * q), 0x07); // the largest subnormal
        assert_eq!(fp8_e4m3_saturate(2f32.powi(-6)), 0x08); // the smallest normal
        assert_eq!(fp8_e4m3_saturate(f32::from_bits(1)), 0x00); // an f32 subnormal
        assert_eq!(fp8_e4m3_saturate(-0.0), 0x80);
        // Normal ties to even: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39).
        assert_eq!(fp8_e4m3_saturate(1.0625), 0x38);
        assert_eq!(fp8_e4m3_saturate(1.1875), 0x3a);
    }

    #[test]
    fn fp8_quant_groups_scales_and_non_finite_values() {
        // Per group the largest magnitude maps to ±448 exactly.
        let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
        for group in [1, 3, 4, 12] {
            let (codes, scales) = fp8_quant(&x, group);
            assert_eq!(scales.len(), 12 / group);
            for (g, chunk) in codes.chunks(group).enumerate() {
                assert!(
                    chunk.iter().any(|&c| c & 0x7f == 0x7e),
                    "group {g} of {group}"
                );
                for (i, &c) in chunk.iter().enumerate() {
                    let back = fp8_e4m3_value(c) * f64::from(scales[g]);
                    let v = f64::from(x[g * group + i]);
                    assert!((back - v).abs() <= v.abs() / 16.0 + 1e-6, "{v} {back}");
                }
            }
        }
        // All zeros: the smallest scale and zero codes.
        assert_eq!(
            fp8_quant(&[0.0, -0.0], 2),
            (vec![0x00, 0x80], vec![MIN_SCALE])
        );
        // NaN propagates through the max, as torch.amax: the issue's [NaN, 1, 2, 3] gets scale
        // NaN (not 3 / 448) and NaN codes, wherever the NaN is; the next group is untouched.
        for at in 0..4 {
            let mut x = [1.0, 2.0, 3.0, -1.0, 2.0, -1.0, 0.0, 0.0];
            x[at] = f32::NAN;
            let (codes, scales) = fp8_quant(&x, 4);
            assert!(scales[0].is_nan(), "NaN at {at}: {scales:?}");
            assert_eq!(&codes[..4], &[0x7f; 4], "NaN at {at}");
            assert_eq!(scales[1], 2.0 / 448.0);
            assert_eq!(&codes[4..], &[0x7e, fp8_e4m3_saturate(-224.0), 0, 0]);
        }
        // NaN with an inf: still NaN (the max is NaN whichever comes first).
        let (_, scales) = fp8_quant(&[f32::INFINITY, f32::NAN, f32::NAN, f32::INFINITY], 2);
        assert!(scales.iter().all(|s| s.is_nan()), "{scales:?}");
        // inf: the scale is inf, finite values become 0, the inf itself 0 * inf = NaN.
        let (codes, scales) = fp8_quant(&[f32::INFINITY, 2.0], 2);
        assert_eq!(scales, vec![f32::INFINITY]);
        assert_eq!(codes, vec![0x7f, 0x00]);
        // Length-1 groups: every code is ±448 (or 0).
        let (codes, _) = fp8_quant(&[3.0, -0.5, 0.0], 1);
        assert_eq!(codes, vec![0x7e, 0xfe, 0x00]);
    }

    #[test]
    fn rope_rotates_pairs_and_marks_bad_positions() {
        let theta = 0.3f64;
        // head_dim 4: pairs (0, 2) and (1, 3); table rows 0 (identity) and 1.
        let cache = [1.0, 1.0, 0.0, 0.0, theta.cos(), 1.0, theta.sin(), 0.0];
        let x = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0];
        let (y, mag) = rope(&x, &[0, 1], &cache, 1, 4);
        assert_eq!(&y[..4], &x[..4]);
        assert!((y[4] - (theta.cos() - 3.0 * theta.sin())).abs() < 1e-15);
        assert!((y[6] - (3.0 * theta.cos() + theta.sin())).abs() < 1e-15);
        assert_eq!((y[5], y[7]), (2.0, 4.0));
        assert_eq!(mag[0], 1.0);
        // Norms are preserved per pair.
        assert!((y[4].hypot(y[6]) - 10f64.sqrt()).abs() < 1e-12);
        let (y, _) = rope(&x, &[2, -1], &cache, 1, 4);
        assert!(y.iter().all(|v| v.is_nan()));
        // NaN and inf in x stay in their pair.
        let (y, _) = rope(&[f64::NAN, 1.0, 2.0, 3.0], &[1], &cache, 1, 4);
        assert!(y[0].is_nan() && y[2].is_nan() && y[1] == 1.0 && y[3] == 3.0);
    }

    #[test]
    fn qk_norm_rope_fp8_rows_and_non_finite_rows() {
        let d = 8;
        let mut cache = vec![0.0; 2 * d];
        for i in 0..d / 2 {
            cache[i] = 1.0;
            cache[d + i] = 0.6;
            cache[d + d / 2 + i] = 0.8;
        }
        let x: Vec<f64> = (0..3 * d).map(|i| (i as f64 * 0.7).sin()).collect();
        let w = vec![1.5; d];
        let (codes, scales, rotated) = qk_norm_rope_fp8(&x, &w, &[1, 0, 1], &cache, 1, d, 1e-6);
        assert_eq!((codes.len(), scales.len()), (3 * d, 3));
        for r in 0..3 {
            let row = &rotated[r * d..(r + 1) * d];
            let amax = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert!((f64::from(scales[r]) - amax / 448.0).abs() < 1e-9 * amax);
            // Row 1 is position 0 (identity rotation): just the weighted norm.
            for (i, &c) in codes[r * d..(r + 1) * d].iter().enumerate() {
                let back = fp8_e4m3_value(c) * f64::from(scales[r]);
                assert!((back - row[i]).abs() <= amax / 16.0, "{r} {i}");
            }
        }
        let ms = x[d..2 * d].iter().map(|v| v * v).sum::<f64>() / d as f64;
        assert!((rotated[d] - x[d] / (ms + 1e-6).sqrt() * 1.5).abs() < 1e-12);
        // A NaN spreads over its row (through the norm); an inf makes its pair NaN (inf * 0) and
        // the rest 0. Either way the row holds a NaN, so its max, its scale and all its codes are
        // NaN, as torch.amax would make them; the clean row 2 is untouched.
        let mut bad = x.clone();
        bad[2] = f64::NAN;
        bad[d + 1] = f64::INFINITY;
        let (codes, scales, rotated) = qk_norm_rope_fp8(&bad, &w, &[1, 1, 1], &cache, 1, d, 1e-6);
        assert!(rotated[..d].iter().all(|v| v.is_nan()));
        let row1 = &rotated[d..2 * d];
        assert!(row1[1].is_nan() && row1[1 + d / 2].is_nan());
        assert!(row1.iter().filter(|v| !v.is_nan()).all(|&v| v == 0.0));
        assert!(scales[0].is_nan() && scales[1].is_nan(), "{scales:?}");
        assert!(codes[..2 * d].iter().all(|&c| c == 0x7f));
        assert!(scales[2].is_finite() && scales[2] > MIN_SCALE);
        // A position outside the table: NaN codes and a NaN scale.
        let (codes, scales, _) = qk_norm_rope_fp8(&x[..d], &w, &[5], &cache, 1, d, 1e-6);
        assert!(codes.iter().all(|&c| c == 0x7f));
        assert!(scales[0].is_nan());
    }
}
