//! The records file: what one bench run measured, one JSON file per run.
//!
//! A run holds its metadata (git revision, date, tool version, device) and one [`Record`] per
//! (op, workload label, dtype, implementation). A record carries the `flops` and `bytes` that the
//! op's own `eval_roofline` returned, the roof key the op declares, and the timing statistics; the
//! roofline tool ([`crate::report`]) prices it against a profile and never evaluates a
//! formula itself.
//!
//! Loading is strict: a malformed or truncated file, an unknown field, a dtype tileops does not
//! know, timing statistics out of order or a duplicated row is an error naming the file, the record
//! and the field, never a silently dropped row.
//!
//! ```
//! use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//!
//! let device = DeviceInfo::new("NVIDIA H200")
//!     .with_compute_capability("9.0".parse().unwrap())
//!     .with_l2_bytes(62_914_560);
//! let meta = RunMeta::new("0123abc", "2026-11-30T04:00:00Z", "0.1.0", device.clone());
//! let record = Record::new("softmax", "reduction", "llama-8b", "bfloat16", device)
//!     .with_roofline(Some(5 * 4096 * 4096), Some(2 * 4096 * 4096 * 2))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(100, 0.0172, 0.0169, 0.0180));
//! let run = Run::new(meta, vec![record]);
//! let text = run.to_json_pretty()?;
//! let back = Run::from_json_str(&text, "memory")?;
//! assert_eq!(back, run);
//! # Ok::<(), tileops_bench::records::RecordsError>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::BufRead;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::files;
use tileops::DType;

/// The version of the records schema this module reads and writes.
///
/// Bump it when a field changes meaning; a file of another version is refused with a clear error
/// rather than misread.
pub const SCHEMA_VERSION: u32 = 1;

/// The largest records file [`Run::load`] reads: 2 GiB. A record as bench_all writes it takes
/// 780 to 1000 bytes, so a million rows fit with room to spare; the bound is there so that a
/// wrong path, a device, cannot make the loader read without end.
pub const MAX_FILE_BYTES: u64 = 2 << 30;

/// The UTF-8 byte order mark, which a records file may start with (some editors write one).
const BOM: &[u8] = b"\xef\xbb\xbf";

/// The implementation name of a tileops row (`impl` in the file). Baseline rows name theirs
/// (`torch`, `torch-compile`).
pub const TILEOPS_IMPL: &str = "tileops";

/// The `timing` of a row that ran on an emulated device (cuda-emu: the kernels on the CPU behind a
/// stand-in driver): it ran once, for correctness, and carries no timing at all, since an
/// emulator's clock says nothing about a GPU. Such a row is an untimed one (`skipped` says so,
/// `samples` is 0, the times are null), so every reader of the schema, old or new, leaves it blank.
pub const EMULATED_TIMING: &str = "emulated";

/// The `skipped` text of a row that ran once on an emulated device (see [`EMULATED_TIMING`]).
pub const EMULATED_NOTE: &str = "emulated device: ran once for correctness, not timed; an \
                                 emulator's timings say nothing about a GPU";

/// The most raw sample times one record keeps ([`Record::samples_ms`]): 1000.
///
/// The bench harness takes at most 200 samples a row by default ([`crate::bench::TimeBudget`]),
/// so every sample is kept; a row timed with more keeps 1000 evenly spaced order statistics of its
/// sorted samples (its quantiles, so a bootstrap of the median still sees the distribution), and
/// `samples` still counts them all. At about 20 bytes a kept sample, a row adds at most 20 kB to
/// its file: the few hundred rows of a bench_all run stay far below [`MAX_FILE_BYTES`].
pub const MAX_KEPT_SAMPLES: usize = 1000;

/// The most kernel launches one record's [`Ledger`] lists: 4096, far above any op's call (the
/// split-KV decode launches two), so that a records file from anyone stays bounded.
pub const MAX_LEDGER_LAUNCHES: usize = 4096;

/// The kernel ledger of one call: every kernel launch it made and what each costs in the pipes a
/// roofline does not see (instructions issued, MUFU operations), and, where the emulator counted
/// it, its memory traffic. Recorded by the bench on an emulated device, where nothing is timed;
/// `tileops roofline` turns it into issue and SFU times, the limiting pipe and the row's ceiling.
/// Every figure is **from the ledger, not measured**: instruction counts come from the sm_90 SASS
/// of the kernels, launch shapes and traffic from the emulator (see `tileops/docs/kernels.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// How the figures were obtained (the SASS ledger's compiler and disassembler, the emulator).
    pub method: String,
    /// The launches of one call, in order.
    pub launches: Vec<LaunchLedger>,
    /// Bytes the call writes (its outputs): with the row's bytes, the mix of reads and writes
    /// that selects the HBM bandwidth its memory pipe runs at. Absent in records written before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_bytes: Option<u64>,
}

/// One kernel launch of a call, with its ledger.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchLedger {
    /// The kernel entry point (`"relu_bf16"`).
    pub entry: String,
    /// Grid dimensions, in CTAs.
    pub grid: [u32; 3],
    /// Block dimensions, in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory per CTA, bytes.
    pub dynamic_smem: u32,
    /// Whether the emulator ran it (`false`: a dry run, the launch shape only, for a row over the
    /// emulator's budget).
    pub ran: bool,
    /// Thread-instructions the launch issues (SASS instructions on the common path × threads).
    pub thread_instructions: f64,
    /// MUFU (SFU) thread-operations.
    pub mufu_ops: f64,
    /// Tensor-core warp instructions (`HMMA`, one `mma.sync` m16n8k16 each); absent (0) for a
    /// kernel without them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tensor_ops: f64,
    /// SASS instructions per element at this launch shape (per-thread fixed work amortised).
    pub instr_per_elem: f64,
    /// MUFU operations per element.
    pub mufu_per_elem: f64,
    /// Registers per thread.
    pub registers: u32,
    /// CTAs resident per SM at once (occupancy), at least 1.
    pub ctas_per_sm: u32,
    /// Memory traffic the emulator counted, when it ran the launch with its traffic
    /// instrumentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
    /// Bytes moved through shared memory, summed over threads (before bank conflicts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_bytes: f64,
    /// Dependent rounds of global loads one thread waits for (the SASS ledger's
    /// [`crate::ledger::LaunchCost::rounds`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rounds: f64,
    /// Whether the kernel's warps meet at block-wide barriers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub barriers: bool,
}

/// Whether a flag is unset (not written to the JSON).
fn is_false(v: &bool) -> bool {
    !*v
}

/// Whether a count is 0 (not written to the JSON, so records of kernels without tensor cores
/// read as before).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl LaunchLedger {
    /// CTAs in the grid.
    pub fn ctas(&self) -> u64 {
        self.grid.iter().map(|&d| u64::from(d)).product()
    }

    /// Threads in one CTA.
    pub fn threads_per_cta(&self) -> u64 {
        self.block.iter().map(|&d| u64::from(d)).product()
    }
}

