#!/usr/bin/env python3
"""Tests of torch_baseline.py's plain-Python parts: statistics, budgets, the op catalog, records.

    python3 -m unittest discover -s scripts -p 'test_*.py'

No PyTorch needed; the tests that run the equivalents on CPU tensors skip without it.
"""

import json
import math
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
        for op in tb.EQUIVALENTS:
            entry = tb.equivalent(op)
            for name in entry.inputs + entry.params:
                name = tb.input_name(name)
                self.assertRegex(entries[op], rf"\n\s+{name}:", f"{op}: `{name}` not declared")
            # An input marked optional ("?") is one the manifest marks optional, and the other way.
            for name in entry.inputs:
                optional = re.search(rf"\n\s+{tb.input_name(name)}: \{{[^}}\n]*optional: true",
                                     entries[op])
                self.assertEqual(name.endswith("?"), bool(optional), f"{op}: `{name}`")

    def test_plan_resolves_inputs_in_call_order_and_takes_the_rows_params(self):
        plan = tb.plan_call(row("rms_norm", inputs=[
            {"name": "weight", "shape": [8], "dtype": "bfloat16"},
            {"name": "x", "shape": [4, 8], "dtype": "bfloat16"}], params={"eps": 1e-6}))
        self.assertEqual([s["name"] for s in plan.specs], ["x", "weight"])
        self.assertEqual((plan.op, plan.params, plan.host), ("rms_norm", {"eps": 1e-6}, None))
        params = tb.plan_call(row("gelu", params={"approximate": "tanh"})).params
        self.assertEqual(params, {"approximate": "tanh"})
        params = tb.plan_call(row("sum", params={"dim": [0, 2], "keepdim": True})).params
        self.assertEqual((tb._dims(params["dim"]), params["keepdim"]), ((0, 2), True))
        # A null dim is a reduction over every dim.
        params = tb.plan_call(row("sum", params={"dim": None, "keepdim": False})).params
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


def decode_params(**given):
    params = {"sm_scale": None, "softcap": 0.0, "return_lse": False, "kv_lens": None,
              "cache_dtype": None}
    params.update(given)
    return params


def decode_inputs(batch=3, heads=4, kv_heads=2, dim=16, s_max=20, dtype="float32", fp8=False,
                  cache_dtype=None):
    """gqa_decode inputs as bench_all records them (the caches in `cache_dtype`, else q's)."""
    cache = cache_dtype or dtype
    inputs = [{"name": "q", "shape": [batch, heads, dim], "dtype": dtype},
              {"name": "k_cache", "shape": [batch, s_max, kv_heads, dim], "dtype": cache},
              {"name": "v_cache", "shape": [batch, s_max, kv_heads, dim], "dtype": cache},
              {"name": "seqlens", "shape": [batch], "dtype": "int32"}]
    if fp8:
        inputs += [{"name": n, "shape": [1], "dtype": "float32"} for n in ("k_scale", "v_scale")]
    return inputs


def paged_inputs(batch=3, heads=4, kv_heads=2, dim=16, pages=12, page_size=4, max_pages=5,
                 dtype="float32", fp8=False, cache_dtype=None):
    cache = cache_dtype or dtype
    pool = [pages, page_size, kv_heads, dim]
    inputs = [{"name": "q", "shape": [batch, heads, dim], "dtype": dtype},
              {"name": "k_pages", "shape": pool, "dtype": cache},
              {"name": "v_pages", "shape": list(pool), "dtype": cache},
              {"name": "block_table", "shape": [batch, max_pages], "dtype": "int32"},
              {"name": "seqlens", "shape": [batch], "dtype": "int32"}]
    if fp8:
        inputs += [{"name": n, "shape": [1], "dtype": "float32"} for n in ("k_scale", "v_scale")]
    return inputs


