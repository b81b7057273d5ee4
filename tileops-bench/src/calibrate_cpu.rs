//! Calibrating the host: the ceilings the CPU backend's rows are priced against.
//!
//! `calibrate --cpu` measures, on every core at once (one `std::thread::scope` thread per core,
//! each on its own slice):
//!
//! - **memory bandwidth**: the four STREAM mixes (copy, triad, read, write) over `f64` arrays of at
//!   least 8× the last-level cache each (its size read from
//!   `/sys/devices/system/cpu/cpu0/cache`), best pass of several; the envelope (the best mix) is
//!   the effective memory roof, every mix's fraction is kept beside it, as on a GPU;
//! - **the f64 and f32 FMA rates**: independent `mul_add` chains the compiler vectorizes (AVX2 + FMA
//!   when the CPU has them, checked at run time), their results checked against the chains'
//!   closed form so that nothing was optimised away, measured on one core and on all of them.
//!
//! A host has no spec sheet to take `theoretical` from, so the profile states what it uses
//! instead: for memory, the cache-resident read rate measured the same way (a row's bytes cannot
//! move faster than that, so a row above it is still impossible, while a small row served from
//! the cache is not called a formula error); for the FMA roofs, the all-core rate itself
//! (calibration 1). The profile says `kind: cpu` and matches the device name the CPU backend
//! records ([`meta::device_info`]): `cpu: <model name from /proc/cpuinfo> (<n> threads)`. Its
//! default place is [`default_path`], where the roofline tool also looks ([`discover`]).
//!
//! The CPU backend runs each op's f64 reference on one thread (the GEMM reference on all of
//! them): priced against this profile, a row's efficiency says how close that reference comes to
//! the host's memory or f64 FMA roof, not how fast the op would run on a GPU.
//!
//! ```
//! use tileops_bench::calibrate_cpu::{parse_cache_size, slug};
//!
//! assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
//! assert_eq!(parse_cache_size("1M"), Some(1 << 20));
//! assert_eq!(slug("AMD EPYC 7B13 64-Core Processor"), "amd-epyc-7b13-64-core-processor");
//! ```

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::calibrate::{CalibrateError, HbmMix, Measured, ProfileWriter, Provenance};
use super::cli::meta;
use super::profile::{DeviceKind, DeviceSpec, Profile, ProfileError};
use tileops::Device;
use tileops::registry::RoofKey;

/// The smallest array, bytes, whatever the cache: below it a pass is too short to time well.
const MIN_ARRAY_BYTES: u64 = 64 << 20;
/// How many times the last-level cache each array is, at least.
const LLC_MULTIPLE: u64 = 8;

/// What is known about the host before measuring it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    /// The CPU model (`/proc/cpuinfo` `model name`).
    pub model: String,
    /// The device name the CPU backend records, which the profile matches.
    pub device_name: String,
    /// Threads measured with: one per available core.
    pub threads: usize,
    /// The last-level cache, bytes.
    pub llc_bytes: u64,
    /// The per-core L2 (or the smallest unified level), bytes: the cache-resident working set.
    pub l2_bytes: u64,
}

/// The host could not be described or measured.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The cache sizes could not be read.
    #[error("cannot read the cache sizes under {dir}: {problem}")]
    Cache {
        /// The directory read.
        dir: String,
        /// What went wrong.
        problem: String,
    },
    /// A measurement was refused.
    #[error(transparent)]
    Calibrate(#[from] CalibrateError),
    /// The profile could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The written profile does not load back.
    #[error("the written profile does not load back: {0}")]
    LoadBack(#[from] ProfileError),
    /// An FMA chain did not compute what it must: it was optimised away or miscompiled.
    #[error("{what}: the chains ended at {got}, not the expected {expected}: {problem}")]
    Check {
        /// The benchmark.
        what: String,
        /// The value found.
        got: f64,
        /// The value expected.
        expected: f64,
        /// What that means.
        problem: &'static str,
    },
}

/// `"32768K"`, `"1M"`, `"512"`: a sysfs cache size, in bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let scale = match unit.trim() {
        "" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// `(level, size)` of every data or unified cache under a sysfs `cpuN/cache` directory.
///
/// # Errors
/// [`HostError::Cache`] when the directory cannot be read or lists no such cache.
pub fn cache_levels(dir: &Path) -> Result<Vec<(u32, u64)>, HostError> {
    let err = |problem: String| HostError::Cache {
        dir: dir.display().to_string(),
        problem,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| err(e.to_string()))?;
    let mut levels = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let read = |name: &str| std::fs::read_to_string(path.join(name)).ok();
        if read("type").is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let level = read("level").and_then(|l| l.trim().parse().ok());
        let size = read("size").and_then(|s| parse_cache_size(&s));
        if let (Some(level), Some(size)) = (level, size) {
            levels.push((level, size));
        }
    }
    levels.sort_unstable();
    if levels.is_empty() {
        return Err(err("no data or unified cache listed".into()));
    }
    Ok(levels)
}

