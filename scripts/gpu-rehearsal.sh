#!/usr/bin/env bash
# Rehearses the GPU check on this machine, against cuda-emu's emulated device, so that the first
# run on a real GPU cannot fail on plumbing: builds the bundle with scripts/gpu-prepare.sh, runs its
# gpu-check.sh with CUDA_EMU_LIB set (every step against the stand-in driver), then checks what the
# steps wrote. No figure of the run is a GPU's: bench_all records no time on an emulated device.
#
#   bash scripts/gpu-rehearsal.sh OUTDIR
#
# Writes OUTDIR/summary.md (gpu-check's, plus a "rehearsal" section) and the logs under
# OUTDIR/logs/ (prepare.log is the bundle build), replacing a previous rehearsal's. Exit status: 0 when the bundle built, no step of
# gpu-check failed and every rehearsal check passed; 1 otherwise; 2 for a bad setup.
#
# The rehearsal checks, on top of gpu-check's own steps:
#   - records.json: from the emulated device; no record carries a time or a sample; every row ran
#     once (timing `emulated`) or was skipped for the emulator budget or by the manifest, none
#     failed; every registered op (as `bench_all --list` names them; those the filter selects,
#     with GPU_REHEARSAL_BENCH_FILTER) has a row that ran
#   - roofline.md and roofline.svg written; every row blank, the rows that ran with the reason
#     "emulated device: no timing"
#   - calibrate checked its kernels and wrote no profile
#   - the L2 flush A/B wrote its three records files (from the emulated device) and both
#     comparisons, and each run said which flush it exercised
#
# Environment:
#   CUDA_EMU_LIB          the emulator's libraries (default: target/emu/lib, from scripts/emu-check.sh)
#   GPU_REHEARSAL_BUNDLE  where the bundle is built (default: target/gpu-rehearsal-bundle)
#   GPU_REHEARSAL_PROFILE the cargo profile of the bundle (GPU_PREPARE_PROFILE): default `emulated`
#                         when Cargo.toml defines it (optimised like `release`, and already built by
#                         scripts/emu-check.sh, so the bundle costs little more than linking), else
#                         `release`
#   GPU_REHEARSAL_TESTS   build (default): the bundle gets its test executables, gpu-check skips
#                         running them (GPU_CHECK_SKIP_TESTS=1; scripts/emu-check.sh runs the GPU
#                         tests against the emulator itself); run: runs them too, on the emulator
#                         (slow); skip: leaves them out of the bundle (GPU_PREPARE_SKIP_TESTS=1,
#                         the quickest build)
#   GPU_REHEARSAL_BENCH_FILTER  a regular expression over `op/workload/dtype` (bench_all's
#                         --filter, no spaces): the bench_all step runs only the rows it selects,
#                         and every op it selects must run a row. Default: every row, as on the GPU
#                         machine (about two and a half minutes on the emulator); scripts/emu-check.sh
#                         passes a few ops, since its bench_all test runs every row already
#   TILEOPS_BUNDLE_NVRTC  as for gpu-prepare.sh (default gzip, as on the GPU machine); the NVRTC
#                         copy gpu-check.sh unpacks into OUTDIR/nvrtc is removed afterwards
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: gpu-rehearsal.sh OUTDIR}"
lib="${CUDA_EMU_LIB:-$root/target/emu/lib}"
bundle="${GPU_REHEARSAL_BUNDLE:-$root/target/gpu-rehearsal-bundle}"
tests="${GPU_REHEARSAL_TESTS:-build}"
bench_filter="${GPU_REHEARSAL_BENCH_FILTER:-}"
profile="${GPU_REHEARSAL_PROFILE:-}"
if [[ -z "$profile" ]]; then
  profile=release
  grep -q '^\[profile\.emulated\]' "$root/Cargo.toml" && profile=emulated
fi
python="${PYTHON:-python3}"

case "$tests" in
  build | run | skip) ;;
  *) echo "gpu-rehearsal: GPU_REHEARSAL_TESTS must be build, run or skip (got $tests)" >&2; exit 2 ;;
esac
if [[ "$bench_filter" == *[[:space:]]* ]]; then
  echo "gpu-rehearsal: GPU_REHEARSAL_BENCH_FILTER may not contain spaces (got '$bench_filter')" >&2
  exit 2
