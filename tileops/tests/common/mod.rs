//! The harness shared by the test files (`mod common;` in each): GPU acquisition with the
//! `SKIP: <test>: <reason>` line and `TILEOPS_REQUIRE_GPU=1`, the poison value, the per-dtype
//! bounds and floors, the element error measure, random inputs with special values, and the
//! per-case report with its `WORST <op> <dtype>` lines (scripts/gpu-check.sh greps both).

// Each test file is its own crate and uses only part of this module: without this, every item
// one of them leaves unused would be a dead-code warning there.
#![allow(dead_code)]

use std::io::Write;

use tileops::{DType, Device, Tensor, TensorSpec};

/// The floating-point dtypes every op is tested in.
pub const DTYPES: [DType; 3] = [DType::Float32, DType::Float16, DType::BFloat16];
/// A value none of the ops under test produce from the test inputs: outputs start as this, so
/// an element the kernel never writes shows up.
pub const POISON: f64 = 777.0;

/// Writes `line` to stderr directly, past cargo's output capture, so SKIP lines always show.
pub fn announce(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The GPU, or `None` after printing `SKIP: <test>: <reason>`; panics instead when
/// `TILEOPS_REQUIRE_GPU=1`, so a broken GPU setup cannot pass silently (the panic names the
/// calling test's line, not this one).
#[track_caller]
pub fn gpu_or_skip(test: &str) -> Option<Device> {
    match Device::cuda(0) {
        Ok(device) => {
            println!("{test}: on {device}");
            Some(device)
        }
        Err(err) if std::env::var("TILEOPS_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("TILEOPS_REQUIRE_GPU=1, but no GPU is usable: {err}")
        }
        Err(err) => {
            announce(&format!("SKIP: {test}: {err}"));
            None
        }
    }
}

/// A spec of `shape` and `dtype`.
pub fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype)
}

/// Worst-element bound on the relative error, per dtype: a few units of the output's rounding
/// (2^-24, 2^-11, 2^-8 relative) plus the f32 arithmetic of the kernel.
pub fn bound(dtype: DType) -> f64 {
    match dtype {
        DType::Float32 => 1e-5,
        DType::Float16 => 2e-3,
        _ => 1e-2,
    }
}

/// The dtype's smallest normal number: below it, errors are measured against it (subnormal
/// outputs only have absolute precision).
pub fn floor(dtype: DType) -> f64 {
    match dtype {
        DType::Float16 => 6.103_515_625e-5,
        _ => f64::from(f32::MIN_POSITIVE),
    }
}

/// The error of one element: `|got - want| / denom()` when both are finite; otherwise 0 when
/// they line up (both NaN, or the same infinity) and infinite when not.
pub fn element_error(got: f64, want: f64, denom: impl FnOnce() -> f64) -> f64 {
    if !got.is_finite() || !want.is_finite() {
        lined_up(got, want)
    } else {
        (got - want).abs() / denom()
    }
}

/// 0 when `got` and `want` line up (both NaN, or equal), infinite when not.
pub fn lined_up(got: f64, want: f64) -> f64 {
    if (got.is_nan() && want.is_nan()) || got == want {
        0.0
    } else {
        f64::INFINITY
    }
}

/// The worst of `error(i, got[i], want[i])` and its element (a NaN error counts as worst).
pub fn worst_by(
    got: &[f64],
    want: &[f64],
    mut error: impl FnMut(usize, f64, f64) -> f64,
) -> (f64, usize) {
    assert_eq!(got.len(), want.len());
    let mut worst = (0.0, 0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = error(i, g, w);
        if err > worst.0 || err.is_nan() {
            worst = (err, i);
        }
    }
    worst
}

/// Random input values, with some rows, columns or reduction sets overwritten by special values.
pub enum Special {
    None,
    /// Line/set 0 all -inf, 1 has a NaN, 2 has a +inf, 3 has a few -inf.
    NonFinite,
}

/// Random (standard normal) values of `spec` on `device`, with `special` written into the first
/// four of `lines` (flat indices).
pub fn make_input(
    spec: &TensorSpec,
    seed: u64,
    special: &Special,
    lines: &[Vec<usize>],
    device: &Device,
) -> Tensor {
    let random = Tensor::random(spec, seed, &Device::cpu()).expect("random input");
    let mut values = random.to_vec_f64().expect("float input");
    if let Special::NonFinite = special {
        for (line, indices) in lines.iter().enumerate().take(4) {
            match line {
                0 => indices.iter().for_each(|&i| values[i] = f64::NEG_INFINITY),
                1 => values[indices[indices.len() / 2]] = f64::NAN,
                2 => values[indices[indices.len() - 1]] = f64::INFINITY,
                _ => indices
                    .iter()
                    .step_by(3)
                    .for_each(|&i| values[i] = f64::NEG_INFINITY),
            }
        }
    }
    Tensor::from_f64_rounded(&values, spec, device).expect("input on the device")
}

/// The flat indices of each (log_)softmax line of `shape` along `axis` (the first `count`).
pub fn softmax_lines(shape: &[usize], axis: usize, count: usize) -> Vec<Vec<usize>> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    (0..(outer * inner).min(count))
        .map(|line| {
            let (o, i) = (line / inner, line % inner);
            (0..n).map(|k| o * n * inner + k * inner + i).collect()
        })
        .collect()
}

/// One row per case, the failures past [`bound`], and the worst error per op and dtype.
pub struct Report {
    /// Column widths of the op and case in the rows.
    op_width: usize,
    case_width: usize,
    rows: Vec<String>,
    failures: Vec<String>,
    worst: Vec<(String, DType, f64)>,
}

impl Report {
    pub fn new(op_width: usize, case_width: usize) -> Self {
        Report {
            op_width,
            case_width,
            rows: Vec::new(),
            failures: Vec::new(),
            worst: Vec::new(),
        }
    }

    /// One case: `err` is the worst error and its element of `got` against `want`.
    pub fn record(
        &mut self,
        op: &str,
        case: String,
        dtype: DType,
        err: (f64, usize),
        got: &[f64],
        want: &[f64],
    ) {
        let ok = err.0 <= bound(dtype);
        let (ow, cw) = (self.op_width, self.case_width);
        self.rows.push(format!(
            "{op:<ow$} {dtype:<9} {case:<cw$} worst rel err {:.3e} at {}",
            err.0, err.1
        ));
        if !ok {
            self.failures.push(format!(
                "{op} {dtype} {case}: relative error {:.3e} > {:.0e} at element {} (got {}, want {})",
                err.0,
                bound(dtype),
                err.1,
                got[err.1],
                want[err.1]
            ));
        }
        match self
            .worst
            .iter_mut()
            .find(|(o, d, _)| o == op && *d == dtype)
        {
            Some(entry) => entry.2 = entry.2.max(err.0),
            None => self.worst.push((op.to_owned(), dtype, err.0)),
        }
    }

    /// Prints the rows and the `WORST <op> <dtype>` lines; panics with every failure.
    pub fn finish(self) {
        for row in &self.rows {
            println!("{row}");
        }
        for (op, dtype, worst) in &self.worst {
            println!(
                "WORST {op} {dtype}: {worst:.3e} (bound {:.0e})",
                bound(*dtype)
            );
        }
        assert!(
            self.failures.is_empty(),
            "{} failures:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}
