//! Bad input to fp8_quant gets a clear error naming the op, the field and the value: never a
//! panic; and its CPU path on edge values. Runs on the CPU; the same checks run before any GPU work.

use crate::common::spec;
use tileops::ops::Fp8Quant;
use tileops::{DType, Device, Error, Tensor};

#[test]
fn fp8_quant_rejects_bad_ranks_dtypes_and_groups() {
    let cpu = Device::cpu();
    for shape in [&[8][..], &[2, 4, 8], &[]] {
        let err = Fp8Quant::new(spec(shape, DType::Float32), 0, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "fp8_quant",
                    field: "x",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    for dtype in [
        DType::Float64,
        DType::Int8,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
    ] {
        let err = Fp8Quant::new(spec(&[4, 8], dtype), 0, &cpu).unwrap_err();
        assert!(
            matches!(err, Error::InvalidDType { op: "fp8_quant", field: "x", value, .. } if value == dtype),
            "{err:?}"
        );
    }
    for group in [3, 16, 9] {
        let err = Fp8Quant::new(spec(&[4, 8], DType::Float32), group, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParam {
                    op: "fp8_quant",
                    field: "group_size",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("divide K = 8"), "{err}");
    }
    for group in [0, 1, 2, 4, 8] {
        let op = Fp8Quant::new(spec(&[4, 8], DType::Float32), group, &cpu).unwrap();
        let per_row = 8usize.checked_div(group).unwrap_or(1);
        assert_eq!(op.scales_spec().shape, vec![4, per_row]);
    }
}

#[test]
fn cpu_paths_handle_edge_values() {
    let cpu = Device::cpu();
    // fp8_quant: a length-1 row, saturation, NaN, inf and zeros.
    let xs = spec(&[5, 2], DType::Float32);
    let x = Tensor::from_f32_slice(
        &[
            3.0,
            1.0e-6,
            f32::NAN,
            1.0,
            f32::INFINITY,
            -2.0,
            0.0,
            -0.0,
            -5.0,
            5.0,
        ],
        [5, 2],
        &cpu,
    )
    .unwrap();
    let (y, scales) = Fp8Quant::new(xs, 0, &cpu).unwrap().forward(&x).unwrap();
    let y = y.to_vec_f32().unwrap();
    let scales = scales.to_vec_f32().unwrap();
    assert_eq!(y[0], 448.0);
    assert_eq!(y[1], 0.0); // 1e-6 * 448 / 3 is below half the smallest subnormal (2^-10)
    // A NaN poisons its group (amax, scale and every code), as `torch.amax` propagates it.
    assert!(y[2].is_nan() && y[3].is_nan() && scales[1].is_nan());
    assert!(y[4].is_nan() && y[5] == 0.0 && scales[2].is_infinite());
    assert_eq!((y[6], y[7], scales[3]), (0.0, 0.0, 1.0 / (448.0 * 512.0)));
    assert_eq!((y[8], y[9]), (-448.0, 448.0));
    let one = spec(&[1, 1], DType::BFloat16);
    let (y, s) = Fp8Quant::new(one.clone(), 0, &cpu)
        .unwrap()
        .forward(&Tensor::full(&one, -0.75, &cpu).unwrap())
        .unwrap();
    assert_eq!(y.to_vec_f32().unwrap(), vec![-448.0]);
    assert_eq!(s.to_vec_f32().unwrap(), vec![0.75 / 448.0]);
}
