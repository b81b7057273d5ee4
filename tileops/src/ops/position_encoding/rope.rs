//! `rope`: rotary position embedding (NeoX or interleaved pairs) with a cos/sin table given as an
//! input.

use cudarc::driver::LaunchConfig;

use crate::device::CudaDevice;
use crate::kernels::{self, ROPE};
use crate::ops::backend::{self, Backends, exact_inputs, workload_bool};
use crate::ops::launch::{grid_dim, launch};
use crate::ops::{check_extents, check_float_dtype, check_input};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorSpec};

const OP: &str = Rope::NAME;

/// The widest head row the kernels stage a table row for (in shared memory, 4 bytes each).
const MAX_HEAD_DIM: usize = 8192;

/// Which elements of a head row RoPE rotates together (the manifest's `is_neox_style`).
///
/// ```
/// use tileops::ops::{Rope, RopeStyle};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let cpu = Device::cpu();
/// // One head of 4, a quarter turn (cos 0, sin 1) for both pairs.
/// let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0], [1, 1, 4], &cpu)?;
/// let positions = Tensor::from_slice(&[0u32], [1], &cpu)?;
/// let table = Tensor::from_f32_slice(&[0.0, 0.0, 1.0, 1.0], [1, 4], &cpu)?;
/// let plan = |style| {
///     Rope::new(x.spec().clone(), positions.spec().clone(), table.spec().clone(), &cpu)
///         .map(|op| op.with_style(style))
/// };
/// // NeoX pairs (1, 3) and (2, 4); interleaved pairs (1, 2) and (3, 4).
/// let neox = plan(RopeStyle::NeoX)?.forward(&x, &positions, &table)?;
/// assert_eq!(neox.to_vec_f32()?, vec![-3.0, -4.0, 1.0, 2.0]);
/// let interleaved = plan(RopeStyle::Interleaved)?.forward(&x, &positions, &table)?;
/// assert_eq!(interleaved.to_vec_f32()?, vec![-2.0, 1.0, -4.0, 3.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RopeStyle {
    /// Half rotation (GPT-NeoX, Llama, vLLM's default, candle's `rope` and `rope_thd`): pair `i`
    /// is `(x[i], x[i + head_dim/2])`.
    #[default]
    NeoX,
    /// Interleaved (GPT-J, candle's `rope_i`): pair `i` is `(x[2i], x[2i + 1])`.
    Interleaved,
}

/// The position dtypes `rope` takes.
const POSITION_DTYPES: [DType; 3] = [DType::Int64, DType::Int32, DType::UInt32];

/// RoPE (vLLM's `rotary_embedding` layout) on `x` `[tokens, heads, head_dim]` with `positions`
/// `[tokens]` (int64, int32 or uint32) and a `cos_sin_cache` `[max_pos, head_dim]` (float32, or
/// `x`'s dtype) whose row `p` is `[cos (head_dim/2) | sin (head_dim/2)]` of position `p`: each
/// pair `(a, b)` of a head row becomes `(a cos_i - b sin_i, b cos_i + a sin_i)`. The pairs are
/// NeoX's by default, `(x[i], x[i + head_dim/2])`, or interleaved, `(x[2i], x[2i + 1])`, with
/// [`Rope::with_style`]. `x` in float32, float16 or bfloat16; math in f32 on the GPU (f64 on the
/// CPU), one rounding to `x`'s dtype.
///
/// The kernel reads `x`, each position once, and only the table rows of the call's positions, each
/// once per token (staged in shared memory for all heads): what the manifest's bytes count.
/// A position outside `[0, max_pos)` is an error on the CPU; on the GPU (which cannot report it
/// without a synchronisation) that token's rows come out NaN.
///
/// ```
/// use tileops::ops::Rope;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let x = TensorSpec::new([2, 4, 8], DType::BFloat16);
/// let positions = TensorSpec::new([2], DType::Int64);
/// let rope = Rope::new(x.clone(), positions, TensorSpec::new([16, 8], DType::Float32), &device)?;
/// // Position 0 of this table is the identity rotation (cos 1, sin 0).
/// let mut table = vec![0.0f32; 16 * 8];
/// table[..4].fill(1.0);
/// let cache = Tensor::from_f32_slice(&table, [16, 8], &device)?;
/// let positions = Tensor::from_slice(&[0i64, 0], [2], &device)?;
/// let xs = Tensor::random(&x, 1, &device)?;
/// let y = rope.forward(&xs, &positions, &cache)?;
/// assert_eq!(y.to_bytes()?, xs.to_bytes()?);
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("rope")]
#[derive(Debug, Clone)]
pub struct Rope {
    /// `[tokens, heads, head_dim]`.
    x: TensorSpec,
    /// `[tokens]`, int64, int32 or uint32.
    positions: TensorSpec,
    /// `[max_pos, head_dim]`, float32 or `x`'s dtype.
    cos_sin_cache: TensorSpec,
    /// The manifest's `is_neox_style`.
    style: RopeStyle,
    device: Device,
    tokens: usize,
    heads: usize,
    head_dim: usize,
    max_pos: usize,
}

