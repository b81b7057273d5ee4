//! `softmax`: `exp(x - max) / sum(exp(x - max))` along one dimension, and all it shares with
//! `log_softmax` (`log_softmax.rs`): the plan ([`SoftmaxPlan`]: validation, the
//! `[outer, n, inner]` view, the kernel choice and launch, the CPU path) and the op's API, written
//! once in [`softmax_op!`]. The two ops differ only in their output step (the kernels' `LOG`
//! template flag, the reference), and `softmax.cu` holds both ops' kernels, named after the op.

use cudarc::driver::LaunchConfig;

use super::reference;
use crate::device::CudaDevice;
use crate::kernels::{self, SOFTMAX};
use crate::ops::backend::cpu_f64;
use crate::ops::launch::{self, launch};
use crate::ops::{check_extents, check_float_dtype, check_has_dims, pow2_clamped};
use crate::{DType, Error, Tensor, TensorSpec};

/// The f64 reference of a softmax-like op over `[outer, n, inner]`: its CPU backend.
pub(super) type Reference = fn(&[f64], usize, usize, usize) -> Vec<f64>;

/// A softmax or log_softmax planned for one input spec and dim: the input viewed as
/// `[outer, n, inner]`, normalized over `n`. The ops hold the spec, dim and device themselves
/// (the manifest's formulas read them) and pass what the plan needs in.
#[derive(Debug, Clone)]
pub(super) struct SoftmaxPlan {
    /// The op's manifest name, which is also the prefix of its entry points in `softmax.cu`.
    op: &'static str,
    reference: Reference,
    pub(super) outer: usize,
    pub(super) n: usize,
    pub(super) inner: usize,
}

