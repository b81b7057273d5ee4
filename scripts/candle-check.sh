#!/usr/bin/env bash
# tileops beside candle, on a machine without a GPU or a CUDA toolkit: builds tileops-candle/ (the
# candle bridge) with candle-core's `cuda` feature and tileops's `dynamic-linking`, then runs its
# tests and its decoder-layer example on the CPU and on the emulated CUDA device.
#
#   bash scripts/candle-check.sh        # after scripts/emu-check.sh built the emulator
#
# What the build needs (nvcc from NVIDIA's wheels, the driver, cuBLAS and cuRAND from the emulator
# in a link directory named by CUDA_ROOT, the same directories on LD_LIBRARY_PATH) is what a user
# sources in their own crate, scripts/cuda-env.sh; this check sources it too, then builds a fresh
# crate by the steps tileops-candle/README.md gives (scripts/candle-first-day.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The PATH before the sourced environment: the first-day check starts from it.
user_path="$PATH"
# shellcheck source=cuda-env.sh
source "$root/scripts/cuda-env.sh"
# candle's kernels never run here (the emulator runs tileops's kernels, not PTX): nvcc compiles
# them without device optimisation (NVVM and ptxas at -O0), which takes half the time of the -O3
# build a GPU machine makes. NVCC_APPEND_FLAGS is nvcc's own variable, read on every call.
export NVCC_APPEND_FLAGS="-Xcicc -O0 -Xptxas -O0"
# candle-kernels's build script runs once per distinct build of it (three here: clippy's, the
# tests', the first-day crate's), and its object compiles are the same each time: compiled once,
# then copied from a cache (scripts/nvcc-cache.sh; it runs the nvcc that PATH names).
export NVCC="$root/scripts/nvcc-cache.sh"
export NVCC_CACHE_DIR="$root/target/candle/nvcc-cache"
# And, since they never run, their quantised-MoE objects carry PTX, not SASS: no ptxas (about five
# minutes of CPU).
export NVCC_CACHE_PTX_ONLY=1
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
echo "== candle-check: rustdoc (every warning, broken intra-doc links included, fails)"
# The examples too: a command that builds a target needing the dev-dependencies resolves the
# dependencies' features as clippy's --all-targets did, so the doc build reuses its checked
# candle-core (the library alone resolved other features, and checked candle-core and compiled
# candle's kernels again: eight minutes of CI).
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --features cuda --lib --examples
echo "== candle-check: tests (CPU and the emulated device)"
cargo test --locked --features cuda
echo "== candle-check: the decoder layer, on the CPU and on the emulated device"
records="$CARGO_TARGET_DIR/decoder-layer"
mkdir -p "$records"
cargo run --locked --features cuda --example decoder_layer -- --device cpu --records "$records/cpu.jsonl"
cargo run --locked --features cuda --example decoder_layer -- --device cuda --records "$records/cuda.jsonl"
echo "== candle-check: a new crate built by tileops-candle/README.md's steps, from a clean environment"
env -i HOME="$HOME" PATH="$user_path" USER="${USER:-ci}" \
  ${CARGO_HOME:+CARGO_HOME="$CARGO_HOME"} ${RUSTUP_HOME:+RUSTUP_HOME="$RUSTUP_HOME"} \
  ${RUSTUP_TOOLCHAIN:+RUSTUP_TOOLCHAIN="$RUSTUP_TOOLCHAIN"} \
  CARGO_TARGET_DIR="$CARGO_TARGET_DIR" NVCC_APPEND_FLAGS="$NVCC_APPEND_FLAGS" \
  NVCC="$NVCC" NVCC_CACHE_DIR="$NVCC_CACHE_DIR" NVCC_CACHE_PTX_ONLY="$NVCC_CACHE_PTX_ONLY" \
  CARGO_PROFILE_DEV_DEBUG="$CARGO_PROFILE_DEV_DEBUG" CARGO_INCREMENTAL="$CARGO_INCREMENTAL" \
  bash "$root/scripts/candle-first-day.sh"
echo "candle-check: passed in $(($(date +%s) - t0)) s"
