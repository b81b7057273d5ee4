//! `gqa_prefill`: attention prefill of packed variable-length sequences (many query tokens per
//! sequence), grouped query heads, causal or not, with a sliding window and a softcap, on tensor
//! cores.
//!
//! The offsets are host data of the plan, as for decode (FlashInfer's plan/run split): the plan
//! checks them, prices the call from them (only the visible (query, key) pairs count) and sizes
//! the grid from the longest sequence; the `cu_seqlens_*` tensors given to
//! [`forward`](GqaPrefill::forward) are the device copies the kernel reads (the CPU backend
//! checks that they hold the plan's values; the GPU kernel clamps each offset to the tensors'
//! rows, so a stale copy never reads or writes out of bounds).

use cudarc::driver::{DevicePtrMut, LaunchConfig};

use super::decode::{AttentionOutputMut, HEAD_DIMS, aligned, bad_param, bad_shape, check_q_dtype};
use super::reference::PrefillProblem;
use crate::device::CudaDevice;
use crate::kernels::{self, GQA_PREFILL};
use crate::ops::backend::{buffer, buffer_mut, workload_bool, workload_f64, workload_param};
use crate::ops::check_input;
use crate::ops::launch::launch;
use crate::registry::{
    BenchOp, FromWorkload, ManifestOp, RoofKey, StaticValue, Traffic, WorkloadCase,
};
use crate::{DType, Device, Error, Tensor, TensorMut, TensorRef, TensorSpec};

const OP: &str = GqaPrefill::NAME;
/// Query rows one block takes (4 warps of 16 rows: gqa_prefill.cu's kBlockM).
const BLOCK_ROWS: usize = 64;
/// Keys of one K or V tile the kernel streams through shared memory (gqa_prefill.cu's BN).
fn kv_tile(dim: usize) -> usize {
    if dim == 256 { 32 } else { 64 }
}
/// Threads per block (the kernels' `__launch_bounds__`).
const THREADS: u32 = 128;
/// The largest grid extent in y and z (heads and sequences).
const MAX_GRID_YZ: usize = 65_535;

/// Options of an attention prefill. Each one left unset takes the manifest's default
/// (`sm_scale`: `1 / sqrt(head_dim)`; `causal`: false; `softcap`: 0, off; `window_left`: none;
/// `return_lse`: false).
///
/// ```
/// use tileops::ops::PrefillOptions;
///
/// let mistral = PrefillOptions::default().causal(true).window_left(4095);
/// assert_eq!(mistral.window_left_value(), Some(4095));
/// assert_eq!(PrefillOptions::default().causal_value(), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[must_use]
pub struct PrefillOptions {
    sm_scale: Option<f64>,
    causal: Option<bool>,
    softcap: Option<f64>,
    window_left: Option<i64>,
    return_lse: Option<bool>,
}

impl PrefillOptions {
    /// The factor of `q · k` before the softmax (default `1 / sqrt(head_dim)`).
    pub fn sm_scale(mut self, sm_scale: f64) -> Self {
        self.sm_scale = Some(sm_scale);
        self
    }

    /// Query `i` of a sequence of `L_q` queries over `L_k` keys sees no key past
    /// `i + L_k - L_q`: the causal mask aligned to the bottom right, as FlashAttention-2 (≥ 2.1)
    /// and FlashInfer align it, so that a chunk of new queries sees the whole prefix.
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = Some(causal);
        self
    }

    /// Caps the scores as `softcap · tanh(s / softcap)` (Gemma 2 uses 50); 0 turns it off.
    pub fn softcap(mut self, softcap: f64) -> Self {
        self.softcap = Some(softcap);
        self
    }

    /// A sliding window: query `i` sees no key before `i + L_k - L_q - window_left` (it sees
    /// `window_left + 1` keys up to its diagonal); -1 is no window.
    pub fn window_left(mut self, window_left: i64) -> Self {
        self.window_left = Some(window_left);
        self
    }

    /// Also returns the log-sum-exp of each (head, query) row, `lse (H, total_q)` float32,
    /// natural log (`-inf` for a query that sees no key).
    pub fn return_lse(mut self, return_lse: bool) -> Self {
        self.return_lse = Some(return_lse);
        self
    }

    /// The `sm_scale` set, if any.
    pub fn sm_scale_value(&self) -> Option<f64> {
        self.sm_scale
    }

    /// The `causal` set, if any.
    pub fn causal_value(&self) -> Option<bool> {
        self.causal
    }

    /// The `softcap` set, if any.
    pub fn softcap_value(&self) -> Option<f64> {
        self.softcap
    }

    /// The `window_left` set, if any.
    pub fn window_left_value(&self) -> Option<i64> {
        self.window_left
    }

    /// The `return_lse` set, if any.
    pub fn return_lse_value(&self) -> Option<bool> {
        self.return_lse
    }
}

/// What one prefill returns: `o (total_q, H, D)` in q's dtype and, when asked for,
/// `lse (H, total_q)` float32.
#[derive(Debug)]
pub struct PrefillOutput {
    /// The attention output, `(total_q, H, D)` in q's dtype.
    pub o: Tensor,
    /// The natural log-sum-exp of each (head, query) row's scores, `(H, total_q)` float32
    /// (`-inf` for a query that sees no key), when the plan returns it.
    pub lse: Option<Tensor>,
}

impl<'a> From<&'a mut PrefillOutput> for AttentionOutputMut<'a> {
    fn from(out: &'a mut PrefillOutput) -> Self {
        AttentionOutputMut {
            o: TensorMut::from(&mut out.o),
            lse: out.lse.as_mut().map(TensorMut::from),
        }
    }
}

