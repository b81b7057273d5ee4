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
mod tests;
