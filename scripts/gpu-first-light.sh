#!/usr/bin/env bash
# gpu-first-light.sh: first light of loom's CUDA path on one GPU, in one go (docs/gpu.md,
# "Running first light"). On the GPU machine it runs from the bundle (run-first-light.sh).
#
#   scripts/gpu-first-light.sh OUTDIR [--device cuda|host-sim] [--bin DIR] [--budget SECONDS]
#                              [--only STEP,...] [--pack DIR] [--dtypes-paths "N PATH,..."]
#
# Steps, in this order; each run has its own timeout, all of them fit in --budget (default 420 s;
# each step keeps a share of it for the steps after it: kernels 70%, ipc 60%, routes 30%, dtypes
# 10%, sweeps 3%; what no longer fits is reported as skipped), and a failed run does not stop the
# others. Only programs that cannot start (bundle) or no visible GPU (device) stop
# the run early.
#   bundle   the programs start (loom-info --version: every library resolves)
#   device   nvidia-smi; the GPU as loom sees it (loom-info --transports); loom's settings; the
#            host's PCI devices with their NUMA nodes and PCIe switches (loom-info --topology)
#   kernels  loom-kernel-bench: sum of fp32/bf16/fp16, 1 MiB .. 1 GiB, against a device-to-device
#            copy in the same run, every output checked against the host kernels
#   ipc      loom-ipc-probe (a real GPU only): copies by one process out of another's memory
#            through CUDA IPC, next to copies of its own memory, while the other idles, holds
#            its legacy default stream or a stream of its own with a host function, holds one
#            with cuStreamWaitValue32, or runs a kernel: where the two-process device path's
#            time goes, without loom
#   routes   the 2- and 4-rank device allreduce (8 B .. max by 4, in and out of place, verified)
#            on the peer-read route (LOOM_CUDA_IPC_PEER_READ=on: creation fails where it cannot
#            be taken) next to the cuda_ipc FIFOs (=off), interleaved: peer-read 2, FIFO 2,
#            peer-read 4, FIFO 4 (on host-sim, whose device memory does not cross processes,
#            =auto, which there takes the FIFOs)
#   dtypes   every collective (all-to-all(v), gather, scatter too) x dtype (fp8 included) x op on
#            device buffers, in and out of place, verified (loom-perf -c 1; the content of
#            scripts/loom-gpu-check's check): 2 and 3 ranks over cuda_ipc (the peer-read route
#            for allreduce, allgather, reduce_scatter, broadcast and reduce), 2 staged
#            (LOOM_TRANSPORTS=^cuda_ipc; --dtypes-paths chooses, e.g. "2 cuda_ipc,3 cuda_ipc")
#   sweeps   allreduce, allgather, reducescatter, broadcast on 1, 2 and 4 ranks sharing the GPU,
#            up to 256 MiB, device buffers next to host buffers, verified (#wrong 0): first the
#            targets' 2-rank allreduce (8 B by 2, in and out of place), then the rest (16 B by 4,
#            out of place)
#   stream   loom-stream-check on 2 and 4 ranks over cuda_ipc, 2 staged, 2 over cuda_ipc with
#            LOOM_STREAM_GATE=wait-value: a call on a stream returns at once (while the stream
#            is held, and while a long kernel runs) and runs in stream order; then 2-rank allreduces (int8, float; 8 B .. 1 MiB, verified) on the
#            device's default (legacy) stream, torch's (loom-perf --stream default), cuda_ipc and
#            staged
#   graph    loom-stream-check --graph: an allreduce captured into a CUDA graph (global, then
#            relaxed capture) and replayed, or "not supported" with the error
#   tests    loom-tests' device tags ([device], [cuda_ipc], [kernels]; host-run logic) next to a
#            real GPU
# --device host-sim (or LOOM_DEVICE=host-sim in the environment) runs the same steps on loom's
# host simulation with smaller sizes: it proves the script and the bundle, not the GPU.
# --bin: the programs (default: $GPU_BUNDLE/bin when env.sh was sourced, else build/bin).
# --only: a comma list of steps (bundle always runs). --pack DIR: after every run, copy
# results.tsv and summary.md to DIR and tar OUTDIR into DIR/first-light.tar.gz.
# --summary-only: run nothing; write summary.md again from OUTDIR's logs and results.tsv (e.g.
# from a first-light.tar.gz brought back from the GPU machine).
#
# OUTDIR gets one log per run, results.tsv (run, status, seconds, note) and summary.md (runs,
# targets, tables), whose compact form is printed at the end. Exit status: 0 every run passed (a
# missed speed target is reported, not an error; graph capture "not supported" neither); 1 a run
# failed (wrong value, error or timeout); 2 usage; 3 stopped early (no programs or no GPU).
set -u -o pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
out=""
device=${LOOM_DEVICE:-cuda}
[[ $device == host-sim ]] || device=cuda
bin=""
budget=420
only=""
pack=""
summary_only=0
dtypes_paths="2 cuda_ipc,2 staged,3 cuda_ipc"
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --dtypes-paths) dtypes_paths=$2; shift 2 ;;
    --summary-only) summary_only=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "gpu-first-light: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "gpu-first-light: one OUTDIR only" >&2; exit 2; }; out=$1; shift ;;
  esac
