#!/usr/bin/env bash
# Collectives across namespace hosts whose NICs limit: loomrun --hosts H -n H*P --nics K
# --nic-rate R for each SHAPE "HxP:R". Per shape and collective: loom-perf --compare-algos over
# the algorithms the collective has (median of ROUNDS, auto against the fastest), Open MPI over
# tcp across the namespaces (btl tcp,self; its mpirun runs inside host 0 and reaches the others
# through netns_rsh_agent.sh; MPI=0 leaves it out), the network bound computed from R, and
# loom-sim's prediction for the same shape. Prints one markdown table per shape and collective
# (time in us, out of place, fp32 sum).
# Usage: benchmarks/measure/cluster.sh [BUILD_DIR]   (root; takes the bench lock per run)
#   SHAPES="2x2:1gbit 4x2:1gbit 8x2:500mbit 2x4:1gbit" COLLS="allreduce allgather
#   reduce_scatter broadcast alltoall" NICS=1 ROUNDS=3 SIZES="-b 64K -e 16M -f 4" (defaults)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build}/bin
SHAPES=${SHAPES:-2x2:1gbit 4x2:1gbit 8x2:500mbit 2x4:1gbit}
COLLS=${COLLS:-allreduce allgather reduce_scatter broadcast alltoall}
NICS=${NICS:-1}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:--b 64K -e 16M -f 4}
MPI=${MPI:-1}
LOCK=${LOCK:-/tmp/loom-bench.lock}
command -v mpirun >/dev/null && [[ -x $BIN/mpi-allreduce-perf && -x $BIN/mpi-exchange-perf ]] ||
  MPI=0
AGENT=$PWD/benchmarks/measure/netns_rsh_agent.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
IFNAMES=eth0
for ((i = 1; i < NICS; i++)); do IFNAMES+=",eth$i"; done

# The algorithms --compare-algos times for a collective ("" : one schedule).
algos() {
  case $1 in
    allreduce) echo ring,tree,rd,hier,auto ;;
    broadcast | reduce) echo ring,tree,auto ;;
    allgather | reduce_scatter) echo ring,bruck,hier,auto ;;
    *) echo "" ;;
  esac
}

# loom RANKS HOSTS RATE COLL OUT: loom-perf's rows "size time..." (every algorithm, or the one
# schedule's out-of-place time) in OUT; fails on a wrong result.
loom() {
  local compare=() a
  a=$(algos "$4")
  [[ -n $a ]] && compare=(--compare-algos "$a" --rounds "$ROUNDS")
  flock "$LOCK" chrt -f 5 "$BIN/loomrun" --hosts "$2" -n "$1" --nics "$NICS" --nic-rate "$3" \
    --only-rank 0 --no-prefix --timeout 900 -x LOOM_SOCKET_IFNAME="$IFNAMES" -- \
    "$BIN/loom-perf" "${4/_/}" $SIZES -n 5 -w 2 --outofplace-only "${compare[@]}" |
    awk -v cmp="${#compare[@]}" '
      $1 ~ /^[0-9]+$/ && cmp > 0 { if ($NF != "0") bad = 1; line = $1;
        for (i = 4; i <= NF - 3; i++) line = line " " $i; print line }
      $1 ~ /^[0-9]+$/ && cmp == 0 && NF == 13 { if ($9 != "0") bad = 1; print $1, $6 }
      END { exit bad }' >"$5" || { echo "wrong results or a failed run: loom $4 on $2 hosts" >&2; exit 1; }
}

