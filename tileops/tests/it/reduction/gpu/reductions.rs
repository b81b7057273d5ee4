//! log_softmax, sum, mean, amax and logsumexp x dtype x shape on the GPU against the f64
//! reference, on fresh random inputs, with the output poisoned first so that an element the kernel
//! never writes shows up. The shapes cover every kernel layout: last-dim rows (lengths 1, odd,
//! 4096, 32768, 102400), a middle block of dims (scalar and 16-byte columns) and strided sets of
//! dims, with rows of only -inf, NaN and +inf.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead, so a broken GPU setup cannot pass silently. `-- --nocapture` prints the worst
//! relative error per op and dtype (`WORST <op> <dtype>`).

use crate::common::{DTYPES, POISON, Report, Special, bound, gpu_or_skip, make_input};
use crate::common::{reduction_sets, softmax_lines, worst_error};
use tileops::ops::reference::{self as reference_reduction, ReduceKind};
use tileops::ops::{Amax, LogSoftmax, Logsumexp, Mean, ReduceDim, Softmax, Sum};
use tileops::{DType, Device, Tensor, TensorSpec};

const KINDS: [ReduceKind; 4] = [
    ReduceKind::Sum,
    ReduceKind::Mean,
    ReduceKind::Amax,
    ReduceKind::Logsumexp,
];

#[test]
fn log_softmax_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("log_softmax_matches_the_reference") else {
        return;
    };
    log_softmax_cases(&gpu).finish();
}

#[test]
fn reductions_match_the_reference() {
    let Some(gpu) = gpu_or_skip("reductions_match_the_reference") else {
        return;
    };
    reduction_cases(&gpu).finish();
}

/// The harness itself, on the CPU: correctly rounded outputs must pass every bound (so the
/// bounds are not too tight for the best possible kernel), and a poisoned or wrong element must
/// fail.
#[test]
fn harness_accepts_correctly_rounded_outputs_and_catches_poison() {
    log_softmax_cases(&Device::cpu()).finish();
    reduction_cases(&Device::cpu()).finish();
    let want = [0.25, f64::NAN, f64::NEG_INFINITY];
    let scale = [0.0; 3];
    assert_eq!(
        worst_error(
            &[0.25, f64::NAN, f64::NEG_INFINITY],
            &want,
            &scale,
            DType::Float32
        )
        .0,
        0.0
    );
    assert!(
        worst_error(
            &[POISON, f64::NAN, f64::NEG_INFINITY],
            &want,
            &scale,
            DType::Float32
        )
        .0 > bound(DType::Float32)
    );
    assert!(
        worst_error(&[0.25, f64::NAN, POISON], &want, &scale, DType::BFloat16)
            .0
            .is_infinite()
    );
    assert!(
        worst_error(
            &[0.25 + 1e-3, f64::NAN, f64::NEG_INFINITY],
            &want,
            &scale,
            DType::Float32
        )
        .0 > bound(DType::Float32)
    );
    // A cancelling sum is measured against the size of its terms.
    assert!(worst_error(&[1e-7], &[0.0], &[1.0], DType::Float32).0 < bound(DType::Float32));
}

fn special_label(special: &Special) -> &'static str {
    if matches!(special, Special::NonFinite) {
        " +inf/nan"
    } else {
        ""
    }
}

