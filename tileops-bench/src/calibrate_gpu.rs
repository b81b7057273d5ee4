//! The GPU side of calibration (`cargo run --release --example calibrate`): the microbenchmarks
//! whose best rates become a profile. What is computed from the timings — envelopes, fractions,
//! burst and sustained rates, the YAML — lives in [`super::calibrate`] and is tested without a GPU.
//!
//! - **HBM**: the four mixes of `kernels/perf/calibrate.cu` (copy, triad, read-only, write-only) over
//!   16-byte elements, each array at least 2 GB (and 8× the L2), every block size of
//!   [`CalibrateOptions::block_sizes`], `hbm_repeats` batches of `hbm_iterations` back-to-back
//!   launches each; a mix's rate is its best batch. The calibration is the envelope (the best mix)
//!   and each mix's fraction is kept.
//! - **CUDA-core FP32**: register-only FMA chains with ILP 1, 2, 4, 8 and 16 independent chains per
//!   thread, full occupancy; the best rate.
//! - **Tensor cores**: cuBLAS `GemmEx` on square fp16, bf16 and tf32 (fp32 data, `FAST_TF32`
//!   compute) matrices of pseudo-random values (zeros draw less power and would overstate the
//!   sustained rate), each size timed call by call: after an idle pause, the first calls give the
//!   burst rate (before the power cap engages), the second half of a long loop the sustained one.
//!   Roofs this cannot measure (fp8, or all of them without cuBLAS) are carried over from the base
//!   profile, and the file says so.
//!
//! The theoretical peaks come from the base profile (the built-in one of the device by default):
//! a calibration is a fraction of a spec-sheet figure, and the GPU cannot report its own.
//!
//! On an emulated device (cuda-emu, [`Device::is_emulated`]) [`calibrate`] refuses: a profile from
//! an emulator's clock would be fake figures. [`check_kernels`] runs there instead (and anywhere):
//! each microbenchmark kernel once on a tiny working set, its result checked against its host twin
//! in [`super::calibrate`], and one tiny cuBLAS `GemmEx` per dtype; nothing is timed.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tileops::cudarc::cublas::{self, CudaBlas};
use tileops::cudarc::driver::sys::CUevent_flags;
use tileops::cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchArgs,
    LaunchConfig, PushKernelArg,
};

use super::calibrate::{
    CalibrateError, GemmRates, HbmMix, MMA_CHAINS, Measured, ProfileWriter, Provenance, best_rate,
    check_working_set, close_to, fma_chain_value, fma_flops, gemm_flops, hbm_read_sum, mma_flops,
    mma_sync_value, uniform_value,
};
use super::cli::meta;
use super::profile::{DeviceMismatch, MMA_SYNC_ROOF, Profile};
use tileops::kernels::{self, CALIBRATE};
use tileops::registry::RoofKey;
use tileops::{Device, Error};

/// How much to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrateOptions {
    /// Bytes of each HBM array (each mix's working set is at least one array).
    pub hbm_array_bytes: u64,
    /// Launches per timed HBM batch.
    pub hbm_iterations: u32,
    /// Timed batches per mix and block size.
    pub hbm_repeats: u32,
    /// Block sizes swept for every HBM mix.
    pub block_sizes: Vec<u32>,
    /// Timed launches per FMA-chain configuration.
    pub fma_repeats: u32,
    /// Square GEMM sizes.
    pub gemm_sizes: Vec<u64>,
    /// Seconds of back-to-back GEMMs per size (the sustained loop).
    pub gemm_sustained_s: f64,
    /// The first calls of each series that give the burst rate.
    pub gemm_burst_window: usize,
    /// Idle seconds before each series, so the burst window starts below the power cap.
    pub gemm_cooldown_s: f64,
}

impl Default for CalibrateOptions {
    /// The published method: 2 GB arrays, block sizes 128/256/512, best of 200 iterations × 5;
    /// GEMMs at 4096³ and 8192³ with a 3 s sustained loop.
    fn default() -> Self {
        CalibrateOptions {
            hbm_array_bytes: 1 << 31,
            hbm_iterations: 200,
            hbm_repeats: 5,
            block_sizes: vec![128, 256, 512],
            fma_repeats: 5,
            gemm_sizes: vec![4096, 8192],
            gemm_sustained_s: 3.0,
            gemm_burst_window: 10,
            gemm_cooldown_s: 2.0,
        }
    }
}

impl CalibrateOptions {
    /// A quick pass (about a tenth of the time) for checking the setup; its numbers are noisier.
    pub fn quick() -> Self {
        CalibrateOptions {
            hbm_iterations: 20,
            hbm_repeats: 2,
            fma_repeats: 2,
            gemm_sizes: vec![4096],
            gemm_sustained_s: 0.5,
            gemm_cooldown_s: 0.5,
            ..CalibrateOptions::default()
        }
    }
}

