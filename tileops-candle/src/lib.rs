//! tileops's fused LLM ops on [candle](https://github.com/huggingface/candle) tensors.
//!
//! Each function takes and returns `candle_core::Tensor`s and runs the tileops op as a candle
//! `CustomOp1/2/3` (one output, at most three inputs) or, for the ops with more outputs or inputs,
//! on the inputs' storages directly:
//!
//! - on candle's CPU device, tileops's CPU backend (its f64 references, rounded once to the
//!   output dtype) runs on host copies of the inputs;
//! - on a candle CUDA device (feature `cuda`), tileops's kernels run on candle's own stream,
//!   reading candle's buffers in place and writing new candle buffers (see the crate README).
//!
//! Inputs must be contiguous (a `narrow`ed tensor, at any start offset, is): a strided layout is
//! a candle error that says to call `.contiguous()`, never a hidden copy. dtypes are the tileops
//! op's (float32, float16, bfloat16 for most; see each function). Errors from tileops (a shape
//! or dtype the op refuses) come back as candle errors with tileops's message. No op records a
//! backward pass.
//!
//! ```
//! use candle_core::{DType, Device, Tensor, D};
//!
//! let x = Tensor::randn(0f32, 1.0, (4, 64), &Device::Cpu)?;
//! let weight = Tensor::ones(64, DType::F32, &Device::Cpu)?;
//! let y = tileops_candle::rms_norm(&x, &weight, 1e-6)?;
//! let p = tileops_candle::softmax(&y, D::Minus1)?;
//! let rows = p.sum(D::Minus1)?.to_vec1::<f32>()?;
//! assert!(rows.iter().all(|s| (s - 1.0).abs() < 1e-5));
//! # Ok::<(), candle_core::Error>(())
//! ```

mod bridge;
mod convert;
#[cfg(feature = "cuda")]
mod cuda;
mod kernels;

use candle_core::shape::Dim;
use candle_core::{Tensor, bail};

use bridge::Op;

pub use tileops::ops::{DecodeOptions, GemmOptions, PrefillOptions};

/// The tileops spec (shape and dtype) of a candle tensor: what a tileops op is planned for, to
/// price a call with its `eval_roofline` before or after running it here.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
///
/// let x = Tensor::zeros((8, 4096), DType::BF16, &Device::Cpu)?;
/// let spec = tileops_candle::tensor_spec(&x)?;
/// let w = tileops::TensorSpec::new([4096], spec.dtype);
/// let op = tileops::ops::RmsNorm::new(spec, w, 1e-6, &tileops::Device::cpu())?;
/// assert_eq!(op.eval_roofline()?.flops, 4 * 8 * 4096);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tensor_spec(t: &Tensor) -> candle_core::Result<tileops::TensorSpec> {
    let Some(dtype) = convert::tileops_dtype(t.dtype()) else {
        bail!("tileops has no dtype for candle's {:?}", t.dtype());
    };
    Ok(tileops::TensorSpec::new(t.dims(), dtype))
}

/// RMSNorm over the last dimension: `x / sqrt(mean(x^2) + eps) * weight`, `weight` `[N]` for `N`
/// the last dim of `x`; float32, float16 or bfloat16 (both alike).
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let x = Tensor::new(&[[3f32, 4.0]], &Device::Cpu)?;
/// let w = Tensor::new(&[1f32, 2.0], &Device::Cpu)?;
/// let y = tileops_candle::rms_norm(&x, &w, 0.0)?.to_vec2::<f32>()?;
/// let r = 12.5f32.sqrt();
/// assert!((y[0][0] - 3.0 / r).abs() < 1e-6 && (y[0][1] - 8.0 / r).abs() < 1e-6);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    x.apply_op2_no_bwd(weight, &Op(kernels::RmsNorm { eps }))
}

