//! Huge shapes are errors, never panics, aborts or wrong sizes.
//!
//! `scripts/test.sh` runs these unit tests twice: with the workspace's tests (debug) and again
//! optimised (profile `emulated`, whose library test binary the GPU check's bundle builds anyway,
//! beside the dense fp8 sweep). Both keep overflow checks, so unchecked size arithmetic fails
//! either run with "attempt to multiply with overflow" (in a build without them it would wrap:
//! `[2^32, 2^32]` once passed for 0 bytes). Nothing here allocates more than a few bytes: the
//! 1 TiB requests are refused, not granted and filled.

use crate::ops::{Softmax, Sum};
use crate::registry::Traffic;
use crate::{DType, Device, Error, Tensor, TensorSpec};

const TWO_32: usize = 1 << 32;

fn is_overflow(err: &Error) -> bool {
    matches!(err, Error::ShapeOverflow { .. })
}

#[test]
fn element_counts_and_byte_sizes_that_overflow_are_errors() {
    let square = TensorSpec::new([TWO_32, TWO_32], DType::Float32);
    let err = square.numel().unwrap_err();
    assert!(
        matches!(&err, Error::ShapeOverflow { what: "element count", shape, .. } if shape == &[TWO_32, TWO_32]),
        "{err}"
    );
    assert!(
        err.to_string().contains("[4294967296, 4294967296]"),
        "{err}"
    );
    assert!(is_overflow(&square.size_in_bytes().unwrap_err()));

    // 2^62 elements fit in a usize; their 2^64 bytes of f32 do not (release once said 0 bytes).
    let long = TensorSpec::new([1 << 62], DType::Float32);
    assert_eq!(long.numel().unwrap(), 1 << 62);
    let err = long.size_in_bytes().unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeOverflow {
                what: "byte size",
                ..
            }
        ),
        "{err}"
    );

    // A zero extent makes any shape empty, however large the others.
    let empty = TensorSpec::new([0, usize::MAX, usize::MAX], DType::Float64);
    assert_eq!(
        (empty.numel().unwrap(), empty.size_in_bytes().unwrap()),
        (0, 0)
    );
}

#[test]
fn constructors_refuse_shapes_whose_size_overflows() {
    let cpu = Device::cpu();
    // Release builds once accepted this as a tensor of 0 elements in 0 bytes.
    let err = Tensor::from_slice::<f32>(&[], [TWO_32, TWO_32], &cpu).unwrap_err();
    assert!(is_overflow(&err), "{err}");
    let huge = TensorSpec::new([1 << 62], DType::Float32);
    for result in [
        Tensor::zeros(&huge, &cpu),
        Tensor::full(&huge, 1.0, &cpu),
        Tensor::random(&huge, 0, &cpu),
        Tensor::from_bytes(&[], &huge, &cpu),
        Tensor::from_f64_rounded(&[], &huge, &cpu),
    ] {
        let err = result.unwrap_err();
        assert!(is_overflow(&err), "{err}");
    }
}

#[test]
fn a_tebibyte_tensor_is_out_of_memory_not_an_abort() {
    let cpu = Device::cpu();
    let tib = TensorSpec::new([1 << 38], DType::Float32);
    for (what, result) in [
        ("zeros", Tensor::zeros(&tib, &cpu)),
        ("full", Tensor::full(&tib, 0.5, &cpu)),
        ("random", Tensor::random(&tib, 7, &cpu)),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::OutOfMemory { bytes: 1_099_511_627_776, device } if device == "cpu"),
            "{what}: {err}"
        );
        assert!(err.to_string().contains("1099511627776 bytes"), "{err}");
    }
}

#[test]
fn op_plans_refuse_shapes_whose_size_overflows() {
    let cpu = Device::cpu();
    for shape in [vec![TWO_32, TWO_32], vec![1 << 62]] {
        let x = TensorSpec::new(shape.clone(), DType::BFloat16);
        let err = Softmax::new(x.clone(), -1, &cpu).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidShape {
                    op: "softmax",
                    field: "x",
                    ..
                }
            ),
            "{shape:?}: {err}"
        );
        let err = Sum::new(x, 0i64, false, &cpu).unwrap_err();
        assert!(
            matches!(err, Error::InvalidShape { .. }),
            "{shape:?}: {err}"
        );
    }
}

#[test]
fn the_bytes_oracle_refuses_sizes_that_overflow() {
    let huge = TensorSpec::new([TWO_32, TWO_32], DType::BFloat16);
    let err = Traffic {
        reads: vec![huge],
        writes: vec![],
    }
    .min_bytes()
    .unwrap_err();
    assert!(is_overflow(&err), "{err}");
    // Each tensor fits, their sum does not.
    let half = TensorSpec::new([1 << 62], DType::UInt8);
    let err = Traffic {
        reads: vec![half.clone(), half.clone(), half.clone()],
        writes: vec![half.clone(), half],
    }
    .min_bytes()
    .unwrap_err();
    assert!(is_overflow(&err), "{err}");
}
