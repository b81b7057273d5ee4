#!/usr/bin/env bash
# tileops beside candle, on a machine without a GPU or a CUDA toolkit: builds tileops-candle/ (the
# candle bridge) with candle-core's `cuda` feature and tileops's `dynamic-linking`, then runs its
# tests and its decoder-layer example on the CPU and on the emulated CUDA device.
#
#   bash scripts/candle-check.sh        # after scripts/emu-check.sh built the emulator
#
# What the build needs, and where it comes from:
# - nvcc, for candle-kernels's build script (PTX and a static library of .cu files): NVIDIA's
#   pinned nvcc, cicc and headers wheels (scripts/install-cuda-wheels.sh), for sm_90 only
#   (CUDA_COMPUTE_CAP), so it never looks for a GPU;
# - the libraries cudarc's `dynamic-linking` links (-lcuda -lnvrtc -lcurand -lcublas -lcublasLt,
#   and candle-kernels's -lcudart): NVRTC and cudart from the wheels, the driver, cuBLAS and
#   cuRAND from the emulator (cuda-emu/, a stand-in libcuda that also defines what candle's
#   device calls), in a link directory named by CUDA_ROOT, which cudarc's build script reads.
# The same directories are on LD_LIBRARY_PATH when the tests run: a linked program binds every
# library when it starts.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheels="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}"
cuda="$wheels/nvidia/cu13"
emu="$root/target/emulated/libcuda_emu.so"

bash "$root/scripts/install-cuda-wheels.sh" >/dev/null
if [[ ! -f "$emu" ]]; then
  echo "== candle-check: building the emulator"
  cargo build -p cuda-emu --profile emulated --lib --locked --manifest-path "$root/Cargo.toml"
fi

link="$root/target/candle-link"
mkdir -p "$link/lib64"
# The .so names for the linker, the sonames for the loader (tileops asks it for cuBLAS by soname).
for name in libcuda.so libcuda.so.1 libcublas.so libcublas.so.13 libcublasLt.so libcublasLt.so.13 libcurand.so; do
  ln -sf "$emu" "$link/lib64/$name"
done
ln -sf "$cuda/lib/libnvrtc.so.13" "$link/lib64/libnvrtc.so"
ln -sf "$cuda/lib/libcudart.so.13" "$link/lib64/libcudart.so"

export TILEOPS_CUDA_WHEELS="$wheels"
export PATH="$cuda/bin:$PATH"
export CUDA_COMPUTE_CAP=90
# candle's kernels never run here (the emulator runs tileops's kernels, not PTX): nvcc compiles
# them without device optimisation (NVVM and ptxas at -O0), which takes half the time of the -O3
# build a GPU machine makes. NVCC_APPEND_FLAGS is nvcc's own variable, read on every call.
export NVCC_APPEND_FLAGS="-Xcicc -O0 -Xptxas -O0"
export CUDA_ROOT="$link"
export LD_LIBRARY_PATH="$link/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Every CUDA test runs on the emulated device: none may skip.
export TILEOPS_REQUIRE_GPU=1
export CARGO_TARGET_DIR="$root/target/candle"
# A build made once and run once: no debug info and no incremental state to write (candle-core and
# its dependencies are most of the build, and most of its time in CI).
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The emulator's schedule for the kernels, as emu-check.sh's first pair runs them.
export CUDA_EMU_SCHEDULE="${CUDA_EMU_SCHEDULE:-round-robin}"

cd "$root/tileops-candle"
t0=$(date +%s)
echo "== candle-check: fmt"
cargo fmt --check
echo "== candle-check: clippy (candle-core with cuda, tileops with dynamic-linking)"
cargo clippy --locked --all-targets --features cuda -- -D warnings
echo "== candle-check: tests (CPU and the emulated device)"
cargo test --locked --features cuda
echo "== candle-check: the decoder layer, on the CPU and on the emulated device"
records="$CARGO_TARGET_DIR/decoder-layer"
mkdir -p "$records"
cargo run --locked --features cuda --example decoder_layer -- --device cpu --records "$records/cpu.jsonl"
cargo run --locked --features cuda --example decoder_layer -- --device cuda --records "$records/cuda.jsonl"
echo "candle-check: passed in $(($(date +%s) - t0)) s"
