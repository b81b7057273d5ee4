//! The CUDA kernels and libraries behind the ops: `.cu` files under `tileops/kernels/`, embedded
//! in the binary, compiled by NVRTC at first use for the device's own architecture (CUBIN, with
//! PTX for the driver's JIT as the fallback), and cached per device and kernel file; and the
//! cuBLAS/cuBLASLt state of the gemm op (`blas`).
//!
//! The layering is one way: ops call this module, this module calls the device's context and
//! stream. What this module caches per device (loaded modules, looked-up entry points, BLAS
//! handles) lives in a `Cache` that the device holds as one opaque field and only this module
//! reads or writes.
//!
//! The compile API (`compile`, `Target`, `Compiled`, `toolkit`, ...) is reachable but hidden from
//! the docs: it is there so that a machine without a GPU can still compile every kernel and read
//! ptxas's register and spill report (see `tileops/tests/it/kernel_compile.rs`), not for users.

pub(crate) mod blas;
mod compile;
mod toolkit;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

#[doc(hidden)]
pub use compile::{Compiled, ResourceUsage, Target, compile, supported_archs};
#[doc(hidden)]
pub use toolkit::{Toolkit, toolkit};

use crate::Error;
use crate::device::CudaDevice;

/// What this module keeps per device, held by the device as one opaque field.
///
/// Modules and entry points belong to a context, not a stream: devices on other streams of the
/// same primary context share them ([`Cache::for_another_stream`]). The BLAS state is per
/// stream: a handle is bound to one stream, and a workspace used by two streams at once would
/// race.
#[derive(Default)]
pub(crate) struct Cache {
    /// Loaded modules, by kernel file name (`softmax.cu`).
    modules: Arc<Mutex<HashMap<&'static str, Arc<CudaModule>>>>,
    /// Entry points already looked up, by entry name.
    functions: Arc<Mutex<HashMap<&'static str, CudaFunction>>>,
    /// The cuBLAS/cuBLASLt handles and workspace of the device's stream (made at first gemm).
    blas: blas::Slot,
}

impl Cache {
    /// The cache of another device on the same context but another stream: the same modules and
    /// entry points, its own (empty) BLAS state.
    pub(crate) fn for_another_stream(&self) -> Cache {
        Cache {
            modules: self.modules.clone(),
            functions: self.functions.clone(),
            blas: blas::Slot::default(),
        }
    }
}

/// One kernel file and the entry points it defines.
#[derive(Debug)]
pub struct KernelSource {
    /// File name under `tileops/kernels/` (`softmax.cu`).
    pub file: &'static str,
    /// Its text.
    pub source: &'static str,
    /// Every `extern "C" __global__` entry point in it.
    pub entries: &'static [Entry],
}

/// One entry point, with the memory access it is meant to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The symbol (`softmax_rows_v4_bf16`).
    pub name: &'static str,
    /// Reads its main input with 128-bit global loads (`ld.global.nc.v4` and the like).
    pub vector_loads: bool,
    /// Writes its main output with 128-bit global stores (`st.global.v4` and the like).
    pub vector_stores: bool,
}

/// Headers the kernel files include, passed to NVRTC by name.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "tileops_common.cuh",
        include_str!("../../kernels/tileops_common.cuh"),
    ),
    (
        "tileops_fp8.cuh",
        include_str!("../../kernels/tileops_fp8.cuh"),
    ),
];

/// Every entry point `<base>_{f32,f16,bf16}` of one kernel family.
macro_rules! per_dtype {
    ($($base:literal: loads $loads:literal, stores $stores:literal;)*) => {
        &[$(
            Entry { name: concat!($base, "_f32"), vector_loads: $loads, vector_stores: $stores },
            Entry { name: concat!($base, "_f16"), vector_loads: $loads, vector_stores: $stores },
            Entry { name: concat!($base, "_bf16"), vector_loads: $loads, vector_stores: $stores },
        )*]
    };
}

/// `softmax.cu`: softmax and log_softmax, one body each with the output step as a template
/// parameter, so every `softmax_*` entry has a `log_softmax_*` twin with the same access pattern.
pub static SOFTMAX: KernelSource = KernelSource {
    file: "softmax.cu",
    source: include_str!("../../kernels/softmax.cu"),
    entries: per_dtype! {
        "softmax_rows_v4": loads true, stores true;
        "softmax_rows_v16": loads true, stores true;
        // Writes one (max, sum) pair per block.
        "softmax_partial": loads true, stores false;
        "softmax_finalize": loads true, stores true;
        // One element per thread: for inner extents that are not a multiple of a 16-byte vector.
        "softmax_cols": loads false, stores false;
        "softmax_cols_vec": loads true, stores true;
        "log_softmax_rows_v4": loads true, stores true;
        "log_softmax_rows_v16": loads true, stores true;
        "log_softmax_partial": loads true, stores false;
        "log_softmax_finalize": loads true, stores true;
        "log_softmax_cols": loads false, stores false;
        "log_softmax_cols_vec": loads true, stores true;
    },
};

