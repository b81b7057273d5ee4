//! The CUDA path (feature `cuda`): every bridged op on candle CUDA tensors against the same op on
//! the CPU path. Inputs reach the GPU as host copies and results come back as copies
//! (`to_device`): no candle kernel runs, so the tests also run on an emulated device.
//!
//! Without a CUDA device each test prints a `SKIP:` line and passes, unless
//! `TILEOPS_REQUIRE_GPU=1`, which makes a missing device a failure.

#![cfg(feature = "cuda")]

mod common;

use candle_core::{D, DType, Device, Result, Tensor};
use common::*;
use tileops_candle::{DecodeOptions, GemmOptions, PrefillOptions};

/// The CUDA device, or `None` after printing why the test is skipped.
fn gpu(test: &str) -> Option<Device> {
    match Device::new_cuda(0) {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                std::env::var("TILEOPS_REQUIRE_GPU").as_deref() != Ok("1"),
                "{test}: TILEOPS_REQUIRE_GPU=1 but there is no CUDA device: {e}"
            );
            println!("SKIP: {test}: no CUDA device ({e})");
            None
        }
    }
}

/// Runs `op` on `inputs` (CPU tensors) on the CPU and on `gpu`, and compares every output: the
/// kernels accumulate in f32 where the CPU path uses f64, so they agree to the dtype's rounding;
/// fp8 codes to one e4m3 step.
fn same_on_both(
    what: &str,
    gpu: &Device,
    inputs: &[Tensor],
    op: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
) -> Result<()> {
    let expected = op(inputs)?;
    let on_gpu = inputs
        .iter()
        .map(|t| t.to_device(gpu))
        .collect::<Result<Vec<_>>>()?;
    let actual = op(&on_gpu)?;
    assert_eq!(actual.len(), expected.len(), "{what}: outputs");
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert!(a.device().is_cuda(), "{what}: output {i} is not on the GPU");
        assert_eq!(a.dtype(), e.dtype(), "{what}: output {i} dtype");
        let a = a.to_device(&Device::Cpu)?;
        let what = format!("{what}: output {i}");
        match e.dtype() {
            DType::F8E4M3 => assert_close_tol(&what, &a, e, 1e-3, 0.13)?,
            DType::F32 => assert_close_tol(&what, &a, e, 1e-5, 1e-5)?,
            dtype => assert_close(&what, &a, e, dtype)?,
        }
    }
    Ok(())
}

/// `x` as rows 3.. of a larger tensor (the op reads it at a non-zero start offset).
fn tail(x: &Tensor) -> Result<Tensor> {
    x.narrow(0, 3, x.dim(0)? - 3)
}

#[test]
fn norms_softmax_rope_silu_on_the_gpu() -> Result<()> {
    let Some(gpu) = gpu("norms_softmax_rope_silu_on_the_gpu") else {
        return Ok(());
    };
    let table = rope_table(16, 64, 10_000.0)?;
    let positions = Tensor::new(&[0i64, 3, 15, 7], &Device::Cpu)?;
    for dtype in FLOATS {
        let x = randn(&[7, 128], dtype, 1)?;
        let (w, b) = (randn(&[128], dtype, 2)?, randn(&[128], dtype, 3)?);
        let r = randn(&[4, 128], dtype, 4)?;
        same_on_both(
            &format!("rms_norm {dtype:?}"),
            &gpu,
            &[x.clone(), w.clone()],
            |t| Ok(vec![tileops_candle::rms_norm(&tail(&t[0])?, &t[1], 1e-6)?]),
        )?;
        same_on_both(
            &format!("layer_norm {dtype:?}"),
            &gpu,
            &[x.clone(), w.clone(), b],
            |t| {
                Ok(vec![tileops_candle::layer_norm(
                    &tail(&t[0])?,
                    &t[1],
                    &t[2],
                    1e-5,
                )?])
            },
        )?;
        same_on_both(
            &format!("fused_add_rms_norm {dtype:?}"),
            &gpu,
            &[x.clone(), r, w],
            |t| {
                let (y, sum) =
                    tileops_candle::fused_add_rms_norm(&tail(&t[0])?, &t[1], &t[2], 1e-6)?;
                Ok(vec![y, sum])
            },
        )?;
        same_on_both(
            &format!("softmax {dtype:?}"),
            &gpu,
            std::slice::from_ref(&x),
            |t| {
                Ok(vec![
                    tileops_candle::softmax(&tail(&t[0])?, D::Minus1)?,
                    tileops_candle::softmax(&t[0], 0)?,
                    tileops_candle::log_softmax(&tail(&t[0])?, D::Minus1)?,
                ])
            },
        )?;
        same_on_both(
            &format!("silu_and_mul {dtype:?}"),
            &gpu,
            std::slice::from_ref(&x),
            |t| Ok(vec![tileops_candle::silu_and_mul(&tail(&t[0])?)?]),
        )?;
        let heads = randn(&[7, 2, 64], dtype, 5)?;
        same_on_both(
            &format!("rope {dtype:?}"),
            &gpu,
            &[heads.clone(), positions.clone(), table.clone()],
            |t| Ok(vec![tileops_candle::rope(&tail(&t[0])?, &t[1], &t[2])?]),
        )?;
        // candle's forms: u32 positions, the table in x's dtype, NeoX and interleaved pairs.
        let positions_u32 = positions.to_dtype(DType::U32)?;
        let table_x = table.to_dtype(dtype)?;
        same_on_both(
            &format!("rope and rope_i, u32 positions, {dtype:?} table"),
            &gpu,
            &[heads, positions_u32, table_x],
            |t| {
                Ok(vec![
                    tileops_candle::rope(&tail(&t[0])?, &t[1], &t[2])?,
                    tileops_candle::rope_i(&tail(&t[0])?, &t[1], &t[2])?,
                ])
            },
        )?;
    }
    Ok(())
}

