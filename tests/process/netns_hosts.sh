#!/usr/bin/env bash
# loomrun --hosts: a 2-host x 2-rank job in network namespaces, over tcp and over ofi
# (tcp;ofi_rxm). Every allreduce result is exact; inside a host the ranks use shm, across hosts
# the chosen network transport, and the bytes really cross each host's eth0. The namespaces are
# gone afterwards, also when a rank fails and when loomrun is stopped by a signal.
# Needs root and ip (iproute2); skips (exit 77) otherwise.
# Usage: bash netns_hosts.sh BIN_DIR
set -u
BIN=${1:?usage: netns_hosts.sh BIN_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "needs the ip command (iproute2)"
probe="loomprobe$$"
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$probe"
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
before=$(ip netns list | grep -c '^loom-' || true)

# job NAME ENV...: 4 ranks on 2 hosts; loom-perf then each rank's eth0 counters.
job() {
  local name=$1
  shift
  local xs=()
  for e in "$@"; do xs+=(-x "$e"); done
  timeout 300 "$BIN/loomrun" --hosts 2 -n 4 --timeout 240 -x LOOM_TIMEOUT=60s \
    -x LOOM_DEBUG=INFO -x LOOM_DEBUG_SUBSYS=INIT,NET "${xs[@]}" -- bash -c \
    "\"$BIN/loom-perf\" allreduce -b 8 -e 8M -f 8 -n 2 -w 1 &&
     awk '/eth0:/ { sub(/.*eth0:/, \"\"); print \$9 }' /proc/net/dev > $TMP/$name.tx.\$LOOM_RANK &&
     echo \$LOOM_HOST_ID > $TMP/$name.host.\$LOOM_RANK" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "Avg bus bandwidth" "$TMP/$name.out"; then
    fail "$name: job failed (exit $rc)"
    tail -30 "$TMP/$name.err" "$TMP/$name.out" >&2
    return 1
  fi
  if sed 's/^\[[0-9]*\] //' "$TMP/$name.out" |
    awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 != "0" || $13 != "0")' | grep -q .; then
    fail "$name: wrong results"
  fi
  return 0
}
expect() {  # expect NAME RANK PEER TRANSPORT
  grep -q "rank $2: peer $3 on .* via $4" "$TMP/$1.err" ||
    fail "$1: rank $2 should reach peer $3 via $4 ($(grep "rank $2: peer $3 " "$TMP/$1.err"))"
}
check_hosts() {  # the two hosts differ, ranks 0,1 share one, and each eth0 carried the data
  local name=$1
  [[ $(cat "$TMP/$name.host.0") == $(cat "$TMP/$name.host.1") ]] || fail "$name: ranks 0, 1 split"
  [[ $(cat "$TMP/$name.host.0") != $(cat "$TMP/$name.host.2") ]] || fail "$name: one host only"
  for r in 0 2; do
    local tx
    tx=$(cat "$TMP/$name.tx.$r")
    ((tx > 8000000)) || fail "$name: host of rank $r sent only $tx bytes over eth0"
  done
}
gone() {
  local left
  left=$(ip netns list | grep -c '^loom-' || true)
  [[ $left -le $before ]] || fail "$1: network namespaces left: $(ip netns list | grep '^loom-')"
}

if job tcp LOOM_TRANSPORTS=shm,tcp; then
  expect tcp 0 1 shm; expect tcp 0 2 tcp; expect tcp 1 2 tcp; expect tcp 2 3 shm
  grep -q "ring 0 1 | 2 3" "$TMP/tcp.err" || fail "tcp: ring should enter each host once"
  check_hosts tcp
  echo "ok: 2 hosts x 2 ranks over tcp, shm inside each host"
fi
gone tcp

if job ofi "LOOM_TRANSPORTS=shm,ofi" "LOOM_OFI_PROVIDER=tcp;ofi_rxm" LOOM_OFI_FALLBACK=false; then
  expect ofi 0 1 shm; expect ofi 1 2 ofi; expect ofi 3 0 ofi; expect ofi 2 3 shm
  grep -q "over ofi (provider tcp;ofi_rxm, fabric 10.199.0.0/24" "$TMP/ofi.err" ||
    fail "ofi: no ofi connection over the namespaces' network"
  check_hosts ofi
  echo "ok: 2 hosts x 2 ranks over ofi (tcp;ofi_rxm), shm inside each host"
fi
gone ofi

# A failing rank: loomrun fails, the namespaces still go.
timeout 60 "$BIN/loomrun" --hosts 2 -n 2 -- bash -c 'exit $((LOOM_RANK + 3))' >/dev/null 2>&1
[[ $? -eq 1 ]] || fail "failing job: loomrun should exit 1"
gone failure

# SIGTERM to loomrun while the ranks run.
"$BIN/loomrun" --hosts 2 -n 2 -- sleep 60 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  [[ $(ip netns list | grep -c "^loom-$pid-") -ge 3 ]] && break
  sleep 0.05
done
[[ $(ip netns list | grep -c "^loom-$pid-") -ge 3 ]] || fail "signal: namespaces never appeared"
kill -TERM $pid
wait $pid
gone signal

[[ $failures -eq 0 ]] || { echo "netns_hosts: $failures failure(s)" >&2; exit 1; }
echo "netns_hosts: all passed"