done
[[ -n $out ]] || { usage >&2; exit 2; }
[[ $device == cuda || $device == host-sim ]] || { echo "gpu-first-light: --device cuda or host-sim" >&2; exit 2; }
if [[ -z $bin ]]; then
  if [[ -n ${GPU_BUNDLE:-} ]]; then bin=$GPU_BUNDLE/bin; else bin=$(cd "$(dirname "$0")/.." && pwd)/build/bin; fi
fi
bin=$(cd "$bin" && pwd) || exit 2
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
[[ -z $pack ]] || { mkdir -p "$pack" && pack=$(cd "$pack" && pwd); } || exit 2
unset LOOM_DEVICE LOOM_TRANSPORTS  # each run sets what it needs
results=$out/results.tsv
[[ $summary_only -eq 1 ]] || : >"$results"
t_start=$(date +%s)
failed=0
gpu_line=""  # nvidia-smi's name, driver, memory, bus id (the device step, or the summary)

# Sizes: the GPU's, or small ones for the host simulation (logic, not speed).
if [[ $device == cuda ]]; then
  dt_sizes=(-b 0 -e 1M -f 8)
  kb_sizes=(-b 1M -e 1G -f 2)
  sw_max=256M
  stream_ms=1000
else
  dt_sizes=(-b 0 -e 64K -f 16)
  kb_sizes=(-b 1M -e 2M -f 2)
  sw_max=1M
  stream_ms=400
fi

wants() { [[ $1 == bundle && $only != none ]] || [[ -z $only || ",$only," == *",$1,"* ]]; }
elapsed() { echo $(($(date +%s) - t_start)); }

pack_results() {
  [[ -n $pack ]] || return 0
  cp "$results" "$pack/results.tsv" 2>/dev/null
  [[ -f $out/summary.md ]] && cp "$out/summary.md" "$pack/summary.md"
  tar czf "$pack/first-light.tar.gz.tmp" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null &&
    mv "$pack/first-light.tar.gz.tmp" "$pack/first-light.tar.gz"
}

# record NAME STATUS SECONDS NOTE
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"
  printf '%-36s %-13s %6ss  %s\n' "$1" "$2" "$3" "$4"
  [[ $2 == FAIL || $2 == TIMEOUT ]] && failed=$((failed + 1))
  pack_results
}

