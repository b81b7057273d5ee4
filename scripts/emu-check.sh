#!/usr/bin/env bash
# Every GPU test on the emulated CUDA device (cuda-emu/): tileops's kernels run on the CPU behind a
# stand-in libcuda.so.1, so a kernel that indexes, synchronises or converts wrongly fails here, on
# a machine without a GPU.
#
#   bash scripts/emu-check.sh
#
# 1. builds the emulator twice: the normal build, and an AddressSanitizer build;
# 2. runs the emulator's own tests (schedules, shuffles, planted kernel bugs; the ASan self-test);
# 3. runs the tileops GPU tests (the tests under a `gpu` module of the `it` test binary:
#    `normalization::gpu::...`, `coverage::gpu::...`) with TILEOPS_REQUIRE_GPU=1 (nothing skips),
#    the coverage tests (`coverage::gpu::`, one case per entry point) in a process of their own,
#    as their check of the entry points launched reads that process's list:
#      pass A  the coverage tests (every entry point); schedule round-robin, every launch
#              compared with warp-greedy
#      pass B  the family tests (shape sweeps); schedule random (seeded, preempting at loads),
#              every launch compared with reverse, on a device of 16 SMs (CUDA_EMU_SM_COUNT):
#              the plans sized from the SM count (grids, decode's KV splits) take their small-GPU
#              forms, and the shapes sized to exceed one wave stay small
#      pass C  the coverage tests (every entry point) in the ASan build, round-robin, with the
#              traffic ledger: its launch log in target/emu/ledger-C.jsonl, and the gates of
#              tileops/tests/it/coverage/ledger.rs on every op call (unique bytes against
#              eval_roofline's, sectors per request, shared-memory bank conflicts)
#    "compared": each launch runs under both schedules from the same device memory and fails on
#    any differing byte (a race);
# 4. runs the root package's emulated-device tests of bench_all (`--test it
#    bench_all::bench_all_on_the_emulated_device`: bench_all, roofline, calibrate's kernel check;
#    every manifest row launched dry for its kernel ledger, the ceiling gate against
#    tileops-bench/ledger/ceilings.txt, tileops/docs/kernels.md compared with its regeneration);
#    rehearses the GPU check (scripts/gpu-rehearsal.sh: gpu-prepare.sh + gpu-check.sh against the
#    emulated device), when that script exists, its bench_all over the rows of a few ops (the
#    bench_all test above ran every row);
# 5. prints the entry points launched across all of it.
#
# Ends with `emulated: P passed, F failed; entry points launched: L of T` and exits non-zero on any
# failure, on a test run whose filter selected no test, or on an entry point that never launched.
# Times of each phase go to stdout.
# Environment: EMU_CHECK_SEED (random schedule's seed, default 1), EMU_CHECK_PASSES (default
# "A B C"), EMU_CHECK_REHEARSAL=0 to leave out the rehearsal, EMU_CHECK_REHEARSAL_FILTER (the
# rehearsal's bench_all filter, GPU_REHEARSAL_BENCH_FILTER; empty runs every row, as the GPU
# machine does), EMU_CHECK_PHASE=build-asan to build the AddressSanitizer emulator only (its own
# target directory), EMU_CHECK_PHASE=build to build everything
# the steps run (the emulator and its ASan twin, the GPU test binaries, the emulated builds of the
# bench test and of the rehearsal's bundle) and stop: scripts/test.sh builds them with the CPU
# tests (the same profile), then runs this script, whose builds are then no-ops.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