/// LayerNorm over the last dimension (biased variance), with `weight` and `bias` `[N]`; float32,
/// float16 or bfloat16 (all alike).
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let x = Tensor::new(&[[1f32, 3.0]], &Device::Cpu)?;
/// let w = Tensor::new(&[1f32, 1.0], &Device::Cpu)?;
/// let b = Tensor::new(&[0f32, 10.0], &Device::Cpu)?;
/// let y = tileops_candle::layer_norm(&x, &w, &b, 0.0)?.to_vec2::<f32>()?;
/// assert_eq!(y, [[-1.0, 11.0]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn layer_norm(
    x: &Tensor,
    weight: &Tensor,
    bias: &Tensor,
    eps: f64,
) -> candle_core::Result<Tensor> {
    x.apply_op3_no_bwd(weight, bias, &Op(kernels::LayerNorm { eps }))
}

/// The residual add fused with RMSNorm (vLLM's `fused_add_rms_norm`): returns
/// `(rms_norm(x + residual) * weight, x + residual)`, the sum rounded to the dtype as an unfused
/// add would store it. `x` and `residual` of one shape; float32, float16 or bfloat16.
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let x = Tensor::new(&[[1f32, 3.0]], &Device::Cpu)?;
/// let residual = Tensor::new(&[[2f32, 1.0]], &Device::Cpu)?;
/// let w = Tensor::new(&[1f32, 1.0], &Device::Cpu)?;
/// let (y, sum) = tileops_candle::fused_add_rms_norm(&x, &residual, &w, 0.0)?;
/// assert_eq!(sum.to_vec2::<f32>()?, [[3.0, 4.0]]);
/// let r = 12.5f32.sqrt();
/// assert_eq!(y.to_vec2::<f32>()?, [[3.0 / r, 4.0 / r]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn fused_add_rms_norm(
    x: &Tensor,
    residual: &Tensor,
    weight: &Tensor,
    eps: f64,
) -> candle_core::Result<(Tensor, Tensor)> {
    let [y, sum] = outputs(bridge::apply(
        &kernels::FusedAddRmsNorm { eps },
        &[x, residual, weight],
    )?)?;
    Ok((y, sum))
}

/// Softmax along `dim` (`D::Minus1`, or an index); float32, float16 or bfloat16, accumulated in
/// f32 on a GPU.
///
/// ```
/// use candle_core::{Device, Tensor, D};
///
/// let x = Tensor::new(&[[0f32, 0.0], [5.0, 5.0]], &Device::Cpu)?;
/// assert_eq!(tileops_candle::softmax(&x, D::Minus1)?.to_vec2::<f32>()?, [[0.5; 2]; 2]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn softmax<D: Dim>(x: &Tensor, dim: D) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(x.shape(), "softmax")? as i64;
    x.apply_op1_no_bwd(&Op(kernels::Softmax { dim }))
}

/// log_softmax along `dim`; float32, float16 or bfloat16.
///
/// ```
/// use candle_core::{Device, Tensor, D};
///
/// let x = Tensor::new(&[1f32, 1.0], &Device::Cpu)?;
/// let y = tileops_candle::log_softmax(&x, D::Minus1)?.to_vec1::<f32>()?;
/// assert!(y.iter().all(|v| (v + 2f32.ln()).abs() < 1e-6));
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn log_softmax<D: Dim>(x: &Tensor, dim: D) -> candle_core::Result<Tensor> {
    let dim = dim.to_index(x.shape(), "log_softmax")? as i64;
    x.apply_op1_no_bwd(&Op(kernels::LogSoftmax { dim }))
}

