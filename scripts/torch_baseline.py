#!/usr/bin/env python3
"""PyTorch baselines for a tileops records file, timed the way bench_all times tileops.

    python3 scripts/torch_baseline.py RECORDS.json [--out BASELINE.json]
        [--impl torch,torch-compile[,flashinfer][,flash-attn]] [--budget-s SECONDS] [--seed N] [--device cuda:0]

Runs on the GPU machine (PyTorch with CUDA; no Rust). For every tileops row of RECORDS.json
(written by `bench_all`) it builds the PyTorch equivalent of the op from the row's inputs and
params, times it in eager mode (`impl: torch`) and under `torch.compile` (`impl: torch-compile`),
and writes a records file of the same schema: op, family, workload, dtype, inputs, params, flops,
bytes and roof are copied from the tileops row (so the baseline is priced by the same model), the
timing and the device are its own. A row that cannot be run (an op without an equivalent, an error,
the time budget spent) is written as skipped, with the reason: no row is dropped. Then:

    cargo run --example roofline -- RECORDS.json --torch BASELINE.json

shows, per tileops row, its strongest (fastest) baseline and the time ratio.

The method is bench_all's (tileops-bench/src/bench.rs): CUDA events with timing enabled; before
every sample, outside the timed region, a buffer of twice the L2 size is zeroed; a spin kernel
(`torch.cuda._sleep`) holds the stream while the host enqueues the start event, the call and the
end event, so launch latency stays out of the events, and a sample whose enqueue outlasted the hold
is retaken with a longer one; an untimed cold call (for torch.compile: the compilation), warm-up
for 25 ms (at least 2 samples), then 100 ms / per-call time samples clamped to 10..200; median,
p10, p90. Without `torch.cuda._sleep` the hold is left out and the method says so.

Most inputs are random; an op whose inputs carry values makes them from the row's params and shapes
(its EQUIVALENTS entry's setup and input maker). The attention decode ops (gqa_decode,
gqa_decode_paged) do: `seqlens` holds the row's `kv_lens`, `block_table` scatters each sequence over
the page pool as tileops's bench does (the same shuffle), an fp8 cache holds random e4m3 codes with
the scales 0.75 and 1.25. Their lengths and table are host data of the plan, as in tileops and
FlashInfer: the key mask and the page-gather index are made before the timed call; the gather, the
dequantization of an fp8 cache and the attention are inside it (one `scaled_dot_product_attention`
over the batch; the explicit math with a softcap or the lse).

The attention prefill (gqa_prefill) makes `cu_seqlens_q` / `cu_seqlens_k` from the row's
`q_lens` / `kv_lens` (absent: the totals split evenly), as tileops's bench does; the call runs
`scaled_dot_product_attention` once per sequence (bottom-right causal and window masks made before
the timed call: PyTorch's own `is_causal` is top-left, and is used only where the two agree, a
square causal sequence without a window), or the explicit math with a softcap or the lse.

`--impl flashinfer` (not in the default list) also times FlashInfer's batch decode for the decode
ops, planned outside the timed call; `--impl flash-attn` times FlashAttention-2's
`flash_attn_varlen_func` for the prefill rows (the packed batch in one call). Every other row, and
every row when the library is not importable, is written as skipped with the reason.

Exit status: 0; 2 for a bad command line or records file; 3 when PyTorch or a CUDA GPU is missing.

Everything above the "PyTorch side" line is plain Python (tested by test_torch_baseline.py
without PyTorch).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import sys
import time

SCHEMA_VERSION = 1
TILEOPS_IMPL = "tileops"
FLASHINFER_IMPL = "flashinfer"
FLASH_ATTN_IMPL = "flash-attn"
IMPLS = ("torch", "torch-compile", FLASHINFER_IMPL, FLASH_ATTN_IMPL)
DEFAULT_IMPLS = ("torch", "torch-compile")

# bench_all's budgets (tileops_bench::bench::TimeBudget::default).
WARMUP_MS = 25.0
MEASURE_MS = 100.0
MIN_SAMPLES = 10
MAX_SAMPLES = 200
MIN_WARMUP_SAMPLES = 2

# bench_all's stream hold (tileops-bench/src/bench/gpu.rs).
MIN_HOLD_NS = 50_000
MAX_HOLD_NS = 20_000_000
HOLD_MARGIN = 4
MAX_RETAKES = 8
PROBE_HOLD_NS = 5_000_000
FLUSH_BYTES_UNKNOWN_L2 = 512 << 20

METHOD_HELD = "cuda_events+l2_flush+spin_hold"
METHOD_UNHELD = "cuda_events+l2_flush"

# The fields of a record, exactly (records.rs refuses unknown ones).
RECORD_FIELDS = (
    "op", "family", "workload", "dtype", "impl", "inputs", "params", "flops", "bytes", "roof",
    "timing", "samples", "median_ms", "p10_ms", "p90_ms", "skipped", "device",
)

class BaselineError(Exception):
    """A records file or row this script cannot use; the message says what and where."""


# ---------------------------------------------------------------------------------------------
# Statistics and budgets: the same arithmetic as records.rs and bench.rs.


def percentile(sorted_values, q):
    """The q quantile (0..1) of ascending values, linearly interpolated (NumPy's default)."""
    if not sorted_values:
        return None
    pos = min(max(q, 0.0), 1.0) * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def timing_stats(samples_ms):
    """{samples, median_ms, p10_ms, p90_ms} of positive finite samples, else None."""
    if not samples_ms or any(not (math.isfinite(t) and t > 0) for t in samples_ms):
        return None
    s = sorted(samples_ms)
    return {
        "samples": len(s),
        "median_ms": percentile(s, 0.5),
        "p10_ms": percentile(s, 0.1),
        "p90_ms": percentile(s, 0.9),
    }


def sample_count(per_call_ms):
    """Timed samples for a call of about per_call_ms: MEASURE_MS / per_call_ms, clamped."""
    if per_call_ms is None or math.isnan(per_call_ms) or per_call_ms < 0:
        return MIN_SAMPLES
    # Half away from zero, as Rust's f64::round (Python's round() rounds half to even).
    wanted = math.inf if per_call_ms == 0 else math.floor(MEASURE_MS / per_call_ms + 0.5)
    return int(min(max(wanted, MIN_SAMPLES), MAX_SAMPLES))


def warmed_up(taken, elapsed_ms):
    """Whether warm-up is over after `taken` samples and `elapsed_ms` of wall time."""
    return taken >= MIN_WARMUP_SAMPLES and (elapsed_ms >= WARMUP_MS or taken >= MAX_SAMPLES)


def next_hold_ns(previous, enqueue_ns):
    """The next stream hold: a margin over the last enqueue, decaying by a quarter, clamped."""
    return min(max(enqueue_ns * HOLD_MARGIN, previous // 4 * 3, MIN_HOLD_NS), MAX_HOLD_NS)


def flush_bytes(l2_bytes):
    """Twice the L2, in whole MiB (512 MiB when the L2 size is unknown)."""
    if not l2_bytes:
        return FLUSH_BYTES_UNKNOWN_L2
    mib = 1 << 20
    return -(-2 * l2_bytes // mib) * mib


# ---------------------------------------------------------------------------------------------
# The op catalog: which inputs each PyTorch equivalent takes, its params and their defaults (the
# manifest's), and how to build it. Builders receive the torch module and the resolved params and
# return a function of the input tensors, so this table is importable without PyTorch.


def _dims(dim):
    """A manifest `dim` as torch takes it: None, an int, or a tuple."""
    if isinstance(dim, list):
        return tuple(dim)
    return dim


def _softmax(torch, p):
    return lambda x: torch.softmax(x, dim=p["dim"])


def _log_softmax(torch, p):
    return lambda x: torch.log_softmax(x, dim=p["dim"])


def _reduction(name):
    def build(torch, p):
        fn = getattr(torch, name)
        dim, keepdim = _dims(p["dim"]), bool(p["keepdim"])
        if dim is None:
            # logsumexp has no "all dims" default; the others reduce everything without `dim`.
            if name == "logsumexp":
                return lambda x: fn(x, dim=tuple(range(x.dim())), keepdim=keepdim)
            return lambda x: fn(x)
        return lambda x: fn(x, dim=dim, keepdim=keepdim)

    return build


def _rms(torch, x, weight, eps):
    functional = torch.nn.functional
    if hasattr(functional, "rms_norm"):
        return functional.rms_norm(x, weight.shape, weight, eps)
    # PyTorch before 2.4: the composite PyTorch itself would run.
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rms_norm(torch, p):
    return lambda x, weight: _rms(torch, x, weight, p["eps"])


def _layer_norm(torch, p):
    f = torch.nn.functional.layer_norm
    return lambda x, weight, bias: f(x, weight.shape, weight, bias, p["eps"])


def _fused_add_rms_norm(torch, p):
    def call(x, residual, weight):
        r = x + residual
        return _rms(torch, r, weight, p["eps"]), r

    return call


def _activation(name):
    def build(torch, p):
        f = torch.nn.functional
        if name == "gelu":
            return lambda x: f.gelu(x, approximate=p["approximate"])
        return getattr(f, name)

    return build


def _silu_and_mul(torch, p):
    def call(x):
        n = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :n]) * x[..., n:]

    return call


def _neox_rope(torch, x, positions, cache):
    """NeoX RoPE of [tokens, heads, d] in f32 with table rows [cos (d/2) | sin (d/2)]."""
    half = x.shape[-1] // 2
    table = cache[positions]
    cos, sin = table[:, None, :half], table[:, None, half:]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _interleaved_rope(torch, x, positions, cache):
    """GPT-J (interleaved) RoPE of [tokens, heads, d] in f32: pairs (x[2i], x[2i + 1])."""
    half = x.shape[-1] // 2
    table = cache[positions].float()
    cos, sin = table[:, None, :half], table[:, None, half:]
    a, b = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def _rope(torch, p):
    rotate = _neox_rope if p.get("is_neox_style", True) else _interleaved_rope
    return lambda x, positions, cache: rotate(torch, x, positions.long(), cache.float()).to(x.dtype)


FP8_MAX = 448.0
FP8_MIN_SCALE = 1.0 / (448.0 * 512.0)


def _fp8_groups(torch, values, groups, group):
    """Dynamic e4m3 quantization of f32 `values` viewed as [rows, groups, group]."""
    rows = values.shape[0]
    v = values.reshape(rows, groups, group)
    scale = torch.clamp(v.abs().amax(dim=-1, keepdim=True) / FP8_MAX, min=FP8_MIN_SCALE)
    q = torch.clamp(v * (1.0 / scale), -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(values.shape), scale.reshape(rows, groups)


def _fp8_quant(torch, p):
    def call(x):
        m, k = x.shape
        group = k if p["group_size"] in (0, k) else p["group_size"]
        return _fp8_groups(torch, x.float(), k // group, group)

    return call


def _qk_norm_rope_fp8(torch, p):
    def one(x, weight, positions, cache):
        tokens, heads, d = x.shape
        normed = _rms(torch, x.float(), weight.float(), p["eps"])
        roped = _neox_rope(torch, normed, positions, cache)
        q, scale = _fp8_groups(torch, roped.reshape(tokens * heads, d), 1, d)
        return q.reshape(tokens, heads, d), scale.reshape(tokens, heads)

    def call(q, k, q_weight, k_weight, positions, cache):
        q8, qs = one(q, q_weight, positions, cache)
        k8, ks = one(k, k_weight, positions, cache)
        return q8, k8, qs, ks

    return call


def _gemm(torch, p):
    def call(a, b):
        return (a.t() if p["trans_a"] else a) @ (b.t() if p["trans_b"] else b)

    return call


def _torch_function(name):
    def build(torch, p):
        return getattr(torch, name)

    return build


# Attention decode (gqa_decode, gqa_decode_paged). Their inputs carry values: the lengths, the
# block table and the fp8 scales are made from the row's params and shapes, as tileops's bench makes
# them (DecodePlan::bench_inputs, shuffled_block_table). The plain-Python part (the row's checks,
# the lengths, the table, the mask's rows, FlashInfer's page lists) is `_decode_setup`'s host plan;
# the tensors are made from it by `_decode_inputs`.

DECODE_PARAMS = ("sm_scale", "softcap", "return_lse", "kv_lens", "cache_dtype")
FP8_CACHE = "float8_e4m3fn"
# tileops's bench scales of an fp8 cache: codes of unit-normal values times O(1) factors.
FP8_CACHE_SCALES = (0.75, 1.25)
# FlashInfer's dense-cache view: pages of up to this many keys (its split-KV works in pages).
FLASHINFER_DENSE_PAGE = 16
FLASHINFER_WORKSPACE_BYTES = 128 << 20


def shuffled_block_table(batch, max_pages, num_pages, lens, page_size):
    """tileops's bench table (gqa_decode_paged.rs, shuffled_block_table), row by row: the pool's
    pages in a fixed pseudo-random order (Fisher-Yates driven by SplitMix64), handed out to each
    sequence's used slots in turn; unused slots -1."""
    mask = (1 << 64) - 1
    pool = list(range(min(num_pages, 2**31 - 1)))
    state = 0x9E3779B97F4A7C15
    for i in range(len(pool) - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        j = z % (i + 1)
        pool[i], pool[j] = pool[j], pool[i]
    table, nxt = [[-1] * max_pages for _ in range(batch)], iter(pool)
    for b, n in enumerate(lens[:batch]):
        used = min(-(-max(n, 0) // max(page_size, 1)), max_pages)
        for slot in range(used):
            table[b][slot] = next(nxt, -1)
    return table


def decode_lens(op, kv_lens, batch, capacity):
    """The row's `kv_lens` checked against the batch and the keys a sequence can hold (S_max, or
    max_pages * page_size); every sequence full when it is null."""
    if kv_lens is None:
        return [capacity] * batch
    if not isinstance(kv_lens, list):
        raise BaselineError(f"{op}: kv_lens is {kv_lens!r}, not a list of {batch} lengths")
    if len(kv_lens) != batch:
        raise BaselineError(
            f"{op}: kv_lens has {len(kv_lens)} lengths for a batch of {batch} (q's first dim)"
        )
    for i, n in enumerate(kv_lens):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= capacity:
            raise BaselineError(
                f"{op}: kv_lens[{i}] = {n!r} is not a length in 0..={capacity} (the keys a "
                "sequence's cache holds)"
            )
    return list(kv_lens)


def decode_masking(lens, capacity):
    """(mask lengths, kept rows) of the attention over `capacity` keys per sequence.

    The mask lengths are None when every sequence is full (no mask); else each sequence's valid
    keys, an empty sequence's row left whole (a row with no key would be NaN: its output is zeroed
    and its lse set to -inf through the kept rows instead). The kept rows are None when no sequence
    is empty, else whether each one has a key.
    """
    ragged = any(n != capacity for n in lens)
    empty = any(n == 0 for n in lens)
    mask_lens = [n if n > 0 else capacity for n in lens] if ragged else None
    keep = [n > 0 for n in lens] if empty else None
    return mask_lens, keep


def flashinfer_pages(host):
    """(page_size, kv_indptr, kv_indices, kv_last_page_len) of FlashInfer's paged decode for the
    host plan. A dense cache [B, S_max, H_kv, D] is read as pages of gcd(S_max, 16) keys (sequence b
    holds pages b * S_max / page_size onwards); a paged one through its table. An empty sequence has
    no page and a last page of 0 keys (FlashInfer gives it length 0)."""
    lens = host["lens"]
    if host["paged"]:
        page_size, table = host["page_size"], host["table"]
    else:
        page_size = math.gcd(host["capacity"], FLASHINFER_DENSE_PAGE)
        per_seq = host["capacity"] // page_size
        table = [[b * per_seq + j for j in range(per_seq)] for b in range(len(lens))]
    indptr, indices, last = [0], [], []
    for b, n in enumerate(lens):
        used = -(-n // page_size)
        indices.extend(table[b][:used])
        indptr.append(len(indices))
        last.append(n - (used - 1) * page_size if used else 0)
    return page_size, indptr, indices, last


def _shape(op, spec, dims, layout):
    shape = spec.get("shape")
    if (not isinstance(shape, list) or len(shape) != len(dims)
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in shape)):
        raise BaselineError(f"{op}: {spec.get('name')} has shape {shape!r}, not {layout}")
    return dict(zip(dims, shape))


def _decode_setup(op, specs, params):
    """The specs (the caches in `cache_dtype`) and the host plan of a decode row, checked.

    The host plan: the call's input names, the dims, the lengths, the keys per sequence of the
    dense view (`capacity`), the page layout and table (paged), the mask's rows and the fp8 scales.
    """
    paged = op == "gqa_decode_paged"
    k_name, v_name = ("k_pages", "v_pages") if paged else ("k_cache", "v_cache")
    by_name = {s["name"]: s for s in specs}
    q = _shape(op, by_name["q"], ("B", "H", "D"), "(B, H, D)")
    if paged:
        k = _shape(op, by_name[k_name], ("pages", "page_size", "H_kv", "D"),
                   "(num_pages, page_size, H_kv, D)")
        t = _shape(op, by_name["block_table"], ("B", "max_pages"), "(B, max_pages)")
        if t["B"] != q["B"]:
            raise BaselineError(f"{op}: block_table has {t['B']} rows for a batch of {q['B']}")
        if k["page_size"] < 1:
            raise BaselineError(f"{op}: {k_name} has pages of 0 keys")
        capacity = t["max_pages"] * k["page_size"]
    else:
        k = _shape(op, by_name[k_name], ("B", "S_max", "H_kv", "D"), "(B, S_max, H_kv, D)")
        if k["B"] != q["B"]:
            raise BaselineError(f"{op}: {k_name} holds {k['B']} sequences for a batch of {q['B']}")
        capacity = k["S_max"]
    if by_name[v_name].get("shape") != by_name[k_name]["shape"]:
        raise BaselineError(f"{op}: {v_name}'s shape is not {k_name}'s")
    if k["D"] != q["D"] or k["H_kv"] < 1 or q["H"] % k["H_kv"]:
        raise BaselineError(
            f"{op}: q's {q['H']} heads of {q['D']} do not group over {k_name}'s {k['H_kv']} heads "
            f"of {k['D']}"
        )
    if by_name["seqlens"].get("shape") != [q["B"]]:
        raise BaselineError(f"{op}: seqlens has shape {by_name['seqlens'].get('shape')!r}, "
                            f"not ({q['B']},)")
    lens = decode_lens(op, params["kv_lens"], q["B"], capacity)

    cache_dtype = params["cache_dtype"] or by_name["q"].get("dtype")
    if cache_dtype not in TORCH_DTYPES:
        raise BaselineError(f"{op}: cache_dtype {cache_dtype!r} is not a dtype this script knows")
    fp8 = cache_dtype == FP8_CACHE
    scales = [n for n in ("k_scale", "v_scale") if n in by_name]
    if fp8 and len(scales) != 2:
        raise BaselineError(f"{op}: a {FP8_CACHE} cache needs the inputs k_scale and v_scale; "
                            f"the row gives {' and '.join(scales) or 'neither'}")
    if not fp8 and scales:
        raise BaselineError(f"{op}: the row gives {' and '.join(scales)} for a {cache_dtype} "
                            f"cache (only a {FP8_CACHE} cache has scales)")

    host = {"op": op, "names": [s["name"] for s in specs], "batch": q["B"], "heads": q["H"],
            "kv_heads": k["H_kv"], "head_dim": q["D"], "capacity": capacity, "lens": lens,
            "paged": paged, "page_size": None, "table": None, "cache_dtype": cache_dtype,
            "scales": FP8_CACHE_SCALES if fp8 else None}
    if paged:
        used = sum(-(-n // k["page_size"]) for n in lens)
        if used > k["pages"]:
            raise BaselineError(f"{op}: the lengths use {used} pages of {k['page_size']} keys, "
                                f"the pool holds {k['pages']}")
        host["page_size"] = k["page_size"]
        host["table"] = shuffled_block_table(q["B"], t["max_pages"], k["pages"], lens,
                                             k["page_size"])
    host["mask_lens"], host["keep"] = decode_masking(lens, capacity)
    specs = [dict(s, dtype=cache_dtype) if s["name"] in (k_name, v_name) else s for s in specs]
    return specs, host


def _decode_inputs(torch, host, tensors):
    """The call's arguments from the random tensors: `seqlens` (the lengths), `block_table` (the
    host table), the scales set; then the plan, made here, before the timed call, as FlashInfer's
    plan is: (gather index [B, max_pages] for paged,) key mask [B, 1, 1, keys] or None, kept rows
    [B, 1, 1] or None."""
    args = list(tensors)
    at = {name: i for i, name in enumerate(host["names"])}
    device = args[0].device

    def tensor(values, dtype):
        return torch.tensor(values, dtype=dtype, device=device)

    args[at["seqlens"]] = tensor(host["lens"], torch.int32)
    if host["paged"]:
        args[at["block_table"]] = tensor(host["table"], torch.int32)
    if host["scales"]:
        args[at["k_scale"]] = tensor([host["scales"][0]], torch.float32)
        args[at["v_scale"]] = tensor([host["scales"][1]], torch.float32)
    batch, capacity = host["batch"], host["capacity"]
    mask = keep = None
    if host["mask_lens"] is not None:
        keys = torch.arange(capacity, device=device)
        mask = (keys < tensor(host["mask_lens"], torch.int64)[:, None]).view(batch, 1, 1, capacity)
    if host["keep"] is not None:
        keep = tensor(host["keep"], torch.bool).view(batch, 1, 1)
    plan = (mask, keep)
    if host["paged"]:
        # Unused slots (-1) read page 0; the mask leaves its keys out.
        plan = (args[at["block_table"]].clamp(min=0).long(),) + plan
    args.append(plan)
    return args


def _sdpa_takes_gqa(torch):
    """Whether scaled_dot_product_attention takes `enable_gqa` (PyTorch 2.5 and later)."""
    x = torch.zeros(1, 2, 1, 8)
    try:
        torch.nn.functional.scaled_dot_product_attention(x, x[:, :1], x[:, :1], enable_gqa=True)
    except TypeError:
        return False
    return True


def _gather_pages(torch, pages, index):
    """[B, max_pages * page_size, H_kv, D] from pages [num_pages, page_size, H_kv, D] through an
    index [B, max_pages] (an fp8 pool is gathered as bytes: not every PyTorch indexes float8)."""
    if pages.element_size() == 1 and pages.is_floating_point():
        gathered = pages.view(torch.uint8)[index].view(pages.dtype)
    else:
        gathered = pages[index]
    return gathered.flatten(1, 2)


def _decode_attention(torch, q, k, v, mask, keep, p, gqa):
    """o [B, H, D] (and lse [B, H], float32, with return_lse) of q [B, H, D] over k, v
    [B, S, H_kv, D] in q's dtype: one SDPA call over the batch, or with a softcap or the lse (SDPA
    has neither) the explicit math, scores and softmax in float32."""
    batch, heads, dim = q.shape
    kv_heads = k.shape[2]
    group = heads // kv_heads
    scale = p["sm_scale"] if p["sm_scale"] is not None else 1.0 / math.sqrt(dim)
    softcap = float(p["softcap"] or 0.0)
    kh, vh = k.transpose(1, 2), v.transpose(1, 2)  # [B, H_kv, S, D]
    lse = None
    if softcap > 0 or p["return_lse"]:
        qg = q.reshape(batch, kv_heads, group, dim)  # query head h reads KV head h // group
        scores = torch.matmul(qg, kh.transpose(-1, -2)).float() * scale  # [B, H_kv, G, S]
        if softcap > 0:
            scores = softcap * torch.tanh(scores / softcap)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        o = torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), vh).reshape(batch, heads, dim)
        if p["return_lse"]:
            lse = torch.logsumexp(scores, dim=-1).reshape(batch, heads)
    else:
        sdpa = torch.nn.functional.scaled_dot_product_attention
        extra = {}
        if group > 1 and gqa:
            extra["enable_gqa"] = True
        elif group > 1:
            kh, vh = kh.repeat_interleave(group, dim=1), vh.repeat_interleave(group, dim=1)
        o = sdpa(q.unsqueeze(2), kh, vh, attn_mask=mask, scale=scale, **extra).squeeze(2)
    if keep is not None:
        o = o.masked_fill(~keep, 0)
        if lse is not None:
            lse = lse.masked_fill(~keep[..., 0], float("-inf"))
    return (o, lse) if p["return_lse"] else o


def _decode(paged):
    """The PyTorch way to the decode: (paged: gather the pages through the index), dequantize an
    fp8 cache (`codes.float() * scale`, to q's dtype), attend. The call takes the inputs in call
    order and the plan `_decode_inputs` appends; `seqlens` and the table reach it as the plan."""

    def build(torch, p):
        gqa = _sdpa_takes_gqa(torch)
        fp8 = p["cache_dtype"] == FP8_CACHE

        def call(q, k, v, *rest):
            plan = rest[-1]
            if paged:
                index, plan = plan[0], plan[1:]
                k, v = _gather_pages(torch, k, index), _gather_pages(torch, v, index)
            if fp8:
                k_scale, v_scale = rest[-3], rest[-2]
                k = (k.float() * k_scale).to(q.dtype)
                v = (v.float() * v_scale).to(q.dtype)
            return _decode_attention(torch, q, k, v, plan[0], plan[1], p, gqa)

        return call

    return build


def _flashinfer_decode(torch, flashinfer, host, p, args):
    """FlashInfer's batch decode (BatchDecodeWithPagedKVCacheWrapper, NHD), planned here from the
    host lengths and table, before the timed call; the call is its `run`.

    Written to FlashInfer's documented API (0.2 and later: plan / run) and not run by this project's
    tests: FlashInfer is not installed where they run. Its lse is base 2 (FlashInfer's convention,
    the one its merge functions take): the conversion to natural log stays out of the timed call.
    """
    q, k, v = args[0], args[1], args[2]
    page_size, indptr, indices, last = flashinfer_pages(host)
    pages = (-1, page_size, host["kv_heads"], host["head_dim"])
    k, v = k.view(pages), v.view(pages)  # a dense cache as pages; a page pool as it is

    def i32(values):
        return torch.tensor(values, dtype=torch.int32, device=q.device)

    workspace = torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
    wrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    softcap = float(p["softcap"] or 0.0)
    wrapper.plan(
        i32(indptr), i32(indices), i32(last), host["heads"], host["kv_heads"], host["head_dim"],
        page_size, logits_soft_cap=softcap if softcap > 0 else None, sm_scale=p["sm_scale"],
        q_data_type=q.dtype, kv_data_type=k.dtype,
    )
    run = {"return_lse": bool(p["return_lse"])}
    if host["scales"]:
        run["k_scale"], run["v_scale"] = host["scales"]
    return lambda *_: wrapper.run(q, (k, v), **run)


# Attention prefill (gqa_prefill): packed variable-length sequences. The offsets carry values: they
# are made from the row's q_lens / kv_lens as tileops's bench makes them (GqaPrefill's workload
# plan); `_prefill_setup` checks the row and makes the host plan (offsets, each sequence's visible
# key range per query), `_prefill_inputs` the tensors and the masks, before the timed call.

PREFILL_PARAMS = ("sm_scale", "causal", "softcap", "window_left", "return_lse", "q_lens",
                  "kv_lens")


def prefill_offsets(name, lens, batch, total):
    """[0, l0, l0 + l1, ...]: the offsets of `batch` sequences of lengths `lens`, or of
    total / batch each when lens is None; BaselineError when they do not add up to total."""
    if lens is None:
        if batch < 1 or total % batch:
            raise BaselineError(f"gqa_prefill: {total} rows do not split evenly over {batch} "
                                f"sequences and the row gives no {name}")
        lens = [total // batch] * batch
    if len(lens) != batch or any(isinstance(n, bool) or not isinstance(n, int) or n < 0
                                 for n in lens):
        raise BaselineError(f"gqa_prefill: {name} {lens!r} is not {batch} lengths")
    if sum(lens) != total:
        raise BaselineError(f"gqa_prefill: {name} add up to {sum(lens)}, the tensor holds {total}")
    offsets = [0]
    for n in lens:
        offsets.append(offsets[-1] + n)
    return offsets


def visible_keys(i, q_len, k_len, causal, window_left):
    """(lo, hi): the keys query i of a sequence sees, as tileops's reference::visible_keys:
    bottom-right aligned diagonal i + k_len - q_len; window_left < 0 is no window."""
    diagonal = i + k_len - q_len
    hi = min(max(diagonal + 1, 0), k_len) if causal else k_len
    lo = min(max(diagonal - window_left, 0), k_len) if window_left >= 0 else 0
    return lo, max(hi, lo)


def _prefill_setup(op, specs, params):
    """The specs and the host plan of a prefill row, checked: the offsets, and per sequence
    whether a mask is needed (None: every query sees every key, or a square causal sequence
    without a window, where PyTorch's top-left `is_causal` is the bottom-right mask)."""
    by_name = {s["name"]: s for s in specs}
    q = _shape(op, by_name["q"], ("total_q", "H", "D"), "(total_q, H, D)")
    k = _shape(op, by_name["k"], ("total_kv", "H_kv", "D"), "(total_kv, H_kv, D)")
    if by_name["v"].get("shape") != by_name["k"]["shape"]:
        raise BaselineError(f"{op}: v's shape is not k's")
    if k["D"] != q["D"] or k["H_kv"] < 1 or q["H"] % k["H_kv"]:
        raise BaselineError(f"{op}: q's {q['H']} heads of {q['D']} do not group over k's "
                            f"{k['H_kv']} heads of {k['D']}")
    cu = _shape(op, by_name["cu_seqlens_q"], ("n",), "(B + 1,)")
    if by_name["cu_seqlens_k"].get("shape") != [cu["n"]] or cu["n"] < 2:
        raise BaselineError(f"{op}: cu_seqlens_q and cu_seqlens_k must both be (B + 1,), B >= 1")
    batch = cu["n"] - 1
    cu_q = prefill_offsets("q_lens", params["q_lens"], batch, q["total_q"])
    cu_k = prefill_offsets("kv_lens", params["kv_lens"], batch, k["total_kv"])
    causal = bool(params["causal"])
    window = params["window_left"]
    window = -1 if window is None else int(window)
    sequences = []
    for b in range(batch):
        q_len, k_len = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        plain = (not causal or q_len == k_len) and window < 0
        sequences.append({"q": (cu_q[b], cu_q[b + 1]), "k": (cu_k[b], cu_k[b + 1]),
                          "mask": not plain, "is_causal": causal and plain})
    host = {"op": op, "names": [s["name"] for s in specs], "batch": batch, "heads": q["H"],
            "kv_heads": k["H_kv"], "head_dim": q["D"], "cu_q": cu_q, "cu_k": cu_k,
            "causal": causal, "window_left": window, "sequences": sequences}
    return specs, host


def _prefill_inputs(torch, host, tensors):
    """The call's arguments: q, k, v, the offsets (the host plan's), then the plan made here,
    before the timed call: each sequence's (q0, q1, k0, k1) rows, and one boolean mask
    [q_len, k_len] per sequence that needs one (None otherwise)."""
    args = list(tensors)
    at = {name: i for i, name in enumerate(host["names"])}
    device = args[0].device
    args[at["cu_seqlens_q"]] = torch.tensor(host["cu_q"], dtype=torch.int32, device=device)
    args[at["cu_seqlens_k"]] = torch.tensor(host["cu_k"], dtype=torch.int32, device=device)
    masks = []
    for seq in host["sequences"]:
        if not seq["mask"]:
            masks.append(None)
            continue
        (q0, q1), (k0, k1) = seq["q"], seq["k"]
        q_len, k_len = q1 - q0, k1 - k0
        rows = torch.arange(q_len, device=device)[:, None]
        keys = torch.arange(k_len, device=device)[None, :]
        diagonal = rows + (k_len - q_len)
        mask = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
        if host["causal"]:
            mask &= keys <= diagonal
        if host["window_left"] >= 0:
            mask &= keys >= diagonal - host["window_left"]
        masks.append(mask)
    bounds = [seq["q"] + seq["k"] for seq in host["sequences"]]
    args.append((bounds, masks))
    return args


def _prefill(torch, p):
    """The PyTorch way to the prefill: per sequence, SDPA over [1, H, L, D] views (grouped heads
    by `enable_gqa`, or repeated before PyTorch 2.5), with the plan's mask; the explicit math
    (float32 scores) with a softcap or the lse. Queries that see no key give 0 (and lse -inf)."""
    gqa = _sdpa_takes_gqa(torch)
    softcap = float(p["softcap"] or 0.0)
    explicit = softcap > 0 or p["return_lse"]

    def call(q, k, v, cu_q, cu_k, plan):
        heads, dim = q.shape[1], q.shape[2]
        group = heads // k.shape[1]
        scale = p["sm_scale"] if p["sm_scale"] is not None else 1.0 / math.sqrt(dim)
        o = torch.empty_like(q)
        lse = (torch.empty(heads, q.shape[0], dtype=torch.float32, device=q.device)
               if p["return_lse"] else None)
        # The rows from the host plan, as tileops's plan holds them (no device sync).
        for (q0, q1, k0, k1), mask in zip(*plan):
            if q1 == q0:
                continue
            qs = q[q0:q1].transpose(0, 1).unsqueeze(0)  # [1, H, Lq, D]
            ks = k[k0:k1].transpose(0, 1).unsqueeze(0)  # [1, H_kv, Lk, D]
            vs = v[k0:k1].transpose(0, 1).unsqueeze(0)
            if explicit or not gqa:
                ks = ks.repeat_interleave(group, dim=1)
                vs = vs.repeat_interleave(group, dim=1)
            if explicit:
                scores = torch.matmul(qs, ks.transpose(-1, -2)).float() * scale
                if softcap > 0:
                    scores = softcap * torch.tanh(scores / softcap)
                if mask is not None:
                    scores = scores.masked_fill(~mask, float("-inf"))
                probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                out = torch.matmul(probs.to(v.dtype), vs)
                if lse is not None:
                    lse[:, q0:q1] = torch.logsumexp(scores, dim=-1)[0]
            else:
                extra = {"enable_gqa": True} if group > 1 and gqa else {}
                if mask is None:
                    extra["is_causal"] = bool(p["causal"]) and q1 - q0 == k1 - k0
                else:
                    extra["attn_mask"] = mask
                out = torch.nn.functional.scaled_dot_product_attention(
                    qs, ks, vs, scale=scale, **extra).nan_to_num(0.0)
            o[q0:q1] = out[0].transpose(0, 1)
        return (o, lse) if lse is not None else o

    return call


def _flash_attn_prefill(torch, flash_attn, host, p, args):
    """FlashAttention-2's `flash_attn_varlen_func` over the packed batch (its window is
    (window_left, 0) with causal, (window_left, -1) without; its causal mask is bottom-right since
    2.1). Written to its documented API and not run by this project's tests: flash-attn is not
    installed where they run."""
    q, k, v, cu_q, cu_k = args[0], args[1], args[2], args[3], args[4]
    max_q = max(b - a for a, b in zip(host["cu_q"], host["cu_q"][1:]))
    max_k = max(b - a for a, b in zip(host["cu_k"], host["cu_k"][1:]))
    window = (host["window_left"], 0 if host["causal"] else -1)
    softcap = float(p["softcap"] or 0.0)
    return lambda *_: flash_attn.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=p["sm_scale"], causal=host["causal"],
        window_size=window, softcap=softcap, return_attn_probs=bool(p["return_lse"]))


# name -> (inputs in call order, the params the builder reads, builder[, setup, input maker,
# FlashInfer builder, flash-attn builder]) (see `Equivalent`). Every op of the manifest has a line
# (test_torch_baseline.py checks the names against tileops/manifest/). The params' values, the
# manifest's defaults included, come from the record: bench_all writes every param.
EQUIVALENTS = {
    "softmax": (("x",), ("dim",), _softmax),
    "log_softmax": (("x",), ("dim",), _log_softmax),
    "sum": (("x",), ("dim", "keepdim"), _reduction("sum")),
    "mean": (("x",), ("dim", "keepdim"), _reduction("mean")),
    "amax": (("x",), ("dim", "keepdim"), _reduction("amax")),
    "logsumexp": (("x",), ("dim", "keepdim"), _reduction("logsumexp")),
    "rms_norm": (("x", "weight"), ("eps",), _rms_norm),
    "layer_norm": (("x", "weight", "bias"), ("eps",), _layer_norm),
    "fused_add_rms_norm": (("x", "residual", "weight"), ("eps",), _fused_add_rms_norm),
    "relu": (("x",), (), _activation("relu")),
    "gelu": (("x",), ("approximate",), _activation("gelu")),
    "silu": (("x",), (), _activation("silu")),
    "sigmoid": (("x",), (), _torch_function("sigmoid")),
    "neg": (("x",), (), _torch_function("neg")),
    "abs": (("x",), (), _torch_function("abs")),
    "silu_and_mul": (("x",), (), _silu_and_mul),
    "rope": (("x", "positions", "cos_sin_cache"), (), _rope),
    "fp8_quant": (("x",), ("group_size",), _fp8_quant),
    "qk_norm_rope_fp8": (
        ("q", "k", "q_weight", "k_weight", "positions", "cos_sin_cache"),
        ("eps",),
        _qk_norm_rope_fp8,
    ),
    "gemm": (("a", "b"), ("trans_a", "trans_b", "allow_tf32"), _gemm),
    "gqa_decode": (
        ("q", "k_cache", "v_cache", "seqlens", "k_scale?", "v_scale?"),
        DECODE_PARAMS,
        _decode(paged=False),
        _decode_setup,
        _decode_inputs,
        _flashinfer_decode,
    ),
    "gqa_decode_paged": (
        ("q", "k_pages", "v_pages", "block_table", "seqlens", "k_scale?", "v_scale?"),
        DECODE_PARAMS,
        _decode(paged=True),
        _decode_setup,
        _decode_inputs,
        _flashinfer_decode,
    ),
    "gqa_prefill": (
        ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"),
        PREFILL_PARAMS,
        _prefill,
        _prefill_setup,
        _prefill_inputs,
        None,
        _flash_attn_prefill,
    ),
}

# An EQUIVALENTS line, its optional parts None when absent:
#   inputs      the input names in call order; a name ending in "?" is an optional input, in the
#               call when the row gives it (bench_all records the inputs a row has), left out if not
#   params      the params the builder (and setup) read
#   build       build(torch, params) -> the call, a function of the inputs
#   setup       setup(op, specs, params) -> (specs, host): plain Python, checks the row beyond its
#               names and makes the host data of an op whose inputs carry values (specs may be
#               changed, e.g. a dtype a param decides)
#   inputs_from inputs_from(torch, host, random tensors of the specs) -> the call's arguments
#   flashinfer  flashinfer(torch, flashinfer module, host, params, arguments) -> the call of the
#               `flashinfer` impl, planned before it is timed
#   flash_attn  the same for the `flash-attn` impl, with the flash_attn module
Equivalent = collections.namedtuple(
    "Equivalent", "inputs params build setup inputs_from flashinfer flash_attn",
    defaults=(None, None, None, None)
)

# What plan_call makes of a row: the op, the input specs in call order, the row's params, the
# builder, and the setup's host data (None without a setup).
CallPlan = collections.namedtuple("CallPlan", "op specs params build host")


def equivalent(op):
    """The EQUIVALENTS line of op as an Equivalent."""
    return Equivalent(*EQUIVALENTS[op])


def input_name(name):
    """An EQUIVALENTS input name without its optional mark."""
    return name[:-1] if name.endswith("?") else name


def plan_call(row):
    """The CallPlan of a tileops row.

    Raises BaselineError for an op without an equivalent, a row missing an input or a param, or a
    row its setup refuses.
    """
    op = row.get("op")
    if op not in EQUIVALENTS:
        raise BaselineError(f"no PyTorch equivalent is mapped for op `{op}`")
    entry = equivalent(op)
    given = {i.get("name"): i for i in row.get("inputs") or []}
    missing = [n for n in entry.inputs if not n.endswith("?") and n not in given]
    if missing:
        raise BaselineError(f"{op}: the row gives no shape for input(s) {', '.join(missing)}")
    params = dict(row.get("params") or {})
    absent = [n for n in entry.params if n not in params]
    if absent:
        raise BaselineError(
            f"{op}: the row gives no value for param(s) {', '.join(absent)} (bench_all records "
            "every param, defaults included; a file without them is from an older tileops)"
        )
    specs = [given[input_name(n)] for n in entry.inputs if input_name(n) in given]
    host = None
    if entry.setup is not None:
        specs, host = entry.setup(op, specs, params)
    return CallPlan(op, specs, params, entry.build, host)


LIBRARY_NAMES = {FLASHINFER_IMPL: "FlashInfer", FLASH_ATTN_IMPL: "flash-attn"}


def library_builder(op, impl, missing):
    """The builder of op for a library impl (`flashinfer`, `flash-attn`); BaselineError when op
    has none or the library is `missing` (the reason it could not be imported; None when it
    was)."""
    entry = equivalent(op) if op in EQUIVALENTS else None
    build = None
    if entry is not None:
        build = entry.flashinfer if impl == FLASHINFER_IMPL else entry.flash_attn
    name = LIBRARY_NAMES[impl]
    if build is None:
        raise BaselineError(f"no {name} equivalent is mapped for op `{op}`")
    if missing:
        raise BaselineError(f"{name} is not importable ({missing})")
    return build


def flashinfer_builder(op, missing):
    """The FlashInfer builder of op (library_builder's)."""
    return library_builder(op, FLASHINFER_IMPL, missing)


# ---------------------------------------------------------------------------------------------
# Records in and out.


def row_name(row):
    return f"{row.get('op')}/{row.get('workload')}/{row.get('dtype')}"


def load_rows(text, origin):
    """(meta, tileops rows) of a records file; BaselineError when it is not one."""
    try:
        run = json.loads(text)
    except json.JSONDecodeError as e:
        raise BaselineError(f"{origin}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from e
    if not isinstance(run, dict) or "records" not in run or "meta" not in run:
        raise BaselineError(f"{origin}: not a tileops records file (no `meta` and `records`)")
    if run.get("schema") != SCHEMA_VERSION:
        raise BaselineError(
            f"{origin}: schema version {run.get('schema')}, this script reads {SCHEMA_VERSION}"
        )
    rows = [r for r in run["records"] if r.get("impl", TILEOPS_IMPL) == TILEOPS_IMPL]
    for index, row in enumerate(rows):
        for field in ("op", "family", "workload", "dtype"):
            if not isinstance(row.get(field), str) or not row[field]:
                raise BaselineError(f"{origin}: tileops row {index}: `{field}` is missing")
    return run["meta"], rows


def baseline_record(row, impl, device, stats=None, method=None, skipped=None):
    """A record of the same schema for `impl`, its model (flops, bytes, roof) copied from `row`.

    Timed with `stats` (and `method`), or skipped with the reason.
    """
    if (stats is None) == (skipped is None):
        raise ValueError("a baseline record is either timed or skipped")
    record = {
        "op": row["op"],
        "family": row["family"],
        "workload": row["workload"],
        "dtype": row["dtype"],
        "impl": impl,
        "inputs": row.get("inputs") or [],
        "params": row.get("params") or {},
        "flops": row.get("flops"),
        "bytes": row.get("bytes"),
        "roof": row.get("roof"),
        "timing": "none",
        "samples": 0,
        "median_ms": None,
        "p10_ms": None,
        "p90_ms": None,
        "device": device,
    }
    if stats is not None:
        record.update(stats)
        record["timing"] = method
    else:
        record["skipped"] = skipped
    return record


def baseline_run(source_meta, device, tool_version, records, now=None):
    """The records file of the baselines: the source's git revision, this run's date and device."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {
        "schema": SCHEMA_VERSION,
        "meta": {
            "git_revision": source_meta.get("git_revision") or "unknown",
            "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tool_version": tool_version,
            "device": device,
        },
        "records": records,
    }


def driver_version(proc_text, cuda_version):
    """`580.65.06 (CUDA 13.0)` as bench_all writes it, from /proc/driver/nvidia/version and the
    driver's CUDA version (13000); None when neither is known."""
    module = None
    if proc_text:
        first = proc_text.splitlines()[0] if proc_text.splitlines() else ""
        if "Kernel Module" in first:
            # The first word after it that starts with a digit: the open module's line reads
            # "... Open Kernel Module for x86_64  580.159.04 ..." (tileops's meta.rs, module_version).
            rest = first.split("Kernel Module", 1)[1].split()
            module = next((w for w in rest if w[:1].isdigit()), None)
    cuda = f"CUDA {cuda_version // 1000}.{cuda_version % 1000 // 10}" if cuda_version else None
    if module and cuda:
        return f"{module} ({cuda})"
    return module or cuda


# ---------------------------------------------------------------------------------------------
# PyTorch side.

TORCH_DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint32": "uint32",
    "bool": "bool", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}


def call_inputs(torch, plan, all_specs, device, generator):
    """The call's arguments for a CallPlan: random tensors of its specs, made into the arguments
    by the op's input maker where it has one."""
    tensors = make_inputs(torch, plan.specs, all_specs, device, generator)
    inputs_from = equivalent(plan.op).inputs_from
    return tensors if inputs_from is None else inputs_from(torch, plan.host, tensors)


def import_flashinfer():
    """(the flashinfer module, None), or (None, why it could not be imported)."""
    try:
        import flashinfer
        import flashinfer.decode  # noqa: F401
    except Exception as e:  # ImportError, or an install broken against this PyTorch or CUDA
        return None, f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
    return flashinfer, None


def import_flash_attn():
    """(the flash_attn module, None), or (None, why it could not be imported)."""
    try:
        import flash_attn
    except Exception as e:  # ImportError, or an install broken against this PyTorch or CUDA
        return None, f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
    return flash_attn, None


def make_inputs(torch, specs, all_specs, device, generator):
    """Random tensors for the input specs; integer `positions` index the cos/sin table."""
    table = next((s for s in all_specs if s["name"] == "cos_sin_cache"), None)
    tensors = []
    for spec in specs:
        dtype = getattr(torch, TORCH_DTYPES[spec["dtype"]])
        shape = tuple(spec["shape"])
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=generator, device=device, dtype=torch.float32)
            if spec["name"] == "cos_sin_cache":
                t = torch.tanh(t)
            tensors.append(t.to(dtype))
        elif dtype == torch.bool:
            tensors.append(torch.randint(0, 2, shape, generator=generator, device=device).bool())
        else:
            high = table["shape"][0] if table and spec["name"] == "positions" else 128
            tensors.append(
                torch.randint(0, high, shape, generator=generator, device=device, dtype=dtype)
            )
    return tensors


class Timer:
    """bench_all's GPU sampling, in PyTorch."""

    def __init__(self, torch, device):
        self.torch = torch
        props = torch.cuda.get_device_properties(device)
        self.flush = torch.empty(
            flush_bytes(getattr(props, "L2_cache_size", 0)), dtype=torch.uint8, device=device
        )
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.hold_ns = 4 * MIN_HOLD_NS
        self.cycles_per_ns = self._sleep_rate()

    def _sleep_rate(self):
        """Clock cycles of `torch.cuda._sleep` per ns: the highest of a few measurements, so a
        hold in ns is never shorter than asked (the clock only rises to its boost)."""
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            return None
        cycles, rates = 2_000_000, []
        for _ in range(5):
            self.start.record()
            torch.cuda._sleep(cycles)
            self.end.record()
            self.end.synchronize()
            ms = self.start.elapsed_time(self.end)
            if ms > 0:
                rates.append(cycles / (ms * 1e6))
        return max(rates) if rates else None

    def _call(self, call, args, hold_ns):
        """One call between the events, the L2 flushed before it and, with a hold, the stream
        held while it is enqueued: (event ms, host enqueue ns)."""
        torch = self.torch
        self.flush.zero_()
        t0 = time.perf_counter_ns()
        if hold_ns:
            torch.cuda._sleep(int(hold_ns * self.cycles_per_ns))
        self.start.record()
        out = call(*args)
        self.end.record()
        enqueue = time.perf_counter_ns() - t0
        self.end.synchronize()
        ms = self.start.elapsed_time(self.end)
        del out
        return ms, enqueue

    def sample(self, call, args, held):
        """One timed call, ms."""
        if not held:
            return self._call(call, args, None)[0]
        longest = 0
        for _ in range(MAX_RETAKES + 1):
            hold = self.hold_ns
            ms, enqueue = self._call(call, args, hold)
            self.hold_ns = next_hold_ns(hold, enqueue)
            if enqueue < hold:
                return ms
            longest = max(longest, enqueue)
        raise BaselineError(
            f"the host took up to {longest / 1e3:.1f} us to enqueue one call, longer than the "
            f"stream could be held ({MAX_RETAKES} retakes)"
        )

    def time(self, call, args):
        """Cold call, probe, warm-up, timed samples: (statistics dict, method)."""
        torch = self.torch
        call(*args)
        torch.cuda.synchronize()
        # A call that waits on the GPU cannot be held (it would wait for the hold itself).
        held = bool(self.cycles_per_ns) and self._call(call, args, PROBE_HOLD_NS)[1] < PROBE_HOLD_NS
        warm, t0 = [], time.perf_counter()
        while not warmed_up(len(warm), (time.perf_counter() - t0) * 1e3):
            warm.append(self.sample(call, args, held))
        estimate = timing_stats(warm)
        n = sample_count(estimate["median_ms"] if estimate else float("nan"))
        samples = [self.sample(call, args, held) for _ in range(n)]
        stats = timing_stats(samples)
        if stats is None:
            raise BaselineError(f"a sample was not a positive time: {min(samples)} ms")
        return stats, METHOD_HELD if held else METHOD_UNHELD


def torch_device_info(torch, device):
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            proc = f.read()
    except OSError:
        proc = None
    try:
        cuda = int(torch._C._cuda_getDriverVersion())
    except Exception:  # a private API: absent in some builds
        cuda = None
    return {
        "name": torch.cuda.get_device_name(index),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver_version(proc, cuda),
        "l2_bytes": getattr(props, "L2_cache_size", None) or None,
    }


def run_baselines(torch, rows, impls, device, seed, budget_s, log):
    info = torch_device_info(torch, device)
    timer = Timer(torch, device)
    libraries = {
        FLASHINFER_IMPL: import_flashinfer() if FLASHINFER_IMPL in impls else (None, "not asked for"),
        FLASH_ATTN_IMPL: import_flash_attn() if FLASH_ATTN_IMPL in impls else (None, "not asked for"),
    }
    deadline = time.monotonic() + budget_s if budget_s else None
    records = []
    # Eager for every row first: under a time budget, the slow compilations are what is left out.
    for impl in impls:
        for index, row in enumerate(rows):
            name = f"[{index + 1}/{len(rows)}] {row_name(row)} [{impl}]"
            if deadline and time.monotonic() > deadline:
                reason = f"the baseline run's time budget of {budget_s:.0f} s was spent"
                records.append(baseline_record(row, impl, info, skipped=reason))
                log(f"{name}: skipped: {reason}")
                continue
            try:
                plan = plan_call(row)
                if impl in libraries:
                    module, missing = libraries[impl]
                    build_library = library_builder(row["op"], impl, missing)
                generator = torch.Generator(device=device).manual_seed(seed)
                args = call_inputs(torch, plan, row.get("inputs") or [], device, generator)
                if row["op"] == "gemm":
                    # fp32 GEMMs run TF32 only where the tileops row allows it.
                    torch.backends.cuda.matmul.allow_tf32 = bool(plan.params.get("allow_tf32"))
                if impl in libraries:
                    call = build_library(torch, module, plan.host, plan.params, args)
                else:
                    call = plan.build(torch, plan.params)
                if impl == "torch-compile":
                    # Every row is a new shape of the same few functions: without a reset,
                    # dynamo's recompile limit would silently fall back to eager after 8 rows.
                    torch._dynamo.reset()
                    call = torch.compile(call, dynamic=False)
                stats, method = timer.time(call, args)
                records.append(baseline_record(row, impl, info, stats, method))
                log(f"{name}: {stats['median_ms']:.4f} ms median of {stats['samples']}")
            except Exception as e:  # one row's failure is that row's skip reason
                reason = f"{type(e).__name__}: {e}".strip().splitlines()[0][:500]
                records.append(baseline_record(row, impl, info, skipped=reason))
                log(f"{name}: skipped: {reason}")
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
            finally:
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    return info, records


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", help="a records file written by bench_all")
    p.add_argument("--out", help="baseline records file (default: RECORDS with .torch.json)")
    p.add_argument("--impl", default=",".join(DEFAULT_IMPLS),
                   help="comma-separated, of torch,torch-compile,flashinfer,flash-attn "
                        "(default: torch,torch-compile)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop timing after this many seconds (the rest is written as skipped)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda:0")
    args = p.parse_args(argv)
    impls = [i.strip() for i in args.impl.split(",") if i.strip()]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown or not impls:
        p.error(f"--impl takes {', '.join(IMPLS)}, not {', '.join(unknown) or 'nothing'}")
    args.impls = impls
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with open(args.records, encoding="utf-8") as f:
            meta, rows = load_rows(f.read(), args.records)
    except (OSError, BaselineError) as e:
        print(f"torch_baseline: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"torch_baseline: PyTorch is not installed ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_baseline: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    source_device = (meta.get("device") or {}).get("name")
    if source_device and source_device != torch.cuda.get_device_name(torch.device(args.device).index or 0):
        print(f"torch_baseline: note: the records were taken on `{source_device}`; the report "
              "compares rows of the same device only", file=sys.stderr)
    started = time.monotonic()
    info, records = run_baselines(torch, rows, args.impls, args.device, args.seed, args.budget_s,
                                  lambda line: print(line, file=sys.stderr, flush=True))
    out = args.out or os.path.splitext(args.records)[0] + ".torch.json"
    run = baseline_run(meta, info, f"torch {torch.__version__}", records)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(run, f, indent=2)
        f.write("\n")
    timed = sum(1 for r in records if "skipped" not in r)
    print(f"torch_baseline: {len(records)} records ({timed} timed) in "
          f"{time.monotonic() - started:.1f} s; wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
