#!/usr/bin/env bash
# Self-checking tests of loom-info: it lists the settings with their defaults, shows where a
# value comes from, and warns about LOOM_* variables that no setting declares; with --topology
# it describes this host and process, as text or as a one-rank topology JSON file.
# Usage: bash loom_info.sh BIN_DIR   (BIN_DIR holds loom-info). Exits non-zero on failure.
set -u

BIN_DIR=${1:?usage: loom_info.sh BIN_DIR}
INFO=$BIN_DIR/loom-info
if [[ ! -x $INFO ]]; then
  echo "FAIL: $INFO is missing" >&2
  exit 1
fi
# shellcheck source=lib/capture.sh
source "$(dirname "$0")/lib/capture.sh"

# info ARGS...: runs loom-info ARGS (at most 10 s) with no LOOM_* variable but those given with
# `env` before it; sets rc.
info() {
  local clean=()
  local name
  for name in $(compgen -e); do
    [[ $name == LOOM_* ]] && clean+=(-u "$name")
  done
  timeout 10 env "${clean[@]}" "$@" >"$OUT" 2>"$ERR"
  rc=$?
}

expect_rc() { [[ $rc -eq $1 ]] || fail "exit code $rc, expected $1"; }
# expect_text FILE REGEX: some line of FILE matches the extended REGEX.
expect_text() { grep -qE -- "$2" "$1" || fail "nothing matches /$2/ in $(basename "$1")"; }
expect_no_text() { ! grep -qE -- "$2" "$1" || fail "unexpected /$2/ in $(basename "$1")"; }

current="defaults"
info "$INFO"
expect_rc 0
expect_text "$OUT" '^loom [0-9]+\.[0-9]+\.[0-9]+$'
expect_text "$OUT" '^ +LOOM_TIMEOUT +duration +600s +default +600s$'
expect_text "$OUT" '^ +LOOM_RANK +integer +- +unset +-$'
expect_text "$OUT" '^reliability:$'
expect_text "$OUT" 'Deadline for every blocking wait'
expect_no_text "$ERR" 'warning'

current="--settings is the default"
info "$INFO"
cp "$OUT" "$TMP/default"
info "$INFO" --settings
expect_rc 0
cmp -s "$OUT" "$TMP/default" || fail "--settings prints something else than no option"

current="an environment override"
info LOOM_TIMEOUT=30s "$INFO"
expect_rc 0
expect_text "$OUT" '^ +LOOM_TIMEOUT +duration +600s +environment +30s$'

current="a secret is not shown"
info LOOM_SECRET=0123456789abcdef "$INFO"
expect_rc 0
expect_text "$OUT" '^ +LOOM_SECRET +string +- +environment +\(hidden'
expect_no_text "$OUT" '0123456789abcdef'

current="a misspelt variable"
info LOOM_TIMEOTU=1 "$INFO"
expect_rc 0
expect_text "$ERR" 'warning: LOOM_TIMEOTU is set but is not a loom setting'
expect_text "$ERR" 'did you mean LOOM_TIMEOUT\?'

current="an invalid value"
info LOOM_TIMEOUT=soon "$INFO"
expect_rc 1
expect_text "$ERR" 'LOOM_TIMEOUT'

current="usage"
info "$INFO" --help
expect_rc 0
expect_text "$OUT" '^Usage: loom-info'
info "$INFO" --version
expect_rc 0
expect_text "$OUT" '^loom [0-9]+\.[0-9]+\.[0-9]+$'
info "$INFO" --bogus
expect_rc 2

current="--topology"
info "$INFO" --topology
expect_rc 0
expect_text "$OUT" '^host id: +[^ ]+$'
expect_text "$OUT" '^hostname: +[^ ]+$'
expect_text "$OUT" '^NUMA nodes: +([1-9][0-9]*|unknown)$'
expect_text "$OUT" '^cores: +[1-9][0-9]*$'
expect_text "$OUT" '^PUs: +[1-9][0-9]*$'
expect_text "$OUT" '^process: +pid [0-9]+, bound to CPUs [0-9]'
expect_text "$OUT" '^PCI devices: +[0-9]+$'
expect_no_text "$ERR" '.'

