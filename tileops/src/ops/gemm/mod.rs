//! The `gemm` family of the manifest: the dense matrix product `c = op(a) @ op(b)`,
//! `op(t) = t.T` when its option is set, through cuBLASLt on the GPU (plain cuBLAS `Sgemm` for
//! strict float32; see `kernels::blas`) and the f64 reference on the CPU.

pub(crate) mod reference;

use std::sync::Arc;

use crate::device::CudaDevice;
use crate::kernels::blas::{ColMajor, MatmulPlan, OP_N, OP_T, Problem};
use crate::ops::backend::{self, Backends, cpu_f64, exact_inputs, workload_bool};
use crate::ops::{check_extents, check_input};
use crate::registry::{BenchOp, FromWorkload, ManifestOp, RoofKey, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorSpec};

const OP: &str = Gemm::NAME;

/// How the operands of a [`Gemm` op](crate::ops::Gemm) are read: named options instead of positional
/// flags.
///
/// `Default` is the plain product `a @ b` in strict float32 when the dtype is float32; the
/// setters chain, as candle's and PyTorch's keyword arguments read:
///
/// ```
/// use tileops::ops::GemmOptions;
///
/// // x @ w.T with an nn.Linear weight w of shape [N, K].
/// let linear = GemmOptions::new().trans_b(true);
/// assert_eq!(linear, GemmOptions { trans_b: true, ..GemmOptions::default() });
/// assert!(!linear.trans_a && !linear.allow_tf32);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GemmOptions {
    /// `a` is stored `[K, M]` and used transposed.
    pub trans_a: bool,
    /// `b` is stored `[N, K]` (an `nn.Linear` weight) and used transposed.
    pub trans_b: bool,
    /// float32 only: run on the tensor cores as TF32 (inputs rounded to 10 mantissa bits, like
    /// PyTorch's `allow_tf32`). Ignored by the CPU backend.
    pub allow_tf32: bool,
}

impl GemmOptions {
    /// The plain product `a @ b`: no transposes, strict float32 (the same as `default()`).
    pub const fn new() -> GemmOptions {
        GemmOptions {
            trans_a: false,
            trans_b: false,
            allow_tf32: false,
        }
    }

    /// Sets [`trans_a`](GemmOptions::trans_a).
    pub const fn trans_a(mut self, trans_a: bool) -> GemmOptions {
        self.trans_a = trans_a;
        self
    }

    /// Sets [`trans_b`](GemmOptions::trans_b).
    pub const fn trans_b(mut self, trans_b: bool) -> GemmOptions {
        self.trans_b = trans_b;
        self
    }

    /// Sets [`allow_tf32`](GemmOptions::allow_tf32).
    pub const fn allow_tf32(mut self, allow_tf32: bool) -> GemmOptions {
        self.allow_tf32 = allow_tf32;
        self
    }
}

/// `op(a) @ op(b)` in one call: plans a [`Gemm`] for the tensors' specs on their device and runs
/// it. Build the plan once with [`Gemm::new`] when the same shapes run repeatedly (on a GPU the
/// plan holds the cuBLASLt algorithm).
///
/// ```
/// use tileops::ops::{self, GemmOptions};
/// use tileops::{Device, Tensor};
///
/// let cpu = Device::cpu();
/// let a = Tensor::from_f32_slice(&[1.0, 2.0, 3.0, 4.0], [2, 2], &cpu)?;
/// let b = Tensor::from_f32_slice(&[1.0, 0.0, 1.0, 1.0], [2, 2], &cpu)?;
/// let c = ops::gemm(&a, &b, GemmOptions::default())?;
/// assert_eq!(c.to_vec_f32()?, vec![3.0, 2.0, 7.0, 4.0]);
/// // With b used transposed: a @ b.T.
/// let c = ops::gemm(&a, &b, GemmOptions::new().trans_b(true))?;
/// assert_eq!(c.to_vec_f32()?, vec![1.0, 3.0, 3.0, 7.0]);
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn gemm(a: &Tensor, b: &Tensor, options: GemmOptions) -> Result<Tensor, Error> {
    Gemm::new(a.spec().clone(), b.spec().clone(), options, a.device())?.forward(a, b)
}

