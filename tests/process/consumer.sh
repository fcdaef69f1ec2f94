#!/usr/bin/env bash
# `cmake --install` into a temp prefix, then a separate project (examples/consumer) is built
# against it with find_package(loom) (shared and static) and with pkg-config, and run; then the
# same project builds loom's source tree with add_subdirectory, with CMake's default generator.
# No program of a user's has the host-simulated device (it is in the testing library only).
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

# A program linking only loom (not loom_testing) refuses LOOM_DEVICE=host-sim, saying why.
no_host_sim() {
  local got
  if got=$(LOOM_DEVICE=host-sim timeout 60 "$1" 2 2>&1); then
    fail "$2 ran with LOOM_DEVICE=host-sim: libloom has the test device: $got"
  elif ! grep -q "host-sim is a test device: link loom_testing" <<<"$got"; then
    fail "$2 with LOOM_DEVICE=host-sim failed without saying why: $got"
  else
    echo "ok: $2 refuses LOOM_DEVICE=host-sim"
  fi
}

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
  no_host_sim "$TMP/consumer/loom-consumer" "installed loom-consumer"
  ldd "$TMP/consumer/loom-consumer" | grep -q "$PREFIX/lib/libloom.so" ||
    fail "loom-consumer is not linked to the installed libloom.so: $(ldd "$TMP/consumer/loom-consumer")"
  if ldd "$TMP/consumer/loom-consumer-static" | grep -q libloom; then
    fail "loom-consumer-static depends on libloom.so"
  fi
else
  cat "$TMP/configure.log" >&2
  fail "examples/consumer does not build against the installed package"
fi

# add_subdirectory(loom) from the outside project, configured the plain way (CMake's default
# generator, no options: with nvcc on PATH loom's CUDA path is built too), except that loom's
# layers are compiled at -O0 instead of -O3 (LOOM_OPT_FLAGS): what this checks is how loom's
# targets fit into another project, and -O0 halves the time it takes. Kept in the build tree so
# that a second run rebuilds only what changed.
VENDOR=$BUILD/consumer-vendored
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if cmake -S "$SRC/examples/consumer" -B "$VENDOR" -DLOOM_SOURCE_DIR="$SRC" "${launcher[@]}" \
  -DLOOM_OPT_FLAGS=-O0 \
  >"$TMP/vendor.log" 2>&1 && cmake --build "$VENDOR" --parallel "$(nproc)" \
  --target loom-consumer loom-consumer-static >>"$TMP/vendor.log" 2>&1; then
  echo "ok: examples/consumer builds loom with add_subdirectory ($(grep -m1 '^CMAKE_GENERATOR:' \
    "$VENDOR/CMakeCache.txt" | cut -d= -f2))"
  for exe in loom-consumer loom-consumer-static; do
    if out=$(timeout 60 "$VENDOR/$exe" 3 2>&1) && grep -q "correct on 3 ranks" <<<"$out"; then
      echo "ok: vendored $exe 3"
    else
      fail "vendored $exe 3: $out"
    fi
  done
  no_host_sim "$VENDOR/loom-consumer" "vendored loom-consumer"
  # Vendored, loom::loom is the static library, and loom's own tests are not part of the build.
  if ldd "$VENDOR/loom-consumer" | grep -q libloom; then
    fail "vendored loom-consumer depends on libloom.so"
  fi
  [[ ! -e $VENDOR/loom/tests ]] || fail "add_subdirectory(loom) configured loom's tests"
else
  tail -40 "$TMP/vendor.log" >&2
  fail "examples/consumer does not build loom with add_subdirectory"
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
