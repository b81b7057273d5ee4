#!/usr/bin/env bash
# The launches of every row of a measured GPU run, as the revision that ran there launched them:
# tileops-bench/ledger/backtest/launches-<rev>.tsv, what the kernel ledger's backtest prices
# (tileops-bench/src/ledger/backtest.rs).
#
#   bash scripts/backtest-launches.sh [RECORDS.json] [OUT.tsv]
#
# Defaults: results/h200-2026-12-04/records.json (revision 7e0417f) and
# tileops-bench/ledger/backtest/launches-7e0417f.tsv.
#
# 1. A worktree of the run's revision (its git_revision) under target/backtest/, whose emulator
#    gets a few lines that log each cuLaunchKernel (entry, grid, block, dynamic shared memory) to
#    $CUDA_EMU_LAUNCH_LOG and, with CUDA_EMU_DRY_RUN set, return without running it: that
#    revision's own host code picks every launch shape, nothing is computed.
# 2. Its bench_all, on its emulated device, one row at a time (--filter), every row within the
#    emulator's budget.
# 3. The bytes each call writes (its outputs, the same at every revision): today's bench_all on
#    today's emulated device, dry, which records them in each row's ledger (`written_bytes`).
#
# Needs the pinned CUDA wheels (scripts/install-cuda-wheels.sh) and builds both revisions'
# emulators (a few minutes on two cores). Nothing here needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
records="${1:-results/h200-2026-12-04/records.json}"
rev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"]["git_revision"])' "$records")
short="${rev:0:7}"
out="${2:-tileops-bench/ledger/backtest/launches-$short.tsv}"
work="$root/target/backtest"
tree="$work/$short"
mkdir -p "$work"

bash scripts/install-cuda-wheels.sh
export TILEOPS_CUDA_WHEELS="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}"

# 1. The revision's tree, its emulator taught to log and skip launches.
if [[ ! -d "$tree" ]]; then
    git worktree add --detach "$tree" "$rev"
fi
ln -sfn "$TILEOPS_CUDA_WHEELS" "$tree/.cuda-wheels"
python3 - "$tree/cuda-emu/src/driver.rs" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
marker = "// backtest-launches.sh: log every launch"
if marker not in text:
    anchor = "    record_coverage(function.entry);\n"
    if anchor not in text:
        sys.exit(f"{path}: no `record_coverage(function.entry);` to hook the launch log after")
    hook = anchor + f"""    {marker}, and skip running it when asked.
    if let Some(path) = std::env::var_os("CUDA_EMU_LAUNCH_LOG") {{
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {{
            let _ = writeln!(f, "{{}}\\t{{}}\\t{{}}\\t{{}}\\t{{}}\\t{{}}\\t{{}}\\t{{}}", function.entry.name,
                gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes);
        }}
        if std::env::var_os("CUDA_EMU_DRY_RUN").is_some() {{
            return CUresult::CUDA_SUCCESS;
        }}
    }}
"""
    open(path, "w").write(text.replace(anchor, hook, 1))
EOF
(cd "$tree" && cargo build -p cuda-emu --profile emulated --lib --locked &&
    cargo build --profile emulated --example bench_all --locked)
lib_old="$work/lib-$short"
lib_new="$work/lib-today"
mkdir -p "$lib_old" "$lib_new"
for n in libcuda.so libcuda.so.1 libcublas.so.13 libcublasLt.so.13; do
    ln -sf "$tree/target/emulated/libcuda_emu.so" "$lib_old/$n"
done

# 3. Today's emulator and bench_all, for the written bytes.
cargo build -p cuda-emu --profile emulated --lib --locked
cargo build --profile emulated --example bench_all --locked
for n in libcuda.so libcuda.so.1 libcublas.so.13 libcublasLt.so.13; do
    ln -sf "$root/target/emulated/libcuda_emu.so" "$lib_new/$n"
done
LD_LIBRARY_PATH="$lib_new" "$root/target/emulated/examples/bench_all" --emu-max-bytes 0 \
    --emu-max-flops 0 --out "$work/today.json" >"$work/today.log" 2>&1

# 2. Row by row on the revision's emulator, then the table.
python3 - "$records" "$tree" "$lib_old" "$work/today.json" "$out" "$rev" "$work" <<'EOF'
import json, os, re, subprocess, sys
records, tree, lib, today, out, rev, work = sys.argv[1:]
measured = json.load(open(records))["records"]
written = {}
for r in json.load(open(today))["records"]:
    ledger = r.get("ledger") or {}
    key = f'{r["op"]}/{r["workload"]}/{r["dtype"]}'
    if "written_bytes" in ledger:
        written[key] = ledger["written_bytes"]
lines = [
    f"# Every launch of the rows of {records} as revision {rev} made them (its host code on its",
    "# emulated device, launches logged and not run) and the bytes each call writes (today's bench on",
    "# the emulated device): made by scripts/backtest-launches.sh.",
    "# op/workload/dtype\twritten_bytes\tentry\tgrid_x\tgrid_y\tgrid_z\tblock_x\tblock_y\tblock_z\tdynamic_smem",
]
log = os.path.join(work, "launch-row.tsv")
for r in measured:
    key = f'{r["op"]}/{r["workload"]}/{r["dtype"]}'
    if key not in written:
        sys.exit(f"{key}: today's bench recorded no written bytes for it")
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, CUDA_EMU_LAUNCH_LOG=log, CUDA_EMU_DRY_RUN="1", LD_LIBRARY_PATH=lib)
    run = subprocess.run(
        [os.path.join(tree, "target/emulated/examples/bench_all"), "--filter", "^" + re.escape(key) + "$",
         "--emu-max-bytes", str(1 << 40), "--emu-max-flops", str(1 << 60), "--out", log + ".json"],
        env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{key}: bench_all of {rev} failed:\n{run.stdout}\n{run.stderr}")
    launched = [l for l in open(log).read().splitlines() if l and not l.startswith("bench_")] if os.path.exists(log) else []
    if not launched:
        lines.append(f"{key}\t{written[key]}\t-")
    for l in launched:
        lines.append(f"{key}\t{written[key]}\t{l}")
for f in (log, log + ".json"):
    if os.path.exists(f):
        os.remove(f)
open(out, "w").write("\n".join(lines) + "\n")
print(f"backtest-launches: {len(measured)} rows, {len(lines) - 4} lines -> {out}")
EOF
