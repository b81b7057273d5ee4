#!/usr/bin/env bash
# Runs every GPU-side check of tileops from a bundle made by scripts/gpu-prepare.sh, on a machine
# with an NVIDIA GPU and the CUDA 13 driver, without Rust. Writes OUTDIR/summary.md and one log per
# step under OUTDIR/logs/, and finishes in under 8 minutes (every step has its own time limit, and
# steps that would overrun the total are skipped and say so).
#
#   bash gpu-check.sh OUTDIR
#
# Rehearsal on a machine without a GPU (scripts/gpu-rehearsal.sh does this): CUDA_EMU_LIB=DIR names
# cuda-emu's library directory (libcuda.so.1, libcublas.so.13, libcublasLt.so.13 stand-ins), which
# is put first on LD_LIBRARY_PATH, so every step runs against the emulated device (GPU_CHECK_EMULATED=1
# says the same when LD_LIBRARY_PATH already provides it). Then: the device step checks the stand-in
# driver instead of nvidia-smi, the sanitizer and PyTorch steps are skipped, bench_all runs each row
# within its emulator budget once (untimed), the roofline rows are blank ("emulated device: no
# timing"), and calibrate checks its kernels and writes no profile. No figure of the run is a GPU's.
# GPU_CHECK_SKIP_TESTS=1 skips the test executables (and the sanitizer steps over them), with a SKIP
# row: scripts/emu-check.sh runs the GPU tests against the emulator by itself.
# On a real GPU machine, with neither variable set, nothing of this applies.
#
# Steps:
#   1. device        nvidia-smi, driver and GPU (emulated: the stand-in driver)
#   2. tests/it      tileops's integration tests, with TILEOPS_REQUIRE_GPU=1 and
#                    TILEOPS_REQUIRE_NVRTC=1 (a missing GPU or NVRTC fails instead of skipping),
#                    selected by libtest filters on their module paths: test-accuracy (every op
#                    against its reference, `*_match(es)_the_reference`, printing the worst relative
#                    error per op and dtype), test-gpu (the other GPU tests, `gpu::`), test-cpu
#                    (the rest, `--skip gpu::`); a filter that selects no test is a failure. Then
#                    every other test executable of the bundle (tileops_unit, the unit tests).
#   3. memcheck      compute-sanitizer --tool memcheck on the op tests of softmax and rms_norm
#                    (`reduction::gpu::softmax::`, `normalization::gpu::rms_norm::`; skipped when
#                    compute-sanitizer is not installed)
#   4. racecheck     compute-sanitizer --tool racecheck on the same tests (shared-memory hazards)
#   5. bench_all     bin/bench_all, if the bundle has it: records.json
#                    (arguments: $BENCH_ALL_ARGS, default `--out OUTDIR/records.json`)
#      l2_flush_ab   the L2 flush A/B: a few rows under ~50 MB (relu 2048x4096, where a memset's
#                    dirty lines would cost most) and controls (relu 4096x4096, past the L2; a
#                    decode row) timed three times, flushing by memset, memset+read, memset:
#                    OUTDIR/l2-flush-ab/{1-memset,2-memset+read,3-memset}.json, and bin/roofline's
#                    comparisons read-vs-memset.md (the A/B) and memset-vs-memset.md (the drift
#                    between two runs of one method, the A/B's noise floor)
#   6. torch_baseline  torch_baseline.py on those records, when python3 has PyTorch with CUDA:
#                    baseline.json (PyTorch eager and torch.compile, same method; rows past its
#                    time budget are written as skipped)
#   7. roofline      bin/roofline on those records (with --torch baseline.json when there is
#                    one): roofline.md and roofline.svg
#   8. calibrate     bin/calibrate ($CALIBRATE_ARGS, default --quick): calibrated-profile.yaml
# Exit status: 0 when no step failed (skips are not failures), 1 otherwise.
set -uo pipefail

bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: gpu-check.sh OUTDIR}"
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
summary="$out/summary.md"
budget="${GPU_CHECK_BUDGET_S:-450}"
start=$(date +%s)
failed=0

