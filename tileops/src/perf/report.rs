//! The roofline verdicts: each record priced against a profile.
//!
//! Per record (architecture.md, "Bench records and the roofline verdicts"):
//! `memory_ms = bytes / hbm.effective`, `compute_ms = flops / roof.effective`,
//! `sol_ms = max(memory_ms, compute_ms)`, `efficiency = sol_ms / median_ms`, and the bound is the
//! larger term (compute on a tie). The verdict, first rule that holds:
//!
//! | verdict | when |
//! | --- | --- |
//! | `fail` | `bytes / median` exceeds `hbm.theoretical`, or `flops / median` the roof's theoretical peak: physically impossible, a formula error |
//! | `anomaly` | efficiency > 1.05: the formula or the calibration is wrong, never a win |
//! | `latency_bound` | `sol_ms` < 0.003 and `median_ms` < 0.020: launch overhead dominates, the model has no traction |
//! | `at_ceiling` | efficiency ≥ 0.80 |
//! | `below` | otherwise |
//!
//! A row is left blank, with a [`BlankReason`] and no number, when it was not timed, when no
//! profile describes its device (or the chosen profile describes another one), when it has no roof
//! or the profile lacks that roof, or when its bytes or flops are missing, or its bytes are zero.
//! Nothing is guessed and no row is dropped.
//!
//! ```
//! use tileops::perf::profile::Profile;
//! use tileops::perf::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops::perf::report::{ProfileChoice, Report, Verdict};
//!
//! let device = DeviceInfo::new("NVIDIA H200");
//! let record = Record::new("relu", "elementwise", "16M", "float16", device.clone())
//!     .with_roofline(Some(16 << 20), Some(2 * 2 * (16 << 20)))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(100, 0.0190, 0.0188, 0.0193));
//! let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
//! let h200 = Profile::builtin("h200")?;
//! let report = Report::build(&run, ProfileChoice::Fixed(&h200));
//! let row = &report.rows[0];
//! assert_eq!(row.verdict(), Some(Verdict::Below)); // 3.53 TB/s: 78% of the 4.50 TB/s envelope
//! assert!((row.efficiency().unwrap() - 0.785).abs() < 0.01);
//! # Ok::<(), tileops::perf::profile::ProfileError>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

use serde_json::Value;

use super::profile::{AmbiguousDevice, DeviceMismatch, Profile};
use super::records::{Record, RecordKey, Run, RunMeta, TILEOPS_IMPL, TimingStats};

/// Efficiency above which a row is an anomaly.
pub const ANOMALY_ABOVE: f64 = 1.05;
/// Efficiency from which a row is at its ceiling.
pub const AT_CEILING_FROM: f64 = 0.80;
/// Speed-of-light time below which (together with [`LATENCY_MEDIAN_MS`]) a row is latency bound.
pub const LATENCY_SOL_MS: f64 = 0.003;
/// Measured time below which (together with [`LATENCY_SOL_MS`]) a row is latency bound.
pub const LATENCY_MEDIAN_MS: f64 = 0.020;

/// The verdict of a priced row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// An implied rate above a theoretical peak: impossible, a formula error. Fails the run.
    Fail,
    /// Efficiency above 1.05: the formula or the calibration is wrong.
    Anomaly,
    /// SOL under 3 µs and measured under 20 µs: launch overhead dominates.
    LatencyBound,
    /// Efficiency at or above 0.80.
    AtCeiling,
    /// Efficiency below 0.80.
    Below,
}

impl Verdict {
    /// Every verdict, in the order reports list them.
    pub const ALL: [Verdict; 5] = [
        Verdict::Fail,
        Verdict::Anomaly,
        Verdict::LatencyBound,
        Verdict::AtCeiling,
        Verdict::Below,
    ];

    /// The name used in every output (`"latency_bound"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Fail => "fail",
            Verdict::Anomaly => "anomaly",
            Verdict::LatencyBound => "latency_bound",
            Verdict::AtCeiling => "at_ceiling",
            Verdict::Below => "below",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which term of the roofline dominates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// `memory_ms > compute_ms`.
    Memory,
    /// Otherwise.
    Compute,
}

impl Bound {
    /// `"memory"` or `"compute"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
        }
    }
}

/// An implied rate above a theoretical ceiling.
#[derive(Debug, Clone, PartialEq)]
pub enum Impossible {
    /// `bytes / median` above `hbm.theoretical` (bytes/s).
    Hbm {
        /// The implied rate, bytes/s.
        implied: f64,
        /// The theoretical peak, bytes/s.
        theoretical: f64,
    },
    /// `flops / median` above the roof's theoretical peak (FLOP/s).
    Compute {
        /// The roof key.
        roof: String,
        /// The implied rate, FLOP/s.
        implied: f64,
        /// The theoretical peak, FLOP/s.
        theoretical: f64,
    },
}

impl fmt::Display for Impossible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Impossible::Hbm {
                implied,
                theoretical,
            } => write!(
                f,
                "implies {:.2} TB/s, above the {:.2} TB/s theoretical HBM peak: physically \
                 impossible, so `bytes` is under-counted (a formula error)",
                implied / 1e12,
                theoretical / 1e12
            ),
            Impossible::Compute {
                roof,
                implied,
                theoretical,
            } => write!(
                f,
                "implies {:.1} TFLOP/s, above the {:.1} TFLOP/s theoretical peak of {roof}: \
                 physically impossible, so `flops` or the roof key is wrong (a formula error)",
                implied / 1e12,
                theoretical / 1e12
            ),
        }
    }
}

/// Why a row has no number.
#[derive(Debug, Clone, PartialEq)]
pub enum BlankReason {
    /// The row ran on an emulated device (timing [`EMULATED_TIMING`](crate::perf::records::EMULATED_TIMING)): no timing to price.
    Emulated,
    /// The bench skipped the row.
    NotTimed {
        /// The reason the bench gave.
        reason: String,
    },
    /// No profile describes the record's device.
    NoProfile {
        /// The device name.
        device: String,
        /// The profiles searched.
        searched: Vec<String>,
    },
    /// Several profiles describe the record's device.
    AmbiguousProfile {
        /// The device name.
        device: String,
        /// The profiles that match it.
        profiles: Vec<String>,
    },
    /// The chosen profile describes another device.
    DeviceMismatch(DeviceMismatch),
    /// The record declares no roof.
    NoRoof,
    /// The profile has no ceiling for the record's roof.
    RoofNotInProfile {
        /// The record's roof key.
        roof: String,
        /// The profile.
        profile: String,
        /// The roofs it has.
        available: Vec<String>,
    },
    /// The record has no bytes.
    NoBytes,
    /// The record's bytes are zero.
    ZeroBytes,
    /// The record has no flops.
    NoFlops,
}

impl BlankReason {
    /// A stable identifier for counting (`"no_profile"`).
    pub const fn kind(&self) -> &'static str {
        match self {
            BlankReason::Emulated => "emulated",
            BlankReason::NotTimed { .. } => "not_timed",
            BlankReason::NoProfile { .. } => "no_profile",
            BlankReason::AmbiguousProfile { .. } => "ambiguous_profile",
            BlankReason::DeviceMismatch(_) => "device_mismatch",
            BlankReason::NoRoof => "no_roof",
            BlankReason::RoofNotInProfile { .. } => "roof_not_in_profile",
            BlankReason::NoBytes => "no_bytes",
            BlankReason::ZeroBytes => "zero_bytes",
            BlankReason::NoFlops => "no_flops",
        }
    }
}

impl fmt::Display for BlankReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlankReason::Emulated => f.write_str("emulated device: no timing"),
            BlankReason::NotTimed { reason } => write!(f, "not timed: {reason}"),
            BlankReason::NoProfile { device, searched } => write!(
                f,
                "no profile describes `{device}` (searched {}): efficiency is priced only \
                 against the timing device's own profile; pass --profile PATH if one exists",
                searched.join(", ")
            ),
            BlankReason::AmbiguousProfile { device, profiles } => {
                let profiles = profiles.join(", ");
                write!(
                    f,
                    "`{device}` matches several profiles ({profiles}); pass --profile to choose"
                )
            }
            BlankReason::DeviceMismatch(m) => write!(f, "not the profiled device: {m}"),
            BlankReason::NoRoof => f.write_str(
                "no roof: the op must declare the unit an optimal implementation would use \
                 (cuda_core.fp32, tensor_core.<dtype>)",
            ),
            BlankReason::RoofNotInProfile {
                roof,
                profile,
                available,
            } => write!(
                f,
                "roof `{roof}` is not in profile {profile} (it has {}); calibrate it on that \
                 device",
                available.join(", ")
            ),
            BlankReason::NoBytes => {
                f.write_str("no bytes: eval_roofline gave none for this workload")
            }
            BlankReason::ZeroBytes => f.write_str(
                "bytes is 0: a placeholder formula; count each input once and each output once \
                 in the manifest's bytes formula",
            ),
            BlankReason::NoFlops => {
                f.write_str("no flops: eval_roofline gave none for this workload")
            }
        }
    }
}

/// A row priced against a profile: the two roofline terms and the measured time.
#[derive(Debug, Clone, PartialEq)]
pub struct Priced {
    /// `bytes / hbm.effective`, ms.
    pub memory_ms: f64,
    /// `flops / roof.effective`, ms.
    pub compute_ms: f64,
    /// The measured median, ms.
    pub median_ms: f64,
    /// Set when an implied rate exceeds a theoretical peak.
    pub impossible: Option<Impossible>,
}

