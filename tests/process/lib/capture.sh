# Shared by the process tests that run one tool at a time and check its stdout and stderr
# (loomrun_basic.sh, loom_info.sh, settings_ranges.sh). Source it: it provides TMP (removed at
# exit), OUT and ERR (where each run writes), failures, rc, elapsed, current (the case being
# checked) and fail MESSAGE (prints the case's output).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
failures=0
rc=0
elapsed=0
current=""

fail() {
  echo "FAIL: $current: $*" >&2
  echo "  --- stdout:" >&2
  sed 's/^/  /' "$OUT" | tail -40 >&2
  echo "  --- stderr:" >&2
  sed 's/^/  /' "$ERR" | tail -40 >&2
  failures=$((failures + 1))
}