# run NAME LIMIT LOG CMD...: runs CMD under `timeout` (at most what is left of the budget, less
# `reserve`, the seconds kept for the steps after this one) with its output in OUTDIR/LOG and
# records PASS, FAIL (with the log's last line) or TIMEOUT; when less than 15 s are left, records
# SKIPPED instead. Sets rc. Commands that exit 4 are recorded NOT-SUPPORTED, 77 SKIPPED.
rc=0
reserve=0
run() {
  local name=$1 limit=$2 log=$3
  shift 3
  local left=$((budget - $(elapsed) - reserve))
  if ((left < 15)); then
    record "$name" SKIPPED 0 "the time budget ($budget s, $reserve s of it kept for later steps) is spent"
    rc=125
    return
  fi
  ((limit > left)) && limit=$left
  local t0 t1 status note
  t0=$(date +%s%N)
  timeout -k 5 "$limit" "$@" >"$out/$log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  case $rc in
    0) status=PASS note="" ;;
    4) status=NOT-SUPPORTED note=$(grep -m1 'not supported' "$out/$log") ;;
    77) status=SKIPPED note=$(tail -1 "$out/$log") ;;
    124 | 137) status=TIMEOUT note="no answer within $limit s" ;;
    *) status=FAIL note="exit $rc: $(grep -v '^\s*$' "$out/$log" | tail -1 | cut -c1-160)" ;;
  esac
  record "$name" "$status" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')" "${note:-$log}"
}

# perf_cmd LIMIT N ENV... -- loom-perf args: sets cmd to loom-perf on N ranks under loomrun
# (bounded by its own --timeout as well as run's).
cmd=()
perf_cmd() {
  local limit=$1 n=$2
  shift 2
  cmd=(env)
  while [[ $1 != -- ]]; do cmd+=("$1"); shift; done
  shift
  cmd+=("$bin/loomrun" -n "$n" --timeout "$((limit - 5))s" --only-rank 0 --no-prefix
    "$bin/loom-perf" "$@")
}

# Runs a command; exit 4 when it failed only by saying "not supported" (loomrun turns a rank's
# exit 4 into its own exit 1).
unsupported_is_4() {
  local o rc
  o=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$o"
  if [[ $rc -ne 0 ]] && grep -q 'not supported:' <<<"$o" && ! grep -q 'FAIL' <<<"$o"; then return 4; fi
  return $rc
}
export -f unsupported_is_4

stop_early() {
  echo "gpu-first-light: $1: the rest would be meaningless; stopping" >&2
  record "stopped" FAIL 0 "$1"
  write_summary
  exit 3
}

# ---- summary (functions; the steps follow)
# Rows of a loom-perf table: bytes, then per half time algbw busbw #wrong (fields 6-9, 10-13).
perf_rows() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/' "$@" 2>/dev/null; }

write_summary() {
  local s=$out/summary.md
  local pass fail other wrong
  pass=$(awk -F'\t' '$2 == "PASS"' "$results" | wc -l)
  fail=$(awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT"' "$results" | wc -l)
  other=$(awk -F'\t' '$2 != "PASS" && $2 != "FAIL" && $2 != "TIMEOUT"' "$results" | wc -l)
  wrong=$(cat "$out"/sweep-*.txt "$out"/dtypes-*.txt "$out"/routes-*.txt 2>/dev/null | perf_rows |
    awk '{ w += ($9 ~ /^[0-9]+$/ ? $9 : 0) + ($13 ~ /^[0-9]+$/ ? $13 : 0) } END { print w + 0 }')
  [[ -z $gpu_line && -f $out/gpu.txt ]] && gpu_line=$(cat "$out/gpu.txt")
  if [[ -z $gpu_line ]]; then
    gpu_line="host-sim (no GPU)"
    [[ $device == cuda ]] && gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>/dev/null | head -1)
  fi
  {
    echo "# loom first light ($device)"
    echo
    echo "- GPU: $gpu_line"
    # The routes step's table: out-of-place busbw of the peer-read route and the FIFOs, 2 and 4 ranks,
# with their ratio, and every run's #wrong (both halves).
routes_table() {
  local f n r any=0
  for f in "$out"/routes-allreduce-n*-*.txt; do [[ -f $f ]] && any=1; done
  [[ $any -eq 1 ]] || return 0
  echo
  echo "### Device allreduce: the peer-read route against the cuda_ipc FIFOs (busbw GB/s, out of place)"
  echo
  echo "| bytes | peer-read n2 | FIFO n2 | ratio | peer-read n4 | FIFO n4 | ratio |"
  echo "|---|---|---|---|---|---|---|"
  for n in 2 4; do
    for r in peer-read fifo; do
      f=$out/routes-allreduce-n$n-$r.txt
      [[ -f $f ]] && perf_rows "$f" | awk -v k="$r$n" '{ print k, $1, $8 }'
    done
  done | awk '{ v[$1, $2] = $3; s[$2] = 1 }
    function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "" }
    END { n = 0; for (b in s) k[++n] = b + 0
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (k[j] < k[i]) { t = k[i]; k[i] = k[j]; k[j] = t }
          for (i = 1; i <= n; i++) { b = k[i]
            printf "| %d | %s | %s | %s | %s | %s | %s |\n", b, v["peer-read2", b], v["fifo2", b],
              ratio(v["peer-read2", b], v["fifo2", b]), v["peer-read4", b], v["fifo4", b],
              ratio(v["peer-read4", b], v["fifo4", b]) } }'
  echo
  for f in "$out"/routes-allreduce-n*-*.txt; do
    [[ -f $f ]] || continue
    echo "- $(basename "$f" .txt): #wrong $(perf_rows "$f" | awk '{ w += $9 + $13 } END { print w + 0 }')$(grep -m1 -o 'peer-read route, LOOM_CUDA_IPC_PEER_READ=[a-z]*' "$f" | sed 's/^/; /')"
  done
}

if [[ $summary_only -eq 1 ]]; then
      echo "- summary written again from the logs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    else
      echo "- when: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(elapsed) s of a $budget s budget"
    fi
    [[ -n ${GPU_BUNDLE:-} && -f $GPU_BUNDLE/MANIFEST ]] && sed -n '2p;5,6p' "$GPU_BUNDLE/MANIFEST" | sed 's/^/- /'
    echo "- runs: $pass passed, $fail failed, $other other (skipped / not supported); #wrong elements in every sweep and dtype table: $wrong"
    echo
    echo "| run | status | s | note |"
    echo "|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$results"
    echo
    targets
  } >"$s"
}

