//! The ops. Each is a plan: built for input specs and params on a device (which validates them),
//! then run with `forward` on tensors that match the plan.
//!
//! Every op takes its inputs as `impl Into<TensorRef>` and, in `forward_into`, its outputs as
//! `impl Into<TensorMut>` (the attention ops and `QkNormRopeFp8` as an output struct of them):
//! a `&Tensor` or `&mut Tensor`, or a borrow of the caller's own memory
//! ([`TensorRef`](crate::TensorRef), [`TensorMut`](crate::TensorMut)), read and written in place
//! on the device's stream.
//!
//! ```
//! use tileops::ops::Softmax;
//! use tileops::{DType, Device, Tensor, TensorSpec};
//!
//! let device = Device::cpu();
//! let spec = TensorSpec::new([2, 3], DType::Float32);
//! let softmax = Softmax::new(spec.clone(), -1, &device)?;
//! let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0], [2, 3], &device)?;
//! let y = softmax.forward(&x)?.to_vec_f32()?;
//! assert!((y[3] - 1.0 / 3.0).abs() < 1e-7);
//! # Ok::<(), tileops::Error>(())
//! ```

// One module per manifest family (the `family:` of each entry), each with its ops and the f64
// references of their CPU backend.
pub(crate) mod attention;
mod elementwise;
mod fused;
mod gemm;
mod normalization;
mod position_encoding;
mod quantization;
mod reduction;

/// The f64 references of every family, in one flat module: the CPU backends and the yardstick of
/// the GPU tests (`tileops::ops::reference::gemm`, `::rope`, `::fp8_quant`, ...); not part of the
/// stable API.
#[doc(hidden)]
pub mod reference {
    pub use super::attention::reference::*;
    pub use super::elementwise::reference::*;
    pub use super::fused::reference::*;
    pub use super::gemm::reference::*;
    pub use super::normalization::reference::*;
    pub use super::position_encoding::reference::*;
    pub use super::quantization::reference::*;
    pub use super::reduction::reference::*;
}

mod backend;
mod launch;

// Each family's plans and one-shot helpers, re-exported whole: a new op is added to its family's
// module only.
pub use attention::*;
pub use elementwise::*;
pub use fused::*;
pub use gemm::*;
pub use normalization::*;
pub use position_encoding::*;
pub use quantization::*;
pub use reduction::*;

use crate::{DType, Device, Error, Tensor, TensorSpec};

use launch::{RowPlan, pow2_clamped, row_plan};

/// The dtypes both kernels are written for.
const FLOAT_DTYPES: [DType; 3] = [DType::Float32, DType::Float16, DType::BFloat16];

fn check_float_dtype(
    op: &'static str,
    field: &'static str,
    spec: &TensorSpec,
) -> Result<(), Error> {
    if FLOAT_DTYPES.contains(&spec.dtype) {
        return Ok(());
    }
    Err(Error::InvalidDType {
        op,
        field,
        value: spec.dtype,
        supported: "float32, float16, bfloat16".to_owned(),
    })
}

/// Rejects 0-d tensors, for ops that work along a dimension (`reason` says what for: "", " to
/// normalize over").
fn check_has_dims(
    op: &'static str,
    field: &'static str,
    spec: &TensorSpec,
    reason: &str,
) -> Result<(), Error> {
    if spec.rank() > 0 {
        return Ok(());
    }
    Err(Error::InvalidShape {
        op,
        field,
        shape: Vec::new(),
        reason: format!("{op} needs at least one dimension{reason}"),
    })
}

/// Rejects tensors with no elements, and extents the kernels cannot index.
fn check_extents(op: &'static str, field: &'static str, spec: &TensorSpec) -> Result<(), Error> {
    if spec.shape.contains(&0) {
        return Err(Error::InvalidShape {
            op,
            field,
            shape: spec.shape.clone(),
            reason: "empty tensors are not supported (a dimension is 0)".to_owned(),
        });
    }
    // The same checked size as every allocation (TensorSpec::size_in_bytes); the kernels index
    // bytes as signed 64-bit offsets, so isize::MAX bounds it too.
    if !spec
        .size_in_bytes()
        .is_ok_and(|bytes| bytes <= isize::MAX as usize)
    {
        return Err(Error::InvalidShape {
            op,
            field,
            shape: spec.shape.clone(),
            reason: "too many elements to address".to_owned(),
        });
    }
    Ok(())
}

/// A tensor, owned or borrowed, as the plan checks see it.
trait Placed {
    fn spec(&self) -> &TensorSpec;
    fn device(&self) -> &Device;
}

impl Placed for Tensor {
    fn spec(&self) -> &TensorSpec {
        Tensor::spec(self)
    }
    fn device(&self) -> &Device {
        Tensor::device(self)
    }
}

impl Placed for crate::TensorRef<'_> {
    fn spec(&self) -> &TensorSpec {
        crate::TensorRef::spec(self)
    }
    fn device(&self) -> &Device {
        crate::TensorRef::device(self)
    }
}

impl Placed for crate::TensorMut<'_> {
    fn spec(&self) -> &TensorSpec {
        crate::TensorMut::spec(self)
    }
    fn device(&self) -> &Device {
        crate::TensorMut::device(self)
    }
}

/// Checks that `tensor` is what the plan was built for: same spec, same device.
fn check_input(
    op: &'static str,
    field: &'static str,
    tensor: &impl Placed,
    spec: &TensorSpec,
    device: &Device,
) -> Result<(), Error> {
    if tensor.spec() != spec || tensor.device() != device {
        return Err(Error::InputMismatch {
            op,
            field,
            expected: format!("{spec} on {device}"),
            actual: format!("{} on {}", tensor.spec(), tensor.device()),
        });
    }
    Ok(())
}
