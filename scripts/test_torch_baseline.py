#!/usr/bin/env python3
"""Tests of torch_baseline.py's plain-Python parts: statistics, budgets, the op catalog, records.

    python3 -m unittest discover -s scripts -p 'test_*.py'

No PyTorch needed; the tests that run the equivalents on CPU tensors skip without it.
"""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_baseline as tb  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

H200 = {"name": "NVIDIA H200", "compute_capability": "9.0", "driver": "580.65.06 (CUDA 13.0)",
        "l2_bytes": 62914560}


def row(op="softmax", inputs=None, params=None, **extra):
    r = {"op": op, "family": "reduction", "workload": "w", "dtype": "bfloat16", "impl": "tileops",
         "inputs": inputs if inputs is not None else [{"name": "x", "shape": [4, 8],
                                                       "dtype": "bfloat16"}],
         "params": params or {}, "flops": 160, "bytes": 128, "roof": "cuda_core.fp32",
         "timing": "cuda_events+l2_flush+spin_hold", "samples": 10, "median_ms": 0.01,
         "p10_ms": 0.009, "p90_ms": 0.011, "device": H200}
    r.update(extra)
    return r


class Statistics(unittest.TestCase):
    def test_percentiles_match_records_rs(self):
        # TimingStats::from_samples' doc example.
        s = tb.timing_stats([0.5, 0.1, 0.4, 0.2, 0.3])
        self.assertEqual(s["samples"], 5)
        self.assertEqual(s["median_ms"], 0.3)
        self.assertAlmostEqual(s["p10_ms"], 0.14)
        self.assertAlmostEqual(s["p90_ms"], 0.46)
        self.assertEqual(tb.percentile([1.0, 2.0, 3.0, 4.0], 0.5), 2.5)
        self.assertIsNone(tb.percentile([], 0.5))
        self.assertIsNone(tb.timing_stats([]))
        self.assertIsNone(tb.timing_stats([1.0, float("nan")]))
        self.assertIsNone(tb.timing_stats([1.0, 0.0]))

    def test_sample_counts_match_bench_rs(self):
        cases = {0.5: 200, 0.6: 167, 2.0: 50, 10.0: 10, 9.0: 11, 1e6: 10, 0.0: 200,
                 float("nan"): 10, -1.0: 10}
        for per_call, n in cases.items():
            self.assertEqual(tb.sample_count(per_call), n, per_call)

    def test_warm_up_and_hold_match_bench_rs(self):
        self.assertFalse(tb.warmed_up(1, 1000.0))
        self.assertTrue(tb.warmed_up(2, 25.0))
        self.assertFalse(tb.warmed_up(2, 24.9))
        self.assertTrue(tb.warmed_up(200, 1.0))
        self.assertEqual(tb.next_hold_ns(200_000, 10_000), 150_000)
        self.assertEqual(tb.next_hold_ns(200_000, 100_000), 400_000)
        self.assertEqual(tb.next_hold_ns(50_000, 1_000), tb.MIN_HOLD_NS)
        self.assertEqual(tb.next_hold_ns(tb.MAX_HOLD_NS, 10**15), tb.MAX_HOLD_NS)
        self.assertEqual(tb.flush_bytes(62_914_560), 120 << 20)
        self.assertEqual(tb.flush_bytes(50_000_000), 96 << 20)
        self.assertEqual(tb.flush_bytes(None), tb.FLUSH_BYTES_UNKNOWN_L2)


MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tileops", "manifest")


def manifest_entries():
    """{op: its entry's text} for every entry of tileops/manifest/ (the top-level keys)."""
    entries = {}
    for name in sorted(os.listdir(MANIFEST)):
        if name.endswith(".yaml"):
            with open(os.path.join(MANIFEST, name), encoding="utf-8") as f:
                text = f.read()
            keys = list(re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*):", text, re.M))
            for key, after in zip(keys, keys[1:] + [None]):
                entries[key.group(1)] = text[key.start():after.start() if after else len(text)]
    return entries


