//! The tensor-core prefill kernel (`tileops/kernels/attention/gqa_prefill.cu`) on the emulator,
//! launched directly (no op layer) against an f64 reference of attention: varlen batches, tails
//! of every kind (lengths 1, 15, 16, 17, 65, 129), causal masking aligned bottom-right with q
//! shorter and longer than kv (rows with no visible key), a left window, a softcap, groups of 1
//! and 8 query heads per KV head, head dims 64, 128, 256, f16 and bf16, and the log-sum-exp.
//!
//! Tolerances. Inputs are exact in the dtype, so the reference sees what the kernel sees; the
//! kernel's own roundings are P (the weights, in [0, 1]) to the dtype before P·V, the output to
//! the dtype, and f32 accumulation with `ex2.approx`. With |v| <= 1 the output is a convex
//! combination of v rows (|o| <= 1): P's rounding (2^-9 relative for bf16, 2^-12 for f16) moves it
//! by at most about that, the output's rounding by half an ulp at |o| < 1 (2^-9, 2^-12). So
//! |o - ref| <= 4 * 2^-9 ~ 7.8e-3 for bf16 and 4 * 2^-12 ~ 1e-3 for f16, with room for a few ulps
//! of f32; lse (f32 throughout, |lse| < 10 here) to 1e-4 relative + 1e-4 absolute.

use cuda_emu::check::{Arg, check};
use cuda_emu::{Dim3, LaunchConfig, Schedule};
use half::{bf16, f16};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dtype {
    F16,
    Bf16,
}

impl Dtype {
    fn suffix(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }

    /// `x` rounded to the dtype, as bits and as the value it now is.
    fn round(self, x: f64) -> (u16, f64) {
        match self {
            Dtype::F16 => {
                let h = f16::from_f64(x);
                (h.to_bits(), h.to_f64())
            }
            Dtype::Bf16 => {
                let h = bf16::from_f64(x);
                (h.to_bits(), h.to_f64())
            }
        }
    }

    fn value(self, bits: u16) -> f64 {
        match self {
            Dtype::F16 => f16::from_bits(bits).to_f64(),
            Dtype::Bf16 => bf16::from_bits(bits).to_f64(),
        }
    }

    /// The output tolerance (see the module docs).
    fn tolerance(self) -> f64 {
        match self {
            Dtype::F16 => 1.5e-3,
            Dtype::Bf16 => 1e-2,
        }
    }
}

/// One launch's problem.
#[derive(Clone, Debug)]
struct Case {
    dtype: Dtype,
    dim: usize,
    lq: Vec<usize>,
    lk: Vec<usize>,
    heads: usize,
    kv_heads: usize,
    causal: bool,
    window_left: i32,
    softcap: f32,
    /// Pass an lse buffer (else a null pointer: the kernel must not write one).
    lse: bool,
}

