//! The verdict of one record: its two roofline terms against a profile's ceilings, the bound, the
//! efficiency and the verdict by the first rule that holds (the table in the [parent
//! module](super)), or the reason it is blank.

use std::fmt;

use crate::profile::{AmbiguousDevice, DeviceMismatch, Profile};
use crate::records::{Record, TimingStats};

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
    /// The row ran on an emulated device (timing [`EMULATED_TIMING`](crate::records::EMULATED_TIMING)): no timing to price.
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
pub(super) fn timing(record: &Record) -> Option<TimingStats> {
    if record.is_emulated() {
        return None;
    }
    record.stats()
}

/// Why a row without a [`timing`] is blank.
pub(super) fn untimed(record: &Record) -> BlankReason {
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
pub(super) fn unpriceable(
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