/// Attention prefill over packed variable-length sequences: `q (total_q, H, D)` holds the query
/// tokens of every sequence back to back, `k, v (total_kv, H_kv, D)` their keys and values, and
/// `cu_seqlens_q`, `cu_seqlens_k` (`B + 1` int32) the offsets of each sequence (first 0, last the
/// total), as FlashAttention-2's varlen functions and FlashInfer's ragged prefill take them.
/// Query head `h` reads KV head `h / (H / H_kv)` (GQA; MHA is `H_kv == H`).
/// `o = softmax(sm_scale · q·kᵀ) · v` per sequence and head over the keys each query sees
/// (all of them; with `causal`, those up to its bottom-right-aligned diagonal; with a window,
/// the last `window_left + 1` of those), optionally with a softcap and the log-sum-exp.
///
/// float16 or bfloat16 (q, k and v alike); head dims 64, 128, 256. The GPU kernel is
/// FlashAttention-2's design on tensor cores (`mma.sync`, `ldmatrix`, `cp.async`).
///
/// ```
/// use tileops::ops::{GqaPrefill, PrefillOptions};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// // Two sequences: 3 queries over 5 keys and 2 over 2; 8 query heads on 2 KV heads, dim 64.
/// let (cu_q, cu_k) = ([0, 3, 5], [0, 5, 7]);
/// let q = TensorSpec::new([5, 8, 64], DType::BFloat16);
/// let kv = TensorSpec::new([7, 2, 64], DType::BFloat16);
/// let op = GqaPrefill::new(q.clone(), kv.clone(), kv.clone(), &cu_q, &cu_k,
///     PrefillOptions::default().causal(true), &device)?;
/// // Causal, bottom-right: the first sequence's queries see 3, 4 and 5 keys, the second's 1 and 2.
/// assert_eq!(op.visible_pairs(), 3 + 4 + 5 + 1 + 2);
/// let out = op.forward(
///     &Tensor::random(&q, 1, &device)?,
///     &Tensor::random(&kv, 2, &device)?,
///     &Tensor::random(&kv, 3, &device)?,
///     &Tensor::from_slice(&cu_q, [3], &device)?,
///     &Tensor::from_slice(&cu_k, [3], &device)?,
/// )?;
/// assert_eq!(out.o.shape(), &[5, 8, 64]);
/// // Offsets that do not end at the tensors' totals are refused when the op is planned.
/// assert!(GqaPrefill::new(q, kv.clone(), kv, &[0, 3, 4], &cu_k,
///     PrefillOptions::default(), &device).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[crate::roofline_op("gqa_prefill")]
#[derive(Debug, Clone)]
pub struct GqaPrefill {
    q: TensorSpec,
    k: TensorSpec,
    v: TensorSpec,
    plan: PrefillPlan,
    device: Device,
}

/// A checked prefill plan.
#[derive(Debug, Clone)]
pub(crate) struct PrefillPlan {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub dim: usize,
    pub dtype: DType,
    pub total_q: usize,
    pub total_kv: usize,
    pub cu_seqlens_q: Vec<i32>,
    pub cu_seqlens_k: Vec<i32>,
    pub sm_scale: f64,
    pub softcap: f64,
    pub causal: bool,
    pub window_left: Option<usize>,
    pub return_lse: bool,
    /// Σ over sequences of the (query, key) pairs the mask keeps.
    pub visible_pairs: u64,
    /// The most queries of one sequence.
    pub max_q_len: usize,
}

/// Checks that `cu` is `batch + 1` offsets starting at 0, never decreasing, ending at `total`:
/// the lengths of each sequence, `cu[b + 1] - cu[b]`.
fn check_offsets(field: &'static str, cu: &[i32], total: usize) -> Result<(), Error> {
    if cu.len() < 2 {
        return Err(bad_param(
            OP,
            field,
            format!("{} offsets", cu.len()),
            "needs B + 1 >= 2 offsets (one sequence at least)",
        ));
    }
    if cu[0] != 0 {
        return Err(bad_param(
            OP,
            field,
            format!("{} (offset 0)", cu[0]),
            "the first offset must be 0",
        ));
    }
    if let Some(b) = cu.windows(2).position(|w| w[1] < w[0]) {
        return Err(bad_param(
            OP,
            field,
            format!("{} then {} (offsets {b} and {})", cu[b], cu[b + 1], b + 1),
            "offsets must not decrease (a length is never negative)",
        ));
    }
    let last = cu[cu.len() - 1];
    if last as usize != total {
        return Err(bad_param(
            OP,
            field,
            format!("{last} (the last offset)"),
            &format!("the last offset must be the tensor's total of {total} rows"),
        ));
    }
    Ok(())
}