/// `rms_norm.cu`.
pub static RMS_NORM: KernelSource = KernelSource {
    file: "rms_norm.cu",
    source: include_str!("../../kernels/rms_norm.cu"),
    entries: per_dtype! {
        "rms_norm_rows_v4": loads true, stores true;
        "rms_norm_rows_v16": loads true, stores true;
        "rms_norm_loop": loads true, stores true;
    },
};

/// `reduce.cu`: sum, mean, amax, logsumexp. Rows kernels write one scalar per row; the scalar
/// cols and strided kernels read one element per thread.
pub static REDUCE: KernelSource = KernelSource {
    file: "reduce.cu",
    source: include_str!("../../kernels/reduce.cu"),
    entries: per_dtype! {
        "reduce_rows_sum": loads true, stores false;
        "reduce_rows_mean": loads true, stores false;
        "reduce_rows_amax": loads true, stores false;
        "reduce_rows_lse": loads true, stores false;
        "reduce_cols_sum": loads false, stores false;
        "reduce_cols_mean": loads false, stores false;
        "reduce_cols_amax": loads false, stores false;
        "reduce_cols_lse": loads false, stores false;
        "reduce_cols_vec_sum": loads true, stores true;
        "reduce_cols_vec_mean": loads true, stores true;
        "reduce_cols_vec_amax": loads true, stores true;
        "reduce_cols_vec_lse": loads true, stores true;
        "reduce_strided_sum": loads false, stores false;
        "reduce_strided_mean": loads false, stores false;
        "reduce_strided_amax": loads false, stores false;
        "reduce_strided_lse": loads false, stores false;
        // Split layouts: partial states (f32 pairs) out, combined by reduce_finish.
        "reduce_rows_split_sum": loads true, stores false;
        "reduce_rows_split_mean": loads true, stores false;
        "reduce_rows_split_amax": loads true, stores false;
        "reduce_rows_split_lse": loads true, stores false;
        "reduce_cols_split_sum": loads false, stores false;
        "reduce_cols_split_mean": loads false, stores false;
        "reduce_cols_split_amax": loads false, stores false;
        "reduce_cols_split_lse": loads false, stores false;
        "reduce_cols_vec_split_sum": loads true, stores false;
        "reduce_cols_vec_split_mean": loads true, stores false;
        "reduce_cols_vec_split_amax": loads true, stores false;
        "reduce_cols_vec_split_lse": loads true, stores false;
        "reduce_finish_sum": loads false, stores false;
        "reduce_finish_mean": loads false, stores false;
        "reduce_finish_amax": loads false, stores false;
        "reduce_finish_lse": loads false, stores false;
    },
};

/// `layer_norm.cu`.
pub static LAYER_NORM: KernelSource = KernelSource {
    file: "layer_norm.cu",
    source: include_str!("../../kernels/layer_norm.cu"),
    entries: per_dtype! {
        "layer_norm_rows_v4": loads true, stores true;
        "layer_norm_rows_v16": loads true, stores true;
        "layer_norm_loop": loads true, stores true;
    },
};

/// `fused_add_rms_norm.cu`.
pub static FUSED_ADD_RMS_NORM: KernelSource = KernelSource {
    file: "fused_add_rms_norm.cu",
    source: include_str!("../../kernels/fused_add_rms_norm.cu"),
    entries: per_dtype! {
        "fused_add_rms_norm_rows_v4": loads true, stores true;
        "fused_add_rms_norm_loop": loads true, stores true;
    },
};

/// `activation.cu`: relu, gelu (erf and tanh forms), silu, sigmoid, neg.
pub static ACTIVATION: KernelSource = KernelSource {
    file: "activation.cu",
    source: include_str!("../../kernels/activation.cu"),
    entries: per_dtype! {
        "relu": loads true, stores true;
        "gelu_erf": loads true, stores true;
        "gelu_tanh": loads true, stores true;
        "silu": loads true, stores true;
        "sigmoid": loads true, stores true;
        "neg": loads true, stores true;
    },
};

