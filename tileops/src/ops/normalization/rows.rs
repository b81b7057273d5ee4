//! Plumbing shared by the last-dim norms (`rms_norm`, `layer_norm`, `fused_add_rms_norm`): plan
//! validation, workload parsing, GPU buffers and the launch of their row kernels.

use cudarc::driver::LaunchConfig;

use crate::kernels::{self, KernelSource};
use crate::ops::{
    RowPlan, check_extents, check_float_dtype, check_has_dims, launch, pow2_clamped, row_plan,
};
use crate::registry::WorkloadCase;
use crate::{DType, Error, TensorSpec};

/// Checks that `param` has the dtype of `x`.
pub(super) fn check_same_dtype(
    op: &'static str,
    field: &'static str,
    param: &TensorSpec,
    x: &TensorSpec,
) -> Result<(), Error> {
    if param.dtype != x.dtype {
        return Err(Error::InvalidDType {
            op,
            field,
            value: param.dtype,
            supported: format!("the dtype of x ({})", x.dtype),
        });
    }
    Ok(())
}

/// Checks that `param` is `[n]`, for `n` the last dim of `x`.
pub(super) fn check_row_shape(
    op: &'static str,
    field: &'static str,
    param: &TensorSpec,
    x: &TensorSpec,
    n: usize,
) -> Result<(), Error> {
    if param.shape != [n] {
        return Err(Error::InvalidShape {
            op,
            field,
            shape: param.shape.clone(),
            reason: format!("must be [{n}], the last dim of x {x}"),
        });
    }
    Ok(())
}

/// Checks a per-column parameter (weight, bias) of a last-dim norm: `[n]`, the dtype of `x`.
pub(super) fn check_row_param(
    op: &'static str,
    field: &'static str,
    param: &TensorSpec,
    x: &TensorSpec,
    n: usize,
) -> Result<(), Error> {
    check_float_dtype(op, field, param)?;
    check_same_dtype(op, field, param, x)?;
    check_row_shape(op, field, param, x, n)
}

/// The last dim of `x`, the row length the norm runs over; errors when `x` has rank 0.
pub(super) fn last_dim(op: &'static str, x: &TensorSpec) -> Result<usize, Error> {
    check_has_dims(op, "x", x, " to normalize over")?;
    Ok(x.shape[x.rank() - 1])
}

/// Checks that rows of `n` elements are indexable by an `int` in the kernels.
pub(super) fn check_row_len(op: &'static str, x: &TensorSpec, n: usize) -> Result<(), Error> {
    if i32::try_from(n).is_err() {
        return Err(Error::InvalidShape {
            op,
            field: "x",
            shape: x.shape.clone(),
            reason: format!("rows of {n} elements; at most {} are supported", i32::MAX),
        });
    }
    Ok(())
}

/// Checks that `eps` is finite and >= 0.
pub(super) fn check_eps(op: &'static str, eps: f64) -> Result<(), Error> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidParam {
            op,
            field: "eps",
            value: eps.to_string(),
            reason: "must be finite and >= 0".to_owned(),
        });
    }
    Ok(())
}

/// Checks `x` of a last-dim norm (a float dtype, rank >= 1, no empty dim, rows that an `int`
/// indexes) and `eps`; returns the row length.
pub(super) fn check_norm_input(op: &'static str, x: &TensorSpec, eps: f64) -> Result<usize, Error> {
    check_float_dtype(op, "x", x)?;
    let n = last_dim(op, x)?;
    check_extents(op, "x", x)?;
    check_row_len(op, x, n)?;
    check_eps(op, eps)?;
    Ok(n)
}

/// The spec of input `name` in a workload row, or `[N]` of the case dtype (N the last dim of
/// `x`) when the row gives none and `per_column_of` is `Some(x)`.
pub(super) fn workload_input(
    op: &'static str,
    case: &WorkloadCase,
    name: &'static str,
    per_column_of: Option<&TensorSpec>,
) -> Result<TensorSpec, Error> {
    match (case.input_spec(name), per_column_of) {
        (Some(spec), _) => Ok(spec),
        (None, Some(x)) => Ok(TensorSpec::new(
            x.shape.last().copied().into_iter().collect::<Vec<_>>(),
            x.dtype,
        )),
        (None, None) => case.require_input(op, name),
    }
}

/// The entry point and launch shape of a last-dim row kernel of `source` for `rows` rows of `n`
/// elements of `dtype`: `{prefix}_rows_v4`, `{prefix}_rows_v16` (only when `has_v16`; without it,
/// rows too long for v4 go to the loop kernel) or `{prefix}_loop`, which takes one block of 1024
/// threads per row, rows in a grid-stride loop. `v4_threads`: the most threads per row the v4
/// kernel is built for (its `__launch_bounds__`, 1024 or 512); a row that needs more takes v16
/// (512 threads at most, 16 vectors each).
pub(super) fn row_launch(
    source: &'static KernelSource,
    prefix: &str,
    dtype: DType,
    rows: usize,
    n: usize,
    has_v16: bool,
    v4_threads: u32,
) -> Result<(&'static str, LaunchConfig), Error> {
    let plan = match row_plan(n, dtype) {
        RowPlan::Regs4 {
            threads_per_row, ..
        } if threads_per_row > v4_threads => RowPlan::Regs16 {
            threads_per_row: pow2_clamped((n / (16 / dtype.size_in_bytes())).div_ceil(16), 32, 512)
                as u32,
        },
        plan => plan,
    };
    let (entry, blocks, (threads_x, threads_y)) = match plan {
        RowPlan::Regs4 {
            threads_per_row,
            rows_per_block,
        } => (
            kernels::entry(source, &format!("{prefix}_rows_v4"), dtype)?,
            rows.div_ceil(rows_per_block as usize),
            (threads_per_row, rows_per_block),
        ),
        RowPlan::Regs16 { threads_per_row } if has_v16 => (
            kernels::entry(source, &format!("{prefix}_rows_v16"), dtype)?,
            rows,
            (threads_per_row, 1),
        ),
        RowPlan::Regs16 { .. } | RowPlan::Long => (
            kernels::entry(source, &format!("{prefix}_loop"), dtype)?,
            rows.min(1 << 20),
            (1024, 1),
        ),
    };
    let cfg = LaunchConfig {
        grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
        block_dim: (threads_x, threads_y, 1),
        shared_mem_bytes: 0,
    };
    Ok((entry, cfg))
}

/// The accessors every row norm has, written once: the planned `x` (documented by `$x_doc`) and
/// `weight` specs, `eps` and the device, read from the fields the `#[roofline_op]` conventions
/// give each of those structs.
macro_rules! row_norm_accessors {
    ($x_doc:literal) => {
        #[doc = $x_doc]
        pub fn x(&self) -> &TensorSpec {
            &self.x
        }

        /// The weight spec the op is planned for.
        pub fn weight(&self) -> &TensorSpec {
            &self.weight
        }

        /// The epsilon.
        pub fn eps(&self) -> f64 {
            self.eps
        }

        /// The device the op runs on.
        pub fn device(&self) -> &Device {
            &self.device
        }
    };
}
pub(super) use row_norm_accessors;
