//! Calibration arithmetic: from microbenchmark timings to a profile file.
//!
//! The GPU side (the kernels and their timing) lives in the `calibrate` example; everything it
//! computes from the timings lives here, so it is tested without a GPU:
//!
//! - HBM: the best rate of each mix (copy, triad, read-only, write-only; [`HbmMix`] knows the bytes
//!   each moves), and the *envelope* — the best mix — as the calibration, with every mix's fraction
//!   kept beside it ([`Measured::hbm`]). One mix alone understates the ceiling: the Triad-only
//!   profile put correct kernels at 105–109% of "speed of light".
//! - CUDA-core FP32: the best FMA-chain rate over the ILP sweep ([`Measured::best_of`]).
//! - Tensor cores: per GEMM size, the burst rate (best of the first iterations, before the power cap
//!   engages) and the sustained rate (median of the second half of the series); the best size of each
//!   ([`Measured::gemm`]).
//! - [`ProfileWriter`] renders a profile YAML with its provenance (device, driver, date, method per
//!   roof) that [`Profile::from_yaml_str`] loads back.
//!
//! A rate above the theoretical peak is an error, never a calibration above 1.
//!
//! The host twins of the microbenchmark kernels ([`uniform_value`], [`fma_chain_value`],
//! [`hbm_read_sum`]) give what one launch must produce: on an emulated device, where timings mean
//! nothing, `calibrate` runs each kernel once on a tiny working set and checks it against them
//! instead of writing a profile.
//!
//! ```
//! use tileops_bench::calibrate::{HbmMix, Measured};
//!
//! // Bytes a float4 triad moves over 2^28 elements of 16 bytes: two reads and one write.
//! assert_eq!(HbmMix::Triad.bytes_moved(1 << 28, 16), 3 * 16 << 28);
//! let rates = [
//!     (HbmMix::Copy, 3927.8e9),
//!     (HbmMix::Triad, 4045.0e9),
//!     (HbmMix::Read, 4502.4e9),
//!     (HbmMix::Write, 4284.5e9),
//! ];
//! let hbm = Measured::hbm(4800e9, &rates, "float4 kernels, 2 GB working set")?;
//! assert!((hbm.calibration - 0.938).abs() < 1e-9);
//! assert_eq!(hbm.calibration_mixes[0].0, "copy");
//! # Ok::<(), tileops_bench::calibrate::CalibrateError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::profile::{
    DeviceKind, DeviceSpec, MMA_SYNC_ROOF, Profile, ROOF_KEYS, Roof, SmPipes, TimeModel,
};
use super::records::percentile;
use tileops::registry::RoofKey;

/// The smallest HBM working set that keeps a measurement off the L2 (and off HBM page effects).
pub const MIN_HBM_WORKING_SET: u64 = 2_000_000_000;

/// An HBM microbenchmark mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HbmMix {
    /// `b[i] = a[i]`: one read, one write.
    Copy,
    /// `a[i] = b[i] + s * c[i]`: two reads, one write.
    Triad,
    /// A reduction over `a`: one read.
    Read,
    /// `a[i] = s`: one write.
    Write,
}

impl HbmMix {
    /// Every mix.
    pub const ALL: [HbmMix; 4] = [HbmMix::Copy, HbmMix::Triad, HbmMix::Read, HbmMix::Write];

    /// The name in a profile's `calibration_mixes`.
    pub const fn name(self) -> &'static str {
        match self {
            HbmMix::Copy => "copy",
            HbmMix::Triad => "triad",
            HbmMix::Read => "read",
            HbmMix::Write => "write",
        }
    }

    /// Arrays each element touches: reads plus writes.
    pub const fn streams(self) -> u64 {
        match self {
            HbmMix::Copy => 2,
            HbmMix::Triad => 3,
            HbmMix::Read | HbmMix::Write => 1,
        }
    }

    /// Bytes one pass moves over `elements` elements of `elem_bytes` each.
    pub const fn bytes_moved(self, elements: u64, elem_bytes: u64) -> u64 {
        self.streams() * elements * elem_bytes
    }
}

