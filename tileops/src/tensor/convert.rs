//! Element encodings: every dtype to and from little-endian bytes, with one correctly rounded
//! conversion from `f64` (round to nearest, ties to even) for the narrow float formats.
//!
//! - **fp8** (`float8_e4m3fn`, `float8_e5m2`): the `float8` crate, which ports CUDA's
//!   `cuda_fp8.hpp`. Its decoding is exact; its encoding from `f64` rounds once, to nearest even,
//!   but saturates on overflow (±inf included), whereas a tensor converts as PyTorch's
//!   `.to(float8)` does: overflow is NaN in e4m3fn and ±inf in e5m2. So overflow and NaN are
//!   decided here first, and only finite in-range values reach `float8`
//!   (`fp8_oracle` checks this against the hand-written codec it replaced).
//! - **f16 and bf16**: decoded by `half` (exact), but encoded by [`MiniFloat`]: `half`'s
//!   `from_f64` is not one rounding (bf16 truncates the f64 to its top 32 bits first, and f16
//!   with F16C goes through f32), so `1 + 2^-8 + 2^-40` would become bf16 `1.0` instead of
//!   `1 + 2^-7` (see `half_from_f64_rounds_twice`).

use float8::{F8E4M3, F8E5M2};
use half::{bf16, f16};

use crate::{DType, Error, alloc};

/// The e4m3fn code of `v` as PyTorch converts: NaN (keeping the sign) for NaN and for magnitudes
/// above 464 (448 plus half its ulp: the tie rounds to even, 448), else `float8`'s rounding.
pub(crate) fn e4m3fn_code(v: f64) -> u8 {
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    if v.is_nan() || v.abs() > 464.0 {
        return sign | 0x7f;
    }
    F8E4M3::from_f64(v).to_bits()
}

/// The e5m2 code of `v` as PyTorch converts: the canonical NaN (keeping the sign) for NaN, ±inf
/// from 61440 (57344 plus half its ulp: the tie rounds to even, which is the infinity) up, else
/// `float8`'s rounding.
pub(crate) fn e5m2_code(v: f64) -> u8 {
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    if v.is_nan() {
        return sign | 0x7e;
    }
    if v.abs() >= 61440.0 {
        return sign | 0x7c;
    }
    F8E5M2::from_f64(v).to_bits()
}

/// A 16-bit binary float format (f16, bf16), for its one-rounding encoder.
#[derive(Clone, Copy)]
struct MiniFloat {
    exp_bits: u32,
    man_bits: u32,
}

const F16: MiniFloat = MiniFloat {
    exp_bits: 5,
    man_bits: 10,
};
const BF16: MiniFloat = MiniFloat {
    exp_bits: 8,
    man_bits: 7,
};

