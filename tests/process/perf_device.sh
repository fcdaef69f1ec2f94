#!/usr/bin/env bash
# loom-perf --device host-sim: every collective on (simulated) device buffers, stream-ordered,
# through loomrun with separate processes, all dtypes and ops, exact verification (also on the
# device's default stream, --stream default); and
# --device cuda fails cleanly (exit 3, a message) where no GPU is visible.
# Usage: bash perf_device.sh BIN_DIR
set -u
BIN=${1:?usage: perf_device.sh BIN_DIR}
# shellcheck source=lib/perf_sweep.sh
source "$(dirname "$0")/lib/perf_sweep.sh"

for n in 1 3; do
  for coll in allreduce allgather broadcast reduce reducescatter; do
    sweep "$n" "$coll" --device host-sim -b 0 -e 64K -f 16 -d all -o all -n 1 -w 1 -r $((n - 1))
  done
done
sweep 2 allreduce --device host-sim -b 8 -e 1M -f 8 -n 2 -w 1
# On the device's default (legacy) stream, as torch's default stream calls.
sweep 2 allreduce --device host-sim --stream default -b 8 -e 1M -f 8 -d int8,float -n 2 -w 1
sweep 3 allgather --device host-sim --stream default -b 0 -e 64K -f 16 -n 1 -w 1

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
usage_error allreduce --device tpu
usage_error allreduce --stream default
usage_error allreduce --device host-sim --stream mine

finish perf_device
