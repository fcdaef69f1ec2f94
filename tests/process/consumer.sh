#!/usr/bin/env bash
# `cmake --install` into a temp prefix, then a separate project (examples/consumer) is built
# against it with find_package(loom) (shared and static) and with pkg-config, and run.
# Usage: bash consumer.sh BIN_DIR   (BIN_DIR is build/bin; the build tree is its parent)
set -u
out=""
BIN=${1:?usage: consumer.sh BIN_DIR}
BUILD=$(cd "$BIN/.." && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# CI's build tree may not have the shared library yet (it is not a dependency of the tests).
cmake --build "$BUILD" --target loom_shared >"$TMP/build.log" 2>&1 || { cat "$TMP/build.log" >&2; exit 1; }
if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1; then
  cat "$TMP/install.log" >&2
  exit 1
fi
for f in include/loom/loom.hpp include/loom/communicator.hpp lib/libloom.a lib/libloom.so \
  lib/cmake/loom/loomConfig.cmake lib/cmake/loom/loomConfigVersion.cmake \
  lib/pkgconfig/loom.pc lib/libloom.so.0 bin/loomrun bin/loom-info bin/loom-train; do
  [[ -e $PREFIX/$f ]] || fail "cmake --install did not install $f"
done
# Nothing from the source tree may leak into the installed package.
if grep -rq "$SRC" "$PREFIX/lib/cmake" "$PREFIX/lib/pkgconfig"; then
  fail "installed package files mention the source tree $SRC"
fi
echo "ok: cmake --install to $PREFIX"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if cmake -S "$SRC/examples/consumer" -B "$TMP/consumer" "${gen[@]}" -DCMAKE_PREFIX_PATH="$PREFIX" \
  >"$TMP/configure.log" 2>&1 && cmake --build "$TMP/consumer" >>"$TMP/configure.log" 2>&1; then
  echo "ok: examples/consumer builds with find_package(loom)"
  for exe in loom-consumer loom-consumer-static; do
    if out=$(timeout 60 "$TMP/consumer/$exe" 3 2>&1) && grep -q "correct on 3 ranks" <<<"$out"; then
      echo "ok: $exe 3"
    else
      fail "$exe 3: $out"
    fi
  done
  ldd "$TMP/consumer/loom-consumer" | grep -q "$PREFIX/lib/libloom.so" ||
    fail "loom-consumer is not linked to the installed libloom.so: $(ldd "$TMP/consumer/loom-consumer")"
  if ldd "$TMP/consumer/loom-consumer-static" | grep -q libloom; then
    fail "loom-consumer-static depends on libloom.so"
  fi
else
  cat "$TMP/configure.log" >&2
  fail "examples/consumer does not build against the installed package"
fi

# pkg-config: shared, then static with the private dependencies.
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
CXX=${CXX:-c++}
# shellcheck disable=SC2046
if $CXX -std=c++20 -O1 "$SRC/examples/consumer/main.cpp" -o "$TMP/pc-shared" \
  $(pkg-config --cflags --libs loom) 2>"$TMP/pc.log" &&
  out=$(LD_LIBRARY_PATH=$PREFIX/lib timeout 60 "$TMP/pc-shared" 2 2>&1) &&
  grep -q "correct on 2 ranks" <<<"$out"; then
  echo "ok: pkg-config --libs loom (shared)"
else
  fail "pkg-config shared build: $(cat "$TMP/pc.log") $out"
fi
# shellcheck disable=SC2046
if $CXX -std=c++20 -O1 "$SRC/examples/consumer/main.cpp" -o "$TMP/pc-static" \
  $(pkg-config --cflags loom) "$PREFIX/lib/libloom.a" $(pkg-config --static --libs loom | sed 's/-lloom\b//') \
  2>"$TMP/pc.log" && out=$(timeout 60 "$TMP/pc-static" 2 2>&1) &&
  grep -q "correct on 2 ranks" <<<"$out"; then
  echo "ok: pkg-config --static --libs loom (static)"
else
  fail "pkg-config static build: $(cat "$TMP/pc.log") ${out:-}"
fi

[[ $failures -eq 0 ]] || { echo "consumer: $failures failure(s)" >&2; exit 1; }
echo "consumer: all passed"
