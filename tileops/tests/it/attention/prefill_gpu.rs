//! gqa_prefill on the GPU against the f64 reference, for every entry point (f16 and bf16 x head
//! dim 64, 128, 256), with the outputs poisoned first so that an element the kernel never writes
//! shows up.
//!
//! The cases reach, in packed batches of mixed lengths: sequences of 1, 15, 16, 17, 64, 127 and
//! 129 queries and keys (the kernel's 16-row warp slices and 64-row tiles, and one past them);
//! causal masks with fewer queries than keys (bottom-right aligned) and with more (leading
//! queries that see no key: o = 0, lse = -inf); sliding windows that cut tiles; a softcap; group
//! sizes 1, 4 and 8; the lse on and off.
//!
//! `o` is measured against `Σ_j p_j |v_j|` (the magnitude of the terms it averages), with the
//! per-dtype bounds of the other ops: the kernel rounds the probabilities to q's dtype before
//! `P·V` on the tensor cores (as FlashAttention-2), one rounding of the dtype's unit per weight,
//! inside those bounds. `lse` (float32) within 2e-5 of `max(|lse|, 1)`.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one row per case and `WORST <op> <dtype>` lines.

use super::gpu::record;
use crate::common::{KeepWorst, Measures, POISON, download, gpu_or_skip};
use tileops::ops::reference::{PrefillProblem, gqa_prefill};
use tileops::ops::{GqaPrefill, PrefillOptions, PrefillOutput};
use tileops::{DType, Device, Tensor, TensorSpec};

#[test]
fn gqa_prefill_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("gqa_prefill_matches_the_reference") else {
        return;
    };
    prefill_cases(&gpu).finish();
}

/// One prefill problem of the tests.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub heads: usize,
    pub kv_heads: usize,
    pub q_lens: Vec<i32>,
    pub kv_lens: Vec<i32>,
    pub causal: bool,
    pub window_left: i64,
    pub softcap: f64,
    pub return_lse: bool,
}

/// The cases of every (dtype, head dim): three batches of mixed lengths between them reaching
/// every tile edge, both causal alignments, a window, a softcap and three group sizes.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        // Non-causal, group 8, with the lse: tile edges on both axes.
        Case {
            heads: 8,
            kv_heads: 1,
            q_lens: vec![1, 15, 16, 17, 129],
            kv_lens: vec![1, 15, 16, 17, 129],
            causal: false,
            window_left: -1,
            softcap: 0.0,
            return_lse: true,
        },
        // Causal with fewer queries than keys (a chunk after a prefix), group 1, softcap.
        Case {
            heads: 2,
            kv_heads: 2,
            q_lens: vec![17, 64, 1, 127],
            kv_lens: vec![80, 64, 33, 127],
            causal: true,
            window_left: -1,
            softcap: 30.0,
            return_lse: false,
        },
        // Causal with a window of 41 keys that cuts tiles, group 4, and a sequence with more
        // queries than keys: its first 15 queries see none.
        Case {
            heads: 4,
            kv_heads: 1,
            q_lens: vec![129, 20, 16],
            kv_lens: vec![129, 5, 100],
            causal: true,
            window_left: 40,
            softcap: 0.0,
            return_lse: true,
        },
    ]
}

/// The coverage test's share: one small case for every entry point.
pub(crate) fn entry_case() -> Case {
    Case {
        heads: 4,
        kv_heads: 2,
        q_lens: vec![17, 65],
        kv_lens: vec![40, 65],
        causal: true,
        window_left: -1,
        softcap: 0.0,
        return_lse: true,
    }
}

fn offsets(lens: &[i32]) -> Vec<i32> {
    std::iter::once(0)
        .chain(lens.iter().scan(0, |total, &len| {
            *total += len;
            Some(*total)
        }))
        .collect()
}

/// The inputs of one case: q, k and v rounded to `dtype` (as f64) and the offsets.
pub(crate) struct Problem {
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    pub cu_q: Vec<i32>,
    pub cu_k: Vec<i32>,
    pub dim: usize,
}

