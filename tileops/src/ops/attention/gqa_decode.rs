//! `gqa_decode`: one query token per sequence attending over a dense KV cache, grouped query heads.

use super::decode::{
    AttentionOutputMut, DecodeInputs, DecodeOptions, DecodeOutput, DecodePlan, DecodeSpecs,
    KvScales, decode_accessors, defaults, workload_decode,
};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorRef, TensorSpec};

const OP: &str = GqaDecode::NAME;

/// Attention decode over a dense KV cache: for each sequence `b` one query token,
/// `q [B, H, D]`, attends over the first `seqlens[b]` keys and values of
/// `k_cache, v_cache [B, S_max, H_kv, D]` (NHD); query head `h` reads KV head `h / (H / H_kv)`
/// (GQA; MHA is `H_kv == H`). `o = softmax(sm_scale · q·kᵀ) · v` per head, optionally with a
/// softcap (`softcap · tanh(s / softcap)`) and the log-sum-exp of each row.
///
/// q is float16 or bfloat16; the cache is in q's dtype, or float8_e4m3fn with per-tensor
/// `k_scale` and `v_scale` (`[1]` float32 tensors: the keys are `k_scale · codes`), which halves
/// the bytes a decode reads. The output is in q's dtype. Head dims 64, 128 and 256.
///
/// The lengths are host data of the plan (as FlashInfer's plan/run split): [`GqaDecode::new`]
/// takes them, checks them (`0 ≤ seqlens[b] ≤ S_max`), prices the call from them
/// (`eval_roofline` counts only the valid keys) and sizes the split-KV grid from them; the
/// `seqlens` tensor given to [`forward`](GqaDecode::forward) is the device copy the kernel
/// reads, and must hold the same values (the CPU backend checks it; the GPU kernel clamps each
/// length to `[0, S_max]`, so a stale copy never reads out of bounds). A sequence of length 0
/// gives zeros and an lse of `-inf`.
///
/// ```
/// use tileops::ops::{DecodeOptions, GqaDecode};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// // Two sequences (5 and 2 valid keys of a cache of 8), 8 query heads on 2 KV heads, dim 64.
/// let q = TensorSpec::new([2, 8, 64], DType::BFloat16);
/// let cache = TensorSpec::new([2, 8, 2, 64], DType::BFloat16);
/// let op = GqaDecode::new(q.clone(), cache.clone(), cache.clone(), &[5, 2],
///     DecodeOptions::default().return_lse(true), &device)?;
/// let r = op.eval_roofline()?; // only the 7 valid keys are counted
/// assert_eq!(r.bytes, 2 * (2 * 8 * 64 * 2) + 2 * 7 * 2 * 64 * 2 + 2 * 4 + 2 * 8 * 4);
/// let seqlens = Tensor::from_slice(&[5i32, 2], [2], &device)?;
/// let out = op.forward(
///     &Tensor::random(&q, 1, &device)?,
///     &Tensor::random(&cache, 2, &device)?,
///     &Tensor::random(&cache, 3, &device)?,
///     &seqlens,
///     None,
/// )?;
/// assert_eq!(out.o.shape(), &[2, 8, 64]);
/// assert_eq!(out.lse.map(|lse| lse.shape().to_vec()), Some(vec![2, 8]));
/// // A length past the cache is refused when the op is planned.
/// assert!(GqaDecode::new(q, cache.clone(), cache, &[9, 2], DecodeOptions::default(), &device).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[crate::roofline_op("gqa_decode")]
#[derive(Debug, Clone)]
pub struct GqaDecode {
    q: TensorSpec,
    k_cache: TensorSpec,
    v_cache: TensorSpec,
    plan: DecodePlan,
    device: Device,
}

decode_accessors!(GqaDecode);

impl GqaDecode {
    /// Plans a decode of q `[B, H, D]` over `k_cache`, `v_cache` `[B, S_max, H_kv, D]` with the
    /// host copy of the lengths, `seqlens` (`B` values).
    ///
    /// Errors when q is not float16/bfloat16 `[B, H, D]` with D one of 64, 128, 256; when a cache
    /// is not `[B, S_max, H_kv, D]` in q's dtype or float8_e4m3fn, or the two differ; when H is
    /// not a multiple of H_kv; when a length is negative or over S_max, or there are not B of
    /// them; when `sm_scale` is not finite and positive or `softcap` is negative or not finite.
    pub fn new(
        q: TensorSpec,
        k_cache: TensorSpec,
        v_cache: TensorSpec,
        seqlens: &[i32],
        options: DecodeOptions,
        device: &Device,
    ) -> Result<GqaDecode, Error> {
        let plan = DecodePlan::new(
            OP,
            &q,
            ("k_cache", &k_cache),
            ("v_cache", &v_cache),
            seqlens,
            None,
            options,
            defaults::<GqaDecode>(),
        )?;
        Ok(GqaDecode {
            q,
            k_cache,
            v_cache,
            plan,
            device: device.clone(),
        })
    }

    /// The cache spec (`k_cache` and `v_cache` alike).
    pub fn k_cache(&self) -> &TensorSpec {
        &self.k_cache
    }