impl SoftmaxPlan {
    /// Checks `x` and `dim` for op `op` (see [`Softmax::new`]) and views `x` as
    /// `[outer, n, inner]`.
    pub(super) fn new(
        op: &'static str,
        reference: Reference,
        x: &TensorSpec,
        dim: i64,
    ) -> Result<SoftmaxPlan, Error> {
        check_float_dtype(op, "x", x)?;
        check_has_dims(op, "x", x, "")?;
        let rank = x.rank();
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
            op,
            reference,
            outer,
            n,
            inner,
        })
    }

    /// The CPU backend: the reference on a host copy.
    pub(super) fn cpu(
        &self,
        x: crate::TensorRef<'_>,
        y: &mut crate::TensorMut<'_>,
    ) -> Result<(), Error> {
        cpu_f64([x], y, |[x]| {
            (self.reference)(&x, self.outer, self.n, self.inner)
        })
    }

    /// The entry point `{op}_{kernel}_{dtype}`.
    fn entry(&self, kernel: &str, dtype: DType) -> Result<&'static str, Error> {
        kernels::entry(&SOFTMAX, &format!("{}_{kernel}", self.op), dtype)
    }

    /// The CUDA backend: the kernels for the layout, on `x`'s and `y`'s buffers (of `dtype`).
    pub(super) fn cuda(
        &self,
        dev: &CudaDevice,
        dtype: DType,
        xs: &cudarc::driver::CudaView<'_, u8>,
        ys: &mut cudarc::driver::CudaViewMut<'_, u8>,
    ) -> Result<(), Error> {
        let n = self.n as i32;
        let per_vector = 16 / dtype.size_in_bytes();

        if self.inner > 1 {
            let vectorized = self.inner.is_multiple_of(per_vector);
            let entry = self.entry(if vectorized { "cols_vec" } else { "cols" }, dtype)?;
            let groups = self.outer * (self.inner / if vectorized { per_vector } else { 1 });
            // A grid-stride loop: enough blocks to fill the GPU several times over.
            let blocks = groups.div_ceil(256).min(dev.sm_count as usize * 16).max(1);
            let cfg = LaunchConfig {
                grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let (outer, inner) = (self.outer as i64, self.inner as i64);
            // SAFETY: [log_]softmax_cols*(const T*, T*, long long, int, long long); both buffers
            // hold outer * n * inner elements of T.
            return unsafe { launch!(dev, &SOFTMAX, entry, cfg; xs, ys, &outer, &n, &inner) };
        }

        let rows = self.outer as i64;
        let (entry, blocks, block) = match rows_plan(self.n, dtype) {
            SoftmaxRows::Regs {
                vectors_per_thread,
                threads_per_row,
                rows_per_block,
            } => (
                self.entry(&format!("rows_v{vectors_per_thread}"), dtype)?,
                self.outer.div_ceil(rows_per_block as usize),
                (threads_per_row, rows_per_block, 1),
            ),
            SoftmaxRows::Long => return self.cuda_long(dev, dtype, xs, ys),
        };
        let cfg = LaunchConfig {
            grid_dim: (launch::grid_dim(entry, blocks)?, 1, 1),
            block_dim: block,
            shared_mem_bytes: 0,
        };
        // SAFETY: [log_]softmax_rows_*(const T*, T*, long long, int); both buffers hold rows * n
        // elements; the block shape is within the kernel's launch bounds (see `rows_plan`).
        unsafe { launch!(dev, &SOFTMAX, entry, cfg; xs, ys, &rows, &n) }
    }

    /// Rows too long for one block's registers: chunks of 256 threads x 8 vectors (the kernels'
    /// VPT), partials in a scratch buffer of (max, sum) pairs, then a finalize pass.
    fn cuda_long(
        &self,
        dev: &CudaDevice,
        dtype: DType,
        xs: &cudarc::driver::CudaView<'_, u8>,
        ys: &mut cudarc::driver::CudaViewMut<'_, u8>,
    ) -> Result<(), Error> {
        const THREADS: usize = 256;
        let (rows, n) = (self.outer as i64, self.n as i32);
        let per_vector = 16 / dtype.size_in_bytes();
        let chunk_vectors = THREADS * 8;
        let chunks = (self.n / per_vector).div_ceil(chunk_vectors).max(1);
        let partial = self.entry("partial", dtype)?;
        let finalize = self.entry("finalize", dtype)?;
        let grid_rows = self.outer.min(65_535);
        let cfg = LaunchConfig {
            grid_dim: (launch::grid_dim(partial, chunks)?, grid_rows as u32, 1),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let scratch_len = self.outer * chunks * 8;
        // SAFETY: every (row, chunk) pair is written by the partial kernel before the finalize
        // kernel reads it (same stream).
        let mut scratch = unsafe { dev.stream.alloc::<u8>(scratch_len) }
            .map_err(|e| Error::driver(format!("allocating {} scratch", self.op), e))?;
        // SAFETY: [log_]softmax_partial(const T*, float2*, long long, int); the scratch holds
        // rows * chunks float2 and the grid has `chunks` blocks in x.
        unsafe { launch!(dev, &SOFTMAX, partial, cfg; xs, &mut scratch, &rows, &n) }?;
        // SAFETY: [log_]softmax_finalize(const T*, const float2*, T*, long long, int), same grid.
        unsafe { launch!(dev, &SOFTMAX, finalize, cfg; xs, &scratch, ys, &rows, &n) }
    }
}

/// How a last-dim softmax row is launched: the row in registers, or too long for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SoftmaxRows {
    /// Entry `*_rows_v{vectors_per_thread}`: up to that many 16-byte vectors per thread.
    Regs {
        vectors_per_thread: u32,
        threads_per_row: u32,
        rows_per_block: u32,
    },
    /// Partial + finalize.
    Long,
}

