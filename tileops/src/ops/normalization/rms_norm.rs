//! `rms_norm`: `x / sqrt(mean(x^2) + eps) * weight` over the last dimension.

use super::rows::{
    check_eps, check_row_len, check_row_shape, check_same_dtype, last_dim, row_launch,
    row_norm_accessors,
};
use crate::device::CudaDevice;
use crate::kernels::RMS_NORM;
use crate::ops::backend::{self, Backends, cpu_f64, exact_inputs, workload_f64};
use crate::ops::launch::launch;
use crate::ops::{check_extents, check_float_dtype, check_input};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

const OP: &str = RmsNorm::NAME;

/// RMSNorm over the last dimension with a weight of shape `[N]`, as
/// `torch.nn.functional.rms_norm(x, [N], weight, eps)`, in float32, float16 or bfloat16
/// (weight in the same dtype), accumulating in f32 on the GPU (f64 on the CPU).
///
/// ```
/// use tileops::ops::RmsNorm;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let x_spec = TensorSpec::new([8, 4096], DType::BFloat16);
/// let w_spec = TensorSpec::new([4096], DType::BFloat16);
/// let norm = RmsNorm::new(x_spec.clone(), w_spec.clone(), 1e-6, &device)?;
/// let x = Tensor::random(&x_spec, 1, &device)?;
/// let weight = Tensor::full(&w_spec, 1.0, &device)?;
/// let y = norm.forward(&x, &weight)?.to_vec_f32()?;
/// let mean_square = y[..4096].iter().map(|v| v * v).sum::<f32>() / 4096.0;
/// assert!((mean_square - 1.0).abs() < 0.02);
///
/// // The weight must be [N] for N the last dim of x.
/// assert!(RmsNorm::new(x_spec, TensorSpec::new([8], DType::BFloat16), 1e-6, &device).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("rms_norm")]
#[derive(Debug, Clone)]
pub struct RmsNorm {
    /// The input the op is planned for.
    x: TensorSpec,
    /// The weight: `[N]`, same dtype as `x`.
    weight: TensorSpec,
    /// Added to the mean square before the square root.
    eps: f64,
    device: Device,
    /// `x` viewed as `rows` rows of `n`.
    rows: usize,
    n: usize,
}

impl RmsNorm {
    /// The roof an optimal RMSNorm is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans an RMSNorm of inputs like `x` over their last dim, with a weight like `weight`.
    ///
    /// Errors when `x` has rank 0 or no elements, when a dtype is not float32, float16 or
    /// bfloat16 or the two differ, when `weight` is not `[N]` for `N` the last dim of `x`, or
    /// when `eps` is negative or not finite.
    pub fn new(
        x: TensorSpec,
        weight: TensorSpec,
        eps: f64,
        device: &Device,
    ) -> Result<RmsNorm, Error> {
        check_float_dtype(OP, "x", &x)?;
        check_float_dtype(OP, "weight", &weight)?;
        // The checks of check_norm_input and check_row_param, in rms_norm's own order.
        check_same_dtype(OP, "weight", &weight, &x)?;
        let n = last_dim(OP, &x)?;
        check_extents(OP, "x", &x)?;
        check_row_shape(OP, "weight", &weight, &x, n)?;
        check_eps(OP, eps)?;
        check_row_len(OP, &x, n)?;
        let rows = x.numel()? / n;
        Ok(RmsNorm {
            x,
            weight,
            eps,
            device: device.clone(),
            rows,
            n,
        })
    }

    row_norm_accessors!("The input spec the op is planned for.");

    /// RMSNorm of `x` with `weight`, into a new tensor; both must match the plan.
    pub fn forward<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
    ) -> Result<Tensor, Error> {
        let x = x.into();
        let weight = weight.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        let mut y = Tensor::empty(&self.x, &self.device)?;
        self.forward_into(x, weight, &mut y)?;
        Ok(y)
    }

    /// RMSNorm of `x` with `weight`, written into `y` (same spec and device as `x`).
    /// Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let weight = weight.into();
        let y = y.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        check_input(OP, "y", &y, &self.x, &self.device)?;
        backend::forward(self, [x, weight], [y])
    }
}

impl Backends<2, 1> for RmsNorm {
    fn device(&self) -> &Device {
        &self.device
    }