fn log_softmax_cases(device: &Device) -> Report {
    let cases: &[(&[usize], i64, Special)] = &[
        (&[1, 1], -1, Special::None),
        (&[37, 1], -1, Special::None),
        (&[3, 7], -1, Special::None),
        (&[5, 33], -1, Special::NonFinite),
        (&[300, 64], -1, Special::None),
        (&[16, 4096], -1, Special::NonFinite),
        (&[3, 4097], -1, Special::None),
        (&[2, 32768], -1, Special::None),
        (&[4, 102400], -1, Special::NonFinite),
        (&[2, 131072], -1, Special::None),
        (&[3, 70001], -1, Special::None),
        (&[4, 33, 5], 1, Special::NonFinite),
        (&[4, 6, 16], 1, Special::NonFinite),
        (&[6, 2, 8], 0, Special::None),
        (&[2, 3, 4, 5], -2, Special::None),
    ];
    let mut report = Report::new(11, 40);
    let mut seed = 900;
    for dtype in DTYPES {
        for (shape, dim, special) in cases {
            seed += 1;
            let spec = TensorSpec::new(*shape, dtype);
            let op = LogSoftmax::new(spec.clone(), *dim, device).expect("valid plan");
            let axis = dim.rem_euclid(shape.len() as i64) as usize;
            let x = make_input(&spec, seed, special, &softmax_lines(shape, axis, 4), device);
            let mut y = Tensor::full(&spec, POISON, device).expect("poisoned output");
            op.forward_into(&x, &mut y).expect("launch");
            device.synchronize().expect("kernel ran");
            let got = y.to_vec_f64().expect("copy back");
            let xs = x.to_vec_f64().expect("copy back");
            let (outer, n) = (shape[..axis].iter().product(), shape[axis]);
            let want =
                reference_reduction::log_softmax(&xs, outer, n, shape[axis + 1..].iter().product());
            // Log-probabilities: f32 arithmetic resolves them to an absolute error, not a
            // relative one, near 0.
            let err = worst_error(&got, &want, &vec![1.0; want.len()], dtype);
            let label = format!("{shape:?} dim={dim}{}", special_label(special));
            report.record("log_softmax", label, dtype, err, &got, &want);
        }
    }
    report
}

/// Rows far from 0 (float32, an offset plus standard normal noise), where the kernels' exp of
/// x - max as 2^(x log2 e - max log2 e) matters: the rounding of max log2 e scales every exp of
/// a row by one factor 2^e (|e| up to 2^-12 at an offset of 3000, 2^-9 at 30000). Softmax's
/// ratio cancels it, log_softmax subtracts it from log(sum), the split rows' partial sums divide
/// it out (both of its branches: |e ln 2| under and over 2^-12); uncorrected, log_softmax is off
/// by up to 1e-3 here, a hundred times its bound. Rows of 4096 stay in registers, rows of
/// 102400 take the partial and finalize kernels.
#[test]
fn rows_far_from_zero_keep_their_accuracy() {
    let Some(gpu) = gpu_or_skip("rows_far_from_zero_keep_their_accuracy") else {
        return;
    };
    let mut report = Report::new(11, 40);
    let mut seed = 7000;
    for (rows, n) in [(3, 4096), (2, 102_400)] {
        for offset in [3000.0, -30_000.0, 30_000.0] {
            seed += 1;
            let spec = TensorSpec::new([rows, n], DType::Float32);
            let noise = Tensor::random(&spec, seed, &Device::cpu())
                .and_then(|t| t.to_vec_f64())
                .expect("random noise");
            let shifted: Vec<f64> = noise.iter().map(|v| offset + v).collect();
            let x = Tensor::from_f64_rounded(&shifted, &spec, &gpu).expect("upload");
            let xs = x.to_vec_f64().expect("copy back");
            let label = format!("[{rows}, {n}] {offset:+}");

            let softmax = Softmax::new(spec.clone(), -1, &gpu).expect("valid plan");
            let got = softmax.forward(&x).and_then(|y| y.to_vec_f64());
            let got = got.expect("softmax");
            let want = reference_reduction::softmax(&xs, rows, n, 1);
            let err = worst_error(&got, &want, &vec![0.0; want.len()], DType::Float32);
            report.record("softmax", label.clone(), DType::Float32, err, &got, &want);

            let log_softmax = LogSoftmax::new(spec.clone(), -1, &gpu).expect("valid plan");
            let got = log_softmax.forward(&x).and_then(|y| y.to_vec_f64());
            let got = got.expect("log_softmax");
            let want = reference_reduction::log_softmax(&xs, rows, n, 1);
            let err = worst_error(&got, &want, &vec![1.0; want.len()], DType::Float32);
            report.record(
                "log_softmax",
                label.clone(),
                DType::Float32,
                err,
                &got,
                &want,
            );

            let (got, _) =
                run_reduction(ReduceKind::Logsumexp, &gpu, &x, &ReduceDim::One(-1), false);
            let want = reference_reduction::reduce(&xs, &[rows, n], &[1], ReduceKind::Logsumexp);
            let err = worst_error(&got, &want, &vec![1.0; want.len()], DType::Float32);
            report.record("logsumexp", label, DType::Float32, err, &got, &want);
        }
    }
    report.finish();
}