/// `silu_and_mul.cu`.
pub static SILU_AND_MUL: KernelSource = KernelSource {
    file: "silu_and_mul.cu",
    source: include_str!("../../kernels/silu_and_mul.cu"),
    entries: per_dtype! {
        "silu_and_mul_vec": loads true, stores true;
        // One element per thread: for halves that are not a whole number of 16-byte vectors.
        "silu_and_mul_scalar": loads false, stores false;
    },
};

/// `rope.cu`.
pub static ROPE: KernelSource = KernelSource {
    file: "rope.cu",
    source: include_str!("../../kernels/rope.cu"),
    entries: per_dtype! {
        "rope_vec": loads true, stores true;
        // One element pair per thread: head_dim / 2 not a multiple of the vector width.
        "rope_scalar": loads false, stores false;
    },
};

/// `fp8_quant.cu`: the stores are 16 e4m3 codes (one 128-bit store per 16 elements).
pub static FP8_QUANT: KernelSource = KernelSource {
    file: "fp8_quant.cu",
    source: include_str!("../../kernels/fp8_quant.cu"),
    entries: per_dtype! {
        "fp8_quant_rows": loads true, stores true;
        "fp8_quant_loop": loads true, stores true;
    },
};

/// `qk_norm_rope_fp8.cu`: 2-byte inputs only (the seed's ledger counts 2-byte q and k).
pub static QK_NORM_ROPE_FP8: KernelSource = KernelSource {
    file: "qk_norm_rope_fp8.cu",
    source: include_str!("../../kernels/qk_norm_rope_fp8.cu"),
    entries: &[
        Entry {
            name: "qk_norm_rope_fp8_f16",
            vector_loads: true,
            vector_stores: true,
        },
        Entry {
            name: "qk_norm_rope_fp8_bf16",
            vector_loads: true,
            vector_stores: true,
        },
    ],
};

/// `bench_util.cu`: the bench harness's stream-holding spin kernel (`tileops::perf::bench`).
pub static BENCH_UTIL: KernelSource = KernelSource {
    file: "bench_util.cu",
    source: include_str!("../../kernels/bench_util.cu"),
    entries: &[Entry {
        name: "bench_spin",
        vector_loads: false,
        vector_stores: false,
    }],
};

/// `calibrate.cu`: the calibration microbenchmarks (`tileops::perf::calibrate_gpu`).
pub static CALIBRATE: KernelSource = KernelSource {
    file: "calibrate.cu",
    source: include_str!("../../kernels/calibrate.cu"),
    entries: &[
        Entry {
            name: "hbm_copy",
            vector_loads: true,
            vector_stores: true,
        },
        Entry {
            name: "hbm_triad",
            vector_loads: true,
            vector_stores: true,
        },
        Entry {
            name: "hbm_read",
            vector_loads: true,
            vector_stores: false,
        },
        Entry {
            name: "hbm_write",
            vector_loads: false,
            vector_stores: true,
        },
        Entry {
            name: "fma_chain_ilp1",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fma_chain_ilp2",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fma_chain_ilp4",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fma_chain_ilp8",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fma_chain_ilp16",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fill_uniform_f32",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fill_uniform_f16",
            vector_loads: false,
            vector_stores: false,
        },
        Entry {
            name: "fill_uniform_bf16",
            vector_loads: false,
            vector_stores: false,
        },
    ],
};

/// Every kernel file of the crate.
pub static SOURCES: &[&KernelSource] = &[
    &SOFTMAX,
    &RMS_NORM,
    &LAYER_NORM,
    &FUSED_ADD_RMS_NORM,
    &ACTIVATION,
    &SILU_AND_MUL,
    &REDUCE,
    &ROPE,
    &FP8_QUANT,
    &QK_NORM_ROPE_FP8,
    &BENCH_UTIL,
    &CALIBRATE,
];

