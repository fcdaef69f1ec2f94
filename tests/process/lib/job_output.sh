# Shared by the process tests that run loomrun jobs into one output file and check what the ranks
# printed (process_calls.sh, rooted_mismatch.sh, mismatch_and_split.sh). Source it: it provides
# TMP (removed at exit), failures, fail MESSAGE (prints the end of $TMP/out) and finish NAME
# (the summary line and exit status).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  grep -v CONFIG "$TMP/out" | tail -40 | sed 's/^/  /' >&2
  failures=$((failures + 1))
}
finish() {
  if ((failures > 0)); then
    echo "$1: $failures failure(s)" >&2
    exit 1
  fi
  echo "$1: OK"
}
