#!/usr/bin/env bash
# The chain of real services on loopback: client -> gateway (axum) -> service (tonic) ->
# PostgreSQL, each hop printing the time left it got.
#
#   bash scripts/services.sh
#
# Uses the PostgreSQL at DEADLINE_TEST_DATABASE_URL, or starts a throwaway one
# (scripts/postgres.sh) and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DEADLINE_TEST_DATABASE_URL:-}" ]; then
  pg_env=$(bash scripts/postgres.sh start) || { echo "services.sh: PostgreSQL did not start (scripts/postgres.sh start failed)" >&2; exit 1; }
  eval "$pg_env"
  trap 'bash scripts/postgres.sh stop "$DEADLINE_PG_DIR"' EXIT
fi
cargo build -p deadline-tokio --example services --all-features
timeout 120 cargo run -q -p deadline-tokio --example services --all-features