fi
if [[ ! -e "$lib/libcuda.so.1" ]]; then
  echo "gpu-rehearsal: no libcuda.so.1 in $lib: build the emulator first (scripts/emu-check.sh)," \
    "or point CUDA_EMU_LIB at its library directory" >&2
  exit 2
fi
command -v "$python" >/dev/null || { echo "gpu-rehearsal: $python is needed" >&2; exit 2; }
lib="$(cd "$lib" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# A previous rehearsal's results are replaced, never mixed with this one's.
rm -rf "$out/logs" "$out/nvrtc" "$out/l2-flush-ab"
rm -f "$out/summary.md" "$out/records.json" "$out/roofline.md" "$out/roofline.svg" \
  "$out/calibrated-profile.yaml" "$out/baseline.json"
mkdir -p "$out/logs"

start=$(date +%s)
echo "== gpu-rehearsal: bundle (gpu-prepare.sh into $bundle, profile $profile, tests: $tests)"
skip_build=0
[[ "$tests" == skip ]] && skip_build=1
GPU_PREPARE_SKIP_TESTS=$skip_build GPU_PREPARE_PROFILE=$profile bash "$root/scripts/gpu-prepare.sh" "$bundle" \
  >"$out/logs/prepare.log" 2>&1
prepare_rc=$?
prepared=$(date +%s)
if ((prepare_rc != 0)); then
  {
    echo "# tileops GPU check: REHEARSAL on the emulated device (cuda-emu)"
    echo
    echo "| step | result | seconds | log |"
    echo "| --- | --- | --- | --- |"
    echo "| prepare | FAIL (exit $prepare_rc) | $((prepared - start)) | logs/prepare.log |"
    echo
    echo "## prepare failed: last lines"
    echo
    tail -n 30 "$out/logs/prepare.log" | sed 's/^/    /'
  } >"$out/summary.md"
  cat "$out/summary.md"
  exit 1
fi
echo "   PASS in $((prepared - start)) s"

echo "== gpu-rehearsal: gpu-check.sh against the emulated device ($lib)"
skip_run=1
[[ "$tests" == run ]] && skip_run=0
# bench_all's arguments: gpu-check's default, plus the filter when one is given.
bench_args=(--out "$out/records.json")
[[ -n "$bench_filter" ]] && bench_args+=(--filter "$bench_filter")
# The bundle is run as on the GPU machine: from its own folder, with nothing of this checkout.
(cd "$bundle" && CUDA_EMU_LIB="$lib" GPU_CHECK_SKIP_TESTS=$skip_run BENCH_ALL_ARGS="${bench_args[*]}" \
  bash ./gpu-check.sh "$out") >"$out/logs/check.log" 2>&1
check_rc=$?
checked=$(date +%s)
rm -rf "$out/nvrtc"
grep -E '^(== |   [A-Z])' "$out/logs/check.log" || true

# The registered ops the filter selects, as the bundle's bench_all names them
# (`name (family, file): N cases`).
ops="$("$bundle/bin/bench_all" --list "${bench_args[@]:2}" 2>/dev/null |
  sed -n 's/^\([a-z0-9_]*\) (.*$/\1/p' | tr '\n' ' ')"

"$python" - "$out" "$ops" "$bench_filter" >"$out/logs/rehearsal.log" 2>&1 <<'EOF'
import json, os, sys

out, ops, selected = sys.argv[1], sys.argv[2].split(), sys.argv[3]
failures, notes = [], []

def check(ok, text):
    (notes if ok else failures).append(text)

path = os.path.join(out, "records.json")
if not os.path.isfile(path):
    failures.append("records.json: not written")
