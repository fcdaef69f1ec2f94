#!/usr/bin/env bash
# Runs the test suite under sanitizers, each in its own build directory:
#   asan: build-asan/, AddressSanitizer + UndefinedBehaviorSanitizer, the whole suite (unit,
#         in-process and process tests);
#   tsan: build-tsan/, ThreadSanitizer, the threaded unit tests (engine, failure monitor, store
#         server, threads-as-ranks collectives). The kernels' target_clones (an ifunc TSan cannot
#         run before its runtime is up) are disabled with LOOM_KERNELS_PORTABLE_ONLY.
# Usage: scripts/sanitize.sh [asan|tsan|all]   (default all)
# LOOM_SANITIZE_SUBSET: a ctest -R regex to run only part of the suite.
# LOOM_SANITIZE_JOBS: parallel ctest jobs (default 2).
# LOOM_SANITIZE_TARGETS: what the ASan build builds (default: everything; CI: what its subset runs).
# CI's subsets and targets: scripts/test.sh (LOOM_TEST_HARDENING=1).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
subset=${LOOM_SANITIZE_SUBSET:-}
jobs=${LOOM_SANITIZE_JOBS:-2}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
command -v ccache >/dev/null && generator+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# -O1 with line tables, as the sanitizers' documentation advises: reports keep their lines, the
# build takes a third less than at the library's usual -O3 -g. LOOM_OPT_FLAGS is emptied so that
# the layers do not add their -O3 back.
optimise=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DLOOM_OPT_FLAGS=")

run_suite() {  # DIR DEFAULT_REGEX
  local dir=$1 regex=${subset:-$2} args=()
  [[ -n $regex ]] && args=(-R "$regex")
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$jobs" "${args[@]}"
}

asan() {
  # UBSan without its null, alignment and vptr checks: they made each file compile 2.5x as long
  # under GCC 12 (comm_lifecycle.cpp at -O1: 41 s against 22 s); a null dereference is still
  # ASan's SEGV report, with its stack.
  local flags="-fsanitize=address,undefined -fno-sanitize=vptr,alignment,null"
  flags+=" -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S . -B build-asan "${generator[@]}" "${optimise[@]}" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DLOOM_BUILD_TESTS=ON -DLOOM_BUILD_BENCHMARKS=ON -DLOOM_WERROR=OFF -DLOOM_CUDA=OFF >/dev/null
  # (No -Werror in either sanitizer build: at -O1 with the sanitizers GCC 12 reports false
  # maybe-uninitialized and stringop-overflow warnings inside <regex> and std::vector::insert.
  # The main build, warnings as errors, is the one that keeps the code warning-free.)
  local targets=()
  for t in ${LOOM_SANITIZE_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build build-asan "${targets[@]}" --parallel "$(nproc)"
  # Leak checking is on; scripts/lsan.supp names the third-party allocations it ignores (hwloc's
  # plugins, OpenSSL's per-thread state), which need full unwinding to be recognised.
  # LOOM_ASAN_LEAKS=0 turns it off.
  ASAN_OPTIONS=detect_leaks=${LOOM_ASAN_LEAKS:-1}:fast_unwind_on_malloc=0:abort_on_error=1:strict_string_checks=1 \
    LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_suite build-asan ""
}

tsan() {
  # -Wno-tsan: GCC warns that TSan does not model atomic_thread_fence (used by the shm rings).
  local flags="-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan"
  cmake -S . -B build-tsan "${generator[@]}" "${optimise[@]}" \
    -DCMAKE_CXX_FLAGS="$flags -DLOOM_KERNELS_PORTABLE_ONLY" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DLOOM_BUILD_TESTS=ON -DLOOM_BUILD_BENCHMARKS=OFF -DLOOM_WERROR=OFF -DLOOM_CUDA=OFF >/dev/null
  cmake --build build-tsan --target loom-tests --parallel "$(nproc)"
  # The threaded tests; process tests (fork/exec of tools) are ASan's.
  # Without the ofi progress-thread pair (transport_pairs.hpp): under TSan its "messages of
  # mixed sizes" exchange stalled at its 60 s deadline in 2 of 5 CI runs on 2026-11-25 (about
  # 40% of the requests done), never in 18 local TSan runs nor in the plain suite, which keeps
  # running it. Open: docs/transports.md, "ofi progress thread".
  LOOM_TEST_SKIP_KINDS=${LOOM_TEST_SKIP_KINDS-ofi-threaded} \
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    run_suite build-tsan '^(errors|reliability|flight record|bootstrap|collectives|conformance: (caps|messages|a blocked|many|tag|a peer))'
}

case $which in
  asan) asan ;;
  tsan) tsan ;;
  all) asan && tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
