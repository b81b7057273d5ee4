use super::*;
use crate::ops::quantization::reference::{MIN_SCALE, fp8_e4m3_value};

#[test]
fn qk_norm_rope_fp8_rows_and_non_finite_rows() {
    let d = 8;
    let mut cache = vec![0.0; 2 * d];
    for i in 0..d / 2 {
        cache[i] = 1.0;
        cache[d + i] = 0.6;
        cache[d + d / 2 + i] = 0.8;
    }
    let x: Vec<f64> = (0..3 * d).map(|i| (i as f64 * 0.7).sin()).collect();
    let w = vec![1.5; d];
    let (codes, scales, rotated) = qk_norm_rope_fp8(&x, &w, &[1, 0, 1], &cache, 1, d, 1e-6);
    assert_eq!((codes.len(), scales.len()), (3 * d, 3));
    for r in 0..3 {
        let row = &rotated[r * d..(r + 1) * d];
        let amax = row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!((f64::from(scales[r]) - amax / 448.0).abs() < 1e-9 * amax);
        // Row 1 is position 0 (identity rotation): just the weighted norm.
        for (i, &c) in codes[r * d..(r + 1) * d].iter().enumerate() {
            let back = fp8_e4m3_value(c) * f64::from(scales[r]);
            assert!((back - row[i]).abs() <= amax / 16.0, "{r} {i}");
        }
    }
    let ms = x[d..2 * d].iter().map(|v| v * v).sum::<f64>() / d as f64;
    assert!((rotated[d] - x[d] / (ms + 1e-6).sqrt() * 1.5).abs() < 1e-12);
    // A NaN spreads over its row (through the norm); an inf makes its pair NaN (inf * 0) and
    // the rest 0. Either way the row holds a NaN, so its max, its scale and all its codes are
    // NaN, as torch.amax would make them; the clean row 2 is untouched.
    let mut bad = x.clone();
    bad[2] = f64::NAN;
    bad[d + 1] = f64::INFINITY;
    let (codes, scales, rotated) = qk_norm_rope_fp8(&bad, &w, &[1, 1, 1], &cache, 1, d, 1e-6);
    assert!(rotated[..d].iter().all(|v| v.is_nan()));
    let row1 = &rotated[d..2 * d];
    assert!(row1[1].is_nan() && row1[1 + d / 2].is_nan());
    assert!(row1.iter().filter(|v| !v.is_nan()).all(|&v| v == 0.0));
    assert!(scales[0].is_nan() && scales[1].is_nan(), "{scales:?}");
    assert!(codes[..2 * d].iter().all(|&c| c == 0x7f));
    assert!(scales[2].is_finite() && scales[2] > MIN_SCALE);
    // A position outside the table: NaN codes and a NaN scale.
    let (codes, scales, _) = qk_norm_rope_fp8(&x[..d], &w, &[5], &cache, 1, d, 1e-6);
    assert!(codes.iter().all(|&c| c == 0x7f));
    assert!(scales[0].is_nan());
}
