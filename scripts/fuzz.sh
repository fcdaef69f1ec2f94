#!/usr/bin/env bash
# Builds loom's libFuzzer targets (fuzz/) with clang, ASan and UBSan into build-fuzz/, then runs
# each for LOOM_FUZZ_SECONDS (default 25) as a ctest. Exits non-zero on any crash; 77 (skip) when
# clang is not installed (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ is not installed; skipping" >&2
  exit 77
fi
seconds=${LOOM_FUZZ_SECONDS:-25}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
command -v ccache >/dev/null && generator+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 with line tables (and no -O3 for the layers: LOOM_OPT_FLAGS), as for scripts/sanitize.sh:
# the build takes a third less time, and reports keep their lines.
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DLOOM_OPT_FLAGS=" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DLOOM_BUILD_FUZZERS=ON -DLOOM_CUDA=OFF -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCHMARKS=OFF \
  -DLOOM_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build build-fuzz --target loom-fuzz-tcp-header loom-fuzz-tcp-hello \
  loom-fuzz-shm-card loom-fuzz-bootstrap-messages \
  --parallel "$(nproc)"
ctest --test-dir build-fuzz -L fuzz --output-on-failure
