#!/usr/bin/env bash
# loom-perf --device host-sim: every collective on (simulated) device buffers, stream-ordered,
# through loomrun with separate processes, all dtypes and ops, exact verification; and
# --device cuda fails cleanly (exit 3, a message) where no GPU is visible.
# Usage: bash perf_device.sh BIN_DIR
set -u
BIN=${1:?usage: perf_device.sh BIN_DIR}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

sweep() {
  local n=$1 coll=$2
  shift 2
  local out=$TMP/out
  timeout 300 "$BIN/loomrun" -n "$n" --only-rank 0 --no-prefix -- \
    "$BIN/loom-perf" "$coll" --device host-sim "$@" >"$out" 2>&1
  local rc=$?
  local rows wrong
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 13' "$out" | wc -l)
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' "$out" | wc -l)
  if [[ $rc -ne 0 || $rows -eq 0 || $wrong -ne 0 ]]; then
    echo "FAIL: loomrun -n $n loom-perf $coll --device host-sim $* (exit $rc, $rows rows, $wrong wrong)" >&2
    sed 's/^/  /' "$out" | tail -20 >&2
    failures=$((failures + 1))
  else
    echo "ok: -n $n $coll --device host-sim $* ($rows rows)"
  fi
}

for n in 1 3; do
  for coll in allreduce allgather broadcast reduce reducescatter; do
    sweep "$n" "$coll" -b 0 -e 64K -f 16 -d all -o all -n 1 -w 1 -r $((n - 1))
  done
done
sweep 2 allreduce -b 8 -e 1M -f 8 -n 2 -w 1

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  timeout 60 "$BIN/loom-perf" allreduce --device cuda -b 8 -e 8 >"$TMP/out" 2>&1
  rc=$?
  if [[ $rc -ne 3 ]] || ! grep -q "LOOM_DEVICE=cuda" "$TMP/out"; then
    echo "FAIL: loom-perf --device cuda without a GPU should exit 3 naming LOOM_DEVICE=cuda (exit $rc)" >&2
    sed 's/^/  /' "$TMP/out" >&2
    failures=$((failures + 1))
  else
    echo "ok: --device cuda without a GPU: $(tail -1 "$TMP/out")"
  fi
fi
timeout 30 "$BIN/loom-perf" allreduce --device tpu >/dev/null 2>&1
if [[ $? -ne 2 ]]; then
  echo "FAIL: loom-perf --device tpu should be a usage error (exit 2)" >&2
  failures=$((failures + 1))
fi

if [[ $failures -ne 0 ]]; then
  echo "perf_device: $failures failure(s)" >&2
  exit 1
fi
echo "perf_device: all sweeps verified"
