//! Every bridged op on candle's CPU device against the same computation written with candle-core's
//! own ops, in every dtype the tileops op supports; each op also with a `narrow`ed input (a
//! non-zero start offset) and a non-contiguous one (refused, with a message that says what to do).

mod common;

use candle_core::{D, DType, Device, Result, Tensor};
use common::*;
use tileops_candle::{DecodeOptions, GemmOptions, PrefillOptions};

const EPS: f64 = 1e-6;

/// `rows` rows of `shape` taken out of a larger tensor at row 3: contiguous, at a non-zero start
/// offset in its storage.
fn narrowed(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let mut bigger = shape.to_vec();
    bigger[0] += 5;
    let x = randn(&bigger, dtype, seed)?.narrow(0, 3, shape[0])?;
    assert!(x.layout().start_offset() > 0 && x.is_contiguous());
    Ok(x)
}

/// A tensor of `shape` (rank 2 or more) stored transposed in its first two dims: not contiguous.
fn strided(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let mut swapped = shape.to_vec();
    swapped.swap(0, 1);
    let x = randn(&swapped, dtype, seed)?.transpose(0, 1)?;
    assert!(!x.is_contiguous());
    Ok(x)
}

fn assert_refuses_strided<T: std::fmt::Debug>(what: &str, result: Result<T>) {
    let message = result.expect_err(what).to_string();
    assert!(
        message.contains("not contiguous") && message.contains(".contiguous()"),
        "{what}: {message}"
    );
}

#[test]
fn rms_norm() -> Result<()> {
    for dtype in FLOATS {
        let w = randn(&[96], dtype, 2)?;
        for (how, x) in [
            ("plain", randn(&[7, 96], dtype, 1)?),
            ("narrowed", narrowed(&[7, 96], dtype, 1)?),
            ("rank 3", randn(&[2, 3, 96], dtype, 4)?),
        ] {
            let y = tileops_candle::rms_norm(&x, &w, EPS)?;
            assert_eq!(y.dtype(), dtype);
            let what = format!("rms_norm {dtype:?} {how}");
            assert_close(&what, &y, &common::rms_norm(&x, &w, EPS)?, dtype)?;
        }
        let x = strided(&[7, 96], dtype, 1)?;
        assert_refuses_strided("rms_norm strided", tileops_candle::rms_norm(&x, &w, EPS));
    }
    // A tileops error is a candle error with tileops's message.
    let x = randn(&[2, 8], DType::F32, 1)?;
    let message = tileops_candle::rms_norm(&x, &randn(&[4], DType::F32, 1)?, EPS)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("rms_norm") && message.contains("weight"),
        "{message}"
    );
    Ok(())
}

#[test]
fn layer_norm() -> Result<()> {
    for dtype in FLOATS {
        let (w, b) = (randn(&[80], dtype, 2)?, randn(&[80], dtype, 3)?);
        for (how, x) in [
            ("plain", randn(&[5, 80], dtype, 1)?),
            ("narrowed", narrowed(&[5, 80], dtype, 1)?),
        ] {
            let y = tileops_candle::layer_norm(&x, &w, &b, 1e-5)?;
            let what = format!("layer_norm {dtype:?} {how}");
            assert_close(&what, &y, &common::layer_norm(&x, &w, &b, 1e-5)?, dtype)?;
        }
        let x = strided(&[5, 80], dtype, 1)?;
        assert_refuses_strided("layer_norm", tileops_candle::layer_norm(&x, &w, &b, 1e-5));
    }
    Ok(())
}

