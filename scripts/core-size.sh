#!/usr/bin/env bash
# The code size of deadline-core's decisions on a Cortex-M4F, from two probe binaries.
#
#   bash scripts/core-size.sh
#
# Builds firmware/src/bin/size-all.rs (every decision of the core: call timeout, plan, retry,
# hedge, every backoff jitter, retry budget, breaker, admission, statement timeout, the header
# codecs) and firmware/src/bin/size-call-timeout.rs (`call_timeout` alone) for
# thumbv7em-none-eabihf with the firmware's release profile (opt-level "s", LTO, one codegen
# unit), then prints for each: the total .text, the share of it attributed to deadline-core
# by the DWARF line tables (as scripts/firmware-size.sh attributes it, Rust `core` code
# inlined into the core counted as the core's), the largest functions of the core, and the
# 64- and 128-bit multiply and division builtins it links (from `readelf -s --wide`).
#
# Fails if the `call_timeout` probe links any such builtin. Reports, without failing, the
# core's share against the targets: 0.5 KiB for `call_timeout` alone, 8 KiB (aim 4 KiB) for
# every decision.
set -euo pipefail
cd "$(dirname "$0")/../firmware"

TARGET=thumbv7em-none-eabihf
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BINS=(size-all size-call-timeout)
# compiler-builtins' 64- and 128-bit division and 128-bit multiply, by their C names, and the
# Rust functions behind them (mangled names, which LTO may leave in place of the C ones).
BUILTINS='__aeabi_uldivmod|__aeabi_ldivmod|__udivmoddi4|__divmoddi4|__udivdi3|__divdi3|__umoddi3|__moddi3|__udivti3|__divti3|__umodti3|__modti3|__udivmodti4|__divmodti4|__multi3|__muloti4|__umulodi4|u64_div_rem|i64_div_rem|u128_div_rem|i128_div_rem|u128_divide_sparc|u64_by_u64_div_rem'

cargo build --locked --release --target "$TARGET" --bin size-all --bin size-call-timeout

# The deadline-core row of firmware-size.sh's table: its first ("as written") or second
# ("with Rust core inlined") byte count.
core_bytes() {
  awk -v want="$1" '$1 == "deadline-core" && $3 == "B" {
    n = 0; line = $0
    while (match(line, /[0-9]+ B/)) { v[++n] = substr(line, RSTART, RLENGTH - 2); line = substr(line, RSTART + RLENGTH) }
    print v[want]; exit
  }'
}

# Reports a size against its target (reported, not enforced: see the header).
budget() {
  if [ "$1" -le "$2" ]; then
    echo "  target met: $3, $1 B of deadline-core <= $2 B"
  else
    echo "  target NOT met: $3, $1 B of deadline-core > $2 B"
  fi
}

status=0
for bin in "${BINS[@]}"; do
  elf="$TARGET_DIR/$TARGET/release/$bin"
  report=$(bash ../scripts/firmware-size.sh "$elf")
  text=$((16#$(readelf -S --wide "$elf" | awk '{ sub(/^ *\[ *[0-9]+\] */, "") } $1 == ".text" { print $5 }')))
  # The "with Rust core inlined" column of the deadline-core row.
  core=$(echo "$report" | core_bytes 2)
  own=$(echo "$report" | core_bytes 1)
  builtins=$(readelf -s --wide -C "$elf" | awk '$4 == "FUNC" { print $8 }' | grep -E "$BUILTINS" \
    | sed 's/.*:://' | sort -u | tr '\n' ' ' || true)
  echo
  echo "== $bin ($TARGET, release: opt-level \"s\", LTO)"
  printf '  .text %d B; deadline-core %d B with Rust core inlined (%d B its own lines)\n' "$text" "$core" "$own"
  echo "  largest functions of deadline-core (bytes; inlined code counts where it was inlined):"
  readelf -s --wide -C "$elf" | awk '$4 == "FUNC" && $8 ~ /^deadline_core::/ { s = $3; $1 = $2 = $3 = $4 = $5 = $6 = $7 = ""; sub(/^ +/, ""); print s, $0 }' \
    | sort -u | sort -k1,1 -n -r | head -n 10 | awk '{ s = $1; sub(/^[0-9]+ /, ""); printf "    %6d  %s\n", s, $0 }'
  echo "  64/128-bit division and multiply builtins linked: ${builtins:-none}"
  echo "$report" | sed -n '/by source file/,$p'
  case "$bin" in
    size-call-timeout)
      if [ -n "$builtins" ]; then
        echo "core-size: $bin links a 64/128-bit builtin: $builtins" >&2
        status=1
      fi
      budget "$core" 512 "call_timeout alone"
      ;;
    size-all)
      budget "$core" 8192 "every decision"
      budget "$core" 4096 "every decision (the aim)"
      ;;
  esac
done
exit "$status"