impl PrefillPlan {
    /// Checks q `[total_q, H, D]`, k and v `[total_kv, H_kv, D]`, the host offsets and the
    /// options.
    fn new(
        q: &TensorSpec,
        k: &TensorSpec,
        v: &TensorSpec,
        cu_seqlens_q: &[i32],
        cu_seqlens_k: &[i32],
        options: PrefillOptions,
    ) -> Result<PrefillPlan, Error> {
        check_q_dtype(OP, q)?;
        let &[total_q, heads, dim] = q.shape.as_slice() else {
            return Err(bad_shape(
                OP,
                "q",
                q,
                "must be rank 3: [total_q, H, D]".to_owned(),
            ));
        };
        if total_q == 0 || heads == 0 {
            return Err(bad_shape(
                OP,
                "q",
                q,
                "empty tensors are not supported (a dimension is 0)".to_owned(),
            ));
        }
        if !HEAD_DIMS.contains(&dim) {
            return Err(bad_shape(
                OP,
                "q",
                q,
                format!("head dim {dim} is not supported; supported: 64, 128, 256"),
            ));
        }
        for (field, spec) in [("k", k), ("v", v)] {
            if spec.dtype != q.dtype {
                return Err(Error::InvalidDType {
                    op: OP,
                    field,
                    value: spec.dtype,
                    supported: format!("q's dtype ({})", q.dtype),
                });
            }
        }
        let &[total_kv, kv_heads, k_dim] = k.shape.as_slice() else {
            return Err(bad_shape(
                OP,
                "k",
                k,
                "must be rank 3: [total_kv, H_kv, D]".to_owned(),
            ));
        };
        if v != k {
            return Err(bad_shape(OP, "v", v, format!("must be {k}, as k")));
        }
        if k_dim != dim {
            return Err(bad_shape(
                OP,
                "k",
                k,
                format!("its head dim must be q's, {dim}"),
            ));
        }
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(bad_shape(
                OP,
                "k",
                k,
                format!(
                    "its {kv_heads} KV heads must divide q's {heads} heads (H % H_kv == 0; MHA is H_kv == H)"
                ),
            ));
        }
        if total_kv == 0 {
            return Err(bad_shape(
                OP,
                "k",
                k,
                "empty tensors are not supported (a dimension is 0)".to_owned(),
            ));
        }
        // Rows and offsets are int32 in the kernel (as cu_seqlens are), byte offsets 64-bit.
        let max_rows = i32::MAX as usize;
        for (field, spec, rows) in [("q", q, total_q), ("k", k, total_kv)] {
            let addressable = spec
                .size_in_bytes()
                .is_ok_and(|bytes| bytes <= isize::MAX as usize);
            if rows > max_rows || !addressable {
                return Err(bad_shape(
                    OP,
                    field,
                    spec,
                    "too large: rows must fit in int32, as cu_seqlens".to_owned(),
                ));
            }
        }
        if heads > MAX_GRID_YZ {
            return Err(bad_shape(
                OP,
                "q",
                q,
                format!("{heads} heads exceed the grid's {MAX_GRID_YZ} (one block row per head)"),
            ));
        }
        if cu_seqlens_q.len() != cu_seqlens_k.len() {
            return Err(bad_param(
                OP,
                "cu_seqlens_k",
                format!("{} offsets", cu_seqlens_k.len()),
                &format!(
                    "must hold as many offsets as cu_seqlens_q ({}): B + 1 each",
                    cu_seqlens_q.len()
                ),
            ));
        }
        check_offsets("cu_seqlens_q", cu_seqlens_q, total_q)?;
        check_offsets("cu_seqlens_k", cu_seqlens_k, total_kv)?;
        let batch = cu_seqlens_q.len() - 1;
        if batch > MAX_GRID_YZ {
            return Err(bad_param(
                OP,
                "cu_seqlens_q",
                format!("{batch} sequences"),
                &format!("at most {MAX_GRID_YZ} sequences a call (one block layer per sequence)"),
            ));
        }

        let sm_scale = options
            .sm_scale
            .unwrap_or_else(|| 1.0 / (dim as f64).sqrt());
        if !(sm_scale.is_finite() && sm_scale > 0.0) {
            return Err(bad_param(
                OP,
                "sm_scale",
                sm_scale.to_string(),
                "must be finite and > 0",
            ));
        }
        let default = |name: &str| GqaPrefill::default_param(name);
        let softcap = match options.softcap {
            Some(softcap) => softcap,
            None => default("softcap").and_then(|v| v.as_f64()).unwrap_or(0.0),
        };
        if !(softcap.is_finite() && softcap >= 0.0) {
            return Err(bad_param(
                OP,
                "softcap",
                softcap.to_string(),
                "must be finite and >= 0 (0 turns it off)",
            ));
        }
        let flag = |set: Option<bool>, name: &str| {
            set.unwrap_or(matches!(default(name), Some(StaticValue::Bool(true))))
        };
        let causal = flag(options.causal, "causal");
        let return_lse = flag(options.return_lse, "return_lse");
        let window = match options.window_left {
            Some(w) => w,
            None => default("window_left")
                .and_then(|v| v.as_int())
                .map_or(-1, |w| w as i64),
        };
        let window_left = match window {
            -1 => None,
            w if (0..=i64::from(i32::MAX)).contains(&w) => Some(w as usize),
            w => {
                return Err(bad_param(
                    OP,
                    "window_left",
                    w.to_string(),
                    "must be -1 (no window) or in 0..=2147483647",
                ));
            }
        };

