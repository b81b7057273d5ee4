//! `layer_norm`: `(x - mean) / sqrt(var + eps) * weight + bias` over the last dimension.

use super::reference;
use super::rows::{
    check_norm_input, check_row_param, row_launch, row_norm_accessors, workload_input,
};
use crate::device::CudaDevice;
use crate::kernels::LAYER_NORM;
use crate::ops::backend::{self, Backends, cpu_f64, exact_inputs, workload_f64};
use crate::ops::check_input;
use crate::ops::launch::launch;
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{Device, Error, Tensor, TensorSpec};

const OP: &str = LayerNorm::NAME;

/// LayerNorm over the last dimension with a weight and a bias of shape `[N]`, as
/// `torch.nn.functional.layer_norm(x, [N], weight, bias, eps)` (biased variance), in float32,
/// float16 or bfloat16 (weight and bias in the same dtype), accumulating in f32 on the GPU (f64
/// on the CPU).
///
/// ```
/// use tileops::ops::LayerNorm;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let x_spec = TensorSpec::new([8, 4096], DType::BFloat16);
/// let p_spec = TensorSpec::new([4096], DType::BFloat16);
/// let norm = LayerNorm::new(x_spec.clone(), p_spec.clone(), p_spec.clone(), 1e-5, &device)?;
/// let x = Tensor::random(&x_spec, 1, &device)?;
/// let weight = Tensor::full(&p_spec, 1.0, &device)?;
/// let bias = Tensor::full(&p_spec, 0.0, &device)?;
/// let y = norm.forward(&x, &weight, &bias)?.to_vec_f32()?;
/// let mean = y[..4096].iter().sum::<f32>() / 4096.0;
/// let var = y[..4096].iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 4096.0;
/// assert!(mean.abs() < 0.01 && (var - 1.0).abs() < 0.02);
///
/// // The bias must be [N] for N the last dim of x.
/// let bad = TensorSpec::new([8], DType::BFloat16);
/// assert!(LayerNorm::new(x_spec, p_spec, bad, 1e-5, &device).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("layer_norm")]
#[derive(Debug, Clone)]
pub struct LayerNorm {
    /// The input the op is planned for.
    x: TensorSpec,
    /// The weight: `[N]`, same dtype as `x`.
    weight: TensorSpec,
    /// The bias: `[N]`, same dtype as `x`.
    bias: TensorSpec,
    /// Added to the variance before the square root.
    eps: f64,
    device: Device,
    /// `x` viewed as `rows` rows of `n`.
    rows: usize,
    n: usize,
}

impl LayerNorm {
    /// The roof an optimal LayerNorm is priced against: memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a LayerNorm of inputs like `x` over their last dim, with `weight` and `bias`.
    ///
    /// Errors when `x` has rank 0 or no elements, when a dtype is not float32, float16 or
    /// bfloat16 or they differ, when `weight` or `bias` is not `[N]` for `N` the last dim of `x`,
    /// or when `eps` is negative or not finite.
    pub fn new(
        x: TensorSpec,
        weight: TensorSpec,
        bias: TensorSpec,
        eps: f64,
        device: &Device,
    ) -> Result<LayerNorm, Error> {
        let n = check_norm_input(OP, &x, eps)?;
        check_row_param(OP, "weight", &weight, &x, n)?;
        check_row_param(OP, "bias", &bias, &x, n)?;
        let rows = x.numel()? / n;
        Ok(LayerNorm {
            x,
            weight,
            bias,
            eps,
            device: device.clone(),
            rows,
            n,
        })
    }

    row_norm_accessors!("The input spec the op is planned for.");

    /// The bias spec the op is planned for.
    pub fn bias(&self) -> &TensorSpec {
        &self.bias
    }

    /// LayerNorm of `x` with `weight` and `bias`, into a new tensor; all must match the plan.
    pub fn forward<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
        bias: impl Into<crate::TensorRef<'t>>,
    ) -> Result<Tensor, Error> {
        let x = x.into();
        let weight = weight.into();
        let bias = bias.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        check_input(OP, "bias", &bias, &self.bias, &self.device)?;
        let mut y = Tensor::empty(&self.x, &self.device)?;
        self.forward_into(x, weight, bias, &mut y)?;
        Ok(y)
    }

    /// LayerNorm of `x` with `weight` and `bias`, written into `y` (same spec and device as
    /// `x`). Asynchronous on a GPU.
    pub fn forward_into<'t>(
        &self,
        x: impl Into<crate::TensorRef<'t>>,
        weight: impl Into<crate::TensorRef<'t>>,
        bias: impl Into<crate::TensorRef<'t>>,
        y: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let x = x.into();
        let weight = weight.into();
        let bias = bias.into();
        let y = y.into();
        check_input(OP, "x", &x, &self.x, &self.device)?;
        check_input(OP, "weight", &weight, &self.weight, &self.device)?;
        check_input(OP, "bias", &bias, &self.bias, &self.device)?;
        check_input(OP, "y", &y, &self.x, &self.device)?;
        backend::forward(self, [x, weight, bias], [y])
    }
}

impl Backends<3, 1> for LayerNorm {
    fn device(&self) -> &Device {
        &self.device
    }