impl Priced {
    /// `max(memory_ms, compute_ms)`.
    pub fn sol_ms(&self) -> f64 {
        self.memory_ms.max(self.compute_ms)
    }

    /// `sol_ms / median_ms`.
    pub fn efficiency(&self) -> f64 {
        self.sol_ms() / self.median_ms
    }

    /// The larger term; compute on a tie.
    pub fn bound(&self) -> Bound {
        if self.memory_ms > self.compute_ms {
            Bound::Memory
        } else {
            Bound::Compute
        }
    }

    /// The verdict, by the first rule that holds (see the module docs).
    pub fn verdict(&self) -> Verdict {
        let efficiency = self.efficiency();
        if self.impossible.is_some() {
            Verdict::Fail
        } else if efficiency > ANOMALY_ABOVE {
            Verdict::Anomaly
        } else if self.sol_ms() < LATENCY_SOL_MS && self.median_ms < LATENCY_MEDIAN_MS {
            Verdict::LatencyBound
        } else if efficiency >= AT_CEILING_FROM {
            Verdict::AtCeiling
        } else {
            Verdict::Below
        }
    }
}

/// A row's outcome: priced, or blank with the reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Priced against a profile.
    Priced(Priced),
    /// No number, and why.
    Blank(BlankReason),
}

/// Prices one record against one profile, or says why it cannot.
///
/// A row that ran on an emulated device is blank first, whatever else it carries. The device
/// check comes next: a timing from another device says nothing about this profile's ceilings, not
/// even that a rate is impossible.
pub fn price(record: &Record, profile: &Profile) -> Outcome {
    let blank = Outcome::Blank;
    let Some(stats) = timing(record) else {
        return blank(untimed(record));
    };
    if let Err(mismatch) = profile.describes(&record.device) {
        return blank(BlankReason::DeviceMismatch(mismatch));
    }
    let Some(roof_key) = &record.roof else {
        return blank(BlankReason::NoRoof);
    };
    let Some((_, roof)) = profile.pricing_roof(roof_key) else {
        return blank(BlankReason::RoofNotInProfile {
            roof: roof_key.clone(),
            profile: profile.name.clone(),
            available: profile.roofs.keys().cloned().collect(),
        });
    };
    let bytes = match record.bytes {
        None => return blank(BlankReason::NoBytes),
        Some(0) => return blank(BlankReason::ZeroBytes),
        Some(b) => b as f64,
    };
    let Some(flops) = record.flops.map(|f| f as f64) else {
        return blank(BlankReason::NoFlops);
    };
    let hbm = profile.hbm();
    let seconds = stats.median_ms / 1e3;
    let impossible = if bytes / seconds > hbm.theoretical {
        Some(Impossible::Hbm {
            implied: bytes / seconds,
            theoretical: hbm.theoretical,
        })
    } else if flops / seconds > roof.theoretical {
        Some(Impossible::Compute {
            roof: roof_key.clone(),
            implied: flops / seconds,
            theoretical: roof.theoretical,
        })
    } else {
        None
    };
    Outcome::Priced(Priced {
        memory_ms: bytes / hbm.effective() * 1e3,
        compute_ms: flops / roof.effective() * 1e3,
        median_ms: stats.median_ms,
        impossible,
    })
}

/// The timing a row can be priced on: `None` for an untimed row, and always for an emulated one.
fn timing(record: &Record) -> Option<TimingStats> {
    if record.is_emulated() {
        return None;
    }
    record.stats()
}

/// Why a row without a [`timing`] is blank.
fn untimed(record: &Record) -> BlankReason {
    if record.is_emulated() {
        BlankReason::Emulated
    } else {
        BlankReason::NotTimed {
            reason: record.skipped.clone().unwrap_or_default(),
        }
    }
}

/// Why a record that no single candidate profile describes is blank. A row the bench did not time
/// (or ran on an emulated device) says so first: that is the reason it has no number, whatever the
/// profiles.
fn unpriceable(
    record: &Record,
    candidates: &[Profile],
    ambiguous: Option<AmbiguousDevice>,
) -> BlankReason {
    match (timing(record), ambiguous) {
        (None, _) => untimed(record),
        (Some(_), Some(AmbiguousDevice { device, profiles })) => {
            BlankReason::AmbiguousProfile { device, profiles }
        }
        (Some(_), None) => BlankReason::NoProfile {
            device: record.device.name.clone(),
            searched: candidates.iter().map(|p| p.name.clone()).collect(),
        },
    }
}

/// One report row: the record's identity and numbers, and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// op/workload/dtype/impl.
    pub key: RecordKey,
    /// The op's family.
    pub family: String,
    /// The record's roof key.
    pub roof: Option<String>,
    /// The profile the row was priced against, if any.
    pub profile: Option<String>,
    /// The record's flops.
    pub flops: Option<u64>,
    /// The record's bytes.
    pub bytes: Option<u64>,
    /// The record's timing, `None` when not timed.
    pub stats: Option<TimingStats>,
    /// Priced or blank.
    pub outcome: Outcome,
    /// For a tileops row, its strongest baseline (see [`Report::build_with_baselines`]).
    pub baseline: Option<Baseline>,
}

/// The strongest baseline of a tileops row: of the timed rows of another implementation
/// (`torch`, `torch-compile`, ...) with the same op, workload and dtype, timed on the same
/// device, the one with the fastest median.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// Its implementation (`impl`).
    pub implementation: String,
    /// Its timing.
    pub stats: TimingStats,
    /// How many timed baseline rows competed (it is the fastest of them).
    pub candidates: usize,
}

impl Row {
    /// The priced numbers, `None` for a blank row.
    pub fn priced(&self) -> Option<&Priced> {
        match &self.outcome {
            Outcome::Priced(p) => Some(p),
            Outcome::Blank(_) => None,
        }
    }

    /// The verdict, `None` for a blank row.
    pub fn verdict(&self) -> Option<Verdict> {
        self.priced().map(Priced::verdict)
    }

    /// The efficiency, `None` for a blank row.
    pub fn efficiency(&self) -> Option<f64> {
        self.priced().map(Priced::efficiency)
    }

    /// The speed-of-light time, `None` for a blank row.
    pub fn sol_ms(&self) -> Option<f64> {
        self.priced().map(Priced::sol_ms)
    }

    /// The dominant term, `None` for a blank row.
    pub fn bound(&self) -> Option<Bound> {
        self.priced().map(Priced::bound)
    }

    /// Why the row is blank, `None` when priced.
    pub fn blank(&self) -> Option<&BlankReason> {
        match &self.outcome {
            Outcome::Blank(reason) => Some(reason),
            Outcome::Priced(_) => None,
        }
    }

    /// The text of the `reason` column: why a row is blank, fails, is an anomaly or is latency
    /// bound; `None` for `at_ceiling` and `below`.
    pub fn reason(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Blank(reason) => Some(reason.to_string()),
            Outcome::Priced(p) => match (p.verdict(), &p.impossible) {
                (_, Some(impossible)) => Some(impossible.to_string()),
                (Verdict::Anomaly, _) => Some(format!(
                    "efficiency {:.0}% > 105%: the formula or the calibration is wrong, never a \
                     win",
                    p.efficiency() * 100.0
                )),
                (Verdict::LatencyBound, _) => Some(
                    "SOL < 3 µs and measured < 20 µs: launch overhead dominates; the model has no \
                     traction"
                        .into(),
                ),
                _ => None,
            },
        }
    }

    /// Bytes moved per second as measured, `None` without bytes or timing.
    pub fn achieved_bytes_per_s(&self) -> Option<f64> {
        Some(self.bytes? as f64 / (self.stats?.median_ms / 1e3))
    }

    /// FLOP per second as measured, `None` without flops or timing.
    pub fn achieved_flops_per_s(&self) -> Option<f64> {
        Some(self.flops? as f64 / (self.stats?.median_ms / 1e3))
    }

    /// `median / strongest baseline's median`: below 1, tileops is faster. `None` without a
    /// timing or a baseline.
    pub fn baseline_ratio(&self) -> Option<f64> {
        Some(self.stats?.median_ms / self.baseline.as_ref()?.stats.median_ms)
    }

    /// Faster / slower than the strongest baseline when the p10–p90 spreads do not overlap, same
    /// when they do; `None` without a timing or a baseline.
    pub fn baseline_call(&self) -> Option<Call> {
        Some(Call::from_spreads(
            self.stats?,
            self.baseline.as_ref()?.stats,
        ))
    }
}

/// How rows find their profile.
#[derive(Debug, Clone, Copy)]
pub enum ProfileChoice<'a> {
    /// Every row against this profile; rows from another device come out blank.
    Fixed(&'a Profile),
    /// Each row against the candidate whose device patterns match the row's device.
    ByDevice(&'a [Profile]),
}

/// Per-family line of the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilySummary {
    /// The family.
    pub family: String,
    /// Its rows.
    pub rows: usize,
    /// The rows the geometric mean is taken over (`at_ceiling` and `below`).
    pub counted: usize,
    /// The geometric-mean efficiency of those rows; `None` when there are none.
    pub geomean_efficiency: Option<f64>,
}

/// Counts per verdict and per blank reason, and efficiency per family.
///
/// The geometric mean counts `at_ceiling` and `below` rows only: a `fail` or `anomaly` efficiency
/// measures an accounting error, not speed, and a `latency_bound` one measures launch overhead;
/// averaging them in would reward exactly the misreadings the verdicts exist to catch.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// All rows.
    pub rows: usize,
    /// Rows per verdict, every verdict listed (zero included), in [`Verdict::ALL`] order.
    pub verdicts: Vec<(Verdict, usize)>,
    /// Blank rows per [`BlankReason::kind`].
    pub blank: BTreeMap<&'static str, usize>,
    /// Per family, in order of first appearance.
    pub families: Vec<FamilySummary>,
}