    fn cpu(
        &self,
        [x, weight]: [crate::TensorRef<'_>; 2],
        [mut y]: [crate::TensorMut<'_>; 1],
    ) -> Result<(), Error> {
        cpu_f64([x, weight], &mut y, |[x, w]| {
            super::reference::rms_norm(&x, &w, self.n, self.eps)
        })
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs, ref ws]: [cudarc::driver::CudaView<'_, u8>; 2],
        [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
    ) -> Result<(), Error> {
        let (entry, cfg) = row_launch(&RMS_NORM, OP, self.x.dtype, self.rows, self.n, true, 1024)?;
        let (rows, n, eps) = (self.rows as i64, self.n as i32, self.eps as f32);
        // SAFETY: rms_norm_*(const T*, const T*, T*, long long, int, float); x and y hold
        // rows * n elements, the weight n; the block shape is within the launch bounds.
        unsafe { launch!(dev, &RMS_NORM, entry, cfg; xs, ws, ys, &rows, &n, &eps) }
    }
}

impl FromWorkload for RmsNorm {
    /// `x_shape` and the case dtype; the weight from `weight_shape`, else `normalized_shape`,
    /// else `[N]` for N the last dim of x; `eps` from the row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = case.require_input(OP, "x")?;
        let weight = match (
            case.input_spec("weight"),
            case.workload.param("normalized_shape"),
        ) {
            (Some(weight), _) => weight,
            (None, Some(value)) => {
                let dims = value
                    .as_int_list()
                    .and_then(|dims| {
                        dims.into_iter()
                            .map(|d| usize::try_from(d).ok())
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| Error::InvalidParam {
                        op: OP,
                        field: "normalized_shape",
                        value: format!("{value:?}"),
                        reason: "must be a list of sizes".to_owned(),
                    })?;
                TensorSpec::new(dims, x.dtype)
            }
            (None, None) => TensorSpec::new(
                x.shape.last().copied().into_iter().collect::<Vec<_>>(),
                x.dtype,
            ),
        };
        let eps = workload_f64::<RmsNorm>(case, "eps")?;
        RmsNorm::new(x, weight, eps, device)
    }
}

impl BenchOp for RmsNorm {
    fn roof(&self) -> RoofKey {
        RmsNorm::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        backend::random_inputs([&self.x, &self.weight], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        backend::placeholder_inputs([&self.x, &self.weight], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x, weight] = exact_inputs::<Self, 2>(inputs)?;
        Ok(vec![self.forward(x, weight)?])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.x.clone(), self.weight.clone()],
            writes: vec![self.x.clone()],
        })
    }
}

/// RMSNorm of `x` over its last dim with `weight` (`[N]`), in one call: plans a [`RmsNorm`] for
/// the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[3.0, 4.0], [1, 2], &device)?;
/// let weight = Tensor::full(&TensorSpec::new([2], DType::Float32), 1.0, &device)?;
/// let y = tileops::ops::rms_norm(&x, &weight, 0.0)?.to_vec_f32()?;
/// let r = 12.5f32.sqrt();
/// assert_eq!(y, vec![3.0 / r, 4.0 / r]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor, Error> {
    RmsNorm::new(x.spec().clone(), weight.spec().clone(), eps, x.device())?.forward(x, weight)
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
            for shape in [vec![3, 7], vec![2, 2, 64], vec![1]] {
                let n = *shape.last().unwrap();
                let xs = TensorSpec::new(shape.clone(), dtype);
                let ws = TensorSpec::new([n], dtype);
                let op = RmsNorm::new(xs.clone(), ws.clone(), 1e-5, &cpu).unwrap();
                let x = Tensor::random(&xs, 3, &cpu).unwrap();
                let w = Tensor::random(&ws, 4, &cpu).unwrap();
                let y = op.forward(&x, &w).unwrap();
                let expect = crate::ops::reference::rms_norm(
                    &x.to_vec_f64().unwrap(),
                    &w.to_vec_f64().unwrap(),
                    n,
                    1e-5,
                );
                assert_rounds_to(&y, &expect, format_args!("{dtype} {shape:?}"));
            }
        }
    }

    #[test]
    fn weight_must_match_x() {
        let cpu = Device::cpu();
        let x = TensorSpec::new([2, 8], DType::Float16);
        assert!(matches!(
            RmsNorm::new(x.clone(), TensorSpec::new([8], DType::Float32), 1e-6, &cpu),
            Err(Error::InvalidDType {
                field: "weight",
                ..
            })
        ));
        assert!(matches!(
            RmsNorm::new(
                x.clone(),
                TensorSpec::new([2, 8], DType::Float16),
                1e-6,
                &cpu
            ),
            Err(Error::InvalidShape {
                field: "weight",
                ..
            })
        ));
        assert!(matches!(
            RmsNorm::new(x, TensorSpec::new([8], DType::Float16), -1.0, &cpu),
            Err(Error::InvalidParam { field: "eps", .. })
        ));
    }
}
