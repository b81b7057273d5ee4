//! The time model: a row's predicted time from its pipe times and a profile's fitted constants.
//!
//! The pipes of one launch ([`LaunchTimes`], from the kernel ledger: [`super::pipes`]) are the
//! busiest SM's times in each resource: HBM bytes at the bandwidth of the call's mix of reads and
//! writes, instruction issue, the SFU, shared memory, and the tensor cores at the roof of the
//! instruction the kernel issues. A thread slot runs `stages` = waves × dependent rounds of
//! global loads one after the other. The model ([`predict`]):
//!
//! - **throughput**: within a stage the SM's own pipes overlap each other (compute = the largest
//!   of issue, SFU, shared memory and tensor), and memory overlaps compute as a pipeline of
//!   `stages` stages: `max(memory, compute) + min(memory, compute) / stages`, the smaller pipe
//!   exposed for one stage (the pipeline's fill and drain). A launch whose SMs hold one CTA of
//!   warps that wait for each other at barriers has nothing to overlap with: its stages add.
//!   The SM's pipes compete for its warps' issue slots: they combine as `(Σ tᵢᵖ)^(1/p)`, `p`
//!   the model's `pipe_norm` (their maximum as `p` grows).
//! - **issue with few warps**: one warp issues an instruction every `chain_cycles` on its own
//!   (it waits for the one before), so a scheduler holding `W` resident warps issues at
//!   `min(1, W / chain_cycles)` of its peak: the issue pipe is divided by that.
//! - **latency**: every round of loads waits `latency` (HBM under load), one after another:
//!   `stages × latency`. The rounds are HBM's bytes at Little's law: bytes in flight per SM
//!   (resident threads × the bytes a round keeps outstanding) against the bandwidth–latency
//!   product.
//! - **launch**: `max(latency, latency + throughput)` for one stage of latency exposed
//!   (`latency × stages / overlap` where stages do not overlap);
//! - **call**: `fixed + (launches − 1) × launch + Σ launches`.
//!
//! Five constants ([`TimeModel`]): `fixed`, `launch`, `latency`, `chain_cycles` and `pipe_norm`,
//! global,
//! fitted ([`fit`]) on half of a measured run's rows and reported on the other half. Every figure
//! here is a **prediction**, not a measurement.
//!
//! ```
//! use tileops_bench::profile::TimeModel;
//! use tileops_bench::report::predict::{LaunchTimes, Term, predict};
//!
//! let model = TimeModel {
//!     fixed_us: 4.0, launch_us: 4.0, latency_us: 0.4, chain_cycles: 4.0, pipe_norm: 64.0,
//!     fitted_on: "example".into(),
//! };
//! // 100 µs of HBM traffic, 30 µs of issue, over 20 stages per thread slot.
//! let launch = LaunchTimes {
//!     memory_s: 100e-6, issue_s: 30e-6, stages: 20.0, warps_per_scheduler: 8.0, ..LaunchTimes::default()
//! };
//! let p = predict(&[launch], &model);
//! // 4 µs fixed + 0.4 µs of latency + 100 µs + 30 / 20 µs.
//! assert!((p.time_s - 105.9e-6).abs() < 1e-9);
//! assert_eq!(p.limiter, Term::Memory);
//! ```

use std::fmt;

use crate::profile::TimeModel;

/// One launch's pipes, seconds on its busiest SM, and its shape in stages.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LaunchTimes {
    /// HBM bytes at the call's mix bandwidth.
    pub memory_s: f64,
    /// Instruction issue.
    pub issue_s: f64,
    /// MUFU (SFU) operations.
    pub sfu_s: f64,
    /// Shared-memory bytes (bank conflicts included where counted).
    pub shared_s: f64,
    /// Tensor-core instructions at their own roof (`mma.sync` or `wgmma`).
    pub tensor_s: f64,
    /// Waves × dependent rounds of global loads: the stages one thread slot runs in turn (at
    /// least 1).
    pub stages: f64,
    /// The waves alone (at least 1).
    pub waves: f64,
    /// One CTA per SM whose warps meet at barriers: its stages cannot overlap.
    pub single_slot: bool,
    /// Warps resident per scheduler on the busiest SM (resident warps ÷ the SM's issue rate in
    /// warp instructions per clock): what hides one warp's dependent instructions.
    pub warps_per_scheduler: f64,
}