impl Summary {
    /// Summarises rows.
    pub fn of(rows: &[Row]) -> Summary {
        let verdicts = Verdict::ALL
            .iter()
            .map(|&v| (v, rows.iter().filter(|r| r.verdict() == Some(v)).count()))
            .collect();
        let mut blank = BTreeMap::new();
        for reason in rows.iter().filter_map(Row::blank) {
            *blank.entry(reason.kind()).or_insert(0) += 1;
        }
        let mut order: Vec<&str> = Vec::new();
        let mut by_family: HashMap<&str, Vec<&Row>> = HashMap::new();
        for row in rows {
            by_family.entry(&row.family).or_insert_with(|| {
                order.push(&row.family);
                Vec::new()
            });
            if let Some(list) = by_family.get_mut(row.family.as_str()) {
                list.push(row);
            }
        }
        let families = order
            .into_iter()
            .map(|family| {
                let members = &by_family[family];
                let counted: Vec<f64> = members
                    .iter()
                    .filter(|r| matches!(r.verdict(), Some(Verdict::AtCeiling | Verdict::Below)))
                    .filter_map(|r| r.efficiency())
                    .collect();
                let geomean_efficiency = (!counted.is_empty()).then(|| {
                    (counted.iter().map(|e| e.ln()).sum::<f64>() / counted.len() as f64).exp()
                });
                FamilySummary {
                    family: family.to_owned(),
                    rows: members.len(),
                    counted: counted.len(),
                    geomean_efficiency,
                }
            })
            .collect();
        Summary {
            rows: rows.len(),
            verdicts,
            blank,
            families,
        }
    }

    /// Rows of a verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.verdicts
            .iter()
            .find(|(v, _)| *v == verdict)
            .map_or(0, |(_, n)| *n)
    }

    /// Blank rows.
    pub fn blank_rows(&self) -> usize {
        self.blank.values().sum()
    }
}

/// The priced run.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The run's metadata.
    pub meta: RunMeta,
    /// The profiles rows were priced against, described (`"h200: NVIDIA H200 SXM … (profiles/h200.yaml (built in))"`).
    pub profiles: Vec<String>,
    /// One row per record, in the run's order.
    pub rows: Vec<Row>,
    /// Counts and per-family efficiency.
    pub summary: Summary,
}

impl Report {
    /// Prices every record of a run; tileops rows get the strongest baseline among the run's own
    /// baseline rows.
    pub fn build(run: &Run, choice: ProfileChoice<'_>) -> Report {
        Report::build_with_baselines(run, choice, &[])
    }

    /// Prices every record of a run, and gives each tileops row its strongest [`Baseline`]: the
    /// fastest timed row of another implementation (`impl` other than `tileops`), with the same
    /// op, workload and dtype and the same device name, found in `run` itself or in `baselines`
    /// (the files `torch_baseline.py` writes). The baseline files' own rows are not reported.
    pub fn build_with_baselines(run: &Run, choice: ProfileChoice<'_>, baselines: &[Run]) -> Report {
        let candidates = baseline_candidates(run, baselines);
        let rows: Vec<Row> = run
            .records
            .iter()
            .map(|record| {
                let (profile, outcome) = match choice {
                    ProfileChoice::Fixed(profile) => (Some(profile), price(record, profile)),
                    ProfileChoice::ByDevice(candidates) => {
                        match Profile::select(&record.device.name, candidates) {
                            Ok(Some(profile)) => (Some(profile), price(record, profile)),
                            found => (
                                None,
                                Outcome::Blank(unpriceable(record, candidates, found.err())),
                            ),
                        }
                    }
                };
                Row {
                    key: record.key(),
                    family: record.family.clone(),
                    roof: record.roof.clone(),
                    profile: profile.map(|p| p.name.clone()),
                    flops: record.flops,
                    bytes: record.bytes,
                    stats: timing(record),
                    outcome,
                    baseline: strongest_baseline(record, &candidates),
                }
            })
            .collect();
        let profiles = match choice {
            ProfileChoice::Fixed(profile) => vec![describe_profile(profile)],
            ProfileChoice::ByDevice(candidates) => candidates
                .iter()
                .filter(|p| {
                    rows.iter()
                        .any(|r| r.profile.as_deref() == Some(p.name.as_str()))
                })
                .map(describe_profile)
                .collect(),
        };
        let summary = Summary::of(&rows);
        Report {
            meta: run.meta.clone(),
            profiles,
            rows,
            summary,
        }
    }

    /// For a run that stopped before its last row (`meta.partial`), a sentence saying so:
    /// `"Partial run: interrupted by SIGINT after 3 of 132 rows; 3 of the 132 planned rows are in
    /// the file"`; `None` for a complete run.
    ///
    /// ```
    /// use tileops::perf::records::{DeviceInfo, Partial, Run, RunMeta};
    /// use tileops::perf::report::{ProfileChoice, Report};
    /// let meta = RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", DeviceInfo::new("cpu: test"))
    ///     .with_partial(Partial::new("interrupted by SIGINT after 0 of 4 rows", 4));
    /// let report = Report::build(&Run::new(meta, vec![]), ProfileChoice::ByDevice(&[]));
    /// assert!(report.partial_note().unwrap().starts_with("Partial run: interrupted by SIGINT"));
    /// assert!(report.to_markdown().contains("**Partial run: "));
    /// ```
    pub fn partial_note(&self) -> Option<String> {
        self.meta.partial.as_ref().map(|p| {
            format!(
                "Partial run: {}; {} of the {} planned rows are in the file",
                p.reason,
                self.rows.len(),
                p.planned_rows
            )
        })
    }

    /// Whether any row failed the physics check (the run must fail).
    pub fn has_fail(&self) -> bool {
        self.summary.count(Verdict::Fail) > 0
    }

    /// Whether any row has a baseline (the tables then show the baseline columns).
    pub fn has_baselines(&self) -> bool {
        self.rows.iter().any(|r| r.baseline.is_some())
    }

