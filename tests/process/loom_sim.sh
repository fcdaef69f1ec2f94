#!/usr/bin/env bash
# loom-sim: the documented 4,096-rank sweeps on both presets finish quickly and print one row per
# size; small allreduces pick the tree, 1 GiB on one host the ring; --replay works; the local preset takes
# LOOM_TUNING; usage errors exit 2. Also loom-perf --algo and --calibrate end to end.
# Usage: bash loom_sim.sh BIN_DIR
set -u
BIN=${1:?usage: loom_sim.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
[[ -x $BIN/loom-sim ]] || { echo "loom-sim not built; skipping"; exit 77; }

rows() { awk '$1 ~ /^[0-9]+$/' "$1" | wc -l; }

for preset in 25gbe 8gpu-4efa; do
  start=$(date +%s)
  timeout 60 "$BIN/loom-sim" allreduce -n 4096 --preset $preset -b 8 -e 1G >"$TMP/out" 2>&1 ||
    fail "loom-sim allreduce -n 4096 --preset $preset exited $?"
  secs=$(($(date +%s) - start))
  [[ $secs -le 20 ]] || fail "loom-sim at 4096 ranks took ${secs}s"
  [[ $(rows "$TMP/out") -eq 28 ]] || fail "$preset: expected 28 rows (8 B..1 GiB), got $(rows "$TMP/out")"
  # columns: size count | ring t a b | tree t a b | algo t a b | det
  first=$(awk '$1 == 8 {print $9}' "$TMP/out")
  last=$(awk '$1 == 1073741824 {print $9}' "$TMP/out")
  # Latency-bound: recursive doubling (12 messages) or the tree, never the ring (8190).
  [[ $first == rd || $first == tree ]] || fail "$preset: 8 B at 4096 ranks should pick rd or tree, got '$first'"
  mid=$(awk '$1 == 1048576 {print $9}' "$TMP/out")
  [[ $mid == tree ]] || fail "$preset: 1 MiB at 4096 ranks (above LOOM_TUNE_RD_MAX_BYTES) should pick tree, got '$mid'"
  echo "ok: $preset 4096 ranks in ${secs}s (8 B -> $first, 1 GiB -> $last)"
done

# One host of 8 ranks: large allreduces take the (bandwidth-optimal) ring.
big=$(timeout 30 "$BIN/loom-sim" allreduce -n 8 --preset 25gbe -b 1G -e 1G | awk '$1 ~ /^[0-9]+$/ {print $9}')
[[ $big == ring ]] || fail "1 GiB on one 8-rank host should pick ring, got '$big'"

for coll in allgather broadcast reduce reducescatter; do
  timeout 30 "$BIN/loom-sim" $coll -n 64 --preset 25gbe -b 1K -e 1M -f 4 >"$TMP/out" 2>&1 ||
    fail "loom-sim $coll exited $?"
  [[ $(rows "$TMP/out") -eq 6 ]] || fail "loom-sim $coll: expected 6 rows"
done

timeout 60 "$BIN/loom-sim" allreduce -n 64 --preset 25gbe --replay -b 8 -e 4M -f 8 >"$TMP/out" 2>&1 ||
  fail "loom-sim --replay exited $?"
[[ $(rows "$TMP/out") -eq 7 ]] || fail "loom-sim --replay: expected 7 rows, got $(rows "$TMP/out")"
grep -q "step-level replay" "$TMP/out" || fail "loom-sim --replay does not say it replayed"

LOOM_TUNING=intra_alpha_us=5,intra_gbps=3 timeout 30 "$BIN/loom-sim" allreduce -n 4 -b 8 -e 8 \
  >"$TMP/out" 2>&1 || fail "local preset exited $?"
grep -q "intra_alpha_us=5" "$TMP/out" || fail "local preset ignored LOOM_TUNING"

timeout 30 "$BIN/loom-sim" allreduce -n 4 --preset nosuch >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "an unknown preset should exit 2"
timeout 30 "$BIN/loom-sim" allreduce -n 1 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "-n 1 should exit 2"

# loom-perf --algo tree and --calibrate under loomrun.
if [[ -x $BIN/loomrun && -x $BIN/loom-perf ]]; then
  timeout 120 "$BIN/loomrun" -n 3 --only-rank 0 --no-prefix -- "$BIN/loom-perf" allreduce \
    --algo tree -b 8 -e 256K -f 8 -n 2 -w 1 >"$TMP/perf" 2>&1 || fail "loom-perf --algo tree exited $?"
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' "$TMP/perf" | wc -l)
  [[ $wrong -eq 0 ]] || fail "loom-perf --algo tree reported wrong results"
  timeout 120 "$BIN/loomrun" -n 2 --only-rank 0 --no-prefix -- "$BIN/loom-perf" --calibrate \
    -e 4M >"$TMP/cal" 2>&1 || fail "loom-perf --calibrate exited $?"
  grep -Eq '^LOOM_TUNING=intra_alpha_us=[0-9.e+-]+,intra_gbps=[0-9.e+-]+,reduce_gbps=' "$TMP/cal" ||
    fail "loom-perf --calibrate printed no LOOM_TUNING line: $(cat "$TMP/cal")"
  timeout 60 "$BIN/loom-perf" allreduce --algo bogus -b 8 -e 8 >/dev/null 2>&1
  [[ $? -ne 0 ]] || fail "loom-perf --algo bogus should fail"
  # --compare-algos: one verified row per size with a median time per algorithm.
  timeout 120 "$BIN/loomrun" -n 5 --only-rank 0 --no-prefix -- "$BIN/loom-perf" allreduce \
    --compare-algos ring,tree,rd,auto --rounds 2 -b 8 -e 64K -f 8 -n 3 -w 1 -d int32 \
    >"$TMP/algos" 2>&1 || fail "loom-perf --compare-algos exited $?: $(cat "$TMP/algos")"
  grep -Eq '^#\s+size\s+count\s+type\s+ring\s+tree\s+rd\s+auto\s+fastest\s+auto/fastest\s+#wrong$' \
    "$TMP/algos" || fail "--compare-algos header: $(cat "$TMP/algos")"
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 10 && $3 == "int32" && $NF == "0"' "$TMP/algos" | wc -l)
  [[ $rows -eq 5 ]] || fail "--compare-algos: $rows verified rows of 5: $(cat "$TMP/algos")"
  grep -q '^# Out of bounds values : 0 OK$' "$TMP/algos" || fail "--compare-algos: no OK footer"
  timeout 60 "$BIN/loom-perf" allreduce --compare-algos ring,nosuch >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "--compare-algos with an unknown algorithm should exit 2"
fi

if [[ $failures -ne 0 ]]; then
  echo "loom_sim: $failures failure(s)" >&2
  exit 1
fi
echo "loom_sim: all checks passed"