bash scripts/install-cuda-wheels.sh || exit 1
# Named explicitly: tileops never looks for NVRTC in the working directory or its ancestors.
export TILEOPS_CUDA_WHEELS="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}"
export TILEOPS_REQUIRE_NVRTC=1
# Every test process loads the kernels the first one compiled (docs/cuda.md: "Compiled kernels across
# processes").
export TILEOPS_KERNEL_CACHE="${TILEOPS_KERNEL_CACHE:-$root/target/kernel-cache}"
seed="${EMU_CHECK_SEED:-1}"
passes="${EMU_CHECK_PASSES:-A B C}"
work="$root/target/emu"
coverage="$work/coverage"
phase="${EMU_CHECK_PHASE:-all}"
case "$phase" in
  all | build | build-asan) ;;
  *) echo "emu-check: EMU_CHECK_PHASE must be all, build or build-asan (got $phase)"; exit 2 ;;
esac
# The ASan build's log has a folder of its own: scripts/test.sh makes that build (build-asan)
# beside another phase of this script, which starts by emptying logs/.
asan_logs="$work/logs-asan"
if [[ "$phase" != build-asan ]]; then
  rm -rf "$coverage" "$work/logs" "$work"/ledger-*.jsonl
fi
mkdir -p "$coverage" "$work/logs" "$asan_logs" "$work/lib" "$work/lib-asan"

passed=0
failed=0
failures=()
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Adds the counts of libtest's "test result:" lines in log $1 to the totals.
count() {
  local p f
  p=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i } END { print s + 0 }' "$1")
  f=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^failed/) s += $i } END { print s + 0 }' "$1")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
}

# run NAME LOG COMMAND...: runs COMMAND, logs it, counts its tests; a non-zero exit with no
# failed test counted still counts as one failure (a crash, a build error).
run() {
  local name="$1" log="$2"
  shift 2
  local t0 rc before="$failed"
  t0=$(now)
  "$@" >"$log" 2>&1
  rc=$?
  count "$log"
  if ((rc != 0)); then
    ((failed == before)) && failed=$((failed + 1))
    failures+=("$name (log: ${log#"$root"/})")
    grep -E '^(test .* FAILED|cuda-emu: |thread .* panicked)|ERROR: AddressSanitizer' "$log" | head -20 | sed 's/^/    /'
  fi
  echo "  $name: exit $rc, $(since "$t0") s"
}

# run_tests NAME LOG COMMAND...: `run` for a libtest run, which is also a failure when it ran no
# test (a filter that selects nothing passes with "0 passed").
run_tests() {
  local before_passed="$passed" before_failed="$failed"
  run "$@"
  if ((passed == before_passed && failed == before_failed)); then
    failed=$((failed + 1))
    failures+=("$1: no test ran (log: ${2#"$root"/})")
    echo "    $1: no test ran"
  fi
}

# Every cargo command that builds tileops selects the workspace without the emulator, as
# scripts/test.sh and gpu-prepare.sh do: cargo resolves the dependencies' features per selection,
# and `-p tileops` against `-p tileops-suite` built tileops (and all above it) once each.
workspace=(--workspace --exclude cuda-emu)

link_driver() { # DIR SO: the stand-in driver under the names cudarc and tileops load
  local n
  for n in libcuda.so libcuda.so.1 libcublas.so.13 libcublasLt.so.13; do ln -sf "$2" "$1/$n"; done
}

# The AddressSanitizer build of the emulator and of its planted-bug test (a target directory of
# its own). EMU_CHECK_PHASE=build-asan makes only these and stops.
build_asan() {
  local t0
  t0=$(now)
  # Not stripped: ASan's reports name the kernel's source line from the debug info.
  CARGO_PROFILE_RELEASE_STRIP=none cargo build -p cuda-emu --release --lib --features asan \
    --target-dir "$root/target/emu-asan" --locked >"$asan_logs/build-asan.log" 2>&1 &&
    CARGO_PROFILE_RELEASE_STRIP=none cargo test -p cuda-emu --release --features asan \
      --target-dir "$root/target/emu-asan" --locked --test planted --no-run >>"$asan_logs/build-asan.log" 2>&1 ||
    { tail -40 "$asan_logs/build-asan.log"; exit 1; }
  echo "  ASan build (the emulator and its planted-bug test): $(since "$t0") s"
  link_driver "$work/lib-asan" "$root/target/emu-asan/release/libcuda_emu.so"
}