#[test]
fn fused_add_rms_norm() -> Result<()> {
    for dtype in FLOATS {
        let w = randn(&[64], dtype, 2)?;
        let residual = randn(&[6, 64], dtype, 3)?;
        for (how, x) in [
            ("plain", randn(&[6, 64], dtype, 1)?),
            ("narrowed", narrowed(&[6, 64], dtype, 1)?),
        ] {
            let (y, sum) = tileops_candle::fused_add_rms_norm(&x, &residual, &w, EPS)?;
            // The sum is rounded to the dtype, as candle's own add stores it: equal.
            let expected_sum = (&x + &residual)?;
            let what = format!("fused_add_rms_norm {dtype:?} {how}");
            assert_close_tol(&format!("{what}: sum"), &sum, &expected_sum, 0.0, 0.0)?;
            assert_close(&what, &y, &common::rms_norm(&expected_sum, &w, EPS)?, dtype)?;
        }
        let x = strided(&[6, 64], dtype, 1)?;
        assert_refuses_strided(
            "fused_add_rms_norm",
            tileops_candle::fused_add_rms_norm(&residual, &x, &w, EPS),
        );
    }
    Ok(())
}

#[test]
fn softmax_and_log_softmax() -> Result<()> {
    for dtype in FLOATS {
        for (how, x) in [
            ("plain", (randn(&[4, 6, 50], dtype, 1)? * 3.0)?),
            ("narrowed", (narrowed(&[4, 6, 50], dtype, 1)? * 3.0)?),
        ] {
            for dim in [2, 1, 0] {
                let what = format!("softmax {dtype:?} {how} dim {dim}");
                let y = tileops_candle::softmax(&x, dim)?;
                assert_close(&what, &y, &common::softmax(&x, dim)?, dtype)?;
                let what = format!("log_softmax {dtype:?} {how} dim {dim}");
                let y = tileops_candle::log_softmax(&x, dim)?;
                // log-probabilities reach about -20 here: the tolerance is relative to them.
                assert_close(&what, &y, &common::log_softmax(&x, dim)?, dtype)?;
            }
        }
        let y = tileops_candle::softmax(&randn(&[3, 5], dtype, 1)?, D::Minus1)?;
        assert_eq!(y.dims(), &[3, 5]);
        let x = strided(&[6, 50], dtype, 1)?;
        assert_refuses_strided("softmax", tileops_candle::softmax(&x, D::Minus1));
        assert_refuses_strided("log_softmax", tileops_candle::log_softmax(&x, D::Minus1));
    }
    Ok(())
}

#[test]
fn rope() -> Result<()> {
    let table = rope_table(32, 64, 10_000.0)?;
    let positions = Tensor::new(&[0i64, 5, 31, 7, 7], &Device::Cpu)?;
    for dtype in FLOATS {
        for (how, x) in [
            ("plain", randn(&[5, 3, 64], dtype, 1)?),
            ("narrowed", narrowed(&[5, 3, 64], dtype, 1)?),
        ] {
            let y = tileops_candle::rope(&x, &positions, &table)?;
            let what = format!("rope {dtype:?} {how}");
            assert_close(&what, &y, &common::rope(&x, &positions, &table)?, dtype)?;
        }
        // Positions and table narrowed too: offsets into their storages.
        let far = Tensor::new(&[9i64, 9, 0, 5, 31, 7, 7], &Device::Cpu)?.narrow(0, 2, 5)?;
        let x = randn(&[5, 3, 64], dtype, 1)?;
        let y = tileops_candle::rope(&x, &far, &table)?;
        assert_close(
            "rope offsets",
            &y,
            &common::rope(&x, &positions, &table)?,
            dtype,
        )?;
        let x = strided(&[5, 3, 64], dtype, 1)?;
        assert_refuses_strided("rope", tileops_candle::rope(&x, &positions, &table));
    }
    Ok(())
}

