#!/usr/bin/env bash
# Installs the pinned NVIDIA wheels that let tileops compile its kernels on a machine without a GPU
# or CUDA toolkit: NVRTC (libnvrtc.so.13 + libnvrtc-builtins), the CUDA headers (cuda_fp16.h, ...)
# ptxas and nvdisasm; and the host-side headers (crt/, nv/target) the CPU emulator compiles the kernels with.
# Idempotent: a second run with everything in place does nothing.
#
#   bash scripts/install-cuda-wheels.sh            # into <repo>/.cuda-wheels
#   TILEOPS_CUDA_WHEELS=/some/dir bash scripts/install-cuda-wheels.sh
#
# Why pinned to 13.0.x: NVRTC 13.5 emits PTX `.version 9.5`, which the CUDA 13.0 driver of the target
# machines rejects; nvidia-cuda-nvcc would pull unpinned 13.5 wheels, hence --no-deps everywhere.
# tileops uses them when TILEOPS_CUDA_WHEELS names the destination (scripts/test.sh and
# scripts/emu-check.sh export it; tileops never searches the working directory or its ancestors):
# it dlopens libnvrtc-builtins and libnvrtc from there by absolute path before cudarc loads NVRTC,
# so no LD_LIBRARY_PATH is needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}"
pins=(
  "nvidia-cuda-nvrtc==13.0.88"
  "nvidia-cuda-runtime==13.0.96"
  "nvidia-cuda-nvcc==13.0.88"
  # crt/host_defines.h and <nv/target>: what cuda_fp16.h, cuda_bf16.h and cuda_fp8.h need to
  # compile as host C++, for the CPU emulator of the kernels (cuda-emu/).
  "nvidia-cuda-crt==13.0.88"
  "nvidia-cuda-cccl==13.0.85"
  # cicc and libdevice (nvvm/), nvcc's device front end: scripts/candle-check.sh builds
  # candle-core's `cuda` feature, whose candle-kernels compiles .cu files with nvcc.
  "nvidia-nvvm==13.0.88"
  # nvdisasm, for the SASS instruction ledger (tileops-bench/src/ledger/). PyPI has no 13.0 build
  # of it (13.2.51 is the oldest); 13.2.86 is the newest 13.2 patch, the release closest to the
  # 13.0 toolkit above. It only reads the CUBINs NVRTC 13.0 writes, so it cannot change what is
  # counted, only how the disassembly is spelled: a bump regenerates
  # tileops-bench/ledger/sass_sm90.json in the same change (its check names the version).
  "nvidia-cuda-nvdisasm==13.2.86"
)
stamp="$dest/.tileops-pins"
want="$(printf '%s\n' "${pins[@]}")"

complete() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
  compgen -G "$dest/nvidia/cu13/lib/libnvrtc.so.13*" >/dev/null || return 1
  compgen -G "$dest/nvidia/cu13/lib/libnvrtc-builtins.so.13*" >/dev/null || return 1
  [[ -f "$dest/nvidia/cu13/include/cuda_fp16.h" && -f "$dest/nvidia/cu13/include/cuda_bf16.h" ]] || return 1
  [[ -x "$dest/nvidia/cu13/bin/ptxas" ]] || return 1
  [[ -x "$dest/nvidia/cu13/bin/nvdisasm" ]] || return 1
  [[ -x "$dest/nvidia/cu13/nvvm/bin/cicc" ]] || return 1
  [[ -f "$dest/nvidia/cu13/include/crt/host_defines.h" && -e "$dest/nvidia/cu13/include/nv/target" ]] || return 1
}

if complete; then
  echo "install-cuda-wheels: already installed in $dest"
  exit 0
fi

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "install-cuda-wheels: $python not found; install Python 3 with pip" >&2
  exit 1
fi

rm -rf "$dest"
mkdir -p "$dest"
echo "install-cuda-wheels: installing ${pins[*]} into $dest"
"$python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps \
  --target "$dest" "${pins[@]}"
# Some wheel versions ship ptxas without the executable bit.
chmod +x "$dest/nvidia/cu13/bin/"* "$dest/nvidia/cu13/nvvm/bin/"* 2>/dev/null || true

printf '%s\n' "${pins[@]}" >"$stamp"
if ! complete; then
  echo "install-cuda-wheels: the wheels installed but the expected files are missing under $dest/nvidia/cu13" >&2
  find "$dest/nvidia" -maxdepth 3 | head -50 >&2
  exit 1
fi
echo "install-cuda-wheels: done ($dest/nvidia/cu13)"
