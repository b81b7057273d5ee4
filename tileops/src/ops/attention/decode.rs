//! What the two decode ops share: the plan (shapes, dtypes, the host copy of the lengths and of the
//! block table, the options), its checks, the split-KV launch and the CPU path.
//!
//! The lengths are host data at plan time, as in FlashInfer's plan/run split: a serving loop plans
//! once per decoding step (the lengths change every step) and runs the plan for every layer. The
//! plan sizes the split-KV grid from them, prices the call from them (the func-mode roofline of
//! `tileops::perf::formulas`), and checks them, with every block-table entry a sequence uses,
//! before anything is launched. The device copies are inputs of the launch; the kernel clamps a
//! length to the cache's capacity and never reads through a page index outside the pool, so a
//! device copy that disagrees with the plan cannot read out of bounds.

use cudarc::driver::{DevicePtrMut, LaunchConfig};

use crate::device::CudaDevice;
use crate::kernels::{self, GQA_DECODE};
use crate::ops::backend::{buffer, buffer_mut, workload_bool, workload_f64, workload_param};
use crate::ops::check_input;
use crate::ops::launch::{grid_dim, launch};
use crate::registry::{ManifestOp, StaticValue, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorMut, TensorRef, TensorSpec};

/// The head dims the kernels are written for.
pub(crate) const HEAD_DIMS: [usize; 3] = [64, 128, 256];

/// The attention ops' check of q's dtype: float16 or bfloat16. float32 is refused, not computed:
/// the kernels take 16-bit inputs (the prefill's tensor cores, the decode's 16-byte loads of 8
/// keys' elements), as FlashAttention's and FlashInfer's do, and a float32 path run at 16-bit
/// precision inside would hide the rounding from its caller. The error names the cast to make.
pub(crate) fn check_q_dtype(op: &'static str, q: &TensorSpec) -> Result<(), Error> {
    if matches!(q.dtype, DType::Float16 | DType::BFloat16) {
        return Ok(());
    }
    Err(Error::InvalidDType {
        op,
        field: "q",
        value: q.dtype,
        supported: "float16, bfloat16 (cast float32 inputs to bfloat16 first, as FlashAttention \
                    requires)"
            .to_owned(),
    })
}
/// Threads per block of the decode kernels (their `__launch_bounds__`).
const THREADS: u32 = 128;
/// Keys a lane group takes per step (`kTileKeys` in gqa_decode.cu).
const TILE_KEYS: usize = 4;
/// Resident decode blocks per SM the grid is sized for (up to 255 registers x 128 threads: 2 fit).
const BLOCKS_PER_SM: usize = 2;
/// Blocks the split-KV grid aims at, per SM: two full waves of resident blocks, so the last wave's
/// imbalance costs little.
const TARGET_BLOCKS_PER_SM: usize = 2 * BLOCKS_PER_SM;
/// The fewest steps of keys a split is given: a block must do enough work to hide its start.
const MIN_STEPS_PER_SPLIT: usize = 2;

/// Options of an attention decode, shared by [`GqaDecode`](super::GqaDecode) and
/// [`GqaDecodePaged`](super::GqaDecodePaged). Each one left unset takes the manifest's default
/// (`sm_scale`: `1 / sqrt(head_dim)`; `softcap`: 0, off; `return_lse`: false).
///
/// ```
/// use tileops::ops::DecodeOptions;
///
/// let gemma = DecodeOptions::default().softcap(50.0).return_lse(true);
/// assert_eq!(gemma.softcap_value(), Some(50.0));
/// assert_eq!(DecodeOptions::default().sm_scale_value(), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[must_use]
pub struct DecodeOptions {
    sm_scale: Option<f64>,
    softcap: Option<f64>,
    return_lse: Option<bool>,
    max_splits: Option<usize>,
}

impl DecodeOptions {
    /// The factor of `q · k` before the softmax (default `1 / sqrt(head_dim)`).
    pub fn sm_scale(mut self, sm_scale: f64) -> Self {
        self.sm_scale = Some(sm_scale);
        self
    }

    /// Caps the scores as `softcap · tanh(s / softcap)` (Gemma 2 uses 50); 0 turns it off.
    pub fn softcap(mut self, softcap: f64) -> Self {
        self.softcap = Some(softcap);
        self
    }

    /// Also returns the log-sum-exp of each (sequence, head) row, `lse (B, H)` float32, natural
    /// log, as a caller needs to merge partial attentions (a cascade over a shared prefix).
    pub fn return_lse(mut self, return_lse: bool) -> Self {
        self.return_lse = Some(return_lse);
        self
    }

    /// Cuts each sequence's keys into at most this many split-KV chunks (default: as many as
    /// fill the GPU). 1 is the one-pass kernel, whose results do not depend on the GPU's SM
    /// count (batch-invariant decoding); it leaves SMs idle when the batch is small.
    pub fn max_splits(mut self, max_splits: usize) -> Self {
        self.max_splits = Some(max_splits);
        self
    }

    /// The `sm_scale` set, if any.
    pub fn sm_scale_value(&self) -> Option<f64> {
        self.sm_scale
    }

    /// The `softcap` set, if any.
    pub fn softcap_value(&self) -> Option<f64> {
        self.softcap
    }

    /// The `return_lse` set, if any.
    pub fn return_lse_value(&self) -> Option<bool> {
        self.return_lse
    }
}

/// What one call returns: `o (B, H, D)` in q's dtype and, when asked for, `lse (B, H)` float32.
#[derive(Debug)]
pub struct DecodeOutput {
    /// The attention output, `(B, H, D)` in q's dtype.
    pub o: Tensor,
    /// The natural log-sum-exp of each row's scores, `(B, H)` float32 (`-inf` for an empty
    /// sequence), when the plan returns it.
    pub lse: Option<Tensor>,
}

/// The outputs of an attention call borrowed for writing: what `forward_into` of
/// [`GqaDecode`](crate::ops::GqaDecode), [`GqaDecodePaged`](crate::ops::GqaDecodePaged) and
/// [`GqaPrefill`](crate::ops::GqaPrefill) take. `&mut DecodeOutput` and `&mut PrefillOutput`
/// convert into it; a caller writing its own memory builds it from [`TensorMut`]s.
#[derive(Debug)]
pub struct AttentionOutputMut<'a> {
    /// The attention output, in q's dtype.
    pub o: TensorMut<'a>,
    /// The log-sum-exp, float32, exactly when the plan returns it.
    pub lse: Option<TensorMut<'a>>,
}

impl<'a> From<&'a mut DecodeOutput> for AttentionOutputMut<'a> {
    fn from(out: &'a mut DecodeOutput) -> Self {
        AttentionOutputMut {
            o: TensorMut::from(&mut out.o),
            lse: out.lse.as_mut().map(TensorMut::from),
        }
    }
}

/// The `(k_scale, v_scale)` of an fp8 cache (`[1]` float32 each), or none for a 16-bit cache,
/// as the decode ops take them: `None` and `Some((&k_scale, &v_scale))` convert into it, and so
/// does a pair of borrowed tensors.
#[derive(Debug)]
pub struct KvScales<'a>(pub Option<(TensorRef<'a>, TensorRef<'a>)>);

