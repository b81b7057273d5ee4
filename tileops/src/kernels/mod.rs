//! The CUDA kernels and libraries behind the ops: `.cu` files under `tileops/kernels/`, embedded
//! in the binary, compiled by NVRTC at first use for the device's own architecture (CUBIN, with
//! PTX for the driver's JIT as the fallback), and cached per device and kernel file (and across
//! processes in the directory `TILEOPS_KERNEL_CACHE` names: [`KernelCache`]); and the
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
mod disk_cache;
mod toolkit;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

#[doc(hidden)]
pub use compile::{Compiled, ResourceUsage, Target, compile, compile_text, supported_archs};
pub use disk_cache::{CACHE_ENV, KernelCache};
#[doc(hidden)]
pub use toolkit::{Toolkit, toolkit};

use crate::Error;
use crate::device::CudaDevice;

/// An occupancy question: entry, threads per block, dynamic shared memory bytes.
type OccupancyKey = (&'static str, u32, usize);

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
    /// The driver's occupancy answers, by entry, threads per block and dynamic shared memory.
    occupancy: Arc<Mutex<HashMap<OccupancyKey, u32>>>,
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
            occupancy: self.occupancy.clone(),
            blas: blas::Slot::default(),
        }
    }
}

/// One kernel file and the entry points it defines.
#[derive(Debug)]
pub struct KernelSource {
    /// File name (`softmax.cu`), unique across `tileops/kernels/`: the name NVRTC compiles it
    /// under, and the key of the module caches.
    pub file: &'static str,
    /// Its path under `tileops/kernels/` (`reduction/softmax.cu`): the kernels sit in one
    /// directory per manifest family, as the ops do.
    pub path: &'static str,
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
    (
        "tileops_mma.cuh",
        include_str!("../../kernels/tileops_mma.cuh"),
    ),
];

// The statics of the kernel files (`SOFTMAX`, `RMS_NORM`, ..., and `SOURCES`, every file), made by
// the build script from each file's `@entry` lines: a kernel file declares its own entry points, so
// adding one touches no Rust here.
include!(concat!(env!("OUT_DIR"), "/kernel_sources.rs"));

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

/// How many blocks of `threads` threads and `dynamic_shared` bytes of dynamic shared memory one
/// SM of `dev` holds at once running `entry`, as the driver's occupancy API answers (asked once
/// per entry and shape): what a grid-stride kernel's grid is sized by, so that one wave fills
/// every SM without a second, partial one. At least 1: a launch the driver says cannot be
/// resident fails at launch, with the driver's reason.
pub(crate) fn resident_blocks(
    dev: &CudaDevice,
    source: &'static KernelSource,
    entry: &'static str,
    threads: u32,
    dynamic_shared: usize,
) -> Result<u32, Error> {
    let key = (entry, threads, dynamic_shared);
    if let Some(&blocks) = lock(&dev.kernels.occupancy).get(&key) {
        return Ok(blocks);
    }
    let blocks = function(dev, source, entry)?
        .occupancy_max_active_blocks_per_multiprocessor(threads, dynamic_shared, None)
        .map_err(|e| Error::launch(entry, e))?
        .max(1);
    lock(&dev.kernels.occupancy).insert(key, blocks);
    Ok(blocks)
}

/// The entry point `entry` of `source` on `device`, compiled (once per architecture) and loaded
/// (once per device) at first use: for code that launches tileops's kernels itself, such as the
/// bench crate's timers and calibration microbenchmarks (`kernels/perf/`).
///
/// Errors with [`Error::NoDevice`] on the CPU, and as a kernel compile or load fails.
///
/// ```no_run
/// use tileops::Device;
/// use tileops::kernels::{self, BENCH_UTIL};
/// let spin = kernels::load(&Device::cuda(0)?, &BENCH_UTIL, "bench_spin")?;
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn load(
    device: &crate::Device,
    source: &'static KernelSource,
    entry: &'static str,
) -> Result<CudaFunction, Error> {
    let dev = device.cuda_device().ok_or_else(|| Error::NoDevice {
        reason: format!("{entry} needs a CUDA device, not {device}"),
    })?;
    function(dev, source, entry)
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
