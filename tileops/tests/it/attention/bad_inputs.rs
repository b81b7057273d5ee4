//! Bad input to the attention ops gets a clear error naming the op, the field and the value: never a
//! panic, never a launch. Runs on the CPU; the same checks run before any GPU work.

use crate::common::spec;
use tileops::ops::{DecodeOptions, GqaDecode, GqaDecodePaged, GqaPrefill, PrefillOptions};
use tileops::{DType, Device, Error, Tensor};

fn field_of(err: &Error) -> &'static str {
    match err {
        Error::InvalidShape { field, .. }
        | Error::InvalidDType { field, .. }
        | Error::InvalidParam { field, .. }
        | Error::InputMismatch { field, .. } => field,
        other => panic!("not a field error: {other:?}"),
    }
}

/// Each result is an error of `op` naming `field`, whose message holds `words`.
fn assert_refused<T: std::fmt::Debug>(op: &str, cases: Vec<(Result<T, Error>, &str, &str)>) {
    for (result, field, words) in cases {
        let err = result.expect_err(field);
        assert_eq!(field_of(&err), field, "{err:?}");
        let message = err.to_string();
        assert!(message.starts_with(&format!("{op}: ")), "{message}");
        assert!(message.contains(words), "{message} lacks {words:?}");
    }
}

fn dense(
    q: &[usize],
    cache: &[usize],
    q_dtype: DType,
    cache_dtype: DType,
    lens: &[i32],
    options: DecodeOptions,
) -> Result<GqaDecode, Error> {
    GqaDecode::new(
        spec(q, q_dtype),
        spec(cache, cache_dtype),
        spec(cache, cache_dtype),
        lens,
        options,
        &Device::cpu(),
    )
}

#[test]
fn gqa_decode_rejects_bad_shapes_dtypes_lengths_and_options() {
    let (f16, bf16) = (DType::Float16, DType::BFloat16);
    let ok = DecodeOptions::default();
    assert!(dense(&[2, 8, 128], &[2, 16, 2, 128], f16, f16, &[16, 0], ok).is_ok());
    assert!(
        dense(
            &[2, 8, 64],
            &[2, 16, 8, 64],
            bf16,
            DType::Float8E4M3Fn,
            &[3, 1],
            ok
        )
        .is_ok()
    );
    let cases: Vec<(Result<GqaDecode, Error>, &str, &str)> = vec![
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                DType::Float32,
                DType::Float32,
                &[1, 1],
                ok,
            ),
            "q",
            "cast float32 inputs to bfloat16",
        ),
        (
            dense(&[2, 1024], &[2, 16, 2, 128], f16, f16, &[1, 1], ok),
            "q",
            "rank 3",
        ),
        (
            dense(&[2, 8, 96], &[2, 16, 2, 96], f16, f16, &[1, 1], ok),
            "q",
            "head dim 96",
        ),
        (
            dense(&[0, 8, 128], &[0, 16, 2, 128], f16, f16, &[], ok),
            "q",
            "empty",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 2, 128], f16, bf16, &[1, 1], ok),
            "k_cache",
            "float8_e4m3fn",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 128], f16, f16, &[1, 1], ok),
            "k_cache",
            "rank 4",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 3, 128], f16, f16, &[1, 1], ok),
            "k_cache",
            "H % H_kv",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 2, 64], f16, f16, &[1, 1], ok),
            "k_cache",
            "head dim",
        ),
        (
            dense(&[2, 8, 128], &[3, 16, 2, 128], f16, f16, &[1, 1], ok),
            "k_cache",
            "batch",
        ),
        (
            dense(&[2, 8, 128], &[2, 0, 2, 128], f16, f16, &[0, 0], ok),
            "k_cache",
            "empty",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 2, 128], f16, f16, &[1], ok),
            "seqlens",
            "one length per sequence",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 2, 128], f16, f16, &[17, 1], ok),
            "seqlens",
            "0..=16",
        ),
        (
            dense(&[2, 8, 128], &[2, 16, 2, 128], f16, f16, &[1, -1], ok),
            "seqlens",
            "0..=16",
        ),
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                f16,
                f16,
                &[1, 1],
                ok.sm_scale(0.0),
            ),
            "sm_scale",
            "finite and > 0",
        ),
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                f16,
                f16,
                &[1, 1],
                ok.sm_scale(f64::NAN),
            ),
            "sm_scale",
            "finite",
        ),
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                f16,
                f16,
                &[1, 1],
                ok.softcap(-1.0),
            ),
            "softcap",
            ">= 0",
        ),
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                f16,
                f16,
                &[1, 1],
                ok.softcap(f64::INFINITY),
            ),
            "softcap",
            "finite",
        ),
        (
            dense(
                &[2, 8, 128],
                &[2, 16, 2, 128],
                f16,
                f16,
                &[1, 1],
                ok.max_splits(0),
            ),
            "max_splits",
            "at least 1",
        ),
    ];
    assert_refused("gqa_decode", cases);
    // v_cache must be k_cache's spec.
    let err = GqaDecode::new(
        spec(&[2, 8, 128], f16),
        spec(&[2, 16, 2, 128], f16),
        spec(&[2, 15, 2, 128], f16),
        &[1, 1],
        ok,
        &Device::cpu(),
    )
    .unwrap_err();
    assert_eq!(field_of(&err), "v_cache", "{err:?}");
}

