//! The f64 reference of `gemm`: the CPU path of [`Gemm`](super::Gemm) and the yardstick of its
//! GPU tests.
//!
//! Each output element is `sum_k a[i, k] * b[k, j]` accumulated in f64 **in order of k**, exactly
//! as the naive triple loop would: the blocking below changes which element is worked on when,
//! never the order of one element's additions, so the result is bit-for-bit the naive one (and
//! the same with any number of threads). f64 rather than f32 accumulation because this is the
//! yardstick: its own error (about `K * 2^-53` relative to `sum |a||b|`) must sit far under the
//! error of the strict float32 GPU path it judges (about `K * 2^-24`).
//!
//! Speed: the loops are blocked for the caches (a `KC x NC` panel of B, 256 KiB, stays in L2; a
//! `MR x NR` tile of C stays in registers across the panel) and row blocks run on
//! `std::thread::scope` threads, so a 1024^3 product takes a fraction of a second in a release
//! build instead of the minutes a cache-oblivious `i, j, k` loop over a transposed operand takes.

/// Rows of C one micro-tile holds in registers.
const MR: usize = 4;
/// Columns of C one micro-tile holds (a multiple of every SIMD width LLVM targets).
const NR: usize = 8;
/// Depth of one panel of B (and of A).
const KC: usize = 256;
/// Width of one panel of B: `KC * NC` f64 = 256 KiB, in L2.
const NC: usize = 128;
/// Products below this many multiply-adds run on the calling thread.
const THREAD_THRESHOLD: usize = 1 << 22;

/// `op(a) @ op(b)` for row-major `a` and `b`, with `op(t) = t.T` when its flag is set: `a` is
/// stored `[m, k]` (`[k, m]` with `trans_a`), `b` is stored `[k, n]` (`[n, k]` with `trans_b`),
/// and the result is row-major `[m, n]`, accumulated in f64 in order of `k`.
///
/// NaN and infinities propagate as IEEE arithmetic has them (`0 * inf` is NaN).
///
/// # Panics
///
/// When `a.len() != m * k` or `b.len() != k * n` (the op validates shapes before calling it).
///
/// ```
/// use tileops::ops::reference_gemm::gemm;
/// // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]]
/// let c = gemm(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0], 2, 2, 2, false, false);
/// assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
/// // The same b stored transposed ([n, k]) with trans_b.
/// let c_t = gemm(&[1.0, 2.0, 3.0, 4.0], &[5.0, 7.0, 6.0, 8.0], 2, 2, 2, false, true);
/// assert_eq!(c_t, c);
/// ```
pub fn gemm(
    a: &[f64],
    b: &[f64],
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
) -> Vec<f64> {
    assert_eq!(a.len(), m * k, "a must hold m * k values");
    assert_eq!(b.len(), k * n, "b must hold k * n values");
    // Row-major [m, k] and [k, n] copies where the storage is transposed: the blocked loops
    // then read both operands along contiguous rows.
    let a_rows = if trans_a {
        transpose(a, k, m)
    } else {
        a.to_vec()
    };
    let b_rows = if trans_b {
        transpose(b, n, k)
    } else {
        b.to_vec()
    };
    let mut c = vec![0.0; m * n];
    if m == 0 || n == 0 {
        return c;
    }
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let work = m.saturating_mul(n).saturating_mul(k);
    if threads <= 1 || work < THREAD_THRESHOLD || m <= MR {
        multiply_rows(&a_rows, &b_rows, &mut c, m, n, k);
        return c;
    }
    // Row blocks, a multiple of MR each, one per thread.
    let rows_per = m.div_ceil(threads).next_multiple_of(MR);
    std::thread::scope(|scope| {
        for (a_block, c_block) in a_rows
            .chunks(rows_per * k.max(1))
            .zip(c.chunks_mut(rows_per * n))
        {
            let b_rows = &b_rows;
            let rows = c_block.len() / n;
            scope.spawn(move || multiply_rows(a_block, b_rows, c_block, rows, n, k));
        }
    });
    c
}

/// The row-major transpose of a row-major `[rows, cols]` matrix.
fn transpose(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; x.len()];
    // 32 x 32 tiles: both sides stay in L1.
    for r0 in (0..rows).step_by(32) {
        for c0 in (0..cols).step_by(32) {
            for r in r0..(r0 + 32).min(rows) {
                for col in c0..(c0 + 32).min(cols) {
                    t[col * rows + r] = x[r * cols + col];
                }
            }
        }
    }
    t
}

/// `c[rows, n] += a[rows, k] @ b[k, n]`, all row-major, blocked for the caches.
fn multiply_rows(a: &[f64], b: &[f64], c: &mut [f64], rows: usize, n: usize, k: usize) {
    for jc in (0..n).step_by(NC) {
        let j_end = (jc + NC).min(n);
        for pc in (0..k).step_by(KC) {
            let p_end = (pc + KC).min(k);
            for ir in (0..rows).step_by(MR) {
                let i_end = (ir + MR).min(rows);
                for jr in (jc..j_end).step_by(NR) {
                    let tile = Tile {
                        rows: ir..i_end,
                        cols: jr..(jr + NR).min(j_end),
                        depth: pc..p_end,
                    };
                    if tile.rows.len() == MR && tile.cols.len() == NR {
                        full_tile(a, b, c, n, k, &tile);
                    } else {
                        edge_tile(a, b, c, n, k, &tile);
                    }
                }
            }
        }
    }
}

