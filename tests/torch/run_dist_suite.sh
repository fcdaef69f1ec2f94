#!/usr/bin/env bash
# PyTorch's distributed test suite (DistributedTest._DistTestBase) against loom and gloo at 2
# and 3 ranks, then the comparison (counts, and what passes with gloo but not with loom).
# Usage: tests/torch/run_dist_suite.sh [OUT_DIR] [--fork] [-k FILTER ...]
#   (the options after OUT_DIR go to run_dist_suite.py; --fork forks each test's ranks from the
#   runner, torch imported once: minutes per run instead of the 30-40 min of spawned ranks)
#   WORLD_SIZES="2 3" BACKENDS="gloo loom" choose the runs; loom.torch must be importable
#   (scripts/install-torch-backend.sh, or PYTHONPATH=build/torch-ext/lib after
#   tests/process/torch_backend.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-dist-suite}
shift || true
mkdir -p "$out"
for ws in ${WORLD_SIZES:-2 3}; do
  for backend in ${BACKENDS:-gloo loom}; do
    echo "== $backend, $ws ranks"
    python3 "$here/run_dist_suite.py" --backend "$backend" --world-size "$ws" \
      --out "$out/$backend-$ws.json" "$@" >"$out/$backend-$ws.log" 2>&1 || true
    tail -1 "$out/$backend-$ws.log"
  done
done
python3 "$here/compare_dist_suite.py" "$out" | tee "$out/summary.md"