pub(crate) fn problem(case: &Case, dim: usize, dtype: DType, seed: u64) -> Problem {
    let (cu_q, cu_k) = (offsets(&case.q_lens), offsets(&case.kv_lens));
    let total_q = cu_q[cu_q.len() - 1] as usize;
    let total_kv = cu_k[cu_k.len() - 1] as usize;
    let rounded = |shape: &[usize], seed: u64| {
        Tensor::random(&TensorSpec::new(shape, dtype), seed, &Device::cpu())
            .expect("random")
            .to_vec_f64()
            .expect("values")
    };
    Problem {
        q: rounded(&[total_q, case.heads, dim], seed),
        k: rounded(&[total_kv, case.kv_heads, dim], seed + 1),
        v: rounded(&[total_kv, case.kv_heads, dim], seed + 2),
        cu_q,
        cu_k,
        dim,
    }
}

impl Problem {
    fn specs(&self, case: &Case, dtype: DType) -> (TensorSpec, TensorSpec) {
        let (total_q, total_kv) = (
            self.cu_q[self.cu_q.len() - 1] as usize,
            self.cu_k[self.cu_k.len() - 1] as usize,
        );
        (
            TensorSpec::new([total_q, case.heads, self.dim], dtype),
            TensorSpec::new([total_kv, case.kv_heads, self.dim], dtype),
        )
    }

    /// The reference `(o, lse)`, with the values as given or their magnitudes (`abs`).
    pub(crate) fn reference(&self, case: &Case, sm_scale: f64, abs: bool) -> (Vec<f64>, Vec<f64>) {
        let v: Vec<f64> = if abs {
            self.v.iter().map(|x| x.abs()).collect()
        } else {
            self.v.clone()
        };
        let r = gqa_prefill(&PrefillProblem {
            q: &self.q,
            k: &self.k,
            v: &v,
            cu_seqlens_q: &self.cu_q,
            cu_seqlens_k: &self.cu_k,
            heads: case.heads,
            kv_heads: case.kv_heads,
            dim: self.dim,
            sm_scale,
            softcap: case.softcap,
            causal: case.causal,
            window_left: usize::try_from(case.window_left).ok(),
        });
        (r.o, r.lse)
    }
}

/// Plans `case` on `device` and runs it into poisoned outputs with the given device copies of the
/// offsets (the plan's own, or copies that disagree with it): the op and `(o, lse)` as f64.
pub(crate) fn run(
    case: &Case,
    p: &Problem,
    dtype: DType,
    device: &Device,
    (device_cu_q, device_cu_k): (&[i32], &[i32]),
) -> (GqaPrefill, Vec<f64>, Option<Vec<f64>>) {
    let (q_spec, kv_spec) = p.specs(case, dtype);
    let options = PrefillOptions::default()
        .causal(case.causal)
        .window_left(case.window_left)
        .softcap(case.softcap)
        .return_lse(case.return_lse);
    let op = GqaPrefill::new(
        q_spec.clone(),
        kv_spec.clone(),
        kv_spec.clone(),
        &p.cu_q,
        &p.cu_k,
        options,
        device,
    )
    .expect("valid plan");
    let upload = |values: &[f64], spec: &TensorSpec| {
        Tensor::from_f64_rounded(values, spec, device).expect("upload")
    };
    let (q, k, v) = (
        upload(&p.q, &q_spec),
        upload(&p.k, &kv_spec),
        upload(&p.v, &kv_spec),
    );
    let n = p.cu_q.len();
    let cu_q = Tensor::from_slice(device_cu_q, [n], device).expect("cu_seqlens_q");
    let cu_k = Tensor::from_slice(device_cu_k, [n], device).expect("cu_seqlens_k");
    let (o_spec, lse_spec) = op.output_specs();
    let mut out = PrefillOutput {
        o: Tensor::full(&o_spec, POISON, device).expect("poisoned o"),
        lse: lse_spec.map(|s| Tensor::full(&s, POISON, device).expect("poisoned lse")),
    };
    op.forward_into(&q, &k, &v, &cu_q, &cu_k, &mut out)
        .expect("launch");
    let o = download(device, &out.o);
    let lse = out.lse.as_ref().map(|t| download(device, t));
    (op, o, lse)
}