/// The host as the CPU backend sees it: model, recorded device name, cores and caches.
///
/// # Errors
/// [`HostError::Cache`] when the cache sizes cannot be read.
pub fn host_info() -> Result<HostInfo, HostError> {
    let device_name = meta::device_info(&Device::cpu()).name;
    let model = meta::cpu_model();
    let levels = cache_levels(Path::new("/sys/devices/system/cpu/cpu0/cache"))?;
    let llc_bytes = levels.iter().map(|&(_, s)| s).max().unwrap_or(0);
    let l2_bytes = levels
        .iter()
        .find(|&&(level, _)| level >= 2)
        .or(levels.first())
        .map_or(llc_bytes, |&(_, s)| s);
    Ok(HostInfo {
        model,
        device_name,
        threads: std::thread::available_parallelism().map_or(1, usize::from),
        llc_bytes,
        l2_bytes,
    })
}

/// How long to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOptions {
    /// Timed passes per memory mix (the best counts).
    pub passes: usize,
    /// Timed repetitions per FMA measurement (the best counts).
    pub fma_reps: usize,
    /// Chain steps per FMA repetition and thread.
    pub fma_steps: u64,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            passes: 10,
            fma_reps: 7,
            fma_steps: 4_000_000,
        }
    }
}

impl HostOptions {
    /// A short pass to check the setup (the working set stays above the cache: fewer passes).
    pub fn quick() -> Self {
        HostOptions {
            passes: 3,
            fma_reps: 3,
            fma_steps: 1_000_000,
        }
    }
}

/// What [`measure`] found, in bytes/s and FLOP/s.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRates {
    /// Best rate of each memory mix, all threads, arrays of [`HostRates::array_bytes`].
    pub memory: Vec<(HbmMix, f64)>,
    /// Read rate, one thread, same arrays.
    pub memory_read_one_core: f64,
    /// Read rate, all threads, each over a slice a quarter of the L2: the cache-resident ceiling.
    pub cache_read: f64,
    /// Bytes per array in the memory mixes.
    pub array_bytes: u64,
    /// f64 FMA FLOP/s on one core, and on all threads.
    pub fma_f64: (f64, f64),
    /// f32 FMA FLOP/s on one core, and on all threads.
    pub fma_f32: (f64, f64),
    /// Which instructions ran the chains (`"AVX2+FMA"`, `"portable mul_add"`).
    pub fma_isa: &'static str,
    /// Threads.
    pub threads: usize,
}