/// candle-nn's rotary embeddings (`rope`, `rope_i`, `rope_thd`) against the bridge's `rope` and
/// `rope_i` on the same cos/sin tables (joined by `rope_table`) at the positions each layout
/// implies, in every float dtype, with u32 positions and the tables in x's dtype as candle keeps
/// them.
#[test]
fn rope_matches_candle_nn() -> Result<()> {
    let (b, h, t, d) = (2, 3, 5, 64);
    let full = rope_table(16, d, 10_000.0)?;
    let positions = |rows: usize| {
        let p: Vec<u32> = (0..rows).map(|i| (i % t) as u32).collect();
        Tensor::from_vec(p, rows, &Device::Cpu)
    };
    for dtype in FLOATS {
        let cos = full
            .narrow(0, 0, t)?
            .narrow(1, 0, d / 2)?
            .to_dtype(dtype)?
            .contiguous()?;
        let sin = full
            .narrow(0, 0, t)?
            .narrow(1, d / 2, d / 2)?
            .to_dtype(dtype)?
            .contiguous()?;
        let table = tileops_candle::rope_table(&cos, &sin)?;
        assert_eq!(table.dims(), &[t, d]);
        // [b, h, t, d]: rows of one head each, at position i % t.
        let x = randn(&[b, h, t, d], dtype, 3)?;
        let rows = x.reshape((b * h * t, 1, d))?;
        let ours = tileops_candle::rope(&rows, &positions(b * h * t)?, &table)?;
        let theirs = candle_nn::rotary_emb::rope(&x, &cos, &sin)?;
        let what = format!("rope vs candle-nn rope {dtype:?}");
        assert_close(&what, &ours.reshape((b, h, t, d))?, &theirs, dtype)?;
        let ours = tileops_candle::rope_i(&rows, &positions(b * h * t)?, &table)?;
        let theirs = candle_nn::rotary_emb::rope_i(&x, &cos, &sin)?;
        let what = format!("rope_i vs candle-nn rope_i {dtype:?}");
        assert_close(&what, &ours.reshape((b, h, t, d))?, &theirs, dtype)?;
        // The two layouts differ: the check above would catch a swapped style.
        let neox = tileops_candle::rope(&rows, &positions(b * h * t)?, &table)?;
        let diff = (neox.to_dtype(DType::F32)? - ours.to_dtype(DType::F32)?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff > 0.1, "rope and rope_i agree ({diff}) {dtype:?}");
        // [b, t, h, d]: tokens of h heads, at position i % t.
        let x = randn(&[b, t, h, d], dtype, 4)?;
        let ours = tileops_candle::rope(&x.reshape((b * t, h, d))?, &positions(b * t)?, &table)?;
        let theirs = candle_nn::rotary_emb::rope_thd(&x, &cos, &sin)?;
        let what = format!("rope vs candle-nn rope_thd {dtype:?}");
        assert_close(&what, &ours.reshape((b, t, h, d))?, &theirs, dtype)?;
    }
    Ok(())
}

#[test]
fn silu_and_mul() -> Result<()> {
    for dtype in FLOATS {
        for (how, x) in [
            ("plain", randn(&[9, 2 * 40], dtype, 1)?),
            ("narrowed", narrowed(&[9, 2 * 40], dtype, 1)?),
        ] {
            let y = tileops_candle::silu_and_mul(&x)?;
            assert_eq!(y.dims(), &[9, 40]);
            let what = format!("silu_and_mul {dtype:?} {how}");
            assert_close(&what, &y, &common::silu_and_mul(&x)?, dtype)?;
        }
        let x = strided(&[9, 80], dtype, 1)?;
        assert_refuses_strided("silu_and_mul", tileops_candle::silu_and_mul(&x));
    }
    Ok(())
}

#[test]
fn fp8_quant() -> Result<()> {
    for dtype in FLOATS {
        for group in [0, 32] {
            for (how, x) in [
                ("plain", randn(&[6, 128], dtype, 1)?),
                ("narrowed", narrowed(&[6, 128], dtype, 1)?),
            ] {
                let (codes, scales) = tileops_candle::fp8_quant(&x, group)?;
                let g = if group == 0 { 128 } else { group };
                assert_eq!(scales.dims(), &[6, 128 / g]);
                let what = format!("fp8_quant {dtype:?} group {group} {how}");
                assert_fp8(&what, &codes, &scales, &f32(&x)?, g, 1e-6)?;
            }
        }
        let x = strided(&[6, 128], dtype, 1)?;
        assert_refuses_strided("fp8_quant", tileops_candle::fp8_quant(&x, 0));
    }
    Ok(())
}