# The issue's targets, from kernels.txt and the 2-rank allreduce sweeps.
targets() {
  local k=$out/kernels.txt judged=yes
  [[ $device == cuda ]] || judged="no: host-sim is no speed figure"
  echo "## Targets (judged: $judged)"
  echo
  if [[ -f $k ]]; then
    awk -v judged="$judged" '
      $2 == "copy" { copy[$1] = $5 }
      $3 == "sum" && $1 == 268435456 { pct[$2] = $6 }
      END {
        f = pct["float"]; b = pct["bfloat16"]; h = pct["half"]
        ok = (f + 0 >= 80 && b + 0 >= 80)
        printf "- kernel sum at 256 MiB >= 80%% of the device-to-device copy (copy %s GB/s): fp32 %s, bf16 %s (fp16 %s): %s\n",
          (268435456 in copy) ? copy[268435456] : "n/a", f == "" ? "n/a" : f, b == "" ? "n/a" : b,
          h == "" ? "n/a" : h, judged != "yes" ? "not judged" : (f == "" ? "NOT MEASURED" : (ok ? "MET" : "MISSED"))
      }' "$k"
  else
    echo "- kernel sum vs copy: not measured"
  fi
  local dev=$out/sweep-allreduce-n2-device.txt host=$out/sweep-allreduce-n2-host.txt
  local read2=$out/routes-allreduce-n2-peer-read.txt
  [[ -f $read2 ]] || read2=$dev  # the sweeps take the peer-read route too, where it applies
  if [[ -f $read2 && -f $k ]]; then
    { awk '$2 == "copy" { print "copy", $1, $5 }' "$k"; perf_rows "$read2" | awk '{ print "dev", $1, $8 }'; } |
      awk -v judged="$judged" -v file="$(basename "$read2")" '
        $1 == "copy" { copy[$2] = $3 / 2 }  # bytes copied per second, GB/s
        $1 == "dev" && $2 >= 67108864 { n++; if ($2 in copy) { r = $3 / copy[$2]; if (min == "" || r < min) { min = r; at = $2 } } }
        END {
          if (min == "") { print "- 2-rank device allreduce busbw >= 40% of the copy throughput from 64 MiB: NOT MEASURED"; exit }
          printf "- 2-rank device allreduce busbw (%s) >= 40%% of the copy throughput (bytes copied/s) from 64 MiB (50%% is the bound): worst %.0f%% at %d B: %s\n",
            file, 100 * min, at, judged != "yes" ? "not judged" : (min >= 0.4 ? "MET" : "MISSED")
        }'
  else
    echo "- 2-rank device allreduce vs copy throughput: not measured"
  fi
  if [[ -f $dev && -f $host ]]; then
    { perf_rows "$dev" | awk '{ print "dev", $1, $8 }'; perf_rows "$host" | awk '{ print "host", $1, $8 }'; } |
      awk -v judged="$judged" '
        $1 == "dev" { d[$2] = $3 } $1 == "host" { h[$2] = $3 }
        END {
          for (b in d) if (b + 0 >= 1048576 && (b in h) && h[b] > 0) { r = d[b] / h[b]; if (min == "" || r < min) { min = r; at = b } }
          if (min == "") { print "- 2-rank allreduce, device not slower than host buffers from 1 MiB: NOT MEASURED"; exit }
          printf "- 2-rank allreduce, device buffers not slower than host buffers from 1 MiB: worst device/host busbw %.2f at %d B: %s\n",
            min, at, judged != "yes" ? "not judged" : (min >= 1 ? "MET" : "MISSED")
        }'
  else
    echo "- 2-rank allreduce, device vs host buffers: not measured"
  fi
  local sr
  sr=$(awk -F'\t' '$1 ~ /^stream:/ { print $1 " " $2 }' "$results" | paste -sd, -)
  echo "- a collective on a stream does not block the calling thread: ${sr:-not run}"
  sr=$(awk -F'\t' '$1 ~ /^graph:/ { print $1 " " $2 }' "$results" | paste -sd, -)
  echo "- CUDA graph capture of an allreduce: ${sr:-not run}"
  if [[ -f $dev && -f $host ]]; then
    echo
    echo "### 2-rank allreduce busbw (GB/s, out of place) from 1 MiB"
    echo
    echo "| bytes | device | host | copy (bytes copied/s) |"
    echo "|---|---|---|---|"
    { [[ -f $k ]] && awk '$2 == "copy" { print "copy", $1, $5 / 2 }' "$k"
      perf_rows "$dev" | awk '{ print "dev", $1, $8 }'; perf_rows "$host" | awk '{ print "host", $1, $8 }'; } |
      awk '{ v[$1, $2] = $3; if ($1 != "copy" && $2 >= 1048576) s[$2] = 1 }
        END { n = 0; for (b in s) k[++n] = b + 0
              for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (k[j] < k[i]) { t = k[i]; k[i] = k[j]; k[j] = t }
              for (i = 1; i <= n; i++) printf "| %d | %s | %s | %s |\n", k[i], v["dev", k[i]], v["host", k[i]], (("copy", k[i]) in v) ? v["copy", k[i]] : "" }'
  fi
  routes_table
  if [[ -f $k ]]; then
    echo
    echo "### Reduction kernels against a device-to-device copy (loom-kernel-bench)"
    echo
    echo '```'
    grep -v '^# loom-kernel-bench' "$k"
    echo '```'
  fi
}