# The emulated device (a rehearsal), when asked for.
emulated=0
emu_lib="${CUDA_EMU_LIB:-}"
if [[ -n "$emu_lib" ]]; then
  emulated=1
  emu_lib="$(cd "$emu_lib" 2>/dev/null && pwd || echo "$emu_lib")"
  export LD_LIBRARY_PATH="$emu_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [[ "${GPU_CHECK_EMULATED:-0}" == 1 ]]; then
  emulated=1
fi
skip_tests="${GPU_CHECK_SKIP_TESTS:-0}"

{
  if ((emulated)); then
    echo "# tileops GPU check: REHEARSAL on the emulated device (cuda-emu)"
    echo
    echo "Every step ran against cuda-emu's stand-in driver (${emu_lib:-from LD_LIBRARY_PATH}), on the"
    echo "CPU: this checks the plumbing, and no figure below is a GPU's (bench_all records no time)."
  else
    echo "# tileops GPU check"
  fi
  echo
  echo "bundle: $bundle"
  sed 's/^/    /' "$bundle/BUILD_INFO" 2>/dev/null
  echo "host: $(hostname) $(uname -m), started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "| step | result | seconds | log |"
  echo "| --- | --- | --- | --- |"
} >"$summary"

# step NAME LIMIT_S COMMAND...: runs COMMAND with a time limit, logs it, adds a summary row.
step() {
  local name="$1" limit="$2"
  shift 2
  local now elapsed left rc status t0
  now=$(date +%s)
  elapsed=$((now - start))
  left=$((budget - elapsed))
  if ((left < 15)); then
    echo "| $name | SKIP (time budget spent) | 0 | |" >>"$summary"
    return 0
  fi
  ((limit > left)) && limit=$left
  t0=$now
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$out/logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status="PASS${STEP_NOTE:+ ($STEP_NOTE)}" ;;
    124 | 137) status="FAIL (timed out after ${limit}s)"; failed=1 ;;
    *) status="FAIL (exit $rc)"; failed=1 ;;
  esac
  echo "| $name | $status | $(($(date +%s) - t0)) | logs/$name.log |" >>"$summary"
  echo "   $status"
}

skip() {
  echo "| $1 | SKIP ($2) | 0 | |" >>"$summary"
  echo "== $1: SKIP ($2)"
}

# The emulated device: the stand-in driver is on the library path and is cuda-emu's.
# shellcheck disable=SC2329 # run by `step` through `bash -c` (exported below).
emu_device() {
  local lib
  echo "emulated device: cuda-emu's stand-in driver, nvidia-smi not used"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for lib in libcuda.so.1 libcublas.so.13 libcublasLt.so.13; do
    local found="" dir paths
    IFS=: read -r -a paths <<<"$LD_LIBRARY_PATH"
    for dir in "${paths[@]}"; do
      [[ -n "$dir" && -e "$dir/$lib" ]] && { found="$dir/$lib"; break; }
    done
    if [[ -z "$found" ]]; then
      echo "$lib: not on LD_LIBRARY_PATH"
      return 1
    fi
    echo "$lib: $(readlink -f "$found")"
    # The emulator names its device "cuda-emu (...)": a real driver first on the path would not.
    if ! grep -aq "cuda-emu" "$found"; then
      echo "$lib: not cuda-emu's stand-in"
      return 1
    fi
  done
}

export -f emu_device

# 1. The device.
if ((emulated)); then
  STEP_NOTE="emulated: cuda-emu's stand-in driver" step device 30 bash -c emu_device
elif command -v nvidia-smi >/dev/null; then
  step device 30 nvidia-smi
else
  skip device "nvidia-smi not found"
fi

# NVRTC: the bundle's pinned 13.0 copy when it has one (gunzipped into OUTDIR), named by
# TILEOPS_CUDA_PATH, the first step of tileops's library search (so it wins over the machine's own
# toolkit, whose newer NVRTC may emit PTX the driver rejects); else whatever the machine has
# (TILEOPS_CUDA_PATH, CUDA_HOME, /usr/local/cuda, the loader's path, TILEOPS_CUDA_WHEELS).
if [[ -d "$bundle/nvrtc/nvidia/cu13" ]]; then
  nvrtc="$out/nvrtc"
  mkdir -p "$nvrtc/nvidia/cu13/lib"
  cp -r "$bundle/nvrtc/nvidia/cu13/include" "$nvrtc/nvidia/cu13/"
  for f in "$bundle/nvrtc/nvidia/cu13/lib/"*; do
    case "$f" in
      *.gz) gzip -dc "$f" >"$nvrtc/nvidia/cu13/lib/$(basename "$f" .gz)" ;;
      *) cp "$f" "$nvrtc/nvidia/cu13/lib/" ;;
    esac
  done
  export TILEOPS_CUDA_PATH="$nvrtc/nvidia/cu13"
