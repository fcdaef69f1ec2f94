#!/usr/bin/env bash
# loom over shared memory against Open MPI (run on a quiet machine; about 5 minutes): loom and
# Open MPI's MPI_Allreduce (vader shared-memory BTL) side by side, fp32 sum allreduce from 16 B to
# 256 MiB at 2 and 4 ranks, with ratios (benchmarks/compare.py); the memory-bandwidth floor
# (membw-floor); 8 B latency with many iterations; and 8 ranks on this machine's cores
# (oversubscribed) through a 256 MiB sweep. Every loom and MPI row is verified (#wrong 0).
#   bash benchmarks/measure/shm_vs_mpi.sh [BUILD_DIR]  (default build/; writes BUILD_DIR/shm_vs_mpi/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
OUT=${SHM_VS_MPI_OUT:-$BUILD/shm_vs_mpi}
mkdir -p "$OUT"
for tool in loomrun loom-perf mpi-allreduce-perf membw-floor; do
  [[ -x $BIN/$tool ]] || { echo "shm_vs_mpi.sh: $BIN/$tool is missing (build with scripts/build.sh)" >&2; exit 1; }
done
echo "# loom over shm vs Open MPI, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"

echo
echo "## Memory-bandwidth floor (membw-floor -s 256M)"
"$BIN/membw-floor" -s 256M -n 5 | tee "$OUT/membw.txt"
cat <<'TXT'
# Floor for a ring allreduce of S bytes on n ranks of one host: every rank must reduce
# (n-1)/n*S incoming bytes and copy (n-1)/n*S bytes of results, i.e. move at least
# 2(n-1)/n*S bytes through a copy or a fused add; busbw = 2(n-1)/n*S/t, so the time floor
# (bytes moved / copy rate) caps busbw at about the single-thread copy rate with one core per
# rank, less when the ranks share the memory bus or outnumber the cores.
TXT

echo
echo "## loom vs Open MPI, fp32 sum allreduce, 2 and 4 ranks, 16 B .. 256 MiB (compare.py)"
python3 "$ROOT/benchmarks/compare.py" --bin-dir "$BIN" --ranks 2,4 --sizes "-b 16 -e 256M -f 4" \
  --iters 20 --warmup 5 --baselines mpi-shm --log-dir "$OUT/logs" --out "$OUT/compare.md" \
  --timeout 600

echo
echo "## Single copy forced on (LOOM_SHM_SINGLE_COPY=on), 2 ranks, 64 KiB .. 256 MiB"
echo "# auto uses it only where process_vm_readv keeps up with memcpy (see the INFO log)"
python3 "$ROOT/benchmarks/compare.py" --bin-dir "$BIN" --ranks 2 --sizes "-b 64K -e 256M -f 4" \
  --iters 10 --warmup 2 --baselines mpi-shm --loom-env "LOOM_SHM_SINGLE_COPY=on" \
  --log-dir "$OUT/logs-single-copy" --out "$OUT/compare-single-copy.md" --timeout 600

echo
echo "## 8 B latency, 2 ranks, 20000 iterations (loom over shm, then Open MPI vader)"
"$BIN/loomrun" -n 2 --only-rank 0 --no-prefix -x LOOM_DEBUG=INFO -x LOOM_DEBUG_SUBSYS=INIT \
  "$BIN/loom-perf" allreduce -d float -o sum -b 8 -e 8 -n 20000 -w 1000 2>&1 | tee "$OUT/lat_loom.txt" |
  grep -E "^ +8 |via|spin"
mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl vader,self \
  "$BIN/mpi-allreduce-perf" -d float -b 8 -e 8 -n 20000 -w 1000 2>&1 | tee "$OUT/lat_mpi.txt" |
  grep -E "^ +8 "

echo
echo "## 8 ranks on $(nproc) cores (oversubscribed), loom, 16 B .. 256 MiB"
"$BIN/loomrun" -n 8 --only-rank 0 --no-prefix "$BIN/loom-perf" allreduce -d float -o sum \
  -b 16 -e 256M -f 16 -n 5 -w 1 2>&1 | tee "$OUT/loom_8ranks.txt"
echo
echo "# results and logs in $OUT"
