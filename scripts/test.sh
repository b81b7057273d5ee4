#!/usr/bin/env bash
# Every test, on a fresh machine: installs what the tests need, then runs them.
#
# - the pinned NVRTC/ptxas wheels into .cuda-wheels/ (exported as TILEOPS_CUDA_WHEELS), so the
#   kernel compile check really compiles every kernel for sm_90 and sm_80 even without a GPU;
# - formatting and lints (cargo fmt, cargo clippy -D warnings, on the workspace and on downstream/);
# - the whole workspace's tests, built once in the profile `emulated` (optimised, with a debug
#   build's checks): unit, integration (downstream crate, trybuild UI, TileOPs compatibility), doc
#   tests; all but the GPU tests, which then run:
# - every GPU test on the emulated CUDA device (scripts/emu-check.sh: two schedule pairs and
#   an AddressSanitizer build, TILEOPS_REQUIRE_GPU=1, every entry point launched), so in CI no
#   GPU test skips;
# - tileops beside candle (scripts/candle-check.sh): the candle bridge built with candle-core's
#   `cuda` and tileops's `dynamic-linking`, its tests and the decoder-layer example on the CPU and
#   the emulated device.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time, printed as a table when the script ends (whether it passes or not): where
# CI's time goes.
step_names=()
step_starts=()
script_start=$(date +%s)
# The machine's CPU time (/proc/stat's first line, in clock ticks: busy and idle) when the script
# started: the report says how busy the cores were, so that a lane's time can be told from a
# shortage of cores.
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }
read -r cpu_busy_start cpu_idle_start < <(cpu_ticks)
step() {
    echo "== $*"
    step_names+=("$1")
    step_starts+=("$(date +%s)")
}
step_report() {
    local i n=${#step_names[@]} end now
    now=$(date +%s)
    echo
    echo "| step | seconds |"
    echo "| --- | ---: |"
    for ((i = 0; i < n; i++)); do
        end=$now
        ((i + 1 < n)) && end=${step_starts[i + 1]}
        echo "| ${step_names[i]} | $((end - step_starts[i])) |"
    done
    [[ -s "${lane_b_times:-}" ]] && cat "$lane_b_times"
    echo "| total | $((now - script_start)) |"
    local busy idle tick
    read -r busy idle < <(cpu_ticks)
    busy=$((busy - cpu_busy_start))
    idle=$((idle - cpu_idle_start))
    tick=$(getconf CLK_TCK)
    if ((busy + idle > 0)); then
        echo "| CPU time, all cores (busy share) | $((busy / tick)) ($((100 * busy / (busy + idle)))%) |"
    fi
}
on_exit() {
    local pid
    for pid in "${lane_b_pid:-}" "${lane_c_pid:-}" "${lane_d_pid:-}"; do
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            kill -- "-$pid" 2>/dev/null || true
        fi
    done
    step_report
}
trap on_exit EXIT

step "setup" "(the pinned CUDA wheels, chromium)"

if [ -x scripts/install-cuda-wheels.sh ] || [ -f scripts/install-cuda-wheels.sh ]; then
    bash scripts/install-cuda-wheels.sh
fi
# tileops never searches the working directory or its ancestors for NVRTC (a library planted there
# would run its constructor): the wheels are named explicitly, for every test and every process
# they start.
export TILEOPS_CUDA_WHEELS="${TILEOPS_CUDA_WHEELS:-$PWD/.cuda-wheels}"
# One kernel cache for every process below (docs/cuda.md: "Compiled kernels across processes"): each
# kernel file is compiled once per target, not once per test process (the kernel compile check,
# the SASS ledger, every emulated test process and the candle check each compiled every file).
export TILEOPS_KERNEL_CACHE="${TILEOPS_KERNEL_CACHE:-$PWD/target/kernel-cache}"
# The same for the emulator's C++ (cuda-emu/build.rs: every kernel compiled as host code, a minute
# of both cores): the debug build that clippy checks, the emulated build the tests run and the
# candle check's build of it (which starts beside clippy) compile the same libraries, once.
export CUDA_EMU_OBJECT_CACHE="${CUDA_EMU_OBJECT_CACHE:-$PWD/target/cuda-emu-cache}"

# Headless Chromium for the HTML report test (tests/it/html_report.rs), which fails in CI without it;
# DejaVu for the chart's 10ⁿ superscripts.
if ! command -v chromium >/dev/null 2>&1; then
    echo "== installing chromium (the HTML report test renders the page in it)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
fi

# A fresh build that runs once: no incremental caches to write, and debug info as line tables
# only (backtraces keep their file and line), which makes the debug builds and their links
# shorter. What is compiled and checked is the same.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"

# The package check's verify build (lane B) and the downstream test (tests/it/downstream.rs, which
# reads this variable) build the same registry dependencies in the same profile: one target
# directory serves both, so they are compiled once. Outside the repository (the package check must
# have no manifest/ above its unpacked crates), and emptied here, once per run (a registry crate's
# build is never rebuilt for changed sources, see package_check).
export TILEOPS_DOWNSTREAM_TARGET_DIR="${TILEOPS_DOWNSTREAM_TARGET_DIR:-${TMPDIR:-/tmp}/tileops-package-target}"
rm -rf "$TILEOPS_DOWNSTREAM_TARGET_DIR"

# CI must compile every kernel: a missing toolkit is a failure there, not a SKIP.
export TILEOPS_REQUIRE_NVRTC="${TILEOPS_REQUIRE_NVRTC:-1}"

step "fmt" "cargo fmt --check"
cargo fmt --all -- --check

# Lane B: the checks whose builds have target directories of their own (the emulator's ASan
# build, MSRV's toolchain, the package check's fresh directory), in the background beside the
# steps below, so that the two cores stay busy while one lane is in a serial stretch (a big
# crate's codegen, a test binary's run, a link). Its output goes to target/ci-logs/lane-b.log,
# shown when it fails; its steps' times join the table.
mkdir -p target/ci-logs
lane_b_log="$PWD/target/ci-logs/lane-b.log"
lane_b_times="$PWD/target/ci-logs/lane-b-times"
: >"$lane_b_times"
lane_b_step() { # NAME COMMAND...: runs and times one step of lane B
    local name="$1" t0 rc
    shift
    t0=$(date +%s)
    echo "== lane B: $name"
    "$@"
    rc=$?
    echo "| lane B: $name | $(($(date +%s) - t0)) |" >>"$lane_b_times"
    return $rc
}
msrv_check() { # MSRV: cargo check of what a user builds (libraries, binaries) on the declared rust-version
    # From one read of the workspace's metadata: its one rust-version ([workspace.package] in
    # Cargo.toml), on the first line, then the packages a user can depend on or install, those that
    # may be published. The emulator and the root test suite (publish = false) are this
    # repository's own test tools, built with the current toolchain (the emulator's build script
    # alone is a minute of C++ per build).
    local plan
    plan=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
versions = {p["rust_version"] for p in packages if p["rust_version"]}
if len(versions) != 1:
    sys.exit(f"expected one rust-version in the workspace, found {sorted(versions)}")
print(versions.pop())
for p in packages:
    if p["publish"] != []:
        print("--package=" + p["name"])')
    local lines msrv published
    mapfile -t lines <<<"$plan"
    msrv="${lines[0]}"
    published=("${lines[@]:1}")
    rustup toolchain install "$msrv" --profile minimal
    # Their libraries and binaries: what a crate depending on tileops, or installing its tools,
    # compiles with that toolchain. The tests, examples and benches (and their dev-dependencies)
    # are this repository's own, built with the current toolchain by the steps of lane A.
    cargo "+$msrv" check "${published[@]}" --lib --bins --locked --target-dir target/msrv
}
package_check() { # cargo package: tileops, the crates it depends on and tileops-bench, verified against each other
    # #[roofline_op] reads the nearest manifest/ above the crate, and the repository root has one (a
    # link to tileops/manifest): the package must carry every manifest file itself.
    missing=$(comm -23 <(git ls-files tileops/manifest | sed 's|^tileops/||' | sort) \
        <(cargo package -p tileops --list --locked --allow-dirty | sort))
    if [ -n "$missing" ]; then
        echo "the tileops package lacks manifest files: $missing" >&2
        exit 1
    fi
    # Packaged without cargo's own verify build, which compiles each package alone, each with the
    # features its own dependency graph resolves to (the shared dependencies compiled again per
    # package: syn four times, 230 s of CPU): the four packages are unpacked side by side into one
    # workspace, each depending on the others' packaged copies ([patch]), and built together once,
    # from the workspace's lock file, as `cargo build` builds a package (its library and binaries,
    # default features). In the target directory it shares with the downstream test: outside the
    # repository (#[roofline_op] must find no manifest/ above the unpacked crates), and emptied
    # when this script started. --allow-dirty: this checks what would be packaged, it publishes
    # nothing.
    local package_target="$TILEOPS_DOWNSTREAM_TARGET_DIR"
    local verify="$package_target/package/verify"
    local crate dir members=() patches=()
    cargo package -p tileops-manifest -p tileops-macros -p tileops -p tileops-bench --locked --allow-dirty \
        --no-verify --target-dir "$package_target"
    rm -rf "$verify"
    mkdir -p "$verify"
    for crate in "$package_target"/package/tileops*-[0-9]*.crate; do
        tar -xzf "$crate" -C "$verify"
        dir="$(basename "$crate" .crate)"
        members+=("\"$dir\"")
        patches+=("${dir%-*} = { path = \"$dir\" }")
    done
    if ((${#members[@]} != 4)); then
        echo "package: expected the four packaged crates, found: ${members[*]}" >&2
        return 1
    fi
    {
        echo '[workspace]'
        echo "members = [$(IFS=,; echo "${members[*]}")]"
        echo 'resolver = "3"'
        echo
        echo '[patch.crates-io]'
        printf '%s\n' "${patches[@]}"
    } >"$verify/Cargo.toml"
    cp Cargo.lock "$verify/Cargo.lock"
    # --offline: every dependency is in the lock file, and fetched by the steps before this one.
    (cd "$verify" && cargo build --workspace --offline --target-dir "$package_target")
}
lane_b() {
    set -e
    lane_b_step "ASan emulator" env EMU_CHECK_PHASE=build-asan bash scripts/emu-check.sh
    lane_b_step "msrv" msrv_check
    lane_b_step "package" package_check
}
step "lane B start" "the ASan emulator, msrv, package in the background (target/ci-logs/lane-b.log)"
# Its own process group (job control on for the one command), so that a failure of this lane
# stops all of lane B, its cargo and rustc processes included.
set -m
(lane_b) >"$lane_b_log" 2>&1 &
lane_b_pid=$!
set +m

# Lane C: tileops beside candle (scripts/candle-check.sh: candle-core with `cuda` and tileops with
# `dynamic-linking`, built with the wheels' nvcc and linked against the emulator, which it builds
# first if no step has; the bridge's tests and the decoder layer on the CPU and the emulated
# device), in the background from the start: nvcc's compile of candle's kernels alone is minutes
# of work that needs nothing from the steps below. Its own target directory (target/candle).
candle_log="$PWD/target/ci-logs/candle.log"
candle_start=$(date +%s)
set -m
(
    rc=0
    bash scripts/candle-check.sh || rc=$?
    echo "| lane C: candle-check | $(($(date +%s) - candle_start)) |" >>"$lane_b_times"
    exit "$rc"
) >"$candle_log" 2>&1 &
lane_c_pid=$!
set +m

step "clippy" "cargo clippy on the workspace"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "clippy downstream" "cargo clippy on downstream/ (a user's crate, its lints denied: the code #[roofline_op] writes into it must pass them)"
# Its own workspace, resolved from the workspace's lock file (as tests/it/downstream.rs builds it):
# cargo adds the downstream package itself to the copy and keeps every locked version, so the
# copy cannot be --locked.
cp Cargo.lock downstream/Cargo.lock
# The workspace's target directory: the dependencies (tileops among them, the same path) were
# checked by the clippy step above.
(cd downstream && CARGO_TARGET_DIR="$PWD/../target" cargo clippy --all-targets -- -D warnings)
rm downstream/Cargo.lock

step "doc" "cargo doc (private items too; every rustdoc warning, broken intra-doc links included, fails)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items --locked

step "python" "torch baseline script (its pure parts; PyTorch-dependent cases skip)"
python3 -m unittest discover -s scripts -p 'test_*.py'

# Every cargo command from here on that builds tileops selects the same packages (the workspace
# without the emulator, as emu-check.sh and gpu-prepare.sh do): cargo resolves the dependencies'
# features per selection, and one selecting a single package could build tileops once more.
# Every test below is built once, in the profile `emulated` (release with a debug build's
# assertions and overflow checks, tests/it's crate unoptimised: Cargo.toml), the one the GPU tests
# on the emulated device need (the f64 references are slow unoptimised): a second, debug build of
# the same tests cost about ten minutes of CI. The selection is a debug build's (the tests ignored
# under debug assertions are ignored here too; "test: optimised" runs them).
step "build: emulated" "the emulator, every test, example and bench, and the GPU check's bundle (profile emulated)"
# Each crate has one integration-test binary, `it` (cuda-emu keeps its own test targets, which
# emu-check.sh runs; the root package's trybuild UI tests are `ui`, a binary of their own since
# they set a variable of the process's environment, run with the other targets). The GPU tests
# (tileops's `it`, every one under a `gpu` module: `normalization::gpu::...`) would only print
# SKIP here, with no GPU; they run below instead, on the emulated device with
# TILEOPS_REQUIRE_GPU=1, so nothing skips in CI. libtest's --skip matches
# any substring of a test's path, so it is given to the `it` binaries only (no test of theirs but
# tileops's GPU tests has `gpu::` in its path; unit tests such as tileops-bench's
# `calibrate_gpu::tests::...` do). bench_all's emulated-device test runs in emu-check.sh too (it
# needs the emulator's libraries).
mapfile -t other_tests < <(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
for package in json.load(sys.stdin)["packages"]:
    if package["name"] == "cuda-emu":
        continue
    for target in package["targets"]:
        if "test" in target["kind"] and target["name"] != "it":
            print("--test=" + target["name"])')
unit_targets=(--lib --bins --examples --benches "${other_tests[@]}")
cargo test --workspace --exclude cuda-emu --profile emulated --locked "${unit_targets[@]}" --test it --no-run
EMU_CHECK_PHASE=build bash scripts/emu-check.sh
# Lane D: every GPU test on the emulated device (scripts/emu-check.sh, whose builds are now
# no-ops), in the background beside the CPU tests below: the emulator runs one launch at a time
# per process, on one core, and the CPU tests have serial stretches of their own.
emu_log="$PWD/target/ci-logs/emu-check.log"
emu_start=$(date +%s)
set -m
(bash scripts/emu-check.sh) >"$emu_log" 2>&1 &
lane_d_pid=$!
set +m
step "test: unit, examples, benches, other targets" "cargo test (every target but the it binaries)"
cargo test --workspace --exclude cuda-emu --profile emulated --locked "${unit_targets[@]}"
step "test: it" "the it test binaries (all but the GPU tests, which emu-check.sh runs on the emulated device)"
cargo test --workspace --exclude cuda-emu --profile emulated --locked --test it -- \
    --skip gpu:: --skip bench_all::bench_all_on_the_emulated_device
step "test: doc" "doc tests"
cargo test --workspace --exclude cuda-emu --profile emulated --locked --doc
step "test: optimised" "huge shapes and the fp8 sweep"
# The library's unit tests that a debug build ignores as slow (huge shapes again, and the dense fp8
# sweep: the float8 crate against the hand-written codec it replaced), in the same build.
cargo test --workspace --exclude cuda-emu --profile emulated --locked --lib -- \
    --include-ignored huge_shapes:: fp8_oracle
step "lane B wait" "the ASan emulator, msrv and package finishing"
if ! wait "$lane_b_pid"; then
    echo "lane B failed (the ASan emulator, msrv or package); its log:" >&2
    tail -n 80 "$lane_b_log" >&2
    exit 1
fi
step "lane D wait" "the emulated GPU tests finishing"
emu_rc=0
wait "$lane_d_pid" || emu_rc=$?
echo "| lane D: emu-check | $(($(date +%s) - emu_start)) |" >>"$lane_b_times"
cat "$emu_log"
if ((emu_rc != 0)); then
    echo "lane D failed (scripts/emu-check.sh): its log is above" >&2
    exit 1
fi
step "lane C wait" "the candle check finishing"
if ! wait "$lane_c_pid"; then
    echo "lane C failed (scripts/candle-check.sh); its log:" >&2
    tail -n 80 "$candle_log" >&2
    exit 1
fi
