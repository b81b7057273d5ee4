//! NaN stays NaN, and the integer limits a plan accepts stay correct, in both attention kernels,
//! on every backend: each test runs on the CPU and on the GPU (the emulated device in CI, which
//! runs these tests with `TILEOPS_REQUIRE_GPU=1`; without a GPU they print `SKIP:` for it).
//!
//! - A NaN in q, in a key a row sees, or in an fp8 scale gives NaN in every element of that row's
//!   `o` and in its `lse`; a NaN element of a value it sees, in that element's column of `o` only.
//!   The rows that do not see it keep their values. Only a row
//!   with no visible key gives `o = 0, lse = -inf`.
//! - A paged pool's rows past a sequence's end (in its last page) may hold anything, NaN
//!   included: they never reach the output.
//! - `window_left` up to `i32::MAX` (accepted by the plan) is as wide as it says: past the longest
//!   key range it cuts nothing.

use super::gpu::{Case as DecodeCase, Layout, Planned, problem as decode_problem, reference};
use super::prefill_gpu::{Case as PrefillCase, problem as prefill_problem, run as prefill_run};
use crate::common::gpu_or_skip;
use tileops::{DType, Device};

/// The backends a test runs on: the CPU, and the GPU when there is one.
fn backends(test: &str) -> Vec<Device> {
    let mut out = vec![Device::cpu()];
    out.extend(gpu_or_skip(test));
    out
}

/// The columns of `row` (of `width`) that are NaN.
fn nan_columns(values: &[f64], row: usize, width: usize) -> Vec<usize> {
    let r = &values[row * width..][..width];
    (0..width).filter(|&c| r[c].is_nan()).collect()
}

/// The NaN columns of a row the NaN reaches: every one for a NaN score (q, a key, a scale),
/// since it reaches the softmax weights; only the value's own column for a NaN value element.
fn poisoned_columns(what: &str, value_column: usize, width: usize) -> Vec<usize> {
    if what == "value" {
        vec![value_column]
    } else {
        (0..width).collect()
    }
}

fn decode_case(heads: usize, kv_heads: usize, lens: Vec<i32>, rows: usize) -> DecodeCase {
    DecodeCase {
        heads,
        kv_heads,
        dim: 64,
        lens,
        rows,
        softcap: 0.0,
        return_lse: true,
        max_splits: None,
    }
}