/// The dense matrix product `c = op(a) @ op(b)` of row-major matrices, as `torch.matmul` (with
/// `a.T` / `b.T` for the transpose options), in float16 or bfloat16 with f32 accumulation, or
/// float32.
///
/// - `a` is stored `[M, K]`, or `[K, M]` with `trans_a`; `b` is stored `[K, N]`, or `[N, K]` with
///   `trans_b` (an `nn.Linear` weight); `c` is `[M, N]`, in the dtype of `a` and `b`.
/// - float16 and bfloat16 run on the tensor cores through cuBLASLt (f32 compute and scale).
/// - float32 is strict by default (cuBLAS `Sgemm`, f32 multiply-adds: cuBLASLt's float32 path
///   would round the inputs to TF32). `allow_tf32` runs it through cuBLASLt with
///   `CUBLAS_COMPUTE_32F_FAST_TF32` instead: inputs rounded to 10 mantissa bits, like PyTorch's
///   `allow_tf32`.
/// - The CPU path is the f64 reference (`tileops::ops::reference::gemm`), rounded once to the
///   output dtype; it ignores `allow_tf32`.
///
/// ```
/// use tileops::ops::{Gemm, GemmOptions};
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// // x @ w.T with an nn.Linear weight w of shape [N, K].
/// let x = TensorSpec::new([4, 64], DType::BFloat16);
/// let w = TensorSpec::new([32, 64], DType::BFloat16);
/// let linear = GemmOptions::new().trans_b(true);
/// let gemm = Gemm::new(x.clone(), w.clone(), linear, &device)?;
/// let (m, n, k) = gemm.mnk();
/// assert_eq!((m, n, k), (4, 32, 64));
/// let ones = Tensor::full(&x, 1.0, &device)?;
/// let halves = Tensor::full(&w, 0.5, &device)?;
/// let y = gemm.forward(&ones, &halves)?;
/// assert_eq!(y.shape(), &[4, 32]);
/// assert!(y.to_vec_f32()?.iter().all(|&v| v == 32.0));
///
/// // Plans are checked up front: inner dims must agree, dtypes must match.
/// assert!(Gemm::new(x.clone(), w.clone(), GemmOptions::default(), &device).is_err());
/// let w16 = TensorSpec::new([32, 64], DType::Float16);
/// assert!(Gemm::new(x, w16, linear, &device).is_err());
/// # Ok::<(), tileops::Error>(())
/// ```
#[crate::roofline_op("gemm")]
#[derive(Debug, Clone)]
pub struct Gemm {
    /// The left operand as stored: `[M, K]`, or `[K, M]` with `trans_a`.
    a: TensorSpec,
    /// The right operand as stored: `[K, N]`, or `[N, K]` with `trans_b`.
    b: TensorSpec,
    /// Whether `a` is used transposed.
    trans_a: bool,
    /// Whether `b` is used transposed.
    trans_b: bool,
    /// float32 only: run on the tensor cores as TF32.
    allow_tf32: bool,
    device: Device,
    /// The logical sizes: `c[M, N] = op(a)[M, K] @ op(b)[K, N]`.
    m: usize,
    n: usize,
    k: usize,
    /// The output spec `[M, N]`.
    c: TensorSpec,
    /// The GPU plan, made in `new` on a GPU: the cuBLASLt descriptors and algorithm, or cuBLAS.
    gpu: Option<Arc<MatmulPlan>>,
}

