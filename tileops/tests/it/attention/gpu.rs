//! gqa_decode and gqa_decode_paged on the GPU against the f64 reference, for every entry point
//! (dense and paged, 16-bit and fp8 cache, f16 and bf16 q) x head dim (64, 128, 256), with the
//! outputs poisoned first so that an element the kernels never write shows up.
//!
//! The cases reach: ragged lengths with 0 and 1, a length that ends mid-chunk and (paged)
//! mid-page, the last page partly filled, pages in shuffled order with spare pages in the pool,
//! page sizes 16, 32, 64, 128 and 256, group sizes 1, 4, 8 and 16 (several head tiles per KV head
//! where a block serves fewer heads than the group), softcap on and off, the lse on and off, many
//! splits (the merge kernel) and one (the one-pass path). Then the device copies that disagree
//! with the plan: a length past the cache is clamped, a page index outside the pool gives NaN for
//! that sequence and leaves the others right, and nothing is read out of bounds.
//!
//! `o` is measured against `Σ_j p_j |v_j|` (the magnitude of the terms it averages), with the
//! per-dtype bounds of the other ops; `lse` (float32) within 2e-5 of `max(|lse|, 1)`.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one row per case and `WORST <op> <dtype>` lines.

use crate::common::{KeepWorst, Measures, POISON, bound, download, gpu_or_skip, worst_error};
use tileops::ops::reference::{DecodeProblem, gqa_decode};
use tileops::ops::{DecodeOptions, DecodeOutput, GqaDecode, GqaDecodePaged};
use tileops::{DType, Device, Tensor, TensorSpec};

/// The bound of the lse, relative to `max(|lse|, 1)`: f32 arithmetic over a few hundred keys.
const LSE_BOUND: f64 = 2e-5;

#[test]
fn gqa_decode_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("gqa_decode_matches_the_reference") else {
        return;
    };
    decode_cases(&gpu, Layout::Dense).finish();
}

#[test]
fn gqa_decode_paged_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("gqa_decode_paged_matches_the_reference") else {
        return;
    };
    decode_cases(&gpu, Layout::Paged).finish();
}

/// Dense or paged cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Layout {
    Dense,
    Paged,
}

/// One decode problem of the tests.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub heads: usize,
    pub kv_heads: usize,
    pub dim: usize,
    pub lens: Vec<i32>,
    /// Dense: the cache's S_max; paged: the page size.
    pub rows: usize,
    pub softcap: f64,
    pub return_lse: bool,
    pub max_splits: Option<usize>,
}

/// Two cases per (q dtype, cache, head dim): ragged lengths over many splits with the lse, and a
/// one-pass batch with a softcap; the group size and (paged) the page size vary with `index`.
pub(crate) fn cases_for(dim: usize, index: usize, layout: Layout) -> Vec<Case> {
    let page_sizes = [16, 32, 64, 128, 256];
    let page = page_sizes[index % page_sizes.len()];
    // 300 keys end mid-chunk (chunks are whole steps of 16..128 keys) and mid-page for every
    // page size; 37 mid-page too.
    let (long, short) = (300, 37);
    let rows = |longest: usize| match layout {
        Layout::Dense => longest + 5,
        Layout::Paged => page,
    };
    let groups = [1, 8, 16];
    let group = groups[index % groups.len()];
    vec![
        Case {
            heads: 8,
            kv_heads: 2,
            dim,
            lens: vec![0, 1, long as i32],
            rows: rows(long),
            softcap: 0.0,
            return_lse: true,
            max_splits: None,
        },
        Case {
            heads: 2 * group,
            kv_heads: 2,
            dim,
            lens: vec![long as i32 - 100, short],
            rows: rows(long),
            softcap: 50.0,
            return_lse: false,
            max_splits: Some(1),
        },
    ]
}

