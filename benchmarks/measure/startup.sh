#!/usr/bin/env bash
# Start-up of whole jobs: loomrun -n N of loom-perf (create the communicator, one verified 8-byte
# allreduce, exit) against Open MPI's mpirun of an MPI_Allreduce program, in the same run. Per N:
# whole-job time (median of RUNS), exit codes, the slowest rank's start-up phases (joining the
# rendezvous, layout exchange, transports, closing rendezvous, arena and failure monitor; from
# loom's INFO log), the first call's time, the requests rank 0's rendezvous server served (in
# all, and by the end of rank 0's start-up), and the peak RSS of the largest process.
#
#   benchmarks/measure/startup.sh [BIN_DIR] [N...]      (default: build/bin 32 64 128 256 512)
#   RUNS=3 (runs per N and launcher), TIMEOUT=600 (seconds per run), MPI=0 skips Open MPI,
#   LOGS=DIR keeps the output of loom's failed runs there.
# Takes /tmp/loom-bench.lock around each run (big jobs load the whole machine).
set -u
BIN=${1:-build/bin}
shift || true
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(32 64 128 256 512)
RUNS=${RUNS:-3}
TIMEOUT=${TIMEOUT:-600}
MPI=${MPI:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [[ $MPI == 1 ]] && command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  cat >"$TMP/mpi_allreduce.c" <<'CEOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  float in[2] = {1.0f * rank, 1.0f}, out[2];
  MPI_Allreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  int ok = out[0] == (float)n * (n - 1) / 2 && out[1] == (float)n;
  if (rank == 0) printf("mpi allreduce on %d ranks: %s\n", n, ok ? "OK" : "WRONG");
  MPI_Finalize();
  return ok ? 0 : 1;
}
CEOF
  mpicc -O2 -o "$TMP/mpi_allreduce" "$TMP/mpi_allreduce.c" || MPI=0
else
  MPI=0
fi

# timed OUT CMD...: runs CMD under the bench lock; prints "seconds rc peak_kib".
timed() {
  local out=$1
  shift
  local start end rc
  start=$(date +%s.%N)
  flock /tmp/loom-bench.lock /usr/bin/time -f "%M" -o "$TMP/rss" timeout -k 5 "$TIMEOUT" "$@" >"$out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $rc $(tail -1 "$TMP/rss")"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "-"}'; }
# slowest PHASE_REGEX LOG: the largest value after "PHASE_REGEX " in the phase lines.
slowest() { grep -o "$1 [0-9]*" "$2" | awk '{print $NF}' | sort -n | tail -1; }

printf "%6s | %-34s | %-28s | %s\n" "ranks" "loom: s (ok/runs), peak RSS MiB" "Open MPI: s (ok/runs)" \
  "loom slowest rank (ms): join, layout, transports, rendezvous, arena+monitor; first call us; server requests"
for n in "${SIZES[@]}"; do
  loom_times=() loom_ok=0 rss=0 mpi_times=() mpi_ok=0
  for ((i = 0; i < RUNS; i++)); do
    read -r s rc kib < <(timed "$TMP/loom.$n.$i" env LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=BOOTSTRAP \
      "$BIN/loomrun" -n "$n" "$BIN/loom-perf" allreduce -b 8 -e 8 -n 1 -w 0)
    loom_times+=("$s")
    if [[ $rc == 0 ]] && grep -q "Out of bounds values : 0 OK" "$TMP/loom.$n.$i"; then
      loom_ok=$((loom_ok + 1))
    elif [[ -n ${LOGS:-} ]]; then
      mkdir -p "$LOGS" && cp "$TMP/loom.$n.$i" "$LOGS/"
    fi
    ((kib > rss)) && rss=$kib
    if [[ $MPI == 1 ]]; then
      read -r s rc kib < <(timed "$TMP/mpi.$n.$i" mpirun --allow-run-as-root --oversubscribe \
        -np "$n" "$TMP/mpi_allreduce")
      mpi_times+=("$s")
      [[ $rc == 0 ]] && grep -q "OK" "$TMP/mpi.$n.$i" && mpi_ok=$((mpi_ok + 1))
    fi
  done
  log=$TMP/loom.$n.0
  phases="$(slowest "rendezvous at [^ ]* in" "$log"), $(slowest "layout exchange" "$log"), \
$(slowest "transports" "$log"), $(slowest "closing rendezvous" "$log"), \
$(slowest "arena and failure monitor" "$log")"
  first=$(awk '$2 == 8 && $3 == 2 {print $7; exit}' "$log")
  # The whole job's count (the server's last line), then rank 0's at the end of its start-up.
  served=$(grep -o "served [0-9]* requests (" "$log" | head -1 | awk '{print $2}')
  at_start=$(grep -o "the store served [0-9]* requests so far" "$log" | head -1 | awk '{print $4}')
  served="${served:--} (start-up ${at_start:--})"
  lt=$(printf "%s\n" "${loom_times[@]}" | median)
  mt="-"
  [[ $MPI == 1 ]] && mt=$(printf "%s\n" "${mpi_times[@]}" | median | xargs printf "%.2f")
  printf "%6s | %7.2f (%d/%d), %4d MiB %10s | %7s (%d/%d) %15s | %s; %s; %s\n" "$n" "$lt" "$loom_ok" \
    "$RUNS" $((rss / 1024)) "" "$mt" "$mpi_ok" "$RUNS" "" "$phases" "${first:--}" "${served:--}"
  grep -ho "served [0-9]* requests (.*" "$log" | head -1 | sed 's/^/         server: /'
done
