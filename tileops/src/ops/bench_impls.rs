//! How the bench harness plans and drives softmax, log_softmax and rms_norm from manifest
//! workloads.
//!
//! `BenchOp` has `RooflineModel` as its supertrait, which `#[roofline_op]` implements; this module
//! is compiled once the macro does (see the commented `mod` line in `ops/mod.rs`).

use crate::registry::{BenchOp, FromWorkload, RoofKey, StaticValue, Traffic, WorkloadCase};
use crate::{Device, Error, Tensor};

use super::{LogSoftmax, Softmax};

fn bad_param(op: &'static str, field: &'static str, value: &StaticValue, reason: &str) -> Error {
    Error::InvalidParam {
        op,
        field,
        value: format!("{value:?}"),
        reason: reason.to_owned(),
    }
}

/// `FromWorkload` and `BenchOp` for softmax and log_softmax, which plan and run alike.
macro_rules! softmax_like {
    ($op:ident, $name:literal) => {
        impl FromWorkload for $op {
            /// `x_shape` and the case dtype; `dim` from the row, the last dim when absent or null.
            fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
                let x = case.require_input($name, "x")?;
                let dim = match case.workload.param("dim") {
                    None | Some(StaticValue::None) => -1,
                    Some(value) => value
                        .as_int()
                        .and_then(|d| i64::try_from(d).ok())
                        .ok_or_else(|| bad_param($name, "dim", value, "must be an integer"))?,
                };
                $op::new(device, x, dim)
            }
        }

        impl BenchOp for $op {
            fn roof(&self) -> RoofKey {
                $op::ROOF
            }

            fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
                Ok(vec![Tensor::random(self.x(), seed, self.device())?])
            }

            fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
                let [x] = inputs else {
                    return Err(Error::Arity {
                        op: $name,
                        expected: 1,
                        got: inputs.len(),
                    });
                };
                Ok(vec![self.forward(x)?])
            }

            fn traffic(&self) -> Option<Traffic> {
                Some(Traffic {
                    reads: vec![self.x().clone()],
                    writes: vec![self.x().clone()],
                })
            }
        }
    };
}

softmax_like!(Softmax, "softmax");
softmax_like!(LogSoftmax, "log_softmax");