/// Runs `case` for `dtype` and head dim `dim` and records `o` (relative to `Σ p |v|`) and `lse`
/// (relative to `max(|lse|, 1)`).
fn check(report: &mut Measures, case: &Case, dim: usize, dtype: DType, seed: u64, device: &Device) {
    let p = problem(case, dim, dtype, seed);
    let (op, o, lse) = run(case, &p, dtype, device, (&p.cu_q, &p.cu_k));
    let want = p.reference(case, op.sm_scale(), false);
    let magnitude = p.reference(case, op.sm_scale(), true).0;
    let label = format!(
        "D{dim} H{}/{} q {:?} kv {:?}{}{}{}",
        case.heads,
        case.kv_heads,
        case.q_lens,
        case.kv_lens,
        if case.causal { " causal" } else { "" },
        if case.window_left >= 0 {
            format!(" window {}", case.window_left)
        } else {
            String::new()
        },
        if case.softcap > 0.0 { " softcap" } else { "" },
    );
    record(
        report,
        "gqa_prefill",
        &label,
        dtype,
        (&o, lse.as_deref()),
        &want,
        &magnitude,
    );
}

/// Every case of [`cases`] for every dtype and head dim.
pub(crate) fn prefill_cases(device: &Device) -> Measures {
    let mut report = Measures::new(72, KeepWorst::Largest, 0);
    let mut seed = 9100;
    for dtype in [DType::Float16, DType::BFloat16] {
        for dim in [64, 128, 256] {
            for case in cases() {
                seed += 3;
                check(&mut report, &case, dim, dtype, seed, device);
            }
        }
    }
    report
}

/// [`entry_case`] for every entry point (dtype x head dim).
pub(crate) fn prefill_entry_cases(device: &Device) -> Measures {
    let mut report = Measures::new(72, KeepWorst::Largest, 0);
    let mut seed = 9500;
    for dtype in [DType::Float16, DType::BFloat16] {
        for dim in [64, 128, 256] {
            seed += 3;
            check(&mut report, &entry_case(), dim, dtype, seed, device);
        }
    }
    report
}

/// A query that sees no key gives exactly 0 and an lse of -inf: on the GPU when there is one (the
/// emulated device in CI), else on the CPU path, whose reference pins the same edge.
#[test]
fn queries_that_see_no_key_give_zeros_and_minus_infinity() {
    let device = Device::best();
    let case = Case {
        heads: 2,
        kv_heads: 1,
        q_lens: vec![20],
        kv_lens: vec![5],
        causal: true,
        window_left: -1,
        softcap: 0.0,
        return_lse: true,
    };
    let p = problem(&case, 64, DType::BFloat16, 31);
    let (_, o, lse) = run(&case, &p, DType::BFloat16, &device, (&p.cu_q, &p.cu_k));
    let lse = lse.expect("lse");
    // Queries 0..15 sit before the first key (diagonal i + 5 - 20 < 0).
    for row in 0..15 {
        for h in 0..2 {
            assert!(
                o[(row * 2 + h) * 64..][..64].iter().all(|&x| x == 0.0),
                "row {row} head {h}"
            );
            assert_eq!(lse[h * 20 + row], f64::NEG_INFINITY, "row {row} head {h}");
        }
    }
    assert!(lse[15].is_finite() && lse[20 + 19].is_finite());
}

/// Device offsets that disagree with the plan never read or write out of bounds: the kernel
/// clamps each to the tensors' rows (the emulator's guard zones, and its ASan pass, would flag
/// any access past an allocation). Here the device copies run past the totals and below 0, and
/// clamp back to the plan's offsets, whose reference the outputs must then match.
#[test]
fn device_offsets_past_the_totals_stay_in_bounds() {
    let Some(device) = gpu_or_skip("device_offsets_past_the_totals_stay_in_bounds") else {
        return;
    };
    let dtype = DType::Float16;
    let case = Case {
        heads: 4,
        kv_heads: 2,
        q_lens: vec![17, 13],
        kv_lens: vec![40, 25],
        causal: true,
        window_left: -1,
        softcap: 0.0,
        return_lse: true,
    };
    let p = problem(&case, 64, dtype, 41);
    // The plan's offsets are [0, 17, 30] and [0, 40, 65].
    let (op, o, lse) = run(
        &case,
        &p,
        dtype,
        &device,
        (&[0, 17, 1 << 30], &[-5, 40, i32::MAX]),
    );
    let want = p.reference(&case, op.sm_scale(), false);
    let magnitude = p.reference(&case, op.sm_scale(), true).0;
    let mut report = Measures::new(72, KeepWorst::Largest, 0);
    record(
        &mut report,
        "gqa_prefill",
        "clamped offsets",
        dtype,
        (&o, lse.as_deref()),
        &want,
        &magnitude,
    );
    report.finish();
}