#[test]
fn qk_norm_rope_fp8() -> Result<()> {
    let table = rope_table(16, 128, 10_000.0)?;
    let positions = Tensor::new(&[3i64, 0, 15], &Device::Cpu)?;
    for dtype in HALVES {
        let (qw, kw) = (randn(&[128], dtype, 5)?, randn(&[128], dtype, 6)?);
        for (how, q) in [
            ("plain", randn(&[3, 4, 128], dtype, 1)?),
            ("narrowed", narrowed(&[3, 4, 128], dtype, 1)?),
        ] {
            let k = randn(&[3, 2, 128], dtype, 2)?;
            let out = tileops_candle::qk_norm_rope_fp8(&q, &k, &qw, &kw, &positions, &table, EPS)?;
            for (name, x, w, codes, scales) in [
                ("q", &q, &qw, &out.q_fp8, &out.q_scale),
                ("k", &k, &kw, &out.k_fp8, &out.k_scale),
            ] {
                // The reference: norm, RoPE and scales in f32; the kernel keeps f64 (CPU) rows
                // unrounded between the stages, so the scales agree to f32 noise.
                let normed = common::rms_norm(x, w, EPS)?;
                let rotated = common::rope(&normed, &positions, &table)?;
                let heads = x.dim(1)?;
                let what = format!("qk_norm_rope_fp8 {dtype:?} {how} {name}");
                let rows = 3 * heads;
                assert_fp8(
                    &what,
                    &codes.reshape((rows, 128))?,
                    &scales.reshape((rows, 1))?,
                    &rotated.reshape((rows, 128))?,
                    128,
                    1e-4,
                )?;
            }
        }
        let q = strided(&[3, 4, 128], dtype, 1)?;
        let k = randn(&[3, 2, 128], dtype, 2)?;
        assert_refuses_strided(
            "qk_norm_rope_fp8",
            tileops_candle::qk_norm_rope_fp8(&q, &k, &qw, &kw, &positions, &table, EPS),
        );
    }
    Ok(())
}

#[test]
fn gemm() -> Result<()> {
    for dtype in FLOATS {
        let (atol, rtol) = tolerance(dtype);
        // Sums of 48 products of N(0, 1) values: magnitudes about 7.
        let (atol, rtol) = (atol * 8.0, rtol);
        let w = randn(&[24, 48], dtype, 2)?; // an nn.Linear weight [N, K]
        for (how, a) in [
            ("plain", randn(&[10, 48], dtype, 1)?),
            ("narrowed", narrowed(&[10, 48], dtype, 1)?),
        ] {
            let expected = f32(&a)?.matmul(&f32(&w)?.t()?)?;
            let y = tileops_candle::gemm(&a, &w, GemmOptions::new().trans_b(true))?;
            let what = format!("gemm {dtype:?} {how} a @ w.T");
            assert_close_tol(&what, &y, &expected, atol, rtol)?;
            let wt = w.t()?.contiguous()?;
            let y = tileops_candle::gemm(&a, &wt, GemmOptions::new())?;
            assert_close_tol(
                &format!("gemm {dtype:?} {how} a @ b"),
                &y,
                &expected,
                atol,
                rtol,
            )?;
        }
        // A transposed view is refused: `trans_b` reads the weight in place instead.
        let a = randn(&[10, 48], dtype, 1)?;
        assert_refuses_strided(
            "gemm",
            tileops_candle::gemm(&a, &w.t()?, GemmOptions::new()),
        );
    }
    Ok(())
}

