//! `fp8_quant`: dynamic float8_e4m3fn quantization with per-token or per-group f32 scales.

use cudarc::driver::LaunchConfig;

use crate::device::CudaDevice;
use crate::kernels::{self, FP8_QUANT};
use crate::ops::backend::{self, Backends, exact_inputs, workload_param};
use crate::ops::launch::{grid_dim, launch};
use crate::ops::{check_extents, check_float_dtype, check_input};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorSpec};

const OP: &str = Fp8Quant::NAME;

/// Dynamic fp8 quantization of `x` `[M, K]` (float32, float16 or bfloat16): each group of
/// `group_size` consecutive elements of a row (the whole row when `group_size` is 0 or `K`) gets a
/// float32 scale `max(amax / 448, 1 / (448 * 512))` and codes `y = saturate_e4m3(x * (1 / scale))`
/// (round to nearest even, saturating at ±448). Outputs: `y` `[M, K]` float8_e4m3fn and `scales`
/// `[M, K / group]` float32; `y * scale` dequantizes.
///
/// NaN follows PyTorch (`torch.amax` propagates it; see tileops/docs/fp8.md): a group holding a NaN gets scale NaN and every code of the group NaN (0x7F), so the
/// NaN stays visible after dequantization instead of hiding behind a scale computed from the other
/// values (`[NaN, 1, 2, 3]` gives scale NaN, not 3 / 448). Other groups are unaffected. An
/// infinity (in a group without NaN) makes its group's scale infinite: its finite codes 0, its own
/// code NaN (`inf * 0`). The CPU path and the kernels agree code for code (see
/// `tileops::ops::reference::fp8_quant`).
///
/// ```
/// use tileops::ops::Fp8Quant;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let spec = TensorSpec::new([2, 4], DType::Float32);
/// let quant = Fp8Quant::new(spec, 0, &device)?;
/// let x = Tensor::from_f32_slice(&[1.0, -2.0, 0.5, 0.0, 3.0, 3.0, 3.0, 3.0], [2, 4], &device)?;
/// let (y, scales) = quant.forward(&x)?;
/// assert_eq!(scales.to_vec_f32()?, vec![2.0 / 448.0, 3.0 / 448.0]);
/// assert_eq!(y.to_vec_f32()?, vec![224.0, -448.0, 112.0, 0.0, 448.0, 448.0, 448.0, 448.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("fp8_quant")]
#[derive(Debug, Clone)]
pub struct Fp8Quant {
    /// `[M, K]`.
    x: TensorSpec,
    /// 0 or K: per token; else the group length (divides K).
    group_size: usize,
    device: Device,
    /// Elements per group (K for per-token) and number of groups.
    group: usize,
    groups: usize,
    scales: TensorSpec,
}

/// How a quantization is launched: groups in registers, or one block per group looping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuantPlan {
    /// `fp8_quant_rows_*`: `threads_per_group` (a power of two <= 512) x `groups_per_block`.
    Rows {
        threads_per_group: u32,
        groups_per_block: u32,
    },
    /// `fp8_quant_loop_*`: 1024 threads per group.
    Loop,
}

/// 16-byte input vectors each thread of `fp8_quant_rows_*` holds (the kernels' CH).
const VECTORS_PER_THREAD: usize = 8;

/// Elements per 16-byte vector of `dtype`.
fn vector_width(dtype: DType) -> usize {
    if dtype == DType::Float32 { 4 } else { 8 }
}

/// Threads per block of `fp8_quant_rows_*` (groups per block = this / threads per group, at
/// least one group).
const ROWS_BLOCK: usize = 256;

fn quant_plan(group: usize, dtype: DType) -> QuantPlan {
    let vectors = group.div_ceil(16) * (16 / vector_width(dtype));
    if vectors > 512 * VECTORS_PER_THREAD {
        return QuantPlan::Loop;
    }
    // As few threads as hold the group: every thread's fixed work (the group max, the scale and
    // its reciprocal) is then shared by up to 8 vectors. At least 2 threads for 2-byte types and
    // 4 for f32: 2 or 4 lanes swap codes to make 16-byte stores.
    let least = if dtype == DType::Float32 { 4 } else { 2 };
    let threads = vectors
        .div_ceil(VECTORS_PER_THREAD)
        .next_power_of_two()
        .max(least)
        .min(512);
    QuantPlan::Rows {
        threads_per_group: threads as u32,
        groups_per_block: (ROWS_BLOCK / threads).max(1) as u32,
    }
}

