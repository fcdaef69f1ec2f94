#!/usr/bin/env bash
# gpu-session.sh: everything a lent GPU machine runs for loom in one device call (issues 25 and
# 26; docs/gpu.md, "Running first light"). Run from the repository root there, with the bundle
# (scripts/gpu-bundle.sh) carried as gpu-bundle/:
#
#   bash scripts/gpu-session.sh OUTDIR [--budget SECONDS] [--only STEPS] [--variants "V ..."]
#                               [--torch-bench]
#
# 1. builds the torch extension against the machine's torch in the background, niced
#    (run-torch-cuda.sh --build-only), while
# 2. first light runs (run-first-light.sh, --budget seconds, default 300; --only: its steps);
#    then the 2-rank device allreduce (1 MiB .. 256 MiB, in and out of place) once per variant,
#    into variants.txt (at most 40 s each): a variant is settings joined by ',', e.g.
#    LOOM_CUDA_IPC_ROUTE=staged,LOOM_CUDA_IPC_SLOT_SIZE=16M; default: "LOOM_CUDA_IPC_ROUTE=staged
#    LOOM_CUDA_IPC_SLOT_SIZE=16M LOOM_STREAM_GATE=wait-value" ("" for none);
# 3. the torch backend's CUDA tests (run-torch-cuda.sh --test-only, at most 120 s); when one
#    fails, its first test (one call on a side stream, then one on the default stream) again
#    under each diagnosis variant while the session has run under 540 s (at most 30 s each,
#    appended to torch-cuda.log/.txt): CUDA_DEVICE_MAX_CONNECTIONS=32 (if it passes: the
#    default stream's gate and loom's own stream shared a hardware queue), then
#    LOOM_STREAM_GATE=wait-value (no CUDA host-function thread held), then
#    LOOM_TRANSPORTS=^cuda_ipc (the staged path);
# 4. with --torch-bench only (measured on 2026-11-30, docs/torch.md): through torch.distributed
#    on CPU tensors, loom against gloo at 2 and 4 ranks on the machine's 16 cores: all_reduce
#    8 B .. 64 MiB (benchmarks/torch/bench_collectives.py), at most 45 s each.
# OUTDIR ends with at most 8 files (what the device tool brings back): summary.md, results.tsv,
# first-light.tar.gz, variants.txt, torch-cuda.log, torch-cuda.txt, torch-bench-2.txt,
# torch-bench-4.txt.
# Exit status: first light's, or 1 when a torch step failed and first light passed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle
out=${1:?usage: gpu-session.sh OUTDIR [--budget SECONDS]}
shift
budget=300
only=()
variants="LOOM_CUDA_IPC_ROUTE=staged LOOM_CUDA_IPC_SLOT_SIZE=16M LOOM_STREAM_GATE=wait-value"
torch_bench=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --budget) budget=${2:?--budget SECONDS}; shift 2 ;;
    --only) only=(--only "${2:?--only STEPS}"); shift 2 ;;
    --variants) variants=${2?--variants "V ..."}; shift 2 ;;
    --torch-bench) torch_bench=1; shift ;;
    *) echo "gpu-session: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ -d $bundle ]] || { echo "gpu-session: no $bundle (carry gpu-bundle)" >&2; exit 2; }
t0=$(date +%s)
stamp() { echo "== gpu-session: $* at $(($(date +%s) - t0)) s"; }

stamp "torch extension build (background) and first light"
MAX_JOBS=6 nice -n 19 bash "$bundle/run-torch-cuda.sh" "$out" --build-only >/tmp/torch-build.out 2>&1 &
build_pid=$!
bash "$bundle/run-first-light.sh" "$out" --budget "$budget" "${only[@]}"
fl=$?
for variant in $variants; do
  stamp "2-rank device allreduce with $variant"
  echo "# variant: $variant" >>"$out/variants.txt"
  # shellcheck source=scripts/gpu-env.sh disable=SC2086,SC2163 # $variant splits at IFS=,
  (source "$bundle/env.sh" && IFS=, && export $variant && timeout -k 5 40 "$bundle/bin/loomrun" \
    -n 2 --timeout 35s --only-rank 0 --no-prefix "$bundle/bin/loom-perf" allreduce \
    --device "${LOOM_DEVICE:-cuda}" -b 1M -e 256M -f 4 -n 10 -w 3) >>"$out/variants.txt" 2>&1 ||
    fl=$((fl ? fl : 1))
  grep -E '^ +[0-9]+ ' "$out/variants.txt" | tail -5
done
stamp "first light exit $fl; waiting for the torch build"
wait "$build_pid"
built=$?
tail -3 /tmp/torch-build.out
[[ $built -eq 0 ]] || { stamp "torch extension build failed ($built)"; exit $((fl ? fl : 1)); }

stamp "torch CUDA tests"
TORCH_TEST_TIMEOUT=120 bash "$bundle/run-torch-cuda.sh" "$out" --test-only
tc=$?
if ((tc == 1)); then
  for variant in CUDA_DEVICE_MAX_CONNECTIONS=32 LOOM_STREAM_GATE=wait-value \
    LOOM_TRANSPORTS=^cuda_ipc; do
    if (($(date +%s) - t0 > 540)); then
      stamp "no time left for the torch rerun with $variant"
      continue
    fi
    stamp "torch CUDA first test again with $variant"
    echo "== variant $variant" | tee -a "$out/torch-cuda.log" >>"$out/torch-cuda.txt"
    env "$variant" TORCH_TEST_TIMEOUT=30 \
      TORCH_TESTS=test_backend_cuda.CudaTensors.test_a_side_stream_then_default_stream \
      bash "$bundle/run-torch-cuda.sh" "$out" --test-only | tail -3
  done
fi

bench_rc=0
if ((torch_bench)); then
  stamp "torch CPU bench, loom vs gloo"
  unset LOOM_DEVICE  # the bench is CPU tensors on the real machine
  export PYTHONPATH=/tmp/loom-torch/lib LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for n in 2 4; do
    (cd "$root" && timeout -k 5 45 python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
      benchmarks/torch/bench_collectives.py -c all_reduce -b 8 -e 64M -f 8 --repeat 3 \
      --min-seconds 0.1) >"$out/torch-bench-$n.txt" 2>&1 || bench_rc=1
    grep -v '^\s*$' "$out/torch-bench-$n.txt" | tail -14
  done
fi
stamp "done: first light $fl, torch tests $tc, torch bench $bench_rc"
((fl != 0)) && exit "$fl"
((tc != 0 || bench_rc != 0)) && exit 1
exit 0
