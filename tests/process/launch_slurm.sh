#!/usr/bin/env bash
# A real one-node Slurm cluster (munged, slurmctld, slurmd; configuration and state in a temp
# dir) runs `srun -n 4 loom-perf allreduce` with verification: ranks, size and the root come
# from SLURM_PROCID / SLURM_NTASKS / SLURM_STEP_NODELIST, the port from the job and step ids.
# Installs slurm-wlm and munge with apt-get when missing; skips (exit 77) when that is not
# possible (not root, no network) or the daemons cannot start here.
# Usage: bash launch_slurm.sh BIN_DIR
set -u
BIN=${1:?usage: launch_slurm.sh BIN_DIR}
skip() { echo "SKIP: $*"; exit 77; }
export PATH=$PATH:/usr/sbin:/sbin

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v srun >/dev/null; then
  [[ $(id -u) -eq 0 ]] || skip "slurm-wlm and munge are not installed and we are not root"
  command -v apt-get >/dev/null || skip "slurm-wlm and munge are not installed and there is no apt-get"
  echo "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge; } \
    >/tmp/loom-slurm-apt.log 2>&1 || skip "apt-get install slurm-wlm munge failed (see /tmp/loom-slurm-apt.log)"
fi
[[ $(id -u) -eq 0 ]] || skip "starting slurmd needs root"