/// Plans `kind` and runs it on `x` into a poisoned output; returns the output values and the
/// normalized axes.
fn run_reduction(
    kind: ReduceKind,
    device: &Device,
    x: &Tensor,
    dim: &ReduceDim,
    keepdim: bool,
) -> (Vec<f64>, Vec<usize>) {
    let spec = x.spec().clone();
    macro_rules! run {
        ($op:ident) => {{
            let op = $op::new(spec, dim.clone(), keepdim, device).expect("valid plan");
            let mut y = Tensor::full(op.y(), POISON, device).expect("poisoned output");
            op.forward_into(x, &mut y).expect("launch");
            device.synchronize().expect("kernel ran");
            (y.to_vec_f64().expect("copy back"), op.axes().to_vec())
        }};
    }
    match kind {
        ReduceKind::Sum => run!(Sum),
        ReduceKind::Mean => run!(Mean),
        ReduceKind::Amax => run!(Amax),
        ReduceKind::Logsumexp => run!(Logsumexp),
    }
}

fn reduction_cases(device: &Device) -> Report {
    use ReduceDim::{Many, One};
    let cases: Vec<(&[usize], ReduceDim, bool, Special)> = vec![
        // Rows: the reduced dims trailing. Fewer than 2 rows per SM with at least 1024
        // vectors per row take the split kernels ([2, 32768], [4, 102400], f32 [16, 4096]).
        (&[1, 1], One(-1), false, Special::None),
        (&[37, 1], One(-1), false, Special::None),
        (&[3, 7], One(-1), true, Special::None),
        (&[5, 33], One(-1), false, Special::NonFinite),
        (&[300, 64], One(1), false, Special::None),
        // Enough rows for one block per row, with several warps per row.
        (&[300, 2048], One(1), false, Special::NonFinite),
        // Many rows past logsumexp's register kernel (float32: 4097 vectors) take the split
        // kernels; 16-bit rows of 2048 vectors fill 256 threads of it.
        (&[264, 16391], One(-1), false, Special::NonFinite),
        (&[16, 4096], One(-1), false, Special::NonFinite),
        (&[3, 4097], One(-1), false, Special::None),
        (&[2, 32768], One(-1), true, Special::None),
        (&[4, 102400], One(1), false, Special::NonFinite),
        (&[3, 4, 5], Many(vec![0, 1, 2]), false, Special::None),
        (&[6, 1, 8], Many(vec![1]), false, Special::None),
        (&[6, 5, 9], Many(vec![-1, -2]), true, Special::NonFinite),
        // Cols: one block of reduced dims between kept ones; [64, 48] and [300, 40] over dim 0
        // have few columns and take the split kernels.
        (&[4, 33, 5], One(1), false, Special::NonFinite),
        (&[4, 6, 16], One(1), true, Special::NonFinite),
        (&[64, 48], One(0), false, Special::None),
        (&[300, 40], One(0), true, Special::NonFinite),
        (&[2, 3, 4, 5], Many(vec![1, 2]), false, Special::None),
        // Runs: several blocks of reduced dims, the innermost reduced and at least 128 bytes
        // long (a misaligned odd run; three outer reduced dims; few long runs cut into chunks).
        (&[4, 12, 100], Many(vec![0, 2]), true, Special::NonFinite),
        (&[2, 3, 2, 5, 64], Many(vec![0, 2, 4]), false, Special::None),
        (&[3, 2, 9001], Many(vec![0, 2]), false, Special::NonFinite),
        // Strided: several blocks of reduced dims, short runs or a kept innermost dim.
        (&[4, 12, 40], Many(vec![0, 2]), true, Special::NonFinite),
        (&[3, 5, 2, 40], Many(vec![0, 2]), false, Special::None),
        (&[2, 3, 4, 5], Many(vec![0, 3]), false, Special::None),
        (
            &[3, 2, 5, 2, 7],
            Many(vec![0, 2, 4]),
            false,
            Special::NonFinite,
        ),
    ];
    let mut report = Report::new(11, 40);
    let mut seed = 1300;
    for kind in KINDS {
        for dtype in DTYPES {
            for (shape, dim, keepdim, special) in &cases {
                seed += 1;
                let spec = TensorSpec::new(*shape, dtype);
                let rank = shape.len() as i64;
                let mut axes: Vec<usize> = dim
                    .dims()
                    .iter()
                    .map(|d| d.rem_euclid(rank) as usize)
                    .collect();
                axes.sort_unstable();
                let sets = reduction_sets(shape, &axes);
                let x = make_input(&spec, seed, special, &sets, device);
                let (got, planned_axes) = run_reduction(kind, device, &x, dim, *keepdim);
                assert_eq!(planned_axes, axes);
                let xs = x.to_vec_f64().expect("copy back");
                let want = reference_reduction::reduce(&xs, shape, &axes, kind);
                let scale: Vec<f64> = sets
                    .iter()
                    .map(|set| {
                        let abs: f64 = set.iter().map(|&i| xs[i].abs()).sum();
                        match kind {
                            ReduceKind::Sum => abs,
                            ReduceKind::Mean => abs / set.len() as f64,
                            ReduceKind::Amax => 0.0,
                            ReduceKind::Logsumexp => 1.0,
                        }
                    })
                    .collect();
                let err = worst_error(&got, &want, &scale, dtype);
                let label = format!(
                    "{shape:?} dim={dim}{}{}",
                    if *keepdim { " keepdim" } else { "" },
                    special_label(special)
                );
                report.record(kind.name(), label, dtype, err, &got, &want);
            }
        }
    }
    report
}