    /// One sentence on the tileops rows against their strongest baselines; `None` when no row
    /// has one.
    pub fn baseline_summary(&self) -> Option<String> {
        let compared: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.baseline_ratio().is_some())
            .collect();
        if compared.is_empty() {
            return None;
        }
        let count = |call: Call| {
            compared
                .iter()
                .filter(|r| r.baseline_call() == Some(call))
                .count()
        };
        let geomean = (compared
            .iter()
            .filter_map(|r| r.baseline_ratio())
            .map(f64::ln)
            .sum::<f64>()
            / compared.len() as f64)
            .exp();
        Some(format!(
            "{} tileops rows timed against their strongest baseline (time vs baseline = tileops \
             median / baseline median; below 1, tileops is faster): {} faster, {} slower, {} \
             within the noise; geometric-mean time ratio {geomean:.3}.",
            compared.len(),
            count(Call::Faster),
            count(Call::Slower),
            count(Call::Same)
        ))
    }

    /// The report as a markdown document: run and profile, the table, the summary.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.meta;
        let _ = writeln!(out, "# Roofline report\n");
        let _ = writeln!(
            out,
            "Run `{}` of {}, tileops {}, on {}.\n",
            m.git_revision,
            m.date,
            m.tool_version,
            describe_device(&m.device)
        );
        if let Some(note) = self.partial_note() {
            let _ = writeln!(out, "**{note}**\n");
        }
        if self.profiles.is_empty() {
            let _ = writeln!(
                out,
                "Profile: none describes this device; efficiency is blank.\n"
            );
        }
        for p in &self.profiles {
            let _ = writeln!(out, "Profile {p}.\n");
        }
        if let Some(n) = self.summary.blank.get(BlankReason::Emulated.kind()) {
            let _ = writeln!(
                out,
                "{n} row(s) ran on an emulated device: run once for correctness, never timed, so \
                 blank (an emulator's timings say nothing about a GPU).\n"
            );
        }
        let baselines = self.has_baselines();
        if let Some(sentence) = self.baseline_summary() {
            let _ = writeln!(out, "{sentence}\n");
        }
        let mut header = vec![
            "op",
            "workload",
            "dtype",
            "impl",
            "roof",
            "median ms",
            "GB/s",
            "TFLOP/s",
            "SOL ms",
            "bound",
            "efficiency",
            "verdict",
        ];
        if baselines {
            header.extend(["baseline", "baseline ms", "vs baseline"]);
        }
        header.push("reason");
        markdown_row(&mut out, header.iter().map(|s| s.to_string()));
        markdown_row(&mut out, header.iter().map(|_| "---".to_owned()));
        for row in &self.rows {
            let baseline_cells = baselines.then(|| {
                let b = row.baseline.as_ref();
                [
                    b.map(|b| b.implementation.clone()).unwrap_or_default(),
                    opt(b.map(|b| b.stats.median_ms), sig4),
                    opt(row.baseline_ratio(), |r| {
                        let call = row.baseline_call().map_or("", Call::as_str);
                        format!("{r:.3} ({call})")
                    }),
                ]
            });
            let mut cells = vec![
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.key.implementation.clone(),
                row.roof.clone().unwrap_or_default(),
                opt(row.stats.map(|s| s.median_ms), sig4),
                opt(row.achieved_bytes_per_s(), |v| sig4(v / 1e9)),
                opt(row.achieved_flops_per_s(), |v| sig4(v / 1e12)),
                opt(row.sol_ms(), sig4),
                row.bound()
                    .map(Bound::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                opt(row.efficiency(), |e| format!("{:.1}%", e * 100.0)),
                row.verdict()
                    .map(Verdict::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ];
            cells.extend(baseline_cells.into_iter().flatten());
            cells.push(row.reason().unwrap_or_default());
            markdown_row(&mut out, cells.into_iter());
        }
        let s = &self.summary;
        let _ = writeln!(out, "\n## Summary\n\n{} rows.\n", s.rows);
        markdown_row(
            &mut out,
            ["verdict".to_owned(), "rows".to_owned()].into_iter(),
        );
        markdown_row(&mut out, ["---".to_owned(), "---:".to_owned()].into_iter());
        for (verdict, n) in &s.verdicts {
            markdown_row(&mut out, [verdict.to_string(), n.to_string()].into_iter());
        }
        markdown_row(
            &mut out,
            ["blank".to_owned(), s.blank_rows().to_string()].into_iter(),
        );
        for (kind, n) in &s.blank {
            markdown_row(
                &mut out,
                [format!("blank: {kind}"), n.to_string()].into_iter(),
            );
        }
        let _ = writeln!(
            out,
            "\nGeometric-mean efficiency per family, over `at_ceiling` and `below` rows:\n"
        );
        markdown_row(
            &mut out,
            ["family", "rows", "counted", "geomean efficiency"]
                .iter()
                .map(|s| s.to_string()),
        );
        markdown_row(
            &mut out,
            ["---", "---:", "---:", "---:"]
                .iter()
                .map(|s| s.to_string()),
        );
        for f in &s.families {
            markdown_row(
                &mut out,
                [
                    f.family.clone(),
                    f.rows.to_string(),
                    f.counted.to_string(),
                    opt(f.geomean_efficiency, |e| format!("{:.1}%", e * 100.0)),
                ]
                .into_iter(),
            );
        }
        out
    }

    /// The rows as CSV (header line first; blank cells for missing numbers).
    pub fn to_csv(&self) -> String {
        let header = [
            "op",
            "family",
            "workload",
            "dtype",
            "impl",
            "roof",
            "profile",
            "flops",
            "bytes",
            "median_ms",
            "p10_ms",
            "p90_ms",
            "memory_ms",
            "compute_ms",
            "sol_ms",
            "efficiency",
            "bound",
            "verdict",
            "blank",
            "reason",
        ];
        let baselines = self.has_baselines();
        let mut header = header.to_vec();
        if baselines {
            header.extend([
                "baseline_impl",
                "baseline_median_ms",
                "baseline_time_ratio",
                "baseline_call",
            ]);
        }
        let mut lines = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for row in &self.rows {
            let p = row.priced();
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            let baseline_cells = baselines.then(|| {
                let b = row.baseline.as_ref();
                [
                    b.map(|b| b.implementation.clone()).unwrap_or_default(),
                    num(b.map(|b| b.stats.median_ms)),
                    num(row.baseline_ratio()),
                    row.baseline_call().map_or("", Call::as_str).to_owned(),
                ]
            });
            lines.push(
                [
                    row.key.op.clone(),
                    row.family.clone(),
                    row.key.workload.clone(),
                    row.key.dtype.clone(),
                    row.key.implementation.clone(),
                    row.roof.clone().unwrap_or_default(),
                    row.profile.clone().unwrap_or_default(),
                    row.flops.map(|v| v.to_string()).unwrap_or_default(),
                    row.bytes.map(|v| v.to_string()).unwrap_or_default(),
                    num(row.stats.map(|s| s.median_ms)),
                    num(row.stats.map(|s| s.p10_ms)),
                    num(row.stats.map(|s| s.p90_ms)),
                    num(p.map(|p| p.memory_ms)),
                    num(p.map(|p| p.compute_ms)),
                    num(row.sol_ms()),
                    num(row.efficiency()),
                    row.bound()
                        .map(Bound::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    row.verdict()
                        .map(Verdict::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    row.blank()
                        .map(BlankReason::kind)
                        .unwrap_or_default()
                        .to_owned(),
                    row.reason().unwrap_or_default(),
                ]
                .into_iter()
                .chain(baseline_cells.into_iter().flatten())
                .collect(),
            );
        }
        csv_text(lines)
    }

    /// The report as JSON: `meta`, `profiles`, `rows` (every field, `null` where blank) and
    /// `summary`. For a large report prefer [`Report::write_json`], which streams the same text
    /// without building the tree.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json_view::Report::of(self, None)).unwrap_or(Value::Null)
    }

    /// Writes the report as pretty-printed JSON to `out`, row by row: the same document as
    /// `format!("{:#}", report.to_json())` (and `comparison`'s [`Comparison::to_json`] under the
    /// key `comparison`, when given), without building it in memory first; a newline ends it.
    /// Memory stays that of the report itself. `out` should be buffered.
    ///
    /// ```
    /// use tileops::perf::records::{DeviceInfo, Record, Run, RunMeta};
    /// use tileops::perf::report::{ProfileChoice, Report};
    ///
    /// let device = DeviceInfo::new("cpu: test");
    /// let record = Record::new("relu", "elementwise", "w", "float32", device.clone());
    /// let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
    /// let report = Report::build(&run, ProfileChoice::ByDevice(&[]));
    /// let mut text = Vec::new();
    /// report.write_json(&mut text, None)?;
    /// assert_eq!(String::from_utf8(text).unwrap(), format!("{:#}\n", report.to_json()));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// The first error writing to `out`.
    pub fn write_json(
        &self,
        out: &mut dyn std::io::Write,
        comparison: Option<&Comparison>,
    ) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &json_view::Report::of(self, comparison))
            .map_err(std::io::Error::from)?;
        out.write_all(b"\n")
    }
}

/// The JSON documents of [`Report`] and [`Comparison`] as borrowed views that serialise straight
/// into a writer. Fields are declared in alphabetical order, the order a `serde_json::Value`
/// object (a sorted map) prints them in, so the streamed text and the `Value` text are the same.
mod json_view {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde::ser::{SerializeSeq, Serializer};

    use super::{BlankReason, Bound, Call, RunMeta, Verdict};

