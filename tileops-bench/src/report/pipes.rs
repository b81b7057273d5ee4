//! The pipes behind the roof: a record's kernel ledger priced against a profile's SM pipes.
//!
//! The spec's roofline has two terms, memory and compute. A kernel can be held below both by the
//! rate its SMs issue instructions or by its special-function units (MUFU: `ex2`, `rcp`, `rsqrt`),
//! which no roofline sees. From a record's [`Ledger`] (instructions and MUFU operations of every
//! launch, from the sm_90 SASS; launch shapes and traffic from the emulator) this prices four
//! times, all in ms:
//!
//! | pipe | time |
//! | --- | --- |
//! | memory | the kernel's own DRAM bytes (the emulator's unique sectors, else the manifest's `bytes`) ÷ `hbm.effective` |
//! | compute | the manifest's `flops` ÷ the roof's effective rate (the spec's term) |
//! | issue | per launch, the busiest SM's share: ⌈CTAs ÷ SMs⌉ × thread-instructions per CTA ÷ (`sm.issue.effective` ÷ SMs); summed over launches |
//! | SFU | the same with MUFU operations and `sm.sfu.effective` |
//! | tensor | the same with the FLOPs of the tensor-core instructions the kernel issues (4,096 per `HMMA.16816`, one `mma.sync` m16n8k16) at the row's roof when it is a tensor-core roof, else at `tensor_core.fp16` |
//!
//! The **limiter** is the largest, and the **ceiling** the highest efficiency, by the spec's
//! metric (`sol_ms / median_ms`, `sol_ms` the manifest's roofline), that the kernel can reach
//! given its pipes: `sol_ms / max(pipe times)`. A ceiling under 1 says how far the kernel's own
//! pipes keep it from the roofline; above 1, that it moves fewer bytes than the manifest charges.
//! Nothing here is measured: every figure is from the ledger. Not modelled (so a ceiling is an
//! upper bound): latency (a launch of a few CTAs, one load in flight per thread), the issue
//! stalls of dependent instructions, L2 misses beyond an ideal L2.
//!
//! ```
//! use tileops_bench::profile::Profile;
//! use tileops_bench::records::{DeviceInfo, LaunchLedger, Ledger, Record};
//! use tileops_bench::report::pipes::{Pipe, price_pipes};
//!
//! // 1 GiB read and written at 4.5 TB/s (~0.24 ms), issuing 6 instructions per element.
//! let n = 1u64 << 28;
//! let launch = LaunchLedger {
//!     entry: "relu_f16".into(), grid: [1056, 1, 1], block: [256, 1, 1], dynamic_smem: 0,
//!     ran: false, thread_instructions: 6.0 * n as f64, mufu_ops: 0.0, tensor_ops: 0.0, instr_per_elem: 6.0,
//!     mufu_per_elem: 0.0, registers: 38, ctas_per_sm: 6, traffic: None, ..LaunchLedger::default()
//! };
//! let record = Record::new("relu", "elementwise", "1g", "float16", DeviceInfo::new("NVIDIA H200"))
//!     .with_roofline(Some(n), Some(4 * n))
//!     .with_roof("cuda_core.fp32")
//!     .with_ledger(Ledger { method: "example".into(), launches: vec![launch], written_bytes: None });
//! let pipes = price_pipes(&record, &Profile::builtin("h200")?).expect("priced");
//! assert_eq!(pipes.limiter(), Pipe::Memory);
//! assert!(pipes.issue_ms < 0.6 * pipes.memory_ms);
//! assert!((pipes.ceiling() - 1.0).abs() < 1e-9);
//! # Ok::<(), tileops_bench::profile::ProfileError>(())
//! ```

use std::fmt;

use super::predict::{LaunchTimes, Prediction, SamplePipes};
use crate::profile::{MMA_SYNC_ROOF, Profile, Roof};
use crate::records::{LaunchLedger, Ledger, Record};

/// Goal of the kernel work: a memory-bound kernel's issue time at most this share of its memory
/// time, so that its ceiling is 1 with margin for what the ledger does not model.
pub const ISSUE_SHARE_GOAL: f64 = 0.6;

