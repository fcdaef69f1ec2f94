#!/usr/bin/env bash
# The flight recorder between processes: 4 ranks under loomrun with LOOM_FLIGHT_DIR, rank 2
# arriving late at every allreduce, then a call rank 3 never makes (the others time out). Every
# rank leaves its record; loom-trace names the stall (ranks 0-2 waiting in #20, rank 3 never
# called it) and rank 2 as the rank that starts calls last, exits 1 (a problem found), and
# writes a Chrome trace with a slice per call per rank. Then two ranks that each wait to receive
# from the other: loom-trace names both receives and that neither peer sent.
# Usage: bash flight_recorder.sh BIN_DIR
set -u
BIN=${1:?usage: flight_recorder.sh BIN_DIR}
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_bins "$BIN" loomrun loom-tests loom-trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  sed 's/^/  /' "$TMP/out" "$TMP/trace" 2>/dev/null | grep -v CONFIG | tail -40 >&2
  failures=$((failures + 1))
}

rc=0
LOOM_FLIGHT_DIR=$TMP/flight LOOM_TIMEOUT=60s timeout 180 "$BIN/loomrun" -n 4 --timeout 150s \
  "$BIN/loom-tests" "process flight: *" >"$TMP/out" 2>&1 || rc=$?
((rc == 0)) || fail "loomrun exited $rc"
(($(grep -c "rank [0-2]: Timeout" "$TMP/out") == 3)) || fail "ranks 0-2 did not time out"
files=$(find "$TMP/flight" -name 'loom-flight-*-r[0-3].json' | wc -l)
((files == 4)) || fail "$files of 4 flight records written"

rc=0
"$BIN/loom-trace" --chrome "$TMP/trace.json" "$TMP/flight" >"$TMP/trace" 2>&1 || rc=$?
((rc == 1)) || fail "loom-trace exited $rc, not 1 (a problem found)"
grep -q "records from 4 of 4 ranks" "$TMP/trace" || fail "not every rank's record read"
grep -q "STALLED at call #20: rank(s) 0-2 in allreduce #20 .*rank(s) 3 never called it" \
  "$TMP/trace" || fail "the stall is not named"
# The straggler table's first row (most behind the first starter) is rank 2.
row=$(grep -A2 "started last" "$TMP/trace" | sed -n 2p)
[[ $row =~ ^\ +2\ +([0-9]+)\ of\ 20 ]] || fail "rank 2 is not the first straggler: '$row'"
((${BASH_REMATCH[1]:-0} >= 15)) || fail "rank 2 started last in only ${BASH_REMATCH[1]:-0} of 20"
slices=$(python3 -c "import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X'))" "$TMP/trace.json" 2>/dev/null || echo 0)
((slices == 83)) || fail "$slices slices in the Chrome trace, not 4 x 20 + 3"
sed -n '1,20p' "$TMP/trace"

# Sends and receives: two ranks that each wait to receive from the other. loom-trace names both
# receives, that the peer never sent them, and what the peer was doing instead.
rc=0
LOOM_FLIGHT_DIR=$TMP/p2p LOOM_TIMEOUT=60s timeout 120 "$BIN/loomrun" -n 2 --timeout 100s \
  "$BIN/loom-tests" "process p2p flight: *" >"$TMP/out" 2>&1 || rc=$?
((rc == 0)) || fail "the p2p job: loomrun exited $rc"
rc=0
"$BIN/loom-trace" --chrome "$TMP/p2p.json" "$TMP/p2p" >"$TMP/trace" 2>&1 || rc=$?
((rc == 1)) || fail "loom-trace on the p2p records exited $rc, not 1"
grep -q "rank 0 (host .*calls #0-#0, 4 sends and receives" "$TMP/trace" ||
  fail "rank 0's sends and receives not counted"
grep -q "P2P STALLED: rank 0 in recv #0 from rank 1 (64 x float, tag 5) (running, .*; rank 1 recorded no send to rank 0 (rank 1's last call: recv #3 from rank 0 (64 x float, tag 5), running)" \
  "$TMP/trace" || fail "rank 0's receive is not named"
grep -q "P2P STALLED: rank 1 in recv #3 from rank 0 (64 x float, tag 5) (running, .*; rank 0 never sent #3 (sent up to #2 to rank 1) (rank 0's last call: recv #0 from rank 1 (64 x float, tag 5), running)" \
  "$TMP/trace" || fail "rank 1's receive is not named"
slices=$(python3 -c "import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X'))" "$TMP/p2p.json" 2>/dev/null || echo 0)
((slices == 10)) || fail "$slices slices in the p2p Chrome trace, not 2 x (1 + 4)"
grep "P2P" "$TMP/trace"

# Records that disagree (hand-written: loom itself fails most mismatched calls first): rank 1
# called a broadcast where rank 0 called an allreduce.
mkdir -p "$TMP/mismatch"
record() {  # rank, op of call #1, extra fields of call #1
  cat >"$TMP/mismatch/loom-flight-00000000000000ab-r$1.json" <<JSON
{"loom_flight_record": 1, "communicator": "00000000000000ab", "rank": $1, "nranks": 2,
 "host": "h$1", "pid": 10$1, "reason": "failure", "status": "s",
 "clock": {"steady_ns": 5000, "system_ns": 1000005000},
 "calls": [
  {"seq": 0, "op": "barrier", "call": "barrier #0", "dtype": "uint8", "count": 0,
   "algorithm": "rd", "state": "completed", "submitted_ns": 100, "started_ns": 110, "completed_ns": 200},
  {"seq": 1, "op": "$2", "call": "$2 #1", "dtype": "float", "count": 8, $3
   "algorithm": "ring", "state": "running", "submitted_ns": 300, "started_ns": 310, "completed_ns": null}
 ]}
JSON
}
record 0 allreduce '"redop": "sum",'
record 1 broadcast '"root": 0,'
rc=0
"$BIN/loom-trace" "$TMP/mismatch" >"$TMP/trace" 2>&1 || rc=$?
((rc == 1)) || fail "loom-trace on mismatched records exited $rc, not 1"
grep -q "MISMATCH at call #1: rank(s) 0 called allreduce float sum count 8; rank(s) 1 called broadcast float root 0 count 8;" \
  "$TMP/trace" || fail "the mismatch is not named"
echo '{"something": 1}' >"$TMP/mismatch/loom-flight-00000000000000ab-r2.json"
rc=0
"$BIN/loom-trace" "$TMP/mismatch" >"$TMP/trace" 2>&1 || rc=$?
((rc == 2)) && grep -q "r2.json: not a loom flight record" "$TMP/trace" ||
  fail "a file that is not a flight record: exit $rc"
[[ $failures -eq 0 ]] || exit 1
echo "flight_recorder: passed"