impl MiniFloat {
    fn bias(self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    fn sign_bit(self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn exp_mask(self) -> u32 {
        ((1 << self.exp_bits) - 1) << self.man_bits
    }

    /// The largest finite value.
    fn max_finite(self) -> f64 {
        let top_exp = (1 << self.exp_bits) - 2;
        let frac = 2.0 - 1.0 / f64::from(1u32 << self.man_bits);
        frac * 2f64.powi(top_exp - self.bias())
    }

    /// Round `value` to the nearest representable value (ties to even), in one rounding;
    /// overflow is infinity, NaN the quiet NaN.
    fn encode(self, value: f64) -> u32 {
        let sign = if value.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        if value.is_nan() {
            return sign | self.exp_mask() | (1 << (self.man_bits - 1));
        }
        let magnitude = value.abs();
        if magnitude.is_infinite() {
            return sign | self.exp_mask();
        }
        if magnitude == 0.0 {
            return sign;
        }
        let min_exp = 1 - self.bias();
        // Exponent of the value, from the f64 bits (exact), clamped to the subnormal range.
        let exp = f64_exponent(magnitude).max(min_exp);
        let quantum = 2f64.powi(exp - self.man_bits as i32);
        let rounded = (magnitude / quantum).round_ties_even() * quantum;
        if rounded > self.max_finite() {
            return sign | self.exp_mask();
        }
        if rounded == 0.0 {
            return sign;
        }
        let exp = f64_exponent(rounded);
        let scale = f64::from(1u32 << self.man_bits);
        if exp < min_exp {
            let man = (rounded / 2f64.powi(min_exp) * scale) as u32;
            sign | man
        } else {
            let man = ((rounded / 2f64.powi(exp) - 1.0) * scale) as u32;
            let exp_field = (exp + self.bias()) as u32;
            sign | (exp_field << self.man_bits) | man
        }
    }
}

/// The unbiased binary exponent of a positive, finite, normal f64.
fn f64_exponent(value: f64) -> i32 {
    ((value.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// Encodes `values` as `dtype` elements, rounding each once to the nearest representable value.
///
/// Integer and bool dtypes take values that are exact integers in range; anything else is an
/// error message naming the first offending value. For a few values; large buffers go through
/// [`encode_f64_into`] with room reserved fallibly.
pub(crate) fn encode_f64(dtype: DType, values: &[f64]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(values.len() * dtype.size_in_bytes());
    encode_f64_into(dtype, values, &mut out)?;
    Ok(out)
}

/// Like [`encode_f64`], appending to `out` (which should have room for them: no reallocation
/// then, so no allocation that could abort).
pub(crate) fn encode_f64_into(
    dtype: DType,
    values: &[f64],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    for &v in values {
        match dtype {
            DType::Float64 => out.extend_from_slice(&v.to_le_bytes()),
            DType::Float32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::Float16 => out.extend_from_slice(&(F16.encode(v) as u16).to_le_bytes()),
            DType::BFloat16 => out.extend_from_slice(&(BF16.encode(v) as u16).to_le_bytes()),
            DType::Float8E4M3Fn => out.push(e4m3fn_code(v)),
            DType::Float8E5M2 => out.push(e5m2_code(v)),
            DType::Int8 => out.extend_from_slice(&int_in_range::<i8>(dtype, v)?.to_le_bytes()),
            DType::Int16 => out.extend_from_slice(&int_in_range::<i16>(dtype, v)?.to_le_bytes()),
            DType::Int32 => out.extend_from_slice(&int_in_range::<i32>(dtype, v)?.to_le_bytes()),
            DType::Int64 => out.extend_from_slice(&int_in_range::<i64>(dtype, v)?.to_le_bytes()),
            DType::UInt8 => out.extend_from_slice(&int_in_range::<u8>(dtype, v)?.to_le_bytes()),
            DType::UInt32 => out.extend_from_slice(&int_in_range::<u32>(dtype, v)?.to_le_bytes()),
            DType::Bool => out.push(match v {
                0.0 => 0,
                1.0 => 1,
                _ => return Err(format!("{v} is not a bool (0 or 1)")),
            }),
        }
    }
    Ok(())
}

fn int_in_range<T: TryFrom<i64>>(dtype: DType, v: f64) -> Result<T, String> {
    let bad = || format!("{v} is not an exact {dtype} value");
    if v.fract() != 0.0 || !v.is_finite() || v.abs() > 9.007_199_254_740_992e15 {
        return Err(bad());
    }
    T::try_from(v as i64).map_err(|_| bad())
}

/// Decodes `bytes` of `dtype` elements into f64, exactly, into a buffer reserved fallibly; `None`
/// for int64, whose values f64 cannot always hold.
pub(crate) fn decode_f64(dtype: DType, bytes: &[u8]) -> Option<Result<Vec<f64>, Error>> {
    if dtype == DType::Int64 {
        return None;
    }
    let size = dtype.size_in_bytes();
    let mut out = match alloc::host_vec::<f64>(bytes.len() / size) {
        Ok(out) => out,
        Err(err) => return Some(Err(err)),
    };
    let chunks = bytes.chunks_exact(size);
    let u16_of = |c: &[u8]| u16::from_le_bytes([c[0], c[1]]);
    match dtype {
        DType::Float64 => {
            out.extend(chunks.map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))));
        }
        DType::Float32 => out
            .extend(chunks.map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))),
        DType::Float16 => out.extend(chunks.map(|c| f16::from_bits(u16_of(c)).to_f64())),
        DType::BFloat16 => out.extend(chunks.map(|c| bf16::from_bits(u16_of(c)).to_f64())),
        DType::Float8E4M3Fn => out.extend(chunks.map(|c| F8E4M3::from_bits(c[0]).to_f64())),
        DType::Float8E5M2 => out.extend(chunks.map(|c| F8E5M2::from_bits(c[0]).to_f64())),
        DType::Int8 => out.extend(chunks.map(|c| f64::from(c[0] as i8))),
        DType::Int16 => out.extend(chunks.map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))),
        DType::Int32 => out
            .extend(chunks.map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))),
        DType::UInt8 | DType::Bool => out.extend(chunks.map(|c| f64::from(c[0]))),
        DType::UInt32 => out
            .extend(chunks.map(|c| f64::from(u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))),
        DType::Int64 => return None,
    }
    Some(Ok(out))
}

