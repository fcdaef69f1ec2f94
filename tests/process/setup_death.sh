#!/usr/bin/env bash
# A rank that dies while the communicator is being created is named at once, not at
# LOOM_TIMEOUT: 4 ranks, rank 2 never starts (so creation cannot finish), rank 3 joins and is
# killed (SIGKILL) 2 s later. Ranks 0 and 1 must fail within a few seconds (LOOM_TIMEOUT is 120 s)
# naming rank 3. Then the same with rank 0, which serves the rendezvous store, killed.
# Usage: bash setup_death.sh BIN_DIR
set -u
BIN=${1:?usage: setup_death.sh BIN_DIR}
PROG=$BIN/loom-test-last-call
[[ -x $PROG ]] || { echo "FAIL: $PROG is missing" >&2; exit 1; }
TMP=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
failures=0
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/out.*; do echo "  --- $f" >&2; tail -5 "$f" | sed 's/^/  /' >&2; done
  failures=$((failures + 1))
}

case_victim() {  # case_victim VICTIM SURVIVORS...
  local victim=$1
  shift
  local root
  root=127.0.0.1:$(free_port)
  rm -f "$TMP"/out.*
  pids=()
  local start
  start=$(date +%s%3N)
  for r in "$@" "$victim"; do
    local kill_after=600
    [[ $r == "$victim" ]] && kill_after=2
    LOOM_RANK=$r LOOM_WORLD_SIZE=4 LOOM_ROOT=$root LOOM_TIMEOUT=120s \
      timeout -s KILL $kill_after "$PROG" bcast >"$TMP/out.$r" 2>&1 &
    pids+=($!)
    [[ $r == 0 ]] && sleep 0.3  # rank 0 starts the store first
  done
  local i=0
  for r in "$@"; do
    wait "${pids[$i]}" && fail "victim $victim: rank $r succeeded without rank 2"
    i=$((i + 1))
    grep -q "rank $victim" "$TMP/out.$r" || fail "victim $victim: rank $r does not name rank $victim"
  done
  local took=$(($(date +%s%3N) - start))
  echo "victim $victim: survivors failed after ${took} ms"
  ((took < 15000)) || fail "victim $victim: survivors took ${took} ms (LOOM_TIMEOUT is 120 s)"
  kill -9 "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
}

case_victim 3 0 1
grep -q "went away while the communicator was being created" "$TMP/out.0" ||
  fail "rank 0 does not say that rank 3 died during creation"
case_victim 0 1 3
[[ $failures -eq 0 ]] || exit 1
echo "setup_death: passed"
