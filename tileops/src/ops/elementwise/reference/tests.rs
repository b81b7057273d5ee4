//! Unit tests of the elementwise references.

use super::*;

#[test]
fn erfc_matches_known_values() {
    // erfc at 0.5, 1, 2, 2.9, 3.1, 5, 10 (Python's math.erfc).
    let known = [
        (0.5, 0.4795001221869535),
        (1.0, 0.15729920705028513),
        (2.0, 0.004677734981047265),
        (2.9, 4.109787809945886e-05),
        (3.1, 1.1648657367199589e-05),
        (5.0, 1.5374597944280351e-12),
        (10.0, 2.088487583762545e-45),
    ];
    for (x, want) in known {
        let got = erfc(x);
        assert!(
            (got / want - 1.0).abs() < 1e-12,
            "erfc({x}) = {got}, want {want}"
        );
        assert!((erfc(-x) - (2.0 - want)).abs() < 1e-15);
    }
    assert_eq!(erfc(0.0), 1.0);
    assert!(erfc(f64::NAN).is_nan());
}

#[test]
fn activations_at_special_values() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    assert!(relu(nan).is_nan());
    assert_eq!(relu(-inf), 0.0);
    assert_eq!(relu(inf), inf);
    assert_eq!(relu(-2.5), 0.0);
    for f in [gelu_erf, gelu_tanh, silu] {
        assert_eq!(f(inf), inf);
        assert!(f(-inf).is_nan());
        assert!(f(nan).is_nan());
        assert_eq!(f(0.0), 0.0);
    }
    assert_eq!(sigmoid(inf), 1.0);
    assert_eq!(sigmoid(-inf), 0.0);
    assert_eq!(sigmoid(0.0), 0.5);
    // The tanh form stays within 1e-3 of the exact one.
    for i in -60..60 {
        let x = f64::from(i) * 0.1;
        assert!((gelu_erf(x) - gelu_tanh(x)).abs() < 1e-3, "{x}");
    }
    // Deep negative tail: relative accuracy (erfc, not 1 + erf).
    let g = gelu_erf(-8.0);
    assert!(
        (g / (-8.0 * 0.5 * 1.2441921148543639e-15) - 1.0).abs() < 1e-9,
        "{g}"
    );
}

/// The f32 value `want` within one unit in the last place of `got` rounded to f32 (PyTorch's
/// `expf` and division round twice; the reference is the exact value), signed zeros and NaN
/// exactly.
fn assert_f32_value(what: &str, x: f32, got: f64, want: f32) {
    if want.is_nan() {
        assert!(got.is_nan(), "{what}({x}) = {got}, want NaN");
    } else if want == 0.0 {
        assert!(
            got == 0.0 && got.is_sign_negative() == want.is_sign_negative(),
            "{what}({x}) = {got:e}, want {want:e}"
        );
    } else {
        let ulps = (i64::from((got as f32).to_bits()) - i64::from(want.to_bits())).abs();
        assert!(
            ulps <= 1 && got.signum() == f64::from(want).signum(),
            "{what}({x}) = {got:e}, want {want:e} ({ulps} ulp)"
        );
    }
}

/// The f32 results of PyTorch's CUDA kernels in the deep negative tail: sigmoid
/// `1 / (1 + expf(-x))`, silu `x / (1 + expf(-x))` (f32, IEEE division), gelu both forms -0
/// (`1 + tanhf(u)` and `1 + erff(x / sqrt(2))` are 0), relu +0. Derived as
/// f32(1 / f32(1 + f32(exp(-x)))) and f32(x / f32(1 + f32(exp(-x)))) from correctly rounded
/// steps; rows: x, sigmoid, silu.
const PYTORCH_TAIL: [(f32, f32, f32); 12] = [
    (-87.0, 1.645_811_5e-38, -1.431_855_9e-36),
    // Denominators either side of 2^126, where div.approx.f32 (__fdividef) starts to return 0.
    (-87.3365, 1.175_544_5e-38, -1.026_679_5e-36),
    (-87.3366, 1.175_427_9e-38, -1.026_578_8e-36),
    (-88.0, 6.054_601e-39, -5.328_049_8e-37),
    // A subnormal sigmoid, a normal silu.
    (-88.5, 3.672_302e-39, -3.249_987e-37),
    // The last f32 x whose expf(-x) is finite, and the next one (-x > ln(f32::MAX)).
    (-88.72283, 2.938_758e-39, -2.607_349e-37),
    (-88.72284, 0.0, -0.0),
    (-88.8, 0.0, -0.0),
    (-89.0, 0.0, -0.0),
    (-100.0, 0.0, -0.0),
    (-1e30, 0.0, -0.0),
    (f32::NEG_INFINITY, 0.0, f32::NAN),
];