fi
export TILEOPS_REQUIRE_GPU=1 TILEOPS_REQUIRE_NVRTC=1
# Each step below is a process of its own: they share one kernel cache (docs/cuda.md: "Compiled kernels
# across processes"), so each kernel file is compiled once for the run, not once per step.
export TILEOPS_KERNEL_CACHE="${TILEOPS_KERNEL_CACHE:-$bundle/kernel-cache}"

# tests NAME LIMIT_S EXE ARGS...: `step`, then a failure when the run's filters selected no test
# (libtest passes with "0 passed" then).
tests() {
  local name="$1" log="$out/logs/$1.log"
  rm -f "$log"
  step "$@"
  [[ -f "$log" ]] || return 0 # skipped: the time budget was spent
  if ! awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i }
      END { exit !(s > 0) }' "$log"; then
    # In place of the step's own row (its last line): libtest passed, but nothing was tested.
    sed -i '$d' "$summary"
    echo "| $name | FAIL (no test ran: the filters selected none) | 0 | logs/$name.log |" >>"$summary"
    echo "   FAIL (no test ran)"
    failed=1
  fi
}

# 2. The tests: tileops's integration tests (`it`) by filters, the op-accuracy tests first (they are
# the point), then every other test executable (tileops_unit).
it="$bundle/tests/it"
# The op-accuracy tests: every op x dtype x shape against the f64 reference (`WORST` lines).
accuracy=(_matches_the_reference _match_the_reference)
others=()
for t in "$bundle"/tests/*; do
  [[ -x "$t" && "$(basename "$t")" != it ]] && others+=("$t")
done
count_tests=$((${#others[@]} + $([[ -x "$it" ]] && echo 1 || echo 0)))
if [[ "$skip_tests" == 1 ]]; then
  skip tests "GPU_CHECK_SKIP_TESTS=1: $count_tests test executable(s) not run"
elif ((count_tests == 0)); then
  skip tests "no test executables in the bundle"
else
  if [[ -x "$it" ]]; then
    tests test-accuracy 150 "$it" --test-threads=1 --nocapture "${accuracy[@]}"
    tests test-gpu 240 "$it" --test-threads=1 --nocapture gpu:: \
      --skip _matches_the_reference --skip _match_the_reference
    tests test-cpu 150 "$it" --test-threads=1 --nocapture --skip gpu::
  else
    skip test-accuracy "no tests/it executable in the bundle"
  fi
  for t in "${others[@]}"; do
    tests "test-$(basename "$t")" 150 "$t" --test-threads=1 --nocapture
  done
fi

# 3-4. compute-sanitizer on the GPU tests.
sanitizer="$(command -v compute-sanitizer || true)"
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-13*/bin/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer; do
  [[ -z "$sanitizer" && -x "$candidate" ]] && sanitizer="$candidate"
done
if ((emulated)); then
  skip memcheck "emulated device: compute-sanitizer needs a real GPU"
  skip racecheck "emulated device: compute-sanitizer needs a real GPU"
elif [[ "$skip_tests" == 1 ]]; then
  skip memcheck "GPU_CHECK_SKIP_TESTS=1"
  skip racecheck "GPU_CHECK_SKIP_TESTS=1"
elif [[ -z "$sanitizer" ]]; then
  skip memcheck "compute-sanitizer not found"
  skip racecheck "compute-sanitizer not found"
elif [[ ! -x "$it" ]]; then
  skip memcheck "no tests/it executable in the bundle"
  skip racecheck "no tests/it executable in the bundle"
