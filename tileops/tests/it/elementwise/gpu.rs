//! The activations (gelu, relu, sigmoid, silu) and silu_and_mul on the GPU against the f64
//! reference: every op x dtype x shape (edge cases included) on fresh random inputs, outputs
//! poisoned first so that an element the kernel never writes shows up.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one row per case and a `WORST <op> <dtype>` line.

use crate::common::{
    ACTIVATIONS, DTYPES, POISON, Report, activation_forward, download, gpu_or_skip,
};
use crate::common::{input_with, worst_error};
use crate::normalization::gpu::layer_norm::{label, relative};
use tileops::ops::reference;
use tileops::ops::{Relu, SiluAndMul};
use tileops::{DType, Device, Tensor, TensorSpec};

/// Scattered special values for elementwise inputs: NaN, infinities, signed zeros, the far tails.
fn scattered_specials(len: usize) -> Vec<(usize, f64)> {
    let values = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        -100.0,
        100.0,
        -30.0,
        12.0,
    ];
    (0..values.len())
        .map(|k| ((k * 7919 + 3) % len.max(1), values[k]))
        .collect()
}

/// The deep negative tail, where the f32 denominators `1 + exp(-x)` of sigmoid, silu and
/// silu_and_mul cross 2^126 (`__fdividef` would return 0 from there) and then overflow (the
/// results become signed zeros, as PyTorch's): x = -87, the f32 values either side of
/// `ln(2^126)` and of `ln(f32::MAX)`, -88.5, -88.8, -89, -100, -inf.
const TAIL: [f64; 12] = [
    -87.0,
    -87.3365,
    -87.3366,
    -88.0,
    -88.5,
    -88.72283_f32 as f64,
    -88.72284_f32 as f64,
    -88.8,
    -89.0,
    -100.0,
    -1e30,
    f64::NEG_INFINITY,
];

/// gelu_tanh's own tail: where `0.5 x (1 + tanh(u))` would cancel, and the f32 values either
/// side of where the kernel's `1 + exp(-2u)` overflows (-0 from the second on).
const GELU_TANH_TAIL: [f64; 4] = [-6.0, -8.0, -10.060965538024902, -10.060966491699219];

/// The tail values an activation's inputs get: [`TAIL`], and [`GELU_TANH_TAIL`] for gelu_tanh.
fn tail_values(name: &str) -> Vec<f64> {
    let extra: &[f64] = if name == "gelu_tanh" {
        &GELU_TANH_TAIL
    } else {
        &[]
    };
    TAIL.iter().chain(extra).copied().collect()
}

/// [`tail_values`] at every third element from the middle of an input of `len`, so that they
/// land in whole vectors and (from 4096 elements on) clear of [`scattered_specials`]; none for
/// inputs shorter than 64 (their few elements keep the scattered specials).
fn tail_specials(len: usize, name: &str) -> Vec<(usize, f64)> {
    if len < 64 {
        return Vec::new();
    }
    tail_values(name)
        .into_iter()
        .enumerate()
        .map(|(j, v)| (len / 2 + 3 * j, v))
        .collect()
}

/// [`TAIL`] in the gates of a SwiGLU input of `rows` x `2n`: gate element j (row-major over the
/// gates) from the middle row on, each times a random `up`.
fn gate_tail_specials(rows: usize, n: usize) -> Vec<(usize, f64)> {
    let first = rows / 2 * n;
    TAIL.iter()
        .enumerate()
        .map(|(j, &v)| (first + j, v))
        .take_while(|&(g, _)| g < rows * n)
        .map(|(g, v)| ((g / n) * 2 * n + g % n, v))
        .collect()
}

/// Panics unless every value of `tail`, rounded to the dtype of `x`, is in `x`.
fn assert_holds_tail(x: &Tensor, tail: &[f64]) {
    let spec = TensorSpec::new([tail.len()], x.dtype());
    let rounded = Tensor::from_f64_rounded(tail, &spec, &Device::cpu())
        .expect("rounded tail")
        .to_vec_f64()
        .expect("rounded tail");
    let xs = x.to_vec_f64().expect("x");
    for v in rounded {
        assert!(xs.contains(&v), "the input lacks the tail value {v}");
    }
}