/// What a predicted time is made of, and the term that dominates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    /// The fixed cost of the call and its further launches.
    Launch,
    /// HBM bandwidth.
    Memory,
    /// Instruction issue.
    Issue,
    /// The SFU.
    Sfu,
    /// Shared-memory bandwidth.
    Shared,
    /// The tensor cores.
    Tensor,
    /// HBM latency and the dependent chain of a lone warp.
    Latency,
    /// A library's kernel (cuBLAS), priced at the calibrated roof.
    Compute,
}

impl Term {
    /// `"launch"`, `"memory"`, `"issue"`, `"sfu"`, `"shared"`, `"tensor"`, `"latency"`,
    /// `"compute"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Term::Launch => "launch",
            Term::Memory => "memory",
            Term::Issue => "issue",
            Term::Sfu => "sfu",
            Term::Shared => "shared",
            Term::Tensor => "tensor",
            Term::Latency => "latency",
            Term::Compute => "compute",
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A predicted time (a prediction of the model, never a measurement).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// The call's predicted time, seconds.
    pub time_s: f64,
    /// The largest of its terms.
    pub limiter: Term,
}

/// One launch's time (see the module docs).
fn launch_time(l: &LaunchTimes, model: &TimeModel) -> f64 {
    let stages = l.stages.max(1.0);
    let overlap = if l.single_slot { 1.0 } else { stages };
    let compute = sm_pipes(l, model);
    let throughput = l.memory_s.max(compute) + l.memory_s.min(compute) / overlap;
    latency_time(l, model).max(model.latency_s() * stages / overlap + throughput)
}

/// The SM's own pipes of one launch combined: issue (with its exposed latency), SFU, shared
/// memory and the tensor cores compete for the same warps' issue slots and overlap imperfectly,
/// `(Σ tᵢᵖ)^(1/p)` with `p` the model's `pipe_norm`.
fn sm_pipes(l: &LaunchTimes, model: &TimeModel) -> f64 {
    let p = model.pipe_norm;
    let times = [issue_time(l, model), l.sfu_s, l.shared_s, l.tensor_s];
    let max = times.iter().copied().fold(0.0, f64::max);
    if max <= 0.0 {
        return 0.0;
    }
    // Scaled by the largest, so that the powers cannot overflow or vanish.
    max * times
        .iter()
        .map(|t| (t / max).powf(p))
        .sum::<f64>()
        .powf(1.0 / p)
}

/// The issue pipe with the latency its warps leave exposed: one warp issues an instruction every
/// `chain_cycles` on its own (it waits for the one before), so a scheduler holding `W` warps
/// issues at `min(1, W / chain_cycles)` of its peak.
fn issue_time(l: &LaunchTimes, model: &TimeModel) -> f64 {
    let hidden = (l.warps_per_scheduler / model.chain_cycles).min(1.0);
    if hidden > 0.0 {
        l.issue_s / hidden
    } else {
        l.issue_s
    }
}

/// One launch's latency term: its stages' rounds of loads, one after another.
fn latency_time(l: &LaunchTimes, model: &TimeModel) -> f64 {
    l.stages.max(1.0) * model.latency_s()
}

/// The predicted time of a call of `launches` (in order) on a device at `clock_hz`.
///
/// # Panics
/// Never; a call without launches costs the fixed cost alone.
pub fn predict(launches: &[LaunchTimes], model: &TimeModel) -> Prediction {
    let further = launches.len().saturating_sub(1) as f64;
    let fixed = model.fixed_s() + further * model.launch_s();
    let time_s = fixed + launches.iter().map(|l| launch_time(l, model)).sum::<f64>();
    let sum = |f: fn(&LaunchTimes) -> f64| launches.iter().map(f).sum::<f64>();
    let terms = [
        (Term::Launch, fixed),
        (Term::Memory, sum(|l| l.memory_s)),
        (
            Term::Issue,
            launches.iter().map(|l| issue_time(l, model)).sum(),
        ),
        (Term::Sfu, sum(|l| l.sfu_s)),
        (Term::Shared, sum(|l| l.shared_s)),
        (Term::Tensor, sum(|l| l.tensor_s)),
        (
            Term::Latency,
            launches.iter().map(|l| latency_time(l, model)).sum(),
        ),
    ];
    Prediction {
        time_s,
        limiter: dominant(&terms),
    }
}

