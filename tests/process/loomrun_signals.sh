#!/usr/bin/env bash
# The rank commands are in single quotes on purpose: the ranks expand them.
# shellcheck disable=SC2016
# Self-checking tests of loomrun's shutdown paths: signals forwarded to the ranks, SIGKILL after
# the grace period, a second signal, loomrun itself killed, processes a rank leaves behind.
# Usage: bash loomrun_signals.sh BIN_DIR   (BIN_DIR holds loomrun). Exits non-zero on failure.
set -u

BIN_DIR=${1:?usage: loomrun_signals.sh BIN_DIR}
LOOMRUN=$BIN_DIR/loomrun
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_bins "$BIN_DIR" loomrun
need_tools "(coreutils, procps)" timeout pgrep pkill
TMP=$(mktemp -d)
OUT=$TMP/out
ERR=$TMP/err
DUR=100.$$  # a sleep no other process runs, so that pgrep finds only ours
failures=0
pid=0
rc=0
elapsed=0

cleanup() {
  pkill -KILL -f "sleep $DUR" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $current: $*" >&2
  echo "  --- stdout:" >&2
  sed 's/^/  /' "$OUT" >&2
  echo "  --- stderr:" >&2
  sed 's/^/  /' "$ERR" >&2
  failures=$((failures + 1))
}

# start ARGS...: starts loomrun ARGS in the background (at most 20 s), with SIGINT at its default
# even though this non-interactive shell ignores it for background jobs. (The subshell keeps
# bash from reporting a killed loomrun on the test's stderr.)
start() {
  : >"$OUT"
  : >"$ERR"
  (
    timeout -k 2 20 env --default-signal=INT "$LOOMRUN" -x DUR="$DUR" "$@" >"$OUT" 2>"$ERR"
    exit $?
  ) 2>/dev/null &
  pid=$!
  start_time=$SECONDS
}

# finish: waits for the loomrun started by start; sets rc and elapsed.
finish() {
  wait "$pid"
  rc=$?
  elapsed=$((SECONDS - start_time))
}

# wait_ready N: waits (at most 10 s) until N ranks have printed "ready".
wait_ready() {
  local i
  for ((i = 0; i < 200; i++)); do
    [[ $(grep -c 'ready$' "$OUT") -ge $1 ]] && return 0
    sleep 0.05
  done
  fail "the ranks did not get ready"
  return 1
}

# no_sleepers: true when no process of this test's sleeps is left (waits at most 2 s).
no_sleepers() {
  local i
  for ((i = 0; i < 40; i++)); do
    pgrep -f "sleep $DUR" >/dev/null || return 0
    sleep 0.05
  done
  return 1
}

expect_rc() { [[ $rc -eq $1 ]] || fail "exit code $rc, expected $1"; }
expect_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in $(basename "$1")"; }
expect_text() { grep -qE -- "$2" "$1" || fail "nothing matches /$2/ in $(basename "$1")"; }
expect_fast() { [[ $elapsed -le $1 ]] || fail "took ${elapsed}s, expected at most $1s"; }
expect_no_sleepers() { no_sleepers || fail "a rank's process survived"; }

# signal_loomrun SIG: sends SIG to loomrun itself (start's subshell > timeout > loomrun).
signal_loomrun() {
  local timeout_pid
  timeout_pid=$(pgrep -P "$pid" -x timeout)
  if [[ -z $timeout_pid ]] || ! pkill "-$1" -P "$timeout_pid" -x loomrun; then
    fail "no loomrun to send SIG$1 to"
  fi
}

current="SIGTERM is forwarded"
start -n 2 sh -c 'trap "echo $LOOM_RANK got TERM; exit 5" TERM; echo ready; sleep $DUR & wait'
if wait_ready 2; then
  signal_loomrun TERM
  finish
  expect_rc 143
  expect_line "$OUT" "[0] 0 got TERM"
  expect_line "$OUT" "[1] 1 got TERM"
  expect_text "$ERR" '^loomrun: got SIGTERM: sending SIGTERM to the 2 ranks left$'
  expect_no_sleepers
fi

current="SIGINT is forwarded"
start -n 2 sh -c 'trap "echo $LOOM_RANK got INT; exit 5" INT; echo ready; sleep $DUR & wait'
if wait_ready 2; then
  signal_loomrun INT
  finish
  expect_rc 130
  expect_line "$OUT" "[0] 0 got INT"
  expect_line "$OUT" "[1] 1 got INT"
  expect_no_sleepers
fi

current="SIGKILL after the grace period"
start -n 2 --grace 1 sh -c 'trap "" TERM; echo ready; sleep $DUR'
if wait_ready 2; then
  signal_loomrun TERM
  finish
  expect_rc 143
  expect_text "$ERR" '^loomrun: 2 ranks still running 1s later: sending SIGKILL$'
  expect_fast 5
  expect_no_sleepers
fi

current="a second signal kills at once"
start -n 2 --grace 60 sh -c 'trap "" TERM; echo ready; sleep $DUR'
if wait_ready 2; then
  signal_loomrun TERM
  sleep 0.2
  signal_loomrun TERM
  finish
  expect_rc 143
  expect_text "$ERR" '^loomrun: got SIGTERM again: killing the 2 ranks left$'
  expect_fast 5
  expect_no_sleepers
fi

current="no rank outlives a killed loomrun"
start -n 2 sh -c 'echo ready; exec sleep $DUR'
if wait_ready 2; then
  signal_loomrun KILL
  finish
  expect_no_sleepers
fi

current="what a rank leaves running is stopped with it"
start -n 2 sh -c 'sleep $DUR & echo ready'
finish
expect_rc 0
expect_fast 5
expect_no_sleepers

if [[ $failures -ne 0 ]]; then
  echo "loomrun_signals: $failures check(s) failed" >&2
  exit 1
fi
echo "loomrun_signals: all checks passed"