/// Groups per block of `fp8_quant_rows_*` for a call of `groups` groups: the plan's, halved while
/// the grid would give fewer than two blocks per SM and the block keeps at least 64 threads. A
/// small call (decode: a few tokens) is then spread over more SMs, whose busiest one sets the
/// time.
fn small_call_groups_per_block(groups: usize, threads: u32, per_block: u32, sms: u32) -> u32 {
    let mut g = per_block;
    while g > 1 && threads * g > 64 && groups.div_ceil(g as usize) < 2 * sms.max(1) as usize {
        g /= 2;
    }
    g
}

impl Fp8Quant {
    /// The roof an optimal quantizer is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a quantization of `x` `[M, K]` with groups of `group_size` (0 or `K`: one scale per
    /// row).
    ///
    /// Errors when `x` is not rank 2, empty, or not float32/float16/bfloat16, or when
    /// `group_size` does not divide `K`.
    pub fn new(x: TensorSpec, group_size: usize, device: &Device) -> Result<Fp8Quant, Error> {
        check_float_dtype(OP, "x", &x)?;
        let &[m, k] = x.shape.as_slice() else {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: "must be rank 2: [M, K]".to_owned(),
            });
        };
        check_extents(OP, "x", &x)?;
        if group_size != 0 && !k.is_multiple_of(group_size) {
            return Err(Error::InvalidParam {
                op: OP,
                field: "group_size",
                value: group_size.to_string(),
                reason: format!("must be 0 (per token) or divide K = {k}"),
            });
        }
        let group = if group_size == 0 { k } else { group_size };
        if i32::try_from(group).is_err() {
            return Err(Error::InvalidParam {
                op: OP,
                field: "group_size",
                value: group.to_string(),
                reason: format!("groups of at most {} elements are supported", i32::MAX),
            });
        }
        let scales = TensorSpec::new([m, k / group], DType::Float32);
        Ok(Fp8Quant {
            x,
            group_size,
            device: device.clone(),
            group,
            groups: m * (k / group),
            scales,
        })
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The group size as given (0: per token).
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// The spec of `y`: `x`'s shape, float8_e4m3fn.
    pub fn y_spec(&self) -> TensorSpec {
        TensorSpec::new(self.x.shape.clone(), DType::Float8E4M3Fn)
    }

    /// The spec of `scales`: `[M, K / group]`, float32.
    pub fn scales_spec(&self) -> &TensorSpec {
        &self.scales
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Quantizes `x` (matching the plan) into new `(y, scales)` tensors.
    pub fn forward<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
    ) -> Result<(Tensor, Tensor), Error> {
        let x = x.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        let mut y = Tensor::empty(&self.y_spec(), &self.device)?;
        let mut scales = Tensor::empty(&self.scales, &self.device)?;
        self.forward_into(x, &mut y, &mut scales)?;
        Ok((y, scales))
    }

    /// Quantizes `x` into `y` (`y_spec()`) and `scales` (`scales_spec()`). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
        scales: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let y = y.into();
        let scales = scales.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "y", &y, &self.y_spec(), &self.device)?;
        check_input(OP, "scales", &scales, &self.scales, &self.device)?;
        backend::forward(self, [x], [y, scales])
    }
}

impl Backends<1, 2> for Fp8Quant {
    fn device(&self) -> &Device {
        &self.device
    }