#[cfg(test)]
mod fp8_oracle;

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(dtype: DType, v: f64) -> f64 {
        decode_f64(dtype, &encode_f64(dtype, &[v]).unwrap())
            .unwrap()
            .unwrap()[0]
    }

    #[test]
    fn f16_and_bf16_encode_every_code_to_itself() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let b = bf16::from_bits(bits);
            let (hd, bd) = (h.to_f64(), b.to_f64());
            if !h.is_nan() {
                assert_eq!(F16.encode(hd), u32::from(bits), "f16 encode {bits:#x}");
            }
            if !b.is_nan() {
                assert_eq!(BF16.encode(bd), u32::from(bits), "bf16 encode {bits:#x}");
            }
        }
    }

    #[test]
    fn rounding_matches_f32_rounding_through_half() {
        // For values exactly representable in f32, the half crate's f32 conversion is the
        // reference (round to nearest even).
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = f32::from_bits((state >> 32) as u32);
            if v.is_nan() {
                continue;
            }
            let v64 = f64::from(v);
            assert_eq!(
                F16.encode(v64) as u16,
                f16::from_f32(v).to_bits(),
                "f16 of {v:e}"
            );
            assert_eq!(
                BF16.encode(v64) as u16,
                bf16::from_f32(v).to_bits(),
                "bf16 of {v:e}"
            );
        }
    }

    #[test]
    fn fp8_limits_follow_pytorch() {
        assert_eq!(F16.max_finite(), 65504.0);
        assert_eq!(round_trip(DType::Float8E5M2, 57344.0), 57344.0);
        assert_eq!(round_trip(DType::Float8E5M2, 61439.0), 57344.0);
        assert_eq!(round_trip(DType::Float8E5M2, -61440.0), f64::NEG_INFINITY);
        assert_eq!(round_trip(DType::Float8E4M3Fn, 464.0), 448.0);
        assert!(round_trip(DType::Float8E4M3Fn, 464.0001).is_nan());
        assert_eq!(
            encode_f64(DType::Float8E4M3Fn, &[-f64::NAN, -1e9]).unwrap(),
            [0xff, 0xff]
        );
        assert_eq!(
            encode_f64(DType::Float8E5M2, &[f64::NAN, -f64::INFINITY]).unwrap(),
            [0x7e, 0xfc]
        );
        assert_eq!(round_trip(DType::Float8E4M3Fn, 448.0), 448.0);
        assert_eq!(round_trip(DType::Float8E4M3Fn, 460.0), 448.0);
        assert!(round_trip(DType::Float8E4M3Fn, 470.0).is_nan());
        assert!(round_trip(DType::Float8E4M3Fn, f64::INFINITY).is_nan());
        assert_eq!(round_trip(DType::Float8E5M2, 1.0e6), f64::INFINITY);
        assert_eq!(
            round_trip(DType::Float8E4M3Fn, 2f64.powi(-9)),
            2f64.powi(-9)
        );
        assert_eq!(round_trip(DType::Float8E4M3Fn, 0.3), 0.3125);
        assert_eq!(round_trip(DType::Float8E5M2, -0.3), -0.3125);
        for code in 0..=255u8 {
            for dtype in [DType::Float8E4M3Fn, DType::Float8E5M2] {
                let v = decode_f64(dtype, &[code]).unwrap().unwrap()[0];
                if !v.is_nan() {
                    assert_eq!(
                        encode_f64(dtype, &[v]).unwrap(),
                        [code],
                        "{dtype} {code:#x}"
                    );
                }
            }
        }
    }

    /// Why f16 and bf16 keep their own encoder: `half`'s `from_f64` rounds twice. If this fails,
    /// `half` rounds once now, and `MiniFloat` can go.
    #[test]
    fn half_from_f64_rounds_twice() {
        // Just above the bf16 midpoint between 1 and 1 + 2^-7, by less than f64's top 32 bits
        // hold: truncated, it is the tie, which goes to even (1.0).
        let v = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(
            BF16.encode(v) as u16,
            bf16::from_f64(1.0 + 2f64.powi(-7)).to_bits()
        );
        assert_eq!(bf16::from_f64(v), bf16::ONE);
        // f16 likewise (its midpoint 1 + 2^-11; f16::from_f64 truncates, or rounds through f32).
        let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-45);
        assert_eq!(
            F16.encode(v) as u16,
            f16::from_f64(1.0 + 2f64.powi(-10)).to_bits()
        );
        assert_eq!(f16::from_f64(v), f16::ONE);
    }

    #[test]
    fn f64_rounds_once() {
        // 1 + 2^-8 + 2^-30 is just above the bf16 midpoint; rounding through f32 first would
        // still see it, but through a truncated mantissa it would not.
        let v = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(round_trip(DType::BFloat16, v), 1.0 + 2f64.powi(-7));
        assert_eq!(round_trip(DType::BFloat16, 1.0 + 2f64.powi(-8)), 1.0);
    }

    #[test]
    fn integers_must_be_exact_and_in_range() {
        assert!(encode_f64(DType::Int8, &[127.0]).is_ok());
        assert!(encode_f64(DType::Int8, &[128.0]).is_err());
        assert!(encode_f64(DType::Int32, &[1.5]).is_err());
        assert!(encode_f64(DType::Bool, &[2.0]).is_err());
        assert_eq!(
            decode_f64(DType::Int16, &encode_f64(DType::Int16, &[-300.0]).unwrap())
                .map(Result::unwrap),
            Some(vec![-300.0])
        );
        assert!(decode_f64(DType::Int64, &[0; 8]).is_none());
    }
}
