//! Roofline functions of the manifest's func-mode entries (`roofline: {func: ...}`): FLOPs and
//! bytes of one call where inline formulas cannot express them, because they depend on several
//! dtypes at once or on host data of the plan (per-sequence lengths, a block table).
//!
//! The module path is TileOPs's (`tileops.perf.formulas.<name>` in its manifests), so a TileOPs
//! func entry ports verbatim once its function is written here in Rust. Each function takes the
//! planned op and returns what its generated `eval_roofline` returns.
//!
//! # Attention decode (`gqa_decode`, `gqa_decode_paged`)
//!
//! What an ideal kernel must move and compute for one call, from the plan's host lengths
//! (`seqlens`, `L_b` below) and, paged, its block table:
//!
//! - bytes: q once (`B·H·D` elements of q's dtype); for each sequence only its valid keys and
//!   values, each KV head once whatever the group size (`2·Σ_b L_b·H_kv·D` elements of the
//!   cache's dtype: 2 bytes, or 1 for float8_e4m3fn) — not `S_max`, not the page pool; `seqlens`
//!   (`4·B`); paged, the block-table entries the sequences use (`4·Σ_b ceil(L_b / page_size)`);
//!   an fp8 cache's two f32 scales (8); the output `o` (`B·H·D` of q's dtype) and, when returned,
//!   `lse` (`4·B·H`).
//! - FLOPs, by the counting conventions (one arithmetic op or transcendental = 1): per (query
//!   head, key) pair `4·D` for the two dot products (`q·k` and `p·v`), 5 for the softmax (the
//!   scale, the running max, the subtraction, the exponential, the sum) and, with a softcap, 3
//!   more (divide, tanh, multiply); per output element 1 (the division by the sum); per returned
//!   lse 2 (log and add); an fp8 cache's dequantisation folded into q and o, 1 per q element and
//!   1 per output element. So `Σ_b L_b·H·(4D + 5 + 3·[softcap]) + B·H·D + 2·B·H·[lse] +
//!   2·B·H·D·[fp8]`.
//!
//! TileOPs's own functions of the same names count `4·B·H·N·D` FLOPs (no softmax) and
//! `(2·q + 2·kv)·elem_bytes` bytes with every sequence at the cache's full `N` keys and no
//! `seqlens`; its paged function charges the whole page pool once (and every request the whole
//! pool's FLOPs), so its paged TB/s is not comparable with a dense one. Where the conventions
//! agree (full-length dense rows; one full-length paged sequence whose pool is exactly its
//! pages) the terms are equal (`tileops/src/perf/formulas.rs`'s tests).
//!
//! # RoPE (`rope`)
//!
//! `4` FLOPs per element of `x` (TileOPs's count: `x·cos + rotate(x)·sin`); bytes: `x` read and
//! `y` written at `x`'s size, the positions once at theirs (8, or 4 for int32/uint32), and one
//! table row per token capped by the table's length, at the table's size (4, or 2 for a 16-bit
//! table): `2·N·elem + T·pos_elem + min(T, max_pos)·D·table_elem`. The rest of the table is never
//! read and is not counted.
//!
//! # Attention prefill (`gqa_prefill`)
//!
//! From the plan's host offsets (`cu_seqlens_q`, `cu_seqlens_k`): `V`, the (query, key) pairs
//! the mask keeps summed over the sequences (every pair; with `causal`, those up to the
//! bottom-right-aligned diagonal; with a window, the last `window_left + 1` of those;
//! `GqaPrefill::visible_pairs`):
//!
//! - bytes: q, k, v and o once each (`total_q·H·D`, `2·total_kv·H_kv·D`, `total_q·H·D`
//!   elements of the dtype: a K/V head is read once for its whole group, as the tiled kernel
//!   reads it), the two offset arrays (`2·4·(B + 1)`) and, when returned, `lse`
//!   (`4·H·total_q`);
//! - FLOPs, by the same conventions as decode: `V·H·(4D + 5 + 3·[softcap]) + total_q·H·D +
//!   2·H·total_q·[lse]`.
//!
//! TileOPs's `gqa_prefill_fwd_roofline` (dense `(B, S, H, D)` batches of equal lengths, causal
//! with `S_q <= S_kv`) counts `4·H·D·V` FLOPs (no softmax) and the same bytes without the
//! offsets (its op has none) and the lse; the tests compare the terms on the manifest's rows.

