#!/usr/bin/env bash
# loom's torch.distributed backend against this build tree: builds the extension (python/)
# into BUILD/torch-ext (incremental), then runs tests/torch/test_backend.py with it.
# Exits 77 (skipped) when torch is not installed (scripts/install-torch-backend.sh installs it).
# Usage: bash torch_backend.sh BIN_DIR   (BIN_DIR is build/bin; the build tree is its parent)
set -u
BIN=${1:?usage: torch_backend.sh BIN_DIR}
BUILD=$(cd "$BIN/.." && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: torch is not installed for $PYTHON (scripts/install-torch-backend.sh installs it)"
  exit 77
fi
log=$BUILD/torch-ext/build.log
mkdir -p "$BUILD/torch-ext"
# CI's build tree may not have the shared library yet; cmake --install needs every target.
if ! { cmake --build "$BUILD" --target loom_shared &&
  cmake --install "$BUILD" --prefix "$BUILD/loom-install"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "FAIL: could not install loom into $BUILD/loom-install" >&2
  exit 1
fi
lib=$BUILD/torch-ext/lib
if ! (cd "$SRC/python" && LOOM_PREFIX="$BUILD/loom-install" "$PYTHON" setup.py -q \
  build_py --build-lib "$lib" build_ext --build-lib "$lib" --build-temp "$BUILD/torch-ext/tmp") \
  >>"$log" 2>&1; then
  tail -50 "$log" >&2
  echo "FAIL: the torch extension does not build (log: $log)" >&2
  exit 1
fi
echo "ok: built loom.torch into $lib"
cd "$SRC/tests/torch" || exit 1
PYTHONPATH="$lib${PYTHONPATH:+:$PYTHONPATH}" timeout 1200 "$PYTHON" -m unittest -v test_backend 2>&1