/// Why calibration stopped.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateGpuError {
    /// The device is not a GPU.
    #[error("calibration needs a CUDA GPU; {0} is not one")]
    NotAGpu(String),
    /// The device is emulated: its timings say nothing about a GPU, so no profile is made.
    #[error(
        "calibration needs a real GPU; {0} is emulated, and a profile from its clock would be \
         fake figures (check_kernels checks the kernels there instead)"
    )]
    Emulated(String),
    /// A microbenchmark kernel's result is wrong ([`check_kernels`]).
    #[error("kernel check `{entry}` failed: {problem}")]
    Check {
        /// The entry point (or `cublasGemmEx (<roof>)`).
        entry: String,
        /// What was wrong.
        problem: String,
    },
    /// The base profile describes another device: its theoretical peaks would be wrong here.
    #[error(
        "the base profile does not describe this GPU ({0}); pass --base with a profile whose \
         `match` names it"
    )]
    BaseMismatch(#[source] DeviceMismatch),
    /// A CUDA call, kernel compile or launch failed.
    #[error("{0}")]
    Cuda(#[from] Error),
    /// The measurements do not make a calibration (a rate above the theoretical peak, ...).
    #[error("{0}")]
    Calibrate(#[from] CalibrateError),
}

/// Measures every roof it can on `device` and returns the profile writer: measured roofs replace
/// the base profile's, the others are carried over. `log` receives one line per measurement.
///
/// # Errors
/// [`CalibrateGpuError`] when the device is not a GPU or is emulated, the base describes another
/// device, a CUDA call fails, or a measurement is impossible (above the theoretical peak).
pub fn calibrate(
    device: &Device,
    base: &Profile,
    options: &CalibrateOptions,
    log: &mut dyn FnMut(&str),
) -> Result<ProfileWriter, CalibrateGpuError> {
    if !device.is_cuda() {
        return Err(CalibrateGpuError::NotAGpu(device.to_string()));
    }
    if device.is_emulated() {
        return Err(CalibrateGpuError::Emulated(device.to_string()));
    }
    let info = meta::device_info(device);
    base.describes(&info)
        .map_err(CalibrateGpuError::BaseMismatch)?;
    let provenance = Provenance {
        device: info.name.clone(),
        driver: info.driver.clone().unwrap_or_else(|| "unknown".to_owned()),
        date: meta::rfc3339_utc(std::time::SystemTime::now()),
        tool: format!(
            "tileops calibrate {} ({})",
            env!("CARGO_PKG_VERSION"),
            meta::git_revision()
        ),
    };
    let mut writer = ProfileWriter::from_base(base, provenance);
    let bench = Bench::new(device)?;

    let hbm = base.hbm().theoretical;
    let l2 = info.l2_bytes.unwrap_or(base.device.l2_bytes);
    writer.measured(RoofKey::HBM.as_str(), bench.hbm(hbm, l2, options, log)?)?;

    let fp32 = RoofKey::CUDA_CORE_FP32.as_str();
    if let Some(roof) = base.roof(fp32) {
        writer.measured(fp32, bench.fma(roof.theoretical, options, log)?)?;
    }

    // The tensor cores as mma.sync drives them (tileops's own kernels: no cuBLAS needed).
    if let Some(roof) = base.roof(MMA_SYNC_ROOF) {
        writer.measured(
            MMA_SYNC_ROOF,
            bench.mma_sync(roof.theoretical, options, log)?,
        )?;
    }

    // cuBLAS from tileops's search order (or linked, with `dynamic-linking`), as the GEMM op finds
    // it; not cudarc's probe, which exists in its `dynamic-loading` mode only.
    if tileops::libraries::cublas().is_ok() {
        for dtype in GemmDtype::ALL {
            let Some(roof) = base.roof(dtype.roof()) else {
                log(&format!(
                    "{}: not in the base profile, skipped",
                    dtype.roof()
                ));
                continue;
            };
            let measured = bench.gemm(dtype, roof.theoretical, options, log)?;
            writer.measured(dtype.roof(), measured)?;
        }
    } else {
        log(
            "cuBLAS (libcublas.so) not found: tensor-core roofs carried over from the base profile",
        );
    }
    Ok(writer)
}

/// The GEMM dtypes measured, and how cuBLAS is asked for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GemmDtype {
    F16,
    Bf16,
    Tf32,
}

impl GemmDtype {
    const ALL: [GemmDtype; 3] = [GemmDtype::F16, GemmDtype::Bf16, GemmDtype::Tf32];

    fn roof(self) -> &'static str {
        match self {
            GemmDtype::F16 => RoofKey::TENSOR_CORE_FP16,
            GemmDtype::Bf16 => RoofKey::TENSOR_CORE_BF16,
            GemmDtype::Tf32 => RoofKey::TENSOR_CORE_TF32,
        }
        .as_str()
    }

    fn elem_bytes(self) -> u64 {
        match self {
            GemmDtype::F16 | GemmDtype::Bf16 => 2,
            GemmDtype::Tf32 => 4,
        }
    }

    fn fill_entry(self) -> &'static str {
        match self {
            GemmDtype::F16 => "fill_uniform_f16",
            GemmDtype::Bf16 => "fill_uniform_bf16",
            GemmDtype::Tf32 => "fill_uniform_f32",
        }
    }

    fn data_type(self) -> cublas::sys::cudaDataType {
        match self {
            GemmDtype::F16 => cublas::sys::cudaDataType::CUDA_R_16F,
            GemmDtype::Bf16 => cublas::sys::cudaDataType::CUDA_R_16BF,
            GemmDtype::Tf32 => cublas::sys::cudaDataType::CUDA_R_32F,
        }
    }

    /// fp32 accumulation; for fp32 data, TF32 tensor cores.
    fn compute_type(self) -> cublas::sys::cublasComputeType_t {
        match self {
            GemmDtype::F16 | GemmDtype::Bf16 => {
                cublas::sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
            }
            GemmDtype::Tf32 => cublas::sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        }
    }
}

/// The FMA-chain entry points, by ILP.
const FMA_ENTRIES: [(u64, &str); 5] = [
    (1, "fma_chain_ilp1"),
    (2, "fma_chain_ilp2"),
    (4, "fma_chain_ilp4"),
    (8, "fma_chain_ilp8"),
    (16, "fma_chain_ilp16"),
];
/// FMAs per thread in one FMA-chain launch (ILP × iterations).
const FMAS_PER_THREAD: u64 = 1 << 18;
/// Threads per block of the mma chains (4 warps, one per scheduler).
const MMA_THREADS: u32 = 128;
/// Steps of each mma chain in one timed launch.
const MMA_ITERS: u64 = 1 << 14;
/// Threads per block of the FMA chains and the fills.
const THREADS: u32 = 256;
/// Resident threads per SM on Hopper and Ampere (full occupancy).
const THREADS_PER_SM: u32 = 2048;

