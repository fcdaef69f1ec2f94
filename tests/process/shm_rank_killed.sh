#!/usr/bin/env bash
# kill -9 one rank of 4 in the middle of a stream of shared-memory allreduces: every survivor
# fails (exits non-zero with an error naming a peer) well before LOOM_TIMEOUT instead of hanging,
# and /dev/shm holds no loom segment afterwards (segments are unlinked once mapped). By default
# the allreduces (1 MiB and up) take messages (LOOM_SHM_ARENA_PIECE=0); with `pieces` they go
# through the shared-memory arena in pieces (arena_pieces_rank_killed.sh), with `arena` they are
# of 8 bytes, which take the arena in one step (LOOM_SHM_ONESHOT_MAX; arena_rank_killed.sh).
# Usage: bash shm_rank_killed.sh BIN_DIR [arena|pieces]
set -u
BIN=${1:?usage: shm_rank_killed.sh BIN_DIR [arena|pieces]}
mode=${2:-messages}
piece=0  # messages: rings through the shared-memory channels
[[ $mode == messages ]] || piece=auto
# shellcheck source=lib/shm_job.sh
source "$(dirname "$0")/lib/shm_job.sh"

n=4
victim=2
port=$(free_port)
# The 1 MiB row appears after a few hundred allreduces; the 256 MiB sweep that follows would run
# for many minutes, so the kill lands in the middle of an allreduce. LOOM_TIMEOUT is far longer
# than the bound below: a survivor that only times out fails this test. (env execs loom-perf,
# so each pid is the rank itself.)
sizes=(-b 1M -e 256M -f 256 -n 2000 -w 1)
# 8 B allreduces for much longer than this test waits: the arena's rows never come.
[[ $mode == arena ]] && sizes=(-b 8 -e 8 -n 100000000 -w 1)
for ((r = 0; r < n; r++)); do
  env LOOM_RANK=$r LOOM_WORLD_SIZE=$n LOOM_ROOT=127.0.0.1:$port LOOM_TIMEOUT=300s \
    LOOM_SHM_ARENA_PIECE=$piece LOOM_TRANSPORTS=shm LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=SHM,INIT,COLL \
    "$BIN/loom-perf" allreduce "${sizes[@]}" >"$TMP/out.$r" 2>&1 &
  pids+=($!)
done

# Wait (bounded) until rank 0 has printed its first result row (all ranks are in the sweep), or
# with the arena, until every rank has said it has one, and a moment more (a few thousand calls).
started=0
for ((i = 0; i < 1200; i++)); do
  if [[ $mode == arena ]]; then
    if [[ $(cat "$TMP"/out.* 2>/dev/null | grep -c "go through a shared-memory arena") -eq $n ]]; then
      sleep 1
      started=1
      break
    fi
  elif awk '$1 ~ /^[0-9]+$/ && NF == 13' "$TMP/out.0" 2>/dev/null | grep -q .; then
    started=1
    break
  fi
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.1
done
if [[ $started -ne 1 ]]; then
  fail "the job did not start its sweep"
  cat "$TMP"/out.* >&2
  exit 1
fi
grep -q "over shm" "$TMP/out.0" || fail "rank 0 did not report a shared-memory connection"

kill -KILL "${pids[$victim]}"
t0=$SECONDS
for ((r = 0; r < n; r++)); do
  wait_bounded "${pids[$r]}" 150
  [[ $r -eq $victim ]] && continue
  if [[ $rc -eq 0 ]]; then
    fail "rank $r exited 0 after rank $victim was killed"
  elif [[ $rc -eq 124 ]]; then
    fail "rank $r hung: still running 150 s after rank $victim was killed"
  elif ! grep -Eq "rank [0-9]+ .*(exited|closed)" "$TMP/out.$r"; then
    fail "rank $r failed without naming the peer that went away"
    tail -5 "$TMP/out.$r" >&2
  fi
done
pids=()
elapsed=$((SECONDS - t0))
[[ $elapsed -le 120 ]] || fail "survivors took ${elapsed}s to fail (LOOM_TIMEOUT is 300s)"
echo "survivors failed within ${elapsed}s"
for r in 0 1 3; do grep -m1 -E "exited|closed" "$TMP/out.$r" | cut -c1-240; done

comm_id=$(grep -m1 -oE "communicator [0-9a-f]{16} ready" "$TMP/out.0" | cut -d' ' -f2)
if [[ -z $comm_id ]]; then
  fail "rank 0 did not log its communicator id"
else
  leftover=$(job_segments "$comm_id")
  if [[ -n $leftover ]]; then
    fail "loom segments of communicator $comm_id left in /dev/shm: $leftover"
  else
    echo "ok: no segment of communicator $comm_id in /dev/shm"
  fi
fi

[[ $failures -eq 0 ]] || { echo "shm_rank_killed ($mode): $failures failure(s)" >&2; exit 1; }
echo "shm_rank_killed ($mode): all passed"