/// Measures the host's memory mixes and FMA rates; `progress` gets one line per measurement.
///
/// # Errors
/// [`HostError::Check`] when an FMA chain's result is wrong, [`HostError::Calibrate`] for a
/// non-positive timing.
pub fn measure(
    info: &HostInfo,
    options: &HostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<HostRates, HostError> {
    let threads = info.threads.max(1);
    let array_bytes = (info.llc_bytes * LLC_MULTIPLE).max(MIN_ARRAY_BYTES);
    let n = (array_bytes / 8) as usize;
    // First touch on every thread, slice by slice, as the timed passes will use them.
    let mut a = vec![0.0f64; n];
    let mut b = vec![0.0f64; n];
    let mut c = vec![0.0f64; n];
    parallel3(threads, &mut a, &mut b, &mut c, |a, b, c| {
        a.fill(1.0);
        b.fill(2.0);
        c.fill(0.5);
    });

    let mut memory = Vec::new();
    for mix in HbmMix::ALL {
        let bytes = mix.bytes_moved(n as u64, 8) as f64;
        let seconds = best_seconds(options.passes, || {
            parallel3(threads, &mut a, &mut b, &mut c, |a, b, c| {
                run_mix(mix, a, b, c)
            });
        });
        let rate = rate(&format!("memory {}", mix.name()), bytes, seconds)?;
        progress(&format!(
            "memory {:<5} {:>8.2} GB/s ({threads} threads, 3 x {} MiB arrays)",
            mix.name(),
            rate / 1e9,
            array_bytes >> 20
        ));
        memory.push((mix, rate));
    }
    let one = best_seconds(options.passes, || {
        black_box(read_sum(black_box(&a)));
    });
    let memory_read_one_core = rate("memory read, one core", n as f64 * 8.0, one)?;
    progress(&format!(
        "memory read  {:>8.2} GB/s (one core)",
        memory_read_one_core / 1e9
    ));
    drop((a, b, c));

    // The cache-resident ceiling: each thread re-reads a slice a quarter of its L2.
    let slice = ((info.l2_bytes / 4 / 8) as usize).max(1024);
    let mut hot = vec![1.0f64; slice * threads];
    let sweeps = ((256u64 << 20) / (slice as u64 * 8)).max(1) as usize;
    let seconds = best_seconds(options.passes, || {
        parallel1(threads, &mut hot, |part| {
            for _ in 0..sweeps {
                black_box(read_sum(black_box(part)));
            }
        });
    });
    let cache_read = rate(
        "cache-resident read",
        (slice * threads * sweeps * 8) as f64,
        seconds,
    )?;
    progress(&format!(
        "cache read   {:>8.2} GB/s ({threads} threads, {} KiB each)",
        cache_read / 1e9,
        (slice * 8) >> 10
    ));

    let isa = fma_isa();
    let fma_f64 = (
        fma_rate::<f64>(1, options, isa)?,
        fma_rate::<f64>(threads, options, isa)?,
    );
    let fma_f32 = (
        fma_rate::<f32>(1, options, isa)?,
        fma_rate::<f32>(threads, options, isa)?,
    );
    for (name, (one, all)) in [("f64", fma_f64), ("f32", fma_f32)] {
        progress(&format!(
            "fma {name}      {:>8.2} GFLOP/s on one core, {:.2} on {threads} threads ({})",
            one / 1e9,
            all / 1e9,
            isa.name()
        ));
    }
    Ok(HostRates {
        memory,
        memory_read_one_core,
        cache_read,
        array_bytes,
        fma_f64,
        fma_f32,
        fma_isa: isa.name(),
        threads,
    })
}

/// The profile of the host from its measured rates (see the module docs for what `theoretical`
/// means on a host).
///
/// # Errors
/// [`CalibrateError`] when a rate is not positive, or a memory mix beat the cache-resident read.
pub fn writer(
    info: &HostInfo,
    rates: &HostRates,
    provenance: Provenance,
) -> Result<ProfileWriter, CalibrateError> {
    let device = DeviceSpec {
        name: format!("{} (host, {} threads)", info.model, rates.threads),
        kind: DeviceKind::Cpu,
        patterns: vec![info.device_name.clone()],
        compute_capability: None,
        l2_bytes: info.llc_bytes,
    };
    let mut w = ProfileWriter::new(device, provenance);
    let memory = Measured::hbm(
        rates.cache_read,
        &rates.memory,
        &format!(
            "DRAM: STREAM mixes over 3 x {} MiB f64 arrays ({}x the {} MiB last-level cache), {} \
             threads, best of the passes; one core reads {:.2} GB/s. theoretical = the \
             cache-resident read rate (no spec sheet on a host)",
            rates.array_bytes >> 20,
            rates.array_bytes / info.llc_bytes.max(1),
            info.llc_bytes >> 20,
            rates.threads,
            rates.memory_read_one_core / 1e9
        ),
    )?;
    w.measured(RoofKey::HBM.as_str(), memory)?;
    let fma = [
        (RoofKey::CPU_FP64.as_str(), rates.fma_f64),
        (RoofKey::CPU_FP32.as_str(), rates.fma_f32),
    ];
    for (key, (one, all)) in fma {
        let roof = Measured::best_of(
            key,
            all,
            &[all],
            &format!(
                "{} FMA chains, {} threads: {:.2} GFLOP/s ({:.2} on one core, x{} cores = {:.2}). \
                 theoretical = this measurement (no spec sheet on a host)",
                rates.fma_isa,
                rates.threads,
                all / 1e9,
                one / 1e9,
                rates.threads,
                one * rates.threads as f64 / 1e9
            ),
        )?;
        w.measured(key, roof)?;
    }
    Ok(w)
}

/// Measures the host and writes its profile to `out` (default [`default_path`]), then loads it
/// back, so it passes the checks any profile does. Returns the path and the loaded profile.
///
/// # Errors
/// [`HostError`] when the host cannot be described or measured, or the file written or loaded.
pub fn calibrate_host(
    out: Option<&Path>,
    options: &HostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, Profile), HostError> {
    let info = host_info()?;
    progress(&format!(
        "host `{}`: {} threads, last-level cache {} MiB, L2 {} KiB; profile matches `{}`",
        info.model,
        info.threads,
        info.llc_bytes >> 20,
        info.l2_bytes >> 10,
        info.device_name
    ));
    let rates = measure(&info, options, progress)?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned());
    let provenance = Provenance {
        device: info.device_name.clone(),
        driver: format!("none (host CPU, {} kernel {kernel})", std::env::consts::OS),
        date: meta::rfc3339_utc(std::time::SystemTime::now()),
        tool: format!(
            "tileops calibrate --cpu {} ({})",
            env!("CARGO_PKG_VERSION"),
            meta::git_revision()
        ),
    };
    let yaml = writer(&info, &rates, provenance)?.to_yaml()?;
    let path = out.map_or_else(|| default_path(&info), Path::to_path_buf);
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| HostError::Io { path, source }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(&path, yaml).map_err(io(&path))?;
    let profile = Profile::from_path(&path)?;
    Ok((path, profile))
}

