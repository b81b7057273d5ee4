#!/usr/bin/env python3
"""Turn the kernel compile check's report into tileops/docs/kernels.md.

    cargo test -p tileops --test it -- kernel_compile:: -- --nocapture --test-threads 1 2>&1 | python3 scripts/kernel_table.py > tileops/docs/kernels.md

Reads the per-entry ptxas lines (`entry arch regs stack spill-stores spill-loads smem`) and the
per-entry 128-bit access counts from the PTX, and writes one table row per entry point.
"""
import re
import sys
from collections import OrderedDict

rows = OrderedDict()
wide = {}
nvrtc = ""
for line in sys.stdin:
    line = line.rstrip("\n")
    m = re.search(r"(NVRTC \d+\.\d+) \(", line)
    if m and not nvrtc:
        nvrtc = m.group(1) + " (wheel nvidia-cuda-nvrtc==13.0.88)"
    m = re.match(r"^(\w+)\s+(sm_\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", line.strip())
    if m:
        entry, arch, regs, stack, st, ld, smem = m.groups()
        rows.setdefault(entry, {})[arch] = (int(regs), int(stack), int(st), int(ld), int(smem))
        continue
    m = re.match(r"^\s+(\w+)\s+128-bit loads\s+(\d+), stores\s+(\d+)$", line)
    if m and m.group(1) not in wide:
        wide[m.group(1)] = (int(m.group(2)), int(m.group(3)))

if not rows:
    sys.exit("no ptxas lines on stdin: run the compile check with --nocapture --test-threads 1")

print("# Kernel resources\n")
print(f"Every entry point in `tileops/kernels/`, compiled by {nvrtc} (pinned wheels, ptxas -v) on the")
print("CPU-only development machine; no GPU involved. Regenerate with the command at the top of")
print("`scripts/kernel_table.py`. Spills are asserted to be 0 by `tileops/tests/it/kernel_compile.rs`,")
print("which also asserts 128-bit global loads and stores for every entry declared memory-bound.\n")
print("| entry | regs sm_90 | regs sm_80 | spill bytes (st/ld) | static smem B | 128-bit ld/st in PTX |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for entry, archs in rows.items():
    s90 = archs.get("sm_90")
    s80 = archs.get("sm_80")
    spills = sum(a[2] + a[3] for a in archs.values())
    smem = max(a[4] for a in archs.values())
    ld, st = wide.get(entry, (0, 0))
    print(f"| `{entry}` | {s90[0] if s90 else '-'} | {s80[0] if s80 else '-'} | {spills} | {smem} | {ld}/{st} |")
