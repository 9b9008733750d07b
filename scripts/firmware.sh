#!/usr/bin/env bash
# The checkout example as Cortex-M firmware, built and run under QEMU, as CI runs it.
#
#   bash scripts/firmware.sh
#
# Builds firmware/ (its own workspace) for the Cortex-M0, M3 and M4F targets as linked
# binaries, runs each on its QEMU board (micro:bit, MPS2-AN385, MPS2-AN386) under `timeout`,
# and fails unless the firmware says its trace matched the worked example (exit status 0)
# and the trace holds the example's figures. Then prints each binary's flash, static RAM and
# the libraries' share of it, and the code size of the core's decisions
# (scripts/core-size.sh, which fails if `call_timeout` links a 64/128-bit division builtin).
#
# Installs nothing but the three rustup targets: qemu-system-arm must be on the PATH
# (Debian and Ubuntu: apt-get install qemu-system-arm).
set -euo pipefail
cd "$(dirname "$0")/../firmware"

step() { printf '\n==> %s\n' "$*"; }

if ! command -v qemu-system-arm >/dev/null; then
  echo "firmware: qemu-system-arm is not installed; it runs the firmware." >&2
  echo "firmware: on Debian or Ubuntu: apt-get install qemu-system-arm" >&2
  exit 1
fi

TARGETS=(thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf)
TARGET_DIR=${CARGO_TARGET_DIR:-target}

# Lines of the trace the run must print: the worked example's figures, both cases.
EXPECT=(
  '  115 ms  C  called, timeout 60 ms'
  '  160 ms  response sent: 200'
  '  156 ms  C  skipped: 24 ms left for it < its 25 ms floor; fallback used'
  '  176 ms  response sent: 200'
  'trace matches the worked example'
)

step "toolchain: $(rustc --version); $(qemu-system-arm --version | head -n 1)"
rustup target add "${TARGETS[@]}"

step "format and clippy (-D warnings), per target"
cargo fmt -- --check
for t in "${TARGETS[@]}"; do
  cargo clippy --locked --release --target "$t" -- -D warnings
done

step "build: linked binaries for ${TARGETS[*]}"
for t in "${TARGETS[@]}"; do
  cargo build --locked --release --target "$t"
done

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for t in "${TARGETS[@]}"; do
  step "run on QEMU: $t"
  # The runner (.cargo/config.toml) picks the board; the binary is built, so `timeout`
  # bounds the run itself: a hang fails with status 124.
  start=$(date +%s%N)
  status=0
  timeout 60 cargo run --locked --release --target "$t" >"$OUT" 2>&1 || status=$?
  end=$(date +%s%N)
  cat "$OUT"
  echo "QEMU run: $(((end - start) / 1000000)) ms (with cargo's start-up), exit status $status"
  if [ "$status" -ne 0 ]; then
    echo "firmware: $t: the run failed (exit status $status)" >&2
    exit 1
  fi
  for line in "${EXPECT[@]}"; do
    if ! grep -qxF -- "$line" "$OUT"; then
      echo "firmware: $t: the trace lacks the line: $line" >&2
      exit 1
    fi
  done
done

step "sizes"
for t in "${TARGETS[@]}"; do
  bash ../scripts/firmware-size.sh "$TARGET_DIR/$t/release/deadline-firmware"
done

step "code size of deadline-core's decisions (thumbv7em-none-eabihf)"
bash ../scripts/core-size.sh

echo
echo "the firmware ran on every target and its trace matched the worked example"
