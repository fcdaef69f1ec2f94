#!/usr/bin/env bash
# Several NICs per host (rails): loomrun --hosts 2 --nics 2 gives each namespace host eth0
# and eth1 on separate networks. With LOOM_SOCKET_IFNAME=eth0,eth1 the tcp transport listens on
# both and spreads each peer's sockets over them, and with LOOM_OFI_DOMAINS=eth0,eth1 the ofi
# transport (tcp;ofi_rxm) opens an endpoint on each and stripes messages over them: every
# allreduce result is exact, and each host's eth0 and eth1 both carry a fair share of the bytes
# (each at least a third of the two together). With LOOM_OFI_DOMAINS=near each rank takes the NIC
# nearest its GPU or NUMA node (faked servers). A host with one rail still reaches a host with
# two (tcp and ofi); a list naming a missing
# interface fails at init naming it; and with the interfaces capped by --nic-rate, two rails
# move a 4 MiB allreduce faster than one, over tcp and over ofi (a loose bound here: the table is in
# docs/transports.md). Needs root, ip and tc (iproute2); skips (exit 77) otherwise.
# Usage: bash netns_rails.sh BIN_DIR
set -u
BIN=${1:?usage: netns_rails.sh BIN_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "needs the ip command (iproute2)"
command -v tc >/dev/null || skip "needs the tc command (iproute2)"
probe="loomprobe$$"
ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$probe"
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

# job NAME RANKS LOOMRUN_ARGS... -- SCRIPT: loomrun --hosts 2 with the given ranks; SCRIPT runs in
# every rank after loom-perf (which it may name as $PERF), with $OUT the output prefix.
job() {
  local name=$1 ranks=$2
  shift 2
  local args=()
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  timeout 300 "$BIN/loomrun" --hosts 2 -n "$ranks" --timeout 240 -x LOOM_TIMEOUT=60s \
    -x LOOM_TRANSPORTS=shm,tcp -x LOOM_DEBUG=INFO -x LOOM_DEBUG_SUBSYS=INIT,NET "${args[@]}" -- \
    env PERF="$BIN/loom-perf" OUT="$TMP/$name" bash -c "$1" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
# The bytes each interface of this rank's host has sent, as "eth0 eth1".
counters='awk "/eth0:/ {a=\$10} /eth1:/ {b=\$10} END {print a, b}" /proc/net/dev'
exact() {  # exact NAME: loom-perf's table with no wrong value
  if ! grep -q "Avg bus bandwidth" "$TMP/$1.out"; then
    fail "$1: no loom-perf table"
    tail -20 "$TMP/$1.err" "$TMP/$1.out" >&2
    return 1
  fi
  if sed 's/^\[[0-9]*\] //' "$TMP/$1.out" |
    awk '$1 ~ /^[0-9]+$/ && NF == 13 && ($9 !~ /^(0|N\/A)$/ || $13 !~ /^(0|N\/A)$/)' |
    grep -q .; then
    fail "$1: wrong results"
    return 1
  fi
}

# both_nics_carried NAME: on the hosts of ranks 0 and 2, eth0 and eth1 each sent at least a third
# of the job's bytes (what the ranks wrote to NAME.tx.RANK).
both_nics_carried() {
  local r tx0 tx1 total
  for r in 0 2; do
    read -r tx0 tx1 < "$TMP/$1.tx.$r"
    total=$((tx0 + tx1))
    ((total > 8000000)) || fail "$1: host of rank $r sent only $total bytes"
    ((tx0 * 3 > total && tx1 * 3 > total)) ||
      fail "$1: host of rank $r: eth0 sent $tx0 bytes, eth1 $tx1: one rail carried almost all"
  done
}

# 2 hosts x 2 ranks, two rails everywhere: shm inside a host, tcp over both NICs across.
job rails 4 --nics 2 -x LOOM_SOCKET_IFNAME=eth0,eth1 -- \
  '"$PERF" allreduce -b 8 -e 8M -f 8 -n 2 -w 1 && '"$counters"' > $OUT.tx.$LOOM_RANK &&
   "${PERF%/*}/loom-info" --transports > $OUT.info.$LOOM_RANK'
if exact rails; then
  grep -q "LOOM_SOCKET_IFNAME: eth0 10.199.0.2, eth1 10.199.1.2 -> 2 rail(s)" "$TMP/rails.info.2" ||
    fail "rails: loom-info --transports on rank 2's host should list both rails ($(grep IFNAME "$TMP/rails.info.2"))"
  grep -q "rank 1: .* sockets to rank 2 over 2 rail(s) here and 2 there" "$TMP/rails.err" ||
    fail "rails: rank 1 should connect to rank 2 over 2 rails ($(grep 'rail' "$TMP/rails.err" | head -3))"
  both_nics_carried rails
  echo "ok: 2 hosts x 2 ranks over tcp on 2 rails each; eth0 and eth1 both carried data"
fi

# The ofi transport (tcp;ofi_rxm) over both NICs: an endpoint per domain, messages striped.
# LOOM_OFI_DOMAINS=all finds both (the capped runs below name them).
job ofi 4 --nics 2 -x "LOOM_TRANSPORTS=shm,ofi" -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" \
  -x LOOM_OFI_FALLBACK=false -x LOOM_OFI_DOMAINS=all -- \
  '"$PERF" allreduce -b 8 -e 8M -f 8 -n 2 -w 1 && '"$counters"' > $OUT.tx.$LOOM_RANK'
if exact ofi; then
  grep -q "rank 2: LOOM_OFI_DOMAINS=all: 2 domain(s) of tcp;ofi_rxm: eth0,eth1" "$TMP/ofi.err" ||
    fail "ofi: LOOM_OFI_DOMAINS=all should find eth0 and eth1 ($(grep 'OFI_DOMAINS' "$TMP/ofi.err" | head -1))"
  grep -q "rank 2: ofi over 2 rails (eth0,eth1)" "$TMP/ofi.err" ||
    fail "ofi: rank 2 should run ofi over 2 rails"
  grep -q "rank 2: ofi endpoint of rail 1 up: provider tcp;ofi_rxm, fabric 10.199.1.0/24, domain eth1" \
    "$TMP/ofi.err" || fail "ofi: rank 2's second rail should be on eth1"
  both_nics_carried ofi
  echo "ok: 2 hosts x 2 ranks over ofi (tcp;ofi_rxm) on 2 rails; eth0 and eth1 both carried data"
fi

# LOOM_OFI_DOMAINS=near: each rank takes the NICs nearest to it. The servers are faked by a
# LOOM_TOPO_FILE (written by every rank from its LOOM_HOST_ID): eth0 on NUMA node 0, eth1 on
# node 1, ranks 0 and 2 bound to node 0, ranks 1 and 3 to node 1. Rank 1's one rail (eth1)
# talks to rank 2's (eth0): the namespaces route between the two networks, as EFA devices all
# reach each other.
near_topo='base=${LOOM_HOST_ID%-h*}
  nic() { echo "{\"kind\": \"nic\", \"bus_id\": \"$1\", \"numa_node\": $2, \"os_names\": [\"$3\"]}"; }
  host() { echo "{\"host_id\": \"$base-h$1\", \"numa_nodes\": 2, \"devices\": [$(nic 0000:01:00.0 0 eth0), $(nic 0000:81:00.0 1 eth1)]}"; }
  rank() { echo "{\"rank\": $1, \"host_id\": \"$base-h$(($1 / 2))\", \"numa_node\": $(($1 % 2))}"; }
  echo "{\"version\": 1, \"ranks\": [$(rank 0), $(rank 1), $(rank 2), $(rank 3)], \"hosts\": [$(host 0), $(host 1)]}" > $OUT.topo.$LOOM_RANK
  export LOOM_TOPO_FILE=$OUT.topo.$LOOM_RANK'
job near 4 --nics 2 -x "LOOM_TRANSPORTS=shm,ofi" -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" \
  -x LOOM_OFI_FALLBACK=false -x LOOM_OFI_DOMAINS=near -- \
  "$near_topo"'
   "$PERF" allreduce -b 8 -e 8M -f 8 -n 2 -w 1'
if exact near; then
  for r in 0 1 2 3; do
    want=eth$((r % 2))
    grep -q "rank $r: LOOM_OFI_DOMAINS=near: $want (1 of 2: same NUMA node as CPUs - (NUMA node $((r % 2))))" \
      "$TMP/near.err" || fail "near: rank $r should take $want ($(grep "rank $r: LOOM_OFI_DOMAINS" "$TMP/near.err"))"
    grep -q "rank $r: ofi endpoint up: provider tcp;ofi_rxm, fabric 10.199.$((r % 2)).0/24, domain $want" \
      "$TMP/near.err" || fail "near: rank $r's endpoint should be on $want"
  done
  echo "ok: LOOM_OFI_DOMAINS=near: each rank on the NIC of its NUMA node, results exact"
fi

# With a GPU (host-sim's device 0, PCI address 0000:10:00.0), the NIC under its PCIe switch wins
# over one merely on its NUMA node: faked hosts with eth0 on the node and eth1 beside the GPU.
near_gpu_topo='base=${LOOM_HOST_ID%-h*}
  dev() { echo "{\"kind\": \"$1\", \"bus_id\": \"$2\", \"numa_node\": 0, \"os_names\": [\"$3\"], \"pci_switch\": \"$4\"}"; }
  host() { echo "{\"host_id\": \"$base-h$1\", \"numa_nodes\": 1, \"devices\": [$(dev nic 0000:01:00.0 eth0 ""), $(dev gpu 0000:10:00.0 cuda0 0000:0f:00.0), $(dev nic 0000:11:00.0 eth1 0000:0f:00.0)]}"; }
  rank() { echo "{\"rank\": $1, \"host_id\": \"$base-h$1\", \"numa_node\": 0}"; }
  echo "{\"version\": 1, \"ranks\": [$(rank 0), $(rank 1)], \"hosts\": [$(host 0), $(host 1)]}" > $OUT.topo.$LOOM_RANK
  export LOOM_TOPO_FILE=$OUT.topo.$LOOM_RANK'
job near_gpu 2 --nics 2 -x "LOOM_TRANSPORTS=shm,ofi" -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" \
  -x LOOM_OFI_FALLBACK=false -x LOOM_OFI_DOMAINS=near -x LOOM_DEVICE=host-sim -- \
  "$near_gpu_topo"'
   "$PERF" allreduce -b 8 -e 1M -f 8 -n 2 -w 1'
if exact near_gpu; then
  for r in 0 1; do
    grep -q "rank $r: LOOM_OFI_DOMAINS=near: eth1 (1 of 2: same PCI switch as GPU 0000:10:00.0)" \
      "$TMP/near_gpu.err" || fail "near_gpu: rank $r should take eth1, beside its GPU"
  done
  echo "ok: LOOM_OFI_DOMAINS=near with a GPU: the NIC under the GPU's PCIe switch"
fi

# uneven_job NAME VARIABLE [-x SETTING...]: host 0's rank lists eth0,eth1 in VARIABLE, host 1's
# rank eth0 only; each pair uses the rails both have.
uneven_job() {
  local name=$1 var=$2
  shift 2
  job "$name" 2 --nics 2 "$@" -- \
    'if [[ $LOOM_RANK == 0 ]]; then export '"$var"'=eth0,eth1; else export '"$var"'=eth0; fi
     "$PERF" allreduce -b 8 -e 4M -f 16 -n 2 -w 1'
}
uneven_job ofi_uneven LOOM_OFI_DOMAINS -x "LOOM_TRANSPORTS=shm,ofi" \
  -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" -x LOOM_OFI_FALLBACK=false
if exact ofi_uneven; then
  grep -q "rank 0: ofi over 2 rails (eth0,eth1)" "$TMP/ofi_uneven.err" ||
    fail "ofi_uneven: rank 0 should open 2 rails"
  echo "ok: ofi with 2 rails on one host and 1 on the other"
fi

# The same over tcp: rank 1's sockets go to both of rank 0's rails.
uneven_job uneven LOOM_SOCKET_IFNAME
if exact uneven; then
  grep -q "rank 0: .* sockets to rank 1 over 2 rail(s) here and 1 there" "$TMP/uneven.err" ||
    fail "uneven: rank 0 should use its 2 rails to rank 1's one"
  echo "ok: a host with 2 rails and a host with 1"
fi

# A missing interface: init fails and names it.
job missing 2 --nics 2 -x LOOM_SOCKET_IFNAME=eth0,eth7 -- '"$PERF" allreduce -b 8 -e 8 -n 1 -w 0'
if grep -q "Avg bus bandwidth" "$TMP/missing.out"; then
  fail "missing: a job with LOOM_SOCKET_IFNAME naming eth7 should fail"
elif ! grep -q "eth7" "$TMP/missing.err"; then
  fail "missing: the error should name eth7 ($(grep -i error "$TMP/missing.err" | head -2))"
else
  echo "ok: LOOM_SOCKET_IFNAME naming a missing interface fails at init, naming it"
fi

# Capped NICs (100 Mbit/s each, so that the NICs and not the CPUs are the limit): 2 ranks on 2
# hosts, one rail against two, 4 MiB allreduce.
# capped NAME VARIABLE [-x SETTING...]: NAME_1 with VARIABLE=eth0, NAME_2 with eth0,eth1.
usec() { sed 's/^\[[0-9]*\] //' "$TMP/$1.out" | awk '$1 == 4194304 { print int($6) }'; }
capped() {
  local name=$1 var=$2 t1 t2
  shift 2
  for rails in eth0 eth0,eth1; do
    job "${name}_${rails//[^,]/}" 2 --nics 2 --nic-rate 100mbit "$@" -x "$var=$rails" -- \
      '"$PERF" allreduce -b 4M -e 4M -n 3 -w 1 --outofplace-only'
  done
  exact "${name}_" && exact "${name}_," || return
  t1=$(usec "${name}_")
  t2=$(usec "${name}_,")
  # An ideal second rail halves the time; require a clear gain (a third off) on this noisy VM.
  ((t1 > 0 && t2 > 0 && t2 * 3 < t1 * 2)) ||
    fail "capped NICs, $name: 4 MiB allreduce took $t2 us on 2 rails, $t1 us on 1: no gain"
  echo "ok: $name, capped at 100 Mbit/s per NIC, 4 MiB allreduce: $t1 us on 1 rail, $t2 on 2"
}
capped tcp LOOM_SOCKET_IFNAME
capped ofi LOOM_OFI_DOMAINS -x "LOOM_TRANSPORTS=shm,ofi" -x "LOOM_OFI_PROVIDER=tcp;ofi_rxm" \
  -x LOOM_OFI_FALLBACK=false

left=$(ip netns list | grep -c "^loom-" || true)
[[ $left -eq 0 ]] || fail "network namespaces left: $(ip netns list | grep '^loom-')"
[[ $failures -eq 0 ]] || { echo "netns_rails: $failures failure(s)" >&2; exit 1; }
echo "netns_rails: all passed"
