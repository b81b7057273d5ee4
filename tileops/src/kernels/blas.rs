//! cuBLAS and cuBLASLt for the gemm op: the libraries of one device (handles and workspace, made
//! at first use), and a product planned once and run many times ([`MatmulPlan`]).
//!
//! Why tileops keeps its own cuBLASLt descriptors and algorithm instead of cudarc's safe
//! `Matmul` (`CudaBlasLT::matmul`):
//!
//! - **Planned once per shape.** cudarc's `matmul` creates the matmul descriptor, three matrix
//!   layouts and a preference, and runs `cublasLtMatmulAlgoGetHeuristic`, on every call. A gemm
//!   plan is built for one problem, so [`MatmulPlan::new`] does all of that once (at
//!   `Gemm::new`, where a missing algorithm is a plan-time error) and a forward is one
//!   `cublasLtMatmul` with the cached algorithm.
//! - **Workspace sized and checked.** The workspace follows NVIDIA's recommendation (32 MiB on
//!   Hopper, 4 MiB before), is allocated with an error rather than cudarc's `unwrap` in
//!   `CudaBlasLT::new`, and the algorithm the heuristic picks is refused at plan time if it asks
//!   for more than was allocated.
//! - **Strict float32.** cudarc's `Matmul<f32>` computes with `CUBLAS_COMPUTE_32F_FAST_TF32`,
//!   which rounds the inputs to TF32; strict float32 runs through cuBLAS `Sgemm` (f32
//!   multiply-adds), and TF32 only when the caller asks for it (`allow_tf32`).
//! - **Alignment from the pointers.** cuBLASLt's heuristic assumes operands aligned to 256 bytes
//!   unless told otherwise (its `MIN_ALIGNMENT_{A,B,C,D}_BYTES` preferences), and may pick a kernel
//!   that faults on a less aligned pointer; tileops's ops accept any 16-byte-aligned buffer. The
//!   plan's algorithm is chosen for 256-byte alignment (what the driver's allocations have), and a
//!   call whose pointers are less aligned runs an algorithm chosen for their own alignment
//!   ([`alignment`], as PyTorch's `_getAlignment`), found once per alignment and kept.
//! - **Row-major operands, typed errors.** The row-major to column-major swap ([`ColMajor`]) is
//!   explicit, and library loading runs under `catch_library_panic` so a missing cuBLAS is an
//!   [`Error::BlasInit`], not a panic.
//!
//! Everything here issues to the device's one stream.

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::{self, CudaBlas};
use cudarc::cublaslt::{result as lt, sys as lt_sys};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::device::CudaDevice;
use crate::libraries::catch_library_panic;
use crate::{DType, Error};

/// `CUBLAS_OP_N` / `CUBLAS_OP_T`, as the `TRANSA`/`TRANSB` descriptor attributes take them.
pub(crate) const OP_N: i32 = 0;
/// See [`OP_N`].
pub(crate) const OP_T: i32 = 1;

/// The column-major problem cuBLAS sees. Row-major `C[M, N] = op(A) @ op(B)` is column-major
/// `C^T[N, M] = op(B)^T @ op(A)^T`, and a row-major matrix read column-major is its transpose: so
/// cuBLAS's first operand is `b` (transposed iff `trans_b`), its second `a` (iff `trans_a`), with
/// `m = N`, `n = M`, and each leading dimension the stored row length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColMajor {
    pub(crate) op_first: i32,
    pub(crate) op_second: i32,
    /// cuBLAS's m, n, k: N, M, K.
    pub(crate) m: u64,
    pub(crate) n: u64,
    pub(crate) k: u64,
    /// Stored row lengths: of b, of a, of c.
    pub(crate) ld_first: i64,
    pub(crate) ld_second: i64,
    pub(crate) ld_c: i64,
}

