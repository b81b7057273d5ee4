//! The bench harness behind `cargo run --release --example bench_all`: every registered op on every
//! manifest workload case, timed, into one records file.
//!
//! For each [`Case`] (a registered op × a workload row × a dtype) the harness plans the op with the
//! registry's constructor hook, records the FLOPs and bytes its `eval_roofline` returns (never
//! computing any itself) and the roof it declares, and times calls of it:
//!
//! - **Counts from time budgets** ([`TimeBudget`]): one untimed cold call (kernel compile, first
//!   allocations), warm-up samples for 25 ms of wall time (at least two), then
//!   `100 ms / per-call time` timed samples clamped to 10–200. The statistics are the median, p10
//!   and p90 ([`TimingStats::from_samples`]); [`noise`] is `(p90 - p10) / median`.
//! - **On a GPU** (`timing: "cuda_events+l2_flush+read_sweep+spin_hold"`): CUDA events created
//!   with `CU_EVENT_DEFAULT`; before every sample, outside the timed region, a buffer of twice the
//!   L2 size is zeroed so no input is served from L2, then another buffer that size is read so
//!   that no line the zeroing left dirty is written back inside the timed region ([`L2Flush`];
//!   `--l2-flush memset` skips the read, and its rows say `cuda_events+l2_flush+spin_hold`); a
//!   one-thread spin kernel then holds the stream while the host enqueues the start event, the op
//!   and the end event, so the events time the kernels back to back rather than the host's launch
//!   latency. A sample whose enqueue outlasted the hold is retaken with a longer hold. (Timing a
//!   batch of calls between two events would also hide the launch, but every call after the
//!   first would find its inputs in L2, which is exactly what the flush is for; a hold keeps each
//!   sample one cold call.) An op that waits on the GPU inside its call cannot be held; its rows
//!   are timed without the hold and say so
//!   (`timing: "cuda_events+l2_flush+read_sweep"`, `"cuda_events+l2_flush"` with the memset
//!   only).
//! - **On the CPU** (`timing: "cpu_wall"`): the op's reference path, timed with
//!   [`std::time::Instant`]. The reference is slow (f64, one thread), so rows whose roofline exceeds
//!   a [`CpuBudget`] are recorded as skipped with the reason instead of timed: the whole CPU run
//!   then finishes in minutes on a small machine.
//! - **On an emulated device** (cuda-emu, [`Device::is_emulated`]; `timing: "emulated"`): the GPU
//!   code path runs, on the CPU, so it is checked, not timed. The timing machinery is set up and
//!   exercised once (flush buffer, spin kernel, events; its reading is thrown away), then each row
//!   within an [`EmulatedBudget`] runs its op **once** (random inputs, one call, the outputs read
//!   back) and is recorded without any timing ([`Record::with_emulated_run`]); rows over the budget
//!   are skipped with the reason, like the CPU's. An emulator's clock says nothing about a GPU, so
//!   no figure is ever recorded from it.
//!
//! Nothing is dropped: a manifest `bench_skip_reason`, a failed build, a failed `eval_roofline`, a
//! row over the CPU (or emulator) budget and a failed run each become a record with `skipped` set
//! to the reason.
//!
//! ```
//! use tileops::Device;
//! use tileops_bench::bench::{self, BenchConfig, CpuBudget, Quiet, Selection};
//! use tileops_bench::records::{DeviceInfo, RunMeta};
//!
//! // The decode softmax rows on the CPU; anything above 1 MiB per call is skipped with the reason.
//! let selection = Selection { ops: vec!["softmax".into()], families: vec![] };
//! let cases = bench::select(&selection)?;
//! let config = BenchConfig { cpu: CpuBudget { max_bytes: 1 << 20, max_flops: 1 << 22 }, ..Default::default() };
//! // Whoever starts the run stamps it: revision, date, version and the device its records name.
//! let meta = RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", DeviceInfo::new("cpu: doc"));
//! let run = bench::run(&Device::cpu(), meta, &cases, &config, &mut Quiet)?;
//! assert_eq!(run.records.len(), cases.len());
//! assert!(run.records.iter().any(|r| r.skipped.is_none()));
//! assert!(run.records.iter().all(|r| r.skipped.is_some() || r.timing == "cpu_wall"));
//! # Ok::<(), tileops_bench::bench::BenchError>(())
//! ```

pub(crate) mod emulator;
mod gpu;

pub use gpu::L2Flush;
pub(crate) use gpu::l2_bytes;

use std::collections::BTreeSet;
use std::time::Instant;

use super::records::{DeviceInfo, EMULATED_TIMING, Partial, Record, Run, RunMeta, TimingStats};
use tileops::registry::{self, BenchOp, OpRegistration, StaticValue, WorkloadCase};
use tileops::{DType, Device, Error, Roofline, Tensor};

/// The timing method of CPU rows.
pub const CPU_METHOD: &str = "cpu_wall";
/// The timing method of GPU rows: CUDA events, L2 flushed (memset, then a read sweep) before each
/// sample, stream held by a spin kernel while the sample is enqueued.
pub const GPU_METHOD: &str = gpu::METHOD;
/// The timing method of GPU rows whose op waits on the GPU inside its call, so the stream cannot
/// be held: CUDA events and the L2 flush, launch latency included.
pub const GPU_METHOD_UNHELD: &str = gpu::METHOD_UNHELD;
/// [`GPU_METHOD`] with the memset-only flush (`--l2-flush memset`, [`L2Flush::Memset`]).
pub const GPU_METHOD_MEMSET: &str = gpu::METHOD_MEMSET;
/// [`GPU_METHOD_UNHELD`] with the memset-only flush.
pub const GPU_METHOD_MEMSET_UNHELD: &str = gpu::METHOD_MEMSET_UNHELD;

