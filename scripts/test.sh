#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage says when it starts, so that a log shows where the time went.
stage() { echo "== test.sh: $* (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }
stage "installing dependencies"
scripts/install-deps.sh
# LOOM_TEST_TORCH=1 (CI sets it) installs torch from PyPI first, so that ctest's
# process.torch_backend builds and tests the torch.distributed backend instead of skipping, and
# runs the 62-test subset of PyTorch's own distributed suite (tests/torch/ci_subset.txt, ranks
# forked: about a minute) against it afterwards.
if [[ ${LOOM_TEST_TORCH:-0} == 1 ]]; then tests/torch/ci.sh --install-only; fi
# The plain way first: `cmake -S . -B DIR` with CMake's default generator and no options (with
# nvcc on PATH that includes the CUDA path), configure and generate only; ctest's
# process.consumer builds the library that way, through add_subdirectory.
mkdir -p build
env -u CMAKE_GENERATOR cmake -S . -B build/plain-configure >build/plain-configure.log 2>&1 ||
  { cat build/plain-configure.log >&2; echo "plain configure failed" >&2; exit 1; }
# Includes go down the layers of docs/architecture.md (seconds; also ctest process.check_layers).
scripts/check-layers.sh
# Calls go down them too: the build links every layer alone with --no-undefined
# (loom_layer_check, cmake/LoomLayers.cmake; ctest process.layer_link also plants upward calls).
# Line tables only (-g1: backtraces keep file and line) make the build a fifth quicker than -g.
stage "building"
scripts/build.sh -DLOOM_WERROR=ON -DLOOM_BUILD_TESTS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
stage "running ctest"
(cd build && ctest --output-on-failure --timeout 900 "$@")
if [[ ${LOOM_TEST_TORCH:-0} == 1 ]]; then
  stage "PyTorch's distributed suite (subset)"
  tests/torch/ci.sh --suite-only build
fi

# LOOM_TEST_HARDENING=1 (CI sets it) also runs the fuzz targets and the sanitizer builds on a
# bounded subset (each in its own build directory; about 18 minutes more on 2 cores).
if [[ ${LOOM_TEST_HARDENING:-0} == 1 ]]; then
  stage "fuzzing"
  LOOM_FUZZ_SECONDS=${LOOM_FUZZ_SECONDS:-20} scripts/fuzz.sh
  stage "ThreadSanitizer"
  LOOM_SANITIZE_SUBSET='^(errors|reliability|flight record|bootstrap|conformance: (caps|messages|tag|a peer))' \
    scripts/sanitize.sh tsan
  stage "AddressSanitizer"
  LOOM_SANITIZE_SUBSET='errors|reliability|bootstrap|over tcp with (2|3) ranks|process.fault_tolerance|host-sim: |fences: ' \
    LOOM_SANITIZE_TARGETS='loom-tests loomrun loom-example-shrink' scripts/sanitize.sh asan
fi
stage "done"