/// One of the pipes a kernel can be limited by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pipe {
    /// DRAM bandwidth.
    Memory,
    /// The roof's arithmetic rate (FP32 FMA, tensor cores).
    Compute,
    /// Instruction issue (4 warp-instructions per clock per SM on Hopper).
    Issue,
    /// The special-function units (MUFU).
    Sfu,
    /// The tensor cores, at the MMAs the kernel issues (padding and masked tiles included).
    Tensor,
    /// Shared-memory bandwidth (`LDS`/`STS`, `LDSM`, `cp.async` writes).
    Shared,
}

impl Pipe {
    /// `"memory"`, `"compute"`, `"issue"`, `"sfu"`, `"tensor"` or `"shared"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Pipe::Memory => "memory",
            Pipe::Compute => "compute",
            Pipe::Issue => "issue",
            Pipe::Sfu => "sfu",
            Pipe::Tensor => "tensor",
            Pipe::Shared => "shared",
        }
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record's pipes priced against a profile (all times ms, from the ledger, not measured).
#[derive(Debug, Clone, PartialEq)]
pub struct PipeTimes {
    /// The spec's speed-of-light time: `max(bytes / hbm, flops / roof)` from the manifest.
    pub sol_ms: f64,
    /// The kernel's DRAM bytes (counted traffic, else the manifest's) ÷ `hbm.effective`.
    pub memory_ms: f64,
    /// The manifest's flops ÷ the roof's effective rate.
    pub compute_ms: f64,
    /// Instruction issue, busiest SM, summed over launches.
    pub issue_ms: f64,
    /// MUFU, busiest SM, summed over launches.
    pub sfu_ms: f64,
    /// The tensor-core instructions' FLOPs at the roof of the instruction (`mma.sync` at
    /// `tensor_core.mma_sync` where the profile states it), busiest SM, summed over launches (0
    /// for a kernel without them).
    pub tensor_ms: f64,
    /// Shared-memory bytes at the profile's shared-memory bandwidth, busiest SM, summed over
    /// launches (0 when the profile states no shared-memory pipe).
    pub shared_ms: f64,
    /// What the time model predicts from: each launch's pipes and stages, or, for a call that
    /// launched no tileops kernel (cuBLAS), its memory and compute times.
    pub model_pipes: SamplePipes,
    /// The time model's prediction (a prediction, not a measurement), when the profile has
    /// fitted constants.
    pub prediction: Option<Prediction>,
    /// The emulator's unique DRAM bytes ÷ the manifest's bytes; `None` when the emulator did not
    /// count the traffic (a dry run, or a build without the traffic instrumentation).
    pub traffic_ratio: Option<f64>,
    /// Sectors per global request ÷ the ideal for its width (1 = perfectly coalesced).
    pub sectors_per_request_ratio: Option<f64>,
    /// Shared-memory wavefronts ÷ the conflict-free ones (1 = no bank conflict).
    pub wavefronts_ratio: Option<f64>,
}

impl PipeTimes {
    /// The largest pipe time.
    pub fn limiting_ms(&self) -> f64 {
        self.memory_ms
            .max(self.compute_ms)
            .max(self.issue_ms)
            .max(self.sfu_ms)
            .max(self.tensor_ms)
            .max(self.shared_ms)
    }

    /// The predicted time, ms (a prediction of the time model, not a measurement).
    pub fn predicted_ms(&self) -> Option<f64> {
        self.prediction.map(|p| p.time_s * 1e3)
    }

    /// The predicted efficiency by the spec's metric, `sol_ms / predicted_ms` (a prediction).
    pub fn predicted_efficiency(&self) -> Option<f64> {
        self.predicted_ms().map(|t| self.sol_ms / t)
    }

    /// The pipe with the largest time (memory, then compute, issue, SFU, tensor on a tie).
    pub fn limiter(&self) -> Pipe {
        let times = [
            (Pipe::Memory, self.memory_ms),
            (Pipe::Compute, self.compute_ms),
            (Pipe::Issue, self.issue_ms),
            (Pipe::Sfu, self.sfu_ms),
            (Pipe::Tensor, self.tensor_ms),
            (Pipe::Shared, self.shared_ms),
        ];
        let max = self.limiting_ms();
        times
            .iter()
            .find(|(_, t)| *t == max)
            .map_or(Pipe::Memory, |(p, _)| *p)
    }

    /// The highest efficiency (the spec's `sol_ms / median_ms`) the kernel can reach given its
    /// pipes: `sol_ms / max(pipe times)`.
    pub fn ceiling(&self) -> f64 {
        self.sol_ms / self.limiting_ms()
    }
}