impl<'a> From<Option<(&'a Tensor, &'a Tensor)>> for KvScales<'a> {
    fn from(scales: Option<(&'a Tensor, &'a Tensor)>) -> Self {
        KvScales(scales.map(|(k, v)| (TensorRef::from(k), TensorRef::from(v))))
    }
}

impl<'a> From<(TensorRef<'a>, TensorRef<'a>)> for KvScales<'a> {
    fn from(scales: (TensorRef<'a>, TensorRef<'a>)) -> Self {
        KvScales(Some(scales))
    }
}

/// Where the keys and values of a sequence are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KvLayout {
    /// `[B, S_max, H_kv, D]`: sequence b's keys are rows `[b, 0..len)`.
    Dense { s_max: usize },
    /// `[num_pages, page_size, H_kv, D]`: key p of sequence b is row `p % page_size` of page
    /// `block_table[b][p / page_size]`.
    Paged {
        page_size: usize,
        num_pages: usize,
        max_pages: usize,
        /// The host copy, `[B, max_pages]` row-major.
        block_table: Vec<i32>,
    },
}

impl KvLayout {
    /// The keys a sequence can hold.
    fn capacity(&self) -> usize {
        match self {
            KvLayout::Dense { s_max } => *s_max,
            // Lengths are ints: a capacity past usize (or past them) bounds nothing more.
            KvLayout::Paged {
                page_size,
                max_pages,
                ..
            } => page_size.saturating_mul(*max_pages),
        }
    }
}

/// A checked decode plan.
#[derive(Debug, Clone)]
pub(crate) struct DecodePlan {
    pub op: &'static str,
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub dim: usize,
    pub q_dtype: DType,
    pub cache_dtype: DType,
    /// The host copy of `seqlens`.
    pub lens: Vec<i32>,
    pub layout: KvLayout,
    pub sm_scale: f64,
    pub softcap: f64,
    pub return_lse: bool,
    /// The most split-KV chunks per sequence.
    pub max_splits: usize,
}

/// The manifest's defaults of the options, read by the op that plans (so that they are stated
/// once, in the YAML).
pub(crate) struct Defaults {
    pub softcap: Option<StaticValue>,
    pub return_lse: Option<StaticValue>,
}

pub(super) fn bad_shape(
    op: &'static str,
    field: &'static str,
    spec: &TensorSpec,
    reason: String,
) -> Error {
    Error::InvalidShape {
        op,
        field,
        shape: spec.shape.clone(),
        reason,
    }
}

pub(super) fn bad_param(
    op: &'static str,
    field: &'static str,
    value: String,
    reason: &str,
) -> Error {
    Error::InvalidParam {
        op,
        field,
        value,
        reason: reason.to_owned(),
    }
}

/// The largest extent the kernels take as a 32-bit int.
const MAX_I32: usize = i32::MAX as usize;

/// A launch argument that does not fit the kernel's integer.
fn too_large(op: &'static str, field: &'static str, value: usize) -> Error {
    bad_param(
        op,
        field,
        value.to_string(),
        "does not fit the decode kernel's integer argument",
    )
}

impl DecodePlan {
    /// Checks q `[B, H, D]`, the caches (their layout given by `paged`), the host lengths and
    /// the options.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        op: &'static str,
        q: &TensorSpec,
        k: (&'static str, &TensorSpec),
        v: (&'static str, &TensorSpec),
        lens: &[i32],
        paged: Option<(&TensorSpec, &[i32])>,
        options: DecodeOptions,
        defaults: Defaults,
    ) -> Result<DecodePlan, Error> {
        check_q_dtype(op, q)?;
        let &[batch, heads, dim] = q.shape.as_slice() else {
            return Err(bad_shape(
                op,
                "q",
                q,
                "must be rank 3: [B, H, D]".to_owned(),
            ));
        };
        if batch == 0 || heads == 0 {
            return Err(bad_shape(
                op,
                "q",
                q,
                "empty tensors are not supported (a dimension is 0)".to_owned(),
            ));
        }
        if !HEAD_DIMS.contains(&dim) {
            return Err(bad_shape(
                op,
                "q",
                q,
                format!("head dim {dim} is not supported; supported: 64, 128, 256"),
            ));
        }
        let (k_name, k_spec) = k;
        let (v_name, v_spec) = v;
        if !(k_spec.dtype == q.dtype || k_spec.dtype == DType::Float8E4M3Fn) {
            return Err(Error::InvalidDType {
                op,
                field: k_name,
                value: k_spec.dtype,
                supported: format!("q's dtype ({}), float8_e4m3fn", q.dtype),
            });
        }
        let &[rows, per_row, kv_heads, k_dim] = k_spec.shape.as_slice() else {
            let layout = if paged.is_some() {
                "[num_pages, page_size, H_kv, D]"
            } else {
                "[B, S_max, H_kv, D]"
            };
            return Err(bad_shape(
                op,
                k_name,
                k_spec,
                format!("must be rank 4: {layout}"),
            ));
        };
        if v_spec != k_spec {
            return Err(Error::InvalidShape {
                op,
                field: v_name,
                shape: v_spec.shape.clone(),
                reason: format!("must be {k_spec}, as {k_name}"),
            });
        }
        if k_dim != dim {
            return Err(bad_shape(
                op,
                k_name,
                k_spec,
                format!("its head dim must be q's, {dim}"),
            ));
        }
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(bad_shape(
                op,
                k_name,
                k_spec,
                format!(
                    "its {kv_heads} KV heads must divide q's {heads} heads (H % H_kv == 0; MHA is H_kv == H)"
                ),
            ));
        }
        if rows == 0 || per_row == 0 {
            return Err(bad_shape(
                op,
                k_name,
                k_spec,
                "empty tensors are not supported (a dimension is 0)".to_owned(),
            ));
        }
        // Every extent the kernels take as an int (a key's row stride, H_kv x D elements, is
        // one too), and every byte offset as an i64.
        let fits = batch <= MAX_I32
            && heads <= MAX_I32
            && rows <= MAX_I32
            && kv_heads
                .checked_mul(dim * k_spec.dtype.size_in_bytes())
                .is_some_and(|row| row <= MAX_I32)
            && k_spec
                .size_in_bytes()
                .is_ok_and(|bytes| bytes <= isize::MAX as usize);
        if !fits {
            return Err(bad_shape(
                op,
                k_name,
                k_spec,
                "too large to address".to_owned(),
            ));
        }
        let layout = match paged {
            None => {
                if rows != batch {
                    return Err(bad_shape(
                        op,
                        k_name,
                        k_spec,
                        format!("must have q's batch of {batch} sequences"),
                    ));
                }
                KvLayout::Dense { s_max: per_row }
            }
            Some((table_spec, table)) => {
                let &[table_batch, max_pages] = table_spec.shape.as_slice() else {
                    return Err(bad_shape(
                        op,
                        "block_table",
                        table_spec,
                        "must be rank 2: [B, max_pages]".to_owned(),
                    ));
                };
                if table_spec.dtype != DType::Int32 {
                    return Err(Error::InvalidDType {
                        op,
                        field: "block_table",
                        value: table_spec.dtype,
                        supported: "int32".to_owned(),
                    });
                }
                if table_batch != batch || max_pages == 0 || max_pages > MAX_I32 {
                    return Err(bad_shape(
                        op,
                        "block_table",
                        table_spec,
                        format!("must be [B = {batch}, max_pages >= 1]"),
                    ));
                }
                let entries = batch.checked_mul(max_pages).ok_or_else(|| {
                    bad_shape(
                        op,
                        "block_table",
                        table_spec,
                        "B x max_pages overflows".to_owned(),
                    )
                })?;
                if table.len() != entries {
                    return Err(bad_param(
                        op,
                        "block_table",
                        format!("{} entries", table.len()),
                        &format!("the host copy must hold B x max_pages = {entries} entries"),
                    ));
                }
                // The kernel addresses a pool row as the 32-bit `page * page_size + row`.
                if rows
                    .checked_mul(per_row)
                    .is_none_or(|pool_rows| pool_rows > u32::MAX as usize)
                {
                    return Err(bad_shape(
                        op,
                        k_name,
                        k_spec,
                        format!(
                            "its num_pages x page_size = {rows} x {per_row} rows must fit 32 bits \
                             (at most {})",
                            u32::MAX
                        ),
                    ));
                }
                KvLayout::Paged {
                    page_size: per_row,
                    num_pages: rows,
                    max_pages,
                    block_table: table.to_vec(),
                }
            }
        };
        let capacity = layout.capacity();
        if lens.len() != batch {
            return Err(bad_param(
                op,
                "seqlens",
                format!("{} lengths", lens.len()),
                &format!("one length per sequence of q is needed ({batch})"),
            ));
        }
        for (b, &len) in lens.iter().enumerate() {
            if len < 0 || len as usize > capacity {
                return Err(bad_param(
                    op,
                    "seqlens",
                    format!("{len} (sequence {b})"),
                    &format!(
                        "a length must lie in 0..={capacity}, the keys the cache holds per sequence"
                    ),
                ));
            }
        }
        if let KvLayout::Paged {
            page_size,
            num_pages,
            max_pages,
            block_table,
        } = &layout
        {
            for (b, &len) in lens.iter().enumerate() {
                let used = (len as usize).div_ceil(*page_size);
                for (slot, &page) in block_table[b * max_pages..][..used].iter().enumerate() {
                    if page < 0 || page as usize >= *num_pages {
                        return Err(bad_param(
                            op,
                            "block_table",
                            format!("{page} (sequence {b}, slot {slot})"),
                            &format!(
                                "a page index a sequence uses must lie in 0..{num_pages}, the pages of the pool"
                            ),
                        ));
                    }
                }
            }
        }
        let sm_scale = options
            .sm_scale
            .unwrap_or_else(|| 1.0 / (dim as f64).sqrt());
        if !(sm_scale.is_finite() && sm_scale > 0.0) {
            return Err(bad_param(
                op,
                "sm_scale",
                sm_scale.to_string(),
                "must be finite and > 0",
            ));
        }
        let softcap = match options.softcap {
            Some(softcap) => softcap,
            None => defaults.softcap.and_then(|v| v.as_f64()).unwrap_or(0.0),
        };
        if !(softcap.is_finite() && softcap >= 0.0) {
            return Err(bad_param(
                op,
                "softcap",
                softcap.to_string(),
                "must be finite and >= 0 (0 turns it off)",
            ));
        }
        let return_lse = match options.return_lse {
            Some(r) => r,
            None => matches!(defaults.return_lse, Some(StaticValue::Bool(true))),
        };
        let max_splits = options.max_splits.unwrap_or(usize::MAX);
        if max_splits == 0 {
            return Err(bad_param(
                op,
                "max_splits",
                "0".to_owned(),
                "must be at least 1 (1 is the one-pass kernel)",
            ));
        }
        Ok(DecodePlan {
            op,
            batch,
            heads,
            kv_heads,
            dim,
            q_dtype: q.dtype,
            cache_dtype: k_spec.dtype,
            lens: lens.to_vec(),
            layout,
            sm_scale,
            softcap,
            return_lse,
            max_splits,
        })
    }

