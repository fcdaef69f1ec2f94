#!/usr/bin/env bash
# The link check of docs/architecture.md: every layer (cmake/LoomLayers.cmake) links as a shared
# library from its objects and those of the layers it declares below it, with --no-undefined
# (the build target loom_layer_check); a planted call from a layer into one above it fails that
# link, naming the symbol (tests/layer_link/: the executor calling the communicator through the
# public API, common calling the vocabulary's to_string(DataType)). Also: CMake declares the
# layers in the order of scripts/check_layers.py, so includes and links follow one order.
# Usage: bash layer_link.sh BIN_DIR   (BIN_DIR is build/bin; the build tree is its parent)
set -u
BIN=${1:?usage: layer_link.sh BIN_DIR}
BUILD=$(cd "$BIN/.." && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; tail -20 "$TMP/out" | sed 's/^/  /' >&2; failures=$((failures + 1)); }

: >"$TMP/out"
if python3 - "$SRC" >"$TMP/out" 2>&1 <<'PY'
import re, sys
root = sys.argv[1]
sys.path.insert(0, root + "/scripts")
import check_layers as cl
text = open(root + "/cmake/LoomLayers.cmake").read()
seen = []
for name, kind, folder in re.findall(r"^loom_layer\((\w+)\s+(DIRS|FILES)\s+(\S+)", text, re.M):
    folder = folder.split("/*")[0]
    index = cl.layer_of(folder)
    if index is None:
        sys.exit(f"layer {name}: {folder} is in no layer of check_layers.py")
    if seen and index < seen[-1][1]:
        sys.exit(f"layer {name} ({folder}: {cl.LAYERS[index][0]}) is declared after "
                 f"{seen[-1][0]} ({cl.LAYERS[seen[-1][1]][0]}), which check_layers.py puts above it")
    seen.append((name, index))
missing = {n for n, _ in cl.LAYERS[1:]} - {cl.LAYERS[i][0] for _, i in seen}
if missing:
    sys.exit(f"check_layers.py layers without a CMake layer: {sorted(missing)}")
print(f"ok: {len(seen)} CMake layers, in check_layers.py's order")
PY
then
  cat "$TMP/out"
else
  fail "cmake/LoomLayers.cmake's layers are not in check_layers.py's order"
fi

if cmake --build "$BUILD" --target loom_layer_check >"$TMP/out" 2>&1; then
  echo "ok: every layer links with only the layers below it"
else
  fail "loom_layer_check does not link (a call goes up the layers)"
fi

# plant TARGET SYMBOL ABOVE: the target's link fails naming SYMBOL, which the check library of
# layer ABOVE defines (so the call is to real code above, not to nothing).
plant() {
  local target=$1 symbol=$2 above=$3
  local lib=$BUILD/layer-check/libloom_layer_check_$above.so
  if ! nm -DC --defined-only "$lib" 2>/dev/null | grep -qF " $symbol"; then
    : >"$TMP/out"
    fail "$symbol is not defined in $lib: the plant in $target no longer calls real code"
    return
  fi
  if cmake --build "$BUILD" --target "$target" >"$TMP/out" 2>&1; then
    fail "$target linked: the planted upward call to $symbol went unnoticed"
  elif ! grep -qF "undefined reference to \`$symbol'" "$TMP/out"; then
    fail "$target failed without naming $symbol"
  else
    echo "ok: $target fails: undefined reference to $symbol"
  fi
}
plant loom_layer_plant_executor "loom::Communicator::rank() const" core
plant loom_layer_plant_common "loom::to_string(loom::DataType)" vocabulary

if ((failures > 0)); then
  echo "layer_link: $failures failure(s)" >&2
  exit 1
fi
echo "layer_link: OK"
