//! One Llama-style decoder layer in candle, every op a tileops op (the last residual add is left
//! to the caller), checked against the same layer written with candle's own ops, with one bench
//! record per op call.
//!
//! ```text
//! cargo run --example decoder_layer -- [--records PATH] [--device cpu|cuda] [--dtype f32|bf16]
//!     [--samples N]
//! ```
//!
//! The layer (hidden 256, 8 query heads on 2 KV heads of dim 64, MLP 512, a causal sequence of
//! 32 tokens): input `rms_norm` → q, k, v projections (`gemm`, weights `[out, in]` read with
//! `trans_b`) → `rope` on q and k → causal GQA attention (`gqa_prefill`) → output projection
//! (`gemm`) → residual add fused with the post-attention norm (`fused_add_rms_norm`) → gate/up
//! projection (`gemm`) → `silu_and_mul` → down projection (`gemm`) → residual add. The layer
//! returns the MLP output and the residual stream apart, as vLLM's layers do (the next layer's
//! `fused_add_rms_norm` adds them); the example adds them on the host. No candle kernel runs on a
//! GPU, so `--device cuda` runs on the emulated device too.
//!
//! gqa_prefill takes float16 and bfloat16 only: with `--dtype f32` the attention runs on f16
//! copies of q, k and v (cast by candle, on the host for a GPU tensor), and its record says
//! float16.
//!
//! The check: the same layer in candle-core ops (matmul, softmax by exp/sum, the RoPE rotation
//! by narrow/cat), in f32 on the CPU from the same weights; the largest absolute difference is
//! printed and must stay within the dtype's bound. With `--records PATH`, each tileops call is a
//! record of tileops-bench's records file (op, inputs, params, `eval_roofline`'s flops and bytes,
//! roof, times of `--samples` calls measured on the host clock, `cpu_wall`), so that
//! `cargo run --example roofline -- PATH` prices the layer op by op.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use candle_core::{D, DType, Device, Result, Tensor};
use serde_json::{Value, json};
use tileops::registry::{BenchOp, ManifestOp};
use tileops::{TensorSpec, ops as t};
use tileops_bench::records::{Record, Run};
use tileops_candle::{GemmOptions, PrefillOptions};

/// The layer's sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) intermediate: usize,
    pub(crate) seq: usize,
    pub(crate) eps: f64,
    pub(crate) rope_theta: f64,
}

impl Config {
    /// The small layer the example and its test run (fast on the CPU in a debug build).
    pub(crate) const SMALL: Config = Config {
        hidden: 256,
        heads: 8,
        kv_heads: 2,
        head_dim: 64,
        intermediate: 512,
        seq: 32,
        eps: 1e-6,
        rope_theta: 10_000.0,
    };
}

/// The layer's weights, in the layer's dtype, on its device; linear weights are `[out, in]`
/// (`nn.Linear`), the gate and up projections stacked as one `[2 * intermediate, hidden]`.
pub(crate) struct Weights {
    pub(crate) input_norm: Tensor,
    pub(crate) wq: Tensor,
    pub(crate) wk: Tensor,
    pub(crate) wv: Tensor,
    pub(crate) wo: Tensor,
    pub(crate) post_norm: Tensor,
    pub(crate) w_gate_up: Tensor,
    pub(crate) w_down: Tensor,
    /// NeoX `[cos | sin]` table, `[seq, head_dim]` f32.
    pub(crate) rope_table: Tensor,
}

/// Deterministic N(0, 1) values (SplitMix64 and Box-Muller: candle's CPU generator has no seed).
fn normal(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON
    };
    (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect()
}

/// `N(mean, std)` values of `shape` in `dtype` on `device` (made on the host, copied over).
pub(crate) fn random(
    shape: &[usize],
    mean: f32,
    std: f32,
    seed: u64,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let values = normal(shape.iter().product(), seed)
        .into_iter()
        .map(|v| mean + std * v)
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(device)
}

