#!/usr/bin/env bash
# Device buffers across (fake) hosts, straight from device memory: four processes on two hosts
# (LOOM_HOST_ID), simulated device buffers (LOOM_DEVICE=host-sim), ofi across hosts over
# libfabric's shm provider with FI_HMEM simulated (LOOM_OFI_HMEM=simulate: host-sim memory
# registered as FI_HMEM_SYSTEM), cuda_ipc inside a host. Every collective is verified exactly,
# every rank logs that device buffers cross hosts over ofi, and one rank set to
# LOOM_OFI_HMEM=off moves all of them to host staging (still exact). Then a rank killed in the
# middle of a device allreduce (across the hosts over tcp; see there): the survivors fail with
# PeerFailed naming it, within seconds.
# Skips (77) where libfabric's shm provider offers no FI_HMEM.
# Usage: bash device_hosts.sh BIN_DIR
set -u
BIN=${1:?usage: device_hosts.sh BIN_DIR}
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

if ! fi_info -p shm -c FI_HMEM >/dev/null 2>&1; then
  echo "libfabric's shm provider offers no FI_HMEM here: skipped"
  exit 77
fi

N=4
HMEM_ENV=(LOOM_DEVICE=host-sim LOOM_OFI_HMEM=simulate LOOM_TRANSPORTS=shm,ofi,cuda_ipc
  LOOM_OFI_PROVIDER=shm LOOM_OFI_FALLBACK=false LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=CUDA)

# start NAME EXTRA_ENV_FOR_RANK_3 -- LOOM_PERF_ARGS...: starts the 4 ranks in the background
# (pids in PIDS), rank r on host r/2.
start() {
  local name=$1 extra=$2
  shift 3
  local port
  port=$(free_port)
  PIDS=()
  for ((r = 0; r < N; r++)); do
    local more=()
    [[ $r -eq 3 && -n $extra ]] && more=("$extra")
    env "${HMEM_ENV[@]}" "${more[@]}" LOOM_RANK=$r LOOM_WORLD_SIZE=$N \
      LOOM_ROOT=127.0.0.1:$port LOOM_TIMEOUT=60s LOOM_HOST_ID=host$((r / 2)) \
      timeout 240 "$BIN/loom-perf" "$@" >"$TMP/$name.$r" 2>&1 &
    PIDS+=($!)
  done
}

# job NAME EXTRA -- ARGS...: runs to the end; checks exit codes and #wrong on every rank.
job() {
  local name=$1
  start "$@"
  local rc=0
  for p in "${PIDS[@]}"; do wait "$p" || rc=$?; done
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit $rc"
    tail -5 "$TMP/$name".* >&2
    return 1
  fi
  for ((r = 0; r < N; r++)); do
    local rows wrong
    rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 13' "$TMP/$name.$r" | wc -l)
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' "$TMP/$name.$r" | wc -l)
    if [[ $r -eq 0 && $rows -eq 0 ]] || [[ $wrong -ne 0 ]]; then
      fail "$name: rank $r: $rows rows, $wrong wrong"
      return 1
    fi
  done
  return 0
}

for coll in allreduce allgather broadcast reduce reducescatter; do
  args=(--device host-sim -b 0 -e 256K -f 16 -n 2 -w 1)
  [[ $coll == allreduce ]] && args+=(-d all -o all)
  [[ $coll == broadcast || $coll == reduce ]] && args+=(-r 3)
  if job "$coll" "" -- "$coll" "${args[@]}"; then
    for ((r = 0; r < N; r++)); do
      grep -q "rank $r: device buffers cross hosts from device memory over ofi" "$TMP/$coll.$r" ||
        fail "$coll: rank $r does not say device buffers cross hosts over ofi"
    done
    echo "ok: $coll on device buffers across 2 hosts, ofi from device memory, exact"
  fi
done

if job off LOOM_OFI_HMEM=off -- allreduce --device host-sim -b 8 -e 1M -f 32 -n 2 -w 1; then
  grep -q "rank 0: device buffers cross hosts through pinned host staging: rank 3 cannot send them from device memory (LOOM_OFI_HMEM=off)" "$TMP/off.0" ||
    fail "off: rank 0 should name rank 3 and LOOM_OFI_HMEM=off as the reason for staging"
  echo "ok: one rank with LOOM_OFI_HMEM=off stages every rank, exact"
fi

# A rank killed mid-collective (a 64 MiB allreduce on device buffers, repeated), across the
# fake hosts over tcp: libfabric's shm provider, which the cases above use to stand in for EFA
# on one machine, keeps its queues' locks in the peers' shared memory, and a peer killed while
# holding one leaves a survivor spinning inside fi_tsendv for good (gdb, 1 kill in ~24 under
# load; docs/reliability.md). Between real hosts (EFA, tcp;ofi_rxm) no peer shares memory.
# The kill waits until every rank's communicator is ready (a kill during setup is another case,
# tests/process/fault_tolerance.sh).
HMEM_ENV=(LOOM_DEVICE=host-sim LOOM_TRANSPORTS=shm,tcp,cuda_ipc LOOM_DEBUG=INFO
  LOOM_DEBUG_SUBSYS=CUDA,INIT)
start killed "" -- allreduce --device host-sim -b 64M -e 64M -n 200 -w 1 -c 0
for _ in $(seq 1 600); do
  ready=0
  for ((r = 0; r < N; r++)); do grep -q "communicator .* ready" "$TMP/killed.$r" && ready=$((ready + 1)); done
  ((ready == N)) && break
  sleep 0.1
done
((ready == N)) || fail "killed: the ranks were not ready within 60 s"
sleep 1
victim=${PIDS[3]}
victim_pid=$(pgrep -P "$victim" loom-perf || echo "$victim")
kill -9 "$victim_pid" "$victim" 2>/dev/null
start_ms=$(date +%s%3N)
for ((r = 0; r < 3; r++)); do
  rc=0
  wait "${PIDS[$r]}" || rc=$?
  if [[ $rc -eq 0 ]]; then
    fail "killed: survivor rank $r exited 0"
  elif ! grep -q "PeerFailed" "$TMP/killed.$r" || ! grep -q "rank 3" "$TMP/killed.$r"; then
    fail "killed: survivor rank $r does not report PeerFailed naming rank 3 (exit $rc)"
    tail -3 "$TMP/killed.$r" >&2
  fi
done
elapsed=$(($(date +%s%3N) - start_ms))
echo "killed: survivors failed $elapsed ms after the kill"
((elapsed < 20000)) || fail "killed: survivors took $elapsed ms to fail"

if [[ $failures -ne 0 ]]; then
  echo "device_hosts: $failures failure(s)" >&2
  exit 1
fi
echo "device_hosts: all checks passed"
