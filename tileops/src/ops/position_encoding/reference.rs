//! The f64 reference of `rope` (the CPU path of the op and the yardstick of its GPU tests), and
//! the NeoX rotation of one head row that `qk_norm_rope_fp8`'s reference shares.

use super::rope::RopeStyle;

/// The `[cos | sin]` halves of the table row of `position`, or `None` when it is out of range.
pub(crate) fn table_row(cache: &[f64], position: i64, head_dim: usize) -> Option<&[f64]> {
    let rows = cache.len() / head_dim;
    usize::try_from(position)
        .ok()
        .filter(|&p| p < rows)
        .map(|p| &cache[p * head_dim..(p + 1) * head_dim])
}

/// The shape contract of the RoPE references: `x` is `[tokens, heads, head_dim]` for one position
/// per token, `head_dim` even and non-zero.
///
/// # Panics
///
/// When it does not hold.
pub(crate) fn assert_head_rows(x: &[f64], positions: &[i64], heads: usize, head_dim: usize) {
    assert!(
        head_dim > 0 && head_dim.is_multiple_of(2),
        "head_dim must be even"
    );
    assert_eq!(
        x.len(),
        positions.len() * heads * head_dim,
        "x must be [tokens, heads, head_dim]"
    );
}

/// NeoX RoPE of one head row `x` (length `d`, even) with the table row `[cos | sin]`, in f64;
/// with it, each output's condition magnitude `|x1 cos| + |x2 sin|` (the size of the terms that
/// cancel), which bounds the rounding error of any implementation.
pub(crate) fn rope_row(x: &[f64], table: Option<&[f64]>, out: &mut [f64], magnitude: &mut [f64]) {
    rope_row_styled(x, table, RopeStyle::NeoX, out, magnitude);
}

/// [`rope_row`] with the pairs of `style`: `(x[i], x[i + d/2])` (NeoX) or `(x[2i], x[2i + 1])`
/// (interleaved), pair `i` rotated by table entries `i` and `d/2 + i`.
pub(crate) fn rope_row_styled(
    x: &[f64],
    table: Option<&[f64]>,
    style: RopeStyle,
    out: &mut [f64],
    magnitude: &mut [f64],
) {
    let half = x.len() / 2;
    for i in 0..half {
        let (c, s) = table.map_or((f64::NAN, f64::NAN), |t| (t[i], t[half + i]));
        let (first, second) = match style {
            RopeStyle::NeoX => (i, half + i),
            RopeStyle::Interleaved => (2 * i, 2 * i + 1),
        };
        let (x1, x2) = (x[first], x[second]);
        out[first] = x1 * c - x2 * s;
        out[second] = x2 * c + x1 * s;
        magnitude[first] = (x1 * c).abs() + (x2 * s).abs();
        magnitude[second] = (x2 * c).abs() + (x1 * s).abs();
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
/// use tileops::ops::reference::rope;
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
    rope_with_style(x, positions, cache, heads, head_dim, RopeStyle::NeoX)
}

/// [`rope`] with the pairs of `style`: NeoX `(x[i], x[i + d/2])`, as [`rope`], or interleaved
/// (GPT-J, candle's `rope_i`) `(x[2i], x[2i + 1])`; pair `i` is rotated by the table row's entries
/// `i` (cos) and `d/2 + i` (sin) in both.
///
/// # Panics
///
/// As [`rope`].
///
/// ```
/// use tileops::ops::RopeStyle;
/// use tileops::ops::reference::rope_with_style;
/// // A quarter turn (cos 0, sin 1) on interleaved pairs: (1, 2) -> (-2, 1), (3, 4) -> (-4, 3).
/// let (y, _) = rope_with_style(&[1.0, 2.0, 3.0, 4.0], &[0], &[0.0, 0.0, 1.0, 1.0], 1, 4, RopeStyle::Interleaved);
/// assert_eq!(y, vec![-2.0, 1.0, -4.0, 3.0]);
/// ```
pub fn rope_with_style(
    x: &[f64],
    positions: &[i64],
    cache: &[f64],
    heads: usize,
    head_dim: usize,
    style: RopeStyle,
) -> (Vec<f64>, Vec<f64>) {
    assert_head_rows(x, positions, heads, head_dim);
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
            rope_row_styled(
                &x[range.clone()],
                table,
                style,
                &mut y[range.clone()],
                &mut magnitude[range],
            );
        }
    }
    (y, magnitude)
}

#[cfg(test)]
mod tests;
