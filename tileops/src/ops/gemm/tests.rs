use super::*;
use crate::registry::RooflineModel;

fn spec(shape: &[usize], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype)
}

#[test]
fn sizes_follow_the_trans_flags() {
    let cpu = Device::cpu();
    let f = DType::Float16;
    for (a, b, ta, tb) in [
        (&[3, 5][..], &[5, 7][..], false, false),
        (&[5, 3], &[5, 7], true, false),
        (&[3, 5], &[7, 5], false, true),
        (&[5, 3], &[7, 5], true, true),
    ] {
        let op = Gemm::new(
            spec(a, f),
            spec(b, f),
            GemmOptions::new().trans_a(ta).trans_b(tb),
            &cpu,
        )
        .unwrap();
        assert_eq!(op.mnk(), (3, 7, 5), "{a:?} {b:?} {ta} {tb}");
        assert_eq!(op.c(), &spec(&[3, 7], f));
        // The manifest's formulas read M, N, K through the same flags.
        let roof = op.roofline().unwrap();
        assert_eq!(roof.flops, 2 * 3 * 7 * 5);
        assert_eq!(roof.bytes, (3 * 5 + 5 * 7 + 3 * 7) * 2);
    }
}

#[test]
fn roofs_follow_the_dtype_and_tf32() {
    let cpu = Device::cpu();
    let plan = |dtype, tf32| {
        Gemm::new(
            spec(&[2, 2], dtype),
            spec(&[2, 2], dtype),
            GemmOptions::new().allow_tf32(tf32),
            &cpu,
        )
        .unwrap()
        .roof()
    };
    assert_eq!(plan(DType::Float16, false).0, "tensor_core.fp16");
    assert_eq!(plan(DType::BFloat16, false).0, "tensor_core.bf16");
    assert_eq!(plan(DType::Float32, true).0, "tensor_core.tf32");
    assert_eq!(plan(DType::Float32, false), RoofKey::CUDA_CORE_FP32);
}

#[test]
fn col_major_view_swaps_the_operands() {
    let cpu = Device::cpu();
    let f = DType::BFloat16;
    // a stored [K=5, M=3] (trans_a), b stored [N=7, K=5] (trans_b).
    let op = Gemm::new(
        spec(&[5, 3], f),
        spec(&[7, 5], f),
        GemmOptions::new().trans_a(true).trans_b(true),
        &cpu,
    )
    .unwrap();
    let cm = col_major(&op);
    assert_eq!((cm.m, cm.n, cm.k), (7, 3, 5));
    assert_eq!((cm.op_first, cm.op_second), (OP_T, OP_T));
    assert_eq!((cm.ld_first, cm.ld_second, cm.ld_c), (5, 3, 7));
    // Stored column-major: b is [K, N] = 5 x 7 (ld 5), a is [M, K] = 3 x 5 (ld 3).
    assert_eq!(cm.first_dims(), (5, 7));
    assert_eq!(cm.second_dims(), (3, 5));
    let op = Gemm::new(spec(&[3, 5], f), spec(&[5, 7], f), GemmOptions::new(), &cpu).unwrap();
    let cm = col_major(&op);
    assert_eq!((cm.op_first, cm.op_second), (OP_N, OP_N));
    assert_eq!((cm.ld_first, cm.ld_second, cm.ld_c), (7, 5, 7));
    assert_eq!(cm.first_dims(), (7, 5));
    assert_eq!(cm.second_dims(), (5, 3));
}

