#!/usr/bin/env python3
"""The Python side of `cargo bench --bench eval_roofline`: each manifest formula as a plain Python
function, timed with timeit on the same shapes and params as the Rust side.

The function of an entry is what a Python roofline codegen writes for it: one `def` whose
arguments are the entry's inputs (objects with `.shape` and `.ndim`, or None) and params, with
`elem_bytes` beside them; fixed-rank dims bound from the first input present that declares them;
each var a local assignment in declaration order; `return flops, bytes`. The helpers are
Python's builtins and `math.prod`/`ceil`/`floor`/`log2`.

Reads a JSON list of cases on stdin, each
  {"id": str, "manifest": path, "op": str, "inputs": {name: shape | null},
   "params": {name: value}, "elem_bytes": int}
and writes one JSON object {id: {"ns": median ns per call, "flops": int, "bytes": int}} (or
{"error": str}) on stdout.
"""

import json
import math
import sys
import timeit

import yaml

HELPERS = {
    "product": math.prod,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
}


class Tensor:
    """A tensor input as the formulas see it: its shape (a tuple) and rank."""

    __slots__ = ("shape", "ndim")

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def dims_of(decl):
    """The names of a fixed-rank shape (`shape: "[M, K]"` or a YAML list), or None."""
    shape = decl.get("shape") if isinstance(decl, dict) else None
    if shape is None:
        return None
    if isinstance(shape, str):
        shape = [s.strip() for s in shape.strip()[1:-1].split(",") if s.strip()]
    return [str(d) if str(d).isidentifier() else None for d in shape]


def build(entry, name):
    """The entry's roofline as a Python function `f(<inputs>, <params>, elem_bytes)`."""
    sig = entry["signature"]
    inputs = list((sig.get("inputs") or {}).items())
    params = list((sig.get("params") or {}).keys())
    roofline = entry["roofline"]
    lines = [f"def {name}({', '.join([n for n, _ in inputs] + params + ['elem_bytes'])}):"]
    bound = set(params)
    seen = set()
    for input_name, decl in inputs:
        for axis, dim in enumerate(dims_of(decl) or []):
            if dim is None or dim in bound or dim in seen:
                continue
            seen.add(dim)
            sources = [
                f"{n}.shape[{dims_of(d).index(dim)}]"
                for n, d in inputs
                if dims_of(d) and dim in dims_of(d)
            ]
            expr = sources[-1]
            for src in reversed(sources[:-1]):
                expr = f"{src} if {src.split('.')[0]} is not None else {expr}"
            lines.append(f"    {dim} = {expr}")
    for var, formula in (roofline.get("vars") or {}).items():
        lines.append(f"    {var} = {formula}")
    lines.append(f"    return ({roofline['flops']}), ({roofline['bytes']})")
    namespace = dict(HELPERS)
    exec("\n".join(lines), namespace)
    return namespace[name], [n for n, _ in inputs], params


def time_per_call(call):
    """Median nanoseconds per call, over 7 repeats of batches sized to take about 10 ms."""
    number, _ = timeit.Timer(call).autorange()
    number = max(1, number // 20)
    samples = timeit.Timer(call).repeat(repeat=7, number=number)
    return sorted(samples)[len(samples) // 2] / number * 1e9


def main():
    cases = json.load(sys.stdin)
    entries = {}
    out = {}
    for case in cases:
        path = case["manifest"]
        if path not in entries:
            with open(path) as f:
                entries[path] = yaml.safe_load(f)
        try:
            f, input_names, param_names = build(entries[path][case["op"]], "roofline")
            args = [
                None if case["inputs"].get(n) is None else Tensor(case["inputs"][n])
                for n in input_names
            ]
            args += [case["params"].get(p) for p in param_names]
            args.append(case["elem_bytes"])
            flops, nbytes = f(*args)
            ns = time_per_call(lambda: f(*args))
            out[case["id"]] = {"ns": ns, "flops": int(flops), "bytes": int(nbytes)}
        except Exception as e:  # a formula Python rejects: reported, not fatal
            out[case["id"]] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
