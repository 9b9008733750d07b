#!/usr/bin/env bash
# Runs deadline-tokio's PostgreSQL fault tests (tests/postgres_faults.rs, ignored by default)
# against a throwaway PostgreSQL server on loopback: initdb in a temporary directory, the
# server on 127.0.0.1 at a free port, stopped and removed on exit.
#
#   bash scripts/postgres-faults.sh
#
# Needs PostgreSQL's server binaries (Debian: `apt-get install postgresql`); PG_BIN names
# their directory if `initdb` is not on PATH. As root, the server runs as the `postgres` user.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_BIN=${PG_BIN:-$(dirname "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")}
DATA=$(mktemp -d)
PORT=${PG_PORT:-55432}
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" -eq 0 ]; then chown postgres "$DATA"; fi
cleanup() {
  as_pg "$PG_BIN/pg_ctl" -D "$DATA/db" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$DATA"
}
trap cleanup EXIT

as_pg "$PG_BIN/initdb" -D "$DATA/db" -U postgres --auth=trust >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$DATA/db" -l "$DATA/log" -w -t 30 \
  -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DATA" start >/dev/null

DEADLINE_PG="host=127.0.0.1 port=$PORT user=postgres dbname=postgres" \
  cargo test -p deadline-tokio --test postgres_faults -- --ignored --nocapture
