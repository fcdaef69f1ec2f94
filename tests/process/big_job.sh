#!/usr/bin/env bash
# A job bigger than the rendezvous server's default limits (more ranks than its 256 pending
# connections are sized for, and each rank's allgathers once cost n^2 store requests): 64 ranks
# on one host start, run one verified allreduce and exit 0, and the server's request count stays
# O(n) per communicator. Kept cheap: 8-byte messages, one iteration.
# Usage: bash big_job.sh BIN_DIR (LOOM_BIG_JOB_RANKS=N for another size). Exits non-zero on
# failure.
set -u

BIN_DIR=${1:?usage: big_job.sh BIN_DIR}
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_bins "$BIN_DIR" loomrun loom-perf
need_tools "(coreutils)" timeout
# shellcheck source=lib/capture.sh
source "$(dirname "$0")/lib/capture.sh"

N=${LOOM_BIG_JOB_RANKS:-64}
current="$N ranks start, allreduce and exit"
start=$SECONDS
LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=BOOTSTRAP timeout -k 5 300 "$BIN_DIR/loomrun" -n "$N" \
  "$BIN_DIR/loom-perf" allreduce -b 8 -e 8 -n 1 -w 0 >"$OUT" 2>"$ERR"
rc=$?
elapsed=$((SECONDS - start))
[[ $rc -eq 0 ]] || fail "exit code $rc after ${elapsed}s"
grep -q "Out of bounds values : 0 OK" "$OUT" || fail "no verified allreduce in the output"
served=$(grep -ho "served [0-9]* requests" "$OUT" "$ERR" | head -1 | awk '{print $2}')
[[ -n $served ]] || fail "the rendezvous server logged no request count"
# Creation, the allreduce and the exit: tens of requests per rank, not hundreds (n^2 gets).
if [[ -n $served && $served -gt $((40 * N)) ]]; then
  fail "the server served $served requests for $N ranks (more than 40 per rank)"
fi
echo "$N ranks: rc $rc in ${elapsed}s, ${served:-?} store requests"
[[ $failures -eq 0 ]] || exit 1
echo "PASS: big_job"
