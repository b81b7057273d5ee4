//! Unit tests of the reduction references.

use super::*;

const INF: f64 = f64::INFINITY;

#[test]
fn log_softmax_is_log_of_softmax() {
    let x: Vec<f64> = (0..24).map(|v| f64::from(v) * 0.37 - 3.0).collect();
    for (outer, n, inner) in [(1, 24, 1), (4, 6, 1), (2, 3, 4), (1, 4, 6)] {
        let y = log_softmax(&x, outer, n, inner);
        let s = softmax(&x, outer, n, inner);
        for (a, b) in y.iter().zip(&s) {
            assert!((a - b.ln()).abs() < 1e-12);
        }
    }
}

#[test]
fn log_softmax_non_finite_rows_follow_pytorch() {
    assert!(
        log_softmax(&[-INF, -INF], 1, 2, 1)
            .iter()
            .all(|v| v.is_nan())
    );
    assert!(
        log_softmax(&[1.0, f64::NAN], 1, 2, 1)
            .iter()
            .all(|v| v.is_nan())
    );
    assert!(log_softmax(&[1.0, INF], 1, 2, 1).iter().all(|v| v.is_nan()));
    assert_eq!(log_softmax(&[5.0], 1, 1, 1), vec![0.0]);
    assert_eq!(log_softmax(&[-INF, 2.0], 1, 2, 1), vec![-INF, 0.0]);
}

#[test]
fn reductions_over_any_axes() {
    // [2, 3, 4] = 0..24
    let x: Vec<f64> = (0..24).map(f64::from).collect();
    let shape = [2, 3, 4];
    assert_eq!(
        reduce(&x, &shape, &[0, 2], ReduceKind::Sum),
        vec![
            f64::from((0..4).chain(12..16).sum::<i32>()),
            f64::from((4..8).chain(16..20).sum::<i32>()),
            f64::from((8..12).chain(20..24).sum::<i32>())
        ]
    );
    assert_eq!(
        reduce(&x, &shape, &[1], ReduceKind::Amax),
        vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]
    );
    assert_eq!(reduce(&x, &shape, &[0, 1, 2], ReduceKind::Mean), vec![11.5]);
    let lse = reduce(&x, &shape, &[2], ReduceKind::Logsumexp);
    for (r, v) in lse.iter().enumerate() {
        let want = (0..4).map(|k| (x[r * 4 + k]).exp()).sum::<f64>().ln();
        assert!((v - want).abs() < 1e-12);
    }
}

#[test]
fn reductions_follow_pytorch_on_non_finite_values() {
    let nan = f64::NAN;
    assert!(reduce(&[1.0, nan, 3.0], &[3], &[0], ReduceKind::Amax)[0].is_nan());
    assert!(reduce(&[nan, 1.0], &[2], &[0], ReduceKind::Amax)[0].is_nan());
    assert_eq!(
        reduce(&[-INF, -INF], &[2], &[0], ReduceKind::Logsumexp),
        vec![-INF]
    );
    assert_eq!(
        reduce(&[1.0, INF, -INF], &[3], &[0], ReduceKind::Logsumexp),
        vec![INF]
    );
    assert!(reduce(&[1.0, nan], &[2], &[0], ReduceKind::Logsumexp)[0].is_nan());
    assert!(reduce(&[INF, -INF], &[2], &[0], ReduceKind::Sum)[0].is_nan());
    assert_eq!(
        reduce(&[-INF, 2.0], &[2], &[0], ReduceKind::Amax),
        vec![2.0]
    );
    // Length-1 reductions are the identity (logsumexp too).
    assert_eq!(
        reduce(&[-3.5], &[1], &[0], ReduceKind::Logsumexp),
        vec![-3.5]
    );
    assert_eq!(reduce(&[-3.5], &[1], &[0], ReduceKind::Mean), vec![-3.5]);
}

#[test]
fn softmax_rows_sum_to_one_over_any_dim() {
    let x: Vec<f64> = (0..24).map(|v| f64::from(v) * 0.37 - 3.0).collect();
    for (outer, n, inner) in [(1, 24, 1), (4, 6, 1), (2, 3, 4), (1, 4, 6)] {
        let y = softmax(&x, outer, n, inner);
        for o in 0..outer {
            for i in 0..inner {
                let total: f64 = (0..n).map(|k| y[o * n * inner + k * inner + i]).sum();
                assert!((total - 1.0).abs() < 1e-12, "{outer} {n} {inner}: {total}");
            }
        }
    }
}

#[test]
fn softmax_non_finite_rows_follow_pytorch() {
    let inf = f64::INFINITY;
    assert!(softmax(&[-inf, -inf], 1, 2, 1).iter().all(|v| v.is_nan()));
    assert!(
        softmax(&[1.0, f64::NAN], 1, 2, 1)
            .iter()
            .all(|v| v.is_nan())
    );
    assert!(softmax(&[1.0, inf], 1, 2, 1).iter().all(|v| v.is_nan()));
    assert_eq!(softmax(&[5.0], 1, 1, 1), vec![1.0]);
    assert_eq!(softmax(&[-inf, 2.0], 1, 2, 1), vec![0.0, 1.0]);
}
