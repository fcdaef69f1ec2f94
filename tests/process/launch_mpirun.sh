#!/usr/bin/env bash
# loom-perf started by Open MPI's mpirun (no loomrun): ranks come from OMPI_COMM_WORLD_*, the
# root from LOOM_ROOT; results are verified for several dtypes and ops. Also checks that the
# OMPI variables win over a (fake) enclosing Slurm allocation's SLURM_PROCID/SLURM_NTASKS.
# Skips (exit 77) when mpirun is not installed.
# Usage: bash launch_mpirun.sh BIN_DIR
set -u
BIN=${1:?usage: launch_mpirun.sh BIN_DIR}
command -v mpirun >/dev/null || { echo "SKIP: mpirun (Open MPI) is not installed"; exit 77; }
mpirun --version 2>&1 | grep -q "Open MPI" || { echo "SKIP: mpirun is not Open MPI"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run NAME EXTRA_ENV...: mpirun -np 4 loom-perf allreduce, all output in $TMP/NAME.out.
# LOOM_ROOT is passed unless NO_ROOT=1.
run() {
  local name=$1 port rc root=()
  shift
  port=$(free_port)
  [[ ${NO_ROOT:-0} == 1 ]] || root=(-x LOOM_ROOT=127.0.0.1:$port)
  env "$@" timeout 120 mpirun -np 4 --oversubscribe --allow-run-as-root --bind-to none \
    "${root[@]}" -x LOOM_TIMEOUT=60s -x LOOM_DEBUG=INFO -x LOOM_DEBUG_SUBSYS=INIT \
    "$BIN/loom-perf" allreduce -b 8 -e 1M -f 16 -n 2 -w 1 -d float,int32,double -o sum,max,avg \
    >"$TMP/$name.out" 2>&1
  rc=$?
  local all
  all=$(cat "$TMP/$name.out")
  local sources
  sources=$(grep -c "launch environment from mpirun" <<<"$all")
  if [[ $rc -ne 0 ]] || ! grep -q "Avg bus bandwidth" <<<"$all" || [[ $sources -ne 4 ]]; then
    echo "FAIL: mpirun -np 4 loom-perf allreduce ($name): exit $rc, $sources ranks said mpirun" >&2
    echo "$all" | tail -40 >&2
    failures=$((failures + 1))
    return
  fi

  for r in 0 1 2 3; do
    grep -q "rank $r of 4: launch environment from mpirun" <<<"$all" ||
      { echo "FAIL: ($name) rank $r of 4 missing" >&2; failures=$((failures + 1)); }
  done
  echo "ok: mpirun -np 4 loom-perf allreduce ($name), verified"
}

run plain
# Inside a Slurm allocation every process inherits SLURM_PROCID=0 of the batch step.
run in_slurm SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_ID=5 SLURM_JOB_NODELIST=localhost
grep -q "win over the enclosing Slurm allocation's SLURM_PROCID=0" "$TMP/in_slurm.out" ||
  { echo "FAIL: no log line saying OMPI_* won over SLURM_*" >&2; failures=$((failures + 1)); }

# Inside an allocation without LOOM_ROOT: the root is the allocation's first node, with the
# port derived from the job id.
NO_ROOT=1 run in_slurm_no_root SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=$((RANDOM + 1000)) \
  SLURM_JOB_NODELIST=localhost
grep -q "root localhost:[0-9]* = first host of SLURM_JOB_NODELIST" "$TMP/in_slurm_no_root.out" ||
  { echo "FAIL: no log line naming the Slurm-derived root" >&2; failures=$((failures + 1)); }

# No LOOM_ROOT and no Slurm: the error names what is missing.
out=$(timeout 60 mpirun -np 1 --allow-run-as-root "$BIN/loom-perf" allreduce -b 8 -e 8 2>&1)
if [[ $? -eq 0 ]] || ! grep -q "missing LOOM_ROOT" <<<"$out" || ! grep -q "found: OMPI_COMM_WORLD_RANK" <<<"$out"; then
  echo "FAIL: mpirun without LOOM_ROOT should fail naming it: $out" >&2
  failures=$((failures + 1))
else
  echo "ok: mpirun without LOOM_ROOT names what is missing"
fi

[[ $failures -eq 0 ]] || { echo "launch_mpirun: $failures failure(s)" >&2; exit 1; }
echo "launch_mpirun: all passed"
