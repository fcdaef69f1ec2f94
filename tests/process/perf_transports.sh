#!/usr/bin/env bash
# loom-perf --compare-transports: one verified table with a busbw column per transport and the
# ratio, --json with every row of every transport, benchmarks/plot_busbw.py drawing it, and
# --transport forcing one transport (its log shows the peers reached over it).
# Usage: bash perf_transports.sh BIN_DIR
set -u
BIN=${1:?usage: perf_transports.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

transports=tcp,shm
"$BIN/loom-info" --transports | grep -q "^  ofi  available" && transports=ofi,tcp,shm
n_t=$(echo "$transports" | tr ',' '\n' | wc -l)
first=${transports%%,*}
rest=${transports#*,}
second=${rest%%,*}

timeout 300 "$BIN/loomrun" -n 3 -x LOOM_TIMEOUT=60s -- "$BIN/loom-perf" allreduce -b 8 -e 1M \
  -f 16 -n 2 -w 1 -d float,int32 --compare-transports "$transports" --json "$TMP/r.json" \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
[[ $rc -eq 0 ]] || { fail "compare run exited $rc"; cat "$TMP/err" >&2; }
grep -q "transports compared" "$TMP/out" || fail "no comparison table"
for t in ${transports//,/ }; do
  grep -q "$t busbw" "$TMP/out" || fail "no busbw column for $t"
done
grep -q "$first/$second" "$TMP/out" || fail "no ratio column $first/$second"
grep -q "Out of bounds values : 0 OK" "$TMP/out" || fail "results not verified OK"
rows=$(sed 's/^\[0\] //' "$TMP/out" | awk '$1 ~ /^[0-9]+$/' | wc -l)
[[ $rows -eq 10 ]] || fail "expected 10 rows (5 sizes x 2 types), got $rows"
python3 - "$TMP/r.json" "$n_t" <<'PY' || fail "bad JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["collective"] == "allreduce" and d["nranks"] == 3, d
assert len(d["runs"]) == int(sys.argv[2]), len(d["runs"])
for run in d["runs"]:
    assert len(run["rows"]) == 10, (run["transport"], len(run["rows"]))
    for row in run["rows"]:
        for half in ("out_of_place", "in_place"):
            assert row[half]["wrong"] == 0, row
            assert row[half]["time_us"] > 0, row
PY
python3 "$HERE/../../benchmarks/plot_busbw.py" "$TMP/r.json" "$TMP/p.svg" >/dev/null &&
  grep -q "<polyline" "$TMP/p.svg" || fail "plot_busbw.py drew no lines"
[[ $(grep -c "<polyline" "$TMP/p.svg") -eq $n_t ]] || fail "expected one line per transport"

# --transport tcp on one host: the peers are reached over tcp, not shm.
timeout 120 "$BIN/loomrun" -n 2 -x LOOM_DEBUG=INFO -x LOOM_DEBUG_SUBSYS=INIT -- "$BIN/loom-perf" \
  allreduce -b 8 -e 64K -f 64 -n 2 -w 1 --transport tcp >"$TMP/one" 2>"$TMP/one.err" ||
  fail "--transport tcp failed"
grep -q "rank 0: peer 1 on .* via tcp" "$TMP/one.err" || fail "--transport tcp: peer not via tcp"
grep -q "# transport: tcp" "$TMP/one" || fail "--transport tcp: no transport line"

"$BIN/loom-perf" allreduce --transport bogus >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "an unknown transport should be a usage error"

[[ $failures -eq 0 ]] || { echo "perf_transports: $failures failure(s)" >&2; exit 1; }
echo "perf_transports: all passed ($transports)"
