//! The f64 references of the attention family: the CPU backends and the yardstick of the GPU
//! tests.

/// One decode problem: q `[B, H, D]` (f64 values), the lengths, the options and the scales of an
/// fp8 cache (1 for a 16-bit one).
#[derive(Debug, Clone, Copy)]
pub struct DecodeProblem<'a> {
    /// `[B, H, D]`, row-major.
    pub q: &'a [f64],
    /// B.
    pub batch: usize,
    /// H, the query heads.
    pub heads: usize,
    /// H_kv, the KV heads: query head h reads KV head `h / (H / H_kv)`.
    pub kv_heads: usize,
    /// D.
    pub dim: usize,
    /// The keys of each sequence.
    pub lens: &'a [i32],
    /// The factor of `q · k`.
    pub sm_scale: f64,
    /// `softcap · tanh(s / softcap)` on each score; 0 = off.
    pub softcap: f64,
    /// Multiplies every key (an fp8 cache's dequantisation).
    pub k_scale: f64,
    /// Multiplies every value.
    pub v_scale: f64,
}

/// The outputs of [`gqa_decode`].
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeResult {
    /// `[B, H, D]`.
    pub o: Vec<f64>,
    /// `[B, H]`, the natural log-sum-exp of each row's scores; `-inf` for an empty sequence.
    pub lse: Vec<f64>,
}

/// Attention of one query token per sequence over its first `lens[b]` keys, in f64:
/// `s_j = q · (k_scale k_j) · sm_scale` (capped when `softcap > 0`), `p = softmax(s)`,
/// `o = Σ_j p_j (v_scale v_j)`, `lse = log Σ_j exp(s_j)`. An empty sequence gives `o = 0` and
/// `lse = -inf`, as FlashInfer. `kv(b, key, kv_head)` returns the key and the value, D values
/// each.
///
/// ```
/// use tileops::ops::reference::{DecodeProblem, gqa_decode};
///
/// // One sequence of two keys, one head of dim 2: the scores are 0 and 1 (sm_scale 1).
/// let (keys, values) = ([[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]);
/// let r = gqa_decode(
///     &DecodeProblem {
///         q: &[1.0, 0.0], batch: 1, heads: 1, kv_heads: 1, dim: 2, lens: &[2],
///         sm_scale: 1.0, softcap: 0.0, k_scale: 1.0, v_scale: 1.0,
///     },
///     |_, key, _| (&keys[key][..], &values[key][..]),
/// );
/// let e = std::f64::consts::E;
/// assert!((r.o[1] - e / (1.0 + e)).abs() < 1e-15);
/// assert!((r.lse[0] - (1.0 + e).ln()).abs() < 1e-15);
/// ```
pub fn gqa_decode<'kv>(
    p: &DecodeProblem<'_>,
    kv: impl Fn(usize, usize, usize) -> (&'kv [f64], &'kv [f64]),
) -> DecodeResult {
    let (heads, dim) = (p.heads, p.dim);
    let group = heads / p.kv_heads;
    let mut o = vec![0.0; p.batch * heads * dim];
    let mut lse = vec![f64::NEG_INFINITY; p.batch * heads];
    let mut scores = Vec::new();
    for b in 0..p.batch {
        let len = p.lens[b].max(0) as usize;
        for h in 0..heads {
            let kvh = h / group;
            let q = &p.q[(b * heads + h) * dim..][..dim];
            scores.clear();
            scores.extend((0..len).map(|key| {
                let dot: f64 = q.iter().zip(kv(b, key, kvh).0).map(|(a, k)| a * k).sum();
                let s = dot * p.k_scale * p.sm_scale;
                if p.softcap > 0.0 {
                    p.softcap * (s / p.softcap).tanh()
                } else {
                    s
                }
            }));
            if len == 0 {
                continue;
            }
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            lse[b * heads + h] = max + sum.ln();
            let out = &mut o[(b * heads + h) * dim..][..dim];
            for (key, s) in scores.iter().enumerate() {
                let weight = (s - max).exp() / sum * p.v_scale;
                for (acc, v) in out.iter_mut().zip(kv(b, key, kvh).1) {
                    *acc += weight * v;
                }
            }
        }
    }
    DecodeResult { o, lse }
}
