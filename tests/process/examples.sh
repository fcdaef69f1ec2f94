#!/usr/bin/env bash
# The examples run and check their own results.
# Usage: bash examples.sh BIN_DIR
set -u
BIN=${1:?usage: examples.sh BIN_DIR}
failures=0
run() {
  if ! out=$(timeout 120 "$@" 2>&1); then
    echo "FAIL: $*" >&2
    echo "$out" | sed 's/^/  /' >&2
    failures=$((failures + 1))
  else
    echo "ok: $*"
  fi
}
run "$BIN/loomrun" -n 4 "$BIN/loom-example-allreduce"
run "$BIN/loomrun" -n 1 "$BIN/loom-example-allreduce"
run "$BIN/loom-example-unique-id" 3
run "$BIN/loom-example-unique-id" 1
[[ $failures -eq 0 ]] || exit 1
echo "examples: all passed"