/// NeoX rotary embedding (vLLM's layout; candle-nn's `rope` and `rope_thd` pairs) of `x`
/// `[tokens, heads, head_dim]` (float32, float16 or bfloat16) at `positions` (`[tokens]` u32,
/// i32 or i64), with the table `cos_sin_cache` `[max_pos, head_dim]` (f32 or `x`'s dtype) whose
/// row `p` is `[cos (head_dim/2) | sin (head_dim/2)]` of position `p`: candle-nn's `cos` and
/// `sin` side by side ([`rope_table`]). Pair `i` of a head row is `(x[i], x[i + head_dim/2])`.
///
/// In candle-nn's terms: `rope_thd(x, cos, sin)` with `x` `[b, t, h, d]` is this op on
/// `x.reshape((b * t, h, d))` at positions `0..t` for each sequence; `rope(x, cos, sin)` with `x`
/// `[b, h, t, d]` is this op on `x.reshape((b * h * t, 1, d))` at positions `i % t`. The tests
/// compare the two with candle-nn's own.
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let dev = Device::Cpu;
/// let x = Tensor::new(&[[[1f32, 2.0, 3.0, 4.0]]], &dev)?; // 1 token, 1 head, head_dim 4
/// // Position 0 is the identity rotation: cos 1, sin 0.
/// let table = Tensor::new(&[[1f32, 1.0, 0.0, 0.0]], &dev)?;
/// let positions = Tensor::new(&[0i64], &dev)?;
/// let y = tileops_candle::rope(&x, &positions, &table)?;
/// assert_eq!(y.to_vec3::<f32>()?, x.to_vec3::<f32>()?);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn rope(x: &Tensor, positions: &Tensor, cos_sin_cache: &Tensor) -> candle_core::Result<Tensor> {
    let kernel = kernels::Rope {
        style: tileops::ops::RopeStyle::NeoX,
    };
    x.apply_op3_no_bwd(positions, cos_sin_cache, &Op(kernel))
}

/// Interleaved (GPT-J; candle-nn's `rope_i`) rotary embedding: as [`rope`], with pair `i` of a
/// head row `(x[2i], x[2i + 1])`. candle-nn's `rope_i(x, cos, sin)` with `x` `[b, h, t, d]` is
/// this op on `x.reshape((b * h * t, 1, d))` at positions `i % t`.
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let dev = Device::Cpu;
/// let x = Tensor::new(&[[[1f32, 2.0, 3.0, 4.0]]], &dev)?; // 1 token, 1 head, head_dim 4
/// // A quarter turn (cos 0, sin 1): each pair (a, b) becomes (-b, a).
/// let table = tileops_candle::rope_table(&Tensor::new(&[[0f32, 0.0]], &dev)?, &Tensor::new(&[[1f32, 1.0]], &dev)?)?;
/// let positions = Tensor::new(&[0u32], &dev)?;
/// let y = tileops_candle::rope_i(&x, &positions, &table)?;
/// assert_eq!(y.to_vec3::<f32>()?, [[[-2.0, 1.0, -4.0, 3.0]]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn rope_i(
    x: &Tensor,
    positions: &Tensor,
    cos_sin_cache: &Tensor,
) -> candle_core::Result<Tensor> {
    let kernel = kernels::Rope {
        style: tileops::ops::RopeStyle::Interleaved,
    };
    x.apply_op3_no_bwd(positions, cos_sin_cache, &Op(kernel))
}

/// The `cos_sin_cache` of [`rope`] and [`rope_i`] from candle-nn's `cos` and `sin` tables
/// (`[max_pos, head_dim / 2]` each, as a Llama `Cache` computes them once): `[max_pos, head_dim]`,
/// each row `[cos | sin]`, in their dtype. Built once per model, like the tables themselves (on a
/// GPU it is candle's `cat`).
pub fn rope_table(cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
    Tensor::cat(&[cos, sin], candle_core::D::Minus1)
}

/// SwiGLU (vLLM's `silu_and_mul`): `x` `[..., 2N]` holds gate then up along the last dim, the
/// result `[..., N]` is `silu(gate) * up`; float32, float16 or bfloat16.
///
/// ```
/// use candle_core::{Device, Tensor};
///
/// let x = Tensor::new(&[[0f32, 30.0, 5.0, 2.0]], &Device::Cpu)?;
/// assert_eq!(tileops_candle::silu_and_mul(&x)?.to_vec2::<f32>()?, [[0.0, 60.0]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn silu_and_mul(x: &Tensor) -> candle_core::Result<Tensor> {
    x.apply_op1_no_bwd(&Op(kernels::SiluAndMul))
}