/// Picks the row kernel for rows of `n` elements of `dtype`, within the kernels' launch bounds:
/// - `v4` up to 256 threads (1024 vectors), small rows sharing a block of at least 128 threads;
///   at most 64 registers (its bound is 1024 threads), so at least 4 blocks of 256 per SM;
/// - `v8` from 1025 to 4096 vectors, 256 or 512 threads, at 2 blocks of 512 per SM (its bounds):
///   while one block reduces, the other's loads are in flight, where the 1024-thread block a
///   4096-vector row needs at 4 vectors a thread is alone on its SM;
/// - `v16` up to 8192 vectors, 512 threads.
pub(super) fn rows_plan(n: usize, dtype: DType) -> SoftmaxRows {
    let vectors = n / (16 / dtype.size_in_bytes());
    let regs = |vectors_per_thread: usize, min: usize, max: usize| {
        let threads_per_row = pow2_clamped(vectors.div_ceil(vectors_per_thread), min, max);
        SoftmaxRows::Regs {
            vectors_per_thread: vectors_per_thread as u32,
            threads_per_row: threads_per_row as u32,
            rows_per_block: (128 / threads_per_row).max(1) as u32,
        }
    };
    if vectors <= 4 * 256 {
        regs(4, 32, 256)
    } else if vectors <= 8 * 512 {
        regs(8, 256, 512)
    } else if vectors <= 16 * 512 {
        regs(16, 32, 512)
    } else {
        SoftmaxRows::Long
    }
}