/// A file-name-safe form of a device name: lowercase ASCII letters and digits, runs of anything
/// else as one `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// Where calibrated host profiles live: `$CARGO_TARGET_DIR/profiles`, else `target/profiles`
/// under the working directory.
pub fn profiles_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("profiles")
}

/// The default file of a host's profile: `<profiles_dir>/host-<slug of the device name>.yaml`.
pub fn default_path(info: &HostInfo) -> PathBuf {
    profiles_dir().join(format!("host-{}.yaml", slug(&info.model)))
}

/// Every host profile (`host-*.yaml`) in `dir`, sorted by file name; none when `dir` does not
/// exist.
///
/// # Errors
/// A [`ProfileError`] for a file there that does not load: a broken calibration is reported, not
/// skipped.
pub fn discover(dir: &Path) -> Result<Vec<Profile>, ProfileError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ProfileError::Io {
                path: dir.display().to_string(),
                source,
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("host-") && n.ends_with(".yaml"))
        })
        .collect();
    paths.sort();
    paths.iter().map(Profile::from_path).collect()
}

fn rate(what: &str, work: f64, seconds: f64) -> Result<f64, CalibrateError> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(CalibrateError::BadInput {
            what: what.to_owned(),
            problem: format!("timed {seconds} s"),
        });
    }
    Ok(work / seconds)
}

