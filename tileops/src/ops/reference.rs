//! Reference implementations in f64: the CPU path of every op, and the yardstick of the GPU tests.
//!
//! They follow PyTorch's semantics for non-finite inputs: a softmax row with a NaN or `+inf`, or
//! with every element `-inf`, is all NaN; RMSNorm spreads a NaN over its row.

/// Softmax of `x` viewed as `[outer, n, inner]`, over the middle dimension.
///
/// # Panics
///
/// When `x.len() != outer * n * inner` (the ops validate shapes before calling it).
///
/// ```
/// let y = tileops::ops::reference::softmax(&[0.0, 0.0, f64::NEG_INFINITY], 1, 3, 1);
/// assert_eq!(y, vec![0.5, 0.5, 0.0]);
/// ```
pub fn softmax(x: &[f64], outer: usize, n: usize, inner: usize) -> Vec<f64> {
    assert_eq!(
        x.len(),
        outer * n * inner,
        "x must hold outer * n * inner values"
    );
    let mut y = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * n * inner + k * inner + i;
            // f64::max ignores NaN, like the kernels' max; NaN then reaches every output
            // through the sum.
            let max = (0..n).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..n).map(|k| (x[at(k)] - max).exp()).sum();
            for k in 0..n {
                y[at(k)] = (x[at(k)] - max).exp() / sum;
            }
        }
    }
    y
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_sum_to_one_over_any_dim() {
        let x: Vec<f64> = (0..24).map(|v| f64::from(v) * 0.37 - 3.0).collect();
        for (outer, n, inner) in [(1, 24, 1), (4, 6, 1), (2, 3, 4), (1, 4, 6)] {
            let y = softmax(&x, outer, n, inner);
            for o in 0..outer {
                for i in 0..inner {
                    let total: f64 = (0..n).map(|k| y[o * n * inner + k * inner + i]).sum();
                    assert!((total - 1.0).abs() < 1e-12, "{outer} {n} {inner}: {total}");
                }
            }
        }
    }

    #[test]
    fn softmax_non_finite_rows_follow_pytorch() {
        let inf = f64::INFINITY;
        assert!(softmax(&[-inf, -inf], 1, 2, 1).iter().all(|v| v.is_nan()));
        assert!(
            softmax(&[1.0, f64::NAN], 1, 2, 1)
                .iter()
                .all(|v| v.is_nan())
        );
        assert!(softmax(&[1.0, inf], 1, 2, 1).iter().all(|v| v.is_nan()));
        assert_eq!(softmax(&[5.0], 1, 1, 1), vec![1.0]);
        assert_eq!(softmax(&[-inf, 2.0], 1, 2, 1), vec![0.0, 1.0]);
    }

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
}