/// A measurement that cannot make a calibration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    /// A rate above the spec-sheet peak.
    #[error(
        "{what}: measured {measured:.4e}/s, above the theoretical {theoretical:.4e}/s: the timing \
         is wrong (an L2-resident working set? a clock or event error?) or the theoretical figure \
         is; a calibration cannot exceed 1"
    )]
    AboveTheoretical {
        /// What was measured.
        what: String,
        /// The measured rate.
        measured: f64,
        /// The theoretical peak.
        theoretical: f64,
    },
    /// No samples, or a non-positive or non-finite number.
    #[error("{what}: {problem}")]
    BadInput {
        /// What was measured.
        what: String,
        /// What is wrong.
        problem: String,
    },
    /// The working set fits a cache.
    #[error(
        "HBM working set of {bytes} B is below {MIN_HBM_WORKING_SET} B (and 8x the {l2_bytes} B \
         L2): it would measure the cache, not HBM; enlarge the buffers"
    )]
    WorkingSet {
        /// The working set.
        bytes: u64,
        /// The device's L2 size.
        l2_bytes: u64,
    },
    /// A roof key the profile format does not have.
    #[error("unknown roof `{0}`; roofs are {ROOF_KEYS:?}")]
    UnknownRoof(String),
    /// The profile being written has no HBM roof.
    #[error("a profile needs the hbm roof; measure it or carry it over from a base profile")]
    NoHbm,
}

/// Refuses an HBM working set that a cache could hold.
///
/// # Errors
/// [`CalibrateError::WorkingSet`] below [`MIN_HBM_WORKING_SET`] or 8× the L2.
pub fn check_working_set(bytes: u64, l2_bytes: u64) -> Result<(), CalibrateError> {
    if bytes < MIN_HBM_WORKING_SET.max(l2_bytes.saturating_mul(8)) {
        return Err(CalibrateError::WorkingSet { bytes, l2_bytes });
    }
    Ok(())
}

/// The best rate of repeated runs of the same work: `work / min(seconds)`.
///
/// # Errors
/// [`CalibrateError::BadInput`] with no runs, or non-positive work or times.
pub fn best_rate(what: &str, work: f64, seconds: &[f64]) -> Result<f64, CalibrateError> {
    let bad = |problem: String| CalibrateError::BadInput {
        what: what.to_owned(),
        problem,
    };
    if !(work.is_finite() && work > 0.0) {
        return Err(bad(format!("work {work} must be positive")));
    }
    if seconds.is_empty() {
        return Err(bad("no timed runs".into()));
    }
    if let Some(t) = seconds.iter().find(|t| !(t.is_finite() && **t > 0.0)) {
        return Err(bad(format!("time {t} s must be positive")));
    }
    Ok(work / seconds.iter().copied().fold(f64::INFINITY, f64::min))
}

/// FLOPs of an FMA-chain kernel: each FMA is 2 FLOPs.
pub const fn fma_flops(threads: u64, iterations: u64, ilp: u64) -> u64 {
    2 * threads * iterations * ilp
}

/// FLOPs of an `m × n × k` GEMM.
pub const fn gemm_flops(m: u64, n: u64, k: u64) -> u64 {
    2 * m * n * k
}

/// Burst and sustained rates of one GEMM size from its per-iteration times, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmRates {
    /// Best rate among the first `burst_window` iterations, FLOP/s.
    pub burst: f64,
    /// Median rate over the second half of the series, FLOP/s.
    pub sustained: f64,
}

impl GemmRates {
    /// From per-iteration times (seconds, in the order they ran, warm-up excluded) of a GEMM of
    /// `flops` FLOPs. The first `burst_window` iterations run before the power cap engages; the
    /// second half of the series runs under it.
    ///
    /// # Errors
    /// [`CalibrateError::BadInput`] for a series shorter than `2 × burst_window` (at least 4) or a
    /// non-positive time.
    pub fn from_series(
        what: &str,
        flops: f64,
        seconds: &[f64],
        burst_window: usize,
    ) -> Result<Self, CalibrateError> {
        let bad = |problem: String| CalibrateError::BadInput {
            what: what.to_owned(),
            problem,
        };
        let burst_window = burst_window.max(1);
        if seconds.len() < (2 * burst_window).max(4) {
            return Err(bad(format!(
                "{} iterations; at least {} are needed to tell burst from sustained",
                seconds.len(),
                (2 * burst_window).max(4)
            )));
        }
        let burst = best_rate(what, flops, &seconds[..burst_window])?;
        let mut rates: Vec<f64> = seconds[seconds.len() / 2..]
            .iter()
            .map(|t| flops / t)
            .collect();
        rates.sort_by(f64::total_cmp);
        let sustained =
            percentile(&rates, 0.5).ok_or_else(|| bad("no sustained samples".into()))?;
        Ok(GemmRates { burst, sustained })
    }
}