#[test]
fn cpu_forward_matches_the_reference_in_every_dtype_and_layout() {
    let cpu = Device::cpu();
    for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (m, n, k) = (5, 9, 13);
            let a = TensorSpec::new(if ta { [k, m] } else { [m, k] }, dtype);
            let b = TensorSpec::new(if tb { [n, k] } else { [k, n] }, dtype);
            let op = Gemm::new(
                a.clone(),
                b.clone(),
                GemmOptions::new().trans_a(ta).trans_b(tb),
                &cpu,
            )
            .unwrap();
            let x = Tensor::random(&a, 3, &cpu).unwrap();
            let y = Tensor::random(&b, 4, &cpu).unwrap();
            let c = op.forward(&x, &y).unwrap();
            assert_eq!(c.spec(), &spec(&[m, n], dtype));
            let want = crate::ops::reference::gemm(
                &x.to_vec_f64().unwrap(),
                &y.to_vec_f64().unwrap(),
                m,
                n,
                k,
                ta,
                tb,
            );
            let want = Tensor::from_f64_rounded(&want, c.spec(), &cpu).unwrap();
            assert_eq!(c.to_bytes().unwrap(), want.to_bytes().unwrap());
            // And against a plain loop on the widened values.
            let (xa, yb) = (x.to_vec_f64().unwrap(), y.to_vec_f64().unwrap());
            let got = c.to_vec_f64().unwrap();
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k)
                        .map(|p| {
                            let av = if ta { xa[p * m + i] } else { xa[i * k + p] };
                            let bv = if tb { yb[j * k + p] } else { yb[p * n + j] };
                            av * bv
                        })
                        .sum();
                    let tol = s.abs() * 4e-3 + 1e-6;
                    assert!((got[i * n + j] - s).abs() <= tol, "{dtype} {ta} {tb}");
                }
            }
        }
    }
}

#[test]
fn cpu_edge_shapes_and_non_finite_values() {
    let cpu = Device::cpu();
    // 1 x 1 x 1.
    let s = spec(&[1, 1], DType::BFloat16);
    let op = Gemm::new(s.clone(), s.clone(), GemmOptions::new(), &cpu).unwrap();
    let x = Tensor::full(&s, 3.0, &cpu).unwrap();
    let y = Tensor::full(&s, -0.5, &cpu).unwrap();
    assert_eq!(
        op.forward(&x, &y).unwrap().to_vec_f32().unwrap(),
        vec![-1.5]
    );
    // An inf meeting a 0 gives NaN, a NaN spreads over its row, an inf over its column.
    let a = spec(&[2, 2], DType::Float16);
    let op = Gemm::new(a.clone(), a.clone(), GemmOptions::new(), &cpu).unwrap();
    let inf = f64::INFINITY;
    let x = Tensor::from_f64_rounded(&[inf, 1.0, f64::NAN, 1.0], &a, &cpu).unwrap();
    let y = Tensor::from_f64_rounded(&[0.0, 1.0, 1.0, 1.0], &a, &cpu).unwrap();
    let c = op.forward(&x, &y).unwrap().to_vec_f32().unwrap();
    assert!(c[0].is_nan() && c[2].is_nan() && c[3].is_nan(), "{c:?}");
    assert_eq!(c[1], f32::INFINITY);
    // float16 overflow rounds to inf, as a GPU's f32 accumulator converted to half does.
    let s = spec(&[1, 4], DType::Float16);
    let t = spec(&[4, 1], DType::Float16);
    let op = Gemm::new(s.clone(), t.clone(), GemmOptions::new(), &cpu).unwrap();
    let x = Tensor::full(&s, 60000.0, &cpu).unwrap();
    let y = Tensor::full(&t, 1.0, &cpu).unwrap();
    assert_eq!(
        op.forward(&x, &y).unwrap().to_vec_f32().unwrap(),
        vec![f32::INFINITY]
    );
}

#[test]
fn every_workload_row_plans_on_the_cpu() {
    let registration = crate::registry::find("gemm").expect("gemm is registered");
    let mut cases = 0;
    for workload in registration.workloads {
        for case in workload.cases() {
            let op = Gemm::from_workload(&Device::cpu(), &case).unwrap();
            let (m, n, k) = op.mnk();
            let roof = op.roofline().unwrap();
            assert_eq!(roof.flops, 2 * (m * n * k) as u64, "{}", case.name());
            let elem = case.dtype.size_in_bytes();
            assert_eq!(roof.bytes, ((m * k + k * n + m * n) * elem) as u64);
            let traffic = op.traffic().unwrap();
            assert_eq!(traffic.min_bytes().unwrap(), roof.bytes, "{}", case.name());
            cases += 1;
        }
    }
    assert_eq!(cases, 12);
}