else
  # The op tests of softmax and rms_norm: accuracy over every dtype and shape, the CPU-tensor
  # refusal, forward's own allocation.
  op_tests=(reduction::gpu::softmax:: normalization::gpu::rms_norm::)
  tests memcheck 120 "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$it" --test-threads=1 "${op_tests[@]}"
  tests racecheck 120 "$sanitizer" --tool racecheck --error-exitcode 99 --print-limit 20 \
    "$it" --test-threads=1 "${op_tests[@]}"
fi

# 5-8. The benchmark, its baselines, its roofline report and a calibration, when the bundle has
# them. The records name the revision the bundle was built from (there is no checkout here).
TILEOPS_GIT_REVISION="$(sed -n 's/^git: \([^ ]*\).*/\1/p' "$bundle/BUILD_INFO" 2>/dev/null)"
export TILEOPS_GIT_REVISION
if [[ -x "$bundle/bin/bench_all" ]]; then
  # On the emulated device each row within the emulator budget runs once, on the CPU: slower
  # than timing them all on a GPU.
  # shellcheck disable=SC2086 # BENCH_ALL_ARGS is a list of words by design.
  step bench_all $((emulated ? 300 : 180)) "$bundle/bin/bench_all" ${BENCH_ALL_ARGS:---out "$out/records.json"}
else
  skip bench_all "no bin/bench_all in the bundle"
fi

# The rows of the L2 flush A/B (bench_all's --filter over op/workload/dtype).
ab_filter='^(relu/(hidden-state-prefill|flat-16m|hidden-state-decode)/|rms_norm/llama-8b-prefill/bfloat16$|softmax/attn-weights-4k/bfloat16$)'

# l2_flush_ab BUNDLE DIR EMULATED PROFILE FILTER: the A/B of the L2 flush methods, run by `step`.
# shellcheck disable=SC2329 # run by `step` through `bash -c` (exported below).
l2_flush_ab() {
  local bundle="$1" dir="$2" emulated="$3" profile="$4" filter="$5" i=0 method rc extra=()
  mkdir -p "$dir"
  # The emulated device runs each row once, untimed: the small rows suffice to check the plumbing.
  ((emulated)) && extra=(--emu-max-bytes 1048576)
  for method in memset memset+read memset; do
    i=$((i + 1))
    echo "== run $i: --l2-flush $method"
    "$bundle/bin/bench_all" --filter "$filter" --l2-flush "$method" "${extra[@]}" \
      --out "$dir/$i-$method.json" || return 1
  done
  # roofline's exit status is a sum of bits: 1 (a `fail` row) is a finding here, 2 an error.
  "$bundle/bin/roofline" "$dir/2-memset+read.json" --compare "$dir/1-memset.json" \
    --profile "$profile" --format md >"$dir/read-vs-memset.md"
  rc=$?
  ((rc & 2)) && { echo "roofline --compare (A/B): exit $rc"; return 1; }
  "$bundle/bin/roofline" "$dir/3-memset.json" --compare "$dir/1-memset.json" \
    --profile "$profile" --format md >"$dir/memset-vs-memset.md"
  rc=$?
  ((rc & 2)) && { echo "roofline --compare (drift): exit $rc"; return 1; }
  return 0
}

export -f l2_flush_ab

if [[ -x "$bundle/bin/bench_all" && -x "$bundle/bin/roofline" ]]; then
  step l2_flush_ab $((emulated ? 150 : 120)) bash -c 'l2_flush_ab "$@"' _ "$bundle" \
    "$out/l2-flush-ab" "$emulated" "${ROOFLINE_PROFILE:-h200}" "$ab_filter"
else
  skip l2_flush_ab "no bin/bench_all or bin/roofline in the bundle"
fi
if ((emulated)); then
  skip torch_baseline "emulated device: the PyTorch baseline times a real GPU only"
elif [[ ! -f "$out/records.json" ]]; then
  skip torch_baseline "no records.json"
elif [[ ! -f "$bundle/torch_baseline.py" ]]; then
  skip torch_baseline "no torch_baseline.py in the bundle"
elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  skip torch_baseline "python3 has no PyTorch with CUDA"
else
  # The script stops timing 20 s before the step's limit, so it always writes its file.
  step torch_baseline 150 python3 "$bundle/torch_baseline.py" "$out/records.json" \
    --out "$out/baseline.json" --budget-s 130
