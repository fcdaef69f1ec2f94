#!/usr/bin/env bash
# Settings, launch numbers and tool options out of range are refused at once with a message
# naming them (docs/reliability.md, "Settings and launch numbers"); loom-perf says when a sweep
# tests nothing and which buffer it could not allocate.
# Usage: bash settings_ranges.sh BIN_DIR. Exits non-zero on failure, 77 when a tool is missing.
set -u

BIN_DIR=${1:?usage: settings_ranges.sh BIN_DIR}
for tool in loom-perf loom-info loomrun; do
  if [[ ! -x $BIN_DIR/$tool ]]; then
    echo "SKIP: $BIN_DIR/$tool is missing (benchmarks not built?)"
    exit 77
  fi
done
# shellcheck source=lib/capture.sh
source "$(dirname "$0")/lib/capture.sh"

# run [NAME=VALUE...] PROGRAM ARGS...: at most 60 s, with no launcher or LOOM_* variable but
# those given; sets rc and elapsed (seconds).
run() {
  local clean=() name
  for name in $(compgen -e); do
    case $name in
      LOOM_* | RANK | WORLD_SIZE | LOCAL_RANK | MASTER_* | SLURM_* | OMPI_*) clean+=(-u "$name") ;;
    esac
  done
  local start=$SECONDS
  timeout -k 5 60 env "${clean[@]}" "$@" >"$OUT" 2>"$ERR"
  rc=$?
  elapsed=$((SECONDS - start))
}

expect_rc() { [[ $rc -eq $1 ]] || fail "exit code $rc, expected $1"; }
expect_text() { grep -qE -- "$2" "$1" || fail "nothing matches /$2/ in $(basename "$1")"; }
expect_fast() { [[ $elapsed -le $1 ]] || fail "took ${elapsed}s, expected at most $1s"; }

PERF=$BIN_DIR/loom-perf
SMALL=(-n 1 -w 0)

current="loom-perf: a sweep whose sizes hold no element tests nothing"
run "$PERF" allreduce -b 2 -e 3 -d float "${SMALL[@]}"
expect_rc 2
expect_text "$ERR" 'nothing to test: no size from -b 2 to -e 3 holds one element \(float 4 bytes\)'
run "$PERF" allgather -b 1 -e 7 -d double "${SMALL[@]}"
expect_rc 2
expect_text "$ERR" 'nothing to test'

current="loom-perf: -b above -e"
run "$PERF" allreduce -b 1M -e 8
expect_rc 2
expect_text "$ERR" 'minbytes \(1048576\) is larger than maxbytes \(8\)'

current="loom-perf: -b 0 still times the zero-count call"
run "$PERF" allreduce -b 0 -e 0 "${SMALL[@]}"
expect_rc 0

current="loom-perf: buffers that cannot be allocated are named with their size"
# 256 TiB: more than any address space a process gets, whatever the overcommit policy.
run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
  "$PERF" allreduce -b 8 -e 262144G "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" 'rank 0: cannot allocate the send buffer of 281474976710656 bytes \(256 TiB, set by -e 281474976710656\)'

current="an unwritable LOOM_DEBUG_FILE fails the communicator, naming the path and the reason"
run LOOM_DEBUG_FILE=/dev/full "$PERF" allreduce -b 8 -e 8 "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "loom error \(InvalidUsage\): LOOM_DEBUG_FILE='/dev/full': cannot write the log file /dev/full .*No space left on device"
run LOOM_DEBUG_FILE=/dev/null/loom-%p.log "$PERF" allreduce -b 8 -e 8 "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "loom error \(InvalidUsage\): LOOM_DEBUG_FILE='/dev/null/loom-%p.log'.*Not a directory"
run LOOM_DEBUG_FILE="$TMP/loom-%p.log" LOOM_DEBUG=INFO "$PERF" allreduce -b 8 -e 8 "${SMALL[@]}"
expect_rc 0
compgen -G "$TMP/loom-[0-9]*.log" >/dev/null || fail "no log file written"

current="a world size beyond the range is refused at once, not allocated"
run LOOM_RANK=0 LOOM_WORLD_SIZE=99999999999 LOOM_ROOT=127.0.0.1:1 "$PERF" allreduce "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "LOOM_WORLD_SIZE='99999999999' is out of range \(allowed: 1 to 1048576\)"
expect_fast 10
run LOOM_RANK=4294967297 LOOM_WORLD_SIZE=2 LOOM_ROOT=127.0.0.1:1 "$PERF" allreduce "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "LOOM_RANK='4294967297' is out of range"

current="LOOM_TIMEOUT=0 and a LOOM_TIMEOUT too long for the clock"
run LOOM_TIMEOUT=0 "$PERF" allreduce -b 8 -e 8 "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "LOOM_TIMEOUT='0' is out of range \(allowed: 1ms to 720h\); 0 does not mean \"no deadline\""
run LOOM_TIMEOUT=100000000h "$PERF" allreduce -b 8 -e 8 "${SMALL[@]}"
expect_rc 3
expect_text "$ERR" "LOOM_TIMEOUT='100000000h' is out of range"

current="loom-info prints ranges and refuses a level it does not know"
run "$BIN_DIR/loom-info"
expect_rc 0
expect_text "$OUT" '^ +Allowed: 1 to 1048576\.$'
expect_text "$OUT" '^ +Allowed: 1ms to 720h\.$'
expect_text "$OUT" '^ +Allowed: one of OFF, NONE, ERROR, WARN, INFO, DEBUG, TRACE\.$'
run LOOM_DEBUG=VERBOSE "$BIN_DIR/loom-info"
expect_rc 1
expect_text "$ERR" "LOOM_DEBUG='VERBOSE' is not one of OFF, NONE, ERROR, WARN, INFO, DEBUG, TRACE"
run LOOM_SHM_SLOT_SIZE=1G "$BIN_DIR/loom-info"
expect_rc 1
expect_text "$ERR" "LOOM_SHM_SLOT_SIZE='1G' is out of range \(allowed: 64 to 16M\)"

current="loomrun: --timeout and --grace beyond 720h"
run "$BIN_DIR/loomrun" -n 1 --timeout 100000000h true
expect_rc 2
expect_text "$ERR" "--timeout: '100000000h' is longer than the maximum, 720h"
run "$BIN_DIR/loomrun" -n 1 --grace 721h true
expect_rc 2
run "$BIN_DIR/loomrun" -n 1 --timeout 720h true
expect_rc 0

if [[ $failures -ne 0 ]]; then
  echo "settings_ranges: $failures check(s) failed" >&2
  exit 1
fi
echo "settings_ranges: all checks passed"
