#!/usr/bin/env bash
# The main job: sets up, builds, and runs an allreduce bus-bandwidth sweep over 4 local ranks.
# Arguments replace the default loom-perf flags, e.g.: scripts/bench.sh -b 1M -e 256M
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ranks=${LOOM_BENCH_RANKS:-4}
if [ $# -eq 0 ]; then set -- -b 8 -e 64M -f 2; fi
exec build/bin/loomrun -n "$ranks" --only-rank 0 --no-prefix -- build/bin/loom-perf allreduce "$@"
