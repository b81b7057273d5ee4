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

/// One packed variable-length prefill problem (f64 values): `q [total_q, H, D]`,
/// `k`, `v [total_kv, H_kv, D]`, the offsets of each sequence and the options.
#[derive(Debug, Clone, Copy)]
pub struct PrefillProblem<'a> {
    /// `[total_q, H, D]`, row-major.
    pub q: &'a [f64],
    /// `[total_kv, H_kv, D]`.
    pub k: &'a [f64],
    /// `[total_kv, H_kv, D]`.
    pub v: &'a [f64],
    /// `B + 1` offsets into q's rows: sequence b's queries are rows `cu_seqlens_q[b]..cu_seqlens_q[b + 1]`.
    pub cu_seqlens_q: &'a [i32],
    /// `B + 1` offsets into k's and v's rows.
    pub cu_seqlens_k: &'a [i32],
    /// H, the query heads.
    pub heads: usize,
    /// H_kv, the KV heads: query head h reads KV head `h / (H / H_kv)`.
    pub kv_heads: usize,
    /// D.
    pub dim: usize,
    /// The factor of `q · k`.
    pub sm_scale: f64,
    /// `softcap · tanh(s / softcap)` on each score; 0 = off.
    pub softcap: f64,
    /// Query i of a sequence sees no key past `i + L_k - L_q` (bottom-right aligned).
    pub causal: bool,
    /// With `Some(w)`, query i sees no key before `i + L_k - L_q - w`.
    pub window_left: Option<usize>,
}

/// The outputs of [`gqa_prefill`].
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillResult {
    /// `[total_q, H, D]`.
    pub o: Vec<f64>,
    /// `[H, total_q]`, the natural log-sum-exp of each row's scores; `-inf` for a query that
    /// sees no key.
    pub lse: Vec<f64>,
}

/// The keys query `i` of a sequence of `q_len` queries over `k_len` keys sees: `lo..hi` (empty
/// when `lo >= hi`). The diagonal is bottom-right aligned: query `i` sits at key position
/// `i + k_len - q_len`, so the last query sees every key with `causal`, and a sequence with more
/// queries than keys has leading queries that see none.
///
/// ```
/// use tileops::ops::reference::visible_keys;
///
/// // FlashAttention-2's example: 2 queries over 5 keys, causal: 11110 and 11111.
/// assert_eq!(visible_keys(0, 2, 5, true, None), 0..4);
/// assert_eq!(visible_keys(1, 2, 5, true, None), 0..5);
/// // A window of 1 key to the left of the diagonal.
/// assert_eq!(visible_keys(1, 2, 5, true, Some(1)), 3..5);
/// // 3 queries over 1 key: the first two see nothing.
/// assert!(visible_keys(1, 3, 1, true, None).is_empty());
/// ```
pub fn visible_keys(
    i: usize,
    q_len: usize,
    k_len: usize,
    causal: bool,
    window_left: Option<usize>,
) -> std::ops::Range<usize> {
    // The diagonal's key position, which may be negative (more queries than keys).
    let diagonal = i as i128 + k_len as i128 - q_len as i128;
    let hi = if causal {
        (diagonal + 1).clamp(0, k_len as i128)
    } else {
        k_len as i128
    };
    let lo = match window_left {
        Some(w) => (diagonal - w as i128).clamp(0, k_len as i128),
        None => 0,
    };
    lo as usize..hi.max(lo) as usize
}

/// Attention prefill of packed variable-length sequences in f64: for each sequence b, query row
/// i and head h, `s_j = q · k_j · sm_scale` (capped when `softcap > 0`) over the keys
/// [`visible_keys`] gives, `o = Σ_j softmax(s)_j v_j`, `lse = log Σ_j exp(s_j)`. A query that
/// sees no key gives `o = 0` and `lse = -inf`. Returns `o [total_q, H, D]` and
/// `lse [H, total_q]`.
///
/// ```
/// use tileops::ops::reference::{PrefillProblem, gqa_prefill};
///
/// // One sequence of 2 queries over 2 keys, one head of dim 1, causal: query 0 sees key 0 only.
/// let r = gqa_prefill(&PrefillProblem {
///     q: &[1.0, 1.0], k: &[0.0, 1.0], v: &[3.0, 5.0],
///     cu_seqlens_q: &[0, 2], cu_seqlens_k: &[0, 2],
///     heads: 1, kv_heads: 1, dim: 1, sm_scale: 1.0, softcap: 0.0, causal: true, window_left: None,
/// });
/// let e = std::f64::consts::E;
/// assert_eq!(r.o[0], 3.0);
/// assert!((r.o[1] - (3.0 + 5.0 * e) / (1.0 + e)).abs() < 1e-15);
/// assert!((r.lse[1] - (1.0 + e).ln()).abs() < 1e-15);
/// ```
pub fn gqa_prefill(p: &PrefillProblem<'_>) -> PrefillResult {
    let (heads, dim) = (p.heads, p.dim);
    let group = heads / p.kv_heads;
    let total_q = p.q.len() / (heads * dim);
    let mut o = vec![0.0; total_q * heads * dim];
    let mut lse = vec![f64::NEG_INFINITY; heads * total_q];
    let mut scores = Vec::new();
    for b in 0..p.cu_seqlens_q.len().saturating_sub(1) {
        let (q0, q1) = (p.cu_seqlens_q[b] as usize, p.cu_seqlens_q[b + 1] as usize);
        let (k0, k1) = (p.cu_seqlens_k[b] as usize, p.cu_seqlens_k[b + 1] as usize);
        for i in 0..q1 - q0 {
            let keys = visible_keys(i, q1 - q0, k1 - k0, p.causal, p.window_left);
            let row = q0 + i;
            for h in 0..heads {
                let kvh = h / group;
                let kv_at = |key: usize| ((k0 + key) * p.kv_heads + kvh) * dim;
                let q = &p.q[(row * heads + h) * dim..][..dim];
                scores.clear();
                scores.extend(keys.clone().map(|key| {
                    let k = &p.k[kv_at(key)..][..dim];
                    let s = q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() * p.sm_scale;
                    if p.softcap > 0.0 {
                        p.softcap * (s / p.softcap).tanh()
                    } else {
                        s
                    }
                }));
                if scores.is_empty() {
                    continue;
                }
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                lse[h * total_q + row] = max + sum.ln();
                let out = &mut o[(row * heads + h) * dim..][..dim];
                for (key, s) in keys.clone().zip(&scores) {
                    let weight = (s - max).exp() / sum;
                    for (acc, v) in out.iter_mut().zip(&p.v[kv_at(key)..][..dim]) {
                        *acc += weight * v;
                    }
                }
            }
        }
    }
    PrefillResult { o, lse }
}
