#!/usr/bin/env bash
# Builds everything the GPU check needs into one self-contained folder, on a machine with Rust
# (no GPU needed). Copy the folder to a machine with an NVIDIA GPU and the CUDA 13 driver (no Rust)
# and run `bash gpu-check.sh OUTDIR` there.
#
#   bash scripts/gpu-prepare.sh [BUNDLE_DIR]        # default: target/gpu-bundle
#
# The bundle holds:
#   tests/<name>        tileops's test executables (release), found via cargo's JSON messages:
#                       tests/it (the integration tests, one binary; gpu-check.sh selects its GPU
#                       tests by filters on their module paths) and tests/tileops_unit (the unit tests)
#   bin/<name>          the workspace's release examples (bench_all and the roofline tool, if present)
#   nvrtc/              the pinned NVRTC 13.0 library and CUDA headers from .cuda-wheels, so kernels
#                       compile for the device's own sm_XX without a toolkit on the GPU machine.
#                       TILEOPS_BUNDLE_NVRTC=gzip (default) stores the libraries gzipped (~45 MB
#                       instead of ~115 MB; gpu-check.sh unpacks them), =copy as they are, =none
#                       leaves them out (the GPU machine's own CUDA 13 toolkit is then used).
#   profiles/, manifest/   the YAML the tools read
#   gpu-check.sh, torch_baseline.py, BUILD_INFO
#
# GPU_PREPARE_SKIP_TESTS=1 leaves the test executables out (a quicker bundle: gpu-check.sh then
# says so in a SKIP row); GPU_PREPARE_PROFILE=NAME builds with that cargo profile instead of
# `release` (the rehearsal against the emulator, scripts/gpu-rehearsal.sh, uses `emulated`, the
# optimised build scripts/emu-check.sh has already made). For a GPU machine, leave both unset.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="${1:-$root/target/gpu-bundle}"
nvrtc_mode="${TILEOPS_BUNDLE_NVRTC:-gzip}"
profile="${GPU_PREPARE_PROFILE:-release}"
cd "$root"

case "$nvrtc_mode" in
  gzip|copy|none) ;;
  *) echo "gpu-prepare: TILEOPS_BUNDLE_NVRTC must be gzip, copy or none (got $nvrtc_mode)" >&2; exit 2 ;;
esac

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || { echo "gpu-prepare: $python is needed to read cargo's JSON" >&2; exit 1; }

rm -rf "$bundle"
mkdir -p "$bundle/tests" "$bundle/bin"

# executables [PACKAGE]: `kind name path` of each executable cargo's JSON on stdin reports (only
# PACKAGE's, when given).
executables() {
  "$python" -c '
import json, sys
package = sys.argv[1] if len(sys.argv) > 1 else None
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    # A package id is `path+file:///dir#[name@]version`: the name, else the last directory.
    source, _, fragment = msg["package_id"].partition("#")
    name = fragment.split("@")[0] if "@" in fragment else source.rstrip("/").rsplit("/", 1)[-1]
    if package is not None and name != package:
        continue
    target = msg["target"]
    kind = "test" if msg["profile"]["test"] else target["kind"][0]
    print(kind, target["name"], msg["executable"])
' "$@"
}

# Every build here selects the workspace without the emulator, as scripts/test.sh's builds do:
# cargo resolves the dependencies' features per selection, and a command selecting one package
# can resolve them otherwise and build tileops again.
workspace=(--workspace --exclude cuda-emu)

skip_tests="${GPU_PREPARE_SKIP_TESTS:-0}"
if [[ "$skip_tests" == 1 ]]; then
  echo "gpu-prepare: GPU_PREPARE_SKIP_TESTS=1: no test executables in the bundle"
  : >"$bundle/.tests.txt"
else
  echo "gpu-prepare: building tileops test executables ($profile)"
  cargo test --profile "$profile" --locked "${workspace[@]}" --lib --test it --no-run \
    --message-format=json-render-diagnostics | executables tileops >"$bundle/.tests.txt"
fi
while read -r kind name path; do
  # The library's unit tests are named after the crate; give them a clearer name.
  [[ "$kind" == "lib" || "$name" == "tileops" ]] && name="tileops_unit"
  cp "$path" "$bundle/tests/$name"
done <"$bundle/.tests.txt"

echo "gpu-prepare: building the workspace's examples ($profile)"
cargo build --profile "$profile" --locked "${workspace[@]}" --examples --message-format=json-render-diagnostics \
  | executables >"$bundle/.examples.txt"
while read -r kind name path; do
  [[ "$kind" == "example" ]] && cp "$path" "$bundle/bin/$name"
done <"$bundle/.examples.txt"
rm -f "$bundle/.tests.txt" "$bundle/.examples.txt"

if [[ "$nvrtc_mode" != none ]]; then
  bash scripts/install-cuda-wheels.sh
  wheels="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}/nvidia/cu13"
  mkdir -p "$bundle/nvrtc/nvidia/cu13/lib"
  cp -r "$wheels/include" "$bundle/nvrtc/nvidia/cu13/include"
  for lib in "$wheels/lib/libnvrtc.so.13" "$wheels/lib/libnvrtc-builtins.so.13.0"; do
    if [[ "$nvrtc_mode" == gzip ]]; then
      gzip -6 -c "$lib" >"$bundle/nvrtc/nvidia/cu13/lib/$(basename "$lib").gz"
    else
      cp "$lib" "$bundle/nvrtc/nvidia/cu13/lib/"
    fi
  done
fi

cp -rL tileops-bench/profiles "$bundle/profiles"
cp -rL tileops/manifest "$bundle/manifest"
cp scripts/gpu-check.sh "$bundle/gpu-check.sh"
cp scripts/torch_baseline.py "$bundle/torch_baseline.py"
{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | grep -q . && echo '(dirty)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version 2>/dev/null | head -1)"
  echo "rustc: $(rustc --version), profile $profile"
  echo "nvrtc: $nvrtc_mode"
  echo "tests: $([[ "$skip_tests" == 1 ]] && echo "left out (GPU_PREPARE_SKIP_TESTS=1)" || echo included)"
} >"$bundle/BUILD_INFO"

echo "gpu-prepare: bundle ready in $bundle ($(du -sh "$bundle" | cut -f1))"
ls "$bundle/tests" "$bundle/bin" | sed 's/^/  /'
echo "gpu-prepare: on the GPU machine: bash $(basename "$bundle")/gpu-check.sh OUTDIR"