fn paged(
    pages: &[usize],
    table: &[i32],
    max_pages: usize,
    lens: &[i32],
) -> Result<GqaDecodePaged, Error> {
    let f16 = DType::Float16;
    GqaDecodePaged::new(
        spec(&[2, 4, 64], f16),
        spec(pages, f16),
        spec(pages, f16),
        table,
        max_pages,
        lens,
        DecodeOptions::default(),
        &Device::cpu(),
    )
}

#[test]
fn gqa_decode_paged_rejects_bad_tables_and_lengths() {
    // Two sequences, up to 2 pages of 16 each, a pool of 4 pages; unused slots may hold anything.
    let pool = [4, 16, 1, 64];
    assert!(paged(&pool, &[3, 0, 1, -7], 2, &[20, 16]).is_ok());
    assert!(paged(&pool, &[3, 99, 1, 99], 2, &[16, 0]).is_ok());
    let cases: Vec<(Result<GqaDecodePaged, Error>, &str, &str)> = vec![
        // An index a sequence uses, outside the pool: past the end, negative.
        (
            paged(&pool, &[3, 4, 1, -1], 2, &[20, 16]),
            "block_table",
            "4 (sequence 0, slot 1)",
        ),
        (
            paged(&pool, &[3, 0, -1, -1], 2, &[20, 1]),
            "block_table",
            "-1 (sequence 1, slot 0)",
        ),
        // The host copy is not B x max_pages entries.
        (
            paged(&pool, &[3, 0, 1], 2, &[20, 16]),
            "block_table",
            "B x max_pages",
        ),
        (
            paged(&pool, &[], 0, &[0, 0]),
            "block_table",
            "max_pages >= 1",
        ),
        // A length past max_pages * page_size.
        (
            paged(&pool, &[3, 0, 1, 2], 2, &[33, 16]),
            "seqlens",
            "0..=32",
        ),
        (
            paged(&[4, 16, 1, 32], &[3, 0, 1, 2], 2, &[1, 1]),
            "k_pages",
            "head dim",
        ),
    ];
    assert_refused("gqa_decode_paged", cases);
}

