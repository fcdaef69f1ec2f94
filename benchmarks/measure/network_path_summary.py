#!/usr/bin/env python3
"""Summary of benchmarks/measure/network_path.sh: reads the loopback ceilings (per rank count: what N
loopback streams in a ring carry each, all at once) and the markdown tables benchmarks/compare.py
wrote for loom over tcp and over ofi, and prints each network-path target with the measured value
(PASS / MISS) and every busbw from 16 MiB, loom's and Open MPI's, as a fraction of the ceiling.
Usage: network_path_summary.py CEILING_FILE TCP_MD OFI_MD"""
import re
import sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse(path):
    """{ranks: {size: {column: value}}} from compare.py's markdown (first table per rank count)."""
    out, ranks, head = {}, None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"### allreduce, fp32 sum, (\d+) ranks", line)
            if m:
                ranks, head = int(m.group(1)), None
                continue
            if ranks is None or not line.startswith("|") or "---" in line:
                if line.startswith("Out-of-place"):
                    ranks = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if head is None:
                head = cells
                continue
            num, unit = cells[0].split()
            size = int(num) * UNITS[unit]
            row = {}
            for k, v in zip(head[1:], cells[1:]):
                try:
                    row[k] = float(v.split()[0])
                except ValueError:
                    pass
            out.setdefault(ranks, {})[size] = row
    return out


def verdict(ok):
    return "PASS" if ok else "MISS"


def main(argv):
    ceilings = {}
    for line in open(argv[1], encoding="utf-8"):
        n, gbs = line.split()
        ceilings[int(n)] = float(gbs)
    tcp, ofi = parse(argv[2]), parse(argv[3])
    big = 16 << 20
    for n in sorted(tcp):
        rows = tcp[n]
        ceiling = ceilings.get(n, ceilings[max(ceilings)])
        print(f"\n{n} ranks, loom over tcp (ceiling: {n} loopback streams at once carry "
              f"{ceiling:.2f} GB/s each):")
        for size in sorted(s for s in rows if s >= big):
            r = rows[size]
            ratio = r.get("loom/MPI-tcp", 0.0)
            mpi = r.get("MPI-tcp busbw", 0.0)
            print(f"  {size >> 20:>4} MiB  busbw {r['loom busbw (GB/s)']:.2f} GB/s = "
                  f"{r['loom busbw (GB/s)'] / ceiling:.2f} of the ceiling; "
                  f"vs Open MPI TCP {ratio:.2f}x (target 1.5x: {verdict(ratio >= 1.5)}; "
                  f"Open MPI = {mpi / ceiling:.2f} of the ceiling)")
        behind = [s for s, r in rows.items() if r.get("loom/Gloo", 0.0) < 1.0]
        print(f"  ahead of Gloo at every size: {verdict(not behind)}"
              + (f" (behind at {sorted(behind)})" if behind else ""))
        small = min(rows)
        lat, mpi = rows[small]["loom time (us)"], rows[small].get("loom/MPI-tcp", 0.0)
        print(f"  {small} B latency {lat:.1f} us, Open MPI TCP / loom = {mpi:.2f} "
              f"(target no worse, >= 1: {verdict(mpi >= 1.0)})")
        if n in ofi:
            print(f"{n} ranks, loom over ofi (tcp;ofi_rxm) vs loom over tcp:")
            for size in sorted(s for s in ofi[n] if s >= big and s in rows):
                o, t = ofi[n][size]["loom busbw (GB/s)"], rows[size]["loom busbw (GB/s)"]
                f = o / t if t > 0 else 0.0
                print(f"  {size >> 20:>4} MiB  ofi {o:.2f} / tcp {t:.2f} GB/s = {f:.2f} "
                      f"(target >= 0.8: {verdict(f >= 0.8)}); ofi = {o / ceiling:.2f} of the "
                      f"ceiling")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
