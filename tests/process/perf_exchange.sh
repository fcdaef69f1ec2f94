#!/usr/bin/env bash
# loom-perf alltoall, alltoallv, gather and scatter at 3 ranks over shm and tcp: every row
# present, in place and out of place, with #wrong 0 (every element checked); --plant-error (one
# received element flipped after the call) must show up as #wrong 1 in every half and exit 1, so
# the check is not vacuous; device buffers (host-sim), buffers from loom::host_alloc (read through
# a mapping) and --compare-transports; and Open MPI's
# mpi-exchange-perf baseline, when built, checking its own results alike (and its sendrecv,
# allgather, reducescatter, broadcast and reduce);
# copy-ceiling (compare.py's "copy" baseline) checks every element of its copies too.
# Usage: bash perf_exchange.sh BIN_DIR
set -u
BIN=${1:?usage: perf_exchange.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

COLLS="alltoall alltoallv gather scatter"
SIZES=(-b 1K -e 256K -f 4 -n 2 -w 1 -d float,int8)  # 5 sizes x 2 types = 10 rows
ROWS=10

# rows FILE WANT: the number of table rows whose #wrong fields (out of place, in place) are both
# WANT; every row must be one of them.
rows_with() {
  awk -v w="$2" '$1 ~ /^[0-9]+$/ && NF == 13 { n++; if ($9 == w && $13 == w) ok++ }
                 END { if (n != ok) print -1; else print n + 0 }' "$1"
}

# run LABEL WANT_RC WANT_WRONG ARGS...: one loom-perf run on 3 ranks.
run() {
  local label=$1 want_rc=$2 want_wrong=$3
  shift 3
  timeout 300 "$BIN/loomrun" -n 3 --only-rank 0 --no-prefix -x LOOM_TIMEOUT=60s -- \
    "$BIN/loom-perf" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$? n
  n=$(rows_with "$TMP/out" "$want_wrong")
  if [[ $rc -ne $want_rc || $n -ne $ROWS ]]; then
    fail "$label: loom-perf $* (exit $rc, want $want_rc; $n rows with #wrong $want_wrong, want $ROWS)"
    tail -15 "$TMP/out" "$TMP/err" | sed 's/^/  /' >&2
    return 1
  fi
  echo "ok: $label: $* ($n rows, #wrong $want_wrong)"
}

for t in shm tcp; do
  root=1
  [[ $t == tcp ]] && root=2
  for c in $COLLS; do
    run "$t" 0 0 "$c" "${SIZES[@]}" -r "$root" --transport "$t"
    grep -q "# Out of bounds values : 0 OK" "$TMP/out" || fail "$t $c: no '0 OK' footer"
  done
done

# Every rooted row names its root; the size is the blocks of all ranks (1K at 3 ranks, float:
# 85 elements per block, 1020 bytes).
run "root" 0 0 gather "${SIZES[@]}" -r 2 --transport shm
awk '$1 ~ /^[0-9]+$/ && NF == 13 && $5 != 2' "$TMP/out" | grep -q . && fail "gather rows not root 2"
grep -Eq '^ +1020 +85 +float +none +2 ' "$TMP/out" || fail "gather 1K float row: not 1020 B / 85"
# alltoallv at 3 ranks: n(n+1)/2 = 6 units; 1K float gives 42 elements per unit, 1008 bytes.
run "alltoallv size" 0 0 alltoallv "${SIZES[@]}" --transport tcp
grep -Eq '^ +1008 +42 +float ' "$TMP/out" || fail "alltoallv 1K float row: not 1008 B / 42"

# A planted wrong element is caught in every half of every row.
for c in $COLLS; do
  run "planted" 1 1 "$c" "${SIZES[@]}" -r 1 --transport shm --plant-error
  grep -q "Out of bounds values : $((2 * ROWS)) FAILED" "$TMP/out" ||
    fail "planted $c: footer does not count $((2 * ROWS)) wrong"
done

# Device buffers through the host simulation of the device path.
for c in $COLLS; do
  run "host-sim" 0 0 "$c" "${SIZES[@]}" -r 2 --device host-sim
done

# Buffers from loom::host_alloc (--device host-shared): large messages are read through a
# mapping of the sender's buffer, exact; a planted wrong element is still caught.
for c in $COLLS; do
  run "host-shared" 0 0 "$c" "${SIZES[@]}" -r 1 --transport shm --device host-shared
done
run "host-shared planted" 1 1 alltoall "${SIZES[@]}" --transport shm --device host-shared \
  --plant-error
timeout 300 "$BIN/loomrun" -n 2 --no-prefix -x LOOM_DEBUG=DEBUG -- "$BIN/loom-perf" sendrecv \
  -b 1M -e 1M -n 2 -w 1 --device host-shared >"$TMP/shared" 2>&1 ||
  fail "sendrecv --device host-shared exited $?"
grep -q "shared buffers mapped yes" "$TMP/shared" || fail "host-shared: connections do not map"
grep -q "shared buffer (fd" "$TMP/shared" || fail "host-shared: no buffer was mapped"

# --compare-transports: one verified table with a busbw column per transport.
timeout 300 "$BIN/loomrun" -n 3 --only-rank 0 --no-prefix -x LOOM_TIMEOUT=60s -- \
  "$BIN/loom-perf" alltoallv "${SIZES[@]}" --compare-transports shm,tcp >"$TMP/cmp" 2>&1 ||
  fail "alltoallv --compare-transports exited $?"
grep -q "shm/tcp" "$TMP/cmp" || fail "compare: no shm/tcp column"
grep -q "Out of bounds values : 0 OK" "$TMP/cmp" || fail "compare: results not verified OK"
[[ $(awk '$1 ~ /^[0-9]+$/ && $NF == "0"' "$TMP/cmp" | wc -l) -eq $ROWS ]] ||
  fail "compare: expected $ROWS rows with #wrong 0"

"$BIN/loom-perf" --help | grep -q "alltoall, alltoallv, gather, scatter" ||
  fail "--help does not list the exchange collectives"
"$BIN/loom-perf" scatter --compare-algos ring,tree >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--compare-algos on scatter should be a usage error"

# The Open MPI baseline, when it was built (MPI found) and mpirun runs here.
if [[ -x $BIN/mpi-exchange-perf ]] && command -v mpirun >/dev/null; then
  for c in $COLLS allgather reducescatter broadcast reduce; do
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 3 --mca pml ob1 \
      --mca btl vader,self "$BIN/mpi-exchange-perf" "$c" -r 1 -b 1K -e 256K -f 4 -n 2 -w 1 \
      -d float,double >"$TMP/mpi" 2>&1
    rc=$?
    n=$(rows_with "$TMP/mpi" 0)
    [[ $rc -eq 0 && $n -eq $ROWS ]] || {
      fail "mpi-exchange-perf $c (exit $rc, $n rows with #wrong 0)"
      tail -15 "$TMP/mpi" | sed 's/^/  /' >&2
    }
  done
  echo "ok: mpi-exchange-perf $COLLS allgather reducescatter broadcast reduce"
else
  echo "skip: mpi-exchange-perf not built or no mpirun"
fi

# Out-of-place-only tables (mpi-exchange-perf sendrecv, copy-ceiling): ROWS rows whose #wrong
# is 0 out of place and N/A (not run) in place.
oop_rows() {
  awk '$1 ~ /^[0-9]+$/ && NF == 13 { n++; if ($9 == "0" && $13 == "N/A") ok++ }
       END { if (n != ok) print -1; else print n + 0 }' "$1"
}
if [[ -x $BIN/mpi-exchange-perf ]] && command -v mpirun >/dev/null; then
  timeout 300 mpirun --allow-run-as-root --oversubscribe -np 3 --mca pml ob1 --mca btl vader,self \
    "$BIN/mpi-exchange-perf" sendrecv -b 1K -e 256K -f 4 -n 2 -w 1 -d float,double >"$TMP/mpi" 2>&1
  rc=$? n=$(oop_rows "$TMP/mpi")
  [[ $rc -eq 0 && $n -eq $ROWS ]] || fail "mpi-exchange-perf sendrecv (exit $rc, $n good rows)"
fi
if [[ -x $BIN/copy-ceiling ]]; then
  for c in $COLLS sendrecv; do
    [[ $c == alltoallv ]] && continue  # copy-ceiling has no alltoallv
    timeout 120 "$BIN/copy-ceiling" "$c" --ranks 3 -r 1 -b 1K -e 256K -f 4 -n 2 -w 1 \
      -d float,double >"$TMP/copy" 2>&1
    rc=$? n=$(oop_rows "$TMP/copy")
    [[ $rc -eq 0 && $n -eq $ROWS ]] || {
      fail "copy-ceiling $c (exit $rc, $n good rows)"
      tail -8 "$TMP/copy" | sed 's/^/  /' >&2
    }
  done
  timeout 120 "$BIN/copy-ceiling" sendrecv --tcp --ranks 3 -b 1K -e 256K -f 4 -n 2 -w 1 \
    -d float,double >"$TMP/copy" 2>&1
  rc=$? n=$(oop_rows "$TMP/copy")
  [[ $rc -eq 0 && $n -eq $ROWS ]] || fail "copy-ceiling sendrecv --tcp (exit $rc, $n good rows)"
  "$BIN/copy-ceiling" alltoall --tcp --ranks 3 >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "copy-ceiling alltoall --tcp should be a usage error"
  "$BIN/copy-ceiling" alltoallv --ranks 3 >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "copy-ceiling alltoallv should be a usage error"
  "$BIN/copy-ceiling" gather --ranks 2 -r 2 >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "copy-ceiling with a root outside the ranks should be a usage error"
  echo "ok: copy-ceiling alltoall gather scatter sendrecv, sendrecv --tcp (every element checked)"
fi

[[ $failures -eq 0 ]] || { echo "perf_exchange: $failures failure(s)" >&2; exit 1; }
echo "perf_exchange: all passed"
