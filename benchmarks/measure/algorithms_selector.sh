#!/usr/bin/env bash
# Allreduce algorithms and the selector: double binary tree, ring, recursive doubling and auto,
# deterministic mode, loom-sim validation.
# Run on a quiet machine from the repository root after scripts/build.sh:
#   bash benchmarks/measure/algorithms_selector.sh [BIN_DIR]        (about 10 minutes; ROUNDS=3 repeats)
# PARTS="0 1" runs only those sections (default: all; section 1 needs section 0's calibration).
# Prints, as markdown tables for docs/performance.md:
#  1. allreduce at 8 ranks, 8 B..64 KiB and 1..64 MiB: forced ring, tree, rd (small only), auto side by
#     side, with auto's slowdown against the best forced choice (target: <= 10%);
#  2. deterministic vs default busbw at 16..128 MiB, 4 and 8 ranks (target: within 15%);
#  0. loom-perf --calibrate at 2 and 8 ranks: the LOOM_TUNING every later run uses;
#  3. loom-sim --preset local against loom-perf for 2..8 ranks, each rank count calibrated
#     right before it is measured (sim_validation.sh): prediction error (target: within 25%);
#  4. the loom-sim tables for 2..4096 ranks on both presets (allreduce 8 B..1 GiB).
set -euo pipefail
BIN=${1:-build/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# algorithms and selector measurements on $(hostname), $(nproc) CPUs, $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null)"

perf() {  # perf N OUT ARGS...: rank 0's loom-perf table
  local n=$1 out=$2
  shift 2
  timeout 600 "$BIN/loomrun" -n "$n" --only-rank 0 --no-prefix -- "$BIN/loom-perf" "$@" >"$out"
}
# Identical runs on this VM differ by up to 2x, and slow phases of the machine last seconds:
# every comparison below runs its variants in turn, ROUNDS times, and takes the median per size.
ROUNDS=${ROUNDS:-3}
PARTS=" ${PARTS:-0 1 2 3 4} "
part() { [[ $PARTS == *" $1 "* ]]; }
MEDIAN="python3 $(dirname "$0")/median_table.py"
# The selector chooses among message schedules: on one host the arena would take every call
# (one step up to LOOM_SHM_ONESHOT_MAX, pieces above), in auto and deterministic mode alike.
export LOOM_SHM_ONESHOT_MAX=0 LOOM_SHM_ARENA_PIECE=0

# A --compare-algos table (size count type time... fastest auto/fastest #wrong) as markdown: the
# forced algorithms' times side by side, auto's, and the model's pick (loom-sim's "algo" column
# for the same rank count and LOOM_TUNING: the library runs the same choose() on the same
# constants). "pick vs best" compares the forced times of the picked and the fastest algorithm:
# the selector's choice, free of the spread between two runs of one algorithm that "auto vs
# best" also contains.
algos_table() {
  python3 - "$@" <<'PY'
import sys
sim, names, table = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
picks = {int(p[0]): p[8] for p in (l.split() for l in open(sim)) if p and p[0].isdigit()}
print("| size (B) | " + " | ".join(f"{n} time (us)" for n in names) +
      " | best | pick | pick vs best | auto vs best |")
print("|---:|" + "---:|" * len(names) + "---|---|---:|---:|")
for line in open(table):
    p = line.split()
    if len(p) != len(names) + 6 or not p[0].isdigit():
        continue
    size, ts = int(p[0]), [float(x) for x in p[3:3 + len(names)]]
    forced = ts[:-1]
    best = min(range(len(forced)), key=lambda i: forced[i])
    pick = picks.get(size, "?")
    pick_ratio = forced[names.index(pick)] / forced[best] - 1 if pick in names[:-1] else float("nan")
    ratio = ts[-1] / forced[best] - 1
    print(f"| {size} | " + " | ".join(f"{x:.1f}" for x in ts) +
          f" | {names[best]} | {pick} | {pick_ratio*100:+.1f}% | {ratio*100:+.1f}% |")
PY
}

if part 0; then
echo
echo "## 0. calibration (loom-perf --calibrate at 2 and 8 ranks); every run below uses it"
for r in $(seq "$ROUNDS"); do
  perf 2 "$TMP/cal2.$r" --calibrate -n 200 -e 32M
  perf 8 "$TMP/cal8.$r" --calibrate -n 100 -e 32M
done
sed 's/^/    /' "$TMP/cal2.1" "$TMP/cal8.1"  # the first of the runs; LOOM_TUNING takes the medians
tuning=$(python3 "$(dirname "$0")/tuning.py" "$(nproc)" "$TMP"/cal2.* -- "$TMP"/cal8.*)
echo "Calibrated: LOOM_TUNING=$tuning"
export LOOM_TUNING=$tuning
fi
if part 1; then
echo
echo "## 1. allreduce at 8 ranks: ring vs tree vs rd vs auto (out-of-place time, float sum)"
# The algorithms alternate at each size inside one loom-perf run (--compare-algos), so a slow
# phase of the machine hits them alike; each time is the median of ROUNDS rounds.
perf 8 "$TMP/small" allreduce --compare-algos ring,tree,rd,auto --rounds "$ROUNDS" \
  -b 8 -e 64K -f 2 -n 300 -w 30 -c 0 --outofplace-only
perf 8 "$TMP/large" allreduce --compare-algos ring,tree,auto --rounds "$ROUNDS" \
  -b 1M -e 64M -f 4 -n 5 -w 2 -c 0 --outofplace-only
"$BIN/loom-sim" allreduce -n 8 --preset local -b 8 -e 64M -f 2 >"$TMP/sim8"
algos_table "$TMP/sim8" ring,tree,rd,auto "$TMP/small"
echo
algos_table "$TMP/sim8" ring,tree,auto "$TMP/large"
fi

if part 2; then
echo
echo "## 2. deterministic vs default allreduce (busbw, out-of-place)"
echo "| ranks | size (B) | default busbw | deterministic busbw | ratio |"
echo "|---:|---:|---:|---:|---:|"
for n in 4 8; do
  for r in $(seq "$ROUNDS"); do
    perf $n "$TMP/def.$r" allreduce -b 16M -e 128M -f 2 -n 5 -w 2 -c 0 --outofplace-only
    perf $n "$TMP/det.$r" allreduce --deterministic -b 16M -e 128M -f 2 -n 5 -w 2 -c 0 --outofplace-only
  done
  $MEDIAN "$TMP"/def.? >"$TMP/def"
  $MEDIAN "$TMP"/det.? >"$TMP/det"
  rm -f "$TMP"/def.? "$TMP"/det.?
  python3 - "$n" "$TMP/def" "$TMP/det" <<'PY'
import sys
n = sys.argv[1]
def load(f):
    return {int(p[0]): float(p[7]) for p in (l.split() for l in open(f)) if len(p) == 13 and p[0].isdigit()}
d, e = load(sys.argv[2]), load(sys.argv[3])
for s in sorted(d):
    print(f"| {n} | {s} | {d[s]:.2f} | {e.get(s, 0):.2f} | {e.get(s, 0) / d[s]:.2f} |")
PY
done
fi

if part 3; then
echo
echo "## 3. loom-sim (local preset, calibrated) vs loom-perf, 2..8 ranks"
# Each prediction against a measurement taken right after its own calibration (this VM's memory
# rate drifts by up to 5x over minutes): see sim_validation.sh.
bash "$(dirname "$0")/sim_validation.sh" "$BIN"  # SIM_ROUNDS rounds (7 by default)
fi

if part 4; then
echo
echo "## 4. loom-sim tables (allreduce, 8 B..1 GiB)"
for preset in 8gpu-4efa 25gbe; do
  for n in 2 8 64 512 4096; do
    echo
    echo "### $preset, $n ranks"
    echo '```'
    start=$(date +%s.%N)
    "$BIN/loom-sim" allreduce -n $n --preset $preset -b 8 -e 1G -f 8
    echo "# loom-sim took $(echo "$(date +%s.%N) - $start" | bc) s"
    echo '```'
  done
done
fi