if [[ $summary_only -eq 1 ]]; then
  [[ -f $results ]] || { echo "gpu-first-light: no $results to summarise" >&2; exit 2; }
  budget=0 only=none  # every step below is left out
  failed=$(awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT"' "$results" | wc -l)
fi

# ---- bundle
wants bundle && run "bundle: programs start" 30 bundle.txt bash -c "
  set -e; for p in loom-info loom-perf loom-kernel-bench loom-stream-check loom-ipc-probe loomrun loom-tests; do
    test -x '$bin/'\$p || { echo \"missing: '$bin/'\$p\"; exit 1; }; done
  '$bin/loom-info' --version; echo LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-}; echo libstdc++: \${GPU_BUNDLE_CXX:-host}
  '$bin/loom-perf' --help >/dev/null; '$bin/loom-kernel-bench' --help >/dev/null
  '$bin/loom-tests' --help >/dev/null; uname -a; ldd --version | head -1"
[[ $rc -eq 0 ]] || stop_early "the programs do not start (see bundle.txt)"

# ---- device
if wants device; then
  if [[ $device == cuda ]]; then
    run "device: nvidia-smi" 60 device-nvidia-smi.txt bash -c \
      'nvidia-smi && nvidia-smi -L || exit 1; nvidia-smi topo -m; nvidia-smi -q -d CLOCK,MEMORY,COMPUTE,PERFORMANCE
       nvcc --version; nproc; free -g; df -h /dev/shm /tmp; ulimit -a; exit 0'
    gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>/dev/null | head -1)
    [[ -n $gpu_line ]] || stop_early "nvidia-smi sees no GPU"
    echo "$gpu_line" >"$out/gpu.txt"
  fi
  run "device: loom-info" 60 device-loom-info.txt bash -c \
    "LOOM_DEVICE=$device '$bin/loom-info' --transports && LOOM_DEVICE=$device '$bin/loom-info' --settings && '$bin/loom-info' --topology"
  if [[ $device == cuda && $rc -ne 0 ]]; then stop_early "loom cannot use the GPU (see device-loom-info.txt)"; fi