    fn cpu(
        &self,
        inputs: [crate::TensorRef<'_>; 3],
        [mut y]: [crate::TensorMut<'_>; 1],
    ) -> Result<(), Error> {
        cpu_f64(inputs, &mut y, |[x, w, b]| {
            reference::layer_norm(&x, &w, &b, self.n, self.eps)
        })
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref xs, ref ws, ref bs]: [cudarc::driver::CudaView<'_, u8>; 3],
        [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
    ) -> Result<(), Error> {
        // layer_norm_rows_v4 holds x as f32 and weight and bias beside it: 512 threads per block at
        // most (128 registers), longer rows take v16.
        let (entry, cfg) = row_launch(&LAYER_NORM, OP, self.x.dtype, self.rows, self.n, true, 512)?;
        let (rows, n, eps) = (self.rows as i64, self.n as i32, self.eps as f32);
        // SAFETY: layer_norm_*(const T*, const T*, const T*, T*, long long, int, float); x and y
        // hold rows * n elements, weight and bias n; the block shape is within the launch bounds.
        unsafe { launch!(dev, &LAYER_NORM, entry, cfg; xs, ws, bs, ys, &rows, &n, &eps) }
    }
}

impl FromWorkload for LayerNorm {
    /// `x_shape` and the case dtype; weight and bias from `weight_shape`/`bias_shape`, else
    /// `[N]`; `eps` from the row, else the manifest's default.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let x = workload_input(OP, case, "x", None)?;
        let weight = workload_input(OP, case, "weight", Some(&x))?;
        let bias = workload_input(OP, case, "bias", Some(&x))?;
        LayerNorm::new(
            x,
            weight,
            bias,
            workload_f64::<LayerNorm>(case, "eps")?,
            device,
        )
    }
}

impl BenchOp for LayerNorm {
    fn roof(&self) -> RoofKey {
        LayerNorm::ROOF
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        backend::random_inputs([&self.x, &self.weight, &self.bias], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        backend::placeholder_inputs([&self.x, &self.weight, &self.bias], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x, weight, bias] = exact_inputs::<Self, 3>(inputs)?;
        Ok(vec![self.forward(x, weight, bias)?])
    }

    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.x.clone(), self.weight.clone(), self.bias.clone()],
            writes: vec![self.x.clone()],
        })
    }
}

/// LayerNorm of `x` over its last dim with `weight` and `bias` (each `[N]`), in one call: plans
/// a [`LayerNorm`] for the tensors' specs on `x`'s device and runs it.
///
/// ```
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::cpu();
/// let p = TensorSpec::new([2], DType::Float32);
/// let x = Tensor::from_f32_slice(&[1.0, 3.0], [1, 2], &device)?;
/// let weight = Tensor::full(&p, 2.0, &device)?;
/// let bias = Tensor::full(&p, 0.5, &device)?;
/// let y = tileops::ops::layer_norm(&x, &weight, &bias, 0.0)?.to_vec_f32()?;
/// assert_eq!(y, vec![-1.5, 2.5]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor, Error> {
    let spec = |t: &Tensor| t.spec().clone();
    LayerNorm::new(spec(x), spec(weight), spec(bias), eps, x.device())?.forward(x, weight, bias)
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
            for shape in [vec![3, 7], vec![2, 2, 64], vec![1], vec![4, 1]] {
                let n = *shape.last().unwrap();
                let xs = TensorSpec::new(shape.clone(), dtype);
                let ps = TensorSpec::new([n], dtype);
                let op = LayerNorm::new(xs.clone(), ps.clone(), ps.clone(), 1e-5, &cpu).unwrap();
                let mut values = Tensor::random(&xs, 3, &cpu).unwrap().to_vec_f64().unwrap();
                if values.len() > n {
                    // Row 1 carries a NaN: all of it is NaN.
                    values[n] = f64::NAN;
                }
                let x = Tensor::from_f64_rounded(&values, &xs, &cpu).unwrap();
                let w = Tensor::random(&ps, 4, &cpu).unwrap();
                let b = Tensor::random(&ps, 5, &cpu).unwrap();
                let y = op.forward(&x, &w, &b).unwrap();
                let expect = reference::layer_norm(
                    &x.to_vec_f64().unwrap(),
                    &w.to_vec_f64().unwrap(),
                    &b.to_vec_f64().unwrap(),
                    n,
                    1e-5,
                );
                if values.len() > n {
                    assert!(expect[n..2 * n].iter().all(|v| v.is_nan()));
                }
                assert_rounds_to(&y, &expect, format_args!("{dtype} {shape:?}"));
            }
        }
    }

    #[test]
    fn roofline_follows_the_manifest() {
        let cpu = Device::cpu();
        let x = TensorSpec::new([2048, 4096], DType::Float16);
        let p = TensorSpec::new([4096], DType::Float16);
        let r = LayerNorm::new(x, p.clone(), p, 1e-5, &cpu)
            .unwrap()
            .eval_roofline()
            .unwrap();
        let (m, n) = (2048u64, 4096u64);
        assert_eq!((r.flops, r.bytes), (5 * m * n, (2 * m * n + 2 * n) * 2));
    }

    #[test]
    fn params_must_match_x() {
        let cpu = Device::cpu();
        let x = TensorSpec::new([2, 8], DType::Float16);
        let p = TensorSpec::new([8], DType::Float16);
        assert!(matches!(
            LayerNorm::new(
                x.clone(),
                p.clone(),
                TensorSpec::new([8], DType::BFloat16),
                1e-5,
                &cpu
            ),
            Err(Error::InvalidDType { field: "bias", .. })
        ));
        assert!(matches!(
            LayerNorm::new(
                x.clone(),
                TensorSpec::new([9], DType::Float16),
                p.clone(),
                1e-5,
                &cpu
            ),
            Err(Error::InvalidShape {
                field: "weight",
                ..
            })
        ));
        assert!(matches!(
            LayerNorm::new(x, p.clone(), p, f64::NAN, &cpu),
            Err(Error::InvalidParam { field: "eps", .. })
        ));
    }
}
