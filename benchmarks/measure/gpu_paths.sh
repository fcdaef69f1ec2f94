#!/usr/bin/env bash
# Allreduce on GPU buffers over each device path. Prints, side by side in one run:
#   1. loom-perf allreduce on host buffers (the baseline) and on --device host-sim, over cuda_ipc
#      and staged (^cuda_ipc): the cost of each path's logic alone (NOT GPU performance);
#   2. on a machine with GPUs, the loom-perf --device cuda sweep (the targets: kernels at
#      90% of memory bandwidth at 64 MiB, intra-node busbw within 10% of NCCL, compared with
#      nccl-tests' all_reduce_perf when it is on PATH).
# Usage: [GPU_PATHS_RANKS=4] benchmarks/measure/gpu_paths.sh [BUILD_DIR]   (default build; 1-4 minutes)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build}/bin
ranks=${GPU_PATHS_RANKS:-4}
common=(allreduce -d float -b 8 -e 64M -f 4 -n 20 -w 5 -c 1)

echo "### host buffers, $ranks ranks"
"$bin/loomrun" -n "$ranks" --only-rank 0 --no-prefix -- "$bin/loom-perf" "${common[@]}"
echo
echo "### --device host-sim over cuda_ipc (direct path; host-staging route between processes), $ranks ranks"
"$bin/loomrun" -n "$ranks" --only-rank 0 --no-prefix -- "$bin/loom-perf" "${common[@]}" --device host-sim
echo
echo "### --device host-sim staged through host transports (LOOM_TRANSPORTS=^cuda_ipc), $ranks ranks"
LOOM_TRANSPORTS=^cuda_ipc "$bin/loomrun" -n "$ranks" --only-rank 0 --no-prefix -- "$bin/loom-perf" "${common[@]}" --device host-sim

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  ngpus=$(nvidia-smi -L | grep -c '^GPU ')
  echo
  echo "### reduction kernels, 64 MiB per buffer (target: 90% of memory bandwidth, 3 x bytes)"
  "$bin/loom-kernel-bench" --device cuda -e 64M -n 50 -d float,bfloat16,half -o sum
  echo
  echo "### --device cuda over cuda_ipc, $ngpus ranks (one per GPU)"
  "$bin/loomrun" -n "$ngpus" --only-rank 0 --no-prefix -- "$bin/loom-perf" allreduce --device cuda -d float -b 8 -e 1G -f 2 -n 20 -w 5 -c 1
  echo
  echo "### --device cuda staged (LOOM_TRANSPORTS=^cuda_ipc), $ngpus ranks"
  LOOM_TRANSPORTS=^cuda_ipc "$bin/loomrun" -n "$ngpus" --only-rank 0 --no-prefix -- "$bin/loom-perf" allreduce --device cuda -d float -b 8 -e 1G -f 2 -n 20 -w 5 -c 1
  if command -v all_reduce_perf >/dev/null; then
    echo
    echo "### NCCL (nccl-tests all_reduce_perf), same GPUs"
    all_reduce_perf -b 8 -e 1G -f 2 -g "$ngpus"
  fi
else
  echo
  echo "(no GPU visible: the --device cuda rows and the NCCL comparison need a GPU machine)"
fi
