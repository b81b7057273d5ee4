//! The f64 references of the normalization family (`rms_norm`, `layer_norm`,
//! `fused_add_rms_norm`): the CPU backends of those ops, and the yardstick of their GPU tests.
//!
//! Non-finite inputs follow PyTorch: RMSNorm spreads a NaN over its row (an inf makes its own
//! element NaN and the others 0); a NaN or an infinity in a LayerNorm row makes the row NaN.

/// RMSNorm of `x` viewed as rows of `n`, over each row: `x / sqrt(mean(x^2) + eps) * weight`.
///
/// # Panics
///
/// When `weight.len() != n`, or `x` is not whole rows of `n > 0`.
///
/// ```
/// let y = tileops::ops::reference::rms_norm(&[3.0, 4.0], &[1.0, 2.0], 2, 0.0);
/// let r = (12.5f64).sqrt();
/// assert_eq!(y, vec![3.0 / r, 8.0 / r]);
/// ```
pub fn rms_norm(x: &[f64], weight: &[f64], n: usize, eps: f64) -> Vec<f64> {
    assert_eq!(weight.len(), n, "weight must hold n values");
    assert!(
        n > 0 && x.len().is_multiple_of(n),
        "x must be whole rows of n"
    );
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n) {
        let mean_square = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let rstd = 1.0 / (mean_square + eps).sqrt();
        y.extend(row.iter().zip(weight).map(|(v, w)| v * rstd * w));
    }
    y
}

/// LayerNorm of `x` viewed as rows of `n`: `(x - mean) / sqrt(var + eps) * weight + bias`, with
/// the biased variance (the mean of squared deviations), as `torch.nn.functional.layer_norm`.
///
/// # Panics
///
/// When `weight` or `bias` does not hold `n` values, or `x` is not whole rows of `n > 0`.
///
/// ```
/// let y = tileops::ops::reference::layer_norm(&[1.0, 3.0], &[1.0, 2.0], &[0.0, 1.0], 2, 0.0);
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
/// let y = tileops::ops::reference::fused_add_rms_norm_y(&[3.0, 4.0], &[1.0, 1.0], 2, 0.0);
/// let r = (12.5f64).sqrt();
/// assert_eq!(y, vec![3.0 / r, 4.0 / r]);
/// ```
pub fn fused_add_rms_norm_y(h: &[f64], weight: &[f64], n: usize, eps: f64) -> Vec<f64> {
    rms_norm(h, weight, n, eps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_non_finite_inputs() {
        assert!(
            rms_norm(&[1.0, f64::NAN], &[1.0, 1.0], 2, 1e-6)
                .iter()
                .all(|v| v.is_nan())
        );
        let y = rms_norm(&[1.0, f64::INFINITY], &[1.0, 1.0], 2, 1e-6);
        assert_eq!(y[0], 0.0);
        assert!(y[1].is_nan());
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
}