/// The timing method of rows run on an emulated device: none, they ran once untimed
/// ([`EMULATED_TIMING`]).
pub const EMULATED_METHOD: &str = EMULATED_TIMING;

/// Warm-up samples taken at least, whatever the warm-up budget.
const MIN_WARMUP_SAMPLES: usize = 2;

/// How long to warm up and to measure, and the bounds on the number of timed samples.
///
/// ```
/// use tileops_bench::bench::TimeBudget;
/// let budget = TimeBudget::default(); // 25 ms warm-up, 100 ms measured, 10..=200 samples
/// assert_eq!(budget.samples(0.004), 200); // a 4 µs kernel: capped
/// assert_eq!(budget.samples(1.0), 100);
/// assert_eq!(budget.samples(300.0), 10); // a slow call: at least 10
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeBudget {
    /// Wall time of warm-up samples, ms (at least two samples are taken).
    pub warmup_ms: f64,
    /// Time of the timed samples together, ms.
    pub measure_ms: f64,
    /// The fewest timed samples.
    pub min_samples: u32,
    /// The most timed samples (and warm-up samples).
    pub max_samples: u32,
}

impl Default for TimeBudget {
    fn default() -> Self {
        TimeBudget {
            warmup_ms: 25.0,
            measure_ms: 100.0,
            min_samples: 10,
            max_samples: 200,
        }
    }
}

impl TimeBudget {
    /// The number of timed samples for a call of about `per_call_ms`: `measure_ms / per_call_ms`,
    /// rounded and clamped to `min_samples..=max_samples` (an unknown estimate gives the minimum).
    pub fn samples(&self, per_call_ms: f64) -> u32 {
        // `as` saturates: an infinite quotient (a zero estimate) gives the maximum, NaN the minimum.
        let wanted = (self.measure_ms / per_call_ms).round() as u64;
        let (lo, hi) = (self.min_samples.min(self.max_samples), self.max_samples);
        wanted.clamp(u64::from(lo), u64::from(hi)) as u32
    }

    /// Whether warm-up is over after `taken` samples and `elapsed_ms` of wall time.
    pub fn warmed_up(&self, taken: usize, elapsed_ms: f64) -> bool {
        taken >= MIN_WARMUP_SAMPLES
            && (elapsed_ms >= self.warmup_ms || taken >= self.max_samples as usize)
    }
}

/// The CPU backend's limit: rows whose one call moves more bytes or does more FLOPs than this are
/// skipped (with the reason) instead of timed on the reference path.
///
/// The reference runs in f64 on one thread; measured on a shared two-core machine it moves about
/// 17–60 MB/s of tensor data for float16/bfloat16 rows (conversions included) and 130 MB/s for
/// float32 ones, and a timed row costs at least 13 calls (a cold call, two warm-up samples, ten
/// timed ones). At the default, 8 MiB and 64 MFLOP per call, the slowest admitted row costs a
/// few seconds and the whole manifest (132 cases, 42 of them admitted) ran in 37 s there; the
/// full-size prefill shapes and the GEMMs, which only a GPU can time meaningfully, are skipped.
/// (Bytes are the model's, not the reference's: a RoPE decode row reads a few rows of its
/// cos/sin table, while the reference converts the whole table, so it costs more than its bytes
/// suggest; the margin covers it.)
///
/// ```
/// use tileops::Roofline;
/// use tileops_bench::bench::CpuBudget;
/// let budget = CpuBudget::default();
/// assert!(budget.skip_reason(&Roofline { flops: 1 << 20, bytes: 1 << 20 }).is_none());
/// let reason = budget.skip_reason(&Roofline { flops: 1 << 20, bytes: 1 << 30 }).unwrap();
/// assert!(reason.contains("1073741824 B per call (1073.7 MB)"), "{reason}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBudget {
    /// The most bytes (per `eval_roofline`) one timed call may move.
    pub max_bytes: u64,
    /// The most FLOPs (per `eval_roofline`) one timed call may do.
    pub max_flops: u64,
}

impl Default for CpuBudget {
    fn default() -> Self {
        CpuBudget {
            max_bytes: 8 << 20,
            max_flops: 64_000_000,
        }
    }
}

impl CpuBudget {
    /// `Some(reason)` when a call of this roofline is over the budget.
    pub fn skip_reason(&self, roofline: &Roofline) -> Option<String> {
        over_budget(
            roofline,
            (self.max_bytes, self.max_flops),
            "CPU backend",
            "the reference budget",
            ["--cpu-max-bytes", "--cpu-max-flops"],
        )
    }
}

/// The emulated device's limit: rows whose one call moves more bytes or does more FLOPs than this
/// are skipped (with the reason) instead of run.
///
/// cuda-emu runs every CUDA thread as a fiber on the CPU (and cuBLAS as a host GEMM); a row runs
/// once, not timed, so the budget only bounds the run's wall time. At the default, 32 MiB and
/// 4 GFLOP per call, every registered op has at least one row within it (the smallest GEMM, a
/// DeepSeek-V3 decode shape, moves 32.7 MB and does 3.9 GFLOP), and the whole manifest (132 cases,
/// about half of them run) took about a minute on the shared two-core development machine; the
/// large prefill shapes are skipped with the reason.
///
/// ```
/// use tileops::Roofline;
/// use tileops_bench::bench::EmulatedBudget;
/// let budget = EmulatedBudget::default();
/// assert!(budget.skip_reason(&Roofline { flops: 1 << 20, bytes: 1 << 20 }).is_none());
/// let reason = budget.skip_reason(&Roofline { flops: 1 << 20, bytes: 1 << 30 }).unwrap();
/// assert!(reason.starts_with("emulated device: 1073741824 B per call"), "{reason}");
/// assert!(reason.contains("over the emulator budget of 33554432 B"), "{reason}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmulatedBudget {
    /// The most bytes (per `eval_roofline`) one emulated call may move.
    pub max_bytes: u64,
    /// The most FLOPs (per `eval_roofline`) one emulated call may do.
    pub max_flops: u64,
    /// The most bytes a row over the budget may move and still be launched dry for its kernel
    /// ledger: its inputs are made and its launches logged, not run (the emulator's memory is
    /// the host's, so this bounds what the row allocates).
    pub max_dry_run_bytes: u64,
}