/// Elementwise shapes: shorter than one vector, odd, one row, many blocks; [`beyond_one_wave`]
/// adds the shape that makes the grid-stride loop wrap.
const ACT_CASES: &[&[usize]] = &[&[1], &[7], &[3, 33], &[1, 4096], &[257, 1001], &[1, 14336]];

/// A `[rows, 2300]` shape with about 9% more elements than one full wave of blocks covers on
/// `device`, in every dtype, so that the grid-stride loop wraps: an SM holds at most 2048 threads,
/// each taking 4 vectors of 16 bytes (8 elements of a 16-bit dtype) per pass, so one wave covers at
/// most `SMs x 65,536` elements. Sized from the device's SM count (132 on an H200: 4,100 rows),
/// not fixed, so that it wraps on a larger GPU too, and stays small on an emulated device with few
/// SMs (scripts/emu-check.sh's second pass runs with 16).
fn beyond_one_wave(device: &Device) -> Vec<usize> {
    let sms = device.sm_count().expect("a CUDA device") as usize;
    vec![(sms * 65_536 * 109 / 100).div_ceil(2300), 2300]
}

/// Every activation in every dtype over [`ACT_CASES`] (and, `with_big`, the shape of
/// [`beyond_one_wave`], a device's own: the family test's), against the f64 reference.
pub(crate) fn activation_cases(device: &Device, with_big: bool) -> Report {
    let mut report = Report::new(22, 30);
    let mut seed = 3000;
    let mut shapes: Vec<Vec<usize>> = ACT_CASES.iter().map(|shape| shape.to_vec()).collect();
    if with_big {
        shapes.push(beyond_one_wave(device));
    }
    for (name, f) in ACTIVATIONS {
        for dtype in DTYPES {
            for shape in &shapes {
                let shape = shape.as_slice();
                seed += 1;
                let spec = TensorSpec::new(shape, dtype);
                // The tail first: the scattered specials win where the two meet.
                let mut specials = tail_specials(spec.numel().unwrap(), name);
                specials.extend(scattered_specials(spec.numel().unwrap()));
                let x = input_with(&spec, seed, &specials, device);
                if spec.numel().unwrap() >= 4096 {
                    assert_holds_tail(&x, &tail_values(name));
                }
                let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
                activation_forward(name, device, &spec, &x, &mut y);
                let got = download(device, &y);
                let want: Vec<f64> = x.to_vec_f64().expect("x").into_iter().map(f).collect();
                let err = worst_error(&got, &want, &relative(&want), dtype);
                report.record(name, label(shape, true), dtype, err, &got, &want);
            }
        }
    }
    report
}

/// The distance in ulps between two non-NaN 16-bit floats given by their bits (f16 and bf16 are
/// both sign-magnitude, so magnitudes order as integers; -0 and +0 coincide).
fn ulps16(a: u16, b: u16) -> u32 {
    let line = |c: u16| {
        let m = i32::from(c & 0x7fff);
        if c & 0x8000 != 0 { -m } else { m }
    };
    line(a).abs_diff(line(b))
}

/// The worst distance in ulps between a 16-bit output `y` and the f64 reference `want` rounded to
/// `y`'s dtype, where it is, and `y`'s value there: NaN must be NaN exactly where the reference is
/// (else the distance is `u32::MAX`).
fn worst_ulps16(y: &Tensor, want: &[f64]) -> (u32, usize, f64) {
    let word = |b: &[u8], i: usize| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]);
    let got_bits = y.to_bytes().expect("download");
    let got = y.to_vec_f64().expect("download");
    let want_bits = Tensor::from_f64_rounded(want, y.spec(), &Device::cpu())
        .and_then(|t| t.to_bytes())
        .expect("the reference, rounded");
    let (mut worst, mut at) = (0, 0);
    for i in 0..want.len() {
        let d = match (got[i].is_nan(), want[i].is_nan()) {
            (true, true) => 0,
            (false, false) => ulps16(word(&got_bits, i), word(&want_bits, i)),
            _ => u32::MAX,
        };
        if d > worst {
            (worst, at) = (d, i);
        }
    }
    (worst, at, got[at])
}