class Catalog(unittest.TestCase):
    def test_every_manifest_op_has_an_equivalent_reading_its_declared_params(self):
        entries = manifest_entries()
        self.assertGreater(len(entries), 0)
        self.assertEqual(sorted(tb.EQUIVALENTS), sorted(entries))
        for op, (inputs, params, _) in tb.EQUIVALENTS.items():
            for name in inputs + params:
                self.assertRegex(entries[op], rf"\n\s+{name}:", f"{op}: `{name}` not declared")

    def test_plan_resolves_inputs_in_call_order_and_takes_the_rows_params(self):
        specs, params, _ = tb.plan_call(row("rms_norm", inputs=[
            {"name": "weight", "shape": [8], "dtype": "bfloat16"},
            {"name": "x", "shape": [4, 8], "dtype": "bfloat16"}], params={"eps": 1e-6}))
        self.assertEqual([s["name"] for s in specs], ["x", "weight"])
        self.assertEqual(params, {"eps": 1e-6})
        _, params, _ = tb.plan_call(row("gelu", params={"approximate": "tanh"}))
        self.assertEqual(params, {"approximate": "tanh"})
        _, params, _ = tb.plan_call(row("sum", params={"dim": [0, 2], "keepdim": True}))
        self.assertEqual((tb._dims(params["dim"]), params["keepdim"]), ((0, 2), True))
        # A null dim is a reduction over every dim.
        _, params, _ = tb.plan_call(row("sum", params={"dim": None, "keepdim": False}))
        self.assertIsNone(tb._dims(params["dim"]))

    def test_unmapped_ops_missing_inputs_and_missing_params_are_errors(self):
        with self.assertRaisesRegex(tb.BaselineError, "no PyTorch equivalent .* `conv3d`"):
            tb.plan_call(row("conv3d"))
        with self.assertRaisesRegex(tb.BaselineError, "input\\(s\\) weight"):
            tb.plan_call(row("rms_norm", params={"eps": 1e-6}))
        with self.assertRaisesRegex(tb.BaselineError, "param\\(s\\) trans_a, allow_tf32"):
            tb.plan_call(row("gemm", inputs=[
                {"name": "a", "shape": [4, 8], "dtype": "float32"},
                {"name": "b", "shape": [8, 2], "dtype": "float32"}], params={"trans_b": True}))

    def test_every_record_dtype_maps_to_torch(self):
        for name in ("float32", "float16", "bfloat16", "int64", "float8_e4m3fn", "bool"):
            self.assertIn(name, tb.TORCH_DTYPES)