/// A measured roof, ready for a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The spec-sheet peak it is a fraction of.
    pub theoretical: f64,
    /// The sustained fraction.
    pub calibration: f64,
    /// The burst fraction, when measured.
    pub calibration_burst: Option<f64>,
    /// Per-mix fractions (HBM).
    pub calibration_mixes: Vec<(String, f64)>,
    /// How it was measured, for the provenance comment.
    pub method: String,
}

fn fraction(what: &str, measured: f64, theoretical: f64) -> Result<f64, CalibrateError> {
    if !(theoretical.is_finite() && theoretical > 0.0) {
        return Err(CalibrateError::BadInput {
            what: what.to_owned(),
            problem: format!("theoretical {theoretical}"),
        });
    }
    if !(measured.is_finite() && measured > 0.0) {
        return Err(CalibrateError::BadInput {
            what: what.to_owned(),
            problem: format!("measured rate {measured} must be positive"),
        });
    }
    if measured > theoretical {
        return Err(CalibrateError::AboveTheoretical {
            what: what.to_owned(),
            measured,
            theoretical,
        });
    }
    Ok(measured / theoretical)
}

impl Measured {
    /// HBM from the best rate of each mix (bytes/s): the calibration is the envelope (the best
    /// mix), every mix's fraction is kept.
    ///
    /// # Errors
    /// [`CalibrateError`] with no mixes, a non-positive rate, or one above `theoretical`.
    pub fn hbm(
        theoretical: f64,
        best_rates: &[(HbmMix, f64)],
        method: &str,
    ) -> Result<Measured, CalibrateError> {
        let mut mixes: Vec<(HbmMix, f64)> = Vec::new();
        for &(mix, rate) in best_rates {
            let what = format!("hbm {}", mix.name());
            if mixes.iter().any(|(m, _)| *m == mix) {
                return Err(CalibrateError::BadInput {
                    what,
                    problem: "given twice; pass the best rate of each mix once".into(),
                });
            }
            mixes.push((mix, fraction(&what, rate, theoretical)?));
        }
        mixes.sort_by_key(|(mix, _)| *mix);
        let calibration = mixes.iter().map(|(_, f)| *f).fold(0.0, f64::max);
        if mixes.is_empty() {
            return Err(CalibrateError::BadInput {
                what: RoofKey::HBM.as_str().into(),
                problem: "no mix measured".into(),
            });
        }
        Ok(Measured {
            theoretical,
            calibration,
            calibration_burst: None,
            calibration_mixes: mixes
                .into_iter()
                .map(|(m, f)| (m.name().to_owned(), f))
                .collect(),
            method: method.to_owned(),
        })
    }

    /// A compute roof from the rates of a sweep (FMA chains over ILP): the best one.
    ///
    /// # Errors
    /// [`CalibrateError`] with no rates, a non-positive one, or one above `theoretical`.
    pub fn best_of(
        what: &str,
        theoretical: f64,
        rates: &[f64],
        method: &str,
    ) -> Result<Measured, CalibrateError> {
        let best = rates.iter().copied().fold(f64::NAN, f64::max);
        if rates.is_empty() {
            return Err(CalibrateError::BadInput {
                what: what.to_owned(),
                problem: "no rates".into(),
            });
        }
        for &r in rates {
            fraction(what, r, theoretical)?;
        }
        Ok(Measured {
            theoretical,
            calibration: fraction(what, best, theoretical)?,
            calibration_burst: None,
            calibration_mixes: Vec::new(),
            method: method.to_owned(),
        })
    }

    /// A tensor-core roof from GEMM sizes: the best sustained rate and the best burst rate.
    ///
    /// # Errors
    /// [`CalibrateError`] with no sizes, or a rate above `theoretical`.
    pub fn gemm(
        what: &str,
        theoretical: f64,
        sizes: &[GemmRates],
        method: &str,
    ) -> Result<Measured, CalibrateError> {
        if sizes.is_empty() {
            return Err(CalibrateError::BadInput {
                what: what.to_owned(),
                problem: "no GEMM sizes".into(),
            });
        }
        let sustained = sizes.iter().map(|r| r.sustained).fold(0.0, f64::max);
        // By definition the burst rate is at least the sustained one; only noise in a short burst
        // window puts it below, and the profile loader would refuse that file.
        let burst = sizes
            .iter()
            .map(|r| r.burst)
            .fold(0.0, f64::max)
            .max(sustained);
        Ok(Measured {
            theoretical,
            calibration: fraction(what, sustained, theoretical)?,
            calibration_burst: Some(fraction(&format!("{what} burst"), burst, theoretical)?),
            calibration_mixes: Vec::new(),
            method: method.to_owned(),
        })
    }
}

