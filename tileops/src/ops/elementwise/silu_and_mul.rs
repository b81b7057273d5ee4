//! `silu_and_mul`: the SwiGLU gate, `silu(x[..., :N]) * x[..., N:]` on `x` of last dim `2N`.

use cudarc::driver::LaunchConfig;

use super::reference;
use crate::device::CudaDevice;
use crate::kernels::{self, SILU_AND_MUL};
use crate::ops::backend::{self, Backends, cpu_f64, unary_bench_op};
use crate::ops::launch::{self, launch};
use crate::ops::{check_extents, check_float_dtype, check_input};
use crate::registry::{FromWorkload, ManifestOp, RoofKey, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

const OP: &str = SiluAndMul::NAME;
/// Threads per block (the kernels' `__launch_bounds__`).
const THREADS: u32 = 256;
/// 16-byte vectors per thread and iteration of the vector kernel (its `kUnroll`).
const UNROLL: usize = 4;
/// The most blocks along y (rows); the kernels loop over the rest.
const MAX_ROW_BLOCKS: usize = 65535;

/// SwiGLU as vLLM's `silu_and_mul`: `x` is `[..., 2N]` (gate then up along the last dim), the
/// output `[..., N]` is `silu(gate) * up`, in float32, float16 or bfloat16, computed in f32 on the
/// GPU (f64 on the CPU) and rounded once.
///
/// ```
/// use tileops::ops::SiluAndMul;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let op = SiluAndMul::new(TensorSpec::new([1, 4], DType::Float32), &device)?;
/// assert_eq!(op.y().shape, vec![1, 2]);
/// let x = Tensor::from_f32_slice(&[0.0, 30.0, 5.0, 2.0], [1, 4], &device)?;
/// assert_eq!(op.forward(&x)?.to_vec_f32()?, vec![0.0, 60.0]);
/// // The last dim must be even.
/// assert!(SiluAndMul::new(TensorSpec::new([1, 5], DType::Float32), &device).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("silu_and_mul")]
#[derive(Debug, Clone)]
pub struct SiluAndMul {
    /// The input the op is planned for: `[..., 2N]`.
    x: TensorSpec,
    /// The output: `[..., N]`.
    y: TensorSpec,
    device: Device,
    /// `x` viewed as `rows` rows of `2n`.
    rows: usize,
    n: usize,
}

impl SiluAndMul {
    /// The roof an optimal SwiGLU is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a SwiGLU of inputs like `x`.
    ///
    /// Errors when `x` has rank 0 or an empty dimension, when its last dim is odd, or when its
    /// dtype is not float32, float16 or bfloat16.
    pub fn new(x: TensorSpec, device: &Device) -> Result<SiluAndMul, Error> {
        check_float_dtype(OP, "x", &x)?;
        let Some(&last) = x.shape.last() else {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: Vec::new(),
                reason: format!("{OP} needs a last dimension [gate | up] to split"),
            });
        };
        check_extents(OP, "x", &x)?;
        if last % 2 != 0 {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: format!("the last dim ({last}) must be even: [gate | up], N each"),
            });
        }
        let n = last / 2;
        if i32::try_from(last).is_err() {
            return Err(Error::InvalidShape {
                op: OP,
                field: "x",
                shape: x.shape.clone(),
                reason: format!(
                    "rows of {last} elements; at most {} are supported",
                    i32::MAX
                ),
            });
        }
        let mut y_shape = x.shape.clone();
        if let Some(d) = y_shape.last_mut() {
            *d = n;
        }
        Ok(SiluAndMul {
            y: TensorSpec::new(y_shape, x.dtype),
            rows: x.numel()? / last,
            n,
            x,
            device: device.clone(),
        })
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The output spec: `x`'s shape with the last dim halved.
    pub fn y(&self) -> &TensorSpec {
        &self.y
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// SwiGLU of `x` (which must match the plan), into a new tensor.
    pub fn forward<'t>(&self, x: impl Into<crate::TensorRef<'t>>) -> Result<Tensor, Error> {
        let x = x.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        let mut y = Tensor::empty(&self.y, &self.device)?;
        self.forward_into(x, &mut y)?;
        Ok(y)
    }

    /// SwiGLU of `x`, written into `y` (of spec [`SiluAndMul::y`], on the plan's device).
    /// Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let y = y.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "y", &y, &self.y, &self.device)?;
        backend::forward(self, [x], [y])
    }
}

