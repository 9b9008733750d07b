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
  # Each one run once first, outside valgrind, so that a name `calls` does not know is
  # refused with its own message (which the count below would swallow).
  for s in "${SCENARIOS[@]}"; do
    # `sizes` and `base` are the program's other commands, not scenarios.
    if [ "$s" = sizes ] || [ "$s" = base ]; then
      echo "instructions: \"$s\" is not a scenario" >&2
      exit 2
    fi
    if ! refused=$("$BIN" "$s" 1 2>&1 >/dev/null); then
      echo "instructions: $refused" >&2
      exit 2
    fi
  done
else
  read -r -a SCENARIOS <<<"$("$BIN" 2>&1 | sed -n 's/.*scenarios: //p')"
fi

declare -A PER
per_call() {
  if [ -z "${PER[$1]:-}" ]; then
    local low high
    # (A valgrind that fails is caught here too, not by `set -e` with nothing said.)
    low=$(count "$1" "$LOW") || low=
    high=$(count "$1" "$HIGH") || high=
    # A run valgrind did not count (it failed, or printed no total) is no figure: never 0.
    if ! [[ "$low" =~ ^[0-9]+$ && "$high" =~ ^[0-9]+$ ]]; then
      echo "instructions: valgrind gave no count for $1 (\"$low\", \"$high\")" >&2
      exit 1
    fi
    PER[$1]=$(( (high - low) / (HIGH - LOW) ))
  fi
}

printf '%-44s %12s %10s %8s  %s\n' scenario instructions ratio more against
for s in "${SCENARIOS[@]}"; do
  per_call "$s"
  ratio="-"
  more="-"
  # Each call is compared with tokio's own timeout in the same setting (`calls base`): as a
  # ratio, and as the instructions it takes more.
  base=$("$BIN" base "$s")
  if [ -n "$base" ]; then
    per_call "$base"
    ratio=$(awk -v a="${PER[$s]}" -v b="${PER[$base]}" 'BEGIN { printf "%.2fx", a / b }')
    more=$(( PER[$s] - PER[$base] ))
  fi
  printf '%-44s %12s %10s %8s  %s\n' "$s" "${PER[$s]}" "$ratio" "$more" "$base"
done
