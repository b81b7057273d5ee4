//! Host implementations of the cuBLAS and cuBLASLt functions tileops calls (`gemm`: cuBLASLt for
//! float16, bfloat16 and TF32, cuBLAS `Sgemm` for strict float32; cudarc's `CudaBlas`), exported
//! from the emulator's cdylib, which is also installed as `libcublas.so.13` and
//! `libcublasLt.so.13`, so that `gemm` runs, and is checked, on machines without a GPU.
//!
//! A device pointer is the host address of its buffer; streams are ignored (every call has
//! completed when it returns); every handle and descriptor is a boxed struct of this module,
//! tagged so that a null, foreign or mixed-up one is refused with a status instead of misread.
//!
//! # What is modelled
//!
//! - `D = alpha * op(A) op(B) + beta * C`, column-major (or row-major, `CUBLASLT_ORDER_ROW`),
//!   `op` = transpose for `CUBLAS_OP_T` and `CUBLAS_OP_C` (the data is real), any leading
//!   dimension at least the minimum, strided batches (stride 0 broadcasts), C and D as distinct
//!   buffers with distinct layouts, or one buffer (in place, with identical layouts).
//! - float32, float16 and bfloat16 data in the combinations cuBLAS supports per compute type:
//!   `32F` and `32F_PEDANTIC` (A and B of one type, C = D of that type or f32); `32F_FAST_TF32`,
//!   `32F_FAST_16F`, `32F_FAST_16BF` (all f32; A and B rounded to TF32 — 10 explicit mantissa
//!   bits —, f16 or bf16 first, to nearest even); `16F` and `16F_PEDANTIC` (all f16, with f16
//!   alpha, beta and accumulator). cuBLAS's math mode acts on its f32 routines as NVIDIA
//!   documents: `CUBLAS_TF32_TENSOR_OP_MATH` rounds f32 inputs to TF32, the deprecated
//!   `CUBLAS_TENSOR_OP_MATH` to f16; `CUBLAS_COMPUTE_32F_PEDANTIC` ignores the math mode.
//! - The arithmetic: one accumulator per output element, over k = 0..K in that order, one fused
//!   multiply-add per step (f32; an f16 accumulator is rounded to f16 after every step); then
//!   `alpha * acc`, fused with `beta * C` when beta is nonzero; then one rounding to D's type
//!   (to nearest even, by the `half` crate). Products of f16, bf16 and TF32 values are exact in
//!   f32, as on tensor cores. The result does not depend on how many threads compute it.
//! - `beta == 0` never reads C (it may hold NaN); `alpha == 0` or `K == 0` never reads A or B
//!   (BLAS semantics).
//! - Every argument is checked, and no call panics: sizes that disagree, leading dimensions below
//!   the minimum, null pointers, attribute buffers of the wrong size give
//!   `CUBLAS_STATUS_INVALID_VALUE`; types, modes, epilogues and scalings the emulator does not
//!   model give `CUBLAS_STATUS_NOT_SUPPORTED`.
//!
//! # What is not
//!
//! - Tensor-core numerics beyond the input rounding: real kernels split K over tiles, warps and
//!   (split-K) blocks, so they associate the sum differently and may differ in the last bits;
//!   the hardware's own TF32 conversion may truncate instead of rounding to nearest.
//! - Epilogues (bias, activations, auxiliary outputs), fp8 and block scaling, complex, integer
//!   and f64 types, the emulated (BF16x9, fixed-point) modes, pointer-array batches, vector alpha:
//!   all give `CUBLAS_STATUS_NOT_SUPPORTED`.
//! - Algorithm choice: the heuristic offers a single algorithm, which needs no workspace; the
//!   workspace, the other preferences and cuBLAS algorithm ids are accepted and have no effect.
//!   Alignment is modelled at its worst: the algorithm the heuristic returns needs the pointer
//!   alignments its preference allowed (`MIN_ALIGNMENT_{A,B,C,D}_BYTES`, 256 by default, as
//!   cuBLASLt's), and `cublasLtMatmul` refuses less aligned operands with
//!   `CUBLAS_STATUS_NOT_SUPPORTED`, where a GPU kernel picked under too strong a preference may
//!   fault with a misaligned address.

// The exported names and parameter conventions are NVIDIA's.
#![allow(non_snake_case)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::mem::size_of;
use std::num::NonZero;
use std::ops::Range;

use cudarc::cublas::sys as cublas;
use cudarc::cublaslt::sys as cublaslt;
use half::{bf16, f16};

// ---------------------------------------------------------------------------------------------
// Statuses

/// Why a call failed; each library has its own status type with the same values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    /// A null or foreign library handle.
    NotInitialized,
    /// A bad argument: a null pointer, sizes that disagree, an unknown attribute or value.
    InvalidValue,
    /// A well-formed request for something the emulator does not model.
    NotSupported,
    /// Host memory for the converted operands could not be had.
    AllocFailed,
}

impl Fail {
    fn cublas(self) -> cublas::cublasStatus_t {
        use cublas::cublasStatus_t as S;
        match self {
            Fail::NotInitialized => S::CUBLAS_STATUS_NOT_INITIALIZED,
            Fail::InvalidValue => S::CUBLAS_STATUS_INVALID_VALUE,
            Fail::NotSupported => S::CUBLAS_STATUS_NOT_SUPPORTED,
            Fail::AllocFailed => S::CUBLAS_STATUS_ALLOC_FAILED,
        }
    }

    fn cublaslt(self) -> cublaslt::cublasStatus_t {
        use cublaslt::cublasStatus_t as S;
        match self {
            Fail::NotInitialized => S::CUBLAS_STATUS_NOT_INITIALIZED,
            Fail::InvalidValue => S::CUBLAS_STATUS_INVALID_VALUE,
            Fail::NotSupported => S::CUBLAS_STATUS_NOT_SUPPORTED,
            Fail::AllocFailed => S::CUBLAS_STATUS_ALLOC_FAILED,
        }
    }
}

fn cublas_status(outcome: Result<(), Fail>) -> cublas::cublasStatus_t {
    outcome.map_or_else(Fail::cublas, |()| {
        cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS
    })
}

fn cublaslt_status(outcome: Result<(), Fail>) -> cublaslt::cublasStatus_t {
    outcome.map_or_else(Fail::cublaslt, |()| {
        cublaslt::cublasStatus_t::CUBLAS_STATUS_SUCCESS
    })
}

/// The name and description of a status value (both libraries share the values).
fn status_texts(raw: u32) -> (&'static CStr, &'static CStr) {
    use cublas::cublasStatus_t as S;
    const SUCCESS: u32 = S::CUBLAS_STATUS_SUCCESS as u32;
    const NOT_INITIALIZED: u32 = S::CUBLAS_STATUS_NOT_INITIALIZED as u32;
    const ALLOC_FAILED: u32 = S::CUBLAS_STATUS_ALLOC_FAILED as u32;
    const INVALID_VALUE: u32 = S::CUBLAS_STATUS_INVALID_VALUE as u32;
    const ARCH_MISMATCH: u32 = S::CUBLAS_STATUS_ARCH_MISMATCH as u32;
    const MAPPING_ERROR: u32 = S::CUBLAS_STATUS_MAPPING_ERROR as u32;
    const EXECUTION_FAILED: u32 = S::CUBLAS_STATUS_EXECUTION_FAILED as u32;
    const INTERNAL_ERROR: u32 = S::CUBLAS_STATUS_INTERNAL_ERROR as u32;
    const NOT_SUPPORTED: u32 = S::CUBLAS_STATUS_NOT_SUPPORTED as u32;
    const LICENSE_ERROR: u32 = S::CUBLAS_STATUS_LICENSE_ERROR as u32;
    match raw {
        SUCCESS => (
            c"CUBLAS_STATUS_SUCCESS",
            c"the operation completed successfully",
        ),
        NOT_INITIALIZED => (
            c"CUBLAS_STATUS_NOT_INITIALIZED",
            c"the library was not initialized (a null or invalid handle)",
        ),
        ALLOC_FAILED => (
            c"CUBLAS_STATUS_ALLOC_FAILED",
            c"the resource allocation failed",
        ),
        INVALID_VALUE => (
            c"CUBLAS_STATUS_INVALID_VALUE",
            c"an invalid value was used as an argument",
        ),
        ARCH_MISMATCH => (
            c"CUBLAS_STATUS_ARCH_MISMATCH",
            c"an absent device architectural feature is required",
        ),
        MAPPING_ERROR => (
            c"CUBLAS_STATUS_MAPPING_ERROR",
            c"an access to GPU memory space failed",
        ),
        EXECUTION_FAILED => (
            c"CUBLAS_STATUS_EXECUTION_FAILED",
            c"the GPU program failed to execute",
        ),
        INTERNAL_ERROR => (
            c"CUBLAS_STATUS_INTERNAL_ERROR",
            c"an internal operation failed",
        ),
        NOT_SUPPORTED => (
            c"CUBLAS_STATUS_NOT_SUPPORTED",
            c"the functionality requested is not supported (by the CPU emulator)",
        ),
        LICENSE_ERROR => (
            c"CUBLAS_STATUS_LICENSE_ERROR",
            c"an error was detected when checking the current licensing",
        ),
        _ => (c"CUBLAS_STATUS_UNKNOWN", c"unknown status"),
    }
}

// ---------------------------------------------------------------------------------------------
// Element types and arithmetic

const R_32F: u32 = cublaslt::cudaDataType::CUDA_R_32F as u32;
const R_16F: u32 = cublaslt::cudaDataType::CUDA_R_16F as u32;
const R_16BF: u32 = cublaslt::cudaDataType::CUDA_R_16BF as u32;

/// The storage type of a matrix or scalar: the real types tileops uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    F32,
    F16,
    BF16,
}

impl Elem {
    /// The type a raw `cudaDataType` names; others (f64, integers, fp8, complex) are not modelled.
    fn from_raw(raw: u32) -> Result<Elem, Fail> {
        match raw {
            R_32F => Ok(Elem::F32),
            R_16F => Ok(Elem::F16),
            R_16BF => Ok(Elem::BF16),
            _ => Err(Fail::NotSupported),
        }
    }

    fn bytes(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::F16 | Elem::BF16 => 2,
        }
    }

    /// The element at `ptr`, widened (exactly) to f32.
    ///
    /// # Safety
    /// `ptr` addresses a readable element of this type; any alignment.
    unsafe fn load(self, ptr: *const u8) -> f32 {
        // SAFETY: the caller's contract; unaligned reads, since nothing promises alignment.
        unsafe {
            match self {
                Elem::F32 => ptr.cast::<f32>().read_unaligned(),
                Elem::F16 => f16::from_bits(ptr.cast::<u16>().read_unaligned()).to_f32(),
                Elem::BF16 => bf16::from_bits(ptr.cast::<u16>().read_unaligned()).to_f32(),
            }
        }
    }

    /// Stores `value` at `ptr`, rounded to this type (to nearest even).
    ///
    /// # Safety
    /// `ptr` addresses a writable element of this type; any alignment.
    unsafe fn store(self, ptr: *mut u8, value: f32) {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Elem::F32 => ptr.cast::<f32>().write_unaligned(value),
                Elem::F16 => ptr
                    .cast::<u16>()
                    .write_unaligned(f16::from_f32(value).to_bits()),
                Elem::BF16 => ptr
                    .cast::<u16>()
                    .write_unaligned(bf16::from_f32(value).to_bits()),
            }
        }
    }
}

/// How inputs are rounded before they are multiplied: the input precision of the compute type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InputRounding {
    /// Used as stored.
    Exact,
    /// To TF32 (`*_FAST_TF32`, `CUBLAS_TF32_TENSOR_OP_MATH`).
    Tf32,
    /// To f16 (`*_FAST_16F`, `CUBLAS_TENSOR_OP_MATH`).
    F16,
    /// To bf16 (`*_FAST_16BF`).
    Bf16,
}

impl InputRounding {
    fn apply(self, x: f32) -> f32 {
        match self {
            InputRounding::Exact => x,
            InputRounding::Tf32 => round_to_tf32(x),
            InputRounding::F16 => f16::from_f32(x).to_f32(),
            InputRounding::Bf16 => bf16::from_f32(x).to_f32(),
        }
    }
}

/// `x` rounded to TF32 (8 exponent bits, 10 explicit mantissa bits), to nearest even, on the f32
/// bit pattern: the 13 low mantissa bits are rounded away. NaN and infinities pass unchanged
/// (rounding a NaN's payload could make it an infinity); finite values beyond TF32's largest
/// round to infinity, as round-to-nearest does.
fn round_to_tf32(x: f32) -> f32 {
    const DROPPED_BITS: u32 = 13;
    const HALF_MINUS_ONE: u32 = (1 << (DROPPED_BITS - 1)) - 1;
    const KEPT_MASK: u32 = !((1 << DROPPED_BITS) - 1);
    if !x.is_finite() {
        return x;
    }
    let bits = x.to_bits();
    // Adding just under half rounds up past the half; the kept lowest bit breaks ties to even.
    // No overflow: the largest finite pattern, 0xFF7F_FFFF, plus 0x1000 is below 2^32.
    let lowest_kept = (bits >> DROPPED_BITS) & 1;
    f32::from_bits((bits + HALF_MINUS_ONE + lowest_kept) & KEPT_MASK)
}

/// `x` rounded to f16 (to nearest even), widened back.
fn round_f16(x: f64) -> f32 {
    f16::from_f64(x).to_f32()
}

/// The width of the accumulator (and of the `alpha`/`beta` arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accumulate {
    F32,
    /// `CUBLAS_COMPUTE_16F`: rounded to f16 after every step.
    F16,
}

const COMPUTE_16F: u32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_16F as u32;
const COMPUTE_16F_PEDANTIC: u32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_16F_PEDANTIC as u32;
const COMPUTE_32F: u32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F as u32;
const COMPUTE_32F_PEDANTIC: u32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC as u32;
const COMPUTE_32F_FAST_16F: u32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_16F as u32;
const COMPUTE_32F_FAST_16BF: u32 =
    cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_16BF as u32;
const COMPUTE_32F_FAST_TF32: u32 =
    cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32 as u32;

/// A compute type, as far as it changes the arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compute {
    /// `CUBLAS_COMPUTE_32F`: f32 accumulation; f32 inputs as stored, unless cuBLAS's math mode
    /// says otherwise.
    F32,
    /// `CUBLAS_COMPUTE_32F_PEDANTIC`: as `F32`, whatever the math mode.
    F32Pedantic,
    /// `CUBLAS_COMPUTE_32F_FAST_*`: f32 data and accumulation, inputs rounded first.
    F32Fast(InputRounding),
    /// `CUBLAS_COMPUTE_16F` and `_PEDANTIC`: f16 data, scale and accumulation.
    F16,
}

impl Compute {
    /// The compute type a raw `cublasComputeType_t` names; f64, integer and the emulated types
    /// are not modelled.
    fn from_raw(raw: u32) -> Result<Compute, Fail> {
        match raw {
            COMPUTE_32F => Ok(Compute::F32),
            COMPUTE_32F_PEDANTIC => Ok(Compute::F32Pedantic),
            COMPUTE_32F_FAST_TF32 => Ok(Compute::F32Fast(InputRounding::Tf32)),
            COMPUTE_32F_FAST_16F => Ok(Compute::F32Fast(InputRounding::F16)),
            COMPUTE_32F_FAST_16BF => Ok(Compute::F32Fast(InputRounding::Bf16)),
            COMPUTE_16F | COMPUTE_16F_PEDANTIC => Ok(Compute::F16),
            _ => Err(Fail::NotSupported),
        }
    }

    /// The type alpha and beta are given in.
    fn scale(self) -> Elem {
        match self {
            Compute::F16 => Elem::F16,
            _ => Elem::F32,
        }
    }

    fn accumulate(self) -> Accumulate {
        match self {
            Compute::F16 => Accumulate::F16,
            _ => Accumulate::F32,
        }
    }

    /// Checks the types of A, B and C (= D) against cuBLAS's table of supported combinations.
    fn check_types(self, a: Elem, b: Elem, c: Elem) -> Result<(), Fail> {
        let supported = match self {
            Compute::F32 | Compute::F32Pedantic => a == b && (c == a || c == Elem::F32),
            Compute::F32Fast(_) => [a, b, c] == [Elem::F32; 3],
            Compute::F16 => [a, b, c] == [Elem::F16; 3],
        };
        if supported {
            Ok(())
        } else {
            Err(Fail::NotSupported)
        }
    }
}

const OP_N: i32 = cublas::cublasOperation_t::CUBLAS_OP_N as i32;
const OP_T: i32 = cublas::cublasOperation_t::CUBLAS_OP_T as i32;
const OP_C: i32 = cublas::cublasOperation_t::CUBLAS_OP_C as i32;

/// Whether a raw `cublasOperation_t` transposes; `CUBLAS_OP_C` is `CUBLAS_OP_T` on real data.
/// `CUBLAS_OP_CONJG` (conjugate without transposing) is not an operation gemm takes.
fn transposed(raw: i32) -> Result<bool, Fail> {
    match raw {
        OP_N => Ok(false),
        OP_T | OP_C => Ok(true),
        _ => Err(Fail::InvalidValue),
    }
}

// ---------------------------------------------------------------------------------------------
// Matrices and the product

/// A matrix (or a batch of them) in memory.
#[derive(Clone, Copy, Debug)]
struct Matrix {
    /// The first element; null until the layout is bound to a buffer.
    base: *mut u8,
    elem: Elem,
    rows: usize,
    cols: usize,
    /// Elements from one column to the next (column-major) or one row to the next (row-major).
    ld: usize,
    row_major: bool,
    /// Elements from one matrix of the batch to the next; 0 repeats one matrix.
    batch_stride: isize,
}

impl Matrix {
    /// An unbound matrix; the leading dimension must be at least the column (or row) length, and
    /// at least 1, as cuBLAS requires.
    fn new(
        elem: Elem,
        rows: usize,
        cols: usize,
        ld: usize,
        row_major: bool,
        batch_stride: isize,
    ) -> Result<Matrix, Fail> {
        let minimum = if row_major { cols } else { rows };
        if ld < minimum.max(1) {
            return Err(Fail::InvalidValue);
        }
        Ok(Matrix {
            base: std::ptr::null_mut(),
            elem,
            rows,
            cols,
            ld,
            row_major,
            batch_stride,
        })
    }

    fn bound(self, base: *const c_void) -> Matrix {
        Matrix {
            base: base.cast_mut().cast(),
            ..self
        }
    }

    fn same_layout(&self, other: &Matrix) -> bool {
        (self.elem, self.rows, self.cols, self.ld) == (other.elem, other.rows, other.cols, other.ld)
            && self.row_major == other.row_major
            && self.batch_stride == other.batch_stride
    }

    /// Checks that every byte of `batch_count` matrices lies within `isize::MAX` of the base, so
    /// that [`Matrix::byte_offset`] cannot overflow.
    fn check_extent(&self, batch_count: usize) -> Result<(), Fail> {
        if self.rows == 0 || self.cols == 0 || batch_count == 0 {
            return Ok(());
        }
        let (outer, inner) = if self.row_major {
            (self.rows, self.cols)
        } else {
            (self.cols, self.rows)
        };
        let extent = || -> Option<(i128, i128)> {
            let bytes = self.elem.bytes() as i128;
            let last_within = (outer as i128 - 1)
                .checked_mul(self.ld as i128)?
                .checked_add(inner as i128 - 1)?;
            let last_batch = (batch_count as i128 - 1).checked_mul(self.batch_stride as i128)?;
            let end = last_within
                .checked_add(last_batch.max(0))?
                .checked_add(1)?
                .checked_mul(bytes)?;
            let start = last_batch.min(0).checked_mul(bytes)?;
            Some((start, end))
        };
        match extent() {
            Some((start, end)) if start >= -(isize::MAX as i128) && end <= isize::MAX as i128 => {
                Ok(())
            }
            _ => Err(Fail::InvalidValue),
        }
    }