#[test]
fn negative_tail_matches_pytorch_cuda() {
    for (x, want_sigmoid, want_silu) in PYTORCH_TAIL {
        let xf = f64::from(x);
        assert_f32_value("sigmoid", x, sigmoid(xf), want_sigmoid);
        assert_f32_value("silu", x, silu(xf), want_silu);
        let gelu_want = if x.is_finite() { -0.0 } else { f32::NAN };
        assert_f32_value("gelu_tanh", x, gelu_tanh(xf), gelu_want);
        assert_f32_value("gelu_erf", x, gelu_erf(xf), gelu_want);
        assert_f32_value("relu", x, relu(xf), 0.0);
        // silu_and_mul: silu(gate) * up, the zero's sign the product's.
        let y = silu_and_mul(&[xf, -2.0], 1)[0];
        assert_f32_value("silu_and_mul", x, y, want_silu * -2.0);
    }
    // f32's own arithmetic at the same points gives the same values (a check of the table
    // with Rust's correctly rounded f32 operations; exp rounded from f64).
    for (x, want_sigmoid, want_silu) in PYTORCH_TAIL {
        let d = 1.0 + (f64::from(-x).exp() as f32);
        assert_eq!((1.0 / d).to_bits(), want_sigmoid.to_bits(), "{x}");
        let silu32 = x / d;
        assert!(
            silu32.to_bits() == want_silu.to_bits() || (silu32.is_nan() && want_silu.is_nan()),
            "{x}: {silu32:e}"
        );
    }
}

#[test]
fn overflow_threshold_is_the_f32_denominator() {
    // ln(f32::MAX) = 88.722839052...: the f32 values either side.
    let (last, first) = (88.72283_f32, 88.72284_f32);
    assert_eq!(last.to_bits() + 1, first.to_bits());
    assert!(!f32_exp_overflows(last) && f32_exp_overflows(first));
    assert!(f32_exp_overflows(f32::INFINITY) && !f32_exp_overflows(f32::NEG_INFINITY));
    // Below the overflow, sigmoid is the f64 value, subnormal in f32 but not 0 (the
    // __fdividef threshold 2^126 would give 0 here).
    let x = -f64::from(last);
    assert!((sigmoid(x) / (1.0 / (1.0 + (-x).exp())) - 1.0).abs() < 1e-15);
    assert!(sigmoid(x) < f64::from(f32::MIN_POSITIVE) && sigmoid(x) > 0.0);
    assert_eq!(sigmoid(-f64::from(first)), 0.0);
    // Positive side untouched: exp(-x) underflows to 0, not overflows.
    assert_eq!(sigmoid(100.0), 1.0);
    assert_eq!(silu(100.0), 100.0);
    assert_eq!(gelu_tanh(100.0), 100.0);
}

#[test]
fn gelu_tanh_tail_is_accurate_up_to_the_f32_overflow() {
    // x / (1 + exp(-2u)) in f64 (the kernel's f32 values, from its own f32 u, agree to
    // about 2e-6 relative): no cancellation, where 0.5 x (1 + tanh(u)) is 0 in f64 by -8.
    let k = (2.0 / std::f64::consts::PI).sqrt();
    for (x, want) in [
        (-6.0, -8.439_646_700_762_31e-11),
        (-8.0, -3.107_782_937_501_113e-21),
        (-10.060965538024902, -2.956_701_595_719_949_6e-38),
    ] {
        let got = gelu_tanh(x);
        assert!((got / want - 1.0).abs() < 1e-12, "gelu_tanh({x}) = {got:e}");
    }
    let tanh_form = |x: f64| 0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh());
    assert_eq!(tanh_form(-8.0), 0.0);
    // The kernel's f32 denominator overflows from the next f32 value on: -0, as PyTorch.
    let (last, first) = (-10.060965538024902_f64, -10.060966491699219_f64);
    assert_eq!((last as f32).to_bits() + 1, (first as f32).to_bits());
    let y = gelu_tanh(first);
    assert!(y == 0.0 && y.is_sign_negative(), "{y:e}");
    assert!(gelu_tanh(-1e30) == 0.0 && gelu_tanh(-1e30).is_sign_negative());
}

#[test]
fn silu_and_mul_splits_each_row() {
    let y = silu_and_mul(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 2.0, 2.0], 2);
    assert_eq!(
        y,
        vec![silu(1.0) * 3.0, silu(2.0) * 4.0, silu(-1.0) * 2.0, 0.0]
    );
}