impl Rope {
    /// The roof an optimal RoPE is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a NeoX RoPE of `x` `[tokens, heads, head_dim]` with `positions` `[tokens]` (int64,
    /// int32 or uint32) and `cos_sin_cache` `[max_pos, head_dim]` (float32 or `x`'s dtype); see
    /// [`Rope::with_style`] for interleaved pairs.
    ///
    /// Errors when `x` is not rank 3, empty, or not float32/float16/bfloat16; when `head_dim` is
    /// odd or above 8192; when `positions` is not `[tokens]` of int64, int32 or uint32; or when
    /// the table is not `[max_pos, head_dim]` with `max_pos >= 1`, in float32 or `x`'s dtype.
    pub fn new(
        x: TensorSpec,
        positions: TensorSpec,
        cos_sin_cache: TensorSpec,
        device: &Device,
    ) -> Result<Rope, Error> {
        check_float_dtype(OP, "x", &x)?;
        let &[tokens, heads, head_dim] = x.shape.as_slice() else {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: "must be rank 3: [tokens, heads, head_dim]".to_owned(),
            });
        };
        check_extents(OP, "x", &x)?;
        if !head_dim.is_multiple_of(2) || head_dim > MAX_HEAD_DIM {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: format!("head_dim must be even and at most {MAX_HEAD_DIM}"),
            });
        }
        check_positions_of(OP, &positions, tokens, &POSITION_DTYPES)?;
        let max_pos = table_rows(OP, &cos_sin_cache, head_dim, &[DType::Float32, x.dtype])?;
        if i32::try_from(heads * head_dim).is_err() {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: format!("heads * head_dim must be at most {}", i32::MAX),
            });
        }
        Ok(Rope {
            x,
            positions,
            cos_sin_cache,
            style: RopeStyle::NeoX,
            device: device.clone(),
            tokens,
            heads,
            head_dim,
            max_pos,
        })
    }

    /// The plan with the pairs of `style` (NeoX by default).
    pub fn with_style(mut self, style: RopeStyle) -> Rope {
        self.style = style;
        self
    }

    /// The pairs the plan rotates.
    pub fn style(&self) -> RopeStyle {
        self.style
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The positions spec.
    pub fn positions(&self) -> &TensorSpec {
        &self.positions
    }

    /// The cos/sin table spec.
    pub fn cos_sin_cache(&self) -> &TensorSpec {
        &self.cos_sin_cache
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// RoPE of `x` into a new tensor; every input must match the plan.
    pub fn forward<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        positions: impl Into<crate::TensorRef<'t>>,
        cos_sin_cache: impl Into<crate::TensorRef<'t>>,
    ) -> Result<Tensor, Error> {
        let x = x.into();
        let positions = positions.into();
        let cos_sin_cache = cos_sin_cache.into();
        self.check_inputs(&x, &positions, &cos_sin_cache)?;
        let mut y = Tensor::empty(&self.x, &self.device)?;
        self.forward_into(x, positions, cos_sin_cache, &mut y)?;
        Ok(y)
    }

    /// RoPE of `x` written into `y` (same spec and device as `x`). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        positions: impl Into<crate::TensorRef<'t>>,
        cos_sin_cache: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let positions = positions.into();
        let cos_sin_cache = cos_sin_cache.into();
        let y = y.into();
        self.check_inputs(&x, &positions, &cos_sin_cache)?;
        check_input(OP, "y", &y, &self.x, &self.device)?;
        backend::forward(self, [x, positions, cos_sin_cache], [y])
    }

    fn check_inputs(
        &self,
        x: &crate::TensorRef<'_>,
        positions: &crate::TensorRef<'_>,
        cos_sin_cache: &crate::TensorRef<'_>,
    ) -> Result<(), Error> {
        check_input(OP, "x", x, &self.x, &self.device)?;
        check_input(OP, "positions", positions, &self.positions, &self.device)?;
        check_input(
            OP,
            "cos_sin_cache",
            cos_sin_cache,
            &self.cos_sin_cache,
            &self.device,
        )
    }
}

