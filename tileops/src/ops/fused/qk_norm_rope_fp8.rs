//! `qk_norm_rope_fp8`: the fused case study — per head row of q and k, RMS norm with
//! a weight, NeoX RoPE, fp8 quantization with one scale per row, in one kernel and one pass.

use cudarc::driver::LaunchConfig;

use crate::device::CudaDevice;
use crate::kernels::{self, QK_NORM_ROPE_FP8};
use crate::ops::backend::{self, Backends, exact_inputs, workload_f64};
use crate::ops::launch::{grid_dim, launch};
use crate::ops::position_encoding::rope::{
    check_positions, check_positions_spec, cos_sin_cache_rows, random_positions, rope_table,
    used_table_rows,
};
use crate::ops::quantization::fp8_quant::store_fp8;
use crate::ops::{check_extents, check_input};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorSpec};

const OP: &str = QkNormRopeFp8::NAME;

/// The head row length the kernel (and the per-row FLOP ledger of manifest/fused.yaml) is written for.
pub(crate) const HEAD_DIM: usize = 128;

/// The four outputs of [`QkNormRopeFp8`].
#[derive(Debug)]
pub struct QkNormRopeFp8Output {
    /// `[tokens, q_heads, 128]` float8_e4m3fn.
    pub q_fp8: Tensor,
    /// `[tokens, k_heads, 128]` float8_e4m3fn.
    pub k_fp8: Tensor,
    /// `[tokens, q_heads]` float32: `q ≈ q_fp8 * q_scale` per head row.
    pub q_scale: Tensor,
    /// `[tokens, k_heads]` float32.
    pub k_scale: Tensor,
}

/// The four outputs of [`QkNormRopeFp8`] borrowed for writing: what `forward_into` takes.
/// `&mut QkNormRopeFp8Output` converts into it; a caller writing its own memory builds it from
/// [`TensorMut`](crate::TensorMut)s.
#[derive(Debug)]
pub struct QkNormRopeFp8OutputMut<'a> {
    /// `[tokens, q_heads, 128]` float8_e4m3fn.
    pub q_fp8: crate::TensorMut<'a>,
    /// `[tokens, k_heads, 128]` float8_e4m3fn.
    pub k_fp8: crate::TensorMut<'a>,
    /// `[tokens, q_heads]` float32.
    pub q_scale: crate::TensorMut<'a>,
    /// `[tokens, k_heads]` float32.
    pub k_scale: crate::TensorMut<'a>,
}

impl<'a> From<&'a mut QkNormRopeFp8Output> for QkNormRopeFp8OutputMut<'a> {
    fn from(out: &'a mut QkNormRopeFp8Output) -> Self {
        QkNormRopeFp8OutputMut {
            q_fp8: (&mut out.q_fp8).into(),
            k_fp8: (&mut out.k_fp8).into(),
            q_scale: (&mut out.q_scale).into(),
            k_scale: (&mut out.k_scale).into(),
        }
    }
}