/// Where the numbers of a written profile came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// The CUDA device name measured.
    pub device: String,
    /// The driver version.
    pub driver: String,
    /// When, RFC 3339.
    pub date: String,
    /// The tool and its revision (`"tileops calibrate 0.1.0 (abc123)"`).
    pub tool: String,
}

/// A profile being written: the device, and per roof either a fresh measurement or a roof carried
/// over from a base profile (say so in the file).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileWriter {
    /// The device described.
    pub device: DeviceSpec,
    /// Where the measurements came from.
    pub provenance: Provenance,
    measured: BTreeMap<String, Measured>,
    carried: BTreeMap<String, (Roof, String)>,
    /// The base profile's SM pipes and where they came from: no microbenchmark measures them yet,
    /// so a written profile keeps them (the kernel ledger's issue and SFU times need them).
    carried_sm: Option<(SmPipes, String)>,
    /// The base profile's time model: fitted on measured runs, not by a microbenchmark.
    carried_model: Option<(TimeModel, String)>,
}

/// The roofs a written profile can hold, in the file's order: [`ROOF_KEYS`], with the
/// `mma.sync` roof ([`MMA_SYNC_ROOF`]) after the other tensor-core ones.
fn written_roofs() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = ROOF_KEYS.to_vec();
    let after = keys
        .iter()
        .rposition(|k| k.starts_with("tensor_core."))
        .map_or(keys.len(), |i| i + 1);
    keys.insert(after, MMA_SYNC_ROOF);
    keys
}

impl ProfileWriter {
    /// A writer for `device`.
    pub fn new(device: DeviceSpec, provenance: Provenance) -> Self {
        ProfileWriter {
            device,
            provenance,
            measured: BTreeMap::new(),
            carried: BTreeMap::new(),
            carried_sm: None,
            carried_model: None,
        }
    }

    /// Starts from a base profile: its device, and its roofs as carried-over values that
    /// measurements then replace.
    pub fn from_base(base: &Profile, provenance: Provenance) -> Self {
        let mut writer = ProfileWriter::new(base.device.clone(), provenance);
        for (key, roof) in &base.roofs {
            writer
                .carried
                .insert(key.clone(), (roof.clone(), base.origin.clone()));
        }
        writer.carried_sm = base.sm.clone().map(|sm| (sm, base.origin.clone()));
        writer.carried_model = base.model.clone().map(|m| (m, base.origin.clone()));
        writer
    }

    /// Records a measured roof.
    ///
    /// # Errors
    /// [`CalibrateError::UnknownRoof`] for a key not in [`ROOF_KEYS`].
    pub fn measured(&mut self, key: &str, measured: Measured) -> Result<&mut Self, CalibrateError> {
        if !written_roofs().contains(&key) {
            return Err(CalibrateError::UnknownRoof(key.to_owned()));
        }
        self.carried.remove(key);
        self.measured.insert(key.to_owned(), measured);
        Ok(self)
    }