    /// Runs the decode into new outputs. `seqlens` is the device copy of the plan's lengths
    /// (`[B]` int32); `scales` are `(k_scale, v_scale)`, `[1]` float32 each, for an fp8 cache
    /// and `None` otherwise.
    pub fn forward<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k_cache: impl Into<TensorRef<'t>>,
        v_cache: impl Into<TensorRef<'t>>,
        seqlens: impl Into<TensorRef<'t>>,
        scales: impl Into<KvScales<'t>>,
    ) -> Result<DecodeOutput, Error> {
        let (q, k_cache, v_cache, seqlens, scales) = (
            q.into(),
            k_cache.into(),
            v_cache.into(),
            seqlens.into(),
            scales.into(),
        );
        let mut out = self.plan.empty_output(&self.device)?;
        self.forward_into(q, k_cache, v_cache, seqlens, scales, &mut out)?;
        Ok(out)
    }

    /// Runs the decode into `out` (tensors of [`output_specs`](GqaDecode::output_specs) on the
    /// op's device). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        q: impl Into<TensorRef<'t>>,
        k_cache: impl Into<TensorRef<'t>>,
        v_cache: impl Into<TensorRef<'t>>,
        seqlens: impl Into<TensorRef<'t>>,
        scales: impl Into<KvScales<'t>>,
        out: impl Into<AttentionOutputMut<'t>>,
    ) -> Result<(), Error> {
        self.plan.run(
            &self.device,
            DecodeInputs {
                q: q.into(),
                k: k_cache.into(),
                v: v_cache.into(),
                seqlens: seqlens.into(),
                block_table: None,
                scales: scales.into().0,
            },
            &DecodeSpecs {
                q: &self.q,
                k: ("k_cache", &self.k_cache),
                v: ("v_cache", &self.v_cache),
                block_table: None,
            },
            out.into(),
        )
    }
}

impl FromWorkload for GqaDecode {
    /// q from `q_shape` in the case dtype; the caches from `k_cache_shape`/`v_cache_shape` in
    /// `cache_dtype` (else the case dtype); the lengths from `kv_lens` (else every sequence
    /// full); the options from the row, else the manifest's defaults.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let w = workload_decode::<GqaDecode>(case)?;
        let q = case.require_input(OP, "q")?;
        let k_cache = case.require_input_as(OP, "k_cache", w.cache_dtype)?;
        let v_cache = case.require_input_as(OP, "v_cache", w.cache_dtype)?;
        let lens = match w.lens {
            Some(lens) => lens,
            None => {
                let (batch, s_max) = (k_cache.shape.first(), k_cache.shape.get(1));
                let full = s_max.map_or(0, |&s| i32::try_from(s).unwrap_or(i32::MAX));
                vec![full; batch.copied().unwrap_or(0)]
            }
        };
        GqaDecode::new(q, k_cache, v_cache, &lens, w.options, device)
    }
}

impl BenchOp for GqaDecode {
    fn roof(&self) -> RoofKey {
        GqaDecode::roof(self)
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        self.plan
            .bench_inputs([&self.q, &self.k_cache, &self.v_cache], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        self.plan
            .placeholder_inputs([&self.q, &self.k_cache, &self.v_cache], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let out = match inputs {
            [q, k, v, seqlens] => self.forward(q, k, v, seqlens, None)?,
            [q, k, v, seqlens, k_scale, v_scale] => {
                self.forward(q, k, v, seqlens, Some((k_scale, v_scale)))?
            }
            _ => {
                return Err(Error::Arity {
                    op: OP,
                    expected: if self.plan.fp8() { 6 } else { 4 },
                    got: inputs.len(),
                });
            }
        };
        Ok(DecodePlan::bench_outputs(out))
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(self.plan.traffic(&self.q))
    }

    fn input_dtypes(&self) -> Vec<(&'static str, DType)> {
        self.plan.cache_input_dtypes()
    }
}

/// Attention decode over a dense cache in one call: plans a [`GqaDecode`] for the tensors' specs
/// on `q`'s device, with the host copy `lens` of `seqlens`, and runs it. Plan once with
/// [`GqaDecode::new`] to run the same step for several layers.
///
/// ```
/// use tileops::ops::{self, DecodeOptions};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let cpu = Device::cpu();
/// let q = Tensor::random(&TensorSpec::new([1, 4, 64], DType::Float16), 1, &cpu)?;
/// let cache = TensorSpec::new([1, 16, 4, 64], DType::Float16);
/// let (k, v) = (Tensor::random(&cache, 2, &cpu)?, Tensor::random(&cache, 3, &cpu)?);
/// let seqlens = Tensor::from_slice(&[16i32], [1], &cpu)?;
/// let out = ops::gqa_decode(&q, &k, &v, &seqlens, &[16], None, DecodeOptions::default())?;
/// assert_eq!(out.o.shape(), &[1, 4, 64]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn gqa_decode(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    seqlens: &Tensor,
    lens: &[i32],
    scales: Option<(&Tensor, &Tensor)>,
    options: DecodeOptions,
) -> Result<DecodeOutput, Error> {
    GqaDecode::new(
        q.spec().clone(),
        k_cache.spec().clone(),
        v_cache.spec().clone(),
        lens,
        options,
        q.device(),
    )?
    .forward(q, k_cache, v_cache, seqlens, scales)
}