/// QK-norm + RoPE + fp8 in one kernel, as in the fused case study: for every head row of `q`
/// `[tokens, q_heads, 128]` and `k` `[tokens, k_heads, 128]` (bfloat16 or float16),
/// `n = x / sqrt(mean(x^2) + eps) * weight` (`q_weight` or `k_weight`, `[128]`), NeoX RoPE of `n`
/// at the token's position with the float32 table `cos_sin_cache` `[max_pos, 128]` (rows
/// `[cos (64) | sin (64)]`, as [`Rope`](crate::ops::Rope)), then float8_e4m3fn codes with one float32
/// scale per row, `scale = max(amax / 448, 1 / (448 * 512))`, codes `saturate(y * (1 / scale))`.
/// Nothing between the stages is rounded or written: the kernel keeps each row in f32 registers.
///
/// Its roofline is the per-row ledger of manifest/fused.yaml: the ledger charges the RoPE lookups
/// as two `head_dim`-wide float32 tables per token and leaves out the positions, so it counts
/// `tokens * (128 * 4 - 8)` bytes more than the kernel moves (the kernel reads one 512-byte
/// `[cos | sin]` row and one 8-byte position per token).
///
/// NaN follows PyTorch, as in [`Fp8Quant`](crate::ops::Fp8Quant): a row holding a NaN after the norm
/// and RoPE (a NaN input, which the norm spreads over its row, or an infinity, whose `inf * 0` in
/// the norm is NaN) gets scale NaN and every code NaN (0x7F).
///
/// A position outside `[0, max_pos)` is an error on the CPU; on the GPU its token's rows come out
/// as NaN codes with NaN scales.
///
/// ```
/// use tileops::ops::QkNormRopeFp8;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let bf16 = |shape: &[usize]| TensorSpec::new(shape, DType::BFloat16);
/// // q and k of 2 tokens (4 and 1 heads), a table of 8 positions; the weights ([128], q's
/// // dtype), the positions (int64 [tokens]) and eps (the manifest's 1e-6) take their defaults.
/// let op = QkNormRopeFp8::builder(
///     bf16(&[2, 4, 128]),
///     bf16(&[2, 1, 128]),
///     TensorSpec::new([8, 128], DType::Float32),
/// )
/// .eps(1e-6)
/// .build(&device)?;
/// let r = op.eval_roofline()?;
/// assert_eq!(r.flops, 1155 * 2 * 5); // the ledger's 1155 FLOP per head row
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[crate::roofline_op("qk_norm_rope_fp8")]
#[derive(Debug, Clone)]
pub struct QkNormRopeFp8 {
    q: TensorSpec,
    k: TensorSpec,
    q_weight: TensorSpec,
    k_weight: TensorSpec,
    positions: TensorSpec,
    cos_sin_cache: TensorSpec,
    eps: f64,
    device: Device,
    tokens: usize,
    q_heads: usize,
    k_heads: usize,
    max_pos: usize,
}

/// The plan of a [`QkNormRopeFp8`] before it is checked: q, k and the table are given, the rest
/// has defaults that [`QkNormRopeFp8Builder::build`] checks like any given spec.
///
/// ```
/// use tileops::ops::QkNormRopeFp8;
/// use tileops::{DType, Device, TensorSpec};
///
/// let q = TensorSpec::new([3, 8, 128], DType::Float16);
/// let k = TensorSpec::new([3, 2, 128], DType::Float16);
/// let table = TensorSpec::new([64, 128], DType::Float32);
/// let op = QkNormRopeFp8::builder(q, k, table)
///     .q_weight(TensorSpec::new([128], DType::Float16))
///     .positions(TensorSpec::new([3], DType::Int64))
///     .eps(1e-5)
///     .build(&Device::cpu())?;
/// assert_eq!(op.eps(), 1e-5);
/// // A weight in another dtype than q is refused when the plan is built.
/// let bad = QkNormRopeFp8::builder(op.q().clone(), op.k().clone(), TensorSpec::new([64, 128], DType::Float32))
///     .k_weight(TensorSpec::new([128], DType::BFloat16))
///     .build(&Device::cpu());
/// assert!(bad.is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build`"]
pub struct QkNormRopeFp8Builder {
    q: TensorSpec,
    k: TensorSpec,
    cos_sin_cache: TensorSpec,
    q_weight: Option<TensorSpec>,
    k_weight: Option<TensorSpec>,
    positions: Option<TensorSpec>,
    eps: Option<f64>,
}

impl QkNormRopeFp8Builder {
    /// The weight of q's norm (default `[128]` in q's dtype).
    pub fn q_weight(mut self, q_weight: TensorSpec) -> Self {
        self.q_weight = Some(q_weight);
        self
    }

    /// The weight of k's norm (default `[128]` in q's dtype).
    pub fn k_weight(mut self, k_weight: TensorSpec) -> Self {
        self.k_weight = Some(k_weight);
        self
    }

