//! What the tests share: inputs, tolerances, and the candle-side references, written with
//! candle-core's own ops (in f32, on the CPU).

#![allow(dead_code)] // each test binary uses its part

use candle_core::{D, DType, Device, IndexOp, Result, Tensor};

/// The dtypes of the float ops, with the names the messages use.
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// The dtypes of the ops written for half precision only (attention, qk_norm_rope_fp8).
pub const HALVES: [DType; 2] = [DType::F16, DType::BF16];

/// A deterministic N(0, 1) tensor in `dtype` (candle's CPU generator cannot be seeded):
/// SplitMix64 and Box-Muller.
pub fn randn(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // In (0, 1]: the log below stays finite.
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON
    };
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu)?.to_dtype(dtype)
}

/// The largest `|actual - expected|` beyond `atol + rtol * |expected|` must be 0: the tileops
/// CPU path computes in f64 and rounds once, so it sits within half an ulp of the dtype (plus the
/// f32 reference's own rounding) of the reference.
pub fn assert_close(what: &str, actual: &Tensor, expected: &Tensor, dtype: DType) -> Result<()> {
    let (atol, rtol) = tolerance(dtype);
    assert_close_tol(what, actual, expected, atol, rtol)
}

/// As [`assert_close`], with explicit tolerances.
pub fn assert_close_tol(
    what: &str,
    actual: &Tensor,
    expected: &Tensor,
    atol: f32,
    rtol: f32,
) -> Result<()> {
    assert_eq!(actual.dims(), expected.dims(), "{what}: shapes");
    let a = actual
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1::<f32>()?;
    let e = expected
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1::<f32>()?;
    let mut worst = (0.0f32, 0usize);
    for (i, (x, y)) in a.iter().zip(&e).enumerate() {
        let excess = (x - y).abs() - (atol + rtol * y.abs());
        assert!(
            !x.is_nan() || y.is_nan(),
            "{what}: NaN at {i} (expected {y})"
        );
        if excess > worst.0 {
            worst = (excess, i);
        }
    }
    let i = worst.1;
    assert!(
        worst.0 <= 0.0,
        "{what}: element {i} is {} but the reference is {} (atol {atol}, rtol {rtol})",
        a[i],
        e[i]
    );
    Ok(())
}

/// (atol, rtol) of one rounding to `dtype` on values of magnitude about 1.
pub fn tolerance(dtype: DType) -> (f32, f32) {
    match dtype {
        DType::F32 => (1e-5, 1e-5),
        DType::F16 => (2e-3, 2e-3),
        _ => (1.6e-2, 1.6e-2),
    }
}

pub fn f32(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(DType::F32)
}

pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let x = f32(x)?;
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(ms + eps)?.sqrt()?)?
        .broadcast_mul(&f32(w)?)
}

pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    let x = f32(x)?;
    let centred = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    centred
        .broadcast_div(&(var + eps)?.sqrt()?)?
        .broadcast_mul(&f32(w)?)?
        .broadcast_add(&f32(b)?)
}

pub fn softmax(x: &Tensor, dim: usize) -> Result<Tensor> {
    let x = f32(x)?;
    let e = x.broadcast_sub(&x.max_keepdim(dim)?)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(dim)?)
}

pub fn log_softmax(x: &Tensor, dim: usize) -> Result<Tensor> {
    let x = f32(x)?;
    let shifted = x.broadcast_sub(&x.max_keepdim(dim)?)?;
    shifted.broadcast_sub(&shifted.exp()?.sum_keepdim(dim)?.log()?)
}

/// A NeoX cos/sin table `[max_pos, head_dim]` (f32): row `p` is `[cos(p θ_i) | sin(p θ_i)]`.
pub fn rope_table(max_pos: usize, head_dim: usize, theta: f64) -> Result<Tensor> {
    let half = head_dim / 2;
    let mut rows = Vec::with_capacity(max_pos * head_dim);
    for p in 0..max_pos {
        let angles: Vec<f64> = (0..half)
            .map(|i| p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64))
            .collect();
        rows.extend(angles.iter().map(|a| a.cos() as f32));
        rows.extend(angles.iter().map(|a| a.sin() as f32));
    }
    Tensor::from_vec(rows, (max_pos, head_dim), &Device::Cpu)
}