/// The memory traffic of one launch, counted by the emulator per access (never timed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// Bytes of the unique 32-byte global sectors read: DRAM reads with an ideal L2.
    pub read_bytes: u64,
    /// Bytes of the unique 32-byte global sectors written.
    pub write_bytes: u64,
    /// Warp-level global requests.
    pub global_requests: u64,
    /// 32-byte sectors those requests touched.
    pub global_sectors: u64,
    /// Sectors they would touch if perfectly coalesced for their width.
    pub global_ideal_sectors: u64,
    /// Warp-level shared-memory requests.
    pub shared_requests: u64,
    /// Shared-memory wavefronts they took (bank conflicts add wavefronts).
    pub shared_wavefronts: u64,
    /// Wavefronts without bank conflicts.
    pub shared_ideal_wavefronts: u64,
}

impl Ledger {
    /// Thread-instructions of the whole call.
    pub fn thread_instructions(&self) -> f64 {
        self.launches.iter().map(|l| l.thread_instructions).sum()
    }

    /// MUFU operations of the whole call.
    pub fn mufu_ops(&self) -> f64 {
        self.launches.iter().map(|l| l.mufu_ops).sum()
    }

    /// The call's traffic, when the emulator counted every launch of it.
    pub fn traffic(&self) -> Option<Traffic> {
        let mut total = Traffic::default();
        for launch in &self.launches {
            let t = launch.traffic?;
            total.read_bytes += t.read_bytes;
            total.write_bytes += t.write_bytes;
            total.global_requests += t.global_requests;
            total.global_sectors += t.global_sectors;
            total.global_ideal_sectors += t.global_ideal_sectors;
            total.shared_requests += t.shared_requests;
            total.shared_wavefronts += t.shared_wavefronts;
            total.shared_ideal_wavefronts += t.shared_ideal_wavefronts;
        }
        (!self.launches.is_empty()).then_some(total)
    }

    /// Whether every launch ran on the emulator (none was a dry run).
    pub fn all_ran(&self) -> bool {
        self.launches.iter().all(|l| l.ran)
    }

    /// The first problem of a ledger read from a file: `(field, problem)`.
    fn check(&self) -> Result<(), (&'static str, String)> {
        if self.method.trim().is_empty() {
            return Err((
                "ledger.method",
                "is empty; say how the ledger was obtained".into(),
            ));
        }
        // No launch is a library call's ledger (cuBLASLt's GEMM): priced at the roofs.
        if self.launches.len() > MAX_LEDGER_LAUNCHES {
            return Err((
                "ledger.launches",
                format!(
                    "lists {} launches; a call's ledger lists at most {MAX_LEDGER_LAUNCHES}",
                    self.launches.len()
                ),
            ));
        }
        for launch in &self.launches {
            let at =
                |problem: String| ("ledger.launches", format!("`{}`: {problem}", launch.entry));
            if launch.entry.trim().is_empty() {
                return Err(("ledger.launches", "an entry name is empty".into()));
            }
            if launch.grid.contains(&0) || launch.block.contains(&0) {
                return Err(at(format!(
                    "grid {:?} or block {:?} has a zero dimension",
                    launch.grid, launch.block
                )));
            }
            if launch.threads_per_cta() > 1024 {
                return Err(at(format!(
                    "block {:?} has more than 1024 threads",
                    launch.block
                )));
            }
            for (what, v) in [
                ("thread_instructions", launch.thread_instructions),
                ("mufu_ops", launch.mufu_ops),
                ("instr_per_elem", launch.instr_per_elem),
                ("mufu_per_elem", launch.mufu_per_elem),
                ("shared_bytes", launch.shared_bytes),
                ("rounds", launch.rounds),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(at(format!("{what} is {v}; a count is finite and >= 0")));
                }
            }
            if launch.ctas_per_sm == 0 {
                return Err(at("ctas_per_sm is 0; a launchable kernel fits 1 CTA".into()));
            }
        }
        Ok(())
    }
}

/// A CUDA compute capability, `major.minor` (`"9.0"`).
///
/// ```
/// use tileops_bench::records::ComputeCapability;
/// let cc: ComputeCapability = "9.0".parse().unwrap();
/// assert_eq!((cc.major, cc.minor), (9, 0));
/// assert_eq!(cc.to_string(), "9.0");
/// assert!("sm90".parse::<ComputeCapability>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    /// The major version (9 on Hopper).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

/// A compute capability string that is not `major.minor`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compute capability `{text}` is not `major.minor` (for example \"9.0\")")]
pub struct BadComputeCapability {
    /// The text that failed to parse.
    pub text: String,
}

impl FromStr for ComputeCapability {
    type Err = BadComputeCapability;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadComputeCapability {
            text: text.to_owned(),
        };
        let (major, minor) = text.trim().split_once('.').ok_or_else(bad)?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return Err(bad());
        }
        Ok(ComputeCapability {
            major: major.parse().map_err(|_| bad())?,
            minor: minor.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for ComputeCapability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A string only: an unquoted YAML `9.0` would arrive as a float, and `12.10` as 12.1.
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The device a run or a record was timed on.
///
/// For a GPU: the CUDA device name (`"NVIDIA H200"`), compute capability, driver version and L2
/// size. For the CPU backend the name describes the host and the other fields are absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    /// The device name as the driver reports it.
    pub name: String,
    /// The compute capability; `None` off a GPU.
    pub compute_capability: Option<ComputeCapability>,
    /// The driver version (`"580.65.06"`); `None` off a GPU.
    pub driver: Option<String>,
    /// The L2 cache size in bytes; `None` when unknown.
    pub l2_bytes: Option<u64>,
}

impl DeviceInfo {
    /// A device known only by name (the CPU backend).
    pub fn new(name: impl Into<String>) -> Self {
        DeviceInfo {
            name: name.into(),
            compute_capability: None,
            driver: None,
            l2_bytes: None,
        }
    }

    /// Sets the compute capability.
    pub fn with_compute_capability(mut self, cc: ComputeCapability) -> Self {
        self.compute_capability = Some(cc);
        self
    }

    /// Sets the driver version.
    pub fn with_driver(mut self, driver: impl Into<String>) -> Self {
        self.driver = Some(driver.into());
        self
    }

    /// Sets the L2 size in bytes.
    pub fn with_l2_bytes(mut self, bytes: u64) -> Self {
        self.l2_bytes = Some(bytes);
        self
    }
}

/// Metadata of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMeta {
    /// The git revision of the code that ran (`"unknown"` outside a checkout).
    pub git_revision: String,
    /// When the run started, RFC 3339 (`"2026-11-30T04:00:00Z"`).
    pub date: String,
    /// The version of the tool that wrote the file.
    pub tool_version: String,
    /// The device the run was taken on.
    pub device: DeviceInfo,
    /// Set when the run stopped before its last row (interrupted): why, and how many rows it
    /// meant to run. Absent from a complete run's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
}

/// What `meta.partial` says of a run that stopped before its last row: the records are the rows
/// finished before it stopped, every one of them whole.
///
/// ```
/// use tileops_bench::records::{DeviceInfo, Partial, RunMeta};
/// let meta = RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", DeviceInfo::new("cpu: test"))
///     .with_partial(Partial::new("interrupted by SIGINT", 132));
/// assert_eq!(meta.partial.unwrap().planned_rows, 132);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partial {
    /// Why the run stopped (`"interrupted by SIGINT"`).
    pub reason: String,
    /// How many rows the run was to have: the records file holds fewer.
    pub planned_rows: usize,
}

impl Partial {
    /// A partial run's note.
    pub fn new(reason: impl Into<String>, planned_rows: usize) -> Self {
        Partial {
            reason: reason.into(),
            planned_rows,
        }
    }
}