use crate::ops::GqaPrefill;
use crate::ops::attention::{DecodePlan, KvLayout};
use crate::ops::{GqaDecode, GqaDecodePaged, Rope};
use crate::registry::ManifestOp;
use crate::{Roofline, RooflineError};

/// The roofline of [`GqaDecode`] (dense KV cache): see the module docs.
///
/// ```
/// use tileops::ops::{DecodeOptions, GqaDecode};
/// use tileops::{DType, Device, TensorSpec};
///
/// // Two sequences of 3 and 0 keys, 4 query heads on 2 KV heads of dim 64, bf16.
/// let op = GqaDecode::new(
///     TensorSpec::new([2, 4, 64], DType::BFloat16),
///     TensorSpec::new([2, 8, 2, 64], DType::BFloat16),
///     TensorSpec::new([2, 8, 2, 64], DType::BFloat16),
///     &[3, 0],
///     DecodeOptions::default(),
///     &Device::cpu(),
/// )?;
/// let r = tileops::perf::formulas::gqa_decode_roofline(&op)?;
/// assert_eq!(r.flops, 3 * 4 * (4 * 64 + 5) + 2 * 4 * 64);
/// // q and o, the 3 valid keys and values of KV head 0 and 1, seqlens.
/// assert_eq!(r.bytes, 2 * (2 * 4 * 64 * 2) + 2 * 3 * 2 * 64 * 2 + 4 * 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gqa_decode_roofline(op: &GqaDecode) -> Result<Roofline, RooflineError> {
    decode_roofline(GqaDecode::NAME, op.plan())
}

/// The roofline of [`GqaDecodePaged`] (paged KV cache): see the module docs; the block-table
/// entries the sequences use are counted, the rest of the table and of the pool are not.
pub fn gqa_decode_paged_roofline(op: &GqaDecodePaged) -> Result<Roofline, RooflineError> {
    decode_roofline(GqaDecodePaged::NAME, op.plan())
}

/// The roofline of [`GqaPrefill`]: see the module docs; only the visible (query, key) pairs
/// count.
///
/// ```
/// use tileops::ops::{GqaPrefill, PrefillOptions};
/// use tileops::{DType, Device, TensorSpec};
///
/// // One sequence of 4 queries over 4 keys, causal: 1 + 2 + 3 + 4 = 10 visible pairs; 2 heads on
/// // 1 KV head, dim 64, f16.
/// let op = GqaPrefill::new(
///     TensorSpec::new([4, 2, 64], DType::Float16),
///     TensorSpec::new([4, 1, 64], DType::Float16),
///     TensorSpec::new([4, 1, 64], DType::Float16),
///     &[0, 4],
///     &[0, 4],
///     PrefillOptions::default().causal(true),
///     &Device::cpu(),
/// )?;
/// let r = tileops::perf::formulas::gqa_prefill_roofline(&op)?;
/// assert_eq!(r.flops, 10 * 2 * (4 * 64 + 5) + 4 * 2 * 64);
/// assert_eq!(r.bytes, 2 * (2 * 4 * 2 * 64 + 2 * 4 * 64) + 2 * 4 * 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gqa_prefill_roofline(op: &GqaPrefill) -> Result<Roofline, RooflineError> {
    let p = op.plan();
    let overflow = || RooflineError::Func {
        op: GqaPrefill::NAME,
        message: "the FLOPs or bytes of one call overflow u64".to_owned(),
    };
    let (mul, add) = checked(overflow);
    let n = |value: usize| u64::try_from(value).map_err(|_| overflow());
    let (heads, kv_heads, dim) = (n(p.heads)?, n(p.kv_heads)?, n(p.dim)?);
    let (total_q, total_kv, batch) = (n(p.total_q)?, n(p.total_kv)?, n(p.batch)?);
    let elem = n(p.dtype.size_in_bytes())?;
    let (softcap, lse) = (u64::from(p.softcap > 0.0), u64::from(p.return_lse));
    let per_pair = add(&[mul(&[4, dim])?, 5, mul(&[3, softcap])?])?;
    let flops = add(&[
        mul(&[p.visible_pairs, heads, per_pair])?,
        mul(&[total_q, heads, dim])?,
        mul(&[2, heads, total_q, lse])?,
    ])?;
    let bytes = add(&[
        mul(&[2, total_q, heads, dim, elem])?,
        mul(&[2, total_kv, kv_heads, dim, elem])?,
        mul(&[2, 4, add(&[batch, 1])?])?,
        mul(&[4, heads, total_q, lse])?,
    ])?;
    Ok(Roofline { flops, bytes })
}