#[test]
fn fp8_ops_on_the_gpu() -> Result<()> {
    let Some(gpu) = gpu("fp8_ops_on_the_gpu") else {
        return Ok(());
    };
    for dtype in FLOATS {
        same_on_both(
            &format!("fp8_quant {dtype:?}"),
            &gpu,
            &[randn(&[7, 256], dtype, 1)?],
            |t| {
                let (codes, scales) = tileops_candle::fp8_quant(&tail(&t[0])?, 64)?;
                Ok(vec![codes, scales])
            },
        )?;
    }
    let table = rope_table(8, 128, 10_000.0)?;
    let positions = Tensor::new(&[1i64, 7, 0], &Device::Cpu)?;
    for dtype in HALVES {
        let inputs = [
            randn(&[6, 4, 128], dtype, 1)?,
            randn(&[3, 2, 128], dtype, 2)?,
            randn(&[128], dtype, 3)?,
            randn(&[128], dtype, 4)?,
            positions.clone(),
            table.clone(),
        ];
        same_on_both(&format!("qk_norm_rope_fp8 {dtype:?}"), &gpu, &inputs, |t| {
            let out = tileops_candle::qk_norm_rope_fp8(
                &tail(&t[0])?,
                &t[1],
                &t[2],
                &t[3],
                &t[4],
                &t[5],
                1e-6,
            )?;
            Ok(vec![out.q_fp8, out.k_fp8, out.q_scale, out.k_scale])
        })?;
    }
    Ok(())
}

#[test]
fn gemm_and_attention_on_the_gpu() -> Result<()> {
    let Some(gpu) = gpu("gemm_and_attention_on_the_gpu") else {
        return Ok(());
    };
    for dtype in FLOATS {
        let (a, w) = (randn(&[19, 64], dtype, 1)?, randn(&[32, 64], dtype, 2)?);
        // Twice: the second call on the GPU runs the plan the first one kept.
        same_on_both(&format!("gemm {dtype:?}"), &gpu, &[a, w], |t| {
            let linear = GemmOptions::new().trans_b(true);
            Ok(vec![
                tileops_candle::gemm(&tail(&t[0])?, &t[1], linear)?,
                tileops_candle::gemm(&tail(&t[0])?, &t[1], linear)?,
            ])
        })?;
    }
    let (cu_q, cu_k) = ([0, 5, 8], [0, 7, 10]);
    for dtype in HALVES {
        let inputs = [
            randn(&[11, 8, 64], dtype, 1)?,
            randn(&[10, 2, 64], dtype, 2)?,
            randn(&[10, 2, 64], dtype, 3)?,
        ];
        same_on_both(&format!("gqa_prefill {dtype:?}"), &gpu, &inputs, |t| {
            let options = PrefillOptions::default().causal(true).return_lse(true);
            let (o, lse) =
                tileops_candle::gqa_prefill(&tail(&t[0])?, &t[1], &t[2], &cu_q, &cu_k, options)?;
            Ok(std::iter::once(o).chain(lse).collect())
        })?;
        let inputs = [
            randn(&[5, 8, 64], dtype, 1)?,
            randn(&[2, 16, 2, 64], dtype, 2)?,
            randn(&[2, 16, 2, 64], dtype, 3)?,
        ];
        same_on_both(&format!("gqa_decode {dtype:?}"), &gpu, &inputs, |t| {
            let options = DecodeOptions::default().return_lse(true);
            let (o, lse) =
                tileops_candle::gqa_decode(&tail(&t[0])?, &t[1], &t[2], &[9, 16], None, options)?;
            Ok(std::iter::once(o).chain(lse).collect())
        })?;
    }
    Ok(())
}