/// gelu (both forms), silu and sigmoid on every f16 and every bf16 value (all 65,536 bit
/// patterns: zeros, subnormals, the far tails where 1 + exp(-x) overflows, +-inf, NaN) against the
/// f64 reference rounded to the dtype: at most 1 ulp apart, NaN exactly where the reference is
/// NaN. The 16-bit kernels evaluate them with approximations (activation.cu: gelu_erf_fast, one
/// exp for erfc; ex2.approx and div.full.f32 for the others); this is their exhaustive accuracy
/// check. On the GPU ex2, rcp and div.full are approximate (relative errors ~2^-22, far under
/// the 2^-9 and 2^-12 of these dtypes' half ulps, so at most a rounding-boundary case moves by
/// one ulp); the emulator computes them in f32 on the CPU.
#[test]
fn transcendental_activations_are_within_an_ulp_on_every_16_bit_input() {
    let Some(gpu) =
        gpu_or_skip("transcendental_activations_are_within_an_ulp_on_every_16_bit_input")
    else {
        return;
    };
    for (name, f) in ACTIVATIONS {
        if !["gelu", "gelu_tanh", "silu", "sigmoid"].contains(&name) {
            continue;
        }
        for dtype in [DType::Float16, DType::BFloat16] {
            let spec = TensorSpec::new([1 << 16], dtype);
            let bits: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
            let x = Tensor::from_bytes(&bits, &spec, &gpu).expect("every bit pattern");
            let mut y = Tensor::full(&spec, POISON, &gpu).expect("poisoned output");
            activation_forward(name, &gpu, &spec, &x, &mut y);
            let xs = x.to_vec_f64().expect("x");
            let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
            let (worst, at, got_at) = worst_ulps16(&y, &want);
            println!("{name} {dtype}: worst {worst} ulp at x = {}", xs[at]);
            assert!(
                worst <= 1,
                "{name} {dtype}: {worst} ulp from the correctly rounded value at x = {} (bits \
                 {at:#06x}): got {got_at}, want {}",
                xs[at],
                want[at]
            );
        }
    }
}

/// silu_and_mul with every f16 and every bf16 gate (all 65,536 bit patterns: zeros, subnormals,
/// the deep negative tail -88...-100 and beyond where the f32 `1 + exp(-g)` overflows, +-inf,
/// NaN), each against several `up` values (exact and inexact, large and small, both signs),
/// against the f64 reference rounded to the dtype: at most 1 ulp apart, NaN exactly where the
/// reference is NaN. The 16-bit kernels take exp as ex2.approx and the division as div.full.f32
/// (silu_and_mul.cu); this is their exhaustive accuracy check, as
/// [`transcendental_activations_are_within_an_ulp_on_every_16_bit_input`] is the activations'.
#[test]
fn silu_and_mul_is_within_an_ulp_on_every_16_bit_gate() {
    let Some(gpu) = gpu_or_skip("silu_and_mul_is_within_an_ulp_on_every_16_bit_gate") else {
        return;
    };
    const UPS: [f64; 7] = [1.0, -1.0, 0.3, -7.25, 1e-3, 300.0, -0.0625];
    let n = 1usize << 16;
    let rows = 3;
    for dtype in [DType::Float16, DType::BFloat16] {
        // Row r: the gates 0x0000..=0xffff, then up[j] = UPS[(j + r) % 7], rounded to the dtype.
        let ups: Vec<f64> = (0..rows * n)
            .map(|k| UPS[(k % n + k / n) % UPS.len()])
            .collect();
        let up_bytes =
            Tensor::from_f64_rounded(&ups, &TensorSpec::new([rows * n], dtype), &Device::cpu())
                .and_then(|t| t.to_bytes())
                .expect("the up values, rounded");
        let mut bytes = Vec::with_capacity(rows * 4 * n);
        for r in 0..rows {
            bytes.extend((0..=u16::MAX).flat_map(u16::to_le_bytes));
            bytes.extend_from_slice(&up_bytes[r * 2 * n..(r + 1) * 2 * n]);
        }
        let spec = TensorSpec::new([rows, 2 * n], dtype);
        let x = Tensor::from_bytes(&bytes, &spec, &gpu).expect("every gate bit pattern");
        let op = SiluAndMul::new(spec, &gpu).expect("valid plan");
        let mut y = Tensor::full(op.y(), POISON, &gpu).expect("poisoned output");
        op.forward_into(&x, &mut y).expect("launch");
        let xs = x.to_vec_f64().expect("x");
        let want = reference::silu_and_mul(&xs, n);
        let (worst, at, got_at) = worst_ulps16(&y, &want);
        let (g, u) = (xs[at / n * 2 * n + at % n], xs[at / n * 2 * n + n + at % n]);
        println!("silu_and_mul {dtype}: worst {worst} ulp at gate {g}, up {u}");
        assert!(
            worst <= 1,
            "silu_and_mul {dtype}: {worst} ulp from the correctly rounded value at gate {g}, up \
             {u}: got {got_at}, want {}",
            want[at]
        );
    }
}