    /// The positions (default int64 `[tokens]` for the tokens of q).
    pub fn positions(mut self, positions: TensorSpec) -> Self {
        self.positions = Some(positions);
        self
    }

    /// The epsilon of the norm (default: the manifest's).
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = Some(eps);
        self
    }

    /// Plans the op on `device`: the checks of [`QkNormRopeFp8`], in its field order.
    pub fn build(self, device: &Device) -> Result<QkNormRopeFp8, Error> {
        let weight = || TensorSpec::new([HEAD_DIM], self.q.dtype);
        let positions = self.positions.clone().unwrap_or_else(|| {
            TensorSpec::new([self.q.shape.first().copied().unwrap_or(0)], DType::Int64)
        });
        let eps = match self.eps {
            Some(eps) => eps,
            None => default_eps()?,
        };
        QkNormRopeFp8::plan(
            device,
            self.q.clone(),
            self.k.clone(),
            self.q_weight.clone().unwrap_or_else(weight),
            self.k_weight.clone().unwrap_or_else(weight),
            positions,
            self.cos_sin_cache,
            eps,
        )
    }
}

/// The manifest's default `eps`.
fn default_eps() -> Result<f64, Error> {
    QkNormRopeFp8::default_param("eps")
        .and_then(|value| value.as_f64())
        .ok_or_else(|| Error::internal(format!("{OP}: the manifest declares no numeric eps")))
}

fn bad_shape(field: &'static str, spec: &TensorSpec, reason: String) -> Error {
    Error::InvalidShape {
        op: OP,
        field,
        shape: spec.shape.clone(),
        reason,
    }
}

impl QkNormRopeFp8 {
    /// The roof an optimal implementation is priced against: CUDA cores (elementwise, per-row work, not a matrix product).
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Starts a plan for `q` `[tokens, q_heads, 128]`, `k` `[tokens, k_heads, 128]` and the
    /// table `cos_sin_cache` `[max_pos, 128]`; the weights, positions and eps have defaults (see
    /// [`QkNormRopeFp8Builder`]), and [`build`](QkNormRopeFp8Builder::build) checks the plan.
    ///
    /// `build` errors when `q` or `k` is not rank 3 with head_dim 128, or empty; when they
    /// disagree in tokens or dtype (bfloat16 or float16); when a weight is not `[128]` of q's
    /// dtype; when `positions` is not int64 `[tokens]`; when the table is not float32
    /// `[max_pos >= 1, 128]`; or when `eps` is negative or not finite.
    pub fn builder(
        q: TensorSpec,
        k: TensorSpec,
        cos_sin_cache: TensorSpec,
    ) -> QkNormRopeFp8Builder {
        QkNormRopeFp8Builder {
            q,
            k,
            cos_sin_cache,
            q_weight: None,
            k_weight: None,
            positions: None,
            eps: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plan(
        device: &Device,
        q: TensorSpec,
        k: TensorSpec,
        q_weight: TensorSpec,
        k_weight: TensorSpec,
        positions: TensorSpec,
        cos_sin_cache: TensorSpec,
        eps: f64,
    ) -> Result<QkNormRopeFp8, Error> {
        if !matches!(q.dtype, DType::BFloat16 | DType::Float16) {
            return Err(Error::InvalidDType {
                op: OP,
                field: "q",
                value: q.dtype,
                supported: "bfloat16, float16".to_owned(),
            });
        }
        for (field, spec) in [("k", &k), ("q_weight", &q_weight), ("k_weight", &k_weight)] {
            if spec.dtype != q.dtype {
                return Err(Error::InvalidDType {
                    op: OP,
                    field,
                    value: spec.dtype,
                    supported: format!("the dtype of q ({})", q.dtype),
                });
            }
        }
        let mut dims = [(0, 0); 2];
        for (i, (field, spec)) in [("q", &q), ("k", &k)].into_iter().enumerate() {
            let &[tokens, heads, head_dim] = spec.shape.as_slice() else {
                return Err(bad_shape(
                    field,
                    spec,
                    "must be rank 3: [tokens, heads, 128]".to_owned(),
                ));
            };
            check_extents(OP, field, spec)?;
            if head_dim != HEAD_DIM {
                return Err(bad_shape(
                    field,
                    spec,
                    format!(
                        "head_dim must be {HEAD_DIM} (the kernel and its manifest ledger are for 128)"
                    ),
                ));
            }
            if heads > 1 << 20 {
                return Err(bad_shape(field, spec, "at most 2^20 heads".to_owned()));
            }
            dims[i] = (tokens, heads);
        }
        let [(tokens, q_heads), (k_tokens, k_heads)] = dims;
        if k_tokens != tokens {
            return Err(bad_shape(
                "k",
                &k,
                format!("must have the {tokens} tokens of q"),
            ));
        }
        for (field, spec) in [("q_weight", &q_weight), ("k_weight", &k_weight)] {
            if spec.shape != [HEAD_DIM] {
                return Err(bad_shape(field, spec, format!("must be [{HEAD_DIM}]")));
            }
        }
        check_positions_spec(OP, &positions, tokens)?;
        let max_pos = cos_sin_cache_rows(OP, &cos_sin_cache, HEAD_DIM)?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::InvalidParam {
                op: OP,
                field: "eps",
                value: eps.to_string(),
                reason: "must be finite and >= 0".to_owned(),
            });
        }
        Ok(QkNormRopeFp8 {
            q,
            k,
            q_weight,
            k_weight,
            positions,
            cos_sin_cache,
            eps,
            device: device.clone(),
            tokens,
            q_heads,
            k_heads,
            max_pos,
        })
    }

