#!/usr/bin/env bash
# Every collective through loomrun + loom-perf with exact verification, for 1, 2, 3, 4 and 5
# ranks (and 8 for allreduce): all dtypes and ops at small sizes, float sum up to 4 MiB.
# Usage: bash perf_sweep.sh BIN_DIR
set -u
BIN=${1:?usage: perf_sweep.sh BIN_DIR}
# shellcheck source=lib/perf_sweep.sh
source "$(dirname "$0")/lib/perf_sweep.sh"

for n in 1 2 3 4 5; do
  for coll in allreduce allgather broadcast reduce reducescatter; do
    sweep "$n" "$coll" -b 0 -e 64K -f 16 -d all -o all -n 1 -w 1 -r $((n - 1))
    sweep "$n" "$coll" -b 8 -e 4M -f 8 -n 2 -w 1
  done
done
sweep 8 allreduce -b 8 -e 2M -f 32 -n 2 -w 1
# Blocking calls (-z 1: each waited for before the next, like a training loop), oversubscribed.
sweep 5 allreduce -b 0 -e 64K -f 16 -d float,int8,bfloat16 -o all -n 3 -w 1 -z 1

# A wrong result must be reported: loom-perf exits non-zero on #wrong (checked by the unit
# tests); here we check the exit path for a usage error.
usage_error allreduce -b 1M -e 8

finish perf_sweep