current="--topology with LOOM_HOST_ID"
info LOOM_HOST_ID=fake-host-7 "$INFO" --topology
expect_rc 0
expect_text "$OUT" '^host id: +fake-host-7$'

if command -v taskset >/dev/null; then
  current="--topology shows the CPU binding"
  info taskset -c 0 "$INFO" --topology
  expect_rc 0
  expect_text "$OUT" '^process: +pid [0-9]+, bound to CPUs 0 \('
fi

# A server hwloc reads from XML (tests/data/two-switch-server.xml): every PCI device's NUMA node
# and PCIe switch (the topmost bridge below the host bridge), which LOOM_OFI_DOMAINS=near uses.
current="--topology of a faked server: NUMA nodes and PCIe switches"
server="$(dirname "$0")/../data/two-switch-server.xml"
info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_HOST_ID=p5 "$INFO" --topology
expect_rc 0
expect_text "$OUT" '^NUMA nodes: +2$'
expect_text "$OUT" '^  gpu +0000:10:00\.0 +0 +31\.50 GB/s +0000:0e:00\.0 +cuda0 \(10de:2330\)$'
expect_text "$OUT" '^  nic +0000:11:00\.0 +0 +31\.50 GB/s +0000:0e:00\.0 +rdmap17s0 \(1d0f:efa1\)$'
expect_text "$OUT" '^  nic +0000:81:00\.0 +1 +15\.75 GB/s +0000:80:01\.0 +eth1 \(8086:1592\)$'
info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_HOST_ID=p5 "$INFO" --topology --json
expect_rc 0
expect_text "$OUT" '"os_names": \[$'
expect_text "$OUT" '"pci_switch": "0000:0e:00\.0"'
if command -v python3 >/dev/null; then
  python3 - "$OUT" <<'PY' || fail "the faked server's devices are wrong in JSON"
import json, sys
d = {x["bus_id"]: x for x in json.load(open(sys.argv[1]))["hosts"][0]["devices"]}
assert d["0000:11:00.0"]["os_names"] == ["rdmap17s0"] and d["0000:11:00.0"]["kind"] == "nic"
assert d["0000:10:00.0"]["pci_switch"] == d["0000:11:00.0"]["pci_switch"] == "0000:0e:00.0"
assert d["0000:81:00.0"]["pci_switch"] == "0000:80:01.0" and d["0000:81:00.0"]["numa_node"] == 1
PY
fi
# What LOOM_OFI_DOMAINS=near would open on that server: this process bound to CPU 1 takes eth1
# (its NUMA node's); a rank on host-sim's GPU 0 (0000:10:00.0, the server's cuda0) takes
# rdmap17s0, under the same PCIe switch.
if command -v taskset >/dev/null; then
  current="--transports: LOOM_OFI_DOMAINS=near on a faked server"
  info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_DEVICE=host-sim \
    LOOM_OFI_PROVIDER="tcp;ofi_rxm" LOOM_OFI_DOMAINS=near:rdmap17s0,eth1 taskset -c 1 \
    "$INFO" --transports
  expect_rc 0
  if grep -qE '^  ofi  available' "$OUT"; then
    expect_text "$OUT" '^ +LOOM_OFI_DOMAINS=near:rdmap17s0,eth1 here: eth1 \(1 of 2: same NUMA node as CPUs 1 \(NUMA node 1\)\)$'
    expect_text "$OUT" '^ +a rank on GPU 0: rdmap17s0 \(1 of 2: same PCI switch as GPU 0000:10:00\.0\)$'
  fi
fi
# LOOM_PCI_TOPO_FILE corrects hwloc's view (virtual machines that do not show their PCIe
# switches): eth1 moves under the GPU's switch and a device hwloc did not see is added; then
# near gives a rank on that GPU both NICs. A file naming an unknown device without its kind
# fails, naming the setting and the device.
current="LOOM_PCI_TOPO_FILE corrects PCI devices"
cat > "$TMP/pci.json" <<'JSON'
{"version": 1, "devices": [
  {"bus_id": "0000:81:00.0", "pci_switch": "0000:0e:00.0", "numa_node": 0},
  {"bus_id": "0000:12:00.0", "kind": "nic", "os_names": ["rdmap18s0"], "numa_node": 0}]}