impl Gemm {
    /// Plans `op(a) @ op(b)` for operands like `a` and `b` (as stored) on `device`, read as
    /// `options` say.
    ///
    /// Errors when `a` or `b` is not rank 2, has an empty dimension or a dimension beyond
    /// `i32::MAX`; when a dtype is not float16, bfloat16 or float32, or the two differ; when the
    /// inner dims disagree (`K` of `op(a)` against `K` of `op(b)`); when `allow_tf32` is set for
    /// a dtype other than float32; and, on a GPU, when cuBLAS/cuBLASLt cannot be loaded or has no
    /// algorithm for the problem.
    pub fn new(
        a: TensorSpec,
        b: TensorSpec,
        options: GemmOptions,
        device: &Device,
    ) -> Result<Gemm, Error> {
        let GemmOptions {
            trans_a,
            trans_b,
            allow_tf32,
        } = options;
        const SUPPORTED: [DType; 3] = [DType::Float16, DType::BFloat16, DType::Float32];
        if !SUPPORTED.contains(&a.dtype) {
            return Err(Error::InvalidDType {
                op: OP,
                field: "a",
                value: a.dtype,
                supported: "float16, bfloat16, float32".to_owned(),
            });
        }
        if b.dtype != a.dtype {
            return Err(Error::InvalidDType {
                op: OP,
                field: "b",
                value: b.dtype,
                supported: format!("the dtype of a ({})", a.dtype),
            });
        }
        for (field, spec) in [("a", &a), ("b", &b)] {
            if spec.rank() != 2 {
                return Err(Error::InvalidShape {
                    op: OP,
                    field,
                    shape: spec.shape.clone(),
                    reason: format!("{OP} takes matrices (rank 2), not rank {}", spec.rank()),
                });
            }
            check_extents(OP, field, spec)?;
            if spec.shape.iter().any(|&d| i32::try_from(d).is_err()) {
                return Err(Error::InvalidShape {
                    op: OP,
                    field,
                    shape: spec.shape.clone(),
                    reason: format!("each dimension must be at most {} (cuBLAS)", i32::MAX),
                });
            }
        }
        let (m, k) = if trans_a {
            (a.shape[1], a.shape[0])
        } else {
            (a.shape[0], a.shape[1])
        };
        let (k_b, n) = if trans_b {
            (b.shape[1], b.shape[0])
        } else {
            (b.shape[0], b.shape[1])
        };
        if k != k_b {
            let layout = |t: bool, name: &str| {
                if t {
                    format!("{name}.T")
                } else {
                    name.to_owned()
                }
            };
            return Err(Error::InvalidShape {
                op: OP,
                field: "b",
                shape: b.shape.clone(),
                reason: format!(
                    "inner dims disagree: {} is [{m}, {k}] but {} is [{k_b}, {n}] (a is {:?}, \
                     trans_a={trans_a}, trans_b={trans_b})",
                    layout(trans_a, "a"),
                    layout(trans_b, "b"),
                    a.shape
                ),
            });
        }
        if allow_tf32 && a.dtype != DType::Float32 {
            return Err(Error::InvalidParam {
                op: OP,
                field: "allow_tf32",
                value: "true".to_owned(),
                reason: format!("TF32 applies to float32 only; a and b are {}", a.dtype),
            });
        }
        let c = TensorSpec::new([m, n], a.dtype);
        if !c
            .size_in_bytes()
            .is_ok_and(|bytes| bytes <= isize::MAX as usize)
        {
            return Err(Error::InvalidShape {
                op: OP,
                field: "c",
                shape: vec![m, n],
                reason: "too many elements to address".to_owned(),
            });
        }
        let mut plan = Gemm {
            a,
            b,
            trans_a,
            trans_b,
            allow_tf32,
            device: device.clone(),
            m,
            n,
            k,
            c,
            gpu: None,
        };
        if let Some(dev) = device.cuda_device() {
            let problem = Problem {
                dtype: plan.a.dtype,
                allow_tf32,
                cm: col_major(&plan),
                what: plan.describe(),
            };
            plan.gpu = Some(Arc::new(MatmulPlan::new(dev, problem)?));
        }
        Ok(plan)
    }

    /// The roof an optimal implementation is priced against: the tensor cores of the dtype
    /// (`tensor_core.fp16`, `.bf16`; `.tf32` for float32 with `allow_tf32`). Strict float32 may
    /// not round its inputs to TF32, so its optimum is FP32 multiply-adds on the CUDA cores.
    pub fn roof(&self) -> RoofKey {
        match (self.a.dtype, self.allow_tf32) {
            (DType::Float32, false) => RoofKey::CUDA_CORE_FP32,
            (dtype, _) => RoofKey::tensor_core(dtype).unwrap_or(RoofKey::CUDA_CORE_FP32),
        }
    }

    /// The left operand's spec, as stored.
    pub fn a(&self) -> &TensorSpec {
        &self.a
    }

    /// The right operand's spec, as stored.
    pub fn b(&self) -> &TensorSpec {
        &self.b
    }

    /// The output spec, `[M, N]`.
    pub fn c(&self) -> &TensorSpec {
        &self.c
    }

    /// Whether `a` is used transposed.
    pub fn trans_a(&self) -> bool {
        self.trans_a
    }

    /// Whether `b` is used transposed.
    pub fn trans_b(&self) -> bool {
        self.trans_b
    }

    /// Whether float32 runs as TF32.
    pub fn allow_tf32(&self) -> bool {
        self.allow_tf32
    }

    /// The options the plan was made with.
    pub fn options(&self) -> GemmOptions {
        GemmOptions {
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            allow_tf32: self.allow_tf32,
        }
    }

    /// The problem in words, for cuBLAS errors: `bfloat16 [M, K] x [K, N] trans_b`.
    fn describe(&self) -> String {
        format!(
            "{}{} [{}, {}] x [{}, {}]{}{}",
            self.a.dtype,
            if self.allow_tf32 { " as TF32" } else { "" },
            self.m,
            self.k,
            self.k,
            self.n,
            if self.trans_a { " trans_a" } else { "" },
            if self.trans_b { " trans_b" } else { "" },
        )
    }