fi
baseline_args=()
[[ -f "$out/baseline.json" ]] && baseline_args=(--torch "$out/baseline.json")
if [[ -x "$bundle/bin/roofline" && -f "$out/records.json" ]]; then
  step roofline 60 bash -c '"$1" "$2" --profile "$3" --format md --svg "$4" "${@:6}" >"$5"' _ \
    "$bundle/bin/roofline" "$out/records.json" "${ROOFLINE_PROFILE:-h200}" "$out/roofline.svg" \
    "$out/roofline.md" "${baseline_args[@]}"
elif [[ -x "$bundle/bin/roofline" ]]; then
  skip roofline "no records.json"
else
  skip roofline "no bin/roofline in the bundle"
fi
if [[ -x "$bundle/bin/calibrate" ]]; then
  # shellcheck disable=SC2086 # CALIBRATE_ARGS is a list of words by design.
  step calibrate 120 "$bundle/bin/calibrate" ${CALIBRATE_ARGS:---quick} \
    --out "$out/calibrated-profile.yaml"
else
  skip calibrate "no bin/calibrate in the bundle"
fi

# The numbers worth reading at a glance.
{
  echo
  echo "total: $(($(date +%s) - start)) s, $([[ $failed == 0 ]] && echo PASS || echo FAIL)"
  if [[ -f "$out/logs/test-accuracy.log" ]]; then
    echo
    echo "## worst relative error per op and dtype (test-accuracy)"
    echo
    grep -h '^WORST' "$out/logs/test-accuracy.log" | sed 's/^/    /'
    grep -h '^SKIP' "$out/logs/test-accuracy.log" | sed 's/^/    /'
  fi
  for log in "$out"/logs/*.log; do
    name="$(basename "$log" .log)"
    if grep -q "^| $name | FAIL" "$summary"; then
      echo
      echo "## $name failed: first errors"
      echo
      first="$({ grep -E -A1 "panicked at" "$log" | grep -v '^--$' | head -n 12
        grep -m 6 -E "ERROR SUMMARY|^========= (Invalid|Race|Error)" "$log"; })"
      # A tool that exits with a message rather than a panic: its error lines, else its last ones.
      [[ -n "$first" ]] || first="$(grep -m 8 -iE "error|fail|unexpected|cannot|not found" "$log")"
      [[ -n "$first" ]] || first="$(tail -n 8 "$log")"
      printf '%s\n' "$first" | sed 's/^/    /'
    fi
  done
  for name in memcheck racecheck; do
    [[ -f "$out/logs/$name.log" ]] && { echo; echo "## $name"; echo; tail -n 3 "$out/logs/$name.log" | sed 's/^/    /'; }
  done
  if [[ -f "$out/calibrated-profile.yaml" ]]; then
    echo
    echo "## calibration (bin/calibrate ${CALIBRATE_ARGS:---quick})"
    echo
    sed 's/^/    /' "$out/calibrated-profile.yaml"
  elif ((emulated)) && [[ -f "$out/logs/calibrate.log" ]]; then
    echo
    echo "## calibration (emulated device: its kernels checked, no profile)"
    echo
    sed 's/^/    /' "$out/logs/calibrate.log"
  fi
  if [[ -f "$out/l2-flush-ab/read-vs-memset.md" ]]; then
    echo
    echo "## L2 flush A/B: memset+read against memset (run 2 against run 1)"
    echo
    echo "Rows slower with memset+read were read low by the memset-only flush; run 3 against run 1"
    echo "(memset both times, l2-flush-ab/memset-vs-memset.md) is the drift between runs."
    ((emulated)) && echo "(Emulated device: no row is timed; this checks the plumbing only.)"
    echo
    cat "$out/l2-flush-ab/read-vs-memset.md"
    if [[ -f "$out/l2-flush-ab/memset-vs-memset.md" ]]; then
      echo
      echo "## L2 flush A/B: drift (memset, run 3 against run 1)"
      echo
      cat "$out/l2-flush-ab/memset-vs-memset.md"
    fi
  fi
  if [[ -f "$out/roofline.md" ]]; then
    echo
    echo "## roofline (profile ${ROOFLINE_PROFILE:-h200})"
    echo
    cat "$out/roofline.md"
  fi
} >>"$summary"

echo
cat "$summary"
exit $failed