    /// Whether the cache holds float8_e4m3fn codes (with per-tensor scales).
    pub(crate) fn fp8(&self) -> bool {
        self.cache_dtype == DType::Float8E4M3Fn
    }

    /// `seqlens`: `[B]` int32.
    pub(crate) fn seqlens_spec(&self) -> TensorSpec {
        TensorSpec::new([self.batch], DType::Int32)
    }

    /// `k_scale` and `v_scale` (`[1]` float32) when the cache is fp8.
    pub(crate) fn scale_spec(&self) -> Option<TensorSpec> {
        self.fp8().then(|| TensorSpec::new([1], DType::Float32))
    }

    /// `o (B, H, D)` in q's dtype, and `lse (B, H)` float32 when returned.
    pub(crate) fn output_specs(&self) -> (TensorSpec, Option<TensorSpec>) {
        (
            TensorSpec::new([self.batch, self.heads, self.dim], self.q_dtype),
            self.return_lse
                .then(|| TensorSpec::new([self.batch, self.heads], DType::Float32)),
        )
    }

    /// The block-table entries the call reads: the pages each sequence's keys touch.
    pub(crate) fn used_pages(&self) -> usize {
        match &self.layout {
            KvLayout::Dense { .. } => 0,
            KvLayout::Paged { page_size, .. } => self
                .lens
                .iter()
                .map(|&len| (len as usize).div_ceil(*page_size))
                .sum(),
        }
    }

    /// The keys of the whole batch, `Σ seqlens`.
    pub(crate) fn total_keys(&self) -> usize {
        self.lens.iter().map(|&len| len as usize).sum()
    }

    /// Fresh outputs on `device`.
    pub(crate) fn empty_output(&self, device: &Device) -> Result<DecodeOutput, Error> {
        let (o, lse) = self.output_specs();
        Ok(DecodeOutput {
            o: Tensor::empty(&o, device)?,
            lse: lse.map(|spec| Tensor::empty(&spec, device)).transpose()?,
        })
    }

    /// The caches' dtype as the bench records it (`k_cache` and `v_cache`, or the paged
    /// `k_pages` and `v_pages`: q's dtype or float8_e4m3fn).
    pub(crate) fn cache_input_dtypes(&self) -> Vec<(&'static str, DType)> {
        let names = match self.layout {
            KvLayout::Dense { .. } => ["k_cache", "v_cache"],
            KvLayout::Paged { .. } => ["k_pages", "v_pages"],
        };
        names.map(|n| (n, self.cache_dtype)).to_vec()
    }

    /// Query heads one block serves (gqa_decode.cu's GT): 4 with an fp8 cache; with a 16-bit one,
    /// 4 for groups of up to 4 and 8 for larger ones.
    fn heads_per_block(&self) -> usize {
        if !self.fp8() && self.heads / self.kv_heads > 4 {
            8
        } else {
            4
        }
    }

    /// Lanes that hold one key: one 16-byte vector each.
    fn lanes_per_key(&self) -> usize {
        let per_vector = if self.fp8() { 16 } else { 8 };
        self.dim / per_vector
    }