    /// Byte offset of element (row, col) of matrix `batch`; in range by [`Matrix::check_extent`].
    fn byte_offset(&self, batch: usize, row: usize, col: usize) -> isize {
        let within = if self.row_major {
            row * self.ld + col
        } else {
            col * self.ld + row
        };
        (batch as isize * self.batch_stride + within as isize) * self.elem.bytes() as isize
    }

    /// # Safety
    /// The matrix is bound to a buffer covering its extent, and (row, col, batch) is inside it.
    unsafe fn load(&self, batch: usize, row: usize, col: usize) -> f32 {
        let ptr = self.base.wrapping_offset(self.byte_offset(batch, row, col));
        // SAFETY: the caller's contract.
        unsafe { self.elem.load(ptr) }
    }

    /// # Safety
    /// As [`Matrix::load`], and the buffer is writable.
    unsafe fn store(&self, batch: usize, row: usize, col: usize, value: f32) {
        let ptr = self.base.wrapping_offset(self.byte_offset(batch, row, col));
        // SAFETY: the caller's contract.
        unsafe { self.elem.store(ptr, value) }
    }
}

/// Multiply-adds below which one thread computes the whole product: spawning costs more.
const PARALLEL_WORK: usize = 1 << 21;

/// One checked, bound, batched product `D = alpha op(A) op(B) + beta C`: `op(A)` is m x k,
/// `op(B)` k x n, C and D m x n.
struct Product {
    m: usize,
    n: usize,
    k: usize,
    batch_count: usize,
    /// A as stored: m x k, or k x m when transposed.
    a: Matrix,
    trans_a: bool,
    /// B as stored: k x n, or n x k when transposed.
    b: Matrix,
    trans_b: bool,
    /// None when beta is zero: C is then never read.
    c: Option<Matrix>,
    d: Matrix,
    /// Widened to f32 (exactly, from an f16 scale type).
    alpha: f32,
    beta: f32,
    rounding: InputRounding,
    accumulate: Accumulate,
}

// SAFETY: the pointers of a product are only read, except D's, and threads share a product only
// in `run_batch`, where each writes its own columns of D. Distinct (row, column) pairs of one
// matrix are distinct elements because the leading dimension is at least the minimum.
unsafe impl Sync for Product {}

impl Product {
    /// Whether `op(A) op(B)` contributes at all; when not, A and B are not read (BLAS semantics).
    fn multiplies(&self) -> bool {
        self.alpha != 0.0 && self.k > 0
    }

    /// Computes the product.
    ///
    /// # Safety
    /// Every bound buffer covers its matrix's extent (checked by `check_extent` for every
    /// matrix) for `batch_count` matrices; D is writable.
    unsafe fn run(&self) -> Result<(), Fail> {
        // Device memory changes only under this lock (see memory::exclusive).
        let _device = crate::memory::exclusive();
        if self.m == 0 || self.n == 0 || self.batch_count == 0 {
            return Ok(());
        }
        let multiplies = self.multiplies();
        let inputs_missing = multiplies && (self.a.base.is_null() || self.b.base.is_null());
        let c_missing = self.c.is_some_and(|c| c.base.is_null());
        if self.d.base.is_null() || inputs_missing || c_missing {
            return Err(Fail::InvalidValue);
        }
        // op(A) and op(B) converted to f32 (and rounded) once per batch: op(A) by columns (the
        // kernel runs down them), op(B) by columns (one per output column).
        let (mut op_a, mut op_b) = (Vec::new(), Vec::new());
        if multiplies {
            op_a = reserve(self.m.checked_mul(self.k))?;
            op_b = reserve(self.n.checked_mul(self.k))?;
        }
        let kernel = Kernel::for_accumulator(self.accumulate);
        for batch in 0..self.batch_count {
            if multiplies {
                // SAFETY: the caller's contract.
                unsafe { self.load_operands(batch, &mut op_a, &mut op_b) };
            }
            // SAFETY: the caller's contract.
            unsafe { self.run_batch(batch, &op_a, &op_b, kernel) };
        }
        Ok(())
    }

    /// Fills `op_a` with op(A) column by column (`op_a[p * m + i] = op(A)[i, p]`) and `op_b` with
    /// op(B) column by column (`op_b[j * k + p] = op(B)[p, j]`), inputs rounded.
    ///
    /// # Safety
    /// As [`Product::run`]; the vectors have room for m * k and n * k values.
    unsafe fn load_operands(&self, batch: usize, op_a: &mut Vec<f32>, op_b: &mut Vec<f32>) {
        op_a.clear();
        for p in 0..self.k {
            for i in 0..self.m {
                let (row, col) = if self.trans_a { (p, i) } else { (i, p) };
                // SAFETY: (row, col) is inside A as stored.
                op_a.push(self.rounding.apply(unsafe { self.a.load(batch, row, col) }));
            }
        }
        op_b.clear();
        for j in 0..self.n {
            for p in 0..self.k {
                let (row, col) = if self.trans_b { (j, p) } else { (p, j) };
                // SAFETY: (row, col) is inside B as stored.
                op_b.push(self.rounding.apply(unsafe { self.b.load(batch, row, col) }));
            }
        }
    }

    /// Computes matrix `batch` of D, its columns shared out over threads for large products.
    ///
    /// # Safety
    /// As [`Product::run`].
    unsafe fn run_batch(&self, batch: usize, op_a: &[f32], op_b: &[f32], kernel: Kernel) {
        let work = self.m.saturating_mul(self.n).saturating_mul(self.k);
        let workers = if work < PARALLEL_WORK {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(1, NonZero::get)
                .min(self.n)
        };
        if workers <= 1 {
            // SAFETY: the caller's contract.
            unsafe { self.columns(batch, 0..self.n, op_a, op_b, kernel) };
            return;
        }
        // At least 1, as n >= 1.
        let chunk = self.n.div_ceil(workers);
        std::thread::scope(|scope| {
            for start in (chunk..self.n).step_by(chunk) {
                let range = start..self.n.min(start.saturating_add(chunk));
                let share = range.clone();
                // SAFETY: the caller's contract; each share writes only its own columns of D.
                let job = move || unsafe { self.columns(batch, share, op_a, op_b, kernel) };
                if std::thread::Builder::new()
                    .spawn_scoped(scope, job)
                    .is_err()
                {
                    // No thread to be had: this share is done here instead.
                    // SAFETY: as above.
                    unsafe { self.columns(batch, range, op_a, op_b, kernel) };
                }
            }
            // SAFETY: as above; the first share is this thread's.
            unsafe { self.columns(batch, 0..chunk.min(self.n), op_a, op_b, kernel) };
        });
    }

    /// Computes columns `range` of matrix `batch` of D.
    ///
    /// # Safety
    /// As [`Product::run`]; no other thread writes these columns.
    unsafe fn columns(
        &self,
        batch: usize,
        range: Range<usize>,
        op_a: &[f32],
        op_b: &[f32],
        kernel: Kernel,
    ) {
        let multiplies = self.multiplies();
        let mut acc = vec![0.0f32; self.m];
        for j in range {
            if multiplies {
                // Always present: op_b holds n columns of k.
                let b_col = op_b.get(j * self.k..(j + 1) * self.k).unwrap_or_default();
                kernel.run(op_a, b_col, &mut acc);
            }
            for (i, &sum) in acc.iter().enumerate() {
                // SAFETY: (i, j) is inside C and D; the caller's contract.
                unsafe { self.finish(batch, i, j, sum, multiplies) };
            }
        }
    }

    /// Scales the accumulated `sum` of element (i, j), adds `beta * C` when C is read, and stores
    /// the result rounded to D's type.
    ///
    /// # Safety
    /// As [`Product::columns`], (i, j) inside C and D.
    unsafe fn finish(&self, batch: usize, i: usize, j: usize, sum: f32, multiplies: bool) {
        // SAFETY: the caller's contract.
        let c = self.c.map(|c| unsafe { c.load(batch, i, j) });
        let value = match self.accumulate {
            Accumulate::F32 => {
                let scaled = if multiplies { self.alpha * sum } else { 0.0 };
                match c {
                    None => scaled,
                    Some(c) => self.beta.mul_add(c, scaled),
                }
            }
            Accumulate::F16 => {
                let scaled = if multiplies {
                    round_f16(f64::from(self.alpha) * f64::from(sum))
                } else {
                    0.0
                };
                match c {
                    None => scaled,
                    Some(c) => {
                        round_f16(f64::from(self.beta).mul_add(f64::from(c), f64::from(scaled)))
                    }
                }
            }
        };
        // SAFETY: the caller's contract.
        unsafe { self.d.store(batch, i, j, value) };
    }
}

/// An empty vector with room for `len` values (None: more than can be counted).
fn reserve(len: Option<usize>) -> Result<Vec<f32>, Fail> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(len.ok_or(Fail::AllocFailed)?)
        .map_err(|_| Fail::AllocFailed)?;
    Ok(values)
}

/// The inner loop of one output column: `acc[i] = sum over p = 0..K, in order, of
/// op_a[p * m + i] * b_col[p]`.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    /// f32 fused multiply-adds, through `fmaf` where the CPU lacks FMA (same results, slower).
    F32,
    /// The same, compiled for AVX2 and FMA (selected only on CPUs that have them).
    F32Fma,
    /// f16 accumulation: rounded to f16 after each step.
    F16,
}

impl Kernel {
    fn for_accumulator(accumulate: Accumulate) -> Kernel {
        match accumulate {
            Accumulate::F16 => Kernel::F16,
            Accumulate::F32 if cpu_has_fma() => Kernel::F32Fma,
            Accumulate::F32 => Kernel::F32,
        }
    }

    fn run(self, op_a: &[f32], b_col: &[f32], acc: &mut [f32]) {
        match self {
            Kernel::F32 => accumulate_f32(op_a, b_col, acc),
            Kernel::F32Fma => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `F32Fma` is only chosen when the CPU has AVX2 and FMA.
                unsafe {
                    accumulate_f32_fma(op_a, b_col, acc)
                };
                #[cfg(not(target_arch = "x86_64"))]
                accumulate_f32(op_a, b_col, acc);
            }
            Kernel::F16 => accumulate_f16(op_a, b_col, acc),
        }
    }
}

fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// f32 accumulation; vectorised across the rows i, each row's sum still running over p in order.
#[inline(always)]
fn accumulate_f32(op_a: &[f32], b_col: &[f32], acc: &mut [f32]) {
    acc.fill(0.0);
    if acc.is_empty() {
        return;
    }
    for (a_col, &b) in op_a.chunks_exact(acc.len()).zip(b_col) {
        for (sum, &a) in acc.iter_mut().zip(a_col) {
            *sum = a.mul_add(b, *sum);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn accumulate_f32_fma(op_a: &[f32], b_col: &[f32], acc: &mut [f32]) {
    accumulate_f32(op_a, b_col, acc);
}

/// f16 accumulation: each step `acc + a * b` is formed in f64 (the product of two f16 values is
/// exact there) and rounded to f16.
fn accumulate_f16(op_a: &[f32], b_col: &[f32], acc: &mut [f32]) {
    acc.fill(0.0);
    if acc.is_empty() {
        return;
    }
    for (a_col, &b) in op_a.chunks_exact(acc.len()).zip(b_col) {
        for (sum, &a) in acc.iter_mut().zip(a_col) {
            *sum = round_f16(f64::from(a) * f64::from(b) + f64::from(*sum));
        }
    }
}

/// A scalar (alpha, beta) of type `elem`, widened to f32. Host and device pointer modes read the
/// same way: a device pointer is a host address.
///
/// # Safety
/// `ptr` is null or addresses an element of type `elem`.
unsafe fn read_scalar(ptr: *const c_void, elem: Elem) -> Result<f32, Fail> {
    if ptr.is_null() {
        return Err(Fail::InvalidValue);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { elem.load(ptr.cast()) })
}

// ---------------------------------------------------------------------------------------------
// Handles and descriptors

/// A kind of object this module hands out as an opaque handle: boxed, `#[repr(C)]`, with a u64
/// tag as its first field, so that the tag of any handle it made can be read whatever its kind.
trait Object: Sized {
    /// The tag of this kind.
    const TAG: u64;
    /// The status for a null or foreign handle of this kind.
    const BAD_HANDLE: Fail;
}

/// Boxes `object` and writes its address to `out`.
///
/// # Safety
/// `out` is null or writable.
unsafe fn hand_out<T: Object, H>(out: *mut *mut H, object: T) -> Result<(), Fail> {
    if out.is_null() {
        return Err(Fail::InvalidValue);
    }
    let raw = Box::into_raw(Box::new(object)).cast::<H>();
    // SAFETY: the caller's contract.
    unsafe { out.write(raw) };
    Ok(())
}

/// The object of kind `T` behind `handle`.
///
/// # Safety
/// `handle` is null or a live handle made by this module (of any kind).
unsafe fn object<T: Object, H>(handle: *mut H) -> Result<*mut T, Fail> {
    if handle.is_null() {
        return Err(T::BAD_HANDLE);
    }
    // SAFETY: every object starts with its u64 tag (see `Object`); the caller's contract.
    let tag = unsafe { handle.cast::<u64>().read_unaligned() };
    if tag != T::TAG {
        return Err(T::BAD_HANDLE);
    }
    Ok(handle.cast::<T>())
}

/// Frees the object of kind `T` behind `handle`.
///
/// # Safety
/// As [`object()`]; the handle is not used afterwards.
unsafe fn destroy<T: Object, H>(handle: *mut H) -> Result<(), Fail> {
    // SAFETY: the caller's contract.
    let object = unsafe { object::<T, H>(handle) }?;
    // SAFETY: made by `Box::into_raw` in `hand_out`, freed once (the caller's contract).
    drop(unsafe { Box::from_raw(object) });
    Ok(())
}

/// Reads an attribute value of type `T` (a plain integer, float or pointer-sized type) from
/// `buf`, which must be exactly its size, as cuBLASLt requires.
///
/// # Safety
/// `buf` is null or addresses `size` readable bytes.
unsafe fn attribute<T: Copy>(buf: *const c_void, size: usize) -> Result<T, Fail> {
    if buf.is_null() || size != size_of::<T>() {
        return Err(Fail::InvalidValue);
    }
    // SAFETY: the caller's contract; `T` is plain data of `size` bytes.
    Ok(unsafe { buf.cast::<T>().read_unaligned() })
}

/// A cuBLAS handle: the settings that calls on it read.
#[repr(C)]
struct BlasHandle {
    tag: u64,
    /// Recorded for `cublasGetStream`; work runs synchronously.
    stream: cublas::cudaStream_t,
    /// Recorded for `cublasGetPointerMode`; host and device scalars read alike.
    pointer_mode: cublas::cublasPointerMode_t,
    /// Decides the input rounding of f32 routines (see [`math_mode_rounding`]).
    math_mode: cublas::cublasMath_t,
}

impl Object for BlasHandle {
    const TAG: u64 = u64::from_le_bytes(*b"emuBLAS!");
    const BAD_HANDLE: Fail = Fail::NotInitialized;
}

/// A cuBLASLt handle: no state.
#[repr(C)]
struct LtHandle {
    tag: u64,
}

impl Object for LtHandle {
    const TAG: u64 = u64::from_le_bytes(*b"emuBLSLt");
    const BAD_HANDLE: Fail = Fail::NotInitialized;
}

/// A cuBLASLt matmul descriptor. Attributes the emulator cannot honour are refused when set, so
/// only these can differ from the defaults.
#[repr(C)]
struct MatmulDesc {
    tag: u64,
    /// Raw `cublasComputeType_t`, checked at use against the layouts.
    compute: u32,
    /// Raw `cudaDataType` of alpha and beta, checked at use.
    scale: u32,
    trans_a: bool,
    trans_b: bool,
}

impl Object for MatmulDesc {
    const TAG: u64 = u64::from_le_bytes(*b"emuLtDsc");
    const BAD_HANDLE: Fail = Fail::InvalidValue;
}

/// A cuBLASLt matrix layout, its values checked at use.
#[repr(C)]
struct Layout {
    tag: u64,
    /// Raw `cudaDataType`.
    data_type: u32,
    rows: u64,
    cols: u64,
    ld: i64,
    row_major: bool,
    /// At least 1 (checked when set).
    batch_count: i32,
    batch_stride: i64,
}

impl Object for Layout {
    const TAG: u64 = u64::from_le_bytes(*b"emuLtLay");
    const BAD_HANDLE: Fail = Fail::InvalidValue;
}

impl Layout {
    /// The unbound matrix this layout describes.
    fn matrix(&self) -> Result<Matrix, Fail> {
        let elem = Elem::from_raw(self.data_type)?;
        let size = |v: u64| usize::try_from(v).map_err(|_| Fail::InvalidValue);
        let ld = usize::try_from(self.ld).map_err(|_| Fail::InvalidValue)?;
        let stride = isize::try_from(self.batch_stride).map_err(|_| Fail::InvalidValue)?;
        Matrix::new(
            elem,
            size(self.rows)?,
            size(self.cols)?,
            ld,
            self.row_major,
            stride,
        )
    }
}

/// A cuBLASLt preference: every preference is met by the one algorithm (no workspace, one
/// wave); the minimum alignments are kept, as the algorithm will need them.
#[repr(C)]
struct Preference {
    tag: u64,
    /// `MIN_ALIGNMENT_{A,B,C,D}_BYTES`.
    min_alignment: [u32; 4],
}

/// cuBLASLt's default `MIN_ALIGNMENT_*_BYTES`.
const DEFAULT_ALIGNMENT: u32 = 256;

impl Object for Preference {
    const TAG: u64 = u64::from_le_bytes(*b"emuLtPrf");
    const BAD_HANDLE: Fail = Fail::InvalidValue;
}

/// The first word of the one algorithm the heuristic returns, by which `cublasLtMatmul`
/// recognises it; words 1 to 4 are the alignments, bytes, it needs of A, B, C and D.
const ALGO_ID: u64 = u64::from_le_bytes(*b"emuAlgo1");

// ---------------------------------------------------------------------------------------------
// cuBLAS

/// Creates a cuBLAS handle: default math, host pointer mode, the default stream.
///
/// # Safety
/// `handle` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasCreate_v2(
    handle: *mut cublas::cublasHandle_t,
) -> cublas::cublasStatus_t {
    let object = BlasHandle {
        tag: BlasHandle::TAG,
        stream: std::ptr::null_mut(),
        pointer_mode: cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST,
        math_mode: cublas::cublasMath_t::CUBLAS_DEFAULT_MATH,
    };
    // SAFETY: the caller's contract.
    cublas_status(unsafe { hand_out(handle, object) })
}

/// Frees a cuBLAS handle.
///
/// # Safety
/// `handle` is null or a live handle from `cublasCreate_v2`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasDestroy_v2(
    handle: cublas::cublasHandle_t,
) -> cublas::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublas_status(unsafe { destroy::<BlasHandle, _>(handle) })
}

/// Records the handle's stream (work runs synchronously whatever it is).
///
/// # Safety
/// `handle` is null or a live cuBLAS handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetStream_v2(
    handle: cublas::cublasHandle_t,
    stream: cublas::cudaStream_t,
) -> cublas::cublasStatus_t {
    // SAFETY: the caller's contract; no other reference to the handle is live.
    cublas_status(
        unsafe { object::<BlasHandle, _>(handle) }.map(|h| unsafe { (*h).stream = stream }),
    )
}

