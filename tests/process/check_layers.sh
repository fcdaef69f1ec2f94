#!/usr/bin/env bash
# The include check of docs/architecture.md: passes on this tree, and fails naming the file
# and line when an include goes up the layers (planted in a copy: the executor including the
# communicator, the vocabulary including a transport).
# Usage: bash check_layers.sh BIN_DIR   (BIN_DIR unused: the check reads the source tree)
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; sed 's/^/  /' "$TMP/out" | tail -20 >&2; failures=$((failures + 1)); }

"$SRC/scripts/check-layers.sh" "$SRC" >"$TMP/out" 2>&1 || fail "the tree does not pass its own check"
cp -r "$SRC/include" "$SRC/src" "$SRC/kernels" "$SRC/transports" "$TMP/"
mkdir -p "$TMP/copy" && mv "$TMP/include" "$TMP/src" "$TMP/kernels" "$TMP/transports" "$TMP/copy/"
plant() {  # FILE INCLUDE
  local file=$TMP/copy/$1
  sed -i "0,/^#include/s||#include \"$2\"\n#include|" "$file"
  local rc=0
  "$SRC/scripts/check-layers.sh" "$TMP/copy" >"$TMP/out" 2>&1 || rc=$?
  ((rc == 1)) || fail "planted $2 in $1: the check exited $rc"
  grep -q "UPWARD: $1:.*$2" "$TMP/out" || fail "planted $2 in $1: not named"
  sed -i "/#include \"${2//\//\\/}\"/d" "$file"
}
plant src/executor/engine.cpp core/comm_impl.hpp
plant src/collective/op.cpp transports/tcp/tcp_transport.hpp
"$SRC/scripts/check-layers.sh" "$TMP/copy" >"$TMP/out" 2>&1 || fail "the copy does not pass once the plants are removed"
if ((failures > 0)); then
  echo "check_layers: $failures failure(s)" >&2
  exit 1
fi
echo "check_layers: OK"