/// The device an emulated record's device impersonates: `"NVIDIA H200"` of
/// `"cuda-emu (NVIDIA H200 emulated on the CPU)"`, so that its ledger is priced against the profile
/// of the GPU the emulator models; `None` for any other name.
///
/// ```
/// use tileops_bench::report::pipes::emulated_model;
/// assert_eq!(emulated_model("cuda-emu (NVIDIA H200 emulated on the CPU)"), Some("NVIDIA H200"));
/// assert_eq!(emulated_model("NVIDIA H200"), None);
/// ```
pub fn emulated_model(device_name: &str) -> Option<&str> {
    device_name
        .strip_prefix("cuda-emu (")?
        .strip_suffix(" emulated on the CPU)")
        .filter(|model| !model.trim().is_empty())
}

/// Why a record has no pipe times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipeBlank {
    /// The record carries no ledger (it was not benched on an emulated device, nor joined with
    /// such a run).
    NoLedger,
    /// The profile states no SM pipes.
    NoSmPipes {
        /// The profile.
        profile: String,
    },
    /// The record lacks the manifest figures or its roof is not in the profile.
    Unpriced {
        /// Why.
        reason: String,
    },
}

impl fmt::Display for PipeBlank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipeBlank::NoLedger => f.write_str(
                "no kernel ledger: bench on the emulated device (or pass --ledger with such a run)",
            ),
            PipeBlank::NoSmPipes { profile } => write!(
                f,
                "profile {profile} states no SM pipes (`sm:`), so the ledger cannot be priced"
            ),
            PipeBlank::Unpriced { reason } => f.write_str(reason),
        }
    }
}

/// Prices a record's own ledger against a profile's pipes (see the module docs).
///
/// # Errors
/// [`PipeBlank`] when the record has no ledger, the profile no `sm:` section, or the record no
/// bytes, flops or roof the profile has.
pub fn price_pipes(record: &Record, profile: &Profile) -> Result<PipeTimes, PipeBlank> {
    let ledger = record.ledger.as_ref().ok_or(PipeBlank::NoLedger)?;
    price_ledger(record, ledger, profile)
}