/// The stream last set on the handle (null: the default stream).
///
/// # Safety
/// `handle` is null or a live cuBLAS handle; `stream` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetStream_v2(
    handle: cublas::cublasHandle_t,
    stream: *mut cublas::cudaStream_t,
) -> cublas::cublasStatus_t {
    let get = || -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let h = unsafe { object::<BlasHandle, _>(handle) }?;
        if stream.is_null() {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: the caller's contract.
        unsafe { stream.write((*h).stream) };
        Ok(())
    };
    cublas_status(get())
}

/// Sets the math mode, which decides how f32 routines round their inputs (see
/// [`math_mode_rounding`]). The emulated-FP32 (BF16x9) mode is not modelled.
///
/// # Safety
/// `handle` is null or a live cuBLAS handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetMathMode(
    handle: cublas::cublasHandle_t,
    mode: cublas::cublasMath_t,
) -> cublas::cublasStatus_t {
    let set = || -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let h = unsafe { object::<BlasHandle, _>(handle) }?;
        if mode == cublas::cublasMath_t::CUBLAS_FP32_EMULATED_BF16X9_MATH {
            return Err(Fail::NotSupported);
        }
        // SAFETY: a live handle; no other reference to it is live.
        unsafe { (*h).math_mode = mode };
        Ok(())
    };
    cublas_status(set())
}

/// The handle's math mode.
///
/// # Safety
/// `handle` is null or a live cuBLAS handle; `mode` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetMathMode(
    handle: cublas::cublasHandle_t,
    mode: *mut cublas::cublasMath_t,
) -> cublas::cublasStatus_t {
    let get = || -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let h = unsafe { object::<BlasHandle, _>(handle) }?;
        if mode.is_null() {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: the caller's contract.
        unsafe { mode.write((*h).math_mode) };
        Ok(())
    };
    cublas_status(get())
}

/// Records the pointer mode; host and device scalars read alike (a device pointer is a host
/// address).
///
/// # Safety
/// `handle` is null or a live cuBLAS handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetPointerMode_v2(
    handle: cublas::cublasHandle_t,
    mode: cublas::cublasPointerMode_t,
) -> cublas::cublasStatus_t {
    // SAFETY: the caller's contract; no other reference to the handle is live.
    cublas_status(
        unsafe { object::<BlasHandle, _>(handle) }.map(|h| unsafe { (*h).pointer_mode = mode }),
    )
}

/// The handle's pointer mode.
///
/// # Safety
/// `handle` is null or a live cuBLAS handle; `mode` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetPointerMode_v2(
    handle: cublas::cublasHandle_t,
    mode: *mut cublas::cublasPointerMode_t,
) -> cublas::cublasStatus_t {
    let get = || -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let h = unsafe { object::<BlasHandle, _>(handle) }?;
        if mode.is_null() {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: the caller's contract.
        unsafe { mode.write((*h).pointer_mode) };
        Ok(())
    };
    cublas_status(get())
}

/// Accepts a user workspace; the emulator needs none.
///
/// # Safety
/// `handle` is null or a live cuBLAS handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetWorkspace_v2(
    handle: cublas::cublasHandle_t,
    _workspace: *mut c_void,
    _workspace_bytes: usize,
) -> cublas::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublas_status(unsafe { object::<BlasHandle, _>(handle) }.map(|_| ()))
}

/// The input rounding cuBLAS's math mode sets for f32 data under `CUBLAS_COMPUTE_32F` (cuBLAS
/// documents: TF32 tensor-op math uses TF32 tensor cores for single precision; the deprecated
/// tensor-op math uses `CUBLAS_COMPUTE_32F_FAST_16F`). The other modes keep f32 exact.
fn math_mode_rounding(mode: cublas::cublasMath_t) -> InputRounding {
    match mode {
        cublas::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH => InputRounding::Tf32,
        cublas::cublasMath_t::CUBLAS_TENSOR_OP_MATH => InputRounding::F16,
        _ => InputRounding::Exact,
    }
}

/// The arguments of a cuBLAS gemm (`Sgemm`, `GemmEx`), column-major.
struct BlasGemm {
    handle: cublas::cublasHandle_t,
    trans_a: cublas::cublasOperation_t,
    trans_b: cublas::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: u32,
    lda: c_int,
    b: *const c_void,
    b_type: u32,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    c_type: u32,
    ldc: c_int,
    compute: u32,
    /// How many products (1 for the plain GEMMs), and the elements from one matrix of A, B and
    /// C to the next (the strided-batched GEMMs).
    batch_count: c_int,
    strides: [i64; 3],
}

impl BlasGemm {
    /// Checks the arguments as cuBLAS does and computes `C = alpha op(A) op(B) + beta C`.
    ///
    /// # Safety
    /// The handle is null or live; the pointers address buffers of the described matrices.
    unsafe fn run(&self) -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let handle = unsafe { object::<BlasHandle, _>(self.handle) }?;
        // SAFETY: a live handle.
        let math_mode = unsafe { (*handle).math_mode };
        let count = |v: c_int| usize::try_from(v).map_err(|_| Fail::InvalidValue);
        let trans_a = transposed(self.trans_a as i32)?;
        let trans_b = transposed(self.trans_b as i32)?;
        let (m, n, k) = (count(self.m)?, count(self.n)?, count(self.k)?);
        let compute = Compute::from_raw(self.compute)?;
        let a_elem = Elem::from_raw(self.a_type)?;
        let b_elem = Elem::from_raw(self.b_type)?;
        let c_elem = Elem::from_raw(self.c_type)?;
        compute.check_types(a_elem, b_elem, c_elem)?;
        let (a_rows, a_cols) = if trans_a { (k, m) } else { (m, k) };
        let (b_rows, b_cols) = if trans_b { (n, k) } else { (k, n) };
        let batch_count = count(self.batch_count)?;
        let stride = |v: i64| isize::try_from(v).map_err(|_| Fail::InvalidValue);
        let a = Matrix::new(
            a_elem,
            a_rows,
            a_cols,
            count(self.lda)?,
            false,
            stride(self.strides[0])?,
        )?;
        let b = Matrix::new(
            b_elem,
            b_rows,
            b_cols,
            count(self.ldb)?,
            false,
            stride(self.strides[1])?,
        )?;
        let c = Matrix::new(
            c_elem,
            m,
            n,
            count(self.ldc)?,
            false,
            stride(self.strides[2])?,
        )?;
        for matrix in [&a, &b, &c] {
            matrix.check_extent(batch_count)?;
        }
        let rounding = match compute {
            Compute::F32 if a_elem == Elem::F32 => math_mode_rounding(math_mode),
            Compute::F32Fast(rounding) => rounding,
            _ => InputRounding::Exact,
        };
        // SAFETY: the caller's contract.
        let alpha = unsafe { read_scalar(self.alpha, compute.scale()) }?;
        // SAFETY: the caller's contract.
        let beta = unsafe { read_scalar(self.beta, compute.scale()) }?;
        let product = Product {
            m,
            n,
            k,
            batch_count,
            a: a.bound(self.a),
            trans_a,
            b: b.bound(self.b),
            trans_b,
            c: (beta != 0.0).then(|| c.bound(self.c)),
            d: c.bound(self.c),
            alpha,
            beta,
            rounding,
            accumulate: compute.accumulate(),
        };
        // SAFETY: every extent was checked; the caller's contract for the buffers.
        unsafe { product.run() }
    }
}

/// `C = alpha op(A) op(B) + beta C` in f32, column-major; the math mode may round the inputs
/// (see [`math_mode_rounding`]).
///
/// # Safety
/// `handle` is null or live; the pointers address buffers of the matrices described (`A` is
/// `lda x k` (or `lda x m` transposed), `B` `ldb x n` (`ldb x k`), `C` `ldc x n`), `C` writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLAS's signature.
pub unsafe extern "C" fn cublasSgemm_v2(
    handle: cublas::cublasHandle_t,
    transa: cublas::cublasOperation_t,
    transb: cublas::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    A: *const f32,
    lda: c_int,
    B: *const f32,
    ldb: c_int,
    beta: *const f32,
    C: *mut f32,
    ldc: c_int,
) -> cublas::cublasStatus_t {
    // One product: a batch of one, strides unused.
    // SAFETY: the caller's contract, which is the batched call's for one matrix each.
    unsafe {
        cublasSgemmStridedBatched(
            handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1,
        )
    }
}

/// `C = alpha op(A) op(B) + beta C` with the given types and compute type (alpha and beta in the
/// compute type's scale type: f16 for `CUBLAS_COMPUTE_16F*`, else f32); `algo` is a hint and
/// ignored.
///
/// # Safety
/// As [`cublasSgemm_v2`], for elements of the given types.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLAS's signature.
pub unsafe extern "C" fn cublasGemmEx(
    handle: cublas::cublasHandle_t,
    transa: cublas::cublasOperation_t,
    transb: cublas::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    Atype: cublas::cudaDataType,
    lda: c_int,
    B: *const c_void,
    Btype: cublas::cudaDataType,
    ldb: c_int,
    beta: *const c_void,
    C: *mut c_void,
    Ctype: cublas::cudaDataType,
    ldc: c_int,
    computeType: cublas::cublasComputeType_t,
    _algo: cublas::cublasGemmAlgo_t,
) -> cublas::cublasStatus_t {
    // One product: a batch of one, strides unused.
    // SAFETY: the caller's contract, which is the batched call's for one matrix each.
    unsafe {
        cublasGemmStridedBatchedEx(
            handle,
            transa,
            transb,
            m,
            n,
            k,
            alpha,
            A,
            Atype,
            lda,
            0,
            B,
            Btype,
            ldb,
            0,
            beta,
            C,
            Ctype,
            ldc,
            0,
            1,
            computeType,
            _algo,
        )
    }
}

/// `batchCount` products `C_i = alpha op(A_i) op(B_i) + beta C_i`, matrix `i` of each operand
/// `i * stride` elements after the first, with the types of [`cublasGemmEx`] (candle's matmul).
///
/// # Safety
/// As [`cublasGemmEx`], for `batchCount` matrices of each operand at the given strides.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLAS's signature.
pub unsafe extern "C" fn cublasGemmStridedBatchedEx(
    handle: cublas::cublasHandle_t,
    transa: cublas::cublasOperation_t,
    transb: cublas::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    A: *const c_void,
    Atype: cublas::cudaDataType,
    lda: c_int,
    strideA: i64,
    B: *const c_void,
    Btype: cublas::cudaDataType,
    ldb: c_int,
    strideB: i64,
    beta: *const c_void,
    C: *mut c_void,
    Ctype: cublas::cudaDataType,
    ldc: c_int,
    strideC: i64,
    batchCount: c_int,
    computeType: cublas::cublasComputeType_t,
    _algo: cublas::cublasGemmAlgo_t,
) -> cublas::cublasStatus_t {
    let call = BlasGemm {
        handle,
        trans_a: transa,
        trans_b: transb,
        m,
        n,
        k,
        alpha,
        a: A,
        a_type: Atype as u32,
        lda,
        b: B,
        b_type: Btype as u32,
        ldb,
        beta,
        c: C,
        c_type: Ctype as u32,
        ldc,
        compute: computeType as u32,
        batch_count: batchCount,
        strides: [strideA, strideB, strideC],
    };
    // SAFETY: the caller's contract.
    cublas_status(unsafe { call.run() })
}

/// The f32 strided-batched GEMM: [`cublasGemmStridedBatchedEx`] on f32 matrices.
///
/// # Safety
/// As [`cublasGemmStridedBatchedEx`], for f32 elements.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLAS's signature.
pub unsafe extern "C" fn cublasSgemmStridedBatched(
    handle: cublas::cublasHandle_t,
    transa: cublas::cublasOperation_t,
    transb: cublas::cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    A: *const f32,
    lda: c_int,
    strideA: i64,
    B: *const f32,
    ldb: c_int,
    strideB: i64,
    beta: *const f32,
    C: *mut f32,
    ldc: c_int,
    strideC: i64,
    batchCount: c_int,
) -> cublas::cublasStatus_t {
    let f32_type = cublas::cudaDataType::CUDA_R_32F;
    // SAFETY: the caller's contract, which is the typed call's for f32 matrices.
    unsafe {
        cublasGemmStridedBatchedEx(
            handle,
            transa,
            transb,
            m,
            n,
            k,
            alpha.cast(),
            A.cast(),
            f32_type,
            lda,
            strideA,
            B.cast(),
            f32_type,
            ldb,
            strideB,
            beta.cast(),
            C.cast(),
            f32_type,
            ldc,
            strideC,
            batchCount,
            cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
}

/// The f64 strided-batched GEMM, which candle links for its f64 matmul: the emulator models the
/// real types tileops uses (f32, f16, bf16), so it answers `CUBLAS_STATUS_NOT_SUPPORTED`, as
/// cuBLAS does for a type combination it lacks.
///
/// # Safety
/// None: no argument is read.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLAS's signature.
pub unsafe extern "C" fn cublasDgemmStridedBatched(
    _handle: cublas::cublasHandle_t,
    _transa: cublas::cublasOperation_t,
    _transb: cublas::cublasOperation_t,
    _m: c_int,
    _n: c_int,
    _k: c_int,
    _alpha: *const f64,
    _A: *const f64,
    _lda: c_int,
    _strideA: i64,
    _B: *const f64,
    _ldb: c_int,
    _strideB: i64,
    _beta: *const f64,
    _C: *mut f64,
    _ldc: c_int,
    _strideC: i64,
    _batchCount: c_int,
) -> cublas::cublasStatus_t {
    cublas_status(Err(Fail::NotSupported))
}

/// The description of a status, a static C string.
///
/// # Safety
/// None beyond the C signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetStatusString(status: cublas::cublasStatus_t) -> *const c_char {
    status_texts(status as u32).1.as_ptr()
}

/// The name of a status (`"CUBLAS_STATUS_..."`), a static C string.
///
/// # Safety
/// None beyond the C signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasGetStatusName(status: cublas::cublasStatus_t) -> *const c_char {
    status_texts(status as u32).0.as_ptr()
}

// ---------------------------------------------------------------------------------------------
// cuBLASLt

/// Creates a cuBLASLt handle.
///
/// # Safety
/// `light_handle` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtCreate(
    light_handle: *mut cublaslt::cublasLtHandle_t,
) -> cublaslt::cublasStatus_t {
    let object = LtHandle { tag: LtHandle::TAG };
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { hand_out(light_handle, object) })
}

/// Frees a cuBLASLt handle.
///
/// # Safety
/// `light_handle` is null or a live handle from `cublasLtCreate`, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtDestroy(
    light_handle: cublaslt::cublasLtHandle_t,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { destroy::<LtHandle, _>(light_handle) })
}

/// Creates a matmul descriptor: the compute and scale types (checked when used), no transposes,
/// the default epilogue, host pointer mode.
///
/// # Safety
/// `matmul_desc` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulDescCreate(
    matmul_desc: *mut cublaslt::cublasLtMatmulDesc_t,
    compute_type: cublaslt::cublasComputeType_t,
    scale_type: cublaslt::cudaDataType_t,
) -> cublaslt::cublasStatus_t {
    let object = MatmulDesc {
        tag: MatmulDesc::TAG,
        compute: compute_type as u32,
        scale: scale_type as u32,
        trans_a: false,
        trans_b: false,
    };
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { hand_out(matmul_desc, object) })
}

/// Frees a matmul descriptor.
///
/// # Safety
/// `matmul_desc` is null or a live descriptor, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulDescDestroy(
    matmul_desc: cublaslt::cublasLtMatmulDesc_t,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { destroy::<MatmulDesc, _>(matmul_desc) })
}

/// Sets a matmul descriptor attribute. The buffer must be exactly the attribute's size.
/// Modelled: compute and scale types, TRANSA/TRANSB, host or device pointer mode. Accepted at
/// their defaults only (else `NOT_SUPPORTED`): TRANSC, fill mode, epilogue, A/B/C/D scale
/// pointers and modes, amax and output-scale pointers, emulation descriptor. Accepted and without
/// effect: the bias and auxiliary-epilogue settings (no epilogue uses them), the SM count
/// target, fast accumulation (fp8 only).
///
/// # Safety
/// `matmul_desc` is null or a live descriptor; `buf` is null or addresses `size_in_bytes`
/// readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulDescSetAttribute(
    matmul_desc: cublaslt::cublasLtMatmulDesc_t,
    attr: cublaslt::cublasLtMatmulDescAttributes_t,
    buf: *const c_void,
    size_in_bytes: usize,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { set_desc_attribute(matmul_desc, attr, buf, size_in_bytes) })
}

/// # Safety
/// As [`cublasLtMatmulDescSetAttribute`].
unsafe fn set_desc_attribute(
    matmul_desc: cublaslt::cublasLtMatmulDesc_t,
    attr: cublaslt::cublasLtMatmulDescAttributes_t,
    buf: *const c_void,
    size: usize,
) -> Result<(), Fail> {
    use cublaslt::cublasLtMatmulDescAttributes_t as A;
    use cublaslt::cublasLtPointerMode_t as P;
    const POINTER_HOST: i32 = P::CUBLASLT_POINTER_MODE_HOST as i32;
    const POINTER_DEVICE: i32 = P::CUBLASLT_POINTER_MODE_DEVICE as i32;
    const POINTER_DEVICE_VECTOR: i32 = P::CUBLASLT_POINTER_MODE_DEVICE_VECTOR as i32;
    const POINTER_VECTOR_BETA_ZERO: i32 =
        P::CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO as i32;
    const POINTER_VECTOR_BETA_HOST: i32 =
        P::CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST as i32;
    const FILL_LOWER: i32 = cublas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as i32;
    const FILL_UPPER: i32 = cublas::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER as i32;
    const FILL_FULL: i32 = cublas::cublasFillMode_t::CUBLAS_FILL_MODE_FULL as i32;
    const EPILOGUE_DEFAULT: u32 = cublaslt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT as u32;
    const SCALE_SCALAR_32F: i32 =
        cublaslt::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F as i32;

    // SAFETY: the caller's contract.
    let desc = unsafe { object::<MatmulDesc, _>(matmul_desc) }?;
    // SAFETY: `buf` is null or addresses `size` readable bytes (this function's contract), which
    // is all `attribute` requires; the same holds for the three readers below.
    let value_i32 = || unsafe { attribute::<i32>(buf, size) };
    // SAFETY: as `value_i32`.
    let value_u32 = || unsafe { attribute::<u32>(buf, size) };
    // SAFETY: as `value_i32`.
    let value_i64 = || unsafe { attribute::<i64>(buf, size) };
    // SAFETY: as `value_i32`.
    let pointer = || unsafe { attribute::<usize>(buf, size) };
    let default_only = |is_default: bool| {
        if is_default {
            Ok(())
        } else {
            Err(Fail::NotSupported)
        }
    };
    match attr {
        A::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE => {
            let compute = value_u32()?;
            // SAFETY: `desc` is the live descriptor `object` checked the tag of (the caller's contract),
            // and nothing else refers to it during this call.
            unsafe { (*desc).compute = compute };
            Ok(())
        }
        A::CUBLASLT_MATMUL_DESC_SCALE_TYPE => {
            let scale = value_u32()?;
            // SAFETY: as for the compute type.
            unsafe { (*desc).scale = scale };
            Ok(())
        }
        A::CUBLASLT_MATMUL_DESC_TRANSA => {
            let trans = transposed(value_i32()?)?;
            // SAFETY: as for the compute type.
            unsafe { (*desc).trans_a = trans };
            Ok(())
        }
        A::CUBLASLT_MATMUL_DESC_TRANSB => {
            let trans = transposed(value_i32()?)?;
            // SAFETY: as for the compute type.
            unsafe { (*desc).trans_b = trans };
            Ok(())
        }
        // cuBLASLt itself supports only an untransposed C.
        A::CUBLASLT_MATMUL_DESC_TRANSC => default_only(!transposed(value_i32()?)?),
        A::CUBLASLT_MATMUL_DESC_POINTER_MODE => match value_i32()? {
            // Both read the scalars through their address.
            POINTER_HOST | POINTER_DEVICE => Ok(()),
            POINTER_DEVICE_VECTOR | POINTER_VECTOR_BETA_ZERO | POINTER_VECTOR_BETA_HOST => {
                Err(Fail::NotSupported)
            }
            _ => Err(Fail::InvalidValue),
        },
        A::CUBLASLT_MATMUL_DESC_FILL_MODE => match value_i32()? {
            FILL_FULL => Ok(()),
            FILL_LOWER | FILL_UPPER => Err(Fail::NotSupported),
            _ => Err(Fail::InvalidValue),
        },
        A::CUBLASLT_MATMUL_DESC_EPILOGUE => default_only(value_u32()? == EPILOGUE_DEFAULT),
        // Scalings of the operands or the output, and amax outputs: only the default (none).
        A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_C_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_D_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_AMAX_D_POINTER
        | A::CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR => default_only(pointer()? == 0),
        A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE
        | A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE
        | A::CUBLASLT_MATMUL_DESC_C_SCALE_MODE
        | A::CUBLASLT_MATMUL_DESC_D_SCALE_MODE
        | A::CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE => {
            default_only(value_i32()? == SCALE_SCALAR_32F)
        }
        // Inputs of epilogues only, which are refused above: no effect with the default one.
        A::CUBLASLT_MATMUL_DESC_BIAS_POINTER
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER => pointer().map(|_| ()),
        A::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE
        // Only read with the device-vector pointer modes, which are refused.
        | A::CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE => value_i64().map(|_| ()),
        A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE
        | A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
        | A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE
        // A performance hint.
        | A::CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET => value_i32().map(|_| ()),
        // fp8 only; an int8_t.
        A::CUBLASLT_MATMUL_DESC_FAST_ACCUM => {
            // SAFETY: the caller's contract.
            unsafe { attribute::<i8>(buf, size) }.map(|_| ())
        }
        // Attributes of other cuBLASLt versions.
        #[allow(unreachable_patterns)]
        _ => Err(Fail::InvalidValue),
    }
}

