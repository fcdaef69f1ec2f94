#!/usr/bin/env bash
# gpu-session.sh: everything a lent GPU machine runs for loom in one device call of at most 9
# minutes (docs/gpu.md, "The prepared GPU run"). Run from the repository root there, with the
# bundle (scripts/gpu-bundle.sh) carried as gpu-bundle/:
#
#   bash scripts/gpu-session.sh OUTDIR [--budget SECONDS] [--only STEPS] [--device cuda|host-sim]
#                               [--variants "V ..."] [--no-torch] [--torch-bench]
#
# 1. builds the torch extension against the machine's torch in the background, niced
#    (run-torch-cuda.sh --build-only), while
# 2. first light runs (run-first-light.sh, --budget seconds, default 300; --only: its steps,
#    default bundle,device,kernels,ipc,routes,dtypes,sweeps,stream; dtypes on 2 and 3 ranks over
#    cuda_ipc): loom-ipc-probe's diagnosis, the peer-read route against the cuda_ipc FIFOs
#    (device allreduce, 2 and 4 ranks, 8 B .. 256 MiB, #wrong), every collective x dtype x op on
#    device buffers, the device and host sweeps, stream order; then, once per --variants entry
#    (settings joined by ',', e.g. LOOM_CUDA_IPC_SLOT_SIZE=16M; default none), the 2-rank device
#    allreduce 1 MiB .. 256 MiB into variants.txt (at most 40 s each);
# 3. the torch backend's CUDA tests (run-torch-cuda.sh --test-only, at most 90 s); when one
#    fails, its first test again under CUDA_DEVICE_MAX_CONNECTIONS=32, then
#    LOOM_STREAM_GATE=wait-value, then LOOM_CUDA_IPC_PEER_READ=off (30 s each, while the session
#    has run under 420 s), appended to torch-cuda.log/.txt;
# 4. PyTorch's distributed suite on CUDA tensors (run-torch-cuda.sh --suite-only:
#    tests/torch/ci_subset_cuda.txt, 2 ranks sharing the GPU, at most 80 s, while the session has
#    run under 450 s);
# 5. with --torch-bench only: loom against gloo through torch.distributed on CPU tensors, 2 and
#    4 ranks (benchmarks/torch/bench_collectives.py), at most 45 s each.
# --no-torch leaves out 1, 3 and 4. --device host-sim runs first light on the host simulation
# (small sizes) and the torch steps as they are (their CUDA tests skip without a GPU): a dry run
# of this script and the bundle, not of the GPU.
# OUTDIR ends with at most 8 files (what the device tool brings back): summary.md, results.tsv,
# first-light.tar.gz, torch-cuda.txt, torch-cuda.log, torch-suite-cuda.txt,
# torch-suite-cuda.json, and variants.txt or session.txt (this script's own lines; with
# --torch-bench, torch-bench-2.txt and -4.txt in their place).
# Exit status: first light's, or 1 when a torch step failed and first light passed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle
out=${1:?usage: gpu-session.sh OUTDIR [--budget SECONDS] [--only STEPS]}
shift
budget=300
only=bundle,device,kernels,ipc,routes,dtypes,sweeps,stream
device=cuda
variants=""
torch=1
torch_bench=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --budget) budget=${2:?--budget SECONDS}; shift 2 ;;
    --only) only=${2:?--only STEPS}; shift 2 ;;
    --device) device=${2:?--device cuda|host-sim}; shift 2 ;;
    --variants) variants=${2?--variants "V ..."}; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --torch-bench) torch_bench=1; shift ;;
    *) echo "gpu-session: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $device == cuda || $device == host-sim ]] || { echo "gpu-session: --device cuda or host-sim" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ -d $bundle ]] || { echo "gpu-session: no $bundle (carry gpu-bundle)" >&2; exit 2; }
t0=$(date +%s)
log=$out/session.txt  # this script's lines, unless variants.txt or the bench files take its place
[[ -n $variants || $torch_bench -eq 1 ]] && log=/dev/null
stamp() { echo "== gpu-session: $* at $(($(date +%s) - t0)) s" | tee -a "$log"; }
elapsed() { echo $(($(date +%s) - t0)); }

build_pid=""
if ((torch)); then
  stamp "torch extension build (background) and first light"
  MAX_JOBS=6 nice -n 19 bash "$bundle/run-torch-cuda.sh" "$out" --build-only >/tmp/torch-build.out 2>&1 &
  build_pid=$!
else
  stamp "first light"
fi
bash "$bundle/run-first-light.sh" "$out" --device "$device" --budget "$budget" --only "$only" \
  --dtypes-paths "2 cuda_ipc,3 cuda_ipc"
fl=$?
for variant in $variants; do
  stamp "2-rank device allreduce with $variant"
  echo "# variant: $variant" >>"$out/variants.txt"
  # shellcheck source=scripts/gpu-env.sh disable=SC2086,SC2163 # $variant splits at IFS=,
  (source "$bundle/env.sh" && IFS=, && export $variant && timeout -k 5 40 "$bundle/bin/loomrun" \
    -n 2 --timeout 35s --only-rank 0 --no-prefix "$bundle/bin/loom-perf" allreduce \
    --device "$device" -b 1M -e 256M -f 4 -n 10 -w 3) >>"$out/variants.txt" 2>&1 ||
    fl=$((fl ? fl : 1))
  grep -E '^ +[0-9]+ ' "$out/variants.txt" | tail -5
done
tc=0
suite=0
if ((torch)); then
  stamp "first light exit $fl; waiting for the torch build"
  wait "$build_pid"
  built=$?
  tail -3 /tmp/torch-build.out
  if [[ $built -ne 0 ]]; then
    stamp "torch extension build failed ($built)"
    tc=2
  else
    stamp "torch CUDA tests"
    TORCH_TEST_TIMEOUT=90 bash "$bundle/run-torch-cuda.sh" "$out" --test-only
    tc=$?
    if ((tc == 1)); then
      for variant in CUDA_DEVICE_MAX_CONNECTIONS=32 LOOM_STREAM_GATE=wait-value \
        LOOM_CUDA_IPC_PEER_READ=off; do
        if (($(elapsed) > 420)); then
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
    if (($(elapsed) > 450)); then
      stamp "no time left for PyTorch's suite on CUDA tensors"
      echo "not run: the session had run $(elapsed) s" >"$out/torch-suite-cuda.txt"
      suite=1
    else
      stamp "PyTorch's distributed suite on CUDA tensors"
      TORCH_SUITE_TIMEOUT=80 bash "$bundle/run-torch-cuda.sh" "$out" --suite-only | head -20
      suite=${PIPESTATUS[0]}
    fi
  fi
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
[[ -f $log ]] && sed -n '/^## Targets/,/^### Reduction kernels/p' "$out/summary.md" >>"$log" 2>/dev/null
stamp "done: first light $fl, torch tests $tc, PyTorch suite $suite, torch bench $bench_rc"
((fl != 0)) && exit "$fl"
((tc != 0 || suite != 0 || bench_rc != 0)) && exit 1
exit 0
