#!/usr/bin/env bash
# loom-train, the data-parallel training example:
#  - 4 ranks follow the 1-rank loss curve for the same global batch (SGD and Adam, with and
#    without gradient accumulation) within a relative tolerance of 1e-4 per step; bit for bit
#    (losses and final weights) when loom-info lists LOOM_DETERMINISTIC, run with it set;
#  - overlapped and non-overlapped bucket allreduces give identical weights;
#  - a 4-rank job killed (SIGKILL) after step 25 and resumed from its step-20 checkpoint ends
#    with exactly the weights and losses of an uninterrupted run.
# Usage: bash training.sh BIN_DIR
set -u
BIN=${1:?usage: training.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
TOL=1e-4
MODEL=(--layers 16,64,64,4 --batch-size 64 --bucket-cap-mb 0.004 --dataset-size 4096)

# train NAME RANKS ARGS...: runs loom-train under loomrun, output in $TMP/NAME.
train() {
  local name=$1 n=$2
  shift 2
  if ! timeout 300 "$BIN/loomrun" -n "$n" --no-prefix -x LOOM_TIMEOUT=60s -- "$BIN/loom-train" "${MODEL[@]}" "$@" \
    >"$TMP/$name" 2>"$TMP/$name.err"; then
    fail "loom-train $name ($n ranks, $*) exited non-zero"
    tail -20 "$TMP/$name.err" "$TMP/$name" >&2
    return 1
  fi
}
losses() { awk '$1 == "step" { print $2, $4 }' "$1"; }
final_hash() { awk '$1 == "final" { print $7 }' "$1"; }

# compare A B TOL WHAT: per-step losses of runs A and B agree within TOL (relative).
compare() {
  local a=$1 b=$2 tol=$3 what=$4 worst
  if [[ $(losses "$TMP/$a" | wc -l) -lt 10 ]] || [[ $(losses "$TMP/$a" | wc -l) -ne $(losses "$TMP/$b" | wc -l) ]]; then
    fail "$what: step counts differ or are too few"
    return
  fi
  worst=$(paste <(losses "$TMP/$a") <(losses "$TMP/$b") | awk '
    { d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (m < 1) m = 1; r = d / m; if (r > w) w = r }
    END { printf "%.3g", w }')
  if awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w <= t) }'; then
    echo "ok: $what: loss curves agree (worst relative difference $worst <= $tol)"
  else
    fail "$what: loss curves differ by $worst (> $tol)"
    paste <(losses "$TMP/$a") <(losses "$TMP/$b") | head -20 >&2
  fi
  # The loss must actually go down, or the comparison proves nothing.
  awk 'NR == 1 { first = $2 } { last = $2 } END { exit !(last < 0.8 * first) }' <(losses "$TMP/$a") ||
    fail "$what: the loss did not decrease ($(losses "$TMP/$a" | head -1) -> $(losses "$TMP/$a" | tail -1))"
}

declare -A LR=([sgd]=0.3 [adam]=0.01)
for opt in sgd adam; do
  train $opt.1 1 --optimizer $opt --lr ${LR[$opt]} --steps 30 &&
    train $opt.4 4 --optimizer $opt --lr ${LR[$opt]} --steps 30 &&
    compare $opt.1 $opt.4 $TOL "$opt 1 rank vs 4 ranks, batch 64"
done
train accum.4 4 --optimizer sgd --lr 0.3 --steps 30 --update-freq 2 &&
  compare sgd.1 accum.4 $TOL "sgd 1 rank vs 4 ranks with --update-freq 2"

if "$BIN/loom-info" 2>/dev/null | grep -q LOOM_DETERMINISTIC; then
  export LOOM_DETERMINISTIC=1
  train det.1 1 --optimizer adam --lr 0.01 --steps 30 && train det.4 4 --optimizer adam --lr 0.01 --steps 30
  if [[ -n $(final_hash "$TMP/det.1") ]] && cmp -s <(losses "$TMP/det.1") <(losses "$TMP/det.4") &&
    [[ $(final_hash "$TMP/det.1") == $(final_hash "$TMP/det.4") ]]; then
    echo "ok: LOOM_DETERMINISTIC=1: 1 rank and 4 ranks identical bit for bit"
  else
    fail "LOOM_DETERMINISTIC=1: 1 rank and 4 ranks differ: $(final_hash "$TMP/det.1") vs $(final_hash "$TMP/det.4")"
  fi
  unset LOOM_DETERMINISTIC
else
  echo "note: loom-info lists no LOOM_DETERMINISTIC; bitwise 1-vs-4 check skipped"
fi

# Overlap changes when allreduces start, never what they compute.
train nooverlap.4 4 --optimizer adam --lr 0.01 --steps 30 --no-overlap &&
  if [[ $(final_hash "$TMP/nooverlap.4") == $(final_hash "$TMP/adam.4") ]]; then
    echo "ok: --no-overlap gives the same weights bit for bit"
  else
    fail "--no-overlap changed the weights: $(final_hash "$TMP/nooverlap.4") vs $(final_hash "$TMP/adam.4")"
  fi

# Kill and resume.
CKPT=$TMP/ckpt.bin
train full.4 4 --optimizer adam --lr 0.01 --steps 40
if timeout 300 "$BIN/loomrun" -n 4 --no-prefix -x LOOM_TIMEOUT=30s -- "$BIN/loom-train" "${MODEL[@]}" \
  --optimizer adam --lr 0.01 --steps 40 --checkpoint "$CKPT" --checkpoint-every 10 --kill-at-step 25 \
  >"$TMP/killed" 2>"$TMP/killed.err"; then
  fail "the job with --kill-at-step 25 should have failed"
fi
# The last rank dies right after its step 25; rank 0 has surely finished step 24 by then (every
# rank entered step 25) and may or may not have seen step 25 complete, but never step 26.
grep -q "step 24 " "$TMP/killed" && ! grep -q "step 26 " "$TMP/killed" ||
  fail "the killed job should stop right after step 25: $(tail -3 "$TMP/killed")"
[[ -s $CKPT ]] || fail "no checkpoint written"
if train resumed 4 --optimizer adam --lr 0.01 --steps 40 --checkpoint "$CKPT" --checkpoint-every 10 --resume; then
  grep -q "resumed from .* at step 20" "$TMP/resumed" || fail "did not resume at step 20: $(head -3 "$TMP/resumed")"
  if [[ -n $(final_hash "$TMP/full.4") && $(final_hash "$TMP/full.4") == $(final_hash "$TMP/resumed") ]] &&
    cmp -s <(losses "$TMP/full.4" | awk '$1 > 20') <(losses "$TMP/resumed"); then
    echo "ok: killed at step 25, resumed from step 20: same losses and weights bit for bit"
  else
    fail "resumed run differs: hash $(final_hash "$TMP/full.4") vs $(final_hash "$TMP/resumed")"
    diff <(losses "$TMP/full.4" | awk '$1 > 20') <(losses "$TMP/resumed") | head >&2
  fi
fi
# A checkpoint from another configuration is refused.
out=$(timeout 60 "$BIN/loom-train" --layers 16,32,4 --checkpoint "$CKPT" --resume --steps 1 2>&1) &&
  fail "resuming a different model should fail"
grep -q "different model" <<<"$out" || fail "no clear error for a mismatched checkpoint: $out"

[[ $failures -eq 0 ]] || { echo "training: $failures failure(s)" >&2; exit 1; }
echo "training: all passed"