/// The caches a test builds: values, and for a paged layout the pool order.
pub(crate) struct Problem {
    pub q: Vec<f64>,
    /// Dense `[B, S_max, H_kv, D]` or paged `[num_pages, page_size, H_kv, D]`, already rounded
    /// to the cache dtype.
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    pub cache_shape: [usize; 4],
    /// Paged: `[B, max_pages]` row-major, unused slots -1.
    pub table: Vec<i32>,
    pub max_pages: usize,
}

/// Random q and caches for `case` (cache values rounded to `cache`), with a shuffled pool with
/// spare pages when paged.
pub(crate) fn problem(
    case: &Case,
    dtype: DType,
    cache: DType,
    layout: Layout,
    seed: u64,
) -> Problem {
    let batch = case.lens.len();
    let rounded = |shape: &[usize], dtype: DType, seed: u64| {
        Tensor::random(&TensorSpec::new(shape, dtype), seed, &Device::cpu())
            .expect("random")
            .to_vec_f64()
            .expect("values")
    };
    let q = rounded(&[batch, case.heads, case.dim], dtype, seed);
    let (cache_shape, table, max_pages) = match layout {
        Layout::Dense => ([batch, case.rows, case.kv_heads, case.dim], Vec::new(), 0),
        Layout::Paged => {
            let page = case.rows;
            let max_pages = case
                .lens
                .iter()
                .map(|&l| (l as usize).div_ceil(page))
                .max()
                .unwrap_or(1)
                .max(1)
                + 1;
            let used: usize = case.lens.iter().map(|&l| (l as usize).div_ceil(page)).sum();
            let num_pages = used + 3;
            // Pages handed out from a shuffled pool (a fixed permutation of the seed).
            let mut pool: Vec<i32> = (0..num_pages as i32).collect();
            let mut state = seed;
            for i in (1..pool.len()).rev() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                pool.swap(i, (state >> 33) as usize % (i + 1));
            }
            let mut next = pool.into_iter();
            let mut table = vec![-1; batch * max_pages];
            for (b, &len) in case.lens.iter().enumerate() {
                for slot in &mut table[b * max_pages..][..(len as usize).div_ceil(page)] {
                    *slot = next.next().expect("enough pages");
                }
            }
            ([num_pages, page, case.kv_heads, case.dim], table, max_pages)
        }
    };
    Problem {
        q,
        k: rounded(&cache_shape, cache, seed + 1),
        v: rounded(&cache_shape, cache, seed + 2),
        cache_shape,
        table,
        max_pages,
    }
}

/// The reference of `case` on `problem`, with the values as given or their magnitudes (`abs`).
pub(crate) fn reference(
    case: &Case,
    p: &Problem,
    layout: Layout,
    scales: (f64, f64),
    sm_scale: f64,
    abs: bool,
) -> (Vec<f64>, Vec<f64>) {
    let [_, rows, kv_heads, dim] = p.cache_shape;
    let v: Vec<f64> = if abs {
        p.v.iter().map(|x| x.abs()).collect()
    } else {
        p.v.clone()
    };
    let row_of = |b: usize, key: usize| match layout {
        Layout::Dense => b * rows + key,
        Layout::Paged => p.table[b * p.max_pages + key / rows] as usize * rows + key % rows,
    };
    let r = gqa_decode(
        &DecodeProblem {
            q: &p.q,
            batch: case.lens.len(),
            heads: case.heads,
            kv_heads,
            dim,
            lens: &case.lens,
            sm_scale,
            softcap: case.softcap,
            k_scale: scales.0,
            v_scale: scales.1,
        },
        |b, key, kvh| {
            let at = (row_of(b, key) * kv_heads + kvh) * dim;
            (&p.k[at..at + dim], &v[at..at + dim])
        },
    );
    (r.o, r.lse)
}

/// A planned decode of either layout, and its device inputs.
pub(crate) enum Planned {
    Dense(GqaDecode),
    Paged(GqaDecodePaged),
}

