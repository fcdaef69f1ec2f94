#!/usr/bin/env bash
# One host, large messages from ordinary buffers: loom's alltoall and sendrecv against Open MPI's
# (vader, which reads a peer's buffer with process_vm_readv), at 2, 4 and 8 ranks, and torch's
# all_to_all_single over loom against gloo. Every round runs each variant once (so a slow phase
# of a shared machine hits all alike); each table cell is the median busbw (GB/s) over the rounds.
#
#   benchmarks/measure/shm_single_copy.sh [BIN_DIR]
#
# Variants: loom from plain buffers (the default, --device host), loom from loom::host_alloc
# buffers (--device host-shared), loom with single copy off (LOOM_SHM_SINGLE_COPY=off: the slots
# only), Open MPI (mpi-exchange-perf over vader). Environment:
#   RANKS="2 4 8"  COLLS="alltoall sendrecv"  ROUNDS=3  SIZES="-b 256K -e 64M -f 4"  ITERS=20
#   WRAP=""        a prefix for every timed run (e.g. "flock /tmp/bench.lock chrt -f 5")
#   TORCH=auto     torch's all_to_all_single vs gloo when loom.torch imports (0: skip)
#   TORCH_SIZES="-b 64K -e 64M -f 4"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$ROOT/build/bin}
RANKS=${RANKS:-2 4 8}
COLLS=${COLLS:-alltoall sendrecv}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:--b 256K -e 64M -f 4}
ITERS=${ITERS:-20}
WRAP=${WRAP:-}
TORCH=${TORCH:-auto}
TORCH_SIZES=${TORCH_SIZES:--b 64K -e 64M -f 4}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

for tool in loomrun loom-perf mpi-exchange-perf; do
  [[ -x $BIN/$tool ]] || { echo "missing $BIN/$tool (build it)" >&2; exit 2; }
done

# loom VARIANT RANKS COLL OUT: one loom-perf run of rank 0's table.
loom() {
  local env=() flags=()
  case $1 in
    plain) ;;
    host_alloc) flags=(--device host-shared) ;;
    slots) env=(LOOM_SHM_SINGLE_COPY=off) ;;
  esac
  # shellcheck disable=SC2086
  env "${env[@]}" $WRAP "$BIN/loomrun" -n "$2" --only-rank 0 --no-prefix -- "$BIN/loom-perf" "$3" \
    $SIZES -n "$ITERS" -w 3 --outofplace-only "${flags[@]}" >"$4"
}

mpi() {  # mpi RANKS COLL OUT
  # shellcheck disable=SC2086
  $WRAP mpirun --allow-run-as-root --oversubscribe -np "$1" --mca pml ob1 --mca btl vader,self \
    "$BIN/mpi-exchange-perf" "$2" $SIZES -n "$ITERS" -w 3 --outofplace-only >"$3" 2>/dev/null
}

VARIANTS=(plain host_alloc slots mpi)
echo "# shm single copy: $(nproc) CPUs, $(date -u +%F), loom $(git -C "$ROOT" rev-parse --short HEAD)"
echo "# busbw GB/s, median of $ROUNDS interleaved rounds; ratio = loom plain / Open MPI"
for n in $RANKS; do
  for coll in $COLLS; do
    for r in $(seq "$ROUNDS"); do
      for v in "${VARIANTS[@]}"; do
        out="$TMP/$coll.$n.$v.$r"
        if [[ $v == mpi ]]; then mpi "$n" "$coll" "$out"; else loom "$v" "$n" "$coll" "$out"; fi
      done
    done
    python3 - "$TMP" "$coll" "$n" "$ROUNDS" "${VARIANTS[@]}" <<'PY'
import statistics, sys
tmp, coll, n, rounds, variants = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
def busbw(path):  # size -> busbw of the out-of-place columns (loom-perf's and the baseline's)
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 9 and p[0].isdigit():
            rows[int(p[0])] = float(p[7])
    return rows
med = {}
for v in variants:
    runs = [busbw(f"{tmp}/{coll}.{n}.{v}.{r}") for r in range(1, rounds + 1)]
    med[v] = {s: statistics.median(r[s] for r in runs if s in r) for s in runs[0]}
print(f"\n{coll}, {n} ranks\n")
print("| size | loom plain | loom host_alloc | loom slots only | Open MPI | plain / MPI |")
print("|---:|---:|---:|---:|---:|---:|")
for s in sorted(med["plain"]):
    cells = [f"{med[v].get(s, float('nan')):.2f}" for v in variants]
    ratio = med["plain"][s] / med["mpi"][s] if med["mpi"].get(s) else float("nan")
    size = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
    print(f"| {size} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
PY
  done
done

if [[ $TORCH == 0 ]] || ! python3 -c "import torch, loom.torch" 2>/dev/null; then
  [[ $TORCH == 0 ]] || echo -e "\n# torch: loom.torch not installed (scripts/install-torch-backend.sh)"
  exit 0
fi
echo -e "\n# torch all_to_all_single, loom vs gloo (median of $ROUNDS alternating repeats)"
for n in $RANKS; do
  # shellcheck disable=SC2086
  $WRAP python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
    "$ROOT/benchmarks/torch/bench_collectives.py" -c all_to_all_single $TORCH_SIZES \
    --repeat "$ROUNDS" 2>/dev/null
done
