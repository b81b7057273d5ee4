//! A user's crate: an op of its own, defined against its own manifest (`manifest/ops.yaml`) and
//! registered, so that its bench binary (`src/bin/bench.rs`) times it together with tileops's ops.

use tileops::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, WorkloadCase};
use tileops::{Device, Error, Tensor, TensorSpec};

/// `y = x + alpha * residual`, planned for one shape on one device. Its roofline comes from the
/// user's manifest; its computation is a host reference (on a GPU the data goes through the host:
/// a user's first op before its kernel exists).
#[tileops::roofline_op("scaled_residual_add")]
pub struct ScaledResidualAdd {
    /// The input's spec.
    pub x: TensorSpec,
    /// The residual's spec (the same shape and dtype as `x`).
    pub residual: TensorSpec,
    /// The residual's scale.
    pub alpha: f64,
    /// Where it runs.
    pub device: Device,
}

impl ScaledResidualAdd {
    /// `y = x + alpha * residual` for tensors of `x`'s spec.
    pub fn forward(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor, Error> {
        for (field, tensor, planned) in [("x", x, &self.x), ("residual", residual, &self.residual)] {
            if tensor.spec() != planned {
                return Err(Error::InputMismatch {
                    op: Self::NAME,
                    field,
                    expected: planned.to_string(),
                    actual: tensor.spec().to_string(),
                });
            }
        }
        let (a, b) = (x.to_vec_f64()?, residual.to_vec_f64()?);
        let y: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a + self.alpha * b).collect();
        Tensor::from_f64_rounded(&y, &self.x, &self.device)
    }
}

impl FromWorkload for ScaledResidualAdd {
    /// `x_shape`, `residual_shape` and the case dtype; `alpha` from the row (the manifest's default
    /// otherwise).
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let alpha = case
            .workload
            .param("alpha")
            .and_then(|v| v.as_f64())
            .unwrap_or(1.0);
        Ok(ScaledResidualAdd {
            x: case.require_input("scaled_residual_add", "x")?,
            residual: case.require_input("scaled_residual_add", "residual")?,
            alpha,
            device: device.clone(),
        })
    }
}

impl BenchOp for ScaledResidualAdd {
    fn roof(&self) -> RoofKey {
        RoofKey::CUDA_CORE_FP32
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        Ok(vec![
            Tensor::random(&self.x, seed, &self.device)?,
            Tensor::random(&self.residual, seed.wrapping_add(1), &self.device)?,
        ])
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [x, residual] = inputs else {
            return Err(Error::Arity {
                op: Self::NAME,
                expected: 2,
                got: inputs.len(),
            });
        };
        Ok(vec![self.forward(x, residual)?])
    }
}