/// The best of one warm-up and `passes` timed runs, seconds.
fn best_seconds(passes: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..passes.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `f` on `threads` matching slices of three arrays at once.
fn parallel3(
    threads: usize,
    a: &mut [f64],
    b: &mut [f64],
    c: &mut [f64],
    f: impl Fn(&mut [f64], &mut [f64], &mut [f64]) + Sync,
) {
    let chunk = a.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for ((a, b), c) in a
            .chunks_mut(chunk)
            .zip(b.chunks_mut(chunk))
            .zip(c.chunks_mut(chunk))
        {
            let f = &f;
            scope.spawn(move || f(a, b, c));
        }
    });
}

/// Runs `f` on `threads` slices of one array at once.
fn parallel1(threads: usize, a: &mut [f64], f: impl Fn(&mut [f64]) + Sync) {
    let chunk = a.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for a in a.chunks_mut(chunk) {
            let f = &f;
            scope.spawn(move || f(a));
        }
    });
}

/// One pass of a STREAM mix over a thread's slices.
fn run_mix(mix: HbmMix, a: &mut [f64], b: &mut [f64], c: &mut [f64]) {
    let s = black_box(3.0);
    match mix {
        HbmMix::Copy => b.copy_from_slice(black_box(a)),
        HbmMix::Triad => {
            for ((a, b), c) in a.iter_mut().zip(b.iter()).zip(c.iter()) {
                *a = b + s * c;
            }
        }
        HbmMix::Read => {
            black_box(read_sum(black_box(a)));
        }
        HbmMix::Write => a.fill(s),
    }
    black_box((a, b, c));
}

/// A sum over eight accumulators, so the loop vectorizes and is bound by the loads.
fn read_sum(a: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = a.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (acc, x) in acc.iter_mut().zip(chunk) {
            *acc += x;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// Which FMA code path runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    /// x86-64 with AVX2 and FMA, detected at run time.
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    /// `mul_add` as compiled for the baseline target (a hardware FMA on aarch64).
    Portable,
}

impl Isa {
    fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => "AVX2+FMA",
            Isa::Portable => "portable mul_add",
        }
    }
}

fn fma_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return Isa::Avx2Fma;
    }
    Isa::Portable
}

/// A float type the FMA chains run in.
trait Lane: Copy + Send + Sync + Into<f64> + 'static {
    /// Independent chains: enough vectors of them to cover the FMA latency on two ports.
    const CHAINS: usize;
    fn from_f64(v: f64) -> Self;
    fn mul_add(self, m: Self, c: Self) -> Self;
}

impl Lane for f64 {
    const CHAINS: usize = 32;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn mul_add(self, m: Self, c: Self) -> Self {
        f64::mul_add(self, m, c)
    }
}

impl Lane for f32 {
    const CHAINS: usize = 64;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn mul_add(self, m: Self, c: Self) -> Self {
        f32::mul_add(self, m, c)
    }
}

