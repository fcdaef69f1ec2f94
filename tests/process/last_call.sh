#!/usr/bin/env bash
# A rank's last collective is safe to be its last call: 8 ranks that broadcast one float from
# rank 0 and exit at once must all succeed, however early rank 0 (which serves the rendezvous
# store) leaves; likewise a reduce to another root, and repeated split() into groups without
# rank 0 (whose stores must not depend on rank 0's process). Repeated runs over shm and tcp;
# then rank 0's store must not keep the finished communicators' keys (checked in unit tests).
# Usage: bash last_call.sh BIN_DIR
set -u
BIN=${1:?usage: last_call.sh BIN_DIR}
PROG=$BIN/loom-test-last-call
[[ -x $PROG ]] || { echo "FAIL: $PROG is missing" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
runs=0

job() {  # job TRANSPORTS RANKS ARGS...: one loomrun job, which must exit 0
  local transports=$1 n=$2
  shift 2
  runs=$((runs + 1))
  if ! LOOM_TRANSPORTS=$transports LOOM_TIMEOUT=60s timeout 120 "$BIN/loomrun" -n "$n" "$PROG" "$@" \
    >"$TMP/out" 2>&1; then
    failures=$((failures + 1))
    echo "FAIL: LOOM_TRANSPORTS=$transports loomrun -n $n $(basename "$PROG") $*" >&2
    grep -v '^\[[0-9]*\] *$' "$TMP/out" | tail -12 | sed 's/^/  /' >&2
  fi
}

for transports in shm tcp; do
  for ((i = 0; i < ${LAST_CALL_REPEAT:-8}; i++)); do job $transports 8 bcast; done
  for ((i = 0; i < 3; i++)); do job $transports 8 reduce 5; done
  for ((i = 0; i < 3; i++)); do job $transports 4 split 4; done
  job $transports 7 bcast
done
[[ $failures -eq 0 ]] || { echo "last_call: $failures of $runs jobs failed" >&2; exit 1; }
echo "last_call: all $runs jobs passed"