class Decode(unittest.TestCase):
    """The attention decode rows: the host plan (lengths, table, mask rows, FlashInfer's pages)."""

    def test_block_table_is_tileops_bench_table(self):
        # Values of tileops's shuffled_block_table (gqa_decode_paged.rs) for the same arguments.
        self.assertEqual(tb.shuffled_block_table(3, 4, 10, [33, 0, 17], 16),
                         [[8, 7, 6, -1], [-1, -1, -1, -1], [5, 3, -1, -1]])
        self.assertEqual(tb.shuffled_block_table(2, 3, 4, [48, 48], 16),
                         [[2, 3, 1], [0, -1, -1]])
        lens = [32768, 1, 0, 4097, 30000, 12345, 8191, 20000]
        table = tb.shuffled_block_table(8, 2048, 6715, lens, 16)
        flat = [page for r in table for page in r]
        self.assertEqual(sum((i + 1) * page for i, page in enumerate(flat)), 181027185806)
        self.assertEqual(table[1][:4], [3771, -1, -1, -1])
        used = [page for page in flat if page >= 0]
        self.assertEqual(sorted(used), list(range(6715)))  # the ragged row's pool, exactly

    def test_lengths_come_from_kv_lens_or_fill_the_cache(self):
        self.assertEqual(tb.decode_lens("op", None, 3, 20), [20, 20, 20])
        self.assertEqual(tb.decode_lens("op", [20, 0, 7], 3, 20), [20, 0, 7])
        with self.assertRaisesRegex(
                tb.BaselineError, r"op: kv_lens has 2 lengths for a batch of 3 \(q's first dim\)"):
            tb.decode_lens("op", [1, 2], 3, 20)
        with self.assertRaisesRegex(tb.BaselineError, "op: kv_lens is 7, not a list of 3 lengths"):
            tb.decode_lens("op", 7, 3, 20)
        with self.assertRaisesRegex(tb.BaselineError, r"kv_lens\[1\] = 21 is not a length in 0"):
            tb.decode_lens("op", [1, 21, 0], 3, 20)
        with self.assertRaisesRegex(tb.BaselineError, r"kv_lens\[2\] = -1"):
            tb.decode_lens("op", [1, 2, -1], 3, 20)
        with self.assertRaisesRegex(tb.BaselineError, r"kv_lens\[0\] = True"):
            tb.decode_lens("op", [True, 2, 1], 3, 20)

    def test_masking_only_for_ragged_lengths_and_empty_rows_kept_whole(self):
        self.assertEqual(tb.decode_masking([20, 20], 20), (None, None))
        self.assertEqual(tb.decode_masking([20, 7], 20), ([20, 7], None))
        # An empty sequence's row stays whole (no NaN); the kept rows zero it afterwards.
        self.assertEqual(tb.decode_masking([20, 0, 7], 20), ([20, 20, 7], [True, False, True]))
        self.assertEqual(tb.decode_masking([0, 0], 20), ([20, 20], [False, False]))

    def test_dense_plan_takes_inputs_in_call_order_and_the_scales_only_when_given(self):
        plan = tb.plan_call(row("gqa_decode", inputs=decode_inputs()[::-1],
                                params=decode_params(kv_lens=[20, 0, 7])))
        self.assertEqual([s["name"] for s in plan.specs], ["q", "k_cache", "v_cache", "seqlens"])
        host = plan.host
        self.assertEqual((host["batch"], host["heads"], host["kv_heads"], host["head_dim"]),
                         (3, 4, 2, 16))
        self.assertEqual((host["capacity"], host["lens"], host["paged"], host["table"]),
                         (20, [20, 0, 7], False, None))
        self.assertEqual((host["mask_lens"], host["keep"]), ([20, 20, 7], [True, False, True]))
        self.assertEqual((host["cache_dtype"], host["scales"]), ("float32", None))
        self.assertEqual(host["names"], [s["name"] for s in plan.specs])

        # fp8: the caches' recorded dtype may be the case's; cache_dtype decides.
        plan = tb.plan_call(row("gqa_decode", inputs=decode_inputs(dtype="bfloat16", fp8=True),
                                params=decode_params(cache_dtype="float8_e4m3fn")))
        self.assertEqual([(s["name"], s["dtype"]) for s in plan.specs],
                         [("q", "bfloat16"), ("k_cache", "float8_e4m3fn"),
                          ("v_cache", "float8_e4m3fn"), ("seqlens", "int32"),
                          ("k_scale", "float32"), ("v_scale", "float32")])
        self.assertEqual(plan.host["scales"], (0.75, 1.25))
        self.assertEqual((plan.host["lens"], plan.host["mask_lens"], plan.host["keep"]),
                         ([20, 20, 20], None, None))
        # The row's own spec dicts are left as they were.
        inputs = decode_inputs(dtype="bfloat16", fp8=True)
        tb.plan_call(row("gqa_decode", inputs=inputs,
                         params=decode_params(cache_dtype="float8_e4m3fn")))
        self.assertEqual(inputs[1]["dtype"], "bfloat16")

    def test_paged_plan_scatters_the_sequences_over_the_pool(self):
        plan = tb.plan_call(row("gqa_decode_paged", inputs=paged_inputs(),
                                params=decode_params(kv_lens=[20, 0, 7], return_lse=True)))
        self.assertEqual([s["name"] for s in plan.specs],
                         ["q", "k_pages", "v_pages", "block_table", "seqlens"])
        host = plan.host
        self.assertEqual((host["capacity"], host["page_size"], host["paged"]), (20, 4, True))
        self.assertEqual(host["table"], tb.shuffled_block_table(3, 5, 12, [20, 0, 7], 4))
        self.assertEqual([sum(p >= 0 for p in r) for r in host["table"]], [5, 0, 2])
        used = [p for r in host["table"] for p in r if p >= 0]
        self.assertEqual(len(set(used)), len(used))
        self.assertTrue(all(0 <= p < 12 for p in used))
        self.assertTrue(all(r[n:] == [-1] * (5 - n) for r, n in zip(host["table"], [5, 0, 2])))
        self.assertEqual((host["mask_lens"], host["keep"]), ([20, 20, 7], [True, False, True]))

        plan = tb.plan_call(row("gqa_decode_paged", inputs=paged_inputs(pages=15, fp8=True),
                                params=decode_params(cache_dtype="float8_e4m3fn")))
        self.assertEqual([s["name"] for s in plan.specs],
                         ["q", "k_pages", "v_pages", "block_table", "seqlens", "k_scale",
                          "v_scale"])
        self.assertEqual([s["dtype"] for s in plan.specs[1:3]], ["float8_e4m3fn"] * 2)
        self.assertEqual((plan.host["lens"], plan.host["mask_lens"]), ([20, 20, 20], None))

    def test_flashinfer_pages_follow_the_table_or_page_the_dense_cache(self):
        paged = tb.plan_call(row("gqa_decode_paged", inputs=paged_inputs(),
                                 params=decode_params(kv_lens=[20, 0, 7]))).host
        page_size, indptr, indices, last = tb.flashinfer_pages(paged)
        table = paged["table"]
        self.assertEqual((page_size, indptr, last), (4, [0, 5, 5, 7], [4, 0, 3]))
        self.assertEqual(indices, table[0][:5] + table[2][:2])
        dense = tb.plan_call(row("gqa_decode", inputs=decode_inputs(s_max=40),
                                 params=decode_params(kv_lens=[40, 0, 17]))).host
        # Pages of 8 keys (gcd(40, 16)): sequence b from page 5 * b.
        self.assertEqual(tb.flashinfer_pages(dense),
                         (8, [0, 5, 5, 8], [0, 1, 2, 3, 4, 10, 11, 12], [8, 0, 1]))

    def test_decode_rows_refused_with_the_reason(self):
        def plan(op="gqa_decode", inputs=None, **params):
            inputs = inputs or (decode_inputs() if op == "gqa_decode" else paged_inputs())
            return tb.plan_call(row(op, inputs=inputs, params=decode_params(**params)))

        with self.assertRaisesRegex(tb.BaselineError,
                                    "gqa_decode: kv_lens has 2 lengths for a batch of 3"):
            plan(kv_lens=[1, 2])
        with self.assertRaisesRegex(tb.BaselineError,
                                    "gqa_decode_paged: kv_lens has 4 lengths for a batch of 3"):
            plan("gqa_decode_paged", kv_lens=[1, 2, 3, 4])
        with self.assertRaisesRegex(tb.BaselineError, r"kv_lens\[0\] = 21 is not .* 0..=20"):
            plan("gqa_decode_paged", kv_lens=[21, 0, 0])
        with self.assertRaisesRegex(tb.BaselineError, "the lengths use 13 pages of 4 keys, the "
                                                      "pool holds 12"):
            plan("gqa_decode_paged", kv_lens=[20, 20, 12])
        with self.assertRaisesRegex(tb.BaselineError,
                                    "float8_e4m3fn cache needs the inputs k_scale and v_scale; "
                                    "the row gives neither"):
            plan(cache_dtype="float8_e4m3fn")
        with self.assertRaisesRegex(tb.BaselineError, "the row gives k_scale$"):
            plan(inputs=decode_inputs(fp8=True)[:-1], cache_dtype="float8_e4m3fn")
        with self.assertRaisesRegex(tb.BaselineError,
                                    "gives k_scale and v_scale for a float32 cache"):
            plan(inputs=decode_inputs(fp8=True))
        with self.assertRaisesRegex(tb.BaselineError, "cache_dtype 'float7' is not a dtype"):
            plan(cache_dtype="float7")
        with self.assertRaisesRegex(tb.BaselineError, r"input\(s\) seqlens"):
            plan(inputs=decode_inputs()[:3])
        with self.assertRaisesRegex(tb.BaselineError, r"param\(s\) kv_lens"):
            tb.plan_call(row("gqa_decode", inputs=decode_inputs(), params={
                "sm_scale": None, "softcap": 0.0, "return_lse": False, "cache_dtype": None}))
        bad = decode_inputs()
        bad[0] = dict(bad[0], shape=[3, 3, 16])
        with self.assertRaisesRegex(tb.BaselineError, "q's 3 heads of 16 do not group over "
                                                      "k_cache's 2 heads of 16"):
            plan(inputs=bad)
        bad = decode_inputs()
        bad[1] = dict(bad[1], shape=[3, 20, 2])
        with self.assertRaisesRegex(tb.BaselineError,
                                    r"k_cache has shape \[3, 20, 2\], not \(B, S_max, H_kv, D\)"):
            plan(inputs=bad)
        bad = decode_inputs()
        bad[2] = dict(bad[2], shape=[3, 21, 2, 16])
        with self.assertRaisesRegex(tb.BaselineError, "v_cache's shape is not k_cache's"):
            plan(inputs=bad)
        bad = decode_inputs()
        bad[3] = dict(bad[3], shape=[4])
        with self.assertRaisesRegex(tb.BaselineError, r"seqlens has shape \[4\], not \(3,\)"):
            plan(inputs=bad)
        bad = paged_inputs()
        bad[3] = dict(bad[3], shape=[2, 5])
        with self.assertRaisesRegex(tb.BaselineError, "block_table has 2 rows for a batch of 3"):
            plan("gqa_decode_paged", inputs=bad)

    def test_manifest_rows_plan(self):
        # The manifest's own workloads, as bench_all records them (the largest ones included).
        lens = [32768, 1, 0, 4097, 30000, 12345, 8191, 20000]
        ragged = tb.plan_call(row("gqa_decode_paged", inputs=paged_inputs(
            batch=8, heads=32, kv_heads=8, dim=128, pages=6715, page_size=16, max_pages=2048,
            dtype="bfloat16"), params=decode_params(kv_lens=lens, return_lse=True))).host
        self.assertEqual(ragged["capacity"], 32768)
        self.assertEqual(ragged["keep"], [n > 0 for n in lens])
        _, indptr, indices, last = tb.flashinfer_pages(ragged)
        self.assertEqual((indptr[-1], len(set(indices)), last[:3]), (6715, 6715, [16, 1, 0]))
        full = tb.plan_call(row("gqa_decode", inputs=decode_inputs(
            batch=1, heads=32, kv_heads=4, dim=128, s_max=262144, dtype="float16"),
            params=decode_params())).host
        self.assertEqual((full["lens"], full["mask_lens"], full["keep"]), ([262144], None, None))

    def test_flashinfer_impl_is_asked_for_and_skips_with_the_reason(self):
        self.assertEqual(tb.parse_args(["r.json"]).impls, ["torch", "torch-compile"])
        self.assertEqual(tb.parse_args(["r.json", "--impl", "flashinfer"]).impls, ["flashinfer"])
        self.assertIs(tb.flashinfer_builder("gqa_decode", None), tb._flashinfer_decode)
        self.assertIs(tb.flashinfer_builder("gqa_decode_paged", None), tb._flashinfer_decode)
        with self.assertRaisesRegex(tb.BaselineError, "no FlashInfer equivalent .* `softmax`"):
            tb.flashinfer_builder("softmax", None)
        with self.assertRaisesRegex(tb.BaselineError, r"FlashInfer is not importable \(Module"):
            tb.flashinfer_builder("gqa_decode", "ModuleNotFoundError: No module named 'flashinfer'")
        module, why = tb.import_flashinfer()
        self.assertTrue((module is None) != (why is None))


