#!/usr/bin/env bash
# Ranks started by hand with loom's own variables and with torchrun's, without loomrun; an
# incomplete environment fails with a message naming what is missing.
# Usage: bash launch_env.sh BIN_DIR
set -u
BIN=${1:?usage: launch_env.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

# start_ranks N VARSTYLE: starts N loom-perf ranks in the background with the chosen variables.
run_job() {
  local n=$1 style=$2 port pids=()
  port=$(free_port)
  for ((r = 0; r < n; r++)); do
    if [[ $style == loom ]]; then
      env LOOM_RANK=$r LOOM_WORLD_SIZE=$n LOOM_ROOT=127.0.0.1:$port LOOM_TIMEOUT=60s \
        timeout 120 "$BIN/loom-perf" allreduce -b 8 -e 1M -f 32 -n 2 -w 1 >"$TMP/$style.$r" 2>&1 &
    else
      env RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOOM_TIMEOUT=60s \
        timeout 120 "$BIN/loom-perf" allgather -b 8 -e 1M -f 32 -n 2 -w 1 >"$TMP/$style.$r" 2>&1 &
    fi
    pids+=($!)
  done
  if perf_job_ok "$style launch with $n ranks" "$TMP/$style" "${pids[@]}"; then
    echo "ok: $style launch with $n ranks"
  fi
}

run_job 3 loom
run_job 2 torchrun

# Incomplete environment: LOOM_RANK without the rest.
out=$(env -u LOOM_WORLD_SIZE -u LOOM_ROOT -u WORLD_SIZE LOOM_RANK=0 timeout 30 "$BIN/loom-perf" allreduce -b 8 -e 8 2>&1)
rc=$?
if [[ $rc -eq 0 ]] || ! grep -q "LOOM_WORLD_SIZE" <<<"$out" || ! grep -q "LOOM_ROOT" <<<"$out"; then
  fail "incomplete environment should fail naming LOOM_WORLD_SIZE and LOOM_ROOT (exit $rc): $out"
else
  echo "ok: incomplete environment is named"
fi

# Contradictory environment.
out=$(env LOOM_RANK=0 RANK=1 LOOM_WORLD_SIZE=2 LOOM_ROOT=127.0.0.1:1 timeout 30 "$BIN/loom-perf" allreduce -b 8 -e 8 2>&1)
if [[ $? -eq 0 ]] || ! grep -q "contradictory" <<<"$out"; then
  fail "contradictory LOOM_RANK/RANK should fail: $out"
else
  echo "ok: contradictory environment is named"
fi

# A rank that dies makes loomrun exit non-zero naming it, and the survivors do not hang.
start=$(date +%s)
out=$(timeout 120 "$BIN/loomrun" -n 3 -x LOOM_TIMEOUT=20s -- sh -c \
  'if [ "$LOOM_RANK" = 1 ]; then exit 7; fi; exec '"$BIN"'/loom-perf allreduce -b 8 -e 64M -n 50' 2>&1)
rc=$?
if [[ $rc -eq 0 ]] || ! grep -q "rank 1" <<<"$out"; then
  fail "a failed rank should make loomrun fail naming rank 1 (exit $rc): $out"
else
  echo "ok: failed rank 1 named, job stopped in $(($(date +%s) - start)) s"
fi

[[ $failures -eq 0 ]] || { echo "launch_env: $failures failure(s)" >&2; exit 1; }
echo "launch_env: all passed"
