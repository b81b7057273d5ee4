# The environment for building candle-core's `cuda` feature (and tileops-candle's) in your own
# crate. Source it, from any directory, in the shell you build in:
#
#   source path/to/tileops/scripts/cuda-env.sh
#   cargo build
#
# On a machine with a CUDA toolkit (`nvcc` on PATH) it changes nothing but CUDA_COMPUTE_CAP, and
# that only where no GPU answers `nvidia-smi` (candle-kernels's build script asks it for the
# architecture to compile for; set CUDA_COMPUTE_CAP yourself to pick another than 90, the H100's
# and H200's).
#
# On a machine without a toolkit (no `nvcc`) it provides what the build needs:
# - nvcc, for candle-kernels's build script: NVIDIA's pinned nvcc, cicc and headers wheels
#   (scripts/install-cuda-wheels.sh, into $TILEOPS_CUDA_WHEELS, by default <tileops>/.cuda-wheels);
# - the libraries cudarc's `dynamic-linking` links (-lcuda -lnvrtc -lcurand -lcublas -lcublasLt,
#   and candle-kernels's -lcudart), in a link directory named by CUDA_ROOT, which cudarc's build
#   script reads: NVRTC and cudart from the wheels; the driver, cuBLAS and cuRAND from tileops's
#   emulator (cuda-emu/, built here once), since NVIDIA ships no driver stub in a wheel.
# It puts the same directories on LD_LIBRARY_PATH, since a linked program binds every library when
# it starts. A program built so runs tileops's ops on the emulated device there (correct and slow;
# candle's own CUDA kernels do not run on it). Copied to a machine with a GPU, the same binary
# binds that machine's driver and CUDA libraries (leave this link directory off its
# LD_LIBRARY_PATH).
#
# Sourced, it never exits your shell: a failure is a message and a non-zero status.

tileops_cuda_env() {
  local root wheels cuda emu link name
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
  if command -v nvcc >/dev/null 2>&1; then
    if ! nvidia-smi >/dev/null 2>&1; then
      export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
    fi
    echo "cuda-env: using the CUDA toolkit on PATH ($(command -v nvcc))${CUDA_COMPUTE_CAP:+, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP}"
    return 0
  fi
  wheels="${TILEOPS_CUDA_WHEELS:-$root/.cuda-wheels}"
  cuda="$wheels/nvidia/cu13"
  emu="$root/target/emulated/libcuda_emu.so"
  TILEOPS_CUDA_WHEELS="$wheels" bash "$root/scripts/install-cuda-wheels.sh" >/dev/null || {
    echo "cuda-env: installing NVIDIA's CUDA wheels failed (pip and PyPI are needed)" >&2
    return 1
  }
  if [[ ! -f "$emu" ]]; then
    echo "cuda-env: building tileops's emulated CUDA driver (once)"
    (cd "$root" && TILEOPS_CUDA_WHEELS="$wheels" cargo build -p cuda-emu --profile emulated --lib --locked) || {
      echo "cuda-env: building cuda-emu failed" >&2
      return 1
    }
  fi
  link="$root/target/cuda-link"
  mkdir -p "$link/lib64" || return 1
  # The .so names for the linker, the sonames for the loader (tileops asks for cuBLAS by soname).
  for name in libcuda.so libcuda.so.1 libcublas.so libcublas.so.13 libcublasLt.so libcublasLt.so.13 libcurand.so; do
    ln -sf "$emu" "$link/lib64/$name" || return 1
  done
  ln -sf "$cuda/lib/libnvrtc.so.13" "$link/lib64/libnvrtc.so" || return 1
  ln -sf "$cuda/lib/libcudart.so.13" "$link/lib64/libcudart.so" || return 1
  export TILEOPS_CUDA_WHEELS="$wheels"
  export PATH="$cuda/bin:$PATH"
  export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
  export CUDA_ROOT="$link"
  export LD_LIBRARY_PATH="$link/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "cuda-env: no CUDA toolkit here; nvcc from NVIDIA's wheels ($cuda/bin), the driver and cuBLAS from tileops's emulator, CUDA_ROOT=$link, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"
}

tileops_cuda_env