def prefill_params(**given):
    params = {"sm_scale": None, "causal": False, "softcap": 0.0, "window_left": -1,
              "return_lse": False, "q_lens": None, "kv_lens": None}
    params.update(given)
    return params


def prefill_inputs(total_q=12, total_kv=20, batch=2, heads=4, kv_heads=2, dim=16,
                   dtype="float32"):
    """gqa_prefill inputs as bench_all records them."""
    return [{"name": "q", "shape": [total_q, heads, dim], "dtype": dtype},
            {"name": "k", "shape": [total_kv, kv_heads, dim], "dtype": dtype},
            {"name": "v", "shape": [total_kv, kv_heads, dim], "dtype": dtype},
            {"name": "cu_seqlens_q", "shape": [batch + 1], "dtype": "int32"},
            {"name": "cu_seqlens_k", "shape": [batch + 1], "dtype": "int32"}]


class Prefill(unittest.TestCase):
    def test_offsets_come_from_the_lengths_or_split_the_totals_evenly(self):
        host = tb.plan_call(row("gqa_prefill", inputs=prefill_inputs(),
                                params=prefill_params())).host
        self.assertEqual((host["cu_q"], host["cu_k"]), ([0, 6, 12], [0, 10, 20]))
        host = tb.plan_call(row("gqa_prefill", inputs=prefill_inputs(), params=prefill_params(
            q_lens=[0, 12], kv_lens=[5, 15]))).host
        self.assertEqual((host["cu_q"], host["cu_k"]), ([0, 0, 12], [0, 5, 20]))

    def test_visible_keys_are_tileops_reference(self):
        # tileops's reference::visible_keys doc example: 2 queries over 5 keys, causal.
        self.assertEqual(tb.visible_keys(0, 2, 5, True, -1), (0, 4))
        self.assertEqual(tb.visible_keys(1, 2, 5, True, -1), (0, 5))
        self.assertEqual(tb.visible_keys(1, 2, 5, True, 1), (3, 5))
        lo, hi = tb.visible_keys(1, 3, 1, True, -1)
        self.assertEqual(hi - lo, 0)
        self.assertEqual(tb.visible_keys(0, 3, 9, False, 2), (4, 9))

    def test_masks_only_where_pytorch_cannot_say_it(self):
        # A square causal sequence is PyTorch's is_causal; a chunk over a longer prefix, or a
        # window, needs the bottom-right mask; non-causal needs none.
        host = tb.plan_call(row("gqa_prefill", inputs=prefill_inputs(), params=prefill_params(
            causal=True, q_lens=[6, 6], kv_lens=[6, 14]))).host
        self.assertEqual([(s["mask"], s["is_causal"]) for s in host["sequences"]],
                         [(False, True), (True, False)])
        host = tb.plan_call(row("gqa_prefill", inputs=prefill_inputs(), params=prefill_params(
            causal=True, window_left=3))).host
        self.assertTrue(all(s["mask"] for s in host["sequences"]))
        host = tb.plan_call(row("gqa_prefill", inputs=prefill_inputs(),
                                params=prefill_params())).host
        self.assertFalse(any(s["mask"] or s["is_causal"] for s in host["sequences"]))

    def test_prefill_rows_refused_with_the_reason(self):
        bad = [
            (prefill_inputs(total_q=13), prefill_params(), "13 rows do not split evenly"),
            (prefill_inputs(), prefill_params(q_lens=[6, 7]), "add up to 13"),
            (prefill_inputs(), prefill_params(kv_lens=[20]), "is not 2 lengths"),
            (prefill_inputs(heads=3), prefill_params(), "do not group"),
        ]
        for inputs, params, words in bad:
            with self.subTest(words=words):
                with self.assertRaisesRegex(tb.BaselineError, words):
                    tb.plan_call(row("gqa_prefill", inputs=inputs, params=params))

    def test_flash_attn_impl_is_asked_for_and_skips_with_the_reason(self):
        self.assertEqual(tb.parse_args(["r.json", "--impl", "flash-attn"]).impls, ["flash-attn"])
        self.assertIs(tb.library_builder("gqa_prefill", "flash-attn", None),
                      tb._flash_attn_prefill)
        with self.assertRaisesRegex(tb.BaselineError, "no flash-attn equivalent .* `gqa_decode`"):
            tb.library_builder("gqa_decode", "flash-attn", None)
        with self.assertRaisesRegex(tb.BaselineError, "no FlashInfer equivalent .* `gqa_prefill`"):
            tb.library_builder("gqa_prefill", "flashinfer", None)
        with self.assertRaisesRegex(tb.BaselineError, r"flash-attn is not importable \(Module"):
            tb.library_builder("gqa_prefill", "flash-attn", "ModuleNotFoundError: flash_attn")
        module, why = tb.import_flash_attn()
        self.assertTrue((module is None) != (why is None))


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
        open_module = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                       "Release Build  (dvs-builder@U22-I3-AE18-23-3)\n")
        self.assertEqual(tb.driver_version(open_module, 13000), "580.159.04 (CUDA 13.0)")


