#!/usr/bin/env bash
# deadline-core reads top down: each module uses only the modules listed before it, so no
# module cycle can form. The order is the layering of deadline-core/src/lib.rs. Doc comments
# are not read (a doc link is not a dependency). Exits non-zero, naming the file and the
# module, when a module reaches up.
#
#   bash scripts/layers.sh
set -euo pipefail
cd "$(dirname "$0")/../deadline-core/src"

# From the bottom up. drive/, dependency/ and wire/ are one module each, with their own
# order inside. The last seven only gather, under one name per job, the public paths of the
# modules below them.
ORDER=(sync time timer deadline grpc_code error rng outcome quantile manual_clock backoff policy_error dependency_policy
  call_timeout admit wire breaker retry_budget statement call_context plan hedge retry counters histogram latency
  analysis advice snapshot drive trace dependency tonic_status http_status guide
  policy call budget observe run runtime virtual_time)
DRIVE=(flight followups report tally mode event classify runtime thread_deadline scoped attempt course call_machine
  run manual manual_runtime mod)
DEPENDENCY=(latency metrics watch record steps run mod)
WIRE=(error late digits grpc_timeout millis headers protocol response sent propagation answer envelope serve mod)

index() { # index NAME LIST...
  local name=$1 i=0
  shift
  for m in "$@"; do
    if [ "$m" = "$name" ]; then echo "$i"; return; fi
    i=$((i + 1))
  done
  echo "-1"
}

# The modules a file names in code (not in comments): `crate::x::` or `super::x::`.
deps() { # deps FILE PREFIX
  grep -vE '^\s*//' "$1" | grep -oE "(^|[^a-z_:])$2::[a-z_]+::" | sed -E "s/.*$2::([a-z_]+)::/\1/" | sort -u
}

bad=0
for f in *.rs drive/*.rs dependency/*.rs wire/*.rs; do
  case "$f" in
    lib.rs) continue ;;
    drive/*) me=drive ;;
    dependency/*) me=dependency ;;
    wire/*) me=wire ;;
    *) me=${f%.rs} ;;
  esac
  mine=$(index "$me" "${ORDER[@]}")
  if [ "$mine" -lt 0 ]; then
    echo "layers: $f is not in the order; add it to scripts/layers.sh" >&2
    bad=1
    continue
  fi
  for d in $(deps "$f" crate); do
    [ "$d" = "$me" ] && continue
    theirs=$(index "$d" "${ORDER[@]}")
    if [ "$theirs" -lt 0 ] || [ "$theirs" -ge "$mine" ]; then
      echo "layers: $f uses crate::$d, which is not below it" >&2
      bad=1
    fi
  done
  if [ "$me" = drive ] || [ "$me" = dependency ] || [ "$me" = wire ]; then
    case "$me" in
      drive) inner_order=("${DRIVE[@]}") ;;
      dependency) inner_order=("${DEPENDENCY[@]}") ;;
      wire) inner_order=("${WIRE[@]}") ;;
    esac
    inner=$(basename "$f" .rs)
    mine_inner=$(index "$inner" "${inner_order[@]}")
    if [ "$mine_inner" -lt 0 ]; then
      echo "layers: $f is not in $me/'s order; add it to scripts/layers.sh" >&2
      bad=1
    fi
    for d in $(deps "$f" super); do
      theirs=$(index "$d" "${inner_order[@]}")
      if [ "$theirs" -lt 0 ] || [ "$theirs" -ge "$mine_inner" ]; then
        echo "layers: $f uses super::$d, which is not below it in $me/" >&2
        bad=1
      fi
    done
  fi
done
if [ "$bad" -ne 0 ]; then
  exit 1
fi
echo "layers: deadline-core's modules use only the modules below them (${#ORDER[@]} modules, drive/ in ${#DRIVE[@]}, dependency/ in ${#DEPENDENCY[@]}, wire/ in ${#WIRE[@]})"