#[test]
fn fp8_and_paged_decode_on_the_gpu() -> Result<()> {
    let Some(gpu) = gpu("fp8_and_paged_decode_on_the_gpu") else {
        return Ok(());
    };
    // Three sequences of 20, 5 and 33 keys in pages of 16 over a pool of 6 pages.
    let (table, seqlens) = ([4, 1, -1, 0, -1, -1, 5, 2, 3], [20, 5, 33]);
    let pool = [9, 16, 2, 64]; // read from page 3 on: a pool at a non-zero start offset
    let (k_pool8, k_scale) = fp8_cache(&randn(&pool, DType::F32, 2)?, 0.5)?;
    let (v_pool8, v_scale) = fp8_cache(&randn(&pool, DType::F32, 3)?, 0.25)?;
    let (k_cache8, _) = fp8_cache(&randn(&[5, 16, 2, 64], DType::F32, 4)?, 0.5)?;
    let (v_cache8, _) = fp8_cache(&randn(&[5, 16, 2, 64], DType::F32, 5)?, 0.25)?;
    for dtype in HALVES {
        let q = randn(&[6, 8, 64], dtype, 1)?;
        // A dense fp8 cache, q and the cache at non-zero offsets (the fp8 codes on the GPU are
        // read from a copy, see the crate README).
        let inputs = [
            q.clone(),
            k_cache8.clone(),
            v_cache8.clone(),
            k_scale.clone(),
            v_scale.clone(),
        ];
        same_on_both(&format!("gqa_decode fp8 {dtype:?}"), &gpu, &inputs, |t| {
            let options = DecodeOptions::default().return_lse(true);
            let (o, lse) = tileops_candle::gqa_decode(
                &tail(&t[0])?.narrow(0, 0, 2)?,
                &tail(&t[1])?,
                &tail(&t[2])?,
                &[9, 16],
                Some((&t[3], &t[4])),
                options,
            )?;
            Ok(std::iter::once(o).chain(lse).collect())
        })?;
        for fp8 in [false, true] {
            let inputs = if fp8 {
                vec![
                    q.clone(),
                    k_pool8.clone(),
                    v_pool8.clone(),
                    k_scale.clone(),
                    v_scale.clone(),
                ]
            } else {
                vec![q.clone(), randn(&pool, dtype, 2)?, randn(&pool, dtype, 3)?]
            };
            let what = format!("gqa_decode_paged {dtype:?} fp8 pool {fp8}");
            same_on_both(&what, &gpu, &inputs, |t| {
                let options = DecodeOptions::default().return_lse(true);
                let scales = t.get(3).zip(t.get(4));
                let (o, lse) = tileops_candle::gqa_decode_paged(
                    &tail(&t[0])?,
                    &tail(&t[1])?,
                    &tail(&t[2])?,
                    &table,
                    &seqlens,
                    scales,
                    options,
                )?;
                Ok(std::iter::once(o).chain(lse).collect())
            })?;
        }
    }
    Ok(())
}

#[test]
fn an_input_at_an_offset_off_16_bytes_is_read_from_a_copy() -> Result<()> {
    let Some(gpu) = gpu("an_input_at_an_offset_off_16_bytes_is_read_from_a_copy") else {
        return Ok(());
    };
    // Rows of 3 f32 (12 bytes): row 1 starts 12 bytes in, which tileops cannot borrow.
    let x = randn(&[5, 3], DType::F32, 1)?;
    same_on_both("softmax at offset 12 bytes", &gpu, &[x], |t| {
        Ok(vec![tileops_candle::softmax(
            &t[0].narrow(0, 1, 4)?,
            D::Minus1,
        )?])
    })
}

#[test]
fn strided_inputs_are_refused_on_the_gpu_too() -> Result<()> {
    let Some(gpu) = gpu("strided_inputs_are_refused_on_the_gpu_too") else {
        return Ok(());
    };
    let x = randn(&[64, 8], DType::F32, 1)?.to_device(&gpu)?.t()?;
    let message = tileops_candle::softmax(&x, D::Minus1)
        .unwrap_err()
        .to_string();
    assert!(message.contains("not contiguous"), "{message}");
    Ok(())
}