impl RunMeta {
    /// Metadata from its four parts.
    pub fn new(
        git_revision: impl Into<String>,
        date: impl Into<String>,
        tool_version: impl Into<String>,
        device: DeviceInfo,
    ) -> Self {
        RunMeta {
            git_revision: git_revision.into(),
            date: date.into(),
            tool_version: tool_version.into(),
            device,
            partial: None,
        }
    }

    /// Marks the run partial.
    pub fn with_partial(mut self, partial: Partial) -> Self {
        self.partial = Some(partial);
        self
    }
}

/// One input tensor of a record's workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputShape {
    /// The input's name in the manifest signature (`"x"`).
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its dtype name (`"bfloat16"`).
    pub dtype: String,
}

/// Timing statistics of one record, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingStats {
    /// How many timed samples the statistics summarise.
    pub samples: u32,
    /// The median sample.
    pub median_ms: f64,
    /// The 10th percentile.
    pub p10_ms: f64,
    /// The 90th percentile.
    pub p90_ms: f64,
}

impl TimingStats {
    /// Statistics from their parts (checked when the run is validated).
    pub fn new(samples: u32, median_ms: f64, p10_ms: f64, p90_ms: f64) -> Self {
        TimingStats {
            samples,
            median_ms,
            p10_ms,
            p90_ms,
        }
    }

    /// Median, p10 and p90 of timed samples (ms), linearly interpolated between order statistics;
    /// `None` without a sample or with a non-finite or non-positive one.
    ///
    /// ```
    /// use tileops_bench::records::TimingStats;
    /// let stats = TimingStats::from_samples(&[0.5, 0.1, 0.4, 0.2, 0.3]).unwrap();
    /// assert_eq!(stats.samples, 5);
    /// assert_eq!(stats.median_ms, 0.3);
    /// assert!((stats.p10_ms - 0.14).abs() < 1e-12 && (stats.p90_ms - 0.46).abs() < 1e-12);
    /// ```
    pub fn from_samples(samples_ms: &[f64]) -> Option<TimingStats> {
        if samples_ms.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
            return None;
        }
        let mut sorted = samples_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(TimingStats {
            samples: u32::try_from(sorted.len()).unwrap_or(u32::MAX),
            median_ms: percentile(&sorted, 0.5)?,
            p10_ms: percentile(&sorted, 0.1)?,
            p90_ms: percentile(&sorted, 0.9)?,
        })
    }
}

/// The `q` quantile (0..=1) of ascending `sorted` values, linearly interpolated between order
/// statistics (NumPy's default); `None` when empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (lo, frac) = (pos.floor() as usize, pos - pos.floor());
    let hi = (lo + 1).min(last);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// One timed (or deliberately skipped) row: an op on one workload in one dtype.
///
/// `flops` and `bytes` are exactly what the op's `eval_roofline` returned (`None` when it could
/// not be evaluated); the report leaves such a row blank with the reason. A row the harness chose
/// not to time carries `skipped` with the reason and no timing statistics, so it still appears in
/// every report. A row that ran on an emulated device is one of those: `timing` is
/// [`EMULATED_TIMING`], `skipped` says it ran once and was not timed ([`Record::with_emulated_run`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The op's manifest name (`"softmax"`).
    pub op: String,
    /// The op's family (`"reduction"`).
    pub family: String,
    /// The workload label from the manifest (`"llama-8b-prefill"`).
    pub workload: String,
    /// The dtype of the case (`"bfloat16"`).
    pub dtype: String,
    /// Which implementation ran: `"tileops"`, or a baseline's name.
    #[serde(rename = "impl", default = "default_impl")]
    pub implementation: String,
    /// The input tensors the workload binds, in signature order.
    #[serde(default)]
    pub inputs: Vec<InputShape>,
    /// The workload's params (any JSON value).
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// FLOPs of one call, from `eval_roofline`.
    pub flops: Option<u64>,
    /// Bytes of one call, from `eval_roofline`.
    pub bytes: Option<u64>,
    /// The roof key the op declares (`"cuda_core.fp32"`, `"tensor_core.bf16"`).
    pub roof: Option<String>,
    /// The timing method (`"cuda_events"`, `"cuda_graph"`, `"cpu_wall"`; `"none"` when skipped;
    /// `"emulated"` for a row that ran once on an emulated device, untimed).
    pub timing: String,
    /// How many timed samples; 0 when skipped.
    pub samples: u32,
    /// The median sample, ms.
    pub median_ms: Option<f64>,
    /// The 10th percentile, ms.
    pub p10_ms: Option<f64>,
    /// The 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// Why the row was not timed; `None` for a timed row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The raw sample times, ms, in the order taken (at most [`MAX_KEPT_SAMPLES`]); empty for a
    /// skipped row and for files written before they were kept. `--compare` bootstraps the ratio of
    /// medians from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples_ms: Vec<f64>,
    /// The device the row was timed on.
    pub device: DeviceInfo,
    /// The kernel ledger of one call (launches, instructions, MUFU operations, traffic), recorded
    /// on an emulated device; `None` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<Ledger>,
}

fn default_impl() -> String {
    TILEOPS_IMPL.to_owned()
}

impl Record {
    /// A record with its identity and device; roofline, roof and timing are set with the
    /// `with_*` methods. Until [`Record::with_timing`], it reads as skipped ("the bench never timed
    /// it"), so a row the bench forgets to time still shows up, blank.
    pub fn new(
        op: impl Into<String>,
        family: impl Into<String>,
        workload: impl Into<String>,
        dtype: impl Into<String>,
        device: DeviceInfo,
    ) -> Self {
        Record {
            op: op.into(),
            family: family.into(),
            workload: workload.into(),
            dtype: dtype.into(),
            implementation: default_impl(),
            inputs: Vec::new(),
            params: BTreeMap::new(),
            flops: None,
            bytes: None,
            roof: None,
            timing: "none".to_owned(),
            samples: 0,
            median_ms: None,
            p10_ms: None,
            p90_ms: None,
            skipped: Some("the bench never timed it".to_owned()),
            samples_ms: Vec::new(),
            device,
            ledger: None,
        }
    }

    /// Sets the kernel ledger of one call.
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Sets the implementation name (`impl`).
    pub fn with_impl(mut self, implementation: impl Into<String>) -> Self {
        self.implementation = implementation.into();
        self
    }

    /// Adds an input tensor.
    pub fn with_input(
        mut self,
        name: impl Into<String>,
        shape: Vec<u64>,
        dtype: impl Into<String>,
    ) -> Self {
        self.inputs.push(InputShape {
            name: name.into(),
            shape,
            dtype: dtype.into(),
        });
        self
    }

    /// Sets the dtype of the input `name` already added (no-op for an input not listed).
    pub fn with_input_dtype(mut self, name: &str, dtype: impl Into<String>) -> Self {
        if let Some(input) = self.inputs.iter_mut().find(|i| i.name == name) {
            input.dtype = dtype.into();
        }
        self
    }

    /// Sets a param.
    pub fn with_param(mut self, name: impl Into<String>, value: serde_json::Value) -> Self {
        self.params.insert(name.into(), value);
        self
    }

    /// Sets `flops` and `bytes` as `eval_roofline` returned them.
    pub fn with_roofline(mut self, flops: Option<u64>, bytes: Option<u64>) -> Self {
        self.flops = flops;
        self.bytes = bytes;
        self
    }