#[test]
fn decode_nan_in_q_a_key_a_value_or_a_scale_is_nan_out() {
    // Two sequences, 4 query heads over 2 KV heads (heads 0-1 read KV head 0, 2-3 KV head 1).
    let case = decode_case(4, 2, vec![70, 33], 72);
    for device in backends("decode_nan_in_q_a_key_a_value_or_a_scale_is_nan_out") {
        for (what, layout, cache) in [
            ("q", Layout::Dense, DType::BFloat16),
            ("key", Layout::Dense, DType::Float16),
            ("value", Layout::Paged, DType::BFloat16),
            ("k_scale", Layout::Dense, DType::Float8E4M3Fn),
        ] {
            let dtype = if cache == DType::Float16 {
                DType::Float16
            } else {
                DType::BFloat16
            };
            let mut p = decode_problem(&case, dtype, cache, layout, 11);
            let [_, rows, kv_heads, dim] = p.cache_shape;
            // Key 40 of sequence 0, KV head 1 (its row in the pool when paged).
            let row = match layout {
                Layout::Dense => 40,
                Layout::Paged => p.table[40 / rows] as usize * rows + 40 % rows,
            };
            let at = (row * kv_heads + 1) * dim + 5;
            let mut scales = (cache == DType::Float8E4M3Fn).then_some((0.75, 1.25));
            match what {
                "q" => p.q[(4 + 2) * dim + 3] = f64::NAN, // sequence 1, head 2
                "key" => p.k[at] = f64::NAN,
                "value" => p.v[at] = f64::NAN,
                _ => scales = Some((f64::NAN, 1.25)),
            }
            let planned = Planned::new(&case, &p, dtype, cache, layout, &device);
            let (o, lse) = planned.run(&p, (dtype, cache), scales, &case.lens, &p.table, &device);
            let lse = lse.expect("lse");
            let label = format!("NaN {what} on {device}");
            // The rows the NaN reaches: (sequence, head).
            let poisoned: &[(usize, usize)] = match what {
                "q" => &[(1, 2)],
                "key" | "value" => &[(0, 2), (0, 3)],
                _ => &[
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (0, 3),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (1, 3),
                ],
            };
            for b in 0..2 {
                for h in 0..4 {
                    let r = b * 4 + h;
                    let nan = nan_columns(&o, r, dim);
                    if poisoned.contains(&(b, h)) {
                        assert_eq!(
                            nan,
                            poisoned_columns(what, 5, dim),
                            "{label}: the NaN columns of o, sequence {b} head {h}"
                        );
                        // A NaN value reaches o only; a NaN score reaches the lse too.
                        assert_eq!(lse[r].is_nan(), what != "value", "{label}: lse {b} {h}");
                    } else {
                        assert!(
                            nan.is_empty() && lse[r].is_finite(),
                            "{label}: sequence {b} head {h}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn decode_rows_without_keys_and_pool_rows_past_the_end() {
    // Sequence 1 is empty: o = 0 and lse = -inf even with a NaN v_scale. Sequence 0 ends at key
    // 21 of a 16-row page: the rest of its last page (and a spare page) holds NaN, which the
    // reference never reads and the kernel must not either.
    let case = decode_case(4, 2, vec![21, 0], 16);
    for device in backends("decode_rows_without_keys_and_pool_rows_past_the_end") {
        for cache in [DType::BFloat16, DType::Float8E4M3Fn] {
            let mut p = decode_problem(&case, DType::BFloat16, cache, Layout::Paged, 17);
            let [pages, rows, kv_heads, dim] = p.cache_shape;
            let last = p.table[1] as usize; // sequence 0's second page
            let used: Vec<usize> = p
                .table
                .iter()
                .filter(|&&x| x >= 0)
                .map(|&x| x as usize)
                .collect();
            for page in 0..pages {
                let from = if page == last { 21 % rows } else { 0 };
                if page != last && used.contains(&page) {
                    continue;
                }
                for r in from..rows {
                    for x in &mut p.v[((page * rows + r) * kv_heads) * dim..][..kv_heads * dim] {
                        *x = f64::NAN;
                    }
                    for x in &mut p.k[((page * rows + r) * kv_heads) * dim..][..kv_heads * dim] {
                        *x = f64::NAN;
                    }
                }
            }
            let scales = (cache == DType::Float8E4M3Fn).then_some((0.75, f64::NAN));
            let planned = Planned::new(&case, &p, DType::BFloat16, cache, Layout::Paged, &device);
            let (o, lse) = planned.run(
                &p,
                (DType::BFloat16, cache),
                scales,
                &case.lens,
                &p.table,
                &device,
            );
            let lse = lse.expect("lse");
            let label = format!("{cache} on {device}");
            for h in 0..4 {
                assert!(
                    o[(4 + h) * dim..][..dim].iter().all(|&x| x == 0.0),
                    "{label}: empty row"
                );
                assert_eq!(lse[4 + h], f64::NEG_INFINITY, "{label}: empty row lse");
            }
            if cache == DType::BFloat16 {
                let (want, want_lse) = reference(
                    &case,
                    &p,
                    Layout::Paged,
                    (1.0, 1.0),
                    planned.sm_scale(),
                    false,
                );
                for h in 0..4 {
                    for d in 0..dim {
                        let (g, w) = (o[h * dim + d], want[h * dim + d]);
                        assert!(
                            g.is_finite() && (g - w).abs() <= 2e-2 * (1.0 + w.abs()),
                            "{label}: {g} vs {w}"
                        );
                    }
                    assert!(
                        (lse[h] - want_lse[h]).abs() <= 1e-4 * want_lse[h].abs().max(1.0),
                        "{label}"
                    );
                }
            }
        }
    }
}

fn prefill_case(
    q_lens: Vec<i32>,
    kv_lens: Vec<i32>,
    causal: bool,
    window_left: i64,
) -> PrefillCase {
    PrefillCase {
        heads: 2,
        kv_heads: 1,
        q_lens,
        kv_lens,
        causal,
        window_left,
        softcap: 0.0,
        return_lse: true,
    }
}

#[test]
fn prefill_nan_in_q_or_a_visible_key_is_nan_out() {
    let dim = 64;
    for device in backends("prefill_nan_in_q_or_a_visible_key_is_nan_out") {
        // Non-causal, one sequence of 20 queries over 30 keys.
        let case = prefill_case(vec![20], vec![30], false, -1);
        for what in ["q", "key", "value"] {
            let mut p = prefill_problem(&case, dim, DType::BFloat16, 23);
            match what {
                "q" => p.q[(7 * 2 + 1) * dim + 3] = f64::NAN, // query 7, head 1
                "key" => p.k[12 * dim + 9] = f64::NAN,        // key 12 (every head reads it)
                _ => p.v[12 * dim + 9] = f64::NAN,
            }
            let (_, o, lse) = prefill_run(&case, &p, DType::BFloat16, &device, (&p.cu_q, &p.cu_k));
            let lse = lse.expect("lse");
            let label = format!("NaN {what} on {device}");
            for i in 0..20 {
                for h in 0..2 {
                    let r = i * 2 + h;
                    let nan = nan_columns(&o, r, dim);
                    let reached = what != "q" || (i == 7 && h == 1);
                    if reached {
                        assert_eq!(
                            nan,
                            poisoned_columns(what, 9, dim),
                            "{label}: the NaN columns of o, query {i} head {h}"
                        );
                        assert_eq!(
                            lse[h * 20 + i].is_nan(),
                            what != "value",
                            "{label}: lse {i} {h}"
                        );
                    } else {
                        assert!(
                            nan.is_empty() && lse[h * 20 + i].is_finite(),
                            "{label}: query {i} head {h}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn prefill_windows_up_to_i32_max_cut_nothing_past_the_keys() {
    let dim = 64;
    for device in backends("prefill_windows_up_to_i32_max_cut_nothing_past_the_keys") {
        // 3 queries over 1 key: each sees it (bottom-right causal: key 0 is on every diagonal).
        for window in [
            i64::from(i32::MAX),
            i64::from(i32::MAX) - 1,
            i64::from(i32::MAX) - 100,
            1,
        ] {
            for causal in [false, true] {
                let case = prefill_case(vec![3], vec![1], causal, window);
                let p = prefill_problem(&case, dim, DType::Float16, 29);
                let (_, o, lse) =
                    prefill_run(&case, &p, DType::Float16, &device, (&p.cu_q, &p.cu_k));
                let lse = lse.expect("lse");
                let label = format!("window {window}, causal {causal} on {device}");
                let seen = |i: usize| !causal || i + 1 >= 3; // causal: only the last query
                for i in 0..3 {
                    for h in 0..2 {
                        let row = &o[(i * 2 + h) * dim..][..dim];
                        if seen(i) {
                            // One visible key: o is its value, rounded to f16.
                            for (d, &x) in row.iter().enumerate() {
                                assert!(
                                    (x - p.v[d]).abs() <= 1e-3 * (1.0 + p.v[d].abs()),
                                    "{label}: {x} vs {}",
                                    p.v[d]
                                );
                            }
                            assert!(lse[h * 3 + i].is_finite(), "{label}");
                        } else {
                            assert!(row.iter().all(|&x| x == 0.0), "{label}: query {i}");
                            assert_eq!(lse[h * 3 + i], f64::NEG_INFINITY, "{label}");
                        }
                    }
                }
            }
        }
    }
}