impl Default for EmulatedBudget {
    fn default() -> Self {
        EmulatedBudget {
            max_bytes: 32 << 20,
            max_flops: 4_000_000_000,
            max_dry_run_bytes: 4 << 30,
        }
    }
}

impl EmulatedBudget {
    /// `Some(reason)` when a call of this roofline is over the budget.
    pub fn skip_reason(&self, roofline: &Roofline) -> Option<String> {
        over_budget(
            roofline,
            (self.max_bytes, self.max_flops),
            "emulated device",
            "the emulator budget",
            ["--emu-max-bytes", "--emu-max-flops"],
        )
    }
}

/// The skip reason of a row over `(max_bytes, max_flops)`: bytes first, then FLOPs.
fn over_budget(
    roofline: &Roofline,
    (max_bytes, max_flops): (u64, u64),
    backend: &str,
    budget: &str,
    [bytes_flag, flops_flag]: [&str; 2],
) -> Option<String> {
    // Exact counts: a row just over the limit must not read "8.4 MB, over 8.4 MB".
    let over = |value: u64, limit: u64, unit: &str, scaled: String, flag: &str| {
        format!(
            "{backend}: {value} {unit} per call ({scaled}), over {budget} of {limit} {unit}; a \
             GPU run times it ({flag} raises the budget)"
        )
    };
    if roofline.bytes > max_bytes {
        return Some(over(
            roofline.bytes,
            max_bytes,
            "B",
            format!("{:.1} MB", roofline.bytes as f64 / 1e6),
            bytes_flag,
        ));
    }
    if roofline.flops > max_flops {
        return Some(over(
            roofline.flops,
            max_flops,
            "FLOP",
            format!("{:.1} MFLOP", roofline.flops as f64 / 1e6),
            flops_flag,
        ));
    }
    None
}

/// Everything a run needs besides the device and the cases.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BenchConfig {
    /// Warm-up and measurement budgets.
    pub time: TimeBudget,
    /// The CPU backend's row budget (unused on a GPU).
    pub cpu: CpuBudget,
    /// The emulated device's row budget (unused elsewhere).
    pub emulated: EmulatedBudget,
    /// The seed of every op's random inputs.
    pub seed: u64,
    /// How the L2 is flushed before each GPU sample (unused elsewhere; on an emulated device it
    /// is exercised once, untimed).
    pub l2_flush: L2Flush,
}

/// Which ops to run: by manifest name and by family. Empty lists select everything; several names
/// in one list are alternatives; both lists must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// `--op` names.
    pub ops: Vec<String>,
    /// `--family` names.
    pub families: Vec<String>,
}

/// One thing to time: a registered op on one workload row in one dtype.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The op's registration.
    pub op: &'static OpRegistration,
    /// The workload row and dtype.
    pub case: WorkloadCase,
}

impl Case {
    /// `op/label-dtype`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.op.name, self.case.name())
    }

    /// The inputs the case binds, in signature order: name, shape (from the row's
    /// `<name>_shape`) and dtype (the declared one when the manifest fixes it, else the case's).
    pub fn inputs(&self) -> Vec<(String, Vec<u64>, DType)> {
        self.op
            .inputs
            .iter()
            .filter_map(|decl| {
                let shape = self.case.workload.shape(decl.name)?;
                let dtype = decl
                    .dtype
                    .trim()
                    .parse::<DType>()
                    .unwrap_or(self.case.dtype);
                Some((
                    decl.name.to_owned(),
                    shape.iter().map(|&d| d as u64).collect(),
                    dtype,
                ))
            })
            .collect()
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `--op` names no registered op.
    #[error("no registered op is named `{name}`{} (registered: {})", did_you_mean(name, known), known.join(", "))]
    UnknownOp {
        /// The name given.
        name: String,
        /// The registered names.
        known: Vec<String>,
    },
    /// `--family` names no family of a registered op.
    #[error("no registered op is of family `{name}`{} (families: {})", did_you_mean(name, known), known.join(", "))]
    UnknownFamily {
        /// The family given.
        name: String,
        /// The families of the registered ops.
        known: Vec<String>,
    },
    /// The filters together select nothing.
    #[error("no case matches --op {ops:?} together with --family {families:?}")]
    Empty {
        /// The op names given.
        ops: Vec<String>,
        /// The families given.
        families: Vec<String>,
    },
    /// A workload case appears twice, so two records would share one identity.
    #[error(
        "{op}: case `{case}` appears twice (a repeated workload label or dtype in {file}); \
         make labels unique"
    )]
    DuplicateCase {
        /// The op.
        op: String,
        /// `label-dtype`.
        case: String,
        /// The manifest file.
        file: String,
    },
    /// The GPU timing machinery (events, flush buffer and sweep, spin kernel) could not be set up (or, on an
    /// emulated device, failed its one exercise).
    #[error("cannot set up GPU timing on {device}: {source}")]
    Timer {
        /// The device.
        device: String,
        /// What failed (boxed: a bench error stays small on the `Ok` path of every call).
        #[source]
        source: Box<Error>,
    },
}