    /// The q spec the op is planned for.
    pub fn q(&self) -> &TensorSpec {
        &self.q
    }

    /// The k spec the op is planned for.
    pub fn k(&self) -> &TensorSpec {
        &self.k
    }

    /// The epsilon of the norm.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The specs of the outputs: `(q_fp8, k_fp8, q_scale, k_scale)`.
    pub fn output_specs(&self) -> [TensorSpec; 4] {
        [
            TensorSpec::new(self.q.shape.clone(), DType::Float8E4M3Fn),
            TensorSpec::new(self.k.shape.clone(), DType::Float8E4M3Fn),
            TensorSpec::new([self.tokens, self.q_heads], DType::Float32),
            TensorSpec::new([self.tokens, self.k_heads], DType::Float32),
        ]
    }

    /// Runs the op into new output tensors; every input must match the plan.
    pub fn forward<'t>(
        &self,
        q: impl Into<crate::TensorRef<'t>>,
        k: impl Into<crate::TensorRef<'t>>,
        q_weight: impl Into<crate::TensorRef<'t>>,
        k_weight: impl Into<crate::TensorRef<'t>>,
        positions: impl Into<crate::TensorRef<'t>>,
        cos_sin_cache: impl Into<crate::TensorRef<'t>>,
    ) -> Result<QkNormRopeFp8Output, Error> {
        let q = q.into();
        let k = k.into();
        let q_weight = q_weight.into();
        let k_weight = k_weight.into();
        let positions = positions.into();
        let cos_sin_cache = cos_sin_cache.into();
        let [qs, ks, qss, kss] = self.output_specs();
        let mut out = QkNormRopeFp8Output {
            q_fp8: Tensor::empty(&qs, &self.device)?,
            k_fp8: Tensor::empty(&ks, &self.device)?,
            q_scale: Tensor::empty(&qss, &self.device)?,
            k_scale: Tensor::empty(&kss, &self.device)?,
        };
        self.forward_into(q, k, q_weight, k_weight, positions, cos_sin_cache, &mut out)?;
        Ok(out)
    }

    /// Runs the op into `out` (tensors of `output_specs()` on the op's device). Asynchronous on a
    /// GPU.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_into<'t>(
        &self,
        q: impl Into<crate::TensorRef<'t>>,
        k: impl Into<crate::TensorRef<'t>>,
        q_weight: impl Into<crate::TensorRef<'t>>,
        k_weight: impl Into<crate::TensorRef<'t>>,
        positions: impl Into<crate::TensorRef<'t>>,
        cos_sin_cache: impl Into<crate::TensorRef<'t>>,
        out: impl Into<QkNormRopeFp8OutputMut<'t>>,
    ) -> Result<(), Error> {
        let out = out.into();
        let q = q.into();
        let k = k.into();
        let q_weight = q_weight.into();
        let k_weight = k_weight.into();
        let positions = positions.into();
        let cos_sin_cache = cos_sin_cache.into();
        let d = &self.device;
        check_input(OP, "q", &q, &self.q, d)?;
        check_input(OP, "k", &k, &self.k, d)?;
        check_input(OP, "q_weight", &q_weight, &self.q_weight, d)?;
        check_input(OP, "k_weight", &k_weight, &self.k_weight, d)?;
        check_input(OP, "positions", &positions, &self.positions, d)?;
        check_input(OP, "cos_sin_cache", &cos_sin_cache, &self.cos_sin_cache, d)?;
        let [qs, ks, qss, kss] = self.output_specs();
        check_input(OP, "q_fp8", &out.q_fp8, &qs, d)?;
        check_input(OP, "k_fp8", &out.k_fp8, &ks, d)?;
        check_input(OP, "q_scale", &out.q_scale, &qss, d)?;
        check_input(OP, "k_scale", &out.k_scale, &kss, d)?;
        let QkNormRopeFp8OutputMut {
            q_fp8,
            k_fp8,
            q_scale,
            k_scale,
        } = out;
        backend::forward(
            self,
            [q, k, q_weight, k_weight, positions, cos_sin_cache],
            [q_fp8, k_fp8, q_scale, k_scale],
        )
    }
}