    /// Sets the roof key.
    pub fn with_roof(mut self, roof: impl Into<String>) -> Self {
        self.roof = Some(roof.into());
        self
    }

    /// Marks the record timed by `method` with `stats`.
    pub fn with_timing(mut self, method: impl Into<String>, stats: TimingStats) -> Self {
        self.timing = method.into();
        self.samples = stats.samples;
        self.median_ms = Some(stats.median_ms);
        self.p10_ms = Some(stats.p10_ms);
        self.p90_ms = Some(stats.p90_ms);
        self.skipped = None;
        self.samples_ms.clear();
        self
    }

    /// Marks the record timed by `method` from its raw samples (ms): the statistics
    /// ([`TimingStats::from_samples`]) and the samples themselves, at most [`MAX_KEPT_SAMPLES`]
    /// of them (see there for what is kept of more). `None` when there is no sample or one is
    /// not a positive finite time.
    ///
    /// ```
    /// use tileops_bench::records::{DeviceInfo, Record};
    /// let r = Record::new("softmax", "reduction", "w", "float32", DeviceInfo::new("cpu: test"))
    ///     .with_samples("cpu_wall", &[0.3, 0.1, 0.2])
    ///     .unwrap();
    /// assert_eq!((r.samples, r.median_ms), (3, Some(0.2)));
    /// assert_eq!(r.samples_ms, [0.3, 0.1, 0.2]);
    /// ```
    pub fn with_samples(self, method: impl Into<String>, samples_ms: &[f64]) -> Option<Self> {
        let stats = TimingStats::from_samples(samples_ms)?;
        let mut record = self.with_timing(method, stats);
        record.samples_ms = if samples_ms.len() <= MAX_KEPT_SAMPLES {
            samples_ms.to_vec()
        } else {
            let mut sorted = samples_ms.to_vec();
            sorted.sort_by(f64::total_cmp);
            let last = (sorted.len() - 1) as f64;
            (0..MAX_KEPT_SAMPLES)
                .map(|i| sorted[(i as f64 * last / (MAX_KEPT_SAMPLES - 1) as f64).round() as usize])
                .collect()
        };
        Some(record)
    }

    /// Marks the record not timed, with the reason.
    pub fn with_skip(mut self, reason: impl Into<String>) -> Self {
        self.timing = "none".to_owned();
        self.samples = 0;
        self.median_ms = None;
        self.p10_ms = None;
        self.p90_ms = None;
        self.samples_ms.clear();
        self.skipped = Some(reason.into());
        self
    }

    /// Marks the record as run once on an emulated device, for correctness only: timing
    /// [`EMULATED_TIMING`], no statistics, and `skipped` set to [`EMULATED_NOTE`] so that it reads
    /// as untimed everywhere.
    ///
    /// ```
    /// use tileops_bench::records::{DeviceInfo, Record, EMULATED_TIMING};
    /// let device = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)");
    /// let record = Record::new("softmax", "reduction", "w", "float32", device).with_emulated_run();
    /// assert_eq!(record.timing, EMULATED_TIMING);
    /// assert!(record.is_emulated() && record.stats().is_none() && record.samples == 0);
    /// ```
    pub fn with_emulated_run(self) -> Self {
        let mut record = self.with_skip(EMULATED_NOTE);
        record.timing = EMULATED_TIMING.to_owned();
        record
    }

    /// Whether the row ran on an emulated device (`timing` is [`EMULATED_TIMING`]).
    pub fn is_emulated(&self) -> bool {
        self.timing == EMULATED_TIMING
    }

    /// The timing statistics, or `None` for a skipped row.
    pub fn stats(&self) -> Option<TimingStats> {
        if self.skipped.is_some() {
            return None;
        }
        Some(TimingStats::new(
            self.samples,
            self.median_ms?,
            self.p10_ms?,
            self.p90_ms?,
        ))
    }

    /// The relative spread `(p90 - p10) / median`, a noise figure; `None` for a skipped row.
    pub fn noise(&self) -> Option<f64> {
        self.stats().map(|s| (s.p90_ms - s.p10_ms) / s.median_ms)
    }

    /// The row's identity: `op/workload/dtype` (and `[impl]` for a baseline).
    pub fn key(&self) -> RecordKey {
        RecordKey {
            op: self.op.clone(),
            workload: self.workload.clone(),
            dtype: self.dtype.clone(),
            implementation: self.implementation.clone(),
        }
    }
}

/// What identifies a row within a run, and across runs when comparing them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey {
    /// The op name.
    pub op: String,
    /// The workload label.
    pub workload: String,
    /// The dtype name.
    pub dtype: String,
    /// The implementation name.
    pub implementation: String,
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.op, self.workload, self.dtype)?;
        if self.implementation != TILEOPS_IMPL {
            write!(f, " [{}]", self.implementation)?;
        }
        Ok(())
    }
}

/// A bench run: metadata and records. The unit of the records file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The schema version, [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The run's metadata.
    pub meta: RunMeta,
    /// One record per row, in the order they ran.
    pub records: Vec<Record>,
}

/// A records file that cannot be read, parsed or trusted.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The file could not be read or written.
    #[error("{path}: {source}; check the path (records files are written by `bench_all --out`)")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file ends in the middle of the JSON document.
    #[error(
        "{file}:{line}:{column}: the records file ends early (truncated: was the bench \
         interrupted?); re-run bench_all to write a complete file"
    )]
    Truncated {
        /// The file.
        file: String,
        /// Line of the end of the file (1-based).
        line: usize,
        /// Column (1-based).
        column: usize,
    },
    /// The file is not valid JSON, or not the records schema.
    #[error(
        "{file}:{line}:{column}: {message} (expected the records schema version {SCHEMA_VERSION})"
    )]
    Malformed {
        /// The file.
        file: String,
        /// Line (1-based).
        line: usize,
        /// Column (1-based).
        column: usize,
        /// What the parser found.
        message: String,
    },
    /// The file is of another schema version.
    #[error(
        "{file}: records schema version {found}, this tool reads version {SCHEMA_VERSION}; \
         re-run bench_all with this version of tileops"
    )]
    Schema {
        /// The file.
        file: String,
        /// The version in the file.
        found: u32,
    },
    /// A field parsed but its value cannot be right.
    #[error("{file}: {location}: `{field}` {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// `meta`, or `record 3 (softmax/llama-8b/bfloat16)`.
        location: String,
        /// The field.
        field: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The run could not be serialised.
    #[error("cannot serialise the run: {0}")]
    Serialize(#[source] serde_json::Error),
}

/// The error of a records file that did not parse: truncated, not UTF-8, or malformed at the
/// parser's position.
fn json_error(e: &serde_json::Error, file: &str) -> RecordsError {
    let message = super::parser_message(&e.to_string());
    if e.is_eof() {
        RecordsError::Truncated {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
        }
    } else if message.contains("invalid unicode code point") {
        // serde_json's words for bytes that are not UTF-8, in a string or out of one.
        RecordsError::Malformed {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            message: "the file is not UTF-8 text".into(),
        }
    } else {
        RecordsError::Malformed {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            message,
        }
    }
}