/// The known name closest to `name` (Jaro-Winkler similarity at least 0.8, as clap suggests
/// mistyped flags), if any.
///
/// ```
/// let known = ["rms_norm".to_owned(), "softmax".to_owned()];
/// assert_eq!(tileops_bench::bench::closest("sofmax", &known), Some("softmax"));
/// assert_eq!(tileops_bench::bench::closest("gemm", &known), None);
/// ```
pub fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(name, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.as_str())
}

/// `"; did you mean `x`?"` for an error message, empty without a close name.
pub fn did_you_mean(name: &str, known: &[String]) -> String {
    closest(name, known).map_or_else(String::new, |k| format!("; did you mean `{k}`?"))
}

/// The cases of the registered ops that `selection` picks, in registry order (ops by name, then
/// manifest order).
///
/// # Errors
/// [`BenchError`] for an unknown op or family, an empty selection, or a repeated case.
pub fn select(selection: &Selection) -> Result<Vec<Case>, BenchError> {
    let all = registry::all();
    for name in &selection.ops {
        if !all.iter().any(|op| op.name == name.as_str()) {
            return Err(BenchError::UnknownOp {
                name: name.clone(),
                known: all.iter().map(|op| op.name.to_owned()).collect(),
            });
        }
    }
    let families: BTreeSet<&str> = all.iter().map(|op| op.family).collect();
    for name in &selection.families {
        if !families.contains(name.as_str()) {
            return Err(BenchError::UnknownFamily {
                name: name.clone(),
                known: families.iter().map(|f| (*f).to_owned()).collect(),
            });
        }
    }
    let picked = |list: &[String], value: &str| list.is_empty() || list.iter().any(|v| v == value);
    let mut cases = Vec::new();
    for op in all {
        if !picked(&selection.ops, op.name) || !picked(&selection.families, op.family) {
            continue;
        }
        let mut seen = BTreeSet::new();
        for workload in op.workloads {
            for case in workload.cases() {
                if !seen.insert(case.name()) {
                    return Err(BenchError::DuplicateCase {
                        op: op.name.to_owned(),
                        case: case.name(),
                        file: op.manifest_file.to_owned(),
                    });
                }
                cases.push(Case { op, case });
            }
        }
    }
    if cases.is_empty() {
        return Err(BenchError::Empty {
            ops: selection.ops.clone(),
            families: selection.families.clone(),
        });
    }
    Ok(cases)
}

/// Follows a run's progress (a progress bar, a log line per case).
pub trait Observer {
    /// The run is about to time `total` cases.
    fn started(&mut self, total: usize) {
        let _ = total;
    }
    /// Case `index` (from 0) starts.
    fn case_started(&mut self, index: usize, case: &Case) {
        let _ = (index, case);
    }
    /// Case `index` ended with `record` (timed or skipped).
    fn case_finished(&mut self, index: usize, record: &Record) {
        let _ = (index, record);
    }
    /// Asked before each case: `Some(reason)` (`"interrupted by SIGINT"`) stops the run there.
    /// The cases finished so far are kept and the run is marked partial ([`Partial`]), so a tool
    /// that is interrupted saves every row it finished.
    fn stop_requested(&mut self) -> Option<String> {
        None
    }
}

/// An observer that reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// Times every case on `device` and returns the run: `meta` (which tool started it, when, on
/// which device: the records carry `meta.device`), one record per case, in order, and when the
/// observer asks to stop, the cases finished so far and `meta.partial` saying so. The run is
/// validated as [`Run::save`] would. On an emulated device nothing is timed: each case within
/// [`BenchConfig::emulated`] runs once and is recorded untimed (see the module docs).
///
/// # Errors
/// [`BenchError::Timer`] when the GPU timing machinery cannot be set up (on an emulated device:
/// when its one exercise fails); errors of single cases are skipped records, never an error of the
/// run.
pub fn run(
    device: &Device,
    mut meta: RunMeta,
    cases: &[Case],
    config: &BenchConfig,
    observer: &mut dyn Observer,
) -> Result<Run, BenchError> {
    let mut timer = Timer::new(device, config.l2_flush).map_err(|source| BenchError::Timer {
        device: device.to_string(),
        source: Box::new(source),
    })?;
    observer.started(cases.len());
    let mut records = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        // Between rows only: a row cut in the middle would have no statistics to keep.
        if let Some(reason) = observer.stop_requested() {
            meta.partial = Some(Partial::new(
                format!("{reason} after {index} of {} rows", cases.len()),
                cases.len(),
            ));
            break;
        }
        observer.case_started(index, case);
        let record = bench_case(device, &meta.device, case, config, &mut timer);
        observer.case_finished(index, &record);
        records.push(record);
    }
    Ok(Run::new(meta, records))
}

/// The timer of one backend.
enum Timer {
    Cpu,
    Gpu(Box<gpu::GpuTimer>),
    /// An emulated device: nothing is timed; [`Timer::cold`] is the one call of a row. The
    /// ledger's tools, or why the rows get no kernel ledger.
    Emulated(Device, Result<LedgerTools, String>),
}

/// What an emulated row's kernel ledger is made with: the emulator's launch log and dry-run
/// switch, and the SASS ledger that prices each launch.
struct LedgerTools {
    emulator: emulator::Emulator,
    sass: &'static crate::ledger::Ledger,
}

impl LedgerTools {
    fn new() -> Result<LedgerTools, String> {
        Ok(LedgerTools {
            emulator: emulator::Emulator::attach()?,
            sass: crate::ledger::Ledger::builtin().map_err(|e| e.to_string())?,
        })
    }
}

