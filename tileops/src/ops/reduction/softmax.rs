//! `softmax`: `exp(x - max) / sum(exp(x - max))` along one dimension, and the plan it shares
//! with `log_softmax` (`log_softmax.rs`): validation, the `[outer, n, inner]` view, the kernel
//! choice and launch, and the CPU path. The two ops differ only in their output step ([`Output`]),
//! and `softmax.cu` holds both ops' kernels.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::device::CudaDevice;
use crate::kernels::{self, SOFTMAX};
use crate::ops::{RowPlan, check_extents, check_float_dtype, check_input, launch, row_plan};
use crate::registry::RoofKey;
use crate::{Device, Error, Tensor, TensorSpec};

/// What a [`SoftmaxPlan`] writes for each element, given its row's max and sum of exponentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// `exp(x - max) / sum`: the `softmax` op.
    Softmax,
    /// `(x - max) - log(sum)`: the `log_softmax` op.
    LogSoftmax,
}

/// The entry points of one [`Output`] in `softmax.cu`, without their dtype suffix.
struct Bases {
    rows_v4: &'static str,
    rows_v16: &'static str,
    partial: &'static str,
    finalize: &'static str,
    cols: &'static str,
    cols_vec: &'static str,
}

impl Output {
    /// The op's name, as errors and the manifest give it.
    fn op(self) -> &'static str {
        match self {
            Output::Softmax => "softmax",
            Output::LogSoftmax => "log_softmax",
        }
    }

    fn bases(self) -> &'static Bases {
        match self {
            Output::Softmax => &Bases {
                rows_v4: "softmax_rows_v4",
                rows_v16: "softmax_rows_v16",
                partial: "softmax_partial",
                finalize: "softmax_finalize",
                cols: "softmax_cols",
                cols_vec: "softmax_cols_vec",
            },
            Output::LogSoftmax => &Bases {
                rows_v4: "log_softmax_rows_v4",
                rows_v16: "log_softmax_rows_v16",
                partial: "log_softmax_partial",
                finalize: "log_softmax_finalize",
                cols: "log_softmax_cols",
                cols_vec: "log_softmax_cols_vec",
            },
        }
    }

    /// The f64 reference, which is also the CPU path.
    fn reference(self, x: &[f64], outer: usize, n: usize, inner: usize) -> Vec<f64> {
        match self {
            Output::Softmax => crate::ops::reference::softmax(x, outer, n, inner),
            Output::LogSoftmax => crate::ops::reference_reduction::log_softmax(x, outer, n, inner),
        }
    }
}

/// A softmax or log_softmax planned for one input spec and dim on one device: the input viewed
/// as `[outer, n, inner]`, normalized over `n`. The ops hold the spec and dim themselves (the
/// manifest's formulas read them) and pass the spec in.
#[derive(Debug, Clone)]
pub(super) struct SoftmaxPlan {
    output: Output,
    device: Device,
    pub(super) outer: usize,
    pub(super) n: usize,
    pub(super) inner: usize,
}

impl SoftmaxPlan {
    /// Checks `x` and `dim` (see [`Softmax::new`]) and views `x` as `[outer, n, inner]`.
    pub(super) fn new(
        output: Output,
        device: &Device,
        x: &TensorSpec,
        dim: i64,
    ) -> Result<SoftmaxPlan, Error> {
        let op = output.op();
        check_float_dtype(op, "x", x)?;
        let rank = x.rank();
        if rank == 0 {
            return Err(Error::InvalidShape {
                op,
                field: "x",
                shape: Vec::new(),
                reason: format!("{op} needs at least one dimension"),
            });
        }
        let rank_i = rank as i64;
        if !(-rank_i..rank_i).contains(&dim) {
            return Err(Error::InvalidParam {
                op,
                field: "dim",
                value: dim.to_string(),
                reason: format!("must be in [-{rank}, {rank}) for a rank-{rank} input {x}"),
            });
        }
        check_extents(op, "x", x)?;
        let axis = dim.rem_euclid(rank_i) as usize;
        let n = x.shape[axis];
        if i32::try_from(n).is_err() {
            return Err(Error::InvalidShape {
                op,
                field: "x",
                shape: x.shape.clone(),
                reason: format!(
                    "the {op} dim has {n} elements; at most {} are supported",
                    i32::MAX
                ),
            });
        }
        let outer = x.shape[..axis].iter().product();
        let inner = x.shape[axis + 1..].iter().product();
        Ok(SoftmaxPlan {
            output,
            device: device.clone(),
            outer,
            n,
            inner,
        })
    }

