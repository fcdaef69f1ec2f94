#!/usr/bin/env bash
# kill -9 of a rank at the worst moment of shared-memory setup: right after it created a channel
# segment and before it wrote the segment's header (the test knob LOOM_TEST_SHM_KILL_AFTER_CREATE
# makes the rank SIGKILL itself there). For both ways channels travel (anonymous memfd segments,
# the default, and named /dev/shm segments, LOOM_SHM_SEGMENTS=named): the survivors fail with
# PeerFailed well before LOOM_TIMEOUT (at least one names the killed rank and its pid), nothing of
# the job is left in /dev/shm once they have exited (a named segment is removed by a survivor:
# its name proves its creator gone), and a next job runs and leaves nothing either.
# Usage: bash shm_setup_killed.sh BIN_DIR
set -u
BIN=${1:?usage: shm_setup_killed.sh BIN_DIR}
# shellcheck source=lib/shm_job.sh
source "$(dirname "$0")/lib/shm_job.sh"
# The communicator id of a job, from rank 0's rendezvous server (0x..., unpadded).
comm_of() {
  local id
  id=$(grep -h -m1 -oE "rendezvous server listening on .* \(communicator id 0x[0-9a-f]+\)" "$@" |
    head -1 | grep -oE "0x[0-9a-f]+")
  [[ -n $id ]] && printf '%016x\n' "$id"
}

# run_job MODE N VICTIM TAG: N ranks over shm (LOOM_SHM_SEGMENTS=MODE); rank VICTIM (-1: none)
# kills itself after creating its first channel segment. Outputs in $TMP/TAG.<rank>.
run_job() {
  local mode=$1 n=$2 victim=$3 tag=$4 port
  port=$(free_port)
  pids=()
  for ((r = 0; r < n; r++)); do
    local knob=0
    [[ $r -eq $victim ]] && knob=1
    # env execs loom-perf: each pid is the rank itself.
    env LOOM_RANK=$r LOOM_WORLD_SIZE=$n LOOM_ROOT=127.0.0.1:$port LOOM_TIMEOUT=60s \
      LOOM_TRANSPORTS=shm LOOM_SHM_SEGMENTS="$mode" LOOM_TEST_SHM_KILL_AFTER_CREATE=$knob \
      LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=SHM,INIT,BOOTSTRAP \
      "$BIN/loom-perf" allreduce -b 4K -e 4K -n 3 -w 1 >"$TMP/$tag.$r" 2>&1 &
    pids+=($!)
  done
}

killed_during_setup() {
  local mode=$1 n=3 victim=1 tag=killed-$1
  run_job "$mode" $n $victim "$tag"
  local t0=$SECONDS victim_pid=${pids[$victim]}
  for ((r = 0; r < n; r++)); do
    wait_bounded "${pids[$r]}" 50
    if [[ $r -eq $victim ]]; then
      [[ $rc -eq 137 ]] || fail "$mode: rank $victim was not killed at segment creation (exit $rc)"
      continue
    fi
    if [[ $rc -eq 0 ]]; then
      fail "$mode: rank $r exited 0 although rank $victim was killed during setup"
    elif [[ $rc -eq 124 ]]; then
      fail "$mode: rank $r hung: still running 50 s after rank $victim was killed"
    elif ! grep -q "PeerFailed" "$TMP/$tag.$r"; then
      # A survivor may name another survivor that failed first (and exited, taking the store
      # with it) because of the kill: the root cause of a failure during init is not shared
      # between ranks yet. But it fails as a peer's failure.
      fail "$mode: rank $r failed, but not with PeerFailed"
      tail -5 "$TMP/$tag.$r" >&2
    fi
  done
  # "rank 1 (pid N) exited before ..." (shm saw it) or "rank 1 (host h, pid N) went away ..."
  # (the rendezvous store saw its connection end without a goodbye)
  grep -Eq "PeerFailed.*rank $victim \((host [^,]*, )?pid ${victim_pid:-[0-9]+}\) (exited|went away)" \
    "$TMP/$tag".* ||
    fail "$mode: no survivor named rank $victim"
  pids=()
  local elapsed=$((SECONDS - t0))
  ((elapsed <= 30)) || fail "$mode: survivors took ${elapsed}s to fail (LOOM_TIMEOUT is 60s)"
  echo "$mode: survivors failed within ${elapsed}s"
  grep -h -m1 "PeerFailed" "$TMP/$tag.0" "$TMP/$tag.2" | cut -c1-240
  local comm
  comm=$(comm_of "$TMP/$tag".*)
  if [[ -z $comm ]]; then
    fail "$mode: no rank logged its communicator id"
    return
  fi
  grep -q "channels travel as $([[ $mode == named ]] && echo named || echo anonymous)" "$TMP/$tag.0" ||
    fail "$mode: rank 0 did not use the expected kind of segment"
  local left
  left=$(job_segments "$comm")
  [[ -z $left ]] || fail "$mode: segments of communicator $comm left in /dev/shm after the job: $left"
  if [[ $mode == named ]]; then
    # The killed rank's segment existed (named, zero header) and a survivor removed it. Every
    # shm transport that starts on this host also sweeps segments whose creator is gone, so
    # another job started meanwhile (ctest runs tests in parallel) may have come first: then
    # it is gone all the same (checked above), and the sweep is named in that job's output.
    if ! grep -q "removed /dev/shm/loom-$comm-$victim-" "$TMP/$tag".*; then
      [[ -z $left ]] || fail "$mode: no survivor removed the killed rank's segment"
      echo "$mode: the killed rank's segment was removed by another job on this host"
    fi
  fi

  # A next job on this host runs and leaves nothing behind.
  run_job "$mode" 2 -1 "next-$mode"
  for ((r = 0; r < 2; r++)); do
    wait_bounded "${pids[$r]}" 50
    [[ $rc -eq 0 ]] || { fail "$mode: the next job's rank $r failed (exit $rc)"; tail -5 "$TMP/next-$mode.$r" >&2; }
  done
  pids=()
  local next
  next=$(comm_of "$TMP/next-$mode".*)
  left=$(job_segments "$comm"; [[ -n $next ]] && job_segments "$next")
  if [[ -n $left ]]; then
    fail "$mode: segments left in /dev/shm after the next job: $left"
  else
    echo "$mode: /dev/shm holds nothing of communicators $comm and $next"
  fi
}

killed_during_setup auto
killed_during_setup named

[[ $failures -eq 0 ]] || { echo "shm_setup_killed: $failures failure(s)" >&2; exit 1; }
echo "shm_setup_killed: all passed"