/// The predicted time of a library call the ledger has no SASS for (cuBLAS's GEMM): one
/// launch whose kernel pipelines its memory and compute perfectly, at the bandwidth and the
/// calibrated roof: `fixed + latency + max(memory, compute)`.
pub fn predict_library_call(memory_s: f64, compute_s: f64, model: &TimeModel) -> Prediction {
    Prediction {
        time_s: model.fixed_s() + model.latency_s() + memory_s.max(compute_s),
        limiter: dominant(&[
            (Term::Launch, model.fixed_s()),
            (Term::Memory, memory_s),
            (Term::Compute, compute_s),
        ]),
    }
}

fn dominant(terms: &[(Term, f64)]) -> Term {
    terms
        .iter()
        .fold((Term::Launch, f64::NEG_INFINITY), |best, &(t, v)| {
            if v > best.1 { (t, v) } else { best }
        })
        .0
}

/// A measured call and what the model needs to predict it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `op/workload/dtype`.
    pub key: String,
    /// Its launches' pipes, or the library call's `(memory, compute)` seconds.
    pub pipes: SamplePipes,
    /// The measured median, seconds.
    pub measured_s: f64,
}

/// A sample's pipes.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplePipes {
    /// Launches of tileops kernels, priced from the SASS ledger.
    Kernels(Vec<LaunchTimes>),
    /// A library call: memory and compute seconds.
    Library {
        /// HBM bytes at the read bandwidth.
        memory_s: f64,
        /// The FLOPs at the calibrated roof.
        compute_s: f64,
    },
}

impl SamplePipes {
    /// The model's prediction of a call with these pipes.
    pub fn predict(&self, model: &TimeModel) -> Prediction {
        match self {
            SamplePipes::Kernels(launches) => predict(launches, model),
            SamplePipes::Library {
                memory_s,
                compute_s,
            } => predict_library_call(*memory_s, *compute_s, model),
        }
    }
}

impl Sample {
    /// The model's prediction of this sample.
    pub fn predict(&self, model: &TimeModel) -> Prediction {
        self.pipes.predict(model)
    }
}

/// How well a model predicts a set of samples: over `|predicted / measured − 1|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitFigures {
    /// Samples.
    pub rows: usize,
    /// The median error.
    pub median: f64,
    /// The mean error.
    pub mean: f64,
    /// Samples within 25%.
    pub within_25: usize,
    /// The mean error, each capped at 50%.
    pub capped_mean: f64,
    /// The share of samples outside 25%.
    pub outside: f64,
}

impl FitFigures {
    /// The figures of `model` on `samples`.
    pub fn of(samples: &[&Sample], model: &TimeModel) -> FitFigures {
        let mut errors: Vec<f64> = samples
            .iter()
            .map(|s| (s.predict(model).time_s / s.measured_s - 1.0).abs())
            .collect();
        let n = errors.len();
        let median = match n {
            0 => f64::NAN,
            _ => {
                let (below, mid, _) = errors.select_nth_unstable_by(n / 2, f64::total_cmp);
                let mid = *mid;
                if n % 2 == 1 {
                    mid
                } else {
                    // The largest of the lower half, beside the upper half's smallest.
                    let low = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    (low + mid) / 2.0
                }
            }
        };
        FitFigures {
            rows: n,
            median,
            mean: errors.iter().sum::<f64>() / n.max(1) as f64,
            within_25: errors.iter().filter(|e| **e <= 0.25).count(),
            capped_mean: errors.iter().map(|e| e.min(0.5)).sum::<f64>() / n.max(1) as f64,
            outside: errors.iter().filter(|e| **e > 0.25).count() as f64 / n.max(1) as f64,
        }
    }

    /// What [`fit`] minimises, the backtest's bar in one figure: the median error, plus half
    /// the mean error with each capped at 50% (so that a row the model cannot see, a library's
    /// kernel choice, does not pull the constants), plus a fifth of the share of rows outside
    /// 25%.
    pub fn objective(&self) -> f64 {
        self.median + 0.5 * self.capped_mean + 0.2 * self.outside
    }
}