    /// The logical sizes `(M, N, K)`: `c[M, N] = op(a)[M, K] @ op(b)[K, N]`.
    pub fn mnk(&self) -> (usize, usize, usize) {
        (self.m, self.n, self.k)
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `op(a) @ op(b)` into a new `[M, N]` tensor; `a` and `b` must match the plan.
    pub fn forward<'t>(
        &self,
        a: impl Into<crate::TensorRef<'t>>,
        b: impl Into<crate::TensorRef<'t>>,
    ) -> Result<Tensor, Error> {
        let a = a.into();
        let b = b.into();
        check_input(OP, "a", &a, &self.a, &self.device)?;
        check_input(OP, "b", &b, &self.b, &self.device)?;
        let mut c = Tensor::empty(&self.c, &self.device)?;
        self.forward_into(a, b, &mut c)?;
        Ok(c)
    }

    /// `op(a) @ op(b)` written into `c` (the plan's output spec, same device). Asynchronous on a
    /// GPU: copies and [`Device::synchronize`] wait for it.
    pub fn forward_into<'t>(
        &self,
        a: impl Into<crate::TensorRef<'t>>,
        b: impl Into<crate::TensorRef<'t>>,
        c: impl Into<crate::TensorMut<'t>>,
    ) -> Result<(), Error> {
        let a = a.into();
        let b = b.into();
        let c = c.into();
        check_input(OP, "a", &a, &self.a, &self.device)?;
        check_input(OP, "b", &b, &self.b, &self.device)?;
        check_input(OP, "c", &c, &self.c, &self.device)?;
        backend::forward(self, [a, b], [c])
    }
}

impl Backends<2, 1> for Gemm {
    fn device(&self) -> &Device {
        &self.device
    }

    fn cpu(
        &self,
        [a, b]: [crate::TensorRef<'_>; 2],
        [mut c]: [crate::TensorMut<'_>; 1],
    ) -> Result<(), Error> {
        cpu_f64([a, b], &mut c, |[a, b]| {
            reference::gemm(&a, &b, self.m, self.n, self.k, self.trans_a, self.trans_b)
        })
    }

    fn cuda(
        &self,
        dev: &CudaDevice,
        [ref a, ref b]: [cudarc::driver::CudaView<'_, u8>; 2],
        [ref mut c]: [cudarc::driver::CudaViewMut<'_, u8>; 1],
    ) -> Result<(), Error> {
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| Error::internal(format!("{OP}: a GPU device without its GPU plan")))?;
        gpu.run(dev, a, b, c)
    }
}

/// The column-major problem cuBLAS sees for `plan` (see [`ColMajor`]): b first, then a.
fn col_major(plan: &Gemm) -> ColMajor {
    let op = |t: bool| if t { OP_T } else { OP_N };
    ColMajor {
        op_first: op(plan.trans_b),
        op_second: op(plan.trans_a),
        m: plan.n as u64,
        n: plan.m as u64,
        k: plan.k as u64,
        ld_first: plan.b.shape[1] as i64,
        ld_second: plan.a.shape[1] as i64,
        ld_c: plan.n as i64,
    }
}

impl FromWorkload for Gemm {
    /// `a_shape`, `b_shape` and the case dtype; `trans_a`, `trans_b` and `allow_tf32` from the
    /// row, else the manifest's defaults.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let options = GemmOptions {
            trans_a: workload_bool::<Gemm>(case, "trans_a")?,
            trans_b: workload_bool::<Gemm>(case, "trans_b")?,
            allow_tf32: workload_bool::<Gemm>(case, "allow_tf32")?,
        };
        Gemm::new(
            case.require_input(OP, "a")?,
            case.require_input(OP, "b")?,
            options,
            device,
        )
    }
}

impl BenchOp for Gemm {
    fn roof(&self) -> RoofKey {
        Gemm::roof(self)
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        backend::random_inputs([&self.a, &self.b], seed, &self.device)
    }

    fn placeholder_inputs(&self) -> Result<Vec<Tensor>, Error> {
        backend::placeholder_inputs([&self.a, &self.b], &self.device)
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [a, b] = exact_inputs::<Self, 2>(inputs)?;
        Ok(vec![self.forward(a, b)?])
    }

    /// Reads a and b once, writes c once: the manifest's bytes are exactly this minimum.
    fn traffic(&self) -> Option<Traffic> {
        Some(Traffic {
            reads: vec![self.a.clone(), self.b.clone()],
            writes: vec![self.c.clone()],
        })
    }
}

#[cfg(test)]
mod tests;
