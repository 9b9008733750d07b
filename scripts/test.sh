#!/usr/bin/env bash
# Every check and every test of the workspace, as CI runs them.
#
#   bash scripts/test.sh
#
# Needs only rustup, on a fresh machine, and root (a container or a virtual machine): it adds
# clippy, rustfmt, the embedded targets, the declared and nightly toolchains; installs the
# system packages the builds and tests use when they are missing (on Debian or Ubuntu:
# build-essential, the C compiler and linker that rustup does not ship and that cargo links
# with, ring and libfuzzer build with; binutils, whose readelf the firmware's size check
# reads with; postgresql, whose server the database tests start; iproute2, whose `ip` makes
# the network-fault suite's namespace; qemu-system-arm, which runs the firmware; valgrind,
# which counts the benchmarks' instructions); starts a throwaway PostgreSQL; and ends with
# the firmware under QEMU. What it cannot install it names, and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The network-fault tests make a network namespace and a veth pair (CAP_NET_ADMIN), and a
# missing package is installed with apt-get: both take root. Say so now, not partway through.
if [ "$(id -u)" != 0 ]; then
  echo "test.sh: run it as root (in a container or a virtual machine, as CI does): the network-fault tests make a network namespace, and missing packages are installed with apt-get" >&2
  exit 1
fi