    /// Not `cpu_f64`: the output is fp8 codes and f32 scales, computed in f32 as the kernels do.
    fn cpu(
        &self,
        [x]: [crate::TensorRef<'_>; 1],
        [mut y, mut scales]: [crate::TensorMut<'_>; 2],
    ) -> Result<(), Error> {
        // Exact: every input dtype widens to f32 without rounding.
        let values: Vec<f32> = x.host_f64()?.into_iter().map(|v| v as f32).collect();
        let (codes, s) = super::reference::fp8_quant(&values, self.group);
        store_fp8(OP, codes, &s, &mut y, &mut scales)
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs]: [cudarc::driver::CudaView<'_, u8>; 1],
        [ref mut ys, ref mut ss]: [cudarc::driver::CudaViewMut<'_, u8>; 2],
    ) -> Result<(), Error> {
        let dtype = self.x.dtype;
        let (entry, blocks, block) = match quant_plan(self.group, dtype) {
            QuantPlan::Rows {
                threads_per_group,
                groups_per_block,
            } => {
                let gpb = small_call_groups_per_block(
                    self.groups,
                    threads_per_group,
                    groups_per_block,
                    dev.sm_count,
                );
                (
                    kernels::entry(&FP8_QUANT, "fp8_quant_rows", dtype)?,
                    self.groups.div_ceil(gpb as usize),
                    (threads_per_group, gpb),
                )
            }
            QuantPlan::Loop => (
                kernels::entry(&FP8_QUANT, "fp8_quant_loop", dtype)?,
                self.groups.min(1 << 20),
                (1024, 1),
            ),
        };
        let cfg = LaunchConfig {
            grid_dim: (grid_dim(entry, blocks)?, 1, 1),
            block_dim: (block.0, block.1, 1),
            shared_mem_bytes: 0,
        };
        let (groups, group) = (self.groups as i64, self.group as i32);
        // SAFETY: fp8_quant_*(const T*, unsigned char*, float*, long long, int); x and y hold
        // groups * group elements, scales groups floats (each buffer matches the plan's spec);
        // the block shape follows the kernels' contract (power-of-two threads per group, at
        // least 2 for 2-byte types and 4 for f32, whole warps per block, <= 512 threads and at most 8 groups
        // when a group has 32 threads or more; or 1024 x 1 for the loop kernel).
        unsafe { launch!(dev, &FP8_QUANT, entry, cfg; xs, ys, ss, &groups, &group) }
    }
}

/// Stores fp8 `codes` into the host tensor `y` (float8_e4m3fn) and `scales` into `scales_out`
/// (float32): the CPU tail of every quantizing op.
pub(crate) fn store_fp8(
    op: &'static str,
    codes: Vec<u8>,
    scales: &[f32],
    y: &mut crate::TensorMut<'_>,
    scales_out: &mut crate::TensorMut<'_>,
) -> Result<(), Error> {
    let host = y
        .host_bytes_mut()
        .ok_or_else(|| Error::internal(format!("{op}: a CPU tensor without host data")))?;
    if host.len() != codes.len() {
        return Err(Error::internal(format!(
            "{op}: {} codes for a tensor of {} bytes",
            codes.len(),
            host.len()
        )));
    }
    host.copy_from_slice(&codes);
    let scales: Vec<f64> = scales.iter().copied().map(f64::from).collect();
    scales_out.set_host_f64(&scales)
}

impl FromWorkload for Fp8Quant {
    /// `x_shape` in the case dtype; `group_size` from the row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = case.require_input(OP, "x")?;
        let value = workload_param::<Fp8Quant>(case, "group_size")?;
        let group_size = value
            .as_int()
            .and_then(|g| usize::try_from(g).ok())
            .ok_or_else(|| Error::InvalidParam {
                op: OP,
                field: "group_size",
                value: format!("{value:?}"),
                reason: "must be a non-negative integer".to_owned(),
            })?;
        Fp8Quant::new(x, group_size, device)
    }
}

impl BenchOp for Fp8Quant {
    fn roof(&self) -> RoofKey {
        Fp8Quant::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        backend::random_inputs([&self.x], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        backend::placeholder_inputs([&self.x], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x] = exact_inputs::<Self, 1>(inputs)?;
        let (y, scales) = self.forward(x)?;
        Ok(vec![y, scales])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.x.clone()],
            writes: vec![self.y_spec(), self.scales.clone()],
        })
    }
}