#[test]
fn gqa_decode() -> Result<()> {
    let seqlens = [5, 16, 1];
    let scale = 1.0 / 8.0;
    for dtype in HALVES {
        let (kc, vc) = (
            randn(&[3, 16, 2, 64], dtype, 2)?,
            randn(&[3, 16, 2, 64], dtype, 3)?,
        );
        for (how, q) in [
            ("plain", randn(&[3, 8, 64], dtype, 1)?),
            ("narrowed", narrowed(&[3, 8, 64], dtype, 1)?),
        ] {
            let options = DecodeOptions::default().return_lse(true);
            let (o, lse) = tileops_candle::gqa_decode(&q, &kc, &vc, &seqlens, None, options)?;
            let expected = common::decode(&q, &kc, &vc, &seqlens, scale)?;
            assert_close(&format!("gqa_decode {dtype:?} {how}"), &o, &expected, dtype)?;
            assert_eq!(lse.map(|l| l.dims().to_vec()), Some(vec![3, 8]));
        }
        let q = strided(&[3, 8, 64], dtype, 1)?;
        assert_refuses_strided(
            "gqa_decode",
            tileops_candle::gqa_decode(&q, &kc, &vc, &seqlens, None, DecodeOptions::default()),
        );
    }
    // f32 is not a decode dtype: refused, naming the cast to make.
    let (q, kc) = (
        randn(&[3, 8, 64], DType::F32, 1)?,
        randn(&[3, 16, 2, 64], DType::F32, 2)?,
    );
    let message =
        tileops_candle::gqa_decode(&q, &kc, &kc, &seqlens, None, DecodeOptions::default())
            .unwrap_err()
            .to_string();
    assert!(
        message.contains("cast float32 inputs to bfloat16"),
        "{message}"
    );
    Ok(())
}

/// `shape` of fp8 codes of N(0, 1) values over `scale`, taken at row 3 of a larger cache: at a
/// non-zero start offset, as a `narrow`ed slot of a serving engine's cache is.
fn narrowed_fp8(shape: &[usize], seed: u64, scale: f32) -> Result<Tensor> {
    let mut bigger = shape.to_vec();
    bigger[0] += 5;
    let (codes, _) = fp8_cache(&randn(&bigger, DType::F32, seed)?, scale)?;
    let codes = codes.narrow(0, 3, shape[0])?;
    assert!(codes.layout().start_offset() > 0 && codes.is_contiguous());
    Ok(codes)
}

/// `[value]` F32 read at a non-zero start offset.
fn narrowed_scale(value: f32) -> Result<Tensor> {
    Tensor::new(&[7f32, value, 3.0], &Device::Cpu)?.narrow(0, 1, 1)
}