impl Backends<1, 1> for SiluAndMul {
    fn device(&self) -> &Device {
        &self.device
    }

    fn cpu(
        &self,
        [x]: [crate::TensorRef<'_>; 1],
        [mut y]: [crate::TensorMut<'_>; 1],
    ) -> Result<(), Error> {
        cpu_f64([x], &mut y, |[x]| reference::silu_and_mul(&x, self.n))
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs]: [cudarc::driver::CudaView<'_, u8>; 1],
        [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
    ) -> Result<(), Error> {
        let dtype = self.x.dtype;
        let per_vector = 16 / dtype.size_in_bytes();
        // Whole vectors per half row: every gate, up and output row then starts 16-byte aligned.
        let (entry, columns) = if self.n.is_multiple_of(per_vector) {
            (
                kernels::entry(&SILU_AND_MUL, &format!("{OP}_vec"), dtype)?,
                (self.n / per_vector).div_ceil(THREADS as usize * UNROLL),
            )
        } else {
            (
                kernels::entry(&SILU_AND_MUL, &format!("{OP}_scalar"), dtype)?,
                self.n.div_ceil(THREADS as usize),
            )
        };
        let cfg = LaunchConfig {
            grid_dim: (
                launch::grid_dim(entry, columns.max(1))?,
                launch::grid_dim(entry, self.rows.min(MAX_ROW_BLOCKS))?,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (rows, n) = (self.rows as i64, self.n as i32);
        // SAFETY: silu_and_mul_*(const T*, T*, long long rows, int n); x holds rows * 2n
        // elements, y rows * n, both 16-byte aligned; the vector entry only when n is a whole
        // number of vectors; 256 threads is the launch bound.
        unsafe { launch!(dev, &SILU_AND_MUL, entry, cfg; xs, ys, &rows, &n) }
    }
}

impl FromWorkload for SiluAndMul {
    /// `x_shape` and the case dtype.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = case.require_input(OP, "x")?;
        SiluAndMul::new(x, device)
    }
}

unary_bench_op!(SiluAndMul, |op| op.y);

/// SwiGLU of `x` (`[..., 2N]`: gate then up) in one call, `silu(gate) * up` of shape `[..., N]`:
/// plans a [`SiluAndMul`] for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 30.0, 5.0, 2.0], [1, 4], &device)?;
/// assert_eq!(tileops::ops::silu_and_mul(&x)?.to_vec_f32()?, vec![0.0, 60.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn silu_and_mul(x: &Tensor) -> Result<Tensor, Error> {
    SiluAndMul::new(x.spec().clone(), x.device())?.forward(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::backend::assert_rounds_to;

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            for shape in [vec![2], vec![3, 14], vec![2, 2, 64], vec![1, 2]] {
                let spec = TensorSpec::new(shape.clone(), dtype);
                let op = SiluAndMul::new(spec.clone(), &cpu).unwrap();
                let mut values = Tensor::random(&spec, 5, &cpu)
                    .unwrap()
                    .to_vec_f64()
                    .unwrap();
                values[0] = f64::NAN;
                if values.len() > 3 {
                    values[1] = f64::NEG_INFINITY;
                    values[2] = f64::INFINITY;
                }
                let x = Tensor::from_f64_rounded(&values, &spec, &cpu).unwrap();
                let y = op.forward(&x).unwrap();
                let n = shape[shape.len() - 1] / 2;
                let want = reference::silu_and_mul(&x.to_vec_f64().unwrap(), n);
                assert_eq!(y.spec(), op.y());
                assert_rounds_to(&y, &want, format_args!("{dtype} {shape:?}"));
            }
        }
    }

    #[test]
    fn roofline_follows_the_manifest() {
        let op = SiluAndMul::new(
            TensorSpec::new([2048, 28672], DType::BFloat16),
            &Device::cpu(),
        )
        .unwrap();
        let r = op.eval_roofline().unwrap();
        let (m, n) = (2048u64, 14336u64);
        assert_eq!((r.flops, r.bytes), (6 * m * n, 3 * m * n * 2));
    }
}