impl Backends<3, 1> for Rope {
    fn device(&self) -> &Device {
        &self.device
    }

    /// Not `cpu_f64`: the positions stay integers (checked against the table, not widened).
    fn cpu(
        &self,
        [x, positions, cos_sin_cache]: [crate::TensorRef<'_>; 3],
        [mut y]: [crate::TensorMut<'_>; 1],
    ) -> Result<(), Error> {
        let pos = host_positions(&positions)?;
        check_positions(OP, &pos, self.max_pos)?;
        let (table, rows) = used_table_rows(&cos_sin_cache, &pos, self.head_dim)?;
        let (values, _) = super::reference::rope_with_style(
            &x.host_f64()?,
            &rows,
            &table,
            self.heads,
            self.head_dim,
            self.style,
        );
        y.set_host_f64(&values)
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs, ref ps, ref cs]: [cudarc::driver::CudaView<'_, u8>; 3],
        [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
    ) -> Result<(), Error> {
        let dtype = self.x.dtype;
        let per_vector = 16 / dtype.size_in_bytes();
        let (vec_kernel, scalar_kernel) = match self.style {
            RopeStyle::NeoX => ("rope_vec", "rope_scalar"),
            RopeStyle::Interleaved => ("rope_vec_interleaved", "rope_scalar_interleaved"),
        };
        let (entry, cfg) = match vec_plan(self.tokens, self.heads, self.head_dim, per_vector) {
            Some((grid, block)) => {
                let entry = kernels::entry(&ROPE, vec_kernel, dtype)?;
                let cfg = LaunchConfig {
                    grid_dim: (grid_dim(entry, grid.0)?, grid.1, 1),
                    block_dim: (block.0, block.1, 1),
                    shared_mem_bytes: (self.head_dim * 4) as u32,
                };
                (entry, cfg)
            }
            None => {
                let entry = kernels::entry(&ROPE, scalar_kernel, dtype)?;
                let cfg = LaunchConfig {
                    grid_dim: (grid_dim(entry, self.tokens.min(1 << 24))?, 1, 1),
                    block_dim: (rope_threads(self.heads * (self.head_dim / 2)), 1, 1),
                    shared_mem_bytes: (self.head_dim * 4) as u32,
                };
                (entry, cfg)
            }
        };
        let (tokens, heads, head_dim, max_pos) = (
            self.tokens as i64,
            self.heads as i32,
            self.head_dim as i32,
            self.max_pos as i64,
        );
        let pos_kind: i32 = match self.positions.dtype {
            DType::Int64 => 0,
            DType::Int32 => 1,
            _ => 2,
        };
        // The table in x's dtype (16-bit x only: an f32 x's table is f32 either way).
        let table_x = i32::from(self.cos_sin_cache.dtype != DType::Float32);
        // SAFETY: rope_*(const T*, const void*, const void*, T*, long long, int, int, long long,
        // int, int); x and y hold tokens * heads * head_dim elements, positions tokens of the
        // dtype pos_kind names (int64 0, int32 1, uint32 2), the table max_pos * head_dim
        // elements of f32, or of T where table_x is 1 (each buffer matches the plan's spec);
        // head_dim * 4 <= 32 KiB of dynamic shared memory (under the 48 KiB default); the block is
        // within the launch bounds (512); rope_vec's grid and block follow its contract
        // (vec_plan).
        unsafe {
            launch!(dev, &ROPE, entry, cfg;
                xs, ps, cs, ys, &tokens, &heads, &head_dim, &max_pos, &pos_kind, &table_x)
        }
    }
}

/// The launch of `rope_vec_*`, `((tokens, head blocks), (threads per head, heads per block))`,
/// or `None` where it does not apply (`rope_scalar_*` then): half a head a whole number of
/// `per_vector`-element vectors, head_dim <= 2048 (the block, at most 512 threads, must hold one
/// table quad per thread), one block row per token within the grid's limits. All heads of a token
/// in one block up to 512 threads; at least `per_vector / 2` heads per block, so that the block
/// has head_dim / 4 threads (idle heads past the last only stage the table).
fn vec_plan(
    tokens: usize,
    heads: usize,
    head_dim: usize,
    per_vector: usize,
) -> Option<((usize, u32), (u32, u32))> {
    let half = head_dim / 2;
    if !half.is_multiple_of(per_vector) || head_dim > 2048 || tokens > i32::MAX as usize {
        return None;
    }
    let per_head = half / per_vector;
    let per_block = (512 / per_head).min(heads).max(per_vector / 2);
    let head_blocks = u32::try_from(heads.div_ceil(per_block))
        .ok()
        .filter(|&b| b <= 65_535)?;
    Some(((tokens, head_blocks), (per_head as u32, per_block as u32)))
}

/// Threads per block for `pairs` work items per token: whole warps, at most 512.
fn rope_threads(pairs: usize) -> u32 {
    pairs.div_ceil(32).clamp(1, 16) as u32 * 32
}

/// The rows of the `[cos | sin]` table `cache` (`[max_pos, head_dim]`) that `positions` use,
/// widened to f64 in order of first use, and each position renumbered to its row there. The CPU
/// path widens these rows only: a decode step uses one row of a 131072-row table, and widening
/// all of it took ~90 ms for a 17 kB call. `positions` are checked first ([`check_positions`]).
pub(crate) fn used_table_rows(
    cache: &crate::TensorRef<'_>,
    positions: &[i64],
    head_dim: usize,
) -> Result<(Vec<f64>, Vec<i64>), Error> {
    let mut first_use: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    let mut used = Vec::new();
    let renumbered = positions
        .iter()
        .map(|&p| {
            *first_use.entry(p).or_insert_with(|| {
                used.push(p as usize);
                (used.len() - 1) as i64
            })
        })
        .collect();
    Ok((cache.host_rows_f64(&used, head_dim)?, renumbered))
}

/// The positions of a `positions` input (int64, int32 or uint32) as i64, on the host.
pub(crate) fn host_positions(positions: &crate::TensorRef<'_>) -> Result<Vec<i64>, Error> {
    Ok(match positions.dtype() {
        DType::Int32 => positions
            .host_vec::<i32>()?
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::UInt32 => positions
            .host_vec::<u32>()?
            .into_iter()
            .map(i64::from)
            .collect(),
        _ => positions.host_vec::<i64>()?,
    })
}

/// Refuses positions outside `[0, max_pos)` (the CPU path; the GPU writes NaN rows instead).
pub(crate) fn check_positions(
    op: &'static str,
    positions: &[i64],
    max_pos: usize,
) -> Result<(), Error> {
    match positions
        .iter()
        .position(|&p| usize::try_from(p).map_or(true, |p| p >= max_pos))
    {
        None => Ok(()),
        Some(t) => Err(Error::InvalidParam {
            op,
            field: "positions",
            value: format!("{} (token {t})", positions[t]),
            reason: format!("positions must lie in [0, {max_pos}), the rows of cos_sin_cache"),
        }),
    }
}

/// Checks a `positions` spec: int64 `[tokens]`, one position per token (the fused ops that apply
/// RoPE).
pub(crate) fn check_positions_spec(
    op: &'static str,
    positions: &TensorSpec,
    tokens: usize,
) -> Result<(), Error> {
    check_positions_of(op, positions, tokens, &[DType::Int64])
}

/// Checks a `positions` spec: `[tokens]` of one of `dtypes`.
fn check_positions_of(
    op: &'static str,
    positions: &TensorSpec,
    tokens: usize,
    dtypes: &[DType],
) -> Result<(), Error> {
    if !dtypes.contains(&positions.dtype) {
        return Err(Error::InvalidDType {
            op,
            field: "positions",
            value: positions.dtype,
            supported: dtype_list(dtypes),
        });
    }
    if positions.shape != [tokens] {
        return Err(Error::InvalidShape {
            op,
            field: "positions",
            shape: positions.shape.clone(),
            reason: format!("must be [{tokens}], one position per token"),
        });
    }
    Ok(())
}

/// Checks a `cos_sin_cache` spec, float32 `[max_pos >= 1, head_dim]` with rows `[cos | sin]`,
/// and returns `max_pos` (the fused ops that apply RoPE).
pub(crate) fn cos_sin_cache_rows(
    op: &'static str,
    cos_sin_cache: &TensorSpec,
    head_dim: usize,
) -> Result<usize, Error> {
    table_rows(op, cos_sin_cache, head_dim, &[DType::Float32])
}

/// `dtypes` as a message lists them: `int64, int32 or uint32`.
fn dtype_list(dtypes: &[DType]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for d in dtypes {
        if !names.contains(&d.name()) {
            names.push(d.name());
        }
    }
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// Checks a `cos_sin_cache` spec, `[max_pos >= 1, head_dim]` of one of `dtypes` with rows
/// `[cos | sin]`, and returns `max_pos`.
fn table_rows(
    op: &'static str,
    cos_sin_cache: &TensorSpec,
    head_dim: usize,
    dtypes: &[DType],
) -> Result<usize, Error> {
    if !dtypes.contains(&cos_sin_cache.dtype) {
        return Err(Error::InvalidDType {
            op,
            field: "cos_sin_cache",
            value: cos_sin_cache.dtype,
            supported: dtype_list(dtypes),
        });
    }
    let max_pos = match cos_sin_cache.shape.as_slice() {
        &[rows, width] if width == head_dim && rows > 0 => rows,
        _ => {
            return Err(Error::InvalidShape {
                op,
                field: "cos_sin_cache",
                shape: cos_sin_cache.shape.clone(),
                reason: format!(
                    "must be [max_pos, {head_dim}] with max_pos >= 1: rows of [cos | sin]"
                ),
            });
        }
    };
    check_extents(op, "cos_sin_cache", cos_sin_cache)?;
    Ok(max_pos)
}

/// Positions for random inputs (int64): distinct where the table allows (the manifest's ideal),
/// spread over the table deterministically from `seed`.
pub(crate) fn random_positions(
    tokens: usize,
    max_pos: usize,
    seed: u64,
    device: &Device,
) -> Result<Tensor, Error> {
    random_positions_as(tokens, max_pos, seed, DType::Int64, device)
}

/// [`random_positions`] in `dtype` (int64, int32 or uint32).
pub(crate) fn random_positions_as(
    tokens: usize,
    max_pos: usize,
    seed: u64,
    dtype: DType,
    device: &Device,
) -> Result<Tensor, Error> {
    let start = (seed as usize).wrapping_mul(7919) % max_pos;
    let mut values = crate::alloc::host_vec::<f64>(tokens)?;
    values.extend((0..tokens).map(|t| ((start + t) % max_pos) as f64));
    Tensor::from_f64_rounded(&values, &TensorSpec::new([tokens], dtype), device)
}

/// A valid cos/sin table in `spec`'s dtype: row p holds cos and sin of p * 10000^(-2i/head_dim),
/// rounded once to the dtype.
pub(crate) fn rope_table(spec: &TensorSpec, device: &Device) -> Result<Tensor, Error> {
    let width = spec.shape[1];
    let half = width / 2;
    let inv_freq: Vec<f64> = (0..half)
        .map(|i| 10000f64.powf(-2.0 * i as f64 / width as f64))
        .collect();
    let n = spec.numel()?;
    let mut values = crate::alloc::host_vec::<f64>(n)?;
    values.resize(n, 0.0);
    for (p, row) in values.chunks_exact_mut(width).enumerate() {
        for (i, f) in inv_freq.iter().enumerate() {
            let (sin, cos) = (p as f64 * f).sin_cos();
            row[i] = cos;
            row[half + i] = sin;
        }
    }
    Tensor::from_f64_rounded(&values, spec, device)
}

impl FromWorkload for Rope {
    /// `x_shape` in the case dtype, `positions_shape` int64, `cos_sin_cache_shape` float32; the
    /// row's `is_neox_style` (the manifest's default, true, where it gives none).
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let neox = workload_bool::<Rope>(case, "is_neox_style")?;
        let style = if neox {
            RopeStyle::NeoX
        } else {
            RopeStyle::Interleaved
        };
        Ok(Rope::new(
            case.require_input_as(OP, "x", case.dtype)?,
            case.require_input_as(OP, "positions", DType::Int64)?,
            case.require_input_as(OP, "cos_sin_cache", DType::Float32)?,
            device,
        )?
        .with_style(style))
    }
}

impl BenchOp for Rope {
    fn roof(&self) -> RoofKey {
        Rope::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        Ok(vec![
            Tensor::random(&self.x, seed, &self.device)?,
            random_positions_as(
                self.tokens,
                self.max_pos,
                seed,
                self.positions.dtype,
                &self.device,
            )?,
            rope_table(&self.cos_sin_cache, &self.device)?,
        ])
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x, positions, cache] = exact_inputs::<Self, 3>(inputs)?;
        Ok(vec![self.forward(x, positions, cache)?])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![
                self.x.clone(),
                self.positions.clone(),
                self.cos_sin_cache.clone(),
            ],
            writes: vec![self.x.clone()],
        })
    }
}

