//! Reference implementations in f64 of layer_norm, fused_add_rms_norm and the activations: the
//! CPU path of those ops, and the yardstick of their GPU tests.
//!
//! Non-finite inputs follow the formulas as written (as PyTorch's kernels evaluate them): a NaN
//! or an infinity in a LayerNorm row makes the row NaN; `gelu(-inf)` and `silu(-inf)` are
//! `-inf * 0 = NaN`; `relu` keeps NaN.

/// LayerNorm of `x` viewed as rows of `n`: `(x - mean) / sqrt(var + eps) * weight + bias`, with
/// the biased variance (the mean of squared deviations), as `torch.nn.functional.layer_norm`.
///
/// # Panics
///
/// When `weight` or `bias` does not hold `n` values, or `x` is not whole rows of `n > 0`.
///
/// ```
/// let y = tileops::ops::reference_norm_act::layer_norm(&[1.0, 3.0], &[1.0, 2.0], &[0.0, 1.0], 2, 0.0);
/// assert_eq!(y, vec![-1.0, 3.0]);
/// ```
pub fn layer_norm(x: &[f64], weight: &[f64], bias: &[f64], n: usize, eps: f64) -> Vec<f64> {
    assert_eq!(weight.len(), n, "weight must hold n values");
    assert_eq!(bias.len(), n, "bias must hold n values");
    assert!(
        n > 0 && x.len().is_multiple_of(n),
        "x must be whole rows of n"
    );
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n) {
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        y.extend(
            row.iter()
                .zip(weight.iter().zip(bias))
                .map(|(v, (w, b))| (v - mean) * rstd * w + b),
        );
    }
    y
}

/// RMSNorm of `h` rows of `n` (the sum `x + residual`, already rounded to the dtype by the
/// caller): `h / sqrt(mean(h^2) + eps) * weight`. The fused op's `y`; its `residual_out` is `h`.
///
/// ```
/// let y = tileops::ops::reference_norm_act::fused_add_rms_norm_y(&[3.0, 4.0], &[1.0, 1.0], 2, 0.0);
/// let r = (12.5f64).sqrt();
/// assert_eq!(y, vec![3.0 / r, 4.0 / r]);
/// ```
pub fn fused_add_rms_norm_y(h: &[f64], weight: &[f64], n: usize, eps: f64) -> Vec<f64> {
    super::reference::rms_norm(h, weight, n, eps)
}

/// `max(x, 0)`, NaN kept.
pub fn relu(x: f64) -> f64 {
    if x < 0.0 { 0.0 } else { x }
}

/// `x * Phi(x)`, Phi the standard normal CDF (`gelu(x, approximate='none')`).
///
/// ```
/// use tileops::ops::reference_norm_act::gelu_erf;
/// assert!((gelu_erf(1.0) - 0.8413447460685429).abs() < 1e-15);
/// assert!(gelu_erf(f64::NEG_INFINITY).is_nan());
/// ```
pub fn gelu_erf(x: f64) -> f64 {
    x * 0.5 * erfc(-x * std::f64::consts::FRAC_1_SQRT_2)
}

/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (`gelu(x, approximate='tanh')`).
pub fn gelu_tanh(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
}

/// `1 / (1 + exp(-x))`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `x * sigmoid(x)`.
pub fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// SwiGLU over rows of `2n`: `silu(row[..n]) * row[n..]`, rows of `n` out.
///
/// # Panics
///
/// When `x` is not whole rows of `2n`, `n > 0`.
///
/// ```
/// let y = tileops::ops::reference_norm_act::silu_and_mul(&[0.0, 1.0, 5.0, 2.0], 2);
/// assert_eq!(y, vec![0.0, 2.0 * tileops::ops::reference_norm_act::silu(1.0)]);
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
/// use tileops::ops::reference_norm_act::erfc;
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
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_known_values() {
        // erfc at 0.5, 1, 2, 2.9, 3.1, 5, 10 (Python's math.erfc).
        let known = [
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028513),
            (2.0, 0.004677734981047265),
            (2.9, 4.109787809945886e-05),
            (3.1, 1.1648657367199589e-05),
            (5.0, 1.5374597944280351e-12),
            (10.0, 2.088487583762545e-45),
        ];
        for (x, want) in known {
            let got = erfc(x);
            assert!(
                (got / want - 1.0).abs() < 1e-12,
                "erfc({x}) = {got}, want {want}"
            );
            assert!((erfc(-x) - (2.0 - want)).abs() < 1e-15);
        }
        assert_eq!(erfc(0.0), 1.0);
        assert!(erfc(f64::NAN).is_nan());
    }

    #[test]
    fn activations_at_special_values() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        assert!(relu(nan).is_nan());
        assert_eq!(relu(-inf), 0.0);
        assert_eq!(relu(inf), inf);
        assert_eq!(relu(-2.5), 0.0);
        for f in [gelu_erf, gelu_tanh, silu] {
            assert_eq!(f(inf), inf);
            assert!(f(-inf).is_nan());
            assert!(f(nan).is_nan());
            assert_eq!(f(0.0), 0.0);
        }
        assert_eq!(sigmoid(inf), 1.0);
        assert_eq!(sigmoid(-inf), 0.0);
        assert_eq!(sigmoid(0.0), 0.5);
        // The tanh form stays within 1e-3 of the exact one.
        for i in -60..60 {
            let x = f64::from(i) * 0.1;
            assert!((gelu_erf(x) - gelu_tanh(x)).abs() < 1e-3, "{x}");
        }
        // Deep negative tail: relative accuracy (erfc, not 1 + erf).
        let g = gelu_erf(-8.0);
        assert!(
            (g / (-8.0 * 0.5 * 1.2441921148543639e-15) - 1.0).abs() < 1e-9,
            "{g}"
        );
    }

    #[test]
    fn layer_norm_rows() {
        let y = layer_norm(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 5.0],
            &[1.0; 3],
            &[0.5; 3],
            3,
            0.0,
        );
        let r = (2.0f64 / 3.0).sqrt();
        assert!((y[0] - (0.5 - 1.0 / r)).abs() < 1e-12);
        assert!((y[1] - 0.5).abs() < 1e-12);
        // A constant row: var 0, eps keeps it finite; every output is the bias.
        let y = layer_norm(&[5.0, 5.0], &[2.0; 2], &[0.25; 2], 2, 1e-5);
        assert_eq!(y, vec![0.25, 0.25]);
        // A length-1 row is (x - x) * .. + b = b.
        assert_eq!(layer_norm(&[7.0], &[3.0], &[1.5], 1, 1e-5), vec![1.5]);
        assert!(
            layer_norm(&[1.0, f64::INFINITY], &[1.0; 2], &[0.0; 2], 2, 1e-5)
                .iter()
                .all(|v| v.is_nan())
        );
    }

    #[test]
    fn silu_and_mul_splits_each_row() {
        let y = silu_and_mul(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 2.0, 2.0], 2);
        assert_eq!(
            y,
            vec![silu(1.0) * 3.0, silu(2.0) * 4.0, silu(-1.0) * 2.0, 0.0]
        );
    }
}
