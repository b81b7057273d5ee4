//! `gemm`: the dense matrix product `c = op(a) @ op(b)`, `op(t) = t.T` when its flag is set,
//! through cuBLASLt on the GPU (plain cuBLAS `Sgemm` for strict float32).

pub mod reference;

use crate::libraries::catch_library_panic;

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::{self, CudaBlas};
use cudarc::cublaslt::{result as lt, sys as lt_sys};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use crate::device::CudaDevice;
use crate::ops::{check_extents, check_input};
use crate::registry::{BenchOp, FromWorkload, RoofKey, StaticValue, Traffic, WorkloadCase};
use crate::{DType, Device, Error, Tensor, TensorSpec};

const OP: &str = "gemm";

/// The dense matrix product `c = op(a) @ op(b)` of row-major matrices, as `torch.matmul` (with
/// `a.T` / `b.T` for the trans flags), in float16 or bfloat16 with f32 accumulation, or float32.
///
/// - `a` is stored `[M, K]`, or `[K, M]` with `trans_a`; `b` is stored `[K, N]`, or `[N, K]` with
///   `trans_b` (an `nn.Linear` weight); `c` is `[M, N]`, in the dtype of `a` and `b`.
/// - float16 and bfloat16 run on the tensor cores through cuBLASLt (f32 compute and scale).
/// - float32 is strict by default (cuBLAS `Sgemm`, f32 multiply-adds: cuBLASLt's float32 path
///   would round the inputs to TF32). `allow_tf32` runs it through cuBLASLt with
///   `CUBLAS_COMPUTE_32F_FAST_TF32` instead: inputs rounded to 10 mantissa bits, like PyTorch's
///   `allow_tf32`.
/// - The CPU path is the f64 reference ([`reference_gemm::gemm`](self::reference::gemm)),
///   rounded once to the output dtype; it ignores `allow_tf32`.
///
/// ```
/// use tileops::ops::Gemm;
/// use tileops::{DType, Device, Tensor, TensorSpec};
///
/// let device = Device::best();
/// // x @ w.T with an nn.Linear weight w of shape [N, K].
/// let x = TensorSpec::new([4, 64], DType::BFloat16);
/// let w = TensorSpec::new([32, 64], DType::BFloat16);
/// let gemm = Gemm::new(&device, x.clone(), w.clone(), false, true, false)?;
/// let (m, n, k) = gemm.mnk();
/// assert_eq!((m, n, k), (4, 32, 64));
/// let ones = Tensor::full(&x, 1.0, &device)?;
/// let halves = Tensor::full(&w, 0.5, &device)?;
/// let y = gemm.forward(&ones, &halves)?;
/// assert_eq!(y.shape(), &[4, 32]);
/// assert!(y.to_vec_f32()?.iter().all(|&v| v == 32.0));
///
/// // Plans are checked up front: inner dims must agree, dtypes must match.
/// assert!(Gemm::new(&device, x.clone(), w.clone(), false, false, false).is_err());
/// let w16 = TensorSpec::new([32, 64], DType::Float16);
/// assert!(Gemm::new(&device, x, w16, false, true, false).is_err());
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
    gpu: Option<Arc<GpuPlan>>,
}