# mpi RANKS HOSTS RATE COLL OUT: Open MPI's out-of-place times "size us" in OUT.
mpi() {
  local prog=mpi-exchange-perf coll=${4/_/} hosts=""
  [[ $4 == allreduce ]] && prog=mpi-allreduce-perf coll=""
  for ((h = 1; h <= $2; h++)); do hosts+="${hosts:+,}10.199.0.$h:$(($1 / $2))"; done
  rm -f "$TMP/mpi.done"
  # Not at RT priority: Open MPI's ranks poll, and more ranks than CPUs would starve the rest.
  flock "$LOCK" timeout 600 "$BIN/loomrun" --hosts "$2" -n "$2" --nics "$NICS" --nic-rate "$3" \
    --only-rank 0 --no-prefix --timeout 600 -- bash -c '
    if [[ $LOOM_RANK != 0 ]]; then
      while [[ ! -e '"$TMP"'/mpi.done ]]; do sleep 0.2; done; exit 0
    fi
    LOOM_NS_PREFIX=${LOOM_HOST_ID%h0} mpirun --allow-run-as-root --oversubscribe -n '"$1"' \
      --host '"$hosts"' --mca plm_rsh_agent '"$AGENT"' --mca oob_tcp_if_include eth0 \
      --mca btl tcp,self --mca btl_tcp_if_include '"$IFNAMES"' --mca mpi_yield_when_idle 1 -x PATH \
      ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} '"$BIN/$prog $coll $SIZES"' -n 5 -w 2
    rc=$?; touch '"$TMP"'/mpi.done; exit $rc' |
    awk '$1 ~ /^[0-9]+$/ && NF == 13 { if ($9 != "0") bad = 1; print $1, $6 } END { exit bad }' \
      >"$5" || { echo "wrong results or a failed run: Open MPI $4 on $2 hosts" >&2; exit 1; }
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(nproc) CPUs," \
  "$NICS NIC(s) per host, fp32 sum, out of place, median of $ROUNDS"
for shape in $SHAPES; do
  hp=${shape%%:*} rate=${shape#*:}
  hosts=${hp%x*} per=${hp#*x}
  n=$((hosts * per))
  for coll in $COLLS; do
    loom "$n" "$hosts" "$rate" "$coll" "$TMP/loom"
    : >"$TMP/mpi"
    [[ $MPI == 1 ]] && mpi "$n" "$hosts" "$rate" "$coll" "$TMP/mpi"
    : >"$TMP/sim"
    if [[ $coll != alltoall ]]; then
      LOOM_TUNING= "$BIN/loom-sim" "${coll/_/}" -n "$n" --per-host "$per" --nic-rate "$rate" \
        --nics "$NICS" $SIZES | awk '$1 ~ /^[0-9]+$/ { print $1, $10 }' >"$TMP/sim"
    fi
    echo
    echo "$coll, $hosts hosts x $per ranks, $NICS x $rate per host (time in us):"
    python3 - "$TMP" "$coll" "$n" "$hosts" "$rate" "$NICS" "$(algos "$coll")" <<'PY'
import sys
tmp, coll, n, hosts, rate, nics, algos = sys.argv[1:8]
n, hosts, nics = int(n), int(hosts), int(nics)
names = algos.split(",") if algos else ["loom"]
def rows(name):
    out = {}
    for line in open(f"{tmp}/{name}"):
        f = line.split()
        out[int(f[0])] = f[1:]
    return out
loom, mpi, sim = rows("loom"), rows("mpi"), rows("sim")
unit = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[rate[-4:]]
nic = float(rate[:-4]) * unit / 8 * nics  # a host's bytes per second
per = n // hosts
# Bytes through each host's NICs per call of SIZE bytes (the best schedule's), as a bound.
factor = {"allreduce": 2 * (hosts - 1) / hosts, "allgather": (hosts - 1) / hosts,
          "reduce_scatter": (hosts - 1) / hosts, "broadcast": 1.0,
          "alltoall": (n - per) / n}[coll]
head = "| size | " + " | ".join(names) + " | Open MPI | bound | loom-sim |"
print(head)
print("|" + "---:|" * (head.count("|") - 1))
for size in sorted(loom):
    bound = factor * size / nic * 1e6
    cells = loom[size][: len(names)]
    m = mpi.get(size, ["-"])[0]
    s = sim.get(size, ["-"])[0]
    print(f"| {size} | " + " | ".join(cells) + f" | {m} | {bound:.0f} | {s} |")
PY
  done
done
