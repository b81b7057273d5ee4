//! Each bridged op as a [`Kernel`]: its params, and which tileops op it plans and runs. The
//! candle-facing functions are in the crate root.

use std::sync::{Arc, Mutex, OnceLock};

use tileops::ops::{self as t, DecodeOptions, GemmOptions, KvScales, PrefillOptions};
use tileops::{Device, Error, Tensor, TensorRef};

use crate::bridge::Kernel;

/// `N` inputs, from the bridge's slice (which the public functions fill with exactly `N`).
fn inputs<'a, 'b, const N: usize>(
    op: &'static str,
    inputs: &'a [TensorRef<'b>],
) -> Result<&'a [TensorRef<'b>; N], Error> {
    <&[TensorRef<'b>; N]>::try_from(inputs).map_err(|_| {
        Error::internal(format!(
            "{op}: {} inputs given to the bridge, {N} expected",
            inputs.len()
        ))
    })
}

fn spec(t: &TensorRef<'_>) -> tileops::TensorSpec {
    t.spec().clone()
}

pub(crate) struct RmsNorm {
    pub(crate) eps: f64,
}

impl Kernel for RmsNorm {
    fn name(&self) -> &'static str {
        "rms_norm"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x, w] = inputs(self.name(), ins)?;
        let op = t::RmsNorm::new(spec(x), spec(w), self.eps, device)?;
        Ok(vec![op.forward(x, w)?])
    }
}

pub(crate) struct LayerNorm {
    pub(crate) eps: f64,
}

impl Kernel for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x, w, b] = inputs(self.name(), ins)?;
        let op = t::LayerNorm::new(spec(x), spec(w), spec(b), self.eps, device)?;
        Ok(vec![op.forward(x, w, b)?])
    }
}

pub(crate) struct FusedAddRmsNorm {
    pub(crate) eps: f64,
}

impl Kernel for FusedAddRmsNorm {
    fn name(&self) -> &'static str {
        "fused_add_rms_norm"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x, residual, w] = inputs(self.name(), ins)?;
        let op = t::FusedAddRmsNorm::new(spec(x), spec(residual), spec(w), self.eps, device)?;
        let (y, residual_out) = op.forward(x, residual, w)?;
        Ok(vec![y, residual_out])
    }
}

pub(crate) struct Softmax {
    pub(crate) dim: i64,
}

impl Kernel for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x] = inputs(self.name(), ins)?;
        Ok(vec![
            t::Softmax::new(spec(x), self.dim, device)?.forward(x)?,
        ])
    }
}

pub(crate) struct LogSoftmax {
    pub(crate) dim: i64,
}

impl Kernel for LogSoftmax {
    fn name(&self) -> &'static str {
        "log_softmax"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x] = inputs(self.name(), ins)?;
        Ok(vec![
            t::LogSoftmax::new(spec(x), self.dim, device)?.forward(x)?,
        ])
    }
}

pub(crate) struct Rope {
    pub(crate) style: t::RopeStyle,
}

impl Kernel for Rope {
    fn name(&self) -> &'static str {
        match self.style {
            t::RopeStyle::NeoX => "rope",
            t::RopeStyle::Interleaved => "rope_i",
        }
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x, positions, table] = inputs(self.name(), ins)?;
        let op =
            t::Rope::new(spec(x), spec(positions), spec(table), device)?.with_style(self.style);
        Ok(vec![op.forward(x, positions, table)?])
    }
}

pub(crate) struct SiluAndMul;

impl Kernel for SiluAndMul {
    fn name(&self) -> &'static str {
        "silu_and_mul"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x] = inputs(self.name(), ins)?;
        Ok(vec![t::SiluAndMul::new(spec(x), device)?.forward(x)?])
    }
}

pub(crate) struct Fp8Quant {
    pub(crate) group_size: usize,
}

impl Kernel for Fp8Quant {
    fn name(&self) -> &'static str {
        "fp8_quant"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [x] = inputs(self.name(), ins)?;
        let (y, scales) = t::Fp8Quant::new(spec(x), self.group_size, device)?.forward(x)?;
        Ok(vec![y, scales])
    }
}

pub(crate) struct QkNormRopeFp8 {
    pub(crate) eps: f64,
}

impl Kernel for QkNormRopeFp8 {
    fn name(&self) -> &'static str {
        "qk_norm_rope_fp8"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [q, k, qw, kw, positions, table] = inputs(self.name(), ins)?;
        let op = t::QkNormRopeFp8::builder(spec(q), spec(k), spec(table))
            .q_weight(spec(qw))
            .k_weight(spec(kw))
            .positions(spec(positions))
            .eps(self.eps)
            .build(device)?;
        let out = op.forward(q, k, qw, kw, positions, table)?;
        Ok(vec![out.q_fp8, out.k_fp8, out.q_scale, out.k_scale])
    }
}

pub(crate) struct Gemm {
    pub(crate) options: GemmOptions,
}

impl Kernel for Gemm {
    fn name(&self) -> &'static str {
        "gemm"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [a, b] = inputs(self.name(), ins)?;
        Ok(vec![self.plan(spec(a), spec(b), device)?.forward(a, b)?])
    }
}

/// GPU gemm plans kept for reuse, the most recent last: a plan on a GPU holds the cuBLASLt
/// algorithm found for its shapes, a query worth skipping on every call of the same projection.
const KEPT_GEMM_PLANS: usize = 64;