#[test]
fn gqa_decode_fp8_cache() -> Result<()> {
    let seqlens = [5, 16, 1];
    let scale = 1.0 / 8.0;
    let shape = [3, 16, 2, 64];
    let (k_codes, k_scale) = fp8_cache(&randn(&shape, DType::F32, 2)?, 0.5)?;
    let (v_codes, v_scale) = fp8_cache(&randn(&shape, DType::F32, 3)?, 0.25)?;
    let narrowed_cache = (
        narrowed_fp8(&shape, 4, 0.5)?,
        narrowed_fp8(&shape, 5, 0.25)?,
        narrowed_scale(0.5)?,
        narrowed_scale(0.25)?,
    );
    for dtype in HALVES {
        for (how, q, (kc, vc, ks, vs)) in [
            (
                "plain",
                randn(&[3, 8, 64], dtype, 1)?,
                (&k_codes, &v_codes, &k_scale, &v_scale),
            ),
            (
                "narrowed",
                narrowed(&[3, 8, 64], dtype, 1)?,
                (
                    &narrowed_cache.0,
                    &narrowed_cache.1,
                    &narrowed_cache.2,
                    &narrowed_cache.3,
                ),
            ),
        ] {
            let options = DecodeOptions::default().return_lse(true);
            let (o, lse) =
                tileops_candle::gqa_decode(&q, kc, vc, &seqlens, Some((ks, vs)), options)?;
            // The reference reads the same codes times the same scales, in f32.
            let (k, v) = (dequantized(kc, ks)?, dequantized(vc, vs)?);
            let expected = common::decode(&q, &k, &v, &seqlens, scale)?;
            let what = format!("gqa_decode fp8 cache, q {dtype:?} {how}");
            assert_close(&what, &o, &expected, dtype)?;
            assert_eq!(lse.map(|l| l.dims().to_vec()), Some(vec![3, 8]));
        }
        // Scales go with an fp8 cache and only with one: tileops's refusals, as candle errors.
        let q = randn(&[3, 8, 64], dtype, 1)?;
        let options = DecodeOptions::default();
        let missing = tileops_candle::gqa_decode(&q, &k_codes, &v_codes, &seqlens, None, options)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("k_scale"), "{missing}");
        let kc16 = randn(&shape, dtype, 2)?;
        let extra = tileops_candle::gqa_decode(
            &q,
            &kc16,
            &kc16,
            &seqlens,
            Some((&k_scale, &v_scale)),
            options,
        )
        .unwrap_err()
        .to_string();
        assert!(extra.contains("k_scale"), "{extra}");
    }
    Ok(())
}

