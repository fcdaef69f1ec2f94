#!/usr/bin/env bash
# The network path (tcp and ofi) against its bound and the baselines, side by side in one run
# (about 5 minutes on 2 cores):
#   1. the loopback two-direction ceiling (both directions busy at once), the bound for a ring;
#   2. loom-perf allreduce --compare-transports ofi,tcp at 2 and 4 ranks (ofi over tcp;ofi_rxm,
#      all on the network path: LOOM_TRANSPORTS forces it, so no shm);
#   3. loom over tcp vs Open MPI's TCP BTL vs Gloo (benchmarks/compare.py), 2 and 4 ranks;
#   4. loom over ofi (tcp;ofi_rxm) vs the same baselines;
#   5. the progress threads forced on (LOOM_TCP_THREADS=1, LOOM_OFI_PROGRESS_THREAD=1; on 2 cores
#      the automatic choice is none), 2 ranks, so their effect here is visible;
#   6. a summary: every target of the network path (tcp >= 1.5x Open MPI TCP from 16 MiB, ahead of Gloo at
#      every size, 8 B latency no worse than Open MPI TCP, ofi within 20% of tcp) with its
#      measured value, and every large-message busbw as a fraction of the ceiling.
# Usage: benchmarks/measure/network_path.sh [BUILD_DIR]   (default build/; needs loom-perf, loomrun and
# the baselines built: scripts/build.sh -DLOOM_BUILD_BENCHMARKS=ON)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
BIN=$BUILD/bin
SIZES="-b 8 -e 256M -f 8"
ROUNDS=${ROUNDS:-3}  # compare.py runs loom and the baselines in turn ROUNDS times: medians
export LOOM_OFI_PROVIDER="tcp;ofi_rxm"

echo "== 1. loopback ceilings: N processes in a TCP ring, each sending and receiving at once"
# A ring allreduce on N ranks can move no more per link than N loopback streams carry when all
# run at once on this machine's CPUs (N = 2: both directions of one pair). 4 MiB writes, 3 s,
# Python sockets: a lower bound of the kernel's ceiling. Writes "N GB/s" lines.
: >/tmp/network-path-ceiling
for n in 2 4; do
python3 - "$n" <<'PY'
import multiprocessing as mp, socket, sys, threading, time
N, SECS = int(sys.argv[1]), 3.0
def member(lsock, next_addr, q):
    buf, view = bytearray(4 << 20), bytearray(4 << 20)
    out = socket.create_connection(next_addr)
    inc, _ = lsock.accept()
    stop, got = [False], [0]
    def send():
        while not stop[0]:
            out.sendall(buf)
        out.shutdown(socket.SHUT_WR)
    def recv():
        while (k := inc.recv_into(view)) > 0:
            got[0] += k
    ts = [threading.Thread(target=send), threading.Thread(target=recv)]
    t0 = time.time(); [t.start() for t in ts]; time.sleep(SECS); stop[0] = True
    [t.join() for t in ts]
    q.put(got[0] / (time.time() - t0) / 1e9)
listeners = []
for _ in range(N):
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1); listeners.append(l)
q = mp.Queue()
ps = [mp.Process(target=member, args=(listeners[i], listeners[(i + 1) % N].getsockname(), q))
      for i in range(N)]
[p.start() for p in ps]; rates = [q.get() for _ in ps]; [p.join() for p in ps]
print(f"{N} processes: per stream {min(rates):.2f}-{max(rates):.2f} GB/s, all at once")
open("/tmp/network-path-ceiling", "a").write(f"{N} {min(rates):.3f}\n")
PY
done

for n in 2 4; do
  echo
  echo "== 2. loom-perf allreduce, $n ranks: ofi (tcp;ofi_rxm) vs tcp, same sweep, verified"
  "$BIN/loomrun" -n $n -- "$BIN/loom-perf" allreduce $SIZES -n 10 -w 3 \
    --compare-transports ofi,tcp --json "/tmp/network-path-compare-$n.json" | sed 's/^\[0\] //'
  python3 benchmarks/plot_busbw.py "/tmp/network-path-compare-$n.json" "/tmp/network-path-busbw-$n.svg" || true
done

echo
echo "== 3. loom over tcp vs Open MPI TCP BTL vs Gloo (ratios: loom / baseline)"
python3 benchmarks/compare.py --bin-dir "$BIN" --ranks 2,4 --sizes "$SIZES" --iters 10 --repeat "$ROUNDS" \
  --loom-env "LOOM_TRANSPORTS=tcp" --baselines mpi-tcp,gloo --out /tmp/network-path-tcp.md

echo
echo "== 4. loom over ofi (tcp;ofi_rxm) vs Open MPI TCP BTL vs Gloo"
python3 benchmarks/compare.py --bin-dir "$BIN" --ranks 2,4 --sizes "$SIZES" --iters 10 --repeat "$ROUNDS" \
  --loom-env "LOOM_TRANSPORTS=ofi LOOM_OFI_FALLBACK=false" --baselines mpi-tcp,gloo \
  --out /tmp/network-path-ofi.md

echo
echo "== 5. progress threads forced on, 2 ranks: ofi vs tcp (compare with section 2)"
LOOM_TCP_THREADS=1 LOOM_OFI_PROGRESS_THREAD=1 "$BIN/loomrun" -n 2 -- "$BIN/loom-perf" allreduce \
  -b 8 -e 256M -f 32 -n 10 -w 3 --compare-transports ofi,tcp | sed 's/^\[0\] //'

echo
echo "== 6. summary against the network path's targets"
python3 benchmarks/measure/network_path_summary.py /tmp/network-path-ceiling /tmp/network-path-tcp.md \
  /tmp/network-path-ofi.md
echo
echo "plots: /tmp/network-path-busbw-2.svg /tmp/network-path-busbw-4.svg"