    /// Rows serialised one at a time, each view made just before it is written: only one row's
    /// view exists at once.
    struct Each<'a, T, V>(&'a [T], fn(&'a T) -> V);

    impl<'a, T, V: Serialize> Serialize for Each<'a, T, V> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
            for item in self.0 {
                seq.serialize_element(&(self.1)(item))?;
            }
            seq.end()
        }
    }

    /// [`RunMeta`] with its keys sorted (as `serde_json::to_value` gives them).
    fn sorted_meta(meta: &RunMeta) -> serde_json::Value {
        serde_json::to_value(meta).unwrap_or(serde_json::Value::Null)
    }

    #[derive(Serialize)]
    pub(super) struct Report<'a> {
        baseline_summary: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        comparison: Option<Comparison<'a>>,
        meta: serde_json::Value,
        profiles: &'a [String],
        rows: Each<'a, super::Row, Row<'a>>,
        summary: Summary<'a>,
    }

    impl<'a> Report<'a> {
        pub(super) fn of(
            report: &'a super::Report,
            comparison: Option<&'a super::Comparison>,
        ) -> Self {
            let s = &report.summary;
            Report {
                baseline_summary: report.baseline_summary(),
                comparison: comparison.map(Comparison::of),
                meta: sorted_meta(&report.meta),
                profiles: &report.profiles,
                rows: Each(&report.rows, Row::of),
                summary: Summary {
                    blank: &s.blank,
                    families: s
                        .families
                        .iter()
                        .map(|f| Family {
                            counted: f.counted,
                            family: &f.family,
                            geomean_efficiency: f.geomean_efficiency,
                            rows: f.rows,
                        })
                        .collect(),
                    rows: s.rows,
                    verdicts: s.verdicts.iter().map(|(v, n)| (v.as_str(), *n)).collect(),
                },
            }
        }
    }

    #[derive(Serialize)]
    struct Summary<'a> {
        blank: &'a BTreeMap<&'static str, usize>,
        families: Vec<Family<'a>>,
        rows: usize,
        verdicts: BTreeMap<&'static str, usize>,
    }

    #[derive(Serialize)]
    struct Family<'a> {
        counted: usize,
        family: &'a str,
        geomean_efficiency: Option<f64>,
        rows: usize,
    }

    #[derive(Serialize)]
    pub(super) struct Row<'a> {
        baseline: Option<Baseline<'a>>,
        blank: Option<&'static str>,
        bound: Option<&'static str>,
        bytes: Option<u64>,
        compute_ms: Option<f64>,
        dtype: &'a str,
        efficiency: Option<f64>,
        family: &'a str,
        flops: Option<u64>,
        #[serde(rename = "impl")]
        implementation: &'a str,
        median_ms: Option<f64>,
        memory_ms: Option<f64>,
        op: &'a str,
        p10_ms: Option<f64>,
        p90_ms: Option<f64>,
        profile: Option<&'a str>,
        reason: Option<String>,
        roof: Option<&'a str>,
        sol_ms: Option<f64>,
        verdict: Option<&'static str>,
        workload: &'a str,
    }

    impl<'a> Row<'a> {
        fn of(row: &'a super::Row) -> Row<'a> {
            let p = row.priced();
            Row {
                baseline: row.baseline.as_ref().map(|b| Baseline {
                    call: row.baseline_call().map(Call::as_str),
                    candidates: b.candidates,
                    implementation: &b.implementation,
                    median_ms: b.stats.median_ms,
                    p10_ms: b.stats.p10_ms,
                    p90_ms: b.stats.p90_ms,
                    time_ratio: row.baseline_ratio(),
                }),
                blank: row.blank().map(BlankReason::kind),
                bound: row.bound().map(Bound::as_str),
                bytes: row.bytes,
                compute_ms: p.map(|p| p.compute_ms),
                dtype: &row.key.dtype,
                efficiency: row.efficiency(),
                family: &row.family,
                flops: row.flops,
                implementation: &row.key.implementation,
                median_ms: row.stats.map(|s| s.median_ms),
                memory_ms: p.map(|p| p.memory_ms),
                op: &row.key.op,
                p10_ms: row.stats.map(|s| s.p10_ms),
                p90_ms: row.stats.map(|s| s.p90_ms),
                profile: row.profile.as_deref(),
                reason: row.reason(),
                roof: row.roof.as_deref(),
                sol_ms: row.sol_ms(),
                verdict: row.verdict().map(Verdict::as_str),
                workload: &row.key.workload,
            }
        }
    }

    #[derive(Serialize)]
    struct Baseline<'a> {
        call: Option<&'static str>,
        candidates: usize,
        #[serde(rename = "impl")]
        implementation: &'a str,
        median_ms: f64,
        p10_ms: f64,
        p90_ms: f64,
        time_ratio: Option<f64>,
    }

    #[derive(Serialize)]
    pub(super) struct Comparison<'a> {
        current: serde_json::Value,
        device_note: Option<String>,
        other: serde_json::Value,
        rows: Each<'a, super::CompareRow, CompareRow<'a>>,
    }

    impl<'a> Comparison<'a> {
        pub(super) fn of(c: &'a super::Comparison) -> Self {
            Comparison {
                current: sorted_meta(&c.current),
                device_note: c.device_note(),
                other: sorted_meta(&c.other),
                rows: Each(&c.rows, CompareRow::of),
            }
        }
    }

    #[derive(Serialize)]
    pub(super) struct CompareRow<'a> {
        call: Option<&'static str>,
        current_median_ms: Option<f64>,
        current_p10_ms: Option<f64>,
        current_p90_ms: Option<f64>,
        dtype: &'a str,
        #[serde(rename = "impl")]
        implementation: &'a str,
        note: Option<String>,
        op: &'a str,
        other_median_ms: Option<f64>,
        other_p10_ms: Option<f64>,
        other_p90_ms: Option<f64>,
        ratio_high: Option<f64>,
        ratio_low: Option<f64>,
        time_ratio: Option<f64>,
        workload: &'a str,
    }

    impl<'a> CompareRow<'a> {
        fn of(row: &'a super::CompareRow) -> CompareRow<'a> {
            let (c, o) = (row.current.stats(), row.other.stats());
            CompareRow {
                call: row.call().map(Call::as_str),
                current_median_ms: c.map(|s| s.median_ms),
                current_p10_ms: c.map(|s| s.p10_ms),
                current_p90_ms: c.map(|s| s.p90_ms),
                dtype: &row.key.dtype,
                implementation: &row.key.implementation,
                note: row.note(),
                op: &row.key.op,
                other_median_ms: o.map(|s| s.median_ms),
                other_p10_ms: o.map(|s| s.p10_ms),
                other_p90_ms: o.map(|s| s.p90_ms),
                ratio_high: row.interval.map(|i| i.high),
                ratio_low: row.interval.map(|i| i.low),
                time_ratio: row.time_ratio(),
                workload: &row.key.workload,
            }
        }
    }
}

/// The timed baseline rows (any `impl` but tileops) of a run and of baseline runs, by op, workload,
/// dtype and device name.
type Candidates<'a> = HashMap<(&'a str, &'a str, &'a str, &'a str), Vec<(&'a str, TimingStats)>>;

fn baseline_candidates<'a>(run: &'a Run, baselines: &'a [Run]) -> Candidates<'a> {
    let mut candidates: Candidates<'a> = HashMap::new();
    for record in std::iter::once(run)
        .chain(baselines)
        .flat_map(|r| &r.records)
        .filter(|r| r.implementation != TILEOPS_IMPL)
    {
        if let Some(stats) = timing(record) {
            let key = (
                record.op.as_str(),
                record.workload.as_str(),
                record.dtype.as_str(),
                record.device.name.as_str(),
            );
            candidates
                .entry(key)
                .or_default()
                .push((record.implementation.as_str(), stats));
        }
    }
    candidates
}

/// The fastest candidate of a tileops record; `None` for a baseline record or without candidates.
fn strongest_baseline(record: &Record, candidates: &Candidates<'_>) -> Option<Baseline> {
    if record.implementation != TILEOPS_IMPL {
        return None;
    }
    let key = (
        record.op.as_str(),
        record.workload.as_str(),
        record.dtype.as_str(),
        record.device.name.as_str(),
    );
    let rows = candidates.get(&key)?;
    let (implementation, stats) = rows
        .iter()
        .min_by(|a, b| a.1.median_ms.total_cmp(&b.1.median_ms))?;
    Some(Baseline {
        implementation: (*implementation).to_owned(),
        stats: *stats,
        candidates: rows.len(),
    })
}

/// `"h200: NVIDIA H200 SXM … (profiles/h200.yaml (built in)); hbm 4502.4 GB/s effective of 4800.0"`.
fn describe_profile(p: &Profile) -> String {
    let hbm = p.hbm();
    format!(
        "{}: {} ({}); hbm {:.1} GB/s effective of {:.1} theoretical",
        p.name,
        p.device.name,
        p.origin,
        hbm.effective() / 1e9,
        hbm.theoretical / 1e9
    )
}

fn describe_device(d: &super::records::DeviceInfo) -> String {
    let mut out = format!("`{}`", d.name);
    if let Some(cc) = d.compute_capability {
        let _ = write!(out, ", compute capability {cc}");
    }
    if let Some(driver) = &d.driver {
        let _ = write!(out, ", driver {driver}");
    }
    if let Some(l2) = d.l2_bytes {
        let _ = write!(out, ", L2 {:.1} MiB", l2 as f64 / (1u64 << 20) as f64);
    }
    out
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_default()
}

/// Four significant digits, without exponent for the magnitudes reports show.
pub(crate) fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{v:.digits$}")
}

fn markdown_row(out: &mut String, cells: impl Iterator<Item = String>) {
    out.push('|');
    for cell in cells {
        let _ = write!(out, " {} |", cell.replace('|', "\\|").replace('\n', " "));
    }
    out.push('\n');
}

/// CSV text of `rows` (the header first), quoted by the csv crate (RFC 4180: a cell with a comma,
/// a quote or a line break is quoted, its quotes doubled), one `\n`-terminated line per row.
fn csv_text(rows: impl IntoIterator<Item = Vec<String>>) -> String {
    // A writer into memory: its only failure would be the buffer's I/O, which cannot fail.
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .flexible(true)
        .from_writer(Vec::new());
    for row in rows {
        writer
            .write_record(&row)
            .expect("writing CSV into memory cannot fail");
    }
    let bytes = writer
        .into_inner()
        .expect("flushing CSV into memory cannot fail");
    // Every cell was a `String`, so the bytes are UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// How many bootstrap resamples [`RatioInterval::bootstrap`] draws for `--compare`: 2000.
pub const BOOTSTRAP_RESAMPLES: u32 = 2000;

/// The confidence of the comparison's intervals: 95%.
pub const CONFIDENCE: f64 = 0.95;

/// The seed of the comparison's bootstrap: the same two files always give the same intervals,
/// calls and gate.
pub const BOOTSTRAP_SEED: u64 = 0x7113_0b00_75ee_d5ee;

/// The fewest raw samples on each side for a bootstrap interval; with fewer, a resample has too
/// few distinct medians for its percentiles to mean anything, and the call falls back to the
/// spreads.
pub const MIN_BOOTSTRAP_SAMPLES: usize = 5;

/// A confidence interval of the ratio of medians `current / other` (below 1: the current run is
/// faster).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioInterval {
    /// The lower bound.
    pub low: f64,
    /// The upper bound.
    pub high: f64,
}