#[test]
fn gpu_plans_reject_cpu_tensors() {
    let Some(gpu) = gpu_or_skip("gpu_plans_reject_cpu_tensors") else {
        return;
    };
    let spec = TensorSpec::new([4, 8], DType::Float32);
    let op = Sum::new(spec.clone(), -1, false, &gpu).expect("valid plan");
    let on_cpu = Tensor::random(&spec, 1, &Device::cpu()).expect("cpu tensor");
    let err = op.forward(&on_cpu).expect_err("device mismatch");
    assert!(err.to_string().contains("cuda:0"), "{err}");
}

#[test]
fn forward_allocates_and_round_trips() {
    let Some(gpu) = gpu_or_skip("forward_allocates_and_round_trips") else {
        return;
    };
    let x = Tensor::from_f32_slice(&[0.0, 0.0, 1.0, 2.0, 3.0, 4.0], [2, 3], &gpu).expect("upload");
    let spec = x.spec().clone();
    let sum = Sum::new(spec.clone(), [0, 1], true, &gpu).expect("valid plan");
    let y = sum.forward(&x).expect("forward");
    assert_eq!(y.shape(), &[1, 1]);
    assert_eq!(y.to_vec_f32().expect("download"), vec![10.0]);
    let lse = Logsumexp::new(spec, -1, false, &gpu).expect("valid plan");
    let y = lse
        .forward(&x)
        .expect("forward")
        .to_vec_f32()
        .expect("download");
    // Rows [0, 0, 1] and [2, 3, 4]: ln(e^0 + e^0 + e^1) = ln(2 + e) and
    // ln(e^2 + e^3 + e^4) = 4 + ln(1 + e^-1 + e^-2).
    let e = std::f64::consts::E;
    let want = [(2.0 + e).ln(), 4.0 + (1.0 + 1.0 / e + 1.0 / (e * e)).ln()];
    assert_eq!(y.len(), 2, "{y:?}");
    assert!(
        (f64::from(y[0]) - want[0]).abs() < 1e-6,
        "{y:?}, want {want:?}"
    );
    assert!(
        (f64::from(y[1]) / want[1] - 1.0).abs() < 1e-6,
        "{y:?}, want {want:?}"
    );
}