impl ColMajor {
    /// (rows, cols) of the first operand as stored, column-major: `op_first` applied gives m x k.
    pub(crate) fn first_dims(&self) -> (u64, u64) {
        if self.op_first == OP_T {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }

    /// (rows, cols) of the second operand as stored: `op_second` applied gives k x n.
    pub(crate) fn second_dims(&self) -> (u64, u64) {
        if self.op_second == OP_T {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }
}

/// The largest alignment cuBLASLt's preferences ask for, bytes: their default, and the
/// alignment of every allocation the CUDA driver makes.
pub(crate) const MAX_ALIGNMENT: u32 = 256;

/// The alignment of a device address as cuBLASLt's `MIN_ALIGNMENT_*_BYTES` preferences take it:
/// the largest power of two, at most [`MAX_ALIGNMENT`], that divides it (PyTorch's
/// `_getAlignment`; a null address counts as fully aligned).
pub(crate) fn alignment(address: u64) -> u32 {
    1 << address.trailing_zeros().min(MAX_ALIGNMENT.trailing_zeros())
}

/// The alignments of one call's operands in cuBLASLt's order: its A (tileops's `b`), its B
/// (`a`), and C = D (`c`), bytes.
pub(crate) type Alignments = [u32; 3];

/// The alignments a plan's first algorithm is chosen for: the driver's allocations.
const PLANNED_ALIGNMENTS: Alignments = [MAX_ALIGNMENT; 3];

/// Whether an algorithm chosen for operands aligned to `planned` may run on operands aligned to
/// `actual`: each operand at least as aligned as it was planned for.
pub(crate) fn fits(actual: Alignments, planned: Alignments) -> bool {
    actual.iter().zip(planned).all(|(&a, p)| a >= p)
}

/// One product to plan: the element type, whether float32 may run as TF32, the column-major
/// view, and a description for error messages.
pub(crate) struct Problem {
    pub(crate) dtype: DType,
    pub(crate) allow_tf32: bool,
    pub(crate) cm: ColMajor,
    pub(crate) what: String,
}

/// How one planned product runs on the GPU.
pub(crate) enum MatmulPlan {
    /// float16, bfloat16, TF32: cuBLASLt with descriptors and an algorithm chosen at plan time.
    Lt(LtPlan),
    /// Strict float32: cuBLAS `Sgemm`.
    Sgemm(SgemmPlan),
}

impl std::fmt::Debug for MatmulPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatmulPlan::Lt(plan) => write!(f, "cuBLASLt({})", plan.what),
            MatmulPlan::Sgemm(_) => f.write_str("cuBLAS Sgemm"),
        }
    }
}

impl MatmulPlan {
    /// Plans `problem` on `dev`: loads the libraries (once per device), then cuBLAS for strict
    /// float32, else the cuBLASLt descriptors and algorithm.
    pub(crate) fn new(dev: &CudaDevice, problem: Problem) -> Result<MatmulPlan, Error> {
        let libs = Libraries::get(dev)?;
        if problem.dtype == DType::Float32 && !problem.allow_tf32 {
            libs.sgemm()?;
            return Ok(MatmulPlan::Sgemm(SgemmPlan {
                libs,
                cm: problem.cm,
            }));
        }
        LtPlan::new(libs, dev, problem).map(MatmulPlan::Lt)
    }

    /// `c = op(a) @ op(b)` on the device's stream, for buffers of the planned shapes.
    pub(crate) fn run(
        &self,
        dev: &CudaDevice,
        a: &CudaView<'_, u8>,
        b: &CudaView<'_, u8>,
        c: &mut CudaViewMut<'_, u8>,
    ) -> Result<(), Error> {
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the CUDA context for cuBLAS", e))?;
        match self {
            MatmulPlan::Lt(plan) => plan.run(dev, a, b, c),
            MatmulPlan::Sgemm(plan) => plan.run(dev, a, b, c),
        }
    }
}

/// A cuBLASLt product, ready to run: descriptors, layouts and the algorithm the heuristic chose.
pub(crate) struct LtPlan {
    libs: Arc<Libraries>,
    desc: lt_sys::cublasLtMatmulDesc_t,
    layouts: [lt_sys::cublasLtMatrixLayout_t; 3],
    /// The algorithm for operands aligned to [`PLANNED_ALIGNMENTS`], chosen in `new`.
    algo: lt_sys::cublasLtMatmulAlgo_t,
    /// Algorithms chosen at run time for less aligned operands, by their alignments (at most
    /// 9^3 keys: 1..=256 bytes per operand; in practice one or two).
    less_aligned: Mutex<Vec<(Alignments, lt_sys::cublasLtMatmulAlgo_t)>>,
    what: String,
}

// SAFETY: the descriptors are created once and only read afterwards (cuBLASLt does not mutate
// them in `cublasLtMatmul` or `cublasLtMatmulAlgoGetHeuristic`), and destroyed once, in `Drop`;
// the algorithms chosen at run time are behind a mutex.
unsafe impl Send for LtPlan {}
// SAFETY: as above.
unsafe impl Sync for LtPlan {}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each handle was created by cuBLASLt in `LtPlan::new` (or is still null) and is
        // destroyed once, here.
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

