#!/usr/bin/env bash
# Killed processes: kill -9 one of 4 ranks in the middle of a 256 MiB allreduce, over tcp and over
# shm: rank 2, then rank 0 (which hosts the rendezvous store: survivors that share no connection
# with it learn of its death from the store connection ending without a shutdown, and shrink()
# re-roots the store on the lowest survivor's standby listener). Every survivor must fail with
# PeerFailed naming the dead rank (and its pid) within 2 s, shrink past it and finish with
# correct results (examples/03_shrink.cpp checks them), and /dev/shm must be left clean. Then
# loomrun must exit non-zero naming a killed rank (rank 1, then rank 0).
# Usage: bash fault_tolerance.sh BIN_DIR
set -u
BIN=${1:?usage: fault_tolerance.sh BIN_DIR}
# shellcheck source=lib/example_job.sh
source "$(dirname "$0")/lib/example_job.sh"
shm_files() { ls /dev/shm 2>/dev/null | grep '^loom-' | sort; }

kill_one_of_four() {
  local transports=$1 victim=$2 n=4 count=$((64 * 1024 * 1024))  # 256 MiB of fp32
  local root
  root=127.0.0.1:$(free_port)
  shm_files >"$TMP/shm.before"
  rm -f "$TMP"/out.*
  pids=()
  for ((r = 0; r < n; r++)); do
    LOOM_RANK=$r LOOM_WORLD_SIZE=$n LOOM_ROOT=$root LOOM_SECRET=00112233445566778899aabbccddeeff \
      LOOM_TRANSPORTS=$transports LOOM_TIMEOUT=120s \
      timeout 300 "$EX" 2 $count >"$TMP/out.$r" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    wait_for "$TMP/out.$r" "iteration 0 started" 120 || { fail "$transports, rank $victim killed: rank $r did not start"; return; }
  done
  local victim_pid
  victim_pid=$(pgrep -P "${pids[$victim]}" -f loom-example-shrink || echo "${pids[$victim]}")
  kill -9 "$victim_pid"
  local killed_at
  killed_at=$(now_ms)
  kill -9 "${pids[$victim]}" 2>/dev/null
  for ((r = 0; r < n; r++)); do
    [[ $r -eq $victim ]] && continue
    if ! wait "${pids[$r]}"; then fail "$transports, rank $victim killed: survivor rank $r exited non-zero"; continue; fi
    local line at
    line=$(grep -m1 "PeerFailed at" "$TMP/out.$r")
    at=$(sed -E 's/.*PeerFailed at ([0-9]+) ms.*/\1/' <<<"$line")
    if [[ -z $line ]]; then fail "$transports, rank $victim killed: rank $r saw no PeerFailed"; continue; fi
    [[ $line == *"rank $victim"* && $line == *"pid $victim_pid"* && $line == *"host "* ]] ||
      fail "$transports, rank $victim killed: rank $r: PeerFailed does not name rank $victim, its host and pid $victim_pid: $line"
    local delay=$((at - killed_at))
    echo "$transports, rank $victim killed: rank $r saw PeerFailed $delay ms after the kill"
    ((delay <= 2000)) || fail "$transports, rank $victim killed: rank $r took $delay ms (> 2000) to see the failure"
    grep -q "done, 2 iterations correct on 3 ranks" "$TMP/out.$r" ||
      fail "$transports, rank $victim killed: rank $r did not finish on 3 ranks"
  done
  pids=()
  shm_files >"$TMP/shm.after"
  local left
  left=$(comm -13 "$TMP/shm.before" "$TMP/shm.after")
  # Other jobs on this machine create (and at once unlink) segments: only lasting ones count.
  if [[ -n $left ]]; then
    sleep 1
    left=$(comm -12 <(echo "$left") <(shm_files))
    [[ -z $left ]] || fail "$transports, rank $victim killed: /dev/shm not clean: $left"
  fi
}

loomrun_names_the_dead_rank() {
  local victim_rank=$1 out=$TMP/out.loomrun
  timeout 120 "$BIN/loomrun" -n 3 "$EX" 100000 1024 >"$out" 2>&1 &
  local lr=$!
  wait_for "$out" "rank 1: iteration 2 started" 60 || { fail "loomrun: job did not start"; return; }
  local victim=""
  for p in $(pgrep -f "loom-example-shrink 100000 1024"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "LOOM_RANK=$victim_rank"; then victim=$p; fi
  done
  [[ -n $victim ]] || { fail "loomrun: rank $victim_rank's process not found"; kill "$lr"; return; }
  kill -9 "$victim"
  local rc=0
  wait "$lr" || rc=$?
  ((rc != 0)) || fail "loomrun exited 0 after a rank was killed"
  grep -q "rank $victim_rank (pid $victim) was killed by signal 9" "$out" ||
    fail "loomrun did not name rank $victim_rank (pid $victim)"
}

kill_one_of_four tcp 2
kill_one_of_four shm 2
kill_one_of_four tcp 0
kill_one_of_four shm 0
loomrun_names_the_dead_rank 1
loomrun_names_the_dead_rank 0
[[ $failures -eq 0 ]] || exit 1
echo "fault_tolerance: all passed"
