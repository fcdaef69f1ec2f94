#!/usr/bin/env bash
# Mismatches and failures between processes, each rank leaving as soon as its call fails (the
# ranks are hidden test cases of loom-tests, tests/unit/test_process_failures.cpp):
#  - a send and an allreduce issued in different orders by a pair (16 MiB): both ranks report
#    Mismatch within 2 s (LOOM_TIMEOUT is 60 s), none a closed connection;
#  - a gather whose rank 1 passes half the count, found by the root (rank 0, which serves the
#    rendezvous store) at 3 ranks: rank 2, not involved, reports Mismatch too (at the gather
#    or at the barrier after it);
#  - rank 2 of 3 dies between allreduces; the survivors' split() fails with PeerFailed naming
#    rank 2 within 2 s.
# Usage: bash mismatch_and_split.sh BIN_DIR
set -u
BIN=${1:?usage: mismatch_and_split.sh BIN_DIR}
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_bins "$BIN" loomrun loom-tests
# shellcheck source=lib/job_output.sh
source "$(dirname "$0")/lib/job_output.sh"

# job N TAG: runs the hidden test case TAG on N ranks into $TMP/out.
job() {
  LOOM_TIMEOUT=60s timeout 120 "$BIN/loomrun" -n "$1" --timeout 100s "$BIN/loom-tests" "[$2]" \
    >"$TMP/out" 2>&1 || true
}

# expect RANK WHAT CODE MAX_MS [NAMED]: rank RANK reported WHAT ended in CODE within MAX_MS,
# its message naming NAMED.
expect() {
  local line ms
  line=$(grep -m1 -E "rank $1: $2: " "$TMP/out")
  [[ -n $line ]] || { fail "$2: rank $1 reported nothing"; return; }
  echo "  $(cut -c1-160 <<<"$line")"
  [[ $line == *": $3 after "* ]] || { fail "$2: rank $1 did not end in $3"; return; }
  ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
  ((ms <= $4)) || fail "$2: rank $1 took $ms ms (> $4)"
  [[ -z ${5:-} || $line == *"$5"* ]] || fail "$2: rank $1's error does not name $5"
}

echo "send and allreduce in different orders, 2 ranks:"
job 2 call_order
expect 0 order Mismatch 2000 "same order"
expect 1 order Mismatch 2000 "same order"

echo "gather mismatch found by the store's host, 3 ranks:"
job 3 gather_mismatch
expect 0 gather Mismatch 2000 "rank 1"
expect 2 gather Mismatch 2000 "rank 1"

echo "split after rank 2 died, 3 ranks:"
job 3 split_after_failure
expect 0 split PeerFailed 2000 "rank 2"
expect 1 split PeerFailed 2000 "rank 2"

finish mismatch_and_split
