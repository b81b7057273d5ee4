//! qk_norm_rope_fp8 on the GPU against the CPU reference, every dtype and shape (edge cases
//! included), on fresh random inputs, with the outputs poisoned first so that an element the kernel
//! never writes shows up. The norm sums in f32 on the GPU and in f64 on the CPU, so a value on a
//! rounding midpoint may land one code away: the bound is 1 code, scales within 1e-5.
//!
//! Without a usable GPU each test prints `SKIP: <reason>` and passes; with `TILEOPS_REQUIRE_GPU=1`
//! it fails instead. `-- --nocapture` prints one line per case and `WORST <op> <dtype>` lines.

use crate::common::{Fp8Check, rope_table};
use crate::common::{KeepWorst, Measures, POISON, POISON_CODE, gpu_or_skip};
use crate::position_encoding::gpu::{positions, random_values, upload};
use crate::quantization::gpu::codes;
// The per-dtype bounds of `reduction::gpu::softmax` (`common::bound`).
use tileops::ops::reference::{self};
use tileops::ops::{QkNormRopeFp8, QkNormRopeFp8Output};
use tileops::{DType, Device, Tensor, TensorSpec};

#[test]
fn qk_norm_rope_fp8_matches_the_reference() {
    let Some(gpu) = gpu_or_skip("qk_norm_rope_fp8_matches_the_reference") else {
        return;
    };
    fused_cases(&gpu).finish();
}

/// qk_norm_rope_fp8 cases: (tokens, q_heads, k_heads, inject NaN/inf, a position past the table).
const FUSED_CASES: &[(usize, usize, usize, bool, bool)] = &[
    (1, 1, 1, false, false),
    (1, 32, 8, false, false),
    (3, 4, 2, true, false),
    (5, 3, 5, false, true),
    (64, 32, 8, true, false),
    (2, 70, 10, false, false),
    (2, 120, 20, false, false),
    (257, 8, 1, false, false),
];

pub(crate) fn fused_cases(device: &Device) -> Measures {
    let mut report = Measures::new(40, KeepWorst::Largest, 0);
    let mut seed = 1700;
    let max_pos = 300;
    let tv = rope_table(max_pos, 128);
    for dtype in [DType::BFloat16, DType::Float16] {
        for &(tokens, qh, kh, special, bad_pos) in FUSED_CASES {
            seed += 4;
            let qs = TensorSpec::new([tokens, qh, 128], dtype);
            let ks = TensorSpec::new([tokens, kh, 128], dtype);
            let ws = TensorSpec::new([128], dtype);
            let ps = TensorSpec::new([tokens], DType::Int64);
            let cs = TensorSpec::new([max_pos, 128], DType::Float32);
            let op = QkNormRopeFp8::builder(qs.clone(), ks.clone(), cs.clone())
                .q_weight(ws.clone())
                .k_weight(ws.clone())
                .positions(ps)
                .eps(1e-6)
                .build(device)
                .expect("valid plan");
            let mut qv = random_values(&qs, seed);
            let mut kv = random_values(&ks, seed + 1);
            if special {
                qv[5] = f64::NAN; // row 0 of q: all NaN
                qv[128 + 7] = f64::INFINITY; // row 1 of q: its pair NaN, the rest 0
                kv[3] = f64::NEG_INFINITY;
            }
            let qwv = random_values(&ws, seed + 2);
            let kwv = random_values(&ws, seed + 3);
            let pv = positions(tokens, max_pos, seed, bad_pos && device.is_cuda());
            let [q_spec, k_spec, qs_spec, ks_spec] = op.output_specs();
            let poisoned = |spec: &TensorSpec| {
                Tensor::from_bytes(&vec![POISON_CODE; spec.numel().unwrap()], spec, device)
                    .expect("poisoned codes")
            };
            let mut out = QkNormRopeFp8Output {
                q_fp8: poisoned(&q_spec),
                k_fp8: poisoned(&k_spec),
                q_scale: Tensor::full(&qs_spec, POISON, device).expect("poisoned scales"),
                k_scale: Tensor::full(&ks_spec, POISON, device).expect("poisoned scales"),
            };
            let inputs = [
                upload(&qv, &qs, device),
                upload(&kv, &ks, device),
                upload(&qwv, &ws, device),
                upload(&kwv, &ws, device),
                Tensor::from_slice(&pv, [tokens], device).expect("positions"),
                upload(&tv, &cs, device),
            ];
            let [q, k, qw, kw, p, c] = &inputs;
            op.forward_into(q, k, qw, kw, p, c, &mut out)
                .expect("launch");
            device.synchronize().expect("kernel ran");
            let label = format!(
                "[{tokens}, {qh}+{kh}, 128]{}{}",
                if special { " +nan/inf" } else { "" },
                if bad_pos && device.is_cuda() {
                    " +bad pos"
                } else {
                    ""
                }
            );
            for (name, xv, wv, heads, codes_t, scales_t) in [
                ("q", &qv, &qwv, qh, &out.q_fp8, &out.q_scale),
                ("k", &kv, &kwv, kh, &out.k_fp8, &out.k_scale),
            ] {
                let (want_codes, want_scales, _) =
                    reference::qk_norm_rope_fp8(xv, wv, &pv, &tv, heads, 128, 1e-6);
                let got_codes = codes(codes_t);
                let got_scales = scales_t.to_vec_f32().expect("scales");
                let case = format!("{label} {name}");
                // The norm sums in f32 on the GPU, f64 here: a value on a rounding midpoint may
                // land one code away.
                let check = Fp8Check {
                    got: (&got_codes, &got_scales),
                    want: (&want_codes, &want_scales),
                    code_steps: 1.0,
                    scale_bound: 1e-5,
                };
                report.record_fp8("qk_norm_rope_fp8", &case, dtype, check, |_| String::new());
            }
        }
    }
    report
}