JSON
info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_PCI_TOPO_FILE="$TMP/pci.json" "$INFO" --topology
expect_rc 0
expect_text "$OUT" '^PCI devices: +4$'
expect_text "$OUT" '^  nic +0000:81:00\.0 +0 +15\.75 GB/s +0000:0e:00\.0 +eth1 \(8086:1592\)$'
expect_text "$OUT" '^  nic +0000:12:00\.0 +0 +- +- +added by LOOM_PCI_TOPO_FILE$'
if command -v taskset >/dev/null; then
  info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_PCI_TOPO_FILE="$TMP/pci.json" \
    LOOM_DEVICE=host-sim LOOM_OFI_PROVIDER="tcp;ofi_rxm" LOOM_OFI_DOMAINS=near:rdmap17s0,eth1 \
    taskset -c 1 "$INFO" --transports
  expect_rc 0
  if grep -qE '^  ofi  available' "$OUT"; then
    expect_text "$OUT" '^ +a rank on GPU 0: rdmap17s0,eth1 \(2 of 2: same PCI switch as GPU 0000:10:00\.0\)$'
  fi
fi
echo '{"version": 1, "devices": [{"bus_id": "0000:99:00.0", "numa_node": 1}]}' > "$TMP/bad.json"
info HWLOC_XMLFILE="$server" HWLOC_THISSYSTEM=1 LOOM_PCI_TOPO_FILE="$TMP/bad.json" "$INFO" --topology
expect_rc 1
expect_text "$ERR" "LOOM_PCI_TOPO_FILE=.*bad\.json.*0000:99:00\.0.*kind"

current="--topology --json"
info LOOM_HOST_ID=fake-host-7 "$INFO" --topology --json
expect_rc 0
expect_text "$OUT" '^  "version": 1,$'
expect_text "$OUT" '"host_id": "fake-host-7"'
expect_text "$OUT" '"cores": [1-9][0-9]*,$'
if command -v python3 >/dev/null; then
  python3 - "$OUT" <<'PY' || fail "not a valid one-rank topology"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["version"] == 1 and len(t["ranks"]) == 1 and len(t["hosts"]) == 1
assert t["ranks"][0]["rank"] == 0 and t["ranks"][0]["host_id"] == t["hosts"][0]["host_id"]
assert t["hosts"][0]["cores"] >= 1 and t["ranks"][0]["cpus"]
for d in t["hosts"][0]["devices"]:
    assert d["kind"] in ("gpu", "nic", "other") and d["bus_id"]
PY
fi
info "$INFO" --json --topology
expect_rc 0
expect_text "$OUT" '^  "version": 1,$'

current="--transports: GPUs, peer access and links (host-sim)"
info LOOM_DEVICE=host-sim "$INFO" --transports
expect_rc 0
expect_text "$OUT" '^  cuda_ipc available +host-sim \(host-sim\), 8 GPU\(s\)'
expect_text "$OUT" '^    GPU 3 at 0000:13:00.0$'
expect_text "$OUT" '^    GPU 0 <-> GPU 3: peer access, link nvlink \(simulated\)$'
expect_text "$OUT" '^    GPU 3 <-> GPU 4: no peer access, link pcie \(simulated\)$'
info LOOM_DEVICE=none "$INFO" --transports
expect_rc 0
expect_text "$OUT" '^  cuda_ipc unavailable +no device runtime \(LOOM_DEVICE=none'

current="--json and --topology usage"
info "$INFO" --json
expect_rc 2
expect_text "$ERR" '--json goes with --topology'
info "$INFO" --topology --settings
expect_rc 2
info "$INFO" --help
expect_text "$OUT" '--topology'

if [[ $failures -ne 0 ]]; then
  echo "loom_info: $failures check(s) failed" >&2
  exit 1
fi
echo "loom_info: all checks passed"