/// A deterministic value in [-1, 1) for element `i` of tensor `salt`.
fn value(salt: u64, i: usize) -> f64 {
    let mut x = (i as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(salt.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// A tensor of `n` values in the dtype: the bits packed two to an f32 word (the emulator's
/// buffers are bytes), and the values.
fn tensor(dtype: Dtype, salt: u64, n: usize) -> (Vec<f32>, Vec<f64>) {
    let (bits, values): (Vec<u16>, Vec<f64>) = (0..n).map(|i| dtype.round(value(salt, i))).unzip();
    (pack(&bits), values)
}

fn pack(bits: &[u16]) -> Vec<f32> {
    bits.chunks(2)
        .map(|p| f32::from_bits(u32::from(p[0]) | (u32::from(*p.get(1).unwrap_or(&0)) << 16)))
        .collect()
}

fn unpack(words: &[f32]) -> Vec<u16> {
    words
        .iter()
        .flat_map(|w| {
            let b = w.to_bits();
            [b as u16, (b >> 16) as u16]
        })
        .collect()
}

fn prefix(lengths: &[usize]) -> Vec<usize> {
    let mut out = vec![0];
    for l in lengths {
        out.push(out.last().unwrap() + l);
    }
    out
}

/// The reference: `(o [total_q, H, D], lse [H, total_q])` in f64.
fn reference(case: &Case, q: &[f64], k: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (h_n, hk_n, d) = (case.heads, case.kv_heads, case.dim);
    let (cq, ck) = (prefix(&case.lq), prefix(&case.lk));
    let total_q = *cq.last().unwrap();
    let scale = 1.0 / (d as f64).sqrt();
    let mut o = vec![0.0; total_q * h_n * d];
    let mut lse = vec![f64::NEG_INFINITY; h_n * total_q];
    for b in 0..case.lq.len() {
        let (lq, lk) = (case.lq[b] as i64, case.lk[b] as i64);
        for h in 0..h_n {
            let kvh = h / (h_n / hk_n);
            for i in 0..lq {
                let qrow = &q[((cq[b] + i as usize) * h_n + h) * d..][..d];
                let mut scores = Vec::new();
                for j in 0..lk {
                    if case.causal && j > i + lk - lq {
                        continue;
                    }
                    if case.window_left >= 0 && j < i + lk - lq - i64::from(case.window_left) {
                        continue;
                    }
                    let krow = &k[((ck[b] + j as usize) * hk_n + kvh) * d..][..d];
                    let mut s = scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>();
                    if case.softcap != 0.0 {
                        let c = f64::from(case.softcap);
                        s = c * (s / c).tanh();
                    }
                    scores.push((j as usize, s));
                }
                if scores.is_empty() {
                    continue;
                }
                let m = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|s| (s.1 - m).exp()).sum();
                let out = &mut o[((cq[b] + i as usize) * h_n + h) * d..][..d];
                for &(j, s) in &scores {
                    let p = (s - m).exp() / sum;
                    let vrow = &v[((ck[b] + j) * hk_n + kvh) * d..][..d];
                    for (x, y) in out.iter_mut().zip(vrow) {
                        *x += p * y;
                    }
                }
                lse[h * total_q + cq[b] + i as usize] = m + sum.ln();
            }
        }
    }
    (o, lse)
}

/// Launches the case's entry and compares with the reference; `schedules` as `check` takes them.
fn run(case: &Case, schedules: &[Schedule]) {
    let (h_n, hk_n, d) = (case.heads, case.kv_heads, case.dim);
    let (cq, ck) = (prefix(&case.lq), prefix(&case.lk));
    let (total_q, total_k) = (*cq.last().unwrap(), *ck.last().unwrap());
    let (qw, q) = tensor(case.dtype, 1, total_q * h_n * d);
    let (kw, k) = tensor(case.dtype, 2, total_k * hk_n * d);
    let (vw, v) = tensor(case.dtype, 3, total_k * hk_n * d);
    let ints = |xs: &[usize]| {
        xs.iter()
            .map(|&x| f32::from_bits(x as u32))
            .collect::<Vec<_>>()
    };
    // A float parameter travels as its bits in an `Int`: check passes every parameter as 8
    // bytes whose low half the kernel reads as the declared 4-byte type.
    let float = |x: f32| Arg::Int(x.to_bits() as i32);
    let max_lq = *case.lq.iter().max().unwrap();
    let config = LaunchConfig::new(
        Dim3::new(max_lq.div_ceil(64) as u32, h_n as u32, case.lq.len() as u32),
        Dim3::x(128),
    );
    let entry = format!("gqa_prefill_d{d}_{}", case.dtype.suffix());
    let args = [
        Arg::Input(qw),
        Arg::Input(kw),
        Arg::Input(vw),
        Arg::Output(total_q * h_n * d / 2),
        // A null lse travels as a 0 in an `Int`: the 8 bytes of a pointer parameter.
        if case.lse {
            Arg::Output(h_n * total_q)
        } else {
            Arg::Int(0)
        },
        Arg::Input(ints(&cq)),
        Arg::Input(ints(&ck)),
        Arg::Int(total_q as i32),
        Arg::Int(total_k as i32),
        Arg::Int(h_n as i32),
        Arg::Int(hk_n as i32),
        float(1.0 / (d as f32).sqrt()),
        float(case.softcap),
        Arg::Int(case.window_left),
        Arg::Int(i32::from(case.causal)),
    ];
    let outputs =
        check(&entry, &config, &args, schedules).unwrap_or_else(|f| panic!("{case:?}: {f}"));
    let (o_ref, lse_ref) = reference(case, &q, &k, &v);
    let o: Vec<f64> = unpack(&outputs[0])
        .into_iter()
        .map(|b| case.dtype.value(b))
        .collect();
    let tol = case.dtype.tolerance();
    let mut worst = (0.0f64, 0usize);
    for (i, (a, b)) in o.iter().zip(&o_ref).enumerate() {
        let err = (a - b).abs();
        assert!(
            err <= tol,
            "{entry} {case:?}: o[token {}, head {}, dim {}] = {a}, reference {b} (|error| {err} > {tol})",
            i / (h_n * d),
            i / d % h_n,
            i % d
        );
        if err > worst.0 {
            worst = (err, i);
        }
    }
    assert_eq!(outputs.len(), 1 + usize::from(case.lse));
    let no_lse = Vec::new();
    let lse_out = outputs.get(1).unwrap_or(&no_lse);
    for (i, (&a, b)) in lse_out.iter().zip(&lse_ref).enumerate() {
        let a = f64::from(a);
        let ok = if b.is_infinite() {
            a == *b
        } else {
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs()
        };
        assert!(
            ok,
            "{entry} {case:?}: lse[head {}, token {}] = {a}, reference {b}",
            i / total_q,
            i % total_q
        );
    }
    println!("{entry}: {case:?}: worst |o error| {:.2e}", worst.0);
}

const DIMS: [usize; 3] = [64, 128, 256];
const DTYPES: [Dtype; 2] = [Dtype::Bf16, Dtype::F16];
const ROUND_ROBIN: &[Schedule] = &[Schedule::RoundRobin];

/// Every tail, one sequence each, no mask, one query head per KV head.
#[test]
fn varlen_tails_without_a_mask() {
    for dtype in DTYPES {
        for dim in DIMS {
            let lengths = vec![1, 15, 16, 17, 65, 129];
            run(
                &Case {
                    dtype,
                    dim,
                    lq: lengths.clone(),
                    lk: lengths,
                    heads: 1,
                    kv_heads: 1,
                    causal: false,
                    window_left: -1,
                    softcap: 0.0,
                    lse: true,
                },
                ROUND_ROBIN,
            );
        }
    }
}

/// Causal, bottom-right aligned, 8 query heads per KV head: q shorter than kv (a chunked
/// prefill), as long, and longer (its first rows see no key: o = 0, lse = -inf).
#[test]
fn causal_grouped_with_q_shorter_and_longer_than_kv() {
    for dtype in DTYPES {
        for dim in DIMS {
            run(
                &Case {
                    dtype,
                    dim,
                    lq: vec![1, 17, 65, 129, 20],
                    lk: vec![16, 100, 65, 129, 3],
                    heads: 8,
                    kv_heads: 1,
                    causal: true,
                    window_left: -1,
                    softcap: 0.0,
                    lse: true,
                },
                ROUND_ROBIN,
            );
        }
    }
}

/// A left window with and without causal masking, and a softcap (Gemma 2's 50 and a small one
/// that bends the scores), so that whole tiles are skipped on both sides.
#[test]
fn window_and_softcap() {
    for dtype in DTYPES {
        for dim in DIMS {
            for (causal, window_left, softcap) in [
                (true, 20, 0.0),
                (false, 40, 0.3),
                (true, 0, 0.0),
                (true, 100, 50.0),
            ] {
                run(
                    &Case {
                        dtype,
                        dim,
                        lq: vec![129, 17],
                        lk: vec![200, 17],
                        heads: 2,
                        kv_heads: 1,
                        causal,
                        window_left,
                        softcap,
                        lse: true,
                    },
                    ROUND_ROBIN,
                );
            }
        }
    }
}

/// Every schedule of the emulator (round-robin, reverse, random, warp-greedy) gives the same
/// bytes, with and without the softcap (two instantiations): the barriers around the cp.async
/// pipeline leave no race.
#[test]
fn every_schedule_agrees() {
    for dim in DIMS {
        for softcap in [0.0, 30.0] {
            run(
                &Case {
                    dtype: Dtype::Bf16,
                    dim,
                    lq: vec![70, 5],
                    lk: vec![131, 40],
                    heads: 2,
                    kv_heads: 2,
                    causal: true,
                    window_left: 50,
                    softcap,
                    lse: true,
                },
                &[],
            );
        }
    }
}

/// Without an lse buffer (a null pointer) the kernel writes only o, and the same o.
#[test]
fn a_null_lse_is_not_written() {
    for dim in DIMS {
        run(
            &Case {
                dtype: Dtype::F16,
                dim,
                lq: vec![33, 1],
                lk: vec![80, 9],
                heads: 8,
                kv_heads: 1,
                causal: true,
                window_left: -1,
                softcap: 0.0,
                lse: false,
            },
            ROUND_ROBIN,
        );
    }
}