/// Creates a matrix layout: column-major, one matrix; its values are checked when used.
///
/// # Safety
/// `mat_layout` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatrixLayoutCreate(
    mat_layout: *mut cublaslt::cublasLtMatrixLayout_t,
    type_: cublaslt::cudaDataType,
    rows: u64,
    cols: u64,
    ld: i64,
) -> cublaslt::cublasStatus_t {
    let object = Layout {
        tag: Layout::TAG,
        data_type: type_ as u32,
        rows,
        cols,
        ld,
        row_major: false,
        batch_count: 1,
        batch_stride: 0,
    };
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { hand_out(mat_layout, object) })
}

/// Frees a matrix layout.
///
/// # Safety
/// `mat_layout` is null or a live layout, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatrixLayoutDestroy(
    mat_layout: cublaslt::cublasLtMatrixLayout_t,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { destroy::<Layout, _>(mat_layout) })
}

/// Sets a matrix layout attribute (the buffer exactly the attribute's size): type, order
/// (column- or row-major; the tiled orders are `NOT_SUPPORTED`), rows, columns, leading
/// dimension, batch count (at least 1) and stride; the plane offset only at 0 and the batch mode
/// only strided (else `NOT_SUPPORTED`).
///
/// # Safety
/// `mat_layout` is null or a live layout; `buf` is null or addresses `size_in_bytes` readable
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatrixLayoutSetAttribute(
    mat_layout: cublaslt::cublasLtMatrixLayout_t,
    attr: cublaslt::cublasLtMatrixLayoutAttribute_t,
    buf: *const c_void,
    size_in_bytes: usize,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { set_layout_attribute(mat_layout, attr, buf, size_in_bytes) })
}

/// # Safety
/// As [`cublasLtMatrixLayoutSetAttribute`].
unsafe fn set_layout_attribute(
    mat_layout: cublaslt::cublasLtMatrixLayout_t,
    attr: cublaslt::cublasLtMatrixLayoutAttribute_t,
    buf: *const c_void,
    size: usize,
) -> Result<(), Fail> {
    use cublaslt::cublasLtMatrixLayoutAttribute_t as A;
    use cublaslt::cublasLtOrder_t as O;
    const ORDER_COL: i32 = O::CUBLASLT_ORDER_COL as i32;
    const ORDER_ROW: i32 = O::CUBLASLT_ORDER_ROW as i32;
    const ORDER_COL32: i32 = O::CUBLASLT_ORDER_COL32 as i32;
    const ORDER_COL4_4R2_8C: i32 = O::CUBLASLT_ORDER_COL4_4R2_8C as i32;
    const ORDER_COL32_2R_4R4: i32 = O::CUBLASLT_ORDER_COL32_2R_4R4 as i32;
    const BATCH_STRIDED: i32 = cublaslt::cublasLtBatchMode_t::CUBLASLT_BATCH_MODE_STRIDED as i32;
    const BATCH_POINTER_ARRAY: i32 =
        cublaslt::cublasLtBatchMode_t::CUBLASLT_BATCH_MODE_POINTER_ARRAY as i32;

    // SAFETY: the caller's contract.
    let layout = unsafe { object::<Layout, _>(mat_layout) }?;
    // SAFETY: `buf` is null or addresses `size` readable bytes (this function's contract), which
    // is all `attribute` requires; the same holds for the three readers below.
    let value_i32 = || unsafe { attribute::<i32>(buf, size) };
    // SAFETY: as `value_i32`.
    let value_u32 = || unsafe { attribute::<u32>(buf, size) };
    // SAFETY: as `value_i32`.
    let value_u64 = || unsafe { attribute::<u64>(buf, size) };
    // SAFETY: as `value_i32`.
    let value_i64 = || unsafe { attribute::<i64>(buf, size) };
    match attr {
        A::CUBLASLT_MATRIX_LAYOUT_TYPE => {
            let data_type = value_u32()?;
            // SAFETY: `layout` is the live layout `object` checked the tag of (the caller's
            // contract), and nothing else refers to it during this call.
            unsafe { (*layout).data_type = data_type };
        }
        A::CUBLASLT_MATRIX_LAYOUT_ORDER => {
            let row_major = match value_i32()? {
                ORDER_COL => false,
                ORDER_ROW => true,
                ORDER_COL32 | ORDER_COL4_4R2_8C | ORDER_COL32_2R_4R4 => {
                    return Err(Fail::NotSupported);
                }
                _ => return Err(Fail::InvalidValue),
            };
            // SAFETY: as for the data type.
            unsafe { (*layout).row_major = row_major };
        }
        A::CUBLASLT_MATRIX_LAYOUT_ROWS => {
            let rows = value_u64()?;
            // SAFETY: as for the data type.
            unsafe { (*layout).rows = rows };
        }
        A::CUBLASLT_MATRIX_LAYOUT_COLS => {
            let cols = value_u64()?;
            // SAFETY: as for the data type.
            unsafe { (*layout).cols = cols };
        }
        A::CUBLASLT_MATRIX_LAYOUT_LD => {
            let ld = value_i64()?;
            // SAFETY: as for the data type.
            unsafe { (*layout).ld = ld };
        }
        A::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT => {
            let batch_count = value_i32()?;
            if batch_count < 1 {
                return Err(Fail::InvalidValue);
            }
            // SAFETY: as for the data type.
            unsafe { (*layout).batch_count = batch_count };
        }
        A::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET => {
            let stride = value_i64()?;
            // SAFETY: as for the data type.
            unsafe { (*layout).batch_stride = stride };
        }
        // Planar complex only.
        A::CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET => {
            if value_i64()? != 0 {
                return Err(Fail::NotSupported);
            }
        }
        A::CUBLASLT_MATRIX_LAYOUT_BATCH_MODE => match value_i32()? {
            BATCH_STRIDED => {}
            BATCH_POINTER_ARRAY => return Err(Fail::NotSupported),
            _ => return Err(Fail::InvalidValue),
        },
        // Attributes of other cuBLASLt versions.
        #[allow(unreachable_patterns)]
        _ => return Err(Fail::InvalidValue),
    }
    Ok(())
}

/// Creates a heuristic preference.
///
/// # Safety
/// `pref` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulPreferenceCreate(
    pref: *mut cublaslt::cublasLtMatmulPreference_t,
) -> cublaslt::cublasStatus_t {
    let object = Preference {
        tag: Preference::TAG,
        min_alignment: [DEFAULT_ALIGNMENT; 4],
    };
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { hand_out(pref, object) })
}

/// Frees a heuristic preference.
///
/// # Safety
/// `pref` is null or a live preference, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulPreferenceDestroy(
    pref: cublaslt::cublasLtMatmulPreference_t,
) -> cublaslt::cublasStatus_t {
    // SAFETY: the caller's contract.
    cublaslt_status(unsafe { destroy::<Preference, _>(pref) })
}

/// Sets a preference attribute (the buffer exactly the attribute's size). Every value is
/// accepted: the one algorithm needs no workspace and meets any search mode, reduction scheme,
/// wave count or implementation mask; the minimum alignments are kept for it.
///
/// # Safety
/// `pref` is null or a live preference; `buf` is null or addresses `size_in_bytes` readable
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtMatmulPreferenceSetAttribute(
    pref: cublaslt::cublasLtMatmulPreference_t,
    attr: cublaslt::cublasLtMatmulPreferenceAttributes_t,
    buf: *const c_void,
    size_in_bytes: usize,
) -> cublaslt::cublasStatus_t {
    use cublaslt::cublasLtMatmulPreferenceAttributes_t as A;
    let set = || -> Result<(), Fail> {
        // SAFETY: the caller's contract.
        let pref = unsafe { object::<Preference, _>(pref) }?;
        let alignment = match attr {
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES => Some(0),
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES => Some(1),
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES => Some(2),
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES => Some(3),
            _ => None,
        };
        if let Some(slot) = alignment {
            // SAFETY: `buf` is null or addresses `size_in_bytes` readable bytes (the caller's
            // contract), which is all `attribute` requires.
            let value = unsafe { attribute::<u32>(buf, size_in_bytes) }?;
            // SAFETY: `pref` is a live preference of this module (checked by `object`).
            unsafe { (*pref).min_alignment[slot] = value };
            return Ok(());
        }
        match attr {
            A::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES | A::CUBLASLT_MATMUL_PREF_IMPL_MASK => {
                // SAFETY: `buf` is null or addresses `size_in_bytes` readable bytes (the caller's
                // contract), which is all `attribute` requires; the same below.
                unsafe { attribute::<u64>(buf, size_in_bytes) }.map(|_| ())
            }
            A::CUBLASLT_MATMUL_PREF_SEARCH_MODE | A::CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK => {
                // SAFETY: as for the workspace size.
                unsafe { attribute::<u32>(buf, size_in_bytes) }.map(|_| ())
            }
            A::CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT => {
                // SAFETY: as for the workspace size.
                unsafe { attribute::<f32>(buf, size_in_bytes) }.map(|_| ())
            }
            // Attributes of other cuBLASLt versions.
            #[allow(unreachable_patterns)]
            _ => Err(Fail::InvalidValue),
        }
    };
    cublaslt_status(set())
}

/// A cuBLASLt product checked against its descriptor and layouts, not yet bound to memory.
struct LtPlan {
    compute: Compute,
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    batch_count: usize,
    a: Matrix,
    b: Matrix,
    c: Matrix,
    d: Matrix,
}

/// Checks a matmul descriptor and its four layouts: known compute, scale and data types in a
/// supported combination (else `NOT_SUPPORTED`); `op(A)` m x k, `op(B)` k x n, C and D m x n,
/// one batch count, leading dimensions and extents in range (else `INVALID_VALUE`).
///
/// # Safety
/// Each handle is null or a live handle of this module.
unsafe fn lt_plan(
    desc: cublaslt::cublasLtMatmulDesc_t,
    a_desc: cublaslt::cublasLtMatrixLayout_t,
    b_desc: cublaslt::cublasLtMatrixLayout_t,
    c_desc: cublaslt::cublasLtMatrixLayout_t,
    d_desc: cublaslt::cublasLtMatrixLayout_t,
) -> Result<LtPlan, Fail> {
    // SAFETY: the caller's contract; the objects are only read while this runs.
    let desc = unsafe { &*object::<MatmulDesc, _>(desc)? };
    let layout = |handle| -> Result<&Layout, Fail> {
        // SAFETY: as above.
        Ok(unsafe { &*object::<Layout, _>(handle)? })
    };
    let layouts = [
        layout(a_desc)?,
        layout(b_desc)?,
        layout(c_desc)?,
        layout(d_desc)?,
    ];
    let compute = Compute::from_raw(desc.compute)?;
    if Elem::from_raw(desc.scale)? != compute.scale() {
        return Err(Fail::NotSupported);
    }
    let [a, b, c, d] = [
        layouts[0].matrix()?,
        layouts[1].matrix()?,
        layouts[2].matrix()?,
        layouts[3].matrix()?,
    ];
    let batch = layouts[3].batch_count;
    if layouts.iter().any(|l| l.batch_count != batch) {
        return Err(Fail::InvalidValue);
    }
    let batch_count = usize::try_from(batch).map_err(|_| Fail::InvalidValue)?;
    let (trans_a, trans_b) = (desc.trans_a, desc.trans_b);
    let (m, k) = if trans_a {
        (a.cols, a.rows)
    } else {
        (a.rows, a.cols)
    };
    let (k_b, n) = if trans_b {
        (b.cols, b.rows)
    } else {
        (b.rows, b.cols)
    };
    if k_b != k || (c.rows, c.cols) != (m, n) || (d.rows, d.cols) != (m, n) {
        return Err(Fail::InvalidValue);
    }
    compute.check_types(a.elem, b.elem, c.elem)?;
    if d.elem != c.elem {
        return Err(Fail::NotSupported);
    }
    for matrix in [&a, &b, &c, &d] {
        matrix.check_extent(batch_count)?;
    }
    Ok(LtPlan {
        compute,
        trans_a,
        trans_b,
        m,
        n,
        k,
        batch_count,
        a,
        b,
        c,
        d,
    })
}