/// NeoX RoPE of `x` `[tokens, heads, head_dim]` at `positions` (i64) with `table`.
pub fn rope(x: &Tensor, positions: &Tensor, table: &Tensor) -> Result<Tensor> {
    let x = f32(x)?;
    let half = x.dim(D::Minus1)? / 2;
    let rows = table.index_select(positions, 0)?.unsqueeze(1)?; // [tokens, 1, head_dim]
    let (cos, sin) = (rows.narrow(2, 0, half)?, rows.narrow(2, half, half)?);
    let (x1, x2) = (x.narrow(2, 0, half)?, x.narrow(2, half, half)?);
    let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
    let y2 = (x2.broadcast_mul(&cos)? + x1.broadcast_mul(&sin)?)?;
    Tensor::cat(&[y1, y2], 2)
}

pub fn silu_and_mul(x: &Tensor) -> Result<Tensor> {
    let x = f32(x)?;
    let n = x.dim(D::Minus1)? / 2;
    x.narrow(D::Minus1, 0, n)?
        .silu()?
        .mul(&x.narrow(D::Minus1, n, n)?)
}

/// fp8 e4m3fn's largest finite value, and the smallest scale the quantizers use.
pub const FP8_MAX: f32 = 448.0;
pub const MIN_SCALE: f32 = 1.0 / (448.0 * 512.0);

/// The per-group scales of a dynamic fp8 quantization of `x` `[rows, K]` (f32).
pub fn fp8_scales(x: &Tensor, group: usize) -> Result<Tensor> {
    let (rows, k) = x.dims2()?;
    let amax = f32(x)?
        .abs()?
        .reshape((rows, k / group, group))?
        .max(D::Minus1)?;
    (amax / FP8_MAX as f64)?.maximum(MIN_SCALE)
}

/// Checks codes and scales against the values they quantize (`x` `[rows, K]`, f32): the scales
/// within `scale_rtol` of the reference's, and `codes * scale` within half an e4m3 step (3
/// mantissa bits: 2^-4 relative, or the subnormal step `scale * 2^-9` near zero) of `x`.
pub fn assert_fp8(
    what: &str,
    codes: &Tensor,
    scales: &Tensor,
    x: &Tensor,
    group: usize,
    scale_rtol: f32,
) -> Result<()> {
    let (rows, k) = x.dims2()?;
    let expected_scales = fp8_scales(x, group)?;
    assert_close_tol(
        &format!("{what}: scales"),
        scales,
        &expected_scales,
        0.0,
        scale_rtol,
    )?;
    assert_eq!(codes.dtype(), DType::F8E4M3, "{what}: codes dtype");
    let per_elem = scales
        .reshape((rows, k / group, 1))?
        .broadcast_as((rows, k / group, group))?
        .reshape((rows, k))?;
    let back = f32(&codes.reshape((rows, k))?)?.mul(&per_elem)?;
    let x = f32(x)?;
    let err = (back - &x)?.abs()?;
    let bound = ((x.abs()? * (1.0 / 16.0 + scale_rtol as f64))? + (per_elem / 512.0)?)?;
    let over = err
        .gt(&bound)?
        .to_dtype(DType::F32)?
        .sum_all()?
        .to_scalar::<f32>()?;
    assert_eq!(
        over, 0.0,
        "{what}: {over} codes farther than half a step from x"
    );
    Ok(())
}

/// `[rows]` of query heads' KV head: `h / (heads / kv_heads)`, as u32 indices.
fn kv_head_of(heads: usize, kv_heads: usize) -> Result<Tensor> {
    let group = heads / kv_heads;
    let map: Vec<u32> = (0..heads).map(|h| (h / group) as u32).collect();
    Tensor::new(map, &Device::Cpu)
}