impl RatioInterval {
    /// The percentile bootstrap of `median(current) / median(other)`: `resamples` times, each
    /// side is resampled with replacement to its own size and the ratio of the two medians taken;
    /// the interval is the central `confidence` of those ratios. Deterministic for a `seed`.
    /// `None` when either side has fewer than [`MIN_BOOTSTRAP_SAMPLES`] samples, `resamples` is
    /// 0, `confidence` is not within (0, 1), or a sample is not a positive finite time.
    ///
    /// The generator is SplitMix64, written out here rather than taken from a crate, because the
    /// intervals of a saved comparison must not move when a dependency changes its streams.
    ///
    /// ```
    /// use tileops::perf::report::RatioInterval;
    /// let base: Vec<f64> = (0..50).map(|i| 1.0 + 0.001 * (i % 7) as f64).collect();
    /// let slower: Vec<f64> = base.iter().map(|t| t * 1.2).collect();
    /// let i = RatioInterval::bootstrap(&slower, &base, 2000, 0.95, 1).unwrap();
    /// assert!(i.low > 1.19 && i.high < 1.21, "{i:?}");
    /// ```
    pub fn bootstrap(
        current: &[f64],
        other: &[f64],
        resamples: u32,
        confidence: f64,
        seed: u64,
    ) -> Option<RatioInterval> {
        let usable = |s: &[f64]| {
            s.len() >= MIN_BOOTSTRAP_SAMPLES && s.iter().all(|t| t.is_finite() && *t > 0.0)
        };
        let sound = usable(current)
            && usable(other)
            && resamples > 0
            && confidence > 0.0
            && confidence < 1.0;
        if !sound {
            return None;
        }
        let mut rng = SplitMix64(seed);
        let (mut a, mut b) = (vec![0.0; current.len()], vec![0.0; other.len()]);
        let mut ratios: Vec<f64> = (0..resamples)
            .map(|_| {
                resample(current, &mut a, &mut rng);
                resample(other, &mut b, &mut rng);
                median_in_place(&mut a) / median_in_place(&mut b)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let tail = (1.0 - confidence) / 2.0;
        Some(RatioInterval {
            low: super::records::percentile(&ratios, tail)?,
            high: super::records::percentile(&ratios, 1.0 - tail)?,
        })
    }

    /// Faster when the whole interval is below 1, slower when it is above 1, same when it holds 1.
    pub fn call(self) -> Call {
        if self.high < 1.0 {
            Call::Faster
        } else if self.low > 1.0 {
            Call::Slower
        } else {
            Call::Same
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood 2014): small, fast, and fixed forever.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; its bias, below n / 2^64, is immaterial here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// Fills `into` with draws from `from`, with replacement.
fn resample(from: &[f64], into: &mut [f64], rng: &mut SplitMix64) {
    for slot in into.iter_mut() {
        *slot = from[rng.below(from.len())];
    }
}

/// The median (the mean of the two middle values for an even count, as [`TimingStats`] takes
/// it), reordering `values`; they must not be empty.
fn median_in_place(values: &mut [f64]) -> f64 {
    let (mid, odd) = (values.len() / 2, values.len() % 2 == 1);
    let (below, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if odd {
        return upper;
    }
    let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lower + upper) / 2.0
}

/// How one row compares between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Faster beyond the noise: the ratio's confidence interval lies below 1 (without samples, the
    /// current run's p90 is below the other run's p10).
    Faster,
    /// Slower beyond the noise: the interval lies above 1 (without samples, the current run's p10
    /// is above the other run's p90).
    Slower,
    /// The interval holds 1 (without samples, the spreads overlap).
    Same,
}

impl Call {
    /// Faster when `current`'s p90 is below `other`'s p10, slower when its p10 is above the
    /// other's p90, same when the spreads overlap.
    pub fn from_spreads(current: TimingStats, other: TimingStats) -> Call {
        if current.p90_ms < other.p10_ms {
            Call::Faster
        } else if current.p10_ms > other.p90_ms {
            Call::Slower
        } else {
            Call::Same
        }
    }

    /// `"faster"`, `"slower"` or `"same"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Call::Faster => "faster",
            Call::Slower => "slower",
            Call::Same => "same",
        }
    }
}

/// One side of a compared row.
#[derive(Debug, Clone, PartialEq)]
pub enum Side {
    /// The run has no such row.
    Absent,
    /// The run skipped the row, with the reason.
    Skipped(String),
    /// The run timed it.
    Timed(TimingStats),
}

impl Side {
    fn of(record: Option<&Record>) -> Side {
        match record {
            None => Side::Absent,
            Some(r) => match (timing(r), untimed(r)) {
                (Some(stats), _) => Side::Timed(stats),
                (None, BlankReason::NotTimed { reason }) => Side::Skipped(reason),
                (None, other) => Side::Skipped(other.to_string()),
            },
        }
    }

    fn stats(&self) -> Option<TimingStats> {
        match self {
            Side::Timed(s) => Some(*s),
            _ => None,
        }
    }
}

/// A row of a comparison between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    /// op/workload/dtype/impl.
    pub key: RecordKey,
    /// The current run's side.
    pub current: Side,
    /// The other (reference) run's side.
    pub other: Side,
    /// The [`CONFIDENCE`] bootstrap interval of the time ratio, when both sides are timed and
    /// kept at least [`MIN_BOOTSTRAP_SAMPLES`] raw samples.
    pub interval: Option<RatioInterval>,
}

impl CompareRow {
    /// `current.median / other.median`: below 1, the current run is faster.
    pub fn time_ratio(&self) -> Option<f64> {
        Some(self.current.stats()?.median_ms / self.other.stats()?.median_ms)
    }

    /// From the bootstrap interval when there is one ([`RatioInterval::call`]); for rows without
    /// raw samples (files written before they were kept), from the p10–p90 spreads
    /// ([`Call::from_spreads`]). `None` unless both sides are timed.
    pub fn call(&self) -> Option<Call> {
        let (current, other) = (self.current.stats()?, self.other.stats()?);
        Some(match self.interval {
            Some(interval) => interval.call(),
            None => Call::from_spreads(current, other),
        })
    }

    /// Whether the current run is slower than the other by more than `pct` percent with
    /// confidence: the interval's lower bound above `1 + pct / 100` (without an interval: the
    /// current p10 above the other's p90 times that factor). `false` unless both sides are timed.
    ///
    /// ```
    /// use tileops::perf::records::{DeviceInfo, Record, Run, RunMeta};
    /// use tileops::perf::report::Comparison;
    /// let device = DeviceInfo::new("cpu: test");
    /// let run = |scale: f64| {
    ///     let samples: Vec<f64> = (0..40).map(|i| scale * (1.0 + 0.002 * (i % 5) as f64)).collect();
    ///     let r = Record::new("softmax", "reduction", "w", "float32", device.clone())
    ///         .with_samples("cpu_wall", &samples)
    ///         .unwrap();
    ///     Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device.clone()), vec![r])
    /// };
    /// let c = Comparison::build(&run(1.2), &run(1.0));
    /// assert!(c.rows[0].slower_beyond(10.0) && !c.rows[0].slower_beyond(25.0));
    /// assert!(!Comparison::build(&run(1.0), &run(1.0)).rows[0].slower_beyond(0.0));
    /// ```
    pub fn slower_beyond(&self, pct: f64) -> bool {
        let factor = 1.0 + pct / 100.0;
        let (Some(current), Some(other)) = (self.current.stats(), self.other.stats()) else {
            return false;
        };
        match self.interval {
            Some(interval) => interval.low > factor,
            None => current.p10_ms > other.p90_ms * factor,
        }
    }

    /// Why there is no call, `None` when there is one.
    pub fn note(&self) -> Option<String> {
        let side = |name: &str, s: &Side| match s {
            Side::Absent => Some(format!("not in the {name} run")),
            Side::Skipped(reason) => Some(format!("not timed in the {name} run: {reason}")),
            Side::Timed(_) => None,
        };
        match (side("current", &self.current), side("other", &self.other)) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a),
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        }
    }
}

/// Two runs row by row: the current one against a reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The current run's metadata.
    pub current: RunMeta,
    /// The other run's metadata.
    pub other: RunMeta,
    /// The current run's rows in order, then rows only the other run has.
    pub rows: Vec<CompareRow>,
}

impl Comparison {
    /// Matches the two runs' rows by op, workload, dtype and impl, and bootstraps the interval of
    /// each timed pair's ratio from their raw samples ([`RatioInterval::bootstrap`] with
    /// [`BOOTSTRAP_RESAMPLES`], [`CONFIDENCE`] and [`BOOTSTRAP_SEED`]).
    pub fn build(current: &Run, other: &Run) -> Comparison {
        let others: HashMap<RecordKey, &Record> =
            other.records.iter().map(|r| (r.key(), r)).collect();
        let mut rows: Vec<CompareRow> = current
            .records
            .iter()
            .map(|r| {
                let key = r.key();
                let theirs = others.get(&key).copied();
                let interval = theirs
                    .filter(|o| r.stats().is_some() && o.stats().is_some())
                    .and_then(|o| {
                        RatioInterval::bootstrap(
                            &r.samples_ms,
                            &o.samples_ms,
                            BOOTSTRAP_RESAMPLES,
                            CONFIDENCE,
                            BOOTSTRAP_SEED,
                        )
                    });
                CompareRow {
                    key,
                    current: Side::of(Some(r)),
                    other: Side::of(theirs),
                    interval,
                }
            })
            .collect();
        let currents: HashMap<RecordKey, ()> =
            current.records.iter().map(|r| (r.key(), ())).collect();
        for r in other
            .records
            .iter()
            .filter(|r| !currents.contains_key(&r.key()))
        {
            rows.push(CompareRow {
                key: r.key(),
                current: Side::Absent,
                other: Side::of(Some(r)),
                interval: None,
            });
        }
        Comparison {
            current: current.meta.clone(),
            other: other.meta.clone(),
            rows,
        }
    }

    /// A warning when the runs were taken on different devices.
    pub fn device_note(&self) -> Option<String> {
        let (a, b) = (&self.current.device.name, &self.other.device.name);
        (a != b).then(|| {
            format!(
                "the runs were taken on different devices (`{a}` and `{b}`): the ratios \
                 compare hardware too"
            )
        })
    }

    /// Rows with a call of `call`.
    pub fn count(&self, call: Call) -> usize {
        self.rows.iter().filter(|r| r.call() == Some(call)).count()
    }

    /// The rows slower than the other run by more than `pct` percent with confidence
    /// ([`CompareRow::slower_beyond`]): what `--fail-on-regression PCT` fails on.
    pub fn regressions(&self, pct: f64) -> Vec<&CompareRow> {
        self.rows.iter().filter(|r| r.slower_beyond(pct)).collect()
    }

