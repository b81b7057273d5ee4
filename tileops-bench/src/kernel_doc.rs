//! `tileops/docs/kernels.md`, generated: every kernel entry point's SASS ledger, and every
//! workload's ledger priced against a profile's pipes, from a bench run on the emulated device.
//!
//! Written by `tileops roofline RUN.json --profile h200 --kernels-md tileops/docs/kernels.md`,
//! where `RUN.json` comes from `tileops bench` on the emulated device (every row carries its
//! kernel ledger: launch shapes from the emulator, instructions from the SASS). The CI check
//! (`tests/it/bench_all.rs`) regenerates it and fails when the committed file differs, and fails
//! when a row's ceiling drops below the committed one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::ledger::{Ledger as SassLedger, SM90};
use crate::profile::Profile;
use crate::records::Run;
use crate::report::pipes::ISSUE_SHARE_GOAL;
use crate::report::{LATENCY_SOL_MS, PipeTimes, ProfileChoice, Report};
use crate::table::{Column, Table};

/// How the SASS ledger counts (the generator's own notes, embedded).
const SASS_METHOD: &str = include_str!("../ledger/METHOD.md");

/// How the kernels that need more than the tables are built (hand-written: the tensor-core
/// prefill and what a `wgmma`/TMA version would add), embedded without its title line.
const DESIGNS: &str = include_str!("../ledger/DESIGNS.md");

/// The kernel changes brought to the ledger, before and after (a committed, hand-checked
/// table: the "before" figures are of kernels no longer in the tree).
pub const CHANGES: &str = include_str!("../ledger/CHANGES.md");

/// One priced row of the document, as the ceiling gate reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct CeilingRow {
    /// `op/workload/dtype`.
    pub key: String,
    /// The gate's figure: the time model's predicted efficiency (`sol / predicted time`), or,
    /// for a profile without a time model, the pipes' ceiling.
    pub ceiling: f64,
    /// The term that dominates the predicted time (the limiting pipe without a time model).
    pub limiter: String,
    /// The predicted time, µs (a prediction, not a measurement), when the profile has a time
    /// model.
    pub predicted_us: Option<f64>,
    /// Whether the spec's roofline calls the row memory bound.
    pub memory_bound: bool,
    /// Issue time ÷ memory time.
    pub issue_share: f64,
}

/// The priced rows of a run with ledgers, in the run's order.
pub fn ceilings(run: &Run, profile: &Profile) -> Vec<CeilingRow> {
    let report = Report::build(run, ProfileChoice::Fixed(profile));
    report
        .rows
        .iter()
        .filter_map(|row| {
            let pipes = row.pipes.as_ref()?.as_ref().ok()?;
            Some(CeilingRow {
                key: format!("{}/{}/{}", row.key.op, row.key.workload, row.key.dtype),
                ceiling: pipes
                    .predicted_efficiency()
                    .unwrap_or_else(|| pipes.ceiling()),
                limiter: pipes.prediction.map_or_else(
                    || pipes.limiter().as_str().to_owned(),
                    |p| p.limiter.as_str().to_owned(),
                ),
                predicted_us: pipes.predicted_ms().map(|ms| ms * 1e3),
                memory_bound: pipes.memory_ms >= pipes.compute_ms,
                issue_share: pipes.issue_ms / pipes.memory_ms,
            })
        })
        .collect()
}

/// The ceilings as the committed gate file: one `key ceiling limiter` line per row, sorted.
pub fn ceilings_text(rows: &[CeilingRow]) -> String {
    let mut sorted: Vec<&CeilingRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out = String::from(
        "# The kernel ledger's predicted efficiency of every row (op/workload/dtype efficiency \
         limiter: the spec's SOL time over the time model's predicted time, a prediction), \
         generated with tileops/docs/kernels.md;\n# CI fails when a memory-bound row's figure \
         drops below this.\n",
    );
    for row in sorted {
        let _ = writeln!(out, "{} {:.4} {}", row.key, row.ceiling, row.limiter);
    }
    out
}

