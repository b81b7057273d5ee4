use super::*;
use crate::{DType, Device, Tensor, TensorSpec};

/// The crate's own correctly rounded fp8 encoder (which turns overflow into NaN, as
/// PyTorch's cast does), for values that do not overflow.
fn tensor_code(v: f32) -> u8 {
    let spec = TensorSpec::new([1], DType::Float8E4M3Fn);
    Tensor::from_f64_rounded(&[f64::from(v)], &spec, &Device::cpu())
        .unwrap()
        .to_bytes()
        .unwrap()[0]
}

#[test]
fn fp8_conversion_agrees_with_the_tensor_encoder_below_overflow() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut checked = 0;
    for _ in 0..200_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Magnitudes from 2^-14 to 2^9, both signs: subnormals, normals, the overflow edge.
        let e = ((state >> 40) % 24) as i32 - 14;
        let m = 1.0 + ((state >> 16) & 0xffff) as f32 / 65536.0;
        let v = m * 2f32.powi(e) * if state >> 63 == 1 { -1.0 } else { 1.0 };
        if v.abs() <= 464.0 {
            assert_eq!(fp8_e4m3_saturate(v), tensor_code(v), "{v:e}");
            checked += 1;
        }
    }
    assert!(checked > 100_000);
    // Every code's value converts back to itself.
    for code in 0..=255u8 {
        let v = fp8_e4m3_value(code);
        if !v.is_nan() {
            assert_eq!(fp8_e4m3_saturate(v as f32), code, "code {code:#x}");
        }
    }
}

#[test]
fn fp8_saturates_at_448_and_keeps_nan_and_subnormals() {
    assert_eq!(fp8_e4m3_value(fp8_e4m3_saturate(448.0)), 448.0);
    assert_eq!(fp8_e4m3_value(fp8_e4m3_saturate(-448.0)), -448.0);
    // 464 is the midpoint between 448 and (the missing) 480: ties to even, 448.
    for v in [449.0, 463.9, 464.0, 464.1, 480.0, 1.0e30, f32::INFINITY] {
        assert_eq!(fp8_e4m3_saturate(v), 0x7e, "{v}");
        assert_eq!(fp8_e4m3_saturate(-v), 0xfe, "{v}");
    }
    assert_eq!(fp8_e4m3_saturate(f32::NAN), 0x7f);
    assert_eq!(fp8_e4m3_saturate(-f32::NAN), 0x7f);
    // Subnormals: 2^-9 is the smallest; 2^-10 is a tie and goes to 0 (even); just above
    // rounds up; 3 * 2^-10 is a tie between codes 1 and 2 and goes to 2.
    let q = 2f32.powi(-10);
    assert_eq!(fp8_e4m3_saturate(2.0 * q), 0x01);
    assert_eq!(fp8_e4m3_saturate(q), 0x00);
    assert_eq!(fp8_e4m3_saturate(-q), 0x80);
    assert_eq!(fp8_e4m3_saturate(q * 1.0001), 0x01);
    assert_eq!(fp8_e4m3_saturate(3.0 * q), 0x02);
    assert_eq!(fp8_e4m3_saturate(7.0 * 2.0 * q), 0x07); // the largest subnormal
    assert_eq!(fp8_e4m3_saturate(2f32.powi(-6)), 0x08); // the smallest normal
    assert_eq!(fp8_e4m3_saturate(f32::from_bits(1)), 0x00); // an f32 subnormal
    assert_eq!(fp8_e4m3_saturate(-0.0), 0x80);
    // Normal ties to even: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39).
    assert_eq!(fp8_e4m3_saturate(1.0625), 0x38);
    assert_eq!(fp8_e4m3_saturate(1.1875), 0x3a);
}

#[test]
fn fp8_quant_groups_scales_and_non_finite_values() {
    // Per group the largest magnitude maps to ±448 exactly.
    let x: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
    for group in [1, 3, 4, 12] {
        let (codes, scales) = fp8_quant(&x, group);
        assert_eq!(scales.len(), 12 / group);
        for (g, chunk) in codes.chunks(group).enumerate() {
            assert!(
                chunk.iter().any(|&c| c & 0x7f == 0x7e),
                "group {g} of {group}"
            );
            for (i, &c) in chunk.iter().enumerate() {
                let back = fp8_e4m3_value(c) * f64::from(scales[g]);
                let v = f64::from(x[g * group + i]);
                assert!((back - v).abs() <= v.abs() / 16.0 + 1e-6, "{v} {back}");
            }
        }
    }
    // All zeros: the smallest scale and zero codes.
    assert_eq!(
        fp8_quant(&[0.0, -0.0], 2),
        (vec![0x00, 0x80], vec![MIN_SCALE])
    );
    // NaN propagates through the max, as torch.amax: the issue's [NaN, 1, 2, 3] gets scale
    // NaN (not 3 / 448) and NaN codes, wherever the NaN is; the next group is untouched.
    for at in 0..4 {
        let mut x = [1.0, 2.0, 3.0, -1.0, 2.0, -1.0, 0.0, 0.0];
        x[at] = f32::NAN;
        let (codes, scales) = fp8_quant(&x, 4);
        assert!(scales[0].is_nan(), "NaN at {at}: {scales:?}");
        assert_eq!(&codes[..4], &[0x7f; 4], "NaN at {at}");
        assert_eq!(scales[1], 2.0 / 448.0);
        assert_eq!(&codes[4..], &[0x7e, fp8_e4m3_saturate(-224.0), 0, 0]);
    }
    // NaN with an inf: still NaN (the max is NaN whichever comes first).
    let (_, scales) = fp8_quant(&[f32::INFINITY, f32::NAN, f32::NAN, f32::INFINITY], 2);
    assert!(scales.iter().all(|s| s.is_nan()), "{scales:?}");
    // inf: the scale is inf, finite values become 0, the inf itself 0 * inf = NaN.
    let (codes, scales) = fp8_quant(&[f32::INFINITY, 2.0], 2);
    assert_eq!(scales, vec![f32::INFINITY]);
    assert_eq!(codes, vec![0x7f, 0x00]);
    // Length-1 groups: every code is ±448 (or 0).
    let (codes, _) = fp8_quant(&[3.0, -0.5, 0.0], 1);
    assert_eq!(codes, vec![0x7e, 0xfe, 0x00]);
}