    pub(super) fn device(&self) -> &Device {
        &self.device
    }

    /// The op of `x` (planned as `spec`), into a new tensor.
    pub(super) fn forward(&self, spec: &TensorSpec, x: &Tensor) -> Result<Tensor, Error> {
        check_input(self.output.op(), "x", x, spec, &self.device)?;
        let mut y = Tensor::empty(spec, &self.device)?;
        self.forward_into(spec, x, &mut y)?;
        Ok(y)
    }

    /// The op of `x` (planned as `spec`), written into `y`.
    pub(super) fn forward_into(
        &self,
        spec: &TensorSpec,
        x: &Tensor,
        y: &mut Tensor,
    ) -> Result<(), Error> {
        let op = self.output.op();
        check_input(op, "x", x, spec, &self.device)?;
        check_input(op, "y", y, spec, &self.device)?;
        match self.device.cuda_device() {
            None => {
                let values = x.host_f64()?;
                y.set_host_f64(
                    &self
                        .output
                        .reference(&values, self.outer, self.n, self.inner),
                )
            }
            Some(dev) => self.launch(dev, spec, x, y),
        }
    }

    fn launch(
        &self,
        dev: &CudaDevice,
        spec: &TensorSpec,
        x: &Tensor,
        y: &mut Tensor,
    ) -> Result<(), Error> {
        let dtype = spec.dtype;
        let bases = self.output.bases();
        let op = self.output.op();
        let missing = || Error::MissingBuffer {
            op,
            field: "an input or output",
        };
        let xs = x.cuda_slice().ok_or_else(missing)?;
        let ys = y.cuda_slice_mut().ok_or_else(missing)?;
        launch::check_aligned(op, &dev.stream, &[xs, ys])?;
        let n = self.n as i32;
        let per_vector = 16 / dtype.size_in_bytes();

        if self.inner > 1 {
            let vectorized = self.inner.is_multiple_of(per_vector);
            let base = if vectorized {
                bases.cols_vec
            } else {
                bases.cols
            };
            let entry = kernels::entry(&SOFTMAX, base, dtype)?;
            let groups = self.outer * (self.inner / if vectorized { per_vector } else { 1 });
            // A grid-stride loop: enough blocks to fill the GPU several times over.
            let blocks = groups.div_ceil(256).min(dev.sm_count as usize * 16).max(1);
            let cfg = LaunchConfig {
                grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let (outer, inner) = (self.outer as i64, self.inner as i64);
            let function = kernels::function(dev, &SOFTMAX, entry)?;
            let mut call = dev.stream.launch_builder(&function);
            call.arg(xs).arg(&mut *ys).arg(&outer).arg(&n).arg(&inner);
            // SAFETY: the arguments match [log_]softmax_cols*(const T*, T*, long long, int, long long);
            // both buffers hold outer * n * inner elements of T.
            unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
            return Ok(());
        }

        let rows = self.outer as i64;
        match row_plan(self.n, dtype) {
            RowPlan::Regs4 {
                threads_per_row,
                rows_per_block,
            } => {
                let blocks = self.outer.div_ceil(rows_per_block as usize);
                let entry = kernels::entry(&SOFTMAX, bases.rows_v4, dtype)?;
                let cfg = LaunchConfig {
                    grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
                    block_dim: (threads_per_row, rows_per_block, 1),
                    shared_mem_bytes: 0,
                };
                self.launch_rows(dev, entry, cfg, xs, ys, rows, n)
            }
            RowPlan::Regs16 { threads_per_row } => {
                let entry = kernels::entry(&SOFTMAX, bases.rows_v16, dtype)?;
                let cfg = LaunchConfig {
                    grid_dim: (launch::grid_dim(entry, self.outer)?, 1, 1),
                    block_dim: (threads_per_row, 1, 1),
                    shared_mem_bytes: 0,
                };
                self.launch_rows(dev, entry, cfg, xs, ys, rows, n)
            }
            RowPlan::Long => {
                // Chunks of 256 threads x 8 vectors (the kernels' VPT); partials in a scratch
                // buffer of (max, sum) pairs.
                const THREADS: usize = 256;
                let chunk_vectors = THREADS * 8;
                let chunks = (self.n / per_vector).div_ceil(chunk_vectors).max(1);
                let partial = kernels::entry(&SOFTMAX, bases.partial, dtype)?;
                let finalize = kernels::entry(&SOFTMAX, bases.finalize, dtype)?;
                let grid_rows = self.outer.min(65_535);
                let cfg = LaunchConfig {
                    grid_dim: (launch::grid_dim(partial, chunks)?, grid_rows as u32, 1),
                    block_dim: (THREADS as u32, 1, 1),
                    shared_mem_bytes: 0,
                };
                let scratch_len = self.outer * chunks * 8;
                // SAFETY: every (row, chunk) pair is written by the partial kernel before the
                // finalize kernel reads it (same stream).
                let mut scratch = unsafe { dev.stream.alloc::<u8>(scratch_len) }
                    .map_err(|e| Error::driver(format!("allocating {op} scratch"), e))?;
                let function = kernels::function(dev, &SOFTMAX, partial)?;
                let mut call = dev.stream.launch_builder(&function);
                call.arg(xs).arg(&mut scratch).arg(&rows).arg(&n);
                // SAFETY: [log_]softmax_partial(const T*, float2*, long long, int); the scratch holds
                // rows * chunks float2 and the grid has `chunks` blocks in x.
                unsafe { call.launch(cfg) }.map_err(|e| Error::launch(partial, e))?;
                let function = kernels::function(dev, &SOFTMAX, finalize)?;
                let mut call = dev.stream.launch_builder(&function);
                call.arg(xs).arg(&scratch).arg(&mut *ys).arg(&rows).arg(&n);
                // SAFETY: [log_]softmax_finalize(const T*, const float2*, T*, long long, int), same grid.
                unsafe { call.launch(cfg) }.map_err(|e| Error::launch(finalize, e))?;
                Ok(())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_rows(
        &self,
        dev: &CudaDevice,
        entry: &'static str,
        cfg: LaunchConfig,
        xs: &cudarc::driver::CudaSlice<u8>,
        ys: &mut cudarc::driver::CudaSlice<u8>,
        rows: i64,
        n: i32,
    ) -> Result<(), Error> {
        let function = kernels::function(dev, &SOFTMAX, entry)?;
        let mut call = dev.stream.launch_builder(&function);
        call.arg(xs).arg(ys).arg(&rows).arg(&n);
        // SAFETY: [log_]softmax_rows_*(const T*, T*, long long, int); both buffers hold rows * n
        // elements; the block shape is within the kernel's launch bounds (see `row_plan`).
        unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
        Ok(())
    }
}

/// Softmax along `dim`, as `torch.nn.functional.softmax(x, dim)`, in float32, float16 or
/// bfloat16, accumulating in f32 on the GPU (f64 on the CPU). The last dim is the fast path.
///
/// A row that holds a NaN or `+inf`, or is all `-inf`, comes out all NaN, as in PyTorch.
///
/// ```
/// use tileops::ops::Softmax;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// let spec = TensorSpec::new([4, 1000], DType::BFloat16);
/// let softmax = Softmax::new(&device, spec.clone(), -1)?;
/// let x = Tensor::random(&spec, 0, &device)?;
/// let y = softmax.forward(&x)?;
/// let row: f32 = y.to_vec_f32()?[..1000].iter().sum();
/// assert!((row - 1.0).abs() < 0.02);
///
/// // Plans are checked up front: dim out of range, unsupported dtypes...
/// assert!(Softmax::new(&device, spec.clone(), 2).is_err());
/// assert!(Softmax::new(&device, TensorSpec::new([4], DType::Int32), 0).is_err());
/// // ...and inputs against the plan.
/// let other = Tensor::random(&TensorSpec::new([4, 999], DType::BFloat16), 0, &device)?;
/// assert!(softmax.forward(&other).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("softmax")]
#[derive(Debug, Clone)]
pub struct Softmax {
    /// The input the op is planned for (the manifest's formulas read its shape).
    x: TensorSpec,
    /// The dimension, as given (negative counts from the end).
    dim: i64,
    /// Validation, geometry and launch, shared with log_softmax.
    plan: SoftmaxPlan,
}

impl Softmax {
    /// The roof an optimal softmax is priced against: it is memory-bound work on CUDA cores.
    pub const ROOF: RoofKey = RoofKey::CUDA_CORE_FP32;

    /// Plans a softmax of inputs like `x` along `dim` (Python-style: `-1` is the last) on
    /// `device`.
    ///
    /// Errors when `x` has rank 0, no elements, or a dtype other than float32, float16 or
    /// bfloat16, or when `dim` is outside `[-rank, rank)`.
    pub fn new(device: &Device, x: TensorSpec, dim: i64) -> Result<Softmax, Error> {
        let plan = SoftmaxPlan::new(Output::Softmax, device, &x, dim)?;
        Ok(Softmax { x, dim, plan })
    }

    /// The input spec the op is planned for.
    pub fn x(&self) -> &TensorSpec {
        &self.x
    }

    /// The softmax dimension, as given to [`Softmax::new`].
    pub fn dim(&self) -> i64 {
        self.dim
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        self.plan.device()
    }

    /// Softmax of `x`, into a new tensor. `x` must match the plan (spec and device).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor, Error> {
        self.plan.forward(&self.x, x)
    }

    /// Softmax of `x`, written into `y` (same spec and device as `x`). On a GPU the call is
    /// asynchronous: copies and [`Device::synchronize`] wait for it.
    pub fn forward_into(&self, x: &Tensor, y: &mut Tensor) -> Result<(), Error> {
        self.plan.forward_into(&self.x, x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
        TensorSpec::new(shape, dtype)
    }

    /// The plan both ops build (their `new` is `SoftmaxPlan::new` plus the fields).
    fn plan_of(output: Output, device: &Device, x: TensorSpec, dim: i64) -> SoftmaxPlan {
        SoftmaxPlan::new(output, device, &x, dim).unwrap()
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for output in [Output::Softmax, Output::LogSoftmax] {
            for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
                for (shape, dim) in [
                    (vec![3, 7], -1),
                    (vec![2, 3, 4], 1),
                    (vec![5], 0),
                    (vec![2, 3, 4], 0),
                ] {
                    let s = spec(&shape, dtype);
                    let plan = plan_of(output, &cpu, s.clone(), dim);
                    let x = Tensor::random(&s, 11, &cpu).unwrap();
                    let y = plan.forward(&s, &x).unwrap();
                    assert_eq!(y.spec(), &s);
                    let expect =
                        output.reference(&x.to_vec_f64().unwrap(), plan.outer, plan.n, plan.inner);
                    let expect = Tensor::from_f64_rounded(&expect, &s, &cpu).unwrap();
                    assert_eq!(
                        y.to_bytes().unwrap(),
                        expect.to_bytes().unwrap(),
                        "{} {dtype} {shape:?} {dim}",
                        output.op()
                    );
                }
            }
        }
    }

    #[test]
    fn views_any_dim_as_outer_n_inner() {
        let cpu = Device::cpu();
        for output in [Output::Softmax, Output::LogSoftmax] {
            let plan = plan_of(output, &cpu, spec(&[2, 3, 4, 5], DType::Float32), -2);
            assert_eq!((plan.outer, plan.n, plan.inner), (6, 4, 5));
            let plan = plan_of(output, &cpu, spec(&[2, 3, 4, 5], DType::Float32), 0);
            assert_eq!((plan.outer, plan.n, plan.inner), (1, 2, 60));
        }
        assert_eq!(
            Softmax::new(&cpu, spec(&[2, 3], DType::Float32), 0)
                .unwrap()
                .dim(),
            0
        );
        assert_eq!(
            crate::ops::LogSoftmax::new(&cpu, spec(&[2, 3], DType::Float32), 0)
                .unwrap()
                .dim(),
            0
        );
    }
}