/// Prices `ledger` (the record's own, or one joined from another run with [`ledger_of`]) with the
/// record's manifest figures against a profile's pipes.
///
/// # Errors
/// As [`price_pipes`].
pub fn price_ledger(
    record: &Record,
    ledger: &Ledger,
    profile: &Profile,
) -> Result<PipeTimes, PipeBlank> {
    let sm = profile.sm.as_ref().ok_or_else(|| PipeBlank::NoSmPipes {
        profile: profile.name.clone(),
    })?;
    let unpriced = |reason: &str| PipeBlank::Unpriced {
        reason: reason.to_owned(),
    };
    let bytes = match record.bytes {
        Some(b) if b > 0 => b as f64,
        _ => return Err(unpriced("no bytes: eval_roofline gave none (or 0)")),
    };
    let flops = record
        .flops
        .ok_or_else(|| unpriced("no flops: eval_roofline gave none"))? as f64;
    let roof_key = record
        .roof
        .as_deref()
        .ok_or_else(|| unpriced("no roof declared"))?;
    let (_, roof) = profile
        .pricing_roof(roof_key)
        .ok_or_else(|| unpriced(&format!("roof `{roof_key}` is not in the profile")))?;
    let hbm = profile.hbm().effective();
    let sol_ms = (bytes / hbm).max(flops / roof.effective()) * 1e3;
    let traffic = ledger.traffic();
    let dram_bytes = traffic.map_or(bytes, |t| (t.read_bytes + t.write_bytes) as f64);
    // The call's mix of reads and writes sets the bandwidth its bytes move at.
    let written = ledger
        .written_bytes
        .map_or(0.0, |w| w as f64)
        .min(dram_bytes);
    let bandwidth = mix_bandwidth(profile.hbm(), dram_bytes - written, written);
    let sms = f64::from(sm.count);
    // The busiest SM runs ⌈CTAs / SMs⌉ of them, at its share of the device's rate.
    let per_sm = |launch: &LaunchLedger, work: f64, rate: f64| {
        let ctas = launch.ctas().max(1) as f64;
        (ctas / sms).ceil() * (work / ctas) / (rate / sms)
    };
    // One HMMA.16816 (mma.sync m16n8k16) is 2 * 16 * 8 * 16 FLOP; f16 and bf16 have one peak.
    const HMMA_FLOP: f64 = 4096.0;
    let tensor_rate = profile
        .roof(MMA_SYNC_ROOF)
        .or_else(|| roof_key.starts_with("tensor_core").then_some(roof))
        .or_else(|| profile.pricing_roof("tensor_core.fp16").map(|(_, r)| r))
        .unwrap_or(roof)
        .effective();
    let launches: Vec<LaunchTimes> = ledger
        .launches
        .iter()
        .map(|l| {
            let ctas = l.ctas().max(1) as f64;
            let resident = f64::from(l.ctas_per_sm.max(1)).min((ctas / sms).ceil());
            let waves = (ctas / (sms * f64::from(l.ctas_per_sm.max(1))))
                .ceil()
                .max(1.0);
            let warps_per_cta = (l.threads_per_cta() as f64 / 32.0).ceil();
            let conflicts = l
                .traffic
                .filter(|t| t.shared_ideal_wavefronts > 0)
                .map_or(1.0, |t| {
                    t.shared_wavefronts as f64 / t.shared_ideal_wavefronts as f64
                });
            LaunchTimes {
                // Each launch that streams the call's tensors moves its bytes (as its
                // instructions are priced over its elements); a second stage reads the first's
                // partials, a few bytes per thread.
                memory_s: if is_second_stage(&l.entry) {
                    0.0
                } else {
                    dram_bytes / bandwidth
                },
                issue_s: per_sm(l, l.thread_instructions, sm.issue.effective()),
                sfu_s: per_sm(l, l.mufu_ops, sm.sfu.effective()),
                shared_s: sm.shared.as_ref().map_or(0.0, |r| {
                    per_sm(l, l.shared_bytes * conflicts, r.effective())
                }),
                tensor_s: per_sm(l, l.tensor_ops * HMMA_FLOP, tensor_rate),
                stages: waves * l.rounds.max(1.0),
                waves,
                single_slot: resident <= 1.0 && (l.barriers || warps_per_cta <= 1.0),
                warps_per_scheduler: resident * warps_per_cta / sm.issue_per_clock,
            }
        })
        .collect();
    let sum_ms = |f: fn(&LaunchTimes) -> f64| launches.iter().map(f).sum::<f64>() * 1e3;
    let (issue_ms, sfu_ms, tensor_ms, shared_ms) = (
        sum_ms(|l| l.issue_s),
        sum_ms(|l| l.sfu_s),
        sum_ms(|l| l.tensor_s),
        sum_ms(|l| l.shared_s),
    );
    let model_pipes = if launches.is_empty() {
        SamplePipes::Library {
            memory_s: dram_bytes / bandwidth,
            compute_s: flops / roof.effective(),
        }
    } else {
        SamplePipes::Kernels(launches)
    };
    let prediction = profile
        .model
        .as_ref()
        .map(|model| model_pipes.predict(model));
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    Ok(PipeTimes {
        sol_ms,
        memory_ms: dram_bytes / hbm * 1e3,
        compute_ms: flops / roof.effective() * 1e3,
        issue_ms,
        sfu_ms,
        tensor_ms,
        shared_ms,
        model_pipes,
        prediction,
        traffic_ratio: traffic.map(|t| (t.read_bytes + t.write_bytes) as f64 / bytes),
        sectors_per_request_ratio: traffic
            .and_then(|t| ratio(t.global_sectors, t.global_ideal_sectors)),
        wavefronts_ratio: traffic
            .and_then(|t| ratio(t.shared_wavefronts, t.shared_ideal_wavefronts)),
    })
}

/// Entry points that combine a first kernel's partial results (per-split partial reductions, the
/// split-KV partial outputs): their loops run over the partials, not over the call's tensors.
pub const SECOND_STAGE_PREFIXES: [&str; 2] = ["reduce_finish_", "gqa_decode_merge_"];

/// Whether `entry` is a second stage ([`SECOND_STAGE_PREFIXES`]).
pub fn is_second_stage(entry: &str) -> bool {
    SECOND_STAGE_PREFIXES.iter().any(|p| entry.starts_with(p))
}