        // A window as wide as the longest key range cuts no key: it is no window. So the kernel
        // never takes a window near i32::MAX, whose bounds (a query's position less the window,
        // relative to a key) would overflow its ints.
        let longest_k = (0..batch)
            .map(|b| (cu_seqlens_k[b + 1] - cu_seqlens_k[b]) as usize)
            .max()
            .unwrap_or(0);
        let window_left = window_left.filter(|&w| w < longest_k);
        // The kernel's mask bounds (a query's diagonal less the window, relative to a key) stay
        // within an int when a sequence's q_len + 2 k_len does.
        for b in 0..batch {
            let q_len = i64::from(cu_seqlens_q[b + 1] - cu_seqlens_q[b]);
            let k_len = i64::from(cu_seqlens_k[b + 1] - cu_seqlens_k[b]);
            if q_len + 2 * k_len > i64::from(i32::MAX) {
                return Err(bad_param(
                    OP,
                    "cu_seqlens_k",
                    format!("{k_len} keys over {q_len} queries (sequence {b})"),
                    "q_len + 2 x k_len of a sequence must fit the kernel's int, 2147483647",
                ));
            }
        }
        let mut visible_pairs = 0u64;
        let mut max_q_len = 0;
        for b in 0..batch {
            let q_len = (cu_seqlens_q[b + 1] - cu_seqlens_q[b]) as usize;
            let k_len = (cu_seqlens_k[b + 1] - cu_seqlens_k[b]) as usize;
            max_q_len = max_q_len.max(q_len);
            visible_pairs += sequence_pairs(q_len, k_len, causal, window_left);
        }
        Ok(PrefillPlan {
            batch,
            heads,
            kv_heads,
            dim,
            dtype: q.dtype,
            total_q,
            total_kv,
            cu_seqlens_q: cu_seqlens_q.to_vec(),
            cu_seqlens_k: cu_seqlens_k.to_vec(),
            sm_scale,
            softcap,
            causal,
            window_left,
            return_lse,
            visible_pairs,
            max_q_len,
        })
    }

    /// The K and V bytes the kernel streams: each block (64 query rows, one head) loads every
    /// key tile any of its rows sees, whole (the tiles the causal limit or the window leave out
    /// are skipped; the rows past a sequence's end are zero-filled, not read, but cost the same
    /// loop), as gqa_prefill.cu walks them. A K/V head is read once per query head of its group
    /// and per query tile, where the roofline counts it once.
    fn streamed_kv_bytes(&self) -> u64 {
        let bn = kv_tile(self.dim) as i64;
        let mut tiles = 0u64;
        for b in 0..self.batch {
            let lq = i64::from(self.cu_seqlens_q[b + 1] - self.cu_seqlens_q[b]);
            let lk = i64::from(self.cu_seqlens_k[b + 1] - self.cu_seqlens_k[b]);
            let shift = lk - lq;
            for m0 in (0..lq).step_by(BLOCK_ROWS) {
                let m_last = (m0 + BLOCK_ROWS as i64).min(lq) - 1;
                let hi = if self.causal {
                    lk.min(m_last + shift + 1)
                } else {
                    lk
                };
                let lo = self
                    .window_left
                    .map_or(0, |w| (m0 + shift - w as i64).max(0));
                if hi > lo {
                    tiles += ((hi + bn - 1) / bn - lo / bn) as u64;
                }
            }
        }
        let tile_bytes = 2 * bn as u64 * self.dim as u64 * self.dtype.size_in_bytes() as u64;
        tiles * self.heads as u64 * tile_bytes
    }

    /// `cu_seqlens_q` and `cu_seqlens_k`: `[B + 1]` int32.
    fn offsets_spec(&self) -> TensorSpec {
        TensorSpec::new([self.batch + 1], DType::Int32)
    }

    /// `o (total_q, H, D)` in q's dtype, and `lse (H, total_q)` float32 when returned.
    fn output_specs(&self) -> (TensorSpec, Option<TensorSpec>) {
        (
            TensorSpec::new([self.total_q, self.heads, self.dim], self.dtype),
            self.return_lse
                .then(|| TensorSpec::new([self.heads, self.total_q], DType::Float32)),
        )
    }
}

/// The (query, key) pairs one sequence's mask keeps, in closed form: the queries whose visible
/// range is cut by the causal diagonal or the window are counted by arithmetic series, so that
/// pricing a 1M-token plan costs no more than a short one. `reference::visible_keys` is the
/// element-wise definition, which the tests hold this to.
fn sequence_pairs(q_len: usize, k_len: usize, causal: bool, window_left: Option<usize>) -> u64 {
    // Query i's range is [lo(i), hi(i)) with diagonal d(i) = i + k_len - q_len:
    // hi = clamp(d + 1, 0, k_len) with causal (else k_len), lo = clamp(d - w, 0, k_len) with a
    // window (else 0). Both are clamps of linear functions of i, so the count is a sum of
    // clamped ramps: Σ_i clamp(i + c, 0, k_len) has a closed form.
    let (q, k) = (q_len as i128, k_len as i128);
    let offset = k - q;
    let ramp = |c: i128| -> i128 { clamped_ramp_sum(q, c, k) };
    let hi = if causal { ramp(offset + 1) } else { q * k };
    let lo = match window_left {
        Some(w) => ramp(offset - w as i128),
        None => 0,
    };
    // hi(i) >= lo(i) for every i (w >= 0), so the pairs are Σ hi - Σ lo.
    (hi - lo) as u64
}

/// `Σ_{i=0}^{n-1} clamp(i + c, 0, max)`.
fn clamped_ramp_sum(n: i128, c: i128, max: i128) -> i128 {
    // Sum of i + c over i in [a, b) where the ramp lies inside (0, max), plus max for every i
    // past it.
    let sum_linear = |a: i128, b: i128| -> i128 {
        if b <= a {
            0
        } else {
            (b - a) * (a + b - 1) / 2 + (b - a) * c
        }
    };
    // i + c <= 0 for i <= -c; i + c >= max for i >= max - c.
    let a = (-c).clamp(0, n);
    let b = (max - c).clamp(0, n);
    sum_linear(a, b.max(a)) + (n - b.max(a)) * max
}

impl GqaPrefill {
    /// Plans a prefill of q `[total_q, H, D]` over k, v `[total_kv, H_kv, D]` with the host
    /// copies of the offsets, `cu_seqlens_q` and `cu_seqlens_k` (`B + 1` values each).
    ///
    /// Errors when q is not float16/bfloat16 `[total_q, H, D]` with D one of 64, 128, 256; when k
    /// is not `[total_kv, H_kv, D]` in q's dtype, or v differs from it; when H is not a multiple
    /// of H_kv; when the offsets are not `B + 1` each, do not start at 0, decrease, or do not end
    /// at the tensors' totals; when `sm_scale` is not finite and positive, `softcap` negative or
    /// not finite, or `window_left` below -1.
    pub fn new(
        q: TensorSpec,
        k: TensorSpec,
        v: TensorSpec,
        cu_seqlens_q: &[i32],
        cu_seqlens_k: &[i32],
        options: PrefillOptions,
        device: &Device,
    ) -> Result<GqaPrefill, Error> {
        let plan = PrefillPlan::new(&q, &k, &v, cu_seqlens_q, cu_seqlens_k, options)?;
        Ok(GqaPrefill {
            q,
            k,
            v,
            plan,
            device: device.clone(),
        })
    }

