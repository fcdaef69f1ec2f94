#!/usr/bin/env bash
# Several NICs per host (tcp rails): allreduce bus bandwidth between 2 namespace hosts
# (loomrun --hosts 2 --nics 2) over one rail (LOOM_SOCKET_IFNAME=eth0) and over two
# (eth0,eth1), the same with the ofi transport over tcp;ofi_rxm (LOOM_OFI_DOMAINS; OFI=0 leaves
# it out), and Open MPI's TCP BTL likewise (btl_tcp_if_include eth0, then eth0,eth1; its
# mpirun runs inside host 0 and reaches host 1 through netns_rsh_agent.sh), in alternating runs,
# with every interface capped at each RATE by a tc token bucket ("none": uncapped veth, where the
# CPUs are the limit). Prints one table per rate: size, the median busbw (GB/s) of ROUNDS runs
# for each, and the ratios. MPI=0 leaves Open MPI out (needs mpirun and mpi-allreduce-perf).
# Usage: benchmarks/measure/rails.sh [BUILD_DIR]   (root; about 6 minutes)
#   RATES="500mbit 2gbit none" RANKS=2 ROUNDS=3 SIZES="-b 1M -e 64M -f 4" (the defaults)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build}/bin
RATES=${RATES:-500mbit 2gbit none}
RANKS=${RANKS:-2}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:--b 1M -e 64M -f 4}
MPI=${MPI:-1}
OFI=${OFI:-1}
[[ -x $BIN/mpi-allreduce-perf ]] && command -v mpirun >/dev/null || MPI=0
AGENT=$PWD/benchmarks/measure/netns_rsh_agent.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# perf_rows OUT: loom-perf's table rows (also mpi-allreduce-perf's) -> "size time_us" lines of
# the out-of-place column in OUT; fails on a wrong value.
perf_rows() {
  sed 's/^\[[0-9]*\] //' |
    awk '$1 ~ /^[0-9]+$/ && NF == 13 { if ($9 != "0") bad = 1; print $1, $6 }
         END { exit bad }' >"$1"
}

# run RATE TRANSPORT IFNAMES OUT: one loom-perf sweep over the rails IFNAMES, with tcp
# (LOOM_SOCKET_IFNAME) or ofi over tcp;ofi_rxm (LOOM_OFI_DOMAINS).
run() {
  local rate_args=() env=()
  [[ $1 != none ]] && rate_args=(--nic-rate "$1")
  if [[ $2 == tcp ]]; then
    env=(-x "LOOM_TRANSPORTS=shm,tcp" -x LOOM_SOCKET_IFNAME="$3")
  else
    env=(-x "LOOM_TRANSPORTS=shm,ofi" -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" -x LOOM_OFI_FALLBACK=false
      -x LOOM_OFI_DOMAINS="$3")
  fi
  "$BIN/loomrun" --hosts 2 -n "$RANKS" --nics 2 "${rate_args[@]}" --only-rank 0 --no-prefix \
    --timeout 600 "${env[@]}" -- "$BIN/loom-perf" allreduce $SIZES -n 5 -w 2 --outofplace-only |
    perf_rows "$4" || { echo "wrong results or a failed run: loom $2 on $3 at $1" >&2; exit 1; }
}

# run_mpi RATE IFNAMES OUT: the same sweep with Open MPI (one rank per host: RANKS=2 only).
run_mpi() {
  local rate_args=()
  [[ $1 != none ]] && rate_args=(--nic-rate "$1")
  rm -f "$TMP/mpi.done"
  # Rank 0 (host 0) runs mpirun over both hosts; the other rank keeps host 1 until it is done.
  "$BIN/loomrun" --hosts 2 -n 2 --nics 2 "${rate_args[@]}" --only-rank 0 --no-prefix \
    --timeout 600 -- bash -c '
    if [[ $LOOM_RANK != 0 ]]; then
      while [[ ! -e '"$TMP"'/mpi.done ]]; do sleep 0.2; done; exit 0
    fi
    LOOM_NS_PREFIX=${LOOM_HOST_ID%h0} mpirun --allow-run-as-root -n 2 \
      --host 10.199.0.1,10.199.0.2 --mca plm_rsh_agent '"$AGENT"' --mca oob_tcp_if_include eth0 \
      --mca btl tcp,self --mca btl_tcp_if_include '"$2"' -x PATH ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} \
      '"$BIN"'/mpi-allreduce-perf '"$SIZES"' -n 5 -w 2
    rc=$?; touch '"$TMP"'/mpi.done; exit $rc' |
    perf_rows "$3" || { echo "wrong results or a failed run: Open MPI on $2 at $1" >&2; exit 1; }
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(nproc) CPUs," \
  "$RANKS ranks on 2 namespace hosts, fp32 sum allreduce, out of place"
for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    run "$rate" tcp eth0 "$TMP/$rate.loom1.$round"
    run "$rate" tcp eth0,eth1 "$TMP/$rate.loom2.$round"
    if [[ $OFI == 1 ]]; then
      run "$rate" ofi eth0 "$TMP/$rate.ofi1.$round"
      run "$rate" ofi eth0,eth1 "$TMP/$rate.ofi2.$round"
    fi
    if [[ $MPI == 1 && $RANKS == 2 ]]; then
      run_mpi "$rate" eth0 "$TMP/$rate.mpi1.$round"
      run_mpi "$rate" eth0,eth1 "$TMP/$rate.mpi2.$round"
    fi
  done
  echo
  echo "NIC rate $rate (allreduce busbw in GB/s):"
  python3 - "$TMP" "$rate" "$ROUNDS" "$RANKS" <<'PY'
import os, statistics, sys
tmp, rate, rounds, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def load(what):  # size -> median busbw in GB/s (allreduce: 2(n-1)/n x size / time)
    out = {}
    for r in range(1, rounds + 1):
        path = f"{tmp}/{rate}.{what}.{r}"
        if not os.path.exists(path):
            return None
        for line in open(path):
            size, us = line.split()
            out.setdefault(int(size), []).append(float(us))
    return {s: 2 * (n - 1) / n * s / statistics.median(v) / 1e3 for s, v in out.items()}
one, two, mpi1, mpi2 = load("loom1"), load("loom2"), load("mpi1"), load("mpi2")
ofi1, ofi2 = load("ofi1"), load("ofi2")
def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"
head = "| size | loom tcp 1 rail | loom tcp 2 rails | 2 / 1 |"
if ofi1:
    head += " loom ofi 1 rail | loom ofi 2 rails | 2 / 1 |"
if mpi1:
    head += " Open MPI 1 rail | Open MPI 2 rails | 2 / 1 | loom tcp / Open MPI, 2 rails |"
print(head)
print("|" + "---:|" * (head.count("|") - 1))
for s in sorted(one):
    row = f"| {human(s)} | {one[s]:.3f} | {two[s]:.3f} | {two[s] / one[s]:.2f} |"
    if ofi1:
        row += f" {ofi1[s]:.3f} | {ofi2[s]:.3f} | {ofi2[s] / ofi1[s]:.2f} |"
    if mpi1:
        row += f" {mpi1[s]:.3f} | {mpi2[s]:.3f} | {mpi2[s] / mpi1[s]:.2f} | {two[s] / mpi2[s]:.2f} |"
    print(row)
PY
done