    /// The profile YAML, with the provenance as comments and a `provenance` map.
    ///
    /// # Errors
    /// [`CalibrateError::NoHbm`] without an HBM roof.
    pub fn to_yaml(&self) -> Result<String, CalibrateError> {
        if !self.measured.contains_key(RoofKey::HBM.as_str())
            && !self.carried.contains_key(RoofKey::HBM.as_str())
        {
            return Err(CalibrateError::NoHbm);
        }
        let p = &self.provenance;
        let d = &self.device;
        let mut out = String::new();
        let _ = writeln!(out, "# {} - written by {}.", d.name, p.tool);
        let _ = writeln!(
            out,
            "# Measured on `{}`, driver {}, {}.",
            p.device, p.driver, p.date
        );
        let _ = writeln!(
            out,
            "# effective = theoretical x calibration is computed by the loader, never stored.\n"
        );
        let _ = writeln!(out, "device:\n  name: {}", yaml_str(&d.name));
        let patterns: Vec<String> = d.patterns.iter().map(|s| yaml_str(s)).collect();
        let _ = writeln!(out, "  match: [{}]", patterns.join(", "));
        if d.kind != DeviceKind::Gpu {
            let _ = writeln!(out, "  kind: {}", d.kind.as_str());
        }
        if let Some(cc) = d.compute_capability {
            let _ = writeln!(out, "  compute_capability: \"{cc}\"");
        }
        let _ = writeln!(out, "  l2_bytes: {}\n", d.l2_bytes);
        let _ = writeln!(out, "provenance:");
        for (k, v) in [
            ("source", p.tool.as_str()),
            ("device", &p.device),
            ("driver", &p.driver),
            ("date", &p.date),
        ] {
            let _ = writeln!(out, "  {k}: {}", yaml_str(v));
        }
        let mut group = "";
        for key in written_roofs() {
            let (head, leaf) = key
                .split_once('.')
                .map_or((key, None), |(h, l)| (h, Some(l)));
            let indent = if leaf.is_some() { "    " } else { "  " };
            let body = if let Some(m) = self.measured.get(key) {
                let mut b = format!("{indent}# measured: {}\n", m.method);
                let _ = writeln!(b, "{indent}theoretical: {:e}", m.theoretical);
                let _ = writeln!(b, "{indent}calibration: {:.4}", m.calibration);
                if let Some(burst) = m.calibration_burst {
                    let _ = writeln!(b, "{indent}calibration_burst: {burst:.4}");
                }
                if !m.calibration_mixes.is_empty() {
                    let _ = writeln!(b, "{indent}calibration_mixes:");
                    for (mix, f) in &m.calibration_mixes {
                        let _ = writeln!(b, "{indent}  {mix}: {f:.4}");
                    }
                }
                b
            } else if let Some((r, origin)) = self.carried.get(key) {
                let mut b =
                    format!("{indent}# not measured in this run: carried over from {origin}\n");
                let _ = writeln!(b, "{indent}theoretical: {:e}", r.theoretical);
                let _ = writeln!(b, "{indent}calibration: {}", r.calibration);
                if let Some(burst) = r.calibration_burst {
                    let _ = writeln!(b, "{indent}calibration_burst: {burst}");
                }
                if !r.calibration_mixes.is_empty() {
                    let _ = writeln!(b, "{indent}calibration_mixes:");
                    for (mix, f) in &r.calibration_mixes {
                        let _ = writeln!(b, "{indent}  {mix}: {f}");
                    }
                }
                b
            } else {
                continue;
            };
            match leaf {
                None => {
                    let _ = write!(out, "\n{head}:\n{body}");
                }
                Some(leaf) => {
                    if group != head {
                        let _ = write!(out, "\n{head}:\n");
                        group = head;
                    }
                    let _ = write!(out, "  {leaf}:\n{body}");
                }
            }
        }
        if let Some((sm, origin)) = &self.carried_sm {
            let _ = write!(
                out,
                "\n# not measured in this run: carried over from {origin}\nsm:\n  count: {}\n  \
                 clock_hz: {:e}\n  issue: {{per_clock: {}, calibration: {}}}\n  \
                 sfu: {{per_clock: {}, calibration: {}}}\n",
                sm.count,
                sm.clock_hz,
                sm.issue_per_clock,
                sm.issue.calibration,
                sm.sfu_per_clock,
                sm.sfu.calibration
            );
            if let Some(shared) = &sm.shared {
                let per_clock = shared.theoretical / (f64::from(sm.count) * sm.clock_hz);
                let _ = writeln!(
                    out,
                    "  shared_memory: {{per_clock: {per_clock}, calibration: {}}}",
                    shared.calibration
                );
            }
        }
        if let Some((model, origin)) = &self.carried_model {
            let _ = write!(
                out,
                "\n# fitted on measured runs, not by this calibration: carried over from {origin}\n\
                 model:\n  fixed_us: {}\n  launch_us: {}\n  latency_us: {}\n  chain_cycles: {}\n  \
                 pipe_norm: {}\n  fitted_on: {}\n",
                model.fixed_us,
                model.launch_us,
                model.latency_us,
                model.chain_cycles,
                model.pipe_norm,
                yaml_str(&model.fitted_on)
            );
        }
        Ok(out)
    }
}

// Host twins of the microbenchmark kernels (`kernels/perf/calibrate.cu`): what one launch must
// produce, for the kernel check run instead of a calibration on an emulated device
// (`calibrate_gpu::check_kernels`).