/// Dynamic float8_e4m3fn quantization of `x` `[M, K]` in one call, groups of `group_size`
/// elements of a row (0: one scale per row): plans an [`Fp8Quant`] for `x`'s spec on its device
/// and runs it. Returns `(y, scales)`: the codes `[M, K]` and float32 scales `[M, K / group]`,
/// with `y * scale` dequantizing.
///
/// ```
/// use tileops::{Device, Tensor, ops};
///
/// let cpu = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, -2.0, 0.5, 0.0], [1, 4], &cpu)?;
/// let (y, scales) = ops::fp8_quant(&x, 2)?;
/// assert_eq!(scales.to_vec_f32()?, vec![2.0 / 448.0, 0.5 / 448.0]);
/// assert_eq!(y.to_vec_f32()?, vec![224.0, -448.0, 448.0, 0.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn fp8_quant(x: &Tensor, group_size: usize) -> Result<(Tensor, Tensor), Error> {
    Fp8Quant::new(x.spec().clone(), group_size, x.device())?.forward(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::quantization::reference::{fp8_e4m3_value, fp8_quant};

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            for (shape, group_size) in [
                ([3, 7], 0),
                ([4, 64], 16),
                ([2, 48], 48),
                ([1, 1], 0),
                ([5, 9], 3),
            ] {
                let xs = TensorSpec::new(shape, dtype);
                let op = Fp8Quant::new(xs.clone(), group_size, &cpu).unwrap();
                let x = Tensor::random(&xs, 9, &cpu).unwrap();
                let (y, s) = op.forward(&x).unwrap();
                let values: Vec<f32> = x.to_vec_f32().unwrap();
                let group = if group_size == 0 {
                    shape[1]
                } else {
                    group_size
                };
                let (codes, scales) = fp8_quant(&values, group);
                assert_eq!(y.to_bytes().unwrap(), codes);
                assert_eq!(s.to_vec_f32().unwrap(), scales);
                assert_eq!(s.shape(), &[shape[0], shape[1] / group]);
                // y decodes through the tensor's own fp8 decoder to the reference's values.
                let decoded = y.to_vec_f64().unwrap();
                for (d, &c) in decoded.iter().zip(&codes) {
                    assert!(*d == fp8_e4m3_value(c) || d.is_nan());
                }
            }
        }
    }

    #[test]
    fn plans_pick_registers_or_the_loop() {
        assert_eq!(
            quant_plan(7168, DType::BFloat16),
            QuantPlan::Rows {
                threads_per_group: 128,
                groups_per_block: 2
            }
        );
        assert_eq!(
            quant_plan(128, DType::BFloat16),
            QuantPlan::Rows {
                threads_per_group: 2,
                groups_per_block: 128
            }
        );
        assert_eq!(
            quant_plan(7, DType::Float32),
            QuantPlan::Rows {
                threads_per_group: 4,
                groups_per_block: 64
            }
        );
        assert_eq!(
            quant_plan(7168, DType::Float32),
            QuantPlan::Rows {
                threads_per_group: 256,
                groups_per_block: 1
            }
        );
        assert_eq!(quant_plan(1 << 20, DType::BFloat16), QuantPlan::Loop);
        // ds-v3 group-128 quantization: prefill keeps 256-thread blocks, decode (128 tokens)
        // spreads over 224 blocks of 64 threads.
        assert_eq!(small_call_groups_per_block(4096 * 56, 2, 128, 132), 128);
        assert_eq!(small_call_groups_per_block(128 * 56, 2, 128, 132), 32);
        assert_eq!(small_call_groups_per_block(1, 512, 1, 132), 1);
        assert_eq!(small_call_groups_per_block(3, 32, 8, 132), 2);
        for dtype in [DType::Float32, DType::BFloat16] {
            for group in (1usize..40_000)
                .step_by(331)
                .chain([16, 32, 4096, 16384, 32768, 32769])
            {
                let vectors = group.div_ceil(16) * (16 / vector_width(dtype));
                match quant_plan(group, dtype) {
                    QuantPlan::Rows {
                        threads_per_group: t,
                        groups_per_block: g,
                    } => {
                        assert!(vectors <= t as usize * VECTORS_PER_THREAD, "{group}");
                        assert!(t >= if dtype == DType::Float32 { 4 } else { 2 }, "{group}");
                        assert!(t.is_power_of_two() && t <= 512);
                        assert!((t * g).is_multiple_of(32) && t * g <= 512);
                        assert!(t < 32 || g <= 8);
                    }
                    QuantPlan::Loop => assert!(vectors > 512 * VECTORS_PER_THREAD),
                }
            }
        }
    }
}
