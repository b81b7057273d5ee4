//! The roofline verdicts: each record priced against a profile, and the report of a run.
//!
//! One concern a file: [`price`](mod@price) judges one record (the verdict rules below),
//! [`compare`](mod@compare) sets two runs side by side with bootstrap intervals, and `render` writes
//! a [`Report`] or a [`Comparison`] as markdown, CSV or JSON, the chart ([`crate::svg`])
//! and the page ([`crate::html`]). This file builds the [`Report`]:
//! a [`Row`] per record, each tileops row's strongest [`Baseline`], and the [`Summary`].
//!
//! Per record:
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
//! use tileops_bench::profile::Profile;
//! use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops_bench::report::{ProfileChoice, Report, Verdict};
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
//! # Ok::<(), tileops_bench::profile::ProfileError>(())
//! ```

pub mod compare;
pub mod pipes;
pub mod predict;
pub mod price;
pub(super) mod render;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

pub use compare::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE, Call, CompareRow, Comparison,
    MIN_BOOTSTRAP_SAMPLES, RatioInterval, Side,
};
pub use pipes::{Pipe, PipeBlank, PipeTimes};
pub use price::{
    ANOMALY_ABOVE, AT_CEILING_FROM, BlankReason, Bound, Impossible, LATENCY_MEDIAN_MS,
    LATENCY_SOL_MS, Outcome, Priced, Verdict, price,
};
pub(crate) use render::sig4;

use super::profile::Profile;
use super::records::{Record, RecordKey, Run, RunMeta, TILEOPS_IMPL, TimingStats};
use crate::text::group_by_reason;
use price::{timing, unpriceable};

/// One report row: the record's identity and numbers, and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// op/workload/dtype/impl.
    pub key: RecordKey,
    /// The op's family.
    pub family: String,
    /// The roof key the row is priced against: the record's, or on a host profile the CPU roof
    /// (the CPU backend runs every op's f64 reference, whatever unit the record declares).
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
    /// The kernel ledger priced against the row's profile ([`pipes`]): the issue and SFU times, the
    /// limiter and the ceiling, from the ledger, not measured; `None` when the record has no
    /// ledger (none of its own, none joined with [`Report::build_with_ledgers`]).
    pub pipes: Option<Result<PipeTimes, PipeBlank>>,
    /// The kernel entry points of the ledger's launches, in order.
    pub entries: Vec<String>,
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

/// Rows the harness did not time for one reason (`Report::skipped_groups`).
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedGroup<'r> {
    /// The reason's first clause, numbers that differ between the rows written `N`.
    pub reason: String,
    /// The rows, in the report's order.
    pub rows: Vec<&'r Row>,
}

impl Row {
    /// Whether the harness did not time the row (over a budget, no GPU, a failed run): such rows
    /// are collapsed by reason in the reports, after the timed ones.
    pub fn is_skipped(&self) -> bool {
        matches!(self.outcome, Outcome::Blank(BlankReason::NotTimed { .. }))
    }

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
    /// The skipped rows ([`Row::is_skipped`]) grouped by reason, in order of first appearance, as
    /// the console groups them: reasons that differ only in their numbers (`9000 B per call`,
    /// `12000 B per call`) are one group, shown by their first clause (the rest, what to do about
    /// it, is the same for the group and in the records).
    pub fn skipped_groups(&self) -> Vec<SkippedGroup<'_>> {
        let skipped = self.rows.iter().filter_map(|row| match &row.outcome {
            Outcome::Blank(BlankReason::NotTimed { reason }) => Some((reason.as_str(), row)),
            _ => None,
        });
        group_by_reason(skipped)
            .into_iter()
            .map(|(reason, rows)| SkippedGroup { reason, rows })
            .collect()
    }

    /// A sentence for a run on the CPU backend, which times each op's f64 reference (what the
    /// GPU kernels are checked against), not a kernel; `None` for other runs.
    pub fn host_note(&self) -> Option<&'static str> {
        self.meta.device.name.starts_with("cpu").then_some(
            "This run is on the CPU backend: each row times the op's f64 reference (what the \
             GPU kernels are tested against), not a kernel; a host profile (`calibrate --cpu`) \
             prices it against this host's memory and f64 roofs.",
        )
    }

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
        Report::build_with_ledgers(run, choice, baselines, &[])
    }

    /// As [`Report::build_with_baselines`], and each row without a kernel ledger of its own takes
    /// the ledger of the same op/workload/dtype from `ledgers` (a run benched on the emulated
    /// device), so that a GPU-timed row shows its measured efficiency beside the ledger's
    /// ceiling. A row's ledger is priced against the row's profile, or, for a row from the
    /// emulated device, the profile of the GPU it models ([`pipes::emulated_model`]).
    pub fn build_with_ledgers(
        run: &Run,
        choice: ProfileChoice<'_>,
        baselines: &[Run],
        ledgers: &[Run],
    ) -> Report {
        let ledger_records: Vec<Record> = ledgers
            .iter()
            .flat_map(|r| r.records.iter().filter(|r| r.ledger.is_some()).cloned())
            .collect();
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
                    // The roof the row was priced against: on a host profile the CPU roof every
                    // op's f64 reference runs on, not the GPU unit the record declares.
                    roof: match (profile, &record.roof) {
                        (Some(p), Some(declared)) => Some(
                            p.pricing_roof(declared)
                                .map_or_else(|| declared.clone(), |(key, _)| key.to_owned()),
                        ),
                        (_, declared) => declared.clone(),
                    },
                    profile: profile.map(|p| p.name.clone()),
                    flops: record.flops,
                    bytes: record.bytes,
                    stats: timing(record),
                    pipes: pipes::ledger_of(record, &ledger_records).map(|ledger| {
                        match profile.or_else(|| ledger_profile(record, choice)) {
                            Some(p) => pipes::price_ledger(record, ledger, p),
                            None => Err(PipeBlank::Unpriced {
                                reason: format!(
                                    "no profile describes `{}` to price its ledger against; \
                                     pass --profile",
                                    record.device.name
                                ),
                            }),
                        }
                    }),
                    entries: pipes::ledger_of(record, &ledger_records)
                        .map(|l| l.launches.iter().map(|l| l.entry.clone()).collect())
                        .unwrap_or_default(),
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
    /// use tileops_bench::records::{DeviceInfo, Partial, Run, RunMeta};
    /// use tileops_bench::report::{ProfileChoice, Report};
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
/// The profile a row's ledger is priced against when the row itself has none: for a row from the
/// emulated device, the candidate (or the fixed profile) describing the GPU the emulator models.
fn ledger_profile<'a>(record: &Record, choice: ProfileChoice<'a>) -> Option<&'a Profile> {
    match choice {
        ProfileChoice::Fixed(p) => Some(p),
        ProfileChoice::ByDevice(candidates) => {
            let model = pipes::emulated_model(&record.device.name)?;
            Profile::select(model, candidates).ok().flatten()
        }
    }
}

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
