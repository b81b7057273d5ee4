//! The f64 references of the reduction family (`softmax`, `log_softmax` and the reductions
//! `sum`, `mean`, `amax`, `logsumexp`): the CPU backends of those ops, and the yardstick of their
//! GPU tests.
//!
//! They follow PyTorch's semantics for non-finite inputs: a softmax or log_softmax row with a NaN
//! or `+inf`, or with every element `-inf`, is all NaN; `amax` propagates NaN; `logsumexp` of a
//! row of only `-inf` is `-inf`, of a row with a `+inf` (and no NaN) is `+inf`.

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

/// What a reduction computes over each set of reduced elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// `torch.sum`.
    Sum,
    /// `torch.mean`.
    Mean,
    /// `torch.amax` (NaN propagates).
    Amax,
    /// `torch.logsumexp`: `log(sum(exp(x - m))) + m`, `m` the max (0 when infinite).
    Logsumexp,
}

impl ReduceKind {
    /// The manifest name of the op.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Mean => "mean",
            ReduceKind::Amax => "amax",
            ReduceKind::Logsumexp => "logsumexp",
        }
    }
}

/// log_softmax of `x` viewed as `[outer, n, inner]`, over the middle dimension:
/// `(x - max) - log(sum(exp(x - max)))`.
///
/// # Panics
///
/// When `x.len() != outer * n * inner` (the ops validate shapes before calling it).
///
/// ```
/// let y = tileops::ops::reference::log_softmax(&[0.0, 0.0], 1, 2, 1);
/// assert_eq!(y, vec![-(2f64.ln()), -(2f64.ln())]);
/// ```
pub fn log_softmax(x: &[f64], outer: usize, n: usize, inner: usize) -> Vec<f64> {
    assert_eq!(
        x.len(),
        outer * n * inner,
        "x must hold outer * n * inner values"
    );
    let mut y = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| o * n * inner + k * inner + i;
            // f64::max ignores NaN, like the kernels' max; NaN then reaches every output through
            // the sum. An all -inf row has -inf - -inf = NaN, as in PyTorch.
            let max = (0..n).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let lse = (0..n).map(|k| (x[at(k)] - max).exp()).sum::<f64>().ln();
            for k in 0..n {
                y[at(k)] = (x[at(k)] - max) - lse;
            }
        }
    }
    y
}

/// A max that propagates NaN, as `torch.amax` does.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || a > b { a } else { b }
}