/// The predicted time of every row as the committed `tileops-bench/ledger/predicted-h200.tsv`:
/// `op/workload/dtype<TAB>predicted_us`, sorted, after a header comment; rows without a
/// prediction are left out.
pub fn predicted_text(rows: &[CeilingRow]) -> String {
    let mut sorted: Vec<&CeilingRow> = rows.iter().filter(|r| r.predicted_us.is_some()).collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out = String::from(
        "# The kernel ledger's predicted time of every row of today's manifest on the H200 (the \
         time model of tileops-bench/profiles/h200.yaml over today's SASS and the emulator's \
         launch shapes): predictions, not measurements; generated with tileops/docs/kernels.md.\n\
         # op/workload/dtype\tpredicted_us\n",
    );
    for row in sorted {
        let _ = writeln!(
            out,
            "{}\t{:.2}",
            row.key,
            row.predicted_us.unwrap_or(f64::NAN)
        );
    }
    out
}

/// Reads [`ceilings_text`] back: `key → (ceiling, limiter)`. Lines that do not parse are
/// reported by number.
///
/// # Errors
/// The first line that is not `key ceiling limiter`.
pub fn parse_ceilings(text: &str) -> Result<BTreeMap<String, (f64, String)>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(key), Some(ceiling), Some(limiter), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("line {}: not `key ceiling limiter`: {line}", n + 1));
        };
        let ceiling: f64 = ceiling
            .parse()
            .map_err(|e| format!("line {}: ceiling {ceiling}: {e}", n + 1))?;
        out.insert(key.to_owned(), (ceiling, limiter.to_owned()));
    }
    Ok(out)
}

/// The attention rows' predicted rates: decode in TB/s of what it reads (its KV cache), prefill
/// in TFLOP/s, each with the term that limits it.
fn attention_rows(run: &Run, report: &Report) -> String {
    let mut table = Table::new(vec![
        Column::left("op / workload / dtype"),
        Column::left("kernels"),
        Column::right("predicted µs"),
        Column::right("predicted rate"),
        Column::right("predicted"),
        Column::left("limiter"),
    ]);
    let mut any = false;
    for (record, row) in run.records.iter().zip(&report.rows) {
        if !record.op.starts_with("gqa_") {
            continue;
        }
        let Some(pipes) = row.pipes.as_ref().and_then(|p| p.as_ref().ok()) else {
            continue;
        };
        let (Some(ms), Some(prediction)) = (pipes.predicted_ms(), pipes.prediction) else {
            continue;
        };
        let rate = if record.op.starts_with("gqa_prefill") {
            format!("{:.0} TFLOP/s", record.flops.unwrap_or(0) as f64 / ms / 1e9)
        } else {
            format!("{:.2} TB/s", record.bytes.unwrap_or(0) as f64 / ms / 1e9)
        };
        let kernels = record.ledger.as_ref().map_or_else(String::new, |l| {
            l.launches
                .iter()
                .map(|l| l.entry.as_str())
                .collect::<Vec<_>>()
                .join(" + ")
        });
        any = true;
        table.push([
            format!("{}/{}/{}", record.op, record.workload, record.dtype),
            kernels,
            format!("{:.2}", ms * 1e3),
            rate,
            pipes
                .predicted_efficiency()
                .map_or_else(String::new, |e| format!("{:.1}%", e * 100.0)),
            prediction.limiter.as_str().to_owned(),
        ]);
    }
    if !any {
        return String::new();
    }
    format!(
        "\n## Attention rows, predicted\n\nThe time model's prediction of every attention row (a \
         prediction, not a measurement: instructions computed from the sm_90 SASS, launch shapes \
         from the emulator, constants fitted on the H200 run). Decode in TB/s of the bytes it \
         reads, prefill in TFLOP/s of the pairs its mask keeps; the limiter is the largest term \
         of the predicted time.\n\n{}",
        table.to_markdown()
    )
}

/// The most launches a traffic log may hold (pass C's coverage tests make about a thousand).
const MAX_TRAFFIC_LAUNCHES: usize = 1 << 20;