/// Dynamic fp8 (e4m3fn) quantization of `x` `[M, K]` (float32, float16 or bfloat16) with one f32
/// scale per group of `group_size` elements of a row (`0`: one per row). Returns
/// `(codes [M, K] F8E4M3, scales [M, K / group] F32)`; `codes * scale` dequantizes.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
///
/// let x = Tensor::new(&[[1f32, -2.0, 0.5, 0.0]], &Device::Cpu)?;
/// let (codes, scales) = tileops_candle::fp8_quant(&x, 0)?;
/// assert_eq!(codes.dtype(), DType::F8E4M3);
/// assert_eq!(scales.to_vec2::<f32>()?, [[2.0 / 448.0]]);
/// let back = codes.to_dtype(DType::F32)?.broadcast_mul(&scales)?.to_vec2::<f32>()?;
/// for (b, x) in back[0].iter().zip([1.0, -2.0, 0.5, 0.0]) {
///     assert!((b - x).abs() < 1e-6);
/// }
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn fp8_quant(x: &Tensor, group_size: usize) -> candle_core::Result<(Tensor, Tensor)> {
    let [codes, scales] = outputs(bridge::apply(&kernels::Fp8Quant { group_size }, &[x])?)?;
    Ok((codes, scales))
}

/// The outputs of [`qk_norm_rope_fp8`].
#[derive(Debug, Clone)]
pub struct QkNormRopeFp8Output {
    /// `[tokens, q_heads, 128]` F8E4M3.
    pub q_fp8: Tensor,
    /// `[tokens, k_heads, 128]` F8E4M3.
    pub k_fp8: Tensor,
    /// `[tokens, q_heads]` F32: `q ≈ q_fp8 * q_scale` per head row.
    pub q_scale: Tensor,
    /// `[tokens, k_heads]` F32.
    pub k_scale: Tensor,
}

/// QK-norm, RoPE and fp8 quantization in one pass: per head row of `q` `[tokens, q_heads, 128]`
/// and `k` `[tokens, k_heads, 128]` (bfloat16 or float16), RMSNorm with `q_weight` / `k_weight`
/// (`[128]`), NeoX RoPE at `positions` (`[tokens]` i64) with the f32 table `cos_sin_cache`
/// `[max_pos, 128]` (as [`rope`]), then fp8 codes with one f32 scale per row.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
///
/// let dev = Device::Cpu;
/// let q = Tensor::randn(0f32, 1.0, (2, 4, 128), &dev)?.to_dtype(DType::BF16)?;
/// let k = Tensor::randn(0f32, 1.0, (2, 1, 128), &dev)?.to_dtype(DType::BF16)?;
/// let w = Tensor::ones(128, DType::BF16, &dev)?;
/// let table = Tensor::ones((8, 128), DType::F32, &dev)?;
/// let positions = Tensor::new(&[0i64, 1], &dev)?;
/// let out = tileops_candle::qk_norm_rope_fp8(&q, &k, &w, &w, &positions, &table, 1e-6)?;
/// assert_eq!(out.q_fp8.dims(), &[2, 4, 128]);
/// assert_eq!(out.k_scale.dims(), &[2, 1]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn qk_norm_rope_fp8(
    q: &Tensor,
    k: &Tensor,
    q_weight: &Tensor,
    k_weight: &Tensor,
    positions: &Tensor,
    cos_sin_cache: &Tensor,
    eps: f64,
) -> candle_core::Result<QkNormRopeFp8Output> {
    let [q_fp8, k_fp8, q_scale, k_scale] = outputs(bridge::apply(
        &kernels::QkNormRopeFp8 { eps },
        &[q, k, q_weight, k_weight, positions, cos_sin_cache],
    )?)?;
    Ok(QkNormRopeFp8Output {
        q_fp8,
        k_fp8,
        q_scale,
        k_scale,
    })
}