/// HBM's bandwidth for a mix of `read` and `written` bytes: the profile's measured mixes
/// (`read` 0 % writes, `triad` a third, `copy` a half, `write` all), interpolated on the share of
/// writes; the calibrated envelope when the profile lists no mixes.
///
/// ```
/// use tileops_bench::profile::Profile;
/// use tileops_bench::report::pipes::mix_bandwidth;
///
/// let h200 = Profile::builtin("h200")?;
/// let hbm = h200.hbm();
/// // A copy (half writes) runs at the copy mix, a reduction at the read mix.
/// assert!((mix_bandwidth(hbm, 1.0, 1.0) - 4.8e12 * hbm.calibration_mixes["copy"]).abs() < 1e3);
/// assert!((mix_bandwidth(hbm, 1.0, 0.0) - 4.8e12 * hbm.calibration_mixes["read"]).abs() < 1e3);
/// # Ok::<(), tileops_bench::profile::ProfileError>(())
/// ```
pub fn mix_bandwidth(hbm: &Roof, read: f64, written: f64) -> f64 {
    let mix = |name: &str| hbm.calibration_mixes.get(name).copied();
    let (Some(r), Some(t), Some(c), Some(w)) =
        (mix("read"), mix("triad"), mix("copy"), mix("write"))
    else {
        return hbm.effective();
    };
    let total = read + written;
    let share = if total > 0.0 { written / total } else { 0.0 };
    let points = [(0.0, r), (1.0 / 3.0, t), (0.5, c), (1.0, w)];
    let fraction = points.windows(2).find(|p| share <= p[1].0).map_or(w, |p| {
        let ((x0, y0), (x1, y1)) = (p[0], p[1]);
        y0 + (y1 - y0) * (share - x0) / (x1 - x0)
    });
    hbm.theoretical * fraction
}

