//! The ledger held to a measured GPU run: every measured row priced by the time model from the
//! kernels that ran (another revision's SASS and launch shapes), beside its measured time.
//!
//! The run is `results/h200-2026-12-04/` (revision 7e0417f). Its inputs, committed under
//! `tileops-bench/ledger/backtest/`: the SASS ledger of that revision's kernels (built with the
//! pinned NVRTC and walked by today's ledger: `sass_sm90-7e0417f.json`) and each row's launches
//! and written bytes (`launches-7e0417f.tsv`, made by `scripts/backtest-launches.sh`: that
//! revision's host code on the emulated device, every launch logged and none run). The
//! predictions are priced against today's profile ([`crate::profile::Profile::builtin`]), whose
//! time model was fitted on half of these rows ([`crate::report::predict::fit`]).
//!
//! `tileops-bench/ledger/backtest-h200-2026-12-04.tsv` is [`table`]'s output; a test recomputes
//! it and fails when it drifts.

use std::collections::BTreeMap;

use super::{LaunchShape, Ledger as SassLedger};
use crate::bench::emulator::{CallBytes, LaunchLine, ledger_of_launches, reloaded_bytes};
use crate::profile::Profile;
use crate::records::{Record, Run};
use crate::report::pipes::{PipeTimes, price_ledger};
use crate::report::predict::{FitFigures, Sample, fit_half};

/// One row's launches and written bytes, as `launches-<rev>.tsv` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowLaunches {
    /// Bytes the call writes (its outputs).
    pub written: u64,
    /// Its launches in order; empty for a call that launched no tileops kernel (cuBLAS).
    pub launches: Vec<(String, LaunchShape)>,
}

/// Parses `launches-<rev>.tsv`: `key written entry gx gy gz bx by bz smem` per launch
/// (tab-separated), `key written -` for a call without a tileops launch; `#` lines are comments.
///
/// # Errors
/// The first line that does not parse, by number.
pub fn parse_launches(text: &str) -> Result<BTreeMap<String, RowLaunches>, String> {
    let mut rows: BTreeMap<String, RowLaunches> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| format!("launches line {}: {why}: {line}", n + 1);
        let fields: Vec<&str> = line.split('\t').collect();
        let number = |i: usize| -> Result<u64, String> {
            fields
                .get(i)
                .ok_or_else(|| bad("too few fields"))?
                .parse::<u64>()
                .map_err(|e| bad(&e.to_string()))
        };
        let key = (*fields.first().ok_or_else(|| bad("empty"))?).to_owned();
        let written = number(1)?;
        let row = rows.entry(key).or_insert_with(|| RowLaunches {
            written,
            launches: Vec::new(),
        });
        if row.written != written {
            return Err(bad("written bytes differ from the row's earlier line"));
        }
        match fields.get(2) {
            Some(&"-") if fields.len() == 3 => {}
            Some(entry) if fields.len() == 10 => {
                let dim = |i: usize| -> Result<u32, String> {
                    u32::try_from(number(i)?).map_err(|e| bad(&e.to_string()))
                };
                row.launches.push((
                    (*entry).to_owned(),
                    LaunchShape {
                        grid: [dim(3)?, dim(4)?, dim(5)?],
                        block: [dim(6)?, dim(7)?, dim(8)?],
                        dynamic_smem: dim(9)?,
                    },
                ));
            }
            _ => {
                return Err(bad(
                    "not `key written entry gx gy gz bx by bz smem` nor `key written -`",
                ));
            }
        }
    }
    Ok(rows)
}

/// One measured row, priced.
#[derive(Debug, Clone)]
pub struct BacktestRow {
    /// The measured record with the ledger of the kernels that ran.
    pub record: Record,
    /// Its pipes against the profile.
    pub pipes: PipeTimes,
    /// What the model needs, with the measured median.
    pub sample: Sample,
}

