#!/usr/bin/env bash
# The rank commands are in single quotes on purpose: the ranks expand them.
# shellcheck disable=SC2016
# Self-checking tests of loomrun: environment, output forwarding, failures, timeout, usage.
# Usage: bash loomrun_basic.sh BIN_DIR   (BIN_DIR holds loomrun). Exits non-zero on failure.
set -u

BIN_DIR=${1:?usage: loomrun_basic.sh BIN_DIR}
LOOMRUN=$BIN_DIR/loomrun
# shellcheck source=lib/require.sh
source "$(dirname "$0")/lib/require.sh"
need_bins "$BIN_DIR" loomrun
need_tools "(coreutils, procps)" timeout pgrep pkill
# shellcheck source=lib/capture.sh
source "$(dirname "$0")/lib/capture.sh"

# lr LIMIT ARGS...: runs loomrun ARGS for at most LIMIT seconds; sets rc and elapsed (seconds).
lr() {
  local limit=$1
  shift
  local start=$SECONDS
  timeout -k 2 "$limit" "$LOOMRUN" "$@" >"$OUT" 2>"$ERR"
  rc=$?
  elapsed=$((SECONDS - start))
}

expect_rc() { [[ $rc -eq $1 ]] || fail "exit code $rc, expected $1"; }
# expect_line FILE LINE: FILE has LINE as a whole line.
expect_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in $(basename "$1")"; }
expect_no_line() { ! grep -qxF -- "$2" "$1" || fail "unexpected line '$2' in $(basename "$1")"; }
# expect_text FILE REGEX: some line of FILE matches the extended REGEX.
expect_text() { grep -qE -- "$2" "$1" || fail "nothing matches /$2/ in $(basename "$1")"; }
expect_lines() {
  local n
  n=$(wc -l <"$1")
  [[ $n -eq $2 ]] || fail "$(basename "$1") has $n lines, expected $2"
}
expect_fast() { [[ $elapsed -le $1 ]] || fail "took ${elapsed}s, expected at most $1s"; }

current="environment per rank"
lr 10 -n 3 sh -c 'echo $LOOM_RANK $LOOM_WORLD_SIZE $LOOM_LOCAL_RANK $LOOM_LOCAL_SIZE \
  $LOOM_ROOT $LOOM_SECRET'
expect_rc 0
expect_lines "$OUT" 3
for r in 0 1 2; do
  expect_text "$OUT" "^\[$r\] $r 3 $r 3 127\.0\.0\.1:[0-9]+ [0-9a-f]{32}\$"
done
[[ $(cut -d' ' -f6,7 "$OUT" | sort -u | wc -l) -eq 1 ]] ||
  fail "ranks got different LOOM_ROOT or LOOM_SECRET"

current="-x and --root"
LOOM_ID=stale lr 10 -n 2 -x FOO=bar -x EQ=a=b --root 10.0.0.1:4242 \
  sh -c 'echo "$FOO $EQ $LOOM_ROOT ${LOOM_ID-unset}"'
expect_rc 0
expect_line "$OUT" "[0] bar a=b 10.0.0.1:4242 unset"
expect_line "$OUT" "[1] bar a=b 10.0.0.1:4242 unset"

current="prefixed stdout and stderr"
lr 10 -n 3 sh -c 'echo out-$LOOM_RANK; echo err-$LOOM_RANK >&2; printf tail-$LOOM_RANK'
expect_rc 0
for r in 0 1 2; do
  expect_line "$OUT" "[$r] out-$r"
  expect_line "$OUT" "[$r] tail-$r"
  expect_line "$ERR" "[$r] err-$r"
done
expect_lines "$OUT" 6
expect_lines "$ERR" 3

current="--no-prefix"
lr 10 -n 2 --no-prefix sh -c 'echo out-$LOOM_RANK; echo err-$LOOM_RANK >&2'
expect_rc 0
expect_line "$OUT" "out-0"
expect_line "$OUT" "out-1"
expect_line "$ERR" "err-1"

current="--no-prefix leaves a single rank's output byte for byte"
lr 10 -n 1 --no-prefix printf 'a\nb'
expect_rc 0
[[ $(od -An -c "$OUT" | tr -d ' \n') == 'a\nb' ]] || fail "output changed"

current="--only-rank"
lr 10 -n 3 --only-rank 1 sh -c 'echo out-$LOOM_RANK; echo err-$LOOM_RANK >&2'
expect_rc 0
expect_line "$OUT" "[1] out-1"
expect_lines "$OUT" 1
expect_lines "$ERR" 3

current="whole lines only"
lr 30 -n 4 sh -c 'l=R$LOOM_RANK; l=$l$l$l$l$l$l$l$l; l=$l$l$l$l$l$l$l$l; i=0
  while [ $i -lt 3000 ]; do echo $l; i=$((i + 1)); done'
expect_rc 0
expect_lines "$OUT" 12000
if grep -Evq '^\[([0-3])\] (R\1){64}$' "$OUT"; then fail "a line was cut or mixed"; fi

current="a rank exits 3"
lr 10 -n 3 sh -c 'if [ $LOOM_RANK = 2 ]; then exit 3; fi; sleep 100'
expect_rc 1
expect_text "$ERR" '^loomrun: rank 2 \(pid [0-9]+\) exited with status 3$'
expect_fast 5