/// Compiled images, by kernel file and target: GPUs of one architecture compile once.
type CompileCache = Mutex<HashMap<(&'static str, Target), Arc<Compiled>>>;

fn compile_cache() -> &'static CompileCache {
    static CACHE: OnceLock<CompileCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn compile_cached(source: &'static KernelSource, target: Target) -> Result<Arc<Compiled>, Error> {
    let key = (source.file, target);
    if let Some(hit) = lock(compile_cache()).get(&key) {
        return Ok(hit.clone());
    }
    let compiled = Arc::new(compile(source, target)?);
    lock(compile_cache()).insert(key, compiled.clone());
    Ok(compiled)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Compiles (once) and loads (once per device) `source`: a CUBIN for the device's own `sm_XX`,
/// else PTX for `compute_XX` (or the newest architecture this NVRTC knows below it).
fn module(dev: &CudaDevice, source: &'static KernelSource) -> Result<Arc<CudaModule>, Error> {
    if let Some(module) = lock(&dev.kernels.modules).get(source.file) {
        return Ok(module.clone());
    }
    let (major, minor) = dev.capability;
    let arch = major * 10 + minor;
    let mut targets = vec![Target::Sm(arch), Target::Compute(arch)];
    // A GPU newer than this NVRTC: PTX for the newest architecture it knows, JIT-compiled.
    let known = supported_archs()
        .ok()
        .and_then(|archs| archs.into_iter().filter(|&a| a <= arch).max());
    if let Some(best) = known.filter(|&best| best != arch) {
        targets.push(Target::Compute(best));
    }
    let mut first_error = None;
    for target in targets {
        let attempt = compile_cached(source, target).and_then(|compiled| {
            let image = match (&compiled.cubin, &compiled.ptx) {
                (Some(cubin), _) => Ptx::from_binary(cubin.clone()),
                (None, Some(ptx)) => Ptx::from_src(ptx.clone()),
                (None, None) => {
                    return Err(Error::launch_refused(
                        source.file,
                        format!("no image for {target}"),
                    ));
                }
            };
            dev.ctx
                .load_module(image)
                .map_err(|e| Error::launch(format!("{} ({target})", source.file), e))
        });
        match attempt {
            Ok(module) => {
                lock(&dev.kernels.modules).insert(source.file, module.clone());
                return Ok(module);
            }
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| Error::launch_refused(source.file, "no target to compile for")))
}

/// The entry point `entry` of `source` on `dev`, compiling and loading the file at first use.
pub(crate) fn function(
    dev: &CudaDevice,
    source: &'static KernelSource,
    entry: &'static str,
) -> Result<CudaFunction, Error> {
    if let Some(function) = lock(&dev.kernels.functions).get(entry) {
        return Ok(function.clone());
    }
    let module = module(dev, source)?;
    let function = module
        .load_function(entry)
        .map_err(|e| Error::launch(entry, e))?;
    lock(&dev.kernels.functions).insert(entry, function.clone());
    Ok(function)
}

/// The `_f32`/`_f16`/`_bf16` suffix of a dtype's entry points.
pub(crate) fn dtype_suffix(dtype: crate::DType) -> Option<&'static str> {
    match dtype {
        crate::DType::Float32 => Some("f32"),
        crate::DType::Float16 => Some("f16"),
        crate::DType::BFloat16 => Some("bf16"),
        _ => None,
    }
}

/// The declared entry `<base>_<suffix>` of `source` (entry names must be `'static`).
pub(crate) fn entry(
    source: &'static KernelSource,
    base: &str,
    dtype: crate::DType,
) -> Result<&'static str, Error> {
    let suffix = dtype_suffix(dtype)
        .ok_or_else(|| Error::launch_refused(base, format!("no {dtype} kernel")))?;
    source
        .entries
        .iter()
        .find(|e| {
            e.name
                .strip_prefix(base)
                .and_then(|rest| rest.strip_prefix('_'))
                == Some(suffix)
        })
        .map(|e| e.name)
        .ok_or_else(|| {
            Error::launch_refused(
                format!("{base}_{suffix}"),
                format!("not declared in {}", source.file),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_unique_and_declared_in_their_source() {
        let mut seen = std::collections::HashSet::new();
        for source in SOURCES {
            for entry in source.entries {
                assert!(seen.insert(entry.name), "duplicate entry {}", entry.name);
                let base = entry
                    .name
                    .rsplit_once('_')
                    .map(|(b, _)| b)
                    .unwrap_or(entry.name);
                // Per-dtype entries come from a `<base>_##SUFFIX` macro; the others are
                // declared by name.
                assert!(
                    source.source.contains(&format!("{base}_##SUFFIX"))
                        || source.source.contains(&format!("void {}(", entry.name)),
                    "{} not in {}",
                    entry.name,
                    source.file
                );
            }
        }
    }

    #[test]
    fn entries_resolve_by_base_and_dtype() {
        assert_eq!(
            entry(&SOFTMAX, "softmax_rows_v4", crate::DType::BFloat16).unwrap(),
            "softmax_rows_v4_bf16"
        );
        assert_eq!(
            entry(&SOFTMAX, "softmax_cols", crate::DType::Float32).unwrap(),
            "softmax_cols_f32"
        );
        assert_eq!(
            entry(&SOFTMAX, "log_softmax_cols", crate::DType::Float16).unwrap(),
            "log_softmax_cols_f16"
        );
        assert!(entry(&SOFTMAX, "softmax_cols", crate::DType::Float64).is_err());
        assert!(entry(&RMS_NORM, "softmax_cols", crate::DType::Float32).is_err());
    }
}