/// A strict float32 product through cuBLAS `Sgemm`.
pub(crate) struct SgemmPlan {
    libs: Arc<Libraries>,
    cm: ColMajor,
}

impl LtPlan {
    fn new(libs: Arc<Libraries>, dev: &CudaDevice, problem: Problem) -> Result<LtPlan, Error> {
        let (data_type, compute) = match problem.dtype {
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
        let Problem { cm, what, .. } = problem;
        let fail = |call: &str, e: lt::CublasError| Error::blas(format!("{call} ({what})"), e);
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the CUDA context for cuBLASLt", e))?;
        let mut out = LtPlan {
            libs,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algo: lt_sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            less_aligned: Mutex::new(Vec::new()),
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
            // SAFETY: `desc` is live; TRANSA/TRANSB take a cublasOperation_t (a C enum, i32),
            // read from `value` during the call.
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
        out.algo = out.choose(PLANNED_ALIGNMENTS)?;
        Ok(out)
    }

    /// The heuristic's algorithm for operands aligned to `alignments` (cuBLASLt's A, B, C = D):
    /// an error when it has none, or one needing more workspace than was allocated.
    fn choose(&self, alignments: Alignments) -> Result<lt_sys::cublasLtMatmulAlgo_t, Error> {
        let what = &self.what;
        let fail = |call: &str, e: lt::CublasError| {
            Error::blas(
                format!("{call} ({what}, operands aligned to {alignments:?} bytes)"),
                e,
            )
        };
        let pref = Preference::new(self.libs.workspace_bytes, alignments)
            .map_err(|e| fail("preference", e))?;
        let [first, second, c_layout] = self.layouts;
        // SAFETY: the handle, the descriptor, the layouts and the preference are live (created
        // in `new`, destroyed only on drop); C and D share one layout (D = C, beta = 0).
        let heuristic = unsafe {
            lt::get_matmul_algo_heuristic(
                self.libs.lt_handle.0,
                self.desc,
                first,
                second,
                c_layout,
                c_layout,
                pref.0,
            )
        }
        .map_err(|e| fail("cublasLtMatmulAlgoGetHeuristic (no algorithm)", e))?;
        if heuristic.workspaceSize > self.libs.workspace_bytes {
            return Err(Error::launch_refused(
                format!("cublasLtMatmulAlgoGetHeuristic ({what})"),
                format!(
                    "the algorithm needs {} workspace bytes, {} are allocated",
                    heuristic.workspaceSize, self.libs.workspace_bytes
                ),
            ));
        }
        Ok(heuristic.algo)
    }

    /// The algorithm for a call whose operands are aligned to `alignments`: the plan's when they
    /// are as aligned as it assumed, else one chosen for them, once per alignment.
    fn algo_for(&self, alignments: Alignments) -> Result<lt_sys::cublasLtMatmulAlgo_t, Error> {
        if fits(alignments, PLANNED_ALIGNMENTS) {
            return Ok(self.algo);
        }
        let mut chosen = self
            .less_aligned
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some((_, algo)) = chosen.iter().find(|(key, _)| *key == alignments) {
            return Ok(*algo);
        }
        let algo = self.choose(alignments)?;
        chosen.push((alignments, algo));
        Ok(algo)
    }

    fn run(
        &self,
        dev: &CudaDevice,
        a: &CudaView<'_, u8>,
        b: &CudaView<'_, u8>,
        c: &mut CudaViewMut<'_, u8>,
    ) -> Result<(), Error> {
        let stream = &dev.stream;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        let (pw, _rw) = self.libs.workspace.device_ptr(stream);
        // cuBLASLt's A is b, its B is a (see `ColMajor`).
        let algo = self.algo_for([alignment(pb), alignment(pa), alignment(pc)])?;
        let [first, second, c_layout] = self.layouts;
        // SAFETY: the buffers hold the planned operands (checked against the plan's specs by the
        // op before its backend runs); cuBLAS's first operand is b and its second a (see
        // `ColMajor`); the workspace holds `workspace_bytes`, at least what the algorithm asked
        // for; the algorithm was chosen for operands at most as aligned as these; alpha and beta
        // are f32 as the f32 scale type requires; C and D are the same buffer, and beta = 0
        // means C is not read; the handle issues to this device's stream.
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
                &algo,
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
        a: &CudaView<'_, u8>,
        b: &CudaView<'_, u8>,
        c: &mut CudaViewMut<'_, u8>,
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
        // Every size was checked against i32::MAX when the op was planned.
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

/// A cuBLASLt preference descriptor that allows `workspace` bytes and asks for algorithms that
/// work on operands aligned to `alignments` (A, B, C = D), destroyed on drop.
struct Preference(lt_sys::cublasLtMatmulPreference_t);

impl Preference {
    fn new(workspace: usize, alignments: Alignments) -> Result<Preference, lt::CublasError> {
        use lt_sys::cublasLtMatmulPreferenceAttributes_t as Attr;
        let pref = Preference(lt::create_matmul_pref()?);
        let bytes = workspace as u64;
        // SAFETY: a live preference; MAX_WORKSPACE_BYTES takes a uint64_t, read from `bytes`
        // during the call.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                Attr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                size_of::<u64>(),
            )?;
        }
        let [a, b, c] = alignments;
        for (attr, align) in [
            (Attr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a),
            (Attr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b),
            (Attr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c),
            (Attr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, c),
        ] {
            // SAFETY: a live preference; the MIN_ALIGNMENT attributes take a uint32_t, read
            // from `align` during the call.
            unsafe {
                lt::set_matmul_pref_attribute(
                    pref.0,
                    attr,
                    (&align as *const u32).cast(),
                    size_of::<u32>(),
                )?;
            }
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

/// Where a device's [`Cache`](super::Cache) keeps its [`Libraries`]: empty until the first gemm
/// plan, and left empty when making them failed, so a later plan retries.
#[derive(Default)]
pub(crate) struct Slot(Mutex<Option<Arc<Libraries>>>);

/// The BLAS state of one device (one stream), shared by every gemm plan on it: the cuBLASLt
/// handle and its workspace, and a cuBLAS handle for strict float32 (made at first use), both
/// issuing to the device's stream.
struct Libraries {
    lt_handle: LtHandle,
    workspace: CudaSlice<u8>,
    workspace_bytes: usize,
    stream: Arc<CudaStream>,
    blas: OnceLock<Result<CudaBlas, String>>,
}

impl Libraries {
    /// The libraries of `dev`, created at first use.
    fn get(dev: &CudaDevice) -> Result<Arc<Libraries>, Error> {
        let mut slot = dev
            .kernels
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
        // SAFETY: uninitialised device memory is sound to hold; cuBLASLt writes the workspace
        // before reading it, and nothing else reads it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_is_the_largest_power_of_two_up_to_256_dividing_the_address() {
        assert_eq!(
            alignment(0),
            256,
            "null: fully aligned, as PyTorch's _getAlignment"
        );
        assert_eq!(alignment(0x7f00_0000_0000), 256);
        assert_eq!(alignment(0x7f00_0000_0100), 256);
        assert_eq!(alignment(0x7f00_0000_0080), 128);
        assert_eq!(alignment(0x7f00_0000_0010), 16);
        assert_eq!(alignment(0x7f00_0000_0030), 16);
        assert_eq!(alignment(0x7f00_0000_0008), 8);
        assert_eq!(alignment(0x7f00_0000_0002), 2);
        assert_eq!(alignment(0x7f00_0000_0001), 1);
        assert_eq!(alignment(u64::MAX), 1);
        assert_eq!(alignment(1 << 63), 256);
        // The same as PyTorch's loop: 256, halved until it divides the address.
        for address in (0..4096u64).chain([(1 << 40) + 48, (1 << 40) + 4000]) {
            let mut expected = 256u32;
            while address % u64::from(expected) != 0 {
                expected /= 2;
            }
            assert_eq!(alignment(address), expected, "{address:#x}");
        }
    }

    #[test]
    fn an_algorithm_runs_only_on_operands_at_least_as_aligned_as_planned() {
        assert!(fits([256, 256, 256], PLANNED_ALIGNMENTS));
        assert!(!fits([16, 256, 256], PLANNED_ALIGNMENTS));
        assert!(!fits([256, 256, 128], PLANNED_ALIGNMENTS));
        assert!(fits([32, 64, 16], [16, 16, 16]));
        assert!(!fits([32, 8, 16], [16, 16, 16]));
    }
}
