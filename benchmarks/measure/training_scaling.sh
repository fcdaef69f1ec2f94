#!/usr/bin/env bash
# loom-train scaling (samples/s at 1, 2, 4 ranks; strong scaling with a
# fixed global batch, weak scaling with a fixed per-rank batch; overlap on/off) and the loss
# curves of 1, 2 and 4 ranks at the same global batch. Prints markdown tables for
# docs/performance.md. Needs an idle machine with >= 4 cores for meaningful numbers.
# Usage: benchmarks/measure/training_scaling.sh [BIN_DIR]     (about 3 minutes)
set -euo pipefail
BIN=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}
STEPS=${STEPS:-30}
MODEL=(--layers 64,512,512,10 --optimizer sgd --log-every 1000)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() {  # run RANKS ARGS... -> the "final" line
  "$BIN/loomrun" -n "$1" --no-prefix -- "$BIN/loom-train" "${MODEL[@]}" "${@:2}" | awk '$1 == "final"'
}
field() { awk -v k="$1" '{ for (i = 1; i < NF; ++i) if ($i == k) print $(i + 1) }'; }

echo "## loom-train scaling ($(nproc) CPUs, $STEPS steps, layers 64,512,512,10, sgd)"
echo
echo "| scaling | ranks | global batch | per-rank batch | samples/s | speed-up | comm-wait |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for mode in strong weak; do
  base=""
  for n in 1 2 4; do
    if [[ $mode == strong ]]; then b=512; else b=$((128 * n)); fi
    line=$(run "$n" --batch-size "$b" --steps "$STEPS")
    sps=$(field samples/s <<<"$line")
    wait=$(field comm-wait <<<"$line")
    [[ -n $base ]] || base=$sps
    printf "| %s | %d | %d | %d | %.0f | %.2f | %.3f |\n" "$mode" "$n" "$b" $((b / n)) "$sps" \
      "$(awk -v a="$sps" -v b="$base" 'BEGIN { print a / b }')" "$wait"
  done
done
echo
echo "## Overlap of bucket allreduces with backward (4 ranks, batch 512, 1 MiB buckets)"
echo
echo "| overlap | samples/s | comm-wait |"
echo "|---|---:|---:|"
for ov in on off; do
  extra=()
  [[ $ov == off ]] && extra=(--no-overlap)
  line=$(run 4 --batch-size 512 --steps "$STEPS" --bucket-cap-mb 1 "${extra[@]}")
  printf "| %s | %.0f | %.3f |\n" "$ov" "$(field samples/s <<<"$line")" "$(field comm-wait <<<"$line")"
done

echo
echo "## Loss curves, global batch 256, 60 steps (1 rank is the reference)"
echo
for n in 1 2 4; do
  "$BIN/loomrun" -n "$n" --no-prefix -- "$BIN/loom-train" "${MODEL[@]}" --log-every 1 --batch-size 256 --steps 60 \
    | awk '$1 == "step" { print $2, $4 }' >"$TMP/loss.$n"
done
echo "| step | 1 rank | 2 ranks | 4 ranks | max relative difference |"
echo "|---:|---:|---:|---:|---:|"
paste "$TMP/loss.1" "$TMP/loss.2" "$TMP/loss.4" | awk '
  { d2 = $4 - $2; if (d2 < 0) d2 = -d2; d4 = $6 - $2; if (d4 < 0) d4 = -d4; d = (d2 > d4 ? d2 : d4) / $2
    if (d > worst) worst = d
    if ($1 == 1 || $1 % 10 == 0) printf "| %d | %.7f | %.7f | %.7f | %.2e |\n", $1, $2, $4, $6, d }
  END { printf "\nWorst relative difference over all steps: %.2e\n", worst }'
if "$BIN/loom-info" 2>/dev/null | grep -q LOOM_DETERMINISTIC; then
  for n in 1 4; do
    LOOM_DETERMINISTIC=1 "$BIN/loomrun" -n "$n" --no-prefix -x LOOM_DETERMINISTIC=1 -- "$BIN/loom-train" "${MODEL[@]}" \
      --batch-size 256 --steps 60 | awk '$1 == "final" { print $7 }' >"$TMP/det.$n"
  done
  if cmp -s "$TMP/det.1" "$TMP/det.4"; then
    echo "LOOM_DETERMINISTIC=1: 1 rank and 4 ranks end with identical weights (hash $(cat "$TMP/det.1"))."
  else
    echo "LOOM_DETERMINISTIC=1: weights DIFFER: $(cat "$TMP/det.1") vs $(cat "$TMP/det.4")."
  fi
fi
