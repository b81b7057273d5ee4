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

use crate::ops::attention::{DecodePlan, KvLayout};
use crate::ops::{GqaDecode, GqaDecodePaged};
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

/// The decode count, in checked u64 arithmetic: an overflow is an error, never a wrap.
fn decode_roofline(op: &'static str, p: &DecodePlan) -> Result<Roofline, RooflineError> {
    let overflow = || RooflineError::Func {
        op,
        message: "the FLOPs or bytes of one call overflow u64".to_owned(),
    };
    let n = |value: usize| u64::try_from(value).map_err(|_| overflow());
    let mul = |factors: &[u64]| {
        factors
            .iter()
            .try_fold(1u64, |acc, &f| acc.checked_mul(f))
            .ok_or_else(overflow)
    };
    let add = |terms: &[u64]| {
        terms
            .iter()
            .try_fold(0u64, |acc, &t| acc.checked_add(t))
            .ok_or_else(overflow)
    };
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