impl Timer {
    fn new(device: &Device, flush: L2Flush) -> Result<Timer, Error> {
        Ok(if device.is_emulated() {
            // The machinery a GPU run depends on is set up and exercised once, its reading
            // discarded: the plumbing is checked, no figure is taken.
            gpu::GpuTimer::new(device, flush)?.exercise()?;
            Timer::Emulated(device.clone(), LedgerTools::new())
        } else if device.is_cuda() {
            Timer::Gpu(Box::new(gpu::GpuTimer::new(device, flush)?))
        } else {
            Timer::Cpu
        })
    }

    /// The method of the current case's samples (set by [`Timer::cold`]).
    fn method(&self) -> &'static str {
        match self {
            Timer::Cpu => CPU_METHOD,
            Timer::Gpu(gpu) => gpu.method(),
            Timer::Emulated(..) => EMULATED_METHOD,
        }
    }

    /// Starts a case: one call, untimed, completed (compiles and loads kernels, makes first
    /// allocations; on a GPU, also finds out whether the op can be held). On an emulated device,
    /// the row's only call: completed and its outputs read back, so every kernel fault surfaces.
    fn cold(&mut self, op: &dyn BenchOp, inputs: &[Tensor]) -> Result<(), Error> {
        match self {
            Timer::Cpu => op.run(inputs).map(drop),
            Timer::Gpu(gpu) => gpu.cold(op, inputs),
            Timer::Emulated(device, _) => {
                let outputs = op.run(inputs)?;
                device.synchronize()?;
                for output in &outputs {
                    output.to_bytes()?;
                }
                Ok(())
            }
        }
    }

    /// One timed call, ms.
    fn sample(&mut self, op: &dyn BenchOp, inputs: &[Tensor]) -> Result<f64, Error> {
        match self {
            Timer::Emulated(device, _) => Err(Error::NoDevice {
                reason: format!("{device} is emulated: its calls are run, never timed"),
            }),
            Timer::Cpu => {
                let start = Instant::now();
                let outputs = op.run(inputs)?;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                // Freeing the outputs is not part of the call.
                drop(outputs);
                Ok(ms)
            }
            Timer::Gpu(gpu) => gpu.sample(op, inputs),
        }
    }
}

/// The record of one case: identity, inputs and params first, then roof, roofline and timing, or
/// the reason it was skipped.
fn bench_case(
    device: &Device,
    info: &DeviceInfo,
    case: &Case,
    config: &BenchConfig,
    timer: &mut Timer,
) -> Record {
    let mut record = Record::new(
        case.op.name,
        case.op.family,
        case.case.workload.label,
        case.case.dtype.to_string(),
        info.clone(),
    );
    for (name, shape, dtype) in case.inputs() {
        record = record.with_input(name, shape, dtype.to_string());
    }
    for (name, value) in case.case.workload.params {
        record = record.with_param(*name, param_json(value));
    }
    // The params the row leaves to the manifest's defaults, with those defaults: a record says
    // every value its op ran with (the PyTorch baseline reads them from it).
    for param in case.op.params {
        let given = case
            .case
            .workload
            .params
            .iter()
            .any(|(n, _)| *n == param.name);
        if let (false, Some(default)) = (given, &param.default) {
            record = record.with_param(param.name, param_json(default));
        }
    }
    if let Some(reason) = case.case.workload.bench_skip_reason {
        return record.with_skip(format!("manifest bench_skip_reason: {reason}"));
    }
    let planned = match (case.op.build)(device, &case.case) {
        Ok(planned) => planned,
        Err(e) => return record.with_skip(format!("planning the op failed: {e}")),
    };
    if planned.op_name() != case.op.name {
        return record.with_skip(format!(
            "registry error: the build hook of `{}` planned `{}`",
            case.op.name,
            planned.op_name()
        ));
    }
    // Each input's dtype as the plan took it (an fp8 cache is float8_e4m3fn, not the case's).
    for (name, dtype) in planned.input_dtypes() {
        record = record.with_input_dtype(name, dtype.to_string());
    }
    record = record.with_roof(planned.roof().0);
    let roofline = match planned.roofline() {
        Ok(roofline) => roofline,
        Err(e) => {
            return record.with_skip(format!(
                "eval_roofline failed, so the row could not be priced and was not timed: {e}"
            ));
        }
    };
    record = record.with_roofline(Some(roofline.flops), Some(roofline.bytes));
    if device.is_cpu()
        && let Some(reason) = config.cpu.skip_reason(&roofline)
    {
        return record.with_skip(reason);
    }
    if let Timer::Emulated(..) = timer {
        return emulated_row(record, planned.as_ref(), &roofline, config, timer);
    }
    match time_op(planned.as_ref(), config, timer) {
        Ok(samples) => {
            let method = timer.method();
            // `time_op` checked the samples, so this is never the skip.
            match record.clone().with_samples(method, &samples) {
                Some(timed) => timed,
                None => record.with_skip("the timer returned a sample that is not a positive time"),
            }
        }
        Err(reason) => record.with_skip(reason),
    }
}