/// What a file is when it is not a records file at all, judged from its first bytes (after a
/// byte order mark): empty, a JSON array (a list of records without the run around them), YAML
/// (a profile, a manifest) or other text. `None` for a JSON object, which the parser then reads.
fn not_a_records_object(start: &[u8], file: &str) -> Option<RecordsError> {
    let skipped = start.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let before = &start[..skipped];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    let malformed = |message: String| RecordsError::Malformed {
        file: file.to_owned(),
        line,
        column,
        message,
    };
    let rest = &start[skipped..];
    let first_line = String::from_utf8_lossy(&rest[..rest.len().min(200)])
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect::<String>();
    let looks_like_yaml = first_line.starts_with("---")
        || first_line.starts_with('#')
        || first_line
            .split_once(':')
            .is_some_and(|(key, _)| !key.is_empty() && !key.contains(['{', '"', '[']));
    let prefix = &rest[..rest.len().min(4)];
    let not_utf8 = matches!(std::str::from_utf8(prefix), Err(e) if e.valid_up_to() == 0 && e.error_len().is_some());
    match rest.first() {
        None => Some(malformed(
            "the file is empty (did the bench write it?)".into(),
        )),
        Some(_) if not_utf8 => Some(malformed("the file is not UTF-8 text".into())),
        Some(b'{') => None,
        Some(b'[') => Some(malformed(
            "the file is a JSON array; a records file is one JSON object with `schema`, `meta` \
             and `records` (as `bench --out` writes it)"
                .into(),
        )),
        Some(_) if looks_like_yaml => Some(malformed(format!(
            "the file looks like YAML (`{}`), not a records file (JSON, as `bench --out` writes \
             it); a profile goes to --profile",
            first_line.escape_debug()
        ))),
        Some(_) => Some(malformed(format!(
            "the file is not JSON (it starts `{}`); a records file is the JSON object `bench \
             --out` writes",
            first_line.escape_debug()
        ))),
    }
}

impl Run {
    /// A run of the current schema version.
    pub fn new(meta: RunMeta, records: Vec<Record>) -> Self {
        Run {
            schema: SCHEMA_VERSION,
            meta,
            records,
        }
    }

