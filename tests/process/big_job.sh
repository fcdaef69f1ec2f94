#!/usr/bin/env bash
# A job bigger than the rendezvous server's default limits (more ranks than its 256 pending
# connections are sized for, and each rank's allgathers once cost n^2 store requests): 64 ranks
# on one host start, run one verified allreduce and exit 0, and the allgathers stay server-side
# gathers: the server logs its counts per operation, and the test asserts at least one gather per
# rank and at most 40 requests per rank other than gets. Gets are bounded by 3*n^2 only: the
# transport handshakes read their peers' addresses through the store (about 8,700 gets at 64
# ranks, 2.1*n^2), while allgathers done with gets would add about n^2 per allgather on top.
# Kept cheap: 8-byte messages, one iteration.
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
line=$(grep -ho "served [0-9]* requests ([0-9]* gathers).*get [0-9]*" "$OUT" "$ERR" | head -1)
served=$(sed -n 's/^served \([0-9]*\) requests.*/\1/p' <<<"$line")
gathers=$(sed -n 's/.*requests (\([0-9]*\) gathers).*/\1/p' <<<"$line")
gets=$(sed -n 's/.*get \([0-9]*\)$/\1/p' <<<"$line")
if [[ -z $served || -z $gathers || -z $gets ]]; then
  fail "the rendezvous server logged no per-operation request counts"
elif ((gathers < N)); then
  fail "the server served $gathers gathers for $N ranks (allgathers not done by the server?)"
elif ((served - gets > 40 * N)); then
  fail "the server served $((served - gets)) requests other than gets for $N ranks (over 40 per rank)"
elif ((gets > 3 * N * N)); then
  fail "the server served $gets gets for $N ranks (more than 3*n^2)"
fi
echo "$N ranks: rc $rc in ${elapsed}s, ${served:-?} store requests ($gathers gathers, $gets gets)"
[[ $failures -eq 0 ]] || exit 1
echo "PASS: big_job"
