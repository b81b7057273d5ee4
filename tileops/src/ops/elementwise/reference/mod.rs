//! The f64 references of the elementwise family (the activations and `silu_and_mul`): the CPU
//! backends of those ops, and the yardstick of their GPU tests.
//!
//! Non-finite inputs follow the formulas as written (as PyTorch's kernels evaluate them):
//! `gelu(-inf)` and `silu(-inf)` are `-inf * 0 = NaN`; `relu` keeps NaN.
//!
//! The deep negative tail of `sigmoid`, `silu` (so `silu_and_mul`) and `gelu_tanh` matches
//! PyTorch's CUDA kernels: they evaluate `1 / (1 + exp(-x))` and `x / (1 + exp(-x))` in f32
//! (for f16 and bf16 too), with `expf` and IEEE division, so where that f32 denominator
//! overflows to inf (`x < -88.7228`, `-x > ln(f32::MAX)`) the result is a signed zero, `+0` and
//! `x * 0`, not the f64 value (nonzero in f32 there: `silu(-88.8) = -2.42e-37`,
//! `silu(-100) = -3.72e-42`). These functions model exactly that overflow (see
//! [`f32_exp_overflows`]); everywhere else they are the f64 values of the formulas, nonzero
//! subnormals included (IEEE division, not `__fdividef`, which returns 0 once the denominator
//! exceeds 2^126). tileops's kernels (activation.cu, silu_and_mul.cu) do the same.

/// `-x`: exact in every dtype, NaN and infinities kept.
pub fn neg(x: f64) -> f64 {
    -x
}

/// `|x|`: exact in every dtype, NaN kept, `-0` to `+0`.
pub fn abs(x: f64) -> f64 {
    x.abs()
}

/// `max(x, 0)`, NaN kept.
pub fn relu(x: f64) -> f64 {
    if x < 0.0 { 0.0 } else { x }
}

/// `x * Phi(x)`, Phi the standard normal CDF (`gelu(x, approximate='none')`).
///
/// ```
/// use tileops::ops::reference::gelu_erf;
/// assert!((gelu_erf(1.0) - 0.8413447460685429).abs() < 1e-15);
/// assert!(gelu_erf(f64::NEG_INFINITY).is_nan());
/// ```
pub fn gelu_erf(x: f64) -> f64 {
    x * 0.5 * erfc(-x * std::f64::consts::FRAC_1_SQRT_2)
}

/// `0.5 x (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)` (`gelu(x, approximate='tanh')`),
/// evaluated as the same function `x / (1 + exp(-2u))`, which does not cancel in the negative
/// tail (`1 + tanh(u)` does, to exactly 0 in f64 below about `x = -7.2`).
///
/// Matches PyTorch's CUDA kernel in the overflow region: `x * 0` (a signed zero, NaN at
/// `-inf`) where the kernel's f32 denominator `1 + expf(-2u)` overflows, `u` computed in f32 as
/// activation.cu does (`x < -10.0610`); PyTorch's `0.5 x (1 + tanhf(u))` is `-0` there too (and
/// already from about `x < -5.16`, where `1 + tanhf(u)` cancels to 0 in f32, while this form
/// and tileops's kernel keep those tiny values).
///
/// ```
/// use tileops::ops::reference::gelu_tanh;
/// assert!((gelu_tanh(1.0) - 0.8411919906082768).abs() < 1e-15);
/// // The last f32 input whose denominator is finite, and the next one.
/// assert!((gelu_tanh(-10.060965538024902) / -2.9567015957199496e-38 - 1.0).abs() < 1e-12);
/// let y = gelu_tanh(-10.060966491699219);
/// assert!(y == 0.0 && y.is_sign_negative());
/// ```
pub fn gelu_tanh(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let u = k * (x + 0.044715 * x * x * x);
    // The kernel's f32 argument of expf: 0.7978845608028654f * fmaf(0.044715f * v, v * v, v),
    // times -2 (exact).
    let v = x as f32;
    let u32 = 0.797_884_6_f32 * (0.044715_f32 * v).mul_add(v * v, v);
    x * recip_one_plus_exp(-2.0 * u32, -2.0 * u)
}

/// `1 / (1 + exp(-x))`.
///
/// Matches PyTorch's CUDA kernel (`1 / (1 + exp(-x))` in f32, IEEE division): `+0` where the
/// f32 denominator overflows (`x < -88.7228`), the f64 value elsewhere, a subnormal of f32 on
/// `(-88.7228, -87.3365)`.
///
/// ```
/// use tileops::ops::reference::sigmoid;
/// assert!((sigmoid(-88.5) / 3.672301681915042e-39 - 1.0).abs() < 1e-12);
/// assert_eq!(sigmoid(-88.8), 0.0);
/// ```
pub fn sigmoid(x: f64) -> f64 {
    recip_one_plus_exp(-(x as f32), -x)
}

