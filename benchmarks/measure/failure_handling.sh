#!/usr/bin/env bash
# Failure handling (run on a quiet machine): how fast survivors see a killed peer (rank 2,
# and rank 0 which hosts the rendezvous store; tcp and shm, 4 ranks, 256 MiB allreduce in
# flight), how long abort() takes with an operation in flight,
# and how long the sanitizer and fuzz scripts take. Total well under 5 minutes without the
# sanitizers; set FAILURE_HANDLING_SANITIZE=1 to time scripts/sanitize.sh with the CI subset too.
# Usage: benchmarks/measure/failure_handling.sh [BUILD_DIR]   (default build)
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
echo "== dead-peer detection (ms from kill -9 to PeerFailed at each survivor)"
for i in 1 2 3; do
  bash tests/process/fault_tolerance.sh "$BUILD/bin" 2>/dev/null | grep "saw PeerFailed"
done
echo "== abort() with an operation in flight (unit test, tcp and shm)"
/usr/bin/time -f "%e s for the test" "$BUILD/bin/loom-tests" "*abort() during a transfer*" 2>&1 |
  grep -E "passed|failed| s for"
echo "== fuzzing (LOOM_FUZZ_SECONDS=20 per target)"
/usr/bin/time -f "fuzz.sh: %e s" env LOOM_FUZZ_SECONDS=20 scripts/fuzz.sh 2>&1 | grep -E "fuzz\.|fuzz.sh:"
if [[ ${FAILURE_HANDLING_SANITIZE:-0} == 1 ]]; then
  echo "== sanitizers, CI subset"
  /usr/bin/time -f "sanitize.sh: %e s" env \
    LOOM_SANITIZE_SUBSET='errors|reliability|bootstrap|over tcp with (2|3) ranks' \
    scripts/sanitize.sh all 2>&1 | grep -E "tests passed|tests failed|sanitize.sh:"
fi
