//! The harness shared by the test files (`mod common;` in each): GPU acquisition with the
//! `SKIP: <test>: <reason>` line and `TILEOPS_REQUIRE_GPU=1`, the poison value, the per-dtype
//! bounds and floors, the element error measure, random inputs with special values, and the
//! per-case report with its `WORST <op> <dtype>` lines (scripts/gpu-check.sh greps both).

// Each test file is its own crate and uses only part of this module: without this, every item
// one of them leaves unused would be a dead-code warning there.
#![allow(dead_code)]

use std::io::Write;

use tileops::ops::reference as norm_act;
use tileops::ops::{Abs, Gelu, GeluApproximate, Neg, Relu, Sigmoid, Silu};
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

/// Waits for the device, then copies `tensor` back as f64.
pub fn download(device: &Device, tensor: &Tensor) -> Vec<f64> {
    device.synchronize().expect("kernel ran");
    tensor.to_vec_f64().expect("copy back")
}

/// Random (standard normal) values of `spec`, rounded to its dtype, with `specials` written at
/// their flat indices (those past the end are dropped), on `device`.
pub fn input_with(
    spec: &TensorSpec,
    seed: u64,
    specials: &[(usize, f64)],
    device: &Device,
) -> Tensor {
    let mut values = Tensor::random(spec, seed, &Device::cpu())
        .expect("random input")
        .to_vec_f64()
        .expect("float input");
    for &(i, v) in specials {
        if i < values.len() {
            values[i] = v;
        }
    }
    Tensor::from_f64_rounded(&values, spec, device).expect("input on the device")
}

/// The worst error of `got` against `want`, element `i` relative to
/// `max(|want|, scale[i], floor)` (`scale[i]`: the magnitude of the terms that sum to it, more
/// than `|want|` where terms cancel); infinite when NaN, infinities or the poison do not line up.
pub fn worst_error(got: &[f64], want: &[f64], scale: &[f64], dtype: DType) -> (f64, usize) {
    assert_eq!(got.len(), want.len());
    assert_eq!(scale.len(), want.len());
    worst_by(got, want, |i, g, w| {
        element_error(g, w, || w.abs().max(scale[i]).max(floor(dtype)))
    })
}

/// Worst of |got - want| / max(scale, floor); infinite when NaN, infinities or poison disagree.
pub fn worst_scaled(got: &[f64], want: &[f64], scale: &[f64], floor: f64) -> (f64, usize) {
    worst_by(got, want, |i, g, w| {
        element_error(g, w, || scale[i].max(floor))
    })
}

/// Row 0 all -inf, a NaN in row 1, a +inf at the end of row 2, every third element of row 3 -inf.
pub fn row_specials(rows: usize, n: usize) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    if rows > 0 {
        out.extend((0..n).map(|i| (i, f64::NEG_INFINITY)));
    }
    if rows > 1 {
        out.push((n + n / 2, f64::NAN));
    }
    if rows > 2 {
        out.push((3 * n - 1, f64::INFINITY));
    }
    if rows > 3 {
        out.extend((0..n).step_by(3).map(|i| (3 * n + i, f64::NEG_INFINITY)));
    }
    out
}

/// The flat indices of each reduction set of `shape` over `axes`, in output order (all of them).
pub fn reduction_sets(shape: &[usize], axes: &[usize]) -> Vec<Vec<usize>> {
    let numel: usize = shape.iter().product();
    let n: usize = axes.iter().map(|&a| shape[a]).product();
    let mut sets = vec![Vec::with_capacity(n); numel / n];
    for flat in 0..numel {
        let (mut rest, mut out, mut stride) = (flat, 0, 1);
        for d in (0..shape.len()).rev() {
            if !axes.contains(&d) {
                out += (rest % shape[d]) * stride;
                stride *= shape[d];
            }
            rest /= shape[d];
        }
        sets[out].push(flat);
    }
    sets
}