/// The half of a run the constants are fitted on: the samples at even positions in key order
/// (`op/workload/dtype`, byte-wise); the other half is held out.
pub fn fit_half(samples: &[Sample]) -> (Vec<&Sample>, Vec<&Sample>) {
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let (mut fit, mut held) = (Vec::new(), Vec::new());
    for (i, s) in sorted.into_iter().enumerate() {
        if i % 2 == 0 {
            fit.push(s);
        } else {
            held.push(s);
        }
    }
    (fit, held)
}

/// The constants' search ranges and the grid's first steps: (low, high, step) for the fixed
/// cost (µs), a further launch (µs), the latency (µs), the chain's cycles and the pipes' norm.
const SEARCH: [(f64, f64, f64); 5] = [
    (1.0, 8.0, 1.0),
    (0.0, 8.0, 1.0),
    (0.05, 1.45, 0.2),
    (0.5, 12.5, 1.0),
    (1.0, 16.0, 1.0),
];

fn model_of(x: [f64; 5], fitted_on: &str) -> TimeModel {
    TimeModel {
        fixed_us: x[0],
        launch_us: x[1],
        latency_us: x[2],
        chain_cycles: x[3],
        pipe_norm: x[4],
        fitted_on: fitted_on.to_owned(),
    }
}

/// Fits the five constants on `samples` (deterministic: a grid over each constant's range, then a
/// coordinate search halving the steps to 1/128 of them), minimising
/// [`FitFigures::objective`]. Returns the model, its constants rounded to the final step.
pub fn fit(samples: &[&Sample], fitted_on: &str) -> TimeModel {
    let score = |x: [f64; 5]| FitFigures::of(samples, &model_of(x, "")).objective();
    let axis = |(lo, hi, step): (f64, f64, f64)| -> Vec<f64> {
        let n = ((hi - lo) / step).round() as usize;
        (0..=n).map(|i| lo + step * i as f64).collect()
    };
    // The grid, its first axis split over the machine's threads; each thread's best, then
    // theirs in axis order (a tie keeps the earlier point: the result is the same on any machine).
    let firsts = axis(SEARCH[0]);
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, firsts.len());
    let bests: Vec<([f64; 5], f64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = firsts
            .chunks(firsts.len().div_ceil(workers))
            .map(|chunk| {
                let score = &score;
                let axis = &axis;
                scope.spawn(move || {
                    let mut best = ([0.0; 5], f64::INFINITY);
                    for &a in chunk {
                        for &b in &axis(SEARCH[1]) {
                            for &c in &axis(SEARCH[2]) {
                                for &d in &axis(SEARCH[3]) {
                                    for &e in &axis(SEARCH[4]) {
                                        let x = [a, b, c, d, e];
                                        let s = score(x);
                                        if s < best.1 {
                                            best = (x, s);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    best
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(([0.0; 5], f64::INFINITY)))
            .collect()
    });
    let mut best = ([0.0; 5], f64::INFINITY);
    for b in bests {
        if b.1 < best.1 {
            best = b;
        }
    }
    let mut steps: [f64; 5] = SEARCH.map(|(_, _, step)| step);
    for _ in 0..7 {
        steps = steps.map(|s| s / 2.0);
        loop {
            let mut improved = false;
            for k in 0..5 {
                for sign in [-1.0, 1.0] {
                    let mut x = best.0;
                    x[k] = (x[k] + sign * steps[k]).clamp(SEARCH[k].0, SEARCH[k].1);
                    let s = score(x);
                    if s < best.1 - 1e-12 {
                        best = (x, s);
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
    model_of(best.0, fitted_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> TimeModel {
        model_of([4.0, 3.0, 0.5, 4.0, 64.0], "test")
    }

    #[test]
    fn stages_overlap_memory_and_compute() {
        let m = model();
        // Four warps per scheduler hide the chain of 4 cycles: issue runs at its peak.
        let base = LaunchTimes {
            memory_s: 10e-6,
            issue_s: 6e-6,
            sfu_s: 2e-6,
            shared_s: 1e-6,
            stages: 4.0,
            waves: 1.0,
            warps_per_scheduler: 4.0,
            ..LaunchTimes::default()
        };
        // 4 + 0.5 + 10 + 6 / 4 µs.
        let p = predict(&[base], &m);
        assert!((p.time_s - 16.0e-6).abs() < 1e-12, "{p:?}");
        assert_eq!(p.limiter, Term::Memory);
        // One stage: memory and compute add.
        let one = LaunchTimes {
            stages: 1.0,
            ..base
        };
        assert!((predict(&[one], &m).time_s - 20.5e-6).abs() < 1e-12);
        // One CTA a SM waiting at barriers: the stages' latency and pipes add.
        let single = LaunchTimes {
            single_slot: true,
            ..base
        };
        assert!((predict(&[single], &m).time_s - (4.0 + 2.0 + 16.0) * 1e-6).abs() < 1e-12);
    }

    #[test]
    fn few_warps_leave_the_chain_exposed_and_rounds_wait_their_latency() {
        let m = model();
        // One warp per scheduler, a chain of 4 cycles: a quarter of the issue peak.
        let l = LaunchTimes {
            issue_s: 1.5e-6,
            stages: 1.0,
            waves: 1.0,
            warps_per_scheduler: 1.0,
            ..LaunchTimes::default()
        };
        let p = predict(&[l], &m);
        assert!((p.time_s - (4.0 + 0.5 + 6.0) * 1e-6).abs() < 1e-12, "{p:?}");
        assert_eq!(p.limiter, Term::Issue);
        // 10 rounds of loads with nothing else to do: latency-bound.
        let rounds = LaunchTimes {
            stages: 10.0,
            waves: 1.0,
            warps_per_scheduler: 8.0,
            memory_s: 0.1e-6,
            ..LaunchTimes::default()
        };
        let p = predict(&[rounds], &m);
        assert!(
            (p.time_s - (4.0 + 10.0 * 0.5) * 1e-6).abs() < 1e-12,
            "{p:?}"
        );
        assert_eq!(p.limiter, Term::Latency);
        // A further launch costs its own launch and time.
        let two = predict(&[rounds, rounds], &m);
        assert!((two.time_s - p.time_s - (3.0 + 5.0) * 1e-6).abs() < 1e-12);
    }

    #[test]
    fn the_compute_pipes_overlap_each_other_and_a_library_call_pipelines() {
        let m = model();
        let l = LaunchTimes {
            issue_s: 5e-6,
            sfu_s: 4e-6,
            tensor_s: 9e-6,
            shared_s: 7e-6,
            stages: 10.0,
            waves: 1.0,
            warps_per_scheduler: 8.0,
            ..LaunchTimes::default()
        };
        let p = predict(&[l], &m);
        assert_eq!(p.limiter, Term::Tensor);
        assert!((p.time_s - (4.0 + 0.5 + 9.0) * 1e-6).abs() < 1e-12, "{p:?}");
        let lib = predict_library_call(3e-6, 8e-6, &m);
        assert!((lib.time_s - 12.5e-6).abs() < 1e-12);
        assert_eq!(lib.limiter, Term::Compute);
        assert_eq!(predict(&[], &m).time_s, m.fixed_s());
    }

    #[test]
    fn the_fit_recovers_the_constants_of_its_own_predictions() {
        let truth = model_of([3.5, 2.0, 0.4, 4.0, 2.0], "truth");
        let mut samples = Vec::new();
        for i in 0..40 {
            let f = f64::from(i);
            let launches = vec![
                LaunchTimes {
                    memory_s: f * 1e-6,
                    issue_s: (40.0 - f) * 0.3e-6,
                    stages: 1.0 + (i % 7) as f64,
                    waves: 1.0,
                    warps_per_scheduler: 1.0 + (i % 5) as f64,
                    ..LaunchTimes::default()
                };
                1 + (i % 3) as usize
            ];
            let measured_s = predict(&launches, &truth).time_s;
            samples.push(Sample {
                key: format!("op/{i:02}/bf16"),
                pipes: SamplePipes::Kernels(launches),
                measured_s,
            });
        }
        let (fit_on, held) = fit_half(&samples);
        assert_eq!((fit_on.len(), held.len()), (20, 20));
        assert_eq!(fit_on[0].key, "op/00/bf16");
        assert_eq!(held[0].key, "op/01/bf16");
        let fitted = fit(&fit_on, "test");
        let figures = FitFigures::of(&held, &fitted);
        assert!(figures.median < 0.01, "{figures:?} {fitted:?}");
        assert_eq!(figures.within_25, 20);
    }
}