# Every build the steps below run, first: the emulator (normal and ASan), the emulator's own test
# binaries, the GPU test binaries, and the emulated builds of the bench test and the rehearsal's
# bundle (their cargo commands below are then no-ops). EMU_CHECK_PHASE=build stops after it.
build_all() {
  echo "== build the emulator"
  t0=$(now)
  cargo build -p cuda-emu --profile emulated --lib --bin cuda-emu-coverage --locked >"$work/logs/build.log" 2>&1 ||
    { tail -40 "$work/logs/build.log"; exit 1; }
  echo "  normal build: $(since "$t0") s"
  link_driver "$work/lib" "$root/target/emulated/libcuda_emu.so"
  build_asan

  echo "== build the emulator's own test binaries"
  t0=$(now)
  cargo test -p cuda-emu --profile emulated --locked --no-run >"$work/logs/build-self-tests.log" 2>&1 ||
    { tail -40 "$work/logs/build-self-tests.log"; exit 1; }
  echo "  $(since "$t0") s"
  echo "== build the GPU tests"
  t0=$(now)
  # Optimised (profile `emulated`): the f64 references are slow in a debug build. The GPU tests are
  # those of tileops's `it` test binary under a `gpu` module, and tileops-bench's (the calibration
  # kernels' check); one cargo invocation builds both.
  cargo test "${workspace[@]}" --profile emulated --test it --no-run --locked --message-format=json 2>"$work/logs/build-tests.log" |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "it":
        # A package id is `path+file:///dir#[name@]version`: the name, else the last part of the directory.
        source, _, fragment = m["package_id"].partition("#")
        name = fragment.split("@")[0] if "@" in fragment else source.rstrip("/").rsplit("/", 1)[-1]
        print(name, m["executable"])' >"$work/gpu-tests.txt"
  it_exe="$(awk '$1 == "tileops" { print $2 }' "$work/gpu-tests.txt")"
  bench_it_exe="$(awk '$1 == "tileops-bench" { print $2 }' "$work/gpu-tests.txt")"
  if [[ -z "$it_exe" || ! -x "$it_exe" || -z "$bench_it_exe" || ! -x "$bench_it_exe" ]]; then
    tail -40 "$work/logs/build-tests.log"
    cat "$work/gpu-tests.txt"
    echo "emu-check: tileops's or tileops-bench's it test binary was not built"
    exit 1
  fi
  echo "  $(basename "$it_exe"), $("$it_exe" --list gpu:: 2>/dev/null | grep -c ': test$') GPU tests; tileops-bench's $(basename "$bench_it_exe"), $("$bench_it_exe" --list gpu:: 2>/dev/null | grep -c ': test$'): $(since "$t0") s"

  echo "== build the emulated bench test and the rehearsal's bundle"
  t0=$(now)
  # The rehearsal bundles what scripts/gpu-prepare.sh builds: tileops's test executables and the
  # workspace's examples, with these two commands.
  cargo test "${workspace[@]}" --profile emulated --locked --lib --test it --no-run >"$work/logs/build-bench.log" 2>&1 &&
    cargo build "${workspace[@]}" --profile emulated --locked --examples >>"$work/logs/build-bench.log" 2>&1 ||
    { tail -40 "$work/logs/build-bench.log"; exit 1; }
  echo "  $(since "$t0") s"
}

if [[ "$phase" == build-asan ]]; then
  echo "== build the emulator with AddressSanitizer"
  build_asan
  echo "emu-check: built (EMU_CHECK_PHASE=build-asan)"
  exit 0
fi
build_all
libasan="$(gcc -print-file-name=libasan.so)"
if [[ "$phase" == build ]]; then
  echo "emu-check: built (EMU_CHECK_PHASE=build)"
  exit 0
fi

