#!/usr/bin/env bash
# Ranks that claim different hosts (LOOM_HOST_ID, or a LOOM_TOPO_FILE) use tcp between hosts and
# shm inside a host, the ring enters each host once, LOOM_TRANSPORTS overrides the choice, and
# every result stays exact. /dev/shm holds no loom segment afterwards.
# Usage: bash fake_hosts.sh BIN_DIR
set -u
BIN=${1:?usage: fake_hosts.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

# job NAME N HOSTFN EXTRA_ENV...: starts N ranks by hand; HOSTFN r prints rank r's host id.
job() {
  local name=$1 n=$2 hostfn=$3
  shift 3
  local port pids=()
  port=$(free_port)
  for ((r = 0; r < n; r++)); do
    env LOOM_RANK=$r LOOM_WORLD_SIZE=$n LOOM_ROOT=127.0.0.1:$port LOOM_TIMEOUT=60s \
      LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=INIT LOOM_HOST_ID="$($hostfn $r)" "$@" \
      timeout 120 "$BIN/loom-perf" allreduce -b 8 -e 4M -f 16 -n 2 -w 1 >"$TMP/$name.$r" 2>&1 &
    pids+=($!)
  done
  perf_job_ok "$name: job failed" "$TMP/$name" "${pids[@]}" || return 1
  if awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' "$TMP/$name.0" | grep -q .; then
    fail "$name: wrong results"
  fi
  return 0
}
two_hosts() { echo "host$(($1 / 2))"; }
one_host() { echo "same"; }

# expect NAME RANK PEER TRANSPORT: rank's log says it reaches peer via transport.
expect() {
  if ! grep -q "rank $2: peer $3 on .* via $4" "$TMP/$1.$2"; then
    fail "$1: rank $2 should reach peer $3 via $4"
    grep "via" "$TMP/$1.$2" >&2
  fi
}

if job hosts 4 two_hosts; then
  expect hosts 0 1 shm; expect hosts 0 2 tcp; expect hosts 1 3 tcp; expect hosts 2 3 shm
  grep -q "ring 0 1 | 2 3" "$TMP/hosts.0" || fail "hosts: ring should enter each host once"
  echo "ok: two fake hosts via LOOM_HOST_ID: shm inside, tcp across"
fi

if job forced 3 one_host LOOM_TRANSPORTS=tcp; then
  expect forced 0 1 tcp; expect forced 1 2 tcp
  echo "ok: LOOM_TRANSPORTS=tcp forces the network path on one host"
fi

# A topology file places ranks 0 and 2 on one host, 1 and 3 on another: the ring follows it.
cat >"$TMP/topo.json" <<'JSON'
{"version": 1,
 "ranks": [{"rank": 0, "host_id": "a"}, {"rank": 1, "host_id": "b"},
           {"rank": 2, "host_id": "a"}, {"rank": 3, "host_id": "b"}],
 "hosts": [{"host_id": "a"}, {"host_id": "b"}]}
JSON
if job file 4 one_host LOOM_TOPO_FILE="$TMP/topo.json" LOOM_TOPO_DUMP_FILE="$TMP/dump.json"; then
  expect file 0 2 shm; expect file 0 1 tcp; expect file 1 3 shm
  grep -q "ring 0 2 | 1 3" "$TMP/file.0" || fail "file: ring should be 0 2 | 1 3"
  grep -q '"host_id"' "$TMP/dump.json" || fail "file: LOOM_TOPO_DUMP_FILE not written"
  echo "ok: LOOM_TOPO_FILE drives transports and ring; LOOM_TOPO_DUMP_FILE written"
fi

# Only this test's communicators count: other jobs on the machine may be setting up right now.
ids=$(cat "$TMP"/*.0 | grep -oE "communicator [0-9a-f]{16} ready" | cut -d' ' -f2 | sort -u)
[[ -n $ids ]] || fail "no communicator id in the logs: cannot check /dev/shm"
for id in $ids; do
  if ls /dev/shm | grep -q "^loom-$id-"; then
    fail "loom segments of communicator $id left in /dev/shm: $(ls /dev/shm | grep "^loom-$id-")"
  fi
done
[[ $failures -eq 0 ]] || { echo "fake_hosts: $failures failure(s)" >&2; exit 1; }
echo "fake_hosts: all passed"