impl Backends<6, 4> for QkNormRopeFp8 {
    fn device(&self) -> &Device {
        &self.device
    }

    /// Not `cpu_f64`: int64 positions, fp8 codes and f32 scales, for q and for k.
    fn cpu(
        &self,
        [q, k, q_weight, k_weight, positions, cos_sin_cache]: [crate::TensorRef<'_>; 6],
        [q_fp8, k_fp8, q_scale, k_scale]: [crate::TensorMut<'_>; 4],
    ) -> Result<(), Error> {
        let pos = positions.host_vec::<i64>()?;
        check_positions(OP, &pos, self.max_pos)?;
        let (cache, pos) = used_table_rows(&cos_sin_cache, &pos, HEAD_DIM)?;
        for (x, w, heads, mut codes_out, mut scales_out) in [
            (q, q_weight, self.q_heads, q_fp8, q_scale),
            (k, k_weight, self.k_heads, k_fp8, k_scale),
        ] {
            let (codes, scales, _) = super::reference::qk_norm_rope_fp8(
                &x.host_f64()?,
                &w.host_f64()?,
                &pos,
                &cache,
                heads,
                HEAD_DIM,
                self.eps,
            );
            store_fp8(OP, codes, &scales, &mut codes_out, &mut scales_out)?;
        }
        Ok(())
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref q, ref k, ref qw, ref kw, ref pos, ref cache]: [cudarc::driver::CudaView<'_, u8>; 6],
        [ref mut q_out, ref mut k_out, ref mut q_sc, ref mut k_sc]: [cudarc::driver::CudaViewMut<'_, u8>;
            4],
    ) -> Result<(), Error> {
        let entry = kernels::entry(&QK_NORM_ROPE_FP8, "qk_norm_rope_fp8", self.q.dtype)?;
        let cfg = LaunchConfig {
            grid_dim: (grid_dim(entry, self.tokens.min(1 << 24))?, 1, 1),
            block_dim: (fused_threads(self.q_heads + self.k_heads), 1, 1),
            shared_mem_bytes: 0,
        };
        let (tokens, q_heads, k_heads, max_pos, eps) = (
            self.tokens as i64,
            self.q_heads as i32,
            self.k_heads as i32,
            self.max_pos as i64,
            self.eps as f32,
        );
        // SAFETY: qk_norm_rope_fp8_*(const T* q, const T* k, const T* qw, const T* kw,
        // const long long* positions, const float* cache, uchar* q_out, uchar* k_out,
        // float* q_scale, float* k_scale, long long tokens, int q_heads, int k_heads,
        // long long max_pos, float eps); every buffer holds what its spec says (checked against
        // the plan); the block is 32..512 threads, a multiple of 32 (the launch bounds).
        unsafe {
            launch!(dev, &QK_NORM_ROPE_FP8, entry, cfg;
                q, k, qw, kw, pos, cache, q_out, k_out, q_sc, k_sc,
                &tokens, &q_heads, &k_heads, &max_pos, &eps)
        }
    }
}

/// Threads per block: 4 per head row of a token, whole warps, at most 512 (128 rows per pass).
fn fused_threads(rows: usize) -> u32 {
    (rows * 4).div_ceil(32).clamp(1, 16) as u32 * 32
}

impl FromWorkload for QkNormRopeFp8 {
    /// q, k and the weights in the case dtype, positions int64, the table float32; `eps` from the
    /// row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let d = case.dtype;
        let eps = workload_f64::<QkNormRopeFp8>(case, "eps")?;
        QkNormRopeFp8::builder(
            case.require_input_as(OP, "q", d)?,
            case.require_input_as(OP, "k", d)?,
            case.require_input_as(OP, "cos_sin_cache", DType::Float32)?,
        )
        .q_weight(case.require_input_as(OP, "q_weight", d)?)
        .k_weight(case.require_input_as(OP, "k_weight", d)?)
        .positions(case.require_input_as(OP, "positions", DType::Int64)?)
        .eps(eps)
        .build(device)
    }
}

impl BenchOp for QkNormRopeFp8 {
    fn roof(&self) -> RoofKey {
        QkNormRopeFp8::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        let d = &self.device;
        let specs = [&self.q, &self.k, &self.q_weight, &self.k_weight];
        let mut inputs = backend::random_inputs(specs, seed, d)?;
        inputs.push(random_positions(self.tokens, self.max_pos, seed, d)?);
        inputs.push(rope_table(&self.cos_sin_cache, d)?);
        Ok(inputs)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [q, k, qw, kw, positions, cache] = exact_inputs::<Self, 6>(inputs)?;
        let out = self.forward(q, k, qw, kw, positions, cache)?;
        Ok(vec![out.q_fp8, out.k_fp8, out.q_scale, out.k_scale])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![
                self.q.clone(),
                self.k.clone(),
                self.q_weight.clone(),
                self.k_weight.clone(),
                self.positions.clone(),
                self.cos_sin_cache.clone(),
            ],
            writes: self.output_specs().to_vec(),
        })
    }
}