/// The ledger a report prices: the record's own, else that of the same op/workload/dtype in a
/// run benched on the emulated device (`--ledger`), so a GPU-timed row shows its measured
/// efficiency beside the ledger's ceiling.
pub fn ledger_of<'a>(record: &'a Record, ledgers: &'a [Record]) -> Option<&'a Ledger> {
    record.ledger.as_ref().or_else(|| {
        ledgers
            .iter()
            .find(|r| {
                r.op == record.op
                    && r.workload == record.workload
                    && r.dtype == record.dtype
                    && r.implementation == record.implementation
            })
            .and_then(|r| r.ledger.as_ref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{DeviceInfo, Traffic};

    fn launch(ctas: u32, instructions: f64, mufu: f64) -> LaunchLedger {
        LaunchLedger {
            entry: "k".into(),
            grid: [ctas, 1, 1],
            block: [256, 1, 1],
            dynamic_smem: 0,
            ran: true,
            thread_instructions: instructions,
            mufu_ops: mufu,
            tensor_ops: 0.0,
            instr_per_elem: 1.0,
            mufu_per_elem: 0.0,
            registers: 32,
            ctas_per_sm: 8,
            traffic: None,
            ..LaunchLedger::default()
        }
    }

    fn record(bytes: u64, flops: u64, launches: Vec<LaunchLedger>) -> Record {
        Record::new("op", "f", "w", "float32", DeviceInfo::new("NVIDIA H200"))
            .with_roofline(Some(flops), Some(bytes))
            .with_roof("cuda_core.fp32")
            .with_ledger(Ledger {
                method: "test".into(),
                launches,
                written_bytes: None,
            })
    }

    #[test]
    fn each_pipe_can_limit_and_the_ceiling_is_sol_over_the_limiter() {
        let h200 = Profile::builtin("h200").unwrap();
        let sm = h200.sm.clone().unwrap();
        let bytes = 1u64 << 30;
        let memory_ms = bytes as f64 / h200.hbm().effective() * 1e3;
        // Issue: 2x the memory time of instructions, in 132 x 10 CTAs (no tail).
        let instructions = 2.0 * memory_ms / 1e3 * sm.issue.effective();
        let p = price_pipes(
            &record(bytes, 0, vec![launch(1320, instructions, 0.0)]),
            &h200,
        )
        .unwrap();
        assert_eq!(p.limiter(), Pipe::Issue);
        assert!((p.ceiling() - 0.5).abs() < 1e-9, "{p:?}");
        // SFU: 4x.
        let mufu = 4.0 * memory_ms / 1e3 * sm.sfu.effective();
        let p = price_pipes(&record(bytes, 0, vec![launch(1320, 0.0, mufu)]), &h200).unwrap();
        assert_eq!(p.limiter(), Pipe::Sfu);
        assert!((p.ceiling() - 0.25).abs() < 1e-9);
        // Memory: a kernel that reads its input twice moves 2x the manifest's bytes.
        let mut twice = launch(1320, 0.0, 0.0);
        twice.traffic = Some(Traffic {
            read_bytes: bytes * 2,
            ..Traffic::default()
        });
        let p = price_pipes(&record(bytes, 0, vec![twice]), &h200).unwrap();
        assert_eq!((p.limiter(), p.traffic_ratio), (Pipe::Memory, Some(2.0)));
        assert!((p.ceiling() - 0.5).abs() < 1e-9);
        // Compute: the spec's own term limits at a ceiling of 1.
        let p = price_pipes(&record(1, 1 << 40, vec![launch(1, 1.0, 0.0)]), &h200).unwrap();
        assert_eq!((p.limiter(), p.ceiling()), (Pipe::Compute, 1.0));
    }

    /// A tensor-core kernel that issues twice the MMAs its manifest's flops need (padding,
    /// masked tiles) spends twice their time in the tensor pipe, priced at the `mma.sync` roof
    /// the profile states (`HMMA` is `mma.sync`), not at cuBLAS's roof of the row.
    #[test]
    fn the_tensor_pipe_prices_the_mmas_issued() {
        let h200 = Profile::builtin("h200").unwrap();
        let flops: u64 = 1 << 40;
        let mut mma = launch(1320, 0.0, 0.0);
        mma.tensor_ops = 2.0 * flops as f64 / 4096.0;
        let mut r = record(1, flops, vec![mma]);
        r.roof = Some("tensor_core.bf16".into());
        let p = price_pipes(&r, &h200).unwrap();
        assert_eq!(p.limiter(), Pipe::Tensor);
        let mma_sync = h200.roof(MMA_SYNC_ROOF).unwrap().effective();
        assert!(
            (p.tensor_ms - 2.0 * flops as f64 / mma_sync * 1e3).abs() < 1e-9,
            "{p:?}"
        );
        let bf16 = h200.roof("tensor_core.bf16").unwrap().effective();
        assert!((p.ceiling() - mma_sync / bf16 / 2.0).abs() < 1e-9);
        // A profile without the mma.sync roof prices them at the row's.
        let mut no_mma = h200.clone();
        no_mma.roofs.remove(MMA_SYNC_ROOF);
        let p = price_pipes(&r, &no_mma).unwrap();
        assert!((p.tensor_ms / p.compute_ms - 2.0).abs() < 1e-9, "{p:?}");
        // Without tensor-core instructions the pipe is 0 and never the limiter.
        let plain = price_pipes(&record(1 << 30, 0, vec![launch(1320, 1.0, 0.0)]), &h200).unwrap();
        assert_eq!(plain.tensor_ms, 0.0);
    }

    #[test]
    fn a_grid_smaller_than_the_device_issues_from_few_sms() {
        let h200 = Profile::builtin("h200").unwrap();
        let full = price_pipes(&record(1 << 20, 0, vec![launch(132, 1e9, 0.0)]), &h200).unwrap();
        let one = price_pipes(&record(1 << 20, 0, vec![launch(1, 1e9, 0.0)]), &h200).unwrap();
        assert!((one.issue_ms / full.issue_ms - 132.0).abs() < 1e-6);
        // One CTA more than a wave costs a second wave on the busiest SM.
        let tail = price_pipes(&record(1 << 20, 0, vec![launch(133, 1e9, 0.0)]), &h200).unwrap();
        assert!((tail.issue_ms / full.issue_ms - 2.0 * 132.0 / 133.0).abs() < 1e-6);
    }

    #[test]
    fn blanks_say_why() {
        let h200 = Profile::builtin("h200").unwrap();
        let mut r = record(1, 1, vec![launch(1, 1.0, 0.0)]);
        let no_sm = Profile::builtin("h20_3e").unwrap();
        assert!(matches!(
            price_pipes(&r, &no_sm),
            Err(PipeBlank::NoSmPipes { .. })
        ));
        r.bytes = Some(0);
        assert!(matches!(
            price_pipes(&r, &h200),
            Err(PipeBlank::Unpriced { .. })
        ));
        r.ledger = None;
        assert_eq!(price_pipes(&r, &h200), Err(PipeBlank::NoLedger));
    }
}
