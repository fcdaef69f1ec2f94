#!/usr/bin/env bash
# run-torch-cuda.sh of a GPU bundle (scripts/gpu-bundle.sh copies this file there): builds loom's
# torch backend on the GPU machine against its own python3 and torch, and runs the backend's
# CUDA tests (tests/torch/test_backend_cuda.py: 2 ranks sharing GPU 0).
#
#   bash gpu-bundle/run-torch-cuda.sh OUTDIR [--build-only | --test-only | --suite-only]
#
# --build-only builds the extension into /tmp/loom-torch (e.g. in the background while
# first light runs); --test-only runs the tests against what --build-only built; --suite-only
# runs PyTorch's distributed suite on CUDA tensors instead (tests/torch/ci_subset_cuda.txt, its
# *_cuda tests, 2 ranks sharing the GPU: run_dist_suite.py --as-nccl --share-gpu --fork) into
# torch-suite-cuda.json (every test's outcome) and torch-suite-cuda.txt (counts, failures; its
# output goes to torch-cuda.log), within TORCH_SUITE_TIMEOUT seconds (default 90); exit 1 when a
# test of it failed.
#
# The bundle's libraries go on LD_LIBRARY_PATH but not its lib/cxx: torch needs the host's
# own libstdc++. TORCH_TESTS: the unittest names to run (default test_backend_cuda, all of them);
# TORCH_TEST_TIMEOUT: seconds for them (default 420). OUTDIR gets torch-cuda.log (build and test output) and torch-cuda.txt (the
# versions and the test summary). Exit status: 0 all tests passed; 1 a test failed; 2 the
# extension did not build.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run-torch-cuda.sh OUTDIR [--build-only | --test-only]}
phase=${2:-all}
[[ $phase == all || $phase == --build-only || $phase == --test-only || $phase == --suite-only ]] ||
  { echo "run-torch-cuda: unknown option '$phase'" >&2; exit 2; }
mkdir -p "$out"
log=$out/torch-cuda.log
summary=$out/torch-cuda.txt
PYTHON=${PYTHON:-python3}
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run_tests() {
  echo "== tests" >>"$log"
  local from
  from=$(wc -l <"$log")
  (cd "$here/torch/tests" &&
    PYTHONPATH="$work/lib" timeout "${TORCH_TEST_TIMEOUT:-420}" "$PYTHON" -m unittest -v "${TORCH_TESTS:-test_backend_cuda}") >>"$log" 2>&1
  local rc=$?
  tail -n +"$from" "$log" | grep -E '^(test_|Ran |OK|FAILED)' | tee -a "$summary"
  [[ $rc -eq 0 ]] || { tail -n +"$from" "$log" | grep -A30 -E '^(FAIL|ERROR):' | head -120; return 1; }
  return 0
}
run_suite() {
  local json=$out/torch-suite-cuda.json txt=$out/torch-suite-cuda.txt
  echo "== PyTorch's distributed suite on CUDA tensors (run_dist_suite.py)" >>"$log"
  (cd "$here/torch/tests" && PYTHONPATH="$work/lib:$here/torch/tests/pydeps" \
    timeout -k 5 "${TORCH_SUITE_TIMEOUT:-90}" \
    "$PYTHON" run_dist_suite.py --backend loom --as-nccl --share-gpu --fork --world-size 2 \
    --test-timeout 60 --names ci_subset_cuda.txt --out "$json") >>"$log" 2>&1
  local rc=$?
  "$PYTHON" - "$json" "$rc" >"$txt" 2>&1 <<'PY'
import json, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    r = json.load(open(path))
except (OSError, ValueError) as e:
    print(f"PyTorch suite on CUDA tensors: no report ({e}); runner exit {rc}")
    sys.exit(1)
c = r["counts"]
print(f"PyTorch suite on CUDA tensors, loom at 2 ranks sharing the GPU (torch {r['torch']}): "
      f"{c['pass']} passed, {c['fail']} failed, {c['skip']} skipped"
      f"{' (cut short: partial report)' if r['partial'] else ''}; runner exit {rc}")
for name, t in sorted(r["tests"].items()):
    print(f"  {t['outcome']:4} {t['seconds']:6.1f} s  {name}"
          + (f": {t['detail'].strip().splitlines()[-1][:200]}" if t["outcome"] != "pass" and t["detail"].strip() else ""))
sys.exit(1 if c["fail"] or r["partial"] else 0)
PY
  local judged=$?
  cat "$txt"
  return $judged
}
work=/tmp/loom-torch
if [[ $phase == --suite-only ]]; then
  [[ -f $work/BUILT ]] || { echo "run-torch-cuda: no extension built in $work" | tee -a "$out/torch-suite-cuda.txt"; exit 2; }
  run_suite
  exit $?
fi
if [[ $phase == --test-only ]]; then
  [[ -f $work/BUILT ]] || { echo "run-torch-cuda: no extension built in $work" | tee -a "$summary"; exit 2; }
  run_tests
  exit $?
fi
rm -rf "$work" && mkdir -p "$work"
cp -r "$here/torch/prefix" "$work/prefix"
gunzip "$work/prefix/lib/"*.a.gz "$work/prefix/lib/dev/"*.a.gz
while read -r so; do  # link-time names of the bundle's libraries: libhwloc.so.15 -> libhwloc.so
  ln -s "$here/lib/$so" "$work/prefix/lib/dev/${so%%.so.*}.so"
done <"$work/prefix/lib/dev/LINKS"
{
  echo "# loom torch backend on $(hostname), $(date -u +%FT%TZ)"
  "$PYTHON" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
  command -v nvcc >/dev/null && nvcc --version | tail -1
} >"$summary" 2>&1
cat "$summary"
echo "== building the extension" | tee "$log"
t0=$(date +%s)
if ! (cd "$here/torch/python" && MAX_JOBS=$(nproc) LOOM_PREFIX="$work/prefix" "$PYTHON" setup.py -q \
  build_py --build-lib "$work/lib" build_ext --build-lib "$work/lib" --build-temp "$work/tmp") \
  >>"$log" 2>&1; then
  tail -40 "$log"
  echo "extension build FAILED after $(($(date +%s) - t0)) s (log: torch-cuda.log)" | tee -a "$summary"
  exit 2
fi
echo "extension built in $(($(date +%s) - t0)) s" | tee -a "$summary"
touch "$work/BUILT"
[[ $phase == --build-only ]] && exit 0
run_tests