impl Gemm {
    /// Plans `op(a) @ op(b)` for operands like `a` and `b` (as stored) on `device`.
    ///
    /// Errors when `a` or `b` is not rank 2, has an empty dimension or a dimension beyond
    /// `i32::MAX`; when a dtype is not float16, bfloat16 or float32, or the two differ; when the
    /// inner dims disagree (`K` of `op(a)` against `K` of `op(b)`); when `allow_tf32` is set for
    /// a dtype other than float32; and, on a GPU, when cuBLAS/cuBLASLt cannot be loaded or has no
    /// algorithm for the problem.
    pub fn new(
        device: &Device,
        a: TensorSpec,
        b: TensorSpec,
        trans_a: bool,
        trans_b: bool,
        allow_tf32: bool,
    ) -> Result<Gemm, Error> {
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
                    reason: format!("gemm takes matrices (rank 2), not rank {}", spec.rank()),
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
            plan.gpu = Some(Arc::new(GpuPlan::new(dev, &plan)?));
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

    /// The logical sizes `(M, N, K)`: `c[M, N] = op(a)[M, K] @ op(b)[K, N]`.
    pub fn mnk(&self) -> (usize, usize, usize) {
        (self.m, self.n, self.k)
    }

    /// The device the op runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `op(a) @ op(b)` into a new `[M, N]` tensor; `a` and `b` must match the plan.
    pub fn forward(&self, a: &Tensor, b: &Tensor) -> Result<Tensor, Error> {
        check_input(OP, "a", a, &self.a, &self.device)?;
        check_input(OP, "b", b, &self.b, &self.device)?;
        let mut c = Tensor::empty(&self.c, &self.device)?;
        self.forward_into(a, b, &mut c)?;
        Ok(c)
    }

    /// `op(a) @ op(b)` written into `c` (the plan's output spec, same device). Asynchronous on a
    /// GPU: copies and [`Device::synchronize`] wait for it.
    pub fn forward_into(&self, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<(), Error> {
        check_input(OP, "a", a, &self.a, &self.device)?;
        check_input(OP, "b", b, &self.b, &self.device)?;
        check_input(OP, "c", c, &self.c, &self.device)?;
        match (self.device.cuda_device(), &self.gpu) {
            (None, _) => {
                let values = self::reference::gemm(
                    &a.host_f64()?,
                    &b.host_f64()?,
                    self.m,
                    self.n,
                    self.k,
                    self.trans_a,
                    self.trans_b,
                );
                c.set_host_f64(&values)
            }
            (Some(dev), Some(gpu)) => gpu.run(dev, a, b, c),
            (Some(_), None) => Err(Error::internal("gemm: a GPU device without its GPU plan")),
        }
    }
}

/// `CUBLAS_OP_N` / `CUBLAS_OP_T`, as the `TRANSA`/`TRANSB` descriptor attributes take them.
const OP_N: i32 = 0;
const OP_T: i32 = 1;

/// How one planned product runs on the GPU.
enum GpuPlan {
    /// float16, bfloat16, TF32: cuBLASLt with descriptors and an algorithm chosen at plan time.
    Lt(LtPlan),
    /// Strict float32: cuBLAS `Sgemm`.
    Sgemm(SgemmPlan),
}

impl std::fmt::Debug for GpuPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuPlan::Lt(plan) => write!(f, "cuBLASLt({})", plan.what),
            GpuPlan::Sgemm(_) => f.write_str("cuBLAS Sgemm"),
        }
    }
}

/// The column-major problem cuBLAS sees. Row-major `C[M, N] = op(A) @ op(B)` is column-major
/// `C^T[N, M] = op(B)^T @ op(A)^T`, and a row-major matrix read column-major is its transpose: so
/// cuBLAS's first operand is `b` (transposed iff `trans_b`), its second `a` (iff `trans_a`), with
/// `m = N`, `n = M`, and each leading dimension the stored row length.
#[derive(Debug, Clone, Copy)]
struct ColMajor {
    op_first: i32,
    op_second: i32,
    /// cuBLAS's m, n, k: N, M, K.
    m: u64,
    n: u64,
    k: u64,
    /// Stored row lengths: of b, of a, of c.
    ld_first: i64,
    ld_second: i64,
    ld_c: i64,
}