    /// The split-KV decomposition on a GPU of `sms` SMs: `(splits, chunk, head_tiles)`.
    ///
    /// A block takes `128 / lanes_per_key * 4` keys a step. With (sequence, KV head, head tile)
    /// work units too few to give the GPU two full waves of resident blocks, each sequence's keys
    /// are cut into `splits` chunks of whole steps (at least two steps each), so that a batch of
    /// one long sequence fills every SM; with enough units, one split (the one-pass path).
    ///
    /// Among the split counts from 3/4 to twice the two-wave target's, the one with the fewest
    /// keys per resident block slot: `ceil(blocks / (sms * BLOCKS_PER_SM))` waves of `chunk`
    /// keys (the fewest splits on a tie). A grid just past whole waves (576 blocks on 132 SMs
    /// of 2 slots: 2.18 waves) leaves most SMs idle for the last wave's time; 512 blocks of 9/8
    /// the keys finish first.
    pub(crate) fn split(&self, sms: usize) -> (usize, usize, usize) {
        let group = self.heads / self.kv_heads;
        let head_tiles = group.div_ceil(self.heads_per_block());
        let step = (THREADS as usize / self.lanes_per_key()) * TILE_KEYS;
        // Every product saturates: a device of absurd SM counts (the tests pass usize::MAX)
        // gets the most splits, not an overflow.
        let units = self
            .batch
            .saturating_mul(self.kv_heads)
            .saturating_mul(head_tiles)
            .max(1);
        let longest = self.lens.iter().map(|&l| l as usize).max().unwrap_or(0);
        let sms = sms.max(1);
        let target = TARGET_BLOCKS_PER_SM.saturating_mul(sms);
        let max_splits = longest
            .div_ceil(step * MIN_STEPS_PER_SPLIT)
            .max(1)
            .min(self.max_splits)
            .max(1);
        // Whole steps per split; rounding the chunk up may leave the last splits empty: drop them.
        let shape = |splits: usize| {
            let chunk = longest.div_ceil(splits).div_ceil(step).max(1) * step;
            (longest.div_ceil(chunk).max(1), chunk)
        };
        let two_waves = target.div_ceil(units);
        let lo = target
            .saturating_mul(3)
            .div_ceil(units.saturating_mul(4))
            .clamp(1, max_splits);
        let hi = two_waves.saturating_mul(2).clamp(lo, max_splits);
        let slots = sms.saturating_mul(BLOCKS_PER_SM);
        let (splits, chunk) = (lo..=hi)
            .map(shape)
            .min_by_key(|&(splits, chunk)| {
                let waves = units.saturating_mul(splits).div_ceil(slots);
                (waves.saturating_mul(chunk), splits)
            })
            .unwrap_or_else(|| shape(max_splits));
        (splits, chunk, head_tiles)
    }