/// Attention of one sequence: `q` `[lq, H, D]` over `k`, `v` `[lk, H_kv, D]` (f32), causal
/// bottom-right aligned when asked: query `i` sees key `j <= i + lk - lq`.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64) -> Result<Tensor> {
    let (lq, heads, _) = q.dims3()?;
    let (lk, kv_heads, _) = k.dims3()?;
    let map = kv_head_of(heads, kv_heads)?;
    let q = f32(q)?.transpose(0, 1)?.contiguous()?; // [H, lq, D]
    let k = f32(k)?
        .transpose(0, 1)?
        .contiguous()?
        .index_select(&map, 0)?; // [H, lk, D]
    let v = f32(v)?
        .transpose(0, 1)?
        .contiguous()?
        .index_select(&map, 0)?;
    let mut scores = (q.matmul(&k.t()?)? * scale)?; // [H, lq, lk]
    if causal {
        let mask: Vec<f32> = (0..lq)
            .flat_map(|i| {
                (0..lk).map(move |j| {
                    if j + lq <= i + lk {
                        0.0
                    } else {
                        f32::NEG_INFINITY
                    }
                })
            })
            .collect();
        scores = scores.broadcast_add(&Tensor::from_vec(mask, (lq, lk), &Device::Cpu)?)?;
    }
    softmax(&scores, 2)?
        .matmul(&v)?
        .transpose(0, 1)?
        .contiguous() // [lq, H, D]
}

/// Prefill over packed sequences (`cu_*` offsets), sequence by sequence.
pub fn prefill(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cu_q: &[i32],
    cu_k: &[i32],
    causal: bool,
    scale: f64,
) -> Result<Tensor> {
    let mut outs = Vec::new();
    for s in 0..cu_q.len() - 1 {
        let (q0, lq) = (cu_q[s] as usize, (cu_q[s + 1] - cu_q[s]) as usize);
        let (k0, lk) = (cu_k[s] as usize, (cu_k[s + 1] - cu_k[s]) as usize);
        outs.push(attention(
            &q.narrow(0, q0, lq)?,
            &k.narrow(0, k0, lk)?,
            &v.narrow(0, k0, lk)?,
            causal,
            scale,
        )?);
    }
    Tensor::cat(&outs, 0)
}

/// Decode: `q` `[B, H, D]` over the first `seqlens[b]` rows of `k`, `v` `[B, S, H_kv, D]`.
pub fn decode(q: &Tensor, k: &Tensor, v: &Tensor, seqlens: &[i32], scale: f64) -> Result<Tensor> {
    let mut outs = Vec::new();
    for (b, &len) in seqlens.iter().enumerate() {
        let len = len as usize;
        let qb = q.i(b)?.unsqueeze(0)?; // [1, H, D]
        let kb = k.i(b)?.narrow(0, 0, len)?;
        let vb = v.i(b)?.narrow(0, 0, len)?;
        outs.push(attention(&qb, &kb, &vb, false, scale)?);
    }
    Tensor::cat(&outs, 0)
}

/// Decode over a paged pool: each sequence's keys gathered from its pages of `k_pages`,
/// `v_pages` `[num_pages, page_size, H_kv, D]` by the block table (`B x max_pages`, row-major),
/// cut to its length, then [`attention`] as for a dense cache.
pub fn decode_paged(
    q: &Tensor,
    k_pages: &Tensor,
    v_pages: &Tensor,
    block_table: &[i32],
    seqlens: &[i32],
    scale: f64,
) -> Result<Tensor> {
    let page_size = k_pages.dim(1)?;
    let max_pages = block_table.len() / seqlens.len();
    let mut outs = Vec::new();
    for (b, &len) in seqlens.iter().enumerate() {
        let len = len as usize;
        let pages = &block_table[b * max_pages..][..len.div_ceil(page_size)];
        let gather = |pool: &Tensor| -> Result<Tensor> {
            let rows = pages
                .iter()
                .map(|&p| pool.i(p as usize))
                .collect::<Result<Vec<_>>>()?;
            Tensor::cat(&rows, 0)?.narrow(0, 0, len)
        };
        let qb = q.i(b)?.unsqueeze(0)?; // [1, H, D]
        outs.push(attention(
            &qb,
            &gather(k_pages)?,
            &gather(v_pages)?,
            false,
            scale,
        )?);
    }
    Tensor::cat(&outs, 0)
}

/// fp8 codes of `x / scale` (so `codes * scale` is about `x`) and the scale as a `[1]` F32
/// tensor, the pair an fp8 KV cache is given as.
pub fn fp8_cache(x: &Tensor, scale: f32) -> Result<(Tensor, Tensor)> {
    let codes = (f32(x)? / scale as f64)?.to_dtype(DType::F8E4M3)?;
    Ok((codes, Tensor::new(&[scale], &Device::Cpu)?))
}

/// What an fp8 cache reads as: `codes * scale`, in f32.
pub fn dequantized(codes: &Tensor, scale: &Tensor) -> Result<Tensor> {
    f32(codes)?.broadcast_mul(scale)
}