    /// The roof an optimal prefill is priced against: the tensor cores in q's dtype (the call is
    /// compute-bound on them at any real length).
    pub fn roof(&self) -> RoofKey {
        RoofKey::tensor_core(self.q.dtype).unwrap_or(RoofKey::CUDA_CORE_FP32)
    }

    /// The q spec the op is planned for.
    pub fn q(&self) -> &TensorSpec {
        &self.q
    }

    /// The k (and v) spec the op is planned for.
    pub fn k(&self) -> &TensorSpec {
        &self.k
    }

    /// The host copy of `cu_seqlens_q`.
    pub fn cu_seqlens_q(&self) -> &[i32] {
        &self.plan.cu_seqlens_q
    }

    /// The host copy of `cu_seqlens_k`.
    pub fn cu_seqlens_k(&self) -> &[i32] {
        &self.plan.cu_seqlens_k
    }

    /// The factor of `q · k`.
    pub fn sm_scale(&self) -> f64 {
        self.plan.sm_scale
    }

    /// The softcap (0 = off).
    pub fn softcap(&self) -> f64 {
        self.plan.softcap
    }

    /// Whether the mask is causal (bottom-right aligned).
    pub fn causal(&self) -> bool {
        self.plan.causal
    }

    /// The sliding window's keys left of the diagonal, if any.
    pub fn window_left(&self) -> Option<usize> {
        self.plan.window_left
    }

    /// Whether `forward` returns the lse.
    pub fn return_lse(&self) -> bool {
        self.plan.return_lse
    }

    /// The (query, key) pairs the mask keeps, over every sequence (per head): what the roofline's
    /// FLOPs count.
    pub fn visible_pairs(&self) -> u64 {
        self.plan.visible_pairs
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The specs of `o` and, when returned, `lse`.
    pub fn output_specs(&self) -> (TensorSpec, Option<TensorSpec>) {
        self.plan.output_specs()
    }

    pub(crate) fn plan(&self) -> &PrefillPlan {
        &self.plan
    }

    /// Runs the prefill into new outputs. `cu_seqlens_q` and `cu_seqlens_k` are the device
    /// copies of the plan's offsets (`[B + 1]` int32 each).
    pub fn forward<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k: impl Into<TensorRef<'t>>,
        v: impl Into<TensorRef<'t>>,
        cu_seqlens_q: impl Into<TensorRef<'t>>,
        cu_seqlens_k: impl Into<TensorRef<'t>>,
    ) -> Result<PrefillOutput, Error> {
        let (q, k, v) = (q.into(), k.into(), v.into());
        let (cu_seqlens_q, cu_seqlens_k) = (cu_seqlens_q.into(), cu_seqlens_k.into());
        let (o, lse) = self.output_specs();
        let mut out = PrefillOutput {
            o: Tensor::empty(&o, &self.device)?,
            lse: lse.map(|s| Tensor::empty(&s, &self.device)).transpose()?,
        };
        self.forward_into(q, k, v, cu_seqlens_q, cu_seqlens_k, &mut out)?;
        Ok(out)
    }

