#!/usr/bin/env bash
# The propagation model's four strategies on real services: a client, an API (axum), an order
# service (axum) and PostgreSQL on loopback, each strategy beside `deadline sim`'s figures.
#
#   bash scripts/chain.sh                # 2 000 requests per strategy at 0%, 5% and 100% stalls
#                                        # (about 13 minutes; BENCHMARKS.md, "What propagation saves")
#   bash scripts/chain.sh --requests 300 --stall-rate 0.05 --check   # the short run CI makes
#
# Starts a throwaway PostgreSQL that logs every statement (scripts/postgres.sh start-logged),
# whose log is the benchmark's account of the database's work, and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
pg_env=$(bash scripts/postgres.sh start-logged) || { echo "chain.sh: PostgreSQL did not start (scripts/postgres.sh start-logged failed)" >&2; exit 1; }
eval "$pg_env"
trap 'bash scripts/postgres.sh stop "$DEADLINE_PG_DIR"' EXIT
cargo build -p deadline-load --release --bin chain
timeout 3600 cargo run -q -p deadline-load --release --bin chain -- "$@"