/// Reduces `x` (row-major, of `shape`) over `axes` (each `< shape.len()`, no duplicates). The
/// result holds one value per combination of the kept dims, row-major (keepdim only changes the
/// shape, not the order).
///
/// # Panics
///
/// When `x.len()` is not the product of `shape`, or an axis is out of range.
///
/// ```
/// use tileops::ops::reference::{ReduceKind, reduce};
/// let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// assert_eq!(reduce(&x, &[2, 3], &[1], ReduceKind::Sum), vec![6.0, 15.0]);
/// assert_eq!(reduce(&x, &[2, 3], &[0], ReduceKind::Amax), vec![4.0, 5.0, 6.0]);
/// assert_eq!(reduce(&x, &[2, 3], &[0, 1], ReduceKind::Mean), vec![3.5]);
/// ```
pub fn reduce(x: &[f64], shape: &[usize], axes: &[usize], kind: ReduceKind) -> Vec<f64> {
    assert_eq!(
        x.len(),
        shape.iter().product::<usize>(),
        "x must hold product(shape) values"
    );
    assert!(axes.iter().all(|&a| a < shape.len()), "axes must be < rank");
    let reduced = |d: usize| axes.contains(&d);
    let n: usize = (0..shape.len())
        .filter(|&d| reduced(d))
        .map(|d| shape[d])
        .product();
    let outputs = x.len() / n.max(1);
    // The output index of each input element: its coordinates in the kept dims, row-major.
    let mut out_stride = vec![0usize; shape.len()];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        if !reduced(d) {
            out_stride[d] = acc;
            acc *= shape[d];
        }
    }
    let out_index = |mut flat: usize| {
        let mut o = 0;
        for d in (0..shape.len()).rev() {
            o += (flat % shape[d]) * out_stride[d];
            flat /= shape[d];
        }
        o
    };
    let mut max = vec![f64::NEG_INFINITY; outputs];
    let needs_max = matches!(kind, ReduceKind::Amax | ReduceKind::Logsumexp);
    if needs_max {
        for (i, &v) in x.iter().enumerate() {
            let o = out_index(i);
            max[o] = nan_max(max[o], v);
        }
    }
    if kind == ReduceKind::Amax {
        return max;
    }
    // logsumexp measures from the max, or from 0 when the max is infinite.
    let shift: Vec<f64> = max
        .iter()
        .map(|&m| if m.is_infinite() { 0.0 } else { m })
        .collect();
    let mut sum = vec![0.0; outputs];
    for (i, &v) in x.iter().enumerate() {
        let o = out_index(i);
        sum[o] += if needs_max { (v - shift[o]).exp() } else { v };
    }
    match kind {
        ReduceKind::Sum => sum,
        ReduceKind::Mean => sum.iter().map(|s| s / n as f64).collect(),
        _ => sum.iter().zip(&shift).map(|(s, m)| s.ln() + m).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    #[test]
    fn log_softmax_is_log_of_softmax() {
        let x: Vec<f64> = (0..24).map(|v| f64::from(v) * 0.37 - 3.0).collect();
        for (outer, n, inner) in [(1, 24, 1), (4, 6, 1), (2, 3, 4), (1, 4, 6)] {
            let y = log_softmax(&x, outer, n, inner);
            let s = softmax(&x, outer, n, inner);
            for (a, b) in y.iter().zip(&s) {
                assert!((a - b.ln()).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn log_softmax_non_finite_rows_follow_pytorch() {
        assert!(
            log_softmax(&[-INF, -INF], 1, 2, 1)
                .iter()
                .all(|v| v.is_nan())
        );
        assert!(
            log_softmax(&[1.0, f64::NAN], 1, 2, 1)
                .iter()
                .all(|v| v.is_nan())
        );
        assert!(log_softmax(&[1.0, INF], 1, 2, 1).iter().all(|v| v.is_nan()));
        assert_eq!(log_softmax(&[5.0], 1, 1, 1), vec![0.0]);
        assert_eq!(log_softmax(&[-INF, 2.0], 1, 2, 1), vec![-INF, 0.0]);
    }

    #[test]
    fn reductions_over_any_axes() {
        // [2, 3, 4] = 0..24
        let x: Vec<f64> = (0..24).map(f64::from).collect();
        let shape = [2, 3, 4];
        assert_eq!(
            reduce(&x, &shape, &[0, 2], ReduceKind::Sum),
            vec![
                f64::from((0..4).chain(12..16).sum::<i32>()),
                f64::from((4..8).chain(16..20).sum::<i32>()),
                f64::from((8..12).chain(20..24).sum::<i32>())
            ]
        );
        assert_eq!(
            reduce(&x, &shape, &[1], ReduceKind::Amax),
            vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]
        );
        assert_eq!(reduce(&x, &shape, &[0, 1, 2], ReduceKind::Mean), vec![11.5]);
        let lse = reduce(&x, &shape, &[2], ReduceKind::Logsumexp);
        for (r, v) in lse.iter().enumerate() {
            let want = (0..4).map(|k| (x[r * 4 + k]).exp()).sum::<f64>().ln();
            assert!((v - want).abs() < 1e-12);
        }
    }

    #[test]
    fn reductions_follow_pytorch_on_non_finite_values() {
        let nan = f64::NAN;
        assert!(reduce(&[1.0, nan, 3.0], &[3], &[0], ReduceKind::Amax)[0].is_nan());
        assert!(reduce(&[nan, 1.0], &[2], &[0], ReduceKind::Amax)[0].is_nan());
        assert_eq!(
            reduce(&[-INF, -INF], &[2], &[0], ReduceKind::Logsumexp),
            vec![-INF]
        );
        assert_eq!(
            reduce(&[1.0, INF, -INF], &[3], &[0], ReduceKind::Logsumexp),
            vec![INF]
        );
        assert!(reduce(&[1.0, nan], &[2], &[0], ReduceKind::Logsumexp)[0].is_nan());
        assert!(reduce(&[INF, -INF], &[2], &[0], ReduceKind::Sum)[0].is_nan());
        assert_eq!(
            reduce(&[-INF, 2.0], &[2], &[0], ReduceKind::Amax),
            vec![2.0]
        );
        // Length-1 reductions are the identity (logsumexp too).
        assert_eq!(
            reduce(&[-3.5], &[1], &[0], ReduceKind::Logsumexp),
            vec![-3.5]
        );
        assert_eq!(reduce(&[-3.5], &[1], &[0], ReduceKind::Mean), vec![-3.5]);
    }

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
}
