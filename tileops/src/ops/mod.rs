//! The ops. Each is a plan: built for input specs and params on a device (which validates them),
//! then run with `forward` on tensors that match the plan.
//!
//! ```
//! use tileops::ops::Softmax;
//! use tileops::{DType, Device, Tensor, TensorSpec};
//!
//! let device = Device::cpu();
//! let spec = TensorSpec::new([2, 3], DType::Float32);
//! let softmax = Softmax::new(&device, spec.clone(), -1)?;
//! let x = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0], [2, 3], &device)?;
//! let y = softmax.forward(&x)?.to_vec_f32()?;
//! assert!((y[3] - 1.0 / 3.0).abs() < 1e-7);
//! # Ok::<(), tileops::Error>(())
//! ```

// One module per manifest family (the `family:` of each entry), each with its ops and the f64
// references of their CPU backend.
mod elementwise;
mod fused;
mod gemm;
mod normalization;
mod position_encoding;
mod quantization;
mod reduction;

#[doc(hidden)]
pub mod reference;
#[doc(hidden)]
pub mod reference_norm_act;
#[doc(hidden)]
pub mod reference_reduction;
#[doc(hidden)]
pub mod reference_rope_fp8;
#[doc(hidden)]
pub use gemm::reference as reference_gemm;

mod bench_impls;

pub use elementwise::{Gelu, GeluApproximate, Relu, Sigmoid, Silu, SiluAndMul};
pub use fused::{QkNormRopeFp8, QkNormRopeFp8Output};
pub(crate) use gemm::BlasSlot;
pub use gemm::Gemm;
pub use normalization::{FusedAddRmsNorm, LayerNorm, RmsNorm};
pub use position_encoding::Rope;
pub use quantization::Fp8Quant;
pub use reduction::{Amax, LogSoftmax, Logsumexp, Mean, ReduceDim, Softmax, Sum};

use crate::{DType, Device, Error, Tensor, TensorSpec};

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

/// Checks that `tensor` is what the plan was built for: same spec, same device.
fn check_input(
    op: &'static str,
    field: &'static str,
    tensor: &Tensor,
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

/// The smallest power of two >= `n`, clamped to `[lo, hi]`.
fn pow2_clamped(n: usize, lo: usize, hi: usize) -> usize {
    n.max(1).next_power_of_two().clamp(lo, hi)
}

/// How a last-dim row kernel is launched: which variant, threads per row, rows per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowPlan {
    /// The row in registers, 4 vectors of 16 bytes per thread (entry `*_v4`).
    Regs4 {
        threads_per_row: u32,
        rows_per_block: u32,
    },
    /// The row in registers, 16 vectors per thread (entry `*_v16`).
    Regs16 { threads_per_row: u32 },
    /// Too long for one block's registers.
    Long,
}

/// Picks the row kernel for rows of `n` elements of `dtype`. The limits match the kernels'
/// `__launch_bounds__` (1024 threads for v4, 512 for v16).
fn row_plan(n: usize, dtype: DType) -> RowPlan {
    let per_vector = 16 / dtype.size_in_bytes();
    let vectors = n / per_vector;
    if vectors <= 4 * 1024 {
        let threads_per_row = pow2_clamped(vectors.div_ceil(4), 32, 1024);
        // Small rows: several rows per block, so a block has at least 128 threads.
        let rows_per_block = (128 / threads_per_row).max(1);
        RowPlan::Regs4 {
            threads_per_row: threads_per_row as u32,
            rows_per_block: rows_per_block as u32,
        }
    } else if vectors <= 16 * 512 {
        RowPlan::Regs16 {
            threads_per_row: pow2_clamped(vectors.div_ceil(16), 32, 512) as u32,
        }
    } else {
        RowPlan::Long
    }
}

/// Launch-time checks shared by the GPU paths.
mod launch {
    use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

    use crate::Error;

    /// The kernels use 16-byte vector accesses from each tensor's base: true of every CUDA
    /// allocation (256-byte aligned), checked anyway rather than assumed.
    pub(super) fn check_aligned(
        kernel: &str,
        stream: &CudaStream,
        slices: &[&CudaSlice<u8>],
    ) -> Result<(), Error> {
        for slice in slices {
            let (ptr, _sync) = slice.device_ptr(stream);
            if ptr % 16 != 0 {
                return Err(Error::launch_refused(
                    kernel,
                    format!("buffer at {ptr:#x} is not 16-byte aligned"),
                ));
            }
        }
        Ok(())
    }

    /// A grid extent as the driver takes it.
    pub(super) fn grid_dim(kernel: &str, blocks: usize) -> Result<u32, Error> {
        u32::try_from(blocks)
            .ok()
            .filter(|&b| b <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::launch_refused(kernel, format!("{blocks} blocks exceed the grid limit"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_plans_cover_the_workloads() {
        // 4096 f32 = 1024 vectors: 256 threads x 4.
        assert_eq!(
            row_plan(4096, DType::Float32),
            RowPlan::Regs4 {
                threads_per_row: 256,
                rows_per_block: 1
            }
        );
        // 32768 bf16 = 4096 vectors: 1024 threads x 4.
        assert_eq!(
            row_plan(32768, DType::BFloat16),
            RowPlan::Regs4 {
                threads_per_row: 1024,
                rows_per_block: 1
            }
        );
        // 32768 f32 = 8192 vectors: 512 threads x 16.
        assert_eq!(
            row_plan(32768, DType::Float32),
            RowPlan::Regs16 {
                threads_per_row: 512
            }
        );
        assert_eq!(row_plan(102400, DType::Float32), RowPlan::Long);
        assert_eq!(row_plan(131072, DType::BFloat16), RowPlan::Long);
        assert_eq!(
            row_plan(1, DType::Float16),
            RowPlan::Regs4 {
                threads_per_row: 32,
                rows_per_block: 4
            }
        );
        assert_eq!(
            row_plan(7, DType::Float32),
            RowPlan::Regs4 {
                threads_per_row: 32,
                rows_per_block: 4
            }
        );
    }

    #[test]
    fn every_planned_row_fits_its_kernel() {
        for dtype in FLOAT_DTYPES {
            let per_vector = 16 / dtype.size_in_bytes();
            for n in (1..70_000)
                .step_by(997)
                .chain([4096, 8192, 16384, 32768, 65536])
            {
                let vectors = n / per_vector;
                match row_plan(n, dtype) {
                    RowPlan::Regs4 {
                        threads_per_row,
                        rows_per_block,
                    } => {
                        assert!(vectors <= 4 * threads_per_row as usize, "{n} {dtype}");
                        assert!(threads_per_row * rows_per_block <= 1024);
                        assert!(rows_per_block <= 32 && threads_per_row % 32 == 0);
                    }
                    RowPlan::Regs16 { threads_per_row } => {
                        assert!(
                            vectors <= 16 * threads_per_row as usize && threads_per_row <= 512,
                            "{n} {dtype}"
                        );
                    }
                    RowPlan::Long => assert!(vectors > 16 * 512),
                }
            }
        }
    }
}
