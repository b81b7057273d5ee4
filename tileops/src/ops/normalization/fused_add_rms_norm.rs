//! `fused_add_rms_norm`: `residual_out = x + residual`, then `y = rms_norm(residual_out) * weight`
//! over the last dimension, in one pass (vLLM's `fused_add_rms_norm`).

use super::reference;
use super::rows::{
    check_norm_input, check_row_param, check_same_dtype, row_launch, row_norm_accessors,
    workload_input,
};
use crate::device::CudaDevice;
use crate::kernels::FUSED_ADD_RMS_NORM;
use crate::ops::backend::{self, Backends, exact_inputs, workload_f64};
use crate::ops::check_input;
use crate::ops::launch::launch;
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

const OP: &str = FusedAddRmsNorm::NAME;

/// Residual add fused with RMSNorm over the last dimension: `residual_out = x + residual`
/// (rounded to the dtype, as the unfused add would store it) and
/// `y = residual_out / sqrt(mean(residual_out^2) + eps) * weight`, in float32, float16 or
/// bfloat16 (every tensor in the same dtype), accumulating in f32 on the GPU (f64 on the CPU).
/// Both outputs are written; x and residual are read once.
///
/// ```
/// use tileops::ops::FusedAddRmsNorm;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let spec = TensorSpec::new([1, 2], DType::Float32);
/// let w_spec = TensorSpec::new([2], DType::Float32);
/// let op = FusedAddRmsNorm::new(spec.clone(), spec.clone(), w_spec.clone(), 0.0, &device)?;
/// let x = Tensor::from_f32_slice(&[1.0, 3.0], [1, 2], &device)?;
/// let residual = Tensor::from_f32_slice(&[2.0, 1.0], [1, 2], &device)?;
/// let weight = Tensor::full(&w_spec, 1.0, &device)?;
/// let (y, residual_out) = op.forward(&x, &residual, &weight)?;
/// assert_eq!(residual_out.to_vec_f32()?, vec![3.0, 4.0]);
/// let r = 12.5f32.sqrt();
/// assert_eq!(y.to_vec_f32()?, vec![3.0 / r, 4.0 / r]);
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("fused_add_rms_norm")]
#[derive(Debug, Clone)]
pub struct FusedAddRmsNorm {
    /// The input the op is planned for.
    x: TensorSpec,
    /// The residual: same spec as `x`.
    residual: TensorSpec,
    /// The weight: `[N]`, same dtype as `x`.
    weight: TensorSpec,
    /// Added to the mean square before the square root.
    eps: f64,
    device: Device,
    /// `x` viewed as `rows` rows of `n`.
    rows: usize,
    n: usize,
}

impl FusedAddRmsNorm {
    /// The roof an optimal implementation is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans the fused op for inputs like `x` and `residual` (same spec) and a weight like
    /// `weight`.
    ///
    /// Errors when `x` has rank 0 or no elements, when a dtype is not float32, float16 or
    /// bfloat16 or they differ, when `residual` is not `x`'s spec, when `weight` is not `[N]` for
    /// `N` the last dim of `x`, or when `eps` is negative or not finite.
    pub fn new(
        x: TensorSpec,
        residual: TensorSpec,
        weight: TensorSpec,
        eps: f64,
        device: &Device,
    ) -> Result<FusedAddRmsNorm, Error> {
        let n = check_norm_input(OP, &x, eps)?;
        check_same_dtype(OP, "residual", &residual, &x)?;
        if residual.shape != x.shape {
            return Err(Error::InvalidShape {
                op: OP,
                field: "residual",
                shape: residual.shape.clone(),
                reason: format!("must be the shape of x {x}"),
            });
        }
        check_row_param(OP, "weight", &weight, &x, n)?;
        let rows = x.numel()? / n;
        Ok(FusedAddRmsNorm {
            x,
            residual,
            weight,
            eps,
            device: device.clone(),
            rows,
            n,
        })
    }

    row_norm_accessors!(
        "The input spec the op is planned for (also the spec of the residual and both outputs)."
    );

    /// `(y, residual_out)` for `x`, `residual` and `weight`, into new tensors; all must match the
    /// plan.
    pub fn forward<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        residual: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
    ) -> Result<(Tensor, Tensor), Error> {
        let x = x.into();
        let residual = residual.into();
        let weight = weight.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "residual", &residual, &self.residual, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        let mut y = Tensor::empty(&self.x, &self.device)?;
        let mut residual_out = Tensor::empty(&self.x, &self.device)?;
        self.forward_into(x, residual, weight, &mut y, &mut residual_out)?;
        Ok((y, residual_out))
    }

    /// Writes `y` and `residual_out` (each of `x`'s spec, on the plan's device; distinct
    /// tensors, so neither overlaps an input). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        residual: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
        residual_out: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let residual = residual.into();
        let weight = weight.into();
        let y = y.into();
        let residual_out = residual_out.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "residual", &residual, &self.residual, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        check_input(OP, "y", &y, &self.x, &self.device)?;
        check_input(OP, "residual_out", &residual_out, &self.x, &self.device)?;
        backend::forward(self, [x, residual, weight], [y, residual_out])
    }
}

