# Shared by the process tests that kill a rank using shared memory (shm_rank_killed.sh,
# shm_setup_killed.sh). Source it after setting BIN: it provides TMP (removed at exit, with every
# pid in `pids` killed), failures, fail MESSAGE, free_port and job_segments COMM_ID (this job's
# segments in /dev/shm: other jobs, tests of other builds, may run at the same time) and
# wait_bounded PID SECONDS. Exits 77
# (skipped) without /dev/shm.
if [[ ! -d /dev/shm ]]; then
  echo "SKIP: no /dev/shm"
  exit 77
fi
TMP=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
job_segments() { find /dev/shm -maxdepth 1 -name "loom-$1-*" 2>/dev/null; }
# wait_bounded PID SECONDS: waits for PID (a child of this shell); kills it after SECONDS.
# Sets rc (124 when it had to be killed).
wait_bounded() {
  local pid=$1 limit=$2 start=$SECONDS
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < limit)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=124
    return
  fi
  wait "$pid"
  rc=$?
}