/// The roofline of [`Rope`]: see the module docs.
///
/// ```
/// use tileops::ops::Rope;
/// use tileops::{DType, Device, TensorSpec};
///
/// // 2 tokens of 4 heads of 8, uint32 positions, a bfloat16 table of 16 rows.
/// let op = Rope::new(
///     TensorSpec::new([2, 4, 8], DType::BFloat16),
///     TensorSpec::new([2], DType::UInt32),
///     TensorSpec::new([16, 8], DType::BFloat16),
///     &Device::cpu(),
/// )?;
/// let r = tileops::perf::formulas::rope_roofline(&op)?;
/// assert_eq!(r.flops, 4 * 64);
/// assert_eq!(r.bytes, 2 * 64 * 2 + 2 * 4 + 2 * 8 * 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rope_roofline(op: &Rope) -> Result<Roofline, RooflineError> {
    let overflow = || RooflineError::Func {
        op: Rope::NAME,
        message: "the FLOPs or bytes of one call overflow u64".to_owned(),
    };
    let (mul, add) = checked(overflow);
    let n = |value: usize| u64::try_from(value).map_err(|_| overflow());
    let (x, positions, table) = (op.x(), op.positions(), op.cos_sin_cache());
    let elements = n(x.numel().map_err(|_| overflow())?)?;
    let tokens = n(positions.shape[0])?;
    let (rows, width) = (n(table.shape[0])?, n(table.shape[1])?);
    let size = |spec: &crate::TensorSpec| n(spec.dtype.size_in_bytes());
    let flops = mul(&[4, elements])?;
    let bytes = add(&[
        mul(&[2, elements, size(x)?])?,
        mul(&[tokens, size(positions)?])?,
        mul(&[tokens.min(rows), width, size(table)?])?,
    ])?;
    Ok(Roofline { flops, bytes })
}

/// Checked product and sum of u64 terms: an overflow is `overflow()`, never a wrap.
#[allow(clippy::type_complexity)]
fn checked(
    overflow: impl Fn() -> RooflineError + Copy,
) -> (
    impl Fn(&[u64]) -> Result<u64, RooflineError>,
    impl Fn(&[u64]) -> Result<u64, RooflineError>,
) {
    let mul = move |factors: &[u64]| {
        factors
            .iter()
            .try_fold(1u64, |acc, &f| acc.checked_mul(f))
            .ok_or_else(overflow)
    };
    let add = move |terms: &[u64]| {
        terms
            .iter()
            .try_fold(0u64, |acc, &t| acc.checked_add(t))
            .ok_or_else(overflow)
    };
    (mul, add)
}