fi

# ---- kernels: reduction kernels against a device-to-device copy
reserve=$((budget * 70 / 100))  # ipc, routes, dtypes, sweeps, stream, graph
if wants kernels; then
  run "kernels: sum vs copy" 150 kernels.txt "$bin/loom-kernel-bench" --device "$device" \
    "${kb_sizes[@]}" -n 20 -d float,bfloat16,half -o sum
fi

# ---- ipc: CUDA IPC between two processes on the GPU, without loom (a real GPU only)
reserve=$((budget * 60 / 100))
if wants ipc && [[ $device == cuda ]]; then
  run "ipc: two processes, one GPU" 60 ipc-probe.txt "$bin/loom-ipc-probe"
fi

# ---- routes: the peer-read route against the cuda_ipc FIFOs, device allreduce, 2 and 4 ranks
reserve=$((budget * 30 / 100))
if wants routes; then
  peer_read=on
  [[ $device == cuda ]] || peer_read=auto  # host-sim's device memory does not cross processes
  for n in 2 4; do
    for route in peer-read fifo; do
      setting=$peer_read
      [[ $route == fifo ]] && setting=off
      perf_cmd 45 "$n" LOOM_DEBUG=INFO LOOM_CUDA_IPC_PEER_READ=$setting -- allreduce \
        --device "$device" -b 8 -e "$sw_max" -f 4 -n 10 -w 3 -c 1
      run "routes: allreduce n$n $route" 45 "routes-allreduce-n$n-$route.txt" "${cmd[@]}"
    done
  done
fi

# ---- dtypes: every collective x dtype x op, verified
reserve=$((budget * 10 / 100))  # the sweeps, stream, graph
if wants dtypes; then
  IFS=, read -ra specs <<<"$dtypes_paths"
  for spec in "${specs[@]}"; do
    read -r n path <<<"$spec"
    trs=()
    [[ $path == staged ]] && trs=(LOOM_TRANSPORTS=^cuda_ipc)
    for coll in allreduce reducescatter allgather broadcast reduce alltoall alltoallv gather \
      scatter; do
      ops=()
      [[ $coll == allreduce || $coll == reducescatter || $coll == reduce ]] && ops=(-o all)
      root=()
      [[ $coll == broadcast || $coll == reduce || $coll == gather || $coll == scatter ]] &&
        root=(-r 1)
      perf_cmd 60 "$n" LOOM_DEBUG=INFO "${trs[@]}" -- "$coll" --device "$device" -d all \
        "${ops[@]}" "${root[@]}" "${dt_sizes[@]}" -n 1 -w 1 -c 1
      run "dtypes: $coll n$n $path" 60 "dtypes-$coll-n$n-$path.txt" "${cmd[@]}"
    done
  done
fi


