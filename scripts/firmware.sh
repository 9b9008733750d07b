#!/usr/bin/env bash
# The checkout example as Cortex-M firmware, built and run under QEMU, as CI runs it.
#
#   bash scripts/firmware.sh
#
# Builds firmware/ (its own workspace) for the Cortex-M0, M3 and M4F targets as linked
# binaries, three of them:
#
#   deadline-firmware         the one-line call, `Dependency<Embassy, DeadlineOnly>` statics
#   deadline-firmware-full    the one-line call in full mode: a retry and a hedge after the
#                             live p95 fire in its faults case
#   deadline-firmware-driver  the core's sans-IO driver, `Driver::deadline_only`
#
# runs each on its QEMU board (micro:bit, MPS2-AN385, MPS2-AN386) under `timeout`, and fails
# unless the firmware says its trace matched (exit status 0) and the trace holds the worked
# example's figures (and, in full mode, the retry and the hedge). Then prints, per binary and
# target, flash, static RAM, the library's statics, the library's code (deadline-core and
# deadline-embassy, Rust core code inlined into them counted as theirs), one call's future,
# the request's future and the peak stack, and the code size of the core's decisions
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
BINS=(deadline-firmware deadline-firmware-full deadline-firmware-driver)
TARGET_DIR=${CARGO_TARGET_DIR:-target}

# Size budgets, in bytes, on every target; the script fails when a figure exceeds one (a "-"
# is no budget). The library's statics: the Dependency statics and the adapter's own, with
# portable-atomic's lock table if one were linked. Library code: deadline-core and
# deadline-embassy's .text, Rust core code inlined into them counted as theirs. The call's
# future: one Dependency::run call's, its attempt one embassy timer. The request's future: the
# whole handler's. The one-line call's targets: 1.5 KiB of statics (three dependencies, live
# hedging included), 4 KiB of code deadline-only and 10 KiB in full mode, a 256-byte call
# future deadline-only; the full call's future has no target and its budget is today's figure
# (680 B) with 40 bytes, about 6%, to spare; the sans-IO driver keeps its earlier targets (6 KiB, a 512-byte
# request future).
#                  binary                    statics  code  call  request
BUDGETS=(
  "deadline-firmware          1536   4096   256   -"
  "deadline-firmware-full     1536  10240   720   -"
  "deadline-firmware-driver      -   6144     -   512"
)
# Code that must not be linked, as "file function" patterns of the functions in the inline
# chains of the binary's code (scripts/firmware-size.sh, FUNCTIONS_OUT): deadline-only calls
# link no retry, backoff, jitter (nor the runtime's random source), hedge, live hedge delay,
# quantile, budget or breaker code;
# a full call whose dependencies have no breaker links none of the breaker's slow paths.
DEADLINE_ONLY_UNLINKED='deadline-core/src/(retry|backoff|rng|hedge|quantile|retry_budget|breaker)\.rs |deadline-embassy/src/entropy\.rs |deadline-core/src/drive/followups\.rs |deadline-core/src/histogram\.rs quantile|deadline-core/src/dependency/latency\.rs (refresh|delay) |live_hedge_delay '
UNLINKED_deadline_firmware=$DEADLINE_ONLY_UNLINKED
UNLINKED_deadline_firmware_driver=$DEADLINE_ONLY_UNLINKED
UNLINKED_deadline_firmware_full='deadline-core/src/breaker\.rs (try_acquire_from|record_slow|record_call|record_probe|abandon_probe|stamp|pending|trips) '

