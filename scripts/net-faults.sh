#!/usr/bin/env bash
# What happens on a bad network: the network-fault suite (deadline-tokio/tests/net_faults),
# long. A client, a front service (axum with DeadlineLayer) that calls a back service
# through DependencyLayer over hyper-util's client (connecting through connect::Connector),
# and PostgreSQL behind the back; between the front and the back, one fault at a time:
# delay with jitter, 5% loss, a blackholed host, a full listen backlog, a peer that accepts
# and never reads, a closed port, with a healthy network and a slow database to compare.
#
#   bash scripts/net-faults.sh [REQUESTS] [--outcomes-only]   # requests per scenario, 300 by default
#                                                             # (the two in either order)
#
# Prints one line of figures per scenario (BENCHMARKS.md, "What happens on a bad network")
# and exits non-zero if an answer came later than its deadline plus 10 ms (unless
# --outcomes-only: a bound on time is a measurement, for a machine doing nothing else), had a
# status its scenario does not allow, or left a task, a socket, a proxied connection or a
# query behind.
# Needs root and iproute2 (the blackholed host is a network namespace the suite makes and
# deletes), and PostgreSQL's server programs: it uses DEADLINE_TEST_DATABASE_URL, or starts
# a throwaway server (scripts/postgres.sh) and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=300
CHECK_TIME=1
for arg in "$@"; do
  case "$arg" in
    --outcomes-only) CHECK_TIME= ;;
    '' | *[!0-9]* | 0*)
      echo "net-faults: $arg is neither a count of requests (1 or more, no leading zero) nor --outcomes-only" >&2
      exit 2
      ;;
    *) REQUESTS=$arg ;;
  esac
done
if [ -z "${DEADLINE_TEST_DATABASE_URL:-}" ]; then
  pg_env=$(bash scripts/postgres.sh start) || { echo "net-faults.sh: PostgreSQL did not start (scripts/postgres.sh start failed)" >&2; exit 1; }
  eval "$pg_env"
  trap 'bash scripts/postgres.sh stop "$DEADLINE_PG_DIR"' EXIT
fi
cargo test -p deadline-tokio --all-features --test net_faults --no-run
# The bound on the whole run: 8 scenarios, each request at most its deadline (1 s), 5 s
# more for an answer that never comes, and 2 s for what it left to go.
DEADLINE_NET_FAULTS_CHECK_TIME=$CHECK_TIME DEADLINE_NET_FAULTS_REQUESTS=$REQUESTS timeout $((8 * REQUESTS * 8 + 300)) \
  cargo test -p deadline-tokio --all-features --test net_faults -- --nocapture --test-threads=1