impl Weights {
    /// Weights scaled as an initialised model's: linear weights `N(0, 1/in)`, norms about 1.
    pub(crate) fn random(c: &Config, dtype: DType, device: &Device) -> Result<Weights> {
        let linear = |out: usize, inp: usize, seed| {
            random(
                &[out, inp],
                0.0,
                1.0 / (inp as f32).sqrt(),
                seed,
                dtype,
                device,
            )
        };
        let (q_dim, kv_dim) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let half = c.head_dim / 2;
        let mut table = Vec::with_capacity(c.seq * c.head_dim);
        for p in 0..c.seq {
            let angles: Vec<f64> = (0..half)
                .map(|i| p as f64 * c.rope_theta.powf(-2.0 * i as f64 / c.head_dim as f64))
                .collect();
            table.extend(angles.iter().map(|a| a.cos() as f32));
            table.extend(angles.iter().map(|a| a.sin() as f32));
        }
        Ok(Weights {
            input_norm: random(&[c.hidden], 1.0, 0.1, 10, dtype, device)?,
            wq: linear(q_dim, c.hidden, 11)?,
            wk: linear(kv_dim, c.hidden, 12)?,
            wv: linear(kv_dim, c.hidden, 13)?,
            wo: linear(c.hidden, q_dim, 14)?,
            post_norm: random(&[c.hidden], 1.0, 0.1, 15, dtype, device)?,
            w_gate_up: linear(2 * c.intermediate, c.hidden, 16)?,
            w_down: linear(c.hidden, c.intermediate, 17)?,
            rope_table: Tensor::from_vec(table, (c.seq, c.head_dim), &Device::Cpu)?
                .to_device(device)?,
        })
    }

    /// The same weights in f32 on the CPU, for the reference.
    pub(crate) fn to_cpu_f32(&self) -> Result<Weights> {
        let f = |t: &Tensor| t.to_device(&Device::Cpu)?.to_dtype(DType::F32);
        Ok(Weights {
            input_norm: f(&self.input_norm)?,
            wq: f(&self.wq)?,
            wk: f(&self.wk)?,
            wv: f(&self.wv)?,
            wo: f(&self.wo)?,
            post_norm: f(&self.post_norm)?,
            w_gate_up: f(&self.w_gate_up)?,
            w_down: f(&self.w_down)?,
            rope_table: f(&self.rope_table)?,
        })
    }
}

