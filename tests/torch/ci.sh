#!/usr/bin/env bash
# What CI can run for the torch backend (the lead wires it into .ci/run): installs torch from
# PyPI when absent (~1.5 min, ~4 GiB with its CUDA libraries), then
#   1. tests/process/torch_backend.sh (builds the extension against BUILD, runs
#      tests/torch/test_backend.py; also part of ctest as process.torch_backend), and
#   2. PyTorch's distributed suite on the subset tests/torch/ci_subset.txt, loom at 2 ranks,
#      failing when a test of the subset that is expected to pass does not. Ranks are forked
#      from the runner (run_dist_suite.py --fork: torch is imported once, not per rank and test).
# Usage: tests/torch/ci.sh [--install-only | --quick | --suite-only] [BUILD_DIR]   (default build)
#   --install-only  installs torch (and the suite's numpy, expecttest) and stops
#   --quick         the suite part runs tests/torch/ci_subset_quick.txt (what CI runs)
#   --suite-only    skips step 1 (ctest ran it already)
set -euo pipefail
mode=all
subset=ci_subset.txt
while [[ ${1:-} == --* ]]; do
  case $1 in
    --install-only) mode=install ;;
    --quick) subset=ci_subset_quick.txt ;;
    --suite-only) mode=suite ;;
    *) echo "usage: $0 [--install-only | --quick | --suite-only] [BUILD_DIR]" >&2; exit 2 ;;
  esac
  shift
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
pip_install() {  # Debian's python3 is externally managed: --break-system-packages there
  "$PYTHON" -m pip install -q "$@" 2>/dev/null || "$PYTHON" -m pip install -q --break-system-packages "$@"
}
"$PYTHON" -c "import torch" 2>/dev/null || pip_install torch
"$PYTHON" -c "import numpy, expecttest" 2>/dev/null || pip_install numpy expecttest
[[ $mode == install ]] && exit 0
BUILD=$(cd "${1:-$SRC/build}" && pwd)
[[ $mode == suite ]] || bash "$SRC/tests/process/torch_backend.sh" "$BUILD/bin"
out=$(mktemp -d)
PYTHONPATH="$BUILD/torch-ext/lib" "$PYTHON" "$SRC/tests/torch/run_dist_suite.py" --backend loom \
  --world-size 2 --fork --names "$SRC/tests/torch/$subset" --out "$out/loom-2.json" >"$out/log" 2>&1 ||
  true
"$PYTHON" - "$out/loom-2.json" "$SRC/tests/torch/ci_expected_fail.txt" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
expected = {l.split()[0] for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
bad = [n for n, t in report["tests"].items() if t["outcome"] == "fail" and n not in expected]
c = report["counts"]
print(f"PyTorch distributed suite subset, loom at 2 ranks: {c['pass']} passed, {c['fail']} failed, "
      f"{c['skip']} skipped ({len(expected)} expected to fail: tests/torch/ci_expected_fail.txt says why)")
for n in bad:
    print(f"unexpected failure: {n}\n{report['tests'][n]['detail'][-1500:]}")
sys.exit(1 if bad else 0)
PY