step "system packages"
# Each missing package, by the command or file that says it is installed; then one update
# and one install for them all, waiting for the package lock (a machine just booted may be
# updating itself).
MISSING=()
need() {
  local package=$1 present=$2
  if ! compgen -G "$present" >/dev/null && ! command -v "$present" >/dev/null; then
    MISSING+=("$package")
  fi
}
need build-essential cc
need build-essential c++
need binutils readelf
need postgresql '/usr/lib/postgresql/*/bin/initdb'
need iproute2 ip
need qemu-system-arm qemu-system-arm
need valgrind valgrind
if [ ${#MISSING[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "test.sh: ${MISSING[*]} missing and cannot be installed here (needs apt-get)" >&2
    exit 1
  fi
  # (`update` may not wait for its own lock: it is tried again, 10 times, 30 s apart.)
  for try in 1 2 3 4 5 6 7 8 9 10; do
    if apt-get -o DPkg::Lock::Timeout=600 update -qq; then break; fi
    if [ "$try" = 10 ]; then
      echo "test.sh: apt-get update failed 10 times" >&2
      exit 1
    fi
    sleep 30
  done
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${MISSING[@]}"
fi
# Root may still lack the right to make a network namespace (a container without
# CAP_NET_ADMIN and CAP_SYS_ADMIN); and the firmware runs on QEMU's mps2-an386 board, which
# QEMU has from 6.0. Both are found out now, not partway through.
probe="deadline-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "test.sh: cannot make a network namespace (ip netns add), which the network-fault tests need: in a container, run it with --cap-add NET_ADMIN --cap-add SYS_ADMIN (or --privileged)" >&2
  exit 1
fi
ip netns del "$probe"
# (The list is read whole: `grep -q` would stop at the match, and QEMU, still writing, would
# fail the pipeline with SIGPIPE.)
boards=$(qemu-system-arm -machine help)
if ! grep '^mps2-an386 ' <<<"$boards" >/dev/null; then
  echo "test.sh: this qemu-system-arm has no mps2-an386 board, which runs the firmware: QEMU 6.0 or later is needed ($(qemu-system-arm --version | head -n 1))" >&2
  exit 1
fi

# Every test run's output is kept here too, to add up the results at the end.
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
# Each test run is bounded (40 minutes, its build included): a test that hangs fails the run
# (exit status 124) instead of stalling it until CI's own limit.
TEST_LIMIT=2400
tests() { timeout -k 60 "$TEST_LIMIT" cargo test "$@" 2>&1 | tee -a "$RESULTS"; }

# The library crates, whose features all combine. The examples crate picks one runtime per
# build (two at once is a compile_error!), so it is checked once per runtime.
CRATES=(deadline-core deadline-tokio deadline-std deadline-embassy deadline-testkit deadline-cli deadline-bench deadline-readme)
# The crates published to crates.io (and so built by docs.rs); the others say `publish = false`.
PUBLISHED=(deadline-core deadline-tokio deadline-std deadline-embassy)
RUNTIMES=(tokio async-std smol embassy)
TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)

step "toolchain components and embedded targets"
rustup component add clippy rustfmt
rustup target add "${TARGETS[@]}"

step "format"
cargo fmt --all -- --check

step "deadline-core reads top down: no module uses one above it"
bash scripts/layers.sh

step "clippy: -D warnings, all targets, all features"
for c in "${CRATES[@]}"; do
  cargo clippy -p "$c" --all-targets --all-features -- -D warnings
done
for rt in "${RUNTIMES[@]}"; do
  cargo clippy -p deadline-examples --all-targets --no-default-features --features "$rt" -- -D warnings
done
# deadline-tokio with no feature and with each feature alone, as the README has a user add it
# (`tonic`, `sqlx`): code behind one feature that leans on another is caught here, not in the
# user's build.
cargo clippy -p deadline-tokio --no-default-features -- -D warnings
for f in tower axum tonic reqwest hyper-util postgres sqlx tracing; do
  cargo clippy -p deadline-tokio --no-default-features --features "$f" -- -D warnings
done
# The reliability crates; and deadline-core under `--cfg loom` (loom's atomics), in a target
# directory of its own so that the two builds do not replace each other.
cargo clippy -p deadline-loom --all-targets --all-features -- -D warnings
cargo clippy -p deadline-load --all-targets --all-features -- -D warnings
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo clippy -p deadline-loom --all-targets -- -D warnings

step "rustdoc: -D warnings"
for c in "${CRATES[@]}"; do
  RUSTDOCFLAGS="-D warnings" cargo doc -p "$c" --no-deps --all-features
done
RUSTDOCFLAGS="-D warnings" cargo doc -p deadline-examples --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p deadline-loom --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p deadline-load --no-deps
# And as a user's own `cargo doc` builds a published crate: its default features only.
for c in "${PUBLISHED[@]}"; do
  RUSTDOCFLAGS="-D warnings" cargo doc -p "$c" --no-deps
done

step "rustdoc as docs.rs builds it: nightly, --cfg docsrs, every published crate"
# docs.rs builds on nightly with `--cfg docsrs`, which turns on `feature(doc_cfg)` in each
# published crate: a feature gate nightly has removed fails there and nowhere else.
rustup run nightly rustc --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
for c in "${PUBLISHED[@]}"; do
  RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo +nightly doc -p "$c" --no-deps --all-features
done

step "the declared Rust version (rust-version in Cargo.toml) builds the library crates"
# The oldest toolchain the crates declare, with every feature; in a target directory of its
# own. (Its lints differ from stable's: warnings are stable's business, checked above; its
# `unreachable_pub` does not see the sealed traits' re-exports.)
MSRV=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
rustup run "$MSRV" rustc --version >/dev/null 2>&1 || rustup toolchain install "$MSRV" --profile minimal
RUSTFLAGS="-A unreachable-pub" CARGO_TARGET_DIR=target/msrv cargo +"$MSRV" check --locked -p deadline-core -p deadline-std \
  -p deadline-tokio -p deadline-embassy --all-features

step "no_std builds for ${TARGETS[*]}"
CALLERS_RUSTFLAGS=${RUSTFLAGS-}
for t in "${TARGETS[@]}"; do
  # thumbv6m has no compare-and-swap: the final binary picks how portable-atomic makes the
  # core's atomics (here its `unsafe-assume-single-core`, as a cfg; firmware/ builds with it
  # and with `critical-section`).
  if [ "$t" = thumbv6m-none-eabi ]; then
    export RUSTFLAGS="${CALLERS_RUSTFLAGS:+$CALLERS_RUSTFLAGS }--cfg portable_atomic_unsafe_assume_single_core"
  fi
  cargo build -p deadline-core --target "$t"
  cargo build -p deadline-core --target "$t" --features defmt
  cargo build -p deadline-core --target "$t" --features drive,defmt
  cargo build -p deadline-core --target "$t" --features drive,analysis,defmt
  cargo build -p deadline-core --target "$t" --features advice,serde,defmt
  cargo build -p deadline-embassy --target "$t"
  cargo build -p deadline-embassy --target "$t" --features defmt
  # Back to the caller's own flags, if it gave any.
  if [ -n "$CALLERS_RUSTFLAGS" ]; then export RUSTFLAGS=$CALLERS_RUSTFLAGS; else unset RUSTFLAGS; fi
done

step "a throwaway PostgreSQL for the database tests (unless DEADLINE_TEST_DATABASE_URL is set)"
# deadline-tokio's `postgres` tests and the services chain need a live server; without one
# they fail, naming DEADLINE_TEST_DATABASE_URL. scripts/postgres.sh starts one.
if [ -z "${DEADLINE_TEST_DATABASE_URL:-}" ]; then
  pg_env=$(bash scripts/postgres.sh start) || { echo "test.sh: PostgreSQL did not start (scripts/postgres.sh start failed)" >&2; exit 1; }
  eval "$pg_env"
  trap 'rm -f "$RESULTS"; bash scripts/postgres.sh stop "$DEADLINE_PG_DIR"' EXIT
fi

step "tests"
for c in "${CRATES[@]}"; do
  tests -p "$c" --all-features
done
tests -p deadline-examples
# The live advice without feature `metrics` (whose labels allocate): no allocation per call,
# across its checks; and deadline-tokio's allocation count with the advice compiled in.
tests -p deadline-core --features advice,test-util --test advice_alloc
tests -p deadline-tokio --features deadline-core/advice --test alloc
tests -p deadline-load
# The database measurement behind `--ignored` (BENCHMARKS.md: how a query past its deadline
# ends with and without the margin), run once to prove it works.
tests -p deadline-tokio --features postgres --test postgres_race -- --ignored past_its_deadline
# loom: every interleaving of the retry budget, breaker, histogram and counter models, within
# the preemption bound (each model prints how many it explored).
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
  tests -p deadline-loom --test loom --release -- --nocapture
# miri over deadline-core's tests: the one step on nightly, which rustup installs here. The
# library's own tests and the test binaries that take under a minute each under miri; the
# long property suites (the histogram's, the analysis', the budget's and the protections',
# 5 to 27 minutes each under miri) run under miri by hand, with the same command without the
# `--test` list (BENCHMARKS.md, "miri").
rustup toolchain install nightly --profile minimal --component miri,rust-src
MIRI_TESTS=(admit backoff breaker budget_table checkout classify counters deadline_only drive
  drive_breaker envelopes fuzz_wire hedge hostile_pushback lab_preset props_retry record retry
  statement step_back fuzz_protocol zeroed)
# Leaks are not checked: the core allocates nothing, and what these tests allocate is their
# own and test-util's virtual clock, one per thread, leaked on purpose so that a
# `&'static ManualTimer` can be handed out (miri reports it once the test's thread has ended).
PROPTEST_CASES=8 MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-ignore-leaks" \
  timeout -k 60 "$TEST_LIMIT" cargo +nightly miri test -p deadline-core --all-features --lib \
  $(printf -- '--test %s ' "${MIRI_TESTS[@]}") 2>&1 | tee -a "$RESULTS"

step "the checkout example's chain on every runtime (virtual time, then real timers)"
# Each program is built first, then run under `timeout`: a timer that never fires fails the
# run (exit status 124) instead of stalling it. The chain program exits non-zero when a request
# ends otherwise than the worked example says; on virtual time (the default) it also checks the
# instant each response goes out, to the microsecond.
cargo build -p deadline-core --example trace
timeout 120 cargo run -p deadline-core --example trace
# The metrics a dashboard scrapes from a hundred calls on virtual time: it exits non-zero
# unless what the recorder was sent agrees with the dependency's own counters.
cargo build -p deadline-core --example metrics --features metrics,test-util
timeout 120 cargo run -p deadline-core --example metrics --features metrics,test-util
for rt in "${RUNTIMES[@]}"; do
  cargo build -p deadline-examples --bin chain --no-default-features --features "$rt"
  timeout 120 cargo run -p deadline-examples --bin chain --no-default-features --features "$rt"
  timeout 120 cargo run -p deadline-examples --bin chain --no-default-features --features "$rt" -- --real-time
done
# The checkout handler on the one-line call site: one application module, compiled against
# every runtime (tokio on paused time; async-std, smol, plain threads and embassy on their
# own timers), each page checked.
cargo build -p deadline-examples --bin checkout --features async-std,smol,embassy
timeout 120 cargo run -p deadline-examples --bin checkout --features async-std,smol,embassy
cargo build -p deadline-examples --bin nested
timeout 120 cargo run -p deadline-examples --bin nested
# Overload on loopback, the short run: twice the capacity for 3 s, with and without
# DeadlineLayer and admission; it exits non-zero unless every 200 met its deadline and the
# excess was shed with the library, and the queue and the latency grew without it. Then
# with half the callers at 25 ms: it exits non-zero unless the library's 200s were in time
# (all but 1%: an answer made in time now and then reaches the client past so short a
# deadline) and tower's buffer, which does not know the deadlines, served many late.
cargo build -p deadline-load --release
timeout 300 cargo run -p deadline-load --release -- --seconds 3 --rounds 1 --check
timeout 300 cargo run -p deadline-load --release -- --seconds 3 --rounds 1 --short-ms 25 --short-percent 50 --check

step "real services on loopback: client -> axum -> tonic -> PostgreSQL"
bash scripts/services.sh

step "the propagation model's four strategies on real services, run short"
# 300 requests per strategy at 5% stalls, client -> axum -> axum -> PostgreSQL, against a
# throwaway server that logs its statements (the benchmark's account of the database's work).
# It exits non-zero unless the log accounts for every query and the strategies come in the
# order the model predicts; it checks no absolute time. (`bash scripts/chain.sh` alone runs
# 2 000 requests at 0%, 5% and 100% stalls, about 13 minutes: BENCHMARKS.md.)
bash scripts/chain.sh --requests 300 --stall-rate 0.05 --check

step "faults on real sockets: the long command, run short"
# Delay with jitter, 5% loss, a blackholed host (a network namespace the suite makes: root
# and iproute2), a full listen backlog, a peer that never reads, a closed port, between two
# services and PostgreSQL. deadline-tokio's tests above ran it with 10 requests a scenario;
# this runs its command with 3, its outcomes checked (`bash scripts/net-faults.sh` alone runs
# 300, about 7 minutes, and checks the time bound too).
bash scripts/net-faults.sh 3 --outcomes-only

step "benches compile and run once"
cargo bench -p deadline-core -- --test
cargo bench -p deadline-cli -- --test
cargo bench -p deadline-bench -- --test
# The loopback benchmarks, one short round each (about 40 s in all; the figures in
# BENCHMARKS.md come from their long runs): each exits non-zero when a variant got no answer.
cargo build --release -p deadline-bench --bins
for program in server downstream tail; do
  timeout 300 cargo run --release -q -p deadline-bench --bin "$program" -- --quick
done
# The tail of your own (here a 20x tail, as slow answers 40 ms): the options, run once.
timeout 300 cargo run --release -q -p deadline-bench --bin tail -- --quick --slow-ms 40 --slow-percent 2
# Instructions per request over real sockets, under valgrind (a few seconds each): the
# server's, and the front's with its downstream call.
for program in server downstream; do
  timeout 300 cargo run --release -q -p deadline-bench --bin "$program" -- --instructions --quick
done

step "instructions per call: the command, run on two scenarios"
# `bash scripts/instructions.sh` counts every scenario under valgrind for BENCHMARKS.md; here
# a call that is really pending once, the library's beside tokio's timeout.
timeout -k 30 600 bash scripts/instructions.sh tokio_timeout_pending dependency_run_pending

step "fuzz targets: each built with cargo-fuzz and run 10 s from its seeds"
# `bash scripts/fuzz.sh` runs each 10 minutes for BENCHMARKS.md; here each target is built
# with the sanitizer, holds its properties on its seeds and on what it finds in 10 s, and
# exits non-zero on a failing input (kept in fuzz/artifacts/).
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
bash scripts/fuzz.sh 10

step "the firmware under QEMU: the one-line call on a Cortex-M0, M3 and M4F, with size budgets"
bash scripts/firmware.sh 2>&1 | tee -a "$RESULTS"

passed=$(grep -Eo '^test result: ok\. [0-9]+ passed' "$RESULTS" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '^test result: [A-Za-z]+\. [0-9]+ passed; [0-9]+ failed' "$RESULTS" | awk '{s += $6} END {print s + 0}')
echo
echo "every check passed"
echo "tests: $passed passed, $failed failed"