/// `x * sigmoid(x)`: `x / (1 + exp(-x))`.
///
/// Matches PyTorch's CUDA kernel (`x / (1 + exp(-x))` in f32, IEEE division): `x * 0` where the
/// f32 denominator overflows (`x < -88.7228`: `-0`, NaN at `-inf`), the f64 value elsewhere.
///
/// ```
/// use tileops::ops::reference::silu;
/// assert!((silu(-88.5) / -3.2499869884948124e-37 - 1.0).abs() < 1e-12);
/// assert!(silu(-100.0) == 0.0 && silu(-100.0).is_sign_negative());
/// assert!(silu(f64::NEG_INFINITY).is_nan());
/// ```
pub fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// Whether `expf(t)` overflows f32, so that the kernels' denominator `1 + expf(t)` is inf (it is
/// finite otherwise: `1 + f32::MAX` rounds to `f32::MAX`): exactly when `t > ln(f32::MAX) =
/// 88.72283905...`. For f32 `t` the decision does not depend on `expf`'s last bits: at the f32
/// values either side of `ln(f32::MAX)`, `exp` is 122 ulp below `f32::MAX` and 5 ulp above it,
/// beyond what CUDA's 2-ulp `expf` can round the other way.
///
/// ```
/// use tileops::ops::reference::f32_exp_overflows;
/// assert!(!f32_exp_overflows(88.72283));
/// assert!(f32_exp_overflows(88.72284));
/// assert!(f32_exp_overflows(f32::INFINITY));
/// assert!(!f32_exp_overflows(f32::NAN));
/// ```
pub fn f32_exp_overflows(t: f32) -> bool {
    (f64::from(t).exp() as f32).is_infinite()
}

/// `1 / (1 + exp(t))` in f64, or `+0` where the kernels' f32 denominator `1 + expf(t_f32)`
/// overflows (`t_f32`: the kernels' f32 value of `t`).
fn recip_one_plus_exp(t_f32: f32, t: f64) -> f64 {
    if f32_exp_overflows(t_f32) {
        0.0
    } else {
        1.0 / (1.0 + t.exp())
    }
}

/// SwiGLU over rows of `2n`: `silu(row[..n]) * row[n..]`, rows of `n` out.
///
/// # Panics
///
/// When `x` is not whole rows of `2n`, `n > 0`.
///
/// ```
/// let y = tileops::ops::reference::silu_and_mul(&[0.0, 1.0, 5.0, 2.0], 2);
/// assert_eq!(y, vec![0.0, 2.0 * tileops::ops::reference::silu(1.0)]);
/// ```
pub fn silu_and_mul(x: &[f64], n: usize) -> Vec<f64> {
    assert!(
        n > 0 && x.len().is_multiple_of(2 * n),
        "x must be whole rows of 2n"
    );
    x.chunks_exact(2 * n)
        .flat_map(|row| {
            let (gate, up) = row.split_at(n);
            gate.iter().zip(up).map(|(g, u)| silu(*g) * u)
        })
        .collect()
}

/// The complementary error function, to about 1e-15 relative: a positive-term series for
/// `|x| < 1.5`, the continued fraction above (where `1 - erf` would cancel). The standard library has no erf.
///
/// ```
/// use tileops::ops::reference::erfc;
/// assert!((erfc(3.0) / 2.209049699858544e-05 - 1.0).abs() < 1e-13);
/// assert_eq!(erfc(f64::INFINITY), 0.0);
/// assert_eq!(erfc(f64::NEG_INFINITY), 2.0);
/// ```
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x == f64::INFINITY || x > 27.0 {
        return 0.0;
    }
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    if x < 1.5 {
        // erf(x) = 2/sqrt(pi) exp(-x^2) sum_k 2^k x^(2k+1) / (1 * 3 * ... * (2k+1)).
        let (mut term, mut sum, x2) = (x, x, x * x);
        for k in 1..200 {
            term *= 2.0 * x2 / f64::from(2 * k + 1);
            sum += term;
            if term < sum * 1e-17 {
                break;
            }
        }
        1.0 - two_over_sqrt_pi * (-x2).exp() * sum
    } else {
        // erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...))))),
        // evaluated from the bottom.
        let mut f = x;
        for k in (1..120).rev() {
            f = x + f64::from(k) * 0.5 / f;
        }
        0.5 * two_over_sqrt_pi * (-x * x).exp() / f
    }
}

#[cfg(test)]
mod tests;