    /// Runs the prefill into `out` (tensors of [`output_specs`](GqaPrefill::output_specs) on the
    /// op's device). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k: impl Into<TensorRef<'t>>,
        v: impl Into<TensorRef<'t>>,
        cu_seqlens_q: impl Into<TensorRef<'t>>,
        cu_seqlens_k: impl Into<TensorRef<'t>>,
        out: impl Into<AttentionOutputMut<'t>>,
    ) -> Result<(), Error> {
        let (q, k, v) = (q.into(), k.into(), v.into());
        let (cu_seqlens_q, cu_seqlens_k) = (cu_seqlens_q.into(), cu_seqlens_k.into());
        let mut out = out.into();
        let device = &self.device;
        check_input(OP, "q", &q, &self.q, device)?;
        check_input(OP, "k", &k, &self.k, device)?;
        check_input(OP, "v", &v, &self.v, device)?;
        let offsets = self.plan.offsets_spec();
        check_input(OP, "cu_seqlens_q", &cu_seqlens_q, &offsets, device)?;
        check_input(OP, "cu_seqlens_k", &cu_seqlens_k, &offsets, device)?;
        let (o_spec, lse_spec) = self.output_specs();
        check_input(OP, "o", &out.o, &o_spec, device)?;
        match (&out.lse, &lse_spec) {
            (Some(lse), Some(spec)) => check_input(OP, "lse", lse, spec, device)?,
            (None, None) => {}
            _ => {
                return Err(bad_param(
                    OP,
                    "lse",
                    if out.lse.is_some() {
                        "given"
                    } else {
                        "missing"
                    }
                    .to_owned(),
                    "the output has an lse exactly when the plan returns it (return_lse)",
                ));
            }
        }
        let inputs = [q, k, v, cu_seqlens_q, cu_seqlens_k];
        match device.cuda_device() {
            None => self.cpu(inputs, &mut out),
            Some(dev) => self.cuda(dev, &inputs, &mut out),
        }
    }

    /// The CPU backend: the f64 reference on host copies, after checking that the device copies
    /// of the offsets hold the plan's values.
    fn cpu(
        &self,
        [q, k, v, cu_q, cu_k]: [TensorRef<'_>; 5],
        out: &mut AttentionOutputMut<'_>,
    ) -> Result<(), Error> {
        let p = &self.plan;
        for (field, tensor, host) in [
            ("cu_seqlens_q", cu_q, &p.cu_seqlens_q),
            ("cu_seqlens_k", cu_k, &p.cu_seqlens_k),
        ] {
            if tensor.host_vec::<i32>()? != *host {
                return Err(bad_param(
                    OP,
                    field,
                    "the tensor".to_owned(),
                    "holds other offsets than the host copy the op was planned with",
                ));
            }
        }
        let result = super::reference::gqa_prefill(&PrefillProblem {
            q: &q.host_f64()?,
            k: &k.host_f64()?,
            v: &v.host_f64()?,
            cu_seqlens_q: &p.cu_seqlens_q,
            cu_seqlens_k: &p.cu_seqlens_k,
            heads: p.heads,
            kv_heads: p.kv_heads,
            dim: p.dim,
            sm_scale: p.sm_scale,
            softcap: p.softcap,
            causal: p.causal,
            window_left: p.window_left,
        });
        out.o.set_host_f64(&result.o)?;
        if let Some(lse) = &mut out.lse {
            lse.set_host_f64(&result.lse)?;
        }
        Ok(())
    }

    /// The CUDA backend: one launch of the tensor-core kernel, a block per (64 query rows,
    /// head, sequence).
    fn cuda<'a>(
        &'a self,
        dev: &'a CudaDevice,
        [q, k, v, cu_q, cu_k]: &'a [TensorRef<'_>; 5],
        out: &mut AttentionOutputMut<'_>,
    ) -> Result<(), Error> {
        let p = &self.plan;
        let stream = &dev.stream;
        let mut guards = Vec::new();
        let mut read = |name: &'static str, tensor: &'a TensorRef<'_>| -> Result<u64, Error> {
            let (ptr, guard) = buffer(OP, name, tensor)?.view_ptr(stream);
            guards.push(guard);
            aligned(OP, ptr)
        };
        let (q, k, v) = (read("q", q)?, read("k", k)?, read("v", v)?);
        let (cu_q, cu_k) = (read("cu_seqlens_q", cu_q)?, read("cu_seqlens_k", cu_k)?);
        let AttentionOutputMut { o, lse } = out;
        let mut o_view = buffer_mut(OP, "o", o)?;
        let (o, o_guard) = o_view.device_ptr_mut(stream);
        let o = aligned(OP, o)?;
        let mut lse_view = lse
            .as_mut()
            .map(|lse| buffer_mut(OP, "lse", lse))
            .transpose()?;
        let (lse, _lse_guard) = match lse_view.as_mut() {
            Some(view) => {
                let (ptr, guard) = view.device_ptr_mut(stream);
                (aligned(OP, ptr)?, Some(guard))
            }
            None => (0, None),
        };
        let entry = entry_name(p.dtype, p.dim)?;
        let q_tiles = u32::try_from(p.max_q_len.div_ceil(BLOCK_ROWS))
            .map_err(|_| Error::launch_refused(OP, "too many query tiles for the grid"))?;
        let cfg = LaunchConfig {
            grid_dim: (q_tiles, p.heads as u32, p.batch as u32),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (total_q, total_kv) = (p.total_q as i32, p.total_kv as i32);
        let (heads, kv_heads) = (p.heads as i32, p.kv_heads as i32);
        let (sm_scale, softcap) = (p.sm_scale as f32, p.softcap as f32);
        let window_left = p.window_left.map_or(-1, |w| w as i32);
        let causal = i32::from(p.causal);
        // SAFETY: gqa_prefill_*(const T* q, const T* k, const T* v, T* o, float* lse,
        // const int* cu_seqlens_q, const int* cu_seqlens_k, int total_q, int total_kv, int H,
        // int H_kv, float sm_scale, float softcap, int window_left, int causal): q and o hold
        // total_q x H x D elements, k and v total_kv x H_kv x D, the offsets B + 1 ints each, lse
        // (written only when not 0) H x total_q floats, as the plan checked (the kernel clamps
        // every offset to the totals, so a device copy that disagrees with the plan stays in
        // bounds); the grid is (ceil(max L_q / 64), H, B) blocks of 128 threads (the launch
        // bounds), static shared memory only; every pointer 16-byte aligned.
        unsafe {
            launch!(dev, &GQA_PREFILL, entry, cfg;
                &q, &k, &v, &o, &lse, &cu_q, &cu_k, &total_q, &total_kv,
                &heads, &kv_heads, &sm_scale, &softcap, &window_left, &causal)?;
        }
        drop((guards, o_guard));
        Ok(())
    }
}

/// The entry point for a dtype and head dim (`gqa_prefill_d128_bf16`).
fn entry_name(dtype: DType, dim: usize) -> Result<&'static str, Error> {
    let base = match dim {
        64 => "gqa_prefill_d64",
        128 => "gqa_prefill_d128",
        256 => "gqa_prefill_d256",
        _ => {
            return Err(Error::launch_refused(
                OP,
                format!("no kernel for head dim {dim}"),
            ));
        }
    };
    kernels::entry(&GQA_PREFILL, base, dtype)
}