/// The decode count, in checked u64 arithmetic: an overflow is an error, never a wrap.
fn decode_roofline(op: &'static str, p: &DecodePlan) -> Result<Roofline, RooflineError> {
    let overflow = || RooflineError::Func {
        op,
        message: "the FLOPs or bytes of one call overflow u64".to_owned(),
    };
    let n = |value: usize| u64::try_from(value).map_err(|_| overflow());
    let (mul, add) = checked(overflow);
    let (batch, heads, kv_heads, dim) = (n(p.batch)?, n(p.heads)?, n(p.kv_heads)?, n(p.dim)?);
    let keys = n(p.total_keys())?;
    let q_bytes = n(p.q_dtype.size_in_bytes())?;
    let cache_bytes = n(p.cache_dtype.size_in_bytes())?;
    let softcap = u64::from(p.softcap > 0.0);
    let (lse, fp8) = (u64::from(p.return_lse), u64::from(p.fp8()));

    let per_pair = add(&[mul(&[4, dim])?, 5, mul(&[3, softcap])?])?;
    let flops = add(&[
        mul(&[keys, heads, per_pair])?,
        mul(&[batch, heads, dim])?,
        mul(&[2, batch, heads, lse])?,
        mul(&[2, batch, heads, dim, fp8])?,
    ])?;

    let table_entries = match p.layout {
        KvLayout::Dense { .. } => 0,
        KvLayout::Paged { .. } => n(p.used_pages())?,
    };
    let bytes = add(&[
        mul(&[batch, heads, dim, q_bytes])?,
        mul(&[2, keys, kv_heads, dim, cache_bytes])?,
        mul(&[4, batch])?,
        mul(&[4, table_entries])?,
        mul(&[8, fp8])?,
        mul(&[batch, heads, dim, q_bytes])?,
        mul(&[4, batch, heads, lse])?,
    ])?;
    Ok(Roofline { flops, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::DecodeOptions;
    use crate::registry;
    use crate::{DType, Device, TensorSpec};

    fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
        TensorSpec::new(shape, dtype)
    }

    /// TileOPs's `gqa_decode_roofline` (tile-ai/TileOPs, `tileops/perf/formulas.py`), restated:
    /// every sequence at the cache's full `N` keys, no softmax FLOPs, q + kv + o bytes.
    fn tileops_dense(q: &[usize], kv: &[usize], elem_bytes: u64) -> (u64, u64) {
        let (b, h, d) = (q[0] as u64, q[1] as u64, q[2] as u64);
        let (n, hkv) = (kv[1] as u64, kv[2] as u64);
        (
            4 * b * h * n * d,
            (2 * b * h * d + 2 * b * n * hkv * d) * elem_bytes,
        )
    }

    /// TileOPs's `gqa_decode_paged_roofline`, restated: the pool `[N_kv, H_kv, D]` (tokens)
    /// charged once, every request charged the pool's FLOPs, `B * 4` of lengths and
    /// `B * ceil(N_kv / page) * 4` of block table.
    fn tileops_paged(
        q: &[usize],
        pool_tokens: usize,
        hkv: usize,
        page: usize,
        eb: u64,
    ) -> (u64, u64) {
        let (b, h, d) = (q[0] as u64, q[1] as u64, q[2] as u64);
        let (n, hkv) = (pool_tokens as u64, hkv as u64);
        let table = b * 4 + b * n.div_ceil(page as u64).max(1) * 4;
        (
            4 * b * h * n * d,
            (2 * b * h * d + 2 * n * hkv * d) * eb + table,
        )
    }

    #[test]
    fn dense_rows_agree_with_tileops_where_the_conventions_do() {
        // Every full-length 16-bit row of the manifest without softcap or lse: TileOPs's count
        // plus our softmax terms (5 per score, 1 per output element) and the 4 bytes per
        // sequence of seqlens, which TileOPs's op has no input for.
        let op = registry::find("gqa_decode").expect("registered");
        let mut compared = 0;
        for workload in op.workloads {
            let plain = workload.params.iter().all(|(name, value)| match *name {
                "softcap" => value.as_f64() == Some(0.0),
                "return_lse" => *value == registry::StaticValue::Bool(false),
                "kv_lens" | "cache_dtype" => *value == registry::StaticValue::None,
                _ => true,
            });
            if !plain {
                continue;
            }
            for case in workload.cases() {
                let planned = (op.build)(&Device::cpu(), &case).expect("plans");
                let ours = planned.roofline().expect("evaluates");
                let (q, kv) = (
                    workload.shape("q").unwrap(),
                    workload.shape("k_cache").unwrap(),
                );
                let (flops, bytes) = tileops_dense(q, kv, case.dtype.size_in_bytes() as u64);
                let (b, h, d, n) = (q[0] as u64, q[1] as u64, q[2] as u64, kv[1] as u64);
                assert_eq!(
                    ours.flops,
                    flops + 5 * b * h * n + b * h * d,
                    "{}",
                    case.name()
                );
                assert_eq!(ours.bytes, bytes + 4 * b, "{}", case.name());
                compared += 1;
            }
        }
        assert!(compared >= 8, "{compared} cases compared");
    }

    #[test]
    fn one_full_paged_sequence_agrees_with_tileops_and_a_spare_pool_does_not() {
        let f16 = DType::Float16;
        let q = [1, 32, 128];
        let paged = |pages: usize, lens: &[i32]| {
            let table: Vec<i32> = (0..8).collect();
            GqaDecodePaged::new(
                spec(&q, f16),
                spec(&[pages, 64, 4, 128], f16),
                spec(&[pages, 64, 4, 128], f16),
                &table,
                8,
                lens,
                DecodeOptions::default(),
                &Device::cpu(),
            )
            .unwrap()
        };
        // One sequence of 512 keys in a pool of exactly its 8 pages: the same bytes; FLOPs equal
        // but for the softmax.
        let ours = gqa_decode_paged_roofline(&paged(8, &[512])).unwrap();
        let (flops, bytes) = tileops_paged(&q, 8 * 64, 4, 64, 2);
        assert_eq!(ours.bytes, bytes);
        assert_eq!(ours.flops, flops + 5 * 32 * 512 + 32 * 128);
        // The same sequence in a pool of 64 pages, half of its last page used: TileOPs charges
        // the pool (and every request its FLOPs); this counts the 500 keys read.
        let ours = gqa_decode_paged_roofline(&paged(64, &[500])).unwrap();
        let (flops, bytes) = tileops_paged(&q, 64 * 64, 4, 64, 2);
        assert_eq!(
            ours.bytes,
            2 * 32 * 128 * 2 + 2 * 500 * 4 * 128 * 2 + 4 + 8 * 4
        );
        assert!(
            bytes > 7 * ours.bytes && flops > 8 * ours.flops,
            "{bytes} {flops}"
        );
    }

    /// TileOPs's `gqa_prefill_fwd_roofline`, restated: `B` sequences of `s_q` queries over `s_kv`
    /// keys, visible pairs `s_q·s_kv - s_q(s_q - 1)/2` when causal, `4·B·H·V·D` FLOPs, q + k + v +
    /// o bytes.
    fn tileops_prefill(
        (batch, s_q, s_kv): (u64, u64, u64),
        (heads, kv_heads, dim): (u64, u64, u64),
        causal: bool,
        elem_bytes: u64,
    ) -> (u64, u64) {
        let visible = if causal {
            s_q * s_kv - s_q * (s_q - 1) / 2
        } else {
            s_q * s_kv
        };
        let q = batch * s_q * heads * dim;
        let kv = batch * s_kv * kv_heads * dim;
        (
            4 * batch * heads * visible * dim,
            (2 * q + 2 * kv) * elem_bytes,
        )
    }

    #[test]
    fn prefill_rows_agree_with_tileops_where_the_conventions_do() {
        // Every row of equal lengths without softcap, window or lse: TileOPs's count plus the
        // softmax terms (5 per score, 1 per output element) and the two offset arrays, which its
        // dense op does not take.
        let op = registry::find("gqa_prefill").expect("registered");
        let mut compared = 0;
        for workload in op.workloads {
            let plain = workload.params.iter().all(|(name, value)| match *name {
                "softcap" => value.as_f64() == Some(0.0),
                "window_left" => value.as_int() == Some(-1),
                "return_lse" => *value == registry::StaticValue::Bool(false),
                "q_lens" | "kv_lens" => *value == registry::StaticValue::None,
                _ => true,
            });
            if !plain {
                continue;
            }
            for case in workload.cases() {
                let planned = (op.build)(&Device::cpu(), &case).expect("plans");
                let ours = planned.roofline().expect("evaluates");
                let (q, k) = (workload.shape("q").unwrap(), workload.shape("k").unwrap());
                let batch = workload.shape("cu_seqlens_q").unwrap()[0] as u64 - 1;
                let (total_q, total_kv) = (q[0] as u64, k[0] as u64);
                let (heads, kv_heads, dim) = (q[1] as u64, k[1] as u64, q[2] as u64);
                let causal = workload.params.iter().any(|(name, value)| {
                    *name == "causal" && *value == registry::StaticValue::Bool(true)
                });
                let (flops, bytes) = tileops_prefill(
                    (batch, total_q / batch, total_kv / batch),
                    (heads, kv_heads, dim),
                    causal,
                    case.dtype.size_in_bytes() as u64,
                );
                let visible = flops / (4 * heads * dim);
                assert_eq!(
                    ours.flops,
                    flops + 5 * heads * visible + total_q * heads * dim,
                    "{}",
                    case.name()
                );
                assert_eq!(ours.bytes, bytes + 8 * (batch + 1), "{}", case.name());
                compared += 1;
            }
        }
        assert!(compared >= 10, "{compared} cases compared");
    }

    #[test]
    fn every_term_by_hand() {
        // Paged, fp8 pool, softcap, lse: B = 2 (lengths 17 and 0), H = 8, H_kv = 2, D = 64, pages
        // of 16: sequence 0 uses 2 block-table entries, sequence 1 none.
        let (bf16, fp8) = (DType::BFloat16, DType::Float8E4M3Fn);
        let op = GqaDecodePaged::new(
            spec(&[2, 8, 64], bf16),
            spec(&[3, 16, 2, 64], fp8),
            spec(&[3, 16, 2, 64], fp8),
            &[0, 2, -1, -1],
            2,
            &[17, 0],
            DecodeOptions::default().softcap(30.0).return_lse(true),
            &Device::cpu(),
        )
        .unwrap();
        let r = op.eval_roofline().unwrap();
        let scores = 17 * 8;
        assert_eq!(
            r.flops,
            scores * (4 * 64 + 5 + 3) + 2 * 8 * 64 + 2 * 2 * 8 + 2 * 2 * 8 * 64
        );
        let q_and_o = 2 * (2 * 8 * 64 * 2);
        let kv = 2 * 17 * 2 * 64;
        assert_eq!(r.bytes, q_and_o + kv + 2 * 4 + 2 * 4 + 8 + 2 * 8 * 4);
    }

    #[test]
    fn the_generated_method_calls_the_function() {
        let op = GqaDecode::new(
            spec(&[1, 4, 128], DType::Float16),
            spec(&[1, 64, 1, 128], DType::Float16),
            spec(&[1, 64, 1, 128], DType::Float16),
            &[40],
            DecodeOptions::default(),
            &Device::cpu(),
        )
        .unwrap();
        assert_eq!(
            op.eval_roofline().unwrap(),
            gqa_decode_roofline(&op).unwrap()
        );
    }
}