/// The value `fill_uniform_*` writes at index `i` for `seed`, before rounding to the element type:
/// splitmix64's finaliser over `(i, seed)`, its top 24 bits scaled to [-1, 1) (exact in f32).
///
/// ```
/// use tileops_bench::calibrate::uniform_value;
/// let v = uniform_value(7, 1);
/// assert!((-1.0..1.0).contains(&v));
/// assert_ne!(v, uniform_value(7, 2));
/// ```
pub fn uniform_value(i: u64, seed: u32) -> f32 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(u64::from(seed) + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 * (2.0 / 16_777_216.0) - 1.0
}

/// What `fma_chain_ilp<ilp>` stores for thread `thread` of its block: `ilp` chains
/// `x = fma(x, a, b)` of `iters` steps from `x_j = thread * 1e-3 + j`, summed in order.
///
/// ```
/// use tileops_bench::calibrate::fma_chain_value;
/// // With a = 1 and b = 1 each chain adds `iters`: (0 + 10) + (1 + 10).
/// assert_eq!(fma_chain_value(0, 10, 2, 1.0, 1.0), 21.0);
/// ```
pub fn fma_chain_value(thread: u32, iters: u32, ilp: u32, a: f32, b: f32) -> f32 {
    let mut sum = 0.0f32;
    for j in 0..ilp {
        let mut x = thread as f32 * 1.0e-3 + j as f32;
        for _ in 0..iters {
            x = x.mul_add(a, b);
        }
        sum += x;
    }
    sum
}

/// Independent accumulators per warp of `mma_sync_bf16` (its `kMmaChains`).
pub const MMA_CHAINS: u32 = 8;

/// FLOP of one `mma.sync` m16n8k16: `2 × 16 × 8 × 16`.
pub const MMA_FLOP: u64 = 4096;

/// What `mma_sync_bf16` stores for every thread: [`MMA_CHAINS`] accumulators of 4 elements, each
/// `iters` steps of `D = A × B + D` with every element of A equal to `a` and of B to `b` (both
/// rounded to bf16), so every element gains `16 a b` a step; summed.
///
/// ```
/// use tileops_bench::calibrate::mma_sync_value;
/// // 8 chains x 4 elements x 10 steps x 16 x 0.5 x 0.25.
/// assert_eq!(mma_sync_value(10, 0.5, 0.25), 8.0 * 4.0 * 10.0 * 2.0);
/// ```
pub fn mma_sync_value(iters: u32, a: f32, b: f32) -> f32 {
    let bf16 = |v: f32| tileops::half::bf16::from_f32(v).to_f32();
    let per_element = iters as f32 * 16.0 * bf16(a) * bf16(b);
    (MMA_CHAINS * 4) as f32 * per_element
}

/// FLOP of one `mma_sync_bf16` launch of `warps` warps running `iters` steps.
pub fn mma_flops(warps: u64, iters: u64) -> u64 {
    warps * iters * u64::from(MMA_CHAINS) * MMA_FLOP
}

/// The accumulator of `hbm_read` for global thread `thread` of a grid of `stride` threads over
/// `a` (float4 elements): four elements per step while they last, then one at a time, summed in the
/// kernel's order.
///
/// ```
/// use tileops_bench::calibrate::hbm_read_sum;
/// let a: Vec<[f32; 4]> = (0..10).map(|i| [i as f32; 4]).collect();
/// // Thread 1 of 2 reads elements 1, 3, 5, 7 (one step of four), then 9.
/// assert_eq!(hbm_read_sum(&a, 1, 2), 4.0 * (1.0 + 3.0 + 5.0 + 7.0 + 9.0));
/// ```
pub fn hbm_read_sum(a: &[[f32; 4]], thread: u64, stride: u64) -> f32 {
    let n = a.len() as u64;
    let sum4 = |v: [f32; 4]| (v[0] + v[1]) + (v[2] + v[3]);
    let at = |i: u64| sum4(a[i as usize]);
    let mut acc = 0.0f32;
    let mut i = thread;
    while i + 3 * stride < n {
        acc += (at(i) + at(i + stride)) + (at(i + 2 * stride) + at(i + 3 * stride));
        i += 4 * stride;
    }
    while i < n {
        acc += at(i);
        i += stride;
    }
    acc
}