impl Backends<3, 2> for FusedAddRmsNorm {
    fn device(&self) -> &Device {
        &self.device
    }

    /// Two outputs, so not `cpu_f64`: the sum is rounded to the dtype first, since the norm
    /// reads what `residual_out` stores.
    fn cpu(
        &self,
        [x, residual, weight]: [crate::TensorRef<'_>; 3],
        [mut y, mut residual_out]: [crate::TensorMut<'_>; 2],
    ) -> Result<(), Error> {
        let sum: Vec<f64> = x
            .host_f64()?
            .iter()
            .zip(residual.host_f64()?)
            .map(|(a, b)| a + b)
            .collect();
        residual_out.set_host_f64(&sum)?;
        let h = residual_out.host_f64()?;
        let w = weight.host_f64()?;
        y.set_host_f64(&reference::fused_add_rms_norm_y(&h, &w, self.n, self.eps))
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs, ref rs, ref ws]: [cudarc::driver::CudaView<'_, u8>; 3],
        [ref mut ys, ref mut os]: [cudarc::driver::CudaViewMut<'_, u8>; 2],
    ) -> Result<(), Error> {
        // No v16 kernel: rows longer than one block's registers hold at 4 vectors a thread go to
        // the loop kernel.
        let (entry, cfg) = row_launch(
            &FUSED_ADD_RMS_NORM,
            OP,
            self.x.dtype,
            self.rows,
            self.n,
            false,
            1024,
        )?;
        let (rows, n, eps) = (self.rows as i64, self.n as i32, self.eps as f32);
        // SAFETY: fused_add_rms_norm_*(const T* x, const T* residual, const T* weight, T* y,
        // T* residual_out, long long, int, float); x, residual, y, residual_out hold rows * n
        // elements (distinct buffers: two &mut borrows), the weight n; the block shape is within
        // the launch bounds.
        unsafe {
            launch!(dev, &FUSED_ADD_RMS_NORM, entry, cfg; xs, rs, ws, ys, os, &rows, &n, &eps)
        }
    }
}

impl FromWorkload for FusedAddRmsNorm {
    /// `x_shape` and the case dtype; the residual from `residual_shape`, else `x`'s; the weight
    /// from `weight_shape`, else `[N]`; `eps` from the row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = workload_input(OP, case, "x", None)?;
        let residual = case.input_spec("residual").unwrap_or_else(|| x.clone());
        let weight = workload_input(OP, case, "weight", Some(&x))?;
        FusedAddRmsNorm::new(
            x,
            residual,
            weight,
            workload_f64::<FusedAddRmsNorm>(case, "eps")?,
            device,
        )
    }
}

impl BenchOp for FusedAddRmsNorm {
    fn roof(&self) -> RoofKey {
        FusedAddRmsNorm::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        backend::random_inputs([&self.x, &self.residual, &self.weight], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        backend::placeholder_inputs([&self.x, &self.residual, &self.weight], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x, residual, weight] = exact_inputs::<Self, 3>(inputs)?;
        let (y, residual_out) = self.forward(x, residual, weight)?;
        Ok(vec![y, residual_out])
    }

    /// x, residual and weight read once; y and residual_out written once.
    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.x.clone(), self.residual.clone(), self.weight.clone()],
            writes: vec![self.x.clone(), self.x.clone()],
        })
    }
}

