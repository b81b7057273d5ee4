//! Element encodings: every dtype to and from little-endian bytes, with one correctly rounded
//! conversion from `f64` (round to nearest, ties to even) for the narrow float formats.

use crate::{DType, Error, alloc};

/// A narrow binary float format: exponent and mantissa widths, and how it overflows.
#[derive(Clone, Copy)]
struct MiniFloat {
    exp_bits: u32,
    man_bits: u32,
    /// `float8_e4m3fn` has no infinity: its all-ones code is NaN and overflow gives NaN (as
    /// PyTorch's conversion does); the top exponent otherwise holds finite values.
    finite_only: bool,
}

const F16: MiniFloat = MiniFloat {
    exp_bits: 5,
    man_bits: 10,
    finite_only: false,
};
const BF16: MiniFloat = MiniFloat {
    exp_bits: 8,
    man_bits: 7,
    finite_only: false,
};
const E4M3FN: MiniFloat = MiniFloat {
    exp_bits: 4,
    man_bits: 3,
    finite_only: true,
};
const E5M2: MiniFloat = MiniFloat {
    exp_bits: 5,
    man_bits: 2,
    finite_only: false,
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

    fn man_mask(self) -> u32 {
        (1 << self.man_bits) - 1
    }

    /// The largest finite value.
    fn max_finite(self) -> f64 {
        let top_exp = if self.finite_only {
            (1 << self.exp_bits) - 1
        } else {
            (1 << self.exp_bits) - 2
        };
        let top_man = if self.finite_only {
            self.man_mask() - 1
        } else {
            self.man_mask()
        };
        let frac = 1.0 + f64::from(top_man) / f64::from(1u32 << self.man_bits);
        frac * 2f64.powi(top_exp - self.bias())
    }

    fn nan(self) -> u32 {
        if self.finite_only {
            self.exp_mask() | self.man_mask()
        } else {
            self.exp_mask() | (1 << (self.man_bits - 1))
        }
    }

    fn decode(self, bits: u32) -> f64 {
        let sign = if bits & self.sign_bit() != 0 {
            -1.0
        } else {
            1.0
        };
        let exp = ((bits & self.exp_mask()) >> self.man_bits) as i32;
        let man = bits & self.man_mask();
        let top = (1 << self.exp_bits) - 1;
        if self.finite_only {
            if exp == top && man == self.man_mask() {
                return f64::NAN;
            }
        } else if exp == top {
            return if man == 0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        let scale = f64::from(1u32 << self.man_bits);
        let magnitude = if exp == 0 {
            f64::from(man) / scale * 2f64.powi(1 - self.bias())
        } else {
            (1.0 + f64::from(man) / scale) * 2f64.powi(exp - self.bias())
        };
        sign * magnitude
    }

    /// Round `value` to the nearest representable value (ties to even), in one rounding.
    fn encode(self, value: f64) -> u32 {
        let sign = if value.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        if value.is_nan() {
            return sign | self.nan();
        }
        let overflow = if self.finite_only {
            self.nan()
        } else {
            self.exp_mask()
        };
        let magnitude = value.abs();
        if magnitude.is_infinite() {
            return sign | overflow;
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
            return sign | overflow;
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
            DType::Float8E4M3Fn => out.push(E4M3FN.encode(v) as u8),
            DType::Float8E5M2 => out.push(E5M2.encode(v) as u8),
            DType::Int8 => out.extend_from_slice(&int_in_range::<i8>(dtype, v)?.to_le_bytes()),
            DType::Int16 => out.extend_from_slice(&int_in_range::<i16>(dtype, v)?.to_le_bytes()),
            DType::Int32 => out.extend_from_slice(&int_in_range::<i32>(dtype, v)?.to_le_bytes()),
            DType::Int64 => out.extend_from_slice(&int_in_range::<i64>(dtype, v)?.to_le_bytes()),
            DType::UInt8 => out.extend_from_slice(&int_in_range::<u8>(dtype, v)?.to_le_bytes()),
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
    let u16_of = |c: &[u8]| u32::from(u16::from_le_bytes([c[0], c[1]]));
    match dtype {
        DType::Float64 => {
            out.extend(chunks.map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))));
        }
        DType::Float32 => out
            .extend(chunks.map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))),
        DType::Float16 => out.extend(chunks.map(|c| F16.decode(u16_of(c)))),
        DType::BFloat16 => out.extend(chunks.map(|c| BF16.decode(u16_of(c)))),
        DType::Float8E4M3Fn => out.extend(chunks.map(|c| E4M3FN.decode(u32::from(c[0])))),
        DType::Float8E5M2 => out.extend(chunks.map(|c| E5M2.decode(u32::from(c[0])))),
        DType::Int8 => out.extend(chunks.map(|c| f64::from(c[0] as i8))),
        DType::Int16 => out.extend(chunks.map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))),
        DType::Int32 => out
            .extend(chunks.map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))),
        DType::UInt8 | DType::Bool => out.extend(chunks.map(|c| f64::from(c[0]))),
        DType::Int64 => return None,
    }
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    fn round_trip(dtype: DType, v: f64) -> f64 {
        decode_f64(dtype, &encode_f64(dtype, &[v]).unwrap())
            .unwrap()
            .unwrap()[0]
    }

    #[test]
    fn f16_and_bf16_match_the_half_crate_on_every_code() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let b = bf16::from_bits(bits);
            let hd = F16.decode(u32::from(bits));
            let bd = BF16.decode(u32::from(bits));
            assert!(
                hd == h.to_f64() || (hd.is_nan() && h.is_nan()),
                "f16 {bits:#x}"
            );
            assert!(
                bd == b.to_f64() || (bd.is_nan() && b.is_nan()),
                "bf16 {bits:#x}"
            );
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
        assert_eq!(E4M3FN.max_finite(), 448.0);
        assert_eq!(E5M2.max_finite(), 57344.0);
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
        for bits in 0..=255u32 {
            for format in [E4M3FN, E5M2] {
                let v = format.decode(bits);
                if !v.is_nan() {
                    assert_eq!(format.encode(v), bits, "code {bits:#x}");
                }
            }
        }
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
