#!/usr/bin/env bash
# Mismatched rooted calls between real processes: 8 ranks under loomrun, rank 0 broadcasts while
# ranks 1-7 reduce to rank 0 (same count), over shm and over tcp. Every message of that call is
# sent eagerly and none is received by a wrong receive, so no header check sees it; every rank
# must still fail with Mismatch naming rank 0 and both calls, far below LOOM_TIMEOUT (60 s here:
# within 8 s), and loomrun must report the failed job. (The ranks are hidden test cases of
# loom-tests: "rooted mismatch: process rank".)
# Usage: bash rooted_mismatch.sh BIN_DIR
set -u
BIN=${1:?usage: rooted_mismatch.sh BIN_DIR}
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_tools "" timeout
need_bins "$BIN" loomrun loom-tests
# shellcheck source=lib/job_output.sh
source "$(dirname "$0")/lib/job_output.sh"

run_job() {
  local transports=$1 n=8 rc=0
  rm -rf "$TMP/sync" && mkdir "$TMP/sync"
  # LOOM_TEST_SYNC_DIR: each rank stays until all have their outcome (rank 0 serves the store).
  LOOM_TEST_SYNC_DIR=$TMP/sync LOOM_TRANSPORTS=$transports LOOM_TIMEOUT=60s \
    timeout 120 "$BIN/loomrun" -n $n --timeout 90s \
    "$BIN/loom-tests" "rooted mismatch: process rank (tests/process/rooted_mismatch.sh)" \
    >"$TMP/out" 2>&1 || rc=$?
  # Each rank's test passes (it got the Mismatch it expects): loomrun exits 0.
  ((rc == 0)) || fail "$transports: loomrun exited $rc"
  for ((r = 0; r < n; r++)); do
    local line ms
    line=$(grep -m1 "^\[$r\] rank $r: " "$TMP/out")
    if [[ -z $line ]]; then fail "$transports: rank $r printed no failure"; continue; fi
    [[ $line == *"rank $r: Mismatch after "* ]] || { fail "$transports: rank $r: not Mismatch: $line"; continue; }
    [[ $line == *"rank 0"* && $line == *"broadcast #1"* && $line == *"reduce #1"* ]] ||
      fail "$transports: rank $r: the error does not name rank 0 and both calls: $line"
    ms=$(sed -E 's/.*Mismatch after ([0-9]+) ms.*/\1/' <<<"$line")
    ((ms <= 8000)) || fail "$transports: rank $r took $ms ms (> 8000) to fail"
    echo "$transports: rank $r: Mismatch after $ms ms"
  done
}

run_job shm
run_job tcp
finish rooted_mismatch