/// A softmax-like op, written once: the struct (input spec, dim, device, plan), its API, its two
/// backends, and its bench hooks. `$reference` is its f64 reference over `[outer, n, inner]`.
macro_rules! softmax_op {
    ($(#[$doc:meta])* $name:ident, $manifest:tt, $reference:path) => {
        $(#[$doc])*
        #[crate::roofline_op($manifest)]
        #[derive(Debug, Clone)]
        pub struct $name {
            /// The input the op is planned for (the manifest's formulas read its shape).
            x: crate::TensorSpec,
            /// The dimension, as given (negative counts from the end).
            dim: i64,
            device: crate::Device,
            /// Validation, geometry and launch, shared by softmax and log_softmax.
            plan: $crate::ops::reduction::softmax::SoftmaxPlan,
        }

        impl $name {
            /// The roof an optimal implementation is priced against: it is memory-bound work on
            /// CUDA cores.
            pub const ROOF: crate::registry::RoofKey = crate::registry::RoofKey::CUDA_CORE_FP32;

            /// Plans the op for inputs like `x` along `dim` (Python-style: `-1` is the last) on
            /// `device`.
            ///
            /// Errors when `x` has rank 0, no elements, or a dtype other than float32, float16
            /// or bfloat16, or when `dim` is outside `[-rank, rank)`.
            pub fn new(
                x: crate::TensorSpec,
                dim: i64,
                device: &crate::Device,
            ) -> Result<Self, crate::Error> {
                use crate::registry::ManifestOp;
                let plan = $crate::ops::reduction::softmax::SoftmaxPlan::new(
                    Self::NAME,
                    $reference,
                    &x,
                    dim,
                )?;
                Ok($name {
                    x,
                    dim,
                    device: device.clone(),
                    plan,
                })
            }

            /// The input spec the op is planned for.
            pub fn x(&self) -> &crate::TensorSpec {
                &self.x
            }

            /// The dimension, as given to `new`.
            pub fn dim(&self) -> i64 {
                self.dim
            }

            /// The device the op runs on.
            pub fn device(&self) -> &crate::Device {
                &self.device
            }

            /// The op of `x`, into a new tensor. `x` must match the plan (spec and device).
            pub fn forward<'t>(&self, x: impl Into<crate::TensorRef<'t>>) -> Result<crate::Tensor, crate::Error> {
                use crate::registry::ManifestOp;
                let x = x.into();
                crate::ops::check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                let mut y = crate::Tensor::empty(&self.x, &self.device)?;
                self.forward_into(x, &mut y)?;
                Ok(y)
            }

            /// The op of `x`, written into `y` (same spec and device as `x`). On a GPU the call
            /// is asynchronous: copies and [`Device::synchronize`](crate::Device::synchronize)
            /// wait for it.
            pub fn forward_into<'t>(
                &self,
                x: impl Into<crate::TensorRef<'t>>,
                y: impl Into<crate::TensorMut<'t>>,
            ) -> Result<(), crate::Error> {
                use crate::registry::ManifestOp;
                let x = x.into();
                let y = y.into();
                crate::ops::check_input(Self::NAME, "x", &x, &self.x, &self.device)?;
                crate::ops::check_input(Self::NAME, "y", &y, &self.x, &self.device)?;
                crate::ops::backend::forward(self, [x], [y])
            }
        }

        impl crate::ops::backend::Backends<1, 1> for $name {
            fn device(&self) -> &crate::Device {
                &self.device
            }

            fn cpu(
                &self,
                [x]: [crate::TensorRef<'_>; 1],
                [mut y]: [crate::TensorMut<'_>; 1],
            ) -> Result<(), crate::Error> {
                self.plan.cpu(x, &mut y)
            }

            fn cuda(
                &self,
                dev: &crate::device::CudaDevice,
                [ref xs]: [cudarc::driver::CudaView<'_, u8>; 1],
                [ref mut ys]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
            ) -> Result<(), crate::Error> {
                self.plan.cuda(dev, self.x.dtype, xs, ys)
            }
        }

        impl crate::registry::FromWorkload for $name {
            /// `x_shape` and the case dtype; `dim` from the row, else the manifest's default.
            fn from_workload(
                device: &crate::Device,
                case: &crate::registry::WorkloadCase,
            ) -> Result<Self, crate::Error> {
                use crate::registry::ManifestOp;
                let x = case.require_input(Self::NAME, "x")?;
                let value = crate::ops::backend::workload_param::<Self>(case, "dim")?;
                let dim = value
                    .as_int()
                    .and_then(|d| i64::try_from(d).ok())
                    .ok_or_else(|| crate::Error::InvalidParam {
                        op: Self::NAME,
                        field: "dim",
                        value: format!("{value:?}"),
                        reason: "must be an integer".to_owned(),
                    })?;
                $name::new(x, dim, device)
            }
        }

        crate::ops::backend::unary_bench_op!($name, |op| op.x);
    };
}
pub(super) use softmax_op;

softmax_op!(
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
    /// let softmax = Softmax::new(spec.clone(), -1, &device)?;
    /// let x = Tensor::random(&spec, 0, &device)?;
    /// let y = softmax.forward(&x)?;
    /// let row: f32 = y.to_vec_f32()?[..1000].iter().sum();
    /// assert!((row - 1.0).abs() < 0.02);
    ///
    /// // Plans are checked up front: dim out of range, unsupported dtypes...
    /// assert!(Softmax::new(spec.clone(), 2, &device).is_err());
    /// assert!(Softmax::new(TensorSpec::new([4], DType::Int32), 0, &device).is_err());
    /// // ...and inputs against the plan.
    /// let other = Tensor::random(&TensorSpec::new([4, 999], DType::BFloat16), 0, &device)?;
    /// assert!(softmax.forward(&other).is_err());
    /// # Ok::<(), tileops::Error>(())
    /// ```
    Softmax,
    "softmax",
    reference::softmax
);

/// Softmax of `x` along `dim` (Python-style: `-1` is the last), in one call: plans a [`Softmax`]
/// for `x`'s spec on its device and runs it.
///
/// ```
/// use tileops::{Device, Tensor};
///
/// let device = Device::cpu();
/// let x = Tensor::from_f32_slice(&[0.0, 0.0, 5.0, 5.0], [2, 2], &device)?;
/// assert_eq!(tileops::ops::softmax(&x, -1)?.to_vec_f32()?, vec![0.5; 4]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn softmax(x: &Tensor, dim: i64) -> Result<Tensor, Error> {
    Softmax::new(x.spec().clone(), dim, x.device())?.forward(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use crate::ops::LogSoftmax;
    use crate::ops::backend::assert_rounds_to;
    use crate::registry::ManifestOp;

    fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
        TensorSpec::new(shape, dtype)
    }

    /// The two ops: name and reference.
    const OPS: [(&str, Reference); 2] = [
        (Softmax::NAME, reference::softmax),
        (LogSoftmax::NAME, reference::log_softmax),
    ];

    /// The plan both ops build (their `new` is `SoftmaxPlan::new` plus the fields).
    fn plan_of(op: &'static str, reference: Reference, x: TensorSpec, dim: i64) -> SoftmaxPlan {
        SoftmaxPlan::new(op, reference, &x, dim).unwrap()
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype() {
        let cpu = Device::cpu();
        for (op, reference) in OPS {
            for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
                for (shape, dim) in [
                    (vec![3, 7], -1),
                    (vec![2, 3, 4], 1),
                    (vec![5], 0),
                    (vec![2, 3, 4], 0),
                ] {
                    let s = spec(&shape, dtype);
                    let plan = plan_of(op, reference, s.clone(), dim);
                    let x = Tensor::random(&s, 11, &cpu).unwrap();
                    let mut y = Tensor::empty(&s, &cpu).unwrap();
                    plan.cpu(x.as_tensor_ref(), &mut y.as_tensor_mut()).unwrap();
                    assert_eq!(y.spec(), &s);
                    let expect =
                        reference(&x.to_vec_f64().unwrap(), plan.outer, plan.n, plan.inner);
                    assert_rounds_to(&y, &expect, format_args!("{op} {dtype} {shape:?} {dim}"));
                }
            }
        }
    }

    #[test]
    fn views_any_dim_as_outer_n_inner() {
        let cpu = Device::cpu();
        for (op, reference) in OPS {
            let plan = plan_of(op, reference, spec(&[2, 3, 4, 5], DType::Float32), -2);
            assert_eq!((plan.outer, plan.n, plan.inner), (6, 4, 5));
            let plan = plan_of(op, reference, spec(&[2, 3, 4, 5], DType::Float32), 0);
            assert_eq!((plan.outer, plan.n, plan.inner), (1, 2, 60));
        }
        assert_eq!(
            Softmax::new(spec(&[2, 3], DType::Float32), 0, &cpu)
                .unwrap()
                .dim(),
            0
        );
        assert_eq!(
            LogSoftmax::new(spec(&[2, 3], DType::Float32), 0, &cpu)
                .unwrap()
                .dim(),
            0
        );
    }

    #[test]
    fn rows_plans_cover_the_workloads() {
        let regs = |vectors_per_thread, threads_per_row, rows_per_block| SoftmaxRows::Regs {
            vectors_per_thread,
            threads_per_row,
            rows_per_block,
        };
        // attn-weights-4k: 512 bf16 vectors, 128 threads x 4; 1024 f32 vectors, 256 x 4.
        assert_eq!(rows_plan(4096, DType::BFloat16), regs(4, 128, 1));
        assert_eq!(rows_plan(4096, DType::Float32), regs(4, 256, 1));
        // attn-weights-32k bf16: 4096 vectors, 512 threads x 8 (2 blocks per SM).
        assert_eq!(rows_plan(32768, DType::BFloat16), regs(8, 512, 1));
        assert_eq!(rows_plan(32768, DType::Float32), regs(16, 512, 1));
        assert_eq!(rows_plan(8 * 1025, DType::Float16), regs(8, 256, 1));
        assert_eq!(rows_plan(7, DType::Float32), regs(4, 32, 4));
        assert_eq!(rows_plan(102400, DType::Float32), SoftmaxRows::Long);
    }

    #[test]
    fn every_planned_row_fits_its_kernel() {
        // The kernels' launch bounds: v4 1024 threads, v8 and v16 512.
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            let per_vector = 16 / dtype.size_in_bytes();
            for n in (1..70_000)
                .step_by(997)
                .chain([4096, 4097, 8192, 8193, 16384, 32768, 65536])
            {
                let vectors = n / per_vector;
                match rows_plan(n, dtype) {
                    SoftmaxRows::Regs {
                        vectors_per_thread,
                        threads_per_row,
                        rows_per_block,
                    } => {
                        let bound = if vectors_per_thread == 4 { 1024 } else { 512 };
                        assert!(
                            vectors <= (vectors_per_thread * threads_per_row) as usize,
                            "{n} {dtype}"
                        );
                        assert!(threads_per_row * rows_per_block <= bound, "{n} {dtype}");
                        assert!(rows_per_block <= 32 && threads_per_row % 32 == 0);
                    }
                    SoftmaxRows::Long => assert!(vectors > 16 * 512),
                }
            }
        }
    }
}