    /// The comparison as markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Comparison\n\nCurrent run `{}` ({}) against `{}` ({}): {} faster, {} slower, \
             {} same, {} without a call.\n",
            self.current.git_revision,
            self.current.date,
            self.other.git_revision,
            self.other.date,
            self.count(Call::Faster),
            self.count(Call::Slower),
            self.count(Call::Same),
            self.rows.iter().filter(|r| r.call().is_none()).count()
        );
        let _ = writeln!(
            out,
            "Calls come from the {:.0}% bootstrap interval of the ratio of medians ({} resamples of \
             the raw samples); a row without raw samples is called from the p10-p90 spreads.\n",
            CONFIDENCE * 100.0,
            BOOTSTRAP_RESAMPLES
        );
        if let Some(note) = self.device_note() {
            let _ = writeln!(out, "Note: {note}.\n");
        }
        let header = [
            "op",
            "workload",
            "dtype",
            "impl",
            "current ms",
            "other ms",
            "time ratio",
            "95% interval",
            "call",
            "note",
        ];
        markdown_row(&mut out, header.iter().map(|s| s.to_string()));
        markdown_row(&mut out, header.iter().map(|_| "---".to_owned()));
        for row in &self.rows {
            markdown_row(
                &mut out,
                [
                    row.key.op.clone(),
                    row.key.workload.clone(),
                    row.key.dtype.clone(),
                    row.key.implementation.clone(),
                    opt(row.current.stats().map(|s| s.median_ms), sig4),
                    opt(row.other.stats().map(|s| s.median_ms), sig4),
                    opt(row.time_ratio(), |r| format!("{r:.3}")),
                    opt(row.interval, |i| format!("{:.3}–{:.3}", i.low, i.high)),
                    row.call().map(Call::as_str).unwrap_or_default().to_owned(),
                    row.note().unwrap_or_default(),
                ]
                .into_iter(),
            );
        }
        out
    }

    /// The comparison as CSV: both sides' statistics, the bootstrap interval of the time ratio
    /// (`ratio_low`, `ratio_high`), the ratio, the call and the note.
    pub fn to_csv(&self) -> String {
        let header = [
            "op",
            "workload",
            "dtype",
            "impl",
            "current_median_ms",
            "current_p10_ms",
            "current_p90_ms",
            "other_median_ms",
            "other_p10_ms",
            "other_p90_ms",
            "ratio_low",
            "ratio_high",
            "time_ratio",
            "call",
            "note",
        ];
        let mut lines = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for row in &self.rows {
            let (c, o) = (row.current.stats(), row.other.stats());
            let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            lines.push(vec![
                row.key.op.clone(),
                row.key.workload.clone(),
                row.key.dtype.clone(),
                row.key.implementation.clone(),
                num(c.map(|s| s.median_ms)),
                num(c.map(|s| s.p10_ms)),
                num(c.map(|s| s.p90_ms)),
                num(o.map(|s| s.median_ms)),
                num(o.map(|s| s.p10_ms)),
                num(o.map(|s| s.p90_ms)),
                num(row.interval.map(|i| i.low)),
                num(row.interval.map(|i| i.high)),
                num(row.time_ratio()),
                row.call().map(Call::as_str).unwrap_or_default().to_owned(),
                row.note().unwrap_or_default(),
            ]);
        }
        csv_text(lines)
    }

    /// The comparison as JSON: both runs' metadata, the device note and a row per key.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(json_view::Comparison::of(self)).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::records::{DeviceInfo, RunMeta};

    fn h200() -> Profile {
        Profile::builtin("h200").unwrap()
    }

    fn device() -> DeviceInfo {
        DeviceInfo::new("NVIDIA H200")
            .with_compute_capability("9.0".parse().unwrap())
            .with_l2_bytes(62_914_560)
    }

    fn record(flops: u64, bytes: u64, median_ms: f64) -> Record {
        Record::new("op", "fam", "w", "float16", device())
            .with_roofline(Some(flops), Some(bytes))
            .with_roof("cuda_core.fp32")
            .with_timing(
                "cuda_events",
                TimingStats::new(10, median_ms, median_ms * 0.99, median_ms * 1.01),
            )
    }

    fn verdict(r: &Record) -> Option<Verdict> {
        match price(r, &h200()) {
            Outcome::Priced(p) => Some(p.verdict()),
            Outcome::Blank(_) => None,
        }
    }

    #[test]
    fn the_streamed_json_is_the_json_value_text() {
        let meta = RunMeta::new("abc", "2026-11-30T04:00:00Z", "0.1.0", device());
        let fast = Record {
            workload: "fast".into(),
            ..record(1_000, 2_000_000_000, 0.25)
        };
        let torch = Record {
            workload: "fast".into(),
            ..record(1_000, 2_000_000_000, 0.5).with_impl("torch")
        };
        let skipped = record(1_000, 1_000, 1.0).with_skip("over the budget");
        let run = Run::new(meta.clone(), vec![fast, torch, skipped]);
        let mut other = run.clone();
        other.records[0].median_ms = Some(0.3);
        other.records[0].p90_ms = Some(0.31);
        other.records.pop();
        let report = Report::build(&run, ProfileChoice::Fixed(&h200()));
        assert!(report.has_baselines() && report.has_fail());
        let comparison = Comparison::build(&run, &other);
        for with in [None, Some(&comparison)] {
            let mut streamed = Vec::new();
            report.write_json(&mut streamed, with).unwrap();
            let mut value = report.to_json();
            if let Some(c) = with {
                value["comparison"] = c.to_json();
            }
            assert_eq!(String::from_utf8(streamed).unwrap(), format!("{value:#}\n"));
        }
        // Every field of a row, and of its baseline, is there.
        let json = report.to_json();
        let row = json["rows"][0].as_object().unwrap();
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "baseline",
                "blank",
                "bound",
                "bytes",
                "compute_ms",
                "dtype",
                "efficiency",
                "family",
                "flops",
                "impl",
                "median_ms",
                "memory_ms",
                "op",
                "p10_ms",
                "p90_ms",
                "profile",
                "reason",
                "roof",
                "sol_ms",
                "verdict",
                "workload"
            ]
        );
        assert_eq!(json["rows"][0]["verdict"], "fail");
        assert_eq!(json["rows"][0]["baseline"]["impl"], "torch");
        assert_eq!(json["rows"][0]["baseline"]["candidates"], 1);
        assert_eq!(json["rows"][0]["baseline"]["time_ratio"], 0.5);
        assert_eq!(json["rows"][2]["blank"], "not_timed");
        assert_eq!(json["summary"]["verdicts"]["fail"], 1);
        assert_eq!(json["meta"]["git_revision"], "abc");
        let c = comparison.to_json();
        assert_eq!(c["rows"].as_array().unwrap().len(), 3);
        assert_eq!(c["rows"][0]["other_median_ms"], 0.3);
        assert_eq!(c["current"]["date"], "2026-11-30T04:00:00Z");
    }

    #[test]
    fn arithmetic_follows_the_definition() {
        // 1 GB at 4502.4 GB/s effective = 0.2221 ms; flops negligible.
        let r = record(1_000, 1_000_000_000, 0.25);
        let Outcome::Priced(p) = price(&r, &h200()) else {
            panic!()
        };
        assert!((p.memory_ms - 1e9 / 4502.4e9 * 1e3).abs() < 1e-12);
        assert_eq!(p.bound(), Bound::Memory);
        assert!((p.efficiency() - p.memory_ms / 0.25).abs() < 1e-12);
        assert_eq!(p.verdict(), Verdict::AtCeiling);
    }

    #[test]
    fn emulated_rows_are_blank_with_their_reason_whatever_the_profile() {
        let emu = DeviceInfo::new("cuda-emu (NVIDIA H200 emulated on the CPU)")
            .with_compute_capability("9.0".parse().unwrap())
            .with_l2_bytes(62_914_560);
        let ran = Record::new("op", "fam", "ran", "float16", emu.clone())
            .with_roofline(Some(1_000), Some(1_000_000))
            .with_roof("cuda_core.fp32")
            .with_emulated_run();
        let over = Record::new("op", "fam", "big", "float16", emu.clone())
            .with_roofline(Some(1_000), Some(1_000_000_000))
            .with_roof("cuda_core.fp32")
            .with_skip("emulated device: over the budget");
        // Even a record on a device the profile describes: an emulated row is never priced.
        let mut on_h200 = ran.clone();
        on_h200.device = device();
        on_h200.workload = "named-h200".into();
        assert_eq!(
            price(&on_h200, &h200()),
            Outcome::Blank(BlankReason::Emulated)
        );
        let run = Run::new(RunMeta::new("a", "d", "v", emu), vec![ran, over, on_h200]);
        let builtins = Profile::builtins().unwrap();
        let fixed = h200();
        for choice in [
            ProfileChoice::Fixed(&fixed),
            ProfileChoice::ByDevice(&builtins),
        ] {
            let report = Report::build(&run, choice);
            let reasons: Vec<String> = report.rows.iter().map(|r| r.reason().unwrap()).collect();
            assert_eq!(reasons[0], "emulated device: no timing");
            assert_eq!(reasons[1], "not timed: emulated device: over the budget");
            assert_eq!(reasons[2], "emulated device: no timing");
            assert_eq!(report.rows[0].blank(), Some(&BlankReason::Emulated));
            assert_eq!(report.summary.blank.get("emulated"), Some(&2));
            assert_eq!(report.summary.blank.get("not_timed"), Some(&1));
            assert!(report.rows.iter().all(|r| r.stats.is_none()));
            assert!(!report.has_fail());
            let md = report.to_markdown();
            assert!(md.contains("| blank: emulated | 2 |"), "{md}");
            let csv = report.to_csv();
            assert!(
                csv.contains(",emulated,emulated device: no timing"),
                "{csv}"
            );
            let json = report.to_json();
            assert_eq!(json["rows"][0]["blank"], "emulated");
            assert_eq!(json["rows"][0]["reason"], "emulated device: no timing");
            assert_eq!(json["rows"][0]["median_ms"], Value::Null);
        }
        // Compared with another run, an emulated side says why it has no time.
        let cmp = Comparison::build(&run, &run);
        assert_eq!(
            cmp.rows[0].current,
            Side::Skipped("emulated device: no timing".into())
        );
    }

    #[test]
    fn tie_is_compute_bound() {
        let p = Priced {
            memory_ms: 1.0,
            compute_ms: 1.0,
            median_ms: 2.0,
            impossible: None,
        };
        assert_eq!(p.bound(), Bound::Compute);
    }

    #[test]
    fn thresholds_are_exact() {
        let p = |sol: f64, median: f64| Priced {
            memory_ms: sol,
            compute_ms: 0.0,
            median_ms: median,
            impossible: None,
        };
        assert_eq!(p(0.8, 1.0).verdict(), Verdict::AtCeiling);
        assert_eq!(p(0.7999, 1.0).verdict(), Verdict::Below);
        assert_eq!(p(1.05, 1.0).verdict(), Verdict::AtCeiling);
        assert_eq!(p(1.0501, 1.0).verdict(), Verdict::Anomaly);
        assert_eq!(p(0.0029, 0.0199).verdict(), Verdict::LatencyBound);
        assert_eq!(p(0.003, 0.0199).verdict(), Verdict::Below);
        assert_eq!(p(0.0029, 0.020).verdict(), Verdict::Below);
        // Anomaly is checked before latency.
        assert_eq!(p(0.0029, 0.0025).verdict(), Verdict::Anomaly);
    }

    #[test]
    fn physics_check_uses_the_theoretical_peaks() {
        // 4.9 TB/s: above 4.8 theoretical.
        assert_eq!(verdict(&record(0, 4_900_000_000, 1.0)), Some(Verdict::Fail));
        // 4.7 TB/s: below theoretical, above the 4.5024 effective by 4.4%: at ceiling, not a fail.
        assert_eq!(
            verdict(&record(0, 4_700_000_000, 1.0)),
            Some(Verdict::AtCeiling)
        );
        // 70 TFLOP/s on cuda_core.fp32 (67 theoretical).
        assert_eq!(
            verdict(&record(70_000_000_000, 1, 1.0)),
            Some(Verdict::Fail)
        );
    }

    #[test]
    fn geomean_counts_judgeable_rows_only() {
        let rows: Vec<Row> = [(0.9, "a"), (0.4, "a"), (2.0, "a"), (0.5, "b")]
            .iter()
            .map(|&(eff, fam)| Row {
                key: record(0, 1, 1.0).key(),
                family: fam.to_owned(),
                roof: None,
                profile: None,
                flops: None,
                bytes: None,
                stats: None,
                baseline: None,
                outcome: Outcome::Priced(Priced {
                    memory_ms: eff,
                    compute_ms: 0.0,
                    median_ms: 1.0,
                    impossible: None,
                }),
            })
            .collect();
        let s = Summary::of(&rows);
        assert_eq!(s.families[0].counted, 2);
        assert!((s.families[0].geomean_efficiency.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(s.count(Verdict::Anomaly), 1);
        assert_eq!(s.families[1].family, "b");
    }

    #[test]
    fn compare_calls_from_spreads() {
        let meta = RunMeta::new("a", "d", "v", device());
        let timed = |m: f64, p10: f64, p90: f64| {
            Record::new("op", "f", "w", "float16", device())
                .with_timing("e", TimingStats::new(5, m, p10, p90))
        };
        let cur = Run::new(
            meta.clone(),
            vec![
                timed(1.0, 0.9, 1.1),
                timed(1.0, 0.9, 1.1).with_impl("x"),
                timed(1.0, 0.95, 1.3).with_impl("y"),
                timed(1.0, 0.9, 1.1).with_impl("only-current"),
            ],
        );
        let other = Run::new(
            meta,
            vec![
                timed(2.0, 1.2, 2.2),
                timed(0.5, 0.4, 0.85).with_impl("x"),
                timed(1.2, 1.1, 1.4).with_impl("y"),
                timed(1.0, 0.9, 1.1).with_impl("only-other"),
            ],
        );
        let c = Comparison::build(&cur, &other);
        let calls: Vec<Option<Call>> = c.rows.iter().map(CompareRow::call).collect();
        assert_eq!(
            calls,
            [
                Some(Call::Faster),
                Some(Call::Slower),
                Some(Call::Same),
                None,
                None
            ]
        );
        assert_eq!(c.rows[0].time_ratio(), Some(0.5));
        assert_eq!(c.rows[3].note().as_deref(), Some("not in the other run"));
        assert_eq!(c.rows[4].note().as_deref(), Some("not in the current run"));
        assert!(c.device_note().is_none());
    }

    #[test]
    fn tileops_rows_get_their_fastest_baseline_on_the_same_device() {
        let timed = |imp: &str, m: f64, p10: f64, p90: f64| {
            record(0, 1_000_000, m)
                .with_impl(imp)
                .with_timing("cuda_events", TimingStats::new(50, m, p10, p90))
        };
        let meta = RunMeta::new("a", "d", "v", device());
        let run = Run::new(
            meta.clone(),
            vec![
                timed(TILEOPS_IMPL, 0.10, 0.09, 0.11),
                timed("torch", 0.30, 0.29, 0.31),
                Record::new("other", "fam", "w", "float16", device()).with_skip("no"),
            ],
        );
        let mut faster_elsewhere = timed("torch-compile", 0.01, 0.01, 0.01);
        faster_elsewhere.device = DeviceInfo::new("NVIDIA H100 80GB HBM3");
        let compiled = Run::new(
            meta,
            vec![
                timed("torch-compile", 0.12, 0.10, 0.13),
                faster_elsewhere,
                // A tileops row in a baseline file is not a baseline.
                timed(TILEOPS_IMPL, 0.001, 0.001, 0.001),
            ],
        );

        let alone = Report::build(&run, ProfileChoice::Fixed(&h200()));
        let b = alone.rows[0].baseline.as_ref().unwrap();
        assert_eq!((b.implementation.as_str(), b.candidates), ("torch", 1));
        assert!(alone.rows[1].baseline.is_none(), "a baseline row has none");
        assert!((alone.rows[0].baseline_ratio().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(alone.rows[0].baseline_call(), Some(Call::Faster));

        let both = Report::build_with_baselines(
            &run,
            ProfileChoice::Fixed(&h200()),
            std::slice::from_ref(&compiled),
        );
        assert_eq!(both.rows.len(), 3, "baseline files add no rows");
        let b = both.rows[0].baseline.as_ref().unwrap();
        assert_eq!(
            (b.implementation.as_str(), b.candidates),
            ("torch-compile", 2)
        );
        assert_eq!(both.rows[0].baseline_call(), Some(Call::Same));
        assert!(both.rows[2].baseline_ratio().is_none());
        let summary = both.baseline_summary().unwrap();
        assert!(summary.starts_with("1 tileops rows"), "{summary}");
        assert!(
            summary.contains("0 faster, 0 slower, 1 within the noise"),
            "{summary}"
        );

        let md = both.to_markdown();
        assert!(
            md.contains("| verdict | baseline | baseline ms | vs baseline | reason |"),
            "{md}"
        );
        assert!(
            md.contains("| torch-compile | 0.1200 | 0.833 (same) |"),
            "{md}"
        );
        let csv = both.to_csv();
        assert!(csv.lines().next().unwrap().ends_with(
            ",reason,baseline_impl,baseline_median_ms,baseline_time_ratio,baseline_call"
        ));
        let json = both.to_json();
        assert_eq!(json["rows"][0]["baseline"]["impl"], "torch-compile");
        assert_eq!(json["rows"][1]["baseline"], Value::Null);

        // Without baselines the tables keep their usual columns.
        let none = Report::build(
            &Run::new(run.meta.clone(), run.records[..1].to_vec()),
            ProfileChoice::Fixed(&h200()),
        );
        assert!(!none.has_baselines() && none.baseline_summary().is_none());
        assert!(!none.to_markdown().contains("baseline"));
        assert!(
            none.to_csv()
                .lines()
                .next()
                .unwrap()
                .ends_with(",blank,reason")
        );
    }

    #[test]
    fn csv_quotes_cells() {
        let text = csv_text([
            vec![
                "a,b".to_owned(),
                "say \"hi\"".to_owned(),
                "plain".to_owned(),
            ],
            vec!["two\nlines".to_owned(), String::new(), "x".to_owned()],
        ]);
        assert_eq!(
            text,
            "\"a,b\",\"say \"\"hi\"\"\",plain\n\"two\nlines\",,x\n"
        );
    }

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig4(0.017234), "0.01723");
        assert_eq!(sig4(12.3456), "12.35");
        assert_eq!(sig4(0.000123456), "0.0001235");
        assert_eq!(sig4(1234.5), "1234");
    }
}