/// The device, its context, stream and SM count, and two timing events.
struct Bench<'a> {
    device: &'a Device,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    sm_count: u32,
    start: CudaEvent,
    end: CudaEvent,
}

impl<'a> Bench<'a> {
    fn new(device: &'a Device) -> Result<Self, Error> {
        let (Some(ctx), Some(stream), Some(sm_count)) = (
            device.cuda_context(),
            device.cuda_stream(),
            device.sm_count(),
        ) else {
            return Err(Error::NoDevice {
                reason: format!("the calibration runs on a CUDA device, not {device}"),
            });
        };
        Ok(Bench {
            device,
            start: self_event(ctx)?,
            end: self_event(ctx)?,
            ctx: ctx.clone(),
            stream: stream.clone(),
            sm_count,
        })
    }

    fn function(&self, entry: &'static str) -> Result<CudaFunction, Error> {
        kernels::load(self.device, &CALIBRATE, entry)
    }

    fn sync(&self, what: &str) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| Error::driver(what.to_owned(), e))
    }

    /// Seconds between the start and end events around `work`.
    fn timed(&self, work: impl FnOnce() -> Result<(), Error>) -> Result<f64, Error> {
        self.start
            .record(&self.stream)
            .map_err(|e| Error::driver("recording the start event", e))?;
        work()?;
        self.end
            .record(&self.stream)
            .map_err(|e| Error::driver("recording the end event", e))?;
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(|e| Error::driver("reading the event times", e))?;
        Ok(f64::from(ms) / 1e3)
    }

    fn alloc(&self, bytes: u64, what: &str) -> Result<CudaSlice<u8>, Error> {
        let len = usize::try_from(bytes)
            .map_err(|_| Error::internal(format!("allocating {what}: the size overflows usize")))?;
        self.stream.alloc_zeros::<u8>(len).map_err(|e| {
            Error::device_alloc(
                format!("allocating {bytes} B for {what}"),
                len,
                self.device,
                e,
            )
        })
    }

    fn hbm(
        &self,
        theoretical: f64,
        l2_bytes: u64,
        options: &CalibrateOptions,
        log: &mut dyn FnMut(&str),
    ) -> Result<Measured, CalibrateGpuError> {
        const ELEM: u64 = 16;
        let n = options.hbm_array_bytes / ELEM;
        check_working_set(n * ELEM, l2_bytes)?;
        let a = self.alloc(n * ELEM, "HBM array a")?;
        let mut b = self.alloc(n * ELEM, "HBM array b")?;
        let mut c = self.alloc(n * ELEM, "HBM array c")?;
        let mut sink = self.alloc(4 * 1024, "the read kernel's sink")?;
        let n_arg = n as i64;
        let (write_value, triad_scale, never) = (1.0f32, 0.5f32, -1.0f32);
        let sm_count = self.sm_count;
        let mut best = Vec::new();
        for mix in HbmMix::ALL {
            let (entry, what) = match mix {
                HbmMix::Copy => ("hbm_copy", "hbm copy"),
                HbmMix::Triad => ("hbm_triad", "hbm triad"),
                HbmMix::Read => ("hbm_read", "hbm read"),
                HbmMix::Write => ("hbm_write", "hbm write"),
            };
            let function = self.function(entry)?;
            let bytes = mix.bytes_moved(n, ELEM) as f64;
            let mut mix_seconds = Vec::new();
            for &block in &options.block_sizes {
                let cfg = LaunchConfig {
                    grid_dim: (sm_count * (THREADS_PER_SM / block.max(1)).max(1), 1, 1),
                    block_dim: (block, 1, 1),
                    shared_mem_bytes: 0,
                };
                let mut launch = || -> Result<(), Error> {
                    let mut call = self.stream.launch_builder(&function);
                    match mix {
                        HbmMix::Copy => call.arg(&a).arg(&mut b).arg(&n_arg),
                        HbmMix::Triad => call
                            .arg(&mut c)
                            .arg(&a)
                            .arg(&b)
                            .arg(&triad_scale)
                            .arg(&n_arg),
                        HbmMix::Read => call.arg(&a).arg(&mut sink).arg(&never).arg(&n_arg),
                        HbmMix::Write => call.arg(&mut c).arg(&write_value).arg(&n_arg),
                    };
                    // SAFETY: the arguments match the kernels' signatures in calibrate.cu; every
                    // array holds n float4 elements, the sink 1024 floats (>= one block).
                    unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
                    Ok(())
                };
                launch()?;
                self.sync("warming up the HBM kernels")?;
                let mut seconds = Vec::new();
                for _ in 0..options.hbm_repeats.max(1) {
                    let batch = self.timed(|| {
                        for _ in 0..options.hbm_iterations.max(1) {
                            launch()?;
                        }
                        Ok(())
                    })?;
                    seconds.push(batch / f64::from(options.hbm_iterations.max(1)));
                }
                let rate = best_rate(what, bytes, &seconds)?;
                log(&format!(
                    "{what:<10} block {block:>3}: {:8.1} GB/s ({:.1}% of {:.0})",
                    rate / 1e9,
                    rate / theoretical * 100.0,
                    theoretical / 1e9
                ));
                mix_seconds.extend(seconds);
            }
            best.push((mix, best_rate(what, bytes, &mix_seconds)?));
        }
        let method = format!(
            "float4 copy/triad/read/write kernels, {:.2} GB per array, block sizes {:?}, best of \
             {} launches x {}; envelope of the mixes",
            (n * ELEM) as f64 / 1e9,
            options.block_sizes,
            options.hbm_iterations,
            options.hbm_repeats
        );
        Ok(Measured::hbm(theoretical, &best, &method)?)
    }

    /// Times `entry(float* out, int iters, float a, float b)`, a register-only chain kernel, over
    /// a full-occupancy grid of `block`-thread blocks: warmed up once, then the seconds of
    /// `repeats` launches. Returns `(threads, seconds)`.
    fn time_chains(
        &self,
        entry: &'static str,
        block: u32,
        iters: i32,
        (a, b): (f32, f32),
        repeats: u32,
    ) -> Result<(u64, Vec<f64>), CalibrateGpuError> {
        let blocks = self.sm_count * (THREADS_PER_SM / block);
        let threads = u64::from(blocks) * u64::from(block);
        let mut out = self.alloc(threads * 4, "a chain kernel's output")?;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        let function = self.function(entry)?;
        let mut launch = || -> Result<(), Error> {
            let mut call = self.stream.launch_builder(&function);
            call.arg(&mut out).arg(&iters).arg(&a).arg(&b);
            // SAFETY: fma_chain_* and mma_sync_bf16 take (float* out, int iters, float a,
            // float b); `out` holds one float per thread of the grid.
            unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
            Ok(())
        };
        launch()?;
        self.sync(&format!("warming up {entry}"))?;
        let mut seconds = Vec::new();
        for _ in 0..repeats.max(1) {
            seconds.push(self.timed(&mut launch)?);
        }
        Ok((threads, seconds))
    }

    fn fma(
        &self,
        theoretical: f64,
        options: &CalibrateOptions,
        log: &mut dyn FnMut(&str),
    ) -> Result<Measured, CalibrateGpuError> {
        let mut rates = Vec::new();
        for (ilp, entry) in FMA_ENTRIES {
            let iters = (FMAS_PER_THREAD / ilp) as i32;
            let (threads, seconds) = self.time_chains(
                entry,
                THREADS,
                iters,
                (0.999_999_9, 1.0e-7),
                options.fma_repeats,
            )?;
            let flops = fma_flops(threads, iters as u64, ilp) as f64;
            let rate = best_rate(entry, flops, &seconds)?;
            log(&format!(
                "fma ILP {ilp:>2}: {:8.2} TFLOP/s ({:.1}% of {:.1})",
                rate / 1e12,
                rate / theoretical * 100.0,
                theoretical / 1e12
            ));
            rates.push(rate);
        }
        let method = format!(
            "register-only FMA chains, ILP 1/2/4/8/16, {THREADS_PER_SM} threads per SM, best of {}",
            options.fma_repeats
        );
        Ok(Measured::best_of(
            RoofKey::CUDA_CORE_FP32.as_str(),
            theoretical,
            &rates,
            &method,
        )?)
    }

    /// `mma.sync` m16n8k16 (bf16 in, f32 accumulate): register-only chains, full occupancy of
    /// 4-warp blocks, the best of `fma_repeats` launches.
    fn mma_sync(
        &self,
        theoretical: f64,
        options: &CalibrateOptions,
        log: &mut dyn FnMut(&str),
    ) -> Result<Measured, CalibrateGpuError> {
        let entry = "mma_sync_bf16";
        let (threads, seconds) = self.time_chains(
            entry,
            MMA_THREADS,
            MMA_ITERS as i32,
            (0.5, 0.25),
            options.fma_repeats,
        )?;
        let flops = mma_flops(threads / 32, MMA_ITERS) as f64;
        let rate = best_rate(entry, flops, &seconds)?;
        log(&format!(
            "mma.sync m16n8k16 bf16: {:8.2} TFLOP/s ({:.1}% of {:.1})",
            rate / 1e12,
            rate / theoretical * 100.0,
            theoretical / 1e12
        ));
        let method = format!(
            "register-only mma.sync m16n8k16 bf16->f32 chains, {MMA_CHAINS} per warp, \
             {THREADS_PER_SM} threads per SM, best of {}",
            options.fma_repeats
        );
        Ok(Measured::best_of(
            MMA_SYNC_ROOF,
            theoretical,
            &[rate],
            &method,
        )?)
    }

    /// Fills `buffer` (of `elems` elements) with uniform values in [-1, 1).
    fn fill(
        &self,
        dtype: GemmDtype,
        buffer: &mut CudaSlice<u8>,
        elems: u64,
        seed: u32,
    ) -> Result<(), Error> {
        let cfg = LaunchConfig {
            grid_dim: (self.sm_count * (THREADS_PER_SM / THREADS), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        self.fill_with(dtype, buffer, elems, seed, cfg)
    }

    /// [`Bench::fill`] with a launch configuration of its own.
    fn fill_with(
        &self,
        dtype: GemmDtype,
        buffer: &mut CudaSlice<u8>,
        elems: u64,
        seed: u32,
        cfg: LaunchConfig,
    ) -> Result<(), Error> {
        let entry = dtype.fill_entry();
        let function = self.function(entry)?;
        let n = elems as i64;
        let mut call = self.stream.launch_builder(&function);
        call.arg(buffer).arg(&n).arg(&seed);
        // SAFETY: fill_uniform_*(T* p, long long n, unsigned seed); `buffer` holds n elements of T.
        unsafe { call.launch(cfg) }.map_err(|e| Error::launch(entry, e))?;
        Ok(())
    }

    /// `c = a b` with cublasGemmEx: square column-major `dim` x `dim` operands of `dtype`, f32
    /// alpha = 1 and beta = 0 (as the fp32 compute types require). Enqueued, not synchronised.
    fn square_gemm(
        &self,
        blas: &CudaBlas,
        dtype: GemmDtype,
        dim: i32,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        c: &CudaSlice<u8>,
    ) -> Result<(), tileops::cudarc::cublas::result::CublasError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _ra) = a.device_ptr(&self.stream);
        let (pb, _rb) = b.device_ptr(&self.stream);
        let (pc, _rc) = c.device_ptr(&self.stream);
        // SAFETY: the callers allocate each operand with dim * dim elements of `dtype`.
        unsafe {
            cublas::result::gemm_ex(
                *blas.handle(),
                cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                dim,
                dim,
                dim,
                (&alpha as *const f32).cast::<c_void>(),
                pa as *const c_void,
                dtype.data_type(),
                dim,
                pb as *const c_void,
                dtype.data_type(),
                dim,
                (&beta as *const f32).cast::<c_void>(),
                pc as *mut c_void,
                dtype.data_type(),
                dim,
                dtype.compute_type(),
                cublas::sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
    }

    fn gemm(
        &self,
        dtype: GemmDtype,
        theoretical: f64,
        options: &CalibrateOptions,
        log: &mut dyn FnMut(&str),
    ) -> Result<Measured, CalibrateGpuError> {
        let blas = CudaBlas::new(self.stream.clone())
            .map_err(|e| Error::blas("creating a cuBLAS handle", e))?;
        let mut sizes = Vec::new();
        for &size in &options.gemm_sizes {
            let elems = size * size;
            let bytes = elems * dtype.elem_bytes();
            let mut a = self.alloc(bytes, "GEMM operand a")?;
            let mut b = self.alloc(bytes, "GEMM operand b")?;
            let c = self.alloc(bytes, "GEMM result c")?;
            self.fill(dtype, &mut a, elems, 1)?;
            self.fill(dtype, &mut b, elems, 2)?;
            let dim = i32::try_from(size).map_err(|_| Error::InvalidParam {
                op: "calibrate",
                field: "gemm_sizes",
                value: size.to_string(),
                reason: "must fit in an i32 (cuBLAS's dimension type)".to_owned(),
            })?;
            let call = || {
                self.square_gemm(&blas, dtype, dim, &a, &b, &c)
                    .map_err(|e| Error::blas(format!("cublasGemmEx ({})", dtype.roof()), e))
            };
            // Warm-up, and an estimate of one call for sizing the loop.
            call()?;
            self.sync("warming up cuBLAS")?;
            let per_call = self.timed(|| (0..3).try_for_each(|_| call()))? / 3.0;
            std::thread::sleep(Duration::from_secs_f64(options.gemm_cooldown_s.max(0.0)));
            let window = options.gemm_burst_window.max(1);
            let n = ((options.gemm_sustained_s / per_call.max(1e-6)) as usize)
                .clamp(4 * window, 20_000);
            let events = (0..=n)
                .map(|_| self_event(&self.ctx))
                .collect::<Result<Vec<_>, _>>()?;
            let started = Instant::now();
            events[0]
                .record(&self.stream)
                .map_err(|e| Error::driver("recording an event", e))?;
            for event in &events[1..] {
                call()?;
                event
                    .record(&self.stream)
                    .map_err(|e| Error::driver("recording an event", e))?;
            }
            self.sync("running the GEMM loop")?;
            let seconds = events
                .windows(2)
                .map(|w| w[0].elapsed_ms(&w[1]).map(|ms| f64::from(ms) / 1e3))
                .collect::<Result<Vec<f64>, _>>()
                .map_err(|e| Error::driver("reading the event times", e))?;
            let what = format!("{} {size}^3", dtype.roof());
            let flops = gemm_flops(size, size, size) as f64;
            let rates = GemmRates::from_series(&what, flops, &seconds, window)?;
            log(&format!(
                "{what}: burst {:.1} TFLOP/s ({:.1}%), sustained {:.1} TFLOP/s ({:.1}%), {n} calls \
                 in {:.1} s",
                rates.burst / 1e12,
                rates.burst / theoretical * 100.0,
                rates.sustained / 1e12,
                rates.sustained / theoretical * 100.0,
                started.elapsed().as_secs_f64()
            ));
            sizes.push(rates);
        }
        let method = format!(
            "cuBLAS GemmEx {:?}^3, uniform operands; burst = best of the first {} calls after {} s \
             idle, sustained = median of the second half of a {} s loop",
            options.gemm_sizes,
            options.gemm_burst_window,
            options.gemm_cooldown_s,
            options.gemm_sustained_s
        );
        Ok(Measured::gemm(dtype.roof(), theoretical, &sizes, &method)?)
    }
}

/// Float4 elements of each array of the kernel check: four unrolled steps of its grid and a tail,
/// so both loops of every HBM kernel run.
const CHECK_ELEMS: u64 = 4 * (CHECK_BLOCKS as u64 * CHECK_THREADS as u64) + 37;
/// Blocks of every kernel-check launch.
const CHECK_BLOCKS: u32 = 2;
/// Threads per block of every kernel-check launch.
const CHECK_THREADS: u32 = 128;
/// Steps of each FMA chain in the kernel check.
const CHECK_FMA_ITERS: u32 = 48;
/// Steps of each mma chain in the kernel check.
const CHECK_MMA_ITERS: u32 = 12;
/// The kernel check's square GEMM size.
const CHECK_GEMM: u64 = 16;

/// Checks calibrate's kernels without timing anything: each microbenchmark kernel runs once on a
/// tiny working set (a few KB, a 2 x 128 grid) and its result is compared with its host twin —
/// `hbm_copy` copies its input exactly, `hbm_triad` gives `b + s * c`, `hbm_read` finds the sum its
/// twin computes and writes nothing else, `hbm_write` fills, every `fma_chain_ilp*` gives the host
/// chain, every `fill_uniform_*` the host hash in [-1, 1) — then, when cuBLAS is present, one
/// 16 x 16 x 16 `GemmEx` per dtype (fp16, bf16, tf32) is compared with a host GEMM of its operands.
///
/// This is what `calibrate` runs on an emulated device, where a profile would be fake figures; it
/// works on any GPU. Returns one line per check passed (also sent to `log`).
///
/// # Errors
/// [`CalibrateGpuError::NotAGpu`] on the CPU, [`CalibrateGpuError::Cuda`] when a call fails,
/// [`CalibrateGpuError::Check`] for the first wrong result.
pub fn check_kernels(
    device: &Device,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<String>, CalibrateGpuError> {
    let ctx = device
        .cuda_context()
        .ok_or_else(|| CalibrateGpuError::NotAGpu(device.to_string()))?;
    ctx.bind_to_thread()
        .map_err(|e| Error::driver("binding the context", e))?;
    let bench = Bench::new(device)?;
    let mut passed = Vec::new();
    let mut pass = |line: String| {
        log(&line);
        passed.push(line);
    };
    bench.check_hbm(&mut pass)?;
    bench.check_fma(&mut pass)?;
    bench.check_mma(&mut pass)?;
    bench.check_fills(&mut pass)?;
    // As above: cuBLAS where tileops finds it.
    if tileops::libraries::cublas().is_ok() {
        for dtype in GemmDtype::ALL {
            bench.check_gemm(dtype, &mut pass)?;
        }
    } else {
        pass("cuBLAS (libcublas.so) not found: GemmEx not checked".to_owned());
    }
    Ok(passed)
}

/// A kernel-check failure.
fn wrong(entry: &str, problem: String) -> CalibrateGpuError {
    CalibrateGpuError::Check {
        entry: entry.to_owned(),
        problem,
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Values of `dtype`'s elements as f32.
fn elements(dtype: GemmDtype, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        GemmDtype::Tf32 => f32s(bytes),
        GemmDtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| tileops::half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        GemmDtype::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| tileops::half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    }
}

/// The first index where `ok` fails, as a problem sentence.
fn first_bad(
    got: &[f32],
    want: impl Fn(usize) -> f32,
    ok: impl Fn(f32, f32, usize) -> bool,
) -> Option<String> {
    got.iter().enumerate().find_map(|(i, &g)| {
        let w = want(i);
        (!ok(g, w, i)).then(|| format!("element {i} is {g}, expected {w}"))
    })
}

impl Bench<'_> {
    fn check_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (CHECK_BLOCKS, 1, 1),
            block_dim: (CHECK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Launches a kernel-check call on the check's grid and waits for it.
    fn launch_check(&self, entry: &str, mut call: LaunchArgs<'_>) -> Result<(), Error> {
        // SAFETY: every caller pushes the arguments of the entry's signature in calibrate.cu:
        // hbm_* get arrays of CHECK_ELEMS float4 elements (hbm_read a sink of 1024 floats), the
        // FMA chains one float per thread of the check's grid.
        unsafe { call.launch(self.check_config()) }.map_err(|e| Error::launch(entry, e))?;
        self.sync(entry)
    }

    fn upload(&self, bytes: &[u8], what: &str) -> Result<CudaSlice<u8>, Error> {
        self.stream
            .clone_htod(bytes)
            .map_err(|e| Error::driver(format!("copying {what} to the device"), e))
    }

    fn download(&self, slice: &CudaSlice<u8>, what: &str) -> Result<Vec<u8>, Error> {
        self.stream
            .clone_dtoh(slice)
            .map_err(|e| Error::driver(format!("copying {what} to the host"), e))
    }

    /// `hbm_copy`, `hbm_triad`, `hbm_read` and `hbm_write`, once each.
    fn check_hbm(&self, pass: &mut dyn FnMut(String)) -> Result<(), CalibrateGpuError> {
        let n = CHECK_ELEMS as usize;
        let n_arg = CHECK_ELEMS as i64;
        let stride = u64::from(CHECK_BLOCKS * CHECK_THREADS);
        // Integers (exact sums for hbm_read) and uniform values (hbm_triad's second operand).
        let ints: Vec<f32> = (0..4 * n).map(|k| (k / 4) as f32).collect();
        let uniform: Vec<f32> = (0..4 * n as u64).map(|k| uniform_value(k, 7)).collect();
        let a = self.upload(&f32_bytes(&ints), "hbm_copy's input")?;
        let c_in = self.upload(&f32_bytes(&uniform), "hbm_triad's input")?;
        let mut b = self.alloc(CHECK_ELEMS * 16, "hbm_copy's output")?;
        let mut out = self.alloc(CHECK_ELEMS * 16, "hbm_triad's output")?;
        let mut sink = self.alloc(4 * 1024, "hbm_read's sink")?;
        let function = self.function("hbm_copy")?;
        let mut call = self.stream.launch_builder(&function);
        call.arg(&a).arg(&mut b).arg(&n_arg);
        self.launch_check("hbm_copy", call)?;
        let copied = f32s(&self.download(&b, "hbm_copy's output")?);
        if let Some(problem) = first_bad(&copied, |i| ints[i], |g, w, _| g == w) {
            return Err(wrong("hbm_copy", problem));
        }
        pass(format!("hbm_copy: {n} float4 copied exactly"));

        let scale = 0.5f32;
        let function = self.function("hbm_triad")?;
        let mut call = self.stream.launch_builder(&function);
        call.arg(&mut out)
            .arg(&a)
            .arg(&c_in)
            .arg(&scale)
            .arg(&n_arg);
        self.launch_check("hbm_triad", call)?;
        let triad = f32s(&self.download(&out, "hbm_triad's output")?);
        let want = |i: usize| ints[i] + scale * uniform[i];
        let ok = |g: f32, w: f32, i: usize| {
            close_to(g, w, ints[i].abs() + (scale * uniform[i]).abs(), 1e-6)
        };
        if let Some(problem) = first_bad(&triad, want, ok) {
            return Err(wrong("hbm_triad", problem));
        }
        pass(format!("hbm_triad: {n} float4 equal b + s * c"));

        // The sum of global thread 0 is passed as `never`, so thread 0 (of block 0) stores it to
        // sink[0]; the sums of the others differ, so nothing else is written.
        let elements: Vec<[f32; 4]> = ints
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect();
        let target = hbm_read_sum(&elements, 0, stride);
        let function = self.function("hbm_read")?;
        let mut call = self.stream.launch_builder(&function);
        call.arg(&a).arg(&mut sink).arg(&target).arg(&n_arg);
        self.launch_check("hbm_read", call)?;
        let sunk = f32s(&self.download(&sink, "hbm_read's sink")?);
        let want_sink = |i: usize| if i == 0 { target } else { 0.0 };
        if let Some(problem) = first_bad(&sunk, want_sink, |g, w, _| g == w) {
            return Err(wrong("hbm_read", format!("sink {problem}")));
        }
        pass(format!(
            "hbm_read: thread 0 summed {target} as its host twin, nothing else written"
        ));

        let value = 1.5f32;
        let function = self.function("hbm_write")?;
        let mut call = self.stream.launch_builder(&function);
        call.arg(&mut out).arg(&value).arg(&n_arg);
        self.launch_check("hbm_write", call)?;
        let written = f32s(&self.download(&out, "hbm_write's output")?);
        if let Some(problem) = first_bad(&written, |_| value, |g, w, _| g == w) {
            return Err(wrong("hbm_write", problem));
        }
        pass(format!("hbm_write: {n} float4 set to {value}"));
        Ok(())
    }

    /// Every `fma_chain_ilp*`, once each.
    fn check_fma(&self, pass: &mut dyn FnMut(String)) -> Result<(), CalibrateGpuError> {
        let threads = u64::from(CHECK_BLOCKS * CHECK_THREADS);
        let mut out = self.alloc(threads * 4, "the FMA chains' output")?;
        let (a, b) = (0.999_999_9f32, 1.0e-7f32);
        let iters = CHECK_FMA_ITERS as i32;
        for (ilp, entry) in FMA_ENTRIES {
            self.stream
                .memset_zeros(&mut out)
                .map_err(|e| Error::driver("clearing the FMA chains' output", e))?;
            let function = self.function(entry)?;
            let mut call = self.stream.launch_builder(&function);
            call.arg(&mut out).arg(&iters).arg(&a).arg(&b);
            self.launch_check(entry, call)?;
            let got = f32s(&self.download(&out, "the FMA chains' output")?);
            let want = |i: usize| {
                let thread = i as u32 % CHECK_THREADS;
                fma_chain_value(thread, CHECK_FMA_ITERS, ilp as u32, a, b)
            };
            if let Some(problem) = first_bad(&got, want, |g, w, _| close_to(g, w, w, 1e-5)) {
                return Err(wrong(entry, problem));
            }
            pass(format!(
                "{entry}: {threads} threads x {ilp} chains of {CHECK_FMA_ITERS} FMAs equal the \
                 host's"
            ));
        }
        Ok(())
    }

    /// `mma_sync_bf16` once: every thread's sum equals the host twin's, exactly (powers of two).
    fn check_mma(&self, pass: &mut dyn FnMut(String)) -> Result<(), CalibrateGpuError> {
        let entry = "mma_sync_bf16";
        let threads = u64::from(CHECK_BLOCKS * CHECK_THREADS);
        let mut out = self.alloc(threads * 4, "the mma chains' output")?;
        let (a, b) = (0.5f32, 0.25f32);
        let iters = CHECK_MMA_ITERS as i32;
        let function = self.function(entry)?;
        let mut call = self.stream.launch_builder(&function);
        call.arg(&mut out).arg(&iters).arg(&a).arg(&b);
        self.launch_check(entry, call)?;
        let got = f32s(&self.download(&out, "the mma chains' output")?);
        let want = mma_sync_value(CHECK_MMA_ITERS, a, b);
        if let Some(problem) = first_bad(&got, |_| want, |g, w, _| g == w) {
            return Err(wrong(entry, problem));
        }
        pass(format!(
            "{entry}: {threads} threads x {MMA_CHAINS} chains of {CHECK_MMA_ITERS} mma.sync equal \
             the host's"
        ));
        Ok(())
    }

    /// Every `fill_uniform_*`, once each.
    fn check_fills(&self, pass: &mut dyn FnMut(String)) -> Result<(), CalibrateGpuError> {
        let n = CHECK_ELEMS;
        let seed = 3;
        for dtype in GemmDtype::ALL {
            let entry = dtype.fill_entry();
            let mut buffer = self.alloc(n * dtype.elem_bytes(), entry)?;
            self.fill_with(dtype, &mut buffer, n, seed, self.check_config())?;
            self.sync(entry)?;
            let got = elements(dtype, &self.download(&buffer, entry)?);
            // f32 is exact; a rounded element is within half an ulp of 1 of its f32 value (and
            // may round up to 1.0 itself).
            let (tolerance, top) = match dtype {
                GemmDtype::Tf32 => (0.0, 1.0 - f32::EPSILON / 2.0),
                GemmDtype::F16 => (1.0 / 2048.0, 1.0),
                GemmDtype::Bf16 => (1.0 / 256.0, 1.0),
            };
            let ok = |g: f32, w: f32, _| (-1.0..=top).contains(&g) && (g - w).abs() <= tolerance;
            if let Some(problem) = first_bad(&got, |i| uniform_value(i as u64, seed), ok) {
                return Err(wrong(entry, problem));
            }
            pass(format!(
                "{entry}: {n} values in [-1, 1) as the host hash gives them"
            ));
        }
        Ok(())
    }

    /// One tiny `GemmEx` of `dtype` against a host GEMM of its operands.
    fn check_gemm(
        &self,
        dtype: GemmDtype,
        pass: &mut dyn FnMut(String),
    ) -> Result<(), CalibrateGpuError> {
        let what = format!("cublasGemmEx ({})", dtype.roof());
        let blas = CudaBlas::new(self.stream.clone())
            .map_err(|e| Error::blas("creating a cuBLAS handle", e))?;
        let size = CHECK_GEMM;
        let elems = size * size;
        let bytes = elems * dtype.elem_bytes();
        let mut a = self.alloc(bytes, "GEMM operand a")?;
        let mut b = self.alloc(bytes, "GEMM operand b")?;
        let c = self.alloc(bytes, "GEMM result c")?;
        self.fill_with(dtype, &mut a, elems, 1, self.check_config())?;
        self.fill_with(dtype, &mut b, elems, 2, self.check_config())?;
        let dim = size as i32;
        self.square_gemm(&blas, dtype, dim, &a, &b, &c)
            .map_err(|e| Error::blas(what.clone(), e))?;
        self.sync("running the GEMM check")?;
        let (ha, hb) = (
            elements(dtype, &self.download(&a, "GEMM operand a")?),
            elements(dtype, &self.download(&b, "GEMM operand b")?),
        );
        let hc = elements(dtype, &self.download(&c, "GEMM result c")?);
        let n = size as usize;
        // Column-major: c[i + j n] = sum_k a[i + k n] b[k + j n]. The operands are rounded (to
        // the dtype, or to TF32) and so is the result: within 1% of the sum of |a b|.
        let at = |i: usize, j: usize| {
            (0..n).fold((0.0f64, 0.0f64), |(sum, mag), k| {
                let p = f64::from(ha[i + k * n]) * f64::from(hb[k + j * n]);
                (sum + p, mag + p.abs())
            })
        };
        for (index, &got) in hc.iter().enumerate() {
            let (want, magnitude) = at(index % n, index / n);
            if !close_to(got, want as f32, magnitude as f32, 1e-2) {
                return Err(wrong(
                    &what,
                    format!(
                        "c[{index}] is {got}, the host GEMM gives {want:.6} (of magnitude \
                         {magnitude:.3})"
                    ),
                ));
            }
        }
        pass(format!(
            "{what}: {size}x{size}x{size} equals the host GEMM of its operands"
        ));
        Ok(())
    }
}

/// A timing event (`CU_EVENT_DEFAULT`: `new_event(None)` would disable timing).
fn self_event(ctx: &Arc<CudaContext>) -> Result<CudaEvent, Error> {
    ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(|e| Error::driver("creating a timing event", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_refused_with_a_clear_error() {
        let base = Profile::builtin("h200").unwrap();
        let err = calibrate(
            &Device::cpu(),
            &base,
            &CalibrateOptions::quick(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(matches!(err, CalibrateGpuError::NotAGpu(_)), "{err}");
        assert!(err.to_string().contains("needs a CUDA GPU"), "{err}");
        let err = check_kernels(&Device::cpu(), &mut |_| {}).unwrap_err();
        assert!(matches!(err, CalibrateGpuError::NotAGpu(_)), "{err}");
        let emulated = CalibrateGpuError::Emulated("cuda:0 (cuda-emu)".into()).to_string();
        assert!(emulated.contains("fake figures"), "{emulated}");
    }

    #[test]
    fn the_kernel_check_covers_every_microbenchmark_entry() {
        // Every entry of calibrate.cu is checked: the HBM mixes, the FMA chains, the fills.
        let checked: Vec<&str> = ["hbm_copy", "hbm_triad", "hbm_read", "hbm_write"]
            .into_iter()
            .chain(FMA_ENTRIES.iter().map(|(_, entry)| *entry))
            .chain(["mma_sync_bf16"])
            .chain(GemmDtype::ALL.iter().map(|d| d.fill_entry()))
            .collect();
        for entry in CALIBRATE.entries {
            assert!(
                checked.contains(&entry.name),
                "{} is not checked",
                entry.name
            );
        }
        // Both loops of the HBM kernels run: more than four grid strides, not a multiple of one.
        let stride = u64::from(CHECK_BLOCKS * CHECK_THREADS);
        assert!(CHECK_ELEMS > 4 * stride && !CHECK_ELEMS.is_multiple_of(stride));
    }

    #[test]
    fn default_working_set_is_off_the_l2() {
        let o = CalibrateOptions::default();
        assert!(check_working_set(o.hbm_array_bytes, 62_914_560).is_ok());
        assert_eq!(o.block_sizes, [128, 256, 512]);
        for (ilp, entry) in FMA_ENTRIES {
            assert_eq!(
                FMAS_PER_THREAD % (16 * ilp),
                0,
                "{entry}: whole unrolled steps"
            );
            assert!(CALIBRATE.entries.iter().any(|e| e.name == entry));
        }
        for dtype in GemmDtype::ALL {
            assert!(
                CALIBRATE
                    .entries
                    .iter()
                    .any(|e| e.name == dtype.fill_entry())
            );
        }
    }
}