/// Offsets of `batch` sequences from their lengths (`lens`), or of `total / batch` each.
fn offsets_of(
    field: &'static str,
    lens: Option<Vec<i32>>,
    batch: usize,
    total: usize,
) -> Result<Vec<i32>, Error> {
    let lens = match lens {
        Some(lens) => lens,
        None => {
            if batch == 0 || !total.is_multiple_of(batch) {
                return Err(bad_param(
                    OP,
                    field,
                    format!("{total} rows over {batch} sequences"),
                    "without explicit lengths the rows must split evenly over the sequences",
                ));
            }
            let each = i32::try_from(total / batch)
                .map_err(|_| bad_param(OP, field, total.to_string(), "too many rows for int32"))?;
            vec![each; batch]
        }
    };
    let mut cu = Vec::with_capacity(lens.len() + 1);
    cu.push(0i32);
    for &len in &lens {
        let next = cu[cu.len() - 1].checked_add(len).ok_or_else(|| {
            bad_param(OP, field, format!("{lens:?}"), "the total overflows int32")
        })?;
        cu.push(next);
    }
    Ok(cu)
}

impl FromWorkload for GqaPrefill {
    /// q, k and v from their shapes in the case dtype; B from `cu_seqlens_q_shape` (`[B + 1]`);
    /// the lengths from `q_lens` / `kv_lens` (else the totals split evenly); the options from
    /// the row, else the manifest's defaults.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let q = case.require_input(OP, "q")?;
        let k = case.require_input(OP, "k")?;
        let v = case.require_input(OP, "v")?;
        let cu = case.require_input_as(OP, "cu_seqlens_q", DType::Int32)?;
        let batch = match cu.shape.as_slice() {
            &[n] if n >= 2 => n - 1,
            _ => {
                return Err(bad_shape(
                    OP,
                    "cu_seqlens_q",
                    &cu,
                    "must be [B + 1] with B >= 1".to_owned(),
                ));
            }
        };
        let lens = |name: &'static str| -> Result<Option<Vec<i32>>, Error> {
            match case.workload.param(name) {
                None | Some(StaticValue::None) => Ok(None),
                Some(value) => value
                    .as_int_list()
                    .and_then(|l| l.into_iter().map(|x| i32::try_from(x).ok()).collect())
                    .map(Some)
                    .ok_or_else(|| {
                        bad_param(
                            OP,
                            name,
                            format!("{value:?}"),
                            "must be a list of int32 lengths",
                        )
                    }),
            }
        };
        let rows = |spec: &TensorSpec| spec.shape.first().copied().unwrap_or(0);
        let cu_q = offsets_of("q_lens", lens("q_lens")?, batch, rows(&q))?;
        let cu_k = offsets_of("kv_lens", lens("kv_lens")?, batch, rows(&k))?;
        let mut options = PrefillOptions::default()
            .causal(workload_bool::<GqaPrefill>(case, "causal")?)
            .softcap(workload_f64::<GqaPrefill>(case, "softcap")?)
            .return_lse(workload_bool::<GqaPrefill>(case, "return_lse")?);
        let window = workload_param::<GqaPrefill>(case, "window_left")?;
        let window = window
            .as_int()
            .and_then(|w| i64::try_from(w).ok())
            .ok_or_else(|| {
                bad_param(
                    OP,
                    "window_left",
                    format!("{window:?}"),
                    "must be an integer",
                )
            })?;
        options = options.window_left(window);
        match workload_param::<GqaPrefill>(case, "sm_scale") {
            Ok(StaticValue::None) | Err(_) => {}
            Ok(value) => {
                let scale = value.as_f64().ok_or_else(|| {
                    bad_param(
                        OP,
                        "sm_scale",
                        format!("{value:?}"),
                        "must be a number or null",
                    )
                })?;
                options = options.sm_scale(scale);
            }
        }
        GqaPrefill::new(q, k, v, &cu_q, &cu_k, options, device)
    }
}

impl BenchOp for GqaPrefill {
    fn roof(&self) -> RoofKey {
        GqaPrefill::roof(self)
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        let mut inputs = Vec::with_capacity(5);
        for (i, spec) in (0u64..).zip([&self.q, &self.k, &self.v]) {
            inputs.push(Tensor::random(spec, seed.wrapping_add(i), &self.device)?);
        }
        self.push_offsets(inputs)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        let inputs = [&self.q, &self.k, &self.v]
            .into_iter()
            .map(|spec| Tensor::empty(spec, &self.device))
            .collect::<Result<Vec<_>, _>>()?;
        self.push_offsets(inputs)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [q, k, v, cu_q, cu_k] = inputs else {
            return Err(Error::Arity {
                op: OP,
                expected: 5,
                got: inputs.len(),
            });
        };
        let out = self.forward(q, k, v, cu_q, cu_k)?;
        Ok(std::iter::once(out.o).chain(out.lse).collect())
    }

    /// The key and value tiles every block's main loop loads (see
    /// `PrefillPlan::streamed_kv_bytes`): the loop the kernel ledger prices. Its Q tile is loaded
    /// once before the loop.
    fn streamed_bytes(&self) -> Option<u64> {
        Some(self.plan.streamed_kv_bytes())
    }

    /// q, k, v and the offsets read once; o and lse written once.
    fn traffic(&self) -> Option<Traffic> {
        let offsets = self.plan.offsets_spec();
        let (o, lse) = self.output_specs();
        Some(Traffic {
            reads: vec![
                self.q.clone(),
                self.k.clone(),
                self.v.clone(),
                offsets.clone(),
                offsets,
            ],
            writes: std::iter::once(o).chain(lse).collect(),
        })
    }
}

impl GqaPrefill {
    /// Appends the device copies of the plan's offsets to `inputs`.
    fn push_offsets(&self, mut inputs: Vec<Tensor>) -> Result<Vec<Tensor>, Error> {
        let n = self.plan.batch + 1;
        inputs.push(Tensor::from_slice(
            &self.plan.cu_seqlens_q,
            [n],
            &self.device,
        )?);
        inputs.push(Tensor::from_slice(
            &self.plan.cu_seqlens_k,
            [n],
            &self.device,
        )?);
        Ok(inputs)
    }
}