/// `steps` FMA steps `x = x * m + c` on every chain; inlined into each caller so it is compiled
/// with the caller's target features.
///
/// The chains run on a local fixed-size copy, which stays in registers: chains kept in memory
/// would add a store-to-load round trip to every step and measure that latency instead.
#[inline(always)]
fn chains<T: Lane, const N: usize>(acc: &mut [T; N], steps: u64, m: T, c: T) {
    let mut x = *acc;
    for _ in 0..steps {
        for v in x.iter_mut() {
            *v = v.mul_add(m, c);
        }
    }
    *acc = x;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn chains_avx2<T: Lane, const N: usize>(acc: &mut [T; N], steps: u64, m: T, c: T) {
    chains(acc, steps, m, c);
}

fn run_chains<T: Lane>(isa: Isa, acc: &mut [T], steps: u64, m: T, c: T) {
    // 32 f64 or 64 f32 lanes: eight 256-bit registers of independent chains either way.
    for block in acc.chunks_exact_mut(T::CHAINS.min(64)) {
        match <&mut [T; 32]>::try_from(&mut *block) {
            Ok(block) => run_block(isa, block, steps, m, c),
            Err(_) => {
                if let Ok(block) = <&mut [T; 64]>::try_from(block) {
                    run_block(isa, block, steps, m, c);
                }
            }
        }
    }
}

fn run_block<T: Lane, const N: usize>(isa: Isa, acc: &mut [T; N], steps: u64, m: T, c: T) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2Fma` is only chosen after `is_x86_feature_detected!` found both
        // features on this CPU.
        Isa::Avx2Fma => unsafe { chains_avx2(acc, steps, m, c) },
        Isa::Portable => chains(acc, steps, m, c),
    }
}

/// FLOP/s of `threads` threads each running [`Lane::CHAINS`] chains; each thread's chains are
/// checked against their closed form `x_n = m^n x_0 + c (1 - m^n) / (1 - m)`.
fn fma_rate<T: Lane>(threads: usize, options: &HostOptions, isa: Isa) -> Result<f64, HostError> {
    let (m, c, x0) = (0.999_999_f64, 1e-7_f64, 1.0_f64);
    let steps = options.fma_steps;
    let mut best = f64::INFINITY;
    let mut results = Vec::new();
    for rep in 0..=options.fma_reps {
        let start = Instant::now();
        results = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(move || {
                        let mut acc = vec![T::from_f64(black_box(x0)); T::CHAINS];
                        let (m, c) = (T::from_f64(black_box(m)), T::from_f64(black_box(c)));
                        run_chains(isa, &mut acc, black_box(steps), m, c);
                        black_box(acc)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect::<Vec<Vec<T>>>()
        });
        let seconds = start.elapsed().as_secs_f64();
        // The first run warms the cores up.
        if rep > 0 {
            best = best.min(seconds);
        }
    }
    let what = format!("{} FMA chains", std::any::type_name::<T>());
    let mn = m.powf(steps as f64);
    let expected = mn * x0 + c * (1.0 - mn) / (1.0 - m);
    // f32 chains accumulate rounding over millions of steps; f64 ones stay close.
    let tolerance = if size_of::<T>() == 4 { 2e-2 } else { 1e-6 };
    let finals: Vec<f64> = results.iter().flatten().map(|&x| x.into()).collect();
    if finals.len() != threads * T::CHAINS {
        return Err(HostError::Check {
            what,
            got: finals.len() as f64,
            expected: (threads * T::CHAINS) as f64,
            problem: "a thread panicked: fewer chain results than chains",
        });
    }
    for &got in &finals {
        // A NaN fails this too: it is neither close nor far.
        let close = (got - expected).abs() <= tolerance * expected.abs();
        if !close {
            return Err(HostError::Check {
                what,
                got,
                expected,
                problem: "the loop was optimised away or computed something else",
            });
        }
    }
    let flops = 2.0 * steps as f64 * (threads * T::CHAINS) as f64;
    Ok(rate(&what, flops, best)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("4096"), Some(4096));
        assert_eq!(parse_cache_size("lots"), None);
        assert_eq!(parse_cache_size("12Q"), None);
    }

    #[test]
    fn cache_levels_read_a_sysfs_tree_and_skip_the_instruction_cache() {
        let dir = std::env::temp_dir().join(format!("tileops-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (index, level, kind, size) in [
            (0, "1", "Data", "32K"),
            (1, "1", "Instruction", "64K"),
            (2, "2", "Unified", "1024K"),
            (3, "3", "Unified", "32768K"),
        ] {
            let d = dir.join(format!("index{index}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("power")).unwrap();
        let levels = cache_levels(&dir).unwrap();
        assert_eq!(levels, [(1, 32 << 10), (2, 1 << 20), (3, 32 << 20)]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(cache_levels(&dir), Err(HostError::Cache { .. })));
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("AMD EPYC"), "amd-epyc");
        assert_eq!(
            slug("Intel(R) Xeon(R) CPU @ 2.20GHz"),
            "intel-r-xeon-r-cpu-2-20ghz"
        );
        assert_eq!(slug("--x--"), "x");
    }

    #[test]
    fn read_sum_counts_every_element() {
        let a: Vec<f64> = (0..1003).map(f64::from).collect();
        assert_eq!(read_sum(&a), 1002.0 * 1003.0 / 2.0);
    }

    #[test]
    fn mixes_do_what_they_say() {
        let (mut a, mut b, mut c) = (vec![1.0; 10], vec![2.0; 10], vec![0.5; 10]);
        run_mix(HbmMix::Triad, &mut a, &mut b, &mut c);
        assert!(a.iter().all(|&x| x == 3.5));
        run_mix(HbmMix::Copy, &mut a, &mut b, &mut c);
        assert!(b.iter().all(|&x| x == 3.5));
        run_mix(HbmMix::Write, &mut a, &mut b, &mut c);
        assert!(a.iter().all(|&x| x == 3.0));
    }

    /// A short real measurement: the chains' results are checked inside, the rates are positive,
    /// and the profile written from them loads back as a host profile matching the CPU backend's
    /// device name.
    #[test]
    fn fma_chains_are_checked_and_the_profile_loads_back() {
        let options = HostOptions {
            passes: 1,
            fma_reps: 1,
            fma_steps: 20_000,
        };
        let isa = fma_isa();
        let f64_rate = fma_rate::<f64>(1, &options, isa).unwrap();
        let f32_rate = fma_rate::<f32>(2, &options, isa).unwrap();
        assert!(f64_rate > 1e6 && f32_rate > 1e6, "{f64_rate} {f32_rate}");

        let info = HostInfo {
            model: "Test CPU".into(),
            device_name: "cpu: Test CPU (2 threads)".into(),
            threads: 2,
            llc_bytes: 32 << 20,
            l2_bytes: 1 << 20,
        };
        let rates = HostRates {
            memory: vec![
                (HbmMix::Copy, 9e9),
                (HbmMix::Triad, 10e9),
                (HbmMix::Read, 12e9),
                (HbmMix::Write, 8e9),
            ],
            memory_read_one_core: 8e9,
            cache_read: 60e9,
            array_bytes: 256 << 20,
            fma_f64: (f64_rate, 2.0 * f64_rate),
            fma_f32: (f32_rate / 2.0, f32_rate),
            fma_isa: isa.name(),
            threads: 2,
        };
        let yaml = writer(&info, &rates, Provenance::default())
            .unwrap()
            .to_yaml()
            .unwrap();
        let p = Profile::from_yaml_str(&yaml, "host-test", "host-test.yaml")
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert!(p.is_host(), "{yaml}");
        assert!(p.matches_name("cpu: Test CPU (2 threads)"));
        assert!(!p.matches_name("cpu: Test CPU (4 threads)"));
        assert!((p.hbm().effective() - 12e9).abs() < 1e6);
        assert!((p.hbm().calibration - 0.2).abs() < 1e-4);
        assert_eq!(p.hbm().calibration_mixes.len(), 4);
        let (key, fp64) = p.pricing_roof("tensor_core.bf16").unwrap();
        assert_eq!(key, "cpu.fp64");
        assert!((fp64.effective() / (2.0 * f64_rate) - 1.0).abs() < 1e-3);
        assert!(p.roof("cpu.fp32").is_some());

        // A memory mix faster than the cache-resident ceiling is refused, not clamped.
        let mut fast = rates.clone();
        fast.cache_read = 10e9;
        assert!(matches!(
            writer(&info, &fast, Provenance::default()),
            Err(CalibrateError::AboveTheoretical { .. })
        ));
    }

    #[test]
    fn discover_finds_host_profiles_only_and_reports_a_broken_one() {
        let dir = std::env::temp_dir().join(format!("tileops-hosts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(discover(&dir).unwrap().is_empty(), "a missing dir is none");
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = "device:\n  name: h\n  kind: cpu\n  match: [\"cpu: H (1 threads)\"]\n  \
                    l2_bytes: 1024\nhbm:\n  theoretical: 10e9\n  calibration: 0.5\n";
        std::fs::write(dir.join("host-h.yaml"), yaml).unwrap();
        std::fs::write(dir.join("other.yaml"), "not: a profile\n").unwrap();
        let found = discover(&dir).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "host-h");
        std::fs::write(dir.join("host-broken.yaml"), "device: [\n").unwrap();
        assert!(discover(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