#[test]
fn forward_checks_its_tensors_against_the_plan() {
    let cpu = Device::cpu();
    let (f16, fp8) = (DType::Float16, DType::Float8E4M3Fn);
    let q_spec = spec(&[2, 4, 64], f16);
    let c_spec = spec(&[2, 8, 1, 64], f16);
    let op = GqaDecode::new(
        q_spec.clone(),
        c_spec.clone(),
        c_spec.clone(),
        &[8, 3],
        DecodeOptions::default(),
        &cpu,
    )
    .expect("plan");
    let q = Tensor::random(&q_spec, 1, &cpu).unwrap();
    let k = Tensor::random(&c_spec, 2, &cpu).unwrap();
    let v = Tensor::random(&c_spec, 3, &cpu).unwrap();
    let lens = Tensor::from_slice(&[8i32, 3], [2], &cpu).unwrap();
    assert!(op.forward(&q, &k, &v, &lens, None).is_ok());
    // The device copy of the lengths must hold the plan's.
    let stale = Tensor::from_slice(&[8i32, 4], [2], &cpu).unwrap();
    let err = op.forward(&q, &k, &v, &stale, None).unwrap_err();
    assert_eq!(field_of(&err), "seqlens", "{err:?}");
    assert!(
        err.to_string().contains("other lengths than the host copy"),
        "{err}"
    );
    // Another spec than the plan's.
    let err = op.forward(&q, &q, &v, &lens, None).unwrap_err();
    assert_eq!(field_of(&err), "k_cache", "{err:?}");
    // Scales belong to an fp8 cache only, and an fp8 cache needs them.
    let one = Tensor::from_f32_slice(&[1.0], [1], &cpu).unwrap();
    let err = op
        .forward(&q, &k, &v, &lens, Some((&one, &one)))
        .unwrap_err();
    assert_eq!(field_of(&err), "k_scale", "{err:?}");
    let c8 = spec(&[2, 8, 1, 64], fp8);
    let op8 = GqaDecode::new(
        q_spec.clone(),
        c8.clone(),
        c8.clone(),
        &[8, 3],
        DecodeOptions::default(),
        &cpu,
    )
    .unwrap();
    let (k8, v8) = (
        Tensor::random(&c8, 2, &cpu).unwrap(),
        Tensor::random(&c8, 3, &cpu).unwrap(),
    );
    let err = op8.forward(&q, &k8, &v8, &lens, None).unwrap_err();
    assert_eq!(field_of(&err), "k_scale", "{err:?}");
    let bad_scale = Tensor::from_f32_slice(&[1.0, 2.0], [2], &cpu).unwrap();
    let err = op8
        .forward(&q, &k8, &v8, &lens, Some((&one, &bad_scale)))
        .unwrap_err();
    assert_eq!(field_of(&err), "v_scale", "{err:?}");
    assert!(op8.forward(&q, &k8, &v8, &lens, Some((&one, &one))).is_ok());

    // Paged: the device copy of the table must hold the plan's entries.
    let pool = spec(&[3, 16, 1, 64], f16);
    let table = [2, 0, 1, -1];
    let op = GqaDecodePaged::new(
        q_spec,
        pool.clone(),
        pool.clone(),
        &table,
        2,
        &[20, 5],
        DecodeOptions::default(),
        &cpu,
    )
    .unwrap();
    let (kp, vp) = (
        Tensor::random(&pool, 2, &cpu).unwrap(),
        Tensor::random(&pool, 3, &cpu).unwrap(),
    );
    let lens = Tensor::from_slice(&[20i32, 5], [2], &cpu).unwrap();
    let good = Tensor::from_slice(&table, [2, 2], &cpu).unwrap();
    assert!(op.forward(&q, &kp, &vp, &good, &lens, None).is_ok());
    let other = Tensor::from_slice(&[0, 2, 1, -1], [2, 2], &cpu).unwrap();
    let err = op.forward(&q, &kp, &vp, &other, &lens, None).unwrap_err();
    assert_eq!(field_of(&err), "block_table", "{err:?}");
}

fn prefill(
    q: &[usize],
    kv: &[usize],
    (q_dtype, kv_dtype): (DType, DType),
    (cu_q, cu_k): (&[i32], &[i32]),
    options: PrefillOptions,
) -> Result<GqaPrefill, Error> {
    GqaPrefill::new(
        spec(q, q_dtype),
        spec(kv, kv_dtype),
        spec(kv, kv_dtype),
        cu_q,
        cu_k,
        options,
        &Device::cpu(),
    )
}