class Records(unittest.TestCase):
    def test_baseline_rows_copy_the_model_and_carry_their_own_timing(self):
        stats = tb.timing_stats([0.02, 0.021, 0.019])
        r = tb.baseline_record(row(), "torch", H200, stats, tb.METHOD_HELD)
        self.assertEqual(set(r), set(tb.RECORD_FIELDS) - {"skipped"})
        for field in ("op", "family", "workload", "dtype", "inputs", "params", "flops", "bytes",
                      "roof"):
            self.assertEqual(r[field], row()[field], field)
        self.assertEqual((r["impl"], r["timing"], r["samples"]), ("torch", tb.METHOD_HELD, 3))
        self.assertTrue(r["p10_ms"] <= r["median_ms"] <= r["p90_ms"])

        s = tb.baseline_record(row(), "torch-compile", H200, skipped="no GPU")
        self.assertEqual(set(s), set(tb.RECORD_FIELDS))
        self.assertEqual((s["samples"], s["median_ms"], s["timing"]), (0, None, "none"))
        with self.assertRaises(ValueError):
            tb.baseline_record(row(), "torch", H200)

    def test_load_rows_keeps_tileops_rows_and_refuses_other_files(self):
        run = {"schema": 1, "meta": {"git_revision": "abc", "device": H200},
               "records": [row(), row(impl="torch")]}
        meta, rows = tb.load_rows(json.dumps(run), "r.json")
        self.assertEqual((meta["git_revision"], len(rows)), ("abc", 1))
        with self.assertRaisesRegex(tb.BaselineError, "r.json:1:2: not JSON"):
            tb.load_rows("{]", "r.json")
        with self.assertRaisesRegex(tb.BaselineError, "schema version 2"):
            tb.load_rows(json.dumps(dict(run, schema=2)), "r.json")
        with self.assertRaisesRegex(tb.BaselineError, "not a tileops records file"):
            tb.load_rows("[]", "r.json")
        bad = dict(run, records=[row(op="")])
        with self.assertRaisesRegex(tb.BaselineError, "`op` is missing"):
            tb.load_rows(json.dumps(bad), "r.json")

    def test_the_run_is_a_records_file(self):
        import datetime
        now = datetime.datetime(2026, 11, 30, 4, 0, 0, tzinfo=datetime.timezone.utc)
        run = tb.baseline_run({"git_revision": "abc"}, H200, "torch 2.9.0", [], now)
        self.assertEqual(run["schema"], tb.SCHEMA_VERSION)
        self.assertEqual(run["meta"], {"git_revision": "abc", "date": "2026-11-30T04:00:00Z",
                                       "tool_version": "torch 2.9.0", "device": H200})

    def test_driver_version_reads_like_bench_all(self):
        proc = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 2025\n"
                "GCC version: gcc 12\n")
        self.assertEqual(tb.driver_version(proc, 13000), "580.65.06 (CUDA 13.0)")
        self.assertEqual(tb.driver_version(None, 12080), "CUDA 12.8")
        self.assertEqual(tb.driver_version(proc, None), "580.65.06")
        self.assertIsNone(tb.driver_version("", None))


if torch is None:
    print("SKIP: PyTorch is not installed: the torch equivalents are not run")


@unittest.skipIf(torch is None, "PyTorch is not installed: the equivalents are not run")
class EquivalentsOnCpu(unittest.TestCase):
    def call(self, op, inputs, params=None):
        specs, resolved, build = tb.plan_call(row(op, inputs=inputs, params=params))
        gen = torch.Generator().manual_seed(0)
        args = tb.make_inputs(torch, specs, inputs, "cpu", gen)
        return args, build(torch, resolved)(*args)

    def test_shapes_and_semantics(self):
        x = {"name": "x", "shape": [4, 8], "dtype": "float32"}
        args, y = self.call("softmax", [x], {"dim": -1})
        self.assertTrue(torch.allclose(y.sum(-1), torch.ones(4)))
        args, y = self.call("neg", [x])
        self.assertTrue(torch.equal(y, -args[0]))
        _, y = self.call("sum", [dict(x, shape=[2, 3, 4])], {"dim": [0, 2], "keepdim": True})
        self.assertEqual(tuple(y.shape), (1, 3, 1))
        _, y = self.call("silu_and_mul", [x])
        self.assertEqual(tuple(y.shape), (4, 4))
        table = {"name": "cos_sin_cache", "shape": [16, 8], "dtype": "float32"}
        pos = {"name": "positions", "shape": [4], "dtype": "int64"}
        args, y = self.call("rope", [dict(x, shape=[4, 2, 8]), pos, table])
        self.assertTrue(bool((args[1] < 16).all()))
        self.assertEqual(tuple(y.shape), (4, 2, 8))
        if hasattr(torch, "float8_e4m3fn"):
            _, (q, scale) = self.call("fp8_quant", [dict(x, shape=[4, 256])], {"group_size": 128})
            self.assertEqual((tuple(q.shape), tuple(scale.shape)), ((4, 256), (4, 2)))


if __name__ == "__main__":
    unittest.main()