impl Planned {
    pub(crate) fn new(
        case: &Case,
        p: &Problem,
        dtype: DType,
        cache: DType,
        layout: Layout,
        device: &Device,
    ) -> Planned {
        let batch = case.lens.len();
        let q = TensorSpec::new([batch, case.heads, case.dim], dtype);
        let c = TensorSpec::new(p.cache_shape, cache);
        let mut options = DecodeOptions::default()
            .softcap(case.softcap)
            .return_lse(case.return_lse);
        if let Some(splits) = case.max_splits {
            options = options.max_splits(splits);
        }
        match layout {
            Layout::Dense => Planned::Dense(
                GqaDecode::new(q, c.clone(), c, &case.lens, options, device).expect("valid plan"),
            ),
            Layout::Paged => Planned::Paged(
                GqaDecodePaged::new(
                    q,
                    c.clone(),
                    c,
                    &p.table,
                    p.max_pages,
                    &case.lens,
                    options,
                    device,
                )
                .expect("valid plan"),
            ),
        }
    }

    pub(crate) fn sm_scale(&self) -> f64 {
        match self {
            Planned::Dense(op) => op.sm_scale(),
            Planned::Paged(op) => op.sm_scale(),
        }
    }

    pub(crate) fn split(&self, sms: usize) -> (usize, usize, usize) {
        match self {
            Planned::Dense(op) => op.split(sms),
            Planned::Paged(op) => op.split(sms),
        }
    }

    /// Runs on `device` into poisoned outputs: `(o, lse)` as f64, with the given device copies
    /// of the lengths and the table.
    pub(crate) fn run(
        &self,
        p: &Problem,
        (dtype, cache): (DType, DType),
        scales: Option<(f64, f64)>,
        device_lens: &[i32],
        device_table: &[i32],
        device: &Device,
    ) -> (Vec<f64>, Option<Vec<f64>>) {
        let batch = device_lens.len();
        let upload = |values: &[f64], shape: &[usize], dtype: DType| {
            Tensor::from_f64_rounded(values, &TensorSpec::new(shape, dtype), device)
                .expect("upload")
        };
        let q = upload(
            &p.q,
            &[
                batch,
                p.q.len() / batch / p.cache_shape[3],
                p.cache_shape[3],
            ],
            dtype,
        );
        let k = upload(&p.k, &p.cache_shape, cache);
        let v = upload(&p.v, &p.cache_shape, cache);
        let seqlens = Tensor::from_slice(device_lens, [batch], device).expect("seqlens");
        let scale_tensors = scales.map(|(ks, vs)| {
            (
                Tensor::from_f64_rounded(&[ks], &TensorSpec::new([1], DType::Float32), device)
                    .expect("k_scale"),
                Tensor::from_f64_rounded(&[vs], &TensorSpec::new([1], DType::Float32), device)
                    .expect("v_scale"),
            )
        });
        let scales = scale_tensors.as_ref().map(|(k, v)| (k, v));
        let (o_spec, lse_spec) = match self {
            Planned::Dense(op) => op.output_specs(),
            Planned::Paged(op) => op.output_specs(),
        };
        let mut out = DecodeOutput {
            o: Tensor::full(&o_spec, POISON, device).expect("poisoned o"),
            lse: lse_spec.map(|s| Tensor::full(&s, POISON, device).expect("poisoned lse")),
        };
        match self {
            Planned::Dense(op) => op.forward_into(&q, &k, &v, &seqlens, scales, &mut out),
            Planned::Paged(op) => {
                let table =
                    Tensor::from_slice(device_table, [batch, p.max_pages], device).expect("table");
                op.forward_into(&q, &k, &v, &table, &seqlens, scales, &mut out)
            }
        }
        .expect("launch");
        let o = download(device, &out.o);
        let lse = out.lse.as_ref().map(|t| download(device, t));
        (o, lse)
    }
}

fn cache_label(cache: DType) -> &'static str {
    if cache == DType::Float8E4M3Fn {
        "fp8"
    } else {
        "16-bit"
    }
}