/// NeoX RoPE of `x` `[tokens, heads, head_dim]` in one call: plans a [`Rope`] for the tensors'
/// specs on `x`'s device and runs it. `positions` is int64 `[tokens]`, `cos_sin_cache` float32
/// `[max_pos, head_dim]` with rows `[cos | sin]`. Build the plan once with [`Rope::new`] when the
/// same shapes run repeatedly.
///
/// ```
/// use tileops::{Device, Tensor, ops};
///
/// let cpu = Device::cpu();
/// // One token, one head of 2: a quarter turn (cos 0, sin 1) maps (x1, x2) to (-x2, x1).
/// let x = Tensor::from_f32_slice(&[1.0, 2.0], [1, 1, 2], &cpu)?;
/// let positions = Tensor::from_slice(&[0i64], [1], &cpu)?;
/// let table = Tensor::from_f32_slice(&[0.0, 1.0], [1, 2], &cpu)?;
/// let y = ops::rope(&x, &positions, &table)?;
/// assert_eq!(y.to_vec_f32()?, vec![-2.0, 1.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn rope(x: &Tensor, positions: &Tensor, cos_sin_cache: &Tensor) -> Result<Tensor, Error> {
    Rope::new(
        x.spec().clone(),
        positions.spec().clone(),
        cos_sin_cache.spec().clone(),
        x.device(),
    )?
    .forward(x, positions, cos_sin_cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_path_widens_only_the_table_rows_it_uses() {
        let cpu = Device::cpu();
        let cs = TensorSpec::new([9, 4], DType::Float32);
        let table = rope_table(&cs, &cpu).unwrap();
        let whole = table.to_vec_f64().unwrap();
        let (rows, renumbered) = used_table_rows(&table.as_tensor_ref(), &[5, 2, 5, 8], 4).unwrap();
        assert_eq!(renumbered, [0, 1, 0, 2]);
        let want: Vec<f64> = [5, 2, 8]
            .iter()
            .flat_map(|&r| whole[r * 4..(r + 1) * 4].to_vec())
            .collect();
        assert_eq!(rows, want);
        assert!(
            table.as_tensor_ref().host_rows_f64(&[9], 4).is_err(),
            "a row past the end"
        );
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype_style_and_index_type() {
        let cpu = Device::cpu();
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            for style in [RopeStyle::NeoX, RopeStyle::Interleaved] {
                for (tokens, heads, head_dim) in [(3, 2, 8), (1, 1, 2), (5, 3, 6), (2, 4, 128)] {
                    let (pos_dtype, table_dtype) = match tokens % 3 {
                        0 => (DType::Int64, DType::Float32),
                        1 => (DType::Int32, dtype),
                        _ => (DType::UInt32, dtype),
                    };
                    let xs = TensorSpec::new([tokens, heads, head_dim], dtype);
                    let cs = TensorSpec::new([7, head_dim], table_dtype);
                    let ps = TensorSpec::new([tokens], pos_dtype);
                    let op = Rope::new(xs.clone(), ps, cs.clone(), &cpu)
                        .unwrap()
                        .with_style(style);
                    let x = Tensor::random(&xs, 3, &cpu).unwrap();
                    let p = random_positions_as(tokens, 7, 5, pos_dtype, &cpu).unwrap();
                    let c = rope_table(&cs, &cpu).unwrap();
                    let y = op.forward(&x, &p, &c).unwrap();
                    let (want, _) = super::super::reference::rope_with_style(
                        &x.to_vec_f64().unwrap(),
                        &host_positions(&p.as_tensor_ref()).unwrap(),
                        &c.to_vec_f64().unwrap(),
                        heads,
                        head_dim,
                        style,
                    );
                    let want = Tensor::from_f64_rounded(&want, &xs, &cpu).unwrap();
                    let what = format!("{dtype} {style:?} {pos_dtype} {table_dtype}");
                    assert_eq!(y.to_bytes().unwrap(), want.to_bytes().unwrap(), "{what}");
                }
            }
        }
    }

    #[test]
    fn the_styles_pair_different_elements() {
        // One head of 4 at a quarter turn: NeoX rotates (x0, x2) and (x1, x3), interleaved (x0,
        // x1) and (x2, x3).
        let x = [1.0, 2.0, 3.0, 4.0];
        let table = [0.0, 0.0, 1.0, 1.0];
        let (neox, _) =
            super::super::reference::rope_with_style(&x, &[0], &table, 1, 4, RopeStyle::NeoX);
        let (inter, _) = super::super::reference::rope_with_style(
            &x,
            &[0],
            &table,
            1,
            4,
            RopeStyle::Interleaved,
        );
        assert_eq!(neox, [-3.0, -4.0, 1.0, 2.0]);
        assert_eq!(inter, [-2.0, 1.0, -4.0, 3.0]);
    }

    #[test]
    fn index_and_table_dtypes_outside_the_contract_are_refused_by_name() {
        let cpu = Device::cpu();
        let xs = TensorSpec::new([2, 1, 4], DType::BFloat16);
        let table = TensorSpec::new([3, 4], DType::Float32);
        let err = Rope::new(
            xs.clone(),
            TensorSpec::new([2], DType::Float32),
            table.clone(),
            &cpu,
        )
        .unwrap_err();
        assert!(err.to_string().contains("int64, int32 or uint32"), "{err}");
        // A table in another 16-bit dtype than x's.
        let err = Rope::new(
            xs,
            TensorSpec::new([2], DType::UInt32),
            TensorSpec::new([3, 4], DType::Float16),
            &cpu,
        )
        .unwrap_err();
        assert!(err.to_string().contains("float32 or bfloat16"), "{err}");
        // An f32 x takes an f32 table only, listed once.
        let err = Rope::new(
            TensorSpec::new([2, 1, 4], DType::Float32),
            TensorSpec::new([2], DType::Int64),
            TensorSpec::new([3, 4], DType::BFloat16),
            &cpu,
        )
        .unwrap_err();
        assert!(err.to_string().ends_with("supported: float32"), "{err}");
    }

    #[test]
    fn positions_out_of_the_table_are_refused_on_the_cpu() {
        let cpu = Device::cpu();
        let xs = TensorSpec::new([2, 1, 4], DType::Float32);
        let cs = TensorSpec::new([3, 4], DType::Float32);
        let op = Rope::new(
            xs.clone(),
            TensorSpec::new([2], DType::Int64),
            cs.clone(),
            &cpu,
        )
        .unwrap();
        let x = Tensor::random(&xs, 1, &cpu).unwrap();
        let c = rope_table(&cs, &cpu).unwrap();
        for bad in [[0i64, 3], [-1, 0]] {
            let p = Tensor::from_slice(&bad, [2], &cpu).unwrap();
            let err = op.forward(&x, &p, &c).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidParam {
                        field: "positions",
                        ..
                    }
                ),
                "{err:?}"
            );
        }
    }

    #[test]
    fn launch_shapes() {
        // Llama-3.1-8B q and k (bf16): one block per token; f32 q: 32 x 16 threads.
        assert_eq!(vec_plan(4096, 32, 128, 8), Some(((4096, 1), (8, 32))));
        assert_eq!(vec_plan(4096, 8, 128, 8), Some(((4096, 1), (8, 8))));
        assert_eq!(vec_plan(4096, 32, 128, 4), Some(((4096, 1), (16, 32))));
        // One head still gets head_dim / 4 threads (4 heads' worth, 3 idle).
        assert_eq!(vec_plan(3, 1, 16, 8), Some(((3, 1), (1, 4))));
        assert_eq!(vec_plan(2, 33, 256, 8), Some(((2, 2), (16, 32))));
        assert_eq!(vec_plan(2, 3, 2048, 4), Some(((2, 2), (256, 2))));
        // Scalar: an odd number of vectors per half, or head_dim past 2048.
        assert_eq!(vec_plan(2, 3, 24, 8), None);
        assert_eq!(vec_plan(3, 1, 8192, 8), None);
        assert_eq!(rope_threads(1), 32);
        assert_eq!(rope_threads(256), 256);
        assert_eq!(rope_threads(4096), 512);
        // The table is a valid rotation: cos^2 + sin^2 = 1.
        let t = rope_table(&TensorSpec::new([5, 8], DType::Float32), &Device::cpu())
            .unwrap()
            .to_vec_f32()
            .unwrap();
        for p in 0..5 {
            for i in 0..4 {
                let (c, s) = (t[p * 8 + i], t[p * 8 + 4 + i]);
                assert!((c * c + s * s - 1.0).abs() < 1e-6);
            }
        }
    }
}
