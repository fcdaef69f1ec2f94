#!/usr/bin/env bash
# LOOM_STATUS_SIGNAL=1: SIGUSR1 makes a rank print every communicator's status (progress,
# failure, failed ranks) to stderr, from a thread (the handler only writes to a self-pipe), and
# the job carries on undisturbed. With LOOM_FLIGHT_DIR, the signalled rank also writes its flight
# record (and only it).
# Usage: bash status_signal.sh BIN_DIR
set -u
BIN=${1:?usage: status_signal.sh BIN_DIR}
# shellcheck source=lib/example_job.sh
source "$(dirname "$0")/lib/example_job.sh"

root=127.0.0.1:$(free_port)
for r in 0 1; do
  LOOM_RANK=$r LOOM_WORLD_SIZE=2 LOOM_ROOT=$root LOOM_STATUS_SIGNAL=1 LOOM_TIMEOUT=60s LOOM_FLIGHT_DIR=$TMP/fr \
    timeout 120 "$EX" 1000000 1024 >"$TMP/out.$r" 2>&1 &
  pids+=($!)
done
wait_for "$TMP/out.1" "rank 1: iteration 3 started" 60 || fail "the job did not start"
if ((failures == 0)); then
  target=$(pgrep -P "${pids[1]}" -f loom-example-shrink || echo "${pids[1]}")
  kill -USR1 "$target"
  wait_for "$TMP/out.1" "loom status (pid $target, on SIGUSR1): 1 communicator" 10 ||
    fail "no status report after SIGUSR1"
  grep -q "rank 1 of 2 (communicator [0-9a-f]*): last submitted #[0-9]*, last completed #" \
    "$TMP/out.1" || fail "the report does not show rank 1's progress"
  grep -q '"reason": "signal"' "$TMP"/fr/loom-flight-*-r1.json 2>/dev/null ||
    fail "rank 1 wrote no flight record on SIGUSR1"
  compgen -G "$TMP/fr/loom-flight-*-r0.json" >/dev/null && fail "rank 0 wrote a flight record"
  # The job carries on: a later iteration starts after the report.
  last=$(grep -o "rank 1: iteration [0-9]* started" "$TMP/out.1" | tail -1 | grep -o "[0-9]* started" | cut -d' ' -f1)
  wait_for "$TMP/out.1" "rank 1: iteration $((last + 3)) started" 30 ||
    fail "the job did not carry on after the report"
  kill -0 "$target" 2>/dev/null || fail "rank 1 ended after SIGUSR1"
  grep -q "loom status" "$TMP/out.0" && fail "rank 0 printed a report it was not asked for"
fi
[[ $failures -eq 0 ]] || exit 1
echo "status_signal: passed"
