#!/usr/bin/env bash
# Instructions per call, each way deadline-bench compares, in one run: valgrind's callgrind
# counts the instructions of `calls SCENARIO N` at two values of N, and one call costs the
# difference divided by the difference of N (the start-up, the runtime's construction and
# the first calls' warm-up cancel out). Counts are exact and repeatable for one binary, so a
# busy machine does not disturb them.
#
#   bash scripts/instructions.sh            # every scenario
#   bash scripts/instructions.sh NAME...    # some of them
#   FEATURES=advice bash scripts/instructions.sh dependency_run dependency_run_advice
#                                           # deadline-bench built with these features
#
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null; then
  echo "instructions: valgrind is not installed (Debian: apt-get install valgrind)" >&2
  exit 1
fi

cargo build --release -q -p deadline-bench --bin calls ${FEATURES:+--features "$FEATURES"}
BIN=${CARGO_TARGET_DIR:-target}/release/calls
LOW=1000
HIGH=11000

# The instructions callgrind counted for one run of `calls $1 $2`.
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$2" 2>&1 \
    | awk '/Collected :/ { print $NF }'
}

if [ $# -gt 0 ]; then
  SCENARIOS=("$@")
else
  read -r -a SCENARIOS <<<"$("$BIN" 2>&1 | sed -n 's/.*scenarios: //p')"
fi

printf '%-30s %14s %10s\n' scenario instructions vs-tokio
base=""
for s in "${SCENARIOS[@]}"; do
  low=$(count "$s" "$LOW")
  high=$(count "$s" "$HIGH")
  per=$(( (high - low) / (HIGH - LOW) ))
  if [ "$s" = tokio_timeout ]; then base=$per; fi
  if [ -n "$base" ]; then
    ratio=$(awk -v a="$per" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
  else
    ratio="-"
  fi
  printf '%-30s %14s %10s\n' "$s" "$per" "$ratio"
done
