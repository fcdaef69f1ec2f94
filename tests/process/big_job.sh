#!/usr/bin/env bash
# A job bigger than the rendezvous server's default limits (more ranks than its 256 pending
# connections are sized for): 64 ranks on one host start, run one verified allreduce and exit 0,
# and the rendezvous store stays O(n) at its server: the allgathers are server-side gathers (at
# least one per rank), the transports connect without reading every peer's keys, and the whole
# job (start-up, the allreduce, the exit) costs the server at most LOOM_BIG_JOB_PER_RANK (30)
# requests per rank, hellos apart (about 23 measured at 64 ranks; reading every peer's keys, as
# the transports once did, cost 164); the count at the end of rank 0's start-up (about 15 per
# rank) is printed too.
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
at_start=$(grep -ho "rank 0 of $N: start-up phases.*the store served [0-9]* requests so far" "$OUT" "$ERR" |
  sed -n 's/.*the store served \([0-9]*\) requests so far/\1/p' | head -1)
per_rank=${LOOM_BIG_JOB_PER_RANK:-30}
if [[ -z $served || -z $gathers || -z $gets ]]; then
  fail "the rendezvous server logged no per-operation request counts"
elif [[ -z $at_start ]]; then
  fail "rank 0 logged no request count at the end of its start-up"
elif ((gathers < N)); then
  fail "the server served $gathers gathers for $N ranks (allgathers not done by the server?)"
elif ((served > per_rank * N)); then
  fail "the server served $served requests for $N ranks (over $per_rank per rank; $gets gets)"
fi
echo "$N ranks: rc $rc in ${elapsed}s, ${served:-?} store requests in all ($gathers gathers," \
  "$gets gets), ${at_start:-?} by the end of rank 0's start-up"
[[ $failures -eq 0 ]] || exit 1
echo "PASS: big_job"