if torch is None:
    print("SKIP: PyTorch is not installed: the torch equivalents are not run")


@unittest.skipIf(torch is None, "PyTorch is not installed: the equivalents are not run")
class EquivalentsOnCpu(unittest.TestCase):
    def call(self, op, inputs, params=None):
        plan = tb.plan_call(row(op, inputs=inputs, params=params))
        gen = torch.Generator().manual_seed(0)
        args = tb.call_inputs(torch, plan, inputs, "cpu", gen)
        return args, plan.build(torch, plan.params)(*args)

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


def naive_decode(q, k, v, lens, scale, softcap):
    """o, lse of one query per sequence over its first lens[b] keys, a loop over (b, h) in f64;
    k, v [B, S, H_kv, D]."""
    batch, heads, dim = q.shape
    group = heads // k.shape[2]
    o = torch.zeros(batch, heads, dim, dtype=torch.float64)
    lse = torch.full((batch, heads), float("-inf"), dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            n = lens[b]
            if n == 0:
                continue
            keys, values = k[b, :n, h // group].double(), v[b, :n, h // group].double()
            s = [float(q[b, h].double() @ keys[j]) * scale for j in range(n)]
            if softcap > 0:
                s = [softcap * math.tanh(x / softcap) for x in s]
            top = max(s)
            total = sum(math.exp(x - top) for x in s)
            lse[b, h] = top + math.log(total)
            for j in range(n):
                o[b, h] += math.exp(s[j] - top) / total * values[j]
    return o, lse


@unittest.skipIf(torch is None, "PyTorch is not installed: the equivalents are not run")
class DecodeOnCpu(unittest.TestCase):
    """The decode equivalents against a naive loop, on CPU tensors."""

    def run_case(self, op, inputs, params, dtype=torch.float32 if torch else None, tol=1e-5):
        plan = tb.plan_call(row(op, inputs=inputs, params=params))
        args = tb.call_inputs(torch, plan, inputs, "cpu", torch.Generator().manual_seed(0))
        host = plan.host
        names = host["names"]
        seqlens = args[names.index("seqlens")]
        self.assertEqual((seqlens.dtype, seqlens.tolist()), (torch.int32, host["lens"]))
        q, k, v = args[0], args[1], args[2]
        if host["scales"]:
            k_scale, v_scale = args[names.index("k_scale")], args[names.index("v_scale")]
            self.assertEqual((k.dtype, k_scale.tolist(), v_scale.tolist()),
                             (torch.float8_e4m3fn, [0.75], [1.25]))
            k, v = k.double() * 0.75, v.double() * 1.25
        if host["paged"]:
            table = args[names.index("block_table")]
            self.assertEqual((table.dtype, table.tolist()), (torch.int32, host["table"]))
            # Key p of sequence b: row p % page_size of page table[b][p // page_size].
            size = host["page_size"]
            dense_k = torch.zeros(host["batch"], host["capacity"], *k.shape[2:], dtype=k.dtype)
            dense_v = torch.zeros_like(dense_k)
            for b, n in enumerate(host["lens"]):
                for p in range(n):
                    page = host["table"][b][p // size]
                    dense_k[b, p], dense_v[b, p] = k[page, p % size], v[page, p % size]
            k, v = dense_k, dense_v
        scale = params["sm_scale"] or 1.0 / math.sqrt(q.shape[-1])
        want_o, want_lse = naive_decode(q, k, v, host["lens"], scale, params["softcap"])
        out = plan.build(torch, plan.params)(*args)
        o, lse = out if params["return_lse"] else (out, None)
        self.assertEqual((o.dtype, tuple(o.shape)), (q.dtype, tuple(q.shape)))
        self.assertFalse(bool(o.isnan().any()))
        self.assertTrue(torch.allclose(o.double(), want_o, atol=tol, rtol=tol),
                        float((o.double() - want_o).abs().max()))
        if params["return_lse"]:
            self.assertEqual((lse.dtype, tuple(lse.shape)), (torch.float32, tuple(q.shape[:2])))
            finite = torch.isfinite(want_lse)
            self.assertTrue(torch.equal(torch.isfinite(lse), finite))
            self.assertTrue(bool((lse[~finite] == float("-inf")).all()))
            self.assertTrue(torch.allclose(lse.double()[finite], want_lse[finite],
                                           atol=max(tol, 1e-4)),
                            float((lse.double()[finite] - want_lse[finite]).abs().max()))
        return o

    def test_dense(self):
        for kv_lens in (None, [20, 0, 7], [1, 20, 3]):
            for softcap, lse, sm_scale in ((0.0, False, None), (0.0, True, 0.3),
                                           (5.0, False, None), (5.0, True, None)):
                with self.subTest(kv_lens=kv_lens, softcap=softcap, lse=lse):
                    self.run_case("gqa_decode", decode_inputs(), decode_params(
                        kv_lens=kv_lens, softcap=softcap, return_lse=lse, sm_scale=sm_scale))
        # MHA (no grouping) and one head group.
        self.run_case("gqa_decode", decode_inputs(heads=2, kv_heads=2),
                      decode_params(kv_lens=[3, 0, 20]))
        self.run_case("gqa_decode", decode_inputs(heads=4, kv_heads=1),
                      decode_params(kv_lens=[3, 0, 20]))

    def test_dense_without_enable_gqa(self):
        # PyTorch before 2.5: the KV heads repeated for SDPA.
        from unittest import mock
        with mock.patch.object(tb, "_sdpa_takes_gqa", lambda torch: False):
            self.run_case("gqa_decode", decode_inputs(), decode_params(kv_lens=[20, 0, 7]))
            self.run_case("gqa_decode", decode_inputs(), decode_params())

    def test_paged(self):
        for kv_lens in (None, [20, 0, 7], [1, 13, 0]):
            for softcap, lse in ((0.0, False), (0.0, True), (5.0, True)):
                with self.subTest(kv_lens=kv_lens, softcap=softcap, lse=lse):
                    self.run_case("gqa_decode_paged", paged_inputs(pages=15), decode_params(
                        kv_lens=kv_lens, softcap=softcap, return_lse=lse))

    def test_half_precision_and_fp8_caches(self):
        self.run_case("gqa_decode", decode_inputs(dtype="bfloat16"),
                      decode_params(kv_lens=[20, 0, 7]), tol=3e-2)
        self.run_case("gqa_decode", decode_inputs(dtype="bfloat16", fp8=True),
                      decode_params(cache_dtype="float8_e4m3fn", kv_lens=[20, 0, 7],
                                    return_lse=True), tol=3e-2)
        self.run_case("gqa_decode_paged", paged_inputs(pages=15, dtype="float16", fp8=True),
                      decode_params(cache_dtype="float8_e4m3fn", softcap=5.0), tol=3e-2)

    def test_plan_is_made_before_the_call(self):
        plan = tb.plan_call(row("gqa_decode_paged", inputs=paged_inputs(),
                                params=decode_params(kv_lens=[20, 0, 7])))
        args = tb.call_inputs(torch, plan, paged_inputs(), "cpu", torch.Generator().manual_seed(0))
        index, mask, keep = args[-1]
        self.assertEqual(len(args), 6)
        self.assertEqual(index.tolist(), [[max(p, 0) for p in r] for r in plan.host["table"]])
        self.assertEqual(tuple(mask.shape), (3, 1, 1, 20))
        self.assertEqual(mask.sum(-1).flatten().tolist(), [20, 20, 7])
        self.assertEqual(keep.flatten().tolist(), [True, False, True])
        full = tb.plan_call(row("gqa_decode", inputs=decode_inputs(), params=decode_params()))
        args = tb.call_inputs(torch, full, decode_inputs(), "cpu", torch.Generator().manual_seed(0))
        self.assertEqual(args[-1], (None, None))


if __name__ == "__main__":
    unittest.main()