impl ColMajor {
    fn of(plan: &Gemm) -> ColMajor {
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

    /// (rows, cols) of the first operand as stored, column-major: `op_first` applied gives m x k.
    fn first_dims(&self) -> (u64, u64) {
        if self.op_first == OP_T {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }

    /// (rows, cols) of the second operand as stored: `op_second` applied gives k x n.
    fn second_dims(&self) -> (u64, u64) {
        if self.op_second == OP_T {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }
}

/// A cuBLASLt product, ready to run: descriptors, layouts and the algorithm the heuristic chose.
struct LtPlan {
    libs: Arc<Libraries>,
    desc: lt_sys::cublasLtMatmulDesc_t,
    layouts: [lt_sys::cublasLtMatrixLayout_t; 3],
    algo: lt_sys::cublasLtMatmulAlgo_t,
    what: String,
}

// SAFETY: the descriptors are created once and only read afterwards (cuBLASLt does not mutate
// them in `cublasLtMatmul`), and destroyed once, in `Drop`.
unsafe impl Send for LtPlan {}
// SAFETY: as above.
unsafe impl Sync for LtPlan {}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each handle was created by cuBLASLt in `LtPlan::new` and is destroyed once.
        unsafe {
            for layout in self.layouts {
                if !layout.is_null() {
                    let _ = lt::destroy_matrix_layout(layout);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
        }
    }
}

struct SgemmPlan {
    libs: Arc<Libraries>,
    cm: ColMajor,
}

impl GpuPlan {
    fn new(dev: &CudaDevice, plan: &Gemm) -> Result<GpuPlan, Error> {
        let libs = Libraries::get(dev)?;
        if plan.a.dtype == DType::Float32 && !plan.allow_tf32 {
            libs.sgemm()?;
            return Ok(GpuPlan::Sgemm(SgemmPlan {
                libs,
                cm: ColMajor::of(plan),
            }));
        }
        LtPlan::new(libs, dev, plan).map(GpuPlan::Lt)
    }

    fn run(&self, dev: &CudaDevice, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<(), Error> {
        let missing = || Error::MissingBuffer {
            op: "gemm",
            field: "an input or output",
        };
        let a = a.cuda_slice().ok_or_else(missing)?;
        let b = b.cuda_slice().ok_or_else(missing)?;
        let c = c.cuda_slice_mut().ok_or_else(missing)?;
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the CUDA context for cuBLAS", e))?;
        match self {
            GpuPlan::Lt(plan) => plan.run(dev, a, b, c),
            GpuPlan::Sgemm(plan) => plan.run(dev, a, b, c),
        }
    }
}

impl LtPlan {
    fn new(libs: Arc<Libraries>, dev: &CudaDevice, plan: &Gemm) -> Result<LtPlan, Error> {
        let dtype = plan.a.dtype;
        let (data_type, compute) = match dtype {
            DType::Float16 => (
                lt_sys::cudaDataType::CUDA_R_16F,
                lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            DType::BFloat16 => (
                lt_sys::cudaDataType::CUDA_R_16BF,
                lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            _ => (
                lt_sys::cudaDataType::CUDA_R_32F,
                lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            ),
        };
        let cm = ColMajor::of(plan);
        let what = format!(
            "{dtype}{} [{}, {}] x [{}, {}]{}{}",
            if plan.allow_tf32 { " as TF32" } else { "" },
            plan.m,
            plan.k,
            plan.k,
            plan.n,
            if plan.trans_a { " trans_a" } else { "" },
            if plan.trans_b { " trans_b" } else { "" },
        );
        let fail = |call: &str, e: lt::CublasError| Error::blas(format!("{call} ({what})"), e);
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the CUDA context for cuBLASLt", e))?;
        let mut out = LtPlan {
            libs,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algo: lt_sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            what: what.clone(),
        };
        out.desc = lt::create_matmul_desc(compute, lt_sys::cudaDataType::CUDA_R_32F)
            .map_err(|e| fail("cublasLtMatmulDescCreate", e))?;
        for (attr, value) in [
            (
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                cm.op_first,
            ),
            (
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                cm.op_second,
            ),
        ] {
            // SAFETY: `desc` is live; TRANSA/TRANSB take a cublasOperation_t (a C enum, i32).
            unsafe {
                lt::set_matmul_desc_attribute(
                    out.desc,
                    attr,
                    (&value as *const i32).cast::<c_void>(),
                    size_of::<i32>(),
                )
            }
            .map_err(|e| fail("cublasLtMatmulDescSetAttribute", e))?;
        }
        let (r1, c1) = cm.first_dims();
        let (r2, c2) = cm.second_dims();
        for (slot, (rows, cols, ld)) in [
            (r1, c1, cm.ld_first),
            (r2, c2, cm.ld_second),
            (cm.m, cm.n, cm.ld_c),
        ]
        .into_iter()
        .enumerate()
        {
            out.layouts[slot] = lt::create_matrix_layout(data_type, rows, cols, ld)
                .map_err(|e| fail("cublasLtMatrixLayoutCreate", e))?;
        }
        let pref = Preference::new(out.libs.workspace_bytes).map_err(|e| fail("preference", e))?;
        let [first, second, c_layout] = out.layouts;
        // SAFETY: every descriptor is live; C and D share one layout (D = C, beta = 0).
        let heuristic = unsafe {
            lt::get_matmul_algo_heuristic(
                out.libs.lt_handle.0,
                out.desc,
                first,
                second,
                c_layout,
                c_layout,
                pref.0,
            )
        }
        .map_err(|e| fail("cublasLtMatmulAlgoGetHeuristic (no algorithm)", e))?;
        if heuristic.workspaceSize > out.libs.workspace_bytes {
            return Err(Error::launch_refused(
                format!("cublasLtMatmulAlgoGetHeuristic ({what})"),
                format!(
                    "the algorithm needs {} workspace bytes, {} are allocated",
                    heuristic.workspaceSize, out.libs.workspace_bytes
                ),
            ));
        }
        out.algo = heuristic.algo;
        Ok(out)
    }

    fn run(
        &self,
        dev: &CudaDevice,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        c: &mut CudaSlice<u8>,
    ) -> Result<(), Error> {
        let stream = &dev.stream;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        let (pw, _rw) = self.libs.workspace.device_ptr(stream);
        let [first, second, c_layout] = self.layouts;
        // SAFETY: the buffers hold the planned operands (checked against the plan's specs by
        // `forward_into`); cuBLAS's first operand is b and its second a (see `ColMajor`); the
        // workspace holds `workspace_bytes`, at least what the algorithm asked for; alpha and
        // beta are f32 as the f32 scale type requires; C and D are the same buffer, and beta = 0
        // means C is not read.
        unsafe {
            lt::matmul(
                self.libs.lt_handle.0,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                pb as *const c_void,
                first,
                pa as *const c_void,
                second,
                pc as *const c_void,
                c_layout,
                pc as *mut c_void,
                c_layout,
                &self.algo,
                pw as *mut c_void,
                self.libs.workspace_bytes,
                stream.cu_stream() as lt_sys::cudaStream_t,
            )
        }
        .map_err(|e| Error::blas(format!("cublasLtMatmul ({})", self.what), e))
    }
}

impl SgemmPlan {
    fn run(
        &self,
        dev: &CudaDevice,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        c: &mut CudaSlice<u8>,
    ) -> Result<(), Error> {
        let blas = self.libs.sgemm()?;
        let stream = &dev.stream;
        let cm = self.cm;
        let op = |o: i32| {
            if o == OP_T {
                cublas::sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                cublas::sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        // Every size was checked against i32::MAX in `Gemm::new`.
        let int = |v: u64| v as i32;
        // SAFETY: as in `LtPlan::run`: float32 buffers of the planned shapes, b first; the
        // handle's stream is the device stream (set in `Libraries::sgemm`).
        unsafe {
            cublas::result::sgemm(
                *blas.handle(),
                op(cm.op_first),
                op(cm.op_second),
                int(cm.m),
                int(cm.n),
                int(cm.k),
                &alpha,
                pb as *const f32,
                cm.ld_first as i32,
                pa as *const f32,
                cm.ld_second as i32,
                &beta,
                pc as *mut f32,
                cm.ld_c as i32,
            )
        }
        .map_err(|e| Error::blas("cublasSgemm", e))
    }
}

/// A cuBLASLt preference descriptor that allows `workspace` bytes, destroyed on drop.
struct Preference(lt_sys::cublasLtMatmulPreference_t);

impl Preference {
    fn new(workspace: usize) -> Result<Preference, lt::CublasError> {
        let pref = Preference(lt::create_matmul_pref()?);
        let bytes = workspace as u64;
        // SAFETY: a live preference; MAX_WORKSPACE_BYTES takes a uint64_t.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                size_of::<u64>(),
            )?;
        }
        Ok(pref)
    }
}

impl Drop for Preference {
    fn drop(&mut self) {
        // SAFETY: created in `Preference::new`, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// A cuBLASLt handle, destroyed with the device that made it (never, for `Device::cuda`'s, which
/// live as long as the process).
struct LtHandle(lt_sys::cublasLtHandle_t);

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: created by `lt::create_handle` in `Libraries::get`, destroyed once; every plan
        // using it holds the `Libraries` (an `Arc`), so none is left.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

// SAFETY: a cuBLASLt handle may be used from any thread; tileops issues every call on the
// device's one stream, which orders them.
unsafe impl Send for LtHandle {}
// SAFETY: as above.
unsafe impl Sync for LtHandle {}

/// Where a device keeps its [`Libraries`] (`CudaDevice::blas`): empty until the first gemm plan,
/// and left empty when making them failed, so a later plan retries.
#[derive(Default)]
pub(crate) struct BlasSlot(Mutex<Option<Arc<Libraries>>>);

/// The BLAS state of one device (one stream), shared by every gemm plan on it: the cuBLASLt
/// handle and its workspace, and a cuBLAS handle for strict float32 (made at first use), both
/// issuing to the device's stream.
struct Libraries {
    lt_handle: LtHandle,
    workspace: CudaSlice<u8>,
    workspace_bytes: usize,
    stream: Arc<cudarc::driver::CudaStream>,
    blas: OnceLock<Result<CudaBlas, String>>,
}

impl Libraries {
    /// The libraries of `dev`, created at first use.
    fn get(dev: &CudaDevice) -> Result<Arc<Libraries>, Error> {
        let mut slot = dev
            .blas
            .0
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(libs) = slot.as_ref() {
            return Ok(libs.clone());
        }
        crate::libraries::cublas()?;
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the CUDA context for cuBLASLt", e))?;
        let lt_handle = catch_library_panic(lt::create_handle)
            .map_err(|message| Error::BlasInit {
                context: "creating a cuBLASLt handle".to_owned(),
                message,
            })?
            .map_err(|e| Error::blas("creating a cuBLASLt handle", e))?;
        let lt_handle = LtHandle(lt_handle);
        // NVIDIA's recommendation: 32 MiB on Hopper, 4 MiB before.
        let workspace_bytes = if dev.capability.0 >= 9 {
            32 << 20
        } else {
            4 << 20
        };
        // SAFETY: cuBLASLt writes the workspace before reading it.
        let workspace = unsafe { dev.stream.alloc::<u8>(workspace_bytes) }
            .map_err(|e| Error::driver("allocating the cuBLASLt workspace", e))?;
        let libs = Arc::new(Libraries {
            lt_handle,
            workspace,
            workspace_bytes,
            stream: dev.stream.clone(),
            blas: OnceLock::new(),
        });
        *slot = Some(libs.clone());
        Ok(libs)
    }

    /// The cuBLAS handle for strict float32, on the device stream.
    fn sgemm(&self) -> Result<&CudaBlas, Error> {
        self.blas
            .get_or_init(|| {
                catch_library_panic(|| CudaBlas::new(self.stream.clone()))?
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|message| Error::BlasInit {
                context: "creating a cuBLAS handle".to_owned(),
                message: message.clone(),
            })
    }
}

impl FromWorkload for Gemm {
    /// `a_shape`, `b_shape` and the case dtype; `trans_a`, `trans_b` and `allow_tf32` from the
    /// row, false when absent or null.
    fn from_workload(device: &Device, case: &WorkloadCase) -> Result<Self, Error> {
        let flag = |name: &'static str| match case.workload.param(name) {
            None | Some(StaticValue::None) => Ok(false),
            Some(StaticValue::Bool(b)) => Ok(*b),
            Some(value) => Err(Error::InvalidParam {
                op: OP,
                field: name,
                value: format!("{value:?}"),
                reason: "must be true or false".to_owned(),
            }),
        };
        Gemm::new(
            device,
            case.require_input(OP, "a")?,
            case.require_input(OP, "b")?,
            flag("trans_a")?,
            flag("trans_b")?,
            flag("allow_tf32")?,
        )
    }
}

impl BenchOp for Gemm {
    fn roof(&self) -> RoofKey {
        Gemm::roof(self)
    }

    fn random_inputs(&self, seed: u64) -> Result<Vec<Tensor>, Error> {
        Ok(vec![
            Tensor::random(&self.a, seed, &self.device)?,
            Tensor::random(&self.b, seed.wrapping_add(1), &self.device)?,
        ])
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        let [a, b] = inputs else {
            return Err(Error::Arity {
                op: "gemm",
                expected: 2,
                got: inputs.len(),
            });
        };
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
mod tests {
    use super::*;
    use crate::registry::RooflineModel;

    fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
        TensorSpec::new(shape, dtype)
    }

    #[test]
    fn sizes_follow_the_trans_flags() {
        let cpu = Device::cpu();
        let f = DType::Float16;
        for (a, b, ta, tb) in [
            (&[3, 5][..], &[5, 7][..], false, false),
            (&[5, 3], &[5, 7], true, false),
            (&[3, 5], &[7, 5], false, true),
            (&[5, 3], &[7, 5], true, true),
        ] {
            let op = Gemm::new(&cpu, spec(a, f), spec(b, f), ta, tb, false).unwrap();
            assert_eq!(op.mnk(), (3, 7, 5), "{a:?} {b:?} {ta} {tb}");
            assert_eq!(op.c(), &spec(&[3, 7], f));
            // The manifest's formulas read M, N, K through the same flags.
            let roof = op.roofline().unwrap();
            assert_eq!(roof.flops, 2 * 3 * 7 * 5);
            assert_eq!(roof.bytes, (3 * 5 + 5 * 7 + 3 * 7) * 2);
        }
    }

    #[test]
    fn roofs_follow_the_dtype_and_tf32() {
        let cpu = Device::cpu();
        let plan = |dtype, tf32| {
            Gemm::new(
                &cpu,
                spec(&[2, 2], dtype),
                spec(&[2, 2], dtype),
                false,
                false,
                tf32,
            )
            .unwrap()
            .roof()
        };
        assert_eq!(plan(DType::Float16, false).0, "tensor_core.fp16");
        assert_eq!(plan(DType::BFloat16, false).0, "tensor_core.bf16");
        assert_eq!(plan(DType::Float32, true).0, "tensor_core.tf32");
        assert_eq!(plan(DType::Float32, false), RoofKey::CUDA_CORE_FP32);
    }

    #[test]
    fn col_major_view_swaps_the_operands() {
        let cpu = Device::cpu();
        let f = DType::BFloat16;
        // a stored [K=5, M=3] (trans_a), b stored [N=7, K=5] (trans_b).
        let op = Gemm::new(&cpu, spec(&[5, 3], f), spec(&[7, 5], f), true, true, false).unwrap();
        let cm = ColMajor::of(&op);
        assert_eq!((cm.m, cm.n, cm.k), (7, 3, 5));
        assert_eq!((cm.op_first, cm.op_second), (OP_T, OP_T));
        assert_eq!((cm.ld_first, cm.ld_second, cm.ld_c), (5, 3, 7));
        // Stored column-major: b is [K, N] = 5 x 7 (ld 5), a is [M, K] = 3 x 5 (ld 3).
        assert_eq!(cm.first_dims(), (5, 7));
        assert_eq!(cm.second_dims(), (3, 5));
        let op = Gemm::new(
            &cpu,
            spec(&[3, 5], f),
            spec(&[5, 7], f),
            false,
            false,
            false,
        )
        .unwrap();
        let cm = ColMajor::of(&op);
        assert_eq!((cm.op_first, cm.op_second), (OP_N, OP_N));
        assert_eq!((cm.ld_first, cm.ld_second, cm.ld_c), (7, 5, 7));
        assert_eq!(cm.first_dims(), (7, 5));
        assert_eq!(cm.second_dims(), (5, 3));
    }

    #[test]
    fn cpu_forward_matches_the_reference_in_every_dtype_and_layout() {
        let cpu = Device::cpu();
        for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let (m, n, k) = (5, 9, 13);
                let a = TensorSpec::new(if ta { [k, m] } else { [m, k] }, dtype);
                let b = TensorSpec::new(if tb { [n, k] } else { [k, n] }, dtype);
                let op = Gemm::new(&cpu, a.clone(), b.clone(), ta, tb, false).unwrap();
                let x = Tensor::random(&a, 3, &cpu).unwrap();
                let y = Tensor::random(&b, 4, &cpu).unwrap();
                let c = op.forward(&x, &y).unwrap();
                assert_eq!(c.spec(), &spec(&[m, n], dtype));
                let want = crate::ops::reference_gemm::gemm(
                    &x.to_vec_f64().unwrap(),
                    &y.to_vec_f64().unwrap(),
                    m,
                    n,
                    k,
                    ta,
                    tb,
                );
                let want = Tensor::from_f64_rounded(&want, c.spec(), &cpu).unwrap();
                assert_eq!(c.to_bytes().unwrap(), want.to_bytes().unwrap());
                // And against a plain loop on the widened values.
                let (xa, yb) = (x.to_vec_f64().unwrap(), y.to_vec_f64().unwrap());
                let got = c.to_vec_f64().unwrap();
                for i in 0..m {
                    for j in 0..n {
                        let s: f64 = (0..k)
                            .map(|p| {
                                let av = if ta { xa[p * m + i] } else { xa[i * k + p] };
                                let bv = if tb { yb[j * k + p] } else { yb[p * n + j] };
                                av * bv
                            })
                            .sum();
                        let tol = s.abs() * 4e-3 + 1e-6;
                        assert!((got[i * n + j] - s).abs() <= tol, "{dtype} {ta} {tb}");
                    }
                }
            }
        }
    }

    #[test]
    fn cpu_edge_shapes_and_non_finite_values() {
        let cpu = Device::cpu();
        // 1 x 1 x 1.
        let s = spec(&[1, 1], DType::BFloat16);
        let op = Gemm::new(&cpu, s.clone(), s.clone(), false, false, false).unwrap();
        let x = Tensor::full(&s, 3.0, &cpu).unwrap();
        let y = Tensor::full(&s, -0.5, &cpu).unwrap();
        assert_eq!(
            op.forward(&x, &y).unwrap().to_vec_f32().unwrap(),
            vec![-1.5]
        );
        // An inf meeting a 0 gives NaN, a NaN spreads over its row, an inf over its column.
        let a = spec(&[2, 2], DType::Float16);
        let op = Gemm::new(&cpu, a.clone(), a.clone(), false, false, false).unwrap();
        let inf = f64::INFINITY;
        let x = Tensor::from_f64_rounded(&[inf, 1.0, f64::NAN, 1.0], &a, &cpu).unwrap();
        let y = Tensor::from_f64_rounded(&[0.0, 1.0, 1.0, 1.0], &a, &cpu).unwrap();
        let c = op.forward(&x, &y).unwrap().to_vec_f32().unwrap();
        assert!(c[0].is_nan() && c[2].is_nan() && c[3].is_nan(), "{c:?}");
        assert_eq!(c[1], f32::INFINITY);
        // float16 overflow rounds to inf, as a GPU's f32 accumulator converted to half does.
        let s = spec(&[1, 4], DType::Float16);
        let t = spec(&[4, 1], DType::Float16);
        let op = Gemm::new(&cpu, s.clone(), t.clone(), false, false, false).unwrap();
        let x = Tensor::full(&s, 60000.0, &cpu).unwrap();
        let y = Tensor::full(&t, 1.0, &cpu).unwrap();
        assert_eq!(
            op.forward(&x, &y).unwrap().to_vec_f32().unwrap(),
            vec![f32::INFINITY]
        );
    }

    #[test]
    fn every_workload_row_plans_on_the_cpu() {
        let registration = crate::registry::find("gemm").expect("gemm is registered");
        let mut cases = 0;
        for workload in registration.workloads {
            for case in workload.cases() {
                let op = Gemm::from_workload(&Device::cpu(), &case).unwrap();
                let (m, n, k) = op.mnk();
                let roof = op.roofline().unwrap();
                assert_eq!(roof.flops, 2 * (m * n * k) as u64, "{}", case.name());
                let elem = case.dtype.size_in_bytes();
                assert_eq!(roof.bytes, ((m * k + k * n + m * n) * elem) as u64);
                let traffic = op.traffic().unwrap();
                assert_eq!(traffic.min_bytes().unwrap(), roof.bytes, "{}", case.name());
                cases += 1;
            }
        }
        assert_eq!(cases, 12);
    }
}
