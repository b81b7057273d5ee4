//! Writes a synthetic records file of many rows, for measuring the roofline tool at scale.
//!
//! ```text
//! cargo run --release --example records_synth -- --rows N --out PATH
//! ```
//!
//! Rows on an H200 with the shape of bench_all's (inputs, params, roofline, timing), each its own
//! workload (`w0`, `w1`, ...), their times chosen so every verdict and a share of skipped rows
//! appear. Deterministic: the same N gives the same file. Then, for example:
//!
//! ```text
//! /usr/bin/time -v target/release/examples/roofline PATH --format json > /dev/null
//! /usr/bin/time -v target/release/examples/roofline PATH > /dev/null
//! ```
//!
//! Exit status: 0; 1 when the file could not be written; 2 for bad arguments.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use tileops::registry::RoofKey;
use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};

const USAGE: &str = "\
usage: records_synth --rows N --out PATH

  --rows N    how many records (for example 1000000)
  --out PATH  the records file to write (atomically)

exit status: 0; 1 when the file could not be written; 2 for bad arguments";

/// Row `i`: one of a few ops, dtypes and times, so that the report has every verdict.
fn row(i: usize, device: &DeviceInfo) -> Record {
    let ops = [
        ("softmax", "reduction"),
        ("rms_norm", "normalization"),
        ("silu_and_mul", "activation"),
        ("gemm", "gemm"),
    ];
    let dtypes = ["float16", "bfloat16", "float32"];
    let (op, family) = ops[i % ops.len()];
    let dtype = dtypes[(i / ops.len()) % dtypes.len()];
    let (m, n) = (32 + (i % 64) as u64, 4096u64);
    let bytes = 2 * m * n * 2;
    let flops = 5 * m * n;
    let record = Record::new(op, family, format!("w{i}"), dtype, device.clone())
        .with_input("x", vec![m, n], dtype)
        .with_param("dim", serde_json::json!(-1))
        .with_roofline(Some(flops), Some(bytes))
        .with_roof(RoofKey::CUDA_CORE_FP32.as_str());
    if i % 10 == 9 {
        return record.with_skip("synthetic: not timed, to exercise the blank rows");
    }
    // Memory time at the H200's 4.5 TB/s envelope, times 0.9 .. 3: at_ceiling, below, anomaly,
    // fail and (the small rows) latency_bound all occur.
    let sol_ms = bytes as f64 / 4.5e9;
    let factor = [0.9, 1.0, 1.2, 2.0, 3.0, 0.98, 1.1][i % 7];
    let median = (sol_ms * factor).max(1e-4);
    record.with_timing(
        "cuda_events+l2_flush+spin_hold",
        TimingStats::new(100, median, median * 0.98, median * 1.03),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut rows, mut out) = (None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => {
                rows = it
                    .next()
                    .and_then(|v| v.replace('_', "").parse::<usize>().ok())
            }
            "--out" => out = it.next().map(PathBuf::from),
            "-h" | "--help" => {
                let _ = writeln!(std::io::stdout(), "{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => rows = None,
        }
    }
    let (Some(rows), Some(out)) = (rows, out) else {
        let _ = writeln!(std::io::stderr(), "records_synth: {USAGE}");
        return ExitCode::from(2);
    };
    let device = DeviceInfo::new("NVIDIA H200")
        .with_compute_capability("9.0".parse().expect("a compute capability"))
        .with_driver("580.65.06")
        .with_l2_bytes(62_914_560);
    let meta = RunMeta::new("synthetic", "2026-11-30T04:00:00Z", "0.1.0", device.clone());
    let run = Run::new(meta, (0..rows).map(|i| row(i, &device)).collect());
    match run.save(&out) {
        Ok(()) => {
            let size = std::fs::metadata(&out).map_or(0, |m| m.len());
            let _ = writeln!(
                std::io::stderr(),
                "records_synth: wrote {} ({rows} records, {size} B)",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "records_synth: {e}");
            ExitCode::from(1)
        }
    }
}