/// SwiGLU inputs `[rows, 2N]`: N of one element, odd N (scalar kernel), N a whole number of
/// vectors in f32 only, in every dtype, the Llama-8B width, more rows than the grid's y extent.
const SWIGLU_CASES: &[&[usize]] = &[
    &[1, 2],
    &[3, 14],
    &[4, 8],
    &[5, 16],
    &[37, 8200],
    &[2, 3, 64],
    &[16, 28672],
    &[70000, 16],
];

pub(crate) fn silu_and_mul_cases(device: &Device) -> Report {
    let mut report = Report::new(22, 30);
    let mut seed = 4000;
    for dtype in DTYPES {
        for &shape in SWIGLU_CASES {
            seed += 1;
            let spec = TensorSpec::new(shape, dtype);
            let op = SiluAndMul::new(spec.clone(), device).expect("valid plan");
            let n = shape[shape.len() - 1] / 2;
            let rows = spec.numel().unwrap() / (2 * n);
            // The tail in the gates first: the scattered specials win where the two meet.
            let mut specials = gate_tail_specials(rows, n);
            specials.extend(scattered_specials(spec.numel().unwrap()));
            let x = input_with(&spec, seed, &specials, device);
            if spec.numel().unwrap() >= 4096 {
                assert_holds_tail(&x, &TAIL);
            }
            let mut y = Tensor::full(op.y(), POISON, device).expect("poisoned output");
            op.forward_into(&x, &mut y).expect("launch");
            let got = download(device, &y);
            let want = reference::silu_and_mul(&x.to_vec_f64().expect("x"), n);
            let err = worst_error(&got, &want, &relative(&want), dtype);
            report.record("silu_and_mul", label(shape, true), dtype, err, &got, &want);
        }
    }
    report
}

#[test]
fn activations_match_the_reference() {
    let Some(gpu) = gpu_or_skip("activations_match_the_reference") else {
        return;
    };
    activation_cases(&gpu, true).finish();
}

#[test]
fn silu_and_mul_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("silu_and_mul_matches_the_reference") else {
        return;
    };
    silu_and_mul_cases(&gpu).finish();
}

#[test]
fn gpu_plans_reject_cpu_tensors() {
    let Some(gpu) = gpu_or_skip("gpu_plans_reject_cpu_tensors") else {
        return;
    };
    let spec = TensorSpec::new([4, 8], DType::Float32);
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let err = Relu::new(spec.clone(), &gpu)
        .expect("valid plan")
        .forward(&on_cpu)
        .expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
    let err = SiluAndMul::new(spec, &gpu)
        .expect("valid plan")
        .forward(&on_cpu)
        .expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}