/// The one algorithm: for any problem `lt_plan` accepts, it returns exactly one result
/// (`returnAlgoCount` = 1, state success, no workspace) that needs the preference's minimum
/// alignments (see [`ALGO_ID`]); otherwise the plan's status and no result. The preference is
/// checked to be live.
///
/// # Safety
/// Each handle is null or a live handle of this module; `heuristic_results_array` is null or has
/// room for `requested_algo_count` results; `return_algo_count` is null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLASLt's signature.
pub unsafe extern "C" fn cublasLtMatmulAlgoGetHeuristic(
    light_handle: cublaslt::cublasLtHandle_t,
    operation_desc: cublaslt::cublasLtMatmulDesc_t,
    a_desc: cublaslt::cublasLtMatrixLayout_t,
    b_desc: cublaslt::cublasLtMatrixLayout_t,
    c_desc: cublaslt::cublasLtMatrixLayout_t,
    d_desc: cublaslt::cublasLtMatrixLayout_t,
    preference: cublaslt::cublasLtMatmulPreference_t,
    requested_algo_count: c_int,
    heuristic_results_array: *mut cublaslt::cublasLtMatmulHeuristicResult_t,
    return_algo_count: *mut c_int,
) -> cublaslt::cublasStatus_t {
    let search = || -> Result<(), Fail> {
        if return_algo_count.is_null() {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: `return_algo_count`, not null, is writable (the caller's contract).
        unsafe { return_algo_count.write(0) };
        // SAFETY: each handle is null or a live handle of this module (the caller's contract),
        // which is what `object` and `lt_plan` require; `object` checks the kind.
        unsafe { object::<LtHandle, _>(light_handle) }?;
        // SAFETY: as for the handle.
        let preference = unsafe { object::<Preference, _>(preference) }?;
        // SAFETY: a live preference of this module (checked by `object`).
        let min_alignment = unsafe { (*preference).min_alignment };
        if requested_algo_count < 1 || heuristic_results_array.is_null() {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: as for the handle.
        unsafe { lt_plan(operation_desc, a_desc, b_desc, c_desc, d_desc) }?;
        let mut algo = cublaslt::cublasLtMatmulAlgo_t { data: [0; 8] };
        algo.data[0] = ALGO_ID;
        for (word, align) in algo.data[1..5].iter_mut().zip(min_alignment) {
            *word = u64::from(align);
        }
        let result = cublaslt::cublasLtMatmulHeuristicResult_t {
            algo,
            workspaceSize: 0,
            state: cublaslt::cublasStatus_t::CUBLAS_STATUS_SUCCESS,
            wavesCount: 1.0,
            reserved: [0; 4],
        };
        // SAFETY: `heuristic_results_array`, not null, has room for `requested_algo_count` >= 1
        // results, and `return_algo_count` is writable (the caller's contract).
        unsafe {
            heuristic_results_array.write(result);
            return_algo_count.write(1);
        }
        Ok(())
    };
    cublaslt_status(search())
}

/// `D = alpha op(A) op(B) + beta C` as the descriptor and layouts say (see [`lt_plan`]); alpha
/// and beta in the descriptor's scale type, at host (or device, the same) addresses. `algo` is
/// null or the heuristic's, and then each operand must be as aligned as its preference allowed
/// (`CUBLAS_STATUS_NOT_SUPPORTED` otherwise); the workspace is unused; the stream is ignored
/// (synchronous). C is not read when beta is 0 (it may then be null); when C and D are one
/// buffer, their layouts must be identical.
///
/// # Safety
/// Each handle is null or a live handle of this module; the pointers address buffers covering
/// their layouts, D writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // cuBLASLt's signature.
pub unsafe extern "C" fn cublasLtMatmul(
    light_handle: cublaslt::cublasLtHandle_t,
    compute_desc: cublaslt::cublasLtMatmulDesc_t,
    alpha: *const c_void,
    A: *const c_void,
    Adesc: cublaslt::cublasLtMatrixLayout_t,
    B: *const c_void,
    Bdesc: cublaslt::cublasLtMatrixLayout_t,
    beta: *const c_void,
    C: *const c_void,
    Cdesc: cublaslt::cublasLtMatrixLayout_t,
    D: *mut c_void,
    Ddesc: cublaslt::cublasLtMatrixLayout_t,
    algo: *const cublaslt::cublasLtMatmulAlgo_t,
    _workspace: *mut c_void,
    _workspace_size_in_bytes: usize,
    _stream: cublaslt::cudaStream_t,
) -> cublaslt::cublasStatus_t {
    let matmul = || -> Result<(), Fail> {
        // SAFETY: the handle is null or a live handle of this module (the caller's contract);
        // `object` checks its kind.
        unsafe { object::<LtHandle, _>(light_handle) }?;
        // SAFETY: `algo`, not null, is the heuristic's result (the caller's contract), a
        // readable `cublasLtMatmulAlgo_t`.
        if !algo.is_null() && unsafe { (*algo).data[0] } != ALGO_ID {
            return Err(Fail::InvalidValue);
        }
        // SAFETY: the descriptor and layouts are null or live handles of this module (the
        // caller's contract), which is what `lt_plan` requires.
        let plan = unsafe { lt_plan(compute_desc, Adesc, Bdesc, Cdesc, Ddesc) }?;
        let scale = plan.compute.scale();
        // SAFETY: alpha and beta address a value of the descriptor's scale type (the caller's
        // contract); `read_scalar` refuses null.
        let alpha = unsafe { read_scalar(alpha, scale) }?;
        // SAFETY: as for alpha.
        let beta = unsafe { read_scalar(beta, scale) }?;
        // In place, C and D must be the same matrix.
        if !C.is_null() && C == D.cast_const() && !plan.c.same_layout(&plan.d) {
            return Err(Fail::InvalidValue);
        }
        if !algo.is_null() {
            // SAFETY: as for the algorithm's id above.
            let needed = unsafe { (*algo).data };
            let pointers = [A, B, C, D.cast_const()];
            let misaligned = pointers
                .iter()
                .zip(&needed[1..5])
                .any(|(p, &align)| align > 1 && !(*p as u64).is_multiple_of(align));
            if misaligned {
                return Err(Fail::NotSupported);
            }
        }
        let product = Product {
            m: plan.m,
            n: plan.n,
            k: plan.k,
            batch_count: plan.batch_count,
            a: plan.a.bound(A),
            trans_a: plan.trans_a,
            b: plan.b.bound(B),
            trans_b: plan.trans_b,
            c: (beta != 0.0).then(|| plan.c.bound(C)),
            d: plan.d.bound(D),
            alpha,
            beta,
            rounding: match plan.compute {
                Compute::F32Fast(rounding) => rounding,
                _ => InputRounding::Exact,
            },
            accumulate: plan.compute.accumulate(),
        };
        // A dry run (the bench's launch shapes of a row too large to emulate) checks, not computes.
        if crate::driver::dry_run() {
            return Ok(());
        }
        // SAFETY: every extent was checked; the caller's contract for the buffers.
        unsafe { product.run() }
    };
    cublaslt_status(matmul())
}

/// The description of a status, a static C string.
///
/// # Safety
/// None beyond the C signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtGetStatusString(
    status: cublaslt::cublasStatus_t,
) -> *const c_char {
    status_texts(status as u32).1.as_ptr()
}

/// The name of a status (`"CUBLAS_STATUS_..."`), a static C string.
///
/// # Safety
/// None beyond the C signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasLtGetStatusName(status: cublaslt::cublasStatus_t) -> *const c_char {
    status_texts(status as u32).0.as_ptr()
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;
    use std::ptr::{null, null_mut};

    use super::*;

    use cublas::cublasStatus_t as BlasStatus;
    use cublaslt::cublasLtMatmulDescAttributes_t as DescAttr;
    use cublaslt::cublasLtMatmulPreferenceAttributes_t as PrefAttr;
    use cublaslt::cublasLtMatrixLayoutAttribute_t as LayoutAttr;
    use cublaslt::cublasStatus_t as LtStatus;

    /// f32's unit roundoff, 2^-24.
    const EPS32: f64 = 1.0 / 16_777_216.0;
    const TRANSPOSES: [(bool, bool); 4] =
        [(false, false), (true, false), (false, true), (true, true)];

    /// The precisions tileops's gemm runs: f32 strict and as TF32, f16, bf16.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Variant {
        F32,
        Tf32,
        F16,
        Bf16,
    }

    const VARIANTS: [Variant; 4] = [Variant::F32, Variant::Tf32, Variant::F16, Variant::Bf16];

    impl Variant {
        fn elem(self) -> Elem {
            match self {
                Variant::F32 | Variant::Tf32 => Elem::F32,
                Variant::F16 => Elem::F16,
                Variant::Bf16 => Elem::BF16,
            }
        }

        fn data_type(self) -> cublaslt::cudaDataType {
            data_type(self.elem())
        }

        /// The compute type gemm.rs gives cuBLASLt (strict f32 through cuBLASLt in direct tests).
        fn compute(self) -> cublaslt::cublasComputeType_t {
            match self {
                Variant::Tf32 => cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                _ => cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            }
        }

        /// Relative rounding error of the output type.
        fn output_eps(self) -> f64 {
            match self.elem() {
                Elem::F32 => EPS32,
                Elem::F16 => 2f64.powi(-11),
                Elem::BF16 => 2f64.powi(-8),
            }
        }

        /// Absolute error floor of the output type (f16 subnormals: half their spacing).
        fn output_floor(self) -> f64 {
            if self.elem() == Elem::F16 {
                2f64.powi(-25)
            } else {
                0.0
            }
        }

        /// A stored input as the product multiplies it.
        fn multiplied(self, stored: f64) -> f64 {
            if self == Variant::Tf32 {
                f64::from(round_to_tf32(stored as f32))
            } else {
                stored
            }
        }
    }

    fn data_type(elem: Elem) -> cublaslt::cudaDataType {
        match elem {
            Elem::F32 => cublaslt::cudaDataType::CUDA_R_32F,
            Elem::F16 => cublaslt::cudaDataType::CUDA_R_16F,
            Elem::BF16 => cublaslt::cudaDataType::CUDA_R_16BF,
        }
    }

    fn blas_data_type(elem: Elem) -> cublas::cudaDataType {
        match elem {
            Elem::F32 => cublas::cudaDataType::CUDA_R_32F,
            Elem::F16 => cublas::cudaDataType::CUDA_R_16F,
            Elem::BF16 => cublas::cudaDataType::CUDA_R_16BF,
        }
    }

    fn blas_op(transposed: bool) -> cublas::cublasOperation_t {
        if transposed {
            cublas::cublasOperation_t::CUBLAS_OP_T
        } else {
            cublas::cublasOperation_t::CUBLAS_OP_N
        }
    }

    /// A host buffer of elements of one type: what a device buffer is under the emulator.
    struct Buffer {
        elem: Elem,
        bytes: Vec<u8>,
    }

    impl Buffer {
        fn filled(elem: Elem, len: usize, value: f64) -> Buffer {
            let mut buffer = Buffer {
                elem,
                bytes: vec![0; len * elem.bytes()],
            };
            for i in 0..len {
                buffer.set(i, value);
            }
            buffer
        }

        fn from_values(elem: Elem, values: &[f64]) -> Buffer {
            let mut buffer = Buffer::filled(elem, values.len(), 0.0);
            for (i, &v) in values.iter().enumerate() {
                buffer.set(i, v);
            }
            buffer
        }

        fn len(&self) -> usize {
            self.bytes.len() / self.elem.bytes()
        }

        fn set(&mut self, i: usize, value: f64) {
            assert!(i < self.len());
            // SAFETY: in bounds (asserted).
            unsafe {
                let ptr = self.bytes.as_mut_ptr().add(i * self.elem.bytes());
                self.elem.store(ptr, value as f32);
            }
        }

        fn get(&self, i: usize) -> f64 {
            assert!(i < self.len());
            // SAFETY: in bounds (asserted).
            f64::from(unsafe {
                self.elem
                    .load(self.bytes.as_ptr().add(i * self.elem.bytes()))
            })
        }

        fn values(&self) -> Vec<f64> {
            (0..self.len()).map(|i| self.get(i)).collect()
        }

        fn ptr(&self) -> *const c_void {
            self.bytes.as_ptr().cast()
        }

        fn ptr_mut(&mut self) -> *mut c_void {
            self.bytes.as_mut_ptr().cast()
        }
    }

    /// xorshift64*: reproducible inputs without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// Uniform in [-1, 1).
        fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }

        /// An integer in -4..=4: every product and sum below is exact in every type's f32
        /// accumulator.
        fn small_int(&mut self) -> f64 {
            (self.next_u64() % 9) as f64 - 4.0
        }
    }

    /// Row-major `op(a)[m, k] @ op(b)[k, n]` in f64 over the values as multiplied, and the
    /// magnitude `sum |a b|` each element accumulates.
    fn reference(
        variant: Variant,
        a: &[f64],
        b: &[f64],
        (m, n, k): (usize, usize, usize),
        (trans_a, trans_b): (bool, bool),
    ) -> (Vec<f64>, Vec<f64>) {
        let mut want = vec![0.0; m * n];
        let mut magnitude = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let av = variant.multiplied(if trans_a { a[p * m + i] } else { a[i * k + p] });
                    let bv = variant.multiplied(if trans_b { b[j * k + p] } else { b[p * n + j] });
                    want[i * n + j] += av * bv;
                    magnitude[i * n + j] += (av * bv).abs();
                }
            }
        }
        (want, magnitude)
    }

    /// Checks `got` against `want` within the output's rounding plus f32 accumulation over `k`
    /// (doubled) relative to the magnitude accumulated.
    fn assert_close(variant: Variant, got: f64, want: f64, magnitude: f64, k: usize, what: &str) {
        let tolerance = variant.output_eps() * want.abs()
            + 2.0 * (k as f64 + 2.0) * EPS32 * magnitude
            + variant.output_floor();
        assert!(
            (got - want).abs() <= tolerance,
            "{what}: got {got}, want {want} (tolerance {tolerance})"
        );
    }

    fn ptr_of<T>(value: &T) -> *const c_void {
        (value as *const T).cast()
    }

    /// Row-major `c[M, N] = op(a) @ op(b)` through the exported functions exactly as tileops's
    /// gemm.rs makes them (its `ColMajor`): cuBLAS's first operand is b (transposed iff
    /// `trans_b`), its second a (iff `trans_a`), m = N, n = M, each leading dimension the stored
    /// row length; strict f32 through `cublasSgemm_v2`, the rest through cuBLASLt with C = D,
    /// alpha = 1, beta = 0. Returns the raw status of the product.
    fn tileops_gemm(
        variant: Variant,
        a: &Buffer,
        b: &Buffer,
        c: &mut Buffer,
        (m, n, k): (usize, usize, usize),
        (trans_a, trans_b): (bool, bool),
    ) -> u32 {
        let op = |t: bool| if t { OP_T } else { OP_N };
        let (op_first, op_second) = (op(trans_b), op(trans_a));
        let (cm, cn, ck) = (n as u64, m as u64, k as u64);
        let ld_first = if trans_b { k } else { n } as i64;
        let ld_second = if trans_a { m } else { k } as i64;
        let ld_c = n as i64;
        let first_dims = if op_first == OP_T { (ck, cm) } else { (cm, ck) };
        let second_dims = if op_second == OP_T {
            (cn, ck)
        } else {
            (ck, cn)
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ok_blas = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
        // SAFETY: every pointer is a live local or a buffer of the described shape.
        unsafe {
            if variant == Variant::F32 {
                let mut handle = null_mut();
                assert_eq!(cublasCreate_v2(&mut handle), ok_blas);
                assert_eq!(cublasSetStream_v2(handle, null_mut()), ok_blas);
                let status = cublasSgemm_v2(
                    handle,
                    blas_op(op_first == OP_T),
                    blas_op(op_second == OP_T),
                    cm as i32,
                    cn as i32,
                    ck as i32,
                    &alpha,
                    b.ptr().cast(),
                    ld_first as i32,
                    a.ptr().cast(),
                    ld_second as i32,
                    &beta,
                    c.ptr_mut().cast(),
                    ld_c as i32,
                );
                assert_eq!(cublasDestroy_v2(handle), ok_blas);
                return status as u32;
            }
            let mut handle = null_mut();
            assert_eq!(cublasLtCreate(&mut handle), ok);
            let mut desc = null_mut();
            assert_eq!(
                cublasLtMatmulDescCreate(
                    &mut desc,
                    variant.compute(),
                    cublaslt::cudaDataType::CUDA_R_32F
                ),
                ok
            );
            for (attr, value) in [
                (DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, op_first),
                (DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, op_second),
            ] {
                let status =
                    cublasLtMatmulDescSetAttribute(desc, attr, ptr_of(&value), size_of::<i32>());
                assert_eq!(status, ok);
            }
            let mut layouts = [null_mut(); 3];
            for (slot, (rows, cols, ld)) in [
                (first_dims.0, first_dims.1, ld_first),
                (second_dims.0, second_dims.1, ld_second),
                (cm, cn, ld_c),
            ]
            .into_iter()
            .enumerate()
            {
                let status = cublasLtMatrixLayoutCreate(
                    &mut layouts[slot],
                    variant.data_type(),
                    rows,
                    cols,
                    ld,
                );
                assert_eq!(status, ok);
            }
            let mut pref = null_mut();
            assert_eq!(cublasLtMatmulPreferenceCreate(&mut pref), ok);
            let workspace_bytes: u64 = 32 << 20;
            let status = cublasLtMatmulPreferenceSetAttribute(
                pref,
                PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                ptr_of(&workspace_bytes),
                size_of::<u64>(),
            );
            assert_eq!(status, ok);
            // As tileops does for operands of any alignment (the buffers are host vectors).
            let any: u32 = 1;
            for attr in [
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                let status = cublasLtMatmulPreferenceSetAttribute(
                    pref,
                    attr,
                    ptr_of(&any),
                    size_of::<u32>(),
                );
                assert_eq!(status, ok);
            }
            let [first, second, c_layout] = layouts;
            let mut result = MaybeUninit::uninit();
            let mut count = -1;
            let mut status = cublasLtMatmulAlgoGetHeuristic(
                handle,
                desc,
                first,
                second,
                c_layout,
                c_layout,
                pref,
                1,
                result.as_mut_ptr(),
                &mut count,
            );
            if status == ok {
                assert_eq!(count, 1);
                let result: cublaslt::cublasLtMatmulHeuristicResult_t = result.assume_init();
                assert_eq!(result.state, ok);
                assert_eq!(result.workspaceSize, 0);
                let mut workspace = vec![0u8; 4096];
                status = cublasLtMatmul(
                    handle,
                    desc,
                    ptr_of(&alpha),
                    b.ptr(),
                    first,
                    a.ptr(),
                    second,
                    ptr_of(&beta),
                    c.ptr(),
                    c_layout,
                    c.ptr_mut(),
                    c_layout,
                    &result.algo,
                    workspace.as_mut_ptr().cast(),
                    workspace.len(),
                    null_mut(),
                );
            } else {
                assert_eq!(count, 0);
            }
            assert_eq!(cublasLtMatmulPreferenceDestroy(pref), ok);
            for layout in layouts {
                assert_eq!(cublasLtMatrixLayoutDestroy(layout), ok);
            }
            assert_eq!(cublasLtMatmulDescDestroy(desc), ok);
            assert_eq!(cublasLtDestroy(handle), ok);
            status as u32
        }
    }

    /// cuBLASLt objects for direct calls, freed on drop.
    struct LtSetup {
        handle: cublaslt::cublasLtHandle_t,
        desc: cublaslt::cublasLtMatmulDesc_t,
        pref: cublaslt::cublasLtMatmulPreference_t,
        /// Every layout made, for `Drop`.
        layouts: std::cell::RefCell<Vec<cublaslt::cublasLtMatrixLayout_t>>,
    }

    impl LtSetup {
        fn new(compute: cublaslt::cublasComputeType_t, scale: cublaslt::cudaDataType) -> LtSetup {
            let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
            let mut setup = LtSetup {
                handle: null_mut(),
                desc: null_mut(),
                pref: null_mut(),
                layouts: Default::default(),
            };
            // SAFETY: writable locals.
            unsafe {
                assert_eq!(cublasLtCreate(&mut setup.handle), ok);
                assert_eq!(
                    cublasLtMatmulDescCreate(&mut setup.desc, compute, scale),
                    ok
                );
                assert_eq!(cublasLtMatmulPreferenceCreate(&mut setup.pref), ok);
            }
            setup.host_buffer_alignment();
            setup
        }

        /// Asks for algorithms that work on any alignment: the tests' buffers are host vectors,
        /// with no 256-byte alignment.
        fn host_buffer_alignment(&self) {
            for attr in [
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                assert_eq!(self.set_pref(attr, 1u32), LtStatus::CUBLAS_STATUS_SUCCESS);
            }
        }

        fn set_pref<T>(&self, attr: PrefAttr, value: T) -> LtStatus {
            // SAFETY: a live preference; `value` is `size_of::<T>()` bytes.
            unsafe {
                cublasLtMatmulPreferenceSetAttribute(
                    self.pref,
                    attr,
                    ptr_of(&value),
                    size_of::<T>(),
                )
            }
        }

        fn set_desc<T>(&self, attr: DescAttr, value: T) -> LtStatus {
            // SAFETY: a live descriptor; `value` is `size_of::<T>()` bytes.
            unsafe {
                cublasLtMatmulDescSetAttribute(self.desc, attr, ptr_of(&value), size_of::<T>())
            }
        }

        fn transposes(&self, trans_a: bool, trans_b: bool) {
            let op = |t: bool| if t { OP_T } else { OP_N };
            let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
            assert_eq!(
                self.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, op(trans_a)),
                ok
            );
            assert_eq!(
                self.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, op(trans_b)),
                ok
            );
        }

        fn layout(
            &self,
            data_type: cublaslt::cudaDataType,
            rows: usize,
            cols: usize,
            ld: usize,
        ) -> cublaslt::cublasLtMatrixLayout_t {
            let mut layout = null_mut();
            // SAFETY: a writable local.
            let status = unsafe {
                cublasLtMatrixLayoutCreate(
                    &mut layout,
                    data_type,
                    rows as u64,
                    cols as u64,
                    ld as i64,
                )
            };
            assert_eq!(status, LtStatus::CUBLAS_STATUS_SUCCESS);
            self.layouts.borrow_mut().push(layout);
            layout
        }

        fn set_layout<T>(
            &self,
            layout: cublaslt::cublasLtMatrixLayout_t,
            attr: LayoutAttr,
            value: T,
        ) -> LtStatus {
            // SAFETY: a live layout; `value` is `size_of::<T>()` bytes.
            unsafe {
                cublasLtMatrixLayoutSetAttribute(layout, attr, ptr_of(&value), size_of::<T>())
            }
        }

        /// The heuristic's one algorithm, or its status.
        fn heuristic(
            &self,
            [a, b, c, d]: [cublaslt::cublasLtMatrixLayout_t; 4],
        ) -> Result<cublaslt::cublasLtMatmulAlgo_t, LtStatus> {
            let mut result = MaybeUninit::uninit();
            let mut count = -1;
            // SAFETY: live objects, writable locals.
            let status = unsafe {
                cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    self.desc,
                    a,
                    b,
                    c,
                    d,
                    self.pref,
                    1,
                    result.as_mut_ptr(),
                    &mut count,
                )
            };
            if status != LtStatus::CUBLAS_STATUS_SUCCESS {
                assert_eq!(count, 0);
                return Err(status);
            }
            assert_eq!(count, 1);
            // SAFETY: written on success.
            let result: cublaslt::cublasLtMatmulHeuristicResult_t = unsafe { result.assume_init() };
            assert_eq!(result.state, LtStatus::CUBLAS_STATUS_SUCCESS);
            assert_eq!(result.workspaceSize, 0);
            Ok(result.algo)
        }

        /// The heuristic, then `cublasLtMatmul` with its algorithm.
        #[allow(clippy::too_many_arguments)]
        fn matmul(
            &self,
            layouts: [cublaslt::cublasLtMatrixLayout_t; 4],
            alpha: *const c_void,
            beta: *const c_void,
            a: *const c_void,
            b: *const c_void,
            c: *const c_void,
            d: *mut c_void,
        ) -> LtStatus {
            let algo = match self.heuristic(layouts) {
                Ok(algo) => algo,
                Err(status) => return status,
            };
            self.matmul_with(&algo, layouts, alpha, beta, a, b, c, d)
        }

        #[allow(clippy::too_many_arguments)]
        fn matmul_with(
            &self,
            algo: *const cublaslt::cublasLtMatmulAlgo_t,
            [a_layout, b_layout, c_layout, d_layout]: [cublaslt::cublasLtMatrixLayout_t; 4],
            alpha: *const c_void,
            beta: *const c_void,
            a: *const c_void,
            b: *const c_void,
            c: *const c_void,
            d: *mut c_void,
        ) -> LtStatus {
            let mut workspace = [0u8; 256];
            // SAFETY: live objects; the tests pass buffers of the described layouts.
            unsafe {
                cublasLtMatmul(
                    self.handle,
                    self.desc,
                    alpha,
                    a,
                    a_layout,
                    b,
                    b_layout,
                    beta,
                    c,
                    c_layout,
                    d,
                    d_layout,
                    algo,
                    workspace.as_mut_ptr().cast(),
                    workspace.len(),
                    null_mut(),
                )
            }
        }
    }

    impl Drop for LtSetup {
        fn drop(&mut self) {
            // SAFETY: created in `new`/`layout`, freed once.
            unsafe {
                for &layout in self.layouts.borrow().iter() {
                    cublasLtMatrixLayoutDestroy(layout);
                }
                cublasLtMatmulPreferenceDestroy(self.pref);
                cublasLtMatmulDescDestroy(self.desc);
                cublasLtDestroy(self.handle);
            }
        }
    }

    /// A column-major `rows x cols` matrix with leading dimension `ld`: values from `fill`, the
    /// padding set to `pad`.
    fn padded(
        elem: Elem,
        (rows, cols, ld): (usize, usize, usize),
        pad: f64,
        mut fill: impl FnMut() -> f64,
    ) -> Buffer {
        let mut buffer = Buffer::filled(elem, ld * cols, pad);
        for col in 0..cols {
            for row in 0..rows {
                buffer.set(col * ld + row, fill());
            }
        }
        buffer
    }

    #[test]
    fn tileops_gemm_is_exact_on_small_integers_in_every_dtype_and_layout() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for variant in VARIANTS {
            for mnk in [(1, 1, 1), (3, 5, 7), (19, 23, 29), (4, 64, 33), (9, 11, 1)] {
                let (m, n, k) = mnk;
                for trans in TRANSPOSES {
                    let a_values: Vec<f64> = (0..m * k).map(|_| rng.small_int()).collect();
                    let b_values: Vec<f64> = (0..k * n).map(|_| rng.small_int()).collect();
                    let a = Buffer::from_values(variant.elem(), &a_values);
                    let b = Buffer::from_values(variant.elem(), &b_values);
                    // Poisoned: beta = 0 must not read it, and every element must be written.
                    let mut c = Buffer::filled(variant.elem(), m * n, f64::NAN);
                    let status = tileops_gemm(variant, &a, &b, &mut c, mnk, trans);
                    let what = format!("{variant:?} {mnk:?} {trans:?}");
                    assert_eq!(status, 0, "{what}");
                    let (want, _) = reference(variant, &a_values, &b_values, mnk, trans);
                    // The sums are exact in f32; rounded once to the output type.
                    let want = Buffer::from_values(variant.elem(), &want);
                    assert_eq!(c.values(), want.values(), "{what}");
                }
            }
        }
    }

    #[test]
    fn tileops_gemm_matches_the_f64_reference_on_random_inputs() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        for variant in VARIANTS {
            for mnk in [
                (5, 9, 13),
                (33, 17, 65),
                (5, 3, 300),
                (1, 7, 33),
                (16, 1, 40),
            ] {
                let (m, n, k) = mnk;
                for trans in TRANSPOSES {
                    let a_values: Vec<f64> = (0..m * k).map(|_| rng.uniform()).collect();
                    let b_values: Vec<f64> = (0..k * n).map(|_| rng.uniform()).collect();
                    let a = Buffer::from_values(variant.elem(), &a_values);
                    let b = Buffer::from_values(variant.elem(), &b_values);
                    let mut c = Buffer::filled(variant.elem(), m * n, f64::NAN);
                    let what = format!("{variant:?} {mnk:?} {trans:?}");
                    assert_eq!(
                        tileops_gemm(variant, &a, &b, &mut c, mnk, trans),
                        0,
                        "{what}"
                    );
                    // Against the values as stored (rounded to the input type).
                    let (want, magnitude) =
                        reference(variant, &a.values(), &b.values(), mnk, trans);
                    for (i, got) in c.values().into_iter().enumerate() {
                        assert_close(
                            variant,
                            got,
                            want[i],
                            magnitude[i],
                            k,
                            &format!("{what} [{i}]"),
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn large_products_shared_over_threads_are_the_in_order_fma_sums() {
        let mnk @ (m, n, k) = (64, 96, 512);
        assert!(
            m * n * k >= PARALLEL_WORK,
            "the product must take the threaded path"
        );
        let mut rng = Rng(77);
        let a_values: Vec<f64> = (0..m * k).map(|_| rng.uniform()).collect();
        let b_values: Vec<f64> = (0..k * n).map(|_| rng.uniform()).collect();
        let a = Buffer::from_values(Elem::F32, &a_values);
        let b = Buffer::from_values(Elem::F32, &b_values);
        let mut c = Buffer::filled(Elem::F32, m * n, f64::NAN);
        assert_eq!(
            tileops_gemm(Variant::F32, &a, &b, &mut c, mnk, (false, false)),
            0
        );
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f32;
                for p in 0..k {
                    acc = (a.get(i * k + p) as f32).mul_add(b.get(p * n + j) as f32, acc);
                }
                assert_eq!(
                    (c.get(i * n + j) as f32).to_bits(),
                    acc.to_bits(),
                    "[{i}, {j}]"
                );
            }
        }
    }

    #[test]
    fn the_fma_kernel_equals_the_portable_one_bit_for_bit() {
        if !cpu_has_fma() {
            return;
        }
        let mut rng = Rng(5);
        let (m, k) = (37, 50);
        let op_a: Vec<f32> = (0..m * k).map(|_| rng.uniform() as f32).collect();
        let b_col: Vec<f32> = (0..k).map(|_| rng.uniform() as f32).collect();
        let (mut portable, mut fma) = (vec![0.0; m], vec![0.0; m]);
        Kernel::F32.run(&op_a, &b_col, &mut portable);
        Kernel::F32Fma.run(&op_a, &b_col, &mut fma);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&portable), bits(&fma));
    }

    #[test]
    fn cublaslt_honours_padded_lds_distinct_c_and_d_alpha_and_beta() {
        const SENTINEL: f64 = 7.0;
        let (m, n, k) = (5, 4, 3);
        let (alpha, beta) = (0.5f32, -2.0f32);
        let mut rng = Rng(42);
        for variant in VARIANTS {
            for (ta, tb) in TRANSPOSES {
                let elem = variant.elem();
                let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
                let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
                let (lda, ldb, ldc, ldd) = (a_rows + 3, b_rows + 2, m + 1, m + 4);
                // Padding: NaN where it must not be read, a sentinel where it must not be written.
                let a = padded(elem, (a_rows, a_cols, lda), f64::NAN, || rng.uniform());
                let b = padded(elem, (b_rows, b_cols, ldb), f64::NAN, || rng.uniform());
                let c = padded(elem, (m, n, ldc), f64::NAN, || rng.uniform());
                let mut d = Buffer::filled(elem, ldd * n, SENTINEL);
                let lt = LtSetup::new(variant.compute(), cublaslt::cudaDataType::CUDA_R_32F);
                lt.transposes(ta, tb);
                let dt = variant.data_type();
                let layouts = [
                    lt.layout(dt, a_rows, a_cols, lda),
                    lt.layout(dt, b_rows, b_cols, ldb),
                    lt.layout(dt, m, n, ldc),
                    lt.layout(dt, m, n, ldd),
                ];
                let status = lt.matmul(
                    layouts,
                    ptr_of(&alpha),
                    ptr_of(&beta),
                    a.ptr(),
                    b.ptr(),
                    c.ptr(),
                    d.ptr_mut(),
                );
                let what = format!("{variant:?} trans=({ta}, {tb})");
                assert_eq!(status, LtStatus::CUBLAS_STATUS_SUCCESS, "{what}");
                for j in 0..n {
                    for i in 0..ldd {
                        let got = d.get(j * ldd + i);
                        if i >= m {
                            assert_eq!(got, SENTINEL, "{what}: padding of D written");
                            continue;
                        }
                        let (mut sum, mut magnitude) = (0.0, 0.0);
                        for p in 0..k {
                            let av = if ta {
                                a.get(i * lda + p)
                            } else {
                                a.get(p * lda + i)
                            };
                            let bv = if tb {
                                b.get(p * ldb + j)
                            } else {
                                b.get(j * ldb + p)
                            };
                            let product = variant.multiplied(av) * variant.multiplied(bv);
                            sum += product;
                            magnitude += product.abs();
                        }
                        let cv = c.get(j * ldc + i);
                        let want = f64::from(alpha) * sum + f64::from(beta) * cv;
                        let magnitude =
                            f64::from(alpha).abs() * magnitude + (f64::from(beta) * cv).abs();
                        assert_close(
                            variant,
                            got,
                            want,
                            magnitude,
                            k,
                            &format!("{what} ({i}, {j})"),
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn sgemm_honours_padded_lds_alpha_and_beta_in_place() {
        const SENTINEL: f64 = 7.0;
        let (m, n, k) = (6, 5, 4);
        let (alpha, beta) = (2.0f32, 0.25f32);
        let mut rng = Rng(4242);
        for (ta, tb) in TRANSPOSES {
            let (a_rows, a_cols) = if ta { (k, m) } else { (m, k) };
            let (b_rows, b_cols) = if tb { (n, k) } else { (k, n) };
            let (lda, ldb, ldc) = (a_rows + 2, b_rows + 1, m + 3);
            let a = padded(Elem::F32, (a_rows, a_cols, lda), f64::NAN, || rng.uniform());
            let b = padded(Elem::F32, (b_rows, b_cols, ldb), f64::NAN, || rng.uniform());
            let mut c = padded(Elem::F32, (m, n, ldc), SENTINEL, || rng.uniform());
            let c_before = c.values();
            let mut handle = null_mut();
            // SAFETY: live locals and buffers of the described shapes.
            unsafe {
                assert_eq!(
                    cublasCreate_v2(&mut handle),
                    BlasStatus::CUBLAS_STATUS_SUCCESS
                );
                let status = cublasSgemm_v2(
                    handle,
                    blas_op(ta),
                    blas_op(tb),
                    m as i32,
                    n as i32,
                    k as i32,
                    &alpha,
                    a.ptr().cast(),
                    lda as i32,
                    b.ptr().cast(),
                    ldb as i32,
                    &beta,
                    c.ptr_mut().cast(),
                    ldc as i32,
                );
                assert_eq!(status, BlasStatus::CUBLAS_STATUS_SUCCESS);
                assert_eq!(cublasDestroy_v2(handle), BlasStatus::CUBLAS_STATUS_SUCCESS);
            }
            for j in 0..n {
                for i in 0..ldc {
                    let got = c.get(j * ldc + i);
                    if i >= m {
                        assert_eq!(got, SENTINEL, "padding of C written");
                        continue;
                    }
                    let (mut sum, mut magnitude) = (0.0, 0.0);
                    for p in 0..k {
                        let av = if ta {
                            a.get(i * lda + p)
                        } else {
                            a.get(p * lda + i)
                        };
                        let bv = if tb {
                            b.get(p * ldb + j)
                        } else {
                            b.get(j * ldb + p)
                        };
                        sum += av * bv;
                        magnitude += (av * bv).abs();
                    }
                    let cv = c_before[j * ldc + i];
                    let want = f64::from(alpha) * sum + f64::from(beta) * cv;
                    let magnitude = f64::from(alpha) * magnitude + (f64::from(beta) * cv).abs();
                    assert_close(
                        Variant::F32,
                        got,
                        want,
                        magnitude,
                        k,
                        &format!("({i}, {j})"),
                    );
                }
            }
        }
    }

    #[test]
    fn beta_zero_never_reads_c_distinct_from_d() {
        let (m, n, k) = (3, 4, 5);
        let mut rng = Rng(9);
        let elem = Elem::BF16;
        let a_values: Vec<f64> = (0..m * k).map(|_| rng.small_int()).collect();
        let b_values: Vec<f64> = (0..k * n).map(|_| rng.small_int()).collect();
        let (a, b) = (
            Buffer::from_values(elem, &a_values),
            Buffer::from_values(elem, &b_values),
        );
        let (want, _) = reference(
            Variant::Bf16,
            &a_values,
            &b_values,
            (m, n, k),
            (false, false),
        );
        // Row-major product as column-major: first operand b (n x k, ld n), second a.
        let (alpha, beta) = (1.0f32, 0.0f32);
        let lt = LtSetup::new(
            cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublaslt::cudaDataType::CUDA_R_32F,
        );
        let dt = data_type(elem);
        let layouts = [
            lt.layout(dt, n, k, n),
            lt.layout(dt, k, m, k),
            lt.layout(dt, n, m, n),
            lt.layout(dt, n, m, n),
        ];
        let c = Buffer::filled(elem, m * n, f64::NAN);
        for c_ptr in [c.ptr(), null()] {
            let mut d = Buffer::filled(elem, m * n, f64::NAN);
            let status = lt.matmul(
                layouts,
                ptr_of(&alpha),
                ptr_of(&beta),
                b.ptr(),
                a.ptr(),
                c_ptr,
                d.ptr_mut(),
            );
            assert_eq!(status, LtStatus::CUBLAS_STATUS_SUCCESS);
            assert_eq!(d.values(), Buffer::from_values(elem, &want).values());
        }
    }

    #[test]
    fn tf32_rounding_is_to_nearest_even_on_the_bit_pattern() {
        let ulp = 2f32.powi(-10);
        let half = 2f32.powi(-11);
        // Below, at (both ways to even) and above the half-way point.
        assert_eq!(round_to_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(round_to_tf32(1.0 + half), 1.0);
        assert_eq!(round_to_tf32(1.0 + ulp + half), 1.0 + 2.0 * ulp);
        assert_eq!(round_to_tf32(1.0 + half + 2f32.powi(-23)), 1.0 + ulp);
        assert_eq!(round_to_tf32(-(1.0 + half + 2f32.powi(-23))), -(1.0 + ulp));
        // TF32 values are unchanged; a carry moves into the exponent.
        assert_eq!(round_to_tf32(1.0 + ulp), 1.0 + ulp);
        assert_eq!(round_to_tf32(2.0 - 2f32.powi(-23)), 2.0);
        // Subnormals round on the same bit pattern.
        assert_eq!(round_to_tf32(f32::from_bits(0x1000)).to_bits(), 0);
        assert_eq!(round_to_tf32(f32::from_bits(0x3000)).to_bits(), 0x4000);
        // Beyond the largest TF32 value: infinity; non-finite values pass, NaN payloads too.
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
        assert_eq!(round_to_tf32(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(round_to_tf32(f32::from_bits(0x7F80_0001)).is_nan());
    }

    #[test]
    fn tf32_visibly_differs_from_strict_f32() {
        // 1 + 2^-12 is exact in f32 and rounds to 1 in TF32.
        let x = 1.0 + 2f64.powi(-12);
        let mnk = (1, 1, 1);
        for (variant, want) in [(Variant::F32, x), (Variant::Tf32, 1.0)] {
            let a = Buffer::from_values(Elem::F32, &[x]);
            let b = Buffer::from_values(Elem::F32, &[1.0]);
            let mut c = Buffer::filled(Elem::F32, 1, f64::NAN);
            assert_eq!(
                tileops_gemm(variant, &a, &b, &mut c, mnk, (false, false)),
                0
            );
            assert_eq!(c.get(0), want, "{variant:?}");
        }
        // A dot product: strict keeps both small parts, TF32 drops them.
        let a = Buffer::from_values(Elem::F32, &[x, x]);
        let b = Buffer::from_values(Elem::F32, &[1.0, 1.0]);
        for (variant, want) in [(Variant::F32, 2.0 * x), (Variant::Tf32, 2.0)] {
            let mut c = Buffer::filled(Elem::F32, 1, f64::NAN);
            assert_eq!(
                tileops_gemm(variant, &a, &b, &mut c, (1, 1, 2), (false, false)),
                0
            );
            assert_eq!(c.get(0), want, "{variant:?}");
        }
    }

    /// `a * b` for one f32 element each, through `cublasSgemm_v2` under `mode`, or through
    /// `cublasGemmEx` with `compute` when given.
    fn product_under_math_mode(
        mode: cublas::cublasMath_t,
        compute: Option<cublas::cublasComputeType_t>,
        a: f32,
        b: f32,
    ) -> f32 {
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let mut c = f32::NAN;
        let op = cublas::cublasOperation_t::CUBLAS_OP_N;
        let mut handle = null_mut();
        // SAFETY: live locals of one element each.
        unsafe {
            assert_eq!(cublasCreate_v2(&mut handle), ok);
            assert_eq!(cublasSetMathMode(handle, mode), ok);
            let status = match compute {
                None => cublasSgemm_v2(
                    handle, op, op, 1, 1, 1, &alpha, &a, 1, &b, 1, &beta, &mut c, 1,
                ),
                Some(compute) => {
                    let f32_type = cublas::cudaDataType::CUDA_R_32F;
                    cublasGemmEx(
                        handle,
                        op,
                        op,
                        1,
                        1,
                        1,
                        ptr_of(&alpha),
                        ptr_of(&a),
                        f32_type,
                        1,
                        ptr_of(&b),
                        f32_type,
                        1,
                        ptr_of(&beta),
                        (&raw mut c).cast(),
                        f32_type,
                        1,
                        compute,
                        cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
            };
            assert_eq!(status, ok);
            assert_eq!(cublasDestroy_v2(handle), ok);
        }
        c
    }

    #[test]
    fn cublas_math_modes_round_f32_inputs_as_documented() {
        use cublas::cublasComputeType_t as C;
        use cublas::cublasMath_t as M;
        let x = 1.0 + 2f32.powi(-12);
        assert_eq!(
            product_under_math_mode(M::CUBLAS_DEFAULT_MATH, None, x, 1.0),
            x
        );
        assert_eq!(
            product_under_math_mode(M::CUBLAS_PEDANTIC_MATH, None, x, 1.0),
            x
        );
        assert_eq!(
            product_under_math_mode(M::CUBLAS_TF32_TENSOR_OP_MATH, None, x, 1.0),
            1.0
        );
        // GemmEx: 32F follows the math mode, 32F_PEDANTIC does not, FAST_TF32 always rounds.
        let tf32 = M::CUBLAS_TF32_TENSOR_OP_MATH;
        assert_eq!(
            product_under_math_mode(tf32, Some(C::CUBLAS_COMPUTE_32F), x, 1.0),
            1.0
        );
        assert_eq!(
            product_under_math_mode(tf32, Some(C::CUBLAS_COMPUTE_32F_PEDANTIC), x, 1.0),
            x
        );
        let default = M::CUBLAS_DEFAULT_MATH;
        assert_eq!(
            product_under_math_mode(default, Some(C::CUBLAS_COMPUTE_32F), x, 1.0),
            x
        );
        assert_eq!(
            product_under_math_mode(default, Some(C::CUBLAS_COMPUTE_32F_FAST_TF32), x, 1.0),
            1.0
        );
        // f16 and TF32 share 10 mantissa bits but not the exponent range: 1e-6 is an f16
        // subnormal (a multiple of 2^-24), a normal TF32 value.
        let tiny = 1e-6f32;
        let as_f16 = f16::from_f32(tiny).to_f32();
        let as_tf32 = round_to_tf32(tiny);
        assert_ne!(as_f16, as_tf32);
        assert_eq!(
            product_under_math_mode(M::CUBLAS_TENSOR_OP_MATH, None, tiny, 1.0),
            as_f16
        );
        assert_eq!(
            product_under_math_mode(default, Some(C::CUBLAS_COMPUTE_32F_FAST_16F), tiny, 1.0),
            as_f16
        );
        assert_eq!(
            product_under_math_mode(default, Some(C::CUBLAS_COMPUTE_32F_FAST_16BF), x, 1.0),
            1.0
        );
        assert_eq!(product_under_math_mode(tf32, None, tiny, 1.0), as_tf32);
    }

    #[test]
    fn cublaslt_batches_follow_counts_and_strides() {
        let (m, n, k, batches) = (4usize, 3usize, 5usize, 3usize);
        let mut rng = Rng(31337);
        for variant in [Variant::F32, Variant::Bf16] {
            let elem = variant.elem();
            let (lda, ldb, ldc, ldd) = (m + 1, k, m, m);
            // A with gaps between matrices, B broadcast (stride 0), C packed, D with gaps.
            let (stride_a, stride_b, stride_c, stride_d) = (lda * k + 2, 0, m * n, m * n + 3);
            let mut a = Buffer::filled(elem, stride_a * batches, f64::NAN);
            let mut b = Buffer::filled(elem, ldb * n, f64::NAN);
            let mut c = Buffer::filled(elem, stride_c * batches, f64::NAN);
            let mut d = Buffer::filled(elem, stride_d * batches, f64::NAN);
            for batch in 0..batches {
                for col in 0..k {
                    for row in 0..m {
                        a.set(batch * stride_a + col * lda + row, rng.small_int());
                    }
                }
                for i in 0..m * n {
                    c.set(batch * stride_c + i, rng.small_int());
                }
            }
            for i in 0..k * n {
                b.set(i, rng.small_int());
            }
            let (alpha, beta) = (1.0f32, 1.0f32);
            let lt = LtSetup::new(variant.compute(), cublaslt::cudaDataType::CUDA_R_32F);
            let dt = variant.data_type();
            let layouts = [
                lt.layout(dt, m, k, lda),
                lt.layout(dt, k, n, ldb),
                lt.layout(dt, m, n, ldc),
                lt.layout(dt, m, n, ldd),
            ];
            let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
            for (layout, stride) in layouts
                .into_iter()
                .zip([stride_a, stride_b, stride_c, stride_d])
            {
                assert_eq!(
                    lt.set_layout(
                        layout,
                        LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        batches as i32
                    ),
                    ok
                );
                assert_eq!(
                    lt.set_layout(
                        layout,
                        LayoutAttr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        stride as i64
                    ),
                    ok
                );
            }
            let status = lt.matmul(
                layouts,
                ptr_of(&alpha),
                ptr_of(&beta),
                a.ptr(),
                b.ptr(),
                c.ptr(),
                d.ptr_mut(),
            );
            assert_eq!(status, ok, "{variant:?}");
            for batch in 0..batches {
                for j in 0..n {
                    for i in 0..m {
                        let sum: f64 = (0..k)
                            .map(|p| a.get(batch * stride_a + p * lda + i) * b.get(j * ldb + p))
                            .sum();
                        let want = sum + c.get(batch * stride_c + j * ldc + i);
                        let want = Buffer::from_values(elem, &[want]).get(0);
                        assert_eq!(
                            d.get(batch * stride_d + j * ldd + i),
                            want,
                            "{variant:?} {batch} ({i}, {j})"
                        );
                    }
                }
                // The gap after each D matrix is untouched.
                for gap in m * n..stride_d {
                    assert!(d.get(batch * stride_d + gap).is_nan());
                }
            }
            // Batch counts must agree.
            assert_eq!(
                lt.set_layout(
                    layouts[1],
                    LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    2i32
                ),
                ok
            );
            assert_eq!(
                lt.heuristic(layouts).unwrap_err(),
                LtStatus::CUBLAS_STATUS_INVALID_VALUE
            );
        }
    }

    #[test]
    fn the_algorithm_needs_the_alignment_its_preference_allowed() {
        let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
        let refused = LtStatus::CUBLAS_STATUS_NOT_SUPPORTED;
        let f32_type = cublaslt::cudaDataType::CUDA_R_32F;
        let mut lt = LtSetup::new(cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F, f32_type);
        let layouts = [0; 4].map(|_| lt.layout(f32_type, 2, 2, 2));
        // One host buffer; the operands are 2 x 2 f32 matrices in it, at a 256-byte-aligned
        // address and 16 bytes past one.
        let mut buffer = Buffer::filled(Elem::F32, 512, 1.0);
        let base = buffer.ptr_mut().cast::<u8>();
        let aligned = base.wrapping_add(base.align_offset(256));
        let (ptr_a, ptr_b) = (aligned, aligned.wrapping_add(256));
        let ptr_d = aligned.wrapping_add(512);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let run = |lt: &LtSetup, a: *mut u8| {
            let algo = lt.heuristic(layouts).expect("an algorithm");
            lt.matmul_with(
                &algo,
                layouts,
                ptr_of(&alpha),
                ptr_of(&beta),
                a.cast_const().cast(),
                ptr_b.cast_const().cast(),
                null_mut(),
                ptr_d.cast(),
            )
        };
        // A fresh preference asks for cuBLASLt's default, 256 bytes, of every operand.
        // SAFETY: the setup's own preference, replaced by a fresh one (freed on drop).
        unsafe {
            assert_eq!(cublasLtMatmulPreferenceDestroy(lt.pref), ok);
            assert_eq!(cublasLtMatmulPreferenceCreate(&mut lt.pref), ok);
        }
        assert_eq!(run(&lt, ptr_a), ok);
        assert_eq!(
            run(&lt, ptr_a.wrapping_add(16)),
            refused,
            "A 16 bytes past 256"
        );
        // Told that A is only 16-byte aligned, the heuristic gives an algorithm that takes it.
        let a16 = PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
        assert_eq!(lt.set_pref(a16, 16u32), ok);
        assert_eq!(run(&lt, ptr_a.wrapping_add(16)), ok);
        assert_eq!(
            run(&lt, ptr_a.wrapping_add(8)),
            refused,
            "A 8 bytes past 256"
        );
        // B, C and D still need 256 bytes; a null C (beta = 0) needs nothing.
        let d16 = PrefAttr::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES;
        let algo = lt.heuristic(layouts).expect("an algorithm");
        let status = lt.matmul_with(
            &algo,
            layouts,
            ptr_of(&alpha),
            ptr_of(&beta),
            ptr_a.cast_const().cast(),
            ptr_b.cast_const().cast(),
            null_mut(),
            ptr_d.wrapping_add(16).cast(),
        );
        assert_eq!(status, refused, "D 16 bytes past 256");
        // The attribute is a uint32_t: another size is refused and changes nothing.
        assert_eq!(
            lt.set_pref(d16, 16u64),
            LtStatus::CUBLAS_STATUS_INVALID_VALUE
        );
        let algo = lt.heuristic(layouts).expect("an algorithm");
        assert_eq!(algo.data[1..5], [16, 256, 256, 256]);
    }

    #[test]
    fn cublaslt_row_major_layouts() {
        let (m, n, k) = (3usize, 4usize, 5usize);
        let mut rng = Rng(2718);
        let elem = Elem::F32;
        // A row-major m x k (ld k + 2), B column-major k x n, C = D row-major (ld n + 1).
        let (lda, ldb, ldd) = (k + 2, k, n + 1);
        let mut a = Buffer::filled(elem, m * lda, f64::NAN);
        for i in 0..m {
            for p in 0..k {
                a.set(i * lda + p, rng.small_int());
            }
        }
        let b = padded(elem, (k, n, ldb), f64::NAN, || rng.small_int());
        let mut d = Buffer::filled(elem, m * ldd, f64::NAN);
        let lt = LtSetup::new(
            cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublaslt::cudaDataType::CUDA_R_32F,
        );
        let dt = data_type(elem);
        let a_layout = lt.layout(dt, m, k, lda);
        let b_layout = lt.layout(dt, k, n, ldb);
        let d_layout = lt.layout(dt, m, n, ldd);
        let row = cublaslt::cublasLtOrder_t::CUBLASLT_ORDER_ROW as i32;
        let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
        for layout in [a_layout, d_layout] {
            assert_eq!(
                lt.set_layout(layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_ORDER, row),
                ok
            );
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let layouts = [a_layout, b_layout, d_layout, d_layout];
        let status = lt.matmul(
            layouts,
            ptr_of(&alpha),
            ptr_of(&beta),
            a.ptr(),
            b.ptr(),
            d.ptr(),
            d.ptr_mut(),
        );
        assert_eq!(status, ok);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| a.get(i * lda + p) * b.get(j * ldb + p))
                    .sum();
                assert_eq!(d.get(i * ldd + j), want, "({i}, {j})");
            }
            assert!(d.get(i * ldd + n).is_nan(), "row padding written");
        }
        // A row-major leading dimension below the row length is refused.
        let short = lt.layout(dt, m, k, k - 1);
        assert_eq!(
            lt.set_layout(short, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_ORDER, row),
            ok
        );
        assert_eq!(
            lt.heuristic([short, b_layout, d_layout, d_layout])
                .unwrap_err(),
            LtStatus::CUBLAS_STATUS_INVALID_VALUE
        );
    }

    #[test]
    fn gemm_ex_types_and_half_precision_compute() {
        use cublas::cublasComputeType_t as C;
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let op = cublas::cublasOperation_t::CUBLAS_OP_N;
        let algo = cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        // 1x3 times 3x1: 2048 + 1 + 1. An f16 accumulator stays at 2048 (2049 is a tie, to
        // even); an f32 one reaches 2050, which f16 holds.
        let a = Buffer::from_values(Elem::F16, &[2048.0, 1.0, 1.0]);
        let b = Buffer::from_values(Elem::F16, &[1.0, 1.0, 1.0]);
        let run = |compute: C, alpha: *const c_void, beta: *const c_void, c_elem: Elem| {
            let mut c = Buffer::filled(c_elem, 1, f64::NAN);
            let mut handle = null_mut();
            // SAFETY: live locals and buffers of the described shapes.
            let status = unsafe {
                assert_eq!(cublasCreate_v2(&mut handle), ok);
                let status = cublasGemmEx(
                    handle,
                    op,
                    op,
                    1,
                    1,
                    3,
                    alpha,
                    a.ptr(),
                    blas_data_type(Elem::F16),
                    1,
                    b.ptr(),
                    blas_data_type(Elem::F16),
                    3,
                    beta,
                    c.ptr_mut(),
                    blas_data_type(c_elem),
                    1,
                    compute,
                    algo,
                );
                assert_eq!(cublasDestroy_v2(handle), ok);
                status
            };
            (status, c.get(0))
        };
        let (one16, zero16) = (f16::ONE, f16::ZERO);
        let (one32, zero32) = (1.0f32, 0.0f32);
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_16F,
                ptr_of(&one16),
                ptr_of(&zero16),
                Elem::F16
            ),
            (ok, 2048.0)
        );
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_32F,
                ptr_of(&one32),
                ptr_of(&zero32),
                Elem::F16
            ),
            (ok, 2050.0)
        );
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_32F,
                ptr_of(&one32),
                ptr_of(&zero32),
                Elem::F32
            ),
            (ok, 2050.0)
        );
        let unsupported = BlasStatus::CUBLAS_STATUS_NOT_SUPPORTED;
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_16F,
                ptr_of(&one16),
                ptr_of(&zero16),
                Elem::F32
            )
            .0,
            unsupported
        );
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_32F_FAST_TF32,
                ptr_of(&one32),
                ptr_of(&zero32),
                Elem::F32
            )
            .0,
            unsupported
        );
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_64F,
                ptr_of(&one32),
                ptr_of(&zero32),
                Elem::F32
            )
            .0,
            unsupported
        );
        assert_eq!(
            run(
                C::CUBLAS_COMPUTE_32F,
                ptr_of(&one32),
                ptr_of(&zero32),
                Elem::BF16
            )
            .0,
            unsupported
        );

        // cuBLASLt with COMPUTE_16F takes an f16 scale type and accumulates in f16 too.
        let lt = LtSetup::new(
            cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_16F,
            cublaslt::cudaDataType::CUDA_R_16F,
        );
        let dt = data_type(Elem::F16);
        let layouts = [
            lt.layout(dt, 1, 3, 1),
            lt.layout(dt, 3, 1, 3),
            lt.layout(dt, 1, 1, 1),
            lt.layout(dt, 1, 1, 1),
        ];
        let mut d = Buffer::filled(Elem::F16, 1, f64::NAN);
        let status = lt.matmul(
            layouts,
            ptr_of(&one16),
            ptr_of(&zero16),
            a.ptr(),
            b.ptr(),
            null(),
            d.ptr_mut(),
        );
        assert_eq!(status, LtStatus::CUBLAS_STATUS_SUCCESS);
        assert_eq!(d.get(0), 2048.0);
        // ... and refuses an f32 scale type with it.
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_SCALE_TYPE, R_32F),
            LtStatus::CUBLAS_STATUS_SUCCESS
        );
        assert_eq!(
            lt.heuristic(layouts).unwrap_err(),
            LtStatus::CUBLAS_STATUS_NOT_SUPPORTED
        );
    }

    #[test]
    fn alpha_zero_or_k_zero_never_read_a_and_b() {
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let op = cublas::cublasOperation_t::CUBLAS_OP_N;
        let (m, n, k) = (2, 3, 4);
        let a = Buffer::filled(Elem::F32, m * k, f64::NAN);
        let b = Buffer::filled(Elem::F32, k * n, f64::NAN);
        let mut handle = null_mut();
        // SAFETY: live locals and buffers of the described shapes.
        unsafe {
            assert_eq!(cublasCreate_v2(&mut handle), ok);
            // alpha = 0: C = beta C, the NaN inputs unread.
            let mut c = Buffer::from_values(Elem::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
            let (alpha, beta) = (0.0f32, 1.5f32);
            let status = cublasSgemm_v2(
                handle,
                op,
                op,
                m as i32,
                n as i32,
                k as i32,
                &alpha,
                a.ptr().cast(),
                m as i32,
                b.ptr().cast(),
                k as i32,
                &beta,
                c.ptr_mut().cast(),
                m as i32,
            );
            assert_eq!(status, ok);
            assert_eq!(c.values(), [1.5, 3.0, 4.5, 6.0, 7.5, 9.0]);
            // K = 0 and beta = 0: C = 0, with A and B null.
            let mut c = Buffer::filled(Elem::F32, m * n, f64::NAN);
            let (alpha, beta) = (1.0f32, 0.0f32);
            let status = cublasSgemm_v2(
                handle,
                op,
                op,
                m as i32,
                n as i32,
                0,
                &alpha,
                null(),
                m as i32,
                null(),
                1,
                &beta,
                c.ptr_mut().cast(),
                m as i32,
            );
            assert_eq!(status, ok);
            assert_eq!(c.values(), [0.0; 6]);
            // M = 0: nothing to do, nothing touched.
            let status = cublasSgemm_v2(
                handle,
                op,
                op,
                0,
                n as i32,
                k as i32,
                &alpha,
                null(),
                1,
                null(),
                k as i32,
                &beta,
                null_mut(),
                1,
            );
            assert_eq!(status, ok);
            assert_eq!(cublasDestroy_v2(handle), ok);
        }
    }

    #[test]
    fn invalid_layouts_and_arguments_are_refused() {
        use LtStatus::{
            CUBLAS_STATUS_INVALID_VALUE as INVALID, CUBLAS_STATUS_NOT_SUPPORTED as UNSUPPORTED,
        };
        let ok = LtStatus::CUBLAS_STATUS_SUCCESS;
        let (m, n, k) = (3usize, 4usize, 5usize);
        let a = Buffer::filled(Elem::F32, m * k, 1.0);
        let b = Buffer::filled(Elem::F32, k * n, 1.0);
        let mut d = Buffer::filled(Elem::F32, m * n, f64::NAN);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let f32_type = cublaslt::cudaDataType::CUDA_R_32F;
        let lt = LtSetup::new(cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F, f32_type);
        let good = [
            lt.layout(f32_type, m, k, m),
            lt.layout(f32_type, k, n, k),
            lt.layout(f32_type, m, n, m),
            lt.layout(f32_type, m, n, m),
        ];
        let algo = lt
            .heuristic(good)
            .expect("the consistent problem has an algorithm");
        let run = |layouts, d: *mut c_void| {
            lt.matmul_with(
                &algo,
                layouts,
                ptr_of(&alpha),
                ptr_of(&beta),
                a.ptr(),
                b.ptr(),
                d,
                d,
            )
        };
        assert_eq!(run(good, d.ptr_mut()), ok);

        // Shapes that disagree: A's rows, B's rows (K), D's columns.
        let wrong_a = lt.layout(f32_type, m + 1, k, m + 1);
        let wrong_k = lt.layout(f32_type, k + 1, n, k + 1);
        let wrong_d = lt.layout(f32_type, m, n + 1, m);
        for layouts in [
            [wrong_a, good[1], good[2], good[3]],
            [good[0], wrong_k, good[2], good[3]],
            [good[0], good[1], good[2], wrong_d],
        ] {
            assert_eq!(lt.heuristic(layouts).unwrap_err(), INVALID);
            assert_eq!(run(layouts, d.ptr_mut()), INVALID);
        }
        // The transposes are part of the shape: with TRANSA, A must be k x m.
        assert_eq!(lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, OP_T), ok);
        assert_eq!(lt.heuristic(good).unwrap_err(), INVALID);
        assert_eq!(lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, OP_N), ok);
        // A leading dimension below the rows; a negative one.
        let short_ld = lt.layout(f32_type, m, k, m - 1);
        assert_eq!(
            lt.heuristic([short_ld, good[1], good[2], good[3]])
                .unwrap_err(),
            INVALID
        );
        let negative_ld = lt.layout(f32_type, m, k, m);
        assert_eq!(
            lt.set_layout(negative_ld, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_LD, -1i64),
            ok
        );
        assert_eq!(
            lt.heuristic([negative_ld, good[1], good[2], good[3]])
                .unwrap_err(),
            INVALID
        );
        // Types: f64 data, mixed A/B, FAST_TF32 on f16, a D type other than C's.
        let f64_a = lt.layout(cublaslt::cudaDataType::CUDA_R_64F, m, k, m);
        assert_eq!(
            lt.heuristic([f64_a, good[1], good[2], good[3]])
                .unwrap_err(),
            UNSUPPORTED
        );
        let f16_type = cublaslt::cudaDataType::CUDA_R_16F;
        let f16_a = lt.layout(f16_type, m, k, m);
        assert_eq!(
            lt.heuristic([f16_a, good[1], good[2], good[3]])
                .unwrap_err(),
            UNSUPPORTED
        );
        let f16_layouts = [
            f16_a,
            lt.layout(f16_type, k, n, k),
            lt.layout(f16_type, m, n, m),
            lt.layout(f16_type, m, n, m),
        ];
        assert!(lt.heuristic(f16_layouts).is_ok());
        let f32_d = [f16_layouts[0], f16_layouts[1], f16_layouts[2], good[3]];
        assert_eq!(lt.heuristic(f32_d).unwrap_err(), UNSUPPORTED);
        let fast_tf32 = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32 as u32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, fast_tf32),
            ok
        );
        assert_eq!(lt.heuristic(f16_layouts).unwrap_err(), UNSUPPORTED);
        assert!(lt.heuristic(good).is_ok());
        // A scale type other than the compute type's; an unknown compute type.
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_SCALE_TYPE, R_16F),
            ok
        );
        assert_eq!(lt.heuristic(good).unwrap_err(), UNSUPPORTED);
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_SCALE_TYPE, R_32F),
            ok
        );
        let f64_compute = cublaslt::cublasComputeType_t::CUBLAS_COMPUTE_64F as u32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, f64_compute),
            ok
        );
        assert_eq!(lt.heuristic(good).unwrap_err(), UNSUPPORTED);
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, COMPUTE_32F),
            ok
        );
        assert_eq!(run(good, d.ptr_mut()), ok);

        // In place with different layouts; another algorithm; null scalars and D.
        let wide_c = lt.layout(f32_type, m, n, m + 1);
        let mut wide = Buffer::filled(Elem::F32, (m + 1) * n, 0.0);
        let in_place = [good[0], good[1], wide_c, good[3]];
        assert_eq!(run(in_place, wide.ptr_mut()), INVALID);
        let mut other_algo = algo;
        other_algo.data[0] ^= 1;
        let status = lt.matmul_with(
            &other_algo,
            good,
            ptr_of(&alpha),
            ptr_of(&beta),
            a.ptr(),
            b.ptr(),
            null(),
            d.ptr_mut(),
        );
        assert_eq!(status, INVALID);
        let status = lt.matmul_with(
            null(),
            good,
            ptr_of(&alpha),
            ptr_of(&beta),
            a.ptr(),
            b.ptr(),
            null(),
            d.ptr_mut(),
        );
        assert_eq!(status, ok, "a null algo is cuBLASLt's implicit heuristic");
        let status = lt.matmul_with(
            &algo,
            good,
            null(),
            ptr_of(&beta),
            a.ptr(),
            b.ptr(),
            null(),
            d.ptr_mut(),
        );
        assert_eq!(status, INVALID);
        let status = lt.matmul_with(
            &algo,
            good,
            ptr_of(&alpha),
            ptr_of(&beta),
            a.ptr(),
            b.ptr(),
            null(),
            null_mut(),
        );
        assert_eq!(status, INVALID);
        let one = 1.0f32;
        let status = lt.matmul_with(
            &algo,
            good,
            ptr_of(&alpha),
            ptr_of(&one),
            a.ptr(),
            b.ptr(),
            null(),
            d.ptr_mut(),
        );
        assert_eq!(status, INVALID, "beta != 0 needs C");

        // Descriptor attributes: wrong sizes, bad values, unmodelled features.
        // SAFETY: a live descriptor; the buffers are as large as the sizes given.
        unsafe {
            let value = 1i64;
            let status = cublasLtMatmulDescSetAttribute(
                lt.desc,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                ptr_of(&value),
                8,
            );
            assert_eq!(status, INVALID);
            let status = cublasLtMatmulDescSetAttribute(
                lt.desc,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                null(),
                4,
            );
            assert_eq!(status, INVALID);
        }
        let conjg = cublas::cublasOperation_t::CUBLAS_OP_CONJG as i32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSA, conjg),
            INVALID
        );
        assert_eq!(lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, OP_C), ok);
        assert_eq!(lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSB, OP_N), ok);
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_TRANSC, OP_T),
            UNSUPPORTED
        );
        let relu = cublaslt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU as u32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE, relu),
            UNSUPPORTED
        );
        let default = cublaslt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT as u32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_EPILOGUE, default),
            ok
        );
        let scale_ptr = ptr_of(&one) as usize;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_ptr),
            UNSUPPORTED
        );
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, 0usize),
            ok
        );
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, scale_ptr),
            ok
        );
        let device = cublaslt::cublasLtPointerMode_t::CUBLASLT_POINTER_MODE_DEVICE as i32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_POINTER_MODE, device),
            ok
        );
        let vector = cublaslt::cublasLtPointerMode_t::CUBLASLT_POINTER_MODE_DEVICE_VECTOR as i32;
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_POINTER_MODE, vector),
            UNSUPPORTED
        );
        assert_eq!(
            lt.set_desc(DescAttr::CUBLASLT_MATMUL_DESC_FAST_ACCUM, 1i8),
            ok
        );
        assert_eq!(
            run(good, d.ptr_mut()),
            ok,
            "the refused settings left the descriptor as it was"
        );

        // Layout attributes.
        let layout = good[0];
        let col32 = cublaslt::cublasLtOrder_t::CUBLASLT_ORDER_COL32 as i32;
        assert_eq!(
            lt.set_layout(layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_ORDER, col32),
            UNSUPPORTED
        );
        assert_eq!(
            lt.set_layout(layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_ORDER, 99i32),
            INVALID
        );
        assert_eq!(
            lt.set_layout(layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 0i32),
            INVALID
        );
        assert_eq!(
            lt.set_layout(layout, LayoutAttr::CUBLASLT_MATRIX_LAYOUT_ROWS, 3u32),
            INVALID,
            "rows are a uint64_t"
        );
        let pointer_array = cublaslt::cublasLtBatchMode_t::CUBLASLT_BATCH_MODE_POINTER_ARRAY as i32;
        assert_eq!(
            lt.set_layout(
                layout,
                LayoutAttr::CUBLASLT_MATRIX_LAYOUT_BATCH_MODE,
                pointer_array
            ),
            UNSUPPORTED
        );
        assert_eq!(
            lt.set_layout(
                layout,
                LayoutAttr::CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET,
                8i64
            ),
            UNSUPPORTED
        );

        // Handles of the wrong kind or null; a heuristic asked for no result.
        let as_desc = good[0].cast::<cublaslt::cublasLtMatmulDescOpaque_t>();
        // SAFETY: all handles are live objects of this module (or null).
        unsafe {
            let value = OP_N;
            let status = cublasLtMatmulDescSetAttribute(
                as_desc,
                DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                ptr_of(&value),
                4,
            );
            assert_eq!(status, INVALID);
            let mut result = MaybeUninit::uninit();
            let mut count = -1;
            let [a_l, b_l, c_l, d_l] = good;
            let status = cublasLtMatmulAlgoGetHeuristic(
                lt.desc.cast(),
                lt.desc,
                a_l,
                b_l,
                c_l,
                d_l,
                lt.pref,
                1,
                result.as_mut_ptr(),
                &mut count,
            );
            assert_eq!(status, LtStatus::CUBLAS_STATUS_NOT_INITIALIZED);
            assert_eq!(count, 0);
            let status = cublasLtMatmulAlgoGetHeuristic(
                lt.handle,
                lt.desc,
                a_l,
                b_l,
                c_l,
                d_l,
                lt.pref,
                0,
                result.as_mut_ptr(),
                &mut count,
            );
            assert_eq!(status, INVALID);
            let status = cublasLtMatmulAlgoGetHeuristic(
                lt.handle,
                lt.desc,
                a_l,
                b_l,
                c_l,
                null_mut(),
                lt.pref,
                1,
                result.as_mut_ptr(),
                &mut count,
            );
            assert_eq!(status, INVALID);
            assert_eq!(cublasLtMatrixLayoutDestroy(null_mut()), INVALID);
            assert_eq!(
                cublasLtDestroy(null_mut()),
                LtStatus::CUBLAS_STATUS_NOT_INITIALIZED
            );
            assert_eq!(cublasLtCreate(null_mut()), INVALID);
        }
    }

    #[test]
    fn invalid_cublas_arguments_are_refused() {
        use BlasStatus::{
            CUBLAS_STATUS_INVALID_VALUE as INVALID, CUBLAS_STATUS_NOT_INITIALIZED as NO_HANDLE,
        };
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let n_op = cublas::cublasOperation_t::CUBLAS_OP_N;
        let t_op = cublas::cublasOperation_t::CUBLAS_OP_T;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let a = [1.0f32; 64];
        let b = [1.0f32; 64];
        let mut c = [0.0f32; 64];
        let mut handle = null_mut();
        // SAFETY: live locals large enough for every call that reads them.
        unsafe {
            assert_eq!(cublasCreate_v2(&mut handle), ok);
            let sgemm = |handle, ta, tb, m, n, k, lda, ldb, ldc, c: &mut [f32]| {
                cublasSgemm_v2(
                    handle,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    &alpha,
                    a.as_ptr(),
                    lda,
                    b.as_ptr(),
                    ldb,
                    &beta,
                    c.as_mut_ptr(),
                    ldc,
                )
            };
            assert_eq!(sgemm(handle, n_op, n_op, 3, 4, 5, 3, 5, 3, &mut c), ok);
            assert_eq!(
                sgemm(null_mut(), n_op, n_op, 3, 4, 5, 3, 5, 3, &mut c),
                NO_HANDLE
            );
            assert_eq!(
                sgemm(handle, n_op, n_op, 3, 4, 5, 2, 5, 3, &mut c),
                INVALID,
                "lda < m"
            );
            assert_eq!(
                sgemm(handle, t_op, n_op, 3, 4, 5, 3, 5, 3, &mut c),
                INVALID,
                "lda < k (A^T)"
            );
            assert_eq!(
                sgemm(handle, n_op, n_op, 3, 4, 5, 3, 4, 3, &mut c),
                INVALID,
                "ldb < k"
            );
            assert_eq!(
                sgemm(handle, n_op, t_op, 3, 4, 5, 3, 3, 3, &mut c),
                INVALID,
                "ldb < n (B^T)"
            );
            assert_eq!(
                sgemm(handle, n_op, n_op, 3, 4, 5, 3, 5, 2, &mut c),
                INVALID,
                "ldc < m"
            );
            assert_eq!(
                sgemm(handle, n_op, n_op, 3, -1, 5, 3, 5, 3, &mut c),
                INVALID,
                "n < 0"
            );
            assert_eq!(
                sgemm(handle, n_op, n_op, 0, 4, 5, 0, 5, 1, &mut c),
                INVALID,
                "lda < 1"
            );
            let conjg = cublas::cublasOperation_t::CUBLAS_OP_CONJG;
            assert_eq!(
                sgemm(handle, conjg, n_op, 3, 4, 5, 3, 5, 3, &mut c),
                INVALID
            );
            let status = cublasSgemm_v2(
                handle,
                n_op,
                n_op,
                3,
                4,
                5,
                null(),
                a.as_ptr(),
                3,
                b.as_ptr(),
                5,
                &beta,
                c.as_mut_ptr(),
                3,
            );
            assert_eq!(status, INVALID, "null alpha");
            let status = cublasSgemm_v2(
                handle,
                n_op,
                n_op,
                3,
                4,
                5,
                &alpha,
                null(),
                3,
                b.as_ptr(),
                5,
                &beta,
                c.as_mut_ptr(),
                3,
            );
            assert_eq!(status, INVALID, "null A");
            let status = cublasGemmEx(
                handle,
                n_op,
                n_op,
                3,
                4,
                5,
                ptr_of(&alpha),
                a.as_ptr().cast(),
                cublas::cudaDataType::CUDA_R_64F,
                3,
                b.as_ptr().cast(),
                cublas::cudaDataType::CUDA_R_64F,
                5,
                ptr_of(&beta),
                c.as_mut_ptr().cast(),
                cublas::cudaDataType::CUDA_R_64F,
                3,
                cublas::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            );
            assert_eq!(status, BlasStatus::CUBLAS_STATUS_NOT_SUPPORTED);
            let status = cublasSetMathMode(
                handle,
                cublas::cublasMath_t::CUBLAS_FP32_EMULATED_BF16X9_MATH,
            );
            assert_eq!(status, BlasStatus::CUBLAS_STATUS_NOT_SUPPORTED);
            // A cuBLASLt handle is not a cuBLAS handle.
            let mut lt_handle = null_mut();
            assert_eq!(
                cublasLtCreate(&mut lt_handle),
                LtStatus::CUBLAS_STATUS_SUCCESS
            );
            assert_eq!(
                sgemm(lt_handle.cast(), n_op, n_op, 3, 4, 5, 3, 5, 3, &mut c),
                NO_HANDLE
            );
            assert_eq!(cublasLtDestroy(lt_handle), LtStatus::CUBLAS_STATUS_SUCCESS);
            assert_eq!(cublasDestroy_v2(handle), ok);
            assert_eq!(cublasDestroy_v2(null_mut()), NO_HANDLE);
            assert_eq!(cublasCreate_v2(null_mut()), INVALID);
        }
    }

    #[test]
    fn cublas_handle_settings_round_trip() {
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let mut handle = null_mut();
        // SAFETY: live locals.
        unsafe {
            assert_eq!(cublasCreate_v2(&mut handle), ok);
            let mut stream = 1usize as cublas::cudaStream_t;
            assert_eq!(cublasGetStream_v2(handle, &mut stream), ok);
            assert!(stream.is_null(), "the default stream");
            let set = 0x1000usize as cublas::cudaStream_t;
            assert_eq!(cublasSetStream_v2(handle, set), ok);
            assert_eq!(cublasGetStream_v2(handle, &mut stream), ok);
            assert_eq!(stream, set);
            let mut math = cublas::cublasMath_t::CUBLAS_PEDANTIC_MATH;
            assert_eq!(cublasGetMathMode(handle, &mut math), ok);
            assert_eq!(math, cublas::cublasMath_t::CUBLAS_DEFAULT_MATH);
            assert_eq!(
                cublasSetMathMode(handle, cublas::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH),
                ok
            );
            assert_eq!(cublasGetMathMode(handle, &mut math), ok);
            assert_eq!(math, cublas::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH);
            let mut mode = cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE;
            assert_eq!(cublasGetPointerMode_v2(handle, &mut mode), ok);
            assert_eq!(mode, cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST);
            assert_eq!(
                cublasSetPointerMode_v2(
                    handle,
                    cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE
                ),
                ok
            );
            assert_eq!(cublasGetPointerMode_v2(handle, &mut mode), ok);
            assert_eq!(
                mode,
                cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE
            );
            // Device pointer mode reads the scalars through their (host) address alike.
            let (alpha, beta, a, b) = (3.0f32, 0.0f32, 2.0f32, 5.0f32);
            let mut c = f32::NAN;
            let op = cublas::cublasOperation_t::CUBLAS_OP_N;
            assert_eq!(
                cublasSetMathMode(handle, cublas::cublasMath_t::CUBLAS_DEFAULT_MATH),
                ok
            );
            assert_eq!(
                cublasSgemm_v2(
                    handle, op, op, 1, 1, 1, &alpha, &a, 1, &b, 1, &beta, &mut c, 1
                ),
                ok
            );
            assert_eq!(c, 30.0);
            assert_eq!(cublasSetWorkspace_v2(handle, null_mut(), 0), ok);
            assert_eq!(
                cublasGetStream_v2(handle, null_mut()),
                BlasStatus::CUBLAS_STATUS_INVALID_VALUE
            );
            assert_eq!(cublasDestroy_v2(handle), ok);

            let text = |ptr: *const c_char| CStr::from_ptr(ptr).to_str().unwrap().to_owned();
            assert_eq!(text(cublasGetStatusName(ok)), "CUBLAS_STATUS_SUCCESS");
            assert_eq!(
                text(cublasLtGetStatusName(LtStatus::CUBLAS_STATUS_NOT_SUPPORTED)),
                "CUBLAS_STATUS_NOT_SUPPORTED"
            );
            assert!(
                text(cublasGetStatusString(
                    BlasStatus::CUBLAS_STATUS_INVALID_VALUE
                ))
                .contains("invalid")
            );
            assert!(
                text(cublasLtGetStatusString(LtStatus::CUBLAS_STATUS_SUCCESS)).contains("success")
            );
        }
    }
    #[test]
    fn strided_batched_gemms_are_the_products_of_each_batch() {
        let ok = BlasStatus::CUBLAS_STATUS_SUCCESS;
        let (op_n, op_t) = (
            cublas::cublasOperation_t::CUBLAS_OP_N,
            cublas::cublasOperation_t::CUBLAS_OP_T,
        );
        let (m, n, k, batches) = (3usize, 2usize, 4usize, 3usize);
        // Batch i of A is m x k (column-major), of B n x k (B^T used), with a gap of 5 elements
        // between matrices to check the strides.
        let (stride_a, stride_b, stride_c) = (m * k + 5, n * k + 5, m * n + 5);
        let a_values: Vec<f64> = (0..stride_a * batches)
            .map(|i| (i % 7) as f64 - 3.0)
            .collect();
        let b_values: Vec<f64> = (0..stride_b * batches)
            .map(|i| (i % 5) as f64 * 0.5)
            .collect();
        let a = Buffer::from_values(Elem::F32, &a_values);
        let b = Buffer::from_values(Elem::F32, &b_values);
        let mut c = Buffer::filled(Elem::F32, stride_c * batches, -1.0);
        let mut c_ex = Buffer::filled(Elem::F32, stride_c * batches, -1.0);
        let (alpha, beta) = (2.0f32, 0.0f32);
        let mut handle = null_mut();
        // SAFETY: live locals and buffers holding every batch at the given strides.
        unsafe {
            assert_eq!(cublasCreate_v2(&mut handle), ok);
            let status = cublasSgemmStridedBatched(
                handle,
                op_n,
                op_t,
                m as i32,
                n as i32,
                k as i32,
                &alpha,
                a.ptr().cast(),
                m as i32,
                stride_a as i64,
                b.ptr().cast(),
                n as i32,
                stride_b as i64,
                &beta,
                c.ptr_mut().cast(),
                m as i32,
                stride_c as i64,
                batches as i32,
            );
            assert_eq!(status, ok);
            let status = cublasGemmStridedBatchedEx(
                handle,
                op_n,
                op_t,
                m as i32,
                n as i32,
                k as i32,
                (&alpha as *const f32).cast(),
                a.ptr().cast(),
                cublas::cudaDataType::CUDA_R_32F,
                m as i32,
                stride_a as i64,
                b.ptr().cast(),
                cublas::cudaDataType::CUDA_R_32F,
                n as i32,
                stride_b as i64,
                (&beta as *const f32).cast(),
                c_ex.ptr_mut().cast(),
                cublas::cudaDataType::CUDA_R_32F,
                m as i32,
                stride_c as i64,
                batches as i32,
                cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            );
            assert_eq!(status, ok);
            // f64 is not modelled: refused, C untouched.
            let status = cublasDgemmStridedBatched(
                handle,
                op_n,
                op_t,
                1,
                1,
                1,
                null(),
                null(),
                1,
                0,
                null(),
                1,
                0,
                null(),
                null_mut(),
                1,
                0,
                1,
            );
            assert_eq!(status, BlasStatus::CUBLAS_STATUS_NOT_SUPPORTED);
            assert_eq!(cublasDestroy_v2(handle), ok);
        }
        let got = c.values();
        assert_eq!(got, c_ex.values());
        for batch in 0..batches {
            for col in 0..n {
                for row in 0..m {
                    let want: f64 = (0..k)
                        .map(|l| {
                            a_values[batch * stride_a + l * m + row]
                                * b_values[batch * stride_b + l * n + col]
                        })
                        .sum::<f64>()
                        * 2.0;
                    assert_eq!(got[batch * stride_c + col * m + row], want, "batch {batch}");
                }
            }
            // The gap after each C is untouched.
            for gap in m * n..stride_c {
                assert_eq!(got[batch * stride_c + gap], -1.0);
            }
        }
    }
}