# ---- sweeps: device buffers next to host buffers
reserve=$((budget * 3 / 100))
if wants sweeps; then
  sweep() { # COLL N BUF ARGS...
    local coll=$1 n=$2 buf=$3
    shift 3
    local dev=()
    [[ $buf == device ]] && dev=(--device "$device")
    perf_cmd 75 "$n" LOOM_DEBUG=WARN -- "$coll" "${dev[@]}" -e "$sw_max" -c 1 "$@"
    run "sweeps: $coll n$n $buf" 75 "sweep-$coll-n$n-$buf.txt" "${cmd[@]}"
  }
  # The targets' runs first (8 B .. max by 2, both halves, more iterations), then the rest out of
  # place, 16 B .. max by 4.
  sweep allreduce 2 device -b 8 -f 2 -n 10 -w 3
  sweep allreduce 2 host -b 8 -f 2 -n 10 -w 3
  for coll in allreduce allgather reducescatter broadcast; do
    for n in 1 2 4; do
      for buf in device host; do
        [[ $coll == allreduce && $n == 2 ]] && continue
        sweep "$coll" "$n" "$buf" -b 16 -f 4 -n 5 -w 2 --outofplace-only
      done
    done
  done
fi

# ---- stream semantics
reserve=0
if wants stream; then
  for spec in "2 cuda_ipc" "4 cuda_ipc" "2 staged" "2 wait-value"; do
    read -r n path <<<"$spec"
    trs=()
    [[ $path == staged ]] && trs=(LOOM_TRANSPORTS=^cuda_ipc)
    [[ $path == wait-value ]] && trs=(LOOM_STREAM_GATE=wait-value)  # cuda_ipc, the other gate
    run "stream: n$n $path" 90 "stream-n$n-$path.txt" env LOOM_DEBUG=INFO "${trs[@]}" \
      "$bin/loomrun" -n "$n" --timeout 80s "$bin/loom-stream-check" --device "$device" \
      --ms "$stream_ms"
  done
  # The device's default (legacy) stream, torch's: the stream of the torch call that timed out on
  # 2026-11-30, here without torch.
  for path in cuda_ipc staged; do
    trs=()
    [[ $path == staged ]] && trs=(LOOM_TRANSPORTS=^cuda_ipc)
    perf_cmd 40 2 LOOM_DEBUG=INFO "${trs[@]}" -- allreduce --device "$device" --stream default \
      -d int8,float -b 8 -e 1M -f 8 -n 3 -w 1 -c 1
    run "stream: default stream n2 $path" 40 "stream-default-n2-$path.txt" "${cmd[@]}"
  done
fi

# ---- CUDA graph capture
if wants graph; then
  for mode in global relaxed; do
    run "graph: $mode capture" 60 "graph-$mode.txt" bash -c 'unsupported_is_4 "$@"' _ \
      "$bin/loomrun" -n 2 --timeout 55s "$bin/loom-stream-check" --device "$device" --graph "$mode"
  done
fi

# ---- unit tests of the device logic, next to a real GPU
reserve=0
if wants tests; then
  if [[ $device == cuda ]]; then
    run "tests: [device],[cuda_ipc],[kernels]" 120 tests.txt \
      env LOOM_TEST_FAKE_NVML="$bin/../lib/libfake-nvml.so" "$bin/loom-tests" \
      "[device],[cuda_ipc],[kernels]"
  else
    run "tests: [cuda_ipc]" 120 tests.txt "$bin/loom-tests" "[cuda_ipc]"
  fi
fi

# ---- summary
write_summary
pack_results
echo
echo "==== first light ($device): $(elapsed) s; summary in $out/summary.md"
sed -n '3,5p' "$out/summary.md"
sed -n '/^## Targets/,$p' "$out/summary.md"
awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT" { print "  " $2 ": " $1 ": " $4 }' "$results"
if [[ $failed -ne 0 ]]; then
  echo "==== FAILED: $failed run(s)"
  exit 1
fi
skipped=$(awk -F'\t' '$2 == "SKIPPED"' "$results" | wc -l)
if [[ $skipped -ne 0 ]]; then
  echo "==== every run that ran passed; $skipped run(s) skipped"
else
  echo "==== every run passed"
fi