/// Prices every timed record of `run` from `launches` and `sass` against `profile`.
///
/// # Errors
/// A timed row without launches, a launch the SASS ledger cannot price, a record the profile
/// cannot price.
pub fn rows(
    run: &Run,
    launches: &BTreeMap<String, RowLaunches>,
    sass: &SassLedger,
    profile: &Profile,
) -> Result<Vec<BacktestRow>, String> {
    let mut out = Vec::new();
    for record in run.records.iter().filter(|r| r.median_ms.is_some()) {
        let key = format!("{}/{}/{}", record.op, record.workload, record.dtype);
        let row = launches
            .get(&key)
            .ok_or_else(|| format!("{key}: measured, but no launches listed"))?;
        let bytes = record.bytes.ok_or_else(|| format!("{key}: no bytes"))?;
        let shapes: Vec<(Vec<usize>, usize)> = record
            .inputs
            .iter()
            .map(|i| {
                let size = i
                    .dtype
                    .parse::<tileops::DType>()
                    .map_or(4, |d| d.size_in_bytes());
                let shape = i.shape.iter().map(|&d| d as usize).collect();
                (shape, size)
            })
            .collect();
        let call = CallBytes {
            streamed: bytes.saturating_sub(row.written).max(row.written),
            reloaded: reloaded_bytes(&shapes),
            written: row.written,
        };
        let ledger = {
            let lines: Vec<LaunchLine> = row
                .launches
                .iter()
                .map(|(entry, shape)| LaunchLine {
                    entry: entry.clone(),
                    grid: shape.grid,
                    block: shape.block,
                    dynamic_smem: shape.dynamic_smem,
                    ran: false,
                    traffic: None,
                })
                .collect();
            ledger_of_launches(&lines, &call, sass).map_err(|e| format!("{key}: {e}"))?
        };
        let pipes = price_ledger(record, &ledger, profile).map_err(|e| format!("{key}: {e}"))?;
        let measured_ms = record
            .median_ms
            .ok_or_else(|| format!("{key}: not timed"))?;
        let sample = Sample {
            key: key.clone(),
            pipes: pipes.model_pipes.clone(),
            measured_s: measured_ms * 1e-3,
        };
        let mut record = record.clone();
        record.ledger = Some(ledger);
        out.push(BacktestRow {
            record,
            pipes,
            sample,
        });
    }
    Ok(out)
}

/// The committed table: `op/workload/dtype<TAB>predicted_us<TAB>measured_us`, one line per row
/// in key order, after a header comment.
pub fn table(rows: &[BacktestRow]) -> String {
    let mut sorted: Vec<&BacktestRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.sample.key.cmp(&b.sample.key));
    let mut out = String::from(
        "# The kernel ledger's predicted time of every row of results/h200-2026-12-04 (revision \
         7e0417f's kernels), beside the measured median.\n# Predicted by the time model of \
         tileops-bench/profiles/h200.yaml (a prediction, not a measurement); generated by \
         `TILEOPS_LEDGER_UPDATE=1 cargo test -p tileops-bench --test it ledger::backtest`.\n\
         # op/workload/dtype\tpredicted_us\tmeasured_us\n",
    );
    for row in sorted {
        let predicted = row.pipes.predicted_ms().map_or(f64::NAN, |ms| ms * 1e3);
        out.push_str(&format!(
            "{}\t{predicted:.2}\t{:.2}\n",
            row.sample.key,
            row.sample.measured_s * 1e6
        ));
    }
    out
}

/// Why a row is predicted outside 25% of its measured time: `prefix<TAB>reason` lines of
/// `tileops-bench/ledger/backtest/outliers.tsv`, a row taking the reason of the first prefix
/// of its key; `#` lines are comments.
///
/// # Errors
/// A line without a tab.
pub fn parse_reasons(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(n, l)| {
            l.split_once('\t')
                .map(|(p, r)| (p.trim().to_owned(), r.trim().to_owned()))
                .ok_or_else(|| format!("outliers line {}: not `prefix<TAB>reason`: {l}", n + 1))
        })
        .collect()
}

/// A row predicted outside 25% of its measured time.
#[derive(Debug, Clone, PartialEq)]
pub struct Outlier {
    /// `op/workload/dtype`.
    pub key: String,
    /// Predicted µs.
    pub predicted_us: f64,
    /// Measured µs.
    pub measured_us: f64,
    /// Why, from the reasons file; `None` when no prefix names it.
    pub reason: Option<String>,
}

/// The backtest's figures: the model's constants and how well it predicts the fit half, the
/// held-out half and every row, with the rows outside 25%.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The profile's time model.
    pub model: crate::profile::TimeModel,
    /// On the rows it was fitted on.
    pub fit: FitFigures,
    /// On the other half.
    pub held_out: FitFigures,
    /// On every row.
    pub all: FitFigures,
    /// Rows outside 25%, in key order.
    pub outliers: Vec<Outlier>,
}

