//! Two runs row by row: each pair's time ratio, its bootstrap confidence interval from the raw
//! samples, and the call (faster, slower, the same) that `--compare` and `--fail-on-regression`
//! act on.

use std::collections::HashMap;

use super::price::{BlankReason, timing, untimed};
use crate::records::{Record, RecordKey, Run, RunMeta, TimingStats, percentile};

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
    /// use tileops_bench::report::RatioInterval;
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
            low: percentile(&ratios, tail)?,
            high: percentile(&ratios, 1.0 - tail)?,
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
    /// The side of a run that has `record` for the row (`None`: it has none).
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

    /// The timing of a timed side; `None` for an absent or skipped one.
    pub fn stats(&self) -> Option<TimingStats> {
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
    /// use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta};
    /// use tileops_bench::report::Comparison;
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
        Comparison::build_with_progress(current, other, &mut |_, _| {})
    }

    /// [`Comparison::build`], calling `progress(done, total)` after each of the current run's
    /// rows (the bootstrap of a large run takes a while: a tool shows how far it is).
    pub fn build_with_progress(
        current: &Run,
        other: &Run,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Comparison {
        let others: HashMap<RecordKey, &Record> =
            other.records.iter().map(|r| (r.key(), r)).collect();
        let total = current.records.len();
        let mut rows: Vec<CompareRow> = current
            .records
            .iter()
            .enumerate()
            .map(|(done, r)| {
                progress(done + 1, total);
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
}