# Lines of the trace every binary must print: the worked example's figures, both cases.
EXPECT=(
  '  115 ms  C  called, timeout 60 ms'
  '  160 ms  response sent: 200'
  '  156 ms  C  skipped: 24 ms left for it < its 25 ms floor; fallback used'
  '  176 ms  response sent: 200'
  'trace matches the worked example'
)
# And, in full mode, parts of lines that show the retry and the hedge made.
EXPECT_FULL=(
  'A  answered after 1 retry'
  'B  answered by its hedge (1 hedge sent)'
  ', its live p95'
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

RUNS=$(mktemp -d)
trap 'rm -rf "$RUNS"' EXIT
for t in "${TARGETS[@]}"; do
  for b in "${BINS[@]}"; do
    step "run on QEMU: $b, $t"
    out="$RUNS/$t.$b"
    # The runner (.cargo/config.toml) picks the board; the binary is built, so `timeout`
    # bounds the run itself: a hang fails with status 124.
    start=$(date +%s%N)
    status=0
    timeout 60 cargo run --locked --release --target "$t" --bin "$b" >"$out" 2>&1 || status=$?
    end=$(date +%s%N)
    cat "$out"
    echo "QEMU run: $(((end - start) / 1000000)) ms (with cargo's start-up), exit status $status"
    if [ "$status" -ne 0 ]; then
      echo "firmware: $b on $t: the run failed (exit status $status)" >&2
      exit 1
    fi
    for line in "${EXPECT[@]}"; do
      if ! grep -qxF -- "$line" "$out"; then
        echo "firmware: $b on $t: the trace lacks the line: $line" >&2
        exit 1
      fi
    done
    if [ "$b" = deadline-firmware-full ]; then
      for part in "${EXPECT_FULL[@]}"; do
        if ! grep -qF -- "$part" "$out"; then
          echo "firmware: $b on $t: the trace lacks: $part" >&2
          exit 1
        fi
      done
    fi
  done
done

# The figure `name: N bytes` the firmware printed.
printed() { sed -n "s/^$2: \([0-9]*\) bytes.*/\1/p" "$1" | tail -n 1; }
# The size of each object in static RAM (.data, .bss, .uninit), with its demangled name.
ram_objects() {
  local sections
  sections=$(readelf -S --wide "$1" | awk '{ sub(/^ *\[ *([0-9]+)\] */, "&|") } { split($0, a, "|"); n = a[1]; gsub(/[^0-9]/, "", n); split(a[2], f, " ") } f[1] ~ /^\.(data|bss|uninit)$/ { printf "%s ", n }')
  readelf -s --wide -C "$1" | awk -v secs=" $sections" '$4 == "OBJECT" && index(secs, " " $7 " ") { s = $3; a = $2; $1 = $2 = $3 = $4 = $5 = $6 = $7 = ""; sub(/^ +/, ""); print s, a, $0 }'
}
# The bytes of the object at `addr` (hex) of `size` that are not zero in its initial value
# (copied from flash at start-up for an object in .data; all zero for one in .bss).
nonzero() {
  local elf=$1 addr=$((16#$2)) size=$3 sec_addr sec_off sec_size
  read -r sec_addr sec_off sec_size < <(readelf -S --wide "$elf" | awk '{ sub(/^ *\[ *[0-9]+\] */, "") } $1 == ".data" { print $3, $4, $5 }')
  sec_addr=$((16#$sec_addr)); sec_off=$((16#$sec_off)); sec_size=$((16#$sec_size))
  if [ "$addr" -lt "$sec_addr" ] || [ "$addr" -ge $((sec_addr + sec_size)) ]; then
    echo 0
    return
  fi
  od -An -v -tu1 -j $((sec_off + addr - sec_addr)) -N "$size" "$elf" \
    | awk '{ for (i = 1; i <= NF; i++) if ($i != 0) n++ } END { print n + 0 }'
}

step "sizes"
FIGURES="$RUNS/figures"
: >"$FIGURES"
for t in "${TARGETS[@]}"; do
  for b in "${BINS[@]}"; do
    elf="$TARGET_DIR/$t/release/$b"
    report=$(FUNCTIONS_OUT="$RUNS/$t.$b.functions" bash ../scripts/firmware-size.sh "$elf")
    echo "$report"
    # The library's statics: the `Dependency` statics (A, B and C), the core's and the
    # adapter's own, and portable-atomic's lock table if anything linked it.
    objects=$(ram_objects "$elf")
    deps=$(echo "$objects" | awk '$3 ~ /::[ABC]$/' || true)
    own=$(echo "$objects" | awk '$3 ~ /^deadline_(core|embassy)::/' || true)
    locks=$(echo "$objects" | awk '$3 ~ /^portable_atomic::/ { s += $1 } END { print s + 0 }')
    statics=$(printf '%s\n%s\n' "$deps" "$own" | awk 'NF { s += $1 } END { print s + 0 }')
    statics=$((statics + locks))
    echo "  the library's statics: $statics B (portable-atomic's lock table: $locks B)"
    while read -r size addr name; do
      [ -n "$size" ] || continue
      echo "    $size B  $name ($(nonzero "$elf" "$addr" "$size") of them not zero)"
    done <<<"$(printf '%s\n%s\n' "$deps" "$own")"
    library=$(echo "$report" | awk '$1 ~ /^deadline-(core|embassy)$/ && $3 == "B" { n = 0; line = $0; while (match(line, /[0-9]+ B/)) { v[++n] = substr(line, RSTART, RLENGTH - 2); line = substr(line, RSTART + RLENGTH) } s += v[2] } END { print s + 0 }')
    ram=$(echo "$report" | sed -n 's/^  static RAM *\([0-9]*\) B.*/\1/p')
    flash=$(echo "$report" | sed -n 's/^  flash *\([0-9]*\) B.*/\1/p')
    out="$RUNS/$t.$b"
    stack=$(sed -n 's/^peak stack: \([0-9]*\) of.*/\1/p' "$out")
    call=$(printed "$out" 'call future')
    request=$(printed "$out" 'request future')
    # A figure not read stays in its column as `-`, so that the others keep theirs: the
    # checks below fail on it where the figure has a budget, and on flash, RAM and stack
    # always.
    echo "$b $t ${flash:--} ${ram:--} $statics $locks $library ${call:--} ${request:--} ${stack:--}" >>"$FIGURES"
  done
done

step "figures: flash, static RAM (all of it; the library's statics, of them portable-atomic's lock table), library code (deadline-core + deadline-embassy, Rust core inlined into them counted), one call's future, the request's future, peak stack"
for b in "${BINS[@]}"; do
  echo "$b"
  awk -v b="$b" '$1 == b { printf "  %-22s flash %6s B  static RAM %5s B (library %5d B, lock table %4d B)  library code %5d B  call future %4s B  request future %4s B  stack %4s B\n", $2, $3, $4, $5, $6, $7, $8, $9, $10 }' "$FIGURES"
done

step "budgets and code that must not be linked"
FAILED=0
over() { echo "firmware: $*" >&2; FAILED=1; }
while read -r b t flash ram statics locks library call request stack; do
  read -r _ b_statics b_code b_call b_request < <(printf '%s\n' "${BUDGETS[@]}" | awk -v b="$b" '$1 == b')
  check() { # figure budget what
    if [ "$2" = - ]; then
      return
    fi
    case "$1" in
      '' | *[!0-9]*) over "$b on $t: $3 was not measured ('$1')" ;;
      *) if [ "$1" -gt "$2" ]; then over "$b on $t: $3 $1 B > its budget of $2 B"; fi ;;
    esac
  }
  check "$statics" "$b_statics" "the library's statics"
  check "$library" "$b_code" "library code"
  check "$call" "$b_call" "one call's future"
  check "$request" "$b_request" "the request's future"
  for figure in "$flash" "$ram" "$stack"; do
    case "$figure" in
      '' | *[!0-9]*)
        over "$b on $t: flash, static RAM or peak stack not measured ($flash, $ram, $stack)"
        break
        ;;
    esac
  done
  if [ "$locks" -ne 0 ]; then
    over "$b on $t: portable-atomic's lock table is linked ($locks B of static RAM)"
  fi
  # With no code attributed to the library (line tables gone, paths that no longer match),
  # every figure above would read 0 and every check pass: that is a failure of its own.
  if [ "$library" = 0 ] || [ ! -s "$RUNS/$t.$b.functions" ]; then
    over "$b on $t: no code attributed to deadline-core or deadline-embassy (DWARF line tables?)"
    continue
  fi
  var="UNLINKED_${b//-/_}"
  linked=$(grep -E -- "${!var}" "$RUNS/$t.$b.functions" | cut -d' ' -f1-2 | sort -u || true)
  if [ -n "$linked" ]; then
    over "$b on $t: links code it must not: $(echo "$linked" | tr '\n' ';')"
  fi
done <"$FIGURES"
if [ "$FAILED" -ne 0 ]; then
  exit 1
fi
echo "every figure within its budget; no lock table; no code linked that must not be"

step "thumbv6m with portable-atomic's critical-section backend instead (deadline-firmware)"
# The other choice a thumbv6m binary has (see deadline-core's docs): atomics in critical
# sections, here cortex-m's. Its own target directory, so that the binaries measured above stay.
CS_DIR="$TARGET_DIR/critical-section-atomics"
CARGO_TARGET_DIR="$CS_DIR" cargo build --locked --release --target thumbv6m-none-eabi \
  --no-default-features --features critical-section-atomics --bin deadline-firmware
out="$RUNS/critical-section"
status=0
CARGO_TARGET_DIR="$CS_DIR" timeout 60 cargo run --locked --release --target thumbv6m-none-eabi \
  --no-default-features --features critical-section-atomics --bin deadline-firmware >"$out" 2>&1 || status=$?
tail -n 4 "$out"
if [ "$status" -ne 0 ] || ! grep -qxF 'trace matches the worked example' "$out"; then
  echo "firmware: deadline-firmware with critical-section atomics: the run failed (exit status $status)" >&2
  exit 1
fi

step "code size of deadline-core's decisions (thumbv7em-none-eabihf)"
bash ../scripts/core-size.sh

echo
echo "the firmware ran on every target and its trace matched the worked example"