/// One entry's traffic, summed over the launches of a launch log.
#[derive(Debug, Clone, Copy, Default)]
struct Counted {
    sectors: u64,
    ideal_sectors: u64,
    wavefronts: u64,
    ideal_wavefronts: u64,
}

/// Per entry, the traffic the emulator counted over the launches of a launch log.
type EntryTraffic = BTreeMap<String, Counted>;

fn traffic_by_entry(log: &str) -> Result<EntryTraffic, String> {
    let mut by_entry = EntryTraffic::new();
    for line in crate::bench::emulator::parse_lines(log, MAX_TRAFFIC_LAUNCHES)? {
        let Some(t) = line.traffic else { continue };
        let e = by_entry.entry(line.entry).or_default();
        e.sectors += t.global_sectors;
        e.ideal_sectors += t.global_ideal_sectors;
        e.wavefronts += t.shared_wavefronts;
        e.ideal_wavefronts += t.shared_ideal_wavefronts;
    }
    Ok(by_entry)
}

/// The document. `traffic_log`: the launch log of the emulator's traffic pass (pass C of
/// `scripts/emu-check.sh`, every entry point at the coverage tests' small shapes), whose per-entry
/// coalescing and bank-conflict figures the entry table shows; without it those columns say
/// "not counted".
///
/// # Errors
/// A traffic log that does not parse.
pub fn render(
    run: &Run,
    profile: &Profile,
    sass: &SassLedger,
    changes: &str,
    traffic_log: Option<&str>,
    backtest: Option<&crate::ledger::backtest::Summary>,
) -> Result<String, String> {
    let traffic = traffic_log.map(traffic_by_entry).transpose()?;
    let mut out = String::new();
    let _ = writeln!(out, "# Kernels: resources and ledgers\n");
    let _ = writeln!(
        out,
        "Generated: `tileops roofline RUN.json --profile {} --kernels-md tileops/docs/kernels.md`, \
         `RUN.json` written by `tileops bench` on the emulated device (cuda-emu). **Nothing here \
         ran on a GPU**: instruction and MUFU counts are computed from the sm_90 SASS of the \
         CUBINs NVRTC builds ({} NVRTC {}, disassembled by {}); launch shapes come from the \
         emulator; memory traffic is counted on the emulator by `scripts/emu-check.sh` (its \
         gates are listed at the end). Regenerate after changing a kernel: \
         `TILEOPS_LEDGER_UPDATE=1 cargo test -p tileops-bench --test it ledger` (the SASS \
         ledger), then `TILEOPS_LEDGER_UPDATE=1 bash scripts/emu-check.sh` (this file).\n",
        profile.name, sass.toolchain.arch, sass.toolchain.nvrtc, sass.toolchain.nvdisasm
    );
    let _ = writeln!(out, "## How the instructions are counted\n");
    out.push_str(SASS_METHOD.trim_start_matches(|c| c != '\n').trim());
    let _ = writeln!(out, "\n\n## How a row is priced\n");
    let sm = profile.sm.as_ref();
    let _ = writeln!(
        out,
        "Per row, against profile {} (`sm:` {} SMs at {:.2} GHz; issue {:.3e} thread-instructions/s, \
         MUFU {:.3e}/s, shared memory {:.3e} B/s; HBM {:.3e} B/s effective; `mma.sync` at {:.3e} \
         FLOP/s), each launch's **pipes**, on its busiest SM (⌈CTAs ÷ SMs⌉ CTAs): memory = DRAM \
         bytes (the emulator's unique sectors where it counted them, else the manifest's) at \
         HBM's bandwidth for the call's mix of reads and writes (the profile's measured `read`, \
         `triad`, `copy` and `write` mixes, interpolated on the share of bytes written); issue = \
         thread-instructions ÷ the SM's issue rate; SFU likewise with MUFU operations; shared \
         memory likewise with the bytes through it (`LDS`/`STS`, `LDSM`, `cp.async` writes; times \
         the emulator's wavefronts ÷ ideal where it counted bank conflicts); tensor likewise with \
         the FLOPs of the tensor-core instructions the kernel issues at the roof of that \
         instruction (`HMMA` is `mma.sync`, priced at `tensor_core.mma_sync`, not at cuBLAS's \
         `wgmma` figure); compute = the manifest's FLOPs ÷ the row's roof (the spec's term). The \
         **ceiling** is the spec's SOL time ÷ the largest pipe.\n\n\
         The **predicted time** (a prediction, not a measurement; \
         `tileops-bench/src/report/predict.rs`) adds what the pipes leave out, with the \
         profile's fitted constants: a fixed cost per call and per further launch, HBM's latency \
         for each dependent round of global loads a thread waits for (the SASS walk's rounds, \
         times the waves of CTAs; equivalently bytes in flight per SM against the \
         bandwidth–latency product), the dependent chain of a lone warp, and the overlap of the \
         pipes: memory and the largest SM pipe overlap as a pipeline of waves × rounds stages \
         (the smaller exposed for one stage), not at all where an SM holds one CTA that waits \
         at barriers. The **predicted efficiency** = SOL time ÷ predicted time; its limiter the \
         largest term (launch, memory, issue, SFU, shared, tensor, latency). Not modelled: L2 \
         hits beyond an ideal L2, dependent-issue stalls beyond the chain, DRAM page effects. \
         Goal: every memory-bound row with issue time ≤ {ISSUE_SHARE_GOAL} of its memory time.\n",
        profile.name,
        sm.map_or(0, |s| s.count),
        sm.map_or(0.0, |s| s.clock_hz / 1e9),
        sm.map_or(0.0, |s| s.issue.effective()),
        sm.map_or(0.0, |s| s.sfu.effective()),
        sm.and_then(|s| s.shared.as_ref())
            .map_or(0.0, |r| r.effective()),
        profile.hbm().effective(),
        profile
            .roof(crate::profile::MMA_SYNC_ROOF)
            .map_or(0.0, |r| r.effective())
    );
    if let Some(summary) = backtest {
        let _ = writeln!(out, "### The model held to the H200 run (the backtest)\n");
        out.push_str(&summary.to_markdown());
        out.push('\n');
    }

    out.push_str(DESIGNS.trim_start_matches(|c| c != '\n').trim());
    out.push_str("\n\n");

    let _ = writeln!(out, "## Every entry point (sm_90 SASS)\n");
    let _ = writeln!(
        out,
        "Fixed = instructions a thread runs once (outside the streaming loops); per element = \
         the streaming loops' instructions ÷ the elements one iteration handles. Registers, \
         spills and static shared memory from ptxas; CTAs/SM at 256 threads without dynamic \
         shared memory. Sectors / ideal (global loads and stores: 32-byte sectors per warp \
         request over the fewest its width needs) and wavefronts / ideal (shared memory: bank \
         conflicts) are counted on the emulator over every launch of the entry in the coverage \
         tests (small shapes, tails included){}.\n",
        if traffic.is_some() {
            ""
        } else {
            "; not counted in this rendering (no traffic log)"
        }
    );
    let mut entries = Table::new(vec![
        Column::left("entry"),
        Column::left("file"),
        Column::right("regs"),
        Column::right("spill B"),
        Column::right("smem B"),
        Column::right("CTAs/SM @256"),
        Column::right("fixed instr"),
        Column::right("instr/elem"),
        Column::right("MUFU/elem"),
        Column::right("16-B ld/st"),
        Column::right("sectors / ideal"),
        Column::right("wavefronts / ideal"),
    ]);
    let counted = |entry: &str, pick: fn(&Counted) -> (u64, u64)| {
        let Some(traffic) = &traffic else {
            return "not counted".to_owned();
        };
        match traffic.get(entry).map(pick) {
            None => "not launched".to_owned(),
            Some((_, 0)) => "—".to_owned(),
            Some((n, d)) => format!("{:.3}", n as f64 / d as f64),
        }
    };
    for e in &sass.entries {
        let fixed = e.fixed_per_thread();
        let (per_elem, mufu_per_elem) = e.loop_per_element();
        let wide = e
            .loops
            .iter()
            .fold((fixed.wide_loads, fixed.wide_stores), |(l, s), lp| {
                (l + lp.body.wide_loads, s + lp.body.wide_stores)
            });
        let ctas = crate::ledger::occupancy::ctas_per_sm(&SM90, 256, e.registers, e.static_smem)
            .map_or_else(|e| format!("— ({e})"), |c| c.to_string());
        entries.push([
            e.entry.clone(),
            e.file.clone(),
            e.registers.to_string(),
            e.spill_bytes.to_string(),
            e.static_smem.to_string(),
            ctas,
            fixed.instructions.to_string(),
            format!("{per_elem:.2}"),
            format!("{mufu_per_elem:.3}"),
            format!("{}/{}", wide.0, wide.1),
            counted(&e.entry, |t| (t.sectors, t.ideal_sectors)),
            counted(&e.entry, |t| (t.wavefronts, t.ideal_wavefronts)),
        ]);
    }
    out.push_str(&entries.to_markdown());

    let report = Report::build(run, ProfileChoice::Fixed(profile));
    let _ = writeln!(out, "\n## Every workload\n");
    let _ = writeln!(
        out,
        "One line per launch of the row's call (the manifest's workloads, every dtype). \
         instr/elem and MUFU/elem at the launch's shape, per element of what the call \
         streams (the bytes it reads, as its manifest counts them, or writes, the larger, over the \
         entry's element size; \
         for a second-stage kernel that combines partials, `reduce_finish_*` and \
         `gqa_decode_merge_*`, per thread of its own: its loops run over the partials); waves = CTAs ÷ (CTAs/SM × {} SMs). Traffic columns: the emulator's count where \
         the row ran (small workloads), blank where it was launched dry.\n",
        SM90.sm_count
    );
    let mut rows = Table::new(vec![
        Column::left("op / workload / dtype"),
        Column::left("kernel"),
        Column::left("grid × block"),
        Column::right("instr/elem"),
        Column::right("MUFU/elem"),
        Column::right("regs"),
        Column::right("CTAs/SM"),
        Column::right("waves"),
        Column::right("traffic / bytes"),
        Column::right("sectors / ideal"),
        Column::right("wavefronts / ideal"),
        Column::right("rounds"),
        Column::left("limiter"),
        Column::right("ceiling"),
        Column::right("issue / memory"),
        Column::right("predicted µs"),
        Column::right("predicted"),
        Column::left("predicted limiter"),
    ]);
    let mut short = Vec::new();
    for (record, row) in run.records.iter().zip(&report.rows) {
        let Some(ledger) = &record.ledger else {
            continue;
        };
        let priced = row.pipes.as_ref().and_then(|p| p.as_ref().ok());
        if ledger.launches.is_empty() {
            // A library call (cuBLASLt's GEMM): no kernel of ours, its prediction only.
            let mut cells = vec![String::new(); 18];
            cells[0] = format!("{}/{}/{}", record.op, record.workload, record.dtype);
            cells[1] = "cuBLASLt (a library call)".to_owned();
            cells[15] = priced
                .and_then(PipeTimes::predicted_ms)
                .map_or_else(String::new, |ms| format!("{:.2}", ms * 1e3));
            cells[16] = priced
                .and_then(PipeTimes::predicted_efficiency)
                .map_or_else(String::new, |e| format!("{:.1}%", e * 100.0));
            cells[17] = priced
                .and_then(|p| p.prediction)
                .map_or_else(String::new, |p| p.limiter.as_str().to_owned());
            rows.push(cells);
        }
        for (i, launch) in ledger.launches.iter().enumerate() {
            let first = i == 0;
            let ratio = |n: u64, d: u64| {
                if d == 0 {
                    String::new()
                } else {
                    format!("{:.3}", n as f64 / d as f64)
                }
            };
            let traffic = launch.traffic;
            rows.push([
                if first {
                    format!("{}/{}/{}", record.op, record.workload, record.dtype)
                } else {
                    String::new()
                },
                launch.entry.clone(),
                format!(
                    "{}×{}×{} × {}",
                    launch.grid[0],
                    launch.grid[1],
                    launch.grid[2],
                    launch.threads_per_cta()
                ),
                format!("{:.2}", launch.instr_per_elem),
                format!("{:.3}", launch.mufu_per_elem),
                launch.registers.to_string(),
                launch.ctas_per_sm.to_string(),
                format!(
                    "{:.2}",
                    launch.ctas() as f64
                        / (f64::from(launch.ctas_per_sm) * f64::from(SM90.sm_count))
                ),
                match (traffic, record.bytes) {
                    (Some(t), Some(b)) if first && ledger.launches.len() == 1 => {
                        ratio(t.read_bytes + t.write_bytes, b)
                    }
                    _ => String::new(),
                },
                traffic.map_or_else(String::new, |t| {
                    ratio(t.global_sectors, t.global_ideal_sectors)
                }),
                traffic.map_or_else(String::new, |t| {
                    ratio(t.shared_wavefronts, t.shared_ideal_wavefronts)
                }),
                format!("{:.1}", launch.rounds),
                if first {
                    priced.map_or_else(String::new, |p| p.limiter().as_str().to_owned())
                } else {
                    String::new()
                },
                if first {
                    priced.map_or_else(String::new, |p| format!("{:.1}%", p.ceiling() * 100.0))
                } else {
                    String::new()
                },
                if first {
                    priced.map_or_else(String::new, |p| format!("{:.2}", p.issue_ms / p.memory_ms))
                } else {
                    String::new()
                },
                if first {
                    priced
                        .and_then(PipeTimes::predicted_ms)
                        .map_or_else(String::new, |ms| format!("{:.2}", ms * 1e3))
                } else {
                    String::new()
                },
                if first {
                    priced
                        .and_then(PipeTimes::predicted_efficiency)
                        .map_or_else(String::new, |e| format!("{:.1}%", e * 100.0))
                } else {
                    String::new()
                },
                if first {
                    priced
                        .and_then(|p| p.prediction)
                        .map_or_else(String::new, |p| p.limiter.as_str().to_owned())
                } else {
                    String::new()
                },
            ]);
        }
        if let Some(p) = priced
            && p.memory_ms >= p.compute_ms
            && p.sol_ms >= LATENCY_SOL_MS
            && p.issue_ms > ISSUE_SHARE_GOAL * p.memory_ms
        {
            short.push((
                format!("{}/{}/{}", record.op, record.workload, record.dtype),
                p.issue_ms / p.memory_ms,
                p.sfu_ms / p.memory_ms,
                ledger
                    .launches
                    .iter()
                    .map(|l| l.entry.as_str())
                    .collect::<Vec<_>>()
                    .join(" + "),
            ));
        }
    }
    out.push_str(&rows.to_markdown());
    out.push_str(&attention_rows(run, &report));
    let unpriced: Vec<String> = report
        .rows
        .iter()
        .filter_map(|r| match &r.pipes {
            Some(Err(why)) => Some(format!("- {}: {why}", r.key)),
            None => Some(format!(
                "- {}: no kernel ledger ({})",
                r.key,
                r.reason().unwrap_or_default()
            )),
            Some(Ok(_)) => None,
        })
        .collect();
    if !unpriced.is_empty() {
        let _ = writeln!(out, "\nRows without a priced ledger:\n");
        for line in unpriced {
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(
        out,
        "\n## Memory-bound rows short of the goal (issue > {ISSUE_SHARE_GOAL} × memory time)\n\n\
         Rows whose speed-of-light time is at least {} µs (below it launch latency dominates, as \
         the verdicts' `latency_bound` says, and no pipe model has traction).\n",
        LATENCY_SOL_MS * 1e3
    );
    if short.is_empty() {
        let _ = writeln!(out, "None.");
    } else {
        let mut table = Table::new(vec![
            Column::left("op / workload / dtype"),
            Column::left("kernels"),
            Column::right("issue / memory"),
            Column::right("SFU / memory"),
        ]);
        for (key, issue, sfu, kernels) in short {
            table.push([key, kernels, format!("{issue:.2}"), format!("{sfu:.2}")]);
        }
        out.push_str(&table.to_markdown());
    }
    if !changes.trim().is_empty() {
        let _ = writeln!(out, "\n{}", changes.trim());
    }
    Ok(out)
}