#[test]
fn gqa_prefill_rejects_bad_shapes_offsets_and_options() {
    let (f16, bf16) = (DType::Float16, DType::BFloat16);
    let ok = PrefillOptions::default();
    let cu: (&[i32], &[i32]) = (&[0, 3, 5], &[0, 4, 9]);
    assert!(prefill(&[5, 8, 128], &[9, 2, 128], (f16, f16), cu, ok).is_ok());
    // A sequence with no queries, or no keys, is part of a batch like any other.
    assert!(
        prefill(
            &[5, 8, 64],
            &[9, 2, 64],
            (bf16, bf16),
            (&[0, 0, 5], &[0, 9, 9]),
            ok
        )
        .is_ok()
    );
    let cases: Vec<(Result<GqaPrefill, Error>, &str, &str)> = vec![
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (DType::Float32, DType::Float32),
                cu,
                ok,
            ),
            "q",
            "cast float32 inputs to bfloat16",
        ),
        (
            prefill(&[5, 1024], &[9, 2, 128], (f16, f16), cu, ok),
            "q",
            "rank 3",
        ),
        (
            prefill(&[5, 8, 96], &[9, 2, 96], (f16, f16), cu, ok),
            "q",
            "head dim 96",
        ),
        (
            prefill(
                &[0, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                (&[0, 0], &[0, 9]),
                ok,
            ),
            "q",
            "empty",
        ),
        (
            prefill(&[5, 8, 128], &[9, 2, 128], (f16, bf16), cu, ok),
            "k",
            "q's dtype",
        ),
        (
            prefill(&[5, 8, 128], &[9, 2, 2, 128], (f16, f16), cu, ok),
            "k",
            "rank 3",
        ),
        (
            prefill(&[5, 8, 128], &[9, 3, 128], (f16, f16), cu, ok),
            "k",
            "H % H_kv",
        ),
        (
            prefill(&[5, 8, 128], &[9, 2, 64], (f16, f16), cu, ok),
            "k",
            "head dim",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[0, 2, 128],
                (f16, f16),
                (&[0, 5], &[0, 0]),
                ok,
            ),
            "k",
            "empty",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                (&[0, 5], &[0, 4, 9]),
                ok,
            ),
            "cu_seqlens_k",
            "as many offsets",
        ),
        (
            prefill(&[5, 8, 128], &[9, 2, 128], (f16, f16), (&[5], &[9]), ok),
            "cu_seqlens_q",
            "B + 1 >= 2",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                (&[1, 5], &[0, 9]),
                ok,
            ),
            "cu_seqlens_q",
            "first offset must be 0",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                (&[0, 4, 3, 5], &[0, 3, 6, 9]),
                ok,
            ),
            "cu_seqlens_q",
            "must not decrease",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                (&[0, 3, 5], &[0, 4, 8]),
                ok,
            ),
            "cu_seqlens_k",
            "total of 9 rows",
        ),
        (
            prefill(&[5, 8, 128], &[9, 2, 128], (f16, f16), cu, ok.sm_scale(0.0)),
            "sm_scale",
            "finite and > 0",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                cu,
                ok.softcap(f64::NAN),
            ),
            "softcap",
            ">= 0",
        ),
        (
            prefill(
                &[5, 8, 128],
                &[9, 2, 128],
                (f16, f16),
                cu,
                ok.window_left(-2),
            ),
            "window_left",
            "-1 (no window)",
        ),
    ];
    assert_refused("gqa_prefill", cases);
}

#[test]
fn gqa_prefill_forward_checks_its_tensors_against_the_plan() {
    let cpu = Device::cpu();
    let f16 = DType::Float16;
    let (q_spec, kv_spec) = (spec(&[5, 4, 64], f16), spec(&[9, 1, 64], f16));
    let (cu_q, cu_k) = ([0, 3, 5], [0, 4, 9]);
    let options = PrefillOptions::default().return_lse(true);
    let op = GqaPrefill::new(
        q_spec.clone(),
        kv_spec.clone(),
        kv_spec.clone(),
        &cu_q,
        &cu_k,
        options,
        &cpu,
    )
    .expect("plan");
    let q = Tensor::random(&q_spec, 1, &cpu).unwrap();
    let k = Tensor::random(&kv_spec, 2, &cpu).unwrap();
    let v = Tensor::random(&kv_spec, 3, &cpu).unwrap();
    let offsets = |cu: &[i32]| Tensor::from_slice(cu, [3], &cpu).unwrap();
    let (tq, tk) = (offsets(&cu_q), offsets(&cu_k));
    let out = op.forward(&q, &k, &v, &tq, &tk).expect("runs");
    assert_eq!(out.lse.map(|l| l.shape().to_vec()), Some(vec![4, 5]));
    // The device copies of the offsets must hold the plan's.
    let err = op
        .forward(&q, &k, &v, &offsets(&[0, 2, 5]), &tk)
        .unwrap_err();
    assert_eq!(field_of(&err), "cu_seqlens_q", "{err:?}");
    assert!(
        err.to_string().contains("other offsets than the host copy"),
        "{err}"
    );
    let err = op
        .forward(&q, &k, &v, &tq, &offsets(&[0, 5, 9]))
        .unwrap_err();
    assert_eq!(field_of(&err), "cu_seqlens_k", "{err:?}");
    // Another spec than the plan's.
    let err = op.forward(&q, &q, &v, &tq, &tk).unwrap_err();
    assert_eq!(field_of(&err), "k", "{err:?}");
    let short = Tensor::from_slice(&[0i32, 5], [2], &cpu).unwrap();
    let err = op.forward(&q, &k, &v, &short, &tk).unwrap_err();
    assert_eq!(field_of(&err), "cu_seqlens_q", "{err:?}");
}
