#!/usr/bin/env bash
# How long the survivors of a job take to name a killed rank: N ranks (default 8) of
# loom-example-shrink on this host, LOOM_TRANSPORTS (default shm), allreduces of COUNT floats
# (default 1 Mi) in a loop; rank VICTIM (default 2) is killed with SIGKILL once every rank has
# started; prints the milliseconds from the kill to each survivor's PeerFailed naming the
# victim: the median and the largest. The job is killed after (within 60 s).
#   benchmarks/measure/killed_rank_named.sh [BIN_DIR] [N]   (N=8 by default)
#   VICTIM=2 COUNT=1048576 LOOM_TRANSPORTS=shm
set -u
# shellcheck disable=SC2034  # read by example_job.sh
BIN=${1:-build/bin}
N=${2:-8}
VICTIM=${VICTIM:-2}
COUNT=${COUNT:-1048576}
TRANSPORTS=${LOOM_TRANSPORTS:-shm}
# shellcheck source=../../tests/process/lib/example_job.sh
source "$(dirname "$0")/../../tests/process/lib/example_job.sh"
root=127.0.0.1:$(free_port)
for ((r = 0; r < N; r++)); do
  LOOM_RANK=$r LOOM_WORLD_SIZE=$N LOOM_ROOT=$root LOOM_SECRET=00112233445566778899aabbccddeeff \
    LOOM_TRANSPORTS=$TRANSPORTS LOOM_TIMEOUT=300s \
    timeout 600 "$EX" 1000000 "$COUNT" >"$TMP/out.$r" 2>&1 &
  pids+=($!)
done
for ((r = 0; r < N; r++)); do
  wait_for "$TMP/out.$r" "iteration 0 started" 300 || { echo "rank $r did not start" >&2; exit 1; }
done
victim_pid=$(pgrep -P "${pids[$VICTIM]}" -f loom-example-shrink || echo "${pids[$VICTIM]}")
kill -9 "$victim_pid"
killed_at=$(now_ms)
kill -9 "${pids[$VICTIM]}" 2>/dev/null
delays=()
for ((r = 0; r < N; r++)); do
  [[ $r -eq $VICTIM ]] && continue
  wait_for "$TMP/out.$r" "PeerFailed at" 60 || { echo "rank $r: no PeerFailed within 60 s" >&2; continue; }
  line=$(grep -m1 "PeerFailed at" "$TMP/out.$r")
  [[ $line == *"rank $VICTIM"* ]] || { echo "rank $r: PeerFailed does not name rank $VICTIM: $line" >&2; continue; }
  delays+=($(($(sed -E 's/.*PeerFailed at ([0-9]+) ms.*/\1/' <<<"$line") - killed_at)))
done
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done  # timeout passes it on
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
pids=()
printf '%s\n' "${delays[@]}" | sort -n | awk -v n="$N" '{a[NR]=$1} END {
  if (!NR) { print "no survivor named the killed rank"; exit 1 }
  printf "%d ranks: %d survivors named the killed rank; ms after the kill: median %d, max %d\n",
    n, NR, a[int((NR+1)/2)], a[NR] }'