else:
    run = json.load(open(path))
    records = run["records"]
    device = run["meta"]["device"]["name"]
    check(device.startswith("cuda-emu"), f"records.json: device `{device}`")
    figures = [r for r in records
               if r["samples"] or any(r[k] is not None for k in ("median_ms", "p10_ms", "p90_ms"))]
    check(not figures, f"records.json: {len(figures)} record(s) with a time or a sample"
          + "".join(f"\n    {r['op']}/{r['workload']}/{r['dtype']}" for r in figures[:10]))
    ran = [r for r in records if r["timing"] == "emulated"]
    left = [r for r in records if r["timing"] != "emulated"]
    bad = [r for r in left
           if r["timing"] != "none" or not (r.get("skipped") or "").startswith(
               ("emulated device: ", "manifest bench_skip_reason"))]
    check(not bad, f"records.json: {len(ran)} row(s) ran once, {len(left) - len(bad)} skipped for "
          f"the emulator budget or by the manifest, {len(bad)} failed"
          + "".join(f"\n    {r['op']}/{r['workload']}/{r['dtype']}: {r.get('skipped')}"
                    for r in bad[:10]))
    ran_ops = sorted({r["op"] for r in ran})
    missing = [op for op in ops if op not in ran_ops]
    check(ops and not missing,
          f"every registered op{' the filter selects' if selected else ''} ran at least one row "
          f"({len(ops) - len(missing)} of {len(ops)})"
          + (f"; none ran: {', '.join(missing)}" if missing else ""))

md = os.path.join(out, "roofline.md")
if not os.path.isfile(md):
    failures.append("roofline.md: not written")
else:
    text = open(md).read()
    rows = [l for l in text.splitlines() if l.startswith("| ") and l.count("|") > 12
            and not l.startswith("| op ") and not l.startswith("| ---")]
    emulated = [l for l in rows if l.endswith("| emulated device: no timing |")]
    counts = {v: f"| {v} | 0 |" in text
              for v in ("fail", "anomaly", "latency_bound", "at_ceiling", "below")}
    check(all(counts.values()), "roofline.md: no verdict on any row"
          + "".join(f"\n    `{v}` rows present" for v, zero in counts.items() if not zero))
    check(emulated and len(emulated) == len(ran if os.path.isfile(path) else []),
          f"roofline.md: {len(emulated)} row(s) blank with `emulated device: no timing`, "
          f"{len(rows) - len(emulated)} blank for another reason")
check(os.path.isfile(os.path.join(out, "roofline.svg")), "roofline.svg: written")

check(not os.path.exists(os.path.join(out, "calibrated-profile.yaml")),
      "calibrate: no profile written")
log = os.path.join(out, "logs", "calibrate.log")
text = open(log).read() if os.path.isfile(log) else ""
check("kernel checks passed; no profile written" in text,
      next((l.strip() for l in text.splitlines() if "kernel checks passed" in l),
           "calibrate: its kernel check did not pass (logs/calibrate.log)"))

ab = os.path.join(out, "l2-flush-ab")
runs = {"1-memset.json": "memset", "2-memset+read.json": "memset+read", "3-memset.json": "memset"}
for name in runs:
    p = os.path.join(ab, name)
    if not os.path.isfile(p):
        failures.append(f"l2-flush-ab/{name}: not written")
        continue
    device = json.load(open(p))["meta"]["device"]["name"]
    check(device.startswith("cuda-emu"), f"l2-flush-ab/{name}: device `{device}`")
for name in ("read-vs-memset.md", "memset-vs-memset.md"):
    check(os.path.isfile(os.path.join(ab, name)), f"l2-flush-ab/{name}: written")
log = os.path.join(out, "logs", "l2_flush_ab.log")
text = open(log).read() if os.path.isfile(log) else ""
said = [l.split("L2 flush: ", 1)[1].split(" ", 1)[0] for l in text.splitlines() if "L2 flush: " in l]
check(said == list(runs.values()),
      f"l2_flush_ab: the runs exercised the flushes {said} (want {list(runs.values())})")

for line in failures:
    print("FAIL", line)
for line in notes:
    print("ok  ", line)
sys.exit(1 if failures else 0)
EOF
checks_rc=$?
end=$(date +%s)

{
  echo
  echo "## rehearsal"
  echo
  [[ -n "$bench_filter" ]] && echo "bench_all ran the rows of --filter '$bench_filter' only" && echo
  echo "prepare $((prepared - start)) s (logs/prepare.log), gpu-check $((checked - prepared)) s" \
    "(exit $check_rc), checks $((end - checked)) s; total $((end - start)) s"
  echo
  sed 's/^/    /' "$out/logs/rehearsal.log"
  echo
  if ((check_rc == 0 && checks_rc == 0)); then
    echo "rehearsal: PASS"
  else
    echo "rehearsal: FAIL"
  fi
} >>"$out/summary.md"
sed -n '/^## rehearsal/,$p' "$out/summary.md"
echo "gpu-rehearsal: $out/summary.md"
((check_rc == 0 && checks_rc == 0))
