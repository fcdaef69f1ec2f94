#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DLOOM_WERROR=ON -DLOOM_BUILD_TESTS=ON
cd build
ctest --output-on-failure --timeout 900 "$@"
