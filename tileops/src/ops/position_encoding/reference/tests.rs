use super::*;

#[test]
fn rope_rotates_pairs_and_marks_bad_positions() {
    let theta = 0.3f64;
    // head_dim 4: pairs (0, 2) and (1, 3); table rows 0 (identity) and 1.
    let cache = [1.0, 1.0, 0.0, 0.0, theta.cos(), 1.0, theta.sin(), 0.0];
    let x = [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0];
    let (y, mag) = rope(&x, &[0, 1], &cache, 1, 4);
    assert_eq!(&y[..4], &x[..4]);
    assert!((y[4] - (theta.cos() - 3.0 * theta.sin())).abs() < 1e-15);
    assert!((y[6] - (3.0 * theta.cos() + theta.sin())).abs() < 1e-15);
    assert_eq!((y[5], y[7]), (2.0, 4.0));
    assert_eq!(mag[0], 1.0);
    // Norms are preserved per pair.
    assert!((y[4].hypot(y[6]) - 10f64.sqrt()).abs() < 1e-12);
    let (y, _) = rope(&x, &[2, -1], &cache, 1, 4);
    assert!(y.iter().all(|v| v.is_nan()));
    // NaN and inf in x stay in their pair.
    let (y, _) = rope(&[f64::NAN, 1.0, 2.0, 3.0], &[1], &cache, 1, 4);
    assert!(y[0].is_nan() && y[2].is_nan() && y[1] == 1.0 && y[3] == 3.0);
}