/// Records `o` against the reference (relative to `Σ p |v|`) and `lse` (relative to
/// `max(|lse|, 1)`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    report: &mut Measures,
    op: &str,
    label: &str,
    dtype: DType,
    (o, lse): (&[f64], Option<&[f64]>),
    want: &(Vec<f64>, Vec<f64>),
    scale: &[f64],
) {
    let err = worst_error(o, &want.0, scale, dtype);
    let detail = format!("got {}, want {}", o[err.1], want.0[err.1]);
    report.record(op, label, dtype, "o", err, bound(dtype), detail);
    if let Some(lse) = lse {
        let err = crate::common::worst_by(lse, &want.1, |_, g, w| {
            crate::common::element_error(g, w, || w.abs().max(1.0))
        });
        let detail = format!("got {}, want {}", lse[err.1], want.1[err.1]);
        report.record(op, label, dtype, "lse", err, LSE_BOUND, detail);
    }
}

/// Every (q dtype, cache, head dim) of one layout over [`cases_for`].
pub(crate) fn decode_cases(device: &Device, layout: Layout) -> Measures {
    decode_sweep(device, layout, &[64, 128, 256], |dim, index| {
        cases_for(dim, index, layout)
    })
}

/// The coverage test's share: every entry point once — each q dtype x cache x layout x head dim
/// x heads per block (a group of 4 takes the 4-head instantiation, a group of 8 the 8-head one
/// with a 16-bit cache), small problems, and at head dim 128 the first case of [`cases_for`]
/// (ragged, several splits: the merge kernel); the family tests above sweep the rest.
pub(crate) fn decode_entry_cases(device: &Device, layout: Layout) -> Measures {
    decode_sweep(device, layout, &[64, 128, 256], |dim, index| {
        let rows = |longest: usize| match layout {
            Layout::Dense => longest + 3,
            Layout::Paged => 16,
        };
        let small = |heads: usize, lens: Vec<i32>| Case {
            heads,
            kv_heads: 2,
            dim,
            rows: rows(lens.iter().copied().max().unwrap_or(0) as usize),
            lens,
            softcap: 0.0,
            return_lse: true,
            max_splits: Some(1),
        };
        let mut cases = vec![small(8, vec![37]), small(16, vec![5, 37])];
        if dim == 128 {
            cases.extend(cases_for(dim, index, layout).into_iter().take(1));
        }
        cases
    })
}

/// The cases `cases(dim, index)` for every q dtype, cache and head dim of `dims`, on one layout
/// (`index` counts the (q dtype, cache, head dim) combinations, to vary the cases between them).
fn decode_sweep(
    device: &Device,
    layout: Layout,
    dims: &[usize],
    cases: impl Fn(usize, usize) -> Vec<Case>,
) -> Measures {
    let op = match layout {
        Layout::Dense => "gqa_decode",
        Layout::Paged => "gqa_decode_paged",
    };
    let mut report = Measures::new(64, KeepWorst::Largest, 0);
    let sms = device.sm_count().map_or(132, |n| n as usize);
    let mut seed = 4100;
    let mut index = 0;
    for dtype in [DType::Float16, DType::BFloat16] {
        for cache in [dtype, DType::Float8E4M3Fn] {
            for &dim in dims {
                index += 1;
                for case in cases(dim, index) {
                    seed += 3;
                    let p = problem(&case, dtype, cache, layout, seed);
                    let planned = Planned::new(&case, &p, dtype, cache, layout, device);
                    let scales = (cache == DType::Float8E4M3Fn).then_some((0.75, 1.25));
                    let got = planned.run(&p, (dtype, cache), scales, &case.lens, &p.table, device);
                    let s = scales.unwrap_or((1.0, 1.0));
                    let want = reference(&case, &p, layout, s, planned.sm_scale(), false);
                    let magnitude = reference(&case, &p, layout, s, planned.sm_scale(), true).0;
                    let (splits, _, tiles) = planned.split(sms);
                    let label = format!(
                        "{} D{dim} H{}/{} lens {:?}{}{} splits {splits} tiles {tiles}",
                        cache_label(cache),
                        case.heads,
                        case.kv_heads,
                        case.lens,
                        if layout == Layout::Paged {
                            format!(" page {}", case.rows)
                        } else {
                            String::new()
                        },
                        if case.softcap > 0.0 { " softcap" } else { "" },
                    );
                    record(
                        &mut report,
                        op,
                        &label,
                        dtype,
                        (&got.0, got.1.as_deref()),
                        &want,
                        &magnitude,
                    );
                }
            }
        }
    }
    report
}

