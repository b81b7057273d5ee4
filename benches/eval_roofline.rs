//! The cost of one `eval_roofline` call: the generated plain-Rust body, on the CPU.
//!
//! `cargo bench --bench eval_roofline` prints the median time per call (of 31 batches). Under
//! `cargo test` (no `--bench` argument) it runs each case a few times as a smoke check and times
//! nothing: speed is measured here, never asserted.

use std::hint::black_box;
use std::time::Instant;
use tileops::roofline::Value;
use tileops::{DType, Device, TensorSpec};

#[tileops::roofline_op(
    "multi_dim_sum",
    manifest = "benches/manifest/bench.yaml",
    register = false
)]
struct MultiDimSum {
    x: TensorSpec,
    dim: Value,
}

/// One `eval_roofline` call, behind a closure so different op types share a table.
type Eval<'a> = dyn Fn() -> Result<tileops::Roofline, tileops::RooflineError> + 'a;

/// Median nanoseconds per call of `f`, over batches sized to take about 10 ms each.
fn time_per_call(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut calibration = 0u64;
    while start.elapsed().as_millis() < 10 {
        f();
        calibration += 1;
    }
    let batch = calibration.max(1);
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let measuring = std::env::args().any(|a| a == "--bench");
    let device = Device::cpu();
    let x = TensorSpec::new([32, 32, 4096], DType::BFloat16);
    let softmax = tileops::ops::Softmax::new(x.clone(), -1, &device)?;
    let rms_norm = tileops::ops::RmsNorm::new(
        TensorSpec::new([2048, 4096], DType::BFloat16),
        TensorSpec::new([4096], DType::BFloat16),
        1e-6,
        &device,
    )?;
    let reduction = MultiDimSum {
        x,
        dim: Value::List(vec![Value::Int(0), Value::Int(2)]),
    };

    let cases: [(&str, &Eval); 3] = [
        ("softmax (2 vars, slices)", &|| softmax.eval_roofline()),
        ("rms_norm (2 vars)", &|| rms_norm.eval_roofline()),
        ("multi-dim sum (comprehensions, sets)", &|| {
            reduction.eval_roofline()
        }),
    ];
    for (name, eval) in cases {
        let roofline = eval()?;
        if measuring {
            let ns = time_per_call(|| {
                black_box(eval()).ok();
            });
            println!("{name:<40} {ns:>8.0} ns/call   ({roofline})");
        } else {
            for _ in 0..3 {
                assert_eq!(eval()?, roofline, "eval_roofline is deterministic");
            }
        }
    }
    Ok(())
}
