//! The hand-written fp8 codecs that the `float8` crate replaced, kept here only as the oracle of
//! the tests that justify the replacement: every one of the 2^8 codes of both formats decoded
//! against the format's formula, and a sweep of f32 bit patterns (each also as the f64 just
//! above and below it, so that one-rounding ties are probed) encoded by the new code against
//! the old, for the tensor codec (PyTorch's overflow) and for the kernels' saturating
//! conversion (`fp8_e4m3_saturate`).
//!
//! In a debug build the sweep takes every 4099th f32 pattern; `scripts/test.sh` runs the dense
//! sweep (every 61st pattern, about 70 million values) optimised:
//! `cargo test -p tileops --release --lib fp8_oracle -- --ignored` (scripts/test.sh runs it in the
//! `emulated` profile, release with overflow checks).

use super::{decode_f64, encode_f64};
use crate::DType;
use crate::ops::reference::{fp8_e4m3_saturate, fp8_e4m3_value};

/// The previous tensor codec of an 8-bit float format (round to nearest even, in one rounding;
/// e4m3fn overflow and NaN give NaN, e5m2 overflow gives infinity).
#[derive(Clone, Copy)]
struct OldFp8 {
    exp_bits: u32,
    man_bits: u32,
    finite_only: bool,
}

const OLD_E4M3FN: OldFp8 = OldFp8 {
    exp_bits: 4,
    man_bits: 3,
    finite_only: true,
};
const OLD_E5M2: OldFp8 = OldFp8 {
    exp_bits: 5,
    man_bits: 2,
    finite_only: false,
};