/// A row on an emulated device: run once, untimed, with its kernel ledger; a row over the
/// emulator's budget is launched dry for its ledger (launch shapes only, nothing run) when it fits
/// [`EmulatedBudget::max_dry_run_bytes`], else skipped. A row whose ledger cannot be made says why
/// in its `skipped` text.
fn emulated_row(
    record: Record,
    op: &dyn BenchOp,
    roofline: &Roofline,
    config: &BenchConfig,
    timer: &mut Timer,
) -> Record {
    let over = config.emulated.skip_reason(roofline);
    if let Timer::Emulated(_, Err(why)) = timer {
        let why = format!("no kernel ledger: {why}");
        return match over {
            Some(reason) => record.with_skip(format!("{reason}; {why}")),
            None => match run_once(op, config, timer) {
                Ok(()) => with_note(record.with_emulated_run(), &why),
                Err(reason) => record.with_skip(reason),
            },
        };
    }
    let Timer::Emulated(_, Ok(tools)) = timer else {
        return record.with_skip("internal error: an emulated row on a timer that is not emulated");
    };
    if let Some(reason) = &over
        && roofline.bytes > config.emulated.max_dry_run_bytes
    {
        return record.with_skip(format!(
            "{reason}; too large to launch dry for its kernel ledger ({} B over the dry-run \
             limit of {} B)",
            roofline.bytes, config.emulated.max_dry_run_bytes
        ));
    }
    let dry = over.is_some();
    // A dry launch runs no kernel, so its inputs' values do not matter: placeholders
    // (uninitialised) cost a fraction of random ones.
    let inputs = match if dry {
        op.placeholder_inputs()
    } else {
        op.random_inputs(config.seed)
    } {
        Ok(inputs) => inputs,
        Err(e) => return record.with_skip(format!("making random inputs failed: {e}")),
    };
    let device = op_device(&inputs);
    let captured = tools
        .emulator
        .capture(dry, || -> Result<Vec<Tensor>, Error> {
            let outputs = op.run(&inputs)?;
            if let Some(device) = &device {
                device.synchronize()?;
            }
            if !dry {
                // Read back, so that every kernel fault surfaces (a dry run computed nothing).
                for output in &outputs {
                    output.to_bytes()?;
                }
            }
            Ok(outputs)
        });
    let (outputs, launches) = match captured {
        Ok((Ok(outputs), launches)) => (outputs, launches),
        Ok((Err(e), _)) => return record.with_skip(format!("running the op failed: {e}")),
        Err(why) => return record.with_skip(format!("no kernel ledger: {why}")),
    };
    // What the call streams: the op's own count when it declares one, else the larger of what it
    // reads and what it writes. It writes its
    // outputs; it reads what its manifest's bytes count beyond them (K and V both, for attention
    // decode; x and the residual both, for fused_add_rms_norm), which is only the part of a
    // table or cache it touches (rope's cos/sin rows at the positions, a ragged batch's keys to
    // each sequence's length), not the whole input tensor.
    let written: u64 = outputs
        .iter()
        .map(|t| (t.numel() * t.dtype().size_in_bytes()) as u64)
        .sum();
    // A tiled kernel that reads its inputs more than once says what it streams.
    let streamed_bytes = op
        .streamed_bytes()
        .unwrap_or_else(|| roofline.bytes.saturating_sub(written).max(written));
    let shapes: Vec<(Vec<usize>, usize)> = inputs
        .iter()
        .map(|t| (t.shape().to_vec(), t.dtype().size_in_bytes()))
        .collect();
    let call = emulator::CallBytes {
        streamed: streamed_bytes,
        reloaded: emulator::reloaded_bytes(&shapes),
        written,
    };
    let ledger = emulator::ledger_of_launches(&launches, &call, tools.sass);
    let record = match over {
        Some(reason) => record.with_skip(format!(
            "{reason}; launched dry (shapes only, nothing run) for its kernel ledger"
        )),
        None => record.with_emulated_run(),
    };
    match ledger {
        Ok(ledger) => record.with_ledger(ledger),
        Err(why) => with_note(record, &format!("no kernel ledger: {why}")),
    }
}

/// The device of a call's inputs, to wait for (`None` without an input).
fn op_device(inputs: &[Tensor]) -> Option<Device> {
    inputs.first().map(|t| t.device().clone())
}

/// Appends a clause to a row's `skipped` text.
fn with_note(mut record: Record, note: &str) -> Record {
    if let Some(skipped) = &mut record.skipped {
        skipped.push_str("; ");
        skipped.push_str(note);
    }
    record
}

/// The one call of a row on an emulated device, untimed; `Err` is the skip reason.
fn run_once(op: &dyn BenchOp, config: &BenchConfig, timer: &mut Timer) -> Result<(), String> {
    let inputs = op
        .random_inputs(config.seed)
        .map_err(|e| format!("making random inputs failed: {e}"))?;
    timer
        .cold(op, &inputs)
        .map_err(|e| format!("running the op failed: {e}"))
}

/// Cold call, warm-up, then the timed samples; `Err` is the skip reason.
fn time_op(op: &dyn BenchOp, config: &BenchConfig, timer: &mut Timer) -> Result<Vec<f64>, String> {
    let budget = &config.time;
    let inputs = op
        .random_inputs(config.seed)
        .map_err(|e| format!("making random inputs failed: {e}"))?;
    let failed = |e: Error| format!("running the op failed: {e}");
    timer.cold(op, &inputs).map_err(failed)?;
    let warmup_start = Instant::now();
    let mut warmup = Vec::new();
    while !budget.warmed_up(warmup.len(), warmup_start.elapsed().as_secs_f64() * 1e3) {
        warmup.push(timer.sample(op, &inputs).map_err(failed)?);
    }
    let per_call_ms = TimingStats::from_samples(&warmup).map_or(f64::NAN, |s| s.median_ms);
    let n = budget.samples(per_call_ms);
    let samples = (0..n)
        .map(|_| timer.sample(op, &inputs))
        .collect::<Result<Vec<f64>, Error>>()
        .map_err(failed)?;
    // The samples are the record's (Record::with_samples); checked here so that a bad one is
    // the row's skip reason.
    if TimingStats::from_samples(&samples).is_some() {
        return Ok(samples);
    }
    Err(format!(
        "the timer returned a sample that is not a positive time ({} samples, min {:?})",
        samples.len(),
        samples.iter().copied().reduce(f64::min)
    ))
}

