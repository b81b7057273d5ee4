#!/usr/bin/env bash
# nvcc with a cache of compiled objects, for CI's candle builds (scripts/candle-check.sh sets
# NVCC to this script; candle-kernels's build script runs $NVCC when it is set).
#
# candle-kernels's build script compiles its quantised-MoE kernels into a static library, about nine
# minutes of nvcc on two cores, and cargo runs that build script once per distinct build of it: the
# candle check has three (clippy's, the tests', and the first-day crate's, whose dependencies
# resolve other features), the same sources compiled by the same nvcc with the same flags each time.
# This compiles each object once and copies it on the later calls.
#
# An object compile (`-c -o FILE`) and a PTX compile of one file (`--ptx --output-directory DIR
# FILE.cu`, which writes DIR/FILE.ptx: the build script's PTX kernels, half a minute to a minute of
# nvcc per build) are cached; everything else (the library archive, --version) runs nvcc as given.
# An entry is named by the SHA-256 of everything its output depends on: nvcc's and the host
# compiler's versions, the arguments (the output's directory left out: it is the build script's
# own OUT_DIR), NVCC_APPEND_FLAGS (which nvcc reads itself), the working
# directory and the contents of every file under it (the build script runs in candle-kernels's
# source directory, so the kernel and every header it includes are there; the toolkit's own headers
# are the version's). ccache could do this too; it would be one more system package for CI to
# install, for this one use.
#
#   NVCC=scripts/nvcc-cache.sh NVCC_CACHE_DIR=target/nvcc-cache cargo build ...
#
# The real nvcc is the first on PATH; the cache is $NVCC_CACHE_DIR (required).
#
# With NVCC_CACHE_PTX_ONLY=1, an object embeds its kernels as PTX instead of SASS: in an object
# compile (`-c`), each `-gencode=arch=compute_N,code=sm_N` becomes `code=compute_N`, so that ptxas
# never runs (two thirds of an object's nvcc time: 10 s instead of 31 s for one of candle's
# quantised-matmul files). For builds whose kernels never run, as in CI without a GPU; a GPU would
# JIT-compile the PTX when the program loads it.
set -euo pipefail

real_nvcc="$(command -v nvcc)" || {
  echo "nvcc-cache: no nvcc on PATH" >&2
  exit 1
}
cache="${NVCC_CACHE_DIR:?nvcc-cache: set NVCC_CACHE_DIR}"

if [[ "${NVCC_CACHE_PTX_ONLY:-0}" == 1 && " $* " == *" -c "* && " $* " != *" --ptx "* ]]; then
  rewritten=()
  for arg in "$@"; do
    if [[ "$arg" =~ ^(-gencode=|--generate-code=)?arch=(compute_[0-9]+[af]?),code=sm_[0-9]+[af]?$ ]]; then
      arg="${BASH_REMATCH[1]}arch=${BASH_REMATCH[2]},code=${BASH_REMATCH[2]}"
    fi
    rewritten+=("$arg")
  done
  set -- "${rewritten[@]}"
fi

output="" compile=0 ptx=0 output_dir="" sources=() previous=""
key_args=()
for arg in "$@"; do
  if [[ "$previous" == "-o" ]]; then
    output="$arg"
    key_args+=("$(basename -- "$arg")")
  elif [[ "$previous" == "--output-directory" ]]; then
    output_dir="$arg"
    key_args+=("(output directory)")
  else
    key_args+=("$arg")
  fi
  case "$arg" in
    -c) compile=1 ;;
    --ptx | -ptx) ptx=1 ;;
    *.cu) [[ "$previous" == "-o" ]] || sources+=("$arg") ;;
  esac
  previous="$arg"
done
if ((ptx == 1 && compile == 0)) && [[ -z "$output" && -n "$output_dir" ]] && ((${#sources[@]} == 1)); then
  # nvcc names the PTX after the source: DIR/NAME.ptx for NAME.cu.
  output="$output_dir/$(basename -- "${sources[0]}" .cu).ptx"
elif ((compile == 0 || ptx == 1)) || [[ -z "$output" ]]; then
  exec "$real_nvcc" "$@"
fi

key=$(
  {
    "$real_nvcc" --version
    "${NVCC_CCBIN:-c++}" --version 2>/dev/null || true
    printf 'arg %s\n' "${key_args[@]}"
    printf 'NVCC_APPEND_FLAGS %s\n' "${NVCC_APPEND_FLAGS:-}"
    printf 'cwd %s\n' "$PWD"
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-64
)
entry="$cache/$key.out"
if [[ -f "$entry" ]]; then
  cp -- "$entry" "$output"
  exit 0
fi
"$real_nvcc" "$@"
mkdir -p "$cache"
# Written whole, then renamed: a concurrent reader sees the entry or nothing.
tmp="$(mktemp "$cache/.tmp.XXXXXX")"
cp -- "$output" "$tmp"
chmod 644 -- "$tmp" # mktemp's 0600 would be copied to every later output
mv -f -- "$tmp" "$entry"