/// One op call of the layer as a record: which call of the layer (the workload label), the
/// tileops op's name, family, inputs and params, and what its `eval_roofline` prices.
pub(crate) struct Call {
    pub(crate) step: &'static str,
    pub(crate) op: &'static str,
    pub(crate) family: &'static str,
    pub(crate) inputs: Vec<(String, Vec<u64>, String)>,
    pub(crate) params: Vec<(&'static str, Value)>,
    pub(crate) flops: Option<u64>,
    pub(crate) bytes: Option<u64>,
    pub(crate) roof: &'static str,
    pub(crate) samples_ms: Vec<f64>,
}

/// Times the layer's op calls and keeps their records.
pub(crate) struct Recorder {
    /// Calls per op timed (the first call's result is the one the layer uses); 0 runs each once
    /// and keeps no times.
    pub(crate) samples: usize,
    pub(crate) device: Device,
    pub(crate) calls: Vec<Call>,
}

/// The record of a call of a tileops plan, before it is timed: the plan's identity and roofline,
/// planned on the CPU from the specs of the call (a plan is shapes and params; the roofline does
/// not depend on the device).
fn describe<O: BenchOp + ManifestOp>(
    step: &'static str,
    plan: std::result::Result<O, tileops::Error>,
    specs: &[TensorSpec],
    params: Vec<(&'static str, Value)>,
) -> Result<Call> {
    let op = plan.map_err(candle_core::Error::wrap)?;
    let roofline = op.roofline().ok();
    let inputs = O::INPUTS
        .iter()
        .zip(specs)
        .map(|(decl, spec)| {
            let shape = spec.shape.iter().map(|&d| d as u64).collect();
            (decl.name.to_owned(), shape, spec.dtype.to_string())
        })
        .collect();
    Ok(Call {
        step,
        op: O::NAME,
        family: O::FAMILY,
        inputs,
        params,
        flops: roofline.map(|r| r.flops),
        bytes: roofline.map(|r| r.bytes),
        roof: op.roof().0,
        samples_ms: Vec::new(),
    })
}

impl Recorder {
    /// Runs `call` `samples` times (at least once), timing each on the host clock (after a device
    /// synchronisation on a GPU), and records it as `step`.
    fn record<O: BenchOp + ManifestOp, R>(
        &mut self,
        step: &'static str,
        plan: std::result::Result<O, tileops::Error>,
        specs: &[TensorSpec],
        params: Vec<(&'static str, Value)>,
        mut call: impl FnMut() -> Result<R>,
    ) -> Result<R> {
        let mut described = describe(step, plan, specs, params)?;
        let mut samples_ms = Vec::with_capacity(self.samples);
        let mut first = None;
        for _ in 0..self.samples.max(1) {
            self.device.synchronize()?;
            let start = Instant::now();
            let out = call()?;
            self.device.synchronize()?;
            samples_ms.push(start.elapsed().as_secs_f64() * 1e3);
            first.get_or_insert(out);
        }
        if self.samples == 0 {
            samples_ms.clear();
        }
        described.samples_ms = samples_ms;
        self.calls.push(described);
        Ok(first.expect("the loop runs at least once"))
    }

    /// The records file of the calls: one record per call, timed `cpu_wall` (host clock) with
    /// every sample kept, on the device `info` names.
    pub(crate) fn run(&self, device: &tileops::Device) -> Run {
        let meta = tileops_bench::cli::meta::run_meta(device, SystemTime::now());
        let records = self
            .calls
            .iter()
            .map(|c| {
                let mut r = Record::new(
                    c.op,
                    c.family,
                    format!("decoder_layer.{}", c.step),
                    c.inputs[0].2.clone(),
                    meta.device.clone(),
                )
                .with_roofline(c.flops, c.bytes)
                .with_roof(c.roof);
                for (name, shape, dtype) in &c.inputs {
                    r = r.with_input(name.clone(), shape.clone(), dtype.clone());
                }
                for (name, value) in &c.params {
                    r = r.with_param(*name, value.clone());
                }
                if device.is_emulated() {
                    return r.with_emulated_run();
                }
                match r.clone().with_samples("cpu_wall", &c.samples_ms) {
                    Some(timed) => timed,
                    None => r.with_skip("not timed (--samples 0)"),
                }
            })
            .collect();
        Run::new(meta, records)
    }
}

fn spec(t: &Tensor) -> Result<TensorSpec> {
    tileops_candle::tensor_spec(t)
}

/// A `[n]` tensor's spec for an input the bridge makes itself (the prefill's offsets).
fn offsets_spec(n: usize) -> TensorSpec {
    TensorSpec::new([n], tileops::DType::Int32)
}

/// `x @ w.T` through tileops's gemm, recorded as `step`.
fn linear(rec: &mut Recorder, step: &'static str, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let options = GemmOptions::new().trans_b(true);
    let cpu = tileops::Device::cpu();
    let plan = t::Gemm::new(spec(x)?, spec(w)?, options, &cpu);
    let params = vec![
        ("trans_a", json!(false)),
        ("trans_b", json!(true)),
        ("allow_tf32", json!(false)),
    ];
    rec.record(step, plan, &[spec(x)?, spec(w)?], params, || {
        tileops_candle::gemm(x, w, options)
    })
}

/// The layer on `x` `[seq, hidden]` with tileops's ops, every call recorded in `rec`.
pub(crate) fn layer(
    c: &Config,
    w: &Weights,
    x: &Tensor,
    rec: &mut Recorder,
) -> Result<LayerOutput> {
    let cpu = tileops::Device::cpu();
    let eps = c.eps;
    let s = c.seq;
    let h = rec.record(
        "input_norm",
        t::RmsNorm::new(spec(x)?, spec(&w.input_norm)?, eps, &cpu),
        &[spec(x)?, spec(&w.input_norm)?],
        vec![("eps", json!(eps))],
        || tileops_candle::rms_norm(x, &w.input_norm, eps),
    )?;
    let q = linear(rec, "q_proj", &h, &w.wq)?.reshape((s, c.heads, c.head_dim))?;
    let k = linear(rec, "k_proj", &h, &w.wk)?.reshape((s, c.kv_heads, c.head_dim))?;
    let v = linear(rec, "v_proj", &h, &w.wv)?.reshape((s, c.kv_heads, c.head_dim))?;
    let positions = Tensor::arange(0i64, s as i64, x.device())?;
    let mut rope = |step, x: &Tensor| {
        let specs = [spec(x)?, spec(&positions)?, spec(&w.rope_table)?];
        let plan = t::Rope::new(specs[0].clone(), specs[1].clone(), specs[2].clone(), &cpu);
        rec.record(step, plan, &specs, vec![], || {
            tileops_candle::rope(x, &positions, &w.rope_table)
        })
    };
    let q = rope("rope_q", &q)?;
    let k = rope("rope_k", &k)?;
    // gqa_prefill is float16/bfloat16: an f32 layer attends on f16 copies.
    let attention_dtype = if q.dtype() == DType::F32 {
        DType::F16
    } else {
        q.dtype()
    };
    let (qa, ka, va) = (
        cast(&q, attention_dtype)?,
        cast(&k, attention_dtype)?,
        cast(&v, attention_dtype)?,
    );
    let cu = [0, s as i32];
    let options = PrefillOptions::default().causal(true);
    let specs = [
        spec(&qa)?,
        spec(&ka)?,
        spec(&va)?,
        offsets_spec(2),
        offsets_spec(2),
    ];
    let plan = t::GqaPrefill::new(
        specs[0].clone(),
        specs[1].clone(),
        specs[2].clone(),
        &cu,
        &cu,
        options,
        &cpu,
    );
    let params = vec![
        ("causal", json!(true)),
        ("sm_scale", json!(1.0 / (c.head_dim as f64).sqrt())),
    ];
    let (o, _) = rec.record("attention", plan, &specs, params, || {
        tileops_candle::gqa_prefill(&qa, &ka, &va, &cu, &cu, options)
    })?;
    let o = cast(&o, x.dtype())?.reshape((s, c.heads * c.head_dim))?;
    let attn = linear(rec, "o_proj", &o, &w.wo)?;
    let specs = [spec(&attn)?, spec(x)?, spec(&w.post_norm)?];
    let plan = t::FusedAddRmsNorm::new(
        specs[0].clone(),
        specs[1].clone(),
        specs[2].clone(),
        eps,
        &cpu,
    );
    let (normed, residual) = rec.record(
        "post_attention_norm",
        plan,
        &specs,
        vec![("eps", json!(eps))],
        || tileops_candle::fused_add_rms_norm(&attn, x, &w.post_norm, eps),
    )?;
    let gate_up = linear(rec, "gate_up_proj", &normed, &w.w_gate_up)?;
    let act = rec.record(
        "act",
        t::SiluAndMul::new(spec(&gate_up)?, &cpu),
        &[spec(&gate_up)?],
        vec![],
        || tileops_candle::silu_and_mul(&gate_up),
    )?;
    let mlp = linear(rec, "down_proj", &act, &w.w_down)?;
    Ok(LayerOutput {
        hidden: mlp,
        residual,
    })
}

/// What the layer gives, as vLLM's layers do: the layer's output is `hidden + residual`, which
/// the next layer's input norm adds itself (`fused_add_rms_norm`) and the last layer's caller
/// adds (tileops has no plain add, and on the emulated device candle's own add cannot run).
pub(crate) struct LayerOutput {
    pub(crate) hidden: Tensor,
    pub(crate) residual: Tensor,
}

/// `t` in `dtype`: candle's cast, done on the host for a GPU tensor (candle's cast kernel is PTX,
/// which the emulated device cannot run; the copies it costs are outside the recorded calls).
fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    if t.device().is_cpu() {
        return t.to_dtype(dtype);
    }
    t.to_device(&Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(t.device())
}

/// The same layer with candle-core's own ops, in f32 on the CPU.
pub(crate) fn reference(c: &Config, w: &Weights, x: &Tensor) -> Result<Tensor> {
    let s = c.seq;
    let rms = |x: &Tensor, weight: &Tensor| -> Result<Tensor> {
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        x.broadcast_div(&(ms + c.eps)?.sqrt()?)?
            .broadcast_mul(weight)
    };
    let lin = |x: &Tensor, weight: &Tensor| x.matmul(&weight.t()?);
    let rope = |x: &Tensor| -> Result<Tensor> {
        let half = c.head_dim / 2;
        let table = w.rope_table.unsqueeze(1)?; // [seq, 1, head_dim]
        let (cos, sin) = (table.narrow(2, 0, half)?, table.narrow(2, half, half)?);
        let (x1, x2) = (x.narrow(2, 0, half)?, x.narrow(2, half, half)?);
        let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
        let y2 = (x2.broadcast_mul(&cos)? + x1.broadcast_mul(&sin)?)?;
        Tensor::cat(&[y1, y2], 2)
    };
    let h = rms(x, &w.input_norm)?;
    let q = rope(&lin(&h, &w.wq)?.reshape((s, c.heads, c.head_dim))?)?;
    let k = rope(&lin(&h, &w.wk)?.reshape((s, c.kv_heads, c.head_dim))?)?;
    let v = lin(&h, &w.wv)?.reshape((s, c.kv_heads, c.head_dim))?;
    // GQA: query head i reads KV head i / (heads / kv_heads).
    let group = c.heads / c.kv_heads;
    let map: Vec<u32> = (0..c.heads).map(|i| (i / group) as u32).collect();
    let map = Tensor::new(map, &Device::Cpu)?;
    let q = q.transpose(0, 1)?.contiguous()?; // [heads, seq, dim]
    let k = k.transpose(0, 1)?.contiguous()?.index_select(&map, 0)?;
    let v = v.transpose(0, 1)?.contiguous()?.index_select(&map, 0)?;
    let scores = (q.matmul(&k.t()?)? / (c.head_dim as f64).sqrt())?;
    let mask: Vec<f32> = (0..s)
        .flat_map(|i| (0..s).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    let scores = scores.broadcast_add(&Tensor::from_vec(mask, (s, s), &Device::Cpu)?)?;
    let e = scores
        .broadcast_sub(&scores.max_keepdim(D::Minus1)?)?
        .exp()?;
    let p = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    let o = p
        .matmul(&v)?
        .transpose(0, 1)?
        .reshape((s, c.heads * c.head_dim))?;
    let residual = (lin(&o, &w.wo)? + x)?;
    let gate_up = lin(&rms(&residual, &w.post_norm)?, &w.w_gate_up)?;
    let n = c.intermediate;
    let act = (gate_up.narrow(1, 0, n)?.silu()? * gate_up.narrow(1, n, n)?)?;
    lin(&act, &w.w_down)? + residual
}

/// What one run of the example gives: the largest absolute difference from the reference, the
/// bound it must stay within, and the calls' records.
pub(crate) struct Outcome {
    pub(crate) max_abs_err: f32,
    pub(crate) bound: f32,
    pub(crate) run: Run,
}

/// Builds the layer in `dtype` on `device`, runs it (each op `samples` times) and the reference,
/// and returns the comparison and the records.
pub(crate) fn run_layer(device: &Device, dtype: DType, samples: usize) -> Result<Outcome> {
    let c = Config::SMALL;
    let tileops_device = if device.is_cuda() {
        tileops::Device::cuda(0).map_err(candle_core::Error::wrap)?
    } else {
        tileops::Device::cpu()
    };
    // An emulated device's clock says nothing about a GPU: each op runs once, untimed.
    let samples = if tileops_device.is_emulated() {
        samples.min(1)
    } else {
        samples
    };
    let weights = Weights::random(&c, dtype, device)?;
    let x = random(&[c.seq, c.hidden], 0.0, 1.0, 1, dtype, device)?;
    let mut rec = Recorder {
        samples,
        device: device.clone(),
        calls: Vec::new(),
    };
    let out = layer(&c, &weights, &x, &mut rec)?;
    // The last residual add, on the host in f32.
    let host = |t: &Tensor| t.to_device(&Device::Cpu)?.to_dtype(DType::F32);
    let y = (host(&out.hidden)? + host(&out.residual)?)?;
    let x32 = x.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
    let expected = reference(&c, &weights.to_cpu_f32()?, &x32)?;
    let max_abs_err = (y - &expected)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?;
    // Outputs are about 1 to 5 in magnitude. f32: the attention's f16 inputs (2^-11 relative) carried
    // through two projections; bf16: every op rounds to 8 bits of mantissa (2^-9 relative).
    let bound = if dtype == DType::F32 { 5e-3 } else { 0.1 };
    Ok(Outcome {
        max_abs_err,
        bound,
        run: rec.run(&tileops_device),
    })
}

struct Args {
    records: Option<PathBuf>,
    device: Device,
    dtype: DType,
    samples: usize,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        records: None,
        device: Device::Cpu,
        dtype: DType::F32,
        samples: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = Some(PathBuf::from(value()?)),
            "--device" => {
                args.device = match value()?.as_str() {
                    "cpu" => Device::Cpu,
                    "cuda" => Device::new_cuda(0).map_err(|e| format!("--device cuda: {e}"))?,
                    other => return Err(format!("--device {other}: expected cpu or cuda")),
                }
            }
            "--dtype" => {
                args.dtype = match value()?.as_str() {
                    "f32" => DType::F32,
                    "bf16" => DType::BF16,
                    other => return Err(format!("--dtype {other}: expected f32 or bf16")),
                }
            }
            "--samples" => {
                let v = value()?;
                args.samples = v
                    .parse()
                    .map_err(|_| format!("--samples {v}: not a count"))?;
            }
            "--help" | "-h" => {
                return Err("usage: decoder_layer [--records PATH] [--device cpu|cuda] \
                            [--dtype f32|bf16] [--samples N]"
                    .to_owned());
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return std::process::ExitCode::from(2);
        }
    };
    let outcome = match run_layer(&args.device, args.dtype, args.samples) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("decoder_layer: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!(
        "decoder layer ({:?}, {:?}): max abs error vs candle's own ops {:.3e} (bound {:.1e})",
        args.device.location(),
        args.dtype,
        outcome.max_abs_err,
        outcome.bound
    );
    for r in &outcome.run.records {
        let time = r.median_ms.map_or_else(
            || format!("{} (untimed)", r.timing),
            |ms| format!("median {ms:.3} ms"),
        );
        println!(
            "  {:<34} {:<18} flops {:>10} bytes {:>9}  {time}",
            r.workload,
            r.op,
            r.flops.unwrap_or(0),
            r.bytes.unwrap_or(0),
        );
    }
    if let Some(path) = &args.records {
        if let Err(e) = outcome.run.save(path) {
            eprintln!("decoder_layer: {e}");
            return std::process::ExitCode::FAILURE;
        }
        println!("records: {}", path.display());
    }
    if outcome.max_abs_err.is_nan() || outcome.max_abs_err > outcome.bound {
        eprintln!("decoder_layer: the layer is off the reference");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