echo "== the emulator's own tests"
run "cuda-emu tests" "$work/logs/self-tests.log" cargo test -p cuda-emu --profile emulated --locked
# libasan is preloaded into the test binary only (through cargo's runner), not into rustc.
run "cuda-emu ASan self-test" "$work/logs/self-tests-asan.log" \
  env CARGO_PROFILE_RELEASE_STRIP=none ASAN_OPTIONS=detect_leaks=0 \
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$libasan" \
  cargo test -p cuda-emu --release --features asan --target-dir "$root/target/emu-asan" --locked \
  --test planted asan_

# The runs of one pass, as `label|executable|filter arguments`: the coverage tests by themselves
# (each checks the entry points its process launched), every other GPU test of tileops, and
# tileops-bench's (the calibration kernels, which check their own launches too).
gpu_runs=(
  "coverage|$it_exe|coverage::gpu::"
  "gpu|$it_exe|gpu:: --skip coverage::gpu::"
  "bench|$bench_it_exe|gpu::"
)

gpu_pass() { # NAME LIBDIR SCHEDULE COMPARE SMS RUNS [PRELOAD]: RUNS, the labels of gpu_runs to
  # run; SMS, the emulated device's SM count ("": the emulator's own, an H200's 132)
  local name="$1" lib="$2" schedule="$3" compare="$4" sms="$5" runs="$6" preload="${7:-}"
  # The ASan build also counts the traffic ledger, for the coverage tests only (counting costs
  # time, and it only counts with CUDA_EMU_LEDGER set): their gates
  # (tileops/tests/it/coverage/ledger.rs) must find traffic in its launch log.
  local ledger=()
  local t0 r label filters
  echo "== pass $name: schedule $schedule${compare:+, compared with $compare}${sms:+, $sms SMs}${preload:+, AddressSanitizer} ($runs)"
  t0=$(now)
  local exe rest
  for r in "${gpu_runs[@]}"; do
    label="${r%%|*}"
    [[ " $runs " == *" $label "* ]] || continue
    rest="${r#*|}"
    exe="${rest%%|*}"
    read -r -a filters <<<"${rest#*|}"
    ledger=()
    [[ -n "$preload" && "$label" == coverage ]] &&
      ledger=(CUDA_EMU_LEDGER="$work/ledger-$name.jsonl" TILEOPS_REQUIRE_LEDGER=1)
    run_tests "$label: ${filters[*]} [$name]" "$work/logs/pass-$name-it-$label.log" \
      env LD_LIBRARY_PATH="$lib" TILEOPS_REQUIRE_GPU=1 CUDA_EMU_SCHEDULE="$schedule" \
      CUDA_EMU_COMPARE="$compare" CUDA_EMU_COVERAGE_DIR="$coverage" "${ledger[@]}" \
      ${sms:+CUDA_EMU_SM_COUNT="$sms"} \
      ${preload:+LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0:halt_on_error=1} \
      "$exe" "${filters[@]}" --test-threads=2
  done
  echo "  pass $name: $(since "$t0") s"
}