    /// Reads and validates a records file: a regular file of at most [`MAX_FILE_BYTES`] (a FIFO,
    /// a device or a directory is refused at once, never waited on or read without end; see
    /// [`files::read_regular`]), optionally starting with a UTF-8 byte order mark.
    ///
    /// # Errors
    /// [`RecordsError`] naming the file (and line, record and field) when the file cannot be read,
    /// is not a regular file or is over the bound ([`RecordsError::Io`]), is truncated or
    /// malformed, is of another schema version, or fails [`Run::validate`].
    pub fn load(path: impl AsRef<Path>) -> Result<Run, RecordsError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let io = |source| RecordsError::Io {
            path: shown.clone(),
            source,
        };
        // Parsed straight from the file: holding its text as well as the run it becomes would
        // cost a third more memory on a large file. A file that does not parse is not read again
        // as text either: every error below comes from the stream (its first bytes, the parser's
        // position), or from a second streaming pass that reads the schema version alone.
        let file = files::open_regular(path, MAX_FILE_BYTES).map_err(io)?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let start = reader.fill_buf().map_err(io)?;
        if start.starts_with(BOM) {
            reader.consume(BOM.len());
        }
        let capacity = reader.capacity();
        let start = reader.fill_buf().map_err(io)?;
        // A first buffer of nothing but whitespace, as long as the buffer, is not known to be an
        // empty file: the parser reads on.
        let judged = start.len() < capacity || start.iter().any(|b| !b.is_ascii_whitespace());
        if let Some(err) = judged
            .then(|| not_a_records_object(start, &shown))
            .flatten()
        {
            return Err(err);
        }
        let run = serde_json::from_reader::<_, Run>(&mut reader);
        match run {
            Ok(run) => {
                run.validate(&shown)?;
                Ok(run)
            }
            Err(e) if e.is_io() => Err(io(e.into())),
            Err(e) => {
                // The version first, so a file of another schema gets that error rather than a
                // confusing complaint about some field that changed.
                if let Some(found) = Self::schema_of(path)
                    && found != SCHEMA_VERSION
                {
                    return Err(RecordsError::Schema { file: shown, found });
                }
                Err(json_error(&e, &shown))
            }
        }
    }

    /// The `schema` of the records file at `path`, read by a streaming pass that keeps nothing
    /// else (`None` when it cannot be read).
    fn schema_of(path: &Path) -> Option<u32> {
        #[derive(Deserialize)]
        struct Version {
            schema: Option<u32>,
        }
        let file = files::open_regular(path, MAX_FILE_BYTES).ok()?;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
        if reader.fill_buf().ok()?.starts_with(BOM) {
            reader.consume(BOM.len());
        }
        // `Version` ignores every other field without keeping it, so the pass holds no copy.
        serde_json::from_reader::<_, Version>(reader).ok()?.schema
    }

    /// Parses and validates records JSON; `origin` names it in errors.
    ///
    /// # Errors
    /// As [`Run::load`], less the I/O.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Run, RecordsError> {
        let file = origin.to_owned();
        // A byte order mark, which some Windows editors write, is not JSON; RFC 8259 lets a
        // parser ignore it, and positions after it are the same in any editor.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        debug_assert_eq!('\u{feff}'.len_utf8(), BOM.len());
        // The version is read first, so a file of another schema gets that error rather than a
        // confusing complaint about some field that changed.
        #[derive(Deserialize)]
        struct Version {
            schema: Option<u32>,
        }
        if let Some(err) = not_a_records_object(text.as_bytes(), &file) {
            return Err(err);
        }
        if let Ok(Version {
            schema: Some(found),
        }) = serde_json::from_str::<Version>(text)
            && found != SCHEMA_VERSION
        {
            return Err(RecordsError::Schema { file, found });
        }
        let run: Run = serde_json::from_str(text).map_err(|e| json_error(&e, &file))?;
        run.validate(origin)?;
        Ok(run)
    }

    /// Checks what the schema cannot: names present, dtypes known, timing statistics positive and
    /// ordered (`p10 <= median <= p90`), skipped rows without statistics, no duplicated row.
    /// `bench_all` calls it before writing a file, the loader after reading one.
    ///
    /// # Errors
    /// [`RecordsError::Invalid`] for the first problem, naming the record and field.
    pub fn validate(&self, origin: &str) -> Result<(), RecordsError> {
        let invalid = |location: String, field: &str, problem: String| RecordsError::Invalid {
            file: origin.to_owned(),
            location,
            field: field.to_owned(),
            problem,
        };
        if self.schema != SCHEMA_VERSION {
            return Err(RecordsError::Schema {
                file: origin.to_owned(),
                found: self.schema,
            });
        }
        let meta = &self.meta;
        if let Some(partial) = &meta.partial {
            if partial.reason.trim().is_empty() {
                return Err(invalid(
                    "meta".into(),
                    "partial.reason",
                    "is empty; say why the run stopped".into(),
                ));
            }
            if partial.planned_rows < self.records.len() {
                return Err(invalid(
                    "meta".into(),
                    "partial.planned_rows",
                    format!(
                        "is {}, fewer than the {} records of the file",
                        partial.planned_rows,
                        self.records.len()
                    ),
                ));
            }
        }
        for (field, value) in [
            ("git_revision", &meta.git_revision),
            ("date", &meta.date),
            ("tool_version", &meta.tool_version),
            ("device.name", &meta.device.name),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(
                    "meta".into(),
                    field,
                    "is empty; the bench must fill it".into(),
                ));
            }
        }
        // Borrowed keys: a million-row file must not cost a second copy of every name.
        let mut seen: HashMap<(&str, &str, &str, &str), usize> =
            HashMap::with_capacity(self.records.len());
        for (index, record) in self.records.iter().enumerate() {
            let location = || format!("record {index} ({})", record.key());
            check_record(record).map_err(|(field, problem)| invalid(location(), field, problem))?;
            let key = (
                record.op.as_str(),
                record.workload.as_str(),
                record.dtype.as_str(),
                record.implementation.as_str(),
            );
            if let Some(first) = seen.insert(key, index) {
                return Err(invalid(
                    location(),
                    "op/workload/dtype/impl",
                    format!(
                        "repeats record {first}: one row per (op, workload, dtype, impl); \
                         merge or drop one"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The run as pretty-printed JSON.
    ///
    /// # Errors
    /// [`RecordsError::Serialize`] (not expected for a run that validates).
    pub fn to_json_pretty(&self) -> Result<String, RecordsError> {
        serde_json::to_string_pretty(self).map_err(RecordsError::Serialize)
    }

    /// Validates the run and writes it to `path` atomically ([`files::write_atomic`]: a temporary
    /// file in the same directory, flushed, renamed over `path`), creating parent directories. On
    /// any failure the file at `path` is as it was.
    ///
    /// # Errors
    /// [`RecordsError`] when the run does not validate or the file cannot be written.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), RecordsError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        self.validate(&shown)?;
        let text = self.to_json_pretty()? + "\n";
        files::write_atomic(path, text.as_bytes()).map_err(|source| RecordsError::Io {
            path: shown.clone(),
            source,
        })
    }
}

/// One record's checks: `Err((field, problem))` for the first failure.
fn check_record(record: &Record) -> Result<(), (&'static str, String)> {
    for (field, value) in [
        ("op", &record.op),
        ("family", &record.family),
        ("workload", &record.workload),
        ("impl", &record.implementation),
        ("timing", &record.timing),
        ("device.name", &record.device.name),
    ] {
        if value.trim().is_empty() {
            return Err((field, "is empty; the bench must fill it".into()));
        }
    }
    record
        .dtype
        .parse::<DType>()
        .map_err(|e| ("dtype", e.to_string()))?;
    for input in &record.inputs {
        input
            .dtype
            .parse::<DType>()
            .map_err(|e| ("inputs.dtype", format!("of input `{}`: {e}", input.name)))?;
    }
    if record.roof.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(("roof", "is empty; use null for an op without a roof".into()));
    }
    if let Some(ledger) = &record.ledger {
        ledger.check()?;
    }
    // An emulator's clock says nothing about a GPU: a figure from it must never pass as a timing.
    if record.is_emulated() && record.skipped.is_none() {
        return Err((
            "timing",
            "is `emulated` on a timed row; a row run on an emulated device carries no timing \
             (`skipped` says so, the times are null)"
                .into(),
        ));
    }
    let stats = [
        ("median_ms", record.median_ms),
        ("p10_ms", record.p10_ms),
        ("p90_ms", record.p90_ms),
    ];
    if let Some(reason) = &record.skipped {
        if reason.trim().is_empty() {
            return Err((
                "skipped",
                "is empty; state why the row was not timed".into(),
            ));
        }
        if record.samples != 0 {
            return Err((
                "samples",
                format!(
                    "is {} on a skipped row; a skipped row has 0",
                    record.samples
                ),
            ));
        }
        if let Some((field, _)) = stats.iter().find(|(_, v)| v.is_some()) {
            return Err((
                field,
                "is set on a skipped row; a skipped row carries no timing".into(),
            ));
        }
        if !record.samples_ms.is_empty() {
            return Err((
                "samples_ms",
                "is set on a skipped row; a skipped row carries no timing".into(),
            ));
        }
        return Ok(());
    }
    if record.samples_ms.len() > MAX_KEPT_SAMPLES
        || record.samples_ms.len() > record.samples as usize
    {
        return Err((
            "samples_ms",
            format!(
                "holds {} samples; a row keeps at most {MAX_KEPT_SAMPLES}, and no more than its \
                 `samples` ({})",
                record.samples_ms.len(),
                record.samples
            ),
        ));
    }
    if let Some(bad) = record
        .samples_ms
        .iter()
        .find(|t| !(t.is_finite() && **t > 0.0))
    {
        return Err((
            "samples_ms",
            format!("holds {bad}; a time must be positive and finite"),
        ));
    }
    if record.samples == 0 {
        return Err((
            "samples",
            "is 0 on a timed row; time it, or mark it `skipped` with the reason".into(),
        ));
    }
    let mut values = [0.0; 3];
    for (slot, (field, value)) in values.iter_mut().zip(stats) {
        match value {
            None => {
                return Err((
                    field,
                    "is missing on a timed row; time it, or mark it `skipped`".into(),
                ));
            }
            Some(v) if !(v.is_finite() && v > 0.0) => {
                return Err((field, format!("is {v}; a time must be positive and finite")));
            }
            Some(v) => *slot = v,
        }
    }
    let [median, p10, p90] = values;
    if !(p10 <= median && median <= p90) {
        return Err((
            "median_ms",
            format!(
                "{median} is not within p10_ms {p10} ..= p90_ms {p90}; the percentiles are \
                 swapped or stale"
            ),
        ));
    }
    check_samples_agree(&record.samples_ms, record.samples, [median, p10, p90])
}

/// Checks that a row's kept samples agree with its stored statistics: a comparison (and its
/// regression gate) decides on the samples, the reports on the statistics, so a row whose two
/// disagree (median 5 ms, samples around 0.5 ms) could pass the gate while it reports a 10×
/// slowdown. With every sample kept, their percentiles are the statistics up to rounding; with a
/// thinned set (evenly spaced ranks of the sorted samples, [`MAX_KEPT_SAMPLES`] of them), each
/// statistic lies between the kept samples around its rank.
fn check_samples_agree(
    samples_ms: &[f64],
    samples: u32,
    [median, p10, p90]: [f64; 3],
) -> Result<(), (&'static str, String)> {
    if samples_ms.is_empty() {
        return Ok(());
    }
    // The relative slack of rounding: a writer may print fewer than the 17 digits that round-trip.
    const ROUNDING: f64 = 1e-6;
    let mut sorted = samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let last = sorted.len() - 1;
    let every_sample = sorted.len() == samples as usize;
    for (name, q, stored) in [
        ("median_ms", 0.5, median),
        ("p10_ms", 0.1, p10),
        ("p90_ms", 0.9, p90),
    ] {
        let position = q * last as f64;
        let (low, high) = if every_sample {
            let exact = percentile(&sorted, q).unwrap_or(f64::NAN);
            (exact, exact)
        } else {
            (
                sorted[(position.floor() as usize).saturating_sub(1)],
                sorted[(position.ceil() as usize + 1).min(last)],
            )
        };
        if !(low * (1.0 - ROUNDING) <= stored && stored <= high * (1.0 + ROUNDING)) {
            let expected = if every_sample {
                format!("{low}")
            } else {
                format!("between {low} and {high}")
            };
            return Err((
                "samples_ms",
                format!(
                    "disagree with the row's statistics: the {} kept samples put {name} at \
                     {expected}, the row says {stored}; the row was edited, or its samples are \
                     another run's",
                    sorted.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> DeviceInfo {
        DeviceInfo::new("NVIDIA H200")
            .with_compute_capability(ComputeCapability { major: 9, minor: 0 })
            .with_driver("580.65.06")
            .with_l2_bytes(62_914_560)
    }

    fn run() -> Run {
        let timed = Record::new("softmax", "reduction", "llama-8b", "bfloat16", device())
            .with_input("x", vec![2048, 4096], "bfloat16")
            .with_param("dim", serde_json::json!(-1))
            .with_roofline(Some(5 * 2048 * 4096), Some(2 * 2048 * 4096 * 2))
            .with_roof("cuda_core.fp32")
            .with_timing("cuda_events", TimingStats::new(100, 0.02, 0.019, 0.022));
        let skipped = Record::new("softmax", "reduction", "huge", "float32", device())
            .with_skip("too large for the CPU");
        Run::new(
            RunMeta::new("abc123", "2026-11-30T04:00:00Z", "0.1.0", device()),
            vec![timed, skipped],
        )
    }

    fn load(text: &str) -> Result<Run, RecordsError> {
        Run::from_json_str(text, "r.json")
    }

    fn edit(f: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v = serde_json::to_value(run()).unwrap();
        f(&mut v);
        v.to_string()
    }

    #[test]
    fn round_trip() {
        let text = run().to_json_pretty().unwrap();
        assert_eq!(load(&text).unwrap(), run());
        assert!(text.contains("\"impl\": \"tileops\""));
        assert!(text.contains("\"compute_capability\": \"9.0\""));
    }

    #[test]
    fn truncated_and_malformed_files_are_errors_with_positions() {
        let text = run().to_json_pretty().unwrap();
        let err = load(&text[..text.len() / 2]).unwrap_err();
        assert!(
            matches!(err, RecordsError::Truncated { line: 2.., .. }),
            "{err}"
        );
        assert!(err.to_string().contains("truncated"), "{err}");
        let err = load("{\"schema\": 1, \"meta\": }").unwrap_err();
        assert!(
            matches!(
                err,
                RecordsError::Malformed {
                    line: 1,
                    column: 23,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            load("")
                .unwrap_err()
                .to_string()
                .contains("the file is empty")
        );
        let err = load(&edit(|v| v["records"][0]["flop"] = 1.into())).unwrap_err();
        assert!(err.to_string().contains("unknown field `flop`"), "{err}");
    }

    #[test]
    fn samples_that_disagree_with_the_statistics_are_refused() {
        let sampled = |samples: &[f64]| {
            let record = Record::new("softmax", "reduction", "w", "float32", device())
                .with_samples("cuda_events", samples)
                .unwrap();
            Run::new(
                RunMeta::new("abc123", "2026-11-30T04:00:00Z", "0.1.0", device()),
                vec![record],
            )
        };
        // Every sample kept (100), and thinned (5000 samples, 1000 kept).
        for count in [100u32, 5000] {
            let samples: Vec<f64> = (0..count).map(|i| 0.5 + f64::from(i % 97) * 1e-3).collect();
            let run = sampled(&samples);
            run.validate("r.json").unwrap();
            assert_eq!(run.records[0].samples_ms.len(), count.min(1000) as usize);
            // The row of the probe: median 5.0 ms beside samples around 0.5 ms.
            let mut edited = run.clone();
            edited.records[0].median_ms = Some(5.0);
            edited.records[0].p90_ms = Some(5.5);
            let err = edited.validate("r.json").unwrap_err().to_string();
            assert!(err.contains("`samples_ms`"), "{err}");
            assert!(err.contains("disagree with the row's statistics"), "{err}");
            assert!(err.contains("the row says 5"), "{err}");
            // A statistic rounded to 7 significant digits still agrees.
            let mut rounded = run.clone();
            let p10 = rounded.records[0].p10_ms.unwrap();
            rounded.records[0].p10_ms = Some(format!("{p10:.6e}").parse().unwrap());
            rounded.validate("r.json").unwrap();
        }
    }

    #[test]
    fn other_schema_version_is_refused() {
        let err = load(&edit(|v| v["schema"] = 2.into())).unwrap_err();
        assert!(
            matches!(err, RecordsError::Schema { found: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn invalid_values_name_record_and_field() {
        type Edit = fn(&mut serde_json::Value);
        let cases: [(&str, Edit); 8] = [
            ("dtype", |v| v["records"][0]["dtype"] = "complex64".into()),
            ("median_ms", |v| v["records"][0]["median_ms"] = 0.0.into()),
            ("median_ms", |v| v["records"][0]["median_ms"] = 0.5.into()),
            ("p90_ms", |v| {
                v["records"][0]["p90_ms"] = serde_json::Value::Null
            }),
            ("samples", |v| v["records"][0]["samples"] = 0.into()),
            ("median_ms", |v| v["records"][1]["median_ms"] = 1.0.into()),
            ("op", |v| v["records"][1]["op"] = " ".into()),
            ("git_revision", |v| v["meta"]["git_revision"] = "".into()),
        ];
        for (field, change) in cases {
            let err = load(&edit(change)).unwrap_err();
            assert!(
                matches!(&err, RecordsError::Invalid { field: f, .. } if f == field),
                "{field}: {err}"
            );
        }
        let err = load(&edit(|v| v["records"][0]["dtype"] = "complex64".into())).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("r.json: record 0 (softmax/llama-8b/complex64): `dtype`"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_rows_are_refused() {
        let mut r = run();
        r.records.push(r.records[0].clone());
        let err = load(&serde_json::to_string(&r).unwrap()).unwrap_err();
        assert!(err.to_string().contains("repeats record 0"), "{err}");
        // The same row of another implementation is not a duplicate.
        r.records[2].implementation = "torch".into();
        assert!(load(&serde_json::to_string(&r).unwrap()).is_ok());
    }

    #[test]
    fn save_validates_and_creates_directories() {
        let dir = std::env::temp_dir().join(format!("tileops-records-{}", std::process::id()));
        let path = dir.join("bench/run.json");
        run().save(&path).unwrap();
        assert_eq!(Run::load(&path).unwrap(), run());
        let mut bad = run();
        bad.records[0].p10_ms = Some(1.0);
        assert!(bad.save(&path).is_err());
        assert!(matches!(
            Run::load(dir.join("missing.json")),
            Err(RecordsError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn emulated_rows_are_untimed_and_round_trip() {
        let emu = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)");
        let ran = Record::new("softmax", "reduction", "decode", "float32", emu.clone())
            .with_roofline(Some(10), Some(20))
            .with_roof("cuda_core.fp32")
            .with_emulated_run();
        assert_eq!(ran.timing, EMULATED_TIMING);
        assert_eq!(ran.skipped.as_deref(), Some(EMULATED_NOTE));
        assert_eq!(
            (ran.samples, ran.median_ms, ran.p10_ms, ran.p90_ms),
            (0, None, None, None)
        );
        assert!(ran.is_emulated() && ran.stats().is_none() && ran.noise().is_none());
        // A later timing or skip replaces it: the method is the timing's.
        assert!(!ran.clone().with_skip("over budget").is_emulated());
        let run = Run::new(
            RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", emu),
            vec![ran],
        );
        let text = run.to_json_pretty().unwrap();
        assert!(text.contains("\"timing\": \"emulated\""), "{text}");
        assert!(text.contains("\"median_ms\": null"), "{text}");
        assert_eq!(load(&text).unwrap(), run);
        // The shape of the file is the skipped rows' of schema 1: the fields are all there.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let record = value["records"][0].as_object().unwrap();
        for field in [
            "timing",
            "samples",
            "median_ms",
            "p10_ms",
            "p90_ms",
            "skipped",
        ] {
            assert!(record.contains_key(field), "{field}");
        }
    }

    #[test]
    fn an_emulated_row_with_a_figure_is_refused() {
        let emu = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)");
        // Timed, then relabelled emulated: a figure from an emulator must never pass.
        let mut timed = Record::new("softmax", "reduction", "w", "float32", emu.clone())
            .with_timing("cuda_events", TimingStats::new(10, 1.0, 0.9, 1.1));
        timed.timing = EMULATED_TIMING.into();
        let run = Run::new(
            RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", emu.clone()),
            vec![timed],
        );
        let err = run.validate("r.json").unwrap_err();
        assert!(
            matches!(&err, RecordsError::Invalid { field, .. } if field == "timing"),
            "{err}"
        );
        assert!(err.to_string().contains("carries no timing"), "{err}");
        // The same with the stats only: skipped cleared, no numbers.
        let mut unmarked =
            Record::new("softmax", "reduction", "w", "float32", emu.clone()).with_emulated_run();
        unmarked.skipped = None;
        let run = Run::new(
            RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", emu),
            vec![unmarked],
        );
        assert!(run.validate("r.json").is_err());
        // And in a file: stats on an emulated row.
        let err = load(&edit(|v| {
            v["records"][1]["timing"] = "emulated".into();
            v["records"][1]["median_ms"] = 1.0.into();
        }))
        .unwrap_err();
        assert!(err.to_string().contains("`median_ms`"), "{err}");
    }

    #[test]
    fn partial_runs_round_trip_and_are_checked() {
        let mut r = run();
        r.meta = r
            .meta
            .with_partial(Partial::new("interrupted by SIGINT after 2 of 5 rows", 5));
        let text = r.to_json_pretty().unwrap();
        assert!(text.contains("\"partial\": {"), "{text}");
        assert_eq!(load(&text).unwrap(), r);
        // A complete run's file has no `partial` key at all: older readers still read it.
        assert!(!run().to_json_pretty().unwrap().contains("partial"));
        let err = load(&edit(|v| {
            v["meta"]["partial"] = serde_json::json!({"reason": "stopped", "planned_rows": 1})
        }))
        .unwrap_err();
        assert!(
            matches!(&err, RecordsError::Invalid { field, .. } if field == "partial.planned_rows"),
            "{err}"
        );
        let err = load(&edit(|v| {
            v["meta"]["partial"] = serde_json::json!({"reason": " ", "planned_rows": 9})
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("`partial.reason` is empty"),
            "{err}"
        );
    }

    #[test]
    fn a_byte_order_mark_is_ignored_and_other_bytes_are_named() {
        let text = run().to_json_pretty().unwrap();
        assert_eq!(load(&format!("\u{feff}{text}")).unwrap(), run());
        let dir = std::env::temp_dir().join(format!("tileops-records-bom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latin1.json");
        let mut bytes = text.into_bytes();
        bytes.splice(0..0, *b"\n\n  \xe9");
        std::fs::write(&path, bytes).unwrap();
        let err = Run::load(&path).unwrap_err();
        assert!(
            matches!(
                err,
                RecordsError::Malformed {
                    line: 3,
                    column: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_that_are_not_records_say_what_they_are() {
        let dir = std::env::temp_dir().join(format!("tileops-records-what-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let record = serde_json::to_string(&run().records[0]).unwrap();
        let cases = [
            (
                "array.json",
                format!("\n[{record}]"),
                (2, 1),
                "is a JSON array",
            ),
            (
                "profile.yaml",
                "# a profile\ndevice:\n  name: x\n".to_owned(),
                (1, 1),
                "looks like YAML (`# a profile`)",
            ),
            (
                "text.json",
                "hello".to_owned(),
                (1, 1),
                "is not JSON (it starts `hello`)",
            ),
            ("empty.json", " \n ".to_owned(), (2, 2), "the file is empty"),
        ];
        for (name, text, (line, column), expected) in cases {
            let path = dir.join(name);
            std::fs::write(&path, &text).unwrap();
            for err in [Run::load(&path).unwrap_err(), load(&text).unwrap_err()] {
                let shown = err.to_string();
                assert!(shown.contains(expected), "{name}: {shown}");
                assert!(
                    matches!(err, RecordsError::Malformed { line: l, column: c, .. } if (l, c) == (line, column)),
                    "{name}: {shown}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_deep_in_a_large_file_are_located_from_the_stream() {
        // A file of many megabytes, malformed near its end; the loader locates the error from
        // the parser's position (no second reading of the whole file as text), and still gives a
        // file of another schema that error first.
        let dir = std::env::temp_dir().join(format!("tileops-records-deep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut many = run();
        let template = many.records[0].clone();
        many.records = (0..20_000)
            .map(|i| {
                let mut r = template.clone();
                r.workload = format!("w{i}");
                r
            })
            .collect();
        let text = many.to_json_pretty().unwrap();
        assert!(text.len() > 8 << 20, "{} bytes", text.len());
        let lines = text.lines().count();
        let path = dir.join("deep.json");
        let broken = text.replacen("\"w19999\"", "\"w19999\" oops", 1);
        std::fs::write(&path, &broken).unwrap();
        let err = Run::load(&path).unwrap_err();
        let RecordsError::Malformed { line, .. } = err else {
            panic!("{err}")
        };
        assert!(line > lines - 100, "line {line} of {lines}");
        let at = text.find("\"w19999\"").unwrap() + 6;
        let latin1 = [&text.as_bytes()[..at], b"\xe9", &text.as_bytes()[at..]].concat();
        std::fs::write(&path, latin1).unwrap();
        let err = Run::load(&path).unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        // Another schema: valid JSON whose fields changed (a renamed field near the end).
        let other_schema = text.replacen("\"schema\": 1", "\"schema\": 7", 1).replacen(
            "\"w19999\"",
            "\"w19999\", \"renamed\": 0",
            1,
        );
        std::fs::write(&path, other_schema).unwrap();
        assert!(matches!(
            Run::load(&path).unwrap_err(),
            RecordsError::Schema { found: 7, .. }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_save_leaves_the_previous_file() {
        let dir = std::env::temp_dir().join(format!("tileops-records-keep-{}", std::process::id()));
        let path = dir.join("run.json");
        run().save(&path).unwrap();
        let before = std::fs::read(&path).unwrap();
        let mut bad = run();
        bad.records[0].p10_ms = Some(1.0);
        assert!(bad.save(&path).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // A directory at the path is not replaced.
        let err = run().save(&dir).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[3.0], 0.9), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert!(TimingStats::from_samples(&[1.0, f64::NAN]).is_none());
        assert!(TimingStats::from_samples(&[]).is_none());
        let r = run();
        assert!((r.records[0].noise().unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(r.records[1].stats(), None);
    }
}