/// The summary of `rows` under `profile`'s time model; `reasons` from [`parse_reasons`].
///
/// # Errors
/// A profile without a time model or SM pipes.
pub fn summary(
    rows: &[BacktestRow],
    profile: &Profile,
    reasons: &[(String, String)],
) -> Result<Summary, String> {
    let model = profile
        .model
        .clone()
        .ok_or_else(|| format!("profile {} has no time model", profile.name))?;
    let samples: Vec<Sample> = rows.iter().map(|r| r.sample.clone()).collect();
    let (fit, held_out) = fit_half(&samples);
    let all: Vec<&Sample> = samples.iter().collect();
    let mut outliers: Vec<Outlier> = samples
        .iter()
        .filter_map(|s| {
            let predicted = s.predict(&model).time_s;
            ((predicted / s.measured_s - 1.0).abs() > 0.25).then(|| Outlier {
                key: s.key.clone(),
                predicted_us: predicted * 1e6,
                measured_us: s.measured_s * 1e6,
                reason: reasons
                    .iter()
                    .find(|(prefix, _)| s.key.starts_with(prefix.as_str()))
                    .map(|(_, r)| r.clone()),
            })
        })
        .collect();
    outliers.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Summary {
        fit: FitFigures::of(&fit, &model),
        held_out: FitFigures::of(&held_out, &model),
        all: FitFigures::of(&all, &model),
        model,
        outliers,
    })
}

impl Summary {
    /// The summary as markdown, for `tileops/docs/kernels.md`.
    pub fn to_markdown(&self) -> String {
        let m = &self.model;
        let line = |name: &str, f: &FitFigures| {
            format!(
                "| {name} | {} | {:.1}% | {:.1}% | {} ({:.0}%) |\n",
                f.rows,
                f.median * 100.0,
                f.mean * 100.0,
                f.within_25,
                f.within_25 as f64 / f.rows.max(1) as f64 * 100.0
            )
        };
        let mut out = format!(
            "The time model's constants (`model:` in `tileops-bench/profiles/h200.yaml`), fitted \
             on the rows at even positions in key order of `results/h200-2026-12-04/` \
             (revision 7e0417f's kernels, priced from their SASS and launch shapes: \
             `tileops-bench/ledger/backtest/`): fixed cost {} µs per call, {} µs per further \
             launch, HBM latency {} µs per dependent round of loads, {} cycles per instruction on \
             a lone warp's chain, the SM's pipes combined by their {}-norm. Predicted (not \
             measured) against measured, \
             |predicted ÷ measured − 1|:\n\n\
             | rows | n | median | mean | within 25% |\n| --- | ---: | ---: | ---: | ---: |\n",
            m.fixed_us, m.launch_us, m.latency_us, m.chain_cycles, m.pipe_norm
        );
        out.push_str(&line("fitted on (even positions)", &self.fit));
        out.push_str(&line("held out (odd positions)", &self.held_out));
        out.push_str(&line("all", &self.all));
        out.push_str(
            "\nEvery row: `tileops-bench/ledger/backtest-h200-2026-12-04.tsv`. The rows outside \
             25%, and why:\n\n| row | predicted µs | measured µs | reason |\n| --- | ---: | ---: | --- |\n",
        );
        for o in &self.outliers {
            out.push_str(&format!(
                "| {} | {:.2} | {:.2} | {} |\n",
                o.key,
                o.predicted_us,
                o.measured_us,
                o.reason.as_deref().unwrap_or("(no reason stated)")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_parse_and_bad_lines_are_named() {
        let text = "# comment\n\
                    relu/x/bf16\t64\trelu_bf16\t1024\t1\t1\t256\t1\t1\t0\n\
                    gemm/x/bf16\t8\t-\n\
                    sum/x/bf16\t4\treduce_rows_split_sum_bf16\t8\t64\t1\t256\t1\t1\t0\n\
                    sum/x/bf16\t4\treduce_finish_sum_bf16\t1\t1\t1\t256\t1\t1\t0\n";
        let rows = parse_launches(text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows["relu/x/bf16"].written, 64);
        assert_eq!(rows["relu/x/bf16"].launches[0].1.grid, [1024, 1, 1]);
        assert!(rows["gemm/x/bf16"].launches.is_empty());
        assert_eq!(rows["sum/x/bf16"].launches.len(), 2);
        let err = parse_launches("a\t1\tk\t1\t1\n").unwrap_err();
        assert!(err.starts_with("launches line 1:"), "{err}");
        let err = parse_launches("a\t1\t-\na\t2\t-\n").unwrap_err();
        assert!(err.contains("written bytes differ"), "{err}");
        assert!(parse_launches("a\tx\t-\n").is_err());
    }
}