    /// Runs the plan on `device`: checks every tensor against it, then the CPU reference or the
    /// kernels.
    pub(crate) fn run(
        &self,
        device: &Device,
        inputs: DecodeInputs<'_>,
        expected: &DecodeSpecs<'_>,
        mut out: AttentionOutputMut<'_>,
    ) -> Result<(), Error> {
        let op = self.op;
        check_input(op, "q", &inputs.q, expected.q, device)?;
        check_input(op, expected.k.0, &inputs.k, expected.k.1, device)?;
        check_input(op, expected.v.0, &inputs.v, expected.v.1, device)?;
        check_input(op, "seqlens", &inputs.seqlens, &self.seqlens_spec(), device)?;
        if let (Some(table), Some(spec)) = (&inputs.block_table, expected.block_table) {
            check_input(op, "block_table", table, spec, device)?;
        }
        match (&inputs.scales, self.scale_spec()) {
            (Some((k_scale, v_scale)), Some(spec)) => {
                check_input(op, "k_scale", k_scale, &spec, device)?;
                check_input(op, "v_scale", v_scale, &spec, device)?;
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(bad_param(
                    op,
                    "k_scale",
                    "given".to_owned(),
                    "scales apply to a float8_e4m3fn cache only; this plan's cache is 16-bit",
                ));
            }
            (None, Some(_)) => {
                return Err(bad_param(
                    op,
                    "k_scale",
                    "missing".to_owned(),
                    "a float8_e4m3fn cache needs k_scale and v_scale ([1] float32 each)",
                ));
            }
        }
        let (o_spec, lse_spec) = self.output_specs();
        check_input(op, "o", &out.o, &o_spec, device)?;
        match (&out.lse, &lse_spec) {
            (Some(lse), Some(spec)) => check_input(op, "lse", lse, spec, device)?,
            (None, None) => {}
            _ => {
                return Err(bad_param(
                    op,
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
        match device.cuda_device() {
            None => self.cpu(inputs, &mut out),
            Some(dev) => self.cuda(dev, &inputs, &mut out),
        }
    }

    /// The CPU backend: the f64 reference on host copies, after checking that the device copies
    /// of the lengths and the block table hold the plan's values.
    fn cpu(&self, inputs: DecodeInputs<'_>, out: &mut AttentionOutputMut<'_>) -> Result<(), Error> {
        let op = self.op;
        if inputs.seqlens.host_vec::<i32>()? != self.lens {
            return Err(bad_param(
                op,
                "seqlens",
                "the tensor".to_owned(),
                "holds other lengths than the host copy the op was planned with",
            ));
        }
        if let (Some(table), KvLayout::Paged { block_table, .. }) =
            (&inputs.block_table, &self.layout)
            && table.host_vec::<i32>()? != *block_table
        {
            return Err(bad_param(
                op,
                "block_table",
                "the tensor".to_owned(),
                "holds other entries than the host copy the op was planned with",
            ));
        }
        let (k_scale, v_scale) = match &inputs.scales {
            Some((k, v)) => (k.host_f64()?[0], v.host_f64()?[0]),
            None => (1.0, 1.0),
        };
        let (k, v) = (inputs.k.host_f64()?, inputs.v.host_f64()?);
        let row = self.kv_heads * self.dim;
        // Every sequence's keys in order, as [B, capacity, H_kv, D] views by index.
        let key_row = |b: usize, key: usize| -> usize {
            match &self.layout {
                KvLayout::Dense { s_max } => b * s_max + key,
                KvLayout::Paged {
                    page_size,
                    max_pages,
                    block_table,
                    ..
                } => {
                    block_table[b * max_pages + key / page_size] as usize * page_size
                        + key % page_size
                }
            }
        };
        let result = super::reference::gqa_decode(
            &super::reference::DecodeProblem {
                q: &inputs.q.host_f64()?,
                batch: self.batch,
                heads: self.heads,
                kv_heads: self.kv_heads,
                dim: self.dim,
                lens: &self.lens,
                sm_scale: self.sm_scale,
                softcap: self.softcap,
                k_scale,
                v_scale,
            },
            |b, key, kvh| {
                let at = key_row(b, key) * row + kvh * self.dim;
                (&k[at..at + self.dim], &v[at..at + self.dim])
            },
        );
        out.o.set_host_f64(&result.o)?;
        if let Some(lse) = &mut out.lse {
            lse.set_host_f64(&result.lse)?;
        }
        Ok(())
    }

    /// The CUDA backend: the decode kernel over `splits` chunks, then (with more than one) the
    /// merge kernel.
    fn cuda<'a>(
        &'a self,
        dev: &'a CudaDevice,
        inputs: &'a DecodeInputs<'_>,
        out: &mut AttentionOutputMut<'_>,
    ) -> Result<(), Error> {
        let op = self.op;
        let stream = &dev.stream;
        // Every pointer argument as a raw device address (0 for one the entry never reads: the
        // 16-bit entries the scales, the dense ones the block table, the one-pass path the
        // partial buffers, a plan without lse the lse), with the guards that order the launch
        // after earlier writes (and later accesses after it) on the stream.
        let mut guards = Vec::new();
        let mut read =
            |name: &'static str, tensor: Option<&'a TensorRef<'_>>| -> Result<u64, Error> {
                let Some(tensor) = tensor else { return Ok(0) };
                let (ptr, guard) = buffer(op, name, tensor)?.view_ptr(stream);
                guards.push(guard);
                aligned(op, ptr)
            };
        let q = read("q", Some(&inputs.q))?;
        let k = read("k", Some(&inputs.k))?;
        let v = read("v", Some(&inputs.v))?;
        let seqlens = read("seqlens", Some(&inputs.seqlens))?;
        let table = read("block_table", inputs.block_table.as_ref())?;
        let k_scale = read("k_scale", inputs.scales.as_ref().map(|(k, _)| k))?;
        let v_scale = read("v_scale", inputs.scales.as_ref().map(|(_, v)| v))?;
        let AttentionOutputMut { o, lse } = out;
        let mut o_view = buffer_mut(op, "o", o)?;
        let (o, o_guard) = o_view.device_ptr_mut(stream);
        let o = aligned(op, o)?;
        let mut lse_view = lse
            .as_mut()
            .map(|lse| buffer_mut(op, "lse", lse))
            .transpose()?;
        let (lse, _lse_guard) = match lse_view.as_mut() {
            Some(view) => {
                let (ptr, guard) = view.device_ptr_mut(stream);
                (aligned(op, ptr)?, Some(guard))
            }
            None => (0, None),
        };

        let (splits, chunk, head_tiles) = self.split(dev.sm_count as usize);
        let rows = self.batch * self.heads;
        // The split path's scratch: each block's normalised partial output and base-2 lse.
        let mut scratch = if splits > 1 {
            let alloc = |floats: usize| {
                // SAFETY: f32 scratch; the decode kernel writes every partial row (o and lse) of
                // every split before the merge kernel, later on the same stream, reads it.
                unsafe { stream.alloc::<f32>(floats) }
                    .map_err(|e| Error::driver(format!("allocating {op} split-KV scratch"), e))
            };
            Some((alloc(rows * splits * self.dim)?, alloc(rows * splits)?))
        } else {
            None
        };
        let mut scratch_guards = Vec::new();
        let (part_o, part_lse) = match scratch.as_mut() {
            Some((part_o, part_lse)) => {
                let (po, g1) = part_o.device_ptr_mut(stream);
                let (pl, g2) = part_lse.device_ptr_mut(stream);
                scratch_guards.extend([g1, g2]);
                (po, pl)
            }
            None => (0, 0),
        };

        let paged = matches!(self.layout, KvLayout::Paged { .. });
        let cache = match (paged, self.fp8()) {
            (false, false) => "gqa_decode",
            (false, true) => "gqa_decode_fp8",
            (true, false) => "gqa_decode_paged",
            (true, true) => "gqa_decode_paged_fp8",
        };
        // One entry point per instantiation (cache, heads per block, head dim): the plan checked
        // the head dim is one of the compiled ones.
        let base = format!("{cache}_g{}_d{}", self.heads_per_block(), self.dim);
        let entry = kernels::entry(&GQA_DECODE, &base, self.q_dtype)?;
        let blocks = self.batch * self.kv_heads * splits * head_tiles;
        let cfg = LaunchConfig {
            grid_dim: (grid_dim(entry, blocks)?, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // Scores in base 2: q is scaled by sm_scale * log2(e), or by sm_scale / softcap with the
        // cap's own factor softcap * log2(e) applied after the tanh.
        let log2e = std::f64::consts::LOG2_E;
        let (qscale, cap2) = if self.softcap > 0.0 {
            (
                (self.sm_scale / self.softcap) as f32,
                (self.softcap * log2e) as f32,
            )
        } else {
            ((self.sm_scale * log2e) as f32, 0.0f32)
        };
        let (s_max, max_pages, num_pages) = match &self.layout {
            KvLayout::Dense { s_max } => (*s_max as i64, 1i32, 0i32),
            KvLayout::Paged {
                page_size,
                num_pages,
                max_pages,
                ..
            } => (*page_size as i64, *max_pages as i32, *num_pages as i32),
        };
        let (batch, heads, kv_heads, dim) = (
            self.batch as i32,
            self.heads as i32,
            self.kv_heads as i32,
            self.dim as i32,
        );
        // A split count and head tiles each fit an int (at most a sequence's keys, an int, and
        // the group); the chunk is a long long: a one-pass chunk is the longest sequence rounded
        // up to whole steps, which can pass i32::MAX.
        let (splits_arg, chunk_arg, tiles_arg) = (
            i32::try_from(splits).map_err(|_| too_large(op, "splits", splits))?,
            i64::try_from(chunk).map_err(|_| too_large(op, "chunk", chunk))?,
            i32::try_from(head_tiles).map_err(|_| too_large(op, "head_tiles", head_tiles))?,
        );
        let write_lse = i32::from(self.return_lse);
        // SAFETY: gqa_decode*_*(const T* q, const void* k_cache, const void* v_cache,
        // const int* seqlens, const int* block_table, const float* k_scale, const float* v_scale,
        // T* o, float* lse, float* part_o, float* part_lse, int B, int H, int H_kv, int D,
        // long long s_max, int max_pages, int num_pages, int splits, long long chunk, int head_tiles,
        // float qscale, float cap2, int write_lse). Every buffer holds what the plan checked
        // against its spec; the pointers passed as 0 are never read by this entry (see `read`);
        // with splits > 1 part_o and part_lse hold B * H * splits * (D + 1) floats, and with one
        // split o and lse are written directly; the grid is B * H_kv * splits * head_tiles
        // blocks of 128 threads (the launch bounds), chunk a multiple of a block's step.
        unsafe {
            launch!(dev, &GQA_DECODE, entry, cfg;
                &q, &k, &v, &seqlens, &table, &k_scale, &v_scale, &o, &lse, &part_o, &part_lse,
                &batch, &heads, &kv_heads, &dim, &s_max, &max_pages, &num_pages,
                &splits_arg, &chunk_arg, &tiles_arg, &qscale, &cap2, &write_lse)?;
        }
        if splits > 1 {
            let merge = kernels::entry(&GQA_DECODE, "gqa_decode_merge", self.q_dtype)?;
            let rows_per_block = (THREADS as usize) / (self.dim / 4);
            let cfg = LaunchConfig {
                grid_dim: (grid_dim(merge, rows.div_ceil(rows_per_block))?, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let rows_arg = rows as i64;
            // SAFETY: gqa_decode_merge_*(const float* part_o, const float* part_lse, T* o,
            // float* lse, long long rows, int D, int splits, int write_lse): the scratch holds
            // rows * splits partial rows written by the launch above on this stream; o holds
            // rows * D elements and lse (read only when write_lse) rows floats; D / 4 threads
            // per row, 512 / D rows per block of 128 threads.
            unsafe {
                launch!(dev, &GQA_DECODE, merge, cfg;
                    &part_o, &part_lse, &o, &lse, &rows_arg, &dim, &splits_arg, &write_lse)?;
            }
        }
        drop((guards, o_guard, scratch_guards));
        Ok(())
    }
}

/// `ptr`, when it is 16-byte aligned as the kernels' vector accesses need (true of every CUDA
/// allocation, checked anyway).
pub(super) fn aligned(op: &'static str, ptr: u64) -> Result<u64, Error> {
    if !ptr.is_multiple_of(16) {
        return Err(Error::launch_refused(
            op,
            format!("buffer at {ptr:#x} is not 16-byte aligned"),
        ));
    }
    Ok(ptr)
}

/// The tensors of one call, as the op's `forward` received them.
pub(crate) struct DecodeInputs<'a> {
    pub q: TensorRef<'a>,
    pub k: TensorRef<'a>,
    pub v: TensorRef<'a>,
    pub seqlens: TensorRef<'a>,
    pub block_table: Option<TensorRef<'a>>,
    pub scales: Option<(TensorRef<'a>, TensorRef<'a>)>,
}

/// The specs the op was planned for, with the caches' manifest names.
pub(crate) struct DecodeSpecs<'a> {
    pub q: &'a TensorSpec,
    pub k: (&'static str, &'a TensorSpec),
    pub v: (&'static str, &'a TensorSpec),
    pub block_table: Option<&'a TensorSpec>,
}

/// The accessors both decode ops share, over their `q`, `plan` and `device` fields, written once:
/// the roof, the plan's host data and options, the output specs and the split-KV decomposition.
macro_rules! decode_accessors {
    ($op:ident) => {
        impl $op {
            /// The roof an optimal decode is priced against: tensor cores in q's dtype, which
            /// FlashInfer and TileOPs use for grouped heads (an fp8 cache with groups of 8 or more
            /// is beyond the CUDA cores' rate); the call is memory-bound on them.
            pub fn roof(&self) -> $crate::registry::RoofKey {
                $crate::registry::RoofKey::tensor_core(self.q.dtype)
                    .unwrap_or($crate::registry::RoofKey::CUDA_CORE_FP32)
            }

            /// The q spec the op is planned for.
            pub fn q(&self) -> &$crate::TensorSpec {
                &self.q
            }

            /// The host copy of the lengths.
            pub fn seqlens(&self) -> &[i32] {
                &self.plan.lens
            }

            /// The factor of `q · k`.
            pub fn sm_scale(&self) -> f64 {
                self.plan.sm_scale
            }

            /// The softcap (0 = off).
            pub fn softcap(&self) -> f64 {
                self.plan.softcap
            }

            /// Whether `forward` returns the lse.
            pub fn return_lse(&self) -> bool {
                self.plan.return_lse
            }

            /// The device the op runs on.
            pub fn device(&self) -> &$crate::Device {
                &self.device
            }

            /// The specs of `o` and, when returned, `lse`.
            pub fn output_specs(&self) -> ($crate::TensorSpec, Option<$crate::TensorSpec>) {
                self.plan.output_specs()
            }

            /// The split-KV decomposition the kernel takes on a GPU of `sms` SMs:
            /// `(splits per sequence, keys per split, head tiles per KV head)`. One split is the
            /// one-pass path.
            pub fn split(&self, sms: usize) -> (usize, usize, usize) {
                self.plan.split(sms)
            }

            pub(crate) fn plan(&self) -> &$crate::ops::attention::DecodePlan {
                &self.plan
            }
        }
    };
}
pub(crate) use decode_accessors;

/// Elements of the random block a bench cache repeats.
const TILE_ELEMENTS: usize = 1 << 20;

/// A bench cache: a block of [`TILE_ELEMENTS`] standard normal samples (`Tensor::random`),
/// repeated. A decode's speed does not depend on the values, and drawing gigabytes of normal
/// samples one by one takes minutes (about 50 ns an element on the 2-core CI machine): the
/// Llama-3.1-8B 32k rows hold 2 x 268M elements.
fn tiled_random(spec: &TensorSpec, seed: u64, device: &Device) -> Result<Tensor, Error> {
    let numel = spec.numel()?;
    if numel <= TILE_ELEMENTS {
        return Tensor::random(spec, seed, device);
    }
    let block = Tensor::random(
        &TensorSpec::new([TILE_ELEMENTS], spec.dtype),
        seed,
        &Device::cpu(),
    )?;
    let block = block.to_bytes()?;
    let size = spec.size_in_bytes()?;
    let mut bytes = crate::alloc::host_vec::<u8>(size)?;
    while bytes.len() < size {
        let take = block.len().min(size - bytes.len());
        bytes.extend_from_slice(&block[..take]);
    }
    Tensor::from_bytes(&bytes, spec, device)
}

/// The manifest's defaults of `Op`'s options.
pub(crate) fn defaults<Op: ManifestOp>() -> Defaults {
    Defaults {
        softcap: Op::default_param("softcap"),
        return_lse: Op::default_param("return_lse"),
    }
}

/// What a workload row of `Op` gives beside its shapes: the options, the host lengths (`kv_lens`:
/// a list, or absent for every sequence full) and the cache's dtype (`cache_dtype`, else the
/// case's).
pub(crate) struct WorkloadDecode {
    pub options: DecodeOptions,
    pub lens: Option<Vec<i32>>,
    pub cache_dtype: DType,
}

pub(crate) fn workload_decode<Op: ManifestOp>(
    case: &WorkloadCase,
) -> Result<WorkloadDecode, Error> {
    let op = Op::NAME;
    let invalid = |field: &'static str, value: &StaticValue, reason: &str| {
        bad_param(op, field, format!("{value:?}"), reason)
    };
    let mut options = DecodeOptions::default()
        .softcap(workload_f64::<Op>(case, "softcap")?)
        .return_lse(workload_bool::<Op>(case, "return_lse")?);
    match workload_param::<Op>(case, "sm_scale") {
        Ok(StaticValue::None) | Err(_) => {}
        Ok(value) => {
            let scale = value
                .as_f64()
                .ok_or_else(|| invalid("sm_scale", &value, "must be a number or null"))?;
            options = options.sm_scale(scale);
        }
    }
    let lens = match case.workload.param("kv_lens") {
        None | Some(StaticValue::None) => None,
        Some(value) => Some(
            value
                .as_int_list()
                .and_then(|lens| lens.into_iter().map(|l| i32::try_from(l).ok()).collect())
                .ok_or_else(|| invalid("kv_lens", value, "must be a list of int32 lengths"))?,
        ),
    };
    let cache_dtype = match case.workload.param("cache_dtype") {
        None | Some(StaticValue::None) => case.dtype,
        Some(StaticValue::Str(name)) => name.parse().map_err(|_| {
            invalid(
                "cache_dtype",
                &StaticValue::Str(name),
                "must be a dtype name",
            )
        })?,
        Some(value) => {
            return Err(invalid(
                "cache_dtype",
                value,
                "must be a dtype name or null",
            ));
        }
    };
    Ok(WorkloadDecode {
        options,
        lens,
        cache_dtype,
    })
}

impl DecodePlan {
    /// A bench call's inputs, in the manifest's order: q, the caches (random, in their dtypes),
    /// the block table (paged), `seqlens` (the plan's lengths), and an fp8 cache's scales.
    pub(crate) fn bench_inputs(
        &self,
        [q, k, v]: [&TensorSpec; 3],
        seed: u64,
        device: &Device,
    ) -> Result<Vec<Tensor>, Error> {
        let mut inputs = vec![Tensor::random(q, seed, device)?];
        for (i, cache) in (1u64..).zip([k, v]) {
            inputs.push(tiled_random(cache, seed.wrapping_add(i), device)?);
        }
        self.push_index_inputs(inputs, device)
    }

    /// The bench's placeholder inputs: q and the caches uninitialised, the block table, lengths
    /// and scales as [`DecodePlan::bench_inputs`] gives them (the launch shapes depend on those).
    pub(crate) fn placeholder_inputs(
        &self,
        [q, k, v]: [&TensorSpec; 3],
        device: &Device,
    ) -> Result<Vec<Tensor>, Error> {
        let inputs = [q, k, v]
            .into_iter()
            .map(|spec| Tensor::empty(spec, device))
            .collect::<Result<Vec<_>, _>>()?;
        self.push_index_inputs(inputs, device)
    }

    /// Appends the block table (paged), the lengths and an fp8 cache's scales to `inputs`.
    fn push_index_inputs(
        &self,
        mut inputs: Vec<Tensor>,
        device: &Device,
    ) -> Result<Vec<Tensor>, Error> {
        if let KvLayout::Paged {
            max_pages,
            block_table,
            ..
        } = &self.layout
        {
            inputs.push(Tensor::from_slice(
                block_table,
                [self.batch, *max_pages],
                device,
            )?);
        }
        inputs.push(Tensor::from_slice(&self.lens, [self.batch], device)?);
        if self.fp8() {
            // Scales of a typical per-tensor calibration: codes of unit-normal values times
            // O(1) factors.
            inputs.push(Tensor::from_f32_slice(&[0.75], [1], device)?);
            inputs.push(Tensor::from_f32_slice(&[1.25], [1], device)?);
        }
        Ok(inputs)
    }

    /// The tensors one call reads and writes, each as the dense block it touches: q, each
    /// sequence's valid keys and values (`[Σ seqlens, H_kv, D]`), `seqlens`, the block-table
    /// entries used, an fp8 cache's scales; o and lse. Written apart from
    /// `tileops::perf::formulas`, so that the bytes oracle holds the roofline to it.
    pub(crate) fn traffic(&self, q: &TensorSpec) -> Traffic {
        let kv = TensorSpec::new(
            [self.total_keys(), self.kv_heads, self.dim],
            self.cache_dtype,
        );
        let mut reads = vec![q.clone(), kv.clone(), kv, self.seqlens_spec()];
        if let KvLayout::Paged { .. } = self.layout {
            reads.push(TensorSpec::new([self.used_pages()], DType::Int32));
        }
        if let Some(scale) = self.scale_spec() {
            reads.extend([scale.clone(), scale]);
        }
        let (o, lse) = self.output_specs();
        Traffic {
            reads,
            writes: std::iter::once(o).chain(lse).collect(),
        }
    }

    /// The outputs as the bench harness returns them: o, then lse when returned.
    pub(crate) fn bench_outputs(out: DecodeOutput) -> Vec<Tensor> {
        std::iter::once(out.o).chain(out.lse).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::backend::assert_rounds_to;
    use crate::ops::{GqaDecode, GqaDecodePaged};
    use crate::registry::BenchOp;

    fn plan(batch: usize, heads: usize, kv_heads: usize, lens: &[i32], cache: DType) -> DecodePlan {
        let q = TensorSpec::new([batch, heads, 128], DType::BFloat16);
        let c = TensorSpec::new([batch, 1 << 18, kv_heads, 128], cache);
        DecodePlan::new(
            "gqa_decode",
            &q,
            ("k_cache", &c),
            ("v_cache", &c),
            lens,
            None,
            DecodeOptions::default(),
            defaults::<GqaDecode>(),
        )
        .unwrap()
    }

    #[test]
    fn splits_fill_the_gpu_and_cover_every_key() {
        let (bf16, fp8) = (DType::BFloat16, DType::Float8E4M3Fn);
        // Llama-3.1-8B B32 x 4k: 256 (sequence, KV head) units for a target of 4 x 132 blocks:
        // 2 splits of 2048 keys (512 blocks, 2 waves of 264 resident), not 3 of 1376 (768
        // blocks: 2.9 waves, 3 of 1376 keys).
        assert_eq!(plan(32, 32, 8, &[4096; 32], bf16).split(132), (2, 2048, 1));
        // B8 x 32k: 8 splits (512 blocks), not the 9 (576: 2.18 waves) the target asks.
        assert_eq!(plan(8, 32, 8, &[32_768; 8], bf16).split(132), (8, 4096, 1));
        // Enough units for two waves of resident blocks: the one-pass path.
        assert_eq!(plan(128, 32, 8, &[4096; 128], bf16).split(132).0, 1);
        // Batch 1 of Qwen3-30B-A3B (4 KV heads): 131 splits at 256k; at 1k, splits of two steps.
        assert_eq!(plan(1, 32, 4, &[262_144], bf16).split(132), (131, 2016, 1));
        assert_eq!(plan(1, 32, 4, &[1024], bf16).split(132), (16, 64, 1));
        // An fp8 cache: 4 heads a block (2 tiles for a group of 8), 64-key steps.
        assert_eq!(plan(1, 64, 8, &[4096], fp8).split(132), (32, 128, 2));
        // Empty and tiny batches still launch one split per unit.
        assert_eq!(plan(2, 8, 2, &[0, 0], bf16).split(132), (1, 32, 1));
        for (lens, sms) in [(vec![1, 300, 77], 132), (vec![65_536, 3], 8), (vec![31], 1)] {
            let p = plan(lens.len(), 32, 2, &lens, bf16);
            let (splits, chunk, tiles) = p.split(sms);
            let longest = *lens.iter().max().unwrap() as usize;
            assert_eq!(chunk % 32, 0, "{lens:?}");
            assert!(
                splits * chunk >= longest && (splits - 1) * chunk < longest.max(1),
                "{lens:?}"
            );
            assert_eq!(tiles, 2);
        }
        let mut one = plan(1, 32, 4, &[262_144], bf16);
        one.max_splits = 1;
        assert_eq!(one.split(132), (1, 262_144, 1));
    }

    /// The boundaries a plan's arithmetic meets: a one-pass chunk past i32::MAX (the kernel takes
    /// it as a long long), an SM count of usize::MAX, and paged capacities whose product would
    /// overflow.
    #[test]
    fn plans_at_the_integer_limits() {
        let bf16 = DType::BFloat16;
        // One sequence of i32::MAX keys on one split: the chunk is the length rounded up to whole
        // 32-key steps, past i32::MAX, and covers every key.
        let q = TensorSpec::new([1, 8, 128], bf16);
        let c = TensorSpec::new([1, i32::MAX as usize, 2, 128], bf16);
        let long = DecodePlan::new(
            "gqa_decode",
            &q,
            ("k_cache", &c),
            ("v_cache", &c),
            &[i32::MAX],
            None,
            DecodeOptions::default().max_splits(1),
            defaults::<GqaDecode>(),
        )
        .unwrap();
        let (splits, chunk, _) = long.split(132);
        assert_eq!(splits, 1);
        assert!(chunk >= i32::MAX as usize && chunk > MAX_I32, "{chunk}");
        assert!(i64::try_from(chunk).is_ok());
        // Without the cap the splits fill the GPU; every product saturates at absurd SM counts.
        let split = plan(8, 32, 8, &[32_768; 8], bf16);
        for sms in [0, 1, usize::MAX / 2, usize::MAX] {
            let (splits, chunk, tiles) = split.split(sms);
            assert!(
                splits >= 1 && splits * chunk >= 32_768 && tiles == 1,
                "{sms}"
            );
        }
        // Paged: page_size x max_pages past usize, and pools past 2^32 rows, are refused or
        // saturate; none panics.
        let paged = |pages: usize, page_size: usize, max_pages: usize| {
            let pool = TensorSpec::new([pages, page_size, 1, 64], bf16);
            let table = TensorSpec::new([1, max_pages], DType::Int32);
            let host = vec![0; max_pages.min(4)];
            DecodePlan::new(
                "gqa_decode_paged",
                &TensorSpec::new([1, 1, 64], bf16),
                ("k_pages", &pool),
                ("v_pages", &pool),
                &[1],
                Some((&table, host.as_slice())),
                DecodeOptions::default(),
                defaults::<GqaDecodePaged>(),
            )
        };
        let err = paged(1 << 20, 1 << 13, 4).unwrap_err().to_string();
        assert!(err.contains("must fit 32 bits"), "{err}");
        assert!(paged(2, 16, 4).is_ok());
        let err = paged(1, 1 << 40, 1 << 30).unwrap_err().to_string();
        assert!(
            err.contains("k_pages") || err.contains("block_table"),
            "{err}"
        );
    }

    #[test]
    fn the_cpu_backend_is_the_reference_rounded_once() {
        let cpu = Device::cpu();
        for (dtype, cache) in [
            (DType::Float16, DType::Float16),
            (DType::BFloat16, DType::Float8E4M3Fn),
        ] {
            let q = TensorSpec::new([3, 4, 64], dtype);
            let pool = TensorSpec::new([5, 16, 2, 64], cache);
            let table = [4, 1, 3, 0, -1, -1, 2, -1, -1];
            let lens = [40, 0, 16];
            let options = DecodeOptions::default().softcap(20.0).return_lse(true);
            let op = GqaDecodePaged::new(
                q.clone(),
                pool.clone(),
                pool.clone(),
                &table,
                3,
                &lens,
                options,
                &cpu,
            )
            .unwrap();
            let inputs = op.random_inputs(5).unwrap();
            let out = op.run(&inputs).unwrap();
            let (k, v) = (
                inputs[1].to_vec_f64().unwrap(),
                inputs[2].to_vec_f64().unwrap(),
            );
            let scales = if cache == DType::Float8E4M3Fn {
                (0.75, 1.25)
            } else {
                (1.0, 1.0)
            };
            let want = crate::ops::reference::gqa_decode(
                &crate::ops::reference::DecodeProblem {
                    q: &inputs[0].to_vec_f64().unwrap(),
                    batch: 3,
                    heads: 4,
                    kv_heads: 2,
                    dim: 64,
                    lens: &lens,
                    sm_scale: 0.125,
                    softcap: 20.0,
                    k_scale: scales.0,
                    v_scale: scales.1,
                },
                |b, key, kvh| {
                    let row = table[b * 3 + key / 16] as usize * 16 + key % 16;
                    let at = (row * 2 + kvh) * 64;
                    (&k[at..at + 64], &v[at..at + 64])
                },
            );
            assert_rounds_to(&out[0], &want.o, format_args!("o {dtype} {cache}"));
            assert_rounds_to(&out[1], &want.lse, format_args!("lse {dtype} {cache}"));
            assert_eq!(out[1].to_vec_f32().unwrap()[4], f32::NEG_INFINITY);
        }
    }

    #[test]
    fn borrowed_host_inputs_and_outputs_equal_the_owned_path() {
        // An fp8 paged decode with every input borrowed from the caller's host memory (the pool
        // at a byte offset inside a larger buffer, the scales as a pair of borrows) and the
        // outputs written into the caller's slices.
        use crate::{TensorMut, TensorRef};
        let cpu = Device::cpu();
        let q = TensorSpec::new([3, 4, 64], DType::BFloat16);
        let pool = TensorSpec::new([5, 16, 2, 64], DType::Float8E4M3Fn);
        let table = [4, 1, 3, 0, -1, -1, 2, -1, -1];
        let lens = [40, 0, 16];
        let options = DecodeOptions::default().return_lse(true);
        let op = GqaDecodePaged::new(
            q.clone(),
            pool.clone(),
            pool.clone(),
            &table,
            3,
            &lens,
            options,
            &cpu,
        )
        .unwrap();
        let inputs = op.random_inputs(7).unwrap();
        let want = op.run(&inputs).unwrap();

        let q_host: Vec<half::bf16> = inputs[0].to_vec().unwrap();
        let mut k_host = vec![0xffu8; 32];
        k_host.extend(inputs[1].to_bytes().unwrap());
        let v_host = inputs[2].to_bytes().unwrap();
        let table_host: Vec<i32> = inputs[3].to_vec().unwrap();
        let lens_host: Vec<i32> = inputs[4].to_vec().unwrap();
        let (k_scale, v_scale): (Vec<f32>, Vec<f32>) =
            (inputs[5].to_vec().unwrap(), inputs[6].to_vec().unwrap());
        let mut o = vec![half::bf16::ZERO; 3 * 4 * 64];
        let mut lse = vec![0f32; 12];
        let r = |t: &Tensor| t.shape().to_vec();
        op.forward_into(
            TensorRef::from_host_slice(&q_host, r(&inputs[0]), &cpu).unwrap(),
            TensorRef::from_host_bytes(&k_host[32..], &pool, &cpu).unwrap(),
            TensorRef::from_host_bytes(&v_host, &pool, &cpu).unwrap(),
            TensorRef::from_host_slice(&table_host, r(&inputs[3]), &cpu).unwrap(),
            TensorRef::from_host_slice(&lens_host, r(&inputs[4]), &cpu).unwrap(),
            (
                TensorRef::from_host_slice(&k_scale, [1], &cpu).unwrap(),
                TensorRef::from_host_slice(&v_scale, [1], &cpu).unwrap(),
            ),
            AttentionOutputMut {
                o: TensorMut::from_host_slice_mut(&mut o, [3, 4, 64], &cpu).unwrap(),
                lse: Some(TensorMut::from_host_slice_mut(&mut lse, [3, 4], &cpu).unwrap()),
            },
        )
        .unwrap();
        assert_eq!(o, want[0].to_vec::<half::bf16>().unwrap());
        assert_eq!(
            lse.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want[1]
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        );
    }
}
