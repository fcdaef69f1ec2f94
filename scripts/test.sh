#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DLOOM_WERROR=ON -DLOOM_BUILD_TESTS=ON
(cd build && ctest --output-on-failure --timeout 900 "$@")

# LOOM_TEST_HARDENING=1 (CI sets it) also runs the fuzz targets and the sanitizer builds on a
# bounded subset (each in its own build directory; about 15 minutes more on 2 cores).
if [[ ${LOOM_TEST_HARDENING:-0} == 1 ]]; then
  LOOM_FUZZ_SECONDS=${LOOM_FUZZ_SECONDS:-20} scripts/fuzz.sh
  LOOM_SANITIZE_SUBSET='^(errors|reliability|bootstrap|conformance: (caps|messages|tag|a peer))' \
    scripts/sanitize.sh tsan
  LOOM_SANITIZE_SUBSET='errors|reliability|bootstrap|over tcp with (2|3) ranks|process.fault_tolerance|host-sim: |fences: ' \
    scripts/sanitize.sh asan
fi