/// Attention prefill in one call: plans a [`GqaPrefill`] for the tensors' specs on `q`'s device,
/// with the host copies of the offsets, and runs it. Plan once with [`GqaPrefill::new`] to run
/// the same batch for several layers.
///
/// ```
/// use tileops::ops::{self, PrefillOptions};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let cpu = Device::cpu();
/// let q = Tensor::random(&TensorSpec::new([6, 4, 64], DType::Float16), 1, &cpu)?;
/// let kv = TensorSpec::new([6, 4, 64], DType::Float16);
/// let (k, v) = (Tensor::random(&kv, 2, &cpu)?, Tensor::random(&kv, 3, &cpu)?);
/// let cu = [0, 6];
/// let cu_t = Tensor::from_slice(&cu, [2], &cpu)?;
/// let out = ops::gqa_prefill(&q, &k, &v, (&cu_t, &cu), (&cu_t, &cu),
///     PrefillOptions::default().causal(true))?;
/// assert_eq!(out.o.shape(), &[6, 4, 64]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn gqa_prefill(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    (cu_seqlens_q, cu_q): (&Tensor, &[i32]),
    (cu_seqlens_k, cu_k): (&Tensor, &[i32]),
    options: PrefillOptions,
) -> Result<PrefillOutput, Error> {
    GqaPrefill::new(
        q.spec().clone(),
        k.spec().clone(),
        v.spec().clone(),
        cu_q,
        cu_k,
        options,
        q.device(),
    )?
    .forward(q, k, v, cu_seqlens_q, cu_seqlens_k)
}

#[cfg(test)]
mod tests {
    use super::super::reference::visible_keys;
    use super::*;

    #[test]
    fn the_closed_form_counts_the_visible_pairs() {
        for q_len in [0, 1, 2, 5, 16, 17, 64] {
            for k_len in [0, 1, 3, 5, 16, 64, 100] {
                for causal in [false, true] {
                    for window in [None, Some(0), Some(1), Some(7), Some(63), Some(1000)] {
                        let want: usize = (0..q_len)
                            .map(|i| visible_keys(i, q_len, k_len, causal, window).len())
                            .sum();
                        assert_eq!(
                            sequence_pairs(q_len, k_len, causal, window),
                            want as u64,
                            "q {q_len} k {k_len} causal {causal} window {window:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_kernel_streams_each_kv_tile_once_per_query_tile_and_head() {
        let plan = |q: &[i32], k: &[i32], options: PrefillOptions, dim: usize| {
            let spec = |rows: i32, heads: usize| {
                TensorSpec::new([rows as usize, heads, dim], DType::BFloat16)
            };
            let (tq, tk) = (q[q.len() - 1], k[k.len() - 1]);
            PrefillPlan::new(&spec(tq, 4), &spec(tk, 2), &spec(tk, 2), q, k, options).unwrap()
        };
        let tile = |dim: u64, bn: u64| 2 * bn * dim * 2;
        // One sequence of 128 queries over 128 keys, non-causal: 2 query tiles x 2 key tiles x 4
        // heads.
        let p = plan(&[0, 128], &[0, 128], PrefillOptions::default(), 128);
        assert_eq!(p.streamed_kv_bytes(), 2 * 2 * 4 * tile(128, 64));
        // Causal: the first query tile sees only the first key tile.
        let p = plan(
            &[0, 128],
            &[0, 128],
            PrefillOptions::default().causal(true),
            128,
        );
        assert_eq!(p.streamed_kv_bytes(), (1 + 2) * 4 * tile(128, 64));
        // 65 queries over 100 keys, causal (diagonal shift 35), D = 256 (key tiles of 32): query
        // tile 0 (rows 0..63) sees keys < 99, 4 tiles; tile 1 (row 64) all 100, 4 tiles.
        let p = plan(
            &[0, 65],
            &[0, 100],
            PrefillOptions::default().causal(true),
            256,
        );
        assert_eq!(p.streamed_kv_bytes(), (4 + 4) * 4 * tile(256, 32));
        // A window of 10 keys: tile 0 sees keys 25..99 (tiles 0..4, from tile 0), tile 1 keys
        // 89..100 (tiles 2..4).
        let options = PrefillOptions::default().causal(true).window_left(10);
        let p = plan(&[0, 65], &[0, 100], options, 256);
        assert_eq!(p.streamed_kv_bytes(), (4 + 2) * 4 * tile(256, 32));
        // Queries that see no key (20 over 5, causal: rows 0..14 see none) still run their tile,
        // which sees key tile 0.
        let p = plan(
            &[0, 20],
            &[0, 5],
            PrefillOptions::default().causal(true),
            64,
        );
        assert_eq!(p.streamed_kv_bytes(), 4 * tile(64, 64));
    }

    #[test]
    fn offsets_are_checked() {
        assert!(check_offsets("cu_seqlens_q", &[0, 3, 5], 5).is_ok());
        for (cu, total) in [
            (&[0][..], 0),
            (&[1, 5][..], 5),
            (&[0, 3, 2, 5][..], 5),
            (&[0, 3, 4][..], 5),
        ] {
            assert!(check_offsets("cu_seqlens_q", cu, total).is_err(), "{cu:?}");
        }
        assert_eq!(
            offsets_of("q_lens", None, 4, 2048).unwrap(),
            [0, 512, 1024, 1536, 2048]
        );
        assert_eq!(
            offsets_of("q_lens", Some(vec![1, 0, 3]), 3, 4).unwrap(),
            [0, 1, 1, 4]
        );
        assert!(offsets_of("q_lens", None, 3, 2048).is_err());
        assert!(offsets_of("q_lens", Some(vec![i32::MAX, 1]), 2, 0).is_err());
    }
}