impl OldFp8 {
    fn bias(self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    fn exp_mask(self) -> u32 {
        ((1 << self.exp_bits) - 1) << self.man_bits
    }

    fn man_mask(self) -> u32 {
        (1 << self.man_bits) - 1
    }

    fn max_finite(self) -> f64 {
        let (top_exp, top_man) = if self.finite_only {
            ((1 << self.exp_bits) - 1, self.man_mask() - 1)
        } else {
            ((1 << self.exp_bits) - 2, self.man_mask())
        };
        (1.0 + f64::from(top_man) / f64::from(1u32 << self.man_bits))
            * 2f64.powi(top_exp - self.bias())
    }

    fn nan(self) -> u32 {
        if self.finite_only {
            self.exp_mask() | self.man_mask()
        } else {
            self.exp_mask() | (1 << (self.man_bits - 1))
        }
    }

    fn encode(self, value: f64) -> u8 {
        let sign = if value.is_sign_negative() { 0x80 } else { 0 };
        if value.is_nan() {
            return (sign | self.nan()) as u8;
        }
        let overflow = if self.finite_only {
            self.nan()
        } else {
            self.exp_mask()
        };
        let magnitude = value.abs();
        if magnitude.is_infinite() {
            return (sign | overflow) as u8;
        }
        if magnitude == 0.0 {
            return sign as u8;
        }
        let exponent = |v: f64| ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let min_exp = 1 - self.bias();
        let exp = exponent(magnitude).max(min_exp);
        let quantum = 2f64.powi(exp - self.man_bits as i32);
        let rounded = (magnitude / quantum).round_ties_even() * quantum;
        if rounded > self.max_finite() {
            return (sign | overflow) as u8;
        }
        if rounded == 0.0 {
            return sign as u8;
        }
        let exp = exponent(rounded);
        let scale = f64::from(1u32 << self.man_bits);
        let bits = if exp < min_exp {
            sign | (rounded / 2f64.powi(min_exp) * scale) as u32
        } else {
            let man = ((rounded / 2f64.powi(exp) - 1.0) * scale) as u32;
            sign | (((exp + self.bias()) as u32) << self.man_bits) | man
        };
        bits as u8
    }
}

/// The previous `fp8_e4m3_saturate`: a port of `cuda_fp8.hpp`'s
/// `__nv_cvt_double_to_fp8(v, __NV_SATFINITE, __NV_E4M3)` on `f64::from(v)`, NaN always 0x7F.
fn old_saturate(v: f32) -> u8 {
    let bits = f64::from(v).to_bits();
    let sign = ((bits >> 63) << 7) as u8;
    let abs = bits & 0x7fff_ffff_ffff_ffff;
    const INF: u64 = 0x7ff0_0000_0000_0000;
    const MIN_DENORM_HALF: u64 = 0x3f50_0000_0000_0000;
    const OVERFLOW: u64 = 0x407d_0000_0000_0000;
    const MIN_NORMAL: u64 = 0x3f90_0000_0000_0000;
    const HALF_ULP: u64 = 1 << (53 - 4 - 1);
    if abs > INF {
        return 0x7f;
    }
    let code = if abs <= MIN_DENORM_HALF {
        0
    } else if abs > OVERFLOW {
        0x7e
    } else {
        let exp = (((bits >> 52) & 0x7ff) as i32 - 1023 + 7) as u32;
        let mantissa = ((bits >> (53 - 4)) & 0x7) as u32;
        if abs >= MIN_NORMAL {
            let code = (exp << 3) | mantissa;
            let round = bits & ((HALF_ULP << 1) - 1);
            if round > HALF_ULP || (round == HALF_ULP && mantissa & 1 == 1) {
                code + 1
            } else {
                code
            }
        } else {
            let shift = 1u32.wrapping_sub(exp);
            let mantissa = mantissa | 0x8;
            let code = mantissa >> shift;
            let round = (bits | (1 << 52)) & ((HALF_ULP << (shift + 1)) - 1);
            let half = HALF_ULP << shift;
            if round > half || (round == half && code & 1 == 1) {
                code + 1
            } else {
                code
            }
        }
    };
    sign | code as u8
}

/// A code's value from the format's definition, independently of either codec: sign,
/// `(1 + m / 2^M) * 2^(e - bias)` (subnormal `m / 2^M * 2^(1 - bias)`), and the special codes
/// (e4m3fn: only S.1111.111 is NaN, no infinity; e5m2: the top exponent is inf or NaN).
fn formula(code: u8, exp_bits: u32, man_bits: u32, finite_only: bool) -> f64 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from(code & 0x7f) >> man_bits;
    let man = f64::from(code & ((1 << man_bits) - 1));
    let top = (1 << exp_bits) - 1;
    let bias = (1 << (exp_bits - 1)) - 1;
    if finite_only && exp == top && man == f64::from((1u8 << man_bits) - 1) {
        return f64::NAN;
    }
    if !finite_only && exp == top {
        return if man == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    let m = man / f64::from(1u32 << man_bits);
    sign * if exp == 0 {
        m * 2f64.powi(1 - bias)
    } else {
        (1.0 + m) * 2f64.powi(exp - bias)
    }
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn every_code_decodes_as_the_formula() {
    for code in 0..=255u8 {
        let e4m3 = decode_f64(DType::Float8E4M3Fn, &[code]).unwrap().unwrap()[0];
        let e5m2 = decode_f64(DType::Float8E5M2, &[code]).unwrap().unwrap()[0];
        let want_e4m3 = formula(code, 4, 3, true);
        assert!(
            same(e4m3, want_e4m3),
            "e4m3fn {code:#04x}: {e4m3} vs {want_e4m3}"
        );
        assert!(
            same(fp8_e4m3_value(code), want_e4m3),
            "fp8_e4m3_value({code:#04x})"
        );
        let want_e5m2 = formula(code, 5, 2, false);
        assert!(
            same(e5m2, want_e5m2),
            "e5m2 {code:#04x}: {e5m2} vs {want_e5m2}"
        );
    }
    // The formula itself, at known values (PyTorch's finfo): the largest finite, the smallest
    // subnormal, and the specials.
    assert_eq!(formula(0x7e, 4, 3, true), 448.0);
    assert_eq!(formula(0x01, 4, 3, true), 2f64.powi(-9));
    assert!(formula(0xff, 4, 3, true).is_nan());
    assert_eq!(formula(0x7b, 5, 2, false), 57344.0);
    assert_eq!(formula(0x01, 5, 2, false), 2f64.powi(-16));
    assert_eq!(formula(0xfc, 5, 2, false), f64::NEG_INFINITY);
}

/// The f64 next to `v` towards `+inf` (`up`) or `-inf`, for finite `v`.
fn neighbour(v: f64, up: bool) -> f64 {
    if v == 0.0 {
        let tiny = f64::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    let bits = v.to_bits();
    let away = (v > 0.0) == up;
    f64::from_bits(if away { bits + 1 } else { bits - 1 })
}

/// Every `stride`-th f32 bit pattern, and the edges of both formats, through the new codecs and
/// the old; returns how many values were compared.
fn sweep(stride: usize) -> usize {
    let edges = [
        448.0f32, 464.0, 465.0, 480.0, 57344.0, 61440.0, 61441.0, 65536.0, 0.0, -0.0, 1.0,
    ]
    .into_iter()
    .flat_map(|v| [v, -v, v.next_up(), v.next_down()])
    .chain([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN]);
    let patterns = (0..=u32::MAX)
        .step_by(stride)
        .map(f32::from_bits)
        .chain(edges);
    let mut compared = 0;
    let mut batch = Vec::with_capacity(3 << 12);
    let mut flush = |batch: &mut Vec<f64>| {
        for (dtype, old) in [
            (DType::Float8E4M3Fn, OLD_E4M3FN),
            (DType::Float8E5M2, OLD_E5M2),
        ] {
            let new = encode_f64(dtype, batch).unwrap();
            for (&v, &code) in batch.iter().zip(&new) {
                assert_eq!(code, old.encode(v), "{dtype} of {v:e} ({:#x})", v.to_bits());
            }
        }
        compared += batch.len();
        batch.clear();
    };
    for v in patterns {
        assert_eq!(
            fp8_e4m3_saturate(v),
            old_saturate(v),
            "fp8_e4m3_saturate({v:e}) ({:#x})",
            v.to_bits()
        );
        let wide = f64::from(v);
        batch.push(wide);
        if wide.is_finite() {
            batch.push(neighbour(wide, true));
            batch.push(neighbour(wide, false));
        }
        if batch.len() >= 3 << 12 {
            flush(&mut batch);
        }
    }
    flush(&mut batch);
    compared
}

#[test]
fn the_new_codecs_encode_as_the_old_on_a_sweep() {
    assert!(sweep(4099) > 3_000_000);
}

/// The dense sweep, optimised (scripts/test.sh): about 70 million f32 values, each also as
/// its two f64 neighbours.
#[test]
#[ignore = "dense: run optimised, as scripts/test.sh does"]
fn the_new_codecs_encode_as_the_old_on_a_dense_sweep() {
    assert!(sweep(61) > 200_000_000);
}