/// One block of C and the slice of k it accumulates.
struct Tile {
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    depth: std::ops::Range<usize>,
}

/// An `MR x NR` tile of C accumulated in registers over `tile.depth`.
#[inline(always)]
fn full_tile(a: &[f64], b: &[f64], c: &mut [f64], n: usize, k: usize, tile: &Tile) {
    let (i0, j0) = (tile.rows.start, tile.cols.start);
    let mut acc = [[0.0f64; NR]; MR];
    for (r, acc_row) in acc.iter_mut().enumerate() {
        acc_row.copy_from_slice(&c[(i0 + r) * n + j0..][..NR]);
    }
    let a_rows: [&[f64]; MR] =
        std::array::from_fn(|r| &a[(i0 + r) * k + tile.depth.start..(i0 + r) * k + tile.depth.end]);
    for (d, p) in tile.depth.clone().enumerate() {
        let b_row = &b[p * n + j0..][..NR];
        for (acc_row, a_row) in acc.iter_mut().zip(&a_rows) {
            let av = a_row[d];
            for (acc_v, &bv) in acc_row.iter_mut().zip(b_row) {
                *acc_v += av * bv;
            }
        }
    }
    for (r, acc_row) in acc.iter().enumerate() {
        c[(i0 + r) * n + j0..][..NR].copy_from_slice(acc_row);
    }
}

/// A partial tile at the right or bottom edge: the same order of additions, element by element.
fn edge_tile(a: &[f64], b: &[f64], c: &mut [f64], n: usize, k: usize, tile: &Tile) {
    for i in tile.rows.clone() {
        for j in tile.cols.clone() {
            let mut acc = c[i * n + j];
            for p in tile.depth.clone() {
                acc += a[i * k + p] * b[p * n + j];
            }
            c[i * n + j] = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive loop the blocked one must match bit for bit.
    fn naive(a: &[f64], b: &[f64], m: usize, n: usize, k: usize, ta: bool, tb: bool) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let av = if ta { a[p * m + i] } else { a[i * k + p] };
                    let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                    s += av * bv;
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    /// Values with plenty of rounding in their products, deterministic.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_the_naive_loop_bit_for_bit_in_every_layout() {
        // Shapes straddling MR, NR, KC and NC, and the threading threshold.
        for (m, n, k) in [
            (1, 1, 1),
            (1, 9, 3),
            (5, 1, 7),
            (4, 8, 256),
            (7, 17, 300),
            (13, 130, 257),
            (70, 150, 520),
            (33, 129, 1),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = values(m * k, (m * 31 + k) as u64);
                let b = values(k * n, (n * 17 + k) as u64);
                let got = gemm(&a, &b, m, n, k, ta, tb);
                let want = naive(&a, &b, m, n, k, ta, tb);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "{m}x{n}x{k} trans_a={ta} trans_b={tb}"
                );
            }
        }
    }

    #[test]
    fn non_finite_values_propagate() {
        let inf = f64::INFINITY;
        // Row 0 of a holds an inf meeting a 0 (NaN), row 1 a NaN, row 2 an inf meeting 2.
        let a = [inf, 1.0, f64::NAN, 1.0, 1.0, inf];
        let b = [0.0, 1.0, 1.0, 2.0];
        let c = gemm(&a, &b, 3, 2, 2, false, false);
        assert!(c[0].is_nan(), "{c:?}");
        assert_eq!(c[1], inf);
        assert!(c[2].is_nan() && c[3].is_nan(), "{c:?}");
        assert_eq!(&c[4..], &[inf, inf]);
    }

    /// The 1024^3 product must take seconds, not minutes. In a release build it runs in full
    /// (a fraction of a second on two cores); a debug build, some 30x slower per
    /// multiply-add, runs a 384^3 product (a twentieth of the work) to stay well under ~10 s.
    #[test]
    fn a_large_product_is_fast_and_exact() {
        let size = if cfg!(debug_assertions) { 384 } else { 1024 };
        let a = values(size * size, 1);
        let b = values(size * size, 2);
        let started = std::time::Instant::now();
        let c = gemm(&a, &b, size, size, size, false, true);
        let elapsed = started.elapsed();
        println!("reference gemm {size}^3: {elapsed:?}");
        // Spot checks against the naive sum, bit for bit.
        for (i, j) in [
            (0, 0),
            (size - 1, size - 1),
            (size / 3, size / 2 + 1),
            (7, size - 5),
        ] {
            let mut s = 0.0;
            for p in 0..size {
                s += a[i * size + p] * b[j * size + p];
            }
            assert_eq!(c[i * size + j].to_bits(), s.to_bits(), "({i}, {j})");
        }
        assert!(elapsed.as_secs() < 60, "{size}^3 took {elapsed:?}");
    }
}