TMP=$(mktemp -d)
chmod 0700 "$TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
logs() { for f in "$TMP"/*.log; do echo "== $f"; tail -20 "$f"; done >&2; }
# wait_for SECONDS CMD...: polls CMD until it succeeds, or fails after SECONDS.
wait_for() {
  local deadline=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [[ $(date +%s) -lt $deadline ]] || return 1
    sleep 0.2
  done
}

# munge: a fresh key and socket of our own, so a system munged (if any) is left alone.
dd if=/dev/urandom of="$TMP/munge.key" bs=1024 count=1 status=none
chmod 0400 "$TMP/munge.key"
munged --force --key-file="$TMP/munge.key" --socket="$TMP/munge.sock" \
  --pid-file="$TMP/munged.pid" --log-file="$TMP/munged.log" --seed-file="$TMP/munge.seed" ||
  skip "munged does not start here: $(tail -3 "$TMP/munged.log" 2>/dev/null)"
wait_for 10 test -s "$TMP/munged.pid" || skip "munged wrote no pid file"
pids+=("$(cat "$TMP/munged.pid")")

host=$(hostname -s)
# The step node list names this host; the ranks must resolve it to reach the rendezvous.
getent hosts "$host" >/dev/null || host=localhost
mkdir -p "$TMP/state" "$TMP/spool"
export SLURM_CONF=$TMP/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=loomtest
FirstJobId=$((RANDOM * 10 + 1000))
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$TMP/munge.sock
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
LaunchParameters=use_interactive_step
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 State=UNKNOWN
PartitionName=loom Nodes=$host Default=YES MaxTime=10 State=UP
CONF

slurmctld -D -i -f "$SLURM_CONF" >"$TMP/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$TMP/slurmd.out.log" 2>&1 &
pids+=($!)
if ! wait_for 30 sh -c "sinfo -h -n $host -o %t | grep -Eq '^(idle|mix)'"; then
  echo "slurm did not come up; sinfo: $(sinfo 2>&1)" >&2
  logs
  skip "slurmctld/slurmd do not start in this environment"
fi
echo "ok: one-node Slurm cluster is up ($(sinfo -h -o '%P %D %t %c'))"

failures=0
out=$(timeout 120 srun -n 4 --time=2 --export=ALL,LOOM_TIMEOUT=60s,LOOM_DEBUG=INFO,LOOM_DEBUG_SUBSYS=INIT \
  "$BIN/loom-perf" allreduce -b 8 -e 1M -f 16 -n 2 -w 1 -d float,int32,double -o sum,max,avg 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "Avg bus bandwidth" <<<"$out"; then
  echo "FAIL: srun -n 4 loom-perf allreduce: exit $rc" >&2
  echo "$out" | tail -40 >&2
  logs
  failures=$((failures + 1))
else
  before=$failures
  for r in 0 1 2 3; do
    grep -q "rank $r of 4: launch environment from slurm (root $host:[0-9]* = first host of SLURM_STEP_NODELIST" <<<"$out" ||
      { echo "FAIL: rank $r did not use the Slurm environment" >&2; failures=$((failures + 1)); }
  done
  if [[ $failures -eq $before ]]; then
    echo "ok: srun -n 4 loom-perf allreduce, verified, 4 ranks from the Slurm environment"
  else
    echo "$out" | tail -40 >&2
  fi
fi

# Two steps of one allocation in a row get different derived ports and both work.
out=$(timeout 120 salloc -n 2 --time=2 sh -c "srun -n 2 $BIN/loom-perf allreduce -b 8 -e 64K -f 8 -n 2 -w 1 && srun -n 2 $BIN/loom-perf allgather -b 8 -e 64K -f 8 -n 2 -w 1" 2>&1)
if [[ $? -ne 0 ]] || [[ $(grep -c "Avg bus bandwidth" <<<"$out") -lt 2 ]]; then
  echo "FAIL: two srun steps inside salloc" >&2
  echo "$out" | tail -30 >&2
  failures=$((failures + 1))
else
  echo "ok: two srun steps inside one salloc allocation"
fi

# A batch script: srun inside it works; the program started by the script itself (SLURM_PROCID=0
# of SLURM_NTASKS=4, but no step) fails at once saying to use srun instead of waiting forever.
cat >"$TMP/job.sh" <<JOB
#!/bin/sh
srun -n 4 $BIN/loom-perf allreduce -b 8 -e 64K -f 8 -n 2 -w 1 >$TMP/batch.srun 2>&1
LOOM_TIMEOUT=20s timeout 60 $BIN/loom-perf allreduce -b 8 -e 8 >$TMP/batch.direct 2>&1
echo \$? >$TMP/batch.rc
JOB
if ! timeout 120 sbatch --wait -n 4 --time=2 -o "$TMP/batch.out" "$TMP/job.sh" >/dev/null 2>&1; then
  echo "FAIL: sbatch --wait -n 4 job.sh" >&2
  cat "$TMP/batch.out" >&2
  failures=$((failures + 1))
elif ! grep -q "Avg bus bandwidth" "$TMP/batch.srun"; then
  echo "FAIL: srun -n 4 inside a batch script" >&2
  cat "$TMP/batch.srun" >&2
  failures=$((failures + 1))
elif [[ $(cat "$TMP/batch.rc") == 0 || $(cat "$TMP/batch.rc") == 124 ]] ||
  ! grep -q "start the ranks with srun" "$TMP/batch.direct"; then
  echo "FAIL: loom-perf run by the batch script itself should fail at once (exit $(cat "$TMP/batch.rc")):" >&2
  cat "$TMP/batch.direct" >&2
  failures=$((failures + 1))
else
  echo "ok: sbatch -n 4: srun inside works, the batch script itself is told to use srun"
fi

# The training example under srun.
if [[ -x $BIN/loom-train ]]; then
  out=$(timeout 120 srun -n 4 --time=2 "$BIN/loom-train" --layers 16,32,4 --batch-size 64 --steps 5 2>&1)
  if [[ $? -eq 0 ]] && grep -q "loom-train: 4 ranks" <<<"$out" && grep -q "^final step 5" <<<"$out"; then
    echo "ok: srun -n 4 loom-train"
  else
    echo "FAIL: srun -n 4 loom-train" >&2
    echo "$out" | tail -20 >&2
    failures=$((failures + 1))
  fi
fi

[[ $failures -eq 0 ]] || { echo "launch_slurm: $failures failure(s)" >&2; exit 1; }
echo "launch_slurm: all passed"
