#!/usr/bin/env python3
"""PyTorch baselines for a tileops records file, timed the way bench_all times tileops.

    python3 scripts/torch_baseline.py RECORDS.json [--out BASELINE.json]
        [--impl torch,torch-compile] [--budget-s SECONDS] [--seed N] [--device cuda:0]

Runs on the GPU machine (PyTorch with CUDA; no Rust). For every tileops row of RECORDS.json
(written by `bench_all`) it builds the PyTorch equivalent of the op from the row's inputs and
params, times it in eager mode (`impl: torch`) and under `torch.compile` (`impl: torch-compile`),
and writes a records file of the same schema: op, family, workload, dtype, inputs, params, flops,
bytes and roof are copied from the tileops row (so the baseline is priced by the same model), the
timing and the device are its own. A row that cannot be run (an op without an equivalent, an error,
the time budget spent) is written as skipped, with the reason: no row is dropped. Then:

    cargo run --example roofline -- RECORDS.json --torch BASELINE.json

shows, per tileops row, its strongest (fastest) baseline and the time ratio.

The method is bench_all's (tileops/src/perf/bench.rs): CUDA events with timing enabled; before
every sample, outside the timed region, a buffer of twice the L2 size is zeroed; a spin kernel
(`torch.cuda._sleep`) holds the stream while the host enqueues the start event, the call and the
end event, so launch latency stays out of the events, and a sample whose enqueue outlasted the hold
is retaken with a longer one; an untimed cold call (for torch.compile: the compilation), warm-up
for 25 ms (at least 2 samples), then 100 ms / per-call time samples clamped to 10..200; median,
p10, p90. Without `torch.cuda._sleep` the hold is left out and the method says so.

Exit status: 0; 2 for a bad command line or records file; 3 when PyTorch or a CUDA GPU is missing.

Everything above the "PyTorch side" line is plain Python (tested by test_torch_baseline.py
without PyTorch).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

SCHEMA_VERSION = 1
TILEOPS_IMPL = "tileops"
IMPLS = ("torch", "torch-compile")

# bench_all's budgets (tileops::perf::bench::TimeBudget::default).
WARMUP_MS = 25.0
MEASURE_MS = 100.0
MIN_SAMPLES = 10
MAX_SAMPLES = 200
MIN_WARMUP_SAMPLES = 2

# bench_all's stream hold (tileops/src/perf/bench/gpu.rs).
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


def _rope(torch, p):
    return lambda x, positions, cache: _neox_rope(torch, x, positions, cache).to(x.dtype)


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


# name -> (inputs in call order, the params the builder reads, builder). Every op of the manifest
# has a line (test_torch_baseline.py checks the names against tileops/manifest/). The params'
# values, the manifest's defaults included, come from the record: bench_all writes every param.
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
}


def plan_call(row):
    """(input specs in call order, the row's params, builder) for a tileops row.

    Raises BaselineError for an op without an equivalent, or a row missing an input or a param.
    """
    op = row.get("op")
    if op not in EQUIVALENTS:
        raise BaselineError(f"no PyTorch equivalent is mapped for op `{op}`")
    names, wanted, build = EQUIVALENTS[op]
    given = {i.get("name"): i for i in row.get("inputs") or []}
    missing = [n for n in names if n not in given]
    if missing:
        raise BaselineError(f"{op}: the row gives no shape for input(s) {', '.join(missing)}")
    params = dict(row.get("params") or {})
    absent = [n for n in wanted if n not in params]
    if absent:
        raise BaselineError(
            f"{op}: the row gives no value for param(s) {', '.join(absent)} (bench_all records "
            "every param, defaults included; a file without them is from an older tileops)"
        )
    return [given[n] for n in names], params, build


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
            rest = first.split("Kernel Module", 1)[1].split()
            module = rest[0] if rest else None
    cuda = f"CUDA {cuda_version // 1000}.{cuda_version % 1000 // 10}" if cuda_version else None
    if module and cuda:
        return f"{module} ({cuda})"
    return module or cuda


# ---------------------------------------------------------------------------------------------
# PyTorch side.

TORCH_DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "bool": "bool", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}


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
                specs, params, build = plan_call(row)
                generator = torch.Generator(device=device).manual_seed(seed)
                args = make_inputs(torch, specs, row.get("inputs") or [], device, generator)
                if row["op"] == "gemm":
                    # fp32 GEMMs run TF32 only where the tileops row allows it.
                    torch.backends.cuda.matmul.allow_tf32 = bool(params.get("allow_tf32"))
                call = build(torch, params)
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
    p.add_argument("--impl", default=",".join(IMPLS), help="comma-separated: torch,torch-compile")
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
