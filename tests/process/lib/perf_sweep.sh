# Shared by the loom-perf process tests (sourced, not a test itself): needs BIN; provides
# lib/common.sh's TMP, failures and fail, and sweep, usage_error and finish.
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# sweep N COLL ARGS...: runs one loom-perf sweep and checks exit code, rows and #wrong.
sweep() {
  local n=$1 coll=$2
  shift 2
  local out=$TMP/out
  timeout 300 "$BIN/loomrun" -n "$n" --only-rank 0 --no-prefix -- \
    "$BIN/loom-perf" "$coll" "$@" >"$out" 2>&1
  local rc=$?
  local rows wrong
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 13' "$out" | wc -l)
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' "$out" | wc -l)
  if [[ $rc -ne 0 || $rows -eq 0 || $wrong -ne 0 ]]; then
    echo "FAIL: loomrun -n $n loom-perf $coll $* (exit $rc, $rows rows, $wrong wrong)" >&2
    sed 's/^/  /' "$out" | tail -20 >&2
    failures=$((failures + 1))
  else
    echo "ok: -n $n $coll $* ($rows rows)"
  fi
}

# usage_error ARGS...: loom-perf ARGS must be a usage error (exit 2).
usage_error() {
  timeout 30 "$BIN/loom-perf" "$@" >/dev/null 2>&1
  local rc=$?
  if [[ $rc -ne 2 ]]; then
    echo "FAIL: loom-perf $* should be a usage error (exit 2, got $rc)" >&2
    failures=$((failures + 1))
  fi
}

# finish NAME: exits 1 naming the failure count, else prints that every sweep was verified.
finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$1: $failures failure(s)" >&2
    exit 1
  fi
  echo "$1: all sweeps verified"
}