/// QK-norm + RoPE + fp8 in one call: plans a [`QkNormRopeFp8`] for the tensors' specs on `q`'s
/// device (norm epsilon `eps`) and runs it. Build the plan once with
/// [`QkNormRopeFp8::builder`] when the same shapes run repeatedly.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec, ops};
///
/// let cpu = Device::cpu();
/// let bf16 = |shape: &[usize]| TensorSpec::new(shape, DType::BFloat16);
/// let q = Tensor::random(&bf16(&[2, 4, 128]), 1, &cpu)?;
/// let k = Tensor::random(&bf16(&[2, 1, 128]), 2, &cpu)?;
/// let ones = Tensor::full(&bf16(&[128]), 1.0, &cpu)?;
/// let positions = Tensor::from_slice(&[0i64, 0], [2], &cpu)?;
/// // Row 0 of the table is the identity rotation: cos 1, sin 0.
/// let mut table = vec![0.0f32; 128];
/// table[..64].fill(1.0);
/// let table = Tensor::from_f32_slice(&table, [1, 128], &cpu)?;
/// let out = ops::qk_norm_rope_fp8(&q, &k, &ones, &ones, &positions, &table, 1e-6)?;
/// assert_eq!(out.q_scale.shape(), &[2, 4]);
/// assert_eq!(out.k_fp8.shape(), &[2, 1, 128]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn qk_norm_rope_fp8(
    q: &Tensor,
    k: &Tensor,
    q_weight: &Tensor,
    k_weight: &Tensor,
    positions: &Tensor,
    cos_sin_cache: &Tensor,
    eps: f64,
) -> Result<QkNormRopeFp8Output, Error> {
    QkNormRopeFp8::builder(
        q.spec().clone(),
        k.spec().clone(),
        cos_sin_cache.spec().clone(),
    )
    .q_weight(q_weight.spec().clone())
    .k_weight(k_weight.spec().clone())
    .positions(positions.spec().clone())
    .eps(eps)
    .build(q.device())?
    .forward(q, k, q_weight, k_weight, positions, cos_sin_cache)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::fused::reference::qk_norm_rope_fp8;

    fn plan(tokens: usize, q_heads: usize, k_heads: usize, dtype: DType) -> QkNormRopeFp8 {
        QkNormRopeFp8::builder(
            TensorSpec::new([tokens, q_heads, 128], dtype),
            TensorSpec::new([tokens, k_heads, 128], dtype),
            TensorSpec::new([9, 128], DType::Float32),
        )
        .eps(1e-6)
        .build(&Device::cpu())
        .unwrap()
    }

    #[test]
    fn cpu_forward_matches_the_reference() {
        for dtype in [DType::BFloat16, DType::Float16] {
            for (tokens, qh, kh) in [(1, 1, 1), (3, 4, 2), (2, 5, 3)] {
                let op = plan(tokens, qh, kh, dtype);
                let inputs = op.random_inputs(7).unwrap();
                let out = op.run(&inputs).unwrap();
                let pos = inputs[4].to_vec::<i64>().unwrap();
                let cache = inputs[5].to_vec_f64().unwrap();
                for (x, w, heads, codes, scales) in [(0, 2, qh, 0, 2), (1, 3, kh, 1, 3)] {
                    let (c, s, _) = qk_norm_rope_fp8(
                        &inputs[x].to_vec_f64().unwrap(),
                        &inputs[w].to_vec_f64().unwrap(),
                        &pos,
                        &cache,
                        heads,
                        128,
                        1e-6,
                    );
                    assert_eq!(out[codes].to_bytes().unwrap(), c);
                    assert_eq!(out[scales].to_vec_f32().unwrap(), s);
                }
            }
        }
    }

    #[test]
    fn the_ledger_is_the_seeds() {
        // The case study's workload: 4096 tokens, 32 + 8 heads, head_dim 128.
        let op = plan(4096, 32, 8, DType::BFloat16);
        let r = op.eval_roofline().unwrap();
        let rows = 4096u64 * 40;
        assert_eq!(r.flops, 1155 * rows);
        let payload = rows * 128 * 2 + rows * 128 + rows * 4;
        let lookup = 2 * 128 * 2 + 2 * 4096 * 128 * 4;
        assert_eq!(r.bytes, payload + lookup);
        // What the kernel moves: the ledger minus tokens * (128 * 4 - 8) bytes.
        let moved = payload + 2 * 128 * 2 + 4096 * 128 * 4 + 4096 * 8;
        assert_eq!(r.bytes - moved, 4096 * (128 * 4 - 8));
        assert_eq!(fused_threads(40), 160);
        assert_eq!(fused_threads(2), 32);
        assert_eq!(fused_threads(100), 416);
        assert_eq!(fused_threads(200), 512);
    }
}