current="a rank kills itself with SIGKILL"
dur=100.$$
lr 10 -n 3 -x DUR=$dur sh -c 'if [ $LOOM_RANK = 1 ]; then kill -9 $$; fi; sleep $DUR'
expect_rc 1
expect_text "$ERR" '^loomrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$'
expect_fast 5
if pgrep -f "sleep $dur" >/dev/null; then fail "a rank's sleep survived"; fi

current="--timeout"
lr 10 -n 2 --timeout 1 sleep 100
expect_rc 124
expect_text "$ERR" '^loomrun: timeout'
expect_fast 5

current="exec failure"
lr 10 -n 2 loom-no-such-program-xyz arg
[[ $rc -ne 0 ]] || fail "exit code 0"
expect_text "$ERR" "^\[[01]\] loomrun: cannot execute 'loom-no-such-program-xyz': "
expect_text "$ERR" '^loomrun: rank [01] \(pid [0-9]+\) exited with status 127$'

current="usage"
lr 10
expect_rc 2
expect_text "$ERR" 'missing -n'
lr 10 -n 0 true
expect_rc 2
lr 10 -n 2
expect_rc 2
expect_text "$ERR" 'missing the program'
lr 10 -n 2 --only-rank 2 true
expect_rc 2
lr 10 -n 2 --no-such-option true
expect_rc 2
lr 10 --help
expect_rc 0
expect_text "$OUT" '^Usage: loomrun -n N'
lr 10 -n 2 --nics 2 true
expect_rc 2
expect_text "$ERR" 'give --hosts too'
lr 10 -n 2 --hosts 2 --nics 9 true
expect_rc 2
expect_text "$ERR" '--nics wants a number of interfaces per host from 1 to 8'
lr 10 -n 2 --hosts 2 --nic-rate fast true
expect_rc 2
expect_text "$ERR" "--nic-rate wants a rate such as 500mbit or 1gbit, got 'fast'"

current="options after the program belong to it"
lr 10 -n 1 echo -n x
expect_rc 0
expect_line "$OUT" "[0] x"

current="--cpu-bind"
# Two CPUs of different cores (by sysfs), from those this shell may use.
allowed=$(taskset -pc $$ | sed 's/.*: //')
cpu_a="" cpu_b=""
for cpu in $(seq 0 $(($(getconf _NPROCESSORS_CONF) - 1))); do
  taskset -c "$cpu" true 2>/dev/null || continue
  siblings=/sys/devices/system/cpu/cpu$cpu/topology/thread_siblings_list
  [[ -r $siblings ]] || continue
  if [[ -z $cpu_a ]]; then
    cpu_a=$cpu a_siblings=$(<"$siblings")
  elif [[ $(<"$siblings") != "$a_siblings" ]]; then
    cpu_b=$cpu
    break
  fi
done
if [[ -z $cpu_b ]]; then
  echo "loomrun_basic: skipping --cpu-bind checks: fewer than two cores usable (CPUs $allowed)"
else
  bound() { grep '^\['"$1"'\]' "$OUT" | sed 's/.*:[[:space:]]*//'; }
  show='grep Cpus_allowed_list /proc/self/status'
  timeout 20 taskset -c "$cpu_a,$cpu_b" "$LOOMRUN" -n 4 -- sh -c "$show" >"$OUT" 2>"$ERR"
  rc=$?
  expect_rc 0
  # Four ranks on two cores: 0 and 1 share one, 2 and 3 the other.
  [[ $(bound 0) == "$(bound 1)" && $(bound 2) == "$(bound 3)" ]] || fail "ranks 0,1 and 2,3 should pair up"
  pair=$(printf '%s\n' "$(bound 0)" "$(bound 2)" | sort -n | paste -sd,)
  expected=$(printf '%s\n' "$cpu_a" "$cpu_b" | sort -n | paste -sd,)
  [[ $pair == "$expected" ]] || fail "ranks bound to $pair, expected one rank pair on each of $expected"
  # One rank has both cores; --cpu-bind none leaves every rank loomrun's two CPUs.
  timeout 20 taskset -c "$cpu_a,$cpu_b" "$LOOMRUN" -n 1 -- sh -c "$show" >"$OUT" 2>"$ERR"
  rc=$?
  expect_rc 0
  one=$(bound 0)
  [[ $one != "$cpu_a" && $one != "$cpu_b" && -n $one ]] || fail "one rank should have both cores, has $one"
  timeout 20 taskset -c "$cpu_a,$cpu_b" "$LOOMRUN" --cpu-bind none -n 4 -- sh -c "$show" >"$OUT" 2>"$ERR"
  rc=$?
  expect_rc 0
  for r in 0 1 2 3; do
    [[ $(bound $r) == "$(bound 0)" ]] || fail "--cpu-bind none: rank $r bound to $(bound $r), rank 0 to $(bound 0)"
  done
  [[ $(bound 0) != "$cpu_a" && $(bound 0) != "$cpu_b" ]] || fail "--cpu-bind none: rank 0 bound to $(bound 0) alone"
fi
lr 10 -n 2 --cpu-bind cores true
expect_rc 2
expect_text "$ERR" "--cpu-bind wants block or none, got 'cores'"

if [[ $failures -ne 0 ]]; then
  echo "loomrun_basic: $failures check(s) failed" >&2
  exit 1
fi
echo "loomrun_basic: all checks passed"