/// An activation's name and its f64 reference.
pub type Activation = (&'static str, fn(f64) -> f64);

pub const ACTIVATIONS: [Activation; 7] = [
    ("relu", norm_act::relu),
    ("gelu", norm_act::gelu_erf),
    ("gelu_tanh", norm_act::gelu_tanh),
    ("silu", norm_act::silu),
    ("sigmoid", norm_act::sigmoid),
    ("neg", norm_act::neg),
    ("abs", norm_act::abs),
];

/// Plans the activation `name` (one of [`ACTIVATIONS`]) for `spec` and runs it on `x` into `y`.
pub fn activation_forward(
    name: &str,
    device: &Device,
    spec: &TensorSpec,
    x: &Tensor,
    y: &mut Tensor,
) {
    let spec = spec.clone();
    match name {
        "relu" => Relu::new(spec, device).expect("plan").forward_into(x, y),
        "gelu" => Gelu::new(spec, GeluApproximate::None, device)
            .expect("plan")
            .forward_into(x, y),
        "gelu_tanh" => Gelu::new(spec, GeluApproximate::Tanh, device)
            .expect("plan")
            .forward_into(x, y),
        "silu" => Silu::new(spec, device).expect("plan").forward_into(x, y),
        "neg" => Neg::new(spec, device).expect("plan").forward_into(x, y),
        "abs" => Abs::new(spec, device).expect("plan").forward_into(x, y),
        _ => Sigmoid::new(spec, device).expect("plan").forward_into(x, y),
    }
    .expect("launch");
}

/// A cos/sin table of `rows` positions for rows of `width` (NeoX frequencies), as f32 values.
pub fn rope_table(rows: usize, width: usize) -> Vec<f64> {
    let half = width / 2;
    let mut t = vec![0.0; rows * width];
    for p in 0..rows {
        for i in 0..half {
            let angle = p as f64 * 10000f64.powf(-2.0 * i as f64 / width as f64);
            t[p * width + i] = f64::from(angle.cos() as f32);
            t[p * width + half + i] = f64::from(angle.sin() as f32);
        }
    }
    t
}

/// A code poisoned fp8 outputs start with (20.0: a valid value, so a skipped element is caught
/// unless its expected code happens to be this one).
pub const POISON_CODE: u8 = 0x5a;

/// How many codes apart two e4m3 codes are (0 when both are NaN, 255 when only one is).
pub fn code_distance(a: u8, b: u8) -> u32 {
    let nan = |c: u8| c & 0x7f == 0x7f;
    match (nan(a), nan(b)) {
        (true, true) => return 0,
        (true, false) | (false, true) => return 255,
        _ => {}
    }
    // Signed magnitudes on one line: -0 and +0 coincide.
    let line = |c: u8| {
        let m = i32::from(c & 0x7f);
        if c & 0x80 != 0 { -m } else { m }
    };
    line(a).abs_diff(line(b))
}

/// The largest [`code_distance`] of `got` from `want` and its element (the first of equals).
pub fn worst_codes(got: &[u8], want: &[u8]) -> (u32, usize) {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| code_distance(g, w))
        .enumerate()
        .fold(
            (0, 0),
            |best, (i, d)| if d > best.0 { (d, i) } else { best },
        )
}

/// The worst relative error of f32 scales (floored at f32's smallest normal number).
pub fn worst_scale_error(got: &[f32], want: &[f32]) -> (f64, usize) {
    let got: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
    let want: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
    let scale: Vec<f64> = want.iter().map(|w| w.abs()).collect();
    worst_scaled(&got, &want, &scale, f64::from(f32::MIN_POSITIVE))
}

/// Bound on `|got - want| / sum_k |a b|` for a product over `k`:
/// - the output's rounding, `u_out` relative to `|want| <= sum |a b|` (2^-24, 2^-11, 2^-8);
/// - f32 accumulation, at most about `k * 2^-24` in the worst order (split-K included), doubled
///   for safety (fp16 and bf16 products are exact in f32, so nothing else enters);
/// - TF32 only: each input rounded or truncated to 10 mantissa bits, `2 * 2^-10` per product.
pub fn gemm_bound(dtype: DType, tf32: bool, k: usize) -> f64 {
    let u32 = 2f64.powi(-24);
    let out = match dtype {
        DType::Float16 => 2f64.powi(-11),
        DType::BFloat16 => 2f64.powi(-8),
        _ => u32,
    };
    let inputs = if tf32 { 2.0 * 2f64.powi(-10) } else { 0.0 };
    out + inputs + 2.0 * k as f64 * u32
}

/// Which case a [`Measures`] report keeps per op, measure and dtype for its `WORST` line.
pub enum KeepWorst {
    /// The largest value, with the bound of the first case.
    Largest,
    /// The largest value relative to its own bound (gemm's grows with K), with that bound.
    RelativeToBound,
}

