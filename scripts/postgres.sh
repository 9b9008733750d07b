#!/usr/bin/env bash
# A throwaway PostgreSQL server for the integration tests and the services example: initdb
# into a temporary folder, on a loopback port, as an unprivileged user (PostgreSQL refuses
# to run as root), with trust authentication on loopback only.
#
#   eval "$(bash scripts/postgres.sh start)"   # exports DEADLINE_TEST_DATABASE_URL and
#                                              # DEADLINE_PG_DIR
#   bash scripts/postgres.sh stop "$DEADLINE_PG_DIR"
#
#   bash scripts/postgres.sh start-tls CERT KEY  # the same, but a server that accepts TLS
#                                                # connections alone, with this certificate
#                                                # and key (PEM): `ssl = on`, and `hostssl`
#                                                # the one line of pg_hba.conf
#
#   eval "$(bash scripts/postgres.sh start-logged)"  # the same as start, and the server logs
#                                                    # every statement, its duration and its end
#                                                    # (for the chain benchmark, scripts/chain.sh),
#                                                    # each line prefixed '%n [%p] '; also exports
#                                                    # DEADLINE_PG_LOG, the log's path
#
# Needs PostgreSQL's server programs (Debian: `apt-get install -y postgresql`).
set -euo pipefail

bindir() {
  if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ]; then
      echo "$dir"
      return
    fi
  done
  command -v initdb >/dev/null && dirname "$(command -v initdb)" && return
  echo "postgres.sh: no initdb found; install PostgreSQL (apt-get install -y postgresql)" >&2
  exit 1
}

# Runs a command as the unprivileged user when we are root, as ourselves otherwise.
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

start() {
  local cert=${1:-} key=${2:-} bin dir port log tls="" logged=${STATEMENT_LOG:-}
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/deadline-pg.XXXXXX")
  if [ "$(id -u)" -eq 0 ]; then
    if ! id "$PG_USER" >/dev/null 2>&1; then
      useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    fi
    chown "$PG_USER" "$dir"
  fi
  as_user "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    exit 1
  }
  if [ -n "$logged" ]; then
    # Every statement when it starts and its duration when it ends, each line with the time as
    # a Unix epoch in milliseconds and the backend's process id; room for the connections a
    # chain whose queries stall holds at once.
    cat >>"$dir/data/postgresql.conf" <<'CONF'
log_statement = 'all'
log_min_duration_statement = 0
log_line_prefix = '%n [%p] '
max_connections = 300
CONF
  fi
  if [ -n "$cert" ]; then
    cp "$cert" "$dir/data/server.crt"
    cp "$key" "$dir/data/server.key"
    chmod 600 "$dir/data/server.key"
    if [ "$(id -u)" -eq 0 ]; then
      chown "$PG_USER" "$dir/data/server.crt" "$dir/data/server.key"
    fi
    # TLS over TCP, and nothing else: no plaintext line, no Unix socket line.
    echo "hostssl all all 127.0.0.1/32 trust" >"$dir/data/pg_hba.conf"
    tls="-c ssl=on"
  fi
  log="$dir/server.log"
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 20000))
    if as_user "$bin/pg_ctl" -D "$dir/data" -l "$log" -w -t 30 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off $tls" start >/dev/null 2>&1; then
      echo "export DEADLINE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
      echo "export DEADLINE_PG_DIR=$dir"
      if [ -n "$logged" ]; then
        echo "export DEADLINE_PG_LOG=$log"
      fi
      return
    fi
  done
  cat "$log" >&2 || true
  echo "postgres.sh: the server did not start" >&2
  exit 1
}

stop() {
  local dir=${1:?usage: postgres.sh stop DIR}
  [ -d "$dir/data" ] || exit 0
  as_user "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

PG_USER=${DEADLINE_PG_USER:-postgres}
case "${1:-}" in
  start) start ;;
  start-logged) STATEMENT_LOG=1 start ;;
  start-tls) start "${2:?usage: postgres.sh start-tls CERT KEY}" "${3:?usage: postgres.sh start-tls CERT KEY}" ;;
  stop) stop "${2:-}" ;;
  *)
    echo "usage: postgres.sh start | start-logged | start-tls CERT KEY | stop DIR" >&2
    exit 2
    ;;
esac
