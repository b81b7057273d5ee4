#!/usr/bin/env bash
# A candle user's first day, as tileops-candle/README.md ("Building with `cuda`") writes it: a new
# crate `my-model` beside a `tileops` checkout, its Cargo.toml dependencies and src/main.rs taken
# from the README's blocks, then the README's shell steps run as written (source
# scripts/cuda-env.sh, cargo build, cargo run). Run from a clean environment (scripts/candle-check.sh
# calls it under `env -i`), so the steps must set up everything the build needs themselves.
#
#   bash scripts/candle-first-day.sh
#
# The crate starts from tileops-candle's lock file, so that it resolves to the versions the bridge
# was tested with (and, sharing CARGO_TARGET_DIR with candle-check, reuses their build) without
# reaching a registry. The program must say it ran on cuda: on a machine without a GPU, the
# emulated device.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readme="$root/tileops-candle/README.md"
work="$root/target/first-day"

# The fenced block that follows the line `<!-- first-day:NAME -->`, without its fences.
block() {
  awk -v marker="<!-- first-day:$1 -->" '
    $0 == marker { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' "$readme"
}

rm -rf "$work"
mkdir -p "$work/my-model/src"
ln -s "$root" "$work/tileops"
for name in Cargo.toml main.rs steps; do
  if [[ -z "$(block "$name")" ]]; then
    echo "candle-first-day: tileops-candle/README.md has no block after <!-- first-day:$name -->" >&2
    exit 1
  fi
done
{
  printf '[package]\nname = "my-model"\nversion = "0.1.0"\nedition = "2024"\n\n'
  block Cargo.toml
  # Outside any workspace above it, as a user's crate is.
  printf '\n[workspace]\n'
} >"$work/my-model/Cargo.toml"
block main.rs >"$work/my-model/src/main.rs"
cp "$root/tileops-candle/Cargo.lock" "$work/my-model/Cargo.lock"

cd "$work"
# The steps' output into a file of its own (a `tee /dev/stderr` would reopen, and truncate, the
# caller's log when stderr is a file).
log="$work/steps.log"
if ! CARGO_NET_OFFLINE=true bash -e -u -o pipefail -c "$(block steps)" >"$log" 2>&1; then
  cat "$log"
  echo "candle-first-day: the README's steps failed" >&2
  exit 1
fi
cat "$log"
if ! grep -q '^rms_norm on cuda: ' "$log"; then
  echo "candle-first-day: the program did not report a run on cuda" >&2
  exit 1
fi
echo "candle-first-day: passed"
