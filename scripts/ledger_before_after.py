#!/usr/bin/env python3
"""The before/after table of tileops-bench/ledger/CHANGES.md, from two emulated bench runs.

    python3 scripts/ledger_before_after.py BEFORE.json AFTER.json SASS_BEFORE.json SASS_AFTER.json

BEFORE/AFTER.json: `tileops bench --emu-max-bytes 0 --emu-max-flops 0` on the emulated device at each
revision; SASS_*.json: tileops-bench/ledger/sass_sm90.json of each. Re-prices both runs' launches
with the same model as `tileops roofline` (the H200 profile), so that only the kernels differ.
"""
# shapes) re-priced with the current pricing model against the SASS ledgers of the two revisions.
import json, math, sys
SECOND = ("reduce_finish_", "gqa_decode_merge_")
H200 = dict(hbm=4800e9*0.9380, issue=132*4*32*1.98e9, sfu=132*16*1.98e9, fp32=67.0e12*0.8548,
            tc={"tensor_core.fp16":989.5e12*0.6684,"tensor_core.bf16":989.5e12*0.7077})
def entries(path):
    return {e["entry"]: e for e in json.load(open(path))["entries"]}
def cost(e, grid, block, elements):
    threads = math.prod(grid) * math.prod(block)
    fixed_i = e["fixed"]["instructions"] + sum(l["body"]["instructions"] for l in e["loops"] if l["role"] == "fixed")
    fixed_m = e["fixed"]["mufu"] + sum(l["body"]["mufu"] for l in e["loops"] if l["role"] == "fixed")
    i = threads * fixed_i; m = threads * fixed_m
    for l in e["loops"]:
        if l["role"] == "stream":
            it = elements / l["elements_per_iteration"]; i += it * l["body"]["instructions"]; m += it * l["body"]["mufu"]
    return i, m
def price(rec, sass):
    L = rec["ledger"]["launches"]
    # the call's elements as the bench used them: a main launch's thread_instructions / instr_per_elem
    main = [x for x in L if not x["entry"].startswith(SECOND)]
    E = main[0]["thread_instructions"] / main[0]["instr_per_elem"]
    ins = mu = issue = sfu = 0.0
    for x in L:
        el = math.prod(x["grid"]) * math.prod(x["block"]) if x["entry"].startswith(SECOND) else E
        i, m = cost(sass[x["entry"]], x["grid"], x["block"], el)
        ctas = math.prod(x["grid"])
        issue += math.ceil(ctas/132) * (i/ctas) / (H200["issue"]/132)
        sfu += math.ceil(ctas/132) * (m/ctas) / (H200["sfu"]/132)
        if not x["entry"].startswith(SECOND):
            ins += i; mu += m
        else:
            ins += i; mu += m
    mem = rec["bytes"] / H200["hbm"]
    roof = H200["tc"].get(rec["roof"], H200["fp32"])
    comp = rec["flops"] / roof
    sol = max(mem, comp)
    lim = max(mem, comp, issue, sfu)
    name = ["memory","compute","issue","sfu"][[mem,comp,issue,sfu].index(lim)]
    return dict(instr=ins/E, mufu=mu/E, issue=issue/mem, ceiling=sol/lim, limiter=name, sol_us=sol*1e6, lim_us=lim*1e6,
                kernels=" + ".join(x["entry"] for x in L))
before = {(r["op"],r["workload"],r["dtype"]): r for r in json.load(open(sys.argv[1]))["records"] if r.get("ledger")}
after = {(r["op"],r["workload"],r["dtype"]): r for r in json.load(open(sys.argv[2]))["records"] if r.get("ledger")}
sb, sa = entries(sys.argv[3]), entries(sys.argv[4])
rows = []
for k, ra in after.items():
    if k not in before: continue
    b = price(before[k], sb); a = price(ra, sa)
    if abs(a["instr"]-b["instr"]) / b["instr"] < 0.02: continue
    rows.append((k, b, a))
print("| row | kernels before → after | instr/elem | MUFU/elem | issue / memory | limiter, ceiling |")
print("| --- | --- | ---: | ---: | ---: | --- |")
for k, b, a in rows:
    if max(a["lim_us"], b["lim_us"]) < 3.0:  # under 3 us either way: launch latency rules
        continue
    kern = b["kernels"] if b["kernels"] == a["kernels"] else f'{b["kernels"]} → {a["kernels"]}'
    print(f'| {"/".join(k)} | {kern} | {b["instr"]:.1f} → {a["instr"]:.1f} | {b["mufu"]:.2f} → {a["mufu"]:.2f} | {b["issue"]:.2f} → {a["issue"]:.2f} | {b["limiter"]} {b["ceiling"]*100:.0f}% → {a["limiter"]} {a["ceiling"]*100:.0f}% |')