/// Device copies that disagree with the plan never read out of bounds: a length past the cache
/// is clamped to it (dense), and a page index outside the pool makes that sequence NaN while the
/// others stay right (paged). The emulator's guard zones (and its ASan pass) would flag any read
/// past an allocation.
#[test]
fn device_copies_that_disagree_with_the_plan_stay_in_bounds() {
    let Some(device) = gpu_or_skip("device_copies_that_disagree_with_the_plan_stay_in_bounds")
    else {
        return;
    };
    let dtype = DType::Float16;
    let mut report = Measures::new(64, KeepWorst::Largest, 0);
    // Dense: the plan says [40, 7]; the device copy says [1 << 30, 7]: the kernel reads the 45
    // keys of the cache, which is what the reference of the clamped lengths computes.
    let case = Case {
        heads: 4,
        kv_heads: 1,
        dim: 128,
        lens: vec![40, 7],
        rows: 45,
        softcap: 0.0,
        return_lse: true,
        max_splits: None,
    };
    let p = problem(&case, dtype, dtype, Layout::Dense, 77);
    let planned = Planned::new(&case, &p, dtype, dtype, Layout::Dense, &device);
    let got = planned.run(&p, (dtype, dtype), None, &[1 << 30, 7], &[], &device);
    let clamped = Case {
        lens: vec![45, 7],
        ..case.clone()
    };
    let want = reference(
        &clamped,
        &p,
        Layout::Dense,
        (1.0, 1.0),
        planned.sm_scale(),
        false,
    );
    let magnitude = reference(
        &clamped,
        &p,
        Layout::Dense,
        (1.0, 1.0),
        planned.sm_scale(),
        true,
    )
    .0;
    record(
        &mut report,
        "gqa_decode",
        "device seqlens past S_max",
        dtype,
        (&got.0, got.1.as_deref()),
        &want,
        &magnitude,
    );

    // Paged: sequence 0's second page index is past the pool on the device (the plan's is good).
    let case = Case {
        heads: 4,
        kv_heads: 2,
        dim: 64,
        lens: vec![40, 20],
        rows: 16,
        softcap: 0.0,
        return_lse: true,
        max_splits: None,
    };
    let p = problem(&case, dtype, dtype, Layout::Paged, 78);
    let planned = Planned::new(&case, &p, dtype, dtype, Layout::Paged, &device);
    let mut bad_table = p.table.clone();
    bad_table[1] = p.cache_shape[0] as i32; // one page past the pool
    let (o, lse) = planned.run(&p, (dtype, dtype), None, &case.lens, &bad_table, &device);
    let lse = lse.expect("lse");
    let row = case.heads * case.dim;
    assert!(
        o[..row].iter().all(|x| x.is_nan()),
        "sequence 0's outputs must be NaN"
    );
    assert!(
        lse[..case.heads].iter().all(|x| x.is_nan()),
        "sequence 0's lse must be NaN"
    );
    let want = reference(
        &case,
        &p,
        Layout::Paged,
        (1.0, 1.0),
        planned.sm_scale(),
        false,
    );
    let magnitude = reference(
        &case,
        &p,
        Layout::Paged,
        (1.0, 1.0),
        planned.sm_scale(),
        true,
    )
    .0;
    let tail = |v: &[f64], n: usize| v[n..].to_vec();
    let want_tail = (tail(&want.0, row), tail(&want.1, case.heads));
    record(
        &mut report,
        "gqa_decode_paged",
        "sequence 1 beside a bad page of sequence 0",
        dtype,
        (&o[row..], Some(&lse[case.heads..])),
        &want_tail,
        &magnitude[row..],
    );
    report.finish();
}