/// The matrix product `op(a) @ op(b)` of rank-2 tensors, `op(t) = t.T` where `options` say so
/// (`trans_b` for an `nn.Linear` weight stored `[N, K]`, read in place, no transpose copy);
/// float32 (strict, unless `allow_tf32`), float16 or bfloat16 with f32 accumulation.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use tileops_candle::GemmOptions;
///
/// let a = Tensor::new(&[[1f32, 2.0], [3.0, 4.0]], &Device::Cpu)?;
/// let w = Tensor::new(&[[1f32, 0.0], [1.0, 1.0]], &Device::Cpu)?; // [N, K]
/// let y = tileops_candle::gemm(&a, &w, GemmOptions::new().trans_b(true))?;
/// assert_eq!(y.to_vec2::<f32>()?, a.matmul(&w.t()?)?.to_vec2::<f32>()?);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn gemm(a: &Tensor, b: &Tensor, options: GemmOptions) -> candle_core::Result<Tensor> {
    a.apply_op2_no_bwd(b, &Op(kernels::Gemm { options }))
}

/// Attention decode over a dense KV cache: `q` `[B, H, D]`, `k_cache`, `v_cache`
/// `[B, S_max, H_kv, D]`, sequence `b` attending over its first `seqlens[b]` keys (host values;
/// the kernel's device copy is made from them). `q` float16 or bfloat16, head dims 64, 128, 256;
/// the cache of q's dtype with `scales` `None`, or F8E4M3 codes with `scales`
/// `Some((k_scale, v_scale))`, one F32 scale per tensor (`[1]` each, on the cache's device):
/// key `j` reads as `k_cache[j] * k_scale`. Returns `o` `[B, H, D]` and, with
/// `options.return_lse(true)`, the log-sum-exp `[B, H]` F32.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use tileops_candle::DecodeOptions;
///
/// let dev = Device::Cpu;
/// let q = Tensor::randn(0f32, 1.0, (1, 4, 64), &dev)?.to_dtype(DType::F16)?;
/// let kv = Tensor::randn(0f32, 1.0, (1, 16, 2, 64), &dev)?;
/// let kv16 = kv.to_dtype(DType::F16)?;
/// let (o, lse) = tileops_candle::gqa_decode(&q, &kv16, &kv16, &[16], None,
///     DecodeOptions::default())?;
/// assert_eq!((o.dims(), lse.is_none()), (&[1, 4, 64][..], true));
/// // An fp8 cache: codes of kv / 0.5, read back times the scale.
/// let codes = (kv / 0.5)?.to_dtype(DType::F8E4M3)?;
/// let scale = Tensor::new(&[0.5f32], &dev)?;
/// let (o8, _) = tileops_candle::gqa_decode(&q, &codes, &codes, &[16], Some((&scale, &scale)),
///     DecodeOptions::default())?;
/// assert_eq!(o8.dims(), &[1, 4, 64]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn gqa_decode(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    seqlens: &[i32],
    scales: Option<(&Tensor, &Tensor)>,
    options: DecodeOptions,
) -> candle_core::Result<(Tensor, Option<Tensor>)> {
    let kernel = kernels::GqaDecode {
        seqlens: seqlens.to_vec(),
        options,
    };
    attention_outputs(bridge::apply(
        &kernel,
        &decode_inputs(q, k_cache, v_cache, scales),
    )?)
}

/// Attention decode over a paged KV cache (vLLM v1's and FlashInfer's NHD layout): as
/// [`gqa_decode`], with the keys and values in page pools `k_pages`, `v_pages`
/// `[num_pages, page_size, H_kv, D]` and the host block table `block_table` (`B x max_pages`
/// entries, row-major): key `p` of sequence `b` is row `p % page_size` of page
/// `block_table[b * max_pages + p / page_size]`. Every entry a sequence uses must be a page of
/// the pool (an error before anything runs otherwise); entries past a sequence's last page are
/// not read (vLLM pads them with -1). Any page size; the pools may be F8E4M3 with `scales` as in
/// [`gqa_decode`]. The kernel's device copies of the table and of `seqlens` are made from the
/// host ones.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use tileops_candle::DecodeOptions;
///
/// let dev = Device::Cpu;
/// // Two sequences of 20 and 5 keys in pages of 16: pages 2, 0 for the first, 1 for the second.
/// let q = Tensor::randn(0f32, 1.0, (2, 4, 64), &dev)?.to_dtype(DType::BF16)?;
/// let pool = Tensor::randn(0f32, 1.0, (3, 16, 1, 64), &dev)?.to_dtype(DType::BF16)?;
/// let table = [2, 0, 1, -1];
/// let (o, _) = tileops_candle::gqa_decode_paged(&q, &pool, &pool, &table, &[20, 5], None,
///     DecodeOptions::default())?;
/// assert_eq!(o.dims(), &[2, 4, 64]);
/// // A page outside the pool, in a slot a sequence uses, is refused.
/// assert!(tileops_candle::gqa_decode_paged(&q, &pool, &pool, &[2, 3, 1, -1], &[20, 5], None,
///     DecodeOptions::default()).is_err());
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn gqa_decode_paged(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &[i32],
    seqlens: &[i32],
    scales: Option<(&Tensor, &Tensor)>,
    options: DecodeOptions,
) -> candle_core::Result<(Tensor, Option<Tensor>)> {
    let kernel = kernels::GqaDecodePaged {
        block_table: block_table.to_vec(),
        seqlens: seqlens.to_vec(),
        options,
    };
    attention_outputs(bridge::apply(
        &kernel,
        &decode_inputs(q, k_pages, v_pages, scales),
    )?)
}

