#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while, two at a time, niced, and prints what libFuzzer
# reports for each (executions, exec/s, coverage). Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`).
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Defaults: 600 s per target, every target. The corpus grows in fuzz/corpus/<target>, starting
# from fuzz/seeds/<target>; logs go to fuzz/logs/<target>.log; a failing input is kept in
# fuzz/artifacts/<target>/ and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

SECONDS_PER_TARGET=${1:-600}
shift || true
# libFuzzer reads a -max_total_time that is not a number as 0, which means no limit at all.
if ! [[ "$SECONDS_PER_TARGET" =~ ^[1-9][0-9]{0,6}$ ]]; then
  echo "fuzz.sh: SECONDS_PER_TARGET must be a whole number of seconds from 1 to 9999999, not \"$SECONDS_PER_TARGET\"" >&2
  echo "usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
ALL=(grpc_timeout deadline_ms pushback cli_table cli_sample server_headers protocol)
if [ "$#" -eq 0 ]; then TARGETS=("${ALL[@]}"); else TARGETS=("$@"); fi
PARALLEL=${FUZZ_PARALLEL:-2}

dict_for() {
  case "$1" in
    grpc_timeout | server_headers) echo "-dict=dict/grpc.dict" ;;
    cli_table) echo "-dict=dict/cli_table.dict" ;;
    cli_sample) echo "-dict=dict/cli_sample.dict" ;;
    *) echo "" ;;
  esac
}

nice -n 10 cargo +nightly fuzz build -O
mkdir -p logs
run() {
  local t=$1
  mkdir -p "corpus/$t"
  # -rss_limit_mb: a sample file may stand for ten million calls (160 MB); the limit
  # leaves room for that and catches anything unbounded.
  # shellcheck disable=SC2046
  nice -n 10 cargo +nightly fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    $(dict_for "$t") >"logs/$t.log" 2>&1
}

failed=0
pids=()
names=()
for t in "${TARGETS[@]}"; do
  run "$t" &
  pids+=($!)
  names+=("$t")
  if [ "${#pids[@]}" -ge "$PARALLEL" ]; then
    if ! wait "${pids[0]}"; then failed=1; echo "FAILED: ${names[0]} (see fuzz/logs/${names[0]}.log)"; fi
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed=1; echo "FAILED: ${names[$i]} (see fuzz/logs/${names[$i]}.log)"; fi
done

printf '\n%-16s %14s %10s %8s %8s %8s\n' target execs exec/s cov ft corpus
for t in "${TARGETS[@]}"; do
  log="logs/$t.log"
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
  rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
  last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov:' | tail -1 || true)
  cov=$(echo "$last" | grep -Eo 'cov: [0-9]+' | grep -Eo '[0-9]+' || true)
  ft=$(echo "$last" | grep -Eo 'ft: [0-9]+' | grep -Eo '[0-9]+' || true)
  corp=$(echo "$last" | grep -Eo 'corp: [0-9]+' | grep -Eo '[0-9]+' || true)
  printf '%-16s %14s %10s %8s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
done
exit "$failed"
