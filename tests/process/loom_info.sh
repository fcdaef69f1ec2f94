#!/usr/bin/env bash
# Self-checking tests of loom-info: it lists the settings with their defaults, shows where a
# value comes from, and warns about LOOM_* variables that no setting declares.
# Usage: bash loom_info.sh BIN_DIR   (BIN_DIR holds loom-info). Exits non-zero on failure.
set -u

BIN_DIR=${1:?usage: loom_info.sh BIN_DIR}
INFO=$BIN_DIR/loom-info
if [[ ! -x $INFO ]]; then
  echo "FAIL: $INFO is missing" >&2
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err
failures=0
rc=0

fail() {
  echo "FAIL: $current: $*" >&2
  echo "  --- stdout:" >&2
  sed 's/^/  /' "$OUT" >&2
  echo "  --- stderr:" >&2
  sed 's/^/  /' "$ERR" >&2
  failures=$((failures + 1))
}

# info ARGS...: runs loom-info ARGS (at most 10 s) with no LOOM_* variable but those given with
# `env` before it; sets rc.
info() {
  local clean=()
  local name
  for name in $(compgen -e); do
    [[ $name == LOOM_* ]] && clean+=(-u "$name")
  done
  timeout 10 env "${clean[@]}" "$@" >"$OUT" 2>"$ERR"
  rc=$?
}

expect_rc() { [[ $rc -eq $1 ]] || fail "exit code $rc, expected $1"; }
# expect_text FILE REGEX: some line of FILE matches the extended REGEX.
expect_text() { grep -qE -- "$2" "$1" || fail "nothing matches /$2/ in $(basename "$1")"; }
expect_no_text() { ! grep -qE -- "$2" "$1" || fail "unexpected /$2/ in $(basename "$1")"; }

current="defaults"
info "$INFO"
expect_rc 0
expect_text "$OUT" '^loom [0-9]+\.[0-9]+\.[0-9]+$'
expect_text "$OUT" '^ +LOOM_TIMEOUT +duration +600s +default +600s$'
expect_text "$OUT" '^ +LOOM_RANK +integer +- +unset +-$'
expect_text "$OUT" '^reliability:$'
expect_text "$OUT" 'Deadline for every blocking wait'
expect_no_text "$ERR" 'warning'

current="--settings is the default"
info "$INFO"
cp "$OUT" "$TMP/default"
info "$INFO" --settings
expect_rc 0
cmp -s "$OUT" "$TMP/default" || fail "--settings prints something else than no option"

current="an environment override"
info LOOM_TIMEOUT=30s "$INFO"
expect_rc 0
expect_text "$OUT" '^ +LOOM_TIMEOUT +duration +600s +environment +30s$'

current="a secret is not shown"
info LOOM_SECRET=0123456789abcdef "$INFO"
expect_rc 0
expect_text "$OUT" '^ +LOOM_SECRET +string +- +environment +\(hidden'
expect_no_text "$OUT" '0123456789abcdef'

current="a misspelt variable"
info LOOM_TIMEOTU=1 "$INFO"
expect_rc 0
expect_text "$ERR" 'warning: LOOM_TIMEOTU is set but is not a loom setting'
expect_text "$ERR" 'did you mean LOOM_TIMEOUT\?'

current="an invalid value"
info LOOM_TIMEOUT=soon "$INFO"
expect_rc 1
expect_text "$ERR" 'LOOM_TIMEOUT'

current="usage"
info "$INFO" --help
expect_rc 0
expect_text "$OUT" '^Usage: loom-info'
info "$INFO" --version
expect_rc 0
expect_text "$OUT" '^loom [0-9]+\.[0-9]+\.[0-9]+$'
info "$INFO" --bogus
expect_rc 2

if [[ $failures -ne 0 ]]; then
  echo "loom_info: $failures check(s) failed" >&2
  exit 1
fi
echo "loom_info: all checks passed"