/// The bridge's inputs of a decode: q, k, v, then the fp8 scales when given.
fn decode_inputs<'a>(
    q: &'a Tensor,
    k: &'a Tensor,
    v: &'a Tensor,
    scales: Option<(&'a Tensor, &'a Tensor)>,
) -> Vec<&'a Tensor> {
    let mut inputs = vec![q, k, v];
    inputs.extend(scales.into_iter().flat_map(|(k, v)| [k, v]));
    inputs
}

/// Attention prefill over packed variable-length sequences: `q` `[total_q, H, D]`, `k`, `v`
/// `[total_kv, H_kv, D]`, with the host offsets `cu_seqlens_q`, `cu_seqlens_k` (`B + 1` each,
/// from 0 to the totals), as FlashAttention-2's varlen functions; causal (bottom-right aligned),
/// sliding window and softcap through `options`. float16 or bfloat16, head dims 64, 128, 256.
/// Returns `o` `[total_q, H, D]` and, with `options.return_lse(true)`, the log-sum-exp
/// `[H, total_q]` F32.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use tileops_candle::PrefillOptions;
///
/// let dev = Device::Cpu;
/// let q = Tensor::randn(0f32, 1.0, (6, 8, 64), &dev)?.to_dtype(DType::BF16)?;
/// let kv = Tensor::randn(0f32, 1.0, (6, 2, 64), &dev)?.to_dtype(DType::BF16)?;
/// let cu = [0, 6];
/// let (o, _) = tileops_candle::gqa_prefill(&q, &kv, &kv, &cu, &cu,
///     PrefillOptions::default().causal(true))?;
/// assert_eq!(o.dims(), &[6, 8, 64]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn gqa_prefill(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_seqlens_q: &[i32],
    cu_seqlens_k: &[i32],
    options: PrefillOptions,
) -> candle_core::Result<(Tensor, Option<Tensor>)> {
    let kernel = kernels::GqaPrefill {
        cu_seqlens_q: cu_seqlens_q.to_vec(),
        cu_seqlens_k: cu_seqlens_k.to_vec(),
        options,
    };
    attention_outputs(bridge::apply(&kernel, &[q, k, v])?)
}

/// Exactly `N` outputs of a multi-output op.
fn outputs<const N: usize>(outputs: Vec<Tensor>) -> candle_core::Result<[Tensor; N]> {
    let n = outputs.len();
    <[Tensor; N]>::try_from(outputs)
        .map_err(|_| candle_core::Error::msg(format!("tileops gave {n} outputs, {N} expected")))
}

/// `o` and the optional lse of an attention op.
fn attention_outputs(mut outputs: Vec<Tensor>) -> candle_core::Result<(Tensor, Option<Tensor>)> {
    match outputs.len() {
        1 | 2 => {
            let o = outputs.remove(0);
            Ok((o, outputs.pop()))
        }
        n => bail!("tileops attention gave {n} outputs, 1 or 2 expected"),
    }
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