#[test]
fn gqa_decode_paged() -> Result<()> {
    // Three sequences of 20, 5 and 33 keys in pages of 16 (up to 3 pages each), scattered over a
    // pool of 6 pages; unused slots are -1, as vLLM pads them.
    let seqlens = [20, 5, 33];
    let table = [4, 1, -1, 0, -1, -1, 5, 2, 3];
    let scale = 1.0 / 8.0;
    let pool = [6, 16, 2, 64];
    for dtype in HALVES {
        for (how, q, k_pages, v_pages) in [
            (
                "plain",
                randn(&[3, 8, 64], dtype, 1)?,
                randn(&pool, dtype, 2)?,
                randn(&pool, dtype, 3)?,
            ),
            (
                "narrowed",
                narrowed(&[3, 8, 64], dtype, 1)?,
                narrowed(&pool, dtype, 2)?,
                narrowed(&pool, dtype, 3)?,
            ),
        ] {
            let options = DecodeOptions::default().return_lse(true);
            let (o, lse) = tileops_candle::gqa_decode_paged(
                &q, &k_pages, &v_pages, &table, &seqlens, None, options,
            )?;
            let expected = decode_paged(&q, &k_pages, &v_pages, &table, &seqlens, scale)?;
            assert_close(
                &format!("gqa_decode_paged {dtype:?} {how}"),
                &o,
                &expected,
                dtype,
            )?;
            assert_eq!(lse.map(|l| l.dims().to_vec()), Some(vec![3, 8]));
        }
        // An fp8 pool with its scales, plain and narrowed.
        let (k_codes, k_scale) = fp8_cache(&randn(&pool, DType::F32, 2)?, 0.5)?;
        let (v_codes, v_scale) = fp8_cache(&randn(&pool, DType::F32, 3)?, 0.25)?;
        let (kn, vn) = (narrowed_fp8(&pool, 4, 0.5)?, narrowed_fp8(&pool, 5, 0.25)?);
        let (ksn, vsn) = (narrowed_scale(0.5)?, narrowed_scale(0.25)?);
        for (how, q, (kc, vc, ks, vs)) in [
            (
                "plain",
                randn(&[3, 8, 64], dtype, 1)?,
                (&k_codes, &v_codes, &k_scale, &v_scale),
            ),
            (
                "narrowed",
                narrowed(&[3, 8, 64], dtype, 1)?,
                (&kn, &vn, &ksn, &vsn),
            ),
        ] {
            let (o, _) = tileops_candle::gqa_decode_paged(
                &q,
                kc,
                vc,
                &table,
                &seqlens,
                Some((ks, vs)),
                DecodeOptions::default(),
            )?;
            let (k, v) = (dequantized(kc, ks)?, dequantized(vc, vs)?);
            let expected = decode_paged(&q, &k, &v, &table, &seqlens, scale)?;
            let what = format!("gqa_decode_paged fp8 pool, q {dtype:?} {how}");
            assert_close(&what, &o, &expected, dtype)?;
        }
        let q = randn(&[3, 8, 64], dtype, 1)?;
        let k_pages = randn(&pool, dtype, 2)?;
        // A page outside the pool in a slot a sequence uses is refused before anything runs; so
        // is a table that is not B x max_pages entries.
        for bad in [&[4, 1, -1, 0, -1, -1, 5, 2, 6][..], &table[..8]] {
            let message = tileops_candle::gqa_decode_paged(
                &q,
                &k_pages,
                &k_pages,
                bad,
                &seqlens,
                None,
                DecodeOptions::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(message.contains("block_table"), "{bad:?}: {message}");
        }
        let q = strided(&[3, 8, 64], dtype, 1)?;
        assert_refuses_strided(
            "gqa_decode_paged",
            tileops_candle::gqa_decode_paged(
                &q,
                &k_pages,
                &k_pages,
                &table,
                &seqlens,
                None,
                DecodeOptions::default(),
            ),
        );
    }
    Ok(())
}

#[test]
fn gqa_prefill() -> Result<()> {
    // Two sequences: 5 queries over 7 keys, 3 over 3; 8 heads on 2 KV heads, dim 64.
    let (cu_q, cu_k) = ([0, 5, 8], [0, 7, 10]);
    let scale = 1.0 / 8.0;
    for dtype in HALVES {
        let (k, v) = (
            randn(&[10, 2, 64], dtype, 2)?,
            randn(&[10, 2, 64], dtype, 3)?,
        );
        for causal in [false, true] {
            for (how, q) in [
                ("plain", randn(&[8, 8, 64], dtype, 1)?),
                ("narrowed", narrowed(&[8, 8, 64], dtype, 1)?),
            ] {
                let options = PrefillOptions::default().causal(causal);
                let (o, lse) = tileops_candle::gqa_prefill(&q, &k, &v, &cu_q, &cu_k, options)?;
                assert!(lse.is_none());
                let expected = common::prefill(&q, &k, &v, &cu_q, &cu_k, causal, scale)?;
                let what = format!("gqa_prefill {dtype:?} causal {causal} {how}");
                assert_close(&what, &o, &expected, dtype)?;
            }
        }
        let q = strided(&[8, 8, 64], dtype, 1)?;
        assert_refuses_strided(
            "gqa_prefill",
            tileops_candle::gqa_prefill(&q, &k, &v, &cu_q, &cu_k, PrefillOptions::default()),
        );
    }
    // f32 is not a prefill dtype: tileops's refusal, as a candle error naming the cast to make.
    let q = randn(&[3, 2, 64], DType::F32, 1)?;
    let message =
        tileops_candle::gqa_prefill(&q, &q, &q, &[0, 3], &[0, 3], PrefillOptions::default())
            .unwrap_err()
            .to_string();
    assert!(message.contains("gqa_prefill"), "{message}");
    assert!(
        message.contains("cast float32 inputs to bfloat16"),
        "{message}"
    );
    Ok(())
}

#[test]
fn tensors_on_different_devices_or_dtypes_are_refused_by_tileops() -> Result<()> {
    let x = randn(&[2, 8], DType::F32, 1)?;
    let w = randn(&[8], DType::F16, 1)?;
    assert!(tileops_candle::rms_norm(&x, &w, EPS).is_err());
    Ok(())
}