# Every GPU test runs once under a pair of schedules compared byte for byte: the coverage tests
# (every entry point) in pass A, round-robin against warp-greedy; the family tests (the shape
# sweeps, most of the launches) in pass B, under a random schedule and its reverse, the pair that
# reorders the most. Pass C runs every entry point once more (the coverage tests) in the
# AddressSanitizer build, which checks the emulator and the host side and counts the traffic
# ledger (the emulator checks every kernel access against its allocation in each pass). The sweeps
# run under one pair only: a second pair cost four and a half minutes of CI.
#
# The passes, and the rehearsal, run at the same time, each in processes of its own: the emulator
# runs one launch at a time in a process, on one core, so one pass after another left the other
# core idle. Each writes its output, counts and failures to files of its own (target/emu/logs/
# job-*), shown and added up in order when all have ended.
job() { # NAME COMMAND...: COMMAND in the background, its report kept for report_jobs
  local name="$1"
  shift
  (
    passed=0 failed=0 failures=()
    "$@"
    echo "$passed $failed" >"$work/logs/job-$name.counts"
    ((${#failures[@]} == 0)) || printf '%s\n' "${failures[@]}" >"$work/logs/job-$name.failures"
  ) >"$work/logs/job-$name.out" 2>&1 &
  job_pids+=("$!")
  job_names+=("$name")
}
report_jobs() { # waits for every job, then shows each one's output and adds up its results
  local i name p f line
  for i in "${!job_pids[@]}"; do
    name="${job_names[i]}"
    wait "${job_pids[i]}"
    cat "$work/logs/job-$name.out"
    if [[ -s "$work/logs/job-$name.counts" ]]; then
      read -r p f <"$work/logs/job-$name.counts"
      passed=$((passed + p))
      failed=$((failed + f))
    else
      failed=$((failed + 1))
      failures+=("$name: ended without its counts (log: ${work#"$root"/}/logs/job-$name.out)")
    fi
    if [[ -s "$work/logs/job-$name.failures" ]]; then
      while IFS= read -r line; do failures+=("$line"); done <"$work/logs/job-$name.failures"
    fi
  done
  job_pids=()
  job_names=()
}
job_pids=()
job_names=()
for pass in $passes; do
  case "$pass" in
    A) job "pass-A" gpu_pass A "$work/lib" round-robin warp-greedy "" "coverage bench" ;;
    B) job "pass-B" gpu_pass B "$work/lib" "random:$seed" reverse 16 "gpu bench" ;;
    C) job "pass-C" gpu_pass C "$work/lib-asan" round-robin "" "" "coverage bench" "$libasan" ;;
    *) echo "emu-check: unknown pass $pass"; exit 2 ;;
  esac
done

if [[ "${EMU_CHECK_REHEARSAL:-1}" != 0 && -f scripts/gpu-rehearsal.sh ]]; then
  rehearse() {
    echo "== the GPU check, rehearsed on the emulated device"
    # The plumbing of each kind of op: an elementwise kernel, a reduction, cuBLAS, attention.
    run "gpu-rehearsal" "$work/logs/rehearsal.log" \
      env CUDA_EMU_LIB="$work/lib" CUDA_EMU_COVERAGE_DIR="$coverage" \
      GPU_REHEARSAL_BENCH_FILTER="${EMU_CHECK_REHEARSAL_FILTER-^(relu|rms_norm|gemm|gqa_decode)/}" \
      bash scripts/gpu-rehearsal.sh "$work/rehearsal"
  }
  job "rehearsal" rehearse
fi
report_jobs

echo "== bench_all, the roofline report, calibrate and the kernel ledger on the emulated device (tests/it/bench_all.rs)"
# The kernel ledger document (tileops/docs/kernels.md) is compared with its regeneration when the
# traffic pass's launch log is there (pass C ran); TILEOPS_LEDGER_UPDATE=1 rewrites it instead.
traffic_log=()
[[ -s "$work/ledger-C.jsonl" ]] && traffic_log=(TILEOPS_TRAFFIC_LOG="$work/ledger-C.jsonl")
run_tests "bench_all emulated" "$work/logs/bench-all.log" \
  env TILEOPS_EMU_LIB="$work/lib" CUDA_EMU_COVERAGE_DIR="$coverage" "${traffic_log[@]}" \
  cargo test "${workspace[@]}" --profile emulated --locked --test it \
  bench_all::bench_all_on_the_emulated_device

echo "== coverage"
coverage_line=$("$root/target/emulated/cuda-emu-coverage" "$coverage")
coverage_rc=$?
echo "$coverage_line" | grep -v '^entry points launched' | sed 's/^/  /'
summary=$(echo "$coverage_line" | grep '^entry points launched')
((coverage_rc != 0)) && failures+=("coverage: an entry point never launched")

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "emulated: $passed passed, $failed failed; $summary"
((failed == 0 && coverage_rc == 0))