/// The residual add fused with RMSNorm, in one call: `(y, residual_out)` with
/// `residual_out = x + residual` and `y = rms_norm(residual_out) * weight`; plans a
/// [`FusedAddRmsNorm`] for the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[1.0, 3.0], [1, 2], &device)?;
/// let residual = Tensor::from_f32_slice(&[2.0, 1.0], [1, 2], &device)?;
/// let weight = Tensor::full(&TensorSpec::new([2], DType::Float32), 1.0, &device)?;
/// let (y, residual_out) = tileops::ops::fused_add_rms_norm(&x, &residual, &weight, 0.0)?;
/// assert_eq!(residual_out.to_vec_f32()?, vec![3.0, 4.0]);
/// let r = 12.5f32.sqrt();
/// assert_eq!(y.to_vec_f32()?, vec![3.0 / r, 4.0 / r]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn fused_add_rms_norm(
    x: &Tensor,
    residual: &Tensor,
    weight: &Tensor,
    eps: f64,
) -> Result<(Tensor, Tensor), Error> {
    let spec = |t: &Tensor| t.spec().clone();
    FusedAddRmsNorm::new(spec(x), spec(residual), spec(weight), eps, x.device())?
        .forward(x, residual, weight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::ops::backend::assert_rounds_to;

    #[test]
    fn cpu_forward_matches_the_unfused_ops_in_every_dtype() {
        let cpu = Device::cpu();
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            for shape in [vec![3, 7], vec![2, 2, 64], vec![1], vec![5, 1]] {
                let n = *shape.last().unwrap();
                let xs = TensorSpec::new(shape.clone(), dtype);
                let ws = TensorSpec::new([n], dtype);
                let op =
                    FusedAddRmsNorm::new(xs.clone(), xs.clone(), ws.clone(), 1e-6, &cpu).unwrap();
                let x = Tensor::random(&xs, 3, &cpu).unwrap();
                let r = Tensor::random(&xs, 4, &cpu).unwrap();
                let w = Tensor::random(&ws, 5, &cpu).unwrap();
                let (y, h) = op.forward(&x, &r, &w).unwrap();
                let sum: Vec<f64> = x
                    .to_vec_f64()
                    .unwrap()
                    .iter()
                    .zip(r.to_vec_f64().unwrap())
                    .map(|(a, b)| a + b)
                    .collect();
                let want_h = Tensor::from_f64_rounded(&sum, &xs, &cpu).unwrap();
                assert_eq!(h.to_bytes().unwrap(), want_h.to_bytes().unwrap());
                let want_y = super::reference::rms_norm(
                    &want_h.to_vec_f64().unwrap(),
                    &w.to_vec_f64().unwrap(),
                    n,
                    1e-6,
                );
                assert_rounds_to(&y, &want_y, format_args!("{dtype} {shape:?}"));
            }
        }
    }

    #[test]
    fn non_finite_values_spread_over_their_row() {
        let cpu = Device::cpu();
        let xs = TensorSpec::new([2, 3], DType::Float32);
        let ws = TensorSpec::new([3], DType::Float32);
        let op = FusedAddRmsNorm::new(xs.clone(), xs.clone(), ws.clone(), 1e-6, &cpu).unwrap();
        let x =
            Tensor::from_f32_slice(&[1.0, f32::NAN, 2.0, 1.0, 1.0, f32::INFINITY], [2, 3], &cpu)
                .unwrap();
        let r = Tensor::full(&xs, 1.0, &cpu).unwrap();
        let w = Tensor::full(&ws, 1.0, &cpu).unwrap();
        let (y, h) = op.forward(&x, &r, &w).unwrap();
        let (y, h) = (y.to_vec_f32().unwrap(), h.to_vec_f32().unwrap());
        assert!(y[..3].iter().all(|v| v.is_nan()), "{y:?}");
        assert_eq!(&h[3..], &[2.0, 2.0, f32::INFINITY]);
        assert_eq!(&y[3..5], &[0.0, 0.0]);
        assert!(y[5].is_nan());
    }

    #[test]
    fn roofline_follows_the_manifest() {
        let cpu = Device::cpu();
        let x = TensorSpec::new([2048, 8192], DType::BFloat16);
        let w = TensorSpec::new([8192], DType::BFloat16);
        let r = FusedAddRmsNorm::new(x.clone(), x, w, 1e-6, &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        let (m, n) = (2048u64, 8192u64);
        assert_eq!((r.flops, r.bytes), (5 * m * n, (4 * m * n + n) * 2));
    }

    #[test]
    fn residual_must_match_x() {
        let cpu = Device::cpu();
        let x = TensorSpec::new([2, 8], DType::Float16);
        let w = TensorSpec::new([8], DType::Float16);
        assert!(matches!(
            FusedAddRmsNorm::new(
                x.clone(),
                TensorSpec::new([2, 8], DType::Float32),
                w.clone(),
                1e-6,
                &cpu
            ),
            Err(Error::InvalidDType {
                field: "residual",
                ..
            })
        ));
        assert!(matches!(
            FusedAddRmsNorm::new(
                x.clone(),
                TensorSpec::new([1, 8], DType::Float16),
                w,
                1e-6,
                &cpu
            ),
            Err(Error::InvalidShape {
                field: "residual",
                ..
            })
        ));
    }
}