impl Gemm {
    /// The plan for `a @ b` on `device`: on a GPU, one kept from an earlier call with the same
    /// specs, options and stream (a plan launches on the stream of the device it was made for),
    /// else a new one, kept.
    fn plan(
        &self,
        a: tileops::TensorSpec,
        b: tileops::TensorSpec,
        device: &Device,
    ) -> Result<t::Gemm, Error> {
        let Some(stream) = device.cuda_stream() else {
            return t::Gemm::new(a, b, self.options, device);
        };
        static PLANS: OnceLock<Mutex<Vec<t::Gemm>>> = OnceLock::new();
        let mut plans = PLANS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let same = |p: &t::Gemm| {
            *p.a() == a
                && *p.b() == b
                && p.options() == self.options
                && p.device()
                    .cuda_stream()
                    .is_some_and(|s| Arc::ptr_eq(s, stream))
        };
        if let Some(i) = plans.iter().position(same) {
            let plan = plans.remove(i);
            plans.push(plan.clone());
            return Ok(plan);
        }
        let plan = t::Gemm::new(a, b, self.options, device)?;
        if plans.len() == KEPT_GEMM_PLANS {
            plans.remove(0);
        }
        plans.push(plan.clone());
        Ok(plan)
    }
}

pub(crate) struct GqaDecode {
    pub(crate) seqlens: Vec<i32>,
    pub(crate) options: DecodeOptions,
}

impl Kernel for GqaDecode {
    fn name(&self) -> &'static str {
        "gqa_decode"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let ([q, k, v], scales) = split_scales(self.name(), ins)?;
        let op = t::GqaDecode::new(
            spec(q),
            spec(k),
            spec(v),
            &self.seqlens,
            self.options,
            device,
        )?;
        // The kernel's copy of the lengths: B int32 values, made here from the plan's host copy.
        let seqlens = Tensor::from_slice(&self.seqlens, [self.seqlens.len()], device)?;
        let out = op.forward(q, k, v, &seqlens, scales)?;
        Ok(std::iter::once(out.o).chain(out.lse).collect())
    }
}

/// The `(k_scale, v_scale)` of an fp8 cache, the two inputs after q, k and v when given: the
/// decode ops' inputs are `[q, k, v]` or `[q, k, v, k_scale, v_scale]`. tileops checks that
/// scales come exactly with an fp8 cache.
fn split_scales<'a, 'b>(
    op: &'static str,
    ins: &'a [TensorRef<'b>],
) -> Result<(&'a [TensorRef<'b>; 3], KvScales<'a>), Error> {
    match ins {
        [qkv @ .., k_scale, v_scale] if qkv.len() == 3 => Ok((
            inputs(op, qkv)?,
            KvScales(Some((k_scale.reborrow(), v_scale.reborrow()))),
        )),
        _ => Ok((inputs(op, ins)?, KvScales(None))),
    }
}

pub(crate) struct GqaDecodePaged {
    /// The host copy of the block table, `[B, max_pages]` row-major.
    pub(crate) block_table: Vec<i32>,
    pub(crate) seqlens: Vec<i32>,
    pub(crate) options: DecodeOptions,
}

impl Kernel for GqaDecodePaged {
    fn name(&self) -> &'static str {
        "gqa_decode_paged"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let ([q, k_pages, v_pages], scales) = split_scales(self.name(), ins)?;
        // `max_pages` from the table's length: a length that is not a multiple of B is refused
        // by the plan (the table must hold B x max_pages entries).
        let batch = q.shape().first().copied().unwrap_or(0);
        let max_pages = self.block_table.len().checked_div(batch).unwrap_or(0);
        let op = t::GqaDecodePaged::new(
            spec(q),
            spec(k_pages),
            spec(v_pages),
            &self.block_table,
            max_pages,
            &self.seqlens,
            self.options,
            device,
        )?;
        // The kernel's copies of the table and the lengths, made here from the plan's host ones.
        let table = Tensor::from_slice(&self.block_table, [batch, max_pages], device)?;
        let seqlens = Tensor::from_slice(&self.seqlens, [self.seqlens.len()], device)?;
        let out = op.forward(q, k_pages, v_pages, &table, &seqlens, scales)?;
        Ok(std::iter::once(out.o).chain(out.lse).collect())
    }
}

pub(crate) struct GqaPrefill {
    pub(crate) cu_seqlens_q: Vec<i32>,
    pub(crate) cu_seqlens_k: Vec<i32>,
    pub(crate) options: PrefillOptions,
}

impl Kernel for GqaPrefill {
    fn name(&self) -> &'static str {
        "gqa_prefill"
    }

    fn run(&self, device: &Device, ins: &[TensorRef<'_>]) -> Result<Vec<Tensor>, Error> {
        let [q, k, v] = inputs(self.name(), ins)?;
        let (cu_q, cu_k) = (&self.cu_seqlens_q, &self.cu_seqlens_k);
        let op = t::GqaPrefill::new(spec(q), spec(k), spec(v), cu_q, cu_k, self.options, device)?;
        // The kernel's copies of the offsets, made here from the plan's host copies.
        let cu_q = Tensor::from_slice(cu_q, [cu_q.len()], device)?;
        let cu_k = Tensor::from_slice(cu_k, [cu_k.len()], device)?;
        let out = op.forward(q, k, v, &cu_q, &cu_k)?;
        Ok(std::iter::once(out.o).chain(out.lse).collect())
    }
}
