//! Launching kernels, written once: the launch tail of every op ([`launch!`]), the launch-time
//! checks, and the shape of the last-dim row kernels.

use cudarc::driver::{CudaStream, CudaView, DevicePtr};

use crate::{DType, Error};

/// Launches entry point `$entry` of kernel file `$source` on `$dev`'s stream with launch
/// configuration `$cfg` and the kernel arguments that follow, in order; evaluates to
/// `Result<(), Error>` and returns early (`?`) when the module cannot be loaded.
///
/// The launch itself is unsafe: the macro must be used inside an `unsafe` block whose `SAFETY:`
/// comment gives the kernel's parameter list and why the buffers are large enough for `$cfg`.
macro_rules! launch {
    ($dev:expr, $source:expr, $entry:expr, $cfg:expr; $($arg:expr),+ $(,)?) => {{
        let dev: &$crate::device::CudaDevice = $dev;
        let entry: &'static str = $entry;
        let function = $crate::kernels::function(dev, $source, entry)?;
        let mut call = dev.stream.launch_builder(&function);
        $( cudarc::driver::PushKernelArg::arg(&mut call, $arg); )+
        call.launch($cfg)
            .map(|_| ())
            .map_err(|e| $crate::Error::launch(entry, e))
    }};
}
pub(crate) use launch;

/// The kernels use 16-byte vector accesses from each tensor's base: true of every CUDA
/// allocation (256-byte aligned), and of the borrowed tensors (checked when borrowed), checked
/// anyway rather than assumed.
pub(crate) fn check_aligned(
    kernel: &str,
    stream: &CudaStream,
    slices: &[CudaView<'_, u8>],
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
pub(crate) fn grid_dim(kernel: &str, blocks: usize) -> Result<u32, Error> {
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| {
            Error::launch_refused(kernel, format!("{blocks} blocks exceed the grid limit"))
        })
}

/// The smallest power of two >= `n`, clamped to `[lo, hi]`.
pub(crate) fn pow2_clamped(n: usize, lo: usize, hi: usize) -> usize {
    n.max(1).next_power_of_two().clamp(lo, hi)
}

/// How a last-dim row kernel is launched: which variant, threads per row, rows per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowPlan {
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
pub(crate) fn row_plan(n: usize, dtype: DType) -> RowPlan {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::FLOAT_DTYPES;

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
