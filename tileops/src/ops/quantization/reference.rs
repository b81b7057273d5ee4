//! The f64/f32 reference of `fp8_quant` (the CPU path of the op and the yardstick of its GPU
//! tests), and the fp8 rules every quantizing op shares: the e4m3 conversion, the scale, the
//! NaN-propagating max.
//!
//! The fp8 steps mirror the kernels' f32 arithmetic exactly (the group max is exact,
//! `scale = max(amax / 448, MIN_SCALE)` and its reciprocal are correctly rounded f32 divisions,
//! `x * (1 / scale)` one f32 multiply), and [`fp8_e4m3_saturate`] is the kernels' conversion bit
//! for bit, so `fp8_quant` on the CPU and on the GPU agree code for code. The max propagates NaN
//! on both sides ([`nan_max`]), as `torch.amax` does.

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
/// use tileops::ops::reference::fp8_e4m3_saturate;
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
/// use tileops::ops::reference::fp8_e4m3_value;
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
/// use tileops::ops::reference::nan_max;
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
/// use tileops::ops::reference::{MIN_SCALE, fp8_scale};
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
/// use tileops::ops::reference::fp8_quant;
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

#[cfg(test)]
mod tests;