/// An fp8 result against its reference, for [`Measures::record_fp8`]: (codes, scales) got and
/// wanted, and the limits of the two measures.
pub struct Fp8Check<'a> {
    pub got: (&'a [u8], &'a [f32]),
    pub want: (&'a [u8], &'a [f32]),
    /// The largest code distance allowed (in steps of the e4m3 number line).
    pub code_steps: f64,
    /// The largest relative scale error allowed.
    pub scale_bound: f64,
}

/// Measures with a bound of their own (rope's error against the cancelling terms, fp8 codes and
/// scales, gemm's error against `sum |a b|`): one row per case, the failures, the worst value per
/// op, measure and dtype.
pub struct Measures {
    /// Column width of the case in the rows.
    case_width: usize,
    keep: KeepWorst,
    /// Digits after the point of the bound in the `WORST` lines.
    bound_digits: usize,
    rows: Vec<String>,
    failures: Vec<String>,
    worst: Vec<(String, DType, f64, f64)>,
}

impl Measures {
    pub fn new(case_width: usize, keep: KeepWorst, bound_digits: usize) -> Self {
        Measures {
            case_width,
            keep,
            bound_digits,
            rows: Vec::new(),
            failures: Vec::new(),
            worst: Vec::new(),
        }
    }

    /// One fp8 result as two measures: `codes`, the worst [`code_distance`] (at most
    /// `check.code_steps`), and `scale`, the worst relative scale error (at most
    /// `check.scale_bound`). The worst code's detail gives both codes and their values, after
    /// `input(i)` (a description of element `i`'s input, or nothing).
    pub fn record_fp8(
        &mut self,
        op: &str,
        case: &str,
        dtype: DType,
        check: Fp8Check<'_>,
        input: impl Fn(usize) -> String,
    ) {
        let (got_codes, got_scales) = check.got;
        let (want_codes, want_scales) = check.want;
        let (steps, i) = worst_codes(got_codes, want_codes);
        let detail = format!(
            "{}got {:#04x} = {}, want {:#04x} = {}",
            input(i),
            got_codes[i],
            norm_act::fp8_e4m3_value(got_codes[i]),
            want_codes[i],
            norm_act::fp8_e4m3_value(want_codes[i])
        );
        let codes = (f64::from(steps), i);
        self.record(op, case, dtype, "codes", codes, check.code_steps, detail);
        let e = worst_scale_error(got_scales, want_scales);
        let detail = format!("got {}, want {}", got_scales[e.1], want_scales[e.1]);
        self.record(op, case, dtype, "scale", e, check.scale_bound, detail);
    }

    /// One case: `what` names the measure, `err` its worst value at an element, `bound` its limit.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        op: &str,
        case: &str,
        dtype: DType,
        what: &str,
        err: (f64, usize),
        bound: f64,
        detail: String,
    ) {
        let cw = self.case_width;
        self.rows.push(format!(
            "{op:<17} {dtype:<9} {case:<cw$} worst {what} {:.3e} at {}",
            err.0, err.1
        ));
        if err.0.is_nan() || err.0 > bound {
            self.failures.push(format!(
                "{op} {dtype} {case}: {what} {:.3e} > {bound:.0e} at element {} ({detail})",
                err.0, err.1
            ));
        }
        let ratio = |err: f64, bound: f64| {
            if err == 0.0 {
                0.0
            } else if bound > 0.0 {
                err / bound
            } else {
                f64::INFINITY
            }
        };
        let key = format!("{op} {what}");
        let entry = self
            .worst
            .iter_mut()
            .find(|(k, d, _, _)| *k == key && *d == dtype);
        match (entry, &self.keep) {
            (Some(entry), KeepWorst::Largest) => entry.2 = entry.2.max(err.0),
            (Some(entry), KeepWorst::RelativeToBound) => {
                if ratio(err.0, bound) > ratio(entry.2, entry.3) {
                    (entry.2, entry.3) = (err.0, bound);
                }
            }
            (None, _) => self.worst.push((key, dtype, err.0, bound)),
        }
    }

    /// Prints the rows and the `WORST <op> <dtype>` lines; panics with every failure.
    pub fn finish(self) {
        for row in &self.rows {
            println!("{row}");
        }
        let digits = self.bound_digits;
        for (key, dtype, worst, bound) in &self.worst {
            let (op, what) = key.split_once(' ').unwrap_or((key, ""));
            println!("WORST {op} {dtype}: {what} {worst:.3e} (bound {bound:.digits$e})");
        }
        assert!(
            self.failures.is_empty(),
            "{} failures:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}
