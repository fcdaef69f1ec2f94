#!/usr/bin/env bash
# loom-perf sendrecv (each rank sends to the next and receives from the previous) at 2 and 3
# ranks over shm and tcp, and --group N (N calls per timed iteration in one group) for
# allreduce, sendrecv and broadcast: every row present with #wrong 0 (every element checked);
# --plant-error must show as #wrong 1 and exit 1; sendrecv refuses --inplace-only.
# Usage: bash perf_p2p_groups.sh BIN_DIR
set -u
BIN=${1:?usage: perf_p2p_groups.sh BIN_DIR}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; tail -15 "$TMP/out" "$TMP/err" | sed 's/^/  /' >&2; failures=$((failures + 1)); }

# check LABEL N WANT_RC WANT_WRONG ROWS ARGS...: one loom-perf run on N ranks; every table row
# has #wrong WANT_WRONG in the halves that ran (N/A halves skipped), and there are ROWS rows.
check() {
  local label=$1 n=$2 want_rc=$3 want_wrong=$4 want_rows=$5
  shift 5
  timeout 300 "$BIN/loomrun" -n "$n" --only-rank 0 --no-prefix -x LOOM_TIMEOUT=60s -- \
    "$BIN/loom-perf" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$? rows
  rows=$(awk -v w="$want_wrong" '$1 ~ /^[0-9]+$/ && NF == 13 {
           n++; bad += ($9 != w) || ($13 != w && $13 != "N/A") }
         END { print (bad ? -1 : n + 0) }' "$TMP/out")
  if [[ $rc -ne $want_rc || $rows -ne $want_rows ]]; then
    fail "$label: loom-perf $* (exit $rc, want $want_rc; $rows good rows, want $want_rows)"
    return 1
  fi
  echo "ok: $label ($rows rows, #wrong $want_wrong)"
}

SIZES=(-b 1K -e 1M -f 32 -n 3 -w 1)  # 1K, 32K, 1M: 3 rows
for t in shm tcp; do
  for n in 2 3; do
    check "sendrecv $t x$n" "$n" 0 0 3 sendrecv "${SIZES[@]}" --transport "$t"
  done
  check "sendrecv --group 8 $t" 3 0 0 3 sendrecv "${SIZES[@]}" -g 8 --transport "$t"
  check "allreduce --group 16 $t" 3 0 0 3 allreduce "${SIZES[@]}" -g 16 --transport "$t"
done
check "broadcast --group 4" 3 0 0 3 broadcast "${SIZES[@]}" -g 4 -r 1
check "sendrecv --plant-error" 3 1 1 3 sendrecv "${SIZES[@]}" --plant-error
rc=0
"$BIN/loom-perf" sendrecv --inplace-only >"$TMP/out" 2>"$TMP/err" || rc=$?
((rc == 2)) && grep -q "no in-place form" "$TMP/err" || fail "sendrecv --inplace-only: exit $rc"

if ((failures > 0)); then
  echo "perf_p2p_groups: $failures failure(s)" >&2
  exit 1
fi
echo "perf_p2p_groups: OK"