/// The relative spread of a timed record, `(p90 - p10) / median`; `None` for a skipped one.
pub fn noise(record: &Record) -> Option<f64> {
    record.noise()
}

/// A manifest param as JSON; integers beyond i64 and non-finite floats as strings (JSON has
/// neither).
fn param_json(value: &StaticValue) -> serde_json::Value {
    use serde_json::Value;
    match *value {
        StaticValue::None => Value::Null,
        StaticValue::Bool(b) => Value::Bool(b),
        StaticValue::Int(i) => {
            i64::try_from(i).map_or_else(|_| Value::String(i.to_string()), Value::from)
        }
        StaticValue::Float(f) => serde_json::Number::from_f64(f)
            .map_or_else(|| Value::String(f.to_string()), Value::Number),
        StaticValue::Str(s) => Value::String(s.to_owned()),
        StaticValue::List(items) => Value::Array(items.iter().map(param_json).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_counts_follow_the_budget_and_clamp() {
        let b = TimeBudget::default();
        assert_eq!(b.samples(0.5), 200);
        assert_eq!(b.samples(0.6), 167);
        assert_eq!(b.samples(2.0), 50);
        assert_eq!(b.samples(10.0), 10);
        assert_eq!(b.samples(9.0), 11);
        assert_eq!(b.samples(1e6), 10);
        assert_eq!(b.samples(0.0), 200);
        assert_eq!(b.samples(f64::NAN), 10);
        assert_eq!(b.samples(-1.0), 10);
        let odd = TimeBudget {
            min_samples: 50,
            max_samples: 20,
            ..b
        };
        assert_eq!(odd.samples(1.0), 20, "a max below the min wins");
    }

    #[test]
    fn warm_up_takes_two_samples_then_the_budget() {
        let b = TimeBudget::default();
        assert!(!b.warmed_up(0, 1000.0));
        assert!(!b.warmed_up(1, 1000.0));
        assert!(b.warmed_up(2, 25.0));
        assert!(!b.warmed_up(2, 24.9));
        assert!(!b.warmed_up(199, 1.0));
        assert!(b.warmed_up(200, 1.0));
    }

    #[test]
    fn cpu_budget_skips_by_bytes_then_flops() {
        let b = CpuBudget {
            max_bytes: 1000,
            max_flops: 5000,
        };
        let r = |flops, bytes| Roofline { flops, bytes };
        assert_eq!(
            b.skip_reason(&r(5000, 1000)),
            None,
            "the limits are inclusive"
        );
        let bytes = b.skip_reason(&r(1, 1001)).unwrap();
        assert_eq!(
            bytes,
            "CPU backend: 1001 B per call (0.0 MB), over the reference budget of 1000 B; a GPU \
             run times it (--cpu-max-bytes raises the budget)"
        );
        let flops = b.skip_reason(&r(5001, 10)).unwrap();
        assert!(
            flops.starts_with("CPU backend: 5001 FLOP per call (0.0 MFLOP), over the"),
            "{flops}"
        );
        // The default keeps the decode and LM-head rows and skips the prefill shapes.
        let d = CpuBudget::default();
        let softmax = |m: u64, n: u64, elem: u64| r(5 * m * n, 2 * m * n * elem);
        assert!(d.skip_reason(&softmax(32, 4096, 2)).is_none());
        assert!(d.skip_reason(&softmax(4, 131_072, 4)).is_none());
        assert!(d.skip_reason(&softmax(1024, 4096, 2)).is_some());
        assert!(d.skip_reason(&softmax(1024, 32_768, 2)).is_some());
        // A decode GEMM is over the FLOP limit even where its bytes would pass.
        assert!(d.skip_reason(&r(2 * 16 * 1024 * 4096, 1 << 20)).is_some());
    }

    #[test]
    fn emulated_budget_skips_with_its_own_reason_and_admits_a_row_of_every_op() {
        let b = EmulatedBudget {
            max_bytes: 1000,
            max_flops: 5000,
            ..EmulatedBudget::default()
        };
        let r = |flops, bytes| Roofline { flops, bytes };
        assert_eq!(b.skip_reason(&r(5000, 1000)), None);
        assert_eq!(
            b.skip_reason(&r(1, 1001)).unwrap(),
            "emulated device: 1001 B per call (0.0 MB), over the emulator budget of 1000 B; a \
             GPU run times it (--emu-max-bytes raises the budget)"
        );
        assert!(
            b.skip_reason(&r(5001, 10))
                .unwrap()
                .ends_with("(--emu-max-flops raises the budget)")
        );
        // The promise of the default: every registered op has a row the emulator runs.
        let budget = EmulatedBudget::default();
        let cpu = Device::cpu();
        for op in registry::all() {
            let admitted = op
                .workloads
                .iter()
                .filter(|w| w.bench_skip_reason.is_none())
                .flat_map(|w| w.cases())
                .filter_map(|case| (op.build)(&cpu, &case).ok()?.roofline().ok())
                .any(|roofline| budget.skip_reason(&roofline).is_none());
            assert!(admitted, "{}: no workload within {budget:?}", op.name);
        }
    }

    #[test]
    fn params_become_json() {
        use serde_json::json;
        static LIST: [StaticValue; 2] = [StaticValue::Int(0), StaticValue::Int(2)];
        assert_eq!(param_json(&StaticValue::None), json!(null));
        assert_eq!(param_json(&StaticValue::Int(-1)), json!(-1));
        assert_eq!(
            param_json(&StaticValue::Int(i128::MAX)),
            json!(i128::MAX.to_string())
        );
        assert_eq!(param_json(&StaticValue::Float(1e-6)), json!(1e-6));
        assert_eq!(param_json(&StaticValue::Float(f64::INFINITY)), json!("inf"));
        assert_eq!(param_json(&StaticValue::List(&LIST)), json!([0, 2]));
        assert_eq!(param_json(&StaticValue::Str("mean")), json!("mean"));
    }

    /// The metadata of a test run on the CPU.
    fn meta() -> RunMeta {
        RunMeta::new(
            "test",
            "2026-11-30T00:00:00Z",
            env!("CARGO_PKG_VERSION"),
            DeviceInfo::new("cpu: test"),
        )
    }

    /// Stops the run once `after` cases have finished.
    struct StopAfter {
        after: usize,
        finished: usize,
    }

    impl Observer for StopAfter {
        fn case_finished(&mut self, _index: usize, _record: &Record) {
            self.finished += 1;
        }
        fn stop_requested(&mut self) -> Option<String> {
            (self.finished >= self.after).then(|| "interrupted by a test".to_owned())
        }
    }

    #[test]
    fn a_stop_between_rows_keeps_the_finished_rows_and_marks_the_run_partial() {
        let cases = select(&Selection {
            ops: vec!["rms_norm".into()],
            families: vec![],
        })
        .unwrap();
        assert!(cases.len() > 2);
        // Over the budget, every row is a quick skip.
        let config = BenchConfig {
            cpu: CpuBudget {
                max_bytes: 0,
                max_flops: 0,
            },
            ..BenchConfig::default()
        };
        let mut stop = StopAfter {
            after: 2,
            finished: 0,
        };
        let run = run(&Device::cpu(), meta(), &cases, &config, &mut stop).unwrap();
        assert_eq!(run.records.len(), 2);
        let partial = run.meta.partial.as_ref().unwrap();
        assert_eq!(
            partial.reason,
            format!("interrupted by a test after 2 of {} rows", cases.len())
        );
        assert_eq!(partial.planned_rows, cases.len());
        run.validate("in memory").unwrap();
        // Stopped before the first row: an empty, valid, partial run.
        let mut at_once = StopAfter {
            after: 0,
            finished: 0,
        };
        let empty = super::run(&Device::cpu(), meta(), &cases, &config, &mut at_once).unwrap();
        assert!(empty.records.is_empty() && empty.meta.partial.is_some());
        empty.validate("in memory").unwrap();
        // Never asked to stop: complete.
        let whole = super::run(&Device::cpu(), meta(), &cases, &config, &mut Quiet).unwrap();
        assert_eq!(whole.records.len(), cases.len());
        assert!(whole.meta.partial.is_none());
    }

    #[test]
    fn records_carry_every_param_with_the_manifest_defaults() {
        let cases = select(&Selection::default()).unwrap();
        // Over the budget, every row is a quick skip; its identity and params are still written.
        let config = BenchConfig {
            cpu: CpuBudget {
                max_bytes: 0,
                max_flops: 0,
            },
            ..BenchConfig::default()
        };
        let run = run(&Device::cpu(), meta(), &cases, &config, &mut Quiet).unwrap();
        assert_eq!(run.records.len(), cases.len());
        for (case, record) in cases.iter().zip(&run.records) {
            for param in case.op.params {
                let mut given = case.case.workload.params.iter();
                let given = given.find(|(name, _)| *name == param.name).map(|(_, v)| v);
                let want = given.or(param.default.as_ref()).map(param_json);
                assert_eq!(
                    record.params.get(param.name),
                    want.as_ref(),
                    "{}: {}",
                    case.name(),
                    param.name
                );
            }
        }
        // rms_norm's rows leave eps to the manifest's 1e-6.
        let rms = run.records.iter().find(|r| r.op == "rms_norm").unwrap();
        assert_eq!(rms.params["eps"], serde_json::json!(1e-6));
    }

    #[test]
    fn selection_checks_names() {
        let all = select(&Selection::default()).unwrap();
        assert!(all.iter().any(|c| c.op.name == "softmax"));
        let err = select(&Selection {
            ops: vec!["sofmax".into()],
            families: vec![],
        })
        .unwrap_err();
        assert!(err.to_string().contains("registered: "), "{err}");
        assert!(err.to_string().contains("softmax"), "{err}");
        let err = select(&Selection {
            ops: vec![],
            families: vec!["nope".into()],
        })
        .unwrap_err();
        assert!(matches!(err, BenchError::UnknownFamily { .. }), "{err}");
        let err = select(&Selection {
            ops: vec!["softmax".into()],
            families: vec!["normalization".into()],
        })
        .unwrap_err();
        assert!(matches!(err, BenchError::Empty { .. }), "{err}");
        let norms = select(&Selection {
            ops: vec![],
            families: vec!["normalization".into()],
        })
        .unwrap();
        assert!(norms.iter().all(|c| c.op.family == "normalization"));
        // Inputs in signature order, shaped by the row.
        let shapes = |c: &Case| -> Vec<(String, Vec<u64>)> {
            c.inputs().into_iter().map(|(n, s, _)| (n, s)).collect()
        };
        let prefill = [
            ("x".to_owned(), vec![2048, 4096]),
            ("weight".to_owned(), vec![4096]),
        ];
        assert!(
            norms
                .iter()
                .filter(|c| c.op.name == "rms_norm")
                .any(|c| shapes(c) == prefill),
            "no rms_norm case binds {prefill:?}"
        );
    }
}