/// Whether `got` is `want` within `rel` of `scale` (the magnitude the result was computed from),
/// for results whose rounding may differ between a GPU and its host twin (a contracted FMA, a
/// rounded operand).
///
/// ```
/// use tileops_bench::calibrate::close_to;
/// assert!(close_to(1.0 + 1e-7, 1.0, 1.0, 1e-6));
/// assert!(!close_to(1.1, 1.0, 1.0, 1e-6));
/// assert!(!close_to(f32::NAN, 1.0, 1.0, 1e-6));
/// ```
pub fn close_to(got: f32, want: f32, scale: f32, rel: f32) -> bool {
    got.is_finite() && (got - want).abs() <= rel * scale.abs().max(f32::MIN_POSITIVE)
}

/// A YAML double-quoted string.
fn yaml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200_rates() -> [(HbmMix, f64); 4] {
        [
            (HbmMix::Copy, 0.8183 * 4800e9),
            (HbmMix::Triad, 0.8427 * 4800e9),
            (HbmMix::Read, 0.938 * 4800e9),
            (HbmMix::Write, 0.8926 * 4800e9),
        ]
    }

    #[test]
    fn kernel_twins_follow_the_kernels() {
        // splitmix64's finaliser, computed independently (Python big integers).
        assert_eq!(uniform_value(0, 1), 7_239_838.0 / 8_388_608.0 - 1.0);
        assert_eq!(uniform_value(1, 1), 12_512_141.0 / 8_388_608.0 - 1.0);
        assert_eq!(uniform_value(1000, 2), 12_975_722.0 / 8_388_608.0 - 1.0);
        let values: Vec<f32> = (0..10_000).map(|i| uniform_value(i, 3)).collect();
        assert!(values.iter().all(|v| (-1.0..1.0).contains(v)));
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / 1e4;
        assert!(mean.abs() < 0.05, "{mean}");
        // Halving each step: x * 2^-iters, exactly.
        let x = 5.0f32 * 1e-3 + 1.0;
        assert_eq!(
            fma_chain_value(5, 3, 2, 0.5, 0.0),
            5.0 * 1e-3 / 8.0 + x / 8.0
        );
        assert_eq!(fma_chain_value(0, 0, 4, 0.5, 0.0), 6.0);
        // A grid wider than the array: each thread reads its one element, or nothing.
        let a = [[1.0, 2.0, 3.0, 4.0], [0.5; 4]];
        assert_eq!(hbm_read_sum(&a, 0, 8), 10.0);
        assert_eq!(hbm_read_sum(&a, 1, 8), 2.0);
        assert_eq!(hbm_read_sum(&a, 2, 8), 0.0);
        assert!(close_to(2.0, 2.0 + 1e-6, 2.0, 1e-6));
        assert!(!close_to(2.0, 2.1, 2.0, 1e-6));
        assert!(!close_to(f32::INFINITY, f32::INFINITY, 1.0, 1.0));
    }

    #[test]
    fn bytes_per_mix() {
        assert_eq!(HbmMix::Copy.bytes_moved(10, 16), 320);
        assert_eq!(HbmMix::Triad.bytes_moved(10, 16), 480);
        assert_eq!(HbmMix::Read.bytes_moved(10, 16), 160);
        assert_eq!(HbmMix::Write.bytes_moved(10, 16), 160);
    }

    #[test]
    fn envelope_is_the_best_mix() {
        let m = Measured::hbm(4800e9, &h200_rates(), "test").unwrap();
        assert!((m.calibration - 0.938).abs() < 1e-12);
        let names: Vec<&str> = m
            .calibration_mixes
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["copy", "triad", "read", "write"]);
        assert!((m.calibration_mixes[1].1 - 0.8427).abs() < 1e-12);
        assert!((m.theoretical * m.calibration - 4502.4e9).abs() < 1.0);
    }

    #[test]
    fn above_theoretical_is_an_error() {
        let err = Measured::hbm(4800e9, &[(HbmMix::Read, 5000e9)], "t").unwrap_err();
        assert!(matches!(err, CalibrateError::AboveTheoretical { .. }));
        assert!(err.to_string().contains("cannot exceed 1"), "{err}");
        assert!(Measured::best_of("fp32", 67e12, &[60e12, 68e12], "t").is_err());
        assert!(Measured::hbm(4800e9, &[], "t").is_err());
        assert!(Measured::hbm(4800e9, &[(HbmMix::Read, -1.0)], "t").is_err());
        let twice = [(HbmMix::Read, 4e12), (HbmMix::Read, 4.1e12)];
        let err = Measured::hbm(4800e9, &twice, "t").unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn best_rate_and_flops() {
        assert_eq!(best_rate("x", 100.0, &[2.0, 1.0, 4.0]).unwrap(), 100.0);
        assert!(best_rate("x", 100.0, &[]).is_err());
        assert!(best_rate("x", 100.0, &[0.0]).is_err());
        assert_eq!(fma_flops(1024, 100, 4), 819_200);
        assert_eq!(gemm_flops(4096, 4096, 4096), 2 * 4096u64.pow(3));
        let m = Measured::best_of("fp32", 67e12, &[30e12, 57.2716e12, 50e12], "fma").unwrap();
        assert!((m.calibration - 0.8548).abs() < 1e-6);
    }

    #[test]
    fn gemm_burst_and_sustained() {
        let flops = 1e12;
        // Fast at first (burst), then throttled.
        let times = [
            1.0 / 760.0,
            1.0 / 770.0,
            1.0 / 740.0,
            1.0 / 700.0,
            1.0 / 690.0,
            1.0 / 700.0,
            1.0 / 710.0,
            1.0 / 700.0,
        ];
        let r = GemmRates::from_series("bf16 8192", flops, &times, 2).unwrap();
        assert!((r.burst - 770e12).abs() < 1e3);
        assert!((r.sustained - 700e12).abs() < 1e3);
        assert!(GemmRates::from_series("x", flops, &times[..3], 2).is_err());
        let m = Measured::gemm(
            "bf16",
            989.5e12,
            &[
                r,
                GemmRates {
                    burst: 760e12,
                    sustained: 650e12,
                },
            ],
            "cuBLAS",
        )
        .unwrap();
        assert!((m.calibration - 700.0 / 989.5).abs() < 1e-9);
        assert!((m.calibration_burst.unwrap() - 770.0 / 989.5).abs() < 1e-9);
    }

    #[test]
    fn working_set_must_exceed_the_caches() {
        assert!(check_working_set(4_000_000_000, 62_914_560).is_ok());
        assert!(check_working_set(1 << 30, 62_914_560).is_err());
        assert!(check_working_set(2_100_000_000, 300_000_000).is_err());
    }

    #[test]
    fn written_profile_loads_back() {
        let base = Profile::builtin("h200").unwrap();
        let provenance = Provenance {
            device: "NVIDIA H200".into(),
            driver: "580.65.06".into(),
            date: "2026-11-30T04:00:00Z".into(),
            tool: "tileops calibrate 0.1.0 (abc123)".into(),
        };
        let mut writer = ProfileWriter::from_base(&base, provenance);
        let hbm = Measured::hbm(
            4800e9,
            &[(HbmMix::Read, 4400e9), (HbmMix::Copy, 4000e9)],
            "float4, 4 GB, best of 5",
        )
        .unwrap();
        writer.measured("hbm", hbm).unwrap();
        let bf16 = Measured::gemm(
            "bf16",
            989.5e12,
            &[GemmRates {
                burst: 760e12,
                sustained: 690e12,
            }],
            "cuBLAS",
        )
        .unwrap();
        writer.measured("tensor_core.bf16", bf16).unwrap();
        assert!(
            writer
                .measured(
                    "tensor_core.int4",
                    Measured::best_of("x", 1.0, &[0.5], "").unwrap()
                )
                .is_err()
        );
        let yaml = writer.to_yaml().unwrap();
        let back = Profile::from_yaml_str(&yaml, "measured", "measured.yaml")
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert!((back.hbm().calibration - 0.9167).abs() < 1e-9, "{yaml}");
        assert_eq!(back.hbm().calibration_mixes.len(), 2);
        assert!((back.roof("tensor_core.bf16").unwrap().calibration - 0.6973).abs() < 1e-9);
        // Carried over unchanged, and said so.
        assert_eq!(back.roof("tensor_core.fp8"), base.roof("tensor_core.fp8"));
        assert!(
            yaml.contains("carried over from profiles/h200.yaml"),
            "{yaml}"
        );
        assert!(yaml.contains("driver 580.65.06"), "{yaml}");
        assert_eq!(back.provenance["driver"], "580.65.06");
        assert_eq!(back.device, base.device);
        // The SM pipes, which nothing measures yet, are carried over too, and the time model,
        // which a fit on measured runs makes, not a calibration.
        assert!(base.sm.is_some());
        assert_eq!(back.sm, base.sm);
        assert!(base.model.is_some());
        assert_eq!(back.model, base.model);
        assert_eq!(back.roof(MMA_SYNC_ROOF), base.roof(MMA_SYNC_ROOF));
    }
}
